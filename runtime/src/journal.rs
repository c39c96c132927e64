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
//!
//! A sweep's members are written of compactly: a cohort record names them
//! all, a member is written of once it starts, and what succeeds is a
//! [`Record::Done`] of member ranges, one per scheduling step. Every
//! [`compact_every`] bytes it grows, the journal is rewritten
//! in place of itself, atomically (a new file renamed over the old): each
//! cohort's successes become one `done` record and its succeeded members'
//! own records go, so a sweep of 10⁶ members that succeed leaves a journal
//! of at most what was written since the last rewrite. What the rewrite keeps means what it meant
//! before: replay of either gives the same run.

use std::collections::{BTreeMap, HashMap};
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
        /// The [`Record::Cohort`] the task is a member of, and which member
        /// (from 0).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cohort: Option<(u32, u32)>,
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
        /// As [`Record::State`]'s.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cohort: Option<(u32, u32)>,
    },
    /// Members of cohort `cohort` succeeded: those in `ranges` (`[from,
    /// to)`, member numbers), and per chunk of [`CHUNK`] members the sum
    /// of their keys' [`mix`]es (hex), so `slurp resume` can tell that the
    /// members it would skip are the ones that ran. Written for what one
    /// step saw succeed; a compacted journal holds one per cohort, in place
    /// of its members' records.
    Done {
        t: u64,
        cohort: u32,
        ranges: Vec<(u32, u32)>,
        digests: Vec<(u32, String)>,
    },
    /// `count` members of cohort `cohort` from member `from` on, none of
    /// them ever started, moved to `to` together (a halt cancels what a
    /// sweep had not started: one record, not one per member). `first` and
    /// `last` are their ids.
    Stretch {
        t: u64,
        cohort: u32,
        from: u32,
        count: u32,
        first: String,
        last: String,
        to: State,
        reason: serde_json::Value,
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
        /// As [`Record::State`]'s.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cohort: Option<(u32, u32)>,
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

/// Members per digest of a [`Record::Done`]: an edited workflow whose
/// members changed loses the credit of the chunks they are in, not of the
/// whole sweep.
pub const CHUNK: u32 = 1 << 16;

/// A key as a digest adds it up: the keys are FNV hashes, and a sum of
/// them unmixed would let two edits cancel out far more often than 2⁻⁶⁴.
pub fn mix(key: u64) -> u64 {
    // splitmix64's finaliser.
    let mut z = key.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The members of one cohort that succeeded, as ranges, and per chunk of
/// [`CHUNK`] members the wrapping sum of their keys' [`mix`]es: memory and
/// journal grow with the gaps (failures, members still running), not with
/// the members.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Done {
    pub members: rangemap::RangeSet<u32>,
    pub digests: BTreeMap<u32, u64>,
}

impl Done {
    /// Member `member`, of key `key`, succeeded (once: a second time adds
    /// nothing).
    pub fn add(&mut self, member: u32, key: u64) {
        if self.members.contains(&member) {
            return;
        }
        self.members.insert(member..member + 1);
        let digest = self.digests.entry(member / CHUNK).or_default();
        *digest = digest.wrapping_add(mix(key));
    }

    /// Adds what another holds. Members are never lost: the union is
    /// kept whatever the two share. A chunk's digest is added only where
    /// the two share no member of it — a repeat adds nothing, and a
    /// partial overlap (which slurp never writes) leaves a digest that no
    /// resume matches, so that chunk reruns rather than a member being
    /// skipped on a wrong digest.
    pub fn merge(&mut self, other: &Done) {
        for (&chunk, &d) in &other.digests {
            let (members, _) = other.chunk(chunk);
            if members.iter().any(|r| self.members.overlaps(r)) {
                continue;
            }
            let digest = self.digests.entry(chunk).or_default();
            *digest = digest.wrapping_add(d);
        }
        for r in other.members.iter() {
            self.members.insert(r.clone());
        }
    }

    /// How many members it holds.
    pub fn len(&self) -> u64 {
        self.members
            .iter()
            .map(|r| u64::from(r.end - r.start))
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Its members in chunk `chunk`, and their digest.
    pub fn chunk(&self, chunk: u32) -> (Vec<std::ops::Range<u32>>, u64) {
        let span = chunk.saturating_mul(CHUNK)..chunk.saturating_add(1).saturating_mul(CHUNK);
        let members = self
            .members
            .overlapping(&span)
            .map(|r| r.start.max(span.start)..r.end.min(span.end))
            .collect();
        (members, self.digests.get(&chunk).copied().unwrap_or(0))
    }

    /// The record of it.
    pub fn record(&self, t: u64, cohort: u32) -> Record {
        Record::Done {
            t,
            cohort,
            ranges: self.members.iter().map(|r| (r.start, r.end)).collect(),
            digests: self
                .digests
                .iter()
                .map(|(&chunk, &d)| (chunk, format!("{d:016x}")))
                .collect(),
        }
    }

    /// What a record says; None for one that does not hold together
    /// (a range backwards, a digest that is not hex).
    pub fn of_record(ranges: &[(u32, u32)], digests: &[(u32, String)]) -> Option<Done> {
        let mut done = Done::default();
        for &(from, to) in ranges {
            if from >= to {
                return None;
            }
            done.members.insert(from..to);
        }
        for (chunk, d) in digests {
            done.digests
                .insert(*chunk, u64::from_str_radix(d, 16).ok()?);
        }
        Some(done)
    }
}

/// What `slurp resume` may skip: tasks by key (each success one credit),
/// and cohorts' members by range, by the id of the cohort's first member.
#[derive(Debug, Clone, Default)]
pub struct Credits {
    pub keys: HashMap<u64, usize>,
    pub members: HashMap<String, Done>,
}

impl Credits {
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.members.is_empty()
    }

    /// How many tasks they would skip, at most.
    pub fn total(&self) -> u64 {
        self.keys.values().map(|&n| n as u64).sum::<u64>()
            + self.members.values().map(Done::len).sum::<u64>()
    }

    /// Adds what an older run of the chain had: per key, and per chunk of
    /// a cohort, the most successes either saw (a resumed run killed while
    /// it recorded what it took over has fewer than the run it resumed).
    pub fn merge_older(&mut self, older: Credits) {
        for (key, n) in older.keys {
            let entry = self.keys.entry(key).or_default();
            *entry = (*entry).max(n);
        }
        for (first, old) in older.members {
            let new = self.members.entry(first).or_default();
            for &chunk in old.digests.keys() {
                let (old_members, old_digest) = old.chunk(chunk);
                let (new_members, _) = new.chunk(chunk);
                let count = |rs: &[std::ops::Range<u32>]| rs.iter().map(|r| r.len()).sum::<usize>();
                if count(&old_members) > count(&new_members) {
                    for r in new_members {
                        new.members.remove(r);
                    }
                    for r in old_members {
                        new.members.insert(r);
                    }
                    new.digests.insert(chunk, old_digest);
                }
            }
        }
    }
}

/// How many bytes a journal takes on between rewrites (512 KiB; the
/// variable `SLURP_JOURNAL_COMPACT` sets another, as the tests do to see
/// rewrites in small runs).
pub fn compact_every() -> u64 {
    std::env::var("SLURP_JOURNAL_COMPACT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512 * 1024)
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
    /// What succeeded of each cohort, as written so far.
    done: BTreeMap<u32, Done>,
    /// Bytes written since the last rewrite, and the size it left.
    appended: u64,
    base: u64,
    /// Members written as succeeded since the last rewrite: nothing to
    /// rewrite without them.
    folded: u64,
    compact_every: u64,
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
            done: BTreeMap::new(),
            appended: 0,
            base: 0,
            folded: 0,
            compact_every: compact_every(),
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
    /// whole lines and at most one torn. The step's [`Record::Done`]s are
    /// written as one per cohort, last; the journal is rewritten when it
    /// has grown by [`compact_every`] (or by its size, if more) since the
    /// last rewrite.
    pub fn write_all(&mut self, records: &[Record]) -> io::Result<()> {
        let mut lines = Vec::with_capacity(160 * records.len());
        let mut step: BTreeMap<u32, (u64, Done)> = BTreeMap::new();
        for record in records {
            if let Record::Done {
                t,
                cohort,
                ranges,
                digests,
            } = record
            {
                let (at, done) = step.entry(*cohort).or_default();
                *at = (*at).max(*t);
                done.merge(&Done::of_record(ranges, digests).unwrap_or_default());
                continue;
            }
            serde_json::to_writer(&mut lines, record).map_err(io::Error::other)?;
            lines.push(b'\n');
        }
        for (cohort, (t, done)) in &step {
            serde_json::to_writer(&mut lines, &done.record(*t, *cohort))
                .map_err(io::Error::other)?;
            lines.push(b'\n');
        }
        self.file.write_all(&lines)?;
        self.appended += lines.len() as u64;
        for (cohort, (_, done)) in step {
            self.folded += done.len();
            self.done.entry(cohort).or_default().merge(&done);
        }
        // By size alone: a run of a few thousand tasks keeps every
        // member's records, and its report every bar.
        if self.folded > 0 && self.appended >= self.compact_every.max(self.base) {
            self.compact()?;
        }
        Ok(())
    }

    /// Rewrites the journal without what its `done` records now say: each
    /// cohort's successes in one record after the cohort's, its succeeded
    /// members' own records gone, every other line as it was. Written to a
    /// new file, locked, then renamed over the journal, so a reader or a
    /// kill at any moment sees the old journal or the new, whole.
    fn compact(&mut self) -> io::Result<()> {
        #[derive(Deserialize)]
        struct Peek {
            ev: String,
            #[serde(default)]
            id: Option<u32>,
            #[serde(default)]
            cohort: serde_json::Value,
        }
        use std::os::unix::fs::OpenOptionsExt;
        let path = self.dir.join("events.jsonl");
        let fresh = self.dir.join("events.jsonl.new");
        // One a kill cut short.
        let _ = std::fs::remove_file(&fresh);
        let file = std::fs::OpenOptions::new()
            .create_new(true)
            .append(true)
            .mode(0o600)
            .open(&fresh)?;
        let file = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
            .map_err(|(_, e)| io::Error::from(e))?;
        // Streamed: a journal of many tasks of their own is not held whole.
        let mut out = io::BufWriter::with_capacity(1 << 16, &*file);
        let mut size = 0u64;
        let mut put = |out: &mut io::BufWriter<&File>, line: &[u8]| -> io::Result<()> {
            size += line.len() as u64 + 1;
            out.write_all(line)?;
            out.write_all(b"\n")
        };
        let record =
            |c: u32, done: &Done| serde_json::to_vec(&done.record(0, c)).map_err(io::Error::other);
        let mut written = std::collections::BTreeSet::new();
        for line in io::BufReader::new(File::open(&path)?).split(b'\n') {
            let line = line?;
            if line.is_empty() {
                continue;
            }
            let peek = serde_json::from_slice::<Peek>(&line).ok();
            let keep = match &peek {
                Some(p) if p.ev == "done" => false,
                Some(p) if matches!(p.ev.as_str(), "state" | "start" | "group") => {
                    match serde_json::from_value::<(u32, u32)>(p.cohort.clone()) {
                        Ok((c, m)) => !self.done.get(&c).is_some_and(|d| d.members.contains(&m)),
                        Err(_) => true,
                    }
                }
                _ => true,
            };
            if keep {
                put(&mut out, &line)?;
            }
            if let Some(Peek {
                ev, id: Some(c), ..
            }) = &peek
                && ev == "cohort"
                && let Some(done) = self.done.get(c)
                && written.insert(*c)
            {
                put(&mut out, &record(*c, done)?)?;
            }
        }
        // A cohort record is always written before its members succeed;
        // should one be missing, its successes are kept all the same.
        for (c, done) in &self.done {
            if !written.contains(c) {
                put(&mut out, &record(*c, done)?)?;
            }
        }
        out.flush()?;
        drop(out);
        std::fs::rename(&fresh, &path)?;
        // The old file's lock goes with it; the new one is locked already.
        self.file = file;
        self.base = size;
        self.appended = 0;
        self.folded = 0;
        Ok(())
    }

    /// The `FILE:LINE` of a task's defining line, as the journal names it.
    pub fn source(&self, wf: &crate::ir::Workflow, task: crate::ir::TaskId) -> String {
        let source = wf.template(wf.task(task).template).source;
        let file = self.files.get(source.file.0 as usize).map_or("?", |f| f);
        format!("{file}:{}", source.line)
    }

    /// The record for a core event of the instance at `scope`, of a
    /// task that is `cohort`'s member (cohort, member) or not; a start is
    /// recorded where it is `placed` (node, cores, GPUs per slice, in
    /// top-level ids). None for a move to `running`: the start record that
    /// comes with it is the attempt's `running` (readers take it so). A
    /// member's success is a [`Record::Done`].
    pub fn record(
        &self,
        program: &Program,
        workflow: crate::ir::WorkflowId,
        scope: &str,
        event: &Event,
        placed: &[Placed],
        cohort: Option<(u32, u32)>,
    ) -> Option<Record> {
        let wf = program.workflow(workflow);
        if let (
            Event::Transition {
                time,
                task,
                to: State::Succeeded,
                ..
            },
            Some((c, m)),
        ) = (event, cohort)
        {
            let mut done = Done::default();
            done.add(m, wf.key(*task, scope));
            return Some(done.record(time.0, c));
        }
        Some(match event {
            Event::Transition {
                to: State::Running, ..
            } => return None,
            // The driver writes what a resume took over as `done` records
            // itself: it has the digests already.
            Event::Stretch {
                to: State::Succeeded,
                ..
            } => return None,
            Event::Stretch {
                time,
                first,
                count,
                to,
                reason,
            } => {
                let (c, m) = cohort?;
                Record::Stretch {
                    t: time.0,
                    cohort: c,
                    from: m,
                    count: *count,
                    first: format!("{scope}{}", wf.task_name(*first)),
                    last: format!(
                        "{scope}{}",
                        wf.task_name(crate::ir::TaskId(first.0 + count - 1))
                    ),
                    to: *to,
                    reason: serde_json::to_value(reason).unwrap_or(serde_json::Value::Null),
                }
            }

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
    pub succeeded: HashMap<u64, usize>,
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
    /// The cohorts, by id.
    pub cohorts: BTreeMap<u32, Cohort>,
}

/// A cohort as the journal tells it: its members with records of their
/// own are in [`Replay::tasks`], those that succeeded as ranges in `done`,
/// and the others are runnable, never started.
#[derive(Debug, Default, Serialize)]
pub struct Cohort {
    /// The id of its first member, and how many it has.
    pub first: String,
    pub count: u32,
    /// Their defining line, `FILE:LINE`.
    pub src: String,
    /// Members with records of their own: their ids, by member number.
    #[serde(skip)]
    pub named: BTreeMap<u32, String>,
    #[serde(skip)]
    pub done: Done,
    /// Stretches of members that moved together to a state other than
    /// succeeded, never started (a halt).
    #[serde(skip)]
    pub stretches: Vec<Stretch>,
}

/// Members of a cohort that moved together, never started.
#[derive(Debug, Clone)]
pub struct Stretch {
    pub first: String,
    pub last: String,
    pub count: u32,
    pub state: State,
    pub reason: serde_json::Value,
}

impl Cohort {
    /// Members no record names: runnable, never started.
    pub fn unstarted(&self) -> u64 {
        let stretched: u64 = self.stretches.iter().map(|s| u64::from(s.count)).sum();
        u64::from(self.count).saturating_sub(self.named.len() as u64 + self.done.len() + stretched)
    }
}

impl Replay {
    /// Counts per state, in `State::ALL` order.
    pub fn counts(&self) -> [usize; 9] {
        let mut counts = [0; 9];
        for (state, _) in self.tasks.values() {
            counts[*state as usize] += 1;
        }
        for cohort in self.cohorts.values() {
            counts[State::Runnable as usize] += cohort.unstarted() as usize;
            counts[State::Succeeded as usize] += cohort.done.len() as usize;
            for s in &cohort.stretches {
                counts[s.state as usize] += s.count as usize;
            }
        }
        counts
    }

    /// Cohort members no record names: runnable, never started.
    pub fn unstarted(&self) -> u64 {
        self.cohorts.values().map(Cohort::unstarted).sum()
    }

    /// Member `member` of `cohort` has a record, as `task`.
    fn seen(&mut self, task: &str, cohort: Option<(u32, u32)>) {
        if let Some((c, m)) = cohort
            && let Some(c) = self.cohorts.get_mut(&c)
        {
            c.named.entry(m).or_insert_with(|| task.to_owned());
        }
    }

    /// Members of cohort `c` succeeded: they are counted in its `done`,
    /// and their own records, read before, are forgotten.
    fn done(&mut self, c: u32, done: &Done) {
        let Some(cohort) = self.cohorts.get_mut(&c) else {
            return;
        };
        cohort.done.merge(done);
        for r in done.members.iter() {
            let named: Vec<u32> = cohort.named.range(r.clone()).map(|(&m, _)| m).collect();
            for m in named {
                if let Some(task) = cohort.named.remove(&m) {
                    self.tasks.remove(&task);
                    self.attempts.remove(&task);
                    self.sources.remove(&task);
                }
            }
        }
    }

    /// What `slurp resume` of this run may skip.
    pub fn credits(&self) -> Credits {
        Credits {
            keys: self.succeeded.clone(),
            members: self
                .cohorts
                .values()
                .filter(|c| !c.done.is_empty())
                .map(|c| (c.first.clone(), c.done.clone()))
                .collect(),
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
    // Records that parse but do not hold together (a `done` range
    // backwards, a digest not hex): told as unreadable lines, not skipped.
    let mut malformed = Vec::new();
    let mut damage = read(path, |n, record| match record {
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
                let c = replay.cohorts.get(&cohort?.0)?;
                (to.is_final() && !c.src.is_empty()).then(|| c.src.clone())
            });
            if let Some(src) = src {
                replay.sources.insert(task.clone(), src);
            }
            if let Some(key) = key.and_then(|k| u64::from_str_radix(&k, 16).ok()) {
                *replay.succeeded.entry(key).or_default() += 1;
            }
            replay.seen(&task, cohort);
            replay.tasks.insert(task, (to, reason));
        }
        Record::Cohort {
            id,
            first,
            count,
            src,
            ..
        } => {
            replay.cohorts.insert(
                id,
                Cohort {
                    first,
                    count,
                    src,
                    ..Cohort::default()
                },
            );
        }
        Record::Done {
            cohort,
            ranges,
            digests,
            ..
        } => match Done::of_record(&ranges, &digests) {
            Some(done) => replay.done(cohort, &done),
            None => malformed.push(n),
        },
        Record::Start { task, cohort, .. } => {
            *replay.attempts.entry(task.clone()).or_default() += 1;
            // A start is the attempt's `running` (written only so since
            // the journal has starts).
            let running = (State::Running, serde_json::json!("ready"));
            replay.seen(&task, cohort);
            replay.tasks.insert(task, running);
        }
        Record::Stretch {
            cohort,
            first,
            last,
            count,
            to,
            reason,
            ..
        } => {
            if let Some(c) = replay.cohorts.get_mut(&cohort) {
                c.stretches.push(Stretch {
                    first,
                    last,
                    count,
                    state: to,
                    reason,
                });
            }
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
    damage.bad_lines.extend(malformed);
    damage.bad_lines.sort_unstable();
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
    fn a_done_record_that_does_not_hold_together_is_an_unreadable_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let text = [
            r#"{"ev":"header","run":"r","pid":1,"workflow":"w.slurp","started":5,"format":1}"#,
            r#"{"ev":"cohort","t":0,"id":0,"first":"s[1]","count":10,"src":"w.slurp:1"}"#,
            r#"{"ev":"done","t":1,"cohort":0,"ranges":[[0,3]],"digests":[[0,"00000000000000ff"]]}"#,
            r#"{"ev":"done","t":2,"cohort":0,"ranges":[[6,4]],"digests":[[0,"zz"]]}"#,
        ]
        .join("\n");
        std::fs::write(&path, text + "\n").unwrap();
        let replay = replay(&path).unwrap();
        assert_eq!(replay.bad_lines, [4]);
        assert!(replay.damage.skipped().is_some());
        assert_eq!(replay.counts()[State::Succeeded as usize], 3);
        assert_eq!(replay.counts()[State::Runnable as usize], 7);
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

    /// Members 0..40 of a cohort start and end (member 7 fails); 40..50
    /// never start. Rewritten, the journal says what it said before, in a
    /// few lines.
    #[test]
    fn a_rewritten_journal_replays_as_the_one_it_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("r");
        let mut journal = Journal::create(&run, "r", Header::default(), &[]).unwrap();
        journal.compact_every = u64::MAX;
        let start = |m: u32| Record::Start {
            t: u64::from(m),
            task: format!("s[{m}]"),
            attempt: 1,
            nodes: vec![0],
            cores: vec![vec![m % 2]],
            gpus: vec![vec![]],
            cohort: Some((0, m)),
        };
        let group = |m: u32| Record::Group {
            t: u64::from(m),
            task: format!("s[{m}]"),
            attempt: 1,
            pgid: 100 + m as i32,
            boot: String::new(),
            cohort: Some((0, m)),
        };
        let done = |m: u32| {
            let mut d = Done::default();
            d.add(m, 1000 + u64::from(m));
            d.record(u64::from(m) + 1, 0)
        };
        journal
            .write(&Record::Cohort {
                t: 0,
                id: 0,
                first: "s[0]".into(),
                count: 50,
                src: "w.slurp:1".into(),
            })
            .unwrap();
        for m in 0..40 {
            journal.write_all(&[start(m), group(m)]).unwrap();
            if m == 7 {
                journal
                    .write(&Record::State {
                        t: 8,
                        task: "s[7]".into(),
                        to: State::Failed,
                        reason: serde_json::json!({"ended": {"exit": 1}}),
                        key: None,
                        src: None,
                        cohort: Some((0, 7)),
                    })
                    .unwrap();
            } else if m % 2 == 1 {
                // Two successes in one step are one record.
                journal.write_all(&[done(m - 1), done(m)]).unwrap();
            }
        }
        let path = run.join("events.jsonl");
        let before = replay(&path).unwrap();
        let lines_before = std::fs::read_to_string(&path).unwrap().lines().count();
        assert_eq!(lines_before, 1 + 1 + 80 + 1 + 19);
        journal.compact_every = 0;
        journal
            .write(&Record::End {
                t: 50,
                interrupted: false,
            })
            .unwrap();
        let after = replay(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        // Header, cohort, its one `done`, member 6's start and group (it
        // was to end with 7, which failed: it is still running), 7's start,
        // group and failure, end.
        let kept: Vec<&str> = text.lines().collect();
        assert_eq!(kept.len(), 9, "{text}");
        assert!(kept[2].contains(r#""ev":"done""#), "{text}");
        for r in [&before, &after] {
            assert_eq!(r.counts()[State::Succeeded as usize], 38);
            assert_eq!(r.counts()[State::Failed as usize], 1);
            assert_eq!(r.counts()[State::Runnable as usize], 10);
            assert_eq!(r.counts()[State::Running as usize], 1);
            assert_eq!(r.tasks.keys().collect::<Vec<_>>(), ["s[6]", "s[7]"]);
        }
        assert_eq!(before.credits().members, after.credits().members);
        let mut expected = Done::default();
        for m in (0..40).filter(|&m| !(6..=7).contains(&m)) {
            expected.add(m, 1000 + u64::from(m));
        }
        assert_eq!(after.credits().members["s[0]"], expected);
        // Only the running member's process group is left to stop.
        let left = left_groups(&path).unwrap();
        assert_eq!(left, [("s[6]".to_owned(), 106)]);
    }

    #[test]
    fn digests_add_up_in_any_order_and_chunks_split_them() {
        let mut a = Done::default();
        let mut b = Done::default();
        for m in [3, CHUNK + 1, 4, 0] {
            a.add(m, u64::from(m) * 7);
        }
        for m in [0, 4, CHUNK + 1, 3, 3] {
            b.add(m, u64::from(m) * 7);
        }
        assert_eq!(a, b);
        assert_eq!(a.len(), 4);
        let (members, digest) = a.chunk(0);
        assert_eq!(members, [0..1, 3..5]);
        assert_eq!(digest, mix(0).wrapping_add(mix(21)).wrapping_add(mix(28)));
        assert_eq!(a.chunk(1).0, vec![(CHUNK + 1)..(CHUNK + 2)]);
        let Record::Done {
            ranges, digests, ..
        } = a.record(0, 0)
        else {
            unreachable!()
        };
        assert_eq!(Done::of_record(&ranges, &digests), Some(a.clone()));
        // A repeat adds nothing; a partial overlap keeps every member and
        // leaves that chunk's digest unmatched.
        let mut c = a.clone();
        c.merge(&a);
        assert_eq!(c, a);
        let mut d = Done::default();
        d.add(4, 28);
        d.add(5, 35);
        c.merge(&d);
        assert_eq!(c.len(), 5);
        assert_eq!(
            c.chunk(0).1,
            a.chunk(0).1,
            "chunk 0's digest left as it was"
        );
        assert_eq!(c.chunk(1), a.chunk(1));
        assert_eq!(Done::of_record(&[(5, 5)], &[]), None, "an empty range");
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
