"""Chooses among a run's kept models without looking at the judging windows.

    python3 fair/trainer/choose.py --slurp target/release/slurp \
        --trace RICC-2010-2.swf.xz runs/ricc/model-*.onnx

Each model plays 200 busy windows (FCFS bounded slowdown at least 3) drawn with a seed of
its own (4242), none sharing a job with the held-out jobs (`--hold-out`, the trainer's),
taking its best slot at each decision, and is scored by its mean gain on F1's worst-user
bounded slowdown over the same windows. Prints one line per model, best last, and the best
model's path on the last line.
"""

import argparse
import re
import subprocess
import tempfile


def gain(args, model):
    with tempfile.TemporaryDirectory() as out:
        run = subprocess.run(
            [args.slurp, "policy", "rollout", "--model", model, "--trace", args.trace, "--greedy",
             "--min-bsld", "3", "--trajectories", str(args.windows), "--seed", str(args.seed),
             "--hold-out", args.hold_out, "--baseline", "f1", "--out", out],
            check=True, capture_output=True, text=True)
    found = re.search(r"mean reward (-?[0-9.]+)", run.stderr)
    if not found:
        raise SystemExit("no reward in: " + run.stderr)
    return float(found.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--slurp", default="slurp")
    ap.add_argument("--trace", required=True)
    ap.add_argument("--windows", type=int, default=200)
    ap.add_argument("--seed", type=int, default=4242)
    ap.add_argument("--hold-out", required=True, metavar="FROM..[TO]|SEED:COUNT,...")
    ap.add_argument("models", nargs="+")
    args = ap.parse_args()
    scored = sorted((gain(args, m), m) for m in args.models)
    for g, m in scored:
        print("{:+.3f}  {}".format(g, m))
    print(scored[-1][1])


if __name__ == "__main__":
    main()
