//! The reference model, step for step (RL-SPEC.md), so that slurp's
//! figures can be compared with the published ones to the digit.
//!
//! It is not slurp's scheduler: whole nodes are allocated exclusively, one
//! job is chosen per decision and waited for (later arrivals are not
//! re-ranked ahead of it), backfilling computes its shadow time once per
//! wait and has no spare-node rule, and the replay stops when the window's
//! last job has started. Where the reference's behaviour depends on the
//! order of its lists (ties in a stable sort, which of two jobs ending at
//! the same second is released first) this module gives the same lists.
//!
//! It does not sort them as often. The reference sorts its running jobs at
//! every event, its queue at every decision, and the queue again while a
//! job waits with backfilling, walking all of it after every event; on a
//! whole trace, whose queue holds tens of thousands, that made a replay
//! cost jobs × queue (RICC with `sjf+easy`: minutes). Here only what
//! changed since the last sort is sorted and merged, a walk is repeated
//! only after an end (an arrival can start only itself), a reservation is
//! read from the running jobs kept by estimated end, and a heuristic of
//! fixed keys is taken from an ordered set ([`run`]), its queue sorted for
//! a wait only when an arrival has put it out of wait order. A queue that
//! no chooser reorders stays in window order, which on a trace numbered in
//! submission order needs no sort for a wait either. A wait that lasts
//! past its second end walks the queue through an index of what each job
//! needs (`fit.rs`), skipping the jobs too wide or too long for the gap.
//! Each of these gives the list the reference's sorts give, ties included,
//! and starts the same jobs in the same order; a test replays
//! workloads crowded with ties under the reference's own list handling and
//! compares every schedule.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use slurp_runtime::core::{FairShare, HALF_LIFE, Order, Time, float_key};

use crate::{Machine, Schedule, SimJob, Window, Workload};

mod fit;
use fit::Fit;

/// A queue position whose job started during a wait ([`Fit`] keeps the
/// others where they stand until the wait ends).
const GONE: u32 = u32::MAX;

/// The end during a wait from which its walks go through a [`Fit`]: on
/// all of RICC, building it at the first end instead made `sjf+easy` 10%
/// slower and no policy faster; at the third or fifth, none changed by
/// more than the noise (BENCHMARKS.md, "The backfilling walk, indexed; a
/// queue still in window order").
const INDEX_AFTER: usize = 2;

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
        shadow(self.now, self.free, nodes, self.ends.iter().copied())
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

/// [`Reservations::start`]'s walk: `free` whole nodes at `now`, and each
/// running job's estimated end and nodes, earliest end first.
fn shadow(now: u64, mut free: u32, nodes: u32, ends: impl Iterator<Item = (u64, u32)>) -> u64 {
    if free >= nodes {
        return now;
    }
    let mut shadow = now;
    for (end, freed) in ends {
        free += freed;
        shadow = end;
        if free >= nodes {
            break;
        }
    }
    shadow
}

struct Sim<'a> {
    /// Submit, run, estimate of the window's jobs.
    submit: &'a [u64],
    run: &'a [u64],
    estimate: &'a [u64],
    /// A heuristic's fixed keys, when it chooses: the order it leaves the
    /// queue in, which backfilling's stable sort by submission keeps among
    /// jobs submitted at the same second (see [`run`]).
    ties: Option<&'a [Key]>,
    /// Whole nodes each job takes.
    nodes: Vec<u32>,
    free: u32,
    now: u64,
    /// The next job of the window to arrive.
    next: usize,
    queue: Vec<u32>,
    running: Vec<u32>,
    /// How many of `running`'s first jobs are as `step`'s stable sort by
    /// end left them; the jobs started since follow them unsorted. Sorting
    /// only the tail and merging it gives the same list as sorting it all,
    /// at the cost of the jobs started since the last event rather than of
    /// every running job.
    sorted: usize,
    /// The running jobs by estimated end: what a reservation is read from,
    /// kept as jobs start and end rather than sorted at every wait.
    by_estimate: BTreeSet<(u64, u32)>,
    /// Whether every job takes at least one node, so that none fits once
    /// no node is free (a backfilling pass stops there).
    no_empty: bool,
    /// With `ties`, whether the queue is still in wait order (submission,
    /// tie, position), as the last wait sorted it. Only then is it trusted:
    /// a heuristic with fixed keys chooses from its own ordered set and
    /// never reorders the queue, so only an arrival can break the order,
    /// and starts (chosen or backfilled) keep it.
    in_wait_order: bool,
    /// Whether the window's jobs were submitted in window order. Then a
    /// queue in window order is in submission order, and so is every
    /// stable sort of it by submission (equal submissions keep window
    /// order): a chooser that never reorders the queue (`fairshare`, the
    /// learned ones) leaves it that way, and the sort at a wait's start is
    /// skipped (it was 44% of `fairshare+easy`'s time on all of RICC).
    submitted_in_order: bool,
    starts: Vec<u64>,
    order: Vec<u32>,
}

/// What one event of [`Sim::step`] was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    Arrival,
    Release,
}

impl Sim<'_> {
    fn end(&self, j: u32) -> u64 {
        self.starts[j as usize] + self.run[j as usize]
    }

    /// Where job `j` goes in a wait's order, given `ties`.
    fn wait_key(&self, ties: &[Key], j: u32) -> (u64, Key, u32) {
        (self.submit[j as usize], ties[j as usize], j)
    }

    /// Where job `j` stands in the queue. In wait order, or in window
    /// order, it is found by halving; otherwise by a scan.
    fn position(&self, j: u32) -> Option<usize> {
        match self.ties {
            Some(ties) if self.in_wait_order => {
                let key = self.wait_key(ties, j);
                let at = self
                    .queue
                    .partition_point(|&q| self.wait_key(ties, q) < key);
                (self.queue.get(at) == Some(&j)).then_some(at)
            }
            // A job stands once in the queue, so wherever halving by number
            // finds it, it is there: a queue in window order (a chooser that
            // never reorders it, on a trace numbered in submission order) is
            // searched so, any other scanned.
            _ => match self.queue.binary_search(&j) {
                Ok(at) if self.queue[at] == j => Some(at),
                _ => self.queue.iter().position(|&q| q == j),
            },
        }
    }

    fn estimated_end(&self, j: u32) -> u64 {
        self.starts[j as usize] + self.estimate[j as usize]
    }

    fn start(&mut self, j: u32) {
        self.starts[j as usize] = self.now;
        self.free -= self.nodes[j as usize];
        self.by_estimate.insert((self.estimated_end(j), j));
        self.running.push(j);
        self.order.push(j);
    }

    fn fits(&self, j: u32) -> bool {
        self.nodes[j as usize] <= self.free
    }

    /// One event: the next arrival if it comes no later than the earliest
    /// end (arrivals win ties), else that end. `false` when neither exists.
    fn step(&mut self) -> bool {
        self.event().is_some()
    }

    /// [`Sim::step`], telling which event it was.
    fn event(&mut self) -> Option<Event> {
        self.sort_running();
        let release = self.running.first().map_or(u64::MAX, |&r| self.end(r));
        if self.next < self.submit.len() && self.submit[self.next] <= release {
            self.now = self.now.max(self.submit[self.next]);
            let j = self.next as u32;
            if let (Some(ties), Some(&last)) = (self.ties, self.queue.last()) {
                self.in_wait_order &= self.wait_key(ties, last) < self.wait_key(ties, j);
            }
            self.queue.push(j);
            self.next += 1;
            Some(Event::Arrival)
        } else if let Some(&r) = self.running.first() {
            self.now = self.now.max(release);
            self.free += self.nodes[r as usize];
            self.running.remove(0);
            self.sorted -= 1;
            self.by_estimate.remove(&(self.estimated_end(r), r));
            Some(Event::Release)
        } else {
            None
        }
    }

    /// `running` as a stable sort by end leaves it (the reference sorts
    /// the whole list at every event): the jobs started since the last
    /// sort, sorted among themselves, each placed after the sorted jobs
    /// that end no later than it.
    fn sort_running(&mut self) {
        let mut running = std::mem::take(&mut self.running);
        if self.sorted == 0 {
            running.sort_by_key(|&r| self.end(r));
        } else if self.sorted < running.len() {
            let mut tail = running.split_off(self.sorted);
            tail.sort_by_key(|&r| self.end(r));
            let mut from = 0;
            for r in tail {
                let end = self.end(r);
                from += running[from..].partition_point(|&q| self.end(q) <= end);
                running.insert(from, r);
                from += 1;
            }
        }
        self.sorted = running.len();
        self.running = running;
    }

    /// Waits, starting nothing, until `chosen` fits.
    fn wait(&mut self, chosen: u32) {
        while !self.fits(chosen) && self.step() {}
    }

    /// Waits until `chosen` fits, backfilling meanwhile what fits now and
    /// ends (by its estimate) strictly before the shadow time.
    fn wait_backfilling(&mut self, chosen: u32) {
        // The reference sorts its running list in place by estimated end,
        // and the next event sorts it by end: which of two jobs ending at
        // the same second is released first depends on it. The two stable
        // sorts order the list by end, then estimated end, then where each
        // job stood; so the list is put in `step`'s order (by end, then
        // where each stood) and only the jobs of equal end are sorted again.
        self.sort_running();
        let mut running = std::mem::take(&mut self.running);
        for tied in running.chunk_by_mut(|&a, &b| self.end(a) == self.end(b)) {
            if tied.len() > 1 {
                tied.sort_by_key(|&r| self.estimated_end(r));
            }
        }
        self.running = running;
        let shadow = self.shadow(self.nodes[chosen as usize]);
        // The reference sorts the queue by submission and walks all of it
        // after every event. The walk leaves no job that could start: an
        // arrival keeps the nodes free and moves the clock on, so only the
        // new job can (last in submit order when it came no earlier than
        // the others: it goes last in a stable sort); only an end frees
        // nodes for the others. So the queue is sorted once, walked again
        // only after an end, and a walk stops once no node is free.
        // With fixed keys the queue is often still in the order the last
        // wait left it (half of a whole trace's time under `sjf+easy` was
        // this sort).
        let mut queue = std::mem::take(&mut self.queue);
        match self.ties {
            Some(_) if self.in_wait_order => {}
            Some(ties) => queue.sort_by_key(|&j| self.wait_key(ties, j)),
            // A check of the positions alone, with no look-up per job.
            None if self.submitted_in_order && queue.is_sorted() => {}
            None => queue.sort_by_key(|&j| self.submit[j as usize]),
        }
        self.queue = queue;
        self.in_wait_order = true;
        // The first walks are scans: most waits end within an event or two,
        // and building the index costs a walk. From the INDEX_AFTER-th end
        // on, a wait is walked through the index (`fit.rs`), started jobs
        // left in place as GONE.
        let mut index: Option<Fit> = None;
        let mut releases = 0;
        let mut from = 0;
        loop {
            match index.as_mut() {
                None => self.backfill_from(from, shadow),
                Some(index) => self.backfill_indexed(index, from, shadow),
            }
            match self.event() {
                None => break,
                Some(_) if self.fits(chosen) => break,
                Some(Event::Release) => {
                    from = 0;
                    releases += 1;
                    if index.is_none() && releases == INDEX_AFTER {
                        index = Some(self.index());
                    }
                }
                Some(Event::Arrival) => {
                    let n = self.queue.len();
                    let j = self.queue[n - 1];
                    if let Some(index) = index.as_mut() {
                        index.push(self.need(j));
                    }
                    // The walks leave no GONE last, so the job before the
                    // new one is queued.
                    if n >= 2 && self.submit[self.queue[n - 2] as usize] > self.submit[j as usize] {
                        // Out of submit order: sorted and walked again.
                        let mut queue = std::mem::take(&mut self.queue);
                        queue.retain(|&q| q != GONE);
                        queue.sort_by_key(|&q| self.submit[q as usize]);
                        self.queue = queue;
                        if index.is_some() {
                            index = Some(self.index());
                        }
                        from = 0;
                    } else {
                        from = n - 1;
                    }
                }
            }
        }
        if index.is_some() {
            self.queue.retain(|&q| q != GONE);
        }
    }

    /// What job `j` asks of a gap: nodes, and its estimate.
    fn need(&self, j: u32) -> (u32, u64) {
        (self.nodes[j as usize], self.estimate[j as usize])
    }

    /// The index of the queue as it stands (no job in it has started).
    fn index(&self) -> Fit {
        Fit::new(self.queue.iter().map(|&j| self.need(j)))
    }

    /// [`Reservations::start`] of the running jobs, read from those kept by
    /// estimated end (no sort).
    fn shadow(&self, nodes: u32) -> u64 {
        let ends = self
            .by_estimate
            .iter()
            .map(|&(end, r)| (end, self.nodes[r as usize]));
        shadow(self.now, self.free, nodes, ends)
    }

    /// Starts, in queue order from position `from`, the queued jobs that
    /// fit now and end (by their estimate) strictly before `shadow`.
    fn backfill_from(&mut self, from: usize, shadow: u64) {
        let mut started = Vec::new();
        for at in from..self.queue.len() {
            if self.free == 0 && self.no_empty {
                break;
            }
            let j = self.queue[at];
            if self.fits(j) && self.now + self.estimate[j as usize] < shadow {
                self.start(j);
                started.push(at);
            }
        }
        for &at in started.iter().rev() {
            self.queue.remove(at);
        }
    }

    /// [`Sim::backfill_from`] through `index`: the same jobs start, in the
    /// same order, each marked GONE where it stood; GONE positions at the
    /// end are dropped.
    fn backfill_indexed(&mut self, index: &mut Fit, from: usize, shadow: u64) {
        // `now + estimate < shadow`, as `backfill_from` asks.
        let limit = shadow.saturating_sub(self.now);
        let mut at = from;
        while !(self.free == 0 && self.no_empty) {
            let Some(p) = index.first(at, self.free, limit) else {
                break;
            };
            self.start(self.queue[p]);
            self.queue[p] = GONE;
            index.remove(p);
            at = p + 1;
        }
        while self.queue.last() == Some(&GONE) {
            self.queue.pop();
            index.pop();
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
    // Without backfilling nothing but this order reorders the queue: the
    // first job is taken from it and arrivals are appended. So the jobs
    // before the arrivals are still sorted, and sorting the arrivals and
    // placing each after the sorted jobs of no greater key is the stable
    // sort of the whole queue (a whole trace queues tens of thousands).
    // Backfilling sorts the queue by submission while a job waits.
    if backfill
        && !order.is_dynamic()
        && jobs.windows(2).all(|pair| pair[0].submit <= pair[1].submit)
    {
        return run_fixed_backfilling(workload, window, &fixed);
    }
    let mut sorted = 0;
    run_choosing(workload, window, backfill, |d| {
        if order.is_dynamic() {
            let now = d.now;
            d.queue
                .sort_by_cached_key(|&j| key(order, &d.jobs[j as usize], now));
        } else if backfill || sorted == 0 || sorted > d.queue.len() {
            d.queue.sort_by_key(|&j| fixed[j as usize]);
        } else {
            let mut arrived = d.queue.split_off(sorted);
            arrived.sort_by_key(|&j| fixed[j as usize]);
            let mut from = 0;
            for j in arrived {
                let k = fixed[j as usize];
                from += d.queue[from..].partition_point(|&q| fixed[q as usize] <= k);
                d.queue.insert(from, j);
                from += 1;
            }
        }
        // The first job starts and leaves the queue.
        sorted = d.queue.len() - 1;
        d.queue[0]
    })
}

/// [`run`] with backfilling, for an order whose keys do not change.
///
/// The reference sorts the queue by the order's key at every decision and
/// by submission while the chosen job waits, each sort stable: on a deep
/// queue two full sorts a decision. Jobs arrive in window order, and where
/// the window is in submission order too, each sort's ties keep window
/// order: the first job by key is always the least (key, window position)
/// (kept here in an ordered set), and the queue backfilling walks is in
/// (submission, key, window position) order, which `Sim` sorts it in. (A
/// trace numbered out of submission order is replayed as the reference
/// does it, [`run`] sorting the queue at every decision.)
fn run_fixed_backfilling(workload: &Workload, window: Window, fixed: &[Key]) -> Schedule {
    let mut queued: BTreeSet<(Key, u32)> = BTreeSet::new();
    let (mut seen, mut told) = (0, 0);
    replay(workload, window, true, Some(fixed), |d| {
        // Jobs arrive in window order, and every one that arrived is queued
        // or started; one that also started since is added, then taken out.
        let arrived = d.queue.len() + d.started.len();
        for (j, &key) in fixed.iter().enumerate().take(arrived).skip(seen) {
            queued.insert((key, j as u32));
        }
        seen = seen.max(arrived);
        for &j in &d.started[told..] {
            queued.remove(&(fixed[j as usize], j));
        }
        told = d.started.len();
        queued.first().map_or(d.queue[0], |&(_, j)| j)
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
    choose: impl FnMut(&mut Decision<'_>) -> u32,
) -> Schedule {
    replay(workload, window, backfill, None, choose)
}

/// [`run_choosing`], backfilling's sort breaking ties in submission by
/// `ties` when given.
fn replay(
    workload: &Workload,
    window: Window,
    backfill: bool,
    ties: Option<&[Key]>,
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
        ties,
        nodes: jobs.iter().map(|j| machine.nodes_for(j.procs)).collect(),
        no_empty: jobs.iter().all(|j| machine.nodes_for(j.procs) > 0),
        // A queue of one is in any order.
        in_wait_order: true,
        submitted_in_order: submit.is_sorted(),
        free: machine.nodes,
        now: submit.first().copied().unwrap_or(0),
        next: 0,
        queue: Vec::new(),
        running: Vec::new(),
        sorted: 0,
        by_estimate: BTreeSet::new(),
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
            .position(chosen)
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
    use super::{Key, Reservations, key, run, run_choosing};
    use crate::workload::Dropped;
    use crate::{Machine, SimJob, Window, Workload};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use slurp_runtime::core::Order;

    /// The reference's list handling as written (RL-SPEC.md), kept as the
    /// oracle for `Sim`, which gives the same lists without sorting all
    /// of them at every event: the running jobs sorted by end at every
    /// event, and, while a chosen job waits with backfilling, the queue
    /// sorted by submission and walked whole after every event.
    mod naive {
        use super::super::{Decision, Reservations};
        use crate::{Schedule, Window, Workload};

        struct Sim {
            submit: Vec<u64>,
            run: Vec<u64>,
            estimate: Vec<u64>,
            nodes: Vec<u32>,
            free: u32,
            now: u64,
            next: usize,
            queue: Vec<u32>,
            running: Vec<u32>,
            starts: Vec<u64>,
            order: Vec<u32>,
        }

        impl Sim {
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

            fn wait_backfilling(&mut self, chosen: u32) {
                let mut running = std::mem::take(&mut self.running);
                running.sort_by_key(|&r| self.starts[r as usize] + self.estimate[r as usize]);
                self.running = running;
                let shadow = Reservations::new(
                    self.now,
                    self.free,
                    self.running.iter().map(|&r| {
                        let r = r as usize;
                        (self.starts[r] + self.estimate[r], self.nodes[r])
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

        pub fn run_choosing(
            workload: &Workload,
            window: Window,
            backfill: bool,
            mut choose: impl FnMut(&mut Decision<'_>) -> u32,
        ) -> Schedule {
            let jobs = &workload.jobs[window.range()];
            let machine = workload.machine;
            let mut sim = Sim {
                submit: jobs.iter().map(|j| j.submit).collect(),
                run: jobs.iter().map(|j| j.run).collect(),
                estimate: jobs.iter().map(|j| j.estimate).collect(),
                nodes: jobs.iter().map(|j| machine.nodes_for(j.procs)).collect(),
                free: machine.nodes,
                now: jobs[0].submit,
                next: 1,
                queue: vec![0],
                running: Vec::new(),
                starts: vec![0; jobs.len()],
                order: Vec::new(),
            };
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
                        while !sim.fits(chosen) && sim.step() {}
                    }
                }
                let at = sim.queue.iter().position(|&j| j == chosen).unwrap();
                sim.queue.remove(at);
                sim.start(chosen);
                while sim.queue.is_empty() && sim.next < jobs.len() {
                    sim.step();
                }
            }
            Schedule::new(window, sim.starts, sim.order)
        }
    }

    /// A workload crowded with ties: jobs submitted in bursts of the same
    /// second, runs and estimates that end together, sizes up to the
    /// whole machine (on nodes of one or two processors). The gaps between
    /// bursts are multiplied by `spread`: at 1 the queue grows to hundreds,
    /// at 4 it stays short and jobs of the same second meet at its head.
    fn tied(rng: &mut ChaCha8Rng, jobs: usize, spread: u64, shuffled: bool) -> Workload {
        let machine = Machine {
            nodes: 8,
            procs_per_node: rng.random_range(1..=2),
        };
        let mut submit = 0;
        let jobs = (0..jobs)
            .map(|i| {
                submit += [0, 0, 0, 1, 2, 5][rng.random_range(0..6)] * spread;
                let run = rng.random_range(1..=12);
                SimJob {
                    id: i as i64,
                    submit,
                    run,
                    estimate: run + [0, 0, 3, 8][rng.random_range(0..4)],
                    procs: rng.random_range(1..=machine.procs() as u32),
                    user: rng.random_range(0..4),
                    group: -1,
                    exe: -1,
                    mem: -1,
                }
            })
            .collect::<Vec<SimJob>>();
        // A trace numbered out of submission order: some neighbours swap
        // their submit times.
        let mut jobs = jobs;
        if shuffled {
            for i in 1..jobs.len() {
                if rng.random_range(0..8) == 0 {
                    let earlier = jobs[i - 1].submit;
                    jobs[i - 1].submit = jobs[i].submit;
                    jobs[i].submit = earlier;
                }
            }
        }
        Workload {
            machine,
            jobs,
            dropped: Dropped::default(),
            max_run: 20,
        }
    }

    /// Every schedule is the reference's, to the start order: the heuristics
    /// (which re-sort the queue at each decision), and a chooser that takes
    /// any queued job, with and without backfilling, on workloads where
    /// jobs arrive, end and are estimated to end at the same second, some
    /// numbered out of submission order.
    #[test]
    fn schedules_are_the_reference_lists_ones() {
        let mut rng = ChaCha8Rng::seed_from_u64(29);
        for round in 0..30 {
            let workload = tied(&mut rng, 400, [1, 2, 4][round % 3], round % 4 == 3);
            let window = Window { start: 0, len: 400 };
            for backfill in [false, true] {
                for order in [Order::Fcfs, Order::Sjf, Order::F1, Order::Wfp3] {
                    let naive = naive::run_choosing(&workload, window, backfill, |d| {
                        let now = d.now;
                        d.queue
                            .sort_by_cached_key(|&j| key(order, &d.jobs[j as usize], now));
                        d.queue[0]
                    });
                    let fast = run(&workload, window, order, backfill);
                    assert_eq!(fast, naive, "round {round}, {order:?}, backfill {backfill}");
                }
                // A chooser that takes a job anywhere in the queue, so that
                // chosen jobs wait behind others of every size.
                let pick = |d: &mut super::Decision<'_>| {
                    let k: Key = (d.now, d.queue.len() as u64);
                    d.queue[(k.0 * 31 + k.1 * 7) as usize % d.queue.len()]
                };
                let naive = naive::run_choosing(&workload, window, backfill, pick);
                let fast = run_choosing(&workload, window, backfill, pick);
                assert_eq!(fast, naive, "round {round}, any job, backfill {backfill}");
            }
        }
    }

    /// A queue in window order is in submission order only where the
    /// trace was numbered in it: on a trace numbered out of order, a wait
    /// must sort a queue its chooser left in window order.
    #[test]
    fn a_wait_sorts_a_queue_numbered_out_of_submission_order() {
        let mut rng = ChaCha8Rng::seed_from_u64(31);
        let pick = |d: &mut super::Decision<'_>| {
            d.queue.sort_unstable();
            let k: Key = (d.now, d.queue.len() as u64);
            d.queue[(k.0 * 31 + k.1 * 7) as usize % d.queue.len()]
        };
        for round in 0..40 {
            let workload = tied(&mut rng, 400, 1 + round % 2, true);
            let window = Window { start: 0, len: 400 };
            let naive = naive::run_choosing(&workload, window, true, pick);
            let fast = run_choosing(&workload, window, true, pick);
            assert_eq!(fast, naive, "round {round}");
        }
    }

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
