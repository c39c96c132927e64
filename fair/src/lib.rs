//! The learned `fair` policy: what it sees, how it is evaluated, and how it
//! plays episodes for its trainer.
//!
//! - [`observe`]: decisions → 128 slots × 9 features and a mask
//!   (RL-SPEC.md's fairness env, scaled by one trace: v1);
//! - [`observe_v2`]: the same slots seen through site-independent ratios
//!   (v2);
//! - [`model`]: the network as ONNX, run in-process with tract, its
//!   normalisers beside it;
//! - [`mlp`]: the trainer's per-slot MLP evaluated directly when a model
//!   is one (checked against tract at load);
//! - [`rollout`]: episodes of a trace in the reference model, recorded as
//!   NumPy arrays for the PyTorch trainer (`fair/trainer/`);
//! - [`export`]: a per-slot MLP written as ONNX, the trainer's graph;
//! - [`evolve`]: CMA-ES over such a network, scored by the judge's cells
//!   on training windows;
//! - [`judge`]: a model against FCFS, SJF, F1 and `fairshare` on
//!   workloads, both simulation models, with and without EASY;
//! - [`chooser`]: the model picking the head of the runtime core's queue
//!   (slurp's own simulation model, and real runs);
//! - [`spec`]: `fair`, `fair:MODEL.onnx`, `+easy` as policy names.

pub mod chooser;
pub mod evolve;
pub mod export;
pub mod judge;
pub mod mlp;
pub mod model;
pub mod observe;
pub mod observe_v2;
pub mod rollout;
pub mod spec;

pub use model::{Model, ModelError, Sight};
pub use observe::{FEATURES, Normalisers, Observation, SLOTS};

/// The model slurp ships, `stdlib/policies/fair-v1.onnx` and its
/// normalisers (its card, `MODEL_CARD.md`, is beside it), built into the
/// binary so `--policy fair` needs no file.
pub fn shipped() -> Result<Model, String> {
    const ONNX: &[u8] = include_bytes!("../../stdlib/policies/fair-v1.onnx");
    const NORMALISERS: &str = include_str!("../../stdlib/policies/fair-v1.onnx.json");
    Model::from_bytes(
        std::path::Path::new("fair-v1.onnx (built in)"),
        ONNX,
        Some(NORMALISERS),
        None,
    )
    .map_err(|e| e.to_string())
}

/// `fair-v2`, `stdlib/policies/fair-v2.onnx`: the site-independent
/// observation, evolved on generated workloads and RICC's first months
/// (MODEL_CARD.md). Built in as `--policy fair-v2`; not yet the model
/// behind `fair`, as it does not pass that check everywhere.
pub fn shipped_v2() -> Result<Model, String> {
    const ONNX: &[u8] = include_bytes!("../../stdlib/policies/fair-v2.onnx");
    Model::from_bytes(
        std::path::Path::new("fair-v2.onnx (built in)"),
        ONNX,
        None,
        None,
    )
    .map_err(|e| e.to_string())
}
