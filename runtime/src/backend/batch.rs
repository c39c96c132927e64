//! Driving an outside resource manager (Slurm, Flux) instead of running
//! tasks here: submit, follow, journal, cancel.
//!
//! The workflow's top level is cut into submission units (a task, or a job
//! array where the system has them), submitted in dependency order, each
//! naming its dependencies' jobs so the system — not slurp — sequences
//! them and cancels what depends on a failure. slurp then looks at the
//! queue every [`Options::poll`], journals each transition with the job's
//! id, prints each job's output when it ends, and on Ctrl-C or SIGTERM
//! cancels what is left. Submission is all or nothing: when the system
//! refuses a unit, the jobs already submitted are cancelled and the error
//! names the task's line.
//!
//! A [`System`] is one resource manager's commands: `slurm.rs`, `flux.rs`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::core::{Event, Outcome, Reason, State, Time};
use crate::exec::OutputMode;
use crate::ir::{Program, TaskId, WorkflowId};
use crate::journal::{Journal, Record};
use crate::run::{Failure, Observer, Report};

/// How to submit.
#[derive(Debug, Clone)]
pub struct Options {
    /// The partition (Slurm) or queue (Flux) to submit to, when given.
    pub queue: Option<String>,
    /// Time between two looks at the queue.
    pub poll: Duration,
    pub cwd: PathBuf,
    /// The run's directory: job scripts and output go under it.
    pub run_dir: PathBuf,
    /// This slurp, for nested entries.
    pub slurp: PathBuf,
    pub output: OutputMode,
    /// `slurp resume`: keys of tasks that already succeeded, counted; such
    /// a task is not submitted again, and its dependents do not wait on it
    /// (a batch run's journal writes no cohorts: every task has its key).
    pub resume: HashMap<u64, usize>,
}

/// A job, or a job array whose element `i` runs `tasks[i]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    pub tasks: Vec<TaskId>,
    pub array: bool,
}

/// A dependency of a unit being submitted: the job of one of its tasks.
#[derive(Debug, Clone, Copy)]
pub struct Dep<'a> {
    /// The task's job (`123`, `123_4` for an array element, a Flux id).
    pub job: &'a str,
    /// The unit it was submitted in, and its index there.
    pub unit: &'a Unit,
    pub index: usize,
    /// Every task of that unit is a dependency (a whole array).
    pub whole: bool,
}

/// What the system says of one job.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    /// `Pending`, `Running`, or a final state.
    pub state: State,
    /// For a final state: how it ended.
    pub outcome: Option<Outcome>,
    /// The system's own word for the state, journaled beside slurp's.
    pub word: String,
    /// Something slurp's states do not say (out of memory, node failure).
    pub detail: Option<String>,
    /// It was cancelled because a dependency never succeeded.
    pub dependency: bool,
}

/// One resource manager's commands.
pub trait System {
    /// `slurm`, `flux`: for messages.
    fn name(&self) -> &'static str;
    /// Cuts the top-level workflow into units (default: one per task), in
    /// an order where every unit follows the units it depends on.
    fn plan(&self, program: &Program) -> Vec<Unit> {
        program
            .workflow(WorkflowId(0))
            .task_ids()
            .map(|t| Unit {
                tasks: vec![t],
                array: false,
            })
            .collect()
    }
    /// Where the stdout and stderr of element `index` of `unit` go, when
    /// its task has no `output=` of its own.
    fn outputs(
        &self,
        program: &Program,
        unit: &Unit,
        index: usize,
        run_dir: &Path,
    ) -> (PathBuf, PathBuf) {
        output_files(
            run_dir,
            &program.workflow(WorkflowId(0)).task_name(unit.tasks[index]),
        )
    }
    /// Submits one unit, to start after `after`; returns the job of each
    /// of its tasks, or the system's refusal in its own words.
    fn submit(
        &mut self,
        program: &Program,
        unit: &Unit,
        after: &[Dep],
        opts: &Options,
    ) -> Result<Vec<String>, String>;
    /// The state of each of these jobs.
    fn poll(&mut self, jobs: &[String]) -> Result<HashMap<String, Seen>, String>;
    fn cancel(&mut self, jobs: &[String]);
}

/// Where a task's stdout and stderr go when it has no `output=` of its own.
pub fn output_files(run_dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let base = run_dir.join("out").join(name.replace('/', "_"));
    (base.with_extension("out"), base.with_extension("err"))
}

/// Where one task stands.
#[derive(Debug, Clone)]
struct Tracked {
    job: String,
    state: State,
    reason: Reason,
    detail: Option<String>,
    stderr_tail: String,
    started: bool,
    /// Attempts the retry loop inside the job said it made beyond the
    /// first (its `slurp: attempt N failed` lines).
    retried: u32,
    /// Looks in a row that did not find the job.
    missing: u32,
}

/// Looks at the queue a job may be absent from before slurp gives up on
/// it (a system that forgets finished jobs fast, or a job purged by hand).
const MISSING: u32 = 20;

/// Submits the workflow to `system` and follows it to the end.
pub fn run(
    system: &mut dyn System,
    program: &Program,
    opts: &Options,
    observer: &mut dyn Observer,
    mut journal: Option<Journal>,
    sources: &dyn Fn(TaskId) -> String,
) -> Result<Report, String> {
    let started = Instant::now();
    let wf = program.workflow(WorkflowId(0));
    let ms = || started.elapsed().as_millis() as u64;
    let mut log = |record: Record| {
        if let Some(j) = &mut journal {
            let _ = j.write(&record);
        }
    };
    // Ctrl-C and SIGTERM from the first submission on: a signal during
    // submission is seen at the first look at the queue, and cancels all.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let (mut interrupt, mut terminate) = {
        use tokio::signal::unix::{SignalKind, signal};
        let _inside = runtime.enter();
        (
            signal(SignalKind::interrupt()).map_err(|e| e.to_string())?,
            signal(SignalKind::terminate()).map_err(|e| e.to_string())?,
        )
    };
    for dir in ["out", "jobs"] {
        std::fs::create_dir_all(opts.run_dir.join(dir)).map_err(|e| e.to_string())?;
    }
    // Resumed: what succeeded before is done, not submitted again (nested
    // entries run again: their child's own tasks are what is known).
    let mut credits = opts.resume.clone();
    let done: std::collections::HashSet<TaskId> = wf
        .task_ids()
        .filter(|&t| {
            wf.task(t).nested.is_none()
                && credits.get_mut(&wf.key(t, "")).is_some_and(|n| {
                    *n > 0 && {
                        *n -= 1;
                        true
                    }
                })
        })
        .collect();
    for &t in &done {
        log(Record::State {
            t: ms(),
            task: wf.task_name(t),
            to: State::Succeeded,
            reason: serde_json::json!("resumed"),
            key: Some(crate::journal::key_text(wf.key(t, ""))),
            src: Some(sources(t)),
            cohort: None,
        });
        observer.event(
            program,
            WorkflowId(0),
            "",
            &Event::Transition {
                time: Time(ms()),
                task: t,
                to: State::Succeeded,
                reason: Reason::Resumed,
            },
        );
    }
    let units: Vec<Unit> = system
        .plan(program)
        .into_iter()
        .filter_map(|mut unit| {
            unit.tasks.retain(|t| !done.contains(t));
            (!unit.tasks.is_empty()).then_some(unit)
        })
        .collect();
    // Each task's job, unit and index in it.
    let mut job_of: HashMap<TaskId, (String, usize, usize)> = HashMap::new();
    let mut tracked: BTreeMap<u32, Tracked> = BTreeMap::new();
    let mut submitted: Vec<String> = Vec::new();
    for (u, unit) in units.iter().enumerate() {
        let mut deps: Vec<TaskId> = unit
            .tasks
            .iter()
            .flat_map(|&t| wf.dependencies(t))
            .filter(|d| !done.contains(d))
            .collect();
        deps.sort_unstable_by_key(|t| t.0);
        deps.dedup();
        let mut per_unit: HashMap<usize, usize> = HashMap::new();
        for d in &deps {
            *per_unit.entry(job_of[d].1).or_default() += 1;
        }
        let after: Vec<Dep> = deps
            .iter()
            .map(|d| {
                let (job, u, index) = &job_of[d];
                Dep {
                    job,
                    unit: &units[*u],
                    index: *index,
                    whole: per_unit[u] == units[*u].tasks.len(),
                }
            })
            .collect();
        let jobs = match system.submit(program, unit, &after, opts) {
            Ok(jobs) => jobs,
            Err(why) => {
                system.cancel(&submitted);
                return Err(format!(
                    "{}: task `{}` could not be submitted: {why}{}",
                    sources(unit.tasks[0]),
                    wf.task_name(unit.tasks[0]),
                    if submitted.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " (the {} jobs already submitted were cancelled)",
                            submitted.len()
                        )
                    }
                ));
            }
        };
        for (index, (&t, job)) in unit.tasks.iter().zip(jobs).enumerate() {
            submitted.push(job.clone());
            job_of.insert(t, (job.clone(), u, index));
            tracked.insert(
                t.0,
                Tracked {
                    job: job.clone(),
                    state: State::Pending,
                    reason: Reason::Waiting,
                    detail: None,
                    stderr_tail: String::new(),
                    started: false,
                    retried: 0,
                    missing: 0,
                },
            );
            let key = format!("{}_job", system.name());
            log(Record::State {
                t: ms(),
                task: wf.task_name(t),
                to: State::Pending,
                reason: serde_json::json!({ key: job }),
                key: None,
                src: None,
                cohort: None,
            });
        }
    }
    let mut interrupted = false;
    loop {
        let open: Vec<String> = tracked
            .values()
            .filter(|t| !t.state.is_final())
            .map(|t| t.job.clone())
            .collect();
        if open.is_empty() {
            break;
        }
        let seen = system.poll(&open)?;
        let before: HashMap<u32, State> = tracked.iter().map(|(t, k)| (*t, k.state)).collect();
        let failed = |d: TaskId| {
            let now = job_of
                .get(&d)
                .and_then(|(job, ..)| seen.get(job))
                .map(|s| s.state);
            [before.get(&d.0).copied(), now]
                .into_iter()
                .flatten()
                .any(|s| s.is_final() && s != State::Succeeded)
        };
        for (&t, task) in tracked.iter_mut() {
            if task.state.is_final() {
                continue;
            }
            let lost;
            let news = match seen.get(&task.job) {
                Some(news) => {
                    task.missing = 0;
                    news
                }
                None if task.missing + 1 < MISSING => {
                    task.missing += 1;
                    continue;
                }
                None => {
                    lost = Seen {
                        state: State::Failed,
                        outcome: Some(Outcome::SpawnError),
                        word: "unknown".to_owned(),
                        detail: Some(format!(
                            "job {} vanished from {}'s queue without an end slurp saw",
                            task.job,
                            system.name()
                        )),
                        dependency: false,
                    };
                    &lost
                }
            };
            if news.state == task.state {
                continue;
            }
            let id = TaskId(t);
            let name = wf.task_name(id);
            if matches!(news.state, State::Running)
                || (news.state.is_final()
                    && !task.started
                    && news.outcome != Some(Outcome::Cancelled))
            {
                // An attempt ran (perhaps between two looks).
                if !task.started {
                    task.started = true;
                    log(Record::Start {
                        t: ms(),
                        task: name.clone(),
                        attempt: 1,
                        nodes: Vec::new(),
                        cores: Vec::new(),
                        gpus: Vec::new(),
                        cohort: None,
                    });
                }
            }
            let mut to = news.state;
            task.reason = match news.outcome {
                Some(outcome) => Reason::Ended(outcome),
                None => Reason::Ready,
            };
            task.detail = news.detail.clone();
            let mut reason = match news.outcome {
                Some(outcome) => serde_json::json!({ "ended": outcome, system.name(): news.word }),
                None => serde_json::json!({ system.name(): news.word }),
            };
            // Cancelled because a dependency did not succeed: skipped, as
            // in a run here — unless the run was being stopped, which
            // cancelled it (as a run here says too).
            if to == State::Cancelled
                && !interrupted
                && let Some(dep) = wf.dependencies(id).find(|d| failed(*d)).or_else(|| {
                    news.dependency
                        .then(|| wf.dependencies(id).next())
                        .flatten()
                })
            {
                to = State::Skipped;
                task.reason = Reason::Dependency(dep);
                reason = serde_json::json!({ "dependency": wf.task_name(dep) });
            }
            task.state = to;
            log(Record::State {
                t: ms(),
                task: name.clone(),
                to,
                reason,
                // What `slurp resume` knows a success by.
                key: (to == State::Succeeded && wf.task(id).nested.is_none())
                    .then(|| crate::journal::key_text(wf.key(id, ""))),
                src: to.is_final().then(|| sources(id)),
                cohort: None,
            });
            observer.event(
                program,
                WorkflowId(0),
                "",
                &Event::Transition {
                    time: Time(ms()),
                    task: id,
                    to,
                    reason: task.reason.clone(),
                },
            );
            if to.is_final() && to != State::Skipped && wf.output(id).is_none() {
                let show = !matches!(opts.output, OutputMode::Files | OutputMode::None);
                let (_, u, index) = &job_of[&id];
                let (out, err) = system.outputs(program, &units[*u], *index, &opts.run_dir);
                for (path, stderr) in [(out, false), (err, true)] {
                    let Ok(bytes) = std::fs::read(&path) else {
                        continue;
                    };
                    if show && !bytes.is_empty() {
                        observer.output(&name, stderr, &bytes);
                    }
                    if stderr {
                        let tail = bytes.len().saturating_sub(2048);
                        task.stderr_tail = String::from_utf8_lossy(&bytes[tail..]).into_owned();
                        task.retried = String::from_utf8_lossy(&bytes)
                            .lines()
                            .filter(|l| l.starts_with("slurp: attempt ") && l.ends_with("; again"))
                            .count() as u32;
                    }
                }
            }
        }
        let stop = runtime.block_on(async {
            tokio::select! {
                _ = tokio::time::sleep(opts.poll) => false,
                _ = interrupt.recv() => true,
                _ = terminate.recv() => true,
            }
        });
        if stop && !interrupted {
            interrupted = true;
            let open: Vec<String> = tracked
                .values()
                .filter(|t| !t.state.is_final())
                .map(|t| t.job.clone())
                .collect();
            system.cancel(&open);
            eprintln!(
                "slurp: interrupted: cancelled {} {} jobs",
                open.len(),
                system.name()
            );
        }
    }
    log(Record::End {
        t: ms(),
        interrupted,
    });
    let mut counts = [0usize; 9];
    counts[State::Succeeded as usize] = done.len();
    let mut failures = Vec::new();
    for (&t, task) in &tracked {
        counts[task.state as usize] += 1;
        if task.state != State::Succeeded {
            failures.push(Failure {
                workflow: WorkflowId(0),
                task: TaskId(t),
                count: 1,
                scope: String::new(),
                name: wf.task_name(TaskId(t)),
                last: None,
                state: task.state,
                reason: task.reason.clone(),
                attempts: u32::from(task.started) + task.retried,
                stderr_tail: task.stderr_tail.clone(),
                error: task.detail.clone(),
            });
        }
    }
    Ok(Report {
        halted_on_success: false,
        counts,
        failures,
        interrupted,
        elapsed: started.elapsed(),
    })
}

/// `argv` run so that each copy sees the variables a local run sets:
/// `SLURP_TASK_RANK` from the system's own rank variable (`SLURM_PROCID`,
/// `FLUX_TASK_RANK`) and `SLURP_GPUS` from the devices the system gave it
/// (none when it hid them: `-1`, `NoDevFiles`).
pub fn per_rank(argv: Vec<String>, rank: &str) -> Vec<String> {
    let script = format!(
        "SLURP_TASK_RANK=\"${{{rank}:-0}}\"; case \"${{CUDA_VISIBLE_DEVICES:-}}\" in ''|-1|NoDevFiles) SLURP_GPUS= ;; *) SLURP_GPUS=\"$CUDA_VISIBLE_DEVICES\" ;; esac; export SLURP_TASK_RANK SLURP_GPUS; exec \"$@\""
    );
    let mut out = vec![
        "/bin/sh".to_owned(),
        "-c".to_owned(),
        script,
        "slurp-rank".to_owned(),
    ];
    out.extend(argv);
    out
}

/// Single-quotes `s` for sh.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}
