"""Ranks kept v2 models on busy windows of the workloads they were trained
on (never on the judging ones), with `slurp policy judge --json`: per
model, the cells where it is at least 1% below the fairest heuristic's
worst user with its average within 1.1x the best, then the mean ratio of
its worst user to the fairest heuristic's.

    python3 fair/trainer/choose_v2.py --slurp target/release/slurp \
        --trace ricc-before-sep.swf:3 --trace gen:small:11 runs/v2/model-*.onnx

A trace may end in `:X`, the busy floor (`--min-bsld X`) of its windows.
The rule is `slurp_fair::judge::rank`'s, the one `slurp policy train` ranks
its kept models by.
"""

import argparse
import json
import subprocess


def cells(slurp, model, trace, samples, seed):
    path, floor = trace, "0"
    if trace.count(":") and trace.rsplit(":", 1)[1].replace(".", "").isdigit() and not trace.startswith("gen:"):
        path, floor = trace.rsplit(":", 1)
    out = subprocess.run([slurp, "policy", "judge", model, path, "--samples", str(samples), "--len", "1024",
                          "--seed", str(seed), "--min-bsld", floor, "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["cells"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--slurp", default="slurp")
    ap.add_argument("--trace", action="append", required=True)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--seed", type=int, default=4242)
    ap.add_argument("models", nargs="+")
    args = ap.parse_args()
    rows = []
    for model in args.models:
        good, ratios = 0, []
        for trace in args.trace:
            for c in cells(args.slurp, model, trace, args.samples, args.seed):
                fairest = min(r["worst_user_bounded_slowdown"] for r in c["rivals"])
                best_avg = min(r["avg_bounded_slowdown"] for r in c["rivals"])
                w = c["learned"]["worst_user_bounded_slowdown"] / max(fairest, 1e-9)
                a = c["learned"]["avg_bounded_slowdown"] / max(best_avg, 1e-9)
                good += w <= 0.99 and a <= 1.1
                ratios.append(w)
        rows.append((good, sum(ratios) / len(ratios), model))
        print("{:3d} cells  worst/fairest {:.4f}  {}".format(*rows[-1]), flush=True)
    rows.sort(key=lambda r: (-r[0], r[1]))
    print("best:", rows[0][2])


if __name__ == "__main__":
    main()
