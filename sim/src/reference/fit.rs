//! The queue a backfilling walk reads, indexed by what a job needs: the
//! first job from a position on that fits in the free nodes and ends
//! before the shadow time, without visiting the jobs that do not.
//!
//! While a chosen job waits under EASY, the reference walks the whole queue
//! after every end (`Sim::wait_backfilling`). On a deep queue almost every
//! job is too wide or too long for the gap, and the walk visited each of
//! them: 73% of `fairshare+easy`'s time over all of RICC. This is a segment
//! tree over the queue's positions holding the fewest nodes and the
//! shortest estimate below each node. A subtree whose jobs all ask more
//! nodes than are free, or all run too long, is skipped whole. A job that
//! starts is marked gone in place, so the positions of the others (the
//! walk's order) do not move while the wait lasts.

/// Nodes and estimate of a position that holds no job: never fits.
const NONE: (u32, u64) = (u32::MAX, u64::MAX);

/// Queue positions `0..len` with their jobs' nodes and estimates.
pub(super) struct Fit {
    /// Leaves at `cap..2 * cap`; node `i` holds the least nodes and the
    /// least estimate of its two children (not necessarily of one job).
    nodes: Vec<u32>,
    estimate: Vec<u64>,
    cap: usize,
    len: usize,
}

impl Fit {
    /// The index of a queue whose jobs need `need` (nodes, estimate), in
    /// queue order.
    pub(super) fn new(need: impl ExactSizeIterator<Item = (u32, u64)>) -> Fit {
        let len = need.len();
        Fit::with_room(need, len)
    }

    /// [`Fit::new`] with leaves for at least `room` positions.
    fn with_room(need: impl ExactSizeIterator<Item = (u32, u64)>, room: usize) -> Fit {
        let len = need.len();
        let cap = room.max(len).next_power_of_two();
        let mut fit = Fit {
            nodes: vec![NONE.0; 2 * cap],
            estimate: vec![NONE.1; 2 * cap],
            cap,
            len,
        };
        for (i, (n, e)) in need.enumerate() {
            fit.nodes[cap + i] = n;
            fit.estimate[cap + i] = e;
        }
        for i in (1..cap).rev() {
            fit.pull(i);
        }
        fit
    }

    fn pull(&mut self, i: usize) {
        self.nodes[i] = self.nodes[2 * i].min(self.nodes[2 * i + 1]);
        self.estimate[i] = self.estimate[2 * i].min(self.estimate[2 * i + 1]);
    }

    fn set(&mut self, at: usize, (n, e): (u32, u64)) {
        let mut i = self.cap + at;
        self.nodes[i] = n;
        self.estimate[i] = e;
        while i > 1 {
            i /= 2;
            self.pull(i);
        }
    }

    /// A job queued at the end.
    pub(super) fn push(&mut self, need: (u32, u64)) {
        if self.len == self.cap {
            let leaves: Vec<_> = (self.cap..self.cap + self.len)
                .map(|i| (self.nodes[i], self.estimate[i]))
                .collect();
            *self = Fit::with_room(leaves.into_iter(), 2 * self.cap);
        }
        self.len += 1;
        self.set(self.len - 1, need);
    }

    /// The job at `at` started: it no longer fits anywhere.
    pub(super) fn remove(&mut self, at: usize) {
        self.set(at, NONE);
    }

    /// The last position is dropped (it holds no job).
    pub(super) fn pop(&mut self) {
        debug_assert!(self.len > 0);
        self.len -= 1;
        self.set(self.len, NONE);
    }

    /// The first position from `from` on whose job needs at most `free`
    /// nodes and an estimate below `limit`.
    pub(super) fn first(&self, from: usize, free: u32, limit: u64) -> Option<usize> {
        self.find(1, 0, self.cap, from, free, limit)
    }

    fn find(
        &self,
        i: usize,
        lo: usize,
        hi: usize,
        from: usize,
        free: u32,
        limit: u64,
    ) -> Option<usize> {
        if hi <= from || self.nodes[i] > free || self.estimate[i] >= limit {
            return None;
        }
        if hi - lo == 1 {
            return Some(lo);
        }
        let mid = (lo + hi) / 2;
        self.find(2 * i, lo, mid, from, free, limit)
            .or_else(|| self.find(2 * i + 1, mid, hi, from, free, limit))
    }
}

#[cfg(test)]
mod tests {
    use super::Fit;
    use proptest::prelude::*;

    /// What the walk did before the index: the first position from `from`
    /// whose job is still queued and fits.
    fn scan(need: &[Option<(u32, u64)>], from: usize, free: u32, limit: u64) -> Option<usize> {
        (from..need.len()).find(|&i| need[i].is_some_and(|(n, e)| n <= free && e < limit))
    }

    proptest! {
        /// Through starts, arrivals (past the capacity too) and dropped
        /// ends, the index answers as the scan of the same queue.
        #[test]
        fn answers_as_the_scan(
            initial in prop::collection::vec((0u32..9, 0u64..100), 0..40),
            steps in prop::collection::vec((0u8..4, 0usize..64, 0u32..10, 0u64..110), 0..80),
        ) {
            let mut need: Vec<Option<(u32, u64)>> = initial.iter().copied().map(Some).collect();
            let mut fit = Fit::new(initial.into_iter());
            for (kind, at, free, limit) in steps {
                match kind {
                    0 if !need.is_empty() => {
                        let at = at % need.len();
                        need[at] = None;
                        fit.remove(at);
                    }
                    1 => {
                        let job = (free.min(8), limit);
                        need.push(Some(job));
                        fit.push(job);
                    }
                    2 if need.last().is_some_and(Option::is_none) => {
                        need.pop();
                        fit.pop();
                    }
                    _ => {}
                }
                let from = at % (need.len() + 1);
                prop_assert_eq!(fit.first(from, free, limit), scan(&need, from, free, limit));
            }
        }
    }

    #[test]
    fn skips_jobs_too_wide_or_too_long_and_the_started() {
        // Positions: 0 wide and short, 1 narrow and long, 2 narrow and
        // short, 3 narrow and short.
        let mut fit = Fit::new([(8, 10), (1, 500), (2, 10), (1, 5)].into_iter());
        assert_eq!(fit.first(0, 4, 100), Some(2));
        assert_eq!(fit.first(3, 4, 100), Some(3));
        assert_eq!(fit.first(0, 1, 100), Some(3));
        assert_eq!(fit.first(0, 8, 11), Some(0));
        // The limit is strict: an estimate of 10 does not end before 10.
        assert_eq!(fit.first(1, 8, 10), Some(3));
        fit.remove(2);
        assert_eq!(fit.first(0, 4, 100), Some(3));
        assert_eq!(fit.first(0, 0, 100), None);
    }
}
