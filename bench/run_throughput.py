"""Throughput of `rlcfg run` against TRL's GRPOTrainer on the quickstart: same tiny model (the same initial
weights), same data, same group size, batch, completion length, learning rate and torch threads.

    python bench/run_throughput.py [--steps 60] [--warmup 10] [--threads 1] [--skip-trl]

Prints samples/s of both (steady state: the steps after --warmup, startup excluded), their ratio, and the
share of rlcfg's step time spent outside generate / forward / backward / optimizer. Needs `pip install trl`
for the comparison (TRL runs with use_cpu=True and no vLLM). Numbers on a shared machine are noisy: compare
runs taken back to back.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_rlcfg(workdir: str, steps: int, warmup: int, threads: int) -> dict[str, float]:
    import io

    from rlcfg.runtime import quickstart
    from rlcfg.runtime.driver import RunOptions, run

    out = os.path.join(workdir, "rlcfg")
    exp = quickstart.experiment(out, steps=steps, checkpoint_interval=None)
    plan = quickstart.plan_for(exp)
    result = run(plan, RunOptions(output_dir=out, resume=None, threads=threads, stream=io.StringIO()))
    steady = result.history[warmup:]
    samples = sum(256 for _ in steady)
    step_time = sum(m["time/step"] for m in steady)
    parts = {k: statistics.mean(m.get(f"time/{k}", 0.0) for m in steady)
             for k in ("step", "generate", "train_forward", "train_backward", "train_optimizer", "train_gather",
                       "weight_load", "reward", "rollout_call", "train")}
    return {"samples_per_s": samples / step_time, "overhead_share": statistics.mean(
        m["time/overhead_share"] for m in steady), "reward_first": result.history[0]["reward/mean"],
        "reward_last5": statistics.mean(m["reward/mean"] for m in result.history[-5:]), **{f"t_{k}": v for k, v in parts.items()}}


def run_trl(workdir: str, steps: int, warmup: int, threads: int) -> dict[str, float]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rlcfg.runtime import quickstart
    from rlcfg.runtime.data import load_tokenizer

    torch.set_num_threads(threads)
    files = quickstart.prepare(os.path.join(workdir, "trl", "quickstart"))
    tokenizer = load_tokenizer(files["model"])
    model = AutoModelForCausalLM.from_pretrained(files["model"], dtype=torch.float32)
    rows = quickstart.task_examples()
    dataset = Dataset.from_list(rows * 40)

    def reward(completions, answer, **_):
        return [float(c.strip() == a) for c, a in zip(completions, answer)]

    group, prompts = 16, 16
    config = GRPOConfig(
        output_dir=os.path.join(workdir, "trl", "out"), use_cpu=True, use_vllm=False, bf16=False,
        per_device_train_batch_size=group * prompts, gradient_accumulation_steps=1, num_generations=group,
        max_completion_length=1, temperature=1.0, learning_rate=2e-3, beta=0.0, max_steps=steps,
        lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0, logging_steps=1,
        report_to="none", save_strategy="no", seed=0, dataloader_num_workers=0, disable_tqdm=True)

    stamps: list[float] = []
    rewards: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            stamps.append(time.perf_counter())

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "reward" in logs:
                rewards.append(logs["reward"])

    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=config, train_dataset=dataset,
                          processing_class=tokenizer, callbacks=[Clock()])
    trainer.train()
    steady = [b - a for a, b in zip(stamps[warmup:], stamps[warmup + 1:])]
    return {"samples_per_s": group * prompts / statistics.mean(steady), "step_s": statistics.mean(steady),
            "reward_first": rewards[0] if rewards else float("nan"),
            "reward_last5": statistics.mean(rewards[-5:]) if rewards else float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process (both systems)")
    parser.add_argument("--skip-trl", action="store_true")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="rlcfg-bench-")
    try:
        ours = run_rlcfg(workdir, args.steps, args.warmup, args.threads)
        print(f"rlcfg run : {ours['samples_per_s']:8.0f} samples/s   step {ours['t_step'] * 1000:.1f} ms "
              f"(generate {ours['t_generate'] * 1000:.1f}, forward {ours['t_train_forward'] * 1000:.1f}, "
              f"backward {ours['t_train_backward'] * 1000:.1f}, optimizer {ours['t_train_optimizer'] * 1000:.1f}, "
              f"weight sync {(ours['t_train_gather'] + ours['t_weight_load']) * 1000:.1f}, reward {ours['t_reward'] * 1000:.1f} ms)   "
              f"reward {ours['reward_first']:.2f} -> {ours['reward_last5']:.2f}")
        print(f"rlcfg run : {ours['overhead_share'] * 100:.1f}% of step time outside generate/forward/backward/"
              "optimizer (target <= 10%)")
        if not args.skip_trl:
            try:
                theirs = run_trl(workdir, args.steps, args.warmup, args.threads)
            except ImportError as exc:
                print(f"TRL       : not installed ({exc.name}); pip install trl")
                return
            print(f"TRL GRPO  : {theirs['samples_per_s']:8.0f} samples/s   step {theirs['step_s'] * 1000:.1f} ms   "
                  f"reward {theirs['reward_first']:.2f} -> {theirs['reward_last5']:.2f}")
            print(f"ratio     : {ours['samples_per_s'] / theirs['samples_per_s']:.2f}x (target >= 2x)")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
