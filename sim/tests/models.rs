//! The two models are independent implementations; where their rules
//! coincide — strict FCFS on nodes of one processor, where whole-node and
//! per-core allocation are the same — they must produce the same schedule.
//! And every schedule of either model respects the machine.

use proptest::prelude::*;
use slurp_runtime::core::PolicyKind;
use slurp_sim::{Machine, Model, SimJob, Window, Workload, simulate};

fn workload(jobs: &[(u64, u64, u32, u64)], machine: Machine) -> Workload {
    let mut submit = 0;
    let jobs = jobs
        .iter()
        .enumerate()
        .map(|(i, &(gap, run, procs, over))| {
            submit += gap;
            SimJob {
                id: i as i64 + 1,
                submit,
                run,
                estimate: run + over,
                procs: procs.min(machine.nodes * machine.procs_per_node),
                user: (i % 3) as i64,
                group: -1,
                exe: -1,
                mem: -1,
            }
        })
        .collect();
    Workload {
        machine,
        jobs,
        dropped: Default::default(),
        max_run: 0,
    }
}

fn arb_jobs() -> impl Strategy<Value = Vec<(u64, u64, u32, u64)>> {
    proptest::collection::vec((0u64..50, 1u64..200, 1u32..9, 0u64..100), 1..60)
}

/// Processors in use never exceed the machine, at any start.
fn respects_machine(w: &Workload, s: &slurp_sim::Schedule, per_job_nodes: bool) -> bool {
    let jobs = &w.jobs[s.window.range()];
    let size = |j: usize| {
        if per_job_nodes {
            w.machine.nodes_for(jobs[j].procs) as u64 * w.machine.procs_per_node as u64
        } else {
            jobs[j].procs as u64
        }
    };
    s.order.iter().all(|&j| {
        let t = s.starts[j as usize];
        let used: u64 = (0..jobs.len())
            .filter(|&k| s.starts[k] <= t && t < s.starts[k] + jobs[k].run)
            .map(size)
            .sum();
        used <= w.machine.procs()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn strict_fcfs_on_single_processor_nodes_is_the_same_in_both_models(jobs in arb_jobs()) {
        let w = workload(&jobs, Machine { nodes: 8, procs_per_node: 1 });
        let all = Window { start: 0, len: w.jobs.len() };
        let ours = simulate(&w, all, PolicyKind::FCFS, Model::Slurp);
        let theirs = simulate(&w, all, PolicyKind::FCFS, Model::Reference);
        prop_assert_eq!(ours.starts, theirs.starts);
    }

    #[test]
    fn every_policy_respects_the_machine_and_starts_every_job(jobs in arb_jobs(), p in 0usize..11) {
        let names = ["fcfs", "sjf", "f1", "wfp3", "unicep", "easy", "sjf+easy", "f1+easy", "wfp3+easy", "unicep+easy", "conservative"];
        let policy: PolicyKind = names[p].parse().unwrap();
        let w = workload(&jobs, Machine { nodes: 2, procs_per_node: 4 });
        let all = Window { start: 0, len: w.jobs.len() };
        for model in [Model::Slurp, Model::Reference] {
            if model.check(policy).is_err() {
                continue;
            }
            let s = simulate(&w, all, policy, model);
            let mut seen = s.order.clone();
            seen.sort();
            prop_assert_eq!(seen, (0..w.jobs.len() as u32).collect::<Vec<_>>(), "{} {:?}: not every job started once", policy, model);
            for (j, job) in w.jobs.iter().enumerate() {
                prop_assert!(s.starts[j] >= job.submit, "{} {:?}: job {} started before it was submitted", policy, model, j);
            }
            prop_assert!(respects_machine(&w, &s, model == Model::Reference), "{} {:?}: oversubscribed", policy, model);
        }
    }
}
