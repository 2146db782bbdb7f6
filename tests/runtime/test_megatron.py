"""The megatron backend against megatron-core itself: every Megatron template lowered to megatron-core's own
config objects, megatron-core's checks and rlcfg's extra ones, HF ↔ Megatron weights for tiny Qwen2, Qwen3 and
Llama models (exact round trips under TP/PP sharding, and the same logits from megatron-core's GPTModel as from
the Hugging Face model), and the RL loss on megatron-core's logits. The engine's update through
get_forward_backward_func needs a GPU (megatron-core 0.16's schedules allocate on CUDA) and is skipped without
one."""

from __future__ import annotations

import dataclasses
import socket
import warnings

import pytest

pytest.importorskip("megatron.core")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import torch.distributed as dist  # noqa: E402

from rlcfg import ir  # noqa: E402
from rlcfg.frontend import check_file  # noqa: E402
from rlcfg.lower import lower  # noqa: E402
from rlcfg.plan import build_plan  # noqa: E402
from rlcfg.runtime import algorithms as A  # noqa: E402
from rlcfg.runtime.backends import megatron as M  # noqa: E402
from rlcfg.runtime.backends import megatron_cpu as C  # noqa: E402
from rlcfg.runtime.backends import megatron_weights as W  # noqa: E402
from rlcfg.runtime.backends.expert_names import per_expert  # noqa: E402
from tests.helpers import TEMPLATES  # noqa: E402

warnings.filterwarnings("ignore", message=".*Transformer Engine and Apex.*")

MEGATRON_TEMPLATES = sorted(TEMPLATES.glob("*megatron*.yaml"))
NO_GPU = "megatron-core 0.16's forward-backward schedule, DDP buffers and optimizer allocate on CUDA"


# ---- fixtures ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def world():
    """A one-rank gloo world and megatron-core's parallel state on it."""
    created = False
    if not dist.is_initialized():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
        created = True
    layout = M.MegatronLayout(tp=1, pp=1, cp=1, ep=1, etp=None, vpp=None, sequence_parallel=False, world=1)
    M.init_parallel_state(layout)
    yield layout
    from megatron.core import parallel_state

    parallel_state.destroy_model_parallel()
    if created:
        dist.destroy_process_group()


@pytest.fixture
def cpu_rotary(monkeypatch):
    """megatron-core's rotary embedding moves its frequencies to `torch.cuda.current_device()` unconditionally;
    answering "cpu" there is the only change needed for GPTModel's forward to run on a CPU."""
    monkeypatch.setattr(torch.cuda, "current_device", lambda: torch.device("cpu"))


def tiny_hf(family: str, tied: bool = False, vocab: int = 40, kv_heads: int = 2, **over):
    torch.manual_seed({"qwen2": 1, "qwen3": 2, "llama": 3, "qwen3_moe": 4, "deepseek_v3": 5}[family])
    common = dict(vocab_size=vocab, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
                  num_key_value_heads=kv_heads, max_position_embeddings=64, rope_theta=10000.0,
                  tie_word_embeddings=tied)
    if family == "qwen2":
        model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**common))
    elif family == "qwen3":
        model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(head_dim=32, **common))
    elif family == "qwen3_moe":  # 4 experts, 2 per token, their weights renormalised (Qwen3-30B-A3B's routing)
        model = transformers.Qwen3MoeForCausalLM(transformers.Qwen3MoeConfig(
            head_dim=32, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=48, norm_topk_prob=True,
            **common))
    elif family == "deepseek_v3":
        # Moonlight's shape in small: multi-latent attention without a query bottleneck, a dense first layer, then
        # 4 routed experts (2 per token, in 2 groups of which the best 1 is open) and a shared one; sigmoid scores
        # with a correction, the chosen ones renormalised and scaled.
        common.pop("num_key_value_heads")
        figures = dict(kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, q_lora_rank=None,
                       n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=48,
                       first_k_dense_replace=1, n_group=2, topk_group=1, routed_scaling_factor=2.5,
                       norm_topk_prob=True, rope_scaling=None, num_nextn_predict_layers=0)
        model = transformers.DeepseekV3ForCausalLM(transformers.DeepseekV3Config(**{**common, **figures, **over}))
    else:
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**common))
    with torch.no_grad():  # norms of 1 and biases of 0 would hide a swapped or misplaced tensor
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(torch.randn_like(b) * 0.1)
    return model.eval()


def spec_of(model) -> W.ModelSpec:
    return W.ModelSpec.from_hf_config(model.config.to_dict(), "tiny")


def hf_state(model) -> dict:
    """The model's weights under its checkpoint's names (each expert's own matrices)."""
    state = per_expert(model.state_dict())
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    return state


def assert_same(a: dict, b: dict) -> None:
    assert set(a) == set(b)
    for name in a:
        assert a[name].shape == b[name].shape, name
        assert torch.equal(a[name], b[name]), name


def template_plan(path):
    result = check_file(str(path), env={})
    assert result.config is not None, [d.message for d in result.diagnostics]
    exp = lower(result.dialect, result.config)
    plan, _ = build_plan(exp)
    return exp, plan


# ---- lowering to megatron-core's own config objects -------------------------------------------------------------

@pytest.mark.parametrize("path", MEGATRON_TEMPLATES, ids=lambda p: p.name)
def test_every_megatron_template_builds_megatron_cores_configs(path):
    exp, plan = template_plan(path)
    lowered = M.lower_plan(plan)
    megatron_roles = [r for r in exp.roles if r.backend == "megatron"]
    assert megatron_roles and set(lowered) == {r.name for r in megatron_roles}
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.optimizer import OptimizerConfig
    from megatron.core.transformer import TransformerConfig

    for role in megatron_roles:
        settings = lowered[role.name]
        tf, opt, ddp = M.build_configs(settings)
        assert isinstance(tf, TransformerConfig)
        par = role.parallelism
        assert (tf.tensor_model_parallel_size, tf.pipeline_model_parallel_size, tf.context_parallel_size) == \
            (par.tp, par.pp, par.cp)
        assert tf.sequence_parallel == par.sequence_parallel
        assert tf.bf16 and tf.params_dtype == torch.bfloat16
        assert tf.pipeline_dtype == (torch.bfloat16 if par.pp > 1 else None)
        assert tf.recompute_granularity == ("full" if role.gradient_checkpointing else None)
        assert tf.num_layers == settings.model.layers and tf.num_query_groups == settings.model.kv_heads
        assert settings.gpt["vocab_size"] % (128 * par.tp) == 0 and settings.gpt["vocab_size"] >= settings.model.vocab
        assert settings.layout.dp == plan.placement(role.name).dp
        if role.trains:
            assert isinstance(opt, OptimizerConfig) and isinstance(ddp, DistributedDataParallelConfig)
            assert opt.lr == role.optimizer.lr and opt.weight_decay == role.optimizer.weight_decay
            assert (opt.adam_beta1, opt.adam_beta2) == role.optimizer.betas
            assert opt.clip_grad == role.optimizer.grad_clip and opt.decoupled_weight_decay  # adamw
            assert opt.use_distributed_optimizer == ddp.use_distributed_optimizer == (settings.layout.dp > 1)
            assert settings.scheduler["lr_decay_style"] == role.optimizer.scheduler
            assert settings.scheduler["lr_warmup_steps"] == role.optimizer.warmup_steps
        else:
            assert opt is None and ddp is None


def test_roll_template_figures():
    exp, plan = template_plan(TEMPLATES / "roll-megatron-vllm.yaml")
    actor = M.lower_plan(plan)["actor"]
    # Qwen2.5-7B: 28 layers, 28 heads in 4 KV groups, QKV bias, untied, vocab 152064 (already a multiple of 256).
    assert (actor.model.layers, actor.model.heads, actor.model.kv_heads, actor.model.qkv_bias) == (28, 28, 4, True)
    assert actor.gpt["vocab_size"] == 152064 and not actor.gpt["share_embeddings_and_output_weights"]
    assert actor.micro_batch_size == 2 and actor.layout.dp == 4
    # 500 steps × 1 optimizer step, warm-up 20, linear decay.
    assert actor.scheduler["lr_decay_steps"] == 500 and actor.scheduler["init_lr"] == 0.0


def test_megatron_cores_own_check_fires_for_an_impossible_layout():
    exp, plan = template_plan(TEMPLATES / "chatlearn-megatron-vllm.yaml")
    role = exp.role("actor")
    spec = M.lower_plan(plan)["actor"].model  # Qwen2.5-32B: 40 heads, 8 KV groups
    bad = dataclasses.replace(role, parallelism=dataclasses.replace(role.parallelism, tp=3))
    # rlcfg's converter check would stop tp 3 first (8 groups); check megatron-core's own message directly.
    settings = M.lower_role(dataclasses.replace(bad, parallelism=dataclasses.replace(bad.parallelism, tp=1)), spec, 16)
    settings = dataclasses.replace(settings, transformer=dict(settings.transformer, tensor_model_parallel_size=3))
    with pytest.raises(M.MegatronConfigError, match=r"num_attention_heads \(40\) must be a multiple of "
                                                    r"tensor_model_parallel_size \(3\)"):
        M.build_configs(settings)
    no_tp = dataclasses.replace(role, parallelism=dataclasses.replace(role.parallelism, tp=1, sequence_parallel=True))
    with pytest.raises(M.MegatronConfigError, match="sequence parallelism without tensor parallelism"):
        M.build_configs(M.lower_role(no_tp, spec, 16))


def test_megatron_cores_parallel_state_rejects_a_layout_bigger_than_the_world(world):
    from megatron.core import parallel_state

    bad = dataclasses.replace(world, tp=2)
    try:
        with pytest.raises(RuntimeError, match="not divisible"):
            parallel_state.initialize_model_parallel(**bad.parallel_state_kwargs())
    finally:
        M.init_parallel_state(world)


def test_parallel_state_follows_the_layout(world):
    from megatron.core import parallel_state as ps

    assert ps.get_tensor_model_parallel_world_size() == 1 and ps.get_pipeline_model_parallel_world_size() == 1
    assert ps.get_data_parallel_world_size() == 1
    with pytest.raises(M.MegatronConfigError, match="layout is for 4 ranks but torch.distributed has 1"):
        M.init_parallel_state(dataclasses.replace(world, world=4, tp=2, sequence_parallel=True))


def test_data_parallel_rank_matches_the_plans_rank_grid():
    exp, plan = template_plan(TEMPLATES / "chatlearn-megatron-vllm.yaml")
    settings = M.lower_plan(plan)["actor"]
    for slot in plan.placement("actor").ranks:
        assert M.data_parallel_rank(slot.rank, settings.layout) == dict(slot.coords)["dp"]


# ---- rlcfg's own checks -------------------------------------------------------------------------------------------

def _config(**over):
    base = dict(model_type="qwen2", num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                num_key_value_heads=2, intermediate_size=96, vocab_size=40)
    base.update(over)
    return base


def _role(tp=1):
    """The ROLL template's actor, on `tp` ranks; DeepSeek-V3's routing correction held fixed as transformers does."""
    exp, _ = template_plan(TEMPLATES / "roll-megatron-vllm.yaml")
    role = exp.role("actor")
    return dataclasses.replace(role, parallelism=dataclasses.replace(role.parallelism, tp=tp, sequence_parallel=tp > 1),
                               expert_bias=0.0)


def test_heads_that_do_not_divide_hidden_are_refused():
    spec = W.ModelSpec.from_hf_config(_config(hidden_size=66, num_attention_heads=4), "m/config.json")
    with pytest.raises(M.MegatronConfigError, match=r"hidden_size \(66\) is not a multiple of "
                                                    r"num_attention_heads \(4\)"):
        M.lower_role(_role(1), spec, 8)
    # With an explicit head_dim (Qwen3's 1024 hidden, 16 heads of 128) the product need not equal hidden.
    ok = W.ModelSpec.from_hf_config(_config(model_type="qwen3", hidden_size=66, head_dim=32), "m/config.json")
    assert M.lower_role(_role(1), ok, 8).transformer["kv_channels"] == 32


def test_query_groups_that_do_not_divide_heads_are_refused():
    spec = W.ModelSpec.from_hf_config(_config(num_attention_heads=6, hidden_size=96, num_key_value_heads=4), "m")
    with pytest.raises(M.MegatronConfigError, match=r"num_attention_heads \(6\) is not a multiple of "
                                                    r"num_key_value_heads / num_query_groups \(4\)"):
        M.lower_role(_role(1), spec, 8)


def test_kv_groups_must_split_over_tensor_parallel_ranks():
    spec = W.ModelSpec.from_hf_config(_config(num_key_value_heads=2, num_attention_heads=8), "m")
    with pytest.raises(M.MegatronConfigError, match=r"num_query_groups \(2\) is not a multiple of tensor "
                                                    r"parallel size \(4\)"):
        M.lower_role(_role(4), spec, 8)


def test_unsupported_models_name_themselves():
    with pytest.raises(W.ConversionError, match="model_type 'mixtral' is not supported"):
        W.ModelSpec.from_hf_config(_config(model_type="mixtral"), "m")
    with pytest.raises(W.ConversionError, match="rope_scaling type 'yarn'"):
        W.ModelSpec.from_hf_config(_config(rope_scaling={"rope_type": "yarn", "factor": 4.0}), "m")
    llama31 = W.ModelSpec.from_hf_config(_config(model_type="llama", rope_scaling={"rope_type": "llama3",
                                                                                    "factor": 8.0}), "m")
    assert llama31.rope_scaling_factor == 8.0


def test_optimizer_and_precision_lowering():
    spec = W.ModelSpec.from_hf_config(_config(), "m")
    role = _role(1)
    adam = dataclasses.replace(role, optimizer=dataclasses.replace(role.optimizer, name="adam", grad_clip=None),
                               model=dataclasses.replace(role.model, dtype="float16"))
    _tf, opt, _ddp = M.build_configs(M.lower_role(adam, spec, 1))
    assert opt.optimizer == "adam" and not opt.decoupled_weight_decay  # L2, as torch's Adam
    assert opt.clip_grad == 0.0 and opt.fp16 and not opt.bf16 and not opt.use_distributed_optimizer


def test_plan_time_error_names_the_extra(monkeypatch):
    _exp, plan = template_plan(TEMPLATES / "roll-megatron-vllm.yaml")
    assert M.plan_problems(plan) == []
    monkeypatch.setattr(M, "megatron_available", lambda: False)
    (problem,) = M.plan_problems(plan)
    assert "`actor`, `reference`" in problem and "install rlcfg[megatron]" in problem
    with pytest.raises(M.MegatronUnavailable, match=r"install rlcfg\[megatron\]"):
        M.build_configs(M.lower_plan(plan)["actor"])


# ---- weights ------------------------------------------------------------------------------------------------------

FAMILIES = ["qwen2", "qwen3", "llama", "qwen3_moe", "deepseek_v3"]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_hf_megatron_round_trip_is_exact(family, tied):
    model = tiny_hf(family, tied)
    spec = spec_of(model)
    whole = W.hf_to_mcore(hf_state(model), spec, W.padded_vocab(spec.vocab))
    assert ("output_layer.weight" in whole) == (not tied)
    assert (("decoder.layers.0.self_attention.linear_qkv.bias" in whole) == (family == "qwen2"))
    assert (("decoder.layers.0.self_attention.q_layernorm.weight" in whole) == family.startswith("qwen3"))
    assert ("decoder.layers.0.mlp.router.weight" in whole) == (family == "qwen3_moe")
    assert whole["embedding.word_embeddings.weight"].shape == (128, 64)  # padded to 128
    if family == "deepseek_v3":
        assert "decoder.layers.0.mlp.linear_fc1.weight" in whole  # the dense first layer
        assert whole["decoder.layers.1.mlp.router.expert_bias"].shape == (4,)
        assert whole["decoder.layers.1.mlp.shared_experts.linear_fc1.weight"].shape == (2 * 48, 64)
        assert whole["decoder.layers.1.self_attention.linear_kv_down_proj.weight"].shape == (16 + 8, 64)
    else:
        assert whole["decoder.layers.0.self_attention.linear_qkv.weight"].shape == \
            ((spec.heads + 2 * spec.kv_heads) * spec.head_dim, 64)
    assert_same(W.mcore_to_hf(whole, spec), hf_state(model))


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("tp,pp,vpp", [(2, 1, None), (2, 2, None), (1, 2, 2)], ids=["tp2", "tp2pp2", "pp2vpp2"])
def test_sharded_round_trip_is_exact(family, tp, pp, vpp):
    model = tiny_hf(family, tied=family == "qwen3")
    spec = spec_of(model)
    shards, experts = W.shard_layout(hf_state(model), spec, tp, pp, vpp)
    assert set(shards) == {(t, p, v) for t in range(tp) for p in range(pp) for v in range(vpp or 1)}
    assert_same(W.merge(shards, spec, experts=experts or None), hf_state(model))


@pytest.mark.parametrize("pp,first,last", [(2, 1, None), (2, 1, 3), (3, 1, 1), (3, None, 2)])
def test_uneven_pipeline_stages_hold_the_layers_megatron_core_builds_there(pp, first, last):
    """ChatLearn's decoder_first/last_pipeline_num_layers (Moonlight's 27 layers as 14 + 13): the converter puts on
    each stage the layers megatron-core builds there, and the shards merge back exactly."""
    from megatron.core.transformer.transformer_block import get_num_layers_to_build

    model = tiny_hf("deepseek_v3")
    spec = spec_of(model)
    role = _role(1)
    role = dataclasses.replace(role, parallelism=dataclasses.replace(role.parallelism, pp=pp, pp_first_layers=first,
                                                                     pp_last_layers=last))
    settings = M.lower_role(role, spec, pp)
    tf, _opt, _ddp = M.build_configs(settings)
    stages = W.stage_layers(spec.layers, pp, None, first, last)
    assert [len(stages[(r, 0)]) for r in range(pp)] == [get_num_layers_to_build(tf, pp_rank=r) for r in range(pp)]
    shards, experts = W.shard_layout(hf_state(model), spec, 1, pp, None, first=first, last=last)
    assert_same(W.merge(shards, spec, experts=experts, first=first, last=last), hf_state(model))


def test_uneven_pipeline_stages_that_leave_unequal_middles_are_refused():
    spec = spec_of(tiny_hf("qwen2"))
    role = _role(1)
    role = dataclasses.replace(role, parallelism=dataclasses.replace(role.parallelism, pp=4, pp_first_layers=2))
    with pytest.raises(M.MegatronConfigError, match="4 layers do not split over pipeline size 4 with 2 layers on "
                                                    "the first stage"):
        M.lower_role(role, spec, 4)


@pytest.mark.parametrize("tp,pp,ep,etp", [(1, 1, 2, 1), (2, 1, 2, 1), (2, 2, 4, 2), (1, 1, 4, 1)])
def test_expert_shards_round_trip_and_hold_their_own_run_of_experts(tp, pp, ep, etp):
    model = tiny_hf("qwen3_moe")
    spec = spec_of(model)
    state = hf_state(model)
    shards, experts = W.shard_layout(state, spec, tp, pp, None, ep, etp)
    assert not any(W.is_expert(k) for part in shards.values() for k in part)
    assert set(experts) == {(et, e, p, 0) for et in range(etp) for e in range(ep) for p in range(pp)}
    per_rank = spec.experts // ep
    # Expert-parallel rank 1 holds experts per_rank.. under local numbers 0..; expert tp rank 1 the second half of
    # each gate and of each up.
    local = experts[(etp - 1, 1, 0, 0)]["decoder.layers.0.mlp.experts.local_experts.0.linear_fc1.weight"]
    gate = state[f"model.layers.0.mlp.experts.{per_rank}.gate_proj.weight"]
    assert torch.equal(local[:gate.shape[0] // etp], gate.chunk(etp)[etp - 1])
    assert len([k for k in experts[(0, 0, 0, 0)] if k.endswith("linear_fc2.weight")]) == \
        per_rank * spec.layers // pp
    assert_same(W.merge(shards, spec, experts=experts), state)


def test_expert_parallel_sizes_the_model_cannot_take_are_refused():
    spec = spec_of(tiny_hf("qwen3_moe"))
    with pytest.raises(W.ConversionError, match="4 experts per layer do not split over expert parallel size 3"):
        spec.check(1, 3)
    with pytest.raises(W.ConversionError, match="needs a mixture-of-experts model, and this one is dense"):
        spec_of(tiny_hf("qwen3")).check(1, 2)
    config = {**tiny_hf("qwen3_moe").config.to_dict(), "mlp_only_layers": [1]}
    with pytest.raises(W.ConversionError, match="mixes dense and expert layers"):
        W.ModelSpec.from_hf_config(config)


def test_tp2_shards_hold_whole_kv_groups_and_their_own_gate_and_up():
    model = tiny_hf("qwen2")
    spec = spec_of(model)
    hf = hf_state(model)
    shards = W.shard(hf, spec, tp=2)
    d, per_rank_q = spec.head_dim, spec.heads // 2 * spec.head_dim
    for rank in range(2):
        qkv = shards[(rank, 0, 0)]["decoder.layers.1.self_attention.linear_qkv.weight"]
        # Rank r holds KV group r: its 2 query heads, then its key head, then its value head.
        q_rows = slice(rank * per_rank_q, (rank + 1) * per_rank_q)
        assert torch.equal(qkv[:per_rank_q], hf["model.layers.1.self_attn.q_proj.weight"][q_rows])
        assert torch.equal(qkv[per_rank_q:per_rank_q + d],
                           hf["model.layers.1.self_attn.k_proj.weight"][rank * d:(rank + 1) * d])
        assert torch.equal(qkv[per_rank_q + d:], hf["model.layers.1.self_attn.v_proj.weight"][rank * d:(rank + 1) * d])
        fc1 = shards[(rank, 0, 0)]["decoder.layers.1.mlp.linear_fc1.weight"]
        half = spec.ffn // 2
        assert torch.equal(fc1[:half], hf["model.layers.1.mlp.gate_proj.weight"][rank * half:(rank + 1) * half])
        assert torch.equal(fc1[half:], hf["model.layers.1.mlp.up_proj.weight"][rank * half:(rank + 1) * half])
        proj = shards[(rank, 0, 0)]["decoder.layers.1.self_attention.linear_proj.weight"]
        assert torch.equal(proj, hf["model.layers.1.self_attn.o_proj.weight"][:, rank * 32:(rank + 1) * 32])
        emb = shards[(rank, 0, 0)]["embedding.word_embeddings.weight"]
        assert emb.shape == (128, 64)  # 40 padded to 256 = 128 × tp, split in two
    whole = W.hf_to_mcore(hf, spec, 256)
    assert_same(W.merge_tp([shards[(0, 0, 0)], shards[(1, 0, 0)]]), whole)


def test_pipeline_stages_renumber_layers_and_copy_a_tied_embedding():
    model = tiny_hf("qwen3", tied=True)
    spec = spec_of(model)
    assert W.stage_layers(4, 2, 2) == {(0, 0): range(0, 1), (1, 0): range(1, 2), (0, 1): range(2, 3),
                                       (1, 1): range(3, 4)}
    shards = W.shard(hf_state(model), spec, pp=2)
    first, last = shards[(0, 0, 0)], shards[(0, 1, 0)]
    assert "embedding.word_embeddings.weight" in first and "decoder.final_layernorm.weight" in last
    assert torch.equal(last["output_layer.weight"], first["embedding.word_embeddings.weight"])
    assert torch.equal(last["decoder.layers.0.self_attention.linear_qkv.weight"],
                       W.hf_to_mcore(hf_state(model), spec, 128)["decoder.layers.2.self_attention.linear_qkv.weight"])
    with pytest.raises(W.ConversionError, match="4 layers do not split evenly over pipeline size 3"):
        W.stage_layers(4, 3)


def test_transformer_engine_names_fuse_the_norms():
    model = tiny_hf("qwen2")
    spec = spec_of(model)
    whole = W.hf_to_mcore(hf_state(model), spec, te=True)
    assert "decoder.layers.0.self_attention.linear_qkv.layer_norm_weight" in whole
    assert "decoder.layers.0.mlp.linear_fc1.layer_norm_weight" in whole
    assert "decoder.layers.0.input_layernorm.weight" not in whole
    assert_same(W.mcore_to_hf(whole, spec, te=True), hf_state(model))


def test_uneven_kv_groups_are_refused_for_tensor_parallel_sharding():
    model = tiny_hf("llama", kv_heads=1)
    with pytest.raises(W.ConversionError, match=r"num_query_groups \(1\) is not a multiple of tensor "
                                                r"parallel size \(2\)"):
        W.shard(hf_state(model), spec_of(model), tp=2)


# ---- megatron-core's GPTModel on CPU --------------------------------------------------------------------------------

def megatron_model(model):
    """A GPTModel built from the lowered settings, with the converted Hugging Face weights loaded."""
    spec = spec_of(model)
    role = _role(1)
    role = dataclasses.replace(role, gradient_checkpointing=False,
                               model=dataclasses.replace(role.model, dtype="float32"))
    settings = M.lower_role(role, spec, 1)
    tf, _opt, _ddp = M.build_configs(settings)
    with C.cuda_as_cpu():  # the MoE dispatcher makes a CUDA stream
        (chunk,) = M.build_model_chunks(settings, tf)
    M.load_hf_into([chunk], hf_state(model), settings)
    return chunk, settings


def left_padded_batch(vocab: int):
    torch.manual_seed(7)
    ids = torch.randint(1, vocab, (3, 10))
    attn = torch.ones_like(ids)
    attn[0, :3] = 0  # left padding of a short prompt
    attn[2, :1] = 0
    ids = ids * attn
    return ids, attn


@pytest.mark.parametrize("family", FAMILIES)
def test_gpt_model_with_converted_weights_gives_the_hf_logits(family, world, cpu_rotary):
    model = tiny_hf(family, tied=family == "qwen3")
    chunk, settings = megatron_model(model)
    chunk.eval()
    ids, attn = left_padded_batch(model.config.vocab_size)
    pos = (attn.cumsum(dim=1) - 1).clamp(min=0)
    with torch.no_grad(), C.cuda_as_cpu():  # the MoE dispatcher's host copies
        ours = chunk(ids, pos, attention_mask=M.causal_padding_mask(attn))[..., :model.config.vocab_size]
        theirs = model(input_ids=ids, attention_mask=attn, position_ids=pos).logits
    real = attn.bool()
    assert (ours - theirs)[real].abs().max() < 1e-4


def _logits_of(model, chunk):
    ids, attn = left_padded_batch(model.config.vocab_size)
    pos = (attn.cumsum(dim=1) - 1).clamp(min=0)
    with torch.no_grad(), C.cuda_as_cpu():
        ours = chunk(ids, pos, attention_mask=M.causal_padding_mask(attn))[..., :model.config.vocab_size]
        theirs = model(input_ids=ids, attention_mask=attn, position_ids=pos).logits
    return (ours - theirs)[attn.bool()].abs().max()


def test_deepseek_queries_through_a_bottleneck_give_the_hf_logits(world, cpu_rotary):
    """DeepSeek-V3's own query path (q_lora_rank: a down projection, its norm, an up projection), where Moonlight
    projects queries directly."""
    model = tiny_hf("deepseek_v3", q_lora_rank=24)
    chunk, settings = megatron_model(model)
    assert settings.transformer["q_lora_rank"] == 24
    chunk.eval()
    assert _logits_of(model, chunk) < 1e-4


def test_a_framework_that_routes_without_the_correction_gets_it_and_exports_the_checkpoints(world, cpu_rotary):
    """ChatLearn's Megatron setup turns DeepSeek-V3's routing correction off (expert_bias "off"): the
    Megatron model routes by the sigmoid scores alone, as the Hugging Face model does with its corrections at
    zero, and the export carries the checkpoint's corrections unchanged for the rollout engine."""
    model = tiny_hf("deepseek_v3")
    role = dataclasses.replace(_role(1), gradient_checkpointing=False, expert_bias="off")
    role = dataclasses.replace(role, model=dataclasses.replace(role.model, dtype="float32"))
    settings = M.lower_role(role, spec_of(model), 1)
    assert settings.transformer["moe_router_enable_expert_bias"] is False
    tf, _opt, _ddp = M.build_configs(settings)
    with C.cuda_as_cpu():
        (chunk,) = M.build_model_chunks(settings, tf)
    state = hf_state(model)
    M.load_hf_into([chunk], state, settings)
    chunk.eval()
    assert not any(name.endswith("expert_bias") for name in chunk.state_dict())
    kept = W.unheld(state, settings.model)
    assert sorted(kept) == [f"model.layers.{i}.mlp.gate.e_score_correction_bias" for i in (1, 2, 3)]
    with torch.no_grad():
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.zero_()
    assert _logits_of(model, chunk) < 1e-4


def test_deepseek_models_rlcfg_does_not_build_are_refused_by_name():
    base = {**tiny_hf("deepseek_v3").config.to_dict()}
    with pytest.raises(W.ConversionError, match="not scaled ones"):
        W.ModelSpec.from_hf_config({**base, "rope_scaling": {"rope_type": "yarn", "factor": 40}}, "m")
    with pytest.raises(W.ConversionError, match="always renormalises"):
        W.ModelSpec.from_hf_config({**base, "norm_topk_prob": False}, "m")
    with pytest.raises(W.ConversionError, match="best two experts"):
        W.ModelSpec.from_hf_config({**base, "n_group": 2, "topk_group": 2}, "m")
    spec = W.ModelSpec.from_hf_config(base, "m")
    unmapped = dataclasses.replace(_role(1), expert_bias="unmapped")  # ROLL's Megatron setup is not read
    with pytest.raises(M.MegatronConfigError, match="the skyrl package, and ChatLearn's after 1.2.0"):
        M.lower_role(unmapped, spec, 1)
    no_sp = dataclasses.replace(_role(2), parallelism=dataclasses.replace(_role(2).parallelism,
                                                                          sequence_parallel=False))
    with pytest.raises(M.MegatronConfigError, match="with sequence parallelism on only"):
        M.lower_role(no_sp, spec, 2)
    assert M.lower_role(_role(2), spec, 2).transformer["multi_latent_attention"]


@pytest.mark.parametrize("family", ["qwen2", "qwen3"])
def test_ppo_loss_on_megatron_logits_matches_the_reference_mathematics(family, world, cpu_rotary):
    """The CPU-possible part of the update: megatron-core's forward, rlcfg's vocabulary-parallel log-probs and
    entropy, the PPO loss and its backward into the GPTModel's parameters, checked against the Hugging Face
    model with torch's log_softmax and rlcfg.runtime.algorithms."""
    model = tiny_hf(family)
    vocab = model.config.vocab_size
    chunk, settings = megatron_model(model)
    chunk.train()
    ids, attn = left_padded_batch(vocab)
    prompt_width = 6
    response_mask = attn[:, prompt_width:].float()
    response_mask[1, 3:] = 0
    torch.manual_seed(3)
    mb = {"input_ids": ids, "attention_mask": attn, "response_mask": response_mask,
          "advantages": torch.randn(3, 4), "old_logprobs": torch.full((3, 4), -3.6),
          "ref_logprobs": torch.full((3, 4), -3.7)}
    cfg = {"loss": ir.ActorLossSpec(ir.PolicyLossSpec("regular", 0.2, 0.28), "token-mean", kl_coef=0.1,
                                    kl_estimator="k3", entropy_coef=0.01)}
    pos = (attn.cumsum(dim=1) - 1).clamp(min=0)
    tokens = float(response_mask.sum())
    logits = chunk(ids, pos, attention_mask=M.causal_padding_mask(attn))
    assert logits.shape[-1] == 128  # padded vocabulary; the padding must carry no probability
    loss, stats = M.ppo_loss(logits, mb, cfg, prompt_width, 0, vocab, 0.7, tokens, 3.0)
    loss.backward()
    loss = loss.detach()
    grad = chunk.decoder.layers[0].self_attention.linear_qkv.weight.grad
    assert grad is not None and grad.abs().sum() > 0
    assert chunk.embedding.word_embeddings.weight.grad[vocab:].abs().sum() == 0

    ref_logits = model(input_ids=ids, attention_mask=attn, position_ids=pos).logits[:, prompt_width - 1:-1] / 0.7
    ref_lp = torch.log_softmax(ref_logits.float(), -1).gather(-1, ids[:, prompt_width:, None]).squeeze(-1)
    pg, _ = A.policy_loss(ref_lp, mb["old_logprobs"], mb["advantages"], response_mask,
                          ir.PolicyLossSpec("regular", 0.2, 0.28))
    expected = A.aggregate(pg, response_mask, "token-mean", tokens)
    kl = A.aggregate(A.kl_estimate(ref_lp, mb["ref_logprobs"], "k3"), response_mask, "token-mean", tokens)
    ent = A.aggregate(A.entropy_from_logits(ref_logits), response_mask, "token-mean", tokens)
    assert float(stats["pg_loss"]) == pytest.approx(float(expected), abs=1e-5)
    assert float(stats["kl_loss"]) == pytest.approx(float(kl), abs=1e-5)
    assert float(stats["entropy"]) == pytest.approx(float(ent), abs=1e-5)
    assert float(loss) == pytest.approx(float(expected + 0.1 * kl - 0.01 * ent), abs=1e-5)


def test_causal_padding_mask():
    attn = torch.tensor([[0, 1, 1]])
    mask = M.causal_padding_mask(attn)[0, 0]
    # Row = query, column = key; True = not attended. No row is fully masked (a padding query sees itself).
    assert mask.tolist() == [[False, True, True], [True, False, True], [True, False, False]]


def test_schedule_needs_cuda_on_cpu(world):
    """Documents why the update is GPU-only here: megatron-core's schedule allocates a CUDA tensor first."""
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    from megatron.core.pipeline_parallel import get_forward_backward_func

    chunk, _settings = megatron_model(tiny_hf("qwen2"))
    with pytest.raises((AssertionError, RuntimeError), match="CUDA"):
        get_forward_backward_func()(forward_step_func=lambda it, m: None, data_iterator=iter([]), model=[chunk],
                                    num_microbatches=1, seq_length=1, micro_batch_size=1, forward_only=True)


# ---- the engine (GPU) ---------------------------------------------------------------------------------------------

@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_GPU)
def test_engine_update_through_forward_backward_schedule(tmp_path):
    """One rank: log-probs equal the Hugging Face model's, a PPO step through get_forward_backward_func changes
    the weights and lowers the loss, and the gathered Hugging Face weights round-trip into transformers."""
    if dist.is_initialized():
        pytest.skip("needs its own NCCL world")
    model = tiny_hf("qwen2")
    model.save_pretrained(tmp_path / "m")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        role = _role(1)
        role = dataclasses.replace(role, model=dataclasses.replace(role.model, dtype="float32"),
                                   optimizer=dataclasses.replace(role.optimizer, lr=1e-2, warmup_steps=0))
        settings = M.lower_role(role, spec_of(model), 1, total_optimizer_steps=10)
        engine = M.MegatronEngine("actor", str(tmp_path / "m"), settings)
        ids, attn = left_padded_batch(model.config.vocab_size)
        batch = {"input_ids": ids, "attention_mask": attn, "response_mask": attn[:, 6:].float(),
                 "advantages": torch.ones(3, 4)}
        out = engine.compute(batch, 2)["values"]
        pos = (attn.cumsum(dim=1) - 1).clamp(min=0)
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=attn, position_ids=pos).logits[:, 5:-1]
        ref = torch.log_softmax(logits, -1).gather(-1, ids[:, 6:, None]).squeeze(-1) * batch["response_mask"]
        assert (out - ref).abs().max() < 1e-3
        batch["old_logprobs"] = out
        cfg = {"ppo_epochs": 1, "mini_batch": 3, "micro_batch": 2,
               "denominators": [(float(batch["response_mask"].sum()), 3.0)], "loss": ir.ActorLossSpec()}
        metrics = engine.train(batch, cfg)
        assert metrics["grad_norm"] > 0
        after = engine.compute(batch, 2)["values"]
        assert ((after - out) * batch["response_mask"]).sum() > 0  # advantage +1: the taken tokens got likelier
        state = engine.full_state_dict()
        assert set(state) == set(hf_state(model))
    finally:
        from megatron.core import parallel_state

        parallel_state.destroy_model_parallel()
        dist.destroy_process_group()
