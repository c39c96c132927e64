//! Queued tasks by size class, for backfilling.
//!
//! A backfill candidate must fit in the cores free now, and on a busy
//! machine few are free: walking the whole queue to find the few small
//! tasks that could start costs a microsecond per decision per thousand
//! tasks walked (a replay of a 450,000-job trace makes 700,000 such walks).
//! So queued tasks are also kept in classes by the cores they need (1, 2,
//! 3–4, 5–8, …), each class indexed by time limit and by queue order, and a
//! pass merges only the classes small enough to fit.

use std::collections::BTreeSet;
use std::iter::Peekable;
use std::ops::Bound::{self, Excluded, Included, Unbounded};

/// Classes of `u32` core counts: class `c` holds 2^(c−1)+1 ..= 2^c cores
/// (class 0: one core).
const CLASSES: usize = 33;

fn class(cores: u32) -> usize {
    (u32::BITS - cores.saturating_sub(1).leading_zeros()) as usize
}

/// The fewest cores a task of class `c` needs.
fn least(c: usize) -> u64 {
    if c == 0 { 1 } else { (1u64 << (c - 1)) + 1 }
}

/// Which tasks a pass wants: those but `skip` needing at most `free`
/// cores (`cores` gives a task's need).
#[derive(Clone, Copy)]
pub(super) struct Fit<'a> {
    pub cores: &'a dyn Fn(u32) -> u32,
    pub free: u64,
    pub skip: u32,
}

impl Fit<'_> {
    fn keeps(&self, t: u32) -> bool {
        t != self.skip && (self.cores)(t) as u64 <= self.free
    }
}

#[derive(Debug)]
pub(super) struct Classes {
    /// Per class: `(time limit in s, task)`, `u64::MAX` for unbounded.
    by_limit: Vec<BTreeSet<(u64, u32)>>,
    /// Per class: `(queue key, task)`, as the queue orders them.
    by_order: Vec<BTreeSet<(u64, u32)>>,
}

impl Classes {
    pub(super) fn new() -> Self {
        Classes {
            by_limit: vec![BTreeSet::new(); CLASSES],
            by_order: vec![BTreeSet::new(); CLASSES],
        }
    }

    pub(super) fn insert(&mut self, cores: u32, limit: u64, key: u64, task: u32) {
        let c = class(cores);
        self.by_limit[c].insert((limit, task));
        self.by_order[c].insert((key, task));
    }

    pub(super) fn remove(&mut self, cores: u32, limit: u64, key: u64, task: u32) {
        let c = class(cores);
        self.by_limit[c].remove(&(limit, task));
        self.by_order[c].remove(&(key, task));
    }

    pub(super) fn clear(&mut self) {
        self.by_limit.iter_mut().for_each(BTreeSet::clear);
        self.by_order.iter_mut().for_each(BTreeSet::clear);
    }

    /// A lower bound of the cores the smallest queued task needs.
    pub(super) fn least_cores(&self) -> Option<u64> {
        self.by_order
            .iter()
            .position(|set| !set.is_empty())
            .map(least)
    }

    /// Up to `depth` tasks that `fit`, with a time limit of at most
    /// `max_limit`, shortest first, from after `after` (a `(limit, task)`
    /// already seen).
    pub(super) fn shortest(
        &self,
        fit: Fit<'_>,
        max_limit: u64,
        after: Option<(u64, u32)>,
        depth: usize,
        budget: &mut usize,
    ) -> Vec<u32> {
        let upto = Included((max_limit, u32::MAX));
        Self::walk(&self.by_limit, fit, after, upto, depth, budget)
    }

    /// Up to `depth` tasks that `fit`, queued after `after`, in queue order.
    pub(super) fn in_order(
        &self,
        fit: Fit<'_>,
        after: (u64, u32),
        depth: usize,
        budget: &mut usize,
    ) -> Vec<u32> {
        Self::walk(&self.by_order, fit, Some(after), Unbounded, depth, budget)
    }

    /// Merges the eligible classes of one index between `after` and `upto`.
    fn walk(
        sets: &[BTreeSet<(u64, u32)>],
        fit: Fit<'_>,
        after: Option<(u64, u32)>,
        upto: Bound<(u64, u32)>,
        depth: usize,
        budget: &mut usize,
    ) -> Vec<u32> {
        let from = after.map_or(Unbounded, Excluded);
        let ranges = eligible(sets, fit.free).map(|set| set.range((from, upto)));
        merge(ranges, |t| fit.keeps(t), depth, budget)
    }

    /// Up to `depth` tasks, but `skip`, needing at most `free` cores, in no
    /// particular order (narrowest classes first): for callers that rank
    /// the candidates themselves.
    pub(super) fn small_enough(&self, fit: Fit<'_>, depth: usize, budget: &mut usize) -> Vec<u32> {
        let mut out = Vec::new();
        for set in eligible(&self.by_order, fit.free) {
            for &(_, t) in set {
                if out.len() == depth || *budget == 0 {
                    return out;
                }
                *budget -= 1;
                if fit.keeps(t) {
                    out.push(t);
                }
            }
        }
        out
    }
}

/// The classes whose smallest tasks fit in `free` cores.
fn eligible(
    sets: &[BTreeSet<(u64, u32)>],
    free: u64,
) -> impl Iterator<Item = &BTreeSet<(u64, u32)>> {
    sets.iter()
        .enumerate()
        .take_while(move |&(c, _)| least(c) <= free)
        .map(|(_, set)| set)
        .filter(|set| !set.is_empty())
}

/// Merges sorted ranges, keeping tasks that pass `keep`, until `depth` are
/// kept or the `budget` of tasks looked at is spent (a class straddling the
/// free count holds tasks just too large; they must not make a pass
/// unbounded).
fn merge<'a, I>(
    ranges: impl Iterator<Item = I>,
    keep: impl Fn(u32) -> bool,
    depth: usize,
    budget: &mut usize,
) -> Vec<u32>
where
    I: Iterator<Item = &'a (u64, u32)>,
{
    let mut heads: Vec<Peekable<I>> = ranges.map(Iterator::peekable).collect();
    let mut out = Vec::new();
    while out.len() < depth && *budget > 0 {
        let next = heads
            .iter_mut()
            .enumerate()
            .filter_map(|(i, h)| h.peek().map(|&&e| (e, i)))
            .min();
        let Some(((_, task), i)) = next else {
            break;
        };
        heads[i].next();
        *budget -= 1;
        if keep(task) {
            out.push(task);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_powers_of_two() {
        assert_eq!([1, 2, 3, 4, 5, 8, 9].map(class), [0, 1, 2, 2, 3, 3, 4]);
        assert_eq!((0..6).map(least).collect::<Vec<_>>(), [1, 2, 3, 5, 9, 17]);
        assert_eq!(class(u32::MAX), 32);
    }

    fn fit(cores: &dyn Fn(u32) -> u32, free: u64, skip: u32) -> Fit<'_> {
        Fit { cores, free, skip }
    }

    #[test]
    fn passes_merge_the_classes_that_fit_in_order() {
        // Tasks 0..6 need 1, 8, 2, 3, 1, 16 cores; limits 50, 10, 40, 30, 20, 5.
        let need = [1, 8, 2, 3, 1, 16];
        let cores = |t: u32| need[t as usize];
        let cores = &cores;
        let limits = [50, 10, 40, 30, 20, 5];
        let mut c = Classes::new();
        for t in 0..6u32 {
            c.insert(need[t as usize], limits[t as usize], t as u64, t);
        }
        assert_eq!(c.least_cores(), Some(1));
        // 3 free cores: tasks 0, 2, 3, 4 fit; shortest first.
        assert_eq!(
            c.shortest(fit(cores, 3, u32::MAX), u64::MAX, None, 10, &mut 100),
            [4, 3, 2, 0]
        );
        assert_eq!(
            c.shortest(
                fit(cores, 3, u32::MAX),
                u64::MAX,
                Some((20, 4)),
                10,
                &mut 100
            ),
            [3, 2, 0]
        );
        assert_eq!(c.shortest(fit(cores, 3, 4), 30, None, 10, &mut 100), [3]);
        // 2 free: the class of 3–4 cores is not looked at; queue order
        // after task 0.
        assert_eq!(
            c.in_order(fit(cores, 2, u32::MAX), (0, 0), 10, &mut 100),
            [2, 4]
        );
        assert_eq!(
            c.in_order(fit(cores, 100, u32::MAX), (0, 0), 2, &mut 100),
            [1, 2]
        );
        // The budget bounds what is looked at, kept or not.
        let mut budget = 1;
        assert_eq!(
            c.in_order(fit(cores, 2, u32::MAX), (0, 0), 10, &mut budget),
            [2]
        );
        assert_eq!(budget, 0);
        // 3 free: task 3 (3 cores) is in the 3–4 class and kept; with a
        // 3-core limit a 4-core task there would be looked at and dropped.
        assert_eq!(
            c.in_order(fit(cores, 3, u32::MAX), (0, 0), 10, &mut 100),
            [2, 3, 4]
        );
        let mut some = c.small_enough(
            Fit {
                cores,
                free: 3,
                skip: 2,
            },
            10,
            &mut 100,
        );
        some.sort();
        assert_eq!(some, [0, 3, 4]);
        c.remove(1, 50, 0, 0);
        c.remove(1, 20, 4, 4);
        assert_eq!(c.least_cores(), Some(2));
        assert_eq!(
            c.in_order(fit(cores, 100, u32::MAX), (0, 0), 10, &mut 100),
            [1, 2, 3, 5]
        );
        c.clear();
        assert_eq!(c.least_cores(), None);
    }
}
