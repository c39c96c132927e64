//! `--backend flux`: Flux's commands for the batch driver
//! ([`crate::backend::batch`]).
//!
//! Every task is one job: its RFC 25 jobspec ([`crate::jobspec`]) with the
//! submitting environment, output files under the run directory, the
//! queue, and its dependencies as RFC 26 `afterok` objects on the Flux ids
//! of the jobs it waits for, given to `flux job submit` on stdin. A nested
//! entry is a `flux alloc`/`flux batch`-style instance: one `flux broker`
//! per node whose initial program is `slurp --quiet CHILD` (with the shell
//! options flux-core's `from_nest_command` sets), so the child runs inside
//! its own Flux instance (see [`crate::backend::allocation`]). `retries=N` wraps the
//! command in a shell loop. States come from `flux jobs -a`, with
//! `{state}`, `{result}`, `{returncode}` and `{exception.type}`; a job
//! cancelled by an unsatisfiable dependency has exception type
//! `dependency`. Cancelling is `flux cancel`.
//!
//! Written to flux-core's documented CLI and RFCs 25/26, and tested against
//! a real flux-core 0.88 built from source (`tests/flux.rs`,
//! `scripts/local-flux.sh`).

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::process::{Command, Stdio};

use crate::backend::batch::{Dep, Options, Seen, System, Unit, output_files};
use crate::core::{Outcome, State};
use crate::ir::{Program, TaskId, WorkflowId};
use crate::jobspec::{Dependency, Jobspec};

/// Flux, through its commands.
#[derive(Debug, Default)]
pub struct Flux;

/// The instance's biggest node and its node count (`flux resource list`),
/// for checking requests before anything is submitted.
pub fn instance_capacity() -> Result<crate::Capacity, String> {
    let out = Command::new("flux")
        .args([
            "resource",
            "list",
            "--states=up",
            "--no-header",
            "--format={nnodes} {ncores} {ngpus}",
        ])
        .output()
        .map_err(|e| {
            format!("cannot run `flux resource list`: {e} (is this inside a Flux instance?)")
        })?;
    if !out.status.success() {
        return Err(format!(
            "`flux resource list` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let n: Vec<u32> = text
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let [nodes, cores, gpus, ..] = n[..] else {
        return Err(format!(
            "cannot read `flux resource list`: `{}`",
            text.trim()
        ));
    };
    let nodes = nodes.max(1);
    Ok(crate::Capacity {
        nodes,
        cores_per_node: cores / nodes,
        gpus_per_node: gpus / nodes,
        // Flux's resource list has no memory: leave it to Flux.
        mem_per_node: u64::MAX,
    })
}

/// The jobspec `flux job submit` gets for `task`.
pub fn jobspec(program: &Program, task: TaskId, opts: &Options, after: &[&str]) -> Jobspec {
    let wf = program.workflow(WorkflowId(0));
    let mut spec = program.jobspec(WorkflowId(0), task, &opts.cwd.display().to_string());
    let name = wf.task_name(task);
    let system = &mut spec.attributes.system;
    // Like `flux submit`: the submitting environment, then the task's own.
    let mut env: BTreeMap<String, String> = std::env::vars()
        .filter(|(k, _)| !k.starts_with("SLURP_") && !k.starts_with("FLUX_JOB_"))
        .collect();
    env.extend(std::mem::take(&mut system.environment));
    env.insert("SLURP_TASK_ID".into(), name.clone());
    env.insert(
        "SLURP_NTASKS".into(),
        wf.task(task).request.ntasks.max(1).to_string(),
    );
    let mut shell = system
        .shell
        .take()
        .and_then(|s| s.get("options").cloned())
        .and_then(|o| o.as_object().cloned())
        .unwrap_or_default();
    if wf.output(task).is_none() {
        let (out, err) = output_files(&opts.run_dir, &name);
        shell.insert(
            "output".into(),
            serde_json::json!({
                "stdout": { "type": "file", "path": out.display().to_string() },
                "stderr": { "type": "file", "path": err.display().to_string() },
            }),
        );
    }
    let t = wf.task(task);
    if let Some(child) = t.nested {
        // As flux-core's `from_nest_command`: one broker per node, no MPI
        // personality, simple PMI, and the instance ends with its program.
        env.insert(
            "SLURP_PARENT_RUN".into(),
            opts.run_dir.display().to_string(),
        );
        spec.tasks[0].command = vec![
            "flux".into(),
            "broker".into(),
            opts.slurp.display().to_string(),
            "--quiet".into(),
            program
                .file(program.workflow(child).file)
                .display()
                .to_string(),
        ];
        shell.insert("per-resource".into(), serde_json::json!({ "type": "node" }));
        shell.insert("mpi".into(), "none".into());
        shell.insert("exit-timeout".into(), "none".into());
        shell.insert("pmi".into(), "simple".into());
    } else {
        // Each copy told its rank and GPUs, as a local run does.
        let argv = std::mem::take(&mut spec.tasks[0].command);
        spec.tasks[0].command = crate::backend::batch::per_rank(argv, "FLUX_TASK_RANK");
        if t.request.mem > 0 {
            env.insert("SLURP_MEM".into(), t.request.mem.to_string());
        }
    }
    if t.nested.is_none() && t.retries > 0 {
        let argv = std::mem::take(&mut spec.tasks[0].command);
        let mut command = vec![
            "/bin/sh".to_owned(),
            "-c".to_owned(),
            format!(
                "n=0; while :; do \"$@\" && exit 0; s=$?; n=$((n + 1)); [ $n -gt {} ] && exit $s; echo \"slurp: attempt $n failed (exit $s); again\" >&2; done",
                t.retries
            ),
            "slurp-retry".to_owned(),
        ];
        command.extend(argv);
        spec.tasks[0].command = command;
        // The time limit holds for each attempt.
        system.duration *= f64::from(t.retries + 1);
    }
    system.environment = env;
    system.shell = (!shell.is_empty()).then(|| serde_json::json!({ "options": shell }));
    system.dependencies = after
        .iter()
        .map(|job| Dependency {
            scheme: "afterok".into(),
            value: (*job).to_owned(),
        })
        .collect();
    system.queue = opts.queue.clone();
    spec
}

/// `flux jobs` lines in [`FORMAT`], in slurp's terms.
pub fn parse_jobs(text: &str) -> HashMap<String, Seen> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('|').map(str::trim).collect();
        let [id, state, result, code, exception, ..] = f[..] else {
            continue;
        };
        // Flux's own words on an exception (`unsatisfiable request …`),
        // the rest of the line (a note may hold `|`).
        let note = f.get(5..).map(|rest| rest.join("|")).unwrap_or_default();
        let code: i32 = code.parse().unwrap_or(-1);
        let (state, outcome, word) = match state {
            "NEW" | "DEPEND" | "PRIORITY" | "SCHED" => (State::Pending, None, state),
            "RUN" | "CLEANUP" => (State::Running, None, state),
            _ => match result {
                "COMPLETED" => (State::Succeeded, Some(Outcome::Success), result),
                "TIMEOUT" => (State::Timeout, Some(Outcome::Timeout), result),
                "CANCELED" => (State::Cancelled, Some(Outcome::Cancelled), result),
                _ if exception == "dependency" => {
                    (State::Cancelled, Some(Outcome::Cancelled), result)
                }
                // Refused at allocation: it never started.
                _ if exception == "alloc" => (State::Failed, Some(Outcome::SpawnError), result),
                // Flux reports a signal as 128 + its number.
                _ if code > 128 => (State::Failed, Some(Outcome::Signal(code - 128)), result),
                _ if code > 0 => (State::Failed, Some(Outcome::Exit(code)), result),
                _ => (State::Failed, Some(Outcome::SpawnError), result),
            },
        };
        let detail = (state == State::Failed && !exception.is_empty() && exception != "-").then(
            || match note.trim() {
                "" | "-" => format!("Flux raised a `{exception}` exception"),
                note => format!("Flux raised a `{exception}` exception: {note}"),
            },
        );
        out.insert(
            id.to_owned(),
            Seen {
                state,
                outcome,
                word: word.to_owned(),
                detail,
                dependency: exception == "dependency",
            },
        );
    }
    out
}

/// The `flux jobs --format` slurp reads.
pub const FORMAT: &str = "{id.f58}|{state}|{result}|{returncode}|{exception.type}|{exception.note}";

impl System for Flux {
    fn name(&self) -> &'static str {
        "flux"
    }

    fn submit(
        &mut self,
        program: &Program,
        unit: &Unit,
        after: &[Dep],
        opts: &Options,
    ) -> Result<Vec<String>, String> {
        let task = unit.tasks[0];
        let after: Vec<&str> = after.iter().map(|d| d.job).collect();
        let spec =
            serde_json::to_vec(&jobspec(program, task, opts, &after)).map_err(|e| e.to_string())?;
        let mut child = Command::new("flux")
            .args(["job", "submit"])
            .current_dir(&opts.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                format!("cannot run `flux job submit`: {e} (is this inside a Flux instance?)")
            })?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(&spec).map_err(|e| e.to_string())?;
        }
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
        }
        Ok(vec![String::from_utf8_lossy(&out.stdout).trim().to_owned()])
    }

    fn poll(&mut self, jobs: &[String]) -> Result<HashMap<String, Seen>, String> {
        let mut seen = HashMap::new();
        for chunk in jobs.chunks(500) {
            let out = Command::new("flux")
                .args(["jobs", "-a", "--no-header", &format!("--format={FORMAT}")])
                .args(chunk)
                .output()
                .map_err(|e| format!("cannot run `flux jobs`: {e}"))?;
            seen.extend(parse_jobs(&String::from_utf8_lossy(&out.stdout)));
        }
        Ok(seen)
    }

    fn cancel(&mut self, jobs: &[String]) {
        for chunk in jobs.chunks(500) {
            let _ = Command::new("flux").arg("cancel").args(chunk).output();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flux_jobs_lines_read_as_states() {
        let text = "ƒA|RUN|||\n\
                    ƒB|INACTIVE|COMPLETED|0|\n\
                    ƒC|INACTIVE|FAILED|3|\n\
                    ƒD|INACTIVE|TIMEOUT|143|timeout\n\
                    ƒE|INACTIVE|CANCELED|-1|cancel\n\
                    ƒF|INACTIVE|FAILED||dependency\n\
                    ƒG|INACTIVE|FAILED|137|\n\
                    ƒH|SCHED|||\n\
                    ƒI|INACTIVE|FAILED||alloc|unsatisfiable request: a|b\n";
        let seen = parse_jobs(text);
        let at = |id: &str| (seen[id].state, seen[id].outcome);
        assert_eq!(at("ƒA"), (State::Running, None));
        assert_eq!(at("ƒB"), (State::Succeeded, Some(Outcome::Success)));
        assert_eq!(at("ƒC"), (State::Failed, Some(Outcome::Exit(3))));
        assert_eq!(at("ƒD"), (State::Timeout, Some(Outcome::Timeout)));
        assert_eq!(at("ƒE"), (State::Cancelled, Some(Outcome::Cancelled)));
        assert_eq!(at("ƒF"), (State::Cancelled, Some(Outcome::Cancelled)));
        assert!(
            seen["ƒF"].dependency,
            "a failed dependency is not a failure of its own"
        );
        assert_eq!(at("ƒG"), (State::Failed, Some(Outcome::Signal(9))));
        assert_eq!(at("ƒH"), (State::Pending, None));
        assert_eq!(at("ƒI"), (State::Failed, Some(Outcome::SpawnError)));
        assert_eq!(
            seen["ƒI"].detail.as_deref(),
            Some("Flux raised a `alloc` exception: unsatisfiable request: a|b")
        );
    }
}
