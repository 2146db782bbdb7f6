"""The RL mathematics against numbers worked out by hand."""

import math

import pytest

torch = pytest.importorskip("torch")

from rlcfg.ir import Optimizer  # noqa: E402
from rlcfg.runtime import algorithms as A  # noqa: E402


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
    # returns [[1, 1], [0, 0]]: mean 0.5; verl's masked_whiten uses the unbiased variance 0.25·4/3 = 1/3, so
    # ±0.5/√(1/3) = ±0.8660 (the biased variance rlcfg used before gave ±1).
    close(adv, [[0.8660, 0.8660], [-0.8660, -0.8660]], tol=1e-3)
    close(A.reinforce_pp_advantages(rewards, torch.ones(2, 2), whiten_advantages=False), [[1, 1], [0, 0]])


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


def _pg(ratio, adv, kind="regular", **clips):
    logp = torch.log(torch.tensor([[ratio]]))
    loss, _ = A.policy_loss(logp, torch.zeros(1, 1), torch.tensor([[adv]]), torch.ones(1, 1),
                            ir.PolicyLossSpec(kind, **clips))
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
    assert _pg(4.0, -1.0, "dual_clip", clip_ratio_c=3.0) == pytest.approx(3.0)
    assert _pg(4.0, 1.0, "dual_clip", clip_ratio_c=3.0) == pytest.approx(-1.2)  # positive: unchanged


def test_dual_clip_needs_c_above_one():
    with pytest.raises(ValueError, match="clip_ratio_c"):
        _pg(1.0, -1.0, "dual_clip", clip_ratio_c=1.0)


def test_gspo_uses_the_sequence_ratio_for_every_token():
    logp = torch.tensor([[0.05, 0.15]], requires_grad=True)
    loss, _ = A.policy_loss(logp, torch.zeros(1, 2), torch.ones(1, 2), torch.ones(1, 2), ir.PolicyLossSpec("gspo"))
    s = math.exp(0.1)  # geometric mean of the token ratios
    close(loss.detach(), [[-s, -s]])
    loss.sum().backward()
    close(logp.grad, [[-s, -s]])
    clipped, _ = A.policy_loss(torch.tensor([[0.1, 0.3]]), torch.zeros(1, 2), torch.ones(1, 2), torch.ones(1, 2),
                               ir.PolicyLossSpec("gspo"))
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
    """The shapes at a glance; each framework's sequence is in tests/runtime/test_lr_schedule.py."""
    cos = A.lr_schedule(Optimizer(lr=1.0, scheduler="cosine", warmup_steps=2), 10)
    assert [round(A.lr_at(s, cos), 4) for s in (0, 1, 2, 6, 10)] == [0.0, 0.5, 1.0, 0.5, 0.0]
    lin = A.lr_schedule(Optimizer(lr=1.0, scheduler="linear", min_lr=0.1), 10)
    assert [round(A.lr_at(s, lin), 4) for s in (0, 5, 10)] == [1.0, 0.55, 0.1]
    assert A.lr_at(7, A.lr_schedule(Optimizer(lr=1.0), 10)) == 1.0


# ======================================================================================= each framework's meaning
# Numbers worked out by hand from the framework's definition named in each test.

from dataclasses import replace  # noqa: E402

from rlcfg import ir  # noqa: E402


def spec(kind="regular", **options):
    fields = {k: options.pop(k) for k in ("clip_low", "clip_high", "clip_ratio_c") if k in options}
    return ir.PolicyLossSpec(kind, **fields, options=ir.PolicyOptions(**options))


def pg1(ratio, adv, kind="regular", **options):
    """The per-token loss of one token with importance ratio `ratio` against π_old (log π_old = 0)."""
    loss, stats = A.policy_loss(torch.log(torch.tensor([[float(ratio)]])), torch.zeros(1, 1),
                                torch.tensor([[float(adv)]]), torch.ones(1, 1), spec(kind, **options))
    return float(loss)


def test_grpo_population_std_is_chatlearns():
    # ChatLearn AdvantageComputer: (r − mean)/(np.std + 1e-5). Scores [1, 0, 0, 0]: mean 0.25, population std
    # √(0.1875) = 0.4330127; 0.75/0.4330227 = 1.7320106, −0.25/0.4330227 = −0.5773369.
    adv = A.grpo_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0]), 4, eps=1e-5, std="population")
    close(adv, [1.7320106, -0.5773369, -0.5773369, -0.5773369], tol=1e-6)
    # torch.std (verl, SkyRL, ROLL, RLinf): unbiased std 0.5 → 1.5, −0.5.
    close(A.grpo_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0]), 4), [1.5, -0.5, -0.5, -0.5], tol=1e-5)


def test_chatlearn_caps_the_token_loss_at_3_and_the_log_ratio_at_10():
    # ChatLearn calculate_grpo_loss: log-ratio ≤ 10, max(−A·r, −A·clip(r)), then min(·, final_clip_ratio = 3).
    # log-ratio 12 → 10, r = e^10 = 22026.47; A = −1: max(22026.47, 1.2) = 22026.47 → capped at 3.
    chatlearn = dict(log_ratio_min=float("-inf"), log_ratio_max=10.0, loss_cap=3.0)
    assert pg1(math.exp(12), -1.0, **chatlearn) == pytest.approx(3.0)
    assert pg1(math.exp(12), -1.0) == pytest.approx(math.exp(12), rel=1e-5)  # verl: ±20 clamp only
    assert pg1(2.0, -1.0, **chatlearn) == pytest.approx(2.0)  # below the cap: PPO's loss
    loss, _ = A.policy_loss(torch.tensor([[12.0]]), torch.zeros(1, 1), torch.tensor([[1.0]]), torch.ones(1, 1),
                            spec(**chatlearn))
    assert float(loss) == pytest.approx(-1.2)  # positive advantage: the clip at 1 + ε


def test_roll_dual_clip_is_the_dual_clip_with_c_one_plus_twice_pg_clip():
    # ROLL actor_worker: −max(−loss, (1 + 2·pg_clip)·A) for A < 0. pg_clip 0.2 → c = 1.4; r = 2, A = −1:
    # PPO loss max(2, 1.2) = 2, bounded by 1.4.
    assert pg1(2.0, -1.0, "dual_clip", clip_ratio_c=1.4) == pytest.approx(1.4)
    assert pg1(2.0, 1.0, "dual_clip", clip_ratio_c=1.4) == pytest.approx(-1.2)


def test_cispo_weights_log_prob_by_the_detached_clipped_ratio():
    # verl/SkyRL compute_policy_loss_cispo: −sg(clip(r, 1 − 0.2, 1 + 0.28))·A·log π. log π = log 1.5 (π_old = 1):
    # −1.28·ln 1.5 = −0.5189953; d/d log π = −1.28 (the ratio carries no gradient).
    logp = torch.tensor([[math.log(1.5)]], requires_grad=True)
    loss, stats = A.policy_loss(logp, torch.zeros(1, 1), torch.ones(1, 1), torch.ones(1, 1),
                                spec("cispo", clip_high=0.28))
    assert float(loss.detach()) == pytest.approx(-0.5189953, abs=1e-6)
    loss.sum().backward()
    assert float(logp.grad) == pytest.approx(-1.28)
    assert float(stats["clip_frac"]) == 1.0


def test_topr_is_reinforce_on_positive_samples_and_a_capped_ratio_on_the_rest():
    """ROLL ActorPGWorker._compute_topr_loss, written out: −A·log π where the sample's score is positive, and
    −sg(clip(r, 0, 1))·A·log π elsewhere, each side × its weight."""
    logp = torch.tensor([[-0.5, -1.0], [-0.2, -0.7], [-1.5, -0.1]], requires_grad=True)
    old = torch.tensor([[-0.9, -0.8], [-0.6, -0.7], [-0.3, -0.4]])
    adv = torch.tensor([[1.0, 1.0], [-1.0, -1.0], [-0.5, -0.5]])
    positive = torch.tensor([1.0, 0.0, 0.0])  # scores 1, 0, −1: the second and third are ROLL's negatives
    weights = (2.0, 0.5)
    options = ir.PolicyOptions(topr_positive_weight=weights[0], topr_negative_weight=weights[1])
    loss, stats = A.policy_loss(logp, old, adv, torch.ones(3, 2), ir.PolicyLossSpec("topr", options=options),
                                positive=positive)
    ratio = (logp.detach() - old).exp()
    expected = torch.stack([-weights[0] * adv[0] * logp.detach()[0],
                            *(-weights[1] * ratio[i].clamp(0.0, 1.0) * adv[i] * logp.detach()[i] for i in (1, 2))])
    assert torch.allclose(loss.detach(), expected)
    loss.sum().backward()
    # the ratio carries no gradient: d/d log π = −weight·(capped ratio)·A
    grad = torch.stack([-weights[0] * adv[0], *(-weights[1] * ratio[i].clamp(0.0, 1.0) * adv[i] for i in (1, 2))])
    assert torch.allclose(logp.grad, grad)
    assert float(stats["clip_frac"]) == pytest.approx(2 / 6)  # the negative tokens whose ratio exceeds 1
    with pytest.raises(ValueError, match="score sign"):
        A.policy_loss(logp, old, adv, torch.ones(3, 2), ir.PolicyLossSpec("topr"))


def test_sapo_gate():
    # verl/SkyRL sapo: loss −σ(τ(r − 1))·4/τ·A, τ = 1 for A > 0, 1.05 otherwise. At r = 1: −2 for A = 1;
    # for A = −1: 0.5·4/1.05 = 1.9047619. The gradient at r = 1 is −A·σ'(0)·4 = −A.
    assert pg1(1.0, 1.0, "sapo") == pytest.approx(-2.0)
    assert pg1(1.0, -1.0, "sapo") == pytest.approx(1.9047619, abs=1e-6)
    logp = torch.zeros(1, 1, requires_grad=True)
    loss, _ = A.policy_loss(logp, torch.zeros(1, 1), torch.ones(1, 1), torch.ones(1, 1), spec("sapo"))
    loss.sum().backward()
    assert float(logp.grad) == pytest.approx(-1.0)


def test_clip_cov_detaches_the_high_covariance_tokens():
    # verl/SkyRL compute_policy_loss_clip_cov. Tokens (A, log π): (1, 0), (−1, −2), (1, −1), all r = 1 (π_old = π).
    # mean A = 1/3, mean log π = −1; cov = (2/3)(1) = 0.667, (−4/3)(−1) = 1.333, (2/3)(0) = 0. With lb 0.5 and
    # ratio 1 every token with cov in (0.5, 5) is chosen: the first two lose their gradient (loss × 0).
    logp = torch.tensor([[0.0, -2.0, -1.0]], requires_grad=True)
    adv = torch.tensor([[1.0, -1.0, 1.0]])
    loss, stats = A.policy_loss(logp, logp.detach(), adv, torch.ones(1, 3),
                                spec("clip_cov", clip_cov_ratio=1.0, clip_cov_lb=0.5))
    close(loss.detach(), [[0.0, 0.0, -1.0]])
    assert float(stats["clip_frac"]) == pytest.approx(2 / 3)


def test_kl_cov_penalises_the_largest_covariance_tokens():
    # verl/SkyRL compute_policy_loss_kl_cov: −r·A, and + coef·|log r| on the top kl_cov_ratio share by covariance.
    # Same tokens as above, r = e^0.1 on each (π_old = π·e^−0.1); ratio 0.34 → max(1, int(3·0.34)) = 1 token,
    # the one with cov 1.333 (A = −1): e^0.1 + 2·0.1.
    logp = torch.tensor([[0.0, -2.0, -1.0]])
    adv = torch.tensor([[1.0, -1.0, 1.0]])
    loss, _ = A.policy_loss(logp, logp - 0.1, adv, torch.ones(1, 3), spec("kl_cov", kl_cov_ratio=0.34,
                                                                          kl_cov_coef=2.0))
    r = math.exp(0.1)
    close(loss, [[-r, r + 0.2, -r]], tol=1e-6)


def test_cross_entropy_and_importance_sampling():
    # SkyRL cross_entropy_loss: −log π; importance_sampling_loss: −(π/π_old)·A, unclipped.
    assert pg1(0.5, 3.0, "cross_entropy") == pytest.approx(-math.log(0.5))
    assert pg1(2.0, 1.0, "importance_sampling") == pytest.approx(-2.0)


def test_areal_decoupled_loss_weights_by_proximal_over_behaviour():
    # AReaL ppo_actor_loss_fn (behav_imp_weight_cap era): ratio against π_prox (= old), loss × π_prox/π_behave
    # when that weight ≤ cap, else the token leaves the loss. π_prox/π_behave = 1/0.5 = 2; r = 1, A = 1 → −1·2.
    def run(cap):
        loss, _ = A.policy_loss(torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1), torch.ones(1, 1),
                                spec(decoupled=True, behav_imp_weight_cap=cap),
                                rollout_logprobs=torch.log(torch.tensor([[0.5]])))
        return float(loss)
    assert run(None) == pytest.approx(-2.0)
    assert run(3.0) == pytest.approx(-2.0)
    assert run(1.5) == 0.0
    with pytest.raises(ValueError, match="rollout engine"):
        A.policy_loss(torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1), torch.ones(1, 1), spec(decoupled=True))


@pytest.mark.parametrize("staleness, alpha", [(0, 0.0), (1, 0.0), (2, 0.5), (3, 2 / 3), (5, 0.8)])
def test_the_interpolated_proximal_policy_is_one_update_behind_the_current_one(staleness, alpha):
    # AReaL compute_prox_logp_approximations: v_prox = v_current − 1, α = (v_prox − v_behave) / (v_current − v_behave)
    # clamped to [0, 1], 0 where v_current = v_behave; here v_current − v_behave is the staleness.
    assert A.proximal_weight(staleness) == pytest.approx(alpha)


def test_the_decoupled_loss_with_an_interpolated_proximal_policy():
    # log π_prox = log π_behave + α·(log π − log π_behave), π detached: π_behave 0.5, π 0.8, α 0.5 → π_prox
    # = √(0.5·0.8) = 0.632; the loss is −(π/π_prox)·A·(π_prox/π_behave) for A = 1 (r inside the clip band).
    logp = torch.log(torch.tensor([[0.8]])).requires_grad_()
    behave = torch.log(torch.tensor([[0.5]]))
    mb = {"response_mask": torch.ones(1, 1), "advantages": torch.ones(1, 1), "old_logprobs": behave,
          "rollout_logprobs": behave, "proximal_weight": torch.tensor([0.5])}
    actor = ir.ActorLossSpec(spec(decoupled=True, clip_low=0.5, clip_high=1.0), "token-mean")
    loss, _ = A.actor_loss(logp, mb, actor)
    prox = math.sqrt(0.5 * 0.8)
    assert float(loss.detach()) == pytest.approx(-(0.8 / prox) * (prox / 0.5))
    loss.backward()  # the gradient flows through π alone, not through the interpolated π_prox
    assert float(logp.grad) == pytest.approx(-(0.8 / prox) * (prox / 0.5))
    # α = 0 (rollouts at most one update old) is the decoupled loss against the engine's log-probs
    at_zero, _ = A.actor_loss(logp.detach(), {**mb, "proximal_weight": torch.tensor([0.0])}, actor)
    assert float(at_zero) == pytest.approx(-0.8 / 0.5)


def test_truncated_importance_sampling():
    # SkyRL compute_tis_ratio: token min(π_old/π_rollout, cap); sequence min(Π π_old/π_rollout, cap).
    old = torch.zeros(1, 2)
    rollout = torch.log(torch.tensor([[1 / 1.5, 1 / 1.5]]))  # each token ratio 1.5, the sequence 2.25
    close(A.tis_weights(old, rollout, torch.ones(1, 2), 2.0, "token"), [[1.5, 1.5]])
    close(A.tis_weights(old, rollout, torch.ones(1, 2), 2.0, "sequence"), [[2.0, 2.0]])
    close(A.tis_weights(old, rollout, torch.tensor([[1.0, 0.0]]), 2.0, "sequence"), [[1.5, 1.5]])
    loss, _ = A.policy_loss(old, old, torch.ones(1, 2), torch.ones(1, 2), spec(tis_cap=1.2),
                            rollout_logprobs=rollout)
    close(loss, [[-1.2, -1.2]])  # r = 1, A = 1: −1 × min(1.5, 1.2)
    # RLinf's importance_sampling_fix up to v0.2: max(π_old/π_rollout, cap), per token
    close(A.tis_weights(old, rollout, torch.ones(1, 2), 2.0, floor=True), [[2.0, 2.0]])
    close(A.tis_weights(old, rollout, torch.ones(1, 2), 1.2, floor=True), [[1.5, 1.5]])


def test_rollout_is_weights_log_prob_by_the_ratio_to_the_rollout_policy_inside_its_band():
    # the skyrl package's rollout_is_policy_loss: r = π/π_rollout (not π_old), w = r inside (1 − 0.2, 1 + 0.2) and
    # 0 outside, loss −sg(w)·A·log π. Tokens with log π = log 0.5 (π_old = π: the ratio to π_old is 1):
    # π_rollout 0.45 → r = 1.111, inside: −1.111·ln 0.5 = 0.7701635, gradient −1.111; π_rollout 0.25 → r = 2,
    # outside: loss 0 and no gradient.
    logp = torch.log(torch.tensor([[0.5, 0.5]])).requires_grad_(True)
    rollout = torch.log(torch.tensor([[0.45, 0.25]]))
    loss, stats = A.policy_loss(logp, logp.detach(), torch.ones(1, 2), torch.ones(1, 2), spec("rollout_is"),
                                rollout_logprobs=rollout)
    close(loss.detach(), [[0.7701635, 0.0]], tol=1e-6)
    loss.sum().backward()
    close(logp.grad, [[-0.5 / 0.45, 0.0]], tol=1e-6)
    assert float(stats["clip_frac"]) == 0.5
    with pytest.raises(ValueError, match="rollout engine"):
        A.policy_loss(logp, logp.detach(), torch.ones(1, 2), torch.ones(1, 2), spec("rollout_is"))


def test_the_sequence_mask_takes_sequences_out_of_the_loss_but_not_out_of_its_denominator():
    # SkyRL compute_sequence_mask: geometric = exp(mean over the sequence's tokens of log π_old/π_rollout), masked
    # outside [0.99, 1.01]; product = exp(the sum), masked outside [0.5, 2]. Row 0: ratios 1.0 and 1.0 (kept);
    # row 1: ratios 1.05 and 1.0 (geometric √1.05 = 1.0247: masked; product 1.05: kept); row 2: ratios 3 and 1 on
    # one token only, the other padding (geometric 3, product 3: masked by both).
    mask = torch.tensor([[1.0, 1.0], [1.0, 1.0], [1.0, 0.0]])
    old = torch.zeros(3, 2)
    rollout = -torch.log(torch.tensor([[1.0, 1.0], [1.05, 1.0], [3.0, 1.0]]))
    close(A.sequence_mask(old, rollout, mask, "geometric", 0.99, 1.01), [[1, 1], [0, 0], [0, 0]])
    close(A.sequence_mask(old, rollout, mask, "product", 0.5, 2.0), [[1, 1], [1, 1], [0, 0]])
    close(A.sequence_mask(old, rollout, mask, "product", None, None), [[1, 1], [1, 1], [1, 1]])
    # In the actor's loss the masked rows contribute 0 while the token mean still divides by all 5 tokens (the
    # package scales its advantages by the unmasked loss mask before the mask applies): regular loss −A·r = −1 per
    # kept token, 2 kept tokens → −2/5.
    options = dict(sequence_mask="geometric", sequence_mask_low=0.99, sequence_mask_high=1.01)
    actor = ir.ActorLossSpec(spec(**options), "token-mean", normalization="mini-batch")
    mb = {"response_mask": mask, "advantages": torch.ones(3, 2), "old_logprobs": old, "rollout_logprobs": rollout}
    loss, stats = A.actor_loss(old.clone(), mb, actor, num_tokens=5.0, num_sequences=3.0)
    assert float(loss) == pytest.approx(-0.4)
    assert float(stats["masked_sequences"]) == pytest.approx(2 / 3)


def test_m2po_leaves_out_the_largest_second_moments_until_the_rest_average_below_the_threshold():
    # AReaL _get_m2po_loss_mask: m = (log π_behave − log π_prox)²; within the mask sorted 0.09, 0.04, 0.01, 0, 0
    # (a padded column outside it carries 1.0 and is not counted). Means of the tails: 0.028, 0.0125, 0.0033, 0, 0.
    # With threshold 0.02 the first tail below it starts at the second token: 0.09 leaves; with 0.001 the three
    # largest leave.
    behave = torch.tensor([[0.3, 0.1, 1.0], [0.0, 0.2, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    prox = torch.zeros(2, 3)  # second moments [[0.09, 0.01, 1.0 (padding)], [0.0, 0.04, 0.0]]
    close(A.m2po_kept(behave, prox, mask, 0.02), [[0, 1, 0], [1, 1, 1]])
    close(A.m2po_kept(behave, prox, mask, 0.001), [[0, 0, 0], [1, 0, 1]])  # zero-moment tokens average 0
    close(A.m2po_kept(behave, prox, mask, 1.0), mask)  # already below: nothing leaves
    close(A.m2po_kept(behave, prox, torch.zeros(2, 3), 0.02), torch.zeros(2, 3))
    # no tail averages below a threshold of 0: all but the smallest one leave
    assert float(A.m2po_kept(behave, prox + 1.0, mask, 0.0).sum()) == 1.0


def test_m2po_loss_is_the_mean_over_the_kept_tokens_weighted_by_all_of_the_micro_batchs_tokens():
    # AReaL: ppo_actor_loss_fn averages over the M2PO loss mask, and the engine weighs each micro-batch by its
    # whole loss mask. Two tokens with A = 1 and −3 and r = 1 (per-token loss −A: −1 and 3); the second's moment
    # (0.25) is over the threshold, so the micro-batch's loss is −1 (the kept mean) × 2/4 (its 2 of the 4 tokens
    # in the mini-batch).
    mask = torch.ones(1, 2)
    prox = torch.zeros(1, 2)
    mb = {"response_mask": mask, "advantages": torch.tensor([[1.0, -3.0]]), "old_logprobs": prox,
          "rollout_logprobs": torch.tensor([[0.0, 0.5]])}
    actor = ir.ActorLossSpec(spec(m2_threshold=0.1), "token-mean", normalization="mini-batch")
    loss, _ = A.actor_loss(prox.clone(), mb, actor, num_tokens=4.0, num_sequences=2.0)
    assert float(loss) == pytest.approx(-1.0 * 2 / 4)
    plain, _ = A.actor_loss(prox.clone(), mb, ir.ActorLossSpec(spec(), "token-mean", normalization="mini-batch"),
                            num_tokens=4.0, num_sequences=2.0)
    assert float(plain) == pytest.approx((-1.0 + 3.0) / 4)
    assert ir.Algorithm(policy_options=ir.PolicyOptions(m2_threshold=0.1)).needs_rollout_logprobs()


def test_actor_loss_order_coefficients_weights_and_early_stop():
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    logp = torch.zeros(2, 2)
    mb = {"response_mask": mask, "advantages": torch.tensor([[1.0, 1.0], [2.0, 0.0]]),
          "ref_logprobs": torch.full((2, 2), -1.0)}
    ent = torch.full((2, 2), 0.5)
    base = ir.ActorLossSpec(kl_coef=0.1, kl_estimator="k1", entropy_coef=0.01)
    loss, out = A.actor_loss(logp, mb, base, entropy=ent)
    # pg: token-mean of −A = −(1 + 1 + 2)/3; KL k1 = 1 per token; (pg + 0.1·1) − 0.01·0.5.
    assert float(out["pg_loss"]) == pytest.approx(-4 / 3)
    assert float(loss) == pytest.approx(-4 / 3 + 0.1 - 0.005)
    # ROLL rl_loss_coef multiplies policy + KL, not the entropy bonus.
    coef = replace(base, policy=spec(loss_coef=0.5))
    assert float(A.actor_loss(logp, mb, coef, entropy=ent)[0]) == pytest.approx(0.5 * (-4 / 3 + 0.1) - 0.005)
    # ROLL length_loss_weight: lengths [2, 1] → 1.5 − [1, 0] = [0.5, 1.5], mean 1 already: pg = −(0.5·2 + 1.5·2)/3.
    weighted = replace(base, weighting=ir.SampleWeighting(length_loss_weight=True))
    assert float(A.actor_loss(logp, mb, weighted, entropy=ent)[1]["pg_loss"]) == pytest.approx(-4 / 3)
    # RLinf early_stop_imp_ratio: the mean ratio here is 1; above a threshold of 0.5 the whole loss is zeroed.
    stop = replace(base, policy=spec(early_stop_ratio=0.5))
    assert float(A.actor_loss(logp, mb, stop, entropy=ent)[0]) == 0.0
    assert float(A.actor_loss(logp, mb, replace(base, policy=spec(early_stop_ratio=1.5)), entropy=ent)[0]) != 0.0


def test_roll_sample_weights():
    # ActorWorker.compute_sample_weights: difficulty 0.5 + 1.5·d → [0.5, 2.0]; lengths [2, 4] → 1.5 − [0, 1] =
    # [1.5, 0.5]; product [0.75, 1.0], rescaled to mean 1: × 2/1.75.
    mask = torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    w = A.sample_weights(mask, ir.SampleWeighting(True, True), torch.tensor([0.0, 1.0]))
    close(w, [0.75 * 2 / 1.75, 1.0 * 2 / 1.75], tol=1e-6)
    # Without a difficulty in the data ROLL skips that weight.
    close(A.sample_weights(mask, ir.SampleWeighting(True, False)), [1.0, 1.0])


def test_roll_sample_masks():
    scores = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0])
    lengths = torch.tensor([3, 10, 5, 8, 2, 9])
    # difficulty_mask (0.1, 0.95): group means 1/3 (kept), 2/3 (kept)... with group size 3: [1,0,1] → 0.667 kept,
    # [1,0,0] → 0.333 kept; with thresholds (0.5, 0.95) only the first group is kept.
    w = ir.SampleWeighting(difficulty_mask=(0.5, 0.95))
    close(A.sample_mask(scores, lengths, 3, 10, w), [1, 1, 1, 0, 0, 0])
    # error_max_len_clip 5: score 1 kept; score 0 kept only when shorter than 5.
    w = ir.SampleWeighting(error_max_len_clip=5)
    close(A.sample_mask(scores, lengths, 3, 10, w), [1, 0, 1, 1, 1, 0])
    close(A.sample_mask(scores, lengths, 3, 10, ir.SampleWeighting(max_len_mask=True)), [1, 0, 1, 1, 1, 1])


def test_adaptive_kl_controller_by_hand():
    # verl/SkyRL/ROLL AdaptiveKLController: kl 0.2 vs target 0.05 → error clip(3, ±0.2) = 0.2;
    # 0.1·(1 + 0.2·64/1000) = 0.10128. kl 0.04 → error −0.2: 0.1·(1 − 0.0128).
    ctl = ir.KLController("adaptive", target=0.05, horizon=1000)
    assert A.next_kl_coef(0.1, 0.2, 64, ctl) == pytest.approx(0.10128)
    assert A.next_kl_coef(0.1, 0.04, 64, ctl) == pytest.approx(0.1 * (1 - 0.2 * 0.064 / 0.8 * 0.8))
    assert A.next_kl_coef(0.1, 0.2, 64, ir.KLController()) == 0.1
    with pytest.raises(ValueError, match="target"):
        A.next_kl_coef(0.1, 0.2, 64, ir.KLController("adaptive"))
    close(A.sequence_mean_kl(torch.tensor([[1.0, 3.0], [2.0, 9.0]]), torch.tensor([[1.0, 1.0], [1.0, 0.0]])), 2.0)


def test_kl_in_reward_per_token_is_roll_and_areal():
    # ROLL: group-normalised score (unbiased std; [1, 0] → ±0.7071), then − β·KL per token, advantage = reward-to-go.
    # β·KL = 0.5·[[0.1, 0.2], [0, 0.3]]: row 0 rewards [−0.05, 0.7071 − 0.1] → [0.5571, 0.6071];
    # row 1 [0, −0.7071 − 0.15] → [−0.8571, −0.8571].
    mask = torch.ones(2, 2)
    kl = torch.tensor([[0.1, 0.2], [0.0, 0.3]])
    adv, _ = A.compute_advantages(torch.tensor([1.0, 0.0]), mask, estimator="grpo", group_size=2,
                                  options=ir.AdvantageOptions(), kl_penalty=0.5 * kl, kl_mode="token")
    close(adv, [[0.5571, 0.6071], [-0.8571, -0.8571]], tol=1e-4)
    # verl's meaning ("sequence"): sums [1 − 0.15, 0 − 0.15] → GRPO → ±0.7071 on every token.
    adv, _ = A.compute_advantages(torch.tensor([1.0, 0.0]), mask, estimator="grpo", group_size=2,
                                  options=ir.AdvantageOptions(), kl_penalty=0.5 * kl, kl_mode="sequence")
    close(adv, [[0.7071, 0.7071], [-0.7071, -0.7071]], tol=1e-4)


def test_roll_reward_clip_clamps_the_normalised_reward():
    # ROLL reward_postprocess: group norm then clamp. [1, 0, 0, 0] → [1.5, −0.5, −0.5, −0.5] → clip 1 → [1, −0.5, ...].
    adv, _ = A.compute_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0]), torch.ones(4, 1), estimator="grpo",
                                  group_size=4, options=ir.AdvantageOptions(), normalized_clip=1.0)
    close(adv.squeeze(1), [1.0, -0.5, -0.5, -0.5], tol=1e-5)
    # Clipping the raw score instead (rlcfg's old order) is a no-op for scores within ±1.
    shaped = A.shape_scores(torch.tensor([1.0, 0.0]), torch.tensor([1, 1]), torch.tensor([True, True]), 10,
                            ir.RewardShaping(clip=1.0, order="clip_normalized"))
    close(shaped, [1.0, 0.0])


def test_advantage_clip_and_whitening_options():
    mask = torch.ones(2, 1)
    opts = ir.AdvantageOptions(clip=0.5)
    adv, _ = A.compute_advantages(torch.tensor([1.0, 0.0]), mask, estimator="grpo", group_size=2, options=opts)
    close(adv.squeeze(1), [0.5, -0.5])  # ROLL advantage_clip: ±0.7071 clamped
    rewards = torch.tensor([1.0, 0.0])
    plain, _ = A.compute_advantages(rewards, mask, estimator="reinforce++", group_size=1,
                                    options=ir.AdvantageOptions(whiten=False))
    close(plain.squeeze(1), [1.0, 0.0])  # ROLL whiten_advantages: false → the raw return


def test_areal_applies_the_overlong_penalty_before_scaling():
    # AReaL _compute_advantages: reward_overlong_penalty first, then (r + bias)·scaling, then clip.
    # Length 8, max 10, penalty from 6 → −0.5: (1 − 0.5 + 0)·10 = 5; rlcfg's scale_first: 1·10 − 0.5 = 9.5.
    raw, lengths, done = torch.tensor([1.0]), torch.tensor([8]), torch.tensor([True])
    areal = ir.RewardShaping(scale=10.0, overlong_penalty_length=6, order="penalty_first")
    close(A.shape_scores(raw, lengths, done, 10, areal), [5.0])
    close(A.shape_scores(raw, lengths, done, 10, replace(areal, order="scale_first")), [9.5])
    # bias is added before the scaling in AReaL: (1 + 1)·10 = 20, clip 15 → 15.
    close(A.shape_scores(raw, torch.tensor([1]), done, 10, ir.RewardShaping(scale=10.0, bias=1.0, clip=15.0,
                                                                           order="penalty_first")), [15.0])


def test_mask_no_eos_with_zero_zeroes_the_score():
    # AReaL mask_no_eos_with_zero / SkyRL zero_reward_on_non_stop: the score is 0; the sample stays in the loss.
    shaped = A.shape_scores(torch.tensor([1.0, 1.0]), torch.tensor([3, 10]), torch.tensor([True, False]), 10,
                            ir.RewardShaping(bias=0.5, zero_truncated=True))
    close(shaped, [1.5, 0.0])


def test_group_filters():
    scores = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.5, 0.5000001])
    keep = A.keep_groups(scores, 2, ir.FilterSpec(zero_variance=True))
    assert keep.tolist() == [False, True, False, True]
    keep = A.keep_groups(scores, 2, ir.FilterSpec(zero_variance=True, zero_variance_tol=1e-6))
    assert keep.tolist() == [False, True, False, False]  # SkyRL's tolerance
    # A group with one live response (the other empty) is kept (SkyRL zero_variance_filter's live count).
    assert A.keep_groups(torch.tensor([1.0, 1.0]), 2, ir.FilterSpec(zero_variance=True),
                         lengths=torch.tensor([4, 0])).tolist() == [True]
    # ROLL mean_filter: keep when down < mean < up; std_filter: keep when std > threshold.
    assert A.keep_groups(scores, 2, ir.FilterSpec(mean_range=(0.0, 1.0))).tolist() == [False, True, False, True]
    assert A.keep_groups(scores, 2, ir.FilterSpec(std_min=0.1)).tolist() == [False, True, False, False]


def test_dynamic_sampling_filter_with_a_draw_limit():
    f = ir.FilterSpec(zero_variance=True, dynamic="filter", max_draws=2)
    assert A.select_groups([True, False, True], 2, 1, f) == A.GroupSelection((0, 2), False)
    assert A.select_groups([True, False], 2, 1, f) == A.GroupSelection((0,), True)
    assert A.select_groups([True, False, False, False], 2, 2, f) == A.GroupSelection((0,), False, exhausted=True)
    assert A.select_groups([False] * 4, 2, 50, replace(f, max_draws=None)).draw_again


def test_dynamic_sampling_replace_trains_on_exactly_the_groups_asked_for():
    # SkyRL handle_replace_sampling: with more than min_replace_ratio good groups, each bad group is replaced by a
    # good one; the batch keeps its size. Good 0, 2, 3 of 4 (0.75 > 0.3): group 1 becomes one of them.
    f = ir.FilterSpec(zero_variance=True, dynamic="replace", min_replace_ratio=0.3)
    sel = A.select_groups([True, False, True, True], 4, 1, f, torch.Generator().manual_seed(0))
    assert len(sel.groups) == 4 and not sel.draw_again
    assert sel.groups[0] == 0 and sel.groups[2:] == (2, 3) and sel.groups[1] in (0, 2, 3)
    # 1 good of 4 (0.25 ≤ 0.3): draw again; at the limit, exhausted.
    assert A.select_groups([True, False, False, False], 4, 1, f).draw_again
    assert A.select_groups([False, False, True, False], 4, 4, f).exhausted
    # Fewer good groups than bad ones: replacements repeat good groups.
    sel = A.select_groups([True, True, False, False, False], 5, 1, f, torch.Generator().manual_seed(0))
    assert set(sel.groups[2:]) <= {0, 1}


def test_reinforce_pp_baseline_token_mode_is_rlinfs():
    # RLinf compute_reinpp_advantages with use_reinpp_baseline: score − group mean at the last token, −β·KL per
    # token, reward-to-go, whitened. Scores [1, 0] → [0.5, −0.5]; no KL; one token each: whitened ±0.7071
    # (unbiased variance 0.5).
    adv, _ = A.compute_advantages(torch.tensor([1.0, 0.0]), torch.ones(2, 1), estimator="reinforce++", group_size=2,
                                  options=ir.AdvantageOptions(group_baseline=True), kl_mode="token")
    close(adv.squeeze(1), [0.7071, -0.7071], tol=1e-4)


def test_whitening_with_one_token_does_not_divide_by_zero():
    close(A.whiten(torch.tensor([[3.0]]), torch.ones(1, 1)), [[0.0]])


def test_algorithm_defaults_reproduce_the_previous_settings():
    alg = ir.Algorithm()
    loss = alg.actor_loss_spec()
    assert loss.policy == ir.PolicyLossSpec() and (loss.kl_coef, loss.entropy_coef) == (0.0, 0.0)
    assert ir.Algorithm(kl=ir.KL("loss", 0.3)).actor_loss_spec().kl_coef == 0.3
    assert ir.Algorithm(kl=ir.KL("reward", 0.3)).actor_loss_spec().kl_coef == 0.0
    assert ir.Algorithm(dynamic_sampling=True).filter_spec() == ir.FilterSpec(zero_variance=True, dynamic="filter")


# ======================================================================================= agreement with verl
# tests/runtime/data/verl_reference.json holds seeded inputs and what verl's own core_algos.py computed from them
# (tools/verl_reference.py, run against volcengine/verl; its revision is in the file). Where verl and rlcfg mean
# the same thing the numbers agree to 1e-6.

import json  # noqa: E402
from pathlib import Path  # noqa: E402

REF = json.loads((Path(__file__).parent / "data" / "verl_reference.json").read_text())
TOL = REF["tolerance"]
IN = {k: (torch.tensor(v, dtype=torch.float32) if isinstance(v, list) else v) for k, v in REF["inputs"].items()}
OUT = REF["outputs"]
VMASK = IN["mask"]
N = IN["group_size"]


def agree(ours, theirs, mask=None):
    theirs = torch.tensor(theirs, dtype=torch.float32)
    ours = torch.as_tensor(ours, dtype=torch.float32)
    if mask is not None:  # verl leaves whitened values on padding; rlcfg zeroes them
        ours, theirs = ours * mask, theirs * mask
    diff = float((ours - theirs).abs().max())
    assert diff <= TOL, f"differs from verl by {diff:.3g}"


def _token(scores, penalty=None):
    out = A.token_level_scores(scores, VMASK)
    return out - penalty * VMASK if penalty is not None else out


@pytest.mark.parametrize("name", ["scores", "flat_scores"])
@pytest.mark.parametrize("by_std", [True, False])
def test_grpo_agrees_with_verl(name, by_std):
    ours = A.grpo_advantages(IN[name], N, normalize_std=by_std).unsqueeze(1) * VMASK
    agree(ours, OUT[f"grpo/{name}/std={by_std}"])


@pytest.mark.parametrize("name", ["scores", "flat_scores"])
def test_rloo_and_reinforce_pp_baseline_agree_with_verl(name):
    agree(A.rloo_advantages(IN[name], N).unsqueeze(1) * VMASK, OUT[f"rloo/{name}"])
    adv, _ = A.compute_advantages(IN[name], VMASK, estimator="reinforce++", group_size=N,
                                  options=ir.AdvantageOptions(group_baseline=True))
    agree(adv, OUT[f"reinforce++baseline/{name}"], VMASK)


def test_grpo_with_kl_in_the_reward_agrees_with_verl():
    # verl compute_rewards (score − β·KL per token) summed per sequence: rlcfg's kl_mode "sequence".
    adv, _ = A.compute_advantages(IN["scores"], VMASK, estimator="grpo", group_size=N, options=ir.AdvantageOptions(),
                                  kl_penalty=0.1 * IN["kl_tokens"])
    agree(adv, OUT["grpo/kl_in_reward_0.1"])


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_reinforce_pp_agrees_with_verl(gamma):
    ref = OUT[f"reinforce++/gamma={gamma}"]
    adv, _ = A.compute_advantages(IN["scores"], VMASK, estimator="reinforce++", group_size=N,
                                  options=ir.AdvantageOptions(), gamma=gamma, kl_penalty=0.1 * IN["kl_tokens"])
    agree(adv, ref["advantages"], VMASK)
    agree(A.discounted_returns(_token(IN["scores"], 0.1 * IN["kl_tokens"]), VMASK, gamma), ref["returns"], VMASK)


@pytest.mark.parametrize("gamma,lam", [(1.0, 1.0), (0.95, 0.9)])
def test_gae_agrees_with_verl(gamma, lam):
    ref = OUT[f"gae/gamma={gamma}/lam={lam}"]
    values = IN["values"] * VMASK
    adv, ret = A.compute_advantages(IN["scores"], VMASK, estimator="gae", group_size=N, options=ir.AdvantageOptions(),
                                    gamma=gamma, lam=lam, kl_penalty=0.1 * IN["kl_tokens"], values=values)
    agree(adv, ref["advantages"], VMASK)  # whitened with the unbiased variance, as verl's masked_whiten
    agree(ret, ref["returns"], VMASK)


@pytest.mark.parametrize("name", ["k1", "k2", "k3", "low_var_kl", "abs", "kl", "mse"])
def test_kl_estimators_agree_with_verl(name):
    agree(A.kl_estimate(IN["logp"], IN["ref"], name), OUT[f"kl/{name}"])


@pytest.mark.parametrize("mode", A.AGGREGATIONS)
def test_aggregation_agrees_with_verl(mode):
    agree(A.aggregate(IN["loss_mat"], VMASK, mode), OUT[f"agg/{mode}"])


def _vpg(kind, mode="token-mean", **kw):
    loss, stats = A.policy_loss(IN["logp"], IN["old"], IN["adv"], VMASK, spec(kind, **kw))
    return A.aggregate(loss, VMASK, mode), stats


@pytest.mark.parametrize("high", [0.2, 0.28])
@pytest.mark.parametrize("mode", A.AGGREGATIONS)
def test_ppo_dual_clip_loss_agrees_with_verl(high, mode):
    # verl's vanilla loss always applies the dual clip (clip_ratio_c = 3): rlcfg's "dual_clip". rlcfg's "regular"
    # (SkyRL's regular, RLinf without clip_ratio_c) has no dual clip, a meaning verl does not offer.
    ref = OUT[f"pg/vanilla/0.2/{high}/{mode}"]
    loss, stats = _vpg("dual_clip", mode, clip_high=high)
    agree(loss, ref["loss"])
    agree(stats["clip_frac"], ref["clipfrac"])
    agree(stats["approx_kl"], ref["ppo_kl"])


def test_gspo_sapo_cispo_agree_with_verl():
    # verl aggregates GSPO and SAPO with seq-mean-token-mean whatever the config says; rlcfg leaves the
    # aggregation to the dialect (SkyRL honours loss_reduction), so the same aggregation is asked for here.
    loss, stats = _vpg("gspo", "seq-mean-token-mean", clip_low=3e-4, clip_high=4e-4)
    agree(loss, OUT["pg/gspo"]["loss"])
    agree(stats["clip_frac"], OUT["pg/gspo"]["clipfrac"])
    agree(stats["approx_kl"], OUT["pg/gspo"]["ppo_kl"])
    loss, stats = _vpg("sapo", "seq-mean-token-mean")
    agree(loss, OUT["pg/sapo"]["loss"])
    loss, stats = _vpg("cispo", clip_high=0.28)
    agree(loss, OUT["pg/cispo"]["loss"])
    agree(stats["clip_frac"], OUT["pg/cispo"]["clipfrac"])


def test_clip_cov_and_kl_cov_agree_with_verl():
    ref = OUT["pg/kl_cov"]
    loss, _ = _vpg("kl_cov", kl_cov_ratio=ref["kl_cov_ratio"], kl_cov_coef=ref["kl_cov_coef"])
    agree(loss, ref["loss"])
    ref = OUT["pg/clip_cov"]
    loss, stats = _vpg("clip_cov", clip_cov_ratio=ref["clip_cov_ratio"], clip_cov_lb=ref["clip_cov_lb"],
                      clip_cov_ub=ref["clip_cov_ub"])
    agree(loss, ref["loss"])
    agree(stats["clip_frac"], ref["clipfrac"])


@pytest.mark.parametrize("clip", [0.2, 10.0])
def test_value_loss_agrees_with_verl(clip):
    ours = A.aggregate(A.value_loss(IN["vpred"], IN["values"], IN["returns"], clip), VMASK, "token-mean")
    agree(ours, OUT[f"value/clip={clip}"]["loss"])


def test_adaptive_kl_controller_agrees_with_verl():
    ref = OUT["kl_controller/adaptive"]
    ctl = ir.KLController("adaptive", target=ref["target"], horizon=ref["horizon"])
    coef, seen = ref["init"], []
    for current, steps in ref["updates"]:
        coef = A.next_kl_coef(coef, current, steps, ctl)
        seen.append(coef)
    agree(seen, ref["values"])


def test_roll_reward_norm_for_other_estimators():
    # ROLL reward_norm: batch mean of [1, 0, 0, 0] is 0.25, batch std (unbiased) 0.5 → [1.5, −0.5, −0.5, −0.5]
    # (+1e-6 in the std); group mean with groups of 2: [0.5, −0.5, 0, 0]; no std: centred only.
    s = torch.tensor([1.0, 0.0, 0.0, 0.0])
    close(A.reward_norm(s, 2, "batch", "batch"), [1.5, -0.5, -0.5, -0.5], tol=1e-5)
    close(A.reward_norm(s, 2, "group", None), [0.5, -0.5, 0.0, 0.0])
    close(A.reward_norm(s, 2, None, None), s)
    # ROLL "reinforce" (reinforce++ without whitening) over batch-normalised scores clipped at 1, one token each.
    adv, _ = A.compute_advantages(s, torch.ones(4, 1), estimator="reinforce++", group_size=2,
                                  options=ir.AdvantageOptions(whiten=False, reward_norm_mean="batch",
                                                              reward_norm_std="batch"), normalized_clip=1.0)
    close(adv.squeeze(1), [1.0, -0.5, -0.5, -0.5], tol=1e-5)


def test_areals_group_mean_and_batch_std_is_the_spread_about_each_groups_mean():
    """AReaL Normalization(mean_level group, std_level batch) by hand: x − group mean, over
    sqrt(Σ (x − group mean)² / (n − 1)) + eps; not torch.std about the batch's mean."""
    s = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0])
    centred = [0.5, -0.5, 0.0, 0.0, 0.0, 0.0]
    spread = (sum(c * c for c in centred) / 5) ** 0.5
    close(A.reward_norm(s, 2, "group", "batch", eps=1e-5, std_of="centred"),
          [c / (spread + 1e-5) for c in centred], tol=1e-6)
    population = (sum(c * c for c in centred) / 6) ** 0.5
    close(A.reward_norm(s, 2, "group", "batch", eps=1e-5, unbiased=False, std_of="centred"),
          [c / (population + 1e-5) for c in centred], tol=1e-6)
    # one response per group, unbiased: AReaL divides by 1 (+ eps)
    close(A.reward_norm(torch.tensor([2.0]), 1, None, "group", eps=0.5, std_of="centred"), [2.0 / 1.5], tol=1e-6)


def test_roll_clamps_the_token_rewards_after_the_kl_penalty():
    # compute_token_reward: token rewards − β·KL, then clamp ±reward_clip. Normalised [0.7071, −0.7071] (within the
    # clip); the second sample's −0.7071 − 0.5 = −1.2071 is clamped to −1.
    adv, _ = A.compute_advantages(torch.tensor([1.0, 0.0]), torch.ones(2, 1), estimator="grpo", group_size=2,
                                  options=ir.AdvantageOptions(), kl_penalty=torch.tensor([[0.0], [0.5]]),
                                  kl_mode="token", normalized_clip=1.0)
    close(adv.squeeze(1), [0.7071, -1.0])


def test_gspo_sequence_form_is_areals():
    # AReaL _compute_sequence_level_ratio_and_advantages: ratio exp(mean log-ratio) = exp(0.1) with gradient,
    # advantage the sequence mean (1 + 3)/2 = 2; loss −2·min(e^0.1, 1.2) = −2·e^0.1 per token. The summed loss
    # is 2·(−2·exp(mean)), whose gradient for each token is 2·(−2·e^0.1·½) = −2·e^0.1 (GSPO-token, with the
    # token advantages 1 and 3, would give −e^0.1 and −3·e^0.1).
    logp = torch.tensor([[0.05, 0.15]], requires_grad=True)
    loss, _ = A.policy_loss(logp, torch.zeros(1, 2), torch.tensor([[1.0, 3.0]]), torch.ones(1, 2),
                            spec("gspo", gspo_form="sequence"))
    r = math.exp(0.1)
    close(loss.detach(), [[-2 * r, -2 * r]], tol=1e-5)
    loss.sum().backward()
    close(logp.grad, [[-2 * r, -2 * r]], tol=1e-5)


def test_gspo_sequence_means_leave_out_what_areal_1_0_rejects():
    # AReaL 1.0 ppo_actor_loss_fn: rejection_sampling (mask, ratio, upper 5) masks the third token (π_prox/π_behave
    # = e^2 > 5) before _compute_sequence_level_ratio_and_advantages, so the sequence ratio is exp(mean of 0.05 and
    # 0.15) and the advantage (1 + 3)/2; the kept tokens are weighted by π_prox/π_behave = 1, the rejected one by 0.
    logp, old = torch.tensor([[0.05, 0.15, 0.9]]), torch.zeros(1, 3)
    behave = torch.tensor([[0.0, 0.0, -2.0]])
    options = dict(gspo_form="sequence", decoupled=True, behav_imp_weight_cap=5.0)
    loss, _ = A.policy_loss(logp, old, torch.tensor([[1.0, 3.0, 8.0]]), torch.ones(1, 3),
                            spec("gspo", cap_before_sequence_means=True, **options), rollout_logprobs=behave)
    r = math.exp(0.1)
    close(loss, [[-2 * r, -2 * r, 0.0]], tol=1e-5)
    # 0.4 and 0.5 (behav_imp_weight_cap) take the means over every token and cap afterwards.
    loss, _ = A.policy_loss(logp, old, torch.tensor([[1.0, 3.0, 8.0]]), torch.ones(1, 3), spec("gspo", **options),
                            rollout_logprobs=behave)
    close(loss, [[-4 * 1.2, -4 * 1.2, 0.0]], tol=1e-5)  # ratio e^(1.1/3) clipped at 1 + 0.2


def test_evaluation_metrics_are_skyrl_trains_pass_at_n_and_means():
    # skyrl-train get_metrics_from_generator_output: a prompt passes when any of its n rewards is positive.
    scores = [1.0, 0.0, -1.0, 0.0, 0.0, -0.5, -1.0, 0.5, 1.0]  # three prompts, three samples each
    got = A.evaluation_metrics(scores, 3)
    assert got["eval/pass_at_3"] == pytest.approx(2 / 3)
    assert got["eval/reward"] == pytest.approx(sum(scores) / 9)
    assert got["eval/mean_positive_reward"] == pytest.approx(2.5 / 9)
    assert got["eval/samples"] == 9
    assert A.evaluation_metrics([1.0, 0.0], 1) == {"eval/reward": 0.5, "eval/samples": 2}


def test_maxrl_is_skyrls_mean_normalised_group_gain():
    """SkyRL compute_maxrl_advantage by hand: (score − group mean) / (group mean + 1e-6); a group of one keeps its
    score; every token of a response gets its advantage."""
    from rlcfg.ir import AdvantageOptions
    from rlcfg.runtime.algorithms import compute_advantages, maxrl_advantages

    scores = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.5, 0.0])
    means = [0.5] * 4 + [0.625] * 4
    expected = [(s - m) / (m + 1e-6) for s, m in zip(scores.tolist(), means)]
    assert maxrl_advantages(scores, 4).tolist() == pytest.approx(expected, rel=1e-6)
    assert maxrl_advantages(torch.tensor([0.3, 2.0]), 1).tolist() == pytest.approx([0.3, 2.0])
    mask = torch.tensor([[1.0, 1.0, 0.0]] * 8)
    adv, returns = compute_advantages(scores, mask, estimator="maxrl", group_size=4, options=AdvantageOptions())
    assert returns is None
    assert adv[:, 0].tolist() == pytest.approx(expected, rel=1e-6) and adv[:, 2].abs().sum() == 0


# ---- AReaL's adv_norm on the token advantages (ir.TokenNorm) ----------------------------------------------------

ADV = [[1.0, 1.0, 1.0], [3.0, 3.0, 0.0], [-2.0, 0.0, 0.0], [4.0, 4.0, 4.0]]
ADV_MASK = [[1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0]]


def test_group_adv_norm_weighs_each_group_by_its_tokens():
    x, mask = torch.tensor(ADV), torch.tensor(ADV_MASK)
    out = A.token_normalize(x, mask, 2, ir.TokenNorm(mean="group", std="group"))
    # group 1: tokens 1,1,1,3,3 — mean 1.8, unbiased std √(4·0.64 + 2·1.44)/4 = √1.36; group 2: -2,4,4,4.
    std1 = math.sqrt((3 * 0.64 + 2 * 1.44) / 4)
    close(out[0].tolist(), [(1 - 1.8) / (std1 + 1e-5)] * 3)
    close(out[1].tolist(), [(3 - 1.8) / (std1 + 1e-5)] * 2 + [0.0])
    std2 = math.sqrt((4.5 ** 2 + 3 * 1.5 ** 2) / 3)
    close(out[2].tolist(), [(-2 - 2.5) / (std2 + 1e-5), 0.0, 0.0])
    close(out[3].tolist(), [(4 - 2.5) / (std2 + 1e-5)] * 3)


def test_adv_norm_group_mean_with_batch_std_and_no_std():
    x, mask = torch.tensor(ADV), torch.tensor(ADV_MASK)
    centred = A.token_normalize(x, mask, 2, ir.TokenNorm(mean="group", std=None))
    close(centred[0].tolist(), [-0.8] * 3)  # no std: no eps either
    out = A.token_normalize(x, mask, 2, ir.TokenNorm(mean="group", std="batch", unbiased=False))
    spread = math.sqrt(float((centred ** 2).sum()) / 9)  # about each group's mean, over the batch's 9 tokens
    close(out[3].tolist(), [1.5 / (spread + 1e-5)] * 3)


def test_adv_norm_leave_one_out_mean_is_the_other_tokens():
    x, mask = torch.tensor([[1.0, 2.0], [6.0, 0.0]]), torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    out = A.token_normalize(x, mask, 2, ir.TokenNorm(mean="group", std=None, leave_one_out=True))
    close(out.tolist(), [[1 - 4.0, 2 - 3.5], [6 - 1.5, 0.0]])


def test_adv_norm_batch_form_and_a_batch_without_tokens():
    x, mask = torch.tensor(ADV), torch.tensor(ADV_MASK)
    out = A.token_normalize(x, mask, 2, ir.TokenNorm())
    values = [1.0, 1, 1, 3, 3, -2, 4, 4, 4]
    mean = sum(values) / 9
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / 8)
    close(out[1].tolist(), [(3 - mean) / (std + 1e-5)] * 2 + [0.0])
    assert torch.equal(A.token_normalize(x, torch.zeros_like(mask), 2, ir.TokenNorm()), x)


def test_compute_advantages_ends_with_the_token_norm():
    scores, mask = torch.tensor([1.0, 0.0, 1.0, 1.0]), torch.tensor(ADV_MASK)
    norm = ir.TokenNorm(mean="group", std="group")
    adv, _ = A.compute_advantages(scores, mask, estimator="reinforce++", group_size=2,
                                  options=ir.AdvantageOptions(whiten=False, token_norm=norm))
    returns = A.token_level_scores(scores, mask).flip(1).cumsum(1).flip(1) * mask
    close(adv.flatten().tolist(), A.token_normalize(returns, mask, 2, norm).flatten().tolist())


def _areal_normalization():
    """AReaL's own Normalization (areal/utils/data.py at v0.4.1), skipped without MIRROR_ROOT."""
    import os
    import subprocess
    import types

    import numpy as np

    root = os.environ.get("MIRROR_ROOT")
    if not root:
        pytest.skip("MIRROR_ROOT is not set")
    text = subprocess.run(["git", "-C", os.path.join(root, "inclusionAI+AReaL", "repo"), "show",
                           "v0.4.1:areal/utils/data.py"], capture_output=True, text=True, check=True).stdout
    source = text[text.index("class Normalization"):text.index("class KLEstimator")]
    namespace = {"torch": torch, "np": np, "dist": torch.distributed, "NormConfig": object}
    exec(compile(source, "areal/utils/data.py", "exec"), namespace)  # the framework's own class, as the oracle

    def theirs(x, mask, group_size, norm):
        config = types.SimpleNamespace(mean_level=norm.mean, std_level=norm.std, mean_leave1out=norm.leave_one_out,
                                       std_unbiased=norm.unbiased, eps=norm.eps, group_size=group_size)
        return namespace["Normalization"](config)(x, mask)
    return theirs


@pytest.mark.parametrize("mean", ["batch", "group", None])
@pytest.mark.parametrize("std", ["batch", "group", None])
@pytest.mark.parametrize("leave_one_out,unbiased", [(False, True), (True, False), (True, True)])
def test_token_norm_agrees_with_areals_normalization(mean, std, leave_one_out, unbiased):
    theirs = _areal_normalization()
    generator = torch.Generator().manual_seed(0)
    for group_size in (1, 4):
        x = torch.randn(8, 6, generator=generator)
        lengths = torch.randint(1, 7, (8,), generator=generator)
        mask = (torch.arange(6).unsqueeze(0) < lengths.unsqueeze(1)).float()
        norm = ir.TokenNorm(mean=mean, std=std, leave_one_out=leave_one_out, unbiased=unbiased, eps=1e-5)
        expected = theirs(x, mask, group_size, norm)
        assert torch.allclose(A.token_normalize(x, mask, group_size, norm), expected, atol=1e-6), (group_size, norm)
