//! The process table, read from `/proc`: the one reader behind every scan
//! slurp makes — its own children ([`super::strays`]), the members of a
//! task's process group (its resident memory, [`super::memory`]), what a
//! dead run left.
//!
//! `/proc/PID/stat`'s second field, the command, may hold spaces and
//! parentheses, so fields are counted after its last `)`.

use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nix::unistd::Pid;

/// One process, as its stat line says.
#[derive(Debug, Clone, Copy)]
pub struct Process {
    pub pid: Pid,
    pub ppid: i32,
    pub pgrp: i32,
    /// Exited, waiting for its parent's wait.
    pub zombie: bool,
    /// Clock ticks after boot.
    start: u64,
}

impl Process {
    /// When it started.
    pub fn started(&self) -> SystemTime {
        static CLOCK: OnceLock<(u64, u64)> = OnceLock::new();
        let (boot, ticks) = *CLOCK.get_or_init(|| {
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
            (boot, ticks)
        });
        UNIX_EPOCH + Duration::from_millis(boot * 1000 + self.start * 1000 / ticks)
    }
}

/// Every process now.
pub fn all() -> Vec<Process> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        // After the command: state (field 3), ppid, pgrp, … starttime (22).
        let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
        Some(Process {
            pid: Pid::from_raw(pid),
            zombie: *fields.first()? == "Z",
            ppid: fields.get(1)?.parse().ok()?,
            pgrp: fields.get(2)?.parse().ok()?,
            start: fields.get(19)?.parse().ok()?,
        })
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_in_the_table_as_it_is() {
        let me = all()
            .into_iter()
            .find(|p| p.pid == nix::unistd::getpid())
            .expect("this process");
        assert_eq!(me.ppid, nix::unistd::getppid().as_raw());
        assert_eq!(me.pgrp, nix::unistd::getpgrp().as_raw());
        assert!(!me.zombie);
        let age = SystemTime::now()
            .duration_since(me.started())
            .unwrap_or_default();
        assert!(age < Duration::from_secs(24 * 3600), "{age:?}");
    }
}
