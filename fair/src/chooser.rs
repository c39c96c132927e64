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
//! nested entry is one task of its parent's, so one user there). A v2
//! model's features are ratios (`observe_v2.rs`) and mean the same here as
//! in a replay; a v1 model's are scaled by the instance itself — its
//! cores, its longest time limit, its number of lines — as the model's
//! were by its trace and machine.
//!
//! The same chooser plays the trainer's episodes in slurp's model
//! ([`Learned::recording`]): every decision with a choice is kept as a
//! [`Step`], by the network or by a heuristic teacher.

use std::sync::{Arc, Mutex};

use rand_chacha::ChaCha8Rng;
use slurp_runtime::core::{Chooser, Order, PolicyKind, Queue, Time, float_key};
use slurp_sim::reference::{self, Decision};
use slurp_sim::{Machine, Schedule, SimJob, Window, Workload};

use crate::kept::{Largest, Views};
use crate::observe::{Normalisers, Observation, Users, observe_slots};
use crate::observe_v2::{self, Projection, Shown, Standing, Waiting};
use crate::rollout::{Step, choose, draws, pick};
use crate::{Model, ModelError, Sight};

/// Who chooses: the network, or a heuristic whose choices a trainer clones.
#[derive(Debug, Clone)]
pub enum Who {
    Network(Arc<Model>),
    /// The heuristic's best among the shown jobs (RL-SPEC's keys; for
    /// `fairshare`, the shown job of the user with the least decayed usage).
    Teacher(Order, Sight),
}

impl Who {
    fn sight(&self) -> Sight {
        match self {
            Who::Network(m) => m.sight,
            Who::Teacher(_, sight) => *sight,
        }
    }
}

/// A model choosing among a window's jobs (task `i` is job `i`).
#[derive(Debug)]
pub struct Learned {
    who: Who,
    norm: Normalisers,
    /// v2's standing of the users, also what a `fairshare` teacher ranks
    /// by (kept for v1 models too: it is cheap).
    standing: Standing,
    /// The decisions, when recording an episode for the trainer.
    pub steps: Option<Vec<Step>>,
    jobs: Vec<SimJob>,
    /// Whether each job's estimate is its own: always in a replay; in a
    /// real run, a task's time limit (a task without one is given the
    /// longest, which tells nothing of how well limits are set, so its end
    /// is not counted by the rule for exact estimates, `exact.rs`).
    limited: Vec<bool>,
    machine: Machine,
    starts: Vec<u64>,
    /// The same, to the millisecond (what usage is reckoned from).
    start_times: Vec<Time>,
    started: Vec<u32>,
    users: Users,
    rng: Option<ChaCha8Rng>,
    /// The queue in the orders the slots are taken from (`kept.rs`).
    views: Views,
    /// v3 and later only (`wide`): the waiting jobs' slowdowns so far and
    /// the largest projected mean (`kept.rs`); kept empty for v1 and v2,
    /// whose decisions read neither.
    wide: bool,
    pending: Waiting,
    largest: Largest,
    /// The last time the core told (a rank's reckoning needs one; `left`
    /// comes without).
    clock: Time,
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
            Who::Network(model),
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
        let mut learned = Learned::of(Who::Network(model), norm, jobs, cores, rng);
        learned.limited = tasks.iter().map(|t| t.time_limit.is_some()).collect();
        learned
    }

    /// For `window` of `workload`, keeping every decision with a choice in
    /// `steps` (the trainer's episodes in slurp's model); `rng` draws the
    /// network's choices (its best slot without one).
    pub fn recording(
        who: Who,
        workload: &Workload,
        window: Window,
        rng: Option<ChaCha8Rng>,
    ) -> Learned {
        let norm = match &who {
            Who::Network(model) => model.normalisers,
            Who::Teacher(..) => Normalisers::of(workload),
        };
        let mut learned = Learned::of(
            who,
            norm,
            workload.jobs[window.range()].to_vec(),
            workload.machine.procs(),
            rng,
        );
        learned.steps = Some(Vec::new());
        learned
    }

    fn of(
        who: Who,
        norm: Normalisers,
        jobs: Vec<SimJob>,
        cores: u64,
        rng: Option<ChaCha8Rng>,
    ) -> Learned {
        let wide = who.sight().wide();
        Learned {
            wide,
            who,
            norm,
            standing: Standing::default(),
            steps: None,
            machine: Machine {
                nodes: u32::try_from(cores).unwrap_or(u32::MAX),
                procs_per_node: 1,
            },
            starts: vec![0; jobs.len()],
            start_times: vec![Time(0); jobs.len()],
            started: Vec::new(),
            limited: vec![true; jobs.len()],
            jobs,
            users: Users::default(),
            rng,
            views: Views::new(wide),
            pending: Waiting::default(),
            largest: Largest::default(),
            clock: Time(0),
            failure: None,
        }
    }
}

impl Learned {
    /// v2's, v3's or v4's observation; v3's and v4's with the `largest`
    /// projected mean.
    fn observe_v2(&self, d: &Decision<'_>, slots: Vec<u32>, largest: Option<f64>) -> Observation {
        // One-core nodes: fitting the free nodes is fitting the free cores.
        let shown: Vec<Shown> = slots
            .iter()
            .map(|&j| Shown::of(&self.jobs[j as usize], d.now, d.fits(j)))
            .collect();
        let now = Time(d.now * 1000);
        let projection = largest.map(|largest| {
            if cfg!(debug_assertions) {
                let scanned = Projection::scan(&self.standing, &self.pending, now).largest();
                assert!(
                    (largest - scanned).abs() <= 1e-9 * scanned.abs().max(1.0),
                    "kept largest mean {largest} against {scanned} scanned"
                );
            }
            Projection::kept(&self.pending, largest)
        });
        observe_v2::observe(
            &shown,
            slots,
            self.machine.procs(),
            &self.standing,
            projection,
            now,
            self.who.sight(),
        )
    }

    /// v3: after a change to `user`'s queue or its jobs, where it stands in
    /// fair-share turns and its projected mean.
    fn place_user(&mut self, user: i64) {
        if !self.wide {
            return;
        }
        self.views.place(&self.standing, user, self.clock);
        self.largest.update(&self.standing, &self.pending, user);
    }
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
            self.views.len(),
            queue.len(),
            "the chooser's view of the queue"
        );
        // The slots from the sorted views kept since the tasks were queued:
        // reading and selecting from a queue of thousands at every decision
        // was most of a run's time.
        let wide = self.wide;
        let slots = self.views.slots(&self.standing, now);
        let largest = wide.then(|| self.largest.at(&self.standing, &self.pending, now));
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
            // Not read by the slots: no reservation is asked for.
            running: &[],
        };
        debug_assert_eq!(
            slots,
            if wide {
                observe_v2::wide_slots(&decision, &self.standing, now)
            } else {
                crate::observe::slots(&decision)
            },
            "slots from the kept views"
        );
        let obs = match self.who.sight() {
            Sight::V1 => observe_slots(&decision, slots, &self.norm, &mut self.users),
            _ => self.observe_v2(&decision, slots, largest),
        };
        let chosen = match &self.who {
            Who::Network(model) => model.logits(&obs).map(|logits| match self.steps {
                Some(_) => choose(&logits, self.rng.as_mut()),
                None => {
                    let slot = pick(&logits, self.rng.as_mut());
                    // Once the ended jobs show exact estimates, the
                    // network's shortlist for them (`exact.rs`).
                    let slot = match model.shortlist_now(self.standing.exact()) {
                        Some(list) => list.pick(
                            &logits,
                            slot,
                            &obs,
                            &self.jobs,
                            decision.now,
                            decision.machine.procs(),
                        ),
                        None => slot,
                    };
                    (slot, 0.0)
                }
            }),
            Who::Teacher(order, _) => {
                let now = decision.now;
                // `fairshare` ranks users by the usage v2's standing keeps.
                let key = |j: u32| {
                    let job = &self.jobs[j as usize];
                    match order {
                        Order::Fairshare => (
                            float_key(self.standing.usage(job.user, Time(now * 1000))),
                            0,
                        ),
                        _ => reference::key(*order, job, now),
                    }
                };
                let slot = (0..obs.jobs.len())
                    .min_by_key(|&s| (key(obs.jobs[s]), obs.jobs[s]))
                    .unwrap_or(0);
                Ok((slot, 0.0))
            }
        };
        match chosen {
            Ok((slot, logp)) => {
                let Some(&task) = obs.jobs.get(slot) else {
                    return first;
                };
                if let Some(steps) = &mut self.steps {
                    steps.push(Step {
                        features: obs.features,
                        mask: obs.mask,
                        action: slot as i64,
                        logp,
                    });
                }
                task
            }
            Err(e) => {
                self.failure.get_or_insert(e);
                first
            }
        }
    }

    fn started(&mut self, now: Time, task: u32) {
        self.clock = now;
        if let Some(start) = self.starts.get_mut(task as usize) {
            *start = now.0 / 1000;
            self.start_times[task as usize] = now;
            self.started.push(task);
            let job = self.jobs[task as usize];
            self.standing.started(
                job.user,
                (now.0 / 1000).saturating_sub(job.submit),
                job.estimate,
                job.procs.into(),
                now,
            );
            self.place_user(job.user);
        }
    }

    fn ended(&mut self, now: Time, task: u32) {
        self.clock = now;
        if let Some(&job) = self.jobs.get(task as usize) {
            let start = self.start_times[task as usize];
            let estimate = self.limited[task as usize].then_some(job.estimate);
            self.standing
                .ended(job.user, job.procs.into(), estimate, start, now);
            self.place_user(job.user);
        }
    }

    fn queued(&mut self, ready: Time, task: u32) {
        self.clock = self.clock.max(ready);
        if let Some(job) = self.jobs.get_mut(task as usize) {
            job.submit = ready.0 / 1000;
            self.views.queued(job, task);
            if self.wide {
                let user = job.user;
                self.pending.queued(user, job.submit, job.estimate);
                self.place_user(user);
            }
        }
    }

    fn left(&mut self, task: u32) {
        if let Some(job) = self.jobs.get(task as usize) {
            self.views.left(job, task);
            if !self.wide {
                return;
            }
            self.pending.left(job.user, job.submit, job.estimate);
            self.place_user(job.user);
        }
    }
}

/// The schedule the policy makes of `window` in slurp's own model: the
/// runtime core choosing with the model, backfilling with EASY when
/// `backfill` (with the network the model carries for EASY, when it has
/// one). Deterministic for `sample: None` and for each seed.
pub fn replay(
    model: Arc<Model>,
    workload: &Workload,
    window: Window,
    backfill: bool,
    sample: Option<u64>,
) -> Result<Schedule, ModelError> {
    let (schedule, learned) = play(
        Learned::new(model.in_slurp(backfill), workload, window, sample),
        workload,
        window,
        backfill,
    );
    match learned.failure {
        Some(e) => Err(e),
        None => Ok(schedule),
    }
}

/// Replays `window` in slurp's model with `learned` choosing (EASY around
/// its choice when `backfill`); gives the chooser back with the schedule.
pub fn play(
    learned: Learned,
    workload: &Workload,
    window: Window,
    backfill: bool,
) -> (Schedule, Learned) {
    let shared = Shared(Arc::new(Mutex::new(learned)));
    let policy = if backfill {
        PolicyKind::EASY
    } else {
        PolicyKind::FCFS
    };
    let schedule =
        slurp_sim::engine::run_with(workload, window, policy, Some(Box::new(shared.clone())));
    let learned = match Arc::try_unwrap(shared.0) {
        Ok(lock) => lock.into_inner().unwrap_or_else(|e| e.into_inner()),
        Err(_) => unreachable!("the core dropped its chooser when the replay ended"),
    };
    (schedule, learned)
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

    fn ended(&mut self, now: Time, task: u32) {
        if let Ok(mut learned) = self.0.lock() {
            learned.ended(now, task);
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
    /// The run backfills with EASY (`--policy fair+easy`): the model's
    /// network for EASY chooses, when it carries one.
    pub easy: bool,
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
            self.model.in_slurp(self.easy),
            &tasks,
            capacity.total_cores(),
            self.sample,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In a real run a task without a time limit is given the longest
    /// limit as its estimate, which says nothing of how well limits are
    /// set: forty tasks that each ran two hours make the estimates exact
    /// when each asked for an hour, and not when none asked for anything
    /// (each then taken to ask for an hour too).
    #[test]
    fn a_real_run_counts_only_tasks_with_a_time_limit_toward_exact_estimates() {
        let model = Arc::new(crate::built_in("fair-v14").unwrap());
        let exact = |time_limit: Option<u64>| {
            let tasks: Vec<Task> = (0..40)
                .map(|i| Task {
                    cores: 1,
                    time_limit,
                    user: i % 3,
                })
                .collect();
            let mut learned = Learned::for_tasks(model.clone(), &tasks, 4, None);
            for task in 0..40 {
                learned.queued(Time(0), task);
                learned.left(task);
                learned.started(Time(0), task);
                learned.ended(Time(7_200_000), task);
            }
            learned.standing.exact()
        };
        assert!(exact(Some(3_600)));
        assert!(!exact(None));
    }
}
