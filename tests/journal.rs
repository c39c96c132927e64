//! The run journal: what a run leaves in `.slurp/`, and `slurp runs` /
//! `slurp status` reading it — after the run, while it runs, after a crash.

mod common;
use std::time::{Duration, Instant};

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
    let states = |task: &str| -> Vec<String> {
        lines
            .iter()
            .filter(|l| l["ev"] == "state" && l["task"] == task)
            .map(|l| l["to"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(states("a"), ["runnable", "running", "succeeded"]);
    assert_eq!(states("b"), ["pending", "runnable", "running", "succeeded"]);
    assert_eq!(
        states("sub/c"),
        ["runnable", "running", "succeeded"],
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
    assert!(text.contains("1 succeeded, 1 failed, 1 skipped"), "{text}");
    assert!(text.contains("failed    bad  exit status 1"), "{text}");
    assert!(
        text.contains("skipped   later  dependency `bad` did not succeed"),
        "{text}"
    );
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

#[test]
fn status_works_from_another_terminal_while_the_run_is_live() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("w.slurp"),
        "task done: true\ntask slow: sh -c 'touch started; sleep 30'\n",
    )
    .unwrap();
    let mut child = std::process::Command::new(binary())
        .args(["--cores", "2", "w.slurp"])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !dir.path().join("started").exists() {
        assert!(Instant::now() < deadline, "the task did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let status = std::process::Command::new(binary())
        .arg("status")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout).into_owned();
    // SIGKILL: the journal is left mid-run, as after a crash.
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(text.contains("running"), "{text}");
    assert!(text.contains("1 running, 1 succeeded"), "{text}");
    let after = std::process::Command::new(binary())
        .arg("status")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let after = String::from_utf8_lossy(&after.stdout);
    assert!(
        after.contains("killed"),
        "a run that died without its end record: {after}"
    );
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
    let test = Test::new().file("w.slurp", "true\n");
    let dir = test.path().to_path_buf();
    let test = test.args(&["--no-journal", "w.slurp"]);
    test.run().success();
    let runs: Vec<_> = std::fs::read_dir(dir.join(".slurp/runs"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("events.jsonl").exists())
        .collect();
    assert!(runs.is_empty());
}
