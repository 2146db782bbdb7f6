"""`rlcfg run FILE --smoke` runs every config that validates: the settings `rlcfg run` refuses are set, for the smoke
run only, to values it runs and listed (rlcfg.smoke_settings), and the warm-started tiny model makes the
algorithm act (rewards differ within a group, the policy gradient is not 0, a loss setting changes the run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlcfg.frontend import check_file
from rlcfg.runtime import smoke as S
from rlcfg.smoke_settings import refusals, settle
from tests.helpers import TEMPLATES
from tests.runtime.test_smoke import run_cli, training_steps


def settled(path: Path, overrides: list[str]):
    first = check_file(str(path), overrides)
    assert not first.errors and refusals(first)
    return settle(lambda more: check_file(str(path), [*overrides, *more]), first)


# ---- the settings, pure ------------------------------------------------------------------------------------------


def test_a_refused_key_is_set_to_its_default_and_named_with_the_reason():
    result = settled(TEMPLATES / "areal-fsdp-vllm-ppo.yaml", ["+actor.rejection_sampling.lower=0.5"])
    assert [(c.key, c.old, c.new) for c in result.changes] == [("actor.rejection_sampling.lower", "0.5", "null")]
    assert "bounds the importance weight from above only" in result.changes[0].reason
    assert result.overrides == ("++actor.rejection_sampling.lower=null",)
    assert result.refused == [] and result.result.config is not None


def test_every_refusal_of_a_config_is_cleared_with_a_value_its_rule_accepts():
    result = settled(TEMPLATES / "skyrl-fsdp-vllm.yaml",
                     ["trainer.algorithm.policy_loss_type=cross_entropy", "+generator.engine_init_kwargs.swap_space=4",
                      "trainer.policy.optimizer_config.scheduler=polynomial"])
    changes = {c.key: (c.old, c.new) for c in result.changes}
    assert changes == {"trainer.algorithm.policy_loss_type": ("'cross_entropy'", "'regular'"),
                       "generator.engine_init_kwargs.swap_space": ("4", "(not set)"),
                       "trainer.policy.optimizer_config.scheduler": ("'polynomial'", "'constant_with_warmup'")}
    assert result.refused == [] and not result.result.errors
    # The reason is the refusal's, without the key and value the table shows already.
    scheduler = next(c for c in result.changes if c.key == "trainer.policy.optimizer_config.scheduler")
    assert scheduler.reason.startswith("rlcfg's learning-rate schedules reproduce constant")


def test_a_rule_refusal_gets_the_value_the_rule_runs():
    result = settled(TEMPLATES / "rlinf-megatron-sglang.yaml", ["algorithm.adv_type=gae", "reward.reward_type=code"])
    assert {c.key: c.new for c in result.changes} == {"algorithm.adv_type": "'grpo'", "reward.reward_type": "'math'"}
    assert result.changes[0].reason.startswith("rlcfg runs RLinf's GRPO advantage only")
    assert result.refused == []


def test_a_value_that_breaks_a_tied_rule_brings_the_tied_key_along():
    # Single-turn generation makes skyrl-train's input limit the prompt limit: max_turns 1 alone would be an error.
    result = settled(TEMPLATES / "skyrl-fsdp-vllm.yaml", ["generator.max_turns=4", "generator.max_input_length=4096"])
    assert [(c.key, c.old, c.new) for c in result.changes] == [("generator.max_turns", "4", "1"),
                                                               ("generator.max_input_length", "4096", "512")]
    tied = result.changes[1]
    assert tied.reason.startswith("so that the config still validates: `generator.max_input_length` (4096) must "
                                  "equal `trainer.max_prompt_length` (512)")
    assert result.refused == [] and not result.result.errors


def test_a_change_whose_error_is_not_cleared_is_not_made():
    # One validator run allowed: the change itself, none left to clear the error it makes.
    overrides = ["generator.max_turns=4", "generator.max_input_length=4096"]
    path = str(TEMPLATES / "skyrl-fsdp-vllm.yaml")
    first = check_file(path, overrides)
    result = settle(lambda more: check_file(path, [*overrides, *more]), first, max_checks=1)
    assert result.changes == () and result.overrides == ()
    assert [d.path for d in result.refused] == ["generator.max_turns"] and not result.result.errors


@pytest.mark.parametrize("template, overrides, key, old, new", [
    # a refusal whose hint gives the value that runs, computed from the config
    ("chatlearn-fsdp-vllm.yaml", ["models.policy.num_inference_per_prompt=8"],
     "runtime_args.num_inference_per_prompt", "32", "8"),
    ("areal-fsdp-vllm-ppo.yaml", ["critic.backend=megatron:d4p1t1"], "critic.backend", "'megatron:d4p1t1'",
     "'fsdp:d4p1t1'"),
    # the hint's value before the default: an empty allocation_mode clears the refusal by training on no GPU (a
    # reward model's scalar head trains on fsdp only)
    ("areal-rw.yaml", ["allocation_mode=d1p2t2"], "allocation_mode", "'d1p2t2'", "'d4'"),
])
def test_a_refusal_whose_hint_names_the_value_gets_it(template, overrides, key, old, new):
    result = settled(TEMPLATES / template, overrides)
    assert [(c.key, c.old, c.new) for c in result.changes] == [(key, old, new)]
    assert result.refused == [] and not result.result.errors


def test_a_config_without_refusals_is_left_alone():
    first = check_file(str(TEMPLATES / "skyrl-fsdp-vllm.yaml"))
    done = settle(lambda more: pytest.fail("checked again"), first)
    assert done.changes == () and done.overrides == () and done.result is first


def test_the_warm_start_corpus_is_the_generated_task_in_both_prompt_forms():
    rows = S.warm_start_rows(examples=20)
    plain = [r for r in rows if not r["prompt"].startswith("<user>")]
    chat = [r for r in rows if r["prompt"].startswith("<user>")]
    assert plain and chat and all(r["prompt"].endswith("\n<assistant>") for r in chat)
    for row in rows:
        a, b = row["prompt"].removeprefix("<user>").split("=")[0].split("+")
        assert row["answer"] == str(int(a) + int(b))


# ---- the CLI: the algorithm acts ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("smoke-settings-cache")


def rows(out: Path) -> list[dict]:
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in lines if "reward/mean" in r]


@pytest.fixture(scope="module")
def regular(tmp_path_factory, cache):
    out = tmp_path_factory.mktemp("regular") / "out"
    done, _ = run_cli(str(TEMPLATES / "skyrl-fsdp-vllm.yaml"), "--smoke", "--steps", "2", "-o", str(out), cache=cache,
                      timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done, out


def test_a_smoke_run_has_rewards_that_differ_in_a_group_and_a_policy_gradient(regular):
    done, out = regular
    assert training_steps(out / "metrics.jsonl") == [1, 2]
    first = rows(out)[0]
    # GRPO with 5 responses per prompt: some group's rewards differ, so its advantages are not 0.
    assert first["reward/zero_std_frac"] < 1 and first["reward/group_std"] > 0
    assert first["actor/grad_norm"] > 1e-3
    # The bar and the ETA count the steps this run makes (--steps 2), not the config's.
    assert "step 1/2 |" in done.stderr and "step 2/2 |" in done.stderr


def test_a_loss_setting_changes_a_smoke_run_and_a_refused_setting_is_substituted(regular, tmp_path, cache):
    out = tmp_path / "out"
    done, _ = run_cli(str(TEMPLATES / "skyrl-fsdp-vllm.yaml"), "trainer.algorithm.policy_loss_type=cispo",
                      "trainer.policy.optimizer_config.scheduler=polynomial", "--smoke", "--steps", "1",
                      "-o", str(out), cache=cache, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stderr.splitlines()
                if x.strip().startswith("trainer.policy.optimizer_config.scheduler"))
    assert "'polynomial'" in line and "-> 'constant_with_warmup' (rlcfg's learning-rate schedules" in line
    ran = json.loads((out / "experiment.json").read_text())
    assert ran["algorithm"]["policy_loss"] == "cispo"
    # The same rollouts (same seeds), another loss: the first step's policy loss is not the regular one's.
    cispo, plain = rows(out)[0], rows(regular[1])[0]
    assert cispo["reward/mean"] == plain["reward/mean"]
    assert cispo["actor/pg_loss"] != pytest.approx(plain["actor/pg_loss"], rel=1e-3, abs=1e-7)


def test_a_pipeline_rlcfg_does_not_model_is_still_refused(tmp_path, cache):
    from tests.dialects.rlinf.test_schema import EMBODIED

    config = tmp_path / "embodied.yaml"
    config.write_text(EMBODIED)
    done, _ = run_cli(str(config), "--smoke", "-o", str(tmp_path / "out"), cache=cache)
    assert done.returncode == 1 and "embodied pipeline" in done.stderr, done.stderr
    assert "substitutions" not in done.stderr
