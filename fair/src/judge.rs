//! Judging a learned policy against the heuristics it must beat: on each
//! workload, the same random windows replayed in both simulation models,
//! without and with EASY backfilling, by FCFS, SJF, F1, `fairshare` and
//! the model (greedy). A **cell** is one workload × model × backfilling;
//! the model *wins* a cell when its worst user's mean bounded slowdown is
//! at least 1% below every heuristic's, and *holds* it when it is at most
//! 1% above the best one's.
//!
//! Where it does not hold a cell, [`Why`] says where the excess comes
//! from: a cell's worst user is the mean of each window's, so the excess
//! is a sum over windows, and the few windows that make most of it name
//! the user the model leaves worst off and what that user's jobs are like.

use std::sync::Arc;

use serde::Serialize;
use slurp_runtime::core::{Backfill, Order, PolicyKind};
use slurp_sim::{Metrics, Model as SimModel, SimJob, Summary, Window, Workload};

use crate::Model;

/// The windows a workload is judged on unless told otherwise (`slurp
/// policy judge`'s `--samples`, `--len`, `--seed`): the held-out figures
/// of the model card are drawn so.
pub const SAMPLES: usize = 50;
pub const LEN: usize = 1024;
pub const SEED: u64 = 12345;

/// The heuristics a model is judged against.
pub const RIVALS: [Order; 4] = [Order::Fcfs, Order::Sjf, Order::F1, Order::Fairshare];

/// One policy's means over a cell's windows.
#[derive(Debug, Clone, Serialize)]
pub struct Score {
    pub policy: String,
    pub avg_bounded_slowdown: f64,
    pub worst_user_bounded_slowdown: f64,
}

impl Score {
    fn of(policy: String, summary: &Summary) -> Score {
        Score {
            policy,
            avg_bounded_slowdown: summary.avg_bounded_slowdown,
            worst_user_bounded_slowdown: summary.worst_user_bounded_slowdown,
        }
    }
}

/// One workload × simulation model × backfilling.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub workload: String,
    pub model: SimModel,
    pub backfill: bool,
    /// The rivals' scores, in [`RIVALS`] order.
    pub rivals: Vec<Score>,
    pub learned: Score,
}

/// A cell and its verdicts ([`Cell::wins`], [`Cell::holds`],
/// [`Cell::average_ok`]), so that readers of the figures count what the
/// check counts instead of restating its thresholds.
#[derive(Debug, Serialize)]
pub struct Judged<'a> {
    #[serde(flatten)]
    pub cell: &'a Cell,
    pub wins: bool,
    pub holds: bool,
    pub average_within: bool,
}

impl Cell {
    fn best(&self, f: fn(&Score) -> f64) -> f64 {
        self.rivals.iter().map(f).fold(f64::INFINITY, f64::min)
    }

    /// Worst user at least 1% below every rival's.
    pub fn wins(&self) -> bool {
        let own = self.learned.worst_user_bounded_slowdown;
        self.rivals
            .iter()
            .all(|r| own <= 0.99 * r.worst_user_bounded_slowdown)
    }

    /// Worst user at most 1% above the best rival's.
    pub fn holds(&self) -> bool {
        self.learned.worst_user_bounded_slowdown
            <= 1.01 * self.best(|s| s.worst_user_bounded_slowdown)
    }

    /// Average bounded slowdown within 1.1× the best rival's.
    pub fn average_ok(&self) -> bool {
        self.learned.avg_bounded_slowdown <= 1.1 * self.best(|s| s.avg_bounded_slowdown)
    }

    /// The cell with its verdicts, as the judge's JSON gives it.
    pub fn judged(&self) -> Judged<'_> {
        Judged {
            cell: self,
            wins: self.wins(),
            holds: self.holds(),
            average_within: self.average_ok(),
        }
    }

    /// The model's worst user over the fairest rival's, and its average
    /// over the best rival average: what the verdicts compare with 0.99,
    /// 1.01 and 1.1.
    pub fn ratios(&self) -> (f64, f64) {
        let of = |f: fn(&Score) -> f64| f(&self.learned) / self.best(f).max(f64::MIN_POSITIVE);
        (
            of(|s| s.worst_user_bounded_slowdown),
            of(|s| s.avg_bounded_slowdown),
        )
    }

    /// The rival with the lowest worst user.
    pub fn fairest_rival(&self) -> &Score {
        self.rivals
            .iter()
            .min_by(|a, b| {
                a.worst_user_bounded_slowdown
                    .total_cmp(&b.worst_user_bounded_slowdown)
            })
            .unwrap_or(&self.learned)
    }
}

/// What the check counts over a set of cells (one draw's, or one cell's
/// over several draws), and how far the worst user is from the fairest
/// heuristic's across them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tally {
    pub cells: usize,
    /// Worst user at least 1% below every rival's.
    pub wins: usize,
    /// At most 1% above the fairest rival's.
    pub holds: usize,
    /// Average within 1.1× the best rival's.
    pub averages: usize,
    /// The geometric mean of [`Cell::ratios`]' first ratio, and its largest.
    pub geometric: f64,
    pub worst: f64,
}

impl Tally {
    pub fn of<'a>(cells: impl IntoIterator<Item = &'a Cell>) -> Tally {
        let mut t = Tally {
            cells: 0,
            wins: 0,
            holds: 0,
            averages: 0,
            geometric: 0.0,
            worst: f64::NAN,
        };
        let mut logs = 0.0;
        for c in cells {
            t.cells += 1;
            t.wins += usize::from(c.wins());
            t.holds += usize::from(c.holds());
            t.averages += usize::from(c.average_ok());
            let ratio = c.ratios().0;
            logs += ratio.ln();
            t.worst = t.worst.max(ratio);
        }
        t.geometric = (logs / t.cells.max(1) as f64).exp();
        t
    }

    /// The check: at least 3 of every 4 cells won, every cell held, every
    /// average kept.
    pub fn passes(&self) -> bool {
        4 * self.wins >= 3 * self.cells && self.holds == self.cells && self.averages == self.cells
    }
}

/// How kept models are ranked before judging (on training windows): the
/// cells won with the average within 1.1× the best, then the mean ratio of
/// the worst user to the fairest heuristic's (lower first).
pub fn rank(cells: &[Cell]) -> (usize, f64) {
    let won = cells.iter().filter(|c| c.wins() && c.average_ok()).count();
    let ratio = cells.iter().map(|c| c.ratios().0).sum::<f64>() / cells.len().max(1) as f64;
    (won, ratio)
}

/// The four cells of a workload: each simulation model without and with
/// EASY.
pub const KINDS: [(SimModel, bool); 4] = [
    (SimModel::Slurp, false),
    (SimModel::Slurp, true),
    (SimModel::Reference, false),
    (SimModel::Reference, true),
];

/// The rivals' scores in one cell, in [`RIVALS`] order.
pub fn rivals(
    workload: &Workload,
    windows: &[Window],
    model: SimModel,
    backfill: bool,
) -> Vec<Score> {
    rival_runs(workload, windows, model, backfill)
        .iter()
        .map(|(policy, runs)| Score::of(policy.clone(), &Summary::of(runs)))
        .collect()
}

/// Each rival's figures on each of `windows` (in window order), in
/// [`RIVALS`] order: what [`rivals`] averages, kept per window so that a
/// subset can be scored without replaying it again.
pub fn rival_runs(
    workload: &Workload,
    windows: &[Window],
    model: SimModel,
    backfill: bool,
) -> Vec<(String, Vec<Metrics>)> {
    let mode = if backfill {
        Backfill::Easy
    } else {
        Backfill::None
    };
    let policies: Vec<PolicyKind> = RIVALS.iter().map(|&o| PolicyKind::new(o, mode)).collect();
    slurp_sim::compare(workload, windows, &policies, model)
        .into_iter()
        .map(|r| (r.policy, r.windows))
        .collect()
}

/// The score of `policy` over `runs`.
pub fn score(policy: String, runs: &[Metrics]) -> Score {
    Score::of(policy, &Summary::of(runs))
}

/// The learned policy's score over `runs`, its replays of a cell's windows.
pub fn learned(label: &str, backfill: bool, runs: &[Metrics]) -> Score {
    let name = if backfill {
        format!("{label}+easy")
    } else {
        label.to_owned()
    };
    Score::of(name, &Summary::of(runs))
}

/// The cells of one workload: both models, without and with EASY, over
/// `windows`. `name` labels the workload and the learned policy is called
/// `label`.
pub fn cells(
    net: &Arc<Model>,
    label: &str,
    name: &str,
    workload: &Workload,
    windows: &[Window],
) -> Result<Vec<Cell>, String> {
    Ok(explained(net, label, name, workload, windows, false)?
        .into_iter()
        .map(|(cell, _)| cell)
        .collect())
}

/// [`cells`], each with [`Why`] where the model does not hold it and
/// `why` asks for it (a search or a train's last table has no use for it).
pub fn explained(
    net: &Arc<Model>,
    label: &str,
    name: &str,
    workload: &Workload,
    windows: &[Window],
    why: bool,
) -> Result<Vec<(Cell, Option<Why>)>, String> {
    let mut out = Vec::new();
    for (model, backfill) in KINDS {
        let rival_runs = rival_runs(workload, windows, model, backfill);
        let runs = crate::rollout::in_parallel(windows.len(), |i| {
            replay(net, workload, windows[i], model, backfill)
        })
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
        let cell = Cell {
            workload: name.to_owned(),
            model,
            backfill,
            rivals: rival_runs
                .iter()
                .map(|(policy, runs)| score(policy.clone(), runs))
                .collect(),
            learned: learned(label, backfill, &runs),
        };
        let why = (why && !cell.holds()).then(|| {
            let fairest = &cell.fairest_rival().policy;
            let (_, theirs) = rival_runs
                .iter()
                .find(|(policy, _)| policy == fairest)
                .unwrap_or(&rival_runs[0]);
            Why::of(workload, windows, fairest, theirs, &runs)
        });
        out.push((cell, why));
    }
    Ok(out)
}

/// The windows [`Why`] names, at most.
pub const CULPRITS: usize = 3;

/// Where a cell's excess over the fairest heuristic comes from: the
/// windows where the model's worst user is above the heuristic's, each by
/// how much (the excess; the windows where it is below do not offset it).
#[derive(Debug, Clone, Serialize)]
pub struct Why {
    /// The fairest heuristic.
    pub against: String,
    /// The share of the excess from windows whose worst-off user under the
    /// model mostly runs jobs of at least half the machine, which EASY
    /// cannot backfill around: their user waits for a drain.
    pub wide: f64,
    /// The windows that make most of the excess, largest first (those of
    /// at least 1% of it).
    pub windows: Vec<Culprit>,
}

/// One window of a [`Why`] and the user the model leaves worst off there.
#[derive(Debug, Clone, Serialize)]
pub struct Culprit {
    /// Its jobs (0-based, after loading): `slurp sim --window START:LEN`
    /// replays it.
    pub start: usize,
    pub len: usize,
    /// Its share of the cell's excess.
    pub share: f64,
    pub user: i64,
    /// The user's mean bounded slowdown under the model and under the
    /// fairest heuristic.
    pub learned: f64,
    pub heuristic: f64,
    /// The user's jobs in the window, their median width (a share of the
    /// machine's processors), and their median run and estimate in seconds
    /// (a short run under a long estimate is what a rule ranking by
    /// estimate cannot see, and what a wait costs most in bounded slowdown).
    pub jobs: usize,
    pub width: f64,
    pub run: f64,
    pub estimate: f64,
}

impl Why {
    /// The excess of `own` (the model's figures, window by window) over
    /// `theirs` (the fairest heuristic's, named `against`) on `windows`.
    pub fn of(
        workload: &Workload,
        windows: &[Window],
        against: &str,
        theirs: &[Metrics],
        own: &[Metrics],
    ) -> Why {
        let mut over: Vec<(f64, usize)> = own
            .iter()
            .zip(theirs)
            .map(|(o, t)| o.worst_user_bounded_slowdown - t.worst_user_bounded_slowdown)
            .enumerate()
            .filter(|&(_, d)| d > 0.0)
            .map(|(i, d)| (d, i))
            .collect();
        over.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let excess: f64 = over.iter().map(|&(d, _)| d).sum();
        let share = |d: f64| if excess > 0.0 { d / excess } else { 0.0 };
        let procs = workload.machine.procs().max(1) as f64;
        let culprit = |d: f64, i: usize| {
            let user = own[i].worst_user;
            let jobs: Vec<&SimJob> = workload.jobs[windows[i].range()]
                .iter()
                .filter(|j| j.user == user)
                .collect();
            let bsld = |m: &Metrics| {
                m.per_user
                    .iter()
                    .find(|u| u.user == user)
                    .map_or(0.0, |u| u.avg_bounded_slowdown)
            };
            Culprit {
                start: windows[i].start,
                len: windows[i].len,
                share: share(d),
                user,
                learned: own[i].worst_user_bounded_slowdown,
                heuristic: bsld(&theirs[i]),
                jobs: jobs.len(),
                width: median(jobs.iter().map(|j| f64::from(j.procs) / procs)),
                run: median(jobs.iter().map(|j| j.run as f64)),
                estimate: median(jobs.iter().map(|j| j.estimate as f64)),
            }
        };
        let all: Vec<Culprit> = over.iter().map(|&(d, i)| culprit(d, i)).collect();
        Why {
            against: against.to_owned(),
            // Folded from 0, not summed: an empty sum of floats is −0.
            wide: all
                .iter()
                .filter(|c| c.width >= 0.5)
                .fold(0.0, |wide, c| wide + c.share),
            // A window of under 1% of the excess explains nothing (most
            // are float noise between two near-equal schedules).
            windows: all
                .into_iter()
                .filter(|c| c.share >= 0.01)
                .take(CULPRITS)
                .collect(),
        }
    }
}

/// The median of `xs` (the mean of the middle two of an even count; 0 of
/// none).
fn median(xs: impl Iterator<Item = f64>) -> f64 {
    let mut xs: Vec<f64> = xs.collect();
    xs.sort_by(f64::total_cmp);
    match xs.len() {
        0 => 0.0,
        n if n % 2 == 1 => xs[n / 2],
        n => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

/// The model's greedy schedule of one window, measured.
pub fn replay(
    net: &Arc<Model>,
    workload: &Workload,
    window: Window,
    model: SimModel,
    backfill: bool,
) -> Result<Metrics, String> {
    let schedule = match model {
        SimModel::Reference => crate::rollout::replay(net, workload, window, backfill, None),
        SimModel::Slurp => crate::chooser::replay(net.clone(), workload, window, backfill, None),
    };
    schedule
        .map(|s| Metrics::of(workload, &s, model))
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(rivals: &[(f64, f64)], own: (f64, f64)) -> Cell {
        let score = |(w, a): (f64, f64)| Score {
            policy: String::new(),
            avg_bounded_slowdown: a,
            worst_user_bounded_slowdown: w,
        };
        Cell {
            workload: String::new(),
            model: SimModel::Slurp,
            backfill: false,
            rivals: rivals.iter().copied().map(score).collect(),
            learned: score(own),
        }
    }

    #[test]
    fn why_splits_the_excess_over_the_windows_above_the_heuristic() {
        use slurp_sim::{Dropped, Machine, UserMetrics};
        // Eight processors; in each two-job window user 1 runs a job of
        // the whole machine and user 2 one of a processor.
        let job = |i: u64, procs: u32, user: i64| SimJob {
            id: i as i64,
            submit: i,
            run: 5,
            estimate: 500,
            procs,
            user,
            group: -1,
            exe: -1,
            mem: -1,
        };
        let workload = Workload {
            machine: Machine {
                nodes: 1,
                procs_per_node: 8,
            },
            jobs: (0..10)
                .map(|i| job(i, if i % 2 == 0 { 8 } else { 1 }, 1 + i as i64 % 2))
                .collect(),
            dropped: Dropped::default(),
            max_run: 5,
        };
        let windows: Vec<Window> = (0..5)
            .map(|w| Window {
                start: 2 * w,
                len: 2,
            })
            .collect();
        let metrics = |worst_user: i64, worst: f64, other: f64| Metrics {
            jobs: 2,
            avg_wait: 0.0,
            avg_bounded_slowdown: 0.0,
            avg_turnaround: 0.0,
            utilisation: 0.0,
            makespan: 0,
            users: 2,
            worst_user,
            worst_user_bounded_slowdown: worst,
            jain: 1.0,
            per_user: vec![
                UserMetrics {
                    user: worst_user,
                    jobs: 1,
                    avg_bounded_slowdown: worst,
                },
                UserMetrics {
                    user: 3 - worst_user,
                    jobs: 1,
                    avg_bounded_slowdown: other,
                },
            ],
        };
        let theirs: Vec<Metrics> = (0..5).map(|_| metrics(2, 10.0, 4.0)).collect();
        // Above the heuristic by 30 (user 2), 40 (user 1, wide), 20 (user
        // 1) and 10 (user 2); below it in the last window, which offsets
        // nothing.
        // Each window's worst user and figure under the model.
        let runs = |rows: &[(i64, f64)]| -> Vec<Metrics> {
            rows.iter().map(|&(u, w)| metrics(u, w, 1.0)).collect()
        };
        let own = runs(&[(2, 40.0), (1, 50.0), (1, 30.0), (2, 20.0), (2, 5.0)]);
        let why = Why::of(&workload, &windows, "f1", &theirs, &own);
        assert_eq!(why.against, "f1");
        let starts: Vec<usize> = why.windows.iter().map(|w| w.start).collect();
        assert_eq!(starts, [2, 0, 4], "largest first, at most three");
        let shares: Vec<f64> = why.windows.iter().map(|w| w.share).collect();
        assert_eq!(shares, [0.4, 0.3, 0.2]);
        // User 1's windows (40 and 20 of 100) are the wide ones.
        assert!((why.wide - 0.6).abs() < 1e-12, "{}", why.wide);
        let first = &why.windows[0];
        assert_eq!((first.user, first.jobs), (1, 1));
        assert_eq!((first.learned, first.heuristic), (50.0, 4.0));
        assert_eq!((first.width, first.run, first.estimate), (1.0, 5.0, 500.0));
        assert_eq!(why.windows[1].width, 0.125);
        // A window of under 1% of the excess is not named, but its share
        // still counts to the wide one when its user's jobs are wide.
        let tiny = runs(&[(2, 110.0), (1, 10.5), (2, 10.0), (2, 10.0), (2, 10.0)]);
        let why = Why::of(&workload, &windows, "f1", &theirs, &tiny);
        let starts: Vec<usize> = why.windows.iter().map(|w| w.start).collect();
        assert_eq!(starts, [0]);
        assert!((why.wide - 0.5 / 100.5).abs() < 1e-12, "{}", why.wide);
        // No excess at all: no window named, nothing wide.
        let none = Why::of(&workload, &windows, "f1", &own, &own);
        assert!(none.windows.is_empty());
        assert_eq!(none.wide.to_bits(), 0.0f64.to_bits());
    }

    #[test]
    fn verdicts_and_rank_follow_the_one_percent_and_tenth_rules() {
        // Fairest worst user 100, best average 10.
        let rivals = [(100.0, 10.0), (200.0, 12.0)];
        let won = cell(&rivals, (98.0, 10.9));
        let dear = cell(&rivals, (98.0, 11.5)); // wins the worst user, average too high
        let tied = cell(&rivals, (100.5, 10.0)); // holds, does not win
        let lost = cell(&rivals, (150.0, 10.0));
        assert!(won.wins() && won.holds() && won.average_ok());
        assert!(dear.wins() && !dear.average_ok());
        assert!(!tied.wins() && tied.holds());
        assert!(!lost.holds());
        assert_eq!(won.fairest_rival().worst_user_bounded_slowdown, 100.0);
        let (n, ratio) = rank(&[won, dear, tied, lost]);
        assert_eq!(n, 1, "only a cell won with the average kept counts");
        assert!((ratio - (0.98 + 0.98 + 1.005 + 1.5) / 4.0).abs() < 1e-12);
    }
}
