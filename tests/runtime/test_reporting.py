"""What a user sees: the metrics file (each step once, even after a resume), the progress line, the summary,
TensorBoard and wandb when enabled, and the plots when matplotlib is there."""

import io
import json
import os
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
    assert summary.startswith("rlcfg run: 3 steps in 2:05, mean reward 0.10 -> 0.30, response length 2.0 -> 2.0 "
                              "(first/last 1 step)")


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
    # the README's answer, which installs both
    assert stream.getvalue().count("pip install 'rlcfg[logging]'") == 2


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


def _rl_step(step):
    """A step's metrics as the driver logs them (step.rollout_metrics, step_metrics, the trainer's figures)."""
    return {"step": step, "reward/mean": 0.1 * step, "reward/group_std": 0.3, "reward/zero_std_frac": 0.25,
            "response/length_mean": 10.0 - step, "response/length_max": 12.0, "response/truncated_frac": 0.5 / step,
            "actor/pg_loss": -0.01, "kl": 0.002, "rollout/entropy": 0.8 / step, "actor/clip_frac": 0.0,
            "actor/grad_norm": 0.4, "actor/lr": 5e-4, "throughput/samples_per_s": 800.0, "example": "56",
            "samples": [{"prompt_index": 1, "response": "56", "reward": 1.0, "finished": True}],
            "data/prompt_indices": [1, 2]}


def test_every_figure_of_a_run_is_plotted_from_what_it_recorded(tmp_path):
    pytest.importorskip("matplotlib")
    reporter = Reporter(str(tmp_path), stream=io.StringIO())
    for step in (1, 2, 3):
        reporter.log(_rl_step(step))
    written = reporter.plots()
    assert sorted(p.rsplit("/", 1)[1] for p in written) == [
        "clip_fraction.png", "entropy.png", "grad_norm.png", "kl.png", "learning_rate.png", "policy_loss.png",
        "response_length.png", "reward.png", "throughput.png"]
    for path in written:
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert sorted(os.listdir(tmp_path / "plots")) == sorted(p.rsplit("/", 1)[1] for p in written)  # no leftovers
    reporter.close()


def test_an_asynchronous_run_plots_its_staleness_and_who_waited(tmp_path):
    pytest.importorskip("matplotlib")
    reporter = Reporter(str(tmp_path), stream=io.StringIO())
    for step in (1, 2, 3):
        reporter.log({**_rl_step(step), "async/staleness_max": min(step - 1, 2), "async/staleness_mean": 1.0,
                      "async/max_staleness": 2, "async/steps_ahead": 1, "time/rollout_wait": 0.1,
                      "time/rollout_idle": 0.0})
    written = [p.rsplit("/", 1)[1] for p in reporter.plots()]
    assert "staleness.png" in written and "waiting.png" in written
    reporter.close()


def test_a_run_without_a_kl_term_or_a_supervised_run_gets_only_its_own_figures(tmp_path):
    pytest.importorskip("matplotlib")
    rl = Reporter(str(tmp_path / "rl"), stream=io.StringIO())
    rl.log({k: v for k, v in _rl_step(1).items() if k != "kl"})
    assert "kl.png" not in [p.rsplit("/", 1)[1] for p in rl.plots()]
    rl.close()
    sft = Reporter(str(tmp_path / "sft"), stream=io.StringIO())
    for step in (1, 2):
        sft.log({"step": step, "sft/loss": 2.0 / step, "grad_norm": 1.0, "lr": 3e-3, "throughput/samples_per_s": 600.0})
    assert sorted(p.rsplit("/", 1)[1] for p in sft.plots()) == ["grad_norm.png", "learning_rate.png", "loss.png",
                                                                "throughput.png"]
    sft.close()


def test_sample_responses_show_the_prompt_the_response_its_end_and_its_reward(tmp_path):
    stream = io.StringIO()
    reporter = Reporter(str(tmp_path), stream=stream)
    reporter.show_samples({"step": 7, "samples": [
        {"prompt_index": 0, "response": "56", "reward": 1.0, "finished": True},
        {"prompt_index": 1, "response": "12;3*4=12;5*", "reward": 0.0, "finished": False}]}, ["7*8=", "2*6="])
    reporter.show_samples({"step": 8}, ["7*8="])  # a step without samples (a supervised one): nothing
    reporter.close()
    assert stream.getvalue().splitlines() == [
        "rlcfg: sample responses at step 7 (prompt, response, reward):",
        "  7*8=  56<eos>  1",
        "  2*6=  12;3*4=12;5*...  0"]


def test_the_summary_and_progress_of_a_supervised_run_speak_of_its_loss(tmp_path):
    stream = io.StringIO()
    reporter = Reporter(str(tmp_path), stream=stream)
    for step in (1, 2):
        m = {"step": step, "sft/loss": 2.0 / step, "throughput/samples_per_s": 600.0}
        reporter.log(m)
        reporter.progress(step, 2, m, elapsed=float(step), steps_done=step)
    reporter.close()
    assert "step 2/2 | loss 1.0000 | 600 samples/s" in stream.getvalue()
    assert summary_line(reporter.history, 2.0, "out").startswith("rlcfg run: 2 steps in 0:02, loss 2.000 -> 1.000")


def test_the_summary_of_a_run_shows_the_response_length_moving(tmp_path):
    history = [_rl_step(step) for step in range(1, 11)]
    assert ("mean reward 0.30 -> 0.80, response length 7.0 -> 2.0 (first/last 5 steps), 800 samples/s"
            in summary_line(history, 60.0, "out"))


def test_tensorboard_gets_every_scalar_of_a_real_step_and_nothing_else(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    reporter = Reporter(str(tmp_path), backends=("jsonl", "tensorboard"), stream=io.StringIO())
    reporter.log(_rl_step(1))
    reporter.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    scalars = sorted(k for k, v in _rl_step(1).items() if isinstance(v, float) and k != "step")
    assert sorted(events.Tags()["scalars"]) == scalars
