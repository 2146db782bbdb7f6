"""Checkpoint directories: published atomically, found again, pruned; a killed write is never picked."""

import os

import pytest

from rlcfg.runtime import checkpoint as ckpt


def make(root, step):
    tmp = ckpt.begin(str(root), step)
    with open(os.path.join(tmp, "weights"), "w") as f:
        f.write(str(step))
    return ckpt.commit(tmp, str(root), step, {"step": step})


def test_latest_and_prune(tmp_path):
    for step in (2, 4, 6):
        make(tmp_path, step)
    assert ckpt.latest(str(tmp_path)).endswith("step-00000006")
    ckpt.prune(str(tmp_path), keep_last=2)
    assert [s for s, _ in ckpt.complete(str(tmp_path))] == [4, 6]
    assert ckpt.read_driver_state(ckpt.latest(str(tmp_path))) == {"step": 6}


def test_an_unfinished_checkpoint_is_never_picked_and_is_cleaned(tmp_path):
    make(tmp_path, 2)
    tmp = ckpt.begin(str(tmp_path), 4)  # a run killed while writing step 4
    os.makedirs(os.path.join(str(tmp_path), "step-00000008"))  # a directory without the driver state
    assert ckpt.latest(str(tmp_path)).endswith("step-00000002")
    assert ckpt.clean_partial(str(tmp_path)) == [os.path.basename(tmp)]
    assert not os.path.exists(tmp)


def test_resaving_a_step_replaces_it(tmp_path):
    make(tmp_path, 2)
    make(tmp_path, 2)
    assert [s for s, _ in ckpt.complete(str(tmp_path))] == [2]


def test_reading_a_directory_that_is_no_checkpoint(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a complete rlcfg checkpoint"):
        ckpt.read_driver_state(str(tmp_path))
