"""Asynchronous against synchronous RL in `rlcfg run`, in one process tree: the quickstart (its warm-started tiny
model, the multiplication table, exact-match reward, GRPO with AReaL's decoupled loss) with the rollout engine on a
CPU slot of its own and the trainer on another, as AReaL places them, run with rollouts up to η = 0 (synchronous),
1 and 2 updates stale, each for the same steps from the same weights and data.

    python bench/async_throughput.py [--steps 40] [--warmup 5] [--staleness 0,1,2] [--target 0.5]

Prints for each η: samples/s (the steps after --warmup, startup excluded), the training time until the mean reward
of 5 consecutive steps first reaches --target, the mean and max staleness of the trained samples, and the share of
the step time each side waited (the trainer for rollouts, `time/rollout_wait`; the engine for work,
`time/rollout_idle`); then each η's samples/s and time to target as ratios over η = 0. Each process has one torch
thread, so on a 2-core machine the two sides can overlap only as far as the cores allow. Numbers on a shared
machine are noisy: compare runs taken back to back.
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

WINDOW = 5  # steps whose mean reward must reach the target


def time_to_target(rewards: list[float], step_times: list[float], target: float) -> float:
    """Training seconds until the mean reward of WINDOW consecutive steps first reaches `target`; inf if never."""
    for i in range(WINDOW - 1, len(rewards)):
        if statistics.mean(rewards[i - WINDOW + 1:i + 1]) >= target:
            return sum(step_times[:i + 1])
    return float("inf")


def run_once(files: str, workdir: str, staleness: int, steps: int, warmup: int, target: float) -> dict[str, float]:
    from rlcfg.ir import PolicyOptions
    from rlcfg.runtime import quickstart
    from rlcfg.runtime.driver import RunOptions, run

    out = os.path.join(workdir, f"eta-{staleness}")
    exp = quickstart.experiment(out, steps=steps, checkpoint_interval=None, warm_start=True, files_dir=files)
    exp = dataclasses.replace(
        exp, colocation=(),  # the engine and the trainer on slots of their own
        algorithm=dataclasses.replace(exp.algorithm, policy_options=PolicyOptions(decoupled=True,
                                                                                  behav_imp_weight_cap=5.0)),
        # Room for every step the bound lets start (the engine still generates them one after another).
        schedule=dataclasses.replace(exp.schedule, max_staleness=staleness,
                                     rollout_concurrency=(staleness + 1) * exp.schedule.prompts_per_step))
    history = run(quickstart.plan_for(exp), RunOptions(output_dir=out, resume=None, threads=1,
                                                      stream=io.StringIO())).history
    steady = history[warmup:]
    step_s = [m["time/step"] for m in history]
    total = sum(m["time/step"] for m in steady)
    return {
        "samples_per_s": sum(len(m["data/prompt_indices"]) * exp.algorithm.group_size for m in steady) / total,
        "to_target_s": time_to_target([m["reward/mean"] for m in history], step_s, target),
        "staleness_mean": statistics.mean(m.get("async/staleness_mean", 0.0) for m in history),
        "staleness_max": max(m.get("async/staleness_max", 0) for m in history),
        "trainer_wait": sum(m.get("time/rollout_wait", 0.0) for m in steady) / total,
        "engine_idle": sum(m.get("time/rollout_idle", 0.0) for m in steady) / total,
        "reward_last": statistics.mean(m["reward/mean"] for m in history[-WINDOW:]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5, help="first steps left out of samples/s")
    parser.add_argument("--staleness", default="0,1,2", help="the bounds η to run, comma-separated; 0 first")
    parser.add_argument("--target", type=float, default=0.5, help="the reward the time to target counts to")
    args = parser.parse_args()
    bounds = [int(x) for x in args.staleness.split(",")]
    if bounds[0] != 0:
        parser.error("--staleness must start with 0, the synchronous run the ratios are taken over")

    from rlcfg.runtime import quickstart

    with tempfile.TemporaryDirectory(prefix="rlcfg-bench-async-") as workdir:
        files = os.path.join(workdir, "files")
        quickstart.prepare(files, 0, warm_start=True)
        results = {eta: run_once(files, workdir, eta, args.steps, args.warmup, args.target) for eta in bounds}

    def seconds(value: float) -> str:
        return "never" if value == float("inf") else f"{value:.1f} s"

    print(f"{'η':>3}  {'samples/s':>9}  {'to reward ' + str(args.target):>16}  {'staleness':>15}  "
          f"{'trainer waits':>13}  {'engine idle':>11}  {'last reward':>11}")
    for eta, r in results.items():
        print(f"{eta:>3}  {r['samples_per_s']:>9.1f}  {seconds(r['to_target_s']):>16}  "
              f"{r['staleness_mean']:>6.2f} mean {r['staleness_max']:>2.0f} max  {r['trainer_wait']:>12.0%}  "
              f"{r['engine_idle']:>11.0%}  {r['reward_last']:>11.3f}")
    base = results[0]
    for eta, r in results.items():
        if eta == 0:
            continue
        speed = r["samples_per_s"] / base["samples_per_s"]
        target = (base["to_target_s"] / r["to_target_s"]
                  if r["to_target_s"] not in (0, float("inf")) and base["to_target_s"] != float("inf") else None)
        print(f"η={eta} over η=0: samples/s × {speed:.2f}"
              + (f", time to reward {args.target} × {1 / target:.2f}" if target else ", time to target: not comparable"))


if __name__ == "__main__":
    main()
