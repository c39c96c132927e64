//! `slurp policy train`: a site's own model in one command — evolved in
//! slurp itself, or with the PyTorch trainer built into the binary.

mod common;
use std::sync::Arc;

use common::Test;
use slurp_fair::Sight;

/// Whether this machine's python3 can import `modules` (`"numpy, onnx"`).
fn python_has(modules: &str) -> bool {
    std::process::Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs the trainer's model tool `fair/trainer/SCRIPT` with `args` (it
/// must succeed); `false`, having said why, where python3 lacks the numpy
/// and onnx it needs.
fn model_tool(script: &str, args: &[&std::ffi::OsStr]) -> bool {
    if !python_has("numpy, onnx") {
        eprintln!("skipped: needs python3 with numpy and onnx (pip install onnx)");
        return false;
    }
    let status = std::process::Command::new("python3")
        .arg(common::repo().join("fair/trainer").join(script))
        .args(args)
        .status()
        .unwrap();
    assert!(status.success(), "{script} failed");
    true
}

/// Whether this machine's python3 has what the trainer needs.
fn pytorch() -> bool {
    python_has("torch, numpy, onnx")
}

#[test]
fn without_pytorch_it_says_what_to_install() {
    // A real Python without PyTorch: a fresh virtual environment.
    let test = Test::new();
    let venv = test.path().join("venv");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipped: python3 -m venv is not available here");
        return;
    }
    let python = venv.join("bin/python3");
    test.args(&[
        "policy",
        "train",
        "gen:small:1:2000",
        "-o",
        "m.onnx",
        "--method",
        "ppo",
        "--python",
        python.to_str().unwrap(),
    ])
    .run()
    .invalid()
    .stderr_has(&[
        "lacks torch, numpy, onnx",
        "hint: pip install -r",
        "requirements.txt",
    ]);
}

#[test]
fn it_trains_writes_a_v2_model_and_judges_it_on_the_held_out_quarter() {
    if !pytorch() {
        eprintln!(
            "skipped: needs python3 with torch, numpy and onnx (pip install -r fair/trainer/requirements.txt)"
        );
        return;
    }
    let test = Test::new().args(&[
        "policy",
        "train",
        "gen:small:1:3000",
        "-o",
        "site.onnx",
        "--method",
        "ppo",
        "--epochs",
        "2",
        "--clone-iters",
        "30",
        "--judge-samples",
        "2",
        "--threads",
        "1",
    ]);
    let run = test.run().success();
    assert!(run.stderr.contains("epoch 1 reward"), "{}", run.stderr);
    assert!(run.stderr.contains("wrote site.onnx"), "{}", run.stderr);
    assert!(
        run.stdout.contains("site.onnx (observation v2)"),
        "{}",
        run.stdout
    );
    assert_eq!(run.stdout.matches("| gen:small:1:3000 |").count(), 4);
    let curve = std::fs::read_to_string(test.path().join("site.onnx.train/run/curve.csv")).unwrap();
    assert_eq!(
        curve.lines().count(),
        3,
        "a header and two epochs:\n{curve}"
    );
    let svg = std::fs::read_to_string(test.path().join("site.onnx.train/curve.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("mean over 25 epochs"));
    let model = slurp_fair::Model::load(&test.path().join("site.onnx"), None).unwrap();
    assert_eq!(model.sight, Sight::V2);
}

#[test]
fn a_hold_out_that_leaves_nothing_to_train_or_judge_on_is_refused() {
    for share in ["0", "100"] {
        Test::new()
            .args(&[
                "policy",
                "train",
                "gen:small:1:2000",
                "-o",
                "m.onnx",
                "--hold-out",
                share,
            ])
            .run()
            .invalid()
            .stderr_has(&[&format!("--hold-out {share}: give a share from 1 to 99")]);
    }
}

/// A search small enough for a test: `gen:small:1:3000`, populations of
/// 4 on 2 windows, judged on 2; `more` adds or overrides options.
fn small_search(out: &str, generations: &str, more: &[&str]) -> Test {
    Test::new().args(&small_search_args(out, generations, more))
}

/// [`small_search`]'s arguments.
fn small_search_args<'a>(out: &'a str, generations: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "policy",
        "train",
        "gen:small:1:3000",
        "-o",
        out,
        "--generations",
        generations,
        "--population",
        "4",
        "--windows",
        "2",
        "--judge-samples",
        "2",
    ];
    args.extend_from_slice(more);
    args
}

#[test]
fn evolving_needs_no_python_and_judges_the_model_on_the_held_out_quarter() {
    let test = small_search(
        "site.onnx",
        "2",
        &["--hidden", "2", "--python", "/nonexistent/python3"],
    );
    let run = test.run().success();
    assert!(
        run.stderr.contains("evolving a network of 23 weights"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("generation 2: loss"), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("wrote site.onnx (on its training windows:"),
        "{}",
        run.stderr
    );
    assert!(
        run.stdout.contains("site.onnx (observation v4)"),
        "{}",
        run.stdout
    );
    assert_eq!(run.stdout.matches("| gen:small:1:3000 |").count(), 4);
    let curve = std::fs::read_to_string(test.path().join("site.onnx.train/curve.csv")).unwrap();
    assert_eq!(
        curve.lines().count(),
        3,
        "a header and two generations:\n{curve}"
    );
    let model = slurp_fair::Model::load(&test.path().join("site.onnx"), None).unwrap();
    assert_eq!(model.sight, Sight::V4);
    assert_eq!(model.evaluator(), "direct");
    // It is a policy like any other.
    let policy = format!("fair:{}", test.path().join("site.onnx").display());
    let sim = Test::new()
        .args(&[
            "sim",
            "gen:small:1:3000",
            "--policy",
            &policy,
            "--samples",
            "2",
            "--len",
            "256",
        ])
        .run()
        .success();
    assert!(sim.stdout.contains("site.onnx"), "{}", sim.stdout);
}

#[test]
fn a_search_can_keep_to_one_simulation_model() {
    // Its cells are that model's (with and without EASY), and the model
    // says what it was trained on.
    let test = small_search(
        "ref.onnx",
        "1",
        &["--sim-model", "reference", "--hidden", "2"],
    );
    let run = test.run().success();
    assert!(
        run.stderr.contains(" of 2 cells won"),
        "two cells: the reference model without and with EASY\n{}",
        run.stderr
    );
    // `slurp.trained`, a plain string in the ONNX metadata.
    let bytes = std::fs::read(test.path().join("ref.onnx")).unwrap();
    let said = b"the reference model only";
    assert!(bytes.windows(said.len()).any(|w| w == said));
}

#[test]
fn a_tighter_average_bound_is_recorded_in_the_model_it_searched() {
    let test = small_search("tight.onnx", "1", &["--average-within", "1.0"]);
    test.run().success();
    let bytes = std::fs::read(test.path().join("tight.onnx")).unwrap();
    let said = "averages paid for beyond 1×".as_bytes();
    assert!(bytes.windows(said.len()).any(|w| w == said));
}

/// Starts `slurp policy train` in a fresh directory on a search that would
/// run for minutes (about five generations a second here); its stderr
/// comes line by line through the channel.
fn started_search(
    out: &str,
) -> (
    tempfile::TempDir,
    std::process::Child,
    std::sync::mpsc::Receiver<String>,
) {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(common::binary())
        .args(small_search_args(
            out,
            "100000",
            &["--seconds", "600", "--hidden", "2"],
        ))
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (dir, child, rx)
}

/// Lines from `rx` until one starts with `prefix` (within a minute).
fn lines_until(rx: &std::sync::mpsc::Receiver<String>, prefix: &str) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        match rx.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(line) => {
                let done = line.starts_with(prefix);
                seen.push(line);
                if done {
                    return seen;
                }
            }
            Err(e) => panic!(
                "no line starting {prefix:?} ({e}); seen:\n{}",
                seen.join("\n")
            ),
        }
    }
}

#[test]
fn an_interrupted_search_still_writes_and_judges_the_network_it_kept() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let (dir, mut child, rx) = started_search("site.onnx");
    lines_until(&rx, "generation 2:");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let said = lines_until(&rx, "interrupted: ending the search after generation");
    let rest: Vec<String> = rx.iter().collect();
    let status = child.wait().unwrap();
    let all = format!("{}\n{}", said.join("\n"), rest.join("\n"));
    assert!(status.success(), "{status}: {all}");
    // It stopped within a generation or two of the signal, not at its
    // budget, and went on to write the model and judge it.
    let last: usize = said
        .last()
        .unwrap()
        .trim_start_matches("interrupted: ending the search after generation ")
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!((2..20).contains(&last), "{all}");
    assert!(
        rest.iter()
            .any(|l| l.starts_with("wrote site.onnx (on its training windows:")),
        "{all}"
    );
    let curve = std::fs::read_to_string(dir.path().join("site.onnx.train/curve.csv")).unwrap();
    assert_eq!(curve.lines().count(), 1 + last, "{curve}");
    let model = slurp_fair::Model::load(&dir.path().join("site.onnx"), None).unwrap();
    assert_eq!(model.sight, Sight::V4);
    let bytes = std::fs::read(dir.path().join("site.onnx")).unwrap();
    let note = format!("after {last} generations (stopped by an interrupt)");
    assert!(bytes.windows(note.len()).any(|w| w == note.as_bytes()));
}

#[test]
fn a_second_interrupt_ends_a_search_at_once() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let (dir, mut child, rx) = started_search("site.onnx");
    lines_until(&rx, "generation 1:");
    let pid = Pid::from_raw(child.id() as i32);
    // Two signals of different kinds (two of one kind sent at once may
    // arrive as one), sent together: the second comes long before the
    // search could end its generation and write anything.
    kill(pid, Signal::SIGTERM).unwrap();
    kill(pid, Signal::SIGINT).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status}");
    assert!(!dir.path().join("site.onnx").exists(), "nothing written");
}

/// `--observation` offers every observation slurp knows (v3 on for a
/// search, v1 on for a rollout) and refuses any other name, listing them:
/// the values come from `Sight::ALL`, so a new observation cannot be left
/// out of either command.
#[test]
fn observations_offered_are_those_slurp_knows_and_no_other() {
    let names = |from: usize| {
        Sight::ALL[from..]
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for bad in ["v6", "v11", "V9"] {
        small_search("m.onnx", "1", &["--observation", bad])
            .run()
            .invalid()
            .stderr_has(&[
                &format!("invalid value '{bad}' for '--observation <V>'"),
                &format!("[possible values: {}]", names(2)),
            ]);
        Test::new()
            .args(&[
                "policy",
                "rollout",
                "--teacher",
                "fcfs",
                "--trace",
                "gen:small:1",
                "--out",
                "r",
                "--observation",
                bad,
            ])
            .run()
            .invalid()
            .stderr_has(&[&format!("[possible values: {}]", names(0))]);
    }
    assert_eq!(Sight::ALL[2], Sight::V3);
    // The newest is read as itself: the rollout's episodes say they were
    // observed with it.
    let newest = Sight::ALL.last().unwrap().name();
    let trace = std::fs::read(common::repo().join("sim/tests/data/lublin256-2001-3024.swf"));
    let test = Test::new().file("t.swf", trace.unwrap()).args(&[
        "policy",
        "rollout",
        "--teacher",
        "fcfs",
        "--trace",
        "t.swf",
        "--trajectories",
        "1",
        "--len",
        "32",
        "--out",
        "out",
        "--observation",
        newest,
    ]);
    test.run().success();
    let written = std::fs::read_to_string(test.path().join("out/normalisers.json")).unwrap();
    let written: serde_json::Value = serde_json::from_str(&written).unwrap();
    assert_eq!(written["observation"], newest);
}

#[test]
fn search_options_out_of_range_are_refused_before_the_search() {
    for (option, value, said) in [
        (
            "--average-within",
            "0",
            "--average-within: a positive multiple",
        ),
        (
            "--average-within",
            "inf",
            "--average-within: a positive multiple",
        ),
        ("--gain", "0", "--gain: a positive log ratio"),
        ("--redraw", "0", "--redraw: at least 1 window a trace"),
        // Nothing to confirm against without --init and --validate.
        (
            "--confirm",
            "3",
            "--confirm: a search is confirmed against its start",
        ),
    ] {
        small_search("m.onnx", "1", &[option, value])
            .run()
            .invalid()
            .stderr_has(&[said]);
    }
}

#[test]
fn a_reference_search_from_a_model_trains_its_network_for_committed_choices() {
    let fair_v3 = concat!(env!("CARGO_MANIFEST_DIR"), "/stdlib/policies/fair-v3.onnx");
    let search = |out: &str, from: &str, model: &str| {
        let test = small_search(out, "1", &["--init", from, "--sim-model", model]);
        let run = test.run().success();
        (test, run)
    };
    let (test, run) = search("ref.onnx", fair_v3, "reference");
    assert!(
        run.stdout
            .contains("its own network for the reference model's committed choices"),
        "{}",
        run.stdout
    );
    let load = |p: &std::path::Path| slurp_fair::Model::load(p, None).unwrap();
    let (start, written) = (load(fair_v3.as_ref()), load(&test.path().join("ref.onnx")));
    // fair-v3's network is kept for slurp's model; the searched one (a
    // step from fair-v3's, so not the same) is carried for committed choices.
    assert_eq!(written.layers(), start.layers());
    let committed = written
        .committed_layers(false)
        .expect("a network for committed choices");
    assert_ne!(Some(committed.clone()), start.layers());
    // A search on slurp's model from it keeps that network.
    let (again, _) = search(
        "both.onnx",
        test.path().join("ref.onnx").to_str().unwrap(),
        "slurp",
    );
    let both = load(&again.path().join("both.onnx"));
    assert_eq!(both.committed_layers(false), Some(committed));
    assert_ne!(both.layers(), start.layers());
}

#[test]
fn a_search_with_validation_traces_keeps_its_network_by_them() {
    let test = small_search(
        "v.onnx",
        "2",
        &["--hidden", "2", "--validate", "gen:mid:2:3000"],
    );
    let run = test.run().success();
    assert!(
        run.stderr
            .contains("lowest loss on 2 windows of 1 validation trace (never searched on)"),
        "{}",
        run.stderr
    );
    let bytes = std::fs::read(test.path().join("v.onnx")).unwrap();
    let said = b"kept by its loss on gen:mid:2:3000";
    assert!(bytes.windows(said.len()).any(|w| w == said));
    // A validation trace that cannot be read is refused before any search.
    let bad = small_search("w.onnx", "2", &["--validate", "nope.swf"]);
    bad.run().invalid().stderr_has(&["nope.swf"]);
    assert!(!bad.path().join("w.onnx").exists());
    // More validation windows than training ones, each generation judged
    // on all of them.
    let more = small_search(
        "m.onnx",
        "1",
        &[
            "--hidden",
            "2",
            "--validate",
            "gen:mid:2:3000",
            "--validate-windows",
            "5",
        ],
    );
    more.run().success().stderr_has(&[
        "on 2 windows of the first 75% of 1 trace",
        "lowest loss on 5 windows of 1 validation trace",
    ]);
    // Validation windows without validation traces, or none a trace: said,
    // not ignored.
    for (more, said) in [
        (
            &["--validate-windows", "5"][..],
            "give the validation traces with --validate",
        ),
        (
            &["--validate", "gen:mid:2:3000", "--validate-windows", "0"][..],
            "at least 1 window",
        ),
    ] {
        let refused = small_search("r.onnx", "1", more);
        refused
            .run()
            .invalid()
            .stderr_has(&["--validate-windows", said]);
        assert!(!refused.path().join("r.onnx").exists());
    }
}

#[test]
fn a_search_from_a_model_is_confirmed_on_other_draws_before_it_replaces_the_start() {
    let fair_v3 = concat!(env!("CARGO_MANIFEST_DIR"), "/stdlib/policies/fair-v3.onnx");
    let from = slurp_fair::Model::load(std::path::Path::new(fair_v3), None).unwrap();
    // Three generations from fair-v3, kept by a validation trace.
    let from_v3 = |out: &str, more: &[&str]| {
        let mut args = vec![
            "--init",
            fair_v3,
            "--validate",
            "gen:mid:2:3000",
            "--sigma",
            "0.5",
        ];
        args.extend_from_slice(more);
        small_search(out, "3", &args)
    };
    // Whether the search's network was written. Seed 5's search is
    // confirmed, seed 7's is not (each is deterministic): both ways must
    // write what they say.
    let confirmed = |seed: &str| -> bool {
        let test = from_v3("c.onnx", &["--confirm", "3", "--seed", seed]);
        let run = test.run().success();
        let first: u64 = seed.parse::<u64>().unwrap() + 1;
        let said = format!(
            "confirming on 3 more draws of the validation traces' windows (seeds {first}..={})",
            first + 2
        );
        assert!(run.stderr.contains(&said), "{}", run.stderr);
        let verdict = run
            .stderr
            .lines()
            .find(|l| l.starts_with("the network found: mean loss "))
            .unwrap_or_else(|| panic!("{}", run.stderr));
        // "… mean loss F against the start's S, lower on K of 3 draws: …"
        let number = |after: &str| -> f64 {
            let rest = &verdict[verdict.find(after).unwrap() + after.len()..];
            rest.split([' ', ',']).next().unwrap().parse().unwrap()
        };
        let (found, start) = (number("mean loss "), number("against the start's "));
        assert!(verdict.contains(" of 3 draws: "), "{verdict}");
        let written = slurp_fair::Model::load(&test.path().join("c.onnx"), None).unwrap();
        let bytes = std::fs::read(test.path().join("c.onnx")).unwrap();
        let has = |said: &str| bytes.windows(said.len()).any(|w| w == said.as_bytes());
        if found < start {
            // The search's network replaces the start's.
            assert!(verdict.ends_with("it is written"), "{verdict}");
            assert_ne!(written.layers(), from.layers());
            assert!(has("; confirmed: mean loss"));
            assert!(!test.path().join("c.onnx.train/searched.onnx").exists());
            true
        } else {
            // The start's network, to the weight; the search's is kept aside.
            assert!(verdict.contains("no better than its start"), "{verdict}");
            assert_eq!(written.layers(), from.layers());
            assert!(has("so this is the network it started from"));
            let aside =
                slurp_fair::Model::load(&test.path().join("c.onnx.train/searched.onnx"), None)
                    .unwrap();
            assert_ne!(aside.layers(), from.layers());
            false
        }
    };
    assert!(confirmed("5"));
    assert!(!confirmed("7"));
    // Without a confirmation the search's network is written as before.
    let plain = from_v3("p.onnx", &["--confirm", "0"]);
    let run = plain.run().success();
    assert!(!run.stderr.contains("confirming"), "{}", run.stderr);
    let written = slurp_fair::Model::load(&plain.path().join("p.onnx"), None).unwrap();
    assert_ne!(written.layers(), from.layers());
}

#[test]
fn a_search_for_one_backfilling_mode_keeps_the_other_modes_network() {
    // fair-v4 carries one network for committed choices, for both modes.
    let fair_v4 = concat!(env!("CARGO_MANIFEST_DIR"), "/stdlib/policies/fair-v4.onnx");
    let load = |p: &std::path::Path| slurp_fair::Model::load(p, None).unwrap();
    let start = load(fair_v4.as_ref());
    let shared = start.committed_layers(false).unwrap();
    let search = |out: &str, from: &str, more: &[&str]| {
        let mut args = vec!["--init", from];
        args.extend_from_slice(more);
        let test = small_search(out, "1", &args);
        let run = test.run().success();
        let written = load(&test.path().join(out));
        (test, run, written)
    };
    // EASY's: searched; no backfilling keeps the shared one.
    let (easy_test, run, easy) = search(
        "easy.onnx",
        fair_v4,
        &["--sim-model", "reference", "--backfill", "easy"],
    );
    assert!(
        run.stdout
            .contains("without backfilling, and another with EASY"),
        "{}",
        run.stdout
    );
    assert_eq!(easy.layers(), start.layers());
    assert_eq!(easy.committed_layers(false), Some(shared.clone()));
    let searched = easy.committed_layers(true).unwrap();
    assert_ne!(searched, shared);
    assert!(easy.carries(true) && !start.carries(true));
    let easy_path = easy_test.path().join("easy.onnx");
    let easy_path = easy_path.to_str().unwrap();
    // Then no backfilling's: searched from the shared one, EASY's kept.
    let (_, _, none) = search(
        "none.onnx",
        easy_path,
        &["--sim-model", "reference", "--backfill", "none"],
    );
    assert_eq!(none.layers(), start.layers());
    assert_eq!(none.committed_layers(true), Some(searched.clone()));
    assert_ne!(none.committed_layers(false), Some(shared.clone()));
    // From a model with one network for both, a search without
    // backfilling leaves EASY with the network it had.
    let (_, _, from_shared) = search(
        "shared.onnx",
        fair_v4,
        &["--sim-model", "reference", "--backfill", "none"],
    );
    assert_eq!(from_shared.committed_layers(true), Some(shared.clone()));
    assert_ne!(from_shared.committed_layers(false), Some(shared.clone()));
    // A search on slurp's model keeps both.
    let (_, _, slurps) = search("slurp.onnx", easy_path, &["--sim-model", "slurp"]);
    assert_eq!(slurps.committed_layers(true), Some(searched));
    assert_eq!(slurps.committed_layers(false), Some(shared));
    assert_ne!(slurps.layers(), start.layers());
}

/// A search from a model whose networks for committed choices have
/// horizons (fair-v14: one without backfilling, one under EASY) and a
/// backlog rule (without backfilling) writes each network with its own:
/// searched (it played under them, `fair/tests/horizon.rs`,
/// `fair/tests/backlog.rs`), or kept while another is; and every network
/// with its shortlist for exact estimates.
#[test]
fn a_search_from_a_model_with_a_horizon_writes_it_with_that_network() {
    let load = |p: &std::path::Path| slurp_fair::Model::load(p, None).unwrap();
    let v14 = slurp_fair::built_in("fair-v14").unwrap();
    let exact = |m: &slurp_fair::Model| {
        [
            m.exact(),
            m.slurp_easy().and_then(slurp_fair::Model::exact),
            m.committed(false).exact(),
            m.committed(true).exact(),
        ]
    };
    for (out, more) in [
        (
            "easy.onnx",
            ["--sim-model", "reference", "--backfill", "easy"],
        ),
        (
            "none.onnx",
            ["--sim-model", "reference", "--backfill", "none"],
        ),
        ("slurp.onnx", ["--sim-model", "slurp", "--backfill", "easy"]),
    ] {
        let mut args = vec!["--init", "fair-v14"];
        args.extend_from_slice(&more);
        let test = small_search(out, "1", &args);
        let run = test.run().success();
        let written = load(&test.path().join(out));
        assert_eq!(exact(&written), exact(&v14), "{more:?}");
        for easy in [false, true] {
            assert_eq!(
                written.committed(easy).horizon().map(|h| h.share),
                Some(0.5),
                "{more:?}, EASY {easy}"
            );
        }
        let rule = |easy: bool| {
            written
                .committed(easy)
                .backlog()
                .map(|b| (b.jobs, b.margin))
        };
        assert_eq!(rule(false), Some((1024, 256.0)), "{more:?}");
        assert_eq!(rule(true), None, "{more:?}");
        assert!(
            run.stdout
                .contains("reservations within 0.5× the longest estimate")
                && run
                    .stdout
                    .contains("margin 256 while more than 1024 jobs wait"),
            "{}",
            run.stdout
        );
        // Which network the search changed.
        let (model, backfill) = (more[1], more[3]);
        for easy in [false, true] {
            let searched = model == "reference" && (backfill == "easy") == easy;
            assert_eq!(
                written.committed_layers(easy) != v14.committed_layers(easy),
                searched,
                "{more:?}, EASY {easy}"
            );
        }
    }
    // Searched without a shortlist, the network keeps no rule to widen
    // one: the rule is dropped, and the search says so.
    let test = small_search(
        "bare.onnx",
        "1",
        &[
            "--init",
            "fair-v13",
            "--sim-model",
            "reference",
            "--backfill",
            "none",
            "--shortlist",
            "none",
        ],
    );
    let run = test.run().success();
    let written = load(&test.path().join("bare.onnx"));
    assert_eq!(written.committed(false).shortlist(), None);
    assert!(written.committed(false).backlog().is_none());
    assert!(
        run.stderr.contains(
            "its backlog rule 1024:256 for committed choices is not kept: the network has no shortlist"
        ),
        "{}",
        run.stderr
    );
}

#[test]
fn a_search_on_slurps_model_with_easy_alone_trains_a_network_for_it() {
    let fair_v4 = concat!(env!("CARGO_MANIFEST_DIR"), "/stdlib/policies/fair-v4.onnx");
    let load = |p: &std::path::Path| slurp_fair::Model::load(p, None).unwrap();
    let start = load(fair_v4.as_ref());
    let search = |out: &str, from: &str, more: &[&str]| {
        let mut args = vec!["--init", from, "--sim-model", "slurp"];
        args.extend_from_slice(more);
        let test = small_search(out, "1", &args);
        let run = test.run().success();
        let written = load(&test.path().join(out));
        (test, run, written)
    };
    // EASY's network in slurp's model is searched (from the model's own);
    // the model's own and the one for committed choices are kept.
    let (test, run, easy) = search("easy.onnx", fair_v4, &["--backfill", "easy"]);
    assert!(
        run.stdout
            .contains("its own network for slurp's model with EASY"),
        "{}",
        run.stdout
    );
    assert_eq!(easy.layers(), start.layers());
    assert_eq!(easy.committed_layers(false), start.committed_layers(false));
    let searched = easy.slurp_easy().and_then(|m| m.layers()).unwrap();
    assert_ne!(Some(searched.clone()), start.layers());
    assert!(start.slurp_easy().is_none());
    let path = test.path().join("easy.onnx");
    let path = path.to_str().unwrap();
    // Then the model's own, without backfilling: EASY's is kept.
    let (_, _, none) = search("none.onnx", path, &["--backfill", "none"]);
    assert_eq!(none.slurp_easy().and_then(|m| m.layers()), Some(searched));
    assert_ne!(none.layers(), start.layers());
    // A v1 model cannot carry one: refused before any search.
    let fair_v1 = concat!(env!("CARGO_MANIFEST_DIR"), "/stdlib/policies/fair-v1.onnx");
    let v1 = small_search(
        "v1.onnx",
        "1",
        &[
            "--init",
            fair_v1,
            "--sim-model",
            "slurp",
            "--backfill",
            "easy",
        ],
    );
    v1.run()
        .invalid()
        .stderr_has(&["sees observation v1", "slurp's model under EASY"]);
    assert!(!v1.path().join("v1.onnx").exists());
    // A search on both modes trains one network for both, and says so.
    let (_, run, both) = search("both.onnx", path, &[]);
    assert!(both.slurp_easy().is_none());
    assert!(
        run.stderr
            .contains("its network for slurp's model under EASY is not kept"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_network_kept_beside_a_searched_one_keeps_the_observation_it_sees() {
    // Each network of a model file sees its own observation: fair-v2's
    // (v2) stays as it was beside a network searched for committed choices
    // through v4 (the default when the start sees less than v3) or v5.
    let load = |p: &std::path::Path| slurp_fair::Model::load(p, None).unwrap();
    for (from, asked, main, committed) in [
        ("fair-v2.onnx", None, Sight::V2, Sight::V4),
        ("fair-v3.onnx", Some("v5"), Sight::V3, Sight::V5),
    ] {
        let path = format!("{}/stdlib/policies/{from}", env!("CARGO_MANIFEST_DIR"));
        let mut args = vec!["--init", &path, "--sim-model", "reference"];
        args.extend(asked.iter().flat_map(|v| ["--observation", v]));
        let test = small_search("m.onnx", "1", &args);
        let run = test.run().success();
        let said = format!("observation {}) on", committed.name());
        assert!(run.stderr.contains(&said), "{from}: {}", run.stderr);
        // The judge's table at the end names both.
        let header = format!(
            "(observation {}; its own network for the reference model's committed choices, seeing {})",
            main.name(),
            committed.name()
        );
        assert!(run.stdout.contains(&header), "{from}: {}", run.stdout);
        let (start, written) = (load(path.as_ref()), load(&test.path().join("m.onnx")));
        assert_eq!(written.sight, main, "{from}");
        assert_eq!(written.layers(), start.layers(), "{from}");
        assert_eq!(written.committed(false).sight, committed, "{from}");
        assert!(written.committed_layers(false).is_some(), "{from}");
    }
    // fair-v1 sees v1, scaled by RICC's maxima: a model that cannot carry
    // a network for committed choices, refused before any search.
    let v1 = concat!(env!("CARGO_MANIFEST_DIR"), "/stdlib/policies/fair-v1.onnx");
    let test = small_search("m.onnx", "1", &["--init", v1, "--sim-model", "reference"]);
    test.run().invalid().stderr_has(&[
        "fair-v1.onnx: sees observation v1",
        "cannot carry a network for committed choices",
    ]);
    assert!(!test.path().join("m.onnx").exists());
}

/// A feature that means another thing in the observation searched than in
/// the start's (v5's fair-share factor, 6, is v7's urgency; v5's width
/// against the shown jobs', 8, is v8's queue cost) is folded into the
/// start's biases at its value (`Sight::refolded`; docs/sim.md): the search
/// starts from a network that scores every slot as the start did with that
/// feature at it, and reads the new feature from zero.
#[test]
fn a_search_seeing_a_feature_anew_starts_with_the_old_one_folded() {
    let fair_v5 = concat!(env!("CARGO_MANIFEST_DIR"), "/stdlib/policies/fair-v5.onnx");
    let load = |p: &std::path::Path| slurp_fair::Model::load(p, None).unwrap();
    let start = load(fair_v5.as_ref()).committed_layers(true).unwrap();
    for (sight, feature, at) in [(Sight::V7, 6, 1.0f32), (Sight::V8, 8, 0.0)] {
        // A search that cannot move (sigma 1e-9): what it writes is its start.
        let test = small_search(
            "m.onnx",
            "1",
            &[
                "--init",
                fair_v5,
                "--sim-model",
                "reference",
                "--backfill",
                "easy",
                "--observation",
                sight.name(),
                "--sigma",
                "1e-9",
            ],
        );
        test.run().success();
        let written = load(&test.path().join("m.onnx"));
        assert_eq!(written.committed(true).sight, sight);
        let searched = written.committed_layers(true).unwrap();
        let (old, new) = (&start[0], &searched[0]);
        let outputs = old.outputs();
        let row = (feature - 1) * outputs..feature * outputs;
        assert!(
            old.w[row.clone()].iter().any(|w| w.abs() > 0.1),
            "fair-v5's network reads feature {feature}: the test can tell a fold"
        );
        for (i, (a, b)) in old.w.iter().zip(&new.w).enumerate() {
            let want = if row.contains(&i) { 0.0 } else { *a };
            assert!(
                (b - want).abs() < 1e-4,
                "{sight:?}, weight {i}: {b} against {want}"
            );
        }
        for (j, b) in new.b.iter().enumerate() {
            let want = old.b[j] + old.w[row.start + j] * at;
            assert!(
                (b - want).abs() < 1e-4,
                "{sight:?}, bias {j}: {b} against {want}"
            );
        }
        for (a, b) in start[1..].iter().zip(&searched[1..]) {
            let close = |x: &[f32], y: &[f32]| x.iter().zip(y).all(|(x, y)| (x - y).abs() < 1e-4);
            assert!(
                close(&a.w, &b.w) && close(&a.b, &b.b),
                "{sight:?}: a later layer"
            );
        }
    }
}

#[test]
fn a_network_written_into_another_model_keeps_the_observation_it_sees() {
    // fair-v4's network for committed choices sees its model's v4, left
    // implied in its file; v7's model sees v5 for committed choices.
    // Written into v7 alone (one source, weight 1), it must still see v4,
    // and v7's network for EASY stays as it was.
    let repo = common::repo();
    let fair_v4 = repo.join("stdlib/policies/fair-v4.onnx");
    let v7 = repo.join("fair/trainer/runs/v7-validated-e1.onnx");
    let test = Test::new();
    let mix = test.path().join("mix.onnx");
    let source = format!("{}:slurp.committed:1", fair_v4.display());
    if !model_tool(
        "ensemble.py",
        &[
            v7.as_ref(),
            mix.as_ref(),
            "slurp.committed".as_ref(),
            source.as_ref(),
        ],
    ) {
        return;
    }
    let load = |p: &std::path::Path| slurp_fair::Model::load(p, None).unwrap();
    let (fair_v4, v7, mix) = (load(&fair_v4), load(&v7), load(&mix));
    assert_eq!(mix.committed(false).sight, Sight::V4);
    assert_eq!(mix.committed_layers(false), fair_v4.committed_layers(false));
    assert_eq!(mix.committed(true).sight, Sight::V5);
    assert_eq!(mix.committed_layers(true), v7.committed_layers(true));
    assert_eq!(mix.layers(), v7.layers());
}

/// `--init` takes a built-in model by its name, as `--policy` does (an
/// installed slurp has no copy of the file): the same search as from the
/// file, and it keeps the model's other networks.
#[test]
fn a_site_search_can_start_from_a_built_in_model_by_name() {
    let file = common::repo().join("stdlib/policies/fair-v5.onnx");
    let search = |init: &str| {
        let more = ["--init", init, "--sim-model", "slurp", "--backfill", "easy"];
        let test = small_search("site.onnx", "1", &more);
        test.run().success();
        std::fs::read(test.path().join("site.onnx")).unwrap()
    };
    let (by_name, by_file) = (search("fair-v5"), search(file.to_str().unwrap()));
    // The provenance names the start as it was given; the networks agree.
    let load = |bytes: &[u8]| {
        slurp_fair::Model::from_bytes(std::path::Path::new("site.onnx"), bytes, None, None).unwrap()
    };
    let (named, filed) = (load(&by_name), load(&by_file));
    let v5 = slurp_fair::built_in("fair-v5").unwrap();
    for m in [&named, &filed] {
        assert_eq!(m.layers(), v5.layers());
        assert_eq!(m.committed_layers(false), v5.committed_layers(false));
        assert_eq!(m.committed_layers(true), v5.committed_layers(true));
    }
    let searched = |m: &slurp_fair::Model| m.slurp_easy().unwrap().layers();
    assert_eq!(searched(&named), searched(&filed));
    let test = small_search("x.onnx", "1", &["--init", "fair-v99"]);
    test.run()
        .invalid()
        .stderr_has(&["fair-v99", "nor is it a built-in model: fair, fair-v2"]);
}

/// The built-in fair-v5 is what the model card's recipe assembles:
/// fair-v4 with v7's network for committed choices under EASY and e20's
/// for slurp's model under EASY, each copied whole into a copy of a model
/// by `ensemble.py` (one source at weight 1, `slurp.easy` among its keys),
/// seeing what it saw; `--trained` writes the provenance.
#[test]
fn fair_v5_is_fair_v4_with_the_networks_for_easy_its_card_names() {
    let repo = common::repo();
    let runs = repo.join("fair/trainer/runs");
    let fair_v4 = repo.join("stdlib/policies/fair-v4.onnx");
    let load = |p: &std::path::Path| slurp_fair::Model::load(p, None).unwrap();
    let (v4, v7, e20) = (
        load(&fair_v4),
        load(&runs.join("v7-validated-e1.onnx")),
        load(&runs.join("v15-e20.onnx")),
    );
    let is_fair_v5 = |m: &slurp_fair::Model| {
        assert_eq!(m.sight, Sight::V4);
        assert_eq!(m.layers(), v4.layers());
        assert_eq!(m.committed(false).sight, Sight::V4);
        assert_eq!(m.committed_layers(false), v4.committed_layers(false));
        assert_eq!(m.committed(true).sight, Sight::V5);
        assert_eq!(m.committed_layers(true), v7.committed_layers(true));
        let (own, theirs) = (m.slurp_easy().unwrap(), e20.slurp_easy().unwrap());
        assert_eq!(own.sight, Sight::V5);
        assert_eq!(own.layers(), theirs.layers());
    };
    is_fair_v5(&slurp_fair::built_in("fair-v5").unwrap());

    let test = Test::new();
    let (half, whole) = (test.path().join("v5a.onnx"), test.path().join("v5.onnx"));
    let committed = format!(
        "{}:slurp.committed.easy:1",
        runs.join("v7-validated-e1.onnx").display()
    );
    let easy = format!("{}:slurp.easy:1", runs.join("v15-e20.onnx").display());
    let first: [&std::ffi::OsStr; 4] = [
        fair_v4.as_ref(),
        half.as_ref(),
        "slurp.committed.easy".as_ref(),
        committed.as_ref(),
    ];
    if !model_tool("ensemble.py", &first) {
        return;
    }
    let second: [&std::ffi::OsStr; 6] = [
        half.as_ref(),
        whole.as_ref(),
        "slurp.easy".as_ref(),
        easy.as_ref(),
        "--trained".as_ref(),
        "assembled by a test".as_ref(),
    ];
    assert!(model_tool("ensemble.py", &second));
    is_fair_v5(&load(&whole));
    let file = std::fs::read(&whole).unwrap();
    let provenance = b"assembled by a test";
    assert!(file.windows(provenance.len()).any(|w| w == provenance));
}

/// `turns.py START OUT ARGS`, and START and OUT loaded (`None`: skipped,
/// the tool's Python packages are missing).
fn turns_tool(
    start: &std::path::Path,
    args: &[&str],
) -> Option<(Arc<slurp_fair::Model>, Arc<slurp_fair::Model>)> {
    let test = Test::new();
    let out = test.path().join("out.onnx");
    let args: Vec<&std::ffi::OsStr> = [start.as_os_str(), out.as_os_str()]
        .into_iter()
        .chain(args.iter().map(std::ffi::OsStr::new))
        .collect();
    if !model_tool("turns.py", &args) {
        return None;
    }
    let load = |p: &std::path::Path| Arc::new(slurp_fair::Model::load(p, None).unwrap());
    Some((load(start), load(&out)))
}

/// `with` is `own` plus `beta` x `score` (by feature) as two more hidden
/// units (`relu(s) - relu(-s)`), `own`'s feature-1 weights zeroed unless
/// `keeps_feature_1`.
fn has_score_units(
    own: &[slurp_fair::export::Dense],
    with: &[slurp_fair::export::Dense],
    score: [f32; slurp_fair::FEATURES],
    beta: f32,
    keeps_feature_1: bool,
) {
    let (h, width) = (own[0].b.len(), with[0].b.len());
    assert_eq!(width, h + 2);
    for (i, &weight) in score.iter().enumerate() {
        assert_eq!(with[0].w[i * width + h], weight, "feature {}", i + 1);
        assert_eq!(with[0].w[i * width + h + 1], -weight, "feature {}", i + 1);
        for j in 0..h {
            let kept = if i == 0 && !keeps_feature_1 {
                0.0
            } else {
                own[0].w[i * h + j]
            };
            assert_eq!(with[0].w[i * width + j], kept, "feature {}", i + 1);
        }
    }
    assert_eq!(with[1].w[h..], [beta, -beta]);
    assert_eq!(with[1].w[..h], own[1].w[..]);
}

/// The order in which `m` starts the jobs of a window of a generated
/// workload, in slurp's model or the reference model (greedy), with or
/// without EASY: two models' choices compared.
fn starts(m: &Arc<slurp_fair::Model>, reference: bool, easy: bool) -> Vec<u32> {
    let trace = slurp_sim::generate::generate(&slurp_sim::generate::Family::Mid.spec(2000), 2);
    let workload = slurp_sim::Workload::new(&trace, slurp_sim::Machine::of(&trace).unwrap());
    let window = slurp_sim::Window {
        start: 500,
        len: 1024,
    };
    let schedule = if reference {
        slurp_fair::rollout::replay(m, &workload, window, easy, None)
    } else {
        slurp_fair::chooser::replay(m.clone(), &workload, window, easy, None)
    };
    schedule.unwrap().order
}

/// `turns.py`'s options for the rule's score (fewest core-seconds first
/// inside the first user's jobs) in the network for committed choices
/// under EASY.
const AREA_FOR_EASY: [&str; 6] = [
    "--network",
    "committed-easy",
    "--within",
    "area",
    "--beta",
    "10",
];

#[test]
fn turns_gives_slurps_network_under_easy_fairshares_score_and_keeps_the_rest() {
    let fair_v4 = common::repo().join("stdlib/policies/fair-v4.onnx");
    let Some((start, e20)) = turns_tool(&fair_v4, &["--network", "slurp-easy", "--beta", "20"])
    else {
        return;
    };
    // The model's own network and its network for committed choices are
    // fair-v4's, seeing what they saw.
    assert_eq!(e20.layers(), start.layers());
    assert_eq!(e20.sight, Sight::V4);
    assert_eq!(e20.committed_layers(false), start.committed_layers(false));
    assert_eq!(e20.committed(false).sight, Sight::V4);
    // Under EASY: fair-v4's units with feature 1 (v5: the user's place in
    // fair-share turns) given nothing, and 20 x (10 f1 + f4) as two more.
    let easy = e20
        .slurp_easy()
        .expect("a network for slurp's model under EASY");
    assert_eq!(easy.sight, Sight::V5);
    let mut score = [0.0; slurp_fair::FEATURES];
    (score[0], score[3]) = (10.0, 1.0);
    has_score_units(
        &start.layers().unwrap(),
        &easy.layers().unwrap(),
        score,
        20.0,
        false,
    );
    // So slurp's model chooses otherwise with EASY, as before without.
    assert_eq!(starts(&e20, false, false), starts(&start, false, false));
    assert_ne!(starts(&e20, false, true), starts(&start, false, true));
}

#[test]
fn turns_gives_the_easy_committed_network_the_area_order_and_keeps_its_turns() {
    // v7's network for the reference model's choices under EASY already
    // sees v5: its feature-1 weights (the user's place in turns) stay, and
    // 10 x (10 f1 - f2 - f8) comes as two more units; its network without
    // backfilling and its own network are left as they were.
    let v7 = common::repo().join("fair/trainer/runs/v7-validated-e1.onnx");
    let Some((start, e10)) = turns_tool(&v7, &AREA_FOR_EASY) else {
        return;
    };
    assert_eq!(e10.layers(), start.layers());
    assert_eq!(e10.committed_layers(false), start.committed_layers(false));
    assert_eq!(e10.committed(true).sight, Sight::V5);
    let mut score = [0.0; slurp_fair::FEATURES];
    (score[0], score[1], score[7]) = (10.0, -1.0, -1.0);
    let (own, with) = (start.committed_layers(true), e10.committed_layers(true));
    has_score_units(&own.unwrap(), &with.unwrap(), score, 10.0, true);
    // The reference model chooses otherwise with EASY, as before without.
    assert_eq!(starts(&e10, true, false), starts(&start, true, false));
    assert_ne!(starts(&e10, true, true), starts(&start, true, true));
}

#[test]
fn turns_can_give_the_rule_alone_with_a_rescue_for_the_job_furthest_behind() {
    // `--alone`: v7's own units weigh nothing; `--rescue 100`: one more
    // unit, 1000 x relu(f3 - log10(100)/3), f3 the job's slowdown so far
    // on a log scale. Without the rescue the rule alone chooses otherwise.
    let v7 = common::repo().join("fair/trainer/runs/v7-validated-e1.onnx");
    let rule = [AREA_FOR_EASY.as_slice(), &["--alone"]].concat();
    let rescued = [rule.as_slice(), &["--rescue", "100"]].concat();
    let (Some((start, alone)), Some((_, with))) =
        (turns_tool(&v7, &rule), turns_tool(&v7, &rescued))
    else {
        return;
    };
    let (own, layers) = (
        start.committed_layers(true).unwrap(),
        with.committed_layers(true).unwrap(),
    );
    let (h, width) = (own[0].b.len(), layers[0].b.len());
    assert_eq!(width, h + 3);
    assert!(
        layers[1].w[..h].iter().all(|&w| w == 0.0),
        "own units weigh nothing"
    );
    assert_eq!(layers[1].b, [0.0]);
    assert_eq!(layers[1].w[h..], [10.0, -10.0, 1000.0]);
    for i in 0..slurp_fair::FEATURES {
        let weight = if i == 2 { 1.0 } else { 0.0 };
        assert_eq!(layers[0].w[i * width + h + 2], weight, "feature {}", i + 1);
    }
    assert!((layers[0].b[h + 2] + 2.0 / 3.0).abs() < 1e-6);
    assert_ne!(starts(&with, true, true), starts(&alone, true, true));
}

/// The trainer's judging tools (`cells.py`, `history.py`) pass slurp's
/// own refusal on — its message and exit status, not a Python traceback —
/// refuse `--jobs` where the workloads are fixed, generate traces of
/// `--jobs` jobs where they are not, and compare each model after the first
/// with it cell by cell as its rows say.
#[test]
fn the_judging_tools_pass_slurps_refusals_on_and_size_fresh_traces() {
    if !python_has("json") {
        eprintln!("skipped: needs python3");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tool = |script: &str, args: &[&str]| {
        let out = std::process::Command::new("python3")
            .arg(common::repo().join("fair/trainer").join(script))
            .arg("--slurp")
            .arg(common::binary())
            .arg("--traces")
            .arg(dir.path())
            .args(args)
            .output()
            .unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    // Each refusal: slurp's (a trace or a model missing), then cells.py's.
    for (script, args, said) in [
        ("history.py", &["missing.swf"][..], "missing.swf"),
        (
            "cells.py",
            &["--set", "fresh", "--seeds", "1", "/nonexistent/m.onnx"],
            "/nonexistent/m.onnx",
        ),
        (
            "cells.py",
            &["--set", "validation", "--jobs", "3000", "m.onnx"],
            "--jobs",
        ),
    ] {
        let (code, _, err) = tool(script, args);
        assert_eq!(code, Some(2), "{script}: {err}");
        assert!(
            err.contains(said) && !err.contains("Traceback"),
            "{script}: {err}"
        );
    }
    let model = common::repo().join("stdlib/policies/fair-v4.onnx");
    let other = common::repo().join("stdlib/policies/fair-v3.onnx");
    let other = format!("v3={}", other.display());
    let (code, out, err) = tool(
        "cells.py",
        &[
            "--set",
            "fresh",
            "--seeds",
            "1",
            "--jobs",
            "4000",
            "--samples",
            "2",
            "--only",
            "slurp",
            model.to_str().unwrap(),
            &other,
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    for family in ["small", "mid", "large", "saturated", "quiet"] {
        assert!(out.contains(&format!("gen:{family}:1:4000 ")), "{out}");
    }
    assert_eq!(out.matches(" of 5; ").count(), 4, "{out}");
    // Each mode's paired comparison of the second model with the first,
    // recomputed here from the rows it prints (rounded, hence the slack at
    // the 0.5% margin and in the ratios).
    let modes: Vec<&str> = out.split("\nmode ").skip(1).collect();
    assert_eq!(modes.len(), 2, "{out}");
    for mode in modes {
        let quotients: Vec<(f64, f64)> = mode
            .lines()
            .filter(|l| l.starts_with("gen:"))
            .map(|l| {
                let column = |i: usize| -> Vec<f64> {
                    let field = l.split('|').nth(i).unwrap();
                    field
                        .split_whitespace()
                        .map(|x| x.parse().unwrap())
                        .collect()
                };
                let (first, second) = (column(2), column(3));
                (second[0] / first[0], second[1] / first[1])
            })
            .collect();
        let line = mode
            .lines()
            .find(|l| l.trim_start().starts_with("v3 vs fair-v4: "))
            .unwrap_or_else(|| panic!("no paired line: {mode}"));
        let number = |after: &str| -> f64 {
            let rest = &line[line.find(after).unwrap() + after.len()..];
            let end = rest
                .find(|c: char| c != '.' && !c.is_ascii_digit())
                .unwrap_or(rest.len());
            rest[..end].parse().unwrap()
        };
        let counted = |sure: f64, loose: f64| {
            let n = |edge: f64| quotients.iter().filter(|q| q.0 < edge).count() as f64;
            (n(sure), n(loose))
        };
        let (at_least, at_most) = counted(0.995 - 0.002, 0.995 + 0.002);
        let lower = number("lower in ");
        assert!(at_least <= lower && lower <= at_most, "{line}");
        let geo = |i: usize| {
            let logs = quotients.iter().map(|q| [q.0, q.1][i].ln());
            (logs.sum::<f64>() / quotients.len() as f64).exp()
        };
        assert!((number("ratio ") - geo(0)).abs() < 0.003, "{line}");
        // The averages are printed to two decimals only.
        assert!((number("averages ") / geo(1) - 1.0).abs() < 0.03, "{line}");
        assert!(line.contains(" of 5 (by over 0.5%)"), "{line}");
    }
}

/// The logit a one-hidden-layer network (`w` inputs × outputs, row-major)
/// gives one slot's features.
fn logit(layers: &[slurp_fair::export::Dense], x: &[f32]) -> f32 {
    let [hidden, out] = layers else {
        panic!("one hidden layer, got {}", layers.len() - 1)
    };
    let h = hidden.outputs();
    let units = (0..h).map(|j| {
        let pre = hidden.b[j]
            + (0..x.len())
                .map(|i| x[i] * hidden.w[i * h + j])
                .sum::<f32>();
        pre.max(0.0)
    });
    out.b[0] + units.zip(&out.w).map(|(u, w)| u * w).sum::<f32>()
}

#[test]
fn blend_adds_its_score_to_the_network_it_names_and_to_no_other() {
    // fair/trainer/blend.py, the card's "two levers that did not carry":
    // the named network's logit becomes its own plus alpha times the score,
    // every other network is the source's.
    let repo = common::repo();
    let source = repo.join("stdlib/policies/fair-v5.onnx");
    let test = Test::new();
    let out = test.path().join("blended.onnx");
    let args: [&std::ffi::OsStr; 8] = [
        source.as_ref(),
        out.as_ref(),
        "--alpha".as_ref(),
        "2.5".as_ref(),
        "--score".as_ref(),
        "area".as_ref(),
        "--network".as_ref(),
        "slurp.committed".as_ref(),
    ];
    if !model_tool("blend.py", &args) {
        return;
    }
    let load = |p: &std::path::Path| slurp_fair::Model::load(p, None).unwrap();
    let (before, after) = (load(&source), load(&out));
    assert_eq!(after.layers(), before.layers());
    assert_eq!(after.committed_layers(true), before.committed_layers(true));
    assert_eq!(
        after.slurp_easy().unwrap().layers(),
        before.slurp_easy().unwrap().layers()
    );
    assert_eq!(after.committed(false).sight, before.committed(false).sight);
    let (old, new) = (
        before.committed_layers(false).unwrap(),
        after.committed_layers(false).unwrap(),
    );
    assert_eq!(new[0].outputs(), old[0].outputs() + 2);
    // Slots of features in their ranges: feature 2 (index 1) and 8 (index
    // 7) of either sign, so both added units are exercised.
    for k in 0..64u32 {
        let seed = k.wrapping_mul(2_654_435_761);
        let x: Vec<f32> = (0..9)
            .map(|i| ((seed.rotate_left(i * 3) % 2001) as f32 / 1000.0 - 1.0) * 0.9)
            .collect();
        let want = logit(&old, &x) + 2.5 * -(x[1] + x[7]);
        let got = logit(&new, &x);
        assert!(
            (got - want).abs() < 1e-4 * (1.0 + want.abs()),
            "slot {k}: {got} against {want}"
        );
    }
}

/// Every weight and bias of `mix` is `(1 - alpha) a + alpha b` (to f32's
/// rounding), where `a` and `b` differ: what `soup.py` writes.
fn lies_between(
    a: &[slurp_fair::export::Dense],
    b: &[slurp_fair::export::Dense],
    mix: &[slurp_fair::export::Dense],
    alpha: f32,
) {
    assert_ne!(a, b, "the two networks differ, or this shows nothing");
    assert_eq!(mix.len(), a.len());
    for ((x, y), z) in a.iter().zip(b).zip(mix) {
        assert_eq!((z.w.len(), z.b.len()), (x.w.len(), x.b.len()));
        let pairs = x.w.iter().zip(&y.w).zip(&z.w);
        for ((&x, &y), &z) in pairs.chain(x.b.iter().zip(&y.b).zip(&z.b)) {
            let want = (1.0 - alpha) * x + alpha * y;
            assert!(
                (z - want).abs() <= 1e-6 * (1.0 + want.abs()),
                "{z} against {want}"
            );
        }
    }
}

#[test]
fn soup_moves_the_named_network_part_way_toward_the_other_and_keeps_the_rest() {
    // fair/trainer/soup.py (runs/v21): every weight of the named network
    // becomes (1 - alpha) a + alpha b; A's other networks are A's.
    let repo = common::repo();
    let a = repo.join("stdlib/policies/fair-v5.onnx");
    let b = repo.join("fair/trainer/runs/v19-gain-cap.onnx");
    let test = Test::new();
    let out = test.path().join("soup.onnx");
    let args: [&std::ffi::OsStr; 5] = [
        a.as_ref(),
        b.as_ref(),
        out.as_ref(),
        "--alpha".as_ref(),
        "0.25".as_ref(),
    ];
    if !model_tool("soup.py", &args) {
        return;
    }
    let load = |p: &std::path::Path| slurp_fair::Model::load(p, None).unwrap();
    let (ma, mb, soup) = (load(&a), load(&b), load(&out));
    let (la, lb, ls) = (
        ma.layers().unwrap(),
        mb.layers().unwrap(),
        soup.layers().unwrap(),
    );
    lies_between(&la, &lb, &ls, 0.25);
    assert_eq!(soup.sight, ma.sight);
    for easy in [false, true] {
        assert_eq!(soup.committed_layers(easy), ma.committed_layers(easy));
        assert_eq!(soup.committed(easy).sight, ma.committed(easy).sight);
    }
    assert_eq!(
        soup.slurp_easy().unwrap().layers(),
        ma.slurp_easy().unwrap().layers()
    );

    // A network the model carries in its metadata: v20e's and v20g's for
    // committed choices under EASY, both searched from fair-v5's seeing v7.
    let (e, g) = (
        repo.join("fair/trainer/runs/v20-urgency-e.onnx"),
        repo.join("fair/trainer/runs/v20-urgency-g.onnx"),
    );
    let carried = test.path().join("carried.onnx");
    let args: [&std::ffi::OsStr; 7] = [
        e.as_ref(),
        g.as_ref(),
        carried.as_ref(),
        "--alpha".as_ref(),
        "0.5".as_ref(),
        "--network".as_ref(),
        "slurp.committed.easy".as_ref(),
    ];
    assert!(model_tool("soup.py", &args));
    let (me, mg, mix) = (load(&e), load(&g), load(&carried));
    let (le, lg, lm) = (
        me.committed_layers(true).unwrap(),
        mg.committed_layers(true).unwrap(),
        mix.committed_layers(true).unwrap(),
    );
    lies_between(&le, &lg, &lm, 0.5);
    assert_eq!(mix.committed(true).sight, Sight::V7);
    assert_eq!(mix.layers(), me.layers());
    assert_eq!(mix.committed_layers(false), me.committed_layers(false));

    // Networks that see different observations are not mixed: fair-v5's
    // for committed choices under EASY sees v5, v20g's (searched from it)
    // v7. It says so and writes nothing.
    let refused = test.path().join("refused.onnx");
    let done = std::process::Command::new("python3")
        .arg(repo.join("fair/trainer/soup.py"))
        .arg(&a)
        .arg(repo.join("fair/trainer/runs/v20-urgency-g.onnx"))
        .arg(&refused)
        .args(["--alpha", "0.5", "--network", "slurp.committed.easy"])
        .output()
        .unwrap();
    assert!(!done.status.success());
    let said = String::from_utf8_lossy(&done.stderr);
    assert!(
        said.contains("sees v5") && said.contains("sees v7"),
        "{said}"
    );
    assert!(!refused.exists());

    // A soup lies between its two ends: past B is not one, and is refused.
    let done = std::process::Command::new("python3")
        .arg(repo.join("fair/trainer/soup.py"))
        .args([&a, &b, &refused])
        .args(["--alpha", "1.5"])
        .output()
        .unwrap();
    assert!(!done.status.success());
    let said = String::from_utf8_lossy(&done.stderr);
    assert!(said.contains("--alpha 1.5"), "{said}");
    assert!(!refused.exists());
}

#[test]
fn a_search_plays_and_writes_its_shortlist_and_keeps_the_other_networks_own() {
    use slurp_fair::shortlist::Shortlist;
    let fair_v5 = concat!(env!("CARGO_MANIFEST_DIR"), "/stdlib/policies/fair-v5.onnx");
    let rule = |text: &str| Some(Shortlist::parse(text).unwrap());
    // fair-v5 with shortlists on two of its networks.
    let start = Test::new().args(&[
        "policy",
        "shortlist",
        fair_v5,
        "-o",
        "start.onnx",
        "--slurp",
        "f1:32",
        "--committed",
        "f1:96",
    ]);
    start.run().success();
    let start_bytes = std::fs::read(start.path().join("start.onnx")).unwrap();
    // A search of its network for committed choices under EASY that cannot
    // move (sigma 1e-9): the first generation's loss is the start's as it
    // plays, under the rule asked for or none.
    let search_from = |start_bytes: &[u8], more: &[&str]| {
        let mut args = vec![
            "--init",
            "start.onnx",
            "--sim-model",
            "reference",
            "--backfill",
            "easy",
            "--sigma",
            "1e-9",
        ];
        args.extend_from_slice(more);
        let test = small_search("m.onnx", "1", &args).file("start.onnx", start_bytes);
        let run = test.run().success();
        let loss = run
            .stderr
            .lines()
            .find_map(|l| l.strip_prefix("generation 1: loss "))
            .and_then(|l| l.split_whitespace().next())
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no first generation:\n{}", run.stderr));
        let path = test.path().join("m.onnx");
        let written = slurp_fair::Model::load(&path, None).unwrap();
        (written, loss, std::fs::read(&path).unwrap())
    };
    let search = |more: &[&str]| search_from(&start_bytes, more);
    let (listed, with, listed_bytes) = search(&["--shortlist", "sjf:1e9"]);
    let (plain, without, _) = search(&[]);
    assert_ne!(with, without, "the search played under the rule");
    assert_eq!(listed.committed(true).shortlist(), rule("sjf:1e9"));
    assert_eq!(plain.committed(true).shortlist(), None);
    for m in [&listed, &plain] {
        assert_eq!(m.shortlist(), rule("f1:32"), "the model's own network's");
        assert_eq!(m.committed(false).shortlist(), rule("f1:96"));
        assert_eq!(m.slurp_easy().unwrap().shortlist(), None);
    }
    // A search from a shortlisted network goes on under its rule unless
    // told `none`.
    let (again, ..) = search_from(&listed_bytes, &[]);
    assert_eq!(again.committed(true).shortlist(), rule("sjf:1e9"));
    let (dropped, ..) = search_from(&listed_bytes, &["--shortlist", "none"]);
    assert_eq!(dropped.committed(true).shortlist(), None);

    // A rule the searched network cannot read is refused before any
    // search, naming the flag: `fairshare` reads fair-share turns, which
    // v4 does not show.
    let test = small_search("x.onnx", "1", &["--shortlist", "fairshare:3"]);
    test.run().invalid().stderr_has(&[
        "--shortlist: `fairshare:3`",
        "a network seeing v4 is not shown",
    ]);
    assert!(!test.path().join("x.onnx").exists());
}

/// The built-in fair-v6 is what its card's recipe assembles: fair-v5's
/// networks without backfilling, the two networks for EASY searched under
/// their shortlists (v26s, v26r), and F1 among every network's near-ties;
/// `ensemble.py` then `slurp policy shortlist` rebuild it byte for byte,
/// and `policy judge --json` names each network's rule.
#[test]
fn fair_v6_is_fair_v5_with_shortlists_and_the_networks_for_easy_its_card_names() {
    use slurp_fair::shortlist::Shortlist;
    let repo = common::repo();
    let runs = repo.join("fair/trainer/runs");
    let load = |p: &std::path::Path| slurp_fair::Model::load(p, None).unwrap();
    let (easy, committed) = (
        load(&runs.join("v26s-slurp-easy.onnx")),
        load(&runs.join("v26r-committed-easy.onnx")),
    );
    let v5 = slurp_fair::built_in("fair-v5").unwrap();
    let v6 = slurp_fair::built_in("fair-v6").unwrap();
    assert_eq!((v6.sight, v6.layers()), (v5.sight, v5.layers()));
    assert_eq!(v6.committed(false).sight, v5.committed(false).sight);
    assert_eq!(v6.committed_layers(false), v5.committed_layers(false));
    assert_eq!(v6.committed(true).sight, Sight::V5);
    assert_eq!(v6.committed_layers(true), committed.committed_layers(true));
    assert_ne!(v6.committed_layers(true), v5.committed_layers(true));
    let (own, searched) = (v6.slurp_easy().unwrap(), easy.slurp_easy().unwrap());
    assert_eq!((own.sight, own.layers()), (Sight::V5, searched.layers()));
    assert_ne!(own.layers(), v5.slurp_easy().unwrap().layers());
    let rule = |text: &str| Some(Shortlist::parse(text).unwrap());
    assert_eq!(v6.shortlist(), rule("f1:32"));
    assert_eq!(own.shortlist(), rule("f1:32"));
    assert_eq!(v6.committed(false).shortlist(), rule("f1:96"));
    assert_eq!(v6.committed(true).shortlist(), rule("f1:96"));

    let judged = Test::new()
        .args(&[
            "policy",
            "judge",
            "fair-v6",
            "gen:small:8:1100",
            "--samples",
            "1",
            "--len",
            "128",
            "--json",
        ])
        .run()
        .success();
    let judged: serde_json::Value = serde_json::from_str(&judged.stdout).unwrap();
    for (key, expected) in [
        ("shortlist", "f1:32"),
        ("slurp_easy_shortlist", "f1:32"),
        ("committed_shortlist", "f1:96"),
        ("committed_easy_shortlist", "f1:96"),
    ] {
        assert_eq!(judged[key], expected, "{key}");
    }

    if !python_has("numpy, onnx") {
        eprintln!("skipped rebuilding fair-v6: needs python3 with numpy and onnx");
        return;
    }
    // Its provenance as written, so that the recipe's one free text agrees.
    let shipped_path = repo.join("stdlib/policies/fair-v6.onnx");
    let trained = provenance(&shipped_path);
    assert!(
        trained.contains("v26s") && trained.contains("v26r"),
        "{trained}"
    );
    let test = Test::new();
    let joined = test.path().join("joined.onnx");
    let source = format!(
        "{}:slurp.committed.easy:1",
        runs.join("v26r-committed-easy.onnx").display()
    );
    let base = runs.join("v26s-slurp-easy.onnx");
    let args: [&std::ffi::OsStr; 6] = [
        base.as_os_str(),
        joined.as_os_str(),
        "slurp.committed.easy".as_ref(),
        source.as_ref(),
        "--trained".as_ref(),
        trained.as_ref(),
    ];
    if !model_tool("ensemble.py", &args) {
        return;
    }
    let shortlisted = test.args(&[
        "policy",
        "shortlist",
        "joined.onnx",
        "-o",
        "v6.onnx",
        "--slurp",
        "f1:32",
        "--committed",
        "f1:96",
        "--committed-easy",
        "f1:96",
    ]);
    shortlisted.run().success();
    let rebuilt = std::fs::read(shortlisted.path().join("v6.onnx")).unwrap();
    let shipped = std::fs::read(&shipped_path).unwrap();
    assert!(
        rebuilt == shipped,
        "the card's recipe does not give fair-v6"
    );
}

/// The built-in fair-v7 is fair-v6 with one rule changed: its network for
/// committed choices without backfilling hands the jobs within 64 logits
/// (not 96) of its choice to F1. Every network and every other rule is
/// fair-v6's; `ensemble.py` (the provenance) then `slurp policy shortlist`
/// rebuild it byte for byte, as the card's recipe says.
#[test]
fn fair_v7_is_fair_v6_with_a_narrower_shortlist_for_committed_choices() {
    use slurp_fair::shortlist::Shortlist;
    let repo = common::repo();
    let v6 = slurp_fair::built_in("fair-v6").unwrap();
    let v7 = slurp_fair::built_in("fair-v7").unwrap();
    assert_eq!((v7.sight, v7.layers()), (v6.sight, v6.layers()));
    let (own6, own7) = (v6.slurp_easy().unwrap(), v7.slurp_easy().unwrap());
    assert_eq!((own7.sight, own7.layers()), (own6.sight, own6.layers()));
    for easy in [false, true] {
        assert_eq!(v7.committed(easy).sight, v6.committed(easy).sight);
        assert_eq!(v7.committed_layers(easy), v6.committed_layers(easy));
    }
    let rule = |text: &str| Some(Shortlist::parse(text).unwrap());
    assert_eq!(v7.shortlist(), v6.shortlist());
    assert_eq!(own7.shortlist(), own6.shortlist());
    assert_eq!(
        v7.committed(true).shortlist(),
        v6.committed(true).shortlist()
    );
    assert_eq!(v6.committed(false).shortlist(), rule("f1:96"));
    assert_eq!(v7.committed(false).shortlist(), rule("f1:64"));

    if !python_has("numpy, onnx") {
        eprintln!("skipped rebuilding fair-v7: needs python3 with numpy and onnx");
        return;
    }
    let shipped_path = repo.join("stdlib/policies/fair-v7.onnx");
    let trained = provenance(&shipped_path);
    assert!(trained.starts_with("fair-v7: fair-v6"), "{trained}");
    let test = Test::new();
    let base = repo.join("stdlib/policies/fair-v6.onnx");
    let retold = test.path().join("retold.onnx");
    let source = format!("{}:slurp.committed:1", base.display());
    let args: [&std::ffi::OsStr; 6] = [
        base.as_os_str(),
        retold.as_os_str(),
        "slurp.committed".as_ref(),
        source.as_ref(),
        "--trained".as_ref(),
        trained.as_ref(),
    ];
    if !model_tool("ensemble.py", &args) {
        return;
    }
    let shortlisted = test.args(&[
        "policy",
        "shortlist",
        "retold.onnx",
        "-o",
        "v7.onnx",
        "--committed",
        "f1:64",
    ]);
    shortlisted.run().success();
    let rebuilt = std::fs::read(shortlisted.path().join("v7.onnx")).unwrap();
    assert!(
        rebuilt == std::fs::read(&shipped_path).unwrap(),
        "the card's recipe does not give fair-v7"
    );
}

/// fair-v8 is fair-v7 with its two networks for EASY replaced by the
/// searched ones its card names (v29 for committed choices, v30 for slurp's
/// model and real `+easy` runs), every rule kept, and the card's recipe
/// (two `ensemble.py` copies) rebuilds the shipped file byte for byte.
#[test]
fn fair_v8_is_fair_v7_with_the_networks_for_easy_its_card_names() {
    let repo = common::repo();
    let run = |name: &str| searched_run(&repo, name);
    assert_replaced(
        &slurp_fair::built_in("fair-v8").unwrap(),
        &slurp_fair::built_in("fair-v7").unwrap(),
        &[
            ("slurp.committed.easy", &run("v29-committed-easy.onnx")),
            ("slurp.easy", &run("v30-slurp-easy.onnx")),
        ],
    );

    assert_copies_recipe(
        "fair-v7",
        &[
            ("slurp.committed.easy", RUNS, "v29-committed-easy.onnx", &[]),
            ("slurp.easy", RUNS, "v30-slurp-easy.onnx", &[]),
        ],
        "fair-v8",
    );
}

/// fair-v9 is fair-v8 with its network for slurp's model and real `+easy`
/// runs replaced by v31's (its card's), every other network and every rule
/// kept, and the card's recipe (one `ensemble.py` copy) rebuilds the
/// shipped file byte for byte.
#[test]
fn fair_v9_is_fair_v8_with_the_network_for_real_easy_runs_its_card_names() {
    let repo = common::repo();
    assert_replaced(
        &slurp_fair::built_in("fair-v9").unwrap(),
        &slurp_fair::built_in("fair-v8").unwrap(),
        &[("slurp.easy", &searched_run(&repo, "v31-slurp-easy.onnx"))],
    );

    assert_copies_recipe(
        "fair-v8",
        &[("slurp.easy", RUNS, "v31-slurp-easy.onnx", &[])],
        "fair-v9",
    );
}

/// fair-v15 is fair-v14 with its network for slurp's model and real `+easy`
/// runs replaced by v52's search of it while seeing v9 (its card's), every
/// other network and every rule (shortlists, those for exact estimates,
/// horizons, backlog rules) kept, and the card's recipe (one `ensemble.py`
/// copy) rebuilds the shipped file byte for byte.
#[test]
fn fair_v15_is_fair_v14_with_the_network_for_real_easy_runs_searched_seeing_v9() {
    let repo = common::repo();
    let (v15, v14) = (
        slurp_fair::built_in("fair-v15").unwrap(),
        slurp_fair::built_in("fair-v14").unwrap(),
    );
    let found = searched_run(&repo, "v52-slurp-easy-v9-found.onnx");
    assert_replaced(&v15, &v14, &[("slurp.easy", &found)]);
    assert_eq!(v15.slurp_easy().unwrap().sight, Sight::V9);
    // The rules beside each network's own shortlist: for exact estimates,
    // the horizon and the backlog rule.
    let rules = |m: &slurp_fair::Model| {
        [
            m,
            m.slurp_easy().unwrap(),
            m.committed(false),
            m.committed(true),
        ]
        .map(|n| (n.exact(), n.horizon(), n.backlog()))
    };
    assert_eq!(rules(&v15), rules(&v14), "not fair-v14's rules");
    assert!(rules(&v15).iter().all(|(exact, ..)| exact.is_some()));

    assert_copies_recipe(
        "fair-v14",
        &[("slurp.easy", RUNS, "v52-slurp-easy-v9-found.onnx", &[])],
        "fair-v15",
    );
}

/// fair-v10 is fair-v9 whose network for committed choices under EASY (the
/// reference model's) sees v9, its layers and every rule unchanged: v9 is
/// v5 with the user's predicted runs in place of estimates, so the same
/// weights read it. Every other network is fair-v9's, so real runs and
/// slurp's model schedule as fair-v9's. The card's recipe (one
/// `ensemble.py` copy with `--observation v9`) rebuilds it byte for byte.
#[test]
fn fair_v10_is_fair_v9_whose_network_for_committed_easy_choices_sees_v9() {
    let v10 = networks(&slurp_fair::built_in("fair-v10").unwrap());
    let v9 = networks(&slurp_fair::built_in("fair-v9").unwrap());
    for ((key, mine), (_, before)) in v10.into_iter().zip(v9) {
        if key == "slurp.committed.easy" {
            assert_eq!((before.0, mine.0), (Sight::V5, Sight::V9));
            assert_eq!((&mine.1, &mine.2), (&before.1, &before.2), "{key}");
        } else {
            assert_eq!(mine, before, "{key}: not fair-v9's");
        }
    }

    assert_copies_recipe(
        "fair-v9",
        &[(
            "slurp.committed.easy",
            BUILT,
            "fair-v9.onnx",
            &["--observation", "v9"],
        )],
        "fair-v10",
    );
}

/// fair-v11 is fair-v10 with a horizon of 0.5 for its network for choices
/// kept under EASY (`horizon.rs`): every network and every shortlist is
/// fair-v10's, and only that network has a horizon. The card's recipe,
/// `slurp policy shortlist fair-v10 --horizon 0.5`, rebuilds the shipped
/// file byte for byte.
#[test]
fn fair_v11_is_fair_v10_with_a_horizon_for_choices_kept_under_easy() {
    let v11 = slurp_fair::built_in("fair-v11").unwrap();
    let v10 = slurp_fair::built_in("fair-v10").unwrap();
    assert_eq!(networks(&v11), networks(&v10));
    assert_eq!(v11.committed(true).horizon().map(|h| h.share), Some(0.5));
    assert_eq!(v10.committed(true).horizon(), None);
    for other in [&v11, v11.committed(false), v11.slurp_easy().unwrap()] {
        assert_eq!(other.horizon(), None);
    }

    assert_shortlist_recipe("fair-v10", &["--horizon", "0.5"], "fair-v11");
}

/// fair-v12 is fair-v11 with the same horizon for its network for
/// committed choices without backfilling: every network, every shortlist
/// and the horizon under EASY are fair-v11's. The card's recipe, `slurp
/// policy shortlist fair-v11 --committed-horizon 0.5`, rebuilds the
/// shipped file byte for byte.
#[test]
fn fair_v12_is_fair_v11_with_a_horizon_for_choices_kept_without_backfilling() {
    let v12 = slurp_fair::built_in("fair-v12").unwrap();
    let v11 = slurp_fair::built_in("fair-v11").unwrap();
    assert_eq!(networks(&v12), networks(&v11));
    assert_eq!(v12.committed(false).horizon().map(|h| h.share), Some(0.5));
    assert_eq!(v11.committed(false).horizon(), None);
    assert_eq!(v12.committed(true).horizon(), v11.committed(true).horizon());
    for other in [&v12, v12.slurp_easy().unwrap()] {
        assert_eq!(other.horizon(), None);
    }

    assert_shortlist_recipe("fair-v11", &["--committed-horizon", "0.5"], "fair-v12");
}

/// fair-v13 is fair-v12 with a backlog rule for its network for committed
/// choices without backfilling (`f1:256` while more than 1,024 jobs wait):
/// every network, shortlist and horizon is fair-v12's, and the network for
/// EASY has no rule. The card's recipe, `slurp policy shortlist fair-v12
/// --committed-backlog 1024:256`, rebuilds the shipped file byte for byte.
#[test]
fn fair_v13_is_fair_v12_with_a_backlog_rule_for_choices_kept_without_backfilling() {
    let v13 = slurp_fair::built_in("fair-v13").unwrap();
    let v12 = slurp_fair::built_in("fair-v12").unwrap();
    assert_eq!(networks(&v13), networks(&v12));
    let rule = |m: &slurp_fair::Model| m.backlog().map(|b| (b.jobs, b.margin));
    assert_eq!(rule(v13.committed(false)), Some((1024, 256.0)));
    for easy in [false, true] {
        assert_eq!(v13.committed(easy).horizon(), v12.committed(easy).horizon());
        assert_eq!(rule(v12.committed(easy)), None);
    }
    assert_eq!(rule(v13.committed(true)), None);
    for other in [&v13, v13.slurp_easy().unwrap()] {
        assert_eq!(rule(other), None);
    }

    assert_shortlist_recipe("fair-v12", &["--committed-backlog", "1024:256"], "fair-v13");
}

/// fair-v14 is fair-v13 whose networks, once the ended jobs show exact
/// estimates, hand their near-ties to SJF: its own within its margin
/// (`sjf:32`), every other among all the jobs it is shown (`sjf:1e9`).
/// Every network, shortlist, horizon and backlog rule is fair-v13's. The
/// card's recipe rebuilds the shipped file byte for byte.
#[test]
fn fair_v14_is_fair_v13_handing_near_ties_to_sjf_where_estimates_are_exact() {
    let v14 = slurp_fair::built_in("fair-v14").unwrap();
    let v13 = slurp_fair::built_in("fair-v13").unwrap();
    assert_eq!(networks(&v14), networks(&v13));
    let exact = |m: &slurp_fair::Model| m.exact().map(|l| l.to_string());
    assert_eq!(exact(&v14).as_deref(), Some("sjf:32"));
    for net in [
        v14.slurp_easy().unwrap(),
        v14.committed(false),
        v14.committed(true),
    ] {
        assert_eq!(exact(net).as_deref(), Some("sjf:1000000000"));
    }
    for easy in [false, true] {
        let (a, b) = (v14.committed(easy), v13.committed(easy));
        assert_eq!(a.horizon(), b.horizon());
        assert_eq!(a.backlog(), b.backlog());
        assert_eq!(exact(b), None);
    }

    assert_shortlist_recipe(
        "fair-v13",
        &[
            "--slurp-exact",
            "sjf:32",
            "--slurp-easy-exact",
            "sjf:1e9",
            "--committed-exact",
            "sjf:1e9",
            "--committed-easy-exact",
            "sjf:1e9",
        ],
        "fair-v14",
    );
}

/// `slurp policy shortlist FROM FLAGS… -o NAME.onnx`, a card's recipe,
/// rebuilds the shipped `stdlib/policies/NAME.onnx` byte for byte.
fn assert_shortlist_recipe(from: &str, flags: &[&str], name: &str) {
    let out = format!("{name}.onnx");
    let mut args = vec!["policy", "shortlist", from];
    args.extend_from_slice(flags);
    args.extend(["-o", &out]);
    let test = Test::new().args(&args);
    test.run().success();
    assert!(
        std::fs::read(test.path().join(&out)).unwrap()
            == std::fs::read(common::repo().join("stdlib/policies").join(&out)).unwrap(),
        "the card's recipe does not give {name}"
    );
}

/// A model kept in `fair/trainer/runs/` (a search's output).
fn searched_run(repo: &std::path::Path, name: &str) -> slurp_fair::Model {
    slurp_fair::Model::load(&repo.join("fair/trainer/runs").join(name), None).unwrap()
}

/// One network of a model: what it sees, its layers, its shortlist.
type Network = (
    Sight,
    Option<Vec<slurp_fair::export::Dense>>,
    Option<slurp_fair::shortlist::Shortlist>,
);

/// A model's four networks, by the key its file keeps each under (its own
/// network first, which the file keeps under none: `slurp`).
fn networks(m: &slurp_fair::Model) -> [(&'static str, Network); 4] {
    let net = |n: &slurp_fair::Model| (n.sight, n.layers(), n.shortlist());
    let committed = |easy| {
        let n = m.committed(easy);
        (n.sight, m.committed_layers(easy), n.shortlist())
    };
    [
        ("slurp", net(m)),
        ("slurp.easy", net(m.slurp_easy().unwrap_or(m))),
        ("slurp.committed", committed(false)),
        ("slurp.committed.easy", committed(true)),
    ]
}

/// `new` is `old` with the networks under the keys of `from` copied from
/// the model beside each key (what they see and their layers, which differ
/// from `old`'s), every rule kept: each other network, and every
/// shortlist, is `old`'s.
fn assert_replaced(
    new: &slurp_fair::Model,
    old: &slurp_fair::Model,
    from: &[(&str, &slurp_fair::Model)],
) {
    let (new, old) = (networks(new), networks(old));
    for ((key, mine), (_, before)) in new.into_iter().zip(old) {
        match from.iter().find(|(k, _)| *k == key) {
            None => assert_eq!(mine, before, "{key}: not the old model's"),
            Some((_, source)) => {
                let (_, theirs) = networks(source)
                    .into_iter()
                    .find(|(k, _)| *k == key)
                    .unwrap();
                assert_eq!(
                    (mine.0, &mine.1),
                    (theirs.0, &theirs.1),
                    "{key}: not the searched one"
                );
                assert_ne!(mine.1, before.1, "{key}: the old model's layers");
                assert_eq!(mine.2, before.2, "{key}: not the old model's rule");
            }
        }
    }
}

/// Where a recipe's searched networks are kept, and the built-in models.
const RUNS: &str = "fair/trainer/runs";
const BUILT: &str = "stdlib/policies";

/// The model card's recipe rebuilds the shipped `name` byte for byte: the
/// built-in model `base` with each `(KEY, DIR, FILE, MORE)` network copied
/// in turn from `DIR/FILE` (`ensemble.py`, one source each, with the
/// options `MORE`), the first copy carrying `name`'s provenance. Skipped,
/// saying why, without numpy and onnx.
fn assert_copies_recipe(base: &str, copies: &[(&str, &str, &str, &[&str])], name: &str) {
    if !python_has("numpy, onnx") {
        eprintln!("skipped rebuilding {name}: needs python3 with numpy and onnx");
        return;
    }
    let repo = common::repo();
    let shipped = repo.join(format!("stdlib/policies/{name}.onnx"));
    let trained = provenance(&shipped);
    assert!(trained.starts_with(&format!("{name}: {base}")), "{trained}");
    let test = Test::new();
    let mut from = repo.join(format!("stdlib/policies/{base}.onnx"));
    for (step, (key, dir, file, more)) in copies.iter().enumerate() {
        let out = test.path().join(format!("step{step}.onnx"));
        let source = format!("{}:{key}:1", repo.join(dir).join(file).display());
        let mut args: Vec<&std::ffi::OsStr> = vec![
            from.as_os_str(),
            out.as_os_str(),
            key.as_ref(),
            source.as_ref(),
        ];
        args.extend(more.iter().map(std::ffi::OsStr::new));
        if step == 0 {
            args.extend([
                std::ffi::OsStr::new("--trained"),
                std::ffi::OsStr::new(&trained),
            ]);
        }
        if !model_tool("ensemble.py", &args) {
            return;
        }
        from = out;
    }
    assert!(
        std::fs::read(from).unwrap() == std::fs::read(shipped).unwrap(),
        "the card's recipe does not give {name}"
    );
}

/// A model file's `slurp.trained` text, as the onnx package reads it (the
/// recipes pass it back to `ensemble.py --trained`).
fn provenance(model: &std::path::Path) -> String {
    let read = std::process::Command::new("python3")
        .args(["-c", "import onnx, sys; print(next(p.value for p in onnx.load(sys.argv[1]).metadata_props if p.key == 'slurp.trained'), end='')"])
        .arg(model)
        .output()
        .unwrap();
    assert!(
        read.status.success(),
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
    String::from_utf8(read.stdout).unwrap()
}

/// `long.py` judges models on long replays as `slurp sim` reports them:
/// each row's ratio is the model's worst user's bounded slowdown over the
/// fairest heuristic's on the same replay, the counts are the check's, and
/// slurp's own refusal (a model missing) is passed on, not a traceback.
#[test]
fn the_long_replay_tool_reports_slurps_own_replays() {
    if !python_has("json") {
        eprintln!("skipped: needs python3");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let long = |args: &[&str]| {
        let out = std::process::Command::new("python3")
            .arg(common::repo().join("fair/trainer/long.py"))
            .arg("--slurp")
            .arg(common::binary())
            .arg("--traces")
            .arg(dir.path())
            .args(["--set", "generated", "--seeds", "1", "--jobs", "1500"])
            .args(args)
            .output()
            .unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let (code, _, err) = long(&["/nonexistent/m.onnx"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("/nonexistent/m.onnx") && !err.contains("Traceback"),
        "{err}"
    );

    let model = common::repo().join("stdlib/policies/fair-v4.onnx");
    let model = model.to_str().unwrap();
    let (code, out, err) = long(&["--backfill", "easy", model]);
    assert_eq!(code, Some(0), "{err}");
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("gen:")).collect();
    assert_eq!(rows.len(), 5, "{out}");
    // The small family's row, recomputed from slurp's own replay.
    let row = rows
        .iter()
        .find(|l| l.starts_with("gen:small:1:1500 "))
        .unwrap_or_else(|| panic!("{out}"));
    let sim = std::process::Command::new(common::binary())
        .args(["sim", "gen:small:1:1500", "--json", "--policy"])
        .arg(format!(
            "fcfs+easy,sjf+easy,f1+easy,fairshare+easy,fair:{model}+easy"
        ))
        .output()
        .unwrap();
    assert!(sim.status.success());
    let json: serde_json::Value = serde_json::from_slice(&sim.stdout).unwrap();
    let worst = |p: &serde_json::Value| {
        p["summary"]["worst_user_bounded_slowdown"]
            .as_f64()
            .unwrap()
    };
    let policies = json["policies"].as_array().unwrap();
    let (heuristics, learned): (Vec<_>, Vec<_>) = policies
        .iter()
        .partition(|p| !p["policy"].as_str().unwrap().starts_with("fair:"));
    assert_eq!((heuristics.len(), learned.len()), (4, 1));
    let fairest = heuristics
        .iter()
        .min_by(|a, b| worst(a).total_cmp(&worst(b)))
        .unwrap();
    let ratio = worst(learned[0]) / worst(fairest);
    let name = fairest["policy"].as_str().unwrap();
    let name = if name == "easy" {
        "fcfs"
    } else {
        name.trim_end_matches("+easy")
    };
    let fields: Vec<&str> = row.split('|').collect();
    assert!(
        fields[1].split_whitespace().next() == Some(name),
        "{row}: {name}"
    );
    let printed: f64 = fields[2]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!((printed - ratio).abs() < 0.0006, "{row}: {ratio}");
    // The counts, from the rows (a cell won is within 1%; rounding aside).
    let ratios: Vec<f64> = rows
        .iter()
        .map(|l| {
            l.split('|')
                .nth(2)
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    let counts = out
        .lines()
        .find(|l| l.trim_start().starts_with("fair-v4: won "))
        .unwrap_or_else(|| panic!("{out}"));
    let within = ratios.iter().filter(|&&r| r <= 1.01).count();
    assert!(
        counts.contains(&format!(" within {within} ")) && counts.contains(" of 5; "),
        "{counts}: {ratios:?}"
    );
    let won: usize = counts["  fair-v4: won ".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(won <= within, "{counts}");
}

#[test]
fn long_replays_are_cells_of_their_own_in_the_search_and_in_keeping() {
    // Slurp's model without backfilling: one cell for the windows, one for
    // the long replay cut in two stretches.
    let test = small_search(
        "long.onnx",
        "1",
        &[
            "--hidden",
            "2",
            "--sim-model",
            "slurp",
            "--backfill",
            "none",
            "--long",
            "gen:small:1:3000@..2000",
            "--stretches",
            "2",
            "--validate",
            "gen:mid:2:3000",
        ],
    );
    let run = test.run().success();
    run.stderr_has(&[
        "on 2 windows of the first 75% of 1 trace",
        "and on gen:small:1:3000@0..2000 whole in 2 consecutive stretches each (long replays)",
        "lowest loss on 2 windows of 1 validation trace (never searched on) and the long replays",
        " of 2 cells won",
    ]);
    let bytes = std::fs::read(test.path().join("long.onnx")).unwrap();
    let said = b"with long replays of gen:small:1:3000@..2000 in 2 stretches each";
    assert!(bytes.windows(said.len()).any(|w| w == said));
    // Without a span, the training span (the first 75% of 3,000 jobs).
    small_search(
        "whole.onnx",
        "1",
        &["--hidden", "2", "--long", "gen:small:1:3000"],
    )
    .run()
    .success()
    .stderr_has(&["gen:small:1:3000@0..2250 whole in 4 consecutive stretches"]);
    // What cannot be replayed is refused before any search.
    for (more, said) in [
        (&["--long", "nope.swf"][..], "--long nope.swf"),
        (
            &["--long", "gen:small:1:3000@5000.."][..],
            "the workload has 3000 jobs",
        ),
        (
            &["--long", "gen:small:1:3000@..10", "--stretches", "20"][..],
            "cannot be cut into 20 stretches",
        ),
        (
            &["--long", "gen:small:1:3000", "--stretches", "0"][..],
            "--stretches: at least 1",
        ),
        // Stretches of no long trace: said, not ignored.
        (&["--stretches", "8"][..], "--long"),
    ] {
        let refused = small_search("r.onnx", "1", more);
        refused.run().invalid().stderr_has(&[said]);
        assert!(!refused.path().join("r.onnx").exists());
    }
}
