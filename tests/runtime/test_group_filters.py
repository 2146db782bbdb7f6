"""The driver's group filters and dynamic sampling (Run._collect over algorithms.keep_groups / select_groups),
with stub rollouts: which groups a step trains on, how many draws it takes, and SkyRL's stop at the draw limit.
The KL coefficient carried from one step to the next is checked on a real run in test_loop.py."""

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from rlcfg import ir  # noqa: E402
from rlcfg.runtime import step as S  # noqa: E402
from rlcfg.runtime.driver import Run  # noqa: E402


class _Sampler:
    epoch = 0

    def __init__(self, size):
        self.next_index, self.size = 0, size

    def next(self):
        idx = list(range(self.next_index, self.next_index + self.size))
        self.next_index += self.size
        return idx


def _run(filters: ir.FilterSpec, draws: list[list[list[float]]], prompts_per_step: int = 2) -> Run:
    """A Run whose rollouts return `draws[k]` (one score list per group) at its k-th draw."""
    run = Run.__new__(Run)
    alg = ir.Algorithm(group_size=2, filters=filters)
    run.alg = alg
    run.filters = alg.filter_spec()
    run.exp = type("E", (), {"seed": 0, "schedule": type("Sch", (), {"prompts_per_step": prompts_per_step})()})()
    run.sampler = _Sampler(prompts_per_step)
    queue = list(draws)

    def draw(step, k):
        idx = run.sampler.next()
        return {"idx": idx, "prompts": [(1,)] * len(idx), "calls": queue.pop(0), "t0": 0.0}

    def finish(scores):
        gens = [([3, 4], None, True)] * (2 * len(scores))
        flat = [s for g in scores for s in g]
        return gens, flat, ["t"] * len(flat), {"generate": 0.0}

    run._draw, run._finish = draw, finish
    return run


def test_no_filter_trains_every_group():
    groups, info = _run(ir.FilterSpec(), [[[1, 1], [0, 1]]])._collect(1, {})
    assert [g["index"] for g in groups] == [0, 1] and info["data/draws"] == 1 and info["data/groups_kept"] == 2


def test_skyrl_zero_variance_filter_masks_the_flat_groups_loss_and_keeps_them_in_the_batch():
    spec = ir.FilterSpec(zero_variance=True, dynamic=None, failed="mask")
    groups, info = _run(spec, [[[1, 1], [0, 1]]])._collect(1, {})
    assert [g.get("loss_masked", False) for g in groups] == [True, False]
    assert info["data/groups_passed"] == 1 and info["data/groups_kept"] == 1 and info["data/groups_seen"] == 2
    # prepare_update zeroes the masked group's loss mask, not the other's
    settings = S.StepSettings(algorithm=ir.Algorithm(group_size=2), max_new_tokens=4, pad_token_id=0,
                              needs_reference=False, on_policy=True, samples_per_rank=None, micro_batch_size=None,
                              has_critic=False, forward_micro_batch={})
    update = S.prepare_update(groups, settings, 1, lambda role, batch: None, {})
    assert update.batch["response_mask"].sum(dim=1).tolist() == [0.0, 0.0, 2.0, 2.0]


def test_dapo_filter_draws_until_enough_groups_differ():
    spec = ir.FilterSpec(zero_variance=True, dynamic="filter", max_draws=5)
    groups, info = _run(spec, [[[1, 1], [0, 1]], [[0, 0], [1, 1]], [[1, 0], [1, 1]]])._collect(1, {})
    assert [g["index"] for g in groups] == [1, 4]
    assert info["data/draws"] == 3 and info["data/groups_seen"] == 6 and info["data/groups_kept"] == 2


def test_the_draw_limit_trains_on_what_passed_or_stops_as_skyrl_does():
    draws = [[[1, 1], [0, 1]], [[0, 0], [1, 1]]]
    spec = ir.FilterSpec(zero_variance=True, dynamic="filter", max_draws=2)
    groups, info = _run(spec, draws)._collect(1, {})
    assert [g["index"] for g in groups] == [1] and info["data/draws"] == 2
    with pytest.raises(S.DynamicSamplingExhausted, match="max_sample_batches 2"):
        _run(dataclasses.replace(spec, on_exhausted="error"), draws)._collect(1, {})


def test_replace_trains_on_exactly_the_groups_asked_for():
    spec = ir.FilterSpec(zero_variance=True, dynamic="replace", max_draws=3, min_replace_ratio=0.3)
    groups, info = _run(spec, [[[1, 1], [1, 1], [0, 1], [1, 0]]], prompts_per_step=4)._collect(1, {})
    assert len(groups) == 4 and info["data/draws"] == 1
    assert all(max(g["scores"]) != min(g["scores"]) for g in groups)
    # not enough good groups (1 of 4 ≤ 0.3): draw again
    groups, info = _run(spec, [[[1, 1], [1, 1], [1, 1], [1, 0]], [[0, 1], [1, 0], [0, 1], [1, 1]]],
                        prompts_per_step=4)._collect(1, {})
    assert info["data/draws"] == 2 and len(groups) == 4


def test_filters_see_the_scores_the_trainer_gets():
    """SkyRL's generator zeroes the reward of a response that did not stop (zero_reward_on_non_stop) before the
    trainer filters: [1 (cut), 0] is then a flat group. Response lengths play no part (np.std of the rewards)."""
    spec = ir.FilterSpec(zero_variance=True)
    groups = [{"prompt": (1,), "responses": [([3], None, False), ([4], None, True)], "scores": [1.0, 0.0]},
              {"prompt": (1,), "responses": [([], None, True), ([4], None, True)], "scores": [1.0, 0.0]}]
    zeroed = ir.Algorithm(group_size=2, reward=ir.RewardShaping(zero_truncated=True))
    assert S.group_passes(groups, spec, 2, zeroed) == [False, True]
    assert S.group_passes(groups, spec, 2, ir.Algorithm(group_size=2)) == [True, True]


def test_the_kl_controller_reads_the_kl_under_the_loss_mask():
    """SkyRL apply_reward_kl_penalty: the KL of a loss-masked (filtered) group counts as 0 in the mean the
    adaptive controller reads."""
    alg = ir.Algorithm(group_size=2, kl=ir.KL("reward", 0.1, "k1", ir.KLController("adaptive", target=0.3,
                                                                                   horizon=10)))
    settings = S.StepSettings(algorithm=alg, max_new_tokens=4, pad_token_id=0, needs_reference=True, on_policy=True,
                              samples_per_rank=None, micro_batch_size=None, has_critic=False, forward_micro_batch={})
    groups = [{"prompt": (1,), "responses": [([3], None, True)] * 2, "scores": [1.0, 1.0], "loss_masked": True},
              {"prompt": (1,), "responses": [([3], None, True)] * 2, "scores": [1.0, 0.0]}]
    logps = {"reference": lambda b: torch.zeros(b["response_mask"].shape),
             "actor": lambda b: torch.full(b["response_mask"].shape, 0.5)}
    update = S.prepare_update(groups, settings, 1, lambda role, b: logps[role](b), {})
    # mean KL 0.25 (two sequences at 0.5, two at 0) against 0.3: error −1/6, times 4 samples / 10
    assert update.next_kl_coef == pytest.approx(0.1 * (1 - (1 / 6) * 4 / 10))
    assert update.batch["response_mask"].sum(dim=1).tolist() == [0.0, 0.0, 1.0, 1.0]
