//! A backlog rule (`backlog.rs`) as a model file carries it: read for the
//! network for committed choices it is under the key of, refused, naming
//! its key, when it is malformed or has no network or no shortlist to
//! widen; and in a replay, the wider margin played exactly while the queue
//! is deep.

use slurp_fair::model::{
    COMMITTED_BACKLOG, COMMITTED_EASY_BACKLOG, COMMITTED_EASY_SHORTLIST, COMMITTED_SHORTLIST,
};
use slurp_fair::{ModelError, Sight, export};

mod common;
use common::{by_feature, model};

#[test]
fn a_backlog_rule_belongs_to_the_network_for_committed_choices_it_is_under() {
    let main = by_feature(3, 1.0);
    let mut notes: Vec<(&str, String)> = export::committed_notes(&main, Sight::V3, false).into();
    notes.push((COMMITTED_SHORTLIST, "f1:64".into()));
    notes.push((COMMITTED_BACKLOG, "512:256".into()));
    let m = model(&main, &notes).unwrap();
    let rule = |m: &slurp_fair::Model| m.backlog().map(|b| (b.jobs, b.margin));
    // Without backfilling, and under EASY, where that network serves too.
    assert_eq!(rule(m.committed(false)), Some((512, 256.0)));
    assert_eq!(rule(m.committed(true)), Some((512, 256.0)));
    assert_eq!(rule(&m), None, "the model's own network has none");
    // With a network of its own for EASY, each keeps its own.
    let mut both = notes.clone();
    both.extend(export::committed_notes(&main, Sight::V3, true));
    both.push((COMMITTED_EASY_SHORTLIST, "sjf:8".into()));
    let m = model(&main, &both).unwrap();
    assert_eq!(rule(m.committed(false)), Some((512, 256.0)));
    assert_eq!(rule(m.committed(true)), None);
    both.push((COMMITTED_EASY_BACKLOG, "64:100".into()));
    let m = model(&main, &both).unwrap();
    assert_eq!(rule(m.committed(true)), Some((64, 100.0)));
}

#[test]
fn a_malformed_or_unplaced_backlog_rule_is_refused_naming_its_key() {
    let main = by_feature(3, 1.0);
    for (key, easy, shortlist, value, why) in [
        (COMMITTED_BACKLOG, false, true, "512", "is not JOBS:MARGIN"),
        (COMMITTED_BACKLOG, false, true, "0:256", "must be 1 or more"),
        (COMMITTED_BACKLOG, false, true, "512:-1", "margin must be"),
        // Its network must be there.
        (
            COMMITTED_EASY_BACKLOG,
            false,
            true,
            "512:256",
            "carries no `slurp.committed.easy` network",
        ),
        (
            COMMITTED_BACKLOG,
            true,
            true,
            "512:256",
            "carries no `slurp.committed` network",
        ),
        // And a shortlist there for the rule to widen.
        (
            COMMITTED_BACKLOG,
            false,
            false,
            "512:256",
            "has no shortlist for it to widen",
        ),
    ] {
        let mut notes: Vec<(&str, String)> = export::committed_notes(&main, Sight::V3, easy).into();
        if shortlist {
            let list = if easy {
                COMMITTED_EASY_SHORTLIST
            } else {
                COMMITTED_SHORTLIST
            };
            notes.push((list, "f1:64".into()));
        }
        notes.push((key, value.into()));
        let err = model(&main, &notes).unwrap_err();
        assert!(matches!(err, ModelError::Backlog { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "m.onnx: its backlog rule (metadata `{key}`) cannot be used"
            )) && text.contains(why),
            "{key} {value}: {text}"
        );
    }
}

/// fair-v12 with its committed network's rule rewritten, replaying a long
/// window of a saturated workload without backfilling. A count no queue
/// reaches schedules as fair-v12; one every queue the network sees exceeds
/// (a queue of one is no choice), as fair-v12 with the wide margin for
/// good; one between, as neither: the rule
/// switches the margin within one replay. Under EASY, where fair-v12 has a
/// network of its own without the rule, nothing changes.
#[test]
fn the_wide_margin_is_played_while_the_queue_is_deep_and_only_then() {
    use slurp_fair::rollout;
    use slurp_sim::generate::{Family, generate};
    use slurp_sim::{Machine, Window, Workload};

    let trace = generate(&Family::Saturated.spec(6_000), 11);
    let workload = Workload::new(&trace, Machine::of(&trace).unwrap());
    let window = Window {
        start: 0,
        len: 6_000,
    };
    let v12 = slurp_fair::spec::Source::of("fair-v12").read().unwrap();
    let with = |set: &[(&str, Option<String>)]| {
        let bytes = export::renoted(&v12.bytes, set).unwrap();
        slurp_fair::Model::from_bytes(std::path::Path::new("v12.onnx"), &bytes, None, None).unwrap()
    };
    let order = |m: &slurp_fair::Model, backfill: bool| {
        rollout::replay(m, &workload, window, backfill, None)
            .unwrap()
            .order
    };
    let rule = |b: &str| with(&[(COMMITTED_BACKLOG, Some(b.into()))]);
    let plain = with(&[]);
    let wide = with(&[(COMMITTED_SHORTLIST, Some("f1:256".into()))]);
    // Queues of this window pass 64 jobs at times and fall below at others.
    const BETWEEN: &str = "64:256";
    let never = order(&rule("1000000:256"), false);
    let always = order(&rule("1:256"), false);
    let between = order(&rule(BETWEEN), false);
    assert_eq!(never, order(&plain, false));
    assert_eq!(always, order(&wide, false));
    assert_ne!(never, always, "the margin matters on this window");
    assert_ne!(between, never, "the queue is deep at times");
    assert_ne!(between, always, "and shallow at others");
    assert_eq!(order(&rule(BETWEEN), true), order(&plain, true));
}
