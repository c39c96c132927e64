//! A backlog rule for choices kept until they start: while more jobs wait
//! than a set number, a network's near-ties go to its shortlist's order
//! with a wider margin.
//!
//! Without backfilling, the network's choice of a job that cannot start yet
//! idles the machine until it does. On a short queue that is the price of
//! its fairness, and a window of a thousand jobs pays it back (fair-v12
//! wins 44 of 50 fresh cells there). On a backlog of weeks the same choices
//! compound: every second the machine idles is a second more for every
//! waiting job, and the average bounded slowdown is a mean over jobs. RICC
//! replayed whole in RLScheduler's model gave fair-v12 an average 8.9× the
//! best heuristic's. A wide margin alone (`f1:256`) fixes the backlog and
//! loses the short queues (28 of 50 fresh cells won).
//!
//! `JOBS:MARGIN`: while more than `JOBS` jobs wait, the network's
//! shortlist ([`Shortlist`]) hands near-ties within `MARGIN` logits (never
//! less than its own margin) to its order. The count is what the idle
//! machine's cost scales with, whatever the machine's size or time scale.
//! A measure of work (queued node-seconds over the machine against the
//! longest queued estimate) was tried first and lost windows before it
//! helped whole traces (`fair/trainer/runs/v46-backlog-rule.md`).
//!
//! Only networks for committed choices carry one (`model.rs`,
//! [`crate::model::COMMITTED_BACKLOG`],
//! [`crate::model::COMMITTED_EASY_BACKLOG`]), and only with a shortlist,
//! whose margin it widens. Under EASY a wider margin did not lower the
//! average of a whole trace (v45), so fair-v13 carries it only without
//! backfilling.

use std::fmt;

use slurp_sim::reference::Decision;

use crate::shortlist::Shortlist;

/// A wider shortlist margin while many jobs wait.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backlog {
    /// The queue is deep while more jobs than this wait; at least 1.
    pub jobs: u32,
    /// The margin in logits while it is; finite and not negative.
    pub margin: f32,
}

impl Backlog {
    /// `JOBS:MARGIN`, as `--committed-backlog` and a model file write it.
    pub fn parse(text: &str) -> Result<Backlog, String> {
        let shape = || {
            format!(
                "`{text}` is not JOBS:MARGIN: how many waiting jobs make a backlog, and the margin in logits while more wait (such as 512:256)"
            )
        };
        let (jobs, margin) = text.split_once(':').ok_or_else(shape)?;
        let jobs: u32 = jobs.parse().map_err(|_| shape())?;
        let margin: f32 = margin.parse().map_err(|_| shape())?;
        if jobs == 0 {
            return Err(format!(
                "`{text}`: the number of jobs must be 1 or more (0 would make every queue a backlog: give the shortlist that margin instead)"
            ));
        }
        if !(margin.is_finite() && margin >= 0.0) {
            return Err(format!(
                "`{text}`: the margin must be a number of logits, 0 or more"
            ));
        }
        Ok(Backlog { jobs, margin })
    }

    /// Whether the queue of `d` is a backlog: more than `jobs` wait.
    pub fn deep(&self, d: &Decision<'_>) -> bool {
        d.queue.len() > self.jobs as usize
    }

    /// The shortlist `list` widened to this margin (never narrowed).
    pub fn widen(&self, list: Shortlist) -> Shortlist {
        Shortlist {
            margin: list.margin.max(self.margin),
            ..list
        }
    }
}

impl fmt::Display for Backlog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.jobs, self.margin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurp_runtime::core::Order;
    use slurp_sim::{Machine, SimJob};

    #[test]
    fn parses_what_it_writes_and_refuses_the_rest() {
        let b = Backlog::parse("512:256").unwrap();
        assert_eq!(
            b,
            Backlog {
                jobs: 512,
                margin: 256.0
            }
        );
        assert_eq!(Backlog::parse(&b.to_string()), Ok(b));
        assert_eq!(Backlog::parse("1:0").unwrap().jobs, 1);
        for bad in [
            "512",
            "512:",
            ":256",
            "x:256",
            "512:y",
            "512:256:1",
            "1.5:256",
            "-1:256",
        ] {
            let e = Backlog::parse(bad).unwrap_err();
            assert!(e.contains("is not JOBS:MARGIN"), "{bad}: {e}");
        }
        let e = Backlog::parse("0:256").unwrap_err();
        assert!(e.contains("must be 1 or more"), "{e}");
        for bad in ["512:-1", "512:inf", "512:NaN"] {
            let e = Backlog::parse(bad).unwrap_err();
            assert!(e.contains("margin must be"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_backlog_is_more_jobs_waiting_than_its_number() {
        let jobs: Vec<SimJob> = (0..5)
            .map(|i| SimJob {
                id: i,
                submit: 0,
                run: 60,
                estimate: 60,
                procs: 1,
                user: i,
                group: -1,
                exe: -1,
                mem: -1,
            })
            .collect();
        let deep = |n: u32, waiting: u32| {
            let mut queue: Vec<u32> = (0..waiting).collect();
            Backlog {
                jobs: n,
                margin: 256.0,
            }
            .deep(&Decision {
                now: 0,
                jobs: &jobs,
                machine: Machine {
                    nodes: 4,
                    procs_per_node: 1,
                },
                free_nodes: 0,
                queue: &mut queue,
                started: &[],
                starts: &[0; 5],
                running: &[],
            })
        };
        assert!(deep(4, 5));
        assert!(!deep(5, 5), "more than, not as many as");
        assert!(!deep(1, 1));
        assert!(deep(1, 2));
    }

    #[test]
    fn a_backlog_widens_the_margin_and_never_narrows_it() {
        let b = Backlog {
            jobs: 512,
            margin: 256.0,
        };
        let list = Shortlist {
            order: Order::F1,
            margin: 64.0,
            wide: Some(0.5),
        };
        assert_eq!(
            b.widen(list),
            Shortlist {
                margin: 256.0,
                ..list
            }
        );
        let wider = Shortlist {
            margin: 300.0,
            ..list
        };
        assert_eq!(b.widen(wider), wider);
    }
}
