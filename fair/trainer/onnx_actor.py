"""The fair policy's actor as plain ONNX and as NumPy, from the same weights.

The actor (RL-SPEC.md) is one MLP shared by the 128 slots, 9 -> 32 -> 16 -> 8
-> 1 with ReLU, giving one logit per slot; padded slots are pushed down by
1e6 through the mask: logits = mlp(obs) + (mask - 1) * 1e6.

slurp's contract for a policy model: inputs `obs` f32[1,128,9] and `mask`
f32[1,128], output `logits` f32[1,128]. `to_onnx` builds exactly that from
MatMul/Add/Relu/Squeeze, with no framework; `forward` computes the same in
NumPy. The Rust tests compare tract's output with `forward`'s; the trainer's
torch export follows the same contract.
"""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SLOTS, FEATURES = 128, 9
SIZES = [FEATURES, 32, 16, 8, 1]


def random_weights(seed):
    """Glorot-uniform weights and small biases, as a list of (W, b)."""
    rng = np.random.default_rng(seed)
    layers = []
    for n_in, n_out in zip(SIZES, SIZES[1:]):
        limit = np.sqrt(6.0 / (n_in + n_out))
        w = rng.uniform(-limit, limit, size=(n_in, n_out)).astype(np.float32)
        b = rng.uniform(-0.1, 0.1, size=(n_out,)).astype(np.float32)
        layers.append((w, b))
    return layers


def forward(layers, obs, mask):
    """Masked logits for obs [B,128,9] and mask [B,128], in float32."""
    h = obs.astype(np.float32)
    for i, (w, b) in enumerate(layers):
        h = h @ w + b
        if i < len(layers) - 1:
            h = np.maximum(h, 0.0)
    return h[..., 0] + (mask.astype(np.float32) - 1.0) * np.float32(1e6)


def to_onnx(layers, opset=13, observation=None):
    """The actor as ONNX; `observation` ("v2") is written as the metadata
    `slurp.observation`, which tells slurp what the model sees."""
    nodes, inits = [], []
    prev = "obs"
    for i, (w, b) in enumerate(layers):
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"]))
        nodes.append(helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"]))
        prev = f"a{i}"
        if i < len(layers) - 1:
            nodes.append(helper.make_node("Relu", [prev], [f"r{i}"]))
            prev = f"r{i}"
    inits += [
        numpy_helper.from_array(np.array([2], dtype=np.int64), "last"),
        numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one"),
        numpy_helper.from_array(np.array(1e6, dtype=np.float32), "big"),
    ]
    nodes += [
        helper.make_node("Squeeze", [prev, "last"], ["raw"]),
        helper.make_node("Sub", ["mask", "one"], ["off"]),
        helper.make_node("Mul", ["off", "big"], ["push"]),
        helper.make_node("Add", ["raw", "push"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes,
        "fair-actor",
        [
            helper.make_tensor_value_info("obs", TensorProto.FLOAT, [1, SLOTS, FEATURES]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, SLOTS]),
        ],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, SLOTS])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if observation:
        helper.set_model_props(model, {"slurp.observation": observation})
    onnx.checker.check_model(model)
    return model
