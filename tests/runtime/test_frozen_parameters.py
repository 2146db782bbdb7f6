"""Frozen parameters (Role.frozen_prefixes, ROLL freeze_module_prefix): the FSDP trainer leaves every parameter whose
name starts with a prefix out of training, and reports the prefixes that name nothing."""

from __future__ import annotations


import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlcfg.ir import ActorLossSpec, Optimizer, PolicyLossSpec  # noqa: E402
from rlcfg.runtime import step as S  # noqa: E402
from rlcfg.runtime.backends.fsdp import FSDPEngine  # noqa: E402
from tests.runtime.test_packing import build, groups, process_group, training_batch  # noqa: E402,F401

FROZEN = ("model.embed_tokens", "model.layers.0.")


def trained_weights(path, frozen_prefixes=()):
    batch = training_batch(path, groups(seed=3))
    mask = batch["response_mask"]
    cfg = {"ppo_epochs": 1, "mini_batch": 6, "micro_batch": 3, "denominators": S.denominators(mask, 1, 6),
           "loss": ActorLossSpec(PolicyLossSpec(), "token-mean", kl_coef=0.1, entropy_coef=0.01)}
    # AdamW with weight decay: a parameter left in the optimizer would move even without a gradient.
    adamw = Optimizer(name="adamw", lr=1e-2, weight_decay=0.1, grad_clip=1.0)
    torch.manual_seed(7)
    trainer = FSDPEngine("actor", path, dtype="float32", optimizer=adamw, frozen_prefixes=frozen_prefixes)
    metrics = trainer.train(batch, cfg)
    return trainer, metrics, {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}


def test_frozen_parameters_stay_while_the_others_move(tmp_path):
    path = build(tmp_path)
    from transformers import AutoModelForCausalLM

    initial = AutoModelForCausalLM.from_pretrained(path).state_dict()
    trainer, metrics, after = trained_weights(path, FROZEN)
    assert metrics["grad_norm"] > 0
    frozen = [k for k in after if k.startswith(FROZEN)]
    assert "model.embed_tokens.weight" in frozen and any(k.startswith("model.layers.0.self_attn") for k in frozen)
    for key in frozen:
        assert torch.equal(after[key], initial[key]), key
    others = [k for k in after if not k.startswith(FROZEN)]
    assert all(not torch.equal(after[k], initial[k]) for k in others if k.endswith("proj.weight")), others
    assert not torch.equal(after["lm_head.weight"], initial["lm_head.weight"])
    assert trainer.unmatched_prefixes == ()
    # Without the prefixes the same step moves those parameters: the test tells frozen from untouched.
    _, _, unfrozen = trained_weights(path)
    assert not torch.equal(unfrozen["model.embed_tokens.weight"], initial["model.embed_tokens.weight"])


def test_a_prefix_that_names_no_parameter_freezes_nothing_and_is_reported(tmp_path):
    path = build(tmp_path)
    trainer, _, _ = trained_weights(path, ("vision_model", "model.layers.1."))
    assert trainer.unmatched_prefixes == ("vision_model",)
    assert all(p.requires_grad for n, p in trainer.model.named_parameters() if not n.startswith("model.layers.1."))
