//! A horizon (`horizon.rs`) as a model file carries it: read for the
//! network for committed choices it is under the key of (without
//! backfilling, and under EASY where that network serves there too; or
//! under EASY alone), and refused, naming its key, when it is not a
//! positive share or when the file carries no such network for it to apply
//! to.

use slurp_fair::model::{COMMITTED_EASY_HORIZON, COMMITTED_HORIZON};
use slurp_fair::{ModelError, Sight, export};

mod common;
use common::{by_feature, model};

#[test]
fn a_horizon_belongs_to_the_network_for_committed_easy_choices() {
    let main = by_feature(3, 1.0);
    let mut notes: Vec<(&str, String)> = export::committed_notes(&main, Sight::V3, true).into();
    notes.push((COMMITTED_EASY_HORIZON, "0.5".into()));
    let m = model(&main, &notes).unwrap();
    assert_eq!(m.committed(true).horizon().map(|h| h.share), Some(0.5));
    assert_eq!(m.horizon(), None, "the model's own network has none");
    assert_eq!(m.committed(false).horizon(), None);
}

/// The network for committed choices keeps its horizon wherever it
/// chooses: without backfilling, and under EASY when the model has no
/// network of its own there.
#[test]
fn a_committed_horizon_belongs_to_the_network_for_committed_choices() {
    let main = by_feature(3, 1.0);
    let mut notes: Vec<(&str, String)> = export::committed_notes(&main, Sight::V3, false).into();
    notes.push((COMMITTED_HORIZON, "0.25".into()));
    let m = model(&main, &notes).unwrap();
    assert_eq!(m.committed(false).horizon().map(|h| h.share), Some(0.25));
    assert_eq!(m.committed(true).horizon().map(|h| h.share), Some(0.25));
    assert_eq!(m.horizon(), None, "the model's own network has none");
    // With a network of its own for EASY, each keeps its own.
    let mut both = notes.clone();
    both.extend(export::committed_notes(&main, Sight::V3, true));
    both.push((COMMITTED_EASY_HORIZON, "0.5".into()));
    let m = model(&main, &both).unwrap();
    assert_eq!(m.committed(false).horizon().map(|h| h.share), Some(0.25));
    assert_eq!(m.committed(true).horizon().map(|h| h.share), Some(0.5));
}

#[test]
fn a_malformed_or_unplaced_horizon_is_refused_naming_its_key() {
    let main = by_feature(3, 1.0);
    for (key, easy, value, why) in [
        (COMMITTED_EASY_HORIZON, true, "0", "is not a horizon"),
        (COMMITTED_EASY_HORIZON, true, "half", "is not a horizon"),
        (COMMITTED_EASY_HORIZON, true, "-0.5", "is not a horizon"),
        (COMMITTED_HORIZON, false, "inf", "is not a horizon"),
        // Each key's network must be there: a horizon on the model's own
        // network (slurp's model, real runs) would be read by nothing.
        (
            COMMITTED_EASY_HORIZON,
            false,
            "0.5",
            "carries no `slurp.committed.easy` network",
        ),
        (
            COMMITTED_HORIZON,
            true,
            "0.5",
            "carries no `slurp.committed` network",
        ),
    ] {
        let mut notes: Vec<(&str, String)> = export::committed_notes(&main, Sight::V3, easy).into();
        notes.push((key, value.into()));
        let err = model(&main, &notes).unwrap_err();
        assert!(matches!(err, ModelError::Horizon { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "m.onnx: its horizon (metadata `{key}`) cannot be used"
            )) && text.contains(why),
            "{key} {value}: {text}"
        );
    }
}

/// A search of the network for committed choices under EASY plays it alone,
/// as a model's own network, with its start's horizon (`with_horizon`):
/// so played, fair-v10's network with fair-v11's horizon makes fair-v11's
/// schedule, which differs from fair-v10's where a far reservation was kept
/// (the window of `gen:quiet:6` its card tells of), and without
/// backfilling, where fair-v11 has no horizon, does not.
#[test]
fn a_network_played_alone_with_a_horizon_schedules_as_the_model_it_came_from() {
    use slurp_fair::rollout;
    use slurp_sim::generate::{Family, generate};
    use slurp_sim::{Machine, Window, Workload};

    let trace = generate(&Family::Quiet.spec(10_000), 6);
    let workload = Workload::new(&trace, Machine::of(&trace).unwrap());
    let window = Window {
        start: 7303,
        len: 1024,
    };
    let v10 = slurp_fair::built_in("fair-v10").unwrap();
    let v11 = slurp_fair::built_in("fair-v11").unwrap();
    let horizon = v11.committed(true).horizon();
    assert!(horizon.is_some());
    let alone = v10.committed(true).clone().with_horizon(horizon);
    let order = |m: &slurp_fair::Model, backfill: bool| {
        rollout::replay(m, &workload, window, backfill, None)
            .unwrap()
            .order
    };
    assert_eq!(order(&alone, true), order(&v11, true));
    assert_ne!(order(&v11, true), order(&v10, true));
    assert_eq!(
        order(&alone.clone().with_horizon(None), true),
        order(&v10, true)
    );
    assert_eq!(order(&v11, false), order(&v10, false));
}

/// The same for the network for committed choices without backfilling:
/// fair-v11's network played alone with fair-v12's horizon makes fair-v12's
/// schedule, which differs from fair-v11's on a window of
/// `gen:saturated:799` where fair-v11 idled the machine for jobs it could
/// not start for a long time; under EASY, where fair-v12's choices are
/// fair-v11's, the two schedule alike.
#[test]
fn a_network_for_committed_choices_played_alone_with_a_horizon_schedules_as_the_model() {
    use slurp_fair::rollout;
    use slurp_sim::generate::{Family, generate};
    use slurp_sim::{Machine, Window, Workload};

    let trace = generate(&Family::Saturated.spec(10_000), 799);
    let workload = Workload::new(&trace, Machine::of(&trace).unwrap());
    let window = Window {
        start: 3000,
        len: 1024,
    };
    let v11 = slurp_fair::built_in("fair-v11").unwrap();
    let v12 = slurp_fair::built_in("fair-v12").unwrap();
    let horizon = v12.committed(false).horizon();
    assert!(horizon.is_some());
    let alone = v11.committed(false).clone().with_horizon(horizon);
    let order = |m: &slurp_fair::Model, backfill: bool| {
        rollout::replay(m, &workload, window, backfill, None)
            .unwrap()
            .order
    };
    assert_eq!(order(&alone, false), order(&v12, false));
    assert_ne!(order(&v12, false), order(&v11, false));
    assert_eq!(order(&v12, true), order(&v11, true));
}
