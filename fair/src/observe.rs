//! What the learned policy sees at a decision (RL-SPEC.md, fairness env):
//! 128 slots of 9 features each, a mask, and which job each slot shows.
//!
//! Slots: when at most 128 jobs wait, all of them in submit order, then
//! padding; when more, slots alternate between the queue sorted shortest
//! estimate first and sorted fewest processors first, skipping jobs already
//! shown. Features, each clipped to at most 1 − 1e-5:
//!
//! 1. wait / 12 h; 2. estimate / the longest run of the trace; 3. processors
//!    / the machine's; 4. requested memory / the largest (1 if unknown);
//! 5. user id / the largest (1 if unknown); 6. group id, 7. executable id
//!    likewise; 8. `user_info` = 1 − (this user's mean bounded slowdown over
//!    their started jobs ÷ the largest such mean), 1 when the user has no
//!    started job or the largest mean is 0; 9. can start now (1 − 1e-5 if
//!    enough nodes are free, else 1e-5).
//!
//! Padding rows are `[0, 1, 1, 1, 1, 1, 1, 1, 0]` with mask 0.

use rustc_hash::FxHashMap;

use serde::{Deserialize, Serialize};
use slurp_sim::Workload;
use slurp_sim::metrics::bounded_slowdown;
use slurp_sim::reference::Decision;

pub const SLOTS: usize = 128;
pub const FEATURES: usize = 9;
/// 12 hours: the wait that saturates feature 1.
pub const MAX_WAIT: f64 = 43_200.0;
const TOP: f32 = 1.0 - 1e-5;
/// What a padded slot holds (RL-SPEC.md); its mask is 0.
pub const PADDING: [f32; FEATURES] = [0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0];

/// The scales features are divided by. They belong to a model: it was
/// trained with them, so they travel with it (a JSON file beside it).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Normalisers {
    /// The longest run time of the training trace, seconds.
    pub max_run: f64,
    /// The machine's processors.
    pub max_procs: f64,
    pub max_mem: f64,
    pub max_user: f64,
    pub max_group: f64,
    pub max_exe: f64,
}

impl Normalisers {
    /// Nothing to scale by: what a v2 model (which needs none) holds.
    pub const NONE: Normalisers = Normalisers {
        max_run: 0.0,
        max_procs: 0.0,
        max_mem: 0.0,
        max_user: 0.0,
        max_group: 0.0,
        max_exe: 0.0,
    };

    /// The scales of a workload.
    pub fn of(workload: &Workload) -> Normalisers {
        let max =
            |f: fn(&slurp_sim::SimJob) -> f64| workload.jobs.iter().map(f).fold(0.0, f64::max);
        Normalisers {
            max_run: max(|j| j.run as f64),
            max_procs: workload.machine.procs() as f64,
            max_mem: max(|j| j.mem as f64),
            max_user: max(|j| j.user as f64),
            max_group: max(|j| j.group as f64),
            max_exe: max(|j| j.exe as f64),
        }
    }
}

/// One observation: features row-major (`SLOTS × FEATURES`), mask, and the
/// job (position in the window) each real slot shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub features: Vec<f32>,
    pub mask: Vec<f32>,
    pub jobs: Vec<u32>,
}

impl Observation {
    /// The real slots' `features` and `mask`, padding rows after them to
    /// the 128 slots.
    pub(crate) fn padded(mut features: Vec<f32>, mask: Vec<f32>, jobs: Vec<u32>) -> Observation {
        for _ in jobs.len()..SLOTS {
            features.extend_from_slice(&PADDING);
        }
        Observation {
            features,
            mask,
            jobs,
        }
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Score {
    sum: f64,
    jobs: u32,
    mean: f64,
}

/// Per-user bounded slowdowns of started jobs, kept up to date across the
/// decisions of one episode.
#[derive(Debug, Default)]
pub struct Users {
    seen: usize,
    /// Sum of bounded slowdowns, jobs, and their mean (kept: the
    /// observation reads it for every slot).
    scores: FxHashMap<i64, Score>,
    /// The largest per-user mean, kept with the scores.
    largest: f64,
}

impl Users {
    fn update(&mut self, d: &Decision<'_>) {
        if d.started.len() == self.seen {
            return;
        }
        let mut fell = false;
        for &j in &d.started[self.seen..] {
            let job = &d.jobs[j as usize];
            let wait = d.starts[j as usize] - job.submit.min(d.starts[j as usize]);
            let score = self.scores.entry(job.user).or_default();
            let before = (score.jobs > 0).then_some(score.mean);
            score.sum += bounded_slowdown(wait, job.run);
            score.jobs += 1;
            score.mean = score.sum / score.jobs as f64;
            let after = score.mean;
            if after >= self.largest {
                self.largest = after;
            } else if before == Some(self.largest) {
                fell = true;
            }
        }
        self.seen = d.started.len();
        // The largest mean fell: look for the new one over all users (a
        // run of thousands of single-task users never gets here).
        if fell {
            self.largest = self.scores.values().map(|s| s.mean).fold(0.0, f64::max);
        }
    }

    fn mean(&self, user: i64) -> Option<f64> {
        self.scores.get(&user).map(|s| s.mean)
    }

    fn largest_mean(&self) -> f64 {
        self.largest
    }
}

/// `value / max` clipped to TOP, TOP when either is unknown (negative
/// value, no maximum). Divides by multiplying with `1 / max`, computed once
/// per decision: 9 divisions a slot were a quarter of an observation.
#[derive(Clone, Copy)]
struct Scale(f64);

impl Scale {
    fn of(max: f64) -> Scale {
        Scale(if max > 0.0 { 1.0 / max } else { -1.0 })
    }

    fn apply(self, value: f64) -> f32 {
        if value < 0.0 || self.0 < 0.0 {
            return TOP;
        }
        ((value * self.0) as f32).min(TOP)
    }
}

/// The slots: every waiting job in submit order when they fit, else the
/// two sorted views interleaved.
pub fn slots(d: &Decision<'_>) -> Vec<u32> {
    if d.queue.len() <= SLOTS {
        return first_by(d, |j| (j.submit, 0));
    }
    let shortest = first_by(d, |j| (j.estimate, j.submit));
    let narrowest = first_by(d, |j| (j.procs as u64, j.submit));
    interleave(shortest, narrowest)
}

/// The first SLOTS of `d`'s queue by `key` (then position in the window),
/// in that order: a selection, then a sort of those only (queues run to
/// thousands of jobs).
pub fn first_by(d: &Decision<'_>, key: fn(&slurp_sim::SimJob) -> (u64, u64)) -> Vec<u32> {
    let mut q: Vec<u32> = d.queue.clone();
    let rank = |&j: &u32| (key(&d.jobs[j as usize]), j);
    if q.len() > SLOTS {
        q.select_nth_unstable_by_key(SLOTS, rank);
        q.truncate(SLOTS);
    }
    q.sort_unstable_by_key(rank);
    q
}

/// The first SLOTS jobs of two orders of a queue longer than SLOTS, taken
/// in turn from each, a job shown once.
pub fn interleave(
    shortest: impl IntoIterator<Item = u32>,
    narrowest: impl IntoIterator<Item = u32>,
) -> Vec<u32> {
    let mut a = shortest.into_iter();
    let mut b = narrowest.into_iter();
    interleave_all(&mut [&mut a, &mut b])
}

/// The first SLOTS jobs of several orders of a queue, taken in turn from
/// each (one from the first, one from the second, …), a job shown once.
pub fn interleave_all(orders: &mut [&mut dyn Iterator<Item = u32>]) -> Vec<u32> {
    let mut shown = ShownIds::default();
    let mut out = Vec::with_capacity(SLOTS);
    let mut spent = vec![false; orders.len()];
    while out.len() < SLOTS && spent.iter().any(|s| !s) {
        for (order, spent) in orders.iter_mut().zip(&mut spent) {
            if out.len() == SLOTS {
                break;
            }
            match order.find(|&j| shown.insert(j)) {
                Some(j) => out.push(j),
                None => *spent = true,
            }
        }
    }
    out
}

/// The ids of the jobs shown so far in one interleaving: at most SLOTS of
/// them, so a table of four times that many entries, probed linearly,
/// stays sparse. In a real run the orders often agree (tasks of one time
/// limit and one core) and each skips the jobs the others showed: hundreds
/// of membership tests a decision, which an `FnvHashSet` made about a tenth
/// of a decision's time in `benches/core.rs`' real-run case.
struct ShownIds {
    /// `job + 1`; 0 is an empty entry.
    table: [u32; ShownIds::SIZE],
    /// Whether `u32::MAX` (whose `job + 1` would be 0) was shown.
    last: bool,
}

impl Default for ShownIds {
    fn default() -> ShownIds {
        ShownIds {
            table: [0; ShownIds::SIZE],
            last: false,
        }
    }
}

impl ShownIds {
    const SIZE: usize = 4 * SLOTS;
    const _POWER_OF_TWO: () = assert!(ShownIds::SIZE.is_power_of_two());

    /// Adds `job`; false if it was there already. At most SLOTS jobs are
    /// added (each one added is shown), so the table never fills.
    fn insert(&mut self, job: u32) -> bool {
        if job == u32::MAX {
            return !std::mem::replace(&mut self.last, true);
        }
        let key = job + 1;
        // Fibonacci hashing: the top bits of the product spread
        // consecutive ids over the table.
        let mut at =
            (job.wrapping_mul(0x9E37_79B9) >> (32 - ShownIds::SIZE.trailing_zeros())) as usize;
        loop {
            match self.table[at] {
                0 => {
                    self.table[at] = key;
                    return true;
                }
                k if k == key => return false,
                _ => at = (at + 1) % ShownIds::SIZE,
            }
        }
    }
}

/// Builds the observation of decision `d`.
pub fn observe(d: &Decision<'_>, norm: &Normalisers, users: &mut Users) -> Observation {
    observe_slots(d, slots(d), norm, users)
}

/// Builds the observation of decision `d` showing `jobs` (which must be
/// what [`slots`] would choose from `d.queue`: a caller that keeps the
/// queue's sorted views itself passes them, and `d.queue` is not read).
pub fn observe_slots(
    d: &Decision<'_>,
    jobs: Vec<u32>,
    norm: &Normalisers,
    users: &mut Users,
) -> Observation {
    users.update(d);
    let largest = users.largest_mean();
    let per_largest = 1.0 / largest;
    let mut features = Vec::with_capacity(SLOTS * FEATURES);
    let mut mask = vec![0.0; SLOTS];
    let [wait, run, procs, mem, user, group, exe] = [
        MAX_WAIT,
        norm.max_run,
        norm.max_procs,
        norm.max_mem,
        norm.max_user,
        norm.max_group,
        norm.max_exe,
    ]
    .map(Scale::of);
    for (slot, &j) in jobs.iter().enumerate() {
        let job = &d.jobs[j as usize];
        let user_info = match users.mean(job.user) {
            Some(mean) if largest > 0.0 => (1.0 - mean * per_largest) as f32,
            _ => 1.0,
        };
        features.extend_from_slice(&[
            wait.apply(d.now.saturating_sub(job.submit) as f64),
            run.apply(job.estimate as f64),
            procs.apply(job.procs as f64),
            mem.apply(job.mem as f64),
            user.apply(job.user as f64),
            group.apply(job.group as f64),
            exe.apply(job.exe as f64),
            user_info.min(TOP),
            if d.fits(j) { TOP } else { 1e-5 },
        ]);
        mask[slot] = 1.0;
    }
    Observation::padded(features, mask, jobs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurp_sim::{Machine, SimJob};

    fn job(submit: u64, estimate: u64, procs: u32, user: i64) -> SimJob {
        SimJob {
            id: 0,
            submit,
            run: estimate,
            estimate,
            procs,
            user,
            group: 1,
            exe: -1,
            mem: -1,
        }
    }

    const NORM: Normalisers = Normalisers {
        max_run: 1000.0,
        max_procs: 8.0,
        max_mem: 0.0,
        max_user: 4.0,
        max_group: 2.0,
        max_exe: 0.0,
    };

    #[test]
    fn few_jobs_are_shown_in_submit_order_with_their_features_then_padding() {
        // Job 0 started at 10 after waiting 10 s (bsld (10+100)/100 = 1.1,
        // user 1's mean; the largest); jobs 2 and 1 wait, in that queue order.
        let jobs = [job(0, 100, 8, 1), job(5, 500, 2, 1), job(3, 1000, 4, 2)];
        let mut queue = vec![2, 1];
        let d = Decision {
            now: 20,
            jobs: &jobs,
            machine: Machine {
                nodes: 8,
                procs_per_node: 1,
            },
            free_nodes: 3,
            queue: &mut queue,
            started: &[0],
            starts: &[10, 0, 0],
            running: &[0],
        };
        let obs = observe(&d, &NORM, &mut Users::default());
        assert_eq!(
            obs.jobs,
            [2, 1],
            "submit order: job 2 came at 3, job 1 at 5"
        );
        let row = |slot: usize| &obs.features[slot * FEATURES..(slot + 1) * FEATURES];
        let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6);
        // Job 2: waited 17 s, estimate 1000 (clipped), 4 of 8 procs, no mem,
        // user 2 of 4, group 1 of 2, no exe, user without started jobs, does
        // not fit in 3 nodes.
        assert!(
            close(
                row(0),
                &[17.0 / 43200.0, TOP, 0.5, TOP, 0.5, 0.5, TOP, TOP, 1e-5]
            ),
            "{:?}",
            row(0)
        );
        // Job 1: user 1 has the largest mean: user_info 0; fits.
        assert!(
            close(
                row(1),
                &[15.0 / 43200.0, 0.5, 0.25, TOP, 0.25, 0.5, TOP, 0.0, TOP]
            ),
            "{:?}",
            row(1)
        );
        assert_eq!(&obs.mask[..3], &[1.0, 1.0, 0.0]);
        assert_eq!(row(2), &PADDING);
        assert_eq!(obs.features.len(), SLOTS * FEATURES);
    }

    #[test]
    fn many_jobs_alternate_shortest_and_narrowest_without_repeats() {
        // 200 jobs: estimates fall with the index, widths rise with it.
        let jobs: Vec<SimJob> = (0..200)
            .map(|i| job(i, 1000 - i, 1 + i as u32, 0))
            .collect();
        let mut queue: Vec<u32> = (0..200).collect();
        let d = Decision {
            now: 500,
            jobs: &jobs,
            machine: Machine {
                nodes: 256,
                procs_per_node: 1,
            },
            free_nodes: 256,
            queue: &mut queue,
            started: &[],
            starts: &[0; 200],
            running: &[],
        };
        let obs = observe(&d, &NORM, &mut Users::default());
        assert_eq!(obs.jobs.len(), SLOTS);
        // Shortest first is 199, 198, …; narrowest first is 0, 1, ….
        assert_eq!(&obs.jobs[..6], &[199, 0, 198, 1, 197, 2]);
        let mut unique = obs.jobs.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), SLOTS);
        assert!(obs.mask.iter().all(|&m| m == 1.0));
    }

    #[test]
    fn interleaving_orders_that_agree_shows_each_job_once_in_turn() {
        // Three orders of the same jobs, two of them alike (a real run's
        // tasks of one limit and one width), ids that collide in a small
        // table (multiples of its size) and the largest id.
        let ids: Vec<u32> = (0..300u32).map(|i| i * 512).chain([u32::MAX, 0]).collect();
        let reversed: Vec<u32> = ids.iter().rev().copied().collect();
        let shown = interleave_all(&mut [
            &mut ids.iter().copied(),
            &mut ids.iter().copied(),
            &mut reversed.iter().copied(),
        ]);
        assert_eq!(shown.len(), SLOTS);
        // In turn: the first order's first, the second's first not yet shown,
        // the third's first.
        assert_eq!(&shown[..6], &[0, 512, u32::MAX, 1024, 1536, 299 * 512]);
        let mut unique = shown.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), SLOTS, "no job twice");
        // Fewer jobs than slots: each one once, then the orders are spent.
        let few = [7u32, u32::MAX, 7 + 512];
        assert_eq!(
            interleave_all(&mut [&mut few.iter().copied(), &mut few.iter().copied()]),
            [7, u32::MAX, 7 + 512]
        );
    }
}
