//! Evolving a policy network on the judged objective itself.
//!
//! PPO (the PyTorch trainer) learns from one terminal reward per episode
//! through a noisy gradient; on two CPU cores it did not reach a network
//! that beats the heuristics off-site (MODEL_CARD.md). The network is
//! small — the per-slot MLP sees nine ratios (`observe_v2.rs`) — so it can
//! instead be searched for directly: CMA-ES (the `cmaes` crate) proposes
//! weights, each proposal is written as the ONNX model it would ship as
//! (`export.rs`), loaded like any model, and scored by replaying the
//! training windows in both simulation models, without and with EASY — the
//! cells `slurp policy judge` reports, against the same rivals (FCFS, SJF,
//! F1, `fairshare`, same backfilling), whose scores are computed once.
//!
//! A proposal's loss is the mean over cells of
//!
//! ```text
//! ln(W / W*) + 2·max(0, ln(W / W*)) + 3·max(0, ln(A / (1.1·A*)))
//! ```
//!
//! with `W` its worst user's mean bounded slowdown, `A` its average, and
//! `W*`, `A*` the best rival's in the cell: every cell's worst user counts
//! by its ratio to the fairest heuristic (so a quiet site weighs as much as
//! a busy one), trailing that heuristic costs three times what beating it
//! gains, and an average beyond the judge's 1.1× is paid for steeply. The
//! windows are fixed for the whole search (common random numbers: every
//! proposal meets the same queues), so a held-out judgement afterwards is
//! what tells whether the network learned a rule or the windows.

use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cmaes::{CMAESOptions, DVector};
use slurp_sim::{Metrics, Window, Workload};

use crate::export::{self, Dense};
use crate::judge::{self, Cell, KINDS, Score};
use crate::observe::FEATURES;
use crate::{Model, Sight};

/// Trailing the fairest heuristic costs this much more than beating it
/// gains (per unit of log ratio).
const TRAILING: f64 = 2.0;
/// The weight of an average bounded slowdown beyond the judge's bound.
const DEAR: f64 = 3.0;
/// The judge's bound on the average, against the best heuristic's.
const AVERAGE_BOUND: f64 = 1.1;

/// The network's layers: `hidden` widths between the nine features and
/// the one logit (none: a linear score).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    pub hidden: Vec<usize>,
}

impl Shape {
    fn sizes(&self) -> Vec<usize> {
        let mut sizes = vec![FEATURES];
        sizes.extend(&self.hidden);
        sizes.push(1);
        sizes
    }

    /// How many weights and biases.
    pub fn params(&self) -> usize {
        self.sizes()
            .windows(2)
            .map(|io| io[0] * io[1] + io[1])
            .sum()
    }

    /// The shape of `layers` and their flat parameters (the inverse of
    /// [`Shape::layers`]); `None` unless they chain from the features to one
    /// logit.
    pub fn of(layers: &[Dense]) -> Option<(Shape, Vec<f64>)> {
        let mut width = FEATURES;
        let mut params = Vec::new();
        for l in layers {
            if l.inputs() != width || l.w.len() != l.inputs() * l.outputs() {
                return None;
            }
            width = l.outputs();
            params.extend(l.w.iter().chain(&l.b).map(|&x| f64::from(x)));
        }
        let hidden = layers[..layers.len().checked_sub(1)?]
            .iter()
            .map(Dense::outputs)
            .collect();
        (width == 1).then_some((Shape { hidden }, params))
    }

    /// The layers of a flat parameter vector (per layer: weights row-major,
    /// then biases).
    pub fn layers(&self, params: &[f64]) -> Vec<Dense> {
        let mut at = 0;
        let mut take = |n: usize| {
            let out: Vec<f32> = params[at..at + n].iter().map(|&x| x as f32).collect();
            at += n;
            out
        };
        self.sizes()
            .windows(2)
            .map(|io| Dense {
                w: take(io[0] * io[1]),
                b: take(io[1]),
            })
            .collect()
    }
}

/// One training workload: its windows and the rivals' scores there.
#[derive(Debug)]
struct Stage {
    name: String,
    workload: Workload,
    windows: Vec<Window>,
    /// Per cell of [`KINDS`].
    rivals: Vec<Vec<Score>>,
}

/// The training windows of every workload, with the rivals scored.
#[derive(Debug)]
pub struct Arena {
    stages: Vec<Stage>,
}

impl Arena {
    /// Scores the rivals on every workload's windows (once: they do not
    /// change during the search). Workloads without windows are left out.
    pub fn new(workloads: Vec<(String, Workload, Vec<Window>)>) -> Arena {
        let stages = workloads
            .into_iter()
            .filter(|(_, _, windows)| !windows.is_empty())
            .map(|(name, workload, windows)| {
                let rivals = KINDS
                    .iter()
                    .map(|&(model, backfill)| judge::rivals(&workload, &windows, model, backfill))
                    .collect();
                Stage {
                    name,
                    workload,
                    windows,
                    rivals,
                }
            })
            .collect();
        Arena { stages }
    }

    /// Windows over all workloads.
    pub fn windows(&self) -> usize {
        self.stages.iter().map(|s| s.windows.len()).sum()
    }

    /// `net`'s cells (every workload × [`KINDS`]), its replays in parallel.
    pub fn cells(&self, net: &Arc<Model>, label: &str) -> Result<Vec<Cell>, String> {
        let mut plays = Vec::new();
        for (s, stage) in self.stages.iter().enumerate() {
            for k in 0..KINDS.len() {
                plays.extend((0..stage.windows.len()).map(|w| (s, k, w)));
            }
        }
        let runs = crate::rollout::in_parallel(plays.len(), |i| {
            let (s, k, w) = plays[i];
            let stage = &self.stages[s];
            let (model, backfill) = KINDS[k];
            judge::replay(net, &stage.workload, stage.windows[w], model, backfill)
        });
        let mut runs = runs.into_iter();
        let mut cells = Vec::new();
        for stage in &self.stages {
            for (k, &(model, backfill)) in KINDS.iter().enumerate() {
                let metrics: Vec<Metrics> = runs
                    .by_ref()
                    .take(stage.windows.len())
                    .collect::<Result<_, _>>()?;
                cells.push(Cell {
                    workload: stage.name.clone(),
                    model,
                    backfill,
                    rivals: stage.rivals[k].clone(),
                    learned: judge::learned(label, backfill, &metrics),
                });
            }
        }
        Ok(cells)
    }
}

/// The search's loss over `cells` (lower is better; the module header
/// gives the formula).
pub fn loss(cells: &[Cell]) -> f64 {
    let one = |c: &Cell| {
        let best = |f: fn(&Score) -> f64| {
            c.rivals
                .iter()
                .map(f)
                .fold(f64::INFINITY, f64::min)
                .max(f64::MIN_POSITIVE)
        };
        let worst =
            (c.learned.worst_user_bounded_slowdown / best(|s| s.worst_user_bounded_slowdown)).ln();
        let average = (c.learned.avg_bounded_slowdown
            / (AVERAGE_BOUND * best(|s| s.avg_bounded_slowdown)))
        .ln();
        worst + TRAILING * worst.max(0.0) + DEAR * average.max(0.0)
    };
    cells.iter().map(one).sum::<f64>() / cells.len().max(1) as f64
}

/// A network of `shape` with `params` as the model it would ship as.
pub fn model(shape: &Shape, params: &[f64], notes: &[(&str, String)]) -> Result<Model, String> {
    let bytes = export::actor(&shape.layers(params), Sight::V2.name(), notes);
    Model::from_bytes(Path::new("evolved.onnx"), &bytes, None, None).map_err(|e| e.to_string())
}

/// How long and how wide to search.
#[derive(Debug, Clone)]
pub struct Options {
    pub shape: Shape,
    /// Proposals a generation (`None`: CMA-ES's default for the size).
    pub population: Option<usize>,
    /// Where the search starts (`None`: the zero network), and the initial
    /// step size around it.
    pub start: Option<Vec<f64>>,
    pub sigma: f64,
    pub seed: u64,
    pub generations: usize,
    pub time: Duration,
}

/// One generation's progress.
#[derive(Debug, Clone, Copy)]
pub struct Generation {
    pub generation: usize,
    pub evaluations: usize,
    /// The best loss so far, and this generation's best.
    pub best: f64,
    pub this: f64,
    pub elapsed: Duration,
}

/// What the search found.
#[derive(Debug, Clone)]
pub struct Evolved {
    pub params: Vec<f64>,
    pub loss: f64,
    pub curve: Vec<Generation>,
}

/// Searches for the network of `opts.shape` with the lowest [`loss`] on
/// `arena`, until `opts.generations` or `opts.time`; `progress` is told of
/// every generation.
pub fn evolve(
    arena: &Arena,
    opts: &Options,
    mut progress: impl FnMut(&Generation),
) -> Result<Evolved, String> {
    let failure: RefCell<Option<String>> = RefCell::new(None);
    let objective = |x: &DVector<f64>| {
        let cells = model(&opts.shape, x.as_slice(), &[])
            .and_then(|m| arena.cells(&Arc::new(m), "evolved"));
        match cells {
            Ok(cells) => loss(&cells),
            Err(e) => {
                failure.borrow_mut().get_or_insert(e);
                f64::MAX
            }
        }
    };
    let dims = opts.shape.params();
    let start = match &opts.start {
        Some(p) if p.len() == dims => p.clone(),
        Some(p) => {
            return Err(format!(
                "the starting network has {} weights, the shape {dims}",
                p.len()
            ));
        }
        None => vec![0.0; dims],
    };
    let mut options = CMAESOptions::new(start, opts.sigma)
        .seed(opts.seed)
        .max_generations(opts.generations.max(1))
        .max_time(opts.time);
    if let Some(n) = opts.population {
        options = options.population_size(n.max(4));
    }
    let mut cma = options
        .build(objective)
        .map_err(|e| format!("CMA-ES options: {e:?}"))?;
    let started = Instant::now();
    let mut curve = Vec::new();
    loop {
        let done = cma.next();
        if let Some(e) = failure.borrow().clone() {
            return Err(e);
        }
        let best = cma.overall_best_individual().map_or(f64::MAX, |b| b.value);
        let this = cma.current_best_individual().map_or(f64::MAX, |b| b.value);
        let generation = Generation {
            generation: cma.generation(),
            evaluations: cma.function_evals(),
            best,
            this,
            elapsed: started.elapsed(),
        };
        progress(&generation);
        curve.push(generation);
        if done.is_some() {
            break;
        }
    }
    let best = cma
        .overall_best_individual()
        .ok_or("the search evaluated nothing")?;
    Ok(Evolved {
        params: best.point.as_slice().to_vec(),
        loss: best.value,
        curve,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_count_and_split_their_parameters() {
        let linear = Shape { hidden: vec![] };
        assert_eq!(linear.params(), FEATURES + 1);
        let one = Shape { hidden: vec![4] };
        assert_eq!(one.params(), FEATURES * 4 + 4 + 4 + 1);
        let params: Vec<f64> = (0..one.params()).map(|i| i as f64).collect();
        let layers = one.layers(&params);
        assert_eq!(layers.len(), 2);
        assert_eq!(layers[0].w.len(), FEATURES * 4);
        assert_eq!(layers[0].b, vec![36.0, 37.0, 38.0, 39.0]);
        assert_eq!(layers[1].w, vec![40.0, 41.0, 42.0, 43.0]);
        assert_eq!(layers[1].b, vec![44.0]);
        assert_eq!(Shape::of(&layers), Some((one, params)), "the inverse");
        assert_eq!(Shape::of(&layers[..1]), None, "four logits are not one");
    }
}
