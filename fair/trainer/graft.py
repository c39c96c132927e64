"""Tries fairness terms on top of a cloned actor, and fits one by the cross-entropy method.

    # one hand-set term: the clone plus 200 x relu(wait - 100 x estimate)
    python3 fair/trainer/graft.py try --slurp target/release/slurp --trace RICC-2010-2.swf \
        --base runs/ricc/model-0.onnx --term 200:0:wait=1,estimate=-100
    # fit a linear term over wait, estimate, size, user_info and can-start-now
    python3 fair/trainer/graft.py evolve --slurp target/release/slurp --trace RICC-2010-2.swf \
        --base runs/ricc/model-0.onnx --out runs/ricc-graft --generations 25

PPO needs more episodes than two CPU cores play in a day (README). This asks a narrower
question quickly: does adding a term to F1's clone (`train.py --clone f1`, its epoch-0
model) beat F1 on the trainer's windows? A term is `BETA x relu(C + sum coef x feature)`
over the slot features (observe.rs names: wait, estimate, size, mem, user, group, exe,
user_info, can_start); `--linear` drops the relu. Terms are grafted into the clone's own
9 -> 32 -> 16 -> 8 -> 1 shape: a first-layer unit per term (the clone's least used ones,
given up), one unit of the second and third layers the clone never activates carrying their
sum to the output, so the result is an ordinary actor of RL-SPEC.md's form.

A candidate plays `--windows` busy windows (FCFS bounded slowdown >= `--min-bsld`, none
sharing a job with the held-out ones) greedily, against F1 on each (`--baseline f1`), and
is scored by its mean gain on F1's worst-user bounded slowdown; the average and worst-user
bounded slowdowns are printed beside it.

`evolve` draws `--population` linear terms from a Gaussian each generation, keeps the best
`--elite` (gain, less `--penalty` per unit of average bounded slowdown past `--avg-slack` x
F1's), and refits; OUT/curve.csv logs it, OUT/model-GEN.onnx is each generation's mean.
"""

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_actor  # noqa: E402

NAMES = ["wait", "estimate", "size", "mem", "user", "group", "exe", "user_info", "can_start"]
# What `evolve` may weigh: the ids (user, group, executable) would let a model
# single out users by number; memory is absent from most traces.
EVOLVED = ["wait", "estimate", "size", "user_info", "can_start"]


def load_layers(path):
    init = {i.name: numpy_helper.to_array(i) for i in onnx.load(path).graph.initializer}
    return [(init[f"w{i}"].astype(np.float64), init[f"b{i}"].astype(np.float64)) for i in range(4)]


def after_first(layers, h0):
    """The clone's logits from its first layer's activations."""
    h = h0
    for i, (w, b) in enumerate(layers[1:]):
        h = h @ w + b
        if i < 2:
            h = np.maximum(h, 0.0)
    return h[:, 0]


def pick_units(layers, rows, terms):
    """`terms` first-layer units whose loss moves the logits least, and a
    second- and third-layer unit the clone never activates on `rows`."""
    h = rows
    active = []
    for w, b in layers[:-1]:
        h = np.maximum(h @ w + b, 0.0)
        active.append((h > 0).mean(0))
    idle1, idle2 = np.flatnonzero(active[1] == 0), np.flatnonzero(active[2] == 0)
    if len(idle1) == 0 or len(idle2) == 0:
        raise SystemExit("the base network has no idle unit in its second or third layer to carry a term")
    h0 = np.maximum(rows @ layers[0][0] + layers[0][1], 0.0)
    base = after_first(layers, h0)
    costs = []
    for u in range(h0.shape[1]):
        cut = h0.copy()
        cut[:, u] = 0.0
        costs.append(np.abs(after_first(layers, cut) - base).mean())
    return [int(u) for u in np.argsort(costs)[:terms]], int(idle1[0]), int(idle2[0])


def graft(layers, terms, units):
    """The clone plus each term, exactly (features lie in [0, 1]).

    terms: (coef [9], c, beta, linear). A linear term's unit gets an offset
    that the relu never cuts, taken back at the output. The second-layer
    carrier sums the terms plus an offset that keeps it positive (so its relu
    and the third layer's pass it unchanged); the output takes that back too.
    """
    (w0, b0), (w1, b1), (w2, b2), (w3, b3) = [(w.copy(), b.copy()) for w, b in layers]
    firsts, u1, u2 = units
    w1[:, u1], b1[u1] = 0.0, 0.0
    taken_back = 0.0
    for u, (coef, c, beta, linear) in zip(firsts, terms):
        if linear:
            c = np.maximum(-coef, 0.0).sum() + 1.0
            taken_back += beta * c
        w0[:, u], b0[u] = coef, c
        w1[u, :] = 0.0
        w1[u, u1] = beta
        top = np.maximum(coef, 0.0).sum() + max(c, 0.0)
        b1[u1] += abs(beta) * top
    b1[u1] += 1.0
    w2[u1, :] = 0.0
    w2[:, u2], b2[u2] = 0.0, 0.0
    w2[u1, u2] = 1.0
    w3[u2, 0] = 1.0
    b3 = b3 - b1[u1] - taken_back
    return [(w.astype(np.float32), b.astype(np.float32)) for w, b in [(w0, b0), (w1, b1), (w2, b2), (w3, b3)]]


def parse_term(text):
    """BETA:C:feature=coef,... as a (coef, c, beta) triple."""
    try:
        beta, c, pairs = text.split(":", 2)
        coef = np.zeros(len(NAMES))
        for pair in filter(None, pairs.split(",")):
            name, value = pair.split("=")
            coef[NAMES.index(name)] = float(value)
        return coef, float(c), float(beta)
    except ValueError as e:
        raise SystemExit(f"--term {text}: give BETA:C:FEATURE=COEF,... with features from {NAMES} ({e})")


class Player:
    def __init__(self, args):
        self.args = args
        self.tmp = tempfile.mkdtemp()
        self.normalisers = args.base + ".json"

    def rollout(self, *how):
        a = self.args
        subprocess.run(
            [a.slurp, "policy", "rollout", *how, "--trace", a.trace, "--min-bsld", str(a.min_bsld),
             "--trajectories", str(a.windows), "--seed", str(a.seed), "--hold-out", a.hold_out,
             "--out", self.tmp], check=True, capture_output=True, text=True)
        episodes = json.load(open(os.path.join(self.tmp, "episodes.json")))
        return tuple(np.mean([e[k] for e in episodes])
                     for k in ("reward", "avg_bounded_slowdown", "worst_user_bounded_slowdown"))

    def play(self, layers, path):
        """(mean gain on F1's worst user, average bounded slowdown, worst user's)."""
        onnx.save(onnx_actor.to_onnx(layers), path)
        shutil.copyfile(self.normalisers, path + ".json")
        return self.rollout("--model", path, "--greedy", "--baseline", "f1")

    def rows(self):
        """The clone's own observations (real slots), to choose units on."""
        a = self.args
        subprocess.run(
            [a.slurp, "policy", "rollout", "--model", a.base, "--trace", a.trace, "--greedy",
             "--min-bsld", str(a.min_bsld), "--trajectories", "40", "--seed", str(a.seed + 1),
             "--hold-out", a.hold_out, "--out", self.tmp], check=True, capture_output=True)
        obs = np.load(os.path.join(self.tmp, "obs.npy")).reshape(-1, 9)
        mask = np.load(os.path.join(self.tmp, "mask.npy")).reshape(-1)
        return obs[mask > 0].astype(np.float64)


def try_terms(args, player, base, rows):
    terms = [(*parse_term(t), args.linear) for t in args.term]
    units = pick_units(base, rows, max(len(terms), 1))
    f1 = player.rollout("--teacher", "f1")
    clone = player.play(graft(base, [], units), os.path.join(player.tmp, "clone.onnx"))
    tried = player.play(graft(base, terms, units), os.path.join(player.tmp, "try.onnx"))
    print("| on {} windows | gain on F1's worst user | avg bounded slowdown | worst user's |".format(args.windows))
    print("|---|---|---|---|")
    print("| F1 | 0 | {:.2f} | {:.2f} |".format(f1[1], f1[2]))
    for name, (gain, avg, worst) in (("the clone", clone), ("the clone + terms", tried)):
        print("| {} | {:+.2f} | {:.2f} | {:.2f} |".format(name, gain, avg, worst))


def evolve(args, player, base, rows):
    os.makedirs(args.out, exist_ok=True)
    units = pick_units(base, rows, 1)
    f1_avg = player.rollout("--teacher", "f1")[1]
    h0 = np.maximum(rows @ base[0][0] + base[0][1], 0.0)
    sigma0 = args.sigma or 0.5 * float(after_first(base, h0).std())
    which = [NAMES.index(n) for n in EVOLVED]
    print(f"F1's average bounded slowdown on these windows {f1_avg:.2f}; first spread {sigma0:.3g}", flush=True)

    def term(weights):
        coef = np.zeros(len(NAMES))
        coef[which] = weights
        return [(coef, 0.0, 1.0, True)]

    def fitness(weights, path):
        gain, avg, worst = player.play(graft(base, term(weights), units), path)
        return gain - args.penalty * max(0.0, avg - args.avg_slack * f1_avg), gain, avg, worst

    rng = np.random.default_rng(args.seed)
    mean, std = np.zeros(len(which)), np.full(len(which), sigma0)
    log = csv.writer(open(os.path.join(args.out, "curve.csv"), "w", newline=""))
    log.writerow(["generation", "seconds", "best_draw", "gain", "avg", "worst"] + EVOLVED)
    start = time.time()
    for gen in range(args.generations + 1):
        path = os.path.join(args.out, f"model-{gen}.onnx")
        _, gain, avg, worst = fitness(mean, path)
        best = float("nan")
        if gen < args.generations:
            draws = mean + std * rng.standard_normal((args.population, len(which)))
            scored = sorted(((fitness(d, os.path.join(player.tmp, "draw.onnx"))[0], i)
                             for i, d in enumerate(draws)), reverse=True)
            elite = draws[[i for _, i in scored[:args.elite]]]
            best = scored[0][0]
        log.writerow([gen, round(time.time() - start, 1), best, gain, avg, worst] + list(mean))
        print(f"generation {gen}: mean's gain {gain:+.2f} (average {avg:.2f}, worst user {worst:.2f});"
              f" best draw {best:+.2f}; coefficients {np.round(mean, 1).tolist()}", flush=True)
        if gen < args.generations:
            # Smoothed refit, with a floor on the spread so that it keeps looking.
            mean = 0.3 * mean + 0.7 * elite.mean(0)
            std = np.maximum(0.3 * std + 0.7 * elite.std(0), 0.05 * sigma0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    for name in ("try", "evolve"):
        p = sub.add_parser(name)
        p.add_argument("--slurp", default="slurp")
        p.add_argument("--trace", required=True)
        p.add_argument("--base", required=True, help="the clone of F1 (ONNX, normalisers beside it)")
        p.add_argument("--windows", type=int, default=400)
        p.add_argument("--min-bsld", type=float, default=3.0)
        p.add_argument("--seed", type=int, default=2024, help="seed of the windows (and of evolve's draws)")
        p.add_argument("--hold-out", default="320000..")
        if name == "try":
            p.add_argument("--term", action="append", default=[], help="BETA:C:FEATURE=COEF,... (repeatable)")
            p.add_argument("--linear", action="store_true", help="terms without the relu")
        else:
            p.add_argument("--out", required=True)
            p.add_argument("--generations", type=int, default=25)
            p.add_argument("--population", type=int, default=12)
            p.add_argument("--elite", type=int, default=4)
            p.add_argument("--avg-slack", type=float, default=1.05)
            p.add_argument("--penalty", type=float, default=50.0)
            p.add_argument("--sigma", type=float, default=None,
                           help="first spread of each coefficient (default: half the clone's logit spread)")
    args = ap.parse_args()
    player = Player(args)
    base = load_layers(args.base)
    rows = player.rows()
    (try_terms if args.command == "try" else evolve)(args, player, base, rows)
    shutil.rmtree(player.tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
