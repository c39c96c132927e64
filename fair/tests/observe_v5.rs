//! v5's feature 1, a user's place in fair-share turns among the shown
//! jobs' users: what makes `fairshare`'s choice one a network can make.

use slurp_fair::export::{self, Dense};
use slurp_fair::{Model, Sight};
use slurp_runtime::core::Order;
use slurp_sim::generate::{Family, generate};
use slurp_sim::{Machine, Window, Workload};

/// A v5 network that scores a job `10·f1 + f4`: its user's place in turns
/// first, then its wait.
fn first_users_earliest(sight: Sight) -> Model {
    let mut w = vec![0.0; slurp_fair::FEATURES];
    w[0] = 10.0;
    w[3] = 1.0;
    let bytes = export::actor(&[Dense { w, b: vec![0.0] }], sight.name(), &[]);
    Model::from_bytes(std::path::Path::new("m.onnx"), &bytes, None, None).unwrap()
}

fn busy(family: Family, seed: u64) -> Workload {
    let trace = generate(&family.spec(3000), seed);
    Workload::new(&trace, Machine::of(&trace).unwrap())
}

/// Two weights through v5 start every job when `fairshare` does, in the
/// reference model, with and without backfilling, on queues long enough
/// that v3's wider slots are used. Through v4, whose feature 1 is the
/// width, the same weights do not.
#[test]
fn two_weights_through_v5_schedule_as_fairshare_does() {
    let (v5, v4) = (
        first_users_earliest(Sight::V5),
        first_users_earliest(Sight::V4),
    );
    let mut long_queues = 0;
    for (family, seed) in [(Family::Mid, 2), (Family::Saturated, 4), (Family::Quiet, 3)] {
        let workload = busy(family, seed);
        let window = Window {
            start: 500,
            len: 1024,
        };
        for backfill in [false, true] {
            let fairshare =
                slurp_sim::reference::run(&workload, window, Order::Fairshare, backfill);
            // How deep the queue gets under FCFS, the same arrivals.
            let mut deepest = 0;
            slurp_sim::reference::run_choosing(&workload, window, backfill, |d| {
                deepest = deepest.max(d.queue.len());
                d.queue[0]
            });
            long_queues += usize::from(deepest > slurp_fair::SLOTS);
            let through = |m: &Model| {
                slurp_fair::rollout::replay(m, &workload, window, backfill, None).unwrap()
            };
            let a = through(&v5);
            assert_eq!(
                a.order, fairshare.order,
                "{family:?} seed {seed}, backfill {backfill}"
            );
            assert_eq!(a.starts, fairshare.starts);
            assert_ne!(
                through(&v4).order,
                fairshare.order,
                "{family:?}: v4 follows too"
            );
        }
    }
    assert!(long_queues > 0, "no window queued more than the slots");
}
