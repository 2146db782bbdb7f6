"""The ChatLearn dialect: `runtime_args` plus `models.{policy_trainer, ref_policy, policy, reward}`.

Spec: ChatLearn's config reference (v1.2.0 and HEAD, the Hydra-structured "v2" config). The training backend,
`runtime_args.train_backend`, decides which variant of `policy_trainer` and `ref_policy` applies (FSDP or
Megatron-core), so the dialect has two roots. Overrides are OmegaConf dotlist (`a.b=c`), as ChatLearn reads them.
"""

from __future__ import annotations

from math import gcd
from typing import Any, Literal

from rlcfg.schema.base import REQUIRED, Dialect, RuleSet, Section, param, section

MODEL_NAMES = ("policy_trainer", "ref_policy", "policy", "reward")


# ---- runtime_args -------------------------------------------------------------------------------------------


class LogArgs(Section):
    log_dir: str = param("${runtime_args.output_dir}", description="Directory for ChatLearn's log files.")
    enable_tensorboard: bool = param(False, description="Write TensorBoard event files.")
    tensorboard_dir: str | None = param(
        None, description="Where TensorBoard files go; when null ChatLearn uses `<log_dir>/tensorboard`.")
    enable_wandb: bool = param(False, description="Log metrics to Weights & Biases. The job's machine must be logged in "
                                                 "(`wandb login` or WANDB_API_KEY).")
    wandb_project: str | None = param("your_wandb_project", description="Weights & Biases project name.")
    wandb_dir: str | None = param("${runtime_args.output_dir}", description="Directory for Weights & Biases files; "
                                                                           "when null ChatLearn uses `<log_dir>/wandb`.")
    wandb_name: str | None = param("${runtime_args.exp_name}", description="Weights & Biases run name.")
    wandb_id: str | None = param("${runtime_args.exp_name}", description="Weights & Biases run id; reusing an id "
                                                                        "continues that run.")
    wandb_resume: Literal["allow", "must", "never", "auto"] = param(
        "allow", description="Weights & Biases resume mode for `wandb_id`.")


class RuntimeArgs(Section):
    train_backend: Literal["fsdp", "megatron"] = param(
        "fsdp", description="Training backend: `fsdp` (PyTorch FSDP) or `megatron` (Megatron-core). It also selects "
                            "which keys `models.policy_trainer` and `models.ref_policy` accept.")
    rollout_backend: Literal["vllm", "sglang"] = param("vllm", description="Rollout (generation) engine.")
    exp_name: str = param("grpo_fsdp", description="Experiment name, used for logging metrics.")
    colocation: list[str] | list[list[str]] = param(
        ["policy", "policy_trainer", "ref_policy"],
        description="Models that share the same GPUs and run one after another. A flat list is one group; a list "
                    "of lists gives several groups. Names are those under `models`.")
    concurrent_setup: bool = param(False, description="Set up the models concurrently rather than one by one.")
    debug: bool = param(False, description="Log debug information.")
    nsys: bool = param(False, description="Emit NVTX ranges for Nsight Systems profiling.")
    output_dir: str = param("your_output_dir", description="Directory for all intermediate training results.")
    profiler_dir: str | None = param(None, description="Directory for profiler traces.")
    data_path: str = param("your_data_path", description="Training data: a file or directory, or several separated "
                                                         "by commas. Each must exist on the machine that runs the job.")
    eval_data_path: str | None = param("your_eval_data_path", description="Evaluation data path.")
    data_checkpoint_path: str | None = param(
        "${runtime_args.output_dir}/data_checkpoint_path/",
        description="Where the data loader's checkpoints are saved (for resuming).")
    num_episode: int = param(200, ge=1, description="Total number of training episodes. Each episode rolls out "
                                                    "`sample_per_episode` samples and makes several weight updates.")
    sample_per_episode: int = param(512, ge=1, description="Training samples per episode, across all actors "
                                                           "(prompts × `models.policy.num_inference_per_prompt`).")
    num_training_epoch: int = param(1, ge=1, description="Training passes over each episode's samples.")
    train_global_batch_size: int = param(
        512, ge=1, description="Samples per optimizer step, across all data-parallel ranks; each episode is split "
                               "into `sample_per_episode / train_global_batch_size` steps.")
    train_micro_batch_size: int = param(
        REQUIRED, ge=1, description="Samples per forward/backward pass on each data-parallel rank (gradients are "
                                    "accumulated over micro-batches). ChatLearn has no default: it must be set.")
    num_inference_per_prompt: int = param(
        32, ge=1, description="Responses per prompt as the advantage computation reads it. ChatLearn keeps this apart "
                              "from `models.policy.num_inference_per_prompt` (used by rollout and validation); the two "
                              "should be equal.")
    save_episode_interval: int = param(200, ge=1, description="Save a checkpoint every this many episodes.")
    enable_resume_training: bool = param(True, description="Resume from `data_checkpoint_path` when it holds a checkpoint.")
    data_shuffle: bool = param(True, description="Shuffle the dataset in each epoch.")
    data_rerank: bool = param(True, description="Spread replicas of the same sample over different rollout actors.")
    data_ratio: list[int] = param([], description="With several comma-separated data paths: how many samples of each "
                                                  "to draw per episode.")
    max_replay_episode: int = param(0, ge=-1, description="Episodes kept for replay: 0 disables replay, -1 replays all.")
    replay_episode_offset: int = param(0, ge=0, description="Start replay after this many episodes.")
    stream_data_loader_type: Literal["fixed", "dynamic"] = param(
        "fixed", description="How the streaming data loader forms batches: `fixed` batches of a set size, or "
                             "`dynamic` batches that follow the samples available.")
    eval_episode_interval: int = param(5, ge=0, description="Evaluate every this many episodes; 0 disables evaluation.")
    enable_eval_before_training: bool = param(False, description="Evaluate once before training starts.")
    cpu_schedule_strategy: Literal["PACK", "SPREAD"] = param(
        "SPREAD", description="Ray placement of CPU-only models: PACK on one node or SPREAD over nodes.")
    log_args_dict: LogArgs = section(LogArgs, description="Logging: log directory, TensorBoard, Weights & Biases.")


# ---- models -------------------------------------------------------------------------------------------------


class FreeGpuMemory(Section):
    offload_weights: bool = param(False, description="Move weights to CPU memory between this model's phases; needed "
                                                     "when the model shares GPUs with others (colocation).")
    free_grad_buffers: bool = param(False, description="Free gradient buffers between training phases (Megatron).")
    offload_optimizer_states: bool = param(False, description="Move optimizer states to CPU memory between training "
                                                              "phases.")


class TrainerFreeGpuMemory(FreeGpuMemory):
    offload_weights: bool = param(True, description="Move weights to CPU memory between phases; set all three to true "
                                                    "for colocation (ChatLearn does not support non-colocated training yet).")
    free_grad_buffers: bool = param(True, description="Free gradient buffers between training phases.")
    offload_optimizer_states: bool = param(True, description="Move optimizer states to CPU memory between training phases.")


class InferenceFreeGpuMemory(FreeGpuMemory):
    offload_weights: bool = param(True, description="Move weights to CPU memory between phases; recommended when "
                                                    "colocated.")


class Optimizer(Section):
    lr: float = param(2e-6, gt=0, description="Learning rate.")
    clip_grad: float = param(1.0, ge=0, description="Gradient clipping: the global gradient norm is scaled down to "
                                                    "this value.")
    weight_decay: float = param(0.01, ge=0, description="AdamW weight decay.")
    adam_beta1: float = param(0.9, ge=0, lt=1, description="AdamW beta1.")
    adam_beta2: float = param(0.999, ge=0, lt=1, description="AdamW beta2.")
    min_lr: float = param(0.0, ge=0, description="Floor of the learning-rate schedule.")


class ModelCommon(Section):
    num_gpu: int = param(1, ge=0, description="GPUs for this model in total (across all nodes).")
    num_cpu: int = param(0, ge=0, description="CPUs for this model in total (CPU-only models).")
    gpu_per_process: int | None = param(1, ge=1, description="GPUs per Ray actor.")
    cpu_per_process: int | None = param(None, ge=1, description="CPUs per Ray actor.")
    trainable: bool = param(False, description="Whether this model is trained.")
    generation_batch_size: int = param(8, ge=1, description="Samples per forward pass.")
    packing: bool = param(False, description="Regroup samples into batches of at most `max_token_in_packing` tokens, "
                                             "each packed into one sequence; `generation_batch_size` and "
                                             "`train_micro_batch_size` are then ignored.")
    max_token_in_packing: int = param(32768, ge=1, description="Token budget of one packed batch.")
    load: str | None = param("your_hf_model_path", description="Path of the checkpoint to load.")
    seed: int = param(1234, description="Random seed.")
    sync_frequency: int = param(1, ge=1, description="Synchronise parameters every this many updates.")


class TrainerCommon(ModelCommon):
    free_gpu_memory: TrainerFreeGpuMemory = section(TrainerFreeGpuMemory, description="GPU memory freed between phases.")
    optimizer: Optimizer = section(Optimizer, description="Optimizer settings.")
    trainable: bool = param(True, description="Must be true: this model is the one being trained.")
    generation_batch_size: int = param(8, ge=1, description="Samples per forward pass when computing old log-probs.")
    train_micro_batch_size: int = param(
        "${runtime_args.train_micro_batch_size}", ge=1,
        description="Samples per forward/backward pass on each data-parallel rank. ChatLearn's batch checks read "
                    "`runtime_args.train_micro_batch_size`; keep the two equal (the default links them).")
    pos_clip_ratio: float = param(0.2, ge=0, description="PPO clip range above 1 for positive advantages (GRPO).")
    neg_clip_ratio: float = param(0.2, ge=0, description="PPO clip range below 1 for negative advantages (GRPO).")
    entropy_coef: float = param(0.0, ge=0, description="Entropy bonus weight; above 0 adds an entropy loss.")
    kl_coef: float = param(0.0, ge=0, description="KL loss weight against the reference model; above 0 enables it.")
    num_gpu: int = param(1, ge=1, description="GPUs for training in total (across all nodes).")


class RefCommon(ModelCommon):
    free_gpu_memory: InferenceFreeGpuMemory = section(InferenceFreeGpuMemory, description="GPU memory freed between phases.")
    generation_batch_size: int = param(8, ge=1, description="Samples per forward pass when computing reference "
                                                           "log-probs; may differ from the trainer's.")
    num_gpu: int = param("${models.policy_trainer.num_gpu}", ge=1, description="GPUs for the reference model in total.")
    trainable: bool = param(False, description="Must be false: the reference model only runs inference.")
    load: str | None = param("${models.policy_trainer.load}", description="Checkpoint of the reference model; normally "
                                                                         "the policy's starting checkpoint.")
    packing: bool = param("${models.policy_trainer.packing}", description="Sequence packing, as for the trainer.")
    max_token_in_packing: int = param("${models.policy_trainer.max_token_in_packing}", ge=1,
                                      description="Token budget of one packed batch.")


class FSDPOptions(Section):
    ulysses_sequence_parallel_size: int = param(
        1, ge=1, description="Ulysses sequence parallelism when above 1 (Qwen3 and Qwen2.5 dense models).")
    meta_init: bool = param(False, description="Initialise on the meta device and broadcast weights from rank 0.")
    groupgemm: bool = param(False, description="Replace the sequential MoE MLP with GroupGEMM (Qwen3-MoE only).")
    use_expandable_segments: bool = param(False, description="Use expandable segments in PyTorch's CUDA allocator.")


class FSDPPolicyTrainer(TrainerCommon, FSDPOptions):
    fsdp_size: int = param("${models.policy_trainer.num_gpu}", ge=1,
                           description="FSDP sharding group size. ChatLearn's docs say it can be set; its code "
                                       "always uses `num_gpu` instead (rlcfg warns when they differ).")
    gradient_checkpointing: bool = param(True, description="Recompute activations in the backward pass to save memory.")
    save_hf: bool = param(True, description="Also save Hugging Face format checkpoints during training.")


class FSDPRefPolicy(RefCommon, FSDPOptions):
    fsdp_size: int = param("${models.policy_trainer.num_gpu}", ge=1,
                           description="FSDP sharding group size; ChatLearn's code always uses `num_gpu`.")
    ulysses_sequence_parallel_size: int = param(1, ge=1, description="Ulysses sequence parallel size of the "
                                                                     "reference model.")


RecomputeGranularity = Literal["sel", "selective", "full"]


class MegatronOptions(Section):
    bf16: bool = param(True, description="Train in bf16; false means fp32.")
    seq_length: int = param(2048, ge=1, description="Sequence length for Megatron training; must equal the length "
                                                    "used for generation. Ignored with packing.")
    tokenizer_type: str = param("HuggingFaceTokenizer", description="Megatron tokenizer type; HuggingFaceTokenizer "
                                                                    "fits most cases.")
    tokenizer_model: str | None = param("${models.policy.load}", description="Tokenizer path for Megatron training.")
    tensor_model_parallel_size: int = param(1, ge=1, description="Tensor parallel size.")
    pipeline_model_parallel_size: int = param(1, ge=1, description="Pipeline parallel size.")
    context_parallel_size: int = param(1, ge=1, description="Context parallel size (splits the sequence across GPUs).")
    expert_tensor_parallel_size: int | None = param(None, ge=1, description="Tensor parallel size inside experts "
                                                                            "(MoE); null follows the tensor parallel size.")
    expert_model_parallel_size: int = param(1, ge=1, description="Expert parallel size (MoE).")
    decoder_first_pipeline_num_layers: int | None = param(
        None, ge=1, description="Layers of the first pipeline stage, when the layer count does not divide evenly.")
    decoder_last_pipeline_num_layers: int | None = param(
        None, ge=1, description="Layers of the last pipeline stage, when the layer count does not divide evenly.")
    moe_router_force_load_balancing: bool = param(False, description="Force balanced MoE routing (for benchmarking).")
    sequence_parallel: bool = param(True, description="Megatron sequence parallelism; only meaningful with tensor "
                                                      "parallel size above 1.")


class MegatronPolicyTrainer(TrainerCommon, MegatronOptions):
    load: str | None = param("your_megatron_model_path", description="Path of the Megatron checkpoint to load.")
    virtual_pipeline_model_parallel_size: int | None = param(
        None, ge=1, description="Virtual pipeline stages per GPU (interleaved schedule); needs pipeline parallel > 1.")
    use_distributed_optimizer: bool = param(True, description="Shard optimizer states over data-parallel ranks "
                                                              "(recommended).")
    recompute_granularity: RecomputeGranularity | None = param(
        None, description="Activation recomputation: null (none), `selective` or `full`. The docs spell selective "
                          "`sel`, which rlcfg accepts with a warning: Megatron-core expects `selective`.")
    use_group_sequence_policy: bool = param(False, description="Use GSPO (sequence-level importance ratios).")


class MegatronRefPolicy(RefCommon, MegatronOptions):
    seq_length: int = param("${models.policy_trainer.seq_length}", ge=1, description="Sequence length; keep it equal to "
                                                                                     "the trainer's.")
    tensor_model_parallel_size: int = param("${models.policy_trainer.tensor_model_parallel_size}", ge=1,
                                            description="Tensor parallel size; keep it equal to the trainer's.")
    pipeline_model_parallel_size: int = param("${models.policy_trainer.pipeline_model_parallel_size}", ge=1,
                                              description="Pipeline parallel size.")
    context_parallel_size: int = param("${models.policy_trainer.context_parallel_size}", ge=1,
                                       description="GPUs each sequence is split across (context parallelism); "
                                                   "follows the trainer's.")
    expert_tensor_parallel_size: int | None = param("${models.policy_trainer.expert_tensor_parallel_size}", ge=1,
                                                    description="Tensor parallel size inside the MoE experts; follows "
                                                                "the trainer's.")
    expert_model_parallel_size: int = param("${models.policy_trainer.expert_model_parallel_size}", ge=1,
                                            description="Expert parallel size.")
    decoder_first_pipeline_num_layers: int | None = param(
        "${models.policy_trainer.decoder_first_pipeline_num_layers}", ge=1, description="Layers of the first stage.")
    decoder_last_pipeline_num_layers: int | None = param(
        "${models.policy_trainer.decoder_last_pipeline_num_layers}", ge=1, description="Layers of the last stage.")
    moe_router_force_load_balancing: bool = param("${models.policy_trainer.moe_router_force_load_balancing}",
                                                  description="Force balanced MoE routing.")


class Policy(ModelCommon):
    free_gpu_memory: InferenceFreeGpuMemory = section(InferenceFreeGpuMemory, description="GPU memory freed between phases.")
    generation_batch_size: int = param(256, ge=1, description="The rollout engine's `max_num_seqs` (sequences batched "
                                                             "together).")
    num_gpu: int = param("${models.policy_trainer.num_gpu}", ge=1, description="GPUs for rollout in total.")
    tensor_model_parallel_size: int = param(1, ge=1, description="Tensor parallel size of each rollout engine.")
    pipeline_model_parallel_size: int = param(1, ge=1, description="Pipeline parallel size of the rollout engine; "
                                                                   "ChatLearn supports only 1.")
    expert_model_parallel_size: int = param(1, ge=1, description="Expert parallel size of the rollout engine; "
                                                                 "ChatLearn supports only 1.")
    trainable: bool = param(False, description="Must be false: the rollout model is not trained.")
    load: str | None = param("${models.policy_trainer.load}", description="Checkpoint for rollout; for GRPO the same "
                                                                         "as `models.policy_trainer.load`.")
    num_inference_per_prompt: int = param(32, ge=1, description="Responses generated per prompt (the GRPO group size).")
    seq_length: int = param(2048, ge=1, description="Maximum sequence length of rollout (prompt and response).")
    max_seq_len_to_capture: int = param(2348, ge=1, description="Longest sequence the engine captures in CUDA graphs; "
                                                                "must be >= `seq_length`.")
    max_new_tokens: int = param(2048, ge=1, description="Maximum response length.")
    max_prompt_tokens_length: int | None = param(
        None, ge=1, description="Newer ChatLearn versions: maximum prompt length. When both this and "
                                "`max_response_tokens_length` are set, ChatLearn overwrites `seq_length` and "
                                "`max_seq_len_to_capture` with their sum.")
    max_response_tokens_length: int | None = param(None, ge=1, description="Newer ChatLearn versions: maximum response "
                                                                           "length (see `max_prompt_tokens_length`).")
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
    enable_thinking: bool = param(False, description="Enable Qwen3's thinking mode in the chat template.")
    gpu_memory_utilization: float = param(0.8, gt=0, le=1, description="Share of GPU memory the rollout engine may use "
                                                                       "(weights, activations and KV cache). Be careful "
                                                                       "when colocated.")
    max_num_batched_tokens: int = param(32768, ge=1, description="Token budget of one engine step.")
    enforce_eager: bool = param(False, description="Disable CUDA graphs in the rollout engine.")
    enable_stage_resume: bool = param(False, description="Resume rollout stages after a restart.")


class Reward(Section):
    num_cpu: int = param(2, ge=1, description="CPUs for the rule-based reward actors in total.")
    cpu_per_process: int = param(1, ge=1, description="CPUs per reward actor.")
    num_gpu: int = param(0, ge=0, description="GPUs for the reward model; 0 for rule-based rewards.")
    generation_batch_size: int = param(256, ge=1, description="Samples per reward computation.")


class FSDPModels(Section):
    policy_trainer: FSDPPolicyTrainer = section(FSDPPolicyTrainer, description="The model being trained (FSDP).")
    ref_policy: FSDPRefPolicy = section(FSDPRefPolicy, description="The frozen reference model for the KL term (FSDP).")
    policy: Policy = section(Policy, description="The rollout model (vLLM or SGLang).")
    reward: Reward = section(Reward, description="The rule-based reward actors.")


class MegatronModels(Section):
    policy_trainer: MegatronPolicyTrainer = section(MegatronPolicyTrainer, description="The model being trained "
                                                                                       "(Megatron-core).")
    ref_policy: MegatronRefPolicy = section(MegatronRefPolicy, description="The frozen reference model (Megatron-core).")
    policy: Policy = section(Policy, description="The rollout model (vLLM or SGLang).")
    reward: Reward = section(Reward, description="The rule-based reward actors.")


class ChatLearnFSDP(Section):
    runtime_args: RuntimeArgs = section(RuntimeArgs, description="Training-wide settings: backends, paths, batch sizes, "
                                                                 "schedule, logging.")
    models: FSDPModels = section(FSDPModels, description="The four GRPO models.")


class ChatLearnMegatron(Section):
    runtime_args: RuntimeArgs = section(RuntimeArgs, description="Training-wide settings: backends, paths, batch sizes, "
                                                                 "schedule, logging.")
    models: MegatronModels = section(MegatronModels, description="The four GRPO models.")


# ---- derived quantities -------------------------------------------------------------------------------------


def trainer_dp(cfg: Any) -> int:
    """Data-parallel size of the trainer: GPUs / (Ulysses SP) for FSDP, GPUs / (TP·CP·PP) for Megatron."""
    t = cfg.models.policy_trainer
    if isinstance(t, FSDPPolicyTrainer):
        return max(t.num_gpu // t.ulysses_sequence_parallel_size, 1)
    return max(t.num_gpu // (t.tensor_model_parallel_size * t.context_parallel_size * t.pipeline_model_parallel_size), 1)


def ref_dp(cfg: Any) -> int:
    """Data-parallel size of the reference model. A Megatron reference model is split into replicas of
    lcm(TP·CP, ETP·EP)·PP GPUs, each with its own data-parallel ranks."""
    r = cfg.models.ref_policy
    if isinstance(r, FSDPRefPolicy):
        return max(r.num_gpu // r.ulysses_sequence_parallel_size, 1)
    tp_cp = r.tensor_model_parallel_size * r.context_parallel_size
    etp_ep = (r.expert_tensor_parallel_size or r.tensor_model_parallel_size) * r.expert_model_parallel_size
    replica = tp_cp * etp_ep // gcd(tp_cp, etp_ep) * r.pipeline_model_parallel_size
    replicas = max(r.num_gpu // replica, 1)
    return max(replicas * (r.num_gpu // (replicas * tp_cp * r.pipeline_model_parallel_size)), 1)


def colocation_groups(cfg: Any) -> list[list[str]]:
    groups = cfg.runtime_args.colocation
    if groups and all(isinstance(g, str) for g in groups):
        return [list(groups)]
    return [list(g) for g in groups]


# ---- rules --------------------------------------------------------------------------------------------------

rules = RuleSet()
RT = "runtime_args"
PT = "models.policy_trainer"
REF = "models.ref_policy"
POL = "models.policy"


def _multiples(n: int, limit: int = 3) -> str:
    return ", ".join(str(n * k) for k in range(1, limit + 1))


def _nearest_multiples(value: int, n: int) -> str:
    """The multiples of n on either side of value, e.g. "1984 or 2016"."""
    below = value // n * n
    return f"{below} or {below + n}" if below else str(n)


@rules.rule("chatlearn/episode-divides-into-global-batches", "RLC300",
            "`sample_per_episode` is a multiple of `train_global_batch_size`.",
            keys=[f"{RT}.sample_per_episode", f"{RT}.train_global_batch_size"])
def _episode_global_batches(cfg: Any, ctx: Any):
    r = cfg.runtime_args
    if r.sample_per_episode % r.train_global_batch_size:
        yield ctx.error("RLC300", f"{RT}.sample_per_episode",
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


@rules.rule("chatlearn/global-batch-divides-over-dp", "RLC300",
            "`train_global_batch_size` divides evenly over the trainer's data-parallel ranks.",
            keys=[f"{RT}.train_global_batch_size", f"{PT}.num_gpu"])
def _global_batch_dp(cfg: Any, ctx: Any):
    gb = cfg.runtime_args.train_global_batch_size
    dp = trainer_dp(cfg)
    if gb % dp:
        yield ctx.error("RLC300", f"{RT}.train_global_batch_size",
                        f"runtime_args.train_global_batch_size ({gb}) does not divide over the trainer's {dp} "
                        f"data-parallel ranks", hint=f"use a multiple of {dp}: {_multiples(dp)}",
                        related=[f"{PT}.num_gpu"])


@rules.rule("chatlearn/generation-batch-multiple", "RLC300",
            "Without packing, each data-parallel rank's share of an episode is a multiple of the model's "
            "`generation_batch_size` (trainer and reference model).",
            keys=[f"{RT}.sample_per_episode", f"{PT}.generation_batch_size", f"{REF}.generation_batch_size"])
def _generation_batch(cfg: Any, ctx: Any):
    spe = cfg.runtime_args.sample_per_episode
    for path, model, dp in ((PT, cfg.models.policy_trainer, trainer_dp(cfg)), (REF, cfg.models.ref_policy, ref_dp(cfg))):
        if model.packing or spe % dp:
            continue
        share = spe // dp
        if share % model.generation_batch_size:
            yield ctx.error("RLC300", f"{path}.generation_batch_size",
                            f"{path}.generation_batch_size ({model.generation_batch_size}) does not divide the "
                            f"{share} samples each of its {dp} data-parallel ranks gets per episode "
                            f"(sample_per_episode {spe} / {dp})",
                            hint=f"use a generation_batch_size that divides {share}, or enable packing",
                            related=[f"{RT}.sample_per_episode"])


@rules.rule("chatlearn/micro-batch-multiple", "RLC300",
            "Without packing, each data-parallel rank's share of a global batch is a multiple of "
            "`runtime_args.train_micro_batch_size`.",
            keys=[f"{RT}.train_global_batch_size", f"{RT}.train_micro_batch_size"])
def _micro_batch(cfg: Any, ctx: Any):
    r = cfg.runtime_args
    dp = trainer_dp(cfg)
    if cfg.models.policy_trainer.packing or r.train_global_batch_size % dp:
        return
    share = r.train_global_batch_size // dp
    if share % r.train_micro_batch_size:
        yield ctx.error("RLC300", f"{RT}.train_micro_batch_size",
                        f"runtime_args.train_micro_batch_size ({r.train_micro_batch_size}) does not divide the {share} "
                        f"samples each data-parallel rank gets per global batch (train_global_batch_size "
                        f"{r.train_global_batch_size} / {dp} ranks)",
                        hint=f"use a micro batch size that divides {share}", related=[f"{RT}.train_global_batch_size"])


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
                          hint="set only runtime_args.train_micro_batch_size; the trainer's value defaults to it",
                          related=[f"{RT}.train_micro_batch_size"])


@rules.rule("chatlearn/group-size-linked", "RLC305",
            "`runtime_args.num_inference_per_prompt` (advantages) equals `models.policy.num_inference_per_prompt` "
            "(rollout).", keys=[f"{RT}.num_inference_per_prompt", f"{POL}.num_inference_per_prompt"])
def _group_size_linked(cfg: Any, ctx: Any):
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
        yield ctx.error("RLC400", f"{POL}.tensor_model_parallel_size",
                        f"models.policy.num_gpu ({p.num_gpu}) is not a multiple of "
                        f"models.policy.tensor_model_parallel_size ({p.tensor_model_parallel_size})",
                        hint=f"each rollout engine takes {p.tensor_model_parallel_size} GPUs; use a num_gpu of "
                             f"{_multiples(p.tensor_model_parallel_size)}", related=[f"{POL}.num_gpu"])


@rules.rule("chatlearn/rollout-replicas-cover-episode", "RLC300",
            "`sample_per_episode` divides over the rollout engines (num_gpu / TP) and is at least their number.",
            keys=[f"{RT}.sample_per_episode", f"{POL}.num_gpu", f"{POL}.tensor_model_parallel_size"])
def _rollout_replicas(cfg: Any, ctx: Any):
    p = cfg.models.policy
    if p.num_gpu % p.tensor_model_parallel_size:
        return
    engines = p.num_gpu // p.tensor_model_parallel_size
    spe = cfg.runtime_args.sample_per_episode
    if spe % engines or spe < engines:
        yield ctx.error("RLC300", f"{RT}.sample_per_episode",
                        f"runtime_args.sample_per_episode ({spe}) does not divide over the {engines} rollout engines "
                        f"(models.policy.num_gpu {p.num_gpu} / TP {p.tensor_model_parallel_size})",
                        hint=f"use a multiple of {engines}", related=[f"{POL}.num_gpu"])


@rules.rule("chatlearn/rollout-not-trainable", "RLC306", "`models.policy` and `models.ref_policy` are not trainable; "
            "`models.policy_trainer` is.", keys=[f"{POL}.trainable", f"{REF}.trainable", f"{PT}.trainable"])
def _trainable(cfg: Any, ctx: Any):
    for path, model, expected in ((POL, cfg.models.policy, False), (REF, cfg.models.ref_policy, False),
                                  (PT, cfg.models.policy_trainer, True)):
        if model.trainable is not expected:
            yield ctx.error("RLC306", f"{path}.trainable",
                            f"{path}.trainable is {str(model.trainable).lower()}; ChatLearn requires "
                            f"{str(expected).lower()} for this model",
                            hint=f"set {path}.trainable: {str(expected).lower()}")


@rules.rule("chatlearn/rollout-no-pp-ep", "RLC306", "The rollout model supports neither pipeline nor expert "
            "parallelism (both must be 1).",
            keys=[f"{POL}.pipeline_model_parallel_size", f"{POL}.expert_model_parallel_size"])
def _rollout_pp_ep(cfg: Any, ctx: Any):
    p = cfg.models.policy
    for key in ("pipeline_model_parallel_size", "expert_model_parallel_size"):
        value = getattr(p, key)
        if value != 1:
            yield ctx.error("RLC306", f"{POL}.{key}", f"models.policy.{key} is {value}; ChatLearn's rollout supports "
                                                      f"only 1", hint="use tensor_model_parallel_size to split the model")


@rules.rule("chatlearn/capture-covers-sequence", "RLC303",
            "`models.policy.max_seq_len_to_capture` >= `models.policy.seq_length`.",
            keys=[f"{POL}.max_seq_len_to_capture", f"{POL}.seq_length"])
def _capture(cfg: Any, ctx: Any):
    p = cfg.models.policy
    if p.max_prompt_tokens_length is not None and p.max_response_tokens_length is not None:
        return  # ChatLearn derives both from the prompt and response lengths (see the rewrite rule)
    if p.max_seq_len_to_capture < p.seq_length:
        yield ctx.error("RLC303", f"{POL}.max_seq_len_to_capture",
                        f"models.policy.max_seq_len_to_capture ({p.max_seq_len_to_capture}) is smaller than "
                        f"models.policy.seq_length ({p.seq_length}): longer sequences would fall out of CUDA graphs",
                        hint=f"set max_seq_len_to_capture to at least {p.seq_length}",
                        related=[f"{POL}.seq_length"])


@rules.rule("chatlearn/new-tokens-fit-sequence", "RLC303",
            "`models.policy.max_new_tokens` is smaller than `models.policy.seq_length` (room for the prompt).",
            keys=[f"{POL}.max_new_tokens", f"{POL}.seq_length"])
def _new_tokens(cfg: Any, ctx: Any):
    p = cfg.models.policy
    if ctx.is_set(f"{POL}.max_new_tokens") and p.max_new_tokens >= p.seq_length:
        yield ctx.warning("RLC303", f"{POL}.max_new_tokens",
                          f"models.policy.max_new_tokens ({p.max_new_tokens}) leaves no room for the prompt within "
                          f"models.policy.seq_length ({p.seq_length})",
                          hint="make seq_length the prompt budget plus max_new_tokens", related=[f"{POL}.seq_length"])


@rules.rule("chatlearn/sequence-lengths-derived", "RLC304",
            "When `max_prompt_tokens_length` and `max_response_tokens_length` are both set, ChatLearn overwrites "
            "`seq_length` and `max_seq_len_to_capture` with their sum.",
            keys=[f"{POL}.seq_length", f"{POL}.max_seq_len_to_capture"])
def _lengths_derived(cfg: Any, ctx: Any):
    p = cfg.models.policy
    if p.max_prompt_tokens_length is None or p.max_response_tokens_length is None:
        return
    total = p.max_prompt_tokens_length + p.max_response_tokens_length
    for key in ("seq_length", "max_seq_len_to_capture"):
        if ctx.is_set(f"{POL}.{key}") and getattr(p, key) != total:
            yield ctx.warning("RLC304", f"{POL}.{key}",
                              f"ChatLearn replaces models.policy.{key} ({getattr(p, key)}) with "
                              f"max_prompt_tokens_length + max_response_tokens_length = {total}",
                              hint=f"remove {key}, or set it to {total}",
                              related=[f"{POL}.max_prompt_tokens_length", f"{POL}.max_response_tokens_length"])


@rules.rule("chatlearn/fsdp-size-is-num-gpu", "RLC304",
            "ChatLearn ignores `fsdp_size` and shards over all of the model's GPUs (`num_gpu`).",
            keys=[f"{PT}.fsdp_size", f"{REF}.fsdp_size"])
def _fsdp_size(cfg: Any, ctx: Any):
    for path in (PT, REF):
        model = getattr(cfg.models, path.split(".")[1])
        if isinstance(model, (FSDPPolicyTrainer, FSDPRefPolicy)) and ctx.is_set(f"{path}.fsdp_size") \
                and model.fsdp_size != model.num_gpu:
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
        if isinstance(model, (FSDPPolicyTrainer, FSDPRefPolicy)) and model.num_gpu % model.ulysses_sequence_parallel_size:
            yield ctx.error("RLC400", f"{path}.ulysses_sequence_parallel_size",
                            f"{path}.num_gpu ({model.num_gpu}) is not a multiple of "
                            f"ulysses_sequence_parallel_size ({model.ulysses_sequence_parallel_size})",
                            hint=f"use a sequence parallel size that divides {model.num_gpu}",
                            related=[f"{path}.num_gpu"])


@rules.rule("chatlearn/megatron-parallel-divides-gpus", "RLC400",
            "Megatron models' GPUs are a multiple of TP·CP·PP, and of EP·ETP·PP for MoE layers.",
            keys=[f"{PT}.tensor_model_parallel_size", f"{PT}.pipeline_model_parallel_size",
                  f"{PT}.context_parallel_size", f"{PT}.expert_model_parallel_size"])
def _megatron_divides(cfg: Any, ctx: Any):
    for path in (PT, REF):
        m = getattr(cfg.models, path.split(".")[1])
        if not isinstance(m, MegatronOptions):
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
                yield ctx.error("RLC400", f"{path}.{key}",
                                f"{path}.num_gpu ({m.num_gpu}) is not a multiple of {what} = {size}",
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
                                f"pipeline_model_parallel_size is 1",
                                hint=f"set pipeline_model_parallel_size above 1, or remove {key}",
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
            "divides it.", keys=[f"{PT}.gpu_per_process", f"{POL}.gpu_per_process", f"{REF}.gpu_per_process"])
def _gpu_per_process(cfg: Any, ctx: Any):
    for name in ("policy_trainer", "ref_policy", "policy"):
        m = getattr(cfg.models, name)
        if m.gpu_per_process and m.num_gpu and (m.gpu_per_process > m.num_gpu or m.num_gpu % m.gpu_per_process):
            yield ctx.error("RLC400", f"models.{name}.gpu_per_process",
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
                                f"(models are {', '.join(MODEL_NAMES)})",
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
            if name not in MODEL_NAMES or name == "reward":
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


@rules.rule("chatlearn/data-paths-exist", "RLC308",
            "Each comma-separated `data_path` / `eval_data_path` exists on the machine that runs the job "
            "(a warning here; an error under --strict).", keys=[f"{RT}.data_path", f"{RT}.eval_data_path"])
def _data_paths(cfg: Any, ctx: Any):
    for key in ("data_path", "eval_data_path"):
        value = getattr(cfg.runtime_args, key)
        if not value or not ctx.is_set(f"{RT}.{key}"):
            continue  # the documented placeholder default is reported as nothing but itself
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
    documents = "ChatLearn v1.2.0 / HEAD (the structured `runtime_args` + `models` config)"
    override_grammar = "dotlist"
    variant_key = "runtime_args.train_backend"
    rules = rules

    def variants(self) -> dict[str, type[Section]]:
        return {"fsdp": ChatLearnFSDP, "megatron": ChatLearnMegatron}

    def root(self, data: dict) -> type[Section]:
        runtime = data.get("runtime_args")
        backend = runtime.get("train_backend") if isinstance(runtime, dict) else None
        return ChatLearnMegatron if backend == "megatron" else ChatLearnFSDP

    def describe(self, config: Any) -> str:
        t, p = config.models.policy_trainer, config.models.policy
        backend = "FSDP" if isinstance(t, FSDPPolicyTrainer) else (
            f"Megatron (TP {t.tensor_model_parallel_size} × PP {t.pipeline_model_parallel_size})")
        engines = p.num_gpu // p.tensor_model_parallel_size
        rollout = {"vllm": "vLLM", "sglang": "SGLang"}[config.runtime_args.rollout_backend]
        gpus = f"{t.num_gpu} GPU{'s' if t.num_gpu != 1 else ''}"
        text = (f"{backend} training on {gpus} (DP {trainer_dp(config)}), {rollout} rollout "
                f"({engines} engine{'s' if engines != 1 else ''} × TP {p.tensor_model_parallel_size})")
        groups = [g for g in colocation_groups(config) if len(g) > 1]
        if groups:
            text += "; colocated: " + "; ".join(", ".join(g) for g in groups)
        return text


DIALECT = ChatLearnDialect()
