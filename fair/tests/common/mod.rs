//! What the integration tests share (each file uses some of it).

// Each test file is its own crate and uses only part of this module.
#![allow(dead_code)]

use std::path::PathBuf;

use slurp_fair::Sight;
use slurp_fair::rollout::{Options, Score};
use slurp_sim::generate::{Family, generate};
use slurp_sim::{Machine, Workload};

/// A saturated generated workload (queues of dozens), so choices matter.
pub fn saturated() -> Workload {
    let trace = generate(&Family::Saturated.spec(1500), 2);
    Workload::new(&trace, Machine::of(&trace).unwrap())
}

/// Rollout options for six 64-job trajectories of the reference model
/// without backfilling, scored by the worst user, the network seeing `sight`.
pub fn rollout_options(seed: u64, sight: Sight) -> Options {
    Options {
        trajectories: 6,
        len: 64,
        seed,
        backfill: false,
        score: Score::Worst,
        greedy: false,
        min_bsld: 0.0,
        baseline: None,
        hold_out: Vec::new(),
        model: slurp_sim::Model::Reference,
        sight,
        mixed: false,
    }
}

/// The first `jobs` of `family`'s trace drawn with `seed`, every job `k`
/// times as wide on a machine `k` times as large: `k` times the nodes, or,
/// with `one_per_node`, `k` times the processors one to a node (so that the
/// reference model's whole nodes scale too).
pub fn scaled(family: Family, jobs: usize, seed: u64, k: u32, one_per_node: bool) -> Workload {
    let mut trace = generate(&family.spec(jobs), seed);
    let base = Machine::of(&trace).unwrap();
    for j in &mut trace.jobs {
        j.procs *= k as i64;
        j.req_procs *= k as i64;
    }
    let machine = if one_per_node {
        Machine {
            nodes: u32::try_from(base.procs()).unwrap() * k,
            procs_per_node: 1,
        }
    } else {
        Machine {
            nodes: base.nodes * k,
            procs_per_node: base.procs_per_node,
        }
    };
    Workload::new(&trace, machine)
}

/// A file of `fair/tests/data/`.
pub fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// A linear network that scores a slot by one feature (0-based).
pub fn by_feature(feature: usize, weight: f32) -> Vec<slurp_fair::export::Dense> {
    let mut w = vec![0.0; slurp_fair::FEATURES];
    w[feature] = weight;
    vec![slurp_fair::export::Dense { w, b: vec![0.0] }]
}

/// A v3 model of `main` with the metadata `notes`, loaded as `m.onnx`.
pub fn model(
    main: &[slurp_fair::export::Dense],
    notes: &[(&str, String)],
) -> Result<slurp_fair::Model, slurp_fair::ModelError> {
    let bytes = slurp_fair::export::actor(main, "v3", notes);
    slurp_fair::Model::from_bytes(std::path::Path::new("m.onnx"), &bytes, None, None)
}
