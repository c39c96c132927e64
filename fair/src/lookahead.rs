//! Lookahead: a model's choice checked against a few heuristics' by
//! projecting the shown jobs ahead under each order, as dynP schedulers
//! switch between rules by simulating the queue they have.
//!
//! A model that carries [`LOOKAHEAD`] (say `fairshare,f1`) decides so:
//! its network ranks the shown jobs, each named heuristic ranks them too,
//! and every ranking is projected. The network's choice stands unless a
//! heuristic's order is projected to leave the worst user's mean bounded
//! slowdown lower by more than the margin ([`LOOKAHEAD_MARGIN`], 10% by
//! default); then that order's first job is taken instead.
//!
//! A projection knows what the scheduler knows: the running jobs' ends by
//! their estimates, the shown jobs' estimates, sizes and submit times, and
//! each user's bounded slowdowns so far (`observe_v2::Standing`). It sees
//! no future arrivals and no real run times. Jobs start in the order's
//! order, each once the capacity the earlier ones left is free for it
//! (list scheduling on a heap of ends); with EASY, the jobs that fit now
//! and end, by their estimates, before the order's first job can start
//! go now as well (the backfilling of this instant). Every order places
//! the same jobs, so orders are compared on the same users.
//!
//! An order's score is the largest projected mean bounded slowdown among
//! the users with shown jobs (the users the choice can move), then the
//! sum of the shown jobs' projected slowdowns.
//!
//! The cost is one sort and one projection of at most 128 jobs an order,
//! a few microseconds each: a choice among three orders costs about what
//! the network's evaluation does (BENCHMARKS.md).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;
use slurp_runtime::core::{Order, Time, float_key};
use slurp_sim::SimJob;

use crate::observe_v2::{Standing, slowdown};

/// The metadata key of the heuristics a model's choice is checked against
/// (`fcfs`, `sjf`, `f1`, `fairshare`, comma-separated).
pub const LOOKAHEAD: &str = "slurp.lookahead";

/// The metadata key of how much fairer (a fraction of the network's
/// projected worst user) a heuristic's order must be projected to be
/// taken instead; 0.1 when absent.
pub const LOOKAHEAD_MARGIN: &str = "slurp.lookahead.margin";

/// What a model's choice is checked against.
#[derive(Debug, Clone, PartialEq)]
pub struct Lookahead {
    pub rules: Vec<Order>,
    pub margin: f64,
}

/// The orders a lookahead may name: those whose keys a job's own figures
/// and its user's usage give.
const RULES: [Order; 4] = [Order::Fcfs, Order::Sjf, Order::F1, Order::Fairshare];

impl Lookahead {
    /// From the metadata's values; the reason when they cannot be used.
    pub fn parse(rules: &str, margin: Option<&str>) -> Result<Lookahead, String> {
        let names = || RULES.map(Order::name).join(", ");
        let rules = rules
            .split(',')
            .map(|r| {
                let r = r.trim();
                RULES
                    .into_iter()
                    .find(|o| o.name() == r)
                    .ok_or_else(|| format!("`{r}` is not one of {}", names()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let margin = match margin {
            None => 0.1,
            Some(m) => m
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|m| (0.0..1.0).contains(m))
                .ok_or_else(|| format!("margin `{m}` is not a fraction in [0, 1)"))?,
        };
        Ok(Lookahead { rules, margin })
    }

    /// As a model's metadata.
    pub fn notes(&self) -> [(&'static str, String); 2] {
        let rules: Vec<&str> = self.rules.iter().map(|o| o.name()).collect();
        [
            (LOOKAHEAD, rules.join(",")),
            (LOOKAHEAD_MARGIN, self.margin.to_string()),
        ]
    }
}

/// A shown job as a projection sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queued {
    pub user: i64,
    pub submit: u64,
    pub estimate: u64,
    /// Capacity it takes (nodes in the reference model, cores in slurp's).
    pub units: u32,
}

/// An order's projected outcome: lower is fairer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Projected {
    /// The largest projected mean bounded slowdown among the users with
    /// shown jobs.
    pub worst: f64,
    /// The shown jobs' projected bounded slowdowns, summed.
    pub total: f64,
}

impl Projected {
    /// Whether `self` is fairer than `other` by more than rounding.
    fn better_than(&self, other: &Projected) -> bool {
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
        if close(self.worst, other.worst) {
            !close(self.total, other.total) && self.total < other.total
        } else {
            self.worst < other.worst
        }
    }
}

/// What the scheduler has at a decision, for a projection.
#[derive(Debug, Clone, Copy)]
pub struct Now<'a> {
    /// Seconds.
    pub now: u64,
    /// Units free now.
    pub free: u32,
    /// The running jobs' estimated ends (seconds) and units.
    pub running: &'a [(u64, u32)],
    /// EASY backfills around the head.
    pub backfill: bool,
}

/// Projects `order` (indices into `shown`, each once) from `at`, the users
/// standing as `standing` says.
pub fn project(at: Now<'_>, shown: &[Queued], order: &[usize], standing: &Standing) -> Projected {
    Projector::default().project(at, shown, order, standing)
}

/// Scratch space reused between projections.
#[derive(Debug, Default)]
struct Projector {
    ends: BinaryHeap<Reverse<(u64, u32)>>,
    users: FxHashMap<i64, (f64, u32)>,
    early: Vec<bool>,
}

impl Projector {
    fn project(
        &mut self,
        at: Now<'_>,
        shown: &[Queued],
        order: &[usize],
        standing: &Standing,
    ) -> Projected {
        let Now { now, running, .. } = at;
        self.ends.clear();
        self.users.clear();
        self.early.clear();
        self.early.resize(shown.len(), false);
        let mut free = u64::from(at.free);
        let mut total = 0.0;
        let mut place = |users: &mut FxHashMap<i64, (f64, u32)>, job: &Queued, start: u64| {
            let s = slowdown(start.saturating_sub(job.submit), job.estimate);
            let u = users.entry(job.user).or_insert((0.0, 0));
            u.0 += s;
            u.1 += 1;
            total += s;
        };
        // A running job past its estimate is taken to end now.
        self.ends.extend(
            running
                .iter()
                .map(|&(end, units)| Reverse((end.max(now), units))),
        );
        if let (true, Some(&head)) = (at.backfill, order.first()) {
            let need = u64::from(shown[head].units);
            if free < need {
                // The shadow time: when the head could start by the
                // running jobs' estimates.
                let mut ends: Vec<(u64, u32)> = self.ends.iter().map(|&Reverse(e)| e).collect();
                ends.sort_unstable();
                let mut f = free;
                let shadow = ends
                    .into_iter()
                    .find_map(|(end, units)| {
                        f += u64::from(units);
                        (f >= need).then_some(end)
                    })
                    .unwrap_or(u64::MAX);
                for &j in &order[1..] {
                    let job = &shown[j];
                    if u64::from(job.units) <= free && now.saturating_add(job.estimate) <= shadow {
                        free -= u64::from(job.units);
                        self.ends
                            .push(Reverse((now.saturating_add(job.estimate), job.units)));
                        self.early[j] = true;
                        place(&mut self.users, job, now);
                    }
                }
            }
        }
        let mut t = now;
        for &j in order {
            if self.early[j] {
                continue;
            }
            let job = &shown[j];
            let need = u64::from(job.units);
            while free < need {
                let Some(Reverse((end, units))) = self.ends.pop() else {
                    break;
                };
                t = t.max(end);
                free += u64::from(units);
            }
            // Wider than all the capacity: it starts once all of it is free.
            free = free.saturating_sub(need);
            self.ends
                .push(Reverse((t.saturating_add(job.estimate), job.units)));
            place(&mut self.users, job, t);
        }
        let worst = self
            .users
            .iter()
            .map(|(&user, &(sum, n))| {
                let u = standing.user(user);
                (u.sum + sum) / f64::from(u.jobs + n)
            })
            .fold(0.0, f64::max);
        Projected { worst, total }
    }
}

/// A model's lookahead at its decisions, keeping its scratch space.
#[derive(Debug)]
pub struct Ahead {
    lookahead: Lookahead,
    projector: Projector,
    order: Vec<usize>,
}

impl Ahead {
    pub fn new(lookahead: Lookahead) -> Ahead {
        Ahead {
            lookahead,
            projector: Projector::default(),
            order: Vec::new(),
        }
    }

    /// The slot to take among `jobs` (the shown jobs, `shown` as projected)
    /// where the network's logits are `logits` and its choice `chosen`.
    pub fn choose(
        &mut self,
        at: Now<'_>,
        jobs: &[&SimJob],
        shown: &[Queued],
        logits: &[f32],
        chosen: usize,
        standing: &Standing,
    ) -> usize {
        if shown.len() < 2 {
            return chosen;
        }
        let order = &mut self.order;
        order.clear();
        order.extend(0..shown.len());
        order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
        if let Some(at) = order.iter().position(|&s| s == chosen) {
            order[..=at].rotate_right(1);
        }
        let own = self.projector.project(at, shown, order, standing);
        let mut best: Option<(usize, Projected)> = None;
        for &rule in &self.lookahead.rules {
            let order = &mut self.order;
            order.clear();
            order.extend(0..shown.len());
            let now_ms = Time(at.now.saturating_mul(1000));
            order.sort_by_cached_key(|&s| {
                let job = jobs[s];
                let key = match rule {
                    Order::Fairshare => (float_key(standing.usage(job.user, now_ms)), job.submit),
                    _ => slurp_sim::reference::key(rule, job, at.now),
                };
                (key, s)
            });
            let first = order[0];
            if first == chosen {
                continue;
            }
            let p = self.projector.project(at, shown, order, standing);
            if best.is_none_or(|(_, b)| p.better_than(&b)) {
                best = Some((first, p));
            }
        }
        match best {
            Some((first, p))
                if p.better_than(&own) && p.worst < (1.0 - self.lookahead.margin) * own.worst =>
            {
                first
            }
            _ => chosen,
        }
    }
}

/// The running jobs of a reference-model replay, followed from its
/// decisions: what started, and what has ended by now (the scheduler sees
/// a job end; it plans with its estimate until then).
#[derive(Debug, Default)]
pub struct Running {
    told: usize,
    /// By real end.
    live: BinaryHeap<Reverse<(u64, u32)>>,
    ends: Vec<(u64, u32)>,
}

impl Running {
    /// The running jobs' estimated ends and nodes at `d`.
    pub fn at(&mut self, d: &slurp_sim::reference::Decision<'_>) -> &[(u64, u32)] {
        for &j in &d.started[self.told..] {
            let job = &d.jobs[j as usize];
            self.live.push(Reverse((d.starts[j as usize] + job.run, j)));
        }
        self.told = d.started.len();
        while self
            .live
            .peek()
            .is_some_and(|&Reverse((end, _))| end <= d.now)
        {
            self.live.pop();
        }
        self.ends.clear();
        self.ends.extend(self.live.iter().map(|&Reverse((_, j))| {
            let job = &d.jobs[j as usize];
            (
                d.starts[j as usize] + job.estimate,
                d.machine.nodes_for(job.procs),
            )
        }));
        &self.ends
    }
}

/// The shown jobs `slots` of `jobs`, and as a projection sees them, each
/// taking `units(job)`.
pub fn shown<'a>(
    jobs: &'a [SimJob],
    slots: &[u32],
    units: impl Fn(&SimJob) -> u32,
) -> (Vec<&'a SimJob>, Vec<Queued>) {
    let jobs: Vec<&SimJob> = slots.iter().map(|&j| &jobs[j as usize]).collect();
    let shown = jobs
        .iter()
        .map(|j| Queued {
            user: j.user,
            submit: j.submit,
            estimate: j.estimate,
            units: units(j),
        })
        .collect();
    (jobs, shown)
}
