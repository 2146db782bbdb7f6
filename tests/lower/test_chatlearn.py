"""ChatLearn → Experiment: the roles, lengths and batch algebra ChatLearn would run, derived by hand from the
templates and the 1.2.0-style fixture, and compared with the lowering."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlcfg.frontend import check_file
from rlcfg.ir import Experiment
from rlcfg.lower.chatlearn import lower
from tests.helpers import TEMPLATES

FSDP = TEMPLATES / "chatlearn-fsdp-vllm.yaml"
MEGATRON = TEMPLATES / "chatlearn-megatron-vllm.yaml"
V120_FSDP = Path(__file__).resolve().parents[1] / "fixtures" / "chatlearn" / "v1.2.0-fsdp.yaml"
ENV = {"HOME": "/home/user"}


def experiment(path, *overrides: str) -> Experiment:
    result = check_file(str(path), list(overrides), env=ENV)
    assert result.config is not None, [f"{d.path}: {d.message}" for d in result.diagnostics]
    return lower(result.config)


def role(exp: Experiment, name: str):
    return next(r for r in exp.roles if r.name == name)


def engine(exp: Experiment) -> dict:
    return dict(role(exp, "rollout").engine)


def test_main_lengths_come_from_prompt_and_response_limits():
    exp = experiment(FSDP, "models.policy.max_prompt_tokens_length=512", "models.policy.max_response_tokens_length=1536")
    assert exp.sampling.max_new_tokens == 1536 and exp.eval_sampling.max_new_tokens == 1536
    assert exp.data.max_prompt_length == 512
    assert engine(exp)["max_model_len"] == 2048  # ChatLearn main's seq_length: prompt + response


def test_1_2_lengths_are_seq_length_and_max_new_tokens():
    exp = experiment(V120_FSDP)
    assert exp.sampling.max_new_tokens == 3072
    assert engine(exp)["max_model_len"] == 4096
    assert exp.data.max_prompt_length == 1024


@pytest.mark.parametrize("template", [FSDP, MEGATRON])
def test_templates_lower_with_their_written_gpus(template):
    exp = experiment(template)
    gpus = {r.name: r.resources.gpus for r in exp.roles}
    assert gpus["actor"] == gpus["reference"] == gpus["rollout"] > 0
    assert exp.schedule.samples_per_step == 2048 and exp.algorithm.group_size == exp.sampling.n


def test_megatron_reference_parallelism_follows_the_trainer():
    exp = experiment(MEGATRON)
    actor, ref = role(exp, "actor").parallelism, role(exp, "reference").parallelism
    assert (actor.tp, actor.pp) == (ref.tp, ref.pp) == (2, 2)


def test_adam_beta2_is_chatlearns_default():
    assert role(experiment(FSDP), "actor").optimizer.betas == (0.9, 0.95)
