"""The FSDP backend's optimizer step under skyrl-train's normalisation: the gradient of the mean, over a
mini-batch's micro-batches, of each micro-batch's own reduction (reduce_loss per micro-batch, then skyrl-train's
1/accumulation-steps scaling), written out here with the model's own log-probs."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlcfg.ir import ActorLossSpec, Optimizer, PolicyLossSpec  # noqa: E402
from rlcfg.runtime import algorithms as A  # noqa: E402
from rlcfg.runtime import step as S  # noqa: E402
# The module's one-rank process group and model come from the packing tests' fixtures.
from tests.runtime.test_packing import VOCAB, engine, groups, model_path, process_group  # noqa: E402,F401


@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean-token-mean"])
def test_fsdp_step_is_the_mean_of_per_micro_batch_losses(model_path, aggregation):
    batch, _, _ = S.make_batch(groups(seed=4), pad=0)  # some responses are empty: rows with no loss tokens
    mask = batch["response_mask"]
    g = torch.Generator().manual_seed(2)
    batch["advantages"] = torch.randn(mask.shape, generator=g) * mask
    batch["ref_logprobs"] = -torch.rand(mask.shape, generator=g) * mask
    mini, micro = 6, 2
    spec = ActorLossSpec(PolicyLossSpec(), aggregation, kl_coef=0.5, normalization="micro-batch",
                         kl_aggregation="seq-mean-token-mean")
    cfg = {"ppo_epochs": 1, "mini_batch": mini, "micro_batch": micro,
           "denominators": S.denominators(mask, 1, mini), "loss": spec, "normalization": "micro-batch"}
    sgd = Optimizer(name="sgd", lr=1.0, grad_clip=None)

    by_hand = engine(model_path, optimizer=sgd)
    start = {k: v.detach().clone() for k, v in by_hand.model.named_parameters()}
    prompt_width = batch["input_ids"].shape[1] - mask.shape[1]
    first = {k: v[:mini] for k, v in batch.items()}  # one mini-batch: one optimizer step to compare
    assert (first["response_mask"].sum(dim=1) == 0).any()
    starts = range(0, mini, micro)
    for s in starts:
        mb = {k: v[s:s + micro] for k, v in first.items()}
        logprobs, _, hi = by_hand._forward(mb, prompt_width)
        view = {k: mb[k][:, :hi] for k in A.ACTOR_TOKEN_KEYS if k in mb}
        # skyrl-train: reduce_loss over this micro-batch alone (the KL a per-sequence mean over all its rows),
        # divided by the number of micro-batches.
        m = view["response_mask"].float()
        pg, _ = A.policy_loss(logprobs, logprobs.detach(), view["advantages"], m, spec.policy)
        if aggregation == "token-mean":
            policy = (pg * m).sum() / m.sum().clamp(min=1.0)
        else:
            policy = ((pg * m).sum(1) / m.sum(1).clamp(min=1.0)).mean()
        kl_tokens = A.kl_estimate(logprobs, view["ref_logprobs"], "k3")
        kl = ((kl_tokens * m).sum(1) / m.sum(1).clamp(min=1.0)).mean()
        ((policy + 0.5 * kl) / len(starts)).backward()
    expected = {k: start[k] - p.grad for k, p in by_hand.model.named_parameters() if p.grad is not None}

    cfg["denominators"] = S.denominators(first["response_mask"], 1, mini)
    once = engine(model_path, optimizer=sgd)
    once.train(first, cfg)
    params = dict(once.model.named_parameters())
    assert expected
    for k, value in expected.items():
        torch.testing.assert_close(params[k].detach(), value, rtol=1e-4, atol=1e-6)
    # One mean over the mini-batch takes another step on this batch.
    other = engine(model_path, optimizer=sgd)
    other.train(first, dict(cfg, normalization="mini-batch", loss=ActorLossSpec(
        PolicyLossSpec(), aggregation, kl_coef=0.5, kl_aggregation="seq-mean-token-mean")))
    moved = dict(other.model.named_parameters())
    assert any(not torch.allclose(moved[k].detach(), v, rtol=1e-4, atol=1e-6) for k, v in expected.items())


def test_an_episodes_environment_tokens_carry_no_gradient(model_path):
    """Multi-turn episodes (rlcfg.runtime.episodes): whatever the advantages, old log-probs and reference
    log-probs say at the environment's tokens (loss mask 0), the update is the same; they are only context."""
    g = torch.Generator().manual_seed(5)
    episodes = []
    for _ in range(4):
        turn, observation, last = (torch.randint(2, VOCAB, (n,), generator=g).tolist() for n in (3, 4, 2))
        episodes.append((turn + observation + last, None, True, [1] * 3 + [0] * 4 + [1] * 2))
    batch, _, _ = S.make_batch([{"prompt": [5, 6, 7], "responses": episodes, "scores": [0.0] * 4}], pad=0)
    mask = batch["response_mask"]
    assert mask.sum() == 4 * 5  # the observations' tokens are in the sequence, without loss
    batch["advantages"] = torch.randn(mask.shape, generator=g) * mask
    batch["ref_logprobs"] = -torch.rand(mask.shape, generator=g)
    batch["old_logprobs"] = -torch.rand(mask.shape, generator=g)
    spec = ActorLossSpec(PolicyLossSpec(), "token-mean", kl_coef=0.5, kl_aggregation="seq-mean-token-mean")
    cfg = {"ppo_epochs": 1, "mini_batch": 4, "micro_batch": 2, "denominators": S.denominators(mask, 1, 4),
           "loss": spec, "normalization": "micro-batch"}
    sgd = Optimizer(name="sgd", lr=1.0, grad_clip=None)

    def update(batch):
        trained = engine(model_path, optimizer=sgd)
        trained.train(batch, cfg)
        return {k: v.detach().clone() for k, v in trained.model.named_parameters()}

    environment = 1.0 - mask
    noisy = dict(batch, advantages=batch["advantages"] + 100.0 * environment,
                 ref_logprobs=batch["ref_logprobs"] - 5.0 * environment,
                 old_logprobs=batch["old_logprobs"] + 3.0 * environment)
    once, again = update(batch), update(noisy)
    for k, value in once.items():
        torch.testing.assert_close(again[k], value, rtol=0, atol=0)
    # and the masked tokens are not everything: a change where the model's tokens are moves the update
    moved = update(dict(batch, advantages=batch["advantages"] + 1.0 * mask))
    assert any(not torch.equal(moved[k], v) for k, v in once.items())
