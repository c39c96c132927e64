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
`--network committed-easy` gives the score to the model's network for the reference model's
choices under EASY (`slurp.committed.easy`; its network for committed choices where it has
none for EASY alone).

A network that already sees v5 keeps its feature-1 weights (they weigh the user's place in
turns already); one that saw v4 has them zeroed, as above.

`--within area` changes which of the first user's jobs the score starts: `10·f1 − (f2 + f8)`,
the fewest core-seconds asked for (features 2 and 8 are the logarithms of the estimate and the
width against the shown jobs' geometric means), where `fairshare` starts the earliest. Fair-share
turns with that order inside a user is one of the hand-written rules of
`fair/examples/turns_within.rs` (stdlib/policies/MODEL_CARD.md, v13). `--rescue X` adds that
example's rescue (a job whose slowdown so far is above X first), and `--alone` leaves the
network's own units out, so that the rule alone decides.

Needs the `onnx` Python package.
"""

import argparse
import json

import numpy as np
import onnx
from onnx import numpy_helper

FEATURES = 9
COMMITTED = ("slurp.committed", "slurp.committed.easy")
# The score through v5 (features 1-9, zero-based here) for each order inside the first user's
# jobs: feature 1 (the place in turns, 1 for the first user, at most 1/2 for any other) at 10
# outweighs what the others add, ±2 at most.
# A rescued job's lead over the score's: at twice the bound already 100, the most the score
# adds at weight 10.
RESCUE_WEIGHT = 1000.0
WITHIN = {
    "earliest": {0: 10.0, 3: 1.0},
    "area": {0: 10.0, 1: -1.0, 7: -1.0},
}


def put(model, props, key, value):
    """Sets the model's metadata entry `key`, adding it when it has none."""
    if key not in props:
        props[key] = model.metadata_props.add()
        props[key].key = key
    props[key].value = value


def carried(path, props, key):
    """The arrays (w0, b0, w1, b1) of the one-hidden-layer network a model carries under the
    metadata `key` (its `props`, read from `path`)."""
    layers = json.loads(props[key].value)
    if len(layers) != 2:
        raise SystemExit(f"{path}: its network {key} has {len(layers) - 1} hidden layers; "
                         "this adds to a network of one")
    w0 = np.array(layers[0]["w"], dtype=np.float64).reshape(FEATURES, -1)
    b0 = np.array(layers[0]["b"], dtype=np.float64)
    w1 = np.array(layers[1]["w"], dtype=np.float64).reshape(-1, 1)
    b1 = np.array(layers[1]["b"], dtype=np.float64)
    return w0, b0, w1, b1


def plus_score(w0, b0, w1, score, weight):
    """The layers (one hidden) with `weight x s` added to the logit as two more hidden units,
    `relu(s) - relu(-s)`, where `s` is the linear score `score` ({feature index: weight})."""
    s = np.zeros(FEATURES)
    for i, w in score.items():
        s[i] = w
    w0 = np.concatenate([w0, s[:, None], -s[:, None]], 1)
    b0 = np.concatenate([b0, [0.0, 0.0]])
    w1 = np.concatenate([w1, [[weight], [-weight]]], 0)
    return w0, b0, w1


def with_score(w0, b0, w1, beta, within="earliest", saw="v4", rescue=None, alone=False):
    """The layers plus `beta x` the score as two more units, feature 1's weights zeroed where the
    network saw v4's feature 1 (the width's share of the instance); with `rescue` X one more unit,
    `RESCUE_WEIGHT x relu(f3 - log10(X)/3)`: above X, a job's slowdown so far (feature 3 is its
    logarithm over 3, at most 1) outweighs the rest; with `alone` the network's own units weigh
    nothing."""
    w0 = w0.copy()
    w1 = w1 * (0.0 if alone else 1.0)
    if saw != "v5":
        w0[0, :] = 0.0
    w0, b0, w1 = plus_score(w0, b0, w1, WITHIN[within], beta)
    if rescue is not None:
        unit = np.zeros(FEATURES)
        unit[2] = 1.0
        w0 = np.concatenate([w0, unit[:, None]], 1)
        b0 = np.concatenate([b0, [-np.log10(rescue) / 3.0]])
        w1 = np.concatenate([w1, [[RESCUE_WEIGHT]]], 0)
    return w0, b0, w1


def slurp_network(model, beta, easy_only, within, rescue=None, alone=False):
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
    w0, b0, w1 = with_score(*arrays, beta, within, seen, rescue, alone)
    b1 = numpy_helper.to_array(init["b1"]).astype(np.float64) * (0.0 if alone else 1.0)
    if easy_only:
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
    for name, array in (("w0", w0), ("b0", b0), ("w1", w1), ("b1", b1)):
        init[name].CopyFrom(numpy_helper.from_array(array.astype(np.float32), name))
    return w0.shape[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", help="a v4 model carrying a network for committed choices")
    ap.add_argument("out")
    ap.add_argument("--beta", type=float, default=30.0,
                    help="the weight of fairshare's score against the network's own logits")
    ap.add_argument("--network", choices=("committed", "committed-easy", "slurp", "slurp-easy"),
                    default="committed",
                    help="which network gets the score: the one for committed choices "
                         "(the reference model), the one for them under EASY, the model's own "
                         "(slurp's model, real runs), or a copy of it for slurp's model under "
                         "EASY alone")
    ap.add_argument("--within", choices=sorted(WITHIN), default="earliest",
                    help="which of the first user's jobs the score starts: the earliest "
                         "(fairshare's choice) or the fewest core-seconds asked for")
    ap.add_argument("--rescue", type=float, metavar="X",
                    help="a job whose bounded slowdown so far is above X goes first, the one "
                         "furthest behind first")
    ap.add_argument("--alone", action="store_true",
                    help="the score (and the rescue) alone decide: the network's own units "
                         "weigh nothing")
    args = ap.parse_args()
    if args.rescue is not None and not args.rescue > 1.0:
        ap.error(f"--rescue {args.rescue}: give a bounded slowdown above 1, such as 100")
    model = onnx.load(args.model)
    if args.network in ("slurp", "slurp-easy"):
        easy = args.network == "slurp-easy"
        width = slurp_network(model, args.beta, easy, args.within, args.rescue, args.alone)
        onnx.save(model, args.out)
        which = "its network for slurp's model under EASY" if easy else "its own network"
        print(f"wrote {args.out}: {which} 9 -> {width} -> 1 seeing v5, "
              f"the score ({args.within} first) at weight {args.beta}")
        return
    props = {p.key: p for p in model.metadata_props}
    if "slurp.committed" not in props:
        raise SystemExit(f"{args.model}: no network for committed choices (slurp.committed)")
    key = "slurp.committed"
    if args.network == "committed-easy" and "slurp.committed.easy" in props:
        key = "slurp.committed.easy"
    saw = props.get(key + ".observation", props["slurp.observation"]).value
    if saw not in ("v4", "v5"):
        raise SystemExit(f"{args.model}: {key} sees {saw}; its feature 1 must be v4's or v5's")
    w0, b0, w1, b1 = carried(args.model, props, key)
    b1 = b1 * (0.0 if args.alone else 1.0)
    w0, b0, w1 = with_score(w0, b0, w1, args.beta, args.within, saw, args.rescue, args.alone)
    out = "slurp.committed.easy" if args.network == "committed-easy" else "slurp.committed"
    if out != key and key + ".observation" not in props:
        # The network for committed choices keeps seeing what it saw.
        put(model, props, key + ".observation", saw)
    put(model, props, out, json.dumps([
        {"w": w0.ravel().tolist(), "b": b0.tolist()},
        {"w": w1.ravel().tolist(), "b": b1.tolist()},
    ]))
    put(model, props, out + ".observation", "v5")
    onnx.save(model, args.out)
    print(f"wrote {args.out}: {out} 9 -> {w0.shape[1]} -> 1 seeing v5, "
          f"the score ({args.within} first) at weight {args.beta}")


if __name__ == "__main__":
    main()
