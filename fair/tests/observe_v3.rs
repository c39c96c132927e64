//! The v3 observation: v2's features over slots that show, however long
//! the queue, the job each rival heuristic would start next — the oldest,
//! and every user's earliest in fair-share turns — where v1's and v2's
//! slots (shortest and narrowest only) hid them. And v4's, v3's with
//! widths on log scales.

use std::sync::Arc;

use slurp_fair::observe::{SLOTS, slots};
use slurp_fair::observe_v2::{Standing, in_turn, wide_slots};
use slurp_fair::{Model, Sight};
use slurp_runtime::core::Time;
use slurp_sim::generate::Family;
use slurp_sim::reference::Decision;
use slurp_sim::{Machine, SimJob, Window};

mod common;
use common::{data, scaled};

fn job(submit: u64, estimate: u64, procs: u32, user: i64) -> SimJob {
    SimJob {
        id: 0,
        submit,
        run: estimate,
        estimate,
        procs,
        user,
        group: -1,
        exe: -1,
        mem: -1,
    }
}

fn ms(s: u64) -> Time {
    Time(s * 1000)
}

/// A busy queue of 300: job 0, the oldest, is wide and long (user 2);
/// jobs 1–249 are user 1's, short and narrow; 250–299 belong to users 3–7,
/// each as long and wide as job 0 but submitted later.
fn busy_queue() -> Vec<SimJob> {
    let mut jobs = vec![job(0, 86_400, 64, 2)];
    jobs.extend((1..250).map(|i| job(100 + i, 60, 1, 1)));
    jobs.extend((250..300).map(|i| job(1_000 + i, 86_400, 64, 3 + (i as i64 % 5))));
    jobs
}

#[test]
fn a_long_queue_shows_the_oldest_job_and_each_users_earliest() {
    let jobs = busy_queue();
    let mut queue: Vec<u32> = (0..300).rev().collect();
    // Users 1 and 3 have used the machine; 2, 4–7 nothing (they tie, and
    // the earliest queued job goes first).
    let mut standing = Standing::default();
    standing.started(1, 0, 600, 32, ms(0));
    standing.started(3, 0, 600, 8, ms(0));
    let d = Decision {
        now: 5_000,
        jobs: &jobs,
        machine: Machine {
            nodes: 128,
            procs_per_node: 1,
        },
        free_nodes: 0,
        queue: &mut queue,
        started: &[],
        starts: &[],
        running: &[],
    };
    let earliest = |user: i64| {
        (0..300u32)
            .find(|&j| jobs[j as usize].user == user)
            .unwrap()
    };
    // v1's and v2's slots: the shortest and the narrowest — user 1's — so
    // the oldest job and users 2–7 are never seen.
    let narrow = slots(&d);
    assert_eq!(narrow.len(), SLOTS);
    assert!(
        narrow.iter().all(|&j| jobs[j as usize].user == 1),
        "{narrow:?}"
    );
    let wide = wide_slots(&d, &standing, ms(5_000));
    assert_eq!(wide.len(), SLOTS);
    let mut unique = wide.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), SLOTS, "a job is shown once");
    for user in 1..=7 {
        assert!(wide.contains(&earliest(user)), "user {user}'s earliest job");
    }
    // Taken in turn: fair share's first (user 2's job 0: no usage, the
    // earliest), the oldest (job 0 again, so the next oldest), the
    // shortest, the narrowest (user 1's first two, by submission).
    assert_eq!(&wide[..4], &[0, 1, 2, 3]);
    // Fair share's order: the users who used nothing by their earliest job
    // (2, then 4–7 by their first submission, 3 and 1 last by usage: 1 used
    // more).
    let turns = in_turn(
        &standing,
        ms(5_000),
        (1..=7i64).map(|user| {
            let mine: Vec<(u64, u32)> = (0..300u32)
                .filter(|&j| jobs[j as usize].user == user)
                .map(|j| (jobs[j as usize].submit, j))
                .collect();
            (user, mine.into_iter())
        }),
    );
    let firsts: Vec<i64> = turns[..7].iter().map(|&j| jobs[j as usize].user).collect();
    let mut idle = [2, 4, 5, 6, 7];
    idle.sort_by_key(|&u| jobs[earliest(u) as usize].submit);
    assert_eq!(firsts[..5], idle[..]);
    assert_eq!(firsts[5..], [3, 1]);
    // Then each user's second job, in the same turn order (user 2 has
    // none).
    assert_eq!(jobs[turns[7] as usize].user, idle[1]);
    assert_eq!(turns.len(), SLOTS);
    // A short queue is shown whole in submit order, as before.
    let mut short: Vec<u32> = (0..100).rev().collect();
    let d = Decision {
        queue: &mut short,
        ..d
    };
    assert_eq!(wide_slots(&d, &standing, ms(5_000)), slots(&d));
}

/// actor-v2.onnx's network written as a model seeing `sight`.
fn model_seeing(dir: &std::path::Path, sight: Sight) -> Arc<Model> {
    let v2 = Model::load(&data("actor-v2.onnx"), None).unwrap();
    let layers = v2.layers().expect("a per-slot MLP");
    let path = dir.join(format!("actor-{}.onnx", sight.name()));
    std::fs::write(&path, slurp_fair::export::actor(&layers, sight.name(), &[])).unwrap();
    let model = Model::load(&path, None).unwrap();
    assert_eq!(model.sight, sight);
    Arc::new(model)
}

fn v3_model(dir: &std::path::Path) -> Arc<Model> {
    model_seeing(dir, Sight::V3)
}

/// Replays a saturated workload and the same on twice the cores and twice
/// the widths with `model`, in both simulation models, with and without
/// backfilling: the same choices on both; and `other` (the same weights
/// seeing another observation) choosing otherwise wherever `differs`
/// says it must (given whether EASY backfills).
fn blind_to_the_size_and_unlike(model: &Arc<Model>, other: &Arc<Model>, differs: fn(bool) -> bool) {
    let window = Window {
        start: 0,
        len: 1024,
    };
    let (one, two) = (
        scaled(Family::Saturated, 1024, 4, 1, true),
        scaled(Family::Saturated, 1024, 4, 2, true),
    );
    let sights = (model.sight.name(), other.sight.name());
    for backfill in [false, true] {
        // slurp's model (in a debug build the chooser checks, at every
        // decision, that the views it keeps give `wide_slots`' slots).
        let a = slurp_fair::chooser::replay(model.clone(), &one, window, backfill, None).unwrap();
        let b = slurp_fair::chooser::replay(model.clone(), &two, window, backfill, None).unwrap();
        assert_eq!(a.order, b.order, "slurp's model, backfill {backfill}");
        assert_eq!(a.starts, b.starts);
        let old = slurp_fair::chooser::replay(other.clone(), &one, window, backfill, None).unwrap();
        assert!(
            !differs(backfill) || a.order != old.order,
            "{sights:?} chose alike in slurp's model, backfill {backfill}"
        );
        let a = slurp_fair::rollout::replay(model, &one, window, backfill, None).unwrap();
        let b = slurp_fair::rollout::replay(model, &two, window, backfill, None).unwrap();
        assert_eq!(a.order, b.order, "reference model, backfill {backfill}");
        let old = slurp_fair::rollout::replay(other, &one, window, backfill, None).unwrap();
        assert!(
            !differs(backfill) || a.order != old.order,
            "{sights:?} chose alike in the reference model, backfill {backfill}"
        );
    }
}

#[test]
fn a_v3_model_sees_long_queues_whole_and_is_blind_to_the_machines_size() {
    let dir = tempfile::tempdir().unwrap();
    let v2 = Arc::new(Model::load(&data("actor-v2.onnx"), None).unwrap());
    // Without backfilling the queue grows past the slots (with EASY it
    // stays shorter here), and there the two sights differ.
    blind_to_the_size_and_unlike(&v3_model(dir.path()), &v2, |backfill| !backfill);
}

/// v4 shows widths on log scales (features 1 and 8): a model that sees them
/// is as blind to the machine's size as v3, and chooses otherwise than the
/// same weights seeing v3, in both simulation models.
#[test]
fn a_v4_model_is_blind_to_the_machines_size_and_sees_widths_v3_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let v4 = model_seeing(dir.path(), Sight::V4);
    blind_to_the_size_and_unlike(&v4, &v3_model(dir.path()), |_| true);
}

/// v5 gives feature 1 to the user's place in fair-share turns: usages
/// grow with the cores alike for every user, so their order, and a v5
/// model's choices, are the same on twice the machine; and the same
/// weights seeing v4 choose otherwise.
#[test]
fn a_v5_model_is_blind_to_the_machines_size_and_sees_turns_v4_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let v5 = model_seeing(dir.path(), Sight::V5);
    blind_to_the_size_and_unlike(&v5, &model_seeing(dir.path(), Sight::V4), |_| true);
}

/// What v4 is for: on an instance of 8,192 cores a one-core job and a
/// 64-core one are 0.3 apart in its feature 1 (0.0077 in v3's), and its
/// feature 8 places each width against the other shown jobs'.
#[test]
fn v4_tells_narrow_jobs_apart_on_a_large_instance() {
    use slurp_fair::Sight;
    use slurp_fair::observe_v2::{Shown, Standing, observe};
    let shown: Vec<Shown> = [64u64, 1, 8]
        .iter()
        .map(|&cores| Shown {
            cores,
            estimate: 3600,
            wait: 600,
            user: 1,
            fits: true,
        })
        .collect();
    let feature = |sight: Sight, slot: usize, f: usize| {
        let obs = observe(
            &shown,
            vec![0, 1, 2],
            8192,
            &Standing::default(),
            None,
            ms(1_000),
            sight,
        );
        obs.features[slot * slurp_fair::FEATURES + f - 1]
    };
    let apart = |widths| feature(widths, 0, 1) - feature(widths, 1, 1);
    assert!(apart(Sight::V3) < 0.01, "{}", apart(Sight::V3));
    assert!((apart(Sight::V4) - 64f32.log10() / 6.0).abs() < 1e-6);
    // Against the geometric mean width of the three, 8 cores: ±log10(8)/2.
    assert!((feature(Sight::V4, 0, 8) - 8f32.log10() / 2.0).abs() < 1e-6);
    assert!((feature(Sight::V4, 1, 8) + 8f32.log10() / 2.0).abs() < 1e-6);
    assert!(feature(Sight::V4, 2, 8).abs() < 1e-6);
}

/// In the reference model the slots are read from views of the queue kept
/// between decisions (`kept::Views`), and the waiting jobs' sums are kept
/// as they arrive and start: on a saturated workload, whose queue runs to
/// hundreds, every decision shows the jobs a fresh selection from the whole
/// queue shows, with the same features but for the rounding of those sums.
#[test]
fn a_replays_kept_slots_are_a_fresh_selection_from_the_whole_queue() {
    use slurp_fair::observe_v2::{Follow, Projection, Shown, Waiting, observe};
    use slurp_runtime::core::Order;
    use slurp_sim::generate::generate;
    use slurp_sim::reference::{key, run_choosing};

    let trace = generate(&Family::Saturated.spec(1500), 11);
    let workload = slurp_sim::Workload::new(&trace, Machine::of(&trace).unwrap());
    let window = Window {
        start: 200,
        len: 1200,
    };
    for sight in [Sight::V2, Sight::V4, Sight::V5, Sight::V9] {
        for backfill in [false, true] {
            let mut follow = Follow::new(sight);
            let (mut deepest, mut decisions) = (0, 0);
            run_choosing(&workload, window, backfill, |d| {
                let kept = follow.observe(d);
                let now = ms(d.now);
                let standing = follow.standing();
                let fresh_slots = if sight.wide() {
                    wide_slots(d, standing, now)
                } else {
                    slots(d)
                };
                assert_eq!(kept.jobs, fresh_slots, "{sight:?} at {}", d.now);
                let waiting = Waiting::of(d.queue.iter().map(|&j| &d.jobs[j as usize]));
                let shown: Vec<Shown> = fresh_slots
                    .iter()
                    .map(|&j| Shown::of(&d.jobs[j as usize], d.now, d.fits(j)))
                    .collect();
                let fresh = observe(
                    &shown,
                    fresh_slots,
                    d.machine.procs(),
                    standing,
                    sight
                        .wide()
                        .then(|| Projection::scan(standing, &waiting, now)),
                    now,
                    sight,
                );
                for (i, (a, b)) in kept.features.iter().zip(&fresh.features).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-5 * b.abs().max(1.0),
                        "{sight:?} at {}: feature {i} kept {a}, fresh {b}",
                        d.now
                    );
                }
                deepest = deepest.max(d.queue.len());
                decisions += 1;
                // F1's job: the replay goes on as a heuristic's would.
                *d.queue
                    .iter()
                    .min_by_key(|&&j| (key(Order::F1, &d.jobs[j as usize], d.now), j))
                    .unwrap()
            });
            assert!(
                deepest > SLOTS,
                "{sight:?}: the queue reached only {deepest}"
            );
            assert!(decisions > 500, "{decisions} decisions");
        }
    }
}
