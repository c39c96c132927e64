//! `fairshare`: the classic fair-share priority, in `slurp sim` (both
//! models, with and without backfilling) and in real runs, where a user is
//! a line or sweep of the workflow.

mod common;
use common::{Test, repo};

/// The lines tasks wrote to `order` in `slurp --cores 1 --policy POLICY`.
fn started(file: &str, policy: &str) -> Vec<String> {
    let test = Test::new()
        .file("w.slurp", file)
        .args(&["--cores", "1", "--policy", policy, "w.slurp"]);
    test.run().success();
    test.lines_of("order")
}

#[test]
fn in_a_run_the_sweep_that_ran_waits_for_the_lines_that_did_not() {
    // One core. FCFS runs the sweep first, then b and c. Under fairshare
    // s1 starts (nobody used anything: the earliest task), then b and c,
    // whose lines have used nothing, before the sweep's s2 and s3.
    let file = "\
task s[i=1..3]: echo s{i} >> order; sleep 0.2
task b: echo b >> order; sleep 0.2
task c: echo c >> order; sleep 0.2
";
    assert_eq!(started(file, "fcfs"), ["s1", "s2", "s3", "b", "c"]);
    assert_eq!(started(file, "fairshare"), ["s1", "b", "c", "s2", "s3"]);
    assert_eq!(
        started(file, "fairshare+easy"),
        ["s1", "b", "c", "s2", "s3"]
    );
}

#[test]
fn sim_compares_fairshare_in_both_models() {
    let trace = repo().join("fair/tests/data/RICC-2010-2-sep.swf.xz");
    for model in ["slurp", "reference"] {
        let run = Test::new()
            .args(&[
                "sim",
                trace.to_str().unwrap(),
                "--model",
                model,
                "--samples",
                "6",
                "--len",
                "256",
                "--min-bsld",
                "3",
                "--policy",
                "fcfs,fairshare,easy,fairshare+easy",
                "--json",
            ])
            .run()
            .success();
        let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        let worst = |i: usize| {
            doc["policies"][i]["summary"]["worst_user_bounded_slowdown"]
                .as_f64()
                .unwrap()
        };
        assert_eq!(doc["policies"][1]["policy"], "fairshare");
        assert_eq!(doc["policies"][3]["policy"], "fairshare+easy");
        // On busy windows of a multi-user trace, serving the least-served
        // user first helps its worst user against FCFS.
        assert!(
            worst(1) < worst(0),
            "{model}: fairshare {} vs fcfs {}",
            worst(1),
            worst(0)
        );
        assert!(
            worst(3) < worst(2),
            "{model}: +easy {} vs easy {}",
            worst(3),
            worst(2)
        );
    }
}
