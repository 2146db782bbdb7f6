"""SkyRL-Gym's `lcb` environment as a reward: the last fenced code block of a response, run against the task's tests
in rlcfg's sandbox (rlcfg.runtime.sandbox) by rlcfg.runtime.lcb_harness, scores 1 when every test passes, else 0.

The ground truth is the JSON string SkyRL's LiveCodeBench preparation script writes: a list of tests, each with
`input`, `output` and `testtype`; a functional task's first test names its function in `metadata.func_name`.
"""

from __future__ import annotations

import json
import math
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rlcfg.runtime import sandbox
from rlcfg.runtime.data import DataError

# The last fenced block, with or without a language tag, is the program (a response without one scores 0).
_CODE_BLOCK = re.compile(r"```(?:\w+)?\n(.*?)```", re.DOTALL)
TEST_TIMEOUT_S = 6  # the environment's alarm per test
# Beyond the environment, which limits time only: a program may use this much address space, write this much.
MEMORY_BYTES = 8 << 30
FILE_BYTES = 64 << 20
# Programs graded at once by one rollout worker: each is a sandboxed interpreter on a core of its own.
WORKERS = max(1, min(32, os.cpu_count() or 1))
HARNESS = Path(__file__).with_name("lcb_harness.py")


class GroundTruthError(DataError, ValueError):
    """A task's tests are not what SkyRL's LiveCodeBench preparation writes (SkyRL-Gym stops on them too); a
    DataError, so that a run stops on it with its message."""


def extract_code(response: str) -> str | None:
    blocks = _CODE_BLOCK.findall(response)
    return blocks[-1].strip() if blocks else None


def job(code: str, ground_truth: str) -> dict:
    """The harness's job for one program, from the task's tests as SkyRL's data writes them."""
    try:
        tests = json.loads(ground_truth)
        inputs = [t["input"] for t in tests]
        outputs = [t["output"] for t in tests]
        first = tests[0]
        fn_name = first.get("metadata", {}).get("func_name") if first.get("testtype") == "functional" else None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as err:
        raise GroundTruthError(
            f"the lcb environment's ground truth (reward_spec.ground_truth) must be a JSON list of tests, each with "
            f"`input` and `output`, as SkyRL's livecodebench/lcb_dataset.py writes it; this one is not "
            f"({type(err).__name__}: {err}): {ground_truth[:120]!r}") from None
    if first.get("testtype") == "functional" and fn_name is None:
        raise GroundTruthError("a functional lcb task must name its function in its first test's "
                               f"`metadata.func_name`: {ground_truth[:120]!r}")
    return {"code": code, "inputs": inputs, "outputs": outputs, "fn_name": fn_name, "timeout": TEST_TIMEOUT_S}


def limits(tests: int) -> sandbox.Limits:
    # The environment kills the grading process after (timeout + 1) × tests + 5 seconds.
    wall = (TEST_TIMEOUT_S + 1) * tests + 5
    return sandbox.Limits(wall_s=wall, cpu_s=math.ceil(wall), memory_bytes=MEMORY_BYTES, file_bytes=FILE_BYTES)


def _grade(work: dict, harness: str) -> float:
    files = {"job.json": json.dumps(work), "harness.py": harness}
    verdict, _done = sandbox.run_json(files, ["python", "-I", "harness.py"], limits(len(work["inputs"])))
    return 1.0 if isinstance(verdict, dict) and verdict.get("passed") is True else 0.0


def score_many(pairs: list[tuple[str, str | None]]) -> list[float]:
    """Each (response, ground truth) scored, the programs graded in parallel sandboxes. Every task's tests are read
    before any program runs, so a malformed one stops the run first."""
    works = []
    for response, truth in pairs:
        code = extract_code(response)
        works.append(None if code is None or truth is None else job(code, truth))
    harness = HARNESS.read_text(encoding="utf-8")
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return list(pool.map(lambda work: 0.0 if work is None else _grade(work, harness), works))


def score(response: str, ground_truth: str | None) -> float:
    return score_many([(response, ground_truth)])[0]


def check_ready() -> None:
    """Raise ImportError, saying what to install, unless programs can be graded here as the environment grades
    them: a working sandbox, and numpy and pandas for the preamble every program runs after."""
    import importlib.util

    for package in ("numpy", "pandas"):
        if importlib.util.find_spec(package) is None:
            raise ImportError(f"{package}, which every graded program finds imported (pip install {package})")
    sandbox.check_available()
