"""LoRA on the Megatron backend, end to end on CPU through megatron-core's schedule, DDP, optimizer and
dist_checkpointing (megatron_cpu's shim for CUDA, gloo for NCCL): the adapters start as the model, only they train,
their merged weights are what the engine computes with, and tensor, sequence, data and pipeline parallel ranks make
the one-rank update."""

from __future__ import annotations

import dataclasses
import os
import zlib

import pytest

pytest.importorskip("megatron.core")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch.distributed as dist  # noqa: E402

from rlcfg.ir import Lora  # noqa: E402
from rlcfg.runtime.backends import megatron as M  # noqa: E402
from rlcfg.runtime.backends import megatron_cpu as C  # noqa: E402
from rlcfg.runtime.backends.megatron_lora import ADAPTER_A, ADAPTER_B  # noqa: E402
from tests.runtime.test_megatron import _role, hf_state, spec_of, tiny_hf  # noqa: E402
from tests.runtime.test_megatron_cpu import (_join_two_rank_world, _port, checkpoints, gloo,  # noqa: E402,F401
                                             hf_logprobs, hf_model_from, rl_batch, train_cfg)

LORA = Lora(rank=4, alpha=8.0)


def lora_settings(model, world: int = 1, tp: int = 1, pp: int = 1, sp: bool = True, ep: int = 1,
                  etp: int | None = None, lora: Lora = LORA, lr: float = 1e-2):
    role = _role(tp)
    parallelism = dataclasses.replace(role.parallelism, pp=pp, sequence_parallel=sp and tp > 1, ep=ep, etp=etp)
    role = dataclasses.replace(role, parallelism=parallelism, lora=lora,
                               model=dataclasses.replace(role.model, dtype="float32"),
                               optimizer=dataclasses.replace(role.optimizer, lr=lr, warmup_steps=0, decay_steps=None))
    return M.lower_role(role, spec_of(model), world, total_optimizer_steps=10)


def adapted_layers(engine) -> list[tuple[int, str, object]]:
    """(global layer number, the layer's module name within the transformer layer, the module) of each adapter."""
    out = []
    for chunk in engine.chunks:
        for layer in M._unwrap(chunk).decoder.layers:
            for name, module in layer.named_modules():
                if hasattr(module, ADAPTER_A):
                    out.append((layer.layer_number, name, module))
    return out


def adapter_values(engine) -> dict[tuple[int, str], tuple]:
    """(A, B, whether the layer is column-parallel) of this rank's adapters by (global layer number, module)."""
    from megatron.core.tensor_parallel import layers as L

    return {(number, name): (module.lora_a.detach().clone(), module.lora_b.detach().clone(),
                             isinstance(module, L.ColumnParallelLinear))
            for number, name, module in adapted_layers(engine)}


def set_adapters(engine) -> None:
    """Every A from one global draw per layer, whatever the layout (a row-parallel layer's A cut by columns for this
    rank), so that different layouts start from the same adapters; B stays zero."""
    from megatron.core.tensor_parallel import layers as L

    for number, name, module in adapted_layers(engine):
        a = module.lora_a
        row = isinstance(module, L.RowParallelLinear)
        width = module.input_size if row else a.shape[1]
        g = torch.Generator().manual_seed(zlib.crc32(f"{number}:{name}".encode()))
        full = torch.randn((a.shape[0], width), generator=g) * 0.1
        if row:
            rank = module.tp_group.rank()
            full = full[:, rank * a.shape[1]:(rank + 1) * a.shape[1]]
        with torch.no_grad():
            a.copy_(full)


def two_steps(engine, batch: dict, before):
    """Two PPO steps from the log-probs `before`: the log-probs after them, which must have moved, and the merged
    weights the engines get."""
    batch["old_logprobs"] = before
    for _ in range(2):
        engine.train(batch, train_cfg(batch))
    after = engine.compute(batch, 2)["values"]
    assert (after - before).abs().max() > 1e-3
    return after, engine.full_state_dict()


def lora_engine(path, model, **kw):
    with C.cuda_as_cpu():
        engine = M.MegatronEngine("actor", path, lora_settings(model, **kw))
        set_adapters(engine)
    return engine


def test_adapters_start_as_the_model_train_alone_and_merge_into_what_the_engine_computes(gloo, checkpoints):
    path, model = checkpoints["qwen3"]  # tied embeddings
    engine = lora_engine(path, model)
    batch = rl_batch(model.config.vocab_size)
    before = engine.compute(batch, 2)["values"]
    assert (before - hf_logprobs(model, batch)).abs().max() < 1e-4  # B starts at zero
    trained = {n for c in engine.chunks for n, p in c.named_parameters() if p.requires_grad}
    assert trained and all(n.endswith((ADAPTER_A, ADAPTER_B)) for n in trained)
    # linear_qkv, linear_proj, linear_fc1 and linear_fc2 of each of the 4 layers
    assert len(adapted_layers(engine)) == 16
    after, merged = two_steps(engine, batch, before)
    base = hf_state(model)
    assert set(merged) == set(base)
    untouched = [k for k in base if "proj" not in k]  # embeddings and norms have no adapter
    assert untouched and all(torch.equal(merged[k], base[k]) for k in untouched)
    assert all(not torch.equal(merged[k], base[k]) for k in base if "proj" in k)
    # The rollout engines get these weights: a model built from them computes what the engine computes.
    assert (hf_logprobs(hf_model_from(merged, model), batch) - after).abs().max() < 1e-4


def test_lora_checkpoint_brings_adapters_and_optimizer_back_exactly(gloo, checkpoints, tmp_path):
    path, model = checkpoints["qwen2"]
    a = lora_engine(path, model)
    batch = rl_batch(model.config.vocab_size)
    batch["old_logprobs"] = a.compute(batch, 2)["values"]
    a.train(batch, train_cfg(batch))
    a.save(str(tmp_path / "ckpt"))
    b = lora_engine(path, model)
    b.load(str(tmp_path / "ckpt"))
    ma, mb = a.train(batch, train_cfg(batch)), b.train(batch, train_cfg(batch))
    assert {k: v for k, v in ma.items() if not k.endswith("_s")} == {k: v for k, v in mb.items()
                                                                      if not k.endswith("_s")}
    sa, sb = a.full_state_dict(), b.full_state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)


LAYOUTS = {"dp2": dict(tp=1), "tp2": dict(tp=2, sp=False), "tp2sp": dict(tp=2), "pp2": dict(pp=2)}
STEPS = 3


def _two_rank_worker(rank: int, port: int, path: str, out: str) -> None:
    """Rank `rank` of a two-process gloo world: two PPO steps with adapters on each layout (the first moves B alone,
    A's gradient is zero while B is; the second moves both). Rank 0 saves the gathered results."""
    _untied, batch = _join_two_rank_world(rank, port, "qwen3")
    model = tiny_hf("qwen3", tied=True)  # the checkpoint's
    results = {}
    for name, sizes in LAYOUTS.items():
        engine = M.MegatronEngine("actor", path, lora_settings(model, world=2, **sizes))
        set_adapters(engine)
        shard = M.data_parallel_rank(rank, engine.settings.layout)
        rows = 4 // engine.settings.layout.dp
        part = {k: v[shard * rows:(shard + 1) * rows] for k, v in batch.items()}
        metrics = [engine.train(part, dict(train_cfg(batch, mini=rows, micro=1))) for _ in range(STEPS)]
        results[name] = (metrics, engine.compute(part, 1)["values"], engine.full_state_dict(),
                         adapter_values(engine))
    if rank == 0:
        torch.save(results, out)
    dist.destroy_process_group()


def test_two_ranks_make_the_one_rank_lora_update(gloo, checkpoints, tmp_path):
    """Data parallel, tensor parallel with and without sequence parallelism, and pipeline parallel (the tied
    embedding frozen on both ends) give the one-rank adapters, gradient norms and merged weights: the hidden
    activation's sums over the tensor-parallel ranks, and the gradient sums of the adapters fed one sequence shard,
    are all in place."""
    import torch.multiprocessing as mp

    path, model = checkpoints["qwen3"]
    batch = rl_batch(model.config.vocab_size)
    batch["old_logprobs"] = torch.full((4, 4), -3.6)
    one = lora_engine(path, model)
    one_metrics = [one.train(batch, train_cfg(batch, micro=1)) for _ in range(STEPS)]
    one_logprobs, one_state = one.compute(batch, 1)["values"], one.full_state_dict()
    one_adapters = adapter_values(one)
    out = str(tmp_path / "two.pt")
    mp.spawn(_two_rank_worker, args=(_port(), path, out), nprocs=2, join=True)
    results = torch.load(out, weights_only=False)
    assert set(results) == set(LAYOUTS)
    for name, (metrics, logprobs, state, adapters) in results.items():
        # Rank 0's adapters against the one-rank ones: A whole or its first columns, B whole or its first rows
        # (but fc1's, whose rank-0 rows are the first half of its gate rows and of its up rows).
        for key, (a, b, column) in adapters.items():
            want_a, want_b, _ = one_adapters[key]
            pairs = [(a, want_a[:, :a.shape[1]])]
            if not key[1].endswith("linear_fc1"):
                pairs.append((b, want_b[:b.shape[0]]))
            for got, want in pairs:
                # Adam moves a weight by about lr (1e-2) whatever its gradient's size: a gradient summed in another
                # order may flip a near-zero one's sign, a wrong one flips many.
                assert float(((got - want).abs() > 1e-3).float().mean()) < 0.02, (name, key)
        for step, (got, want) in enumerate(zip(metrics, one_metrics)):
            assert got["grad_norm"] == pytest.approx(want["grad_norm"], rel=1e-4), (name, step)
        assert set(state) == set(one_state), name
        assert max(float((state[k] - one_state[k]).abs().max()) for k in one_state) < 1e-4, name
        rows = logprobs.shape[0]
        assert (logprobs - one_logprobs[:rows]).abs().max() < 1e-4, name


@pytest.mark.parametrize("lora,message", [
    (dataclasses.replace(LORA, dropout=0.1), "no dropout"),
    (dataclasses.replace(LORA, target_modules=("q_proj", "v_proj")), "by name"),
    (dataclasses.replace(LORA, exclude_modules=("linear_fc2",)), "excludes modules"),
    (dataclasses.replace(LORA, init="gaussian"), "kaiming"),
])
def test_settings_the_adapters_do_not_train_are_refused_before_building(lora, message):
    model = tiny_hf("qwen2")
    with pytest.raises(M.MegatronConfigError, match=message):
        lora_settings(model, lora=lora)


def test_experts_split_over_tensor_parallel_ranks_take_no_adapters():
    # megatron-core's expert tensor parallel size follows the tensor parallel size when left out
    with pytest.raises(M.MegatronConfigError, match="expert tensor parallel size of 2"):
        lora_settings(tiny_hf("qwen3_moe"), world=2, tp=2)


def hf_moe_from(state: dict, like):
    """A transformers MoE model holding `state` (per-expert names, as engines and checkpoints have them)."""
    from rlcfg.runtime.backends.expert_names import stacked_target

    model = type(like)(like.config)
    own = model.state_dict()
    with torch.no_grad():
        for name, tensor in state.items():
            target = stacked_target(own, name)
            (own[name] if target is None else target).copy_(tensor)
    return model.eval()


def expert_adapters(engine) -> list[tuple]:
    """(A, B) of each shared expert adapter this rank holds, by module name."""
    return {name: (module.linear_fc1_lora_a.detach().clone(), module.linear_fc2_lora_a.detach().clone())
            for c in engine.chunks for name, module in M._unwrap(c).named_modules() if hasattr(module, "local_experts")}


def test_the_experts_of_a_rank_share_one_adapter_pair_that_merges_into_each(gloo, checkpoints, tmp_path):
    path, model = checkpoints["qwen3_moe"]
    engine = lora_engine(path, model)
    batch = rl_batch(model.config.vocab_size)
    before = engine.compute(batch, 2)["values"]
    assert (before - hf_logprobs(model, batch)).abs().max() < 1e-4
    trained = {n.rpartition(".")[2] for c in engine.chunks for n, p in c.named_parameters() if p.requires_grad}
    # attention's adapters, and one pair per expert layer for all 4 experts
    assert trained == {ADAPTER_A, ADAPTER_B, f"linear_fc1_{ADAPTER_A}", f"linear_fc1_{ADAPTER_B}",
                       f"linear_fc2_{ADAPTER_A}", f"linear_fc2_{ADAPTER_B}"}
    after, merged = two_steps(engine, batch, before)
    base = hf_state(model)
    assert set(merged) == set(base)
    experts = [k for k in base if ".experts." in k]
    assert experts and all(not torch.equal(merged[k], base[k]) for k in experts)
    assert all(torch.equal(merged[k], base[k]) for k in base if ".gate." in k)  # the router has none
    assert (hf_logprobs(hf_moe_from(merged, model), batch) - after).abs().max() < 1e-4
    engine.save(str(tmp_path / "ckpt"))
    again = lora_engine(path, model)
    again.load(str(tmp_path / "ckpt"))
    assert all(torch.equal(merged[k], v) for k, v in again.full_state_dict().items())


def _expert_worker(rank: int, port: int, path: str, out: str) -> None:
    """Rank `rank` of a two-process gloo world: adapters on the tiny MoE model with half its experts on each rank
    (ep=2, and beside tensor parallelism, tp=2 ep=2 etp=1), two PPO steps, the gathered merged weights, a checkpoint
    saved and loaded back. Rank 0 saves the results."""
    model, batch = _join_two_rank_world(rank, port, "qwen3_moe")
    results = {}
    for name, tp in (("ep2", 1), ("tp2ep2", 2)):
        settings = lora_settings(model, world=2, tp=tp, ep=2, etp=1)
        engine = M.MegatronEngine("actor", path, settings)
        shard = M.data_parallel_rank(rank, engine.settings.layout)
        rows = 4 // engine.settings.layout.dp
        part = {k: v[shard * rows:(shard + 1) * rows] for k, v in batch.items()}
        for _ in range(2):
            engine.train(part, dict(train_cfg(batch, mini=rows, micro=1)))
        logprobs, state = engine.compute(part, 1)["values"], engine.full_state_dict()
        adapters = [None, None]
        dist.all_gather_object(adapters, expert_adapters(engine))
        engine.save(os.path.join(os.path.dirname(out), name))
        again = M.MegatronEngine("actor", path, settings)
        again.load(os.path.join(os.path.dirname(out), name))
        results[name] = (part, logprobs, state, again.full_state_dict(), adapters)
    if rank == 0:
        torch.save(results, out)
    dist.destroy_process_group()


def test_each_expert_parallel_ranks_experts_share_their_own_adapter_pair(gloo, checkpoints, tmp_path):
    """With the experts split over two ranks, each rank's two experts share a pair of their own (the model is not
    the one-rank one, as in Megatron-Bridge); the merged weights give each expert its rank's pair, so a Hugging Face
    model built from them computes what the engine computes, and the checkpoint brings every pair back."""
    import torch.multiprocessing as mp

    path, model = checkpoints["qwen3_moe"]
    out = str(tmp_path / "experts.pt")
    mp.spawn(_expert_worker, args=(_port(), path, out), nprocs=2, join=True)
    results = torch.load(out, weights_only=False)
    for name, (part, logprobs, state, reloaded, adapters) in results.items():
        assert (hf_logprobs(hf_moe_from(state, model), part) - logprobs).abs().max() < 1e-4, name
        assert all(torch.equal(state[k], reloaded[k]) for k in state), name
        ranks = [dict(a) for a in adapters]
        assert set(ranks[0]) == set(ranks[1]) and all(
            not torch.equal(ranks[0][k][0], ranks[1][k][0]) for k in ranks[0]), name


def test_a_frozen_role_gets_no_adapters():
    role = dataclasses.replace(_role(1), lora=LORA, optimizer=None)
    assert M.lower_role(role, spec_of(tiny_hf("qwen2")), 1).lora is None
