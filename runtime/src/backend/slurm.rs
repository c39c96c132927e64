//! `--backend slurm`: Slurm's commands for the batch driver
//! ([`crate::backend::batch`]).
//!
//! A sweep whose elements share everything but their command and
//! environment (same dependencies, resources, limits, no own output file)
//! is one job array; every other task its own job. Each is an `sbatch
//! --parsable` script (`RUN/jobs/N.sh`) naming its dependencies' jobs
//! (`--dependency=afterok:…`: a whole array by its id, elements as
//! `ID_INDEX`) with `--kill-on-invalid-dep=yes`. A nested entry is one
//! allocation of its size whose program is `slurp --quiet CHILD`: inside it
//! slurp runs the child's tasks as job steps ([`crate::backend::allocation`]).
//! `retries=N` loops inside the script. States come from `squeue -t all`,
//! exit codes from `scontrol show job` once a job ended.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::Command;

use crate::Capacity;
use crate::backend::batch::{Dep, Options, Seen, System, Unit, output_files, quote};
use crate::core::{Outcome, State};
use crate::ir::{Program, TaskId, WorkflowId};

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
    if let Some(p) = &opts.queue {
        args.push(format!("--partition={p}"));
    }
    if !after.is_empty() {
        args.push(format!("--dependency=afterok:{}", after.join(":")));
        args.push("--kill-on-invalid-dep=yes".to_owned());
    }
    match (wf.output(first), unit.array) {
        (Some(file), _) => {
            let path = opts.cwd.join(file);
            args.push(format!("--output={}", path.display()));
            args.push(format!("--error={}", path.display()));
        }
        (None, true) => {
            let (out, err) = array_files(&opts.run_dir, &name);
            args.push(format!("--array=0-{}", unit.tasks.len() - 1));
            args.push(format!("--output={}", out.display()));
            args.push(format!("--error={}", err.display()));
        }
        (None, false) => {
            let (out, err) = output_files(&opts.run_dir, &name);
            args.push(format!("--output={}", out.display()));
            args.push(format!("--error={}", err.display()));
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
        if wf.task(t).request.mem > 0 {
            b.push_str(&format!("export SLURP_MEM={}\n", wf.task(t).request.mem));
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
            None => crate::backend::batch::per_rank(wf.argv(t), "SLURM_PROCID"),
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

/// An array's output files: `%a` is the element's index.
fn array_files(run_dir: &std::path::Path, name: &str) -> (PathBuf, PathBuf) {
    output_files(run_dir, &format!("{name}-%a"))
}

/// Slurm, through its commands.
#[derive(Debug, Default)]
pub struct Slurm {
    scripts: usize,
}

impl System for Slurm {
    fn name(&self) -> &'static str {
        "slurm"
    }

    fn plan(&self, program: &Program) -> Vec<Unit> {
        plan(program)
    }

    fn outputs(
        &self,
        program: &Program,
        unit: &Unit,
        index: usize,
        run_dir: &std::path::Path,
    ) -> (PathBuf, PathBuf) {
        if !unit.array {
            let wf = program.workflow(WorkflowId(0));
            return output_files(run_dir, &wf.task_name(unit.tasks[index]));
        }
        let wf = program.workflow(WorkflowId(0));
        let name = wf.template(wf.task(unit.tasks[0]).template).name();
        let (out, err) = array_files(run_dir, &name);
        let at =
            |p: PathBuf| PathBuf::from(p.display().to_string().replace("%a", &index.to_string()));
        (at(out), at(err))
    }

    fn submit(
        &mut self,
        program: &Program,
        unit: &Unit,
        after: &[Dep],
        opts: &Options,
    ) -> Result<Vec<String>, String> {
        // A whole array by its id, single elements as ID_INDEX.
        let mut ids: Vec<String> = Vec::new();
        for dep in after {
            let array = dep.job.split('_').next().unwrap_or(dep.job);
            let id = match (dep.unit.array, dep.whole) {
                (true, true) => array.to_owned(),
                (true, false) => format!("{array}_{}", dep.index),
                (false, _) => dep.job.to_owned(),
            };
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        let (args, body) = script(program, unit, opts, &ids);
        self.scripts += 1;
        let path = opts
            .run_dir
            .join("jobs")
            .join(format!("{}.sh", self.scripts));
        std::fs::write(&path, body).map_err(|e| e.to_string())?;
        let out = Command::new("sbatch")
            .args(&args)
            .arg(&path)
            .current_dir(&opts.cwd)
            .output()
            .map_err(|e| format!("cannot run sbatch: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
        }
        // `--parsable` prints `ID` or `ID;CLUSTER`.
        let text = String::from_utf8_lossy(&out.stdout);
        let id = text.trim().split(';').next().unwrap_or_default().to_owned();
        Ok(if unit.array {
            (0..unit.tasks.len()).map(|i| format!("{id}_{i}")).collect()
        } else {
            vec![id]
        })
    }

    fn poll(&mut self, jobs: &[String]) -> Result<HashMap<String, Seen>, String> {
        let queue = squeue(jobs)?;
        let mut out = HashMap::new();
        for job in jobs {
            let seen = match queue.get(job) {
                Some((word, reason)) => seen(word, reason, job),
                // Gone from the queue before slurp saw it end: ask once.
                None => {
                    let mut s = seen("COMPLETED", "", job);
                    match exit_code(job) {
                        Some((0, 0)) => {}
                        Some(code) => {
                            s = seen("FAILED", "", job);
                            s.outcome = Some(ended(code));
                        }
                        None => {
                            s = seen("FAILED", "", job);
                            s.outcome = Some(Outcome::SpawnError);
                        }
                    }
                    s.detail = Some("the job left the queue before slurp saw it end".to_owned());
                    s
                }
            };
            out.insert(job.clone(), seen);
        }
        Ok(out)
    }

    fn cancel(&mut self, jobs: &[String]) {
        scancel(jobs);
    }
}

/// An exit code as an outcome: a signal wins.
fn ended((status, signal): (i32, i32)) -> Outcome {
    if signal > 0 {
        Outcome::Signal(signal)
    } else {
        Outcome::Exit(status)
    }
}

/// One `squeue` line, in slurp's terms.
fn seen(word: &str, reason: &str, job: &str) -> Seen {
    let (state, outcome, detail) = match word {
        "PENDING" | "CONFIGURING" | "REQUEUED" | "RESV_DEL_HOLD" | "REQUEUE_HOLD" | "SUSPENDED" => {
            if reason == "DependencyNeverSatisfied" {
                // Without kill-on-invalid-dep it would wait for ever.
                scancel(&[job.to_owned()]);
            }
            (State::Pending, None, None)
        }
        "RUNNING" | "COMPLETING" | "STAGE_OUT" | "SIGNALING" => (State::Running, None, None),
        "COMPLETED" => (State::Succeeded, Some(Outcome::Success), None),
        "TIMEOUT" | "DEADLINE" => (State::Timeout, Some(Outcome::Timeout), None),
        "CANCELLED" => (State::Cancelled, Some(Outcome::Cancelled), None),
        "OUT_OF_MEMORY" => (
            State::OutOfMemory,
            Some(Outcome::OutOfMemory),
            Some("ran out of memory (Slurm OUT_OF_MEMORY: past its --mem-per-cpu)".to_owned()),
        ),
        other => {
            let outcome = exit_code(job).map_or(Outcome::SpawnError, ended);
            let detail = match other {
                "FAILED" => None,
                _ => Some(format!("Slurm says {other}")),
            };
            (State::Failed, Some(outcome), detail)
        }
    };
    Seen {
        state,
        outcome,
        word: word.to_owned(),
        detail,
        dependency: reason == "DependencyNeverSatisfied",
    }
}
