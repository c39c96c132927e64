"""Adds ALPHA times a fixed linear score of the features to one of a model's networks.

    # fair-v5's network without backfilling (the graph) leaning ALPHA = 3 toward the
    # fewest core-seconds asked for: -(f2 + f8), the estimate's and the width's logarithms
    # against the shown jobs' geometric means (features 2 and 8, fair/src/observe_v2.rs)
    python3 fair/trainer/blend.py stdlib/policies/fair-v5.onnx a3.onnx --alpha 3 --score area

The score is added as two hidden units, `ALPHA relu(s) - ALPHA relu(-s)`, so the network's
logit becomes its own plus `ALPHA s` and the model's form (one hidden layer) is kept; the
network keeps seeing what it saw. `--network` names which one: `graph` (the model's own: slurp's
model and real runs without backfilling, or with EASY where the model has no `slurp.easy`),
or a metadata key (`slurp.easy`, `slurp.committed`, `slurp.committed.easy`).

Scores (each feature's meaning in fair/src/observe_v2.rs; smaller is first under the heuristic
it leans toward): `area` -(f2 + f8), `short` -f2 (SJF's), `narrow` -f8, and `wide2`, `wide4`
-(f2 + 2 f8), -(f2 + 4 f8): F1 weighs the width far more than the estimate. This asks whether
a network fair to the worst user gives back its averages when it leans toward the rules that
keep averages low (stdlib/policies/MODEL_CARD.md, "Two levers that did not carry", 2026-12-04).

Needs the `onnx` Python package.
"""

import argparse
import json

import numpy as np
import onnx
from onnx import numpy_helper

from turns import carried, plus_score

# Zero-based feature indices: 1 is feature 2 (the estimate), 7 feature 8 (the width, v4 and v5).
SCORES = {
    "area": {1: -1.0, 7: -1.0},
    "short": {1: -1.0},
    "narrow": {7: -1.0},
    "wide2": {1: -1.0, 7: -2.0},
    "wide4": {1: -1.0, 7: -4.0},
}
KEYS = ("graph", "slurp.easy", "slurp.committed", "slurp.committed.easy")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--alpha", type=float, required=True, help="the score's weight")
    ap.add_argument("--score", choices=sorted(SCORES), default="area")
    ap.add_argument("--network", choices=KEYS, default="graph")
    args = ap.parse_args()
    model = onnx.load(args.model)
    props = {p.key: p for p in model.metadata_props}
    if args.network == "graph":
        init = {i.name: i for i in model.graph.initializer}
        missing = {"w0", "b0", "w1"} - set(init)
        if missing:
            raise SystemExit(f"{args.model}: its network is not one hidden layer (no {sorted(missing)})")
        arrays = [numpy_helper.to_array(init[n]).astype(np.float64) for n in ("w0", "b0", "w1")]
        blended = plus_score(*arrays, SCORES[args.score], args.alpha)
        for name, array in zip(("w0", "b0", "w1"), blended):
            init[name].CopyFrom(numpy_helper.from_array(array.astype(np.float32), name))
    else:
        if args.network not in props:
            raise SystemExit(f"{args.model}: no network {args.network}")
        w0, b0, w1, b1 = carried(args.model, props, args.network)
        w0, b0, w1 = plus_score(w0, b0, w1, SCORES[args.score], args.alpha)
        props[args.network].value = json.dumps([
            {"w": w0.ravel().tolist(), "b": b0.tolist()},
            {"w": w1.ravel().tolist(), "b": b1.tolist()},
        ])
    onnx.save(model, args.out)
    print(f"wrote {args.out}: {args.network} plus {args.alpha} x the {args.score} score")


if __name__ == "__main__":
    main()
