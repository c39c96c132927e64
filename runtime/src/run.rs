//! The real-time driver: a thin tokio loop around the scheduler core.
//!
//! It tells the core the time and which attempts ended, turns `Start`
//! decisions into launches for the executor, forwards every event to an
//! [`Observer`] (console now; journal and progress display later), and
//! handles interruption: the first Ctrl-C or SIGTERM stops starting tasks,
//! asks every running group to stop (SIGTERM, SIGKILL after the grace
//! period) and ends with a summary; a second one kills at once.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, watch};

use crate::core::{Alloc, Core, Event, Outcome, PolicyKind, Reason, State, Time};
use crate::exec::{self, Finished, Launch, Output, OutputMode, Rank, Stop};
use crate::ir::{Program, TaskId};
use crate::resources::{Capacity, Machine};

/// What to do when a task fails for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Halt {
    /// Run everything that does not depend on the failure.
    #[default]
    Never,
    /// Start nothing more; let running tasks finish.
    Soon,
    /// Start nothing more and stop running tasks.
    Now,
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub capacity: Capacity,
    pub machine: Machine,
    pub policy: PolicyKind,
    /// Bind ranks to their cores.
    pub bind: bool,
    pub output: OutputMode,
    pub halt: Halt,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Where relative working directories start.
    pub cwd: PathBuf,
    /// This run's directory (`SLURP_RUN_DIR`, output files).
    pub run_dir: PathBuf,
    /// The slurp executable, for nested entries.
    pub exe: PathBuf,
}

/// Sees what happens during a run.
pub trait Observer {
    fn event(&mut self, program: &Program, event: &Event);
    /// Task output to show: a whole task's (group mode) or a line (tag).
    fn output(&mut self, name: &str, stderr: bool, bytes: &[u8]);
}

/// One task that did not succeed, for the summary.
#[derive(Debug, Clone)]
pub struct Failure {
    pub task: TaskId,
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
    pub counts: [usize; 8],
    pub failures: Vec<Failure>,
    pub interrupted: bool,
    pub elapsed: Duration,
}

impl Report {
    pub fn succeeded(&self) -> bool {
        self.counts[State::Succeeded as usize] == self.counts.iter().sum::<usize>()
    }
}

/// Runs the top-level workflow of `program` to the end.
pub async fn run(
    program: &Program,
    opts: &RunOptions,
    observer: &mut dyn Observer,
) -> std::io::Result<Report> {
    let started = Instant::now();
    let now = || Time(started.elapsed().as_millis() as u64);
    let workflow = program.root();
    let mut core = Core::for_workflow(opts.capacity, opts.policy, workflow, now());
    let (stop_tx, stop_rx) = watch::channel(Stop::Run);
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Finished>();
    let (line_tx, mut line_rx) = mpsc::unbounded_channel::<Output>();
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupted = false;
    let mut tails: Vec<(TaskId, String, Option<String>)> = Vec::new();
    let mut events = Vec::new();

    loop {
        core.schedule(now());
        events.extend(core.drain());
        for event in events.drain(..) {
            observer.event(program, &event);
            if let Event::Start {
                task,
                attempt,
                alloc,
                ..
            } = &event
            {
                let mut launch = launch(program, opts, *task, *attempt, alloc);
                launch.yield_after_spawn = core.running_count() == 1;
                let (stop, done, lines) = (stop_rx.clone(), done_tx.clone(), line_tx.clone());
                tokio::spawn(async move {
                    let finished = exec::run_attempt(launch, stop, lines).await;
                    let _ = done.send(finished);
                });
            }
        }
        if core.is_done() {
            break;
        }
        tokio::select! {
            // Lines first: a task's last lines are shown before it is
            // reported finished.
            biased;
            Some(Output::Line { task, stderr, line }) = line_rx.recv() => {
                observer.output(&workflow.task_name(task), stderr, &line);
            }
            Some(finished) = done_rx.recv() => {
                while let Ok(Output::Line { task, stderr, line }) = line_rx.try_recv() {
                    observer.output(&workflow.task_name(task), stderr, &line);
                }
                let name = workflow.task_name(finished.task);
                if !finished.stdout.is_empty() {
                    observer.output(&name, false, &finished.stdout);
                }
                if !finished.stderr.is_empty() && opts.output == OutputMode::Group {
                    observer.output(&name, true, &finished.stderr);
                }
                if finished.outcome != Outcome::Success {
                    tails.retain(|(t, _, _)| *t != finished.task);
                    tails.push((finished.task, finished.stderr_tail.clone(), finished.error.clone()));
                }
                core.on_finished(now(), finished.task, finished.outcome);
                let failed_for_good = matches!(core.state(finished.task), State::Failed | State::Timeout);
                if failed_for_good && opts.halt != Halt::Never && !core.is_halted() {
                    core.halt(now());
                    if opts.halt == Halt::Now {
                        let _ = stop_tx.send(Stop::Cancel);
                    }
                }
            }
            _ = interrupt.recv() => {
                interrupt_run(&mut core, &stop_tx, &mut interrupted, now());
            }
            _ = terminate.recv() => {
                interrupt_run(&mut core, &stop_tx, &mut interrupted, now());
            }
        }
    }
    events.extend(core.drain());
    for event in events.drain(..) {
        observer.event(program, &event);
    }

    let failures = workflow
        .task_ids()
        .filter_map(|task| {
            let state = core.state(task);
            if state == State::Succeeded {
                return None;
            }
            let (tail, error) = tails
                .iter()
                .find(|(t, _, _)| *t == task)
                .map(|(_, tail, error)| (tail.clone(), error.clone()))
                .unwrap_or_default();
            Some(Failure {
                task,
                name: workflow.task_name(task),
                state,
                reason: core.reason(task),
                attempts: core.attempts(task),
                stderr_tail: tail,
                error,
            })
        })
        .collect();
    Ok(Report {
        counts: core.counts(),
        failures,
        interrupted,
        elapsed: started.elapsed(),
    })
}

fn interrupt_run(core: &mut Core, stop: &watch::Sender<Stop>, interrupted: &mut bool, now: Time) {
    if *interrupted {
        let _ = stop.send(Stop::Kill);
    } else {
        *interrupted = true;
        core.halt(now);
        let _ = stop.send(Stop::Cancel);
    }
}

/// Turns a start decision into what the executor needs.
fn launch(
    program: &Program,
    opts: &RunOptions,
    task: TaskId,
    attempt: u32,
    alloc: &Alloc,
) -> Launch {
    let workflow = program.root();
    let t = workflow.task(task);
    let name = workflow.task_name(task);
    let request = t.request;
    // Ranks take the allocation's cores and GPUs in order, node by node.
    let mut ranks = Vec::new();
    for slice in &alloc.slices {
        for r in 0..slice.ranks as usize {
            let cores = &slice.cores[r * request.cores as usize..(r + 1) * request.cores as usize];
            let gpus = &slice.gpus[r * request.gpus as usize..(r + 1) * request.gpus as usize];
            // Logical cores beyond the machine (an emulated instance), or on
            // another node, are scheduled but not bound.
            let cpus: Option<Vec<usize>> = (opts.bind && slice.node == 0)
                .then(|| {
                    cores
                        .iter()
                        .map(|&c| opts.machine.cpus.get(c as usize).copied())
                        .collect()
                })
                .flatten();
            ranks.push(Rank {
                cpus: cpus.unwrap_or_default(),
                cores: cores.to_vec(),
                gpus: gpus
                    .iter()
                    .map(|&g| {
                        opts.machine
                            .gpus
                            .get(g as usize)
                            .cloned()
                            .unwrap_or_else(|| g.to_string())
                    })
                    .collect(),
            });
        }
    }
    let mut argv = workflow.argv(task);
    if t.nested.is_some() {
        // A child instance runs once per node of its slice, owning all of
        // the slice's resources there (as `flux alloc` starts one broker
        // per node).
        ranks = merge_per_node(alloc, &ranks);
        let policy = workflow
            .template(t.template)
            .extras
            .as_ref()
            .and_then(|x| x.policy.as_deref());
        argv = nested_argv(
            opts,
            policy,
            &argv,
            &request,
            ranks.iter().all(|r| !r.cpus.is_empty()),
        );
    }
    let cwd = match workflow.cwd(task) {
        Some(dir) => opts.cwd.join(dir),
        None => opts.cwd.clone(),
    };
    let safe = name.replace('/', "_");
    let files = match (workflow.output(task), opts.output) {
        (Some(file), _) => {
            let path = cwd.join(file);
            Some((path.clone(), path))
        }
        (None, OutputMode::Files) => {
            let dir = opts.run_dir.join("out");
            Some((
                dir.join(format!("{safe}.out")),
                dir.join(format!("{safe}.err")),
            ))
        }
        _ => None,
    };
    Launch {
        task,
        attempt,
        name,
        argv,
        env: workflow.environment(task),
        cwd,
        ranks,
        time_limit: t.time_limit.map(|s| Duration::from_secs(s.get())),
        mode: opts.output,
        files,
        run_dir: opts.run_dir.clone(),
        grace: opts.grace,
        yield_after_spawn: false,
    }
}

fn merge_per_node(alloc: &Alloc, ranks: &[Rank]) -> Vec<Rank> {
    let mut merged = Vec::new();
    let mut at = 0;
    for slice in &alloc.slices {
        let mut node = Rank::default();
        for rank in &ranks[at..at + slice.ranks as usize] {
            node.cpus.extend(&rank.cpus);
            node.cores.extend(&rank.cores);
            node.gpus.extend(rank.gpus.iter().cloned());
        }
        at += slice.ranks as usize;
        merged.push(node);
    }
    merged
}

/// A nested entry runs a child slurp on exactly its slice. (The embedded,
/// in-process child instance is the nested-allocation issue's; until then
/// the child is a process told its slice.)
fn nested_argv(
    opts: &RunOptions,
    policy: Option<&str>,
    argv: &[String],
    request: &crate::ir::Request,
    bound: bool,
) -> Vec<String> {
    let slice = opts.capacity.slice(request);
    let mut out = vec![
        opts.exe.display().to_string(),
        "run".to_owned(),
        "--cores".to_owned(),
        slice.cores_per_node.to_string(),
        "--gpus".to_owned(),
        slice.gpus_per_node.to_string(),
        "--mem".to_owned(),
        format!("{}B", slice.mem_per_node),
        "--output".to_owned(),
        match opts.output {
            OutputMode::Tag => "tag",
            OutputMode::None => "none",
            OutputMode::Files => "files",
            OutputMode::Group => "group",
        }
        .to_owned(),
    ];
    if !bound {
        out.push("--no-bind".to_owned());
    }
    if let Some(policy) = policy {
        out.extend(["--policy".to_owned(), policy.to_owned()]);
    }
    out.extend(argv.iter().skip(1).cloned());
    out
}
