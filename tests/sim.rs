//! `slurp sim`: tiny traces whose schedules and metrics are worked out by
//! hand, the outputs (table, JSON, SVG), and bad input.

mod common;
use common::Test;
use serde_json::Value;

/// One node of 4 processors. Job 1 takes 3 for 10 s; job 2 needs all 4;
/// job 3 (1 proc, 4 s) fits beside job 1 and ends before job 1 does; job 4
/// (1 proc, 20 s) would run past it. Users: 1, 2, 1, 2.
///
/// fcfs: 1@0, 2@10 (blocked behind job 1), 3@15, 4@15 — job 3 could run
///       at 2 but never jumps the queue.
/// easy: job 2 is reserved at 10; job 3 ends at 6 < 10: backfilled at 2;
///       job 4 would delay the reservation: 15. Job 2 still starts at 10.
/// sjf:  at 2, job 3 (estimate 4) ranks before job 2 (5) and fits: 2.
const TINY: &str = "\
; MaxNodes: 1
; MaxProcs: 4
1 0 -1 10 3 -1 -1 3 10 -1 1 1 1 -1 -1 -1 -1 -1
2 1 -1 5 4 -1 -1 4 5 -1 1 2 1 -1 -1 -1 -1 -1
3 2 -1 4 1 -1 -1 1 4 -1 1 1 1 -1 -1 -1 -1 -1
4 3 -1 20 1 -1 -1 1 20 -1 1 2 1 -1 -1 -1 -1 -1
";

fn sim_json(trace: &str, args: &[&str]) -> Value {
    let run = Test::new()
        .file("t.swf", trace)
        .args(&["sim", "t.swf", "--json"])
        .args(args)
        .run()
        .success();
    serde_json::from_str(&run.stdout).expect("--json prints JSON")
}

/// Four random windows of 20 jobs under EASY, from `seed`.
fn samples(trace: &str, seed: &str) -> Value {
    sim_json(
        trace,
        &[
            "--policy",
            "easy",
            "--samples",
            "4",
            "--len",
            "20",
            "--seed",
            seed,
        ],
    )
}

/// `n` jobs on `procs` processors, one every 7 s: 30–42 s long, 1 to
/// `procs` wide, of five users.
fn steady(n: u32, procs: u32) -> String {
    let mut swf = format!("; MaxProcs: {procs}\n");
    for i in 1..=n {
        swf.push_str(&format!(
            "{i} {} -1 {} {} -1 -1 -1 -1 -1 1 {} 1 -1 -1 -1 -1 -1\n",
            i * 7,
            30 + i % 13,
            1 + i % procs,
            i % 5
        ));
    }
    swf
}

fn policy<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["policies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["policy"] == name)
        .unwrap_or_else(|| panic!("no {name} in {doc}"))
}

fn close(a: &Value, b: f64) -> bool {
    (a.as_f64().unwrap() - b).abs() < 1e-9
}

#[test]
fn fcfs_blocks_easy_backfills_sjf_reorders_with_hand_computed_metrics() {
    let doc = sim_json(TINY, &["--policy", "fcfs,easy,sjf"]);
    let fcfs = &policy(&doc, "fcfs")["windows"][0];
    // Waits 0, 9, 13, 12. Bounded slowdowns 1, 14/10, 17/10, 32/20.
    assert!(close(&fcfs["avg_wait"], 8.5), "{fcfs}");
    assert!(close(
        &fcfs["avg_bounded_slowdown"],
        (1.0 + 1.4 + 1.7 + 1.6) / 4.0
    ));
    assert!(close(
        &fcfs["avg_turnaround"],
        (10.0 + 14.0 + 17.0 + 32.0) / 4.0
    ));
    assert_eq!(fcfs["makespan"], 35);
    // 74 processor-seconds of work in 35 s × 4 processors.
    assert!(close(&fcfs["utilisation"], 74.0 / 140.0));
    // User 1: (1 + 1.7)/2 = 1.35; user 2: (1.4 + 1.6)/2 = 1.5.
    assert_eq!(fcfs["worst_user"], 2);
    assert!(close(&fcfs["worst_user_bounded_slowdown"], 1.5));
    let jain = 2.85f64.powi(2) / (2.0 * (1.35f64.powi(2) + 1.5f64.powi(2)));
    assert!(close(&fcfs["jain"], jain));
    assert_eq!(fcfs["per_user"][0]["user"], 1);
    assert!(close(&fcfs["per_user"][0]["avg_bounded_slowdown"], 1.35));

    for name in ["easy", "sjf"] {
        let m = &policy(&doc, name)["windows"][0];
        // Waits 0, 9, 0, 12; slowdowns 1, 1.4, 1, 1.6.
        assert!(close(&m["avg_wait"], 5.25), "{name}: {m}");
        assert!(close(&m["avg_bounded_slowdown"], 1.25), "{name}: {m}");
    }
}

#[test]
fn the_reference_model_gives_jobs_whole_nodes() {
    // One node: every job takes it whole. fcfs: 1@0, 2@10, 3@15, 4@19 —
    // the window ends at the last start, 19, so utilisation is
    // (work) / (19 s × 4).
    let doc = sim_json(TINY, &["--policy", "fcfs", "--model", "reference"]);
    let m = &policy(&doc, "fcfs")["windows"][0];
    assert!(
        close(&m["avg_wait"], (0.0 + 9.0 + 13.0 + 16.0) / 4.0),
        "{m}"
    );
    assert_eq!(m["makespan"], 39);
    assert!(close(&m["utilisation"], 74.0 / 76.0));
}

#[test]
fn samples_without_len_are_the_judges_windows_of_1024_jobs() {
    // `slurp sim T --samples K` draws what `slurp policy judge` draws by
    // default: windows of 1,024 jobs, the same starts as with `--len 1024`.
    let trace = steady(4000, 8);
    let plain = sim_json(
        &trace,
        &["--policy", "fcfs", "--samples", "3", "--seed", "9"],
    );
    let windows = plain["windows"].as_array().unwrap();
    assert_eq!(windows.len(), 3);
    assert!(windows.iter().all(|w| w["len"] == 1024), "{windows:?}");
    let explicit = sim_json(
        &trace,
        &[
            "--policy",
            "fcfs",
            "--samples",
            "3",
            "--len",
            "1024",
            "--seed",
            "9",
        ],
    );
    assert_eq!(plain["windows"], explicit["windows"]);
    assert_eq!(
        policy(&plain, "fcfs")["summary"],
        policy(&explicit, "fcfs")["summary"]
    );
}

#[test]
fn windows_select_jobs_and_samples_are_seeded() {
    // Jobs 1..=3 only: job 4 never arrives.
    let doc = sim_json(TINY, &["--policy", "fcfs", "--window", "1:2"]);
    let m = &policy(&doc, "fcfs")["windows"][0];
    assert_eq!(m["jobs"], 2);
    // Job 2 starts at 1 on an empty machine, job 3 waits for it: 6.
    assert!(close(&m["avg_wait"], 2.0), "{m}");

    let many = steady(200, 4);
    let a = samples(&many, "3");
    let b = samples(&many, "3");
    assert_eq!(a["windows"], b["windows"], "same seed, same windows");
    assert_eq!(a["windows"].as_array().unwrap().len(), 4);
    assert_eq!(policy(&a, "easy")["summary"]["windows"], 4);
    let c = samples(&many, "4");
    assert_ne!(a["windows"], c["windows"]);

    // Windows drawn inside a span of jobs (the months a model was not
    // trained on) and only busy ones: each window starts in the span and
    // FCFS reaches the floor in each, though not in every plain window.
    let drawn = |extra: &[&str]| {
        let mut args = vec![
            "--policy",
            "fcfs",
            "--model",
            "reference",
            "--samples",
            "30",
            "--len",
            "20",
            "--seed",
            "5",
        ];
        args.extend_from_slice(extra);
        sim_json(&many, &args)
    };
    let bsld = |doc: &Value| -> Vec<f64> {
        policy(doc, "fcfs")["windows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["avg_bounded_slowdown"].as_f64().unwrap())
            .collect()
    };
    let plain = drawn(&["--within", "120.."]);
    let starts = plain["windows"].as_array().unwrap();
    assert_eq!(starts.len(), 30);
    assert!(
        starts
            .iter()
            .all(|w| w["start"].as_u64().unwrap() >= 120 && w["start"].as_u64().unwrap() <= 180),
        "{starts:?}"
    );
    let floor = 6.5;
    assert!(
        bsld(&plain).iter().any(|&b| b < floor),
        "{:?}",
        bsld(&plain)
    );
    let busy = drawn(&["--within", "120..", "--min-bsld", "6.5"]);
    assert_eq!(busy["windows"].as_array().unwrap().len(), 30);
    assert!(bsld(&busy).iter().all(|&b| b >= floor), "{:?}", bsld(&busy));
    // Mistakes are named; nothing is replayed.
    for (args, said) in [
        (&["--within", "190.."][..], "do not fit"),
        (&["--within", "50..40"], "holds no job"),
        (&["--within", "500.."], "the workload has 200 jobs"),
        (&["--within", "1-5"], "FROM..TO"),
        (&["--min-bsld", "1e9"], "fewer than 30 windows"),
    ] {
        Test::new()
            .file("t.swf", &many)
            .args(&["sim", "t.swf", "--samples", "30", "--len", "20"])
            .args(args)
            .run()
            .invalid()
            .stderr_has(&[said]);
    }
    Test::new()
        .file("t.swf", &many)
        .args(&["sim", "t.swf", "--samples", "3", "--len", "0"])
        .run()
        .invalid()
        .stderr_has(&["--len: at least one job a window"]);
    Test::new()
        .file("t.swf", &many)
        .args(&["sim", "t.swf", "--within", "0.."])
        .run()
        .invalid()
        .stderr_has(&["--samples"]);
}

#[test]
fn the_table_lists_every_policy_and_the_plot_is_an_svg() {
    let test = Test::new().file("t.swf", TINY).args(&[
        "sim",
        "t.swf",
        "--policy",
        "fcfs,easy,sjf+easy,conservative",
        "--plot",
        "cmp.svg",
    ]);
    let run = test.run().success().stdout_has(&[
        "t.swf: 4 jobs on 1 node × 4 processors; slurp model, jobs 0:4, 2 users",
        "policy",
        "avg bsld",
        "worst user bsld",
        "jain",
    ]);
    let rows: Vec<&str> = run
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    for name in ["fcfs", "easy", "sjf+easy", "conservative"] {
        assert!(rows.contains(&name), "no row for {name}:\n{}", run.stdout);
    }
    let svg = std::fs::read_to_string(test.path().join("cmp.svg")).expect("the plot was written");
    assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
    for text in [
        "average bounded slowdown, log scale",
        "sjf+easy",
        "conservative",
    ] {
        assert!(svg.contains(text), "the chart lacks {text:?}");
    }
}

#[test]
fn bad_input_is_refused_with_the_reason() {
    let test = || Test::new().file("t.swf", TINY);
    test()
        .args(&["sim", "t.swf", "--policy", "fcfs,lifo"])
        .run()
        .invalid()
        .stderr_has(&["unknown policy `lifo`"]);
    test()
        .args(&[
            "sim",
            "t.swf",
            "--model",
            "reference",
            "--policy",
            "conservative",
        ])
        .run()
        .invalid()
        .stderr_has(&["reference model has no conservative backfilling"]);
    test()
        .args(&["sim", "t.swf", "--window", "3:5"])
        .run()
        .invalid()
        .stderr_has(&["--window: window 3:5 ends past the workload's 4 jobs"]);
    test()
        .args(&["sim", "missing.swf"])
        .run()
        .invalid()
        .stderr_has(&["missing.swf"]);
    // No machine in the header: say how to give it.
    Test::new()
        .file("n.swf", "1 0 -1 10 3 -1 -1 3 10 -1 1 1 1 -1 -1 -1 -1 -1\n")
        .args(&["sim", "n.swf"])
        .run()
        .invalid()
        .stderr_has(&["the machine is unknown", "--nodes N --cores"]);
    // Lines that are not jobs are named, the rest is replayed.
    Test::new()
        .file("m.swf", format!("{TINY}5 x 1\n"))
        .args(&["sim", "m.swf", "--policy", "fcfs"])
        .run()
        .success()
        .stderr_has(&["warning: m.swf:7"])
        .stdout_has(&["1 line not jobs"]);
}
