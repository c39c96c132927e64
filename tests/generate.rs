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
            vec!["policy", "generate", "mid", "--nodes", "0"],
            "--nodes 0",
        ),
        (
            vec!["policy", "generate", "mid", "--users", "0"],
            "--users 0",
        ),
        (
            vec!["policy", "generate", "mid", "--wide", "1.5"],
            "--wide 1.5",
        ),
        (
            vec![
                "policy", "generate", "mid", "--nodes", "1000000", "--cores", "64",
            ],
            "at most 4,000,000 processors",
        ),
        (
            vec!["sim", "gen:mid:x"],
            "the seed `x` is not a whole number",
        ),
        (vec!["sim", "gen:tiny"], "unknown workload family `tiny`"),
    ] {
        Test::new().args(&args).run().invalid().stderr_has(&[says]);
    }
}

/// A machine and a user population other than the family's: what a site
/// generates to judge a model on a machine like its own.
#[test]
fn a_generated_machine_and_users_can_be_chosen() {
    let run = Test::new()
        .args(&[
            "policy", "generate", "mid", "--seed", "5", "--jobs", "3000", "--nodes", "100",
            "--cores", "2", "--users", "300", "--wide", "0",
        ])
        .run()
        .success();
    let text = run.stdout;
    assert!(text.contains("; MaxNodes: 100"), "{}", &text[..400]);
    assert!(text.contains("; MaxProcs: 200"), "{}", &text[..400]);
    assert!(
        text.contains("300 users") && text.contains("wide 0,"),
        "{}",
        &text[..400]
    );
    let jobs: Vec<Vec<i64>> = text
        .lines()
        .filter(|l| !l.starts_with(';'))
        .map(|l| l.split_whitespace().map(|f| f.parse().unwrap()).collect())
        .collect();
    assert_eq!(jobs.len(), 3000);
    // Every job fits the machine asked for, and the jobs come from many
    // more users than the family's 48 (Zipf: not all 300 submit).
    assert!(jobs.iter().all(|j| (1..=200).contains(&j[7])));
    assert_eq!(jobs.iter().map(|j| j[7]).max(), Some(200));
    let users: std::collections::BTreeSet<i64> = jobs.iter().map(|j| j[11]).collect();
    assert!(
        users.len() > 100 && users.iter().all(|&u| (1..=300).contains(&u)),
        "{}",
        users.len()
    );
}

/// `--no-estimates` writes the same jobs with no requested time (-1), as
/// archive traces without estimates are: a replay takes each run time as
/// the estimate, and the judge says the estimates are exact.
#[test]
fn a_generated_trace_can_leave_out_the_estimates() {
    let generate = |extra: &[&str]| {
        let mut args = vec![
            "policy", "generate", "quiet", "--seed", "6", "--jobs", "1000",
        ];
        args.extend_from_slice(extra);
        Test::new().args(&args).run().success().stdout
    };
    let fields = |text: &str| -> Vec<Vec<i64>> {
        text.lines()
            .filter(|l| !l.starts_with(';'))
            .map(|l| l.split_whitespace().map(|f| f.parse().unwrap()).collect())
            .collect()
    };
    let with = fields(&generate(&[]));
    let text = generate(&["--no-estimates"]);
    assert!(text.contains("no requested times"), "{}", &text[..300]);
    let without = fields(&text);
    assert_eq!(with.len(), without.len());
    for (a, b) in with.iter().zip(&without) {
        assert!(a[8] > 0, "{a:?}");
        assert_eq!(b[8], -1, "{b:?}");
        // Every other field is the same job's.
        let mut a = a.clone();
        a[8] = -1;
        assert_eq!(&a, b);
    }
    Test::new()
        .file("exact.swf", &text)
        .args(&[
            "policy",
            "judge",
            "fair-v13",
            "exact.swf",
            "--samples",
            "1",
            "--len",
            "200",
        ])
        .run()
        .success()
        .stderr_has(&["ran their whole estimate"]);
}
