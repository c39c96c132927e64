"""The v2 to v10 observations computed independently with NumPy, from their
definition in fair/src/observe_v2.rs (module header). Reads JSON cases on stdin, each
{"cores": C, "now": T, "started": [[user, wait, estimate, cores, start], ...],
 "ended": [[user, cores, start, end], ...], "shown": [[cores, estimate, wait, user, fits], ...]},
for v3 to v10 also "waiting": [[user, submit, estimate], ...] (the jobs still queued),
for v4 to v10 "widths": "logs", for v5, v7 to v10 "turns": true, for v7 "urgency": true,
for v8 "queue_cost": true, for v9 and v10 "predicts": true ("ended" in the order the ends
were seen), for v10 "history": true;
times in seconds. Writes, for each, the 128 x 9 features as one flat list (JSON).
"""

import json
import sys

import numpy as np

PADDING = [0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0]
HALF_LIFE = 7 * 24 * 3600.0


def used(n, start, end, now):
    """n cores over start..end, each second decayed by 2^(-age / H), at now."""
    h = HALF_LIFE
    return n * h / np.log(2) * (2.0 ** (-(now - end) / h) - 2.0 ** (-(now - start) / h))


def features(case):
    c = max(case["cores"], 1)
    now = case["now"]
    means, running, usage, open_runs = {}, {}, {}, {}
    for user, wait, est, cores, start in case["started"]:
        s = max(1.0, (wait + est) / max(est, 10))
        means.setdefault(user, []).append(s)
        running[user] = running.get(user, 0) + cores
        open_runs.setdefault(user, []).append((cores, start))
    # v9: each user's ended jobs' run times, the latest last.
    history = {}
    for user, cores, start, end in case["ended"]:
        history.setdefault(user, []).append(end - start)
        running[user] = max(0, running.get(user, 0) - cores)
        open_runs[user].remove((cores, start))
        usage[user] = usage.get(user, 0.0) + used(cores, start, end, now)
    for user, runs in open_runs.items():
        for cores, start in runs:
            usage[user] = usage.get(user, 0.0) + used(cores, start, now, now)
    total = sum(usage.values())
    seen = len(means)

    def factor(user):
        if total <= 0:
            return 1.0
        return 2.0 ** (-(usage.get(user, 0.0) / total) * seen)
    if "waiting" in case:
        # v3: each user's waiting jobs count at their slowdown so far.
        for user, submit, est in case["waiting"]:
            means.setdefault(user, []).append((now - submit + est) / max(est, 10))
    mean = {u: float(np.mean(v)) for u, v in means.items()}
    largest = max(mean.values(), default=0.0)
    shown = np.array(case["shown"], dtype=np.float64).reshape(-1, 5)
    n, est, wait, user, fits = shown.T
    k = max(len(shown), 1)
    log_r = np.log10(np.maximum(est, 1)).sum() / k
    log_w = np.log10(1 + wait).sum() / k
    logs = case.get("widths") == "logs"
    log_n = np.log10(np.maximum(n, 1)).sum() / k
    out = np.tile(np.array(PADDING), (128, 1))
    turns = case.get("turns", False)
    # v5: a user's place among the shown users' distinct usages, least first.
    distinct = sorted(set(usage.get(int(u), 0.0) for u in user))
    # v7: how fast each shown job's wait raises its user's mean, 1 / (max(r, 10) n_u),
    # n_u the user's started and waiting jobs (at least 1); against the largest.
    urgent = case.get("urgency", False)
    jobs_of = np.array([max(len(means.get(int(u), [])), 1) for u in user])
    g = 1.0 / (np.maximum(est, 10) * jobs_of)
    top = g.max() if len(g) else 1.0
    # v8: the queue's rate of slowdown, Q = sum of 1 / max(r, 10) over the waiting jobs.
    queue_cost = case.get("queue_cost", False)
    rate = sum(1.0 / max(est_w, 10) for _, _, est_w in case.get("waiting", []))
    # v10: how little of a user's record is checked, 1 / (1 + its ended jobs).
    history_shown = case.get("history", False)

    def sixth(i, u):
        if urgent:
            return np.clip(1 + np.log10(g[i] / top) / 4, 0, 1)
        return factor(u)

    def seventh(u):
        if history_shown:
            return 1.0 / (1 + len(history.get(u, [])))
        return min(running.get(u, 0) / c, 1.0)
    for i in range(len(shown)):
        u = int(user[i])
        m = mean.get(u)
        run = est[i]
        if case.get("predicts", False) and history.get(u):
            # v9: the mean of the user's last two ended jobs' runs, at most the estimate.
            last = history[u][-2:]
            run = min(sum(last) // len(last), est[i])
        slow = max(1.0, (wait[i] + run) / max(run, 10))
        if turns:
            width = 1 / (1 + distinct.index(usage.get(u, 0.0)))
            eighth = np.clip((np.log10(max(n[i], 1)) - log_n) / 2, -1, 1)
        elif logs:
            # v4: the width's share of the instance and against the
            # other shown jobs', on log scales.
            width = np.clip(1 + np.log10(max(n[i], 1) / c) / 6, 0, 1)
            eighth = np.clip((np.log10(max(n[i], 1)) - log_n) / 2, -1, 1)
        else:
            width = min(n[i] / c, 1.0)
            eighth = np.sum(user == user[i]) / k
        if queue_cost:
            # v8: how much the queue's summed slowdown grows while the job holds
            # its share of the machine (n / C) for its estimate.
            eighth = np.clip(np.log10(1 + n[i] / c * max(est[i], 10) * rate) / 4, 0, 1)
        out[i] = [
            width,
            np.clip((np.log10(max(est[i], 1)) - log_r) / 2, -1, 1),
            np.clip(np.log10(slow) / 3, 0, 1),
            np.clip((np.log10(1 + wait[i]) - log_w) / 3, -1, 1),
            0.0 if m is None or largest <= 0 else m / largest,
            sixth(i, u),
            seventh(u),
            eighth,
            1.0 if fits[i] else 0.0,
        ]
    return out.ravel().tolist()


json.dump([features(case) for case in json.load(sys.stdin)], sys.stdout)
