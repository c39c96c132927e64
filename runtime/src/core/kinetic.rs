//! The best queued task under a time-dependent order, without re-ranking
//! the queue at every decision.
//!
//! `wfp3` ranks by (w/r)³·n and `unicep` by w/(log2(n)·r), w the time a
//! task has waited. Both are increasing functions of a line in time,
//! c·(t − s) (for `wfp3` the cube root: w·n^⅓/r), so the task that ranks
//! first at time t is the highest line at t. A kinetic tournament keeps it:
//! a tree over the tasks in which every node holds the winner of its
//! subtree and the time until which that winner is sure to stay ahead (the
//! first crossing of the two lines below it, or earlier in a child). When
//! the clock passes such a time only that node is replayed. Re-ranking a
//! queue of 10,000 tasks at every one of a trace's 900,000 events is what
//! this avoids.
//!
//! Times are milliseconds; lines are compared in `f64`. Ties go to the
//! lower task index (submission order), as everywhere in the core.

const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Line {
    /// Slope: how fast the task's priority grows per millisecond waited.
    slope: f64,
    /// When it started waiting (ms).
    since: f64,
}

impl Line {
    fn at(&self, t: f64) -> f64 {
        self.slope * (t - self.since)
    }
}

#[derive(Debug)]
pub(super) struct Tournament {
    lines: Vec<Line>,
    /// Leaves (a power of two); node `i`'s children are `2i`, `2i + 1`,
    /// task `k`'s leaf is `leaves + k`.
    leaves: usize,
    winner: Vec<u32>,
    /// Until when (ms) each node's winner is sure to stay ahead.
    until: Vec<f64>,
}

impl Tournament {
    pub(super) fn new() -> Self {
        Tournament {
            lines: Vec::new(),
            leaves: 1,
            winner: vec![NONE; 2],
            until: vec![f64::INFINITY; 2],
        }
    }

    /// Whether `a` ranks before `b` at `t`.
    fn ahead(&self, a: u32, b: u32, t: f64) -> bool {
        let (va, vb) = (self.lines[a as usize].at(t), self.lines[b as usize].at(t));
        va > vb || (va == vb && a < b)
    }

    /// The first whole millisecond after `t` at which `loser` may rank
    /// before `winner` (their lines cross once at most).
    fn crossing(&self, winner: u32, loser: u32, t: f64) -> f64 {
        let (w, l) = (self.lines[winner as usize], self.lines[loser as usize]);
        if l.slope <= w.slope {
            return f64::INFINITY;
        }
        let at = (l.slope * l.since - w.slope * w.since) / (l.slope - w.slope);
        if at.is_nan() {
            return f64::INFINITY;
        }
        at.ceil().max(t + 1.0)
    }

    /// Replays node `i` from its (current) children at `t`.
    fn play(&mut self, i: usize, t: f64) {
        let (a, b) = (self.winner[2 * i], self.winner[2 * i + 1]);
        let children = self.until[2 * i].min(self.until[2 * i + 1]);
        let (w, own) = match (a, b) {
            (NONE, NONE) => (NONE, f64::INFINITY),
            (x, NONE) | (NONE, x) => (x, f64::INFINITY),
            (a, b) => {
                let (w, l) = if self.ahead(a, b, t) { (a, b) } else { (b, a) };
                (w, self.crossing(w, l, t))
            }
        };
        self.winner[i] = w;
        self.until[i] = own.min(children);
    }

    /// Brings the subtree at `i` up to time `t`.
    fn refresh(&mut self, i: usize, t: f64) {
        if self.until[i] > t || i >= self.leaves {
            return;
        }
        self.refresh(2 * i, t);
        self.refresh(2 * i + 1, t);
        self.play(i, t);
    }

    /// Sets task `task`'s leaf and replays its path to the root at `t`.
    fn set(&mut self, task: u32, present: bool, t: f64) {
        let mut i = self.leaves + task as usize;
        self.winner[i] = if present { task } else { NONE };
        while i > 1 {
            self.refresh(i ^ 1, t);
            i /= 2;
            self.play(i, t);
        }
    }

    /// Room for task ids below `n`: the tree doubles and is replayed.
    fn grow(&mut self, n: usize, t: f64) {
        if n <= self.leaves {
            return;
        }
        let leaves = n.next_power_of_two();
        let mut winner = vec![NONE; 2 * leaves];
        winner[leaves..leaves + self.leaves]
            .copy_from_slice(&self.winner[self.leaves..2 * self.leaves]);
        self.winner = winner;
        self.until = vec![f64::INFINITY; 2 * leaves];
        self.leaves = leaves;
        for i in (1..leaves).rev() {
            self.play(i, t);
        }
    }

    /// Task `task` waits from `since` (ms) with priority growing at `slope`.
    pub(super) fn insert(&mut self, task: u32, slope: f64, since: u64, now: u64) {
        let t = now as f64;
        if self.lines.len() <= task as usize {
            self.lines.resize(
                task as usize + 1,
                Line {
                    slope: 0.0,
                    since: 0.0,
                },
            );
        }
        self.lines[task as usize] = Line {
            slope: if slope.is_finite() { slope } else { 0.0 },
            since: since as f64,
        };
        self.grow(task as usize + 1, t);
        self.set(task, true, t);
    }

    pub(super) fn remove(&mut self, task: u32, now: u64) {
        if (task as usize) < self.leaves {
            self.set(task, false, now as f64);
        }
    }

    /// Task `task`'s priority at `now` (the height of its line).
    pub(super) fn priority(&self, task: u32, now: u64) -> f64 {
        self.lines[task as usize].at(now as f64)
    }

    /// The task that ranks first at `now`.
    pub(super) fn best(&mut self, now: u64) -> Option<u32> {
        self.refresh(1, now as f64);
        Some(self.winner[1]).filter(|&w| w != NONE)
    }

    pub(super) fn clear(&mut self) {
        *self = Tournament::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against a scan of every line at every step, through inserts,
        /// removals and time passing.
        #[test]
        fn the_winner_is_the_highest_line(
            ops in proptest::collection::vec((0u32..40, 0u32..1000, any::<bool>(), 0u64..5000), 1..200)
        ) {
            let mut k = Tournament::new();
            let mut present: std::collections::BTreeMap<u32, Line> = Default::default();
            let mut now = 0u64;
            for (task, slope, insert, step) in ops {
                now += step;
                if insert {
                    let line = Line { slope: slope as f64 / 7.0, since: now.saturating_sub(step * 3) as f64 };
                    k.insert(task, line.slope, line.since as u64, now);
                    present.insert(task, line);
                } else {
                    k.remove(task, now);
                    present.remove(&task);
                }
                let t = now as f64;
                let expected = present.iter().fold(None, |best: Option<(u32, f64)>, (&j, l)| {
                    let v = l.at(t);
                    match best {
                        Some((_, bv)) if bv >= v => best,
                        _ => Some((j, v)),
                    }
                });
                prop_assert_eq!(k.best(now), expected.map(|e| e.0));
            }
        }
    }
}
