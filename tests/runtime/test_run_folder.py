"""A run is its output folder: checkpoints that verify themselves (and the fallback when the newest does not),
resuming refused when the math changed, --no-resume / --overwrite, the quickstart's files built atomically,
and the environment's errors (unwritable folders, a full disk, an absent or unreachable cluster) as one-line
errors before any worker starts. Everything here runs without Ray."""

import dataclasses
import errno
import io
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlcfg.ir import to_json  # noqa: E402
from rlcfg.runtime import checkpoint as ckpt  # noqa: E402
from rlcfg.runtime import environment, outputs, quickstart  # noqa: E402
from rlcfg.runtime.driver import Run, RunOptions  # noqa: E402
from rlcfg.runtime.environment import RunEnvironmentError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _save(root, step, settings=None):
    """A checkpoint as the runtime writes one: a torch.distributed.checkpoint shard and index, a rank's extra
    state, the driver's state, the manifest last."""
    import torch
    import torch.distributed.checkpoint as dcp

    tmp = ckpt.begin(str(root), step)
    torch.manual_seed(step)
    model = torch.nn.Linear(64, 64)
    with pytest.warns(UserWarning):  # "torch.distributed is disabled ... assuming a single process"
        dcp.save({"model": model.state_dict()}, checkpoint_id=os.path.join(tmp, "actor"))
    torch.save({"rng": torch.get_rng_state()}, os.path.join(tmp, "actor", "extra-rank0.pt"))
    return ckpt.commit(tmp, str(root), step, {"step": step, "sampler": {}}, settings=settings)


def _truncate(path):
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("damaged", ["__0_0.distcp", ".metadata", "extra-rank0.pt"])
def test_resume_takes_the_newest_checkpoint_that_verifies_and_names_the_ones_it_skipped(tmp_path, damaged):
    for step in (1, 2, 3):
        _save(tmp_path, step)
    newest = ckpt.step_dir(str(tmp_path), 3)
    _truncate(os.path.join(newest, "actor", damaged))
    path, skipped = ckpt.newest_good(str(tmp_path))
    assert path == ckpt.step_dir(str(tmp_path), 2)
    assert [p for p, _ in skipped] == [newest]
    assert damaged in skipped[0][1]  # the reason names the file


def test_a_checkpoint_without_its_manifest_is_incomplete(tmp_path):
    _save(tmp_path, 1)
    second = _save(tmp_path, 2)
    os.remove(os.path.join(second, ckpt.MANIFEST))  # killed before the manifest: never published like this
    path, skipped = ckpt.newest_good(str(tmp_path))
    assert path.endswith("step-00000001") and "no manifest" in skipped[0][1]


def test_pruning_never_deletes_a_checkpoint_that_verifies_for_a_damaged_one(tmp_path):
    for step in (1, 2, 3):
        _save(tmp_path, step)
    _truncate(os.path.join(ckpt.step_dir(str(tmp_path), 3), "actor", "__0_0.distcp"))
    ckpt.prune(str(tmp_path), keep_last=1)
    assert [s for s, _ in ckpt.candidates(str(tmp_path))] == [2, 3]  # step 2 is the one good checkpoint left
    assert ckpt.newest_good(str(tmp_path))[0].endswith("step-00000002")


def test_a_planted_pickle_is_refused_not_skipped(tmp_path):
    import pickle

    _save(tmp_path, 1)
    newest = _save(tmp_path, 2)
    Path(newest, "actor", "extra-rank0.pt").write_bytes(pickle.dumps(print))
    ckpt.write_manifest(newest)  # whoever planted it rewrote the manifest too
    with pytest.raises(ckpt.UnsafeCheckpointError, match="loads no code"):
        ckpt.newest_good(str(tmp_path))


# ---- the settings a checkpoint may be continued with ---------------------------------------------------------

@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    return quickstart.experiment(str(tmp_path_factory.mktemp("qs")), steps=4)


def test_settings_that_change_the_math_are_named_and_the_rest_are_free(experiment):
    actor = experiment.role("actor")
    changed = dataclasses.replace(
        experiment, roles=tuple(dataclasses.replace(r, optimizer=dataclasses.replace(r.optimizer, lr=1e-4))
                                if r is actor else r for r in experiment.roles),
        schedule=dataclasses.replace(experiment.schedule, total_steps=400),
        logging=dataclasses.replace(experiment.logging, directory="/elsewhere"),
        checkpointing=dataclasses.replace(experiment.checkpointing, interval=5))
    diffs = ckpt.math_differences(to_json(experiment), to_json(changed))
    assert diffs == ["roles.actor.optimizer.lr: 0.0005 -> 0.0001"]
    assert ckpt.math_differences(to_json(experiment), to_json(experiment)) == []
    moved = json.loads(json.dumps(to_json(experiment)))
    moved["data"]["train_files"] = [os.path.dirname(f) + "/./" + os.path.basename(f) for f in
                                    moved["data"]["train_files"]]
    moved["dialect"] = "roll"
    assert ckpt.math_differences(to_json(experiment), moved) == []


def _options(out, **kw):
    import io

    return RunOptions(output_dir=str(out), stream=io.StringIO(), **kw)


def test_a_resumed_run_refuses_a_checkpoint_whose_math_differs(experiment, tmp_path):
    _save(tmp_path / "checkpoints", 2, settings=to_json(experiment))
    alg = dataclasses.replace(experiment.algorithm, clip_high=0.28)
    run = Run(quickstart.plan_for(dataclasses.replace(experiment, algorithm=alg)), _options(tmp_path))
    with pytest.raises(RunEnvironmentError, match=r"algorithm.clip_high: 0.2 -> 0.28"):
        run.prepare()
    same = Run(quickstart.plan_for(experiment), _options(tmp_path))
    same.prepare()
    same.release()
    assert same.resume_path.endswith("step-00000002")


def test_no_resume_in_a_folder_with_a_run_asks_for_overwrite(experiment, tmp_path):
    _save(tmp_path / "checkpoints", 2, settings=to_json(experiment))
    with pytest.raises(RunEnvironmentError, match="--overwrite"):
        Run(quickstart.plan_for(experiment), _options(tmp_path, resume=None)).prepare()


def test_overwrite_deletes_the_run_it_names_and_nothing_else(experiment, tmp_path):
    _save(tmp_path / "checkpoints", 2, settings=to_json(experiment))
    for name in ("metrics.jsonl", "experiment.json", "notes.txt"):
        (tmp_path / name).write_text("{}\n")
    (tmp_path / "plots").mkdir()
    (tmp_path / "checkpoints" / "README").write_text("mine")
    run = Run(quickstart.plan_for(experiment), _options(tmp_path, resume=None, overwrite=True))
    run.prepare()
    run.release()
    assert run.resume_path is None
    left = sorted(p.name for p in tmp_path.iterdir())
    assert "metrics.jsonl" not in left and "plots" not in left and "experiment.json" not in left
    assert (tmp_path / "notes.txt").exists() and (tmp_path / "checkpoints" / "README").exists()
    assert not ckpt.candidates(str(tmp_path / "checkpoints"))
    assert "--overwrite: deleted" in run.opt.stream.getvalue()


def test_two_runs_cannot_share_a_folder(experiment, tmp_path):
    held = outputs.lock(str(tmp_path))
    try:
        with pytest.raises(RunEnvironmentError, match="another rlcfg run"):
            Run(quickstart.plan_for(experiment), _options(tmp_path)).prepare()
    finally:
        held.close()


# ---- files built atomically --------------------------------------------------------------------------------

def _instant_warm_start(monkeypatch):
    """The warm start (an SFT run with Ray, tested in test_loop.py) replaced by a copy of the random model: these
    tests are about how the folder is built, not what the model learns."""
    import shutil

    def copy(base, corpus, out, seed=0, stream=None, address=None):
        shutil.copytree(base, os.path.join(out, "hf_model"))
        return os.path.join(out, "hf_model")

    monkeypatch.setattr(quickstart, "warm_start", copy)


def test_a_half_built_quickstart_model_is_rebuilt(tmp_path, monkeypatch):
    _instant_warm_start(monkeypatch)
    path = tmp_path / "rlcfg-quickstart" / "tiny-qwen2"
    quickstart.build_tokenizer(str(path))  # what a kill during the build used to leave
    (tmp_path / "rlcfg-quickstart" / "tiny-qwen2.tmp-999999999").mkdir()  # a killed atomic build
    data = tmp_path / "rlcfg-quickstart" / "train.jsonl"
    data.write_text('{"prompt": "1+2=", "ans')
    exp = quickstart.experiment(str(tmp_path / "out"))
    actor = dataclasses.replace(exp.role("actor"), model=dataclasses.replace(exp.role("actor").model, path=str(path)))
    exp = dataclasses.replace(exp, roles=(actor,), data=dataclasses.replace(exp.data, train_files=(str(data),)))
    assert sorted(quickstart.materialize(exp, stream=io.StringIO())) == sorted([str(path), str(data)])
    assert quickstart.model_complete(str(path))
    assert len(data.read_text().splitlines()) == 169  # the table of 0..12
    assert set(os.listdir(tmp_path / "rlcfg-quickstart")) == {"tiny-qwen2", "train.jsonl"}
    assert quickstart.materialize(exp) == []  # complete now: nothing rebuilt


@pytest.mark.parametrize("damage", ["weights", "stamp", "older recipe"])
def test_a_damaged_or_outdated_quickstart_model_is_rebuilt(tmp_path, monkeypatch, damage):
    _instant_warm_start(monkeypatch)
    path = str(tmp_path / "rlcfg-quickstart" / "tiny-qwen2")
    assert quickstart.build_model_dir(path, stream=io.StringIO())
    weights, stamp = os.path.join(path, "model.safetensors"), os.path.join(path, quickstart.STAMP)
    if damage == "weights":
        with open(weights, "r+b") as f:
            f.seek(-8, os.SEEK_END)
            f.write(b"\0" * 8)
    elif damage == "stamp":
        os.remove(stamp)
    else:
        with open(stamp) as f:
            recorded = json.load(f)
        with open(stamp, "w") as f:
            json.dump(dict(recorded, recipe=dict(recorded["recipe"], version=1)), f)
    assert not quickstart.model_complete(path)
    assert quickstart.ensure_model(path, stream=io.StringIO())
    assert quickstart.model_complete(path)
    assert sorted(os.listdir(os.path.dirname(path))) == ["tiny-qwen2"]  # nothing left of the damaged one


def test_the_exported_model_is_swapped_in_whole(tmp_path):
    src = tmp_path / "ck" / "hf"
    src.mkdir(parents=True)
    (src / "config.json").write_text("{}")
    (src / "model.safetensors").write_bytes(b"\0" * (2 << 20))
    out = tmp_path / "out"
    out.mkdir()
    outputs.publish_model(str(src), str(out), 7)
    assert outputs.exported_step(str(out)) == 7
    (out / "hf_model" / "config.json").write_text('{"edited": true}')  # a user's edit in place ...
    assert (src / "config.json").read_text() == "{}"  # ... never reaches the checkpoint
    (out / ".hf_model.tmp-1").mkdir()
    outputs.clean_leftovers(str(out))
    assert sorted(os.listdir(out)) == ["hf_model"]


# ---- the environment ---------------------------------------------------------------------------------------

def test_a_full_disk_is_refused_before_the_run(experiment, tmp_path, monkeypatch):
    monkeypatch.setattr(environment.shutil, "disk_usage", lambda p: type("U", (), {"free": 1000})())
    with pytest.raises(RunEnvironmentError, match=r"has 1000 B free, and one checkpoint of this run needs about"):
        Run(quickstart.plan_for(experiment), _options(tmp_path)).prepare()


def test_os_errors_read_as_one_line_with_the_path_and_a_hint():
    full = environment.describe_os_error(OSError(errno.ENOSPC, "No space left on device", "/data/run/x"))
    assert full.startswith("the disk holding the folder /data/run/x is full") and "\n" not in full
    denied = environment.describe_os_error(PermissionError(errno.EACCES, "Permission denied", "/data/run"))
    assert "permission denied" in denied and "--output" in denied


def test_an_os_error_raised_in_a_worker_is_found_behind_rays_wrapper():
    from rlcfg.cli.run import _os_error

    cause = OSError(errno.ENOSPC, "No space left on device", "/x")

    class RayTaskError(Exception):  # the shape of ray.exceptions.RayTaskError: the worker's error as .cause
        pass

    wrapped = RayTaskError("long remote traceback")
    wrapped.cause = cause
    assert _os_error(wrapped) is cause
    assert _os_error(ValueError("no")) is None

    class CheckpointException(BaseException):  # torch.distributed.checkpoint's: each rank's error and trace
        def __init__(self, failures):
            self.failures = failures

    wrapped.cause = CheckpointException({0: (cause, "trace")})
    assert _os_error(wrapped) is cause
    wrapped.cause = RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)")
    assert _os_error(wrapped).errno == errno.ENOSPC  # safetensors says it in words


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_cluster_is_an_error_in_seconds():
    port = _closed_port()
    start = time.monotonic()
    with pytest.raises(RunEnvironmentError, match=rf"cannot reach the Ray cluster at 127.0.0.1:{port} "):
        environment.resolve_address(f"127.0.0.1:{port}")
    assert time.monotonic() - start < 5
    with pytest.raises(RunEnvironmentError, match="expected `auto`, host:port"):
        environment.resolve_address("nowhere")


def test_address_auto_without_a_cluster(monkeypatch):
    from ray._private import services

    def none_found(address):
        raise ConnectionError("Could not find any running Ray instance.")

    monkeypatch.setattr(services, "canonicalize_bootstrap_address_or_die", none_found)
    with pytest.raises(RunEnvironmentError, match="--address auto: no running Ray cluster was found on this machine"):
        environment.resolve_address("auto")

    def several(address):
        raise ConnectionError("Found multiple active Ray instances: {'10.0.0.1:6379', '10.0.0.2:6379'}. Please "
                              "specify the one to connect to by setting the `--address` flag")

    monkeypatch.setattr(services, "canonicalize_bootstrap_address_or_die", several)
    with pytest.raises(RunEnvironmentError, match=r"several Ray clusters run on this machine \(\{'10.0.0.1:6379'"):
        environment.resolve_address("auto")


def _cli(*args, cwd):
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    return subprocess.run([sys.executable, "-m", "rlcfg", "run", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env)


def test_cli_environment_errors_are_one_line_before_any_worker_starts(tmp_path):
    from tests.runtime.test_kill_resume import quickstart_config

    template = str(quickstart_config(tmp_path))
    port = _closed_port()
    cases = [
        (["--quickstart", "--output", "/sys/rlcfg-test-run"], "cannot write the output folder /sys/rlcfg-test-run"),
        ([template, "--output", str(tmp_path / "a"), "--address", f"127.0.0.1:{port}"],
         f"cannot reach the Ray cluster at 127.0.0.1:{port}"),
    ]
    for args, expected in cases:
        proc = _cli(*args, cwd=tmp_path)
        assert proc.returncode == 1, proc.stderr
        errors = [line for line in proc.stderr.splitlines() if line.startswith("rlcfg: error:")]
        assert len(errors) == 1 and expected in errors[0], proc.stderr
        assert "Traceback" not in proc.stderr and "starting the workers" not in proc.stderr
    usage = _cli("--quickstart", "--overwrite", "--resume", cwd=tmp_path)
    assert usage.returncode == 2 and "--overwrite starts the run over" in usage.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through folder permissions")
def test_cli_unwritable_checkpoint_folder(tmp_path):
    out = tmp_path / "out"
    (out / "checkpoints").mkdir(parents=True)
    os.chmod(out / "checkpoints", 0o500)
    try:
        proc = _cli("--quickstart", "--output", str(out), cwd=tmp_path)
    finally:
        os.chmod(out / "checkpoints", 0o700)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"cannot write the checkpoint folder {out / 'checkpoints'}: permission denied" in proc.stderr


def test_the_resume_settings_are_written_with_each_checkpoint(experiment, tmp_path):
    path = _save(tmp_path, 3, settings=to_json(experiment))
    assert ckpt.read_settings(path) == json.loads(json.dumps(to_json(experiment)))
    assert ckpt.verify(path) is None


def test_the_metrics_line_a_kill_left_out_comes_back_from_the_checkpoint(tmp_path):
    """The checkpoint of a step is committed before the step's line is written; a kill in between must not
    leave a step without its line, nor give a fresh start the old run's lines."""
    import io

    from rlcfg.runtime.reporting import Reporter

    (tmp_path / "metrics.jsonl").write_text('{"step": 0, "eval/reward": 0.1}\n{"step": 1}\n{"step": 2}\n{"st')
    reporter = Reporter(str(tmp_path), stream=io.StringIO(), resume_step=3, restore={"step": 3, "reward/mean": 1})
    reporter.close()
    assert [m["step"] for m in _lines(tmp_path)] == [0, 1, 2, 3]
    Reporter(str(tmp_path), stream=io.StringIO(), resume_step=3, restore={"step": 3}).close()
    assert [m["step"] for m in _lines(tmp_path)] == [0, 1, 2, 3]  # already there: not twice
    Reporter(str(tmp_path), stream=io.StringIO(), resume_step=0).close()
    assert _lines(tmp_path) == []


def _lines(folder):
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
