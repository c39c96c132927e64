//! What a run shows on the terminal: task output and the closing summary.
//!
//! Task output is data and goes to stdout (stderr lines to stderr); the
//! summary is a log and goes to stderr. In `group` mode a task's output is
//! written whole in one call, so two tasks never interleave; in `tag` mode
//! each line is written whole, prefixed with `[task] `.

use std::io::{self, Write};

use slurp_interpreter::Loaded;
use slurp_runtime::Program;
use slurp_runtime::core::{Event, Outcome, Reason, State};
use slurp_runtime::exec::OutputMode;
use slurp_runtime::run::{Observer, Report};

pub struct Console {
    mode: OutputMode,
}

impl Console {
    pub fn new(mode: OutputMode) -> Self {
        Console { mode }
    }
}

impl Observer for Console {
    fn event(&mut self, _program: &Program, _scope: &str, _event: &Event) {}

    fn output(&mut self, name: &str, stderr: bool, bytes: &[u8]) {
        let mut buf = Vec::with_capacity(bytes.len() + name.len() + 4);
        if self.mode == OutputMode::Tag {
            buf.extend_from_slice(b"[");
            buf.extend_from_slice(name.as_bytes());
            buf.extend_from_slice(b"] ");
        }
        buf.extend_from_slice(bytes);
        if self.mode == OutputMode::Tag && !bytes.ends_with(b"\n") {
            buf.push(b'\n');
        }
        // A closed pipe must not kill the run: the tasks go on regardless.
        let _ = if stderr {
            let mut e = io::stderr().lock();
            e.write_all(&buf).and_then(|_| e.flush())
        } else {
            let mut o = io::stdout().lock();
            o.write_all(&buf).and_then(|_| o.flush())
        };
    }
}

/// How many failures the summary lists one by one.
const LISTED: usize = 20;

pub fn summary(loaded: &Loaded, report: &Report) {
    let total: usize = report.counts.iter().sum();
    let mut out = String::new();
    let parts: Vec<String> = State::ALL
        .iter()
        .filter(|s| report.counts[**s as usize] > 0)
        .map(|s| format!("{} {s}", report.counts[*s as usize]))
        .collect();
    let secs = report.elapsed.as_secs_f64();
    if report.interrupted {
        out.push_str("slurp: interrupted\n");
    }
    out.push_str(&format!(
        "slurp: {total} task{}: {} in {secs:.1} s\n",
        if total == 1 { "" } else { "s" },
        parts.join(", ")
    ));
    for failure in report
        .failures
        .iter()
        .filter(|f| f.state != State::Cancelled || !report.interrupted)
        .take(LISTED)
    {
        let workflow = loaded.program.workflow(failure.workflow);
        let template = workflow.template(workflow.task(failure.task).template);
        let source = loaded.sources.get(template.source.file);
        let what = match (&failure.reason, failure.state) {
            // A nested entry, or a task that could not start: the reason
            // slurp recorded says more than an exit status.
            (Reason::Ended(_), _) if failure.error.is_some() => {
                failure.error.clone().unwrap_or_default()
            }
            (Reason::Ended(Outcome::Exit(code)), _) => format!("exit status {code}"),
            (Reason::Ended(Outcome::Signal(sig)), _) => format!("killed by signal {sig}"),
            (Reason::Ended(Outcome::Timeout), _) => "ran past its time limit".to_owned(),
            (Reason::Ended(Outcome::SpawnError), _) => failure
                .error
                .clone()
                .unwrap_or_else(|| "could not start".to_owned()),
            (Reason::Dependency(dep), _) => {
                // The dependency lives in the same instance: same path.
                format!(
                    "dependency `{}{}` did not succeed",
                    failure.scope,
                    workflow.task_name(*dep)
                )
            }
            (Reason::Halted, _) => "not started: the run was stopped".to_owned(),
            (_, state) => state.to_string(),
        };
        let attempts = if failure.attempts > 1 {
            format!(", {} attempts", failure.attempts)
        } else {
            String::new()
        };
        out.push_str(&format!(
            "  {:<9} {}  {what}{attempts}  ({}:{})\n",
            failure.state.name(),
            failure.name,
            source.display,
            template.source.line
        ));
        for line in failure
            .stderr_tail
            .lines()
            .filter(|l| !l.trim().is_empty())
            .rev()
            .take(3)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            out.push_str(&format!("            | {line}\n"));
        }
    }
    let listed = report.failures.len().min(LISTED);
    if report.failures.len() > listed {
        out.push_str(&format!(
            "  … and {} more\n",
            report.failures.len() - listed
        ));
    }
    let _ = io::stderr().write_all(out.as_bytes());
}
