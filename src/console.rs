//! What a run shows on the terminal: task output and the closing summary.
//!
//! Task output is data and goes to stdout (stderr lines to stderr); the
//! summary is a log and goes to stderr. In `group` mode a task's output is
//! written whole in one call, so two tasks never interleave; in `tag` mode
//! each line is written whole, prefixed with `[task] `.

use std::io::{self, Write};

use slurp_interpreter::Loaded;
use slurp_runtime::Program;
use slurp_runtime::WorkflowId;
use slurp_runtime::core::{Event, Outcome, Reason, State};
use slurp_runtime::exec::OutputMode;
use slurp_runtime::journal::Replay;
use slurp_runtime::run::{Observer, Report};

use crate::progress::Progress;
use std::process::ExitCode;

pub struct Console {
    mode: OutputMode,
    progress: Option<Progress>,
}

impl Console {
    pub fn new(mode: OutputMode, progress: Option<Progress>) -> Self {
        Console { mode, progress }
    }

    /// Takes the live display down, for the summary.
    pub fn finish(&mut self) {
        if let Some(progress) = self.progress.take() {
            progress.finish();
        }
    }
}

impl Observer for Console {
    fn event(&mut self, program: &Program, workflow: WorkflowId, scope: &str, event: &Event) {
        if let Some(progress) = &self.progress {
            progress.event(program, workflow, scope, event);
        }
    }

    fn submitted(&mut self, scope: &str, count: usize) {
        if let Some(progress) = &self.progress {
            progress.submitted(scope, count);
        }
    }

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
        let write = || {
            let _ = if stderr {
                let mut e = io::stderr().lock();
                e.write_all(&buf).and_then(|_| e.flush())
            } else {
                let mut o = io::stdout().lock();
                o.write_all(&buf).and_then(|_| o.flush())
            };
        };
        match &self.progress {
            Some(progress) => progress.write_above(write),
            None => write(),
        }
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
    if total == 0 {
        out.push_str("slurp: no tasks to run (no line, or no input values)\n");
    } else {
        out.push_str(&format!(
            "slurp: {total} task{}: {} in {secs:.1} s\n",
            if total == 1 { "" } else { "s" },
            parts.join(", ")
        ));
    }
    // An interrupted run's cancelled tasks are only counted.
    let shown: Vec<&slurp_runtime::run::Failure> = report
        .failures
        .iter()
        .filter(|f| f.state != State::Cancelled || !report.interrupted)
        .collect();
    for failure in shown.iter().take(LISTED) {
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
            (Reason::Ended(Outcome::OutOfMemory), _) => "ran out of memory".to_owned(),
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
        let name = match &failure.last {
            Some(last) => format!("{} … {last} ({} members)", failure.name, failure.count),
            None => failure.name.clone(),
        };
        out.push_str(&format!(
            "  {:<9} {name}  {what}{attempts}  ({}:{})\n",
            failure.state.name(),
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
    let hidden: u64 = shown.iter().skip(LISTED).map(|f| u64::from(f.count)).sum();
    if hidden > 0 {
        out.push_str(&format!("  … and {hidden} more\n"));
    }
    let _ = io::stderr().write_all(out.as_bytes());
}

/// The runs of `.slurp/` in the working directory, or why there are none.
fn store() -> io::Result<Result<std::path::PathBuf, String>> {
    let cwd = std::env::current_dir()?;
    let store = cwd.join(".slurp");
    if !store.join("runs").is_dir() {
        return Ok(Err(
            "no runs here: .slurp/ is created by the first `slurp FILE` in this directory"
                .to_owned(),
        ));
    }
    Ok(match slurp_runtime::journal::open_store(&cwd)? {
        Ok(store) => Ok(store),
        Err(mismatch) => Err(mismatch.to_string()),
    })
}

fn how(replay: &Replay) -> &'static str {
    if replay.damage.fatal().is_some() {
        return "damaged";
    }
    match replay.ended {
        Some(false) => "ended",
        Some(true) => "interrupted",
        None if replay.live() => "running",
        None => "killed",
    }
}

fn counts_line(counts: &[usize; 9], lost: usize) -> String {
    let parts: Vec<String> = counted(counts, lost)
        .into_iter()
        .map(|(n, name)| format!("{n} {name}"))
        .collect();
    if parts.is_empty() {
        "no task yet".to_owned()
    } else {
        parts.join(", ")
    }
}

/// The states with tasks, in order, with what a dead run left running
/// (counted `cancelled`) told apart as `lost`, after `cancelled`.
fn counted(counts: &[usize; 9], lost: usize) -> Vec<(usize, &'static str)> {
    let mut parts = Vec::new();
    for s in State::ALL {
        let mut n = counts[s as usize];
        if s == State::Cancelled {
            n -= lost.min(n);
        }
        if n > 0 {
            parts.push((n, s.name()));
        }
        if s == State::Cancelled && lost > 0 {
            parts.push((lost, "lost"));
        }
    }
    parts
}

/// A task's state as status shows it: `lost` for one a dead run left.
fn shown_state(replay: &Replay, id: &str, state: State) -> &'static str {
    if replay.lost.contains(id) {
        "lost"
    } else {
        state.name()
    }
}

/// `slurp runs`: one line per run.
pub fn runs() -> io::Result<ExitCode> {
    let store = match store()? {
        Ok(store) => store,
        Err(why) => {
            eprintln!("error: {why}");
            return Ok(ExitCode::from(2));
        }
    };
    let mut out = io::stdout().lock();
    for dir in slurp_runtime::journal::runs(&store)? {
        let id = dir
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        // A journal that cannot be read is listed as damaged, with why.
        let replay = match slurp_runtime::journal::replay(&dir.join("events.jsonl")) {
            Ok(replay) => replay,
            Err(e) => {
                writeln!(out, "{id:<22} {:<12} {e}", "damaged")?;
                continue;
            }
        };
        writeln!(
            out,
            "{id:<22} {:<12} {:<30} {}",
            how(&replay),
            replay.workflow,
            counts_line(&replay.counts(), replay.lost.len())
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `slurp status [RUN]`: counts per state and every task that did not
/// succeed, nested ones with their path. Works while the run is live.
pub fn status(run: Option<&str>, json: bool) -> io::Result<ExitCode> {
    let dir = match chosen_run(run)? {
        Ok(dir) => dir,
        Err(code) => return Ok(code),
    };
    let dir = &dir;
    let name = |p: &std::path::PathBuf| {
        p.file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    };
    let replay = slurp_runtime::journal::replay(&dir.join("events.jsonl"))?;
    if let Some(why) = replay.damage.fatal() {
        eprintln!("error: run {}: {why}", name(dir));
        return Ok(ExitCode::from(1));
    }
    let mut out = io::stdout().lock();
    if json {
        let mut json_counts: std::collections::BTreeMap<&str, usize> =
            State::ALL.iter().map(|s| (s.name(), 0)).collect();
        json_counts.insert("lost", 0);
        json_counts.extend(
            counted(&replay.counts(), replay.lost.len())
                .into_iter()
                .map(|(n, name)| (name, n)),
        );
        let value = serde_json::json!({
            "run": name(dir),
            "workflow": replay.workflow,
            "state": how(&replay),
            "counts": json_counts,
            "tasks": replay.tasks.iter().map(|(id, (state, reason))| serde_json::json!({"id": id, "state": shown_state(&replay, id, *state), "reason": reason, "attempts": replay.attempts.get(id).copied().unwrap_or(0)})).collect::<Vec<_>>(),
            "stretches": replay.cohorts.values().flat_map(|c| &c.stretches).map(|s| serde_json::json!({"first": s.first, "last": s.last, "count": s.count, "state": s.state, "reason": s.reason})).collect::<Vec<_>>(),
            "torn_last_line": replay.torn,
            "unreadable_lines": replay.bad_lines,
        });
        serde_json::to_writer_pretty(&mut out, &value)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let colour = console::colors_enabled();
    let paint = |state: State, text: String| -> String {
        if !colour {
            return text;
        }
        let style = console::Style::new();
        let style = match state {
            State::Succeeded => style.green(),
            State::Failed => style.red().bold(),
            State::Timeout | State::OutOfMemory => style.yellow().bold(),
            State::Skipped => style.magenta(),
            State::Cancelled => style.dim(),
            State::Running => style.cyan(),
            State::Pending | State::Runnable => style,
        };
        style.apply_to(text).to_string()
    };
    let counts = replay.counts();
    let total: usize = counts.iter().sum();
    writeln!(
        out,
        "run {}  {}  {}",
        name(dir),
        replay.workflow,
        how(&replay)
    )?;
    let parts: Vec<String> = counted(&counts, replay.lost.len())
        .into_iter()
        .map(|(n, name)| {
            let state = State::ALL
                .into_iter()
                .find(|s| s.name() == name)
                .unwrap_or(State::Cancelled);
            paint(state, format!("{n} {name}"))
        })
        .collect();
    if parts.is_empty() {
        writeln!(out, "no task yet")?;
    } else {
        writeln!(
            out,
            "{total} task{}: {}",
            if total == 1 { "" } else { "s" },
            parts.join(", ")
        )?;
    }
    // One row per task that is running or did not succeed; waiting tasks
    // are only counted (a live run can have thousands).
    let mut rows: Vec<(State, [String; 5])> = replay
        .tasks
        .iter()
        .filter(|(_, (state, _))| {
            !matches!(state, State::Succeeded | State::Runnable | State::Pending)
        })
        .map(|(id, (state, reason))| {
            (
                *state,
                [
                    id.clone(),
                    shown_state(&replay, id, *state).to_owned(),
                    replay.attempts.get(id).copied().unwrap_or(0).to_string(),
                    replay.sources.get(id).cloned().unwrap_or_default(),
                    if *state == State::Running {
                        String::new()
                    } else {
                        describe(reason)
                    },
                ],
            )
        })
        .collect();
    // A sweep's members stopped together: one row for the stretch.
    for cohort in replay.cohorts.values() {
        for s in cohort
            .stretches
            .iter()
            .filter(|s| s.state != State::Succeeded)
        {
            rows.push((
                s.state,
                [
                    format!("{} … {}", s.first, s.last),
                    s.state.name().to_owned(),
                    "0".to_owned(),
                    cohort.src.clone(),
                    format!("{} ({} members)", describe(&s.reason), s.count),
                ],
            ));
        }
    }
    // `@2` before `@10`, `sim[9]` before `sim[10]`.
    rows.sort_by_cached_key(|(_, row)| natural(&row[0]));
    if !rows.is_empty() {
        let head = ["TASK", "STATE", "ATTEMPTS", "SOURCE", "WHY"];
        let width: Vec<usize> = (0..5)
            .map(|c| {
                rows.iter()
                    .map(|(_, r)| r[c].chars().count())
                    .chain([head[c].len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        writeln!(out)?;
        writeln!(
            out,
            "{:<w0$}  {:<w1$}  {:>w2$}  {:<w3$}  {}",
            head[0],
            head[1],
            head[2],
            head[3],
            head[4],
            w0 = width[0],
            w1 = width[1],
            w2 = width[2],
            w3 = width[3]
        )?;
        for (state, row) in &rows {
            // Padding first, colour after: escape codes have no width.
            let padded = format!("{:<w$}", row[1], w = width[1]);
            writeln!(
                out,
                "{:<w0$}  {}  {:>w2$}  {:<w3$}  {}",
                row[0],
                paint(*state, padded),
                row[2],
                row[3],
                row[4],
                w0 = width[0],
                w2 = width[2],
                w3 = width[3]
            )?;
        }
    }
    if replay.torn {
        writeln!(
            out,
            "  (the journal's last line is incomplete: the run is being written, or was killed mid-line)"
        )?;
    }
    if let Some(note) = replay.damage.skipped() {
        writeln!(out, "  ({note})")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A sort key that orders runs of digits by their number.
fn natural(text: &str) -> Vec<(String, u64)> {
    let mut key = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let cut = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (word, tail) = rest.split_at(cut);
        let digits = tail
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(tail.len());
        let (number, tail) = tail.split_at(digits);
        key.push((word.to_owned(), number.parse().unwrap_or(0)));
        rest = tail;
    }
    key
}

/// A journaled reason, as the summary words it.
fn describe(reason: &serde_json::Value) -> String {
    use serde_json::Value;
    match reason {
        Value::String(s) if s == "halted" => "not started: the run was stopped".to_owned(),
        Value::String(s) if s == "resumed" => "succeeded in the run this one resumed".to_owned(),
        Value::String(s) => s.clone(),
        Value::Object(o) => match (o.get("ended"), o.get("dependency"), o.get("retry")) {
            (Some(ended), _, _) => match ended {
                Value::Object(e) if e.contains_key("exit") => format!("exit status {}", e["exit"]),
                Value::Object(e) if e.contains_key("signal") => {
                    format!("killed by signal {}", e["signal"])
                }
                Value::String(s) if s == "timeout" => "ran past its time limit".to_owned(),
                Value::String(s) if s == "spawn_error" => "could not start".to_owned(),
                Value::String(s) => s.clone(),
                other => other.to_string(),
            },
            (_, Some(Value::String(dep)), _) => format!("dependency `{dep}` did not succeed"),
            _ => Value::Object(o.clone()).to_string(),
        },
        other => other.to_string(),
    }
}

/// The run whose id starts with `prefix`, or the latest one.
pub fn find_run(
    store: &std::path::Path,
    prefix: Option<&str>,
) -> io::Result<Result<std::path::PathBuf, String>> {
    let all = slurp_runtime::journal::runs(store)?;
    let name = |p: &std::path::PathBuf| {
        p.file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    };
    let chosen: Vec<&std::path::PathBuf> = match prefix {
        Some(prefix) => all.iter().filter(|p| name(p).starts_with(prefix)).collect(),
        None => all.last().into_iter().collect(),
    };
    Ok(match chosen[..] {
        [one] => Ok(one.clone()),
        [] => Err(format!(
            "no run {}",
            prefix.map_or("yet".to_owned(), |r| format!("matches `{r}`"))
        )),
        _ => Err(format!(
            "`{}` matches {} runs",
            prefix.unwrap_or_default(),
            chosen.len()
        )),
    })
}

/// The `.slurp/` of the working directory, or why it cannot be used.
pub fn open_store() -> io::Result<Result<std::path::PathBuf, String>> {
    store()
}

/// `slurp log TASK [RUN]`: the task's journal lines, readably, then its
/// output if the run kept it (`--output files`).
pub fn log(task: &str, run: Option<&str>) -> io::Result<ExitCode> {
    let dir = match chosen_run(run)? {
        Ok(dir) => dir,
        Err(code) => return Ok(code),
    };
    let mut lines = Vec::new();
    let damage = slurp_runtime::journal::read(&dir.join("events.jsonl"), |_, record| {
        use slurp_runtime::journal::Record;
        match record {
            Record::Start {
                t,
                task: of,
                attempt,
                cores,
                ..
            } if of == task => lines.push(format!(
                "{:>9.3} s  start, attempt {attempt} on cores {cores:?}",
                t as f64 / 1000.0
            )),
            Record::State {
                t,
                task: of,
                to,
                reason,
                ..
            } if of == task => lines.push(format!(
                "{:>9.3} s  {:<9} {}",
                t as f64 / 1000.0,
                to.name(),
                describe(&reason)
            )),
            _ => {}
        }
    })?;
    if let Some(why) = damage.fatal() {
        eprintln!("error: {why}");
        return Ok(ExitCode::from(1));
    }
    if let Some(note) = damage.skipped() {
        eprintln!("note: {note}");
    }
    let found = !lines.is_empty();
    let mut out = io::stdout().lock();
    for line in &lines {
        writeln!(out, "{line}")?;
    }
    if !found && let Some(line) = summarised_member(&dir, task) {
        writeln!(out, "{line}")?;
        return Ok(ExitCode::SUCCESS);
    }
    if !found {
        eprintln!(
            "error: no task `{task}` in run {}",
            dir.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        );
        eprintln!(
            "hint: `slurp status` lists the tasks that did not succeed; ids look like `sim[17]`, `@3`, `sub/prep`"
        );
        return Ok(ExitCode::from(2));
    }
    let safe = task.replace('/', "_");
    let mut kept = false;
    for (ext, what) in [("out", "stdout"), ("err", "stderr")] {
        let path = dir.join("out").join(format!("{safe}.{ext}"));
        if let Ok(bytes) = std::fs::read(&path) {
            kept = true;
            writeln!(out, "--- {what} ({})", path.display())?;
            out.write_all(&bytes)?;
        }
    }
    if !kept {
        writeln!(
            out,
            "(output not kept: run with `--output files` to keep each task's output in the run directory)"
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// For a task with no record of its own that may be one of the sweep
/// members a rewritten journal keeps only as ranges: what is known of it.
fn summarised_member(dir: &std::path::Path, task: &str) -> Option<String> {
    let (name, _) = task.split_once('[')?;
    let replay = slurp_runtime::journal::replay(&dir.join("events.jsonl")).ok()?;
    let cohort = replay
        .cohorts
        .values()
        .find(|c| !c.done.is_empty() && c.first.split_once('[').is_some_and(|(n, _)| n == name))?;
    Some(format!(
        "{task}: no record of its own; it is a member of the sweep that starts at {} ({}), \
         whose {} members that succeeded the journal keeps only as ranges, and {} that never \
         started: it is one of those (`slurp status` lists every member that did not succeed)",
        cohort.first,
        cohort.src,
        cohort.done.len(),
        cohort.unstarted()
    ))
}

/// The run `slurp status`/`log` look at, or the exit code after saying why
/// there is none.
pub fn chosen_run(run: Option<&str>) -> io::Result<Result<std::path::PathBuf, ExitCode>> {
    let store = match store()? {
        Ok(store) => store,
        Err(why) => {
            eprintln!("error: {why}");
            return Ok(Err(ExitCode::from(2)));
        }
    };
    Ok(match find_run(&store, run)? {
        Ok(dir) => Ok(dir),
        Err(why) => {
            eprintln!("error: {why}");
            eprintln!(
                "hint: `slurp runs` lists the runs of this directory; give a unique prefix of an id"
            );
            Err(ExitCode::from(2))
        }
    })
}

/// `slurp cancel [RUN]`: interrupt a live run's slurp (which stops its
/// tasks and cancels its Slurm jobs), or, when that slurp is gone, cancel
/// the Slurm jobs its journal shows unfinished.
pub fn cancel(run: Option<&str>) -> io::Result<ExitCode> {
    let dir = match chosen_run(run)? {
        Ok(dir) => dir,
        Err(code) => return Ok(code),
    };
    let events = dir.join("events.jsonl");
    let replay = slurp_runtime::journal::replay(&events)?;
    if replay.ended.is_some() {
        eprintln!(
            "slurp: run {} has already ended; nothing to cancel",
            replay.run
        );
        return Ok(ExitCode::SUCCESS);
    }
    if replay.live() {
        let pid = nix::unistd::Pid::from_raw(replay.pid as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).map_err(io::Error::other)?;
        // Wait for it to finish stopping, so the caller sees the end.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while slurp_runtime::journal::held(&events)
            && slurp_runtime::journal::replay(&events)?.ended.is_none()
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        eprintln!("slurp: run {} cancelled", replay.run);
        return Ok(ExitCode::SUCCESS);
    }
    // Its slurp is gone. Its tasks' ranks died with it, but what they
    // started in their process groups may live on: stopped, in this run
    // and in the journals of the slurps nested in its tasks.
    let mut journals = vec![events.clone()];
    let mut i = 0;
    while i < journals.len() {
        let nested = journals[i].with_file_name("nested");
        for entry in std::fs::read_dir(nested).into_iter().flatten().flatten() {
            let inner = entry.path().join("events.jsonl");
            if inner.is_file() {
                journals.push(inner);
            }
        }
        i += 1;
    }
    let mut groups = Vec::new();
    let mut last_write = std::time::UNIX_EPOCH;
    for journal in &journals {
        groups.extend(
            slurp_runtime::journal::left_groups(journal)?
                .into_iter()
                .map(|(_, g)| g),
        );
        if let Ok(modified) = std::fs::metadata(journal).and_then(|m| m.modified()) {
            last_write = last_write.max(modified);
        }
    }
    let stopped = slurp_runtime::exec::strays::end_left_groups(
        &groups,
        last_write + std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(2),
    );
    if stopped > 0 {
        eprintln!(
            "slurp: run {}: stopped {stopped} process{} its tasks left running",
            replay.run,
            if stopped == 1 { "" } else { "es" }
        );
    }
    // The Slurm or Flux jobs it submitted may still be queued.
    let mut jobs: std::collections::BTreeMap<String, (&str, String)> =
        std::collections::BTreeMap::new();
    slurp_runtime::journal::read(&events, |_, record| {
        if let slurp_runtime::journal::Record::State {
            task, to, reason, ..
        } = record
        {
            let job = ["slurm_job", "flux_job"]
                .into_iter()
                .find_map(|k| reason.get(k).and_then(|j| j.as_str()).map(|j| (k, j)));
            match job {
                Some((kind, job)) => {
                    jobs.insert(task, (kind, job.to_owned()));
                }
                None if to.is_final() => {
                    jobs.remove(&task);
                }
                None => {}
            }
        }
    })?;
    if jobs.is_empty() {
        if stopped == 0 {
            eprintln!(
                "slurp: run {}: its slurp is gone and it left nothing running",
                replay.run
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let ids: Vec<&String> = jobs.values().map(|(_, id)| id).collect();
    let flux = jobs.values().any(|(kind, _)| *kind == "flux_job");
    let (program, args): (&str, &[&str]) = if flux {
        ("flux", &["cancel"])
    } else {
        ("scancel", &[])
    };
    let status = std::process::Command::new(program)
        .args(args)
        .args(&ids)
        .status()?;
    if !status.success() {
        eprintln!("error: `{program}` failed for jobs {ids:?}");
        return Ok(ExitCode::from(1));
    }
    eprintln!(
        "slurp: run {}: cancelled {} {} jobs",
        replay.run,
        ids.len(),
        if flux { "Flux" } else { "Slurm" }
    );
    Ok(ExitCode::SUCCESS)
}
