//! Judging a learned policy against the heuristics it must beat: on each
//! workload, the same random windows replayed in both simulation models,
//! without and with EASY backfilling, by FCFS, SJF, F1, `fairshare` and
//! the model (greedy). A **cell** is one workload × model × backfilling;
//! the model *wins* a cell when its worst user's mean bounded slowdown is
//! at least 1% below every heuristic's, and *holds* it when it is at most
//! 1% above the best one's.

use std::sync::Arc;

use serde::Serialize;
use slurp_runtime::core::{Backfill, Order, PolicyKind};
use slurp_sim::{Metrics, Model as SimModel, Summary, Window, Workload};

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
    let mut out = Vec::new();
    for (model, backfill) in KINDS {
        let rivals = rivals(workload, windows, model, backfill);
        let runs = crate::rollout::in_parallel(windows.len(), |i| {
            replay(net, workload, windows[i], model, backfill)
        })
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
        out.push(Cell {
            workload: name.to_owned(),
            model,
            backfill,
            rivals,
            learned: learned(label, backfill, &runs),
        });
    }
    Ok(out)
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
