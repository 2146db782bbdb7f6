"""What a user sees: the metrics file (each step once, even after a resume), the progress line, the summary,
TensorBoard and wandb when enabled, and the plots when matplotlib is there."""

import io
import json
import tempfile
import time

import pytest

from rlcfg.runtime.reporting import Reporter, summary_line


def test_eta_follows_the_recent_steps_not_the_warm_up():
    stream = io.StringIO()
    reporter = Reporter(tempfile.mkdtemp(), stream=stream)
    elapsed = 0.0
    for step, seconds in enumerate([30.0, 1.0, 1.0, 9.0, 1.0], start=1):  # warm-up, then a checkpoint at step 4
        elapsed += seconds
        reporter.progress(step, 100, {"step": step}, elapsed=elapsed, steps_done=step)
    reporter.close()
    lines = stream.getvalue().splitlines()
    assert lines[0].endswith("ETA 49:30")  # one step known: it is all there is
    assert lines[1].endswith("ETA 1:38") and lines[4].endswith("ETA 1:35")


def test_metrics_progress_and_summary(tmp_path):
    stream = io.StringIO()
    reporter = Reporter(str(tmp_path), stream=stream)
    for step in (1, 2, 3):
        m = {"step": step, "reward/mean": step / 10, "kl": 0.01, "response/length_mean": 2.0,
             "throughput/samples_per_s": 1000.0}
        reporter.log(m)
        reporter.progress(step, 10, m, elapsed=step * 1.0, steps_done=step)
    reporter.close()
    assert "step 3/10 | reward 0.300 | kl 0.0100 | len 2.0 | 1000 samples/s | ETA 0:07" in stream.getvalue()
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [1, 2, 3]
    summary = summary_line(reporter.history, 125.0, str(tmp_path))
    assert summary.startswith("rlcfg run: 3 steps in 2:05, mean reward 0.20 -> 0.20")


def test_a_resumed_run_drops_the_lines_after_its_checkpoint(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps({"step": s}) + "\n" for s in range(1, 6))
                                            + '{"step": 6, "rew')  # cut short by a kill
    reporter = Reporter(str(tmp_path), resume_step=3, stream=io.StringIO())
    reporter.log({"step": 4})
    reporter.close()
    steps = [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]


def test_optional_backends_missing_are_a_note_not_a_failure(tmp_path, monkeypatch):
    import builtins

    real = builtins.__import__

    def without(name, *args, **kwargs):
        if name in ("wandb", "torch.utils.tensorboard"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without)
    stream = io.StringIO()
    Reporter(str(tmp_path), backends=("jsonl", "tensorboard", "wandb"), stream=stream).close()
    assert "pip install tensorboard" in stream.getvalue() and "pip install wandb" in stream.getvalue()


def test_tensorboard_receives_every_numeric_metric(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    reporter = Reporter(str(tmp_path), backends=("jsonl", "tensorboard"), stream=io.StringIO())
    for step in (1, 2, 3):
        reporter.log({"step": step, "reward/mean": 0.25 * step, "kl": 0.01, "example": "3+4=7"})
    reporter.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert sorted(events.Tags()["scalars"]) == ["kl", "reward/mean"]  # text is left out
    assert [(e.step, e.value) for e in events.Scalars("reward/mean")] == [(1, 0.25), (2, 0.5), (3, 0.75)]


def test_wandb_logs_offline_without_credentials(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    reporter = Reporter(str(tmp_path), backends=("jsonl", "wandb"), project="rlcfg-test", run_name="offline",
                        stream=io.StringIO(), config={"algorithm": {"advantage": "grpo"}})
    for step in (1, 2):
        reporter.log({"step": step, "reward/mean": 0.5 * step})
    reporter.close()
    [run_dir] = (tmp_path / "wandb").glob("offline-run-*")
    [record] = run_dir.glob("run-*.wandb")
    # wandb's service process writes the record log; under load its last records can land just after finish().
    deadline = time.monotonic() + 20
    while b"reward/mean" not in (data := record.read_bytes()) and time.monotonic() < deadline:
        time.sleep(0.2)
    # The run file is wandb's own record log; the metric and the config travel in it by name.
    assert b"reward/mean" in data and b"advantage" in data


def test_plots(tmp_path):
    pytest.importorskip("matplotlib")
    reporter = Reporter(str(tmp_path), stream=io.StringIO())
    for step in (1, 2):
        reporter.log({"step": step, "reward/mean": 0.1 * step, "kl": 0.0, "response/length_mean": 1.0})
    written = reporter.plots()
    assert sorted(p.rsplit("/", 1)[1] for p in written) == ["kl.png", "response_length.png", "reward.png"]
