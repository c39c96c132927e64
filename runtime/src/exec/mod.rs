//! The local executor: the one module that starts processes (see
//! [`spawn`] for how, and why not with `std::process`). Inside a Flux
//! instance a task's ranks are Flux jobs instead, through the run's one
//! Flux client (`flux_jobs`). A plain attempt (one process here, no memory
//! limit, no PMI, no tagged lines) is started and reaped by a [`reaper`]
//! thread; the others by [`run_attempt`] on the event loop.
//!
//! A task's attempt is `ntasks` copies (ranks) of its command, all in one
//! process group (the first rank leads it), each told `SLURP_TASK_RANK` and
//! `SLURP_NTASKS`, bound to its own cores (`sched_setaffinity`) and given
//! its GPUs in `CUDA_VISIBLE_DEVICES`, and held to its memory limit
//! ([`memory`]). Stdin is `/dev/null`. A time limit,
//! a cancel or a kill signals the whole group: SIGTERM, then SIGKILL after
//! the grace period; when an attempt ends, whatever is left in its group is
//! killed. Each rank also gets SIGKILL when slurp dies, however it dies
//! (`PR_SET_PDEATHSIG`). Processes a rank started in other process groups
//! are ended when the run ends ([`strays`]), unless slurp itself is killed
//! with SIGKILL. An attempt ends when its ranks end: their pipes are read
//! for what they still hold ([`capture`]: a young task's pipes are not
//! watched at all), but a process that escaped the group and keeps a pipe
//! open does not keep the task (or Ctrl-C) waiting. Its environment is
//! [`environ`]'s.

mod capture;
mod environ;
mod flux_jobs;
pub use flux_jobs::shutdown as end_flux_client;
pub mod memory;
pub mod pmi;
pub mod procs;
#[allow(unsafe_code)]
pub mod reaper;
#[allow(unsafe_code)]
mod spawn;
pub mod strays;

use std::ffi::{CString, OsStr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::sync::{mpsc, watch};

use crate::core::Outcome;
use crate::ir::TaskId;
use capture::Capture;
use environ::Environ;

/// Where a task's output goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputMode {
    /// Each task's output printed whole when it ends (GNU parallel's
    /// `--group`): never interleaved with another task's.
    #[default]
    Group,
    /// Lines printed as they come, prefixed with the task id.
    Tag,
    /// Into files under the run directory.
    Files,
    /// Discarded.
    None,
    /// Straight to slurp's own stdout and stderr, as the tasks write it
    /// (GNU parallel's `--ungroup`, and what `xargs` and a shell loop do):
    /// lines of tasks running together may mix, and nothing is kept for
    /// the summary of a failure. No pipes: the cheapest start.
    Ungroup,
}

/// One rank's place.
#[derive(Debug, Clone, Default)]
pub struct Rank {
    /// The node it runs on (top-level index).
    pub node: u32,
    /// CPUs to bind to; empty: not bound.
    pub cpus: Vec<usize>,
    /// Logical core ids, for `SLURP_CORES`.
    pub cores: Vec<u32>,
    /// Device ids for `CUDA_VISIBLE_DEVICES` and `SLURP_GPUS`.
    pub gpus: Vec<String>,
}

/// Everything needed to start one attempt of one task.
#[derive(Debug, Clone)]
pub struct Launch {
    /// Inside a Slurm job: each rank starts as a step on its node.
    pub allocation: Option<std::sync::Arc<crate::backend::allocation::Allocation>>,
    /// The instance (the top level, or a nested one) the task belongs to.
    pub instance: u32,
    pub task: TaskId,
    pub attempt: u32,
    /// The task id users see (`sim[3]`).
    pub name: String,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    pub ranks: Vec<Rank>,
    pub time_limit: Option<Duration>,
    pub mode: OutputMode,
    /// The task's `output=` file (stdout and stderr), or the run
    /// directory's files in `Files` mode: (stdout, stderr).
    pub files: Option<(PathBuf, PathBuf)>,
    pub run_dir: PathBuf,
    pub grace: Duration,
    /// Nesting depth of the task's instance, counted from the outermost
    /// slurp (`SLURP_DEPTH`), so a slurp started inside can refuse to nest
    /// without end.
    pub depth: u32,
    /// Bytes reserved for each rank (`SLURP_MEM`), 0 for none.
    pub mem: u64,
    /// Serve PMI-1 to the ranks ([`pmi`]); a rank that fails then stops
    /// its siblings.
    pub pmi: bool,
    /// The socket of the live instance the task runs in (`SLURP_SOCKET`)
    /// and that instance's path (`SLURP_SCOPE`): where `slurp submit`
    /// inside the task sends its tasks.
    pub socket: Option<std::sync::Arc<Path>>,
    pub scope: String,
}

/// What the driver asks of running tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stop {
    Run,
    /// SIGTERM, then SIGKILL after the grace period.
    Cancel,
    /// SIGKILL now.
    Kill,
}

/// A line of tagged output, or news of an attempt's processes.
#[derive(Debug)]
pub enum Output {
    Line {
        instance: u32,
        task: TaskId,
        stderr: bool,
        line: Vec<u8>,
    },
    /// The attempt's processes lead process group `pgid` (for the
    /// journal: what to stop if slurp dies).
    Group {
        instance: u32,
        task: TaskId,
        attempt: u32,
        pgid: i32,
    },
}

/// How an attempt ended.
#[derive(Debug)]
pub struct Finished {
    pub instance: u32,
    pub task: TaskId,
    pub attempt: u32,
    pub outcome: Outcome,
    pub elapsed: Duration,
    /// Group mode: the whole output, to print now.
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The last lines of stderr, for the summary.
    pub stderr_tail: String,
    /// Why it could not start, if it could not.
    pub error: Option<String>,
}

/// How far stopping an attempt has gone: one state machine for the event
/// loop's attempts ([`run_attempt`]) and the reapers'. The group is asked
/// to end once (SIGTERM; a `flux run` client's SIGINT), on a time limit, a
/// cancel or a rank's failure under PMI; SIGKILL follows after the grace
/// period, or at once on a kill.
#[derive(Debug, Default)]
struct Stopping {
    timed_out: bool,
    cancelled: bool,
    /// When the group was asked to end, until SIGKILL has gone.
    asked_at: Option<Instant>,
}

/// What to do to an attempt's process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Act {
    /// Ask it to end: SIGTERM (a `flux run` client: SIGINT, twice).
    Terminate,
    Kill,
}

impl Stopping {
    /// Neither its time limit nor a stop has been seen.
    fn running(&self) -> bool {
        !self.timed_out && !self.cancelled
    }

    /// The driver's request.
    fn request(&mut self, stop: Stop, now: Instant) -> Option<Act> {
        match stop {
            Stop::Run => None,
            Stop::Cancel => {
                self.cancelled = true;
                self.terminate(now)
            }
            Stop::Kill => {
                self.cancelled = true;
                self.grace_over();
                Some(Act::Kill)
            }
        }
    }

    /// Its time limit has passed (the caller checks [`running`](Self::running)).
    fn expire(&mut self, now: Instant) -> Option<Act> {
        self.timed_out = true;
        self.terminate(now)
    }

    /// The group is asked to end, unless it has been already.
    fn terminate(&mut self, now: Instant) -> Option<Act> {
        match self.asked_at {
            Some(_) => None,
            None => {
                self.asked_at = Some(now);
                Some(Act::Terminate)
            }
        }
    }

    /// When SIGKILL is due: the grace period after the group was asked.
    fn kill_at(&self, grace: Duration) -> Option<Instant> {
        self.asked_at.map(|at| at + grace)
    }

    /// SIGKILL goes now.
    fn grace_over(&mut self) -> Act {
        self.asked_at = None;
        Act::Kill
    }

    /// What a time limit or a stop makes of the attempt, before anything its
    /// processes did.
    fn outcome(&self) -> Option<Outcome> {
        if self.timed_out {
            Some(Outcome::Timeout)
        } else if self.cancelled {
            Some(Outcome::Cancelled)
        } else {
            None
        }
    }
}

/// An attempt that could not start, and why.
fn unstarted(launch: &Launch, error: String) -> Finished {
    Finished {
        instance: launch.instance,
        task: launch.task,
        attempt: launch.attempt,
        outcome: Outcome::SpawnError,
        elapsed: Duration::ZERO,
        stdout: Vec::new(),
        stderr: Vec::new(),
        stderr_tail: String::new(),
        error: Some(error),
    }
}

/// What a process's end means for its attempt.
fn outcome(status: nix::sys::wait::WaitStatus) -> Outcome {
    use nix::sys::wait::WaitStatus;
    match status {
        WaitStatus::Exited(_, 0) => Outcome::Success,
        WaitStatus::Exited(_, code) => Outcome::Exit(code),
        WaitStatus::Signaled(_, signal, _) => Outcome::Signal(signal as i32),
        _ => Outcome::Exit(-1),
    }
}

/// Runs one attempt to its end.
pub async fn run_attempt(
    launch: Launch,
    mut stop: watch::Receiver<Stop>,
    lines: mpsc::UnboundedSender<Output>,
) -> Finished {
    let started = Instant::now();
    let mut finished = Finished {
        outcome: Outcome::Success,
        error: None,
        ..unstarted(&launch, String::new())
    };
    // Inside a Flux instance every rank is a Flux job: through the run's
    // one Flux client where it runs.
    if let Some(job) = launch.allocation.clone()
        && job.manager == crate::backend::allocation::Manager::Flux
        && launch
            .ranks
            .iter()
            .all(|r| !job.starts_here(r.node as usize))
        && let Some(client) = flux_jobs::client(&job, &launch.run_dir)
    {
        return flux_jobs::run_attempt(client, &job, launch, stop, lines, finished).await;
    }
    let limit = match memory_limit(&launch) {
        Ok(limit) => limit,
        Err(error) => {
            finished.outcome = Outcome::SpawnError;
            finished.error = Some(error);
            return finished;
        }
    };
    let cgroup = limit.as_ref().and_then(memory::Limit::procs_fd);
    // PMI for ranks started here (a Slurm step gets Slurm's).
    let served = launch.pmi
        && launch.ranks.iter().all(|r| {
            launch
                .allocation
                .as_ref()
                .is_none_or(|job| job.starts_here(r.node as usize))
        });
    let (pmi_ends, server) = if served {
        match pmi::wire(launch.ranks.len(), &format!("slurp-{}", launch.name)) {
            Ok((ends, server)) => (ends, Some(server)),
            Err(error) => {
                finished.outcome = Outcome::SpawnError;
                finished.error = Some(error);
                return finished;
            }
        }
    } else {
        (Vec::new(), None)
    };
    let spawned = spawn_ranks(&launch, Some(&lines), cgroup, &pmi_ends);
    // The ranks hold their ends now; the server sees them close.
    drop(pmi_ends);
    let (children, mut capture) = match spawned {
        Ok(spawned) => spawned,
        Err(error) => {
            finished.outcome = Outcome::SpawnError;
            finished.error = Some(error);
            finished.elapsed = started.elapsed();
            return finished;
        }
    };
    // The first rank leads the task's process group.
    let pgid = children.first().map(|c| Pid::from_raw(c.pid));
    if let Some(pgid) = pgid {
        let _ = lines.send(Output::Group {
            instance: launch.instance,
            task: launch.task,
            attempt: launch.attempt,
            pgid: pgid.as_raw(),
        });
    }
    let mut left = children.len();
    let mut ended = wait_each(children);
    let mut statuses = Outcome::Success;
    let serving = server.map(pmi::Server::serve);
    let serving = async move {
        match serving {
            Some(serving) => serving.await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(serving);
    let mut aborted: Option<pmi::Abort> = None;
    let mut serving_done = false;
    // Ranks started as `flux run` clients: stopping one stops its client,
    // not the job, unless the client is told twice (SIGINT, then SIGINT
    // again within two seconds: `flux job attach` then cancels the job).
    let flux_steps = launch.allocation.as_ref().is_some_and(|job| {
        job.manager == crate::backend::allocation::Manager::Flux
            && launch
                .ranks
                .iter()
                .any(|r| !job.starts_here(r.node as usize))
    });
    let mut second_interrupt: Option<tokio::time::Instant> = None;
    let deadline = launch
        .time_limit
        .map(|limit| tokio::time::Instant::now() + limit);
    let mut stopping = Stopping::default();
    // Without a cgroup, slurp watches the group's resident memory.
    let watched = limit.as_ref().filter(|l| l.watched()).map(|l| l.bytes);
    let look = memory::LOOK;
    let mut watch = tokio::time::interval_at(tokio::time::Instant::now() + look, look);
    watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut exceeded: Option<memory::Exceeded> = None;
    // Young pipes are read only once the task has grown up.
    let mut ages = capture.waiting().then(capture::Ages::listen);
    while left > 0 {
        let kill_at = stopping
            .kill_at(launch.grace)
            .map(tokio::time::Instant::from_std);
        let act = |act: Option<Act>, second_interrupt: &mut Option<tokio::time::Instant>| match act
        {
            Some(Act::Terminate) => terminate(pgid, flux_steps, second_interrupt),
            Some(Act::Kill) => signal_group(pgid, Signal::SIGKILL),
            None => {}
        };
        tokio::select! {
            Some(outcome) = ended.next() => {
                left -= 1;
                // The first failure in time is the task's; under PMI its
                // siblings would wait on it for ever: they are stopped.
                if outcome != Outcome::Success && statuses == Outcome::Success {
                    statuses = outcome;
                    if launch.pmi && left > 0 {
                        act(stopping.terminate(Instant::now()), &mut second_interrupt);
                    }
                }
            }
            served = &mut serving, if !serving_done => {
                serving_done = true;
                if let Err(abort) = served {
                    aborted = Some(abort);
                    signal_group(pgid, Signal::SIGKILL);
                }
            }
            _ = watch.tick(), if watched.is_some() && exceeded.is_none() => {
                let used = pgid.map_or(0, |g| memory::group_rss(g.as_raw()));
                if watched.is_some_and(|limit| used > limit) {
                    exceeded = Some(memory::Exceeded { peak: used });
                    signal_group(pgid, Signal::SIGKILL);
                }
            }
            _ = capture::Ages::grown_up(&mut ages), if ages.is_some() => {
                ages = None;
                if let Err(error) = capture.read_as_it_comes() {
                    // Not read, its writers would block for ever.
                    finished.error = Some(error);
                    signal_group(pgid, Signal::SIGKILL);
                }
            }
            _ = sleep_until(deadline), if stopping.running() => {
                act(stopping.expire(Instant::now()), &mut second_interrupt);
            }
            _ = sleep_until(second_interrupt), if second_interrupt.is_some() => {
                second_interrupt = None;
                signal_group(pgid, Signal::SIGINT);
            }
            _ = sleep_until(kill_at), if kill_at.is_some() => {
                act(Some(stopping.grace_over()), &mut second_interrupt);
            }
            changed = stop.changed() => {
                let request = if changed.is_ok() { *stop.borrow() } else { Stop::Kill };
                act(stopping.request(request, Instant::now()), &mut second_interrupt);
            }
        }
    }
    // Whatever the ranks left behind in their group goes too.
    signal_group(pgid, Signal::SIGKILL);
    let (stdout, stderr) = capture.finish().await;
    finished.stdout = stdout;
    finished.stderr_tail = tail(&stderr);
    finished.stderr = stderr;
    finished.elapsed = started.elapsed();
    // Only an attempt that failed can have been killed for memory.
    if let Some(limit) = limit.as_ref().filter(|_| statuses != Outcome::Success) {
        exceeded = exceeded.or_else(|| limit.exceeded());
    }
    finished.outcome = if let Some(outcome) = stopping.outcome() {
        outcome
    } else if let Some(abort) = &aborted {
        let code = abort
            .code
            .map_or_else(String::new, |c| format!(" with code {c}"));
        finished.error = Some(match abort.message.as_str() {
            "" => format!("rank {} called MPI_Abort{code}", abort.rank),
            message => format!("rank {} called MPI_Abort{code}: {message}", abort.rank),
        });
        Outcome::Exit(abort.code.filter(|&c| c != 0).unwrap_or(1))
    } else if let (Some(exceeded), Some(limit)) = (&exceeded, &limit) {
        finished.error = Some(limit.killed(exceeded));
        Outcome::OutOfMemory
    } else {
        statuses
    };
    finished
}

/// The attempt's memory limit, if it has one: `mem=` is per rank, so the
/// task's is what its ranks asked for.
fn memory_limit(launch: &Launch) -> Result<Option<memory::Limit>, String> {
    match launch.mem {
        0 => Ok(None),
        per_rank => {
            // The first core is this attempt's alone while it runs.
            let core = launch
                .ranks
                .first()
                .and_then(|r| r.cores.first())
                .copied()
                .unwrap_or(0);
            memory::Limit::new(core, per_rank * launch.ranks.len().max(1) as u64).map(Some)
        }
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The first step of stopping an attempt: SIGTERM to its group; for
/// `flux run` clients SIGINT, and another a moment later (which cancels
/// their Flux jobs).
fn terminate(
    pgid: Option<Pid>,
    flux_steps: bool,
    second_interrupt: &mut Option<tokio::time::Instant>,
) {
    if flux_steps {
        signal_group(pgid, Signal::SIGINT);
        *second_interrupt = Some(tokio::time::Instant::now() + Duration::from_millis(300));
    } else {
        signal_group(pgid, Signal::SIGTERM);
    }
}

fn signal_group(pgid: Option<Pid>, signal: Signal) {
    if let Some(pgid) = pgid {
        // The group may be gone already; that is the goal, not an error.
        let _ = killpg(pgid, signal);
    }
}

/// Every rank's end: each one's outcome as it ends (the stream's items).
/// Polled where the attempt waits, with no task or channel of its own.
fn wait_each(
    ranks: Vec<spawn::Spawned>,
) -> futures_util::stream::FuturesUnordered<impl Future<Output = Outcome>> {
    ranks
        .into_iter()
        .map(|rank| async move {
            spawn::wait(rank.pid, rank.pidfd)
                .await
                .map_or(Outcome::Exit(-1), outcome)
        })
        .collect()
}

/// One rank's stdout and stderr: the child's ends (`None`: slurp's own),
/// and the parent's read ends where output is captured.
struct Streams {
    child: [Option<OwnedFd>; 2],
    read: [Option<OwnedFd>; 2],
}

fn streams(
    mode: OutputMode,
    files: &Option<(std::fs::File, std::fs::File)>,
) -> Result<Streams, String> {
    let pipe = || {
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| format!("cannot create a pipe: {e}"))
    };
    let dup = |f: &std::fs::File| {
        f.try_clone()
            .map(OwnedFd::from)
            .map_err(|e| format!("cannot open output file: {e}"))
    };
    Ok(match (files, mode) {
        (Some((out, err)), _) => Streams {
            child: [Some(dup(out)?), Some(dup(err)?)],
            read: [None, None],
        },
        (None, OutputMode::Ungroup) => Streams {
            child: [None, None],
            read: [None, None],
        },
        (None, OutputMode::None) => {
            let (err_r, err_w) = pipe()?;
            Streams {
                child: [
                    Some(
                        dev_null()?
                            .try_clone()
                            .map(OwnedFd::from)
                            .map_err(|e| format!("cannot open /dev/null: {e}"))?,
                    ),
                    Some(err_w),
                ],
                read: [None, Some(err_r)],
            }
        }
        (None, _) => {
            let (out_r, out_w) = pipe()?;
            let (err_r, err_w) = pipe()?;
            Streams {
                child: [Some(out_w), Some(err_w)],
                read: [Some(out_r), Some(err_r)],
            }
        }
    })
}

fn cstring(s: impl AsRef<OsStr>, what: &str) -> Result<CString, String> {
    CString::new(s.as_ref().as_bytes()).map_err(|_| format!("{what} contains a NUL byte"))
}

/// The task's environment as text, for a jobspec.
fn rank_environment(launch: &Launch) -> Result<Vec<(String, String)>, String> {
    Ok(Environ::for_task(launch)?.pairs())
}

fn spawn_ranks(
    launch: &Launch,
    lines: Option<&mpsc::UnboundedSender<Output>>,
    cgroup: Option<i32>,
    pmi_ends: &[OwnedFd],
) -> Result<(Vec<spawn::Spawned>, Capture), String> {
    let Some(program) = launch.argv.first() else {
        return Err("empty command".to_owned());
    };
    let path = find_program(program, &launch.env, &launch.cwd)
        .ok_or_else(|| format!("cannot run `{program}`: no such program"))?;
    let path = cstring(&path, "the program path")?;
    let argv = launch
        .argv
        .iter()
        .map(|a| cstring(a, "an argument"))
        .collect::<Result<Vec<_>, _>>()?;
    let cwd = cstring(&launch.cwd, "the working directory")?;
    let env = Environ::for_task(launch)?;
    let ntasks = launch.ranks.len().to_string();
    let files = match &launch.files {
        Some((out, err)) => {
            Some(open_files(out, err).map_err(|e| format!("cannot open output file: {e}"))?)
        }
        None => None,
    };
    let stdin = dev_null()?;
    let mut started: Vec<spawn::Spawned> = Vec::with_capacity(launch.ranks.len());
    let mut capture = Capture::new(launch.mode, (launch.instance, launch.task), lines.cloned());
    for (rank, place) in launch.ranks.iter().enumerate() {
        let gpus = place.gpus.join(",");
        let mut rank_env = vec![
            ("SLURP_TASK_RANK", rank.to_string()),
            ("SLURP_CORES", join(&place.cores)),
            ("SLURP_GPUS", gpus.clone()),
            ("CUDA_VISIBLE_DEVICES", gpus),
        ];
        if !pmi_ends.is_empty() {
            rank_env.extend([
                ("PMI_FD", pmi::FD.to_string()),
                ("PMI_RANK", rank.to_string()),
                ("PMI_SIZE", ntasks.clone()),
            ]);
        }
        let rank_env = rank_env
            .iter()
            .map(|(k, v)| environ::Entry::new(k.as_bytes(), v.as_bytes()))
            .collect::<Result<Vec<_>, _>>()?;
        let envp = env.for_rank(&rank_env);
        let streams = streams(launch.mode, &files)?;
        let (path, argv) = match &launch.allocation {
            Some(job) if !job.starts_here(place.node as usize) => {
                let share = crate::backend::allocation::Step {
                    node: place.node as usize,
                    cores: place.cores.len(),
                    gpus: place.gpus.len(),
                    mem: launch.mem,
                    time_limit: launch.time_limit,
                };
                let step = match job.manager {
                    crate::backend::allocation::Manager::Flux => {
                        let env: Vec<(String, String)> = envp
                            .iter()
                            .filter_map(|e| {
                                let (k, v) = e.to_str().ok()?.split_once('=')?;
                                Some((k.to_owned(), v.to_owned()))
                            })
                            .collect();
                        let spec =
                            job.flux_job(&share, &launch.name, &launch.argv, &launch.cwd, &env);
                        let dir = launch.run_dir.join("flux");
                        let file = dir.join(format!(
                            "{}-{}-{rank}.json",
                            launch.name.replace('/', "_"),
                            launch.attempt
                        ));
                        std::fs::create_dir_all(&dir)
                            .and_then(|_| std::fs::write(&file, spec.to_string()))
                            .map_err(|e| {
                                format!("cannot write the Flux jobspec {}: {e}", file.display())
                            })?;
                        job.flux_start(&file)
                    }
                    crate::backend::allocation::Manager::Slurm => {
                        job.step(&share, &launch.name, &launch.argv)
                    }
                };
                let argv = step
                    .iter()
                    .map(|a| cstring(a, "an argument"))
                    .collect::<Result<Vec<_>, _>>()?;
                (cstring(&step[0], "the program path")?, argv)
            }
            _ => (path.clone(), argv.clone()),
        };
        let spec = spawn::Spec {
            path,
            argv,
            envp,
            cwd: cwd.clone(),
            pgid: started.first().map_or(0, |s| s.pid),
            fds: [
                stdin.as_raw_fd(),
                streams.child[0]
                    .as_ref()
                    .map_or(libc::STDOUT_FILENO, |fd| fd.as_raw_fd()),
                streams.child[1]
                    .as_ref()
                    .map_or(libc::STDERR_FILENO, |fd| fd.as_raw_fd()),
            ],
            cgroup: cgroup.unwrap_or(-1),
            pmi: pmi_ends.get(rank).map_or(-1, |fd| fd.as_raw_fd()),
            cpus: place.cpus.clone(),
        };
        let spawned = spawn::spawn(&spec);
        // The parent's copies of the child's ends close here.
        drop(streams.child);
        match spawned {
            Ok(spawned) => started.push(spawned),
            Err(error) => {
                kill_and_reap(&started);
                return Err(format!("cannot run `{program}`: {error}"));
            }
        }
        let [out, err] = streams.read;
        for (fd, stderr) in [(out, false), (err, true)] {
            if let Some(fd) = fd {
                capture.add(fd, stderr)?;
            }
        }
    }
    Ok((started, capture))
}

/// After a later rank could not start: the earlier ones go, at once.
fn kill_and_reap(started: &[spawn::Spawned]) {
    if let Some(leader) = started.first() {
        signal_group(Some(Pid::from_raw(leader.pid)), Signal::SIGKILL);
    }
    for rank in started {
        let _ = nix::sys::wait::waitpid(Pid::from_raw(rank.pid), None);
    }
}

/// The file to exec: a path as given (a relative one from the task's
/// working directory), or a bare name searched in `PATH` — the task's own
/// if it sets one, else slurp's, then cached: a search tries each directory
/// in turn, which thousands of tasks of one program would pay again and
/// again.
fn find_program(program: &str, env: &[(String, String)], cwd: &Path) -> Option<PathBuf> {
    use std::collections::HashMap;
    use std::sync::Mutex;
    static CACHE: Mutex<Option<HashMap<String, Option<PathBuf>>>> = Mutex::new(None);
    if program.contains('/') {
        return Some(cwd.join(program));
    }
    let search = |path: &OsStr| {
        use std::os::unix::fs::PermissionsExt as _;
        std::env::split_paths(path)
            .map(|dir| dir.join(program))
            .find(|candidate| {
                std::fs::metadata(candidate)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    };
    if let Some((_, path)) = env.iter().find(|(k, _)| k == "PATH") {
        return search(OsStr::new(path));
    }
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    cache
        .get_or_insert_with(HashMap::new)
        .entry(program.to_owned())
        .or_insert_with(|| search(&std::env::var_os("PATH").unwrap_or_default()))
        .clone()
}

/// `/dev/null`, opened once and shared: a child's stdin is it (the child
/// `dup2`s it into place), so a spawn neither opens nor closes one.
fn dev_null() -> Result<&'static std::fs::File, String> {
    static DEV_NULL: std::sync::OnceLock<std::io::Result<std::fs::File>> =
        std::sync::OnceLock::new();
    DEV_NULL
        .get_or_init(|| {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/null")
        })
        .as_ref()
        .map_err(|e| format!("cannot open /dev/null: {e}"))
}

fn join(ids: &[u32]) -> String {
    ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

fn open_files(out: &Path, err: &Path) -> std::io::Result<(std::fs::File, std::fs::File)> {
    for p in [out, err] {
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir)?;
        }
    }
    let open = |p: &Path| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
    };
    let out_file = open(out)?;
    let err_file = if err == out {
        out_file.try_clone()?
    } else {
        open(err)?
    };
    Ok((out_file, err_file))
}

/// The last lines of stderr, at most about 2 KiB, as text.
pub fn tail(stderr: &[u8]) -> String {
    let start = stderr.len().saturating_sub(capture::TAIL_BYTES);
    let text = String::from_utf8_lossy(&stderr[start..]);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::{Act, Outcome, Stop, Stopping};
    use std::time::{Duration, Instant};

    /// A cancel asks once; a second cancel or a time limit after it asks no
    /// more; SIGKILL is due a grace period after the asking; a cancel's
    /// outcome stands whatever the processes did.
    #[test]
    fn a_group_is_asked_to_end_once_and_killed_after_the_grace() {
        let t0 = Instant::now();
        let grace = Duration::from_secs(5);
        let mut s = Stopping::default();
        assert_eq!(s.outcome(), None);
        assert_eq!(s.request(Stop::Run, t0), None);
        assert_eq!(s.request(Stop::Cancel, t0), Some(Act::Terminate));
        assert_eq!(s.request(Stop::Cancel, t0 + grace / 2), None);
        assert!(!s.running());
        assert_eq!(s.kill_at(grace), Some(t0 + grace));
        assert_eq!(s.grace_over(), Act::Kill);
        assert_eq!(s.kill_at(grace), None);
        assert_eq!(s.outcome(), Some(Outcome::Cancelled));
    }

    /// A time limit is the outcome even if a cancel follows it; a kill
    /// goes at once and leaves nothing due.
    #[test]
    fn a_time_limit_outranks_a_later_cancel_and_a_kill_is_at_once() {
        let t0 = Instant::now();
        let mut s = Stopping::default();
        assert_eq!(s.expire(t0), Some(Act::Terminate));
        assert_eq!(s.request(Stop::Cancel, t0), None);
        assert_eq!(s.request(Stop::Kill, t0), Some(Act::Kill));
        assert_eq!(s.kill_at(Duration::from_secs(1)), None);
        assert_eq!(s.outcome(), Some(Outcome::Timeout));
    }
}
