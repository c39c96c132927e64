//! The real-time driver: a thin tokio loop around scheduler cores.
//!
//! A run is a tree of instances, each a scheduler core over one workflow on
//! one slice: the top level owns the whole instance; a nested entry, once
//! its core starts it, becomes a child instance in this same process that
//! owns exactly the cores and GPUs its entry was given (its logical ids map
//! through the parent's allocation to the top level's), schedules its own
//! file there with its own policy, and ends its entry in the parent when it
//! is done: success if all its tasks succeeded, failure otherwise. Task ids
//! carry the path (`sub/sim[3]`).
//!
//! The loop tells each core the time and which attempts ended, turns
//! `Start` decisions into launches, forwards events to an [`Observer`], and
//! handles interruption: the first Ctrl-C or SIGTERM stops starting tasks
//! at every level and asks every running group to stop (SIGTERM, SIGKILL
//! after the grace period); a second one kills at once.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, watch};

use crate::core::{Alloc, Chooser, Core, Event, Outcome, PolicyKind, Reason, State, Time};
use crate::exec::{self, Finished, Launch, Output, OutputMode, Rank, Stop};
use crate::ir::{FileId, Program, TaskId, Workflow, WorkflowId};
use crate::journal::{Journal, Placed, Record};
use crate::resources::{Capacity, Machine};

pub use crate::halt::Halt;

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub capacity: Capacity,
    pub machine: Machine,
    /// The policy of each level of nesting, the last one for all deeper
    /// levels; a nested entry's `policy=` wins for its instance.
    pub policies: Vec<PolicyKind>,
    /// A learned policy choosing the head at each level, beside
    /// `policies` (the last for all deeper levels; none when empty). The
    /// level's policy then gives only the backfilling.
    pub learned: Vec<Option<std::sync::Arc<dyn Learned>>>,
    /// The learned policies nested entries name (`policy=fair:M.onnx`),
    /// loaded before the run, by the file that names them and the name.
    pub named: std::collections::HashMap<(FileId, String), Own>,
    /// Bind ranks to their cores.
    pub bind: bool,
    pub output: OutputMode,
    /// How group-mode output is shown and kept (`--tag`, `--keep-order`,
    /// `--results`).
    pub show: crate::show::Options,
    pub halt: Halt,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Where relative working directories start.
    pub cwd: PathBuf,
    /// This run's directory (`SLURP_RUN_DIR`, output files).
    pub run_dir: PathBuf,
    /// How deep this slurp itself is nested in other slurps' tasks
    /// (`SLURP_DEPTH` of its environment; 0 at the outermost).
    pub depth: u32,
    /// `slurp resume`: the keys of tasks that already succeeded, counted;
    /// a task whose key has a credit left is not run again.
    pub resume: std::collections::HashMap<u64, usize>,
    /// `--joblog FILE`: GNU parallel's tab-separated log of attempts.
    pub joblog: Option<PathBuf>,
    /// Add to an existing joblog (a resumed run, as `parallel --resume`
    /// does) instead of starting it anew.
    pub joblog_append: bool,
    /// The Slurm job slurp runs in: ranks start as its steps, node `n` of
    /// the instance being the job's node `n`.
    pub allocation: Option<std::sync::Arc<crate::backend::allocation::Allocation>>,
}

/// A nested entry's own policy: an order and backfilling, and a learned
/// chooser on top when it names one.
#[derive(Debug, Clone)]
pub struct Own {
    pub policy: PolicyKind,
    pub learned: Option<std::sync::Arc<dyn Learned>>,
}

/// The core of an instance at nesting `level`: the nested entry's `own`
/// policy when it has one, else the level's, with the learned chooser of
/// whichever it is.
fn core_for(
    opts: &RunOptions,
    level: usize,
    own: Option<Own>,
    capacity: Capacity,
    workflow: &Workflow,
    now: Time,
) -> Core {
    let at = |n: usize| level.min(n.saturating_sub(1));
    let (policy, learned) = match own {
        Some(own) => (own.policy, own.learned),
        None => (
            opts.policies[at(opts.policies.len())],
            opts.learned.get(at(opts.learned.len())).cloned().flatten(),
        ),
    };
    let mut core = Core::for_workflow(capacity, policy, workflow, now);
    if let Some(learned) = learned {
        core.set_chooser(now, learned.chooser(workflow, &capacity));
    }
    core
}

/// A learned policy: it makes the chooser of each instance's core.
pub trait Learned: std::fmt::Debug + Send + Sync {
    fn chooser(&self, workflow: &Workflow, capacity: &Capacity) -> Box<dyn Chooser>;
}

/// Sees what happens during a run.
pub trait Observer {
    /// `scope` is the instance's path: empty for the top level, `sub/` for
    /// the instance of nested entry `sub`.
    fn event(&mut self, program: &Program, workflow: WorkflowId, scope: &str, event: &Event);
    /// Task output to show: a whole task's (group mode) or a line (tag).
    fn output(&mut self, name: &str, stderr: bool, bytes: &[u8]);
}

/// One task that did not succeed, for the summary.
#[derive(Debug, Clone)]
pub struct Failure {
    pub workflow: WorkflowId,
    pub task: TaskId,
    /// The path of its instance: `` or `sub/`.
    pub scope: String,
    /// With its path: `sub/sim[3]`.
    pub name: String,
    pub state: State,
    pub reason: Reason,
    pub attempts: u32,
    pub stderr_tail: String,
    pub error: Option<String>,
}

/// How a run ended.
#[derive(Debug)]
pub struct Report {
    /// Tasks of the top level per state (a nested entry counts as one).
    pub counts: [usize; 9],
    /// Every task that did not succeed, at every level, parents first.
    pub failures: Vec<Failure>,
    pub interrupted: bool,
    /// Stopped early because `--halt …,success=…` was met: what did not
    /// run was not wanted.
    pub halted_on_success: bool,
    pub elapsed: Duration,
}

impl Report {
    pub fn succeeded(&self) -> bool {
        self.counts[State::Succeeded as usize] == self.counts.iter().sum::<usize>()
    }
}

const JOBLOG_HEADER: &[u8] =
    b"Seq\tHost\tStarttime\tJobRuntime\tSend\tReceive\tExitval\tSignal\tCommand\n";

/// The joblog at `path`: created anew with its header, or — `append`, for
/// a resumed run — kept, its header written only if it is empty.
fn open_joblog(path: &std::path::Path, append: bool) -> std::io::Result<std::fs::File> {
    let named =
        |e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let mut file = if append {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(named)?
    } else {
        std::fs::File::create(path).map_err(named)?
    };
    if file.metadata().map_err(named)?.len() == 0 {
        std::io::Write::write_all(&mut file, JOBLOG_HEADER).map_err(named)?;
    }
    Ok(file)
}

/// The largest `Seq` of an existing joblog (0 if none), so a resumed run
/// numbers on from it.
fn last_seq(path: &std::path::Path) -> u64 {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split('\t').next()?.parse::<u64>().ok())
        .max()
        .unwrap_or(0)
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// One scheduler core over one workflow on one slice.
struct Instance {
    workflow: WorkflowId,
    core: Core,
    /// The parent instance and the nested entry this instance runs for.
    parent: Option<(usize, TaskId)>,
    /// This instance's node `i` is top-level node `nodes[i]`; its logical
    /// core `j` there is top-level core `cores[i][j]`; likewise GPUs.
    nodes: Vec<u32>,
    cores: Vec<Vec<u32>>,
    gpus: Vec<Vec<u32>>,
    /// Prefix of its task ids: `` or `sub/`.
    path: String,
    level: usize,
    done: bool,
    /// Why attempts failed, for the summary.
    tails: Vec<(TaskId, String, Option<String>)>,
    /// Tells this instance's running attempts to stop.
    stop: watch::Sender<Stop>,
    /// A nested entry's time limit, when it has one.
    deadline: Option<Time>,
    timed_out: bool,
}

struct Driver<'p> {
    program: &'p Program,
    opts: &'p RunOptions,
    instances: Vec<Instance>,
    started: Instant,
    /// Processes running now, at every level.
    running: usize,
    /// Set once the whole run is being stopped.
    stopping: Stop,
    journal: Option<Journal>,
    /// A journal write failed (reported once).
    journal_error: bool,
    /// What is left of `RunOptions::resume`.
    credits: std::collections::HashMap<u64, usize>,
    joblog: Option<std::fs::File>,
    /// Attempts started, numbered for the joblog's `Seq`.
    seq: u64,
    seqs: std::collections::HashMap<(u32, TaskId), u64>,
    done_tx: mpsc::UnboundedSender<Finished>,
    line_tx: mpsc::UnboundedSender<Output>,
    shown: crate::show::Shown,
    /// Tasks ended for good, at every level, for `--halt`.
    ended: crate::halt::Ended,
    /// The run stopped because a `--halt …,success=` condition was met.
    halted_on_success: bool,
}

/// Runs the top-level workflow of `program`, and every workflow it nests,
/// to the end.
pub async fn run(
    program: &Program,
    opts: &RunOptions,
    observer: &mut dyn Observer,
    journal: Option<Journal>,
) -> std::io::Result<Report> {
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Finished>();
    let (line_tx, mut line_rx) = mpsc::unbounded_channel::<Output>();
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let capacity = opts.capacity;
    let mut driver = Driver {
        program,
        opts,
        instances: Vec::new(),
        started: Instant::now(),
        running: 0,
        stopping: Stop::Run,
        journal,
        journal_error: false,
        credits: opts.resume.clone(),
        joblog: match &opts.joblog {
            Some(path) => Some(open_joblog(path, opts.joblog_append)?),
            None => None,
        },
        seq: match &opts.joblog {
            Some(path) if opts.joblog_append => last_seq(path),
            _ => 0,
        },
        seqs: Default::default(),
        done_tx,
        line_tx,
        shown: crate::show::Shown::new(opts.show.clone()),
        ended: crate::halt::Ended {
            total: program.root().tasks.len() as u64,
            ..Default::default()
        },
        halted_on_success: false,
    };
    let root = Instance {
        workflow: WorkflowId(0),
        core: core_for(opts, 0, None, capacity, program.root(), Time(0)),
        parent: None,
        nodes: (0..capacity.nodes).collect(),
        cores: vec![(0..capacity.cores_per_node).collect(); capacity.nodes as usize],
        gpus: vec![(0..capacity.gpus_per_node).collect(); capacity.nodes as usize],
        path: String::new(),
        level: 0,
        done: false,
        tails: Vec::new(),
        stop: watch::channel(Stop::Run).0,
        deadline: None,
        timed_out: false,
    };
    driver.instances.push(root);
    driver.resume(0);
    let mut interrupted = false;
    let mut dirty = vec![0usize];

    loop {
        driver.step(&mut dirty, observer);
        if driver.instances[0].done {
            break;
        }
        let deadline = driver
            .instances
            .iter()
            .filter(|i| !i.done && !i.timed_out)
            .filter_map(|i| i.deadline)
            .min();
        let wake = deadline
            .map(|d| tokio::time::Instant::from_std(driver.started + Duration::from_millis(d.0)));
        tokio::select! {
            // Lines first: a task's last lines are shown before it is
            // reported finished.
            biased;
            Some(output) = line_rx.recv() => driver.output(output, observer),
            Some(finished) = done_rx.recv() => {
                while let Ok(output) = line_rx.try_recv() {
                    driver.output(output, observer);
                }
                driver.finished(finished, observer);
                driver.show_ended(observer);
                dirty.extend(0..driver.instances.len());
            }
                        _ = sleep_until(wake) => {
                driver.expire();
                dirty.extend(0..driver.instances.len());
            }
            _ = interrupt.recv() => {
                driver.interrupt(&mut interrupted);
                dirty.extend(0..driver.instances.len());
            }
            _ = terminate.recv() => {
                driver.interrupt(&mut interrupted);
                dirty.extend(0..driver.instances.len());
            }
        }
    }

    driver.show_ended(observer);
    let root = &driver.instances[0];
    let names = |t| {
        format!(
            "{}{}",
            root.path,
            program.workflow(root.workflow).task_name(t)
        )
    };
    driver.shown.flush_all(names, observer);
    let end = Record::End {
        t: driver.now().0,
        interrupted,
    };
    driver.log(end);
    let mut failures = Vec::new();
    for instance in &driver.instances {
        let workflow = program.workflow(instance.workflow);
        for task in workflow.task_ids() {
            let state = instance.core.state(task);
            if state == State::Succeeded {
                continue;
            }
            let (tail, error) = instance
                .tails
                .iter()
                .rev()
                .find(|(t, _, _)| *t == task)
                .map(|(_, tail, error)| (tail.clone(), error.clone()))
                .unwrap_or_default();
            failures.push(Failure {
                workflow: instance.workflow,
                task,
                scope: instance.path.clone(),
                name: format!("{}{}", instance.path, workflow.task_name(task)),
                state,
                reason: instance.core.reason(task),
                attempts: instance.core.attempts(task),
                stderr_tail: tail,
                error,
            });
        }
    }
    Ok(Report {
        counts: driver.instances[0].core.counts(),
        failures,
        interrupted,
        halted_on_success: driver.halted_on_success,
        elapsed: driver.started.elapsed(),
    })
}

impl Driver<'_> {
    fn now(&self) -> Time {
        Time(self.started.elapsed().as_millis() as u64)
    }

    fn log(&mut self, record: Record) {
        let Some(journal) = &mut self.journal else {
            return;
        };
        if let Err(e) = journal.write(&record)
            && !self.journal_error
        {
            self.journal_error = true;
            eprintln!(
                "slurp: cannot write the journal {}: {e}; this run cannot be resumed",
                journal.dir().join("events.jsonl").display()
            );
        }
    }

    /// A line of output to show, or an attempt's process group to journal.
    fn output(&mut self, output: Output, observer: &mut dyn Observer) {
        match output {
            Output::Line {
                instance,
                task,
                stderr,
                line,
            } => observer.output(&self.name(instance as usize, task), stderr, &line),
            Output::Group { .. } if self.journal.is_none() => {}
            Output::Group {
                instance,
                task,
                attempt,
                pgid,
            } => {
                let record = Record::Group {
                    t: self.now().0,
                    task: self.name(instance as usize, task),
                    attempt,
                    pgid,
                    boot: crate::journal::boot_id(),
                };
                self.log(record);
            }
        }
    }

    fn name(&self, instance: usize, task: TaskId) -> String {
        let inst = &self.instances[instance];
        format!(
            "{}{}",
            inst.path,
            self.program.workflow(inst.workflow).task_name(task)
        )
    }

    /// Schedules the instances that may have work, acts on their decisions,
    /// and closes instances that are done, until nothing changes.
    fn step(&mut self, dirty: &mut Vec<usize>, observer: &mut dyn Observer) {
        while let Some(i) = dirty.pop() {
            if self.instances[i].done {
                continue;
            }
            let now = self.now();
            self.instances[i].core.schedule(now);
            let events: Vec<Event> = self.instances[i].core.drain().collect();
            for event in &events {
                let placed = match event {
                    Event::Start { alloc, .. } => self.place(i, alloc),
                    Event::Transition { .. } => Vec::new(),
                };
                // Journaled before it is acted on: a start is on record
                // before its process exists.
                if let Some(journal) = &self.journal {
                    let record = journal.record(
                        self.program,
                        self.instances[i].workflow,
                        &self.instances[i].path,
                        event,
                        &placed,
                    );
                    self.log(record);
                }
                observer.event(
                    self.program,
                    self.instances[i].workflow,
                    &self.instances[i].path,
                    event,
                );
                if let Event::Start { task, attempt, .. } = event {
                    self.start(i, *task, *attempt, placed, dirty);
                }
            }
            if self.instances[i].core.is_done() {
                self.close(i, dirty);
            }
            dirty.sort_unstable();
            dirty.dedup();
        }
    }

    /// An allocation of instance `i` in top-level ids, slice by slice.
    fn place(&self, i: usize, alloc: &Alloc) -> Vec<Placed> {
        let inst = &self.instances[i];
        alloc
            .slices
            .iter()
            .map(|s| {
                let n = s.node as usize;
                Placed {
                    node: inst.nodes[n],
                    cores: s.cores.iter().map(|&c| inst.cores[n][c as usize]).collect(),
                    gpus: s.gpus.iter().map(|&g| inst.gpus[n][g as usize]).collect(),
                    mem: s.mem,
                }
            })
            .collect()
    }

    fn start(
        &mut self,
        i: usize,
        task: TaskId,
        attempt: u32,
        slices: Vec<Placed>,
        dirty: &mut Vec<usize>,
    ) {
        let inst = &self.instances[i];
        let workflow = self.program.workflow(inst.workflow);
        let t = workflow.task(task);
        if let Some(child) = t.nested {
            self.start_nested(i, task, child, &slices, dirty);
            return;
        }
        let request = t.request;
        let mut ranks = Vec::new();
        for Placed {
            node, cores, gpus, ..
        } in &slices
        {
            let per = request.cores as usize;
            let per_gpu = request.gpus as usize;
            for r in 0..cores.len() / per.max(1) {
                let cores = &cores[r * per..(r + 1) * per];
                let gpus = if per_gpu == 0 {
                    &[][..]
                } else {
                    &gpus[r * per_gpu..(r + 1) * per_gpu]
                };
                // Logical cores beyond the machine (an emulated instance),
                // or on another node, are scheduled but not bound.
                // Inside a Slurm job, this node is the one slurp runs on.
                let here = match &self.opts.allocation {
                    None => *node == 0,
                    Some(job) => job.starts_here(*node as usize),
                };
                let cpus: Option<Vec<usize>> = (self.opts.bind && here)
                    .then(|| {
                        cores
                            .iter()
                            .map(|&c| self.opts.machine.cpus.get(c as usize).copied())
                            .collect()
                    })
                    .flatten();
                ranks.push(Rank {
                    node: *node,
                    // A step's CPUs are Slurm's to pick on its node.
                    cpus: if self.opts.allocation.is_some() && !here {
                        Vec::new()
                    } else {
                        cpus.unwrap_or_default()
                    },
                    cores: cores.to_vec(),
                    gpus: gpus
                        .iter()
                        .map(|&g| {
                            self.opts
                                .machine
                                .gpus
                                .get(g as usize)
                                .cloned()
                                .unwrap_or_else(|| g.to_string())
                        })
                        .collect(),
                });
            }
        }
        // A launcher starts the copies itself: slurp starts it once, on
        // every core and GPU the task holds (it places the copies there).
        if workflow.launcher(task).is_some() && ranks.len() > 1 {
            let mut whole = ranks[0].clone();
            for rank in &ranks[1..] {
                if rank.node == whole.node {
                    whole.cpus.extend(&rank.cpus);
                    whole.cores.extend(&rank.cores);
                    whole.gpus.extend(rank.gpus.iter().cloned());
                }
            }
            ranks = vec![whole];
        }
        let name = self.name(i, task);
        let cwd = match workflow.cwd(task) {
            Some(dir) => self.opts.cwd.join(dir),
            None => self.opts.cwd.clone(),
        };
        let files = match (workflow.output(task), self.opts.output) {
            (Some(file), _) => {
                let path = cwd.join(file);
                Some((path.clone(), path))
            }
            (None, OutputMode::Files) => {
                let dir = self.opts.run_dir.join("out");
                let safe = name.replace('/', "_");
                Some((
                    dir.join(format!("{safe}.out")),
                    dir.join(format!("{safe}.err")),
                ))
            }
            _ => None,
        };
        self.running += 1;
        self.seq += 1;
        self.seqs.insert((i as u32, task), self.seq);
        let launch = Launch {
            allocation: self.opts.allocation.clone(),
            instance: i as u32,
            task,
            attempt,
            name,
            // `{%}`: one more than the first core the task holds.
            argv: workflow.argv_in_slot(
                task,
                ranks.first().and_then(|r| r.cores.first()).map(|c| c + 1),
            ),
            env: workflow.environment(task),
            cwd,
            ranks,
            time_limit: t.time_limit.map(|s| Duration::from_secs(s.get())),
            mode: self.opts.output,
            files,
            run_dir: self.opts.run_dir.clone(),
            grace: self.opts.grace,
            depth: self.opts.depth + inst.level as u32 + 1,
            // Under a launcher one process group holds every copy.
            mem: match workflow.launcher(task) {
                Some(_) => request.total_mem(),
                None => request.mem,
            },
            yield_after_spawn: self.running == 1,
            pmi: workflow.pmi(task),
        };
        let (stop, done) = (self.instances[i].stop.subscribe(), self.done_tx.clone());
        let lines = self.line_tx.clone();
        tokio::spawn(async move {
            let finished = exec::run_attempt(launch, stop, lines).await;
            let _ = done.send(finished);
        });
    }

    /// A nested entry started: its child instance takes over its slice.
    fn start_nested(
        &mut self,
        i: usize,
        task: TaskId,
        child: WorkflowId,
        slices: &[Placed],
        dirty: &mut Vec<usize>,
    ) {
        let parent = &self.instances[i];
        let workflow = self.program.workflow(parent.workflow);
        let template = workflow.template(workflow.task(task).template);
        let request = workflow.task(task).request;
        let level = parent.level + 1;
        let own = template
            .extras
            .as_ref()
            .and_then(|x| x.policy.as_deref())
            .and_then(|p| match p.parse() {
                Ok(policy) => Some(Own {
                    policy,
                    learned: None,
                }),
                Err(_) => self
                    .opts
                    .named
                    .get(&(template.source.file, p.to_owned()))
                    .cloned(),
            });
        // Every node of the slice counts as the smallest share it got, so
        // the child can never use more than it was given.
        let capacity = Capacity {
            nodes: slices.len() as u32,
            cores_per_node: slices
                .iter()
                .map(|s| s.cores.len() as u32)
                .min()
                .unwrap_or(0),
            gpus_per_node: slices
                .iter()
                .map(|s| s.gpus.len() as u32)
                .min()
                .unwrap_or(0),
            mem_per_node: if request.mem > 0 {
                slices.iter().map(|s| s.mem).min().unwrap_or(0)
            } else {
                self.opts.capacity.mem_per_node
            },
        };
        let path = format!("{}{}/", parent.path, workflow.task_name(task));
        let child_wf = self.program.workflow(child);
        let now = self.now();
        let too_big = child_wf
            .task_ids()
            .find(|&t| capacity.fits(&child_wf.task(t).request).is_err());
        if let Some(t) = too_big {
            // Checked against its slice before the run; a slice spread over
            // nodes at run time can still be too small.
            let why = format!(
                "task `{path}{}` does not fit the slice it was given ({capacity})",
                child_wf.task_name(t)
            );
            self.instances[i]
                .tails
                .push((task, String::new(), Some(why)));
            self.instances[i]
                .core
                .on_finished(now, task, Outcome::SpawnError);
            dirty.push(i);
            return;
        }
        let deadline = workflow
            .task(task)
            .time_limit
            .map(|s| now.plus_secs(s.get()));
        // Joining a run that is already being stopped: stop at once too.
        let stop = watch::channel(self.stopping).0;
        self.instances.push(Instance {
            workflow: child,
            core: core_for(self.opts, level, own, capacity, child_wf, now),
            parent: Some((i, task)),
            stop,
            deadline,
            timed_out: false,
            nodes: slices.iter().map(|s| s.node).collect(),
            cores: slices.iter().map(|s| s.cores.clone()).collect(),
            gpus: slices.iter().map(|s| s.gpus.clone()).collect(),
            path,
            level,
            done: false,
            tails: Vec::new(),
        });
        self.resume(self.instances.len() - 1);
        dirty.push(self.instances.len() - 1);
    }

    /// Marks the tasks of a new instance that already succeeded in the run
    /// being resumed (each success is one credit; nested entries are never
    /// credited — their child instance's tasks are).
    fn resume(&mut self, i: usize) {
        if self.credits.is_empty() {
            return;
        }
        let now = self.now();
        let inst = &mut self.instances[i];
        let workflow = self.program.workflow(inst.workflow);
        let credits = &mut self.credits;
        let scope = inst.path.clone();
        inst.core.resume(now, |task| {
            if workflow.task(task).nested.is_some() {
                return false;
            }
            match credits.get_mut(&workflow.key(task, &scope)) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    true
                }
                _ => false,
            }
        });
    }

    /// Every task of instance `i` reached a final state: its entry in the
    /// parent ends, successfully only if they all succeeded.
    fn close(&mut self, i: usize, dirty: &mut Vec<usize>) {
        self.instances[i].done = true;
        let Some((parent, task)) = self.instances[i].parent else {
            return;
        };
        let counts = self.instances[i].core.counts();
        let total: usize = counts.iter().sum();
        let ok = counts[State::Succeeded as usize];
        let outcome = if self.instances[i].timed_out {
            Outcome::Timeout
        } else if ok == total {
            Outcome::Success
        } else {
            let why = format!(
                "{} of {total} tasks of its workflow did not succeed",
                total - ok
            );
            self.instances[parent]
                .tails
                .push((task, String::new(), Some(why)));
            if self.stopping == Stop::Run {
                Outcome::Exit(1)
            } else {
                Outcome::Cancelled
            }
        };
        let now = self.now();
        self.instances[parent].core.on_finished(now, task, outcome);
        dirty.push(parent);
    }

    fn finished(&mut self, finished: Finished, observer: &mut dyn Observer) {
        self.running -= 1;
        let i = finished.instance as usize;
        self.joblog_line(&finished);
        let name = self.name(i, finished.task);
        let workflow = self.program.workflow(self.instances[i].workflow);
        let stderr: &[u8] = match self.opts.output {
            OutputMode::Group => &finished.stderr,
            _ => &[],
        };
        self.shown.attempt(
            workflow,
            finished.task,
            &name,
            i == 0,
            &finished.stdout,
            stderr,
            observer,
        );
        if finished.outcome != Outcome::Success {
            self.instances[i].tails.push((
                finished.task,
                finished.stderr_tail.clone(),
                finished.error.clone(),
            ));
        }
        let now = self.now();
        let core = &mut self.instances[i].core;
        core.on_finished(now, finished.task, finished.outcome);
        match core.state(finished.task) {
            State::Failed | State::Timeout => self.ended.failed += 1,
            State::Succeeded => self.ended.succeeded += 1,
            _ => return,
        }
        if self.opts.halt.reached(self.ended) && !self.instances[0].core.is_halted() {
            self.halted_on_success = self.opts.halt.on_success();
            self.halt_all();
            if matches!(self.opts.halt, Halt::Now(_)) {
                self.stop_all(Stop::Cancel);
            }
        }
    }

    /// `--keep-order`: the output of the top-level tasks that have ended,
    /// up to the first that has not.
    fn show_ended(&mut self, observer: &mut dyn Observer) {
        let root = &self.instances[0];
        let program = self.program;
        let tasks = program.workflow(root.workflow).tasks.len() as u32;
        let core = &root.core;
        let names = |t| {
            format!(
                "{}{}",
                root.path,
                program.workflow(root.workflow).task_name(t)
            )
        };
        self.shown
            .flush_ended(tasks, |t| core.state(t).is_final(), names, observer);
    }

    /// One line in GNU parallel's `--joblog` format. Exitval is the exit
    /// status, or -1 for a process killed by Signal (SIGTERM, 15, for a time
    /// limit or a cancel) or 127 for one that could not start.
    fn joblog_line(&mut self, finished: &Finished) {
        let Some(file) = &mut self.joblog else { return };
        let (exitval, signal) = match finished.outcome {
            Outcome::Success => (0, 0),
            Outcome::Exit(code) => (code, 0),
            Outcome::Signal(sig) => (-1, sig),
            Outcome::Timeout | Outcome::Cancelled => (-1, 15),
            Outcome::OutOfMemory => (-1, 9),
            Outcome::SpawnError => (127, 0),
        };
        let inst = &self.instances[finished.instance as usize];
        let workflow = self.program.workflow(inst.workflow);
        let command = workflow.command_line(finished.task, None);
        let end = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let start = end.saturating_sub(finished.elapsed).as_secs_f64();
        let seq = self
            .seqs
            .remove(&(finished.instance, finished.task))
            .unwrap_or(0);
        let line = format!(
            "{seq}\t:\t{start:.3}\t{:.3}\t0\t0\t{exitval}\t{signal}\t{}\n",
            finished.elapsed.as_secs_f64(),
            command.replace(['\t', '\n'], " ")
        );
        let _ = std::io::Write::write_all(file, line.as_bytes());
    }

    fn halt_all(&mut self) {
        let now = self.now();
        for instance in &mut self.instances {
            if !instance.core.is_halted() {
                instance.core.halt(now);
            }
        }
    }

    fn interrupt(&mut self, interrupted: &mut bool) {
        if *interrupted {
            self.stop_all(Stop::Kill);
        } else {
            *interrupted = true;
            self.halt_all();
            self.stop_all(Stop::Cancel);
        }
    }

    fn stop_all(&mut self, stop: Stop) {
        self.stopping = stop;
        for instance in &self.instances {
            instance.stop.send_replace(stop);
        }
    }

    /// Nested entries past their time limit: their instance, and every
    /// instance below it, start nothing more and stop what runs.
    fn expire(&mut self) {
        let now = self.now();
        let expired: Vec<usize> = (0..self.instances.len())
            .filter(|&i| {
                let inst = &self.instances[i];
                !inst.done && !inst.timed_out && inst.deadline.is_some_and(|d| d <= now)
            })
            .collect();
        for j in expired {
            self.instances[j].timed_out = true;
            for k in 0..self.instances.len() {
                if self.is_within(k, j) && !self.instances[k].done {
                    if !self.instances[k].core.is_halted() {
                        self.instances[k].core.halt(now);
                    }
                    self.instances[k].stop.send_replace(Stop::Cancel);
                }
            }
        }
    }

    /// Whether instance `k` is `j` or nested (at any depth) inside it.
    fn is_within(&self, mut k: usize, j: usize) -> bool {
        loop {
            if k == j {
                return true;
            }
            match self.instances[k].parent {
                Some((parent, _)) => k = parent,
                None => return false,
            }
        }
    }
}
