"""Checkpoint directories: written atomically, found again on resume, pruned to the last K.

A checkpoint is built under `checkpoints/.tmp-step-N-<pid>/` (workers write the sharded model and optimizer,
the driver writes its own state last) and then renamed to `checkpoints/step-N/`. A rename within one file
system is atomic, so a run killed at any moment leaves either a complete `step-N` or a `.tmp-*` leftover
that the next run deletes: `latest()` can never pick a half-written checkpoint.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from typing import Any

_NAME = re.compile(r"^step-(\d+)$")
DRIVER_STATE = "driver.json"


def step_dir(root: str, step: int) -> str:
    return os.path.join(root, f"step-{step:08d}")


def begin(root: str, step: int) -> str:
    """A fresh temporary directory for the checkpoint of `step`."""
    os.makedirs(root, exist_ok=True)
    tmp = os.path.join(root, f".tmp-step-{step:08d}-{os.getpid()}")
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    os.makedirs(tmp)
    return tmp


def _fsync_tree(path: str) -> None:
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(dirpath)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def commit(tmp: str, root: str, step: int, driver_state: dict[str, Any]) -> str:
    """Write the driver's state into `tmp`, flush everything to disk, and publish it as `step-N`."""
    with open(os.path.join(tmp, DRIVER_STATE), "w", encoding="utf-8") as f:
        json.dump(driver_state, f, indent=1, sort_keys=True)
    _fsync_tree(tmp)
    final = step_dir(root, step)
    if os.path.exists(final):  # the same step saved again (a resumed run re-reaching it): replace it
        shutil.rmtree(final)
    os.rename(tmp, final)
    _fsync_dir(root)
    return final


def complete(root: str) -> list[tuple[int, str]]:
    """(step, path) of every complete checkpoint under `root`, oldest first."""
    if not os.path.isdir(root):
        return []
    found = []
    for name in os.listdir(root):
        m = _NAME.match(name)
        path = os.path.join(root, name)
        if m and os.path.isfile(os.path.join(path, DRIVER_STATE)):
            found.append((int(m.group(1)), path))
    return sorted(found)


def latest(root: str) -> str | None:
    done = complete(root)
    return done[-1][1] if done else None


def clean_partial(root: str) -> list[str]:
    """Delete the leftovers of checkpoints that a killed run did not finish."""
    removed = []
    if os.path.isdir(root):
        for name in os.listdir(root):
            if name.startswith(".tmp-step-"):
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)
                removed.append(name)
    return removed


def prune(root: str, keep_last: int | None) -> list[str]:
    if not keep_last:
        return []
    done = complete(root)
    removed = []
    for _step, path in done[:-keep_last]:
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def read_driver_state(path: str) -> dict[str, Any]:
    file = os.path.join(path, DRIVER_STATE)
    if not os.path.isfile(file):
        raise FileNotFoundError(f"{path} is not a complete rlcfg checkpoint (no {DRIVER_STATE})")
    with open(file, encoding="utf-8") as f:
        return json.load(f)
