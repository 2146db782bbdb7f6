"""Per-prompt response budgets (ir.Sampling.max_total_length: ChatLearn 1.2.0's seq_length) in the rollout backends,
the learning-rate schedule of a decay with its own length (ir.Optimizer.decay_steps: ChatLearn's Megatron trainer)
in both trainers, and rollout engines left without prompts."""

from __future__ import annotations

import dataclasses

import pytest

from rlcfg.ir import Sampling
from rlcfg.runtime.backends import hf as H
from rlcfg.runtime.backends import sglang as S
from rlcfg.runtime.backends import vllm as V
from tests.helpers import TEMPLATES

torch = pytest.importorskip("torch")


# ---- engines' sampling parameters ---------------------------------------------------------------------------------

LIMITED = Sampling(max_new_tokens=100, max_total_length=120, min_new_tokens=30)


@pytest.mark.parametrize("prompt_tokens, budget", [(5, 100), (20, 100), (50, 70), (110, 10)])
def test_engines_give_each_prompt_its_own_budget(prompt_tokens, budget):
    v = V.sampling_params(LIMITED, 0, prompt_tokens)
    s = S.sampling_params(LIMITED, 0, prompt_tokens)
    assert v["max_tokens"] == s["max_new_tokens"] == budget
    # the engines require the minimum length within the maximum: a budget below it is all the response gets
    assert v["min_tokens"] == s["min_new_tokens"] == min(30, budget)


def test_without_a_total_limit_every_prompt_gets_max_new_tokens():
    free = Sampling(max_new_tokens=100, max_total_length=None)
    assert V.sampling_params(free, 0, 5000)["max_tokens"] == S.sampling_params(free, 0, 5000)["max_new_tokens"] == 100


# ---- transformers generate ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    pytest.importorskip("transformers")
    from tests.runtime.test_vllm import tiny_model

    return H.HFRolloutEngine(tiny_model(str(tmp_path_factory.mktemp("tiny")), 0))


SHORT, LONG = [4, 12, 5, 13], [4, 12, 5, 13, 6, 14, 7, 15, 8]


def test_hf_cuts_each_response_at_its_prompts_budget(engine):
    sampling = Sampling(max_new_tokens=12, max_total_length=14, temperature=0.0)
    short, long = engine.generate([SHORT, LONG], sampling, seed=0)
    # generated together to the longest budget, each cut at its own: the same tokens as generated alone
    alone_short = engine.generate([SHORT], Sampling(max_new_tokens=10, temperature=0.0), seed=0)[0]
    alone_long = engine.generate([LONG], Sampling(max_new_tokens=5, temperature=0.0), seed=0)[0]
    assert len(alone_short.token_ids) == 10 and len(alone_long.token_ids) == 5, "the tiny model should not stop"
    assert (short.token_ids, long.token_ids) == (alone_short.token_ids, alone_long.token_ids)
    assert torch.allclose(torch.tensor(long.logprobs), torch.tensor(alone_long.logprobs), atol=1e-5)
    # cut at the budget: truncated (finish reason "length"), as at max_new_tokens
    assert not short.finished and not long.finished


def test_a_response_that_ends_within_its_budget_is_finished(engine):
    base = engine.generate([LONG], Sampling(max_new_tokens=5, temperature=0.0), seed=0)[0]
    stop = base.token_ids[2]
    first = base.token_ids.index(stop)
    sampling = Sampling(max_new_tokens=12, max_total_length=len(LONG) + first + 1, temperature=0.0,
                        stop_token_ids=(stop,))
    ended = engine.generate([LONG], sampling, seed=0)[0]
    assert ended.finished and ended.token_ids == base.token_ids[:first + 1]
    cut = engine.generate([LONG], dataclasses.replace(sampling, max_total_length=len(LONG) + first), seed=0)[0]
    assert not cut.finished and cut.token_ids == base.token_ids[:first]


def test_an_engine_without_prompts_returns_nothing(engine):
    assert engine.generate([], Sampling(max_new_tokens=4, n=2), seed=0) == []


def test_a_worker_without_prompts_does_not_call_its_engine():
    from rlcfg.runtime import workers as W

    class Untouchable:
        last_generate_s = 9.0

        def generate(self, *args):
            raise AssertionError("generate called without prompts")

        def update_weights(self, weights):
            self.loaded = weights
            return len(weights)

    worker = W._Generating()
    worker.rollout = Untouchable()
    worker.scorer = W.RewardScorer("math", None)
    out, info = worker.generate([], Sampling(max_new_tokens=4, n=2), 0, {"w": 1}, [])
    assert out == [] and info["scores"] == [] and info["generate_s"] == 0.0
    assert worker.rollout.loaded == {"w": 1}  # the weights of the last update still arrive


# ---- learning-rate schedules ---------------------------------------------------------------------------------

LR, MIN_LR = 2e-6, 1e-7


def _chatlearn_megatron_actor():
    from rlcfg.frontend import check_file
    from rlcfg.dialects.chatlearn.lower import lower

    result = check_file(str(TEMPLATES / "chatlearn-megatron-vllm.yaml"),
                        [f"models.policy_trainer.optimizer.lr={LR}", f"models.policy_trainer.optimizer.min_lr={MIN_LR}"],
                        env={"HOME": "/home/user"})
    return lower(result.config).role("actor")


def test_fsdp_schedule_decays_over_its_own_length():
    opt = _chatlearn_megatron_actor().optimizer
    from rlcfg.runtime.backends.fsdp import lr_factor
    from tests.runtime.test_lr_schedule import fsdp_lrs

    assert fsdp_lrs(opt, 10, 4) == pytest.approx([LR, MIN_LR, MIN_LR, MIN_LR], rel=1e-9)
    # without decay_steps the decay spans the run: 10 steps from lr to min_lr
    spanning = lr_factor(dataclasses.replace(opt, decay_steps=None), 10)
    assert spanning(1) == pytest.approx(1 - 0.1 * (1 - MIN_LR / LR))


def test_megatron_schedule_uses_lr_once_then_min_lr():
    pytest.importorskip("megatron.core")
    from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler

    from rlcfg.runtime import algorithms as A
    from rlcfg.runtime.backends import megatron as M
    from tests.runtime.test_megatron import spec_of, tiny_hf

    actor = _chatlearn_megatron_actor()
    actor = dataclasses.replace(actor, parallelism=dataclasses.replace(actor.parallelism, tp=1, pp=1))
    settings = M.lower_role(actor, spec_of(tiny_hf("qwen2")), 1, total_optimizer_steps=10)
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=0.0)
    scheduler = OptimizerParamScheduler(optimizer, **settings.scheduler)
    seen = []
    for _ in range(4):
        seen.append(optimizer.param_groups[0]["lr"])
        scheduler.step(increment=1)  # what MegatronEngine does after each optimizer step
    assert seen == pytest.approx([LR, MIN_LR, MIN_LR, MIN_LR], rel=1e-9)
    # the schedule the engine reads its rates from agrees with megatron-core's own
    assert [A.lr_at(k, settings.lr_schedule) for k in range(4)] == pytest.approx(seen, rel=1e-9)


def test_max_len_mask_drops_the_responses_cut_at_their_own_budget():
    # ROLL's max_len_mask drops responses cut at the length limit; with a limit on prompt + response each prompt's
    # limit is its own budget (here 6 for the 4-token prompt, 3 for the 7-token one)
    from rlcfg import ir
    from rlcfg.runtime import algorithms as A
    from rlcfg.runtime import step as S

    groups = [{"prompt": [1] * 4, "responses": [None, None]}, {"prompt": [1] * 7, "responses": [None, None]}]
    settings = S.StepSettings(algorithm=ir.Algorithm(group_size=2), max_new_tokens=6, pad_token_id=0,
                              needs_reference=False, on_policy=True, samples_per_rank=None, micro_batch_size=None,
                              has_critic=False, forward_micro_batch={}, max_total_length=10)
    lengths = torch.tensor([6, 3, 3, 2])
    limits = S._response_limits(groups, settings, lengths)
    assert limits.tolist() == [6, 6, 3, 3]
    keep = A.sample_mask(torch.zeros(4), lengths, 2, limits, ir.SampleWeighting(max_len_mask=True))
    assert keep.tolist() == [0.0, 1.0, 0.0, 1.0]
    assert S._response_limits(groups, dataclasses.replace(settings, max_total_length=None), lengths) == 6
