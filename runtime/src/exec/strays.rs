//! Processes that outlive their task: a rank's child that left the task's
//! process group (`setsid`, a daemon's double fork) survives the group's
//! SIGKILL. slurp makes itself their reaper (`PR_SET_CHILD_SUBREAPER`): once
//! the rank that started one dies, the kernel hands it to slurp instead of
//! to init, so slurp can still find it — as one of its own children that is
//! no task's rank — and end it when the run ends (SIGTERM, then SIGKILL
//! after a short grace), leaving nothing behind.
//!
//! Only the slurp process that runs a workflow does this (the CLI calls
//! [`adopt_orphans`] before a run and [`end_strays`] after it): every
//! child it has left then is such a process.

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

/// Orphans of this process's descendants become its children.
pub fn adopt_orphans() -> bool {
    nix::sys::prctl::set_child_subreaper(true).is_ok()
}

/// This process's children now (zombies too: they are reaped).
fn children() -> Vec<Pid> {
    let me = std::process::id() as i32;
    super::procs::all()
        .into_iter()
        .filter(|p| p.ppid == me)
        .map(|p| p.pid)
        .collect()
}

/// Ends every child still here (each run's tasks have all been reaped by
/// now): SIGTERM, up to `grace` for them to go, then SIGKILL; reaps them.
/// Their own orphans come to this process in turn and go the same way.
/// Returns how many there were.
pub fn end_strays(grace: Duration) -> usize {
    // No child at all (the common case): nothing to look for in /proc.
    reap();
    if waitpid(None, Some(WaitPidFlag::WNOHANG)) == Err(nix::errno::Errno::ECHILD) {
        return 0;
    }
    let mut seen = std::collections::HashSet::new();
    let deadline = Instant::now() + grace;
    // Bounded (10 s): a fork bomb in a stray must not keep slurp for good.
    for _ in 0..1000 {
        reap();
        let left = children();
        if left.is_empty() {
            break;
        }
        let late = Instant::now() >= deadline;
        for pid in left {
            if seen.insert(pid) {
                let _ = kill(pid, Signal::SIGTERM);
            } else if late {
                let _ = kill(pid, Signal::SIGKILL);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    reap();
    seen.len()
}

/// Reaps every exited child without waiting.
fn reap() {
    while let Ok(status) = waitpid(None, Some(WaitPidFlag::WNOHANG)) {
        if status == nix::sys::wait::WaitStatus::StillAlive {
            break;
        }
    }
}

/// What a dead run left (`slurp cancel` of a run whose slurp was killed):
/// every process in one of `groups` (process group ids its journal
/// recorded for attempts that never ended) that started before `before`
/// (the journal's last write, so a group id reused since is left alone)
/// gets SIGTERM, then SIGKILL after `grace`. Returns how many there were.
pub fn end_left_groups(groups: &[i32], before: std::time::SystemTime, grace: Duration) -> usize {
    let found = |signal: Option<Signal>| -> usize {
        let mut n = 0;
        for p in super::procs::all() {
            if !p.zombie && groups.contains(&p.pgrp) && p.started() <= before {
                n += 1;
                if let Some(signal) = signal {
                    let _ = kill(p.pid, signal);
                }
            }
        }
        n
    };
    let count = found(Some(Signal::SIGTERM));
    let deadline = Instant::now() + grace;
    while found(None) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    found(Some(Signal::SIGKILL));
    count
}
