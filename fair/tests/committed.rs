//! A model that carries a second network for committed choices: the
//! reference model (a choice kept until it starts) decides with it, slurp's
//! own model with the graph itself (a third network, when carried, decides
//! the reference model's choices under EASY; a fourth, slurp's model's
//! under EASY), and a malformed one is refused.

use std::sync::Arc;

use slurp_fair::evolve::{self, Shape};
use slurp_fair::export::{self, Dense};
use slurp_fair::{Model, ModelError, Sight};
use slurp_sim::Window;

mod common;
use common::{by_feature, model, saturated};

/// A model of `layers` alone, seeing `sight`.
fn alone(layers: &[Dense], sight: Sight) -> Arc<Model> {
    let bytes = export::actor(layers, sight.name(), &[]);
    Arc::new(Model::from_bytes(std::path::Path::new("m.onnx"), &bytes, None, None).unwrap())
}

#[test]
fn the_reference_model_decides_with_the_committed_network_and_slurps_with_the_graph() {
    // Oldest first (feature 4: the wait) against narrowest first
    // (feature 1: the share of the cores, weighed negatively).
    let oldest = by_feature(3, 1.0);
    let narrow = by_feature(0, -1.0);
    let both =
        Arc::new(model(&oldest, &export::committed_notes(&narrow, Sight::V3, false)).unwrap());
    let (oldest, narrow) = (
        Arc::new(model(&oldest, &[]).unwrap()),
        Arc::new(model(&narrow, &[]).unwrap()),
    );
    assert!(both.has_committed() && !oldest.has_committed());
    assert_eq!(both.committed_layers(false), narrow.layers());
    assert_eq!(both.committed_layers(true), narrow.layers());
    let workload = saturated();
    let window = Window {
        start: 200,
        len: 1024,
    };
    for backfill in [false, true] {
        let reference = |m: &Model| {
            slurp_fair::rollout::replay(m, &workload, window, backfill, None)
                .unwrap()
                .order
        };
        let slurp = |m: &Arc<Model>| {
            slurp_fair::chooser::replay(m.clone(), &workload, window, backfill, None)
                .unwrap()
                .order
        };
        assert_ne!(
            reference(&oldest),
            reference(&narrow),
            "the two networks choose alike"
        );
        assert_eq!(reference(&both), reference(&narrow), "backfill {backfill}");
        assert_ne!(
            slurp(&oldest),
            slurp(&narrow),
            "the two networks choose alike"
        );
        assert_eq!(slurp(&both), slurp(&oldest), "backfill {backfill}");
    }
}

#[test]
fn a_malformed_committed_network_is_refused_with_the_reason() {
    let main = by_feature(0, 1.0);
    for bad in [
        "not json".to_owned(),
        "[]".to_owned(),
        // Eight inputs, not nine.
        serde_json::to_string(&[Dense {
            w: vec![0.0; 8],
            b: vec![0.0],
        }])
        .unwrap(),
        // Two outputs at the end.
        serde_json::to_string(&[Dense {
            w: vec![0.0; 18],
            b: vec![0.0, 0.0],
        }])
        .unwrap(),
    ] {
        let err = model(&main, &[("slurp.committed", bad.clone())]).unwrap_err();
        assert!(matches!(err, ModelError::Carried { .. }), "{bad}: {err}");
        assert!(
            err.to_string()
                .starts_with("m.onnx: its network for committed choices"),
            "{err}"
        );
        assert!(err.to_string().contains("slurp.committed"), "{err}");
        assert!(
            err.to_string().contains("from 9 inputs to 1 output"),
            "what is expected: {err}"
        );
    }
}

#[test]
fn an_evolved_network_round_trips_as_a_committed_one() {
    let shape = Shape { hidden: vec![3] };
    let params: Vec<f64> = (0..shape.params())
        .map(|i| (i as f64 - 20.0) / 16.0)
        .collect();
    let layers = shape.layers(&params);
    let carried = model(
        &by_feature(0, 1.0),
        &export::committed_notes(&layers, Sight::V3, false),
    )
    .unwrap();
    let evolved = evolve::model(&shape, &params, &[]).unwrap();
    assert_eq!(carried.committed_layers(false), evolved.layers());
    assert_eq!(carried.committed(false).evaluator(), "direct");
}

#[test]
fn a_committed_network_sees_the_observation_the_file_names_for_it() {
    // Feature 1 is a job's width in v3 and its user's place in fair-share
    // turns in v5: the same weights choose differently.
    let first = by_feature(0, 1.0);
    let (v3, v5) = (alone(&first, Sight::V3), alone(&first, Sight::V5));
    let carried = model(
        &by_feature(3, 1.0),
        &export::committed_notes(&first, Sight::V5, false),
    )
    .unwrap();
    assert_eq!(carried.sight, Sight::V3);
    assert_eq!(carried.committed(true).sight, Sight::V5);
    let workload = saturated();
    let window = Window {
        start: 200,
        len: 1024,
    };
    let reference = |m: &Model| {
        slurp_fair::rollout::replay(m, &workload, window, true, None)
            .unwrap()
            .order
    };
    assert_ne!(reference(&v3), reference(&v5), "v3 and v5 choose alike");
    assert_eq!(reference(&carried), reference(&v5));

    // A name this slurp does not know is refused, naming the key.
    let mut notes = export::committed_notes(&first, Sight::V5, false).to_vec();
    notes[1].1 = "v11".into();
    let err = model(&by_feature(3, 1.0), &notes).unwrap_err();
    assert!(matches!(err, ModelError::Carried { .. }), "{err}");
    assert!(
        err.to_string().contains(
            "`slurp.committed.observation` is `v11`; it may name v2, v3, v4, v5, v7, v8, v9 or v10"
        ),
        "{err}"
    );
    // Nor may it name v1, which is scaled by one trace.
    notes[1].1 = "v1".into();
    let err = model(&by_feature(3, 1.0), &notes).unwrap_err();
    assert!(err.to_string().contains("is `v1`; it may name"), "{err}");
}

#[test]
fn a_network_for_easy_decides_the_reference_models_choices_under_easy_alone() {
    // Oldest first for the model, narrowest first without backfilling,
    // widest first under EASY.
    let (oldest, narrow, wide) = (by_feature(3, 1.0), by_feature(0, -1.0), by_feature(0, 1.0));
    let mut notes = export::committed_notes(&narrow, Sight::V3, false).to_vec();
    notes.extend(export::committed_notes(&wide, Sight::V5, true));
    let three = model(&oldest, &notes).unwrap();
    assert!(three.carries(false) && three.carries(true));
    assert_eq!(three.committed_layers(false), Some(narrow.clone()));
    assert_eq!(three.committed_layers(true), Some(wide.clone()));
    assert_eq!(
        (three.committed(false).sight, three.committed(true).sight),
        (Sight::V3, Sight::V5)
    );
    let (narrow, wide) = (alone(&narrow, Sight::V3), alone(&wide, Sight::V5));
    let workload = saturated();
    let window = Window {
        start: 200,
        len: 1024,
    };
    let reference = |m: &Model, backfill: bool| {
        slurp_fair::rollout::replay(m, &workload, window, backfill, None)
            .unwrap()
            .order
    };
    assert_ne!(
        reference(&narrow, true),
        reference(&wide, true),
        "the two networks choose alike"
    );
    assert_eq!(reference(&three, false), reference(&narrow, false));
    assert_eq!(reference(&three, true), reference(&wide, true));

    // One for EASY alone: without backfilling the model's own decides.
    let easy_only = model(
        &by_feature(3, 1.0),
        &export::committed_notes(&by_feature(0, 1.0), Sight::V5, true),
    )
    .unwrap();
    let own = model(&by_feature(3, 1.0), &[]).unwrap();
    assert_eq!(easy_only.committed_layers(false), None);
    assert!(easy_only.has_committed() && !easy_only.carries(false) && easy_only.carries(true));
    assert_eq!(reference(&easy_only, false), reference(&own, false));
    assert_eq!(reference(&easy_only, true), reference(&wide, true));

    // A malformed one is refused, naming its key.
    let err = model(
        &by_feature(3, 1.0),
        &[("slurp.committed.easy", "[]".to_owned())],
    )
    .unwrap_err();
    assert!(matches!(err, ModelError::Carried { .. }), "{err}");
    assert!(err.to_string().contains("`slurp.committed.easy`"), "{err}");
}

#[test]
fn a_network_for_easy_decides_slurps_model_under_easy_alone() {
    // Oldest first for the model's own network, narrowest first for
    // slurp's model under EASY.
    let (oldest, narrow) = (by_feature(3, 1.0), by_feature(0, -1.0));
    let carrying = Arc::new(model(&oldest, &export::slurp_easy_notes(&narrow, Sight::V5)).unwrap());
    let (oldest, narrow) = (alone(&oldest, Sight::V3), alone(&narrow, Sight::V5));
    assert_eq!(carrying.slurp_easy().map(|m| m.sight), Some(Sight::V5));
    assert_eq!(
        carrying.slurp_easy().and_then(Model::layers),
        narrow.layers()
    );
    assert!(
        !carrying.has_committed(),
        "not a network for committed choices"
    );
    let workload = saturated();
    let window = Window {
        start: 200,
        len: 1024,
    };
    let slurp = |m: &Arc<Model>, backfill: bool| {
        slurp_fair::chooser::replay(m.clone(), &workload, window, backfill, None)
            .unwrap()
            .order
    };
    let reference = |m: &Model, backfill: bool| {
        slurp_fair::rollout::replay(m, &workload, window, backfill, None)
            .unwrap()
            .order
    };
    assert_ne!(
        slurp(&oldest, true),
        slurp(&narrow, true),
        "the two networks choose alike"
    );
    assert_eq!(slurp(&carrying, true), slurp(&narrow, true));
    assert_eq!(slurp(&carrying, false), slurp(&oldest, false));
    // The reference model's choices are the model's own network's.
    for backfill in [false, true] {
        assert_eq!(reference(&carrying, backfill), reference(&oldest, backfill));
    }

    // A malformed one is refused, naming what it is for and its key.
    let err = model(&by_feature(3, 1.0), &[("slurp.easy", "[]".to_owned())]).unwrap_err();
    assert!(matches!(err, ModelError::Carried { .. }), "{err}");
    assert!(
        err.to_string().starts_with(
            "m.onnx: its network for slurp's model under EASY (metadata `slurp.easy`)"
        ),
        "{err}"
    );
}
