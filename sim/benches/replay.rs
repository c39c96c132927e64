//! Replay speed: every heuristic over the whole of `lublin_256.swf`
//! (10,000 jobs; median of 5) in both models, and of `RICC-2010-2.swf.xz`
//! (447,794 jobs; one run each) in slurp's model. The reference model is
//! left out on RICC: `wfp3` and `unicep`, whose keys change with the clock,
//! sort its queue of tens of thousands at every decision (minutes each);
//! `bench/sim_ab.sh` times the other policies there. Reads the traces from
//! `$SLURP_TRACES` (default `../shared/traces`); a missing trace is
//! skipped with a note.
//!
//!     cargo bench -p slurp-sim --bench replay [-- ricc|lublin]
//!
//! Under `cargo test` (no `--bench` argument) it replays `lublin_256.swf`
//! (when the traces are there) and a generated saturated workload of 2,000
//! jobs, once per policy and model (RICC in a debug build takes nine
//! minutes): CI's check that the bench still builds and runs, not a
//! figure.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use slurp_runtime::core::PolicyKind;
use slurp_sim::workload::read_trace;
use slurp_sim::{Machine, Model, Window, Workload, simulate};

const POLICIES: &str =
    "fcfs,sjf,f1,wfp3,unicep,easy,sjf+easy,f1+easy,wfp3+easy,unicep+easy,conservative";

fn load(dir: &Path, name: &str) -> Option<(Workload, Duration)> {
    // A generated workload (`gen:…`) needs no file.
    let path = if name.starts_with("gen:") {
        PathBuf::from(name)
    } else {
        dir.join(name)
    };
    let started = Instant::now();
    let trace = match read_trace(&path) {
        Ok(t) => t,
        Err(e) => {
            println!("{}: skipped ({e})", path.display());
            return None;
        }
    };
    let machine = Machine::of(&trace)?;
    Some((Workload::new(&trace, machine), started.elapsed()))
}

fn main() {
    let dir =
        PathBuf::from(std::env::var("SLURP_TRACES").unwrap_or_else(|_| {
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/traces").into()
        }));
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes `--bench`; `cargo test` does not.
    let measured = args.iter().any(|a| a == "--bench");
    let only: Vec<String> = if measured {
        args.into_iter().filter(|a| !a.starts_with('-')).collect()
    } else {
        vec!["lublin".into(), "gen:".into()]
    };
    let wanted = |name: &str| {
        only.is_empty()
            || only
                .iter()
                .any(|o| name.to_lowercase().contains(&o.to_lowercase()))
    };
    let both = &[Model::Slurp, Model::Reference][..];
    for (name, repeats, models) in [
        ("lublin_256.swf", 5, both),
        ("RICC-2010-2.swf.xz", 1, &[Model::Slurp][..]),
        // Under `cargo test` only: a workload that needs no trace file.
        ("gen:saturated:1:2000", 1, both),
    ] {
        if measured && name.starts_with("gen:") {
            continue;
        }
        if !wanted(name) {
            continue;
        }
        let Some((workload, loading)) = load(&dir, name) else {
            continue;
        };
        let all = Window {
            start: 0,
            len: workload.jobs.len(),
        };
        let repeats = if measured { repeats } else { 1 };
        println!(
            "{name}: {} jobs, read and loaded in {:.0} ms",
            workload.jobs.len(),
            loading.as_secs_f64() * 1e3
        );
        println!("{:<14} {:>12} {:>12}", "policy", "slurp ms", "reference ms");
        for policy in POLICIES.split(',') {
            let policy: PolicyKind = policy.parse().expect("a known policy");
            let mut cells = Vec::new();
            for model in [Model::Slurp, Model::Reference] {
                if model.check(policy).is_err() || !models.contains(&model) {
                    cells.push("-".to_string());
                    continue;
                }
                let mut times: Vec<f64> = (0..repeats)
                    .map(|_| {
                        let started = Instant::now();
                        let schedule = simulate(&workload, all, policy, model);
                        std::hint::black_box(&schedule);
                        started.elapsed().as_secs_f64() * 1e3
                    })
                    .collect();
                times.sort_by(f64::total_cmp);
                cells.push(format!("{:.1}", times[times.len() / 2]));
            }
            println!(
                "{:<14} {:>12} {:>12}",
                policy.to_string(),
                cells[0],
                cells[1]
            );
        }
    }
}
