"""Whether a site's recent history says which policy will be fairest next.

    python3 fair/trainer/history.py --slurp target/release/slurp --traces ../shared/traces \
        gen:mid:2 "RICC-2010-2.swf.xz --within ..75% --min-bsld 3"

For each workload, the judge's 50 windows of 1,024 jobs (seed 12345) are replayed in both
simulation models, without and with EASY, by FCFS, SJF, F1, `fairshare` and fair-v4; then the
1,024 jobs before each window are replayed the same way. A selector runs, in each window, the
policy among its candidates whose worst user fared best in the jobs before it (fair-v4 on a
tie, and where fewer than 256 came before). Each line is a cell: fair-v4's worst user's mean
bounded slowdown over the fairest heuristic's, then each selector's (W: at least 1% below every
heuristic's; a: its average bounded slowdown over the best heuristic's; v4x: windows where it
ran fair-v4), and the oracle's (the fairest of the five in every window, known only
afterwards).
"""

import argparse
import os

from cells import slurp_json


def replay(args, trace, model, policies, extra):
    return slurp_json(args, "sim", trace, "--model", model, "--policy", ",".join(policies), "--json", *extra)


def per_window(d, figure):
    """Each policy's `figure` in each window of the replay `d`."""
    return {p["policy"]: [w[figure] for w in p["windows"]] for p in d["policies"]}


def cell(args, trace, extra, model, easy):
    plus = "+easy" if easy else ""
    names = [h + plus for h in ("fcfs", "sjf", "f1", "fairshare")] + ["fair-v4" + plus]
    d = replay(args, trace, model, names, ["--samples", "50", "--len", "1024", "--seed", "12345", *extra])
    names = [p["policy"] for p in d["policies"]]  # as slurp names them (`easy` for fcfs+easy)
    now = per_window(d, "worst_user_bounded_slowdown")
    avg = per_window(d, "avg_bounded_slowdown")
    before = {n: [] for n in names}
    for w in d["windows"]:
        start = max(0, w["start"] - 1024)
        if w["start"] - start < 256:
            for n in names:
                before[n].append(None)
            continue
        earlier = replay(args, trace, model, names, ["--window", f"{start}:{w['start'] - start}"])
        for n, v in per_window(earlier, "worst_user_bounded_slowdown").items():
            before[n].append(v[0])
    return names, now, avg, before


def line(label, names, now, avg, before):
    mean = lambda xs: sum(xs) / len(xs)
    learned, rivals = names[-1], names[:-1]
    best = min(mean(now[h]) for h in rivals)
    best_avg = min(mean(avg[h]) for h in rivals)
    windows = range(len(now[learned]))
    out = [label, f"fair-v4 {mean(now[learned]) / best:.3f}"]
    # fair-v4 first: ties go to it.
    for tag, candidates in (("all five", [learned, *rivals]), ("v4/f1/fs", [learned, rivals[2], rivals[3]]),
                            ("v4/fs", [learned, rivals[3]])):
        chosen = [learned if before[learned][i] is None else min(candidates, key=lambda c: before[c][i])
                  for i in windows]
        w = mean([now[c][i] for i, c in enumerate(chosen)])
        a = mean([avg[c][i] for i, c in enumerate(chosen)])
        # The judge's 1% rule (judge::Cell::wins), restated: no judge run gives a verdict for a
        # selector's mix of windows.
        won = all(w <= 0.99 * mean(now[h]) for h in rivals)
        out.append(f"{tag} {w / best:.3f}{'W' if won else ''} a{a / best_avg:.2f} v4x{chosen.count(learned)}")
    out.append(f"oracle {mean([min(now[c][i] for c in names) for i in windows]) / best:.3f}")
    return "  ".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--slurp", default="target/release/slurp")
    p.add_argument("--traces", default="../shared/traces")
    p.add_argument("workloads", nargs="+", help='a trace and its sim options, quoted: "T --within ..75%%"')
    args = p.parse_args()
    args.slurp = os.path.abspath(args.slurp)
    for spec in args.workloads:
        trace, *extra = spec.split()
        for model in ("reference", "slurp"):
            for easy in (False, True):
                print(line(f"{spec} {model} {'easy' if easy else 'none'}",
                           *cell(args, trace, extra, model, easy)), flush=True)


if __name__ == "__main__":
    main()
