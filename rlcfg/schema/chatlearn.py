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

# Annotations are evaluated as the classes are defined, not postponed: see `Section` in rlcfg.schema.base.
from math import gcd
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import model_validator

from rlcfg.diagnostics import Severity, close_matches
from rlcfg.schema.base import (HONORED, Dialect, Finding, RuleSet, Section, declare_fates, field_at,
                               field_releases, inert, param, refused, section)
from rlcfg import run_limits
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
_MANAGER_ONLY = inert("read only with runtime_args.use_rollout_manager or use_partial_rollout, which `rlcfg run` "
                      "refuses")
_LAYOUT = inert("how layers are spread over pipeline stages; the model and what it computes are the same (rlcfg "
                "spreads them evenly)")
_TOKENIZER = inert("rlcfg tokenizes with the Hugging Face tokenizer of models.policy_trainer.tokenizer_model (or load)")
_DEPRECATED = inert("ChatLearn 1.2.0 marks it deprecated and never reads it")
_STATIC_GRAPH = inert("which sequence lengths the engine captures in CUDA graphs; longer ones run eagerly and generate "
                      "the same tokens")

_SINGLE_TURN = refused("rlcfg generates one response per prompt on its own engines (a chat task); ChatLearn's agent "
                       "tasks (multi-turn, tools) are not run")
_SYNC_ROLLOUT = refused("rlcfg rolls out synchronously on its own engines, each step with the weights it trains; "
                        "ChatLearn's asynchronous rollout is not run")
_TEMPERATURE = refused("ChatLearn samples at this temperature but trains on the log-probs of the untempered logits; "
                       "rlcfg's trainers divide the logits by the sampling temperature, so the loss, the KL and the "
                       "entropy would differ (rlcfg runs ChatLearn's meaning at temperature 1.0 only)")
_STALE_WEIGHTS = refused("rlcfg hands the rollout engines the new weights after every training step; synchronising "
                         "only every n-th episode (rollout with older weights) is not run")
_THINKING = refused("rlcfg renders prompts with the chat template's own defaults; rendering them with Qwen3's thinking "
                    "mode turned on by ChatLearn is not run")
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
RolloutManager.run_fate = _MANAGER_ONLY
PartialRolloutManager.run_fate = _MANAGER_ONLY
Reward.run_fate = inert("ChatLearn's reward model is rule-based (the math answer check), run by CPU actors; rlcfg "
                        "scores with the same rule, and these keys change nothing it computes")

declare_fates(RuntimeArgs, **{
    "train_backend": HONORED, "rollout_backend": HONORED, "task_type": _SINGLE_TURN,
    "use_rollout_manager": _SYNC_ROLLOUT,
    "use_partial_rollout": refused("rlcfg generates each response in one go, in the step that trains on it; partial "
                                   "rollout continues long responses over later episodes (off-policy) and is not run"),
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
    "decoder_first_pipeline_num_layers": _LAYOUT, "decoder_last_pipeline_num_layers": _LAYOUT,
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
    "sync_frequency": _STALE_WEIGHTS, "num_inference_per_prompt": HONORED, "enable_thinking": _THINKING,
    "max_prompt_tokens_length": HONORED, "max_response_tokens_length": HONORED,
    "is_sync_mode": _SYNC_ROLLOUT, "tensor_model_parallel_size": HONORED,
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
for _models in (FSDPModels, MegatronModels):
    declare_fates(_models, **{"policy_trainer": HONORED, "ref_policy": HONORED, "policy": HONORED, "reward": HONORED,
                       "rollout_manager": _MANAGER_ONLY, "partial_rollout_manager": _MANAGER_ONLY})
for _root in (ChatLearnFSDP, ChatLearnMegatron):
    declare_fates(_root, **{"env_args": EnvArgs.run_fate, "runtime_args": HONORED, "models": HONORED})


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


def _v120_lengths(cfg: Any, release: str | None = None) -> bool:
    """Whether the document uses ChatLearn 1.2.0's lengths: judged by 1.2.0 (a document that writes only the lengths
    main derives, `seq_length`, is), or, with the release unknown, one that sets `max_new_tokens` (main refuses it)."""
    if release is not None:
        return release == "1.2.0"
    return cfg.models.policy.max_new_tokens is not None


def response_limit(cfg: Any, release: str | None = None) -> int:
    """The longest response. ChatLearn main: `max_response_tokens_length`. ChatLearn 1.2.0 never reads
    `max_new_tokens`: its engines give each prompt `seq_length` minus the prompt's length (vllm_module.py
    generate_vllm), so the longest response is `seq_length` − 1 (each prompt's own budget: `total_limit`)."""
    p = cfg.models.policy
    if _v120_lengths(cfg, release):
        return max(p.seq_length - 1, 1)
    return p.max_response_tokens_length


def total_limit(cfg: Any, release: str | None = None) -> int | None:
    """ChatLearn 1.2.0's limit on each prompt's prompt + response, `seq_length`. None at main: it overwrites
    seq_length with max_prompt_tokens_length + max_response_tokens_length, which the prompt and response limits
    already keep every sample within."""
    seq_length = cfg.models.policy.seq_length
    return seq_length if _v120_lengths(cfg, release) else None


def sequence_limit(cfg: Any, release: str | None = None) -> int:
    """The longest prompt + response of rollout: `seq_length` as written in ChatLearn 1.2.0; ChatLearn main overwrites
    it with max_prompt_tokens_length + max_response_tokens_length."""
    p = cfg.models.policy
    if _v120_lengths(cfg, release):
        return p.seq_length
    return p.max_prompt_tokens_length + p.max_response_tokens_length


def prompt_limit(cfg: Any, release: str | None = None) -> int:
    """The longest prompt ChatLearn keeps: it drops a prompt unless it is shorter than max_prompt_tokens_length (main)
    or seq_length (1.2.0) (chatlearn/data/prompt_dataset.py PromptPipeline: `if limit > len(input_ids)`)."""
    p = cfg.models.policy
    limit = p.seq_length if _v120_lengths(cfg, release) else p.max_prompt_tokens_length
    return max(limit - 1, 1)


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
                                hint=f"use a multiple of {dp}: {_nearest_multiples(gb, dp)}", related=[f"{path}.num_gpu"])


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
                                 f"{_nearest_multiples(p.num_gpu, p.tensor_model_parallel_size)}", related=[f"{POL}.num_gpu"])


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
                                hint=f"use a num_gpu of {_nearest_multiples(m.num_gpu, size)}, or smaller parallel sizes",
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
            keys=[f"{RT}.colocation"], also=("RLC401",))
def _colocation_names(cfg: Any, ctx: Any):
    seen: dict[str, int] = {}
    for index, group in enumerate(colocation_groups(cfg)):
        for name in group:
            if name not in MODEL_NAMES:
                close = close_matches(name, MODEL_NAMES, n=1)
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
    for path, (choices, severity, effect) in _CHOICES.items():
        value: Any = cfg
        for part in path.split("."):
            value = getattr(value, part)
        if value in choices or not ctx.is_set(path):
            continue
        close = close_matches(str(value), choices, n=1)
        message = (f"{path}: `{value}` is not one of {', '.join(choices)}; ChatLearn accepts this at load but "
                   f"{effect}")
        hint = f"did you mean `{close[0]}`?" if close else f"use one of {', '.join(choices)}"
        yield (ctx.error if severity == "error" else ctx.warning)("RLC202", path, message, hint=hint)


@rules.rule("chatlearn/agent-needs-async-sglang", "RLC306",
            "ChatLearn main: agent tasks and the rollout manager need asynchronous SGLang rollout "
            "(`is_sync_mode: false`, `rollout_backend: sglang`), and agent tasks need `use_rollout_manager`.",
            keys=[f"{RT}.task_type", f"{RT}.use_rollout_manager", f"{POL}.is_sync_mode"], also=("RLC302",))
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


@rules.rule("chatlearn/replay-feeds-advantages", "RLC306",
            "ChatLearn computes GRPO advantages only for episodes that enter its replay window: with "
            "`max_replay_episode: 0` (its default), or before `replay_episode_offset`, its trainer finds no advantages "
            "and stops at the first step (a warning: ChatLearn accepts this at load).",
            keys=[f"{RT}.max_replay_episode", f"{RT}.replay_episode_offset"])
def _replay_feeds_advantages(cfg: Any, ctx: Any):
    # chatlearn/data/data.py StreamDataset.set_dataset: the replay sample manager (AdvantageComputer) runs only when
    # max_replay_episode > 0 and episode_id >= replay_episode_offset; the trainers read data_b["advantages"].
    r = cfg.runtime_args
    if r.max_replay_episode == 0:
        where = "set" if ctx.is_set(f"{RT}.max_replay_episode") else "left at ChatLearn's default"
        yield ctx.warning("RLC306", f"{RT}.max_replay_episode",
                          f"runtime_args.max_replay_episode is 0 ({where}): ChatLearn then never runs its GRPO "
                          f"advantage computation, and its trainer stops at the first step for want of the samples' "
                          f"advantages; ChatLearn accepts this at load (rlcfg computes the advantages either way)",
                          hint="set runtime_args.max_replay_episode: 2, as ChatLearn's templates do")
    elif r.replay_episode_offset > 0:
        yield ctx.warning("RLC306", f"{RT}.replay_episode_offset",
                          f"runtime_args.replay_episode_offset is {r.replay_episode_offset}: ChatLearn computes no "
                          f"advantages for the episodes before it, and its trainer stops at the first step; ChatLearn "
                          f"accepts this at load (rlcfg computes the advantages either way)",
                          hint="remove replay_episode_offset")


@rules.rule("chatlearn/trainer-ignores", "RLC307",
            "Settings ChatLearn's trainer of the chosen backend never reads: its Megatron trainer back-propagates the "
            "policy loss alone (kl_coef, entropy_coef), its FSDP trainer always runs the GRPO loss "
            "(use_group_sequence_policy).",
            keys=[f"{PT}.kl_coef", f"{PT}.entropy_coef", f"{PT}.use_group_sequence_policy"])
def _trainer_ignores(cfg: Any, ctx: Any):
    t = cfg.models.policy_trainer
    if isinstance(t, MegatronPolicyTrainer):
        for key in ("kl_coef", "entropy_coef"):
            if getattr(t, key) > 0:
                term = "KL" if key == "kl_coef" else "entropy"
                yield ctx.warning("RLC307", f"{PT}.{key}",
                                  f"{PT}.{key} ({getattr(t, key)}) has no effect with the Megatron backend: "
                                  f"ChatLearn's Megatron trainer computes the {term} term for its metrics only and "
                                  f"back-propagates the policy loss alone (rlcfg does the same)",
                                  hint="remove it, or train with the FSDP backend, whose trainer adds the term",
                                  related=[f"{RT}.train_backend"])
    elif t.use_group_sequence_policy:
        yield ctx.warning("RLC307", f"{PT}.use_group_sequence_policy",
                          f"{PT}.use_group_sequence_policy has no effect with the FSDP backend: ChatLearn's FSDP "
                          f"trainer always runs the GRPO loss (rlcfg does the same)",
                          hint="remove it, or train with the Megatron backend, whose trainer runs GSPO",
                          related=[f"{RT}.train_backend"])


def _refusal(path: str, value: Any, instead: str, hint: str | None = None) -> Finding:
    shown = "null" if value is None else str(value).lower() if isinstance(value, bool) else value
    return Finding("RLC118", Severity.NOTE, path, f"`rlcfg run` refuses `{path}` = {shown}: {instead}",
                   hint or "`rlcfg validate` and `rlcfg plan` check it; to run with rlcfg, choose a value it runs")


def _runtime_limits(cfg: Any):
    """What the runtime's preflight refuses of the roles lower/chatlearn.py builds: the policy trainer, and the
    reference when a KL term reads it (kl_coef > 0, which only the FSDP trainer back-propagates)."""
    trainer, ref = cfg.models.policy_trainer, cfg.models.ref_policy
    if isinstance(trainer, MegatronPolicyTrainer):
        for name, limit in (("context_parallel_size", run_limits.CONTEXT_PARALLEL),
                            ("expert_model_parallel_size", run_limits.EXPERT_PARALLEL)):
            if getattr(trainer, name) > 1:
                yield _refusal(f"{PT}.{name}", getattr(trainer, name), limit, run_limits.SIZE_THAT_RUNS)
        return
    for path, model in ((PT, trainer), (REF, ref if trainer.kl_coef > 0 else None)):
        if model is not None and model.ulysses_sequence_parallel_size > 1:
            yield _refusal(f"{path}.ulysses_sequence_parallel_size", model.ulysses_sequence_parallel_size,
                           run_limits.ULYSSES, run_limits.SIZE_THAT_RUNS)


@rules.rule("chatlearn/run-refusals", "RLC118",
            "`rlcfg run` refuses what ChatLearn computes otherwise than rlcfg can: advantage groups that outlive an "
            "episode (runtime_args.num_inference_per_prompt above the rollout's), and what rlcfg's runtime does not "
            "do (rlcfg/run_limits.py): expert and context parallelism on Megatron, Ulysses sequence parallelism.",
            keys=[f"{RT}.num_inference_per_prompt", f"{PT}.expert_model_parallel_size", f"{PT}.context_parallel_size",
                  f"{PT}.ulysses_sequence_parallel_size"])
def _run_refusals(cfg: Any, ctx: Any):
    r, p = cfg.runtime_args, cfg.models.policy
    if ctx.release != "1.2.0" and r.num_inference_per_prompt > p.num_inference_per_prompt:
        # chatlearn/algorithm/grpo_utils/advantage_compute.py AdvantageComputer: rewards are kept per prompt_uid until
        # runtime_args.num_inference_per_prompt of them arrived, so with fewer per episode a prompt drawn again in a
        # later epoch is normalised together with its earlier responses.
        yield _refusal(f"{RT}.num_inference_per_prompt", r.num_inference_per_prompt,
                       f"ChatLearn keeps a prompt's rewards until {r.num_inference_per_prompt} have arrived, but "
                       f"rollout makes {p.num_inference_per_prompt} per episode, so a prompt drawn again later is "
                       f"normalised together with its earlier responses; rlcfg normalises each group of "
                       f"{p.num_inference_per_prompt} on its own",
                       f"set `{RT}.num_inference_per_prompt: {p.num_inference_per_prompt}`, the rollout's count, so "
                       "that each prompt's group is one episode's")
    yield from _runtime_limits(cfg)


@rules.rule("chatlearn/megatron-min-lr", "RLC305",
            "With the Megatron trainer `models.policy_trainer.optimizer.min_lr` is at most `lr`: ChatLearn's Megatron "
            "decays the learning rate from lr to min_lr over its single training iteration, and Megatron's scheduler "
            "refuses a floor above the peak when the trainer starts.",
            keys=[f"{PT}.optimizer.min_lr", f"{PT}.optimizer.lr"])
def _megatron_min_lr(cfg: Any, ctx: Any):
    t = cfg.models.policy_trainer
    opt = t.optimizer
    if isinstance(t, MegatronPolicyTrainer) and opt.min_lr > opt.lr:
        # megatron/core/optimizer_param_scheduler.py OptimizerParamScheduler: `assert self.max_lr >= self.min_lr`.
        yield ctx.error("RLC305", f"{PT}.optimizer.min_lr",
                        f"{PT}.optimizer.min_lr ({opt.min_lr}) is above {PT}.optimizer.lr ({opt.lr}): Megatron's "
                        f"learning-rate scheduler refuses it when ChatLearn's trainer starts (ChatLearn accepts it at "
                        f"load; rlcfg is stricter and says so before launch)",
                        hint=f"set min_lr to at most {opt.lr} (equal to lr keeps the rate constant)",
                        related=[f"{PT}.optimizer.lr"])


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
    ledger_complete = True

    def variants(self) -> dict[str, type[Section]]:
        return {"fsdp": ChatLearnFSDP, "megatron": ChatLearnMegatron}

    def typed_overrides(self, overrides: list, root: type[Section], release: str | None) -> tuple[list, list]:
        from rlcfg.schema.chatlearn_overrides import typed_overrides

        return typed_overrides(overrides, root, release)

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
