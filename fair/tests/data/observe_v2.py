"""The v2 observation computed independently with NumPy, from its definition
in fair/src/observe_v2.rs (module header). Reads JSON cases on stdin, each
{"cores": C, "started": [[user, wait, estimate, cores], ...],
 "ended": [[user, cores], ...], "shown": [[cores, estimate, wait, user, fits], ...]},
and writes, for each, the 128 x 9 features as one flat list (JSON).
"""

import json
import sys

import numpy as np

PADDING = [0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0]


def features(case):
    c = max(case["cores"], 1)
    means, running = {}, {}
    for user, wait, est, cores in case["started"]:
        s = max(1.0, (wait + est) / max(est, 10))
        means.setdefault(user, []).append(s)
        running[user] = running.get(user, 0) + cores
    for user, cores in case["ended"]:
        running[user] = max(0, running.get(user, 0) - cores)
    mean = {u: float(np.mean(v)) for u, v in means.items()}
    largest = max(mean.values(), default=0.0)
    shown = np.array(case["shown"], dtype=np.float64).reshape(-1, 5)
    n, est, wait, user, fits = shown.T
    k = max(len(shown), 1)
    log_r = np.log10(np.maximum(est, 1)).sum() / k
    log_w = np.log10(1 + wait).sum() / k
    out = np.tile(np.array(PADDING), (128, 1))
    for i in range(len(shown)):
        u = int(user[i])
        m = mean.get(u)
        slow = max(1.0, (wait[i] + est[i]) / max(est[i], 10))
        out[i] = [
            min(n[i] / c, 1.0),
            np.clip((np.log10(max(est[i], 1)) - log_r) / 2, -1, 1),
            np.clip(np.log10(slow) / 3, 0, 1),
            np.clip((np.log10(1 + wait[i]) - log_w) / 3, -1, 1),
            0.0 if m is None or largest <= 0 else m / largest,
            0.0 if m is None else np.clip(np.log10(m) / 3, 0, 1),
            min(running.get(u, 0) / c, 1.0),
            np.sum(user == user[i]) / k,
            1.0 if fits[i] else 0.0,
        ]
    return out.ravel().tolist()


json.dump([features(case) for case in json.load(sys.stdin)], sys.stdout)
