//! Rollouts: the policy plays episodes of a trace and every decision is
//! recorded for training.
//!
//! An episode is a window of `len` consecutive jobs (default 128, the
//! fairness env's) of one of the workloads (in turn), its start drawn as
//! the reference draws them, replayed in the reference model or in slurp's
//! own (the runtime core, as `slurp FILE` schedules: `chooser.rs` records
//! there); at each decision the network's masked logits
//! give a softmax over the slots, from which the action is sampled (or the
//! best taken, `greedy`). The reward is terminal: minus the per-user mean
//! bounded slowdown aggregated over users (worst user by default, as the
//! fairness variant trains). Episodes are independent: they run in
//! parallel, each from its own seeded generator, so the output depends on
//! the seed only.

use std::fs::File;
use std::io::{self, BufWriter};
use std::path::Path;

use npyz::WriterBuilder;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use slurp_runtime::core::{Order, Time};
use slurp_sim::metrics::Metrics;
use slurp_sim::reference::{self, Decision, run_choosing};
use slurp_sim::window::Draw;
use slurp_sim::{Model as SimModel, Window, Workload};

use crate::chooser::{Learned, Who};
use crate::model::{Model, ModelError, Sight};
use crate::observe::{FEATURES, Normalisers, Observation, SLOTS, Users, observe};
use crate::observe_v2::{Follow, rank};

/// What a policy sees at the decisions of one reference-model episode.
#[derive(Debug)]
pub enum Eyes {
    V1(Normalisers, Users),
    V2(Box<Follow>),
}

impl Eyes {
    pub fn new(sight: Sight, norm: &Normalisers) -> Eyes {
        match sight {
            Sight::V1 => Eyes::V1(*norm, Users::default()),
            _ => Eyes::V2(Box::new(Follow::new(sight))),
        }
    }

    pub fn observe(&mut self, d: &Decision<'_>) -> Observation {
        match self {
            Eyes::V1(norm, users) => observe(d, norm, users),
            Eyes::V2(follow) => follow.observe(d),
        }
    }
    /// Whether the jobs that ended by the last observation show exact
    /// estimates (`exact.rs`); v1 keeps no such account.
    pub fn exact(&self) -> bool {
        match self {
            Eyes::V1(..) => false,
            Eyes::V2(follow) => follow.standing().exact(),
        }
    }
}

/// How the users' mean bounded slowdowns become one score (the reference's
/// `user_score_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Score {
    Mean,
    /// The worst user's (the fairness objective).
    #[default]
    Worst,
    Best,
}

impl Score {
    /// The users' mean bounded slowdowns of `metrics` made one.
    pub fn of(self, metrics: &Metrics) -> f64 {
        let per_user = metrics.per_user.iter().map(|u| u.avg_bounded_slowdown);
        match self {
            Score::Mean => per_user.sum::<f64>() / metrics.per_user.len().max(1) as f64,
            Score::Worst => per_user.fold(0.0, f64::max),
            Score::Best => per_user.fold(f64::INFINITY, f64::min),
        }
    }
}

impl std::str::FromStr for Score {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "mean" => Ok(Score::Mean),
            "worst" => Ok(Score::Worst),
            "best" => Ok(Score::Best),
            _ => Err(format!("unknown score `{s}` (mean, worst, best)")),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Options {
    pub trajectories: usize,
    /// Jobs per episode.
    pub len: usize,
    pub seed: u64,
    pub backfill: bool,
    pub score: Score,
    /// Take the best slot instead of sampling.
    pub greedy: bool,
    /// Only windows where FCFS (reference model, no backfilling) reaches
    /// at least this average bounded slowdown: most windows of a real
    /// trace never queue, and a decision among one job teaches nothing.
    pub min_bsld: f64,
    /// Reward the score's improvement on this heuristic's of the same
    /// window instead of the score itself.
    pub baseline: Option<Order>,
    /// Windows kept for judging the model: no episode shares a job with
    /// one of them.
    pub hold_out: Vec<Window>,
    /// Which simulation model plays the episodes.
    pub model: SimModel,
    /// What a teacher's episodes are observed with (a network sees what
    /// it was trained on).
    pub sight: Sight,
    /// Every other episode backfills (EASY), whatever `backfill` says: one
    /// policy trained for both uses.
    pub mixed: bool,
}

/// Who plays the episodes.
#[derive(Debug, Clone, Copy)]
pub enum Player<'a> {
    /// The network, its slot sampled from its distribution (or its best).
    Network(&'a Model),
    /// A heuristic, its best slot recorded as the action with log-prob 0:
    /// what the trainer clones for a warm start.
    Teacher(Order),
}

/// One decision.
#[derive(Debug, Clone)]
pub struct Step {
    pub features: Vec<f32>,
    pub mask: Vec<f32>,
    pub action: i64,
    pub logp: f32,
}

/// One episode.
#[derive(Debug, Clone)]
pub struct Trajectory {
    /// Which of the workloads it played (its position in the list).
    pub workload: usize,
    /// Whether it backfilled.
    pub backfill: bool,
    pub window: Window,
    pub steps: Vec<Step>,
    /// Minus the aggregated per-user score (plus the baseline's score when
    /// there is one), given at the last step.
    pub reward: f32,
    pub metrics: Metrics,
}

/// The random draws of a sampled replay of `window`: one stream per seed
/// and window, so windows replayed in any order draw the same.
pub fn draws(seed: u64, window: Window) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed ^ (window.start as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// The best slot of masked `logits` (the first of equals).
pub fn best(logits: &[f32]) -> usize {
    logits
        .iter()
        .enumerate()
        .fold(0, |best, (i, &l)| if l > logits[best] { i } else { best })
}

/// The slot to take from masked `logits`: the best, or drawn with `rng`.
/// A choice that is not recorded needs no probabilities when it is not
/// drawn (a decision's 128 `exp`s).
pub fn pick(logits: &[f32], rng: Option<&mut ChaCha8Rng>) -> usize {
    match rng {
        None => best(logits),
        Some(rng) => choose(logits, Some(rng)).0,
    }
}

/// The slot to take from masked `logits`, and its log-probability (what a
/// trainer records; a choice that is not recorded is [`pick`]'s).
pub fn choose(logits: &[f32], rng: Option<&mut ChaCha8Rng>) -> (usize, f32) {
    let top = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let weights: Vec<f64> = logits.iter().map(|&l| ((l - top) as f64).exp()).collect();
    let total: f64 = weights.iter().sum();
    let pick = match rng {
        None => best(logits),
        Some(rng) => {
            let mut u = rng.random::<f64>() * total;
            let mut pick = weights.len() - 1;
            for (i, &w) in weights.iter().enumerate() {
                if u < w {
                    pick = i;
                    break;
                }
                u -= w;
            }
            pick
        }
    };
    (pick, (weights[pick] / total).ln() as f32)
}

/// An episode in slurp's model: the runtime core with the recording
/// chooser, EASY around its choice when `opts.backfill`.
fn episode_slurp(
    player: Player<'_>,
    workload: &Workload,
    window: Window,
    opts: &Options,
    rng: Option<ChaCha8Rng>,
) -> Result<Trajectory, ModelError> {
    let who = match player {
        Player::Network(model) => {
            Who::Network(std::sync::Arc::new(model.clone()).in_slurp(opts.backfill))
        }
        Player::Teacher(order) => Who::Teacher(order, opts.sight),
    };
    let learned = Learned::recording(who, workload, window, rng);
    let (schedule, mut learned) = crate::chooser::play(learned, workload, window, opts.backfill);
    if let Some(e) = learned.failure.take() {
        return Err(e);
    }
    let metrics = Metrics::of(workload, &schedule, SimModel::Slurp);
    let baseline = opts.baseline.map_or(0.0, |order| {
        let policy = slurp_runtime::core::PolicyKind::new(
            order,
            if opts.backfill {
                slurp_runtime::core::Backfill::Easy
            } else {
                slurp_runtime::core::Backfill::None
            },
        );
        let own = slurp_sim::simulate(workload, window, policy, SimModel::Slurp);
        opts.score.of(&Metrics::of(workload, &own, SimModel::Slurp))
    });
    Ok(Trajectory {
        workload: 0,
        backfill: opts.backfill,
        window,
        steps: learned.steps.take().unwrap_or_default(),
        reward: (baseline - opts.score.of(&metrics)) as f32,
        metrics,
    })
}

fn episode(
    player: Player<'_>,
    norm: &Normalisers,
    workload: &Workload,
    window: Window,
    opts: &Options,
    mut rng: Option<ChaCha8Rng>,
) -> Result<Trajectory, ModelError> {
    if opts.model == SimModel::Slurp {
        return episode_slurp(player, workload, window, opts, rng);
    }
    let sight = match player {
        Player::Network(model) => model.sight,
        Player::Teacher(_) => opts.sight,
    };
    let mut eyes = Eyes::new(sight, norm);
    let mut steps = Vec::new();
    let mut failure = None;
    let schedule = run_choosing(workload, window, opts.backfill, |d| {
        let obs = eyes.observe(d);
        let chosen = match player {
            // The teacher's best among the jobs the network is shown;
            // `fairshare`'s ranks users by the usage the observation keeps
            // (least first), then takes the earliest job.
            Player::Teacher(order) => {
                let now = d.now;
                let usage = match (&eyes, order) {
                    (Eyes::V2(follow), Order::Fairshare) => {
                        Some(follow.standing().shares.at(Time(now * 1000)))
                    }
                    _ => None,
                };
                let slot = (0..obs.jobs.len())
                    .min_by_key(|&s| {
                        let j = obs.jobs[s];
                        let job = &d.jobs[j as usize];
                        let first = usage.as_ref().map_or(0, |u| rank(u, job.user));
                        (first, reference::key(order, job, now), j)
                    })
                    .unwrap_or(0);
                Ok((slot, 0.0))
            }
            Player::Network(model) => model.logits(&obs).map(|logits| {
                let (slot, logp) = choose(&logits, rng.as_mut());
                // A padded slot can win only if the network ignores the
                // mask; fall back to the first real one.
                (if slot < obs.jobs.len() { slot } else { 0 }, logp)
            }),
        };
        match chosen {
            Ok((slot, logp)) => {
                let job = obs.jobs[slot];
                steps.push(Step {
                    features: obs.features,
                    mask: obs.mask,
                    action: slot as i64,
                    logp,
                });
                job
            }
            Err(e) => {
                failure.get_or_insert(e);
                d.queue[0]
            }
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    let metrics = Metrics::of(workload, &schedule, SimModel::Reference);
    // A heuristic's score of the same window is a baseline that depends
    // on the window only, not on the actions: subtracting it leaves the
    // policy gradient as it was and removes the spread between windows
    // (a quiet window's worst user is at 1, a busy one's in the hundreds).
    let baseline = opts.baseline.map_or(0.0, |order| {
        let own = reference::run(workload, window, order, opts.backfill);
        opts.score
            .of(&Metrics::of(workload, &own, SimModel::Reference))
    });
    Ok(Trajectory {
        workload: 0,
        backfill: opts.backfill,
        window,
        steps,
        reward: (baseline - opts.score.of(&metrics)) as f32,
        metrics,
    })
}

/// The schedule the policy makes of `window`: its best slot at every
/// decision (the deterministic way to judge a model), or with
/// `sample: Some(seed)` a slot drawn from its distribution, the same draws
/// for the same seed and window. A model that carries a network for
/// committed choices ([`Model::committed`], one for each backfilling mode
/// or one for both) decides with it here, within its horizon when it has
/// one (`horizon.rs`), with its backlog rule's margin while the queue is
/// deep (`backlog.rs`), through its shortlist for exact estimates once the
/// ended jobs show them (`exact.rs`).
pub fn replay(
    model: &Model,
    workload: &Workload,
    window: Window,
    backfill: bool,
    sample: Option<u64>,
) -> Result<slurp_sim::Schedule, ModelError> {
    // Here a choice is kept until it starts.
    let model = model.committed(backfill);
    let mut eyes = Eyes::new(model.sight, &model.normalisers);
    let mut failure = None;
    let mut rng = sample.map(|seed| draws(seed, window));
    let schedule = run_choosing(workload, window, backfill, |d| {
        // A queue of one leaves no choice (the mask rules out the rest):
        // neither the observation nor the network is needed, and most
        // decisions of a real trace are such (v2's standing catches up on
        // the next observation).
        if let [only] = d.queue[..] {
            return only;
        }
        let obs = eyes.observe(d);
        match model.logits(&obs) {
            Ok(logits) => {
                // On a deep backlog the shortlist hands wider near-ties
                // to its order (`backlog.rs`); once estimates prove exact
                // it is the network's shortlist for them (`exact.rs`).
                let list = match (model.shortlist_now(eyes.exact()), model.backlog()) {
                    (Some(list), Some(backlog)) if backlog.deep(d) => Some(backlog.widen(list)),
                    (list, _) => list,
                };
                let mut choose = |logits: &[f32]| {
                    let slot = pick(logits, rng.as_mut());
                    match list {
                        Some(list) => {
                            list.pick(logits, slot, &obs, d.jobs, d.now, d.machine.procs())
                        }
                        None => slot,
                    }
                };
                let mut slot = choose(&logits);
                if let Some(horizon) = model.horizon() {
                    slot = horizon.keep(d, &obs, &logits, slot, choose);
                }
                obs.jobs.get(slot).copied().unwrap_or(obs.jobs[0])
            }
            Err(e) => {
                failure.get_or_insert(e);
                d.queue[0]
            }
        }
    });
    match failure {
        Some(e) => Err(e),
        None => Ok(schedule),
    }
}

/// `opts.trajectories` windows drawn as the reference draws them, keeping
/// those where FCFS reaches `opts.min_bsld` (all when it is 1 or less) and
/// that share no job with a window of `opts.hold_out`.
pub fn busy_windows(workload: &Workload, opts: &Options) -> Result<Vec<Window>, String> {
    let draw = Draw {
        count: opts.trajectories,
        len: opts.len,
        seed: opts.seed,
        within: None,
        min_bsld: opts.min_bsld,
    };
    draw.windows(workload, |w| !opts.hold_out.iter().any(|h| h.overlaps(w)))
        .map_err(|e| {
            if opts.hold_out.is_empty() {
                e
            } else {
                format!("{e}; windows that share a job with the held-out ones are skipped")
            }
        })
}

/// Plays `opts.trajectories` episodes, in parallel, with `player`: the
/// workloads take turns (the first gets the odd one out), each drawing its
/// windows with its own seed (`opts.seed` + its position), so adding a
/// workload leaves the others' windows as they were. A v1 network sees
/// through its own normalisers; a v1 teacher through each workload's.
pub fn rollout(
    player: Player<'_>,
    workloads: &[Workload],
    opts: &Options,
) -> Result<Vec<Trajectory>, String> {
    // An episode records the network's own draws and their probabilities
    // for PPO; a shortlist would start other jobs than those recorded.
    if let Player::Network(model) = player
        && model.any_shortlist()
    {
        return Err(
            "the model chooses through a shortlist, and an episode records the network's own choices for PPO: roll out a model without one (`slurp policy shortlist MODEL --clear -o PLAIN.onnx`), or search with `slurp policy train --shortlist`"
                .into(),
        );
    }
    let n = workloads.len().max(1);
    let mut jobs: Vec<(usize, Window)> = Vec::new();
    for (w, workload) in workloads.iter().enumerate() {
        let count = opts.trajectories / n + usize::from(w < opts.trajectories % n);
        if count == 0 {
            continue;
        }
        let own = Options {
            trajectories: count,
            seed: opts.seed.wrapping_add(w as u64),
            ..opts.clone()
        };
        let windows = busy_windows(workload, &own).map_err(|e| {
            if workloads.len() > 1 {
                format!("workload {}: {e}", w + 1)
            } else {
                e
            }
        })?;
        jobs.extend(windows.into_iter().map(|win| (w, win)));
    }
    let norms: Vec<Normalisers> = workloads
        .iter()
        .map(|w| match player {
            Player::Network(model) => model.normalisers,
            Player::Teacher(_) => Normalisers::of(w),
        })
        .collect();
    let played = in_parallel(jobs.len(), |i| {
        let rng = (!opts.greedy).then(|| {
            ChaCha8Rng::seed_from_u64(
                opts.seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            )
        });
        let (w, window) = jobs[i];
        let own;
        let opts = if opts.mixed {
            own = Options {
                backfill: i % 2 == 1,
                ..opts.clone()
            };
            &own
        } else {
            opts
        };
        episode(player, &norms[w], &workloads[w], window, opts, rng)
            .map(|t| Trajectory { workload: w, ..t })
    });
    played
        .into_iter()
        .map(|t| t.map_err(|e| e.to_string()))
        .collect()
}

/// `f(0)`, …, `f(n − 1)` on all cores (item `i` on thread `i mod
/// threads`), in order.
pub(crate) fn in_parallel<R: Send>(n: usize, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |t| t.get())
        .min(n.max(1));
    let mut chunks: Vec<std::vec::IntoIter<R>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|k| {
                let f = &f;
                s.spawn(move || (k..n).step_by(threads).map(f).collect::<Vec<R>>())
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|e| std::panic::resume_unwind(e))
                    .into_iter()
            })
            .collect()
    });
    (0..n)
        .map(|i| match chunks[i % threads].next() {
            Some(r) => r,
            None => unreachable!("thread {} computed item {i}", i % threads),
        })
        .collect()
}

/// The arrays [`write`] makes, in that order.
pub const ARRAYS: [&str; 6] = [
    "obs.npy",
    "mask.npy",
    "action.npy",
    "logp.npy",
    "reward.npy",
    "episode.npy",
];

fn npy<T: npyz::AutoSerialize + Copy>(
    dir: &Path,
    name: &str,
    shape: &[u64],
    data: impl IntoIterator<Item = T>,
) -> io::Result<()> {
    let file = BufWriter::new(File::create(dir.join(name))?);
    let mut writer = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(file)
        .begin_nd()?;
    writer.extend(data)?;
    writer.finish()
}

/// Writes the steps of `trajectories` to `dir` as NumPy arrays: `obs.npy`
/// f32 `[T, 128, 9]`, `mask.npy` f32 `[T, 128]`, `action.npy` i64 `[T]`,
/// `logp.npy` f32 `[T]`, `reward.npy` f32 `[T]` (the episode's reward on its
/// last step, 0 elsewhere), `episode.npy` i32 `[T]`; and `episodes.json`,
/// each episode's window, reward and metrics.
pub fn write(dir: &Path, trajectories: &[Trajectory]) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let steps = || trajectories.iter().flat_map(|t| &t.steps);
    let n = steps().count() as u64;
    npy(
        dir,
        "obs.npy",
        &[n, SLOTS as u64, FEATURES as u64],
        steps().flat_map(|s| s.features.iter().copied()),
    )?;
    npy(
        dir,
        "mask.npy",
        &[n, SLOTS as u64],
        steps().flat_map(|s| s.mask.iter().copied()),
    )?;
    npy(dir, "action.npy", &[n], steps().map(|s| s.action))?;
    npy(dir, "logp.npy", &[n], steps().map(|s| s.logp))?;
    let rewards = trajectories.iter().flat_map(|t| {
        let last = t.steps.len().saturating_sub(1);
        (0..t.steps.len()).map(move |i| if i == last { t.reward } else { 0.0 })
    });
    npy(dir, "reward.npy", &[n], rewards)?;
    let episodes = trajectories
        .iter()
        .enumerate()
        .flat_map(|(e, t)| std::iter::repeat_n(e as i32, t.steps.len()));
    npy(dir, "episode.npy", &[n], episodes)?;
    let summary: Vec<serde_json::Value> = trajectories
        .iter()
        .map(|t| {
            serde_json::json!({
                "workload": t.workload,
                "window": t.window,
                "backfill": t.backfill,
                "steps": t.steps.len(),
                "reward": t.reward,
                "avg_bounded_slowdown": t.metrics.avg_bounded_slowdown,
                "worst_user_bounded_slowdown": t.metrics.worst_user_bounded_slowdown,
                "jain": t.metrics.jain,
            })
        })
        .collect();
    let text = serde_json::to_string_pretty(&summary).map_err(io::Error::other)?;
    std::fs::write(dir.join("episodes.json"), text)
}
