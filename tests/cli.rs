//! The command line itself: each subcommand's `--help` shows and its parser
//! accepts only its own options; shell completions and a man page; a word
//! that is neither a file nor a subcommand gets the error a user expects.

mod common;
use common::Test;

fn help(args: &[&str]) -> String {
    let mut all = args.to_vec();
    all.push("--help");
    Test::new().args(&all).run().success().stdout
}

/// Every subcommand, as `slurp` spells it.
const SUBCOMMANDS: [&[&str]; 25] = [
    &["run"],
    &["start"],
    &["submit"],
    &["wait"],
    &["watch"],
    &["close"],
    &["check"],
    &["jobspec"],
    &["resume"],
    &["runs"],
    &["cancel"],
    &["log"],
    &["status"],
    &["report"],
    &["sim"],
    &["policy", "rollout"],
    &["policy", "generate"],
    &["policy", "judge"],
    &["policy", "train"],
    &["policy", "shortlist"],
    &["completions"],
    &["man"],
    &["resources"],
    &["policy"],
    &[],
];

#[test]
fn each_subcommands_help_is_its_own() {
    for args in SUBCOMMANDS {
        let name = if args.is_empty() {
            "slurp".to_owned()
        } else {
            args.join("-")
        };
        insta::assert_snapshot!(format!("help-{name}"), help(args));
    }
}

#[test]
fn instance_and_launch_options_appear_only_where_they_mean_something() {
    // Where a workflow is run, checked, lowered or the instance shown.
    let own = ["run", "start", "check", "jobspec", "resources"];
    for args in SUBCOMMANDS.iter().filter(|a| !a.is_empty()) {
        let text = help(args);
        for option in ["--cores", "--backend", "--srun", "--max-tasks"] {
            let listed = text.contains(&format!("{option} <"));
            // `sim` and `policy generate` have a `--cores` of their own:
            // the trace machine's processors per node.
            let expected = (own.contains(&args[0]) && args.len() == 1)
                || ((args == &["sim"] || args == &["policy", "generate"]) && option == "--cores");
            assert_eq!(
                listed,
                expected,
                "`slurp {}` and {option}:\n{text}",
                args.join(" ")
            );
        }
    }
    Test::new()
        .args(&["runs", "--cores", "5"])
        .run()
        .invalid()
        .stderr_has(&["unexpected argument '--cores'"]);
}

#[test]
fn completions_for_each_shell_and_a_man_page() {
    for shell in ["bash", "zsh", "fish"] {
        let script = Test::new()
            .args(&["completions", shell])
            .run()
            .success()
            .stdout;
        for word in ["check", "jobspec", "policy", "resume", "grace"] {
            assert!(script.contains(word), "{shell}: no `{word}`");
        }
    }
    // Bash itself reads the bash script.
    let test = Test::new();
    let bash = test.args(&["completions", "bash"]).run().success().stdout;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("slurp.bash");
    std::fs::write(&file, bash).unwrap();
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(". {} && complete -p slurp", file.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("slurp"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let man = Test::new().args(&["man"]).run().success().stdout;
    assert!(
        man.contains(".TH slurp 1"),
        "{}",
        &man[..200.min(man.len())]
    );
    assert!(man.contains("jobspec"));
    // `man` renders it, where man is installed.
    let rendered = std::process::Command::new("man")
        .args(["-l", "-"])
        .env("MANPAGER", "cat")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn();
    match rendered {
        Ok(mut child) => {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(man.as_bytes())
                .unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(String::from_utf8_lossy(&out.stdout).contains("slurp"));
        }
        Err(_) => eprintln!("skipped rendering: man is not installed here"),
    }
}

#[test]
fn a_word_that_is_neither_file_nor_subcommand_says_so() {
    Test::new()
        .args(&["complete", "bash"])
        .run()
        .invalid()
        .stderr_has(&[
            "no such file `complete`, and `complete` is not a subcommand",
            "did you mean the subcommand `completions`?",
        ]);
    Test::new()
        .args(&["stauts"])
        .run()
        .invalid()
        .stderr_has(&["did you mean the subcommand `status`?"]);
    // A file named like a word still runs.
    Test::new()
        .file("tasks", "echo from-a-file\n")
        .args(&["tasks"])
        .run()
        .success()
        .stdout_has(&["from-a-file"]);
}
