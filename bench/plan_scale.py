"""How long `rlcfg plan` takes as the cluster grows: 64, 512 and 8,192 GPUs (8 per node).

Two layouts per size: everything colocated (Megatron actor and reference, vLLM rollout on all GPUs), and a
split one (actor on half the GPUs, rollout on the other half, reference colocated with the actor). Times
build_plan (placement, rank grids, batch, memory) and the text rendering with the GPU map, best of N runs.
The target: 1,024 nodes × 8 GPUs in at most one second, growing linearly.

    python bench/plan_scale.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rlcfg.ir import (Algorithm, Cluster, Data, Experiment, Model, Offload, Optimizer, Parallelism,  # noqa: E402
                      Resources, Role, Sampling, Schedule)
from rlcfg.plan import build_plan  # noqa: E402
from rlcfg.plan.render import render_text  # noqa: E402

SIZES = (64, 512, 8192)
MODEL = "/models/Qwen2.5-72B-Instruct"


def _experiment(gpus: int, split: bool) -> Experiment:
    train_gpus = gpus // 2 if split else gpus
    roll_gpus = gpus - train_gpus if split else gpus
    megatron = Parallelism(tp=8, pp=4 if train_gpus >= 32 else 1, sequence_parallel=True)
    actor = Role("actor", "megatron", Resources(gpus=train_gpus), Model(MODEL), megatron,
                 Offload(params=True, optimizer=True, grads=True), Optimizer(lr=1e-6), micro_batch_size=1,
                 forward_micro_batch_size=2, gradient_checkpointing=True)
    reference = Role("reference", "megatron", Resources(gpus=train_gpus), Model(MODEL), megatron,
                     Offload(params=True), forward_micro_batch_size=2)
    rollout = Role("rollout", "vllm", Resources(gpus=roll_gpus), Model(MODEL), Parallelism(tp=8),
                   Offload(params=not split), engine=(("gpu_memory_utilization", 0.8), ("max_model_len", 8192)))
    reward = Role("reward", "rule", Resources(gpus=0, cpus=gpus))
    colocation = (("actor", "reference"),) if split else (("actor", "rollout", "reference"),)
    prompts = max(gpus // 2, 32)
    return Experiment(
        name=f"scale-{gpus}", dialect="bench", variant=None, cluster=Cluster(nodes=gpus // 8, gpus_per_node=8),
        roles=(actor, rollout, reference, reward), colocation=colocation, algorithm=Algorithm(group_size=16),
        sampling=Sampling(max_new_tokens=6144, n=16), eval_sampling=None, data=Data(max_prompt_length=2048),
        schedule=Schedule(prompts_per_step=prompts, samples_per_step=prompts * 16,
                          samples_per_optimizer_step=prompts * 4, total_steps=100))


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement; the best is reported")
    args = parser.parse_args()

    print(f"{'GPUs':>6}  {'nodes':>5}  {'layout':<10}  {'build_plan':>11}  {'+ render':>9}  {'total':>8}  "
          f"{'µs/GPU':>7}")
    for gpus in SIZES:
        for split in (False, True):
            exp = _experiment(gpus, split)
            plan_s = _best(lambda: build_plan(exp, gpu="h100"), args.repeat)
            plan, _ = build_plan(exp, gpu="h100")
            render_s = _best(lambda: render_text(plan, show_gpu_map=True), args.repeat)
            total = plan_s + render_s
            layout = "split" if split else "colocated"
            print(f"{gpus:>6}  {gpus // 8:>5}  {layout:<10}  {plan_s * 1e3:>9.1f}ms  {render_s * 1e3:>7.1f}ms  "
                  f"{total * 1e3:>6.1f}ms  {total / gpus * 1e6:>7.1f}")


if __name__ == "__main__":
    main()
