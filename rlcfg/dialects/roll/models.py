"""The sections of a ROLL config at `main`: the RLVR pipeline's root (`RollConfig`, ROLL's `RLVRConfig`) and what
every pipeline shares (`_BaseRoot`, `_PpoRoot`); the agentic pipeline's sections are in models_agentic.py, built
only for an agentic document. `strategy_args.strategy_config` takes different keys for each `strategy_name`; the
models below are chosen by that name. A worker's GPUs are read from its `device_mapping` with the grammar of
device_mapping.py, never evaluated.

Fields, types and defaults follow the dataclasses at the commit tests/inventory/roll/main.json names
(tools/inventory/roll.py reads them); the seed (ROLL's Configuration Guide) shows example values, not defaults.
"""

# Annotations are evaluated as the classes are defined, not postponed: see `Section` in rlcfg.schema.base.
import copy
import json
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import ConfigDict, Discriminator, Tag, create_model, model_validator

from rlcfg.dialects.roll.device_mapping import DeviceMappingError, parse_device_mapping
from rlcfg.schema import entry
from rlcfg.schema.base import (HONORED, Section, declare_fates, declare_release_table, declare_releases, inert, param,
                               refused, section, unread)


# ---- reading a worker the way ROLL does ---------------------------------------------------------------------

# The releases rlcfg claims: v0.1.0, v0.1.3 (for v0.1.x), v0.2.1 (the last tag with DeepSpeed, for v0.2.x), v0.3.0
# and main.
RELEASES = entry("roll").releases
FROM_030 = ("v0.3.0", "main")
ONLY_MAIN = ("main",)
# StrategyArguments.strategy_name: ROLL main's, then the DeepSpeed strategies v0.3.0 removed (they are v0.2.1's).
STRATEGY_NAMES = ("hf_infer", "vllm", "sglang", "megatron_infer", "megatron_train", "fsdp2_train", "fsdp2_infer",
                  "deepspeed_train", "deepspeed_infer", "diffusion_deepspeed_train")
DEEPSPEED_STRATEGIES = ("deepspeed_train", "deepspeed_infer", "diffusion_deepspeed_train")
# The releases that have DeepSpeed, and each release's strategy_name Literal (v0.1.3's `mock_infer`, a test strategy
# no example uses, is not modelled).
WITH_DEEPSPEED = ("v0.1.0", "v0.1.3", "v0.2.1")
_V010_STRATEGIES = ("deepspeed_train", "hf_infer", "deepspeed_infer", "vllm", "sglang", "megatron_infer", "megatron_train")
STRATEGIES_OF = {"v0.1.0": _V010_STRATEGIES, "v0.1.3": (*_V010_STRATEGIES, "diffusion_deepspeed_train"),
                 "v0.2.1": STRATEGY_NAMES,
                 **{release: tuple(n for n in STRATEGY_NAMES if n not in DEEPSPEED_STRATEGIES) for release in FROM_030}}
# The strategy of a worker whose strategy_args name none (StrategyArguments' default).
DEFAULT_STRATEGY = {**{release: "deepspeed_train" for release in WITH_DEEPSPEED}, "v0.3.0": "fsdp2_train",
                    "main": "fsdp2_train"}


@lru_cache(maxsize=512)
def parsed_device_mapping(text: str) -> tuple[tuple[int, ...] | None, DeviceMappingError | None]:
    try:
        return parse_device_mapping(text), None
    except DeviceMappingError as exc:
        return None, exc


def device_ids(worker: Any) -> tuple[int, ...] | None:
    """The GPU ids of a worker, or None for a CPU-only worker or a mapping that does not parse."""
    mapping = getattr(worker, "device_mapping", None)
    if mapping is None:
        return None
    if isinstance(mapping, list):
        return tuple(mapping)
    return parsed_device_mapping(mapping)[0]


def configured(worker: Any) -> bool:
    """ROLL's WorkerConfig.is_configured: the worker has GPUs or a model path."""
    return bool(device_ids(worker)) or worker.model_args.model_name_or_path is not None


# ---- the run ledger -----------------------------------------------------------------------------------------
# What `rlcfg run` does with each key (rlcfg.schema.base.Fate) is declared once per section, in a table right after
# the section (`_fates`): HONORED where lower.py reads it and the runtime computes what ROLL computes,
# refused(...) where rlcfg would compute something else, inert(...) where nothing computed changes. A section's
# `run_fate` covers its fields that the table does not name.

NOWHERE = inert("ROLL reads this key nowhere (the RLVR pipeline at HEAD has no code that uses it)")
PERF = inert("a memory or speed setting of the engine: the numbers the step computes are the same")
LOGS = inert("where logs, profiles or dumps go: nothing computed changes")
SECTION = inert("a section: its keys carry their own fates")


# ---- model_args ---------------------------------------------------------------------------------------------


class ModelArgs(Section):
    model_name_or_path: str = param(
        None, description="Path to the model weights, or a Hugging Face / ModelScope model id. For actor_train, "
                          "actor_infer and reference, ROLL replaces it with `pretrain` unless all three set it "
                          "(the critic falls back to `reward_pretrain`).")
    adapter_name_or_path: str | None = param(None, description="Path or hub id of adapter weights to load.")
    attn_implementation: Literal["sdpa", "fa2", "auto"] | None = param(
        None, description="Attention kernel: `fa2` (FlashAttention 2), `sdpa` or `auto`.")
    flash_attn: Literal["auto", "disabled", "sdpa", "fa2"] | None = param(
        None, description="Older name of `attn_implementation`, still written by many ROLL examples. ROLL at HEAD "
                          "has no such field and drops it, so it has no effect (rlcfg warns).")
    moe_aux_loss_coef: float | None = param(
        None, description="Coefficient of the auxiliary router loss of a mixture-of-experts model.")
    disable_gradient_checkpointing: bool | None = param(
        False, description="Disable gradient checkpointing. ROLL's Configuration Guide: applies only to actor_train "
                           "when "
                           "strategy_name is fsdp2_train.")
    gradient_checkpointing_use_reentrant: bool | None = param(
        None, description="torch.utils.checkpoint's reentrant switch; null picks reentrant for MoE models only.")
    device_map: str | None = param("balanced", description="transformers' from_pretrained device map.")
    dtype: Literal["fp32", "bf16", "fp16"] | None = param(
        "bf16", description="Model dtype: fp32, bf16 or fp16 (otherwise the checkpoint's torch_dtype). bf16/fp16 "
                            "also switch on training_args.bf16/fp16.")
    model_type: Literal["auto_sequence_classification", "auto_token_classification", "trl"] | None = param(
        None, description="Head type for reward models: auto_sequence_classification, auto_token_classification "
                          "or trl (value head).")
    num_labels: int | None = param(1, description="Number of labels of a token/sequence classification head.", ge=1)
    model_config_kwargs: dict[str, Any] = param({}, description="Extra keyword arguments for the model config.")
    freeze_module_prefix: str | None = param(
        None, description="Comma-separated prefixes of parameter names to freeze (partial-parameter fine-tuning): "
                          "each item, stripped of spaces, freezes every parameter whose name starts with it, as "
                          "the Hugging Face model names them (`model.embed_tokens`, `model.layers.0.`). It acts "
                          "where the worker trains (actor_train, critic); a prefix that matches no parameter "
                          "freezes nothing (rlcfg run warns). rlcfg refuses it with the Megatron strategy, whose "
                          "parameters ROLL names otherwise.")
    ulysses_size: int | None = param(
        1, description="Ulysses context-parallel group size (FSDP2 strategies). Must divide the "
                       "worker's GPU count, and the number of attention heads.", ge=1)
    vision_dp: bool = param(False, description="Distribute the vision tower across the Ulysses ranks.")
    lora_target: str | None = param(
        None, description="Comma-separated modules to put LoRA adapters on (`all` for every linear layer); null "
                          "trains the full model. Not supported by the sglang and hf_infer strategies.")
    lora_rank: int | None = param(8, description="Inner dimension (rank) of the LoRA adapter matrices.", ge=1)
    lora_alpha: int | None = param(None, description="LoRA scale factor; null means lora_rank × 2.", ge=1)
    lora_dropout: float | None = param(0.0, description="Dropout inside the LoRA adapters.", ge=0, le=1)
    additional_target: str | None = param(
        None, description="Comma-separated modules besides the LoRA layers to train and save.")
    autocast_adapter_dtype: bool = param(True, description="Cast fp16/bf16 adapter weights to fp32.")


_ONLY_LORA = inert("only read with lora_target, which rlcfg refuses")
declare_fates(ModelArgs,
       model_name_or_path=HONORED, dtype=HONORED, ulysses_size=HONORED, disable_gradient_checkpointing=HONORED,
       adapter_name_or_path=refused("rlcfg loads no adapter weights: it starts from the base model alone"),
       attn_implementation=inert("which attention kernel computes the same attention"),
       flash_attn=inert("ROLL at HEAD drops this key"),
       moe_aux_loss_coef=refused("rlcfg adds no router load-balancing loss to the actor's loss"),
       gradient_checkpointing_use_reentrant=PERF, device_map=PERF, vision_dp=PERF,
       model_type=refused("rlcfg loads every model as a causal language model, without a classification or "
                          "value head"),
       num_labels=inert("only read with a classification model_type, which rlcfg refuses"),
       model_config_kwargs=refused("rlcfg builds the model from its own config.json, without extra options"),
       freeze_module_prefix=HONORED,
       lora_target=refused("rlcfg does not read ROLL's LoRA targets (the all-linear, all-embedding and all-router "
                           "groups, regular expressions, additional_target) into its adapters yet, and would train "
                           "the full model"),
       lora_rank=_ONLY_LORA, lora_alpha=_ONLY_LORA, lora_dropout=_ONLY_LORA, additional_target=_ONLY_LORA,
       autocast_adapter_dtype=_ONLY_LORA)


# ---- training_args ------------------------------------------------------------------------------------------


class TrainingArgs(Section):
    output_dir: str = param("", description="Where the worker writes checkpoints. ROLL overwrites it with the "
                                            "pipeline's `output_dir`.")
    max_steps: int = param(-1, description="Training steps; ROLL derives it from the pipeline's max_steps.")
    num_train_epochs: float = param(1.0, description="Epochs over the dataset.", ge=0)
    learning_rate: float = param(5e-5, description="Initial learning rate.", ge=0)
    lr_scheduler_type: str = param("linear", description="Learning-rate schedule (Hugging Face scheduler names: "
                                                         "linear, cosine, constant, constant_with_warmup, ...).")
    weight_decay: float = param(0.0, description="AdamW weight decay.", ge=0)
    adam_beta1: float = param(0.9, description="AdamW beta1.", ge=0, lt=1)
    adam_beta2: float = param(0.999, description="AdamW beta2.", ge=0, lt=1)
    per_device_train_batch_size: int = param(
        8, description="Micro-batch size per data-parallel rank. The global train batch is "
                       "per_device_train_batch_size × gradient_accumulation_steps × world_size, divided by "
                       "ulysses_size (FSDP2) or by tp × pp × cp (Megatron).", ge=1)
    gradient_accumulation_steps: int = param(
        1, description="Micro-batches accumulated per optimizer step. For one optimizer step per rollout set it "
                       "to rollout_batch_size × num_return_sequences_in_group × tp × pp × cp / "
                       "per_device_train_batch_size / world_size.", ge=1)
    seed: int = param(42, description="Training seed; ROLL overwrites it with the pipeline's `seed`.")
    data_seed: int | None = param(None, description="Seed of the data samplers.")
    dataloader_num_workers: int = param(0, description="Data-loading subprocesses; 0 loads in the main process.",
                                        ge=0)
    fp16: bool = param(False, description="fp16 mixed precision; switched on by model_args.dtype: fp16.")
    bf16: bool = param(False, description="bf16 mixed precision; switched on by model_args.dtype: bf16.")
    tf32: bool | None = param(None, description="Allow TF32 matmuls on Ampere and newer GPUs.")
    warmup_ratio: float = param(0.0, description="Linear warmup over this fraction of the training steps.",
                                ge=0, le=1)
    warmup_steps: int = param(0, description="Linear warmup steps; wins over warmup_ratio when > 0.", ge=0)
    save_hf_model: bool = param(False, description="Also save checkpoints in Hugging Face format.")


declare_fates(TrainingArgs,
       learning_rate=HONORED, lr_scheduler_type=HONORED, weight_decay=HONORED, adam_beta1=HONORED,
       adam_beta2=HONORED, per_device_train_batch_size=HONORED, gradient_accumulation_steps=HONORED,
       warmup_ratio=HONORED, warmup_steps=HONORED,
       output_dir=inert("ROLL overwrites it with the pipeline's output_dir"),
       max_steps=inert("ROLL derives it from the pipeline's max_steps"),
       num_train_epochs=inert("the RLVR pipeline counts max_steps, not epochs"),
       seed=inert("ROLL overwrites it with the pipeline's seed"),
       data_seed=inert("the RLVR pipeline draws prompts with the pipeline's seed"),
       dataloader_num_workers=PERF, tf32=PERF,
       fp16=inert("ROLL sets it from model_args.dtype, which rlcfg reads"),
       bf16=inert("ROLL sets it from model_args.dtype, which rlcfg reads"),
       save_hf_model=inert("an extra checkpoint format: nothing computed changes"))


# ---- data_args ----------------------------------------------------------------------------------------------


class DataArgs(Section):
    template: str | None = param(
        "native", description="Chat template for building prompts; `native` uses the tokenizer's "
                              "apply_chat_template.")
    file_name: list[str] | str | None = param(
        None, description="Training data file(s): JSON, JSONL or CSV.")
    eval_file_name: str | None = param(None, description="Evaluation data file.")
    dataset_type: list[str] | str | None = param("json", description="Dataset loader type, e.g. json.")
    prompt: str | None = param(None, description="Column used as the prompt. Conflicts with `messages`.")
    messages: str | None = param(None, description="Column used as the chat messages. Conflicts with `prompt`.")
    response: str | None = param("solution", description="Column used as the label/reference answer.")
    tag: str | None = param("tag", description="Column used to pick the domain (reward worker) of a sample.")
    id: str | None = param("id", description="Column used as the sample id.")
    domain_interleave_probs: dict[str, float] | None = param(
        None, description="Sampling probability of each domain within one rollout batch, by domain name.")
    preprocessing_num_workers: int | None = param(None, description="Processes for dataset preprocessing.", ge=1)
    # Multi-modal inputs (qwen-vl-utils' resizing budgets). ROLL declares the pixel and frame budgets as plain
    # numbers, so an explicit null is a load error there.
    image_max_pixels: int = param(4096 * 4096, description="Largest pixel count an input image is resized to.",
                                  ge=1)
    image_min_pixels: int = param(4 * 28 * 28, description="Smallest pixel count an input image is resized to.",
                                  ge=1)
    video_max_pixels: int = param(2048 * 2048, description="Largest pixel count of one sampled video frame.", ge=1)
    video_min_pixels: int = param(4 * 28 * 28, description="Smallest pixel count of one sampled video frame.", ge=1)
    video_total_pixels: int = param(
        16384 * 28 * 28, description="Pixel budget of a whole video; it bounds the tokens one video takes.", ge=1)
    video_fps: float = param(2.0, description="Frames sampled per second of video.", gt=0)
    video_max_frames: int = param(128, description="Most frames sampled from one video.", ge=1)
    video_resize_chunk_frames: int = param(64, description="Frames resized together in one chunk.", ge=1)
    image_folder: str | None = param(None, description="Folder that relative image paths in the data refer to.")
    video_folder: str | None = param(None, description="Folder that relative video paths in the data refer to.")
    audio_folder: str | None = param(None, description="Folder that relative audio paths in the data refer to.")
    custom_data_kwargs_func: str | None = param(
        None, description="Dotted path of a function that builds extra per-sample keyword arguments.")
    cache_path: str | None = param(None, description="Where preprocessed datasets are cached.")
    dataset_dir: str | None = param(
        None, description="Written by older ROLL examples; ROLL at HEAD has no such field and drops it (no effect).")
    interleave_probs: str | None = param(
        None, description="Written by older ROLL examples; ROLL at HEAD has no such field and drops it (no effect).")


_MEDIA = inert("only for image, video or audio inputs; rlcfg's RLVR data is text")
declare_fates(DataArgs, default=_MEDIA,
       file_name=HONORED, prompt=HONORED, messages=HONORED, domain_interleave_probs=HONORED,
       template=HONORED,
       eval_file_name=inert("the RLVR pipeline evaluates on validation.data_args.file_name"),
       dataset_type=inert("rlcfg reads the files by their extension; the rows are the same"),
       response=inert("the RLVR reward workers read each sample's ground_truth column"),
       tag=inert("the domain column routes samples to reward workers; rlcfg refuses more than one domain"),
       id=inert("a sample id labels logs"), preprocessing_num_workers=PERF, cache_path=PERF,
       custom_data_kwargs_func=refused("rlcfg builds samples from the data's columns only"),
       dataset_dir=inert("ROLL at HEAD drops this key"), interleave_probs=inert("ROLL at HEAD drops this key"))


# ---- generating_args ----------------------------------------------------------------------------------------


class GeneratingArgs(Section):
    max_new_tokens: int | None = param(
        8192, description="Maximum tokens generated per response. For actor_infer, ROLL overwrites it with "
                          "sequence_length − prompt_length (and for validation with the val_ lengths).", ge=1)
    max_length: int | None = param(8192, description="Maximum total length; max_new_tokens wins when set.", ge=1)
    temperature: float | None = param(0.95, description="Sampling temperature.", ge=0)
    top_p: float | None = param(0.7, description="Nucleus sampling: keep the most probable tokens whose "
                                                 "probabilities add up to top_p.", gt=0, le=1)
    top_k: int | None = param(50, description="Keep only the top_k most probable tokens (-1 or 0: all).", ge=-1)
    do_sample: bool | None = param(True, description="Sample; false decodes greedily.")
    num_beams: int | None = param(1, description="Beams for beam search; 1 means none.", ge=1)
    repetition_penalty: float | None = param(1.0, description="Repetition penalty; 1.0 means none.", gt=0)
    length_penalty: float | None = param(1.0, description="Length penalty of beam search.")
    num_return_sequences: int | None = param(
        1, description="Responses per prompt. For actor_infer, RLVR overwrites it with "
                       "num_return_sequences_in_group.", ge=1)
    stop_strings: list[str] | None = param(None, description="Strings that end generation.")
    include_stop_str_in_output: bool | None = param(None, description="Keep the stop string in the output.")
    logprobs: int | None = param(0, description="Number of logprobs to return per token; null returns none.",
                                 ge=0)
    seed: int | None = param(None, description="Base seed for request-level sampling.")
    extra_args: dict[str, Any] | None = param({}, description="Backend-specific generation keyword arguments, "
                                                              "passed through unchanged.")


declare_fates(GeneratingArgs,
       temperature=HONORED, top_p=HONORED, top_k=HONORED, do_sample=HONORED, num_return_sequences=HONORED,
       stop_strings=HONORED, seed=HONORED,
       max_new_tokens=inert("ROLL overwrites it with sequence_length − prompt_length (val_ lengths for validation), "
                            "which rlcfg reads"),
       max_length=inert("max_new_tokens, which ROLL derives, wins over it"),
       num_beams=refused("rlcfg samples each response; it runs no beam search"),
       repetition_penalty=HONORED,
       length_penalty=inert("only used by beam search, which rlcfg refuses"),
       include_stop_str_in_output=refused("rlcfg keeps its engines' default for the stop string"),
       logprobs=inert("how many log-probs the engine reports: what is sampled and trained is the same"),
       extra_args=refused("rlcfg passes no extra generation arguments to its engines"))


# ---- strategy_config, one model per strategy ----------------------------------------------------------------


class _StrategyConfig(Section):
    # strategy_config is handed to the engine's own constructor, which takes many more options than rlcfg
    # lists; the rule `roll/strategy-config-keys` reports unknown keys with hints for the right engine.
    model_config = ConfigDict(extra="allow")
    engine: ClassVar[str] = ""


class MegatronConfig(_StrategyConfig):
    engine: ClassVar[str] = "Megatron"
    tensor_model_parallel_size: int = param(1, description="Degree of tensor model parallelism.", ge=1)
    pipeline_model_parallel_size: int = param(1, description="Degree of pipeline model parallelism.", ge=1)
    expert_model_parallel_size: int = param(1, description="Degree of expert model parallelism.", ge=1)
    expert_tensor_parallel_size: int | None = param(
        None, description="Tensor parallelism inside the experts; null means tensor_model_parallel_size.", ge=1)
    context_parallel_size: int = param(1, description="Degree of context parallelism.", ge=1)
    virtual_pipeline_model_parallel_size: int | None = param(
        None, description="Number of virtual pipeline stages per pipeline rank (interleaved schedule).", ge=1)
    sequence_parallel: bool = param(False, description="Enable sequence parallelism (needs TP > 1 to matter).")
    recompute_granularity: Literal["full", "selective"] | None = param(
        None, description="Activation checkpointing: `full` recomputes whole transformer layers, `selective` only "
                          "the core attention.")
    # Same order as rlinf.py: typing caches Literal by its (unordered) set of values, so a different order
    # here would make the generated schemas depend on which dialect is imported first.
    recompute_method: Literal["block", "uniform"] | None = param(
        None, description="How layers are chosen for full recomputation.")
    recompute_num_layers: int | None = param(None, description="Layers recomputed per stage (full recompute).",
                                             ge=1)
    moe_layer_recompute: bool = param(False, description="Checkpoint MoE layers to save activation memory.")
    moe_token_dispatcher_type: Literal["allgather", "alltoall", "flex"] = param(
        "allgather", description="MoE token dispatcher: `allgather` or `alltoall` (the options ROLL's Configuration "
                                 "Guide lists); newer "
                                 "Megatron adds `flex`. `allgather` cannot handle variable sequence lengths.")
    moe_grouped_gemm: bool = param(False, description="Grouped GEMM for the MoE experts.")
    moe_shared_expert_overlap: bool = param(
        False, description="Overlap shared-expert computation with the dispatcher's communication.")
    overlap_grad_reduce: bool = param(
        False, description="Overlap the gradient reduce-scatter with the backward pass (distributed optimizer).")
    overlap_param_gather: bool = param(
        False, description="Overlap the parameter all-gather with the forward pass. ROLL's Megatron strategy does "
                           "not support it.")
    use_distributed_optimizer: bool = param(False, description="Shard optimizer states across data-parallel ranks.")
    variable_seq_lengths: bool = param(False, description="Let micro-batches have different sequence lengths.")
    bf16: bool | None = param(None, description="Megatron bf16 training (normally set from model_args.dtype).")
    fp16: bool | None = param(None, description="Megatron fp16 training (normally set from model_args.dtype).")
    # The rest of mcore_adapter's MegatronArguments (the Megatron strategies build it from strategy_config).
    pipeline_model_parallel_layout: str | None = param(
        None, description="Explicit layer layout over the pipeline stages (Megatron's layout string, e.g. "
                          "\"Et*3|t*3|t*3|t*3L\"); replaces the even split.")
    account_for_embedding_in_pipeline_split: bool | None = param(
        None, description="Count the embedding as a layer when splitting layers over pipeline stages.")
    account_for_loss_in_pipeline_split: bool | None = param(
        None, description="Count the loss computation as a layer when splitting layers over pipeline stages.")
    overlap_p2p_comm: bool = param(True, description="Overlap pipeline send/receive with compute.")
    recompute_modules: str | list[str] | None = param(
        None, description="Modules recomputed by selective recompute, comma-separated (e.g. \"moe,layernorm\").")
    bias_activation_fusion: bool = param(False, description="Fuse bias add and activation.")
    apply_rope_fusion: bool = param(False, description="Fused rotary position embedding kernel.")
    cross_entropy_loss_fusion: bool = param(False, description="Fused cross-entropy loss kernel.")
    moe_aux_loss_coeff: float | None = param(None, description="Coefficient of the MoE load-balancing loss.", ge=0)
    moe_expert_capacity_factor: float | None = param(
        None, description="Capacity of each expert relative to an even share of tokens; null: no token dropping.",
        gt=0)
    moe_pad_expert_input_to_capacity: bool | None = param(
        None, description="Pad every expert's input to its capacity (needs moe_expert_capacity_factor).")
    moe_token_drop_policy: Literal["probs", "position"] | None = param(
        None, description="Which tokens an over-full expert drops: lowest router probability or latest position.")
    moe_enable_routing_replay: bool = param(False, description="Record and replay MoE routing decisions.")
    moe_router_dtype: str | None = param(None, description="Dtype of the MoE router computation (e.g. fp32).")
    mtp_num_layers: int | None = param(0, description="Multi-token-prediction layers.", ge=0)
    calculate_per_token_loss: bool = param(False, description="Average the loss over tokens, not sequences.")
    transformer_impl: Literal["local", "transformer_engine"] | None = param(
        None, description="Transformer layer implementation.")
    cuda_graph_impl: Literal["local", "transformer_engine"] | None = param(
        None, description="CUDA graph implementation; null disables CUDA graphs.")
    cuda_graph_scope: str = param("full", description="Which part of the layer a CUDA graph captures.")
    fp8_recipe: str | None = param(None, description="FP8 scaling recipe.")
    fp8_param: bool = param(False, description="Keep parameters in FP8.")
    fp8: str | None = param(None, description="FP8 format (e4m3, hybrid); null trains without FP8.")
    additional_configs: str | dict[str, Any] | None = param(
        {}, description="Extra Megatron model-config options (a mapping, or a JSON string).")
    accumulate_allreduce_grads_in_fp32: bool = param(False, description="Reduce gradients in fp32.")
    distrib_optim_fully_reshardable: bool = param(
        False, description="Save the distributed optimizer in a layout that can be loaded with other parallel sizes.")
    distrib_optim_fully_reshardable_mem_efficient: bool = param(
        False, description="The fully reshardable save, with less peak memory.")
    delay_grad_reduce: bool = param(True, description="Delay the gradient reduction of the first pipeline stage.")
    check_for_nan_in_loss_and_grad: bool = param(True, description="Stop on NaN in the loss or the gradients.")
    ddp_average_in_collective: bool = param(False, description="Average gradients inside the collective.")
    ddp_bucket_size: int | None = param(None, description="Gradient bucket size of the DDP wrapper.", ge=1)
    optimizer: str = param("adam", description="Optimizer: adam or sgd.")
    optimizer_cpu_offload: bool = param(False, description="Keep optimizer states on the CPU.")
    optimizer_offload_fraction: float = param(0.0, description="Fraction of optimizer states kept on the CPU.",
                                              ge=0, le=1)
    save_hf_model: bool = param(False, description="Also save checkpoints in Hugging Face format.")
    save_merged_model: bool = param(False, description="Save LoRA-merged weights.")
    ckpt_format: Literal["legacy", "torch_dist"] = param("legacy", description="Checkpoint format.")
    ckpt_d2h_non_blocking: bool = param(False, description="Copy checkpoint tensors to the host asynchronously.")
    sequence_packing: bool = param(False, description="Megatron-side sequence packing.")
    compile_warmup: bool = param(False, description="Warm up compiled kernels before training.")


class Fsdp2Config(_StrategyConfig):
    engine: ClassVar[str] = "FSDP2"
    fsdp_size: int = param(
        1, description="Number of FSDP shards. fsdp_size >= world_size or <= 1: pure FSDP2; fsdp_size < "
                       "world_size: HSDP, with world_size / fsdp_size data-parallel replicas.")
    param_dtype: str = param("bf16", description="Parameter dtype (bf16, fp16, float32).")
    reduce_dtype: str = param("float32", description="Dtype of the gradient reduction.")
    reshard_after_forward: bool = param(
        True, description="Reshard parameters after the forward pass (true) or keep them gathered (false).")
    offload_policy: bool = param(
        False, description="Offload parameters to CPU when not in use (saves GPU memory, costs speed).")
    ep_size: int = param(1, description="Expert parallelism (needs transformers >= 5.2).", ge=1)
    efsdp_size: int = param(1, description="FSDP shards inside each expert-parallel group.", ge=1)


class VllmConfig(_StrategyConfig):
    engine: ClassVar[str] = "vLLM"
    gpu_memory_utilization: float = param(
        0.9, description="Fraction of GPU memory vLLM may use for the model executor (weights and KV cache).",
        gt=0, le=1)
    block_size: int = param(16, description="Token block size of the paged KV cache.", ge=1)
    max_model_len: int | None = param(
        None, description="Model context length; derived from the model config when unset.", ge=1)
    load_format: str = param(
        "dummy", description="Weight format to load. ROLL's Configuration Guide says it can be `dummy` because the "
                             "weights are "
                             "pushed by a model update first; ROLL's code already defaults to `dummy`.")
    sleep_level: Literal[1, 2] = param(
        1, description="What vLLM frees between generations: 1 the KV cache, 2 the weights as well.")
    tensor_parallel_size: int = param(1, description="vLLM tensor parallelism. ROLL sets num_gpus_per_worker to "
                                                     "tensor_parallel_size × pipeline_parallel_size.", ge=1)
    pipeline_parallel_size: int = param(1, description="vLLM pipeline parallelism.", ge=1)
    data_parallel_size: int | None = param(
        None, description="vLLM data parallelism; must equal the worker's world size when set.", ge=1)
    enforce_eager: bool = param(False, description="Disable CUDA graphs.")
    enable_prefix_caching: bool | None = param(None, description="Reuse the KV cache of shared prefixes.")
    enable_chunked_prefill: bool | None = param(None, description="Split long prefills into chunks.")
    max_num_batched_tokens: int | None = param(None, description="Tokens per scheduler iteration.", ge=1)
    max_num_seqs: int | None = param(None, description="Sequences per scheduler iteration.", ge=1)
    disable_custom_all_reduce: bool | None = param(None, description="Use NCCL instead of vLLM's all-reduce.")
    kv_cache_dtype: str | None = param(None, description="KV cache dtype (auto, fp8, ...).")
    quantization: str | None = param(None, description="Weight quantization method.")
    swap_space: float | None = param(None, description="CPU swap space per GPU, in GiB.", ge=0)


class SglangConfig(_StrategyConfig):
    engine: ClassVar[str] = "SGLang"
    mem_fraction_static: float | None = param(
        None, description="Fraction of free GPU memory for static memory (weights and KV cache). Increase it if "
                          "building the KV cache fails; decrease it on CUDA out-of-memory.", gt=0, le=1)
    load_format: str = param(
        "dummy", description="Weight format to load; `dummy` is fine because a model update comes first.")
    tensor_parallel_size: int | None = param(
        None, description="SGLang tensor parallelism; unset: the worker's num_gpus_per_worker (ROLL's SGLang "
                          "strategy takes one GPU per placement group of the worker). ROLL does not derive "
                          "num_gpus_per_worker for SGLang: tensor_parallel_size × pipeline_parallel_size must be a "
                          "multiple of it.", ge=1)
    pipeline_parallel_size: int = param(1, description="SGLang pipeline parallelism.", ge=1)
    context_length: int | None = param(None, description="Model context length.", ge=1)
    max_running_requests: int | None = param(None, description="Concurrent requests per engine.", ge=1)
    attention_backend: str | None = param(None, description="SGLang attention backend (fa3, flashinfer, triton).")
    disable_cuda_graph: bool | None = param(None, description="Disable CUDA graphs.")
    grpc_mode: bool | None = param(None, description="Serve through gRPC; needed by the SglangRouter.")


class HfInferConfig(_StrategyConfig):
    engine: ClassVar[str] = "transformers"


class DeepSpeedConfig(_StrategyConfig):
    """DeepSpeed's own JSON config (ROLL v0.2.1 and earlier): its keys are DeepSpeed's, passed on unchecked."""

    engine: ClassVar[str] = "DeepSpeed"
    open: ClassVar[bool] = True


# strategy_config is how a role is laid out and run (parallel sizes, kernels, memory): rlcfg lays the role out with
# the sizes it reads (lower.py) and the numbers computed are the same whatever the layout, so these keys
# are inert, except those that change the model or the numbers themselves.
LAYOUT = inert("how the role is split over its GPUs or run by its engine: rlcfg plans and lays the role out with it; "
               "the numbers the step computes are the same")
declare_fates(MegatronConfig, default=LAYOUT,
       moe_aux_loss_coeff=refused("rlcfg adds no router load-balancing loss to the actor's loss"),
       moe_expert_capacity_factor=refused("rlcfg's experts drop no tokens"),
       moe_enable_routing_replay=refused("rlcfg routes every forward pass afresh"),
       mtp_num_layers=refused("rlcfg trains no multi-token-prediction layers"),
       fp8=refused("rlcfg trains in model_args.dtype, without FP8"),
       fp8_param=refused("rlcfg trains in model_args.dtype, without FP8"),
       optimizer=refused("rlcfg trains with AdamW (Megatron's adam)"))
declare_releases(MegatronConfig, FROM_030, "expert_tensor_parallel_size", "cross_entropy_loss_fusion",
                 "moe_enable_routing_replay", "cuda_graph_impl", "cuda_graph_scope", "ckpt_format", "compile_warmup")
declare_releases(MegatronConfig, ONLY_MAIN, "ckpt_d2h_non_blocking")  # mcore_adapter's, after v0.3.0
declare_fates(Fsdp2Config, default=LAYOUT)
declare_fates(VllmConfig, default=LAYOUT,
       quantization=refused("rlcfg's rollout engine generates with the model's own weights, unquantized"),
       kv_cache_dtype=refused("rlcfg's rollout engine keeps the KV cache in the model's dtype"))
declare_fates(SglangConfig, default=LAYOUT)
declare_fates(DeepSpeedConfig, default=inert("DeepSpeed's own config: `rlcfg run` refuses the DeepSpeed strategies "
                                             "themselves (rlcfg trains with FSDP2 or Megatron)"))


CONFIG_OF_STRATEGY: dict[str, type[_StrategyConfig]] = {
    "megatron_train": MegatronConfig, "megatron_infer": MegatronConfig,
    "fsdp2_train": Fsdp2Config, "fsdp2_infer": Fsdp2Config,
    "vllm": VllmConfig, "sglang": SglangConfig, "hf_infer": HfInferConfig,
    **{name: DeepSpeedConfig for name in DEEPSPEED_STRATEGIES},
}
assert set(CONFIG_OF_STRATEGY) == set(STRATEGY_NAMES)


def _merged_config() -> type[Section]:
    """Every strategy's keys in one section, each description naming the strategies that take it.

    rlcfg's introspection (`--explain`, did-you-mean, the docs tables) follows the first member of a union;
    making that member this merged view lets it find every strategy_config key."""
    fields: dict[str, Any] = {}
    users: dict[str, list[str]] = {}
    for name, model in CONFIG_OF_STRATEGY.items():
        for key in model.model_fields:
            users.setdefault(key, []).append(name)
    for name, model in CONFIG_OF_STRATEGY.items():
        for key, info in model.model_fields.items():
            if key in fields:
                continue
            merged = copy.copy(info)
            merged.description = f"({', '.join(users[key])}) {info.description}"
            fields[key] = (info.annotation, merged)
    return create_model("AnyStrategyConfig", __base__=_StrategyConfig, **fields)


AnyStrategyConfig = _merged_config()


class AnyStrategyArgs(Section):
    """Only reached when strategy_name is not a strategy ROLL knows; it then reports the name."""

    strategy_name: Literal[STRATEGY_NAMES] = param(  # type: ignore[valid-type]
        "fsdp2_train", description="The training or inference strategy: fsdp2_train / megatron_train for "
                                   "training, vllm / sglang / hf_infer for inference, megatron_infer / fsdp2_infer "
                                   "for the reference. ROLL's default is fsdp2_train; up to v0.2.1 it was "
                                   "deepspeed_train, and deepspeed_train / deepspeed_infer / "
                                   "diffusion_deepspeed_train were strategies (ROLL v0.3.0 removed them).")
    strategy_config: AnyStrategyConfig | None = section(  # type: ignore[valid-type]
        AnyStrategyConfig, description="Options passed to the strategy's constructor; which keys apply depends on "
                                       "strategy_name. Null means {}.")

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> dict:
        # In a JSON Schema oneOf, a member that accepts everything would make every valid document ambiguous.
        return {"not": {}, "description": "an unknown strategy_name"}


def _strategy_args(name: str) -> type[Section]:
    config = CONFIG_OF_STRATEGY[name]
    return create_model(
        f"StrategyArgs_{name}", __base__=Section,
        strategy_name=(Literal[name], param(name, description=f"Selects the {name} strategy.")),
        strategy_config=(config | None, section(config, description=f"Options of the {name} strategy "
                                                                     f"({config.engine}); null means {{}}.")))


def _strategy_tag(value: Any) -> str:
    if isinstance(value, dict):
        name = value.get("strategy_name", "fsdp2_train")
    else:
        name = getattr(value, "strategy_name", None)
    return name if isinstance(name, str) and name in CONFIG_OF_STRATEGY else "unknown"


_STRATEGY_ARGS = {n: _strategy_args(n) for n in CONFIG_OF_STRATEGY}
StrategyArgs = Annotated[
    Union[tuple([Annotated[AnyStrategyArgs, Tag("unknown")]]
                + [Annotated[model, Tag(n)] for n, model in _STRATEGY_ARGS.items()])],  # type: ignore[misc]
    Discriminator(_strategy_tag),
]
# The merged views are what introspection, the docs and the run ledger walk (the first member of the union).
AnyStrategyConfig.run_fate = LAYOUT
_STRATEGY_NAME = inert("which engine runs the role: rlcfg starts that engine (or its CPU stand-in); the numbers the "
                       "step computes are the same")
for _model in (AnyStrategyArgs, *_STRATEGY_ARGS.values()):
    declare_fates(_model, strategy_name=_STRATEGY_NAME, strategy_config=SECTION)


# ---- workers ------------------------------------------------------------------------------------------------


class SequencePackingArgs(Section):
    algorithm: Literal["none", "load_balance"] = param(
        "none", description="`none` (default partitioning) or `load_balance` (spread sequences across "
                            "micro-batches; needs the max_packed_sequence_length_* keys).")
    max_packed_sequence_length_forward: int = param(
        None, description="Longest packed sequence in a forward micro-batch (divided by cp_size per CP rank).",
        ge=1)
    max_packed_sequence_length_train: int = param(
        None, description="Longest packed sequence in a training micro-batch (divided by cp_size per CP rank).",
        ge=1)
    min_num_micro_batches_forward: int = param(1, description="Fewest micro-batches per forward mini-batch.", ge=1)
    min_num_micro_batches_train: int = param(1, description="Fewest micro-batches per training mini-batch.", ge=1)


class RouterReplay(Section):
    mode: Literal["disable", "R2", "R3"] = param(
        "disable", description="MoE router replay: `disable`, `R2` (not implemented by ROLL) or `R3` (supported "
                               "on megatron_train and sglang only).")


declare_fates(SequencePackingArgs, default=inert("how sequences are packed into micro-batches (memory and speed): the "
                                          "loss is the same"))
declare_fates(RouterReplay, mode=refused("rlcfg routes every forward pass afresh; it replays no MoE routing"))


class Worker(Section):
    name: str = param(None, description="Name of the role; ROLL sets it for the standard workers.")
    worker_cls: str | None = param(
        None, description="Python class of the worker (dotted path); RLVR picks the standard one when null.")
    pg_variant: Literal["vanilla", "ppo", "tis", "topr", "cispo", "kimi15"] | None = param(
        None, description="Policy-gradient loss variant of actor_train; an unsupported one fails at the first loss "
                          "computation in ROLL.")
    model_args: ModelArgs = section(ModelArgs, description="Which model the worker loads and how.")
    training_args: TrainingArgs = section(
        TrainingArgs, description="learning_rate, weight_decay, warmup_steps, batch sizes, ...")
    data_args: DataArgs = section(DataArgs, optional=True,
                                         description="Data files and chat template (configure under actor_train).")
    generating_args: GeneratingArgs = section(
        GeneratingArgs, optional=True, description="Sampling parameters (configure under actor_infer).")
    strategy_args: StrategyArgs = param(  # type: ignore[valid-type]
        None, description="The strategy (`strategy_name`) and its options (`strategy_config`). Unset: the worker has "
                          "no model (rule-based reward workers); ROLL refuses an explicit null.")
    world_size: int = param(
        None, description="Number of workers. Derived as len(device_mapping) / num_gpus_per_worker when "
                          "device_mapping is set (ROLL overwrites the value); needed for CPU-only workers.", ge=1)
    device_mapping: list[int] | str = param(
        None, description="GPU ids the worker uses, written as `list(range(0,16))`, `list(range(0,16,2))` or "
                          "`[0, 1, 2]` (a string ROLL evaluates; rlcfg parses it and never evaluates it). A YAML "
                          "list is accepted by rlcfg, but ROLL's eval() rejects it. Unset: the worker runs on CPU "
                          "(ROLL refuses an explicit null).",
        examples=["list(range(0,8))"])
    num_gpus_per_worker: int = param(
        1, description="GPUs per worker. ROLL's Configuration Guide: applies to actor_infer only. ROLL forces 1 for "
                       "training and "
                       "megatron/fsdp2 strategies, sets tp × pp for vLLM, and keeps the value for SGLang and "
                       "hf_infer.", ge=1)
    model_update_frequency: int = param(1, description="Frequency of model updates.", ge=1)
    infer_batch_size: int = param(16, description="Batch size for inference or computing log-probs.", ge=1)
    backend_timeout: int = param(30, description="Timeout of the distributed backend, in minutes.", ge=1)
    system_envs: dict[str, str] = param(
        {}, description="Environment variables of this worker's processes, set before each process starts; they "
                        "win over the pipeline's system_envs. Values are strings (quote numbers: `'1'`), as ROLL "
                        "hands them to Ray's runtime_env. Roles that rlcfg runs in one process (a colocated actor "
                        "and rollout, for one) get processes of their own when their variables differ.")
    topr_positive_weight: float = param(1.0, description="Weight of positive samples in the TOPR loss.")
    topr_negative_weight: float = param(1.0, description="Weight of negative samples in the TOPR loss.")
    max_concurrency: int = param(
        1, description="Ray max_concurrency of the worker actor; for actor_infer ROLL raises it to at least "
                       "max(max_running_requests + 1, 1000).", ge=1)
    use_dynamic_batching_in_train: bool = param(
        False, description="Group sequences of similar length into training micro-batches (needs "
                           "max_tokens_per_microbatch_in_train).")
    max_tokens_per_microbatch_in_train: int = param(
        0, description="Token budget of a training micro-batch with dynamic batching (suggested: sequence_length "
                       "× 2 × micro-batch size).", ge=0)
    sequence_length_round_in_train: int = param(4, description="Round padded lengths up to this multiple (train).",
                                                ge=1)
    use_dynamic_batching_in_infer: bool = param(
        False, description="Dynamic batching for inference (needs max_tokens_per_microbatch_in_infer).")
    max_tokens_per_microbatch_in_infer: int = param(
        None, description="Token budget of an inference micro-batch with dynamic batching.", ge=1)
    sequence_length_round_in_infer: int = param(4, description="Round padded lengths up to this multiple (infer).",
                                                ge=1)
    offload_nccl: bool = param(False, description="Offload NCCL buffers to save GPU memory; ROLL at HEAD forces it "
                                                  "off.")
    use_sequence_packing: bool = param(
        False, description="Pack several sequences into one to remove padding (Megatron strategy only).")
    sequence_packing_args: SequencePackingArgs = section(SequencePackingArgs,
                                                         description="Sequence packing options.")
    logits_in_fp32: bool = param(False, description="Force the logits to float32.")
    apply_loss_scale: bool = param(
        True, description="Multiply the loss by the number of micro-batches per step (DP × GA) so that gradients "
                          "equal those of the whole global batch.")
    router_replay: RouterReplay = section(RouterReplay, description="MoE router replay (newer ROLL).")
    mtp_training_mode: Literal["disabled", "standalone", "joint"] | None = param(
        "disabled", description="Multi-token-prediction training mode (newer ROLL).")
    opd_kl_coef: float | None = param(
        None, description="On-policy distillation: KL coefficient of this teacher; null means 1.0.")
    tag_included: list[str] = param(
        [], description="Dataset tags this worker serves (reward workers score them; OPD teachers are routed "
                        "them); empty: all tags.")


_BATCHING = inert("how samples are grouped into micro-batches (memory and speed): the loss is the same; rlcfg "
                   "plan uses it for the memory estimate")
declare_fates(Worker,
       worker_cls=HONORED, model_args=HONORED, training_args=HONORED, data_args=HONORED, generating_args=HONORED,
       strategy_args=HONORED, world_size=HONORED, device_mapping=HONORED, num_gpus_per_worker=HONORED,
       infer_batch_size=HONORED, use_sequence_packing=_BATCHING, use_dynamic_batching_in_train=_BATCHING,
       name=inert("ROLL names its standard workers itself; the name labels logs"),
       # ROLL reads these of actor_train only, for its ActorPGWorker, and so does rlcfg (on the other workers
       # neither reads them); roll/run-refusals refuses the variants rlcfg does not run.
       pg_variant=HONORED,
       model_update_frequency=inert("the RLVR pipeline reads it nowhere (only the agentic one does)"),
       backend_timeout=PERF, max_concurrency=PERF, offload_nccl=PERF, logits_in_fp32=PERF,
       system_envs=HONORED,
       topr_positive_weight=HONORED, topr_negative_weight=HONORED,
       max_tokens_per_microbatch_in_train=_BATCHING, sequence_length_round_in_train=_BATCHING,
       use_dynamic_batching_in_infer=_BATCHING, max_tokens_per_microbatch_in_infer=_BATCHING,
       sequence_length_round_in_infer=_BATCHING, sequence_packing_args=_BATCHING,
       apply_loss_scale=refused("rlcfg always scales each micro-batch's loss to its share of the global batch"),
       router_replay=SECTION,
       mtp_training_mode=refused("rlcfg trains no multi-token-prediction layers"),
       opd_kl_coef=inert("only read by on-policy distillation (is_pure_opd / use_opd), which rlcfg refuses"),
       tag_included=inert("routes dataset tags to reward workers; rlcfg refuses more than one reward domain"))
# before the worker subclasses, which copy these fields (RewardWorker has its own tag_included, which v0.2.1 had)


class RewardFilter(Section):
    type: Literal["no_filter", "mean_filter", "std_filter"] = param(
        "no_filter", description="Filter applied to groups by their rewards.")
    filter_args: dict[str, Any] = param({}, description="Arguments of the filter (threshold_up, threshold_down, "
                                                        "std_threshold, ...).")


declare_fates(RewardFilter, type=HONORED, filter_args=HONORED)


class RewardWorker(Worker):
    code_url: str = param(None, description="URL of the code sandbox.")
    use_local: bool = param(True, description="Run code locally instead of downloading it from code_url.")
    judge_prompt: str = param(None, description="Prompt template of an LLM judge.")
    judge_model_type: str = param(None, description="LLM judge kind: `api` or `inference`.")
    judge_model_name: str = param(None, description="Model name of an API judge.")
    judge_api_url: str = param(None, description="URL of an API judge.")
    judge_api_key: str = param(None, description="Key of an API judge.")
    format_pattern: str = param(None, description="Regular expression the answer format must match.")
    reward_type: str = param(None, description="Kind of reward (e.g. soft).")
    response_length_penalty_coef: float = param(0.0, description="Coefficient of the response-length penalty.")
    tag_included: list[str] = param([], description="Dataset tags (domains) this reward worker scores.")
    query_filter_config: RewardFilter = section(RewardFilter, description="Filtering of queries by reward.")
    response_filter_config: RewardFilter = section(RewardFilter, description="Filtering of responses by reward.")
    reward_manager_config: list[dict[str, Any]] = param([], description="Reward plug-in configuration.")


# `rewards` is a mapping of user-named workers, which the run ledger's walk does not enter: the rule
# roll/run-refusals refuses what these keys would change (several domains, a reward class rlcfg has no twin for,
# reward plug-ins).
_JUDGE = inert("only read by reward worker classes rlcfg refuses (it scores with ROLL's math rule)")
declare_fates(RewardWorker, default=_JUDGE,
       query_filter_config=HONORED,
       response_filter_config=inert("ROLL's response_filter keeps every response whatever this says"),
       tag_included=inert("routes dataset tags to reward workers; rlcfg refuses more than one reward domain"),
       format_pattern=inert("MathRuleRewardWorker computes the format reward but scores with the answer check alone"),
       reward_manager_config=refused("rlcfg runs no reward plug-ins"))


# ---- pipeline -----------------------------------------------------------------------------------------------


class DatasetFilter(Section):
    source: str | None = param(None, description="Keep only samples from this source.")
    min_difficulty: float | None = param(None, description="Lowest difficulty kept.")
    max_difficulty: float | None = param(None, description="Highest difficulty kept.")
    num_samples: int = param(0, description="Number of samples to keep; 0 keeps all.", ge=0)


class IsWeight(Section):
    enabled: bool = param(False, description="Compute the train-infer importance-sampling weight.")
    weight_type: Literal["token", "segment", "geometric", "sequence"] = param(
        "token", description="Granularity of the IS weight.")
    upper_bound: float | None = param(1.2, description="Clamp of the IS weight; null disables clamping.")
    detach: bool = param(True, description="Detach the IS weight from the graph.")


declare_fates(DatasetFilter, default=refused("rlcfg trains on the whole dataset; it filters no samples by source or "
                                      "difficulty"))
declare_fates(IsWeight, enabled=HONORED, weight_type=HONORED, upper_bound=HONORED, detach=HONORED)


class TrainInferFilter(Section):
    enabled: bool = param(False, description="Enable this filter on the response mask.")
    agg_type: Literal["token", "segment", "geometric", "sequence"] = param(
        "token", description="Aggregation level of the filter.")
    ratio_enabled: bool = param(True, description="Filter on exp(old_logp − infer_logp).")
    ratio_low: float = param(0.8, description="Lower ratio threshold.")
    ratio_high: float = param(1.2, description="Upper ratio threshold.")
    diff_enabled: bool = param(False, description="Filter on exp(old) − exp(infer).")
    diff_low: float = param(-0.2, description="Lower diff threshold.")
    diff_high: float = param(0.2, description="Upper diff threshold.")


class TrainInferCorrection(Section):
    is_weight: IsWeight = section(IsWeight, description="Train-infer importance-sampling weight.")
    filters: list[TrainInferFilter] = param([], description="Filters applied in order to the response mask.")

declare_fates(TrainInferFilter, default=refused("rlcfg masks no tokens by their train/infer probability ratio"))
declare_fates(TrainInferCorrection, is_weight=HONORED,
       filters=refused("rlcfg masks no tokens by their train/infer probability ratio"))

class RolloutMock(Section):
    enable: bool = param(False, description="Turn the rollout dump/mock mechanism on.")
    mode: Literal["dump", "mock"] = param("dump", description="dump: save rollouts; mock: replay saved ones.")
    dump_dir: str = param("./rollout_mock_dumps", description="Where rollouts are saved and read.")


class TransferBackend(Section):
    backend_name: str = param(None, description="Name of the transfer backend.")
    backend_config: dict[str, Any] = param({}, description="Options of the transfer backend.")


class RouterArgs(Section):
    router_name: Literal["PromptAffinityRouter", "EnvAffinityRouter", "SglangRouter"] = param(
        None, description="The router: PromptAffinityRouter, EnvAffinityRouter or SglangRouter.")
    router_config: dict[str, Any] = param({}, description="Options of the router.")
    max_running_requests: int = param(128, description="Concurrent requests the router admits.", ge=1)


declare_fates(RolloutMock, enable=refused("rlcfg generates every rollout; it neither dumps nor replays them"),
       mode=inert("only read with enable, which rlcfg refuses"), dump_dir=LOGS)
declare_fates(TransferBackend, default=PERF)
declare_fates(RouterArgs, default=inert("how generation requests are spread over the rollout engines: each prompt's samples "
                                 "are drawn from the same policy"))


class _BaseRoot(Section):
    """The keys every ROLL pipeline shares (`BaseConfig` with `ScheduleConfig`)."""

    hydra: dict[str, Any] | None = param(None, description="Hydra's own settings (run.dir, output_subdir); not "
                                                            "read by ROLL.")
    exp_name: str = param("default", description="Name of the experiment (ROLL's default is the start script's "
                                                 "name); appended to logging_dir and the tensorboard log_dir.")
    seed: int = param(42, description="Random seed; ROLL copies it into every worker's training_args.seed.")
    rpc_timeout: int = param(3600, description="Timeout of RPC calls, in seconds.", ge=1)
    output_dir: str = param("./output", description="Where checkpoints and outputs are written.")
    logging_dir: str = param("./output/logs", description="Log directory; ROLL appends exp_name.")
    rollout_dump_dir: str = param(None, description="Save actor_infer rollouts to this directory.")
    track_with: str = param(
        "tensorboard", description="Experiment tracker: tensorboard, wandb, stdout, swanlab or trackio (ROLL's "
                                   "tracker registry); empty for none. ROLL checks the name only when the pipeline "
                                   "starts.")
    tracker_kwargs: dict[str, Any] = param({}, description="Keyword arguments of the tracker (project, log_dir, "
                                                           "...).")
    max_steps: int = param(500, description="Total pipeline steps; the RLVR pipeline needs > 0.")
    save_steps: int = param(50, description="Save a checkpoint every this many steps.", ge=1)
    max_ckpt_to_keep: int = param(0, description="Checkpoints to keep; 0 keeps all.", ge=0)
    logging_steps: int = param(1, description="Log every this many steps.", ge=1)
    eval_steps: int = param(10, description="Evaluate every this many steps. The agentic pipeline skips "
                                            "validation when it is 0 or less; RLVR divides the step by it.")
    rollout_batch_size: int = param(
        128, description="Prompts per rollout batch. The samples per step are rollout_batch_size × "
                         "num_return_sequences_in_group.", ge=1)
    val_batch_size: int = param(128, description="Prompts per validation batch.")
    local_rank: int = param(-1, description="Local rank for distributed training; -1 if not applicable.")
    resume_from_checkpoint: bool | str = param(
        False, description="Resume from the last checkpoint in output_dir (true) or from this path / MOS URI.")
    checkpoint_config: dict[str, Any] = param(
        {}, description="Checkpoint upload settings (type, output_dir, ...), copied into every worker. With "
                        "type: file_system ROLL appends a timestamp to output_dir.")
    prompt_length: int | None = param(1024, description="Maximum prompt length (padded).", ge=1)
    response_length: int | None = param(
        None, description="Maximum response length. ROLL sets sequence_length = prompt_length + response_length "
                          "when sequence_length is unset, then clears response_length.", ge=1)
    sequence_length: int | None = param(None, description="Maximum prompt + response length.", ge=1)
    val_prompt_length: int | None = param(None, description="Validation prompt length; set it together with "
                                                            "val_sequence_length (both default to the train "
                                                            "values).", ge=1)
    val_sequence_length: int | None = param(None, description="Validation sequence length; set it together with "
                                                              "val_prompt_length.", ge=1)
    profiler_timeline: bool = param(False, description="Record a timeline profile (not with profiler_memory).")
    profiler_memory: bool = param(False, description="Record a memory profile (not with profiler_timeline).")
    report_length_and_rewards: bool = param(False, description="Report lengths and rewards of the prompts.")
    is_offload_states: bool = param(False, description="Offload model states to CPU between operations.")
    is_offload_optimizer_states_in_train_step: bool = param(
        False, description="Offload optimizer states to CPU during forward/backward.")
    length_profiler_dir: str = param("./output/profiler", description="Where length/reward metrics are written.")
    profiler_output_dir: str = param("./output/profiler", description="Where profiler logs are written.")
    system_envs: dict[str, str] = param(
        {}, description="Environment variables of every worker's processes: merged into each worker's "
                        "system_envs (the worker's own values win). Values are strings (quote numbers: `'1'`): "
                        "ROLL puts them in os.environ as it loads the config, which takes nothing else.")
    model_update_buffer_size_mb: int = param(1024, description="Buffer for model updates, in MB.", ge=1)
    num_nodes: int = param(
        1, description="Number of nodes. ROLL ignores the value and derives it from the highest GPU id in any "
                       "device_mapping and num_gpus_per_node; rlcfg uses it to check that the mappings fit.", ge=1)
    num_gpus_per_node: int = param(
        8, description="GPUs per node. ROLL (at HEAD) overwrites it with the GPU count of the driver node.", ge=1)
    model_download_type: str | None = param(None, description="Where models are downloaded from (MODELSCOPE, "
                                                              "HUGGINGFACE_HUB).")
    generate_opt_level: Literal[0, 1] = param(
        1, description="0: batch generate interface; 1: the request scheduler (needed by async generation).")
    is_num_return_sequences_expand: bool = param(
        False, description="Replicate each prompt num_return_sequences times instead of asking for n samples.")
    max_running_requests: int = param(128, description="Maximum concurrent generation requests.", ge=1)
    is_use_additional_prompts: bool = param(False, description="Generate for extra prompts beyond the batch.")
    max_additional_running_prompts: int = param(16, description="Extra prompts beyond rollout_batch_size.", ge=0)
    base_dir: str = param("./output", description="Base folder of the run's outputs.")
    otlp_output_dir: str = param("./output/otlp", description="Where OpenTelemetry traces are written.")
    rollout_mock: RolloutMock | None = section(
        RolloutMock, optional=True, description="Dump rollouts, or replay dumped ones, to compare precision between "
                                                "runs.")
    transfer_backend: TransferBackend | None = section(
        TransferBackend, optional=True, description="The backend that moves tensors between workers (name and "
                                                    "options).")
    user_defined_rollout_loop_cls: str = param(
        "roll.distributed.scheduler.user_defined_rollout_loop.UserDefinedRolloutLoop",
        description="Dotted path of the rollout loop class the scheduler runs.")
    router_args: RouterArgs = section(
        RouterArgs, optional=True, description="How generation requests are routed to rollout engines; null: the "
                                               "pipeline's default router (PromptAffinityRouter for RLVR, "
                                               "EnvAffinityRouter for agentic).")


declare_fates(_BaseRoot,
       exp_name=HONORED, seed=HONORED, output_dir=HONORED, logging_dir=HONORED, track_with=HONORED,
       tracker_kwargs=HONORED, max_steps=HONORED, save_steps=HONORED, max_ckpt_to_keep=HONORED, eval_steps=HONORED,
       rollout_batch_size=HONORED, resume_from_checkpoint=HONORED, prompt_length=HONORED, response_length=HONORED,
       sequence_length=HONORED, val_prompt_length=HONORED, val_sequence_length=HONORED, num_gpus_per_node=HONORED,
       hydra=inert("Hydra's own settings; ROLL does not read them"),
       rpc_timeout=PERF, rollout_dump_dir=LOGS, logging_steps=LOGS, local_rank=PERF,
       val_batch_size=inert("how validation prompts are batched: each prompt's responses are the same"),
       checkpoint_config=inert("where checkpoints are uploaded: nothing computed changes"),
       profiler_timeline=LOGS, profiler_memory=LOGS, report_length_and_rewards=LOGS, length_profiler_dir=LOGS,
       profiler_output_dir=LOGS, base_dir=LOGS, otlp_output_dir=LOGS,
       is_offload_states=PERF, is_offload_optimizer_states_in_train_step=PERF, model_update_buffer_size_mb=PERF,
       system_envs=HONORED,
       num_nodes=inert("ROLL ignores it and counts nodes from the device mappings, as rlcfg does"),
       model_download_type=inert("where models are downloaded from: the weights are the same"),
       generate_opt_level=PERF,
       is_num_return_sequences_expand=inert("n samples of a prompt, or the prompt n times: the same distribution"),
       max_running_requests=PERF,
       is_use_additional_prompts=refused("rlcfg generates exactly rollout_batch_size prompts per step; it starts "
                                         "no extra prompts to keep the ones that finish first"),
       max_additional_running_prompts=inert("only read with is_use_additional_prompts, which rlcfg refuses"),
       rollout_mock=SECTION, transfer_backend=SECTION, router_args=SECTION,
       user_defined_rollout_loop_cls=refused("rlcfg runs its own rollout loop"))


class _PpoRoot(_BaseRoot):
    """`PPOConfig`: the workers and the algorithm the RLVR and agentic pipelines share."""

    pretrain: str = param(None, description="Model for actor_train, actor_infer and reference (used unless "
                                                   "all three set model_args.model_name_or_path).")
    reward_pretrain: str = param(None, description="Model for the critic when it sets no model path.")
    actor_train: Worker = section(Worker, description="The policy's training worker.")
    actor_infer: Worker = section(Worker, description="The policy's rollout worker (vllm or sglang).")
    critic: Worker = section(Worker, description="The critic's worker (used with adv_estimator: gae).")
    reference: Worker = section(Worker, description="The reference model's worker (used when the KL is on).")
    reward: Worker = section(Worker, description="A reward-inference worker (PPOConfig; RLVR uses `rewards`).")
    async_generation_ratio: float = param(
        0, description="How far generation may run ahead of training; 0 is synchronous, otherwise >= 1.", ge=0)
    ppo_epochs: int = param(1, description="Optimisation epochs per batch of samples.", ge=0)
    max_grad_norm: float = param(1.0, description="Gradient clipping norm.", gt=0)
    l2: float = param(0.0, description="L2 regularisation.", ge=0)
    lambd: float = param(0.95, description="GAE lambda.", ge=0, le=1)
    gamma: float = param(1, description="Discount factor.", ge=0, le=1)
    pg_clip: float | None = param(0.2, description="PPO policy-loss clip range.", ge=0)
    use_pg_clip_range: bool = param(False, description="Use pg_clip_low / pg_clip_high instead of pg_clip.")
    pg_clip_low: float | None = param(0.2, description="Lower PPO clip range.", ge=0)
    pg_clip_high: float | None = param(0.2, description="Upper PPO clip range.", ge=0)
    value_clip: float | None = param(None, description="Clip range of the value loss.", ge=0)
    kl_penalty: Literal["kl", "abs", "mse", "full"] = param("kl", description="KL estimator.")
    target_kl: float | None = param(None, description="Target KL of the adaptive KL controller.")
    init_kl_coef: float = param(
        0.2, description="Initial KL coefficient. Above 0 it turns on the reference model (and old-logprob "
                         "recomputation); set 0 to run without one.", ge=0)
    kl_horizon: int = param(10000, description="Horizon of the adaptive KL controller.", ge=1)
    use_reward_scaling: bool = param(False, description="Scale rewards.")
    add_len_reward: bool = param(False, description="Add a length reward.")
    reward_clip: float = param(None, description="Clamp the normalised reward (after norm_mean_type / norm_std_type, "
                                                 "or GRPO's group normalisation) to ±reward_clip, and the token "
                                                 "rewards once more after the KL penalty.", ge=0)
    use_reward_norm: bool = param(False, description="Normalise rewards (with use_reward_scaling).")
    whiten_rewards: bool = param(False, description="Whiten the token rewards (after the KL penalty) over the batch "
                                                    "before computing advantages.")
    whiten_advantages: bool = param(False, description="Whiten the advantages.")
    advantage_clip: float = param(None, description="Clamp the final advantages (after any whitening) to "
                                                    "±advantage_clip.", ge=0)
    adv_estimator: Literal["gae", "reinforce", "grpo", "gigpo", "step_reinforce", "agentic_reinforce"] = param(
        "gae", description="Advantage estimator; `gae` needs the critic.")
    norm_mean_type: Literal["batch", "group", "running"] | None = param(
        None, description="Reward normalisation mean: batch, group (per prompt), running, or null (none).")
    norm_std_type: Literal["batch", "group", "running"] | None = param(
        None, description="Reward normalisation std: batch, group, running, or null (none).")
    add_token_level_kl: bool = param(False, description="Add a token-level KL penalty to the reward.")
    critic_warmup: int = param(0, description="Steps that train only the critic.", ge=0)
    use_kl_loss: bool = param(False, description="Add a KL loss (turns on the reference model).")
    kl_loss_coef: float = param(0, description="Coefficient of the KL loss.", ge=0)
    entropy_loss_coef: float = param(0, description="Coefficient of the entropy loss.")
    loss_agg_mode: Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean",
                           "seq-mean-token-sum-norm"] = param("seq-mean-token-mean",
                                                              description="How token losses are aggregated.")
    dual_clip_loss: bool = param(False, description="Use the dual-clip PPO loss.")
    enable_reference: bool = param(
        False, description="Run the reference worker; ROLL turns it on when use_kl_loss or init_kl_coef > 0.")
    enable_old_logprobs_recompute: bool = param(
        False, description="Recompute old log-probs with actor_train; ROLL turns it on when there are several "
                           "backward steps per rollout, init_kl_coef > 0, or adv_estimator is gigpo / "
                           "step_reinforce.")
    force_disable_old_logprobs_recompute: bool = param(
        False, description="Never recompute old log-probs (wins over enable_old_logprobs_recompute).")
    train_infer_correction: TrainInferCorrection = section(
        TrainInferCorrection, description="Off-policy correction between the training and inference engines.")
    # On-policy distillation (OPD): a teacher's KL replaces (is_pure_opd) or adds to (use_opd) the reward.
    is_pure_opd: bool = param(
        False, description="Pure on-policy distillation: student_train/student_infer become the actor and the teacher "
                           "the reference; ROLL then sets gamma 0, adv_estimator reinforce and no KL loss. The OPD "
                           "start script sets it.")
    use_opd: bool = param(False, description="Add a teacher-KL term to the external reward (mixed OPD); "
                                             "`reference` must then stay unset.")
    pure_opd_pipeline_type: Literal["rlvr", "agentic"] = param(
        "rlvr", description="Which pipeline the OPD start script runs (RLVR or agentic).")
    opd_kl_coef: float = param(1.0, description="Weight of the teacher-KL term of on-policy distillation (v0.2.1; "
                                                "later releases set it per worker).",
                               fate=inert("only read by on-policy distillation (is_pure_opd / use_opd), which rlcfg "
                                          "refuses"))
    # ROLL's default is an unconfigured worker; rlcfg leaves it unset, because a default of either shape would be
    # merged into the user's mapping of the other shape.
    teacher: dict[str, Worker] | Worker = param(
        None, description="The OPD teacher: one worker, or several by name (each may set tag_included to route "
                          "domains to it).")
    student_train: Worker = section(Worker, description="Pure OPD: the student's training worker "
                                                        "(becomes actor_train).")
    student_infer: Worker = section(Worker, description="Pure OPD: the student's rollout worker "
                                                        "(becomes actor_infer).")

    @model_validator(mode="after")
    def _pure_opd_roles(self) -> "_PpoRoot":
        # PPOConfig._handle_opd_mapping: in pure OPD (which examples/start_onpolicy_distill_pipeline.py switches
        # on) ROLL runs student_train as actor_train, student_infer as actor_infer and the (first) teacher as the
        # reference, so the placement and batch rules must see those workers. When a piece is missing the rule
        # `roll/opd` reports it and nothing is remapped.
        if not self.is_pure_opd and not self.use_opd and not configured(self.actor_infer) \
                and configured(self.student_train) and configured(self.student_infer):
            # Student roles and no actor_infer: only the OPD start script runs such a config, and it forces
            # is_pure_opd (start_onpolicy_distill_pipeline.py), which its example configs therefore never write.
            self.is_pure_opd = True
        if not self.is_pure_opd or self.use_opd:
            return self
        teacher = next(iter(self.teacher.values()), None) if isinstance(self.teacher, dict) else self.teacher
        # (None: no teacher written)
        if teacher is None or not all(configured(w) for w in (teacher, self.student_train, self.student_infer)):
            return self
        self.actor_train, self.actor_infer, self.reference = self.student_train, self.student_infer, teacher
        self.enable_reference = True
        return self


_ONLY_OPD = inert("only read by on-policy distillation (is_pure_opd / use_opd), which rlcfg refuses")
declare_fates(_PpoRoot,
       pretrain=HONORED, reward_pretrain=HONORED, actor_train=HONORED, actor_infer=HONORED, critic=SECTION,
       reference=HONORED, ppo_epochs=HONORED, max_grad_norm=HONORED, lambd=HONORED, gamma=HONORED, pg_clip=HONORED,
       use_pg_clip_range=HONORED, pg_clip_low=HONORED, pg_clip_high=HONORED, value_clip=HONORED, kl_penalty=HONORED,
       init_kl_coef=HONORED, reward_clip=HONORED, whiten_rewards=HONORED, whiten_advantages=HONORED,
       advantage_clip=HONORED, adv_estimator=HONORED, norm_mean_type=HONORED, norm_std_type=HONORED,
       add_token_level_kl=HONORED, use_kl_loss=HONORED, kl_loss_coef=HONORED, entropy_loss_coef=HONORED,
       loss_agg_mode=HONORED, dual_clip_loss=HONORED, enable_reference=HONORED, train_infer_correction=HONORED,
       reward=inert("the RLVR pipeline scores with `rewards`; PPOConfig's reward worker is not started"),
       async_generation_ratio=HONORED,
       l2=NOWHERE, use_reward_scaling=NOWHERE, add_len_reward=NOWHERE, use_reward_norm=NOWHERE,
       # The driver carries the adaptive controller's coefficient from step to step and in checkpoints.
       target_kl=HONORED, kl_horizon=HONORED,
       critic_warmup=refused("rlcfg trains the actor from the first step; it has no critic-only warm-up steps"),
       enable_old_logprobs_recompute=inert("the old log-probs are the policy's before the update either way "
                                           "(recomputed, or taken from the first forward pass); rlcfg recomputes "
                                           "them when the update is not on-policy"),
       force_disable_old_logprobs_recompute=inert("the old log-probs are the policy's before the update either way "
                                                  "(recomputed, or taken from the first forward pass)"),
       is_pure_opd=refused("rlcfg runs no on-policy distillation: its runtime has no teacher-KL reward"),
       use_opd=refused("rlcfg runs no on-policy distillation: its runtime has no teacher-KL reward"),
       pure_opd_pipeline_type=_ONLY_OPD, teacher=_ONLY_OPD, student_train=_ONLY_OPD, student_infer=_ONLY_OPD)


class RollConfig(_PpoRoot):
    """An RLVR pipeline config (`examples/start_rlvr_pipeline.py`: RLVRConfig)."""

    num_return_sequences_in_group: int = param(
        1, description="Responses generated per prompt (the GRPO group). The training samples per step are "
                       "num_return_sequences_in_group × rollout_batch_size.", ge=1)
    global_template: str = param(None, description="Chat template for every worker.")
    dataset_filter: DatasetFilter = section(DatasetFilter, description="Filter the dataset by source and "
                                                                       "difficulty.")
    save_logging_board_dir: str = param(None, description="Where logging-board metrics are saved.")
    validation: Worker = section(Worker, optional=True,
                                        description="Validation generation settings (data_args, generating_args).")
    rewards: dict[str, RewardWorker] = param({}, description="Reward workers by domain name; each scores the "
                                                             "samples whose tag is in its tag_included.")
    reward_model: Worker | None = section(Worker, optional=True,
                                          description="A shared reward-model cluster (newer ROLL).")
    difficulty_loss_weight: bool = param(False, description="Weight the loss by difficulty.")
    length_loss_weight: bool = param(
        False, description="Weight each sample's policy loss by 1.5 − its normalised length within the micro-batch "
                           "(shorter responses weigh more), rescaled to mean 1.")
    postive_loss_coef: float = param(0, description="Coefficient of the SFT loss on positive samples (ROLL's "
                                                    "spelling).")
    use_topr_neg_loss_coef: float = param(0.0, description="Coefficient of the TOPR negative loss.")
    use_policy_loss_type: Literal["PPO", "PG"] = param("PPO", description="PPO or plain policy-gradient loss.")
    use_topr_loss: bool = param(False, description="Use the TOPR loss.")
    rl_loss_coef: float = param(1.0, description="Multiplies the policy loss plus the KL loss (not the entropy "
                                                 "bonus).")
    importance_sampling: Literal["token", "seq"] = param(
        "token", description="The PPO ratio per token, or per sequence (`seq`: exp of the mean log-ratio, GSPO).")
    val_greedy: bool = param(False, description="Decode greedily during validation.")
    val_n_sample: int = param(1, description="Samples per validation prompt.", ge=1)
    max_len_mask: bool = param(False, description="Leave out of the loss the responses exactly as long as the "
                                                  "response limit.")
    mask_type: Literal["all", "loss"] = param("loss", description="What the masks apply to.")
    difficulty_mask: bool = param(False, description="Leave out of the loss the groups whose mean score is not "
                                                     "strictly between difficulty_low_threshold and "
                                                     "difficulty_high_threshold.")
    balance_length: bool = param(False, description="Balance response lengths across ranks.")
    minibatch_data_iter_num: int = param(1, description="Data iterations per mini-batch.", ge=1)
    difficulty_low_threshold: float = param(0.0, description="Lower difficulty threshold of difficulty_mask.")
    difficulty_high_threshold: float = param(1.0, description="Upper difficulty threshold of difficulty_mask.")
    error_max_len_clip: bool = param(False, description="Keep in the loss only samples scored 1, and samples scored "
                                                        "0 shorter than error_max_len_threshold.")
    error_max_len_threshold: int = param(9999999999, description="Length threshold of error_max_len_clip.")
    tag_to_template: dict[str, str] = param(
        {}, description="Chat template by dataset tag; tags not listed use global_template. Each name must be a "
                        "template ROLL registers.")
    # Written by ROLL's examples but read by nothing: v0.1.0 declares them, later releases drop them.
    reward_norm: Any = param(None, description="Written by older ROLL examples; v0.1.0 declares it and reads "
                                               "nothing (no effect).")
    reward_shift: bool | None = param(None, description="Written by older ROLL examples; v0.1.0 declares it and "
                                                        "reads nothing (no effect).")
    reward_scale: bool | None = param(None, description="Written by older ROLL examples; v0.1.0 declares it and "
                                                        "reads nothing (no effect).")


declare_fates(RollConfig,
       num_return_sequences_in_group=HONORED, validation=HONORED, rewards=HONORED, length_loss_weight=HONORED,
       rl_loss_coef=HONORED, importance_sampling=HONORED, val_greedy=HONORED, max_len_mask=HONORED,
       difficulty_mask=HONORED, difficulty_low_threshold=HONORED, difficulty_high_threshold=HONORED,
       error_max_len_clip=HONORED, error_max_len_threshold=HONORED,
       global_template=HONORED, tag_to_template=HONORED, dataset_filter=SECTION, save_logging_board_dir=LOGS,
       reward_model=refused("rlcfg scores with the rule reward workers of `rewards`; it starts no shared "
                            "reward-model cluster"),
       difficulty_loss_weight=unread("ROLL never applies it: ActorWorker.compute_sample_weights turns the data's "
                                    "`difficulty` column, which ROLL keeps as an object array (DataProto requires "
                                    "one), into a tensor, which torch refuses; ROLL logs a warning and goes on "
                                    "without the weight"),
       postive_loss_coef=NOWHERE, use_topr_neg_loss_coef=NOWHERE, use_policy_loss_type=NOWHERE,
       use_topr_loss=NOWHERE, val_n_sample=NOWHERE, mask_type=NOWHERE, balance_length=NOWHERE,
       minibatch_data_iter_num=NOWHERE,
       reward_norm=inert("ROLL reads nothing of it (v0.1.0 declares it; later releases drop it)"),
       reward_shift=inert("ROLL reads nothing of it (v0.1.0 declares it; later releases drop it)"),
       reward_scale=inert("ROLL reads nothing of it (v0.1.0 declares it; later releases drop it)"))


# Which releases have each field: read from ROLL's config classes at every claimed release (tools/inventory/roll.py
# --tables writes releases.json from tests/inventory/roll). A field the table does not name is in every release,
# unless a declare_releases above says otherwise (mcore_adapter's keys, which the inventories name elsewhere).
RELEASE_TABLE: dict[str, Any] = json.loads((Path(__file__).parent / "releases.json").read_text())
declare_release_table(globals(), RELEASE_TABLE["fields"])
