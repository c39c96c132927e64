//! A horizon (`horizon.rs`) as a model file carries it: read for the
//! network for committed choices under EASY alone, and refused, naming its
//! key, when it is not a positive share or when the file carries no such
//! network for it to apply to.

use slurp_fair::model::COMMITTED_EASY_HORIZON;
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

#[test]
fn a_malformed_or_unplaced_horizon_is_refused_naming_its_key() {
    let main = by_feature(3, 1.0);
    for (easy, value, why) in [
        (true, "0", "is not a horizon"),
        (true, "half", "is not a horizon"),
        (true, "-0.5", "is not a horizon"),
        // Only a network for EASY alone keeps choices a horizon is for.
        (false, "0.5", "carries no `slurp.committed.easy` network"),
    ] {
        let mut notes: Vec<(&str, String)> = export::committed_notes(&main, Sight::V3, easy).into();
        notes.push((COMMITTED_EASY_HORIZON, value.into()));
        let err = model(&main, &notes).unwrap_err();
        assert!(matches!(err, ModelError::Horizon { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "m.onnx: its horizon (metadata `{COMMITTED_EASY_HORIZON}`) cannot be used"
            )) && text.contains(why),
            "{value}: {text}"
        );
    }
}

/// A search of the network for committed choices under EASY plays it alone,
/// as a model's own network, with its start's horizon (`with_horizon`):
/// so played, fair-v10's network with fair-v11's horizon makes fair-v11's
/// schedule, which differs from fair-v10's where a far reservation was kept
/// (the window of `gen:quiet:6` its card tells of), and without
/// backfilling, where no horizon is read, does not.
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
