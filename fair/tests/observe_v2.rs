//! The site-independent observations (v2, v3's standing, v4's widths, v5's
//! turns, v7's urgency, v8's queue cost, v9's predicted runs, v10's
//! unchecked records):
//! equal to an independent NumPy computation of their definition, blind to
//! the machine's size, and named by the model file itself.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use slurp_fair::observe_v2::{Projection, Shown, Standing, Waiting, Widths, observe};
use slurp_fair::{Model, Sight};
use slurp_sim::generate::Family;
use slurp_sim::{Window, Workload};

mod common;
use common::{data, scaled};

/// Whether `python3` with NumPy is here; the test that needs it says why it
/// is skipped when not.
fn numpy() -> bool {
    Command::new("python3")
        .args(["-c", "import numpy"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Cases in turn v2's, v3's (the jobs still waiting, some queued and then
/// gone, count in each user's standing), v4's (v3's with widths on log
/// scales), v5's (v4's with places in fair-share turns), v7's (v5's with
/// each job's urgency to its user), v8's (v5's with each job's cost to
/// the whole queue, which counts the jobs queued and gone again as gone),
/// v9's (v5's with each job's run predicted from its user's last ended
/// jobs) and v10's (v9's with how many of each user's jobs have ended).
#[test]
fn v2_to_v10_features_equal_numpys_on_random_queues() {
    if !numpy() {
        eprintln!("skipped: needs python3 with numpy (pip install numpy)");
        return;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let mut cases = Vec::new();
    let mut ours = Vec::new();
    for case in 0..180 {
        // Not a multiple of the eight observations' cycle: each sees every size.
        let cores: u64 = [1, 8, 64, 1000, 8192][case % 5];
        let users = rng.random_range(1..12i64);
        let mut standing = Standing::default();
        let mut started = Vec::new();
        let mut ended = Vec::new();
        // Starts in time order over two weeks (a few half-lives of usage
        // decay), each ending soon after or still running at `now`.
        let now: u64 = 2_000_000;
        let mut clock = 0;
        for _ in 0..rng.random_range(0..60) {
            let (user, wait, est) = (
                rng.random_range(0..users),
                rng.random_range(0..100_000u64),
                rng.random_range(1..200_000u64),
            );
            let c = rng.random_range(1..=cores);
            clock += rng.random_range(0..30_000u64);
            let ms = |s: u64| slurp_runtime::core::Time(s * 1000);
            standing.started(user, wait, est, c, ms(clock));
            started.push(serde_json::json!([user, wait, est, c, clock]));
            let end = clock + rng.random_range(1..50_000u64);
            if end < now && rng.random::<f64>() < 0.5 {
                standing.ended(user, c, Some(est), ms(clock), ms(end));
                ended.push(serde_json::json!([user, c, clock, end]));
            }
        }
        let len = rng.random_range(0..=128usize);
        let mut shown: Vec<Shown> = Vec::with_capacity(len);
        for _ in 0..len {
            let mut s = Shown {
                cores: rng.random_range(1..=cores),
                estimate: rng.random_range(0..300_000),
                wait: rng.random_range(0..500_000),
                user: rng.random_range(0..users + 2),
                fits: rng.random(),
            };
            // Some queued with the one before (a line's tasks: the same
            // estimate and wait), maybe another user's: what an observation
            // reuses from the slot before must be the same for both.
            if let Some(b) = shown.last().filter(|_| rng.random::<f64>() < 0.2) {
                (s.estimate, s.wait) = (b.estimate, b.wait);
            }
            shown.push(s);
        }
        // v3 on: jobs waiting at `now`, users' own and others' (users no
        // job of which started, too); a third of those queued leave again.
        let sight = Sight::ALL[1 + case % (Sight::ALL.len() - 1)];
        let v3 = sight != Sight::V2;
        let mut waiting = Waiting::default();
        let mut still = Vec::new();
        for _ in 0..rng.random_range(0..80) {
            let (user, submit, est) = (
                rng.random_range(0..users + 3),
                rng.random_range(0..=now),
                rng.random_range(1..200_000u64),
            );
            waiting.queued(user, submit, est);
            if rng.random::<f64>() < 0.3 {
                waiting.left(user, submit, est);
            } else {
                still.push(serde_json::json!([user, submit, est]));
            }
        }
        let obs = observe(
            &shown,
            (0..len as u32).collect(),
            cores,
            &standing,
            v3.then(|| {
                Projection::scan(&standing, &waiting, slurp_runtime::core::Time(now * 1000))
            }),
            slurp_runtime::core::Time(now * 1000),
            sight,
        );
        ours.push(obs.features);
        let mut case = serde_json::json!({
            "cores": cores,
            "now": now,
            "started": started,
            "ended": ended,
            "shown": shown
                .iter()
                .map(|s| serde_json::json!([s.cores, s.estimate, s.wait, s.user, s.fits]))
                .collect::<Vec<_>>(),
        });
        if v3 {
            case["waiting"] = serde_json::json!(still);
        }
        if sight.widths() == Widths::Logs {
            case["widths"] = serde_json::json!("logs");
        }
        if sight.turns() {
            case["turns"] = serde_json::json!(true);
        }
        if sight.urgency() {
            case["urgency"] = serde_json::json!(true);
        }
        if sight.queue_cost() {
            case["queue_cost"] = serde_json::json!(true);
        }
        if sight.predicts() {
            case["predicts"] = serde_json::json!(true);
        }
        if sight.history() {
            case["history"] = serde_json::json!(true);
        }
        cases.push(case);
    }
    let mut child = Command::new("python3")
        .arg(data("observe_v2.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(&cases).unwrap().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let theirs: Vec<Vec<f64>> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(theirs.len(), ours.len());
    for (case, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (*x as f64 - y).abs() < 1e-5,
                "case {case}, slot {}, feature {}: slurp {x}, NumPy {y}",
                i / 9,
                i % 9 + 1
            );
        }
    }
}

/// `model` makes the same choices, at the same times, on `one` and on
/// `two` (the same workload on twice the cores, jobs twice as wide) in
/// slurp's model and, where `reference`, in the reference model.
fn choose_alike(
    model: &Arc<Model>,
    (one, two): (&Workload, &Workload),
    window: Window,
    backfill: bool,
    reference: bool,
    what: &str,
) {
    let replay = |w| slurp_fair::chooser::replay(model.clone(), w, window, backfill, None);
    let (a, b) = (replay(one).unwrap(), replay(two).unwrap());
    assert_eq!(a.order, b.order, "{what}, slurp's model");
    assert_eq!(a.starts, b.starts, "{what}, slurp's model");
    if reference {
        let replay = |w| slurp_fair::rollout::replay(model, w, window, backfill, None);
        let (a, b) = (replay(one).unwrap(), replay(two).unwrap());
        assert_eq!(a.order, b.order, "{what}, reference model");
    }
}

#[test]
fn a_v2_model_chooses_the_same_on_twice_the_cores() {
    let model = Arc::new(Model::load(&data("actor-v2.onnx"), None).unwrap());
    assert_eq!(model.sight, Sight::V2);
    let window = Window { start: 0, len: 400 };
    // slurp's model is core-granular: any machine; the reference model
    // takes whole nodes, so its nodes hold one processor here.
    for (family, reference) in [(Family::Small, true), (Family::Mid, false)] {
        let (one, two) = (
            scaled(family, 400, 9, 1, false),
            scaled(family, 400, 9, 2, false),
        );
        assert_eq!(two.machine.procs(), 2 * one.machine.procs());
        for backfill in [false, true] {
            let what = format!("{family:?}, backfill {backfill}");
            choose_alike(&model, (&one, &two), window, backfill, reference, &what);
        }
    }
    // A v1 model is not blind to the size: with RICC's normalisers the
    // processors feature doubles (a check that the test can tell).
    let v1 = Arc::new(slurp_fair::built_in("fair").unwrap());
    assert_eq!(v1.sight, Sight::V1);
    let (one, two) = (
        scaled(Family::Small, 400, 9, 1, false),
        scaled(Family::Small, 400, 9, 2, false),
    );
    let a = slurp_fair::chooser::replay(v1.clone(), &one, window, false, None).unwrap();
    let b = slurp_fair::chooser::replay(v1, &two, window, false, None).unwrap();
    assert_ne!(a.order, b.order, "v1 sees the machine's size");
}

/// v7's urgency counts a user's jobs and compares estimates, v8's queue
/// cost sums the whole queue and takes each job's share of the cores, v9
/// reckons with the runs of a user's ended jobs, v10 counts them: a
/// network that reads any of them (and every other feature) chooses the
/// same on a workload of twice the cores with jobs twice as wide, in both
/// simulation models.
#[test]
fn v7_to_v10_networks_choose_the_same_on_twice_the_cores() {
    let window = Window { start: 0, len: 400 };
    let (one, two) = (
        scaled(Family::Mid, 400, 11, 1, true),
        scaled(Family::Mid, 400, 11, 2, true),
    );
    // Each observation with the feature it changes, and the observation
    // it changes it from.
    for (sight, feature, from) in [
        (Sight::V7, 6, Sight::V5),
        (Sight::V8, 8, Sight::V5),
        (Sight::V9, 3, Sight::V5),
        (Sight::V10, 7, Sight::V9),
    ] {
        let mut rng = ChaCha8Rng::seed_from_u64(6);
        let mut layers = vec![
            slurp_fair::export::Dense {
                w: (0..slurp_fair::FEATURES * 6)
                    .map(|_| rng.random_range(-1.0..1.0f32))
                    .collect(),
                b: (0..6).map(|_| rng.random_range(-0.5..0.5f32)).collect(),
            },
            slurp_fair::export::Dense {
                w: (0..6).map(|_| rng.random_range(-1.0..1.0f32)).collect(),
                b: vec![0.0],
            },
        ];
        // The new feature weighs most, so that the test sees it.
        for j in 0..6 {
            layers[0].w[(feature - 1) * 6 + j] *= 4.0;
        }
        let seeing = |sight: Sight| {
            let bytes = slurp_fair::export::actor(&layers, sight.name(), &[]);
            let model = Model::from_bytes(std::path::Path::new("test"), &bytes, None, None);
            Arc::new(model.unwrap())
        };
        let model = seeing(sight);
        assert_eq!(model.sight, sight);
        for backfill in [false, true] {
            let what = format!("{sight:?}, backfill {backfill}");
            choose_alike(&model, (&one, &two), window, backfill, true, &what);
        }
        // The same network seeing the other makes other choices: the new
        // feature is read.
        let a = slurp_fair::chooser::replay(model, &one, window, false, None).unwrap();
        let b = slurp_fair::chooser::replay(seeing(from), &one, window, false, None).unwrap();
        assert_ne!(
            a.order, b.order,
            "{sight:?}'s feature {feature} is not {from:?}'s"
        );
    }
}

#[test]
fn the_model_file_says_which_observation_it_sees() {
    // No normalisers beside a v2 model, and none needed.
    assert!(!data("actor-v2.onnx.json").exists());
    let v2 = Model::load(&data("actor-v2.onnx"), None).unwrap();
    assert_eq!(v2.sight, Sight::V2);
    assert_eq!(v2.evaluator(), "direct");
    // v1 models: their normalisers, as before.
    let v1 = Model::load(&data("narrowest-first.onnx"), None).unwrap();
    assert_eq!(v1.sight, Sight::V1);
    assert_eq!(v1.normalisers.max_procs, 8.0);
    // A sidecar can say v2 for a file without the metadata.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.onnx");
    std::fs::copy(data("actor-test.onnx"), &path).unwrap();
    std::fs::write(dir.path().join("m.onnx.json"), r#"{"observation": "v2"}"#).unwrap();
    assert_eq!(Model::load(&path, None).unwrap().sight, Sight::V2);
    std::fs::write(dir.path().join("m.onnx.json"), r#"{"observation": "v11"}"#).unwrap();
    let err = Model::load(&path, None).unwrap_err().to_string();
    assert!(
        err.contains(
            "observation `v11`, which this slurp does not know (v1, v2, v3, v4, v5, v7, v8, v9, v10)"
        ),
        "{err}"
    );
    // v12's reverted observation was called v6; a network saved with it is
    // refused, not read as another observation.
    let v12 = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("trainer/runs/v12-reservation-e1.onnx");
    let err = Model::load(&v12, None).unwrap_err().to_string();
    assert!(
        err.contains(
            "`slurp.committed.easy.observation` is `v6`; it may name v2, v3, v4, v5, v7, v8, v9 or v10"
        ),
        "{err}"
    );
    // Each observation's name reads back as itself, and only those.
    for sight in Sight::ALL {
        assert_eq!(Sight::from_name(sight.name()), Some(sight));
    }
    assert_eq!(Sight::from_name("v10"), Some(Sight::V10));
    assert_eq!(Sight::from_name("v11"), None);
}

/// What a search from a network of one observation stops reading to see
/// another: the inputs whose meaning differs, each at its fold value, and
/// nothing between observations that agree on them.
#[test]
fn a_start_is_refolded_at_exactly_the_inputs_that_change_meaning() {
    assert_eq!(Sight::V8.refolded(Sight::V5), vec![(7, 0.0)]);
    assert_eq!(Sight::V7.refolded(Sight::V5), vec![(5, 1.0)]);
    assert_eq!(Sight::V5.refolded(Sight::V7), vec![(5, 1.0)]);
    assert_eq!(Sight::V8.refolded(Sight::V7), vec![(5, 1.0), (7, 0.0)]);
    for sight in Sight::ALL {
        assert!(sight.refolded(sight).is_empty(), "{sight:?}");
    }
    assert!(Sight::V5.refolded(Sight::V4).is_empty());
    // v9's feature 3 is v5's for a user with no job ended: nothing folds.
    assert!(Sight::V9.refolded(Sight::V5).is_empty());
    assert_eq!(Sight::V9.refolded(Sight::V8), vec![(7, 0.0)]);
    // v10's feature 7 is the unchecked record, the others' the running
    // share: a start from either stops reading it, at 0.
    assert_eq!(Sight::V10.refolded(Sight::V9), vec![(6, 0.0)]);
    assert_eq!(Sight::V9.refolded(Sight::V10), vec![(6, 0.0)]);
    assert_eq!(Sight::V10.refolded(Sight::V7), vec![(5, 1.0), (6, 0.0)]);
    assert_eq!(Sight::V10.refolded(Sight::V8), vec![(6, 0.0), (7, 0.0)]);
}
