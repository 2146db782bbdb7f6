"""HFRolloutEngine's own decoding loop (greedy, or temperature / top-k / top-p sampling): it must give what
transformers' generate gives, while dropping each row from the KV cache once it has ended or used its budget."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlcfg.ir import Sampling  # noqa: E402
from rlcfg.runtime.backends import hf as H  # noqa: E402


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    from rlcfg.runtime import quickstart

    # The quickstart's warm-started model: it writes an answer of one to three digits, then often ";" and another
    # problem. With ";" as a stop token, rows of a batch stop at different steps.
    path = str(tmp_path_factory.mktemp("quickstart") / "model")
    quickstart.build_model_dir(path)
    return H.HFRolloutEngine(path)


PROMPTS = ["3*4=", "7*8=", "12*12=", "0*5=", "9*11=", "6*7=", "1*1=", "10*3="]


def prompt_ids(engine):
    return [engine.tokenizer(p, add_special_tokens=False)["input_ids"] for p in PROMPTS]


def separator(engine):
    return engine.tokenizer.convert_tokens_to_ids(";")


def through_generate(engine, monkeypatch, *args, **kwargs):
    monkeypatch.setattr(H, "plain_sampling", lambda kwargs: False)
    try:
        return engine.generate(*args, **kwargs)
    finally:
        monkeypatch.undo()


@pytest.mark.parametrize("sampling", [
    Sampling(max_new_tokens=12, temperature=0.0),
    Sampling(max_new_tokens=12, max_total_length=8, temperature=0.0),  # per-row budgets
])
def test_greedy_decoding_matches_transformers_generate(engine, monkeypatch, sampling):
    rows = prompt_ids(engine)
    sampling = dataclasses.replace(sampling, stop_token_ids=(separator(engine),))
    ours = engine.generate(rows, sampling, seed=0)
    theirs = through_generate(engine, monkeypatch, rows, sampling, seed=0)
    assert [g.token_ids for g in ours] == [g.token_ids for g in theirs]
    assert [g.finished for g in ours] == [g.finished for g in theirs]
    assert any(g.finished for g in ours) and len({len(g.token_ids) for g in ours}) > 1, "rows should stop apart"
    for a, b in zip(ours, theirs):
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-5)


@pytest.mark.parametrize("kwargs", [
    {"temperature": 1.0, "top_p": 1.0, "top_k": None},
    {"temperature": 0.7, "top_p": 0.9, "top_k": None},
    {"temperature": 1.3, "top_p": 1.0, "top_k": 5},
    {"temperature": 1.0, "top_p": 0.5, "top_k": 20},
])
def test_the_warped_scores_are_transformers_warpers(kwargs):
    from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    warpers = LogitsProcessorList([TemperatureLogitsWarper(kwargs["temperature"])])
    if kwargs["top_k"]:
        warpers.append(TopKLogitsWarper(kwargs["top_k"]))
    if kwargs["top_p"] < 1.0:
        warpers.append(TopPLogitsWarper(kwargs["top_p"]))
    logits = torch.randn(16, 40, generator=torch.Generator().manual_seed(3)) * 3
    expected = warpers(torch.zeros(16, 1, dtype=torch.long), logits.clone())
    assert torch.equal(torch.isinf(H.warp(logits, {"do_sample": True, **kwargs})), torch.isinf(expected))
    assert torch.allclose(H.warp(logits, {"do_sample": True, **kwargs}).softmax(-1), expected.softmax(-1), atol=1e-6)


def test_sampling_draws_what_generate_draws_until_a_row_stops(engine, monkeypatch):
    # Until the first row ends, both draw one multinomial sample per row from the same distribution and the same
    # generator state: the first token of every row is the same.
    rows = prompt_ids(engine)
    sampling = Sampling(max_new_tokens=12, temperature=1.0, top_p=0.95, top_k=8,
                        stop_token_ids=(separator(engine),))
    ours = engine.generate(rows, sampling, seed=11)
    theirs = through_generate(engine, monkeypatch, rows, sampling, seed=11)
    assert [g.token_ids[0] for g in ours] == [g.token_ids[0] for g in theirs]
    for g in ours:
        assert len(g.token_ids) == len(g.logprobs)
        assert g.finished == (g.token_ids[-1] in (engine.eos_id, separator(engine)))


def test_features_the_loop_does_not_have_go_to_generate():
    assert H.plain_sampling(H.sampling_kwargs(Sampling(max_new_tokens=4, temperature=0.8, top_p=0.9, top_k=4)))
    assert H.plain_sampling(H.sampling_kwargs(Sampling(max_new_tokens=4, temperature=0.0)))
    assert not H.plain_sampling(H.sampling_kwargs(Sampling(max_new_tokens=4, min_p=0.1)))
    assert not H.plain_sampling(H.sampling_kwargs(Sampling(max_new_tokens=4, min_new_tokens=2)))


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("through", ["loop", "generate"])
def test_the_returned_log_probs_are_a_forward_pass_of_the_model_at_the_sampling_temperature(
        engine, monkeypatch, temperature, through):
    """What the engine returns serves as the old policy's log-probs without a recompute pass (Algorithm.old_logprobs
    "rollout"): they must be the trainer's, log_softmax(logits / temperature) of each sampled token, whatever
    top-k and top-p cut from the distribution sampled."""
    rows = prompt_ids(engine)[:4]
    sampling = Sampling(max_new_tokens=6, temperature=temperature, top_p=0.9, top_k=20, n=2)
    if through == "loop":
        gens = engine.generate(rows, sampling, seed=5)
    else:
        gens = through_generate(engine, monkeypatch, rows, sampling, seed=5)
    assert len(gens) == 8 and all(g.token_ids for g in gens)
    for i, g in enumerate(gens):
        prompt = rows[i // 2]
        ids = torch.tensor([list(prompt) + list(g.token_ids)])
        with torch.no_grad():
            logits = engine.model(input_ids=ids).logits[0, len(prompt) - 1:-1].float() / temperature
        expected = torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(g.token_ids)[:, None]).squeeze(-1)
        assert torch.allclose(torch.tensor(g.logprobs), expected, atol=1e-4), (g.logprobs, expected)
