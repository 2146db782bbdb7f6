"""Sequence packing in the fsdp backend: a micro-batch's samples in one row, each attending only to itself.

Packed and padded micro-batches must give the same log-probs, values, losses and updates (fp32, tight
tolerance); micro-batches are formed by the token budget; and a run with packing on trains like one without.
"""

import dataclasses
import io
import json
import os
import socket

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlcfg.ir import ActorLossSpec, Optimizer, PolicyLossSpec  # noqa: E402
from rlcfg.runtime import packing  # noqa: E402
from rlcfg.runtime import step as S  # noqa: E402
from rlcfg.runtime.backends.fsdp import FSDPEngine, init_distributed  # noqa: E402

VOCAB = 40


@pytest.fixture(scope="module", autouse=True)
def process_group():
    """A one-rank gloo group for the engines built in this process; torn down so no other test sees it."""
    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    init_distributed(0, 1, "127.0.0.1", port, "cpu")
    yield
    dist.destroy_process_group()


def build(directory, family="qwen2", dropout=0.0):
    import transformers

    torch.manual_seed(0)
    common = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                  tie_word_embeddings=False, attention_dropout=dropout)
    if family == "qwen2":
        model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**common))
    elif family == "qwen3":
        model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(head_dim=16, **common))
    else:
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**common))
    model.save_pretrained(str(directory))
    return str(directory)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return build(tmp_path_factory.mktemp("qwen2"))


def groups(seed=1, prompts=4, per_prompt=3, longest_prompt=6, shortest_response=0, longest_response=8):
    """Prompts and responses of varied lengths, some responses empty, as the rollout hands them over."""
    g = torch.Generator().manual_seed(seed)

    def tokens(lo, hi):
        n = int(torch.randint(lo, hi + 1, (1,), generator=g))
        return torch.randint(2, VOCAB, (n,), generator=g).tolist()

    return [{"prompt": tokens(1, longest_prompt),
             "responses": [(tokens(shortest_response, longest_response), None, True) for _ in range(per_prompt)],
             "scores": [0.0] * per_prompt} for _ in range(prompts)]


def engine(path, kind="actor", optimizer=None, **packing_settings):
    torch.manual_seed(7)  # the critic's new value head: the same draw for every engine of a comparison
    return FSDPEngine(kind, path, dtype="float32", optimizer=optimizer, **packing_settings)


# ---------------------------------------------------------------------------------------------- forward


@pytest.mark.parametrize("family", ["qwen2", "llama", "qwen3"])
def test_packed_log_probs_equal_the_padded_ones(tmp_path, family):
    path = build(tmp_path, family)
    batch, _, _ = S.make_batch(groups(), pad=0)
    padded = engine(path).compute(batch, micro_batch=4)["values"]
    for budget in (None, 24, 64):
        packed = engine(path, sequence_packing=True, max_tokens_per_micro_batch=budget).compute(batch, 4)["values"]
        torch.testing.assert_close(packed, padded, rtol=1e-5, atol=1e-5)
    assert bool((padded != 0).any())


def test_packed_critic_values_equal_the_padded_ones(model_path):
    batch, _, _ = S.make_batch(groups(), pad=0)
    padded = engine(model_path, "critic").compute(batch, 4)["values"]
    packed = engine(model_path, "critic", sequence_packing=True, max_tokens_per_micro_batch=30).compute(batch, 4)
    torch.testing.assert_close(packed["values"], padded, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family", ["qwen2", "llama", "qwen3"])
def test_a_packed_sample_sees_only_its_own_tokens(tmp_path, family):
    """Changing every token of one sample leaves the log-probs of the samples packed beside it unchanged
    (and changes its own)."""
    path = build(tmp_path, family)
    # Three samples packed into one row; every token of the middle one, prompt and response, changes.
    original = groups(prompts=3, per_prompt=1, shortest_response=2)
    middle = original[1]
    shifted = [(t + 5) % (VOCAB - 2) + 2 for t in middle["prompt"]]
    response = [(t + 7) % (VOCAB - 2) + 2 for t in middle["responses"][0][0]]
    changed = [original[0], dict(middle, prompt=shifted, responses=[(response, None, True)]), original[2]]
    packed = engine(path, sequence_packing=True)
    before, _, _ = S.make_batch(original, pad=0)
    assert packed.micro_batches(before["attention_mask"], 3) == [slice(0, 3)]
    before = packed.compute(before, micro_batch=3)["values"]
    after, _, _ = S.make_batch(changed, pad=0)
    after = packed.compute(after, micro_batch=3)["values"]
    torch.testing.assert_close(after[0], before[0], rtol=0, atol=1e-6)
    torch.testing.assert_close(after[2], before[2], rtol=0, atol=1e-6)
    assert not torch.allclose(after[1], before[1])


def test_pack_layout():
    """Two samples, prompts left-padded to 3 columns: each sample's tokens but its last, positions restarting
    at 0, and every response token scored by the output just before it."""
    ids = torch.tensor([[0, 5, 6, 7, 8, 0], [9, 10, 11, 12, 0, 0]])
    attention = torch.tensor([[0, 1, 1, 1, 1, 0], [1, 1, 1, 1, 0, 0]])
    row = packing.pack(ids, attention, prompt_width=3)
    assert row.input_ids.tolist() == [[5, 6, 7, 9, 10, 11]]
    assert row.position_ids.tolist() == [[0, 1, 2, 0, 1, 2]]
    assert list(zip(row.rows.tolist(), row.cols.tolist(), row.sources.tolist())) == [(0, 0, 1), (0, 1, 2),
                                                                                      (1, 0, 5)]
    assert row.width == 2


# ---------------------------------------------------------------------------------------------- splitting


def test_micro_batches_never_exceed_the_token_budget():
    lengths = [9, 3, 7, 2, 5, 5, 1, 8]
    split = packing.split_by_budget(lengths, budget=10)
    assert sorted(i for g in split for i in g) == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in g) <= 10 for g in split)
    assert len(split) == 4  # 40 tokens in budgets of 10: as few micro-batches as can hold them
    assert all(g == sorted(g) for g in split)


def test_a_budget_can_ask_for_more_micro_batches_than_it_needs():
    """Ranks that train together run as many forward passes: a rank with shorter samples splits into as many
    micro-batches as the busiest rank."""
    split = packing.split_by_budget([2, 2, 2, 2], budget=100, min_groups=3)
    assert len(split) == 3 and sorted(i for g in split for i in g) == [0, 1, 2, 3]


def test_a_sample_longer_than_the_budget_is_refused_with_the_users_key():
    with pytest.raises(packing.PackingBudgetError, match=r"12 tokens .* at most 10 tokens \(`actor.mb_spec.max_tokens_per_mb`\)"):
        packing.split_by_budget([4, 12, 3], budget=10, budget_key="actor.mb_spec.max_tokens_per_mb")


def test_without_a_budget_packing_keeps_the_micro_batch_size(model_path):
    batch, _, _ = S.make_batch(groups(), pad=0)
    packed = engine(model_path, sequence_packing=True)
    assert packed.micro_batches(batch["attention_mask"], 5) == [slice(0, 5), slice(5, 10), slice(10, 12)]
    budgeted = engine(model_path, sequence_packing=True, max_tokens_per_micro_batch=20)
    split = budgeted.micro_batches(batch["attention_mask"], 5)
    lengths = batch["attention_mask"].sum(dim=1)
    assert all(int(lengths[rows].sum()) <= 20 for rows in split)
    assert sorted(int(i) for rows in split for i in rows) == list(range(12))


def test_ranks_agree_on_the_number_of_packed_micro_batches(model_path, monkeypatch):
    """Each forward pass of a sharded model is a collective: a rank whose samples fit in fewer micro-batches
    splits them into as many as the busiest rank needs (here another rank is made to need 5)."""
    import torch.distributed as dist

    def busiest_rank_needs_five(tensor, op=None):
        assert op == dist.ReduceOp.MAX
        tensor.fill_(max(int(tensor), 5))

    batch, _, _ = S.make_batch(groups(), pad=0)
    budgeted = engine(model_path, sequence_packing=True, max_tokens_per_micro_batch=60)
    alone = budgeted.micro_batches(batch["attention_mask"], 4)
    assert len(alone) < 5
    monkeypatch.setattr(dist, "all_reduce", busiest_rank_needs_five)
    budgeted.world = 2
    split = budgeted.micro_batches(batch["attention_mask"], 4)
    assert len(split) == 5
    assert sorted(int(i) for rows in split for i in rows) == list(range(12))
    assert all(int(batch["attention_mask"][rows].sum()) <= 60 for rows in split)


# ---------------------------------------------------------------------------------------------- training


def training_batch(path, rollout):
    """A batch of `rollout` with seeded advantages, and old and reference log-probs near the model's own."""
    batch, _, _ = S.make_batch(rollout, pad=0)
    g = torch.Generator().manual_seed(5)
    mask = batch["response_mask"]
    current = engine(path).compute(batch, 4)["values"]
    batch["advantages"] = torch.randn(mask.shape, generator=g) * mask
    batch["old_logprobs"] = (current + 0.1 * torch.randn(mask.shape, generator=g)) * mask
    batch["ref_logprobs"] = (current + 0.1 * torch.randn(mask.shape, generator=g)) * mask
    return batch


@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"])
def test_packed_training_takes_the_padded_step(model_path, aggregation):
    """Same losses, gradient norm and updated weights, whichever way the micro-batches are formed: the loss
    of each micro-batch is its share of its mini-batch's (step.denominators)."""
    batch = training_batch(model_path, groups(seed=3))
    mask = batch["response_mask"]
    mini = 6
    cfg = {"ppo_epochs": 1, "mini_batch": mini, "micro_batch": 2,
           "denominators": S.denominators(mask, 1, mini), "aggregation": aggregation,
           "loss": ActorLossSpec(PolicyLossSpec(clip_low=0.05, clip_high=0.05), aggregation, kl_coef=0.5,
                                 entropy_coef=0.01)}
    sgd = Optimizer(name="sgd", lr=0.5, grad_clip=None)
    results = {}
    for name, settings in {"padded": {}, "packed": {"sequence_packing": True},
                           "budget": {"sequence_packing": True, "max_tokens_per_micro_batch": 26}}.items():
        trainer = engine(model_path, optimizer=sgd, **settings)
        metrics = trainer.train(batch, cfg)
        results[name] = (metrics, {k: v.detach().clone() for k, v in trainer.model.state_dict().items()})
    base_metrics, base_weights = results["padded"]
    assert base_metrics["clip_frac"] > 0  # the clipped branch is exercised
    for name in ("packed", "budget"):
        metrics, weights = results[name]
        for key in ("pg_loss", "kl_loss", "entropy", "grad_norm"):
            assert metrics[key] == pytest.approx(base_metrics[key], rel=1e-5, abs=1e-6), (name, key)
        for key, value in weights.items():
            torch.testing.assert_close(value, base_weights[key], rtol=1e-5, atol=1e-6)
    moved = [k for k, v in base_weights.items()
             if not torch.equal(v, engine(model_path).model.state_dict()[k])]
    assert moved


# ---------------------------------------------------------------------------------------------- dropout


def test_disable_dropout_zeroes_every_dropout_probability(tmp_path):
    path = build(tmp_path, dropout=0.5)
    sgd = Optimizer(name="sgd", lr=0.1, grad_clip=None)
    with_dropout = engine(path, optimizer=sgd)
    without = engine(path, optimizer=sgd, disable_dropout=True)
    rates = [m.attention_dropout for m in without.model.modules() if hasattr(m, "attention_dropout")]
    assert rates and set(rates) == {0.0}
    assert {m.attention_dropout for m in with_dropout.model.modules() if hasattr(m, "attention_dropout")} == {0.5}
    # In train mode two forward passes agree only without dropout.
    batch, _, _ = S.make_batch(groups(), pad=0)
    width = batch["response_mask"].shape[1]
    for trainer, deterministic in ((without, True), (with_dropout, False)):
        trainer.model.train()
        with torch.no_grad():
            first = trainer._forward(batch, batch["input_ids"].shape[1] - width)[0]
            second = trainer._forward(batch, batch["input_ids"].shape[1] - width)[0]
        assert torch.equal(first, second) == deterministic


# ---------------------------------------------------------------------------------------------- a run


def test_a_run_with_packing_trains_like_one_without(tmp_path):
    """The quickstart on two FSDP ranks with a reference model, its actor and reference packing under a
    token budget, against the same run padded: the first step, on the same rollouts, has the same loss, KL and
    gradient norm. A budget smaller than a sample stops the run with the budget's name."""
    pytest.importorskip("ray")
    from rlcfg.runtime import quickstart
    from rlcfg.runtime.data import DataError
    from rlcfg.runtime.driver import RunOptions, run

    base = quickstart.experiment(str(tmp_path / "shared"), steps=2, prompts_per_step=4, group_size=8,
                                 actor_ranks=2, kl_coef=0.05, checkpoint_interval=None)
    base = dataclasses.replace(base, sampling=dataclasses.replace(base.sampling, max_new_tokens=3))

    def packed(budget):
        return dataclasses.replace(base, roles=tuple(
            dataclasses.replace(r, sequence_packing=True, max_tokens_per_micro_batch=budget,
                                keys=r.keys + (("max_tokens_per_micro_batch", f"{r.name}.mb_spec.max_tokens_per_mb"),))
            if r.name in ("actor", "reference") else r for r in base.roles))

    def first_step(exp, name):
        out = str(tmp_path / name)
        run(quickstart.plan_for(exp), RunOptions(output_dir=out, resume=None, threads=1, stream=io.StringIO()))
        with open(os.path.join(out, "metrics.jsonl")) as f:
            history = [json.loads(line) for line in f if line.strip()]
        assert [m["step"] for m in history] == [1, 2]
        return history[0]

    try:
        padded_step, packed_step = first_step(base, "padded"), first_step(packed(24), "packed")
        with pytest.raises(DataError) as refused:
            first_step(packed(3), "too-small")
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()
    assert packed_step["data/prompt_indices"] == padded_step["data/prompt_indices"]
    assert packed_step["response/length_mean"] == padded_step["response/length_mean"]
    for key in ("actor/pg_loss", "actor/kl_loss", "actor/grad_norm", "kl"):
        assert packed_step[key] == pytest.approx(padded_step[key], rel=1e-4, abs=1e-6), key
    message = str(getattr(refused.value, "cause", None) or refused.value)
    assert "at most 3 tokens (`reference.mb_spec.max_tokens_per_mb`)" in message


@pytest.mark.parametrize("override,expected", [((), True), (("actor.disable_dropout=false",), False)])
def test_areal_disable_dropout_reaches_the_actor(override, expected):
    from rlcfg.frontend import check_file
    from rlcfg.lower import lower
    from tests.helpers import TEMPLATES

    result = check_file(str(TEMPLATES / "areal-fsdp-sglang-grpo.yaml"), list(override))
    assert result.config is not None
    assert not [d for d in result.diagnostics if d.code == "RLC118" and "disable_dropout" in str(d.path)]
    exp = lower("areal", result.config)
    assert exp.role("actor").disable_dropout is expected  # the template sets it
    assert exp.role("actor").sequence_packing  # AReaL always packs


# ---------------------------------------------------------------------------------------------- megatron


def test_megatron_packed_micro_batches_give_the_padded_log_probs_and_update(model_path):
    """megatron-core's local attention with a block-diagonal causal mask, through its own schedule on CPU: the
    packed log-probs and PPO step (loss, gradient norm, new weights) are the padded ones."""
    pytest.importorskip("megatron.core")
    from megatron.core import parallel_state

    from rlcfg.runtime.backends import megatron as M
    from rlcfg.runtime.backends import megatron_cpu as C
    from tests.runtime.test_megatron_cpu import settings_for
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(model_path)
    batch, _, _ = S.make_batch(groups(seed=4), pad=0)
    mask = batch["response_mask"]
    g = torch.Generator().manual_seed(2)
    batch["advantages"] = torch.randn(mask.shape, generator=g) * mask
    cfg = {"ppo_epochs": 1, "mini_batch": 6, "micro_batch": 2, "denominators": S.denominators(mask, 1, 6),
           "loss": ActorLossSpec(entropy_coef=0.01)}
    results = {}
    try:
        for name, packing_settings in {"padded": {}, "packed": {"sequence_packing": True},
                                       "budget": {"sequence_packing": True, "token_budget": 24}}.items():
            settings = settings_for(hf, lr=0.5)
            # Plain SGD: the new weights are the gradient itself (Adam's first step is ±lr whatever its size).
            settings = dataclasses.replace(settings, optimizer=dict(settings.optimizer, optimizer="sgd"),
                                           **packing_settings)
            with C.cuda_as_cpu():
                trainer = M.MegatronEngine("actor", model_path, settings)
            logprobs = trainer.compute(batch, 4)["values"]
            if name == "padded":
                batch["old_logprobs"] = logprobs + 0.05 * torch.randn(mask.shape, generator=g) * mask
            metrics = trainer.train(batch, cfg)
            results[name] = (logprobs, metrics, trainer.full_state_dict())
    finally:
        parallel_state.destroy_model_parallel()
    base_logprobs, base_metrics, base_state = results["padded"]
    assert bool((base_logprobs != 0).any())
    for name in ("packed", "budget"):
        logprobs, metrics, state = results[name]
        torch.testing.assert_close(logprobs, base_logprobs, rtol=1e-5, atol=1e-5)
        for key in ("pg_loss", "entropy", "grad_norm"):
            assert metrics[key] == pytest.approx(base_metrics[key], rel=1e-5, abs=1e-6), (name, key)
        for key, value in state.items():
            torch.testing.assert_close(value, base_state[key], rtol=1e-5, atol=1e-6)
    moved = [k for k, v in base_state.items() if not torch.equal(v, hf.state_dict()[k])]
    assert moved


def _megatron_two_rank_worker(rank: int, port: int, path: str, out: str) -> None:
    """Rank `rank` of a two-process gloo world: the padded batch's log-probs and PPO step on one packed
    pipeline of two stages, then on tp=2 with sequence parallelism (rows padded to a multiple of 2)."""
    import warnings

    import torch.distributed as dist

    from rlcfg.runtime.backends import MEGATRON_ON_CPU_ENV
    from rlcfg.runtime.backends import megatron as M
    from tests.runtime.test_megatron import _role, spec_of
    from transformers import AutoModelForCausalLM

    os.environ[MEGATRON_ON_CPU_ENV] = "1"
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    hf = AutoModelForCausalLM.from_pretrained(path)
    batch, cfg = _megatron_batch()
    results = {}
    for name, tp, pp in (("pp2", 1, 2), ("tp2", 2, 1)):
        role = _fp32_sgd(_role(tp))
        role = dataclasses.replace(role, parallelism=dataclasses.replace(role.parallelism, pp=pp),
                                   sequence_packing=True, max_tokens_per_micro_batch=24)
        trainer = M.MegatronEngine("actor", path, M.lower_role(role, spec_of(hf), 2, total_optimizer_steps=10))
        logprobs = trainer.compute(batch, 4)["values"]
        metrics = trainer.train(batch, cfg)
        results[name] = (logprobs, metrics, trainer.full_state_dict())
    if rank == 0:
        torch.save(results, out)
    dist.destroy_process_group()


def _fp32_sgd(role):
    """The ROLL template's Megatron actor in fp32 with plain SGD, so that new weights show the gradient."""
    return dataclasses.replace(role, model=dataclasses.replace(role.model, dtype="float32"),
                               optimizer=dataclasses.replace(role.optimizer, name="sgd", lr=0.5, warmup_steps=0))


def _megatron_batch():
    batch, _, _ = S.make_batch(groups(seed=4), pad=0)
    mask = batch["response_mask"]
    g = torch.Generator().manual_seed(2)
    batch["advantages"] = torch.randn(mask.shape, generator=g) * mask
    batch["old_logprobs"] = -3.0 * mask
    cfg = {"ppo_epochs": 1, "mini_batch": 12, "micro_batch": 2, "denominators": S.denominators(mask, 1, 12),
           "loss": ActorLossSpec()}
    return batch, cfg


def test_megatron_packs_across_pipeline_stages_and_tensor_parallel_ranks(model_path, tmp_path):
    pytest.importorskip("megatron.core")
    import torch.multiprocessing as mp
    from megatron.core import parallel_state

    from rlcfg.runtime.backends import megatron as M
    from rlcfg.runtime.backends import megatron_cpu as C
    from tests.runtime.test_megatron import _role, spec_of
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(model_path)
    batch, cfg = _megatron_batch()
    role = _fp32_sgd(_role(1))
    try:
        with C.cuda_as_cpu():
            padded = M.MegatronEngine("actor", model_path, M.lower_role(role, spec_of(hf), 1, total_optimizer_steps=10))
        one_logprobs = padded.compute(batch, 4)["values"]
        one_metrics = padded.train(batch, cfg)
        one_state = padded.full_state_dict()
    finally:
        parallel_state.destroy_model_parallel()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = str(tmp_path / "two.pt")
    mp.spawn(_megatron_two_rank_worker, args=(port, model_path, out), nprocs=2, join=True)
    for name, (logprobs, metrics, state) in torch.load(out, weights_only=False).items():
        torch.testing.assert_close(logprobs, one_logprobs, rtol=1e-5, atol=1e-5)
        for key in ("pg_loss", "grad_norm"):
            assert metrics[key] == pytest.approx(one_metrics[key], rel=1e-5, abs=1e-6), (name, key)
        for key, value in state.items():
            torch.testing.assert_close(value, one_state[key], rtol=1e-5, atol=1e-5)
