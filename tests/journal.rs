//! The run journal: what a run leaves in `.slurp/`, and `slurp runs` /
//! `slurp status` reading it — after the run, while it runs, after a crash.

mod common;
use std::time::Duration;

use common::{Test, binary};

fn journal_lines(dir: &std::path::Path) -> Vec<serde_json::Value> {
    let runs: Vec<_> = std::fs::read_dir(dir.join(".slurp/runs"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(runs.len(), 1);
    std::fs::read_to_string(runs[0].path().join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_run_journals_every_transition_and_copies_every_file_it_read() {
    let test = Test::new()
        .file(
            "top.slurp",
            "include common.slurp\ntask sub cores=1: slurp child.slurp\ntask b after=a: echo b\n",
        )
        .file("common.slurp", "task a: echo a\n")
        .file("child.slurp", "task c: echo c\n");
    let dir = test.path().to_path_buf();
    let test = test.args(&["--cores", "2", "top.slurp"]);
    test.run().success();
    assert_eq!(
        std::fs::read_to_string(dir.join(".slurp/VERSION")).unwrap(),
        "1\n"
    );
    let lines = journal_lines(&dir);
    assert_eq!(lines[0]["ev"], "header");
    assert_eq!(lines.last().unwrap()["ev"], "end");
    // A start record is the attempt's `running`: no transition is
    // written beside it.
    let states = |task: &str| -> Vec<String> {
        lines
            .iter()
            .filter(|l| l["task"] == task)
            .filter_map(|l| match l["ev"].as_str() {
                Some("state") => Some(l["to"].as_str().unwrap().to_owned()),
                Some("start") => Some("start".to_owned()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(states("a"), ["runnable", "start", "succeeded"]);
    assert_eq!(states("b"), ["pending", "runnable", "start", "succeeded"]);
    assert_eq!(
        states("sub/c"),
        ["runnable", "start", "succeeded"],
        "nested tasks carry their path"
    );
    let start = lines
        .iter()
        .find(|l| l["ev"] == "start" && l["task"] == "a")
        .unwrap();
    assert_eq!(start["attempt"], 1);
    assert_eq!(
        start["cores"].as_array().unwrap().len(),
        1,
        "the cores it held"
    );
    let runs: Vec<_> = std::fs::read_dir(dir.join(".slurp/runs"))
        .unwrap()
        .flatten()
        .collect();
    let mut copies: Vec<String> = std::fs::read_dir(runs[0].path().join("files"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    copies.sort();
    assert_eq!(copies, ["0-top.slurp", "1-common.slurp", "2-child.slurp"]);
}

#[test]
fn status_and_runs_after_a_run() {
    let test = Test::new().file(
        "w.slurp",
        "task ok: true\ntask bad: false\ntask later after=bad: true\n",
    );
    let dir = test.path().to_path_buf();
    let test = test.args(&["w.slurp"]);
    assert_eq!(test.run().status, 1);
    let status = std::process::Command::new(binary())
        .arg("status")
        .current_dir(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains("3 tasks: 1 succeeded, 1 failed, 1 skipped"),
        "{text}"
    );
    // A table: a header, then a row per task that did not succeed.
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip_while(|l| !l.starts_with("TASK"))
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .collect();
    assert_eq!(
        rows,
        [
            vec!["TASK", "STATE", "ATTEMPTS", "SOURCE", "WHY"],
            vec!["bad", "failed", "1", "w.slurp:2", "exit status 1"],
            vec![
                "later",
                "skipped",
                "0",
                "w.slurp:3",
                "dependency `bad` did not succeed"
            ],
        ],
        "{text}"
    );
    assert!(!text.contains('\x1b'), "no colour into a pipe: {text:?}");
    let json = std::process::Command::new(binary())
        .args(["status", "--json"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["counts"]["failed"], 1);
    assert_eq!(json["state"], "ended");
    let runs = std::process::Command::new(binary())
        .arg("runs")
        .current_dir(&dir)
        .output()
        .unwrap();
    let runs = String::from_utf8_lossy(&runs.stdout);
    assert!(runs.contains("ended") && runs.contains("w.slurp"), "{runs}");
}

/// A sweep is journaled as one cohort record and its members from their
/// starts: no `runnable` line per member, yet `status` counts every member,
/// those a killed run never started as runnable, and a failed member shows
/// its own line and reason.
#[test]
fn a_sweep_is_one_record_until_its_members_start() {
    let test = Test::new().file(
        "w.slurp",
        "task s[i=1..50]: sh -c 'test {i} != 7'\ntask one: true\n",
    );
    let dir = test.path().to_path_buf();
    let test = test.args(&["--cores", "2", "w.slurp"]);
    assert_eq!(test.run().status, 1);
    let lines = journal_lines(&dir);
    let cohorts: Vec<_> = lines.iter().filter(|l| l["ev"] == "cohort").collect();
    assert_eq!(cohorts.len(), 1);
    assert_eq!(cohorts[0]["first"], "s[1]");
    assert_eq!(cohorts[0]["count"], 50);
    assert_eq!(cohorts[0]["src"], "w.slurp:1");
    let member_runnable = lines.iter().any(|l| {
        l["ev"] == "state" && l["to"] == "runnable" && l["task"].as_str().unwrap().starts_with("s[")
    });
    assert!(
        !member_runnable,
        "members are not written of before they start"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["ev"] == "state" && l["task"] == "one" && l["to"] == "runnable")
    );
    let status = |args: &[&str]| {
        let out = std::process::Command::new(binary())
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let text = status(&["status"]);
    assert!(text.contains("51 tasks: 50 succeeded, 1 failed"), "{text}");
    assert!(
        text.lines().any(|l| l.starts_with("s[7]")
            && l.contains("w.slurp:1")
            && l.contains("exit status 1")),
        "{text}"
    );
    // Killed on one core with most members not started: they are
    // runnable, not missing.
    let killed = Test::new().file("w.slurp", "task s[i=1..100]: sleep 0.05\n");
    let dir = killed.path().to_path_buf();
    let mut child = std::process::Command::new(binary())
        .args(["--cores", "1", "w.slurp"])
        .current_dir(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    child.kill().unwrap();
    child.wait().unwrap();
    let out = std::process::Command::new(binary())
        .args(["status", "--json"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let count = |s: &str| json["counts"][s].as_u64().unwrap();
    assert_eq!(
        count("succeeded") + count("lost") + count("runnable"),
        100,
        "{json}"
    );
    assert!(count("succeeded") > 0 && count("runnable") > 50, "{json}");
}

#[test]
fn status_works_from_another_terminal_while_the_run_is_live() {
    let (dir, mut child, _) = common::start_run(
        &[(
            "w.slurp",
            "task done: true\ntask slow: sh -c 'echo $$ > pid; sleep 30'\n",
        )],
        &["--cores", "2", "w.slurp"],
        &["pid"],
    );
    std::thread::sleep(Duration::from_millis(200));
    let text = String::from_utf8_lossy(&run_in(dir.path(), &["status"]).stdout).into_owned();
    // SIGKILL: the journal is left mid-run, as after a crash.
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(text.contains("running"), "{text}");
    assert!(text.contains("1 running, 1 succeeded"), "{text}");
    let after = String::from_utf8_lossy(&run_in(dir.path(), &["status"]).stdout).into_owned();
    assert!(
        after.contains("killed"),
        "a run that died without its end record: {after}"
    );
}

/// After `kill -9` of slurp, its PID may be another process's: the dead
/// run is known as dead by its journal's lock, not by the PID. `status`
/// says killed, `cancel` signals nothing, `resume` goes ahead.
#[test]
fn a_reused_pid_does_not_make_a_dead_run_look_live() {
    let (dir, mut child, _) = common::start_run(
        &[(
            "w.slurp",
            "task done: true\ntask slow: sh -c 'echo $$ > pid; [ -e again ] || sleep 30'\n",
        )],
        &["--cores", "2", "w.slurp"],
        &["pid"],
    );
    // `done` may end after `slow` has started: killed only once its end
    // is on record (on a busy machine it was not always, and it was lost).
    let journal = common::run_dirs(dir.path()).remove(0).join("events.jsonl");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(&journal)
        .unwrap_or_default()
        .contains(r#""task":"done","to":"succeeded""#)
    {
        assert!(std::time::Instant::now() < deadline, "`done` never ended");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::write(dir.path().join("again"), "").unwrap();
    // An unrelated live process now has the PID the header names.
    let mut other = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let events = common::run_dirs(dir.path()).remove(0).join("events.jsonl");
    let text = std::fs::read_to_string(&events).unwrap();
    let mut lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    lines[0]["pid"] = other.id().into();
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&events, text).unwrap();
    let status = String::from_utf8_lossy(&run_in(dir.path(), &["status"]).stdout).into_owned();
    assert!(status.contains("killed"), "{status}");
    assert!(
        status.contains("slurp was killed while it ran") && status.contains("1 lost"),
        "what ran then is not running now: {status}"
    );
    let runs = String::from_utf8_lossy(&run_in(dir.path(), &["runs"]).stdout).into_owned();
    assert!(
        runs.contains("killed") && runs.contains("1 succeeded, 1 lost"),
        "{runs}"
    );
    run_in(dir.path(), &["cancel"]);
    assert!(
        other.try_wait().unwrap().is_none(),
        "cancel signalled the process that now has the PID"
    );
    let resumed = run_in(dir.path(), &["resume"]);
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    other.kill().unwrap();
    other.wait().unwrap();
}

#[test]
fn a_torn_last_line_is_reported_not_fatal() {
    let test = Test::new().file("w.slurp", "true\n");
    let dir = test.path().to_path_buf();
    let test = test.args(&["w.slurp"]);
    test.run().success();
    let runs: Vec<_> = std::fs::read_dir(dir.join(".slurp/runs"))
        .unwrap()
        .flatten()
        .collect();
    let journal = runs[0].path().join("events.jsonl");
    let mut text = std::fs::read_to_string(&journal).unwrap();
    text.push_str(r#"{"ev":"state","t":9,"task":"x","to":"succ"#);
    std::fs::write(&journal, text).unwrap();
    let status = std::process::Command::new(binary())
        .arg("status")
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(status.status.success());
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("1 succeeded"), "{text}");
    assert!(text.contains("last line is incomplete"), "{text}");
}

#[test]
fn a_store_written_by_another_format_is_refused_before_anything_runs() {
    let test = Test::new()
        .file("w.slurp", "touch ran\n")
        .file(".slurp/VERSION", "99\n");
    let dir = test.path().to_path_buf();
    let test = test.args(&["w.slurp"]);
    test.run()
        .invalid()
        .stderr_has(&["format `99`", "format 1"]);
    assert!(!dir.join("ran").exists());
}

#[test]
fn no_journal_leaves_no_run_behind() {
    // Not even an empty run directory (issue 22, item 14: there was one).
    let test = Test::new().file("w.slurp", "echo hi\n");
    let dir = test.path().to_path_buf();
    let test = test.args(&["-q", "--no-journal", "w.slurp"]);
    test.run().success().stdout_has(&["hi"]);
    assert!(!dir.join(".slurp").exists(), "a .slurp/ was made");
}

fn run_in(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(binary())
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn resume_after_fixing_a_line_reruns_only_what_changed_or_did_not_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.slurp");
    std::fs::write(&w, "task a: sh -c 'echo a >> ran'\ntask b: sh -c 'echo b >> ran; exit 3'\ntask c after=b: sh -c 'echo c >> ran'\ntask d: sh -c 'echo d >> ran'\n").unwrap();
    assert_eq!(run_in(dir.path(), &["w.slurp"]).status.code(), Some(1));
    std::fs::write(
        &w,
        std::fs::read_to_string(&w).unwrap().replace("; exit 3", ""),
    )
    .unwrap();
    let resumed = run_in(dir.path(), &["resume"]);
    assert_eq!(
        resumed.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let mut ran: Vec<String> = std::fs::read_to_string(dir.path().join("ran"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    ran.sort();
    assert_eq!(
        ran,
        ["a", "b", "b", "c", "d"],
        "a and d ran once: their lines did not change"
    );
    // Nothing left to do.
    assert_eq!(run_in(dir.path(), &["resume"]).status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ran"))
            .unwrap()
            .lines()
            .count(),
        5
    );
}

#[test]
fn resume_keeps_the_arguments_of_the_first_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("w.slurp"), "6 0 sh -c 'echo x'\nfalse\n").unwrap();
    assert_eq!(
        run_in(dir.path(), &["--cores", "8", "w.slurp"])
            .status
            .code(),
        Some(1)
    );
    // Without `--cores 8` the 6-copy task could never run on this machine.
    let resumed = run_in(dir.path(), &["resume"]);
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(
        stderr.contains("resuming run") && stderr.contains("1 task already succeeded"),
        "{stderr}"
    );
    assert!(resumed.stdout.is_empty(), "the 6 copies did not run again");
}

/// Tasks that each append their id to a file; slurp is SIGKILLed at
/// pseudo-random moments and resumed until a run ends. Then every task has
/// succeeded, and no task journaled as succeeded was ever started again.
fn fault_test(tasks: usize, kills: usize, seed: u64) {
    let mut workflow = String::new();
    for i in 0..tasks {
        workflow.push_str(&format!(
            "task t{i}: sh -c 'sleep 0.0{}; echo t{i} >> out'\n",
            i % 7
        ));
    }
    let names = (0..tasks).map(|i| format!("t{i}")).collect();
    fault_test_of(&workflow, names, kills, seed, None);
}

/// `fault_test` of `workflow`, whose tasks are `names` and each append its
/// name to `out` (a sweep's members in order: a `done` record's member `m`
/// of the cohort that starts at `names[k]` is `names[k + m]`); with
/// `compact`, the journal is rewritten every `compact` bytes.
fn fault_test_of(
    workflow: &str,
    names: Vec<String>,
    kills: usize,
    seed: u64,
    compact: Option<u64>,
) {
    let tasks = names.len();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("w.slurp"), workflow).unwrap();
    let mut rng = seed;
    let mut first = true;
    // A run killed before it wrote its journal left nothing to resume.
    let no_run = |dir: &std::path::Path| {
        std::fs::read_dir(dir.join(".slurp/runs")).map_or(true, |mut d| d.next().is_none())
    };
    for _ in 0..kills {
        first |= no_run(dir.path());
        let args: &[&str] = if first {
            &["--cores", "2", "w.slurp"]
        } else {
            &["resume"]
        };
        first = false;
        let mut child = std::process::Command::new(binary())
            .args(args)
            .envs(compact.map(|c| ("SLURP_JOURNAL_COMPACT", c.to_string())))
            .current_dir(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        std::thread::sleep(Duration::from_millis(5 + (rng >> 33) % 150));
        let _ = child.kill();
        child.wait().unwrap();
    }
    // Resume until a run ends by itself.
    for _ in 0..20 {
        first |= no_run(dir.path());
        let args: &[&str] = if first {
            &["--cores", "2", "w.slurp"]
        } else {
            &["resume"]
        };
        first = false;
        let ran = std::process::Command::new(binary())
            .args(args)
            .envs(compact.map(|c| ("SLURP_JOURNAL_COMPACT", c.to_string())))
            .current_dir(dir.path())
            .output()
            .unwrap();
        if ran.status.success() {
            break;
        }
    }
    let mut runs: Vec<_> = std::fs::read_dir(dir.path().join(".slurp/runs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    runs.sort();
    let mut succeeded: std::collections::HashSet<String> = Default::default();
    let mut rewrites = 0;
    for run in &runs {
        let Ok(text) = std::fs::read_to_string(run.join("events.jsonl")) else {
            continue;
        };
        // Each cohort's first member, as an index into `names`.
        let mut cohorts: std::collections::HashMap<u64, usize> = Default::default();
        for line in text.lines() {
            let Ok(record) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if record["ev"] == "cohort" {
                let first = names.iter().position(|n| *n == record["first"]).unwrap();
                cohorts.insert(record["id"].as_u64().unwrap(), first);
            }
            if record["ev"] == "done" {
                rewrites += usize::from(record["t"] == 0);
                let first = cohorts[&record["cohort"].as_u64().unwrap()];
                for range in record["ranges"].as_array().unwrap() {
                    let (from, to) = (range[0].as_u64().unwrap(), range[1].as_u64().unwrap());
                    for m in from..to {
                        succeeded.insert(names[first + m as usize].clone());
                    }
                }
            }
            let task = record["task"].as_str().unwrap_or_default().to_owned();
            if record["ev"] == "start" && succeeded.contains(&task) {
                let kept = dir.keep();
                panic!(
                    "{task} started again after its success was journaled (in {}; journals kept in {})",
                    run.display(),
                    kept.display()
                );
            }
            if record["ev"] == "state" && record["to"] == "succeeded" {
                succeeded.insert(task);
            }
        }
    }
    assert_eq!(succeeded.len(), tasks, "every task succeeded in the end");
    assert!(
        compact.is_none() || rewrites > 0,
        "the journal was rewritten at least once"
    );
    let out = std::fs::read_to_string(dir.path().join("out")).unwrap();
    for name in &names {
        assert!(out.lines().any(|l| l == name), "{name} never ran");
    }
}

#[test]
fn killing_slurp_at_random_moments_loses_no_finished_task() {
    fault_test(24, 4, 7);
}

/// A sweep's members are one cohort, journaled only from their starts, and
/// the journal is rewritten every few records (its succeeded members as
/// ranges): a kill at any moment, mid-rewrite too, still loses no success
/// and reruns none.
#[test]
fn killing_slurp_mid_sweep_loses_no_finished_member() {
    let workflow = "task t[i=0..59]: sh -c 'sleep 0.01; echo t[{i}] >> out'\n";
    let names: Vec<String> = (0..60).map(|i| format!("t[{i}]")).collect();
    fault_test_of(workflow, names.clone(), 5, 11, None);
    fault_test_of(workflow, names, 5, 12, Some(1200));
}

/// The same, many times: `cargo test --test journal -- --ignored`.
#[test]
#[ignore]
fn stress_killing_slurp_at_random_moments() {
    for seed in 0..25 {
        fault_test(40, 8, seed);
        let workflow = "task t[i=0..99]: sh -c 'sleep 0.0{i}; echo t[{i}] >> out'\n";
        let names: Vec<String> = (0..100).map(|i| format!("t[{i}]")).collect();
        fault_test_of(workflow, names.clone(), 8, seed, None);
        fault_test_of(workflow, names, 8, seed, Some(1000 + 100 * seed));
    }
}

#[test]
fn joblog_in_gnu_parallel_format() {
    let test = Test::new().file("w.slurp", "task ok: true\ntask bad: sh -c 'exit 7'\n");
    let dir = test.path().to_path_buf();
    let test = test.args(&["--joblog", "jobs.tsv", "w.slurp"]);
    assert_eq!(test.run().status, 1);
    let log = std::fs::read_to_string(dir.join("jobs.tsv")).unwrap();
    let rows: Vec<Vec<&str>> = log.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(
        rows[0],
        [
            "Seq",
            "Host",
            "Starttime",
            "JobRuntime",
            "Send",
            "Receive",
            "Exitval",
            "Signal",
            "Command"
        ]
    );
    assert_eq!(rows.len(), 3);
    let bad = rows
        .iter()
        .find(|r| r[8] == "sh -c 'exit 7'")
        .expect("a row for the failing task");
    assert_eq!((bad[6], bad[7]), ("7", "0"));
    assert!(
        bad[2].parse::<f64>().unwrap() > 1.0e9,
        "start time in seconds since the epoch"
    );
    assert!(rows.iter().skip(1).all(|r| r.len() == 9 && r[1] == ":"));
}

/// `slurp resume` adds to the first run's joblog (as `parallel --resume`
/// does): its lines stay, the header once, Seq numbering on; every Command
/// can be pasted back into a shell.
#[test]
fn resume_appends_to_the_joblog_and_commands_paste_back() {
    let test = Test::new().file(
        "w.slurp",
        "task ok: printf '%s' 'a b'\ntask bad: sh -c 'test -e fixed'\ntask sh: echo $((1+1)) > two\n",
    );
    let dir = test.path().to_path_buf();
    assert_eq!(
        run_in(&dir, &["--joblog", "jobs.tsv", "w.slurp"])
            .status
            .code(),
        Some(1)
    );
    let first = std::fs::read_to_string(dir.join("jobs.tsv")).unwrap();
    std::fs::write(dir.join("fixed"), "").unwrap();
    assert!(run_in(&dir, &["resume"]).status.success());
    let log = std::fs::read_to_string(dir.join("jobs.tsv")).unwrap();
    assert!(
        log.starts_with(&first),
        "the first run's lines are kept:\n{log}"
    );
    assert_eq!(log.matches("Seq\t").count(), 1, "{log}");
    let rows: Vec<Vec<&str>> = log
        .lines()
        .skip(1)
        .map(|l| l.split('\t').collect())
        .collect();
    assert_eq!(
        rows.len(),
        4,
        "three attempts, then the rerun of `bad`:\n{log}"
    );
    let seqs: Vec<u64> = rows.iter().map(|r| r[0].parse().unwrap()).collect();
    assert_eq!(seqs[3], 4, "Seq goes on: {seqs:?}");
    let commands: Vec<&str> = rows.iter().map(|r| r[8]).collect();
    assert!(commands.contains(&"echo $((1+1)) > two"), "{commands:?}");
    // Pasted into a shell, the exec'd task's row runs what the task ran.
    let printf = commands.iter().find(|c| c.starts_with("printf")).unwrap();
    let out = std::process::Command::new("sh")
        .args(["-c", printf])
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"a b", "{printf}");
}

#[test]
fn log_shows_a_tasks_events_and_kept_output() {
    let test = Test::new().file(
        "w.slurp",
        "task t: sh -c 'echo to-out; echo to-err >&2; exit 2'\n",
    );
    let dir = test.path().to_path_buf();
    let test = test.args(&["--output", "files", "w.slurp"]);
    assert_eq!(test.run().status, 1);
    let log = run_in(&dir, &["log", "t"]);
    let text = String::from_utf8_lossy(&log.stdout);
    assert!(text.contains("start, attempt 1"), "{text}");
    assert!(text.contains("failed    exit status 2"), "{text}");
    assert!(text.contains("to-out") && text.contains("to-err"), "{text}");
    let missing = run_in(&dir, &["log", "nope"]);
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn status_colours_states_on_a_terminal_only() {
    let test = Test::new().file("w.slurp", "task ok: true\ntask bad: false\n");
    assert_eq!(run_in(test.path(), &["w.slurp"]).status.code(), Some(1));
    let (screen, status) = common::on_terminal(&test, &["status"], &[]);
    assert_eq!(status, 0, "{screen}");
    // Failed in bold red; the row still reads as a row.
    assert!(screen.contains("\x1b[31m\x1b[1mfailed"), "{screen:?}");
    assert!(screen.contains("bad  "), "{screen:?}");
    let (plain, _) = common::on_terminal(&test, &["status"], &[("NO_COLOR", "1")]);
    assert!(!plain.contains('\x1b'), "NO_COLOR: {plain:?}");
}

#[test]
fn a_run_directory_and_its_copies_are_the_users_alone() {
    // Issue 22, item 13: a 0600 workflow holding a token was copied 0644.
    use std::os::unix::fs::PermissionsExt;
    let test = Test::new()
        .file("w.slurp", "task a env=TOKEN=secret: true\n")
        .args(&["-q", "w.slurp"]);
    std::fs::set_permissions(
        test.path().join("w.slurp"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    test.run().success();
    let run = std::fs::read_dir(test.path().join(".slurp/runs"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&run), 0o700);
    assert_eq!(mode(&run.join("files/0-w.slurp")), 0o600);
    assert_eq!(mode(&run.join("events.jsonl")), 0o600);
}

/// Issue 22, items 11 and 12: one reader and one policy for a damaged
/// journal in every command. A latest run whose journal is garbage is
/// named as damaged — `resume` does not go back to an older run of another
/// workflow, `report` writes nothing; a bad line mid-file is skipped and
/// counted, with the path, by `status`, `report` and `log` alike; a journal
/// replaced by a directory is listed as damaged, not dropped.
#[test]
fn a_damaged_journal_is_named_the_same_way_by_every_command() {
    let test = Test::new()
        .file("one.slurp", "task a: true\n")
        .file("two.slurp", "task b: true\ntask c: true\n");
    let dir = test.path().to_path_buf();
    assert!(run_in(&dir, &["-q", "one.slurp"]).status.success());
    assert!(run_in(&dir, &["-q", "two.slurp"]).status.success());
    let latest = common::run_dirs(&dir)[1].join("events.jsonl");
    let good = std::fs::read_to_string(&latest).unwrap();
    let text = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };

    // Zeroed.
    std::fs::write(&latest, vec![0u8; 300]).unwrap();
    let named = format!("{} is damaged: it has no run header", latest.display());
    let resume = run_in(&dir, &["resume"]);
    assert_eq!(resume.status.code(), Some(2), "{}", text(&resume));
    assert!(text(&resume).contains(&named), "{}", text(&resume));
    assert!(!text(&resume).contains("resuming"), "{}", text(&resume));
    let status = run_in(&dir, &["status"]);
    assert_eq!(status.status.code(), Some(1));
    assert!(text(&status).contains(&named), "{}", text(&status));
    let report = run_in(&dir, &["report", "-o", "r.html"]);
    assert_eq!(report.status.code(), Some(1));
    assert!(text(&report).contains(&named), "{}", text(&report));
    assert!(!dir.join("r.html").exists(), "no empty report");
    let listed = text(&run_in(&dir, &["runs"]));
    assert_eq!(listed.matches("damaged").count(), 1, "{listed}");

    // One bad line in the middle: skipped and counted, the same everywhere.
    let mut lines: Vec<&str> = good.lines().collect();
    lines.insert(2, "{\"ev\":\"state\",\"t\":");
    std::fs::write(&latest, lines.join("\n") + "\n").unwrap();
    let note = format!("1 unreadable line skipped in {} (line 3)", latest.display());
    for args in [&["status"][..], &["report", "-o", "r.html"], &["log", "b"]] {
        let out = run_in(&dir, args);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(&note), "{args:?}: {}", text(&out));
    }

    // A directory where the journal was.
    std::fs::remove_file(&latest).unwrap();
    std::fs::create_dir(&latest).unwrap();
    let listed = text(&run_in(&dir, &["runs"]));
    assert!(
        listed.contains("damaged") && listed.contains("not a regular file"),
        "{listed}"
    );
    let status = run_in(&dir, &["status"]);
    assert!(!status.status.success());
    assert!(
        text(&status).contains(&latest.display().to_string()),
        "{}",
        text(&status)
    );
}

/// Issue 22, item 14: a copied project resumes its own workflow file (as
/// the first run named it, from the directory holding `.slurp/`), not the
/// original's at the absolute path recorded; the message says which.
#[test]
fn a_copied_project_resumes_its_own_file() {
    let a = tempfile::tempdir().unwrap();
    std::fs::write(a.path().join("w.slurp"), "task ok: true\ntask bad: false\n").unwrap();
    assert_eq!(run_in(a.path(), &["w.slurp"]).status.code(), Some(1));
    let b = tempfile::tempdir().unwrap();
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", a.path().display()))
        .arg(b.path())
        .status()
        .unwrap();
    assert!(copied.success());
    // The copy's line is fixed; the original's is not.
    std::fs::write(
        b.path().join("w.slurp"),
        "task ok: true\ntask bad: touch fixed-in-b\n",
    )
    .unwrap();
    let resumed = run_in(b.path(), &["resume"]);
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("with {}", b.path().join("w.slurp").display())),
        "{stderr}"
    );
    assert!(b.path().join("fixed-in-b").exists());
    assert!(!a.path().join("fixed-in-b").exists());
}

/// `kill -9` of slurp: its ranks die with it, but what they started in
/// their process groups lives on — at every level of slurps inside tasks.
/// `slurp cancel` of the dead run stops exactly those, from the groups its
/// journals recorded.
#[test]
fn cancel_of_a_killed_run_stops_what_its_tasks_left_at_every_level() {
    let slurp = binary();
    let inner = "task leaf: sh -c 'sleep 300 & echo $! > leaf.pid; wait'\n";
    let outer = format!(
        "task stray: sh -c 'sleep 300 & echo $! > stray.pid; wait'\n\
         task nest: sh -c '{} -q inner.slurp'\n",
        slurp.display()
    );
    let (dir, mut child, pids) = common::start_run(
        &[("outer.slurp", &outer), ("inner.slurp", inner)],
        &["-q", "outer.slurp"],
        &["stray.pid", "leaf.pid"],
    );
    common::signal(&child, nix::sys::signal::Signal::SIGKILL);
    let _ = child.wait();
    std::thread::sleep(Duration::from_millis(300));
    for &pid in &pids {
        assert!(
            common::alive(pid),
            "process {pid} outlived the SIGKILL (as it would)"
        );
    }
    let out = run_in(dir.path(), &["cancel"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // stray's sleep; and in nest's group the inner slurp (its `sh` died
    // with the outer slurp, not the child it had started), the inner
    // slurp's `sh` and that one's sleep.
    assert!(
        stderr.contains("stopped 4 processes its tasks left running"),
        "{stderr}"
    );
    for &pid in &pids {
        assert!(
            !common::alive(pid),
            "process {pid} is still running: {stderr}"
        );
    }
    // A second cancel finds nothing left.
    let again = run_in(dir.path(), &["cancel"]);
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("left nothing running"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}

/// A sweep's successes are kept as ranges, with a digest of the members'
/// keys: `slurp resume` skips the members that succeeded and are the same
/// now, runs those added since, and reruns members whose values changed.
#[test]
fn resume_credits_a_sweeps_members_by_range_and_reruns_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.slurp");
    let ran = || {
        let text = std::fs::read_to_string(dir.path().join("ran")).unwrap_or_default();
        std::fs::remove_file(dir.path().join("ran")).ok();
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        lines.sort();
        lines
    };
    std::fs::write(
        &w,
        "task s[i=1..300]: sh -c 'echo {i} >> ran; test {i} != 150 -o -e fixed'\n",
    )
    .unwrap();
    // Rewritten at every step.
    let first = std::process::Command::new(binary())
        .args(["--cores", "2", "w.slurp"])
        .env("SLURP_JOURNAL_COMPACT", "1")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(first.status.code(), Some(1));
    assert_eq!(ran().len(), 300);
    // The whole run's journal: the sweep, its successes as two ranges and
    // the one failure.
    let lines = journal_lines(dir.path());
    let mut members: Vec<u64> = lines
        .iter()
        .filter(|l| l["ev"] == "done")
        .flat_map(|l| l["ranges"].as_array().unwrap().clone())
        .flat_map(|r| r[0].as_u64().unwrap()..r[1].as_u64().unwrap())
        .collect();
    members.sort();
    assert_eq!(members, (0..300).filter(|&m| m != 149).collect::<Vec<_>>());
    // Rewritten whenever it had grown by its own size: what it holds
    // since is no more than what the rewrite left, plus a step.
    let bytes: usize = lines.iter().map(|l| l.to_string().len() + 1).sum();
    assert!(bytes < 4096, "{bytes} bytes: {lines:#?}");
    // Fixed, and the sweep made longer: the failed member and the new ones
    // run, and nothing else.
    std::fs::write(dir.path().join("fixed"), "").unwrap();
    std::fs::write(
        &w,
        "task s[i=1..400]: sh -c 'echo {i} >> ran; test {i} != 150 -o -e fixed'\n",
    )
    .unwrap();
    let resumed = run_in(dir.path(), &["resume"]);
    assert!(resumed.status.success(), "{resumed:?}");
    assert!(
        String::from_utf8_lossy(&resumed.stderr).contains("299 tasks already succeeded"),
        "{resumed:?}"
    );
    let mut expected: Vec<String> = std::iter::once(150)
        .chain(301..=400)
        .map(|i| i.to_string())
        .collect();
    expected.sort();
    assert_eq!(ran(), expected);
    // The resumed run wrote what it took over as ranges too.
    let status = std::process::Command::new(binary())
        .args(["status", "--json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(json["counts"]["succeeded"], 400, "{json}");
    assert_eq!(json["tasks"], serde_json::json!([]), "{json}");
    // The members' command changed: none of them is the member that ran.
    std::fs::write(
        &w,
        "task s[i=1..400]: sh -c 'echo {i} >> ran; test {i} != 150 -o -e fixed; test {i} != 7'\n",
    )
    .unwrap();
    assert_eq!(run_in(dir.path(), &["resume"]).status.code(), Some(1));
    assert_eq!(ran().len(), 400);
}

/// Members that a run journaled one by one, with their keys (they waited on
/// a task then), are credited by key when a resume finds them a cohort;
/// the resumed run writes them as ranges whose digests the next resume
/// credits in turn.
#[test]
fn members_journaled_by_key_are_credited_and_then_kept_as_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.slurp");
    let line = "sh -c 'echo {i} >> ran; test {i} != 7 -o -e fixed'";
    std::fs::write(
        &w,
        format!("task a: true\ntask s[i=1..20] after=a: {line}\n"),
    )
    .unwrap();
    assert_eq!(run_in(dir.path(), &["w.slurp"]).status.code(), Some(1));
    let first = journal_lines(dir.path());
    assert!(first.iter().all(|l| l["ev"] != "cohort"), "{first:?}");
    assert_eq!(
        first
            .iter()
            .filter(|l| l["to"] == "succeeded" && l["key"].is_string())
            .count(),
        20,
        "a and 19 members, each with its key"
    );
    std::fs::remove_file(dir.path().join("ran")).unwrap();
    // Without `a`, the members are a cohort.
    std::fs::write(&w, format!("task s[i=1..20]: {line}\n")).unwrap();
    std::fs::write(dir.path().join("fixed"), "").unwrap();
    let resumed = run_in(dir.path(), &["resume"]);
    assert!(resumed.status.success(), "{resumed:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ran")).unwrap(),
        "7\n"
    );
    std::fs::remove_file(dir.path().join("ran")).unwrap();
    // Resumed again: the range the resumed run wrote is credited whole.
    let again = run_in(dir.path(), &["resume"]);
    assert!(again.status.success(), "{again:?}");
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("20 tasks already succeeded"),
        "{again:?}"
    );
    assert!(!dir.path().join("ran").exists(), "nothing ran again");
}

/// Ctrl-C in the middle of a sweep: the members it never started are one
/// `stretch` record, one row of `slurp status` and one line of the
/// summary, not one each; `slurp resume` runs them.
#[test]
fn an_interrupted_sweep_tells_its_unstarted_members_as_one_stretch() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("w.slurp"), "task s[i=1..5000]: true\n").unwrap();
    let child = std::process::Command::new(binary())
        .args(["--cores", "2", "w.slurp"])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    common::signal(&child, nix::sys::signal::Signal::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(
        !summary.contains("more"),
        "cancelled tasks of an interrupted run are only counted: {summary}"
    );
    let lines = journal_lines(dir.path());
    let stretches: Vec<_> = lines.iter().filter(|l| l["ev"] == "stretch").collect();
    assert_eq!(stretches.len(), 1, "{stretches:?}");
    assert_eq!(stretches[0]["to"], "cancelled");
    assert_eq!(stretches[0]["last"], "s[5000]");
    let stopped = stretches[0]["count"].as_u64().unwrap();
    assert!(stopped > 1000, "{stopped}");
    let cancelled = lines
        .iter()
        .filter(|l| l["ev"] == "state" && l["to"] == "cancelled")
        .count();
    assert!(
        cancelled <= 3,
        "only those running or queued are told one by one: {cancelled}"
    );
    let status = String::from_utf8_lossy(&run_in(dir.path(), &["status"]).stdout).into_owned();
    let row = status
        .lines()
        .find(|l| l.contains("… s[5000]"))
        .unwrap_or_else(|| panic!("{status}"));
    assert!(row.contains(&format!("({stopped} members)")), "{row}");
    assert!(status.lines().count() < 12, "{status}");
    let json: serde_json::Value =
        serde_json::from_slice(&run_in(dir.path(), &["status", "--json"]).stdout).unwrap();
    let total: u64 = json["counts"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| *k != "lost")
        .map(|(_, v)| v.as_u64().unwrap())
        .sum();
    assert_eq!(total, 5000, "{json}");
    assert_eq!(json["stretches"][0]["count"], stopped);
    let resumed = run_in(dir.path(), &["resume"]);
    assert!(resumed.status.success(), "{resumed:?}");
    let json: serde_json::Value =
        serde_json::from_slice(&run_in(dir.path(), &["status", "--json"]).stdout).unwrap();
    assert_eq!(json["counts"]["succeeded"], 5000, "{json}");
}
