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
//! gains, and an average beyond the judge's 1.1× is paid for steeply
//! (`Loss::average_within` sets a tighter bound than the judge's, B: the
//! last term is then `3·max(0, ln(A / (B·A*)))`).
//! With a cap on gains (`Loss::gain`, G), a win's log ratio `w < 0`
//! counts as `−G·(1 − e^{w/G})`: no more than G however large, so that the
//! search does not buy a deeper win where it already wins with a loss
//! where it trails — the judge counts cells, not margins.
//!
//! By default the windows are fixed for the whole search (common random
//! numbers: every proposal meets the same queues), so a held-out judgement
//! afterwards is what tells whether the network learned a rule or the
//! windows. With `Options::redraw` (K), each generation is scored on K of
//! each workload's windows, drawn anew every generation (the same K for
//! every proposal of a generation, so that they are still ranked on the
//! same queues); a network that wins only on some windows then does not
//! stay the best. What the search returns is then the distribution's mean
//! of the generation that scored lowest on *all* the windows: a proposal's
//! score on one draw flatters it, the mean's on the whole pool does not.
//!
//! With `Options::validation` the mean kept is the one that scores best
//! on the validation cells, which flatters it in the same way: it is the
//! best of hundreds on one draw of validation windows. [`confirm`] judges
//! the network kept and the search's start on other draws, so that the
//! caller (`slurp policy train --confirm`) writes the start unchanged when
//! the search found nothing better there.

use std::cell::{Cell as Counter, RefCell};
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cmaes::{CMAESOptions, DVector};
use slurp_sim::{Metrics, Model as SimModel, Window, Workload};

use crate::backlog::Backlog;
use crate::export::{self, Dense};
use crate::horizon::Horizon;
use crate::judge::{self, Cell, KINDS};
use crate::observe::FEATURES;
use crate::shortlist::Shortlist;
use crate::{Model, Sight};

/// Trailing the fairest heuristic costs this much more than beating it
/// gains (per unit of log ratio).
const TRAILING: f64 = 2.0;
/// The weight of an average bounded slowdown beyond the judge's bound.
const DEAR: f64 = 3.0;
/// The judge's bound on the average, against the best heuristic's: the
/// search pays for an average beyond it unless told a tighter one.
pub const AVERAGE_BOUND: f64 = 1.1;

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

/// One training workload: its windows and the rivals' figures there.
#[derive(Debug)]
struct Stage {
    name: String,
    workload: Workload,
    windows: Vec<Window>,
    /// Per cell of the arena's kinds: each rival's figures per window.
    rivals: Vec<Vec<(String, Vec<Metrics>)>>,
}

/// The training windows of every workload, with the rivals scored.
#[derive(Debug)]
pub struct Arena {
    stages: Vec<Stage>,
    /// The simulation model × backfilling of each workload's cells.
    kinds: Vec<(SimModel, bool)>,
}

impl Arena {
    /// Scores the rivals on every workload's windows (once: they do not
    /// change during the search), for every kind of [`KINDS`]. Workloads
    /// without windows are left out.
    pub fn new(workloads: Vec<(String, Workload, Vec<Window>)>) -> Arena {
        Arena::of_kinds(workloads, &KINDS)
    }

    /// The same, with only the cells of `kinds` (a search for one
    /// backfilling mode).
    pub fn of_kinds(
        workloads: Vec<(String, Workload, Vec<Window>)>,
        kinds: &[(SimModel, bool)],
    ) -> Arena {
        let stages = workloads
            .into_iter()
            .filter(|(_, _, windows)| !windows.is_empty())
            .map(|(name, workload, windows)| {
                let rivals = kinds
                    .iter()
                    .map(|&(model, backfill)| {
                        judge::rival_runs(&workload, &windows, model, backfill)
                    })
                    .collect();
                Stage {
                    name,
                    workload,
                    windows,
                    rivals,
                }
            })
            .collect();
        Arena {
            stages,
            kinds: kinds.to_vec(),
        }
    }

    /// Windows over all workloads.
    pub fn windows(&self) -> usize {
        self.stages.iter().map(|s| s.windows.len()).sum()
    }

    /// Every window of every workload.
    fn all(&self) -> Vec<Vec<usize>> {
        self.stages
            .iter()
            .map(|s| (0..s.windows.len()).collect())
            .collect()
    }

    /// `per` of each workload's windows (all of a workload that has no
    /// more), drawn for `round` of a search seeded `seed`: the same
    /// arguments give the same windows.
    pub fn draw(&self, per: usize, seed: u64, round: u64) -> Vec<Vec<usize>> {
        self.stages
            .iter()
            .enumerate()
            .map(|(s, stage)| {
                let mut order: Vec<usize> = (0..stage.windows.len()).collect();
                let mut state = seed ^ round.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (s as u64) << 48;
                let take = per.min(order.len());
                // A partial Fisher–Yates shuffle: the first `take` are a
                // uniform draw without repeats.
                for i in 0..take {
                    let j = i + (splitmix(&mut state) % (order.len() - i) as u64) as usize;
                    order.swap(i, j);
                }
                order.truncate(take);
                order.sort_unstable();
                order
            })
            .collect()
    }

    /// `net`'s cells (every workload × the arena's kinds) on all the
    /// windows, its replays in parallel.
    pub fn cells(&self, net: &Arc<Model>, label: &str) -> Result<Vec<Cell>, String> {
        self.cells_on(net, label, &self.all())
    }

    /// `net`'s cells on the windows `picks` names (per workload, indices
    /// into its windows), the rivals scored on the same.
    pub fn cells_on(
        &self,
        net: &Arc<Model>,
        label: &str,
        picks: &[Vec<usize>],
    ) -> Result<Vec<Cell>, String> {
        let mut plays = Vec::new();
        for (s, picked) in picks.iter().enumerate() {
            for k in 0..self.kinds.len() {
                plays.extend(picked.iter().map(|&w| (s, k, w)));
            }
        }
        let runs = crate::rollout::in_parallel(plays.len(), |i| {
            let (s, k, w) = plays[i];
            let stage = &self.stages[s];
            let (model, backfill) = self.kinds[k];
            judge::replay(net, &stage.workload, stage.windows[w], model, backfill)
        });
        let mut runs = runs.into_iter();
        let mut cells = Vec::new();
        for (stage, picked) in self.stages.iter().zip(picks) {
            for (k, &(model, backfill)) in self.kinds.iter().enumerate() {
                let metrics: Vec<Metrics> =
                    runs.by_ref().take(picked.len()).collect::<Result<_, _>>()?;
                let rivals = stage.rivals[k]
                    .iter()
                    .map(|(policy, all)| {
                        let some: Vec<Metrics> = picked.iter().map(|&w| all[w].clone()).collect();
                        judge::score(policy.clone(), &some)
                    })
                    .collect();
                cells.push(Cell {
                    workload: stage.name.clone(),
                    model,
                    backfill,
                    rivals,
                    learned: judge::learned(label, backfill, &metrics),
                });
            }
        }
        Ok(cells)
    }
}

/// The next number of a splitmix64 sequence.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The search's loss over `cells` (lower is better; the module header
/// gives the formula), without a cap on gains.
pub fn loss(cells: &[Cell]) -> f64 {
    Loss::default().of(cells)
}

/// What the search's loss counts beyond the worst user (the module header).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Loss {
    /// Gains counted up to this log ratio (`None`: uncapped).
    pub gain: Option<f64>,
    /// An average beyond this multiple of the best heuristic's is paid for
    /// ([`AVERAGE_BOUND`], the judge's, by default; a tighter one leaves a
    /// margin for workloads the search never saw).
    pub average_within: f64,
}

impl Default for Loss {
    fn default() -> Loss {
        Loss {
            gain: None,
            average_within: AVERAGE_BOUND,
        }
    }
}

impl Loss {
    /// The loss over `cells`.
    pub fn of(&self, cells: &[Cell]) -> f64 {
        let Loss {
            gain,
            average_within,
        } = *self;
        let one = |c: &Cell| {
            let best = |f: fn(&judge::Score) -> f64| {
                c.rivals
                    .iter()
                    .map(f)
                    .fold(f64::INFINITY, f64::min)
                    .max(f64::MIN_POSITIVE)
            };
            let worst = (c.learned.worst_user_bounded_slowdown
                / best(|s| s.worst_user_bounded_slowdown))
            .ln();
            let average = (c.learned.avg_bounded_slowdown
                / (average_within * best(|s| s.avg_bounded_slowdown)))
            .ln();
            let gained = match gain {
                Some(g) if worst < 0.0 => -g * (1.0 - (worst / g).exp()),
                _ => worst,
            };
            gained + TRAILING * worst.max(0.0) + DEAR * average.max(0.0)
        };
        cells.iter().map(one).sum::<f64>() / cells.len().max(1) as f64
    }
}

/// `params` of a network of shape `from` as a network of shape `to`, whose
/// layers are as many and at least as wide: the new units' weights are
/// zero, so the wider network scores every slot as the narrower did and a
/// search can go on from it with room to grow. `None` when `to` cannot
/// hold `from`.
pub fn widen(from: &Shape, params: &[f64], to: &Shape) -> Option<Vec<f64>> {
    let (old, new) = (from.sizes(), to.sizes());
    if old.len() != new.len()
        || old.iter().zip(&new).any(|(o, n)| o > n)
        || params.len() != from.params()
    {
        return None;
    }
    let mut out = Vec::with_capacity(to.params());
    let mut at = 0;
    for (o, n) in old.windows(2).zip(new.windows(2)) {
        let (w, b) = (&params[at..at + o[0] * o[1]], &params[at + o[0] * o[1]..]);
        for i in 0..n[0] {
            for j in 0..n[1] {
                out.push(if i < o[0] && j < o[1] {
                    w[i * o[1] + j]
                } else {
                    0.0
                });
            }
        }
        out.extend((0..n[1]).map(|j| if j < o[1] { b[j] } else { 0.0 }));
        at += o[0] * o[1] + o[1];
    }
    Some(out)
}

/// `layers` with their first layer's weights on `input` folded into its
/// biases at the value `at`: the network scores every slot as it did when
/// that feature was `at`, and no longer reads it. For a search that starts
/// from a network trained on an observation where `input` meant something
/// else (v5's feature 6, the fair-share factor, near 1 at a site of many
/// users, is v7's urgency; which inputs, at what values: `Sight::refolded`).
///
/// Panics where the network has no layer or no such input: a start that
/// still read the feature would be searched as if it did not.
pub fn fold_input(layers: &mut [Dense], input: usize, at: f32) {
    let first = layers.first_mut().expect("a network has a first layer");
    let outputs = first.outputs();
    assert!(
        input < first.inputs(),
        "input {input} of a layer of {} inputs",
        first.inputs()
    );
    for (j, b) in first.b.iter_mut().enumerate() {
        let w = &mut first.w[input * outputs + j];
        *b += *w * at;
        *w = 0.0;
    }
}

/// The observation a search's networks see and its models are written
/// for unless asked otherwise: v4, v3's with widths on a log scale. (Every
/// site-independent observation has the same nine features, so a v2 or v3
/// model is a starting point for a search on another, though two of v4's
/// features mean something else.)
pub const SIGHT: Sight = Sight::V4;

/// A network of `shape` with `params` as the model it would ship as, seeing
/// [`SIGHT`].
pub fn model(shape: &Shape, params: &[f64], notes: &[(&str, String)]) -> Result<Model, String> {
    model_seeing(SIGHT, shape, params, notes)
}

/// The same, seeing `sight`.
pub fn model_seeing(
    sight: Sight,
    shape: &Shape,
    params: &[f64],
    notes: &[(&str, String)],
) -> Result<Model, String> {
    let bytes = export::actor(&shape.layers(params), sight.name(), notes);
    Model::from_bytes(Path::new("evolved.onnx"), &bytes, None, None).map_err(|e| e.to_string())
}

/// How long and how wide to search.
#[derive(Debug, Clone)]
pub struct Options {
    pub shape: Shape,
    /// What its networks see (v2, v3 or v4).
    pub sight: Sight,
    /// Proposals a generation (`None`: CMA-ES's default for the size).
    pub population: Option<usize>,
    /// Where the search starts (`None`: the zero network), and the initial
    /// step size around it.
    pub start: Option<Vec<f64>>,
    pub sigma: f64,
    pub seed: u64,
    pub generations: usize,
    pub time: Duration,
    /// What the loss counts beyond the worst user.
    pub loss: Loss,
    /// Score each generation on this many windows a workload, drawn anew
    /// every generation (`None`: all of them, the same throughout).
    pub redraw: Option<usize>,
    /// Cells never searched on: the network kept is the generation mean
    /// with the lowest loss on them (`None`: on the whole arena with
    /// `redraw`, else the best proposal seen).
    pub validation: Option<Arc<Arena>>,
    /// The rule the searched network chooses through (`shortlist.rs`): it
    /// plays every window under it, and is written with it.
    pub shortlist: Option<Shortlist>,
    /// The horizon it keeps its choices within, when it is searched for
    /// committed choices and its start had one (`horizon.rs`): it plays
    /// under it.
    pub horizon: Option<Horizon>,
    /// Its backlog rule, likewise (`backlog.rs`): played while it has a
    /// shortlist to widen.
    pub backlog: Option<Backlog>,
}

impl Options {
    /// The network of `params` as the search plays it.
    fn network(&self, params: &[f64]) -> Result<Model, String> {
        let notes: Vec<(&str, String)> = self
            .shortlist
            .iter()
            .map(|s| (crate::model::SHORTLIST, s.to_string()))
            .collect();
        model_seeing(self.sight, &self.shape, params, &notes).map(|m| {
            m.with_horizon(self.horizon)
                .with_backlog(self.backlog.filter(|_| self.shortlist.is_some()))
        })
    }
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

/// Searches for the network of `opts.shape` with the lowest loss on
/// `arena`, until `opts.generations` or `opts.time`, or until `progress`,
/// told of every generation, breaks: the search then ends with what it
/// has kept so far, as it would at its budget. With `opts.redraw`, a generation's `best` is the
/// lowest loss on all the windows of any generation's mean so far (with
/// `opts.validation`, on the validation cells), and `this` the
/// generation's best on its own draw.
pub fn evolve(
    arena: &Arena,
    opts: &Options,
    mut progress: impl FnMut(&Generation) -> ControlFlow<()>,
) -> Result<Evolved, String> {
    let failure: RefCell<Option<String>> = RefCell::new(None);
    let dims = opts.shape.params();
    // The population is set here (CMA-ES's default for the size unless
    // asked), so that the objective knows which generation it scores for.
    let lambda = opts
        .population
        .map_or(4 + (3.0 * (dims as f64).ln()).floor() as usize, |n| {
            n.max(4)
        });
    let evaluated = Counter::new(0usize);
    let score = |params: &[f64], picks: Option<&[Vec<usize>]>| {
        let cells = opts.network(params).and_then(|m| {
            let m = Arc::new(m);
            match picks {
                Some(p) => arena.cells_on(&m, "evolved", p),
                None => arena.cells(&m, "evolved"),
            }
        });
        match cells {
            Ok(cells) => opts.loss.of(&cells),
            Err(e) => {
                failure.borrow_mut().get_or_insert(e);
                f64::MAX
            }
        }
    };
    let objective = |x: &DVector<f64>| {
        let round = evaluated.get() / lambda;
        evaluated.set(evaluated.get() + 1);
        match opts.redraw {
            Some(per) => score(
                x.as_slice(),
                Some(&arena.draw(per, opts.seed, round as u64)),
            ),
            None => score(x.as_slice(), None),
        }
    };
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
    let mut cma = CMAESOptions::new(start.clone(), opts.sigma)
        .seed(opts.seed)
        .max_generations(opts.generations.max(1))
        .max_time(opts.time)
        .population_size(lambda)
        .build(objective)
        .map_err(|e| format!("CMA-ES options: {e:?}"))?;
    let started = Instant::now();
    let mut curve = Vec::new();
    // With redraws: the best mean on the whole pool (the start counts).
    // The loss a generation's mean is kept by: on the validation cells, or
    // on every window of the arena.
    let judged = |params: &[f64]| match &opts.validation {
        Some(check) => {
            let cells = opts
                .network(params)
                .and_then(|m| check.cells(&Arc::new(m), "evolved"));
            match cells {
                Ok(cells) => opts.loss.of(&cells),
                Err(e) => {
                    failure.borrow_mut().get_or_insert(e);
                    f64::MAX
                }
            }
        }
        None => score(params, None),
    };
    let mut kept =
        (opts.redraw.is_some() || opts.validation.is_some()).then(|| (judged(&start), start));
    loop {
        let done = cma.next();
        if let Some(e) = failure.borrow().clone() {
            return Err(e);
        }
        let this = cma.current_best_individual().map_or(f64::MAX, |b| b.value);
        let best = match &mut kept {
            Some((loss, params)) => {
                let mean = cma.mean().as_slice().to_vec();
                let whole = judged(&mean);
                if whole < *loss {
                    (*loss, *params) = (whole, mean);
                }
                *loss
            }
            None => cma.overall_best_individual().map_or(f64::MAX, |b| b.value),
        };
        if let Some(e) = failure.borrow().clone() {
            return Err(e);
        }
        let generation = Generation {
            generation: cma.generation(),
            evaluations: cma.function_evals(),
            best,
            this,
            elapsed: started.elapsed(),
        };
        let asked = progress(&generation);
        curve.push(generation);
        if done.is_some() || asked.is_break() {
            break;
        }
    }
    let (params, loss) = match kept {
        Some((loss, params)) => (params, loss),
        None => {
            let best = cma
                .overall_best_individual()
                .ok_or("the search evaluated nothing")?;
            (best.point.as_slice().to_vec(), best.value)
        }
    };
    Ok(Evolved {
        params,
        loss,
        curve,
    })
}

/// A searched network and its start, each judged on the same fresh draws
/// of windows ([`confirm`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Confirmed {
    /// The start's loss on each draw, and the searched network's.
    pub start: Vec<f64>,
    pub found: Vec<f64>,
}

impl Confirmed {
    /// The draws on which the searched network's loss is the lower.
    pub fn wins(&self) -> usize {
        self.found
            .iter()
            .zip(&self.start)
            .filter(|(f, s)| f < s)
            .count()
    }

    fn mean(losses: &[f64]) -> f64 {
        losses.iter().sum::<f64>() / losses.len().max(1) as f64
    }

    pub fn start_mean(&self) -> f64 {
        Confirmed::mean(&self.start)
    }

    pub fn found_mean(&self) -> f64 {
        Confirmed::mean(&self.found)
    }

    /// Whether the search's network is better than its start over the
    /// draws: a lower mean loss. A network kept because it scored best on
    /// one draw of validation windows is partly kept for that draw (with
    /// hundreds of generations to choose from, some mean is lucky there);
    /// on draws it was not chosen by, a network that only fits its draw is
    /// no better than where it started.
    pub fn better(&self) -> bool {
        !self.found.is_empty() && self.found_mean() < self.start_mean()
    }
}

/// Judges the network `found` and the start `start` (both of `opts.shape`,
/// seeing `opts.sight`) with `opts.loss` on each of `draws`: arenas of the
/// validation traces' windows drawn with other seeds than the one the
/// search kept its network by.
pub fn confirm(
    draws: &[Arena],
    opts: &Options,
    start: &[f64],
    found: &[f64],
) -> Result<Confirmed, String> {
    let loss = |arena: &Arena, params: &[f64]| -> Result<f64, String> {
        let net = Arc::new(opts.network(params)?);
        Ok(opts.loss.of(&arena.cells(&net, "evolved")?))
    };
    let mut confirmed = Confirmed {
        start: Vec::with_capacity(draws.len()),
        found: Vec::with_capacity(draws.len()),
    };
    for arena in draws {
        confirmed.start.push(loss(arena, start)?);
        confirmed.found.push(loss(arena, found)?);
    }
    Ok(confirmed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_is_confirmed_by_its_mean_over_the_draws() {
        // Lower on two draws of three, but by less than it is higher on
        // the third: not better.
        let c = Confirmed {
            start: vec![0.10, 0.10, 0.10],
            found: vec![0.09, 0.08, 0.20],
        };
        assert_eq!(c.wins(), 2);
        assert!(!c.better());
        let c = Confirmed {
            start: vec![0.10, 0.10, 0.10],
            found: vec![0.11, 0.02, 0.05],
        };
        assert_eq!(c.wins(), 2);
        assert!(c.better());
        // A tie is no improvement; no draws confirm nothing.
        let tie = Confirmed {
            start: vec![0.1],
            found: vec![0.1],
        };
        assert!(!tie.better());
        assert!(
            !Confirmed {
                start: vec![],
                found: vec![]
            }
            .better()
        );
    }

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

    /// A start network folded at feature 6 scores every slot as it did
    /// where that feature was the value folded in, whatever it is now.
    #[test]
    fn a_folded_input_is_read_as_its_value() {
        let shape = Shape { hidden: vec![5, 3] };
        let params: Vec<f64> = (0..shape.params())
            .map(|i| ((i * 37 % 23) as f64 - 11.0) / 7.0)
            .collect();
        let layers = shape.layers(&params);
        let mut folded = layers.clone();
        fold_input(&mut folded, 5, 1.0);
        // One slot's score, as the exported graph must compute it.
        let score = |layers: &[Dense], x: &[f32]| export::tests::forward(layers, x) as f32;
        let slot = |sixth: f32| -> Vec<f32> {
            (0..FEATURES)
                .map(|f| if f == 5 { sixth } else { f as f32 / 9.0 - 0.3 })
                .collect()
        };
        let before = score(&layers, &slot(1.0));
        for sixth in [0.0, 0.3, 1.0] {
            assert!((score(&folded, &slot(sixth)) - before).abs() < 1e-5);
        }
        // The unfolded network did read it.
        assert!((score(&layers, &slot(0.0)) - before).abs() > 1e-3);
        // Only the first layer's row for input 6 is touched.
        assert!(folded[0].w[5 * 5..6 * 5].iter().all(|&w| w == 0.0));
        assert_eq!(folded[0].w[..25], layers[0].w[..25]);
        assert_eq!(folded[1..], layers[1..]);
    }
}
