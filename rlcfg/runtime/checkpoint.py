"""Checkpoint directories: written atomically, verified before use, found again on resume, pruned to the last K.

A checkpoint is built under `checkpoints/.tmp-step-N-<pid>/` (workers write the sharded model and optimizer,
the driver its own state and the run's resolved settings) and then renamed to `checkpoints/step-N/`. The last
file written before the rename is `manifest.json`: every file of the checkpoint with its size and a hash. A
checkpoint is complete only with its manifest, and only if every file still matches it, so a folder cut short
by a kill, a full disk or a copy that stopped half-way is recognised as damaged, and resuming falls back to
the newest checkpoint that verifies (saying which ones it skipped and why). Nothing here deletes a checkpoint
that verifies except `prune`, which keeps the newest `keep_last` of those.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import re
import shutil
import warnings
from typing import Any

from rlcfg.ir import PROVENANCE, ROLE_PROVENANCE

_NAME = re.compile(r"^step-(\d+)$")
DRIVER_STATE = "driver.json"
MANIFEST = "manifest.json"
SETTINGS = "experiment.json"  # the run's resolved Experiment at the time of the checkpoint
# Files up to this size are hashed whole; larger ones (model shards) by their size plus samples of their
# content: a full hash of a 100 GB checkpoint would cost minutes at every save and every resume, while the
# damage that actually happens (a write cut short, a truncated copy) changes the size or the sampled ends.
_WHOLE_HASH_BYTES = 8 << 20
_SAMPLE_BYTES = 256 << 10
_SAMPLES = 4


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


def fsync_tree(path: str) -> None:
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(dirpath)


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str, data: bytes | str) -> None:
    """Write a file under a temporary name, flush it to disk, then rename it into place: a reader (or a run
    killed half-way) sees the old file or the new one, never a part."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def digest(file: str, size: int | None = None) -> str:
    size = os.path.getsize(file) if size is None else size
    h = hashlib.blake2b(digest_size=16)
    with open(file, "rb") as f:
        if size <= _WHOLE_HASH_BYTES:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        else:
            for i in range(_SAMPLES):
                f.seek((size - _SAMPLE_BYTES) * i // (_SAMPLES - 1))
                h.update(f.read(_SAMPLE_BYTES))
    return h.hexdigest()


def _files(path: str) -> list[str]:
    out = []
    for dirpath, _dirs, names in os.walk(path):
        for name in names:
            rel = os.path.relpath(os.path.join(dirpath, name), path)
            if rel != MANIFEST:
                out.append(rel)
    return sorted(out)


def write_manifest(path: str) -> None:
    files = {}
    for rel in _files(path):
        full = os.path.join(path, rel)
        size = os.path.getsize(full)
        files[rel] = {"size": size, "blake2b": digest(full, size)}
    write_atomic(os.path.join(path, MANIFEST), json.dumps({"version": 1, "files": files}, indent=1, sort_keys=True))


def commit(tmp: str, root: str, step: int, driver_state: dict[str, Any],
           settings: dict[str, Any] | None = None) -> str:
    """Write the driver's state (and the run's settings) into `tmp`, the manifest last, flush everything to
    disk, and publish it as `step-N`."""
    with open(os.path.join(tmp, DRIVER_STATE), "w", encoding="utf-8") as f:
        json.dump(driver_state, f, indent=1, sort_keys=True)
    if settings is not None:
        with open(os.path.join(tmp, SETTINGS), "w", encoding="utf-8") as f:
            json.dump(settings, f, indent=1, sort_keys=True)
    fsync_tree(tmp)
    write_manifest(tmp)
    final = step_dir(root, step)
    if os.path.exists(final):
        # The same step saved again (a resumed run re-reaching it, after it fell back from this one): the new
        # one is complete on disk before the old one goes.
        old = os.path.join(root, f".old-{os.path.basename(final)}-{os.getpid()}")
        os.rename(final, old)
        os.rename(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, final)
    fsync_dir(root)
    return final


def verify(path: str, hashes: bool = True) -> str | None:
    """None when the checkpoint at `path` is complete and every file matches its manifest; else why not.
    Without `hashes`, only that every file is there with its size (what pruning needs at every save)."""
    manifest_file = os.path.join(path, MANIFEST)
    if not os.path.isfile(manifest_file):
        return "it has no manifest (unfinished, or written by an rlcfg before checkpoints had one)"
    try:
        with open(manifest_file, encoding="utf-8") as f:
            files = json.load(f)["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return "its manifest is damaged"
    for rel, entry in sorted(files.items()):
        full = os.path.join(path, rel)
        try:
            size = os.path.getsize(full)
        except OSError:
            return f"{rel} is missing"
        if size != entry.get("size"):
            return f"{rel} has {size} bytes, its manifest says {entry.get('size')}"
        if not hashes:
            continue
        try:
            if digest(full, size) != entry.get("blake2b"):
                return f"{rel} does not match its hash in the manifest"
        except OSError as exc:
            return f"{rel} cannot be read ({exc.strerror or exc})"
    return None


def candidates(root: str) -> list[tuple[int, str]]:
    """(step, path) of every published `step-N` folder under `root`, oldest first (verified or not)."""
    if not os.path.isdir(root):
        return []
    found = []
    for name in os.listdir(root):
        m = _NAME.match(name)
        path = os.path.join(root, name)
        if m and os.path.isdir(path):
            found.append((int(m.group(1)), path))
    return sorted(found)


def complete(root: str) -> list[tuple[int, str]]:
    """(step, path) of every checkpoint under `root` that has its manifest, oldest first."""
    return [(s, p) for s, p in candidates(root) if os.path.isfile(os.path.join(p, MANIFEST))]


def latest(root: str) -> str | None:
    done = complete(root)
    return done[-1][1] if done else None


def newest_good(root: str) -> tuple[str | None, list[tuple[str, str]]]:
    """The newest checkpoint under `root` that verifies, and (path, reason) of each newer one it passed over.
    A checkpoint whose files load unsafely is not skipped: the caller refuses it (verify_loadable)."""
    skipped = []
    for _step, path in reversed(candidates(root)):
        reason = verify(path)
        if reason is None:
            try:
                verify_loadable(path)
            except DamagedCheckpointError as exc:
                reason = str(exc)
        if reason is None:
            return path, skipped
        skipped.append((path, reason))
    return None, skipped


def clean_partial(root: str) -> list[str]:
    """Delete the leftovers of checkpoints that a killed run did not finish."""
    removed = []
    if os.path.isdir(root):
        for name in os.listdir(root):
            if name.startswith((".tmp-step-", ".old-step-")):
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)
                removed.append(name)
    return removed


def prune(root: str, keep_last: int | None) -> list[str]:
    """Delete the checkpoints older than the newest `keep_last` that verify. A damaged checkpoint never
    counts as one of those kept, so a run whose recent saves were damaged keeps its older good ones."""
    if not keep_last:
        return []
    good = 0
    removed = []
    for _step, path in reversed(candidates(root)):
        if good >= keep_last:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        elif verify(path, hashes=False) is None:
            good += 1
    return removed


def read_driver_state(path: str) -> dict[str, Any]:
    file = os.path.join(path, DRIVER_STATE)
    if not os.path.isfile(file):
        raise FileNotFoundError(f"{path} is not a complete rlcfg checkpoint (no {DRIVER_STATE})")
    try:
        with open(file, encoding="utf-8") as f:
            state = json.load(f)
        int(state["step"])
        return state
    except (ValueError, KeyError, TypeError):
        raise DamagedCheckpointError(f"{file} is damaged (not the JSON of an rlcfg checkpoint)") from None


def read_settings(path: str) -> dict[str, Any] | None:
    file = os.path.join(path, SETTINGS)
    if not os.path.isfile(file):
        return None
    with open(file, encoding="utf-8") as f:
        return json.load(f)


# Settings of a run that a checkpoint may be continued with when they differ: where things are written and
# logged, how often checkpoints are kept, how long the run goes on, and how the work is laid out on the
# hardware (torch.distributed.checkpoint reshards onto another layout; the arithmetic is the same). A role's
# environment variables tune the machine (NCCL, hub mirrors, allocators) far more often than the arithmetic.
_FREE_TO_CHANGE = (
    *PROVENANCE, *(f"roles.*.{name}" for name in ROLE_PROVENANCE),
    "name", "checkpointing", "logging", "cluster", "colocation", "schedule.total_steps", "schedule.epochs",
    "schedule.eval_interval", "schedule.eval_epoch_interval", "schedule.eval_time_interval_s",
    "schedule.eval_before_train", "eval_sampling", "data.eval_files", "data.eval_max_prompt_length",
    "roles.*.resources", "roles.*.parallelism", "roles.*.offload", "roles.*.micro_batch_size",
    "roles.*.forward_micro_batch_size", "roles.*.gradient_checkpointing", "roles.*.sequence_packing",
    "roles.*.max_tokens_per_micro_batch", "roles.*.engine", "roles.*.backend", "roles.*.env",
)


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list) and prefix == "roles":
        for role in value:
            _flatten(role, f"roles.{role.get('name')}" if isinstance(role, dict) else prefix, out)
    else:
        out[prefix] = value


def _free(key: str) -> bool:
    generic = re.sub(r"^roles\.[^.]+", "roles.*", key)
    return any(generic == p or generic.startswith(p + ".") for p in _FREE_TO_CHANGE)


_PATH_KEYS = re.compile(r"(\.path|\.tokenizer|_files)$")


def _comparable(key: str, value: Any) -> Any:
    """File names compare as the files they name: `runs/qs` and `./runs/qs/` are one folder."""
    if _PATH_KEYS.search(key):
        if isinstance(value, str):
            return os.path.normpath(value)
        if isinstance(value, list):
            return [os.path.normpath(v) if isinstance(v, str) else v for v in value]
    return value


def math_differences(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """The settings (dotted keys of the Experiment) that differ between a checkpoint's run and this one and
    that change what the run computes, as `key: saved -> current`."""
    a: dict[str, Any] = {}
    b: dict[str, Any] = {}
    _flatten(saved, "", a)
    _flatten(current, "", b)
    out = []
    # A setting present on one side only is one that the rlcfg of the other side did not have (a newer rlcfg
    # adds settings with the old behaviour as their default): nothing to compare.
    for key in sorted(set(a) & set(b)):
        if not _free(key) and _comparable(key, a[key]) != _comparable(key, b[key]):
            out.append(f"{key}: {json.dumps(a[key])} -> {json.dumps(b[key])}")
    return out


class CheckpointError(ValueError):
    """A checkpoint that cannot be resumed from; the message names the file and why."""


class UnsafeCheckpointError(CheckpointError):
    """A checkpoint file that would run code when loaded."""


class DamagedCheckpointError(UnsafeCheckpointError):
    """A checkpoint file that is cut short or not what its name says (a subclass of UnsafeCheckpointError so
    that callers that refuse unsafe checkpoints refuse damaged ones too)."""


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
        if "weights_only" not in str(exc) and "Unsupported global" not in str(exc):  # cut short, not hostile
            raise DamagedCheckpointError(f"{file} cannot be read (UnpicklingError); the checkpoint is "
                                         "damaged") from None
        named = re.search(r"Unsupported global: GLOBAL (\S+)", str(exc))
        what = f"asks to run `{named.group(1)}` when loaded" if named else "holds more than tensors and plain values"
        raise UnsafeCheckpointError(f"{file} {what}; rlcfg loads no code from a checkpoint. Resume only from "
                                    "checkpoints this run (or a run you trust) wrote") from None
    except Exception as exc:
        raise DamagedCheckpointError(f"{file} cannot be read ({type(exc).__name__}); the checkpoint is damaged") from None


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
                raise DamagedCheckpointError(f"{file} is not a readable checkpoint index ({type(exc).__name__}: "
                                            f"{exc}); the checkpoint is damaged") from None
