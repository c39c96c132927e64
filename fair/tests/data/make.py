"""Writes the test actor and NumPy's outputs for it (run from this folder):

    python3 make.py      # needs numpy and onnx

actor-test.onnx: the reference actor with seeded random weights.
actor-test.json: 8 random observations and masks (some slots padded) and
the logits NumPy computes for them, for tests/model.rs to compare with
tract's and with slurp's direct evaluator's. tanh-actor.onnx/.json: the same
for a network that is not the trainer's MLP (tract alone evaluates it). Bad
files for the rejection tests: not-onnx.onnx, wrong-shape.onnx.
"""

import json
import sys

import numpy as np

sys.path.insert(0, "../../trainer")
import onnx_actor as actor  # noqa: E402

layers = actor.random_weights(seed=7)
import onnx  # noqa: E402

onnx.save(actor.to_onnx(layers), "actor-test.onnx")
rng = np.random.default_rng(11)
cases = []
for i in range(8):
    obs = rng.uniform(0, 1, size=(1, 128, 9)).astype(np.float32)
    real = int(rng.integers(1, 129))
    mask = np.zeros((1, 128), dtype=np.float32)
    mask[0, :real] = 1.0
    logits = actor.forward(layers, obs, mask)
    cases.append({"obs": obs.ravel().tolist(), "mask": mask.ravel().tolist(), "logits": logits.ravel().tolist()})
json.dump(cases, open("actor-test.json", "w"))

with open("not-onnx.onnx", "w") as f:
    f.write("this is not a model\n")
# A network over 8 features: the wrong input shape.
bad = actor.SIZES
actor.SIZES = [8, 4, 1]
actor.FEATURES = 8
small = actor.random_weights(seed=1)
onnx.save(actor.to_onnx(small), "wrong-shape.onnx")

# Hand-set actors for the real-run tests: the logit is 10 x (bias + sign x one
# feature). narrowest-first: 1 - the processors feature; widest-first: the
# processors feature; calmest-user-first: the user's standing (feature 8, 1 for
# a user whose started tasks have the lowest mean slowdown or none started).
for name, feature, sign, bias in (("narrowest-first", 2, -1.0, 1.0), ("widest-first", 2, 1.0, 0.0),
                                  ("calmest-user-first", 7, 1.0, 0.0)):
    sizes = actor.SIZES = [9, 32, 16, 8, 1]
    hand = [(np.zeros((i, o), dtype=np.float32), np.zeros(o, dtype=np.float32)) for i, o in zip(sizes, sizes[1:])]
    hand[0][0][feature, 0], hand[0][1][0] = sign, bias
    hand[1][0][0, 0] = hand[2][0][0, 0] = 1.0
    hand[3][0][0, 0] = 10.0
    actor.FEATURES = 9
    onnx.save(actor.to_onnx(hand), name + ".onnx")
    with open(name + ".onnx.json", "w") as f:
        json.dump({"max_run": 3600.0, "max_procs": 8.0, "max_mem": 0.0, "max_user": 1.0,
                   "max_group": 0.0, "max_exe": 0.0}, f)

# A valid actor that is not the trainer's MLP (tanh, not ReLU): slurp must
# evaluate it with tract, not with its direct per-slot MLP. tanh-actor.json
# holds NumPy's logits for it, as actor-test.json does.
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

rng = np.random.default_rng(13)
w0 = rng.uniform(-1, 1, size=(9, 8)).astype(np.float32)
b0 = rng.uniform(-0.1, 0.1, size=(8,)).astype(np.float32)
w1 = rng.uniform(-1, 1, size=(8, 1)).astype(np.float32)
inits = [numpy_helper.from_array(a, n) for a, n in ((w0, "w0"), (b0, "b0"), (w1, "w1"))] + [
    numpy_helper.from_array(np.array([2], dtype=np.int64), "last"),
    numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one"),
    numpy_helper.from_array(np.array(1e6, dtype=np.float32), "big"),
]
nodes = [
    helper.make_node("MatMul", ["obs", "w0"], ["m0"]),
    helper.make_node("Add", ["m0", "b0"], ["a0"]),
    helper.make_node("Tanh", ["a0"], ["t0"]),
    helper.make_node("MatMul", ["t0", "w1"], ["m1"]),
    helper.make_node("Squeeze", ["m1", "last"], ["raw"]),
    helper.make_node("Sub", ["mask", "one"], ["off"]),
    helper.make_node("Mul", ["off", "big"], ["push"]),
    helper.make_node("Add", ["raw", "push"], ["logits"]),
]
graph = helper.make_graph(
    nodes, "tanh-actor",
    [helper.make_tensor_value_info("obs", TensorProto.FLOAT, [1, 128, 9]),
     helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 128])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 128])], inits)
tanh = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
onnx.checker.check_model(tanh)
onnx.save(tanh, "tanh-actor.onnx")
cases = []
for i in range(4):
    obs = rng.uniform(0, 1, size=(1, 128, 9)).astype(np.float32)
    mask = np.zeros((1, 128), dtype=np.float32)
    mask[0, :int(rng.integers(1, 129))] = 1.0
    logits = (np.tanh(obs @ w0 + b0) @ w1)[..., 0] + (mask - 1.0) * np.float32(1e6)
    cases.append({"obs": obs.ravel().tolist(), "mask": mask.ravel().tolist(), "logits": logits.ravel().tolist()})
json.dump(cases, open("tanh-actor.json", "w"))

# v2 (site-independent observation) actors: the metadata slurp.observation
# says what they see, so no normalisers travel with them. actor-v2.onnx:
# random weights, for the scale-invariance test; shortest-v2.onnx: prefers
# short estimates against the queue (feature 2), a stand-in SJF.
onnx.save(actor.to_onnx(actor.random_weights(seed=21), observation="v2"), "actor-v2.onnx")
sizes = actor.SIZES = [9, 32, 16, 8, 1]
hand = [(np.zeros((i, o), dtype=np.float32), np.zeros(o, dtype=np.float32)) for i, o in zip(sizes, sizes[1:])]
hand[0][0][1, 0], hand[0][1][0] = -1.0, 1.0
hand[1][0][0, 0] = hand[2][0][0, 0] = 1.0
hand[3][0][0, 0] = 10.0
onnx.save(actor.to_onnx(hand, observation="v2"), "shortest-v2.onnx")
