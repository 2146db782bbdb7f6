"""ROLL's system_envs and model_args.freeze_module_prefix, carried into the Experiment with ROLL's meaning
(roll/configs/base_config.py, roll/distributed/executor/cluster.py, roll/configs/model_args.py,
roll/models/model_providers.py freeze_model)."""

from __future__ import annotations

import pytest

from rlcfg.frontend import check_file
from tests.dialects.roll.test_lower import FSDP2, MEGATRON, experiment


def test_the_pipeline_envs_reach_every_role_and_a_worker_s_own_win():
    exp = experiment(FSDP2, "+system_envs={USE_MODELSCOPE: '1', NCCL_DEBUG: WARN}",
                     "+actor_train.system_envs={NCCL_DEBUG: INFO, ONLY_TRAIN: 'yes'}")
    assert exp.role("actor").env_vars() == {"USE_MODELSCOPE": "1", "NCCL_DEBUG": "INFO", "ONLY_TRAIN": "yes"}
    for name in ("rollout", "reference", "reward"):
        assert exp.role(name).env_vars() == {"USE_MODELSCOPE": "1", "NCCL_DEBUG": "WARN"}, name


def test_without_system_envs_no_role_has_variables():
    assert all(role.env == () for role in experiment(FSDP2).roles)


def test_a_value_that_is_not_a_string_is_an_error_as_in_roll():
    # ROLL's os.environ.update (pipeline) and Ray's RuntimeEnv (worker) take strings only.
    result = check_file(str(FSDP2), ["+system_envs={USE_MODELSCOPE: 1}", "+actor_infer.system_envs={X: null}"],
                        env={})
    errors = {d.path: d.message for d in result.diagnostics if d.severity == "error"}
    assert "expected a string" in errors["system_envs.USE_MODELSCOPE"]
    assert "expected a string" in errors["actor_infer.system_envs.X"]


def test_validate_no_longer_notes_either_setting_as_refused(tmp_path):
    config = tmp_path / "roll.yaml"
    config.write_text(FSDP2.read_text() + "\nsystem_envs:\n  USE_MODELSCOPE: '1'\n")
    result = check_file(str(config), ["+actor_train.system_envs={NCCL_DEBUG: INFO}",
                                      "+actor_train.model_args.freeze_module_prefix=model.embed_tokens"], env={})
    assert result.config is not None
    assert not [d for d in result.diagnostics if d.code == "RLC118"], [d.message for d in result.diagnostics]


def refusals(*overrides):
    result = check_file(str(FSDP2), list(overrides), env={})
    return {d.path: d for d in result.diagnostics if d.code == "RLC118"}


def test_a_rule_reward_with_another_environment_than_the_rollout_is_refused_naming_both_keys():
    found = refusals("+rewards.math_rule.system_envs={MATH_MODE: strict}")
    note = found["rewards.math_rule.system_envs"]
    assert "actor_infer.system_envs" in note.message
    assert "actor_infer.system_envs" in [path for path, _ in note.related]
    assert "MATH_MODE" in note.message and "'strict'" in note.message and "unset" in note.message
    # The same value in both (or in the pipeline's) shares one process without a conflict.
    overrides = ("+rewards.math_rule.system_envs={MATH_MODE: strict}", "+actor_infer.system_envs={MATH_MODE: strict}")
    assert not refusals(*overrides)
    exp = experiment(FSDP2, *overrides)
    assert exp.role("reward").env == exp.role("rollout").env == (("MATH_MODE", "strict"),)


def test_freeze_module_prefix_is_split_at_commas_and_stripped():
    exp = experiment(FSDP2, "+actor_train.model_args.freeze_module_prefix='model.embed_tokens, model.layers.0.'")
    actor = exp.role("actor")
    assert actor.frozen_prefixes == ("model.embed_tokens", "model.layers.0.")
    assert actor.key_for("frozen_prefixes") == "actor_train.model_args.freeze_module_prefix"
    # ROLL freezes only where the worker trains: the rollout and the reference are frozen anyway.
    assert all(exp.role(name).frozen_prefixes == () for name in ("rollout", "reference"))
    assert experiment(FSDP2).role("actor").frozen_prefixes == ()


def test_freeze_module_prefix_is_carried_for_the_critic():
    exp = experiment(FSDP2, "adv_estimator=gae", "loss_agg_mode=seq-mean-token-mean",
                     "+critic.model_args.freeze_module_prefix=model.embed_tokens")
    assert exp.role("critic").frozen_prefixes == ("model.embed_tokens",)
    assert exp.role("actor").frozen_prefixes == ()


def test_an_empty_prefix_would_freeze_everything_and_is_refused():
    note = refusals("+actor_train.model_args.freeze_module_prefix='model.norm,'")[
        "actor_train.model_args.freeze_module_prefix"]
    assert "empty item" in note.message and "'model.norm,'" in note.message


def test_freeze_module_prefix_with_megatron_is_refused():
    result = check_file(str(MEGATRON), ["+actor_train.model_args.freeze_module_prefix=vision_model"], env={})
    notes = [d for d in result.diagnostics if d.code == "RLC118"]
    assert [d.path for d in notes] == ["actor_train.model_args.freeze_module_prefix"]
    assert "Megatron strategy" in notes[0].message
