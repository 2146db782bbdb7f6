"""The sections of a ChatLearn config (its `GrpoConfig` dataclasses): `runtime_args`, `env_args` and the models, with
the FSDP and Megatron-core variants of `models.policy_trainer` and `models.ref_policy`, and the run ledger of every
key.
"""

# Annotations are evaluated as the classes are defined, not postponed: see `Section` in rlcfg.schema.base.
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import model_validator

from rlcfg.dialects.chatlearn.models_megatron import MegatronModelCfg
from rlcfg.schema.base import HONORED, Section, declare_fates, inert, param, refused, section

MODEL_NAMES = ("policy_trainer", "ref_policy", "policy", "reward", "rollout_manager", "partial_rollout_manager")
MAIN = ("main",)
V120 = ("1.2.0",)
# A micro-batch of 0 samples: ChatLearn main checks it against the global batch only without packing, and its data
# loader divides by it once an episode's batches are handed out.
_ZERO_MICRO_BATCH = {"main": "when its data loader has handed out the first episode's batches (ZeroDivisionError in "
                             "StreamDataset)"}


# ---- OmegaConf's conversions --------------------------------------------------------------------------------

_BOOL_WORDS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}


def _omegaconf_value(annotation: Any, value: Any) -> Any:
    """`value` as OmegaConf stores it in a dataclass field of this type: a numeric string becomes an int or float, an
    int a float, `yes`/`on`/`1` (and 0/1) a bool, and any scalar a string where a string is expected. Values of other
    shapes are left for validation to judge."""
    kinds = {a for a in (get_args(annotation) if get_origin(annotation) in (Union, type(int | None)) else (annotation,))
             if a in (int, float, bool, str)}
    if not kinds or type(value) in kinds or value is None or isinstance(value, (list, dict)):
        return value
    if isinstance(value, str):
        for kind, convert in ((int, int), (float, float)):
            if kind in kinds:
                try:
                    return convert(value)
                except ValueError:
                    pass
        if bool in kinds and value.lower() in _BOOL_WORDS:
            return _BOOL_WORDS[value.lower()]
        return value
    if bool in kinds and type(value) is int and value in (0, 1):
        return bool(value)
    if float in kinds and type(value) is int:
        return float(value)
    if str in kinds and isinstance(value, (int, float, bool)):
        return str(value)
    return value


class OmegaConfTyped(Section):
    """A section ChatLearn hands to OmegaConf as a typed dataclass (runtime_args, env_args, models.policy, reward, the
    rollout managers). OmegaConf converts a written value to the field's type where it can (`"8"` to 8, `yes` to
    true, 8 to "8"), so ChatLearn accepts those; rlcfg does the same conversions before it checks types. The
    trainer and reference sections are untyped in OmegaConf and ChatLearn builds them without conversion, so they
    stay strict."""

    @model_validator(mode="before")
    @classmethod
    def _omegaconf_conversions(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for name, info in cls.model_fields.items():
            key = info.alias or name
            if key in out:
                out[key] = _omegaconf_value(info.annotation, out[key])
        return out


# ---- runtime_args and env_args ------------------------------------------------------------------------------


class LogArgs(OmegaConfTyped):
    log_dir: str = param(description="Directory for ChatLearn's log files. ChatLearn has no default: it must be set "
                                     "(its templates write `${runtime_args.output_dir}`).")
    enable_tensorboard: bool = param(False, description="Write TensorBoard event files.")
    tensorboard_dir: str | None = param(
        None, description="Where TensorBoard files go; when null ChatLearn uses `<log_dir>/tensorboard`.")
    enable_wandb: bool = param(False, description="Log metrics to Weights & Biases. The job's machine must be logged in "
                                                 "(`wandb login` or WANDB_API_KEY).")
    wandb_project: str | None = param(None, description="Weights & Biases project name.")
    wandb_dir: str | None = param(None, description="Directory for Weights & Biases files; when null ChatLearn uses "
                                                    "`<log_dir>/wandb`.")
    wandb_name: str | None = param(None, description="Weights & Biases run name.")
    wandb_id: str | None = param(None, description="Weights & Biases run id; reusing an id continues that run.")
    wandb_resume: str = param("allow", description="Weights & Biases resume mode for `wandb_id`: allow, must, never "
                                                   "or auto.")


class RuntimeArgs(OmegaConfTyped):
    train_backend: Literal["fsdp", "megatron"] = param(
        description="Training backend: `fsdp` (PyTorch FSDP) or `megatron` (Megatron-core). It also selects which "
                    "keys `models.policy_trainer` and `models.ref_policy` accept. ChatLearn has no default: it must "
                    "be set.")
    rollout_backend: str = param("vllm", description="Rollout (generation) engine: `vllm` or `sglang`.")
    task_type: str = param("chat", releases=MAIN, description="RL task: `chat` (single-turn generation) or `agent` "
                                                              "(multi-turn, async SGLang with the rollout manager).")
    use_rollout_manager: bool = param(False, releases=MAIN, description="Route rollout through "
                                                                        "`models.rollout_manager` (async SGLang only).")
    use_partial_rollout: bool = param(False, releases=MAIN, description="Partial rollout: long responses are "
                                                                        "continued over several episodes "
                                                                        "(`models.partial_rollout_manager`).")
    exp_name: str = param("CHATLEARN", description="Experiment name, used for logging metrics.")
    colocation: list[str] | list[list[str]] = param(
        [], description="Models that share the same GPUs and run one after another. A flat list is one group; a list "
                        "of lists gives several groups. Names are those under `models`.")
    concurrent_setup: bool = param(False, description="Set up the models concurrently rather than one by one.")
    debug: bool = param(False, description="Log debug information.")
    nsys: bool = param(False, description="Emit NVTX ranges for Nsight Systems profiling.")
    output_dir: str = param(description="Directory for all intermediate training results. ChatLearn has no default: "
                                        "it must be set.")
    profiler_dir: str | None = param(None, description="Directory for profiler traces.")
    data_path: str = param(description="Training data: a file or directory, or several separated by commas. Each must "
                                       "exist on the machine that runs the job. ChatLearn has no default: it must be "
                                       "set.")
    eval_data_path: str | None = param(None, description="Evaluation data path(s), comma-separated like `data_path`.")
    data_checkpoint_path: str | None = param(None, description="Where the data loader's checkpoints are saved (for "
                                                               "resuming).")
    num_episode: int = param(ge=0, description="Total number of training episodes. Each episode rolls out "
                                               "`sample_per_episode` samples and makes several weight updates. "
                                               "ChatLearn has no default: it must be set.")
    sample_per_episode: int = param(ge=1, description="Training samples per episode, across all actors (prompts × "
                                                      "`models.policy.num_inference_per_prompt`). ChatLearn has no "
                                                      "default: it must be set.")
    num_training_epoch: int = param(1, ge=1, description="Training passes over each episode's samples.")
    train_micro_batch_size: int = param(
        ge=1, description="Samples per forward/backward pass on each data-parallel rank (gradients are accumulated "
                          "over micro-batches). ChatLearn has no default: it must be set.",
        late_check=_ZERO_MICRO_BATCH)
    train_global_batch_size: int = param(
        ge=1, description="Samples per optimizer step, across all data-parallel ranks; each episode is split into "
                          "`sample_per_episode / train_global_batch_size` steps. ChatLearn has no default: it must "
                          "be set.")
    num_inference_per_prompt: int = param(
        32, ge=1, releases=MAIN,
        description="Responses per prompt as the advantage computation reads it. ChatLearn keeps this apart from "
                    "`models.policy.num_inference_per_prompt` (used by rollout and validation); the two should be "
                    "equal.")
    save_episode_interval: int = param(ge=1, description="Save a checkpoint every this many episodes. ChatLearn has no "
                                                         "default: it must be set.")
    enable_resume_training: bool = param(True, description="Resume from `data_checkpoint_path` when it holds a "
                                                           "checkpoint.")
    raw_chat: bool = param(False, releases=MAIN, description="Hand the rollout raw chat messages instead of prompt "
                                                             "token ids (agent tasks).")
    data_ratio: list[int] = param([], description="With several comma-separated data paths: how many samples of each "
                                                  "to draw per episode.")
    data_shuffle: bool = param(True, description="Shuffle the dataset in each epoch.")
    data_rerank: bool = param(True, description="Spread replicas of the same sample over different rollout actors.")
    max_replay_episode: int = param(0, ge=-1, description="Episodes kept for replay: 0 disables replay, -1 replays all.")
    replay_episode_offset: int = param(0, ge=0, description="Start replay after this many episodes.")
    consumed_samples: int = param(0, ge=0, description="Samples already consumed (set when resuming by hand).")
    max_data_ckpt_nums: int | None = param(None, ge=1, description="Keep at most this many data-loader checkpoints.")
    load_data_checkpoint_iteration: int | None = param(None, ge=0, description="Resume the data loader from this "
                                                                               "iteration's checkpoint.")
    stream_data_loader_type: str = param(
        "fixed", description="How the streaming data loader forms batches: `fixed` batches of a set size, or "
                             "`dynamic` batches that follow the samples available.")
    model_type: str = param("llm", releases=MAIN, description="Model kind: `llm`, or `vlm` for vision-language "
                                                              "models.")
    eval_episode_interval: int = param(0, ge=0, description="Evaluate every this many episodes; 0 disables "
                                                            "evaluation.")
    enable_eval_before_training: bool = param(False, description="Evaluate once before training starts.")
    bucket_size_mb_in_memory_manager: int = param(1024, ge=1, description="Bucket size (MB) of the memory manager "
                                                                          "during parameter sync; smaller lowers the "
                                                                          "peak memory.")
    cpu_schedule_strategy: str = param(
        "SPREAD", description="Ray placement of CPU-only models: PACK on one node or SPREAD over nodes.")
    policy_to_regroup_queue: str = param("global_barrier", description="How ChatLearn regroups the data queues "
                                                                       "between stages.")
    log_args_dict: LogArgs = section(LogArgs, description="Logging: log directory, TensorBoard, Weights & Biases.")


class EnvArgs(OmegaConfTyped):
    excludes: list[str] = param(["*pt", "logs", "tensorboards", ".nfs*"],
                                description="Files left out when Ray packages the working directory.")
    platform: str = param("DLC", description="Platform the job runs on.")
    pip: list[str] = param([], description="Packages Ray installs into the job's runtime environment.")
    working_dir: str | None = param(None, description="Working directory Ray ships to the workers.")
    py_modules: list[str] = param([], description="Python modules Ray ships to the workers.")


# ---- models -------------------------------------------------------------------------------------------------


class FreeGpuMemory(Section):
    offload_weights: bool = param(False, description="Move weights to CPU memory between this model's phases; needed "
                                                     "when the model shares GPUs with others (colocation).")
    free_grad_buffers: bool = param(False, description="Free gradient buffers between training phases (Megatron).")
    offload_optimizer_states: bool = param(False, description="Move optimizer states to CPU memory between training "
                                                              "phases.")


class Optimizer(Section):
    lr: float = param(2e-6, gt=0, description="Learning rate.")
    clip_grad: float = param(1.0, ge=0, description="Gradient clipping: the global gradient norm is scaled down to "
                                                    "this value.")
    weight_decay: float = param(0.01, ge=0, description="AdamW weight decay.")
    adam_beta1: float = param(0.9, ge=0, lt=1, description="AdamW beta1.")
    adam_beta2: float = param(0.95, ge=0, lt=1, description="AdamW beta2.")
    min_lr: float = param(0.0, ge=0, description="Floor of the learning-rate schedule.")


class ModelCommon(Section):
    """ChatLearn's BaseModelConfig: the keys every model section has."""

    num_gpu: int = param(0, ge=0, description="GPUs for this model in total (across all nodes).")
    num_cpu: int = param(0, ge=0, description="CPUs for this model in total (CPU-only models).")
    gpu_per_process: int | None = param(None, ge=1, description="GPUs per Ray actor.")
    cpu_per_process: int | None = param(None, ge=1, description="CPUs per Ray actor.")
    trainable: bool = param(False, description="Whether this model is trained.")
    packing: bool = param(False, description="Regroup samples into batches of at most `max_token_in_packing` tokens, "
                                             "each packed into one sequence; `generation_batch_size` and "
                                             "`train_micro_batch_size` are then ignored.")
    max_token_in_packing: int = param(32768, ge=1, description="Token budget of one packed batch.")
    generation_batch_size: int = param(1, ge=1, description="Samples per forward pass.")
    sync_frequency: int = param(1, ge=1, description="Synchronise parameters every this many updates.")
    free_gpu_memory: FreeGpuMemory = section(FreeGpuMemory, description="GPU memory freed between phases.")
    load: str | None = param(None, description="Path of the checkpoint to load.")
    seed: int = param(1234, description="Random seed.")
    replica_dp_size: int | None = param(None, ge=0, description="Data-parallel size inside one replica. ChatLearn "
                                                                "derives it from `num_gpu` and the parallel sizes and "
                                                                "overwrites a written value.")
    num_replica: int = param(1, ge=0, description="Replicas of this model. ChatLearn derives it from `num_gpu` and the "
                                                  "parallel sizes and overwrites a written value.")
    trust_remote_code: bool = param(True, releases=MAIN, description="Let the tokenizer and model run code from "
                                                                     "their checkpoint.")
    num_inference_per_prompt: int = param(32, ge=1, releases=MAIN, description="Responses per prompt (read from "
                                                                               "`models.policy`).")
    enable_thinking: bool = param(False, releases=MAIN, description="Qwen3's thinking mode in the chat template (read "
                                                                    "from `models.policy`).")
    max_prompt_tokens_length: int = param(1024, ge=1, releases=MAIN, description="Longest prompt, in tokens.")
    max_response_tokens_length: int = param(2048, ge=1, releases=MAIN, description="Longest response, in tokens.")


class TrainerCommon(ModelCommon):
    """ChatLearn's PolicyTrainerConfig."""

    optimizer: Optimizer = section(Optimizer, description="Optimizer settings.")
    entropy_coef: float = param(0.0, ge=0, description="Entropy bonus weight; above 0 adds an entropy loss.")
    kl_coef: float = param(0.0, ge=0, description="KL loss weight against the reference model; above 0 enables it.")
    pos_clip_ratio: float = param(0.2, ge=0, description="PPO clip range above 1 for positive advantages (GRPO).")
    neg_clip_ratio: float = param(0.2, ge=0, description="PPO clip range below 1 for negative advantages (GRPO).")
    diff_clip_ratio: float = param(10, ge=0, description="Clip of the importance ratio's difference term in the loss.")
    final_clip_ratio: float = param(3, ge=0, description="Final clip of the importance ratio in the loss.")
    use_group_sequence_policy: bool = param(False, description="Use GSPO (sequence-level importance ratios).")
    train_micro_batch_size: int = param(
        1, ge=1, description="Samples per forward/backward pass on each data-parallel rank. ChatLearn's batch checks "
                             "read `runtime_args.train_micro_batch_size`; keep the two equal (its templates link them).",
        late_check=_ZERO_MICRO_BATCH)


class FSDPOptions(Section):
    fsdp_size: int = param(1, ge=1, description="FSDP sharding group size. ChatLearn overwrites it with `num_gpu` "
                                                "(rlcfg warns when a written value differs).")
    ulysses_sequence_parallel_size: int = param(
        1, ge=1, description="Ulysses sequence parallelism when above 1 (Qwen3 and Qwen2.5 dense models).")
    meta_init: bool = param(False, description="Initialise on the meta device and broadcast weights from rank 0.")
    groupgemm: bool = param(False, description="Replace the sequential MoE MLP with GroupGEMM (Qwen3-MoE only).")
    use_expandable_segments: bool = param(False, description="Use expandable segments in PyTorch's CUDA allocator.")


class FSDPPolicyTrainer(TrainerCommon, FSDPOptions):
    gradient_checkpointing: bool = param(True, description="Recompute activations in the backward pass to save memory.")
    save_hf: bool = param(True, description="Also save Hugging Face format checkpoints during training.")


class FSDPRefPolicy(ModelCommon, FSDPOptions):
    pass


RecomputeGranularity = Literal["sel", "selective", "full"]


class MegatronOptions(Section):
    model_provider_module: str = param("pretrain_gpt", releases=MAIN, description="Module whose `model_provider()` "
                                                                                   "builds the Megatron-core model.")
    tensor_model_parallel_size: int = param(1, ge=1, description="Tensor parallel size.")
    pipeline_model_parallel_size: int = param(1, ge=1, description="Pipeline parallel size.")
    context_parallel_size: int = param(1, ge=1, description="Context parallel size (splits the sequence across GPUs).")
    expert_model_parallel_size: int = param(1, ge=1, description="Expert parallel size (MoE).")
    expert_tensor_parallel_size: int | None = param(None, ge=1, description="Tensor parallel size inside experts "
                                                                            "(MoE); null follows the tensor parallel "
                                                                            "size.")
    virtual_pipeline_model_parallel_size: int | None = param(
        None, ge=1, description="Virtual pipeline stages per GPU (interleaved schedule); needs pipeline parallel > 1.")
    pipeline_model_parallel_layout: str | None = param(None, releases=MAIN, description="A custom layout of layers "
                                                                                        "over pipeline stages.")
    sequence_parallel: bool = param(True, description="Megatron sequence parallelism; only meaningful with tensor "
                                                      "parallel size above 1.")
    seq_length: int | None = param(
        None, ge=1, description="Sequence length for Megatron training. In ChatLearn main it is derived: "
                                "max_prompt_tokens_length + max_response_tokens_length. ChatLearn 1.2.0 reads it and "
                                "has no default.")
    tokenizer_type: str = param("NullTokenizer", description="Megatron tokenizer type; ChatLearn's templates use "
                                                             "HuggingFaceTokenizer.")
    tokenizer_model: str | None = param(None, description="Tokenizer path for Megatron training; null uses `load`.")
    megatron_model_cfg: MegatronModelCfg = section(MegatronModelCfg, description="Model architecture (deprecated: "
                                                                                 "ChatLearn fills it from the Hugging "
                                                                                 "Face config).")
    decoder_first_pipeline_num_layers: int | None = param(
        None, ge=1, description="Layers of the first pipeline stage, when the layer count does not divide evenly.")
    decoder_last_pipeline_num_layers: int | None = param(
        None, ge=1, description="Layers of the last pipeline stage, when the layer count does not divide evenly.")
    moe_router_force_load_balancing: bool = param(False, description="Force balanced MoE routing (for benchmarking).")
    bf16: bool = param(True, description="Train in bf16; false means fp32.")
    variable_seq_lengths: bool = param(False, description="Variable sequence lengths; ChatLearn sets it to `packing`.")
    rerun_mode: str = param("disabled", releases=MAIN, description="Megatron's re-run engine mode; ChatLearn keeps it "
                                                                   "disabled.")
    use_expandable_segments: bool = param(False, releases=MAIN, description="Use expandable segments in PyTorch's "
                                                                            "CUDA allocator.")
    attention_backend: str = param("auto", releases=V120, description="Attention kernel (ChatLearn 1.2.0; main moved it "
                                                                      "to `megatron_model_cfg`).")
    async_tensor_model_parallel_allreduce: bool = param(False, releases=V120, description="Deprecated in ChatLearn "
                                                                                          "1.2.0 and unused.")
    overlap_p2p_comm: bool = param(False, releases=V120, description="Deprecated in ChatLearn 1.2.0 and unused.")
    batch_p2p_comm: bool = param(False, releases=V120, description="Deprecated in ChatLearn 1.2.0 and unused.")
    deallocate_pipeline_outputs: bool = param(False, releases=V120, description="Deprecated in ChatLearn 1.2.0 and "
                                                                                "unused.")
    attention_softmax_in_fp32: bool = param(True, releases=V120, description="Deprecated in ChatLearn 1.2.0 and "
                                                                             "unused.")


class MegatronPolicyTrainer(TrainerCommon, MegatronOptions):
    recompute_granularity: RecomputeGranularity | None = param(
        None, description="Activation recomputation: null (none), `selective` or `full`. `sel` is accepted with a "
                          "warning: Megatron-core expects `selective`.")
    recompute_method: str | None = param(None, releases=MAIN, description="With full recomputation: `uniform` or "
                                                                          "`block`.")
    recompute_num_layers: int | None = param(None, ge=1, releases=MAIN, description="Layers per recompute unit "
                                                                                    "(uniform) or per stage (block).")
    recompute_modules: list[str] | None = param(None, releases=MAIN, description="Submodules recomputed with "
                                                                                 "selective recomputation (core_attn, "
                                                                                 "moe_act, layernorm, mla_up_proj, "
                                                                                 "mlp, moe, shared_experts).")
    use_distributed_optimizer: bool = param(False, description="Shard optimizer states over data-parallel ranks.")
    no_load_optim: bool = param(True, description="Do not load the optimizer state from the checkpoint.")
    calculate_per_token_loss: bool = param(True, description="Average the loss over the batch's real tokens; "
                                                             "ChatLearn main requires true.")
    gradient_accumulation_fusion: bool = param(False, description="Fuse weight-gradient accumulation into the GEMMs "
                                                                  "(needs Megatron's CUDA extension).")
    empty_unused_memory_level: int | None = param(0, ge=0, releases=MAIN, description="How often to empty PyTorch's "
                                                                                      "CUDA cache in a step.")
    use_checkpoint_opt_param_scheduler: bool = param(True, description="Take the learning-rate schedule from the "
                                                                       "checkpoint.")
    no_load_rng: bool = param(True, description="Do not load the RNG state from the checkpoint.")
    no_load_scheduler: bool = param(True, description="Do not load the scheduler state from the checkpoint.")
    finetune: bool = param(True, description="Load for fine-tuning: no optimizer or RNG state, iteration 0.")
    distributed_timeout_minutes: int = param(10, ge=1, releases=MAIN, description="Timeout of torch.distributed "
                                                                                  "collectives, in minutes.")


class MegatronRefPolicy(ModelCommon, MegatronOptions):
    pass


class Policy(ModelCommon, OmegaConfTyped):
    """ChatLearn's PolicyConfig (with RolloutConfig): the rollout engines."""

    is_sync_mode: bool = param(True, description="Synchronous rollout; asynchronous (false) needs SGLang.")
    tensor_model_parallel_size: int = param(1, ge=1, description="Tensor parallel size of each rollout engine.")
    pipeline_model_parallel_size: int = param(1, ge=1, description="Pipeline parallel size of the rollout engine; "
                                                                   "ChatLearn supports only 1.")
    expert_model_parallel_size: int = param(1, ge=1, description="Expert parallel size of the rollout engine; "
                                                                 "ChatLearn supports only 1.")
    max_new_tokens: int | None = param(
        None, ge=1, releases=V120,
        description="ChatLearn 1.2.0: maximum response length (its default, 2048, applies when null). ChatLearn main "
                    "replaced it with `max_response_tokens_length`.")
    temperature: float = param(1.0, ge=0, description="Sampling temperature for training rollouts.")
    top_p: float = param(1.0, gt=0, le=1, description="Top-p for training rollouts.")
    top_k: int = param(-1, ge=-1, description="Top-k for training rollouts; -1 disables it.")
    presence_penalty: float = param(0.0, description="Presence penalty for training rollouts.")
    frequency_penalty: float = param(0.0, description="Frequency penalty for training rollouts.")
    repetition_penalty: float = param(1.0, gt=0, description="Repetition penalty for training rollouts.")
    eval_temperature: float = param(0.6, ge=0, description="Sampling temperature for evaluation.")
    eval_top_p: float = param(0.95, gt=0, le=1, description="Top-p for evaluation.")
    eval_top_k: int = param(20, ge=-1, description="Top-k for evaluation; -1 disables it.")
    eval_presence_penalty: float = param(0.0, description="Presence penalty for evaluation.")
    eval_frequency_penalty: float = param(0.0, description="Frequency penalty for evaluation.")
    eval_repetition_penalty: float = param(1.0, gt=0, description="Repetition penalty for evaluation.")
    vllm_prompt_key: str = param("prompt", description="Key of the prompt text in a sample, for vLLM.")
    vllm_input_ids_key: str = param("input_ids", description="Key of the prompt token ids in a sample, for vLLM.")
    max_num_batched_tokens: int = param(32768, ge=1, description="Token budget of one engine step.")
    max_seq_len_to_capture: int = param(2348, ge=1, description="Longest sequence the engine captures in CUDA graphs. "
                                                                "ChatLearn main sets it to max_prompt_tokens_length + "
                                                                "max_response_tokens_length.")
    gpu_memory_utilization: float = param(0.8, gt=0, le=1, description="Share of GPU memory the rollout engine may use "
                                                                       "(weights, activations and KV cache). Be careful "
                                                                       "when colocated.")
    enforce_eager: bool = param(False, description="Disable CUDA graphs in the rollout engine.")
    seq_length: int = param(2048, ge=1, description="Maximum sequence length of rollout (prompt and response). "
                                                    "ChatLearn main sets it to max_prompt_tokens_length + "
                                                    "max_response_tokens_length.")
    num_inference_per_prompt: int = param(32, ge=1, description="Responses generated per prompt (the GRPO group size).")
    enable_thinking: bool = param(False, description="Enable Qwen3's thinking mode in the chat template.")
    enable_stage_resume: bool = param(False, description="Resume rollout stages after a restart.")


class Reward(ModelCommon, OmegaConfTyped):
    """ChatLearn's RewardConfig: the rule-based reward actors."""


class RolloutManager(ModelCommon, OmegaConfTyped):
    use_dynamic_load_blance: bool = param(True, description="Balance requests over the rollout engines dynamically "
                                                            "(ChatLearn's spelling of the key).")
    max_concurrent_per_engine: int = param(192, ge=1, description="With dynamic balancing: most requests one engine "
                                                                  "serves at once.")


class PartialRolloutManager(ModelCommon, OmegaConfTyped):
    max_rollout_round: int = param(2, ge=1, description="Most rollout rounds one sample may take.")
    mini_response_per_prompt: int = param(16, ge=1, description="Finished responses of a prompt that send its group "
                                                                "to training.")
    rollout_ratio: list[float] = param([0.5, 0.5], description="Share of the response budget for each round; one "
                                                               "entry per round, summing to 1.")


class FSDPModels(Section):
    policy_trainer: FSDPPolicyTrainer = section(FSDPPolicyTrainer, description="The model being trained (FSDP).")
    ref_policy: FSDPRefPolicy = section(FSDPRefPolicy, description="The frozen reference model for the KL term (FSDP).")
    policy: Policy = section(Policy, description="The rollout model (vLLM or SGLang).")
    reward: Reward = section(Reward, description="The rule-based reward actors.")
    rollout_manager: RolloutManager = section(RolloutManager, releases=MAIN,
                                              description="The rollout manager (with `use_rollout_manager`).")
    partial_rollout_manager: PartialRolloutManager = section(
        PartialRolloutManager, releases=MAIN, description="The partial rollout manager (with `use_partial_rollout`).")


class MegatronModels(Section):
    policy_trainer: MegatronPolicyTrainer = section(MegatronPolicyTrainer, description="The model being trained "
                                                                                       "(Megatron-core).")
    ref_policy: MegatronRefPolicy = section(MegatronRefPolicy, description="The frozen reference model (Megatron-core).")
    policy: Policy = section(Policy, description="The rollout model (vLLM or SGLang).")
    reward: Reward = section(Reward, description="The rule-based reward actors.")
    rollout_manager: RolloutManager = section(RolloutManager, releases=MAIN,
                                              description="The rollout manager (with `use_rollout_manager`).")
    partial_rollout_manager: PartialRolloutManager = section(
        PartialRolloutManager, releases=MAIN, description="The partial rollout manager (with `use_partial_rollout`).")


class ChatLearnFSDP(Section):
    env_args: EnvArgs = section(EnvArgs, description="Ray runtime environment of the job.")
    runtime_args: RuntimeArgs = section(RuntimeArgs, description="Training-wide settings: backends, paths, batch sizes, "
                                                                 "schedule, logging.")
    models: FSDPModels = section(FSDPModels, description="The GRPO models.")


class ChatLearnMegatron(Section):
    env_args: EnvArgs = section(EnvArgs, description="Ray runtime environment of the job.")
    runtime_args: RuntimeArgs = section(RuntimeArgs, description="Training-wide settings: backends, paths, batch sizes, "
                                                                 "schedule, logging.")
    models: MegatronModels = section(MegatronModels, description="The GRPO models.")


# ---- the run ledger: what `rlcfg run` does with each key (schema/base.py Fate; schema/ledger.py) ----------------
# The model sections share ChatLearn's base classes (BaseModelConfig, PolicyTrainerConfig, ...), but a key inherited by
# several models means a different thing in each (`seed` seeds the trainer and the rollout engines, not the rule-based
# reward), so each concrete section declares the fate of each of its keys here, once. A section's `run_fate` covers
# the keys it does not name. Values `rlcfg run` refuses for a key it otherwise runs (advantage groups that outlive an
# episode) are refused by the rule chatlearn/run-refusals below.

_LOG = inert("where logs, metrics, traces or profiles go, or what the run is called; nothing computed changes")
_PERF = inert("a speed, memory or communication knob of ChatLearn's own; what is computed is the same")
_RAY = inert("how ChatLearn packs its Ray actors (GPUs or CPUs per process); rlcfg places one worker per GPU, and what "
             "is computed is the same")
_DERIVED = inert("ChatLearn derives it from num_gpu and the parallel sizes and overwrites a written value")
_FROM_POLICY = inert("ChatLearn reads this setting from models.policy only")
_TRAINABLE = inert("rlcfg trains models.policy_trainer and keeps every other model frozen, as ChatLearn's GRPO does; "
                   "the flag only selects ChatLearn's batch checks and replica layout (rlcfg warns when it is off for "
                   "the trainer or on for another model)")
_SYNC_OF_ROLLOUT = inert("ChatLearn reads the synchronisation frequency of the model that receives the weights, "
                         "models.policy")
_REMOTE_CODE = inert("whether a checkpoint's own Python code may run; the model computes the same either way, and one "
                     "that needs its own code fails to load in rlcfg rather than run differently")
_NO_PACKING_IN_ROLLOUT = inert("ChatLearn's rollout engines do not pack samples")
_TRAINER_LENGTHS = inert("ChatLearn sizes the trainer's sequences (Megatron's seq_length) from these; rlcfg sizes its "
                         "trainers from the rollout's prompt and response limits (models.policy), which bound every "
                         "sample they train on")
_FORWARD_ONLY_SEED = inert("the reference model only runs forward passes, which use no randomness")
_LAYOUT = inert("how layers are spread over pipeline stages; the model and what it computes are the same (rlcfg "
                "spreads them evenly)")
_TOKENIZER = inert("rlcfg tokenizes with the Hugging Face tokenizer of models.policy_trainer.tokenizer_model (or load)")
_DEPRECATED = inert("ChatLearn 1.2.0 marks it deprecated and never reads it")
_STATIC_GRAPH = inert("which sequence lengths the engine captures in CUDA graphs; longer ones run eagerly and generate "
                      "the same tokens")

_SINGLE_TURN = refused("rlcfg generates one response per prompt on its own engines (a chat task); ChatLearn's agent "
                       "tasks (multi-turn, tools) are not run")
_TEMPERATURE = refused("ChatLearn samples at this temperature but trains on the log-probs of the untempered logits; "
                       "rlcfg's trainers divide the logits by the sampling temperature, so the loss, the KL and the "
                       "entropy would differ (rlcfg runs ChatLearn's meaning at temperature 1.0 only)")
_STALE_WEIGHTS = refused("rlcfg hands the rollout engines the new weights after every training step; synchronising "
                         "only every n-th episode (rollout with older weights) is not run")
_TEXT_ONLY = refused("rlcfg trains text-only language models built from the checkpoint's config.json; other model "
                     "providers (vision-language) are not run")
_FORCED_ROUTING = refused("rlcfg routes MoE tokens with the model's own router; forced balanced routing (a "
                          "benchmarking aid) is not run")
_PER_TOKEN_LOSS = refused("rlcfg averages the loss over the tokens of the global batch, as ChatLearn does with "
                          "calculate_per_token_loss: true; Megatron's per-micro-batch average is not run")
_FRESH_OPTIMIZER = refused("rlcfg loads only the weights of `load` and starts the optimizer, its schedule and the "
                           "iteration count afresh, as ChatLearn's defaults do; resuming them from a Megatron "
                           "checkpoint is not run")


LogArgs.run_fate = _LOG
EnvArgs.run_fate = inert("the Ray runtime environment ChatLearn ships with its job (files, packages, working "
                         "directory); `rlcfg run` runs where it is started, and nothing computed changes")
FreeGpuMemory.run_fate = HONORED
Optimizer.run_fate = HONORED
Reward.run_fate = inert("ChatLearn's reward model is rule-based (the math answer check), run by CPU actors; rlcfg "
                        "scores with the same rule, and these keys change nothing it computes")

declare_fates(RuntimeArgs, **{
    "train_backend": HONORED, "rollout_backend": HONORED, "task_type": _SINGLE_TURN,
    # The rollout manager of a chat task sends each request to the engines on its own and deals the episode to the
    # trainer's ranks by length (Algorithm.balance_ranks_by_length); it evaluates with the training sampling.
    "use_rollout_manager": HONORED,
    # ir.PartialRollout; without the rollout manager, whose engine starts no partial rollout manager.
    "use_partial_rollout": HONORED,
    "exp_name": _LOG, "colocation": HONORED, "concurrent_setup": _PERF, "debug": _LOG, "nsys": _LOG,
    "output_dir": HONORED, "profiler_dir": _LOG, "data_path": HONORED, "eval_data_path": HONORED,
    "data_checkpoint_path": inert("where ChatLearn saves its data loader's position; rlcfg keeps the sampler's "
                                  "position in its own checkpoints"),
    "num_episode": HONORED, "sample_per_episode": HONORED, "num_training_epoch": HONORED,
    "train_micro_batch_size": HONORED, "train_global_batch_size": HONORED,
    "num_inference_per_prompt": HONORED, "save_episode_interval": HONORED, "enable_resume_training": HONORED,
    "raw_chat": refused("rlcfg renders each prompt with the tokenizer's chat template and hands its engines token ids; "
                        "raw chat messages (agent tasks) are not run"),
    "data_ratio": refused("rlcfg draws prompts uniformly from all data files together; ChatLearn's fixed number of "
                          "prompts per file and episode is not run"),
    "data_shuffle": HONORED,
    "data_rerank": inert("which rollout engine generates which replica of a prompt; the samples are the same"),
    "max_replay_episode": inert("ChatLearn's GRPO computes advantages and trains on the newest episode only, whatever "
                                "the replay window holds (AdvantageComputer reads episode_replay_buffers[-1]); rlcfg "
                                "trains each step on its own samples, which is the same (at 0 ChatLearn computes no "
                                "advantages at all, which rlcfg warns about)"),
    "replay_episode_offset": inert("it delays the replay window, and ChatLearn's GRPO reads only the newest episode of "
                                   "it; rlcfg trains each step on its own samples (before the offset ChatLearn computes "
                                   "no advantages, which rlcfg warns about)"),
    "consumed_samples": refused("rlcfg's sampler starts at the first prompt, or where its own checkpoint left off; "
                                "skipping samples by hand is not run"),
    "max_data_ckpt_nums": inert("how many data-loader checkpoints ChatLearn keeps on disk; nothing computed changes"),
    "load_data_checkpoint_iteration": refused("rlcfg resumes from its newest checkpoint that verifies (or "
                                              "--resume-from), not from an iteration of ChatLearn's data loader"),
    "stream_data_loader_type": inert("how ChatLearn's streaming loader cuts an episode's samples into batches; with "
                                     "synchronous rollout they are the same samples"),
    "model_type": _TEXT_ONLY, "eval_episode_interval": HONORED, "enable_eval_before_training": HONORED,
    "bucket_size_mb_in_memory_manager": _PERF, "cpu_schedule_strategy": _RAY, "policy_to_regroup_queue": _PERF,
    "log_args_dict": _LOG,
})

# Keys of ChatLearn's BaseModelConfig, as each model reads them.
_MODEL_COMMON = {
    "num_gpu": HONORED, "num_cpu": _RAY, "gpu_per_process": _RAY, "cpu_per_process": _RAY, "trainable": _TRAINABLE,
    "packing": HONORED, "max_token_in_packing": HONORED, "generation_batch_size": HONORED,
    "sync_frequency": _SYNC_OF_ROLLOUT, "free_gpu_memory": HONORED, "load": HONORED, "seed": HONORED,
    "replica_dp_size": _DERIVED, "num_replica": _DERIVED, "trust_remote_code": _REMOTE_CODE,
    "num_inference_per_prompt": _FROM_POLICY, "enable_thinking": _FROM_POLICY,
    "max_prompt_tokens_length": _TRAINER_LENGTHS, "max_response_tokens_length": _TRAINER_LENGTHS,
}
_TRAINER = {
    "optimizer": HONORED, "entropy_coef": HONORED, "kl_coef": HONORED, "pos_clip_ratio": HONORED,
    "neg_clip_ratio": HONORED, "diff_clip_ratio": HONORED, "final_clip_ratio": HONORED,
    "use_group_sequence_policy": HONORED,
    "train_micro_batch_size": inert("how gradients are accumulated within a global batch; ChatLearn's loss is the "
                                    "token mean over the global batch either way (rlcfg micro-batches by "
                                    "runtime_args.train_micro_batch_size)"),
}
_FSDP = {
    "fsdp_size": inert("ChatLearn overwrites it with num_gpu and shards over all of the model's GPUs, as rlcfg does"),
    "ulysses_sequence_parallel_size": HONORED,
    "meta_init": inert("how the weights reach each rank at start-up; they are the same weights"),
    "groupgemm": _PERF, "use_expandable_segments": _PERF,
}
_MEGATRON = {
    "model_provider_module": _TEXT_ONLY, "tensor_model_parallel_size": HONORED, "pipeline_model_parallel_size": HONORED,
    "context_parallel_size": HONORED, "expert_model_parallel_size": HONORED, "expert_tensor_parallel_size": HONORED,
    "virtual_pipeline_model_parallel_size": HONORED, "pipeline_model_parallel_layout": _LAYOUT,
    "sequence_parallel": HONORED,
    "seq_length": inert("ChatLearn main derives it from the prompt and response limits (rlcfg warns when a written "
                        "value differs); rlcfg sizes its trainers from the rollout's limits, which bound every sample"),
    "tokenizer_type": _TOKENIZER, "tokenizer_model": HONORED,
    "megatron_model_cfg": inert("a group of architecture settings; each of its keys declares what `rlcfg run` does "
                                "with it"),
    "decoder_first_pipeline_num_layers": HONORED, "decoder_last_pipeline_num_layers": HONORED,
    "moe_router_force_load_balancing": _FORCED_ROUTING, "bf16": HONORED,
    "variable_seq_lengths": inert("ChatLearn sets it to `packing` whatever is written"),
    "rerun_mode": _PERF, "use_expandable_segments": _PERF, "attention_backend": _PERF,
    "async_tensor_model_parallel_allreduce": _DEPRECATED, "overlap_p2p_comm": _DEPRECATED,
    "batch_p2p_comm": _DEPRECATED, "deallocate_pipeline_outputs": _DEPRECATED, "attention_softmax_in_fp32": _DEPRECATED,
}
_MEGATRON_POLICY_LOSS_ONLY = inert("ChatLearn's Megatron trainer computes this term for its metrics only and "
                                   "back-propagates the policy loss alone (train_helper.py); rlcfg does the same (and "
                                   "warns when it is set)")
declare_fates(FSDPPolicyTrainer, **{
    **_MODEL_COMMON, **_TRAINER, **_FSDP, "gradient_checkpointing": HONORED, "save_hf": HONORED,
    "use_group_sequence_policy": inert("ChatLearn's FSDP trainer always runs the GRPO loss (policy_trainer.py); rlcfg "
                                       "does the same (and warns when it is set)"),
})
declare_fates(MegatronPolicyTrainer, **{
    **_MODEL_COMMON, **_TRAINER, **_MEGATRON, "kl_coef": _MEGATRON_POLICY_LOSS_ONLY,
    "entropy_coef": _MEGATRON_POLICY_LOSS_ONLY, "recompute_granularity": HONORED, "recompute_method": _PERF,
    "recompute_num_layers": _PERF, "recompute_modules": _PERF, "use_distributed_optimizer": _PERF,
    "no_load_optim": _FRESH_OPTIMIZER, "calculate_per_token_loss": _PER_TOKEN_LOSS,
    "gradient_accumulation_fusion": _PERF, "empty_unused_memory_level": _PERF,
    "use_checkpoint_opt_param_scheduler": inert("read only when the scheduler state is loaded from the checkpoint "
                                                "(no_load_scheduler: false), which `rlcfg run` refuses"),
    "no_load_rng": inert("the RNG state of a Megatron checkpoint; ChatLearn's GRPO trains without dropout, and rlcfg "
                         "seeds from models.policy_trainer.seed"),
    "no_load_scheduler": _FRESH_OPTIMIZER, "finetune": _FRESH_OPTIMIZER, "distributed_timeout_minutes": _PERF,
})
_REFERENCE = {**_MODEL_COMMON, "seed": _FORWARD_ONLY_SEED}
declare_fates(FSDPRefPolicy, **{**_REFERENCE, **_FSDP})
declare_fates(MegatronRefPolicy, **{**_REFERENCE, **_MEGATRON, "tokenizer_model": _TOKENIZER})
declare_fates(Policy, **{
    **_MODEL_COMMON, "packing": _NO_PACKING_IN_ROLLOUT, "max_token_in_packing": _NO_PACKING_IN_ROLLOUT,
    "sync_frequency": _STALE_WEIGHTS, "num_inference_per_prompt": HONORED, "enable_thinking": HONORED,
    "max_prompt_tokens_length": HONORED, "max_response_tokens_length": HONORED,
    # ChatLearn's GRPOEngine runs the same synchronous loop either way; false only swaps SGLang's blocking Engine for
    # its AsyncEngine (AsyncSGLangModule.generate: the same batch, sampling settings and weights through
    # async_generate; with the rollout manager, generate_per_request: the same, one request at a time).
    "is_sync_mode": inert("selects SGLang's asyncio engine API; each step's batch is generated with the same weights "
                          "and sampling settings either way"),
    "tensor_model_parallel_size": HONORED,
    "pipeline_model_parallel_size": inert("ChatLearn's rollout supports only 1, which rlcfg checks"),
    "expert_model_parallel_size": inert("ChatLearn's rollout supports only 1, which rlcfg checks"),
    "max_new_tokens": inert("ChatLearn 1.2.0 declares it but never reads it: each prompt's response may take "
                            "seq_length minus the prompt's length tokens"),
    "temperature": _TEMPERATURE, "top_p": HONORED, "top_k": HONORED,
    "presence_penalty": HONORED, "frequency_penalty": HONORED, "repetition_penalty": HONORED,
    "eval_temperature": HONORED, "eval_top_p": HONORED, "eval_top_k": HONORED,
    "eval_presence_penalty": HONORED, "eval_frequency_penalty": HONORED, "eval_repetition_penalty": HONORED,
    "vllm_prompt_key": inert("names a field of ChatLearn's own sample records between its stages; ChatLearn reads the "
                             "data's `prompt` whatever it says, as rlcfg does"),
    "vllm_input_ids_key": inert("names a field of ChatLearn's own sample records between its stages; the prompts are "
                                "the same"),
    "max_num_batched_tokens": HONORED, "max_seq_len_to_capture": _STATIC_GRAPH, "gpu_memory_utilization": HONORED,
    "enforce_eager": HONORED,
    # ChatLearn 1.2.0: each prompt's limit on prompt + response (rlcfg's Sampling.max_total_length); main overwrites
    # it with max_prompt_tokens_length + max_response_tokens_length (rlcfg warns), which bounds rlcfg's run the same.
    "seq_length": HONORED,
    "enable_stage_resume": inert("ChatLearn reloads a rollout stage's saved outputs after a restart; rlcfg resumes "
                                 "from its checkpoints, which hold no half-done step, and generates the same way"),
})
declare_fates(Reward, **{"num_gpu": HONORED, "num_cpu": HONORED})
_HELPER_MODEL = inert("ChatLearn's rollout managers run on CPUs and load nothing of their own; rlcfg reads each "
                      "setting from the model that uses it")
declare_fates(PartialRolloutManager, **{
    **{key: _HELPER_MODEL for key in _MODEL_COMMON}, "num_cpu": _RAY, "cpu_per_process": _RAY,
    "max_rollout_round": inert("the rounds are rollout_ratio's entries, one each, which rlcfg checks"),
    "mini_response_per_prompt": HONORED, "rollout_ratio": HONORED,
})
declare_fates(RolloutManager, **{
    **{key: _HELPER_MODEL for key in _MODEL_COMMON},
    "num_cpu": _RAY, "cpu_per_process": _RAY,
    "use_dynamic_load_blance": inert("how the rollout manager spreads requests over the engines; every response is "
                                     "sampled with the same weights and settings either way"),
    "max_concurrent_per_engine": _PERF,
})
for _models in (FSDPModels, MegatronModels):
    declare_fates(_models, **{"policy_trainer": HONORED, "ref_policy": HONORED, "policy": HONORED, "reward": HONORED,
                       "rollout_manager": inert("how the rollout manager places itself and spreads requests; "
                                                "runtime_args.use_rollout_manager decides what it does"),
                       "partial_rollout_manager": HONORED})
for _root in (ChatLearnFSDP, ChatLearnMegatron):
    declare_fates(_root, **{"env_args": EnvArgs.run_fate, "runtime_args": HONORED, "models": HONORED})
