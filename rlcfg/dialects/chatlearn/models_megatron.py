"""ChatLearn's `megatron_model_cfg`: the Megatron-core model architecture of a Megatron trainer or reference model.

ChatLearn marks this block deprecated: `update_cfg` (run when the Megatron backend starts) overwrites most of it
# Annotations are evaluated as the classes are defined, not postponed: see `Section` in rlcfg.schema.base.
from the Hugging Face `config.json` of `models.policy.load`. Users still may set it (the dataclass accepts every
field), so every field is declared, with ChatLearn's default at its newest release. Fields ChatLearn leaves at
OmegaConf's MISSING are filled from the Hugging Face config; they are null here.
"""

from rlcfg.schema.base import HONORED, Section, declare_fates, inert, param, refused

MAIN = ("main",)
V120 = ("1.2.0",)

_HF = "ChatLearn fills it from the Hugging Face config of `models.policy.load` when the Megatron backend starts."


_NO_DROPOUT = refused("rlcfg trains without dropout, as ChatLearn's GRPO does at its defaults; a dropout probability "
                      "is not run")
_FREEZE = refused("rlcfg trains every weight of the model; freezing parts of it is not run")


class MegatronModelCfg(Section):
    # The run ledger: ChatLearn overwrites the architecture from the Hugging Face config.json (update_cfg), and rlcfg
    # builds the model from that same file; the rest are kernel and communication choices.
    run_fate = inert("ChatLearn fills the architecture from the Hugging Face config.json of models.policy.load when "
                     "the Megatron backend starts, and rlcfg builds the model from that same file; the other keys "
                     "choose kernels and communication, and what is computed is the same")

    attention_dropout: float = param(0.0, ge=0, le=1, description="Dropout probability after attention.",
                                     fate=_NO_DROPOUT)
    hidden_dropout: float = param(0.0, ge=0, le=1, description="Dropout probability of the transformer's hidden state.",
                                  fate=_NO_DROPOUT)
    num_layers: int | None = param(None, ge=1, description=f"Transformer layers. {_HF}")
    hidden_size: int | None = param(None, ge=1, description=f"Hidden size. {_HF}")
    num_attention_heads: int | None = param(None, ge=1, description=f"Attention heads. {_HF}")
    ffn_hidden_size: int | None = param(None, ge=1, description=f"Feed-forward hidden size. {_HF}")
    num_query_groups: int | None = param(None, ge=1, description="Key/value head groups (grouped-query attention).")
    max_position_embeddings: int | None = param(None, ge=1, description=f"Longest position the embeddings cover. {_HF}")
    swiglu: bool = param(True, description="Gated linear units with SiLU instead of GeLU.")
    normalization: str = param("RMSNorm", description="Normalisation layer: LayerNorm or RMSNorm.")
    norm_epsilon: float = param(1e-6, gt=0, description="Epsilon of the normalisation layers.")
    position_embedding_type: str = param("rope", description="Position embedding type (rope, mrope, ...).")
    mrope_section: str | list[int] | None = param(None, releases=MAIN, description="Sections of multimodal RoPE "
                                                                                 "(vision-language models).")
    add_qkv_bias: bool = param(False, description="Bias in the QKV projections only.")
    add_bias_linear: bool = param(False, description="Bias in all linear layers.")
    rotary_base: int = param(1000000, ge=1, description="Base of the rotary position embeddings.")
    rotary_percent: float = param(1.0, gt=0, le=1, releases=MAIN, description="Share of the head dimension rotated.")
    group_query_attention: bool = param(False, description="Use grouped-query attention.")
    untie_embeddings_and_output_weights: bool = param(False, description="Separate input embedding and output "
                                                                         "weights.")
    qk_layernorm: bool = param(False, description="Normalise queries and keys.")
    vocab_size: int = param(32000, ge=1, description=f"Vocabulary size. {_HF}")
    kv_channels: int | None = param(None, ge=1, description=f"Channels per attention head. {_HF}")
    num_experts: int | None = param(None, ge=1, description="Experts per MoE layer; null for a dense model.")
    moe_grouped_gemm: bool = param(False, description="Run the local experts' GEMMs in one grouped kernel.")
    moe_token_dispatcher_type: str = param("allgather", description="MoE token dispatcher (allgather, alltoall, ...).")
    moe_router_topk: int = param(2, ge=1, description="Experts each token is routed to.")
    moe_router_load_balancing_type: str = param(
        "none", description="MoE load-balancing strategy; ChatLearn sets `none` whenever `moe_aux_loss_coeff` is 0.")
    moe_router_dtype: str | None = param(None, description="Data type of routing (fp32 or fp64 for stability).")
    moe_router_pre_softmax: bool = param(False, description="Softmax (or sigmoid) before the top-k selection.")
    moe_permute_fusion: bool = param(False, releases=MAIN, description="Fuse the token permutation of dispatching.")
    moe_router_fusion: bool = param(False, releases=MAIN, description="Fuse top-k routing with the aux-loss "
                                                                      "(TransformerEngine 2.7 and later).")
    moe_layer_freq: int | list[int] = param(1, description="Which layers are MoE: an integer N (every N-th layer) or "
                                                           "a 0/1 list per layer.")
    moe_ffn_hidden_size: int | None = param(None, ge=1, description="Feed-forward hidden size of each expert.")
    moe_aux_loss_coeff: float = param(0.0, ge=0, description="Weight of the MoE auxiliary load-balancing loss.")
    q_lora_rank: int | None = param(None, ge=1, description="Low-rank dimension of queries (multi-latent attention).")
    kv_lora_rank: int = param(32, ge=1, description="Low-rank dimension of keys and values (multi-latent attention).")
    moe_router_num_groups: int | None = param(None, ge=1, description="Expert groups for group-limited routing.")
    moe_router_group_topk: int | None = param(None, ge=1, description="Groups selected in group-limited routing.")
    moe_shared_expert_intermediate_size: int | None = param(None, ge=1, description="Total hidden size of the shared "
                                                                                    "experts.")
    moe_router_score_function: str = param("softmax", description="Routing score function: softmax or sigmoid.")
    moe_router_enable_expert_bias: bool = param(False, description="Aux-loss-free balancing with a dynamic expert bias.")
    moe_router_bias_update_rate: float = param(1e-3, ge=0, releases=MAIN, description="Update rate of that expert "
                                                                                      "bias.")
    multi_latent_attention: bool = param(False, description="Multi-latent attention (DeepSeek-V3 style).")
    v_head_dim: int | None = param(None, ge=1, description="Value head dimension (multi-latent attention).")
    moe_router_topk_scaling_factor: float = param(0.0, ge=0, description="Scale of the routing scores in top-k "
                                                                         "selection (with pre-softmax routing).")
    apply_rope_fusion: bool = param(True, description="Fused rotary embedding kernel.")
    disable_bf16_reduced_precision_matmul: bool = param(
        False, releases=V120, description="Keep bf16 matmuls from accumulating at reduced precision (ChatLearn 1.2.0).")
    moe_shared_expert_overlap: bool = param(False, description="Overlap shared-expert compute with dispatching.")
    bias_swiglu_fusion: bool = param(True, description="Fused bias + SwiGLU kernel (ChatLearn 1.2.0 defaulted to "
                                                       "false).")
    bias_dropout_fusion: bool = param(True, description="Fused bias + dropout kernel (ChatLearn 1.2.0 defaulted to "
                                                        "false).")
    rotary_scaling_factor: float = param(1.0, gt=0, description="Scaling factor of the rotary embeddings (YaRN).")
    attention_backend: str = param("auto", releases=MAIN, description="Attention kernel: flash, fused, unfused, "
                                                                      "local or auto.")
    rope_type: str | None = param(None, releases=MAIN, description="RoPE variant; multi-latent attention takes yarn "
                                                                    "by default, others rope.")
    cross_entropy_fusion_impl: str = param("native", releases=MAIN, description="Implementation of the fused cross "
                                                                                "entropy.")
    cross_entropy_loss_fusion: bool = param(False, releases=MAIN, description="Fuse the cross-entropy loss.")
    create_attention_mask_in_dataloader: bool = param(True, releases=MAIN,
                                                      description="Build attention masks in the data loader.")
    async_tensor_model_parallel_allreduce: bool = param(False, releases=MAIN, description="Asynchronous tensor-"
                                                                                          "parallel all-reduce.")
    overlap_p2p_comm: bool = param(True, releases=MAIN, description="Overlap pipeline-parallel point-to-point "
                                                                    "communication with compute.")
    batch_p2p_comm: bool = param(False, releases=MAIN, description="Batch the pipeline's sends and receives.")
    deallocate_pipeline_outputs: bool = param(False, releases=MAIN, description="Free a stage's output once sent to "
                                                                                "the next stage.")
    overlap_moe_expert_parallel_comm: bool = param(False, releases=MAIN, description="Overlap expert-parallel "
                                                                                     "all-to-all in the 1F1B stage.")
    enable_experimental: bool = param(False, releases=MAIN, description="Megatron's experimental features.")
    freeze_LM: bool = param(False, releases=MAIN, description="Freeze the language-model layers.", fate=_FREEZE)
    freeze_ViT: bool = param(False, releases=MAIN, description="Freeze the vision encoder.", fate=_FREEZE)
    freeze_VP: bool = param(False, releases=MAIN, description="Freeze the vision projection.", fate=_FREEZE)
    hybrid_override_pattern: str | None = param(None, releases=MAIN, description="Layer pattern of a hybrid "
                                                                                 "(attention/Mamba) model.")
    is_hybrid_model: bool = param(False, releases=MAIN, description="The model mixes attention and Mamba layers.")
    apply_layernorm_1p: bool = param(False, releases=MAIN, description="LayerNorm with zero-centred gamma (1 + g).")


# The router's settings that ChatLearn's config (not the model's config.json) decides: rlcfg runs them as megatron-core
# computes them at their defaults, and the rule chatlearn/run-refusals refuses a value that computes otherwise.
_ROUTER_DTYPE = inert("ChatLearn overwrites it from the model when its Megatron backend starts (fp64 for every "
                      "mixture of experts in 1.2.0, fp32 for Qwen3-MoE on main), and rlcfg computes the router's "
                      "logits in that same dtype")
declare_fates(MegatronModelCfg, moe_router_dtype=_ROUTER_DTYPE,
              **{name: HONORED for name in ("moe_router_load_balancing_type", "moe_aux_loss_coeff",
                                            "moe_router_pre_softmax", "moe_router_score_function",
                                            "moe_router_enable_expert_bias", "moe_router_topk_scaling_factor",
                                            "moe_router_num_groups", "moe_router_group_topk",
                                            "moe_shared_expert_intermediate_size")})
