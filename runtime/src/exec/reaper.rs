//! Reaper threads: where a plain attempt is started, watched and reaped,
//! and where the next one is decided — by the thread that saw a task end.
//!
//! A plain attempt is one process on this machine with no PMI: almost every
//! member of a big sweep, with a time limit, a memory limit or tagged lines
//! or not. Everything else (several ranks, PMI, Slurm and Flux steps,
//! nested instances, the run's timers, signals, the socket) stays with the
//! event loop.
//!
//! Why not the event loop: with one thread for every start and end, the
//! machine's CPUs share it. While it serves one CPU's end, or is suspended
//! in the `vfork` of that CPU's next child, the other CPU's end waits, and
//! it is one runnable thread more than there are CPUs (BENCHMARKS.md,
//! "What the launcher's shape costs"). Here each thread owns the children
//! it started, as a `waitpid` loop a CPU does: it sleeps in `poll` on their
//! pidfds, reaps the one that ended, takes the run's lock for the driver's
//! synchronous step ([`serve`]'s `report`: the core, the journal, the
//! console), and starts at once what that step gave it.
//!
//! A thread's children are waited for by pid, never `waitid(P_ALL)`, so
//! the children of `std::process` elsewhere in slurp are left alone. Their
//! pipes are left alone while they are young, as [`capture`](super::capture)
//! does, then read as they fill; after the end they are read to their end
//! of file, within the same quiet and linger limits. Tagged lines
//! (`--output tag`) are cut from what the pipes give and handed to `report`
//! with the thread's other news, under the same lock as the attempt's end
//! and before it: the console has a task's every line before it hears the
//! task ended (what `-k` and the summary rely on). Stops come through the
//! attempt's `watch` channel, as they do to the event loop's attempts, with
//! a poke ([`Reapers::poke`]) to look at it; a time limit is a deadline the
//! thread's `ppoll` wakes for. A memory limit is the event loop's too
//! ([`memory`](super::memory)): a cgroup the child joins before it execs,
//! or, where none can be made, the group's resident memory looked at every
//! [`LOOK`](super::memory::LOOK), another deadline. What they do to the group (SIGTERM, SIGKILL
//! after the grace period) and the outcome they make is the event loop's
//! own state machine, `Stopping`.

use std::cell::Cell;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use tokio::sync::watch;

use super::capture::{LINGER, QUIET, YOUNG, drain, keep, keep_tail};
use super::memory::{self, Exceeded, Limit};
use super::{Act, Finished, Launch, Output, OutputMode, Stop, Stopping};
use crate::core::Outcome;

/// An attempt for a reaper thread to start.
#[derive(Debug)]
pub struct Start {
    pub launch: Launch,
    pub stop: watch::Receiver<Stop>,
}

/// The run's reaper threads: each one's inbox and the eventfd that wakes it.
#[derive(Debug)]
pub struct Reapers {
    threads: Vec<Thread>,
}

#[derive(Debug)]
struct Thread {
    inbox: Mutex<Inbox>,
    wake: OwnedFd,
}

#[derive(Debug, Default)]
struct Inbox {
    starts: Vec<Start>,
    exit: bool,
}

thread_local! {
    /// The reaper this thread is, if it is one: what it gives itself needs
    /// no wake-up.
    static CURRENT: Cell<Option<usize>> = const { Cell::new(None) };
}

impl Reapers {
    /// `n` reapers, not running until [`serve`]d; none: every attempt is
    /// the event loop's.
    pub fn new(n: usize) -> std::io::Result<Reapers> {
        let threads = (0..n)
            .map(|_| {
                // SAFETY: a plain system call; a valid fd is owned at once.
                let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(Thread {
                    inbox: Mutex::default(),
                    // SAFETY: the kernel just gave us this fd.
                    wake: unsafe { OwnedFd::from_raw_fd(fd) },
                })
            })
            .collect::<std::io::Result<_>>()?;
        Ok(Reapers { threads })
    }

    pub fn count(&self) -> usize {
        self.threads.len()
    }

    /// Whether `launch` is plain and there is a reaper to take it.
    pub fn takes(&self, launch: &Launch) -> bool {
        !self.threads.is_empty()
            && launch.allocation.is_none()
            && launch.ranks.len() == 1
            && !launch.pmi
    }

    /// Hands `start` (a launch it [`takes`](Reapers::takes)) to the reaper
    /// of the logical core its process holds first, and returns which one
    /// that is: one reaper per CPU, so the thread that starts a core's next
    /// child is the one its last child's end woke.
    pub fn start(&self, start: Start) -> usize {
        let core = start.launch.ranks[0].cores.first().copied().unwrap_or(0);
        let k = core as usize % self.threads.len();
        lock(&self.threads[k].inbox).starts.push(start);
        if CURRENT.get() != Some(k) {
            self.poke(k);
        }
        k
    }

    /// Wakes reaper `k` (a stop was sent to one of its attempts).
    pub fn poke(&self, k: usize) {
        let one = 1u64.to_ne_bytes();
        // An eventfd's counter cannot overflow from pokes; a failed write
        // means it is already readable.
        let _ = nix::unistd::write(&self.threads[k].wake, &one);
    }

    /// Every reaper returns (at the run's end, when none has attempts left).
    pub fn exit(&self) {
        for k in 0..self.threads.len() {
            lock(&self.threads[k].inbox).exit = true;
            self.poke(k);
        }
    }
}

/// Takes `m`; a thread that panicked holding it has ended the run, and what
/// it guards is only read on the way out.
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs reaper `me` until [`Reapers::exit`], on CPU `cpu` if given (the
/// CPU its tasks are bound to: a child is then born where it runs, and the
/// thread wakes where its child ended; a child not bound still runs on
/// every CPU slurp has). `report` gets, under the caller's
/// lock, the attempts that ended and, before them in time, the process
/// groups of those that started (for the journal, when `groups`) and the
/// tagged lines read; what it starts for this reaper is started when it
/// returns.
pub fn serve(
    reapers: &Reapers,
    me: usize,
    cpu: Option<usize>,
    groups: bool,
    mut report: impl FnMut(Vec<Finished>, Vec<Output>),
) {
    CURRENT.set(Some(me));
    if let Some(cpu) = cpu {
        super::spawn::pin_thread(cpu);
    }
    let this = &reapers.threads[me];
    let mut running: Vec<Attempt> = Vec::new();
    let mut ended: Vec<Finished> = Vec::new();
    // Process groups started and lines read, in the order they came.
    let mut news: Vec<Output> = Vec::new();
    let mut exit = false;
    loop {
        let inbox = std::mem::take(&mut *lock(&this.inbox));
        exit |= inbox.exit;
        for start in inbox.starts {
            match Attempt::start(start) {
                Ok((attempt, group)) => {
                    if groups {
                        news.push(group);
                    }
                    running.push(attempt);
                }
                Err(finished) => ended.push(*finished),
            }
        }
        let now = Instant::now();
        let mut k = 0;
        while k < running.len() {
            running[k].heed(now);
            if running[k].is_over(now) {
                let mut attempt = running.swap_remove(k);
                attempt.cut_off();
                news.append(&mut attempt.lines);
                ended.push(attempt.finish(now));
            } else {
                news.append(&mut running[k].lines);
                k += 1;
            }
        }
        if !ended.is_empty() || !news.is_empty() {
            report(std::mem::take(&mut ended), std::mem::take(&mut news));
            continue;
        }
        if exit {
            // Only a run that failed leaves attempts running here: they are
            // killed and reaped as they are dropped.
            break;
        }
        wait(this, &mut running);
    }
    CURRENT.set(None);
}

/// Sleeps until one of `running` ends, a pipe of one fills, one of their
/// timers is due, or the reaper is poked.
fn wait(this: &Thread, running: &mut [Attempt]) {
    let mut fds = vec![libc::pollfd {
        fd: this.wake.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    // What each polled descriptor is: the attempt, and its pipe or none.
    let mut what: Vec<(usize, Option<usize>)> = vec![(usize::MAX, None)];
    let mut due: Option<Instant> = None;
    let mut soonest = |at: Instant| due = Some(due.map_or(at, |d| d.min(at)));
    let now = Instant::now();
    for (i, attempt) in running.iter().enumerate() {
        if attempt.status.is_none() {
            match &attempt.pidfd {
                Some(fd) => {
                    fds.push(libc::pollfd {
                        fd: fd.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    });
                    what.push((i, None));
                }
                // A kernel without pidfds: looked at every 5 ms.
                None => soonest(now + Duration::from_millis(5)),
            }
        }
        let reading = attempt.status.is_some() || now >= attempt.started + YOUNG;
        if reading {
            for (j, pipe) in attempt.pipes.iter().enumerate() {
                if let Some(fd) = &pipe.0 {
                    fds.push(libc::pollfd {
                        fd: fd.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    });
                    what.push((i, Some(j)));
                }
            }
        } else if !attempt.pipes.is_empty() {
            soonest(attempt.started + YOUNG);
        }
        if let Some(at) = attempt.due() {
            soonest(at);
        }
    }
    let timeout = due.map(|at| {
        let left = at.saturating_duration_since(now);
        libc::timespec {
            tv_sec: left.as_secs() as libc::time_t,
            tv_nsec: left.subsec_nanos() as libc::c_long,
        }
    });
    // SAFETY: `fds` is a live array of `fds.len()` pollfds; the timeout, if
    // any, lives across the call.
    let n = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            timeout
                .as_ref()
                .map_or(std::ptr::null(), |t| t as *const libc::timespec),
            std::ptr::null(),
        )
    };
    if n <= 0 {
        // Timed out, or interrupted by a signal: the caller looks again.
        return;
    }
    let now = Instant::now();
    for (fd, &(i, pipe)) in fds.iter().zip(&what) {
        if fd.revents == 0 {
            continue;
        }
        if i == usize::MAX {
            let mut count = [0u8; 8];
            let _ = nix::unistd::read(&this.wake, &mut count);
            continue;
        }
        match pipe {
            None => running[i].reap(now),
            Some(j) => running[i].read(j, now),
        }
    }
    for attempt in running.iter_mut().filter(|a| a.pidfd.is_none()) {
        attempt.reap(now);
    }
}

/// One plain attempt, from its start to its end and its pipes' end.
struct Attempt {
    instance: u32,
    task: crate::ir::TaskId,
    attempt: u32,
    pid: Pid,
    pidfd: Option<OwnedFd>,
    /// Read ends, and whether each is stderr; `None` once at end of file.
    pipes: Vec<(Option<OwnedFd>, bool)>,
    /// `group` mode keeps the whole output; `none` the tail of stderr.
    whole: bool,
    /// `tag` mode: each pipe's line so far (by pipe), and the lines cut
    /// from them not yet reported; stderr's tail is kept as well.
    tag: Option<Vec<Vec<u8>>>,
    lines: Vec<Output>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    started: Instant,
    stop: watch::Receiver<Stop>,
    grace: Duration,
    /// When its time limit runs out, if it has one.
    deadline: Option<Instant>,
    /// Its memory limit, if it has one; for a watched one, when its group's
    /// memory is next looked at; and whether it went past it.
    limit: Option<Limit>,
    look: Option<Instant>,
    exceeded: Option<Exceeded>,
    stopping: Stopping,
    /// Its process's end, once reaped.
    status: Option<Outcome>,
    /// When it was reaped, and when a pipe last gave something since.
    ended: Instant,
    heard: Instant,
}

impl Attempt {
    #[allow(clippy::result_large_err)]
    fn start(start: Start) -> Result<(Attempt, Output), Box<Finished>> {
        let Start { launch, stop } = start;
        let started = Instant::now();
        let limit = match super::memory_limit(&launch) {
            Ok(limit) => limit,
            Err(error) => {
                let mut finished = super::unstarted(&launch, error);
                finished.elapsed = started.elapsed();
                return Err(Box::new(finished));
            }
        };
        let cgroup = limit.as_ref().and_then(Limit::procs_fd);
        let spawned = super::spawn_ranks(&launch, None, cgroup, &[]);
        let (mut children, capture) = match spawned {
            Ok(spawned) => spawned,
            Err(error) => {
                let mut finished = super::unstarted(&launch, error);
                finished.elapsed = started.elapsed();
                return Err(Box::new(finished));
            }
        };
        let child = children.pop().expect("one rank, one process");
        let group = Output::Group {
            instance: launch.instance,
            task: launch.task,
            attempt: launch.attempt,
            pgid: child.pid,
        };
        let pipes: Vec<_> = capture
            .into_waiting()
            .into_iter()
            .map(|(fd, stderr)| (Some(fd), stderr))
            .collect();
        let attempt = Attempt {
            instance: launch.instance,
            task: launch.task,
            attempt: launch.attempt,
            pid: Pid::from_raw(child.pid),
            pidfd: child.pidfd.or_else(|| super::spawn::pidfd_open(child.pid)),
            tag: (launch.mode == OutputMode::Tag).then(|| vec![Vec::new(); pipes.len()]),
            lines: Vec::new(),
            pipes,
            whole: launch.mode == OutputMode::Group,
            stdout: Vec::new(),
            stderr: Vec::new(),
            started,
            stop,
            grace: launch.grace,
            deadline: launch.time_limit.map(|limit| started + limit),
            look: limit
                .as_ref()
                .filter(|l| l.watched())
                .map(|_| started + memory::LOOK),
            limit,
            exceeded: None,
            stopping: Stopping::default(),
            status: None,
            ended: started,
            heard: started,
        };
        Ok((attempt, group))
    }

    /// Acts on a stop sent to it, on its time limit, and on a grace period
    /// that has run out.
    fn heed(&mut self, now: Instant) {
        if self.status.is_some() {
            return;
        }
        let stop = match self.stop.has_changed() {
            Ok(false) => None,
            Ok(true) => Some(*self.stop.borrow_and_update()),
            // The driver is gone: nothing is left to report to.
            Err(_) => Some(Stop::Kill),
        };
        if let Some(stop) = stop {
            let act = self.stopping.request(stop, now);
            self.act(act);
        }
        if self.stopping.running() && self.deadline.is_some_and(|at| now >= at) {
            let act = self.stopping.expire(now);
            self.act(act);
        }
        if let (Some(at), Some(limit)) = (self.look, &self.limit)
            && now >= at
        {
            let used = memory::group_rss(self.pid.as_raw());
            if used > limit.bytes {
                self.exceeded = Some(Exceeded { peak: used });
                self.look = None;
                self.signal(Signal::SIGKILL);
            } else {
                self.look = Some(now + memory::LOOK);
            }
        }
        if self
            .stopping
            .kill_at(self.grace)
            .is_some_and(|at| now >= at)
        {
            let act = self.stopping.grace_over();
            self.act(Some(act));
        }
    }

    fn act(&self, act: Option<Act>) {
        match act {
            Some(Act::Terminate) => self.signal(Signal::SIGTERM),
            Some(Act::Kill) => self.signal(Signal::SIGKILL),
            None => {}
        }
    }

    /// When it next needs looking at without a descriptor saying so.
    fn due(&self) -> Option<Instant> {
        match self.status {
            None => {
                let limit = self.deadline.filter(|_| self.stopping.running());
                let kill = self.stopping.kill_at(self.grace);
                limit.into_iter().chain(kill).chain(self.look).min()
            }
            Some(_) => Some((self.heard + QUIET).min(self.ended + LINGER)),
        }
    }

    fn signal(&self, signal: Signal) {
        // The group may be gone already; that is the goal, not an error.
        let _ = nix::sys::signal::killpg(self.pid, signal);
    }

    /// Its process, if it has ended; then whatever is left in its group goes
    /// too, and its pipes give what they hold.
    fn reap(&mut self, now: Instant) {
        if self.status.is_some() {
            return;
        }
        let status = match waitpid(self.pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(nix::errno::Errno::EINTR) => return,
            Ok(status) => super::outcome(status),
            Err(_) => Outcome::Exit(-1),
        };
        self.status = Some(status);
        self.pidfd = None;
        self.signal(Signal::SIGKILL);
        self.ended = now;
        self.heard = now;
        for j in 0..self.pipes.len() {
            self.read(j, now);
        }
    }

    /// What pipe `j` holds now; closed at its end of file.
    fn read(&mut self, j: usize, now: Instant) {
        let (Some(fd), stderr) = &self.pipes[j] else {
            return;
        };
        let stderr = *stderr;
        // Tagged lines are all shown, so all of them are read.
        let (more, open) = drain(fd, self.whole || self.tag.is_some());
        if !more.is_empty() {
            self.heard = now;
        }
        if self.tag.is_some() {
            self.cut(j, &more, !open);
        } else {
            let kept = if stderr {
                &mut self.stderr
            } else {
                &mut self.stdout
            };
            keep(kept, &more, self.whole);
        }
        if !open {
            self.pipes[j].0 = None;
        }
    }

    /// `tag` mode: the whole lines of pipe `j` so far, with `more`, become
    /// lines to report; at its `end` the unfinished last one too.
    fn cut(&mut self, j: usize, more: &[u8], end: bool) {
        let Some(partial) = self.tag.as_mut() else {
            return;
        };
        let stderr = self.pipes[j].1;
        let mut line = std::mem::take(&mut partial[j]);
        let mut rest = more;
        loop {
            let cut = rest.iter().position(|&b| b == b'\n');
            match cut {
                Some(at) => line.extend_from_slice(&rest[..=at]),
                None if end => line.extend_from_slice(rest),
                None => {
                    line.extend_from_slice(rest);
                    partial[j] = line;
                    return;
                }
            }
            if !line.is_empty() {
                if stderr {
                    keep_tail(&mut self.stderr, &line);
                }
                self.lines.push(Output::Line {
                    instance: self.instance,
                    task: self.task,
                    stderr,
                    line: std::mem::take(&mut line),
                });
            }
            match cut {
                Some(at) => rest = &rest[at + 1..],
                None => return,
            }
        }
    }

    /// Its pipes are no longer read (ended, cut off by the quiet or linger
    /// limits): a tagged line left unfinished is reported as it is.
    fn cut_off(&mut self) {
        for j in 0..self.pipes.len() {
            self.cut(j, &[], true);
        }
    }

    /// Whether it has ended and its pipes are done with: at their end of
    /// file, quiet for [`QUIET`], or [`LINGER`] after its end.
    fn is_over(&self, now: Instant) -> bool {
        self.status.is_some()
            && (self.pipes.iter().all(|p| p.0.is_none())
                || now >= self.heard + QUIET
                || now >= self.ended + LINGER)
    }

    fn finish(mut self, now: Instant) -> Finished {
        let status = self.status.unwrap_or(Outcome::Exit(-1));
        // Only an attempt that failed can have been killed for memory.
        if let Some(limit) = self.limit.as_ref().filter(|_| status != Outcome::Success) {
            self.exceeded = self.exceeded.take().or_else(|| limit.exceeded());
        }
        // As the event loop's attempts tell it: a time limit first, then
        // the memory limit.
        let mut error = None;
        let outcome = match (self.stopping.outcome(), &self.exceeded, &self.limit) {
            (Some(outcome), _, _) => outcome,
            (None, Some(exceeded), Some(limit)) => {
                error = Some(limit.killed(exceeded));
                Outcome::OutOfMemory
            }
            _ => status,
        };
        Finished {
            instance: self.instance,
            task: self.task,
            attempt: self.attempt,
            outcome,
            elapsed: now.saturating_duration_since(self.started),
            stdout: std::mem::take(&mut self.stdout),
            stderr_tail: super::tail(&self.stderr),
            stderr: std::mem::take(&mut self.stderr),
            error,
        }
    }
}

impl Drop for Attempt {
    /// An attempt dropped before its end (its reaper is going away): its
    /// group is killed and its process reaped, not left behind.
    fn drop(&mut self) {
        if self.status.is_none() {
            self.signal(Signal::SIGKILL);
            let _ = waitpid(self.pid, None);
        }
    }
}
