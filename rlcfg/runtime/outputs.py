"""The output folder of a run: one folder is one run.

    <output>/experiment.json   the resolved settings of the run
    <output>/metrics.jsonl     one line per step (each step exactly once, also across resumes)
    <output>/plots/*.png       refreshed at each checkpoint and at the end
    <output>/hf_model/         the trained model as a Hugging Face checkpoint, refreshed at each checkpoint
    <output>/checkpoints/      step-N/ folders, each with a manifest (see checkpoint.py)

Everything here is replaced atomically: the exported model is copied from the checkpoint that holds it (as
hard links where the file system allows, so it costs no space) into a temporary folder, flushed, and swapped
in; its `rlcfg-export.json` names the step it holds, so a half-swapped or stale export is recognised and
redone from the checkpoint.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
from typing import IO

from rlcfg.runtime.checkpoint import fsync_dir, fsync_tree, write_atomic

HF_MODEL = "hf_model"
EXPORT_MARKER = "rlcfg-export.json"
# What `--overwrite` deletes from the output folder (besides the checkpoints), and nothing else: the quickstart's
# inputs, the user's own files and folders stay.
RUN_FILES = ("metrics.jsonl", "experiment.json", "placement.json", "plots", HF_MODEL, "tensorboard")


class RunFolderBusy(RuntimeError):
    pass


def lock(output_dir: str) -> IO[str]:
    """Hold `<output>/.rlcfg.lock` for the life of the run: two runs writing one folder would interleave their
    checkpoints and metrics. The lock goes with the process, however it ends."""
    handle = open(os.path.join(output_dir, ".rlcfg.lock"), "a+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        handle.seek(0)
        holder = handle.read().strip() or "?"
        handle.close()
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            raise RunFolderBusy(f"another rlcfg run (pid {holder}) is using {output_dir}; wait for it to end, or "
                                "choose another --output") from None
        raise
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def _link_or_copy(src: str, dst: str) -> None:
    """Weight files are hard links into the checkpoint (no second copy of a large model); the small files a
    user may edit in place (config.json, the tokenizer's) are copies, so such an edit cannot change the
    checkpoint behind its manifest."""
    if os.path.getsize(src) >= 1 << 20:
        try:
            os.link(src, dst)
            return
        except OSError:
            pass
    shutil.copy2(src, dst)


def exported_step(output_dir: str) -> int | None:
    """The step of the exported model in `output_dir`, None when there is none (or it is incomplete)."""
    try:
        with open(os.path.join(output_dir, HF_MODEL, EXPORT_MARKER), encoding="utf-8") as f:
            return int(json.load(f)["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def model_tmp(output_dir: str) -> str:
    """A fresh temporary folder beside `<output>/hf_model`, for an export written straight into it."""
    tmp = os.path.join(output_dir, f".{HF_MODEL}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    return tmp


def publish_model(source: str, output_dir: str, step: int) -> str:
    """Make `<output>/hf_model` a copy of the exported model at `source` (a checkpoint's `hf/`)."""
    tmp = model_tmp(output_dir)
    shutil.copytree(source, tmp, copy_function=_link_or_copy)
    return install_model(tmp, output_dir, step, os.path.abspath(os.path.dirname(source)))


def install_model(tmp: str, output_dir: str, step: int, checkpoint: str | None = None) -> str:
    """Swap the complete export in `tmp` in as `<output>/hf_model`, its marker naming `step`."""
    final = os.path.join(output_dir, HF_MODEL)
    with open(os.path.join(tmp, EXPORT_MARKER), "w", encoding="utf-8") as f:
        json.dump({"step": step, "checkpoint": checkpoint}, f)
    fsync_tree(tmp)
    old = None
    if os.path.exists(final):
        old = os.path.join(output_dir, f".{HF_MODEL}.old-{os.getpid()}")
        shutil.rmtree(old, ignore_errors=True)
        os.rename(final, old)
    os.rename(tmp, final)
    fsync_dir(output_dir)
    if old:
        shutil.rmtree(old, ignore_errors=True)
    return final


def clean_leftovers(output_dir: str) -> None:
    """Temporary copies a killed run left (it held the folder's lock, so no live run owns them)."""
    if not os.path.isdir(output_dir):
        return
    for name in os.listdir(output_dir):
        if name.startswith((f".{HF_MODEL}.tmp-", f".{HF_MODEL}.old-")):
            shutil.rmtree(os.path.join(output_dir, name), ignore_errors=True)
        elif ".tmp-" in name and name.startswith(("metrics.jsonl", "experiment.json")):
            os.remove(os.path.join(output_dir, name))


def overwrite(output_dir: str, checkpoint_root: str) -> list[str]:
    """Delete the run in `output_dir` for `--overwrite`: its checkpoints (the step-N folders, not whatever
    else the checkpoint folder holds) and the files of RUN_FILES. Returns what was deleted."""
    from rlcfg.runtime import checkpoint as ckpt

    removed = []
    ckpt.clean_partial(checkpoint_root)
    for _step, path in ckpt.candidates(checkpoint_root):
        shutil.rmtree(path)
        removed.append(path)
    for name in RUN_FILES:
        path = os.path.join(output_dir, name)
        if os.path.isdir(path):
            shutil.rmtree(path)
            removed.append(path)
        elif os.path.exists(path):
            os.remove(path)
            removed.append(path)
    return removed


def write_json(path: str, value: object) -> None:
    write_atomic(path, json.dumps(value, indent=1))
