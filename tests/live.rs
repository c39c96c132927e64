//! The live instance: tasks submitted to a running slurp — from the shell,
//! from inside its tasks, into nested instances — waited for, cancelled,
//! resumed after a crash; and what it does with requests it should refuse.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Run, binary};
use serde_json::{Value, json};

/// `slurp ARGS` in `dir`, with slurp on PATH for the tasks, outside any
/// other slurp's task.
fn slurp(dir: &Path, args: &[&str]) -> Run {
    let output = command(dir, args).output().expect("run slurp");
    Run {
        status: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn command(dir: &Path, args: &[&str]) -> Command {
    let bin = binary();
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new(bin);
    command
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("PATH", path)
        .env_remove("SLURP_SOCKET")
        .env_remove("SLURP_SCOPE")
        .env_remove("SLURP_RUN_DIR")
        .env_remove("SLURP_DEPTH")
        .stdin(Stdio::null());
    command
}

/// An open instance started with `slurp start ARGS` in a fresh directory;
/// killed when dropped if the test did not end it.
struct Instance {
    dir: tempfile::TempDir,
    run: String,
}

impl Instance {
    fn start(args: &[&str]) -> Instance {
        let dir = tempfile::tempdir().unwrap();
        let mut all = vec!["start"];
        all.extend(args);
        let started = slurp(dir.path(), &all).success();
        Instance {
            run: started.stdout.trim().to_owned(),
            dir,
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn run_dir(&self) -> PathBuf {
        self.path().join(".slurp/runs").join(&self.run)
    }

    fn slurp(&self, args: &[&str]) -> Run {
        slurp(self.path(), args)
    }

    fn connect(&self) -> Connection {
        Connection::to(&self.run_dir().join("socket"))
    }

    /// The process of the instance's slurp, from its journal's header.
    fn pid(&self) -> i32 {
        let journal = std::fs::read_to_string(self.run_dir().join("events.jsonl")).unwrap();
        let header: Value = serde_json::from_str(journal.lines().next().unwrap()).unwrap();
        header["pid"].as_i64().unwrap() as i32
    }

    /// Each task's last state in the journal.
    fn states(&self) -> std::collections::BTreeMap<String, String> {
        states(&self.run_dir())
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if self.run_dir().join("socket").exists() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.pid()),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

fn states(run_dir: &Path) -> std::collections::BTreeMap<String, String> {
    let journal = std::fs::read_to_string(run_dir.join("events.jsonl")).unwrap();
    let mut states = std::collections::BTreeMap::new();
    for line in journal.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        // A start record is the attempt's `running`.
        let state = match record["ev"].as_str() {
            Some("state") => record["to"].as_str().unwrap(),
            Some("start") => "running",
            _ => continue,
        };
        states.insert(
            record["task"].as_str().unwrap().to_owned(),
            state.to_owned(),
        );
    }
    states
}

/// A raw protocol connection.
struct Connection {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Connection {
    fn to(socket: &Path) -> Connection {
        let stream = UnixStream::connect(socket).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        Connection {
            writer: stream.try_clone().unwrap(),
            reader: BufReader::new(stream),
        }
    }

    fn send(&mut self, line: &[u8]) {
        self.writer.write_all(line).unwrap();
        self.writer.write_all(b"\n").unwrap();
    }

    fn read(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(serde_json::from_str(&line).expect("a reply is JSON")),
        }
    }

    fn call(&mut self, request: Value) -> Value {
        self.send(request.to_string().as_bytes());
        loop {
            let reply = self.read().expect("a reply");
            if reply.get("event").is_none() {
                return reply;
            }
        }
    }
}

#[test]
fn a_task_submits_its_own_follow_ups_and_the_run_waits_for_them() {
    // A 3-step adaptive loop: each step decides the next from its own
    // result and submits it into the instance it runs in, no flags given.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("step.sh"),
        r#"n=$1
echo "$n $SLURP_TASK_ID" >> steps
if [ "$n" -lt 3 ]; then
    next=$((n + 1))
    slurp submit "task step$next after=step$n: sh step.sh $next"
fi
"#,
    )
    .unwrap();
    std::fs::write(dir.path().join("loop.slurp"), "task step1: sh step.sh 1\n").unwrap();
    let run = slurp(dir.path(), &["-q", "--cores", "2", "loop.slurp"]).success();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("steps")).unwrap(),
        "1 step1\n2 step2\n3 step3\n",
        "{}",
        run.stderr
    );
    let runs = common::run_dirs(dir.path());
    let states = states(runs.last().unwrap());
    for step in ["step1", "step2", "step3"] {
        assert_eq!(states[step], "succeeded", "{states:?}");
    }
    // `slurp status` knows the submitted tasks as the file's.
    let status = slurp(dir.path(), &["status", "--json"]).success();
    let status: Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(status["counts"]["succeeded"], json!(3), "{status}");
}

#[test]
fn a_nested_instance_takes_submissions_into_its_own_slice_only() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("main.slurp"),
        "task sub cores=2: slurp child.slurp\ntask wide cores=2: true\n",
    )
    .unwrap();
    // Inside the nested entry's instance (2 of the 4 cores), a task adds a
    // 2-core task — which runs in that slice — and tries a 3-core one,
    // which no slice of 2 can ever run.
    std::fs::write(
        dir.path().join("child.slurp"),
        r#"task probe: sh -c 'slurp submit "task extra cores=2: sh -c \"echo \$SLURP_CORES \$SLURP_SCOPE > extra.out\"" > ids; slurp submit "task big cores=3: true" 2> big.err; echo $? > big.status'
"#,
    )
    .unwrap();
    let run = slurp(dir.path(), &["-q", "--cores", "4", "main.slurp"]).success();
    let ids = std::fs::read_to_string(dir.path().join("ids")).unwrap();
    assert_eq!(ids, "sub/extra\n", "{}", run.stderr);
    let states = states(common::run_dirs(dir.path()).last().unwrap());
    assert_eq!(states["sub/extra"], "succeeded", "{states:?}");
    assert!(!states.contains_key("sub/big") && !states.contains_key("big"));
    // The slice's cores, as the nested entry got them.
    let journal = std::fs::read_to_string(
        common::run_dirs(dir.path())
            .last()
            .unwrap()
            .join("events.jsonl"),
    )
    .unwrap();
    let cores_of = |task: &str| -> Vec<u64> {
        journal
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|r| r["ev"] == "start" && r["task"] == task)
            .map(|r| {
                r["cores"][0]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c.as_u64().unwrap())
                    .collect()
            })
            .unwrap()
    };
    let slice = cores_of("sub");
    let extra = cores_of("sub/extra");
    assert!(
        extra.iter().all(|c| slice.contains(c)),
        "sub/extra ran on {extra:?}, outside its slice {slice:?}"
    );
    let out = std::fs::read_to_string(dir.path().join("extra.out")).unwrap();
    assert!(out.trim_end().ends_with("sub/"), "{out}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("big.status"))
            .unwrap()
            .trim(),
        "2"
    );
    let big = std::fs::read_to_string(dir.path().join("big.err")).unwrap();
    assert!(
        big.contains("task `big` can never run") && big.contains("the slice of nested entry `sub`"),
        "{big}"
    );
}

#[test]
fn wait_exits_as_the_tasks_ended() {
    let instance = Instance::start(&["--cores", "2"]);
    let ids = instance
        .slurp(&[
            "submit",
            "task ok: true",
            "task seven: sh -c 'exit 7'",
            "task slow time=1s: sleep 30",
            "task killed: sh -c 'kill -9 $$'",
            "task after_seven after=seven: true",
        ])
        .success();
    assert_eq!(ids.stdout, "ok\nseven\nslow\nkilled\nafter_seven\n");
    let code = |tasks: &[&str]| {
        let mut args = vec!["wait"];
        args.extend(tasks);
        instance.slurp(&args).status
    };
    assert_eq!(code(&["ok"]), 0);
    assert_eq!(code(&["seven"]), 7);
    assert_eq!(code(&["slow"]), 124);
    assert_eq!(code(&["killed"]), 137);
    // The first task that did not succeed gives the status.
    assert_eq!(code(&["ok", "seven", "slow"]), 7);
    // Skipped: it never ran.
    assert_eq!(code(&["after_seven"]), 1);
    instance
        .slurp(&["wait", "nope"])
        .invalid()
        .stderr_has(&["no task `nope`"]);
    // A mistake is the file's diagnostic, and nothing is added.
    instance
        .slurp(&["submit", "task fine: true\ntask bad cores=zero: true"])
        .invalid()
        .stderr_has(&["submitted#", "cores", "bad"]);
    assert!(!instance.states().contains_key("fine"));
    assert_eq!(instance.slurp(&["close", "--wait"]).status, 1);
}

#[test]
fn cancel_stops_one_task_and_the_run_goes_on() {
    let instance = Instance::start(&["--cores", "1"]);
    instance
        .slurp(&[
            "submit",
            "task long: sleep 60",
            "task queued: true",
            "task other: true",
        ])
        .success();
    // `long` holds the one core; `queued` waits behind it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while instance.states().get("long").map(String::as_str) != Some("running") {
        assert!(Instant::now() < deadline, "long never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    instance
        .slurp(&["cancel", &instance.run, "queued", "long"])
        .success()
        .stderr_has(&["queued: cancelled", "long: stopping"]);
    assert_eq!(instance.slurp(&["wait", "long"]).status, 1);
    assert_eq!(instance.slurp(&["wait", "other"]).status, 0);
    let states = instance.states();
    assert_eq!(states["queued"], "cancelled");
    assert_eq!(states["long"], "cancelled");
    assert_eq!(states["other"], "succeeded");
    assert_eq!(instance.slurp(&["close", "--wait"]).status, 1);
}

#[test]
fn watch_streams_the_events_of_a_run() {
    let instance = Instance::start(&["--cores", "1"]);
    let mut watch = command(instance.path(), &["watch"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Value>::new()));
    let reader = {
        let seen = seen.clone();
        let stdout = watch.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let event = serde_json::from_str(&line.unwrap()).expect("an event is JSON");
                seen.lock().unwrap().push(event);
            }
        })
    };
    // Tasks until the watcher, which subscribes on its own time, has seen
    // one from its start to its end.
    let complete = |name: &str| {
        let events = seen.lock().unwrap();
        let of = |event: &str, state: &str| {
            events.iter().any(|e| {
                e["task"] == name
                    && e["event"] == event
                    && e["state"].as_str().unwrap_or("") == state
            })
        };
        of("start", "") && of("state", "running") && of("state", "succeeded")
    };
    let mut watched = None;
    for i in 0..100 {
        let name = format!("p{i}");
        instance
            .slurp(&["submit", &format!("task {name}: true")])
            .success();
        assert_eq!(instance.slurp(&["wait", &name]).status, 0);
        std::thread::sleep(Duration::from_millis(20));
        if complete(&name) {
            watched = Some(name);
            break;
        }
    }
    assert!(watched.is_some(), "{:?}", seen.lock().unwrap());
    // The watch ends with the run.
    instance.slurp(&["close", "--wait"]).success();
    assert!(watch.wait().unwrap().success());
    reader.join().unwrap();
    let events = seen.lock().unwrap();
    assert!(events.iter().all(|e| e["t"].is_u64()), "{events:?}");
}

#[test]
fn resume_after_kill_9_reruns_submitted_tasks_that_had_not_succeeded() {
    let instance = Instance::start(&["--cores", "2"]);
    instance
        .slurp(&[
            "submit",
            "task done: sh -c 'echo run >> done.runs'",
            // The first attempt hangs; the rerun finds its marker and ends.
            "task hang: sh -c 'if [ -e marker ]; then echo rerun >> hang.runs; exit 0; fi; touch marker; sleep 60'",
        ])
        .success();
    assert_eq!(instance.slurp(&["wait", "done"]).status, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !instance.path().join("marker").exists() {
        assert!(Instant::now() < deadline, "hang never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = instance.pid();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    while common::alive(pid) {
        std::thread::sleep(Duration::from_millis(10));
    }
    // The resumed instance is open too: close it once `hang` ran again.
    let resumed = command(instance.path(), &["resume"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !instance.path().join("hang.runs").exists() {
        assert!(Instant::now() < deadline, "hang was not rerun");
        std::thread::sleep(Duration::from_millis(20));
    }
    let runs = common::run_dirs(instance.path());
    let latest = runs.last().unwrap().file_name().unwrap().to_owned();
    let latest = latest.to_string_lossy().into_owned();
    assert_ne!(latest, instance.run);
    instance
        .slurp(&["close", "--wait", "--run", &latest])
        .success();
    let output = resumed.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    // `done` succeeded before the crash and did not run again.
    assert_eq!(
        std::fs::read_to_string(instance.path().join("done.runs")).unwrap(),
        "run\n"
    );
    let states = states(runs.last().unwrap());
    assert_eq!(states["done"], "succeeded");
    assert_eq!(states["hang"], "succeeded");
}

#[test]
fn another_user_cannot_connect() {
    if !nix::unistd::getuid().is_root() || Command::new("setpriv").arg("--help").output().is_err() {
        eprintln!("skipped: needs root and setpriv to act as another user");
        return;
    }
    let instance = Instance::start(&["--cores", "1"]);
    // Past the run directory's 0700 (the first wall), to reach the second:
    // the instance checks the peer's uid and answers nobody else.
    let mut dir = instance.run_dir();
    loop {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777));
        if dir == instance.path() || !dir.pop() {
            break;
        }
    }
    let socket = instance.run_dir().join("socket");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let other = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(binary())
        .args(["submit", "--run"])
        .arg(instance.run_dir())
        .arg("task intruder: touch intruded")
        .current_dir(instance.path())
        .env_remove("SLURP_SOCKET")
        .output()
        .unwrap();
    assert_eq!(other.status.code(), Some(2), "{other:?}");
    let stderr = String::from_utf8_lossy(&other.stderr);
    assert!(stderr.contains("without an answer"), "{stderr}");
    // Its owner still can, and nothing of the other's was taken.
    instance.slurp(&["submit", "task mine: true"]).success();
    instance.slurp(&["close", "--wait"]).success();
    assert!(!instance.states().contains_key("intruder"));
    assert!(!instance.path().join("intruded").exists());
}

/// A small deterministic generator for the mutations.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn ten_thousand_bad_requests_each_get_a_reply_and_the_instance_goes_on() {
    let instance = Instance::start(&["--cores", "1"]);
    let seeds: Vec<&[u8]> = vec![
        br#"{"op":"hello"}"#,
        br#"{"id":1,"op":"submit","text":"true"}"#,
        br#"{"id":2,"op":"wait","tasks":["@1"]}"#,
        br#"{"id":3,"op":"status","scope":""}"#,
        br#"{"id":4,"op":"cancel","tasks":["x"]}"#,
        br#"{"id":5,"op":"submit","text":"task a[i=1..3] cores=1: true","scope":""}"#,
        br#"{"v":1,"id":"s","op":"status","tasks":["a[1]"]}"#,
    ];
    let mut rng = XorShift(0x5eed_1234_abcd_ef01);
    let mut lines: Vec<Vec<u8>> = Vec::new();
    for n in 0..10_000 {
        let line: Vec<u8> = match n % 4 {
            // Random bytes, invalid UTF-8 included.
            0 => (0..rng.below(200)).map(|_| rng.next() as u8).collect(),
            // A valid request mutated: bytes flipped, cut, repeated.
            _ => {
                let mut line = seeds[rng.below(seeds.len())].to_vec();
                for _ in 0..1 + rng.below(4) {
                    if line.is_empty() {
                        break;
                    }
                    let at = rng.below(line.len());
                    match rng.below(3) {
                        0 => line[at] = rng.next() as u8,
                        1 => {
                            line.remove(at);
                        }
                        _ => {
                            let b = line[at];
                            line.insert(at, b);
                        }
                    }
                }
                line
            }
        };
        // One request per line: no newline inside, none blank.
        let mut line: Vec<u8> = line.into_iter().filter(|&b| b != b'\n').collect();
        if line.iter().all(u8::is_ascii_whitespace) {
            line = b"x".to_vec();
        }
        lines.push(line);
    }
    // And one far too large.
    lines.push(vec![b'a'; 5 << 20]);
    // A mutation may have made a valid `wait` on a task that never ends
    // within the test, whose reply would come late: none here can run
    // long, and the connection is drained with a timeout below.
    let mut connection = instance.connect();
    let mut writer = connection.writer.try_clone().unwrap();
    let sent = lines.len();
    let feeder = std::thread::spawn(move || {
        for line in &lines {
            writer.write_all(line).unwrap();
            writer.write_all(b"\n").unwrap();
        }
    });
    let mut replies = 0;
    let mut too_large = 0;
    while replies < sent {
        let Some(reply) = connection.read() else {
            panic!("the connection closed after {replies} of {sent} replies");
        };
        if reply.get("event").is_some() {
            continue;
        }
        assert!(reply["ok"].is_boolean(), "{reply}");
        if reply["error"]["code"] == "request_too_large" {
            too_large += 1;
        }
        replies += 1;
    }
    feeder.join().unwrap();
    assert_eq!(too_large, 1);
    // The instance is alive and well.
    let reply = connection.call(json!({"op": "submit", "text": "task after_fuzz: true"}));
    assert_eq!(reply["ok"], json!(true), "{reply}");
    assert_eq!(instance.slurp(&["wait", "after_fuzz"]).status, 0);
    let closed = instance.slurp(&["close", "--wait"]);
    assert!(
        closed.status == 0 || closed.status == 1,
        "{}",
        closed.stderr
    );
    assert!(!instance.run_dir().join("socket").exists());
}

#[test]
fn jobspecs_submit_as_the_task_lines_they_mean() {
    let instance = Instance::start(&["--cores", "2"]);
    std::fs::write(
        instance.path().join("f.slurp"),
        "task prep: sh -c 'sleep 0.2; echo prep >> order'\ntask sim[i=1..2] cores=2 after=prep: sh -c 'echo sim{i} >> order'\n",
    )
    .unwrap();
    let jobspecs = instance.slurp(&["jobspec", "f.slurp"]).success().stdout;
    std::fs::write(instance.path().join("f.jsonl"), &jobspecs).unwrap();
    let ids = instance
        .slurp(&["submit", "--jobspec", "f.jsonl"])
        .success()
        .stdout;
    // `sim[1]` is no task line's name: those get the instance's own.
    assert_eq!(ids.lines().count(), 3);
    assert_eq!(ids.lines().next(), Some("prep"));
    instance.slurp(&["close", "--wait"]).success();
    let order = std::fs::read_to_string(instance.path().join("order")).unwrap();
    assert_eq!(order.lines().next(), Some("prep"), "{order}");
    assert_eq!(order.lines().count(), 3);
}

#[test]
fn a_jobspec_slurp_cannot_carry_is_refused_at_its_line_and_nothing_is_submitted() {
    let instance = Instance::start(&["--cores", "1"]);
    let good = r#"{"version":1,"resources":[{"type":"slot","count":1,"with":[{"type":"core","count":1}]}],"tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],"attributes":{"system":{"job":{"name":"fine"}}}}"#;
    let bad = r#"{"version":1,"resources":[{"type":"slot","count":1,"with":[{"type":"core","count":1},{"type":"memory","count":2}]}],"tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}]}"#;
    std::fs::write(
        instance.path().join("bad.jsonl"),
        format!("{good}\n{bad}\n"),
    )
    .unwrap();
    instance
        .slurp(&["submit", "--jobspec", "bad.jsonl"])
        .invalid()
        .stderr_has(&[
            "slurp::bad_jobspec",
            "jobspec 2 of 2",
            "`memory`",
            "bad.jsonl:2",
            "this jobspec",
            "nothing was submitted",
        ]);
    std::fs::write(
        instance.path().join("broken.jsonl"),
        format!("{good}\n{{\"version\": 1, oops}}\n"),
    )
    .unwrap();
    instance
        .slurp(&["submit", "--jobspec", "broken.jsonl"])
        .invalid()
        .stderr_has(&["slurp::bad_json", "broken.jsonl:2", "nothing was submitted"]);
    // The good jobspec before each mistake was not taken either.
    assert!(
        !instance.states().contains_key("fine"),
        "{:?}",
        instance.states()
    );
    instance.slurp(&["close", "--wait"]);
}

#[test]
fn a_run_directory_too_deep_for_a_socket_path_still_listens() {
    let dir = tempfile::tempdir().unwrap();
    // Past the 108 bytes a socket path may hold.
    let deep = dir.path().join("d".repeat(60)).join("e".repeat(40));
    std::fs::create_dir_all(&deep).unwrap();
    let run = slurp(&deep, &["start", "--cores", "1"]).success().stdout;
    let socket = deep.join(".slurp/runs").join(run.trim()).join("socket");
    let target = std::fs::read_link(&socket).expect("the socket is a link to a short path");
    assert!(target.as_os_str().len() < 108, "{}", target.display());
    assert_eq!(
        slurp(&deep, &["submit", "task a: true"]).success().stdout,
        "a\n"
    );
    assert_eq!(slurp(&deep, &["wait", "a"]).status, 0);
    slurp(&deep, &["close", "--wait"]).success();
    assert!(!socket.exists() && !target.exists(), "left behind");
}

#[test]
fn the_adaptive_example_runs_until_its_error_is_small() {
    let dir = tempfile::tempdir().unwrap();
    for file in ["adaptive.slurp", "step.sh"] {
        std::fs::copy(
            common::repo().join("examples/live").join(file),
            dir.path().join(file),
        )
        .unwrap();
    }
    let run = slurp(dir.path(), &["--cores", "2", "adaptive.slurp"]).success();
    // 1000 → 500 → 250 → 125 → 62: four steps, each submitted by the last.
    assert_eq!(
        run.stdout, "step 1: error 500\nstep 2: error 250\nstep 3: error 125\nstep 4: error 62\n",
        "{}",
        run.stderr
    );
    let states = states(common::run_dirs(dir.path()).last().unwrap());
    assert_eq!(states.len(), 4, "{states:?}");
}
