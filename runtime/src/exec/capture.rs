//! What a task's ranks write to their stdout and stderr pipes, captured.
//!
//! Most tasks of a big sweep end within milliseconds and write less than a
//! pipe holds (64 KiB). Registering each pipe with the event loop costs a
//! task two `epoll_ctl`s a pipe and a wake-up for each pipe's end of file,
//! on top of the one for the process's end — in a 2,000-hop chain of
//! `/bin/true` about a tenth of the hop. So in `group` and `none` modes a
//! pipe is left alone while its task is young: when the ranks end it is
//! drained with plain reads. Only a task that is still running after
//! one to two [`YOUNG`]s has its pipes read as they fill (a writer that
//! filled the pipe before then waits until then, once). Their age is told
//! by one clock for the whole run ([`Ages`]), not a timer a task: setting a
//! timer earlier than the event loop's next one costs a wake-up of its own.
//! `tag` mode reads from the start: its lines are shown as they come.
//!
//! After the ranks have ended a pipe is read until its end of file; a
//! process that escaped the task's group and still holds the pipe open is
//! given [`QUIET`] of silence, at most [`LINGER`] in all, and then the task
//! ends without it.

use std::cell::RefCell;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;

use super::{Output, OutputMode};
use crate::ir::TaskId;

/// How long a task runs, at least, before its pipes are read as they fill.
pub(super) const YOUNG: Duration = Duration::from_millis(10);
/// How long a stream is still read after its task's processes have ended:
/// until it has been quiet this long...
pub(super) const QUIET: Duration = Duration::from_millis(100);
/// ...and at most this long in all. A process that escaped the task's group
/// (`setsid`) may hold the pipe open for as long as it lives; the task ends
/// when its processes end, not when its pipe does.
pub(super) const LINGER: Duration = Duration::from_secs(1);
/// How much of stderr is kept when only its tail is wanted.
pub(super) const TAIL_BYTES: usize = 2048;

/// The run's clock for young tasks: it ticks every [`YOUNG`] while some
/// attempt listens, and sleeps otherwise.
pub(super) struct Ages {
    ticks: watch::Receiver<u64>,
    seen: u8,
}

thread_local! {
    /// The clock of this thread's event loop, started by its first
    /// attempt; a new one when that loop has gone (its sender with it).
    static CLOCK: RefCell<Option<(watch::Receiver<u64>, Arc<Notify>)>> =
        const { RefCell::new(None) };
}

impl Ages {
    /// Listens from now on; must be called inside the event loop.
    pub(super) fn listen() -> Ages {
        CLOCK.with(|clock| {
            let mut clock = clock.borrow_mut();
            if clock
                .as_ref()
                .is_none_or(|(ticks, _)| ticks.has_changed().is_err())
            {
                let (tx, ticks) = watch::channel(0u64);
                let listener = Arc::new(Notify::new());
                let woken = listener.clone();
                tokio::spawn(async move {
                    loop {
                        // One receiver is the clock's own.
                        if tx.receiver_count() <= 1 {
                            woken.notified().await;
                            continue;
                        }
                        tokio::time::sleep(YOUNG).await;
                        tx.send_modify(|t| *t += 1);
                    }
                });
                *clock = Some((ticks, listener));
            }
            let (ticks, listener) = clock.as_ref().expect("just made");
            listener.notify_one();
            let mut ticks = ticks.clone();
            ticks.mark_unchanged();
            Ages { ticks, seen: 0 }
        })
    }

    /// Resolves once the listener has seen two ticks (it is then at least
    /// one [`YOUNG`] old), or at once if the clock has stopped; never for
    /// `None`. The caller then drops the listener, so that a clock no one
    /// needs goes to sleep.
    pub(super) async fn grown_up(ages: &mut Option<Ages>) {
        let Some(ages) = ages else {
            return std::future::pending().await;
        };
        while ages.seen < 2 {
            if ages.ticks.changed().await.is_err() {
                return;
            }
            ages.seen += 1;
        }
    }
}

/// One attempt's pipes, in the order their ranks started.
pub(super) struct Capture {
    mode: OutputMode,
    who: (u32, TaskId),
    /// Where the event loop's readers send tagged lines; `None` when the
    /// caller reads every pipe itself (a reaper thread, which has no event
    /// loop), tagged ones included.
    lines: Option<mpsc::UnboundedSender<Output>>,
    ended_tx: watch::Sender<bool>,
    ended: watch::Receiver<bool>,
    pipes: Vec<Pipe>,
}

struct Pipe {
    stderr: bool,
    state: State,
}

enum State {
    /// Not read yet: nothing has asked the event loop to watch it.
    Waiting(OwnedFd),
    Reading(JoinHandle<Vec<u8>>),
}

impl Capture {
    pub(super) fn new(
        mode: OutputMode,
        who: (u32, TaskId),
        lines: Option<mpsc::UnboundedSender<Output>>,
    ) -> Capture {
        let (ended_tx, ended) = watch::channel(false);
        Capture {
            mode,
            who,
            lines,
            ended_tx,
            ended,
            pipes: Vec::new(),
        }
    }

    /// Takes the read end of a rank's stdout or stderr pipe.
    pub(super) fn add(&mut self, fd: OwnedFd, stderr: bool) -> Result<(), String> {
        // It is the read end of a pipe slurp made: set non-blocking with
        // one call, not checked again.
        nix::fcntl::fcntl(
            &fd,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )
        .map_err(|e| format!("cannot read a pipe: {e}"))?;
        let state = if self.mode == OutputMode::Tag && self.lines.is_some() {
            State::Reading(self.reader(fd, stderr, Linger::new(self.ended.clone()))?)
        } else {
            State::Waiting(fd)
        };
        self.pipes.push(Pipe { stderr, state });
        Ok(())
    }

    /// The pipes, none of them read yet, with whether each is stderr: for a
    /// reader that is not the event loop (made without `lines`).
    pub(super) fn into_waiting(self) -> Vec<(OwnedFd, bool)> {
        self.pipes
            .into_iter()
            .filter_map(|pipe| match pipe.state {
                State::Waiting(fd) => Some((fd, pipe.stderr)),
                State::Reading(_) => None,
            })
            .collect()
    }

    /// Whether some pipe is not read yet.
    pub(super) fn waiting(&self) -> bool {
        self.pipes
            .iter()
            .any(|p| matches!(p.state, State::Waiting(_)))
    }

    /// From now on every pipe is read as it fills.
    pub(super) fn read_as_it_comes(&mut self) -> Result<(), String> {
        for mut pipe in std::mem::take(&mut self.pipes) {
            if let State::Waiting(fd) = pipe.state {
                let linger = Linger::new(self.ended.clone());
                pipe.state = State::Reading(self.reader(fd, pipe.stderr, linger)?);
            }
            self.pipes.push(pipe);
        }
        Ok(())
    }

    fn reader(
        &self,
        fd: OwnedFd,
        stderr: bool,
        linger: Linger,
    ) -> Result<JoinHandle<Vec<u8>>, String> {
        // Only the event loop reads with tokio, and it gives the channel.
        let lines = self
            .lines
            .clone()
            .ok_or("a pipe read without an event loop")?;
        let receiver = tokio::net::unix::pipe::Receiver::from_owned_fd_unchecked(fd)
            .map_err(|e| format!("cannot read a pipe: {e}"))?;
        Ok(read_stream(
            receiver, self.mode, self.who, stderr, lines, linger,
        ))
    }

    /// Once the ranks have ended: what they wrote, stdout and stderr.
    pub(super) async fn finish(mut self) -> (Vec<u8>, Vec<u8>) {
        let _ = self.ended_tx.send(true);
        let whole = self.mode == OutputMode::Group;
        // Young pipes first, drained as they are; one that something outside
        // the ranks still holds is read on, all of them together, within one
        // linger (as pipes read from the start linger together).
        let mut parts = Vec::with_capacity(self.pipes.len());
        for pipe in std::mem::take(&mut self.pipes) {
            parts.push(match pipe.state {
                State::Reading(reader) => (pipe.stderr, Vec::new(), Some(reader)),
                State::Waiting(fd) => match drain(&fd, whole) {
                    (kept, true) => {
                        let more = self.reader(fd, pipe.stderr, Linger::after_end()).ok();
                        (pipe.stderr, kept, more)
                    }
                    (kept, false) => (pipe.stderr, kept, None),
                },
            });
        }
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        for (is_err, mut kept, reader) in parts {
            if let Some(reader) = reader {
                keep(&mut kept, &reader.await.unwrap_or_default(), whole);
            }
            if is_err {
                stderr.extend(kept);
            } else {
                stdout.extend(kept);
            }
        }
        (stdout, stderr)
    }
}

/// Reads a non-blocking pipe until its end of file or until it is empty
/// but still open (the bool: whether it is).
pub(super) fn drain(fd: &OwnedFd, whole: bool) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match nix::unistd::read(fd, &mut buf) {
            Ok(0) => return (kept, false),
            Ok(n) => keep(&mut kept, &buf[..n], whole),
            Err(nix::errno::Errno::EINTR) => {}
            Err(nix::errno::Errno::EAGAIN) => return (kept, true),
            Err(_) => return (kept, false),
        }
    }
}

pub(super) fn keep(kept: &mut Vec<u8>, more: &[u8], whole: bool) {
    if whole {
        kept.extend_from_slice(more);
    } else {
        keep_tail(kept, more);
    }
}

/// One stream's reads, raced against the end of the task's processes.
struct Linger {
    ended: watch::Receiver<bool>,
    cutoff: Option<tokio::time::Instant>,
}

impl Linger {
    fn new(ended: watch::Receiver<bool>) -> Linger {
        Linger {
            ended,
            cutoff: None,
        }
    }

    /// For a stream first read after the processes ended.
    fn after_end() -> Linger {
        Linger {
            ended: watch::channel(true).1,
            cutoff: Some(tokio::time::Instant::now() + LINGER),
        }
    }

    /// `read`'s result, or `None` once the task has ended and the stream
    /// stays quiet for [`QUIET`] (or [`LINGER`] has passed since the end).
    /// `read` must be cancel-safe: tokio's reads are.
    async fn read<T>(&mut self, read: impl Future<Output = T>) -> Option<T> {
        tokio::pin!(read);
        loop {
            if let Some(cutoff) = self.cutoff {
                let at = (tokio::time::Instant::now() + QUIET).min(cutoff);
                return tokio::time::timeout_at(at, read).await.ok();
            }
            tokio::select! {
                out = &mut read => return Some(out),
                changed = self.ended.changed() => {
                    if changed.is_err() || *self.ended.borrow() {
                        self.cutoff = Some(tokio::time::Instant::now() + LINGER);
                    }
                }
            }
        }
    }
}

/// Reads one stream: kept whole (group), or sent line by line (tag), or
/// only its tail kept (none). Returns what is kept.
fn read_stream<R: AsyncRead + Unpin + Send + 'static>(
    stream: R,
    mode: OutputMode,
    (instance, task): (u32, TaskId),
    stderr: bool,
    lines: mpsc::UnboundedSender<Output>,
    mut linger: Linger,
) -> JoinHandle<Vec<u8>> {
    tokio::spawn(async move {
        let mut kept = Vec::new();
        match mode {
            OutputMode::Tag => {
                let mut reader = BufReader::new(stream);
                let mut line = Vec::new();
                loop {
                    line.clear();
                    // A cut-off read leaves its partial line in `line`.
                    let read = linger.read(reader.read_until(b'\n', &mut line)).await;
                    let last = !matches!(read, Some(Ok(n)) if n > 0);
                    if !line.is_empty() {
                        if stderr {
                            keep_tail(&mut kept, &line);
                        }
                        let _ = lines.send(Output::Line {
                            instance,
                            task,
                            stderr,
                            line: line.clone(),
                        });
                    }
                    if last {
                        break;
                    }
                }
            }
            // (`ungroup` makes no pipes; read plainly if one came.)
            OutputMode::Group | OutputMode::None | OutputMode::Files | OutputMode::Ungroup => {
                let whole = mode == OutputMode::Group;
                let mut stream = stream;
                let mut buf = [0u8; 8192];
                while let Some(Ok(n)) = linger.read(stream.read(&mut buf)).await {
                    if n == 0 {
                        break;
                    }
                    keep(&mut kept, &buf[..n], whole);
                }
            }
        }
        kept
    })
}

pub(super) fn keep_tail(kept: &mut Vec<u8>, more: &[u8]) {
    kept.extend_from_slice(more);
    if kept.len() > 2 * TAIL_BYTES {
        kept.drain(..kept.len() - TAIL_BYTES);
    }
}
