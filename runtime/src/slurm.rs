//! `--backend slurm`: every task becomes a Slurm job, and slurp follows
//! them to the end.
//!
//! The workflow is cut into submission units — one job per task, or one
//! job array per sweep whose elements share everything but their command
//! and environment (same dependencies, resources, limits, no own output
//! file). Units are submitted in dependency order with `sbatch --parsable`,
//! each naming its dependencies' job ids (`--dependency=afterok:…`,
//! `--kill-on-invalid-dep=yes`), so Slurm, not slurp, sequences them and a
//! failure's dependents are cancelled by Slurm and reported `skipped`. A
//! nested entry becomes one allocation of its size whose program is
//! `slurp CHILD`: inside it slurp runs the child's tasks as job steps
//! (see [`crate::allocation`]). `retries=N` loops inside the job script.
//!
//! slurp then polls `squeue` (and `scontrol show job` once per finished job
//! for its exit code), journals every transition, prints each job's output
//! when it ends, and on Ctrl-C cancels what is left with `scancel`.
//! Submission is all or nothing: if `sbatch` refuses a unit (bad
//! partition, limits), the units already submitted are cancelled and the
//! error is shown with Slurm's words and the task's line.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::Capacity;
use crate::core::{Outcome, Reason, State};
use crate::exec::OutputMode;
use crate::ir::{Program, TaskId, WorkflowId};
use crate::journal::{Journal, Record};
use crate::run::{Failure, Observer, Report};

/// How to submit.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--partition`, when given.
    pub partition: Option<String>,
    /// Time between two looks at the queue.
    pub poll: Duration,
    pub cwd: PathBuf,
    /// The run's directory: job scripts and output go under it.
    pub run_dir: PathBuf,
    /// This slurp, for nested entries.
    pub slurp: PathBuf,
    pub output: OutputMode,
}

/// A job or a job array: the tasks it runs, in array index order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    pub tasks: Vec<TaskId>,
    pub array: bool,
}

/// The cluster's biggest node and how many nodes it has (`sinfo`), for
/// checking requests before anything is submitted.
pub fn cluster_capacity() -> Result<Capacity, String> {
    let out = Command::new("sinfo")
        .args(["-h", "-N", "-o", "%c %m"])
        .output()
        .map_err(|e| format!("cannot run `sinfo`: {e} (is this a Slurm cluster's login node?)"))?;
    if !out.status.success() {
        return Err(format!(
            "`sinfo` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let nodes: Vec<(u32, u64)> = text
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((
                w.next()?.parse().ok()?,
                w.next()?.trim_end_matches('+').parse().ok()?,
            ))
        })
        .collect();
    if nodes.is_empty() {
        return Err("`sinfo` lists no nodes".to_owned());
    }
    Ok(Capacity {
        nodes: nodes.len() as u32,
        cores_per_node: nodes.iter().map(|n| n.0).max().unwrap_or(1),
        // GPUs are Slurm's to check (gres); do not refuse them here.
        gpus_per_node: u32::MAX,
        mem_per_node: nodes.iter().map(|n| n.1).max().unwrap_or(0) << 20,
    })
}

/// Cuts the top-level workflow into units, in an order where every unit
/// comes after the units it depends on.
pub fn plan(program: &Program) -> Vec<Unit> {
    let wf = program.workflow(WorkflowId(0));
    let mut by_template: BTreeMap<u32, Vec<TaskId>> = BTreeMap::new();
    for t in wf.task_ids() {
        by_template
            .entry(wf.task(t).template.0)
            .or_default()
            .push(t);
    }
    let mut units: Vec<Unit> = Vec::new();
    for tasks in by_template.into_values() {
        let first = wf.task(tasks[0]);
        let deps = |t: TaskId| {
            let mut d: Vec<TaskId> = wf.dependencies(t).collect();
            d.sort_unstable_by_key(|t| t.0);
            d
        };
        let alike = tasks.len() > 1
            && first.nested.is_none()
            && wf.output(tasks[0]).is_none()
            && tasks.iter().all(|&t| {
                let task = wf.task(t);
                task.request == first.request
                    && task.time_limit == first.time_limit
                    && task.retries == first.retries
                    && wf.cwd(t) == wf.cwd(tasks[0])
                    && deps(t) == deps(tasks[0])
                    // No element waits for another of the same array.
                    && deps(t).iter().all(|d| wf.task(*d).template != first.template)
            });
        if alike {
            units.push(Unit { tasks, array: true });
        } else {
            units.extend(tasks.into_iter().map(|t| Unit {
                tasks: vec![t],
                array: false,
            }));
        }
    }
    // Dependency order (tasks are numbered so that dependencies come first
    // within a template; across templates, sort by the deepest dependency).
    let unit_of: HashMap<TaskId, usize> = units
        .iter()
        .enumerate()
        .flat_map(|(u, unit)| unit.tasks.iter().map(move |&t| (t, u)))
        .collect();
    let mut order = Vec::with_capacity(units.len());
    let mut placed = vec![false; units.len()];
    while order.len() < units.len() {
        let before = order.len();
        for u in 0..units.len() {
            if placed[u] {
                continue;
            }
            let ready = units[u]
                .tasks
                .iter()
                .flat_map(|&t| wf.dependencies(t))
                .all(|d| unit_of[&d] == u || placed[unit_of[&d]]);
            if ready {
                placed[u] = true;
                order.push(u);
            }
        }
        // The checker refuses cycles; never loop on one regardless.
        if order.len() == before {
            order.extend((0..units.len()).filter(|&u| !placed[u]));
            break;
        }
    }
    order.into_iter().map(|u| units[u].clone()).collect()
}

/// Single-quotes `s` for sh.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn safe(name: &str) -> String {
    name.replace('/', "_")
}

/// The sbatch options and the script of a unit.
pub fn script(
    program: &Program,
    unit: &Unit,
    opts: &Options,
    after: &[String],
) -> (Vec<String>, String) {
    let wf = program.workflow(WorkflowId(0));
    let first = unit.tasks[0];
    let task = wf.task(first);
    let template = wf.template(task.template);
    let r = task.request;
    let name = if unit.array {
        template.name()
    } else {
        wf.task_name(first)
    };
    let mut args = vec![
        "--parsable".to_owned(),
        format!("--job-name={name}"),
        format!("--ntasks={}", r.ntasks.max(1)),
        format!("--cpus-per-task={}", r.cores.max(1)),
        format!(
            "--chdir={}",
            wf.cwd(first)
                .map_or_else(|| opts.cwd.clone(), |d| opts.cwd.join(d))
                .display()
        ),
    ];
    if r.nodes > 0 {
        args.push(format!("--nodes={}", r.nodes));
    }
    if r.gpus > 0 {
        args.push(format!("--gpus-per-task={}", r.gpus));
    }
    if r.mem > 0 {
        args.push(format!(
            "--mem-per-cpu={}K",
            (r.mem / u64::from(r.cores.max(1))).div_ceil(1024)
        ));
    }
    if let Some(limit) = task.time_limit {
        // Slurm counts whole minutes; retries get one limit per attempt.
        let secs = limit.get() * (u64::from(task.retries) + 1);
        args.push(format!("--time={}", secs.div_ceil(60)));
    }
    if let Some(p) = &opts.partition {
        args.push(format!("--partition={p}"));
    }
    if !after.is_empty() {
        args.push(format!("--dependency=afterok:{}", after.join(":")));
        args.push("--kill-on-invalid-dep=yes".to_owned());
    }
    let out = opts.run_dir.join("out");
    match (wf.output(first), unit.array) {
        (Some(file), _) => {
            let path = opts.cwd.join(file);
            args.push(format!("--output={}", path.display()));
            args.push(format!("--error={}", path.display()));
        }
        (None, true) => {
            args.push(format!("--array=0-{}", unit.tasks.len() - 1));
            args.push(format!("--output={}/{}-%a.out", out.display(), safe(&name)));
            args.push(format!("--error={}/{}-%a.err", out.display(), safe(&name)));
        }
        (None, false) => {
            args.push(format!("--output={}/{}.out", out.display(), safe(&name)));
            args.push(format!("--error={}/{}.err", out.display(), safe(&name)));
        }
    }
    let mut s = String::from("#!/bin/sh\n");
    s.push_str(&format!(
        "# slurp: {} ({})\nexport SLURP_NTASKS={}\nunset SLURP_RUN_DIR\n",
        name,
        program.file(program.workflow(WorkflowId(0)).file).display(),
        r.ntasks.max(1)
    ));
    // One attempt, then `retries` more while it fails.
    let body = |t: TaskId| -> String {
        let mut b = format!("export SLURP_TASK_ID={}\n", quote(&wf.task_name(t)));
        if wf.task(t).nested.is_some() {
            // Its journal goes inside this run's, not beside it.
            b.push_str(&format!(
                "export SLURP_PARENT_RUN={}\n",
                quote(&opts.run_dir.display().to_string())
            ));
        }
        for (k, v) in wf.environment(t) {
            b.push_str(&format!("export {k}={}\n", quote(&v)));
        }
        let argv: Vec<String> = match wf.task(t).nested {
            // A nested entry: this slurp on the child file, inside the job.
            // `--quiet`: its summary only when something failed.
            Some(child) => vec![
                opts.slurp.display().to_string(),
                "--quiet".to_owned(),
                program
                    .file(program.workflow(child).file)
                    .display()
                    .to_string(),
            ],
            None => wf.argv(t),
        };
        let command = argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ");
        let launch = if r.ntasks > 1 && wf.task(t).nested.is_none() {
            format!("srun -- {command}")
        } else {
            command
        };
        let retries = wf.task(t).retries;
        if retries == 0 {
            b.push_str(&format!("exec {launch}\n"));
        } else {
            b.push_str(&format!(
                "attempt=1\nwhile :; do\n  {launch} && exit 0\n  status=$?\n  [ $attempt -gt {retries} ] && exit $status\n  echo \"slurp: attempt $attempt failed (exit $status); again\" >&2\n  attempt=$((attempt + 1))\ndone\n"
            ));
        }
        b
    };
    if unit.array {
        s.push_str("case \"$SLURM_ARRAY_TASK_ID\" in\n");
        for (i, &t) in unit.tasks.iter().enumerate() {
            s.push_str(&format!("{i})\n{};;\n", body(t)));
        }
        s.push_str(
            "esac\necho \"slurp: no task for array index $SLURM_ARRAY_TASK_ID\" >&2\nexit 2\n",
        );
    } else {
        s.push_str(&body(first));
    }
    (args, s)
}

/// Where one task stands.
#[derive(Debug, Clone)]
struct Tracked {
    /// `123` or `123_4`.
    job: String,
    state: State,
    reason: Reason,
    detail: Option<String>,
    stderr_tail: String,
}

fn squeue(ids: &[String]) -> Result<HashMap<String, (String, String)>, String> {
    let mut out = HashMap::new();
    for chunk in ids.chunks(500) {
        let o = Command::new("squeue")
            .args([
                "-h",
                "-r",
                "-t",
                "all",
                "-o",
                "%i|%T|%r",
                "-j",
                &chunk.join(","),
            ])
            .output()
            .map_err(|e| format!("cannot run squeue: {e}"))?;
        // squeue fails when none of the ids is known any more.
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            let mut f = line.split('|');
            if let (Some(id), Some(state), Some(reason)) = (f.next(), f.next(), f.next()) {
                out.insert(
                    id.trim().to_owned(),
                    (state.trim().to_owned(), reason.trim().to_owned()),
                );
            }
        }
    }
    Ok(out)
}

/// `ExitCode=3:0` of a finished job: (status, signal).
fn exit_code(job: &str) -> Option<(i32, i32)> {
    let o = Command::new("scontrol")
        .args(["show", "job", "-o", job])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&o.stdout);
    let code = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("ExitCode="))?;
    let (status, signal) = code.split_once(':')?;
    Some((status.parse().ok()?, signal.parse().ok()?))
}

fn scancel(ids: &[String]) {
    for chunk in ids.chunks(500) {
        let _ = Command::new("scancel").args(chunk).output();
    }
}

/// Submits the workflow and follows it to the end.
pub fn run(
    program: &Program,
    opts: &Options,
    observer: &mut dyn Observer,
    mut journal: Option<Journal>,
    sources: &dyn Fn(TaskId) -> String,
) -> Result<Report, String> {
    let started = Instant::now();
    let wf = program.workflow(WorkflowId(0));
    let ms = |s: Instant| s.elapsed().as_millis() as u64;
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
    std::fs::create_dir_all(opts.run_dir.join("out")).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(opts.run_dir.join("jobs")).map_err(|e| e.to_string())?;
    let units = plan(program);
    let mut job_of: HashMap<TaskId, (String, usize, usize)> = HashMap::new();
    let mut tracked: BTreeMap<u32, Tracked> = BTreeMap::new();
    let mut submitted: Vec<String> = Vec::new();
    for (u, unit) in units.iter().enumerate() {
        // afterok on whole arrays when every element is needed.
        let mut after: Vec<String> = Vec::new();
        let deps: Vec<TaskId> = {
            let mut d: Vec<TaskId> = unit
                .tasks
                .iter()
                .flat_map(|&t| wf.dependencies(t))
                .collect();
            d.sort_unstable_by_key(|t| t.0);
            d.dedup();
            d
        };
        let mut whole: HashMap<usize, usize> = HashMap::new();
        for d in &deps {
            *whole.entry(job_of[d].1).or_default() += 1;
        }
        for d in &deps {
            let (id, du, index) = &job_of[d];
            let array = units[*du].array;
            let all = whole[du] == units[*du].tasks.len();
            let text = match (array, all) {
                (true, true) => id.split('_').next().unwrap_or(id).to_owned(),
                (true, false) => format!("{}_{}", id.split('_').next().unwrap_or(id), index),
                (false, _) => id.clone(),
            };
            if !after.contains(&text) {
                after.push(text);
            }
        }
        let (args, body) = script(program, unit, opts, &after);
        let path = opts.run_dir.join("jobs").join(format!("{u}.sh"));
        std::fs::write(&path, &body).map_err(|e| e.to_string())?;
        let out = Command::new("sbatch")
            .args(&args)
            .arg(&path)
            .current_dir(&opts.cwd)
            .output();
        let id = match out {
            Ok(o) if o.status.success() => {
                let text = String::from_utf8_lossy(&o.stdout);
                text.trim().split(';').next().unwrap_or_default().to_owned()
            }
            other => {
                let why = match other {
                    Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_owned(),
                    Err(e) => format!("cannot run sbatch: {e}"),
                };
                scancel(&submitted);
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
        submitted.push(id.clone());
        for (index, &t) in unit.tasks.iter().enumerate() {
            let job = if unit.array {
                format!("{id}_{index}")
            } else {
                id.clone()
            };
            job_of.insert(t, (job.clone(), u, index));
            tracked.insert(
                t.0,
                Tracked {
                    job: job.clone(),
                    state: State::Pending,
                    reason: Reason::Waiting,
                    detail: None,
                    stderr_tail: String::new(),
                },
            );
            log(Record::State {
                t: ms(started),
                task: wf.task_name(t),
                to: State::Pending,
                reason: serde_json::json!({ "slurm_job": job }),
                key: None,
                src: None,
            });
        }
    }
    // Follow until every task reached a final state.
    let mut interrupted = false;
    let mut attempts: HashMap<u32, u32> = HashMap::new();
    loop {
        let open: Vec<String> = tracked
            .values()
            .filter(|t| !t.state.is_final())
            .map(|t| t.job.clone())
            .collect();
        if open.is_empty() {
            break;
        }
        let seen = squeue(&open)?;
        let before: HashMap<u32, State> = tracked.iter().map(|(t, k)| (*t, k.state)).collect();
        let failed = |d: TaskId| {
            before
                .get(&d.0)
                .is_some_and(|s| s.is_final() && *s != State::Succeeded)
                || tracked_state(&seen, &job_of, d)
                    .is_some_and(|s| s != "COMPLETED" && s != "PENDING" && s != "RUNNING")
        };
        for (&t, task) in tracked.iter_mut() {
            if task.state.is_final() {
                continue;
            }
            let id = TaskId(t);
            let name = wf.task_name(id);
            let Some((state, reason)) = seen.get(&task.job) else {
                // Gone from the queue without a final state seen: ask once.
                let (to, why) = match exit_code(&task.job) {
                    Some((0, 0)) => (State::Succeeded, Reason::Ended(Outcome::Success)),
                    Some((_, sig)) if sig > 0 => {
                        (State::Failed, Reason::Ended(Outcome::Signal(sig)))
                    }
                    Some((code, _)) => (State::Failed, Reason::Ended(Outcome::Exit(code))),
                    None => (State::Failed, Reason::Ended(Outcome::SpawnError)),
                };
                task.state = to;
                task.reason = why;
                task.detail = Some("the job left the queue before slurp saw it end".to_owned());
                continue;
            };
            let to = match state.as_str() {
                "PENDING" | "CONFIGURING" | "REQUEUED" | "RESV_DEL_HOLD" | "REQUEUE_HOLD"
                | "SUSPENDED" => {
                    if reason == "DependencyNeverSatisfied" {
                        // Without kill-on-invalid-dep: cancel it ourselves.
                        scancel(std::slice::from_ref(&task.job));
                    }
                    State::Pending
                }
                "RUNNING" | "COMPLETING" | "STAGE_OUT" | "SIGNALING" => State::Running,
                "COMPLETED" => State::Succeeded,
                "TIMEOUT" | "DEADLINE" => State::Timeout,
                "CANCELLED" => State::Cancelled,
                _ => State::Failed,
            };
            if to == task.state {
                continue;
            }
            let mut reason_value = serde_json::json!({ "slurm": state });
            match to {
                State::Running => {
                    *attempts.entry(t).or_default() += 1;
                    log(Record::Start {
                        t: ms(started),
                        task: name.clone(),
                        attempt: 1,
                        nodes: Vec::new(),
                        cores: Vec::new(),
                        gpus: Vec::new(),
                    });
                    task.reason = Reason::Ready;
                }
                State::Succeeded => task.reason = Reason::Ended(Outcome::Success),
                State::Timeout => task.reason = Reason::Ended(Outcome::Timeout),
                State::Failed => {
                    task.reason = match exit_code(&task.job) {
                        Some((_, sig)) if sig > 0 => Reason::Ended(Outcome::Signal(sig)),
                        Some((code, _)) => Reason::Ended(Outcome::Exit(code)),
                        None => Reason::Ended(Outcome::SpawnError),
                    };
                    if state == "OUT_OF_MEMORY" {
                        task.detail = Some("ran out of memory (Slurm OUT_OF_MEMORY)".to_owned());
                    } else if state != "FAILED" {
                        task.detail = Some(format!("Slurm says {state}"));
                    }
                }
                State::Cancelled => task.reason = Reason::Ended(Outcome::Cancelled),
                _ => {}
            }
            let mut to = to;
            // Cancelled because a dependency failed: skipped, as at home.
            let never = reason == "DependencyNeverSatisfied";
            if to == State::Cancelled
                && let Some(dep) = wf
                    .dependencies(id)
                    .find(|d| failed(*d))
                    .or_else(|| never.then(|| wf.dependencies(id).next()).flatten())
            {
                to = State::Skipped;
                task.reason = Reason::Dependency(dep);
                reason_value = serde_json::json!({ "dependency": wf.task_name(dep) });
            } else if let Reason::Ended(o) = &task.reason {
                reason_value = serde_json::json!({ "ended": o, "slurm": state });
            }
            task.state = to;
            log(Record::State {
                t: ms(started),
                task: name.clone(),
                to,
                reason: reason_value,
                key: None,
                src: to.is_final().then(|| sources(id)),
            });
            observer.event(
                program,
                WorkflowId(0),
                "",
                &crate::core::Event::Transition {
                    time: crate::core::Time(ms(started)),
                    task: id,
                    to,
                    reason: task.reason.clone(),
                },
            );
            if to.is_final() && to != State::Skipped {
                let show = !matches!(opts.output, OutputMode::Files | OutputMode::None);
                let stderr = output(
                    wf.output(id).is_some(),
                    &opts.run_dir,
                    &job_of[&id],
                    &units,
                    &name,
                    show.then_some(&mut *observer),
                    wf,
                );
                let tail = stderr.len().saturating_sub(2048);
                task.stderr_tail = String::from_utf8_lossy(&stderr[tail..]).into_owned();
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
            scancel(&open);
            eprintln!("slurp: interrupted: cancelled {} Slurm jobs", open.len());
        }
    }
    log(Record::End {
        t: ms(started),
        interrupted,
    });
    let mut counts = [0usize; 8];
    let mut failures = Vec::new();
    for (&t, task) in &tracked {
        counts[task.state as usize] += 1;
        if task.state != State::Succeeded {
            failures.push(Failure {
                workflow: WorkflowId(0),
                task: TaskId(t),
                scope: String::new(),
                name: wf.task_name(TaskId(t)),
                state: task.state,
                reason: task.reason.clone(),
                attempts: attempts.get(&t).copied().unwrap_or(0),
                stderr_tail: task.stderr_tail.clone(),
                error: task.detail.clone(),
            });
        }
    }
    Ok(Report {
        counts,
        failures,
        interrupted,
        elapsed: started.elapsed(),
    })
}

fn tracked_state<'a>(
    seen: &'a HashMap<String, (String, String)>,
    job_of: &HashMap<TaskId, (String, usize, usize)>,
    task: TaskId,
) -> Option<&'a str> {
    seen.get(&job_of.get(&task)?.0).map(|(s, _)| s.as_str())
}

/// A finished job's output: shown through the observer, as a local run
/// would (when there is one), and its stderr returned for the summary.
fn output(
    own_file: bool,
    run_dir: &Path,
    (_, unit, index): &(String, usize, usize),
    units: &[Unit],
    name: &str,
    mut observer: Option<&mut dyn Observer>,
    wf: &crate::ir::Workflow,
) -> Vec<u8> {
    if own_file {
        return Vec::new();
    }
    let base = if units[*unit].array {
        let t = wf.task(units[*unit].tasks[0]);
        format!("{}-{index}", safe(&wf.template(t.template).name()))
    } else {
        safe(name)
    };
    let mut err = Vec::new();
    for (ext, stderr) in [("out", false), ("err", true)] {
        if let Ok(bytes) = std::fs::read(run_dir.join("out").join(format!("{base}.{ext}")))
            && !bytes.is_empty()
        {
            if let Some(o) = observer.as_deref_mut() {
                o.output(name, stderr, &bytes);
            }
            if stderr {
                err = bytes;
            }
        }
    }
    err
}
