//! What a chooser keeps between decisions, so that a decision costs
//! O(SLOTS + running users + log users) rather than a pass over every
//! queued job and every user: in a real run each line of a plain list is a
//! user, and a list of 10,000 lines made every decision walk 10,000 users;
//! a whole trace in RLScheduler's model queues tens of thousands of jobs.
//!
//! - [`Views`]: the queued jobs in each order the slots are taken from
//!   (oldest, shortest estimate, fewest cores, each user's oldest), told of
//!   each arrival and departure. The slots are exactly
//!   `observe::slots`'s and `observe_v2::wide_slots`'s (ties go to the
//!   lower job index in both), which debug builds check at every decision
//!   in slurp's model and in the reference model.
//! - [`Turns`]: the users with queued jobs in fair-share order. A user
//!   with nothing running keeps its rank (`FairShare`'s scaled usage does
//!   not move while nothing runs), so those sit in an ordered set keyed by
//!   (rank, earliest queued job); only users with jobs running are ranked
//!   afresh at a decision, and there are no more of them than running jobs.
//! - [`Largest`]: the largest of the users' projected means (v3's feature
//!   5). Each user's mean grows linearly in time while its jobs do not
//!   change, so the largest is the upper envelope of lines, kept by a
//!   kinetic tournament: each node of a tree over the users holds the
//!   leading line of its subtree and the time another may overtake it;
//!   a decision replays the overtakings up to now, a change re-plays one
//!   path. The turns are exactly `observe_v2::in_turn`'s, the largest mean
//!   `Projection::scan`'s up to rounding where two users' lines cross
//!   (debug builds check every decision).

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;
use slurp_runtime::core::Time;

use slurp_sim::SimJob;

use crate::observe::{SLOTS, interleave, interleave_all};
use crate::observe_v2::{Standing, Waiting, projected, projected_line, rank, round_robin};

/// A key of the estimate and size views: (key, submission, job).
type Ranked = (u64, u64, u32);

/// The queued jobs in the orders the observation's slots are taken from.
#[derive(Debug, Default)]
pub struct Views {
    /// v3's slots (`observe_v2::wide_slots`): also each user's queue and
    /// the users in fair-share turns.
    wide: bool,
    oldest: BTreeSet<(u64, u32)>,
    shortest: BTreeSet<Ranked>,
    narrowest: BTreeSet<Ranked>,
    by_user: FxHashMap<i64, BTreeSet<(u64, u32)>>,
    turns: Turns,
}

impl Views {
    /// For a chooser of v3's slots (`wide`) or v1's.
    pub fn new(wide: bool) -> Views {
        Views {
            wide,
            ..Views::default()
        }
    }

    /// Jobs queued.
    pub fn len(&self) -> usize {
        self.oldest.len()
    }

    pub fn is_empty(&self) -> bool {
        self.oldest.is_empty()
    }

    /// Where `job` sorts in each view: one place, so that leaving removes
    /// exactly what queueing inserted.
    fn keys(job: &SimJob, j: u32) -> ((u64, u32), Ranked, Ranked) {
        (
            (job.submit, j),
            (job.estimate, job.submit, j),
            (job.procs.into(), job.submit, j),
        )
    }

    /// Job `j` began to wait. A wide view's caller then [`Views::place`]s
    /// its user.
    pub fn queued(&mut self, job: &SimJob, j: u32) {
        let (oldest, shortest, narrowest) = Views::keys(job, j);
        self.oldest.insert(oldest);
        self.shortest.insert(shortest);
        self.narrowest.insert(narrowest);
        if self.wide {
            self.by_user.entry(job.user).or_default().insert(oldest);
        }
    }

    /// Job `j` stopped waiting (it started or left the queue); whether it
    /// was queued. A wide view's caller then places its user.
    pub fn left(&mut self, job: &SimJob, j: u32) -> bool {
        let (oldest, shortest, narrowest) = Views::keys(job, j);
        if !self.oldest.remove(&oldest) {
            return false;
        }
        self.shortest.remove(&shortest);
        self.narrowest.remove(&narrowest);
        if self.wide
            && let Some(jobs) = self.by_user.get_mut(&job.user)
        {
            jobs.remove(&oldest);
            if jobs.is_empty() {
                self.by_user.remove(&job.user);
            }
        }
        true
    }

    /// Puts `user` where it now belongs in fair-share turns, after a change
    /// to its queue or to its running jobs in `standing`.
    pub fn place(&mut self, standing: &Standing, user: i64, now: Time) {
        if !self.wide {
            return;
        }
        let first = self
            .by_user
            .get(&user)
            .and_then(|jobs| jobs.first().copied());
        self.turns.place(standing, user, first, now);
    }

    /// The jobs shown at a decision at `now`: with at most SLOTS queued,
    /// all of them oldest first; else the first SLOTS of the orders taken
    /// in turn (v3's four, or v1's shortest and narrowest).
    pub fn slots(&mut self, standing: &Standing, now: Time) -> Vec<u32> {
        if self.oldest.len() <= SLOTS {
            return self.oldest.iter().map(|&(_, j)| j).collect();
        }
        if !self.wide {
            return interleave(
                self.shortest.iter().map(|&(_, _, j)| j),
                self.narrowest.iter().map(|&(_, _, j)| j),
            );
        }
        let turns = self.turns.slots(standing, now, &self.by_user);
        interleave_all(&mut [
            &mut turns.into_iter(),
            &mut self.oldest.iter().map(|&(_, j)| j),
            &mut self.shortest.iter().map(|&(_, _, j)| j),
            &mut self.narrowest.iter().map(|&(_, _, j)| j),
        ])
    }
}

/// Where a user with queued jobs is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Nothing running: (rank, earliest queued (submit, job)).
    Idle(u64, u64, u32),
    /// Jobs running: ranked at each decision.
    Active,
}

/// The users with queued jobs, as fair-share turns take them.
#[derive(Debug, Default)]
pub struct Turns {
    idle: BTreeSet<(u64, u64, u32, i64)>,
    active: BTreeSet<i64>,
    places: FxHashMap<i64, Place>,
    /// The fair-share origin the idle ranks were taken at.
    origin: f64,
}

impl Turns {
    /// Puts `user` where it now belongs, `first` its earliest queued job
    /// (none: it has none queued). Called after each change to its queue
    /// or its running jobs.
    pub fn place(&mut self, standing: &Standing, user: i64, first: Option<(u64, u32)>, now: Time) {
        let place = first.map(|(submit, job)| {
            if standing.user(user).running > 0 {
                Place::Active
            } else {
                Place::Idle(rank(&standing.shares.at(now), user), submit, job)
            }
        });
        let old = match place {
            Some(p) => self.places.insert(user, p),
            None => self.places.remove(&user),
        };
        if old == place {
            return;
        }
        match old {
            Some(Place::Idle(r, s, j)) => {
                self.idle.remove(&(r, s, j, user));
            }
            Some(Place::Active) => {
                self.active.remove(&user);
            }
            None => {}
        }
        match place {
            Some(Place::Idle(r, s, j)) => {
                self.idle.insert((r, s, j, user));
            }
            Some(Place::Active) => {
                self.active.insert(user);
            }
            None => {}
        }
    }

    /// The first SLOTS queued jobs in fair-share turns at `now`
    /// (`observe_v2::in_turn`'s), each user's queue in `by_user`.
    pub fn slots(
        &mut self,
        standing: &Standing,
        now: Time,
        by_user: &FxHashMap<i64, BTreeSet<(u64, u32)>>,
    ) -> Vec<u32> {
        if standing.shares.origin() != self.origin {
            // Every scaled usage shrank: rank the idle users again.
            self.origin = standing.shares.origin();
            let idle: Vec<(u64, u64, u32, i64)> =
                std::mem::take(&mut self.idle).into_iter().collect();
            let shares = standing.shares.at(now);
            for (_, submit, job, user) in idle {
                let key = (rank(&shares, user), submit, job);
                self.places.insert(user, Place::Idle(key.0, key.1, key.2));
                self.idle.insert((key.0, key.1, key.2, user));
            }
        }
        // At most SLOTS users get a turn before the slots are full: the
        // first SLOTS idle ones and the active ones, whichever come first.
        let shares = standing.shares.at(now);
        let mut users: Vec<(u64, u64, u32, i64)> = self.idle.iter().take(SLOTS).copied().collect();
        users.extend(self.active.iter().filter_map(|&user| {
            let &(submit, job) = by_user.get(&user)?.first()?;
            Some((rank(&shares, user), submit, job, user))
        }));
        users.sort_unstable();
        users.truncate(SLOTS);
        // The first round of turns takes each user's earliest job, which
        // `users` holds already: with SLOTS users it fills the slots, and
        // no user's queue need be looked up (in a real run of many lines,
        // each its own user, those lookups were a tenth of a decision).
        if users.len() == SLOTS {
            return users.iter().map(|&(_, _, job, _)| job).collect();
        }
        round_robin(
            users
                .iter()
                .filter_map(|&(.., user)| by_user.get(&user))
                .map(|jobs| jobs.iter().copied()),
        )
    }
}

/// "No line" in the tournament.
const NONE: u32 = u32::MAX;

/// A node of the tournament: the leading leaf of its subtree, and the
/// earliest time a leader in its subtree (its own included) may be
/// overtaken.
#[derive(Debug, Clone, Copy)]
struct Node {
    leader: u32,
    earliest: f64,
}

const EMPTY: Node = Node {
    leader: NONE,
    earliest: f64::INFINITY,
};

/// The largest projected mean of any user, kept as users' jobs start,
/// queue and leave.
#[derive(Debug, Default)]
pub struct Largest {
    leaf_of: FxHashMap<i64, u32>,
    users: Vec<i64>,
    /// Each leaf's line (slope, intercept); none for a user with no job.
    lines: Vec<Option<(f64, f64)>>,
    /// A complete binary tree over `lines` (node 1 the root, leaf `i` at
    /// `width + i`).
    nodes: Vec<Node>,
    width: usize,
    /// The time (seconds) every node's leader holds at.
    t: f64,
}

impl Largest {
    /// Node `i`'s leader between its children's, at `t`, and when the other
    /// may overtake it.
    fn settle(&mut self, i: usize, t: f64) {
        let (l, r) = (self.nodes[2 * i], self.nodes[2 * i + 1]);
        let below = l.earliest.min(r.earliest);
        let line = |leaf: u32| (leaf != NONE).then(|| self.lines[leaf as usize]).flatten();
        let node = match (line(l.leader), line(r.leader)) {
            (None, None) => Node {
                earliest: below,
                ..EMPTY
            },
            (Some(_), None) => Node {
                leader: l.leader,
                earliest: below,
            },
            (None, Some(_)) => Node {
                leader: r.leader,
                earliest: below,
            },
            (Some(a), Some(b)) => {
                let (va, vb) = (a.0 * t + a.1, b.0 * t + b.1);
                // Ties go to the steeper line (it leads afterwards), then
                // the left one.
                let left_leads = va > vb || (va == vb && a.0 >= b.0);
                let (lead, lead_line, other) = if left_leads {
                    (l.leader, a, b)
                } else {
                    (r.leader, b, a)
                };
                let overtaken = if other.0 > lead_line.0 {
                    let at = (lead_line.1 - other.1) / (other.0 - lead_line.0);
                    // Rounding may put the crossing at or before `t`: look
                    // again just after.
                    if at > t { at } else { t.next_up() }
                } else {
                    f64::INFINITY
                };
                Node {
                    leader: lead,
                    earliest: below.min(overtaken),
                }
            }
        };
        self.nodes[i] = node;
    }

    /// Replays the overtakings below node `i` up to `t`.
    fn advance(&mut self, i: usize, t: f64) {
        if i >= self.width || self.nodes[i].earliest > t {
            return;
        }
        self.advance(2 * i, t);
        self.advance(2 * i + 1, t);
        self.settle(i, t);
    }

    /// Sets `user`'s line to what `standing` and `waiting` now say.
    pub fn update(&mut self, standing: &Standing, waiting: &Waiting, user: i64) {
        let line = projected_line(standing, waiting, user);
        let leaf = match self.leaf_of.get(&user) {
            Some(&leaf) => leaf,
            None if line.is_none() => return,
            None => {
                let leaf = self.users.len() as u32;
                self.leaf_of.insert(user, leaf);
                self.users.push(user);
                self.lines.push(line);
                if self.users.len() > self.width {
                    self.rebuild();
                    return;
                }
                leaf
            }
        };
        self.lines[leaf as usize] = line;
        let mut i = self.width + leaf as usize;
        self.nodes[i] = Node {
            leader: if line.is_some() { leaf } else { NONE },
            ..EMPTY
        };
        let t = self.t;
        while i > 1 {
            i /= 2;
            self.settle(i, t);
        }
    }

    /// A tree twice as wide, every node settled at the current time.
    fn rebuild(&mut self) {
        self.width = (self.users.len()).next_power_of_two().max(2);
        self.nodes = vec![EMPTY; 2 * self.width];
        for (leaf, line) in self.lines.iter().enumerate() {
            if line.is_some() {
                self.nodes[self.width + leaf].leader = leaf as u32;
            }
        }
        let t = self.t;
        for i in (1..self.width).rev() {
            self.settle(i, t);
        }
    }

    /// The largest projected mean at `now` (0 when no user has a job): the
    /// leading user's mean by `observe_v2`'s own formula, so equal to
    /// `Projection::scan`'s but where two users' means are within rounding.
    pub fn at(&mut self, standing: &Standing, waiting: &Waiting, now: Time) -> f64 {
        let secs = now.0 / 1000;
        let t = secs as f64;
        if self.width == 0 {
            return 0.0;
        }
        if t > self.t {
            self.t = t;
            self.advance(1, t);
        }
        match self.nodes[1].leader {
            NONE => 0.0,
            leaf => projected(standing, waiting, self.users[leaf as usize], secs)
                .unwrap_or(0.0)
                .max(0.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::observe_v2::{Projection, in_turn};

    /// Random queues, starts and ends over a few hours: at every decision
    /// the kept turns and largest mean are what the scans give.
    #[test]
    fn kept_views_equal_the_scans_through_random_events() {
        for seed in 0..12u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            // Few users (turns take many rounds) or many (one round).
            let users = if seed % 2 == 0 { 6 } else { 400 };
            let mut standing = Standing::default();
            let mut waiting = Waiting::default();
            let (mut turns, mut largest) = (Turns::default(), Largest::default());
            let mut by_user: FxHashMap<i64, BTreeSet<(u64, u32)>> = FxHashMap::default();
            // (user, submit, estimate) of each job; running: (job, start).
            let mut jobs: Vec<(i64, u64, u64)> = Vec::new();
            let mut running: Vec<(u32, u64)> = Vec::new();
            let mut now = 0u64;
            let place = |turns: &mut Turns,
                         largest: &mut Largest,
                         standing: &Standing,
                         waiting: &Waiting,
                         by_user: &FxHashMap<i64, BTreeSet<(u64, u32)>>,
                         user: i64,
                         now: u64| {
                let first = by_user.get(&user).and_then(|q| q.first().copied());
                turns.place(standing, user, first, Time(now * 1000));
                largest.update(standing, waiting, user);
            };
            for step in 0..3000 {
                now += rng.random_range(0..30);
                // Once, years pass (more than 256 half-lives): fair share
                // rebases its scale, and every idle rank must follow.
                if step == 1500 {
                    now += 200_000_000;
                }
                let t = Time(now * 1000);
                // Each event changes one user's queue or jobs.
                let user = match rng.random_range(0..10) {
                    0..4 => {
                        let (user, estimate) =
                            (rng.random_range(0..users), rng.random_range(1..20_000));
                        let job = jobs.len() as u32;
                        jobs.push((user, now, estimate));
                        by_user.entry(user).or_default().insert((now, job));
                        waiting.queued(user, now, estimate);
                        user
                    }
                    4..7 => {
                        // The earliest queued job of some user starts.
                        let Some(&user) = by_user
                            .keys()
                            .nth(rng.random_range(0..by_user.len().max(1)))
                        else {
                            continue;
                        };
                        let queue = by_user.get_mut(&user).unwrap();
                        let (submit, job) = queue.pop_first().unwrap();
                        if queue.is_empty() {
                            by_user.remove(&user);
                        }
                        let (_, _, estimate) = jobs[job as usize];
                        waiting.left(user, submit, estimate);
                        standing.started(user, now - submit, estimate, 1 + u64::from(job % 3), t);
                        running.push((job, now));
                        user
                    }
                    _ => {
                        if running.is_empty() {
                            continue;
                        }
                        let (job, start) = running.swap_remove(rng.random_range(0..running.len()));
                        let (user, _, estimate) = jobs[job as usize];
                        standing.ended(
                            user,
                            1 + u64::from(job % 3),
                            Some(estimate),
                            Time(start * 1000),
                            t,
                        );
                        user
                    }
                };
                place(
                    &mut turns,
                    &mut largest,
                    &standing,
                    &waiting,
                    &by_user,
                    user,
                    now,
                );
                if step % 7 == 0 {
                    let kept = turns.slots(&standing, t, &by_user);
                    let scanned = in_turn(
                        &standing,
                        t,
                        by_user.iter().map(|(&u, q)| (u, q.iter().copied())),
                    );
                    assert_eq!(kept, scanned, "turns, seed {seed} step {step}");
                    let (kept, scanned) = (
                        largest.at(&standing, &waiting, t),
                        Projection::scan(&standing, &waiting, t).largest(),
                    );
                    assert!(
                        (kept - scanned).abs() <= 1e-9 * scanned.max(1.0),
                        "largest {kept} against {scanned}, seed {seed} step {step}"
                    );
                }
            }
        }
    }
}
