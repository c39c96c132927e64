//! The scheduler core: synchronous, clock-free, and the same for real runs
//! and simulation.
//!
//! It is told the time and what happened (`on_finished`, `cancel`, `halt`),
//! and asked to `schedule`; it answers with [`Event`]s in an outbox the
//! driver drains: every state transition, and `Start` decisions naming the
//! concrete cores and GPUs a task gets. It never sleeps, spawns, or reads a
//! clock, so tests drive it on a fake clock and `slurp sim` on a virtual one.
//!
//! States follow DESIGN.md: `pending` (waiting on dependencies) →
//! `runnable` (waiting for resources) → `running` → `succeeded` | `failed` |
//! `timeout` | `cancelled` | `skipped` (a dependency did not succeed).
//! Dependencies are afterok. A failed attempt with retries left goes back
//! to `runnable` at its old place in the queue.
//!
//! A sweep's identical, independent members are one **cohort**
//! (`slots.rs`): one queue entry with a cursor, its members given slots as
//! they are admitted and giving them up as they succeed, so the core holds
//! what runs, not the sweep. Their `runnable` is not announced one by one:
//! a member is first heard of when it starts.
//!
//! Invariants (checked by the property tests): resources are never
//! oversubscribed; nothing starts before its dependencies succeeded; every
//! task whose dependencies succeed eventually starts; a cohort schedules as
//! its members would one by one.

mod classes;
mod cluster;
mod fairshare;
mod kinetic;
mod policy;
mod slots;

use std::collections::BTreeSet;
use std::fmt;

use serde::Serialize;

use classes::Classes;
pub use cluster::{Alloc, Amounts, Cluster, Counts, NodeSlice};
pub use fairshare::{FairShare, HALF_LIFE, Snapshot};
use kinetic::Tournament;
pub use policy::{Backfill, Order, PolicyKind, UnknownPolicy, float_key};
pub use slots::Part;
use slots::Slots;

use crate::ir::{Request, TaskId, Workflow};
use crate::resources::Capacity;

/// Milliseconds since the run began.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
pub struct Time(pub u64);

impl Time {
    pub const NEVER: Time = Time(u64::MAX);

    pub fn plus_secs(self, secs: u64) -> Time {
        Time(self.0.saturating_add(secs.saturating_mul(1000)))
    }
}

/// What the core needs of a task.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub request: Request,
    /// Seconds; also the estimate backfilling uses. `None`: unbounded.
    pub time_limit: Option<u64>,
    pub retries: u32,
    /// Who the task is charged to under `fairshare` (a trace's user; in a
    /// workflow, the line or sweep it comes from).
    pub user: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Pending,
    Runnable,
    Running,
    Succeeded,
    Failed,
    Timeout,
    Cancelled,
    Skipped,
    /// Stopped for using more memory than its `mem=` (after its retries).
    #[serde(rename = "out_of_memory")]
    OutOfMemory,
}

impl State {
    pub const ALL: [State; 9] = [
        State::Pending,
        State::Runnable,
        State::Running,
        State::Succeeded,
        State::Failed,
        State::Timeout,
        State::Cancelled,
        State::Skipped,
        State::OutOfMemory,
    ];

    pub fn is_final(self) -> bool {
        matches!(
            self,
            State::Succeeded
                | State::Failed
                | State::Timeout
                | State::Cancelled
                | State::Skipped
                | State::OutOfMemory
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Runnable => "runnable",
            State::Running => "running",
            State::Succeeded => "succeeded",
            State::Failed => "failed",
            State::Timeout => "timeout",
            State::Cancelled => "cancelled",
            State::Skipped => "skipped",
            State::OutOfMemory => "out_of_memory",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How an attempt ended, as the executor saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Success,
    /// Non-zero exit status (of the first rank that failed).
    Exit(i32),
    /// Killed by a signal.
    Signal(i32),
    /// Ran past its time limit and was stopped.
    Timeout,
    /// Used more memory than its limit and was stopped.
    OutOfMemory,
    /// Could not be started (no such program, bad working directory…).
    SpawnError,
    /// Stopped by cancellation.
    Cancelled,
}

/// Why a transition happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Its dependencies are still running.
    Waiting,
    /// Its dependencies succeeded (or it had none).
    Ready,
    /// The attempt ended so.
    Ended(Outcome),
    /// It will run again: attempt `attempt` failed.
    Retry { attempt: u32 },
    /// A dependency did not succeed.
    Dependency(TaskId),
    /// The run was interrupted or halted after a failure.
    Halted,
    /// Cancelled on request (`slurp cancel RUN TASK`) before it started.
    Cancelled,
    /// It succeeded in the run this one resumes.
    Resumed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `task` moved to `to`.
    Transition {
        time: Time,
        task: TaskId,
        to: State,
        reason: Reason,
    },
    /// Start `task` (attempt `attempt`, from 1) on `alloc`.
    Start {
        time: Time,
        task: TaskId,
        attempt: u32,
        alloc: Alloc,
    },
    /// `count` members of a cohort from `first` on, none of them ever
    /// admitted, moved to `to` together: succeeded in the run resumed
    /// ([`Core::resume`]), or cancelled by a halt ([`Core::halt`]). One
    /// event for a stretch, so a sweep of 10⁸ taken over or stopped is not
    /// 10⁸ events.
    Stretch {
        time: Time,
        first: TaskId,
        count: u32,
        to: State,
        reason: Reason,
    },
}

#[derive(Debug)]
struct Slot {
    job: Job,
    state: State,
    deps_left: u32,
    attempts: u32,
    /// Why it is in its state.
    reason: Reason,
    /// Where the running attempt is and when it started.
    running: Option<(Time, Alloc)>,
    /// When it first became runnable (its submit time for the policy).
    ready: Time,
    /// Its key in `queue` while queued.
    key: u64,
}

fn core_count(request: &Request) -> u32 {
    u32::try_from(request.total_cores()).unwrap_or(u32::MAX)
}

/// Picks the head of the queue in place of the policy's order: a learned
/// policy. As RLScheduler's scheduler, it chooses once and its choice waits
/// at the head until it can start; EASY backfills around it.
pub trait Chooser: fmt::Debug + Send {
    /// One of `queue` (the runnable tasks, in submission order) at `now`,
    /// with `free_cores` free. Anything not in `queue` counts as its first.
    fn choose(&mut self, now: Time, queue: Queue<'_>, free_cores: u64) -> u32;
    /// `task` started at `now` (what a chooser learns from).
    fn started(&mut self, _now: Time, _task: u32) {}
    /// An attempt of `task` ended at `now`: what it held is free.
    fn ended(&mut self, _now: Time, _task: u32) {}
    /// `task` joined the queue, runnable since `ready` (again, on a retry).
    fn queued(&mut self, _ready: Time, _task: u32) {}
    /// `task` left the queue: it starts, or it will not run (cancelled,
    /// skipped). With `queued`, a chooser can keep its own view of the
    /// queue instead of reading `queue` whole at every decision.
    fn left(&mut self, _task: u32) {}
}

/// The runnable tasks, in submission order, as a chooser sees them: read
/// on demand, since a chooser that keeps its own view (through `queued` and
/// `left`) need not walk a queue of thousands at every decision.
#[derive(Debug, Clone, Copy)]
pub struct Queue<'a>(&'a BTreeSet<(u64, u32)>);

impl Queue<'_> {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The earliest submitted.
    pub fn first(&self) -> Option<u32> {
        self.0.first().map(|&(_, t)| t)
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().map(|&(_, t)| t)
    }
}

/// The scheduler core of one instance.
#[derive(Debug)]
pub struct Core {
    cluster: Cluster,
    policy: PolicyKind,
    /// Every task's slot, a cohort's members only while admitted.
    slots: Slots,
    /// Dependents of each individual task, by its index among them (CSR:
    /// `dependents[offsets[i]..offsets[i+1]]`).
    offsets: Vec<u32>,
    dependents: Vec<u32>,
    /// Dependents added after the core was made ([`Core::add`]): tasks
    /// submitted to a live instance that wait for tasks it already had.
    late: std::collections::HashMap<u32, Vec<u32>>,
    /// Runnable tasks in policy order.
    queue: BTreeSet<(u64, u32)>,
    /// The same tasks by size class, each class by time limit and by queue
    /// order: backfilling walks only tasks small enough to fit.
    classes: Classes,
    /// Running tasks by estimated end.
    running: BTreeSet<(Time, u32)>,
    /// Under a time-dependent order (`wfp3`, `unicep`): who ranks first
    /// when. `queue` then holds tasks in submission order.
    kinetic: Option<Tournament>,
    outbox: Vec<Event>,
    halted: bool,
    counts: [usize; 9],
    /// A learned policy choosing the head, and its standing choice and
    /// when it was made: it stands for the rest of that instant (the pass
    /// and EASY's reservation both ask for the head, and a network costs
    /// microseconds), and the chooser is asked again when time moves and
    /// a task could start, as a heuristic's order re-ranks — a choice
    /// that stood until it could start kept later, better arrivals
    /// waiting behind it.
    chooser: Option<Box<dyn Chooser>>,
    chosen: Option<(u32, Time)>,
    /// Under `fairshare`: each user's decayed usage and queued tasks.
    fairshare: Option<FairShare>,
    /// Starts so far (a pass that started something is run again when
    /// cohorts admitted members behind what it had looked at).
    starts: u64,
}

impl Core {
    /// A core for `jobs`, where `dependencies(t)` lists what task `t` waits
    /// for. Every task starts `pending` or `runnable` (events in the outbox).
    pub fn new<I: IntoIterator<Item = u32>>(
        capacity: Capacity,
        policy: PolicyKind,
        jobs: Vec<Job>,
        dependencies: impl Fn(u32) -> I,
        now: Time,
    ) -> Self {
        let parts = jobs.into_iter().map(Part::One).collect();
        Core::with_parts(capacity, policy, parts, dependencies, now)
    }

    /// A core for `parts`, task ids in order: individual tasks, where
    /// `dependencies(t)` lists what task `t` waits for (individual tasks
    /// only), and cohorts of identical independent tasks (events only for
    /// the individual ones: a cohort's members are runnable from the start
    /// and first heard of when they start).
    pub fn with_parts<I: IntoIterator<Item = u32>>(
        capacity: Capacity,
        policy: PolicyKind,
        parts: Vec<Part>,
        dependencies: impl Fn(u32) -> I,
        now: Time,
    ) -> Self {
        let mut slots = Slots::new(parts, now);
        let own: Vec<u32> = slots.own_ids().collect();
        let mut edges: Vec<(u32, u32)> = Vec::new();
        for &t in &own {
            for d in dependencies(t) {
                edges.push((d, t));
                slots.get_mut(t).deps_left += 1;
            }
        }
        edges.sort_unstable();
        let mut offsets = vec![0u32; own.len() + 1];
        for &(d, _) in &edges {
            let Some(i) = slots.own_index(d) else {
                unreachable!("task {d} is waited for but in a cohort");
            };
            offsets[i + 1] += 1;
        }
        for i in 0..own.len() {
            offsets[i + 1] += offsets[i];
        }
        let dependents = edges.into_iter().map(|(_, t)| t).collect();
        let members: usize = slots.cohorts.iter().map(|c| c.ids.len()).sum();
        let mut core = Core {
            cluster: Cluster::new(capacity),
            policy,
            slots,
            offsets,
            dependents,
            late: Default::default(),
            queue: BTreeSet::new(),
            classes: Classes::new(),
            running: BTreeSet::new(),
            kinetic: policy.order.is_dynamic().then(Tournament::new),
            outbox: Vec::new(),
            halted: false,
            counts: [0; 9],
            chooser: None,
            chosen: None,
            fairshare: (policy.order == Order::Fairshare).then(|| FairShare::new(HALF_LIFE)),
            starts: 0,
        };
        core.counts[State::Pending as usize] = own.len();
        core.counts[State::Runnable as usize] = members;
        for t in own {
            if core.slots.get(t).deps_left == 0 {
                core.make_runnable(now, t);
            } else {
                core.outbox.push(Event::Transition {
                    time: now,
                    task: TaskId(t),
                    to: State::Pending,
                    reason: Reason::Waiting,
                });
            }
        }
        for c in 0..core.slots.cohorts.len() {
            core.admit(now, c);
        }
        core
    }

    /// Queues cohort `c`'s next waiting member, if it has one.
    fn admit(&mut self, now: Time, c: usize) {
        if !self.halted
            && let Some(t) = self.slots.admit(c)
        {
            self.enqueue(now, t);
        }
    }

    /// The cohorts: each one's first task and how many it has.
    pub fn cohorts(&self) -> impl Iterator<Item = (TaskId, u32)> + '_ {
        self.slots
            .cohorts
            .iter()
            .map(|c| (TaskId(c.ids.start), c.ids.len() as u32))
    }

    /// The cohort `task` is a member of (its index in [`Core::cohorts`]),
    /// and which member (from 0).
    pub fn cohort_of(&self, task: TaskId) -> Option<(usize, u32)> {
        let c = self.slots.cohort_of(task.0)?;
        Some((c, task.0 - self.slots.cohorts[c].ids.start))
    }

    /// A core for the tasks of a workflow: a run of a sweep's members
    /// that ask the same, with no dependencies and no dependents and not
    /// nested entries, is one cohort; every other task is its own.
    pub fn for_workflow(
        capacity: Capacity,
        policy: PolicyKind,
        workflow: &Workflow,
        now: Time,
    ) -> Self {
        let job = |t: crate::ir::Task| Job {
            request: t.request,
            time_limit: t.time_limit.map(|l| l.get()),
            retries: t.retries,
            user: t.template.0,
        };
        // Tasks with an edge split the runs they are in.
        let mut linked: Vec<u32> = workflow.graph.nodes().collect();
        linked.sort_unstable();
        let mut parts = Vec::new();
        for run in workflow.tasks.runs() {
            let ids = run.ids();
            let cohort = run.first.nested.is_none() && run.is_sweep();
            if !cohort {
                parts.extend((0..run.len).map(|k| Part::One(job(run.at(k)))));
                continue;
            }
            let mut from = ids.start;
            let first = linked.partition_point(|&t| t < ids.start);
            let cuts = linked[first..].iter().take_while(|&&t| t < ids.end);
            for &cut in cuts.chain(std::iter::once(&ids.end)) {
                match cut - from {
                    0 => {}
                    1 => parts.push(Part::One(job(run.at(from - ids.start)))),
                    n => parts.push(Part::Many(job(run.at(from - ids.start)), n)),
                }
                if cut < ids.end {
                    parts.push(Part::One(job(run.at(cut - ids.start))));
                }
                from = cut + 1;
            }
        }
        Core::with_parts(
            capacity,
            policy,
            parts,
            |t| workflow.dependencies(TaskId(t)).map(|d| d.0),
            now,
        )
    }

    pub fn state(&self, task: TaskId) -> State {
        self.slots.status(task.0).0
    }

    /// Why the task is in its state (the last transition's reason).
    pub fn reason(&self, task: TaskId) -> Reason {
        self.slots.status(task.0).1
    }

    pub fn attempts(&self, task: TaskId) -> u32 {
        self.slots.status(task.0).2
    }

    /// How many tasks are in each state, indexed by `State as usize`.
    pub fn counts(&self) -> [usize; 9] {
        self.counts
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.len() == 0
    }

    /// True when every task reached a final state.
    pub fn is_done(&self) -> bool {
        self.counts[State::Pending as usize]
            + self.counts[State::Runnable as usize]
            + self.counts[State::Running as usize]
            == 0
    }

    pub fn running_count(&self) -> usize {
        self.counts[State::Running as usize]
    }

    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// Takes the events produced since the last call.
    pub fn drain(&mut self) -> std::vec::Drain<'_, Event> {
        self.outbox.drain(..)
    }

    fn set_state(&mut self, time: Time, task: u32, to: State, reason: Reason) {
        let slot = self.slots.get_mut(task);
        self.counts[slot.state as usize] -= 1;
        self.counts[to as usize] += 1;
        slot.state = to;
        slot.reason = reason.clone();
        self.outbox.push(Event::Transition {
            time,
            task: TaskId(task),
            to,
            reason,
        });
    }

    fn make_runnable(&mut self, now: Time, task: u32) {
        self.slots.get_mut(task).ready = now;
        self.enqueue(now, task);
        self.set_state(now, task, State::Runnable, Reason::Ready);
    }

    fn enqueue(&mut self, now: Time, task: u32) {
        let cores = self.slots.cores(task);
        let slot = self.slots.get_mut(task);
        slot.key = self.policy.key(&slot.job, slot.ready);
        self.queue.insert((slot.key, task));
        let limit = slot.job.time_limit.unwrap_or(u64::MAX);
        self.classes.insert(cores, limit, slot.key, task);
        if let Some(kinetic) = &mut self.kinetic {
            kinetic.insert(task, self.policy.slope(&slot.job), slot.ready.0, now.0);
        }
        if let Some(chooser) = &mut self.chooser {
            chooser.queued(slot.ready, task);
        }
        if let Some(fs) = &mut self.fairshare {
            fs.queued(task, slot.job.user);
        }
    }

    /// Takes a queued task out of both indexes.
    fn dequeue(&mut self, now: Time, task: u32) -> bool {
        let Some(slot) = self.slots.try_get(task) else {
            return false;
        };
        if !self.queue.remove(&(slot.key, task)) {
            return false;
        }
        let limit = slot.job.time_limit.unwrap_or(u64::MAX);
        self.classes
            .remove(self.slots.cores(task), limit, slot.key, task);
        if let Some(kinetic) = &mut self.kinetic {
            kinetic.remove(task, now.0);
        }
        if let Some(chooser) = &mut self.chooser {
            chooser.left(task);
        }
        if let Some(fs) = &mut self.fairshare {
            fs.left(task, slot.job.user);
        }
        true
    }

    /// Adds a task that arrives now, with no dependencies (a simulated
    /// trace's jobs arrive so). It is runnable at once.
    pub fn submit(&mut self, now: Time, job: Job) -> TaskId {
        self.add(now, job, &[])
    }

    /// Adds a task that arrives now (submitted to a live instance), after
    /// `dependencies`, which may be tasks of any state: one that succeeded
    /// is met, one that ended otherwise skips the new task at once, and the
    /// others are waited for. In a halted core it is cancelled at once.
    pub fn add(&mut self, now: Time, job: Job, dependencies: &[TaskId]) -> TaskId {
        let t = self.slots.push_own(job, 0, now);
        self.offsets.push(self.dependents.len() as u32);
        self.counts[State::Pending as usize] += 1;
        let mut failed = None;
        let mut left = 0;
        for &dep in dependencies {
            match self.slots.status(dep.0).0 {
                State::Succeeded => {}
                state if state.is_final() => failed = failed.or(Some(dep)),
                _ => {
                    left += 1;
                    self.late.entry(dep.0).or_default().push(t);
                }
            }
        }
        self.slots.get_mut(t).deps_left = left;
        if let Some(dep) = failed {
            self.set_state(now, t, State::Skipped, Reason::Dependency(dep));
        } else if left == 0 && !self.halted {
            self.make_runnable(now, t);
        } else if self.halted {
            self.set_state(now, t, State::Cancelled, Reason::Halted);
        } else {
            self.outbox.push(Event::Transition {
                time: now,
                task: TaskId(t),
                to: State::Pending,
                reason: Reason::Waiting,
            });
        }
        TaskId(t)
    }

    /// Cancels a task that has not started: it ends `cancelled` and what
    /// waits for it is skipped. A running task is the driver's to stop (its
    /// attempt then ends [`Outcome::Cancelled`]); a task that ended stays
    /// as it ended. Returns whether the task was cancelled here.
    pub fn cancel(&mut self, now: Time, task: TaskId) -> bool {
        let t = task.0;
        match self.slots.status(t).0 {
            State::Pending | State::Runnable => {
                let cohort = self.slots.cohort_of(t);
                if let Some(c) = cohort
                    && !self.slots.has(t)
                {
                    self.slots.materialise(c, t);
                }
                let fresh = self.slots.get(t).attempts == 0;
                if self.dequeue(now, t)
                    && fresh
                    && let Some(c) = cohort
                {
                    self.admit(now, c);
                }
                if self.chosen.is_some_and(|(c, _)| c == t) {
                    self.chosen = None;
                }
                self.set_state(now, t, State::Cancelled, Reason::Cancelled);
                self.skip_dependents(now, t);
                true
            }
            _ => false,
        }
    }

    /// Starts what the policy says can start now.
    pub fn schedule(&mut self, now: Time) {
        if self.halted || !self.may_start() {
            return;
        }
        // An EASY pass may walk past the members its own starts admitted:
        // it runs again while it starts something. (Heads start in a loop
        // that sees each admitted member, and conservative plans a cohort's
        // members with the one queued.)
        let again = self.policy.backfill == Backfill::Easy && !self.slots.cohorts.is_empty();
        loop {
            let before = self.starts;
            policy::select(self, now);
            if !again || self.starts == before {
                break;
            }
        }
    }

    /// Whether a queued task could start: every task holds at least one
    /// core, so with fewer free than the smallest queued task needs,
    /// nothing starts, and nothing need be ranked.
    fn may_start(&self) -> bool {
        self.cluster.free().cores >= self.classes.least_cores().unwrap_or(u64::MAX)
    }

    /// Lets `chooser` pick the head from now on. The queue keeps
    /// submission order (FCFS), which backfilling tries its candidates in;
    /// tasks already queued are re-ranked so and shown to the chooser.
    pub fn set_chooser(&mut self, now: Time, chooser: Box<dyn Chooser>) {
        let queued: Vec<u32> = self.queue.iter().map(|&(_, t)| t).collect();
        for &t in &queued {
            self.dequeue(now, t);
        }
        self.policy.order = Order::Fcfs;
        self.kinetic = None;
        self.fairshare = None;
        self.chooser = Some(chooser);
        self.chosen = None;
        for t in queued {
            self.enqueue(now, t);
        }
        // A chooser sees every member, as it sees every task.
        for c in 0..self.slots.cohorts.len() {
            while !self.halted
                && let Some(t) = self.slots.admit(c)
            {
                self.enqueue(now, t);
            }
        }
    }

    /// The task that ranks first now.
    fn head(&mut self, now: Time) -> Option<u32> {
        if let Some(chooser) = &mut self.chooser {
            // The standing choice, for the rest of its instant.
            if let Some((c, at)) = self.chosen
                && at == now
                && self.slots.has(c)
                && self.slots.get(c).state == State::Runnable
            {
                return Some(c);
            }
            let queue = Queue(&self.queue);
            let first = queue.first()?;
            let pick = chooser.choose(now, queue, self.cluster.free().cores);
            let queued = (pick as usize) < self.slots.len()
                && self.slots.has(pick)
                && self.queue.contains(&(self.slots.get(pick).key, pick));
            let pick = if queued { pick } else { first };
            self.chosen = Some((pick, now));
            return Some(pick);
        }
        if let Some(fs) = &self.fairshare {
            return fs.head(now);
        }
        match &mut self.kinetic {
            Some(kinetic) => kinetic.best(now.0),
            None => self.queue.first().map(|&(_, t)| t),
        }
    }

    /// The first `k` queued tasks in policy order at `now`.
    fn ranked(&mut self, now: Time, k: usize) -> Vec<u32> {
        if let Some(fs) = &self.fairshare {
            return fs.ranked(now, k);
        }
        let Some(kinetic) = &mut self.kinetic else {
            return self.queue.iter().map(|&(_, t)| t).take(k).collect();
        };
        let mut out = Vec::with_capacity(k);
        while out.len() < k
            && let Some(t) = kinetic.best(now.0)
        {
            kinetic.remove(t, now.0);
            out.push(t);
        }
        for &t in &out {
            let slot = self.slots.get(t);
            kinetic.insert(t, self.policy.slope(&slot.job), slot.ready.0, now.0);
        }
        out
    }

    fn start(&mut self, now: Time, task: u32) {
        let request = self.slots.get(task).job.request;
        let Some(alloc) = self.cluster.allocate(&request) else {
            unreachable!("the policy chose task {task}, which does not fit");
        };
        self.dequeue(now, task);
        self.starts += 1;
        // A cohort's member that starts for the first time makes room in
        // the queue for the next.
        if self.slots.get(task).attempts == 0
            && let Some(c) = self.slots.cohort_of(task)
        {
            self.admit(now, c);
        }
        if self.chosen.is_some_and(|(c, _)| c == task) {
            self.chosen = None;
        }
        if let Some(chooser) = &mut self.chooser {
            chooser.started(now, task);
        }
        if let Some(fs) = &mut self.fairshare {
            fs.started(self.slots.get(task).job.user, self.slots.cores(task), now);
        }
        let slot = self.slots.get_mut(task);
        slot.attempts += 1;
        let attempt = slot.attempts;
        let end = match slot.job.time_limit {
            Some(secs) => now.plus_secs(secs),
            None => Time::NEVER,
        };
        slot.running = Some((now, alloc.clone()));
        self.running.insert((end, task));
        self.set_state(now, task, State::Running, Reason::Ready);
        self.outbox.push(Event::Start {
            time: now,
            task: TaskId(task),
            attempt,
            alloc,
        });
    }

    /// Marks tasks that succeeded in an earlier run (`slurp resume`) as
    /// succeeded without running them; their dependents are released as if
    /// they had just succeeded. Call right after `new`, before scheduling.
    pub fn resume(&mut self, now: Time, mut done: impl FnMut(TaskId) -> bool) {
        let own: Vec<u32> = self.slots.own_ids().collect();
        for t in own {
            if !done(TaskId(t)) {
                continue;
            }
            self.dequeue(now, t);
            self.set_state(now, t, State::Succeeded, Reason::Resumed);
            self.release_dependents(now, t);
        }
        for c in 0..self.slots.cohorts.len() {
            // Only the first member is admitted yet: it is taken back, and
            // the members are looked at in order.
            let ids = self.slots.cohorts[c].ids.clone();
            if self.slots.has(ids.start) {
                self.dequeue(now, ids.start);
                let cohort = &mut self.slots.cohorts[c];
                cohort.live.remove(&ids.start);
                cohort.next = ids.start;
                cohort.waiting += 1;
            }
            let mut stretches: Vec<std::ops::Range<u32>> = Vec::new();
            for t in ids {
                if done(TaskId(t)) {
                    self.slots.resume_member(c, t);
                    self.counts[State::Runnable as usize] -= 1;
                    self.counts[State::Succeeded as usize] += 1;
                    match stretches.last_mut() {
                        Some(r) if r.end == t => r.end = t + 1,
                        _ => stretches.push(t..t + 1),
                    }
                }
            }
            self.stretches(now, stretches, State::Succeeded, Reason::Resumed);
            self.admit(now, c);
        }
    }

    /// Tells stretches of members that moved to `to` together.
    fn stretches(
        &mut self,
        now: Time,
        stretches: Vec<std::ops::Range<u32>>,
        to: State,
        reason: Reason,
    ) {
        self.outbox
            .extend(stretches.into_iter().map(|r| Event::Stretch {
                time: now,
                first: TaskId(r.start),
                count: r.len() as u32,
                to,
                reason: reason.clone(),
            }));
    }

    /// The tasks that did not succeed, each as `(first, count)`: a task
    /// alone, or a stretch of a cohort's members never admitted (all in
    /// one state, told by [`Core::state`] of the first) — what a run's end
    /// reports, without a walk over every member.
    pub fn unsucceeded(&self) -> Vec<(TaskId, u32)> {
        let mut out: Vec<(TaskId, u32)> = self
            .slots
            .own_ids()
            .filter(|&t| self.slots.get(t).state != State::Succeeded)
            .map(|t| (TaskId(t), 1))
            .collect();
        for (c, cohort) in self.slots.cohorts.iter().enumerate() {
            out.extend(
                cohort
                    .live
                    .iter()
                    .filter(|(_, s)| s.state != State::Succeeded)
                    .map(|(&t, _)| (TaskId(t), 1)),
            );
            out.extend(
                self.slots
                    .unadmitted(c)
                    .into_iter()
                    .map(|r| (TaskId(r.start), r.len() as u32)),
            );
        }
        out.sort_unstable();
        out
    }

    /// An attempt of a running task ended.
    pub fn on_finished(&mut self, now: Time, task: TaskId, outcome: Outcome) {
        let t = task.0;
        if !self.slots.has(t) {
            return;
        }
        let slot = self.slots.get_mut(t);
        if slot.state != State::Running {
            return;
        }
        let (started, alloc) = slot
            .running
            .take()
            .unwrap_or_else(|| unreachable!("running tasks hold resources"));
        let end = match slot.job.time_limit {
            Some(secs) => started.plus_secs(secs),
            None => Time::NEVER,
        };
        self.running.remove(&(end, t));
        self.cluster.release(&alloc);
        if let Some(fs) = &mut self.fairshare {
            fs.ended(
                self.slots.get(t).job.user,
                self.slots.cores(t),
                started,
                now,
            );
        }
        if let Some(chooser) = &mut self.chooser {
            chooser.ended(now, t);
        }
        let slot = self.slots.get(t);
        let retry = !matches!(outcome, Outcome::Success | Outcome::Cancelled)
            && slot.attempts <= slot.job.retries
            && !self.halted;
        match outcome {
            Outcome::Success => {
                self.set_state(now, t, State::Succeeded, Reason::Ended(outcome));
                self.release_dependents(now, t);
                self.slots.release(t);
            }
            _ if retry => {
                let attempt = self.slots.get(t).attempts;
                self.enqueue(now, t);
                self.set_state(now, t, State::Runnable, Reason::Retry { attempt });
            }
            _ => {
                let to = match outcome {
                    Outcome::Timeout => State::Timeout,
                    Outcome::OutOfMemory => State::OutOfMemory,
                    Outcome::Cancelled => State::Cancelled,
                    _ => State::Failed,
                };
                self.set_state(now, t, to, Reason::Ended(outcome));
                self.skip_dependents(now, t);
            }
        }
    }

    /// `t` succeeded: its dependents wait for one dependency less, and
    /// those that waited only for it become runnable.
    fn release_dependents(&mut self, now: Time, t: u32) {
        let late = self.late.remove(&t).unwrap_or_default();
        for d in self
            .fixed_dependents(t)
            .map(|i| (None, i))
            .chain(late.into_iter().map(|d| (Some(d), 0)))
        {
            let d = d.0.unwrap_or_else(|| self.dependents[d.1]);
            let slot = self.slots.get_mut(d);
            slot.deps_left -= 1;
            if slot.deps_left == 0 && slot.state == State::Pending {
                self.make_runnable(now, d);
            }
        }
    }

    /// Marks everything downstream of a task that did not succeed.
    fn skip_dependents(&mut self, now: Time, failed: u32) {
        let mut stack = vec![failed];
        while let Some(t) = stack.pop() {
            let late = self.late.remove(&t).unwrap_or_default();
            for d in self
                .fixed_dependents(t)
                .map(|i| (None, i))
                .chain(late.into_iter().map(|d| (Some(d), 0)))
            {
                let d = d.0.unwrap_or_else(|| self.dependents[d.1]);
                if self.slots.get(d).state == State::Pending {
                    self.set_state(now, d, State::Skipped, Reason::Dependency(TaskId(t)));
                    stack.push(d);
                }
            }
        }
    }

    /// Where `t`'s fixed dependents are in `dependents` (none for a
    /// cohort's member).
    fn fixed_dependents(&self, t: u32) -> std::ops::Range<usize> {
        match self.slots.own_index(t) {
            Some(i) => self.offsets[i] as usize..self.offsets[i + 1] as usize,
            None => 0..0,
        }
    }

    /// Starts nothing more: every task not yet running becomes `cancelled`
    /// (`--halt`, Ctrl-C). Running tasks finish or are killed by the driver.
    pub fn halt(&mut self, now: Time) {
        self.halted = true;
        let waiting = |s: &Slot| matches!(s.state, State::Pending | State::Runnable);
        let mut stopped: Vec<u32> = self
            .slots
            .own_ids()
            .filter(|&t| waiting(self.slots.get(t)))
            .collect();
        for cohort in &self.slots.cohorts {
            stopped.extend(
                cohort
                    .live
                    .iter()
                    .filter(|(_, s)| waiting(s))
                    .map(|(&t, _)| t),
            );
        }
        self.queue.clear();
        self.classes.clear();
        if let Some(kinetic) = &mut self.kinetic {
            kinetic.clear();
        }
        if let Some(fs) = &mut self.fairshare {
            fs.clear_queues();
        }
        for t in stopped {
            self.set_state(now, t, State::Cancelled, Reason::Halted);
        }
        // The members no cohort admitted end with it, told as stretches.
        for c in 0..self.slots.cohorts.len() {
            let rest = self.slots.unadmitted(c);
            let n: usize = rest.iter().map(|r| r.len()).sum();
            let cohort = &mut self.slots.cohorts[c];
            cohort.rest = (State::Cancelled, Reason::Halted);
            cohort.waiting = 0;
            self.counts[State::Runnable as usize] -= n;
            self.counts[State::Cancelled as usize] += n;
            self.stretches(now, rest, State::Cancelled, Reason::Halted);
        }
    }

    pub fn is_halted(&self) -> bool {
        self.halted
    }
}
