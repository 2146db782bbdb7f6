"""Packed against padded micro-batches on the quickstart (one FSDP rank, fp32, with a reference model), run
back to back with the same seed: the median step time, the training forward + backward, the reference's
forward, and the gradient norms of the first steps (which packing must not change).

    python bench/packing_step.py [--max-new-tokens 1] [--steps 6] [--budgets 128,512]

The quickstart's answers are one token, so its batch has almost no padding: packing can only add the cost of
attention over a longer row (without a varlen kernel the mask is dense). Longer responses of varied length
(--max-new-tokens 24) are where dropping the padding pays. Numbers on a shared machine are noisy: compare
runs taken back to back.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-new-tokens", type=int, default=1)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--budgets", default="128,512", help="token budgets to try, comma-separated")
    args = parser.parse_args()

    import ray

    from rlcfg.runtime import quickstart
    from rlcfg.runtime.driver import RunOptions, run

    variants = [("padded", {}), ("packed, micro-batch of samples", {"sequence_packing": True})] + [
        (f"packed, {budget}-token budget", {"sequence_packing": True, "max_tokens_per_micro_batch": int(budget)})
        for budget in args.budgets.split(",") if budget]
    shared = tempfile.mkdtemp(prefix="rlcfg-packing-bench-")
    for name, settings in variants:
        base = quickstart.experiment(os.path.join(shared, "model"), steps=args.steps, checkpoint_interval=None,
                                     kl_coef=0.05)
        roles = tuple(dataclasses.replace(r, **settings) if r.name in ("actor", "reference") else r
                      for r in base.roles)
        exp = dataclasses.replace(base, roles=roles,
                                  sampling=dataclasses.replace(base.sampling, max_new_tokens=args.max_new_tokens))
        out = tempfile.mkdtemp(dir=shared)
        result = run(quickstart.plan_for(exp), RunOptions(output_dir=out, resume=None, threads=1,
                                                          stream=io.StringIO()))
        steady = result.history[1:]  # the first step warms up

        def median(key: str) -> float:
            return statistics.median(m.get(key, 0.0) for m in steady) * 1000

        print(f"{name:34s} step {median('time/step'):7.1f} ms | train fwd+bwd "
              f"{median('time/train_forward') + median('time/train_backward'):7.1f} ms | reference fwd "
              f"{median('time/ref_compute'):6.1f} ms | response length {median('response/length_mean') / 1000:.1f}"
              " | grad norms " + ", ".join(f"{m['actor/grad_norm']:.6g}" for m in result.history[:3]), flush=True)
    ray.shutdown()


if __name__ == "__main__":
    main()
