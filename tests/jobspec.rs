//! `slurp jobspec`: each task lowered to the jobspec `flux submit --dry-run`
//! prints for the same request, valid against the tightened v1 schema.

mod common;
use common::{Test, repo};
use serde_json::{Value, json};

fn schema() -> jsonschema::Validator {
    let text =
        std::fs::read_to_string(repo().join("runtime/schema/jobspec-v1.json")).expect("schema");
    jsonschema::validator_for(&serde_json::from_str(&text).expect("schema json"))
        .expect("valid schema")
}

fn jobspecs(text: &str) -> Vec<Value> {
    let test = Test::new().file("w.slurp", text);
    let run = test
        .args(&[
            "jobspec", "--cores", "8", "--gpus", "2", "--mem", "16G", "--nodes", "2", "w.slurp",
        ])
        .run()
        .success();
    let specs = run.jobspecs();
    let validator = schema();
    for spec in &specs {
        let errors: Vec<String> = validator
            .iter_errors(spec)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "schema errors {errors:?} in {spec}");
    }
    specs
}

#[test]
fn legacy_line_is_flux_run_n() {
    // flux run -n6 echo a: job 1
    let spec = &jobspecs("6 0 echo a: job 1\n")[0];
    assert_eq!(
        spec["resources"],
        json!([{"type": "slot", "count": 6, "label": "task", "with": [{"type": "core", "count": 1}]}])
    );
    assert_eq!(
        spec["tasks"],
        json!([{"command": ["echo", "a:", "job", "1"], "slot": "task", "count": {"per_slot": 1}}])
    );
    assert_eq!(spec["attributes"]["system"]["duration"], json!(0.0));
    assert_eq!(spec["attributes"]["user"]["slurp"]["kind"], "legacy");
    assert_eq!(spec["version"], 1);
}

#[test]
fn singlenode_legacy_line_is_flux_run_n1_n() {
    // flux run -N1 -n4 echo a: job 4
    let spec = &jobspecs("4 1 echo a: job 4\n")[0];
    assert_eq!(
        spec["resources"],
        json!([{"type": "node", "count": 1, "with": [{"type": "slot", "count": 4, "label": "task", "with": [{"type": "core", "count": 1}]}]}])
    );
}

#[test]
fn ntasks_cores_gpus_is_flux_n_c_g() {
    // flux run -n2 -c4 -g1 ./train
    let spec = &jobspecs("task x ntasks=2 cores=4 gpus=1 time=1h30m: ./train\n")[0];
    assert_eq!(
        spec["resources"],
        json!([{"type": "slot", "count": 2, "label": "task", "with": [{"type": "core", "count": 4}, {"type": "gpu", "count": 1}]}])
    );
    assert_eq!(spec["attributes"]["system"]["duration"], json!(5400.0));
    assert_eq!(spec["attributes"]["system"]["job"]["name"], "x");
}

#[test]
fn uneven_tasks_over_nodes_count_in_total_as_flux_does() {
    // flux run -N2 -n3: 2 slots per node, 3 tasks in total
    let spec = &jobspecs("task x ntasks=3 nodes=2: ./run\n")[0];
    assert_eq!(spec["resources"][0]["count"], 2);
    assert_eq!(spec["resources"][0]["with"][0]["count"], 2);
    assert_eq!(spec["tasks"][0]["count"], json!({"total": 3}));
}

#[test]
fn sweeps_substitute_values_index_env_cwd_and_output() {
    let specs = jobspecs(
        "task s[a=1,2 b=x,y] env=MODE={b} cwd=run/{a} output=log/{a}-{b}.txt: ./s {a} {b} {#}\n",
    );
    assert_eq!(specs.len(), 4);
    let names: Vec<&str> = specs
        .iter()
        .map(|s| s["attributes"]["user"]["slurp"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["s[1,x]", "s[1,y]", "s[2,x]", "s[2,y]"]);
    let last = &specs[3];
    assert_eq!(last["tasks"][0]["command"], json!(["./s", "2", "y", "4"]));
    assert_eq!(
        last["attributes"]["system"]["environment"],
        json!({"MODE": "y"})
    );
    assert!(
        last["attributes"]["system"]["cwd"]
            .as_str()
            .unwrap()
            .ends_with("/run/2")
    );
    assert_eq!(
        last["attributes"]["system"]["shell"]["options"]["output"]["stdout"]["path"],
        "log/2-y.txt"
    );
}

#[test]
fn literal_braces_and_shell_braces_survive() {
    let specs = jobspecs("task t[i=1..1]: awk '{print $1}' {{i}} f{i}\necho ${HOME} {x}\n");
    // Single quotes keep `$1` from the shell, so awk is exec'd directly.
    assert_eq!(
        specs[0]["tasks"][0]["command"],
        json!(["awk", "{print $1}", "{i}", "f1"])
    );
    assert_eq!(
        specs[1]["tasks"][0]["command"],
        json!(["/bin/sh", "-c", "echo ${HOME} {x}"])
    );
}

#[test]
fn dependencies_are_slurp_names_under_user() {
    let specs = jobspecs(
        "task prep: ./prep\ntask sim[s=1..3] after=prep: ./sim {s}\ntask post[s=1..3] after=sim[{s}]: ./post {s}\ntask all after=post: ./reduce\n",
    );
    let after = |id: &str| -> Value {
        specs
            .iter()
            .find(|s| s["attributes"]["user"]["slurp"]["id"] == id)
            .unwrap()["attributes"]["user"]["slurp"]["after"]
            .clone()
    };
    assert_eq!(after("sim[2]"), json!(["prep"]));
    assert_eq!(after("post[3]"), json!(["sim[3]"]));
    assert_eq!(after("all"), json!(["post[1]", "post[2]", "post[3]"]));
    assert!(
        specs[0]["attributes"]["system"]
            .get("dependencies")
            .is_none(),
        "flux job ids are unknown until submission"
    );
}

#[test]
fn nested_entry_is_an_allocation_running_slurp_once_per_node() {
    let test = Test::new()
        .file("a.slurp", "6 0 flux slurp sub/b.slurp\n")
        .file("sub/b.slurp", "1 0 echo b\n");
    let b = test.path().canonicalize().unwrap().join("sub/b.slurp");
    let run = test
        .args(&["jobspec", "--cores", "8", "a.slurp"])
        .run()
        .success();
    let spec = &run.jobspecs()[0];
    // The legacy spelling `flux slurp FILE` lowers like `slurp FILE`, with
    // the file made absolute so the allocation can start anywhere.
    assert_eq!(
        spec["tasks"][0]["command"],
        json!(["slurp", b.display().to_string()])
    );
    assert_eq!(spec["resources"][0]["count"], 6);
    assert_eq!(
        spec["attributes"]["system"]["shell"]["options"]["per-resource"],
        json!({"type": "node"})
    );
    assert_eq!(
        spec["attributes"]["user"]["slurp"]["nested"]["workflow"],
        b.display().to_string()
    );
}

#[test]
fn one_task_by_id() {
    let test = Test::new().file("w.slurp", "task sim[s=1..5]: ./sim {s}\necho x\n");
    let run = test
        .args(&["jobspec", "--task", "sim[4]", "w.slurp"])
        .run()
        .success();
    assert_eq!(run.jobspecs().len(), 1);
    assert_eq!(
        run.jobspecs()[0]["tasks"][0]["command"],
        json!(["./sim", "4"])
    );
    let unnamed = Test::new()
        .file("w.slurp", "task a: x\necho x\n")
        .args(&["jobspec", "--task", "@2", "w.slurp"])
        .run()
        .success();
    assert_eq!(
        unnamed.jobspecs()[0]["tasks"][0]["command"],
        json!(["echo", "x"])
    );
    Test::new()
        .file("w.slurp", "echo x\n")
        .args(&["jobspec", "--task", "nope", "w.slurp"])
        .run()
        .invalid()
        .stderr_has(&["no task `nope`"]);
}

#[test]
fn the_schema_rejects_what_flux_rejects() {
    let validator = schema();
    let good = jobspecs("task x: ./x\n").remove(0);
    assert!(validator.is_valid(&good));
    let mut string_command = good.clone();
    string_command["tasks"][0]["command"] = json!("./x");
    let mut no_duration = good.clone();
    no_duration["attributes"]["system"]
        .as_object_mut()
        .unwrap()
        .remove("duration");
    let mut extra_attribute = good.clone();
    extra_attribute["attributes"]["other"] = json!({});
    let mut zero_count = good.clone();
    zero_count["resources"][0]["count"] = json!(0);
    for bad in [string_command, no_duration, extra_attribute, zero_count] {
        assert!(!validator.is_valid(&bad), "schema accepted {bad}");
    }
}

/// Jobspecs are for a cluster: the proof of concept's `a.slurp` (6-core
/// tasks) prints on any machine, and is checked only against an instance
/// the user declares.
#[test]
fn capacity_is_checked_only_against_a_declared_instance() {
    let a = repo().join("examples/naval/a.slurp");
    let a = a.to_str().unwrap();
    // This machine has fewer cores than 6 in CI, or not: it does not matter.
    let run = Test::new().args(&["jobspec", a]).run().success();
    assert_eq!(run.jobspecs().len(), 5);
    Test::new()
        .args(&["jobspec", "--cores", "2", a])
        .run()
        .invalid()
        .stderr_has(&["asks for 6 cores", "the instance has 2 cores"]);
}
