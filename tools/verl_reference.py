"""Reference numbers from verl's own core algorithms, for tests/runtime/test_algorithms.py (not run in CI).

verl (volcengine/verl) is the implementation most users trust; rlcfg's GRPO, RLOO, REINFORCE++, GAE, KL estimators,
loss aggregation, policy losses and value loss must agree with it to 1e-6 where the meanings coincide. This
script imports verl's real `verl/trainer/ppo/core_algos.py` (and the real `verl/utils/torch_functional.py`,
`groupwise.py`, `device.py`, `import_utils.py` it uses) from a verl checkout or bare git mirror, with stand-ins
only for what core_algos needs as *types* (verl.trainer.config.AlgoConfig, verl.workers.config.ActorConfig, and
tensordict.TensorDict when tensordict is not installed), runs them on seeded inputs and writes inputs and
outputs to tests/runtime/data/verl_reference.json.

    python tools/verl_reference.py --verl /work/.mirror/volcengine+verl/repo

`--verl` is a working tree or a bare repository (read at --rev, default HEAD). Needs torch, numpy, omegaconf
and transformers (the `run` extra).
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "runtime" / "data" / "verl_reference.json"
REAL_FILES = ("verl/trainer/ppo/core_algos.py", "verl/utils/torch_functional.py", "verl/utils/groupwise.py",
              "verl/utils/device.py", "verl/utils/import_utils.py")


def _read(verl: Path, rev: str, path: str) -> str:
    if (verl / path).exists():
        return (verl / path).read_text()
    return subprocess.run(["git", f"--git-dir={verl}", "show", f"{rev}:{path}"], check=True, capture_output=True,
                          text=True).stdout


def _revision(verl: Path, rev: str) -> str:
    git_dir = verl / ".git" if (verl / ".git").exists() else verl
    out = subprocess.run(["git", f"--git-dir={git_dir}", "rev-parse", rev], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def load_core_algos(verl: Path, rev: str) -> types.ModuleType:
    tmp = Path(tempfile.mkdtemp(prefix="verl_ref_"))
    for path in REAL_FILES:
        target = tmp / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_read(verl, rev, path))
    for pkg in ("verl", "verl/trainer", "verl/trainer/ppo", "verl/workers"):
        (tmp / pkg).mkdir(parents=True, exist_ok=True)
        (tmp / pkg / "__init__.py").touch()
    # verl/utils/__init__.py imports the tokenizer and config helpers (hydra and more); core_algos only needs
    # these two names from it.
    (tmp / "verl/utils/__init__.py").write_text("from .groupwise import as_torch_index, group_mean_std\n")
    (tmp / "verl/trainer/config.py").write_text(
        "class AlgoConfig:\n    pass\n")
    (tmp / "verl/workers/config.py").write_text(
        "class ActorConfig:\n"
        "    def __init__(self, **kw):\n"
        "        self.__dict__.update(kw)\n"
        "    def get(self, key, default=None):\n"
        "        return self.__dict__.get(key, default)\n")
    try:
        import tensordict  # noqa: F401
    except ImportError:
        stub = types.ModuleType("tensordict")
        stub.TensorDict = type("TensorDict", (), {})
        sys.modules["tensordict"] = stub
    sys.path.insert(0, str(tmp))
    return importlib.import_module("verl.trainer.ppo.core_algos")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verl", type=Path, default=Path("/work/.mirror/volcengine+verl/repo"))
    parser.add_argument("--rev", default="HEAD")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()

    import numpy as np
    import torch

    C = load_core_algos(args.verl, args.rev)
    from verl.workers.config import ActorConfig

    g = torch.Generator().manual_seed(1234)

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).float()

    def L(t):  # exact float32 values as JSON numbers
        return t.detach().double().tolist() if torch.is_tensor(t) else t

    B, T, n = 8, 6, 4
    lengths = torch.tensor([6, 4, 1, 5, 3, 6, 2, 5])
    mask = (torch.arange(T)[None, :] < lengths[:, None]).float()
    index = np.array([i // n for i in range(B)])
    # Group 0 varied, group 1 all equal except one; a third input has a group of identical scores.
    scores = torch.tensor([1.0, 0.0, 0.5, 1.0, 0.2, 0.2, 0.2, 0.9])
    flat_scores = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0])
    logp = rand(B, T, scale=0.5) - 1.5
    old = logp + rand(B, T, scale=0.3)
    ref = logp + rand(B, T, scale=0.4)
    ref[0, 0] = logp[0, 0] + 13.0  # large enough for k3's ±10 clamp to bite
    adv = rand(B, T)
    # One token far outside the trust region with a negative advantage, so that the dual clip (c = 3) bites.
    old[1, 0] = logp[1, 0] - 1.5
    adv[1, 0] = -1.3
    values = rand(B, T, scale=0.5)
    kl_tokens = rand(B, T, scale=0.1).abs()

    def token_rewards(s, penalty=None):
        out = torch.zeros(B, T)
        out[torch.arange(B), lengths - 1] = s
        if penalty is not None:
            out = out - penalty * mask
        return out * mask

    data: dict = {"verl_revision": _revision(args.verl, args.rev), "tolerance": 1e-6,
                  "inputs": {"mask": L(mask), "group_size": n, "scores": L(scores), "flat_scores": L(flat_scores),
                             "logp": L(logp), "old": L(old), "ref": L(ref), "adv": L(adv), "values": L(values),
                             "kl_tokens": L(kl_tokens)},
                  "outputs": {}}
    out = data["outputs"]

    for name, s in (("scores", scores), ("flat_scores", flat_scores)):
        for by_std in (True, False):
            a, _ = C.compute_grpo_outcome_advantage(token_rewards(s), mask, index, norm_adv_by_std_in_grpo=by_std)
            out[f"grpo/{name}/std={by_std}"] = L(a)
        a, _ = C.compute_rloo_outcome_advantage(token_rewards(s), mask, index)
        out[f"rloo/{name}"] = L(a)
        a, _ = C.compute_reinforce_plus_plus_baseline_outcome_advantage(token_rewards(s), mask, index)
        out[f"reinforce++baseline/{name}"] = L(a)
    # The sequence-summed KL-in-reward (verl compute_rewards, then GRPO over the summed token rewards).
    a, _ = C.compute_grpo_outcome_advantage(token_rewards(scores, 0.1 * kl_tokens), mask, index)
    out["grpo/kl_in_reward_0.1"] = L(a)

    algo = types.SimpleNamespace(gamma=1.0)
    for gamma in (1.0, 0.9):
        algo.gamma = gamma
        a, r = C.compute_reinforce_plus_plus_outcome_advantage(token_rewards(scores, 0.1 * kl_tokens), mask,
                                                               config=algo)
        out[f"reinforce++/gamma={gamma}"] = {"advantages": L(a), "returns": L(r)}
    for gamma, lam in ((1.0, 1.0), (0.95, 0.9)):
        a, r = C.compute_gae_advantage_return(token_rewards(scores, 0.1 * kl_tokens), values * mask, mask, gamma,
                                              lam)
        out[f"gae/gamma={gamma}/lam={lam}"] = {"advantages": L(a), "returns": L(r)}

    for est in ("k1", "k2", "k3", "low_var_kl", "abs", "kl", "mse"):
        out[f"kl/{est}"] = L(C.kl_penalty(logp, ref, est))

    loss_mat = rand(B, T)
    data["inputs"]["loss_mat"] = L(loss_mat)
    for mode in ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean"):
        out[f"agg/{mode}"] = float(C.agg_loss(loss_mat, mask, mode))

    def actor(**kw):
        base = dict(clip_ratio=0.2, clip_ratio_low=None, clip_ratio_high=None, clip_ratio_c=3.0, tau_pos=1.0,
                    tau_neg=1.05, global_batch_info={}, policy_loss=None)
        base.update(kw)
        return ActorConfig(**base)

    # verl's "vanilla" loss always applies the dual clip (bound clip_ratio_c, default 3).
    for low, high in ((0.2, 0.2), (0.2, 0.28)):
        for mode in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum"):
            loss, m = C.compute_policy_loss_vanilla(old, logp, adv, mask, mode,
                                                    actor(clip_ratio_low=low, clip_ratio_high=high))
            out[f"pg/vanilla/{low}/{high}/{mode}"] = {"loss": float(loss), "clipfrac": m["actor/pg_clipfrac"],
                                                      "ppo_kl": m["actor/ppo_kl"]}
    loss, m = C.compute_policy_loss_gspo(old, logp, adv, mask, "seq-mean-token-mean",
                                         actor(clip_ratio_low=3e-4, clip_ratio_high=4e-4))
    out["pg/gspo"] = {"loss": float(loss), "clipfrac": m["actor/pg_clipfrac"], "ppo_kl": m["actor/ppo_kl"]}
    loss, m = C.compute_policy_loss_sapo(old, logp, adv, mask, "seq-mean-token-mean", actor())
    out["pg/sapo"] = {"loss": float(loss), "ppo_kl": m["actor/ppo_kl"]}
    loss, m = C.compute_policy_loss_cispo(old, logp, adv, mask, "token-mean",
                                          actor(clip_ratio_low=0.2, clip_ratio_high=0.28))
    out["pg/cispo"] = {"loss": float(loss), "clipfrac": m["actor/pg_clipfrac"], "ppo_kl": m["actor/ppo_kl"]}
    pl = types.SimpleNamespace(kl_cov_ratio=0.1, ppo_kl_coef=1.0, clip_cov_ratio=1.0, clip_cov_lb=0.3,
                               clip_cov_ub=5.0)
    loss, m = C.compute_policy_loss_kl_cov(old, logp, adv, mask, "token-mean", actor(policy_loss=pl))
    out["pg/kl_cov"] = {"loss": float(loss), "kl_cov_ratio": 0.1, "kl_cov_coef": 1.0}
    # clip_cov picks a random subset of its candidate tokens; with clip_cov_ratio 1 it takes them all, so the
    # result is deterministic.
    loss, m = C.compute_policy_loss_clip_cov(old, logp, adv, mask, "token-mean", actor(policy_loss=pl))
    out["pg/clip_cov"] = {"loss": float(loss), "clipfrac": m["actor/pg_clipfrac"], "clip_cov_ratio": 1.0,
                          "clip_cov_lb": 0.3, "clip_cov_ub": 5.0}

    vpred = values + rand(B, T, scale=0.4)
    returns = values + rand(B, T, scale=0.6)
    data["inputs"].update(vpred=L(vpred), returns=L(returns))
    for clip in (0.2, 10.0):
        vf, frac = C.compute_value_loss(vpred, returns, values, mask, clip, "token-mean")
        out[f"value/clip={clip}"] = {"loss": float(vf), "clipfrac": float(frac)}

    ctl = C.AdaptiveKLController(init_kl_coef=0.1, target_kl=0.05, horizon=1000)
    seq = []
    for current, steps in ((0.2, 64), (0.01, 64), (0.06, 128)):
        ctl.update(current, steps)
        seq.append(float(ctl.value))
    out["kl_controller/adaptive"] = {"init": 0.1, "target": 0.05, "horizon": 1000,
                                     "updates": [[0.2, 64], [0.01, 64], [0.06, 128]], "values": seq}

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {args.out} ({len(out)} cases, verl {data['verl_revision'][:12]})")


if __name__ == "__main__":
    main()
