"""Whole-process start-up time of `rlcfg validate` on each template, against `python -c "import torch"`.

The issue's target: validating a config costs at most a tenth of what merely importing torch costs, so
checking a config before a job is always worth it. Both are measured in the same run, interleaved, so a busy
machine slows both alike; the median of N runs is reported.

    python bench/validate_startup.py [-n 7] [--templates DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.10


def wall(argv: list[str], env: dict) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    return time.perf_counter() - start, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, default=7, help="runs per measurement (default 7)")
    parser.add_argument("--templates", type=Path, default=ROOT / "templates", help="folder of configs to validate")
    args = parser.parse_args()

    env = {**os.environ, "NO_COLOR": "1"}
    templates = sorted(args.templates.glob("*.yaml"))
    if not templates:
        print(f"no templates under {args.templates}")
        return 2
    has_torch = importlib.util.find_spec("torch") is not None
    commands = {t.name: [sys.executable, "-m", "rlcfg", "validate", str(t)] for t in templates}
    baseline = [sys.executable, "-c", "import torch"]

    # One untimed run of each warms the file cache and Python's bytecode cache.
    for argv in [*commands.values(), *([baseline] if has_torch else [])]:
        wall(argv, env)

    times: dict[str, list[float]] = {name: [] for name in commands}
    torch_times: list[float] = []
    codes: dict[str, int] = {}
    for _ in range(args.runs):
        for name, argv in commands.items():
            seconds, codes[name] = wall(argv, env)
            times[name].append(seconds)
        if has_torch:
            torch_times.append(wall(baseline, env)[0])

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}; median of {args.runs} runs")
    torch_median = statistics.median(torch_times) if has_torch else None
    if torch_median is not None:
        import torch  # noqa: F401  (only for its version; the timing above ran in a fresh process)

        print(f'python -c "import torch" (torch {sys.modules["torch"].__version__}): {torch_median * 1000:8.1f} ms')
    else:
        print("torch is not installed: absolute times only (install torch to measure the ratio)")
    width = max(len(name) for name in commands)
    worst = 0.0
    for name in commands:
        median = statistics.median(times[name])
        line = f"rlcfg validate {name:<{width}}  {median * 1000:8.1f} ms  (exit {codes[name]})"
        if torch_median:
            ratio = median / torch_median
            worst = max(worst, ratio)
            line += f"  ratio {ratio:.3f}"
        print(line)
    if torch_median:
        verdict = "meets" if worst <= TARGET else "misses"
        print(f"worst ratio {worst:.3f}: {verdict} the target of {TARGET:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
