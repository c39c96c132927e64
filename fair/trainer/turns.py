"""Gives a model's network for committed choices `fairshare`'s rule through the v5 observation.

    python3 fair/trainer/turns.py stdlib/policies/fair-v4.onnx start.onnx --beta 30

Through v5 (fair/src/observe_v2.rs) feature 1 is a job's user's place in fair-share turns
among the shown users (1 for the first) and feature 4 its wait against the shown jobs': the
score `10·f1 + f4` starts the first user's earliest job, `fairshare`'s choice, to the digit
(fair/tests/observe_v5.rs). This writes MODEL with its network for committed choices (the
ONNX metadata `slurp.committed`, one hidden layer) seeing v5: that network's own units with
their feature-1 weights zeroed (v4's feature 1, the width's share of the instance, is gone;
feature 8 keeps the widths' order), plus `BETA` times that score as two more hidden units
(`relu(s) − relu(−s)`). The model's own network, for slurp's model and real runs, is kept
as it is, seeing what it saw. The result is a start for `slurp policy train --init OUT
--sim-model reference` (which then searches the committed network through v5).

`--network slurp` does the same to the model's own network, the one slurp's model and every
real run use (the ONNX graph `obs -> MatMul w0 -> Add b0 -> Relu -> MatMul w1 -> Add b1`):
the model then sees v5, and its networks for committed choices keep seeing what they saw
(their `.observation` entries are written where they relied on the model's).
`--network slurp-easy` writes that network with the score as the model's network for slurp's
model under EASY alone (`slurp.easy`, seeing v5; real `+easy` runs use it), and leaves the
model's own, which then serves only runs without backfilling, as it is.

Needs the `onnx` Python package.
"""

import argparse
import json

import numpy as np
import onnx
from onnx import numpy_helper

FEATURES = 9
COMMITTED = ("slurp.committed", "slurp.committed.easy")


def put(model, props, key, value):
    """Sets the model's metadata entry `key`, adding it when it has none."""
    if key not in props:
        props[key] = model.metadata_props.add()
        props[key].key = key
    props[key].value = value


def with_score(w0, b0, w1, beta):
    """The layers with feature 1's weights zeroed and `beta x (10 f1 + f4)` as two more units."""
    w0 = w0.copy()
    w0[0, :] = 0.0
    score = np.zeros(FEATURES)
    score[0], score[3] = 10.0, 1.0
    w0 = np.concatenate([w0, score[:, None], -score[:, None]], 1)
    b0 = np.concatenate([b0, [0.0, 0.0]])
    w1 = np.concatenate([w1, [[beta], [-beta]]], 0)
    return w0, b0, w1


def slurp_network(model, beta, easy_only):
    """Gives the model's own network the score (or writes it so as its network for slurp's
    model under EASY); returns its new hidden width."""
    props = {p.key: p for p in model.metadata_props}
    seen = props["slurp.observation"].value
    if seen not in ("v4", "v5"):
        raise SystemExit(f"the model sees {seen}; its feature 1 must be v4's or v5's")
    init = {i.name: i for i in model.graph.initializer}
    missing = {"w0", "b0", "w1", "b1"} - set(init)
    if missing:
        raise SystemExit(f"the model's network is not one hidden layer (no {sorted(missing)})")
    arrays = [numpy_helper.to_array(init[name]).astype(np.float64) for name in ("w0", "b0", "w1")]
    w0, b0, w1 = with_score(*arrays, beta)
    if easy_only:
        b1 = numpy_helper.to_array(init["b1"]).astype(np.float64)
        put(model, props, "slurp.easy", json.dumps([
            {"w": w0.ravel().tolist(), "b": b0.tolist()},
            {"w": w1.ravel().tolist(), "b": b1.tolist()},
        ]))
        put(model, props, "slurp.easy.observation", "v5")
        return w0.shape[1]
    for key in COMMITTED + ("slurp.easy",):
        if key in props and key + ".observation" not in props:
            put(model, props, key + ".observation", seen)
    props["slurp.observation"].value = "v5"
    for name, array in (("w0", w0), ("b0", b0), ("w1", w1)):
        init[name].CopyFrom(numpy_helper.from_array(array.astype(np.float32), name))
    return w0.shape[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", help="a v4 model carrying a network for committed choices")
    ap.add_argument("out")
    ap.add_argument("--beta", type=float, default=30.0,
                    help="the weight of fairshare's score against the network's own logits")
    ap.add_argument("--network", choices=("committed", "slurp", "slurp-easy"),
                    default="committed",
                    help="which network gets the score: the one for committed choices "
                         "(the reference model), the model's own (slurp's model, real runs), "
                         "or a copy of it for slurp's model under EASY alone")
    args = ap.parse_args()
    model = onnx.load(args.model)
    if args.network in ("slurp", "slurp-easy"):
        easy = args.network == "slurp-easy"
        width = slurp_network(model, args.beta, easy)
        onnx.save(model, args.out)
        which = "its network for slurp's model under EASY" if easy else "its own network"
        print(f"wrote {args.out}: {which} 9 -> {width} -> 1 seeing v5, "
              f"fairshare's score at weight {args.beta}")
        return
    props = {p.key: p for p in model.metadata_props}
    if "slurp.committed" not in props:
        raise SystemExit(f"{args.model}: no network for committed choices (slurp.committed)")
    layers = json.loads(props["slurp.committed"].value)
    if len(layers) != 2:
        raise SystemExit(f"{args.model}: its committed network has {len(layers) - 1} hidden "
                         "layers; this adds to a network of one")
    w0 = np.array(layers[0]["w"], dtype=np.float64).reshape(FEATURES, -1)
    b0 = np.array(layers[0]["b"], dtype=np.float64)
    w1 = np.array(layers[1]["w"], dtype=np.float64).reshape(-1, 1)
    b1 = np.array(layers[1]["b"], dtype=np.float64)
    w0, b0, w1 = with_score(w0, b0, w1, args.beta)
    props["slurp.committed"].value = json.dumps([
        {"w": w0.ravel().tolist(), "b": b0.tolist()},
        {"w": w1.ravel().tolist(), "b": b1.tolist()},
    ])
    put(model, props, "slurp.committed.observation", "v5")
    onnx.save(model, args.out)
    print(f"wrote {args.out}: committed network 9 -> {w0.shape[1]} -> 1 seeing v5, "
          f"fairshare's score at weight {args.beta}")


if __name__ == "__main__":
    main()
