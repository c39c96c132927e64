//! A substituted value is one word, whatever it holds: rendered into a
//! shell line by the quoting of where it stands — bare, in `"…"`, in
//! `'…'`, inside `$(…)` — `/bin/sh` reads back exactly the value, and an
//! exec'd line gets it as one argv word. Random values, the real shell.

use proptest::prelude::*;
use slurp_interpreter::Options;
use slurp_interpreter::parallel::{Input, InputValues, Invocation, command_line};

fn options() -> Options {
    Options {
        capacity: slurp_runtime::Capacity {
            nodes: 1,
            cores_per_node: 1,
            gpus_per_node: 0,
            mem_per_node: 1 << 30,
        },
        max_tasks: 10,
        cwd: std::env::temp_dir(),
    }
}

/// The argv of the one task `command ::: value` makes.
fn argv(command: &str, value: &str) -> Vec<String> {
    let loaded = command_line(
        &Invocation {
            command: vec![command.to_owned()],
            sources: vec![Input {
                values: InputValues::Given(vec![value.to_owned()]),
                linked: false,
            }],
        },
        &options(),
    )
    .expect("a valid command line");
    let root = loaded.program.root();
    root.argv(slurp_runtime::TaskId(0))
}

/// Values of every character a shell cares about, and others.
fn value() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just("'".to_owned()),
            Just("\"".to_owned()),
            Just("\\".to_owned()),
            Just("$".to_owned()),
            Just("`".to_owned()),
            Just("$(".to_owned()),
            Just(")".to_owned()),
            Just(";".to_owned()),
            Just("|".to_owned()),
            Just("&".to_owned()),
            Just("*".to_owned()),
            Just("\n".to_owned()),
            Just(" ".to_owned()),
            Just("{}".to_owned()),
            Just("é".to_owned()),
            "[a-z]{1,3}",
        ],
        0..12,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn the_shell_reads_back_exactly_the_value_wherever_it_stands(v in value()) {
        // The line, and what printf must print: the value as it is, or
        // (inside `$(…)`) without trailing newlines, as the shell strips.
        for (line, want) in [
            ("printf %s {} && true", v.clone()),
            ("printf %s \"{}\" && true", v.clone()),
            ("printf %s '{}' && true", v.clone()),
            ("printf %s \"$(printf %s {})\" && true", v.trim_end_matches('\n').to_owned()),
            ("printf %s x{}y && true", format!("x{v}y")),
        ] {
            let argv = argv(line, &v);
            prop_assert_eq!(&argv[..2], &["/bin/sh".to_owned(), "-c".to_owned()]);
            let out = std::process::Command::new("/bin/sh")
                .args(["-c", &argv[2]])
                .output()
                .unwrap();
            let got = String::from_utf8_lossy(&out.stdout).into_owned();
            prop_assert_eq!(got, want, "line {:?} → {:?}", line, argv[2]);
        }
    }

    #[test]
    fn an_execd_line_gets_the_value_as_one_word(v in value()) {
        let argv = argv("printf %s {}", &v);
        prop_assert_eq!(argv, vec!["printf".to_owned(), "%s".to_owned(), v]);
    }
}
