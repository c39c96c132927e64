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

/// `sbatch --wait -n2 --wrap "slurp ARGS"` in the test's directory: the
/// job's id and its output.
fn in_batch(t: &Test, args: &str) -> (String, Vec<u8>) {
    slurm();
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
        .arg(format!("{} {args}", binary().display()))
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
    (job, std::fs::read(t.path().join("out.txt")).unwrap())
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
    assert_eq!(v["allocation"]["manager"], "slurm");
    assert_eq!(v["allocation"]["job"], job);
    assert_eq!(v["allocation"]["nodes"], serde_json::json!(["localhost"]));
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
    let (job, text) = in_batch(&t, "flow.slurp");
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

// --- `--backend slurm`: every task a Slurm job --------------------------------

/// `slurp --backend slurm ARGS` in the test's directory.
fn submit(t: &Test, args: &[&str]) -> Output {
    slurm();
    Command::new("timeout")
        .arg("240")
        .arg(binary())
        .args(["--backend", "slurm"])
        .args(args)
        .current_dir(t.path())
        .env_remove("SLURP_RUN_DIR")
        .env("NO_COLOR", "1")
        .output()
        .expect("slurp")
}

/// `scontrol show job -o ID` as fields.
fn scontrol(job: &str) -> std::collections::HashMap<String, String> {
    let out = Command::new("scontrol")
        .args(["show", "job", "-o", job])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Per task of the latest run's journal: its Slurm job and its last state.
fn journaled(t: &Test) -> std::collections::BTreeMap<String, (String, String)> {
    let runs = t.path().join(".slurp/runs");
    let mut dirs: Vec<_> = std::fs::read_dir(&runs)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    dirs.sort();
    let text = std::fs::read_to_string(dirs.last().unwrap().join("events.jsonl")).unwrap();
    let mut out: std::collections::BTreeMap<String, (String, String)> = Default::default();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v["ev"] != "state" {
            continue;
        }
        let entry = out
            .entry(v["task"].as_str().unwrap().to_owned())
            .or_default();
        if let Some(job) = v["reason"]["slurm_job"].as_str() {
            entry.0 = job.to_owned();
        }
        entry.1 = v["to"].as_str().unwrap().to_owned();
    }
    out
}

#[test]
fn a_dag_runs_as_jobs_with_afterok_and_a_failure_skips_its_dependents() {
    let t = Test::new().file(
        "flow.slurp",
        "task prep: echo prep\n\
         task sim[i=1..4] after=prep: sh -c 'echo sim {i}'\n\
         task bad after=prep: sh -c 'echo broken >&2; exit 3'\n\
         task post after=bad: touch never-ran\n\
         task reduce after=sim: echo reduce\n",
    );
    let out = submit(&t, &["flow.slurp"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for line in ["prep", "sim 1", "sim 4", "reduce"] {
        assert!(stdout.contains(line), "{line} missing: {stdout}");
    }
    assert!(
        stderr.contains("failed    bad  exit status 3  (flow.slurp:3)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("| broken"),
        "the failure's stderr is shown: {stderr}"
    );
    assert!(
        stderr.contains("skipped   post  dependency `bad` did not succeed  (flow.slurp:4)"),
        "{stderr}"
    );
    assert!(!t.path().join("never-ran").exists());
    // What the journal says is what Slurm says.
    let journal = journaled(&t);
    assert_eq!(journal.len(), 8);
    let expected = [
        ("COMPLETED", "succeeded"),
        ("FAILED", "failed"),
        ("CANCELLED", "skipped"),
    ];
    for (task, (job, state)) in &journal {
        let fields = scontrol(job);
        let slurm_state = &fields["JobState"];
        assert!(
            expected.iter().any(|(s, j)| s == slurm_state && j == state),
            "{task}: journal {state}, Slurm {slurm_state}"
        );
        if task == "bad" {
            assert_eq!(fields["ExitCode"], "3:0");
        }
        if task == "post" {
            assert_eq!(fields["Reason"], "DependencyNeverSatisfied");
            assert!(fields["Dependency"].starts_with("afterok:"), "{fields:?}");
        }
    }
    // The sweep went in as one array: its elements are ARRAY_INDEX jobs.
    let sims: Vec<&String> = journal
        .iter()
        .filter(|(k, _)| k.starts_with("sim["))
        .map(|(_, v)| &v.0)
        .collect();
    let array = sims[0].split('_').next().unwrap().to_owned();
    for (i, job) in sims.iter().enumerate() {
        assert_eq!(
            **job,
            format!("{array}_{i}"),
            "sim[{}] is element {i} of one array",
            i + 1
        );
        assert_eq!(scontrol(job)["ArrayJobId"], array);
    }
}

#[test]
fn the_naval_example_runs_on_slurm_with_its_nested_allocation() {
    let t = Test::new()
        .file(
            "a.slurp",
            std::fs::read_to_string(common::repo().join("examples/naval/a.slurp")).unwrap(),
        )
        .file(
            "b.slurp",
            std::fs::read_to_string(common::repo().join("examples/naval/b.slurp")).unwrap(),
        );
    let out = submit(&t, &["a.slurp"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    // a's four lines, 6+4+2+4 copies, and b's tasks from inside the allocation.
    assert_eq!(stdout.matches("a: job 1").count(), 6, "{stdout}");
    assert_eq!(stdout.matches("a: job 4").count(), 4, "{stdout}");
    assert!(
        stdout.contains("b: job 1") && stdout.contains("b: job 2"),
        "{stdout}"
    );
    let journal = journaled(&t);
    assert!(
        journal.values().all(|(_, s)| s == "succeeded"),
        "{journal:?}"
    );
    // The nested entry was one job of 6 CPUs running slurp.
    let nested = scontrol(&journal["@5"].0);
    assert_eq!(nested["NumCPUs"], "6", "{nested:?}");
}

#[test]
fn a_nested_entry_is_one_allocation_whose_tasks_are_its_steps() {
    let t = Test::new()
        .file(
            "top.slurp",
            "task sub cores=2: slurp child.slurp\ntask after after=sub: echo after\n",
        )
        .file(
            "child.slurp",
            format!(
                "task c[i=1..3]: sh -c '{}'\n",
                REPORT.replace("{name}", "c{i}")
            ),
        );
    let out = submit(&t, &["top.slurp"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let journal = journaled(&t);
    let sub_job = &journal["sub"].0;
    let seen = fields(&out.stdout);
    let children: Vec<_> = seen.iter().filter(|(n, _)| n.starts_with('c')).collect();
    assert_eq!(children.len(), 3, "{seen:?}");
    for (name, f) in children {
        assert_eq!(&f["job"], sub_job, "{name} ran inside the entry's job");
        assert!(!f["step"].is_empty(), "{name} is a step of it");
    }
    assert!(String::from_utf8_lossy(&out.stdout).contains("after"));
}

#[test]
fn a_refused_submission_shows_slurms_words_and_the_line_and_leaves_nothing_queued() {
    let t = Test::new().file("flow.slurp", "task a: true\ntask b after=a: true\n");
    let out = submit(&t, &["--partition", "no-such-partition", "flow.slurp"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("flow.slurp:1: task `a` could not be submitted"),
        "{stderr}"
    );
    assert!(
        stderr.to_lowercase().contains("invalid partition"),
        "Slurm's own message: {stderr}"
    );
    let queued = Command::new("squeue")
        .args(["-h", "-n", "a,b", "-t", "PD,R"])
        .output()
        .unwrap();
    assert!(
        queued.stdout.is_empty(),
        "jobs left behind: {}",
        String::from_utf8_lossy(&queued.stdout)
    );
}

#[test]
fn cancel_stops_the_jobs_of_a_live_run() {
    slurm();
    let t = Test::new().file(
        "flow.slurp",
        "task long[i=1..2]: sleep 300\ntask later after=long: touch never-ran\n",
    );
    let mut child = Command::new(binary())
        .args(["--backend", "slurm", "flow.slurp"])
        .current_dir(t.path())
        .env_remove("SLURP_RUN_DIR")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until Slurm runs them.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let running = t.path().join(".slurp/runs").is_dir()
            && journaled(&t)
                .get("long[1]")
                .is_some_and(|(_, s)| s == "running");
        if running {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the jobs never ran");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let cancel = Command::new(binary())
        .arg("cancel")
        .current_dir(t.path())
        .output()
        .unwrap();
    assert!(
        cancel.status.success(),
        "{}",
        String::from_utf8_lossy(&cancel.stderr)
    );
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let journal = journaled(&t);
    for task in ["long[1]", "long[2]"] {
        let (job, state) = &journal[task];
        assert_eq!(state, "cancelled", "{task}");
        assert_eq!(scontrol(job)["JobState"], "CANCELLED", "{task} in Slurm");
    }
    assert_ne!(journal["later"].1, "succeeded");
    assert!(!t.path().join("never-ran").exists());
}

#[test]
fn a_task_past_its_time_limit_ends_timeout() {
    // Slurm counts whole minutes: this takes a minute or so.
    let t = Test::new().file(
        "flow.slurp",
        "task slow time=1s: sleep 300\ntask quick: true\n",
    );
    let out = submit(&t, &["flow.slurp"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("timeout   slow  ran past its time limit  (flow.slurp:1)"),
        "{stderr}"
    );
    let journal = journaled(&t);
    assert_eq!(journal["slow"].1, "timeout");
    assert_eq!(scontrol(&journal["slow"].0)["JobState"], "TIMEOUT");
    assert_eq!(journal["quick"].1, "succeeded");
}

#[test]
fn srun_remote_starts_ranks_on_slurps_own_node_directly_within_the_job() {
    slurm();
    let t = Test::new().file(
        "flow.slurp",
        format!(
            "task t[i=1..4]: sh -c '{} cpus_allowed=$(grep Cpus_allowed_list /proc/self/status | cut -f2)'\n",
            REPORT.replace("{name}", "t{i}")
        ),
    );
    let (job, text) = in_batch(&t, "--srun remote flow.slurp");
    let seen = fields(&text);
    assert_eq!(seen.len(), 4, "{}", String::from_utf8_lossy(&text));
    let job_cpus = scontrol(&job)["NumCPUs"].clone();
    assert_eq!(job_cpus, "2");
    for (name, f) in &seen {
        assert_eq!(f["job"], job, "{name} ran in the job");
        assert_eq!(f["step"], "", "{name} started directly, not as a step");
        // Bound to one CPU of the job's node.
        assert!(
            !f["cpus_allowed"].contains([',', '-']),
            "{name} not bound to one CPU: {}",
            f["cpus_allowed"]
        );
    }
}

#[test]
fn the_flux_backend_outside_flux_says_so_and_submits_nothing() {
    // Flux cannot be installed here: this is what a user without it sees.
    let t = Test::new().file("flow.slurp", "task a: touch ran\n");
    let out = Command::new(binary())
        .args(["--backend", "flux", "flow.slurp"])
        .current_dir(t.path())
        .env("PATH", "/usr/bin:/bin")
        .env_remove("FLUX_URI")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--backend flux") && stderr.contains("flux resource list"),
        "{stderr}"
    );
    assert!(!t.path().join("ran").exists());
}

/// `slurp resume` of a `--backend slurm` run submits only what did not
/// succeed (with new jobs, journaled), and a dependent of a task that
/// succeeded before does not wait on it.
#[test]
fn resume_after_a_slurm_run_resubmits_only_what_did_not_succeed() {
    let t = Test::new().file(
        "flow.slurp",
        "task prep: sh -c 'echo prep >> ran'\n\
         task sim[i=1..3] after=prep: sh -c 'echo sim{i} >> ran; test {i} != 2 || test -e fixed'\n\
         task post after=sim: sh -c 'echo post >> ran'\n",
    );
    let first = submit(&t, &["flow.slurp"]);
    assert_eq!(
        first.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let mut ran = t.lines_of("ran");
    ran.sort();
    assert_eq!(ran, ["prep", "sim1", "sim2", "sim3"]);
    let before = journaled(&t);
    std::fs::write(t.path().join("fixed"), "").unwrap();
    std::fs::remove_file(t.path().join("ran")).unwrap();
    let resumed = Command::new("timeout")
        .args(["240"])
        .arg(binary())
        .arg("resume")
        .current_dir(t.path())
        .env_remove("SLURP_RUN_DIR")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("3 tasks already succeeded"), "{stderr}");
    // Only the failure and what waited on it ran again.
    let mut ran = t.lines_of("ran");
    ran.sort();
    assert_eq!(ran, ["post", "sim2"]);
    let after = journaled(&t);
    for task in ["prep", "sim[1]", "sim[3]"] {
        assert_eq!(
            after[task],
            (String::new(), "succeeded".to_owned()),
            "{task}"
        );
    }
    for task in ["sim[2]", "post"] {
        assert_eq!(after[task].1, "succeeded", "{task}");
        assert!(
            !after[task].0.is_empty(),
            "{task} has its new job journaled"
        );
        assert_ne!(after[task].0, before[task].0, "{task} ran as a new job");
    }
}

/// Each copy of a `--backend slurm` task is told its rank, as a run here.
#[test]
fn the_slurm_backend_tells_each_copy_its_rank() {
    let t = Test::new().file(
        "pair.slurp",
        "task pair ntasks=2 mem=64M: sh -c 'echo rank=$SLURP_TASK_RANK of $SLURP_NTASKS mem=$SLURP_MEM id=$SLURP_TASK_ID >> vars'\n",
    );
    let out = submit(&t, &["-q", "pair.slurp"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut vars = t.lines_of("vars");
    vars.sort();
    assert_eq!(
        vars,
        [
            "rank=0 of 2 mem=67108864 id=pair",
            "rank=1 of 2 mem=67108864 id=pair"
        ]
    );
}
