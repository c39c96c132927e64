//! Shortlists for exact estimates (`exact.rs`) as a model file carries
//! them: read for the network whose key they are under, refused where no
//! network would read them; and in a replay, in both simulation models,
//! played exactly once the jobs that ended ran their estimates, and never
//! where they did not.

use std::sync::Arc;

use slurp_fair::model::{
    COMMITTED_EASY_EXACT_SHORTLIST, COMMITTED_EASY_SHORTLIST, COMMITTED_EXACT_SHORTLIST,
    COMMITTED_SHORTLIST, EXACT_SHORTLIST, SHORTLIST, SLURP_EASY_EXACT_SHORTLIST,
    SLURP_EASY_SHORTLIST,
};
use slurp_fair::{Model, ModelError, Sight, export};
use slurp_sim::generate::{Family, generate};
use slurp_sim::{Machine, Window, Workload};

mod common;
use common::{by_feature, model};

#[test]
fn a_shortlist_for_exact_estimates_belongs_to_the_network_it_is_under() {
    let main = by_feature(3, 1.0);
    let mut notes: Vec<(&str, String)> = export::committed_notes(&main, Sight::V3, false).into();
    notes.push((SHORTLIST, "f1:32".into()));
    notes.push((EXACT_SHORTLIST, "sjf:32".into()));
    notes.push((COMMITTED_EXACT_SHORTLIST, "sjf:1e9".into()));
    let m = model(&main, &notes).unwrap();
    let exact = |m: &Model| m.exact().map(|l| l.to_string());
    assert_eq!(exact(&m).as_deref(), Some("sjf:32"));
    assert_eq!(exact(m.committed(false)).as_deref(), Some("sjf:1000000000"));
    // Its own shortlist until the estimates prove exact, then that one;
    // a network with none for exact estimates keeps its own.
    let now = |m: &Model, exact: bool| m.shortlist_now(exact).map(|l| l.to_string());
    assert_eq!(now(&m, false).as_deref(), Some("f1:32"));
    assert_eq!(now(&m, true).as_deref(), Some("sjf:32"));
    assert_eq!(now(m.committed(false), false), None);
    assert_eq!(
        now(m.committed(false), true).as_deref(),
        Some("sjf:1000000000")
    );
    // Where a network must be carried for the key to be read, it is
    // refused without one, naming the key.
    for key in [SLURP_EASY_EXACT_SHORTLIST, COMMITTED_EASY_EXACT_SHORTLIST] {
        let mut bad = notes.clone();
        bad.push((key, "sjf:8".into()));
        let err = model(&main, &bad).unwrap_err();
        assert!(matches!(err, ModelError::Shortlist { .. }), "{err}");
        assert!(
            err.to_string().contains(&format!("(metadata `{key}`)"))
                && err.to_string().contains("carries no"),
            "{key}: {err}"
        );
    }
    // A malformed one is refused as any shortlist is.
    let bad: Vec<(&str, String)> = notes
        .iter()
        .map(|(k, v)| match *k {
            EXACT_SHORTLIST => (*k, "sjf".to_owned()),
            _ => (*k, v.clone()),
        })
        .collect();
    let err = model(&main, &bad).unwrap_err();
    assert!(
        err.to_string()
            .contains("(metadata `slurp.exact.shortlist`) cannot be used: `sjf` is not"),
        "{err}"
    );
}

/// 40 jobs that each run alone (no choice is made while they do), then a
/// saturated family's jobs: with `exact`, every job asks for its run time
/// (SWF field 9 −1, a trace without requested times), else the first 40
/// ask for ten times theirs and the rest for what their users asked.
fn workload(exact: bool) -> (Workload, Window) {
    let mut trace = generate(&Family::Saturated.spec(1_200), 11);
    let machine = Machine::of(&trace).unwrap();
    let first = trace.jobs[0];
    let alone: Vec<_> = (0..40)
        .map(|i| slurp_trace::Job {
            id: i + 1,
            submit: 100 * i,
            run: 50,
            procs: 1,
            req_procs: 1,
            req_time: 500,
            user: i % 4,
            ..first
        })
        .collect();
    for (k, j) in trace.jobs.iter_mut().enumerate() {
        j.id = 41 + k as i64;
        j.submit += 5_000;
    }
    trace.jobs.splice(0..0, alone);
    if exact {
        for j in &mut trace.jobs {
            j.req_time = -1;
        }
    }
    let window = Window {
        start: 0,
        len: trace.jobs.len(),
    };
    (Workload::new(&trace, machine), window)
}

/// fair-v13 with its metadata rewritten: `set` keys to `value`.
fn v13_with(keys: &[&str], value: &str) -> Arc<Model> {
    let v13 = slurp_fair::spec::Source::of("fair-v13").read().unwrap();
    let set: Vec<(&str, Option<String>)> = keys.iter().map(|&k| (k, Some(value.into()))).collect();
    let bytes = export::renoted(&v13.bytes, &set).unwrap();
    Arc::new(Model::from_bytes(std::path::Path::new("v13.onnx"), &bytes, None, None).unwrap())
}

/// Each network's shortlist for exact estimates `sjf:1e9` is played,
/// in slurp's model and in the reference model, with and without EASY, as
/// that shortlist in the network's own place would be once 32 jobs have
/// ended having run their estimates (and before then no choice was made),
/// and never on the same jobs with their users' estimates.
#[test]
fn the_shortlist_for_exact_estimates_is_played_once_the_ended_jobs_show_them() {
    let plain = v13_with(&[], "");
    let with = v13_with(
        &[
            EXACT_SHORTLIST,
            SLURP_EASY_EXACT_SHORTLIST,
            COMMITTED_EXACT_SHORTLIST,
            COMMITTED_EASY_EXACT_SHORTLIST,
        ],
        "sjf:1e9",
    );
    let swapped = v13_with(
        &[
            SHORTLIST,
            SLURP_EASY_SHORTLIST,
            COMMITTED_SHORTLIST,
            COMMITTED_EASY_SHORTLIST,
        ],
        "sjf:1e9",
    );
    for exact in [true, false] {
        let (workload, window) = workload(exact);
        for backfill in [false, true] {
            let orders = |m: &Arc<Model>| {
                (
                    slurp_fair::chooser::replay(m.clone(), &workload, window, backfill, None)
                        .unwrap()
                        .order,
                    slurp_fair::rollout::replay(m, &workload, window, backfill, None)
                        .unwrap()
                        .order,
                )
            };
            let (with, plain, swapped) = (orders(&with), orders(&plain), orders(&swapped));
            let case = format!("exact estimates {exact}, EASY {backfill}");
            if exact {
                assert_eq!(with, swapped, "{case}");
                assert_ne!(with.0, plain.0, "{case}: the shortlist matters here");
                assert_ne!(with.1, plain.1, "{case}: the shortlist matters here");
            } else {
                assert_eq!(with, plain, "{case}");
                assert_ne!(with.0, swapped.0, "{case}: the shortlist matters here");
                assert_ne!(with.1, swapped.1, "{case}: the shortlist matters here");
            }
        }
    }
}
