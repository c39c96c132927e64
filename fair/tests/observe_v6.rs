//! v6's feature 9: how soon a job that does not fit now would, by the
//! running jobs' estimates — what committing to it as the head costs.

use std::sync::Arc;

use slurp_fair::chooser::{Learned, Who};
use slurp_fair::export::{self, Dense};
use slurp_fair::{Model, Sight};
use slurp_sim::generate::Family;
use slurp_sim::{Machine, SimJob, Window, Workload};

// Shared by the observation tests; this one reads no data file.
#[allow(dead_code)]
mod common;
use common::scaled;

/// A network of one linear score with `w` as its weights.
fn linear(w: [f32; slurp_fair::FEATURES], sight: Sight) -> Arc<Model> {
    let bytes = export::actor(
        &[Dense {
            w: w.to_vec(),
            b: vec![0.0],
        }],
        sight.name(),
        &[],
    );
    Arc::new(Model::from_bytes(std::path::Path::new("m.onnx"), &bytes, None, None).unwrap())
}

/// On 4 one-core nodes, jobs of 2 cores for 100 s and 2 for 1,000 s run
/// from 0; at 1 s come `a` (4 cores, 1,000 s), `b` (2 cores, 10 s) and `c`
/// (3 cores, 50 s). Neither `a` nor `c` fits before 1,000 s: `a` would
/// wait about its own length for room, `c` twenty times its length. With
/// `held`, a job of 2 cores for 5 s comes at 0 too: the reference model
/// waits for it (a choice waits until it starts) while `a`, `b` and `c`
/// arrive, and then chooses among the three, none of which fits.
fn three_waiting(held: bool) -> Workload {
    let job = |id: i64, submit: u64, run: u64, procs: u32| SimJob {
        id,
        submit,
        run,
        estimate: run,
        procs,
        user: id,
        group: -1,
        exe: -1,
        mem: -1,
    };
    let mut jobs = vec![job(0, 0, 100, 2), job(1, 0, 1000, 2)];
    if held {
        jobs.push(job(5, 0, 5, 2));
    }
    jobs.extend([job(2, 1, 1000, 4), job(3, 1, 10, 2), job(4, 1, 50, 3)]);
    Workload {
        machine: Machine {
            nodes: 4,
            procs_per_node: 1,
        },
        max_run: 1000,
        jobs,
        dropped: Default::default(),
    }
}

/// Weight −1 on feature 9: among jobs that do not fit, the one that would
/// wait longest against its own length (`c`) first; v5 sees 0 for both and
/// keeps submission order (`a` first). With EASY, in the reference model
/// (a choice waits until it starts) `c` then starts before `a`; in slurp's,
/// where the head is chosen again at every instant, the choice made at
/// 100 s — `b` fits and backfills, `a` and `c` do not — is `c`.
/// (In the reference model's decision, at 100 s, the held job runs until
/// 105: `b` would have room in 5 s, `a` and `c` in 900 s.)
#[test]
fn v6_tells_apart_jobs_that_do_not_fit_by_how_soon_they_would() {
    let mut w = [0.0; slurp_fair::FEATURES];
    w[8] = -1.0;
    for (sight, c_first) in [(Sight::V5, false), (Sight::V6, true)] {
        let model = linear(w, sight);
        let held = three_waiting(true);
        let window = Window { start: 0, len: 6 };
        let schedule = slurp_fair::rollout::replay(&model, &held, window, true, None).unwrap();
        // Positions in the window: a, b, c are 3, 4, 5.
        let at = |j: u32| schedule.order.iter().position(|&o| o == j);
        assert_eq!(
            at(5) < at(3),
            c_first,
            "{sight:?}, reference model: {:?} starting at {:?}",
            schedule.order,
            schedule.starts
        );
        // slurp's model: the decisions with a choice, each its shown
        // jobs' feature 9 and the slot chosen (a, b, c are slots 0, 1, 2).
        let workload = three_waiting(false);
        let window = Window { start: 0, len: 5 };
        let learned = Learned::recording(Who::Network(model), &workload, window, None);
        let (_, learned) = slurp_fair::chooser::play(learned, &workload, window, true);
        let three: Vec<_> = learned
            .steps
            .unwrap()
            .into_iter()
            .filter(|s| s.mask.iter().filter(|&&m| m > 0.0).count() == 3)
            .map(|s| {
                (
                    (0..3).map(|i| s.features[i * 9 + 8]).collect::<Vec<_>>(),
                    s.action,
                )
            })
            .collect();
        let expected = match sight {
            // a: 900 s for room, 1,000 s long; b fits; c: 900 s, 50 s long.
            Sight::V6 => (vec![1.0 / 1.9, 1.0, 1.0 / 19.0], 2),
            _ => (vec![0.0, 1.0, 0.0], 0),
        };
        assert_eq!(three.len(), 1, "{sight:?}: {three:?}");
        let (ninth, action) = &three[0];
        assert!(
            ninth
                .iter()
                .zip(&expected.0)
                .all(|(x, y)| (x - y).abs() < 1e-6),
            "{sight:?}: {ninth:?}"
        );
        assert_eq!(*action, expected.1, "{sight:?}");
    }
}

/// Like the rest of v2 … v5, v6 is blind to the machine's size: a network
/// that weighs every feature chooses the same on a workload of jobs twice
/// as wide on twice the cores, in both simulation models, with and
/// without EASY.
#[test]
fn a_v6_model_chooses_the_same_on_twice_the_cores() {
    let model = linear([0.3, -0.7, 0.5, 0.2, 0.9, -0.4, -0.6, 0.1, -0.8], Sight::V6);
    let window = Window { start: 0, len: 400 };
    for (family, seed) in [(Family::Mid, 9), (Family::Saturated, 3)] {
        let (one, two) = (
            scaled(family, 400, seed, 1, true),
            scaled(family, 400, seed, 2, true),
        );
        for backfill in [false, true] {
            let slurp = |w: &Workload| {
                slurp_fair::chooser::replay(model.clone(), w, window, backfill, None).unwrap()
            };
            let (a, b) = (slurp(&one), slurp(&two));
            assert_eq!(
                a.order, b.order,
                "{family:?}, slurp's model, backfill {backfill}"
            );
            assert_eq!(a.starts, b.starts);
            let reference = |w: &Workload| {
                slurp_fair::rollout::replay(&model, w, window, backfill, None).unwrap()
            };
            let (a, b) = (reference(&one), reference(&two));
            assert_eq!(
                a.order, b.order,
                "{family:?}, reference model, backfill {backfill}"
            );
            assert_eq!(a.starts, b.starts);
        }
    }
}
