"""Writes a model whose network NETWORK lies a fraction ALPHA of the way from model A's to B's.

    # fair-v5 with its network for slurp's model without backfilling (the graph) a third of
    # the way toward v19v's, a search that started from it and kept RICC's averages
    python3 fair/trainer/soup.py stdlib/policies/fair-v5.onnx fair/trainer/runs/v19-gain-cap.onnx \
        soup.onnx --alpha 0.33

Every weight of the network becomes `(1 - ALPHA) a + ALPHA b` ("model soup", weight-space
interpolation); A's other networks are kept as they are. It makes sense only where B was
searched from A (`slurp policy train --init A`, a small `--sigma`): their hidden units are then
the same units, moved a little. Both must have the network's shape and see the same
observation; where not, it says so and writes nothing.

`--network` names which: `graph` (the model's own: slurp's model and real runs without
backfilling), or a metadata key (`slurp.easy`, `slurp.committed`, `slurp.committed.easy`).

Needs the `onnx` Python package.
"""

import argparse
import json

import numpy as np
import onnx
from onnx import numpy_helper

KEYS = ("graph", "slurp.easy", "slurp.committed", "slurp.committed.easy")
GRAPH = ("w0", "b0", "w1", "b1")


def sight(props, network, path):
    """The observation a network sees: its own `KEY.observation`, else the model's."""
    own = props.get(f"{network}.observation") if network != "graph" else None
    own = own or props.get("slurp.observation")
    if own is None:
        raise SystemExit(f"{path}: no slurp.observation (a v1 model, or not one of slurp's)")
    return own.value


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", help="the model written out, but for one network")
    ap.add_argument("b", help="a model searched from A")
    ap.add_argument("out")
    ap.add_argument("--alpha", type=float, required=True, help="0 gives A's network, 1 B's")
    ap.add_argument("--network", choices=KEYS, default="graph")
    args = ap.parse_args()
    if not 0 <= args.alpha <= 1:
        ap.error(f"--alpha {args.alpha}: a soup lies between A and B, so 0 to 1")
    a, b = onnx.load(args.a), onnx.load(args.b)
    pa = {p.key: p for p in a.metadata_props}
    pb = {p.key: p for p in b.metadata_props}
    if args.network != "graph" and not (args.network in pa and args.network in pb):
        raise SystemExit(f"both models must carry the network {args.network}")
    sa, sb = sight(pa, args.network, args.a), sight(pb, args.network, args.b)
    if sa != sb:
        raise SystemExit(f"{args.network}: {args.a} sees {sa}, {args.b} sees {sb}")

    def mix(x, y):
        return (1 - args.alpha) * x + args.alpha * y

    if args.network == "graph":
        ia = {i.name: i for i in a.graph.initializer}
        ib = {i.name: i for i in b.graph.initializer}
        for path, names in ((args.a, ia), (args.b, ib)):
            if missing := [n for n in GRAPH if n not in names]:
                raise SystemExit(f"{path}: its graph has no {', '.join(missing)} (not a one-layer network)")
        for name in GRAPH:
            x, y = (numpy_helper.to_array(i[name]).astype(np.float64) for i in (ia, ib))
            if x.shape != y.shape:
                raise SystemExit(f"graph: {name} is {x.shape} in A and {y.shape} in B")
            ia[name].CopyFrom(numpy_helper.from_array(mix(x, y).astype(np.float32), name))
    else:
        la, lb = (json.loads(p[args.network].value) for p in (pa, pb))
        if [(len(l["w"]), len(l["b"])) for l in la] != [(len(l["w"]), len(l["b"])) for l in lb]:
            raise SystemExit(f"{args.network}: the two networks' layers differ in shape")
        pa[args.network].value = json.dumps([
            {k: mix(np.array(x[k]), np.array(y[k])).tolist() for k in ("w", "b")}
            for x, y in zip(la, lb)
        ])
    trained = pa.get("slurp.trained")
    if trained is not None:
        trained.value += (f"; its network {args.network} then {args.alpha} of the way toward "
                          f"{args.b}'s (fair/trainer/soup.py)")
    onnx.save(a, args.out)
    print(f"wrote {args.out}: {args.network} {args.alpha} of the way from {args.a} to {args.b}")


if __name__ == "__main__":
    main()
