//! The per-slot MLP, evaluated directly when a model is one.
//!
//! Every actor slurp's trainer writes (`fair/trainer/onnx_actor.py`) is the
//! same graph: one MLP shared by the 128 slots (`MatMul`, `Add`, `Relu` per
//! layer), `Squeeze` to one logit a slot, then the mask term
//! `logit + (mask - 1) * big`. tract runs that as a plan of ten ops, and at
//! 128 slots most of a decision is the plan's per-op cost, not arithmetic
//! (BENCHMARKS.md). [`SlotMlp::recognise`] reads exactly that graph from the
//! ONNX file and nothing else; the model then checks the result against
//! tract's on probe observations before using it (`model.rs`), so any other
//! graph — or one this reads wrongly — keeps tract.
//!
//! Evaluated here, a padded slot costs nothing (its logit is computed once:
//! the rows observe.rs pads with are all alike), and real slots go through
//! the layers eight at a time, each layer's outputs in blocks of eight lanes,
//! in loops the compiler vectorises — with AVX2 and FMA where the CPU has
//! them (checked at run time). 6 µs for 128 real slots, against tract's 18.

use tract_onnx::pb::{GraphProto, ModelProto, NodeProto, TensorProto};
use tract_onnx::prelude::*;

use crate::export::Dense;
use crate::observe::{FEATURES, Observation, PADDING, SLOTS};

/// The widest hidden layer kept on the stack while evaluating.
const MAX_WIDTH: usize = 256;

/// Outputs are computed this many at a time (one AVX register).
const LANES: usize = 8;

/// One dense layer, its outputs in blocks of [`LANES`]: block `c` holds,
/// for each input `i`, the weights from `i` to outputs `c*LANES..`, so a
/// block is summed in one register over a contiguous run of weights. The
/// outputs are padded with zero weights to whole blocks; a padded output is
/// 0, and so is its weight as the next layer's input.
#[derive(Debug, Clone)]
struct Layer {
    w: Vec<[f32; LANES]>,
    b: Vec<f32>,
    inputs: usize,
    relu: bool,
}

impl Layer {
    /// From `w` (`inputs x outputs`, row-major) and `b`, the inputs being
    /// the previous layer's padded outputs (`padded_inputs` of them).
    fn padded(w: &[f32], b: &[f32], inputs: usize, padded_inputs: usize, relu: bool) -> Layer {
        let outputs = b.len();
        let wide = outputs.next_multiple_of(LANES);
        let mut padded = vec![[0.0; LANES]; padded_inputs * wide / LANES];
        for (i, row) in w.chunks_exact(outputs).take(inputs).enumerate() {
            for (o, &v) in row.iter().enumerate() {
                padded[(o / LANES) * padded_inputs + i][o % LANES] = v;
            }
        }
        let mut bias = vec![0.0; wide];
        bias[..outputs].copy_from_slice(b);
        Layer {
            w: padded,
            b: bias,
            inputs: padded_inputs,
            relu,
        }
    }

    fn outputs(&self) -> usize {
        self.b.len()
    }
}

/// A recognised per-slot MLP with its mask term.
#[derive(Debug, Clone)]
pub struct SlotMlp {
    layers: Vec<Layer>,
    /// The layers as the file has them (weights, biases, ReLU after), for
    /// a search that starts from this network (`evolve.rs`).
    read: Vec<(Dense, bool)>,
    /// The mask's weight: a slot's logit is `mlp(row) + (mask - 1) * big`.
    big: f32,
    /// The logit of a padded slot (the padding row, mask 0).
    padded: f32,
    /// AVX2 and FMA present (x86_64 only).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    fma: bool,
}

impl SlotMlp {
    /// The MLP in `proto` if its graph is exactly the trainer's actor; `None`
    /// for anything else (tract evaluates those).
    pub fn recognise(proto: &ModelProto) -> Option<SlotMlp> {
        let graph = proto.graph.as_ref()?;
        let [obs, mask] = [graph.input.first()?, graph.input.get(1)?].map(|i| i.name.as_str());
        let output = graph.output.first()?.name.as_str();
        let mut nodes = graph.node.iter().peekable();
        let mut prev = obs.to_string();
        let mut width = FEATURES;
        let mut layers = Vec::new();
        let mut read = Vec::new();
        // Layers: MatMul(prev, W) -> Add(., b) [-> Relu], until one output.
        while let Some(node) = nodes.next_if(|n| n.op_type == "MatMul") {
            let (shape, w) = weight(graph, node, &prev)?;
            if shape.len() != 2 || shape[0] != width {
                return None;
            }
            let add = nodes.next().filter(|n| n.op_type == "Add")?;
            let (bshape, b) = weight(graph, add, single_output(node)?)?;
            if bshape != [shape[1]] {
                return None;
            }
            prev = single_output(add)?.to_string();
            let relu = nodes.next_if(|n| n.op_type == "Relu" && n.input == [prev.clone()]);
            if let Some(r) = &relu {
                prev = single_output(r)?.to_string();
            }
            let inputs = layers.last().map_or(FEATURES, Layer::outputs);
            layers.push(Layer::padded(&w, &b, width, inputs, relu.is_some()));
            read.push((Dense { w, b }, relu.is_some()));
            width = shape[1];
        }
        if layers.is_empty() || width != 1 || layers.iter().any(|l| l.outputs() > MAX_WIDTH) {
            return None;
        }
        // Squeeze(prev, [2]) -> raw; Sub(mask, 1) -> off; Mul(off, big) -> push;
        // Add(raw, push) -> the output.
        let squeeze = nodes.next().filter(|n| n.op_type == "Squeeze")?;
        if squeeze.input.first() != Some(&prev) || !squeezes_last(graph, squeeze)? {
            return None;
        }
        let raw = single_output(squeeze)?;
        let sub = nodes.next().filter(|n| n.op_type == "Sub")?;
        if sub.input.first().map(String::as_str) != Some(mask)
            || scalar(graph, sub.input.get(1)?)? != 1.0
        {
            return None;
        }
        let mul = nodes.next().filter(|n| n.op_type == "Mul")?;
        let (off, big) = (single_output(sub)?, mul.input.get(1)?);
        if mul.input.first().map(String::as_str) != Some(off) {
            return None;
        }
        let big = scalar(graph, big)?;
        let add = nodes.next().filter(|n| n.op_type == "Add")?;
        let push = single_output(mul)?;
        let operands: Vec<&str> = add.input.iter().map(String::as_str).collect();
        if !(operands == [raw, push] || operands == [push, raw])
            || single_output(add)? != output
            || nodes.next().is_some()
        {
            return None;
        }
        let mut mlp = SlotMlp {
            layers,
            read,
            big,
            padded: 0.0,
            fma: fma_present(),
        };
        mlp.padded = mlp.group(&[PADDING; GROUP], &mut Scratch::default())[0] - mlp.big;
        Some(mlp)
    }

    /// The layers, if the network is what `export::actor` writes: ReLU
    /// after every layer but the last.
    pub fn dense(&self) -> Option<Vec<Dense>> {
        let n = self.read.len();
        self.read
            .iter()
            .enumerate()
            .all(|(i, (_, relu))| *relu == (i + 1 < n))
            .then(|| self.read.iter().map(|(d, _)| d.clone()).collect())
    }

    /// The masked logits of one observation, as tract would give them.
    pub fn logits(&self, obs: &Observation) -> Vec<f32> {
        let mut out = vec![self.padded; SLOTS];
        // The slots that need the network: all but padding rows.
        let real: Vec<usize> = (0..SLOTS)
            .filter(|&s| obs.mask[s] != 0.0 || obs.features[s * FEATURES..][..FEATURES] != PADDING)
            .collect();
        let mut scratch = Scratch::default();
        for group in real.chunks(GROUP) {
            let mut rows = [[0.0; FEATURES]; GROUP];
            for (row, &slot) in rows.iter_mut().zip(group) {
                row.copy_from_slice(&obs.features[slot * FEATURES..][..FEATURES]);
            }
            let mlp = self.group(&rows, &mut scratch);
            for (&slot, mlp) in group.iter().zip(mlp) {
                out[slot] = mlp + (obs.mask[slot] - 1.0) * self.big;
            }
        }
        out
    }

    // The one unsafe call: a function compiled for CPU features, called
    // only where they were detected.
    #[allow(unsafe_code)]
    fn group(&self, rows: &[[f32; FEATURES]; GROUP], scratch: &mut Scratch) -> [f32; GROUP] {
        #[cfg(target_arch = "x86_64")]
        if self.fma {
            // SAFETY: `fma` is set only where the CPU has AVX2 and FMA
            // (`fma_present`), the features `group_fma` is compiled for.
            return unsafe { group_fma(&self.layers, rows, scratch) };
        }
        group_with::<false>(&self.layers, rows, scratch)
    }
}

/// Slots evaluated together. One slot's sums are chains of dependent
/// multiply-adds, each waiting for the last; several slots' chains are
/// independent and fill the pipeline. The reference actor over 128 slots
/// (`cargo bench -p slurp-fair --bench decision`): 17.8 us a slot at a
/// time, 13.4 us in fours, 5.7 us in eights (tract: 20-28 us).
const GROUP: usize = 8;

/// Activations of a group of slots, two layers' worth, reused.
struct Scratch([[[f32; MAX_WIDTH]; GROUP]; 2]);

impl Default for Scratch {
    fn default() -> Scratch {
        Scratch([[[0.0; MAX_WIDTH]; GROUP]; 2])
    }
}

fn fma_present() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn group_fma(
    layers: &[Layer],
    rows: &[[f32; FEATURES]; GROUP],
    scratch: &mut Scratch,
) -> [f32; GROUP] {
    group_with::<true>(layers, rows, scratch)
}

/// A group of slots through every layer. `FMA` fuses each multiply-add
/// (only where the caller is compiled for FMA: elsewhere `mul_add` is a slow
/// libm call).
#[inline(always)]
fn group_with<const FMA: bool>(
    layers: &[Layer],
    rows: &[[f32; FEATURES]; GROUP],
    scratch: &mut Scratch,
) -> [f32; GROUP] {
    let [a, b] = &mut scratch.0;
    for (a, row) in a.iter_mut().zip(rows) {
        a[..FEATURES].copy_from_slice(row);
    }
    let (mut input, mut output) = (a, b);
    for layer in layers {
        let blocks = layer.w.chunks_exact(layer.inputs);
        for (c, (w, b)) in blocks.zip(layer.b.chunks_exact(LANES)).enumerate() {
            // Local accumulators stay in registers; summing into `output`
            // itself made the compiler fear aliasing and go scalar.
            let mut acc = [[0.0f32; LANES]; GROUP];
            for acc in &mut acc {
                acc.copy_from_slice(b);
            }
            for (i, w) in w.iter().enumerate() {
                for (acc, input) in acc.iter_mut().zip(input.iter()) {
                    let x = input[i];
                    for lane in 0..LANES {
                        acc[lane] = if FMA {
                            x.mul_add(w[lane], acc[lane])
                        } else {
                            x * w[lane] + acc[lane]
                        };
                    }
                }
            }
            for (out, mut acc) in output.iter_mut().zip(acc) {
                if layer.relu {
                    acc = acc.map(|a| a.max(0.0));
                }
                out[c * LANES..][..LANES].copy_from_slice(&acc);
            }
        }
        std::mem::swap(&mut input, &mut output);
    }
    input.map(|slot| slot[0])
}

fn single_output(node: &NodeProto) -> Option<&str> {
    match node.output.as_slice() {
        [one] => Some(one),
        _ => None,
    }
}

fn initializer<'g>(graph: &'g GraphProto, name: &str) -> Option<&'g TensorProto> {
    graph.initializer.iter().find(|t| t.name == name)
}

/// The f32 initializer a two-input node takes besides `from`, with its shape.
fn weight(graph: &GraphProto, node: &NodeProto, from: &str) -> Option<(Vec<usize>, Vec<f32>)> {
    let [x, w] = node.input.as_slice() else {
        return None;
    };
    let name = match (x.as_str(), w.as_str()) {
        (x, w) if x == from => w,
        // Add is commutative; MatMul is not.
        (x, w) if w == from && node.op_type == "Add" => x,
        _ => return None,
    };
    let tensor = tensor(initializer(graph, name)?)?;
    Some((tensor.shape().to_vec(), floats(&tensor)?))
}

fn tensor(proto: &TensorProto) -> Option<Tensor> {
    let provider = tract_onnx::data_resolver::MmapDataResolver;
    tract_onnx::tensor::load_tensor(&provider, proto, None).ok()
}

/// The value of a one-element f32 initializer.
fn scalar(graph: &GraphProto, name: &str) -> Option<f32> {
    match floats(&tensor(initializer(graph, name)?)?)?.as_slice() {
        [v] => Some(*v),
        _ => None,
    }
}

fn floats(t: &Tensor) -> Option<Vec<f32>> {
    Some(
        t.to_plain_array_view::<f32>()
            .ok()?
            .iter()
            .copied()
            .collect(),
    )
}

/// Whether a Squeeze drops exactly the last axis of `[1, 128, 1]` (axes as
/// the opset 13 input or the older attribute).
fn squeezes_last(graph: &GraphProto, node: &NodeProto) -> Option<bool> {
    let axes: Vec<i64> = match node.input.get(1) {
        Some(name) => tensor(initializer(graph, name)?)?
            .cast_to::<i64>()
            .ok()?
            .to_plain_array_view::<i64>()
            .ok()?
            .iter()
            .copied()
            .collect(),
        None => node
            .attribute
            .iter()
            .find(|a| a.name == "axes")?
            .ints
            .clone(),
    };
    Some(axes == [2] || axes == [-1])
}
