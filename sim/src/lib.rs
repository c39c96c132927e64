//! `slurp sim`: replay a workload trace through scheduling policies on a
//! virtual clock and measure what each does to waits, slowdowns and users.
//!
//! The stages, one module each:
//!
//! - [`workload`]: a trace's jobs as the simulator sees them (RL-SPEC.md's
//!   loading rules) and the machine they ran on;
//! - [`generate`]: synthetic multi-user workloads (Lublin–Feitelson sizes
//!   and run times, users of different habits, a daily cycle, a load);
//! - [`window`]: which jobs one replay covers — all, `START:LEN`, or
//!   random windows from a seed;
//! - [`engine`]: slurp's model — the runtime's own scheduler core
//!   (`slurp_runtime::core`) on a virtual clock, core-granular, drained
//!   until the last job ends;
//! - [`reference`]: the reference model of RLScheduler, step for step, so
//!   figures compare with the published table;
//! - [`metrics`]: waits, bounded slowdowns, utilisation, per-user
//!   fairness;
//! - [`plot`]: the comparison as an SVG chart.
//!
//! [`compare`] ties them together: every policy on every window, in
//! parallel across policies.

pub mod engine;
pub mod generate;
pub mod metrics;
pub mod plot;
pub mod reference;
pub mod window;
pub mod workload;

use std::fmt;

use serde::Serialize;
use slurp_runtime::core::{Backfill, PolicyKind};

pub use metrics::{Metrics, Summary, UserMetrics};
pub use window::Window;
pub use workload::{Dropped, Machine, SimJob, Workload};

/// Which simulation model replays the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Model {
    /// slurp's scheduler core: core-granular, re-decides at every event,
    /// runs until every job ended.
    #[default]
    Slurp,
    /// The reference model (RL-SPEC.md): whole nodes, one decision per
    /// start, stops when the window's last job started.
    Reference,
}

impl Model {
    pub fn name(self) -> &'static str {
        match self {
            Model::Slurp => "slurp",
            Model::Reference => "reference",
        }
    }

    /// Whether this model has `policy`: the reference knows no
    /// conservative backfilling.
    pub fn check(self, policy: PolicyKind) -> Result<(), String> {
        match (self, policy.backfill) {
            (Model::Reference, Backfill::Conservative) => Err(format!(
                "policy `{policy}`: the reference model has no conservative backfilling \
                 (use `+easy`, or --model slurp)"
            )),
            _ => Ok(()),
        }
    }
}

impl std::str::FromStr for Model {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "slurp" => Ok(Model::Slurp),
            "reference" => Ok(Model::Reference),
            _ => Err(format!("unknown model `{s}` (slurp or reference)")),
        }
    }
}

impl fmt::Display for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// When each job of a window started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub window: Window,
    /// Start (seconds from the start of the trace) of each job of the
    /// window, by its position in the window.
    pub starts: Vec<u64>,
    /// Positions in the window in the order the jobs started.
    pub order: Vec<u32>,
}

impl Schedule {
    pub fn new(window: Window, starts: Vec<u64>, order: Vec<u32>) -> Self {
        Schedule {
            window,
            starts,
            order,
        }
    }
}

/// Replays `window` under `policy` in `model` (checked with
/// [`Model::check`] first).
pub fn simulate(workload: &Workload, window: Window, policy: PolicyKind, model: Model) -> Schedule {
    match model {
        Model::Slurp => engine::run(workload, window, policy),
        Model::Reference => reference::run(
            workload,
            window,
            policy.order,
            policy.backfill != Backfill::None,
        ),
    }
}

/// One policy's results.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyResult {
    /// The policy's name (`easy`, `sjf+easy`, `fair:MODEL.onnx`, …).
    pub policy: String,
    /// Averages over the windows.
    pub summary: Summary,
    /// Each window's figures, in window order.
    pub windows: Vec<Metrics>,
}

impl PolicyResult {
    /// The result of `runs`, one per window.
    pub fn new(policy: String, runs: Vec<Metrics>) -> Self {
        PolicyResult {
            policy,
            summary: Summary::of(&runs),
            windows: runs,
        }
    }
}

/// Every policy on every window; policies run in parallel.
pub fn compare(
    workload: &Workload,
    windows: &[Window],
    policies: &[PolicyKind],
    model: Model,
) -> Vec<PolicyResult> {
    let one = |policy: PolicyKind| {
        let runs: Vec<Metrics> = windows
            .iter()
            .map(|&w| Metrics::of(workload, &simulate(workload, w, policy, model), model))
            .collect();
        PolicyResult::new(policy.to_string(), runs)
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads < 2 || policies.len() < 2 {
        return policies.iter().map(|&p| one(p)).collect();
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = policies
            .iter()
            .map(|&p| scope.spawn(move || one(p)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}
