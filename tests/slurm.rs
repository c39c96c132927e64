//! slurp inside a real Slurm job (`scripts/local-slurm.sh start` runs a
//! one-node Slurm on localhost; `.ci/run` starts it): the job is the
//! instance, and every task runs as a step of it.

mod common;

use std::process::{Command, Output};

use common::{Test, binary};

/// Slurm must be up: these tests are about the real thing.
fn slurm() {
    let up = Command::new("sinfo")
        .args(["-h", "-N", "-o", "%T"])
        .output()
        .is_ok_and(|o| o.status.success() && !o.stdout.is_empty());
    assert!(
        up,
        "no Slurm answers here: start the local one with `scripts/local-slurm.sh start` (scripts/test-deps.sh does)"
    );
}

/// `salloc ARGS slurp SLURP_ARGS` in the test's directory.
fn in_allocation(t: &Test, salloc: &[&str], args: &[&str]) -> (Output, String) {
    slurm();
    let out = Command::new("timeout")
        .arg("120")
        .arg("salloc")
        .args(salloc)
        .arg(binary())
        .args(args)
        .current_dir(t.path())
        .env_remove("SLURP_RUN_DIR")
        .env("NO_COLOR", "1")
        .output()
        .expect("salloc");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    // `salloc: Granted job allocation 17`
    let job = stderr
        .lines()
        .find_map(|l| l.strip_prefix("salloc: Granted job allocation "))
        .unwrap_or_else(|| panic!("no allocation: {stderr}"))
        .trim()
        .to_owned();
    (out, job)
}

/// `key=value` fields of each output line that has them, by its first word.
fn fields(stdout: &[u8]) -> Vec<(String, std::collections::HashMap<String, String>)> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter(|l| l.contains('='))
        .map(|l| {
            let mut words = l.split_whitespace();
            let name = words.next().unwrap_or_default().to_owned();
            let map = words
                .filter_map(|w| w.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            (name, map)
        })
        .collect()
}

const REPORT: &str = "echo {name} job=$SLURM_JOB_ID step=$SLURM_STEP_ID cpus=$SLURM_CPUS_PER_TASK node=$SLURMD_NODENAME start=$(date +%s.%N)";

#[test]
fn tasks_run_as_steps_of_the_allocation_on_its_cores_only() {
    let t = Test::new().file(
        "flow.slurp",
        format!(
            "task t[i=1..5]: sh -c '{}; sleep 0.6; echo end=$(date +%s.%N)'\ntask wide cores=2: sh -c '{}'\n",
            REPORT.replace("{name}", "t{i}"),
            REPORT.replace("{name}", "wide"),
        ),
    );
    let (out, job) = in_allocation(&t, &["-n2"], &["--output", "group", "flow.slurp"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = fields(&out.stdout);
    let tasks: Vec<_> = seen
        .iter()
        .filter(|(n, m)| m.contains_key("job") && !n.is_empty())
        .collect();
    assert_eq!(tasks.len(), 6, "{seen:?}");
    let mut steps = std::collections::HashSet::new();
    for (name, f) in &tasks {
        assert_eq!(f["job"], job, "{name} ran outside the allocation");
        assert!(!f["step"].is_empty(), "{name} was not a job step");
        assert!(
            steps.insert(f["step"].clone()),
            "two tasks shared step {}",
            f["step"]
        );
        assert_eq!(f["node"], "localhost");
        let want = if name == "wide" { "2" } else { "1" };
        assert_eq!(f["cpus"], want, "{name} got the wrong number of CPUs");
    }
    // Never more than the allocation's 2 cores busy at once: each t[i]
    // printed its start and, later, its end.
    let text = String::from_utf8_lossy(&out.stdout);
    let mut spans = Vec::new();
    let mut start = None;
    for l in text.lines() {
        if let Some(s) = l.split("start=").nth(1) {
            start = s.parse::<f64>().ok();
        }
        if let Some(e) = l.strip_prefix("end=")
            && let Some(s) = start.take()
        {
            spans.push((s, e.parse::<f64>().unwrap()));
        }
    }
    assert_eq!(spans.len(), 5, "{text}");
    for &(s, _) in &spans {
        let overlapping = spans.iter().filter(|&&(a, b)| a <= s && s < b).count();
        assert!(
            overlapping <= 2,
            "{overlapping} one-core tasks at once on 2 cores: {spans:?}"
        );
    }
}

#[test]
fn the_instance_is_the_allocation() {
    let t = Test::new();
    let (out, job) = in_allocation(&t, &["-n2"], &["resources", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["slurm"]["job"], job);
    assert_eq!(v["slurm"]["nodes"], serde_json::json!(["localhost"]));
    assert_eq!(v["capacity"]["cores_per_node"], 2);
    assert_eq!(v["capacity"]["nodes"], 1);
}

#[test]
fn a_task_bigger_than_the_allocation_is_refused_before_anything_runs() {
    let t = Test::new().file(
        "flow.slurp",
        "task small: touch ran\ntask big cores=2: true\n",
    );
    let (out, _) = in_allocation(&t, &["-n1"], &["flow.slurp"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("slurp::exceeds_resources") && stderr.contains("1 core"),
        "{stderr}"
    );
    assert!(
        !t.path().join("ran").exists(),
        "nothing runs when the file is refused"
    );
}

#[test]
fn nested_instances_start_their_tasks_as_steps_too() {
    let t = Test::new()
        .file("top.slurp", "task sub cores=2: slurp child.slurp\n")
        .file(
            "child.slurp",
            format!(
                "task c[i=1..2]: sh -c '{}'\n",
                REPORT.replace("{name}", "c{i}")
            ),
        );
    let (out, job) = in_allocation(&t, &["-n2"], &["top.slurp"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = fields(&out.stdout);
    assert_eq!(seen.len(), 2, "{seen:?}");
    for (name, f) in &seen {
        assert_eq!(f["job"], job, "{name}");
        assert!(!f["step"].is_empty(), "{name} was not a step");
    }
}

#[test]
fn a_failing_step_fails_its_task_with_its_exit_status() {
    let t = Test::new().file(
        "flow.slurp",
        "task bad: sh -c 'exit 3'\ntask after after=bad: touch ran\n",
    );
    let (out, _) = in_allocation(&t, &["-n1"], &["flow.slurp"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("failed    bad  exit status 3"), "{stderr}");
    assert!(!t.path().join("ran").exists());
}

#[test]
fn backend_local_runs_here_even_inside_a_job() {
    let t = Test::new().file(
        "flow.slurp",
        format!("task here: sh -c '{}'\n", REPORT.replace("{name}", "here")),
    );
    let (out, job) = in_allocation(&t, &["-n1"], &["--backend", "local", "flow.slurp"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = fields(&out.stdout);
    assert_eq!(seen[0].1["job"], job, "the job's environment is inherited");
    assert_eq!(seen[0].1["step"], "", "but the task is no step");
}

#[test]
fn a_batch_job_runs_slurp_as_its_program() {
    slurm();
    let t = Test::new().file(
        "flow.slurp",
        format!(
            "task t[i=1..3]: sh -c '{}'\n",
            REPORT.replace("{name}", "t{i}")
        ),
    );
    let out = Command::new("timeout")
        .args([
            "120",
            "sbatch",
            "--wait",
            "--parsable",
            "-n2",
            "-o",
            "out.txt",
            "--wrap",
        ])
        .arg(format!("{} flow.slurp", binary().display()))
        .current_dir(t.path())
        .env_remove("SLURP_RUN_DIR")
        .output()
        .expect("sbatch");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let job = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let text = std::fs::read(t.path().join("out.txt")).unwrap();
    let seen = fields(&text);
    assert_eq!(seen.len(), 3, "{}", String::from_utf8_lossy(&text));
    for (name, f) in &seen {
        assert_eq!(f["job"], job, "{name}");
        assert!(
            !f["step"].is_empty() && f["step"] != "batch",
            "{name} ran in the batch step, not its own"
        );
    }
}
