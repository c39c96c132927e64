"""Judges models on long replays: months of a trace in one run, where a backlog can build up.

    python3 fair/trainer/long.py --slurp target/release/slurp --traces ../shared/traces \
        --set ricc-training v11=stdlib/policies/fair-v11.onnx

`slurp policy judge` (and `cells.py`) replays windows of 1,024 jobs from an empty machine, as
RLScheduler's judging does: on RICC such a window spans hours, so a user's usage never builds up
over weeks and no backlog lasts longer than the window. A site that replays its own trace whole
sees both. Each cell here is one `slurp sim --json` replay of a long stretch, in one simulation
model, with or without EASY, by FCFS, SJF, F1, `fairshare` and each model:

- `ricc-training`: RICC's jobs 0–320,000 (the span every built-in model was trained and chosen
  on) in four stretches of 80,000 jobs, each about five weeks.
- `ricc-held-out`: RICC's jobs 320,000 to the end (its last four weeks), in one stretch. Judge a
  model here once, after it is chosen.
- `ricc-whole`: all of RICC's five months in one replay (held-out weeks included).
- `generated`: each generated family at `--seeds` with `--jobs` jobs (30,000 by default: weeks
  to months of each machine), whole.
- `deep`: the `deep` family (RICC's machine, serial share and estimates of days, load 0.8 in surges
  of days) at `--seeds` with `--jobs` jobs, whole: backlogs of weeks on workloads no model saw.
- `archive`: NASA-iPSC, lublin_256 and lublin-aaroh, whole.

`slurp policy judge MODEL TRACE --stretches N` judges one model the same way without Python,
each cell the mean over N consecutive stretches (both simulation models at once); this script
keeps a cell a stretch and sets several models side by side.

Each row is a cell and its fairest heuristic; each model's column is its worst user's bounded
slowdown over the fairest heuristic's, then its average over the best heuristic's. The counts
are the check's: won (worst user at least 1% below every heuristic's), within 1% of the
fairest, average within 1.1x the best. A cell is one replay, not a mean over 50 windows: one
backlog can swing it, so read several before concluding.
"""

import argparse
import json
import math
import os
import subprocess
import sys

FAMILIES = ("small", "mid", "large", "saturated", "quiet")
HEURISTICS = ("fcfs", "sjf", "f1", "fairshare")
RICC = "RICC-2010-2.swf.xz"


def cells(args):
    """(label, trace, window or None) of the set."""
    if args.set == "ricc-training":
        return [(f"RICC {s}:80000", RICC, f"{s}:80000") for s in (0, 80000, 160000, 240000)]
    if args.set == "ricc-held-out":
        return [("RICC 320000:", RICC, "320000:127784")]
    if args.set == "ricc-whole":
        return [("RICC whole", RICC, None)]
    if args.set == "archive":
        return [(t, t, None) for t in ("NASA-iPSC-1993-3.1-cln.swf", "lublin_256.swf", "lublin-aaroh.swf")]
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.set == "deep":
        return [(f"gen:deep:{s}:{args.jobs}", f"gen:deep:{s}:{args.jobs}", None) for s in seeds]
    return [(f"gen:{f}:{s}:{args.jobs}", f"gen:{f}:{s}:{args.jobs}", None) for f in FAMILIES for s in seeds]


def replay(args, trace, window, easy, models):
    """Each policy's (worst user's, average) bounded slowdown on one stretch."""
    plus = "+easy" if easy else ""
    policies = [h + plus for h in HEURISTICS] + [f"fair:{path}{plus}" for _, path in models]
    argv = [args.slurp, "sim", trace, "--model", args.model, "--policy", ",".join(policies), "--json"]
    if window:
        argv += ["--window", window]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=args.traces)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        sys.exit(done.returncode)
    out = {}
    for p in json.loads(done.stdout)["policies"]:
        s = p["summary"]
        # slurp names FCFS with EASY `easy`.
        name = "fcfs+easy" if p["policy"] == "easy" else p["policy"]
        out[name] = (s["worst_user_bounded_slowdown"], s["avg_bounded_slowdown"])
    return [out[p] for p in policies[: len(HEURISTICS)]], [out[p] for p in policies[len(HEURISTICS):]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slurp", default="target/release/slurp")
    ap.add_argument("--traces", default="../shared/traces", help="where the trace files are")
    ap.add_argument("--set", choices=["ricc-training", "ricc-held-out", "ricc-whole", "generated", "deep", "archive"], required=True)
    ap.add_argument("--seeds", default="740,741,742", help="the generated families' seeds, for `--set generated` or `deep`")
    ap.add_argument("--jobs", type=int, default=30000, help="jobs of each generated trace")
    ap.add_argument("--model", choices=["slurp", "reference"], default="slurp",
                    help="the simulation model (the reference model's whole-node queue on RICC grows "
                         "to tens of thousands of jobs: tens of seconds a stretch)")
    ap.add_argument("--backfill", choices=["easy", "none", "both"], default="both")
    ap.add_argument("models", nargs="+", help="MODEL.onnx or NAME=MODEL.onnx")
    args = ap.parse_args()
    args.slurp = os.path.abspath(args.slurp)
    models = []
    for m in args.models:
        name, _, path = m.rpartition("=")
        models.append((name or os.path.basename(path).removesuffix(".onnx"), os.path.abspath(path)))
    names = [n for n, _ in models]
    modes = {"easy": [True], "none": [False], "both": [False, True]}[args.backfill]
    print(f"{args.model} model | fairest heuristic | " + " | ".join(names))
    for easy in modes:
        print(f"mode {'easy' if easy else 'none'}")
        counts = {n: [0, 0, 0, 0.0] for n in names}
        rows = cells(args)
        for label, trace, window in rows:
            rivals, mine = replay(args, trace, window, easy, models)
            worst = min(w for w, _ in rivals)
            average = min(a for _, a in rivals)
            fairest = HEURISTICS[[w for w, _ in rivals].index(worst)]
            line = []
            for n, (w, a) in zip(names, mine):
                c = counts[n]
                c[0] += all(w <= 0.99 * r for r, _ in rivals)
                c[1] += w <= 1.01 * worst
                c[2] += a <= 1.1 * average
                c[3] += math.log(w / worst) if w > 0 and worst > 0 else 0.0
                line.append(f"{w / worst:6.3f} {a / average:5.2f}")
            print(f"{label:32} | {fairest:<9} {worst:10.1f} | " + " | ".join(line), flush=True)
        for n in names:
            won, within, averages, logs = counts[n]
            print(f"  {n}: won {won} within {within} avg {averages} of {len(rows)}; "
                  f"geo {math.exp(logs / len(rows)):.3f}")


if __name__ == "__main__":
    main()
