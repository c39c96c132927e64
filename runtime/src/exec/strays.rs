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

/// This process's children now, from `/proc` (the fourth field of
/// `/proc/PID/stat` is the parent; the second, the command, may hold
/// spaces and parentheses, so fields are counted after its last `)`).
fn children() -> Vec<Pid> {
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        let after = &stat[stat.rfind(')')? + 1..];
        let ppid = after.split_whitespace().nth(1)?;
        (ppid == me).then_some(Pid::from_raw(pid))
    })
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
        for (pid, pgrp, started) in processes() {
            if groups.contains(&pgrp) && started <= before {
                n += 1;
                if let Some(signal) = signal {
                    let _ = kill(pid, signal);
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

/// Every process: its pid, process group and when it started.
fn processes() -> Vec<(Pid, i32, std::time::SystemTime)> {
    let boot = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("btime ")?.trim().parse::<u64>().ok())
        })
        .unwrap_or(0);
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100)
        .max(1) as u64;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        // After the command's `)`: state (field 3) … pgrp is field 5,
        // starttime field 22.
        let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
        // A zombie is already gone; only its parent's wait is left.
        if fields.first() == Some(&"Z") {
            return None;
        }
        let pgrp: i32 = fields.get(2)?.parse().ok()?;
        let start: u64 = fields.get(19)?.parse().ok()?;
        let started =
            std::time::UNIX_EPOCH + Duration::from_millis(boot * 1000 + start * 1000 / ticks);
        Some((Pid::from_raw(pid), pgrp, started))
    })
    .collect()
}
