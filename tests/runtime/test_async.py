"""Asynchronous RL on Ray (Schedule.max_staleness, AReaL's rollout.max_head_offpolicyness): the rollout engine
generates the next steps while the trainer trains, no step is trained staler than the bound, the data are those
of the synchronous run in the same order, and a run killed with steps started ahead resumes with every prompt
trained exactly once."""

import dataclasses
import io
import json
import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("ray")
pytest.importorskip("transformers")

from rlcfg.ir import PolicyOptions  # noqa: E402
from rlcfg.runtime import quickstart  # noqa: E402
from rlcfg.runtime.driver import Run, RunOptions, run  # noqa: E402

COMPARED = ("step", "data/prompt_indices", "reward/mean", "actor/pg_loss", "actor/grad_norm")

pytestmark = pytest.mark.usefixtures("ray_instance")


@pytest.fixture(scope="module")
def qs(tmp_path_factory):
    """The quickstart with its rollout engine on a CPU slot of its own (AReaL's disaggregated layout), four
    prompts of four responses per step, and AReaL's decoupled loss."""
    files = str(tmp_path_factory.mktemp("quickstart-files"))

    def experiment(out, staleness=0, concurrency=None, **kwargs):
        exp = quickstart.experiment(out, warm_start=True, files_dir=files, prompts_per_step=4, group_size=4,
                                    **kwargs)
        alg = dataclasses.replace(exp.algorithm, policy_options=PolicyOptions(decoupled=True,
                                                                              behav_imp_weight_cap=5.0))
        schedule = dataclasses.replace(exp.schedule, max_staleness=staleness, rollout_concurrency=concurrency)
        return dataclasses.replace(exp, colocation=(), algorithm=alg, schedule=schedule)

    return experiment


def history(out):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_rollouts_run_ahead_within_the_bound_on_the_synchronous_runs_data(tmp_path, qs):
    sync_out, async_out = str(tmp_path / "sync"), str(tmp_path / "async")
    sync = run(quickstart.plan_for(qs(sync_out, steps=6, checkpoint_interval=None)),
               RunOptions(output_dir=sync_out, threads=1, stream=io.StringIO())).history
    ahead = run(quickstart.plan_for(qs(async_out, staleness=2, concurrency=8, steps=6, checkpoint_interval=None)),
                RunOptions(output_dir=async_out, threads=1, stream=io.StringIO())).history

    staleness = [m["async/staleness_max"] for m in ahead]
    assert all(0 <= s <= 2 for s in staleness), staleness
    assert staleness[0] == 0 and max(staleness) >= 1, staleness  # the first step has nothing older to use
    assert "async/staleness_max" not in sync[0]
    # The same prompts in the same order: the engines only generate them earlier.
    assert [m["data/prompt_indices"] for m in ahead] == [m["data/prompt_indices"] for m in sync]
    # Off-policy samples move the decoupled loss's weights away from 1, so the updates differ after the first.
    assert ahead[0]["actor/pg_loss"] == pytest.approx(sync[0]["actor/pg_loss"], rel=1e-5)
    for key in ("time/rollout_wait", "time/rollout_idle", "async/steps_ahead"):
        assert key in ahead[-1], key


def test_a_bound_of_zero_is_the_synchronous_run(tmp_path, qs):
    """η = 0 with a concurrency that would let rollouts run ahead: seeded, the run is the synchronous one."""
    outs = [str(tmp_path / name) for name in ("plain", "zero")]
    plain = run(quickstart.plan_for(qs(outs[0], steps=3, checkpoint_interval=None)),
                RunOptions(output_dir=outs[0], threads=1, stream=io.StringIO())).history
    zero = run(quickstart.plan_for(qs(outs[1], staleness=0, concurrency=64, steps=3, checkpoint_interval=None)),
               RunOptions(output_dir=outs[1], threads=1, stream=io.StringIO())).history
    assert [{k: m[k] for k in COMPARED} for m in zero] == [{k: m[k] for k in COMPARED} for m in plain]


def test_within_epochs_only_each_epoch_starts_on_policy(tmp_path, qs):
    """SkyRL's one-step off-policy trainer (Schedule.ahead_across_epochs false, one update behind): a dataset of two
    steps, so every other step opens an epoch and generates under the weights that train on it."""
    out = str(tmp_path / "one-step")
    exp = qs(out, staleness=1, steps=4, checkpoint_interval=None)
    with open(exp.data.train_files[0]) as f:
        first_eight = [line for line in f if line.strip()][:8]
    small = tmp_path / "train.jsonl"
    small.write_text("".join(first_eight))
    exp = dataclasses.replace(exp, data=dataclasses.replace(exp.data, train_files=(str(small),)),
                              schedule=dataclasses.replace(exp.schedule, ahead_across_epochs=False))
    history = run(quickstart.plan_for(exp), RunOptions(output_dir=out, threads=1, stream=io.StringIO())).history
    assert [m["async/staleness_max"] for m in history] == [0, 1, 0, 1]
    assert [m["data/epoch"] for m in history] == [0, 0, 1, 1]


class Killed(RuntimeError):
    pass


class KilledAtStep4(Run):
    """Dies as step 4 begins, with steps 4 and 5 already generating (the bound is 2)."""

    def step(self, step, prefetch=False):
        if step == 4:
            assert [entry.step for entry in self.ahead.queue] == [4, 5]
            raise Killed("killed at step 4")
        return super().step(step, prefetch)


def test_a_killed_run_resumes_with_every_prompt_trained_exactly_once(tmp_path, qs):
    whole_out, out = str(tmp_path / "whole"), str(tmp_path / "killed")
    whole = run(quickstart.plan_for(qs(whole_out, staleness=2, concurrency=8, steps=6, checkpoint_interval=3)),
                RunOptions(output_dir=whole_out, threads=1, stream=io.StringIO())).history
    plan = quickstart.plan_for(qs(out, staleness=2, concurrency=8, steps=6, checkpoint_interval=3))
    with pytest.raises(Killed):
        KilledAtStep4(plan, RunOptions(output_dir=out, threads=1, stream=io.StringIO())).run()
    resumed = run(plan, RunOptions(output_dir=out, threads=1, stream=io.StringIO()))
    assert resumed.resumed_from and resumed.resumed_from.endswith("step-00000003")
    rows = history(out)
    assert [m["step"] for m in rows] == [1, 2, 3, 4, 5, 6]
    trained = [i for m in rows for i in m["data/prompt_indices"]]
    assert trained == [i for m in whole for i in m["data/prompt_indices"]]
    assert len(set(trained)) == len(trained)  # 24 prompts of a 200-prompt epoch: none twice
    # After the resume nothing older than the restored weights exists: step 4 starts from fresh rollouts.
    assert rows[3]["async/staleness_max"] == 0
