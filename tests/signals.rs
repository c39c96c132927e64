//! Issue 22's signal matrix: Ctrl-C, a second Ctrl-C, SIGTERM and `slurp
//! cancel`, each against tasks that ignore SIGTERM, that escape the task's
//! process group with `setsid` holding its output pipe, that are nested
//! workflows (in-process), and that are slurps run as separate processes
//! two and three deep. Every time: exit 130 within the grace (1 s here)
//! plus a second, and no process of any task left alive.

mod common;
use std::time::{Duration, Instant};

use common::{alive, binary, signal, start_run};
use nix::sys::signal::Signal;

/// A leaf that ignores SIGTERM (its `sleep` too), recording its pid.
const STUBBORN: &str =
    "task leaf: sh -c 'trap \"\" TERM; echo $$ > leaf.pid; while :; do sleep 0.1; done'\n";

/// A kind of task: the files of its run, and the pid files its processes
/// write.
type Kind = (Vec<(&'static str, String)>, Vec<&'static str>);

#[derive(Clone, Copy, Debug)]
enum How {
    Interrupt,
    InterruptTwice,
    Terminate,
    Cancel,
}

fn case(files: &[(&str, String)], pids: &[&str], how: How) {
    let files: Vec<(&str, &str)> = files.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let (dir, child, pids) = start_run(&files, &["--grace", "1s", "w.slurp"], pids);
    let start = Instant::now();
    match how {
        How::Interrupt => signal(&child, Signal::SIGINT),
        How::InterruptTwice => {
            signal(&child, Signal::SIGINT);
            std::thread::sleep(Duration::from_millis(100));
            signal(&child, Signal::SIGINT);
        }
        How::Terminate => signal(&child, Signal::SIGTERM),
        How::Cancel => {
            let out = std::process::Command::new(binary())
                .arg("cancel")
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let output = child.wait_with_output().unwrap();
    let took = start.elapsed();
    let what = format!("{how:?} with {:?}", files.last().map(|f| f.1));
    assert_eq!(
        output.status.code(),
        Some(130),
        "{what}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(took < Duration::from_secs(3), "{what}: took {took:?}");
    for pid in pids {
        assert!(!alive(pid), "{what}: process {pid} survived");
    }
}

#[test]
fn every_stop_ends_every_kind_of_task_in_time_with_nothing_left() {
    let bin = binary().display().to_string();
    let stray = "trap '' TERM\necho $$ > stray.pid\nexec sleep 97\n".to_owned();
    let kinds: Vec<Kind> = vec![
        // Ignores SIGTERM.
        (vec![("w.slurp", STUBBORN.to_owned())], vec!["leaf.pid"]),
        // Escapes with setsid and holds the pipe.
        (
            vec![
                ("stray.sh", stray.clone()),
                (
                    "w.slurp",
                    "task a: sh -c 'setsid sh stray.sh & echo $$ > leaf.pid; sleep 60'\n"
                        .to_owned(),
                ),
            ],
            vec!["leaf.pid", "stray.pid"],
        ),
        // A nested workflow, in-process.
        (
            vec![
                ("leaf.slurp", STUBBORN.to_owned()),
                ("w.slurp", "task n: slurp leaf.slurp\n".to_owned()),
            ],
            vec!["leaf.pid"],
        ),
        // slurp as a separate process, two deep.
        (
            vec![
                ("leaf.slurp", STUBBORN.to_owned()),
                (
                    "w.slurp",
                    format!("task mid: sh -c 'exec {bin} leaf.slurp'\n"),
                ),
            ],
            vec!["leaf.pid"],
        ),
        // Three deep.
        (
            vec![
                ("leaf.slurp", STUBBORN.to_owned()),
                (
                    "mid.slurp",
                    format!("task mid: sh -c 'exec {bin} leaf.slurp'\n"),
                ),
                (
                    "w.slurp",
                    format!("task top: sh -c 'exec {bin} mid.slurp'\n"),
                ),
            ],
            vec!["leaf.pid"],
        ),
    ];
    for (files, pids) in &kinds {
        for how in [
            How::Interrupt,
            How::InterruptTwice,
            How::Terminate,
            How::Cancel,
        ] {
            case(files, pids, how);
        }
    }
}
