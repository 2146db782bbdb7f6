"""The ChatLearn dialect: `env_args`, `runtime_args` and `models.{policy_trainer, ref_policy, policy, reward, ...}`.

Spec: ChatLearn's own config dataclasses (chatlearn/configs/*.py and `GrpoConfig` in chatlearn/algorithm/grpo.py) at
the releases rlcfg claims, v1.2.0 and the newest commit ("main"); tests/inventory/chatlearn/ lists their fields.
ChatLearn's launcher hands `GrpoConfig` to Hydra as a structured config, merges the user's YAML (with the dotlist
overrides applied to it first) and builds the dataclasses, so:
- a key no dataclass has is an error everywhere. Under `runtime_args`, `env_args`, `models.policy`, `models.reward`
  and the rollout managers OmegaConf refuses it at merge; `models.policy_trainer` and `models.ref_policy` are `Any`
  there, and ChatLearn's own conversion to the backend's dataclass stops with a TypeError instead;
- a value left at OmegaConf's MISSING (`train_backend`, `output_dir`, `data_path`, `num_episode`,
  `sample_per_episode`, `train_micro_batch_size`, `train_global_batch_size`, `save_episode_interval`,
  `log_args_dict.log_dir`) must be given: the loader stops with MissingMandatoryValue;
- the training backend, `runtime_args.train_backend`, decides which dataclasses `policy_trainer` and `ref_policy`
  become (FSDP or Megatron-core), so the dialect has two roots.
The defaults are ChatLearn's dataclass defaults, not the values of its templates: a model section a user leaves
out gets 0 GPUs, as in ChatLearn.
"""

from __future__ import annotations

from math import gcd
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import model_validator

from rlcfg.schema.base import Dialect, RuleSet, Section, field_at, field_releases, param, section
from rlcfg.schema.chatlearn_megatron import MegatronModelCfg

MODEL_NAMES = ("policy_trainer", "ref_policy", "policy", "reward", "rollout_manager", "partial_rollout_manager")
MAIN = ("main",)
V120 = ("1.2.0",)


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
    num_episode: int = param(ge=1, description="Total number of training episodes. Each episode rolls out "
                                               "`sample_per_episode` samples and makes several weight updates. "
                                               "ChatLearn has no default: it must be set.")
    sample_per_episode: int = param(ge=1, description="Training samples per episode, across all actors (prompts × "
                                                      "`models.policy.num_inference_per_prompt`). ChatLearn has no "
                                                      "default: it must be set.")
    num_training_epoch: int = param(1, ge=1, description="Training passes over each episode's samples.")
    train_micro_batch_size: int = param(
        ge=1, description="Samples per forward/backward pass on each data-parallel rank (gradients are accumulated "
                          "over micro-batches). ChatLearn has no default: it must be set.")
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
                             "read `runtime_args.train_micro_batch_size`; keep the two equal (its templates link them).")


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


# ---- derived quantities -------------------------------------------------------------------------------------


def trainer_dp(cfg: Any) -> int:
    """Data-parallel size of the trainer, as ChatLearn derives it (num_replica × replica_dp_size): GPUs / Ulysses SP
    for FSDP, GPUs / (TP·CP·PP) for Megatron."""
    return _total_dp(cfg.models.policy_trainer)


def ref_dp(cfg: Any) -> int:
    """Data-parallel size of the reference model."""
    return _total_dp(cfg.models.ref_policy)


def _total_dp(m: Any) -> int:
    """ChatLearn's num_replica × replica_dp_size of a trainer or reference model (at least 1, so that rules can
    divide by it; a model without GPUs is reported by its own rule). A Megatron model that is not trainable is split
    into replicas of lcm(TP·CP, ETP·EP)·PP GPUs, where ChatLearn reads a null ETP as 1."""
    if m.num_gpu <= 0:
        return 1
    if isinstance(m, FSDPOptions):
        return max(m.num_gpu // m.ulysses_sequence_parallel_size, 1)
    tp_cp = m.tensor_model_parallel_size * m.context_parallel_size
    replicas = 1
    if not m.trainable:
        etp_ep = (m.expert_tensor_parallel_size or 1) * m.expert_model_parallel_size
        replicas = max(m.num_gpu // (tp_cp * etp_ep // gcd(tp_cp, etp_ep) * m.pipeline_model_parallel_size), 1)
    return max(replicas * (m.num_gpu // (replicas * tp_cp * m.pipeline_model_parallel_size)), 1)


def colocation_groups(cfg: Any) -> list[list[str]]:
    groups = cfg.runtime_args.colocation
    if groups and all(isinstance(g, str) for g in groups):
        return [list(groups)]
    return [list(g) for g in groups]


def response_limit(cfg: Any) -> int:
    """The longest response: `max_new_tokens` in ChatLearn 1.2.0, `max_response_tokens_length` in ChatLearn main.
    A document that sets `max_new_tokens` is a 1.2.0 document (main refuses the key)."""
    p = cfg.models.policy
    return p.max_new_tokens if p.max_new_tokens is not None else p.max_response_tokens_length


def sequence_limit(cfg: Any) -> int:
    """The longest prompt + response of rollout: `seq_length` as written in ChatLearn 1.2.0; ChatLearn main overwrites
    it with max_prompt_tokens_length + max_response_tokens_length."""
    p = cfg.models.policy
    if p.max_new_tokens is not None:
        return p.seq_length
    return p.max_prompt_tokens_length + p.max_response_tokens_length


def prompt_limit(cfg: Any) -> int:
    p = cfg.models.policy
    if p.max_new_tokens is not None:
        return max(p.seq_length - p.max_new_tokens, 1)
    return p.max_prompt_tokens_length


# ---- rules --------------------------------------------------------------------------------------------------

rules = RuleSet()
RT = "runtime_args"
PT = "models.policy_trainer"
REF = "models.ref_policy"
POL = "models.policy"
# ChatLearn 1.2.0's BaseConfig.validate() runs only GrpoConfig's own checks; main also runs every nested config's
# `_validate_impl` (runtime, policy, FSDP/Megatron, rollout managers). A check that only main's loader makes is an
# error at main and, at 1.2.0, a warning that says the loader lets it through.
V120_LETS_THROUGH = " (ChatLearn 1.2.0 does not check this when it loads the config; the run may fail later)"


def _checked_at_load(ctx: Any) -> bool:
    return ctx.release != "1.2.0"


def _nested_check(ctx: Any, code: str, path: str, message: str, **kwargs: Any):
    """A finding for a check that ChatLearn main's nested `_validate_impl` makes and 1.2.0 does not."""
    if _checked_at_load(ctx):
        return ctx.error(code, path, message, **kwargs)
    return ctx.warning(code, path, message + V120_LETS_THROUGH, **kwargs)


def _multiples(n: int, limit: int = 3) -> str:
    return ", ".join(str(n * k) for k in range(1, limit + 1))


def _nearest_multiples(value: int, n: int) -> str:
    """The multiples of n on either side of value, e.g. "1984 or 2016"."""
    below = value // n * n
    return f"{below} or {below + n}" if below else str(n)


@rules.rule("chatlearn/models-need-gpus", "RLC306",
            "The trainer, the reference model and the rollout model each have at least one GPU (`num_gpu`; "
            "ChatLearn's default is 0).", keys=[f"{PT}.num_gpu", f"{REF}.num_gpu", f"{POL}.num_gpu"])
def _models_need_gpus(cfg: Any, ctx: Any):
    for name in ("policy_trainer", "ref_policy", "policy"):
        if getattr(cfg.models, name).num_gpu <= 0:
            where = "set" if ctx.is_set(f"models.{name}.num_gpu") else "left at ChatLearn's default"
            message = f"models.{name}.num_gpu is 0 ({where}): ChatLearn needs at least one GPU for this model"
            hint = (f"set models.{name}.num_gpu" + ("" if name == "policy_trainer"
                                                  else ", e.g. `${models.policy_trainer.num_gpu}`"))
            if name == "policy":
                yield _nested_check(ctx, "RLC306", f"models.{name}.num_gpu", message, hint=hint)
            else:  # its data-parallel size becomes 0, and GrpoConfig's own batch checks divide by it
                yield ctx.error("RLC306", f"models.{name}.num_gpu", message, hint=hint)


@rules.rule("chatlearn/episode-divides-into-global-batches", "RLC300",
            "`sample_per_episode` is a multiple of `train_global_batch_size`.",
            keys=[f"{RT}.sample_per_episode", f"{RT}.train_global_batch_size"])
def _episode_global_batches(cfg: Any, ctx: Any):
    r = cfg.runtime_args
    if r.sample_per_episode % r.train_global_batch_size:
        yield _nested_check(
            ctx, "RLC300", f"{RT}.sample_per_episode",
            f"runtime_args.sample_per_episode ({r.sample_per_episode}) is not a multiple of "
            f"runtime_args.train_global_batch_size ({r.train_global_batch_size})",
            hint=f"each episode is split into global batches; use a sample_per_episode of "
                 f"{_nearest_multiples(r.sample_per_episode, r.train_global_batch_size)}, or a "
                 f"train_global_batch_size that divides {r.sample_per_episode}",
            related=[f"{RT}.train_global_batch_size"])


@rules.rule("chatlearn/episode-whole-prompt-groups", "RLC300",
            "`sample_per_episode` is a whole number of prompt groups (`models.policy.num_inference_per_prompt`).",
            keys=[f"{RT}.sample_per_episode", f"{POL}.num_inference_per_prompt"])
def _episode_prompt_groups(cfg: Any, ctx: Any):
    n = cfg.models.policy.num_inference_per_prompt
    spe = cfg.runtime_args.sample_per_episode
    if spe % n:
        yield ctx.error("RLC300", f"{RT}.sample_per_episode",
                        f"runtime_args.sample_per_episode ({spe}) is not a multiple of "
                        f"models.policy.num_inference_per_prompt ({n}): an episode must hold whole prompt groups",
                        hint=f"use a sample_per_episode of {_nearest_multiples(spe, n)} (a whole number of "
                             f"prompts × {n} responses)",
                        related=[f"{POL}.num_inference_per_prompt"])


@rules.rule("chatlearn/episode-divides-over-dp", "RLC300",
            "`sample_per_episode` divides evenly over the data-parallel ranks of the trainer and of the reference model.",
            keys=[f"{RT}.sample_per_episode", f"{PT}.num_gpu", f"{REF}.num_gpu"])
def _episode_dp(cfg: Any, ctx: Any):
    spe = cfg.runtime_args.sample_per_episode
    for path, dp in ((PT, trainer_dp(cfg)), (REF, ref_dp(cfg))):
        if spe % dp:
            yield ctx.error("RLC300", f"{RT}.sample_per_episode",
                            f"runtime_args.sample_per_episode ({spe}) does not divide over the {dp} data-parallel "
                            f"ranks of {path}",
                            hint=f"use a sample_per_episode that is a multiple of {dp}", related=[f"{path}.num_gpu"])


def _batch_checked_models(cfg: Any, ctx: Any):
    """(path, model, dp) of the models whose batches GrpoConfig checks: trainer and reference model."""
    return ((PT, cfg.models.policy_trainer, trainer_dp(cfg)), (REF, cfg.models.ref_policy, ref_dp(cfg)))


@rules.rule("chatlearn/global-batch-divides-over-dp", "RLC300",
            "`train_global_batch_size` divides evenly over the trainer's data-parallel ranks.",
            keys=[f"{RT}.train_global_batch_size", f"{PT}.num_gpu"])
def _global_batch_dp(cfg: Any, ctx: Any):
    gb = cfg.runtime_args.train_global_batch_size
    for path, model, dp in _batch_checked_models(cfg, ctx):
        if model.trainable and gb % dp:
            message = (f"runtime_args.train_global_batch_size ({gb}) does not divide over the {dp} data-parallel "
                       f"ranks of {path}")
            yield _nested_check(ctx, "RLC300", f"{RT}.train_global_batch_size", message,
                                hint=f"use a multiple of {dp}: {_multiples(dp)}", related=[f"{path}.num_gpu"])


@rules.rule("chatlearn/generation-batch-multiple", "RLC300",
            "Each data-parallel rank's share of an episode is a multiple of the model's `generation_batch_size` "
            "(trainer and reference model; ChatLearn main skips the check with packing, 1.2.0 does not).",
            keys=[f"{RT}.sample_per_episode", f"{PT}.generation_batch_size", f"{REF}.generation_batch_size"])
def _generation_batch(cfg: Any, ctx: Any):
    spe = cfg.runtime_args.sample_per_episode
    for path, model, dp in _batch_checked_models(cfg, ctx):
        if (model.packing and _checked_at_load(ctx)) or spe % dp:
            continue
        share = spe // dp
        if share % model.generation_batch_size:
            yield ctx.error("RLC300", f"{path}.generation_batch_size",
                            f"{path}.generation_batch_size ({model.generation_batch_size}) does not divide the "
                            f"{share} samples each of its {dp} data-parallel ranks gets per episode "
                            f"(sample_per_episode {spe} / {dp})",
                            hint=f"use a generation_batch_size that divides {share}"
                                 + (", or enable packing" if _checked_at_load(ctx) else ""),
                            related=[f"{RT}.sample_per_episode"])


@rules.rule("chatlearn/micro-batch-multiple", "RLC300",
            "Each data-parallel rank's share of a global batch is a multiple of `runtime_args.train_micro_batch_size` "
            "(ChatLearn main: the trainer, without packing; 1.2.0: trainer and reference model).",
            keys=[f"{RT}.train_global_batch_size", f"{RT}.train_micro_batch_size"])
def _micro_batch(cfg: Any, ctx: Any):
    r = cfg.runtime_args
    for path, model, dp in _batch_checked_models(cfg, ctx):
        if _checked_at_load(ctx) and (not model.trainable or model.packing):
            continue
        share = r.train_global_batch_size // dp
        if share and share % r.train_micro_batch_size:
            yield ctx.error("RLC300", f"{RT}.train_micro_batch_size",
                            f"runtime_args.train_micro_batch_size ({r.train_micro_batch_size}) does not divide the "
                            f"{share} samples each data-parallel rank of {path} gets per global batch "
                            f"(train_global_batch_size {r.train_global_batch_size} / {dp} ranks)",
                            hint=f"use a micro batch size that divides {share}",
                            related=[f"{RT}.train_global_batch_size"])
            return


@rules.rule("chatlearn/micro-batch-linked", "RLC305",
            "`models.policy_trainer.train_micro_batch_size` equals `runtime_args.train_micro_batch_size`, which "
            "ChatLearn's batch checks read.",
            keys=[f"{PT}.train_micro_batch_size", f"{RT}.train_micro_batch_size"])
def _micro_batch_linked(cfg: Any, ctx: Any):
    a, b = cfg.models.policy_trainer.train_micro_batch_size, cfg.runtime_args.train_micro_batch_size
    if a != b:
        yield ctx.warning("RLC305", f"{PT}.train_micro_batch_size",
                          f"models.policy_trainer.train_micro_batch_size ({a}) differs from "
                          f"runtime_args.train_micro_batch_size ({b}); ChatLearn checks batches with the latter",
                          hint="set models.policy_trainer.train_micro_batch_size: ${runtime_args.train_micro_batch_size}",
                          related=[f"{RT}.train_micro_batch_size"])


@rules.rule("chatlearn/group-size-linked", "RLC305",
            "ChatLearn main: `runtime_args.num_inference_per_prompt` (advantages) equals "
            "`models.policy.num_inference_per_prompt` (rollout).",
            keys=[f"{RT}.num_inference_per_prompt", f"{POL}.num_inference_per_prompt"])
def _group_size_linked(cfg: Any, ctx: Any):
    if ctx.release == "1.2.0":
        return  # 1.2.0 has only the rollout's group size
    a, b = cfg.runtime_args.num_inference_per_prompt, cfg.models.policy.num_inference_per_prompt
    if a != b:
        path = f"{RT}.num_inference_per_prompt" if ctx.is_set(f"{RT}.num_inference_per_prompt") else f"{POL}.num_inference_per_prompt"
        yield ctx.warning("RLC305", path,
                          f"runtime_args.num_inference_per_prompt ({a}) differs from "
                          f"models.policy.num_inference_per_prompt ({b}): advantages would be computed over groups of "
                          f"{a} while rollout makes groups of {b}",
                          hint=f"set both to {b}", related=[f"{RT}.num_inference_per_prompt",
                                                            f"{POL}.num_inference_per_prompt"])


@rules.rule("chatlearn/rollout-gpus-divide-by-tp", "RLC400",
            "`models.policy.num_gpu` is a multiple of its `tensor_model_parallel_size`.",
            keys=[f"{POL}.num_gpu", f"{POL}.tensor_model_parallel_size"])
def _rollout_tp(cfg: Any, ctx: Any):
    p = cfg.models.policy
    if p.num_gpu % p.tensor_model_parallel_size:
        yield _nested_check(ctx, "RLC400", f"{POL}.tensor_model_parallel_size",
                            f"models.policy.num_gpu ({p.num_gpu}) is not a multiple of "
                            f"models.policy.tensor_model_parallel_size ({p.tensor_model_parallel_size})",
                            hint=f"each rollout engine takes {p.tensor_model_parallel_size} GPUs; use a num_gpu of "
                                 f"{_multiples(p.tensor_model_parallel_size)}", related=[f"{POL}.num_gpu"])


@rules.rule("chatlearn/rollout-replicas-cover-episode", "RLC300",
            "`sample_per_episode` divides over the rollout engines (num_gpu / TP) and is at least their number "
            "(a warning: otherwise some engines get more prompts than others).",
            keys=[f"{RT}.sample_per_episode", f"{POL}.num_gpu", f"{POL}.tensor_model_parallel_size"])
def _rollout_replicas(cfg: Any, ctx: Any):
    p = cfg.models.policy
    if p.num_gpu <= 0 or p.num_gpu % p.tensor_model_parallel_size:
        return
    engines = p.num_gpu // p.tensor_model_parallel_size
    spe = cfg.runtime_args.sample_per_episode
    if spe % engines or spe < engines:
        yield ctx.warning("RLC300", f"{RT}.sample_per_episode",
                          f"runtime_args.sample_per_episode ({spe}) does not divide over the {engines} rollout "
                          f"engines (models.policy.num_gpu {p.num_gpu} / TP {p.tensor_model_parallel_size}), so some "
                          f"engines get more prompts than others", hint=f"use a multiple of {engines}",
                          related=[f"{POL}.num_gpu"])


@rules.rule("chatlearn/rollout-not-trainable", "RLC306", "`models.policy` and `models.ref_policy` are not trainable; "
            "`models.policy_trainer` is.", keys=[f"{POL}.trainable", f"{REF}.trainable", f"{PT}.trainable"])
def _trainable(cfg: Any, ctx: Any):
    if cfg.models.policy.trainable:
        yield _nested_check(ctx, "RLC306", f"{POL}.trainable", "models.policy.trainable is true; ChatLearn's rollout "
                                                              "model does not support training",
                            hint=f"set {POL}.trainable: false")
    for path, model, expected in ((REF, cfg.models.ref_policy, False), (PT, cfg.models.policy_trainer, True)):
        if model.trainable is not expected:
            # ChatLearn does not check these at load; the flag decides which batch checks and replica layout apply
            yield ctx.warning("RLC306", f"{path}.trainable",
                              f"{path}.trainable is {str(model.trainable).lower()}; this model should be "
                              f"{'trained' if expected else 'frozen'}",
                              hint=f"set {path}.trainable: {str(expected).lower()}")


@rules.rule("chatlearn/rollout-no-pp-ep", "RLC306", "The rollout model supports neither pipeline nor expert "
            "parallelism (both must be 1).",
            keys=[f"{POL}.pipeline_model_parallel_size", f"{POL}.expert_model_parallel_size"])
def _rollout_pp_ep(cfg: Any, ctx: Any):
    p = cfg.models.policy
    for key in ("pipeline_model_parallel_size", "expert_model_parallel_size"):
        value = getattr(p, key)
        if value != 1:
            yield _nested_check(ctx, "RLC306", f"{POL}.{key}", f"models.policy.{key} is {value}; ChatLearn's rollout "
                                                               f"supports only 1",
                                hint="use tensor_model_parallel_size to split the model")


@rules.rule("chatlearn/capture-covers-sequence", "RLC303",
            "ChatLearn 1.2.0: `models.policy.max_seq_len_to_capture` >= `models.policy.seq_length` (main derives both).",
            keys=[f"{POL}.max_seq_len_to_capture", f"{POL}.seq_length"])
def _capture(cfg: Any, ctx: Any):
    p = cfg.models.policy
    if ctx.release != "1.2.0":
        return  # ChatLearn main sets both to max_prompt_tokens_length + max_response_tokens_length
    if p.max_seq_len_to_capture < p.seq_length:
        yield ctx.warning("RLC303", f"{POL}.max_seq_len_to_capture",
                          f"models.policy.max_seq_len_to_capture ({p.max_seq_len_to_capture}) is smaller than "
                          f"models.policy.seq_length ({p.seq_length}): longer sequences fall out of CUDA graphs "
                          f"and run slower", hint=f"set max_seq_len_to_capture to at least {p.seq_length}",
                          related=[f"{POL}.seq_length"])


@rules.rule("chatlearn/new-tokens-fit-sequence", "RLC303",
            "ChatLearn 1.2.0: `models.policy.max_new_tokens` is smaller than `models.policy.seq_length` (room for "
            "the prompt).", keys=[f"{POL}.max_new_tokens", f"{POL}.seq_length"])
def _new_tokens(cfg: Any, ctx: Any):
    p = cfg.models.policy
    if ctx.release == "1.2.0" and p.max_new_tokens is not None and p.max_new_tokens >= p.seq_length:
        yield ctx.warning("RLC303", f"{POL}.max_new_tokens",
                          f"models.policy.max_new_tokens ({p.max_new_tokens}) leaves no room for the prompt within "
                          f"models.policy.seq_length ({p.seq_length})",
                          hint="make seq_length the prompt budget plus max_new_tokens", related=[f"{POL}.seq_length"])


@rules.rule("chatlearn/sequence-lengths-derived", "RLC304",
            "ChatLearn main overwrites the rollout's `seq_length` and `max_seq_len_to_capture`, and the Megatron "
            "models' `seq_length`, with max_prompt_tokens_length + max_response_tokens_length.",
            keys=[f"{POL}.seq_length", f"{POL}.max_seq_len_to_capture", f"{PT}.seq_length"])
def _lengths_derived(cfg: Any, ctx: Any):
    if ctx.release == "1.2.0":
        return
    targets = [(POL, cfg.models.policy, ("seq_length", "max_seq_len_to_capture"))]
    trainers = ((PT, cfg.models.policy_trainer), (REF, cfg.models.ref_policy))
    targets += [(path, m, ("seq_length",)) for path, m in trainers if isinstance(m, MegatronOptions)]
    for path, m, keys in targets:
        total = m.max_prompt_tokens_length + m.max_response_tokens_length
        for key in keys:
            if ctx.is_set(f"{path}.{key}") and getattr(m, key) != total:
                yield ctx.warning("RLC304", f"{path}.{key}",
                                  f"ChatLearn replaces {path}.{key} ({getattr(m, key)}) with "
                                  f"max_prompt_tokens_length + max_response_tokens_length = {total}",
                                  hint=f"remove {key}; set {path}.max_prompt_tokens_length and "
                                       f"max_response_tokens_length instead",
                                  related=[f"{path}.max_prompt_tokens_length", f"{path}.max_response_tokens_length"])


@rules.rule("chatlearn/megatron-seq-length-1-2", "RLC203",
            "ChatLearn 1.2.0: Megatron models need `seq_length` (its dataclass has no default; main derives it).",
            keys=[f"{PT}.seq_length", f"{REF}.seq_length"])
def _megatron_seq_length(cfg: Any, ctx: Any):
    if ctx.release != "1.2.0":
        return
    for path in (PT, REF):
        m = getattr(cfg.models, path.split(".")[1])
        if isinstance(m, MegatronOptions) and m.seq_length is None:
            yield ctx.error("RLC203", f"{path}.seq_length",
                            f"{path}.seq_length is not set: ChatLearn 1.2.0 accepts this at load but fails when it "
                            f"builds the Megatron model (the value stays OmegaConf's `???`)",
                            hint="set it to the rollout's models.policy.seq_length")


@rules.rule("chatlearn/fsdp-size-is-num-gpu", "RLC304",
            "ChatLearn ignores `fsdp_size` and shards over all of the model's GPUs (`num_gpu`).",
            keys=[f"{PT}.fsdp_size", f"{REF}.fsdp_size"])
def _fsdp_size(cfg: Any, ctx: Any):
    for path in (PT, REF):
        model = getattr(cfg.models, path.split(".")[1])
        if isinstance(model, FSDPOptions) and ctx.is_set(f"{path}.fsdp_size") and model.fsdp_size != model.num_gpu:
            yield ctx.warning("RLC304", f"{path}.fsdp_size",
                              f"ChatLearn ignores {path}.fsdp_size ({model.fsdp_size}) and shards over num_gpu "
                              f"({model.num_gpu}) GPUs", hint=f"remove fsdp_size, or set it to {model.num_gpu}",
                              related=[f"{path}.num_gpu"])


@rules.rule("chatlearn/ulysses-divides-gpus", "RLC400",
            "FSDP models' GPUs are a multiple of their Ulysses sequence parallel size.",
            keys=[f"{PT}.ulysses_sequence_parallel_size", f"{REF}.ulysses_sequence_parallel_size"])
def _ulysses(cfg: Any, ctx: Any):
    for path in (PT, REF):
        model = getattr(cfg.models, path.split(".")[1])
        if isinstance(model, FSDPOptions) and model.num_gpu % model.ulysses_sequence_parallel_size:
            yield _nested_check(ctx, "RLC400", f"{path}.ulysses_sequence_parallel_size",
                                f"{path}.num_gpu ({model.num_gpu}) is not a multiple of "
                                f"ulysses_sequence_parallel_size ({model.ulysses_sequence_parallel_size})",
                                hint=f"use a sequence parallel size that divides {model.num_gpu}",
                                related=[f"{path}.num_gpu"])


@rules.rule("chatlearn/megatron-parallel-divides-gpus", "RLC400",
            "Megatron models' GPUs are a multiple of TP·CP·PP, and of EP·ETP·PP for MoE layers (ChatLearn accepts "
            "this at load; Megatron-core fails when it builds its parallel groups).",
            keys=[f"{PT}.tensor_model_parallel_size", f"{PT}.pipeline_model_parallel_size",
                  f"{PT}.context_parallel_size", f"{PT}.expert_model_parallel_size"])
def _megatron_divides(cfg: Any, ctx: Any):
    for path in (PT, REF):
        m = getattr(cfg.models, path.split(".")[1])
        if not isinstance(m, MegatronOptions) or m.num_gpu <= 0:
            continue
        dense = m.tensor_model_parallel_size * m.context_parallel_size * m.pipeline_model_parallel_size
        experts = (m.expert_tensor_parallel_size or m.tensor_model_parallel_size) * m.expert_model_parallel_size \
            * m.pipeline_model_parallel_size
        for size, what, key in ((dense, f"TP {m.tensor_model_parallel_size} × CP {m.context_parallel_size} × PP "
                                        f"{m.pipeline_model_parallel_size}", "tensor_model_parallel_size"),
                                (experts, f"ETP {m.expert_tensor_parallel_size or m.tensor_model_parallel_size} × EP "
                                          f"{m.expert_model_parallel_size} × PP {m.pipeline_model_parallel_size}",
                                 "expert_model_parallel_size")):
            if m.num_gpu % size:
                # fewer GPUs than one model-parallel group: ChatLearn's data-parallel size is 0 and its own batch
                # checks divide by it at load; otherwise Megatron-core stops when it builds its groups
                when = ("ChatLearn stops at load (its data-parallel size is 0)" if m.num_gpu < size else
                        "ChatLearn accepts this at load but Megatron-core fails when it builds its parallel groups")
                yield ctx.error("RLC400", f"{path}.{key}",
                                f"{path}.num_gpu ({m.num_gpu}) is not a multiple of {what} = {size}: {when}",
                                hint=f"use a num_gpu of {_multiples(size)}, or smaller parallel sizes",
                                related=[f"{path}.num_gpu"])
                break


@rules.rule("chatlearn/pipeline-options-need-pp", "RLC302",
            "Virtual pipeline stages and uneven first/last stages need `pipeline_model_parallel_size` > 1.",
            keys=[f"{PT}.virtual_pipeline_model_parallel_size", f"{PT}.decoder_first_pipeline_num_layers",
                  f"{PT}.decoder_last_pipeline_num_layers"])
def _pipeline_options(cfg: Any, ctx: Any):
    for path in (PT, REF):
        m = getattr(cfg.models, path.split(".")[1])
        if not isinstance(m, MegatronOptions) or m.pipeline_model_parallel_size > 1:
            continue
        for key in ("virtual_pipeline_model_parallel_size", "decoder_first_pipeline_num_layers",
                    "decoder_last_pipeline_num_layers"):
            if getattr(m, key, None) is not None and ctx.is_set(f"{path}.{key}"):
                yield ctx.error("RLC302", f"{path}.{key}",
                                f"{path}.{key} ({getattr(m, key)}) needs pipeline parallelism, but "
                                f"pipeline_model_parallel_size is 1: ChatLearn accepts this at load but Megatron-core "
                                f"fails when it initialises", hint=f"set pipeline_model_parallel_size above 1, or "
                                                                   f"remove {key}",
                                related=[f"{path}.pipeline_model_parallel_size"])


@rules.rule("chatlearn/sequence-parallel-needs-tp", "RLC307",
            "Megatron sequence parallelism has no effect with tensor parallel size 1.",
            keys=[f"{PT}.sequence_parallel", f"{PT}.tensor_model_parallel_size"])
def _sequence_parallel(cfg: Any, ctx: Any):
    for path in (PT, REF):
        m = getattr(cfg.models, path.split(".")[1])
        if isinstance(m, MegatronOptions) and m.sequence_parallel and m.tensor_model_parallel_size == 1 \
                and ctx.is_set(f"{path}.sequence_parallel"):
            yield ctx.warning("RLC307", f"{path}.sequence_parallel",
                              f"{path}.sequence_parallel is true but tensor_model_parallel_size is 1, so it has no "
                              f"effect", hint="set tensor_model_parallel_size above 1, or sequence_parallel: false",
                              related=[f"{path}.tensor_model_parallel_size"])


@rules.rule("chatlearn/recompute-granularity-spelling", "RLC306",
            "`recompute_granularity: sel` (the docs' spelling) is not a value Megatron-core accepts; it expects "
            "`selective`.", keys=[f"{PT}.recompute_granularity"])
def _recompute(cfg: Any, ctx: Any):
    m = cfg.models.policy_trainer
    if isinstance(m, MegatronPolicyTrainer) and m.recompute_granularity == "sel":
        yield ctx.warning("RLC306", f"{PT}.recompute_granularity",
                          "models.policy_trainer.recompute_granularity is `sel`, as ChatLearn's docs write it; "
                          "Megatron-core only accepts `selective` or `full`", hint="write `selective`")


@rules.rule("chatlearn/per-token-loss", "RLC306",
            "ChatLearn main requires `calculate_per_token_loss: true` for the Megatron trainer.",
            keys=[f"{PT}.calculate_per_token_loss"])
def _per_token_loss(cfg: Any, ctx: Any):
    m = cfg.models.policy_trainer
    if isinstance(m, MegatronPolicyTrainer) and not m.calculate_per_token_loss:
        yield _nested_check(ctx, "RLC306", f"{PT}.calculate_per_token_loss",
                            "models.policy_trainer.calculate_per_token_loss is false; ChatLearn requires the "
                            "per-token loss for RL training", hint="remove it, or set it to true")


@rules.rule("chatlearn/packing-ignores-batch-sizes", "RLC307",
            "With packing, `generation_batch_size` and `train_micro_batch_size` are ignored (and Megatron's "
            "`seq_length`).", keys=[f"{PT}.packing", f"{PT}.generation_batch_size", f"{PT}.train_micro_batch_size"])
def _packing_ignores(cfg: Any, ctx: Any):
    for path in (PT, REF):
        m = getattr(cfg.models, path.split(".")[1])
        if not m.packing:
            continue
        for key in ("generation_batch_size", "train_micro_batch_size", "seq_length"):
            if hasattr(m, key) and ctx.is_set(f"{path}.{key}"):
                yield ctx.warning("RLC307", f"{path}.{key}",
                                  f"{path}.{key} ({getattr(m, key)}) is ignored because {path}.packing is true",
                                  hint="remove it, or disable packing", related=[f"{path}.packing"])


@rules.rule("chatlearn/gpu-per-process-fits", "RLC400", "A model's `gpu_per_process` is at most its `num_gpu` and "
            "divides it (a warning: ChatLearn does not check it).",
            keys=[f"{PT}.gpu_per_process", f"{POL}.gpu_per_process", f"{REF}.gpu_per_process"])
def _gpu_per_process(cfg: Any, ctx: Any):
    for name in ("policy_trainer", "ref_policy", "policy"):
        m = getattr(cfg.models, name)
        if m.gpu_per_process and m.num_gpu and (m.gpu_per_process > m.num_gpu or m.num_gpu % m.gpu_per_process):
            yield ctx.warning("RLC400", f"models.{name}.gpu_per_process",
                              f"models.{name}.gpu_per_process ({m.gpu_per_process}) does not divide "
                              f"models.{name}.num_gpu ({m.num_gpu})", hint="use gpu_per_process: 1",
                              related=[f"models.{name}.num_gpu"])


@rules.rule("chatlearn/colocation-names", "RLC202",
            "`runtime_args.colocation` names only models under `models`, each in at most one group.",
            keys=[f"{RT}.colocation"])
def _colocation_names(cfg: Any, ctx: Any):
    seen: dict[str, int] = {}
    for index, group in enumerate(colocation_groups(cfg)):
        for name in group:
            if name not in MODEL_NAMES:
                from difflib import get_close_matches

                close = get_close_matches(name, MODEL_NAMES, n=1)
                yield ctx.error("RLC202", f"{RT}.colocation",
                                f"runtime_args.colocation names `{name}`, which is not a model "
                                f"(models are {', '.join(MODEL_NAMES)}): ChatLearn accepts this at load but fails "
                                f"when it places the models",
                                hint=f"did you mean `{close[0]}`?" if close else "remove it")
            elif name in seen and seen[name] != index:
                yield ctx.error("RLC401", f"{RT}.colocation",
                                f"runtime_args.colocation puts `{name}` in two groups (groups {seen[name] + 1} and "
                                f"{index + 1})", hint="a model can share GPUs with one group only")
            seen.setdefault(name, index)


@rules.rule("chatlearn/colocated-models-offload", "RLC306",
            "Colocated models free their GPU memory between phases (`free_gpu_memory.offload_weights`; for the "
            "trainer also optimizer states and gradient buffers).", keys=[f"{RT}.colocation"])
def _colocated_offload(cfg: Any, ctx: Any):
    for group in colocation_groups(cfg):
        if len(group) < 2:
            continue
        for name in group:
            if name not in ("policy_trainer", "ref_policy", "policy"):
                continue
            memory = getattr(cfg.models, name).free_gpu_memory
            for key in ("offload_weights", "offload_optimizer_states", "free_grad_buffers"):
                if name != "policy_trainer" and key != "offload_weights":
                    continue
                if not getattr(memory, key):
                    yield ctx.warning("RLC306", f"models.{name}.free_gpu_memory.{key}",
                                      f"models.{name} is colocated with {', '.join(n for n in group if n != name)} but "
                                      f"free_gpu_memory.{key} is false, so its memory stays on the GPUs while the "
                                      f"others run", hint=f"set models.{name}.free_gpu_memory.{key}: true",
                                      related=[f"{RT}.colocation"])


# Keys ChatLearn types as plain strings but reads as a choice. An unknown value passes its loader; (choices,
# severity, what happens) per key.
_CHOICES: dict[str, tuple[tuple[str, ...], str, str]] = {
    f"{RT}.rollout_backend": (("vllm", "sglang"), "error", "fails when run() builds the rollout model"),
    f"{RT}.task_type": (("chat", "agent"), "error", "fails when run() builds the rollout model"),
    f"{RT}.log_args_dict.wandb_resume": (("allow", "must", "never", "auto"), "error",
                                         "Weights & Biases refuses it when logging starts"),
    f"{RT}.stream_data_loader_type": (("fixed", "dynamic"), "warning", "its data loader does not know it"),
    f"{RT}.cpu_schedule_strategy": (("PACK", "SPREAD"), "warning", "Ray does not know this placement strategy"),
    f"{RT}.model_type": (("llm", "vlm"), "warning", "its data pipeline does not know it"),
}


@rules.rule("chatlearn/choices", "RLC202",
            "String keys that ChatLearn reads as a choice (rollout_backend, task_type, wandb_resume, ...) hold one "
            "of its values.", keys=list(_CHOICES))
def _choices(cfg: Any, ctx: Any):
    from difflib import get_close_matches

    for path, (choices, severity, effect) in _CHOICES.items():
        value: Any = cfg
        for part in path.split("."):
            value = getattr(value, part)
        if value in choices or not ctx.is_set(path):
            continue
        close = get_close_matches(str(value), choices, n=1)
        message = (f"{path}: `{value}` is not one of {', '.join(choices)}; ChatLearn accepts this at load but "
                   f"{effect}")
        hint = f"did you mean `{close[0]}`?" if close else f"use one of {', '.join(choices)}"
        yield (ctx.error if severity == "error" else ctx.warning)("RLC202", path, message, hint=hint)


@rules.rule("chatlearn/agent-needs-async-sglang", "RLC306",
            "ChatLearn main: agent tasks and the rollout manager need asynchronous SGLang rollout "
            "(`is_sync_mode: false`, `rollout_backend: sglang`), and agent tasks need `use_rollout_manager`.",
            keys=[f"{RT}.task_type", f"{RT}.use_rollout_manager", f"{POL}.is_sync_mode"])
def _agent(cfg: Any, ctx: Any):
    if ctx.release == "1.2.0":
        return
    r, p = cfg.runtime_args, cfg.models.policy
    if r.task_type == "agent" and not r.use_rollout_manager:
        yield ctx.error("RLC302", f"{RT}.task_type", "runtime_args.task_type is `agent` but use_rollout_manager is "
                                                     "false: ChatLearn accepts this at load but stops when run() "
                                                     "starts", hint="set runtime_args.use_rollout_manager: true",
                        related=[f"{RT}.use_rollout_manager"])
    if (r.task_type == "agent" or r.use_rollout_manager) and (p.is_sync_mode or r.rollout_backend != "sglang"):
        path = f"{RT}.task_type" if r.task_type == "agent" else f"{RT}.use_rollout_manager"
        yield ctx.error("RLC306", path, f"{path.split('.')[-1]} needs asynchronous SGLang rollout, but rollout_backend "
                                        f"is `{r.rollout_backend}` and models.policy.is_sync_mode is "
                                        f"{str(p.is_sync_mode).lower()}: ChatLearn accepts this at load but stops "
                                        f"when run() starts",
                        hint="set runtime_args.rollout_backend: sglang and models.policy.is_sync_mode: false",
                        related=[f"{RT}.rollout_backend", f"{POL}.is_sync_mode"])


@rules.rule("chatlearn/rollout-manager-has-no-gpu", "RLC306",
            "ChatLearn main: `models.rollout_manager.num_gpu` is 0.", keys=["models.rollout_manager.num_gpu"])
def _rollout_manager_gpu(cfg: Any, ctx: Any):
    if ctx.release != "1.2.0" and cfg.models.rollout_manager.num_gpu != 0:
        yield ctx.error("RLC306", "models.rollout_manager.num_gpu",
                        f"models.rollout_manager.num_gpu is {cfg.models.rollout_manager.num_gpu}; ChatLearn's rollout "
                        f"manager runs on CPUs and requires 0", hint="remove it, or set it to 0")


@rules.rule("chatlearn/partial-rollout-ratio", "RLC305",
            "ChatLearn main: `models.partial_rollout_manager.rollout_ratio` has one entry per rollout round "
            "(`max_rollout_round`) and sums to 1.",
            keys=["models.partial_rollout_manager.rollout_ratio", "models.partial_rollout_manager.max_rollout_round"])
def _partial_rollout(cfg: Any, ctx: Any):
    if ctx.release == "1.2.0":
        return
    m = cfg.models.partial_rollout_manager
    path = "models.partial_rollout_manager.rollout_ratio"
    if len(m.rollout_ratio) != m.max_rollout_round:
        yield ctx.error("RLC305", path, f"{path} has {len(m.rollout_ratio)} entries but max_rollout_round is "
                                        f"{m.max_rollout_round}; ChatLearn needs one ratio per round",
                        hint=f"give {m.max_rollout_round} ratios",
                        related=["models.partial_rollout_manager.max_rollout_round"])
    elif sum(m.rollout_ratio) != 1.0:
        yield ctx.error("RLC305", path, f"{path} sums to {sum(m.rollout_ratio)}; ChatLearn requires exactly 1.0",
                        hint="make the ratios sum to 1")


@rules.rule("chatlearn/data-paths-exist", "RLC308",
            "Each comma-separated `data_path` / `eval_data_path` exists on the machine that runs the job "
            "(a warning here; an error under --strict).", keys=[f"{RT}.data_path", f"{RT}.eval_data_path"])
def _data_paths(cfg: Any, ctx: Any):
    for key in ("data_path", "eval_data_path"):
        value = getattr(cfg.runtime_args, key)
        if not value or not ctx.is_set(f"{RT}.{key}"):
            continue
        missing = [p.strip() for p in value.split(",") if p.strip() and not ctx.host.path_exists(p.strip())]
        if missing:
            yield ctx.machine(f"{RT}.{key}", f"runtime_args.{key}: {', '.join(missing)} does not exist on this machine",
                              hint="it must exist where the job runs; ignore this if you validate away from the cluster")


@rules.rule("chatlearn/wandb-needs-login", "RLC308",
            "With `enable_wandb`, the job needs Weights & Biases credentials (WANDB_API_KEY) — a warning here, an "
            "error under --strict.", keys=[f"{RT}.log_args_dict.enable_wandb"])
def _wandb(cfg: Any, ctx: Any):
    if cfg.runtime_args.log_args_dict.enable_wandb and "WANDB_API_KEY" not in ctx.host.env:
        yield ctx.machine(f"{RT}.log_args_dict.enable_wandb",
                          "Weights & Biases logging is enabled but WANDB_API_KEY is not set in this environment",
                          hint="export WANDB_API_KEY where the job runs (or run `wandb login` there)")


# ---- the dialect --------------------------------------------------------------------------------------------


class ChatLearnDialect(Dialect):
    name = "chatlearn"
    title = "ChatLearn"
    documents = "ChatLearn v1.2.0 and main (the Hydra-structured `runtime_args` + `models` config)"
    override_grammar = "dotlist"
    variant_key = "runtime_args.train_backend"
    rules = rules
    releases = ("1.2.0", "main")
    # Structured dataclasses refuse unknown keys at merge; the untyped trainer and reference sections refuse them
    # when ChatLearn builds their dataclass (`cls(**values)`), so every mapping is "error".
    unknown_keys = "error"

    def variants(self) -> dict[str, type[Section]]:
        return {"fsdp": ChatLearnFSDP, "megatron": ChatLearnMegatron}

    def root(self, data: dict) -> type[Section]:
        runtime = data.get("runtime_args")
        backend = runtime.get("train_backend") if isinstance(runtime, dict) else None
        return ChatLearnMegatron if backend == "megatron" else ChatLearnFSDP

    def defaults(self, root: type[Section], release: str | None = None) -> dict:
        """ChatLearn's defaults, except under `models.policy_trainer` and `models.ref_policy`: GrpoConfig types those
        `Any`, so OmegaConf holds only what the user wrote there, and an interpolation such as
        `${models.policy_trainer.seq_length}` to an unwritten key fails (the dataclass defaults arrive later, when
        ChatLearn builds the backend's dataclass). The schema still fills them in for validation."""
        tree = super().defaults(root)
        for name in ("policy_trainer", "ref_policy"):
            tree.get("models", {}).pop(name, None)
        return tree

    def infer_release(self, data: dict) -> tuple[str | None, str]:
        """The release whose keys the document uses: keys only one release has (1.2.0's `models.policy.max_new_tokens`
        and Megatron attention options; main's prompt/response lengths, rollout managers, `use_partial_rollout`, ...)
        decide; the release with fewer foreign keys wins, the newest on a tie."""
        only: dict[str, list[str]] = {release: [] for release in self.releases}
        for path in _written_paths(data):
            info, _owner = field_at(self.root(data), path)
            have = field_releases(info) if info is not None else None
            if have is not None and len(have) == 1:
                only[have[0]].append(".".join(path))
        old, new = only["1.2.0"], only["main"]
        if not old and not new:
            # ChatLearn main derives these lengths from max_prompt/response_tokens_length and overwrites what is
            # written, so a document that sets them (and nothing of main's) is written for 1.2.0, as its templates are.
            lengths = [".".join(p) for p in _written_paths(data) if p in _V120_LENGTHS]
            if lengths:
                return "1.2.0", f"it sets {_some(lengths)}, which ChatLearn main derives, and no key of main"
            return "main", "no key tells ChatLearn 1.2.0 and main apart; assuming main"
        if len(old) > len(new):
            return "1.2.0", f"it uses {_some(old)}, which only ChatLearn 1.2.0 has"
        return "main", f"it uses {_some(new)}, which only ChatLearn main has"

    def describe(self, config: Any) -> str:
        t, p = config.models.policy_trainer, config.models.policy
        backend = "FSDP" if isinstance(t, FSDPPolicyTrainer) else (
            f"Megatron (TP {t.tensor_model_parallel_size} × PP {t.pipeline_model_parallel_size})")
        engines = p.num_gpu // p.tensor_model_parallel_size
        rollout = {"vllm": "vLLM", "sglang": "SGLang"}.get(config.runtime_args.rollout_backend,
                                                           config.runtime_args.rollout_backend)
        gpus = f"{t.num_gpu} GPU{'s' if t.num_gpu != 1 else ''}"
        text = (f"{backend} training on {gpus} (DP {trainer_dp(config)}), {rollout} rollout "
                f"({engines} engine{'s' if engines != 1 else ''} × TP {p.tensor_model_parallel_size})")
        groups = [g for g in colocation_groups(config) if len(g) > 1]
        if groups:
            text += "; colocated: " + "; ".join(", ".join(g) for g in groups)
        return text


_V120_LENGTHS = {("models", "policy", "seq_length"), ("models", "policy", "max_seq_len_to_capture"),
                 ("models", "policy_trainer", "seq_length"), ("models", "ref_policy", "seq_length")}


def _written_paths(data: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path of the user's tree (mappings and leaves; list items are not keys)."""
    out: list[tuple] = []
    if isinstance(data, dict):
        for key, value in data.items():
            path = prefix + (str(key),)
            out.append(path)
            out.extend(_written_paths(value, path))
    return out


def _some(paths: list[str], limit: int = 2) -> str:
    shown = ", ".join(f"`{p}`" for p in paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


DIALECT = ChatLearnDialect()
