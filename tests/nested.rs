//! Nested allocations: a task that is a slurp file runs as a child
//! instance inside exactly its slice, with its own queue and policy.

mod common;
use std::time::{Duration, Instant};

use common::{Test, binary};

fn lines_with<'a>(stdout: &'a str, prefix: &str) -> Vec<&'a str> {
    stdout.lines().filter(|l| l.starts_with(prefix)).collect()
}

#[test]
fn a_child_never_leaves_its_slice() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!("skipped: needs 2 CPUs, this machine has {cpus}");
        return;
    }
    // Two entries of one core each on a 2-core machine: each child's three
    // tasks all run on its entry's one CPU, and the two CPUs differ.
    let run = Test::new()
        .file("top.slurp", "task a cores=1: slurp child.slurp\ntask b cores=1: slurp child.slurp\n")
        .file("child.slurp", "task t[i=1..3]: sh -c 'echo $SLURP_TASK_ID $(grep Cpus_allowed_list /proc/self/status | cut -f2) cores=$SLURP_CORES'\n")
        .args(&["--cores", "2", "top.slurp"])
        .run()
        .success();
    for entry in ["a", "b"] {
        let lines = lines_with(&run.stdout, &format!("{entry}/"));
        assert_eq!(lines.len(), 3, "{}", run.stdout);
        let places: std::collections::BTreeSet<&str> =
            lines.iter().map(|l| l.split_once(' ').unwrap().1).collect();
        assert_eq!(
            places.len(),
            1,
            "all of {entry}'s tasks on its one core: {lines:?}"
        );
    }
    let a = lines_with(&run.stdout, "a/")[0]
        .split_once(' ')
        .unwrap()
        .1
        .to_owned();
    let b = lines_with(&run.stdout, "b/")[0]
        .split_once(' ')
        .unwrap()
        .1
        .to_owned();
    assert_ne!(a, b, "the two slices are different cores");
}

#[test]
fn a_child_gets_exactly_its_slice_of_an_emulated_instance() {
    // 6 of 8 cores: six 1-core tasks run at once in the child, seen through
    // the logical cores they were told.
    let run = Test::new()
        .file("top.slurp", "2 0 true\n6 0 flux slurp child.slurp\n")
        .file("child.slurp", "task t[i=1..6] time=1m: sh -c 'sleep 0.5; echo $SLURP_CORES'\ntask u: sh -c 'echo u $SLURP_CORES'\n")
        .args(&["--cores", "8", "top.slurp"])
        .run()
        .success();
    let mut cores: Vec<u32> = run
        .stdout
        .lines()
        .filter_map(|l| l.trim_start_matches("u ").parse().ok())
        .collect();
    cores.sort_unstable();
    cores.dedup();
    assert_eq!(
        cores.len(),
        6,
        "the child used exactly six distinct cores: {}",
        run.stdout
    );
    assert!(cores.iter().all(|&c| c < 8));
}

/// Child: `first` holds 1 of 2 cores for 0.3 s; `big` needs both; `small`
/// is short. EASY backfills `small` before `big`; FCFS runs `big` first.
const POLICY_CHILD: &str = "\
task first cores=1 time=10s: sleep 0.3
task big cores=2 time=10s: echo big
task small cores=1 time=5s: echo small
";

fn order(args: &[&str], top: &str) -> Vec<String> {
    let mut all = vec!["--cores", "2", "--output", "tag"];
    all.extend_from_slice(args);
    all.push("top.slurp");
    let run = Test::new()
        .file("top.slurp", top)
        .file("child.slurp", POLICY_CHILD)
        .args(&all)
        .run()
        .success();
    run.stdout
        .lines()
        .map(|l| l.rsplit(' ').next().unwrap().to_owned())
        .collect()
}

#[test]
fn each_level_has_its_own_policy() {
    let top = "task sub cores=2: slurp child.slurp\n";
    assert_eq!(order(&["--policy", "easy"], top), ["small", "big"]);
    assert_eq!(
        order(&["--policy", "easy,fcfs"], top),
        ["big", "small"],
        "second level uses fcfs"
    );
    assert_eq!(
        order(
            &["--policy", "easy"],
            "task sub cores=2 policy=fcfs: slurp child.slurp\n"
        ),
        ["big", "small"],
        "policy= on the entry wins"
    );
}

#[test]
fn a_failing_child_fails_its_entry_and_shows_its_subtree() {
    let run = Test::new()
        .file("top.slurp", "task sub cores=2: slurp child.slurp\ntask next after=sub: echo never\ntask other: echo other\n")
        .file("child.slurp", "task ok: echo fine\ntask bad: sh -c 'echo broken >&2; exit 5'\ntask later after=bad: echo never\n")
        .args(&["--cores", "2", "top.slurp"])
        .run();
    assert_eq!(run.status, 1);
    assert!(!run.stdout.contains("never"));
    run.stderr_has(&[
        "slurp: 3 tasks: 1 succeeded, 1 failed, 1 skipped",
        "failed    sub  2 of 3 tasks of its workflow did not succeed  (top.slurp:1)",
        "skipped   next  dependency `sub` did not succeed  (top.slurp:2)",
        "failed    sub/bad  exit status 5  (child.slurp:2)",
        "| broken",
        "skipped   sub/later  dependency `sub/bad` did not succeed  (child.slurp:3)",
    ]);
}

#[test]
fn tagged_output_carries_the_path() {
    let run = Test::new()
        .file("top.slurp", "task sub: slurp mid.slurp\n")
        .file("mid.slurp", "task leaf[i=1..2]: slurp leaf.slurp\n")
        .file("leaf.slurp", "task hi: echo hi\n")
        .args(&["--output", "tag", "top.slurp"])
        .run()
        .success();
    let mut lines: Vec<&str> = run.stdout.lines().collect();
    lines.sort();
    assert_eq!(lines, ["[sub/leaf[1]/hi] hi", "[sub/leaf[2]/hi] hi"]);
}

#[test]
fn interrupt_reaches_every_level() {
    let (_dir, child, pids) = common::start_run(
        &[
            ("top.slurp", "task mid cores=2: slurp mid.slurp\n"),
            ("mid.slurp", "task leaf cores=2: slurp leaf.slurp\n"),
            (
                "leaf.slurp",
                "task s[i=1..2]: sh -c 'echo $$ > pid.{i}; sleep 60 & wait'\n",
            ),
        ],
        &["--cores", "2", "top.slurp"],
        &["pid.1", "pid.2"],
    );
    common::signal(&child, nix::sys::signal::Signal::SIGINT);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130));
    for pid in pids {
        assert!(
            !common::alive_in_group(pid),
            "process group {pid} three levels down survived Ctrl-C"
        );
    }
}

#[test]
fn a_slurp_started_as_a_plain_process_finds_its_slice() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!("skipped: needs 2 CPUs, this machine has {cpus}");
        return;
    }
    // Through the shell, so not a nested entry: a plain process that
    // discovers what it owns from its affinity mask and SLURP_GPUS/SLURP_MEM.
    let slurp = binary().display().to_string();
    let run = Test::new()
        .file("top.slurp", format!("task t cores=1 gpus=1 mem=1G: sh -c '{slurp} resources --json > seen.json; {slurp} inner.slurp'\n"))
        .file("inner.slurp", "task i[n=1..3]: sh -c 'grep Cpus_allowed_list /proc/self/status | cut -f2'\n")
                .args(&["--cores", "2", "--gpus", "2", "top.slurp"])
        .run()
        .success();
    let mut cpus: Vec<&str> = run.stdout.lines().collect();
    cpus.dedup();
    assert_eq!(
        cpus.len(),
        1,
        "the inner slurp scheduled only on the one CPU it was given: {}",
        run.stdout
    );
}

#[test]
fn resources_inside_a_task_report_the_slice() {
    let slurp = binary().display().to_string();
    let run = Test::new()
        .file(
            "top.slurp",
            format!("task t cores=1 gpus=1 mem=1G: sh -c '{slurp} resources'\n"),
        )
        .args(&["--cores", "2", "--gpus", "2", "top.slurp"])
        .run()
        .success();
    assert!(run.stdout.contains("gpus    1 per node"), "{}", run.stdout);
    assert!(
        run.stdout.contains("memory  1 GiB per node"),
        "{}",
        run.stdout
    );
}

#[test]
fn nesting_without_end_at_run_time_is_stopped() {
    Test::new()
        .file("w.slurp", "echo hi\n")
        .args(&["w.slurp"])
        .env("SLURP_DEPTH", "64")
        .run()
        .invalid()
        .stderr_has(&["nested 64 levels deep", "the limit is 64"]);
}

#[test]
fn a_nested_entry_past_its_time_limit_stops_its_whole_instance() {
    let start = Instant::now();
    let run = Test::new()
        .file(
            "top.slurp",
            "task sub time=1s: slurp child.slurp\ntask next after=sub: echo never\n",
        )
        .file(
            "child.slurp",
            "task a: sleep 30\ntask b after=a: echo never\n",
        )
        .args(&["--grace", "1s", "top.slurp"])
        .run();
    assert_eq!(run.status, 1);
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "took {:?}",
        start.elapsed()
    );
    assert!(!run.stdout.contains("never"));
    run.stderr_has(&[
        "timeout   sub  ran past its time limit",
        "skipped   next",
        "cancelled sub/a",
    ]);
}

/// slurp as a separate process inside a task, three deep, with a leaf whose
/// processes ignore SIGTERM: Ctrl-C at the top ends every level within the
/// top's grace plus a second, exit 130, and nothing of the leaf survives.
#[test]
fn ctrl_c_through_slurps_run_as_separate_processes_leaves_nothing() {
    let bin = binary();
    let bin = bin.display();
    let (_dir, child, pids) = common::start_run(
        &[
            (
                "leaf.slurp",
                "task leaf: sh -c 'trap \"\" TERM; sleep 60 & echo $! > leafpid; wait'\n",
            ),
            (
                "mid.slurp",
                &format!("task mid: sh -c 'exec {bin} leaf.slurp'\n"),
            ),
            (
                "w.slurp",
                &format!("task top: sh -c 'exec {bin} mid.slurp'\n"),
            ),
        ],
        &["--grace", "2s", "w.slurp"],
        &["leafpid"],
    );
    let start = Instant::now();
    common::signal(&child, nix::sys::signal::Signal::SIGINT);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130));
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "took {:?}",
        start.elapsed()
    );
    assert!(
        !common::alive(pids[0]),
        "the leaf's TERM-ignoring process {} survived",
        pids[0]
    );
}
