//! A per-slot MLP written as ONNX from Rust: the graph the PyTorch
//! trainer's `onnx_actor.py` writes (one MLP shared by the 128 slots,
//! `MatMul`/`Add`/`Relu` a layer, `Squeeze`, then the mask term
//! `logit + (mask - 1) * 1e6`), so a network evolved in Rust
//! (`evolve.rs`) is a model file like any other: `fair:MODEL.onnx` loads
//! it, tract runs it and `mlp.rs` recognises it.

use prost::Message;
use tract_onnx::pb::tensor_proto::DataType;
use tract_onnx::pb::tensor_shape_proto::{Dimension, dimension};
use tract_onnx::pb::type_proto::{self, Tensor};
use tract_onnx::pb::{
    GraphProto, ModelProto, NodeProto, OperatorSetIdProto, StringStringEntryProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};

use crate::observe::{FEATURES, SLOTS};

/// One dense layer: `w` is `inputs x outputs`, row-major.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Dense {
    pub w: Vec<f32>,
    pub b: Vec<f32>,
}

impl Dense {
    pub fn outputs(&self) -> usize {
        self.b.len()
    }

    pub fn inputs(&self) -> usize {
        self.w.len() / self.b.len().max(1)
    }
}

/// Whether `layers` chain from [`FEATURES`] inputs to one output, as
/// [`actor`] needs them to.
pub fn chains(layers: &[Dense]) -> bool {
    let mut width = FEATURES;
    for layer in layers {
        if layer.b.is_empty() || layer.w.len() != width * layer.outputs() {
            return false;
        }
        width = layer.outputs();
    }
    !layers.is_empty() && width == 1
}

/// The metadata that carries a network for committed choices
/// ([`crate::Model::committed`]), seeing `sight`: its layers as JSON, and
/// the observation it sees (which may differ from the model's own). With
/// `easy`, the network for EASY backfilling alone; else the one for no
/// backfilling, which serves EASY too when the model carries no other.
pub fn committed_notes(
    layers: &[Dense],
    sight: crate::Sight,
    easy: bool,
) -> [(&'static str, String); 2] {
    use crate::model::{COMMITTED, COMMITTED_EASY, COMMITTED_EASY_SIGHT, COMMITTED_SIGHT};
    if easy {
        notes(COMMITTED_EASY, COMMITTED_EASY_SIGHT, layers, sight)
    } else {
        notes(COMMITTED, COMMITTED_SIGHT, layers, sight)
    }
}

/// The metadata that carries a network for slurp's model under EASY
/// ([`crate::Model::in_slurp`]), seeing `sight`.
pub fn slurp_easy_notes(layers: &[Dense], sight: crate::Sight) -> [(&'static str, String); 2] {
    use crate::model::{SLURP_EASY, SLURP_EASY_SIGHT};
    notes(SLURP_EASY, SLURP_EASY_SIGHT, layers, sight)
}

fn notes(
    key: &'static str,
    sight_key: &'static str,
    layers: &[Dense],
    sight: crate::Sight,
) -> [(&'static str, String); 2] {
    [
        (
            key,
            serde_json::to_string(layers).expect("layers are plain numbers"),
        ),
        (sight_key, sight.name().to_owned()),
    ]
}

/// `bytes`, an ONNX model, with the metadata under each key of `set`
/// replaced by its value (removed where it is `None`); the graph as it was.
pub fn renoted(bytes: &[u8], set: &[(&str, Option<String>)]) -> Result<Vec<u8>, String> {
    let mut model = ModelProto::decode(bytes).map_err(|e| format!("not an ONNX model: {e}"))?;
    model
        .metadata_props
        .retain(|p| !set.iter().any(|(k, _)| *k == p.key));
    model.metadata_props.extend(set.iter().filter_map(|(k, v)| {
        v.as_ref().map(|v| StringStringEntryProto {
            key: (*k).to_owned(),
            value: v.clone(),
        })
    }));
    Ok(model.encode_to_vec())
}

/// What the mask term pushes a padded slot's logit down by.
const BIG: f32 = 1e6;

fn floats(name: &str, dims: &[usize], data: &[f32]) -> TensorProto {
    TensorProto {
        name: name.to_owned(),
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: DataType::Float as i32,
        float_data: data.to_vec(),
        ..TensorProto::default()
    }
}

fn node(op: &str, inputs: &[&str], output: &str) -> NodeProto {
    NodeProto {
        op_type: op.to_owned(),
        input: inputs.iter().map(|&s| s.to_owned()).collect(),
        output: vec![output.to_owned()],
        ..NodeProto::default()
    }
}

fn value(name: &str, dims: &[usize]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|&d| Dimension {
            value: Some(dimension::Value::DimValue(d as i64)),
            ..Dimension::default()
        })
        .collect();
    ValueInfoProto {
        name: name.to_owned(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(Tensor {
                elem_type: DataType::Float as i32,
                shape: Some(TensorShapeProto { dim }),
            })),
            ..TypeProto::default()
        }),
        ..ValueInfoProto::default()
    }
}

/// The actor of `layers` (ReLU between them, none after the last, which
/// has one output) as ONNX bytes; `observation` (`"v2"`) is written as the
/// metadata `slurp.observation`, and `notes` as further metadata.
///
/// # Panics
/// If the layers do not chain from [`FEATURES`] inputs to one output: the
/// caller builds them.
pub fn actor(layers: &[Dense], observation: &str, notes: &[(&str, String)]) -> Vec<u8> {
    let mut width = FEATURES;
    for layer in layers {
        assert_eq!(layer.inputs(), width, "layers must chain");
        width = layer.outputs();
    }
    assert_eq!(width, 1, "the last layer gives one logit a slot");
    let mut nodes = Vec::new();
    let mut initializer = Vec::new();
    let mut prev = "obs".to_owned();
    for (i, layer) in layers.iter().enumerate() {
        let (w, b, m, a) = (
            format!("w{i}"),
            format!("b{i}"),
            format!("m{i}"),
            format!("a{i}"),
        );
        initializer.push(floats(&w, &[layer.inputs(), layer.outputs()], &layer.w));
        initializer.push(floats(&b, &[layer.outputs()], &layer.b));
        nodes.push(node("MatMul", &[&prev, &w], &m));
        nodes.push(node("Add", &[&m, &b], &a));
        prev = a;
        if i + 1 < layers.len() {
            let r = format!("r{i}");
            nodes.push(node("Relu", &[&prev], &r));
            prev = r;
        }
    }
    initializer.push(TensorProto {
        name: "last".into(),
        dims: vec![1],
        data_type: DataType::Int64 as i32,
        int64_data: vec![2],
        ..TensorProto::default()
    });
    initializer.push(floats("one", &[], &[1.0]));
    initializer.push(floats("big", &[], &[BIG]));
    nodes.push(node("Squeeze", &[&prev, "last"], "raw"));
    nodes.push(node("Sub", &["mask", "one"], "off"));
    nodes.push(node("Mul", &["off", "big"], "push"));
    nodes.push(node("Add", &["raw", "push"], "logits"));
    let mut metadata_props = vec![StringStringEntryProto {
        key: "slurp.observation".into(),
        value: observation.to_owned(),
    }];
    metadata_props.extend(notes.iter().map(|(k, v)| StringStringEntryProto {
        key: (*k).to_owned(),
        value: v.clone(),
    }));
    let model = ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 13,
        }],
        producer_name: "slurp".into(),
        producer_version: env!("CARGO_PKG_VERSION").into(),
        graph: Some(GraphProto {
            name: "fair-actor".into(),
            node: nodes,
            initializer,
            input: vec![
                value("obs", &[1, SLOTS, FEATURES]),
                value("mask", &[1, SLOTS]),
            ],
            output: vec![value("logits", &[1, SLOTS])],
            ..GraphProto::default()
        }),
        metadata_props,
        ..ModelProto::default()
    };
    model.encode_to_vec()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::observe::{Observation, PADDING};
    use crate::{Model, Sight};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use std::path::Path;

    fn random(rng: &mut ChaCha8Rng, sizes: &[usize]) -> Vec<Dense> {
        sizes
            .windows(2)
            .map(|io| Dense {
                w: (0..io[0] * io[1])
                    .map(|_| rng.random_range(-1.0..1.0))
                    .collect(),
                b: (0..io[1]).map(|_| rng.random_range(-0.5..0.5)).collect(),
            })
            .collect()
    }

    /// The network by hand, in f64: what the file must compute (the
    /// evolve tests score with it too).
    pub(crate) fn forward(layers: &[Dense], row: &[f32]) -> f64 {
        let mut h: Vec<f64> = row.iter().map(|&x| f64::from(x)).collect();
        for (i, l) in layers.iter().enumerate() {
            let n = l.outputs();
            let mut out: Vec<f64> = l.b.iter().map(|&b| f64::from(b)).collect();
            for (k, x) in h.iter().enumerate() {
                for (o, v) in out.iter_mut().enumerate() {
                    *v += x * f64::from(l.w[k * n + o]);
                }
            }
            if i + 1 < layers.len() {
                out.iter_mut().for_each(|v| *v = v.max(0.0));
            }
            h = out;
        }
        h[0]
    }

    #[test]
    fn a_written_actor_loads_as_v2_runs_directly_and_computes_its_layers() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for sizes in [
            vec![FEATURES, 1],
            vec![FEATURES, 6, 1],
            vec![FEATURES, 8, 4, 1],
        ] {
            let layers = random(&mut rng, &sizes);
            let bytes = actor(&layers, "v2", &[("slurp.note", "test".into())]);
            let model = Model::from_bytes(Path::new("evolved.onnx"), &bytes, None, None)
                .expect("the written actor loads");
            assert_eq!(model.sight, Sight::V2, "{sizes:?}");
            assert_eq!(model.evaluator(), "direct", "{sizes:?}: mlp.rs reads it");
            let real = 50;
            let mut obs = Observation {
                features: Vec::new(),
                mask: vec![0.0; SLOTS],
                jobs: Vec::new(),
            };
            for slot in 0..SLOTS {
                if slot < real {
                    obs.features
                        .extend((0..FEATURES).map(|_| rng.random::<f32>()));
                    obs.mask[slot] = 1.0;
                } else {
                    obs.features.extend_from_slice(&PADDING);
                }
            }
            let tract = model.tract_logits(&obs).unwrap();
            for (slot, &got) in tract.iter().enumerate().take(real) {
                let want = forward(&layers, &obs.features[slot * FEATURES..][..FEATURES]);
                let got = f64::from(got);
                assert!(
                    (got - want).abs() <= 1e-4 * (1.0 + want.abs()),
                    "{sizes:?} slot {slot}: {got} vs {want}"
                );
            }
            assert!(tract[real..].iter().all(|&l| l < -1e5), "padding is masked");
        }
    }
}
