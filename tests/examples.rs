//! Every workflow in `examples/` and `stdlib/` parses, checks and lowers;
//! its jobspecs are valid and snapshotted, with the checkout's path replaced
//! by `[REPO]` so the snapshots hold on any machine.

mod common;
use std::path::{Path, PathBuf};

use common::repo;
use slurp_interpreter::{Options, load};
use slurp_runtime::{Capacity, WorkflowId};

/// The instance the examples are written for (the proof of concept ran on
/// 8 cores).
const INSTANCE: Capacity = Capacity {
    nodes: 1,
    cores_per_node: 8,
    gpus_per_node: 2,
    mem_per_node: 16 << 30,
};

/// The workflow files under `dir`: launcher definitions are not
/// workflows (the interpreter's own test parses each, `launchers::tests`).
fn workflows(dir: &Path) -> Vec<PathBuf> {
    common::files_under(dir, &|d| d.ends_with("stdlib/launchers"), &|f| {
        f.extension().is_some_and(|e| e == "slurp" || e == "toml")
    })
}

#[test]
fn every_example_and_stdlib_file_lowers_to_valid_jobspecs() {
    let root = repo();
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("runtime/schema/jobspec-v1.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut files = workflows(&root.join("examples"));
    files.extend(workflows(&root.join("stdlib")));
    assert!(files.len() >= 8, "examples went missing: {files:?}");
    let opts = Options {
        capacity: INSTANCE,
        max_tasks: Options::DEFAULT_MAX_TASKS,
        cwd: root.clone(),
    };
    let repo_text = root.display().to_string();
    for file in files {
        let relative = file.strip_prefix(&root).unwrap().display().to_string();
        let loaded = load(&file, &opts).unwrap_or_else(|f| panic!("{relative}: {:?}", f.problems));
        let mut lines = Vec::new();
        let root_wf = loaded.program.root();
        for id in root_wf.task_ids() {
            let spec = serde_json::to_value(loaded.program.jobspec(WorkflowId(0), id, &repo_text))
                .unwrap();
            let errors: Vec<String> = validator
                .iter_errors(&spec)
                .map(|e| e.to_string())
                .collect();
            assert!(errors.is_empty(), "{relative}: {errors:?}");
            lines.push(
                serde_json::to_string(&spec)
                    .unwrap()
                    .replace(&repo_text, "[REPO]"),
            );
        }
        insta::assert_snapshot!(relative.replace('/', "__"), lines.join("\n"));
    }
}

#[test]
fn the_same_dag_as_lines_and_as_toml_lowers_to_the_same_jobs() {
    let root = repo();
    let opts = Options {
        capacity: INSTANCE,
        max_tasks: Options::DEFAULT_MAX_TASKS,
        cwd: root.clone(),
    };
    let specs = |name: &str| {
        let loaded = load(&root.join(name), &opts).unwrap();
        loaded
            .program
            .root()
            .task_ids()
            .map(|id| {
                let mut spec = loaded.program.jobspec(WorkflowId(0), id, "/");
                // Only where they were written differs.
                spec.attributes.user.slurp.file.clear();
                spec.attributes.user.slurp.line = 0;
                spec.attributes.user.slurp.kind.clear();
                spec
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        specs("examples/dag/dag.slurp"),
        specs("examples/dag/dag.toml")
    );
}
