"""The memory estimator against the worked examples of ../shared/research/performance.md §3, and its verdicts."""

from __future__ import annotations

import math

import pytest

from rlcfg.ir import Offload
from rlcfg.plan import build_plan
from rlcfg.plan.memory import (GiB, UnknownGpu, architecture_from_config, architecture_from_table, gpu_capacity,
                               kv_bytes_per_token, layer_activation_bytes, logits_bytes, megatron_bytes_per_param,
                               vllm_kv_pool, zero_model_states)
from rlcfg.plan.model_table import lookup
from tests.plan.factory import experiment, rollout, trainer

KiB = 1024
GB = 1e9

# Llama-2-7B's public config: the MHA model behind the vLLM start-up log of performance.md §3.3.
LLAMA2_7B = {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
             "num_key_value_heads": 32, "intermediate_size": 11008, "vocab_size": 32000,
             "tie_word_embeddings": False}


def table(name: str):
    entry = lookup(name)
    assert entry is not None, name
    return architecture_from_table(entry)


# ---- §3.1 model states -------------------------------------------------------------------------------------

def test_zero_paper_example_7_5b_on_64_gpus():
    # Rajbhandari et al.: 7.5B parameters, N_d = 64: 120 GB per replica, then 31.4 / 16.6 / 1.9 GB.
    psi = 7.5e9
    assert zero_model_states(psi, 0, 64) / GB == pytest.approx(120.0)
    assert zero_model_states(psi, 1, 64) / GB == pytest.approx(31.4, abs=0.05)
    assert zero_model_states(psi, 2, 64) / GB == pytest.approx(16.6, abs=0.05)
    assert zero_model_states(psi, 3, 64) / GB == pytest.approx(1.9, abs=0.05)


def test_megatron_bytes_per_parameter():
    assert megatron_bytes_per_param(dp=8, distributed_optimizer=False) == 18
    assert megatron_bytes_per_param(dp=8, distributed_optimizer=True) == 6 + 12 / 8
    assert megatron_bytes_per_param(dp=1, distributed_optimizer=True) == 18


def test_fsdp_actor_holds_sixteen_bytes_per_parameter_over_its_shard_group():
    plan, _ = build_plan(experiment(trainer(gpus=8), rollout(gpus=8), colocation=(("actor", "rollout"),)))
    actor = next(r for r in plan.memory.roles if r.role == "actor")
    states = sum(t.bytes for t in actor.terms if t.name.startswith(("parameters", "gradients", "optimizer")))
    psi = table("Qwen2.5-7B").params
    assert states == pytest.approx(16 * psi / 8, rel=1e-6)


def test_fsdp_tensor_parallel_splits_activations_but_not_the_state_total():
    # TP inside FSDP: TP × FSDP still spread the 16 B/param over all 8 GPUs, while each layer's attention and
    # MLP activations split over the TP group; the logits are counted whole.
    def actor(tp):
        plan, _ = build_plan(experiment(trainer(gpus=8, tp=tp, checkpointing=False)))
        return {t.name: t.bytes for t in next(r for r in plan.memory.roles if r.role == "actor").terms}

    plain, split = actor(1), actor(4)
    states = [n for n in plain if n.startswith(("parameters", "gradients", "optimizer"))]
    assert [split[n] for n in states] == [plain[n] for n in states]
    activations = next(n for n in plain if n.startswith("activations"))
    assert split[activations] < plain[activations] / 2
    logits = next(n for n in plain if n.startswith("logits"))
    assert split[logits] == plain[logits]


def test_megatron_actor_states_with_and_without_the_distributed_optimizer():
    # A Megatron actor without pipeline parallelism holds its whole TP shard: 6 + 12/DP bytes per parameter.
    role = trainer(gpus=8, backend="megatron", tp=2)
    plan, _ = build_plan(experiment(role, rollout(gpus=8), colocation=(("actor", "rollout"),)))
    actor = next(r for r in plan.memory.roles if r.role == "actor")
    states = sum(t.bytes for t in actor.terms if t.name.startswith(("parameters", "gradients", "optimizer")))
    psi = table("Qwen2.5-7B").params
    assert states == pytest.approx(psi / 2 * megatron_bytes_per_param(4, True), rel=1e-6)


# ---- §3.2 activations and logits -------------------------------------------------------------------------------

def test_logits_of_16k_tokens_over_qwen25_vocab_are_about_10_gb():
    assert logits_bytes(16384, 152064) / GB == pytest.approx(10.0, abs=0.05)
    assert logits_bytes(16384, 152064, chunk_tokens=1024) == logits_bytes(1024, 152064)


def test_checkpointed_layer_inputs_of_qwen25_7b_are_about_3_3_gb():
    arch = table("Qwen2.5-7B")
    assert 2 * 16384 * arch.hidden * arch.layers / GB == pytest.approx(3.3, abs=0.05)
    # Korthikanti's 34·s·b·h per layer when ffn = 4h (TP 1, no s² term with FlashAttention).
    assert layer_activation_bytes(1000, 1024, 4096, 1, False) == 34 * 1000 * 1024


def test_activations_shrink_with_recomputation():
    def actor_activations(checkpointing: bool) -> int:
        plan, _ = build_plan(experiment(trainer(checkpointing=checkpointing), rollout(),
                                        colocation=(("actor", "rollout"),)))
        actor = next(r for r in plan.memory.roles if r.role == "actor")
        return sum(t.bytes for t in actor.terms if t.name.startswith("activations"))

    assert actor_activations(True) * 5 < actor_activations(False)


# ---- §3.3 rollout KV cache ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,kib", [("Qwen2.5-7B", 56), ("Llama-3.1-8B", 128), ("Qwen3-8B", 144),
                                      ("Qwen2.5-32B", 256), ("Llama-3.1-70B", 320)])
def test_kv_bytes_per_token_match_the_table(name, kib):
    assert kv_bytes_per_token(table(name)) == kib * KiB


def test_kv_heads_split_over_tp_and_replicate_below_one_per_rank():
    arch = table("Qwen2.5-7B")  # 4 KV heads
    assert kv_bytes_per_token(arch, tp=2) == 28 * KiB
    assert kv_bytes_per_token(arch, tp=8) == kv_bytes_per_token(arch, tp=4) == 14 * KiB


def test_the_vllm_startup_log_kv_cache():
    # 79.19 GiB × 0.90 = 71.27 GiB; weights 12.55, non-torch 0.16, activation peak 2.38 → KV 56.18 GiB,
    # 7,191 blocks of 16 tokens at 512 KiB per token (a Llama-2-7B-class MHA model).
    arch = architecture_from_config(LLAMA2_7B, "test")
    assert kv_bytes_per_token(arch) == 512 * KiB
    assert 2 * arch.params / GiB == pytest.approx(12.55, abs=0.01)
    pool = vllm_kv_pool(79.19 * GiB, 0.90, 12.55 * GiB, 0.16 * GiB, 2.38 * GiB)
    assert pool / GiB == pytest.approx(56.18, abs=0.01)
    assert math.floor(pool / (16 * kv_bytes_per_token(arch))) == 7191


# ---- architectures -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,billions", [
    ("Qwen2.5-0.5B", 0.494), ("Qwen2.5-1.5B", 1.544), ("Qwen2.5-7B", 7.616), ("Qwen2.5-32B", 32.764),
    ("Qwen2.5-72B", 72.706), ("Qwen3-0.6B", 0.596), ("Qwen3-8B", 8.191), ("Qwen3-32B", 32.762),
    ("Llama-3.1-8B", 8.030), ("Llama-3.1-70B", 70.554), ("DeepSeek-R1-Distill-Qwen-1.5B", 1.777),
    ("DeepSeek-R1-Distill-Qwen-7B", 7.616),
])
def test_table_parameter_counts_match_the_published_sizes(name, billions):
    assert table(name).params / 1e9 == pytest.approx(billions, rel=0.005)


@pytest.mark.parametrize("path,name", [
    ("/mnt/models/Qwen2.5-7B-Instruct/", "Qwen2.5-7B"),
    ("Qwen/Qwen2.5-Math-7B", "Qwen2.5-7B"),
    ("/mnt/models/Qwen2.5-32B-mcore", "Qwen2.5-32B"),
    ("/mnt/models/qwen2.5-3b", "Qwen2.5-3B"),
    ("QWEN3-8B-Base", "Qwen3-8B"),
    ("meta-llama/Meta-Llama-3.1-70B-Instruct", "Llama-3.1-70B"),
    ("Llama-3.3-70B-Instruct", "Llama-3.1-70B"),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", "DeepSeek-R1-Distill-Qwen-1.5B"),
    ("/mnt/models/my-model", None),
    ("Qwen2.5-7.5B", None),
])
def test_table_matches_the_last_path_component(path, name):
    entry = lookup(path)
    assert (entry.name if entry else None) == name


def test_moe_config_counts_every_expert_and_is_noted_as_approximate():
    # Qwen3-30B-A3B's public config: 128 experts of FFN 768 per layer, 30.5B parameters in all.
    config = {"model_type": "qwen3_moe", "num_hidden_layers": 48, "hidden_size": 2048, "num_attention_heads": 32,
              "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 6144, "moe_intermediate_size": 768,
              "num_experts": 128, "num_experts_per_tok": 8, "vocab_size": 151936, "tie_word_embeddings": False}
    assert architecture_from_config(config, "test").params / 1e9 == pytest.approx(30.53, abs=0.01)
    exp = experiment(trainer(backend="megatron", ep=8, model="/m/moe"), rollout(model="/m/moe", tp=4),
                     colocation=(("actor", "rollout"),))
    plan, diags = build_plan(exp, model_configs={"/m/moe": config})
    assert plan.memory is not None
    assert any(d.code == "RLC501" and "rougher" in d.message for d in diags)


def test_config_json_figures_win_over_the_table():
    cfg = dict(LLAMA2_7B)
    exp = experiment(trainer(model="/local/llama-3.1-8b"), rollout(model="/local/llama-3.1-8b"),
                     colocation=(("actor", "rollout"),))
    plan, diags = build_plan(exp, model_configs={"/local/llama-3.1-8b": cfg})
    arch = plan.memory.architectures[0]
    assert (arch.layers, arch.vocab, arch.kv_heads) == (32, 32000, 32)
    assert "config.json" in arch.source
    assert not [d for d in diags if d.code == "RLC501"]


def test_unknown_architecture_is_a_warning_and_no_estimate():
    exp = experiment(trainer(model="/m/secret"), rollout(model="/m/secret"), colocation=(("actor", "rollout"),))
    plan, diags = build_plan(exp)
    assert plan.memory is None
    unknown = [d for d in diags if d.code == "RLC501"]
    assert unknown and all(d.severity.value == "warning" for d in unknown)
    assert "--model-config" in unknown[0].hint


def test_table_figures_are_noted():
    _, diags = build_plan(experiment(trainer(), rollout(), colocation=(("actor", "rollout"),)))
    [note] = [d for d in diags if d.code == "RLC501"]
    assert note.severity.value == "note" and "Qwen2.5-7B" in note.message


@pytest.mark.parametrize("name,gib", [("h100", 79.6), ("H200", 140.4), ("a100-40g", 40.0), ("96GB", 89.4),
                                      ("80GiB", 80.0)])
def test_gpu_names_and_sizes(name, gib):
    assert gpu_capacity(name)[1] / GiB == pytest.approx(gib, abs=0.05)


def test_unknown_gpu_is_refused():
    with pytest.raises(UnknownGpu, match="h100"):
        gpu_capacity("tpu-v5")


# ---- §3.5 colocated GRPO --------------------------------------------------------------------------------------

def colocated_qwen7b(offload: bool):
    """performance.md §3.5: Qwen2.5-7B on 8 GPUs, FSDP full shard, vLLM TP 1 with gpu_memory_utilization 0.5,
    16k tokens per micro-batch, full checkpointing."""
    off = Offload(params=True, optimizer=True, grads=True) if offload else Offload()
    return experiment(trainer(offload=off, packing_tokens=16384), rollout(sleep=offload, gpu_memory_utilization=0.5),
                      trainer("reference", trains=False, offload=Offload(params=offload), packing_tokens=16384),
                      colocation=(("actor", "rollout", "reference"),))


@pytest.fixture
def whole_logits(monkeypatch):
    """An fsdp runtime that computes whole logits, as the frameworks' own do and as rlcfg's does for families its
    chunked output layer does not serve: the figures of performance.md."""
    from rlcfg.plan import memory

    monkeypatch.setattr(memory, "CHUNKED_HEAD_FAMILIES", frozenset())


def test_rlcfgs_chunked_log_probs_bound_the_logits_term():
    """rlcfg's fsdp backend takes the Qwen and Llama families' log-probs LOGPROB_CHUNK_TOKENS positions of logits at
    a time: the logits term is one chunk's, not the micro-batch's, and the long-sample example that whole logits
    overflow fits."""
    from rlcfg.plan.memory import LOGPROB_CHUNK_TOKENS

    exp = experiment(trainer(micro=64, packing_tokens=None), rollout(sleep=True), colocation=(("actor", "rollout"),),
                     prompt_len=2048, response_len=6144)
    plan, diags = build_plan(exp, gpu="h100")
    actor = next(r for r in plan.memory.roles if r.role == "actor")
    terms = {t.name: t.bytes for t in actor.terms}
    assert terms["logits (fp32, chunked)"] == LOGPROB_CHUNK_TOKENS * 152064 * 4
    assert not [d for d in diags if d.code == "RLC500" and "logits" in d.message]


def test_colocated_example_bars(whole_logits):
    plan, _ = build_plan(colocated_qwen7b(offload=False), gpu="80GB")
    roles = {r.role: r for r in plan.memory.roles}
    # Train bar ≈ 35 GB: actor 16Ψ/8 = 15.2 GB + checkpointed inputs 3.3 + one layer ~2 + logits 10 + buffers,
    # with the reference's 2Ψ/8 = 1.9 GB resident.
    train_bar = roles["actor"].per_gpu_bytes + roles["reference"].resident_bytes
    assert train_bar / GB == pytest.approx(35, rel=0.1)
    # Rollout: the engine reserves 0.5 × 80 GB = 40 GB: 15.2 GB of weights and ~22 GB of KV ≈ 390k tokens.
    rollout_terms = {t.name: t.bytes for t in roles["rollout"].terms}
    assert roles["rollout"].per_gpu_bytes / GB == pytest.approx(40, rel=0.01)
    assert rollout_terms["weights (bf16, TP 1)"] / GB == pytest.approx(15.2, abs=0.1)
    assert rollout_terms["kv cache"] / GB == pytest.approx(22, rel=0.1)
    assert roles["rollout"].kv_cache_tokens == pytest.approx(390_000, rel=0.1)


def test_colocated_example_peak_is_the_biggest_phase_when_roles_offload():
    plan, diags = build_plan(colocated_qwen7b(offload=True), gpu="h100")
    [verdict] = plan.memory.verdicts
    roles = {r.role: r for r in plan.memory.roles}
    others = sum(r.resident_bytes for r in roles.values()) - roles["actor"].resident_bytes
    assert verdict.fits and not [d for d in diags if d.code == "RLC500"]
    assert verdict.peak_bytes == max(roles["actor"].per_gpu_bytes + others,
                                     roles["rollout"].per_gpu_bytes + sum(
                                         r.resident_bytes for n, r in roles.items() if n != "rollout"),
                                     roles["reference"].per_gpu_bytes + sum(
                                         r.resident_bytes for n, r in roles.items() if n != "reference"))


def test_colocated_example_without_offload_adds_the_phases(whole_logits):
    # Without sleep the vLLM reservation stays during training: train bar + 40 GB. (performance.md's "≈ 92 GB"
    # adds its two bars, each of which already includes the same 17 GB of actor and reference states; the
    # phases really add up to about 75 GB.)
    plan, _ = build_plan(colocated_qwen7b(offload=False), gpu="80GB")
    roles = {r.role: r for r in plan.memory.roles}
    [verdict] = plan.memory.verdicts
    expected = roles["actor"].per_gpu_bytes + roles["rollout"].resident_bytes + roles["reference"].resident_bytes
    assert verdict.peak_bytes == expected
    assert verdict.peak_bytes / GB == pytest.approx(75, rel=0.05)
    assert verdict.biggest == "rollout: kept resident"


def test_without_offload_a_bigger_engine_share_runs_out_of_memory_and_h200_fixes_it(whole_logits):
    exp = colocated_qwen7b(offload=False)
    exp = exp.__class__(**{**exp.__dict__, "roles": tuple(
        rollout(gpu_memory_utilization=0.6) if r.name == "rollout" else r for r in exp.roles)})
    plan, diags = build_plan(exp, gpu="h100")
    [verdict] = plan.memory.verdicts
    assert not verdict.fits
    [error] = [d for d in diags if d.code == "RLC500"]
    assert error.severity.value == "error" and error.path == "roles.rollout"
    assert "offload rollout between phases" in error.hint and "too much" in error.hint
    plan, diags = build_plan(exp, gpu="h200")
    assert plan.memory.fits and not [d for d in diags if d.code == "RLC500"]


def test_logits_dominate_and_the_advice_names_the_micro_batch(whole_logits):
    exp = experiment(trainer(micro=64, packing_tokens=None), rollout(sleep=True), colocation=(("actor", "rollout"),),
                     prompt_len=2048, response_len=6144)
    plan, diags = build_plan(exp, gpu="h100")
    [error] = [d for d in diags if d.code == "RLC500"]
    assert "logits" in error.message and "micro-batch (64 → 32)" in error.hint


def test_vllm_and_sglang_treat_resident_neighbours_differently():
    # vLLM takes its share of the whole GPU whatever else is there; SGLang's KV pool shrinks instead.
    def peak(backend: str) -> tuple[int, int]:
        key = "mem_fraction_static" if backend == "sglang" else "gpu_memory_utilization"
        exp = experiment(trainer(), rollout(backend=backend, **{key: 0.7}), colocation=(("actor", "rollout"),))
        plan, _ = build_plan(exp, gpu="h100")
        actor = next(r for r in plan.memory.roles if r.role == "actor")
        return plan.memory.verdicts[0].peak_bytes, actor.resident_bytes

    vllm_peak, resident = peak("vllm")
    sglang_peak, _ = peak("sglang")
    assert vllm_peak - sglang_peak > resident * 0.5


def test_kv_cache_smaller_than_one_sequence_is_an_error():
    exp = experiment(trainer(gpus=1), rollout(gpus=1, gpu_memory_utilization=0.2, max_model_len=32768),
                     colocation=(("actor", "rollout"),), prompt_len=1024, response_len=31744)
    _, diags = build_plan(exp, gpu="h100")
    assert any(d.code == "RLC500" and "refuses to start" in d.message for d in diags)


# ---- verdicts: length-independent terms, typical and longest samples ---------------------------------------

def _peak_diagnostics(diags):
    return [d for d in diags if d.code in ("RLC500", "RLC502")]


def test_overflowing_only_at_the_longest_samples_is_a_warning_that_says_up_to_which_length_it_fits(whole_logits):
    # A reference model whose fp32 logits for 16 samples of 8,192 tokens overflow an H100; at half that length
    # (a typical step) they fit.
    reference = trainer("reference", trains=False, micro=16)
    exp = experiment(trainer(micro=2), reference, rollout(sleep=True),
                     colocation=(("actor", "rollout", "reference"),), prompt_len=2048, response_len=6144)
    plan, diags = build_plan(exp, gpu="h100")
    [warning] = _peak_diagnostics(diags)
    assert warning.code == "RLC502" and warning.severity.value == "warning"
    longest = int(warning.message.rsplit("up to about ", 1)[1].split()[0].replace(",", ""))
    assert 4096 <= longest < 8192
    assert "forward micro-batch (16 → 8)" in warning.hint
    assert not plan.memory.fits and plan.memory.fits_typical
    # the length it names is the one that fits: a config whose samples are that long plans clean
    shorter = experiment(trainer(micro=2), reference, rollout(sleep=True),
                         colocation=(("actor", "rollout", "reference"),), prompt_len=longest // 4,
                         response_len=longest - longest // 4)
    assert not _peak_diagnostics(build_plan(shorter, gpu="h100")[1])


def test_a_model_too_big_for_its_gpus_is_still_an_error():
    big = "/models/Qwen2.5-72B-Instruct"
    exp = experiment(trainer(model=big, micro=1), trainer("reference", model=big, trains=False, micro=1),
                     rollout(model=big, sleep=True), colocation=(("actor", "rollout", "reference"),))
    plan, diags = build_plan(exp, gpu="h100")
    assert any(d.code == "RLC500" and d.severity.value == "error" for d in _peak_diagnostics(diags))
    assert not plan.memory.fits_typical


def test_memory_hints_name_the_key_that_sets_the_number(whole_logits):
    from dataclasses import replace

    reference = replace(trainer("reference", trains=False, micro=16),
                        keys=(("forward_micro_batch_size", "reference.infer_batch_size"),))
    exp = experiment(trainer(micro=2), reference, rollout(sleep=True),
                     colocation=(("actor", "rollout", "reference"),), prompt_len=2048, response_len=6144)
    [found] = _peak_diagnostics(build_plan(exp, gpu="h100")[1])
    assert "`reference.infer_batch_size` (16 → 8)" in found.hint


# ---- --model-config labels what it describes -------------------------------------------------------------

QWEN25_32B_CONFIG = {"model_type": "qwen2", "num_hidden_layers": 64, "hidden_size": 5120, "num_attention_heads": 40,
                     "num_key_value_heads": 8, "intermediate_size": 27648, "vocab_size": 152064,
                     "tie_word_embeddings": False}


def test_a_model_config_that_contradicts_the_configs_model_is_labelled_by_itself():
    # The config names a 7B model; the config.json given is a 32B one: the estimate is the 32B one's, and so is
    # its label.
    exp = experiment(trainer(gpus=8), rollout(gpus=8), colocation=(("actor", "rollout"),))
    plan, _ = build_plan(exp, gpu="h100", model_config=QWEN25_32B_CONFIG, model_source="--model-config c.json")
    names = {a.name for a in plan.memory.architectures}
    assert names == {"qwen2"}
    named = dict(QWEN25_32B_CONFIG, _name_or_path="Qwen/Qwen2.5-32B-Instruct")
    plan, _ = build_plan(exp, gpu="h100", model_config=named, model_source="--model-config c.json")
    assert {a.name for a in plan.memory.architectures} == {"Qwen2.5-32B-Instruct"}


def test_a_model_config_of_the_configs_own_model_keeps_the_models_name():
    exp = experiment(trainer(gpus=8, model="/models/Qwen2.5-32B-Instruct"),
                     rollout(gpus=8, model="/models/Qwen2.5-32B-Instruct"), colocation=(("actor", "rollout"),))
    plan, _ = build_plan(exp, gpu="h100", model_config=QWEN25_32B_CONFIG, model_source="--model-config c.json")
    assert {a.name for a in plan.memory.architectures} == {"Qwen2.5-32B-Instruct"}


def test_the_kv_cache_advice_never_asks_to_lower_the_share_to_a_larger_one():
    from rlcfg.plan.memory import RoleEstimate, _advice

    exp = experiment(rollout(gpu_memory_utilization=0.8))
    est = {"rollout": RoleEstimate("rollout", "vllm", "generate", [], 0, False, None)}
    # Neighbours hold 40 of 80 GiB: the engine's 0.8 share comes down to 0.5.
    assert "lower gpu_memory_utilization (0.8 → 0.50)" in _advice(
        "rollout: kv cache", est, 10 * GiB, 80 * GiB, 40 * GiB, exp)
    # Nothing resident beside it: its share already leaves room, so lowering it is not the advice.
    advice = _advice("rollout: kv cache", est, 10 * GiB, 80 * GiB, 0, exp)
    assert "gpu_memory_utilization" not in advice and "offload the roles that stay resident" in advice
