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


# ---- a checkpoint folder never runs code ---------------------------------------------------------------------

class _Planted:
    """Unpickling this creates a file: the proof that a loader ran code from the checkpoint."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _dcp_checkpoint(path):
    import torch
    import torch.distributed.checkpoint as dcp

    model = torch.nn.Linear(3, 2)
    dcp.save({"model": model.state_dict()}, checkpoint_id=str(path))
    return path


def test_a_checkpoint_written_by_torch_distributed_checkpoint_verifies(tmp_path):
    import torch

    from rlcfg.runtime.checkpoint import verify_loadable

    folder = _dcp_checkpoint(tmp_path / "actor")
    torch.save({"rng": torch.get_rng_state()}, folder / "extra-rank0.pt")
    torch.save({"python": __import__("random").getstate(), "torch": torch.get_rng_state()}, tmp_path / "driver_rng.pt")
    verify_loadable(str(tmp_path))


@pytest.mark.parametrize("planted", [".metadata", "extra-rank0.pt", "driver_rng.pt"])
def test_a_planted_pickle_is_refused_before_it_runs(tmp_path, planted):
    import pickle

    from rlcfg.runtime.checkpoint import UnsafeCheckpointError, verify_loadable

    folder = _dcp_checkpoint(tmp_path / "actor")
    marker = tmp_path / "pwned"
    target = (folder / planted) if planted != "driver_rng.pt" else tmp_path / planted
    target.write_bytes(pickle.dumps(_Planted(str(marker))))
    with pytest.raises(UnsafeCheckpointError, match="loads no code from a checkpoint"):
        verify_loadable(str(tmp_path))
    assert not marker.exists()


def test_a_truncated_index_is_reported_as_damage(tmp_path):
    from rlcfg.runtime.checkpoint import UnsafeCheckpointError, verify_loadable

    folder = _dcp_checkpoint(tmp_path / "actor")
    data = (folder / ".metadata").read_bytes()
    (folder / ".metadata").write_bytes(data[: len(data) // 2])
    with pytest.raises(UnsafeCheckpointError, match="damaged"):
        verify_loadable(str(tmp_path))


def test_the_runtime_never_unpickles_with_weights_only_false():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "rlcfg"
    offenders = [str(p) for p in root.rglob("*.py") if "weights_only=False" in p.read_text()]
    assert not offenders


def test_rlcfg_run_refuses_to_resume_from_a_planted_checkpoint_before_any_worker_starts(tmp_path):
    import pickle
    import subprocess
    import sys
    from pathlib import Path

    template = Path(__file__).resolve().parents[2] / "templates" / "quickstart-cpu.yaml"
    folder = tmp_path / "ck"
    folder.mkdir()
    marker = tmp_path / "pwned"
    (folder / "driver_rng.pt").write_bytes(pickle.dumps(_Planted(str(marker))))
    (folder / "driver.json").write_text('{"step": 1, "sampler": {}}')
    proc = subprocess.run([sys.executable, "-m", "rlcfg", "run", str(template), "--resume-from", str(folder),
                           "--steps", "1", "-o", str(tmp_path / "out")], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "loads no code from a checkpoint" in proc.stderr and "Traceback" not in proc.stderr
    assert "starting the workers" not in proc.stderr
    assert not marker.exists()
