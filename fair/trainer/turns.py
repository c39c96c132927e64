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

Needs the `onnx` Python package.
"""

import argparse
import json

import numpy as np
import onnx

FEATURES = 9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", help="a v4 model carrying a network for committed choices")
    ap.add_argument("out")
    ap.add_argument("--beta", type=float, default=30.0,
                    help="the weight of fairshare's score against the network's own logits")
    args = ap.parse_args()
    model = onnx.load(args.model)
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
    w0[0, :] = 0.0
    score = np.zeros(FEATURES)
    score[0], score[3] = 10.0, 1.0
    w0 = np.concatenate([w0, score[:, None], -score[:, None]], 1)
    b0 = np.concatenate([b0, [0.0, 0.0]])
    w1 = np.concatenate([w1, [[args.beta], [-args.beta]]], 0)
    props["slurp.committed"].value = json.dumps([
        {"w": w0.ravel().tolist(), "b": b0.tolist()},
        {"w": w1.ravel().tolist(), "b": b1.tolist()},
    ])
    if "slurp.committed.observation" in props:
        props["slurp.committed.observation"].value = "v5"
    else:
        p = model.metadata_props.add()
        p.key, p.value = "slurp.committed.observation", "v5"
    onnx.save(model, args.out)
    print(f"wrote {args.out}: committed network 9 -> {w0.shape[1]} -> 1 seeing v5, "
          f"fairshare's score at weight {args.beta}")


if __name__ == "__main__":
    main()
