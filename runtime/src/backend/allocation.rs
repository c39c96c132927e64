//! Running inside a resource manager's allocation: the personal-instance
//! pattern. When slurp is the program of a Slurm job (`salloc`, `sbatch`),
//! its instance is the job's nodes and cores, and every rank of every task
//! is started as a job step on the node the scheduler core chose:
//! `srun --exact -N1 -n1 -c K -w NODE -- COMMAND`. The controller sees one
//! job and a stream of steps, never a job per task.
//!
//! In a Flux instance (`flux alloc`, `flux batch`, or the broker of a
//! nested entry under `--backend flux`) the same holds with Flux's
//! commands: the instance's nodes and cores from `flux resource list`, and
//! each rank the job `flux run -N1 -n1 -c K --requires=host:NODE -- COMMAND`
//! would submit — its jobspec written by slurp ([`Allocation::flux_job`]),
//! submitted and followed by the run's one Flux client
//! (`crate::exec`'s `flux_jobs`), or, where that cannot start, by
//! flux-core's C commands, `flux job submit` then `flux job attach`
//! ([`Allocation::flux_start`]).
//!
//! Only the outermost slurp of a job does this: a slurp inside a task (or
//! inside a step) owns the slice its parent gave it, not the job.

use std::path::PathBuf;
use std::process::Command;

/// Whose allocation it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manager {
    Slurm,
    Flux,
}

/// A Slurm job, or a Flux instance, slurp runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    pub manager: Manager,
    /// The Slurm job id, or the Flux instance's URI.
    pub job: String,
    /// Host names, in the job's order.
    pub nodes: Vec<String>,
    /// CPUs the job has on each node.
    pub cpus: Vec<u32>,
    /// Bytes per node, when the job was given a memory amount.
    pub mem_per_node: Option<u64>,
    /// GPUs per node (`SLURM_GPUS_ON_NODE`).
    pub gpus_per_node: u32,
    /// `srun` (Slurm) or `flux` (Flux), found on PATH.
    pub srun: PathBuf,
    /// The index of the node slurp itself runs on (`SLURMD_NODENAME`).
    pub local: Option<usize>,
    /// Start the ranks placed on slurp's own node directly (bound to the
    /// job's CPUs there) instead of as steps: `--srun remote`.
    pub direct_here: bool,
}

/// Why the environment names a job slurp cannot use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unusable(pub String);

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Allocation {
    /// The Slurm job this process is the program of, if any: `SLURM_JOB_ID`
    /// set, not inside a step (`SLURM_STEP_ID`) and not inside a task of
    /// another slurp (`SLURP_RUN_DIR`).
    pub fn detect() -> Result<Option<Allocation>, Unusable> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        if var("SLURP_RUN_DIR").is_some() {
            return Ok(None);
        }
        let Some(job) = var("SLURM_JOB_ID") else {
            return Self::flux();
        };
        if var("SLURM_STEP_ID").is_some() {
            return Ok(None);
        }
        let list = var("SLURM_JOB_NODELIST")
            .ok_or_else(|| Unusable(format!("Slurm job {job}: SLURM_JOB_NODELIST is not set")))?;
        let cpus_text = var("SLURM_JOB_CPUS_PER_NODE").ok_or_else(|| {
            Unusable(format!(
                "Slurm job {job}: SLURM_JOB_CPUS_PER_NODE is not set"
            ))
        })?;
        let cpus = cpus_per_node(&cpus_text).ok_or_else(|| {
            Unusable(format!(
                "Slurm job {job}: cannot read SLURM_JOB_CPUS_PER_NODE=`{cpus_text}`"
            ))
        })?;
        let srun = which("srun").ok_or_else(|| {
            Unusable(format!(
                "Slurm job {job}: `srun` is not on PATH, so tasks cannot be started as job steps"
            ))
        })?;
        let nodes = hostnames(&list)?;
        if nodes.len() != cpus.len() {
            return Err(Unusable(format!(
                "Slurm job {job}: {} nodes in `{list}` but CPUs for {} in `{cpus_text}`",
                nodes.len(),
                cpus.len()
            )));
        }
        // MB, as Slurm writes it: per node, or per CPU (`--mem-per-cpu`,
        // or the cluster's DefMemPerCPU) times the fewest CPUs a node has.
        let mb = |k: &str| var(k).and_then(|m| m.parse::<u64>().ok());
        let least = u64::from(cpus.iter().copied().min().unwrap_or(1));
        let mem_per_node = mb("SLURM_MEM_PER_NODE")
            .or_else(|| mb("SLURM_MEM_PER_CPU").map(|per| per * least))
            .map(|mb| mb << 20);
        let gpus_per_node = var("SLURM_GPUS_ON_NODE")
            .and_then(|g| g.parse().ok())
            .unwrap_or(0);
        let local = var("SLURMD_NODENAME").and_then(|n| nodes.iter().position(|m| *m == n));
        Ok(Some(Allocation {
            manager: Manager::Slurm,
            local,
            direct_here: false,
            job,
            nodes,
            cpus,
            mem_per_node,
            gpus_per_node,
            srun,
        }))
    }

    /// Whether a rank on `node` starts directly rather than as a step.
    pub fn starts_here(&self, node: usize) -> bool {
        self.direct_here && self.local == Some(node)
    }

    /// The Flux instance slurp is the initial program of (or runs in):
    /// `FLUX_URI` set, and the instance a personal one — its owner is this
    /// user (`flux start`, at any level) or it is nested (`flux alloc`,
    /// `flux batch`, level 1 or more) — never the system instance, whose
    /// resources are not slurp's to hand out. A slurp that is a task of a
    /// job in that instance (`flux run slurp …`: the job is the instance's)
    /// owns its job's cores, as a slurp inside a Slurm step does: it runs
    /// its tasks there, itself.
    fn flux() -> Result<Option<Allocation>, Unusable> {
        let Some(uri) = std::env::var("FLUX_URI").ok().filter(|v| !v.is_empty()) else {
            return Ok(None);
        };
        let Some(flux) = which("flux") else {
            return Ok(None);
        };
        let run = |args: &[&str]| -> Result<String, Unusable> {
            let out = Command::new(&flux)
                .args(args)
                .output()
                .map_err(|e| Unusable(format!("cannot run `flux {}`: {e}", args.join(" "))))?;
            if !out.status.success() {
                return Err(Unusable(format!(
                    "`flux {}` failed: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        };
        let level: u32 = run(&["getattr", "instance-level"])?.parse().unwrap_or(0);
        let owner: Option<u32> = run(&["getattr", "security.owner"])
            .ok()
            .and_then(|o| o.parse().ok());
        let personal = owner == Some(nix::unistd::getuid().as_raw());
        if level == 0 && !personal {
            return Ok(None);
        }
        // A task of one of this instance's jobs: the job, not the instance.
        if let Some(job) = std::env::var("FLUX_JOB_ID").ok().filter(|j| !j.is_empty())
            && run(&["job", "info", &job, "R"]).is_ok()
        {
            return Ok(None);
        }
        let listing = run(&[
            "resource",
            "list",
            "--states=up",
            "--no-header",
            "--format={nnodes} {ncores} {ngpus} {nodelist}",
        ])?;
        let fields: Vec<&str> = listing.split_whitespace().collect();
        let [nnodes, ncores, ngpus, list, ..] = fields[..] else {
            return Err(Unusable(format!(
                "Flux instance {uri}: cannot read `flux resource list`: `{listing}`"
            )));
        };
        let count = |s: &str| {
            s.parse::<u32>().map_err(|_| {
                Unusable(format!(
                    "Flux instance {uri}: `{s}` in `flux resource list` is not a count"
                ))
            })
        };
        let (nnodes, ncores, ngpus) = (count(nnodes)?.max(1), count(ncores)?, count(ngpus)?);
        let nodes = expand_hostlist(list).ok_or_else(|| {
            Unusable(format!(
                "Flux instance {uri}: cannot read the host list `{list}`"
            ))
        })?;
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let local = nodes.iter().position(|n| n == host.trim());
        Ok(Some(Allocation {
            manager: Manager::Flux,
            job: uri,
            cpus: vec![ncores / nnodes; nodes.len()],
            nodes,
            mem_per_node: None,
            gpus_per_node: ngpus / nnodes,
            srun: flux,
            local,
            direct_here: false,
        }))
    }

    /// The command that starts one rank as a step of a Slurm job on `node`
    /// with `cores` CPUs (and `mem` bytes, 0 for Slurm's default): `srun`.
    /// (In a Flux instance a rank is [`Allocation::flux_job`].)
    pub fn step(&self, rank: &Step, name: &str, argv: &[String]) -> Vec<String> {
        let Step {
            node,
            cores,
            gpus,
            mem,
            // slurp holds a step to its limit itself.
            time_limit: _,
        } = *rank;
        let mut out = vec![
            self.srun.display().to_string(),
            format!("--jobid={}", self.job),
            "--exact".to_owned(),
            "--nodes=1".to_owned(),
            "--ntasks=1".to_owned(),
            format!("--cpus-per-task={}", cores.max(1)),
            format!("--nodelist={}", self.nodes[node]),
            format!("--job-name={name}"),
            "--quiet".to_owned(),
        ];
        if mem > 0 {
            out.push(format!("--mem={}K", mem.div_ceil(1024)));
        }
        if gpus > 0 {
            out.push(format!("--gpus={gpus}"));
        }
        out.push("--".to_owned());
        out.extend(argv.iter().cloned());
        out
    }
}

impl Allocation {
    /// One rank as a Flux job: the jobspec (RFC 25 v1) `flux run
    /// --nodes=1 --ntasks=1 --cores-per-task=C [--gpus-per-task=G]
    /// [--time-limit=T] --requires=host:NODE --job-name=NAME` would submit
    /// from `cwd` with `env`, and the command that submits and attaches to
    /// it once it is in the file `spec`.
    pub fn flux_job(
        &self,
        rank: &Step,
        name: &str,
        argv: &[String],
        cwd: &std::path::Path,
        env: &[(String, String)],
    ) -> serde_json::Value {
        let mut with = vec![serde_json::json!({ "type": "core", "count": rank.cores.max(1) })];
        // Flux's shell hides the GPUs of a job that holds none.
        if rank.gpus > 0 {
            with.push(serde_json::json!({ "type": "gpu", "count": rank.gpus }));
        }
        let environment: serde_json::Map<String, serde_json::Value> = env
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        // Flux ends the job at the limit itself: nothing outlives it.
        let duration = rank.time_limit.map_or(0, |l| l.as_secs().max(1));
        serde_json::json!({
            "version": 1,
            "resources": [{
                "type": "node", "count": 1,
                "with": [{ "type": "slot", "count": 1, "label": "task", "with": with }],
            }],
            "tasks": [{ "command": argv, "slot": "task", "count": { "per_slot": 1 } }],
            "attributes": { "system": {
                "duration": duration,
                "cwd": cwd,
                "environment": environment,
                "job": { "name": name },
                "constraints": { "hostlist": [self.nodes[rank.node]] },
            }},
        })
    }

    /// The command that starts the Flux job in the file `spec`: submitted
    /// with `flux job submit`, then `flux job attach` in its place (the
    /// rank's process is the attach: its output, its exit status, and on a
    /// second SIGINT the job's cancel).
    pub fn flux_start(&self, spec: &std::path::Path) -> Vec<String> {
        vec![
            "/bin/sh".to_owned(),
            "-c".to_owned(),
            // The spec goes once submitted (it holds the whole environment);
            // one Flux refused stays, for the user to read.
            r#"id=$("$0" job submit "$1") && rm -f "$1" && exec "$0" job attach "$id""#.to_owned(),
            self.srun.display().to_string(),
            spec.display().to_string(),
        ]
    }
}

/// One rank's share, as a step asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// The allocation's node index.
    pub node: usize,
    pub cores: usize,
    pub gpus: usize,
    /// Bytes; 0 for the manager's default.
    pub mem: u64,
    pub time_limit: Option<std::time::Duration>,
}

/// A host list as Slurm and Flux print them: `n[01-03,7],gpu1` gives
/// `n01 n02 n03 n7 gpu1` (one bracket group per name; ranges keep their
/// zero padding).
pub fn expand_hostlist(list: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = list.trim();
    while !rest.is_empty() {
        // The next name ends at a comma outside brackets.
        let mut depth = 0i32;
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '[' => depth += 1,
                    ']' => depth -= 1,
                    _ => {}
                }
                c == ',' && depth == 0
            })
            .map_or(rest.len(), |(i, _)| i);
        let name = &rest[..end];
        rest = rest[end..].strip_prefix(',').unwrap_or("");
        let Some((prefix, tail)) = name.split_once('[') else {
            out.push(name.to_owned());
            continue;
        };
        let (ranges, suffix) = tail.split_once(']')?;
        for range in ranges.split(',') {
            let (lo, hi) = range.split_once('-').unwrap_or((range, range));
            let width = lo.len();
            let (a, b): (u64, u64) = (lo.parse().ok()?, hi.parse().ok()?);
            if b < a {
                return None;
            }
            out.extend((a..=b).map(|n| format!("{prefix}{n:0width$}{suffix}")));
        }
    }
    (!out.is_empty()).then_some(out)
}

/// `SLURM_JOB_CPUS_PER_NODE`: `72(x2),36` → `[72, 72, 36]`.
pub fn cpus_per_node(text: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in text.split(',') {
        let (count, times) = match part.split_once("(x") {
            Some((count, rest)) => (count, rest.strip_suffix(')')?.parse::<usize>().ok()?),
            None => (part, 1),
        };
        let count: u32 = count.trim().parse().ok()?;
        out.extend(std::iter::repeat_n(count, times));
    }
    (!out.is_empty()).then_some(out)
}

/// A Slurm host list (`node[01-03,7],gpu1`) as names, by Slurm's own
/// `scontrol show hostnames`; a plain name needs no Slurm.
fn hostnames(list: &str) -> Result<Vec<String>, Unusable> {
    if !list.contains(['[', ',']) {
        return Ok(vec![list.to_owned()]);
    }
    let out = Command::new("scontrol")
        .args(["show", "hostnames", list])
        .output()
        .map_err(|e| Unusable(format!("cannot run `scontrol show hostnames {list}`: {e}")))?;
    if !out.status.success() {
        return Err(Unusable(format!(
            "`scontrol show hostnames {list}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .filter(|l| !l.is_empty())
        .collect())
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_per_node_expands_repeats() {
        assert_eq!(cpus_per_node("2"), Some(vec![2]));
        assert_eq!(cpus_per_node("72(x2),36"), Some(vec![72, 72, 36]));
        assert_eq!(cpus_per_node("4(x3)"), Some(vec![4, 4, 4]));
        assert_eq!(cpus_per_node("x"), None);
        assert_eq!(cpus_per_node("4(x"), None);
    }

    #[test]
    fn host_lists_expand() {
        assert_eq!(expand_hostlist("localhost").unwrap(), ["localhost"]);
        assert_eq!(
            expand_hostlist("n[01-03,7],gpu1").unwrap(),
            ["n01", "n02", "n03", "n7", "gpu1"]
        );
        assert_eq!(
            expand_hostlist("a[1-2]-ib,b").unwrap(),
            ["a1-ib", "a2-ib", "b"]
        );
        assert_eq!(expand_hostlist("n[3-1]"), None);
        assert_eq!(expand_hostlist("n[x]"), None);
    }

    #[test]
    fn a_flux_rank_is_the_job_flux_run_would_submit_on_its_host() {
        let a = Allocation {
            manager: Manager::Flux,
            job: "local:///tmp/flux-x/local-0".into(),
            nodes: vec!["n1".into(), "n2".into()],
            cpus: vec![4, 4],
            mem_per_node: None,
            gpus_per_node: 0,
            srun: "/usr/bin/flux".into(),
            local: None,
            direct_here: false,
        };
        let rank = Step {
            node: 1,
            cores: 2,
            gpus: 1,
            mem: 0,
            time_limit: Some(std::time::Duration::from_secs(90)),
        };
        let env = [("A".to_owned(), "1".to_owned())];
        let spec = a.flux_job(
            &rank,
            "sim[3]",
            &["./sim".into()],
            std::path::Path::new("/w"),
            &env,
        );
        assert_eq!(
            spec,
            serde_json::json!({
                "version": 1,
                "resources": [{"type": "node", "count": 1, "with": [
                    {"type": "slot", "count": 1, "label": "task", "with": [
                        {"type": "core", "count": 2}, {"type": "gpu", "count": 1}]}]}],
                "tasks": [{"command": ["./sim"], "slot": "task", "count": {"per_slot": 1}}],
                "attributes": {"system": {
                    "duration": 90, "cwd": "/w", "environment": {"A": "1"},
                    "job": {"name": "sim[3]"}, "constraints": {"hostlist": ["n2"]}}}
            })
        );
        let start = a.flux_start(std::path::Path::new("/run/flux/x.json"));
        assert_eq!(start[0], "/bin/sh");
        assert_eq!(&start[3..], ["/usr/bin/flux", "/run/flux/x.json"]);
    }

    #[test]
    fn a_step_names_its_node_and_cores() {
        let a = Allocation {
            manager: Manager::Slurm,
            job: "42".into(),
            nodes: vec!["n1".into(), "n2".into()],
            cpus: vec![4, 4],
            mem_per_node: None,
            gpus_per_node: 0,
            srun: "/usr/bin/srun".into(),
            local: Some(0),
            direct_here: false,
        };
        assert!(!a.starts_here(0), "steps everywhere unless told");
        let rank = Step {
            node: 1,
            cores: 2,
            gpus: 0,
            mem: 3 << 20,
            time_limit: None,
        };
        let argv = a.step(&rank, "sim[3]", &["./sim".into(), "3".into()]);
        assert_eq!(
            argv,
            [
                "/usr/bin/srun",
                "--jobid=42",
                "--exact",
                "--nodes=1",
                "--ntasks=1",
                "--cpus-per-task=2",
                "--nodelist=n2",
                "--job-name=sim[3]",
                "--quiet",
                "--mem=3072K",
                "--",
                "./sim",
                "3"
            ]
        );
    }
}
