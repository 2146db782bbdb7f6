"""The memory estimate: what each role holds on one of its GPUs, and whether a GPU's roles fit together.

Formulas (../shared/research/performance.md §3):
- model states: the ZeRO paper's 2Ψ + 2Ψ + 12Ψ for mixed-precision Adam, sharded by stage; FSDP trainers in RL
  frameworks keep fp32 master weights, so their parameters and gradients are fp32 (4 + 4 + 8 = 16 B/param over
  the shard group); Megatron holds bf16 parameters, fp32 main gradients and 12 B of fp32 master + Adam per
  parameter (18 B/param), the 12 sharded over DP with the distributed optimizer (6 + 12/DP);
- activations: Korthikanti et al.'s per-layer table, with FlashAttention (no s² term) and Megatron's
  generalisation of 34 to 18 + 4·ffn/h; full recomputation stores only each layer's input;
- logits: tokens × vocab in fp32 for log-probs and entropy, often the largest term in RL;
- rollout: weights per TP shard plus a KV cache of 2 × layers × kv_heads × head_dim × bytes per token, inside the
  share of the GPU that the engine's memory knob gives it.

Every figure is the worst case of a step: every sample at its maximum length. The verdict weighs it against a
typical step (half that length): overflowing only at the longest is a warning that says up to which length a
micro-batch fits, overflowing at the typical length an error. The result is an estimate; the verdict names its
biggest term and the knob that shrinks it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping

from rlcfg.ir import Experiment, Lora, Role
from rlcfg.plan.model import Architecture, GpuVerdict, MemoryPlan, MemoryTerm, RoleMemory, RolePlacement
from rlcfg.plan.model_table import TableEntry, last_component, lookup
from rlcfg.run_limits import routed_experts

GiB = 1024 ** 3
MiB = 1024 ** 2

# Total memory per GPU as nvidia-smi reports it (MiB), so "h100" means what a process on an H100 80GB can see.
GPU_MEMORY_MIB: dict[str, tuple[str, int]] = {
    "h100": ("H100 80GB", 81559),
    "h800": ("H800 80GB", 81559),
    "h200": ("H200 141GB", 143771),
    "h20": ("H20 96GB", 97871),
    "b200": ("B200 180GB", 183359),
    "a100-80g": ("A100 80GB", 81920),
    "a100-40g": ("A100 40GB", 40960),
    "a800": ("A800 80GB", 81920),
    "l40s": ("L40S 48GB", 46068),
    "l40": ("L40 48GB", 46068),
    "l4": ("L4 24GB", 23034),
    "a10g": ("A10G 24GB", 23028),
    "rtx4090": ("RTX 4090 24GB", 24564),
    "mi300x": ("MI300X 192GB", 196592),
}
_GPU_ALIASES = {"a100": "a100-80g", "a100-80gb": "a100-80g", "a100-40gb": "a100-40g", "h100-80g": "h100",
                "h200-141g": "h200", "4090": "rtx4090"}
DEFAULT_GPU = "h100"

CONTEXT_BYTES = 1 * GiB  # CUDA context, NCCL communicators and allocator slack, per process (rule of thumb)
VLLM_NON_TORCH_BYTES = GiB // 2  # what vLLM's start-up log calls "non-torch" memory, plus CUDA graphs
TIGHT = 0.95  # a peak above this share of the GPU fits on paper only


class UnknownGpu(ValueError):
    pass


def gpu_capacity(gpu: str) -> tuple[str, int]:
    """(label, bytes) for a GPU name from the table, or a size such as "96GB", "80GiB", "40g"."""
    key = gpu.strip().lower().replace("_", "-").replace(" ", "")
    key = _GPU_ALIASES.get(key, key)
    if key in GPU_MEMORY_MIB:
        label, mib = GPU_MEMORY_MIB[key]
        return label, mib * MiB
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)\s*(gib|gb|g)", key)
    if m:
        size = float(m.group(1))
        unit = GiB if m.group(2) == "gib" else 10 ** 9
        return f"{m.group(1)} {m.group(2).upper() if m.group(2) != 'g' else 'GB'}", int(size * unit)
    raise UnknownGpu(f"unknown GPU `{gpu}`; use one of {', '.join(sorted(GPU_MEMORY_MIB))} or a size such as 96GB")


# ---- architecture -------------------------------------------------------------------------------------------

def parameter_breakdown(layers: int, hidden: int, heads: int, kv_heads: int, head_dim: int, intermediate: int,
                        vocab: int, tied: bool, qkv_bias: bool = False, qk_norm: bool = False, experts: int = 0,
                        expert_intermediate: int = 0, shared_expert_intermediate: int = 0,
                        kv_lora_rank: int | None = None, qk_rope_head_dim: int = 0) -> dict[str, int]:
    """Parameter counts of a decoder-only transformer with SwiGLU MLPs and RMSNorm: embedding, output layer, one
    layer's dense part, one layer's routed experts, and the total."""
    q_out, kv_out = heads * head_dim, kv_heads * head_dim
    if kv_lora_rank is not None:
        # MLA: K and V come from a compressed latent; an approximation of its projections.
        attention = hidden * q_out + hidden * (kv_lora_rank + qk_rope_head_dim) + kv_lora_rank * 2 * kv_out \
            + q_out * hidden
    else:
        attention = hidden * (q_out + 2 * kv_out) + q_out * hidden
    if qkv_bias:
        attention += q_out + 2 * kv_out
    if qk_norm:
        attention += 2 * head_dim
    norms = 2 * hidden
    if experts:
        dense_mlp = 3 * hidden * shared_expert_intermediate + hidden * experts  # shared expert + router
        expert_mlp = experts * 3 * hidden * expert_intermediate
    else:
        dense_mlp, expert_mlp = 3 * hidden * intermediate, 0
    layer_dense = attention + norms + dense_mlp
    embedding = vocab * hidden
    output = 0 if tied else vocab * hidden
    total = embedding + output + layers * (layer_dense + expert_mlp) + hidden
    return {"embedding": embedding, "output": output, "layer_dense": layer_dense, "layer_experts": expert_mlp,
            "total": total}


def _breakdown(arch: Architecture) -> dict[str, int]:
    return parameter_breakdown(arch.layers, arch.hidden, arch.heads, arch.kv_heads, arch.head_dim,
                               arch.intermediate, arch.vocab, arch.tied_embeddings, arch.qkv_bias, arch.qk_norm,
                               arch.experts, arch.expert_intermediate, arch.shared_expert_intermediate,
                               arch.kv_lora_rank, arch.qk_rope_head_dim)


# How rlcfg's fsdp backend takes log-probs (rlcfg.runtime.backends.fsdp.ChunkedLogProbs), which the estimate counts:
# for the Hugging Face families whose forward applies nothing but the output layer to the last hidden states, from
# those hidden states, LOGPROB_CHUNK_TOKENS positions of logits at a time; for the others, whole logits.
CHUNKED_HEAD_FAMILIES = frozenset({"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe"})
LOGPROB_CHUNK_TOKENS = 2048

# The linear layers of a decoder layer, by the names Hugging Face's Llama-style models give them: what LoRA's
# "all-linear" adapts (every linear layer but the output layer).
_LINEAR_NAMES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def lora_parameters(arch: Architecture, lora: Lora, shared_by_experts: bool = False) -> int:
    """Parameters of LoRA adapters on `arch`: rank × (inputs + outputs) for each adapted linear layer. A target
    written as a regular expression counts as every linear layer (an upper bound); an MoE layer's experts count
    each, or once where they share one (`shared_by_experts`: Megatron-Bridge's, per expert-parallel rank)."""
    q_out, kv_out = arch.heads * arch.head_dim, arch.kv_heads * arch.head_dim
    dense_mlp = arch.shared_expert_intermediate if arch.experts else arch.intermediate
    shapes = {"q_proj": [(arch.hidden, q_out, 1)], "k_proj": [(arch.hidden, kv_out, 1)],
              "v_proj": [(arch.hidden, kv_out, 1)], "o_proj": [(q_out, arch.hidden, 1)]}
    for name in ("gate_proj", "up_proj", "down_proj"):
        shapes[name] = [(arch.hidden, dense_mlp, 1)] + (
            [(arch.hidden, arch.expert_intermediate, 1 if shared_by_experts else arch.experts)] if arch.experts else [])
    targets = lora.target_modules
    names = set(_LINEAR_NAMES) if isinstance(targets, str) else {t.rsplit(".", 1)[-1] for t in targets}
    if isinstance(lora.exclude_modules, tuple):
        names -= {t.rsplit(".", 1)[-1] for t in lora.exclude_modules}
    per_layer = sum(lora.rank * (fan_in + fan_out) * count for name in names & set(_LINEAR_NAMES)
                    for fan_in, fan_out, count in shapes[name])
    return per_layer * arch.layers


# Megatron-Bridge's LoRA targets (the fused layers of megatron-core) by the Hugging Face layers each covers.
_MEGATRON_LINEARS = {"linear_qkv": ("q_proj", "k_proj", "v_proj"), "linear_proj": ("o_proj",),
                     "linear_fc1": ("gate_proj", "up_proj"), "linear_fc2": ("down_proj",)}


def _hf_lora_targets(lora: Lora) -> Lora:
    """A Megatron role's LoRA with its targets under the Hugging Face names lora_parameters counts: a fused layer's
    one A counts once per layer it covers, an upper bound."""
    targets = lora.target_modules
    if isinstance(targets, str):
        return lora
    names = tuple(hf for t in targets for hf in _MEGATRON_LINEARS.get(t, (t,)))
    return replace(lora, target_modules=names)


def architecture_from_table(entry: TableEntry) -> Architecture:
    head_dim = entry.head_dim or entry.hidden // entry.heads
    counts = parameter_breakdown(entry.layers, entry.hidden, entry.heads, entry.kv_heads, head_dim,
                                 entry.intermediate, entry.vocab, entry.tied_embeddings, entry.qkv_bias, entry.qk_norm)
    # The table's rows are Qwen2.5 (and models of its shape), Qwen3 and Llama.
    family = "llama" if entry.name.startswith("Llama") else "qwen3" if entry.name.startswith("Qwen3") else "qwen2"
    return Architecture(name=entry.name, source="built-in table", model_type=family, layers=entry.layers,
                        hidden=entry.hidden,
                        heads=entry.heads, kv_heads=entry.kv_heads, head_dim=head_dim,
                        intermediate=entry.intermediate, vocab=entry.vocab, tied_embeddings=entry.tied_embeddings,
                        params=counts["total"], qkv_bias=entry.qkv_bias, qk_norm=entry.qk_norm)


class IncompleteConfig(ValueError):
    pass


def architecture_from_config(config: Mapping[str, Any], source: str, name: str | None = None) -> Architecture:
    """Read a Hugging Face config.json (as a dict). Raises IncompleteConfig when a figure memory needs is missing."""
    cfg: Mapping[str, Any] = config
    if "num_hidden_layers" not in cfg and isinstance(cfg.get("text_config"), Mapping):
        cfg = cfg["text_config"]  # multimodal configs nest the language model's figures
    missing = [k for k in ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")
               if not isinstance(cfg.get(k), int)]
    if missing:
        raise IncompleteConfig(f"the model config has no {', '.join(missing)}")
    layers, hidden, heads = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or hidden // heads
    intermediate = cfg.get("intermediate_size") or 4 * hidden
    model_type = str(cfg.get("model_type") or config.get("model_type") or "transformer")
    # transformers' PretrainedConfig defaults to tied embeddings, but the Llama and Qwen families set it
    # explicitly; a config that does not say is read as untied, the larger (safer) estimate.
    tied = bool(cfg.get("tie_word_embeddings", config.get("tie_word_embeddings", False)))
    qkv_bias = bool(cfg.get("attention_bias", model_type in ("qwen2", "qwen2_moe")))
    experts = routed_experts(cfg)
    expert_intermediate = int(cfg.get("moe_intermediate_size") or (intermediate if experts else 0))
    shared = int(cfg.get("shared_expert_intermediate_size") or 0)
    if not shared and cfg.get("n_shared_experts"):
        shared = int(cfg["n_shared_experts"]) * expert_intermediate
    kv_lora_rank = cfg.get("kv_lora_rank")
    rope_dim = int(cfg.get("qk_rope_head_dim") or 0)
    qk_norm = model_type.startswith("qwen3")  # Qwen3 normalises queries and keys per head
    counts = parameter_breakdown(layers, hidden, heads, kv_heads, head_dim, intermediate, cfg["vocab_size"], tied,
                                 qkv_bias, qk_norm, experts,
                                 expert_intermediate, shared, kv_lora_rank, rope_dim)
    return Architecture(name=name or model_type, source=source, layers=layers, hidden=hidden, heads=heads,
                        kv_heads=kv_heads, head_dim=head_dim, intermediate=intermediate, vocab=cfg["vocab_size"],
                        tied_embeddings=tied, params=counts["total"], qkv_bias=qkv_bias, qk_norm=qk_norm,
                        experts=experts,
                        expert_intermediate=expert_intermediate, shared_expert_intermediate=shared,
                        kv_lora_rank=kv_lora_rank, qk_rope_head_dim=rope_dim, model_type=model_type)


# ---- the formulas, as plain functions of numbers (the tests check them against performance.md) ----------------

def zero_model_states(params: float, stage: int, n_d: int, k: int = 12) -> float:
    """Bytes of model states per GPU under ZeRO (Rajbhandari et al.): 2Ψ parameters, 2Ψ gradients, KΨ optimizer."""
    if stage == 0:
        return (4 + k) * params
    if stage == 1:
        return 4 * params + k * params / n_d
    if stage == 2:
        return 2 * params + (2 + k) * params / n_d
    if stage == 3:
        return (4 + k) * params / n_d
    raise ValueError(f"ZeRO has stages 0-3, not {stage}")


def megatron_bytes_per_param(dp: int, distributed_optimizer: bool) -> float:
    """bf16 parameter 2 + fp32 main gradient 4 + fp32 master 4 + Adam 8, the last 12 sharded over DP when the
    distributed optimizer is on."""
    return 6 + 12 / dp if distributed_optimizer else 18


def kv_bytes_per_token(arch: Architecture, tp: int = 1, pp: int = 1, dtype_bytes: int = 2) -> int:
    """KV cache bytes per token on one GPU of a rollout engine: K and V for each layer on this pipeline stage and
    each KV head on this TP rank (heads are replicated when there are fewer than TP ranks)."""
    layers = math.ceil(arch.layers / pp)
    if arch.kv_lora_rank is not None:
        return layers * (arch.kv_lora_rank + arch.qk_rope_head_dim) * dtype_bytes
    heads = max(1, math.ceil(arch.kv_heads / tp))
    return 2 * layers * heads * arch.head_dim * dtype_bytes


def vllm_kv_pool(total: float, gpu_memory_utilization: float, weights: float, non_torch: float,
                 activation_peak: float) -> float:
    """vLLM's KV budget: its share of the whole GPU less what the profiling run found in use."""
    return total * gpu_memory_utilization - weights - non_torch - activation_peak


def sglang_kv_pool(total: float, mem_fraction_static: float, free_after_weights: float) -> float:
    """SGLang's KV pool: the memory still free after loading the weights, less the (1 - mem_fraction_static) share
    of the whole GPU it keeps back for activations and CUDA graphs. Memory other processes hold on the GPU
    shrinks this pool, where vLLM would refuse to start."""
    return free_after_weights - total * (1 - mem_fraction_static)


def layer_activation_bytes(tokens: float, hidden: int, intermediate: int, tp: int, sequence_parallel: bool) -> float:
    """One layer's stored activations for `tokens` tokens (bf16, FlashAttention: no s² attention term)."""
    c = 18 + 4 * intermediate / hidden  # Megatron's generalisation of Korthikanti's 34 (34 when ffn = 4h)
    if sequence_parallel or tp == 1:
        return c * tokens * hidden / tp
    return tokens * hidden * (10 + (c - 10) / tp)


def logits_bytes(tokens: float, vocab: int, tp: int = 1, chunk_tokens: int | None = None) -> float:
    """fp32 logits for log-probs and entropy; chunking bounds the tokens materialised at once."""
    live = min(tokens, chunk_tokens) if chunk_tokens else tokens
    return live * vocab / tp * 4


# ---- per role ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Lengths:
    sample_tokens: int  # prompt + response, the longest a sample can be
    prompt_tokens: int | None
    response_tokens: int


def sequence_lengths(exp: Experiment) -> Lengths:
    response = exp.sampling.max_new_tokens
    prompt = exp.data.max_prompt_length
    rollout = exp.role("rollout")
    max_len = rollout.engine_args().get("max_model_len") if rollout else None
    if prompt is not None:
        total = prompt + response
        if isinstance(max_len, int) and max_len > 0:
            total = min(total, max_len)
    elif isinstance(max_len, int) and max_len > 0:
        total = max(max_len, response)
    else:
        total = response
    if exp.sampling.max_total_length:  # a limit on prompt + response bounds every sample
        total = min(total, exp.sampling.max_total_length)
    return Lengths(total, prompt, response)


SHARDED_DP = ("fsdp", "fsdp2", "deepspeed")


@dataclass
class RoleEstimate:
    """A role's memory on one GPU: its own busiest phase, and what it leaves resident while another role runs."""

    role: str
    kind: str  # "train", "forward", "vllm", "sglang", "hf"
    phase: str
    terms: list[MemoryTerm]
    resident: int
    offloads: bool
    model: str | None
    kv_tokens: int | None = None
    engine_share: int | None = None  # vLLM/SGLang: the reservation their knob asks for
    weights: int = 0
    activations: int = 0
    kv_per_token: int = 0
    min_kv_tokens: int = 0
    notes: tuple[str, ...] = ()

    @property
    def peak(self) -> int:
        return sum(t.bytes for t in self.terms)


def _t(name: str, value: float) -> MemoryTerm:
    return MemoryTerm(name, int(round(value)))


def _distributed_optimizer(role: Role) -> bool:
    # The Experiment does not carry Megatron's use_distributed_optimizer yet; every RL framework we lower
    # defaults it on, so the estimate assumes it unless a future field says otherwise.
    return bool(getattr(role, "distributed_optimizer", getattr(role.parallelism, "distributed_optimizer", True)))


def runtime_logits_chunk(role: Role, arch: Architecture) -> int | None:
    """The positions of logits rlcfg's runtime computes at once for `role`: LOGPROB_CHUNK_TOKENS on its fsdp
    backend for the CHUNKED_HEAD_FAMILIES, else None (all of them)."""
    if role.backend in ("fsdp", "fsdp2") and arch.model_type in CHUNKED_HEAD_FAMILIES:
        return LOGPROB_CHUNK_TOKENS
    return None


def estimate_training(role: Role, arch: Architecture, placement: RolePlacement, lengths: Lengths,
                      logits_chunk_tokens: int | None = None) -> RoleEstimate:
    """A trainer (actor, critic) or a forward-only model (reference, reward model) on FSDP, DeepSpeed or Megatron.
    With pipeline parallelism the busier of the first stage (embedding, most micro-batches in flight) and the
    last stage (output layer and logits) is the one reported."""
    par = role.parallelism
    world = max(len(placement.gpus), 1)
    stages = [0, par.pp - 1] if role.backend == "megatron" and par.pp > 1 else [0]
    best: RoleEstimate | None = None
    for stage in stages:
        e = _training_stage(role, arch, world, lengths, logits_chunk_tokens, stage)
        if best is None or e.peak > best.peak:
            best = e
    assert best is not None
    return best


def _training_stage(role: Role, arch: Architecture, world: int, lengths: Lengths, logits_chunk_tokens: int | None,
                    stage: int) -> RoleEstimate:
    par = role.parallelism
    counts = _breakdown(arch)
    trains = role.trains
    value_head = role.name in ("critic", "reward")
    megatron = role.backend == "megatron"
    dtype_bytes = 4 if (role.model and role.model.dtype == "float32") else 2
    terms: list[MemoryTerm] = []
    output = arch.hidden if value_head else counts["output"]
    total_params = counts["total"] - counts["output"] + output

    pp = par.pp if megatron else 1
    first, last = stage == 0, stage == pp - 1
    if megatron:
        tp, cp = par.tp, par.cp
        ep, etp = par.ep, par.etp or par.tp
        dp = max(world // (tp * pp * cp), 1)
        layers_here = math.ceil(arch.layers / pp)
        # Megatron keeps the input embedding on the first stage and the output layer on the last (a tied
        # embedding gets a copy there); dense weights split over TP, experts over EP × expert TP.
        ends = (counts["embedding"] if first else 0) + ((output or counts["embedding"]) if last and pp > 1 else 0) \
            + (output if pp == 1 else 0)
        shard = (layers_here * counts["layer_dense"] + ends) / tp + layers_here * counts["layer_experts"] / (ep * etp)
        distributed = _distributed_optimizer(role)
        opt_div = dp * cp if distributed else 1
        if trains and role.lora is not None:
            # The frozen base in its dtype; the adapters (split over TP as their layers are, counted as if whole on
            # each TP rank: an upper bound; the experts of a rank share one pair per layer) have bf16 weights, fp32
            # main gradients, fp32 master weights and Adam.
            adapters = lora_parameters(arch, _hf_lora_targets(role.lora), shared_by_experts=True) \
                * layers_here / arch.layers
            terms.append(_t("parameters (frozen base)", dtype_bytes * shard))
            terms.append(_t("parameters (LoRA adapters)", 2 * adapters))
            terms.append(_t("gradients (LoRA adapters, fp32 main grads)", 4 * adapters))
            terms.append(_t("optimizer states (LoRA adapters, fp32 master + Adam)", 12 * adapters / opt_div))
        elif trains:
            terms.append(_t("parameters (bf16)", 2 * shard))
            terms.append(_t("gradients (fp32 main grads)", 4 * shard))
            terms.append(_t("optimizer states (fp32 master + Adam"
                            + (f", distributed over DP {opt_div})" if distributed else ", not distributed)"),
                            12 * shard / opt_div))
        else:
            terms.append(_t("parameters", dtype_bytes * shard))
        states = {t.name: t.bytes for t in terms}
        tokens_div = cp
    else:
        # Tensor parallelism inside FSDP (AReaL 1.0's t > 1) splits each layer's attention and MLP over the TP
        # group; the parameter shards already cover it, since TP × FSDP together split the weights over all GPUs.
        tp, cp = max(par.tp, 1), 1
        layers_here = arch.layers
        shard_size = max(min(par.fsdp_shard or world, world), 1)
        if trains and role.lora is not None:
            # The frozen base in the compute dtype; only the adapters have gradients and optimizer states.
            adapters = lora_parameters(arch, role.lora)
            terms.append(_t(f"parameters (frozen base, sharded over {shard_size})",
                            dtype_bytes * total_params / shard_size))
            terms.append(_t("parameters (LoRA adapters, fp32, sharded)", 4 * adapters / shard_size))
            terms.append(_t("gradients (LoRA adapters, fp32, sharded)", 4 * adapters / shard_size))
            terms.append(_t("optimizer states (Adam, LoRA adapters, sharded)", 8 * adapters / shard_size))
        elif trains:
            # fp32 master weights (the RL frameworks' FSDP default), so parameters and gradients are fp32 too:
            # 16 B/param over the shard group, ZeRO-3's figure.
            terms.append(_t(f"parameters (fp32 master, sharded over {shard_size})", 4 * total_params / shard_size))
            terms.append(_t("gradients (fp32, sharded)", 4 * total_params / shard_size))
            terms.append(_t("optimizer states (Adam, sharded)", 8 * total_params / shard_size))
        else:
            terms.append(_t(f"parameters (sharded over {shard_size})", dtype_bytes * total_params / shard_size))
        if role.offload.cpu_offload_during_step:
            # CPUOffload keeps the shards on the host even during compute; only the gathered layers come over.
            terms = [MemoryTerm(t.name + " [on CPU]", 0) for t in terms]
        states = {t.name: t.bytes for t in terms}
        largest_unit = max(counts["layer_dense"] + counts["layer_experts"], counts["embedding"])
        # FSDP gathers a layer over its shard group only: each GPU rebuilds its TP slice of it.
        terms.append(_t("all-gathered layers (bf16, current + prefetched)", 2 * 2 * largest_unit / tp))
        tokens_div = max(par.sp, 1)

    def micro_tokens(samples: int | None) -> int:
        if role.sequence_packing and role.max_tokens_per_micro_batch:
            return role.max_tokens_per_micro_batch
        return (samples or 1) * lengths.sample_tokens

    sp_megatron = megatron and par.sequence_parallel
    # Megatron splits the output layer over TP; whether an FSDP engine's TP plan does is the engine's choice, so
    # its logits are counted whole.
    logits_tp = tp if megatron else 1
    chunked = ", chunked" if logits_chunk_tokens else ""
    where = "" if pp == 1 else (" on the first pipeline stage" if first else " on the last pipeline stage")
    off = role.offload

    def kept(name: str) -> bool:
        # What stays on the GPU between phases. FSDP frees gradients after each optimizer step; Megatron keeps its
        # contiguous gradient buffer unless told to free it.
        return (("optimizer" in name and not off.optimizer) or ("gradients" in name and megatron and not off.grads)
                or ("parameters" in name and not off.params))

    state_terms = [t for t in terms if t.name in states]
    buffers = [t for t in terms if t.name not in states]  # FSDP's gathered layers
    # A forward pass needs the weights; gradients and optimizer states are there only when nothing moved them off.
    forward_states = [t for t in state_terms if t.name.startswith("parameters") or kept(t.name)]
    phases: list[tuple[str, list[MemoryTerm]]] = []
    if trains:
        tokens = micro_tokens(role.micro_batch_size) / tokens_div
        if role.gradient_checkpointing:
            stored = 2 * tokens * arch.hidden * layers_here / (tp if sp_megatron else 1)
            live = layer_activation_bytes(tokens, arch.hidden, arch.intermediate, tp, sp_megatron)
            act = [_t("activations (checkpointed layer inputs)", stored),
                   _t("activations (one layer recomputed)", live)]
        else:
            act = [_t(f"activations ({layers_here} layers, no recomputation)",
                      layers_here * layer_activation_bytes(tokens, arch.hidden, arch.intermediate, tp, sp_megatron))]
        if pp > 1 and first:
            # 1F1B keeps up to pp micro-batches in flight on the first stage (more with interleaving).
            factor = pp * (1 + (pp - 1) / (pp * par.vpp)) if par.vpp else pp
            act = [MemoryTerm(t.name + f" × {factor:g} in flight", int(t.bytes * factor)) for t in act]
        head = [_t(f"logits (fp32{chunked})", logits_bytes(tokens, arch.vocab, logits_tp, logits_chunk_tokens))] \
            if last and not value_head else []
        phases.append(("train step" + where, state_terms + buffers + act + head))
    f_tokens = micro_tokens(role.forward_micro_batch_size or role.micro_batch_size) / tokens_div
    f_act = [_t("activations (forward, one layer)",
                layer_activation_bytes(f_tokens, arch.hidden, arch.intermediate, tp, sp_megatron))]
    if last and not value_head:
        f_act.append(_t(f"logits (fp32{chunked})", logits_bytes(f_tokens, arch.vocab, logits_tp, logits_chunk_tokens)))
    phases.append(("value forward" if value_head else "log-prob forward" + where, forward_states + buffers + f_act))
    phase, chosen = max(phases, key=lambda p: sum(t.bytes for t in p[1]))
    terms = chosen + [MemoryTerm("CUDA context and NCCL buffers", CONTEXT_BYTES)]
    resident = CONTEXT_BYTES + sum(value for name, value in states.items() if kept(name))
    offloads = off.params and (not trains or off.optimizer)
    return RoleEstimate(role.name, "train" if trains else "forward", phase, terms, resident, offloads, arch.name)


def estimate_rollout(role: Role, arch: Architecture, capacity: int, lengths: Lengths) -> RoleEstimate:
    engine = role.engine_args()
    tp, pp = role.parallelism.tp, role.parallelism.pp
    counts = _breakdown(arch)
    weights = 2 * (counts["total"] / (tp * pp))
    batched = engine.get("max_num_batched_tokens") or max(lengths.sample_tokens, 8192)
    max_seqs = engine.get("max_num_seqs") or 256
    # The profiling run's peak: one batch of max_num_batched_tokens through one layer (hidden states, attention
    # projections, the SwiGLU intermediate) plus the sampler's fp32 logits for max_num_seqs sequences.
    act = batched * 2 * (2 * arch.hidden + (arch.heads + 2 * arch.kv_heads) * arch.head_dim / tp
                         + 3 * arch.intermediate / tp) + max_seqs * arch.vocab * 4 / tp
    per_token = kv_bytes_per_token(arch, tp, pp)
    max_model_len = engine.get("max_model_len") or lengths.sample_tokens
    notes: list[str] = []
    if role.backend == "vllm":
        util = float(engine.get("gpu_memory_utilization") or 0.9)
        share = capacity * util
        kv = vllm_kv_pool(capacity, util, weights, VLLM_NON_TORCH_BYTES, act)
        terms = [_t(f"weights (bf16, TP {tp})", weights), _t("activation peak (profiling run)", act),
                 _t("non-torch memory and CUDA graphs", VLLM_NON_TORCH_BYTES), _t("kv cache", max(kv, 0))]
        kind = "vllm"
        notes.append(f"vLLM takes gpu_memory_utilization {util:g} of the whole GPU ({_gib(share)}); "
                     "the KV cache gets what is left of it after weights and activations")
    elif role.backend == "sglang":
        frac = float(engine.get("mem_fraction_static") or 0.88)
        share = capacity * frac
        # On an otherwise empty GPU: free after weights = capacity - context - weights.
        kv = sglang_kv_pool(capacity, frac, capacity - CONTEXT_BYTES - weights)
        terms = [_t(f"weights (bf16, TP {tp})", weights), _t("kv cache", max(kv, 0)),
                 _t("activations and CUDA graphs (outside the static share)", act),
                 _t("CUDA context and NCCL buffers", CONTEXT_BYTES)]
        kind = "sglang"
        notes.append(f"SGLang keeps mem_fraction_static {frac:g} of the GPU for weights and the KV pool and leaves "
                     "the rest to activations; memory other roles hold on the GPU shrinks its KV pool")
    else:
        # transformers generate: weights and a KV cache for the whole batch, nothing reserved up front.
        share = None
        kv = max_seqs * lengths.sample_tokens * per_token
        terms = [_t(f"weights (bf16, TP {tp})", weights), _t("kv cache (whole batch)", kv),
                 _t("activations", act), _t("CUDA context", CONTEXT_BYTES)]
        kind = "hf"
    kv_tokens = int(max(kv, 0) // per_token) if per_token else None
    offloads = role.offload.params
    if share is not None:
        resident = CONTEXT_BYTES if offloads else int(share + (act if kind == "sglang" else 0))
    else:
        resident = CONTEXT_BYTES if offloads else int(sum(t.bytes for t in terms))
    return RoleEstimate(role.name, kind, "generation", terms, resident, offloads, arch.name, kv_tokens=kv_tokens,
                        engine_share=int(share) if share is not None else None, weights=int(weights),
                        activations=int(act), kv_per_token=per_token, min_kv_tokens=int(max_model_len),
                        notes=tuple(notes))


# ---- GPUs ------------------------------------------------------------------------------------------------------

def _gib(n: float) -> str:
    return f"{n / GiB:.1f} GiB"


def _residents(members: list[RoleEstimate]) -> dict[str, int]:
    """What each colocated role holds while another one has its phase. An SGLang engine that stays awake holds
    the static share it sized at start-up around its neighbours' resident memory, so it shrinks by theirs."""
    plain = {e.role: e.resident for e in members}
    out = dict(plain)
    for e in members:
        if e.kind == "sglang" and not e.offloads:
            neighbours = sum(v for r, v in plain.items() if r != e.role)
            out[e.role] = max((e.engine_share or 0) - neighbours, e.weights + CONTEXT_BYTES)
    return out


def _phase_on_gpu(active: RoleEstimate, others: list[RoleEstimate], residents: Mapping[str, int]
                  ) -> tuple[int, list[tuple[str, int]]]:
    """Peak bytes while `active` runs its phase with `others` resident, and the named contributions."""
    others_resident = sum(residents[o.role] for o in others)
    parts = [(f"{o.role}: kept resident", residents[o.role]) for o in others if residents[o.role]]
    if active.kind == "sglang":
        # SGLang sizes its pool from the free memory it finds, so resident neighbours shrink the pool instead of
        # adding to it; the peak is its static share (or more, when the neighbours leave it no pool at all).
        static = max(active.engine_share or 0, others_resident + active.weights + CONTEXT_BYTES)
        peak = static + active.activations
        pool = (active.engine_share or 0) - others_resident - active.weights - CONTEXT_BYTES
        parts += [(f"{active.role}: weights", active.weights), (f"{active.role}: kv cache", max(pool, 0)),
                  (f"{active.role}: activations and CUDA graphs", active.activations)]
        return int(peak), parts
    parts += [(f"{active.role}: {t.name}", t.bytes) for t in active.terms]
    return int(active.peak + others_resident), parts


def said(exp: Experiment, role_name: str) -> str:
    """A role as the user's config names it, rlcfg's role beside it (`policy_trainer (actor)`)."""
    role = exp.role(role_name)
    section = role.section if role is not None else None
    return f"{section} ({role_name})" if section and section != role_name else role_name


def _said_term(exp: Experiment, term: str) -> str:
    """`actor: logits (fp32)` in the user's words: `actor_train (actor): logits (fp32)`."""
    role_name, sep, rest = term.partition(": ")
    return f"{said(exp, role_name)}{sep}{rest}" if sep else term


def _advice(biggest: str, est: dict[str, RoleEstimate], over: int, capacity: int, others_resident: int,
            exp: Experiment) -> str:
    role_name, _, term = biggest.partition(": ")
    role = exp.role(role_name)
    shown = said(exp, role_name)
    need = f"{_gib(over)} too much"
    if term == "kept resident":
        return (f"{need}: {shown} keeps {_gib(est[role_name].resident)} on the GPU while the others run; "
                f"offload {shown} between phases (weights, and the optimizer for a trainer; sleep mode for a "
                "rollout engine)")
    if role is None:
        return need
    if term.startswith("logits"):
        # A role that only runs forward passes (a reference, a reward model) sizes them with its forward
        # micro-batch, which some dialects set apart from the training one (ROLL's infer_batch_size).
        setting = "micro_batch_size" if role.trains else "forward_micro_batch_size"
        mb = (role.micro_batch_size if role.trains else role.forward_micro_batch_size or role.micro_batch_size) or 1
        key = role.key_for(setting)
        which = f"`{key}`" if key else f"{shown}'s {'micro-batch' if role.trains else 'forward micro-batch'}"
        lower = f"lower {which} ({mb} → {max(mb // 2, 1)}), " if mb > 1 else ""
        return (f"{need}: the fp32 logits grow with the tokens of a micro-batch; {lower}pack sequences with a smaller "
                "token budget, compute log-probs in chunks, or shorten the longest response")
    if term.startswith("activations"):
        if not role.gradient_checkpointing:
            return f"{need}: turn on gradient checkpointing (recomputation) for {shown}"
        mb = role.micro_batch_size or 1
        key = role.key_for("micro_batch_size")
        which = f"`{key}`" if key else f"{shown}'s micro-batch"
        return (f"{need}: lower {which} ({mb} → {max(mb // 2, 1)}) or add tensor/sequence/"
                "context parallelism")
    if term.startswith(("optimizer", "gradients", "parameters", "weights")):
        if role.name == "rollout":
            return f"{need}: raise the rollout's tensor parallel size ({role.parallelism.tp} → {role.parallelism.tp * 2})"
        if role.backend == "megatron":
            return (f"{need}: raise {shown}'s tensor or pipeline parallel size (TP {role.parallelism.tp}, "
                    f"PP {role.parallelism.pp}) or give it more GPUs")
        return f"{need}: shard {shown} over more GPUs, or offload its parameters and optimizer to CPU"
    if term == "kv cache" or role.name == "rollout":
        e = est[role_name]
        if e.kind == "vllm":
            util = dict(role.engine).get("gpu_memory_utilization") or 0.9
            fit = math.floor((capacity - others_resident) / capacity * 20) / 20
            if 0 < fit < util:
                return (f"{need}: lower gpu_memory_utilization ({util:g} → {fit:.2f}) or offload the roles that "
                        "stay resident during generation")
            # The engine's share already leaves the resident roles their room: the peak is theirs.
            return f"{need}: offload the roles that stay resident during generation, or give them GPUs of their own"
        return f"{need}: lower the rollout engine's memory share, or offload the colocated roles between phases"
    return need


TYPICAL_SHARE = 0.5  # a typical step's samples, as a share of the longest: RL responses rarely all hit the cap


def _scaled(lengths: Lengths, share: float) -> Lengths:
    def part(n: int | None) -> int | None:
        return None if n is None else max(int(n * share), 1)

    return Lengths(max(int(lengths.sample_tokens * share), 1), part(lengths.prompt_tokens), part(lengths.response_tokens))


def estimate(exp: Experiment, placements: Iterable[RolePlacement], archs: Mapping[str, Architecture],
             capacity: int, gpu_label: str | None, model_source: str) -> tuple[MemoryPlan, list[tuple[str, str, str, str]]]:
    """The memory plan, and problems as (code, role, message, hint) for the caller to turn into diagnostics.

    Weights, gradients, optimizer states and buffers do not depend on how long the samples are; activations,
    logits and the KV cache do. A GPU that overflows only when every sample of a micro-batch is at its longest is a
    warning that says up to which length it fits; one that overflows at a typical length (half the longest), or
    with the length-independent terms alone, is an error."""
    placements = list(placements)
    worst = sequence_lengths(exp)
    plan, problems, totals = _estimate(exp, placements, archs, capacity, gpu_label, model_source, worst)
    if not any(gpus for *_rest, gpus in problems):
        return plan, [p[:4] for p in problems]
    _, _, typical = _estimate(exp, placements, archs, capacity, gpu_label, model_source, _scaled(worst, TYPICAL_SHARE))
    plan = replace(plan, verdicts=tuple(
        v if v.fits else replace(v, fits_typical=typical.get(tuple(sorted(v.gpus)), capacity + 1) <= capacity)
        for v in plan.verdicts))
    out: list[tuple[str, str, str, str]] = []
    for code, role, message, hint, gpus in problems:
        if gpus is None or typical.get(gpus, capacity + 1) > capacity:
            out.append((code, role, message, hint))
            continue
        longest = _longest_fitting(exp, placements, archs, capacity, gpu_label, model_source, worst, gpus)
        out.append(("RLC502", role,
                    f"{message}, with every sample at its longest ({worst.sample_tokens:,} tokens); at a typical "
                    f"length it fits, and a micro-batch fits while its samples average up to about {longest:,} tokens",
                    f"a step whose samples run long may run out of memory: {hint}" if hint else
                    "a step whose samples run long may run out of memory"))
    return plan, out


def _longest_fitting(exp: Experiment, placements: list, archs: Mapping[str, Architecture], capacity: int,
                     gpu_label: str | None, model_source: str, worst: Lengths, gpus: tuple) -> int:
    """The longest sample length (tokens) at which the GPUs `gpus` still fit, by bisection on the share of the
    longest."""
    low, high = 1, worst.sample_tokens
    while high - low > max(worst.sample_tokens // 256, 1):
        middle = (low + high) // 2
        _, _, totals = _estimate(exp, placements, archs, capacity, gpu_label, model_source,
                                 _scaled(worst, middle / worst.sample_tokens))
        if totals.get(gpus, capacity + 1) <= capacity:
            low = middle
        else:
            high = middle
    return low


def _estimate(exp: Experiment, placements: list, archs: Mapping[str, Architecture], capacity: int,
              gpu_label: str | None, model_source: str, lengths: Lengths
              ) -> tuple[MemoryPlan, list[tuple[str, str, str, str, tuple | None]], dict[tuple, int]]:
    """The estimate at one sample length: the plan, problems (code, role, message, hint, and the GPUs of a peak that
    does not fit), and the peak of each set of GPUs that hold the same roles."""
    est: dict[str, RoleEstimate] = {}
    problems: list[tuple[str, str, str, str]] = []
    for p in placements:
        role = exp.role(p.role)
        if role is None or not p.gpus or role.name not in archs:
            continue
        arch = archs[role.name]
        if role.backend in ("vllm", "sglang", "hf"):
            e = estimate_rollout(role, arch, capacity, lengths)
            if e.kv_tokens is not None and e.kind != "hf" and e.kv_tokens < e.min_kv_tokens:
                problems.append(("RLC500", role.name,
                                 f"the rollout engine's KV cache holds {max(e.kv_tokens, 0):,} tokens, fewer than one "
                                 f"sequence of max_model_len {e.min_kv_tokens:,}: the engine refuses to start",
                                 "raise the engine's memory share or tensor parallel size, or lower max_model_len",
                                 None))
        else:
            e = estimate_training(role, arch, p, lengths, runtime_logits_chunk(role, arch))
        est[role.name] = e

    group_of = {p.role: p.group for p in placements}
    by_gpu: dict[int, tuple[str, ...]] = {}
    for p in placements:
        if p.role in est:
            for g in p.gpus:
                by_gpu[g] = by_gpu.get(g, ()) + (p.role,)
    sets: dict[tuple[str, ...], list[int]] = {}
    for g, roles in by_gpu.items():
        sets.setdefault(roles, []).append(g)

    verdicts: list[GpuVerdict] = []
    totals: dict[tuple, int] = {}
    for roles, gpus in sorted(sets.items(), key=lambda kv: min(kv[1])):
        # Roles colocated in one group take turns (phases); roles from different groups on one GPU (an overlap
        # that RLC401 reports) run at the same time, so their peaks add.
        groups: dict[int, list[str]] = {}
        for r in roles:
            groups.setdefault(group_of[r], []).append(r)
        total, parts_all = 0, []
        for members in groups.values():
            best: tuple[int, list[tuple[str, int]]] = (-1, [])
            residents = _residents([est[m] for m in members])
            for m in members:
                e = est[m]
                if e.kind != "sglang" or not e.kv_per_token:
                    continue
                neighbours = sum(residents[o] for o in members if o != m)
                pool_tokens = int(((e.engine_share or 0) - neighbours - e.weights - CONTEXT_BYTES) // e.kv_per_token)
                if neighbours and pool_tokens < e.min_kv_tokens:
                    problems.append(("RLC500", m,
                                     f"{said(exp, m)}'s SGLang KV pool would hold {max(pool_tokens, 0):,} tokens "
                                     "after the "
                                     f"{_gib(neighbours)} its colocated roles keep on {_gpu_ranges(sorted(gpus))}, "
                                     f"fewer than one sequence of {e.min_kv_tokens:,}: SGLang stops with 'Not enough "
                                     "memory'", "raise mem_fraction_static, or offload the colocated roles between "
                                     "phases", None))
            for active in members:
                others = [est[o] for o in members if o != active]
                peak, parts = _phase_on_gpu(est[active], others, residents)
                if peak > best[0]:
                    best = (peak, parts)
            total += best[0]
            parts_all += best[1]
        name, _ = max(parts_all, key=lambda kv: kv[1]) if parts_all else ("", 0)
        totals[tuple(sorted(gpus))] = int(total)
        fits = total <= capacity
        others_resident = sum(est[r].resident for r in roles if not name.startswith(r + ":"))
        if not fits:
            # A vLLM engine asks for its share of the whole GPU regardless of what its neighbours hold.
            advice = _advice(name, est, total - capacity, capacity, others_resident, exp)
        elif total > TIGHT * capacity:
            advice = (f"tight: {_gib(capacity - total)} to spare, which allocator fragmentation alone can take; "
                      "treat this as a likely out-of-memory")
        else:
            advice = None
        verdicts.append(GpuVerdict(gpus=tuple(sorted(gpus)), roles=roles, peak_bytes=int(total),
                                   capacity_bytes=capacity, fits=fits, biggest=name, advice=advice))
        if not fits:
            where = _gpu_ranges(sorted(gpus))
            problems.append(("RLC500", name.partition(":")[0] or roles[0],
                             f"{where} ({' + '.join(said(exp, r) for r in roles)}) "
                             f"{'needs' if len(gpus) == 1 else 'need'} about "
                             f"{_gib(total)} at {'its' if len(gpus) == 1 else 'their'} peak but "
                             f"{gpu_label or 'the GPU'} has {_gib(capacity)}; the biggest term is "
                             f"{_said_term(exp, name)} "
                             f"({_gib(dict(parts_all)[name])})", advice or "", tuple(sorted(gpus))))

    roles_mem = tuple(RoleMemory(role=e.role, per_gpu_bytes=e.peak, terms=tuple(e.terms),
                                 offloaded_between_phases=e.offloads, phase=e.phase, resident_bytes=e.resident,
                                 model=e.model, kv_cache_tokens=e.kv_tokens, notes=e.notes) for e in est.values())
    notes: list[str] = [f"worst case: every sample at its longest ({lengths.sample_tokens:,} tokens); a GPU that "
                        f"overflows only then is a warning, one that overflows at {TYPICAL_SHARE:.0%} of that length "
                        "an error"]
    rollout = est.get("rollout")
    if rollout and rollout.kv_tokens and rollout.kind != "hf":
        rp = next(p for p in placements if p.role == "rollout")
        engines = max(rp.dp, 1)
        per_engine = math.ceil(exp.schedule.samples_per_step / engines)
        fit = rollout.kv_tokens // max(lengths.sample_tokens, 1)
        if fit < per_engine:
            notes.append(f"rollout: each engine's KV cache holds about {fit:,} sequences of {lengths.sample_tokens:,} "
                         f"tokens at once, a step sends it {per_engine:,}: the rest wait (a throughput cost, not an "
                         "error)")
        else:
            notes.append(f"rollout: each engine's KV cache holds about {fit:,} full-length sequences; a step sends "
                         f"it {per_engine:,}")
    plan = MemoryPlan(model_source=model_source, roles=roles_mem, verdicts=tuple(verdicts),
                      architectures=tuple({a.name + a.source: a for a in archs.values()}.values()),
                      gpu_name=gpu_label, capacity_bytes=capacity, notes=tuple(notes))
    return plan, problems, totals


def _gpu_ranges(gpus: list[int]) -> str:
    """`GPU 3` or `GPUs 0-3`."""
    from rlcfg.plan.render import gpus_word, ranges

    return f"{gpus_word(gpus)} {ranges(gpus)}"


def _given_config_name(config: Mapping[str, Any], path: str, name: str | None) -> str | None:
    """The label of a --model-config architecture: the role's model name, unless the built-in table knows that
    model with other layers or width; then the config's own name, or its model type. A 32B config.json given for
    a config that names a 1.5B model is labelled as what it is."""
    entry = lookup(path) if path else None
    known = architecture_from_table(entry) if entry is not None else None
    if known is None or (known.layers, known.hidden) == (config.get("num_hidden_layers"), config.get("hidden_size")):
        return name
    return last_component(str(config.get("_name_or_path") or "")) or None


def resolve_architectures(exp: Experiment, model_config: Mapping[str, Any] | None, model_source: str | None,
                          model_configs: Mapping[str, Mapping[str, Any]] | None
                          ) -> tuple[dict[str, Architecture], list[tuple[str, str, str, str]]]:
    """Each GPU role's architecture: --model-config for the policy's family (actor, rollout, reference), else the
    config.json the CLI found at the role's model path, else the built-in table."""
    archs: dict[str, Architecture] = {}
    problems: list[tuple[str, str, str, str]] = []
    for role in exp.roles:
        if role.resources.gpus <= 0 or role.backend == "rule":
            continue
        path = role.model.path if role.model else ""
        name = last_component(path) or None
        arch: Architecture | None = None
        try:
            if model_config is not None and role.name in ("actor", "rollout", "reference"):
                arch = architecture_from_config(model_config, model_source or "--model-config",
                                                _given_config_name(model_config, path, name))
            elif model_configs and path in model_configs:
                arch = architecture_from_config(model_configs[path], f"config.json in {path}", name)
        except IncompleteConfig as exc:
            problems.append(("RLC501", role.name, f"cannot read {said(exp, role.name)}'s model architecture: {exc}",
                             "pass --model-config with the model's config.json"))
            continue
        if arch is None:
            entry = lookup(path) if path else None
            arch = architecture_from_table(entry) if entry is not None else None
        if arch is None:
            problems.append(("RLC501", role.name,
                             f"no memory estimate for {said(exp, role.name)}: its model `{path or '(none)'}` is not a local "
                             "directory with a config.json and matches no model family rlcfg knows",
                             "pass --model-config with the model's config.json (read as JSON, nothing downloaded)"))
            continue
        archs[role.name] = arch
    return archs, problems
