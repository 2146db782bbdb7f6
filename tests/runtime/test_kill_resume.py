"""`rlcfg run` killed with SIGKILL at seeded moments across its life (building the quickstart's model, starting
Ray, training, writing a checkpoint, just after the last checkpoint), each time rerun with the same command:
the run completes with every step's metrics exactly once and equal to an uninterrupted run's, with its plots
and exported model, and no process of a killed run outlives it."""

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("ray")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
STEPS = 6
# The ROLL quickstart template, shortened: a checkpoint every 2 steps, 6 steps.
OVERRIDES = [f"max_steps={STEPS}", "save_steps=2"]
COMPARED = ("step", "data/prompt_indices", "reward/mean", "actor/pg_loss", "actor/grad_norm",
            "response/length_mean")


def quickstart_config(folder):
    """The ROLL quickstart template as a test's own file. Its `template:` line (the chat format of the prompts,
    which the quickstart's plain prompts do not use) is left out: this test is about the run's life, not about
    which of ROLL's data settings `rlcfg run` takes."""
    text = (ROOT / "templates" / "quickstart-cpu.yaml").read_text()
    path = Path(folder) / "quickstart.yaml"
    path.write_text("\n".join(line for line in text.splitlines() if line.strip() != "template: native") + "\n")
    return path


def _command(out, config):
    return [sys.executable, "-m", "rlcfg", "run", str(config), *OVERRIDES, "--output", str(out)]


def _env(mark):
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(NO_COLOR="1", RLCFG_TEST_MARK=mark)
    return env


def _leftovers(mark, driver):
    """Live processes of a killed attempt: those that inherited its marker, and those in the driver's session
    or process group (Ray's agents rewrite their environment area for their process titles)."""
    found = []
    needle = f"RLCFG_TEST_MARK={mark}".encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            if fields[0] == "Z":  # a zombie holds nothing; reaping it is its parent's (or init's) business
                continue
            if driver in (int(fields[2]), int(fields[3])) or \
                    needle in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                found.append(int(pid))
        except (OSError, IndexError, ValueError):
            continue
    return found


def _metrics(out):
    path = Path(out) / "metrics.jsonl"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            pass
    return rows


def _steps_logged(out):
    return {m.get("step") for m in _metrics(out)}


def _has(pattern_dir, prefix):
    try:
        return any(name.startswith(prefix) for name in os.listdir(pattern_dir))
    except OSError:
        return False


def _kill_points(cwd, out):
    """(name, condition) in the order a run meets them; each condition is polled every 10 ms."""
    ckpts = Path(out) / "checkpoints"
    qs = Path(cwd) / "rlcfg-quickstart"
    return [
        ("building the quickstart model", lambda: _has(qs, "tiny-qwen2")),
        ("starting Ray and the workers", lambda: (Path(out) / "experiment.json").exists()),
        ("training", lambda: len(_steps_logged(out) - {0}) >= 3),
        ("writing a checkpoint", lambda: _has(ckpts, ".tmp-step-")),
        ("just after the last checkpoint", lambda: (ckpts / f"step-{STEPS:08d}" / "manifest.json").exists()),
    ]


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds leftover processes through /proc")
def test_sigkill_at_random_moments_then_rerun_completes_identically(tmp_path):
    rng = random.Random(14)
    ref_out = tmp_path / "reference"
    (tmp_path / "ref").mkdir()
    config = quickstart_config(tmp_path)
    ref = subprocess.run(_command(ref_out, config), cwd=tmp_path / "ref", env=_env("ref"), capture_output=True, text=True,
                         timeout=300)
    assert ref.returncode == 0, ref.stderr
    reference = [{k: m.get(k) for k in COMPARED} for m in _metrics(ref_out)]
    assert [m["step"] for m in reference] == list(range(1, STEPS + 1))

    cwd = tmp_path / "work"
    cwd.mkdir()
    out = tmp_path / "run"
    killed = []
    for name, condition in _kill_points(cwd, out):
        mark = uuid.uuid4().hex
        proc = subprocess.Popen(_command(out, config), cwd=cwd, env=_env(mark), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        deadline = time.monotonic() + 240
        while proc.poll() is None and not condition() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.05))
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)  # the driver only: what it leaves behind must end by itself
            killed.append(name)
        stderr = proc.communicate(timeout=60)[1]
        assert "Traceback" not in stderr and "internal error" not in stderr, (name, stderr)
        # Nothing of the killed run may outlive it for long (the workers watch the driver; a watcher
        # process ends the private Ray instance's own helpers).
        gone_by = time.monotonic() + 10
        while _leftovers(mark, proc.pid) and time.monotonic() < gone_by:
            time.sleep(0.1)
        left = _leftovers(mark, proc.pid)
        names = []
        for pid in left:
            try:
                names.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:100].decode())
            except OSError:
                pass
        for pid in left:  # do not leak them into the rest of the suite, then fail
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        assert not left, f"processes outlived the run killed while {name}: {names}"
    assert len(killed) >= 4, killed  # the kill points were met, not run past

    # The last kill came just after the last checkpoint: the rerun finishes the run without starting Ray.
    final = subprocess.run(_command(out, config), cwd=cwd, env=_env("final"), capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr
    assert "Traceback" not in final.stderr
    _assert_complete(out, reference)

    # Damage the two newest checkpoints (a shard cut short, an index cut short): the rerun skips them, says so,
    # and replays the steps after the newest checkpoint that verifies, with the same results.
    ckpts = out / "checkpoints"
    _truncate(ckpts / f"step-{STEPS:08d}" / "actor" / "__0_0.distcp")
    _truncate(ckpts / f"step-{STEPS - 2:08d}" / "actor" / ".metadata")
    again = subprocess.run(_command(out, config), cwd=cwd, env=_env("again"), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stderr
    for step, file in ((STEPS, "__0_0.distcp"), (STEPS - 2, ".metadata")):
        assert f"warning: skipping the checkpoint {ckpts / f'step-{step:08d}'}: actor/{file}" in again.stderr
    assert f"resuming from {ckpts / f'step-{STEPS - 4:08d}'} (step {STEPS - 4})" in again.stderr
    _assert_complete(out, reference)
    assert all(ckpt_verifies(p) for p in ckpts.iterdir())  # the damaged ones were written again


def ckpt_verifies(path):
    from rlcfg.runtime.checkpoint import verify

    return verify(str(path)) is None


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _assert_complete(out, reference):
    history = _metrics(out)
    assert [m["step"] for m in history] == list(range(1, STEPS + 1))  # each step exactly once
    assert [{k: m.get(k) for k in COMPARED} for m in history] == reference
    assert (Path(out) / "plots" / "reward.png").exists()
    model = Path(out) / "hf_model"
    assert json.loads((model / "rlcfg-export.json").read_text())["step"] == STEPS
    assert (model / "model.safetensors").exists() and (model / "tokenizer.json").exists()
    leftovers = [n for n in os.listdir(out) if ".tmp-" in n or ".old-" in n]
    assert not leftovers
    assert not [n for n in os.listdir(Path(out) / "checkpoints") if n.startswith(".")]
