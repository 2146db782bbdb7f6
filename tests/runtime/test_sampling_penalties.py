"""The rollout sampling penalties and limits of rlcfg.ir.Sampling (issue 12): what each rollout backend is handed,
and, on CPU with a tiny local model, that transformers' generate acts on each of them."""

from __future__ import annotations

import dataclasses
import types

import pytest

from rlcfg.ir import Sampling
from rlcfg.runtime.backends import hf as H
from rlcfg.runtime.backends import sglang as S
from rlcfg.runtime.backends import vllm as V

PENALISED = Sampling(max_new_tokens=8, temperature=0.7, repetition_penalty=1.2, presence_penalty=0.5,
                     frequency_penalty=0.25, min_new_tokens=3, stop_token_ids=(7, 9))


def test_sampling_defaults_change_nothing():
    s = Sampling(max_new_tokens=4)
    assert (s.repetition_penalty, s.presence_penalty, s.frequency_penalty, s.min_new_tokens, s.stop_token_ids) == (
        1.0, 0.0, 0.0, 0, ())
    defaults = Sampling(max_new_tokens=4, repetition_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0,
                        min_new_tokens=0, stop_token_ids=())
    assert V.sampling_params(defaults) == V.sampling_params(Sampling(max_new_tokens=4))
    assert S.sampling_params(defaults) == S.sampling_params(Sampling(max_new_tokens=4))
    assert H.sampling_kwargs(defaults) == H.sampling_kwargs(Sampling(max_new_tokens=4))


def test_vllm_sampling_params_carry_the_penalties():
    params = V.sampling_params(PENALISED, 3)
    assert {k: params[k] for k in ("repetition_penalty", "presence_penalty", "frequency_penalty", "min_tokens",
                                   "stop_token_ids")} == {
        "repetition_penalty": 1.2, "presence_penalty": 0.5, "frequency_penalty": 0.25, "min_tokens": 3,
        "stop_token_ids": [7, 9]}


def test_sglang_sampling_params_carry_the_penalties():
    params = S.sampling_params(PENALISED, 3)
    assert {k: params[k] for k in ("repetition_penalty", "presence_penalty", "frequency_penalty", "min_new_tokens",
                                   "stop_token_ids")} == {
        "repetition_penalty": 1.2, "presence_penalty": 0.5, "frequency_penalty": 0.25, "min_new_tokens": 3,
        "stop_token_ids": [7, 9]}


def test_hf_generate_kwargs_carry_the_penalties_greedy_too():
    for temperature in (0.7, 0.0):
        kwargs = H.sampling_kwargs(dataclasses.replace(PENALISED, temperature=temperature))
        assert kwargs["min_new_tokens"] == 3


def test_the_driver_hands_the_penalties_to_the_engines():
    from rlcfg.runtime.driver import Run

    s = Sampling(max_new_tokens=4, repetition_penalty=1.1, presence_penalty=0.2, frequency_penalty=0.3,
                 min_new_tokens=2, stop_token_ids=(5,))
    fake = types.SimpleNamespace(exp=types.SimpleNamespace(sampling=s, eval_sampling=None),
                                 alg=types.SimpleNamespace(group_size=2))
    # The engines get the Experiment's own Sampling, with the group's n: nothing is re-spelled on the way.
    assert Run._sampling(fake) == dataclasses.replace(s, n=2)


def test_presence_and_frequency_penalties_by_hand():
    """vLLM's / OpenAI's definition: logit -= presence·[count > 0] + frequency·count, over the output only."""
    torch = pytest.importorskip("torch")
    ids = torch.tensor([[1, 2, 3, 3, 4], [0, 1, 1, 5, 1]])  # prompt width 2, then the output so far
    scores = torch.zeros(2, 6)
    got = H.PenaltyProcessor(2, presence=0.5, frequency=0.25)(ids, scores)
    expected = torch.tensor([[0, 0, 0, -(0.5 + 2 * 0.25), -(0.5 + 0.25), 0],
                             [0, -(0.5 + 2 * 0.25), 0, 0, 0, -(0.5 + 0.25)]])
    assert torch.allclose(got, expected)
    # nothing generated yet: nothing changes (the prompt's tokens do not count)
    assert torch.equal(H.PenaltyProcessor(5, 0.5, 0.25)(ids, scores), scores)


def test_repetition_penalty_by_hand_prompt_and_output_but_not_padding():
    """vLLM's (and transformers') definition: a seen token's logit is divided by r when positive, multiplied by r
    when negative; seen means in the prompt or the output. Left padding is not part of the prompt."""
    torch = pytest.importorskip("torch")
    ids = torch.tensor([[0, 1, 2, 3]])  # column 0 is padding (id 0), prompt 1 2, output 3
    mask = torch.tensor([[0, 1, 1]])
    scores = torch.tensor([[2.0, 2.0, -2.0, 4.0, 2.0]])
    got = H.PenaltyProcessor(3, repetition=2.0, prompt_mask=mask)(ids, scores)
    assert torch.allclose(got, torch.tensor([[2.0, 1.0, -4.0, 2.0, 2.0]]))


# ---- transformers generate on a tiny local model ----------------------------------------------------------------

@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    pytest.importorskip("transformers")
    from tests.runtime.test_vllm import tiny_model

    path = tiny_model(str(tmp_path_factory.mktemp("tiny")), 0)
    return H.HFRolloutEngine(path)


PROMPT = [[4, 12, 5, 13]]


def greedy(engine, **extra):
    return engine.generate(PROMPT, Sampling(max_new_tokens=12, temperature=0.0, **extra), seed=0)[0]


def test_penalties_change_what_generate_produces(engine):
    base = greedy(engine)
    assert len(set(base.token_ids)) < len(base.token_ids), "the tiny model should repeat itself greedily"
    presence = greedy(engine, presence_penalty=1e4)
    assert len(set(presence.token_ids)) == len(presence.token_ids) and presence.token_ids != base.token_ids
    frequency = greedy(engine, frequency_penalty=1e4)
    assert len(set(frequency.token_ids)) == len(frequency.token_ids)
    assert greedy(engine, repetition_penalty=50.0).token_ids != base.token_ids


def test_stop_token_ids_and_min_new_tokens(engine):
    base = greedy(engine)
    stop = base.token_ids[1]
    first = base.token_ids.index(stop)
    stopped = greedy(engine, stop_token_ids=[stop])
    assert stopped.finished and stopped.token_ids == base.token_ids[:first + 1]
    assert len(stopped.logprobs) == len(stopped.token_ids)
    # min_new_tokens holds the stop token (and EOS) back until that many tokens are out
    held = greedy(engine, stop_token_ids=[stop], min_new_tokens=first + 3)
    assert len(held.token_ids) >= first + 3 and stop not in held.token_ids[:first + 2]
