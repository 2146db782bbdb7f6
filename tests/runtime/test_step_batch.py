"""The driver's per-step batch and the rollout side's scoring: the layout the trainers rely on, and the same
texts and rewards however often a response repeats."""


import torch

from rlcfg.runtime.step import make_batch
from rlcfg.runtime.workers import RewardScorer


class CountingTokenizer:
    """Decodes token t to the character chr(ord('a') + t); counts the sequences it was asked to decode."""

    def __init__(self):
        self.decoded = 0

    def batch_decode(self, seqs, skip_special_tokens=True):
        self.decoded += len(seqs)
        return ["".join(chr(ord("a") + t) for t in s) for s in seqs]


def test_scoring_gives_each_response_its_own_text_and_reward_even_when_responses_repeat():
    tok = CountingTokenizer()
    scorer = RewardScorer("exact_match", tok)
    responses = [[0], [1], [0], [0, 1], [1], []]
    answers = ["a", "a", "b", "ab", "b", "a"]
    scores, texts = scorer.score(responses, answers)
    assert texts == ["a", "b", "a", "ab", "b", ""]
    assert scores == [1.0, 0.0, 0.0, 1.0, 1.0, 0.0]
    again_scores, again_texts = scorer.score(list(reversed(responses)), list(reversed(answers)))
    assert again_texts == list(reversed(texts)) and again_scores == list(reversed(scores))
    assert tok.decoded == 4  # each distinct response decoded once, across calls


def test_batch_left_pads_prompts_and_right_pads_responses():
    groups = [
        {"prompt": (5, 6), "responses": [([7, 8, 9], None, True), ([7], None, False)], "scores": [1.0, 0.0]},
        {"prompt": (4, 5, 6), "responses": [([], None, False), ([3, 2], None, True)], "scores": [0.5, 0.25, 9.0]},
    ]
    batch, scores, finished = make_batch(groups, pad=0)
    assert batch["input_ids"].tolist() == [[0, 5, 6, 7, 8, 9], [0, 5, 6, 7, 0, 0], [4, 5, 6, 0, 0, 0],
                                           [4, 5, 6, 3, 2, 0]]
    assert batch["attention_mask"].tolist() == [[0, 1, 1, 1, 1, 1], [0, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0],
                                                [1, 1, 1, 1, 1, 0]]
    assert batch["response_mask"].tolist() == [[1, 1, 1], [1, 0, 0], [0, 0, 0], [1, 1, 0]]
    assert batch["input_ids"].dtype == torch.long and batch["attention_mask"].dtype == torch.long
    assert batch["response_mask"].dtype == torch.float32
    assert scores.tolist() == [1.0, 0.0, 0.5, 0.25]  # a score without a response is left out
    assert finished.tolist() == [True, False, False, True]


def test_each_distinct_response_and_answer_pair_is_verified_once():
    """Verifiers like math-verify cost most of a millisecond per call; a group repeats its answers a lot."""
    scorer = RewardScorer("exact_match", CountingTokenizer())
    calls = []

    def verifier(text, answer):
        calls.append((text, answer))
        return float(text == answer)

    scorer.fn = verifier
    first, _ = scorer.score([[0], [0], [1], [0]], ["a", "a", "a", "b"])
    second, _ = scorer.score([[0], [1]], ["a", "b"])
    assert first == [1.0, 1.0, 0.0, 0.0] and second == [1.0, 1.0]
    assert calls == [("a", "a"), ("b", "a"), ("a", "b"), ("b", "b")]


def test_a_reward_that_scores_in_batches_gets_each_new_pair_once_in_one_call():
    """SkyRL's lcb programs are graded in parallel sandboxes: the scorer hands over every new pair at once, and
    an answer with several references scores the best of them."""
    scorer = RewardScorer("exact_match", CountingTokenizer())
    batches = []

    def grade(pairs):
        batches.append(pairs)
        return [float(text == answer) for text, answer in pairs]

    scorer.batch = grade
    first, _ = scorer.score([[0], [0], [1], [0]], ["a", "a", ["x", "b"], "b"])
    second, _ = scorer.score([[0], [1]], ["a", "a"])
    assert first == [1.0, 1.0, 1.0, 0.0] and second == [1.0, 0.0]
    assert batches == [[("a", "a"), ("b", "x"), ("b", "b"), ("a", "b")], [("b", "a")]]


def _settings(alg, **kw):
    from rlcfg.runtime.step import StepSettings

    base = dict(algorithm=alg, max_new_tokens=4, pad_token_id=0, needs_reference=False, on_policy=True,
                samples_per_rank=None, micro_batch_size=None, has_critic=False, forward_micro_batch={})
    base.update(kw)
    return StepSettings(**base)


def _groups():
    return [{"prompt": (5, 6), "responses": [([7, 8], [-0.1, -0.2], True), ([7], [-0.3], True)],
             "scores": [1.0, 0.0]},
            {"prompt": (5,), "responses": [([9, 9, 9, 9], [-0.5] * 4, False), ([3], [-0.7], True)],
             "scores": [1.0, 1.0]}]


def test_prepare_update_hands_the_trainers_the_typed_loss_settings():
    from rlcfg import ir
    from rlcfg.runtime.step import prepare_update

    alg = ir.Algorithm(group_size=2, clip_high=0.28, entropy_coef=0.01)
    update = prepare_update(_groups(), _settings(alg), 1, lambda role, batch: None, {})
    assert update.cfg["loss"] == alg.actor_loss_spec()
    assert "clip_low" not in update.cfg  # no second copy of the loss settings
    # GRPO over [1, 0] and [1, 1]: ±0.7071 on each token of the first group, 0 for the flat one.
    adv = update.batch["advantages"]
    assert abs(float(adv[0, 0]) - 0.7071) < 1e-3 and abs(float(adv[1, 0]) + 0.7071) < 1e-3
    assert float(adv[2:].abs().sum()) == 0.0


def test_a_step_dealt_by_length_keeps_each_samples_advantage_with_it():
    from rlcfg import ir
    from rlcfg.runtime.step import prepare_update

    # ChatLearn's rollout manager: the advantages come from the groups as drawn; then the rows are dealt longest
    # first (prompt + response: 4, 3, 5, 2 tokens), each row's tensors together.
    alg = ir.Algorithm(group_size=2, balance_ranks_by_length=True)
    update = prepare_update(_groups(), _settings(alg), 2, lambda role, batch: None, {})
    batch = update.batch
    assert batch["attention_mask"].sum(dim=1).tolist() == [5, 2, 4, 3]
    assert batch["input_ids"][0, 1:].tolist() == [5, 9, 9, 9, 9]
    assert [round(float(a), 4) for a in batch["advantages"][:, 0]] == [0.0, 0.0, 0.7071, -0.7071]
    assert batch["response_mask"].sum(dim=1).tolist() == [4, 1, 2, 1]


def test_prepare_update_honours_reward_order_masks_kl_controller_and_rollout_logprobs():
    from rlcfg import ir
    from rlcfg.runtime.step import prepare_update

    # AReaL: mask_no_eos_with_zero zeroes the truncated response's score (row 2), which stays in the loss.
    alg = ir.Algorithm(group_size=2, reward=ir.RewardShaping(zero_truncated=True),
                       weighting=ir.SampleWeighting(max_len_mask=True),
                       policy_options=ir.PolicyOptions(tis_cap=2.0),
                       kl=ir.KL("reward", 0.1, "k1", ir.KLController("adaptive", target=0.05, horizon=100)))
    ref = {"reference": lambda b: torch.zeros(b["response_mask"].shape),
           "actor": lambda b: torch.full(b["response_mask"].shape, 0.2) * b["response_mask"]}
    update = prepare_update(_groups(), _settings(alg, needs_reference=True), 1, lambda role, b: ref[role](b), {})
    assert update.shaped_scores.tolist() == [1.0, 0.0, 0.0, 1.0]
    # ROLL max_len_mask: the 4-token response (the limit) leaves the loss.
    assert update.batch["response_mask"][2].sum() == 0 and update.batch["response_mask"][3].sum() == 1
    # The rollout engine's log-probs ride along for truncated importance sampling (0 on padding).
    assert torch.allclose(update.batch["rollout_logprobs"][0], torch.tensor([-0.1, -0.2, 0.0, 0.0]))
    # KL k1 = 0.2 per token; mean 0.2 > target: coef·(1 + 0.2·4/100).
    assert abs(update.next_kl_coef - 0.1 * (1 + 0.2 * 4 / 100)) < 1e-9
    assert update.metrics["kl_coef"] == 0.1


def test_roll_whitening_takes_its_statistics_over_the_samples_the_sample_masks_keep():
    """ROLL computes the advantages under final_response_mask (functionals.compute_advantage): a sample that
    max_len_mask drops neither trains nor moves the mean and variance that whiten_advantages divides by."""
    from rlcfg import ir
    from rlcfg.runtime.step import prepare_update

    def advantages(**weighting):
        alg = ir.Algorithm(group_size=2, batch_normalize_advantage=True, weighting=ir.SampleWeighting(**weighting))
        return prepare_update(_groups(), _settings(alg), 1, lambda role, b: None, {}).batch["advantages"]

    # GRPO per token before whitening: ±a on the first group's 2 + 1 tokens, 0 on the second group's 4 + 1.
    a = 1 / (2 ** 0.5 + 1e-6 * 2 ** 0.5)
    kept = torch.tensor([a, a, -a, 0.0])  # the 4-token response is at the limit (4): max_len_mask drops it
    n = kept.numel()
    expected = (kept - kept.mean()) / torch.sqrt(kept.var(unbiased=False) * n / (n - 1) + 1e-8)
    masked = advantages(max_len_mask=True)
    assert torch.allclose(torch.cat([masked[0, :2], masked[1, :1], masked[3, :1]]), expected, atol=1e-5)
    assert masked[2].abs().sum() == 0
    # Over every sample the four zeros of the dropped response would pull the mean and the spread down.
    unmasked = advantages()
    assert not torch.allclose(unmasked[0, :2], masked[0, :2], atol=1e-3)


def test_old_log_probs_from_the_rollout_are_the_engines_and_no_recompute_pass_runs():
    """Algorithm.old_logprobs "rollout" (RLinf recompute_logprobs: false): the ratio's old log-probs are the engine's,
    even for an update that is not on-policy, and the actor is never asked for them."""
    from rlcfg import ir
    from rlcfg.runtime.step import prepare_update

    asked = []

    def compute(role, batch):
        asked.append(role)
        return torch.zeros(batch["response_mask"].shape)

    alg = ir.Algorithm(group_size=2, ppo_epochs=2, old_logprobs="rollout")
    update = prepare_update(_groups(), _settings(alg, on_policy=False), 1, compute, {})
    assert asked == []
    assert torch.allclose(update.batch["old_logprobs"][0], torch.tensor([-0.1, -0.2, 0.0, 0.0]))
    assert torch.allclose(update.batch["old_logprobs"][2], torch.tensor([-0.5] * 4))
    # The trainer's source recomputes them for the same update.
    prepare_update(_groups(), _settings(ir.Algorithm(group_size=2, ppo_epochs=2), on_policy=False), 1, compute, {})
    assert asked == ["actor"]


def test_the_critic_steps_over_its_own_mini_batches():
    """SkyRL's critic_mini_batch_size: the critic takes samples_per_step / its mini-batch optimizer steps per epoch,
    each normalised over its own mini-batch; without one it takes a single step over the whole share."""
    from rlcfg import ir
    from rlcfg.runtime.step import critic_cfg, prepare_update

    alg = ir.Algorithm(group_size=2)
    update = prepare_update(_groups(), _settings(alg), 1, lambda role, b: None, {})
    whole = critic_cfg(update, 1, alg)
    assert whole["mini_batch"] == 4 and len(whole["denominators"]) == 1
    split = critic_cfg(update, 1, alg, samples_per_optimizer_step=2)
    # rows 0-1 hold 2 + 1 tokens, rows 2-3 hold 4 + 1
    assert split["mini_batch"] == 2 and split["denominators"] == [(3.0, 2.0), (5.0, 2.0)]
    assert critic_cfg(update, 2, alg, samples_per_optimizer_step=2)["mini_batch"] == 1  # per rank


def test_a_kl_penalty_of_the_behaviour_policy_reads_the_engines_log_probs():
    """AReaL with the decoupled loss measures the KL penalty from the inference engine's log-probabilities (the
    behaviour policy): with rollouts generated ahead, those of older weights than the trainer's."""
    import math

    from rlcfg.ir import KL, Algorithm, PolicyOptions
    from rlcfg.runtime.step import StepSettings, prepare_update

    n = 2
    groups = [{"prompt": (5,), "responses": [([7, 8], [-1.0, -1.0], True)] * n, "scores": [0.0, 1.0]}]
    logps = {"reference": lambda b: torch.zeros(b["response_mask"].shape),
             "actor": lambda b: torch.full(b["response_mask"].shape, -0.5)}

    def kl_of(policy):
        alg = Algorithm(advantage="grpo", group_size=n, policy_options=PolicyOptions(decoupled=True),
                        kl=KL(placement="reward", coef=0.1, estimator="k1", reward_mode="token",
                              policy_logprobs=policy))
        settings = StepSettings(algorithm=alg, max_new_tokens=4, pad_token_id=0, needs_reference=True,
                                on_policy=False, samples_per_rank=None, micro_batch_size=None, has_critic=False,
                                forward_micro_batch={})
        return prepare_update(groups, settings, 1, lambda role, b: logps[role](b), {}).metrics["kl"]

    assert math.isclose(kl_of("rollout"), -1.0, rel_tol=1e-6)  # k1: log π_behave − log π_ref
    assert math.isclose(kl_of("old"), -0.5, rel_tol=1e-6)  # the trainer's recomputed log-probs


def test_interpolated_proximal_policies_skip_the_recompute_pass_and_carry_the_steps_weight():
    from rlcfg import ir
    from rlcfg.runtime.step import ACTOR_KEYS, prepare_update

    # AReaL prox_logp_method loglinear: no forward pass of the actor, the engine's log-probs as π_behave, and the
    # step's α for rollouts 2 updates stale.
    alg = ir.Algorithm(group_size=2, old_logprobs="interpolated", policy_options=ir.PolicyOptions(decoupled=True))

    def no_recompute(role, batch):
        raise AssertionError(f"the {role} recomputed its log-probs")

    update = prepare_update(_groups(), _settings(alg, on_policy=False), 1, no_recompute, {}, staleness=2)
    batch = update.batch
    assert torch.equal(batch["old_logprobs"], batch["rollout_logprobs"])
    assert torch.allclose(batch["rollout_logprobs"][0], torch.tensor([-0.1, -0.2, 0.0, 0.0]))
    assert batch["proximal_weight"].tolist() == [0.5] * 4 and "proximal_weight" in ACTOR_KEYS
    fresh = prepare_update(_groups(), _settings(alg, on_policy=False), 1, no_recompute, {}).batch
    assert fresh["proximal_weight"].tolist() == [0.0] * 4


def test_an_answer_that_lists_solutions_scores_the_best_match():
    # AReaL's boba reward: 1 when the response matches one of its solutions
    scorer = RewardScorer("exact_match", CountingTokenizer())
    assert scorer.score_texts(["b", "b", "c"], [("a", "b"), ["a", "b"], ("a", "b")]) == [1.0, 1.0, 0.0]


def test_a_reward_of_the_kl_alone_takes_the_teachers_log_probs_as_each_tokens_advantage():
    """SkyRL's on-policy distillation: every token's reward, and its advantage, is log π_ref − log π_old (the
    reference model is the teacher); the environment's scores stay in the metrics and out of the advantages."""
    from dataclasses import replace

    from rlcfg.ir import KL, Algorithm
    from rlcfg.runtime.step import StepSettings, prepare_update

    groups = [{"prompt": (5,), "responses": [([7, 8, 9], [-1.0, -1.0, -1.0], True), ([7], [-1.0], True)],
               "scores": [1.0, 0.0]}]
    actor = torch.tensor([[-0.5, -1.0, -2.0], [-0.25, 0.0, 0.0]])
    teacher = torch.tensor([[-0.25, -3.0, -1.0], [-1.0, 0.0, 0.0]])
    logps = {"reference": lambda b: teacher.clone(), "actor": lambda b: actor.clone()}
    alg = Algorithm(advantage="token_reward", group_size=2, policy_loss="importance_sampling",
                    kl=KL(placement="reward", coef=1.0, estimator="k1", penalty_only=True))
    settings = StepSettings(algorithm=alg, max_new_tokens=3, pad_token_id=0, needs_reference=True, on_policy=True,
                            samples_per_rank=None, micro_batch_size=None, has_critic=False, forward_micro_batch={})
    update = prepare_update(groups, settings, 1, lambda role, b: logps[role](b), {})
    mask = update.batch["response_mask"]
    assert torch.allclose(update.batch["advantages"], (teacher - actor) * mask)
    assert update.raw_scores.tolist() == [1.0, 0.0]
    # with the scores kept, the last token also carries the response's score
    kept_scores = replace(settings, algorithm=replace(alg, kl=replace(alg.kl, penalty_only=False)))
    kept = prepare_update(groups, kept_scores, 1, lambda role, b: logps[role](b), {}).batch["advantages"]
    assert torch.allclose(kept - update.batch["advantages"], torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]))



def test_an_episodes_environment_tokens_are_in_the_sequence_without_loss_and_count_in_its_length():
    from rlcfg import ir
    from rlcfg.runtime.step import prepare_update

    # responses as the rollout side returns multi-turn episodes: tokens, log-probs, finished, loss mask
    groups = [{"index": 0, "prompt": (5, 6), "texts": ["", ""], "scores": [1.0, 0.0],
               "responses": [([7, 8, 1, 1, 9], [-1.0, -1.0, 0.0, 0.0, -1.0], True, [1, 1, 0, 0, 1],
                              (2, "environment")),
                             ([7], [-3.0], True, [1], (1, "turn limit"))]}]
    batch, _scores, _finished = make_batch(groups, pad=0)
    assert batch["attention_mask"][0].tolist() == [1, 1, 1, 1, 1, 1, 1]
    assert batch["response_mask"].tolist() == [[1, 1, 0, 0, 1], [1, 0, 0, 0, 0]]
    update = prepare_update(groups, _settings(ir.Algorithm(group_size=2)), 1, lambda role, batch: None, {})
    assert update.lengths.tolist() == [5.0, 1.0]
    assert float(update.batch["advantages"][0, 2:4].abs().sum()) == 0.0
    # what the run reports of its episodes; the entropy estimate reads the model's tokens only
    metrics = update.metrics
    assert metrics["episode/turns_mean"] == 1.5 and metrics["episode/ended_by_environment"] == 0.5
    assert metrics["episode/ended_by_turn_limit"] == 0.5 and metrics["episode/ended_by_input_limit"] == 0.0
    assert metrics["rollout/entropy"] == 1.5
