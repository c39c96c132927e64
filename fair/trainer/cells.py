"""Judges models cell by cell on the validation or the held-out workloads, side by side.

    python3 fair/trainer/cells.py --slurp target/release/slurp --traces ../shared/traces \
        --set validation fair/trainer/runs/v5-turns-s5.onnx v7=fair/trainer/runs/v7-validated-e1.onnx

Each model is judged with `slurp policy judge --json` (50 windows of 1,024 jobs, seed 12345,
unless told otherwise) on one set of workloads. On a production trace such as RICC, a cell's
mean over 50 windows is set by its few worst ones (v53: one 10-second job moved a held-out
cell from 0.50x to 1.01x), so choose between models there on `--samples 300` or more:

- `validation`: seeds 2 and 4 of every generated family, and RICC's first 75% with FCFS at 3 or
  more (its busy windows). Searches may be kept (`--validate`) or chosen by these.
- `fresh`: the generated families at `--seeds` (by default 14, 15 and 16, which no search,
  choice or judging had used before 2026-12-03; the PPO candidate trained on 11 to 13): a
  second validation set, for choices between models whose held-out cells have been seen.
  `--jobs N` generates N jobs a trace instead of 10,000, so that the windows overlap less.
- `files`: the workloads `--workloads` names (trace files in `--traces`, or `gen:` names), such
  as traces written by `slurp policy generate FAMILY --nodes … --users …` for machines and user
  populations no family has.
- `held-out`: the model card's three commands: NASA-iPSC, `gen:small:8`, `gen:mid:7`,
  `gen:large:5`, `gen:saturated:9`, `gen:quiet:6`, and RICC's last quarter, all of it and its
  busy windows. Judge a model here once, after it is chosen.

Each row is a cell (workload, simulation model, backfilling) and its fairest heuristic; each
model's column is its worst user's bounded slowdown over the fairest heuristic's, then its
average over the best heuristic's. Each mode ends with every model's counts as the check
counts them, from the judge's own verdicts: won (worst user at least 1% below every
heuristic's), within 1% of the fairest, average within 1.1x the best; and the geometric mean
and the worst of the first ratio. With several models, each after the first is then compared
with the first cell by cell (the comparison choices between models are made by): in how many
cells its worst user is lower, and higher, by more than 0.5%; the geometric mean of its worst
user's ratio to the first model's, with the t statistic of the log ratios (how far that mean is
from 1 in units of its standard error; |t| under 2 is within the cells' noise); and the
geometric mean of the averages' ratio.
`--only reference` (or `slurp`) keeps one simulation model's cells.
"""

import argparse
import json
import math
import os
import subprocess
import sys

FAMILIES = ("small", "mid", "large", "saturated", "quiet")
SETS = {
    "validation": [
        [f"gen:{family}:{seed}" for family in FAMILIES for seed in (2, 4)],
        ["RICC-2010-2.swf.xz", "--within", "..75%", "--min-bsld", "3"],
    ],
    "held-out": [
        ["NASA-iPSC-1993-3.1-cln.swf", "gen:small:8", "gen:mid:7", "gen:large:5", "gen:saturated:9", "gen:quiet:6"],
        ["RICC-2010-2.swf.xz", "--within", "75%.."],
        ["RICC-2010-2.swf.xz", "--within", "75%..", "--min-bsld", "3"],
    ],
}


def commands(args):
    if args.set == "files":
        return [args.workloads.split(",")]
    if args.set == "fresh":
        seeds = [int(s) for s in args.seeds.split(",")]
        jobs = f":{args.jobs}" if args.jobs else ""
        return [[f"gen:{family}:{seed}{jobs}" for family in FAMILIES for seed in seeds]]
    return SETS[args.set]


def slurp_json(args, *argv):
    """slurp's JSON answer to `argv`, run in the traces' folder; where slurp refuses (a trace
    missing, a bad option), its own diagnostic and exit status, not a Python traceback."""
    done = subprocess.run([args.slurp, *argv], capture_output=True, text=True, cwd=args.traces)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        sys.exit(done.returncode)
    return json.loads(done.stdout)


def judged(args, model, command):
    cells = slurp_json(args, "policy", "judge", model, *command, "--samples", str(args.samples),
                       "--seed", str(args.seed), "--json")["cells"]
    busy = "--min-bsld" in command
    for c in cells:
        if busy:
            c["workload"] += " busy"
        elif "--within" in command:
            c["workload"] += " " + command[command.index("--within") + 1]
    return cells


def fairest(cell):
    return min(cell["rivals"], key=lambda r: r["worst_user_bounded_slowdown"])["policy"]


def ratios(cell):
    """The worst user's and the average's ratios to the best heuristic's, and the cell's
    verdicts as the judge gives them (won, within 1%, average within 1.1x)."""
    worst = min(r["worst_user_bounded_slowdown"] for r in cell["rivals"])
    average = min(r["avg_bounded_slowdown"] for r in cell["rivals"])
    mine = cell["learned"]
    return (mine["worst_user_bounded_slowdown"] / worst, mine["avg_bounded_slowdown"] / average,
            cell["wins"], cell["holds"], cell["average_within"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slurp", default="target/release/slurp")
    ap.add_argument("--traces", default="../shared/traces", help="where the trace files are")
    ap.add_argument("--set", choices=sorted([*SETS, "fresh", "files"]), required=True)
    ap.add_argument("--workloads", help="for `--set files`: comma-separated trace files or gen: names")
    ap.add_argument("--seeds", default="14,15,16", help="the generated families' seeds, for `--set fresh`")
    ap.add_argument("--jobs", type=int, help="jobs of each generated trace, for `--set fresh` (default "
                    "10,000: its 50 windows of 1,024 overlap, each job in 6 on average; with 60,000, "
                    "in 1.5)")
    ap.add_argument("--only", choices=["reference", "slurp"])
    ap.add_argument("--samples", type=int, default=50)
    ap.add_argument("--seed", type=int, default=12345)
    ap.add_argument("models", nargs="+", help="MODEL.onnx or NAME=MODEL.onnx")
    args = ap.parse_args()
    if args.jobs is not None and args.set != "fresh":
        ap.error("--jobs sizes the generated traces of --set fresh; the other sets are fixed")
    if (args.set == "files") != (args.workloads is not None):
        ap.error("--workloads names the workloads of --set files, and only of it")
    args.slurp = os.path.abspath(args.slurp)
    named = []
    for m in args.models:
        name, _, path = m.rpartition("=")
        named.append((name or os.path.basename(path).removesuffix(".onnx"), os.path.abspath(path)))
    table, heuristic = {}, {}
    for name, path in named:
        for command in commands(args):
            for cell in judged(args, path, command):
                if args.only and cell["model"] != args.only:
                    continue
                key = ("easy" if cell["backfill"] else "none", cell["model"], cell["workload"])
                table.setdefault(key, {})[name] = ratios(cell)
                heuristic[key] = fairest(cell)
    names = [n for n, _ in named]
    print("cell | fairest heuristic | " + " | ".join(names))
    for mode in ("none", "easy"):
        keys = sorted(k for k in table if k[0] == mode)
        if not keys:
            continue
        print(f"mode {mode}")
        for key in keys:
            row = " | ".join(f"{table[key][n][0]:6.3f} {table[key][n][1]:5.2f}" for n in names)
            print(f"{key[2]:<32} {key[1]:<9} | {heuristic[key]:<14} | {row}")
        for n in names:
            worst = [table[k][n][0] for k in keys]
            won, within, averages = (sum(table[k][n][i] for k in keys) for i in (2, 3, 4))
            geo = math.exp(sum(math.log(w) for w in worst) / len(worst))
            print(f"  {n}: won {won} within {within} avg {averages} of {len(keys)}; geo {geo:.3f} worst {max(worst):.3f}")
        for n in names[1:]:
            print("  " + paired([(table[k][names[0]], table[k][n]) for k in keys], n, names[0]))


def paired(rows, name, first, margin=0.005):
    """`name` against `first` over the same cells: each cell's worst user's ratio and average's
    ratio, both already relative to the cell's best heuristic, so their quotient is the change."""
    worst = [math.log(b[0] / a[0]) for a, b in rows]
    average = [math.log(b[1] / a[1]) for a, b in rows]
    lower = sum(w < math.log(1 - margin) for w in worst)
    higher = sum(w > math.log(1 + margin) for w in worst)
    n = len(worst)
    mean = sum(worst) / n
    spread = math.sqrt(sum((w - mean) ** 2 for w in worst) / (n - 1)) if n > 1 else 0.0
    t = f"t {mean / (spread / math.sqrt(n)):.2f}" if spread > 0 else "t -"
    return (f"{name} vs {first}: worst user lower in {lower}, higher in {higher} of {n} (by over "
            f"{margin:.1%}); ratio {math.exp(mean):.3f} ({t}); averages {math.exp(sum(average) / n):.3f}")


if __name__ == "__main__":
    main()
