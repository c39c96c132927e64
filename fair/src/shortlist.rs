//! A shortlist: the network names the jobs it would start, a heuristic
//! picks among them.
//!
//! A network trained for the worst user's slowdown ranks a few jobs far
//! above the rest when a user is falling behind, and many nearly alike the
//! rest of the time. Where it is nearly indifferent, its choice costs the
//! average (on a busy queue, the gap to F1's average is most of it) and buys
//! little fairness. A shortlist `ORDER:MARGIN` keeps the network's choice
//! where it is sure and hands the near-ties to `ORDER`: of the shown jobs
//! whose logit is within `MARGIN` of the chosen one's (the network's best,
//! or its draw), the one `ORDER` ranks first starts. Margin 0 changes only
//! exact ties; a margin past every gap is `ORDER` itself.
//!
//! A third field, `ORDER:MARGIN:WIDE`, keeps jobs asking for at least the
//! share `WIDE` of the machine in the network's hands: its choice of such a
//! job stands, and the order picks only among narrower ones. Orders rank
//! wide jobs late (F1's `n·log r` most of all), so handing them near-ties
//! leaves a user of wide jobs waiting for a drain the network had chosen to
//! give (v33: half of what fair-v9 loses on generated workloads). Judged on
//! fair-v9's networks for EASY it lowered the worst user cell by cell but
//! passed no more cells, nor on fair-v10's (v36), so no built-in model
//! carries a width (`fair/trainer/runs/v34-wide-shortlist.md`); it is there
//! for a site's own judging.
//!
//! `fairshare` hands near-ties to the user with the least decayed usage
//! among the shown jobs' users, as `fairshare` orders its queue: the
//! shortlist reads it from the network's observation (feature 1 of v5, v7,
//! v8, v9 and v10: the user's place in fair-share turns), so only a network
//! seeing one of them may have it (`model.rs` refuses the rest). On
//! fair-v10's committed EASY network it lost to F1's order (v37:
//! `fair/trainer/runs/v37-fairshare-shortlist.md`), so no built-in model
//! uses it either.
//!
//! The margin is in the network's own logit units, so it belongs to one
//! network: a model file carries one per network (`model.rs`,
//! [`crate::model::SHORTLIST`]), chosen by judging, and `slurp policy train
//! --shortlist` searches a network playing under its rule.

use std::fmt;

use slurp_runtime::core::{Order, float_key};
use slurp_sim::SimJob;
use slurp_sim::reference;

use crate::observe::{FEATURES, Observation};

/// A heuristic's choice among the jobs within a margin of the network's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shortlist {
    pub order: Order,
    /// In logit units, finite and not negative.
    pub margin: f32,
    /// The share of the machine (in (0, 1]) from which a job is the
    /// network's alone; `None`: every job may be handed to the order.
    pub wide: Option<f32>,
}

impl Shortlist {
    /// The orders a shortlist may hand its near-ties to: those that rank a
    /// job by its own figures and the clock, and `fairshare`, whose ranking
    /// of users the observation shows when it shows fair-share turns.
    pub const ORDERS: [Order; 6] = [
        Order::Fcfs,
        Order::Sjf,
        Order::F1,
        Order::Wfp3,
        Order::Unicep,
        Order::Fairshare,
    ];

    /// Why a network seeing `sight` cannot choose through this rule, if it
    /// cannot: `fairshare` reads the users' places in fair-share turns,
    /// which only v5, v7, v8, v9 and v10 show.
    pub fn unreadable_by(&self, sight: crate::Sight) -> Option<String> {
        (self.order == Order::Fairshare && !sight.turns()).then(|| {
            format!(
                "`{self}` orders near-ties by the users' places in fair-share turns, which a network seeing {} is not shown: it needs v5, v7, v8, v9 or v10",
                sight.name()
            )
        })
    }

    /// `ORDER:MARGIN[:WIDE]`, as `--shortlist` and a model file write it.
    pub fn parse(text: &str) -> Result<Shortlist, String> {
        let names = || Shortlist::ORDERS.map(Order::name).join(", ");
        let (order, rest) = text.split_once(':').ok_or_else(|| {
            format!(
                "`{text}` is not ORDER:MARGIN[:WIDE] (one of {} and a margin in logits, such as f1:32 or f1:32:0.5)",
                names()
            )
        })?;
        let (margin, wide) = match rest.split_once(':') {
            Some((margin, wide)) => (margin, Some(wide)),
            None => (rest, None),
        };
        let order = Shortlist::ORDERS
            .into_iter()
            .find(|o| o.name() == order)
            .ok_or_else(|| {
                format!(
                    "`{order}` is not an order a shortlist can use: one of {}",
                    names()
                )
            })?;
        let margin: f32 = margin
            .parse()
            .map_err(|_| format!("`{margin}` is not a margin: a number of logits, 0 or more"))?;
        if !(margin.is_finite() && margin >= 0.0) {
            return Err(format!(
                "`{margin}` is not a margin: a number of logits, 0 or more"
            ));
        }
        let wide = match wide {
            None => None,
            Some(w) => match w.parse::<f32>() {
                Ok(share) if share > 0.0 && share <= 1.0 => Some(share),
                _ => {
                    return Err(format!(
                        "`{w}` is not a width: a share of the machine above 0 and at most 1, such as 0.5"
                    ));
                }
            },
        };
        Ok(Shortlist {
            order,
            margin,
            wide,
        })
    }

    /// The slot to start, given the network's `logits` over the slots of
    /// `obs` (its `jobs` index `jobs`; the logits past them are padding)
    /// and its own choice `chosen`: of the slots within the margin of
    /// `chosen`'s logit, the one the order ranks first (then the earlier
    /// job). `chosen` itself is always on the list. With a width, a
    /// `chosen` job at least that share of the `procs` the machine has
    /// stands, and wider near-ties are left off the list. `fairshare` ranks
    /// a slot by its feature 1, the user's place in turns (1 first).
    pub fn pick(
        &self,
        logits: &[f32],
        chosen: usize,
        obs: &Observation,
        jobs: &[SimJob],
        now: u64,
        procs: u64,
    ) -> usize {
        let slots = &obs.jobs[..];
        let Some(&top) = logits.get(chosen) else {
            return chosen;
        };
        let wide = |s: usize| {
            self.wide.is_some_and(|share| {
                let job = &jobs[slots[s] as usize];
                f64::from(job.procs) >= f64::from(share) * procs as f64
            })
        };
        if chosen < slots.len() && wide(chosen) {
            return chosen;
        }
        let floor = top - self.margin;
        (0..slots.len().min(logits.len()))
            .filter(|&s| s == chosen || (logits[s] >= floor && !wide(s)))
            .min_by_key(|&s| {
                let job = slots[s];
                let key = match self.order {
                    Order::Fairshare => (float_key(-f64::from(obs.features[s * FEATURES])), 0),
                    order => reference::key(order, &jobs[job as usize], now),
                };
                (key, job)
            })
            .unwrap_or(chosen)
    }
}

impl fmt::Display for Shortlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.order.name(), self.margin)?;
        match self.wide {
            Some(share) => write!(f, ":{share}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The observation of `slots`, each row's feature 1 the given place
    /// in fair-share turns (the rest of no matter to a shortlist).
    fn shown(slots: &[u32], turns: &[f32]) -> Observation {
        let features = turns
            .iter()
            .flat_map(|&t| std::iter::once(t).chain([0.0; FEATURES - 1]))
            .collect();
        Observation {
            features,
            mask: vec![0.0; slots.len()],
            jobs: slots.to_vec(),
        }
    }

    fn job(submit: u64, estimate: u64, procs: u32) -> SimJob {
        SimJob {
            id: submit as i64,
            submit,
            run: estimate,
            estimate,
            procs,
            user: 0,
            group: -1,
            exe: -1,
            mem: -1,
        }
    }

    #[test]
    fn parses_what_it_writes_and_refuses_the_rest() {
        let s = Shortlist::parse("f1:32").unwrap();
        assert_eq!(
            s,
            Shortlist {
                order: Order::F1,
                margin: 32.0,
                wide: None,
            }
        );
        assert_eq!(Shortlist::parse(&s.to_string()), Ok(s));
        assert_eq!(Shortlist::parse("sjf:0.5").unwrap().margin, 0.5);
        for bad in ["f1", "f1:", "f1:-1", "f1:inf", "f1:nan", "easy:3", "sfj:3"] {
            assert!(Shortlist::parse(bad).is_err(), "{bad} accepted");
        }
        assert!(Shortlist::parse("sfj:3").unwrap_err().contains("fairshare"));
        let fair = Shortlist::parse("fairshare:8").unwrap();
        assert_eq!(Shortlist::parse(&fair.to_string()), Ok(fair));

        let wide = Shortlist::parse("f1:96:0.5").unwrap();
        assert_eq!(wide.wide, Some(0.5));
        assert_eq!(wide.to_string(), "f1:96:0.5");
        assert_eq!(Shortlist::parse(&wide.to_string()), Ok(wide));
        for bad in ["f1:96:0", "f1:96:1.5", "f1:96:-0.5", "f1:96:", "f1:96:half"] {
            let err = Shortlist::parse(bad).unwrap_err();
            assert!(err.contains("not a width"), "{bad}: {err}");
        }
        assert!(Shortlist::parse("f1:96:0.5:1").is_err());
    }

    #[test]
    fn a_wide_job_is_the_network_s_alone() {
        // A 64-core machine. Slot 0: the network's best, 32 cores for an
        // hour; slot 1 a near-tie of 2 cores for a minute; slot 2 a near-tie
        // of the whole machine for 10 s.
        let jobs = [job(0, 3600, 32), job(10, 60, 2), job(20, 10, 64)];
        let logits = [4.0, 3.5, 3.2];
        let slots = shown(&[0, 1, 2], &[1.0; 3]);
        let sjf = |wide| Shortlist {
            order: Order::Sjf,
            margin: 1.0,
            wide,
        };
        // Without a width SJF takes the whole-machine job.
        assert_eq!(sjf(None).pick(&logits, 0, &slots, &jobs, 30, 64), 2);
        // From half the machine, the network's wide choice stands.
        assert_eq!(sjf(Some(0.5)).pick(&logits, 0, &slots, &jobs, 30, 64), 0);
        // From three quarters, slot 0 is narrow: SJF picks among the
        // narrow near-ties only, so not slot 2.
        assert_eq!(sjf(Some(0.75)).pick(&logits, 0, &slots, &jobs, 30, 64), 1);
        // The network's narrow choice is still handed over, wide jobs left
        // out: slot 1 chosen, slot 0 (half) and slot 2 not listed.
        assert_eq!(sjf(Some(0.5)).pick(&logits, 1, &slots, &jobs, 30, 64), 1);
        // The width is a share of the machine given: on 128 cores slot 2
        // is half of it, narrow under 0.6 and wide under 0.4.
        assert_eq!(sjf(Some(0.6)).pick(&logits, 1, &slots, &jobs, 30, 128), 2);
        assert_eq!(sjf(Some(0.4)).pick(&logits, 1, &slots, &jobs, 30, 128), 1);
    }

    #[test]
    fn the_order_picks_among_the_near_ties_only() {
        // Slot 0: the network's best, a long job; slot 1 within the margin
        // and shortest; slot 2 shorter still but far below; slot 3 padding.
        let jobs = [job(0, 5000, 1), job(10, 100, 1), job(20, 10, 1)];
        let logits = [4.0, 3.5, -20.0, -1e6];
        let slots = shown(&[0, 1, 2], &[1.0; 3]);
        let sjf = |margin| Shortlist {
            order: Order::Sjf,
            margin,
            wide: None,
        };
        assert_eq!(sjf(1.0).pick(&logits, 0, &slots, &jobs, 30, 64), 1);
        // Margin 0 keeps the network's choice unless tied.
        assert_eq!(sjf(0.0).pick(&logits, 0, &slots, &jobs, 30, 64), 0);
        // A margin past every gap is the order itself, padding excluded.
        assert_eq!(sjf(1e9).pick(&logits, 0, &slots, &jobs, 30, 64), 2);
        // A drawn choice is the floor's reference, not the best.
        assert_eq!(sjf(1.0).pick(&logits, 2, &slots, &jobs, 30, 64), 2);
        assert_eq!(
            Shortlist {
                order: Order::Fcfs,
                margin: 1.0,
                wide: None,
            }
            .pick(&logits, 1, &slots, &jobs, 30, 64),
            0
        );
    }

    #[test]
    fn fairshare_hands_near_ties_to_the_user_who_used_least() {
        // Slot 0, the network's best, is of the user second in turns (1/2);
        // slots 1 and 2, near-ties, of the user first (1), slot 3, far
        // below, of a user third (1/3) — and the user first in turns has
        // the longest jobs, so no job-ranking order would pick it.
        let jobs = [
            job(0, 60, 1),
            job(10, 9000, 1),
            job(20, 9000, 1),
            job(5, 10, 1),
        ];
        let logits = [4.0, 3.5, 3.4, -20.0];
        let slots = shown(&[0, 1, 2, 3], &[0.5, 1.0, 1.0, 1.0 / 3.0]);
        let fair = |margin| Shortlist {
            order: Order::Fairshare,
            margin,
            wide: None,
        };
        // The user first in turns, its earlier job of the two.
        assert_eq!(fair(1.0).pick(&logits, 0, &slots, &jobs, 30, 64), 1);
        // Outside the margin the network's choice stands.
        assert_eq!(fair(0.1).pick(&logits, 0, &slots, &jobs, 30, 64), 0);
        // SJF among the same near-ties keeps the network's short job.
        let sjf = Shortlist {
            order: Order::Sjf,
            ..fair(1.0)
        };
        assert_eq!(sjf.pick(&logits, 0, &slots, &jobs, 30, 64), 0);
        // Only a network shown the users' turns can choose through it.
        assert!(fair(1.0).unreadable_by(crate::Sight::V4).is_some());
        assert!(fair(1.0).unreadable_by(crate::Sight::V9).is_none());
        assert!(sjf.unreadable_by(crate::Sight::V4).is_none());
    }
}
