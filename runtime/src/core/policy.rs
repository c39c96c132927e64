//! Queue policies: which runnable tasks start now.
//!
//! A policy is an **order** and a **backfilling** mode. Orders (lowest key
//! first; ties keep submission order):
//!
//! - `fcfs`: submission order.
//! - `sjf`: shortest time limit first (tasks without one last).
//! - `f1`: log10(r)·n + 870·log10(s) — the heuristic Carastan-Santos and de
//!   Camargo found by regression (r: time limit, n: cores, s: submit time
//!   in seconds; values ≤ 0 become 0.1 before the logarithm).
//! - `wfp3`: −(w/r)³·n, w the time waited so far: long-waiting, short, wide
//!   tasks first (Tang et al.).
//! - `unicep`: −w/(log2(n)·r) (Tang et al.; log2 n taken as at least 1, so a
//!   one-core task does not divide by zero).
//! - `fairshare`: the earliest task of the user with the least decayed
//!   usage, Slurm's classic fair-share factor (`fairshare.rs`; a user is
//!   what [`super::Job::user`] says).
//!
//! `wfp3` and `unicep` depend on the time; a kinetic tournament
//! (`kinetic.rs`) keeps which task ranks first as the clock moves, and the
//! queue holds them in submission order. A task without a time limit has
//! r = ∞ (last under `sjf`/`f1`, no urgency under `wfp3`/`unicep`); r is at
//! least one second.
//!
//! Backfilling:
//!
//! - none: the first task in order that does not fit blocks everything
//!   behind it.
//! - `easy`: when the head does not fit it gets a reservation — the earliest
//!   time running tasks' time limits free enough for it — and later tasks
//!   start now only if they end before it (shortest first: found in a
//!   time-limit index, so a deep queue costs nothing when none qualifies)
//!   or, in queue order, use only what the head will not need then. A task
//!   without `time` is unbounded: it can only use what the head will not
//!   need.
//! - `conservative`: every waiting task gets a reservation in order; a task
//!   starts now only if that delays no earlier reservation.
//!
//! Names: `fcfs`, `sjf`, `f1`, `wfp3`, `unicep`, `fairshare`, each with `+easy` (alias
//! `+bf`) or `+conservative`; `easy` is `fcfs+easy` (the default) and
//! `conservative` is `fcfs+conservative`.
//!
//! Reservations count resources summed over the instance (exact on one node,
//! where cores of a kind are interchangeable). A backfilling pass tries at
//! most [`BACKFILL_DEPTH`] tasks small enough to fit in the cores free (found
//! by size class, `classes.rs`), as production schedulers bound theirs
//! (Slurm's `bf_max_job_test`), so a decision stays cheap with a deep queue.
//! Under `wfp3`/`unicep` the second pass takes those candidates narrowest
//! class first and tries them by their priority now. `conservative` plans
//! [`CONSERVATIVE_DEPTH`] tasks.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;

use super::classes::Fit;
use super::{Amounts, Core, Counts, Job, Time};

/// How many tasks small enough to fit one backfilling pass tries.
pub const BACKFILL_DEPTH: usize = 1000;
/// Candidates are looked up this many at a time.
const BATCH: usize = 32;
/// Conservative reservations are quadratic in depth; it looks less far.
pub const CONSERVATIVE_DEPTH: usize = 200;

/// The order of the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Order {
    Fcfs,
    Sjf,
    F1,
    Wfp3,
    Unicep,
    Fairshare,
}

impl Order {
    pub const ALL: [Order; 6] = [
        Order::Fcfs,
        Order::Sjf,
        Order::F1,
        Order::Wfp3,
        Order::Unicep,
        Order::Fairshare,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Order::Fcfs => "fcfs",
            Order::Sjf => "sjf",
            Order::F1 => "f1",
            Order::Wfp3 => "wfp3",
            Order::Unicep => "unicep",
            Order::Fairshare => "fairshare",
        }
    }

    /// Whether keys change as time passes (the queue is re-ranked).
    pub fn is_dynamic(self) -> bool {
        matches!(self, Order::Wfp3 | Order::Unicep)
    }
}

/// What may start around a head that does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backfill {
    None,
    Easy,
    Conservative,
}

/// A queue order and a backfilling mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PolicyKind {
    pub order: Order,
    pub backfill: Backfill,
}

impl Default for PolicyKind {
    fn default() -> Self {
        PolicyKind::EASY
    }
}

impl PolicyKind {
    pub const FCFS: PolicyKind = PolicyKind::new(Order::Fcfs, Backfill::None);
    pub const SJF: PolicyKind = PolicyKind::new(Order::Sjf, Backfill::None);
    pub const EASY: PolicyKind = PolicyKind::new(Order::Fcfs, Backfill::Easy);
    pub const CONSERVATIVE: PolicyKind = PolicyKind::new(Order::Fcfs, Backfill::Conservative);

    pub const fn new(order: Order, backfill: Backfill) -> Self {
        PolicyKind { order, backfill }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPolicy(pub String);

impl fmt::Display for UnknownPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown policy `{}` (orders: fcfs, sjf, f1, wfp3, unicep, fairshare, each with an \
             optional +easy or +conservative; easy = fcfs+easy, conservative = \
             fcfs+conservative)",
            self.0
        )
    }
}

impl std::error::Error for UnknownPolicy {}

impl std::str::FromStr for PolicyKind {
    type Err = UnknownPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let unknown = || UnknownPolicy(s.to_owned());
        match s {
            "easy" => return Ok(PolicyKind::EASY),
            "conservative" => return Ok(PolicyKind::CONSERVATIVE),
            _ => {}
        }
        let (order, backfill) = match s.split_once('+') {
            Some((order, "easy" | "bf")) => (order, Backfill::Easy),
            Some((order, "conservative")) => (order, Backfill::Conservative),
            Some(_) => return Err(unknown()),
            None => (s, Backfill::None),
        };
        let order = Order::ALL
            .into_iter()
            .find(|o| o.name() == order)
            .ok_or_else(unknown)?;
        Ok(PolicyKind::new(order, backfill))
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.order, self.backfill) {
            (Order::Fcfs, Backfill::Easy) => f.write_str("easy"),
            (Order::Fcfs, Backfill::Conservative) => f.write_str("conservative"),
            (order, Backfill::None) => f.write_str(order.name()),
            (order, Backfill::Easy) => write!(f, "{}+easy", order.name()),
            (order, Backfill::Conservative) => write!(f, "{}+conservative", order.name()),
        }
    }
}

/// Maps a float onto a `u64` with the same order, so float priorities live
/// in the same integer-keyed queue as the others (NaN sorts as +∞).
pub fn float_key(x: f64) -> u64 {
    let bits = if x.is_nan() { f64::INFINITY } else { x }.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

impl PolicyKind {
    /// The queue key of `job`, runnable since `ready` (ms); ties fall back
    /// to task order (submission order). Time-dependent orders are ranked
    /// by [`PolicyKind::slope`] instead; the queue keeps them in
    /// submission order.
    pub(super) fn key(self, job: &Job, ready: Time) -> u64 {
        match self.order {
            Order::Fcfs | Order::Wfp3 | Order::Unicep | Order::Fairshare => 0,
            Order::Sjf => job.time_limit.unwrap_or(u64::MAX),
            Order::F1 => {
                let positive = |x: f64| if x <= 0.0 { 0.1 } else { x };
                let s = ready.0 as f64 / 1000.0;
                float_key(
                    positive(limit_secs(job)).log10() * cores(job) + 870.0 * positive(s).log10(),
                )
            }
        }
    }

    /// For time-dependent orders: the rate at which the task's priority
    /// line grows per unit of waiting. `wfp3`'s (w/r)³·n ranks as its cube
    /// root w·n^⅓/r; `unicep` is w/(log2(n)·r).
    pub(super) fn slope(self, job: &Job) -> f64 {
        let (r, n) = (limit_secs(job), cores(job));
        match self.order {
            Order::Wfp3 => n.cbrt() / r,
            Order::Unicep => 1.0 / (n.log2().max(1.0) * r),
            _ => 0.0,
        }
    }
}

/// r: the time limit in seconds, at least 1; ∞ without one.
fn limit_secs(job: &Job) -> f64 {
    job.time_limit.map_or(f64::INFINITY, |r| r.max(1) as f64)
}

/// n: the cores a task needs, at least 1.
fn cores(job: &Job) -> f64 {
    job.request.total_cores().max(1) as f64
}

/// Starts the tasks the policy picks, on the core.
pub(super) fn select(core: &mut Core, now: Time) {
    // Heads that fit start in order under every policy. Once nothing more
    // could start, the head is not asked for: a learned chooser's decision
    // is most of a turnover, and one made on a full instance would count
    // for nothing (the next instant asks again).
    while core.may_start()
        && let Some(head) = core.head(now)
    {
        if !core.cluster.fits(&core.slots.get(head).job.request) {
            break;
        }
        core.start(now, head);
    }
    match core.policy.backfill {
        Backfill::None => {}
        Backfill::Easy => easy(core, now),
        Backfill::Conservative => conservative(core, now),
    }
}

impl Core {
    /// The head of the queue and the time EASY reserves for it: when the
    /// time limits of running tasks free enough for it, node by node. Also
    /// the instance as it will be then, with the head placed: what is left
    /// in it is what tasks running past the reservation may use. `None`
    /// when the queue is empty; `Time::NEVER` (and an empty projection)
    /// when an unbounded task stands in the way.
    pub fn reservation(&mut self, now: Time) -> Option<(u32, Time, Counts)> {
        let head = self.head(now)?;
        let request = self.slots.get(head).job.request;
        let mut projected = self.cluster.counts().clone();
        let mut at = now;
        for &(end, t) in &self.running {
            if projected.fits(&request) {
                break;
            }
            if end == Time::NEVER {
                return Some((head, Time::NEVER, Counts::empty()));
            }
            if let Some((_, alloc)) = &self.slots.get(t).running {
                projected.release(alloc);
            }
            at = end.max(now);
        }
        match projected.plan(&request) {
            Some(plan) => {
                projected.take_plan(&plan, &request);
                Some((head, at, projected))
            }
            None => Some((head, Time::NEVER, Counts::empty())),
        }
    }
}

fn easy(core: &mut Core, now: Time) {
    // Nothing can start: skip the reservation.
    if !core.may_start() {
        return;
    }
    let Some((head, shadow, mut projected)) = core.reservation(now) else {
        return;
    };
    // First the tasks that end before the reservation, shortest first: they
    // are a range of the time-limit index, so a deep queue costs nothing
    // when none qualifies.
    if shadow != Time::NEVER {
        let slack = (shadow.0 - now.0) / 1000;
        // In short batches: once the instance is full the pass stops, and
        // the tasks after that need not even be looked up.
        let mut after = None;
        let mut left = BACKFILL_DEPTH;
        let mut budget = 2 * BACKFILL_DEPTH;
        while left > 0 && core.cluster.free().cores > 0 {
            let free = core.cluster.free().cores;
            let batch = core.classes.shortest(
                Fit {
                    cores: &|t| core.slots.cores(t),
                    free,
                    skip: head,
                },
                slack,
                after,
                BATCH.min(left),
                &mut budget,
            );
            let Some(&last) = batch.last() else {
                break;
            };
            after = Some((
                core.slots.get(last).job.time_limit.unwrap_or(u64::MAX),
                last,
            ));
            left -= batch.len();
            for t in batch {
                if core.cluster.free().cores == 0 {
                    break;
                }
                if core.cluster.fits(&core.slots.get(t).job.request) {
                    core.start(now, t);
                }
            }
        }
    }
    // Then, in queue order, tasks that run past the reservation, on what the
    // head leaves spare then — when it leaves any.
    if shadow != Time::NEVER && projected.free().cores == 0 {
        return;
    }
    // A task running past the reservation must fit now and in what the
    // head leaves spare then; with no reservation time, now only.
    let room = |core: &Core, projected: &Counts| match shadow {
        Time::NEVER => core.cluster.free().cores,
        _ => core.cluster.free().cores.min(projected.free().cores),
    };
    let mut after = (core.slots.get(head).key, head);
    let mut left = BACKFILL_DEPTH;
    let mut budget = 2 * BACKFILL_DEPTH;
    let mut batch = Vec::new();
    // A time-dependent order: the queue is in submission order, so the
    // candidates small enough to fit are taken from all of it and tried by
    // their priority now (a heap: usually only the first few start).
    let mut ranked: Option<BinaryHeap<(u64, Reverse<u32>)>> = None;
    if let Some(kinetic) = &core.kinetic {
        let room = room(core, &projected);
        let candidates = core.classes.small_enough(
            Fit {
                cores: &|t| core.slots.cores(t),
                free: room,
                skip: head,
            },
            BACKFILL_DEPTH,
            &mut budget,
        );
        ranked = Some(
            candidates
                .into_iter()
                .map(|t| (float_key(kinetic.priority(t, now.0)), Reverse(t)))
                .collect(),
        );
        left = 0;
    }
    loop {
        let next = match &mut ranked {
            Some(heap) => heap.pop().map(|(_, Reverse(t))| t),
            None => batch.pop(),
        };
        let Some(t) = next else {
            let room = room(core, &projected);
            if left == 0 || room == 0 {
                break;
            }
            batch = core.classes.in_order(
                Fit {
                    cores: &|t| core.slots.cores(t),
                    free: room,
                    skip: head,
                },
                after,
                BATCH.min(left),
                &mut budget,
            );
            let Some(&last) = batch.last() else {
                break;
            };
            after = (core.slots.get(last).key, last);
            left -= batch.len();
            batch.reverse();
            continue;
        };
        if core.cluster.free().cores == 0 {
            break;
        }
        let job = &core.slots.get(t).job;
        if shadow == Time::NEVER && job.time_limit.is_some() {
            // The head waits on an unbounded task: bounded tasks cannot
            // delay a reservation that has no time.
            if core.cluster.fits(&job.request) {
                core.start(now, t);
                drop_too_large(&mut ranked, &core.slots, room(core, &projected));
            }
            continue;
        }
        let Some(plan) = core.cluster.plan(&job.request) else {
            continue;
        };
        if projected.fits_plan(&plan, &job.request) {
            // Still running at the reservation: it must leave the head's
            // resources free then, on the same nodes it takes now.
            projected.take_plan(&plan, &job.request);
            core.start(now, t);
            drop_too_large(&mut ranked, &core.slots, room(core, &projected));
        }
    }
}

/// After a start: candidates that no longer fit in what is left need not
/// be tried one by one.
fn drop_too_large(
    ranked: &mut Option<BinaryHeap<(u64, Reverse<u32>)>>,
    slots: &super::slots::Slots,
    room: u64,
) {
    if let Some(heap) = ranked {
        heap.retain(|&(_, Reverse(t))| slots.cores(t) as u64 <= room);
    }
}

/// Free amounts over time: `(from, free)` steps, sorted, the last lasting
/// forever.
struct Profile(Vec<(Time, Amounts)>);

impl Profile {
    fn new(core: &Core, now: Time) -> Profile {
        let mut steps = vec![(now, core.cluster.free())];
        for &(end, t) in &core.running {
            if end == Time::NEVER {
                break;
            }
            let Some((_, alloc)) = &core.slots.get(t).running else {
                continue;
            };
            let mut free = steps.last().map(|s| s.1).unwrap_or_default();
            free.add(&Amounts {
                cores: alloc.cores() as u64,
                gpus: alloc.slices.iter().map(|s| s.gpus.len() as u64).sum(),
                mem: alloc.slices.iter().map(|s| s.mem).sum(),
            });
            let at = end.max(now);
            match steps.last_mut() {
                Some(last) if last.0 == at => last.1 = free,
                _ => steps.push((at, free)),
            }
        }
        Profile(steps)
    }

    /// The earliest step time from which `need` is free for `length`: one
    /// pass, keeping the start of the current run of steps that cover it.
    fn earliest(&self, need: &Amounts, length: u64) -> Option<Time> {
        let mut candidate: Option<Time> = None;
        for &(at, free) in &self.0 {
            if let Some(from) = candidate
                && length != u64::MAX
                && at.0 >= from.0.saturating_add(length)
            {
                return Some(from);
            }
            if free.covers(need) {
                candidate.get_or_insert(at);
            } else {
                candidate = None;
            }
        }
        // The last step lasts forever.
        candidate
    }

    fn split(&mut self, at: Time) -> usize {
        match self.0.binary_search_by_key(&at, |s| s.0) {
            Ok(i) => i,
            Err(i) => {
                let free = self.0[i - 1].1;
                self.0.insert(i, (at, free));
                i
            }
        }
    }

    fn reserve(&mut self, from: Time, length: u64, need: &Amounts) {
        let start = self.split(from);
        let end = if length == u64::MAX {
            self.0.len()
        } else {
            self.split(Time(from.0.saturating_add(length)))
        };
        for step in &mut self.0[start..end] {
            step.1.sub(need);
        }
    }
}

fn conservative(core: &mut Core, now: Time) {
    if !core.may_start() {
        return;
    }
    let queued = core.ranked(now, CONSERVATIVE_DEPTH);
    // The fewest cores any task from here on needs: once fewer are free,
    // nothing more can start now.
    let mut least: Vec<u64> = queued.iter().map(|&t| core.slots.cores(t) as u64).collect();
    for i in (1..least.len()).rev() {
        least[i - 1] = least[i - 1].min(least[i]);
    }
    if least.first().is_none_or(|&l| l > core.cluster.free().cores) {
        return;
    }
    let mut profile = Profile::new(core, now);
    let mut planned = 0;
    for (i, t) in queued.into_iter().enumerate() {
        // A cohort's next member stands in the queue for those not yet
        // admitted, and they come right after it in every order (same
        // request, estimate, arrival and user; ties go to task order): they
        // are planned here, so a sweep's members get their reservations as
        // tasks queued one by one would.
        let mut t = t;
        loop {
            // Reservations only decide what starts now; once nothing can,
            // the rest of the queue cannot change that.
            if planned == CONSERVATIVE_DEPTH || core.cluster.free().cores < least[i] {
                return;
            }
            planned += 1;
            let slot = core.slots.get(t);
            let fresh = slot.attempts == 0;
            let need = Amounts::of(&slot.job.request);
            let length = slot
                .job
                .time_limit
                .map_or(u64::MAX, |s| s.saturating_mul(1000));
            let from = profile.earliest(&need, length);
            let cohort = core.slots.cohort_of(t).filter(|_| fresh);
            let admitted = cohort.map(|c| core.slots.cohorts[c].next);
            let started = from == Some(now) && core.cluster.fits(&slot.job.request);
            if started {
                core.start(now, t);
            }
            if let Some(from) = from {
                profile.reserve(from, length, &need);
            }
            let Some(c) = cohort else {
                break;
            };
            let next = core.slots.cohorts[c].next;
            if started {
                // Its start admitted the next member, if one was left.
                if Some(next) == admitted {
                    break;
                }
                t = next - 1;
                continue;
            }
            // An identical member cannot start now when this one could
            // not; the members after it are only reserved.
            let copies = (core.slots.cohorts[c].waiting as usize).min(CONSERVATIVE_DEPTH - planned);
            for _ in 0..copies {
                match profile.earliest(&need, length) {
                    Some(from) => profile.reserve(from, length, &need),
                    None => break,
                }
            }
            planned += copies;
            break;
        }
    }
}
