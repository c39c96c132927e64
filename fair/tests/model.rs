//! The policy network in tract and evaluated directly, against NumPy, the mask, bad model files,
//! and rollouts: deterministic per seed, and files that read back.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use slurp_fair::observe::{Normalisers, PADDING};
use slurp_fair::rollout::{self, Options, Player, choose};
use slurp_fair::{Model, ModelError, Observation, SLOTS};
use slurp_sim::{Machine, Workload};

mod common;
use common::rollout_options;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn norm() -> Normalisers {
    Normalisers {
        max_run: 1.0,
        max_procs: 1.0,
        max_mem: 1.0,
        max_user: 1.0,
        max_group: 1.0,
        max_exe: 1.0,
    }
}

fn actor() -> Model {
    static ACTOR: std::sync::OnceLock<Model> = std::sync::OnceLock::new();
    ACTOR
        .get_or_init(|| {
            Model::load(&data("actor-test.onnx"), Some(norm())).expect("the test actor loads")
        })
        .clone()
}

#[derive(serde::Deserialize)]
struct Case {
    obs: Vec<f32>,
    mask: Vec<f32>,
    logits: Vec<f32>,
}

/// Both evaluators' logits for each case of `json` equal NumPy's.
fn compare_with_numpy(model: &Model, json: &str) {
    let cases: Vec<Case> =
        serde_json::from_str(&std::fs::read_to_string(data(json)).unwrap()).unwrap();
    assert!(cases.len() >= 4);
    for (i, case) in cases.iter().enumerate() {
        let obs = Observation {
            features: case.obs.clone(),
            mask: case.mask.clone(),
            jobs: Vec::new(),
        };
        let evaluators = [
            ("tract", model.tract_logits(&obs).unwrap()),
            (model.evaluator(), model.logits(&obs).unwrap()),
        ];
        for (evaluator, got) in evaluators {
            for (slot, (g, want)) in got.iter().zip(&case.logits).enumerate() {
                // Real slots to float32 rounding; padded ones near -1e6, where
                // one float32 step is 0.06.
                let tolerance = if case.mask[slot] > 0.0 { 1e-5 } else { 0.5 };
                assert!(
                    (g - want).abs() <= tolerance,
                    "{json} case {i} slot {slot}: {evaluator} {g}, numpy {want}"
                );
            }
        }
    }
}

#[test]
fn tract_computes_what_numpy_computes_from_the_same_weights() {
    // The trainer's per-slot MLP: evaluated directly, and by tract.
    let model = actor();
    assert_eq!(model.evaluator(), "direct");
    compare_with_numpy(&model, "actor-test.json");
    // Any other network is tract's alone.
    let tanh = Model::load(&data("tanh-actor.onnx"), Some(norm())).unwrap();
    assert_eq!(tanh.evaluator(), "tract");
    compare_with_numpy(&tanh, "tanh-actor.json");
}

#[test]
fn bad_model_files_are_refused_with_the_reason() {
    let err = |path: &Path, fallback| Model::load(path, fallback).unwrap_err();
    assert!(matches!(
        err(&data("missing.onnx"), Some(norm())),
        ModelError::Unreadable { .. }
    ));
    assert!(matches!(
        err(&data("not-onnx.onnx"), Some(norm())),
        ModelError::Unreadable { .. }
    ));
    let shape = err(&data("wrong-shape.onnx"), Some(norm()));
    assert!(matches!(shape, ModelError::Shape { .. }), "{shape}");
    assert!(shape.to_string().contains("obs f32[1,128,9]"), "{shape}");
    // No normalisers beside it and none given.
    let none = err(&data("actor-test.onnx"), None);
    assert!(none.to_string().contains("actor-test.onnx.json"), "{none}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The direct evaluator gives tract's logits on any observation: real
    /// slots with any values, padded slots holding the padding row or not.
    #[test]
    fn the_direct_evaluator_is_tract(real in 0usize..=SLOTS, padding_rows in any::<bool>(), values in proptest::collection::vec(-3.0f32..3.0, SLOTS * 9)) {
        let model = actor();
        let mut obs = Observation { features: values, mask: vec![0.0; SLOTS], jobs: Vec::new() };
        obs.mask[..real].iter_mut().for_each(|m| *m = 1.0);
        if padding_rows {
            for row in obs.features.chunks_exact_mut(9).skip(real) {
                row.copy_from_slice(&PADDING);
            }
        }
        let tract = model.tract_logits(&obs).unwrap();
        let direct = model.logits(&obs).unwrap();
        for (slot, (t, d)) in tract.iter().zip(&direct).enumerate() {
            // Padded slots near -1e6 to two float32 steps there.
            let tolerance = if slot < real { 1e-5 * (1.0 + t.abs()) } else { 0.125 };
            prop_assert!((t - d).abs() <= tolerance, "slot {}: tract {}, direct {}", slot, t, d);
        }
        prop_assert_eq!(choose(&tract, None).0, choose(&direct, None).0);
    }

    /// Whatever the observation, neither the best slot nor a sampled one is
    /// ever a padded slot.
    #[test]
    fn the_mask_never_lets_padding_win(real in 1usize..=SLOTS, seed in any::<u64>(), values in proptest::collection::vec(-3.0f32..3.0, SLOTS * 9)) {
        let model = actor();
        let mut mask = vec![0.0; SLOTS];
        mask[..real].iter_mut().for_each(|m| *m = 1.0);
        let logits = model.logits(&Observation { features: values, mask, jobs: Vec::new() }).unwrap();
        prop_assert!(choose(&logits, None).0 < real);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for _ in 0..20 {
            let (slot, logp) = choose(&logits, Some(&mut rng));
            prop_assert!(slot < real);
            prop_assert!(logp <= 0.0);
        }
    }
}

/// A busy stretch of lublin_256 (queues of dozens), so choices matter.
fn busy() -> Workload {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../sim/tests/data/lublin256-2001-3024.swf");
    let trace = slurp_trace::read(&path).unwrap();
    Workload::new(&trace, Machine::of(&trace).unwrap())
}

fn options(seed: u64) -> Options {
    rollout_options(seed, slurp_fair::Sight::V1)
}

#[test]
fn busy_windows_are_the_ones_where_fcfs_queues() {
    let workload = busy();
    let opts = Options {
        min_bsld: 5.0,
        ..options(3)
    };
    let windows = rollout::busy_windows(&workload, &opts).unwrap();
    assert_eq!(windows.len(), 6);
    for w in &windows {
        let s = slurp_sim::reference::run(&workload, *w, slurp_runtime::core::Order::Fcfs, false);
        let m = slurp_sim::Metrics::of(&workload, &s, slurp_sim::Model::Reference);
        assert!(
            m.avg_bounded_slowdown >= 5.0,
            "{w}: {}",
            m.avg_bounded_slowdown
        );
    }
    assert_eq!(
        windows,
        rollout::busy_windows(&workload, &opts).unwrap(),
        "seeded"
    );
    // Windows held out for judging are never played, nor any window that
    // shares a job with one.
    let held = Options {
        hold_out: windows[..3].to_vec(),
        ..options(3)
    };
    let played = rollout::busy_windows(&workload, &held).unwrap();
    assert_eq!(played.len(), 6);
    for w in &played {
        for h in &held.hold_out {
            assert!(
                w.start + w.len <= h.start || h.start + h.len <= w.start,
                "{w} overlaps the held-out {h}"
            );
        }
    }
    let impossible = Options {
        min_bsld: 1e12,
        ..options(3)
    };
    assert!(
        rollout::busy_windows(&workload, &impossible)
            .unwrap_err()
            .contains("fewer than 6 windows")
    );
}

fn read_f32(path: &Path) -> (Vec<u64>, Vec<f32>) {
    let bytes = std::fs::read(path).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    (npy.shape().to_vec(), npy.into_vec::<f32>().unwrap())
}

#[test]
fn rollouts_are_deterministic_per_seed_and_read_back() {
    let workload = busy();
    let model = actor();
    let play = |seed| {
        rollout::rollout(
            Player::Network(&model),
            std::slice::from_ref(&workload),
            &options(seed),
        )
        .unwrap()
    };
    let (a, b, c) = (play(5), play(5), play(6));
    let actions = |t: &[rollout::Trajectory]| -> Vec<i64> {
        t.iter()
            .flat_map(|t| t.steps.iter().map(|s| s.action))
            .collect()
    };
    assert_eq!(actions(&a), actions(&b), "same seed, same actions");
    assert_ne!(actions(&a), actions(&c), "another seed, other episodes");
    assert!(
        actions(&a).iter().any(|&x| x > 0),
        "the policy chose among several jobs"
    );
    // Without backfilling every job of an episode is started by a decision.
    assert!(a.iter().all(|t| t.steps.len() == 64));
    assert!(
        a.iter().all(|t| t.reward <= -1.0),
        "bounded slowdowns are at least 1"
    );

    let dir = tempfile::tempdir().unwrap();
    rollout::write(dir.path(), &a).unwrap();
    let (shape, obs) = read_f32(&dir.path().join("obs.npy"));
    assert_eq!(shape, [6 * 64, 128, 9]);
    assert_eq!(&obs[..SLOTS * 9], &a[0].steps[0].features[..]);
    let (_, rewards) = read_f32(&dir.path().join("reward.npy"));
    assert_eq!(rewards[63], a[0].reward);
    assert_eq!(rewards.iter().filter(|&&r| r != 0.0).count(), 6);
    let bytes = std::fs::read(dir.path().join("action.npy")).unwrap();
    let back: Vec<i64> = npyz::NpyFile::new(&bytes[..]).unwrap().into_vec().unwrap();
    assert_eq!(back, actions(&a));
    // The same seed writes the same bytes.
    let again = tempfile::tempdir().unwrap();
    rollout::write(again.path(), &b).unwrap();
    for name in rollout::ARRAYS {
        assert_eq!(
            std::fs::read(dir.path().join(name)).unwrap(),
            std::fs::read(again.path().join(name)).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn a_teacher_plays_its_heuristic_and_records_its_choices() {
    use slurp_runtime::core::Order;
    let workload = busy();
    for order in [Order::Fcfs, Order::Sjf, Order::F1] {
        let played = rollout::rollout(
            Player::Teacher(order),
            std::slice::from_ref(&workload),
            &options(9),
        )
        .unwrap();
        for t in &played {
            // The episode is the heuristic's own schedule of the window.
            let own = slurp_sim::reference::run(&workload, t.window, order, false);
            let own = slurp_sim::Metrics::of(&workload, &own, slurp_sim::Model::Reference);
            assert_eq!(
                t.metrics.avg_bounded_slowdown, own.avg_bounded_slowdown,
                "{order:?} {}",
                t.window
            );
            assert_eq!(
                t.metrics.worst_user_bounded_slowdown,
                own.worst_user_bounded_slowdown
            );
            // Each action is a real slot, and under FCFS the oldest (slot 0:
            // slots are in submit order while the queue fits).
            for step in &t.steps {
                assert_eq!(step.mask[step.action as usize], 1.0);
                if order == Order::Fcfs {
                    assert_eq!(step.action, 0);
                }
            }
        }
        // Against itself as the baseline, a teacher gains nothing.
        let against = Options {
            baseline: Some(order),
            ..options(9)
        };
        let zero = rollout::rollout(
            Player::Teacher(order),
            std::slice::from_ref(&workload),
            &against,
        )
        .unwrap();
        assert!(zero.iter().all(|t| t.reward == 0.0));
        assert!(
            played.iter().any(|t| t.reward < -1.0),
            "the plain reward is minus the score"
        );
        if order != Order::Fcfs {
            assert!(
                played.iter().flat_map(|t| &t.steps).any(|s| s.action > 0),
                "{order:?} never chose past the oldest job"
            );
        }
    }
}

/// Whether a schedule of `window` starts every job once, never before its
/// submission, and never uses more processors than the machine has.
fn valid(workload: &Workload, schedule: &slurp_sim::Schedule) -> Result<(), String> {
    let jobs = &workload.jobs[schedule.window.range()];
    if schedule.starts.len() != jobs.len() || schedule.order.len() != jobs.len() {
        return Err(format!(
            "{} starts for {} jobs",
            schedule.order.len(),
            jobs.len()
        ));
    }
    let mut events: Vec<(u64, i64)> = Vec::new();
    for (job, &start) in jobs.iter().zip(&schedule.starts) {
        if start < job.submit {
            return Err(format!(
                "job {} starts at {start}, before its submission {}",
                job.id, job.submit
            ));
        }
        events.push((start, i64::from(job.procs)));
        events.push((start + job.run, -i64::from(job.procs)));
    }
    // Ends before starts at the same instant.
    events.sort_by_key(|&(t, d)| (t, d));
    let mut used = 0;
    for (t, d) in events {
        used += d;
        if used > workload.machine.procs() as i64 {
            return Err(format!("{used} processors in use at {t}"));
        }
    }
    Ok(())
}

#[test]
fn in_slurps_model_the_model_chooses_the_cores_head_and_every_schedule_is_valid() {
    let workload = busy();
    let model = std::sync::Arc::new(actor());
    let window = slurp_sim::Window { start: 0, len: 300 };
    for backfill in [false, true] {
        for sample in [None, Some(7)] {
            let schedule =
                slurp_fair::chooser::replay(model.clone(), &workload, window, backfill, sample)
                    .unwrap();
            valid(&workload, &schedule)
                .unwrap_or_else(|e| panic!("backfill {backfill}, sample {sample:?}: {e}"));
            let again =
                slurp_fair::chooser::replay(model.clone(), &workload, window, backfill, sample)
                    .unwrap();
            assert_eq!(
                schedule, again,
                "deterministic (backfill {backfill}, sample {sample:?})"
            );
        }
    }
    // A queue deeper than the slots: 400 jobs at once on 16 processors, of
    // mixed sizes and estimates, so the slots are the two sorted views
    // (debug builds check the chooser's own views against the queue).
    let mut deep = workload.clone();
    deep.machine = Machine {
        nodes: 16,
        procs_per_node: 1,
    };
    deep.jobs = (0..400u64)
        .map(|i| slurp_sim::SimJob {
            id: i as i64,
            submit: i / 50,
            run: 30 + (i * 37) % 600,
            estimate: 60 + (i * 37) % 600,
            procs: 1 + (i % 7) as u32 * 2,
            user: (i % 5) as i64,
            group: -1,
            exe: -1,
            mem: -1,
        })
        .collect();
    let whole = slurp_sim::Window { start: 0, len: 400 };
    let schedule = slurp_fair::chooser::replay(model.clone(), &deep, whole, false, None).unwrap();
    valid(&deep, &schedule).unwrap();
    // The model's choices are not FCFS's: the orders differ.
    let fcfs = slurp_sim::engine::run(&workload, window, slurp_runtime::core::PolicyKind::FCFS);
    let learned = slurp_fair::chooser::replay(model, &workload, window, false, None).unwrap();
    assert_ne!(fcfs.order, learned.order, "the chooser was not consulted");
}

/// `--policy fair` is the shipped model, built into the binary: it loads
/// without a file, with RICC-2010-2's normalisers (the trace it was
/// trained on: 1024 nodes × 8 processors, 176 users), and runs in the
/// direct evaluator.
#[test]
fn the_shipped_model_is_built_in_with_its_normalisers() {
    let model = slurp_fair::built_in("fair").expect("the built-in model loads");
    assert_eq!(model.evaluator(), "direct");
    assert_eq!(model.normalisers.max_procs, 8192.0);
    assert_eq!(model.normalisers.max_user, 176.0);
    // fair-v2 is built in too: the v2 observation, no normalisers.
    let v2 = slurp_fair::built_in("fair-v2").expect("fair-v2 loads");
    assert_eq!(v2.sight, slurp_fair::Sight::V2);
    assert_eq!(v2.evaluator(), "direct");
}

#[test]
fn in_slurps_model_a_teacher_plays_the_cores_own_schedule() {
    use slurp_runtime::core::{Backfill, Order, PolicyKind};
    let workload = busy();
    for sight in [slurp_fair::Sight::V1, slurp_fair::Sight::V2] {
        let opts = Options {
            model: slurp_sim::Model::Slurp,
            sight,
            ..options(9)
        };
        for order in [Order::Fcfs, Order::Sjf, Order::F1] {
            let played = rollout::rollout(
                Player::Teacher(order),
                std::slice::from_ref(&workload),
                &opts,
            )
            .unwrap();
            assert_eq!(played.len(), 6);
            for t in &played {
                // The recording chooser picking the heuristic's best shown
                // job makes the schedule the core makes under that order.
                let own = slurp_sim::simulate(
                    &workload,
                    t.window,
                    PolicyKind::new(order, Backfill::None),
                    slurp_sim::Model::Slurp,
                );
                let own = slurp_sim::Metrics::of(&workload, &own, slurp_sim::Model::Slurp);
                assert_eq!(
                    t.metrics.worst_user_bounded_slowdown, own.worst_user_bounded_slowdown,
                    "{order:?} {sight:?} {}",
                    t.window
                );
                // Only decisions with a choice are kept.
                assert!(!t.steps.is_empty());
                for step in &t.steps {
                    assert!(step.mask.iter().sum::<f32>() >= 2.0);
                    assert_eq!(step.mask[step.action as usize], 1.0);
                }
            }
        }
    }
}

#[test]
fn several_workloads_take_turns_and_keep_their_own_windows() {
    use slurp_runtime::core::Order;
    let one = busy();
    let two = Workload::new(
        &slurp_sim::generate::generate(&slurp_sim::generate::Family::Small.spec(600), 4),
        Machine {
            nodes: 64,
            procs_per_node: 1,
        },
    );
    let both = [one.clone(), two];
    let opts = Options {
        trajectories: 5,
        mixed: true,
        ..options(3)
    };
    let played = rollout::rollout(Player::Teacher(Order::Sjf), &both, &opts).unwrap();
    let from: Vec<usize> = played.iter().map(|t| t.workload).collect();
    assert_eq!(from.iter().filter(|&&w| w == 0).count(), 3, "{from:?}");
    assert_eq!(from.iter().filter(|&&w| w == 1).count(), 2, "{from:?}");
    // Every other episode backfills.
    let backfilled: Vec<bool> = played.iter().map(|t| t.backfill).collect();
    assert_eq!(backfilled, [false, true, false, true, false]);
    // The first workload draws the windows it draws alone with 3 episodes.
    let alone = rollout::rollout(
        Player::Teacher(Order::Sjf),
        std::slice::from_ref(&one),
        &Options {
            trajectories: 3,
            ..options(3)
        },
    )
    .unwrap();
    let mine: Vec<_> = played
        .iter()
        .filter(|t| t.workload == 0)
        .map(|t| t.window)
        .collect();
    let theirs: Vec<_> = alone.iter().map(|t| t.window).collect();
    assert_eq!(mine, theirs);
}

/// `jobs` jobs of `family` (seed 2) on 64 one-core nodes: many users on a
/// small machine, so the queue is long.
fn on_64_cores(family: slurp_sim::generate::Family, jobs: usize) -> Workload {
    Workload::new(
        &slurp_sim::generate::generate(&family.spec(jobs), 2),
        Machine {
            nodes: 64,
            procs_per_node: 1,
        },
    )
}

#[test]
fn a_fairshare_teacher_plays_fairshare_on_many_users() {
    use slurp_runtime::core::{Backfill, Order, PolicyKind};
    let workload = on_64_cores(slurp_sim::generate::Family::Small, 3000);
    let opts = Options {
        model: slurp_sim::Model::Slurp,
        sight: slurp_fair::Sight::V2,
        min_bsld: 3.0,
        ..options(5)
    };
    let played = rollout::rollout(
        Player::Teacher(Order::Fairshare),
        std::slice::from_ref(&workload),
        &opts,
    )
    .unwrap();
    let mut differs = false;
    for t in &played {
        // Windows of 64 jobs: every queued job is shown, so the teacher's
        // pick is the core's fair-share head.
        let schedule = |order| {
            let s = slurp_sim::simulate(
                &workload,
                t.window,
                PolicyKind::new(order, Backfill::None),
                slurp_sim::Model::Slurp,
            );
            slurp_sim::Metrics::of(&workload, &s, slurp_sim::Model::Slurp)
        };
        let own = schedule(Order::Fairshare);
        assert_eq!(
            t.metrics.worst_user_bounded_slowdown,
            own.worst_user_bounded_slowdown
        );
        assert!(own.users > 1);
        differs |=
            own.worst_user_bounded_slowdown != schedule(Order::Fcfs).worst_user_bounded_slowdown;
    }
    assert!(differs, "on these windows fairshare is not FCFS");
}

#[test]
fn a_fairshare_teacher_plays_fairshare_in_the_reference_model_too() {
    use slurp_runtime::core::Order;
    let workload = on_64_cores(slurp_sim::generate::Family::Mid, 6000);
    for backfill in [false, true] {
        // Windows of 1,024 jobs: queues longer than the slots, where the
        // first user's earliest job is shown by the wider slots.
        let opts = Options {
            sight: slurp_fair::Sight::V5,
            len: 1024,
            backfill,
            min_bsld: 3.0,
            ..options(3)
        };
        let played = rollout::rollout(
            Player::Teacher(Order::Fairshare),
            std::slice::from_ref(&workload),
            &opts,
        )
        .unwrap();
        assert!(!played.is_empty());
        for t in &played {
            let own = slurp_sim::reference::run(&workload, t.window, Order::Fairshare, backfill);
            let fcfs = slurp_sim::reference::run(&workload, t.window, Order::Fcfs, backfill);
            let metrics = |s| slurp_sim::Metrics::of(&workload, s, slurp_sim::Model::Reference);
            assert_eq!(
                t.metrics.worst_user_bounded_slowdown,
                metrics(&own).worst_user_bounded_slowdown,
                "backfill {backfill}"
            );
            assert_ne!(own.order, fcfs.order, "fairshare is FCFS on this window");
        }
    }
}
