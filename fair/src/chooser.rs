//! The learned policy as the scheduler core's [`Chooser`]: it picks the
//! head of the queue in slurp's own simulation model (the runtime core on
//! a virtual clock), with the same observation as in the reference model.
//!
//! The core counts cores, not nodes: the machine is seen as one-processor
//! nodes, so "can start now" means enough free cores.

use std::sync::{Arc, Mutex};

use rand_chacha::ChaCha8Rng;
use slurp_runtime::core::{Chooser, PolicyKind, Time};
use slurp_sim::reference::Decision;
use slurp_sim::{Machine, Schedule, SimJob, Window, Workload};

use crate::observe::{Users, observe};
use crate::rollout::{choose, draws};
use crate::{Model, ModelError};

/// A model choosing among a window's jobs (task `i` is job `i`).
#[derive(Debug)]
pub struct Learned {
    model: Arc<Model>,
    jobs: Vec<SimJob>,
    machine: Machine,
    starts: Vec<u64>,
    started: Vec<u32>,
    users: Users,
    rng: Option<ChaCha8Rng>,
    /// The first evaluation that failed; the first queued job stood in.
    pub failure: Option<ModelError>,
}

impl Learned {
    /// For `window` of `workload`; `sample: Some(seed)` draws each choice
    /// from the policy's distribution instead of taking its best slot.
    pub fn new(
        model: Arc<Model>,
        workload: &Workload,
        window: Window,
        sample: Option<u64>,
    ) -> Learned {
        let jobs = workload.jobs[window.range()].to_vec();
        Learned {
            model,
            machine: Machine {
                nodes: u32::try_from(workload.machine.procs()).unwrap_or(u32::MAX),
                procs_per_node: 1,
            },
            starts: vec![0; jobs.len()],
            started: Vec::new(),
            jobs,
            users: Users::default(),
            rng: sample.map(|seed| draws(seed, window)),
            failure: None,
        }
    }
}

impl Chooser for Learned {
    fn choose(&mut self, now: Time, queue: &[u32], free_cores: u64) -> u32 {
        let mut queue = queue.to_vec();
        let decision = Decision {
            now: now.0 / 1000,
            jobs: &self.jobs,
            machine: self.machine,
            free_nodes: u32::try_from(free_cores).unwrap_or(u32::MAX),
            queue: &mut queue,
            started: &self.started,
            starts: &self.starts,
        };
        let obs = observe(&decision, &self.model.normalisers, &mut self.users);
        match self.model.logits(&obs) {
            Ok(logits) => {
                let (slot, _) = choose(&logits, self.rng.as_mut());
                obs.jobs.get(slot).copied().unwrap_or(queue[0])
            }
            Err(e) => {
                self.failure.get_or_insert(e);
                queue[0]
            }
        }
    }

    fn started(&mut self, now: Time, task: u32) {
        if let Some(start) = self.starts.get_mut(task as usize) {
            *start = now.0 / 1000;
            self.started.push(task);
        }
    }
}

/// The schedule the policy makes of `window` in slurp's own model: the
/// runtime core choosing with the model, backfilling with EASY when
/// `backfill`. Deterministic for `sample: None` and for each seed.
pub fn replay(
    model: Arc<Model>,
    workload: &Workload,
    window: Window,
    backfill: bool,
    sample: Option<u64>,
) -> Result<Schedule, ModelError> {
    let learned = Shared(Arc::new(Mutex::new(Learned::new(
        model, workload, window, sample,
    ))));
    let policy = if backfill {
        PolicyKind::EASY
    } else {
        PolicyKind::FCFS
    };
    let schedule =
        slurp_sim::engine::run_with(workload, window, policy, Some(Box::new(learned.clone())));
    let failure = learned.0.lock().ok().and_then(|mut l| l.failure.take());
    match failure {
        Some(e) => Err(e),
        None => Ok(schedule),
    }
}

/// The chooser, owned by the core during a replay and still reachable by
/// the caller afterwards (for its failure).
#[derive(Debug, Clone)]
struct Shared(Arc<Mutex<Learned>>);

impl Chooser for Shared {
    fn choose(&mut self, now: Time, queue: &[u32], free_cores: u64) -> u32 {
        match self.0.lock() {
            Ok(mut learned) => learned.choose(now, queue, free_cores),
            Err(_) => queue[0],
        }
    }

    fn started(&mut self, now: Time, task: u32) {
        if let Ok(mut learned) = self.0.lock() {
            learned.started(now, task);
        }
    }
}
