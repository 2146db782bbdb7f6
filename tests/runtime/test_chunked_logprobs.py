"""Log-probs straight from the hidden states, a few positions of logits at a time (fsdp.ChunkedLogProbs): the same
log-probs, entropies, losses and gradients as whole logits, padded and packed, while no more than a chunk of
logits exists at once."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlcfg.ir import ActorLossSpec, Optimizer, PolicyLossSpec  # noqa: E402
from rlcfg.runtime import step as S  # noqa: E402
from rlcfg.runtime.backends import fsdp  # noqa: E402
from tests.runtime.test_packing import build, engine, groups, process_group, training_batch  # noqa: E402,F401

SGD = Optimizer(name="sgd", lr=0.0, grad_clip=None)  # gradients without moving the weights


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(fsdp, "LOGPROB_CHUNK_TOKENS", 5)  # several chunks per micro-batch, one cut mid-sample


def whole_logits(trainer):
    trainer.head = None  # the engine's path for families the chunked head does not serve
    return trainer


@pytest.mark.parametrize("family", ["qwen2", "llama"])
@pytest.mark.parametrize("packed", [False, True])
def test_chunked_log_probs_and_entropies_are_the_whole_logits_ones(tmp_path, small_chunks, family, packed):
    path = build(tmp_path, family)
    batch, _, _ = S.make_batch(groups(), pad=0)
    settings = {"sequence_packing": packed}
    chunked = engine(path, **settings)
    assert chunked.head is not None
    prompt_width = batch["input_ids"].shape[1] - batch["response_mask"].shape[1]
    mb = {k: v[:6] for k, v in batch.items()}
    with torch.no_grad():
        lp, ent, hi = chunked._forward(mb, prompt_width, want_entropy=True)
        wlp, went, whi = whole_logits(engine(path, **settings))._forward(mb, prompt_width, want_entropy=True)
    assert hi == whi
    mask = mb["response_mask"][:, :hi].bool()
    torch.testing.assert_close(lp[mask], wlp[mask], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ent[mask], went[mask], rtol=1e-5, atol=1e-6)


def test_a_chunked_step_takes_the_whole_logits_gradients(tmp_path, small_chunks):
    path = build(tmp_path)
    batch = training_batch(path, groups(seed=3))
    mask = batch["response_mask"]
    cfg = {"ppo_epochs": 1, "mini_batch": 6, "micro_batch": 3, "denominators": S.denominators(mask, 1, 6),
           "loss": ActorLossSpec(PolicyLossSpec(), "token-mean", kl_coef=0.1, entropy_coef=0.01)}

    def gradients(trainer):
        trainer.model.train()
        prompt_width = batch["input_ids"].shape[1] - mask.shape[1]
        mb = {k: v[:3] for k, v in batch.items()}
        loss, _ = trainer._loss(mb, prompt_width, cfg, *cfg["denominators"][0])
        loss.backward()
        return float(loss), {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}

    chunked_loss, chunked = gradients(engine(path, optimizer=SGD))
    whole_loss, whole = gradients(whole_logits(engine(path, optimizer=SGD)))
    assert chunked_loss == pytest.approx(whole_loss, rel=1e-6)
    assert chunked.keys() == whole.keys() and "lm_head.weight" in chunked
    for name in whole:
        torch.testing.assert_close(chunked[name], whole[name], rtol=1e-4, atol=1e-6, msg=name)


def test_no_more_than_a_chunk_of_logits_is_computed_at_once(tmp_path, small_chunks):
    path = build(tmp_path)
    batch, _, _ = S.make_batch(groups(), pad=0)
    trainer = engine(path)
    shapes = []
    linear = trainer.head.linear

    def recorded(states):
        logits = linear(states)
        shapes.append(tuple(logits.shape))
        return logits

    trainer.head.linear = recorded
    prompt_width = batch["input_ids"].shape[1] - batch["response_mask"].shape[1]
    with torch.no_grad():
        trainer._forward({k: v[:6] for k, v in batch.items()}, prompt_width)
    assert shapes and all(rows <= 5 for rows, _vocab in shapes)


def test_other_families_and_the_critic_keep_whole_logits(tmp_path):
    import transformers

    gpt2 = tmp_path / "gpt2"
    transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=40, n_embd=32, n_layer=1, n_head=2,
                                                         n_positions=64)).save_pretrained(str(gpt2))
    assert engine(str(gpt2)).head is None
    assert engine(build(tmp_path / "qwen2"), "critic").head is None
