//! The reference model, step for step (RL-SPEC.md), so that slurp's
//! figures can be compared with the published ones to the digit.
//!
//! It is not slurp's scheduler: whole nodes are allocated exclusively, one
//! job is chosen per decision and waited for (later arrivals are not
//! re-ranked ahead of it), backfilling computes its shadow time once per
//! wait and has no spare-node rule, and the replay stops when the window's
//! last job has started. Where the reference's behaviour depends on the
//! order of its lists (ties in a stable sort, which of two jobs ending at
//! the same second is released first) this module keeps the same lists and
//! sorts them the same way.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use slurp_runtime::core::{FairShare, HALF_LIFE, Order, Time, float_key};

use crate::{Machine, Schedule, SimJob, Window, Workload};

/// A key that sorts like the reference's score tuples.
pub type Key = (u64, u64);

/// The reference's score of `job` under `order` at `now` (lowest first).
/// A teacher for the learned policy ranks the jobs it is shown with it.
pub fn key(order: Order, job: &SimJob, now: u64) -> Key {
    let (s, r, n) = (job.submit as f64, job.estimate as f64, job.procs as f64);
    let positive = |x: f64| if x > 0.0 { x } else { 0.1 };
    let w = now.saturating_sub(job.submit) as f64;
    match order {
        Order::Fcfs => (job.submit, 0),
        Order::Sjf => (job.estimate, job.submit),
        Order::F1 => (
            float_key(positive(r).log10() * n + 870.0 * positive(s).log10()),
            0,
        ),
        Order::Wfp3 => (float_key(-(w / r.max(1.0)).powi(3) * n), 0),
        Order::Unicep => (float_key(-w / (n.log2().max(1.0) * r.max(1.0))), 0),
        // Ranked by the users' usage, which no job's own figures give: a
        // job alone sorts as under FCFS (`run` keeps the usage).
        Order::Fairshare => (job.submit, 0),
    }
}

/// What the scheduler sees when it must choose the next job to start.
#[derive(Debug)]
pub struct Decision<'a> {
    /// Seconds from the start of the trace.
    pub now: u64,
    /// The window's jobs.
    pub jobs: &'a [SimJob],
    pub machine: Machine,
    /// Whole nodes free now.
    pub free_nodes: u32,
    /// The queued jobs (positions in the window) in the queue's order. A
    /// chooser may reorder it (heuristics sort it, and the order persists
    /// between decisions, as in the reference).
    pub queue: &'a mut Vec<u32>,
    /// Jobs started so far, in start order, and every job's start (valid
    /// for the started ones).
    pub started: &'a [u32],
    pub starts: &'a [u64],
    /// The jobs running now, in no particular order.
    pub running: &'a [u32],
}

impl Decision<'_> {
    /// Whether job `j` fits in the free nodes now.
    pub fn fits(&self, j: u32) -> bool {
        self.machine.nodes_for(self.jobs[j as usize].procs) <= self.free_nodes
    }

    /// When each job could start if the running jobs ended at their
    /// estimates: the shadow time EASY would reserve for it.
    pub fn reservations(&self) -> Reservations {
        Reservations::new(
            self.now,
            self.free_nodes,
            self.running.iter().map(|&r| {
                let job = &self.jobs[r as usize];
                (
                    self.starts[r as usize] + job.estimate,
                    self.machine.nodes_for(job.procs),
                )
            }),
        )
    }
}

/// The running jobs' estimated ends, earliest first, and the whole nodes
/// each frees: from when a job that does not fit now would fit, which is
/// the shadow time EASY reserves for the job it waits for.
#[derive(Debug, Clone)]
pub struct Reservations {
    now: u64,
    free: u32,
    ends: Vec<(u64, u32)>,
}

impl Reservations {
    /// `free` whole nodes free at `now`, and each running job's estimated
    /// end and nodes (a stable sort by end keeps the order of equal ones).
    pub fn new(now: u64, free: u32, ends: impl Iterator<Item = (u64, u32)>) -> Reservations {
        let mut ends: Vec<(u64, u32)> = ends.collect();
        ends.sort_by_key(|&(end, _)| end);
        Reservations { now, free, ends }
    }

    /// The time from which `nodes` whole nodes are free: `now` if they are
    /// now, else the first estimated end by which the running jobs' nodes
    /// make them up (the last end if they never do). An end estimated
    /// before `now` (a job running past its estimate) is what EASY
    /// reserves by, so it is kept.
    pub fn start(&self, nodes: u32) -> u64 {
        let mut free = self.free;
        if free >= nodes {
            return self.now;
        }
        let mut shadow = self.now;
        for &(end, freed) in &self.ends {
            free += freed;
            shadow = end;
            if free >= nodes {
                break;
            }
        }
        shadow
    }

    /// The most whole nodes free by `time` (at least `now`): a job of at
    /// most that many begins by then ([`Reservations::start`]), a larger
    /// one after it. `None` when every estimated end comes by `time`, so
    /// that no job begins after it. One walk of the ends answers for every
    /// job, where `start` walks them once a job.
    pub fn nodes_by(&self, time: u64) -> Option<u32> {
        let mut free = self.free;
        for &(end, freed) in &self.ends {
            if end > time {
                return Some(free);
            }
            free += freed;
        }
        None
    }
}

struct Sim<'a> {
    /// Submit, run, estimate of the window's jobs.
    submit: &'a [u64],
    run: &'a [u64],
    estimate: &'a [u64],
    /// Whole nodes each job takes.
    nodes: Vec<u32>,
    free: u32,
    now: u64,
    /// The next job of the window to arrive.
    next: usize,
    queue: Vec<u32>,
    running: Vec<u32>,
    starts: Vec<u64>,
    order: Vec<u32>,
}

impl Sim<'_> {
    fn end(&self, j: u32) -> u64 {
        self.starts[j as usize] + self.run[j as usize]
    }

    fn start(&mut self, j: u32) {
        self.starts[j as usize] = self.now;
        self.free -= self.nodes[j as usize];
        self.running.push(j);
        self.order.push(j);
    }

    fn fits(&self, j: u32) -> bool {
        self.nodes[j as usize] <= self.free
    }

    /// One event: the next arrival if it comes no later than the earliest
    /// end (arrivals win ties), else that end. `false` when neither exists.
    fn step(&mut self) -> bool {
        let mut running = std::mem::take(&mut self.running);
        running.sort_by_key(|&r| self.end(r));
        self.running = running;
        let release = self.running.first().map_or(u64::MAX, |&r| self.end(r));
        if self.next < self.submit.len() && self.submit[self.next] <= release {
            self.now = self.now.max(self.submit[self.next]);
            self.queue.push(self.next as u32);
            self.next += 1;
        } else if let Some(&r) = self.running.first() {
            self.now = self.now.max(release);
            self.free += self.nodes[r as usize];
            self.running.remove(0);
        } else {
            return false;
        }
        true
    }

    /// Waits, starting nothing, until `chosen` fits.
    fn wait(&mut self, chosen: u32) {
        while !self.fits(chosen) && self.step() {}
    }

    /// Waits until `chosen` fits, backfilling meanwhile what fits now and
    /// ends (by its estimate) strictly before the shadow time.
    fn wait_backfilling(&mut self, chosen: u32) {
        // The reference sorts its running list in place: which of two jobs
        // ending at the same second is released first depends on it.
        let mut running = std::mem::take(&mut self.running);
        running.sort_by_key(|&r| self.starts[r as usize] + self.estimate[r as usize]);
        self.running = running;
        let shadow = Reservations::new(
            self.now,
            self.free,
            self.running.iter().map(|&r| {
                (
                    self.starts[r as usize] + self.estimate[r as usize],
                    self.nodes[r as usize],
                )
            }),
        )
        .start(self.nodes[chosen as usize]);
        while !self.fits(chosen) {
            let mut queue = std::mem::take(&mut self.queue);
            queue.sort_by_key(|&j| self.submit[j as usize]);
            let mut kept = Vec::with_capacity(queue.len());
            for j in queue {
                if self.fits(j) && self.now + self.estimate[j as usize] < shadow {
                    self.start(j);
                } else {
                    kept.push(j);
                }
            }
            self.queue = kept;
            if !self.step() {
                break;
            }
        }
    }
}

/// Replays `window` of `workload` with the reference model under `order`,
/// with or without its backfilling.
pub fn run(workload: &Workload, window: Window, order: Order, backfill: bool) -> Schedule {
    if order == Order::Fairshare {
        return fairshare(workload, window, backfill);
    }
    let jobs = &workload.jobs[window.range()];
    let fixed: Vec<Key> = if order.is_dynamic() {
        Vec::new()
    } else {
        jobs.iter().map(|j| key(order, j, 0)).collect()
    };
    run_choosing(workload, window, backfill, |d| {
        if order.is_dynamic() {
            let now = d.now;
            d.queue
                .sort_by_cached_key(|&j| key(order, &d.jobs[j as usize], now));
        } else {
            // Fixed keys: the queue is sorted but for the jobs that came
            // since, which a stable, run-aware sort merges in one pass.
            d.queue.sort_by_key(|&j| fixed[j as usize]);
        }
        d.queue[0]
    })
}

/// `fairshare` in the reference model: the first user's earliest job
/// ([`FairShare::head`]) at each decision.
fn fairshare(workload: &Workload, window: Window, backfill: bool) -> Schedule {
    run_with_shares(workload, window, backfill, |d, shares| {
        shares.head(ms(d.now)).unwrap_or(d.queue[0])
    })
}

fn ms(secs: u64) -> Time {
    Time::default().plus_secs(secs)
}

/// Replays `window` with the reference model, `choose` picking as in
/// [`run_choosing`] but also shown the runtime core's fair-share state
/// ([`FairShare`]), told before each decision what arrived, started and
/// ended (at its own end, start + run) since the last one. A job is
/// charged the processors it asked for. `fairshare` is one such chooser;
/// rules that order users as it does but a user's jobs otherwise are
/// others (`fair/examples/turns_within.rs`).
pub fn run_with_shares(
    workload: &Workload,
    window: Window,
    backfill: bool,
    mut choose: impl FnMut(&mut Decision<'_>, &FairShare) -> u32,
) -> Schedule {
    let jobs = &workload.jobs[window.range()];
    let mut shares = FairShare::new(HALF_LIFE);
    let mut known = vec![false; jobs.len()];
    let mut told_started = 0;
    let mut seen = 0;
    let mut ends: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::new();
    run_choosing(workload, window, backfill, |d| {
        for &j in &d.started[told_started..] {
            let job = &jobs[j as usize];
            let start = d.starts[j as usize];
            if known[j as usize] {
                shares.left(j, job.account());
            }
            known[j as usize] = true;
            shares.started(job.account(), job.procs, ms(start));
            ends.push(Reverse((start + job.run, j)));
        }
        told_started = d.started.len();
        while let Some(&Reverse((end, j))) = ends.peek() {
            if end > d.now {
                break;
            }
            ends.pop();
            let job = &jobs[j as usize];
            shares.ended(job.account(), job.procs, ms(d.starts[j as usize]), ms(end));
        }
        // Jobs arrive in window order and every arrived job is queued or
        // started: the new arrivals are the positions up to that count
        // (no walk of a deep queue at every decision).
        let arrived = d.queue.len() + d.started.len();
        for j in seen..arrived {
            if !known[j] {
                known[j] = true;
                shares.queued(j as u32, jobs[j].account());
            }
        }
        seen = seen.max(arrived);
        choose(d, &shares)
    })
}

/// Replays `window` of `workload` with the reference model, `choose`
/// picking the job to start (or wait for) at each decision — a heuristic,
/// or a learned policy. `choose` must answer a job of `Decision::queue`
/// (anything else is a bug in the chooser and panics).
pub fn run_choosing(
    workload: &Workload,
    window: Window,
    backfill: bool,
    mut choose: impl FnMut(&mut Decision<'_>) -> u32,
) -> Schedule {
    let jobs = &workload.jobs[window.range()];
    let column = |f: fn(&SimJob) -> u64| jobs.iter().map(f).collect::<Vec<_>>();
    let (submit, run, estimate) = (
        column(|j| j.submit),
        column(|j| j.run),
        column(|j| j.estimate),
    );
    let machine = workload.machine;
    let mut sim = Sim {
        submit: &submit,
        run: &run,
        estimate: &estimate,
        nodes: jobs.iter().map(|j| machine.nodes_for(j.procs)).collect(),
        free: machine.nodes,
        now: submit.first().copied().unwrap_or(0),
        next: 0,
        queue: Vec::new(),
        running: Vec::new(),
        starts: vec![0; jobs.len()],
        order: Vec::with_capacity(jobs.len()),
    };
    if jobs.is_empty() {
        return Schedule::new(window, Vec::new(), Vec::new());
    }
    sim.queue.push(0);
    sim.next = 1;
    while !sim.queue.is_empty() {
        let chosen = choose(&mut Decision {
            now: sim.now,
            jobs,
            machine,
            free_nodes: sim.free,
            queue: &mut sim.queue,
            started: &sim.order,
            starts: &sim.starts,
            running: &sim.running,
        });
        if !sim.fits(chosen) {
            if backfill {
                sim.wait_backfilling(chosen);
            } else {
                sim.wait(chosen);
            }
        }
        let at = sim
            .queue
            .iter()
            .position(|&j| j == chosen)
            .unwrap_or_else(|| unreachable!("the chosen job waits in the queue"));
        sim.queue.remove(at);
        sim.start(chosen);
        // Nothing queued: move on to the next arrival, releasing what ends
        // first; when nothing is left to arrive, the window is done.
        while sim.queue.is_empty() && sim.next < submit.len() {
            sim.step();
        }
    }
    Schedule::new(window, sim.starts, sim.order)
}

#[cfg(test)]
mod tests {
    use super::Reservations;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// `nodes_by` tells apart the jobs `start` would begin by a time and
    /// after it, for every size, on random running jobs (ends before `now`
    /// and ties among them).
    #[test]
    fn nodes_by_agrees_with_start_for_every_size() {
        let mut rng = ChaCha8Rng::seed_from_u64(17);
        for _ in 0..500 {
            let now = 1_000;
            let free = rng.random_range(0..4);
            let running: Vec<(u64, u32)> = (0..rng.random_range(0..12))
                .map(|_| (rng.random_range(900..1_100), rng.random_range(1..5)))
                .collect();
            let total = free + running.iter().map(|&(_, n)| n).sum::<u32>();
            let r = Reservations::new(now, free, running.into_iter());
            for time in [now, now + 1, now + 37, now + 99, now + 1_000] {
                let most = r.nodes_by(time);
                for nodes in 1..=total.max(1) {
                    let after = most.is_some_and(|m| nodes > m);
                    assert_eq!(r.start(nodes) > time, after, "{r:?} {time} {nodes}");
                }
            }
        }
    }
}
