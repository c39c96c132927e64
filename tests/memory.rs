//! Memory limits that hold: a task past its `mem=` ends `out_of_memory`
//! within a second, its neighbour under its own limit succeeds, retries
//! apply — with a cgroup where one can be made here, and with slurp's
//! watch of resident memory (forced with `SLURP_MEMORY=watch`); by the
//! event loop (no more tasks than cores) and by a reaper thread (one core).

mod common;
use common::Test;

/// Allocates (and touches) N MiB, a little at a time, then says so.
const HOG: &str = r#"import sys, time
chunks = []
for i in range(int(sys.argv[1])):
    chunks.append(bytearray(1 << 20))
    if i % 8 == 0:
        time.sleep(0.005)
print('allocated', sys.argv[1])
"#;

const FLOW: &str = "task big mem=64M retries=1: python3 hog.py 400\n\
task small mem=64M: python3 hog.py 16\n";

fn cgroup_here() -> bool {
    let text = Test::new().args(&["resources"]).run().success().stdout;
    text.contains("limits  a task's mem= held by cgroup")
}

fn check(mechanism: Option<&str>) {
    for cores in ["2", "1"] {
        check_on(mechanism, cores);
    }
}

fn check_on(mechanism: Option<&str>, cores: &str) {
    let mut test = Test::new()
        .file("hog.py", HOG)
        .file("flow.slurp", FLOW)
        .args(&["--cores", cores, "--joblog", "jl", "flow.slurp"]);
    if let Some(m) = mechanism {
        test = test.env("SLURP_MEMORY", m);
    }
    let started = std::time::Instant::now();
    let run = test.run();
    assert_eq!(run.status, 1, "{}", run.stderr);
    // Two attempts of `big`, each stopped within a second of crossing
    // 64 MiB (it would take seconds to reach 400 MiB at this pace).
    assert!(
        started.elapsed().as_secs_f64() < 6.0,
        "--cores {cores}: {:?}",
        started.elapsed()
    );
    assert!(
        run.stdout.contains("allocated 16"),
        "the neighbour ran: {}",
        run.stdout
    );
    assert!(!run.stdout.contains("allocated 400"), "{}", run.stdout);
    assert!(
        run.stderr.contains("out_of_memory big")
            && (run.stderr.contains("over its limit of 64 MiB")
                || run.stderr.contains("at its limit of 64 MiB"))
            && run.stderr.contains("2 attempts"),
        "{}",
        run.stderr
    );
    let json = std::process::Command::new(common::binary())
        .args(["status", "--json"])
        .current_dir(test.path())
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let text = json.to_string();
    assert!(text.contains("\"out_of_memory\""), "{text}");
    // The joblog: killed by SIGKILL, twice.
    let killed = test
        .lines_of("jl")
        .iter()
        .filter(|l| l.split('\t').nth(7) == Some("9"))
        .count();
    assert_eq!(killed, 2);
}

#[test]
fn a_task_past_its_limit_is_stopped_by_the_watch() {
    check(Some("watch"));
}

#[test]
fn a_task_past_its_limit_is_stopped_by_its_cgroup() {
    if !cgroup_here() {
        eprintln!("skipped: no memory cgroup can be made here (not root, no delegation)");
        return;
    }
    check(None);
}

#[test]
fn a_limit_below_what_a_process_needs_is_a_diagnostic() {
    Test::new()
        .file("f.slurp", "task t mem=512K: true\n")
        .args(&["check", "f.slurp"])
        .run()
        .invalid()
        .stderr_has(&["less than a process needs to start", "f.slurp:1"]);
}

#[test]
fn check_and_resources_say_how_limits_hold() {
    Test::new()
        .file("f.slurp", "task t mem=1G: true\n")
        .args(&["check", "f.slurp"])
        .env("SLURP_MEMORY", "watch")
        .run()
        .success()
        .stdout_has(&[
            "`mem=` is a hard limit here: resident memory",
            "SLURP_MEMORY=watch",
        ]);
    Test::new()
        .args(&["resources"])
        .env("SLURP_MEMORY", "watch")
        .run()
        .success()
        .stdout_has(&["limits  a task's mem= held by resident memory"]);
}

/// The cgroup v2 path, on a real v2-only kernel: this machine's memory
/// controller may be bound to v1 (then no cgroup here can take
/// `memory.max`), so `scripts/cgroup-v2-vm.sh` boots Debian's kernel in an
/// emulated guest and runs `tests/vm/cgroup-v2.sh` there: slurp at the
/// root of the hierarchy, alone in a delegated cgroup (it moves itself to
/// a leaf), and sharing its cgroup with another process (it cannot: the
/// watch holds, and nothing is left changed).
#[test]
fn a_task_past_its_limit_is_stopped_by_a_cgroup_v2_in_a_guest() {
    let script = common::repo().join("scripts/cgroup-v2-vm.sh");
    let probe = std::process::Command::new("bash")
        .arg(&script)
        .arg("--probe")
        .output()
        .unwrap();
    if !probe.status.success() {
        eprintln!(
            "skipped: no guest can boot here: no {}",
            String::from_utf8_lossy(&probe.stdout).trim()
        );
        return;
    }
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg(common::binary())
        .arg(common::repo().join("tests/vm/cgroup-v2.sh"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && text.contains("--- end"),
        "the guest did not finish: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let section = |name: &str| {
        let from = text.find(&format!("--- {name}")).unwrap();
        let rest = &text[from + 4 + name.len()..];
        rest[..rest.find("--- ").unwrap()].to_owned()
    };
    // The joblog's run time of each line ending so, in seconds (its
    // fourth field), each killed by `signal` (its eighth).
    let runtimes = |s: &str, command: &str, signal: &str| -> Vec<f64> {
        s.lines()
            .filter(|l| l.ends_with(command))
            .map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                assert_eq!(f[7], signal, "{l}");
                f[3].parse().unwrap()
            })
            .collect()
    };
    let pace = section("pace");
    assert!(
        pace.contains("rc=0"),
        "hog 400 ran whole in the guest: {pace}"
    );
    let free = match runtimes(&pace, "hog 400", "0")[..] {
        [t] => t,
        _ => panic!("hog 400 ran once in the guest: {pace}"),
    };
    for (name, cgroup) in [
        ("root", "/sys/fs/cgroup/slurp-"),
        ("delegated", "/sys/fs/cgroup/job/slurp-"),
    ] {
        let s = section(name);
        assert!(
            s.contains(&format!(
                "held by cgroup v2 memory.max per task (below {cgroup}"
            )),
            "{name}: {s}"
        );
        assert!(s.contains("rc=1"), "{name}: slurp fails the run: {s}");
        assert!(s.contains("allocated 16"), "{name}: the neighbour ran: {s}");
        assert!(!s.contains("allocated 400"), "{name}: {s}");
        assert!(
            s.contains("out_of_memory big")
                && s.contains("killed by the kernel at its limit of 64 MiB")
                && s.contains("(cgroup v2 memory.max), 2 attempts"),
            "{name}: {s}"
        );
        // The joblog: both attempts of `big` killed (signal 9), each
        // before it could have allocated its 400 MiB: sooner than the
        // whole allocation took in the same guest (not a fixed bound: an
        // emulated guest on a busy host runs it at a fraction of the pace).
        let killed = runtimes(&s, "hog 400", "9");
        assert_eq!(killed.len(), 2, "{name}: {s}");
        assert!(
            killed.iter().all(|&t| t < free),
            "{name}: killed after {killed:?} s, 400 MiB took {free} s"
        );
    }
    // What slurp changed to hand memory down, it put back.
    let root = section("root");
    assert!(
        root.contains("left: 0") && root.contains("root subtree: []"),
        "{root}"
    );
    let job = section("delegated");
    assert!(
        job.contains("job subtree: []")
            && job.contains("job left: 0")
            && job.contains("job procs: 0"),
        "{job}"
    );
    // Beside another process, no cgroup can be made: the watch holds.
    let shared = section("shared");
    assert!(
        shared.contains("held by resident memory")
            && shared.contains("systemd-run --user --scope -p Delegate=yes")
            && shared.contains("session subtree: []")
            && shared.contains("session left: 0"),
        "{shared}"
    );
}
