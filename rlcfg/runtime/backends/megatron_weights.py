"""Hugging Face ↔ Megatron-core weights for the dense Qwen2, Qwen3 and Llama families, for Qwen3-MoE, and for
DeepSeek-V3 (Moonlight): multi-latent attention, dense first layers, shared experts, sigmoid routing.

Megatron-core's GPTModel differs from the Hugging Face models in three ways that matter here:

- names: `model.layers.3.self_attn.o_proj.weight` is `decoder.layers.3.self_attention.linear_proj.weight`;
- fused tensors: Q, K and V are one `linear_qkv` matrix laid out group by group (each KV group's query heads,
  then its key head, then its value head), and the MLP's gate and up projections are one `linear_fc1` matrix
  (gate rows first);
- sharding: under tensor parallelism every rank holds a slice of the column-parallel matrices (rows) and of the
  row-parallel ones (columns); the vocabulary is padded so that it splits evenly; under pipeline parallelism
  each stage holds a contiguous run of layers, numbered from 0 on that stage; under expert parallelism each rank
  holds a contiguous run of each layer's experts, numbered from 0 on that rank, split again over the expert
  tensor-parallel ranks (a mesh of its own: a rank's expert-parallel rank is not its tensor-parallel rank).

Everything here is plain torch on whole tensors, so it is tested on CPU against tiny models; the functions are
exact inverses of each other (no arithmetic touches the values, only views, concatenation and slicing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from rlcfg.run_limits import MEGATRON_FAMILIES, routed_experts

FAMILIES = {name: name for name in MEGATRON_FAMILIES}

# Megatron-LM pads the vocabulary to a multiple of 128 × tp (`--make-vocab-size-divisible-by 128`); converted
# checkpoints (the `*-mcore` directories the templates point at) carry that padding, so rlcfg uses it too.
VOCAB_MULTIPLE = 128


class ConversionError(ValueError):
    """A model or layout the converter cannot map; the message names the values involved."""


@dataclass(frozen=True)
class ModelSpec:
    """The architecture figures of a decoder-only model, as a Hugging Face config.json gives them."""

    family: str  # qwen2, qwen3, llama, qwen3_moe, deepseek_v3
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    max_position: int
    rope_theta: float
    norm_eps: float
    tied: bool
    qkv_bias: bool
    qk_norm: bool
    rope_scaling_factor: float | None = None  # Llama 3.1's "llama3" rope scaling
    head_dim_given: bool = False  # config.json states head_dim (Qwen3), so hidden need not be heads × head_dim
    experts: int = 0  # routed experts per layer; 0: a dense model
    expert_ffn: int = 0
    experts_per_token: int = 0
    # Qwen3-MoE's norm_topk_prob: the chosen experts' softmax weights are rescaled to sum to 1 (softmax over the
    # top k logits, megatron-core's default order); without it they keep their share of the softmax over all.
    renormalize_topk: bool = True
    # DeepSeek-V3's multi-latent attention (MLA): queries from the hidden state (or through a rank-q_lora_rank
    # bottleneck when it is not 0), keys and values from one rank-kv_lora_rank latent; each head's query and key
    # have qk_nope_dim channels without rotary embedding and qk_rope_dim with it (the key's shared by the heads).
    mla: bool = False
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_dim: int = 0
    qk_rope_dim: int = 0
    v_head_dim: int = 0
    dense_layers: int = 0  # the first layers keep a dense MLP of `ffn` (DeepSeek-V3's first_k_dense_replace)
    shared_ffn: int = 0  # the shared experts' hidden size, all of them together; 0: none
    # DeepSeek-V3's router: a sigmoid score per expert, the top k chosen by score plus the checkpoint's per-expert
    # correction (e_score_correction_bias), within the best `router_group_topk` of `router_groups` expert groups;
    # the chosen scores renormalised and multiplied by `routed_scale`.
    sigmoid_routing: bool = False
    router_groups: int = 0
    router_group_topk: int = 0
    routed_scale: float = 0.0
    # The Megatron model keeps that correction (megatron-core's router.expert_bias) and routes with it; a framework
    # whose Megatron setup turns it off routes without it, and its Hugging Face export keeps the checkpoint's.
    expert_bias: bool = False
    source: str = "config.json"

    @property
    def group_size(self) -> int:
        return self.heads // self.kv_heads

    def moe_layer(self, layer: int) -> bool:
        """Whether global layer `layer` routes to experts (the others keep a dense MLP)."""
        return bool(self.experts) and layer >= self.dense_layers

    @classmethod
    def from_hf_config(cls, config: Mapping[str, Any], source: str = "config.json") -> "ModelSpec":
        model_type = str(config.get("model_type", ""))
        family = FAMILIES.get(model_type)
        if family is None:
            raise ConversionError(f"{source}: model_type {model_type!r} is not supported by the Megatron backend; "
                                  f"supported: {', '.join(FAMILIES)}")
        for key in ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size", "vocab_size"):
            if key not in config:
                raise ConversionError(f"{source}: {key} is missing")
        moe: dict[str, Any] = {}
        if family == "qwen3_moe":
            moe = _qwen3_moe_figures(config, source)
        elif family == "deepseek_v3":
            moe = _deepseek_v3_figures(config, source)
        elif routed_experts(config):
            raise ConversionError(f"{source}: model_type {model_type!r} with experts is not supported by the Megatron "
                                  "weight converter; its mixture-of-experts families are qwen3_moe and deepseek_v3")
        heads = int(config["num_attention_heads"])
        hidden = int(config["hidden_size"])
        head_dim = config.get("head_dim")
        rope_factor = None
        scaling = config.get("rope_scaling") or None
        if scaling:
            kind = scaling.get("rope_type", scaling.get("type"))
            if kind == "llama3" and family != "deepseek_v3":
                rope_factor = float(scaling.get("factor", 8.0))
            elif kind not in (None, "default"):
                raise ConversionError(f"{source}: rope_scaling type {kind!r} is not built by rlcfg's Megatron "
                                      "backend; only Llama 3's 'llama3' scaling (Llama models) is supported")
        theta = config.get("rope_theta")
        if theta is None:
            theta = (config.get("rope_parameters") or {}).get("rope_theta", 10000.0)
        if family == "llama":
            if bool(config.get("attention_bias")) or bool(config.get("mlp_bias")):
                raise ConversionError(f"{source}: Llama with attention_bias={config.get('attention_bias')} / "
                                      f"mlp_bias={config.get('mlp_bias')} has biases on o_proj and the MLP, which "
                                      "the converter does not map; only bias-free Llama is supported")
            qkv_bias = False
        else:
            qkv_bias = family == "qwen2"
        if family == "deepseek_v3":
            # Every head has its own key and value (expanded from the latent), each query and key
            # qk_nope_dim + qk_rope_dim channels.
            head_dim, kv_heads = moe["qk_nope_dim"] + moe["qk_rope_dim"], heads
        else:
            kv_heads = int(config.get("num_key_value_heads") or heads)
        return cls(
            family=family, layers=int(config["num_hidden_layers"]), hidden=hidden, heads=heads,
            kv_heads=kv_heads, head_dim=int(head_dim) if head_dim else (hidden // heads if heads else 0),
            ffn=int(config["intermediate_size"]), vocab=int(config["vocab_size"]),
            max_position=int(config.get("max_position_embeddings", 4096)), rope_theta=float(theta),
            norm_eps=float(config.get("rms_norm_eps", 1e-6)), tied=bool(config.get("tie_word_embeddings", False)),
            qkv_bias=qkv_bias, qk_norm=family in ("qwen3", "qwen3_moe"), rope_scaling_factor=rope_factor,
            head_dim_given=bool(head_dim), source=source, **moe)

    def check(self, tp: int = 1, ep: int = 1) -> None:
        """What Megatron-core accepts without complaint but computes wrongly or cannot shard."""
        if not self.head_dim_given and self.hidden % self.heads:
            raise ConversionError(
                f"{self.source}: hidden_size ({self.hidden}) is not a multiple of num_attention_heads "
                f"({self.heads}), and no head_dim is given; Megatron-core would silently use head dim "
                f"{self.hidden // self.heads} and lose {self.hidden % self.heads} channels")
        if self.heads % self.kv_heads:
            raise ConversionError(
                f"{self.source}: num_attention_heads ({self.heads}) is not a multiple of num_key_value_heads / "
                f"num_query_groups ({self.kv_heads}); megatron-core accepts it but grouped-query attention needs "
                "whole groups of query heads per KV head")
        if tp > 1 and self.kv_heads % tp:
            raise ConversionError(
                f"{self.source}: num_key_value_heads / num_query_groups ({self.kv_heads}) is not a multiple of "
                f"tensor parallel size ({tp}); each tensor-parallel rank must hold whole KV groups for the fused "
                f"QKV weight to be split; use a tensor parallel size that divides {self.kv_heads}")
        if ep > 1 and not self.experts:
            raise ConversionError(f"{self.source}: expert parallel size {ep} needs a mixture-of-experts model, and "
                                  "this one is dense; set the expert parallel size to 1")
        if self.experts and self.experts % ep:
            raise ConversionError(f"{self.source}: {self.experts} experts per layer do not split over expert "
                                  f"parallel size {ep}; each rank must hold as many experts as the next")


def _qwen3_moe_figures(config: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The expert figures of a Qwen3-MoE config.json. Layers that keep a dense MLP (`mlp_only_layers`, a
    `decoder_sparse_step` above 1) would need a layer spec per layer, which the converter does not build."""
    # Qwen's own config.json says num_experts; transformers ≥ 5 writes num_local_experts.
    experts = routed_experts(config)
    for key, value in (("num_experts", experts), ("num_experts_per_tok", config.get("num_experts_per_tok")),
                       ("moe_intermediate_size", config.get("moe_intermediate_size"))):
        if not value:
            raise ConversionError(f"{source}: a qwen3_moe config needs {key}")
    if config.get("mlp_only_layers") or int(config.get("decoder_sparse_step", 1) or 1) != 1:
        raise ConversionError(f"{source}: mlp_only_layers={config.get('mlp_only_layers')} / decoder_sparse_step="
                              f"{config.get('decoder_sparse_step')} mixes dense and expert layers, which the "
                              "Megatron backend does not build; only models whose every layer routes to experts run")
    return {"experts": int(experts), "expert_ffn": int(config["moe_intermediate_size"]),
            "experts_per_token": int(config["num_experts_per_tok"]),
            # transformers' Qwen3MoeConfig defaults norm_topk_prob to False
            "renormalize_topk": bool(config.get("norm_topk_prob", False))}


def _deepseek_v3_figures(config: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The attention and expert figures of a DeepSeek-V3 config.json (Moonlight's too). Rope scaling (DeepSeek-V3's
    YaRN) and routing other than DeepSeek-V3's are refused by name. Multi-token prediction layers are not built:
    transformers' model does not run them either, and the frameworks' Megatron setups train them only when asked."""
    for key in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "n_routed_experts",
                "num_experts_per_tok", "moe_intermediate_size"):
        if not config.get(key):
            raise ConversionError(f"{source}: a deepseek_v3 config needs {key}")
    rope_kind = (config.get("rope_parameters") or {}).get("rope_type", "default")
    if config.get("rope_scaling") or rope_kind != "default":
        raise ConversionError(f"{source}: rope_scaling {config.get('rope_scaling') or rope_kind!r}: rlcfg's Megatron "
                              "backend builds "
                              "DeepSeek-V3 models with plain rotary embeddings (Moonlight's), not scaled ones")
    if config.get("scoring_func", "sigmoid") != "sigmoid" or config.get("topk_method", "noaux_tc") != "noaux_tc":
        raise ConversionError(f"{source}: scoring_func {config.get('scoring_func')!r} / topk_method "
                              f"{config.get('topk_method')!r}: only DeepSeek-V3's sigmoid scores with the noaux_tc "
                              "correction are built")
    experts, top_k = int(config["n_routed_experts"]), int(config["num_experts_per_tok"])
    if top_k > 1 and not config.get("norm_topk_prob", True):
        raise ConversionError(f"{source}: norm_topk_prob is false, but megatron-core's sigmoid router always "
                              "renormalises the chosen experts' scores")
    groups, group_topk = int(config.get("n_group") or 1), int(config.get("topk_group") or 1)
    if groups > 1 and (experts % groups or top_k % group_topk or top_k // group_topk != 2):
        raise ConversionError(f"{source}: n_group {groups} with topk_group {group_topk}: DeepSeek-V3 scores a group "
                              "by its best two experts, megatron-core by its best num_experts_per_tok // topk_group, "
                              "which differ here")
    dense = int(config.get("first_k_dense_replace") or 0)
    if int(config.get("moe_layer_freq", 1) or 1) != 1:
        raise ConversionError(f"{source}: moe_layer_freq {config.get('moe_layer_freq')} puts dense layers between "
                              "expert layers, which the Megatron backend does not build")
    return {"experts": experts, "expert_ffn": int(config["moe_intermediate_size"]), "experts_per_token": top_k,
            "renormalize_topk": True, "mla": True, "q_lora_rank": int(config.get("q_lora_rank") or 0),
            "kv_lora_rank": int(config["kv_lora_rank"]), "qk_nope_dim": int(config["qk_nope_head_dim"]),
            "qk_rope_dim": int(config["qk_rope_head_dim"]), "v_head_dim": int(config["v_head_dim"]),
            "dense_layers": dense, "shared_ffn": int(config.get("n_shared_experts") or 0)
            * int(config["moe_intermediate_size"]), "sigmoid_routing": True,
            "router_groups": groups if groups > 1 else 0, "router_group_topk": group_topk if groups > 1 else 0,
            "routed_scale": float(config.get("routed_scaling_factor") or 1.0), "expert_bias": True}


def padded_vocab(vocab: int, tp: int = 1, multiple: int = VOCAB_MULTIPLE) -> int:
    step = multiple * max(tp, 1)
    return -(-vocab // step) * step


# ---- one tensor ---------------------------------------------------------------------------------------------

def fuse_qkv(q: Any, k: Any, v: Any, spec: ModelSpec) -> Any:
    """[heads·d, …], [kv·d, …], [kv·d, …] → Megatron's grouped layout [kv × (group·d + d + d), …]."""
    import torch

    g, d, rest = spec.kv_heads, spec.head_dim, q.shape[1:]
    parts = (q.reshape(g, spec.group_size * d, *rest), k.reshape(g, d, *rest), v.reshape(g, d, *rest))
    return torch.cat(parts, dim=1).reshape(g * (spec.group_size + 2) * d, *rest)


def split_qkv(qkv: Any, spec: ModelSpec) -> tuple[Any, Any, Any]:
    g, d, rest = spec.kv_heads, spec.head_dim, qkv.shape[1:]
    grouped = qkv.reshape(g, (spec.group_size + 2) * d, *rest)
    q, k, v = grouped.split([spec.group_size * d, d, d], dim=1)
    return (q.reshape(spec.heads * d, *rest).clone(), k.reshape(g * d, *rest).clone(),
            v.reshape(g * d, *rest).clone())


def _pad_rows(t: Any, rows: int) -> Any:
    import torch

    if t.shape[0] == rows:
        return t
    if t.shape[0] > rows:
        raise ConversionError(f"a vocabulary of {t.shape[0]} rows does not fit in {rows}")
    return torch.cat([t, t.new_zeros((rows - t.shape[0], *t.shape[1:]))], dim=0)


# ---- names ----------------------------------------------------------------------------------------------------

# Within a layer, the prefix of expert e's two linear layers (SequentialMLP under the local spec); `e` counts from 0
# on each expert-parallel rank.
EXPERTS = "mlp.experts.local_experts."
_EXPERT = re.compile(r"^(decoder\.layers\.\d+\.mlp\.experts\.local_experts\.)(\d+)(\..*)$")


def is_expert(name: str) -> bool:
    return _EXPERT.match(name) is not None


def _layer_names(spec: ModelSpec, te: bool, layer: int) -> dict[str, str]:
    """Megatron name (within layer `layer`) → Hugging Face name (within it) for the tensors that map 1:1.
    `te`: the Transformer Engine layer spec, which fuses each norm into the linear layer after it."""
    names = {"self_attention.linear_proj.weight": "self_attn.o_proj.weight"}
    if spec.moe_layer(layer):
        if te:
            raise ConversionError(f"{spec.source}: the converter maps mixture-of-experts layers under the local "
                                  "layer spec only")
        names["mlp.router.weight"] = "mlp.gate.weight"
        if spec.expert_bias:
            names["mlp.router.expert_bias"] = "mlp.gate.e_score_correction_bias"
        if spec.shared_ffn:
            names["mlp.shared_experts.linear_fc2.weight"] = "mlp.shared_experts.down_proj.weight"
    else:
        names["mlp.linear_fc2.weight"] = "mlp.down_proj.weight"
    if te:
        if spec.mla:
            raise ConversionError(f"{spec.source}: the converter maps multi-latent attention under the local layer "
                                  "spec only")
        names["self_attention.linear_qkv.layer_norm_weight"] = "input_layernorm.weight"
        names["mlp.linear_fc1.layer_norm_weight"] = "post_attention_layernorm.weight"
    else:
        names["input_layernorm.weight"] = "input_layernorm.weight"
        names["pre_mlp_layernorm.weight"] = "post_attention_layernorm.weight"
    if spec.qk_norm:
        names["self_attention.q_layernorm.weight"] = "self_attn.q_norm.weight"
        names["self_attention.k_layernorm.weight"] = "self_attn.k_norm.weight"
    if spec.mla:
        names.update(MLA_NAMES)
        if spec.q_lora_rank:
            names.update(MLA_QUERY_BOTTLENECK)
        else:
            names["self_attention.linear_q_proj.weight"] = "self_attn.q_proj.weight"
    return names


# Multi-latent attention: megatron-core's MLASelfAttention and transformers' DeepseekV3Attention lay their
# projections out alike (the key-value latent before the key's rotary channels, each head's channels together), so
# every tensor maps as it is.
MLA_NAMES = {"self_attention.linear_kv_down_proj.weight": "self_attn.kv_a_proj_with_mqa.weight",
             "self_attention.kv_layernorm.weight": "self_attn.kv_a_layernorm.weight",
             "self_attention.linear_kv_up_proj.weight": "self_attn.kv_b_proj.weight"}
MLA_QUERY_BOTTLENECK = {"self_attention.linear_q_down_proj.weight": "self_attn.q_a_proj.weight",
                        "self_attention.q_layernorm.weight": "self_attn.q_a_layernorm.weight",
                        "self_attention.linear_q_up_proj.weight": "self_attn.q_b_proj.weight"}


def _gated(hf: Mapping[str, Any], prefix: str) -> Any:
    import torch

    return torch.cat([hf[prefix + "gate_proj.weight"], hf[prefix + "up_proj.weight"]], dim=0)


def _ungated(fc1: Any, out: dict[str, Any], prefix: str) -> None:
    import torch

    gate, up = torch.chunk(fc1, 2, dim=0)
    out[prefix + "gate_proj.weight"], out[prefix + "up_proj.weight"] = gate.clone(), up.clone()


def hf_to_mcore(hf: Mapping[str, Any], spec: ModelSpec, vocab_rows: int | None = None,
                te: bool = False) -> dict[str, Any]:
    """The whole (unsharded) Megatron state of a Hugging Face state dict. `vocab_rows`: the padded vocabulary
    (default: the model's own size, unpadded)."""
    rows = vocab_rows or spec.vocab
    missing = [n for n in ("model.embed_tokens.weight", "model.norm.weight") if n not in hf]
    if missing:
        raise ConversionError(f"the Hugging Face state dict has no {', '.join(missing)}")
    out: dict[str, Any] = {"embedding.word_embeddings.weight": _pad_rows(hf["model.embed_tokens.weight"], rows)}
    for i in range(spec.layers):
        src, dst = f"model.layers.{i}.", f"decoder.layers.{i}."
        try:
            if not spec.mla:
                out[dst + "self_attention.linear_qkv.weight"] = fuse_qkv(
                    hf[src + "self_attn.q_proj.weight"], hf[src + "self_attn.k_proj.weight"],
                    hf[src + "self_attn.v_proj.weight"], spec)
            if spec.qkv_bias:
                out[dst + "self_attention.linear_qkv.bias"] = fuse_qkv(
                    hf[src + "self_attn.q_proj.bias"], hf[src + "self_attn.k_proj.bias"],
                    hf[src + "self_attn.v_proj.bias"], spec)
            if spec.moe_layer(i):
                for e in range(spec.experts):
                    hf_e, mc_e = f"{src}mlp.experts.{e}.", f"{dst}{EXPERTS}{e}."
                    out[mc_e + "linear_fc1.weight"] = _gated(hf, hf_e)
                    out[mc_e + "linear_fc2.weight"] = hf[hf_e + "down_proj.weight"]
                if spec.shared_ffn:
                    out[dst + "mlp.shared_experts.linear_fc1.weight"] = _gated(hf, src + "mlp.shared_experts.")
            else:
                out[dst + "mlp.linear_fc1.weight"] = _gated(hf, src + "mlp.")
            for m_name, h_name in _layer_names(spec, te, i).items():
                out[dst + m_name] = hf[src + h_name]
        except KeyError as e:
            raise ConversionError(f"the Hugging Face state dict has no {e.args[0]} (layer {i} of {spec.layers})")
    out["decoder.final_layernorm.weight"] = hf["model.norm.weight"]
    if not spec.tied:
        if "lm_head.weight" not in hf:
            raise ConversionError("tie_word_embeddings is false but the state dict has no lm_head.weight")
        out["output_layer.weight"] = _pad_rows(hf["lm_head.weight"], rows)
    return out


def mcore_to_hf(mc: Mapping[str, Any], spec: ModelSpec, te: bool = False) -> dict[str, Any]:
    """The inverse of hf_to_mcore: Hugging Face names, the vocabulary padding dropped, lm_head absent when tied
    (and without a routing correction the Megatron model does not keep: see ModelSpec.expert_bias)."""
    out: dict[str, Any] = {"model.embed_tokens.weight": mc["embedding.word_embeddings.weight"][:spec.vocab]}
    for i in range(spec.layers):
        src, dst = f"decoder.layers.{i}.", f"model.layers.{i}."
        if not spec.mla:
            q, k, v = split_qkv(mc[src + "self_attention.linear_qkv.weight"], spec)
            out[dst + "self_attn.q_proj.weight"], out[dst + "self_attn.k_proj.weight"] = q, k
            out[dst + "self_attn.v_proj.weight"] = v
        if spec.qkv_bias:
            qb, kb, vb = split_qkv(mc[src + "self_attention.linear_qkv.bias"], spec)
            out[dst + "self_attn.q_proj.bias"], out[dst + "self_attn.k_proj.bias"] = qb, kb
            out[dst + "self_attn.v_proj.bias"] = vb
        if spec.moe_layer(i):
            for e in range(spec.experts):
                mc_e, hf_e = f"{src}{EXPERTS}{e}.", f"{dst}mlp.experts.{e}."
                _ungated(mc[mc_e + "linear_fc1.weight"], out, hf_e)
                out[hf_e + "down_proj.weight"] = mc[mc_e + "linear_fc2.weight"]
            if spec.shared_ffn:
                _ungated(mc[src + "mlp.shared_experts.linear_fc1.weight"], out, dst + "mlp.shared_experts.")
        else:
            _ungated(mc[src + "mlp.linear_fc1.weight"], out, dst + "mlp.")
        for m_name, h_name in _layer_names(spec, te, i).items():
            out[dst + h_name] = mc[src + m_name]
    out["model.norm.weight"] = mc["decoder.final_layernorm.weight"]
    if not spec.tied:
        out["lm_head.weight"] = mc["output_layer.weight"][:spec.vocab]
    return out


# ---- tensor parallel ------------------------------------------------------------------------------------------

_COLUMN = ("linear_qkv.weight", "linear_qkv.bias", "word_embeddings.weight", "output_layer.weight",
           # multi-latent attention's projections from the latents to the heads (those to the latents are whole
           # on every rank: rlcfg.runtime.backends.megatron.layer_spec)
           "linear_q_proj.weight", "linear_q_up_proj.weight", "linear_kv_up_proj.weight")
_ROW = ("linear_proj.weight", "linear_fc2.weight")
_GATED = ("linear_fc1.weight",)


def tp_rule(name: str) -> str:
    """How a Megatron tensor splits over tensor-parallel ranks: column (rows split), row (columns split), gated
    (gate and up halves each split by rows, then re-fused per rank) or replicated."""
    if name.endswith(_GATED):
        return "gated"
    if name.endswith(_COLUMN):
        return "column"
    if name.endswith(_ROW):
        return "row"
    return "replicated"


def shard_tp(state: Mapping[str, Any], tp: int, spec: ModelSpec | None = None) -> list[dict[str, Any]]:
    """Split a whole Megatron state into `tp` rank states."""
    import torch

    if spec is not None:
        spec.check(tp)
    shards: list[dict[str, Any]] = [{} for _ in range(tp)]
    for name, t in state.items():
        rule = tp_rule(name)
        if rule == "replicated" or tp == 1:
            parts = [t] * tp
        elif rule == "gated":
            gate, up = torch.chunk(t, 2, dim=0)
            parts = [torch.cat([g, u], dim=0) for g, u in zip(torch.chunk(gate, tp), torch.chunk(up, tp))]
        else:
            dim = 0 if rule == "column" else 1
            if t.shape[dim] % tp:
                raise ConversionError(f"{name} has {t.shape[dim]} {'rows' if dim == 0 else 'columns'}, not a "
                                      f"multiple of the tensor parallel size {tp}")
            parts = list(torch.chunk(t, tp, dim=dim))
        for r in range(tp):
            shards[r][name] = parts[r].clone() if tp > 1 else parts[r]
    return shards


def merge_tp(shards: list[Mapping[str, Any]]) -> dict[str, Any]:
    import torch

    tp = len(shards)
    out: dict[str, Any] = {}
    for name in shards[0]:
        parts = [s[name] for s in shards]
        rule = tp_rule(name)
        if rule == "replicated" or tp == 1:
            out[name] = parts[0]
        elif rule == "gated":
            halves = [torch.chunk(p, 2, dim=0) for p in parts]
            out[name] = torch.cat([h[0] for h in halves] + [h[1] for h in halves], dim=0)
        else:
            out[name] = torch.cat(parts, dim=0 if rule == "column" else 1)
    return out


# ---- pipeline parallel ----------------------------------------------------------------------------------------

def stage_layers(num_layers: int, pp: int, vpp: int | None = None, first: int | None = None,
                 last: int | None = None) -> dict[tuple[int, int], range]:
    """(pipeline rank, virtual stage) → the global layer indices it holds, as megatron-core assigns them: chunk
    v·pp + r of pp·vpp equal chunks, or, with `first` / `last` layers on the first / last stage (no virtual
    stages), the other stages splitting the rest evenly."""
    v = vpp or 1
    if first is not None or last is not None:
        if v > 1:
            raise ConversionError("uneven first or last pipeline stages with virtual pipeline stages are not built")
        ends = [n for n in (first, last) if n is not None]
        middle, rest = pp - len(ends), num_layers - sum(ends)
        if rest < 0 or (middle and rest % middle) or (not middle and rest):
            raise ConversionError(f"{num_layers} layers do not split over pipeline size {pp} with {first} layers on "
                                  f"the first stage and {last} on the last, the others holding equal shares")
        sizes = [rest // middle if middle else 0] * pp
        if first is not None:
            sizes[0] = first
        if last is not None:
            sizes[-1] = last
        starts = [sum(sizes[:r]) for r in range(pp)]
        return {(r, 0): range(starts[r], starts[r] + sizes[r]) for r in range(pp)}
    chunks = pp * v
    if num_layers % chunks:
        raise ConversionError(f"{num_layers} layers do not split evenly over pipeline size {pp} × virtual stages "
                              f"{v} = {chunks} chunks")
    per = num_layers // chunks
    return {(r, s): range((s * pp + r) * per, (s * pp + r + 1) * per) for s in range(v) for r in range(pp)}


_LAYER = re.compile(r"^decoder\.layers\.(\d+)\.(.*)$")


def split_pp(state: Mapping[str, Any], spec: ModelSpec, pp: int, vpp: int | None = None,
             first: int | None = None, last: int | None = None) -> dict[tuple[int, int], dict[str, Any]]:
    stages = stage_layers(spec.layers, pp, vpp, first, last)
    owner = {layer: key for key, layers in stages.items() for layer in layers}
    first, last = (0, 0), (pp - 1, (vpp or 1) - 1)
    out: dict[tuple[int, int], dict[str, Any]] = {key: {} for key in stages}
    for name, t in state.items():
        m = _LAYER.match(name)
        if m:
            key = owner[int(m.group(1))]
            out[key][f"decoder.layers.{int(m.group(1)) - stages[key].start}.{m.group(2)}"] = t
        elif name.startswith("embedding."):
            out[first][name] = t
        else:  # final norm and output layer
            out[last][name] = t
    if spec.tied and first != last:
        # With the embedding tied and the output layer on another stage, Megatron-core gives the last stage its
        # own copy of the embedding matrix (kept equal by an all-reduce over the embedding group).
        for name, t in state.items():
            if name.endswith("word_embeddings.weight"):
                out[last][name.replace("embedding.word_embeddings", "output_layer")] = t
    return out


def merge_pp(parts: Mapping[tuple[int, int], Mapping[str, Any]], spec: ModelSpec, pp: int,
             vpp: int | None = None, first: int | None = None, last: int | None = None) -> dict[str, Any]:
    stages = stage_layers(spec.layers, pp, vpp, first, last)
    out: dict[str, Any] = {}
    for key, part in parts.items():
        for name, t in part.items():
            m = _LAYER.match(name)
            if m:
                out[f"decoder.layers.{int(m.group(1)) + stages[key].start}.{m.group(2)}"] = t
            elif name == "output_layer.weight" and spec.tied:
                continue  # the last stage's copy of the tied embedding
            else:
                out[name] = t
    return out


# ---- the whole layout -----------------------------------------------------------------------------------------

# Shards of a model chunk: (tp rank, pp rank, virtual stage) → its state dict; an MoE model's experts are keyed
# apart, (expert tp rank, expert-parallel rank, pp rank, virtual stage) → that rank's experts of the chunk.
Shards = dict[tuple[int, int, int], dict[str, Any]]
ExpertShards = dict[tuple[int, int, int, int], dict[str, Any]]


def shard(hf: Mapping[str, Any], spec: ModelSpec, tp: int = 1, pp: int = 1, vpp: int | None = None,
          te: bool = False) -> Shards:
    """(tp rank, pp rank, virtual stage) → that model chunk's Megatron state dict, from Hugging Face weights (a
    dense model; `shard_layout` also splits an MoE model's experts)."""
    return shard_layout(hf, spec, tp, pp, vpp, te=te)[0]


def shard_layout(hf: Mapping[str, Any], spec: ModelSpec, tp: int = 1, pp: int = 1, vpp: int | None = None,
                 ep: int = 1, etp: int = 1, te: bool = False, first: int | None = None,
                 last: int | None = None) -> tuple[Shards, ExpertShards]:
    """Every chunk's Megatron state from Hugging Face weights: the shards without experts, and the experts'.
    `first` / `last`: the layers of uneven first / last pipeline stages (stage_layers)."""
    spec.check(tp, ep)
    whole = hf_to_mcore(hf, spec, padded_vocab(spec.vocab, tp), te=te)
    out: Shards = {}
    experts: ExpertShards = {}
    per_rank = spec.experts // ep if spec.experts else 0
    for (p, v), part in split_pp(whole, spec, pp, vpp, first, last).items():
        dense = {k: t for k, t in part.items() if not is_expert(k)}
        for t, tp_part in enumerate(shard_tp(dense, tp)):
            out[(t, p, v)] = tp_part
        if not per_rank:
            continue
        by_rank: list[dict[str, Any]] = [{} for _ in range(ep)]
        for name, tensor in part.items():
            m = _EXPERT.match(name)
            if m:
                rank, local = divmod(int(m.group(2)), per_rank)
                by_rank[rank][f"{m.group(1)}{local}{m.group(3)}"] = tensor
        for e, rank_part in enumerate(by_rank):
            for et, etp_part in enumerate(shard_tp(rank_part, etp)):
                experts[(et, e, p, v)] = etp_part
    return out, experts


def merge(shards: Mapping[tuple[int, int, int], Mapping[str, Any]], spec: ModelSpec, te: bool = False,
          experts: Mapping[tuple[int, int, int, int], Mapping[str, Any]] | None = None, first: int | None = None,
          last: int | None = None) -> dict[str, Any]:
    """The inverse of `shard_layout`: Hugging Face weights from every chunk of every rank."""
    tp = max(k[0] for k in shards) + 1
    pp = max(k[1] for k in shards) + 1
    vpp = max(k[2] for k in shards) + 1
    stages = {(p, v): merge_tp([shards[(t, p, v)] for t in range(tp)]) for p in range(pp) for v in range(vpp)}
    if spec.experts:
        if not experts:
            raise ConversionError(f"{spec.source}: merging a mixture-of-experts model needs its experts' shards")
        etp = max(k[0] for k in experts) + 1
        ep = max(k[1] for k in experts) + 1
        per_rank = spec.experts // ep
        for (p, v), stage in stages.items():
            for e in range(ep):
                for name, tensor in merge_tp([experts[(et, e, p, v)] for et in range(etp)]).items():
                    m = _EXPERT.match(name)
                    stage[f"{m.group(1)}{e * per_rank + int(m.group(2))}{m.group(3)}"] = tensor
    return mcore_to_hf(merge_pp(stages, spec, pp, vpp if vpp > 1 else None, first, last), spec, te=te)


def unheld(hf: Mapping[str, Any], spec: ModelSpec) -> dict[str, Any]:
    """The Hugging Face tensors that the Megatron model of `spec` does not hold and its export must carry as the
    checkpoint has them: DeepSeek-V3's routing corrections where the framework routes without them."""
    if not spec.sigmoid_routing or spec.expert_bias:
        return {}
    return {name: t for name, t in hf.items() if name.endswith("mlp.gate.e_score_correction_bias")}


def strip_extra_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """A GPTModel state dict without Transformer Engine's `_extra_state` entries (fp8 metadata, None here)."""
    return {k: v for k, v in state.items() if not k.endswith("_extra_state")}


def load_hf_weights(path: str, names: Iterable[str] | None = None) -> dict[str, Any]:
    """The tensors of a Hugging Face checkpoint directory (safetensors shards), without building the model."""
    import glob
    import os

    from safetensors.torch import load_file

    files = sorted(glob.glob(os.path.join(path, "*.safetensors")))
    if not files:
        raise ConversionError(f"{path} has no *.safetensors files; Megatron loading reads Hugging Face "
                              "safetensors checkpoints")
    wanted = set(names) if names is not None else None
    out: dict[str, Any] = {}
    for f in files:
        for name, t in load_file(f).items():
            if wanted is None or name in wanted:
                out[name] = t
    return out
