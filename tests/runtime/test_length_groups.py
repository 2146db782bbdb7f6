"""A padded micro-batch whose responses differ much in length runs as two forward passes (short rows, long rows),
each at its own width: the log-probs, values, entropy, loss, gradient and update must be those of the micro-batch
computed at once."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlcfg.ir import Optimizer  # noqa: E402
from rlcfg.runtime import step as S  # noqa: E402
from rlcfg.runtime.algorithms import ActorLossSpec, PolicyLossSpec  # noqa: E402
from rlcfg.runtime.backends import fsdp as F  # noqa: E402
from tests.runtime.test_packing import (VOCAB, engine, model_path, process_group,  # noqa: E402,F401
                                        training_batch)


def skewed_groups(seed=2, prompts=8, per_prompt=4):
    """Mostly answers of one to three tokens, and a few that run to the limit, as a warm-started model gives."""
    g = torch.Generator().manual_seed(seed)

    def tokens(n):
        return torch.randint(2, VOCAB, (n,), generator=g).tolist()

    out = []
    for p in range(prompts):
        lengths = [12 if (p + i) % 9 == 0 else 1 + (p + i) % 3 for i in range(per_prompt)]
        out.append({"prompt": tokens(3 + p % 4), "responses": [(tokens(n), None, True) for n in lengths],
                    "scores": [0.0] * per_prompt})
    return out


def whole(monkeypatch):
    monkeypatch.setattr(F, "SPLIT_SAVING", 1.0)  # no split can save all the columns: never split


def test_a_micro_batch_splits_only_when_it_saves_columns():
    batch, _, _ = S.make_batch(skewed_groups(), pad=0)
    prompt_width = batch["input_ids"].shape[1] - batch["response_mask"].shape[1]
    groups = F.length_groups(batch["attention_mask"], batch["response_mask"], prompt_width)
    assert groups is not None
    short, long = (set(g.tolist()) for g in groups)
    assert short | long == set(range(32)) and not short & long
    lengths = batch["response_mask"].sum(dim=1)
    assert {i for i in range(32) if lengths[i] == 12} <= long and max(lengths[sorted(short)]) <= 3
    even = batch["response_mask"].clone()
    even[:, 1:] = 0  # every response one token long: nothing to save
    assert F.length_groups(batch["attention_mask"], even, prompt_width) is None


@pytest.mark.parametrize("kind", ["actor", "critic"])
def test_split_outputs_equal_the_whole_micro_batch(model_path, monkeypatch, kind):
    batch, _, _ = S.make_batch(skewed_groups(), pad=0)
    split = engine(model_path, kind).compute(batch, micro_batch=32)["values"]
    whole(monkeypatch)
    at_once = engine(model_path, kind).compute(batch, micro_batch=32)["values"]
    torch.testing.assert_close(split, at_once, rtol=1e-5, atol=1e-5)
    assert bool((at_once != 0).any())


def test_split_training_takes_the_whole_micro_batchs_step(model_path, monkeypatch):
    batch = training_batch(model_path, skewed_groups(seed=4))
    mask = batch["response_mask"]
    cfg = {"ppo_epochs": 1, "mini_batch": 32, "micro_batch": 32, "denominators": S.denominators(mask, 1, 32),
           "aggregation": "token-mean",
           "loss": ActorLossSpec(PolicyLossSpec(clip_low=0.05, clip_high=0.05), "token-mean", entropy_coef=0.01)}
    sgd = Optimizer(name="sgd", lr=0.5, grad_clip=None)
    results = []
    for split in (True, False):
        if not split:
            whole(monkeypatch)
        trainer = engine(model_path, optimizer=sgd)
        metrics = trainer.train(batch, cfg)
        results.append((metrics, {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}))
    (split_metrics, split_weights), (metrics, weights) = results
    assert metrics["clip_frac"] > 0
    for key in ("pg_loss", "entropy", "grad_norm", "clip_frac"):
        assert split_metrics[key] == pytest.approx(metrics[key], rel=1e-5, abs=1e-6), key
    for key, value in weights.items():
        torch.testing.assert_close(split_weights[key], value, rtol=1e-5, atol=1e-6)


def test_ranks_of_a_sharded_model_never_split(model_path, monkeypatch):
    """Each forward pass of a sharded model gathers its weights from every rank, so all ranks must run as many;
    their rows would not split alike."""
    batch, _, _ = S.make_batch(skewed_groups(), pad=0)
    trainer = engine(model_path)
    passes = []
    padded = trainer._forward_padded
    monkeypatch.setattr(trainer, "_forward_padded", lambda mb, *a, **k: passes.append(1) or padded(mb, *a, **k))
    trainer.compute(batch, micro_batch=32)
    assert len(passes) == 2  # one rank: split
    passes.clear()
    monkeypatch.setattr(trainer, "world", 2)
    trainer.compute(batch, micro_batch=32)
    assert len(passes) == 1
