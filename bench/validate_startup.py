"""Whole-process start-up time of `rlcfg validate` on each template, against `python -c "import torch"`.

The issue's target: validating a config costs at most a tenth of what merely importing torch costs, so
checking a config before a job is always worth it. Both are measured in the same run, interleaved, so a busy
machine slows both alike; the median of N runs is reported.

Two ratios are printed: wall time (the target, meant for a quiet machine) and CPU time (user + system of the
child). On a machine other jobs keep busy, wall time mostly measures the wait for a core; CPU time still
measures the work, so it is the figure to compare between runs there.

A third line, the floor, is what importing the libraries every `validate` needs (pydantic, ruamel.yaml; a plain
`validate` call does not import typer) costs in a fresh process that then ends as a check does, without tearing
the interpreter down (rlcfg.cli.console): the part of the ratio that no change to rlcfg's own code can remove. Each
template's line also gives rlcfg's own time, the median of its runs less the floor run beside each, and the last
lines what the target leaves to it and how fast `import torch` may get before the worst template misses: torch
itself takes 0.9 s to 1.3 s on one machine from one run to the next, which moves every ratio, while rlcfg's own
milliseconds stay put.

The timed runs find each section's compiled schema in the cache (rlcfg.schema.compiled), as every run after the
first on an installation does; the untimed warm-up run writes it, into a folder of the bench's own. The last
column is the first run's time, with an empty cache each time: what a check costs once after an install or an
upgrade.

    python bench/validate_startup.py [-n 9] [--templates DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.10


def measure(argv: list[str], env: dict) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + system) and exit code of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, cpu, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, default=9, help="runs per measurement (default 9)")
    parser.add_argument("--templates", type=Path, default=ROOT / "templates", help="folder of configs to validate")
    args = parser.parse_args()

    # An installed package has its bytecode compiled (pip does it at install time); a shell that sets
    # PYTHONDONTWRITEBYTECODE would make every timed run recompile rlcfg from source instead.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["NO_COLOR"] = "1"
    cache = tempfile.mkdtemp(prefix="rlcfg-bench-cache-")
    env["RLCFG_CACHE_DIR"] = cache
    templates = sorted(args.templates.glob("*.yaml"))
    if not templates:
        print(f"no templates under {args.templates}")
        return 2
    has_torch = importlib.util.find_spec("torch") is not None
    commands = {t.name: [sys.executable, "-m", "rlcfg", "validate", str(t)] for t in templates}
    baseline = [sys.executable, "-c", "import torch"]
    # A check flushes its output and ends without tearing the interpreter down; a floor that tore down pydantic's
    # modules would hide that much (a sixth of a check) of rlcfg's own time.
    floor = [sys.executable, "-c", "import os, pydantic.main, pydantic.fields, ruamel.yaml; os._exit(0)"]

    # One untimed run of each warms the file cache and Python's bytecode cache, and writes the compiled schemas.
    for argv in [*commands.values(), floor, *([baseline] if has_torch else [])]:
        measure(argv, env)

    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    torch_times: list[tuple[float, float]] = []
    floor_times: list[tuple[float, float]] = []
    codes: dict[str, int] = {}
    first_times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, argv in commands.items():
            seconds, cpu, codes[name] = measure(argv, env)
            times[name].append((seconds, cpu))
            empty = tempfile.mkdtemp(prefix="rlcfg-bench-empty-")
            first_times[name].append(measure(argv, {**env, "RLCFG_CACHE_DIR": empty})[0])
            shutil.rmtree(empty, ignore_errors=True)
        floor_times.append(measure(floor, env)[:2])
        if has_torch:
            torch_times.append(measure(baseline, env)[:2])

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}; median of {args.runs} runs")
    torch_wall = statistics.median(w for w, _ in torch_times) if has_torch else None
    torch_cpu = statistics.median(c for _, c in torch_times) if has_torch else None
    if torch_wall is not None:
        import torch  # noqa: F401  (only for its version; the timing above ran in a fresh process)

        print(f'python -c "import torch" (torch {sys.modules["torch"].__version__}): {torch_wall * 1000:8.1f} ms wall, '
              f"{torch_cpu * 1000:8.1f} ms CPU")
    else:
        print("torch is not installed: absolute times only (install torch to measure the ratio)")
    floor_wall = statistics.median(w for w, _ in floor_times)
    floor_cpu = statistics.median(c for _, c in floor_times)
    line = (f'floor: import pydantic, ruamel.yaml (no teardown): {floor_wall * 1000:8.1f} ms wall, '
            f"{floor_cpu * 1000:8.1f} ms CPU")
    if torch_wall:
        line += f"  ratio {floor_wall / torch_wall:.3f} wall, {floor_cpu / torch_cpu:.3f} CPU"
    print(line)
    width = max(len(name) for name in commands)
    worst_wall = worst_cpu = worst_own = slowest = 0.0
    for name in commands:
        wall = statistics.median(w for w, _ in times[name])
        cpu = statistics.median(c for _, c in times[name])
        first = statistics.median(first_times[name])
        own = statistics.median(w - floor for (w, _), (floor, _) in zip(times[name], floor_times))
        worst_own = max(worst_own, own)
        slowest = max(slowest, wall)
        line = (f"rlcfg validate {name:<{width}}  {wall * 1000:8.1f} ms wall {cpu * 1000:7.1f} ms CPU  "
                f"(exit {codes[name]}, {own * 1000:+5.1f} ms over the floor)")
        if torch_wall:
            worst_wall, worst_cpu = max(worst_wall, wall / torch_wall), max(worst_cpu, cpu / torch_cpu)
            line += f"  ratio {wall / torch_wall:.3f} wall, {cpu / torch_cpu:.3f} CPU"
        line += f"  | first run {first * 1000:6.1f} ms" + (f" ({first / torch_wall:.3f})" if torch_wall else "")
        print(line)
    shutil.rmtree(cache, ignore_errors=True)
    if torch_wall:
        verdict = "meets" if worst_wall <= TARGET else "misses"
        print(f"worst ratio {worst_wall:.3f} wall ({verdict} the target of {TARGET:.2f} on a quiet machine), "
              f"{worst_cpu:.3f} CPU")
        print(f"rlcfg's own time: at most {worst_own * 1000:.1f} ms over the floor; with this run's torch the target "
              f"leaves it {(TARGET * torch_wall - floor_wall) * 1000:.1f} ms")
        print(f"the target holds while `import torch` takes at least {slowest / TARGET * 1000:.0f} ms "
              f"(this run: {torch_wall * 1000:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
