"""`rlcfg run` against TRL's GRPOTrainer on the quickstart, in one process tree: the same warm-started tiny model
(the very same weights: rlcfg's quickstart builds it once, and TRL starts from that folder), the same data (the
multiplication table up to 12, exact-match reward: the answer, then EOS), group size, prompts per step, response
length, temperature, learning rate, gradient clipping, token-mean GRPO loss without KL, and torch threads.

    python bench/run_throughput.py [--steps 100] [--warmup 10] [--threads 1] [--skip-trl] [--trl-path DIR]

Prints for each: samples/s (steady state: the steps after --warmup, startup excluded), the time to a reward of
0.8 (training time until the mean reward of 5 consecutive steps first reaches 0.8, startup excluded), the reward
at the start and over the last 5 steps; then the ratios, and the share of rlcfg's step time spent outside
generate / forward / backward / optimizer. TRL is not a dependency of rlcfg: `pip install trl` (it runs with
use_cpu=True and no vLLM), or install it aside (`pip install --target DIR trl`, plus what it needs) and pass
--trl-path DIR, which is put on the bench's import path (rlcfg's workers do not see it). Numbers on a shared
machine are noisy: compare runs taken back to back.
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

TARGET = 0.8
WINDOW = 5  # steps whose mean reward must reach TARGET
GROUP, PROMPTS = 16, 16


def time_to_target(rewards: list[float], step_times: list[float]) -> float:
    """Training seconds until the mean reward of WINDOW consecutive steps first reaches TARGET (at the end of
    the window's last step); inf when it never does."""
    for i in range(WINDOW - 1, len(rewards)):
        if statistics.mean(rewards[i - WINDOW + 1:i + 1]) >= TARGET:
            return sum(step_times[:i + 1])
    return float("inf")


def run_rlcfg(workdir: str, steps: int, warmup: int, threads: int) -> dict[str, object]:
    import io

    from rlcfg.runtime import quickstart
    from rlcfg.runtime.driver import RunOptions, run

    out = os.path.join(workdir, "rlcfg")
    t0 = time.perf_counter()
    exp = quickstart.experiment(out, steps=steps, checkpoint_interval=None, warm_start=True)
    built = time.perf_counter() - t0
    plan = quickstart.plan_for(exp)
    result = run(plan, RunOptions(output_dir=out, resume=None, threads=threads, stream=io.StringIO()))
    history = result.history
    steady = history[warmup:]
    parts = {k: statistics.mean(m.get(f"time/{k}", 0.0) for m in steady)
             for k in ("step", "generate", "train_forward", "train_backward", "train_optimizer", "train_gather",
                       "weight_load", "reward", "rollout_call", "train")}
    rewards = [m["reward/mean"] for m in history]
    return {"samples_per_s": sum(GROUP * PROMPTS for _ in steady) / sum(m["time/step"] for m in steady),
            "overhead_share": statistics.mean(m["time/overhead_share"] for m in steady),
            "to_target_s": time_to_target(rewards, [m["time/step"] for m in history]),
            "reward_first": rewards[0], "reward_last5": statistics.mean(rewards[-5:]),
            "length_first": history[0]["response/length_mean"],
            "length_last5": statistics.mean(m["response/length_mean"] for m in history[-5:]),
            "startup_s": history[0].get("startup/ray_s", 0.0) + history[0].get("startup/workers_s", 0.0),
            "model_build_s": built, "model": exp.role("actor").model.path, "train": exp.data.train_files[0],
            **{f"t_{k}": v for k, v in parts.items()}}


def run_trl(workdir: str, model_dir: str, train_file: str, steps: int, warmup: int, threads: int,
            lr: float, max_new_tokens: int) -> dict[str, float]:
    import json

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rlcfg.runtime import rewards as R
    from rlcfg.runtime.data import load_tokenizer

    torch.set_num_threads(threads)
    tokenizer = load_tokenizer(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    with open(train_file, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    dataset = Dataset.from_list([{"prompt": r["prompt"], "answer": r["answer"]} for r in rows] * (steps // 8 + 2))
    verifier = R.get("arithmetic")  # the reward rlcfg's quickstart scores with

    def reward(completions, answer, **_):
        return [verifier(c, a) for c, a in zip(completions, answer)]

    config = GRPOConfig(
        output_dir=os.path.join(workdir, "trl", "out"), use_cpu=True, use_vllm=False, bf16=False,
        per_device_train_batch_size=GROUP * PROMPTS, gradient_accumulation_steps=1, num_generations=GROUP,
        max_completion_length=max_new_tokens, temperature=1.0, top_p=1.0, top_k=0, learning_rate=lr, beta=0.0,
        loss_type="dapo", scale_rewards="group", num_iterations=1, max_steps=steps, lr_scheduler_type="constant",
        warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0, logging_steps=1, report_to="none",
        save_strategy="no", seed=0, dataloader_num_workers=0, disable_tqdm=True,
        # The quickstart trains without activation checkpointing (disable_gradient_checkpointing: true); TRL's
        # GRPOConfig turns it on unless told otherwise, which would make TRL recompute every forward.
        gradient_checkpointing=False)

    stamps: list[float] = []
    rewards: list[float] = []
    lengths: list[float] = []

    class Clock(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            stamps.append(time.perf_counter())

        def on_step_end(self, args, state, control, **kwargs):
            stamps.append(time.perf_counter())

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "reward" in logs:
                rewards.append(logs["reward"])
                lengths.append(logs.get("completions/mean_length", float("nan")))

    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=config, train_dataset=dataset,
                          processing_class=tokenizer, callbacks=[Clock()])
    trainer.train()
    step_times = [b - a for a, b in zip(stamps, stamps[1:])]
    steady = step_times[warmup:]
    return {"samples_per_s": GROUP * PROMPTS / statistics.mean(steady), "step_s": statistics.mean(steady),
            "to_target_s": time_to_target(rewards, step_times),
            "reward_first": rewards[0] if rewards else float("nan"),
            "reward_last5": statistics.mean(rewards[-5:]) if rewards else float("nan"),
            "length_first": lengths[0] if lengths else float("nan"),
            "length_last5": statistics.mean(lengths[-5:]) if lengths else float("nan")}


def _seconds(value: float) -> str:
    return "never" if value == float("inf") else f"{value:.1f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process (both systems)")
    parser.add_argument("--skip-trl", action="store_true")
    parser.add_argument("--trl-path", help="a folder holding TRL and what it needs (pip install --target)")
    args = parser.parse_args()
    if args.trl_path:
        # Before anything imports transformers: it decides once, at import, whether accelerate is there.
        sys.path.insert(0, os.path.abspath(args.trl_path))
    workdir = tempfile.mkdtemp(prefix="rlcfg-bench-")
    try:
        from rlcfg.runtime import quickstart

        exp_defaults = quickstart.experiment.__kwdefaults__
        ours = run_rlcfg(workdir, args.steps, args.warmup, args.threads)
        print(f"model     : {ours['model']} (built and warm-started in {ours['model_build_s']:.1f} s; rlcfg's Ray "
              f"and workers started in {ours['startup_s']:.1f} s)")
        print(f"rlcfg run : {ours['samples_per_s']:8.0f} samples/s   step {ours['t_step'] * 1000:.1f} ms "
              f"(generate {ours['t_generate'] * 1000:.1f}, forward {ours['t_train_forward'] * 1000:.1f}, "
              f"backward {ours['t_train_backward'] * 1000:.1f}, optimizer {ours['t_train_optimizer'] * 1000:.1f}, "
              f"weight sync {(ours['t_train_gather'] + ours['t_weight_load']) * 1000:.1f}, reward "
              f"{ours['t_reward'] * 1000:.1f} ms)")
        print(f"rlcfg run : reward {ours['reward_first']:.2f} -> {ours['reward_last5']:.2f}, length "
              f"{ours['length_first']:.1f} -> {ours['length_last5']:.1f}, reward {TARGET} after "
              f"{_seconds(ours['to_target_s'])} of training")
        print(f"rlcfg run : {ours['overhead_share'] * 100:.1f}% of step time outside generate/forward/backward/"
              "optimizer")
        if args.skip_trl:
            return
        import ray

        if ray.is_initialized():  # TRL's turn: nothing of rlcfg's run left alive beside it
            ray.shutdown()
        try:
            theirs = run_trl(workdir, str(ours["model"]), str(ours["train"]), args.steps, args.warmup, args.threads,
                             exp_defaults["lr"], exp_defaults["max_new_tokens"])
        except ImportError as exc:
            print(f"TRL       : cannot run ({exc}); pip install trl")
            return
        print(f"TRL GRPO  : {theirs['samples_per_s']:8.0f} samples/s   step {theirs['step_s'] * 1000:.1f} ms")
        print(f"TRL GRPO  : reward {theirs['reward_first']:.2f} -> {theirs['reward_last5']:.2f}, length "
              f"{theirs['length_first']:.1f} -> {theirs['length_last5']:.1f}, reward {TARGET} after "
              f"{_seconds(theirs['to_target_s'])} of training")
        ratio = ours["samples_per_s"] / theirs["samples_per_s"]
        print(f"ratio     : samples/s {ratio:.2f}x (rlcfg / TRL); time to reward {TARGET}: "
              + (f"{theirs['to_target_s'] / ours['to_target_s']:.2f}x faster with rlcfg"
                 if ours["to_target_s"] < float("inf") and theirs["to_target_s"] < float("inf")
                 else f"rlcfg {_seconds(ours['to_target_s'])}, TRL {_seconds(theirs['to_target_s'])}"))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
