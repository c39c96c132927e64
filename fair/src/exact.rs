//! An estimate rule: once the jobs that ended have shown that they run as
//! long as they ask for, a network's near-ties go to another shortlist.
//!
//! A trace without requested times (SWF field 9 is −1: NASA-iPSC, the
//! Lublin traces, other archive traces) is replayed with each job's run
//! time as its estimate (RL-SPEC), so every estimate is exact. Shortest
//! first then serves every user soon: `sjf` is the fairest heuristic in 301
//! of 340 such cells, and in 5 of the same 340 with the users' own
//! estimates. The networks were searched where estimates are the users'
//! guesses, mostly far above the runs, and what they learned to do with a
//! guess is wrong where the estimate can be trusted: fair-v13 wins 125 of
//! those 340 cells, 287 with the users' estimates
//! (`fair/trainer/runs/v49-site-shapes.md`). A network searched on exact
//! estimates alone gained what handing its near-ties to `sjf` gained, and
//! no more (v49), so the rule is a shortlist, not a second network.
//!
//! The rule needs no flag in the trace, only what a scheduler sees: it
//! counts the jobs that ended and those that ran at least 99% of their
//! estimate (a job killed at its limit does too, so one site's timeouts
//! are counted alike), and calls the estimates exact once [`SEEN`] jobs
//! have ended and nine in ten of them ran their estimate: the same test
//! (`slurp_sim::workload::ran_its_estimate`, `mostly_exact`) by which
//! `slurp_sim::Workload::caveats` names a whole trace. Users' limits
//! are rarely so tight: 1.7% of RICC's jobs ran their estimate. Before
//! [`SEEN`] jobs have ended a network chooses through its own shortlist.
//! In a real run only tasks with a time limit are counted: one without is
//! given the longest limit as its estimate, which says nothing of how well
//! limits are set (`chooser.rs`).
//!
//! A network carries one (`model.rs`, [`crate::model::EXACT_SHORTLIST`]
//! and its kin) beside its own shortlist; only a network seeing v2 or
//! later may, whose standing ([`crate::observe_v2::Standing`]) keeps the
//! count.

use slurp_sim::workload::{mostly_exact, ran_its_estimate};

/// Jobs that must have ended before estimates can be called exact: fewer
/// say little, and a window's first decisions are made before any ends.
pub const SEEN: u64 = 32;

/// How many jobs ended, and how many of them ran their estimate.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Estimates {
    ended: u64,
    whole: u64,
}

impl Estimates {
    /// A job that asked for `estimate` ended after running `run` (both in
    /// the same unit).
    pub fn ended(&mut self, run: u64, estimate: u64) {
        self.ended += 1;
        if ran_its_estimate(run, estimate) {
            self.whole += 1;
        }
    }

    /// Whether the ended jobs show exact estimates: at least [`SEEN`] of
    /// them, nine in ten having run their estimate.
    pub fn exact(&self) -> bool {
        self.ended >= SEEN && mostly_exact(self.whole, self.ended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after(jobs: &[(u64, u64)]) -> Estimates {
        let mut e = Estimates::default();
        for &(run, estimate) in jobs {
            e.ended(run, estimate);
        }
        e
    }

    #[test]
    fn estimates_are_exact_only_when_nine_in_ten_ended_jobs_ran_them() {
        // Too few to tell, however exact.
        assert!(!after(&[(60, 60); 31]).exact());
        assert!(after(&[(60, 60); 32]).exact());
        // A run just short of its estimate counts (whole seconds of a
        // replay); one well short does not.
        assert!(after(&[(99, 100); 40]).exact());
        assert!(!after(&[(98, 100); 40]).exact());
        // Nine in ten, not fewer: 36 of 40, then 35 of 40.
        let mut jobs = vec![(60, 60); 36];
        jobs.extend([(10, 600); 4]);
        assert!(after(&jobs).exact());
        jobs[0] = (10, 600);
        assert!(!after(&jobs).exact());
        // Runs past their estimate (a site's grace time) ran it.
        assert!(after(&[(700, 600); 32]).exact());
        // Users' guesses: a day asked, an hour run.
        assert!(!after(&[(3_600, 86_400); 1_000]).exact());
    }
}
