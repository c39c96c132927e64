//! A trace's jobs as the simulator sees them, loaded as the reference
//! model loads them (RL-SPEC.md): requested processors = max(allocated,
//! requested); requested time = the user's estimate, or the run time when
//! unknown; a negative run time becomes 10 s; jobs that ran 0 s are
//! dropped; jobs sorted by id. Jobs asking no processors or more than the
//! machine has cannot be scheduled: they are dropped too, and counted.
//! [`Workload::read`] reads one by name (a trace file or `gen:…`) for every
//! command and tool that takes workloads.

use std::fmt;

use slurp_trace::Trace;

/// One job of the workload.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimJob {
    /// The trace's job number.
    pub id: i64,
    /// Seconds from the start of the trace.
    pub submit: u64,
    /// Seconds it really ran.
    pub run: u64,
    /// Seconds the user asked for: what the scheduler believes.
    pub estimate: u64,
    /// Processors it needs.
    pub procs: u32,
    /// `-1` where the trace does not say.
    pub user: i64,
    pub group: i64,
    pub exe: i64,
    /// Requested memory (KB per processor), `-1` where unknown.
    pub mem: i64,
}

impl SimJob {
    /// The account `fairshare` charges it to: its user, or one account
    /// for every job whose user is unknown.
    pub fn account(&self) -> u32 {
        u32::try_from(self.user).unwrap_or(u32::MAX)
    }
}

/// The machine a trace ran on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Machine {
    pub nodes: u32,
    pub procs_per_node: u32,
}

impl Machine {
    pub fn procs(&self) -> u64 {
        self.nodes as u64 * self.procs_per_node as u64
    }

    /// From the header: `MaxProcs` processors on `MaxNodes` nodes; with one
    /// of them only, one processor per node.
    pub fn of(trace: &Trace) -> Option<Machine> {
        let procs = trace.max_procs().filter(|&p| p > 0);
        let nodes = trace.max_nodes().filter(|&n| n > 0);
        let (nodes, procs) = match (nodes, procs) {
            (Some(n), Some(p)) if p % n == 0 => (n, p),
            // Processors not a multiple of nodes: count processors only.
            (Some(_), Some(p)) | (None, Some(p)) => (p, p),
            (Some(n), None) => (n, n),
            (None, None) => return None,
        };
        Some(Machine {
            nodes: u32::try_from(nodes).ok()?,
            procs_per_node: u32::try_from(procs / nodes).ok()?,
        })
    }

    /// Whole nodes a job of `procs` processors takes in the reference
    /// model (nodes are allocated exclusively).
    pub fn nodes_for(&self, procs: u32) -> u32 {
        procs.div_ceil(self.procs_per_node)
    }
}

impl fmt::Display for Machine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = |n: u32| if n == 1 { "" } else { "s" };
        write!(
            f,
            "{} node{} × {} processor{}",
            self.nodes,
            s(self.nodes),
            self.procs_per_node,
            s(self.procs_per_node)
        )
    }
}

/// Jobs left out of the simulation, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dropped {
    /// Ran 0 seconds (the reference drops them).
    pub zero_run: usize,
    /// Asked for no processors (both fields unknown).
    pub no_procs: usize,
    /// Asked for more processors than the machine has.
    pub too_wide: usize,
}

impl Dropped {
    pub fn total(&self) -> usize {
        self.zero_run + self.no_procs + self.too_wide
    }
}

/// The trace `name` stands for: a generated workload
/// (`gen:FAMILY[:SEED[:JOBS]]`, [`crate::generate::named`]; `slurp policy
/// generate` writes the same as SWF) or an SWF trace file.
pub fn read_trace(name: &std::path::Path) -> Result<Trace, String> {
    crate::generate::named(&name.to_string_lossy())
        .unwrap_or_else(|| slurp_trace::read(name).map_err(|e| format!("{}: {e}", name.display())))
}

/// The jobs to simulate and the machine they run on.
#[derive(Debug, Clone)]
pub struct Workload {
    pub machine: Machine,
    pub jobs: Vec<SimJob>,
    pub dropped: Dropped,
    /// The longest run time: a normaliser for learned policies.
    pub max_run: u64,
}

impl Workload {
    /// The workload `name` stands for ([`read_trace`]), on the machine its
    /// header gives; an error names the
    /// workload and says what is wrong (no machine in the header, no job
    /// that can be replayed).
    pub fn read(name: &std::path::Path) -> Result<Workload, String> {
        let trace = read_trace(name)?;
        let machine = Machine::of(&trace).ok_or_else(|| {
            format!(
                "{}: the header gives no `; MaxProcs:` or `; MaxNodes:`",
                name.display()
            )
        })?;
        let workload = Workload::new(&trace, machine);
        if workload.jobs.is_empty() {
            return Err(format!("{}: no job can be replayed", name.display()));
        }
        Ok(workload)
    }

    /// The jobs of `trace` on `machine`.
    pub fn new(trace: &Trace, machine: Machine) -> Workload {
        let mut dropped = Dropped::default();
        let mut jobs: Vec<SimJob> = Vec::with_capacity(trace.jobs.len());
        for j in &trace.jobs {
            let run = match j.run {
                0 => {
                    dropped.zero_run += 1;
                    continue;
                }
                r if r < 0 => 10,
                r => r as u64,
            };
            let procs = j.procs.max(j.req_procs);
            if procs <= 0 {
                dropped.no_procs += 1;
                continue;
            }
            if procs as u64 > machine.procs() {
                dropped.too_wide += 1;
                continue;
            }
            jobs.push(SimJob {
                id: j.id,
                submit: j.submit.max(0) as u64,
                run,
                estimate: if j.req_time > 0 {
                    j.req_time as u64
                } else {
                    run
                },
                procs: procs as u32,
                user: j.user,
                group: j.group,
                exe: j.exe,
                mem: j.req_mem,
            });
        }
        jobs.sort_by_key(|j| j.id);
        let max_run = jobs.iter().map(|j| j.run).max().unwrap_or(0);
        Workload {
            machine,
            jobs,
            dropped,
            max_run,
        }
    }
}

/// Whether a job that ran `run` ran its estimate: at least 99% of it (a
/// replay's whole seconds; a job killed at its limit, or let run past it,
/// ran it too). The one test of exact estimates, for a whole trace
/// ([`Workload::caveats`]) and for the jobs ended so far (the learned
/// policy's rule, `fair/src/exact.rs`).
pub fn ran_its_estimate(run: u64, estimate: u64) -> bool {
    run.saturating_mul(100) >= estimate.saturating_mul(99)
}

/// Whether `whole` of `jobs` having run their estimates make the estimates
/// exact: nine in ten or more (one site's timeouts stay well below).
pub fn mostly_exact(whole: u64, jobs: u64) -> bool {
    jobs > 0 && whole.saturating_mul(10) >= jobs.saturating_mul(9)
}

impl Workload {
    /// What this workload's figures cannot say, one sentence each, for
    /// every command that replays it to print beside its name:
    ///
    /// - a trace that names no user (field 12 is −1 throughout, as in
    ///   Lublin's generated traces) or one only has one account, so its
    ///   worst user's figures are its average's;
    /// - a trace without requested times (field 9 is −1) is replayed with
    ///   each run time as the estimate, and with exact estimates SJF is the
    ///   fairest heuristic on most workloads while the learned models win
    ///   under half the cells (fair/trainer/runs/v49-site-shapes.md). A job
    ///   killed at its limit also ran its estimate, so only a workload
    ///   where nine jobs in ten or more did is named ([`mostly_exact`]).
    pub fn caveats(&self) -> Vec<String> {
        let mut caveats = Vec::new();
        let mut users = self.jobs.iter().map(|j| j.user.max(-1));
        let first = users.next();
        if users.all(|u| Some(u) == first) {
            caveats.push(format!(
                "names {}: its worst user's figures are the average's, so they say nothing about fairness",
                if first == Some(-1) {
                    "no user (field 12 is -1 for every job)"
                } else {
                    "one user only"
                }
            ));
        }
        let exact = self
            .jobs
            .iter()
            .filter(|j| ran_its_estimate(j.run, j.estimate))
            .count();
        if mostly_exact(exact as u64, self.jobs.len() as u64) {
            caveats.push(format!(
                "{exact} of {} jobs ran their whole estimate (a trace without requested times is replayed with each run time as its estimate): with exact estimates `sjf` is the fairest heuristic on most workloads, and the learned models win under half the cells (fair-v14 and later too, which hand their choices to `sjf` once they see them)",
                self.jobs.len()
            ));
        }
        caveats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(user: i64, run: u64, estimate: u64) -> SimJob {
        SimJob {
            id: 0,
            submit: 0,
            run,
            estimate,
            procs: 1,
            user,
            group: -1,
            exe: -1,
            mem: -1,
        }
    }

    fn caveats(jobs: Vec<SimJob>) -> Vec<String> {
        Workload {
            machine: Machine {
                nodes: 1,
                procs_per_node: 1,
            },
            jobs,
            dropped: Dropped::default(),
            max_run: 0,
        }
        .caveats()
    }

    #[test]
    fn a_workload_says_where_its_figures_cannot_mean_fairness() {
        // Two users, estimates above the runs: nothing to say.
        let plain: Vec<SimJob> = (0..20).map(|i| job(i % 2, 60, 600)).collect();
        assert!(caveats(plain.clone()).is_empty());
        // No user, one user.
        let none: Vec<SimJob> = plain.iter().map(|j| SimJob { user: -1, ..*j }).collect();
        assert!(caveats(none)[0].starts_with("names no user"));
        let one: Vec<SimJob> = plain.iter().map(|j| SimJob { user: 7, ..*j }).collect();
        assert!(caveats(one)[0].starts_with("names one user only"));
        // Nine jobs in ten run exactly their estimate: named; eight in ten
        // (jobs killed at their limits, say): not.
        let exact = |n: usize| -> Vec<SimJob> {
            (0..20)
                .map(|i| job(i as i64 % 2, 60, if i < n { 60 } else { 600 }))
                .collect()
        };
        assert_eq!(caveats(exact(16)), Vec::<String>::new());
        let named = caveats(exact(18));
        assert_eq!(named.len(), 1);
        assert!(named[0].starts_with("18 of 20 jobs ran their whole estimate"));
        // A run within 1% of its estimate, or past it, ran it; one 2%
        // short did not.
        let near = |run: u64| -> Vec<SimJob> { (0..20).map(|i| job(i % 2, run, 100)).collect() };
        assert!(caveats(near(99))[0].starts_with("20 of 20 jobs ran their whole estimate"));
        assert!(caveats(near(130))[0].starts_with("20 of 20 jobs ran their whole estimate"));
        assert!(caveats(near(98)).is_empty());
    }
}
