"""The RL mathematics against numbers worked out by hand."""

import math

import pytest

torch = pytest.importorskip("torch")

from rlcfg.runtime import algorithms as A  # noqa: E402
from rlcfg.runtime.backends.fsdp import lr_lambda  # noqa: E402


def close(actual, expected, tol=1e-4):
    assert torch.allclose(torch.as_tensor(actual, dtype=torch.float32),
                          torch.as_tensor(expected, dtype=torch.float32), atol=tol), (actual, expected)


def test_grpo_divides_by_the_groups_std():
    # groups [1, 0] and [0, 1]: mean 0.5, unbiased std 0.7071
    close(A.grpo_advantages(torch.tensor([1.0, 0.0, 0.0, 1.0]), 2), [0.7071, -0.7071, -0.7071, 0.7071])


def test_grpo_without_std_only_centres():
    close(A.grpo_advantages(torch.tensor([1.0, 0.0, 3.0, 1.0]), 2, normalize_std=False), [0.5, -0.5, 1.0, -1.0])


def test_grpo_group_of_equal_scores_has_zero_advantage():
    close(A.grpo_advantages(torch.tensor([1.0, 1.0, 0.0, 0.0]), 2), [0, 0, 0, 0])


def test_grpo_rejects_a_batch_that_does_not_split_into_groups():
    with pytest.raises(ValueError, match="groups of 3"):
        A.grpo_advantages(torch.tensor([1.0, 0.0]), 3)


def test_rloo_subtracts_the_mean_of_the_others():
    close(A.rloo_advantages(torch.tensor([1.0, 0.0, 0.0]), 3), [1.0, -0.5, -0.5])


def test_discounted_returns():
    mask = torch.ones(1, 3)
    close(A.discounted_returns(torch.tensor([[0.0, 0.0, 1.0]]), mask, 0.5), [[0.25, 0.5, 1.0]])


def test_reinforce_pp_whitens_returns_over_the_batch():
    rewards = torch.tensor([[0.0, 1.0], [0.0, 0.0]])
    adv = A.reinforce_pp_advantages(rewards, torch.ones(2, 2), gamma=1.0)
    # returns [[1, 1], [0, 0]]: mean 0.5, std 0.5 -> ±1
    close(adv, [[1.0, 1.0], [-1.0, -1.0]], tol=1e-3)


def test_gae_by_hand():
    rewards, values, mask = torch.tensor([[0.0, 1.0]]), torch.tensor([[0.5, 0.8]]), torch.ones(1, 2)
    adv, ret = A.gae(rewards, values, mask, gamma=1.0, lam=1.0)
    close(adv, [[0.5, 0.2]])
    close(ret, [[1.0, 1.0]])
    adv, _ = A.gae(rewards, values, mask, gamma=0.9, lam=0.5)
    close(adv, [[0.31, 0.2]])  # δ0 = 0.9·0.8 − 0.5 = 0.22; A0 = 0.22 + 0.9·0.5·0.2


def test_gae_ignores_values_after_the_end():
    adv, ret = A.gae(torch.tensor([[1.0, 5.0]]), torch.tensor([[0.5, 9.0]]), torch.tensor([[1.0, 0.0]]), 1.0, 1.0)
    close(adv, [[0.5, 0.0]])
    close(ret, [[1.0, 0.0]])


def test_token_level_scores_sit_on_the_last_token():
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    close(A.token_level_scores(torch.tensor([2.0, 3.0]), mask), [[0, 2, 0], [3, 0, 0]])


@pytest.mark.parametrize("estimator,expected", [("k1", 1.0), ("abs", 1.0), ("k2", 0.5),
                                                ("k3", math.exp(-1) + 1 - 1)])
def test_kl_estimators(estimator, expected):
    # log π = −1, log π_ref = −2
    close(A.kl_estimate(torch.tensor([-1.0]), torch.tensor([-2.0]), estimator), [expected])


def test_abs_kl_is_symmetric_and_k1_is_not():
    close(A.kl_estimate(torch.tensor([-2.0]), torch.tensor([-1.0]), "abs"), [1.0])
    close(A.kl_estimate(torch.tensor([-2.0]), torch.tensor([-1.0]), "k1"), [-1.0])


def test_unknown_kl_estimator_is_an_error():
    with pytest.raises(ValueError, match="k3"):
        A.kl_estimate(torch.zeros(1), torch.zeros(1), "k9")


LOSS = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])


@pytest.mark.parametrize("mode,expected", [("token-mean", 2.5), ("seq-mean-token-sum", 5.0),
                                           ("seq-mean-token-mean", 3.0)])
def test_aggregations(mode, expected):
    close(A.aggregate(LOSS, MASK, mode), expected)


def test_global_denominators_make_micro_batches_add_up():
    whole = A.aggregate(LOSS, MASK, "token-mean")
    parts = sum(A.aggregate(LOSS[i:i + 1], MASK[i:i + 1], "token-mean", num_tokens=4.0) for i in range(2))
    close(parts, whole)
    whole = A.aggregate(LOSS, MASK, "seq-mean-token-mean")
    parts = sum(A.aggregate(LOSS[i:i + 1], MASK[i:i + 1], "seq-mean-token-mean", num_sequences=2.0) for i in range(2))
    close(parts, whole)


def _pg(ratio, adv, **kw):
    logp = torch.log(torch.tensor([[ratio]]))
    loss, _ = A.policy_loss(logp, torch.zeros(1, 1), torch.tensor([[adv]]), torch.ones(1, 1), **kw)
    return float(loss)


def test_regular_clip():
    assert _pg(1.5, 1.0) == pytest.approx(-1.2)  # positive advantage: capped at 1 + ε
    assert _pg(1.5, -1.0) == pytest.approx(1.5)  # negative advantage: the pessimistic unclipped term
    assert _pg(0.5, -1.0) == pytest.approx(0.8)  # capped at 1 − ε
    assert _pg(1.1, 1.0) == pytest.approx(-1.1)  # inside the trust region: unclipped


def test_decoupled_clip_uses_separate_bounds():
    assert _pg(1.5, 1.0, clip_low=0.2, clip_high=0.28) == pytest.approx(-1.28)
    assert _pg(0.5, -1.0, clip_low=0.1, clip_high=0.28) == pytest.approx(0.9)


def test_dual_clip_bounds_negative_advantages():
    assert _pg(4.0, -1.0) == pytest.approx(4.0)
    assert _pg(4.0, -1.0, mode="dual_clip", clip_ratio_c=3.0) == pytest.approx(3.0)
    assert _pg(4.0, 1.0, mode="dual_clip", clip_ratio_c=3.0) == pytest.approx(-1.2)  # positive: unchanged


def test_dual_clip_needs_c_above_one():
    with pytest.raises(ValueError, match="clip_ratio_c"):
        _pg(1.0, -1.0, mode="dual_clip", clip_ratio_c=1.0)


def test_gspo_uses_the_sequence_ratio_for_every_token():
    logp = torch.tensor([[0.05, 0.15]], requires_grad=True)
    loss, _ = A.policy_loss(logp, torch.zeros(1, 2), torch.ones(1, 2), torch.ones(1, 2), mode="gspo")
    s = math.exp(0.1)  # geometric mean of the token ratios
    close(loss.detach(), [[-s, -s]])
    loss.sum().backward()
    close(logp.grad, [[-s, -s]])
    clipped, _ = A.policy_loss(torch.tensor([[0.1, 0.3]]), torch.zeros(1, 2), torch.ones(1, 2), torch.ones(1, 2),
                               mode="gspo")
    close(clipped, [[-1.2, -1.2]])  # exp(0.2) = 1.22 > 1.2


def test_clip_fraction_is_reported():
    logp = torch.log(torch.tensor([[1.5, 1.0]]))
    _, stats = A.policy_loss(logp, torch.zeros(1, 2), torch.ones(1, 2), torch.ones(1, 2))
    assert float(stats["clip_frac"]) == pytest.approx(0.5)


def test_value_loss_clipped_is_pessimistic():
    close(A.value_loss(torch.tensor([2.0]), torch.tensor([1.0]), torch.tensor([0.0]), clip=0.5), [2.0])
    close(A.value_loss(torch.tensor([0.2]), torch.tensor([1.0]), torch.tensor([1.0]), clip=0.5), [0.32])
    close(A.value_loss(torch.tensor([2.0]), torch.tensor([1.0]), torch.tensor([0.0]), clip=None), [2.0])


def test_entropy_of_uniform_logits():
    close(A.entropy_from_logits(torch.zeros(1, 4)), [math.log(4)])


def test_reward_scale_bias_clip():
    close(A.shape_rewards(torch.tensor([1.0, -3.0]), scale=2.0, bias=1.0, clip=2.0), [2.0, -2.0])
    close(A.shape_rewards(torch.tensor([1.0, -3.0]), scale=2.0, bias=1.0), [3.0, -5.0])


def test_overlong_penalty_ramps_to_the_limit():
    close(A.overlong_penalty(torch.tensor([5, 6, 8, 10, 12]), max_length=10, penalty_start=6),
          [0.0, 0.0, -0.5, -1.0, -1.0])
    close(A.overlong_penalty(torch.tensor([8]), 10, 6, factor=2.0), [-1.0])
    with pytest.raises(ValueError, match="not below"):
        A.overlong_penalty(torch.tensor([1]), 10, 10)


def test_dynamic_sampling_drops_groups_without_signal():
    assert A.groups_with_signal(torch.tensor([1.0, 1.0, 0.0, 1.0]), 2).tolist() == [False, False, True, True]


def test_truncated_responses_leave_the_loss():
    mask = torch.ones(2, 3)
    close(A.mask_truncated(mask, torch.tensor([True, False])), [[1, 1, 1], [0, 0, 0]])


def test_learning_rate_schedules():
    cos = lr_lambda(warmup=2, total=10, schedule="cosine", min_ratio=0.0)
    assert [round(cos(s), 4) for s in (0, 1, 2, 6, 10)] == [0.5, 1.0, 1.0, 0.5, 0.0]
    lin = lr_lambda(warmup=0, total=10, schedule="linear", min_ratio=0.1)
    assert [round(lin(s), 4) for s in (0, 5, 10)] == [1.0, 0.55, 0.1]
    assert lr_lambda(0, 10, "constant", 0.0)(7) == 1.0
