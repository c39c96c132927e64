//! The fuzz targets' inputs (`fuzz/`, issue 22's reproducers among them) on
//! stable, through the real binary: every loader input gives a program or
//! diagnostics (exit 0 or 2) within seconds and never a panic; every
//! journal input, as a run's `events.jsonl`, gives `runs`, `status` and
//! `report` an answer or a named error, never a panic. The longer fuzz
//! campaign is `fuzz/README.md`'s command.

mod common;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{binary, repo};

fn inputs(dirs: &[&str]) -> Vec<PathBuf> {
    let mut all = Vec::new();
    for dir in dirs {
        for entry in std::fs::read_dir(repo().join(dir)).unwrap().flatten() {
            all.push(entry.path());
        }
    }
    all.sort();
    assert!(!all.is_empty());
    all
}

/// Runs slurp with `args` in `dir`; its exit status and stderr, and how
/// long it took. A run past `limit` is killed and fails the test.
fn slurp(dir: &std::path::Path, args: &[&str], limit: Duration) -> (i32, String, Duration) {
    let start = Instant::now();
    let mut child = std::process::Command::new(binary())
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let text = reader.join().unwrap();
            return (status.code().unwrap_or(-1), text, start.elapsed());
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("slurp {args:?} in {} ran past {limit:?}", dir.display());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn every_loader_input_loads_or_is_diagnosed_and_never_panics() {
    for input in inputs(&["fuzz/corpus/loader", "fuzz/regressions/loader"]) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("w.slurp");
        std::fs::copy(&input, &file).unwrap();
        let (status, stderr, took) = slurp(
            dir.path(),
            &["check", "--cores", "8", "w.slurp"],
            Duration::from_secs(30),
        );
        assert!(
            status == 0 || status == 2,
            "{}: exit {status}\n{stderr}",
            input.display()
        );
        assert!(
            !stderr.contains("panicked"),
            "{}: {stderr}",
            input.display()
        );
        if status == 2 {
            assert!(
                stderr.contains("slurp::"),
                "{}: no diagnostic code\n{stderr}",
                input.display()
            );
        }
        assert!(
            took < Duration::from_secs(10),
            "{}: {took:?}",
            input.display()
        );
    }
}

#[test]
fn every_journal_input_gets_an_answer_or_a_named_error() {
    for input in inputs(&["fuzz/corpus/journal", "fuzz/regressions/journal"]) {
        let dir = tempfile::tempdir().unwrap();
        // A store with one run, whose journal is then the input.
        std::fs::write(dir.path().join("w.slurp"), "true\n").unwrap();
        let (status, stderr, _) = slurp(dir.path(), &["-q", "w.slurp"], Duration::from_secs(10));
        assert_eq!(status, 0, "{stderr}");
        let run = common::run_dirs(dir.path()).remove(0);
        std::fs::copy(&input, run.join("events.jsonl")).unwrap();
        for args in [
            &["runs"][..],
            &["status"],
            &["status", "--json"],
            &["report", "-o", "r.html"],
        ] {
            let (status, stderr, _) = slurp(dir.path(), args, Duration::from_secs(10));
            assert!(
                !stderr.contains("panicked"),
                "{} {args:?}: {stderr}",
                input.display()
            );
            assert!(
                (0..=2).contains(&status),
                "{} {args:?}: exit {status}\n{stderr}",
                input.display()
            );
        }
    }
}
