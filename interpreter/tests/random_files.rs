//! Issue 22's property: any file — here random lines built from the
//! language's own pieces and hostile bytes — loads, or yields diagnostics
//! whose every label lies inside the file it points into (so miette can
//! always draw it), in time that grows with the file, not faster.

use std::time::{Duration, Instant};

use miette::Diagnostic as _;
use proptest::prelude::*;
use slurp_interpreter::Options;
use slurp_runtime::Capacity;

/// Pieces a line is made of: keywords, names, attributes, sweeps,
/// placeholders, quotes, shell syntax, numbers, non-ASCII text.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("task".to_owned()),
        Just("defaults".to_owned()),
        Just("include".to_owned()),
        Just(":".to_owned()),
        Just(" ".to_owned()),
        Just("\t".to_owned()),
        "[a-z_][a-z0-9_]{0,6}",
        "(cores|gpus|mem|time|ntasks|nodes|after|retries|env|cwd|policy)=[0-9a-zA-Z,.:;{}é]{0,8}",
        "\\[[a-z]=[0-9a-z.,:]{0,10}\\]",
        "\\{[a-z#é]{0,3}\\}?",
        Just("'".to_owned()),
        Just("\"".to_owned()),
        Just("\\".to_owned()),
        "[|;&<>$()`*]",
        "[0-9]{1,12}",
        "[+-]?[0-9]{1,3}[a-z]{0,2}",
        "(é|日本|\u{200b}|\u{0}|\u{feff})",
        Just("# comment".to_owned()),
    ]
}

fn file() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::collection::vec(piece(), 0..12), 0..40).prop_map(|lines| {
        lines
            .into_iter()
            .map(|pieces| pieces.concat())
            .collect::<Vec<_>>()
            .join("\n")
    })
}

fn options(dir: &std::path::Path) -> Options {
    Options {
        capacity: Capacity {
            nodes: 2,
            cores_per_node: 8,
            gpus_per_node: 1,
            mem_per_node: 1 << 34,
        },
        max_tasks: 100_000,
        cwd: dir.to_path_buf(),
    }
}

/// Loads `text` as `w.slurp` in a fresh directory: how long it took, and
/// whether every diagnostic's labels lie inside their source.
fn load(text: &str) -> (Duration, Result<(), String>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.slurp");
    std::fs::write(&path, text).unwrap();
    let start = Instant::now();
    let loaded = slurp_interpreter::load(&path, &options(dir.path()));
    let took = start.elapsed();
    let Err(failure) = loaded else {
        return (took, Ok(()));
    };
    for problem in &failure.problems {
        if !problem.code.starts_with("slurp::") {
            return (took, Err(format!("code {}", problem.code)));
        }
        let (Some(source), Some(labels)) = (problem.source_code(), problem.labels()) else {
            continue;
        };
        for label in labels {
            if source.read_span(label.inner(), 0, 0).is_err() {
                return (
                    took,
                    Err(format!(
                        "{}: label {:?} outside its file",
                        problem.code, label
                    )),
                );
            }
        }
    }
    (took, Ok(()))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 150, ..ProptestConfig::default() })]

    #[test]
    fn a_random_file_loads_or_is_diagnosed_inside_itself(text in file()) {
        let (_, verdict) = load(&text);
        prop_assert!(verdict.is_ok(), "{:?} for {:?}", verdict, text);
    }
}

#[test]
fn loading_time_grows_linearly_with_the_file() {
    // The same block of lines, 1× and 8×: mistakes on every line (the case
    // that once took quadratic time).
    let block: String = (0..50)
        .map(|i| format!("task t{i} corse=1 time=x: echo {{é}} '{i}\n7 7 x{i}\n{i},{i},\"a b\n"))
        .collect();
    let time = |copies: usize| {
        let text = block.repeat(copies);
        // The least of two: a shared machine's noise only adds time.
        (0..2).map(|_| load(&text).0).min().unwrap()
    };
    let (one, eight) = (time(1), time(8));
    assert!(
        eight < one * 8 * 3 + Duration::from_millis(200),
        "1×: {one:?}, 8×: {eight:?} — more than linear"
    );
}
