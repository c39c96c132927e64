//! Scheduler decision cost: with 100,000 tasks queued, one task ends and
//! the core decides what starts in its place, on a fake clock. Then the
//! learned policy in a real run's shape: a 10,000-line file (each line its
//! own "user") on 2 cores, as `slurp --policy fair-v5+easy t10k.txt` runs it.
//!
//!     cargo bench --bench core

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use slurp_runtime::core::{Backfill, Core, Event, Job, Order, Outcome, PolicyKind, Time};
use slurp_runtime::{Capacity, Request, TaskId};

const QUEUED: usize = 100_000;
const CAPACITY: Capacity = Capacity {
    nodes: 1,
    cores_per_node: 64,
    gpus_per_node: 0,
    mem_per_node: 64 << 30,
};

/// 100,000 queued single-core tasks with mixed time limits, 64 running,
/// of 100 users.
fn full_core(policy: PolicyKind) -> (Core, Vec<TaskId>) {
    let jobs = (0..QUEUED + 64)
        .map(|i| Job {
            request: Request {
                ntasks: 1,
                cores: 1 + (i % 3 == 0) as u32,
                gpus: 0,
                mem: 0,
                nodes: 0,
            },
            time_limit: Some(60 + (i as u64 * 7919) % 3600),
            retries: 0,
            // 100 users (only `fairshare` reads it).
            user: (i % 100) as u32,
        })
        .collect();
    started(Core::new(
        CAPACITY,
        policy,
        jobs,
        |_| Vec::<u32>::new(),
        Time(0),
    ))
}

/// `core` after its first scheduling pass, and the tasks that pass started.
fn started(mut core: Core) -> (Core, Vec<TaskId>) {
    core.schedule(Time(0));
    let running = core
        .drain()
        .filter_map(|e| match e {
            Event::Start { task, .. } => Some(task),
            _ => None,
        })
        .collect();
    (core, running)
}

fn decisions(c: &mut Criterion) {
    let mut group = c.benchmark_group("decision with 100k queued");
    let fairshare = |b| PolicyKind::new(Order::Fairshare, b);
    for policy in [
        PolicyKind::FCFS,
        PolicyKind::EASY,
        PolicyKind::CONSERVATIVE,
        fairshare(Backfill::None),
        fairshare(Backfill::Easy),
    ] {
        group.bench_function(policy.to_string(), |b| {
            // Stop well before the queue runs dry, so it stays deep.
            b.iter_custom(|iters| turnover(iters, QUEUED / 2, 1000, || full_core(policy)))
        });
    }
    group.finish();
}

/// A 10,000-line file of one-core tasks without time limits on 2 cores,
/// its learned chooser the built-in `name`'s, as a real run builds it.
fn learned_core(name: &str, lines: usize) -> (Core, Vec<TaskId>) {
    use slurp_fair::chooser::Task;
    let model = std::sync::Arc::new(slurp_fair::built_in(name).expect("a built-in model"));
    let capacity = Capacity {
        cores_per_node: 2,
        ..CAPACITY
    };
    let jobs = (0..lines)
        .map(|i| Job {
            request: Request {
                ntasks: 1,
                cores: 1,
                gpus: 0,
                mem: 0,
                nodes: 0,
            },
            time_limit: None,
            retries: 0,
            user: i as u32,
        })
        .collect();
    let tasks: Vec<Task> = (0..lines)
        .map(|i| Task {
            cores: 1,
            time_limit: None,
            user: i as i64,
        })
        .collect();
    let mut core = Core::new(
        capacity,
        PolicyKind::EASY,
        jobs,
        |_| Vec::<u32>::new(),
        Time(0),
    );
    // As a `+easy` run chooses: with the model's network for EASY where it
    // carries one.
    let chooser = slurp_fair::chooser::Learned::for_tasks(model.in_slurp(true), &tasks, 2, None);
    core.set_chooser(Time(0), Box::new(chooser));
    started(core)
}

fn learned(c: &mut Criterion) {
    const LINES: usize = 10_000;
    let mut group = c.benchmark_group("real run of 10,000 lines on 2 cores");
    for name in ["fair-v5", "fair-v4", "fair-v3", "fair"] {
        group.bench_function(
            format!("{name}+easy: one task ends, the next starts"),
            |b| {
                // The first half of the run: the queue stays deep.
                b.iter_custom(|iters| turnover(iters, LINES / 2, 1, || learned_core(name, LINES)))
            },
        );
    }
    group.finish();
}

/// The time of `iters` turnovers (one running task ends, `step_ms` after
/// the last, and the core starts what it decides in its place) on cores
/// that `build` makes, at most `batch` on each before it is built again.
fn turnover(
    iters: u64,
    batch: usize,
    step_ms: u64,
    build: impl Fn() -> (Core, Vec<TaskId>),
) -> Duration {
    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let (mut core, mut running) = build();
        let mut now = Time(0);
        let batch = (iters - done).min(batch as u64);
        let start = Instant::now();
        for _ in 0..batch {
            now = Time(now.0 + step_ms);
            let task = running.swap_remove(0);
            core.on_finished(now, task, Outcome::Success);
            core.schedule(now);
            for event in core.drain() {
                if let Event::Start { task, .. } = event {
                    running.push(task);
                }
            }
        }
        total += start.elapsed();
        done += batch;
    }
    total
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(5));
    targets = decisions, learned
}
criterion_main!(benches);
