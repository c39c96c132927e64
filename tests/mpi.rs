//! MPI without mpirun: slurp serves PMI-1 to a task's `ntasks` copies, so
//! an MPICH program finds its peers; `pmi=none` turns it off; a rank that
//! fails stops its siblings; `launcher=` runs the task under an outside
//! launcher (Debian's `mpirun`, MPICH's Hydra). Needs Debian's `mpich` and
//! `libmpich-dev` (scripts/test-deps.sh installs them); skipped without.

mod common;

use std::path::Path;
use std::process::Command;

use common::Test;

/// Compiles `tests/mpi/NAME.c` into `dir`; false when there is no mpicc.
fn build(name: &str, dir: &Path) -> bool {
    let source = common::repo().join(format!("tests/mpi/{name}.c"));
    match Command::new("mpicc")
        .arg("-o")
        .arg(dir.join(name))
        .arg(source)
        .status()
    {
        Ok(status) => {
            assert!(status.success(), "mpicc failed on {name}.c");
            true
        }
        Err(_) => {
            eprintln!(
                "skipped: no mpicc here (apt-get install mpich libmpich-dev; scripts/test-deps.sh does)"
            );
            false
        }
    }
}

fn ranks(stdout: &str) -> Vec<String> {
    let mut lines: Vec<String> = stdout.lines().map(str::to_owned).collect();
    lines.sort();
    lines
}

#[test]
fn an_mpich_program_finds_its_peers_through_slurps_pmi() {
    let test = Test::new()
        .file("f.slurp", "task hello ntasks=4: ./hello\n")
        .args(&["-q", "--cores", "4", "f.slurp"]);
    if !build("hello", test.path()) {
        return;
    }
    let run = test.run().success();
    assert_eq!(
        ranks(&run.stdout),
        [
            "rank 0 of 4 sum 10",
            "rank 1 of 4 sum 10",
            "rank 2 of 4 sum 10",
            "rank 3 of 4 sum 10"
        ]
    );
}

#[test]
fn without_pmi_the_copies_are_singletons() {
    let test = Test::new()
        .file("f.slurp", "task hello ntasks=3 pmi=none: ./hello\n")
        .args(&["-q", "--cores", "4", "f.slurp"]);
    if !build("hello", test.path()) {
        return;
    }
    let run = test.run().success();
    assert_eq!(ranks(&run.stdout), ["rank 0 of 1 sum 1"; 3]);
}

#[test]
fn under_launcher_mpirun_the_same_program_runs_the_same() {
    let test = Test::new()
        .file("f.slurp", "task hello ntasks=4 launcher=mpirun: ./hello\n")
        .args(&["-q", "--cores", "4", "f.slurp"]);
    if !build("hello", test.path()) {
        return;
    }
    if Command::new("mpirun").arg("--version").output().is_err() {
        eprintln!("skipped: no mpirun here");
        return;
    }
    let run = test.run().success();
    assert_eq!(ranks(&run.stdout).len(), 4, "{}", run.stderr);
    assert!(
        run.stdout.lines().all(|l| l.ends_with("of 4 sum 10")),
        "{}",
        run.stdout
    );
}

#[test]
fn a_rank_that_fails_stops_its_siblings_and_fails_the_task() {
    let test = Test::new()
        .file(
            "f.slurp",
            "task dies ntasks=4: ./die\ntask aborts ntasks=4: ./die abort\n",
        )
        .args(&["--cores", "4", "--grace", "2s", "f.slurp"]);
    if !build("die", test.path()) {
        return;
    }
    let started = std::time::Instant::now();
    let run = test.run();
    // Rank 2 leaves; the others would wait in MPI_Allreduce for ever.
    assert!(started.elapsed().as_secs() < 10, "{:?}", started.elapsed());
    assert_eq!(run.status, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("failed    dies  exit status 3"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("rank 2 called MPI_Abort with code 5"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stdout.contains("sum"),
        "no rank got past the allreduce: {}",
        run.stdout
    );
}

#[test]
fn pmi_and_launcher_mistakes_are_diagnostics_before_anything_runs() {
    Test::new()
        .file(
            "f.slurp",
            "task a ntasks=2 launcher=mpirn: ./x\n\
             task b pmi=simple: ./x\n\
             task c ntasks=2 pmi=fast: ./x\n\
             task d ntasks=2 launcher=mpirun pmi=simple: ./x\n",
        )
        .args(&["check", "f.slurp"])
        .run()
        .invalid()
        .stderr_has(&[
            "no launcher `mpirn`",
            "did you mean `mpirun`?",
            "`pmi` applies to a task of several copies",
            "unknown PMI `fast`",
            "a launcher serves PMI to the copies it starts",
            "4 errors",
        ]);
    let test = Test::new()
        .file("f.slurp", "task a ntasks=2 launcher=mpirun: ./x\n")
        .args(&["--backend", "slurm", "f.slurp"]);
    test.run()
        .invalid()
        .stderr_has(&["f.slurp:1: `launcher=mpirun` cannot be used with `--backend slurm`"]);
    assert!(!test.path().join(".slurp").exists(), "nothing recorded");
}

#[test]
fn check_shows_what_a_launched_task_runs_and_a_user_launcher_overrides() {
    Test::new()
        .file(
            "f.slurp",
            "task s ntasks=2 cores=3 nodes=1 launcher=srun: ./sim --fast\n",
        )
        .args(&["check", "--cores", "8", "f.slurp"])
        .run()
        .success()
        .stdout_has(&[
            "f.slurp:1 runs under `srun`: srun --ntasks=2 --cpus-per-task=3 --exact --nodes=1 ./sim --fast",
        ]);
    let test = Test::new()
        .file(
            "mine/mpirun.toml",
            "command = [\"mympirun\", \"-n\", \"{ntasks}\"]\n",
        )
        .file("f.slurp", "task s ntasks=2 launcher=mpirun: ./sim\n");
    let dir = test.path().join("mine");
    test.env("SLURP_LAUNCHERS", dir.to_str().unwrap())
        .args(&["check", "f.slurp"])
        .run()
        .success()
        .stdout_has(&["runs under `mpirun`: mympirun -n 2 ./sim"]);
}
