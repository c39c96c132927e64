"""Averages the logits of several networks into one, carried by a model (one source: a copy).

    # v6-modes-e1 with, for EASY, the mean of s5's shared network and its own EASY one
    python3 fair/trainer/ensemble.py fair/trainer/runs/v6-modes-e1.onnx ens.onnx \
        slurp.committed.easy \
        fair/trainer/runs/v5-turns-s5.onnx:slurp.committed \
        fair/trainer/runs/v6-modes-e1.onnx:slurp.committed.easy

    # fair-v5: fair-v4 with v7's network for the reference model under EASY and e20's for
    # slurp's model under EASY, each copied whole (one source at weight 1)
    python3 fair/trainer/ensemble.py stdlib/policies/fair-v4.onnx v5a.onnx slurp.committed.easy \
        fair/trainer/runs/v7-validated-e1.onnx:slurp.committed.easy:1
    python3 fair/trainer/ensemble.py v5a.onnx fair-v5.onnx slurp.easy \
        fair/trainer/runs/v15-e20.onnx:slurp.easy:1 \
        --trained "fair-v4's networks without backfilling, ..."

    # fair-v10: fair-v9 whose network for the reference model under EASY sees v9 (weights kept)
    python3 fair/trainer/ensemble.py stdlib/policies/fair-v9.onnx fair-v10.onnx \
        slurp.committed.easy stdlib/policies/fair-v9.onnx:slurp.committed.easy:1 \
        --observation v9 --trained "fair-v10: fair-v9 with ..."

Each source is `MODEL.onnx:KEY[:WEIGHT]`: the network a model carries under the ONNX metadata
KEY (`slurp.committed`, or `slurp.committed.easy` for EASY alone, or `slurp.easy` for slurp's
model and real runs under EASY; fair/src/model.rs), one hidden
layer, all seeing the same observation (the KEY`.observation` entry, else the model's own). The result is one network
of the same form: the sources' hidden units side by side and their output weights times WEIGHT
(default: 1/number of sources), so its logit is the weighted sum of theirs. It is written into
a copy of BASE under KEY (with its observation); BASE's other networks are kept.
`--observation` makes the result see another observation of the same nine features with its
weights unchanged: one whose features the sources' is a start of (v5 → v9, where v9 reads v5's
feature 3 with the user's predicted runs in place of estimates; fair/src/observe_v2.rs).

Searches from different seeds or for different cells find different networks of similar loss;
their mean is a way to ask whether what they share generalises better than any one of them (a
question for validation cells, never the held-out ones). Needs the `onnx` Python package.
"""

import argparse
import json

import numpy as np
import onnx

from turns import put

FEATURES = 9


def carried(path, key):
    model = onnx.load(path)
    props = {p.key: p.value for p in model.metadata_props}
    if key not in props:
        raise SystemExit(f"{path}: carries no `{key}`")
    # Without an observation of its own, a network sees its model's (fair/src/model.rs).
    return json.loads(props[key]), props.get(key + ".observation", props.get("slurp.observation"))


def mean(parts):
    w0s, b0s, w1s, b1 = [], [], [], 0.0
    for layers, weight in parts:
        if len(layers) != 2:
            raise SystemExit(f"a network of {len(layers) - 1} hidden layers; this sums networks of one")
        w0s.append(np.array(layers[0]["w"], dtype=np.float64).reshape(FEATURES, -1))
        b0s.append(np.array(layers[0]["b"], dtype=np.float64))
        w1s.append(np.array(layers[1]["w"], dtype=np.float64).reshape(-1, 1) * weight)
        b1 += layers[1]["b"][0] * weight
    return [
        {"w": np.concatenate(w0s, 1).ravel().tolist(), "b": np.concatenate(b0s).tolist()},
        {"w": np.concatenate(w1s, 0).ravel().tolist(), "b": [b1]},
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", help="the model whose copy carries the result")
    ap.add_argument("out")
    ap.add_argument("key", choices=["slurp.committed", "slurp.committed.easy", "slurp.easy"])
    ap.add_argument("sources", nargs="+", help="MODEL.onnx:KEY[:WEIGHT]")
    ap.add_argument("--trained", help="the result's provenance (`slurp.trained`, which `slurp policy "
                    "judge` and the model card quote) in place of BASE's")
    # slurp's site-independent observations (fair/src/model.rs, `Sight`; there is no v6).
    ap.add_argument("--observation", choices=["v2", "v3", "v4", "v5", "v7", "v8", "v9", "v10"],
                    help="the observation the result sees in place of its sources' (weights unchanged)")
    args = ap.parse_args()
    parts, seeing = [], None
    for spec in args.sources:
        path, key, *weight = spec.split(":")
        layers, sight = carried(path, key)
        if seeing is not None and sight != seeing:
            raise SystemExit(f"{spec} sees {sight}, the others {seeing}: their logits do not add up")
        seeing = sight
        parts.append((layers, float(weight[0]) if weight else None))
    parts = [(layers, 1.0 / len(parts) if w is None else w) for layers, w in parts]
    seeing = args.observation or seeing
    model = onnx.load(args.base)
    props = {p.key: p for p in model.metadata_props}
    # The observation is written even where the sources' models left it implied: BASE may see
    # another one (a v4 network written into a v5 model).
    for key, value in [(args.key, json.dumps(mean(parts))), (args.key + ".observation", seeing)]:
        put(model, props, key, value)
    if args.trained:
        put(model, props, "slurp.trained", args.trained)
    onnx.save(model, args.out)


if __name__ == "__main__":
    main()
