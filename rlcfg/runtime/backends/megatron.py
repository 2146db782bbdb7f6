"""The `megatron` training backend: megatron-core's GPTModel, its DDP wrapper, optimizer and forward-backward
schedule, for the dense Qwen2/Qwen3/Llama families and the Qwen3-MoE and DeepSeek-V3 mixtures of experts.

Lowering (pure, no megatron import): a training role of the plan plus the model's config.json become
`MegatronSettings`, plain keyword dicts for megatron-core's own `TransformerConfig`, `OptimizerConfig` and
`DistributedDataParallelConfig`; `build_configs` constructs those for real so that megatron-core's own checks
run (heads vs TP, pipeline dtype, sequence parallelism without TP, ...). rlcfg adds the checks megatron-core
skips (heads that do not divide the hidden size, query heads that do not split into the KV groups).

Execution (`MegatronEngine`, one per rank, same interface as the fsdp backend's FSDPEngine): parallel state
from the plan's tp/pp/cp/ep/etp/vpp, weights converted from the Hugging Face checkpoint
(megatron_weights.py), and the PPO/GRPO update run through `get_forward_backward_func`. megatron-core 0.16
hard-codes CUDA in its schedules, DDP buffers, optimizer and rotary embedding, so the engine needs a GPU; the
lowering, the model build, the weight conversion and the loss functions run on CPU. For tests and debugging,
megatron_cpu.py's shim (or RLCFG_MEGATRON_ON_CPU=1) runs the whole engine on CPU with gloo.

Every rank of one tensor/pipeline group must receive the same samples (its data-parallel shard):
`data_parallel_rank` says which shard a global rank takes.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

from rlcfg import run_limits
from rlcfg.ir import Lora
from rlcfg.runtime.backends.megatron_weights import ConversionError, ModelSpec, padded_vocab, stage_layers
from rlcfg.runtime.step import SHARE_METRICS

MEGATRON_CORE = "megatron-core==0.16.1"
INSTALL_HINT = ("install rlcfg[megatron] (pip install 'rlcfg[megatron]', which pins megatron-core 0.16.1; "
                "megatron-core 0.17 and later need Python 3.12)")


class MegatronUnavailable(ImportError):
    """megatron-core is not installed."""


class MegatronConfigError(ValueError):
    """A role or model that cannot be lowered to megatron-core; the message names the values."""


def megatron_available() -> bool:
    try:
        return importlib.util.find_spec("megatron.core") is not None
    except ModuleNotFoundError:  # no `megatron` namespace at all
        return False


def require_megatron(what: str = "the megatron backend") -> None:
    if not megatron_available():
        raise MegatronUnavailable(f"{what} needs megatron-core, which is not installed: {INSTALL_HINT}")


def plan_problems(plan: Any) -> list[str]:
    """Why the plan's Megatron roles cannot be prepared on this machine (empty when they can): called before
    any worker starts, so a missing package is reported at plan time, not after Ray start-up."""
    roles = [r for r in plan.experiment.roles if r.backend == "megatron"]
    if roles and not megatron_available():
        names = ", ".join(f"`{r.name}`" for r in roles)
        return [f"role{'s' if len(roles) > 1 else ''} {names} use{'' if len(roles) > 1 else 's'} the megatron "
                f"backend, but megatron-core is not installed: {INSTALL_HINT}"]
    return []


# ---- lowering ---------------------------------------------------------------------------------------------------

DTYPES = {"bfloat16": "bfloat16", "float16": "float16", "float32": "float32"}


@dataclass(frozen=True)
class MegatronLayout:
    tp: int
    pp: int
    cp: int
    ep: int
    etp: int | None
    vpp: int | None
    sequence_parallel: bool
    world: int
    first_stage_layers: int | None = None  # uneven first / last pipeline stages (ir.Parallelism)
    last_stage_layers: int | None = None

    @property
    def dp(self) -> int:
        return self.world // (self.tp * self.pp * self.cp)

    def parallel_state_kwargs(self) -> dict[str, Any]:
        return {"tensor_model_parallel_size": self.tp, "pipeline_model_parallel_size": self.pp,
                "virtual_pipeline_model_parallel_size": self.vpp, "context_parallel_size": self.cp,
                "expert_model_parallel_size": self.ep, "expert_tensor_parallel_size": self.etp,
                "order": "tp-cp-ep-dp-pp"}


def data_parallel_rank(rank: int, layout: MegatronLayout) -> int:
    """The data-parallel shard a global rank trains on, in megatron-core's default order tp-cp-ep-dp-pp (tp
    fastest); the same formula as rlcfg.plan's rank grid."""
    return (rank // (layout.tp * layout.cp)) % layout.dp


@dataclass(frozen=True)
class MegatronSettings:
    """One role lowered: keyword arguments for megatron-core's config classes and for GPTModel."""

    role: str
    layout: MegatronLayout
    model: ModelSpec
    transformer: dict[str, Any]  # TransformerConfig(**transformer), with dtype names as strings
    gpt: dict[str, Any]  # GPTModel(...) besides config and layer spec
    optimizer: dict[str, Any] | None  # OptimizerConfig(**optimizer); None for a frozen role
    ddp: dict[str, Any] | None  # DistributedDataParallelConfig(**ddp)
    scheduler: dict[str, Any] | None  # OptimizerParamScheduler(optimizer, **scheduler)
    micro_batch_size: int
    notes: tuple[str, ...] = field(default_factory=tuple)
    # Sequence packing (rlcfg.runtime.packing): a micro-batch's samples in one row, at most `token_budget` tokens
    # when one is set; `budget_key` is the config's name for it.
    sequence_packing: bool = False
    token_budget: int | None = None
    budget_key: str | None = None
    # The learning rate of each schedule step (rlcfg.runtime.algorithms.lr_at), which the OptimizerParamScheduler
    # sets in place of its own; per_train_step: it advances once per train() call rather than per update (AReaL).
    lr_schedule: Any = None
    schedule_per_train_step: bool = False
    lora: Lora | None = None  # adapters on a trained role (megatron_lora); None: every weight trains


def follow_schedule(scheduler: Any, schedule: Any) -> None:
    """Make a megatron-core OptimizerParamScheduler set each step's lr from rlcfg's schedule (ir.LrSchedule): it
    keeps its step count, weight decay and checkpoint state; the lr comes from the formula both backends share."""
    from rlcfg.runtime import algorithms as A

    scheduler.get_lr = lambda _group: A.lr_at(scheduler.num_steps, schedule)
    scheduler.step(0)


def model_spec_for(role: Any, model_config: Mapping[str, Any] | None = None,
                   architecture: Any | None = None) -> ModelSpec:
    """The role's architecture: the given config.json dict, else `<model path>/config.json`, else the plan's
    Architecture (built-in table). Raises MegatronConfigError when none is at hand."""
    path = role.model.path if role.model else ""
    if model_config is not None:
        return _spec(model_config, f"config.json of {path}")
    file = os.path.join(path, "config.json") if path else ""
    if file and os.path.isfile(file):
        import json

        with open(file, encoding="utf-8") as f:
            return _spec(json.load(f), file)
    if architecture is not None:
        return spec_from_architecture(architecture)
    raise MegatronConfigError(f"role `{role.name}`: no config.json at {path or '(no model path)'} and no "
                              "architecture given; the Megatron backend needs the model's figures")


def _spec(config: Mapping[str, Any], source: str) -> ModelSpec:
    try:
        return ModelSpec.from_hf_config(config, source)
    except ConversionError as e:
        raise MegatronConfigError(str(e)) from None


def spec_from_architecture(arch: Any) -> ModelSpec:
    """A ModelSpec from rlcfg.plan's Architecture (the built-in table has no rope/eps figures: the families'
    usual values are assumed: Qwen θ=1e6, Llama θ=5e5, ε=1e-6)."""
    name = arch.name.lower()
    family = "qwen3" if arch.qk_norm else ("llama" if "llama" in name else "qwen2")
    if arch.experts:
        raise MegatronConfigError(f"{arch.name}: a mixture-of-experts model's routing (experts per token, their "
                                  "weights' normalisation) is read from its config.json, which is not at hand")
    return ModelSpec(family=family, layers=arch.layers, hidden=arch.hidden, heads=arch.heads, kv_heads=arch.kv_heads,
                     head_dim=arch.head_dim, ffn=arch.intermediate, vocab=arch.vocab, max_position=32768,
                     rope_theta=5e5 if family == "llama" else 1e6, norm_eps=1e-6, tied=arch.tied_embeddings,
                     qkv_bias=arch.qkv_bias, qk_norm=arch.qk_norm, head_dim_given=True,
                     source=f"{arch.name} ({arch.source})")


def check_model(spec: ModelSpec, layout: MegatronLayout) -> None:
    """The converter's checks for what megatron-core accepts silently (heads vs hidden size, query heads vs
    KV groups, KV groups vs TP), raised as a configuration error at lowering time."""
    try:
        spec.check(layout.tp, layout.ep)
    except ConversionError as e:
        raise MegatronConfigError(str(e)) from None


def lower_role(role: Any, spec: ModelSpec, world: int, total_optimizer_steps: int | None = None,
               seq_length: int | None = None, schedule_train_steps: int | None = None) -> MegatronSettings:
    """A Megatron training role of the Experiment on `world` ranks → MegatronSettings. Pure: no megatron
    import, so it also runs where megatron-core is missing (build_configs then says what to install)."""
    if role.backend != "megatron":
        raise MegatronConfigError(f"role `{role.name}` uses the `{role.backend}` backend, not megatron")
    par = role.parallelism
    uneven = par.pp > 1 and (par.pp_first_layers is not None or par.pp_last_layers is not None)
    layout = MegatronLayout(tp=par.tp, pp=par.pp, cp=par.cp, ep=par.ep, etp=par.etp, vpp=par.vpp,
                            sequence_parallel=par.sequence_parallel, world=world,
                            first_stage_layers=par.pp_first_layers if uneven else None,
                            last_stage_layers=par.pp_last_layers if uneven else None)
    check_model(spec, layout)
    if uneven:
        try:
            stage_layers(spec.layers, par.pp, par.vpp, layout.first_stage_layers, layout.last_stage_layers)
        except ConversionError as e:
            raise MegatronConfigError(f"role `{role.name}`: {e}") from None
    dtype = DTYPES[role.model.dtype if role.model else "bfloat16"]
    notes: list[str] = []
    transformer: dict[str, Any] = {
        "num_layers": spec.layers, "hidden_size": spec.hidden, "num_attention_heads": spec.heads,
        "num_query_groups": spec.kv_heads, "kv_channels": spec.head_dim, "ffn_hidden_size": spec.ffn,
        "normalization": "RMSNorm", "layernorm_epsilon": spec.norm_eps, "gated_linear_unit": True,
        "activation_func": "silu", "add_bias_linear": False, "add_qkv_bias": spec.qkv_bias,
        "qk_layernorm": spec.qk_norm, "attention_dropout": 0.0, "hidden_dropout": 0.0,
        "tensor_model_parallel_size": par.tp, "pipeline_model_parallel_size": par.pp,
        "virtual_pipeline_model_parallel_size": par.vpp, "context_parallel_size": par.cp,
        "expert_model_parallel_size": par.ep, "expert_tensor_parallel_size": par.etp,
        "sequence_parallel": par.sequence_parallel,
        "num_layers_in_first_pipeline_stage": layout.first_stage_layers,
        "num_layers_in_last_pipeline_stage": layout.last_stage_layers,
        "params_dtype": dtype, "bf16": dtype == "bfloat16", "fp16": dtype == "float16",
        # A pipeline sends activations of the compute dtype between stages; megatron-core requires it named.
        "pipeline_dtype": dtype if par.pp > 1 else None,
        "use_cpu_initialization": True,  # the weights are overwritten by the checkpoint anyway
        "perform_initialization": False,
    }
    if spec.mla:
        if par.tp > 1 and not par.sequence_parallel:
            # The latent projections are whole on every TP rank, and each rank's heads give the key's rotary
            # channels only their share of its gradient: megatron-core sums the shares where sequence parallelism
            # splits the tokens (its gather from the sequence-parallel region), and nowhere otherwise.
            # backends.check_plan refuses it before launch where the model's family is known.
            raise MegatronConfigError(f"role `{role.name}`: {spec.source}, tensor parallel size {par.tp} without "
                                      f"sequence parallelism: {run_limits.LATENT_ATTENTION_TP}")
        transformer.update(mla_transformer_config(spec))
    if spec.experts:
        rate = 0.0
        if spec.sigmoid_routing:
            if role.expert_bias == "unmapped":
                raise MegatronConfigError(f"role `{role.name}`: {spec.source}: {run_limits.ROUTING_CORRECTION}")
            if role.expert_bias == "off":
                spec = dataclasses.replace(spec, expert_bias=False)
            else:
                rate = float(role.expert_bias)
        transformer.update(moe_transformer_config(spec, rate), moe_router_dtype=role.router_dtype)
    lora = role.lora if role.optimizer is not None else None
    if lora is not None:
        problems = run_limits.megatron_lora_problems(
            dropout=lora.dropout, target_modules=lora.target_modules, exclude_modules=lora.exclude_modules,
            init=lora.init, experts=f"{spec.experts} experts per layer" if spec.experts else None,
            expert_tp=expert_tp(layout))
        if problems:
            raise MegatronConfigError(f"role `{role.name}`: LoRA on the megatron backend: "
                                      + "; ".join(why for _field, _value, why, _hint in problems))
    if role.gradient_checkpointing:
        transformer.update(recompute_granularity="full", recompute_method="uniform", recompute_num_layers=1)
    if par.vpp and par.vpp > 1 and par.pp > 1 and not uneven and spec.layers % (par.pp * par.vpp):
        raise MegatronConfigError(f"role `{role.name}`: {spec.layers} layers do not split into pipeline size "
                                  f"{par.pp} × virtual stages {par.vpp} = {par.pp * par.vpp} equal chunks")
    gpt = {"vocab_size": padded_vocab(spec.vocab, par.tp),
           "max_sequence_length": max(spec.max_position, seq_length or 0),
           "position_embedding_type": "rope", "rotary_base": int(spec.rope_theta),
           "share_embeddings_and_output_weights": spec.tied,
           "rope_scaling": spec.rope_scaling_factor is not None,
           "rope_scaling_factor": spec.rope_scaling_factor or 8.0}
    optimizer = ddp = scheduler = lr_schedule = None
    per_train_step = False
    dp = max(layout.dp, 1)
    if role.optimizer is not None:
        o = role.optimizer
        # Megatron's "adam" is AdamW unless decoupled_weight_decay is off (L2 added to the gradient, torch's Adam).
        name = "sgd" if o.name == "sgd" else "adam"
        distributed = dp > 1
        optimizer = {"optimizer": name, "lr": o.lr, "min_lr": o.min_lr, "weight_decay": o.weight_decay,
                     "adam_beta1": o.betas[0], "adam_beta2": o.betas[1], "adam_eps": o.eps,
                     "decoupled_weight_decay": o.name != "adam",
                     # megatron-core clips at clip_grad > 0 only; rlcfg's None (no clipping) is 0.
                     "clip_grad": float(o.grad_clip) if o.grad_clip else 0.0,
                     "bf16": dtype == "bfloat16", "fp16": dtype == "float16", "params_dtype": dtype,
                     "use_distributed_optimizer": distributed}
        if dtype == "float16":
            notes.append("fp16 uses megatron-core's dynamic loss scaling (initial_loss_scale 2**32)")
        ddp = {"grad_reduce_in_fp32": True, "overlap_grad_reduce": False, "use_distributed_optimizer": distributed,
               "check_for_nan_in_grad": True}
        # ir.Optimizer.decay_steps: a decay of its own length after the warm-up instead of the run's
        decay_steps = (o.warmup_steps + o.decay_steps if o.decay_steps
                       else max(total_optimizer_steps or 1, o.warmup_steps + 1))
        scheduler = {"init_lr": o.warmup_start_lr if o.warmup_steps else o.lr, "max_lr": o.lr, "min_lr": o.min_lr,
                     "lr_warmup_steps": o.warmup_steps, "lr_decay_steps": decay_steps,
                     "lr_decay_style": o.scheduler, "start_wd": o.weight_decay, "end_wd": o.weight_decay,
                     "wd_incr_steps": decay_steps, "wd_incr_style": "constant"}
        from rlcfg.runtime import algorithms as A

        per_train_step = o.schedule_unit == "train_step"
        lr_schedule = A.lr_schedule(o, schedule_train_steps if per_train_step else total_optimizer_steps)
    micro = role.micro_batch_size or role.forward_micro_batch_size or 1
    return MegatronSettings(role=role.name, layout=layout, model=spec, transformer=transformer, gpt=gpt,
                            optimizer=optimizer, ddp=ddp, scheduler=scheduler, micro_batch_size=micro,
                            notes=tuple(notes), sequence_packing=role.sequence_packing,
                            token_budget=role.max_tokens_per_micro_batch if role.sequence_packing else None,
                            budget_key=role.key_for("max_tokens_per_micro_batch"), lr_schedule=lr_schedule,
                            schedule_per_train_step=per_train_step, lora=lora)


def moe_transformer_config(spec: ModelSpec, expert_bias_update_rate: float = 0.0) -> dict[str, Any]:
    """megatron-core's MoE settings that compute what the Hugging Face model computes: Qwen3-MoE's softmax routing
    to the top k experts, their weights renormalised (top k, then softmax over those k) or not (softmax over all,
    then top k); DeepSeek-V3's sigmoid routing (with or without its score correction, moved after each optimizer
    step by `expert_bias_update_rate` where the framework's setup does so), within expert groups, scaled; every
    token kept (no capacity limit), no load-balancing loss. The local spec's experts run one by one
    (SequentialMLP), as grouped GEMMs need Transformer Engine or the grouped_gemm package."""
    out = {"num_moe_experts": spec.experts, "moe_ffn_hidden_size": spec.expert_ffn,
           "moe_router_topk": spec.experts_per_token, "moe_router_score_function": "softmax",
           "moe_router_pre_softmax": not spec.renormalize_topk, "moe_router_load_balancing_type": "none",
           "moe_aux_loss_coeff": 0.0, "moe_z_loss_coeff": None, "moe_expert_capacity_factor": None,
           "moe_token_dispatcher_type": "alltoall", "moe_grouped_gemm": False}
    if spec.dense_layers:
        out["moe_layer_freq"] = [0 if i < spec.dense_layers else 1 for i in range(spec.layers)]
    if spec.shared_ffn:
        out["moe_shared_expert_intermediate_size"] = spec.shared_ffn
    if spec.sigmoid_routing:
        out.update(moe_router_score_function="sigmoid", moe_router_pre_softmax=False,
                   moe_router_topk_scaling_factor=spec.routed_scale,
                   moe_router_num_groups=spec.router_groups or None,
                   moe_router_group_topk=spec.router_group_topk or None,
                   moe_router_enable_expert_bias=spec.expert_bias,
                   moe_router_bias_update_rate=expert_bias_update_rate if spec.expert_bias else 0.0)
    return out


def mla_transformer_config(spec: ModelSpec) -> dict[str, Any]:
    """megatron-core's multi-latent attention (MLATransformerConfig) as DeepSeek-V3 computes it: plain rotary
    embeddings on each head's last qk_rope_dim channels (megatron-core reads them interleaved, as the checkpoint
    stores them), softmax scale 1/sqrt(query head size)."""
    return {"multi_latent_attention": True, "q_lora_rank": spec.q_lora_rank or None,
            "kv_lora_rank": spec.kv_lora_rank, "qk_head_dim": spec.qk_nope_dim, "qk_pos_emb_head_dim": spec.qk_rope_dim,
            "v_head_dim": spec.v_head_dim, "kv_channels": spec.v_head_dim, "rope_type": "rope",
            "rotary_base": spec.rope_theta, "rotary_scaling_factor": 1.0, "mscale": 1.0, "mscale_all_dim": 0.0,
            "apply_rope_fusion": False}


def lower_plan(plan: Any, model_configs: Mapping[str, Mapping[str, Any]] | None = None,
               total_optimizer_steps: int | None = None) -> dict[str, MegatronSettings]:
    """Every Megatron role of an ExecutionPlan, lowered. `model_configs`: config.json dicts by model path
    (the plan's memory architectures are the fallback)."""
    out: dict[str, MegatronSettings] = {}
    archs = {a.name: a for a in (plan.memory.architectures if plan.memory else ())}
    role_arch = {m.role: archs.get(m.model) for m in (plan.memory.roles if plan.memory else ())}
    for role in plan.experiment.roles:
        if role.backend != "megatron":
            continue
        placement = plan.placement(role.name)
        world = len(placement.ranks) if placement else role.resources.gpus
        config = (model_configs or {}).get(role.model.path) if role.model else None
        spec = model_spec_for(role, config, role_arch.get(role.name))
        steps = total_optimizer_steps
        if steps is None and plan.batch.total_steps:
            steps = plan.batch.total_steps * max(1, plan.batch.optimizer_steps_per_step)
        out[role.name] = lower_role(role, spec, world, steps)
    return out


def _torch_dtype(name: str | None) -> Any:
    import torch

    return getattr(torch, name) if name else None


def build_configs(settings: MegatronSettings) -> tuple[Any, Any | None, Any | None]:
    """megatron-core's own TransformerConfig, OptimizerConfig and DistributedDataParallelConfig for one lowered
    role. Their __post_init__ checks run here; a failure is re-raised as MegatronConfigError naming the role."""
    require_megatron()
    import torch
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.optimizer import OptimizerConfig
    from megatron.core.transformer import MLATransformerConfig, TransformerConfig

    kwargs = dict(settings.transformer)
    kwargs["params_dtype"] = _torch_dtype(kwargs["params_dtype"])
    kwargs["pipeline_dtype"] = _torch_dtype(kwargs["pipeline_dtype"])
    kwargs["activation_func"] = {"silu": torch.nn.functional.silu}[kwargs["activation_func"]]
    try:
        transformer = (MLATransformerConfig if kwargs.get("multi_latent_attention") else TransformerConfig)(**kwargs)
        optimizer = ddp = None
        if settings.optimizer is not None:
            o = dict(settings.optimizer)
            o["params_dtype"] = _torch_dtype(o["params_dtype"])
            optimizer = OptimizerConfig(**o)
            ddp = DistributedDataParallelConfig(**settings.ddp)
    except (ValueError, AssertionError, TypeError) as e:
        raise MegatronConfigError(f"role `{settings.role}`: megatron-core rejects the configuration: {e}") from e
    return transformer, optimizer, ddp


# ---- parallel state and model ----------------------------------------------------------------------------------

def init_parallel_state(layout: MegatronLayout, seed: int | None = None) -> None:
    """megatron-core's process groups for the layout, on an initialised torch.distributed world. With a GPU,
    also the model-parallel CUDA RNG streams; on CPU the inference RNG tracker (no dropout forks on CUDA)."""
    require_megatron()
    import torch
    import torch.distributed as dist
    from megatron.core import parallel_state

    if dist.get_world_size() != layout.world:
        raise MegatronConfigError(f"the layout is for {layout.world} ranks but torch.distributed has "
                                  f"{dist.get_world_size()}")
    if parallel_state.model_parallel_is_initialized():
        parallel_state.destroy_model_parallel()
    parallel_state.initialize_model_parallel(**layout.parallel_state_kwargs())
    if torch.cuda.is_available():
        from megatron.core.tensor_parallel import model_parallel_cuda_manual_seed

        model_parallel_cuda_manual_seed(seed if seed is not None else 42)
    else:
        from megatron.core.tensor_parallel.random import initialize_rng_tracker

        initialize_rng_tracker(inference_rng_tracker=True, force_reset=True)


class _RMSNorm:
    """torch's RMSNorm for the local layer spec, which (unlike megatron-core's WrappedTorchNorm) accepts
    sequence parallelism: each tensor-parallel rank then normalises its own slice of the sequence, and the weight
    is marked `sequence_parallel` so that finalize_model_grads sums its gradient over the TP ranks (megatron-core's
    Apex norm does the same; the q/k norms are summed by name)."""

    def __new__(cls, config: Any, hidden_size: int, eps: float = 1e-5, **_unused: Any) -> Any:
        import torch

        norm = torch.nn.RMSNorm(hidden_size, eps=eps)
        norm.weight.sequence_parallel = bool(config.sequence_parallel)
        return norm


def layer_spec(spec: ModelSpec, context_parallel: bool = False, moe: bool | None = None) -> Any:
    """The local (pure torch) layer spec. Its attention takes an explicit mask, which left-padded RL batches
    need; Transformer Engine's fused attention would ignore it without packed sequences. Its norms are
    _RMSNorm: megatron-core's local RMSNorm refuses sequence parallelism outright. With context parallelism its
    core attention is megatron_cp's, which megatron-core's local spec has no counterpart of; multi-latent
    attention's core attention is LatentAttention (megatron-core's local one cannot take its key and value
    sizes). `moe`: whether this layer routes to experts (default: whether the model has experts)."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec

    moe = bool(spec.experts) if moe is None else moe
    layer = get_gpt_layer_local_spec(num_experts=spec.experts if moe else None, moe_grouped_gemm=False,
                                     qk_layernorm=spec.qk_norm or spec.mla, multi_latent_attention=spec.mla,
                                     normalization="RMSNorm")
    attention = layer.submodules.self_attention
    replaced: dict[str, Any] = {}  # the attention's submodules rlcfg swaps in
    if spec.qk_norm:
        replaced = {"q_layernorm": _RMSNorm, "k_layernorm": _RMSNorm}
    if spec.mla:
        # The projections to the latents are megatron-core's plain Linear, whole on every TP rank (each rank's
        # slice of the tokens under sequence parallelism, their gradients summed over the ranks as a norm's are):
        # as column-parallel layers, megatron-core's MLA would give the key's rotary channels, which every head
        # shares, only the gradient of the rank's own heads.
        from megatron.core.post_training.modelopt.layers import Linear

        replaced = {"q_layernorm": _RMSNorm, "kv_layernorm": _RMSNorm, "linear_q_down_proj": Linear,
                    "linear_kv_down_proj": Linear}
    core = None
    if spec.mla:
        from rlcfg.runtime.backends.megatron_cp import ContextParallelLatentAttention, LatentAttention

        core = ContextParallelLatentAttention if context_parallel else LatentAttention
    elif context_parallel:
        from rlcfg.runtime.backends.megatron_cp import ContextParallelAttention

        core = ContextParallelAttention
    if core is not None:
        replaced["core_attention"] = core
    if replaced:
        attention = dataclasses.replace(attention, submodules=dataclasses.replace(attention.submodules, **replaced))
    return dataclasses.replace(layer, submodules=dataclasses.replace(
        layer.submodules, input_layernorm=_RMSNorm, pre_mlp_layernorm=_RMSNorm, self_attention=attention))


def block_spec(spec: ModelSpec, transformer_config: Any, vp_stage: int | None) -> Any:
    """This stage's layers (dense or routing to experts by their place in the whole model) and the final norm (a
    bare layer spec would give the block megatron-core's own final norm, which refuses sequence parallelism)."""
    from megatron.core.transformer.transformer_block import TransformerBlockSubmodules, get_num_layers_to_build
    from megatron.core.transformer.transformer_layer import get_transformer_layer_offset

    layers = get_num_layers_to_build(transformer_config, vp_stage=vp_stage)
    offset = get_transformer_layer_offset(transformer_config, vp_stage=vp_stage)
    cp = transformer_config.context_parallel_size > 1
    return TransformerBlockSubmodules(layer_specs=[layer_spec(spec, cp, spec.moe_layer(offset + i))
                                                   for i in range(layers)], layer_norm=_RMSNorm)


def _without_transformer_engine() -> None:
    """megatron-core 0.16's router computes its logits through `te_general_gemm` when that name is not None, but
    defines the name only when Transformer Engine imports: without it every MoE forward is a NameError. None
    selects its own torch matmul. Its multi-latent attention believes Transformer Engine present whenever its
    extension module imports, which it does without Transformer Engine (its layer classes then stand-ins that
    `isinstance` refuses); it is told the truth."""
    from megatron.core.extensions import transformer_engine
    from megatron.core.transformer import multi_latent_attention
    from megatron.core.transformer.moe import moe_utils

    if not getattr(moe_utils, "HAVE_TE", True) and not hasattr(moe_utils, "te_general_gemm"):
        moe_utils.te_general_gemm = None
    if not getattr(transformer_engine, "HAVE_TE", True):
        multi_latent_attention.HAVE_TE = False
    if multi_latent_attention.Linear is None:  # the layer_spec's latent projections are this class
        from megatron.core.post_training.modelopt.layers import Linear

        multi_latent_attention.Linear = Linear


def build_model_chunks(settings: MegatronSettings, transformer_config: Any) -> list[Any]:
    """One GPTModel per virtual pipeline stage this rank holds, first/last stage flags from parallel state."""
    from megatron.core import parallel_state as ps
    from megatron.core.models.gpt import GPTModel

    if settings.model.experts or settings.model.mla:
        _without_transformer_engine()

    chunks = []
    vpp = settings.layout.vpp or 1
    for stage in range(vpp):
        vp_stage = stage if vpp > 1 else None
        chunks.append(GPTModel(
            transformer_config, block_spec(settings.model, transformer_config, vp_stage),
            pre_process=ps.is_pipeline_first_stage(ignore_virtual=False, vp_stage=vp_stage),
            post_process=ps.is_pipeline_last_stage(ignore_virtual=False, vp_stage=vp_stage),
            vp_stage=vp_stage, **settings.gpt))
    for chunk in chunks:
        _mark_tensor_parallel(chunk, transformer_config)
    return chunks


def _mark_tensor_parallel(chunk: Any, transformer_config: Any) -> None:
    """megatron-core tags a tensor-parallel weight (`tensor_model_parallel`, `partition_dim`) only inside its
    weight initialisers, which perform_initialization=False skips. Untagged, every TP rank but the first leaves
    its shards out of the gradient norm, so the norm and the clipping are wrong under TP; tag them as the
    initialisers would."""
    from megatron.core.tensor_parallel import layers as L

    for name, module in chunk.named_modules():
        weight = getattr(module, "weight", None)
        if weight is None or hasattr(weight, "tensor_model_parallel"):
            continue
        if isinstance(module, (L.ColumnParallelLinear, L.VocabParallelEmbedding)):
            dim = 0
        elif isinstance(module, L.RowParallelLinear):
            dim = 1
        else:
            continue
        # Gate and up rows interleave per rank in a gated MLP's fc1 (megatron-core's own stride for it).
        stride = 2 if name.endswith("linear_fc1") and transformer_config.gated_linear_unit else 1
        L.set_tensor_model_parallel_attributes(weight, is_parallel=True, dim=dim, stride=stride)


def load_hf_into(chunks: list[Any], hf_state: Mapping[str, Any], settings: MegatronSettings) -> None:
    """Load this rank's slice of Hugging Face weights into its model chunks; any tensor left unset is an error."""
    from megatron.core import parallel_state as ps

    from rlcfg.runtime.backends import megatron_weights as W

    lay = settings.layout
    shards, experts = W.shard_layout(hf_state, settings.model, lay.tp, lay.pp, lay.vpp, lay.ep, expert_tp(lay),
                                     first=lay.first_stage_layers, last=lay.last_stage_layers)
    tp_rank, pp_rank = ps.get_tensor_model_parallel_rank(), ps.get_pipeline_model_parallel_rank()
    for stage, chunk in enumerate(chunks):
        target = _unwrap(chunk)
        state = dict(shards[(tp_rank, pp_rank, stage)])
        if experts:
            state.update(experts[_expert_key(pp_rank, stage)])
        result = target.load_state_dict(state, strict=False)
        missing = [k for k in result.missing_keys if not k.endswith("_extra_state")]
        if missing or result.unexpected_keys:
            raise ConversionError(f"loading into the Megatron model left {missing} unset and found no place for "
                                  f"{list(result.unexpected_keys)}")


def _expert_biases(chunks: list[Any]) -> dict[tuple[int, str], Any]:
    """The routers' score corrections, which stay float32 whatever the model's dtype: megatron-core routes and
    updates them in float32, and a round trip through bf16 would move them."""
    return {(i, name): module.expert_bias.detach().clone() for i, chunk in enumerate(chunks)
            for name, module in chunk.named_modules() if getattr(module, "expert_bias", None) is not None}


def _restore_expert_biases(chunks: list[Any], biases: Mapping[tuple[int, str], Any], device: Any) -> None:
    for (i, name), bias in biases.items():
        chunks[i].get_submodule(name).expert_bias = bias.to(device)


def expert_tp(layout: MegatronLayout) -> int:
    """The expert tensor-parallel size: megatron-core's default is the tensor-parallel size."""
    return layout.etp if layout.etp is not None else layout.tp


def _expert_key(pp_rank: int, stage: int) -> tuple[int, int, int, int]:
    from megatron.core import parallel_state as ps

    return (ps.get_expert_tensor_parallel_rank(), ps.get_expert_model_parallel_rank(), pp_rank, stage)


def _ddp_buffers(chunk: Any) -> list[Any]:
    return list(getattr(chunk, "buffers", [])) + list(getattr(chunk, "expert_parallel_buffers", []))


def _storage_key(tensor: Any) -> int:
    return tensor.untyped_storage().data_ptr()


def _park(tensors: list[Any], pin: bool) -> list[tuple[Any, Any]]:
    """Copy each distinct storage behind `tensors` to host memory and free it (size 0); returns what _unpark
    needs. Views keep their storage object, offsets and strides, so they are whole again after _unpark."""
    import torch

    parked, seen = [], set()
    for t in tensors:
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key in seen or storage.nbytes() == 0:
            continue
        seen.add(key)
        host = torch.empty(storage.nbytes(), dtype=torch.uint8, pin_memory=pin)
        host.untyped_storage().copy_(storage)
        storage.resize_(0)
        parked.append((storage, host))
    return parked


def _unpark(parked: list[tuple[Any, Any]]) -> None:
    for storage, host in parked:
        storage.resize_(host.numel())
        storage.copy_(host.untyped_storage())


def _unwrap(chunk: Any) -> Any:
    while hasattr(chunk, "module"):
        chunk = chunk.module
    return chunk


# ---- the loss, on vocabulary-parallel logits --------------------------------------------------------------------

def causal_padding_mask(attention_mask: Any) -> Any:
    """megatron-core's attention mask ([b, 1, s, s], True = not attended) for a left/right padded batch:
    causal, and no query attends to a padding key. Padding queries keep their own column, so no softmax row
    is empty."""
    import torch

    b, s = attention_mask.shape
    causal = torch.triu(torch.ones(s, s, dtype=torch.bool, device=attention_mask.device), diagonal=1)
    keys = ~attention_mask.bool()[:, None, None, :]
    mask = causal[None, None] | keys
    eye = torch.eye(s, dtype=torch.bool, device=attention_mask.device)[None, None]
    return mask & ~eye


def _mask_padded_vocab(logits: Any, vocab: int) -> Any:
    """Columns past the real vocabulary (Megatron's padding) get the lowest finite logit, so they carry no
    probability; `logits` is this TP rank's vocabulary shard."""
    import torch

    from megatron.core import parallel_state as ps

    part = logits.shape[-1]
    start = ps.get_tensor_model_parallel_rank() * part
    if start + part <= vocab:
        return logits
    keep = torch.arange(start, start + part, device=logits.device) < vocab
    return logits.masked_fill(~keep, torch.finfo(logits.dtype).min)


def token_logprobs(logits: Any, targets: Any, vocab: int, temperature: float = 1.0) -> Any:
    """log p(target) from vocabulary-parallel logits [b, s, v/tp] (megatron-core's own cross entropy, which
    all-reduces over the tensor-parallel group and has the matching backward)."""
    from megatron.core.tensor_parallel import vocab_parallel_cross_entropy

    scaled = _mask_padded_vocab(logits.float() / temperature, vocab)
    return -vocab_parallel_cross_entropy(scaled, targets)


def vocab_parallel_entropy(logits: Any, vocab: int, temperature: float = 1.0) -> Any:
    """Entropy of the softmax over vocabulary-parallel logits. The sums go through megatron-core's
    reduce_from_tensor_model_parallel_region (all-reduce forward, identity backward), which is right because
    every TP rank computes the same loss from them."""
    import torch
    import torch.distributed as dist

    from megatron.core import parallel_state as ps
    from megatron.core.tensor_parallel.mappings import reduce_from_tensor_model_parallel_region as reduce

    x = _mask_padded_vocab(logits.float() / temperature, vocab)
    m = x.detach().max(dim=-1, keepdim=True).values
    if ps.get_tensor_model_parallel_world_size() > 1:
        dist.all_reduce(m, op=dist.ReduceOp.MAX, group=ps.get_tensor_model_parallel_group())
    e = torch.exp(x - m)
    z = reduce(e.sum(dim=-1))
    weighted = reduce((e * x).sum(dim=-1))
    return m.squeeze(-1) + torch.log(z) - weighted / z


def ppo_loss(logits: Any, mb: Mapping[str, Any], cfg: Mapping[str, Any], prompt_width: int, lo: int, vocab: int,
             temperature: float, tokens: float, seqs: float) -> tuple[Any, dict[str, Any]]:
    """The clipped policy loss (plus KL and entropy terms) of one micro-batch, from its logits over columns
    lo.. of the batch; the same mathematics as the fsdp backend (rlcfg.runtime.algorithms), its share of the
    global mini-batch given by the (tokens, seqs) denominators."""
    from rlcfg.runtime import algorithms as A

    spec: A.ActorLossSpec = cfg["loss"]  # step.prepare_update puts the Experiment's loss there
    logprobs, entropy = response_scores(logits, mb, prompt_width, lo, vocab, temperature, bool(spec.entropy_coef))
    # The actor's loss is algorithms.actor_loss, shared with the FSDP backend; only the log-probs and entropy
    # are computed here, over the vocabulary-parallel logits.
    view = {k: mb[k].to(logits.device) for k in (*A.ACTOR_TOKEN_KEYS, *A.ACTOR_SAMPLE_KEYS) if k in mb}
    return A.actor_loss(logprobs, view, spec, tokens, seqs, entropy)


def response_scores(logits: Any, mb: Mapping[str, Any], prompt_width: int, lo: int, vocab: int, temperature: float,
                    want_entropy: bool = False) -> tuple[Any, Any]:
    """Per-response-token log-probs (and entropy, or None) of a micro-batch, [rows, response columns], from its
    vocabulary-parallel logits over columns lo.. of the batch (a packed micro-batch's rows too). Under context
    parallelism the logits are this rank's columns only (`next_tokens` in the micro-batch): each column's
    log-prob of its next token is taken here and the group's joined in sequence order first."""
    import torch

    if "next_tokens" in mb:
        from rlcfg.runtime.backends import megatron_cp

        scores = [token_logprobs(logits, mb["next_tokens"], vocab, temperature)]
        if want_entropy:
            scores.append(vocab_parallel_entropy(logits, vocab, temperature))
        whole = megatron_cp.gather_columns(torch.stack(scores, dim=-1), dim=1)
        if "packed" in mb:
            row = mb["packed"]
            picked = whole[0, row.sources.to(whole.device)]
            samples = mb["input_ids"].shape[0]
            return (row.unpack(picked[:, 0], samples),
                    row.unpack(picked[:, 1], samples) if want_entropy else None)
        width = mb["response_mask"].shape[1]
        start = prompt_width - 1 - lo
        picked = whole[:, start:start + width]
        return picked[..., 0], (picked[..., 1] if want_entropy else None)
    if "packed" in mb:
        return packed_logprobs(logits, mb, prompt_width, vocab, temperature, want_entropy)
    width = mb["response_mask"].shape[1]
    start = prompt_width - 1 - lo  # logits at column c predict the token at c + 1
    resp_logits = logits[:, start:start + width]
    targets = mb["input_ids"][:, prompt_width:prompt_width + width].to(logits.device)
    logprobs = token_logprobs(resp_logits, targets, vocab, temperature)
    entropy = vocab_parallel_entropy(resp_logits, vocab, temperature) if want_entropy else None
    return logprobs, entropy


def packed_logprobs(logits: Any, mb: Mapping[str, Any], prompt_width: int, vocab: int, temperature: float,
                    want_entropy: bool = False) -> tuple[Any, Any]:
    """Per-response-token log-probs (and entropy) of a packed micro-batch, [samples, response columns] as the
    padded layout has them, from the packed row's vocabulary-parallel logits [1, T, v/tp]."""
    row = mb["packed"]
    samples = mb["input_ids"].shape[0]
    resp_logits = logits[:, row.sources.to(logits.device)]
    targets = mb["input_ids"][:, prompt_width:][row.rows, row.cols][None].to(logits.device)
    logprobs = row.unpack(token_logprobs(resp_logits, targets, vocab, temperature)[0], samples)
    entropy = (row.unpack(vocab_parallel_entropy(resp_logits, vocab, temperature)[0], samples)
               if want_entropy else None)
    return logprobs, entropy


def _summed(outs: list[Mapping[str, float]]) -> dict[str, float]:
    sums: dict[str, float] = {}
    for o in outs:
        for k, v in o.items():
            sums[k] = sums.get(k, 0.0) + float(v)
    return sums


# ---- the engine (GPU) -------------------------------------------------------------------------------------------

def _on_engine_device(method: Any) -> Any:
    """Runs an engine method under the CPU shim when the engine lives on CPU (megatron-core allocates on CUDA
    inside every schedule run, optimizer step and checkpoint)."""
    import functools

    @functools.wraps(method)
    def wrapper(self: "MegatronEngine", *args: Any, **kwargs: Any) -> Any:
        with self._on_device():
            return method(self, *args, **kwargs)

    return wrapper


class MegatronEngine:
    """One rank of a Megatron-trained (actor) or frozen (reference) model. Needs a GPU: megatron-core 0.16's
    schedules, DDP buffers and optimizer allocate on CUDA; built under megatron_cpu.cuda_as_cpu() or with
    RLCFG_MEGATRON_ON_CPU=1 it runs on CPU instead (a testing aid). Each rank receives its data-parallel shard."""

    def __init__(self, kind: str, model_path: str, settings: MegatronSettings, *, temperature: float = 1.0,
                 seed: int = 42, offload_params: bool = False, offload_optimizer: bool = False):
        require_megatron()
        import torch

        if kind == "critic":
            raise MegatronConfigError("the megatron backend has no value head yet; train the critic with fsdp")
        from rlcfg.runtime.backends import megatron_cpu, megatron_on_cpu_requested

        on_cpu = megatron_on_cpu_requested() or megatron_cpu.active()
        if not on_cpu and not torch.cuda.is_available():
            raise MegatronConfigError("megatron-core's training path needs a GPU (its schedules and DDP allocate on "
                                      "CUDA); use the fsdp backend on a CPU-only machine")
        # Under megatron_cpu's shim (a testing aid) megatron-core's own CUDA allocations land on CPU; the engine's
        # tensors must follow them there.
        self.device = "cpu" if on_cpu else "cuda"
        with self._on_device():
            self._build(kind, model_path, settings, temperature, seed, offload_params, offload_optimizer)

    def _on_device(self) -> Any:
        import contextlib

        from rlcfg.runtime.backends import megatron_cpu

        return megatron_cpu.cuda_as_cpu() if self.device == "cpu" else contextlib.nullcontext()

    def _build(self, kind: str, model_path: str, settings: MegatronSettings, temperature: float, seed: int,
               offload_params: bool, offload_optimizer: bool) -> None:
        import torch.distributed as dist
        from megatron.core import parallel_state as ps

        self.kind, self.settings, self.model_path = kind, settings, model_path
        self.temperature = temperature if temperature and temperature > 0 else 1.0
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.offload_params, self.offload_optimizer = offload_params, offload_optimizer
        init_parallel_state(settings.layout, seed)
        tf_config, opt_config, ddp_config = build_configs(settings)
        self.tf_config = tf_config
        chunks = build_model_chunks(settings, tf_config)
        from rlcfg.runtime.backends import megatron_weights as W

        hf_state = W.load_hf_weights(model_path)
        load_hf_into(chunks, hf_state, settings)
        # Exported as the checkpoint has them: the tensors this Megatron model does not hold.
        self._unheld = W.unheld(hf_state, settings.model)
        del hf_state
        biases = _expert_biases(chunks)
        chunks = [c.to(dtype=_torch_dtype(settings.transformer["params_dtype"]), device=self.device) for c in chunks]
        _restore_expert_biases(chunks, biases, self.device)
        if settings.lora is not None and opt_config is not None:
            from rlcfg.runtime.backends.megatron_lora import add_adapters

            add_adapters(chunks, settings.lora, seed, ps.get_pipeline_model_parallel_rank())
        self.optimizer = self.scheduler = None
        if opt_config is not None:
            from megatron.core.distributed import DistributedDataParallel
            from megatron.core.optimizer import get_megatron_optimizer
            from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler

            from megatron.core.distributed import finalize_model_grads

            chunks = [DistributedDataParallel(config=tf_config, ddp_config=ddp_config, module=c) for c in chunks]
            # The schedule reduces gradients over data-parallel ranks (and ties embeddings across pipeline
            # stages, sums sequence-parallel norm gradients) only through this hook; megatron-core leaves it
            # unset outside Megatron-LM's training loop.
            tf_config.finalize_model_grads_func = finalize_model_grads
            for c in chunks:
                c.broadcast_params()
            self.optimizer = get_megatron_optimizer(opt_config, chunks)
            self.scheduler = OptimizerParamScheduler(self.optimizer, **settings.scheduler)
            if settings.lr_schedule is not None:
                follow_schedule(self.scheduler, settings.lr_schedule)
        else:
            for c in chunks:
                c.requires_grad_(False)
        self.chunks = chunks
        self._parked: list[tuple[Any, Any]] | None = None  # storages held in host memory by offload()
        self.tp_rank, self.pp_rank = ps.get_tensor_model_parallel_rank(), ps.get_pipeline_model_parallel_rank()

    # -------------------------------------------------------------------------------------- schedule

    def _micro_batches(self, batch: Mapping[str, Any], micro: int, prompt_width: int) -> tuple[list[dict], int, int]:
        """Micro-batches on the GPU with their token ids, positions and attention masks; every micro-batch has
        the same width, a multiple of TP with sequence parallelism, and under pipeline parallelism the same
        number of rows (a pipeline's send/receive buffers are sized once, from the first micro-batch): a short
        last one is filled with empty rows, which carry no response tokens and so no loss. `real_rows` says how
        many rows are data. Returns (micro-batches, width, first column)."""
        import torch

        from rlcfg.runtime.backends.fsdp import _trim

        if self.settings.sequence_packing:
            return self._packed_micro_batches(batch, micro, prompt_width)
        lay = self.settings.layout
        lo, hi = _trim(batch, prompt_width) if lay.pp == 1 else (0, batch["response_mask"].shape[1])
        end = prompt_width + hi
        width = end - lo
        pad = -width % self._width_multiple()
        out = []
        n = batch["response_mask"].shape[0]
        for i in range(0, n, micro):
            rows = min(micro, n - i)
            fill = micro - rows if lay.pp > 1 else 0

            def take(v: Any) -> Any:
                part = v[i:i + rows]
                return torch.cat([part, part.new_zeros((fill, *part.shape[1:]))]) if fill else part

            ids = take(batch["input_ids"])[:, lo:end]
            attn = take(batch["attention_mask"])[:, lo:end]
            if pad:
                ids = torch.nn.functional.pad(ids, (0, pad))
                attn = torch.nn.functional.pad(attn, (0, pad))
            pos = (attn.long().cumsum(dim=1) - 1).clamp(min=0)
            mb = {k: take(v)[:, :hi] if v.ndim == 2 and k not in ("input_ids", "attention_mask") else take(v)
                  for k, v in batch.items()}
            mb.update(input_ids=take(batch["input_ids"]), tokens=ids.to(self.device),
                      position_ids=pos.to(self.device), mask=causal_padding_mask(attn).to(self.device),
                      real_rows=rows)
            out.append(self._context_parallel(mb))
        return out, (width + pad) // lay.cp, lo

    def _packed_micro_batches(self, batch: Mapping[str, Any], micro: int, prompt_width: int
                              ) -> tuple[list[dict], int, int]:
        """_micro_batches with each micro-batch's samples packed into one row (packing.pack) under a
        block-diagonal causal mask. Every row is padded to the longest one (a pipeline sizes its buffers once)
        and to a multiple of TP with sequence parallelism. Each micro-batch carries its rows of the batch
        (`rows`) and the PackedRow that maps the row's outputs back to them (`packed`)."""
        import torch

        from rlcfg.runtime import packing

        lay = self.settings.layout
        groups = packing.micro_batch_rows(batch["attention_mask"], micro, self.settings.token_budget,
                                          self.settings.budget_key)
        every = torch.arange(batch["attention_mask"].shape[0])
        packed = [(every[rows], packing.pack(batch["input_ids"][rows], batch["attention_mask"][rows], prompt_width))
                  for rows in groups]
        width = max(int(row.input_ids.shape[1]) for _, row in packed)
        width += -width % self._width_multiple()
        out = []
        for rows, row in packed:
            fill = width - int(row.input_ids.shape[1])
            ids = torch.nn.functional.pad(row.input_ids, (0, fill))
            pos = torch.cat([row.position_ids, torch.arange(fill, dtype=row.position_ids.dtype)[None]], dim=1)
            mb = {k: v[rows][:, :row.width] if v.ndim == 2 and k not in ("input_ids", "attention_mask") else v[rows]
                  for k, v in batch.items()}
            mb.update(tokens=ids.to(self.device), position_ids=pos.to(self.device),
                      mask=packing.block_causal_mask(row.segments, width).to(self.device), real_rows=mb[
                          "response_mask"].shape[0], packed=row, rows=rows)
            following = None
            if lay.cp > 1:
                # A packed row leaves out each sample's last token (it predicts nothing scored): the token a column
                # predicts is its sample's next, not the row's.
                following = torch.zeros_like(ids)
                following[0, row.sources] = batch["input_ids"][rows][:, prompt_width:][row.rows, row.cols]
            out.append(self._context_parallel(mb, following))
        return out, width // lay.cp, 0

    def _width_multiple(self) -> int:
        """What a micro-batch's width must divide by: 2·cp chunks (megatron_cp), each rank's share a multiple of
        TP under sequence parallelism."""
        lay = self.settings.layout
        return (2 * lay.cp if lay.cp > 1 else 1) * (lay.tp if lay.sequence_parallel else 1)

    def _context_parallel(self, mb: dict[str, Any], following: Any = None) -> dict[str, Any]:
        """Under context parallelism: this rank's columns of the micro-batch's tokens and positions, and the token
        each of them predicts (`next_tokens`: `following`, by default the row's next token); the mask stays the
        whole sequence's (megatron_cp)."""
        if self.settings.layout.cp == 1:
            return mb
        import torch

        from rlcfg.runtime.backends import megatron_cp

        tokens = mb["tokens"]
        if following is None:
            following = torch.cat([tokens[:, 1:], tokens.new_zeros((tokens.shape[0], 1))], dim=1)
        following = following.to(tokens.device)
        mb.update(tokens=megatron_cp.local(tokens, 1), position_ids=megatron_cp.local(mb["position_ids"], 1),
                  next_tokens=megatron_cp.local(following, 1))
        return mb

    def _run(self, mbs: list[dict], width: int, lo: int, prompt_width: int, forward_only: bool,
             loss_of: Any) -> list[dict]:
        from megatron.core.pipeline_parallel import get_forward_backward_func

        def forward_step(data_iterator: Any, model: Any):
            mb = next(data_iterator)
            logits = model(mb["tokens"], mb["position_ids"], attention_mask=mb["mask"])
            return logits, lambda output: loss_of(output, mb)

        vpp = len(self.chunks)
        iterators = [iter(mbs) for _ in range(vpp)] if vpp > 1 else iter(mbs)
        return get_forward_backward_func()(
            forward_step_func=forward_step, data_iterator=iterators, model=self.chunks,
            num_microbatches=len(mbs), seq_length=width, micro_batch_size=mbs[0]["tokens"].shape[0],
            forward_only=forward_only)

    def _broadcast_from_last_stage(self, value: Any) -> Any:
        """Results exist on the last pipeline stage; every rank returns them."""
        import torch.distributed as dist

        from megatron.core import parallel_state as ps

        if self.settings.layout.pp == 1:
            return value
        box = [value]
        group = ps.get_pipeline_model_parallel_group()
        dist.broadcast_object_list(box, src=dist.get_global_rank(group, self.settings.layout.pp - 1), group=group)
        return box[0]

    # -------------------------------------------------------------------------------------- interface

    def _response_logprobs(self, logits: Any, mb: Mapping[str, Any], prompt_width: int, lo: int) -> Any:
        """The micro-batch's per-response-token log-probs, [rows, response columns] (a packed one's rows too)."""
        return response_scores(logits, mb, prompt_width, lo, self.settings.model.vocab, self.temperature)[0]

    @_on_engine_device
    def compute(self, batch: Mapping[str, Any], micro_batch: int) -> dict[str, Any]:
        """Per-response-token log-probs of this rank's data-parallel shard."""
        import torch

        start = time.perf_counter()
        n, width = batch["response_mask"].shape
        prompt_width = batch["input_ids"].shape[1] - width
        mbs, seq, lo = self._micro_batches(batch, micro_batch, prompt_width)

        def loss_of(logits: Any, mb: Mapping[str, Any]):
            lp = self._response_logprobs(logits, mb, prompt_width, lo).detach().cpu()
            if "packed" in mb:
                return logits.new_zeros(()), {"logprobs": lp, "rows": mb["rows"]}
            return logits.new_zeros(()), {"logprobs": lp[:mb["real_rows"]]}

        for c in self.chunks:
            c.eval()
        with torch.no_grad():
            outs = self._run(mbs, seq, lo, prompt_width, True, loss_of)
        result = torch.zeros((n, width), dtype=torch.float32)
        if outs:
            rows = 0
            for o in outs:
                lp = o["logprobs"]
                if "rows" in o:  # a packed micro-batch: rows of the batch wherever the budget put them
                    result[o["rows"], :lp.shape[1]] = lp
                    continue
                result[rows:rows + lp.shape[0], :lp.shape[1]] = lp
                rows += lp.shape[0]
        result = self._broadcast_from_last_stage(result) * batch["response_mask"]
        return {"values": result, "forward_s": time.perf_counter() - start}

    # SFT (rlcfg.runtime.supervised_step's meaning): a sequence's first token is its "prompt" and every later one a
    # "response" token, scored where the example's loss mask marks it, so the schedule and the log-probs are the RL
    # update's.

    def _supervised(self, batch: Mapping[str, Any], cfg: Mapping[str, Any], train: bool) -> dict[str, float]:
        import torch

        from rlcfg.runtime.supervised_step import sft_sums

        if cfg["kind"] != "sft":
            raise MegatronConfigError("the megatron backend trains no value head, so no reward model; use fsdp")
        rl = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"],
              "response_mask": batch["loss_mask"][:, 1:].float()}
        mbs, seq, lo = self._micro_batches(rl, max(1, int(cfg["micro_batch"])), 1)
        count, dp = len(mbs), self.settings.layout.dp
        denominator = max(float(cfg.get("denominator") or 1.0), 1.0)

        def loss_of(logits: Any, mb: Mapping[str, Any]):
            lp = self._response_logprobs(logits, mb, 1, lo)
            mask = mb["response_mask"].to(lp.device)[:mb["real_rows"]]
            lp = lp[:mb["real_rows"]]
            loss = -(lp * mask).sum() / denominator
            stats = sft_sums(lp, mask)
            # The schedule divides by the micro-batch count and DDP averages over DP ranks: undo both, so the
            # update is that of the whole batch's loss over its `denominator` answer tokens.
            return loss * count * dp, stats

        start = time.perf_counter()
        for c in self.chunks:
            c.train(train)
        if not train:
            with torch.no_grad():
                outs = self._run(mbs, seq, lo, 1, True, loss_of)
            return self._broadcast_from_last_stage(_summed(outs))
        for c in self.chunks:
            c.zero_grad_buffer()
        self.optimizer.zero_grad()
        lr = self.optimizer.param_groups[0]["lr"]  # the rate of this update (the scheduler moves on after it)
        outs = self._run(mbs, seq, lo, 1, False, loss_of)
        ok, grad_norm, _zeros = self.optimizer.step()
        if ok or self.settings.schedule_per_train_step:
            self.scheduler.step(increment=1)
        sums = self._broadcast_from_last_stage(_summed(outs))
        sums.update(lr=lr, grad_norm=float(grad_norm or 0.0), forward_backward_s=time.perf_counter() - start,
                    optimizer_s=0.0)
        return sums

    @_on_engine_device
    def train_supervised(self, batch: Mapping[str, Any], cfg: Mapping[str, Any]) -> dict[str, float]:
        """One SFT optimizer step on this rank's data-parallel share of a batch; the loss sums for the metrics."""
        return self._supervised(batch, cfg, train=True)

    @_on_engine_device
    def evaluate_supervised(self, batch: Mapping[str, Any], cfg: Mapping[str, Any]) -> dict[str, float]:
        """The SFT loss sums of this rank's share of the validation data, without gradients."""
        return self._supervised(batch, cfg, train=False)

    @_on_engine_device
    def train(self, batch: Mapping[str, Any], cfg: Mapping[str, Any]) -> dict[str, float]:
        """PPO passes over this rank's shard: mini-batches of cfg["mini_batch"] samples (one optimizer step each)
        in micro-batches of cfg["micro_batch"], through megatron-core's forward-backward schedule."""
        n, width = batch["response_mask"].shape
        prompt_width = batch["input_ids"].shape[1] - width
        mini, micro = int(cfg["mini_batch"]), int(cfg["micro_batch"])
        dp = self.settings.layout.dp
        sums: dict[str, float] = {}
        start = time.perf_counter()
        steps = 0
        for c in self.chunks:
            c.train()
        for _epoch in range(int(cfg.get("ppo_epochs", 1))):
            for j, m0 in enumerate(range(0, n, mini)):
                tokens, seqs = cfg["denominators"][j]
                part = {k: v[m0:m0 + mini] for k, v in batch.items()}
                mbs, seq, lo = self._micro_batches(part, micro, prompt_width)
                count = len(mbs)

                def loss_of(logits: Any, mb: Mapping[str, Any], lo: int = lo, tokens: float = tokens,
                            seqs: float = seqs):
                    from rlcfg.runtime import algorithms as A

                    # The rows that fill a short last micro-batch under pipeline parallelism are not samples.
                    tokens, seqs = A.loss_denominators(cfg.get("normalization", "mini-batch"),
                                                       mb["response_mask"][:mb.get("real_rows")], (tokens, seqs),
                                                       count, dp)
                    loss, stats = ppo_loss(logits, mb, cfg, prompt_width, lo, self.settings.model.vocab,
                                           self.temperature, tokens, seqs)
                    # The schedule divides by the micro-batch count and DDP averages over DP ranks; the loss is
                    # already this micro-batch's share of the global mini-batch, so undo both. (DDP sums the CP
                    # ranks' gradients, each its own columns' part: megatron_cp.)
                    return loss * count * dp, stats

                for c in self.chunks:
                    c.zero_grad_buffer()
                self.optimizer.zero_grad()
                outs = self._run(mbs, seq, lo, prompt_width, False, loss_of)
                ok, grad_norm, _zeros = self.optimizer.step()
                if ok and not self.settings.schedule_per_train_step:
                    self.scheduler.step(increment=1)
                sums["grad_norm"] = sums.get("grad_norm", 0.0) + float(grad_norm or 0.0)
                for o in outs:
                    for k, v in o.items():
                        scale = 1.0 if k in SHARE_METRICS else 1.0 / max(len(outs), 1)
                        sums[k] = sums.get(k, 0.0) + float(v) * scale
                steps += 1
        steps = max(steps, 1)
        if self.settings.schedule_per_train_step:
            self.scheduler.step(increment=1)
        metrics = {k: v / steps for k, v in sums.items()}
        metrics = self._broadcast_from_last_stage(metrics)
        metrics["lr"] = self.optimizer.param_groups[0]["lr"]
        metrics["forward_s"] = time.perf_counter() - start
        metrics["backward_s"] = metrics["optimizer_s"] = 0.0
        return metrics

    def _chunk_states(self) -> list[dict[str, Any]]:
        """Each chunk's tensors on the CPU, LoRA adapters merged into their layers (the engines and exports get the
        merged weights)."""
        from rlcfg.runtime.backends import megatron_weights as W
        from rlcfg.runtime.backends.megatron_lora import merge_adapters

        lora = self.settings.lora if self.optimizer is not None else None
        states = []
        for chunk in self.chunks:
            state = {k: v.detach().cpu() for k, v in W.strip_extra_state(_unwrap(chunk).state_dict()).items()}
            states.append(merge_adapters(state, lora.alpha / lora.rank) if lora is not None else state)
        return states

    @_on_engine_device
    def full_state_dict(self, all_ranks: bool = False) -> dict[str, Any] | None:
        """Hugging Face-named weights gathered over the model-parallel group, on global rank 0 (or everywhere
        with `all_ranks`). A collective: every rank calls it."""
        import torch.distributed as dist

        from megatron.core import parallel_state as ps

        from rlcfg.runtime.backends import megatron_weights as W

        def gather(local: dict, group: Any) -> dict:
            parts: list[Any] = [None] * dist.get_world_size(group)
            dist.all_gather_object(parts, local, group=group)
            return {key: state for part in parts for key, state in part.items()}

        states = self._chunk_states()
        shards = gather({(self.tp_rank, self.pp_rank, stage): {k: v for k, v in state.items() if not W.is_expert(k)}
                         for stage, state in enumerate(states)}, ps.get_model_parallel_group())
        # The experts spread over their own mesh (expert tp × ep × pp), which the model-parallel group does not span.
        experts = (gather({_expert_key(self.pp_rank, stage): {k: v for k, v in state.items() if W.is_expert(k)}
                           for stage, state in enumerate(states)},
                          ps.get_expert_tensor_model_pipeline_parallel_group())
                   if self.settings.model.experts else None)
        if self.rank != 0 and not all_ranks:
            return None
        lay = self.settings.layout
        return {**W.merge(shards, self.settings.model, experts=experts, first=lay.first_stage_layers,
                          last=lay.last_stage_layers), **self._unheld}

    @_on_engine_device
    def export_hf(self, path: str) -> None:
        import shutil

        state = self.full_state_dict()
        if self.rank == 0:
            from safetensors.torch import save_file

            os.makedirs(path, exist_ok=True)
            save_file({k: v.contiguous() for k, v in state.items()}, os.path.join(path, "model.safetensors"))
            for name in ("config.json", "generation_config.json"):
                src = os.path.join(self.model_path, name)
                if os.path.exists(src):
                    shutil.copy(src, os.path.join(path, name))

    @_on_engine_device
    def save(self, path: str) -> None:
        """megatron-core's distributed checkpoint of the model chunks and optimizer. The model reshards on load;
        the distributed optimizer's state keeps its TP/PP layout (a resume may change only the DP size)."""
        import torch
        from megatron.core import dist_checkpointing

        state = self._sharded_state()
        os.makedirs(path, exist_ok=True)
        dist_checkpointing.save(state, path)
        extra = {"rng": torch.get_rng_state()}
        if self.device == "cuda":
            extra["cuda_rng"] = torch.cuda.get_rng_state()
        if self.scheduler is not None:
            extra["scheduler"] = self.scheduler.state_dict()
        torch.save(extra, os.path.join(path, f"extra-rank{self.rank}.pt"))

    @_on_engine_device
    def load(self, path: str) -> None:
        import torch
        from megatron.core import dist_checkpointing

        from rlcfg.runtime.checkpoint import verify_loadable

        verify_loadable(path)
        state = dist_checkpointing.load(self._sharded_state(loading=True), path)
        for i, c in enumerate(self.chunks):
            _unwrap(c).load_state_dict(state[f"model{i}"])
        if self.optimizer is not None:
            # The distributed optimizer copies into its main parameters in place; for fp32 training those are
            # views of the model's parameters, which autograd refuses to have written outside no_grad.
            with torch.no_grad():
                self.optimizer.load_state_dict(state["optimizer"])
            self._restore_adam_steps(state["optimizer"])
        extra_file = os.path.join(path, f"extra-rank{self.rank}.pt")
        if os.path.exists(extra_file):
            extra = torch.load(extra_file, weights_only=True)
            torch.set_rng_state(extra["rng"])
            if self.device == "cuda" and "cuda_rng" in extra:
                torch.cuda.set_rng_state(extra["cuda_rng"])
            if self.scheduler is not None and "scheduler" in extra:
                self.scheduler.load_state_dict(extra["scheduler"])

    def _sharded_state(self, loading: bool = False) -> dict[str, Any]:
        state = {f"model{i}": _unwrap(c).sharded_state_dict() for i, c in enumerate(self.chunks)}
        if self.optimizer is not None:
            # The chunks' states stay nested, not merged: with virtual pipeline stages every chunk names its
            # layers from 0, so a merged dict would keep only the last chunk's parameters and the optimizer would
            # find no model tensor for the others.
            model_state = dict(state)
            # A fresh optimizer has no Adam moments yet; is_loading creates them so the template to load into
            # names them (without it the moments are silently not restored).
            # The distributed optimizer (dp > 1) defaults to a flattened layout that megatron-core 0.16's own
            # dist_checkpointing.save refuses ("flattened_range is not supported"); dp_reshardable writes each
            # rank's buffers as they are (a resume may change the DP size, not TP/PP). A plain optimizer ignores
            # the metadata.
            if loading:
                self._create_optimizer_state()
            state["optimizer"] = self.optimizer.sharded_state_dict(
                model_state, is_loading=loading, metadata={"distrib_optim_sharding_type": "dp_reshardable"})
        return state

    def _restore_adam_steps(self, loaded: Any) -> None:
        """megatron-core 0.16's distributed optimizer, over torch's Adam (no Apex/Transformer Engine), restores
        Adam's step count wrongly in two ways: the per-bucket parameter state copies the step of the load
        template (a fresh optimizer's 1) over the checkpoint's, and every parameter is handed the same step
        tensor, which torch then increments once per parameter. Each parameter gets its own copy of the
        checkpoint's count (kept in the param groups of the common state)."""
        import torch

        groups = loaded.get("optimizer", {}).get("param_groups", []) if isinstance(loaded, dict) else []
        steps = {g["step"] for g in groups if isinstance(g, dict) and g.get("step") is not None}
        if len(steps) != 1:
            return
        step = float(next(iter(steps)))
        for _opt, inner in self._torch_optimizers():
            for state in inner.state.values():
                if "step" in state:
                    state["step"] = torch.tensor(step, dtype=torch.float32)

    def _create_optimizer_state(self) -> None:
        """The distributed optimizer describes what it loads from its own state, and asserts one shared Adam
        step count in it; a fresh one has none. megatron-core fills it with a zero-gradient step, whose values
        the checkpoint then overwrites (main parameters included)."""
        for opt, inner in self._torch_optimizers():
            if hasattr(opt, "_init_optimizer_states_with_dummy_values") and not inner.state:
                opt._init_optimizer_states_with_dummy_values()

    def _torch_optimizers(self) -> list[tuple[Any, Any]]:
        """(megatron-core optimizer, the torch optimizer inside it) for each part of a chained optimizer."""
        if self.optimizer is None:
            return []
        parts = getattr(self.optimizer, "chained_optimizers", [self.optimizer])
        return [(opt, opt.optimizer) for opt in parts if getattr(opt, "optimizer", None) is not None]

    @_on_engine_device
    def offload(self) -> None:
        """Weights (and optimizer states) off the GPU while a colocated rollout engine has it. megatron-core's
        DDP keeps parameters and gradients as views into flat buffers, and the distributed optimizer keeps
        views of those: moving a module with .to() would cut the views loose. Instead each storage is copied
        to host memory and shrunk to nothing, then regrown and refilled on onload, so every view stays valid."""
        import torch

        if self._parked is not None:
            return
        model = [p for c in self.chunks for p in c.parameters()] + [
            t for c in self.chunks for b in _ddp_buffers(c) for t in (b.param_data, b.grad_data)]
        model_storages = {_storage_key(t) for t in model if t is not None}
        tensors = list(model) if self.offload_params else []
        if self.offload_optimizer:
            for _opt, inner in self._torch_optimizers():
                owned = [t for state in inner.state.values() for t in state.values() if torch.is_tensor(t)]
                owned += [p for group in inner.param_groups for p in group["params"]]
                # For fp32 training the optimizer's parameters are the model's own: they move only with it.
                tensors += [t for t in owned if self.offload_params or _storage_key(t) not in model_storages]
        self._parked = _park([t for t in tensors if t is not None], pin=self.device == "cuda")
        if self.device == "cuda":
            torch.cuda.empty_cache()

    @_on_engine_device
    def onload(self) -> None:
        if self._parked is not None:
            _unpark(self._parked)
            self._parked = None


