//! `slurp policy rollout` and learned policies in `slurp sim`, end to end
//! with the test actor (fair/tests/data, made by make.py with NumPy).

mod common;
use common::{Test, repo};

fn actor() -> Vec<u8> {
    std::fs::read(repo().join("fair/tests/data/actor-test.onnx")).unwrap()
}

fn busy_trace() -> Vec<u8> {
    std::fs::read(repo().join("sim/tests/data/lublin256-2001-3024.swf")).unwrap()
}

#[test]
fn rollout_writes_arrays_and_the_normalisers_it_used() {
    let test = Test::new()
        .file("a.onnx", actor())
        .file("t.swf", busy_trace())
        .args(&[
            "policy",
            "rollout",
            "--model",
            "a.onnx",
            "--trace",
            "t.swf",
            "--trajectories",
            "3",
            "--len",
            "32",
            "--seed",
            "9",
            "--out",
            "out",
        ]);
    test.run()
        .success()
        .stderr_has(&["3 episodes, 96 decisions", "(normalisers from the trace)"]);
    for name in slurp_fair::rollout::ARRAYS.iter().chain(&["episodes.json"]) {
        assert!(test.path().join("out").join(name).is_file(), "no {name}");
    }
    let norm: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(test.path().join("out/normalisers.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(norm["max_procs"], 256.0, "lublin_256's machine");
    let episodes: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(test.path().join("out/episodes.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(episodes.as_array().unwrap().len(), 3);
}

#[test]
fn rollout_can_play_a_teacher_against_a_baseline_and_hold_windows_out() {
    let rollout = |extra: &[&str]| {
        let mut args = vec![
            "policy",
            "rollout",
            "--trace",
            "t.swf",
            "--trajectories",
            "4",
            "--len",
            "32",
            "--out",
            "out",
        ];
        args.extend_from_slice(extra);
        Test::new()
            .file("a.onnx", actor())
            .file("t.swf", busy_trace())
            .args(&args)
            .run()
    };
    // F1 judged against itself gains nothing on any window.
    rollout(&[
        "--teacher",
        "f1",
        "--baseline",
        "f1",
        "--hold-out",
        "1:10,2:10",
    ])
    .success()
    .stderr_has(&["4 episodes, 128 decisions", "mean reward 0.000"]);
    // Against FCFS, SJF gains on these busy windows.
    let run = rollout(&["--teacher", "sjf", "--baseline", "fcfs"]).success();
    let reward: f64 = run
        .stderr
        .split("mean reward ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|r| r.parse().ok())
        .unwrap();
    assert!(reward > 0.0, "{}", run.stderr);
    // Mistakes are named.
    rollout(&["--teacher", "lifo"])
        .invalid()
        .stderr_has(&["--teacher", "unknown heuristic `lifo`"]);
    rollout(&["--model", "a.onnx", "--teacher", "f1"]).invalid();
    rollout(&["--teacher", "f1", "--hold-out", "12345"])
        .invalid()
        .stderr_has(&["SEED:COUNT"]);
    rollout(&["--teacher", "f1", "--hold-out", "900..800"])
        .invalid()
        .stderr_has(&["holds no job"]);
    rollout(&["--teacher", "f1", "--hold-out", "5000.."])
        .invalid()
        .stderr_has(&["the workload has"]);
}

/// Holding out the trace's last jobs (`FROM..`): no episode plays one of
/// them, though the same draw without the hold-out does.
#[test]
fn rollouts_never_play_the_held_out_span() {
    let starts = |extra: &[&str]| -> Vec<u64> {
        let mut args = vec![
            "policy",
            "rollout",
            "--teacher",
            "fcfs",
            "--trace",
            "t.swf",
            "--trajectories",
            "40",
            "--len",
            "32",
            "--seed",
            "3",
            "--out",
            "out",
        ];
        args.extend_from_slice(extra);
        let test = Test::new().file("t.swf", busy_trace()).args(&args);
        test.run().success();
        let episodes: serde_json::Value =
            serde_json::from_slice(&std::fs::read(test.path().join("out/episodes.json")).unwrap())
                .unwrap();
        episodes
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["window"]["start"].as_u64().unwrap())
            .collect()
    };
    let all = starts(&[]);
    assert!(all.iter().any(|&s| s + 32 > 700), "{all:?}");
    let held = starts(&["--hold-out", "700.."]);
    assert_eq!(held.len(), 40);
    assert!(held.iter().all(|&s| s + 32 <= 700), "{held:?}");
    let middle = starts(&["--hold-out", "300..600,1:5"]);
    assert!(
        middle.iter().all(|&s| s + 32 <= 300 || s >= 600),
        "{middle:?}"
    );
}

/// Normalisers for the test actor on the busy trace.
const NORM: &str = r#"{"max_run":162754.0,"max_procs":256.0,"max_mem":0.0,"max_user":1.0,"max_group":1.0,"max_exe":1.0}"#;

/// `slurp sim t.swf ARGS --json` beside the test actor and its
/// normalisers, as JSON.
fn judged(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["sim", "t.swf"];
    all.extend_from_slice(args);
    all.push("--json");
    let run = Test::new()
        .file("a.onnx", actor())
        .file("a.onnx.json", NORM)
        .file("t.swf", busy_trace())
        .args(&all)
        .run()
        .success();
    serde_json::from_str(&run.stdout).unwrap()
}

#[test]
fn a_learned_policy_is_judged_beside_the_heuristics() {
    let doc = judged(&[
        "--model",
        "reference",
        "--window",
        "0:200",
        "--policy",
        "fcfs,fair:a.onnx",
    ]);
    let names: Vec<&str> = doc["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["policy"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fcfs", "fair:a.onnx"]);
    assert_eq!(doc["policies"][1]["windows"][0]["jobs"], 200);
    // In slurp's own model too: the runtime core, the model choosing its
    // head, with and without EASY backfilling.
    let doc = judged(&[
        "--window",
        "0:200",
        "--policy",
        "fcfs,fair:a.onnx,easy,fair:a.onnx+easy",
    ]);
    for i in 0..4 {
        assert_eq!(doc["policies"][i]["windows"][0]["jobs"], 200);
    }
    // A model file is needed, with its normalisers.
    Test::new()
        .file("a.onnx", actor())
        .file("t.swf", busy_trace())
        .args(&[
            "sim",
            "t.swf",
            "--model",
            "reference",
            "--policy",
            "fair:a.onnx",
        ])
        .run()
        .invalid()
        .stderr_has(&["a.onnx.json", "missing"]);
}

#[test]
fn sampling_draws_from_the_policy_and_repeats_for_a_seed() {
    let figures = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec![
            "--model",
            "reference",
            "--samples",
            "3",
            "--len",
            "150",
            "--policy",
            "fair:a.onnx",
        ];
        args.extend_from_slice(extra);
        judged(&args)["policies"][0]["windows"].clone()
    };
    let greedy = figures(&[]);
    assert_eq!(greedy, figures(&[]), "argmax is deterministic");
    let drawn = figures(&["--sample", "--seed", "0"]);
    assert_eq!(
        drawn,
        figures(&["--sample", "--seed", "0"]),
        "the same draws for the same seed"
    );
    // The same windows (seed 0 both ways): sampling changes the schedule
    // somewhere.
    assert_ne!(drawn, greedy, "sampling never departed from the best slot");
}

/// A workflow on 2 cores whose start order shows the policy: one wide
/// task between two narrow ones, each writing its name when it starts.
const THREE: &str = "\
task n1 cores=1: echo n1 >> order; sleep 0.4
task w cores=2: echo w >> order; sleep 0.4
task n2 cores=1: echo n2 >> order; sleep 0.4
";

fn hand_set(name: &str) -> (Vec<u8>, Vec<u8>) {
    let dir = repo().join("fair/tests/data");
    (
        std::fs::read(dir.join(format!("{name}.onnx"))).unwrap(),
        std::fs::read(dir.join(format!("{name}.onnx.json"))).unwrap(),
    )
}

/// The lines tasks wrote to `order` in a run of slurp with `args`, beside
/// `files` and the hand-set `models` (each as SHORT.onnx from NAME).
fn start_order(files: &[(&str, &str)], models: &[(&str, &str)], args: &[&str]) -> Vec<String> {
    let mut test = Test::new();
    for (name, text) in files {
        test = test.file(name, text);
    }
    for (short, name) in models {
        let (onnx, norm) = hand_set(name);
        test = test
            .file(&format!("{short}.onnx"), onnx)
            .file(&format!("{short}.onnx.json"), norm);
    }
    let test = test.args(args);
    test.run().success();
    test.lines_of("order")
}

/// The order `slurp --cores 2 --policy POLICY` starts THREE's tasks in.
fn started(policy: &str) -> Vec<String> {
    start_order(
        &[("w.slurp", THREE)],
        &[("narrow", "narrowest-first"), ("wide", "widest-first")],
        &["--cores", "2", "--policy", policy, "w.slurp"],
    )
}

#[test]
fn a_learned_policy_chooses_what_a_real_run_starts() {
    // FCFS without backfilling: the wide task waits for n1, n2 for it.
    assert_eq!(started("fcfs"), ["n1", "w", "n2"]);
    // A model preferring narrow tasks starts both before the wide one...
    let narrow = started("fair:narrow.onnx");
    assert_eq!(narrow.len(), 3);
    assert_eq!(narrow[2], "w", "{narrow:?}");
    // ... one preferring wide ones starts it first, though it came second.
    let wide = started("fair:wide.onnx");
    assert_eq!(wide[0], "w", "{wide:?}");
    // With backfilling around its choice: the same choices here.
    assert_eq!(started("fair:wide.onnx+easy")[0], "w");
}

#[test]
fn a_run_with_easy_chooses_with_the_network_the_model_carries_for_it() {
    use slurp_fair::export::{self, Dense};
    // Feature 1 is a task's width (v4): weighed negatively, narrowest
    // first; positively, widest first.
    let width = |weight: f32| {
        let mut w = vec![0.0; slurp_fair::FEATURES];
        w[0] = weight;
        vec![Dense { w, b: vec![0.0] }]
    };
    let narrow = export::actor(&width(-1.0), "v4", &[]);
    let easy_wide = export::actor(
        &width(-1.0),
        "v4",
        &export::slurp_easy_notes(&width(1.0), slurp_fair::Sight::V4),
    );
    let order = |model: &[u8], policy: &str| {
        let test = Test::new()
            .file("w.slurp", THREE)
            .file("m.onnx", model)
            .args(&["--cores", "2", "--policy", policy, "w.slurp"]);
        test.run().success();
        test.lines_of("order")
    };
    // Without backfilling the model's own network chooses: the wide task last.
    assert_eq!(order(&easy_wide, "fair:m.onnx")[2], "w");
    assert_eq!(order(&narrow, "fair:m.onnx")[2], "w");
    // With EASY, the network it carries for EASY: the wide task first,
    // where the same model without that network starts it last.
    assert_eq!(order(&easy_wide, "fair:m.onnx+easy")[0], "w");
    assert_eq!(order(&narrow, "fair:m.onnx+easy")[2], "w");
}

#[test]
fn in_a_run_the_users_are_the_lines_and_sweeps() {
    // One core. s1 starts first (all tied: no user has started a task);
    // then the sweep, whose s1 has run, is no longer the calmest user: a
    // model preferring the calmest user takes b before s2, which FCFS
    // would start first. Were every task its own user, s2 would tie with b
    // and go first.
    let file = "\
task s[i=1..2] cores=1: echo s{i} >> order; sleep 0.3
task b cores=1: echo b >> order; sleep 0.3
";
    let order = |policy: &str| {
        start_order(
            &[("w.slurp", file)],
            &[("calm", "calmest-user-first")],
            &["--cores", "1", "--policy", policy, "w.slurp"],
        )
    };
    assert_eq!(order("fcfs"), ["s1", "s2", "b"]);
    assert_eq!(order("fair:calm.onnx"), ["s1", "b", "s2"]);
}

#[test]
fn in_a_run_sample_draws_the_choices_from_a_seed() {
    // At the start no user has run a task: the calmest-user model ties all
    // three, so its best slot is the first task, while draws spread.
    let file = "task t[i=1..3] cores=1: echo t{i} >> order\n";
    let first = |extra: &[&str]| {
        let mut args = vec!["--cores", "1", "--policy", "fair:calm.onnx"];
        args.extend_from_slice(extra);
        args.push("w.slurp");
        start_order(
            &[("w.slurp", file)],
            &[("calm", "calmest-user-first")],
            &args,
        )[0]
        .clone()
    };
    assert_eq!(first(&[]), "t1");
    let drawn: Vec<String> = (0..6)
        .map(|seed| first(&["--sample", "--seed", &seed.to_string()]))
        .collect();
    for (seed, task) in drawn.iter().enumerate() {
        assert_eq!(
            *task,
            first(&["--sample", "--seed", &seed.to_string()]),
            "seed {seed} drew differently"
        );
    }
    assert!(
        drawn.iter().any(|t| t != "t1"),
        "six seeds all drew the first task: {drawn:?}"
    );
}

#[test]
fn a_learned_policy_can_schedule_one_level_of_nesting() {
    let order = |policy: &str| {
        start_order(
            &[
                ("top.slurp", "task inner cores=2: slurp three.slurp\n"),
                ("three.slurp", THREE),
            ],
            &[("wide", "widest-first")],
            &["--cores", "2", "--policy", policy, "top.slurp"],
        )
    };
    // The top level (one task) by FCFS, the nested instance by the model.
    assert_eq!(order("fcfs,fair:wide.onnx")[0], "w");
    assert_eq!(order("fair:wide.onnx,fcfs"), ["n1", "w", "n2"]);
    // A nested entry can name its own model, found beside the file that
    // names it, and it wins over the level's policy.
    let nested = |line: &str| {
        start_order(
            &[("sub/top.slurp", line), ("sub/three.slurp", THREE)],
            &[("sub/wide", "widest-first")],
            &["--cores", "2", "--policy", "fcfs", "sub/top.slurp"],
        )
    };
    let own = nested("task inner cores=2 policy=fair:wide.onnx: slurp three.slurp\n");
    assert_eq!(own[0], "w", "{own:?}");
    // A model a file names must load before anything runs.
    let test = Test::new()
        .file(
            "top.slurp",
            "echo ran >> order\ntask inner cores=2 policy=fair:none.onnx: slurp three.slurp\n",
        )
        .file("three.slurp", THREE)
        .args(&["--cores", "2", "top.slurp"]);
    test.run().invalid().stderr_has(&[
        "slurp::bad_policy",
        "policy `fair:none.onnx`",
        "none.onnx: cannot",
        "top.slurp:2",
        "this policy",
    ]);
    assert!(!test.path().join("order").exists(), "a task ran");
}

/// Every built-in model (`fair`, `fair-v2` … `fair-v12`) is a policy a
/// nested entry may name, alone or `+easy`, as `--policy` may: the file is
/// valid, and the entry's instance starts its tasks in the order the same
/// model gives that level from the command line, not FCFS's.
#[test]
fn a_nested_entry_can_name_any_built_in_model() {
    for name in slurp_fair::spec::BUILT_IN {
        assert!(
            slurp_interpreter::POLICIES.contains(&name),
            "`policy={name}` would be refused in a file"
        );
    }
    for policy in [
        "fair-v10+easy",
        "fair-v12",
        "fair-v11+easy",
        "fair-v9+easy",
        "fair-v8",
        "fair-v7",
        "fair-v6",
        "fair-v5+easy",
        "fair-v4",
        "fair",
    ] {
        let entry = format!("task inner cores=2 policy={policy}: slurp three.slurp\n");
        let run = |line: &str, level: &str| {
            start_order(
                &[("top.slurp", line), ("three.slurp", THREE)],
                &[],
                &["--cores", "2", "--policy", level, "top.slurp"],
            )
        };
        // n1 and n2 take a core each and may start at the same instant,
        // so where the wide task w starts is what tells orders apart.
        let wide = |order: Vec<String>| {
            assert_eq!(order.len(), 3, "{policy}: {order:?}");
            order.iter().position(|t| t == "w")
        };
        let own = wide(run(&entry, "fcfs"));
        let plain = "task inner cores=2: slurp three.slurp\n";
        assert_eq!(own, wide(run(plain, &format!("fcfs,{policy}"))), "{policy}");
        // FCFS would start n1, then hold n2 behind w.
        assert_ne!(own, wide(run(plain, "fcfs")), "{policy} ordered as FCFS");
    }
}

#[test]
fn a_learned_policy_that_cannot_be_loaded_stops_the_run_before_it_starts() {
    let test = Test::new()
        .file("w.slurp", THREE)
        .file("bad.onnx", "not a model")
        .args(&["--cores", "2", "--policy", "fair:bad.onnx", "w.slurp"]);
    test.run()
        .invalid()
        .stderr_has(&["bad.onnx", "cannot read the model"]);
    assert!(!test.path().join("order").exists(), "a task ran");
    let missing = Test::new()
        .file("w.slurp", THREE)
        .args(&["--cores", "2", "--policy", "fair:", "w.slurp"]);
    missing.run().invalid().stderr_has(&["fair:MODEL.onnx"]);
}

/// `--policy fair` alone is the shipped model, built into the binary: a
/// real run needs no model file.
#[test]
fn the_shipped_model_runs_a_workflow_without_a_file() {
    let test = Test::new()
        .file("w.slurp", THREE)
        .args(&["--cores", "2", "--policy", "fair", "w.slurp"]);
    test.run().success();
    let mut order: Vec<String> = std::fs::read_to_string(test.path().join("order"))
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    order.sort();
    assert_eq!(order, ["n1", "n2", "w"]);
}

/// The shipped model judged as its card states it, on weeks of RICC it
/// was not trained on (jobs from 320,000 on; it trained on the ones
/// before): over 100 busy windows (FCFS at 3 or more) its worst user fares
/// at least 1% better than under FCFS, SJF and F1, and its average bounded
/// slowdown is within 1.1× the best heuristic's. The card's table must be
/// these figures. The trace is the slice of those weeks (`--within 0..`
/// there draws the windows `--within 320000..` draws in the whole trace).
#[test]
fn the_shipped_model_is_fairer_than_the_heuristics_on_weeks_it_never_saw() {
    let trace = repo().join("fair/tests/data/RICC-2010-2-sep.swf.xz");
    let run = Test::new()
        .args(&[
            "sim",
            trace.to_str().unwrap(),
            "--model",
            "reference",
            "--samples",
            "100",
            "--len",
            "128",
            "--seed",
            "12345",
            "--within",
            "0..",
            "--min-bsld",
            "3",
            "--policy",
            "fcfs,sjf,f1,wfp3,unicep,fair",
            "--json",
        ])
        .run()
        .success();
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let figures = |name: &str| -> [f64; 3] {
        let p = doc["policies"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["policy"] == name)
            .unwrap_or_else(|| panic!("no {name}"));
        let s = &p["summary"];
        [
            "avg_bounded_slowdown",
            "worst_user_bounded_slowdown",
            "jain",
        ]
        .map(|k| s[k].as_f64().unwrap())
    };
    let [avg, worst, _] = figures("fair");
    for rival in ["fcfs", "sjf", "f1"] {
        let [_, theirs, _] = figures(rival);
        assert!(
            worst <= 0.99 * theirs,
            "worst user {worst:.2} under fair, {theirs:.2} under {rival}"
        );
    }
    let best = ["fcfs", "sjf", "f1", "wfp3", "unicep"]
        .map(|h| figures(h)[0])
        .into_iter()
        .fold(f64::INFINITY, f64::min);
    assert!(
        avg <= 1.1 * best,
        "average {avg:.2}, best heuristic {best:.2}"
    );

    // The card's held-out table (`| policy | avg | worst user's | Jain |`,
    // the first table of its "## Held-out evaluation").
    let card = std::fs::read_to_string(repo().join("stdlib/policies/MODEL_CARD.md")).unwrap();
    let section = card
        .split("\n## ")
        .find(|s| s.starts_with("Held-out evaluation"))
        .expect("the card has a \"## Held-out evaluation\"");
    let table = section
        .split("\n\n")
        .find(|p| p.trim_start().starts_with('|'));
    let mut rows = 0;
    for line in table.expect("a table").lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let [_, label, a, w, j, _] = cells[..] else {
            continue;
        };
        let name = if label == "fair (this model)" {
            "fair"
        } else {
            label
        };
        if !["fcfs", "sjf", "f1", "wfp3", "unicep", "fair"].contains(&name) {
            continue;
        }
        let stated = [a, w, j].map(|c| c.parse::<f64>().unwrap());
        let computed = figures(name);
        for (s, c) in stated.iter().zip(computed) {
            assert!(
                (s - c).abs() <= 0.0051,
                "the card says {s} for {name}, slurp sim computes {c:.3}"
            );
        }
        rows += 1;
    }
    assert_eq!(
        rows, 6,
        "the card's table lists the five heuristics and the model"
    );
}

#[test]
fn judge_tables_a_model_against_every_heuristic_in_every_cell() {
    let model = std::fs::read(repo().join("fair/tests/data/shortest-v2.onnx")).unwrap();
    let judge = |extra: &[&str]| {
        let mut args = vec![
            "policy",
            "judge",
            "m.onnx",
            "gen:small:1:3000",
            "--samples",
            "3",
            "--len",
            "256",
        ];
        args.extend_from_slice(extra);
        Test::new().file("m.onnx", &model).args(&args).run()
    };
    let doc: serde_json::Value =
        serde_json::from_str(&judge(&["--json"]).success().stdout).unwrap();
    assert_eq!(doc["observation"], "v2");
    let cells = doc["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4, "both models, without and with EASY");
    // Each cell says its verdict, as its figures make it; the totals count them.
    for cell in cells {
        let own = cell["learned"]["worst_user_bounded_slowdown"]
            .as_f64()
            .unwrap();
        let fairest = cell["rivals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["worst_user_bounded_slowdown"].as_f64().unwrap())
            .fold(f64::INFINITY, f64::min);
        assert_eq!(cell["holds"], own <= 1.01 * fairest, "{cell}");
        assert_eq!(cell["wins"], own <= 0.99 * fairest, "{cell}");
    }
    for (each, total) in [
        ("wins", "wins"),
        ("holds", "holds"),
        ("average_within", "averages_within"),
    ] {
        let count = cells.iter().filter(|c| c[each] == true).count();
        assert_eq!(doc[total], count, "{each}");
    }
    let rivals: Vec<&str> = cells[1]["rivals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["policy"].as_str().unwrap())
        .collect();
    assert_eq!(rivals, ["easy", "sjf+easy", "f1+easy", "fairshare+easy"]);
    assert_eq!(cells[1]["learned"]["policy"], "m.onnx+easy");
    // The cell's figures are `slurp sim`'s on the same windows.
    for (cell, model, policy) in [(0, "slurp", "sjf"), (3, "reference", "fairshare+easy")] {
        let sim = Test::new()
            .args(&[
                "sim",
                "gen:small:1:3000",
                "--model",
                model,
                "--samples",
                "3",
                "--len",
                "256",
                "--seed",
                "12345",
                "--policy",
                policy,
                "--json",
            ])
            .run()
            .success();
        let sim: serde_json::Value = serde_json::from_str(&sim.stdout).unwrap();
        let r = cells[cell]["rivals"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["policy"] == policy)
            .unwrap();
        assert_eq!(
            r["worst_user_bounded_slowdown"],
            sim["policies"][0]["summary"]["worst_user_bounded_slowdown"],
            "{model} {policy}"
        );
    }
    // The table, and --check: a stand-in SJF does not beat SJF by 1%.
    let table = judge(&["--check"]);
    assert_eq!(table.status, 1, "{}", table.stdout);
    for fragment in [
        "| gen:small:1:3000 | slurp | none |",
        "| reference | easy |",
        "does not pass",
        "fairest heuristic",
    ] {
        assert!(
            table.stdout.contains(fragment),
            "no {fragment:?} in\n{}",
            table.stdout
        );
    }
    assert_eq!(
        judge(&[]).status,
        0,
        "without --check the table is the answer"
    );
}

#[test]
fn a_v2_model_needs_no_normalisers_in_a_real_run() {
    // One core; the v2 stand-in SJF prefers the task whose `time` is short
    // against the others', whatever the instance: after the first (all
    // queued at once, the first choice is the shortest), l1 and l2 wait
    // for s.
    let file = "\
task l1 time=1h: echo l1 >> order
task l2 time=2h: echo l2 >> order
task s time=1m: echo s >> order
";
    let model = std::fs::read(repo().join("fair/tests/data/shortest-v2.onnx")).unwrap();
    let test = Test::new()
        .file("w.slurp", file)
        .file("m.onnx", model)
        .args(&["--cores", "1", "--policy", "fair:m.onnx", "w.slurp"]);
    test.run().success();
    let order = std::fs::read_to_string(test.path().join("order")).unwrap();
    assert_eq!(order.lines().collect::<Vec<_>>(), ["s", "l1", "l2"]);
}

/// What README, --help and the card tell users, on multi-user workloads
/// none of the models was trained on (generated families, seeds held out),
/// in slurp's own model — what `slurp FILE --policy …` schedules with:
/// `fair-v2` … `fair-v9` leave the worst user at least 1%
/// better off than every heuristic (FCFS, SJF, F1, `fairshare`, same
/// backfilling) with the average within 1.1× the best; `fair` (fair-v1)
/// trails `fairshare+easy`. (fair-v10's networks for slurp's model are
/// fair-v9's, which `tests/train.rs` holds it to, so it is not judged
/// again here.)
#[test]
fn off_their_sites_fair_v2_to_v9_are_fairer_than_every_heuristic_and_fair_v1_is_not() {
    let judge =
        |model: &str| judge_json(&[model, "gen:large:5", "gen:saturated:9", "--samples", "10"]);
    let mut checked = 0;
    let models = [
        "fair-v2", "fair-v3", "fair-v4", "fair-v5", "fair-v6", "fair-v7", "fair-v8", "fair-v9",
    ];
    for (name, judged) in models.map(|m| (m, judge(m))) {
        for cell in judged["cells"].as_array().unwrap() {
            if cell["model"] != "slurp" {
                continue;
            }
            let rivals = cell["rivals"].as_array().unwrap();
            let own = &cell["learned"];
            for r in rivals {
                assert!(
                    worst(own) <= 0.99 * worst(r),
                    "{} backfill {}: {name} {} vs {} {}",
                    cell["workload"],
                    cell["backfill"],
                    worst(own),
                    r["policy"],
                    worst(r)
                );
            }
            let best = rivals.iter().map(avg).fold(f64::INFINITY, f64::min);
            assert!(
                avg(own) <= 1.1 * best,
                "{name} on {}: average {} vs {best}",
                cell["workload"],
                avg(own)
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 32);
    let v1 = judge("fair");
    for cell in v1["cells"].as_array().unwrap() {
        if cell["backfill"] != true {
            continue;
        }
        let fairshare = cell["rivals"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["policy"] == "fairshare+easy")
            .unwrap();
        assert!(
            worst(fairshare) < 0.9 * worst(&cell["learned"]),
            "{} {}: fairshare+easy {}, fair-v1+easy {}",
            cell["workload"],
            cell["model"],
            worst(fairshare),
            worst(&cell["learned"])
        );
    }
}

/// What fair-v4's widths and its network for committed choices are for: in
/// RLScheduler's model without backfilling (a choice waits until it
/// starts), on busy windows of RICC's weeks it never trained on, where F1's
/// preference for narrow jobs keeps the queue moving, fair-v4's worst user
/// is at least 1% better off than under every heuristic and at least 10%
/// better off than under fair-v3, which cannot tell narrow jobs apart on
/// 8,192 cores; its average stays within 1.1× the best heuristic's.
#[test]
fn fair_v4_commits_to_choices_fairly_where_fair_v3_cannot_see_widths() {
    let trace = repo().join("fair/tests/data/RICC-2010-2-sep.swf.xz");
    let judge = |model: &str| {
        let doc = judge_json(&[
            model,
            trace.to_str().unwrap(),
            "--samples",
            "10",
            "--min-bsld",
            "3",
        ]);
        doc["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["model"] == "reference" && c["backfill"] == false)
            .expect("the reference model's cell without backfilling")
            .clone()
    };
    let (v4, v3) = (judge("fair-v4"), judge("fair-v3"));
    let own = &v4["learned"];
    let rivals = v4["rivals"].as_array().unwrap();
    assert_eq!(rivals.len(), 4);
    for r in rivals {
        assert!(
            worst(own) <= 0.99 * worst(r),
            "fair-v4 {} vs {} {}",
            worst(own),
            r["policy"],
            worst(r)
        );
    }
    let best = rivals.iter().map(avg).fold(f64::INFINITY, f64::min);
    assert!(avg(own) <= 1.1 * best, "average {} vs {best}", avg(own));
    assert!(
        worst(own) <= 0.9 * worst(&v3["learned"]),
        "fair-v4 {} vs fair-v3 {}",
        worst(own),
        worst(&v3["learned"])
    );
}

/// What fair-v5 is: fair-v4 wherever no backfilling runs (the same
/// networks, so the same figures in every such cell), and networks of its
/// own under EASY. The one real `+easy` runs use also weighs `fairshare`'s
/// turns: on busy windows of RICC's weeks no model saw, in slurp's model
/// with EASY, its worst user is at least 10% better off than fair-v4's and
/// at least 1% better off than under every heuristic, `fairshare+easy`
/// included; the average stays within 1.1× the best.
#[test]
fn fair_v5_is_fair_v4_without_backfilling_and_fairer_with_easy_on_held_out_weeks() {
    let trace = repo().join("fair/tests/data/RICC-2010-2-sep.swf.xz");
    let trace = trace.to_str().unwrap();
    for seed in ["12345", "7"] {
        let judge = |model: &str| {
            let args = [model, trace, "--samples", "30", "--min-bsld", "3"];
            judge_json(&[&args[..], &["--seed", seed]].concat())
        };
        let (v5, v4) = (judge("fair-v5"), judge("fair-v4"));
        let (v5, v4) = (
            v5["cells"].as_array().unwrap(),
            v4["cells"].as_array().unwrap(),
        );
        assert_eq!(v5.len(), 4);
        for (five, four) in v5.iter().zip(v4) {
            assert_eq!(
                (&five["model"], &five["backfill"]),
                (&four["model"], &four["backfill"])
            );
            if five["backfill"] == false {
                assert_eq!(worst(&five["learned"]), worst(&four["learned"]));
                assert_eq!(avg(&five["learned"]), avg(&four["learned"]));
            }
        }
        let slurp_easy = |cells: &[serde_json::Value]| {
            cells
                .iter()
                .find(|c| c["model"] == "slurp" && c["backfill"] == true)
                .expect("slurp's model with EASY")
                .clone()
        };
        let (five, four) = (slurp_easy(v5), slurp_easy(v4));
        let rivals = five["rivals"].as_array().unwrap();
        let fairest = rivals.iter().map(worst).fold(f64::INFINITY, f64::min);
        let own = &five["learned"];
        assert!(
            worst(own) <= 0.9 * worst(&four["learned"]),
            "seed {seed}: fair-v5+easy {} vs fair-v4+easy {}",
            worst(own),
            worst(&four["learned"])
        );
        assert!(
            worst(own) <= 0.99 * fairest,
            "seed {seed}: fair-v5+easy {} vs the fairest heuristic {fairest}",
            worst(own)
        );
        let best = rivals.iter().map(avg).fold(f64::INFINITY, f64::min);
        assert!(avg(own) <= 1.1 * best, "average {} vs {best}", avg(own));
    }
}

/// `slurp policy judge ARGS... --json`, read.
fn judge_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["policy", "judge"];
    all.extend_from_slice(args);
    all.push("--json");
    let run = Test::new().args(&all).run().success();
    serde_json::from_str(&run.stdout).unwrap()
}

/// A policy's worst user's mean bounded slowdown in `judge --json`'s figures.
fn worst(s: &serde_json::Value) -> f64 {
    s["worst_user_bounded_slowdown"].as_f64().unwrap()
}

/// Its average bounded slowdown.
fn avg(s: &serde_json::Value) -> f64 {
    s["avg_bounded_slowdown"].as_f64().unwrap()
}

/// `--why` names, for each cell the model trails, the windows that make
/// most of its excess over the fairest heuristic and the user worst off in
/// each, with what that user's jobs are like. Every figure is recomputed
/// here from `slurp sim`'s schedules of the same windows and from the
/// generated trace itself.
#[test]
fn judge_why_names_the_windows_and_the_user_behind_a_trailing_cell() {
    // fair-v1, trained on one site, trails on this workload's three
    // windows in three cells of four.
    let args = ["fair", "gen:small:8", "--samples", "3", "--why"];
    let doc = judge_json(&args);
    let trace = Test::new()
        .args(&["policy", "generate", "small", "--seed", "8"])
        .run()
        .success()
        .stdout;
    // SWF: run is field 3, processors 4, estimate 8, user 11.
    let jobs: Vec<[f64; 4]> = trace
        .lines()
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<f64> = l.split_whitespace().map(|x| x.parse().unwrap()).collect();
            [f[3], f[4], f[8], f[11]]
        })
        .collect();
    let median = |mut xs: Vec<f64>| {
        xs.sort_by(f64::total_cmp);
        let n = xs.len();
        if n % 2 == 1 {
            xs[n / 2]
        } else {
            (xs[n / 2 - 1] + xs[n / 2]) / 2.0
        }
    };
    let mut lines = Vec::new();
    let mut trailing = 0;
    for cell in doc["cells"].as_array().unwrap() {
        assert_eq!(cell.get("why").is_some(), cell["holds"] == false, "{cell}");
        let Some(why) = cell.get("why") else { continue };
        trailing += 1;
        let against = why["against"].as_str().unwrap();
        let learned = cell["learned"]["policy"].as_str().unwrap();
        let model = cell["model"].as_str().unwrap();
        let sim = Test::new()
            .args(&[
                "sim",
                "gen:small:8",
                "--model",
                model,
                "--samples",
                "3",
                "--len",
                "1024",
                "--seed",
                "12345",
                "--policy",
                &format!("{against},{learned}"),
                "--json",
            ])
            .run()
            .success();
        let sim: serde_json::Value = serde_json::from_str(&sim.stdout).unwrap();
        let procs = sim["machine"]["nodes"].as_f64().unwrap()
            * sim["machine"]["procs_per_node"].as_f64().unwrap();
        let theirs = sim["policies"][0]["windows"].as_array().unwrap();
        let own = sim["policies"][1]["windows"].as_array().unwrap();
        // The excess: each window where the model's worst user is above
        // the heuristic's, by how much, largest first.
        let mut over: Vec<(f64, usize)> = (0..own.len())
            .map(|i| (worst(&own[i]) - worst(&theirs[i]), i))
            .filter(|&(d, _)| d > 0.0)
            .collect();
        over.sort_by(|a, b| b.0.total_cmp(&a.0));
        let excess: f64 = over.iter().map(|o| o.0).sum();
        let mut wide = 0.0;
        let named = why["windows"].as_array().unwrap();
        let sizable = over.iter().filter(|o| o.0 >= 0.01 * excess).count();
        assert_eq!(named.len(), sizable.min(3), "{why}");
        for (k, &(d, i)) in over.iter().enumerate() {
            let start = sim["windows"][i]["start"].as_u64().unwrap() as usize;
            let user = own[i]["worst_user"].as_i64().unwrap();
            let mine: Vec<&[f64; 4]> = jobs[start..start + 1024]
                .iter()
                .filter(|j| j[3] as i64 == user)
                .collect();
            let width = median(mine.iter().map(|j| j[1] / procs).collect());
            if width >= 0.5 {
                wide += d / excess;
            }
            let Some(w) = named.get(k) else { continue };
            let near = |key: &str, want: f64| {
                let got = w[key].as_f64().unwrap();
                assert!(
                    (got - want).abs() <= 1e-6 * want.abs().max(1.0),
                    "{key}: {got} against {want} in {w}"
                );
            };
            assert_eq!(w["start"], start);
            assert_eq!(w["user"], user);
            assert_eq!(w["jobs"], mine.len());
            near("share", d / excess);
            near("learned", worst(&own[i]));
            let under_theirs = theirs[i]["per_user"]
                .as_array()
                .unwrap()
                .iter()
                .find(|u| u["user"] == user)
                .unwrap()["avg_bounded_slowdown"]
                .as_f64()
                .unwrap();
            near("heuristic", under_theirs);
            near("width", width);
            near("run", median(mine.iter().map(|j| j[0]).collect()));
            near("estimate", median(mine.iter().map(|j| j[2]).collect()));
            lines.push(format!(
                "  jobs {start}..{} ({:.0}% of the excess): user {user}, ",
                start + 1024,
                100.0 * d / excess
            ));
        }
        let got = why["wide"].as_f64().unwrap();
        assert!((got - wide).abs() < 1e-9, "wide share {got} against {wide}");
    }
    assert!(trailing >= 1, "a trailing cell to explain");
    lines.push(format!(
        "Why fair trails: {trailing} cells more than 1% above the fairest heuristic"
    ));
    Test::new()
        .args(&["policy", "judge"])
        .args(&args)
        .run()
        .success()
        .stdout_has(&lines.iter().map(String::as_str).collect::<Vec<_>>());
    // Without --why the JSON has no such key.
    let plain = judge_json(&args[..4]);
    assert!(
        plain["cells"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c.get("why").is_none())
    );
}

/// `--draws N` judges on N draws of windows, seeds S, S+1, …: each draw is
/// what a judge with that one seed says, cell for cell, each cell's table
/// row ends its ratios with their geometric mean and worst, and `--check`
/// passes only when every draw does.
#[test]
fn judging_on_several_draws_gives_each_seeds_own_verdicts() {
    let args = ["fair-v4", "gen:small:8", "--samples", "3"];
    let several = judge_json(&[&args[..], &["--seed", "7", "--draws", "3"]].concat());
    let draws = several["draws"].as_array().unwrap();
    assert_eq!(draws.len(), 3);
    for (draw, seed) in draws.iter().zip(7..) {
        assert_eq!(draw["seed"], seed);
        let seed = seed.to_string();
        let one = judge_json(&[&args[..], &["--seed", &seed]].concat());
        for key in ["cells", "wins", "holds", "averages_within", "passed"] {
            assert_eq!(draw[key], one[key], "seed {seed}: {key}");
        }
    }
    assert_ne!(draws[0]["cells"], draws[1]["cells"], "the draws differ");
    let passing = draws.iter().filter(|d| d["passed"] == true).count();
    assert_eq!(several["passed"], passing == 3);

    let cli = |extra: &[&str]| {
        let mut all = vec!["policy", "judge"];
        all.extend_from_slice(&args);
        all.extend_from_slice(&["--seed", "7", "--draws", "3"]);
        all.extend_from_slice(extra);
        Test::new().args(&all).run()
    };
    let mut lines: Vec<String> = (7..)
        .zip(draws)
        .map(|(seed, draw)| format!("seed {seed}: wins {} of 4 cells", draw["wins"]))
        .collect();
    lines.push(format!("passes on {passing} of 3 draws"));
    lines.push("| gen:small:8 | slurp | easy |".into());
    // Each cell's ratios over the draws, their geometric mean and the
    // worst, from the JSON's own figures.
    for cell in 0..4 {
        let ratios: Vec<f64> = draws
            .iter()
            .map(|d| {
                let c = &d["cells"][cell];
                let rivals = c["rivals"].as_array().unwrap();
                worst(&c["learned"]) / rivals.iter().map(worst).fold(f64::INFINITY, f64::min)
            })
            .collect();
        let geometric = (ratios.iter().map(|r| r.ln()).sum::<f64>() / 3.0).exp();
        let most = ratios.iter().copied().fold(f64::NAN, f64::max);
        lines.push(format!("| {geometric:.3}, {most:.3} | "));
    }
    cli(&[])
        .success()
        .stdout_has(&lines.iter().map(String::as_str).collect::<Vec<_>>());
    let checked = cli(&["--check"]);
    assert_eq!(checked.status, if passing == 3 { 0 } else { 1 });

    let mut zero = vec!["policy", "judge"];
    zero.extend_from_slice(&args);
    zero.extend_from_slice(&["--draws", "0"]);
    Test::new()
        .args(&zero)
        .run()
        .invalid()
        .stderr_has(&["--draws", "at least 1"]);
}

/// `--stretches N` replays each workload (or `--within`'s span) whole, in N
/// consecutive stretches, instead of drawing windows: each cell's figures
/// are the means of what `slurp sim --window` gives for those stretches,
/// the table says what was replayed, and the options that draw windows are
/// refused beside it.
#[test]
fn judging_on_consecutive_stretches_replays_the_whole_workload() {
    let trace = "gen:small:1:3000";
    let doc = judge_json(&["fair-v4", trace, "--stretches", "3"]);
    assert_eq!(doc["stretches"], 3);
    // No windows were drawn, so no draw is named.
    for key in ["samples", "len", "seed"] {
        assert!(doc[key].is_null(), "{key}: {}", doc[key]);
    }
    let cells = doc["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    // Stretches 0:1000, 1000:1000 and 2000:1000, each replayed by F1 and
    // the model in the cell's simulation model and backfilling.
    let replayed = |model: &str, plus: &str, window: &str| -> (f64, f64) {
        let policies = format!("f1{plus},fair-v4{plus}");
        let run = Test::new()
            .args(&["sim", trace, "--model", model, "--window", window])
            .args(&["--policy", &policies, "--json"])
            .run()
            .success();
        let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        let of = |i: usize| worst(&doc["policies"][i]["summary"]);
        (of(0), of(1))
    };
    for cell in cells {
        let model = cell["model"].as_str().unwrap();
        let plus = if cell["backfill"] == true {
            "+easy"
        } else {
            ""
        };
        let (mut f1, mut own) = (0.0, 0.0);
        for window in ["0:1000", "1000:1000", "2000:1000"] {
            let (a, b) = replayed(model, plus, window);
            f1 += a / 3.0;
            own += b / 3.0;
        }
        let rival = cell["rivals"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["policy"] == format!("f1{plus}"))
            .unwrap();
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(1.0);
        assert!(
            close(worst(rival), f1),
            "{model}{plus}: F1 {} vs {f1}",
            worst(rival)
        );
        assert!(close(worst(&cell["learned"]), own), "{model}{plus}: model");
    }
    // `slurp policy judge fair-v4 TRACE --stretches ARGS...`.
    let stretched = |args: &[&str]| {
        Test::new()
            .args(&["policy", "judge", "fair-v4", trace, "--stretches"])
            .args(args)
            .run()
    };
    // A span in one replay, and the table's header.
    stretched(&["1", "--within", "1000.."])
        .success()
        .stdout_has(&["on each workload (jobs 1000..) whole, in one replay;"]);
    for drawn in ["--samples", "--seed"] {
        stretched(&["2", drawn, "5"])
            .invalid()
            .stderr_has(&["--stretches", drawn]);
    }
    stretched(&["0"])
        .invalid()
        .stderr_has(&["--stretches", "at least 1"]);
    stretched(&["4000"])
        .invalid()
        .stderr_has(&["cannot be cut into 4000 stretches"]);
}

#[test]
fn a_shortlist_given_to_a_model_decides_a_real_run_and_can_be_taken_away() {
    use slurp_fair::export::{self, Dense};
    // Feature 1 is a task's width (v4), weighed negatively: narrowest first.
    let mut w = vec![0.0; slurp_fair::FEATURES];
    w[0] = -1.0;
    let narrow = export::actor(&[Dense { w, b: vec![0.0] }], "v4", &[]);
    // `slurp policy shortlist m.onnx ARGS -o out.onnx`: the model written.
    let shortlisted = |model: &[u8], args: &[&str]| {
        let mut all = vec!["policy", "shortlist", "m.onnx", "-o", "out.onnx"];
        all.extend_from_slice(args);
        let test = Test::new().file("m.onnx", model).args(&all);
        let run = test.run().success();
        (
            std::fs::read(test.path().join("out.onnx")).unwrap(),
            run.stderr,
        )
    };
    let order = |model: &[u8]| {
        let test = Test::new()
            .file("w.slurp", THREE)
            .file("m.onnx", model)
            .args(&["--cores", "2", "--policy", "fair:m.onnx", "w.slurp"]);
        test.run().success();
        test.lines_of("order")
    };
    assert_eq!(
        order(&narrow)[2],
        "w",
        "the network alone: the wide task last"
    );
    // A margin past every gap between logits hands each choice to FCFS:
    // the wide task, second in the file, starts second.
    let (fcfs, said) = shortlisted(&narrow, &["--slurp", "fcfs:1e9"]);
    assert!(said.contains("its own network fcfs:1000000000"), "{said}");
    assert_eq!(order(&fcfs), ["n1", "w", "n2"]);
    // With a width, the task of the whole instance is the network's alone:
    // FCFS picks among the narrow ones, and the network puts `w` last.
    let (wide, said) = shortlisted(&narrow, &["--slurp", "fcfs:1e9:0.5"]);
    assert!(
        said.contains("its own network fcfs:1000000000:0.5"),
        "{said}"
    );
    // (The two narrow tasks start together, in either order.)
    let got = order(&wide);
    assert_eq!(got[2], "w", "{got:?}");
    // Taken away, the network chooses alone again.
    let (cleared, said) = shortlisted(&fcfs, &["--clear"]);
    assert!(said.contains("its own network none"), "{said}");
    assert_eq!(order(&cleared)[2], "w");

    // What it refuses, each with the reason.
    let refused = |args: &[&str]| {
        let mut all = vec!["policy", "shortlist", "m.onnx", "-o", "out.onnx"];
        all.extend_from_slice(args);
        let test = Test::new().file("m.onnx", &narrow).args(&all);
        let run = test.run().invalid();
        assert!(!test.path().join("out.onnx").exists(), "{args:?} wrote");
        run
    };
    refused(&["--committed", "f1:3"])
        .stderr_has(&["--committed", "no network of its own for committed choices"]);
    refused(&[]).stderr_has(&["nothing to change"]);
    refused(&["--slurp", "f1:x"]).stderr_has(&["`x` is not a margin"]);
    refused(&["--slurp", "f1:3:2"]).stderr_has(&["`2` is not a width", "at most 1"]);
    refused(&["--slurp", "sfj:3"]).stderr_has(&["not an order a shortlist can use"]);
    // `fairshare` reads the users' places in turns, which v4 does not show.
    refused(&["--slurp", "fairshare:3"]).stderr_has(&["--slurp: `fairshare:3`", "seeing v4"]);
    // A name that is neither a file nor built in is told the built-in
    // names, as `--policy` and `--init` are.
    let test = Test::new().args(&[
        "policy",
        "shortlist",
        "fair-v99",
        "-o",
        "out.onnx",
        "--clear",
    ]);
    test.run()
        .invalid()
        .stderr_has(&["fair-v99", "nor is it a built-in model", "fair-v12"]);
    assert!(!test.path().join("out.onnx").exists());
}

/// The window of `gen:quiet:6` where fair-v10, under EASY in RLScheduler's
/// model, chose a job of the whole machine that could not start for a day
/// and kept it: meanwhile the oldest jobs backfilled, and a light user's
/// two jobs of seconds waited 19 hours. fair-v11 is fair-v10 with a horizon
/// (half the longest estimate in sight): it passes over that choice, and
/// that user's worst-off mean falls to near F1's. Its horizon belongs to
/// that network alone: without backfilling, and in slurp's own model, the
/// two schedule alike.
#[test]
fn fair_v11_does_not_keep_a_choice_reserved_a_day_ahead_under_easy() {
    let sim = |model: &str, policies: &str| -> Vec<f64> {
        summaries("gen:quiet:6", "7303:1024", model, policies)
            .into_iter()
            .map(|(worst, _)| worst)
            .collect()
    };
    let easy = sim("reference", "f1+easy,fair-v10+easy,fair-v11+easy");
    let (f1, v10, v11) = (easy[0], easy[1], easy[2]);
    assert!(v10 > 4.0 * f1, "fair-v10 kept the far choice: {easy:?}");
    assert!(v11 < 1.1 * f1, "fair-v11 passed it over: {easy:?}");
    for (model, policies) in [
        ("reference", "fair-v10,fair-v11"),
        ("slurp", "fair-v10+easy,fair-v11+easy"),
        ("slurp", "fair-v10,fair-v11"),
    ] {
        let both = sim(model, policies);
        assert_eq!(both[0], both[1], "{model} {policies}");
    }
}

/// Each policy's worst user's and average bounded slowdown in `slurp sim
/// TRACE --window WINDOW --model MODEL --policy POLICIES --json`.
fn summaries(trace: &str, window: &str, model: &str, policies: &str) -> Vec<(f64, f64)> {
    let run = Test::new()
        .args(&[
            "sim", trace, "--model", model, "--window", window, "--policy", policies, "--json",
        ])
        .run()
        .success();
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    doc["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let of = |key: &str| p["summary"][key].as_f64().unwrap();
            (
                of("worst_user_bounded_slowdown"),
                of("avg_bounded_slowdown"),
            )
        })
        .collect()
}

/// `slurp policy judge MODEL WORKLOAD --samples 1 --len 100` in `test`,
/// which succeeds: one small window a cell, for what a judge prints
/// around its figures (warnings, the model's networks).
fn judged_briefly(test: Test, model: &str, workload: &str) -> common::Run {
    test.args(&[
        "policy",
        "judge",
        model,
        workload,
        "--samples",
        "1",
        "--len",
        "100",
    ])
    .run()
    .success()
}

/// `slurp policy shortlist MODEL -o out.onnx ARGS…`: the run, and the
/// model it wrote, if it wrote one.
fn shortlisted(model: &str, args: &[&str]) -> (common::Run, Option<Vec<u8>>) {
    let mut all = vec!["policy", "shortlist", model, "-o", "out.onnx"];
    all.extend_from_slice(args);
    let test = Test::new().args(&all);
    let run = test.run();
    let out = test.path().join("out.onnx");
    (run, out.exists().then(|| std::fs::read(out).unwrap()))
}

/// `--horizon` gives a model's network for choices kept under EASY its
/// horizon, `none` takes it away (as `--clear` does); it is refused, naming
/// the flag and writing nothing, for a model without such a network, and
/// for a share that is not positive.
#[test]
fn policy_shortlist_sets_and_takes_away_a_horizon() {
    let set = shortlisted;
    let (run, bytes) = set("fair-v10", &["--horizon", "0.25"]);
    let run = run.success();
    assert!(
        run.stderr
            .contains("horizon 0.25× the longest estimate for choices kept under EASY"),
        "{}",
        run.stderr
    );
    let test = Test::new().file("h.onnx", bytes.unwrap());
    let model = slurp_fair::Model::load(&test.path().join("h.onnx"), None).unwrap();
    assert_eq!(model.committed(true).horizon().map(|h| h.share), Some(0.25));
    // Not on any other network.
    assert_eq!(model.horizon(), None);
    assert_eq!(model.committed(false).horizon(), None);
    for away in [&["--horizon", "none"][..], &["--clear"]] {
        let (run, bytes) = set("fair-v11", away);
        run.success();
        let test = Test::new().file("h.onnx", bytes.unwrap());
        let model = slurp_fair::Model::load(&test.path().join("h.onnx"), None).unwrap();
        assert_eq!(model.committed(true).horizon(), None, "{away:?}");
    }
    // fair-v4 has one network for committed choices in both modes.
    let (run, bytes) = set("fair-v4", &["--horizon", "0.5"]);
    run.invalid().stderr_has(&[
        "--horizon",
        "no network of its own for committed choices under EASY",
        "--committed-horizon gives one",
    ]);
    assert!(bytes.is_none());
    for bad in ["0", "inf", "soon"] {
        let (run, bytes) = set("fair-v10", &["--horizon", bad]);
        run.invalid().stderr_has(&["is not a horizon"]);
        assert!(bytes.is_none(), "{bad}");
    }
    // `--committed-horizon`: the network for committed choices, which
    // serves EASY too where the model has none of its own for it (fair-v4).
    let (run, bytes) = set("fair-v4", &["--committed-horizon", "0.3"]);
    let run = run.success();
    assert!(
        run.stderr
            .contains("horizon 0.3× the longest estimate for committed choices"),
        "{}",
        run.stderr
    );
    let test = Test::new().file("h.onnx", bytes.unwrap());
    let model = slurp_fair::Model::load(&test.path().join("h.onnx"), None).unwrap();
    for easy in [false, true] {
        assert_eq!(model.committed(easy).horizon().map(|h| h.share), Some(0.3));
    }
    assert_eq!(model.horizon(), None);
    for away in [&["--committed-horizon", "none"][..], &["--clear"]] {
        let (run, bytes) = set("fair-v12", away);
        run.success();
        let test = Test::new().file("h.onnx", bytes.unwrap());
        let model = slurp_fair::Model::load(&test.path().join("h.onnx"), None).unwrap();
        assert_eq!(model.committed(false).horizon(), None, "{away:?}");
        // `none` leaves the other one as it was; `--clear` takes both.
        let kept = (away[0] != "--clear").then_some(0.5);
        assert_eq!(model.committed(true).horizon().map(|h| h.share), kept);
    }
    // fair-v3 carries no network for committed choices at all, so neither
    // flag sends the user to the other.
    let (run, bytes) = set("fair-v3", &["--committed-horizon", "0.5"]);
    run.invalid().stderr_has(&[
        "--committed-horizon",
        "no network of its own for committed choices",
    ]);
    assert!(bytes.is_none());
    let (run, bytes) = set("fair-v3", &["--horizon", "0.5"]);
    let run = run.invalid();
    assert!(
        run.stderr.contains("nor any for committed choices")
            && !run.stderr.contains("--committed-horizon gives"),
        "{}",
        run.stderr
    );
    assert!(bytes.is_none());
}

/// `--committed-backlog` gives a model's network for committed choices its
/// backlog rule and `--backlog` the one under EASY; `none` takes it away
/// (as `--clear` does). Refused, naming the flag and writing nothing: a
/// malformed rule, a model without such a network, and a network left
/// without the shortlist the rule widens.
#[test]
fn policy_shortlist_sets_and_takes_away_a_backlog_rule() {
    let set = shortlisted;
    let loaded = |bytes: Option<Vec<u8>>| {
        let test = Test::new().file("b.onnx", bytes.unwrap());
        slurp_fair::Model::load(&test.path().join("b.onnx"), None).unwrap()
    };
    let rule = |m: &slurp_fair::Model| m.backlog().map(|b| (b.jobs, b.margin));
    let (run, bytes) = set("fair-v12", &["--committed-backlog", "300:200"]);
    let run = run.success();
    assert!(
        run.stderr
            .contains("margin 200 for committed choices while more than 300 jobs wait"),
        "{}",
        run.stderr
    );
    let model = loaded(bytes);
    assert_eq!(rule(model.committed(false)), Some((300, 200.0)));
    // fair-v12 has a network of its own under EASY, which keeps none.
    assert_eq!(rule(model.committed(true)), None);
    assert_eq!(rule(&model), None);
    let (run, bytes) = set("fair-v12", &["--backlog", "80:300"]);
    run.success();
    let model = loaded(bytes);
    assert_eq!(rule(model.committed(true)), Some((80, 300.0)));
    assert_eq!(rule(model.committed(false)), None);
    // Taken away again, by `none` or with everything else by `--clear`.
    let (run, bytes) = set("fair-v12", &["--committed-backlog", "300:200"]);
    run.success();
    let kept_dir = Test::new().file("b.onnx", bytes.unwrap());
    let with_rule = kept_dir.path().join("b.onnx");
    for away in [&["--committed-backlog", "none"][..], &["--clear"]] {
        let (run, bytes) = set(with_rule.to_str().unwrap(), away);
        run.success();
        let model = loaded(bytes);
        assert_eq!(rule(model.committed(false)), None, "{away:?}");
        // `none` leaves the shortlist it widened; `--clear` takes it too.
        let kept = (away[0] != "--clear").then_some("f1:64".to_owned());
        assert_eq!(
            model.committed(false).shortlist().map(|l| l.to_string()),
            kept
        );
    }
    for (model, args, said) in [
        (
            "fair-v12",
            &["--committed-backlog", "512"][..],
            &["--committed-backlog", "is not JOBS:MARGIN"][..],
        ),
        (
            "fair-v12",
            &["--committed-backlog", "0:256"],
            &["must be 1 or more"],
        ),
        // fair-v4's one network for committed choices serves EASY too.
        (
            "fair-v4",
            &["--backlog", "512:256"],
            &["--backlog", "under EASY", "--committed-backlog gives one"],
        ),
        (
            "fair-v3",
            &["--committed-backlog", "512:256"],
            &[
                "--committed-backlog",
                "no network of its own for committed choices",
            ],
        ),
        // The rule widens a shortlist, so the network must keep one: the
        // refusal names the flags that mend it.
        (
            "fair-v12",
            &["--committed-backlog", "512:256", "--committed", "none"],
            &[
                "would keep its backlog rule 512:256 with no shortlist",
                "--committed ORDER:MARGIN",
                "--committed-backlog none",
            ],
        ),
        (
            "fair-v13",
            &["--committed", "none"],
            &["backlog rule 1024:256", "--committed-backlog none"],
        ),
    ] {
        let (run, bytes) = set(model, args);
        run.invalid().stderr_has(said);
        assert!(bytes.is_none(), "{model} {args:?}");
    }
}

/// `--slurp-exact` and its kin give a network the shortlist it chooses
/// through once ended jobs show exact estimates, `none` takes it away (as
/// `--clear` does), and the report names each beside the network's own.
/// Refused, naming the flag and writing nothing: a network the model does
/// not carry, and a v1 model, which keeps no account of ended jobs.
#[test]
fn policy_shortlist_sets_and_takes_away_a_shortlist_for_exact_estimates() {
    let set = shortlisted;
    let loaded = |bytes: Option<Vec<u8>>| {
        let test = Test::new().file("x.onnx", bytes.unwrap());
        slurp_fair::Model::load(&test.path().join("x.onnx"), None).unwrap()
    };
    let exact = |m: &slurp_fair::Model| m.exact().map(|l| l.to_string());
    let (run, bytes) = set(
        "fair-v13",
        &[
            "--slurp-exact",
            "sjf:32",
            "--committed-easy-exact",
            "fcfs:8",
        ],
    );
    let run = run.success();
    assert!(
        run.stderr
            .contains("its own network f1:32 (sjf:32 once estimates prove exact)")
            && run
                .stderr
                .contains("committed choices under EASY f1:96 (fcfs:8 once estimates prove exact)"),
        "{}",
        run.stderr
    );
    let model = loaded(bytes);
    assert_eq!(exact(&model).as_deref(), Some("sjf:32"));
    assert_eq!(exact(model.committed(true)).as_deref(), Some("fcfs:8"));
    assert_eq!(exact(model.committed(false)), None);
    assert_eq!(exact(model.slurp_easy().unwrap()), None);
    // Their own shortlists are as they were.
    assert_eq!(
        model.shortlist().map(|l| l.to_string()).as_deref(),
        Some("f1:32")
    );
    // The judge's table names each beside the network's own.
    judged_briefly(Test::new(), "fair-v14", "gen:small:1").stdout_has(&[
        "on 1 window of 100 jobs a workload",
        "shortlist f1:32 (sjf:32 once estimates prove exact)",
        "shortlist f1:96 (sjf:1000000000 once estimates prove exact)",
    ]);
    // fair-v14 carries one on every network; taken away again.
    for away in [&["--slurp-exact", "none"][..], &["--clear"]] {
        let (run, bytes) = set("fair-v14", away);
        run.success();
        let model = loaded(bytes);
        assert_eq!(exact(&model), None, "{away:?}");
        let kept = (away[0] != "--clear").then(|| "sjf:1000000000".to_owned());
        assert_eq!(exact(model.committed(false)), kept, "{away:?}");
    }
    for (model, args, said) in [
        (
            "fair-v3",
            &["--committed-exact", "sjf:8"][..],
            &[
                "--committed-exact",
                "no network of its own for committed choices",
            ][..],
        ),
        (
            "fair",
            &["--slurp-exact", "sjf:8"],
            &[
                "--slurp-exact",
                "observation v1",
                "no account of the jobs that ended",
            ],
        ),
    ] {
        let (run, bytes) = set(model, args);
        run.invalid().stderr_has(said);
        assert!(bytes.is_none(), "{model} {args:?}");
    }
}

/// A window of `gen:saturated:799` where fair-v11, in RLScheduler's model
/// without backfilling, chose jobs that could start only much later and
/// kept them while the machine idled, everything else waiting. fair-v12
/// is fair-v11 with the same horizon as under EASY for those choices: its
/// worst user and its average fall below fair-v11's and F1's. Under EASY
/// and in slurp's own model the two schedule alike.
#[test]
fn fair_v12_does_not_keep_a_choice_reserved_far_ahead_without_backfilling() {
    let sim =
        |model: &str, policies: &str| summaries("gen:saturated:799", "3000:1024", model, policies);
    let none = sim("reference", "f1,fair-v11,fair-v12");
    let (f1, v11, v12) = (none[0], none[1], none[2]);
    assert!(v11.0 > 2.0 * v12.0, "fair-v12's worst user: {none:?}");
    assert!(v12.0 < f1.0, "fair-v12 is fairer than F1: {none:?}");
    assert!(v12.1 < 0.5 * v11.1 && v12.1 < f1.1, "averages: {none:?}");
    for (model, policies) in [
        ("reference", "fair-v11+easy,fair-v12+easy"),
        ("slurp", "fair-v11+easy,fair-v12+easy"),
        ("slurp", "fair-v11,fair-v12"),
    ] {
        let both = sim(model, policies);
        assert_eq!(both[0], both[1], "{model} {policies}");
    }
    // The judge's JSON says which of a model's networks has one.
    let null = serde_json::Value::Null;
    let half = serde_json::json!(0.5);
    for (model, committed, easy) in [
        ("fair-v10", &null, &null),
        ("fair-v11", &null, &half),
        ("fair-v12", &half, &half),
    ] {
        let run = Test::new()
            .args(&[
                "policy",
                "judge",
                model,
                "gen:small:1:3000",
                "--samples",
                "1",
                "--len",
                "128",
                "--json",
            ])
            .run()
            .success();
        let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(&doc["committed_horizon"], committed, "{model}");
        assert_eq!(&doc["committed_easy_horizon"], easy, "{model}");
    }
}

/// A trace that names no user (SWF field 12 is -1 throughout, as Lublin's
/// generated traces are) has one account, so its worst user's figures are
/// the average's: the judge (and `slurp sim`) says so rather than let a
/// site read averages as fairness. A trace without requested times is
/// replayed with exact estimates, where `sjf` is usually the fairest: the
/// judge says that too. A trace of many users with estimates judges
/// without a warning.
#[test]
fn judging_a_trace_without_users_or_estimates_warns() {
    let many = Test::new()
        .args(&[
            "policy", "generate", "small", "--seed", "2", "--jobs", "400",
        ])
        .run()
        .success()
        .stdout;
    // SWF field `n` (counted from 1) to -1 on every job line.
    let unknown = |n: usize| -> String {
        many.lines()
            .map(|l| {
                if l.starts_with(';') {
                    return format!("{l}\n");
                }
                let mut f: Vec<&str> = l.split_whitespace().collect();
                f[n - 1] = "-1";
                format!("{}\n", f.join(" "))
            })
            .collect()
    };
    let anonymous = unknown(12);
    let judge =
        |file: &str, text: &str| judged_briefly(Test::new().file(file, text), "fair-v13", file);
    let warned = judge("anonymous.swf", &anonymous).stderr_has(&[
        "anonymous.swf: names no user (field 12 is -1 for every job)",
        "say nothing about fairness",
    ]);
    // `slurp sim` reads workloads the same way and says the same.
    Test::new()
        .file("anonymous.swf", &anonymous)
        .args(&["sim", "anonymous.swf", "--policy", "fcfs"])
        .run()
        .success()
        .stderr_has(&["anonymous.swf: names no user"]);
    // The table still comes: the average is worth judging.
    assert!(warned.stdout.contains("| anonymous.swf | slurp | easy |"));
    let plain = judge("users.swf", &many);
    assert!(!plain.stderr.contains("warning"), "{}", plain.stderr);

    // Field 9 (the requested time) to -1: the replay takes each run time
    // as the estimate, so estimates are exact.
    let exact = unknown(9);
    let warned = judge("exact.swf", &exact).stderr_has(&[
        "exact.swf: 400 of 400 jobs ran their whole estimate",
        "`sjf` is the fairest heuristic",
    ]);
    assert!(
        !warned.stderr.contains("names no user"),
        "{}",
        warned.stderr
    );
}
