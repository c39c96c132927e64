//! `slurp FILE`: real processes on this machine — what they print, where
//! they run, what they are told, and how the run ends.

mod common;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{Test, alive, alive_in_group, repo, signal, start_run};

/// Lines of stdout, counted.
fn counts(stdout: &str) -> BTreeMap<&str, usize> {
    let mut counts = BTreeMap::new();
    for line in stdout.lines() {
        *counts.entry(line).or_default() += 1;
    }
    counts
}

#[test]
fn naval_prints_what_the_proof_of_concept_printed() {
    let test = Test::new()
        .file(
            "a.slurp",
            std::fs::read_to_string(repo().join("examples/naval/a.slurp")).unwrap(),
        )
        .file(
            "b.slurp",
            std::fs::read_to_string(repo().join("examples/naval/b.slurp")).unwrap(),
        );
    let run = test.args(&["--cores", "8", "a.slurp"]).run().success();
    let expected: BTreeMap<&str, usize> = [
        ("a: job 1", 6),
        ("a: job 2", 4),
        ("a: job 3", 2),
        ("a: job 4", 4),
        ("b: job 1", 4),
        ("b: job 2", 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(counts(&run.stdout), expected);
    // Group output: each task's lines come together, never interleaved.
    let lines: Vec<&str> = run.stdout.lines().collect();
    for label in expected.keys() {
        let first = lines.iter().position(|l| l == label).unwrap();
        let n = expected[label];
        assert!(
            lines[first..first + n].iter().all(|l| l == label),
            "{label} split up:\n{}",
            run.stdout
        );
    }
    run.stderr_has(&["slurp: 5 tasks: 5 succeeded"]);
}

#[test]
fn ranks_are_told_their_rank_count_task_and_cores() {
    let run = Test::new()
        .file("w.slurp", "task t ntasks=2 cores=1: sh -c 'echo $SLURP_TASK_ID $SLURP_TASK_RANK/$SLURP_NTASKS cores=$SLURP_CORES run=${SLURP_RUN_DIR:+set}'\n")
        .args(&["--cores", "4", "--no-bind", "w.slurp"])
        .run()
        .success();
    let mut lines: Vec<&str> = run.stdout.lines().collect();
    lines.sort();
    assert_eq!(lines, ["t 0/2 cores=0 run=set", "t 1/2 cores=1 run=set"]);
}

#[test]
fn gpus_are_given_in_cuda_visible_devices() {
    let run = Test::new()
        .file(
            "w.slurp",
            "task g[i=1..2] gpus=1 time=10s: sh -c 'sleep 0.3; echo gpu=$CUDA_VISIBLE_DEVICES'\n",
        )
        .args(&["--cores", "2", "--gpus", "2", "w.slurp"])
        .run()
        .success();
    let mut lines: Vec<&str> = run.stdout.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        ["gpu=0", "gpu=1"],
        "two concurrent tasks get different GPUs"
    );
}

#[test]
fn each_task_is_bound_to_its_own_cores() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!("skipped: needs 2 CPUs, this machine has {cpus}");
        return;
    }
    let run = Test::new()
        .file("w.slurp", "task t[i=1..2] time=10s: sh -c 'grep Cpus_allowed_list /proc/self/status; sleep 0.3'\n")
        .args(&["--cores", "2", "w.slurp"])
        .run()
        .success();
    let mut lists: Vec<&str> = run
        .stdout
        .lines()
        .map(|l| l.split_whitespace().last().unwrap())
        .collect();
    lists.sort();
    lists.dedup();
    assert_eq!(
        lists.len(),
        2,
        "two tasks on two different single CPUs: {}",
        run.stdout
    );
    assert!(
        lists.iter().all(|l| l.parse::<usize>().is_ok()),
        "each bound to one CPU: {lists:?}"
    );
}

/// Plain tasks, started by reaper threads pinned to their CPUs: a task on a
/// core of this machine is bound to that core's CPU; one on a core beyond
/// the machine (an emulated instance) runs on every CPU slurp has, not on
/// the CPU of the thread that started it.
#[test]
fn plain_tasks_are_bound_to_their_core_or_to_none() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!("skipped: needs 2 CPUs, this machine has {cpus}");
        return;
    }
    let allowed = |status: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .map(|l| l.trim().to_owned())
            .unwrap()
    };
    let own = allowed(&std::fs::read_to_string("/proc/self/status").unwrap());
    // More tasks than cores: a run of them starts its reapers.
    let cores = cpus * 2;
    let run = Test::new()
        .file(
            "w.slurp",
            format!(
                "task t[i=1..{}]: sh -c 'echo $SLURP_CORES; grep Cpus_allowed_list /proc/self/status'\n",
                cores * 3
            ),
        )
        .args(&["--cores", &cores.to_string(), "w.slurp"])
        .run()
        .success();
    let lines: Vec<&str> = run.stdout.lines().collect();
    let (mut bound, mut unbound) = (0, 0);
    for pair in lines.chunks(2) {
        let core: usize = pair[0].parse().unwrap();
        let list = allowed(pair[1]);
        if core < cpus {
            assert!(list.parse::<usize>().is_ok(), "core {core}: {list}");
            bound += 1;
        } else {
            assert_eq!(list, own, "core {core}, beyond the machine");
            unbound += 1;
        }
    }
    assert!(bound > 0 && unbound > 0, "{}", run.stdout);
}

#[test]
fn emulated_cores_beyond_the_machine_are_scheduled_but_not_bound() {
    let run = Test::new()
        .file("w.slurp", "64 0 sh -c 'echo $SLURP_TASK_RANK'\n")
        .args(&["--cores", "64", "w.slurp"])
        .run()
        .success();
    assert_eq!(run.stdout.lines().count(), 64);
}

#[test]
fn plain_lines_shell_lines_and_stdin() {
    let run = Test::new()
        .file("w.slurp", "echo plain\necho a-b | tr - +\ncat\n")
        .args(&["w.slurp"])
        .run()
        .success();
    let mut lines: Vec<&str> = run.stdout.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        ["a+b", "plain"],
        "cat reads /dev/null, not the terminal"
    );
}

#[test]
fn a_failing_dependency_skips_its_dependents_and_the_run_exits_1() {
    let run = Test::new()
        .file(
            "w.slurp",
            "task a: sh -c 'echo oops >&2; exit 3'\ntask b after=a: echo b\ntask c: echo c\n",
        )
        .args(&["w.slurp"])
        .run();
    assert_eq!(run.status, 1);
    assert_eq!(run.stdout.trim(), "c");
    run.stderr_has(&[
        "slurp: 3 tasks: 1 succeeded, 1 failed, 1 skipped",
        "failed    a  exit status 3  (w.slurp:1)",
        "| oops",
        "skipped   b  dependency `a` did not succeed  (w.slurp:2)",
    ]);
}

/// Tasks the event loop watches (two ranks) and plain ones, which a
/// reaper thread starts and reaps, follow each other in one run: each
/// starts after what it follows, and each ends with its own status.
#[test]
fn plain_and_watched_tasks_follow_each_other_in_one_run() {
    let test = Test::new().file(
        "w.slurp",
        "task a: sh -c 'echo a >> order'\n\
             task b after=a ntasks=2 pmi=none: sh -c '[ $SLURP_TASK_RANK = 0 ] && echo b >> order; true'\n\
             task c after=b: sh -c 'echo c >> order; exit 3'\n\
             task d after=a: sh -c 'sleep 0.2; echo d >> order; echo d says >&2'\n\
             task e after=d ntasks=2 pmi=none: sh -c '[ $SLURP_TASK_RANK = 0 ] && echo e >> order; exit 4'\n\
             task f after=e: echo never\n",
    );
    let test = test.args(&["--cores", "2", "w.slurp"]);
    let run = test.run();
    assert_eq!(run.status, 1);
    let run = run.stderr_has(&[
        "slurp: 6 tasks: 3 succeeded, 2 failed, 1 skipped",
        "failed    c  exit status 3",
        "failed    e  exit status 4",
        "d says",
    ]);
    assert!(!run.stdout.contains("never"), "{}", run.stdout);
    let order = test.lines_of("order");
    let at = |t: &str| order.iter().position(|l| l == t).unwrap();
    assert_eq!(order.len(), 5, "{order:?}");
    assert!(at("a") < at("b") && at("b") < at("c"), "{order:?}");
    assert!(at("a") < at("d") && at("d") < at("e"), "{order:?}");
}

/// What a reaper thread reports of the attempts it starts (more tasks
/// than cores, so the run has reapers): a program that does not exist, a
/// process killed by a signal, and output far beyond what a pipe holds,
/// every byte of it, in its task's group.
#[test]
fn a_reaper_reports_what_each_attempt_did() {
    let run = Test::new()
        .file(
            "w.slurp",
            "task missing: no-such-program-y\n\
             task big: sh -c 'sleep 0.05; head -c 300000 /dev/zero | tr -c y y; echo; echo end of big'\n\
             task killed: sh -c 'echo dying >&2; kill -9 $$'\n\
             task fine: echo fine\n",
        )
        .args(&["--cores", "1", "w.slurp"])
        .run();
    assert_eq!(run.status, 1);
    let big = run.stdout.lines().find(|l| l.starts_with('y')).unwrap();
    assert_eq!(big.len(), 300_000);
    assert!(big.bytes().all(|b| b == b'y'));
    assert!(run.stdout.contains("y\nend of big\n"), "{}", run.stdout);
    assert!(run.stdout.contains("fine"));
    run.stderr_has(&[
        "slurp: 4 tasks: 2 succeeded, 2 failed",
        "cannot run `no-such-program-y`: no such program",
        "failed    killed  killed by signal 9",
        "| dying",
    ]);
}

/// Tagged lines from a reaper's attempts (more tasks than cores): every
/// line once, under its task's name, in the order the task wrote it; an
/// unfinished last line too, even from a pipe an escaped process keeps
/// open; a line written after a pause; and stderr's
/// tail in the summary of a task that failed.
#[test]
fn a_reaper_shows_each_tagged_line_once_under_its_task() {
    let mut file = String::new();
    for i in 0..12 {
        file.push_str(&format!(
            "task t{i}: sh -c 'echo out {i} a; echo err {i} >&2; printf \"out {i} b\"'\n"
        ));
    }
    file.push_str("task slow: sh -c 'echo slow 1; sleep 0.3; echo slow 2; echo bad >&2; exit 3'\n");
    // A process that escaped the task's group holds its stdout open: the
    // unfinished line is shown when the pipe stops being read.
    file.push_str("task escaped: sh -c 'printf half; setsid sleep 2 & sleep 0.2'\n");
    let run = Test::new()
        .file("w.slurp", &file)
        .args(&["--cores", "1", "--output", "tag", "w.slurp"])
        .run();
    assert_eq!(run.status, 1, "{}", run.stderr);
    let mut expected: Vec<String> = (0..12)
        .flat_map(|i| [format!("[t{i}] out {i} a"), format!("[t{i}] out {i} b")])
        .collect();
    expected.extend(["[slow] slow 1", "[slow] slow 2", "[escaped] half"].map(String::from));
    let mut seen: Vec<&str> = run.stdout.lines().collect();
    // Tasks may interleave; each task's own lines may not.
    for i in 0..12 {
        let a = seen.iter().position(|l| *l == format!("[t{i}] out {i} a"));
        let b = seen.iter().position(|l| *l == format!("[t{i}] out {i} b"));
        assert!(
            a.is_some() && a < b,
            "t{i}'s lines in order:\n{}",
            run.stdout
        );
    }
    seen.sort_unstable();
    expected.sort_unstable();
    assert_eq!(seen, expected, "each line once:\n{}", run.stdout);
    let errs: Vec<&str> = run.stderr.lines().filter(|l| l.starts_with("[t")).collect();
    assert_eq!(errs.len(), 12, "{}", run.stderr);
    run.stderr_has(&[
        "[slow] bad",
        "slurp: 14 tasks: 13 succeeded, 1 failed",
        "failed    slow  exit status 3",
        "| bad",
    ]);
}

#[test]
fn retries_rerun_a_failed_task() {
    let run = Test::new()
        .file("w.slurp", "task flaky retries=2: sh -c 'n=$(cat n 2>/dev/null || echo 0); echo $((n+1)) > n; [ $n -ge 1 ]'\n")
        .args(&["w.slurp"])
        .run()
        .success();
    run.stderr_has(&["1 succeeded"]);
}

#[test]
fn a_task_past_its_time_limit_is_stopped_even_if_it_ignores_sigterm() {
    // Alone (the event loop watches it), and behind another on one core
    // (the run has a reaper thread, which watches it).
    for (file, cores) in [
        ("task slow time=1s: sh -c 'trap \"\" TERM; sleep 30'\n", "2"),
        (
            "task quick: true\ntask slow time=1s: sh -c 'trap \"\" TERM; sleep 30'\n",
            "1",
        ),
    ] {
        let start = Instant::now();
        let run = Test::new()
            .file("w.slurp", file)
            .args(&["--grace", "1s", "--cores", cores, "w.slurp"])
            .run();
        let took = start.elapsed();
        assert_eq!(run.status, 1, "{file}");
        run.stderr_has(&["timeout   slow  ran past its time limit"]);
        assert!(
            took < Duration::from_secs(10),
            "took {took:?}: SIGKILL after the grace period"
        );
        assert!(
            took >= Duration::from_secs(2),
            "took {took:?}: limit 1 s plus grace 1 s"
        );
    }
}

#[test]
fn halt_soon_starts_nothing_after_a_failure() {
    let run = Test::new()
        .file(
            "w.slurp",
            "task bad: false
task later[i=1..5] cores=2: true
",
        )
        .args(&[
            "--cores", "2", "--halt", "soon", "--policy", "fcfs", "w.slurp",
        ])
        .run();
    assert_eq!(run.status, 1);
    run.stderr_has(&[
        "1 failed",
        "5 cancelled",
        "not started: the run was stopped",
    ]);
}

#[test]
fn a_program_that_does_not_exist_fails_with_the_reason() {
    let run = Test::new()
        .file("w.slurp", "no-such-program-x\n")
        .args(&["w.slurp"])
        .run();
    assert_eq!(run.status, 1);
    run.stderr_has(&["cannot run `no-such-program-x`: no such program"]);
}

#[test]
fn output_modes_tag_files_none() {
    let tag = Test::new()
        .file("w.slurp", "task a: sh -c 'echo one; echo two'\n")
        .args(&["--output", "tag", "w.slurp"])
        .run()
        .success();
    assert_eq!(tag.stdout, "[a] one\n[a] two\n");
    let test = Test::new().file("w.slurp", "task a: sh -c 'echo out; echo err >&2'\n");
    let dir = test.path().to_path_buf();
    // Keep the directory alive while its files are read.
    let test = test.args(&["--output", "files", "w.slurp"]);
    let files = test.run().success();
    assert!(files.stdout.is_empty());
    let runs: Vec<_> = std::fs::read_dir(dir.join(".slurp/runs"))
        .unwrap()
        .flatten()
        .collect();
    let out = runs[0].path().join("out");
    assert_eq!(std::fs::read_to_string(out.join("a.out")).unwrap(), "out\n");
    assert_eq!(std::fs::read_to_string(out.join("a.err")).unwrap(), "err\n");
    let none = Test::new()
        .file("w.slurp", "echo hidden\n")
        .args(&["--output", "none", "w.slurp"])
        .run()
        .success();
    assert!(none.stdout.is_empty());
}

/// `--output ungroup` (`-u`): the tasks write to slurp's own stdout and
/// stderr as they go, so lines of tasks running together mix in the order
/// they were written, where `group` holds each task's output until it
/// ends. The two tasks hand over through files, so the order is fixed.
#[test]
fn ungroup_passes_output_through_as_it_is_written() {
    // `a` goes on only once `b` has ended and been reaped (a zombie still
    // answers `kill -0`), so `b` is reported first however loaded the
    // machine is.
    let file = "task a: sh -c 'echo a1; touch ready; while [ ! -e done ]; do sleep 0.01; done; while kill -0 $(cat bpid) 2>/dev/null; do sleep 0.01; done; echo a2; echo a-err >&2'
task b: sh -c 'while [ ! -e ready ]; do sleep 0.01; done; echo b1; echo $$ > bpid; touch done'
";
    let ungrouped = Test::new()
        .file("w.slurp", file)
        .args(&["--cores", "2", "-u", "w.slurp"])
        .run()
        .success();
    assert_eq!(ungrouped.stdout, "a1\nb1\na2\n");
    assert!(ungrouped.stderr.contains("a-err\n"), "{}", ungrouped.stderr);
    let grouped = Test::new()
        .file("w.slurp", file)
        .args(&["--cores", "2", "w.slurp"])
        .run()
        .success();
    assert_eq!(grouped.stdout, "b1\na1\na2\n");
    // A failure is still reported, by its exit status (its stderr went
    // by as it was written: there is no tail to show).
    let failed = Test::new()
        .file("w.slurp", "task bad: sh -c 'echo why >&2; exit 3'\n")
        .args(&["--output", "ungroup", "w.slurp"])
        .run();
    assert_eq!(failed.status, 1);
    failed.stderr_has(&["why\n", "1 failed", "bad", "exit status 3"]);
    // Options that need each task's output whole are refused with it.
    for (with, what) in [("--tag", "--tag"), ("-k", "--keep-order")] {
        let refused = Test::new()
            .file("w.slurp", "true\n")
            .args(&["-u", with, "w.slurp"])
            .run();
        assert_eq!(refused.status, 2);
        refused.stderr_has(&[what, "cannot be used with"]);
    }
    // `--results` keeps what only `group` captures: with any other mode its
    // files would be empty, so it is refused, not run.
    for mode in [&["-u"][..], &["--output", "files"], &["--output", "tag"]] {
        let test = Test::new().file("w.slurp", "echo kept\n");
        let dir = test.path().to_path_buf();
        let refused = test
            .args(&[mode, &["--results", "R", "w.slurp"]].concat())
            .run();
        assert_eq!(refused.status, 2, "{mode:?}");
        refused.stderr_has(&["`--results`", "needs `--output group`"]);
        assert!(!dir.join("R").exists(), "{mode:?} ran");
    }
}

#[test]
fn invalid_workflows_run_nothing_and_exit_2() {
    let test = Test::new().file("w.slurp", "touch ran\ntask b after=nope: touch ran2\n");
    let dir = test.path().to_path_buf();
    let test = test.args(&["w.slurp"]);
    test.run().invalid().stderr_has(&["no task named `nope`"]);
    assert!(
        !dir.join("ran").exists(),
        "a workflow with a mistake must not half-run"
    );
}

/// SIGINT or SIGTERM mid-run: every task's process group is stopped,
/// nothing of the run survives, and slurp exits 130 with its summary —
/// tasks of two ranks (watched by the event loop) and plain ones, with a
/// time or memory limit or not (started and reaped by a reaper thread),
/// alike.
#[test]
fn interrupt_leaves_no_process_alive() {
    for (sig, limit, cores) in [
        (nix::sys::signal::Signal::SIGINT, " ntasks=2 pmi=none", "4"),
        (nix::sys::signal::Signal::SIGTERM, " ntasks=2 pmi=none", "4"),
        (nix::sys::signal::Signal::SIGINT, " time=1m", "2"),
        (nix::sys::signal::Signal::SIGTERM, " mem=1G", "2"),
        (nix::sys::signal::Signal::SIGTERM, "", "2"),
    ] {
        let (_dir, child, pids) = start_run(
            &[(
                "w.slurp",
                &format!(
                    "task s[i=1..2]{limit}: sh -c 'echo $$ > pid.{{i}}; sleep 60 & wait'\ntask later after=s: true\n"
                ),
            )],
            &["--cores", cores, "w.slurp"],
            &["pid.1", "pid.2"],
        );
        signal(&child, sig);
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(130), "{sig}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("slurp: interrupted"), "{stderr}");
        // The shells and their `sleep` children, found by process group.
        for pid in pids {
            assert!(
                !alive_in_group(pid),
                "{sig}: process group {pid} still has live processes"
            );
        }
    }
}

/// A task that ignores SIGTERM holds the run for the grace period after a
/// first Ctrl-C; a second Ctrl-C kills it at once.
#[test]
fn a_second_interrupt_kills_at_once() {
    let (_dir, child, pids) = start_run(
        &[(
            "w.slurp",
            "task stubborn: sh -c 'trap \"\" TERM; echo $$ > pid; while :; do sleep 0.1; done'\n",
        )],
        &["--grace", "1m", "w.slurp"],
        &["pid"],
    );
    let start = Instant::now();
    signal(&child, nix::sys::signal::Signal::SIGINT);
    std::thread::sleep(Duration::from_millis(300));
    signal(&child, nix::sys::signal::Signal::SIGINT);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130));
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "waited {:?} for the 1-minute grace",
        start.elapsed()
    );
    assert!(!alive_in_group(pids[0]));
}

/// Starts itself in a new session (out of the task's process group), as a
/// daemon does, ignores SIGTERM and keeps the task's output pipe open.
const STRAY: &str = "trap '' TERM\necho $$ > stray\nexec sleep 97\n";

/// A task ends when its process ends, not when its pipe closes: a process
/// that escaped with `setsid` and holds stdout open neither keeps the task
/// (and its dependents) waiting nor outlives the run — whether the task
/// lives long enough for its pipes to be watched (a sleep) or ends while
/// they are still left alone (a busy wait: a few milliseconds), when they
/// are drained and the stray's hold is found then.
#[test]
fn an_escaped_process_holding_the_pipe_does_not_hold_the_task_or_outlive_the_run() {
    for wait in ["sleep 0.05", ":"] {
        let start = Instant::now();
        let test = Test::new()
            .file("stray.sh", STRAY)
            .file(
                "w.slurp",
                format!(
                    "task a: sh -c 'setsid sh stray.sh & while [ ! -s stray ]; do {wait}; done; echo done'\ntask b after=a: echo after\n"
                ),
            )
            .args(&["w.slurp"]);
        let run = test.run().success();
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the run waited {:?} on the stray's pipe ({wait})",
            start.elapsed()
        );
        assert_eq!(run.stdout, "done\nafter\n", "{wait}");
        assert!(
            run.stderr
                .contains("ended 1 process that tasks left running"),
            "{wait}: {}",
            run.stderr
        );
        let pid: i32 = std::fs::read_to_string(test.path().join("stray"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(!alive(pid), "the stray {pid} outlived the run ({wait})");
    }
}

/// A task's pipes are left alone while it is young and drained when it
/// ends (`runtime/src/exec/capture.rs`): a short task that writes far more
/// than a pipe holds is not stuck on the full pipe, and nothing it wrote is
/// lost, on stdout (kept whole) or stderr (its tail, in the summary).
#[test]
fn a_short_task_writing_more_than_a_pipe_holds_keeps_every_byte() {
    let run = Test::new()
        .file(
            "w.slurp",
            "task big time=30s: sh -c 'head -c 1000000 /dev/zero | tr -c x x; echo; echo to stderr >&2'\n\
             task loud time=30s: sh -c 'head -c 300000 /dev/zero | tr -c y y >&2; echo; echo last words >&2; exit 3'\n",
        )
        .args(&["--cores", "2", "w.slurp"])
        .run();
    assert_eq!(run.status, 1, "{}", run.stderr);
    let xs = run
        .stdout
        .lines()
        .find(|l| l.starts_with('x'))
        .unwrap_or("");
    assert_eq!(xs.len(), 1_000_000, "stdout of `big` cut");
    assert!(xs.bytes().all(|b| b == b'x'));
    assert!(run.stderr.contains("to stderr"), "{}", run.stderr);
    assert!(
        run.stderr.contains("loud") && run.stderr.contains("last words"),
        "{}",
        run.stderr
    );
    // The same with output discarded: only stderr's tail is kept.
    let run = Test::new()
        .file(
            "w.slurp",
            "task loud: sh -c 'head -c 300000 /dev/zero | tr -c y y >&2; echo; echo last words >&2; exit 3'\n",
        )
        .args(&["--output", "none", "w.slurp"])
        .run();
    assert_eq!(run.status, 1, "{}", run.stderr);
    assert!(run.stderr.contains("last words"), "{}", run.stderr);
    assert!(run.stderr.len() < 20_000, "the whole of stderr was kept");
}

/// Ctrl-C is never held by such a process: exit 130 at once, nothing left.
#[test]
fn an_escaped_process_does_not_hold_ctrl_c() {
    let (_dir, child, pids) = start_run(
        &[
            ("stray.sh", STRAY),
            (
                "w.slurp",
                "task a: sh -c 'setsid sh stray.sh & echo $$ > pid; sleep 60'\n",
            ),
        ],
        &["w.slurp"],
        &["pid", "stray"],
    );
    let start = Instant::now();
    signal(&child, nix::sys::signal::Signal::SIGINT);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130));
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "Ctrl-C took {:?}",
        start.elapsed()
    );
    assert!(!alive_in_group(pids[0]));
    assert!(!alive(pids[1]), "the stray outlived the run");
}

/// `--halt now`: the first failure stops the tasks still running.
#[test]
fn halt_now_stops_running_tasks() {
    let start = Instant::now();
    let run = Test::new()
        .file(
            "w.slurp",
            "task long: sleep 30\ntask bad: sh -c 'sleep 0.3; exit 4'\n",
        )
        .args(&["--cores", "2", "--halt", "now", "w.slurp"])
        .run();
    assert_eq!(run.status, 1);
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "the long task was not stopped"
    );
    run.stderr_has(&["failed    bad  exit status 4", "cancelled long"]);
}

/// slurp killed with SIGKILL cannot stop its tasks itself: the kernel does
/// (parent-death signal on every rank).
#[test]
fn ranks_die_with_slurp_even_on_sigkill() {
    let (_dir, child, pids) = start_run(
        &[("w.slurp", "task s: sh -c 'echo $$ > pid; exec sleep 60'\n")],
        &["w.slurp"],
        &["pid"],
    );
    signal(&child, nix::sys::signal::Signal::SIGKILL);
    let _ = child.wait_with_output();
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive_in_group(pids[0]) {
        assert!(Instant::now() < deadline, "the rank outlived slurp");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Values a user does not control (file names, stdin, a generated sweep):
/// substituted into a shell line, each is read back by the shell as exactly
/// the value — bare, inside `"..."`, inside `'...'`, inside `$(...)` — and
/// none runs as code; in an exec'd line it is one argv word. `{v:raw}` is
/// pasted as shell text, as asked.
#[test]
fn hostile_values_reach_the_program_exactly_and_never_run() {
    let values = [
        "; touch m1",
        "$(touch m2)",
        "`touch m3`",
        "it's",
        "q\"d",
        "*",
        "a|b",
        "&& touch m4",
        "two\nlines",
        "",
        "~",
        "a  b",
        "back\\slash",
        "$HOME",
        "'; touch m5; '",
        "\"; touch m6; \"",
    ];
    let list: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    let toml = format!(
        r#"[[task]]
name = "bare"
sweep = {{ v = [{list}] }}
command = "printf '%s' {{v}} > bare.{{#}}"

[[task]]
name = "dq"
sweep = {{ v = [{list}] }}
command = "printf '%s' \"{{v}}\" > dq.{{#}}"

[[task]]
name = "sq"
sweep = {{ v = [{list}] }}
command = "printf '%s' '{{v}}' > sq.{{#}}"

[[task]]
name = "sub"
sweep = {{ v = [{list}] }}
command = "printf '%s' \"$(printf '%s' {{v}})\" > sub.{{#}}"

[[task]]
name = "exec"
sweep = {{ v = [{list}] }}
command = ["sh", "-c", "printf '%s' \"$1\" > \"$2\"", "sh", "{{v}}", "exec.{{#}}"]
"#,
        list = list.join(", ")
    );
    let test = Test::new()
        .file("w.toml", &toml)
        .file("r.slurp", "task r[c=touch${IFS}raw-ran]: {c:raw} && true\n");
    let dir = test.path().to_path_buf();
    let slurp = |args: &[&str]| {
        let out = std::process::Command::new(common::binary())
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    slurp(&["--cores", "2", "w.toml"]);
    for (i, want) in values.iter().enumerate() {
        // The shell drops trailing newlines of `$(...)` only.
        for kind in ["bare", "dq", "sq", "sub", "exec"] {
            let got = std::fs::read_to_string(test.path().join(format!("{kind}.{}", i + 1)))
                .unwrap_or_else(|e| panic!("{kind}.{}: {e}", i + 1));
            assert_eq!(&got, want, "{kind} of {want:?}");
        }
    }
    for marker in ["m1", "m2", "m3", "m4", "m5", "m6"] {
        assert!(
            !test.path().join(marker).exists(),
            "a value ran as code: {marker}"
        );
    }
    slurp(&["r.slurp"]);
    assert!(dir.join("raw-ran").exists(), "{{c:raw}} is shell text");
    let check = slurp(&["check", "r.slurp"]);
    assert!(
        check.contains("`{var:raw}` pasted as shell text"),
        "{check}"
    );
}
