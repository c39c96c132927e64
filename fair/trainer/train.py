"""PPO trainer for slurp's `fair` policy (RL-SPEC.md), on CUDA when present.

Each epoch: export the actor to ONNX (slurp's policy contract, built by
onnx_actor.py from the actor's weights), let `slurp policy rollout` play
`--trajectories` episodes of the trace with it (Rust, all cores), then update
actor and critic on the recorded decisions. A learning curve is appended to
OUT/curve.csv; OUT/model-LAST.onnx (+ .json normalisers) is the latest actor.

    python3 fair/trainer/train.py --trace NASA-iPSC-1993-3.1-cln.swf \
        --epochs 50 --out runs/nasa --slurp target/release/slurp

Several --trace (files, or generated workloads `gen:FAMILY:SEED`) take turns
in every epoch. `--observation v2 --sim slurp --mixed-backfill` trains the
site-independent policy in slurp's own model, with and without EASY.

Reference hyper-parameters: gamma 1, lambda 0.97, clip 0.2, Adam (pi 3e-4,
V 1e-3), 80 pi and 80 V iterations per epoch with early stop when the KL
passes 1.5 x 0.01, normalised advantages, 100 trajectories per epoch.
"""

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_actor  # noqa: E402

SLOTS, FEATURES = onnx_actor.SLOTS, onnx_actor.FEATURES


class Standardise(nn.Module):
    """(x - shift) / scale per feature, fixed from data.

    The features are fractions of trace-wide maxima, so most of them live
    in a sliver near 0 (a typical estimate is 1e-3 of the longest); scaled
    to unit spread they train far faster. Being affine, it folds into the
    first layer at export: the model file keeps the plain contract.
    """

    def __init__(self):
        super().__init__()
        self.register_buffer("shift", torch.zeros(FEATURES))
        self.register_buffer("scale", torch.ones(FEATURES))

    def fit(self, rows):
        self.shift.copy_(rows.mean(0))
        self.scale.copy_(rows.std(0).clamp(min=1e-3))

    def forward(self, x):
        return (x - self.shift) / self.scale


def slot_mlp():
    """9 -> 32 -> 16 -> 8 -> 1 with ReLU, applied to every slot."""
    return nn.Sequential(
        Standardise(),
        nn.Linear(FEATURES, 32), nn.ReLU(),
        nn.Linear(32, 16), nn.ReLU(),
        nn.Linear(16, 8), nn.ReLU(),
        nn.Linear(8, 1),
    )


# What a padded slot holds (slurp's observe.rs).
PADDING = [0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0]


def per_slot(mlp, obs, mask, padded):
    """mlp over the real slots only, `padded` [1] in the others.

    Most slots are padding (in busy RICC windows 15% are real), so the
    per-slot network runs on those only: 6x less work than over all 128.
    """
    real = mask > 0
    return padded.expand(mask.shape).masked_scatter(real, mlp(obs[real]).squeeze(-1))


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = slot_mlp()

    def forward(self, obs, mask):
        # The exported graph's mlp(obs) + (mask - 1) * 1e6: a padded slot's
        # softmax weight is 0 either way.
        return per_slot(self.mlp, obs, mask, obs.new_full((1,), -1e6))

    def layers(self):
        """The weights as onnx_actor's (W, b) list, the standardisation
        folded into the first layer: W' = W / scale, b' = b - (shift / scale) W."""
        linears = [m for m in self.mlp if isinstance(m, nn.Linear)]
        out = [
            (lin.weight.detach().cpu().double().numpy().T.copy(), lin.bias.detach().cpu().double().numpy().copy())
            for lin in linears
        ]
        std = self.mlp[0]
        shift, scale = std.shift.cpu().double().numpy(), std.scale.cpu().double().numpy()
        w, b = out[0]
        out[0] = (w / scale[:, None], b - (shift / scale) @ w)
        return [(w.astype(np.float32), b.astype(np.float32)) for w, b in out]


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.slot = slot_mlp()
        self.head = nn.Sequential(
            nn.Linear(SLOTS, 64), nn.ReLU(),
            nn.Linear(64, 32), nn.ReLU(),
            nn.Linear(32, 8), nn.ReLU(),
            nn.Linear(8, 1),
        )

    def forward(self, obs, mask):
        padded = self.slot(obs.new_tensor([PADDING])).squeeze(-1)
        return self.head(per_slot(self.slot, obs, mask, padded)).squeeze(-1)


def export(actor, path, normalisers, observation=None):
    onnx.save(onnx_actor.to_onnx(actor.layers(), observation=observation if observation != "v1" else None), path)
    if normalisers:
        shutil.copyfile(normalisers, path + ".json")


def advantages(rewards, values, episodes, lam):
    """GAE with gamma = 1 within each episode; the value after its last step is 0."""
    adv = np.zeros_like(rewards)
    last = 0.0
    for t in reversed(range(len(rewards))):
        end = t == len(rewards) - 1 or episodes[t + 1] != episodes[t]
        next_value = 0.0 if end else values[t + 1]
        if end:
            last = 0.0
        delta = rewards[t] + next_value - values[t]
        last = delta + lam * last
        adv[t] = last
    return adv


def load(rollout_dir, device):
    """A rollout's obs, mask, action, logp (tensors) and reward, episode (arrays)."""
    arr = lambda name: np.load(os.path.join(rollout_dir, name))  # noqa: E731
    tensors = [torch.as_tensor(arr(n), device=device) for n in ("obs.npy", "mask.npy", "action.npy", "logp.npy")]
    return tensors + [arr("reward.npy"), arr("episode.npy")]


def clone(args, actor, critic, common, device):
    """Behaviour cloning: fit the actor to a heuristic's choices on its own
    episodes, and the critic to those episodes' returns.

    PPO from random weights learns slowly where most decisions are among one
    job; starting from a good heuristic's ranking, it has only the fairness
    left to learn. Returns the normalisers the episodes were observed with.
    """
    out = os.path.join(args.out, "clone")
    subprocess.run([args.slurp, "policy", "rollout", "--teacher", args.clone,
                    "--trajectories", str(args.clone_trajectories), "--seed", str(args.seed * 100_003 + 99_999),
                    "--out", out] + common, check=True)
    obs, mask, act, _, rewards, episodes = load(out, device)
    real_rows = obs[mask > 0]
    for net in (actor.mlp, critic.slot):
        net[0].fit(real_rows)
    # Decisions among one job teach nothing about the ranking.
    choice = mask.sum(1) > 1
    c_obs, c_mask, c_act = obs[choice], mask[choice], act[choice]
    ret = torch.as_tensor(advantages(rewards, np.zeros_like(rewards), episodes, lam=1.0), device=device)
    pi_opt = torch.optim.Adam(actor.parameters(), lr=3e-3)
    v_opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
    gen = torch.Generator(device=device).manual_seed(args.seed)
    batch = 2048
    for i in range(args.clone_iters):
        pick = torch.randint(len(c_act), (batch,), generator=gen, device=device)
        loss = nn.functional.cross_entropy(actor(c_obs[pick], c_mask[pick]), c_act[pick])
        pi_opt.zero_grad()
        loss.backward()
        pi_opt.step()
        pick = torch.randint(len(ret), (batch,), generator=gen, device=device)
        v_loss = ((critic(obs[pick], mask[pick]) - ret[pick]) ** 2).mean()
        v_opt.zero_grad()
        v_loss.backward()
        v_opt.step()
        if i % 100 == 0 or i == args.clone_iters - 1:
            with torch.no_grad():
                agree = (actor(c_obs, c_mask).argmax(1) == c_act).float().mean().item()
            print("clone {} iter {} loss {:.4f} agrees {:.1%} critic {:.1f}".format(
                args.clone, i, loss.item(), agree, v_loss.item()), flush=True)
    if args.clone_sharpen != 1.0:
        # The clone's logits are flat (F1's ranking is a product of two
        # features the MLP only approximates): scaling the last layer keeps
        # its best slot and makes the sampled policy PPO improves closer to
        # the greedy one that is judged.
        with torch.no_grad():
            actor.mlp[-1].weight.mul_(args.clone_sharpen)
            actor.mlp[-1].bias.mul_(args.clone_sharpen)
    return os.path.join(out, "normalisers.json")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", required=True, action="append",
                    help="a trace (SWF) or gen:FAMILY:SEED; repeat for several")
    ap.add_argument("--observation", default="v1", choices=["v1", "v2", "v3", "v4"],
                    help="v2: the site-independent observation; v3: v2 over wider slots")
    ap.add_argument("--sim", default="reference", choices=["reference", "slurp"],
                    help="the simulation model that plays the episodes")
    ap.add_argument("--mixed-backfill", action="store_true", help="every other episode backfills")
    ap.add_argument("--out", required=True)
    ap.add_argument("--slurp", default="slurp", help="the slurp binary")
    ap.add_argument("--epochs", type=int, default=50)
    ap.add_argument("--trajectories", type=int, default=100)
    ap.add_argument("--len", type=int, default=128, help="jobs per episode")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backfill", action="store_true")
    ap.add_argument("--score", default="worst", choices=["worst", "mean", "best"])
    ap.add_argument("--device", default="auto", help="auto, cpu or cuda")
    ap.add_argument("--pi-iters", type=int, default=80)
    ap.add_argument("--v-iters", type=int, default=80)
    ap.add_argument("--min-bsld", type=float, default=0.0,
                    help="train on windows where FCFS reaches this average bounded slowdown")
    ap.add_argument("--lr", type=float, default=3e-4, help="the actor's learning rate")
    ap.add_argument("--max-seconds", type=float, default=None, help="stop after the epoch that passes this")
    ap.add_argument("--baseline", default=None,
                    help="reward the improvement on this heuristic's score of each window (fcfs, sjf, f1, ...)")
    ap.add_argument("--clone", default=None,
                    help="first clone this heuristic's choices (fcfs, sjf, f1, ...): a warm start for PPO")
    ap.add_argument("--clone-trajectories", type=int, default=400)
    ap.add_argument("--clone-iters", type=int, default=1500)
    ap.add_argument("--clone-sharpen", type=float, default=1.0, metavar="K",
                    help="multiply the cloned actor's logits by K (same best slot, sharper sampling)")
    ap.add_argument("--threads", type=int, default=None, help="CPU threads for PyTorch")
    ap.add_argument("--keep-every", type=int, default=0, metavar="K",
                    help="keep the actor of every K-th epoch as OUT/model-EPOCH.onnx (the one played that epoch)")
    ap.add_argument("--hold-out", default=None, metavar="FROM..[TO]|SEED:COUNT,...",
                    help="never train on jobs FROM..TO (320000..: RICC's last four weeks, judged with "
                         "`judge.py --within 320000.. --min-bsld 3`) or on the windows "
                         "`slurp sim --samples COUNT --seed SEED` draws")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    actor, critic = Actor().to(device), Critic().to(device)
    pi_opt = torch.optim.Adam(actor.parameters(), lr=args.lr)
    v_opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
    rollout_dir = os.path.join(args.out, "rollout")
    normalisers = None
    common = ["--len", str(args.len), "--score", args.score, "--min-bsld", str(args.min_bsld),
              "--sim", args.sim, "--observation", args.observation]
    for trace in args.trace:
        common += ["--trace", trace]
    if args.backfill:
        common.append("--backfill")
    if args.mixed_backfill:
        common.append("--mixed-backfill")
    if args.baseline:
        common += ["--baseline", args.baseline]
    if args.hold_out:
        common += ["--hold-out", args.hold_out]
    if args.clone:
        normalisers = clone(args, actor, critic, common, device)
    curve_path = os.path.join(args.out, "curve.csv")
    new_curve = not os.path.exists(curve_path)
    with open(curve_path, "a", newline="") as curve_file:
        curve = csv.writer(curve_file)
        if new_curve:
            curve.writerow(["epoch", "reward", "avg_bsld", "worst_user_bsld", "jain", "pi_iters",
                            "kl", "rollout_s", "update_s", "epoch_s", "device"])
        began = time.perf_counter()
        for epoch in range(args.epochs):
            if args.max_seconds is not None and time.perf_counter() - began > args.max_seconds:
                break
            started = time.perf_counter()
            model = os.path.join(args.out, "model-LAST.onnx")
            export(actor, model, normalisers, args.observation)
            cmd = [args.slurp, "policy", "rollout", "--model", model,
                   "--trajectories", str(args.trajectories), "--seed", str(args.seed * 100_003 + epoch),
                   "--out", rollout_dir] + common
            subprocess.run(cmd, check=True)
            normalisers = os.path.join(rollout_dir, "normalisers.json")
            rolled = time.perf_counter()

            obs, mask, act, logp_old, rewards, episodes = load(rollout_dir, device)
            with torch.no_grad():
                values = critic(obs, mask).cpu().numpy()
            adv = advantages(rewards, values, episodes, lam=0.97)
            ret = torch.as_tensor(adv + values, device=device)
            adv = torch.as_tensor((adv - adv.mean()) / (adv.std() + 1e-8), device=device)

            kl, done_iters = 0.0, 0
            for i in range(args.pi_iters):
                logits = actor(obs, mask)
                logp_all = torch.log_softmax(logits, dim=-1)
                logp = logp_all.gather(1, act.unsqueeze(1)).squeeze(1)
                ratio = torch.exp(logp - logp_old)
                clipped = torch.clamp(ratio, 0.8, 1.2) * adv
                loss = -torch.min(ratio * adv, clipped).mean()
                kl = (logp_old - logp).mean().item()
                if kl > 1.5 * 0.01:
                    break
                pi_opt.zero_grad()
                loss.backward()
                pi_opt.step()
                done_iters = i + 1
            for _ in range(args.v_iters):
                v_loss = ((critic(obs, mask) - ret) ** 2).mean()
                v_opt.zero_grad()
                v_loss.backward()
                v_opt.step()
            if device.type == "cuda":
                torch.cuda.synchronize()
            finished = time.perf_counter()

            eps = json.load(open(os.path.join(rollout_dir, "episodes.json")))
            mean = lambda key: float(np.mean([e[key] for e in eps]))  # noqa: E731
            row = [epoch, mean("reward"), mean("avg_bounded_slowdown"), mean("worst_user_bounded_slowdown"),
                   mean("jain"), done_iters, kl, rolled - started, finished - rolled, finished - started,
                   device.type]
            if args.keep_every and epoch % args.keep_every == 0:
                kept = os.path.join(args.out, "model-{}.onnx".format(epoch))
                shutil.copyfile(model, kept)
                shutil.copyfile(normalisers, kept + ".json")
            curve.writerow(row)
            curve_file.flush()
            print("epoch {} reward {:.3f} bsld {:.2f} worst-user {:.2f} jain {:.3f} pi-iters {} "
                  "rollout {:.2f}s update {:.2f}s on {}".format(epoch, row[1], row[2], row[3], row[4],
                                                               done_iters, row[7], row[8], device.type),
                  flush=True)
    export(actor, os.path.join(args.out, "model-LAST.onnx"), normalisers, args.observation)


if __name__ == "__main__":
    main()
