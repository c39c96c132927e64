"""How well can a per-slot network imitate a heuristic through an observation?

A diagnostic for the observation, not a trainer: fits a 9 -> 32 -> 32 -> 1 per-slot MLP
(softmax over the shown slots, cross-entropy, Adam, NumPy only) to the choices a teacher
made in episodes `slurp policy rollout --teacher ORDER --observation V` recorded, and prints
how often its best slot is the teacher's on decisions it was not fitted to (a fifth held
back). Only decisions with more than one job shown count. An observation under which the
network cannot follow a simple heuristic cannot learn to do better than it either.

    slurp policy rollout --teacher f1 --observation v3 --trace RICC-2010-2.swf.xz \\
        --trajectories 40 --len 1024 --min-bsld 3 --seed 3 --out ro-v3
    python3 fair/trainer/imitate.py ro-v3 --epochs 15
"""

import argparse

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rollout", help="a directory `slurp policy rollout` wrote")
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    obs = np.load(f"{args.rollout}/obs.npy")
    mask = np.load(f"{args.rollout}/mask.npy")
    act = np.load(f"{args.rollout}/action.npy")
    keep = mask.sum(1) > 1
    x, mask, act = obs[keep].astype(np.float64), mask[keep] > 0, act[keep]
    n, _, f = x.shape
    rng = np.random.default_rng(args.seed)
    order = rng.permutation(n)
    train, test = order[: n * 4 // 5], order[n * 4 // 5:]
    h = args.hidden
    params = [
        rng.normal(0, 1 / np.sqrt(f), (f, h)), np.zeros(h),
        rng.normal(0, 1 / np.sqrt(h), (h, h)), np.zeros(h),
        rng.normal(0, 1 / np.sqrt(h), (h, 1)), np.zeros(1),
    ]
    first = [np.zeros_like(p) for p in params]
    second = [np.zeros_like(p) for p in params]

    def forward(batch):
        w1, b1, w2, b2, w3, b3 = params
        h1 = np.maximum(0, x[batch] @ w1 + b1)
        h2 = np.maximum(0, h1 @ w2 + b2)
        return h1, h2, np.where(mask[batch], (h2 @ w3 + b3)[..., 0], -1e9)

    def agreement(rows):
        hits = [forward(rows[k:k + 512])[2].argmax(1) == act[rows[k:k + 512]]
                for k in range(0, len(rows), 512)]
        return float(np.concatenate(hits).mean())

    step = 0
    for epoch in range(1, args.epochs + 1):
        rng.shuffle(train)
        for k in range(0, len(train), 256):
            batch = train[k:k + 256]
            h1, h2, logits = forward(batch)
            p = np.exp(logits - logits.max(1, keepdims=True)) * mask[batch]
            p /= p.sum(1, keepdims=True)
            p[np.arange(len(batch)), act[batch]] -= 1
            g = (p / len(batch))[..., None]
            _, _, w2, _, w3, _ = params
            g2 = g @ w3.T * (h2 > 0)
            g1 = g2 @ w2.T * (h1 > 0)
            grads = [
                np.einsum("bsf,bsh->fh", x[batch], g1), g1.sum((0, 1)),
                np.einsum("bsh,bsk->hk", h1, g2), g2.sum((0, 1)),
                np.einsum("bsh,bso->ho", h2, g), g.sum((0, 1)),
            ]
            step += 1
            for i, grad in enumerate(grads):
                first[i] = 0.9 * first[i] + 0.1 * grad
                second[i] = 0.999 * second[i] + 0.001 * grad ** 2
                params[i] -= 3e-3 * (first[i] / (1 - 0.9 ** step)) / (
                    np.sqrt(second[i] / (1 - 0.999 ** step)) + 1e-8)
        if epoch % 5 == 0 or epoch == args.epochs:
            print(f"epoch {epoch}: agreement {agreement(train[:4000]):.3f} fitted, "
                  f"{agreement(test):.3f} held back ({len(test)} decisions)", flush=True)


if __name__ == "__main__":
    main()
