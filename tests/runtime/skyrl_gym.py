"""What the tests of SkyRL's environments share: the sandbox they need, and SkyRL-Gym's own environments, from the
mirror the oracle suites use, stepped through the same turns as rlcfg's."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from typing import Any, Callable

import pytest


def require_sandbox(check: Callable[[], None] | None = None) -> None:
    """Skip unless code from the data can run in rlcfg's sandbox here, by `check` (default: the sandbox starts);
    fail instead with RLCFG_REQUIRE_SANDBOX."""
    from rlcfg.runtime import sandbox

    try:
        (check or sandbox.check_available)()
    except ImportError as err:
        if os.environ.get("RLCFG_REQUIRE_SANDBOX"):
            raise
        pytest.skip(f"code from the data cannot run here: {err}")


def skyrl_gym_steps(tmp_path_factory: Any, make_env: str, sequences: list[list[str]]) -> list:
    """Each sequence of actions stepped through a fresh environment of SkyRL-Gym at the mirror's last commit, until
    done: [observations, reward, done] per turn. `make_env` is the Python that builds it (`env = ...`, imports
    included). Skipped without MIRROR_ROOT, or where SkyRL-Gym does not import."""
    root = os.environ.get("MIRROR_ROOT")
    if not root:
        pytest.skip("MIRROR_ROOT is not set")
    archive = subprocess.run(["git", "-C", os.path.join(root, "NovaSky-AI+SkyRL", "repo"), "archive", "HEAD",
                              "skyrl-gym/skyrl_gym"], capture_output=True, check=True).stdout
    where = tmp_path_factory.mktemp("skyrl-gym")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(where, filter="data")
    indented = "\n".join("    " + line for line in make_env.strip().splitlines())
    script = (f"import json, sys\nsys.path.insert(0, {str(where / 'skyrl-gym')!r})\nout = []\n"
              "for actions in json.loads(sys.argv[1]):\n"
              f"{indented}\n"
              "    steps = []\n"
              "    for a in actions:\n"
              "        s = env.step(a)\n"
              "        steps.append([s['observations'], s['reward'], s['done']])\n"
              "        if s['done']:\n"
              "            break\n"
              "    out.append(steps)\n"
              "print(json.dumps(out))\n")
    done = subprocess.run([sys.executable, "-c", script, json.dumps(sequences)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"SkyRL-Gym does not import here: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def rlcfg_steps(make_task: Callable[[], Any], step: Callable[[Any, str], Any], sequences: list[list[str]]) -> list:
    """The same, through rlcfg's environment: `step(task, action)` gives an rlcfg.runtime.episodes.Step."""
    out = []
    for actions in sequences:
        task = make_task()
        steps = []
        for action in actions:
            s = step(task, action)
            steps.append([s.observations, s.reward, s.done])
            if s.done:
                break
        out.append(steps)
    return out
