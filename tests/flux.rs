//! slurp with a real Flux (flux-core 0.88.0, built from ../shared/flux by
//! `scripts/local-flux.sh`, which `scripts/test-deps.sh` runs): inside an
//! instance (`flux start`, `flux alloc`, a fake bigger node with a GPU from
//! a resource config) and driving one (`--backend flux`). Where no Flux is
//! installed the tests say so and are skipped.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};

use common::{Test, binary};

/// Flux's `bin` directory, if Flux is here.
fn flux_bin() -> Option<PathBuf> {
    let prefix = std::env::var_os("SLURP_FLUX_PREFIX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/flux-0.88.0"));
    let bin = prefix.join("bin");
    if bin.join("flux").is_file() {
        return Some(bin);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).find(|d| d.join("flux").is_file())
}

/// `flux start -s1 [-c conf] sh -c SCRIPT` in the test's directory, with
/// `$SLURP` the slurp under test; `None` (and a note) without Flux.
fn in_flux(t: &Test, conf: bool, script: &str) -> Option<Output> {
    let Some(bin) = flux_bin() else {
        eprintln!("skipped: no Flux here (scripts/local-flux.sh builds one from ../shared/flux)");
        return None;
    };
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new("timeout");
    command.args(["120", "flux", "start", "-s1"]);
    if conf {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        std::fs::create_dir_all(t.path().join("conf")).unwrap();
        std::fs::write(
            t.path().join("conf/resource.toml"),
            format!(
                "[resource]\nnoverify = true\n[[resource.config]]\nhosts = \"{}\"\ncores = \"0-7\"\ngpus = \"0\"\n",
                host.trim()
            ),
        )
        .unwrap();
        command.args(["-c", "conf"]);
    }
    let out = command
        .args(["sh", "-c", script])
        .current_dir(t.path())
        .env("PATH", path)
        .env("SLURP", binary())
        .env("NO_COLOR", "1")
        .env_remove("SLURP_RUN_DIR")
        .env_remove("FLUX_URI")
        .env_remove("FLUX_JOB_ID")
        .output()
        .expect("flux start");
    Some(out)
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_gpu_task_inside_an_instance_gets_its_gpu() {
    let t = Test::new().file(
        "gpu.slurp",
        "task g gpus=1: sh -c 'echo gpu=$CUDA_VISIBLE_DEVICES rank=$SLURP_TASK_RANK'\n",
    );
    let Some(out) = in_flux(&t, true, "flux alloc -n1 -c2 -g1 \"$SLURP\" -q gpu.slurp") else {
        return;
    };
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("gpu=0 rank=0"), "{stdout}\n{stderr}");
}

#[test]
fn a_time_limit_inside_an_instance_ends_the_flux_job_too() {
    let t = Test::new().file(
        "stub.slurp",
        "task stub time=2s: sh -c 'trap \"\" TERM; sleep 30'\n",
    );
    let script = "\"$SLURP\" -q stub.slurp; echo rc=$?; timeout 15 flux queue drain; flux jobs -a -no '{name} {result}'";
    let Some(out) = in_flux(&t, false, script) else {
        return;
    };
    let (stdout, stderr) = text(&out);
    assert!(stdout.contains("rc=1"), "{stdout}\n{stderr}");
    assert!(stderr.contains("timeout   stub"), "{stderr}");
    // Flux ended the job at its limit; nothing was left running.
    assert!(stdout.contains("stub TIMEOUT"), "{stdout}\n{stderr}");
}

#[test]
fn ctrl_c_inside_an_instance_cancels_the_flux_jobs() {
    let t = Test::new().file(
        "stub.slurp",
        "task stub: sh -c 'trap \"\" TERM INT; sleep 30'\n",
    );
    let script = "\"$SLURP\" -q --grace 2s stub.slurp & pid=$!; sleep 2; kill -INT $pid; wait $pid; echo rc=$?; \
                  timeout 15 flux queue drain; echo drained=$?; flux jobs -a -no '{name} {result}'";
    let Some(out) = in_flux(&t, false, script) else {
        return;
    };
    let (stdout, stderr) = text(&out);
    assert!(stdout.contains("rc=130"), "{stdout}\n{stderr}");
    // Without the cancel the job would sleep its 30 s: the drain would
    // time out.
    assert!(stdout.contains("drained=0"), "{stdout}\n{stderr}");
    assert!(stdout.contains("stub CANCELED"), "{stdout}\n{stderr}");
}

#[test]
fn slurp_as_a_task_of_a_flux_job_owns_the_job_not_the_instance() {
    let t = Test::new().file("two.slurp", "task t cores=2: echo two\n");
    let script = "flux alloc -n2 sh -c 'flux run -n1 \"$SLURP\" resources; flux run -n1 \"$SLURP\" check two.slurp'";
    let Some(out) = in_flux(&t, false, script) else {
        return;
    };
    let (stdout, stderr) = text(&out);
    assert!(stdout.contains("cores   1 per node"), "{stdout}\n{stderr}");
    assert!(!stdout.contains("flux    instance"), "{stdout}");
    // Its own job's one core: a 2-core task can never run, said at once.
    assert!(stderr.contains("can never run"), "{stderr}");
}

#[test]
fn slurp_as_the_program_of_a_personal_instance_runs_in_it() {
    let t = Test::new().file("f.slurp", "task a: sh -c 'echo job=${FLUX_JOB_ID:+yes}'\n");
    let script = "\"$SLURP\" resources | head -1; \"$SLURP\" -q f.slurp";
    let Some(out) = in_flux(&t, false, script) else {
        return;
    };
    let (stdout, stderr) = text(&out);
    assert!(stdout.starts_with("flux    instance"), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("job=yes"),
        "its task ran as a Flux job: {stdout}"
    );
}

#[test]
fn the_flux_backend_sets_the_task_variables_and_resumes_only_what_failed() {
    let t = Test::new().file(
        "flow.slurp",
        "task prep: sh -c 'echo prep >> ran'\n\
         task pair ntasks=2 after=prep: sh -c 'echo rank=$SLURP_TASK_RANK of $SLURP_NTASKS id=$SLURP_TASK_ID >> vars'\n\
         task sim[i=1..2] after=prep: sh -c 'echo sim{i} >> ran; test {i} != 2 || test -e fixed'\n",
    );
    let script = "\"$SLURP\" -q --backend flux flow.slurp; echo rc=$?; touch fixed; rm ran; \
                  \"$SLURP\" resume; echo resumed=$?";
    let Some(out) = in_flux(&t, false, script) else {
        return;
    };
    let (stdout, stderr) = text(&out);
    assert!(
        stdout.contains("rc=1") && stdout.contains("resumed=0"),
        "{stdout}\n{stderr}"
    );
    let mut vars = t.lines_of("vars");
    vars.sort();
    assert_eq!(vars, ["rank=0 of 2 id=pair", "rank=1 of 2 id=pair"]);
    // The resumed run submitted only sim[2]: prep, pair and sim[1] had
    // succeeded.
    assert_eq!(t.lines_of("ran"), ["sim2"]);
    assert!(stderr.contains("3 tasks already succeeded"), "{stderr}");
}

#[test]
fn retries_inside_one_flux_job_are_counted_as_attempts() {
    let t = Test::new().file(
        "flaky.slurp",
        "task flaky retries=2: sh -c 'echo x >> attempts; exit 4'\n",
    );
    let Some(out) = in_flux(&t, false, "\"$SLURP\" --backend flux flaky.slurp") else {
        return;
    };
    let (_, stderr) = text(&out);
    assert_eq!(t.lines_of("attempts").len(), 3);
    assert!(
        stderr.contains("failed    flaky  exit status 4, 3 attempts"),
        "{stderr}"
    );
}

#[test]
fn ctrl_c_under_the_flux_backend_cancels_dependents_as_a_run_here_does() {
    let t = Test::new().file(
        "chain.slurp",
        "task first: sleep 30\ntask second after=first: true\n",
    );
    let script = "\"$SLURP\" --backend flux chain.slurp & pid=$!; sleep 3; kill -INT $pid; wait $pid; echo rc=$?; \"$SLURP\" status";
    let Some(out) = in_flux(&t, false, script) else {
        return;
    };
    let (stdout, stderr) = text(&out);
    assert!(stdout.contains("rc=130"), "{stdout}\n{stderr}");
    assert!(stdout.contains("2 cancelled"), "{stdout}\n{stderr}");
    assert!(!stdout.contains("skipped"), "{stdout}");
}

#[test]
fn inside_an_instance_one_flux_client_runs_every_rank_with_its_output_and_status() {
    let t = Test::new().file(
        "f.slurp",
        "task a: echo out-a\ntask b: sh -c 'echo err-b >&2; exit 4'\ntask c ntasks=2: sh -c 'echo rank=$SLURP_TASK_RANK'\ntask huge cores=1 gpus=1: true\n",
    );
    // `huge` asks for a GPU the instance's slice lacks: slurp checks it
    // against the 1-GPU config, Flux refuses it on a node without one.
    let script = "\"$SLURP\" --output tag --gpus 1 f.slurp; echo rc=$?; flux jobs -a -no '{name} {result}' | sort";
    let Some(out) = in_flux(&t, false, script) else {
        return;
    };
    let (stdout, stderr) = text(&out);
    assert!(stdout.contains("[a] out-a"), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("[c] rank=0") && stdout.contains("[c] rank=1"),
        "{stdout}"
    );
    assert!(stderr.contains("[b] err-b"), "{stderr}");
    assert!(stdout.contains("rc=1"), "{stdout}");
    assert!(stderr.contains("exit status 4"), "{stderr}");
    // Every rank was a job of the instance, and it ran none twice.
    assert!(stdout.contains("a COMPLETED"), "{stdout}");
    assert!(stdout.contains("b FAILED"), "{stdout}");
    assert_eq!(stdout.matches("c COMPLETED").count(), 2, "{stdout}");
    // Through the run's one client, whose files it cleaned up.
    let run = common::run_dirs(t.path()).pop().unwrap();
    assert!(run.join("flux-client.py").is_file());
    let left: Vec<_> = std::fs::read_dir(run.join("flux"))
        .unwrap()
        .flatten()
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // The job Flux could not place says why.
    assert!(stderr.contains("huge"), "{stderr}");
    assert!(!stderr.contains("ended 1 process"), "{stderr}");
}

#[test]
fn inside_an_instance_slurp_keeps_flux_queue_fed_with_the_next_ranks() {
    // Each task counts the instance's active jobs while it runs. On the
    // instance's cores, with the default --flux-ahead 1, Flux holds a queued
    // rank behind each running one; with 0, only the running ones.
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut file = String::new();
    for i in 0..2 * cores {
        file.push_str(&format!(
            "task t{i}: sh -c 'sleep 0.3; flux jobs -n | wc -l > seen.$SLURP_TASK_ID; sleep 1'\n"
        ));
    }
    let t = Test::new().file("f.slurp", &file);
    let script = "\"$SLURP\" -q f.slurp && cat seen.t0 && rm seen.* && \"$SLURP\" -q --flux-ahead 0 f.slurp && cat seen.t0";
    let Some(out) = in_flux(&t, false, script) else {
        return;
    };
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let seen: Vec<usize> = stdout.lines().map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(seen, [2 * cores, cores], "{stdout}\n{stderr}");
}
