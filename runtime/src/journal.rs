//! The run journal: an append-only event log per run, and its replay.
//!
//! `.slurp/` in the working directory holds `VERSION` (the format, so a
//! future change is detected rather than misread) and `runs/RUN/` per run:
//! `events.jsonl` and `files/`, a copy of every workflow file the run read
//! (as parsed: editing a file mid-run changes nothing).
//!
//! `events.jsonl` is JSON lines. The first is a header (run id, process id,
//! workflow, start time); then one line per state transition or start,
//! written and flushed to the kernel before slurp acts on it, so killing
//! slurp at any instant — SIGKILL included — loses no transition it had
//! already acted on; the last line of a killed run may be torn, and replay
//! reports it and goes on. A closing line records how the run ended.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::core::{Event, State};
use crate::ir::Program;

/// The format of `.slurp/`; bump it when it changes.
pub const FORMAT: u32 = 1;

/// Why a `.slurp/` directory cannot be used.
#[derive(Debug)]
pub struct FormatMismatch {
    pub found: String,
}

impl std::fmt::Display for FormatMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            ".slurp/ has format `{}`, this slurp writes and reads format {FORMAT}",
            self.found.trim()
        )
    }
}

/// Opens (creating if needed) `.slurp/` under `dir`, checking its format.
pub fn open_store(dir: &Path) -> io::Result<Result<PathBuf, FormatMismatch>> {
    let store = dir.join(".slurp");
    std::fs::create_dir_all(store.join("runs"))?;
    let version = store.join("VERSION");
    match std::fs::read_to_string(&version) {
        Ok(found) if found.trim() == FORMAT.to_string() => Ok(Ok(store)),
        Ok(found) => Ok(Err(FormatMismatch { found })),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::write(&version, format!("{FORMAT}\n"))?;
            Ok(Ok(store))
        }
        Err(e) => Err(e),
    }
}

/// One line of `events.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "ev", rename_all = "snake_case")]
pub enum Record {
    Header {
        run: String,
        pid: u32,
        /// As the user named it, and absolute.
        workflow: String,
        #[serde(default)]
        path: String,
        /// The command-line arguments after `slurp run` (for `slurp resume`).
        #[serde(default)]
        args: Vec<String>,
        /// The run this one resumes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resumes: Option<String>,
        /// Seconds since the epoch.
        started: u64,
        format: u32,
        /// The boot it ran on (`/proc/sys/kernel/random/boot_id`): that of
        /// every [`Record::Group`] that names none.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        boot: String,
    },
    /// A task moved to `to` (`reason` as the core gave it).
    State {
        /// Milliseconds since the run started.
        t: u64,
        task: String,
        to: State,
        reason: serde_json::Value,
        /// For a success: the task's key (`Workflow::key`), in hex.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
        /// On a final state: the line that defines the task, `FILE:LINE`
        /// (the file as the run named it), for reports.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        src: Option<String>,
        /// The [`Record::Cohort`] the task is a member of.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cohort: Option<u32>,
    },
    /// `count` tasks from `first` on (a sweep's members) are runnable from
    /// the start and written of only from when each starts: the members
    /// never named in a record are still runnable. `id` numbers cohorts
    /// across the run.
    Cohort {
        t: u64,
        id: u32,
        first: String,
        count: u32,
        /// The line that defines them, `FILE:LINE` (members' final records
        /// leave it out).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        src: String,
    },
    /// An attempt started on these logical cores and GPUs, one list per
    /// node it spans, in the top-level instance's ids (a nested task's
    /// cores are its parent's), so one run's starts share one machine.
    Start {
        t: u64,
        task: String,
        attempt: u32,
        /// The node of each slice (absent in journals written before it
        /// was recorded: slices on nodes 0, 1, …).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        nodes: Vec<u32>,
        cores: Vec<Vec<u32>>,
        gpus: Vec<Vec<u32>>,
        /// The [`Record::Cohort`] the task is a member of.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cohort: Option<u32>,
    },
    /// An attempt's processes lead (and fill) process group `pgid` on the
    /// boot `boot`: what `slurp cancel` stops when the run's slurp died
    /// and left them.
    Group {
        t: u64,
        task: String,
        attempt: u32,
        pgid: i32,
        /// Empty: the header's.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        boot: String,
    },
    /// Tasks submitted to the live instance at `scope` (`""` or `sub/`):
    /// the text as it came, so `slurp resume` can submit it again; its
    /// `tasks` tasks' records follow.
    Submit {
        t: u64,
        scope: String,
        source: String,
        cwd: String,
        text: String,
        tasks: u32,
    },
    End {
        t: u64,
        interrupted: bool,
    },
}

/// A task's key (`Workflow::key`) as the journal writes it: 16 hex digits.
pub fn key_text(key: u64) -> String {
    format!("{key:016x}")
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`): a process group
/// recorded on another boot is not one to stop.
pub fn boot_id() -> String {
    static BOOT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BOOT.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|b| b.trim().to_owned())
            .unwrap_or_default()
    })
    .clone()
}

/// The process groups of the attempts a journal shows started and never
/// ended (its slurp died while they ran), on this boot: (task, pgid).
pub fn left_groups(path: &Path) -> io::Result<Vec<(String, i32)>> {
    let boot = boot_id();
    let mut header_boot = String::new();
    let mut open: BTreeMap<String, i32> = BTreeMap::new();
    read(path, |_, record| match record {
        Record::Header { boot, .. } => header_boot = boot,
        Record::Group {
            task,
            pgid,
            boot: b,
            ..
        } if (if b.is_empty() { &header_boot } else { &b }) == &boot => {
            open.insert(task, pgid);
        }
        // Any later transition ends the attempt that ran.
        Record::State { task, to, .. } if to != State::Running => {
            open.remove(&task);
        }
        _ => {}
    })?;
    Ok(open.into_iter().collect())
}

/// What a run's first line says about it, besides what slurp fills in.
#[derive(Debug, Clone, Default)]
pub struct Header {
    pub workflow: String,
    pub path: String,
    pub args: Vec<String>,
    pub resumes: Option<String>,
}

/// Where one slice of an allocation lies, in top-level ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    pub node: u32,
    pub cores: Vec<u32>,
    pub gpus: Vec<u32>,
    pub mem: u64,
}

/// Writes a run's journal.
#[derive(Debug)]
pub struct Journal {
    /// `events.jsonl`, locked (`flock`) for as long as this process lives:
    /// how other commands know the run is live ([`held`]), whatever became
    /// of its PID.
    file: nix::fcntl::Flock<File>,
    dir: PathBuf,
    /// The run's files as it named them, by `FileId`.
    files: Vec<String>,
}

impl Journal {
    /// Creates `runs/RUN/` with its header and the copies of `files`.
    pub fn create(
        run_dir: &Path,
        run: &str,
        header: Header,
        files: &[(String, &str)],
    ) -> io::Result<Journal> {
        // The run is its user's alone: workflow files may hold secrets
        // (`env=TOKEN=…` in a 0600 file), so the directory is 0700 and the
        // copies and the log 0600, whatever the umask.
        use std::io::Write as _;
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(run_dir.join("files"))?;
        // It may exist already (its output directory is made first).
        std::fs::set_permissions(run_dir, std::fs::Permissions::from_mode(0o700))?;
        let private = |path: &Path| {
            std::fs::OpenOptions::new()
                .create_new(true)
                .write(true)
                .mode(0o600)
                .open(path)
        };
        for (i, (name, text)) in files.iter().enumerate() {
            let base = Path::new(name)
                .file_name()
                .map_or_else(|| "stdin".into(), |n| n.to_string_lossy().into_owned());
            let mut copy = private(&run_dir.join("files").join(format!("{i}-{base}")))?;
            copy.write_all(text.as_bytes())?;
        }
        let file = std::fs::OpenOptions::new()
            .create_new(true)
            .append(true)
            .mode(0o600)
            .open(run_dir.join("events.jsonl"))?;
        let file = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
            .map_err(|(_, e)| io::Error::from(e))?;
        let mut journal = Journal {
            file,
            dir: run_dir.to_path_buf(),
            files: files.iter().map(|(name, _)| name.clone()).collect(),
        };
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        journal.write(&Record::Header {
            run: run.to_owned(),
            pid: std::process::id(),
            workflow: header.workflow,
            path: header.path,
            args: header.args,
            resumes: header.resumes,
            started,
            format: FORMAT,
            boot: boot_id(),
        })?;
        Ok(journal)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Names the files read after the run began (submitted texts and what
    /// they nest), up to `files` in all, for the `src` of their tasks.
    pub fn name_files(&mut self, files: &[PathBuf], first: &str) {
        let known = self.files.len();
        for (k, path) in files.iter().enumerate().skip(known) {
            self.files.push(if k == known {
                first.to_owned()
            } else {
                path.display().to_string()
            });
        }
    }

    /// Appends one record: a single `write` of a whole line, so a line is
    /// either there or torn at the end, never interleaved.
    pub fn write(&mut self, record: &Record) -> io::Result<()> {
        self.write_all(std::slice::from_ref(record))
    }

    /// Appends records in one `write` (what one scheduling step decided:
    /// a system call per step, not per record); a crash leaves a prefix of
    /// whole lines and at most one torn.
    pub fn write_all(&mut self, records: &[Record]) -> io::Result<()> {
        let mut lines = Vec::with_capacity(160 * records.len());
        for record in records {
            serde_json::to_writer(&mut lines, record).map_err(io::Error::other)?;
            lines.push(b'\n');
        }
        self.file.write_all(&lines)
    }

    /// The `FILE:LINE` of a task's defining line, as the journal names it.
    pub fn source(&self, wf: &crate::ir::Workflow, task: crate::ir::TaskId) -> String {
        let source = wf.template(wf.task(task).template).source;
        let file = self.files.get(source.file.0 as usize).map_or("?", |f| f);
        format!("{file}:{}", source.line)
    }

    /// The record for a core event of the instance at `scope`, a member of
    /// `cohort` or not; a start is recorded where it is `placed` (node,
    /// cores, GPUs per slice, in top-level ids). None for a move to
    /// `running`: the start record that comes with it is the attempt's
    /// `running` (readers take it so).
    pub fn record(
        &self,
        program: &Program,
        workflow: crate::ir::WorkflowId,
        scope: &str,
        event: &Event,
        placed: &[Placed],
        cohort: Option<u32>,
    ) -> Option<Record> {
        let wf = program.workflow(workflow);
        Some(match event {
            Event::Transition {
                to: State::Running, ..
            } => return None,
            Event::Transition {
                time,
                task,
                to,
                reason,
            } => Record::State {
                t: time.0,
                task: format!("{scope}{}", wf.task_name(*task)),
                to: *to,
                // Dependencies by id, not by the core's index: the journal
                // must mean the same thing to a later slurp.
                reason: match reason {
                    crate::core::Reason::Dependency(dep) => {
                        serde_json::json!({ "dependency": format!("{scope}{}", wf.task_name(*dep)) })
                    }
                    other => serde_json::to_value(other).unwrap_or(serde_json::Value::Null),
                },
                // Nested entries have no key: their child instance's tasks do.
                key: (*to == State::Succeeded && wf.task(*task).nested.is_none())
                    .then(|| key_text(wf.key(*task, scope))),
                src: (to.is_final() && cohort.is_none()).then(|| self.source(wf, *task)),
                cohort,
            },
            Event::Start {
                time,
                task,
                attempt,
                alloc,
            } => Record::Start {
                t: time.0,
                task: format!("{scope}{}", wf.task_name(*task)),
                attempt: *attempt,
                nodes: if placed.is_empty() {
                    alloc.slices.iter().map(|s| s.node).collect()
                } else {
                    placed.iter().map(|p| p.node).collect()
                },
                cores: if placed.is_empty() {
                    alloc.slices.iter().map(|s| s.cores.clone()).collect()
                } else {
                    placed.iter().map(|p| p.cores.clone()).collect()
                },
                gpus: if placed.is_empty() {
                    alloc.slices.iter().map(|s| s.gpus.clone()).collect()
                } else {
                    placed.iter().map(|p| p.gpus.clone()).collect()
                },
                cohort,
            },
        })
    }
}

/// A run as its journal tells it.
#[derive(Debug, Default, Serialize)]
pub struct Replay {
    pub run: String,
    pub workflow: String,
    pub pid: u32,
    pub started: u64,
    /// Each task's last state and its reason, by id (`sub/sim[3]`); in a
    /// run whose slurp was killed, a task that was running is `cancelled`
    /// ([`KILLED_WITH_SLURP`]).
    pub tasks: BTreeMap<String, (State, serde_json::Value)>,
    /// Starts per task (attempts).
    pub attempts: BTreeMap<String, u32>,
    /// Tasks that were running when the run's slurp died: counted
    /// `cancelled` (they did not succeed, `slurp resume` reruns them) and
    /// shown as `lost`.
    pub lost: std::collections::BTreeSet<String>,
    /// The defining line of each task that reached a final state.
    pub sources: BTreeMap<String, String>,
    /// The keys of the tasks that succeeded (run or resumed), counted.
    pub succeeded: std::collections::HashMap<u64, usize>,
    /// The absolute workflow path and the arguments it ran with.
    pub path: String,
    pub args: Vec<String>,
    /// The run this one resumed.
    pub resumes: Option<String>,
    /// What was submitted to it while it ran, by instance path, in order.
    #[serde(skip)]
    pub submitted: Vec<(String, crate::run::Submission)>,
    /// `Some(interrupted)` once the run ended.
    pub ended: Option<bool>,
    /// A last line cut short (the run is live mid-write, or was killed).
    pub torn: bool,
    /// A live slurp held the journal when it was read ([`held`]).
    pub held: bool,
    /// What reading it found wrong ([`read`]).
    pub damage: Damage,
    /// Lines that are not records of this format, by line number.
    pub bad_lines: Vec<usize>,
    /// Each cohort's members, how many of them have records (the others
    /// are runnable and never started), and their defining line.
    pub cohorts: BTreeMap<u32, (u32, u32, String)>,
}

impl Replay {
    /// Counts per state, in `State::ALL` order.
    pub fn counts(&self) -> [usize; 9] {
        let mut counts = [0; 9];
        for (state, _) in self.tasks.values() {
            counts[*state as usize] += 1;
        }
        counts[State::Runnable as usize] += self.unstarted() as usize;
        counts
    }

    /// Cohort members no record names: runnable, never started.
    pub fn unstarted(&self) -> u64 {
        self.cohorts
            .values()
            .map(|&(count, seen, _)| u64::from(count.saturating_sub(seen)))
            .sum()
    }

    /// A record named a task, `new` if for the first time, of `cohort`.
    fn seen(&mut self, new: bool, cohort: Option<u32>) {
        if new && let Some(c) = cohort.and_then(|id| self.cohorts.get_mut(&id)) {
            c.1 += 1;
        }
    }

    /// Whether the process that writes it is still alive: the run has not
    /// ended and its journal is [`held`] (a PID alone could be another
    /// process's by now).
    pub fn live(&self) -> bool {
        self.ended.is_none() && self.held
    }
}

/// Whether a live slurp holds the journal at `path` (its lock goes with
/// the process, however it ends).
pub fn held(path: &Path) -> bool {
    let Ok(file) = File::open(path) else {
        return false;
    };
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockSharedNonblock) {
        Ok(_unlocked_on_drop) => false,
        Err((_, e)) => e == nix::errno::Errno::EWOULDBLOCK,
    }
}

/// What reading a journal found wrong with it: the one policy every
/// command applies (`status`, `runs`, `resume`, `report`, `log`): lines
/// that are not records are skipped and counted, a last line cut short is
/// a run being written or killed mid-line, and a journal with no header is
/// damaged, never taken for an empty run.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Damage {
    /// The journal read.
    pub path: PathBuf,
    /// Line numbers (1-based) that were not records of this format.
    pub bad_lines: Vec<usize>,
    /// The last line was cut short.
    pub torn: bool,
    /// Lines that were not empty.
    pub lines: usize,
    /// A header was read.
    pub header: bool,
}

impl Damage {
    /// Why the run cannot be read at all: text without a header.
    pub fn fatal(&self) -> Option<String> {
        (!self.header && self.lines > 0).then(|| {
            format!(
                "{} is damaged: it has no run header ({})",
                self.path.display(),
                if self.lines == 1 {
                    "1 line that is not a journal record".to_owned()
                } else {
                    format!("{} lines that are not journal records", self.lines)
                }
            )
        })
    }

    /// What was skipped, for a note: `None` when nothing was.
    pub fn skipped(&self) -> Option<String> {
        let n = self.bad_lines.len();
        (n > 0).then(|| {
            let shown: Vec<String> = self
                .bad_lines
                .iter()
                .take(5)
                .map(usize::to_string)
                .collect();
            format!(
                "{n} unreadable line{} skipped in {} (line{} {}{})",
                if n == 1 { "" } else { "s" },
                self.path.display(),
                if n == 1 { "" } else { "s" },
                shown.join(", "),
                if n > 5 { ", …" } else { "" }
            )
        })
    }
}

/// Reads every record of the journal at `path` in order, giving each to
/// `each` with its line number, under [`Damage`]'s policy. Errors name the
/// path; a journal that is not a regular file (a directory, a FIFO) is an
/// error, not a run that vanished or a read that never ends.
pub fn read(path: &Path, mut each: impl FnMut(usize, Record)) -> io::Result<Damage> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let meta = std::fs::metadata(path).map_err(named)?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: not a regular file, so not a journal", path.display()),
        ));
    }
    let file = File::open(path).map_err(named)?;
    let mut damage = Damage {
        path: path.to_owned(),
        ..Damage::default()
    };
    let mut lines = io::BufReader::new(file).split(b'\n').enumerate().peekable();
    while let Some((n, line)) = lines.next() {
        let line = line.map_err(named)?;
        let last = lines.peek().is_none();
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        damage.lines += 1;
        match serde_json::from_slice::<Record>(&line) {
            Ok(record) => {
                damage.header |= matches!(record, Record::Header { .. });
                each(n + 1, record);
            }
            Err(_) if last => damage.torn = true,
            Err(_) => damage.bad_lines.push(n + 1),
        }
    }
    Ok(damage)
}

/// Replays `events.jsonl` ([`read`]'s policy).
pub fn replay(path: &Path) -> io::Result<Replay> {
    let mut replay = Replay {
        held: held(path),
        ..Replay::default()
    };
    let damage = read(path, |_, record| match record {
        Record::Header {
            run,
            pid,
            workflow,
            path,
            args,
            started,
            resumes,
            ..
        } => {
            replay.resumes = resumes;
            replay.run = run;
            replay.pid = pid;
            replay.workflow = workflow;
            replay.path = path;
            replay.args = args;
            replay.started = started;
        }
        Record::State {
            task,
            to,
            reason,
            key,
            src,
            cohort,
            ..
        } => {
            let src = src.or_else(|| {
                let c = replay.cohorts.get(&cohort?)?;
                (to.is_final() && !c.2.is_empty()).then(|| c.2.clone())
            });
            if let Some(src) = src {
                replay.sources.insert(task.clone(), src);
            }
            if let Some(key) = key.and_then(|k| u64::from_str_radix(&k, 16).ok()) {
                *replay.succeeded.entry(key).or_default() += 1;
            }
            let new = replay.tasks.insert(task, (to, reason)).is_none();
            replay.seen(new, cohort);
        }
        Record::Cohort { id, count, src, .. } => {
            replay.cohorts.insert(id, (count, 0, src));
        }
        Record::Start { task, cohort, .. } => {
            *replay.attempts.entry(task.clone()).or_default() += 1;
            // A start is the attempt's `running` (written only so since
            // the journal has starts).
            let running = (State::Running, serde_json::json!("ready"));
            let new = replay.tasks.insert(task, running).is_none();
            replay.seen(new, cohort);
        }
        Record::Group { .. } => {}
        Record::Submit {
            scope,
            source,
            cwd,
            text,
            ..
        } => replay.submitted.push((
            scope,
            crate::run::Submission {
                text,
                source,
                cwd: PathBuf::from(cwd),
            },
        )),
        Record::End { interrupted, .. } => replay.ended = Some(interrupted),
    })?;
    replay.torn = damage.torn;
    replay.bad_lines = damage.bad_lines.clone();
    replay.damage = damage;
    // A run whose slurp died without its end record: what was running then
    // was killed with it (each rank dies with slurp), not running now.
    if replay.ended.is_none() && !replay.held {
        for (task, (state, reason)) in replay.tasks.iter_mut() {
            if *state == State::Running {
                *state = State::Cancelled;
                *reason = serde_json::Value::String(KILLED_WITH_SLURP.to_owned());
                replay.lost.insert(task.clone());
            }
        }
    }
    Ok(replay)
}

/// Why a task of a killed run is not running.
pub const KILLED_WITH_SLURP: &str = "slurp was killed while it ran";

/// The runs under `.slurp/runs/`, oldest first (ids sort by start time).
pub fn runs(store: &Path) -> io::Result<Vec<PathBuf>> {
    let mut runs: Vec<PathBuf> = std::fs::read_dir(store.join("runs"))?
        .flatten()
        .map(|e| e.path())
        // Any journal, even one that is not a file: it is named as damaged
        // where it is read, not left out.
        .filter(|p| p.join("events.jsonl").symlink_metadata().is_ok())
        .collect();
    runs.sort();
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_tolerates_a_torn_last_line_and_reports_bad_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let mut text = String::new();
        text.push_str(
            r#"{"ev":"header","run":"r","pid":1,"workflow":"w.slurp","started":5,"format":1}"#,
        );
        text.push('\n');
        text.push_str(r#"{"ev":"state","t":1,"task":"a","to":"running","reason":"ready"}"#);
        text.push('\n');
        text.push_str("not json\n");
        text.push_str(
            r#"{"ev":"state","t":2,"task":"a","to":"succeeded","reason":{"ended":"success"}}"#,
        );
        text.push('\n');
        text.push_str(r#"{"ev":"state","t":3,"task":"b","to":"fai"#);
        std::fs::write(&path, text).unwrap();
        let replay = replay(&path).unwrap();
        assert!(replay.torn);
        assert_eq!(replay.bad_lines, [3]);
        assert_eq!(replay.tasks["a"].0, State::Succeeded);
        assert!(!replay.tasks.contains_key("b"));
        assert_eq!(replay.ended, None);
    }

    #[test]
    fn replay_reads_what_resume_needs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let mut text = String::new();
        text.push_str(r#"{"ev":"header","run":"r2","pid":1,"workflow":"w.slurp","path":"/w.slurp","args":["--cores","2","w.slurp"],"resumes":"r1","started":5,"format":1}"#);
        text.push('\n');
        text.push_str(r#"{"ev":"state","t":2,"task":"a","to":"succeeded","reason":"resumed","key":"00000000000000ff"}"#);
        text.push('\n');
        text.push_str(r#"{"ev":"state","t":3,"task":"b","to":"succeeded","reason":{"ended":"success"},"key":"00000000000000ff"}"#);
        text.push('\n');
        std::fs::write(&path, text).unwrap();
        let replay = replay(&path).unwrap();
        assert_eq!(replay.resumes.as_deref(), Some("r1"));
        assert_eq!(replay.args, ["--cores", "2", "w.slurp"]);
        assert_eq!(replay.path, "/w.slurp");
        assert_eq!(
            replay.succeeded[&0xff], 2,
            "two successes of one key are two credits"
        );
    }

    #[test]
    fn a_store_of_another_format_is_refused_not_misread() {
        let dir = tempfile::tempdir().unwrap();
        assert!(open_store(dir.path()).unwrap().is_ok());
        assert_eq!(
            std::fs::read_to_string(dir.path().join(".slurp/VERSION")).unwrap(),
            "1\n"
        );
        std::fs::write(dir.path().join(".slurp/VERSION"), "2\n").unwrap();
        let mismatch = open_store(dir.path()).unwrap().unwrap_err();
        assert!(mismatch.to_string().contains("format `2`"));
    }
}
