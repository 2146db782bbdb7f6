"""The sections of an AReaL config (areal/api/cli_args.py's dataclasses): the experiment roots of the SFT, reward-model
and GRPO/PPO pipelines (`SFTConfig`, `RWConfig`, `GRPOConfig`) and the engine, dataset, cluster and logging sections
they hold. Fields follow AReaL 0.3 (the documented release); those AReaL 1.0 added or changed name their releases.
"""

# Annotations are evaluated as the classes are defined, not postponed: see `Section` in rlcfg.schema.base.
import json
from pathlib import Path
from typing import Any, Literal

from rlcfg.schema.base import (FATE_KEY, HONORED, REQUIRED, Section, declare_fates, declare_release_table, inert,
                               param, refused, section, unread)

# The releases before 1.0's per-engine placement and load-time checks (total_train_epochs > 0, recover.mode on/off).
BEFORE_1_0 = ("0.3", "0.4", "0.5")
# The releases whose GRPOConfig builds `ref` (and PPOConfig `critic`) from its defaults whatever the document says,
# so that the section's mandatory experiment_name/trial_name must be written; 0.5 made both sections optional.
SECTIONS_ALWAYS_BUILT = ("0.3", "0.4")
# Where a group of 0 samples fails before 1.0, whose loader checks it: the rollout returns no sequence, and the
# trainer's split of its first batch asserts on it.
_EMPTY_BATCH = "when the trainer takes its first batch, which the rollout leaves empty"

NAME_HINT = "AReaL's examples write `${experiment_name}` here"

# ---- the run ledger ------------------------------------------------------------------------------------------
# What `rlcfg run` does with each key (rlcfg.schema.base.Fate): honored (lower.py reads it and the
# runtime computes it with AReaL's meaning), refused (the run stops before it starts when the key is set to anything
# but its default) or inert (nothing computed changes). Combinations that AReaL computes in a way rlcfg's runtime does
# not, although each key alone is honored, are refused by the rule areal/run-ledger (rules.py).
# The fates shared by many keys:
_NAME = inert("a name AReaL's components repeat for their own files and logs; rlcfg names the run by the top-level "
              "experiment_name and trial_name")
_LOGS = inert("logging, tracing or profiling: where statistics, traces and dumps go changes nothing that is computed")
_LAUNCH = inert("how AReaL's launchers and schedulers start and reach processes (containers, CPUs, memory, ports, "
                "timeouts, name resolving); rlcfg places its roles on Ray from the plan")
_TRAIN_PERF = inert("a training-engine performance knob (kernels, wrapping, overlap, recomputation, buffers): it "
                    "changes speed and memory, not what is computed")
_SERVER_PERF = inert("a generation-server performance or logging knob (memory pools, CUDA graphs, scheduling, "
                     "kernels, logs): it changes how fast rollouts run, not what is computed")
_PACKING = inert("how a minibatch is cut into micro-batches: the loss is a token mean over the whole minibatch "
                 "either way, so only memory and speed change")
_DATA_PERF = inert("how fast batches are loaded (workers, pinned memory), not which prompts they hold")
_LOSS_SCALE = inert("dynamic loss scaling of fp16 training only rescales gradients to avoid underflow; the update "
                    "is the same")
_WEIGHT_SYNC = inert("how new weights reach the generation servers (disk or NCCL); the weights are the same")
_GATEWAY = inert("AReaL 1.0's controller, gateway and inference-service plumbing (versions, keys, routing, timeouts); "
                 "rlcfg drives its own engines directly")
_LORA_ONLY = inert("how AReaL's inference servers load the LoRA adapter; rlcfg hands its engines the adapter merged "
                   "into the weights, which generate the same")
_AGENT = inert("read only by AReaL's agent service, which rlcfg refuses (rollout.agent)")
_SECTION = inert("a section whose keys each declare their own fate")
_OPTIM_STATE = refused("rlcfg's checkpoints always hold the optimizer state and a resumed run restores it")
_FP8 = refused("rlcfg trains in the model's dtype; FP8 matmuls are not run")
_MEGATRON_PRECISION = refused("rlcfg's Megatron backend keeps fp32 main parameters, gradients, gradient reduction "
                              "and Adam moments")
_QUANT = refused("rlcfg generates with the model's weights and KV cache in the model's dtype; quantization is not run")
_DISTILL = refused("rlcfg runs no on-policy distillation (teacher)")
_RESUMES_FROM_SAVER = inert("rlcfg resumes from the checkpoints `saver` writes; AReaL's separate recovery "
                            "checkpoints have no counterpart, and the training itself is the same")
_NO_ROLLOUT = inert("SFT and reward-model training generate nothing, so the generation servers' settings are unused")


def _names(owner: str) -> tuple[Any, Any]:
    """The experiment/trial name pair every engine and timer section repeats (mandatory, `???`)."""
    return (
        param(REQUIRED, description=f"Experiment name seen by the {owner}. Mandatory (`???`); AReaL's examples "
                                    f"write `${{experiment_name}}` here.", fate=_NAME),
        param(REQUIRED, description=f"Trial name seen by the {owner}. Mandatory (`???`); AReaL's examples write "
                                    f"`${{trial_name}}` here.", fate=_NAME),
    )


# ---- small shared sections ---------------------------------------------------------------------------------


# AReaL 0.3's NormConfig takes any string; its Normalization rejects other levels once the trainer builds it.
_NORM_LATE = {"0.3": "when the trainer builds its normalization (utils/data.py Normalization)"}


class NormConfig(Section):
    """Reward or advantage normalization."""

    mean_level: Literal["batch", "group"] | None = param(
        "batch", description="Level at which the mean is subtracted: `batch`, `group`, or null for no mean "
                             "normalization. AReaL checks this in NormConfig.__post_init__ (1.0) or when the "
                             "trainer builds its normalization (0.3).", fate=HONORED, late_check=_NORM_LATE)
    mean_leave1out: bool = param(False, description="Subtract the leave-one-out mean (the mean of the other "
                                                    "members) instead of the plain mean. Not in AReaL's v0.3.4 "
                                                    "reference; added in later versions.", fate=HONORED)
    std_level: Literal["batch", "group"] | None = param(
        "batch", description="Level at which values are divided by the standard deviation: `batch`, `group`, "
                             "or null for no std normalization.", fate=HONORED, late_check=_NORM_LATE)
    std_unbiased: bool = param(True, description="Use the unbiased (n-1) standard deviation. Not in AReaL's "
                                                 "v0.3.4 reference; later versions default it to true.", fate=HONORED)
    eps: float = param(1e-5, description="Added to the standard deviation before dividing, against division by "
                                         "zero. Not in AReaL's v0.3.4 reference.", ge=0, fate=HONORED)
    group_size: int = param(1, description="Number of samples per group for group-level normalization; AReaL's "
                                           "examples set `${gconfig.n_samples}`. Must be >= 1 when a level is "
                                           "`group`.", fate=HONORED)


class MicroBatchSpec(Section):
    """How a training batch is split into micro-batches."""

    n_mbs: int | None = param(1, description="Number of micro-batches, or the minimum number when "
                                             "max_tokens_per_mb is set.", ge=1, fate=HONORED)
    granularity: int = param(1, description="Adjacent sequences are kept together in groups of this size when "
                                            "micro-batches are formed; the batch must divide by it.", ge=1,
                             fate=_PACKING)
    max_tokens_per_mb: int | None = param(None, description="Token budget of one micro-batch per forward pass. "
                                                            "When set, n_mbs becomes a lower bound.", ge=1,
                                          fate=HONORED)
    n_mbs_divisor: int = param(1, description="The final number of micro-batches is rounded to a multiple of "
                                              "this. Added in AReaL 1.0.", ge=1,
                               fate=_PACKING)
    packing_algorithm: Literal["ffd", "kk"] = param(
        "ffd", description="Sequence packing algorithm for micro-batches: `ffd` (first fit decreasing) or `kk` "
                           "(Karmarkar-Karp, better balance). Added in AReaL 1.0.",
        fate=_PACKING)


class OptimizerConfig(Section):
    """Optimizer and learning-rate schedule. Set `type: empty` for a model that is not trained."""

    type: Literal["adam", "empty", "sgd", "adam_bf16"] = param(
        "adam", description="Optimizer type. AReaL's v0.3.4 reference documents `adam` and `empty` (no training); "
                            "AReaL 1.0 adds "
                            "`sgd` and `adam_bf16`. AReaL only checks this when the engine builds the optimizer, "
                            "after the model is loaded; rlcfg checks it up front.", fate=HONORED,
        late_check=dict.fromkeys(("0.3", "0.4", "0.5", "1.0"), "when the training engine creates its optimizer, after "
                                                               "loading the model (it asserts the type)"))
    lr: float = param(2e-5, description="Peak learning rate of the optimizer.", ge=0, fate=HONORED)
    weight_decay: float = param(0.05, description="Decoupled weight decay of AdamW.", ge=0, fate=HONORED)
    beta1: float = param(0.9, description="Adam beta1 (first-moment decay).", ge=0, lt=1, fate=HONORED)
    beta2: float = param(0.95, description="Adam beta2 (second-moment decay).", ge=0, lt=1, fate=HONORED)
    eps: float = param(1e-5, description="Adam epsilon, added to the denominator.", gt=0, fate=HONORED)
    min_lr_ratio: float = param(0.0, description="Learning rate at the end of annealing, as a fraction of lr.",
                                ge=0, le=1, fate=HONORED)
    lr_scheduler_type: Literal["linear", "cosine", "constant"] = param(
        "constant", description="Learning-rate schedule: `linear`, `cosine` or `constant`. AReaL raises on "
                                "anything else only after the model has loaded.", fate=HONORED)
    warmup_steps_proportion: float = param(0.001, description="Fraction of the training steps spent warming up "
                                                              "the learning rate.", ge=0, le=1, fate=HONORED)
    offload: bool = param(False, description="Offload optimizer states to CPU memory.",
                          fate=HONORED)
    initial_loss_scale: float = param(4294967296, description="Initial loss scale for mixed-precision training "
                                                              "(2**32).", gt=0, fate=_LOSS_SCALE)
    min_loss_scale: float = param(1.0, description="Lowest loss scale the dynamic scaler may reach.", gt=0,
                                  fate=_LOSS_SCALE)
    loss_scale_window: float = param(5, description="Steps without overflow before the loss scale is raised.",
                                     gt=0, fate=_LOSS_SCALE)
    hysteresis: int = param(2, description="Overflows tolerated before the loss scale is lowered.", ge=0,
                            fate=_LOSS_SCALE)
    gradient_clipping: float = param(1.0, description="Clip the global gradient norm to this value.", ge=0,
                                     fate=HONORED)


class FSDPWrapPolicy(Section):
    """Which layers FSDP wraps."""

    run_fate = _TRAIN_PERF

    transformer_layer_cls_to_wrap: list[str] | None = param(
        None, description="Class names of the transformer layers FSDP wraps; null wraps the decoder layers "
                          "transformers declares for the model.")


class FSDPEngineConfig(Section):
    """The FSDP training backend. AReaL's v0.3.4 reference lists it without its keys; they follow AReaL's code."""

    wrap_policy: FSDPWrapPolicy | None = section(FSDPWrapPolicy, optional=True,
                                                 description="FSDP wrap policy; null uses the model's decoder "
                                                             "layers.", fate=_TRAIN_PERF)
    offload_params: bool = param(False, description="Offload FSDP parameters to CPU memory.",
                                 fate=HONORED)
    memory_efficient_load: bool = param(False, description="Initialize weights on CPU and broadcast them from "
                                                           "rank 0 after sharding (1.0). Cannot be combined with "
                                                           "init_from_scratch.", fate=_TRAIN_PERF)
    per_layer_optim_step: bool = param(False, description="Run the Adam step on GPU layer by layer with "
                                                          "prefetching (1.0). Needs optimizer type `adam`.",
                                       fate=_TRAIN_PERF)
    optim_step_prefetch_layers: int = param(1, description="Layers prefetched by the per-layer optimizer step "
                                                           "(1.0).", ge=0, fate=_TRAIN_PERF)
    shard_vision_across_sp: bool = param(False, description="Shard a vision encoder across sequence-parallel "
                                                            "ranks by image (1.0).",
                                         fate=_TRAIN_PERF)


class DeepSpeedAutoTPEngineConfig(Section):
    """DeepSpeed AutoTP, the experimental tensor-parallel training backend of v0.3.0 to v0.3.3 (gone in v0.3.4)."""

    autotp_size: int | None = param(1, description="DeepSpeed AutoTP tensor-parallel size. AReaL's reference lists the "
                                                   "section without its keys; this follows the v0.3.3 code.", ge=1,
                                    fate=refused("rlcfg trains with FSDP data parallelism (or Megatron from a "
                                                 "`megatron:` backend); DeepSpeed AutoTP tensor parallelism is not "
                                                 "run"))


class SchedulingStrategy(Section):
    """How a 1.0 engine is placed relative to the others."""

    type: Literal["separation", "colocation"] = param(
        "separation", description="`separation` gives the engine its own GPUs; `colocation` shares the GPUs of "
                                  "`target`. AReaL documents these choices but does not check them.", fate=HONORED)
    target: str | None = param(None, description="The role to colocate with (for example `actor`).",
                               fate=HONORED)
    fork: bool = param(True, description="With colocation, start the engine in a new process on the target's "
                                         "GPUs instead of sharing its process.", fate=_LAUNCH)


class SchedulingSpec(Section):
    """Resources of one 1.0 worker or engine process (single-controller mode)."""

    run_fate = _LAUNCH

    cpu: int = param(8, description="CPU cores per GPU.", ge=0)
    gpu: int = param(0, description="GPU units requested; used only when allocating pods.", ge=0)
    mem: int = param(32, description="Memory in GB per GPU.", ge=0)
    port_count: int = param(2, description="Number of ports to expose.", ge=0)
    image: str = param("/storage/openpsi/images/areal-latest.sif", description="Container image (Slurm).")
    task_type: Literal["worker", "engine"] = param("worker", description="Whether the spec is for a `worker` or "
                                                                         "an `engine`.")
    env_vars: dict[str, str] = param({}, description="Environment variables for the container.")
    cmd: str | None = param(None, description="Command run inside the container; null uses AReaL's RPC server.")
    srun_additional_args: str = param("--unbuffered --mpi=pmi2 -K --chdir $PWD",
                                      description="Extra arguments to srun (Slurm only).")
    additional_bash_cmds: list[str] | None = param(None, description="Bash commands run before the job starts "
                                                                     "(Slurm only).")
    container_type: Literal["apptainer", "none"] = param("apptainer", description="Container runtime on Slurm.")
    mount: str = param("/storage:/storage", description="Mount for Slurm containers.")
    nodelist: str | None = param(None, description="srun/sbatch `--nodelist`.")
    exclude: str | None = param(None, description="srun/sbatch `--exclude`.")
    ray_placement_strategy: Literal["shared", "separate", "deferred"] = param(
        "shared", description="Ray placement groups: `shared` (one per role), `separate` (one per worker) or "
                              "`deferred` (separate, scheduling accelerators later).")


class ArchonFP8Config(Section):
    """FP8 training of the Archon backend (1.0)."""

    run_fate = _TRAIN_PERF

    mode: Literal["disabled", "blockwise"] = param("disabled", description="`blockwise` enables 128x128 "
                                                                           "blockwise FP8 matmuls (Hopper).", fate=_FP8)
    exclude_modules: list[str] = param(["output", "router", "score"],
                                       description="Name fragments of linear layers kept in BF16; a list in YAML "
                                                   "replaces the default list.")
    include_experts: bool = param(False, description="Apply FP8 to MoE expert matmuls too.")
    use_triton: bool = param(True, description="Use the Triton FP8 GEMM kernel; must be true when FP8 is on.")


class ArchonEngineConfig(Section):
    """The Archon training backend (1.0)."""

    run_fate = _TRAIN_PERF

    attn_type: Literal["varlen", "sdpa", "tree"] = param("varlen", description="Attention kernel; `tree` for "
                                                                               "tree training.")
    offload_params: bool = param(False, description="Offload FSDP parameters to CPU memory.")
    enable_compile: bool = param(False, description="torch.compile the transformer blocks.")
    ac_mode: Literal["none", "full", "selective", "memory_budget"] = param(
        "selective", description="Activation checkpointing mode; `memory_budget` needs enable_compile.")
    selective_ac_option: str = param("op", description="`op` for op-level selective checkpointing, or an "
                                                       "integer string N to checkpoint every Nth layer.")
    ac_memory_budget: float = param(0.5, description="Memory budget of the `memory_budget` mode, 0 to 1.",
                                    ge=0, le=1)
    ac_preserve_rng_state: bool = param(False, description="Preserve the RNG state while checkpointing.")
    ac_debug: bool = param(False, description="Record activation-checkpointing debug information (testing).")
    pp_schedule: Literal["1F1B", "Interleaved1F1B", "InterleavedZeroBubble", "ZBVZeroBubble"] = param(
        "Interleaved1F1B", description="Pipeline-parallel schedule.")
    pp_layers_per_stage: int | None = param(None, description="Transformer layers per (virtual) pipeline stage; "
                                                              "null infers it from the schedule.", ge=1)
    pp_first_stage_less_layers: int = param(1, description="Layers taken off the first stage (embedding).",
                                            ge=0)
    pp_last_stage_less_layers: int = param(1, description="Layers taken off the last stage (output head).",
                                           ge=0)
    reshard_after_forward_policy: Literal["default", "always", "never"] = param(
        "default", description="When FSDP reshards after the forward pass.")
    fp8_config: ArchonFP8Config = section(ArchonFP8Config, description="FP8 training settings.")
    use_deterministic_algorithms: bool = param(False, description="Deterministic kernels (slower).")
    moe_router_dtype: Literal["fp32"] | None = param("fp32", description="Dtype of the MoE router GEMM: `fp32` or "
                                                                         "null for the model dtype.")


class MegatronDDPConfig(Section):
    """Megatron's DistributedDataParallel wrapper (1.0)."""

    run_fate = _TRAIN_PERF

    grad_reduce_in_fp32: bool = param(True, description="Reduce gradients in fp32.",
                                      fate=_MEGATRON_PRECISION)
    overlap_grad_reduce: bool = param(False, description="Overlap the gradient reduce-scatter with the backward "
                                                         "pass.")
    overlap_param_gather: bool = param(False, description="Overlap the parameter all-gather with the forward pass.")
    align_param_gather: bool = param(False, description="Launch the parameter all-gathers of all pipeline stages "
                                                        "together.")
    use_distributed_optimizer: bool = param(True, description="Shard the optimizer states over data-parallel ranks.")
    check_for_nan_in_grad: bool = param(False, description="Check the gradients for NaN after the reduction.")
    bucket_size: int | None = param(None, description="Gradient bucket size in elements; null lets Megatron "
                                                      "choose.", ge=1)
    average_in_collective: bool = param(False, description="Average inside the collective instead of before it.")
    fp8_param_gather: bool = param(False, description="All-gather parameters in FP8.")


class MegatronFP8Config(Section):
    """FP8 training through Transformer Engine on the Megatron backend (1.0)."""

    run_fate = _TRAIN_PERF

    mode: str = param("e4m3", description="FP8 format, e.g. `e4m3` or `hybrid`.")
    recipe: str = param("delayed", description="Scaling recipe, e.g. `delayed`, `tensorwise`, `mxfp8` or "
                                               "`blockwise`.")
    fp8_param: bool = param(False, alias="param", description="Keep the parameters themselves in FP8.")
    margin: int = param(0, description="Margin of the scaling factor.")
    amax_history_len: int = param(1, description="Length of the amax history window.", ge=1)
    amax_compute_algo: str = param("most_recent", description="How amax is taken from its history (`most_recent` "
                                                              "or `max`).")
    wgrad: bool = param(True, description="Compute weight gradients in FP8.")
    dot_product_attention: bool = param(False, description="Run dot-product attention in FP8.")
    multi_head_attention: bool = param(False, description="Run multi-head attention in FP8.")
    tp_only_amax_red: bool = param(False, description="Reduce amax only over the tensor-parallel group.")
    first_last_layers_bf16: bool = param(False, description="Keep the first and last layers in BF16.")
    num_layers_at_start_in_bf16: int = param(1, description="Leading layers kept in BF16 (with "
                                                            "first_last_layers_bf16).", ge=0)
    num_layers_at_end_in_bf16: int = param(1, description="Trailing layers kept in BF16 (with "
                                                          "first_last_layers_bf16).", ge=0)
    direct_convert: bool = param(True, description="Convert weights to FP8 directly when they are sent to the "
                                                   "inference engine.")


class MegatronEngineConfig(Section):
    """The Megatron training backend (1.0; in v0.3 only the experimental scripts had it)."""

    run_fate = _TRAIN_PERF

    wrap_with_ddp: bool = param(True, description="Wrap the model in Megatron's DistributedDataParallel.")
    use_torch_fsdp2: bool = param(False, description="Use torch FSDP2 inside Megatron (untested upstream).")
    use_custom_fsdp: bool = param(False, description="Use Megatron's own FSDP (untested upstream).")
    ddp: MegatronDDPConfig = section(MegatronDDPConfig, description="DistributedDataParallel settings.")
    virtual_pipeline_parallel_size: int = param(1, description="Virtual pipeline stages per rank; > 1 needs "
                                                               "pipeline parallelism p > 1.", ge=1, fate=HONORED)
    overlap_param_gather_with_optimizer_step: bool = param(False, description="Overlap the parameter gather with "
                                                                              "the optimizer step.")
    use_precision_aware_optimizer: bool = param(False, description="Let the optimizer keep states in the dtypes "
                                                                   "below.", fate=_MEGATRON_PRECISION)
    main_grads_dtype: str = param("float32", description="Dtype of the main gradients.",
                                  fate=_MEGATRON_PRECISION)
    main_params_dtype: str = param("float32", description="Dtype of the main (master) parameters.",
                                   fate=_MEGATRON_PRECISION)
    exp_avg_dtype: str = param("float32", description="Dtype of Adam's first moment.",
                               fate=_MEGATRON_PRECISION)
    exp_avg_sq_dtype: str = param("float32", description="Dtype of Adam's second moment.",
                                  fate=_MEGATRON_PRECISION)
    async_save: bool = param(False, description="Save checkpoints asynchronously.")
    use_checkpoint_opt_param_scheduler: bool = param(True, description="Restore the LR scheduler from the "
                                                                       "checkpoint.")
    use_deterministic_algorithms: bool = param(False, description="Deterministic kernels (slower; advised for MoE "
                                                                  "RL stability).")
    recompute_granularity: str | None = param("full", description="Activation recomputation granularity (`full` "
                                                                  "or `selective`); used with "
                                                                  "gradient_checkpointing.")
    recompute_method: str | None = param("uniform", description="How layers are chosen for recomputation "
                                                                "(`uniform` or `block`).")
    recompute_num_layers: int | None = param(1, description="Layers per recomputation unit.")
    distribute_saved_activations: bool | None = param(None, description="Distribute saved activations over the "
                                                                        "tensor-parallel group.")
    recompute_modules: list[str] | None = param(None, description="Modules recomputed in selective mode.")
    moe_router_dtype: str | None = param("fp32", description="Dtype of the MoE router; null uses the model "
                                                             "dtype.")
    moe_shared_expert_overlap: bool = param(False, description="Overlap the shared expert with token dispatch.")
    moe_enable_deepep: bool = param(False, description="Dispatch MoE tokens with DeepEP.")
    moe_token_dispatcher_type: str = param("alltoall", description="MoE token dispatcher (`allgather`, "
                                                                   "`alltoall` or `flex`).")
    moe_permute_fusion: bool = param(False, description="Fuse the MoE token permutation kernels.")
    fp8_config: MegatronFP8Config | None = section(MegatronFP8Config, optional=True,
                                                   description="FP8 training; null trains in the model dtype.",
                                                    fate=_FP8)
    bridge_type: str = param("mbridge", description="Library converting Hugging Face weights: `mbridge` or "
                                                    "`megatron-bridge` (rule areal/megatron checks it).")
    use_mbridge_save: bool = param(False, description="Save Hugging Face checkpoints through the bridge.")


# ---- training engines --------------------------------------------------------------------------------------


class TrainEngineConfig(Section):
    """A model that is trained (or run forward): SFT's `model`, and the base of the PPO actor."""

    experiment_name: str = _names("training engine")[0]
    trial_name: str = _names("training engine")[1]
    path: str = param("", description="Path (or HuggingFace name) of the checkpoint to load.",
                      fate=HONORED)
    attn_impl: Literal["flash_attention_2", "flash_attention_3", "sdpa", "eager", "flex_attention"] = param(
        "flash_attention_2", description="Attention implementation of the transformers model. AReaL's v0.3.4 "
                                         "reference documents only `flash_attention_2`; AReaL 1.0 also accepts the "
                                         "other "
                                         "built-in transformers backends listed here (and Hugging Face kernel "
                                         "repository ids, which rlcfg does not accept).", fate=_TRAIN_PERF)
    use_kernels: bool = param(False, description="Kernelize the model with Hugging Face kernels (1.0).",
                              fate=_TRAIN_PERF)
    init_from_scratch: bool = param(False, description="Initialize the weights randomly instead of loading "
                                                       "them.",
                                    fate=refused("rlcfg loads the checkpoint's weights from `path`"))
    is_critic: bool = param(False, description="Whether the model is a critic or reward model (a scalar head).",
                            fate=inert("the role decides the head: rlcfg gives the critic (and a reward model) a value "
                                       "head and the actor and reference a language-model head"))
    mb_spec: MicroBatchSpec = section(MicroBatchSpec, description="Micro-batch splitting.", fate=HONORED)
    pad_to_maximum: bool = param(False, description="Pad every micro-batch to the length bound of mb_spec: less "
                                                    "memory fragmentation, slower training.", fate=_TRAIN_PERF)
    disable_dropout: bool = param(False, description="Disable dropout layers while training.", fate=HONORED)
    gradient_checkpointing: bool = param(True, description="Recompute activations in the backward pass to save "
                                                           "memory. v0.3.4's default is true (1.0: false).",
                                         fate=HONORED)
    dtype: Literal["bfloat16", "float16", "float32", "bf16", "fp16", "fp32"] = param(
        "bfloat16", description="Parameter (compute) data type. AReaL 1.0 accepts the aliases bf16, fp16 and "
                                "fp32 and rejects anything else.", fate=HONORED)
    grad_reduce_dtype: str = param("float32", description="Data type of the gradient reduction.",
                                   fate=_TRAIN_PERF)
    optimizer: OptimizerConfig | None = section(OptimizerConfig, optional=True,
                                                description="The optimizer; null means the model is not trained.",
                                                 fate=HONORED)
    backend: str = param("", description="Backend and parallel sizes of this engine, e.g. `fsdp:d4p1t1`, "
                                         "`megatron:d2p2t2` (AReaL 1.0, where it is mandatory and replaces "
                                         "`allocation_mode`). AReaL's v0.3.4 reference documents it with the default "
                                         "\"\".",
                         fate=HONORED)
    fsdp: FSDPEngineConfig = section(FSDPEngineConfig, description="FSDP backend settings.",
                                      fate=HONORED)
    ds_auto_tp: DeepSpeedAutoTPEngineConfig = section(DeepSpeedAutoTPEngineConfig, releases=("0.3",),
                                                      description="DeepSpeed AutoTP backend settings (v0.3.0 to "
                                                                  "v0.3.3; AReaL's reference documents it, v0.3.4 "
                                                                  "dropped "
                                                                  "it).", fate=_SECTION)
    archon: ArchonEngineConfig = section(ArchonEngineConfig, description="Archon backend settings (1.0).",
                                          fate=_SECTION)
    megatron: MegatronEngineConfig = section(MegatronEngineConfig,
                                             description="Megatron backend settings (1.0).", fate=HONORED)
    weight_update_mode: Literal["disk", "xccl"] = param(
        "disk", description="How new weights reach the inference servers: `disk` or `xccl` (NCCL). AReaL "
                            "only checks it after the engines are up. v0.3 kept this at the top level with the "
                            "default `disk`; 1.0 moved it here with the default `xccl`.",
        fate=_WEIGHT_SYNC)
    offload: bool = param(False, description="Offload parameters and optimizer states to CPU between steps "
                                             "(1.0); needs enable_offload.", fate=HONORED)
    # Honored on the RL actor (a reference's zero-initialised adapter leaves its model as loaded); the run ledger
    # refuses it on a critic and in SFT (areal/run-ledger).
    use_lora: bool = param(False, description="Train LoRA adapters (FSDP only).", fate=HONORED)
    lora_rank: int = param(32, description="Rank of the LoRA adapter matrices.", ge=1, fate=HONORED)
    lora_alpha: int = param(16, description="LoRA scaling factor alpha.", ge=1, fate=HONORED)
    target_modules: list[str] = param([], description="Modules LoRA adapts; empty means all-linear.", fate=HONORED)
    peft_type: Literal["lora"] = param("lora", description="PEFT method; only LoRA exists.",
                                       fate=inert("LoRA is AReaL's only PEFT method, the one rlcfg trains"))
    enable_tree_training: bool = param(False, description="Tree training with flex attention (1.0).",
                                       fate=refused("rlcfg trains on padded sequences, one per row; tree training with "
                                                    "shared prefixes is not run"))
    scheduling_spec: list[SchedulingSpec] = param(
        [{"cmd": "python -m areal.infra.rpc.rpc_server"}],
        description="One spec (worker and engine share a process) or two (worker, then engine) for the 1.0 "
                    "single controller.", min_length=1, fate=_LAUNCH)
    scheduling_strategy: SchedulingStrategy = section(SchedulingStrategy, fate=HONORED,
                                                       description="Placement relative to other engines (1.0).")
    version_: Literal["v1", "v2"] = param("v1", alias="_version", description="Train controller version (1.0): "
                                                                              "`v1` or the gateway `v2`.",
                                          fate=_GATEWAY)
    admin_api_key: str = param("areal-admin-key", description="Admin key of the v2 gateway stack (1.0); must "
                                                              "not be blank.", fate=_GATEWAY)
    log_level: str = param("warning", description="Log level of the v2 gateway stack (1.0).",
                           fate=_LOGS)
    request_timeout: float = param(3600.0, description="Gateway request timeout in seconds (1.0, v2).", gt=0,
                                   fate=_GATEWAY)
    setup_timeout: float = param(3600.0, description="Gateway setup timeout in seconds (1.0, v2).", gt=0,
                                 fate=_GATEWAY)
    temperature: float = param(1.0, description="Sampling temperature the log-probabilities are computed at; "
                                                "keep it equal to gconfig.temperature.", gt=0,
                               fate=HONORED)


class RejectionSamplingConfig(Section):
    """Filtering of stale samples in the decoupled loss (1.0; replaces behav_imp_weight_cap)."""

    level: Literal["token", "sequence"] = param("token", description="Judge each token, or whole sequences.",
                                                fate=refused("rlcfg filters stale tokens one by one (level token); "
                                                             "whole-sequence filtering is not run"))
    action: Literal["mask", "clamp"] = param("mask", description="`mask` drops filtered tokens from the loss; "
                                                                 "`clamp` bounds their importance weight.",
                                             fate=refused("rlcfg drops the tokens above the bound from the loss (action"
                                                          " mask); clamping their weight is not run"))
    metric: Literal["ratio", "kl_k1", "kl_k2", "kl_k3"] = param(
        "ratio", description="Divergence measured: the importance ratio or a KL estimator.",
        fate=refused("rlcfg bounds the importance ratio π_prox/π_behave itself (metric ratio); KL-based filtering is "
                     "not run"))
    agg: Literal["sum", "mean", "max"] = param("mean", description="Aggregation over a sequence (sequence level "
                                                                   "only).",
                                               fate=inert("only read at sequence level, which rlcfg refuses "
                                                          "(rejection_sampling.level)"))
    upper: float = param(5.0, description="Upper bound; for `ratio` it must be > 1.", fate=HONORED)
    lower: float | None = param(None, description="Optional lower bound; for `ratio` it must be > 0. With "
                                                  "`clamp` and no lower bound AReaL uses 0.",
                                fate=refused("rlcfg bounds the importance weight from above only "
                                             "(rejection_sampling.upper)"))


class PPOActorConfig(TrainEngineConfig):
    """The PPO/GRPO actor (and the reference model, which has the same keys)."""

    group_size: int = param(1, description="Sequences per group (v0.3; removed in 1.0, which reads "
                                           "gconfig.n_samples). AReaL's examples set `${gconfig.n_samples}`.",
                            ge=1, late_check=dict.fromkeys(BEFORE_1_0, _EMPTY_BATCH),
                            fate=inert("v0.3 reads it only for dynamic_sampling, which rlcfg refuses; groups are "
                                       "gconfig.n_samples responses (rule areal/group-size keeps the two equal)"))
    ppo_n_minibatches: int = param(4, description="Minibatches (optimizer steps) per PPO update; 0 leaves the split "
                                                  "to the token budget (mb_spec.max_tokens_per_mb).", ge=0,
                                   fate=HONORED)
    eps_clip: float = param(0.2, description="Clipping range of the policy ratio; 0 is allowed (AReaL's M2PO example "
                                             "uses it, as its own threshold takes over).", ge=0, fate=HONORED)
    eps_clip_higher: float | None = param(None, description="Upper clipping range; when set, eps_clip is the "
                                                            "lower one (decoupled clipping).", gt=0, fate=HONORED)
    c_clip: float | None = param(None, description="Dual-clip factor; must be > 1. Null disables dual clipping. "
                                                   "AReaL only checks it inside the loss.", fate=HONORED)
    m2_threshold: float | None = param(None, description="Second-moment threshold of M2PO: in each micro-batch the "
                                                         "tokens whose (behaviour − proximal log-prob)² is largest "
                                                         "leave the loss until the mean of the rest is below it.",
                                       fate=HONORED)
    reward_norm: NormConfig | None = section(NormConfig, optional=True, description="Reward normalization; "
                                                                                    "null disables it.", fate=HONORED)
    reward_scaling: float = param(1.0, description="Rewards are multiplied by this.", fate=HONORED)
    reward_bias: float = param(0.0, description="Added to rewards (before scaling).", fate=HONORED)
    reward_clip: float = param(20.0, description="Rewards are clipped to [-reward_clip, reward_clip].", gt=0,
                               fate=HONORED)
    overlong_reward_penalty: bool = param(False, description="DAPO's penalty for overlong sequences; needs "
                                                             "overlong_tokens and overlong_penalty_factor.",
                                          fate=HONORED)
    overlong_tokens: int | None = param(None, description="Tail length (in tokens) that is penalized.", ge=1,
                                        fate=HONORED)
    overlong_penalty_factor: float | None = param(None, description="Penalty factor for the tail tokens.", ge=0,
                                                  fate=HONORED)
    mask_no_eos_with_zero: bool = param(False, description="Exclude truncated generations (no EOS) from "
                                                           "training.", fate=HONORED)
    discount: float = param(1.0, description="Discount factor of future rewards.", ge=0, le=1,
                            fate=HONORED)
    gae_lambda: float = param(1.0, description="Lambda of generalized advantage estimation.", ge=0, le=1,
                              fate=HONORED)
    adv_norm: NormConfig | None = section(NormConfig, optional=True, description="Advantage normalization; null "
                                                                                 "disables it.", fate=HONORED)
    kl_ctl: float = param(0.1, description="KL penalty coefficient. The reference model is only built when this "
                                           "is > 0 (and, in 1.0, a `ref` section exists).", ge=0, fate=HONORED)
    kl_estimator: Literal["k1", "k2", "k3"] = param("k1", description="KL estimator (later versions).",
                                                    fate=HONORED)
    use_sapo_loss: bool = param(False, description="Use the SAPO loss instead of PPO clipping (1.0).",
                                fate=HONORED)
    sapo_tau_pos: float = param(1.0, description="SAPO temperature for positive advantages (1.0); > 0.",
                                fate=HONORED)
    sapo_tau_neg: float = param(1.05, description="SAPO temperature for negative advantages (1.0); > 0.",
                                fate=HONORED)
    recompute_logprob: bool = param(False, description="Recompute log-probabilities with the trainer instead "
                                                       "of using the inference engine's.", fate=HONORED)
    use_decoupled_loss: bool = param(False, description="Use the decoupled PPO loss; implicitly enables "
                                                        "recompute_logprob.", fate=HONORED)
    behav_imp_weight_cap: float | None = param(
        None, description="Drop tokens whose behaviour importance weight exceeds this cap; must be > 1 and needs "
                          "use_decoupled_loss (v0.3; replaced by rejection_sampling in 1.0).",
        fate=HONORED)
    behave_imp_weight_cap: float | None = param(
        None, description="Spelling used between v0.4 and 1.0 for the importance-weight cap; AReaL 1.0 rejects "
                          "it and asks for rejection_sampling.", releases=(),
        fate=refused("rlcfg reads the importance-weight cap from behav_imp_weight_cap (v0.3) or "
                     "rejection_sampling.upper (1.0)"))
    behave_imp_weight_mode: str | None = param(
        None, description="Filtering mode paired with behave_imp_weight_cap (`disabled`, `token_mask`, "
                          "`token_truncate`, ...) between v0.4 and 1.0; AReaL 1.0 rejects it.", releases=(),
        fate=refused("rlcfg reads the importance-weight cap from behav_imp_weight_cap (v0.3) or rejection_sampling "
                     "(1.0)"))
    rejection_sampling: RejectionSamplingConfig | None = section(
        RejectionSamplingConfig, optional=True, description="Stale-sample filtering of the decoupled loss (1.0); "
                                                            "null disables it.", fate=HONORED)
    importance_sampling_level: Literal["token", "sequence"] = param(
        "token", description="Per-token importance ratios (PPO) or the sequence geometric mean (GSPO).",
        fate=HONORED)
    prox_logp_method: Literal["recompute", "loglinear", "metrics"] = param(
        "recompute", description="How the proximal log-probabilities of the decoupled loss are obtained (1.0).",
        # `metrics` trains on the recomputed ones and only logs how well the approximations match; `loglinear`
        # interpolates them (Algorithm.old_logprobs "interpolated"), and areal/run-ledger refuses it outside the
        # decoupled loss.
        fate=HONORED)
    dynamic_sampling: bool = param(False, description="DAPO dynamic sampling: mask out groups whose rewards are "
                                                      "all equal, so batch sizes vary (v0.3; removed in 1.0).",
                                   fate=refused("AReaL drops the groups whose rewards are all equal only in "
                                                "ppo_update, after the advantages (and their batch normalisation) "
                                                "were computed over the whole batch, keeps them all when every group "
                                                "is equal, and splits what is left into ppo_n_minibatches; rlcfg's "
                                                "group filters act before the advantages on fixed mini-batches, so "
                                                "it is not run"))
    log_agent_stats: bool = param(False, description="Log statistics of agent trajectories.", fate=_LOGS)
    log_agent_stats_keys: list[str] = param([], description="Keys of the agent trajectory statistics to log.",
                                            fate=_LOGS)
    max_new_tokens: int = param(1024, description="Maximum number of new tokens (kept for compatibility; "
                                                  "generation reads gconfig.max_new_tokens).", ge=1, fate=HONORED)
    # v0.3 declared temperature on the PPO actor only; 1.0 moved it to every training engine.
    temperature: float = param(1.0, description="Sampling temperature the log-probabilities are computed at; "
                                                "keep it equal to gconfig.temperature.", gt=0, fate=HONORED)


def _moot(model: type[Section], keep: tuple[str, ...] = ()) -> None:
    """Make the section's own `run_fate` the fate of every field it inherited a fate for, except `keep`: used where
    a section reuses another's keys but AReaL reads only a few of them there (the reference model's PPO settings)."""
    for name, info in model.model_fields.items():
        if name in keep or name in model.__dict__.get("__annotations__", {}):
            continue
        extra = dict(info.json_schema_extra) if isinstance(info.json_schema_extra, dict) else {}
        extra.pop(FATE_KEY, None)
        info.json_schema_extra = extra
        getattr(info, "_attributes_set", {})["json_schema_extra"] = extra


class ReferenceConfig(PPOActorConfig):
    """The reference model of the KL penalty: a PPO actor's keys, of which AReaL reads only those of the engine
    (path, dtype, micro-batches, backend, placement) and the temperature its log-probabilities are taken at."""

    run_fate = inert("the reference model only computes log-probabilities, in eval mode: AReaL reads none of its "
                     "PPO, reward, optimizer, dropout or recomputation settings")


_moot(ReferenceConfig, keep=tuple(n for n in TrainEngineConfig.model_fields
                                  if n not in ("gradient_checkpointing", "optimizer", "disable_dropout"))
      + ("temperature",))
_FROZEN_ADAPTER = inert("a reference model's LoRA adapter starts at zero and never trains: it computes with the "
                        "model as loaded")
declare_fates(ReferenceConfig, use_lora=_FROZEN_ADAPTER, lora_rank=_FROZEN_ADAPTER, lora_alpha=_FROZEN_ADAPTER,
              target_modules=_FROZEN_ADAPTER)


class TeacherConfig(PPOActorConfig):
    """The teacher of on-policy distillation (1.0): a PPO actor's keys plus the loss weights."""

    run_fate = inert("read only by on-policy distillation, which rlcfg refuses (teacher)")

    rl_loss_weight: float = param(1.0, description="Weight of the RL loss next to the distillation loss.",
                                  fate=_DISTILL)
    distill_loss_weight: float = param(0.005, description="Weight of the distillation loss.",
                                       fate=_DISTILL)


_moot(TeacherConfig, keep=("rl_loss_weight", "distill_loss_weight"))


class PPOCriticConfig(TrainEngineConfig):
    """A PPO critic (1.0 PPO experiments)."""

    ppo_n_minibatches: int = param(4, description="Minibatches per critic update.", ge=0, fate=HONORED)
    temperature: float = param(1.0, description="Sampling temperature the log-probabilities are computed at; "
                                                "keep it equal to gconfig.temperature.", gt=0,
                               fate=inert("a critic computes values, not log-probabilities: nothing divides its "
                                          "outputs by a temperature"))
    eps_clip: float = param(0.5, description="Clipping range of the value loss.", gt=0, fate=HONORED)
    mask_no_eos_with_zero: bool = param(False, description="Exclude truncated generations from training.",
                                        fate=inert("AReaL's critic only logs it; the actor's mask_no_eos_with_zero "
                                                   "shapes the rewards"))


_CRITIC_LORA = inert("read only with use_lora, which rlcfg refuses on a critic")
declare_fates(PPOCriticConfig, use_lora=refused("rlcfg trains LoRA adapters on the RL actor only; a critic trains "
                                                "every weight"),
              lora_rank=_CRITIC_LORA, lora_alpha=_CRITIC_LORA, target_modules=_CRITIC_LORA)


# ---- inference ---------------------------------------------------------------------------------------------


class AgentServiceConfig(Section):
    """Agent workflow of inference-service rollouts (1.0 `rollout.agent`)."""

    run_fate = _AGENT

    agent_cls_path: str = param("", description="Import path of the agent class; AReaL requires it to be "
                                                "non-empty when the section is given.")
    admin_api_key: str = param("areal-admin-key", description="Admin key of the agent service; must not be blank.")
    scheduling_spec: list[SchedulingSpec] = param(
        [{"gpu": 0, "cmd": "python -m areal.experimental.agent_service.guard"}],
        description="Exactly one scheduling spec for the agent service processes.", min_length=1)
    mode: Literal["inline", "subproc", "online"] = param("inline", description="Where the agent runs: `inline`, "
                                                                               "`subproc` or `online`.")
    tool_call_parser: str = param("qwen", description="Parser of tool calls in generated text.")
    reasoning_parser: str = param("qwen3", description="Parser of reasoning sections in generated text.")
    chat_template_type: Literal["hf", "concat"] = param("hf", description="`hf` chat template or plain `concat`.")
    engine_max_tokens: int | None = param(None, description="Token budget of the engine per request; null for the "
                                                            "engine's own.", ge=1)
    turn_discount: float = param(1.0, description="Reward discount per turn.")
    export_style: Literal["individual", "concat"] = param("individual", description="How multi-turn trajectories "
                                                                                    "are exported.")
    subproc_max_workers: int = param(4, description="Worker processes in `subproc` mode.", ge=1)
    session_timeout_seconds: int = param(3600, description="Seconds an agent session may stay open.", ge=1)
    set_reward_finish_timeout: float = param(0.0, description="Seconds to wait for the reward after a session "
                                                              "ends; AReaL requires >= 0.", ge=0)


class InferenceEngineConfig(Section):
    """The rollout client: how generation requests are queued and sent to the inference servers."""

    experiment_name: str | None = param(None, description="Experiment name seen by the rollout engine.",
                                        fate=_NAME)
    trial_name: str | None = param(None, description="Trial name seen by the rollout engine.", fate=_NAME)
    fileroot: str | None = param(None, description="Root for rollout logs and trajectory dumps (1.0).",
                                 fate=_LOGS)
    max_concurrent_rollouts: int | None = param(None, description="Concurrent rollouts sent to the inference "
                                                                  "servers; null means consumer_batch_size.",
                                                ge=1, fate=HONORED)
    queue_size: int | None = param(None, description="Size of the input/output queues of asynchronous "
                                                     "rollout; null means 16 x max_concurrent_rollouts.", ge=1,
                                   fate=_SERVER_PERF)
    consumer_batch_size: int = param(1, description="Rollouts taken from the queue per training batch.", ge=1,
                                     fate=inert("sizes AReaL's staleness window; equal to train_dataset.batch_size, "
                                                "every training step takes one step's prompts, as in rlcfg (rule "
                                                "areal/run-ledger refuses other values)"))
    max_head_offpolicyness: int = param(0, description="How many policy versions a rollout may lag behind; "
                                                       "older requests are not accepted. 0 is synchronous "
                                                       "(on-policy).", ge=0, fate=HONORED)
    enable_rollout_tracing: bool = param(False, description="Log every generation request verbosely.",
                                         fate=_LOGS)
    check_trajectory_format: bool = param(False, description="Check the trajectories a custom workflow produces "
                                                             "(for debugging; keep false for training).", fate=_LOGS)
    schedule_policy: Literal["round_robin"] = param("round_robin", description="How requests are spread over "
                                                                               "servers; only `round_robin`.",
                                                    fate=_SERVER_PERF)
    tokenizer_path: str = param("", description="Tokenizer used to decode dumped trajectories (1.0).",
                                fate=_LOGS)
    dump_to_file: bool = param(False, description="Dump trajectories under fileroot (1.0).",
                               fate=_LOGS)
    setup_timeout: float = param(120.0, description="Seconds to wait for the inference servers to come up.",
                                 gt=0, fate=_LAUNCH)
    request_timeout: float = param(3600, description="Timeout of one HTTP request, in seconds.", gt=0,
                                   fate=_LAUNCH)
    request_retries: int = param(3, description="Retries of a failed request.", ge=0, fate=_LAUNCH)
    pause_grace_period: float = param(0.0, description="Seconds to wait after pausing generation (later "
                                                       "versions).", ge=0, fate=_LAUNCH)
    scheduling_spec: list[SchedulingSpec] = param(
        [{"cmd": "python -m areal.infra.rpc.rpc_server"}],
        description="One or two scheduling specs for the 1.0 rollout controller.", min_length=1,
        fate=_LAUNCH)
    backend: str = param("", description="Inference backend and parallel sizes, e.g. `sglang:d4p1t1` or "
                                         "`vllm:d2t2` (AReaL 1.0, where it is mandatory).",
                         fate=HONORED)
    scheduling_strategy: SchedulingStrategy = section(SchedulingStrategy, fate=HONORED,
                                                       description="Placement relative to other engines (1.0).")
    use_lora: bool = param(False, description="Serve LoRA adapters; keep equal to actor.use_lora (1.0).",
                           fate=_LORA_ONLY)
    agent: AgentServiceConfig | None = section(AgentServiceConfig, optional=True,
                                               description="Agent workflow of inference-service rollouts (1.0); "
                                                           "null for none.",
                                                fate=refused("rlcfg generates single-turn responses scored by a rule "
                                                             "reward; agent workflows are not run"))
    return_routed_experts: bool = param(False, description="Return the routed expert indices of MoE models; "
                                                           "SGLang only (1.0).",
                                        fate=refused("rlcfg does not replay the rollout's MoE expert routing in "
                                                     "training"))
    version_: Literal["v1", "v2"] = param("v1", alias="_version", description="Rollout controller version "
                                                                              "(1.0).",
                                          fate=_GATEWAY)
    model: str = param("default", description="Model name exposed by the inference-service gateway (1.0).",
                       fate=_GATEWAY)
    routing_strategy: str = param("round_robin", description="Routing of the inference-service router (1.0).",
                                  fate=_GATEWAY)
    poll_interval: float = param(5.0, description="Health-poll interval of the router in seconds (1.0).", gt=0,
                                 fate=_GATEWAY)
    admin_api_key: str = param("areal-admin-key", description="Admin key of the inference-service gateway "
                                                              "(1.0); must not be blank.",
                               fate=_GATEWAY)
    api_url: str | None = param(None, description="External OpenAI-compatible endpoint (1.0).",
                                fate=refused("rlcfg generates with its own rollout engines, not an external endpoint"))
    provider_api_key: str | None = param(None, description="API key of the external provider (1.0).",
                                         fate=_GATEWAY)


class SGLangConfig(Section):
    """Arguments of the SGLang servers AReaL launches (see SGLang's server arguments for their meaning)."""

    run_fate = _SERVER_PERF

    model_path: str = param("", description="Model the server loads; AReaL's examples set `${actor.path}`.",
                            fate=HONORED)
    random_seed: int = param(1, description="SGLang's random seed; examples set `${seed}`.", fate=HONORED)
    skip_tokenizer_init: bool = param(False, description="Do not load the tokenizer in the server (token ids in "
                                                         "and out).")
    disable_cuda_graph: bool = param(False, description="Disable CUDA graphs.", fate=HONORED)
    disable_radix_cache: bool = param(False, description="Disable the prefix (radix) cache. v0.3.4's default "
                                                         "is false (later versions: true).", fate=HONORED)
    disable_cuda_graph_padding: bool = param(False, description="Disable padding when capturing CUDA graphs.")
    enable_nccl_nvls: bool = param(False, description="Use NCCL NVLink SHARP.")
    disable_outlines_disk_cache: bool = param(False, description="Disable the outlines grammar disk cache.")
    disable_custom_all_reduce: bool = param(False, description="Disable SGLang's custom all-reduce kernel.")
    disable_overlap_schedule: bool = param(False, description="Disable the overlapped CPU/GPU scheduler.")
    enable_mixed_chunk: bool = param(False, description="Mix prefill chunks and decoding in one batch.")
    enable_dp_attention: bool = param(False, description="Data-parallel attention (uses dp_size).")
    enable_ep_moe: bool = param(False, description="Expert parallelism for MoE layers (uses ep_size).")
    enable_torch_compile: bool = param(False, description="torch.compile the model.")
    torch_compile_max_bs: int = param(32, description="Largest batch size compiled by torch.compile.", ge=1)
    cuda_graph_max_bs: int | None = param(None, description="Largest batch size captured in a CUDA graph.", ge=1)
    cuda_graph_bs: list[int] | None = param(None, description="Batch sizes captured in CUDA graphs.",
                                            fate=HONORED)
    torchao_config: str = param("", description="torchao quantization config string.", fate=_QUANT)
    enable_nan_detection: bool = param(False, description="Check logits for NaNs.")
    enable_p2p_check: bool = param(False, description="Check GPU peer-to-peer access at start-up.")
    triton_attention_reduce_in_fp32: bool = param(False, description="Reduce Triton attention in fp32.")
    triton_attention_num_kv_splits: int = param(8, description="KV splits of the Triton decoding kernel.", ge=1)
    num_continuous_decode_steps: int = param(1, description="Decoding steps run between scheduler passes.",
                                             ge=1)
    enable_memory_saver: bool = param(False, description="Let the server release GPU memory while training runs "
                                                         "(for colocation).", fate=HONORED)
    allow_auto_truncate: bool = param(False, description="Truncate requests longer than the context instead of "
                                                         "failing.",
                                      fate=refused("rlcfg drops prompts longer than train_dataset.max_length and fails "
                                                   "a request that does not fit; it does not truncate requests"))
    attention_backend: str | None = param("fa3", description="Attention backend (e.g. fa3, flashinfer, triton).",
                                          fate=HONORED)
    enable_multimodal: bool = param(False, description="Enable multimodal inputs.",
                                    fate=refused("rlcfg rolls out text prompts only"))
    sampling_backend: str | None = param(None, description="Sampling backend; null uses SGLang's default.")
    context_length: int | None = param(32768, description="Context length of the server; must hold prompt plus "
                                                          "generation.", ge=1, fate=HONORED)
    mem_fraction_static: float | None = param(0.9, description="Fraction of GPU memory for weights and KV "
                                                               "cache.", gt=0, le=1, fate=HONORED)
    max_running_requests: int | None = param(None, description="Cap on requests decoded at once.", ge=1,
                                             fate=HONORED)
    chunked_prefill_size: int | None = param(-1, description="Chunked-prefill size; -1 disables chunking (AReaL "
                                                             "disables it for precision).", fate=HONORED)
    max_prefill_tokens: int = param(32768, description="Token budget of one prefill batch.", ge=1,
                                    fate=HONORED)
    schedule_policy: str = param("lpm", description="SGLang's request scheduling policy (e.g. lpm, fcfs).")
    schedule_conservativeness: float = param(1.0, description="How conservatively new requests are admitted.",
                                             ge=0)
    cpu_offload_gb: int = param(0, description="GB of weights offloaded to CPU.", ge=0)
    dtype: str = param("bfloat16", description="Model data type of the server.", fate=HONORED)
    kv_cache_dtype: str = param("auto", description="KV cache data type.", fate=_QUANT)
    dp_size: int = param(1, description="Data-parallel size inside one server (for DP attention only).", ge=1)
    ep_size: int = param(1, description="Expert-parallel size inside one server.", ge=1)
    enable_lora: bool | None = param(None, description="Serve LoRA adapters (later versions).",
                                     fate=_LORA_ONLY)
    max_lora_rank: int | None = param(None, description="Largest LoRA rank served (later versions).", ge=1,
                                      fate=_LORA_ONLY)
    lora_target_modules: list[str] | None = param(None, description="Modules LoRA adapts (later versions).",
                                                  fate=_LORA_ONLY)
    lora_paths: list[str] | None = param(None, description="LoRA adapters to load (filled by AReaL).",
                                         fate=_LORA_ONLY)
    max_loaded_loras: int = param(1, description="LoRA adapters kept loaded (later versions).", ge=1,
                                  fate=_LORA_ONLY)
    max_loras_per_batch: int = param(1, description="LoRA adapters per batch (later versions).", ge=1,
                                     fate=_LORA_ONLY)
    lora_backend: str = param("triton", description="LoRA kernel backend (later versions).",
                              fate=_LORA_ONLY)
    log_level: str = param("warning", description="Server log level.")
    log_level_http: str | None = param("warning", description="HTTP server log level.")
    log_requests: bool = param(False, description="Log every request.")
    log_requests_level: int = param(0, description="Verbosity of request logging.", ge=0)
    show_time_cost: bool = param(False, description="Print the time cost of server operations.")
    enable_metrics: bool = param(True, description="Export Prometheus-style metrics.")
    decode_log_interval: int = param(1, description="Decoding iterations between throughput log lines.", ge=1)
    enable_multithread_load: bool = param(False, description="Multi-threaded weight loading (later versions; "
                                                             "needs SGLang 0.5.2).")
    enable_return_routed_experts: bool = param(False, description="Internal switch set by "
                                                                  "rollout.return_routed_experts (1.0).")


class VLLMConfig(Section):
    """Arguments of the vLLM servers AReaL launches (added in AReaL 1.0)."""

    run_fate = _SERVER_PERF

    model: str = param("", description="Model the server loads.", fate=HONORED)
    seed: int = param(1, description="vLLM's random seed.", fate=HONORED)
    skip_tokenizer_init: bool = param(False, description="Do not load the tokenizer in the server.")
    enforce_eager: bool = param(False, description="Disable CUDA graphs.", fate=HONORED)
    dtype: str = param("bfloat16", description="Data type of the model weights in vLLM.", fate=HONORED)
    distributed_executor_backend: str = param("mp", description="vLLM's distributed executor (mp or ray).")
    max_num_seqs: int = param(256, description="Sequences decoded at once.", ge=1, fate=HONORED)
    block_size: int = param(16, description="KV cache block size.", ge=1, fate=HONORED)
    swap_space: int = param(4, description="CPU swap space in GB (older versions).", ge=0)
    cpu_offload_gb: float = param(0, description="GB of weights offloaded to CPU.", ge=0)
    max_seq_len_to_capture: int = param(32768, description="Longest sequence captured in CUDA graphs (older "
                                                           "versions).", ge=1)
    disable_sliding_window: bool = param(True, description="Disable sliding-window attention.")
    max_model_len: int | None = param(32768, description="Context length of the server.", ge=1,
                                      fate=HONORED)
    enable_chunked_prefill: bool = param(False, description="Chunked prefill (older versions).",
                                         fate=HONORED)
    no_enable_chunked_prefill: bool = param(False, description="Pass --no-enable-chunked-prefill (1.0).",
                                            fate=HONORED)
    enable_prefix_caching: bool = param(False, description="Prefix caching (older versions).",
                                        fate=HONORED)
    no_enable_prefix_caching: bool = param(True, description="Pass --no-enable-prefix-caching (1.0).",
                                           fate=HONORED)
    gpu_memory_utilization: float = param(0.9, description="Fraction of GPU memory vLLM may use.", gt=0, le=1,
                                          fate=HONORED)
    worker_extension_cls: str = param("areal.engine.vllm_ext.vllm_worker_extension.VLLMWorkerExtension",
                                      description="Worker extension class AReaL uses for weight updates.")
    enable_sleep_mode: bool = param(False, description="Let vLLM release GPU memory while training runs.",
                                    fate=HONORED)
    uvicorn_log_level: str = param("warning", description="Log level of the HTTP server.")
    enable_lora: bool = param(False, description="Serve LoRA adapters.",
                              fate=_LORA_ONLY)
    max_lora_rank: int = param(16, description="Largest LoRA rank served.", ge=1,
                               fate=_LORA_ONLY)
    max_loras: int = param(8, description="LoRA adapters per batch.", ge=1,
                           fate=_LORA_ONLY)
    lora_modules: list[str] | str | None = param(None, description="LoRA adapters to load (filled by AReaL): a JSON "
                                                                 "string in 0.5, a list in 1.0 (areal/lora-modules).",
                                                 fate=_LORA_ONLY)


class GenerationHyperparameters(Section):
    """Sampling settings of rollout generation."""

    n_samples: int = param(1, description="Sequences generated per prompt (the GRPO group size).", ge=1,
                           late_check=dict.fromkeys(BEFORE_1_0, _EMPTY_BATCH),
                           fate=HONORED)
    max_new_tokens: int = param(16384, description="Maximum number of generated tokens.", ge=1,
                                fate=HONORED)
    min_new_tokens: int = param(0, description="Minimum number of generated tokens.", ge=0,
                                fate=unread("AReaL's SGLang and vLLM requests never pass it "
                                           "(areal/engine/*_remote.py build_generation_request): a response may "
                                           "end at its first EOS, as in rlcfg"))
    max_tokens: int = param(65536, description="Maximum of prompt plus generated tokens.", ge=1,
                            fate=inert("a cap on prompt plus generation; rlcfg generates max_new_tokens after any "
                                       "prompt, which is the same while prompts are shorter than max_tokens - "
                                       "max_new_tokens (rule areal/run-ledger refuses a train_dataset.max_length that "
                                       "lets a prompt reach the cap)"))
    greedy: bool = param(False, description="Greedy decoding (always the most likely token).",
                         fate=HONORED)
    top_p: float = param(1.0, description="Nucleus sampling threshold, in (0, 1].", gt=0, le=1,
                         fate=HONORED)
    top_k: int = param(100000000, description="Number of most likely tokens sampled from.", ge=1,
                       fate=HONORED)
    temperature: float = param(1.0, description="Sampling temperature; higher is more diverse.", gt=0,
                               fate=HONORED)
    stop_token_ids: list[int] = param([], description="Token ids that end generation.",
                                      fate=HONORED)
    ignore_eos: bool = param(False, description="Keep generating past EOS (later versions).",
                             fate=refused("rlcfg stops a response at EOS"))
    skip_special_tokens: bool = param(True, description="Drop special tokens when decoding (later versions).",
                                      fate=refused("rlcfg decodes responses for the reward function without special "
                                                   "tokens"))
    stop: list[str] | None = param(None, description="Stop strings that end generation.", fate=HONORED)
    frequency_penalty: float = param(0.0, description="Penalty on tokens by their frequency so far, between -2 "
                                                      "and 2; negative values encourage repetition.", ge=-2, le=2,
                                     fate=HONORED)
    lora_name: str = param("default_lora", description="LoRA adapter used for generation (later versions).",
                           fate=_LORA_ONLY)
    use_beam_search: bool = param(False, description="Beam search in vLLM (later versions).",
                                  fate=refused("rlcfg samples; beam search is not run"))


# ---- data, cluster, launching, logging ---------------------------------------------------------------------


class DatasetConfig(Section):
    """A training or validation dataset."""

    path: str = param(REQUIRED, description="Local path or HuggingFace name of the dataset. Mandatory (`???`).",
                      fate=HONORED)
    type: str = param(REQUIRED, description="What the data is for, e.g. `sft`, `rl` or `rw` (reward "
                                            "modelling). Mandatory (`???`).",
                      fate=inert("the experiment's kind (GRPO, SFT, reward model) decides how rlcfg reads the data"))
    split: str = param("train", description="Dataset split (later versions).",
                       fate=refused("rlcfg reads every row of the file at `path`; choosing a split is not run"))
    batch_size: int = param(1, description="Prompts (or samples) per dataloader batch.", ge=1,
                            fate=HONORED)
    shuffle: bool = param(True, description="Shuffle the dataset.", fate=HONORED)
    pin_memory: bool = param(False, description="Pin host memory for faster transfer to the GPU.",
                             fate=_DATA_PERF)
    num_workers: int = param(0, description="Dataloader worker processes.", ge=0, fate=_DATA_PERF)
    num_dataset_workers: int = param(1, description="Remote data-service workers (1.0).", ge=1,
                                     fate=_DATA_PERF)
    drop_last: bool = param(True, description="Drop the last incomplete batch.",
                            fate=refused("rlcfg's prompt sampler always draws full batches (drop_last true)"))
    max_length: int | None = param(None, description="Longer sequences are filtered out of the dataset.", ge=1,
                                   fate=HONORED)
    dataset_kwargs: dict[str, Any] = param({}, description="Extra keyword arguments for loading the dataset "
                                                           "(1.0).",
                                           fate=refused("rlcfg's data loader takes no extra arguments"))
    scheduling_spec: SchedulingSpec | None = section(SchedulingSpec, optional=True,
                                                     description="Scheduling of the remote data-loading workers "
                                                                 "(1.0); null uses AReaL's default.", fate=_LAUNCH)
    setup_timeout: float = param(120.0, description="Seconds the data service may take to load the dataset "
                                                    "(1.0).", gt=0, fate=_LAUNCH)


class NameResolveConfig(Section):
    """The key-value store AReaL's processes use to find each other."""

    run_fate = _LAUNCH

    type: Literal["nfs", "etcd3", "ray"] = param("nfs", description="Store for name resolving: `nfs`, `etcd3` "
                                                                    "or `ray`.")
    nfs_record_root: str = param("/tmp/areal/name_resolve", description="Directory of the NFS store; must be "
                                                                        "shared by all nodes.")
    etcd3_addr: str = param("localhost:2379", description="Address of the etcd3 server.")
    ray_actor_name: str = param("ray_kv_store", description="Name of the Ray actor holding the store.")


class ClusterSpecConfig(Section):
    """The machines the experiment runs on."""

    name_resolve: NameResolveConfig = section(NameResolveConfig, description="How processes find each other (name resolving).",
                                               fate=_LAUNCH)
    cluster_name: str = param("local", description="Cluster name; selects cluster-specific environment "
                                                   "variables.", fate=_LAUNCH)
    fileroot: str = param("/home/fw/.cache/areal", description="Root of logs and checkpoints; must be shared by "
                                                               "all nodes. (v0.3.4's default; later versions "
                                                               "use /tmp/areal/.)",
                          fate=inert("rlcfg writes checkpoints under saver.fileroot and logs under "
                                     "stats_logger.fileroot, which AReaL's examples set to this"))
    n_nodes: int = param(32, description="Number of nodes. With n_gpus_per_node it is the GPU count the "
                                         "allocation must fill.", ge=1, fate=HONORED)
    n_gpus_per_node: int = param(8, description="GPUs per node (physical); 0 for a CPU-only machine, as in "
                                                "AReaL's CPU example.", ge=0, fate=HONORED)


class SlurmLauncherConfig(Section):
    """Slurm settings of the v0.3 launcher."""

    run_fate = _LAUNCH

    srun_additional_args: str = param("--mpi=pmi2 -K --chdir $PWD", description="Extra arguments to srun.")
    container_type: Literal["apptainer", "none"] = param("apptainer", description="Container runtime used on "
                                                                                  "Slurm.")
    mount: str = param("/storage:/storage", description="Mounts of the Slurm containers.")
    trainer_image: str | None = param(None, description="Container image of the trainers.")
    inference_server_image: str | None = param(None, description="Container image of the inference servers.")


class LauncherConfig(Section):
    """Resources of the processes the v0.3 launchers start (removed in 1.0)."""

    run_fate = _LAUNCH

    inference_server_cpus_per_gpu: int = param(4, description="CPUs per GPU of an inference server.", ge=1)
    inference_server_mem_per_gpu: int = param(32768, description="Memory per GPU of an inference server, in MB.",
                                              ge=1)
    trainer_cpus_per_gpu: int = param(4, description="CPUs per GPU of a trainer.", ge=1)
    trainer_mem_per_gpu: int = param(32768, description="Memory per GPU of a trainer, in MB.", ge=1)
    inference_server_env_vars: str = param("", description="Environment of the inference servers as "
                                                           "`ENV1=val1,ENV2=val2`.")
    trainer_env_vars: str = param("", description="Environment of the trainers as `ENV1=val1,ENV2=val2`.")
    slurm: SlurmLauncherConfig = section(SlurmLauncherConfig, description="Settings used when launching on Slurm.")


class WandBConfig(Section):
    """Weights & Biases logging."""

    run_fate = _LOGS

    mode: Literal["online", "offline", "disabled", "shared"] = param("disabled", description="Weights & Biases mode: `online`, `offline`, `disabled` or `shared`.",
                                                                     fate=HONORED)
    wandb_base_url: str = param("", description="W&B server URL (empty: the public service).")
    wandb_api_key: str = param("", description="W&B API key (empty: from the environment).")
    entity: str | None = param(None, description="Weights & Biases entity (user or team).")
    project: str | None = param(None, description="Weights & Biases project name.", fate=HONORED)
    name: str | None = param(None, description="Name of the run in the tracker.", fate=HONORED)
    job_type: str | None = param(None, description="Weights & Biases job type label.")
    group: str | None = param(None, description="Weights & Biases group the run belongs to.")
    notes: str | None = param(None, description="Free-text notes attached to the run.")
    tags: list[str] | None = param(None, description="Tags attached to the run.")
    config: dict[str, Any] | None = param(None, description="Extra config recorded with the run.")
    id_suffix: str | None = param("train", description="Suffix of the run id.")


class SwanlabConfig(Section):
    """SwanLab logging."""

    run_fate = _LOGS

    project: str | None = param(None, description="SwanLab project name.")
    name: str | None = param(None, description="Name of the run in the tracker.")
    config: dict[str, Any] | None = param(None, description="Extra config recorded with the run.")
    logdir: str | None = param(None, description="Local log directory.")
    mode: Literal["cloud", "local", "disabled", "offline"] | None = param("disabled", description="SwanLab mode: `cloud`, `local`, `disabled` or `offline`.")
    api_key: str | None = param(None, description="SwanLab API key; null reads SWANLAB_API_KEY.")


class TensorBoardConfig(Section):
    """TensorBoard logging."""

    path: str | None = param(None, description="Log directory; null disables TensorBoard.", fate=HONORED)


class TrackioConfig(Section):
    """Trackio logging (1.0)."""

    run_fate = _LOGS

    mode: Literal["disabled", "online", "local"] = param("disabled", description="Trackio mode: `disabled`, `online` or `local`.")
    project: str | None = param(None, description="Project; null uses experiment_name.")
    name: str | None = param(None, description="Run name; null uses trial_name.")
    space_id: str | None = param(None, description="Hugging Face Space that also receives the metrics.")


class StatsLoggerConfig(Section):
    """Where training statistics go."""

    experiment_name: str = _names("stats logger")[0]
    trial_name: str = _names("stats logger")[1]
    fileroot: str = param(REQUIRED, description="Root of the log files. Mandatory (`???`); AReaL's examples "
                                                "write `${cluster.fileroot}`.", fate=HONORED)
    wandb: WandBConfig = section(WandBConfig, description="Weights & Biases.", fate=HONORED)
    swanlab: SwanlabConfig = section(SwanlabConfig, description="SwanLab experiment tracking.", fate=_LOGS)
    tensorboard: TensorBoardConfig = section(TensorBoardConfig, description="TensorBoard; only `path` is "
                                                                           "needed.", fate=HONORED)
    trackio: TrackioConfig = section(TrackioConfig, fate=_LOGS, description="Trackio experiment tracking (1.0).")


class _Timer(Section):
    experiment_name: str = _names("timer")[0]
    trial_name: str = _names("timer")[1]
    fileroot: str = param(REQUIRED, description="Root of the files written. Mandatory (`???`); AReaL's examples "
                                                "write `${cluster.fileroot}`.",
                          fate=inert("where AReaL writes this component's own files"))
    freq_epochs: int | None = param(None, description="Trigger every this many epochs; null disables the "
                                                      "epoch trigger.", ge=1, fate=HONORED)
    freq_steps: int | None = param(None, description="Trigger every this many steps; null disables the step "
                                                     "trigger.", ge=1, fate=HONORED)
    freq_secs: int | None = param(None, description="Trigger every this many seconds; null disables the time "
                                                    "trigger.", ge=1, fate=HONORED)


class SaverConfig(_Timer):
    """When checkpoints are saved."""

    fileroot: str = param(REQUIRED, description="Root of the checkpoints. Mandatory (`???`); AReaL's "
                                                              "examples write `${cluster.fileroot}`.", fate=HONORED)

    mode: Literal["auto", "sync", "async"] = param("auto", description="Save mode of HF checkpoints (1.0): "
                                                                       "`auto`, `sync` or `async`.",
                                                   fate=inert("whether AReaL writes Hugging Face checkpoints "
                                                              "synchronously or in the background changes when files "
                                                              "appear, not their content"))


class EvaluatorConfig(_Timer):
    """When the model is evaluated."""

    eval_before_train: bool = param(False, description="Evaluate once before training starts (1.0).",
                                    fate=HONORED)


class RecoverConfig(_Timer):
    """Recovery of an interrupted experiment."""

    freq_epochs: int | None = param(None, description="Trigger every this many epochs; null disables the epoch "
                                                      "trigger.", ge=1, fate=_RESUMES_FROM_SAVER)
    freq_steps: int | None = param(None, description="Trigger every this many steps; null disables the step "
                                                     "trigger.", ge=1, fate=_RESUMES_FROM_SAVER)
    freq_secs: int | None = param(None, description="Trigger every this many seconds; null disables the time "
                                                    "trigger.", ge=1, fate=_RESUMES_FROM_SAVER)

    mode: Literal["disabled", "auto", "fault", "resume", "on", "off"] = param(
        "disabled", description="`disabled` never recovers; `auto` recovers when recover info and checkpoints "
                                "exist; `fault` only after a failure; `resume` forces resuming. AReaL 1.0 keeps "
                                "`auto`/`disabled`, adds `on`/`off` and rejects `fault` and `resume`.", fate=HONORED)
    retries: int = param(3, description="Recovery retries (auto/fault modes).", ge=0, fate=_LAUNCH)
    no_save_optim: bool = param(False, description="Leave optimizer states out of recovery checkpoints (1.0).",
                                fate=_OPTIM_STATE)
    no_load_optim: bool = param(False, description="Do not load optimizer states when recovering (1.0).",
                                fate=_OPTIM_STATE)


class SchedulerConfig(Section):
    """The scheduler service of single-controller mode (experimental)."""

    run_fate = inert("the scheduler service's addresses and reward-service settings are read by nothing in AReaL's "
                     "trainers")

    type: str | None = param(None, description="Scheduler type of the 1.0 single controller (e.g. local, ray, "
                                               "slurm); null runs under an SPMD launcher.",
                             fate=HONORED)
    endpoint: str = param("http://localhost:8081", description="Address of the scheduler service.")
    deploy_mode: str = param("separation", description="How the scheduler deploys workers.")
    functioncall_service_domain: str = param("http://localhost:8080", description="Address of the function-call "
                                                                                  "(reward) service.")
    reward_functioncall_config: dict[str, Any] = param({}, description="Settings passed to the function-call "
                                                                       "reward service.")
    reward_model_path: str = param("", description="Path of a reward model served by the scheduler.")
    reward_model_service_url: str = param("http://localhost:30000/classify",
                                          description="URL of the reward model service.")


class SessionTracerConfig(Section):
    """Per-session lifecycle tracing (1.0)."""

    run_fate = _LOGS

    enabled: bool = param(False, description="Trace the life of each rollout session.")
    flush_threshold: int = param(256, description="Finished sessions buffered before they are written.", ge=1)


class PerfTracerConfig(Section):
    """Performance tracing (1.0)."""

    run_fate = _LOGS

    experiment_name: str = _names("performance tracer")[0]
    trial_name: str = _names("performance tracer")[1]
    fileroot: str = param(REQUIRED, description="Root of the trace files. Mandatory (`???`); AReaL's examples "
                                                "write `${cluster.fileroot}`.")
    enabled: bool = param(False, description="Record Chrome-trace events.")
    save_interval: int = param(1, description="Steps between trace flushes.", ge=1)
    profile_steps: list[int] | None = param(None, description="Steps that are profiled; null profiles none.")
    session_tracer: SessionTracerConfig | None = section(SessionTracerConfig, optional=True,
                                                         description="Per-session tracing; null disables it.")


class MemoryProfilerConfig(Section):
    """CUDA memory snapshots (1.0)."""

    run_fate = _LOGS

    profile_steps: list[int] = param([0, 1], description="Steps whose memory is recorded.")
    max_entries: int = param(100000, description="Allocation events kept in a snapshot.", ge=1)


# ---- experiments -------------------------------------------------------------------------------------------


class BaseExperimentConfig(Section):
    """Keys every AReaL experiment shares."""

    experiment_name: str = param(REQUIRED, description="Name of the experiment, without `_` or `/`. Mandatory.",
                                 fate=HONORED)
    trial_name: str = param(REQUIRED, description="Name of the trial, without `-` or `/`. Mandatory.",
                            fate=HONORED)
    cluster: ClusterSpecConfig = section(ClusterSpecConfig, description="The cluster (mainly used by Slurm).",
                                          fate=HONORED)
    allocation_mode: str = param("", description="GPU allocation and parallel strategy, e.g. "
                                                 "`sglang.d4p1t1+d4p1t1` (v0.3), `sglang:d4p1t1+fsdp:d4p1t1` "
                                                 "(v0.4 and later) or `d8p1t1` for SFT. Deprecated in 1.0 in "
                                                 "favour of the engines' `backend` fields.", fate=HONORED)
    seed: int = param(1, description="Random seed of the experiment (data order, sampling, initialization).",
                      fate=HONORED)
    enable_offload: bool = param(False, description="Allow offloading through torch_memory_saver (1.0); needed by "
                                                    "any `offload: true` and by actor-rollout colocation.",
                                 fate=inert("a permission switch; the engines' own offload settings and colocation "
                                            "decide what is offloaded"))
    total_train_epochs: int = param(1, description="Epochs to train. AReaL 1.0 requires a positive number (rule "
                                                   "areal/total-epochs); v0.3 takes 0 and trains nothing.", ge=0,
                                    fate=HONORED)
    total_train_steps: int | None = param(None, description="Stop after this many steps (for benchmarking); "
                                                            "null trains normally.", ge=1, fate=HONORED)
    total_train_n_seqs: int | None = param(None, description="Stop after this many samples (for benchmarking); "
                                                             "null trains normally.", ge=1, fate=HONORED)
    tokenizer_path: str = param("", description="Path of the tokenizer.", fate=HONORED)
    weight_update_mode: Literal["disk", "xccl"] = param("disk", description="Weight update mode as v0.4 spelled "
                                                                            "it at the top level; 1.0 reads "
                                                                            "actor.weight_update_mode.",
                                                        fate=_WEIGHT_SYNC)
    train_dataset: DatasetConfig = section(DatasetConfig, description="The training data.", fate=HONORED)
    valid_dataset: DatasetConfig | None = section(DatasetConfig, optional=True, description="Validation data; "
                                                                                         "null skips it.", fate=HONORED)
    saver: SaverConfig = section(SaverConfig, description="Checkpoint saving.", fate=HONORED)
    evaluator: EvaluatorConfig = section(EvaluatorConfig, description="Evaluation schedule.",
                                          fate=HONORED)
    stats_logger: StatsLoggerConfig = section(StatsLoggerConfig, description="Statistics logging.",
                                               fate=HONORED)
    recover: RecoverConfig = section(RecoverConfig, description="Recovery after interruption.",
                                      fate=HONORED)
    sglang: SGLangConfig = section(SGLangConfig, description="SGLang server arguments.",
                                    fate=_NO_ROLLOUT)
    vllm: VLLMConfig = section(VLLMConfig, description="vLLM server arguments (later versions).",
                                fate=_NO_ROLLOUT)
    launcher: LauncherConfig = section(LauncherConfig, description="Resources of launched processes (v0.3; "
                                                                   "removed in 1.0).", fate=_LAUNCH)
    scheduler: SchedulerConfig = section(SchedulerConfig, description="Scheduler service.", fate=HONORED)
    perf_tracer: PerfTracerConfig | None = section(PerfTracerConfig, optional=True,
                                                   description="Performance tracing (1.0); null disables it.",
                                                    fate=_LOGS)
    memory_profiler: MemoryProfilerConfig | None = section(MemoryProfilerConfig, optional=True,
                                                           description="CUDA memory snapshots (1.0); null "
                                                                       "disables them.", fate=_LOGS)


class SFTConfig(BaseExperimentConfig):
    """Supervised fine-tuning."""

    model: TrainEngineConfig | None = section(TrainEngineConfig, optional=True,
                                              description="The model being fine-tuned (v0.3 key). AReaL v0.3.4 builds "
                                                          "it from defaults, so its mandatory names must be "
                                                          "written; exactly one of `model` and `actor` is "
                                                          "expected.", fate=HONORED)
    actor: TrainEngineConfig | None = section(TrainEngineConfig, optional=True,
                                              description="The model being fine-tuned, as AReaL 1.0 names it "
                                                          "(replaces `model`).", fate=HONORED)


class RWConfig(SFTConfig):
    """Reward-model training: the same keys as SFT, with a critic (scalar-head) model."""


class GRPOConfig(BaseExperimentConfig):
    """GRPO (and, in 1.0, PPO) reinforcement learning."""

    async_training: bool = param(True, description="Overlap rollout and training (v0.3; removed in 1.0, where "
                                                   "rollout.max_head_offpolicyness alone decides).",
                                 fate=HONORED)
    gconfig: GenerationHyperparameters = section(GenerationHyperparameters, description="Rollout sampling.",
                                                  fate=HONORED)
    eval_gconfig: GenerationHyperparameters | None = section(GenerationHyperparameters, optional=True,
                                                             description="Sampling for evaluation (1.0); null "
                                                                         "copies gconfig.",
                                                              fate=HONORED)
    rollout: InferenceEngineConfig = section(InferenceEngineConfig, description="The rollout engine.",
                                              fate=HONORED)
    actor: PPOActorConfig = section(PPOActorConfig, description="The policy being trained.",
                                     fate=HONORED)
    ref: ReferenceConfig | None = section(ReferenceConfig, optional=True,
                                         description="The reference model of the KL penalty; built only when "
                                                     "actor.kl_ctl > 0. AReaL v0.3.4 builds it from defaults when "
                                                     "absent (so its names must be written); 1.0 skips it.",
                                           fate=HONORED)
    critic: PPOCriticConfig | None = section(PPOCriticConfig, optional=True, description="A critic (1.0 PPO).",
                                              fate=HONORED)
    teacher: TeacherConfig | None = section(TeacherConfig, optional=True,
                                            description="Teacher of on-policy distillation (1.0); null for none.",
                                             fate=refused("rlcfg runs no on-policy distillation: the actor trains on "
                                                          "the RL loss alone"))
    # Redeclared from BaseExperimentConfig: the servers' settings matter where there is a rollout.
    sglang: SGLangConfig = section(SGLangConfig, description="SGLang server arguments.", fate=HONORED)
    vllm: VLLMConfig = section(VLLMConfig, description="vLLM server arguments (later versions).",
                                fate=HONORED)
    dynamic_bs: bool = param(False, description="Dynamic batch sizing in prepare_batch (1.0).",
                             # It only drops the trajectories a script's filter rejects (should_accept_fn); the
                             # scripts rlcfg runs pass none, so every step keeps its full batch.
                             fate=inert("it keeps only the trajectories an entry script's filter accepts, and the "
                                        "GSM8K RLVR script rlcfg runs passes no filter, so every step's batch is "
                                        "full"))


# Top-level keys that only the example scripts' own config subclasses declare (read from the scripts at v0.3.4 and
# v1.0.4; tests/inventory/areal lists them): a document that sets one is loaded by that script's class, which rlcfg
# does not model. `async_training` is left out: it is a key of the v0.3 GRPOConfig itself.
SCRIPT_KEYS: dict[str, str] = {
    "n_trajs": "AgentRLConfig", "max_turns": "AgentRLConfig/AgentConfig", "max_tokens_per_trajectory": "AgentRLConfig",
    "max_llm_calls_per_run": "AgentRLConfig", "judge_engine": "AgentRLConfig", "log_agent_stats": "AgentRLConfig",
    "log_agent_stats_keys": "AgentRLConfig", "max_iteration": "AgentRLConfig", "max_workers": "AgentRLConfig",
    "non_think_mode": "AgentRLConfig", "task_timeouts": "AgentRLConfig", "filter_uniform_reward": "AgentRLConfig",
    "encourage_completion_reward": "AgentRLConfig", "reward_fn_path": "AgentRLConfig",
    "agent_builder_path": "AgentRLConfig", "agent_builder_kwargs": "AgentRLConfig", "tir": "TIRGRPOConfig",
    "agent_run_args": "MultiTurnGRPOConfig", "export_style": "MultiTurnGRPOConfig", "workflow": "AgentConfig",
    "eval_workflow": "AgentConfig", "econfig": "Tau2PPOConfig/Tau2GatewayRolloutConfig",
    "model_path": "Tau2GatewayRolloutConfig",
}


# Which releases have each field: read from AReaL's config classes at every claimed release
# (tools/inventory/areal.py --tables writes releases.json from tests/inventory/areal). A field the table does not
# name is in every release, unless its own `releases=` says otherwise (the few the inventories cannot see).
RELEASE_TABLE: dict[str, Any] = json.loads((Path(__file__).parent / "releases.json").read_text())


declare_release_table(globals(), RELEASE_TABLE["fields"])
