//! Where the core keeps its tasks: one slot per task, except for the
//! members of a **cohort** — a stretch of tasks that ask for the same and
//! have no dependencies and no dependents (a sweep's members, as the IR's
//! runs give them). A cohort is one entry with a cursor: only the members
//! it has *admitted* (its next in the queue, those running, those that
//! failed or retried) have slots; one that succeeds gives its slot up. So
//! what the core holds grows with what is running, not with the sweep.
//!
//! Members are indistinguishable to every policy (same request, estimate,
//! time of arrival and user), so keeping only a cohort's next member in
//! the queue — the one its order would take first, ties going to task
//! order — ranks the queue as holding them all would.

use std::collections::BTreeMap;
use std::ops::Range;

use super::{Job, Reason, Slot, State, Time, core_count};

/// A stretch of identical, independent tasks.
#[derive(Debug)]
pub(super) struct Cohort {
    pub ids: Range<u32>,
    pub job: Job,
    /// When its members became runnable.
    pub ready: Time,
    /// The next member to admit; those before it were admitted (or
    /// resumed).
    pub next: u32,
    /// Members from `next` on still waiting to be admitted.
    pub waiting: u32,
    /// What the members not yet admitted are (`Runnable`, or `Cancelled`
    /// once the core halted).
    pub rest: (State, Reason),
    /// Admitted members that kept their slots, by id.
    pub live: BTreeMap<u32, Slot>,
    /// Members that succeeded in the run this one resumes, as sorted,
    /// disjoint ranges.
    pub resumed: Vec<Range<u32>>,
}

impl Cohort {
    pub(super) fn is_resumed(&self, t: u32) -> bool {
        let i = self.resumed.partition_point(|r| r.end <= t);
        self.resumed.get(i).is_some_and(|r| r.contains(&t))
    }
}

/// Where a task's slot lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// An individual task: its index among them.
    Own(usize),
    /// A member of cohort `c`.
    Member(usize),
}

/// Every task's slot, by task id.
#[derive(Debug, Default)]
pub(super) struct Slots {
    /// The individual tasks' slots and core counts, in id order.
    own: Vec<Slot>,
    own_cores: Vec<u32>,
    /// In id order; `before[c]` counts the members of cohorts `..c`.
    pub cohorts: Vec<Cohort>,
    before: Vec<u32>,
    len: u32,
}

/// What a part of a core's task list is.
#[derive(Debug, Clone)]
pub enum Part {
    /// One task.
    One(Job),
    /// `count` identical tasks without dependencies or dependents.
    Many(Job, u32),
}

impl Slots {
    /// Slots for `parts`, task ids given in order; every individual slot
    /// `Pending`, waiting for nothing yet (the core counts dependencies).
    pub(super) fn new(parts: Vec<Part>, now: Time) -> Slots {
        let mut slots = Slots::default();
        for part in parts {
            let t = slots.len;
            match part {
                Part::One(job) => {
                    slots.push_own(job, 0, now);
                }
                Part::Many(job, count) => {
                    slots.before.push(slots.members());
                    slots.cohorts.push(Cohort {
                        ids: t..t + count,
                        job,
                        ready: now,
                        next: t,
                        waiting: count,
                        rest: (State::Runnable, Reason::Ready),
                        live: BTreeMap::new(),
                        resumed: Vec::new(),
                    });
                    slots.len += count;
                }
            }
        }
        slots
    }

    fn members(&self) -> u32 {
        self.cohorts.last().map_or(0, |c| {
            self.before[self.cohorts.len() - 1] + c.ids.len() as u32
        })
    }

    /// Adds an individual task (ids are given in order).
    pub(super) fn push_own(&mut self, job: Job, deps_left: u32, now: Time) -> u32 {
        let t = self.len;
        self.own_cores.push(core_count(&job.request));
        self.own.push(Slot {
            job,
            state: State::Pending,
            deps_left,
            attempts: 0,
            reason: Reason::Waiting,
            running: None,
            ready: now,
            key: 0,
        });
        self.len += 1;
        t
    }

    pub(super) fn len(&self) -> usize {
        self.len as usize
    }

    fn place(&self, t: u32) -> Place {
        if self.cohorts.is_empty() {
            return Place::Own(t as usize);
        }
        let c = self.cohorts.partition_point(|k| k.ids.start <= t);
        if c > 0 && t < self.cohorts[c - 1].ids.end {
            return Place::Member(c - 1);
        }
        let before = match c {
            0 => 0,
            c => self.before[c - 1] + self.cohorts[c - 1].ids.len() as u32,
        };
        Place::Own((t - before) as usize)
    }

    /// The cohort `t` is a member of.
    pub(super) fn cohort_of(&self, t: u32) -> Option<usize> {
        match self.place(t) {
            Place::Member(c) => Some(c),
            Place::Own(_) => None,
        }
    }

    /// Whether `t` has a slot: an individual task, or an admitted member
    /// that kept it.
    pub(super) fn has(&self, t: u32) -> bool {
        self.try_get(t).is_some()
    }

    /// The slot of `t`, if it has one.
    pub(super) fn try_get(&self, t: u32) -> Option<&Slot> {
        match self.place(t) {
            Place::Own(i) => self.own.get(i),
            Place::Member(c) => self.cohorts[c].live.get(&t),
        }
    }

    /// The slot of `t`, which must have one.
    pub(super) fn get(&self, t: u32) -> &Slot {
        self.try_get(t)
            .unwrap_or_else(|| unreachable!("task {t} has no slot"))
    }

    pub(super) fn get_mut(&mut self, t: u32) -> &mut Slot {
        match self.place(t) {
            Place::Own(i) => &mut self.own[i],
            Place::Member(c) => self.cohorts[c]
                .live
                .get_mut(&t)
                .unwrap_or_else(|| unreachable!("member {t} has no slot")),
        }
    }

    /// The cores `t` needs.
    pub(super) fn cores(&self, t: u32) -> u32 {
        match self.place(t) {
            Place::Own(i) => self.own_cores[i],
            Place::Member(c) => core_count(&self.cohorts[c].job.request),
        }
    }

    /// `t`'s state, reason and attempts, slot or not.
    pub(super) fn status(&self, t: u32) -> (State, Reason, u32) {
        let cohort = match self.place(t) {
            Place::Own(i) => {
                let s = &self.own[i];
                return (s.state, s.reason.clone(), s.attempts);
            }
            Place::Member(c) => &self.cohorts[c],
        };
        if let Some(s) = cohort.live.get(&t) {
            return (s.state, s.reason.clone(), s.attempts);
        }
        if cohort.is_resumed(t) {
            return (State::Succeeded, Reason::Resumed, 0);
        }
        if t < cohort.next {
            // Admitted, succeeded at its first attempt, slot given up.
            return (State::Succeeded, Reason::Ended(super::Outcome::Success), 1);
        }
        (cohort.rest.0, cohort.rest.1.clone(), 0)
    }

    /// Admits cohort `c`'s next waiting member (skipping those resumed or
    /// already given a slot): a runnable slot, ready since the cohort was.
    pub(super) fn admit(&mut self, c: usize) -> Option<u32> {
        let cohort = &mut self.cohorts[c];
        while cohort.next < cohort.ids.end {
            let t = cohort.next;
            cohort.next += 1;
            if cohort.is_resumed(t) || cohort.live.contains_key(&t) {
                continue;
            }
            cohort.waiting -= 1;
            cohort.live.insert(
                t,
                Slot {
                    job: cohort.job.clone(),
                    state: State::Runnable,
                    deps_left: 0,
                    attempts: 0,
                    reason: Reason::Ready,
                    running: None,
                    ready: cohort.ready,
                    key: 0,
                },
            );
            return Some(t);
        }
        None
    }

    /// Gives a waiting member of cohort `c` its own slot now (to cancel it
    /// alone), in the cohort's rest state.
    pub(super) fn materialise(&mut self, c: usize, t: u32) {
        let cohort = &mut self.cohorts[c];
        debug_assert!(t >= cohort.next && !cohort.live.contains_key(&t));
        cohort.waiting -= 1;
        cohort.live.insert(
            t,
            Slot {
                job: cohort.job.clone(),
                state: cohort.rest.0,
                deps_left: 0,
                attempts: 0,
                reason: cohort.rest.1.clone(),
                running: None,
                ready: cohort.ready,
                key: 0,
            },
        );
    }

    /// A member that succeeded at its first attempt gives its slot up (its
    /// state is then known from the cursor).
    pub(super) fn release(&mut self, t: u32) {
        if let Place::Member(c) = self.place(t) {
            let cohort = &mut self.cohorts[c];
            if cohort
                .live
                .get(&t)
                .is_some_and(|s| s.state == State::Succeeded && s.attempts == 1)
            {
                cohort.live.remove(&t);
            }
        }
    }

    /// Marks a waiting member as succeeded in an earlier run.
    pub(super) fn resume_member(&mut self, c: usize, t: u32) {
        let cohort = &mut self.cohorts[c];
        debug_assert!(t >= cohort.next && !cohort.live.contains_key(&t));
        cohort.waiting -= 1;
        match cohort.resumed.last_mut() {
            Some(r) if r.end == t => r.end = t + 1,
            _ => cohort.resumed.push(t..t + 1),
        }
    }

    /// Cohort `c`'s members never admitted nor resumed, as stretches:
    /// they are all in the cohort's rest state.
    /// (The gaps between what has slots or was resumed: no walk over the
    /// members.)
    pub(super) fn unadmitted(&self, c: usize) -> Vec<Range<u32>> {
        let cohort = &self.cohorts[c];
        let mut taken: Vec<Range<u32>> = cohort
            .live
            .range(cohort.next..)
            .map(|(&t, _)| t..t + 1)
            .chain(cohort.resumed.iter().cloned())
            .collect();
        taken.sort_unstable_by_key(|r| r.start);
        let mut out = Vec::new();
        let mut from = cohort.next;
        for r in taken
            .into_iter()
            .chain(std::iter::once(cohort.ids.end..cohort.ids.end))
        {
            if r.start > from {
                out.push(from..r.start);
            }
            from = from.max(r.end);
        }
        out
    }

    /// The individual tasks' ids: the stretches between cohorts.
    pub(super) fn own_ids(&self) -> impl Iterator<Item = u32> + '_ {
        let starts = std::iter::once(0).chain(self.cohorts.iter().map(|c| c.ids.end));
        let ends = self
            .cohorts
            .iter()
            .map(|c| c.ids.start)
            .chain(std::iter::once(self.len));
        starts.zip(ends).flat_map(|(a, b)| a..b)
    }

    /// Individual task `t`'s index among them.
    pub(super) fn own_index(&self, t: u32) -> Option<usize> {
        match self.place(t) {
            Place::Own(i) => Some(i),
            Place::Member(_) => None,
        }
    }
}
