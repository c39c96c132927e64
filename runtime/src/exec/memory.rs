//! Memory limits that hold: a task's `mem=` as a hard limit on what the
//! task and everything it starts use.
//!
//! Three mechanisms, the first that works here ([`Mechanism::detect`]):
//!
//! - **cgroup v2**: each attempt runs in a cgroup with `memory.max` (and
//!   `memory.oom.group`: the whole task is killed), below a `slurp-PID`
//!   cgroup made in slurp's own, where the memory controller can be given
//!   to children: slurp at the root of its cgroup namespace (a container,
//!   a machine booted with v2 only), or alone in a delegated cgroup, which
//!   slurp then leaves for a leaf of its own (`v2_base` says why). The
//!   kernel stops the task at the limit; `memory.events` counts its kills
//!   for memory. `scripts/cgroup-v2-vm.sh` boots a v2-only kernel to test
//!   this where the machine's memory controller is v1's.
//! - **cgroup v1**: the same with the v1 memory controller's
//!   `memory.limit_in_bytes` (and the swap limit when there is one) and
//!   `memory.oom_control`.
//!
//!   Cgroups are pooled: one per first core and limit, reused by the
//!   attempts placed there one after another (a core holds one attempt at a
//!   time), so a short task pays one write to `cgroup.procs`, not a mkdir
//!   and rmdir.
//! - **watch** (neither writable: an unprivileged user without
//!   delegation): the resident memory of the task's process group, read
//!   from `/proc` four times a second; over the limit, the group is
//!   killed. Coarser — a fast allocator can overshoot for a quarter second,
//!   and memory a process moved out of the group is not seen — but it still
//!   stops a runaway task before it takes the machine.
//!
//! `SLURP_MEMORY=watch` (or `cgroup`, which fails when no cgroup can be
//! made) forces a mechanism; the tests use it to check both.
//!
//! A child joins its cgroup itself before it execs (it writes `0` to the
//! cgroup's `cgroup.procs`, opened by the parent), so nothing it does runs
//! outside the limit.

use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// How often a watched limit is looked at; the first look is this long
/// after the start: most tasks are gone by then.
pub const LOOK: std::time::Duration = std::time::Duration::from_millis(250);

/// How limits are enforced in this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mechanism {
    CgroupV2 { base: PathBuf },
    CgroupV1 { base: PathBuf },
    Watch,
}

impl Mechanism {
    /// The mechanism of this process, found once (and its `slurp-PID`
    /// cgroup made then).
    pub fn get() -> &'static Mechanism {
        FOUND.get_or_init(Mechanism::detect)
    }

    fn detect() -> Mechanism {
        let wanted = std::env::var("SLURP_MEMORY").unwrap_or_default();
        if wanted == "watch" {
            return Mechanism::Watch;
        }
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let membership = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let name = format!("slurp-{}", std::process::id());
        if let Some(own) = v2_dir(&mountinfo, &membership)
            && let Some(base) = v2_base(&own, &name)
        {
            return Mechanism::CgroupV2 { base };
        }
        if let Some(own) = v1_dir(&mountinfo, &membership) {
            let base = own.join(&name);
            if fs::create_dir(&base).is_ok() {
                if base.join("memory.limit_in_bytes").exists() {
                    return Mechanism::CgroupV1 { base };
                }
                let _ = fs::remove_dir(&base);
            }
        }
        Mechanism::Watch
    }

    /// In words, for `slurp resources` and `slurp check`.
    pub fn describe(&self) -> String {
        match self {
            Mechanism::CgroupV2 { base } => {
                format!("cgroup v2 memory.max per task (below {})", base.display())
            }
            Mechanism::CgroupV1 { base } => format!(
                "cgroup v1 memory.limit_in_bytes per task (below {})",
                base.display()
            ),
            Mechanism::Watch => format!(
                "resident memory of each task's process group, watched 4 times a second ({})",
                if std::env::var("SLURP_MEMORY").is_ok_and(|v| v == "watch") {
                    "SLURP_MEMORY=watch"
                } else {
                    // Where a v2 hierarchy is mounted, the usual cause is
                    // a cgroup slurp shares (a login session's): a
                    // delegated scope of its own is the cure.
                    if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
                        "no cgroup can be made here; `systemd-run --user --scope -p Delegate=yes slurp …` gives slurp one"
                    } else {
                        "no cgroup can be made here"
                    }
                }
            ),
        }
    }

    /// The short name the journal and messages use.
    pub fn name(&self) -> &'static str {
        match self {
            Mechanism::CgroupV2 { .. } => "cgroup v2 memory.max",
            Mechanism::CgroupV1 { .. } => "cgroup v1 memory.limit_in_bytes",
            Mechanism::Watch => "slurp's watch of resident memory",
        }
    }

    /// At the end of a run: removes the pooled cgroups and the `slurp-PID`
    /// one that holds them.
    pub fn clean_up() {
        POOL.lock().unwrap_or_else(|p| p.into_inner()).clear();
        if let Some(Mechanism::CgroupV1 { base } | Mechanism::CgroupV2 { base }) = FOUND.get() {
            for entry in fs::read_dir(base).into_iter().flatten().flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    let _ = fs::remove_dir(entry.path());
                }
            }
            let _ = fs::remove_dir(base);
        }
        if let Some(borrowed) = BORROWED.lock().unwrap_or_else(|p| p.into_inner()).take() {
            give_back(borrowed);
        }
    }
}

static FOUND: OnceLock<Mechanism> = OnceLock::new();

/// cgroup v2: the mount point and this process's cgroup in it.
fn v2_dir(mountinfo: &str, membership: &str) -> Option<PathBuf> {
    let mount = mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        (right.split_whitespace().next()? == "cgroup2").then(|| left.split_whitespace().nth(4))?
    })?;
    let own = membership.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some(Path::new(mount).join(own.trim_start_matches('/')))
}

/// Whether the controller list `text` (a `cgroup.controllers` or
/// `cgroup.subtree_control`) has the memory controller.
fn has_memory(text: &str) -> bool {
    text.split_whitespace().any(|c| c == "memory")
}

/// Whether a cgroup's file names the memory controller.
fn lists_memory(file: &Path) -> bool {
    fs::read_to_string(file).is_ok_and(|t| has_memory(&t))
}

/// What slurp changed in its own cgroup to be able to hand the memory
/// controller down, so that the end of the run can put it back.
#[derive(Debug)]
struct Borrowed {
    own: PathBuf,
    /// slurp enabled memory in its own cgroup's `cgroup.subtree_control`.
    enabled: bool,
    /// slurp moved itself into this leaf of its own cgroup to do so.
    leaf: Option<PathBuf>,
}

static BORROWED: std::sync::Mutex<Option<Borrowed>> = std::sync::Mutex::new(None);

/// cgroup v2: makes `own/name`, with the memory controller for its
/// children, and returns it; `None` when this process cannot.
///
/// A cgroup's children get a controller only when the cgroup enables it
/// in its `cgroup.subtree_control`, and the kernel refuses that to a cgroup
/// (other than the root) that holds processes. So: where slurp's own
/// cgroup does not enable memory yet, slurp enables it — at the root of a
/// cgroup namespace (a container, a machine booted with v2 only) that is
/// allowed at once; in a delegated cgroup that holds slurp alone (a
/// `systemd-run --scope -p Delegate=yes` scope, a batch job's own cgroup)
/// slurp first moves itself into a leaf `name-self`. Where the cgroup also
/// holds other processes (a login shell's session scope), slurp cannot and
/// puts back what it changed.
fn v2_base(own: &Path, name: &str) -> Option<PathBuf> {
    if !lists_memory(&own.join("cgroup.controllers")) {
        return None;
    }
    let mut borrowed = Borrowed {
        own: own.to_owned(),
        enabled: false,
        leaf: None,
    };
    let subtree = own.join("cgroup.subtree_control");
    if !lists_memory(&subtree) {
        if fs::write(&subtree, "+memory").is_err() {
            let leaf = own.join(format!("{name}-self"));
            fs::create_dir(&leaf).ok()?;
            borrowed.leaf = Some(leaf.clone());
            let moved = fs::write(leaf.join("cgroup.procs"), std::process::id().to_string());
            if moved.is_err() || fs::write(&subtree, "+memory").is_err() {
                give_back(borrowed);
                return None;
            }
        }
        borrowed.enabled = true;
    }
    let base = own.join(name);
    let made = fs::create_dir(&base).is_ok()
        && lists_memory(&base.join("cgroup.controllers"))
        && fs::write(base.join("cgroup.subtree_control"), "+memory").is_ok();
    if !made {
        let _ = fs::remove_dir(&base);
        give_back(borrowed);
        return None;
    }
    *BORROWED.lock().unwrap_or_else(|p| p.into_inner()) = Some(borrowed);
    Some(base)
}

/// Puts back what [`v2_base`] changed in slurp's own cgroup (once its
/// children are gone): memory disabled for the children again, slurp back
/// in its cgroup, the leaf removed. Each step may be refused (another
/// process made a cgroup there meanwhile); what is refused stays.
fn give_back(borrowed: Borrowed) {
    if borrowed.enabled {
        let _ = fs::write(borrowed.own.join("cgroup.subtree_control"), "-memory");
    }
    if let Some(leaf) = borrowed.leaf {
        let _ = fs::write(
            borrowed.own.join("cgroup.procs"),
            std::process::id().to_string(),
        );
        let _ = fs::remove_dir(leaf);
    }
}

/// cgroup v1: the memory controller's mount point and this process's
/// cgroup in it.
fn v1_dir(mountinfo: &str, membership: &str) -> Option<PathBuf> {
    let mount = mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mut fields = right.split_whitespace();
        let is_memory = fields.next()? == "cgroup" && {
            let options = fields.nth(1)?;
            options.split(',').any(|o| o == "memory")
        };
        is_memory.then(|| left.split_whitespace().nth(4))?
    })?;
    let own = membership.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == "memory")
            .then_some(path)
    })?;
    Some(Path::new(mount).join(own.trim_start_matches('/')))
}

/// One attempt's limit.
#[derive(Debug)]
pub struct Limit {
    pub bytes: u64,
    /// The pooled cgroup it runs in, by its key; `None` when watched.
    cgroup: Option<(Key, i32)>,
}

/// Why an attempt was stopped for memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exceeded {
    /// The most it used, as the mechanism saw it (0 when unknown).
    pub peak: u64,
}

/// A pooled cgroup: for the tasks placed on one first core with one
/// limit, one at a time (a core holds one task at a time). Made once and
/// reused — a cgroup's mkdir and rmdir cost ~120 µs, which on 10,000 short
/// tasks is more than the tasks — and removed by [`Mechanism::clean_up`].
type Key = (u32, u64);

#[derive(Debug)]
struct Pooled {
    dir: PathBuf,
    procs: OwnedFd,
    /// The kernel's count of kills for memory in it, when last read.
    kills: u64,
    busy: bool,
}

static POOL: std::sync::Mutex<Vec<(Key, Pooled)>> = std::sync::Mutex::new(Vec::new());

impl Limit {
    /// A limit of `bytes` for an attempt whose first core is `core` (so
    /// no other running attempt has the same), by this process's
    /// mechanism.
    pub fn new(core: u32, bytes: u64) -> Result<Limit, String> {
        let (base, v2) = match Mechanism::get() {
            Mechanism::Watch if std::env::var("SLURP_MEMORY").is_ok_and(|v| v == "cgroup") => {
                return Err("SLURP_MEMORY=cgroup, but no memory cgroup can be made here".to_owned());
            }
            Mechanism::Watch => {
                return Ok(Limit {
                    bytes,
                    cgroup: None,
                });
            }
            Mechanism::CgroupV2 { base } => (base, true),
            Mechanism::CgroupV1 { base } => (base, false),
        };
        let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
        let key = (core, bytes);
        if let Some((_, pooled)) = pool.iter_mut().find(|(k, p)| *k == key && !p.busy) {
            pooled.busy = true;
            let fd = pooled.procs.as_raw_fd();
            return Ok(Limit {
                bytes,
                cgroup: Some((key, fd)),
            });
        }
        let taken = pool.iter().filter(|(k, _)| *k == key).count();
        let dir = base.join(format!("c{core}-{bytes}-{taken}"));
        let fail = |what: &str, e: std::io::Error| {
            format!(
                "cannot set the memory limit ({what} in {}): {e}",
                dir.display()
            )
        };
        // A stale one (a pid reused after a crash) is replaced.
        let _ = fs::remove_dir(&dir);
        fs::create_dir(&dir).map_err(|e| fail("mkdir", e))?;
        let limit = bytes.to_string();
        if v2 {
            fs::write(dir.join("memory.max"), &limit).map_err(|e| fail("memory.max", e))?;
            // Swap would let a task go on past its limit, slowly.
            let _ = fs::write(dir.join("memory.swap.max"), "0");
            // At the limit the kernel kills the whole task, not only its
            // largest process (which would leave the rest to go on).
            let _ = fs::write(dir.join("memory.oom.group"), "1");
        } else {
            fs::write(dir.join("memory.limit_in_bytes"), &limit)
                .map_err(|e| fail("memory.limit_in_bytes", e))?;
            let _ = fs::write(dir.join("memory.memsw.limit_in_bytes"), &limit);
        }
        let procs = fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
            .map_err(|e| fail("cgroup.procs", e))?;
        let procs = OwnedFd::from(procs);
        let fd = procs.as_raw_fd();
        let kills = kills_in(&dir, v2).unwrap_or(0);
        pool.push((
            key,
            Pooled {
                dir,
                procs,
                kills,
                busy: true,
            },
        ));
        Ok(Limit {
            bytes,
            cgroup: Some((key, fd)),
        })
    }

    /// The descriptor a child writes `0` to, to join the limit; `None` when
    /// the limit is watched.
    pub fn procs_fd(&self) -> Option<i32> {
        self.cgroup.map(|(_, fd)| fd)
    }

    /// Whether slurp must watch the group itself.
    pub fn watched(&self) -> bool {
        self.cgroup.is_none()
    }

    /// What an attempt stopped at this limit is told, for its summary.
    pub fn killed(&self, exceeded: &Exceeded) -> String {
        let limit = crate::format_bytes(self.bytes);
        let how = Mechanism::get().name();
        if self.watched() {
            format!(
                "out of memory: used {}, over its limit of {limit} ({how}); killed",
                crate::format_bytes(exceeded.peak)
            )
        } else {
            let peak = match exceeded.peak {
                0 => String::new(),
                peak => format!(", peak {}", crate::format_bytes(peak)),
            };
            format!("out of memory: killed by the kernel at its limit of {limit}{peak} ({how})")
        }
    }

    /// After an attempt that did not succeed: whether the kernel killed in
    /// it for memory (its cgroup's count of such kills went up).
    pub fn exceeded(&self) -> Option<Exceeded> {
        let ((key, fd), v2) = (
            self.cgroup?,
            matches!(Mechanism::get(), Mechanism::CgroupV2 { .. }),
        );
        let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
        let (_, pooled) = pool
            .iter_mut()
            .find(|(k, p)| *k == key && p.procs.as_raw_fd() == fd)?;
        let now = kills_in(&pooled.dir, v2)?;
        let before = std::mem::replace(&mut pooled.kills, now);
        // The cgroup's high-water mark: it reached the limit, or the
        // kernel would not have killed.
        let peak = fs::read_to_string(pooled.dir.join(if v2 {
            "memory.peak"
        } else {
            "memory.max_usage_in_bytes"
        }))
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .unwrap_or(0);
        (now > before).then_some(Exceeded { peak })
    }
}

/// The kernel's count of kills for memory in the cgroup `dir`.
fn kills_in(dir: &Path, v2: bool) -> Option<u64> {
    let file = if v2 {
        "memory.events"
    } else {
        "memory.oom_control"
    };
    fs::read_to_string(dir.join(file))
        .ok()?
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == "oom_kill").then(|| v.trim().parse::<u64>().ok())?
        })
}

impl Drop for Limit {
    fn drop(&mut self) {
        if let Some((key, fd)) = self.cgroup {
            let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((_, pooled)) = pool
                .iter_mut()
                .find(|(k, p)| *k == key && p.procs.as_raw_fd() == fd)
            {
                pooled.busy = false;
            }
        }
    }
}

/// The resident memory of every process in process group `pgid`, in bytes.
pub fn group_rss(pgid: i32) -> u64 {
    let page = page_size();
    super::procs::all()
        .into_iter()
        .filter(|p| p.pgrp == pgid && !p.zombie)
        .map(|p| {
            fs::read_to_string(format!("/proc/{}/statm", p.pid))
                .ok()
                .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
                .unwrap_or(0)
                * page
        })
        .sum()
}

fn page_size() -> u64 {
    static PAGE: OnceLock<u64> = OnceLock::new();
    *PAGE.get_or_init(|| {
        nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
            .ok()
            .flatten()
            .map_or(4096, |p| p as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup_of_this_process_is_found_in_either_version() {
        let mountinfo = "\
30 25 0:26 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory
31 25 0:27 / /sys/fs/cgroup/unified rw,relatime shared:10 - cgroup2 cgroup2 rw
";
        let membership = "4:memory:/job/42\n0::/user.slice/x.scope\n";
        assert_eq!(
            v1_dir(mountinfo, membership),
            Some(PathBuf::from("/sys/fs/cgroup/memory/job/42"))
        );
        assert_eq!(
            v2_dir(mountinfo, membership),
            Some(PathBuf::from("/sys/fs/cgroup/unified/user.slice/x.scope"))
        );
        assert_eq!(v1_dir("", membership), None);
    }

    #[test]
    fn a_groups_resident_memory_counts_its_processes() {
        // This test process leads no group of its own; its own group holds
        // at least it, so the total is at least its resident size.
        let own = nix::unistd::getpgrp().as_raw();
        assert!(group_rss(own) > 1 << 20);
        assert_eq!(group_rss(i32::MAX), 0);
    }
}
