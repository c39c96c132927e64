//! slurp's own model: the scheduler core that runs `slurp FILE`, driven by
//! a virtual clock instead of processes.
//!
//! Each job is a task of `procs` one-core ranks (core-granular: ranks of
//! several jobs share a node; whole nodes are the reference model's
//! rule), its time limit the user's estimate — what
//! backfilling plans with — while it really ends after its trace run time.
//! Jobs arrive at their submit times; the clock jumps from event to event
//! (arrivals, ends) and the core decides at each. The replay runs until the
//! last job has ended.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use slurp_runtime::core::{Chooser, Core, Event, Job, Outcome, PolicyKind, Time};
use slurp_runtime::{Capacity, Request, TaskId};

use crate::{Schedule, Window, Workload};

/// Replays `window` of `workload` through the scheduler core under
/// `policy`.
pub fn run(workload: &Workload, window: Window, policy: PolicyKind) -> Schedule {
    run_with(workload, window, policy, None)
}

/// The same, with `chooser` picking the head of the queue (a learned
/// policy; `policy` then says only how to backfill). Task `i` is the
/// window's job `i`.
pub fn run_with(
    workload: &Workload,
    window: Window,
    policy: PolicyKind,
    chooser: Option<Box<dyn Chooser>>,
) -> Schedule {
    let jobs = &workload.jobs[window.range()];
    // Every rank is one core, and any free core can host any rank: which
    // node a core is on never changes a schedule, so the machine is one
    // pool of all its processors (one allocation slice per job, not one
    // per node it touches).
    let capacity = Capacity {
        nodes: 1,
        cores_per_node: u32::try_from(workload.machine.procs()).unwrap_or(u32::MAX),
        gpus_per_node: 0,
        mem_per_node: 0,
    };
    let ms = |secs: u64| Time(secs.saturating_mul(1000));
    let first = jobs.first().map_or(0, |j| j.submit);
    let mut core = Core::new(capacity, policy, Vec::new(), |_| [], ms(first));
    if let Some(chooser) = chooser {
        core.set_chooser(ms(first), chooser);
    }
    let mut starts = vec![0; jobs.len()];
    let mut order = Vec::with_capacity(jobs.len());
    // Ends of running jobs, earliest first.
    let mut ends: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::new();
    let mut next = 0;
    // Jobs come in id order; one submitted "earlier" than a job before it
    // arrives when the clock gets to it (as in the reference).
    let mut clock = first;
    loop {
        let arrival = jobs.get(next).map(|j| j.submit.max(clock));
        let end = ends.peek().map(|e| e.0.0);
        let now = match (arrival, end) {
            (Some(a), Some(e)) => a.min(e),
            (Some(t), None) | (None, Some(t)) => t,
            (None, None) => break,
        };
        clock = now;
        while let Some(&Reverse((at, task))) = ends.peek() {
            if at != now {
                break;
            }
            ends.pop();
            core.on_finished(ms(now), TaskId(task), Outcome::Success);
        }
        while let Some(job) = jobs.get(next).filter(|j| j.submit <= now) {
            let task = core.submit(
                ms(now),
                Job {
                    request: Request::new(job.procs, 1, 0, 0),
                    time_limit: Some(job.estimate),
                    retries: 0,
                    user: job.account(),
                },
            );
            debug_assert_eq!(task.0 as usize, next);
            next += 1;
        }
        core.schedule(ms(now));
        for event in core.drain() {
            if let Event::Start { task, .. } = event {
                let j = task.0;
                starts[j as usize] = now;
                order.push(j);
                ends.push(Reverse((now + jobs[j as usize].run, j)));
            }
        }
    }
    Schedule::new(window, starts, order)
}
