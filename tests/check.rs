//! `slurp check`: summaries of good files, and a precise diagnostic (file,
//! line, labelled span, code, help) for every kind of bad input.

mod common;
use common::Test;

/// A fixed instance, so messages do not depend on this machine.
const INSTANCE: &[&str] = &["--cores", "8", "--gpus", "2", "--mem", "16G"];

fn check(files: &[(&str, &str)]) -> common::Run {
    let mut test = Test::new();
    for (name, text) in files {
        test = test.file(name, text);
    }
    test.args(&["check"])
        .args(INSTANCE)
        .args(&[files[0].0])
        .run()
}

#[test]
fn summary_counts_tasks_edges_nesting_and_shell_lines() {
    check(&[
        (
            "w.slurp",
            "6 0 echo a\ntask prep: ./prep\ntask sim[s=1..10] after=prep: ./sim {s}\ntask sub cores=2: slurp child.slurp\nsort x | uniq\n",
        ),
        ("child.slurp", "echo child\n"),
    ])
    .success()
    .stdout_has(&[
        "w.slurp: ok",
        "14 at the top level from 5 lines; 15 in all, across 2 workflows",
        "1 allocation at the top level, nesting depth 1",
        "10 edges",
        "1 line run through /bin/sh -c:",
        "w.slurp:5  `|` pipe",
        "instance      8 cores, 2 GPUs, 16 GiB",
    ]);
}

#[test]
fn unknown_attribute_suggests_the_near_one() {
    check(&[("w.slurp", "task a core=2: echo\n")])
        .invalid()
        .stderr_has(&[
            "slurp::unknown_attribute",
            "unknown attribute `core`",
            "[w.slurp:1:8]",
            "did you mean `cores`?",
        ]);
}

#[test]
fn bad_number_size_and_duration() {
    check(&[(
        "w.slurp",
        "task a cores=two: x\ntask b mem=2X: x\ntask c time=90: x\n",
    )])
    .invalid()
    .stderr_has(&[
        "slurp::bad_number",
        "bad `cores`: `two` is not a whole number",
        "[w.slurp:1:14]",
        "slurp::bad_size",
        "[w.slurp:2:12]",
        "slurp::bad_duration",
        "bad `time`: `90` has no unit",
        "[w.slurp:3:13]",
        "3 errors",
    ]);
}

#[test]
fn bad_value_after_substitution_names_the_instance() {
    check(&[("w.slurp", "task a[c=1,x] cores={c}: echo\n")])
        .invalid()
        .stderr_has(&["bad `cores`: `x` is not a whole number (in task `a[x]`, where it is `x`)"]);
}

#[test]
fn legacy_ncores_and_singlenode() {
    check(&[(
        "w.slurp",
        "0 1 echo zero\nabc 1 echo fine\n4x 0 echo\n2 3 echo\n5 1\n",
    )])
    .invalid()
    .stderr_has(&[
        "slurp::legacy_ncores",
        "NCORES is 0",
        "[w.slurp:1:1]",
        "slurp::legacy_incomplete",
        "legacy line is missing COMMAND",
        "[w.slurp:5:1]",
        "2 errors",
    ]);
}

/// Issue 23: a line is legacy only as `NUMBER 0|1 COMMAND...`; commands
/// that start with a digit are plain, and a line that looks almost legacy
/// gets a note.
#[test]
fn digit_led_commands_are_plain_lines() {
    let test = Test::new()
        .file(
            "w.slurp",
            "7z a x.7z dir\n2to3 -w f.py\n4 2 ./sim\n2 1 echo legacy\n",
        )
        .args(&["jobspec", "w.slurp"]);
    let run = test.run().success();
    let argvs: Vec<serde_json::Value> = run
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["tasks"][0]["command"].clone()
        })
        .collect();
    assert_eq!(
        argvs,
        [
            serde_json::json!(["7z", "a", "x.7z", "dir"]),
            serde_json::json!(["2to3", "-w", "f.py"]),
            serde_json::json!(["4", "2", "./sim"]),
            serde_json::json!(["echo", "legacy"]),
        ]
    );
    check(&[("w.slurp", "7z a x.7z dir\n4 2 ./sim\n")])
        .success()
        .stdout_has(&[
            "w.slurp:2 starts with a number but is not `NCORES 0|1 COMMAND`: it runs the program `4`",
        ]);
}

#[test]
fn unknown_dependency_suggests_a_name() {
    check(&[("w.slurp", "task prepare: x\ntask b after=prepar: y\n")])
        .invalid()
        .stderr_has(&[
            "slurp::unknown_dependency",
            "no task named `prepar`",
            "[w.slurp:2:14]",
            "did you mean `prepare`?",
        ]);
}

#[test]
fn dependency_on_a_missing_instance_says_what_exists() {
    check(&[(
        "w.slurp",
        "task sim[s=1..5]: x\ntask post[s=1..6] after=sim[{s}]: y\n",
    )])
    .invalid()
    .stderr_has(&["no task `sim[6]` (needed by `post[6]`)", "`sim` has s=1..5"]);
}

#[test]
fn ambiguous_dependency_on_a_multi_variable_sweep() {
    check(&[(
        "w.slurp",
        "task fit[a=1,2 b=x,y]: x\ntask p after=fit[1]: y\n",
    )])
    .invalid()
    .stderr_has(&[
        "slurp::ambiguous_dependency",
        "`fit` gives 1 value(s) but `fit` sweeps over 2 variables (a, b)",
        "`fit[*,*]`",
    ]);
}

#[test]
fn dependency_cycle_prints_the_cycle() {
    check(&[(
        "w.slurp",
        "task a after=c: x\ntask b after=a: x\ntask c after=b: x\n",
    )])
    .invalid()
    .stderr_has(&[
        "slurp::dependency_cycle",
        "dependency cycle: a → c → b → a",
        "`a` waits here",
    ]);
}

#[test]
fn a_task_waiting_for_itself_is_a_cycle() {
    check(&[("w.slurp", "task s[i=1..3] after=s[{i}]: x\n")])
        .invalid()
        .stderr_has(&["dependency cycle: s[1] → s[1]"]);
}

#[test]
fn duplicate_task_name_points_at_both() {
    check(&[("w.slurp", "task a: x\ntask a[i=1..2]: y\n")])
        .invalid()
        .stderr_has(&[
            "slurp::duplicate_task",
            "task `a` is defined twice",
            "first defined here",
            "defined again here",
            // The mistake is the second definition: the header points there
            // (issue 22, item 15), as rustc does.
            "w.slurp:2:6]",
        ]);
}

#[test]
fn missing_include_and_nested_file() {
    check(&[(
        "w.slurp",
        "include \"gone.slurp\"\ntask sub cores=2: slurp nowhere.slurp\n",
    )])
    .invalid()
    .stderr_has(&[
        "slurp::missing_file",
        "cannot read file `gone.slurp`: no such file",
        "cannot read file `nowhere.slurp`: no such file",
        "[w.slurp:2:25]",
    ]);
}

#[test]
fn missing_top_level_file() {
    Test::new()
        .args(&["check", "nope.slurp"])
        .run()
        .invalid()
        .stderr_has(&["cannot read workflow file `nope.slurp`: no such file"]);
}

#[test]
fn nested_recursion_prints_the_chain() {
    check(&[
        ("a.slurp", "task b cores=2: slurp b.slurp\n"),
        ("b.slurp", "task a: slurp a.slurp\n"),
    ])
    .invalid()
    .stderr_has(&[
        "slurp::nested_recursion",
        "nested workflows never end: a.slurp → b.slurp → a.slurp",
        "[b.slurp:1:15]",
    ]);
}

#[test]
fn include_cycle_prints_the_chain() {
    check(&[
        ("a.slurp", "include b.slurp\n"),
        ("b.slurp", "include a.slurp\n"),
    ])
    .invalid()
    .stderr_has(&[
        "slurp::include_recursion",
        "include cycle: a.slurp → b.slurp → a.slurp",
    ]);
}

#[test]
fn sweep_past_the_limit_says_how_many() {
    Test::new()
        .file("w.slurp", "task big[a=1..100000 b=1..1000]: x\n")
        .args(&["check", "w.slurp"])
        .run()
        .invalid()
        .stderr_has(&[
            "slurp::sweep_too_large",
            "expands to 100000000 tasks, over the limit of 10000000",
            "100000 × 1000",
        ]);
}

#[test]
fn unbalanced_quote_and_invalid_utf8() {
    check(&[("w.slurp", "echo 'unterminated\n")])
        .invalid()
        .stderr_has(&["slurp::unbalanced_quote", "[w.slurp:1:6]"]);
    Test::new()
        .file("w.slurp", b"echo ok\necho caf\xe9\n")
        .args(&["check", "w.slurp"])
        .run()
        .invalid()
        .stderr_has(&["slurp::invalid_utf8", "[w.slurp:2:9]", "iconv"]);
}

#[test]
fn requests_beyond_the_instance_in_every_resource() {
    check(&[(
        "w.slurp",
        "task c ntasks=3 cores=4: x\ntask g gpus=3: x\ntask m mem=20G: x\ntask n nodes=2: x\n",
    )])
    .invalid()
    .stderr_has(&[
        "task `c` can never run: it asks for 12 cores (3 copies × 4 cores) but the instance has 8 cores",
        "task `g` can never run: it asks for 3 GPUs per copy but the instance has 2 GPUs per node",
        "task `m` can never run: it asks for 20 GiB per copy but the instance has 16 GiB per node",
        "task `n` can never run: it asks for 2 nodes but the instance has 1 node",
        "4 errors",
    ]);
}

#[test]
fn nested_child_must_fit_its_slice() {
    check(&[
        ("top.slurp", "task sub cores=2: slurp child.slurp\n"),
        ("child.slurp", "task big cores=3: x\n"),
    ])
    .invalid()
    .stderr_has(&[
        "[child.slurp:1:1]",
        "needs more cores than the slice of nested entry `sub` (2 cores",
    ]);
}

#[test]
fn every_mistake_of_every_file_at_once() {
    check(&[
        (
            "w.slurp",
            "task a corse=1: x\ninclude inc.slurp\n0 1 echo\n",
        ),
        ("inc.slurp", "task b time=soon: y\necho \"open\n"),
    ])
    .invalid()
    .stderr_has(&[
        "[w.slurp:1:8]",
        "[w.slurp:3:1]",
        "[inc.slurp:1:13]",
        "[inc.slurp:2:6]",
        "4 errors",
    ]);
}

#[test]
fn a_task_line_without_its_colon_is_never_run_as_a_command() {
    check(&[("w.slurp", "task sim cores=4 ./sim --seed 3\n")])
        .invalid()
        .stderr_has(&[
            "task line has no `: ` between its head and its command",
            "quote it: `'task' ...`",
        ]);
}

#[test]
fn slurp_subcommands_in_a_task_are_commands_not_nested_files() {
    check(&[(
        "w.slurp",
        "task s: slurp status\ntask l: slurp log x\ntask r: slurp resources --json\n",
    )])
    .success()
    .stdout_has(&["0 allocations at the top level"]);
}

#[test]
fn policy_is_checked_and_only_for_nested_entries() {
    check(&[
        (
            "w.slurp",
            "task a policy=fcfs: echo\ntask b cores=2 policy=eazy: slurp c.slurp\n",
        ),
        ("c.slurp", "echo\n"),
    ])
    .invalid()
    .stderr_has(&[
        "`policy` only applies to nested entries",
        "unknown policy `eazy`",
    ]);
}

#[test]
fn toml_spec_errors_have_spans() {
    check(&[(
        "w.toml",
        "[[task]]\nname = \"a\"\ncommand = [\"x\"]\ncorse = 2\n",
    )])
    .invalid()
    .stderr_has(&[
        "slurp::unknown_attribute",
        "unknown field `corse`",
        "[w.toml:4:1]",
    ]);
    check(&[(
        "w.toml",
        "[[task]]\nname = \"a\"\ncommand = [\"x\"]\nafter = [\"nope\"]\n",
    )])
    .invalid()
    .stderr_has(&["no task named `nope`", "[w.toml:4:9]"]);
}

#[test]
fn stdin_is_a_workflow() {
    Test::new()
        .stdin("echo one\necho two\n")
        .args(&["check", "--cores", "2", "-"])
        .run()
        .success()
        .stdout_has(&["<stdin>: ok", "2 at the top level"]);
}

#[test]
fn crlf_files_check_like_lf_files() {
    check(&[("w.slurp", "task a: echo a\r\ntask b after=a: echo b\r\n")])
        .success()
        .stdout_has(&["1 edge"]);
}

#[test]
fn braces_beside_non_ascii_characters_are_literal_text() {
    // Issue 22, item 5: a brace next to a multi-byte character once
    // panicked while placeholders were read.
    let file = "task a: echo {é}\ntask b: echo é}\ntask c env=K={é}: sh -c 'echo $K'\ntask d[x=ü]: echo {x}{\n";
    check(&[("u.slurp", file)])
        .success()
        .stdout_has(&["u.slurp: ok"]);
    let run = Test::new()
        .file("u.slurp", file)
        .args(&["--cores", "1", "--output", "tag", "u.slurp"])
        .run()
        .success();
    for line in ["{é}", "é}", "ü{"] {
        assert!(
            run.stdout.lines().any(|l| l.ends_with(line)),
            "no {line:?} in\n{}",
            run.stdout
        );
    }
    assert!(
        run.stdout
            .lines()
            .any(|l| l.ends_with("{é}") && l.contains('c')),
        "{}",
        run.stdout
    );
}

#[test]
fn a_limit_past_a_century_is_refused_before_anything_runs() {
    // Issue 22, item 2: such a limit passed `check` and then panicked at
    // run time (an Instant overflow), leaving slurp deaf.
    check(&[("t.slurp", "task a time=110000000000000d: true\n")])
        .invalid()
        .stderr_has(&[
            "slurp::bad_duration",
            "t.slurp:1:13",
            "longer than 100 years",
        ]);
    Test::new()
        .file("t.slurp", "task a: true\n")
        .args(&["--grace", "99999999999999:00:00", "t.slurp"])
        .run()
        .invalid()
        .stderr_has(&["--grace", "longer than 100 years"]);
}

#[test]
fn a_nul_byte_is_named_at_its_place_before_anything_runs() {
    // Issue 22, item 10: it passed `check` and failed at run time.
    let test = Test::new()
        .file("n.slurp", "task a: echo a\0b\ntask b: echo c\0\n")
        .args(&["n.slurp"]);
    test.run().invalid().stderr_has(&[
        "slurp::nul_byte",
        "holds 2 NUL bytes",
        "n.slurp:1:15",
        "a NUL byte",
    ]);
    assert!(!test.path().join(".slurp").exists(), "nothing ran");
}

#[test]
fn a_mistake_on_a_very_long_line_is_placed_in_words() {
    // Issue 22, item 6: miette panicked drawing a label past column 65,535.
    let line = format!("echo {} 'x\n", "a".repeat(70_000));
    check(&[("long.slurp", &line)]).invalid().stderr_has(&[
        "slurp::unbalanced_quote",
        "at long.slurp:1:70007",
        "too long to show",
    ]);
}

#[test]
fn an_include_chain_too_deep_is_a_diagnostic() {
    // Issue 22, item 7: a chain 5,000 deep exhausted the parser's stack and
    // panicked.
    let mut test = Test::new();
    for i in 0..400 {
        test = test.file(
            &format!("f{i}.slurp"),
            format!("include \"f{}.slurp\"\n", i + 1),
        );
    }
    test = test
        .file("f400.slurp", "echo end\n")
        .args(&["check", "f0.slurp"]);
    test.run().invalid().stderr_has(&[
        "slurp::include_depth",
        "deeper than 256 files",
        "f255.slurp:1:9",
    ]);
}

#[test]
fn devices_directories_and_included_fifos_are_refused_before_reading() {
    // Issue 22, item 9: `include /dev/zero` read gigabytes, an included
    // FIFO blocked for good.
    let test = Test::new().file(
        "w.slurp",
        "include \"/dev/zero\"\ninclude \"ff\"\ninclude \"sub\"\n",
    );
    std::fs::create_dir(test.path().join("sub")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(test.path().join("ff"))
        .status()
        .unwrap();
    assert!(made.success());
    test.args(&["check", "w.slurp"])
        .run()
        .invalid()
        .stderr_has(&[
            "slurp::not_a_file",
            "`/dev/zero` is not a regular file",
            "`ff` is not a regular file",
            "`sub` is a directory",
            "w.slurp:2:9",
        ]);
    Test::new()
        .args(&["check", "/dev/zero"])
        .run()
        .invalid()
        .stderr_has(&["`/dev/zero` is not a regular file"]);
}

#[test]
fn a_workflow_from_a_pipe_still_runs() {
    // `slurp <(generate)`: the workflow itself may be a FIFO, as standard
    // input may (only included FIFOs are refused).
    let test = Test::new().args(&["--cores", "1", "w.fifo"]);
    let fifo = test.path().join("w.fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let writer = std::thread::spawn(move || std::fs::write(fifo, "echo piped\n").unwrap());
    test.run().success().stdout_has(&["piped"]);
    writer.join().unwrap();
}

#[test]
fn a_file_of_thousands_of_mistakes_shows_the_first_fifty_and_counts_the_rest() {
    // Issue 22, item 8: a CSV checked by mistake printed every diagnostic
    // (and found their lines by rescanning the file each time).
    let csv: String = (0..4000)
        .map(|i| format!("{i},{},\"x y,3.5\n", i * 2))
        .collect();
    let run = check(&[("data.csv", &csv)]).invalid();
    assert_eq!(
        run.stderr.matches("slurp::").count(),
        50,
        "{}",
        &run.stderr[..2000]
    );
    let run = run.stderr_has(&["… and 3950 more", "4000 errors"]);
    assert!(
        run.stderr.len() < 100_000,
        "{} bytes of diagnostics",
        run.stderr.len()
    );
}

/// Issue 23: every mistake of a file in one `check`, in line order — a task
/// too big for the instance and a dependency cycle beside the syntax
/// errors, not after they are fixed.
#[test]
fn one_check_finds_every_kind_of_mistake_in_line_order() {
    let run = check(&[(
        "m.slurp",
        "task a cores=99: true\ntask b after=c: x\ntask c after=b: y\ntask d corse=1: z\necho \"open\n",
    )])
    .invalid();
    let at = |what: &str| {
        run.stderr
            .find(what)
            .unwrap_or_else(|| panic!("no {what:?} in\n{}", run.stderr))
    };
    let order = [
        at("[m.slurp:1:1]"),
        at("[m.slurp:2:14]"),
        at("[m.slurp:4:8]"),
        at("[m.slurp:5:6]"),
    ];
    assert!(order.windows(2).all(|p| p[0] < p[1]), "{}", run.stderr);
    for text in [
        "asks for 99 cores",
        "dependency cycle",
        "unknown attribute `corse`",
        "unbalanced",
        "4 errors",
    ] {
        assert!(run.stderr.contains(text), "{text}: {}", run.stderr);
    }
}

/// Issue 22, item 9: 30 files each including the next twice (2^29 reads)
/// once ran 9 minutes into 24 GB; includes are counted as they expand, and
/// a workflow past `--max-tasks` is told once, not once a line.
#[test]
fn an_include_diamond_and_too_many_lines_are_bounded_as_they_expand() {
    let mut files: Vec<(String, String)> = (0..29)
        .map(|i| {
            (
                format!("f{i}.slurp"),
                format!("include f{n}.slurp\ninclude f{n}.slurp\n", n = i + 1),
            )
        })
        .collect();
    files.push(("f29.slurp".into(), "true\n".into()));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let start = std::time::Instant::now();
    check(&refs).invalid().stderr_has(&[
        "slurp::include_count",
        "includes expand to more than 100000 files",
    ]);
    assert!(
        start.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
    let lines: String = (0..100).map(|i| format!("echo {i}\n")).collect();
    let run = Test::new()
        .file("w.slurp", lines)
        .args(&["check", "--max-tasks", "10", "w.slurp"])
        .run()
        .invalid()
        .stderr_has(&[
            "expands past the limit of 10 tasks here (10 before this line)",
            "1 error",
        ]);
    assert_eq!(run.stderr.matches("slurp::").count(), 1, "{}", run.stderr);
}
