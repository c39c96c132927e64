//! The learned `fair` policy: what it sees, how it is evaluated, and how it
//! plays episodes for its trainer.
//!
//! - [`observe`]: decisions → 128 slots × 9 features and a mask
//!   (RL-SPEC.md's fairness env, scaled by one trace: v1);
//! - [`observe_v2`]: the same slots seen through site-independent ratios
//!   (v2), or those ratios over slots that also show a long queue's oldest
//!   job and each user's earliest (v3), and with widths on log scales
//!   (v4);
//! - [`model`]: the network as ONNX, run in-process with tract, its
//!   normalisers beside it;
//! - [`mlp`]: the trainer's per-slot MLP evaluated directly when a model
//!   is one (checked against tract at load);
//! - [`shortlist`]: a heuristic's choice among the jobs a network ranks
//!   near its best (a model's rule per network);
//! - [`horizon`]: a kept choice under EASY passed over when its
//!   reservation lies too far ahead;
//! - [`backlog`]: a kept choice's shortlist widened while many jobs wait;
//! - [`exact`]: another shortlist once the ended jobs show that estimates
//!   are exact (a trace without requested times);
//! - [`rollout`]: episodes of a trace in the reference model, recorded as
//!   NumPy arrays for the PyTorch trainer (`fair/trainer/`);
//! - [`export`]: a per-slot MLP written as ONNX, the trainer's graph;
//! - [`evolve`]: CMA-ES over such a network, scored by the judge's cells
//!   on training windows;
//! - [`judge`]: a model against FCFS, SJF, F1 and `fairshare` on
//!   workloads, both simulation models, with and without EASY;
//! - [`kept`]: the v3 and v4 views a chooser keeps between decisions (fair-share
//!   turns, the largest projected mean) instead of scanning every user;
//! - [`chooser`]: the model picking the head of the runtime core's queue
//!   (slurp's own simulation model, and real runs);
//! - [`spec`]: `fair`, `fair:MODEL.onnx`, `+easy` as policy names.

pub mod backlog;
pub mod chooser;
pub mod evolve;
pub mod exact;
pub mod export;
pub mod horizon;
pub mod judge;
pub mod kept;
pub mod mlp;
pub mod model;
pub mod observe;
pub mod observe_v2;
pub mod rollout;
pub mod shortlist;
pub mod spec;

pub use model::{Model, ModelError, Sight};
pub use observe::{FEATURES, Normalisers, Observation, SLOTS};

/// A model built into the binary by name (`spec::BUILT_IN`), each from
/// `stdlib/policies/` with its card (`MODEL_CARD.md`) beside it:
///
/// - `fair`: fair-v1, the model slurp ships as `--policy fair`, and its
///   normalisers (RICC's maxima);
/// - `fair-v2`: the site-independent observation, evolved on generated
///   workloads and RICC's first months;
/// - `fair-v3`: v2's features over the wider slots (`observe_v2::wide_slots`),
///   evolved on the same workloads;
/// - `fair-v4`: v4's features (v3's with widths on log scales), with a
///   second network for committed choices (RLScheduler's reference model);
/// - `fair-v5`: fair-v4 with networks of their own under EASY backfilling,
///   one for slurp's model and real runs, one for committed choices, each
///   seeing v5 (the user's place in fair-share turns);
/// - `fair-v6`: fair-v5's networks without backfilling and two for EASY
///   searched from fair-v5's, every one choosing through a shortlist (F1
///   among its near-ties, `shortlist.rs`);
/// - `fair-v7`: fair-v6 with a narrower shortlist (f1:64) for its network
///   for committed choices without backfilling;
/// - `fair-v8`: fair-v7 with both its networks for EASY searched again
///   (slurp's model and real `+easy` runs, and committed choices);
/// - `fair-v9`: fair-v8 with its network for slurp's model and real
///   `+easy` runs searched again;
/// - `fair-v10`: fair-v9 whose network for committed choices under EASY
///   sees v9 (its users' predicted runs), its weights unchanged;
/// - `fair-v11`: fair-v10 whose choices kept under EASY are reserved
///   within half the longest estimate in sight (`horizon.rs`);
/// - `fair-v12`: fair-v11 whose choices kept without backfilling are
///   reserved within the same horizon;
/// - `fair-v13`: fair-v12 whose choices kept without backfilling hand
///   wider near-ties to F1 while more than 1,024 jobs wait (`backlog.rs`);
/// - `fair-v14`: fair-v13 whose networks hand their near-ties (all of
///   them, but for its own network's without backfilling) to SJF once the
///   ended jobs show exact estimates (`exact.rs`);
/// - `fair-v15`: fair-v14 whose network for slurp's model and real `+easy`
///   runs is searched again while seeing v9 (its users' predicted runs).
///
/// None of fair-v2 … fair-v15 is the model behind `fair`: none passes that
/// check everywhere (MODEL_CARD.md).
pub fn built_in(name: &str) -> Result<Model, String> {
    match spec::Source::of(name) {
        source @ spec::Source::BuiltIn(_) => source.load(),
        spec::Source::File(_) => Err(format!("no built-in model `{name}`")),
    }
}

/// A built-in model's ONNX bytes, its normalisers' JSON (v1 only) and its
/// file name in `stdlib/policies`.
pub(crate) fn built_in_bytes(
    name: &str,
) -> Option<(&'static [u8], Option<&'static str>, &'static str)> {
    const V1: &[u8] = include_bytes!("../../stdlib/policies/fair-v1.onnx");
    const V1_NORMALISERS: &str = include_str!("../../stdlib/policies/fair-v1.onnx.json");
    const V2: &[u8] = include_bytes!("../../stdlib/policies/fair-v2.onnx");
    const V3: &[u8] = include_bytes!("../../stdlib/policies/fair-v3.onnx");
    const V4: &[u8] = include_bytes!("../../stdlib/policies/fair-v4.onnx");
    const V5: &[u8] = include_bytes!("../../stdlib/policies/fair-v5.onnx");
    const V6: &[u8] = include_bytes!("../../stdlib/policies/fair-v6.onnx");
    const V7: &[u8] = include_bytes!("../../stdlib/policies/fair-v7.onnx");
    const V8: &[u8] = include_bytes!("../../stdlib/policies/fair-v8.onnx");
    const V9: &[u8] = include_bytes!("../../stdlib/policies/fair-v9.onnx");
    const V10: &[u8] = include_bytes!("../../stdlib/policies/fair-v10.onnx");
    const V11: &[u8] = include_bytes!("../../stdlib/policies/fair-v11.onnx");
    const V12: &[u8] = include_bytes!("../../stdlib/policies/fair-v12.onnx");
    const V13: &[u8] = include_bytes!("../../stdlib/policies/fair-v13.onnx");
    const V14: &[u8] = include_bytes!("../../stdlib/policies/fair-v14.onnx");
    const V15: &[u8] = include_bytes!("../../stdlib/policies/fair-v15.onnx");
    Some(match name {
        "fair" => (V1, Some(V1_NORMALISERS), "fair-v1.onnx"),
        "fair-v2" => (V2, None, "fair-v2.onnx"),
        "fair-v3" => (V3, None, "fair-v3.onnx"),
        "fair-v4" => (V4, None, "fair-v4.onnx"),
        "fair-v5" => (V5, None, "fair-v5.onnx"),
        "fair-v6" => (V6, None, "fair-v6.onnx"),
        "fair-v7" => (V7, None, "fair-v7.onnx"),
        "fair-v8" => (V8, None, "fair-v8.onnx"),
        "fair-v9" => (V9, None, "fair-v9.onnx"),
        "fair-v10" => (V10, None, "fair-v10.onnx"),
        "fair-v11" => (V11, None, "fair-v11.onnx"),
        "fair-v12" => (V12, None, "fair-v12.onnx"),
        "fair-v13" => (V13, None, "fair-v13.onnx"),
        "fair-v14" => (V14, None, "fair-v14.onnx"),
        "fair-v15" => (V15, None, "fair-v15.onnx"),
        _ => return None,
    })
}
