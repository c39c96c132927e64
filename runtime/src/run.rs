//! The real-time driver: a thin layer of threads around scheduler cores.
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
//! The driver tells each core the time and which attempts ended, turns
//! `Start` decisions into launches, forwards events to an [`Observer`], and
//! handles interruption. It is stepped under one lock by two kinds of
//! thread: the tokio event loop (this thread: timers, signals, the socket,
//! and the attempts that need watching) and one reaper thread a CPU
//! ([`exec::reaper`]), which reaps the plain attempts it started and runs
//! the step that follows their end itself, so that the next task starts
//! where the last one ended, with no hop through the loop.
//!
//! Interruption: the first Ctrl-C or SIGTERM stops starting tasks at every
//! level and asks every running group to stop (SIGTERM, SIGKILL after the
//! grace period); a second one kills at once.
//!
//! A run with a run directory is also a live instance: it listens on its
//! socket ([`crate::listen`]) and answers the requests of
//! [`crate::protocol`] between events — tasks submitted (lowered by the
//! caller's [`Submit`], journaled, added to the core of the instance they
//! name, top level or nested), waited for, cancelled, watched. An `open`
//! run does not end when its tasks have: only when it is closed.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, watch};

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::core::{Alloc, Chooser, Core, Event, Job, Outcome, PolicyKind, Reason, State, Time};
use crate::exec::reaper::lock;
use crate::exec::{self, Finished, Launch, Output, OutputMode, Rank, Stop};
use crate::ir::{FileId, Program, TaskId, Workflow, WorkflowId};
use crate::journal::{Journal, Placed, Record};
use crate::listen::{self, Incoming};
use crate::protocol::{Op, Refusal};
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
    pub learned: Vec<Option<Arc<dyn Learned>>>,
    /// The learned policies nested entries name (`policy=fair:M.onnx`),
    /// loaded before the run, by the file that names them and the name.
    pub named: HashMap<(FileId, String), Own>,
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
    /// `slurp resume`: the keys of tasks that already succeeded, counted
    /// (a task whose key has a credit left is not run again), and the
    /// cohorts' members that did, by range.
    pub resume: crate::journal::Credits,
    /// `--joblog FILE`: GNU parallel's tab-separated log of attempts.
    pub joblog: Option<PathBuf>,
    /// Add to an existing joblog (a resumed run, as `parallel --resume`
    /// does) instead of starting it anew.
    pub joblog_append: bool,
    /// The Slurm job slurp runs in: ranks start as its steps, node `n` of
    /// the instance being the job's node `n`.
    pub allocation: Option<Arc<crate::backend::allocation::Allocation>>,
    /// Serve the instance protocol on `run_dir/socket`.
    pub listen: bool,
    /// Stay open when every task has ended, until closed (a `close`
    /// request, `slurp close`, Ctrl-C) or until `open_for` has passed.
    pub open: bool,
    pub open_for: Option<Duration>,
    /// `slurp resume`: what was submitted to the run resumed, by instance
    /// path, in order; submitted again as each instance starts.
    pub resubmit: Vec<(String, Submission)>,
}

/// Tasks sent to a live instance, in the slurp language.
#[derive(Debug, Clone, PartialEq)]
pub struct Submission {
    pub text: String,
    /// The name diagnostics give the text (`submitted#3`, or a file's).
    pub source: String,
    /// Where its tasks run and its relative paths start.
    pub cwd: PathBuf,
}

/// Lowers submissions: the interpreter's work, done for the runtime by its
/// caller (the runtime never parses text).
pub trait Submit: Send {
    /// Appends the tasks of `submission` to `workflow` (templates, tasks
    /// and their dependency edges, on tasks already there or new ones),
    /// each checked to fit `capacity` (the instance at `scope`'s); returns
    /// the new tasks' ids. On a mistake nothing is added and the refusal
    /// carries the diagnostics.
    fn submit(
        &mut self,
        program: &mut Program,
        workflow: WorkflowId,
        scope: &str,
        capacity: Capacity,
        submission: &Submission,
    ) -> Result<std::ops::Range<u32>, Refusal>;

    /// The task line a jobspec (Flux RFC 25, version 1) stands for, named
    /// `name` unless it names itself.
    fn jobspec_line(&mut self, jobspec: &Value, name: &str) -> Result<String, Refusal>;
}

/// A nested entry's own policy: an order and backfilling, and a learned
/// chooser on top when it names one.
#[derive(Debug, Clone)]
pub struct Own {
    pub policy: PolicyKind,
    pub learned: Option<Arc<dyn Learned>>,
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
pub trait Observer: Send {
    /// `scope` is the instance's path: empty for the top level, `sub/` for
    /// the instance of nested entry `sub`.
    fn event(&mut self, program: &Program, workflow: WorkflowId, scope: &str, event: &Event);
    /// Task output to show: a whole task's (group mode) or a line (tag).
    fn output(&mut self, name: &str, stderr: bool, bytes: &[u8]);
    /// `count` tasks were submitted to the instance at `scope`.
    fn submitted(&mut self, _scope: &str, _count: usize) {}
}

/// One task that did not succeed, for the summary.
#[derive(Debug, Clone)]
pub struct Failure {
    pub workflow: WorkflowId,
    pub task: TaskId,
    /// How many tasks from `task` on it stands for: 1, or a stretch of a
    /// sweep's members that never started (all alike), ending at `last`.
    pub count: u32,
    /// The path of its instance: `` or `sub/`.
    pub scope: String,
    /// With its path: `sub/sim[3]`.
    pub name: String,
    pub last: Option<String>,
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
    /// Every task that did not succeed, at every level, parents first (a
    /// sweep's never-started members as one entry per stretch).
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

async fn accept(socket: Option<&listen::Socket>) -> Option<tokio::net::UnixStream> {
    match socket {
        Some(socket) => listen::accept(socket).await,
        None => std::future::pending().await,
    }
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
    /// The last failed attempt's, by task (a map: a run of 10⁶ failures
    /// must not look each up by a walk).
    tails: HashMap<TaskId, (String, Option<String>)>,
    /// What its attempts are told when they start: `Run`, or the stop
    /// the whole instance was given.
    stop: Stop,
    /// Its capacity (the slice of its nested entry).
    capacity: Capacity,
    /// Its workflow is its own (copied on the first submission: a nested
    /// workflow may be shared by many entries).
    owns_workflow: bool,
    /// Its tasks by id, made on the first request that names one.
    names: Option<HashMap<String, u32>>,
    /// A nested entry's time limit, when it has one.
    deadline: Option<Time>,
    timed_out: bool,
    /// The run-wide number of its core's first cohort (the journal's).
    cohorts: u32,
}

/// A `wait` request not yet answered.
struct Waiter {
    id: Value,
    reply: mpsc::UnboundedSender<String>,
    tasks: Vec<(usize, TaskId)>,
    /// Of `tasks`, how many have not ended.
    left: usize,
}

struct Driver<'p> {
    program: &'p mut Program,
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
    credits: crate::journal::Credits,
    joblog: Option<std::fs::File>,
    /// Attempts started, numbered for the joblog's `Seq`.
    seq: u64,
    seqs: HashMap<(u32, TaskId), u64>,
    done_tx: mpsc::UnboundedSender<Finished>,
    line_tx: mpsc::UnboundedSender<Output>,
    shown: crate::show::Shown,
    /// Tasks ended for good, at every level, for `--halt`.
    ended: crate::halt::Ended,
    /// The run stopped because a `--halt …,success=` condition was met.
    halted_on_success: bool,
    /// Each running attempt's stop, by instance and task, and the reaper
    /// that runs it, if one does (it is poked to look).
    attempts: HashMap<(u32, TaskId), (watch::Sender<Stop>, Option<usize>)>,
    submitter: Option<&'p mut dyn Submit>,
    /// Still taking submissions after every task has ended.
    open: bool,
    /// Submissions taken (for their names in diagnostics).
    submissions: u64,
    /// Unanswered `wait`s by number, and the waits each task is in: a task
    /// that ends looks up its own (100,000 futures of a Python executor
    /// must not make every end walk every wait).
    waiters: HashMap<u64, Waiter>,
    waiting_on: HashMap<(usize, TaskId), Vec<u64>>,
    next_waiter: u64,
    watchers: Vec<mpsc::UnboundedSender<String>>,
    /// The socket clients reach this run at, for the tasks' environment.
    socket: Option<Arc<std::path::Path>>,
    /// What `slurp resume` submits again, by scope.
    resubmit: Vec<(String, Submission)>,
    /// Cohorts numbered so far, run-wide.
    cohorts: u32,
    /// Where plain attempts start ([`exec::reaper`]).
    reapers: Arc<exec::reaper::Reapers>,
    /// The event loop's runtime, for the other attempts (a step may run on
    /// a reaper thread).
    handle: tokio::runtime::Handle,
}

/// The driver and the observer it reports to, behind the run's one lock:
/// the event loop and the reaper threads each take it for a step.
struct Locked<'p> {
    driver: Driver<'p>,
    observer: &'p mut dyn Observer,
}

/// Tells the reapers to return, however the event loop leaves (a panic
/// too): the scope that runs them waits for them.
struct ExitReapers<'a>(&'a exec::reaper::Reapers);

impl Drop for ExitReapers<'_> {
    fn drop(&mut self) {
        self.0.exit();
    }
}

/// Tells the event loop when a reaper thread panics: its attempts would
/// never be reported, and the loop would wait for them for ever. (The
/// scope then passes the panic on.)
struct Fallen<'a> {
    fallen: &'a std::sync::atomic::AtomicBool,
    news: &'a tokio::sync::Notify,
}

impl Drop for Fallen<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.fallen.store(true, std::sync::atomic::Ordering::SeqCst);
            self.news.notify_one();
        }
    }
}

/// Runs the top-level workflow of `program`, and every workflow it nests,
/// to the end: the event loop on `runtime` (this thread), and one reaper
/// thread a CPU for plain attempts ([`exec::reaper`]).
pub fn run<'p>(
    runtime: &tokio::runtime::Runtime,
    program: &'p mut Program,
    opts: &'p RunOptions,
    observer: &'p mut dyn Observer,
    journal: Option<Journal>,
    submitter: Option<&'p mut dyn Submit>,
) -> std::io::Result<Report> {
    let _entered = runtime.enter();
    let total = program.root().tasks.len() as u64;
    let socket = match opts.listen {
        true => Some(listen::bind(&opts.run_dir)?),
        false => None,
    };
    let (done_tx, done_rx) = mpsc::unbounded_channel::<Finished>();
    let (line_tx, line_rx) = mpsc::unbounded_channel::<Output>();
    let capacity = opts.capacity;
    // One reaper a CPU the run's cores can be on; none for a run with no
    // more tasks than cores and no more to come: few of its ends can be
    // followed by a start, and the threads would cost it more than they
    // save (about a millisecond of start-up, BENCHMARKS.md).
    let cpus = match opts.machine.cpus.len() {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let tasks: usize = program.workflows.iter().map(|w| w.tasks.len()).sum();
    let cores = capacity.nodes as usize * capacity.cores_per_node as usize;
    let more_to_come = opts.open || !opts.resubmit.is_empty();
    let reapers = Arc::new(exec::reaper::Reapers::new(
        if tasks > cores || more_to_come {
            cpus.min(capacity.cores_per_node as usize)
        } else {
            0
        },
    )?);
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
        line_tx: line_tx.clone(),
        shown: crate::show::Shown::new(opts.show.clone()),
        ended: crate::halt::Ended {
            total,
            ..Default::default()
        },
        halted_on_success: false,
        attempts: HashMap::new(),
        submitter,
        open: opts.open,
        submissions: 0,
        waiters: HashMap::new(),
        waiting_on: HashMap::new(),
        next_waiter: 0,
        watchers: Vec::new(),
        socket: socket.as_ref().map(|s| Arc::from(s.path.as_path())),
        resubmit: opts.resubmit.clone(),
        cohorts: 0,
        reapers: reapers.clone(),
        handle: runtime.handle().clone(),
    };
    let root = Instance {
        workflow: WorkflowId(0),
        core: core_for(opts, 0, None, capacity, driver.program.root(), Time(0)),
        parent: None,
        nodes: (0..capacity.nodes).collect(),
        cores: vec![(0..capacity.cores_per_node).collect(); capacity.nodes as usize],
        gpus: vec![(0..capacity.gpus_per_node).collect(); capacity.nodes as usize],
        path: String::new(),
        level: 0,
        done: false,
        tails: HashMap::new(),
        stop: Stop::Run,
        capacity,
        owns_workflow: true,
        names: None,
        deadline: None,
        timed_out: false,
        cohorts: 0,
    };
    driver.instances.push(root);
    driver.journal_cohorts(0);
    driver.resubmit_into(0, observer);
    driver.resume(0);
    let journaled = driver.journal.is_some();
    let shared = std::sync::Mutex::new(Locked { driver, observer });
    // A reaper's step that the loop must see: the run's end, or a nested
    // instance (its time limit is the loop's timer).
    let news = tokio::sync::Notify::new();
    let fallen = std::sync::atomic::AtomicBool::new(false);
    let interrupted = std::thread::scope(|scope| {
        // Before the first reaper starts: however this closure leaves, the
        // reapers are told to return, or the scope would wait for ever.
        let _exit = ExitReapers(&reapers);
        for k in 0..reapers.count() {
            let (shared, reapers, news) = (&shared, &*reapers, &news);
            let fallen = Fallen {
                fallen: &fallen,
                news,
            };
            // Reaper `k` starts the tasks of cores `k`, `k + n`, …: bound,
            // the first is on this CPU.
            let cpu = opts
                .bind
                .then(|| opts.machine.cpus.get(k).copied())
                .flatten();
            std::thread::Builder::new()
                .name(format!("slurp-reaper-{k}"))
                .spawn_scoped(scope, move || {
                    let _fallen = fallen;
                    exec::reaper::serve(reapers, k, cpu, journaled, |ended, outputs| {
                        let mut locked = lock(shared);
                        let Locked { driver, observer } = &mut *locked;
                        let instances = driver.instances.len();
                        // Groups and lines first: a task's lines reach the
                        // console before its end does.
                        for output in outputs {
                            driver.output(output, *observer);
                        }
                        if !ended.is_empty() {
                            driver.ended(ended, *observer);
                            let mut dirty: Vec<usize> = (0..driver.instances.len()).collect();
                            driver.step(&mut dirty, *observer);
                        }
                        if driver.instances[0].done || driver.instances.len() != instances {
                            news.notify_one();
                        }
                    });
                })?;
        }
        runtime.block_on(drive(&shared, &news, &fallen, socket, done_rx, line_rx))
    })?;
    let Locked { driver, .. } = shared.into_inner().unwrap_or_else(|e| e.into_inner());
    // What did not succeed, a sweep's never-started members as stretches:
    // no walk over every task of a huge sweep, no entry per member.
    let mut failures = Vec::new();
    let program = &*driver.program;
    for instance in &driver.instances {
        let workflow = program.workflow(instance.workflow);
        for (task, count) in instance.core.unsucceeded() {
            let (tail, error) = instance.tails.get(&task).cloned().unwrap_or_default();
            failures.push(Failure {
                workflow: instance.workflow,
                task,
                count,
                scope: instance.path.clone(),
                name: format!("{}{}", instance.path, workflow.task_name(task)),
                last: (count > 1).then(|| {
                    let last = TaskId(task.0 + count - 1);
                    format!("{}{}", instance.path, workflow.task_name(last))
                }),
                state: instance.core.state(task),
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

/// The event loop: steps the driver, then waits for what comes next — an
/// attempt's end or output, a request, a timer, a signal, or news from a
/// reaper — until the top level is done; then answers what is still owed.
/// Returns whether the run was interrupted.
async fn drive(
    shared: &std::sync::Mutex<Locked<'_>>,
    news: &tokio::sync::Notify,
    fallen: &std::sync::atomic::AtomicBool,
    socket: Option<listen::Socket>,
    mut done_rx: mpsc::UnboundedReceiver<Finished>,
    mut line_rx: mpsc::UnboundedReceiver<Output>,
) -> std::io::Result<bool> {
    let (request_tx, mut request_rx) = mpsc::unbounded_channel::<Incoming>();
    let (ended_tx, ended_rx) = watch::channel(false);
    let mut connections: Vec<tokio::task::JoinHandle<()>> = Vec::new();
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupted = false;
    let mut dirty = vec![0usize];
    let (started, open_for) = {
        let locked = lock(shared);
        (locked.driver.started, locked.driver.opts.open_for)
    };
    let close_at = open_for.map(|d| started + d);

    loop {
        let (close_at, wake) = {
            let mut locked = lock(shared);
            let Locked { driver, observer } = &mut *locked;
            driver.step(&mut dirty, *observer);
            if driver.instances[0].done {
                break;
            }
            let deadline = driver
                .instances
                .iter()
                .filter(|i| !i.done && !i.timed_out)
                .filter_map(|i| i.deadline)
                .min();
            (
                close_at.filter(|_| driver.open),
                deadline
                    .map(|d| tokio::time::Instant::from_std(started + Duration::from_millis(d.0))),
            )
        };
        tokio::select! {
            // Lines first: a task's last lines are shown before it is
            // reported finished.
            biased;
            Some(output) = line_rx.recv() => {
                let mut locked = lock(shared);
                let Locked { driver, observer } = &mut *locked;
                driver.output(output, *observer);
            }
            Some(finished) = done_rx.recv() => {
                let mut locked = lock(shared);
                let Locked { driver, observer } = &mut *locked;
                while let Ok(output) = line_rx.try_recv() {
                    driver.output(output, *observer);
                }
                driver.ended([finished], *observer);
                dirty.extend(0..driver.instances.len());
            }
            Some(incoming) = request_rx.recv() => {
                let mut locked = lock(shared);
                let Locked { driver, observer } = &mut *locked;
                driver.request(incoming, &mut dirty, *observer);
            }
            accepted = accept(socket.as_ref()) => {
                if let Some(stream) = accepted {
                    connections.retain(|c| !c.is_finished());
                    connections.push(tokio::spawn(listen::connection(
                        stream,
                        request_tx.clone(),
                        ended_rx.clone(),
                    )));
                }
            }
            () = news.notified() => {
                if fallen.load(std::sync::atomic::Ordering::SeqCst) {
                    return Err(std::io::Error::other("a reaper thread failed"));
                }
            }
            _ = sleep_until(close_at.map(tokio::time::Instant::from_std)) => {
                lock(shared).driver.open = false;
                dirty.push(0);
            }
            _ = sleep_until(wake) => {
                let mut locked = lock(shared);
                locked.driver.expire();
                dirty.extend(0..locked.driver.instances.len());
            }
            _ = interrupt.recv() => {
                let mut locked = lock(shared);
                locked.driver.interrupt(&mut interrupted);
                dirty.extend(0..locked.driver.instances.len());
            }
            _ = terminate.recv() => {
                let mut locked = lock(shared);
                locked.driver.interrupt(&mut interrupted);
                dirty.extend(0..locked.driver.instances.len());
            }
        }
    }

    drop(socket);
    exec::end_flux_client().await;
    {
        let mut locked = lock(shared);
        let Locked { driver, observer } = &mut *locked;
        driver.show_ended(*observer);
        let program = &*driver.program;
        let root = &driver.instances[0];
        let names = |t| {
            format!(
                "{}{}",
                root.path,
                program.workflow(root.workflow).task_name(t)
            )
        };
        driver.shown.flush_all(names, *observer);
        let waiters = std::mem::take(&mut driver.waiters);
        for (_, waiter) in waiters {
            let answer = driver.wait_answer(&waiter.tasks);
            let _ = waiter
                .reply
                .send(crate::protocol::reply(&waiter.id, answer));
        }
        let end = Record::End {
            t: driver.now().0,
            interrupted,
        };
        driver.log(end);
        // Replies still due go out before the connections close (a `close`
        // that ended the run is answered).
        driver.watchers.clear();
    }
    ended_tx.send_replace(true);
    for connection in connections {
        let _ = tokio::time::timeout(Duration::from_secs(1), connection).await;
    }
    Ok(interrupted)
}

impl Driver<'_> {
    fn now(&self) -> Time {
        Time(self.started.elapsed().as_millis() as u64)
    }

    fn log(&mut self, record: Record) {
        self.log_all(std::slice::from_ref(&record));
    }

    fn log_all(&mut self, records: &[Record]) {
        let Some(journal) = &mut self.journal else {
            return;
        };
        if records.is_empty() {
            return;
        }
        if let Err(e) = journal.write_all(records)
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
                let inst = &self.instances[instance as usize];
                let record = Record::Group {
                    t: self.now().0,
                    task: self.name(instance as usize, task),
                    attempt,
                    pgid,
                    // The header's: this slurp's boot.
                    boot: String::new(),
                    cohort: inst
                        .core
                        .cohort_of(task)
                        .map(|(c, m)| (inst.cohorts + c as u32, m)),
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
            let placed: Vec<Vec<Placed>> = events
                .iter()
                .map(|event| match event {
                    Event::Start { alloc, .. } => self.place(i, alloc),
                    Event::Transition { .. } | Event::Stretch { .. } => Vec::new(),
                })
                .collect();
            // Journaled before they are acted on (a start is on record
            // before its process exists), in one write for the step.
            if let Some(journal) = &self.journal {
                let inst = &self.instances[i];
                let records: Vec<Record> = events
                    .iter()
                    .zip(&placed)
                    .filter_map(|(event, placed)| {
                        let task = match event {
                            Event::Transition { task, .. } | Event::Start { task, .. } => *task,
                            Event::Stretch { first, .. } => *first,
                        };
                        let cohort = inst
                            .core
                            .cohort_of(task)
                            .map(|(c, m)| (inst.cohorts + c as u32, m));
                        journal.record(
                            self.program,
                            inst.workflow,
                            &inst.path,
                            event,
                            placed,
                            cohort,
                        )
                    })
                    .collect();
                self.log_all(&records);
            }
            for (event, placed) in events.iter().zip(placed) {
                observer.event(
                    self.program,
                    self.instances[i].workflow,
                    &self.instances[i].path,
                    event,
                );
                if !self.watchers.is_empty() {
                    self.broadcast(i, event);
                }
                if let Event::Transition { task, to, .. } = event
                    && to.is_final()
                    && !self.waiting_on.is_empty()
                {
                    self.ended_for_waiters(i, *task);
                }
                if let Event::Stretch { first, count, .. } = event
                    && !self.waiting_on.is_empty()
                {
                    for t in first.0..first.0 + count {
                        self.ended_for_waiters(i, TaskId(t));
                    }
                }
                if let Event::Start { task, attempt, .. } = event {
                    self.start(i, *task, *attempt, placed, dirty, observer);
                }
            }
            if self.instances[i].core.is_done() && !(i == 0 && self.open) {
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
        observer: &mut dyn Observer,
    ) {
        let inst = &self.instances[i];
        let workflow = self.program.workflow(inst.workflow);
        let t = workflow.task(task);
        if let Some(child) = t.nested {
            self.start_nested(i, task, child, &slices, dirty, observer);
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
        // Only the joblog reads it back (and takes it out).
        if self.joblog.is_some() {
            self.seqs.insert((i as u32, task), self.seq);
        }
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
            pmi: workflow.pmi(task),
            socket: self.socket.clone(),
            scope: inst.path.clone(),
        };
        let (stop_tx, stop) = watch::channel(Stop::Run);
        if self.instances[i].stop != Stop::Run {
            stop_tx.send_replace(self.instances[i].stop);
        }
        if self.reapers.takes(&launch) {
            let k = self.reapers.start(exec::reaper::Start { launch, stop });
            self.attempts.insert((i as u32, task), (stop_tx, Some(k)));
            return;
        }
        self.attempts.insert((i as u32, task), (stop_tx, None));
        let done = self.done_tx.clone();
        let lines = self.line_tx.clone();
        self.handle.spawn(async move {
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
        observer: &mut dyn Observer,
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
        // One look per run of tasks that ask the same.
        let too_big = child_wf
            .tasks
            .runs()
            .iter()
            .find(|r| capacity.fits(&r.first.request).is_err())
            .map(|r| TaskId(r.start));
        if let Some(t) = too_big {
            // Checked against its slice before the run; a slice spread over
            // nodes at run time can still be too small.
            let why = format!(
                "task `{path}{}` does not fit the slice it was given ({capacity})",
                child_wf.task_name(t)
            );
            self.instances[i]
                .tails
                .insert(task, (String::new(), Some(why)));
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
        let stop = self.stopping;
        self.instances.push(Instance {
            workflow: child,
            core: core_for(self.opts, level, own, capacity, child_wf, now),
            parent: Some((i, task)),
            stop,
            capacity,
            owns_workflow: false,
            names: None,
            deadline,
            timed_out: false,
            nodes: slices.iter().map(|s| s.node).collect(),
            cores: slices.iter().map(|s| s.cores.clone()).collect(),
            gpus: slices.iter().map(|s| s.gpus.clone()).collect(),
            path,
            level,
            done: false,
            tails: HashMap::new(),
            cohorts: 0,
        });
        let new = self.instances.len() - 1;
        self.journal_cohorts(new);
        self.resubmit_into(new, observer);
        self.resume(new);
        dirty.push(new);
    }

    /// Numbers the cohorts of a new instance's core, run-wide, and
    /// journals each: its members are written of only once they start.
    fn journal_cohorts(&mut self, i: usize) {
        let now = self.now();
        let inst = &mut self.instances[i];
        inst.cohorts = self.cohorts;
        let workflow = self.program.workflow(inst.workflow);
        let records: Vec<Record> = inst
            .core
            .cohorts()
            .enumerate()
            .map(|(k, (first, count))| Record::Cohort {
                t: now.0,
                id: inst.cohorts + k as u32,
                first: format!("{}{}", inst.path, workflow.task_name(first)),
                count,
                src: self
                    .journal
                    .as_ref()
                    .map(|j| j.source(workflow, first))
                    .unwrap_or_default(),
            })
            .collect();
        self.cohorts += records.len() as u32;
        for record in records {
            self.log(record);
        }
    }

    /// Marks the tasks of a new instance that already succeeded in the run
    /// being resumed (each success is one credit; nested entries are never
    /// credited — their child instance's tasks are). A cohort's members are
    /// credited a chunk at a time, where the digest of the members the run
    /// resumed had is that of the members with those numbers now: an edit
    /// that changed one member reruns its chunk, one that added members
    /// at the end reruns only them.
    fn resume(&mut self, i: usize) {
        if self.credits.is_empty() {
            return;
        }
        let now = self.now();
        let inst = &mut self.instances[i];
        let workflow = self.program.workflow(inst.workflow);
        let scope = inst.path.clone();
        // Per cohort: its ids, and the members credited by range with
        // the digests they were credited by.
        let mut cohorts: Vec<(std::ops::Range<u32>, crate::journal::Done)> = Vec::new();
        for (first, count) in inst.core.cohorts() {
            let name = format!("{scope}{}", workflow.task_name(first));
            let mut credited = crate::journal::Done::default();
            if let Some(done) = self.credits.members.remove(&name) {
                for &chunk in done.digests.keys() {
                    let (members, digest) = done.chunk(chunk);
                    if members.iter().any(|r| r.end > count) {
                        continue;
                    }
                    let sum = members.iter().flat_map(Clone::clone).fold(0u64, |sum, m| {
                        sum.wrapping_add(crate::journal::mix(
                            workflow.key(TaskId(first.0 + m), &scope),
                        ))
                    });
                    if sum == digest {
                        credited.merge(&crate::journal::Done {
                            members: members.into_iter().collect(),
                            digests: [(chunk, digest)].into(),
                        });
                    }
                }
            }
            cohorts.push((first.0..first.0 + count, credited));
        }
        // In id order (the core makes them so), and numbered as the core
        // numbers them.
        debug_assert!(cohorts.is_sorted_by_key(|(ids, _)| ids.start));
        let credits = &mut self.credits.keys;
        // Members credited by key (journals from before cohorts): their
        // successes are journaled with the digests of their keys.
        let mut by_key: Vec<(u32, u64)> = Vec::new();
        inst.core.resume(now, |task| {
            if workflow.task(task).nested.is_some() {
                return false;
            }
            let k = cohorts.partition_point(|(ids, _)| ids.end <= task.0);
            let cohort = cohorts.get(k).filter(|(ids, _)| ids.contains(&task.0));
            if let Some((ids, credited)) = cohort
                && credited.members.contains(&(task.0 - ids.start))
            {
                return true;
            }
            // Hashed only when there are keys: a 10^8-member sweep's resume
            // is not 10^8 hashes.
            if credits.is_empty() {
                return false;
            }
            let key = workflow.key(task, &scope);
            match credits.get_mut(&key) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    if cohort.is_some() {
                        by_key.push((task.0, key));
                    }
                    true
                }
                _ => false,
            }
        });
        // What was taken over, journaled as a run writes what succeeds:
        // ranges, and the digests they were credited by.
        let mut records = Vec::new();
        for (c, (ids, mut done)) in cohorts.into_iter().enumerate() {
            for &(t, key) in by_key.iter().filter(|(t, _)| ids.contains(t)) {
                done.add(t - ids.start, key);
            }
            if !done.is_empty() {
                records.push(done.record(now.0, inst.cohorts + c as u32));
            }
        }
        self.log_all(&records);
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
                .insert(task, (String::new(), Some(why)));
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
        self.attempts.remove(&(finished.instance, finished.task));
        self.joblog_line(&finished);
        let name = self.name(i, finished.task);
        let workflow = self.program.workflow(self.instances[i].workflow);
        let stderr: &[u8] = match self.opts.output {
            // (`ungroup`: only a Flux job's, read back from its file.)
            OutputMode::Group | OutputMode::Ungroup => &finished.stderr,
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
            self.instances[i].tails.insert(
                finished.task,
                (finished.stderr_tail.clone(), finished.error.clone()),
            );
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

    /// Attempts that ended, from the event loop or a reaper: each
    /// reported to its core, then what `--keep-order` can now show. (Every
    /// instance may then have work: the caller steps them all.)
    fn ended(&mut self, finished: impl IntoIterator<Item = Finished>, observer: &mut dyn Observer) {
        for finished in finished {
            self.finished(finished, observer);
        }
        self.show_ended(observer);
    }

    /// `--keep-order`: the output of the top-level tasks that have ended,
    /// up to the first that has not.
    fn show_ended(&mut self, observer: &mut dyn Observer) {
        let root = &self.instances[0];
        let program = &*self.program;
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
        self.open = false;
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
        for instance in &mut self.instances {
            instance.stop = stop;
        }
        for attempt in self.attempts.values() {
            self.stop_attempt(attempt, stop);
        }
    }

    /// Tells a running attempt to stop, and its reaper, if it has one, to
    /// look.
    fn stop_attempt(&self, (stop_tx, reaper): &(watch::Sender<Stop>, Option<usize>), stop: Stop) {
        stop_tx.send_replace(stop);
        if let Some(k) = reaper {
            self.reapers.poke(*k);
        }
    }

    /// Stops instance `j` and every instance nested in it: nothing more
    /// starts there and what runs is cancelled.
    fn stop_within(&mut self, j: usize) {
        let now = self.now();
        for k in 0..self.instances.len() {
            if self.is_within(k, j) && !self.instances[k].done {
                if !self.instances[k].core.is_halted() {
                    self.instances[k].core.halt(now);
                }
                self.instances[k].stop = Stop::Cancel;
                for (&(inst, _), attempt) in &self.attempts {
                    if inst as usize == k {
                        self.stop_attempt(attempt, Stop::Cancel);
                    }
                }
            }
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
            self.stop_within(j);
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

/// The exit status a task's end stands for, as `slurp wait` returns it: the
/// task's own, 128 + a signal, 124 for a time limit (as `timeout`), 137 for
/// memory (SIGKILL), 127 for a task that could not start, 1 for one that
/// never ran (cancelled, skipped).
pub fn exit_code(state: State, reason: &Reason) -> i32 {
    match (state, reason) {
        (State::Succeeded, _) => 0,
        (_, Reason::Ended(Outcome::Exit(code))) => *code,
        (_, Reason::Ended(Outcome::Signal(sig))) => 128 + sig,
        (State::Timeout, _) => 124,
        (State::OutOfMemory, _) => 137,
        (_, Reason::Ended(Outcome::SpawnError)) => 127,
        _ => 1,
    }
}

/// The live instance: requests from the socket.
impl Driver<'_> {
    fn request(&mut self, incoming: Incoming, dirty: &mut Vec<usize>, observer: &mut dyn Observer) {
        let Incoming { request, reply } = incoming;
        let id = request.id;
        let answer = match request.op {
            Op::Hello {} => Ok(self.hello()),
            Op::Submit {
                text,
                jobspec,
                scope,
                source,
                cwd,
            } => match self.submission_text(text, jobspec) {
                Ok(text) => self.submit_request(text, scope, source, cwd, dirty, observer),
                Err(refusal) => Err(refusal),
            },
            Op::Wait { tasks } => match self.resolve_all(&tasks) {
                Err(refusal) => Err(refusal),
                Ok(tasks) if self.all_final(&tasks) => Ok(self.wait_answer(&tasks)),
                Ok(tasks) => {
                    let n = self.next_waiter;
                    self.next_waiter += 1;
                    let mut left = 0;
                    for &(i, t) in &tasks {
                        if !self.instances[i].core.state(t).is_final() {
                            left += 1;
                            self.waiting_on.entry((i, t)).or_default().push(n);
                        }
                    }
                    self.waiters.insert(
                        n,
                        Waiter {
                            id,
                            reply,
                            tasks,
                            left,
                        },
                    );
                    return;
                }
            },
            Op::Cancel { tasks } => self.cancel_request(&tasks, dirty),
            Op::Status { tasks, scope } => self.status(tasks, scope),
            Op::Watch {} => {
                self.watchers.push(reply.clone());
                Ok(json!({ "watching": true }))
            }
            Op::Close {} => {
                self.open = false;
                dirty.push(0);
                Ok(json!({ "closed": true }))
            }
        };
        let line = match answer {
            Ok(fields) => crate::protocol::reply(&id, fields),
            Err(refusal) => crate::protocol::refuse(&id, &refusal),
        };
        let _ = reply.send(line);
    }

    fn hello(&self) -> Value {
        let c = self.opts.capacity;
        json!({
            "version": crate::protocol::VERSION,
            "run": self.opts.run_dir.file_name().map(|n| n.to_string_lossy().into_owned()),
            "run_dir": self.opts.run_dir,
            "pid": std::process::id(),
            "open": self.open,
            "resources": {
                "nodes": c.nodes,
                "cores_per_node": c.cores_per_node,
                "gpus_per_node": c.gpus_per_node,
                "mem_per_node": c.mem_per_node,
            },
        })
    }

    /// Whether new tasks may come: not once the run is being stopped, nor
    /// after the top level closed with everything done.
    fn taking(&self) -> Result<(), Refusal> {
        if self.stopping != Stop::Run || self.instances[0].core.is_halted() {
            return Err(Refusal::new(
                "closed",
                "the run is stopping; it takes no more tasks",
            ));
        }
        if self.instances[0].done {
            return Err(Refusal::new("closed", "the run has ended"));
        }
        Ok(())
    }

    /// The text of a submission: given, or made from its jobspec.
    fn submission_text(
        &mut self,
        text: Option<String>,
        jobspec: Option<Value>,
    ) -> Result<String, Refusal> {
        match (text, jobspec) {
            (Some(text), None) => Ok(text),
            (None, Some(jobspec)) => {
                let Some(submitter) = self.submitter.as_deref_mut() else {
                    return Err(Refusal::new("closed", "this run cannot take tasks"));
                };
                let n = self.submissions + 1;
                let Value::Array(list) = jobspec else {
                    return submitter
                        .jobspec_line(&jobspec, &format!("job{n}"))
                        .map_err(|mut refusal| {
                            refusal.message = format!("jobspec: {}", refusal.message);
                            refusal
                        });
                };
                // A list is one submission: all its jobs, or none.
                let mut text = String::new();
                for (k, jobspec) in list.iter().enumerate() {
                    let line = submitter
                        .jobspec_line(jobspec, &format!("job{n}_{}", k + 1))
                        .map_err(|mut refusal| {
                            refusal.message =
                                format!("jobspec {} of {}: {}", k + 1, list.len(), refusal.message);
                            refusal.index = Some(k);
                            refusal
                        })?;
                    text.push_str(&line);
                    text.push('\n');
                }
                Ok(text)
            }
            _ => Err(Refusal::new(
                "bad_request",
                "`submit` takes one of `text` (task lines) and `jobspec`",
            )),
        }
    }

    fn submit_request(
        &mut self,
        text: String,
        scope: Option<String>,
        source: Option<String>,
        cwd: Option<String>,
        dirty: &mut Vec<usize>,
        observer: &mut dyn Observer,
    ) -> Result<Value, Refusal> {
        self.taking()?;
        let scope = scope.unwrap_or_default();
        let i = self.instance_at(&scope)?;
        self.submissions += 1;
        let submission = Submission {
            text,
            source: source.unwrap_or_else(|| format!("submitted#{}", self.submissions)),
            cwd: match cwd {
                Some(dir) => self.opts.cwd.join(dir),
                None => self.opts.cwd.clone(),
            },
        };
        let names = self.add_tasks(i, &submission, observer)?;
        dirty.push(i);
        Ok(json!({ "tasks": names }))
    }

    /// The instance at `scope` that takes submissions: the live one of
    /// that path.
    fn instance_at(&self, scope: &str) -> Result<usize, Refusal> {
        let scope = match scope {
            "" => "",
            s if s.ends_with('/') => s,
            s => {
                return Err(Refusal::new(
                    "unknown_scope",
                    format!(
                        "scope `{s}` is not an instance path: they end with `/` (`sub/`), or are empty for the top level"
                    ),
                ));
            }
        };
        let found = (0..self.instances.len())
            .rev()
            .find(|&i| self.instances[i].path == scope && !self.instances[i].done);
        found.ok_or_else(|| {
            Refusal::new(
                "unknown_scope",
                format!(
                    "no running instance `{scope}`: a nested entry's instance takes tasks while it runs"
                ),
            )
        })
    }

    /// Lowers a submission into instance `i`'s workflow, journals it and
    /// hands its tasks to the core; their ids with the instance's path.
    fn add_tasks(
        &mut self,
        i: usize,
        submission: &Submission,
        observer: &mut dyn Observer,
    ) -> Result<Vec<String>, Refusal> {
        let Some(submitter) = self.submitter.as_deref_mut() else {
            return Err(Refusal::new(
                "closed",
                "this run cannot take tasks (it was started without a way to read them)",
            ));
        };
        // A nested workflow may be shared by every entry that names the
        // file: the first submission gives this instance its own copy.
        if !self.instances[i].owns_workflow {
            let copy = self.program.workflow(self.instances[i].workflow).clone();
            self.program.workflows.push(copy);
            self.instances[i].workflow = WorkflowId(self.program.workflows.len() as u32 - 1);
            self.instances[i].owns_workflow = true;
        }
        let inst = &self.instances[i];
        let range = submitter.submit(
            self.program,
            inst.workflow,
            &inst.path,
            inst.capacity,
            submission,
        )?;
        if let Some(journal) = &mut self.journal {
            journal.name_files(&self.program.files, &submission.source);
        }
        let now = self.now();
        let record = Record::Submit {
            t: now.0,
            scope: inst.path.clone(),
            source: submission.source.clone(),
            cwd: submission.cwd.display().to_string(),
            text: submission.text.clone(),
            tasks: range.len() as u32,
        };
        self.log(record);
        let inst = &mut self.instances[i];
        let workflow = self.program.workflow(inst.workflow);
        let mut names = Vec::with_capacity(range.len());
        for t in range.clone() {
            let task = workflow.task(TaskId(t));
            let deps: Vec<TaskId> = workflow.dependencies(TaskId(t)).collect();
            let job = Job {
                request: task.request,
                time_limit: task.time_limit.map(|l| l.get()),
                retries: task.retries,
                user: task.template.0,
            };
            let id = inst.core.add(now, job, &deps);
            debug_assert_eq!(id.0, t);
            let name = workflow.task_name(TaskId(t));
            if let Some(map) = &mut inst.names {
                map.insert(name.clone(), t);
            }
            names.push(format!("{}{name}", inst.path));
        }
        if i == 0 {
            self.ended.total += range.len() as u64;
        }
        observer.submitted(&self.instances[i].path, range.len());
        Ok(names)
    }

    /// `slurp resume`: what the resumed run had submitted to the instance
    /// at `i`'s path, submitted again before its credits are counted.
    fn resubmit_into(&mut self, i: usize, observer: &mut dyn Observer) {
        if self.resubmit.is_empty() {
            return;
        }
        let path = self.instances[i].path.clone();
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.resubmit)
            .into_iter()
            .partition(|(scope, _)| *scope == path);
        self.resubmit = rest;
        for (_, submission) in mine {
            if let Err(refusal) = self.add_tasks(i, &submission, observer) {
                eprintln!(
                    "slurp: tasks submitted to the resumed run ({}) cannot be submitted again: {}",
                    submission.source, refusal.message
                );
                if let Some(diagnostic) = refusal.diagnostic {
                    eprintln!("{diagnostic}");
                }
            }
        }
    }

    /// A task by its id (`sim[3]`, `sub/prep`): in the deepest instance
    /// whose path starts it, the latest such instance first.
    fn resolve(&mut self, name: &str) -> Option<(usize, TaskId)> {
        let mut candidates: Vec<usize> = (0..self.instances.len())
            .filter(|&i| name.starts_with(self.instances[i].path.as_str()))
            .collect();
        candidates.sort_by_key(|&i| std::cmp::Reverse((self.instances[i].path.len(), i)));
        for i in candidates {
            let inst = &mut self.instances[i];
            let workflow = self.program.workflow(inst.workflow);
            let names = inst.names.get_or_insert_with(|| {
                workflow
                    .task_ids()
                    .map(|t| (workflow.task_name(t), t.0))
                    .collect()
            });
            if let Some(&t) = names.get(&name[inst.path.len()..]) {
                return Some((i, TaskId(t)));
            }
        }
        None
    }

    fn resolve_all(&mut self, names: &[String]) -> Result<Vec<(usize, TaskId)>, Refusal> {
        names
            .iter()
            .map(|name| {
                self.resolve(name).ok_or_else(|| {
                    Refusal::new("unknown_task", format!("no task `{name}` in this run"))
                })
            })
            .collect()
    }

    fn all_final(&self, tasks: &[(usize, TaskId)]) -> bool {
        tasks
            .iter()
            .all(|&(i, t)| self.instances[i].core.state(t).is_final())
    }

    fn task_json(&self, i: usize, t: TaskId) -> Value {
        let core = &self.instances[i].core;
        let state = core.state(t);
        let mut v = json!({
            "task": self.name(i, t),
            "state": state,
            "attempts": core.attempts(t),
        });
        if state.is_final() {
            v["exit"] = json!(exit_code(state, &core.reason(t)));
        }
        v
    }

    /// A `wait`'s answer: each task as it ended, and the exit status of
    /// the first that did not succeed (0 if all did).
    fn wait_answer(&self, tasks: &[(usize, TaskId)]) -> Value {
        let exit = tasks
            .iter()
            .map(|&(i, t)| {
                let core = &self.instances[i].core;
                exit_code(core.state(t), &core.reason(t))
            })
            .find(|&code| code != 0)
            .unwrap_or(0);
        let list: Vec<Value> = tasks.iter().map(|&(i, t)| self.task_json(i, t)).collect();
        json!({ "tasks": list, "exit": exit })
    }

    /// Task `t` of instance `i` ended: the waits on it have one task less
    /// to wait for, and those with none left are answered.
    fn ended_for_waiters(&mut self, i: usize, t: TaskId) {
        let Some(waits) = self.waiting_on.remove(&(i, t)) else {
            return;
        };
        for n in waits {
            let Some(waiter) = self.waiters.get_mut(&n) else {
                continue;
            };
            waiter.left = waiter.left.saturating_sub(1);
            if waiter.left > 0 {
                continue;
            }
            if let Some(waiter) = self.waiters.remove(&n) {
                let answer = self.wait_answer(&waiter.tasks);
                let _ = waiter
                    .reply
                    .send(crate::protocol::reply(&waiter.id, answer));
            }
        }
    }

    fn broadcast(&mut self, i: usize, event: &Event) {
        let line = match event {
            Event::Transition {
                time,
                task,
                to,
                reason,
            } => {
                let mut v = json!({
                    "event": "state",
                    "t": time.0,
                    "task": self.name(i, *task),
                    "state": to,
                });
                if to.is_final() {
                    v["exit"] = json!(exit_code(*to, reason));
                }
                v
            }
            Event::Start {
                time,
                task,
                attempt,
                ..
            } => json!({
                "event": "start",
                "t": time.0,
                "task": self.name(i, *task),
                "attempt": attempt,
            }),
            Event::Stretch {
                time,
                first,
                count,
                to,
                reason,
            } => json!({
                "event": "states",
                "t": time.0,
                "first": self.name(i, *first),
                "count": count,
                "state": to,
                "exit": exit_code(*to, reason),
            }),
        };
        let mut line = line.to_string();
        line.push('\n');
        self.watchers.retain(|w| w.send(line.clone()).is_ok());
    }

    fn cancel_request(
        &mut self,
        names: &[String],
        dirty: &mut Vec<usize>,
    ) -> Result<Value, Refusal> {
        let tasks = self.resolve_all(names)?;
        let now = self.now();
        let mut answer = Vec::new();
        for (i, t) in tasks {
            let state = self.instances[i].core.state(t);
            let what = match state {
                State::Pending | State::Runnable => {
                    self.instances[i].core.cancel(now, t);
                    "cancelled"
                }
                State::Running => {
                    let nested = self
                        .program
                        .workflow(self.instances[i].workflow)
                        .task(t)
                        .nested;
                    match nested {
                        Some(_) => {
                            if let Some(j) = (0..self.instances.len()).rev().find(|&j| {
                                self.instances[j].parent == Some((i, t)) && !self.instances[j].done
                            }) {
                                self.stop_within(j);
                                dirty.push(j);
                            }
                        }
                        None => {
                            if let Some(attempt) = self.attempts.get(&(i as u32, t)) {
                                self.stop_attempt(attempt, Stop::Cancel);
                            }
                        }
                    }
                    "stopping"
                }
                _ => "ended",
            };
            answer.push(json!({ "task": self.name(i, t), "was": state, "now": what }));
            dirty.push(i);
        }
        Ok(json!({ "tasks": answer }))
    }

    fn status(
        &mut self,
        tasks: Option<Vec<String>>,
        scope: Option<String>,
    ) -> Result<Value, Refusal> {
        let list: Vec<(usize, TaskId)> = match tasks {
            Some(names) => self.resolve_all(&names)?,
            None => {
                let scope = scope.unwrap_or_default();
                let i = (0..self.instances.len())
                    .rev()
                    .find(|&i| self.instances[i].path == scope)
                    .ok_or_else(|| {
                        Refusal::new(
                            "unknown_scope",
                            format!("no instance `{scope}` in this run"),
                        )
                    })?;
                self.program
                    .workflow(self.instances[i].workflow)
                    .task_ids()
                    .map(|t| (i, t))
                    .collect()
            }
        };
        let counts = self.instances[0].core.counts();
        let by_state: serde_json::Map<String, Value> = State::ALL
            .iter()
            .map(|s| (s.name().to_owned(), json!(counts[*s as usize])))
            .collect();
        let tasks: Vec<Value> = list.iter().map(|&(i, t)| self.task_json(i, t)).collect();
        Ok(json!({ "open": self.open, "counts": by_state, "tasks": tasks }))
    }
}
#[allow(dead_code)]
fn _send_probe(d: Driver<'_>) {
    fn s<T: Send>(_: T) {}
    s(d)
}
