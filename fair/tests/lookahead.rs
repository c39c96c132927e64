//! A model's lookahead (`slurp.lookahead`): projections by hand, the
//! network's choice kept unless a heuristic's order is projected fairer by
//! the margin, the metadata checked at load, and both simulation models
//! deciding with it (a trainer's drawn choices without).

use std::sync::Arc;

use slurp_fair::export::{self, Dense};
use slurp_fair::lookahead::{Ahead, LOOKAHEAD, LOOKAHEAD_MARGIN, Lookahead, Now, Queued, project};
use slurp_fair::observe_v2::Standing;
use slurp_fair::{Model, ModelError};
use slurp_runtime::core::{Order, Time};
use slurp_sim::generate::{Family, generate};
use slurp_sim::{Machine, SimJob, Window, Workload};

/// A: user 1, all 4 units for 100 s. B: user 2, 2 units for 50 s. Both
/// submitted at 0; at 0 a job holds 2 units until 100 by its estimate.
fn two() -> [Queued; 2] {
    [
        Queued {
            user: 1,
            submit: 0,
            estimate: 100,
            units: 4,
        },
        Queued {
            user: 2,
            submit: 0,
            estimate: 50,
            units: 2,
        },
    ]
}

const RUNNING: [(u64, u32); 1] = [(100, 2)];

fn at(backfill: bool) -> Now<'static> {
    Now {
        now: 0,
        free: 2,
        running: &RUNNING,
        backfill,
    }
}

#[test]
fn a_projection_starts_jobs_in_order_as_capacity_frees_and_easy_backfills_before_the_head() {
    let shown = two();
    let none = Standing::default();
    // A first: it waits for the running job (100), B for A (200).
    // Slowdowns (100 + 100)/100 = 2 and (200 + 50)/50 = 5.
    let p = project(at(false), &shown, &[0, 1], &none);
    assert_eq!((p.worst, p.total), (5.0, 7.0));
    // B first starts now (1); A once B (50) and the running job (100) end: 2.
    let p = project(at(false), &shown, &[1, 0], &none);
    assert_eq!((p.worst, p.total), (2.0, 3.0));
    // A first under EASY: B fits now and ends (50) before A's shadow time
    // (100), so it goes now; A still starts at 100.
    let p = project(at(true), &shown, &[0, 1], &none);
    assert_eq!((p.worst, p.total), (2.0, 3.0));
    // A job that would end after the shadow time does not go ahead.
    let mut long = shown;
    long[1].estimate = 150;
    let p = project(at(true), &long, &[0, 1], &none);
    // A at 100 (2), B after A at 200: (200 + 150)/150.
    assert_eq!(p.worst, 350.0 / 150.0);
    // A running job past its estimate is taken to end now.
    let late = Now {
        now: 300,
        free: 2,
        running: &RUNNING,
        backfill: false,
    };
    let p = project(late, &shown, &[0, 1], &none);
    // A at 300 (submitted at 0): (300 + 100)/100; B at 400: (400 + 50)/50.
    assert_eq!((p.worst, p.total), (9.0, 13.0));
}

#[test]
fn a_users_slowdowns_so_far_count_in_its_projected_mean() {
    let shown = two();
    let mut standing = Standing::default();
    // User 2 has had a job start after waiting 80 s for a 10 s estimate: 9.
    standing.started(2, 80, 10, 1, Time(0));
    // B first: user 2's mean is (9 + 1)/2 = 5, user 1's 2.
    let p = project(at(false), &shown, &[1, 0], &standing);
    assert_eq!(p.worst, 5.0);
    // A first: user 2's (9 + 5)/2 = 7.
    let p = project(at(false), &shown, &[0, 1], &standing);
    assert_eq!(p.worst, 7.0);
}

fn job(id: i64, user: i64, estimate: u64, procs: u32) -> SimJob {
    SimJob {
        id,
        submit: 0,
        run: estimate,
        estimate,
        procs,
        user,
        group: -1,
        exe: -1,
        mem: -1,
    }
}

#[test]
fn the_networks_choice_stands_unless_a_heuristic_is_projected_fairer_by_the_margin() {
    let jobs = [job(1, 1, 100, 4), job(2, 2, 50, 2)];
    let jobs: Vec<&SimJob> = jobs.iter().collect();
    let shown = two();
    let standing = Standing::default();
    // The network prefers A; SJF's first is B, projected 2 against A's 5.
    let logits = [1.0, 0.0];
    let choose = |rules: Vec<Order>, margin: f64, backfill: bool| {
        Ahead::new(Lookahead { rules, margin }).choose(
            at(backfill),
            &jobs,
            &shown,
            &logits,
            0,
            &standing,
        )
    };
    assert_eq!(choose(vec![Order::Sjf], 0.1, false), 1, "B: 2 < 0.9 × 5");
    assert_eq!(choose(vec![Order::Sjf], 0.7, false), 0, "A: 2 ≥ 0.3 × 5");
    // FCFS's first (A, by submission and then position) is the network's.
    assert_eq!(choose(vec![Order::Fcfs], 0.0, false), 0);
    // Under EASY, A first lets B go now: no order is fairer than A first.
    assert_eq!(choose(vec![Order::Sjf], 0.0, true), 0);
    // No rules: the network's choice.
    assert_eq!(choose(Vec::new(), 0.0, false), 0);
}

fn by_feature(feature: usize, weight: f32) -> Vec<Dense> {
    let mut w = vec![0.0; slurp_fair::FEATURES];
    w[feature] = weight;
    vec![Dense { w, b: vec![0.0] }]
}

fn model(notes: &[(&str, String)]) -> Result<Model, ModelError> {
    // Newest first (feature 4, the wait, weighed negatively).
    let bytes = export::actor(&by_feature(3, -1.0), "v4", notes);
    Model::from_bytes(std::path::Path::new("m.onnx"), &bytes, None, None)
}

#[test]
fn the_metadata_names_known_heuristics_and_a_margin_below_one() {
    let m = model(&[(LOOKAHEAD, "fairshare, f1".into())]).unwrap();
    assert_eq!(
        m.lookahead,
        Some(Lookahead {
            rules: vec![Order::Fairshare, Order::F1],
            margin: 0.1
        })
    );
    let m = model(&[(LOOKAHEAD, "sjf".into()), (LOOKAHEAD_MARGIN, "0.25".into())]).unwrap();
    assert_eq!(m.lookahead.unwrap().margin, 0.25);
    assert_eq!(model(&[]).unwrap().lookahead, None);
    for (notes, says) in [
        (
            vec![(LOOKAHEAD, "fairshare,wfp3".to_owned())],
            "`wfp3` is not one of fcfs, sjf, f1, fairshare",
        ),
        (
            vec![
                (LOOKAHEAD, "f1".to_owned()),
                (LOOKAHEAD_MARGIN, "1.5".to_owned()),
            ],
            "margin `1.5` is not a fraction in [0, 1)",
        ),
    ] {
        let err = model(&notes).unwrap_err();
        assert!(matches!(err, ModelError::Metadata { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            format!("m.onnx: its metadata `slurp.lookahead` cannot be used: {says}")
        );
    }
    // A v1 model keeps no users' standing in the reference model.
    let bytes = export::actor(&by_feature(3, -1.0), "v1", &[(LOOKAHEAD, "f1".into())]);
    let norm = slurp_fair::Normalisers {
        max_run: 1.0,
        max_procs: 1.0,
        max_mem: 0.0,
        max_user: 1.0,
        max_group: 0.0,
        max_exe: 0.0,
    };
    let err = Model::from_bytes(std::path::Path::new("m.onnx"), &bytes, None, Some(norm));
    assert!(
        matches!(&err, Err(ModelError::Metadata { reason, .. }) if reason.contains("v1")),
        "{err:?}"
    );
}

#[test]
fn both_simulation_models_decide_with_it_and_a_trainers_draws_stay_the_networks() {
    let trace = generate(&Family::Saturated.spec(1500), 2);
    let workload = Workload::new(&trace, Machine::of(&trace).unwrap());
    let window = Window {
        start: 200,
        len: 1024,
    };
    let with = |margin: &str| {
        let notes = [
            (LOOKAHEAD, "fairshare,f1".to_owned()),
            (LOOKAHEAD_MARGIN, margin.to_owned()),
        ];
        Arc::new(model(&notes).unwrap())
    };
    let plain = Arc::new(model(&[]).unwrap());
    // A margin of almost 1 takes a heuristic's job only where its order
    // is projected a million times fairer: never here.
    let (ahead, gated) = (with("0.1"), with("0.999999"));
    for backfill in [false, true] {
        for sample in [None, Some(5)] {
            let reference = |m: &Model| {
                slurp_fair::rollout::replay(m, &workload, window, backfill, sample)
                    .unwrap()
                    .order
            };
            let slurp = |m: &Arc<Model>| {
                slurp_fair::chooser::replay(m.clone(), &workload, window, backfill, sample)
                    .unwrap()
                    .order
            };
            let case = format!("backfill {backfill}, sample {sample:?}");
            assert_eq!(reference(&gated), reference(&plain), "{case}");
            assert_eq!(slurp(&gated), slurp(&plain), "{case}");
            if sample.is_some() {
                // A trainer's drawn choices are the network's own.
                assert_eq!(reference(&ahead), reference(&plain), "{case}");
                assert_eq!(slurp(&ahead), slurp(&plain), "{case}");
            } else {
                // Newest first is projected less fair than `fairshare` or
                // F1 at some decisions of a saturated window.
                assert_ne!(reference(&ahead), reference(&plain), "{case}");
                assert_ne!(slurp(&ahead), slurp(&plain), "{case}");
            }
        }
    }
}
