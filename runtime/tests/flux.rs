//! What `--backend flux` hands to `flux job submit`: RFC 25 v1 jobspecs
//! (checked against the tightened schema flux-core's own validator is
//! stricter than) with RFC 26 dependencies, the submitting environment,
//! output files, and nested entries as `flux broker` instances. Flux
//! cannot be installed here; these are its documented contracts.

use std::path::Path;

use serde_json::{Value, json};
use slurp_runtime::backend::batch::Options;
use slurp_runtime::exec::OutputMode;
use slurp_runtime::{Capacity, TaskId, WorkflowId};

fn options(dir: &Path) -> Options {
    Options {
        queue: Some("batch".into()),
        poll: std::time::Duration::from_millis(500),
        cwd: dir.to_path_buf(),
        run_dir: dir.join(".slurp/runs/R"),
        slurp: "/opt/slurp/bin/slurp".into(),
        output: OutputMode::Group,
        resume: Default::default(),
    }
}

/// Each task's jobspec, as JSON, after the schema accepted it; `after`
/// gives the Flux id of each task's dependencies' jobs.
fn specs(files: &[(&str, &str)]) -> (Vec<(String, Value)>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let opts = slurp_interpreter::Options {
        capacity: Capacity {
            nodes: 2,
            cores_per_node: 8,
            gpus_per_node: 2,
            mem_per_node: 64 << 30,
        },
        max_tasks: 1000,
        cwd: dir.path().to_path_buf(),
    };
    let loaded =
        slurp_interpreter::load(&dir.path().join(files[0].0), &opts).expect("valid workflow");
    let program = &loaded.program;
    let wf = program.workflow(WorkflowId(0));
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/schema/jobspec-v1.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let out = wf
        .task_ids()
        .map(|t: TaskId| {
            let after: Vec<String> = wf
                .dependencies(t)
                .map(|d| format!("ƒ{}", wf.task_name(d).len()))
                .collect();
            let after: Vec<&str> = after.iter().map(String::as_str).collect();
            let spec = serde_json::to_value(slurp_runtime::backend::flux::jobspec(
                program,
                t,
                &options(dir.path()),
                &after,
            ))
            .unwrap();
            let errors: Vec<String> = validator
                .iter_errors(&spec)
                .map(|e| format!("{e} at {}", e.instance_path()))
                .collect();
            assert!(errors.is_empty(), "{errors:?} in {spec}");
            (wf.task_name(t), spec)
        })
        .collect();
    (out, dir)
}

#[test]
fn dependencies_are_rfc26_afterok_objects_and_absent_when_none() {
    let (specs, _dir) = specs(&[(
        "w.slurp",
        "task prep: echo prep\ntask sim[i=1..2] after=prep: ./sim {i}\n",
    )]);
    let system = |name: &str| {
        specs.iter().find(|(n, _)| n == name).unwrap().1["attributes"]["system"].clone()
    };
    // RFC 26: no key at all without dependencies.
    assert!(system("prep").get("dependencies").is_none());
    assert_eq!(
        system("sim[1]")["dependencies"],
        json!([{"scheme": "afterok", "value": "ƒ4"}])
    );
    assert_eq!(system("sim[2]")["queue"], "batch");
}

#[test]
fn a_job_carries_the_environment_and_writes_its_output_under_the_run() {
    let (specs, dir) = specs(&[("w.slurp", "task t env=MODE=fast: ./run\n")]);
    let system = &specs[0].1["attributes"]["system"];
    let env = &system["environment"];
    // Like `flux submit`: the submitting environment, then the task's own.
    assert_eq!(env["PATH"], std::env::var("PATH").unwrap());
    assert_eq!(env["MODE"], "fast");
    assert_eq!(env["SLURP_TASK_ID"], "t");
    let out = &system["shell"]["options"]["output"];
    let run = dir.path().join(".slurp/runs/R/out");
    assert_eq!(
        out["stdout"],
        json!({"type": "file", "path": run.join("t.out").display().to_string()})
    );
    assert_eq!(
        out["stderr"],
        json!({"type": "file", "path": run.join("t.err").display().to_string()})
    );
}

#[test]
fn a_nested_entry_is_a_flux_instance_running_slurp() {
    let (specs, dir) = specs(&[
        ("top.slurp", "task sub cores=4 nodes=2: slurp child.slurp\n"),
        ("child.slurp", "task c[i=1..3]: true\n"),
    ]);
    let spec = &specs[0].1;
    assert_eq!(
        spec["tasks"][0]["command"],
        json!([
            "flux",
            "broker",
            "/opt/slurp/bin/slurp",
            "--quiet",
            dir.path().join("child.slurp").display().to_string()
        ])
    );
    // As flux-core's `from_nest_command`.
    let shell = &spec["attributes"]["system"]["shell"]["options"];
    assert_eq!(shell["per-resource"], json!({"type": "node"}));
    assert_eq!(shell["mpi"], "none");
    assert_eq!(shell["exit-timeout"], "none");
    assert_eq!(shell["pmi"], "simple");
    assert_eq!(spec["resources"][0]["type"], "node");
    assert_eq!(spec["resources"][0]["count"], 2);
}

#[test]
fn retries_loop_inside_the_job_and_stretch_its_time_limit() {
    let (specs, _dir) = specs(&[("w.slurp", "task flaky retries=2 time=10s: ./maybe --fail\n")]);
    let spec = &specs[0].1;
    let command: Vec<String> = serde_json::from_value(spec["tasks"][0]["command"].clone()).unwrap();
    assert_eq!(&command[..2], ["/bin/sh", "-c"]);
    assert!(command[2].contains("[ $n -gt 2 ]"), "{command:?}");
    assert_eq!(&command[3..5], ["slurp-retry", "/bin/sh"]);
    assert!(command[6].contains("SLURP_TASK_RANK"), "{command:?}");
    assert_eq!(&command[7..], ["slurp-rank", "./maybe", "--fail"]);
    assert_eq!(spec["attributes"]["system"]["duration"], json!(30.0));
}

#[test]
fn the_retry_loop_runs_one_attempt_and_then_retries_while_it_fails() {
    let (specs, dir) = specs(&[(
        "w.slurp",
        "task flaky retries=2: sh -c 'echo x >> attempts; exit 4'\n",
    )]);
    let command: Vec<String> =
        serde_json::from_value(specs[0].1["tasks"][0]["command"].clone()).unwrap();
    // What the job shell would run, run here.
    let status = std::process::Command::new(&command[0])
        .args(&command[1..])
        .current_dir(dir.path())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(4), "the last attempt's status");
    let attempts = std::fs::read_to_string(dir.path().join("attempts")).unwrap();
    assert_eq!(attempts.lines().count(), 3, "one attempt and two retries");
}
