//! The GNU parallel front door: `slurp [OPTIONS] COMMAND ::: …` run beside
//! real GNU parallel (Debian's `parallel`, installed by
//! `scripts/test-deps.sh`) on the same invocations, in the same directory,
//! their outputs compared (sorted where parallel promises no order); and
//! hostile values, which must reach the program exactly and never run.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

/// One invocation, the same words for both.
struct Case {
    args: &'static [&'static str],
    stdin: Option<&'static str>,
    /// The output's order is promised (`-k`, or one task at a time).
    ordered: bool,
    /// A shell command run afterwards whose output is compared too (files
    /// the tasks wrote).
    after: Option<&'static str>,
    /// Whether stdout is compared (not where slurp shows more).
    stdout: bool,
}

const fn case(args: &'static [&'static str]) -> Case {
    Case {
        args,
        stdin: None,
        ordered: true,
        after: None,
        stdout: true,
    }
}

const fn unordered(args: &'static [&'static str]) -> Case {
    Case {
        args,
        stdin: None,
        ordered: false,
        after: None,
        stdout: true,
    }
}

const fn stdin(args: &'static [&'static str], input: &'static str) -> Case {
    Case {
        args,
        stdin: Some(input),
        ordered: true,
        after: None,
        stdout: true,
    }
}

const fn then(args: &'static [&'static str], after: &'static str) -> Case {
    Case {
        args,
        stdin: None,
        ordered: true,
        after: Some(after),
        stdout: true,
    }
}

/// Only what `after` prints is compared: `--results`, where slurp also
/// shows the output and parallel 20221122 does not.
const fn files(args: &'static [&'static str], after: &'static str) -> Case {
    Case {
        stdout: false,
        ..then(args, after)
    }
}

const CASES: &[Case] = &[
    // Sources: values, crossed, linked, files, standard input.
    unordered(&["echo", ":::", "a", "b", "c"]),
    unordered(&["echo", "{}", ":::", "a", "b", "c"]),
    // Output as the jobs write it, not held per job.
    unordered(&["-u", "echo", "{}", ":::", "a", "b", "c"]),
    case(&["-u", "-j1", "echo", "{#}", ":::", "a", "b", "c"]),
    case(&["-k", "echo", "{}", ":::", "a", "b", "c"]),
    case(&["-k", "echo", ":::", "a", "b", ":::", "1", "2"]),
    case(&["-k", "echo", "{2}", "{1}", ":::", "a", "b", ":::", "1", "2"]),
    case(&[
        "-k", "echo", "{}", ":::", "a", "b", "c", ":::+", "1", "2", "3",
    ]),
    case(&[
        "-k", "echo", "{1}-{2}", ":::", "a", "b", "c", ":::+", "1", "2",
    ]),
    case(&["-k", "echo", ":::", "a", "b", ":::", "x", ":::+", "1", "2"]),
    case(&["-k", "echo", "::::", "in.txt"]),
    case(&["-k", "echo", "{1}+{2}", "::::", "in.txt", "::::", "in2.txt"]),
    case(&[
        "-k", "echo", "{1}+{2}", "::::", "in.txt", "::::+", "in2.txt",
    ]),
    case(&["-k", "-a", "in.txt", "echo", "from"]),
    case(&["-k", "echo", ":::"]),
    stdin(&["-k", "echo", "[{}]"], "l1\n\nl 2\nlast"),
    stdin(
        &["-k", "echo", "{1}{2}", "::::", "-", ":::", "x", "y"],
        "a\nb\n",
    ),
    stdin(&["-k", "-j1", "echo"], "one\ntwo\n"),
    // Replacement strings.
    case(&[
        "-k",
        "echo",
        "[{.}]",
        "[{/}]",
        "[{//}]",
        "[{/.}]",
        ":::",
        "/a/b.c",
        "d.e.f",
        ".bashrc",
        "a/",
        "/",
        "x y.tar.gz",
        "/x",
    ]),
    case(&[
        "-k", "echo", "{1.}", "{2/}", "{2//}", ":::", "a.b", ":::", "/q/r",
    ]),
    case(&[
        "-k", "echo", "{2.}", "{1/.}", ":::", "dir/x.y", ":::", "a.b.c",
    ]),
    case(&["-k", "echo", "{#}", "{}", ":::", "a", "b", "c"]),
    case(&["-k", "-j1", "echo", "{%}", "{#}", ":::", "a", "b"]),
    case(&["-k", "echo", "x{}y", ":::", "a b", ":::", "c"]),
    case(&["-k", "echo", "{}.log", ":::", "with space", "ünï cödé"]),
    // The words are joined by spaces and read as one line, as parallel
    // gives them to the shell.
    case(&["-k", "echo", "a  b", ":::", "x"]),
    case(&["-k", "printf", "%s\\n", ":::", "one", "two"]),
    case(&["-k", "echo {} | tr a-z A-Z", ":::", "up", "per"]),
    case(&["-k", "echo", "-n", "{}x", ":::", "a", "b"]),
    // File names with spaces, quotes, `$`, `;`.
    case(&[
        "-k", "wc", "-c", "{}", ":::", "a b.txt", "it's.txt", "$d;x.txt",
    ]),
    case(&["-k", "cat", "{}", ":::", "a b.txt", "it's.txt", "$d;x.txt"]),
    then(
        &["-k", "echo {} > {.}.out", ":::", "f1.in", "f 2.in"],
        "cat f1.out 'f 2.out'",
    ),
    // Values that are shell syntax reach the program as written.
    case(&[
        "-k",
        "echo",
        "{}",
        ":::",
        "a;b",
        "$(echo no)",
        "`echo no`",
        "it's",
        "*",
        "|",
        "&& echo no",
        "two\nlines",
    ]),
    case(&[
        "-k",
        "echo {} | cat",
        ":::",
        "a;b",
        "$(echo no)",
        "`echo no`",
        "it's",
        "*",
        "&& echo no",
    ]),
    // Options.
    case(&["-k", "--tag", "echo", "hi", ":::", "a b", "c"]),
    case(&["-k", "--tag", "echo", ":::", "a", ":::", "1", "2"]),
    case(&[
        "-k",
        "--dry-run",
        "gzip",
        "-9",
        "{}",
        ":::",
        "plain.csv",
        "b-2.csv",
    ]),
    case(&[
        "-k",
        "--halt",
        "now,fail=1",
        "-j1",
        "echo {}; exit {}",
        ":::",
        "0",
        "0",
        "3",
        "0",
    ]),
    case(&[
        "-k",
        "--halt",
        "soon,fail=2",
        "-j1",
        "echo {}; exit 1",
        ":::",
        "1",
        "2",
        "3",
        "4",
    ]),
    case(&[
        "-k",
        "--halt",
        "now,success=1",
        "-j1",
        "echo {}; exit {}",
        ":::",
        "1",
        "1",
        "0",
        "1",
    ]),
    case(&[
        "-k",
        "--halt",
        "soon,fail=50%",
        "-j1",
        "echo {}; exit 1",
        ":::",
        "1",
        "2",
        "3",
        "4",
    ]),
    case(&[
        "-k",
        "--halt",
        "2",
        "-j1",
        "echo {}; exit {}",
        ":::",
        "0",
        "5",
        "0",
    ]),
    case(&[
        "-k",
        "--timeout",
        "2",
        "sleep {}; echo {}",
        ":::",
        "0",
        "30",
    ]),
    then(
        &["--retries", "3", "echo x >> tries; false", ":::", "1"],
        "wc -l < tries",
    ),
    files(
        &[
            "-k",
            "--results",
            "res",
            "echo",
            "{}",
            ":::",
            "a/b",
            "c",
            ":::",
            "x",
        ],
        "find res -type f | sort; cat res/1/c/2/x/stdout res/1/a\\\\_b/2/x/seq",
    ),
    then(
        &["-k", "-j1", "--joblog", "jl", "exit {}", ":::", "0", "3"],
        "cut -f1,7,8,9 jl",
    ),
    then(
        &[
            "-k",
            "-j2",
            "echo {} >> slots; echo {%} >> slots",
            ":::",
            "1",
            "2",
            "3",
        ],
        "grep -c . slots",
    ),
];

fn parallel() -> Option<std::path::PathBuf> {
    let found = Command::new("parallel")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    found.then(|| "parallel".into())
}

fn prepare(dir: &Path) {
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    write("in.txt", "a\nb c\n");
    write("in2.txt", "1\n2\n3\n");
    write("a b.txt", "spaces\n");
    write("it's.txt", "quote\n");
    write("$d;x.txt", "dollar\n");
    write("plain.csv", "x\n");
    std::fs::create_dir_all(dir.join(".parallel")).unwrap();
    // GNU parallel's citation notice, once acknowledged, stays quiet.
    write(".parallel/will-cite", "");
}

/// Runs `program ARGS` in `dir`; stdout, then the `after` command's.
fn outcome(program: &Path, case: &Case, dir: &Path) -> (String, i32) {
    let mut command = Command::new(program);
    command
        .args(case.args)
        .current_dir(dir)
        .env("HOME", dir)
        .env("PARALLEL_HOME", dir.join(".parallel"))
        .env_remove("SLURP_RUN_DIR")
        .env_remove("SLURP_DEPTH")
        .stdin(if case.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawn");
    if let Some(input) = case.stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    let output = child.wait_with_output().expect("wait");
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    if !case.stdout {
        text.clear();
    }
    if !case.ordered {
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort();
        text = lines.join("\n");
    }
    if let Some(after) = case.after {
        let then = Command::new("sh")
            .args(["-c", after])
            .current_dir(dir)
            .output()
            .expect("sh");
        text.push_str("\n--- after:\n");
        text.push_str(&String::from_utf8_lossy(&then.stdout));
    }
    (text, output.status.code().unwrap_or(-1))
}

#[test]
fn slurp_does_what_gnu_parallel_does_on_the_same_command_lines() {
    let Some(parallel) = parallel() else {
        eprintln!("skipped: GNU parallel is not installed (scripts/test-deps.sh installs it)");
        return;
    };
    let mut differences = Vec::new();
    for case in CASES {
        let ours = tempfile::tempdir().unwrap();
        let theirs = tempfile::tempdir().unwrap();
        prepare(ours.path());
        prepare(theirs.path());
        let (expected, their_status) = outcome(&parallel, case, theirs.path());
        let (got, our_status) = outcome(&common::binary(), case, ours.path());
        // slurp's exit status is 0, 1 (some task failed) or 2 (bad
        // input); parallel counts failures. Both say whether all went well.
        if expected != got || (their_status == 0) != (our_status == 0) {
            differences.push(format!(
                "{:?}\n  parallel (exit {their_status}):\n{expected}\n  slurp (exit {our_status}):\n{got}",
                case.args
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} invocations differ:\n{}",
        differences.len(),
        CASES.len(),
        differences.join("\n")
    );
}

/// `--dry-run` prints each command as it would run: read back by a shell,
/// it does what parallel's does, whatever quotes each chose.
#[test]
fn a_dry_run_prints_commands_a_shell_runs_as_parallel_would() {
    let Some(parallel) = parallel() else {
        eprintln!("skipped: GNU parallel is not installed (scripts/test-deps.sh installs it)");
        return;
    };
    let args: &[&str] = &[
        "-k",
        "--dry-run",
        "echo",
        "{}",
        ":::",
        "a b",
        "c'd",
        "$x",
        "`id`",
        "a\"b",
        "tab\there",
    ];
    let case = case(args);
    let dir = tempfile::tempdir().unwrap();
    prepare(dir.path());
    let run_back = |program: &Path| {
        let (lines, status) = outcome(program, &case, dir.path());
        assert_eq!(status, 0);
        let ran = Command::new("sh")
            .args(["-c", &lines])
            .current_dir(dir.path())
            .output()
            .unwrap();
        String::from_utf8(ran.stdout).unwrap()
    };
    let theirs = run_back(&parallel);
    let ours = run_back(&common::binary());
    assert_eq!(ours, theirs);
    assert_eq!(ours, "a b\nc'd\n$x\n`id`\na\"b\ntab\there\n");
    assert!(
        !dir.path().join(".slurp").exists(),
        "a dry run runs nothing and records nothing"
    );
}

/// Values that are shell code, in exec'd lines and in every place of a
/// shell line: the program gets exactly the value, and nothing runs.
#[test]
fn hostile_values_reach_the_program_exactly_and_never_run() {
    const VALUES: [&str; 12] = [
        "; rm -rf keep",
        "$(touch pwned)",
        "`touch pwned`",
        "it's",
        "\"dq\"",
        "*",
        "| touch pwned",
        "&& touch pwned",
        "two\nlines",
        "back\\slash",
        " lead",
        "{}",
    ];
    for line in [
        "./show {}",
        "./show {} && true",
        "./show \"{}\" && true",
        "./show '{}' && true",
        "./show x{}y && true",
    ] {
        let mut args = vec!["-k", "-j1", "--", line, ":::"];
        args.extend(VALUES);
        let test = common::Test::new()
            .file("keep/file", "precious")
            .file(
                "show",
                "#!/bin/sh\nfor a; do printf '%s\\0' \"$a\"; done >> got\n",
            )
            .args(&args);
        let show = test.path().join("show");
        std::fs::set_permissions(&show, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        test.run().success();
        let got = std::fs::read(test.path().join("got")).unwrap();
        let got: Vec<String> = got
            .split(|&b| b == 0)
            .filter(|v| !v.is_empty())
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect();
        let want: Vec<String> = VALUES
            .iter()
            .map(|v| match line.contains("x{}y") {
                true => format!("x{v}y"),
                false => v.to_string(),
            })
            .collect();
        assert_eq!(got, want, "{line}");
        assert!(!test.path().join("pwned").exists(), "{line}: a value ran");
        assert_eq!(
            std::fs::read_to_string(test.path().join("keep/file")).unwrap(),
            "precious",
            "{line}"
        );
    }
}

/// The same sources from a workflow file: a sweep over the lines of a file
/// (relative to the workflow, as an include) and over a glob (matched
/// where the tasks run), with the path edits of parallel's strings.
#[test]
fn a_file_sweeps_over_the_lines_of_a_file_and_a_glob_with_path_edits() {
    let run = common::Test::new()
        .file("data/b.csv", "")
        .file("data/a b.csv", "")
        .file("data/skip.txt", "")
        .file("flow/values", "x\ny z\n")
        .file(
            "flow/w.slurp",
            "task z[f=glob(data/*.csv)]: echo {f/.}:{f//}:{f.}\n\
             task l[v=lines(values)] after=z: echo \"<{v}>\" && true\n",
        )
        .args(&["-k", "flow/w.slurp"])
        .run()
        .success();
    assert_eq!(
        run.stdout, "a b:data:data/a b\nb:data:data/b\n<x>\n<y z>\n",
        "{}",
        run.stderr
    );
    common::Test::new()
        .file(
            "w.slurp",
            "task z[f=glob(none/*.csv)]: echo {f}\ntask q[v=lines(nope.txt)]: echo {v}\ntask s[v=1..2]: echo {w/.}\n",
        )
        .args(&["check", "w.slurp"])
        .run()
        .invalid()
        .stderr_has(&[
            "`none/*.csv` matches no path",
            "w.slurp:2:10",
            "cannot read the values in `nope.txt`",
            "unknown variable `{w}`",
            "3 errors",
        ]);
}

/// parallel's options work on a workflow file too: `-k`, `--tag`,
/// `--dry-run`, `--results`, `-j`, `--timeout`, `--retries`.
#[test]
fn parallels_options_apply_to_a_workflow_file() {
    let file = "task s[n=1..4]: sh -c 'sleep 0.$((5 - {n})); echo {n}'\n";
    common::Test::new()
        .file("w.slurp", file)
        .args(&["-k", "-j4", "--tag", "w.slurp"])
        .run()
        .success()
        .stdout_has(&["1\t1\n2\t2\n3\t3\n4\t4\n"]);
    let dry = common::Test::new()
        .file("w.slurp", file)
        .args(&["--dry-run", "w.slurp"])
        .run()
        .success();
    assert_eq!(dry.stdout.lines().count(), 4);
    assert!(
        dry.stdout
            .starts_with("sh -c 'sleep 0.$((5 - 1)); echo 1'\n"),
        "{}",
        dry.stdout
    );
    let test = common::Test::new()
        .file(
            "w.slurp",
            "task a: echo out\ntask b: sh -c 'echo err >&2; exit 3'\n",
        )
        .args(&["-q", "--results", "res", "--retries", "2", "w.slurp"]);
    let run = test.run();
    assert_eq!(run.status, 1);
    assert_eq!(
        std::fs::read_to_string(test.path().join("res/a/stdout")).unwrap(),
        "out\n"
    );
    assert_eq!(
        std::fs::read_to_string(test.path().join("res/b/stderr")).unwrap(),
        "err\n"
    );
    assert!(run.stderr.contains("2 attempts"), "{}", run.stderr);
    let timed = common::Test::new()
        .file(
            "w.slurp",
            "task slow: sleep 30\ntask own time=1m: sleep 1.5\n",
        )
        .args(&["--timeout", "1", "w.slurp"])
        .run();
    assert_eq!(timed.status, 1);
    assert!(
        timed.stderr.contains("1 succeeded, 1 timeout"),
        "{}",
        timed.stderr
    );
}

/// A command line's mistakes are diagnostics before anything runs; a
/// command with no input at a terminal is refused, not left waiting.
#[test]
fn a_bad_command_line_runs_nothing_and_says_why() {
    common::Test::new()
        .args(&["echo", "{3}", ":::", "a", ":::", "b"])
        .run()
        .invalid()
        .stderr_has(&[
            "input source 3",
            "there are 2 input sources",
            "command line:1:6",
        ]);
    common::Test::new()
        .args(&["-j", "zero", "echo", ":::", "a"])
        .run()
        .invalid()
        .stderr_has(&["`-j zero`"]);
    common::Test::new()
        .args(&["--halt", "later", "echo", ":::", "a"])
        .run()
        .invalid()
        .stderr_has(&["not a halt rule"]);
    common::Test::new()
        .args(&["echo", "::::", "missing.txt"])
        .run()
        .invalid()
        .stderr_has(&["cannot read the values in `missing.txt`"]);
    common::Test::new()
        .args(&["-k", "--output", "tag", "echo", ":::", "a"])
        .run()
        .invalid()
        .stderr_has(&["`--keep-order` shows each task's whole output in task order"]);
    let test = common::Test::new().args(&["--", "true", "::::"]);
    test.run().invalid().stderr_has(&["names no file"]);
    assert!(!test.path().join(".slurp").exists());
}

/// `slurp resume` of a command line reruns what failed, with the values it
/// first read from standard input, and appends to the joblog.
#[test]
fn a_command_line_resumes_with_the_values_it_read_from_stdin() {
    let test = common::Test::new()
        .args(&[
            "-q",
            "--joblog",
            "jl",
            "--",
            "test {} != b && echo {} >> done",
        ])
        .stdin("a\nb\nc\n");
    assert_eq!(test.run().status, 1);
    // `a` and `c` run at once, so they may append in either order.
    let done = || {
        let mut lines = test.lines_of("done");
        lines.sort();
        lines
    };
    assert_eq!(done(), ["a", "c"]);
    let resumed = Command::new(common::binary())
        .arg("resume")
        .current_dir(test.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("2 tasks already succeeded"), "{stderr}");
    // Only `b` ran again: still two lines done, four joblog lines.
    assert_eq!(done(), ["a", "c"]);
    let joblog = test.lines_of("jl");
    assert_eq!(joblog.len(), 5, "{joblog:?}");
    assert!(
        joblog[4].ends_with("test b != b && echo b >> done"),
        "{joblog:?}"
    );
}

/// A task whose command is a slurp command line is a slurp inside the
/// task (its slice), not a nested workflow file named like the command.
#[test]
fn a_task_may_run_a_slurp_command_line() {
    let line = format!(
        "task inner: {} -q -k -- echo in-{{}} ::: a b\n",
        common::binary().display()
    );
    common::Test::new()
        .file("w.slurp", &line)
        .args(&["-q", "w.slurp"])
        .run()
        .success()
        .stdout_has(&["in-a\nin-b\n"]);
}
