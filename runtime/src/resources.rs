//! What an instance owns, and whether a request can ever fit in it.
//!
//! The model is Flux's graph view kept small: identical nodes, each with
//! cores, GPUs and memory. [`Capacity::detect`] reads what this process may
//! use — its CPU affinity and cgroup CPU quota (through the standard
//! library), visible NVIDIA GPUs, and memory bounded by the cgroup limit —
//! so a slurp started inside someone else's slice sees only that slice.

use std::fmt;
use std::path::Path;

use serde::Serialize;

use crate::ir::Request;

/// The resources of one instance: `nodes` identical nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Capacity {
    pub nodes: u32,
    pub cores_per_node: u32,
    pub gpus_per_node: u32,
    /// Bytes per node.
    pub mem_per_node: u64,
}

/// The resource a request asks too much of, with both amounts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shortfall {
    pub resource: &'static str,
    pub asked: String,
    pub have: String,
}

impl fmt::Display for Shortfall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "asks for {} but the instance has {}",
            self.asked, self.have
        )
    }
}

/// The physical resources behind an instance's logical ids: logical core
/// `i` of node 0 is CPU `cpus[i]`, logical GPU `i` is device `gpus[i]`.
/// Logical ids past these lists (an emulated bigger instance) are scheduled
/// but not bound.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Machine {
    pub cpus: Vec<usize>,
    pub gpus: Vec<String>,
    pub mem: u64,
}

impl Machine {
    /// What this process may use: the CPUs of its affinity mask (cut to the
    /// cgroup's CPU quota), the NVIDIA GPUs it can see (restricted by an
    /// inherited `CUDA_VISIBLE_DEVICES`), memory bounded by the cgroup.
    pub fn detect() -> Machine {
        let mut cpus = affinity();
        if let Some(quota) = cgroup_cpu_quota()
            && quota < cpus.len()
        {
            cpus.truncate(quota.max(1));
        }
        Machine {
            cpus,
            gpus: detect_gpus(),
            mem: detect_memory(),
        }
    }

    /// One node of everything detected.
    pub fn capacity(&self) -> Capacity {
        Capacity {
            nodes: 1,
            cores_per_node: self.cpus.len() as u32,
            gpus_per_node: self.gpus.len() as u32,
            mem_per_node: self.mem,
        }
    }
}

/// The CPUs of this process's affinity mask.
fn affinity() -> Vec<usize> {
    use nix::sched::{CpuSet, sched_getaffinity};
    use nix::unistd::Pid;
    match sched_getaffinity(Pid::from_raw(0)) {
        Ok(set) => (0..CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect(),
        Err(_) => (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect(),
    }
}

/// Whole CPUs the cgroup lets this process use (`cpu.max`, v2; or
/// `cfs_quota_us`/`cfs_period_us`, v1), rounded up; `None` if unlimited.
fn cgroup_cpu_quota() -> Option<usize> {
    let (quota, period) = match std::fs::read_to_string("/sys/fs/cgroup/cpu.max") {
        Ok(max) => {
            let mut parts = max.split_whitespace();
            (
                parts.next()?.parse::<f64>().ok()?,
                parts.next()?.parse::<f64>().ok()?,
            )
        }
        Err(_) => (
            std::fs::read_to_string("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
                .ok()?
                .trim()
                .parse::<f64>()
                .ok()?,
            std::fs::read_to_string("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
                .ok()?
                .trim()
                .parse::<f64>()
                .ok()?,
        ),
    };
    (quota > 0.0 && period > 0.0).then(|| (quota / period).ceil() as usize)
}

impl Capacity {
    /// What this process may use on this machine.
    pub fn detect() -> Capacity {
        Machine::detect().capacity()
    }

    pub fn total_cores(&self) -> u64 {
        self.nodes as u64 * self.cores_per_node as u64
    }

    pub fn total_gpus(&self) -> u64 {
        self.nodes as u64 * self.gpus_per_node as u64
    }

    pub fn total_mem(&self) -> u64 {
        self.nodes as u64 * self.mem_per_node
    }

    /// Whether `request` could ever run here (on an otherwise idle
    /// instance), or the first resource it asks too much of.
    pub fn fits(&self, request: &Request) -> Result<(), Shortfall> {
        let per_rank = [
            ("cores", request.cores as u64, self.cores_per_node as u64),
            ("gpus", request.gpus as u64, self.gpus_per_node as u64),
            ("mem", request.mem, self.mem_per_node),
        ];
        if request.nodes > self.nodes {
            return Err(Shortfall {
                resource: "nodes",
                asked: plural(request.nodes as u64, "node"),
                have: plural(self.nodes as u64, "node"),
            });
        }
        // Copies never span nodes: each must fit on one.
        for (resource, asked, have) in per_rank {
            if asked > have {
                return Err(Shortfall {
                    resource,
                    asked: format!("{} per copy", amount(resource, asked)),
                    have: format!("{} per node", amount(resource, have)),
                });
            }
        }
        // How many copies fit on one node, limited by each resource.
        let per_node = per_rank
            .iter()
            .filter(|(_, asked, _)| *asked > 0)
            .map(|(_, asked, have)| have / asked)
            .min()
            .unwrap_or(u64::MAX);
        let (nodes, copies_per_node) = if request.nodes > 0 {
            (
                request.nodes as u64,
                (request.ntasks as u64).div_ceil(request.nodes as u64),
            )
        } else {
            (
                self.nodes as u64,
                (request.ntasks as u64).div_ceil(self.nodes as u64),
            )
        };
        if copies_per_node <= per_node {
            return Ok(());
        }
        // Name the resource that runs out first, in totals over the nodes used.
        let (resource, asked, have) = per_rank
            .iter()
            .filter(|(_, asked, _)| *asked > 0)
            .min_by_key(|(_, asked, have)| have / asked)
            // Saturating: a memory Flux does not report is u64::MAX.
            .map(|(r, asked, have)| {
                (
                    *r,
                    asked.saturating_mul(request.ntasks as u64),
                    have.saturating_mul(nodes),
                )
            })
            .unwrap_or(("cores", 0, 0));
        let spread = if nodes == 1 {
            String::new()
        } else {
            format!(" on {nodes} nodes")
        };
        Err(Shortfall {
            resource,
            asked: format!(
                "{} ({} × {})",
                amount(resource, asked),
                plural(request.ntasks as u64, "copy"),
                amount(resource, asked / request.ntasks.max(1) as u64)
            ),
            have: format!("{}{spread}", amount(resource, have)),
        })
    }

    /// The slice a nested entry with `request` owns: a child instance of
    /// its own. Memory not reserved by the entry stays shared with the
    /// parent's (it is not a countable slot).
    pub fn slice(&self, request: &Request) -> Capacity {
        let nodes = request.nodes.max(1);
        let per_node = request.ntasks.div_ceil(nodes);
        Capacity {
            nodes,
            cores_per_node: per_node * request.cores,
            gpus_per_node: per_node * request.gpus,
            mem_per_node: if request.mem > 0 {
                per_node as u64 * request.mem
            } else {
                self.mem_per_node
            },
        }
    }
}

impl fmt::Display for Capacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nodes != 1 {
            write!(f, "{} × ", plural(self.nodes as u64, "node"))?;
        }
        write!(
            f,
            "{}, {}, {}",
            amount("cores", self.cores_per_node as u64),
            amount("gpus", self.gpus_per_node as u64),
            amount("mem", self.mem_per_node)
        )
    }
}

fn plural(n: u64, what: &str) -> String {
    match (n, what) {
        (1, _) => format!("1 {what}"),
        (_, "copy") => format!("{n} copies"),
        _ => format!("{n} {what}s"),
    }
}

/// `4 cores`, `1 gpu`, `2 GiB`.
pub fn amount(resource: &str, n: u64) -> String {
    match resource {
        "cores" => plural(n, "core"),
        "gpus" => plural(n, "GPU"),
        // What a manager that reports no memory (Flux) is taken to have.
        "mem" if n == u64::MAX => "memory as the system has it".to_owned(),
        "mem" => format_bytes(n),
        "nodes" => plural(n, "node"),
        _ => n.to_string(),
    }
}

/// Bytes in the largest binary unit that keeps one decimal at most.
pub fn format_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 || value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// The GPUs this process may use, as `CUDA_VISIBLE_DEVICES` names them.
/// `SLURP_GPUS`, set by a parent slurp for the slice it gave this process
/// (possibly emulated), is taken as it is. Otherwise the NVIDIA GPUs the
/// driver lists (`/proc/driver/nvidia/gpus`, else `nvidia-smi -L`),
/// restricted to an inherited `CUDA_VISIBLE_DEVICES`: that variable narrows
/// what exists, it never adds GPUs to a machine without them.
fn detect_gpus() -> Vec<String> {
    let split = |v: String| -> Vec<String> {
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    };
    if let Ok(given) = std::env::var("SLURP_GPUS") {
        return split(given);
    }
    let listed = match std::fs::read_dir("/proc/driver/nvidia/gpus") {
        Ok(dir) => dir.count(),
        // No device node, no usable GPU: `nvidia-smi` (a process, found
        // through PATH: a millisecond or more) only where one exists, as
        // in a container that maps the devices but not the driver's /proc.
        Err(_) if !Path::new("/dev/nvidiactl").exists() => 0,
        Err(_) => std::process::Command::new("nvidia-smi")
            .arg("-L")
            .output()
            .map_or(0, |out| {
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .filter(|l| l.starts_with("GPU "))
                    .count()
            }),
    };
    match std::env::var("CUDA_VISIBLE_DEVICES") {
        // Ids are indices below the count, or UUIDs (kept when GPUs exist).
        Ok(visible) => split(visible)
            .into_iter()
            .filter(|id| listed > 0 && id.parse::<usize>().map_or(true, |i| i < listed))
            .collect(),
        Err(_) => (0..listed).map(|i| i.to_string()).collect(),
    }
}

/// Memory available now (`MemAvailable`: free plus reclaimable), bounded by
/// the cgroup (v2 or v1) limit when there is one; inside a task of another
/// slurp that reserved memory (`SLURP_MEM`), that reservation.
fn detect_memory() -> u64 {
    // Inside a task of another slurp: what that task reserved.
    if let Some(reserved) = std::env::var("SLURP_MEM").ok().and_then(|m| m.parse().ok()) {
        return reserved;
    }
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("MemAvailable:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024);
    let limit = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .filter_map(|p| read_number(Path::new(p)))
    .min();
    match limit {
        Some(limit) if total == 0 || limit < total => limit,
        _ => total,
    }
}

fn read_number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MACHINE: Capacity = Capacity {
        nodes: 1,
        cores_per_node: 8,
        gpus_per_node: 2,
        mem_per_node: 16 << 30,
    };

    fn req(ntasks: u32, cores: u32, gpus: u32, nodes: u32) -> Request {
        Request::new(ntasks, cores, gpus, nodes)
    }

    #[test]
    fn fits_counts_copies_times_per_copy_amounts() {
        assert!(MACHINE.fits(&req(8, 1, 0, 0)).is_ok());
        assert!(MACHINE.fits(&req(2, 4, 1, 1)).is_ok());
        let short = MACHINE.fits(&req(3, 4, 0, 0)).unwrap_err();
        assert_eq!(short.resource, "cores");
        assert_eq!(
            short.to_string(),
            "asks for 12 cores (3 copies × 4 cores) but the instance has 8 cores"
        );
        assert_eq!(MACHINE.fits(&req(3, 1, 1, 0)).unwrap_err().resource, "gpus");
        assert_eq!(
            MACHINE.fits(&req(1, 1, 0, 2)).unwrap_err().resource,
            "nodes"
        );
        assert_eq!(
            MACHINE.fits(&req(1, 9, 0, 0)).unwrap_err().asked,
            "9 cores per copy"
        );
    }

    #[test]
    fn copies_spread_over_nodes_but_never_span_one() {
        let cluster = Capacity {
            nodes: 4,
            ..MACHINE
        };
        assert!(cluster.fits(&req(32, 1, 0, 0)).is_ok());
        assert!(cluster.fits(&req(33, 1, 0, 0)).is_err());
        assert!(cluster.fits(&req(16, 1, 0, 2)).is_ok());
        assert!(cluster.fits(&req(17, 1, 0, 2)).is_err());
        // 3 cores per copy: only 2 copies fit on an 8-core node.
        assert!(cluster.fits(&req(8, 3, 0, 0)).is_ok());
        assert!(cluster.fits(&req(9, 3, 0, 0)).is_err());
    }

    #[test]
    fn memory_is_checked_per_node() {
        let r = Request {
            mem: 6 << 30,
            ..req(3, 1, 0, 0)
        };
        let short = MACHINE.fits(&r).unwrap_err();
        assert_eq!(short.resource, "mem");
        assert_eq!(short.have, "16 GiB");
    }

    /// Flux reports no memory (taken as u64::MAX): the instance says so,
    /// not "16777216 TiB", and totals over nodes do not wrap.
    #[test]
    fn unknown_memory_is_not_a_number_in_a_message() {
        let flux = Capacity {
            nodes: 2,
            cores_per_node: 2,
            gpus_per_node: 0,
            mem_per_node: u64::MAX,
        };
        let r = Request {
            mem: 1 << 30,
            ..req(5, 1, 0, 0)
        };
        let short = flux.fits(&r).unwrap_err();
        assert!(!short.to_string().contains("TiB"), "{short}");
        assert_eq!(
            flux.to_string(),
            "2 nodes × 2 cores, 0 GPUs, memory as the system has it"
        );
    }

    #[test]
    fn a_slice_is_what_the_entry_asked_for() {
        let slice = MACHINE.slice(&req(6, 1, 0, 0));
        assert_eq!(
            (slice.nodes, slice.cores_per_node, slice.gpus_per_node),
            (1, 6, 0)
        );
        assert_eq!(slice.mem_per_node, MACHINE.mem_per_node);
    }

    #[test]
    fn bytes_format_in_binary_units() {
        assert_eq!(format_bytes(2 << 30), "2 GiB");
        assert_eq!(format_bytes(1536 << 20), "1.5 GiB");
        assert_eq!(format_bytes(100), "100 B");
    }
}
