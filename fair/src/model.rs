//! A learned policy's network, loaded and checked with tract and evaluated
//! in-process: by tract's plan, or directly (`mlp.rs`) when it is the
//! trainer's per-slot MLP and gives tract's logits on probe observations.
//!
//! The contract (what the trainer exports, checked at load): an ONNX model
//! with two `f32` inputs, observations `[1, 128, 9]` and the mask `[1, 128]`,
//! and one output, the masked logits `[1, 128]` (a padded slot's logit is
//! pushed down by 1e6, so it never wins). Which observation it was trained
//! on travels with it: the ONNX metadata `slurp.observation` (`v2`, `v3` or
//! `v4`, the site-independent ones, `observe_v2.rs`) or, for v1 models (`observe.rs`),
//! the trace's normalisers in `MODEL.onnx.json`; that file may also say
//! `{"observation": "v2"}`.
//!
//! A model may carry a second network, for schedulers that keep a choice
//! until it starts (RLScheduler's reference model, `rollout.rs`), in the
//! metadata [`COMMITTED`]: its per-slot MLP's layers as JSON (seeing the
//! model's observation, or the one [`COMMITTED_SIGHT`] names), and a third
//! for such choices under EASY backfilling ([`COMMITTED_EASY`]), where the
//! fairest rule differs (a reservation keeps the head's place, so turns
//! between users can be kept without idling the machine). Slurp's own
//! model, where the head is chosen again at every instant, uses the graph
//! itself, and under EASY the network [`SLURP_EASY`] names when the model
//! carries one (its observation in [`SLURP_EASY_SIGHT`]): real `+easy` runs
//! schedule there. Each network may choose through a shortlist
//! (`shortlist.rs`, metadata [`SHORTLIST`] and its kin), and each network
//! for committed choices within a horizon (`horizon.rs`,
//! [`COMMITTED_HORIZON`], [`COMMITTED_EASY_HORIZON`]) and with a wider
//! shortlist on a deep backlog (`backlog.rs`, [`COMMITTED_BACKLOG`],
//! [`COMMITTED_EASY_BACKLOG`]). Each network seeing v2 or later may carry a
//! second shortlist for where the ended jobs show exact estimates
//! (`exact.rs`, [`EXACT_SHORTLIST`] and its kin). Tools that only read
//! ONNX see an ordinary policy network.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tract_onnx::prelude::*;

use crate::backlog::Backlog;
use crate::horizon::Horizon;
use crate::mlp::SlotMlp;
use crate::observe::{FEATURES, Normalisers, Observation, PADDING, SLOTS};
use crate::shortlist::Shortlist;

/// Why a model could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{path}: cannot read the model: {reason}")]
    Unreadable { path: PathBuf, reason: String },
    #[error(
        "{path}: not a policy network slurp can use: {reason} (expected inputs obs f32[1,128,9] and mask f32[1,128], one output f32[1,128])"
    )]
    Shape { path: PathBuf, reason: String },
    #[error("{path}: the normalisers beside the model: {reason}")]
    Normalisers { path: PathBuf, reason: String },
    /// A network the model carries beside its own, under metadata `key`.
    #[error("{path}: its {what} (metadata `{key}`) cannot be used: {reason}")]
    Carried {
        path: PathBuf,
        /// Which network: for committed choices, or for slurp's model under EASY.
        what: &'static str,
        key: String,
        reason: String,
    },
    /// A shortlist (metadata `key`) that is not `ORDER:MARGIN[:WIDE]`.
    #[error("{path}: its shortlist (metadata `{key}`) cannot be used: {reason}")]
    Shortlist {
        path: PathBuf,
        key: String,
        reason: String,
    },
    /// A horizon (metadata `key`) that is not a positive share, or that
    /// has no network for committed choices under EASY to apply to.
    #[error("{path}: its horizon (metadata `{key}`) cannot be used: {reason}")]
    Horizon {
        path: PathBuf,
        key: String,
        reason: String,
    },
    /// A backlog rule (`backlog.rs`) that cannot be read, or has no
    /// network for committed choices, or no shortlist, to apply to.
    #[error("{path}: its backlog rule (metadata `{key}`) cannot be used: {reason}")]
    Backlog {
        path: PathBuf,
        key: String,
        reason: String,
    },
    #[error("evaluating the model: {0}")]
    Run(String),
}

/// Which observation a model was trained on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sight {
    /// RL-SPEC's, features scaled by one trace's maxima (`observe.rs`).
    V1,
    /// Site-independent ratios (`observe_v2.rs`).
    V2,
    /// v2's ratios over a wider choice of slots when the queue is long
    /// (`observe_v2::wide_slots`: the oldest jobs and each user's earliest
    /// are shown too), each user's standing counting its waiting jobs.
    V3,
    /// v3 with each job's width on a log scale: its share of the
    /// instance's cores and its width against the other shown jobs'
    /// (`observe_v2::Widths::Logs`), so that a one-core job and a
    /// 64-core one differ on an instance of thousands of cores.
    V4,
    /// v4 with a user's place in fair-share turns among the shown jobs'
    /// users as feature 1 (`observe_v2::observe`), so that `fairshare`'s
    /// choice — the first user's earliest job — is one a network can make.
    V5,
    /// v5 with feature 6 the job's urgency to its user: how fast its wait
    /// raises its user's mean bounded slowdown (`1 / (max(r, 10)·n_u)`, `n_u`
    /// the user's started and waiting jobs) against the shown jobs' most
    /// urgent, instead of the user's fair-share factor, which is near 1
    /// for every user of a site of many. (Not `v6`: that name was an
    /// EASY-reservation feature tried and reverted (MODEL_CARD.md, v12),
    /// and a network saved with it, `fair/trainer/runs/v12-reservation-e1.onnx`,
    /// must be refused as unknown, not read as this.)
    V7,
    /// v5 with feature 8 the queue's cost of the job: the waiting jobs'
    /// summed rate of bounded slowdown (`Q = Σ 1/max(r_i, 10)` over the
    /// whole queue) times the share of the machine the job would hold for
    /// its estimate (`n/C · max(r, 10)`), on a log scale — how much the
    /// queue's total slowdown grows while it runs, where v5's features are
    /// all relative to the shown jobs and cannot tell a busy queue from a
    /// quiet one. It replaces the width against the shown jobs', which
    /// fair-v5's networks for slurp's model read not at all.
    V8,
    /// v5 with feature 3, the slowdown a job would have if it started now,
    /// reckoned with its run time predicted from its user's history — the
    /// mean of the user's last two ended jobs' run times, at most the
    /// estimate (Tsafrir, Etsion and Feitelson, 2007) — instead of its
    /// estimate: a user whose jobs ask for hours and run for seconds is
    /// seen falling behind as its slowdown will be scored. The estimate
    /// while the user has no job ended, so a v5 network reads it as v5.
    V9,
    /// v9 with feature 7 how little of the user's record is checked: `1 /
    /// (1 + e)`, `e` the user's jobs that have ended — 1 for a user none of
    /// whose jobs has ended (its estimates unchecked, and v9's predicted
    /// run its estimate), ½ after one, towards 0 for a long record. Among
    /// the jobs v9 networks under EASY serve worse than `fairshare` are
    /// light users' short jobs asking for hours before any of their user's
    /// jobs has ended. It replaces the share of the cores the user's
    /// running jobs hold, the feature fair-v15's network for EASY loses
    /// least without (v55: its validation loss rises 0.022 with it folded,
    /// 0.049 and 0.164 with feature 8 or 6). Three searches from fair-v15
    /// seeing it were no fairer on fresh workloads (v55), so no built-in
    /// model sees it.
    V10,
}

impl Sight {
    /// Every observation, oldest first.
    pub const ALL: [Sight; 9] = [
        Sight::V1,
        Sight::V2,
        Sight::V3,
        Sight::V4,
        Sight::V5,
        Sight::V7,
        Sight::V8,
        Sight::V9,
        Sight::V10,
    ];

    /// The observation called `name` (one of [`Sight::ALL`], as
    /// [`Sight::name`] writes it), if this slurp knows it.
    pub fn from_name(name: &str) -> Option<Sight> {
        Sight::ALL.into_iter().find(|s| s.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Sight::V1 => "v1",
            Sight::V2 => "v2",
            Sight::V3 => "v3",
            Sight::V4 => "v4",
            Sight::V5 => "v5",
            Sight::V7 => "v7",
            Sight::V8 => "v8",
            Sight::V9 => "v9",
            Sight::V10 => "v10",
        }
    }

    /// Whether it shows v3's wider slots and each user's waiting jobs in
    /// its standing (`observe_v2::wide_slots`).
    pub fn wide(self) -> bool {
        !matches!(self, Sight::V1 | Sight::V2)
    }

    /// Whether feature 1 is the user's place in fair-share turns (v5, v7,
    /// v8, v9, v10) rather than the job's width.
    pub fn turns(self) -> bool {
        matches!(
            self,
            Sight::V5 | Sight::V7 | Sight::V8 | Sight::V9 | Sight::V10
        )
    }

    /// Whether feature 6 is the job's urgency to its user (v7) rather than
    /// the user's fair-share factor.
    pub fn urgency(self) -> bool {
        self == Sight::V7
    }

    /// Whether feature 8 is the queue's cost of the job (v8) rather than
    /// its width against the shown jobs'.
    pub fn queue_cost(self) -> bool {
        self == Sight::V8
    }

    /// Whether feature 3 reckons a job's run time from its user's ended
    /// jobs (v9, v10) rather than taking its estimate.
    pub fn predicts(self) -> bool {
        matches!(self, Sight::V9 | Sight::V10)
    }

    /// Whether feature 7 is how little of the user's record is checked
    /// (v10) rather than the share of the cores its running jobs hold.
    pub fn history(self) -> bool {
        self == Sight::V10
    }

    /// The inputs a network trained seeing `from` must stop reading to be
    /// searched seeing `self`, each with the value it is folded in at
    /// (`evolve::fold_input`): those that mean another thing here. Feature
    /// 6 between the fair-share factor and v7's urgency, at 1 (a user who
    /// used little, or the most urgent job); feature 7 between the running
    /// share and v10's unchecked record, at 0 (a user with nothing running,
    /// or a long record); feature 8 between the width against the shown
    /// jobs' and v8's queue cost, at 0 (a job of their mean width, or of no
    /// cost). Inputs 0-based.
    pub fn refolded(self, from: Sight) -> Vec<(usize, f32)> {
        let mut folds = Vec::new();
        if from.urgency() != self.urgency() {
            folds.push((5, 1.0));
        }
        if from.history() != self.history() {
            folds.push((6, 0.0));
        }
        if from.queue_cost() != self.queue_cost() {
            folds.push((7, 0.0));
        }
        folds
    }

    /// The names of the site-independent observations (all but v1), as a
    /// message lists them: `v2, v3, … or v8`.
    fn site_independent_names() -> String {
        let names: Vec<&str> = Sight::ALL[1..].iter().map(|s| s.name()).collect();
        let (last, rest) = names.split_last().expect("observations after v1");
        format!("{} or {last}", rest.join(", "))
    }

    /// How its features show a job's width.
    pub fn widths(self) -> crate::observe_v2::Widths {
        match self {
            Sight::V1 | Sight::V2 | Sight::V3 => crate::observe_v2::Widths::Shares,
            _ => crate::observe_v2::Widths::Logs,
        }
    }
}

type Plan = Arc<TypedRunnableModel>;

/// The metadata key of a model's network for committed choices.
pub const COMMITTED: &str = "slurp.committed";

/// The metadata key of the observation that network sees, when it is not
/// the model's own (any of [`Sight::ALL`] but v1).
pub const COMMITTED_SIGHT: &str = "slurp.committed.observation";

/// The metadata key of a model's network for committed choices under EASY
/// backfilling, when it has one of its own (else [`COMMITTED`] serves both).
pub const COMMITTED_EASY: &str = "slurp.committed.easy";

/// The observation that network sees, when it is not the model's own.
pub const COMMITTED_EASY_SIGHT: &str = "slurp.committed.easy.observation";

/// The metadata key of a model's network for slurp's own model (and real
/// runs) under EASY backfilling, when it has one of its own (else the
/// graph serves both modes).
pub const SLURP_EASY: &str = "slurp.easy";

/// The observation that network sees, when it is not the model's own.
pub const SLURP_EASY_SIGHT: &str = "slurp.easy.observation";

/// The metadata key of the shortlist the model's own network chooses
/// through (`shortlist.rs`), when it has one.
pub const SHORTLIST: &str = "slurp.shortlist";

/// The same for its network for committed choices.
pub const COMMITTED_SHORTLIST: &str = "slurp.committed.shortlist";

/// The same for its network for committed choices under EASY.
pub const COMMITTED_EASY_SHORTLIST: &str = "slurp.committed.easy.shortlist";

/// The same for its network for slurp's model under EASY.
pub const SLURP_EASY_SHORTLIST: &str = "slurp.easy.shortlist";

/// The metadata key of the shortlist the model's own network chooses
/// through instead of its own once the ended jobs show exact estimates
/// (`exact.rs`), when it has one.
pub const EXACT_SHORTLIST: &str = "slurp.exact.shortlist";

/// The same for its network for committed choices.
pub const COMMITTED_EXACT_SHORTLIST: &str = "slurp.committed.exact.shortlist";

/// The same for its network for committed choices under EASY.
pub const COMMITTED_EASY_EXACT_SHORTLIST: &str = "slurp.committed.easy.exact.shortlist";

/// The same for its network for slurp's model under EASY.
pub const SLURP_EASY_EXACT_SHORTLIST: &str = "slurp.easy.exact.shortlist";

/// The metadata key of the horizon its network for committed choices
/// under EASY keeps its choices within (`horizon.rs`), when it has one.
pub const COMMITTED_EASY_HORIZON: &str = "slurp.committed.easy.horizon";

/// The same for its network for committed choices: without backfilling,
/// and under EASY too when it has no network of its own for that.
pub const COMMITTED_HORIZON: &str = "slurp.committed.horizon";

/// The metadata key of the backlog rule (`backlog.rs`) of its network for
/// committed choices: without backfilling, and under EASY too when it has
/// no network of its own for that.
pub const COMMITTED_BACKLOG: &str = "slurp.committed.backlog";

/// The same for its network for committed choices under EASY.
pub const COMMITTED_EASY_BACKLOG: &str = "slurp.committed.easy.backlog";

/// The backlog rule under metadata `key`, if the model has one there, for
/// the network under `network`: which it must carry (`has`), with a
/// shortlist (`shortlist`) whose margin the rule widens.
fn backlog_at(
    proto: &tract_onnx::pb::ModelProto,
    path: &Path,
    key: &str,
    network: &str,
    has: bool,
    shortlist: Option<Shortlist>,
) -> Result<Option<Backlog>, ModelError> {
    let bad = |reason: String| ModelError::Backlog {
        path: path.to_owned(),
        key: key.to_owned(),
        reason,
    };
    let Some(p) = proto.metadata_props.iter().find(|p| p.key == key) else {
        return Ok(None);
    };
    let backlog = Backlog::parse(&p.value).map_err(bad)?;
    if !has {
        return Err(bad(format!(
            "the model carries no `{network}` network for it to apply to (a backlog rule is for choices kept until they start); remove the key, or add the network"
        )));
    }
    if shortlist.is_none() {
        return Err(bad(format!(
            "the `{network}` network has no shortlist for it to widen; give it one (`{network}.shortlist`), or remove the key"
        )));
    }
    Ok(Some(backlog))
}

/// The horizon under metadata `key`, if the model has one there, for the
/// network under `network`, which it must carry (`has`).
fn horizon_at(
    proto: &tract_onnx::pb::ModelProto,
    path: &Path,
    key: &str,
    network: &str,
    has: bool,
) -> Result<Option<Horizon>, ModelError> {
    let bad = |reason: String| ModelError::Horizon {
        path: path.to_owned(),
        key: key.to_owned(),
        reason,
    };
    let Some(p) = proto.metadata_props.iter().find(|p| p.key == key) else {
        return Ok(None);
    };
    let horizon = Horizon::parse(&p.value).map_err(bad)?;
    if !has {
        // Read by nothing: refused, not skipped, as a shortlist is.
        return Err(bad(format!(
            "the model carries no `{network}` network for it to apply to (a horizon is for choices kept until they start); remove the key, or add the network"
        )));
    }
    Ok(Some(horizon))
}

/// The shortlist under metadata `key`, if the model has one there, for
/// the network there, which sees `sight`.
fn shortlist_at(
    proto: &tract_onnx::pb::ModelProto,
    path: &Path,
    key: &str,
    sight: Sight,
) -> Result<Option<Shortlist>, ModelError> {
    proto
        .metadata_props
        .iter()
        .find(|p| p.key == key)
        .map(|p| {
            Shortlist::parse(&p.value)
                .and_then(|list| match list.unreadable_by(sight) {
                    Some(reason) => Err(reason),
                    None => Ok(list),
                })
                .map_err(|reason| ModelError::Shortlist {
                    path: path.to_owned(),
                    key: key.to_owned(),
                    reason,
                })
        })
        .transpose()
}

/// The shortlist for exact estimates under metadata `key` (`exact.rs`),
/// if the model has one there, for the network there, which sees `sight`:
/// v2 or later, whose standing counts the ended jobs.
fn exact_at(
    proto: &tract_onnx::pb::ModelProto,
    path: &Path,
    key: &str,
    sight: Sight,
) -> Result<Option<Shortlist>, ModelError> {
    let list = shortlist_at(proto, path, key, sight)?;
    if list.is_some() && sight == Sight::V1 {
        return Err(ModelError::Shortlist {
            path: path.to_owned(),
            key: key.to_owned(),
            reason: "the network sees observation v1, which keeps no account of the jobs that ended: a v2 … v10 network can carry one".into(),
        });
    }
    Ok(list)
}

/// What the network under each metadata key is for, as errors name it.
fn purpose(key: &str) -> &'static str {
    if key == SLURP_EASY {
        "network for slurp's model under EASY"
    } else {
        "network for committed choices"
    }
}

/// A loaded policy network and the normalisers it was trained with.
#[derive(Debug)]
pub struct Model {
    plan: Plan,
    /// Run states kept between decisions: making one per call (tract's
    /// `run`) is a third of a decision. One per concurrent caller; the
    /// lock is held only to take or return one.
    states: std::sync::Mutex<Vec<TypedSimpleState>>,
    /// The same network evaluated directly, when it is the trainer's
    /// per-slot MLP and agrees with tract (`mlp.rs`).
    direct: Option<SlotMlp>,
    /// The observation it sees; `normalisers` scale v1's (unused by v2).
    pub sight: Sight,
    pub normalisers: Normalisers,
    /// Its network for committed choices, when it carries one.
    committed: Option<Arc<Model>>,
    /// Its network for committed choices under EASY, when it carries one.
    committed_easy: Option<Arc<Model>>,
    /// Its network for slurp's model under EASY, when it carries one.
    slurp_easy: Option<Arc<Model>>,
    /// The heuristic its near-ties go to, when it has one.
    shortlist: Option<Shortlist>,
    /// The one they go to instead once estimates prove exact, when it has
    /// one (`exact.rs`).
    exact: Option<Shortlist>,
    /// How far ahead a choice it keeps may be reserved, when it is a
    /// network for committed choices and has a horizon.
    horizon: Option<Horizon>,
    /// Its shortlist's margin on a deep backlog, when it is a network for
    /// committed choices and has a backlog rule.
    backlog: Option<Backlog>,
}

impl Clone for Model {
    fn clone(&self) -> Model {
        Model {
            plan: self.plan.clone(),
            states: std::sync::Mutex::new(Vec::new()),
            direct: self.direct.clone(),
            sight: self.sight,
            normalisers: self.normalisers,
            committed: self.committed.clone(),
            committed_easy: self.committed_easy.clone(),
            slurp_easy: self.slurp_easy.clone(),
            shortlist: self.shortlist,
            exact: self.exact,
            horizon: self.horizon,
            backlog: self.backlog,
        }
    }
}

/// The network a model carries under metadata `key` (seeing what
/// `sight_key` names, else the model's `sight`), loaded and checked; `None`
/// when it carries none.
fn carried(
    proto: &tract_onnx::pb::ModelProto,
    path: &Path,
    sight: Sight,
    key: &str,
    sight_key: &str,
    (shortlist_key, exact_key): (&str, &str),
    committed_keys: Option<(&str, &str)>,
) -> Result<Option<Arc<Model>>, ModelError> {
    let found = proto.metadata_props.iter().find(|p| p.key == key);
    let horizon = match committed_keys {
        Some((h, _)) => horizon_at(proto, path, h, key, found.is_some())?,
        None => None,
    };
    let Some(p) = found else {
        // A backlog rule here is refused by the same check: no network.
        if let Some((_, b)) = committed_keys {
            backlog_at(proto, path, b, key, false, None)?;
        }
        return Ok(None);
    };
    let bad = |reason: String| ModelError::Carried {
        path: path.to_owned(),
        what: purpose(key),
        key: key.to_owned(),
        reason,
    };
    // What a carried network must be.
    const LAYERS: &str = "expected a JSON list of dense layers {\"w\": [...], \"b\": [...]} from 9 inputs to 1 output";
    let layers: Vec<crate::export::Dense> =
        serde_json::from_str(&p.value).map_err(|e| bad(format!("{e} ({LAYERS})")))?;
    let own = match proto.metadata_props.iter().find(|p| p.key == sight_key) {
        None => sight,
        Some(p) => Sight::from_name(&p.value)
            .filter(|&s| s != Sight::V1)
            .ok_or_else(|| {
                bad(format!(
                    "`{sight_key}` is `{}`; it may name {}",
                    p.value,
                    Sight::site_independent_names()
                ))
            })?,
    };
    if sight == Sight::V1 {
        return Err(bad(
            "the model sees observation v1 (scaled by one trace), which cannot carry one: a v2 … v10 model can".into(),
        ));
    }
    if !crate::export::chains(&layers) {
        return Err(bad(format!("its layers do not chain ({LAYERS})")));
    }
    let bytes = crate::export::actor(&layers, own.name(), &[]);
    let mut model = Model::from_bytes(path, &bytes, None, None)?;
    model.shortlist = shortlist_at(proto, path, shortlist_key, own)?;
    model.exact = exact_at(proto, path, exact_key, own)?;
    model.horizon = horizon;
    model.backlog = match committed_keys {
        Some((_, b)) => backlog_at(proto, path, b, key, true, model.shortlist)?,
        None => None,
    };
    Ok(Some(Arc::new(model)))
}

/// Where a model's normalisers live: `MODEL.onnx.json`.
pub fn sidecar(model: &Path) -> PathBuf {
    let mut name = model.as_os_str().to_owned();
    name.push(".json");
    PathBuf::from(name)
}

impl Model {
    /// Loads `path` and its normalisers (`path.json`), or `fallback` when
    /// the model has none beside it.
    pub fn load(path: &Path, fallback: Option<Normalisers>) -> Result<Model, ModelError> {
        let bytes = std::fs::read(path).map_err(|e| ModelError::Unreadable {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        let normalisers = std::fs::read_to_string(sidecar(path)).ok();
        Model::from_bytes(path, &bytes, normalisers.as_deref(), fallback)
    }

    /// A model from its bytes and its normalisers' JSON (`fallback` when
    /// there is none); `path` names it in errors.
    pub fn from_bytes(
        path: &Path,
        bytes: &[u8],
        normalisers: Option<&str>,
        fallback: Option<Normalisers>,
    ) -> Result<Model, ModelError> {
        let unreadable = |e: &dyn std::fmt::Display| ModelError::Unreadable {
            path: path.to_owned(),
            reason: e.to_string(),
        };
        let shape = |e: &dyn std::fmt::Display| ModelError::Shape {
            path: path.to_owned(),
            reason: format!("{e:#}"),
        };
        let proto = onnx()
            .proto_model_for_read(&mut &bytes[..])
            .map_err(|e| unreadable(&e))?;
        let model = onnx()
            .model_for_proto_model(&proto)
            .map_err(|e| unreadable(&e))?;
        if model.inputs.len() != 2 || model.outputs.len() != 1 {
            return Err(shape(&format!(
                "it has {} inputs and {} outputs",
                model.inputs.len(),
                model.outputs.len()
            )));
        }
        let plan = model
            .with_input_fact(0, f32::fact([1, SLOTS, FEATURES]).into())
            .and_then(|m| m.with_input_fact(1, f32::fact([1, SLOTS]).into()))
            .and_then(|m| m.into_optimized())
            .and_then(|m| m.into_runnable())
            .map_err(|e| shape(&e))?;
        let bad = |reason: String| ModelError::Normalisers {
            path: sidecar(path),
            reason,
        };
        let meta = proto
            .metadata_props
            .iter()
            .find(|p| p.key == "slurp.observation")
            .map(|p| p.value.clone());
        let beside: Option<serde_json::Value> = normalisers
            .map(|text| serde_json::from_str(text).map_err(|e| bad(e.to_string())))
            .transpose()?;
        let said = meta.or_else(|| {
            beside
                .as_ref()
                .and_then(|v| v.get("observation"))
                .and_then(|o| o.as_str().map(str::to_owned))
        });
        let sight = match said.as_deref() {
            None => Sight::V1,
            Some(name) => Sight::from_name(name).ok_or_else(|| ModelError::Shape {
                path: path.to_owned(),
                reason: format!(
                    "it was trained on observation `{name}`, which this slurp does not know ({})",
                    Sight::ALL.map(Sight::name).join(", ")
                ),
            })?,
        };
        let normalisers = match (sight, beside) {
            (Sight::V1, Some(v)) => serde_json::from_value(v).map_err(|e| bad(e.to_string()))?,
            (Sight::V1, None) => fallback.ok_or_else(|| bad("missing".into()))?,
            _ => Normalisers::NONE,
        };
        let committed = carried(
            &proto,
            path,
            sight,
            COMMITTED,
            COMMITTED_SIGHT,
            (COMMITTED_SHORTLIST, COMMITTED_EXACT_SHORTLIST),
            Some((COMMITTED_HORIZON, COMMITTED_BACKLOG)),
        )?;
        let committed_easy = carried(
            &proto,
            path,
            sight,
            COMMITTED_EASY,
            COMMITTED_EASY_SIGHT,
            (COMMITTED_EASY_SHORTLIST, COMMITTED_EASY_EXACT_SHORTLIST),
            Some((COMMITTED_EASY_HORIZON, COMMITTED_EASY_BACKLOG)),
        )?;
        let slurp_easy = carried(
            &proto,
            path,
            sight,
            SLURP_EASY,
            SLURP_EASY_SIGHT,
            (SLURP_EASY_SHORTLIST, SLURP_EASY_EXACT_SHORTLIST),
            None,
        )?;
        let shortlist = shortlist_at(&proto, path, SHORTLIST, sight)?;
        let exact = exact_at(&proto, path, EXACT_SHORTLIST, sight)?;
        // A rule for a network the file does not carry would be read by
        // nothing: refused, not skipped (a hand-edited key, or one left
        // behind when the network was taken out).
        for (key, has, network) in [
            (SLURP_EASY_SHORTLIST, slurp_easy.is_some(), SLURP_EASY),
            (SLURP_EASY_EXACT_SHORTLIST, slurp_easy.is_some(), SLURP_EASY),
            (COMMITTED_SHORTLIST, committed.is_some(), COMMITTED),
            (COMMITTED_EXACT_SHORTLIST, committed.is_some(), COMMITTED),
            (
                COMMITTED_EASY_SHORTLIST,
                committed_easy.is_some(),
                COMMITTED_EASY,
            ),
            (
                COMMITTED_EASY_EXACT_SHORTLIST,
                committed_easy.is_some(),
                COMMITTED_EASY,
            ),
        ] {
            if !has && proto.metadata_props.iter().any(|p| p.key == key) {
                return Err(ModelError::Shortlist {
                    path: path.to_owned(),
                    key: key.to_owned(),
                    reason: format!(
                        "the model carries no `{network}` network for it to apply to; remove the key, or add the network"
                    ),
                });
            }
        }
        let mut model = Model {
            plan,
            states: std::sync::Mutex::new(Vec::new()),
            direct: None,
            sight,
            normalisers,
            committed,
            committed_easy,
            slurp_easy,
            shortlist,
            exact,
            horizon: None,
            backlog: None,
        };
        // One evaluation of padding proves the output's shape now, not in
        // the middle of a run.
        let logits = model.logits(&Observation {
            features: vec![0.0; SLOTS * FEATURES],
            mask: vec![0.0; SLOTS],
            jobs: Vec::new(),
        });
        match logits {
            Ok(l) if l.len() == SLOTS => {}
            Ok(l) => return Err(shape(&format!("its output has {} values", l.len()))),
            Err(e) => return Err(shape(&e)),
        }
        model.direct = SlotMlp::recognise(&proto).filter(|mlp| model.agrees(mlp));
        Ok(model)
    }

    /// Whether `mlp` gives tract's logits on probe observations: all
    /// padding, and seeded ones with features spread over [0, 1] and a part
    /// of the slots padded. A graph read wrongly would differ on them.
    fn agrees(&self, mlp: &SlotMlp) -> bool {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        (0..=4).all(|probe| {
            let real = probe * SLOTS / 4;
            let mut obs = Observation {
                features: Vec::with_capacity(SLOTS * FEATURES),
                mask: vec![0.0; SLOTS],
                jobs: Vec::new(),
            };
            for slot in 0..SLOTS {
                if slot < real {
                    obs.features
                        .extend((0..FEATURES).map(|_| rng.random::<f32>()));
                    obs.mask[slot] = 1.0;
                } else {
                    obs.features.extend_from_slice(&PADDING);
                }
            }
            let Ok(tract) = self.tract_logits(&obs) else {
                return false;
            };
            let direct = mlp.logits(&obs);
            // Summation order and fused multiply-adds move the last bits,
            // by as much as the sums' size, not the logit's: a trained
            // model's first layer (standardisation folded in) makes terms
            // in the hundreds that cancel to a logit near 0. So a real
            // slot is held to the largest real logit of its probe — a
            // misread weight moves logits by about that much — and a
            // padded slot (the mask's −10⁹ term) to its own.
            let scale = 1.0
                + (0..real)
                    .map(|slot| tract[slot].abs())
                    .fold(0.0f32, f32::max);
            tract.iter().zip(&direct).enumerate().all(|(slot, (t, d))| {
                let size = if slot < real {
                    scale
                } else {
                    1.0 + t.abs().max(d.abs())
                };
                (t - d).abs() <= 1e-4 * size
            })
        })
    }

    /// The network's layers, when it is a per-slot MLP of the trainer's
    /// shape (what a search can start from).
    pub fn layers(&self) -> Option<Vec<crate::export::Dense>> {
        self.direct.as_ref().and_then(SlotMlp::dense)
    }

    /// The network for committed choices without backfilling (`easy:
    /// false`) or with EASY: the one the model carries for that mode, else
    /// the one it carries for both, else itself.
    pub fn committed(&self, easy: bool) -> &Model {
        let own = if easy {
            self.committed_easy.as_ref().or(self.committed.as_ref())
        } else {
            self.committed.as_ref()
        };
        own.map_or(self, |m| m)
    }

    /// The network that chooses in slurp's own model (and real runs)
    /// without backfilling (`easy: false`) or under EASY: the one the model
    /// carries for EASY when it has one, else the model itself.
    pub fn in_slurp(self: &Arc<Self>, easy: bool) -> Arc<Model> {
        match (&self.slurp_easy, easy) {
            (Some(own), true) => own.clone(),
            _ => self.clone(),
        }
    }

    /// The network it carries for slurp's model under EASY, apart from its
    /// own.
    pub fn slurp_easy(&self) -> Option<&Model> {
        self.slurp_easy.as_deref()
    }

    /// Whether it carries a network of its own for committed choices (for
    /// one backfilling mode or both).
    pub fn has_committed(&self) -> bool {
        self.committed.is_some() || self.committed_easy.is_some()
    }

    /// Whether it carries one of its own for that mode: for EASY, apart
    /// from the other mode's; without backfilling, the one that serves
    /// both unless EASY has its own.
    pub fn carries(&self, easy: bool) -> bool {
        if easy {
            self.committed_easy.is_some()
        } else {
            self.committed.is_some()
        }
    }

    /// The layers of the network it carries for committed choices in that
    /// mode (`None` when that mode uses the model's own network).
    pub fn committed_layers(&self, easy: bool) -> Option<Vec<crate::export::Dense>> {
        let own = self.committed(easy);
        if std::ptr::eq(own, self) {
            None
        } else {
            own.layers()
        }
    }

    /// The heuristic this network's near-ties go to (`shortlist.rs`), when
    /// it has one.
    pub fn shortlist(&self) -> Option<Shortlist> {
        self.shortlist
    }

    /// The heuristic its near-ties go to once the ended jobs show exact
    /// estimates (`exact.rs`), when it has one.
    pub fn exact(&self) -> Option<Shortlist> {
        self.exact
    }

    /// The shortlist it chooses through now: its exact one where
    /// `exact` (the standing says so) and it has one, else its own.
    pub fn shortlist_now(&self, exact: bool) -> Option<Shortlist> {
        match self.exact {
            Some(list) if exact => Some(list),
            _ => self.shortlist,
        }
    }

    /// How far ahead a choice this network keeps may be reserved
    /// (`horizon.rs`), when it has a horizon.
    pub fn horizon(&self) -> Option<Horizon> {
        self.horizon
    }

    /// Its shortlist's margin on a deep backlog (`backlog.rs`), when it
    /// has a backlog rule.
    pub fn backlog(&self) -> Option<Backlog> {
        self.backlog
    }

    /// This network keeping its choices within `horizon`: a search of a
    /// network for committed choices plays it alone, as the model's own.
    pub fn with_horizon(mut self, horizon: Option<Horizon>) -> Model {
        self.horizon = horizon;
        self
    }

    /// This network widening its shortlist on a deep backlog by
    /// `backlog`: a search of a network for committed choices plays it
    /// alone, as the model's own. Read only with a shortlist.
    pub fn with_backlog(mut self, backlog: Option<Backlog>) -> Model {
        self.backlog = backlog;
        self
    }

    /// Whether any of its networks chooses through a shortlist.
    pub fn any_shortlist(&self) -> bool {
        [
            Some(self),
            self.committed.as_deref(),
            self.committed_easy.as_deref(),
            self.slurp_easy.as_deref(),
        ]
        .into_iter()
        .flatten()
        .any(|m| m.shortlist.is_some() || m.exact.is_some())
    }

    /// Which evaluator runs the network: `"direct"` (the per-slot MLP,
    /// `mlp.rs`) or `"tract"`.
    pub fn evaluator(&self) -> &'static str {
        if self.direct.is_some() {
            "direct"
        } else {
            "tract"
        }
    }

    /// The masked logits of one observation.
    pub fn logits(&self, obs: &Observation) -> Result<Vec<f32>, ModelError> {
        match &self.direct {
            Some(mlp) => Ok(mlp.logits(obs)),
            None => self.tract_logits(obs),
        }
    }

    /// The masked logits as tract's plan computes them, whichever evaluator
    /// [`Model::logits`] uses.
    pub fn tract_logits(&self, obs: &Observation) -> Result<Vec<f32>, ModelError> {
        let run = |e: TractError| ModelError::Run(format!("{e:#}"));
        let features = Tensor::from_shape(&[1, SLOTS, FEATURES], &obs.features).map_err(run)?;
        let mask = Tensor::from_shape(&[1, SLOTS], &obs.mask).map_err(run)?;
        let kept = self.states.lock().ok().and_then(|mut s| s.pop());
        let mut state = match kept {
            Some(state) => state,
            None => self.plan.spawn().map_err(run)?,
        };
        let out = state
            .run(tvec!(features.into(), mask.into()))
            .map_err(run)?;
        let view = out[0].to_plain_array_view::<f32>().map_err(run)?;
        let logits = view.iter().copied().collect();
        if let Ok(mut states) = self.states.lock() {
            states.push(state);
        }
        Ok(logits)
    }
}
