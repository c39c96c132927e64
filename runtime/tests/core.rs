//! The scheduler core on a fake clock: hand-checked schedules, and
//! properties over random workloads for every policy.

use std::collections::{BTreeMap, HashSet};

use proptest::prelude::*;
use slurp_runtime::core::{
    Backfill, Core, Event, FairShare, Job, Order, Outcome, Part, PolicyKind, Queue, Reason, State,
    Time,
};
use slurp_runtime::{Capacity, Request, TaskId};

const CAP: Capacity = Capacity {
    nodes: 2,
    cores_per_node: 4,
    gpus_per_node: 1,
    mem_per_node: 8 << 30,
};

#[derive(Debug, Clone)]
struct Spec {
    job: Job,
    /// Seconds the attempt really runs.
    runtime: u64,
    /// Exit status of every attempt.
    fails: bool,
    deps: Vec<u32>,
}

#[derive(Debug, Default)]
struct Trace {
    starts: BTreeMap<u32, Vec<Time>>,
    ends: BTreeMap<u32, Time>,
    finals: BTreeMap<u32, (State, Reason)>,
    order: Vec<u32>,
    /// (head, reservation) seen after each scheduling pass.
    reservations: Vec<(u32, Time)>,
}

/// Runs the workload to the end on a fake clock, checking at every instant
/// that no core or GPU id is held twice and no node's memory is exceeded.
fn simulate(capacity: Capacity, policy: PolicyKind, specs: &[Spec]) -> Trace {
    simulate_cohorts(capacity, policy, specs, &[])
}

/// `simulate` with the tasks of each `(first, count)` of `cohorts` one
/// cohort (they must ask the same and have no dependencies or dependents).
fn simulate_cohorts(
    capacity: Capacity,
    policy: PolicyKind,
    specs: &[Spec],
    cohorts: &[(u32, u32)],
) -> Trace {
    let mut parts = Vec::new();
    let mut t = 0;
    for &(first, count) in cohorts {
        parts.extend((t..first).map(|i| Part::One(specs[i as usize].job.clone())));
        parts.push(Part::Many(specs[first as usize].job.clone(), count));
        t = first + count;
    }
    parts.extend((t..specs.len() as u32).map(|i| Part::One(specs[i as usize].job.clone())));
    // Without cohorts, the tasks one by one (the constructor traces use).
    let core = if cohorts.is_empty() {
        let jobs = specs.iter().map(|s| s.job.clone()).collect();
        Core::new(
            capacity,
            policy,
            jobs,
            |t| specs[t as usize].deps.clone(),
            Time(0),
        )
    } else {
        Core::with_parts(
            capacity,
            policy,
            parts,
            |t| specs[t as usize].deps.clone(),
            Time(0),
        )
    };
    play(core, capacity, specs)
}

fn play(mut core: Core, capacity: Capacity, specs: &[Spec]) -> Trace {
    let mut now = Time(0);
    let mut trace = Trace::default();
    let mut running: BTreeMap<u32, (Time, slurp_runtime::core::Alloc)> = BTreeMap::new();
    loop {
        core.schedule(now);
        if let Some((head, at, _)) = core.reservation(now)
            && at != Time::NEVER
        {
            trace.reservations.push((head, at));
        }
        for event in core.drain().collect::<Vec<_>>() {
            match event {
                Event::Start {
                    task, alloc, time, ..
                } => {
                    let spec = &specs[task.0 as usize];
                    trace.starts.entry(task.0).or_default().push(time);
                    trace.order.push(task.0);
                    running.insert(task.0, (time.plus_secs(spec.runtime), alloc));
                }
                Event::Transition {
                    task, to, reason, ..
                } if to.is_final() => {
                    trace.finals.insert(task.0, (to, reason));
                }
                Event::Transition { .. } | Event::Stretch { .. } => {}
            }
        }
        // No id held twice, no memory over a node.
        let mut held = HashSet::new();
        let mut mem = vec![0u64; capacity.nodes as usize];
        for (_, alloc) in running.values() {
            for s in &alloc.slices {
                for &c in &s.cores {
                    assert!(
                        held.insert(("core", s.node, c)),
                        "core {c} of node {} held twice",
                        s.node
                    );
                    assert!(c < capacity.cores_per_node);
                }
                for &g in &s.gpus {
                    assert!(held.insert(("gpu", s.node, g)), "gpu {g} held twice");
                }
                mem[s.node as usize] += s.mem;
            }
        }
        assert!(
            mem.iter().all(|&m| m <= capacity.mem_per_node),
            "memory oversubscribed"
        );
        if core.is_done() {
            break;
        }
        let Some((&task, &(end, _))) = running.iter().min_by_key(|(t, (end, _))| (*end, **t))
        else {
            panic!("nothing running but not done: {:?}", core.counts());
        };
        now = end;
        running.remove(&task);
        trace.ends.insert(task, end);
        let spec = &specs[task as usize];
        let outcome = if spec.job.time_limit.is_some_and(|l| spec.runtime > l) {
            Outcome::Timeout
        } else if spec.fails {
            Outcome::Exit(1)
        } else {
            Outcome::Success
        };
        core.on_finished(now, TaskId(task), outcome);
    }
    trace
}

fn job(ntasks: u32, cores: u32, limit: Option<u64>) -> Job {
    Job {
        request: Request {
            ntasks,
            cores,
            gpus: 0,
            mem: 0,
            nodes: 0,
        },
        time_limit: limit,
        retries: 0,
        user: 0,
    }
}

fn spec(job: Job, runtime: u64) -> Spec {
    Spec {
        job,
        runtime,
        fails: false,
        deps: Vec::new(),
    }
}

const ONE_NODE: Capacity = Capacity {
    nodes: 1,
    cores_per_node: 4,
    gpus_per_node: 0,
    mem_per_node: 0,
};

#[test]
fn fcfs_blocks_behind_a_head_that_does_not_fit() {
    // 0 takes 3 of 4 cores for 10 s; 1 needs 4; 2 needs 1 and could run now.
    let specs = [
        spec(job(3, 1, Some(10)), 10),
        spec(job(4, 1, Some(5)), 5),
        spec(job(1, 1, Some(1)), 1),
    ];
    let trace = simulate(ONE_NODE, PolicyKind::FCFS, &specs);
    assert_eq!(trace.starts[&1], [Time(10_000)]);
    assert_eq!(
        trace.starts[&2],
        [Time(15_000)],
        "fcfs never jumps the queue"
    );
}

#[test]
fn easy_backfills_what_ends_before_the_reservation_only() {
    // Head (1) is reserved at 10 s. Task 2 (1 core, 5 s) ends before it:
    // backfilled at 0. Task 3 (1 core, 20 s) would delay it: waits.
    let specs = [
        spec(job(3, 1, Some(10)), 10),
        spec(job(4, 1, Some(5)), 5),
        spec(job(1, 1, Some(5)), 5),
        spec(job(1, 1, Some(20)), 20),
    ];
    let trace = simulate(ONE_NODE, PolicyKind::EASY, &specs);
    assert_eq!(trace.starts[&2], [Time(0)]);
    assert_eq!(
        trace.starts[&1],
        [Time(10_000)],
        "the head starts at its reservation"
    );
    assert_eq!(trace.starts[&3], [Time(15_000)]);
}

#[test]
fn easy_lets_an_unbounded_task_use_only_what_the_head_leaves() {
    // Head needs 2 cores at 10 s; 4 - 2 = 2 cores stay spare then, so one
    // unbounded 1-core task may start now, a second 2-core one may not.
    let specs = [
        spec(job(3, 1, Some(10)), 10),
        spec(job(2, 1, Some(5)), 5),
        spec(job(1, 1, None), 30),
        spec(job(1, 2, None), 1),
    ];
    let trace = simulate(ONE_NODE, PolicyKind::EASY, &specs);
    assert_eq!(trace.starts[&2], [Time(0)]);
    assert_eq!(trace.starts[&1], [Time(10_000)]);
    assert!(trace.starts[&3][0] >= Time(10_000));
}

#[test]
fn sjf_runs_the_shortest_first() {
    let specs = [
        spec(job(4, 1, Some(1)), 1),
        spec(job(4, 1, Some(50)), 50),
        spec(job(4, 1, Some(5)), 5),
        spec(job(4, 1, None), 1),
    ];
    let trace = simulate(ONE_NODE, PolicyKind::SJF, &specs);
    assert_eq!(trace.order, [0, 2, 1, 3]);
}

#[test]
fn conservative_backfills_without_delaying_any_reservation() {
    // 0 runs 10 s on 3 cores. 1 (4 cores) is reserved at 10 s; 2 (2 cores,
    // 5 s) is reserved at 15 s; 3 (1 core, 5 s) fits now and delays neither.
    let specs = [
        spec(job(3, 1, Some(10)), 10),
        spec(job(4, 1, Some(5)), 5),
        spec(job(2, 1, Some(5)), 5),
        spec(job(1, 1, Some(5)), 5),
    ];
    let trace = simulate(ONE_NODE, PolicyKind::CONSERVATIVE, &specs);
    assert_eq!(trace.starts[&3], [Time(0)]);
    assert_eq!(trace.starts[&1], [Time(10_000)]);
    assert_eq!(trace.starts[&2], [Time(15_000)]);
}

#[test]
fn a_failed_dependency_skips_everything_downstream_with_the_reason() {
    let mut specs = vec![
        spec(job(1, 1, None), 1),
        spec(job(1, 1, None), 1),
        spec(job(1, 1, None), 1),
        spec(job(1, 1, None), 1),
    ];
    specs[0].fails = true;
    specs[1].deps = vec![0];
    specs[2].deps = vec![1];
    let trace = simulate(ONE_NODE, PolicyKind::EASY, &specs);
    assert_eq!(trace.finals[&0].0, State::Failed);
    assert_eq!(
        trace.finals[&1],
        (State::Skipped, Reason::Dependency(TaskId(0)))
    );
    assert_eq!(
        trace.finals[&2],
        (State::Skipped, Reason::Dependency(TaskId(1)))
    );
    assert_eq!(trace.finals[&3].0, State::Succeeded);
}

#[test]
fn retries_rerun_a_failing_task_then_give_up() {
    let mut specs = vec![spec(
        Job {
            retries: 2,
            ..job(1, 1, None)
        },
        1,
    )];
    specs[0].fails = true;
    let trace = simulate(ONE_NODE, PolicyKind::EASY, &specs);
    assert_eq!(trace.starts[&0].len(), 3, "one attempt and two retries");
    assert_eq!(trace.finals[&0].0, State::Failed);
}

#[test]
fn a_task_over_its_limit_times_out_and_its_dependents_are_skipped() {
    let mut specs = vec![spec(job(1, 1, Some(5)), 9), spec(job(1, 1, None), 1)];
    specs[1].deps = vec![0];
    let trace = simulate(ONE_NODE, PolicyKind::EASY, &specs);
    assert_eq!(trace.finals[&0].0, State::Timeout);
    assert_eq!(trace.finals[&1].0, State::Skipped);
}

#[test]
fn halt_cancels_everything_not_yet_running() {
    let jobs = vec![job(4, 1, None), job(1, 1, None), job(1, 1, None)];
    let mut core = Core::new(ONE_NODE, PolicyKind::EASY, jobs, |_| Vec::new(), Time(0));
    core.schedule(Time(0));
    core.halt(Time(5));
    assert_eq!(core.state(TaskId(0)), State::Running);
    assert_eq!(core.state(TaskId(1)), State::Cancelled);
    core.schedule(Time(6));
    core.on_finished(Time(7), TaskId(0), Outcome::Success);
    core.schedule(Time(7));
    assert!(core.is_done());
    assert_eq!(
        core.state(TaskId(2)),
        State::Cancelled,
        "nothing starts after a halt"
    );
}

fn arb_specs(max: usize, failures: bool) -> impl Strategy<Value = Vec<Spec>> {
    prop::collection::vec(
        (
            1u32..=3,
            1u32..=4,
            0u32..=1,
            0u64..=2,
            prop::option::of(1u64..=20),
            1u64..=25,
            prop::bool::weighted(if failures { 0.2 } else { 0.0 }),
            prop::collection::vec(any::<prop::sample::Index>(), 0..3),
            0u32..=1,
        ),
        1..max,
    )
    .prop_map(|raw| {
        raw.into_iter()
            .enumerate()
            .map(
                |(i, (ntasks, cores, gpus, mem_g, limit, runtime, fails, deps, retries))| {
                    let mut request = Request {
                        ntasks: if cores > 2 { 1 } else { ntasks },
                        cores,
                        gpus,
                        mem: mem_g << 30,
                        nodes: 0,
                    };
                    // The interpreter refuses requests that can never fit.
                    if CAP.fits(&request).is_err() {
                        request.ntasks = 1;
                    }
                    Spec {
                        job: Job {
                            request,
                            time_limit: limit,
                            retries,
                            // Three users, for `fairshare`.
                            user: (i % 3) as u32,
                        },
                        runtime,
                        fails,
                        // Dependencies only on earlier tasks: always a DAG.
                        deps: if i == 0 {
                            Vec::new()
                        } else {
                            deps.iter().map(|d| d.index(i) as u32).collect()
                        },
                    }
                },
            )
            .collect()
    })
}

/// Every order with every backfilling mode.
fn policies() -> Vec<PolicyKind> {
    Order::ALL
        .into_iter()
        .flat_map(|o| {
            [Backfill::None, Backfill::Easy, Backfill::Conservative].map(|b| PolicyKind::new(o, b))
        })
        .collect()
}

#[test]
fn policy_names_round_trip() {
    for policy in policies() {
        assert_eq!(policy.to_string().parse::<PolicyKind>(), Ok(policy));
    }
    assert_eq!(
        "sjf+bf".parse::<PolicyKind>(),
        Ok(PolicyKind::new(Order::Sjf, Backfill::Easy))
    );
    assert_eq!("fcfs+easy".parse::<PolicyKind>(), Ok(PolicyKind::EASY));
    for bad in ["", "sjf+", "easy+easy", "lifo", "f1+bff"] {
        assert!(bad.parse::<PolicyKind>().is_err(), "{bad:?} parsed");
    }
}

#[test]
fn f1_weighs_time_and_width() {
    // All submitted at 0 (s = 0.1 for all): key = log10(r)·n + const.
    // 1: r=100,n=1 → 2; 2: r=10,n=4 → 4; 3: r=1000,n=1 → 3. Order 1,3,2.
    let specs = [
        spec(job(4, 1, Some(1)), 1),
        spec(job(1, 1, Some(100)), 100),
        spec(job(4, 1, Some(10)), 10),
        spec(job(1, 1, Some(1000)), 1),
    ];
    let trace = simulate(ONE_NODE, PolicyKind::new(Order::F1, Backfill::None), &specs);
    assert_eq!(trace.order[..2], [0, 1]);
    assert_eq!(trace.order[2..], [3, 2], "order {:?}", trace.order);
}

#[test]
fn wfp3_prefers_short_waiting_tasks() {
    // At 10 s both waited 10 s: 1 (4 cores, r 100): −(0.1)³·4 = −0.004;
    // 2 (1 core, r 10): −1. The narrow short one goes first, unlike FCFS.
    let specs = [
        spec(job(4, 1, Some(10)), 10),
        spec(job(4, 1, Some(100)), 5),
        spec(job(1, 1, Some(10)), 5),
    ];
    let wfp3 = simulate(
        ONE_NODE,
        PolicyKind::new(Order::Wfp3, Backfill::None),
        &specs,
    );
    assert_eq!(wfp3.order, [0, 2, 1]);
    let fcfs = simulate(ONE_NODE, PolicyKind::FCFS, &specs);
    assert_eq!(fcfs.order, [0, 1, 2]);
}

fn of(user: u32, job: Job) -> Job {
    Job { user, ..job }
}

#[test]
fn fairshare_starts_the_user_who_used_least() {
    // One node of 4 cores; every task takes all 4 for 100 s. User 1 asks
    // first (0, 1, 3), user 2 later (2). At 0 nobody used anything: the
    // earliest task (0) starts. At 100 user 1 has used 400 core-seconds and
    // user 2 none: 2 starts before 1, which FCFS would start. At 200 both
    // used 400, but user 1's are older and so decayed more: 1, then 3.
    let specs = [
        spec(of(1, job(4, 1, Some(100))), 100),
        spec(of(1, job(4, 1, Some(100))), 100),
        spec(of(2, job(4, 1, Some(100))), 100),
        spec(of(1, job(4, 1, Some(100))), 100),
    ];
    let fairshare = PolicyKind::new(Order::Fairshare, Backfill::None);
    assert_eq!(simulate(ONE_NODE, fairshare, &specs).order, [0, 2, 1, 3]);
    assert_eq!(
        simulate(ONE_NODE, PolicyKind::FCFS, &specs).order,
        [0, 1, 2, 3]
    );
    // With EASY around the fair-share head: the same here (nothing fits
    // beside a 4-core task).
    let easy = PolicyKind::new(Order::Fairshare, Backfill::Easy);
    assert_eq!(simulate(ONE_NODE, easy, &specs).order, [0, 2, 1, 3]);
}

#[test]
fn fairshare_factors_follow_the_formula() {
    // Half-life 100 s. User 1 holds 2 cores over 0..100, user 2 holds 3
    // over 100..200, user 3 holds 1 from 150 and still runs at 200.
    let h: f64 = 100.0;
    let mut fs = FairShare::new(h);
    let t = |s: u64| Time(s * 1000);
    fs.started(1, 2, t(0));
    fs.ended(1, 2, t(0), t(100));
    fs.started(2, 3, t(100));
    fs.ended(2, 3, t(100), t(200));
    fs.started(3, 1, t(150));
    // n ∫ 2^(−(now − τ)/H) dτ over the run, by hand.
    let used = |n: f64, from: f64, to: f64, now: f64| {
        n * h / std::f64::consts::LN_2 * (2f64.powf(-(now - to) / h) - 2f64.powf(-(now - from) / h))
    };
    let u = [
        used(2.0, 0.0, 100.0, 200.0),
        used(3.0, 100.0, 200.0, 200.0),
        used(1.0, 150.0, 200.0, 200.0),
    ];
    let total: f64 = u.iter().sum();
    for (user, usage) in (1..=3).zip(u) {
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
        assert!(
            close(fs.usage(user, t(200)), usage),
            "user {user}: {} vs {usage}",
            fs.usage(user, t(200))
        );
        // F = 2^(−U/S), S = 1/3.
        let factor = (-(usage / total) * 3.0).exp2();
        assert!(close(fs.factor(user, t(200)), factor), "user {user}");
    }
    assert_eq!(fs.users(), 3);
    // Queued tasks: the head is the least-used user's (user 3: 42 against
    // user 1's 72, decayed from 144), then by usage, each user's tasks in
    // queue order.
    fs.queued(7, 2);
    fs.queued(5, 3);
    fs.queued(9, 1);
    fs.queued(4, 2);
    assert!(u[2] < u[0] && u[0] < u[1], "{u:?}");
    assert_eq!(fs.head(t(200)), Some(5));
    assert_eq!(fs.ranked(t(200), 10), [5, 9, 4, 7]);
    // A user nobody has seen has factor 1 and, queued, goes first.
    assert_eq!(fs.factor(4, t(200)), 1.0);
    fs.queued(8, 4);
    assert_eq!(fs.head(t(200)), Some(8));
    fs.left(8, 4);
    assert_eq!(fs.head(t(200)), Some(5));
    // Usage decays: a half-life later, each user's has halved (user 3's
    // run ended at 200).
    fs.ended(3, 1, t(150), t(200));
    assert!((fs.usage(2, t(300)) - u[1] / 2.0).abs() < 1e-9);
}

#[test]
fn fairshare_survives_years_of_half_lives() {
    // The scaled usage is rebased before it overflows: after 3,000
    // half-lives a user who used more still ranks after one who used less.
    let mut fs = FairShare::new(1.0);
    let t = |s: u64| Time(s * 1000);
    fs.started(1, 4, t(3000));
    fs.ended(1, 4, t(3000), t(3001));
    fs.started(2, 1, t(3000));
    fs.ended(2, 1, t(3000), t(3001));
    fs.queued(0, 1);
    fs.queued(1, 2);
    assert_eq!(fs.head(t(3001)), Some(1));
    assert!(fs.usage(1, t(3001)).is_finite());
    assert!((fs.usage(1, t(3001)) / fs.usage(2, t(3001)) - 4.0).abs() < 1e-9);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever the workload and policy: ids are never held twice (checked
    /// in `simulate` at every instant), nothing starts before its
    /// dependencies succeeded, and every task whose dependencies succeeded
    /// ran to a final state.
    #[test]
    fn dependencies_and_progress(specs in arb_specs(24, true), p in 0usize..15) {
        let trace = simulate(CAP, policies()[p], &specs);
        for (t, spec) in specs.iter().enumerate() {
            let t = t as u32;
            let (state, _) = &trace.finals[&t];
            let deps_ok = spec.deps.iter().all(|d| trace.finals[d].0 == State::Succeeded);
            if deps_ok {
                prop_assert!(trace.starts.contains_key(&t), "task {t} never ran though its dependencies succeeded");
                for d in &spec.deps {
                    prop_assert!(trace.starts[&t][0] >= trace.ends[d], "task {t} started before dependency {d} ended");
                }
            } else {
                prop_assert_eq!(*state, State::Skipped);
                prop_assert!(!trace.starts.contains_key(&t));
            }
        }
    }

    /// A cohort of identical tasks (a sweep's members) is one entry with a
    /// cursor, yet every task ends as it would if each were its own and
    /// starts as often; without backfilling and with conservative (which
    /// reserves for the members not yet admitted) each starts at the same
    /// time: those policies cannot tell a cohort from its members.
    #[test]
    fn cohorts_schedule_as_their_members_would(
        specs in arb_specs(24, true),
        marks in prop::collection::vec((any::<prop::sample::Index>(), 2u32..6), 0..4),
        p in 0usize..18,
    ) {
        let mut specs = specs;
        let n = specs.len() as u32;
        // Non-overlapping stretches, in order.
        let mut cohorts: Vec<(u32, u32)> = Vec::new();
        let mut starts: Vec<(u32, u32)> = marks.iter().map(|(i, len)| (i.index(n as usize) as u32, *len)).collect();
        starts.sort_unstable();
        for (first, len) in starts {
            let len = len.min(n - first);
            if len < 2 || cohorts.last().is_some_and(|&(f, l)| first < f + l) {
                continue;
            }
            cohorts.push((first, len));
        }
        let in_cohort = |t: u32| cohorts.iter().any(|&(f, l)| (f..f + l).contains(&t));
        for &(first, len) in &cohorts {
            for t in first..first + len {
                specs[t as usize].job = specs[first as usize].job.clone();
                specs[t as usize].deps.clear();
            }
        }
        for t in 0..n {
            specs[t as usize].deps.retain(|&d| !in_cohort(d));
        }
        let policy = policies()[p % policies().len()];
        let each = simulate(CAP, policy, &specs);
        let grouped = simulate_cohorts(CAP, policy, &specs, &cohorts);
        let counts = |t: &Trace| t.starts.iter().map(|(&k, v)| (k, v.len())).collect::<BTreeMap<_, _>>();
        prop_assert_eq!(counts(&grouped), counts(&each));
        if policy.backfill != Backfill::Easy {
            prop_assert_eq!(&grouped.starts, &each.starts, "{}", policy);
            prop_assert_eq!(&grouped.finals, &each.finals);
        } else {
            // EASY may backfill a cohort's members in another order, so
            // which failed dependency a skipped task names may differ; what
            // each task ends as may not.
            let named = |t: &Trace| t.finals.iter().map(|(&k, (state, reason))| {
                let reason = match reason {
                    Reason::Dependency(d) => {
                        assert!(specs[k as usize].deps.contains(&d.0) && t.finals[&d.0].0 != State::Succeeded);
                        None
                    }
                    other => Some(other.clone()),
                };
                (k, (*state, reason))
            }).collect::<BTreeMap<_, _>>();
            prop_assert_eq!(named(&grouped), named(&each));
        }
    }

    /// FCFS starts tasks in submission order.
    #[test]
    fn fcfs_starts_in_order(specs in arb_specs(24, false)) {
        let specs: Vec<Spec> = specs.into_iter().map(|s| Spec { deps: Vec::new(), ..s }).collect();
        let trace = simulate(CAP, PolicyKind::FCFS, &specs);
        let firsts: Vec<u32> = trace.order.iter().copied().filter({
            let mut seen = HashSet::new();
            move |t| seen.insert(*t)
        }).collect();
        prop_assert!(firsts.windows(2).all(|w| w[0] < w[1]), "start order {firsts:?}");
    }

    /// With runtimes within their limits, EASY starts the head no later than
    /// the reservation it was given.
    #[test]
    fn easy_never_delays_the_heads_reservation(specs in arb_specs(24, false)) {
        let specs: Vec<Spec> = specs.into_iter().map(|mut s| {
            s.deps.clear();
            if let Some(limit) = s.job.time_limit {
                s.runtime = s.runtime.min(limit);
            }
            s
        }).collect();
        let trace = simulate(CAP, PolicyKind::EASY, &specs);
        for (head, at) in &trace.reservations {
            prop_assert!(trace.starts[head][0] <= *at, "head {head} reserved at {at:?} started at {:?}", trace.starts[head][0]);
        }
    }
}

// --- A chooser in place of the order (learned policies) --------------------

/// Picks by a rule and counts how often it is asked.
#[derive(Debug)]
struct Pick {
    rule: fn(&[u32]) -> u32,
    calls: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl slurp_runtime::core::Chooser for Pick {
    fn choose(&mut self, _now: Time, queue: Queue<'_>, _free: u64) -> u32 {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        (self.rule)(&queue.iter().collect::<Vec<_>>())
    }
}

/// Submits `jobs` (cores, time limit, real run seconds) at 0 to a core
/// whose head `rule` picks, runs everything, returns each task's start (s)
/// and how often the rule was asked.
fn choosing(
    cores: u32,
    policy: PolicyKind,
    rule: fn(&[u32]) -> u32,
    jobs: &[(u32, u64, u64)],
) -> (Vec<u64>, usize) {
    let capacity = Capacity {
        nodes: 1,
        cores_per_node: cores,
        gpus_per_node: 0,
        mem_per_node: 0,
    };
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut core = Core::new(capacity, policy, Vec::new(), |_| [], Time(0));
    core.set_chooser(
        Time(0),
        Box::new(Pick {
            rule,
            calls: calls.clone(),
        }),
    );
    for &(c, limit, _) in jobs {
        core.submit(
            Time(0),
            Job {
                request: Request::new(c, 1, 0, 0),
                time_limit: Some(limit),
                retries: 0,
                user: 0,
            },
        );
    }
    let mut starts = vec![u64::MAX; jobs.len()];
    let mut ends: BTreeMap<(u64, u32), ()> = BTreeMap::new();
    let mut now = 0;
    loop {
        core.schedule(Time(now * 1000));
        for event in core.drain().collect::<Vec<_>>() {
            if let Event::Start { task, .. } = event {
                starts[task.0 as usize] = now;
                ends.insert((now + jobs[task.0 as usize].2, task.0), ());
            }
        }
        let Some(((at, task), ())) = ends.pop_first() else {
            break;
        };
        now = at;
        core.on_finished(Time(now * 1000), TaskId(task), Outcome::Success);
    }
    (starts, calls.load(std::sync::atomic::Ordering::Relaxed))
}

#[test]
fn a_chooser_is_asked_only_when_something_could_start() {
    // Last in, first out on one core: started in reverse. Once the core
    // is taken nothing could start, so the chooser is not asked for the
    // task that waits (a choice then would count for nothing: the next
    // instant asks again): once at 0, 10 and 20, one call a start, where
    // a turnover cost two decisions before.
    // With EASY too: a full instance skips the reservation.
    for policy in [PolicyKind::FCFS, PolicyKind::EASY] {
        let (starts, calls) = choosing(1, policy, |q| *q.last().unwrap(), &[(1, 10, 10); 3]);
        assert_eq!(starts, [20, 10, 0]);
        assert_eq!(calls, 3, "{policy:?}");
    }
}

#[test]
fn a_choice_that_cannot_start_stands_for_the_rest_of_its_instant() {
    // Two cores; the rule takes t0 while it waits, else the newest. At 0,
    // t0 (1 core, until 100) starts; with a core free the rule is asked
    // again and takes t2 (2 cores), which cannot start: EASY's reservation
    // for it reads the standing choice (no second decision), and t1 (1
    // core, done by 5) backfills. At 5 one core is free and the only task
    // queued needs two: nothing could start, the rule is not asked. At 100
    // t2 starts: three decisions.
    let (starts, calls) = choosing(
        2,
        PolicyKind::EASY,
        |q| {
            if q.contains(&0) {
                0
            } else {
                *q.last().unwrap()
            }
        },
        &[(1, 100, 100), (1, 5, 5), (2, 10, 10)],
    );
    assert_eq!(starts, [0, 0, 100]);
    assert_eq!(calls, 3);
}

#[test]
fn a_waiting_choice_gives_way_when_the_chooser_changes_its_mind() {
    // One core; the rule takes the newest task. At 0, t1 starts and t0
    // waits as the choice; t2 arrives at 5, and the chooser, asked again,
    // takes it: it starts when t1 ends, before t0 — as a heuristic's order
    // would let a better-ranked arrival go first.
    let capacity = Capacity {
        nodes: 1,
        cores_per_node: 1,
        gpus_per_node: 0,
        mem_per_node: 0,
    };
    let mut core = Core::new(capacity, PolicyKind::FCFS, Vec::new(), |_| [], Time(0));
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    core.set_chooser(
        Time(0),
        Box::new(Pick {
            rule: |q| *q.iter().max().unwrap(),
            calls,
        }),
    );
    let job = Job {
        request: Request::new(1, 1, 0, 0),
        time_limit: Some(10),
        retries: 0,
        user: 0,
    };
    let mut starts = Vec::new();
    let mut step = |core: &mut Core, at: u64| {
        core.schedule(Time(at * 1000));
        for event in core.drain().collect::<Vec<_>>() {
            if let Event::Start { task, .. } = event {
                starts.push((task.0, at));
            }
        }
    };
    core.submit(Time(0), job.clone());
    core.submit(Time(0), job.clone());
    step(&mut core, 0);
    core.submit(Time(5000), job.clone());
    step(&mut core, 5);
    core.on_finished(Time(10_000), TaskId(1), Outcome::Success);
    step(&mut core, 10);
    core.on_finished(Time(20_000), TaskId(2), Outcome::Success);
    step(&mut core, 20);
    assert_eq!(starts, [(1, 0), (2, 10), (0, 20)]);
}

#[test]
fn easy_backfills_around_a_chosen_head_and_fcfs_does_not() {
    // Two cores. r (1 core, 50 s) runs first; then the chooser picks the
    // widest, w (2 cores), which must wait for r; s (1 core, 10 s) fits now.
    let jobs = [(1, 50, 50), (2, 10, 10), (1, 10, 10)];
    let widest_then_first = |q: &[u32]| -> u32 {
        if q.contains(&0) {
            0
        } else {
            *q.iter().find(|&&t| t == 1).unwrap_or(&q[0])
        }
    };
    let (strict, _) = choosing(2, PolicyKind::FCFS, widest_then_first, &jobs);
    assert_eq!(strict, [0, 50, 60], "s waits behind the chosen w");
    let (easy, _) = choosing(2, PolicyKind::EASY, widest_then_first, &jobs);
    assert_eq!(
        easy,
        [0, 50, 0],
        "s ends before w's reservation: it backfills"
    );
}

/// A cohort's members answer for themselves: one cancelled before it
/// starts, members resumed, the rest cancelled by a halt — states, counts
/// and events as if each were its own task, and only started members ever
/// hold a slot's worth of events.
#[test]
fn a_cohort_cancels_resumes_and_halts_member_by_member() {
    let one = Capacity {
        nodes: 1,
        cores_per_node: 1,
        gpus_per_node: 0,
        mem_per_node: 1 << 30,
    };
    let parts = vec![
        Part::One(job(1, 1, None)),
        Part::Many(job(1, 1, Some(10)), 8),
    ];
    let mut core = Core::with_parts(one, PolicyKind::EASY, parts, |_| Vec::new(), Time(0));
    assert_eq!(core.cohorts().collect::<Vec<_>>(), [(TaskId(1), 8)]);
    assert_eq!(core.cohort_of(TaskId(3)), Some((0, 2)), "the third member");
    assert_eq!(core.cohort_of(TaskId(0)), None);
    // Members 2 and 4 succeeded in the run resumed.
    core.resume(Time(0), |t| t == TaskId(2) || t == TaskId(4));
    assert_eq!(core.state(TaskId(4)), State::Succeeded);
    assert_eq!(core.reason(TaskId(4)), Reason::Resumed);
    // Only the individual task was announced at the start; resumed
    // members are told as such.
    let first: Vec<(u32, State, u32)> = core
        .drain()
        .filter_map(|e| match e {
            Event::Transition { task, to, .. } => Some((task.0, to, 1)),
            Event::Stretch {
                first, count, to, ..
            } => Some((first.0, to, count)),
            Event::Start { .. } => None,
        })
        .collect();
    assert_eq!(
        first,
        [
            (0, State::Runnable, 1),
            (2, State::Succeeded, 1),
            (4, State::Succeeded, 1)
        ]
    );
    // Consecutive members are one stretch.
    let mut other = Core::with_parts(
        one,
        PolicyKind::EASY,
        vec![Part::Many(job(1, 1, Some(10)), 8)],
        |_| Vec::new(),
        Time(0),
    );
    other.resume(Time(0), |t| (2..6).contains(&t.0) || t.0 == 7);
    let stretches: Vec<(u32, u32)> = other
        .drain()
        .filter_map(|e| match e {
            Event::Stretch {
                first,
                count,
                to: State::Succeeded,
                reason: Reason::Resumed,
                ..
            } => Some((first.0, count)),
            _ => None,
        })
        .collect();
    assert_eq!(stretches, [(2, 4), (7, 1)]);
    assert_eq!(other.counts()[State::Succeeded as usize], 5);
    assert!(core.cancel(Time(0), TaskId(5)));
    assert_eq!(core.state(TaskId(5)), State::Cancelled);
    let mut started = Vec::new();
    let mut now = Time(0);
    // One core: run tasks one by one until three have started.
    while started.len() < 3 {
        core.schedule(now);
        let starts: Vec<u32> = core
            .drain()
            .filter_map(|e| match e {
                Event::Start { task, .. } => Some(task.0),
                _ => None,
            })
            .collect();
        assert_eq!(starts.len(), 1, "one core: one start at a time");
        started.push(starts[0]);
        now = now.plus_secs(1);
        core.on_finished(now, TaskId(starts[0]), Outcome::Success);
    }
    assert_eq!(
        started,
        [0, 1, 3],
        "resumed and cancelled members are skipped"
    );
    assert_eq!(core.state(TaskId(3)), State::Succeeded);
    assert_eq!(core.attempts(TaskId(3)), 1);
    assert_eq!(core.state(TaskId(6)), State::Runnable);
    let counts = core.counts();
    assert_eq!(counts[State::Succeeded as usize], 5);
    assert_eq!(counts[State::Cancelled as usize], 1);
    assert_eq!(counts[State::Runnable as usize], 3);
    core.drain().for_each(drop);
    core.halt(now);
    // The queued member is told alone, those never admitted as a stretch.
    let halted: Vec<(u32, u32)> = core
        .drain()
        .filter_map(|e| match e {
            Event::Transition {
                task,
                to: State::Cancelled,
                reason: Reason::Halted,
                ..
            } => Some((task.0, 1)),
            Event::Stretch {
                first,
                count,
                to: State::Cancelled,
                reason: Reason::Halted,
                ..
            } => Some((first.0, count)),
            _ => None,
        })
        .collect();
    assert_eq!(halted, [(6, 1), (7, 2)]);
    assert_eq!(
        core.unsucceeded(),
        [(TaskId(5), 1), (TaskId(6), 1), (TaskId(7), 2)]
    );
    assert!(core.is_done());
    assert_eq!(core.state(TaskId(8)), State::Cancelled);
    assert_eq!(core.counts()[State::Cancelled as usize], 4);
}
