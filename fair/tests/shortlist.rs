//! Shortlists (`shortlist.rs`) as a model file carries them: each network
//! chooses through its own, in both simulation models; one whose margin is
//! past every gap between logits is its order's schedule exactly; one
//! with a width leaves the jobs that wide to the network; `fairshare`
//! among exact ties is `fairshare`'s schedule, and is refused to a network
//! not shown fair-share turns; a
//! malformed one is refused naming its key; PPO's rollouts refuse a model
//! that has one.

use std::sync::Arc;

use slurp_fair::export;
use slurp_fair::model::{
    COMMITTED_EASY_SHORTLIST, COMMITTED_SHORTLIST, SHORTLIST, SLURP_EASY_SHORTLIST,
};
use slurp_fair::rollout::{self, Options, Player};
use slurp_fair::{Model, ModelError, Sight};
use slurp_runtime::core::{Backfill, Order, PolicyKind};
use slurp_sim::{Model as SimModel, Window, Workload, reference};

mod common;
use common::{by_feature, model, rollout_options, saturated};

const WINDOW: Window = Window {
    start: 200,
    len: 1024,
};

/// The order in which `m` starts the window's jobs in slurp's model and
/// in the reference model.
fn orders(m: &Arc<Model>, workload: &Workload, backfill: bool) -> (Vec<u32>, Vec<u32>) {
    let slurp = slurp_fair::chooser::replay(m.clone(), workload, WINDOW, backfill, None)
        .unwrap()
        .order;
    let reference = rollout::replay(m, workload, WINDOW, backfill, None)
        .unwrap()
        .order;
    (slurp, reference)
}

/// The heuristic's order of the same window in each model.
fn heuristic(order: Order, workload: &Workload, backfill: bool) -> (Vec<u32>, Vec<u32>) {
    let kind = PolicyKind::new(
        order,
        if backfill {
            Backfill::Easy
        } else {
            Backfill::None
        },
    );
    let slurp = slurp_sim::simulate(workload, WINDOW, kind, SimModel::Slurp).order;
    let reference = reference::run(workload, WINDOW, order, backfill).order;
    (slurp, reference)
}

#[test]
fn a_shortlist_past_every_gap_is_its_order_and_one_network_s_rule_is_its_own() {
    let workload = saturated();
    // Oldest first: a network whose choices are none of SJF's.
    let oldest = by_feature(3, 1.0);
    let plain = Arc::new(model(&oldest, &[]).unwrap());
    let sjf = Arc::new(model(&oldest, &[(SHORTLIST, "sjf:1e9".into())]).unwrap());
    for backfill in [false, true] {
        let (slurp, reference) = orders(&sjf, &workload, backfill);
        let (h_slurp, h_reference) = heuristic(Order::Sjf, &workload, backfill);
        assert_ne!(
            orders(&plain, &workload, backfill),
            (h_slurp.clone(), h_reference.clone()),
            "the network alone is SJF already"
        );
        assert_eq!(
            reference, h_reference,
            "reference model, backfill {backfill}"
        );
        // Under EASY in slurp's model the rule chooses the head, and the
        // core backfills around it in its own order, not SJF's.
        if !backfill {
            assert_eq!(slurp, h_slurp, "slurp's model");
        } else {
            assert_ne!(slurp, orders(&plain, &workload, true).0);
        }
    }

    // Each carried network reads its own key, and only its own.
    let carried = |key: &str| {
        let mut notes: Vec<(&str, String)> = Vec::new();
        notes.extend(export::committed_notes(&oldest, Sight::V3, false));
        notes.extend(export::committed_notes(&oldest, Sight::V3, true));
        notes.extend(export::slurp_easy_notes(&oldest, Sight::V3));
        notes.push((key, "sjf:1e9".into()));
        Arc::new(model(&oldest, &notes).unwrap())
    };
    let plain_orders = |backfill| orders(&plain, &workload, backfill);
    let sjf_orders = |backfill| orders(&sjf, &workload, backfill);
    // (slurp without, slurp with EASY, reference without, reference with)
    let expect = |key: &str| match key {
        SHORTLIST => (
            sjf_orders(false).0,
            plain_orders(true).0,
            plain_orders(false).1,
            plain_orders(true).1,
        ),
        SLURP_EASY_SHORTLIST => (
            plain_orders(false).0,
            sjf_orders(true).0,
            plain_orders(false).1,
            plain_orders(true).1,
        ),
        COMMITTED_SHORTLIST => (
            plain_orders(false).0,
            plain_orders(true).0,
            sjf_orders(false).1,
            plain_orders(true).1,
        ),
        _ => (
            plain_orders(false).0,
            plain_orders(true).0,
            plain_orders(false).1,
            sjf_orders(true).1,
        ),
    };
    for key in [
        SHORTLIST,
        SLURP_EASY_SHORTLIST,
        COMMITTED_SHORTLIST,
        COMMITTED_EASY_SHORTLIST,
    ] {
        let m = carried(key);
        let (without, with) = (orders(&m, &workload, false), orders(&m, &workload, true));
        assert_eq!((without.0, with.0, without.1, with.1), expect(key), "{key}");
    }
}

#[test]
fn a_width_leaves_wide_jobs_to_the_network_in_both_models() {
    let workload = saturated();
    let procs = workload.machine.procs();
    let oldest = by_feature(3, 1.0);
    let with = |rule: &str| Arc::new(model(&oldest, &[(SHORTLIST, rule.into())]).unwrap());
    let plain = Arc::new(model(&oldest, &[]).unwrap());
    let sjf = with("sjf:1e9");
    // Every job is at least a millionth of the machine: none is handed to
    // SJF, and the network's own schedule is kept in both models.
    let all_wide = with("sjf:1e9:0.000001");
    // The window has jobs of at least half the machine and narrower ones.
    let jobs = &workload.jobs[WINDOW.start..WINDOW.start + WINDOW.len];
    assert!(jobs.iter().any(|j| 2 * u64::from(j.procs) >= procs));
    assert!(jobs.iter().any(|j| 2 * u64::from(j.procs) < procs));
    let half = with("sjf:1e9:0.5");
    for backfill in [false, true] {
        assert_eq!(
            orders(&all_wide, &workload, backfill),
            orders(&plain, &workload, backfill),
            "backfill {backfill}"
        );
        // From half the machine: neither the network's schedule nor SJF's.
        let (slurp, reference) = orders(&half, &workload, backfill);
        let (sjf_slurp, sjf_reference) = orders(&sjf, &workload, backfill);
        let (own_slurp, own_reference) = orders(&plain, &workload, backfill);
        assert_ne!(reference, sjf_reference, "backfill {backfill}");
        assert_ne!(reference, own_reference, "backfill {backfill}");
        if !backfill {
            assert_ne!(slurp, sjf_slurp);
            assert_ne!(slurp, own_slurp);
        }
    }
}

#[test]
fn fairshare_among_ties_is_fairshare_s_schedule_in_both_models() {
    let workload = saturated();
    // A network indifferent to every job, shown fair-share turns (v5).
    let flat = by_feature(0, 0.0);
    let seeing_turns = |notes: &[(&str, String)]| {
        let bytes = export::actor(&flat, "v5", notes);
        Arc::new(Model::from_bytes(std::path::Path::new("m.onnx"), &bytes, None, None).unwrap())
    };
    let plain = seeing_turns(&[]);
    let fair = seeing_turns(&[(SHORTLIST, "fairshare:0".into())]);
    for backfill in [false, true] {
        let (slurp, reference) = orders(&fair, &workload, backfill);
        let (h_slurp, h_reference) = heuristic(Order::Fairshare, &workload, backfill);
        assert_ne!(
            orders(&plain, &workload, backfill).1,
            h_reference,
            "the network alone is fairshare already"
        );
        assert_eq!(
            reference, h_reference,
            "reference model, backfill {backfill}"
        );
        // Under EASY in slurp's model the core backfills in its own order.
        if !backfill {
            assert_eq!(slurp, h_slurp, "slurp's model");
        }
    }
}

#[test]
fn a_malformed_shortlist_is_refused_naming_its_key() {
    let main = by_feature(3, 1.0);
    for (key, value, why) in [
        (SHORTLIST, "f1", "not ORDER:MARGIN"),
        (SHORTLIST, "sfj:3", "not an order a shortlist can use"),
        // A v3 network is not shown the users' places in turns.
        (
            SHORTLIST,
            "fairshare:3",
            "fair-share turns, which a network seeing v3",
        ),
        (SHORTLIST, "f1:3:2", "not a width"),
        (COMMITTED_SHORTLIST, "f1:-2", "not a margin"),
        // A rule for a network the file does not carry: read by nothing.
        (
            COMMITTED_EASY_SHORTLIST,
            "f1:8",
            "carries no `slurp.committed.easy` network",
        ),
        (
            SLURP_EASY_SHORTLIST,
            "f1:8",
            "carries no `slurp.easy` network",
        ),
    ] {
        let mut notes: Vec<(&str, String)> =
            export::committed_notes(&main, Sight::V3, false).into();
        notes.push((key, value.into()));
        let err = model(&main, &notes).unwrap_err();
        assert!(matches!(err, ModelError::Shortlist { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "m.onnx: its shortlist (metadata `{key}`) cannot be used"
            )),
            "{text}"
        );
        assert!(text.contains(why), "{text}");
    }
}

#[test]
fn a_rollout_for_ppo_refuses_a_model_with_a_shortlist() {
    let workload = saturated();
    let m = model(&by_feature(3, 1.0), &[(SHORTLIST, "f1:3".into())]).unwrap();
    let opts = Options {
        trajectories: 1,
        ..rollout_options(1, Sight::V3)
    };
    let err = rollout::rollout(Player::Network(&m), &[workload], &opts).unwrap_err();
    assert!(err.contains("shortlist"), "{err}");
    assert!(err.contains("--clear"), "how to roll it out: {err}");
}
