"""Names the heuristics a model's choices are checked against (slurp's lookahead).

    python3 fair/trainer/lookahead.py IN.onnx OUT.onnx --rules fairshare,f1 [--margin 0.1]

Writes IN with the metadata `slurp.lookahead` (the heuristics: fcfs, sjf, f1, fairshare) and
`slurp.lookahead.margin` (how much lower, as a fraction, a heuristic's order must project the
worst user's mean bounded slowdown to be taken instead of the network's choice; slurp takes
0.1 when it is absent). `--rules ''` removes both. Everything else in the model is kept, byte
for byte. See fair/src/lookahead.rs.
"""

import argparse

import onnx

from turns import put

KEYS = ("slurp.lookahead", "slurp.lookahead.margin")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--rules", required=True, help="comma-separated: fcfs, sjf, f1, fairshare ('' for none)")
    ap.add_argument("--margin", type=float)
    args = ap.parse_args()
    model = onnx.load(args.model)
    kept = [p for p in model.metadata_props if p.key not in KEYS]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    if args.rules:
        props = {}
        put(model, props, KEYS[0], args.rules)
        if args.margin is not None:
            put(model, props, KEYS[1], repr(args.margin))
    onnx.save(model, args.out)


if __name__ == "__main__":
    main()
