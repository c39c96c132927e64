//! Generated workloads: `slurp policy generate FAMILY` writes SWF, and any
//! TRACE argument `gen:FAMILY:SEED` is the same trace.

mod common;
use common::Test;

#[test]
fn a_generated_trace_is_seeded_and_reads_back_as_what_gen_names() {
    let test = Test::new().args(&[
        "policy", "generate", "small", "--seed", "3", "--jobs", "500", "-o", "s.swf",
    ]);
    test.run().success();
    let text = std::fs::read_to_string(test.path().join("s.swf")).unwrap();
    assert!(text.contains("; MaxProcs: 64"), "{}", &text[..300]);
    assert_eq!(text.lines().filter(|l| !l.starts_with(';')).count(), 500);
    // Same seed, same bytes; on standard output too.
    let again = Test::new()
        .args(&[
            "policy", "generate", "small", "--seed", "3", "--jobs", "500",
        ])
        .run()
        .success();
    assert_eq!(again.stdout, text);
    let other = Test::new()
        .args(&[
            "policy", "generate", "small", "--seed", "4", "--jobs", "500",
        ])
        .run()
        .success();
    assert_ne!(other.stdout, text);
    // `slurp sim` replays the file and the name alike, to the digit.
    let sim = |trace: &str| {
        let run = Test::new()
            .file("s.swf", &text)
            .args(&["sim", trace, "--policy", "fcfs,sjf,fairshare", "--json"])
            .run()
            .success();
        let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        (doc["jobs"].clone(), doc["policies"].clone())
    };
    let (jobs, policies) = sim("s.swf");
    assert_eq!(jobs, 500);
    assert_eq!(sim("gen:small:3:500"), (jobs, policies));
}

#[test]
fn generated_workload_mistakes_are_named() {
    for (args, says) in [
        (
            vec!["policy", "generate", "huge"],
            "unknown workload family `huge`",
        ),
        (vec!["policy", "generate", "mid", "--jobs", "0"], "--jobs 0"),
        (vec!["policy", "generate", "mid", "--load", "0"], "--load 0"),
        (
            vec!["sim", "gen:mid:x"],
            "the seed `x` is not a whole number",
        ),
        (vec!["sim", "gen:tiny"], "unknown workload family `tiny`"),
    ] {
        Test::new().args(&args).run().invalid().stderr_has(&[says]);
    }
}
