//! A horizon for choices kept until they start: a job the network would
//! wait for is passed over when its reservation lies too far ahead.
//!
//! In RLScheduler's reference model a choice is kept until the job starts,
//! and under EASY everything else waits for it but what backfills, which
//! goes in submit order. A network that chooses a job that cannot start
//! for a day (a wide one, behind jobs of days) hands that day to FCFS: the
//! light user whose job of seconds arrives meanwhile waits behind the
//! oldest jobs, whatever the network would choose for it (`gen:quiet:6`,
//! fair-v10's one cell held by no learned model before: v39). Slurm's
//! backfill scheduler plans no reservation past `bf_window` for the same
//! reason.
//!
//! A horizon `H` (a share of a time) keeps the network's choice when its
//! reservation (the shadow time EASY would give it, by the running jobs'
//! estimates) begins within `H` × the longest estimate among the running
//! and waiting jobs. When it does not, the network's best among the jobs
//! that would (those that fit now among them) is chosen instead, through
//! its shortlist; when none would, its choice stands. The longest estimate
//! is the site's own time scale (its longest time limit, in a busy queue):
//! a share of it means the same on a machine of hours and one of days.
//!
//! Without backfilling the same choice costs more: nothing else starts
//! while the kept job waits, so the whole machine idles until its
//! reservation. fair-v11's network there kept 112 of 150 fresh cells'
//! averages within 1.1× the best heuristic's; with the same horizon, 136
//! (fair-v12; `fair/trainer/runs/v43-committed-horizon.md`).
//!
//! A model carries one for each network for committed choices (`model.rs`,
//! [`crate::model::COMMITTED_HORIZON`] for the one without backfilling, which
//! serves EASY too where the model has no other,
//! [`crate::model::COMMITTED_EASY_HORIZON`] for EASY's own). slurp's own
//! model and real runs choose again at every decision, so nothing there is
//! kept waiting for, and the horizon is not read.

use std::fmt;

use slurp_sim::reference::Decision;

use crate::observe::Observation;

/// Kept choices must start within `share` × the longest estimate in sight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Horizon {
    /// Positive and finite.
    pub share: f32,
}

impl Horizon {
    /// `SHARE`, as `--horizon` and a model file write it.
    pub fn parse(text: &str) -> Result<Horizon, String> {
        match text.parse::<f32>() {
            Ok(share) if share.is_finite() && share > 0.0 => Ok(Horizon { share }),
            _ => Err(format!(
                "`{text}` is not a horizon: a share above 0 of the longest estimate among the running and waiting jobs, such as 0.5"
            )),
        }
    }

    /// The slot to start at decision `d`, seen as `obs`, where the network
    /// (through its shortlist) chose `chosen` from `logits`: `chosen` if its
    /// job's reservation begins within the horizon, else `choose` of the
    /// logits with every slot past the horizon masked out, unless that
    /// masks out every slot.
    pub fn keep(
        &self,
        d: &Decision<'_>,
        obs: &Observation,
        logits: &[f32],
        chosen: usize,
        mut choose: impl FnMut(&[f32]) -> usize,
    ) -> usize {
        let slots = obs.jobs.len().min(logits.len());
        if chosen >= slots || d.fits(obs.jobs[chosen]) {
            return chosen;
        }
        let longest = d
            .running
            .iter()
            .chain(d.queue.iter())
            .map(|&j| d.jobs[j as usize].estimate)
            .max()
            .unwrap_or(0);
        // A reservation `s` seconds ahead is past the horizon when `s >
        // share × longest`; `s` is whole, so when it is past the floor.
        let limit = (f64::from(self.share) * longest as f64) as u64;
        // A reservation begins later the more nodes it needs, so one bound
        // on the nodes tells every shown job apart.
        let most = d.reservations().nodes_by(d.now.saturating_add(limit));
        let far = |slot: usize| {
            let job = &d.jobs[obs.jobs[slot] as usize];
            most.is_some_and(|most| d.machine.nodes_for(job.procs) > most)
        };
        if !far(chosen) {
            return chosen;
        }
        let masked: Vec<f32> = (0..logits.len())
            .map(|s| {
                if s < slots && !far(s) {
                    logits[s]
                } else {
                    f32::NEG_INFINITY
                }
            })
            .collect();
        if masked.iter().all(|l| *l == f32::NEG_INFINITY) {
            return chosen;
        }
        choose(&masked)
    }
}

impl fmt::Display for Horizon {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.share)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurp_sim::{Machine, SimJob};

    fn job(submit: u64, estimate: u64, procs: u32) -> SimJob {
        SimJob {
            id: 0,
            submit,
            run: estimate,
            estimate,
            procs,
            user: 1,
            group: -1,
            exe: -1,
            mem: -1,
        }
    }

    #[test]
    fn a_horizon_is_a_positive_share() {
        assert_eq!(Horizon::parse("0.5"), Ok(Horizon { share: 0.5 }));
        assert_eq!(Horizon::parse("2").map(|h| h.to_string()), Ok("2".into()));
        for bad in ["0", "-1", "inf", "NaN", "half", ""] {
            let e = Horizon::parse(bad).unwrap_err();
            assert!(e.contains("is not a horizon"), "{bad}: {e}");
        }
    }

    /// On 8 nodes, job 0 (7 nodes, 100 s left of its estimate) and job 1
    /// (1 node, a day) run, and no node is free. Waiting: job 2 needs all 8
    /// nodes, so it is reserved from job 1's end, a day away; jobs 3 (2
    /// nodes) and 4 (1) from job 0's, in 100 s. The longest estimate in
    /// sight is job 1's day.
    #[test]
    fn a_choice_whose_reservation_is_past_the_horizon_goes_to_the_best_one_within() {
        let jobs = [
            job(0, 200, 7),
            job(0, 86_400, 1),
            job(50, 300, 8),
            job(60, 3_600, 2),
            job(70, 600, 1),
        ];
        let mut queue = vec![2, 3, 4];
        let d = Decision {
            now: 100,
            jobs: &jobs,
            machine: Machine {
                nodes: 8,
                procs_per_node: 1,
            },
            free_nodes: 0,
            queue: &mut queue,
            started: &[0, 1],
            starts: &[0, 0, 0, 0, 0],
            running: &[0, 1],
        };
        let obs = Observation {
            features: Vec::new(),
            mask: vec![1.0; 3],
            jobs: vec![2, 3, 4],
        };
        // The network ranks job 2 first, then 4, then 3.
        let logits = [5.0, 1.0, 2.0];
        let best = |l: &[f32]| (0..l.len()).max_by(|&a, &b| l[a].total_cmp(&l[b])).unwrap();
        // Half a day: job 2's reservation (86,400) is past it; jobs 3 and
        // 4 start at 200, within it; 4 is the network's best of them.
        let half = Horizon { share: 0.5 };
        assert_eq!(half.keep(&d, &obs, &logits, 0, best), 2);
        // Past a day and a bit, job 2's reservation is within: it stands.
        let more = Horizon { share: 1.01 };
        assert_eq!(more.keep(&d, &obs, &logits, 0, best), 0);
        // A choice within the horizon stands, whatever the network ranks.
        assert_eq!(half.keep(&d, &obs, &logits, 1, best), 1);
        // When every job is past it, the choice stands.
        let short = Horizon { share: 0.0001 };
        assert_eq!(short.keep(&d, &obs, &logits, 0, best), 0);
    }
}
