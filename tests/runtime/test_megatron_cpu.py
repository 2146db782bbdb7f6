"""MegatronEngine end to end on CPU, through megatron-core's real forward-backward schedule, DDP, optimizer and
dist_checkpointing, with megatron_cpu's shim standing in for CUDA and gloo for NCCL: log-probs against the
Hugging Face model, a PPO step, the weights gathered back into transformers, an exact checkpoint round trip, and
two ranks (data and tensor parallel) against one."""

from __future__ import annotations

import dataclasses
import math
import os
import socket
import warnings

import pytest

pytest.importorskip("megatron.core")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import torch.distributed as dist  # noqa: E402

from rlcfg.ir import ActorLossSpec  # noqa: E402
from rlcfg.runtime.backends import MEGATRON_ON_CPU_ENV  # noqa: E402
from rlcfg.runtime.backends import megatron as M  # noqa: E402
from rlcfg.runtime.backends import megatron_cpu as C  # noqa: E402
from tests.runtime.test_megatron import _role, hf_state, spec_of, tiny_hf  # noqa: E402

warnings.filterwarnings("ignore", message=".*Transformer Engine and Apex.*")
warnings.filterwarnings("ignore", message=".*Apex is not installed.*")

PROMPT = 6


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def gloo():
    """A one-rank gloo world; each engine builds megatron-core's parallel state on it afresh."""
    created = False
    if not dist.is_initialized():
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_port()}", rank=0, world_size=1)
        created = True
    yield
    from megatron.core import parallel_state

    parallel_state.destroy_model_parallel()
    if created:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """Tiny Hugging Face checkpoints on disk, as the engine loads them."""
    root = tmp_path_factory.mktemp("hf")
    models = {"qwen2": tiny_hf("qwen2"), "qwen3": tiny_hf("qwen3", tied=True), "qwen3_moe": tiny_hf("qwen3_moe"),
              "deepseek_v3": tiny_hf("deepseek_v3")}
    for family, model in models.items():
        model.save_pretrained(root / family)
    return {family: (str(root / family), model) for family, model in models.items()}


def settings_for(model, world: int = 1, tp: int = 1, dtype: str = "float32", lr: float = 1e-3, ep: int = 1,
                 etp: int | None = None, expert_bias: float | str = 0.0, pp: int = 1, first: int | None = None):
    role = _role(tp)  # the ROLL template's actor: AdamW, linear decay, clipping at 1.0, recomputation on
    role = dataclasses.replace(role, parallelism=dataclasses.replace(role.parallelism, ep=ep, etp=etp, pp=pp,
                                                                     pp_first_layers=first),
                               expert_bias=expert_bias)
    role = dataclasses.replace(role, model=dataclasses.replace(role.model, dtype=dtype),
                               optimizer=dataclasses.replace(role.optimizer, lr=lr, warmup_steps=0, decay_steps=None))
    return M.lower_role(role, spec_of(model), world, total_optimizer_steps=10)  # a decay over these 10 steps


def engine_for(path: str, model, **kw) -> M.MegatronEngine:
    with C.cuda_as_cpu():
        return M.MegatronEngine("actor", path, settings_for(model, **kw))


def rl_batch(vocab: int, n: int = 4, seed: int = 7) -> dict:
    """Left-padded prompts of PROMPT columns, 4 response columns (one response ends early), advantages of
    both signs."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab, (n, PROMPT + 4), generator=g)
    attn = torch.ones_like(ids)
    attn[0, :3] = 0
    attn[2 % n, :1] = 0
    attn[1 % n, -1] = 0
    ids = ids * attn
    advantages = torch.tensor([1.0, -1.0, 0.5, -0.5] * n)[:n, None].expand(n, 4).clone()
    return {"input_ids": ids, "attention_mask": attn, "response_mask": attn[:, PROMPT:].float(),
            "advantages": advantages}


def train_cfg(batch: dict, mini: int | None = None, micro: int = 2) -> dict:
    n = batch["response_mask"].shape[0]
    return {"ppo_epochs": 1, "mini_batch": mini or n, "micro_batch": micro,
            "denominators": [(float(batch["response_mask"].sum()), float(n))], "loss": ActorLossSpec()}


def hf_logprobs(model, batch: dict) -> torch.Tensor:
    ids, attn = batch["input_ids"], batch["attention_mask"]
    pos = (attn.cumsum(dim=1) - 1).clamp(min=0)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=attn, position_ids=pos).logits[:, PROMPT - 1:-1]
    lp = torch.log_softmax(logits.float(), -1).gather(-1, ids[:, PROMPT:, None]).squeeze(-1)
    return lp * batch["response_mask"]


def hf_model_from(state: dict, like):
    model = type(like)(like.config)
    model.load_state_dict(state, strict=not like.config.tie_word_embeddings)
    if like.config.tie_word_embeddings:  # the gathered weights hold the embedding once, as safetensors does
        assert "lm_head.weight" not in state
        model.tie_weights()
    return model.eval()


# ---- the shim ---------------------------------------------------------------------------------------------------

@pytest.mark.skipif(torch.cuda.is_available(), reason="checks what happens on a machine without CUDA")
def test_shim_is_scoped_and_the_engine_refuses_cpu_without_it(monkeypatch, checkpoints):
    original = torch.cuda.current_device
    with C.cuda_as_cpu():
        assert C.active()
        assert torch.zeros(2, device="cuda").device.type == "cpu"
        assert torch.ones(1).to(device=torch.device("cuda", 0)).device.type == "cpu"
        assert torch.ones(1, dtype=torch.float32).type() == "torch.cuda.FloatTensor"
        with C.cuda_as_cpu():  # re-entrant: still one rewrite
            assert torch.ones(1).type() == "torch.cuda.FloatTensor"
    assert not C.active() and torch.cuda.current_device is original
    with pytest.raises((AssertionError, RuntimeError)):
        torch.zeros(2, device="cuda")
    monkeypatch.delenv(MEGATRON_ON_CPU_ENV, raising=False)
    path, model = checkpoints["qwen2"]
    with pytest.raises(M.MegatronConfigError, match="needs a GPU"):
        M.MegatronEngine("actor", path, settings_for(model))


# ---- one rank -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("family", ["qwen2", "qwen3"])
def test_compute_gives_the_hf_logprobs_on_left_padded_batches(gloo, checkpoints, family):
    path, model = checkpoints[family]
    engine = engine_for(path, model)
    batch = rl_batch(model.config.vocab_size, n=3)
    out = engine.compute(batch, 2)["values"]
    assert out.shape == (3, 4)
    assert (out - hf_logprobs(model, batch)).abs().max() < 1e-5
    assert (out[batch["response_mask"] == 0] == 0).all()


def test_a_ppo_step_through_the_schedule_moves_the_policy_towards_the_advantage(gloo, checkpoints):
    path, model = checkpoints["qwen2"]
    engine = engine_for(path, model)
    batch = rl_batch(model.config.vocab_size)
    before_weights = engine.full_state_dict()
    batch["old_logprobs"] = before = engine.compute(batch, 2)["values"]
    first = engine.train(batch, train_cfg(batch))
    for key in ("pg_loss", "grad_norm", "lr", "clip_frac", "approx_kl"):
        assert math.isfinite(first[key]), key
    assert first["grad_norm"] > 0 and first["lr"] == pytest.approx(1e-3 * 0.9)  # linear decay over 10 steps
    # On-policy, ratio 1: the loss is minus the token-mean advantage.
    mask = batch["response_mask"]
    assert first["pg_loss"] == pytest.approx(-float((batch["advantages"] * mask).sum() / mask.sum()), abs=1e-6)
    after_weights = engine.full_state_dict()
    assert any(not torch.equal(before_weights[k], after_weights[k]) for k in before_weights)
    after = engine.compute(batch, 2)["values"]
    moved = ((after - before) * mask).sum(dim=1)
    assert (moved[batch["advantages"][:, 0] > 0] > 0).all() and (moved[batch["advantages"][:, 0] < 0] < 0).all()
    second = engine.train(batch, train_cfg(batch))
    assert second["pg_loss"] < first["pg_loss"]


def test_gathered_weights_load_into_transformers_and_give_the_engines_logprobs(gloo, checkpoints):
    path, model = checkpoints["qwen2"]
    engine = engine_for(path, model, lr=1e-2)
    batch = rl_batch(model.config.vocab_size)
    batch["old_logprobs"] = engine.compute(batch, 2)["values"]
    engine.train(batch, train_cfg(batch))
    state = engine.full_state_dict()
    assert set(state) == set(hf_state(model))
    trained = hf_model_from(state, model)
    layer, original = trained.model.layers[0].self_attn, model.model.layers[0].self_attn
    assert not torch.equal(layer.q_proj.weight, original.q_proj.weight)
    assert (engine.compute(batch, 2)["values"] - hf_logprobs(trained, batch)).abs().max() < 1e-5


def test_gathered_tied_weights_round_trip(gloo, checkpoints):
    path, model = checkpoints["qwen3"]
    engine = engine_for(path, model)
    state = engine.full_state_dict()
    batch = rl_batch(model.config.vocab_size)
    assert (engine.compute(batch, 2)["values"] - hf_logprobs(hf_model_from(state, model), batch)).abs().max() < 1e-5


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_save_and_load_restore_weights_and_optimizer_exactly(gloo, checkpoints, tmp_path, dtype):
    path, model = checkpoints["qwen2"]
    a = engine_for(path, model, dtype=dtype, lr=1e-2)
    batch = rl_batch(model.config.vocab_size)
    batch["old_logprobs"] = a.compute(batch, 2)["values"]
    a.train(batch, train_cfg(batch))
    a.save(str(tmp_path / "ckpt"))
    b = engine_for(path, model, dtype=dtype, lr=1e-2)
    b.load(str(tmp_path / "ckpt"))
    sa, sb = a.full_state_dict(), b.full_state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    # The next step depends on Adam's moments and the scheduler's position: identical only if both came back.
    ma, mb = a.train(batch, train_cfg(batch)), b.train(batch, train_cfg(batch))
    untimed = [{k: v for k, v in m.items() if not k.endswith("_s")} for m in (ma, mb)]
    assert untimed[0] == untimed[1]
    sa, sb = a.full_state_dict(), b.full_state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)


# ---- two ranks ----------------------------------------------------------------------------------------------------

def _join_two_rank_world(rank: int, port: int, family: str) -> tuple:
    """This process as rank `rank` of a two-process gloo world; the tiny model of `family` and its RL batch."""
    os.environ[MEGATRON_ON_CPU_ENV] = "1"  # the engine's own opt-in, as `rlcfg run` would use it
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    model = tiny_hf(family)
    batch = rl_batch(model.config.vocab_size)
    batch["old_logprobs"] = torch.full((4, 4), -3.6)
    return model, batch


def _two_rank_worker(rank: int, port: int, path: str, out: str) -> None:
    """Rank `rank` of a two-process gloo world: one PPO step on dp=2 (each rank its half of the batch), then on
    tp=2 with sequence parallelism (both ranks the whole batch). Rank 0 saves the gathered results."""
    model, batch = _join_two_rank_world(rank, port, "qwen2")
    results = {}
    for name, tp in (("dp2", 1), ("tp2", 2)):
        engine = M.MegatronEngine("actor", path, settings_for(model, world=2, tp=tp))
        shard = M.data_parallel_rank(rank, engine.settings.layout)
        half = 4 // engine.settings.layout.dp
        part = {k: v[shard * half:(shard + 1) * half] for k, v in batch.items()}
        cfg = dict(train_cfg(batch, mini=half, micro=1))
        logprobs = engine.compute(part, 1)["values"]
        metrics = engine.train(part, cfg)
        results[name] = (logprobs, metrics, engine.full_state_dict())
    if rank == 0:
        torch.save(results, out)
    dist.destroy_process_group()


def test_two_ranks_data_or_tensor_parallel_make_the_one_rank_update(gloo, checkpoints, tmp_path):
    """The dp=2 update on two half batches equals the one-rank update on the whole batch (the `loss × micro-batch
    count × dp` scaling in train() undoes exactly the schedule's and DDP's averaging), and so does tp=2 with
    sequence parallelism (the gradient norm and clipping see every rank's shards)."""
    import torch.multiprocessing as mp

    path, model = checkpoints["qwen2"]
    batch = rl_batch(model.config.vocab_size)
    batch["old_logprobs"] = torch.full((4, 4), -3.6)
    one = engine_for(path, model)
    one_logprobs = one.compute(batch, 1)["values"]
    one_metrics = one.train(batch, train_cfg(batch, micro=1))
    one_state = one.full_state_dict()
    out = str(tmp_path / "two.pt")
    mp.spawn(_two_rank_worker, args=(_port(), path, out), nprocs=2, join=True)
    results = torch.load(out, weights_only=False)
    # Adam's first step moves every weight by about ±lr (1e-3) whatever its gradient's size, so a gradient near
    # zero summed in another order over TP ranks may move by a visibly different fraction of lr; a wrong or
    # missing gradient moves by a whole lr or two.
    tolerance = {"dp2": 1e-5, "tp2": 1e-4}
    for name, (logprobs, metrics, state) in results.items():
        rows = logprobs.shape[0]
        assert (logprobs - one_logprobs[:rows]).abs().max() < 1e-5, name
        assert metrics["grad_norm"] == pytest.approx(one_metrics["grad_norm"], rel=1e-5), name
        assert max(float((state[k] - one_state[k]).abs().max()) for k in one_state) < tolerance[name], name
    # pg_loss is each shard's share of the mini-batch loss: rank 0's share on dp=2, all of it on tp=2.
    assert results["tp2"][1]["pg_loss"] == pytest.approx(one_metrics["pg_loss"], abs=1e-6)


# DeepSeek-V3's routing corrections move after each step here (SkyRL's Megatron setup moves them by 1e-3).
BIAS_RATE = {"qwen3_moe": 0.0, "deepseek_v3": 1e-3}


def _expert_parallel_worker(rank: int, port: int, path: str, out: str, family: str) -> None:
    """Rank `rank` of a two-process gloo world: one PPO step of the tiny MoE model with its experts split over
    two ranks, with data parallelism (ep=2) and with tensor parallelism beside it (tp=2, ep=2, experts whole on
    each rank: etp=1), and with every expert on both ranks, each holding half of each (tp=2, expert tp following
    it), DeepSeek-V3 also over two uneven pipeline stages; then a checkpoint saved and loaded back. Rank 0 saves
    the gathered results."""
    model, batch = _join_two_rank_world(rank, port, family)
    results = {}
    layouts = [("ep2", 1, 2, 1, 1, None), ("tp2ep2", 2, 2, 1, 1, None), ("tp2", 2, 1, None, 1, None)]
    if family == "deepseek_v3":  # its dense first layer alone on the first stage, its three expert layers after
        layouts.append(("pp2first1", 1, 1, None, 2, 1))
    for name, tp, ep, etp, pp, first in layouts:
        settings = settings_for(model, world=2, tp=tp, ep=ep, etp=etp, expert_bias=BIAS_RATE[family], pp=pp,
                                first=first)
        engine = M.MegatronEngine("actor", path, settings)
        shard = M.data_parallel_rank(rank, engine.settings.layout)
        rows = 4 // engine.settings.layout.dp
        part = {k: v[shard * rows:(shard + 1) * rows] for k, v in batch.items()}
        logprobs = engine.compute(part, 1)["values"]
        metrics = engine.train(part, dict(train_cfg(batch, mini=rows, micro=1)))
        state = engine.full_state_dict()
        engine.save(os.path.join(os.path.dirname(out), name))
        again = M.MegatronEngine("actor", path, settings)
        again.load(os.path.join(os.path.dirname(out), name))
        results[name] = (logprobs, metrics, state, again.full_state_dict())
    if rank == 0:
        torch.save(results, out)
    dist.destroy_process_group()


@pytest.mark.parametrize("family", ["qwen3_moe", "deepseek_v3"])
def test_experts_split_over_two_ranks_make_the_one_rank_update(gloo, checkpoints, tmp_path, family):
    """A mixture-of-experts model with each rank holding half the experts (tokens sent to their experts' rank and
    back by megatron-core's all-to-all dispatcher) computes the one-rank log-probs and makes the one-rank update,
    data-parallel or beside tensor parallelism, as does each expert split over tensor-parallel ranks; the experts
    gather back under their global numbers, and megatron-core's distributed checkpoint brings them back exactly.
    DeepSeek-V3's multi-latent attention splits its heads over the TP ranks, and its routing corrections move by
    the token counts of the whole batch, whichever ranks routed them."""
    import torch.multiprocessing as mp

    path, model = checkpoints[family]
    batch = rl_batch(model.config.vocab_size)
    batch["old_logprobs"] = torch.full((4, 4), -3.6)
    one = engine_for(path, model, expert_bias=BIAS_RATE[family])
    one_logprobs = one.compute(batch, 1)["values"]
    assert (one_logprobs - hf_logprobs(model, batch)).abs().max() < 1e-4
    one_metrics = one.train(batch, train_cfg(batch, micro=1))
    one_state = one.full_state_dict()
    assert set(one_state) == set(hf_state(model))
    if BIAS_RATE[family]:
        bias = "model.layers.1.mlp.gate.e_score_correction_bias"
        moved = one_state[bias] - hf_state(model)[bias]
        assert one_state[bias].dtype == torch.float32
        assert torch.allclose(moved.abs(), torch.full_like(moved, BIAS_RATE[family]))
    out = str(tmp_path / "experts.pt")
    mp.spawn(_expert_parallel_worker, args=(_port(), path, out, family), nprocs=2, join=True)
    results = torch.load(out, weights_only=False)
    for name, (logprobs, metrics, state, reloaded) in results.items():
        rows = logprobs.shape[0]
        assert (logprobs - one_logprobs[:rows]).abs().max() < 1e-5, name
        assert metrics["grad_norm"] == pytest.approx(one_metrics["grad_norm"], rel=1e-5), name
        assert set(state) == set(one_state), name
        # As above: Adam's first step moves a weight of near-zero gradient by a visible fraction of lr (1e-3) when
        # the gradient is summed in another order; a wrong or missing one moves it by a whole lr or more.
        assert max(float((state[k] - one_state[k]).abs().max()) for k in one_state) < 3e-4, name
        assert all(torch.equal(state[k], reloaded[k]) for k in state), name


@pytest.mark.parametrize("family,dtype", [("qwen2", "float32"), ("qwen2", "bfloat16"), ("qwen3_moe", "bfloat16")])
def test_offload_frees_every_storage_and_onload_resumes_training_exactly(gloo, checkpoints, family, dtype):
    """Colocated with a rollout engine, the trainer gives up its memory between updates: parameters, DDP's flat
    buffers, the optimizer's moments and main weights. Views into those buffers must come back whole."""
    path, model = checkpoints[family]
    batch = rl_batch(model.config.vocab_size)
    with C.cuda_as_cpu():
        plain = M.MegatronEngine("actor", path, settings_for(model, dtype=dtype, lr=1e-2))
        parked = M.MegatronEngine("actor", path, settings_for(model, dtype=dtype, lr=1e-2),
                                  offload_params=True, offload_optimizer=True)
    batch["old_logprobs"] = plain.compute(batch, 2)["values"]
    for engine in (plain, parked):
        engine.train(batch, train_cfg(batch))
    parked.offload()
    params = [p for c in parked.chunks for p in c.parameters()]
    assert all(p.untyped_storage().nbytes() == 0 for p in params)
    inner = parked.optimizer.chained_optimizers[0].optimizer if hasattr(parked.optimizer, "chained_optimizers") \
        else parked.optimizer.optimizer
    moments = [t for state in inner.state.values() for k, t in state.items() if k in ("exp_avg", "exp_avg_sq")]
    assert moments and all(t.untyped_storage().nbytes() == 0 for t in moments)
    parked.onload()
    second = [engine.train(batch, train_cfg(batch)) for engine in (plain, parked)]
    assert second[0]["pg_loss"] == second[1]["pg_loss"] and second[0]["grad_norm"] == second[1]["grad_norm"]
    a, b = plain.full_state_dict(), parked.full_state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_pipeline_micro_batches_all_have_the_first_ones_shape(gloo, checkpoints):
    """A pipeline sizes its send/receive buffers from the first micro-batch: with pp > 1 a short last one (a
    forward micro-batch that does not divide the shard, or rows trimmed by dynamic sampling) is filled with
    empty rows that carry no response tokens; `real_rows` marks the data."""
    path, model = checkpoints["qwen2"]
    engine = engine_for(path, model)
    batch = rl_batch(model.config.vocab_size, n=5)
    layout = engine.settings.layout
    engine.settings = dataclasses.replace(engine.settings, layout=dataclasses.replace(layout, pp=2))
    mbs, _width, _lo = engine._micro_batches(batch, 2, PROMPT)
    assert [mb["real_rows"] for mb in mbs] == [2, 2, 1]
    assert {mb["tokens"].shape for mb in mbs} == {mbs[0]["tokens"].shape}
    assert {mb["response_mask"].shape[0] for mb in mbs} == {2}
    last = mbs[-1]
    assert last["response_mask"][1].sum() == 0 and last["advantages"][1].abs().sum() == 0
    assert torch.equal(last["input_ids"][0], batch["input_ids"][4])
    engine.settings = dataclasses.replace(engine.settings, layout=layout)
    assert [mb["real_rows"] for mb in engine._micro_batches(batch, 2, PROMPT)[0]] == [2, 2, 1]
    assert engine._micro_batches(batch, 2, PROMPT)[0][-1]["tokens"].shape[0] == 1  # no pipeline: no filling
