"""Checkpoint directories: written atomically, found again on resume, pruned to the last K.

A checkpoint is built under `checkpoints/.tmp-step-N-<pid>/` (workers write the sharded model and optimizer,
the driver writes its own state last) and then renamed to `checkpoints/step-N/`. A rename within one file
system is atomic, so a run killed at any moment leaves either a complete `step-N` or a `.tmp-*` leftover
that the next run deletes: `latest()` can never pick a half-written checkpoint.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import shutil
import warnings
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


class UnsafeCheckpointError(ValueError):
    """A checkpoint file that would run code when loaded."""


# torch.distributed.checkpoint (FSDP's and megatron-core's torch_dist format) reads its `.metadata` with plain
# pickle, so a planted `.metadata` would run code in every worker that resumes from the folder. Before anything
# loads a checkpoint, its pickles are read once with an unpickler that can only build the plain values and
# metadata classes such files hold; anything else is refused.
_SAFE_GLOBALS = {
    ("torch", "Size"), ("torch.serialization", "_get_layout"), ("collections", "OrderedDict"),
    ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "slice"),
    ("pathlib", "PosixPath"), ("pathlib", "PurePosixPath"), ("pathlib", "WindowsPath"), ("pathlib", "PureWindowsPath"),
}
_SAFE_CLASS_MODULES = ("torch.distributed.checkpoint.", "megatron.core.dist_checkpointing.")


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _SAFE_GLOBALS:
            return super().find_class(module, name)
        if module == "torch":
            import torch

            value = getattr(torch, name, None)
            if isinstance(value, (torch.dtype, torch.layout, torch.memory_format)):
                return value
        if module.startswith(_SAFE_CLASS_MODULES) and "." not in name:
            value = super().find_class(module, name)
            if isinstance(value, type):  # a metadata class or enum, never a function
                return value
        raise UnsafeCheckpointError(f"{module}.{name}")


_SMALL_TORCH_FILE = re.compile(r"^(driver_rng|extra-rank\d+)\.pt$")  # rlcfg's own RNG and scheduler states


def _verify_torch_file(file: str) -> None:
    import torch

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's note on the pickle protocol says nothing about safety
            torch.load(file, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        named = re.search(r"Unsupported global: GLOBAL (\S+)", str(exc))
        what = f"asks to run `{named.group(1)}` when loaded" if named else "holds more than tensors and plain values"
        raise UnsafeCheckpointError(f"{file} {what}; rlcfg loads no code from a checkpoint. Resume only from "
                                    "checkpoints this run (or a run you trust) wrote") from None
    except Exception as exc:
        raise UnsafeCheckpointError(f"{file} cannot be read ({type(exc).__name__}); the checkpoint is damaged") from None


def verify_loadable(path: str) -> None:
    """Refuse a checkpoint folder whose pickled metadata would run code when loaded (UnsafeCheckpointError names
    the file and what it asks for). The other files are read with `torch.load(weights_only=True)`."""
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            file = os.path.join(dirpath, name)
            if _SMALL_TORCH_FILE.match(name):
                _verify_torch_file(file)
            if name != ".metadata":
                continue
            with open(file, "rb") as f:
                data = f.read()
            try:
                _MetadataUnpickler(io.BytesIO(data)).load()
            except UnsafeCheckpointError as exc:
                raise UnsafeCheckpointError(
                    f"{file} asks to run `{exc}` when loaded; rlcfg loads no code from a checkpoint. Resume only "
                    "from checkpoints this run (or a run you trust) wrote") from None
            except Exception as exc:  # truncated or not a pickle: the loader would fail on it too
                raise UnsafeCheckpointError(f"{file} is not a readable checkpoint index ({type(exc).__name__}: "
                                            f"{exc}); the checkpoint is damaged") from None
