//! The learned policy as the scheduler core's [`Chooser`]: it picks the
//! head of the queue in slurp's own simulation model (the runtime core on
//! a virtual clock) and in real runs, with the same observation as in the
//! reference model.
//!
//! The core counts cores, not nodes: the machine is seen as one-processor
//! nodes, so "can start now" means enough free cores. A job's submission
//! is when the core queued it (a trace's submit time in a replay, when its
//! dependencies were met in a real run).
//!
//! In a real run ([`Learned::for_tasks`]) a task is a job whose estimate is
//! its time limit and whose "user" is the line or sweep it comes from (a
//! nested entry is one task of its parent's, so one user there); features
//! are scaled by the instance itself — its cores, its longest time limit,
//! its number of lines — as the model's were by its trace and machine.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use rand_chacha::ChaCha8Rng;
use slurp_runtime::core::{Chooser, PolicyKind, Queue, Time};
use slurp_sim::reference::Decision;
use slurp_sim::{Machine, Schedule, SimJob, Window, Workload};

use crate::observe::{Normalisers, SLOTS, Users, interleave, observe_slots};
use crate::rollout::{choose, draws};
use crate::{Model, ModelError};

/// A model choosing among a window's jobs (task `i` is job `i`).
#[derive(Debug)]
pub struct Learned {
    model: Arc<Model>,
    norm: Normalisers,
    jobs: Vec<SimJob>,
    machine: Machine,
    starts: Vec<u64>,
    started: Vec<u32>,
    users: Users,
    rng: Option<ChaCha8Rng>,
    /// The queue as the observation orders it: by submission, by
    /// estimate, by processors (each then by submission and task).
    waiting: BTreeSet<(u64, u32)>,
    shortest: BTreeSet<Ranked>,
    narrowest: BTreeSet<Ranked>,
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
        let norm = model.normalisers;
        Learned::of(
            model,
            norm,
            workload.jobs[window.range()].to_vec(),
            workload.machine.procs(),
            sample.map(|seed| draws(seed, window)),
        )
    }

    /// For the tasks of a real run on `cores` cores (task `i` is
    /// `tasks[i]`); `sample: Some(seed)` draws each choice.
    pub fn for_tasks(
        model: Arc<Model>,
        tasks: &[Task],
        cores: u64,
        sample: Option<u64>,
    ) -> Learned {
        // A task without a time limit is taken to be as long as the
        // longest that has one (an hour when none has).
        let longest = tasks.iter().filter_map(|t| t.time_limit).max();
        let longest = longest.unwrap_or(3600).max(1);
        let jobs: Vec<SimJob> = tasks
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let estimate = t.time_limit.unwrap_or(longest).max(1);
                SimJob {
                    id: i as i64,
                    submit: 0,
                    // Unknown until it ends: a started task's slowdown is
                    // reckoned with its estimate.
                    run: estimate,
                    estimate,
                    procs: t.cores,
                    user: t.user,
                    group: -1,
                    exe: -1,
                    mem: -1,
                }
            })
            .collect();
        let norm = Normalisers {
            max_run: longest as f64,
            max_procs: cores as f64,
            max_mem: 0.0,
            max_user: jobs.iter().map(|j| j.user).max().unwrap_or(0) as f64,
            max_group: 0.0,
            max_exe: 0.0,
        };
        let rng = sample.map(|seed| {
            draws(
                seed,
                Window {
                    start: 0,
                    len: tasks.len(),
                },
            )
        });
        Learned::of(model, norm, jobs, cores, rng)
    }

    fn of(
        model: Arc<Model>,
        norm: Normalisers,
        jobs: Vec<SimJob>,
        cores: u64,
        rng: Option<ChaCha8Rng>,
    ) -> Learned {
        Learned {
            model,
            norm,
            machine: Machine {
                nodes: u32::try_from(cores).unwrap_or(u32::MAX),
                procs_per_node: 1,
            },
            starts: vec![0; jobs.len()],
            started: Vec::new(),
            jobs,
            users: Users::default(),
            rng,
            waiting: BTreeSet::new(),
            shortest: BTreeSet::new(),
            narrowest: BTreeSet::new(),
            failure: None,
        }
    }
}

/// A key of the estimate and size views: (key, submission, task).
type Ranked = (u64, u64, u32);

/// Where `task` sorts in each kept view of the queue: one place, so that
/// leaving removes exactly what queueing inserted.
fn view_keys(job: &SimJob, task: u32) -> ((u64, u32), Ranked, Ranked) {
    (
        (job.submit, task),
        (job.estimate, job.submit, task),
        (job.procs.into(), job.submit, task),
    )
}

/// A task of a real run, as the learned policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task {
    /// Cores over all its ranks.
    pub cores: u32,
    /// Seconds.
    pub time_limit: Option<u64>,
    /// Which "user" it is counted to (its line or sweep).
    pub user: i64,
}

impl Chooser for Learned {
    fn choose(&mut self, now: Time, queue: Queue<'_>, free_cores: u64) -> u32 {
        let Some(first) = queue.first() else {
            return 0;
        };
        // No choice to make (the users' scores catch up at the next one).
        if queue.len() == 1 {
            return first;
        }
        debug_assert_eq!(
            self.waiting.len(),
            queue.len(),
            "the chooser's view of the queue"
        );
        // The slots from the sorted views kept since the tasks were queued:
        // reading and selecting from a queue of thousands at every decision
        // was most of a run's time.
        let slots = if self.waiting.len() <= SLOTS {
            self.waiting.iter().map(|&(_, j)| j).collect()
        } else {
            interleave(
                self.shortest.iter().map(|&(_, _, j)| j),
                self.narrowest.iter().map(|&(_, _, j)| j),
            )
        };
        // Debug builds (the tests) check the kept views against the queue.
        let mut whole = Vec::new();
        if cfg!(debug_assertions) {
            whole = queue.iter().collect();
        }
        let decision = Decision {
            now: now.0 / 1000,
            jobs: &self.jobs,
            machine: self.machine,
            free_nodes: u32::try_from(free_cores).unwrap_or(u32::MAX),
            // Read only by the check: the slots are given.
            queue: &mut whole,
            started: &self.started,
            starts: &self.starts,
        };
        debug_assert_eq!(
            slots,
            crate::observe::slots(&decision),
            "slots from the kept views"
        );
        let obs = observe_slots(&decision, slots, &self.norm, &mut self.users);
        match self.model.logits(&obs) {
            Ok(logits) => {
                let (slot, _) = choose(&logits, self.rng.as_mut());
                obs.jobs.get(slot).copied().unwrap_or(first)
            }
            Err(e) => {
                self.failure.get_or_insert(e);
                first
            }
        }
    }

    fn started(&mut self, now: Time, task: u32) {
        if let Some(start) = self.starts.get_mut(task as usize) {
            *start = now.0 / 1000;
            self.started.push(task);
        }
    }

    fn queued(&mut self, ready: Time, task: u32) {
        if let Some(job) = self.jobs.get_mut(task as usize) {
            job.submit = ready.0 / 1000;
            let (by_submit, by_estimate, by_procs) = view_keys(job, task);
            self.waiting.insert(by_submit);
            self.shortest.insert(by_estimate);
            self.narrowest.insert(by_procs);
        }
    }

    fn left(&mut self, task: u32) {
        if let Some(job) = self.jobs.get(task as usize) {
            let (by_submit, by_estimate, by_procs) = view_keys(job, task);
            self.waiting.remove(&by_submit);
            self.shortest.remove(&by_estimate);
            self.narrowest.remove(&by_procs);
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
    fn choose(&mut self, now: Time, queue: Queue<'_>, free_cores: u64) -> u32 {
        match self.0.lock() {
            Ok(mut learned) => learned.choose(now, queue, free_cores),
            Err(_) => queue.first().unwrap_or(0),
        }
    }

    fn started(&mut self, now: Time, task: u32) {
        if let Ok(mut learned) = self.0.lock() {
            learned.started(now, task);
        }
    }

    fn queued(&mut self, ready: Time, task: u32) {
        if let Ok(mut learned) = self.0.lock() {
            learned.queued(ready, task);
        }
    }

    fn left(&mut self, task: u32) {
        if let Ok(mut learned) = self.0.lock() {
            learned.left(task);
        }
    }
}

/// The learned policy in real runs: each instance's core gets a chooser
/// over its workflow's tasks, the users being the lines and sweeps.
#[derive(Debug)]
pub struct ForRuns {
    pub model: Arc<Model>,
    /// Draw each choice (from this seed) instead of taking the best slot.
    pub sample: Option<u64>,
}

impl slurp_runtime::run::Learned for ForRuns {
    fn chooser(
        &self,
        workflow: &slurp_runtime::Workflow,
        capacity: &slurp_runtime::Capacity,
    ) -> Box<dyn Chooser> {
        let tasks: Vec<Task> = workflow
            .tasks
            .iter()
            .map(|t| Task {
                cores: u32::try_from(t.request.total_cores()).unwrap_or(u32::MAX),
                time_limit: t.time_limit.map(|l| l.get()),
                user: i64::from(t.template.0),
            })
            .collect();
        Box::new(Learned::for_tasks(
            self.model.clone(),
            &tasks,
            capacity.total_cores(),
            self.sample,
        ))
    }
}
