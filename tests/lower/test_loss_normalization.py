"""Where each dialect normalises its losses, as its framework does at the releases rlcfg claims.

  - skyrl-train (0.1.0–0.4.0 and its last commit): workers/worker.py reduces each micro-batch on its own
    (ppo_utils.reduce_loss), scales the gradients by 1/micro-batches and averages the ranks; its KL-loss term is a
    per-sequence masked mean then a mean, its entropy a token mean, its critic loss a per-sequence mean.
  - RLinf: its FSDP actor (and its Megatron actor without use_valid_token_scale) applies loss_agg_func per
    micro-batch, then `loss / gradient_accumulation`.
  - ROLL (agg_loss with batch_num_tokens / global_valid_samples summed over the DP group), AReaL (loss_weight_fn
    over total_loss_weight of the DP group), ChatLearn (FSDP: response_token_length_total of the global batch;
    Megatron: calculate_per_token_loss): one mean over the global mini-batch."""

from __future__ import annotations

import pytest

from rlcfg.frontend import check_file
from rlcfg.lower import lower
from tests.helpers import TEMPLATES

ENV = {"HOME": "/home/user"}


def algorithm(dialect: str, path, *overrides: str):
    result = check_file(str(path), list(overrides), env=ENV)
    assert result.config is not None, [f"{d.path}: {d.message}" for d in result.diagnostics]
    return lower(dialect, result.config).algorithm


@pytest.mark.parametrize("template", ["skyrl-fsdp-vllm.yaml", "skyrl-ppo-fsdp-vllm.yaml"])
def test_skyrl_reduces_each_micro_batch_and_its_kl_by_sequence(template):
    alg = algorithm("skyrl", TEMPLATES / template)
    assert alg.loss_normalization == "micro-batch"
    assert (alg.kl_loss_aggregation, alg.entropy_aggregation, alg.value_aggregation) == \
        ("seq-mean-token-mean", "token-mean", "seq-mean-token-mean")
    spec = alg.actor_loss_spec()
    assert (spec.normalization, spec.kl_aggregation, spec.entropy_aggregation) == \
        ("micro-batch", "seq-mean-token-mean", "token-mean")


def test_skyrl_sequence_mean_keeps_its_meaning_per_micro_batch():
    alg = algorithm("skyrl", TEMPLATES / "skyrl-fsdp-vllm.yaml", "trainer.algorithm.loss_reduction=sequence_mean")
    assert (alg.loss_aggregation, alg.loss_normalization) == ("seq-mean-token-mean", "micro-batch")


def test_rlinf_normalises_per_micro_batch_unless_use_valid_token_scale():
    template = TEMPLATES / "rlinf-megatron-sglang.yaml"
    assert algorithm("rlinf", template).loss_normalization == "micro-batch"
    scaled = algorithm("rlinf", template, "algorithm.use_valid_token_scale=true", "algorithm.n_minibatches=1")
    assert scaled.loss_normalization == "mini-batch"


@pytest.mark.parametrize("dialect,template", [
    ("roll", "roll-fsdp2-vllm.yaml"), ("roll", "roll-megatron-vllm.yaml"),
    ("chatlearn", "chatlearn-fsdp-vllm.yaml"), ("chatlearn", "chatlearn-megatron-vllm.yaml"),
    ("areal", "areal-fsdp-sglang-grpo.yaml"),
])
def test_the_other_dialects_take_one_mean_over_the_global_mini_batch(dialect, template):
    alg = algorithm(dialect, TEMPLATES / template)
    assert alg.loss_normalization == "mini-batch"
    assert alg.kl_loss_aggregation is alg.entropy_aggregation is alg.value_aggregation is None


def test_rlinf_shuffle_rollout_defaults_to_true_and_is_seeded_by_the_actor_seed():
    template = TEMPLATES / "rlinf-megatron-sglang.yaml"
    assert algorithm("rlinf", template).shuffle_seed is None  # the template says shuffle_rollout: false
    # RLinf reads algorithm.get("shuffle_rollout", True) at every release rlcfg claims.
    absent = algorithm("rlinf", template, "~algorithm.shuffle_rollout", "actor.seed=7")
    assert absent.shuffle_seed == 7
    assert algorithm("rlinf", template, "algorithm.shuffle_rollout=true").shuffle_seed == 1234
    result = check_file(str(template), ["algorithm.shuffle_rollout=true"], env=ENV)
    assert not [d for d in result.diagnostics if d.path == "algorithm.shuffle_rollout"]
