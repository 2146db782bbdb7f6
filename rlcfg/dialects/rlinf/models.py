"""RLinf's config sections, as rlcfg models them by hand: the keys its rules and lowering read, with their types,
defaults (RLinf's code defaults where the code fills a missing key), constraints and descriptions.

Each class is declared with the inventoried keys of its path too (inventoried.Inventoried): every other key
RLinf's example configs write or its code reads; a field declared here overrides the generated one of the same
key.
Keys that exist only in some releases say so with `releases=` (the names of `RLinfDialect.releases`).
"""

# Annotations are evaluated as the classes are defined, not postponed: see `Section` in rlcfg.schema.base.
from typing import Any, Literal

from rlcfg.schema.base import HONORED, REQUIRED, declare_fates, inert, param, refused, section, unread
from rlcfg.dialects.rlinf.inventoried import Inventoried

OLD = ("2025-08", "2025-10")  # rollout.model_dir / model_arch era
# The `rollout.model.*` layout of PR #409 (2025-12): the tags v0.1, v0.2, v0.3 and main after them.
TAGGED = ("v0.1", "v0.2", "v0.3", "main")
LATER = ("2025-10", *TAGGED)  # task_type reasoning, rollout.sglang / rollout.vllm sections

# The task types each release's `validate_cfg` dispatches on (2025-08 checks none, but only these two run).
TASK_TYPES = {
    "2025-08": ("math", "embodied"),
    "2025-10": ("embodied", "reasoning", "coding_online_rl"),
    "v0.1": ("embodied", "reasoning", "coding_online_rl"),
    "v0.2": ("embodied", "reasoning", "reasoning_eval", "coding_online_rl", "sft"),
    "v0.3": ("embodied", "embodied_eval", "reasoning", "reasoning_eval", "coding_online_rl", "sft", "offline"),
    "main": ("embodied", "embodied_eval", "reasoning", "reasoning_eval", "coding_online_rl", "sft", "offline"),
}
# The model families each release accepts: `rollout.model_arch` in SUPPORTED_MODEL_ARCHS (2025-08, 2025-10),
# `rollout.model.model_type` / `actor.model.model_type` registered in SupportedModel (from v0.1).
MODEL_TYPES = {
    "2025-08": ("qwen2.5", "openvla", "openvla_oft"),
    "2025-10": ("qwen2.5", "qwen2.5_vl", "openvla", "openvla_oft", "openpi"),
    "v0.1": ("qwen2.5", "qwen2.5_vl", "qwen3_moe", "openvla", "openvla_oft", "openpi", "mlp_policy", "gr00t"),
    "v0.2": ("qwen2.5", "qwen2.5_vl", "qwen3", "qwen3_vl", "qwen3_moe", "qwen3_vl_moe", "openvla", "openvla_oft",
             "openpi", "mlp_policy", "gr00t", "dexbotic_pi", "cnn_policy", "flow_policy", "cma"),
    "v0.3": ("qwen2.5", "qwen2.5_vl", "qwen3", "qwen3_vl", "qwen3_moe", "qwen3_vl_moe", "openvla", "openvla_oft",
             "openpi", "starvla", "mlp_policy", "gr00t", "gr00t_n1d6", "gr00t_n1d7", "dexbotic_pi", "dexbotic_dm0",
             "dreamzero", "cnn_policy", "flow_policy", "cma", "lingbotvla", "abot_m0", "resnet", "cfg_model",
             "value_model"),
    "main": ("qwen2.5", "qwen2.5_vl", "qwen3", "qwen3_vl", "qwen3_moe", "qwen3_vl_moe", "deepseek_v3", "openvla",
             "openvla_oft", "molmoact2", "openpi", "openpi_rlinf", "starvla", "mlp_policy", "rlt_mlp_policy",
             "rlt_td3_mlp_policy", "gr00t", "gr00t_n1d6", "gr00t_n1d7", "dexbotic_pi", "dexbotic_dm0", "dreamzero",
             "cnn_policy", "flow_policy", "cma", "lingbotvla", "abot_m0", "resnet", "cfg_model", "recap_value_model",
             "steam_value_model", "sd3", "wan22_ti2v_5b", "evo1"),
}
# The embodied runner's models: v0.1 and v0.2 take SupportedModel's "embodied" category, v0.3 its EMBODIED_MODEL
# set, main that set and the diffusion models.
EMBODIED_MODEL_TYPES = {
    "v0.1": ("openvla", "openvla_oft", "openpi", "mlp_policy", "gr00t"),
    "v0.2": ("openvla", "openvla_oft", "openpi", "mlp_policy", "gr00t", "dexbotic_pi", "cnn_policy", "flow_policy",
             "cma"),
    "v0.3": ("openvla", "openvla_oft", "openpi", "starvla", "mlp_policy", "gr00t", "dexbotic_pi", "dexbotic_dm0",
             "dreamzero", "cnn_policy", "flow_policy", "cma", "lingbotvla", "abot_m0", "resnet", "gr00t_n1d6",
             "gr00t_n1d7", "cfg_model", "value_model"),
    "main": ("openvla", "openvla_oft", "openpi", "openpi_rlinf", "starvla", "mlp_policy", "rlt_mlp_policy",
             "rlt_td3_mlp_policy", "gr00t", "dexbotic_pi", "dexbotic_dm0", "dreamzero", "cnn_policy", "flow_policy",
             "cma", "lingbotvla", "abot_m0", "resnet", "gr00t_n1d6", "gr00t_n1d7", "cfg_model", "recap_value_model",
             "steam_value_model", "evo1", "sd3", "wan22_ti2v_5b"),
}
Precision = Literal["bf16", "bf16-mixed", "fp16", "16", "16-mixed", "fp32", "32", "32-true", 16, 32]
Activation = Literal["gelu", "geglu", "reglu", "swiglu", "squared-relu", "fast-geglu", "fast-swiglu", "fast-reglu",
                     "approx-gelu"]


# ---- cluster ------------------------------------------------------------------------------------------------


class Cluster(Inventoried, inventory="cluster"):
    num_nodes: int = param(1, ge=1, description="Physical nodes to use for training.")
    num_gpus_per_node: int | None = param(
        None, ge=1,
        description="GPUs per node that the placement strategy should assume are free. RLinf's configuration guide "
                    "shows 1; "
                    "when the key is absent RLinf (2025-10 and later) counts the accelerators Ray reports on each "
                    "node, so rlcfg follows the code: null means unknown, and GPU ranks in "
                    "`component_placement` are checked against the cluster only when this is set.")
    component_placement: dict[str, Any] = param(
        REQUIRED,
        description="The placement strategy for each component: `components: ranks` lines such as "
                    "`actor,inference: 0-4` (both groups on GPUs 0 to 4), `all` for every GPU, "
                    "`resources:processes` such as `0-3:0-7` (8 processes on GPUs 0-3), or a mapping "
                    "`{node_group: <label>, placement: <ranks>}`. RLinf's configuration guide shows "
                    "`actor,inference,rollout: all` as an "
                    "example; RLinf's code requires the key, so rlcfg does too.",
        examples=[{"actor,rollout,reward": "all"}, {"rollout": "0-3", "inference": "4-5", "actor": "6-7"}])
    node_groups: list[dict[str, Any]] | None = param(
        None, description="Named groups of nodes (RLinf 2025-10 and later): each entry has a `label` and `node_ranks` "
                          "(and optionally `hardware` for non-GPU devices); a placement mapping selects one with "
                          "`node_group`.")
    auto_scheduler: bool = param(
        False, description="Let RLinf's auto scheduler move GPUs between rollout and training at run time "
                           "(needs a disaggregated placement ordered actor, rollout, inference).")


# ---- runner -------------------------------------------------------------------------------------------------


class Tensorboard(Inventoried, inventory="runner.logger.tensorboard"):
    enable: bool = param(True, description="Write TensorBoard event files under `runner.logger.path`.")
    queue_size: int = param(10, ge=1, description="Events buffered before the TensorBoard writer flushes.")


class Wandb(Inventoried, inventory="runner.logger.wandb"):
    enable: bool = param(False, description="Log metrics to Weights & Biases.")
    project_name: str = param("infini-rl", description="The W&B project to log into.")
    experiment_name: str | None = param("${runner.experiment_name}", description="The W&B run name.")


class Logger(Inventoried, inventory="runner.logger"):
    path: str | None = param("${runner.output_dir}/${runner.experiment_name}/tensorboard",
                             description="Folder for the logs (the mid-2025 layout).")
    tensorboard: Tensorboard = section(Tensorboard, description="TensorBoard logging (the mid-2025 layout).")
    wandb: Wandb = section(Wandb, description="Weights & Biases logging (the mid-2025 layout).")
    log_path: str | None = param(None, description="Folder for the logs (RLinf 2025-10 and later; replaces `path`).")
    project_name: str | None = param(None, description="Project name for the logging backends (2025-10 and later).")
    experiment_name: str | None = param(None, description="Run name for the logging backends (2025-10 and later).")
    logger_backends: list[Literal["tensorboard", "wandb", "swanlab"]] | None = param(
        None, description="Logging backends to write to (2025-10 and later), e.g. [tensorboard, wandb].")


class Runner(Inventoried, inventory="runner"):
    task_type: str = param(
        "math",
        description="What kind of job this is: `math` (2025-08's name of reasoning RL), `reasoning`, "
                    "`reasoning_eval`, `coding_online_rl`, `embodied`, `embodied_eval`, `sft`, `offline`. Each release "
                    "accepts its own list (RLinf 2025-10 renamed `math` to `reasoning` and refuses `math`); SFT and "
                    "offline configs are pipelines rlcfg does not model.")
    logger: Logger = section(Logger, description="The logging parameters, including TensorBoard and W&B.")
    max_epochs: int = param(5, ge=-1, description="Maximum number of epochs to run; an epoch walks once through the "
                                                   "dataset.")
    max_steps: int = param(-1, ge=-1, description="Maximum number of training steps before stopping early; -1 "
                                                  "derives it from `runner.max_epochs`.")
    val_check_interval: int = param(1, description="How often (in steps) to launch a validation rollout; -1 "
                                                   "disables validation.")
    save_interval: int = param(50, description="Checkpoint frequency in trainer steps; -1 disables checkpoints.")
    seq_length: int = param(2048, ge=1, description="Total sequence length (prompt + generated response) fed into "
                                                    "the trainer during RL updates.")
    enable_dynamic_batch_size: bool = param(False, description="Pack micro-batches by token count "
                                                              "(`max_tokens_per_mbs`) when training with Megatron.")
    max_tokens_per_mbs: int = param(2048, ge=1, description="Upper limit of tokens in a Megatron micro-batch when "
                                                            "dynamic batching is enabled.")
    resume_dir: str | None = param(None, description="Checkpoint folder to resume from; null starts afresh.")
    experiment_name: str | None = param("grpo-1.5b", description="Name of the run; used in output and log paths.")
    output_dir: str | None = param("../results", description="Folder for checkpoints and logs.")
    only_eval: bool = param(False, description="Run validation only, without training (2025-10 and later).")
    per_worker_log: bool = param(False, description="Write one log file per worker under the log path "
                                                    "(2025-10 and later).")


# ---- algorithm ----------------------------------------------------------------------------------------------


class SamplingParams(Inventoried, inventory="algorithm.sampling_params"):
    use_greedy: bool = param(False, releases=("2025-08", "2025-10"),
                             description="Deterministic (greedy) decoding if true (2025-12 replaced it with "
                                         "`do_sample`).")
    do_sample: bool = param(True, releases=TAGGED, description="Sample (true) or decode greedily (false).")
    temperature: float = param(1.0, ge=0, description="Softmax temperature during sampling.")
    top_k: int = param(1000000, ge=-1, description="Top-k cutoff; a very large value (or -1) disables it.")
    top_p: float = param(1.0, gt=0, le=1, description="Nucleus sampling threshold.")
    repetition_penalty: float = param(1.0, gt=0, description="Penalty for repeated tokens; 1.0 disables it.")
    max_new_tokens: int = param("${subtract:${runner.seq_length}, ${data.max_prompt_length}}",
                                description="Maximum generated tokens; computed from `runner.seq_length` and "
                                            "`data.max_prompt_length` (reasoning configs need at least 1; "
                                            "rule rlinf/sequence-lengths).")
    min_new_tokens: int = param(1, ge=0, description="Minimum generated tokens.")


class Algorithm(Inventoried, inventory="algorithm"):
    group_size: int = param(2, ge=1, description="Responses per prompt (set > 1 to enable group baselines).")
    n_minibatches: int = param(4, ge=1, description="Number of gradient updates per rollout batch; the actor's "
                                                    "global batch is rollout_batch_size × group_size / n_minibatches.")
    training_batch_size_per_gpu: int = param(1, ge=1, description="Micro-batch size on each actor GPU (RLinf copies "
                                                                  "it into `actor.micro_batch_size`).")
    rollout_batch_size_per_gpu: int | None = param(
        None, ge=1, description="Inference micro-batch per GPU; null divides the global rollout batch evenly.")
    logprob_forward_micro_batch_size: int = param(1, ge=1, description="Micro-batch size for log-prob forward "
                                                                       "passes.")
    val_rollout_batch_size_per_gpu: int | None = param(4, ge=1, description="Validation rollout micro-batch per GPU.")
    loss_type: str | None = param("ppo", description="Policy loss type, a name in RLinf's loss registry (e.g. `ppo`; later "
                                              "versions use `actor`, `actor_critic`).")
    loss_agg_func: Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"] = param(
        "token-mean", description="How token losses are aggregated. RLinf checks the name only when the actor "
                                  "worker starts, after launch; rlcfg checks it up front.")
    kl_beta: float = param(0.0, ge=0, description="Weight of the KL penalty.")
    kl_penalty_type: Literal["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3"] = param(
        "low_var_kl", description="KL estimator (`low_var_kl` is k3). RLinf looks the name up only inside the loss.")
    ratio_clip_eps: float = param(0.2, gt=0, description="PPO clipping epsilon for importance ratios.")
    entropy_bonus: float = param(0.0, ge=0, description="Entropy reward coefficient (only used when "
                                                        "`calculate_entropy` is on).")
    calculate_entropy: bool = param(False, description="Whether to compute and log entropy.")
    clip_ratio_c: float | None = param(None, description="Dual-clip constant C for negative advantages; null "
                                                         "disables dual clipping.")
    clip_ratio_low: float | None = param(None, description="Lower clip bound; null uses `ratio_clip_eps` "
                                                           "(2025-10 and later).")
    clip_ratio_high: float | None = param(None, description="Upper clip bound; null uses `ratio_clip_eps` "
                                                            "(2025-10 and later).")
    adv_type: str | None = param("grpo", description="Advantage estimator, a name in RLinf's registry (e.g. `grpo`, "
                                              "`grpo_dynamic`, `reinpp`, `reinpp_baseline`, `gae`).")
    normalize_advantages: bool = param(True, description="Normalize advantages across the batch.")
    early_stop_imp_ratio: float | None = param(5.0, description="Megatron actor: zero a micro-batch's loss when its "
                                               "mean importance ratio (averaged over data-parallel ranks) exceeds "
                                               "this; null never stops. RLinf's FSDP actor ignores it.")
    use_valid_token_scale: bool = param(False, description="Megatron actor: scale each micro-batch's loss by its "
                                        "share of the step's valid tokens, so that the update divides the token losses "
                                        "by the step's token count instead of averaging per-micro-batch means. RLinf's "
                                        "FSDP actor ignores it.")
    recompute_logprobs: bool = param(True, releases=LATER,
                                     description="Recompute the old policy's log-probs with the actor "
                                                 "(2025-10 and later; was `rollout.recompute_logprobs`). false: "
                                                 "the PPO ratio is taken against the rollout engine's log-probs "
                                                 "of the sampled tokens, with no recompute pass; RLinf then "
                                                 "computes no reference log-probs either, so `kl_beta` adds no "
                                                 "KL term.")
    importance_sampling_fix: bool = param(False, description="Correct for the rollout/training mismatch with "
                                                             "importance sampling; RLinf then turns on both "
                                                             "`recompute_logprobs` and `rollout.return_logprobs`.")
    importance_sampling_clip: float | None = param(
        None, gt=0, releases=LATER,
        description="Cap of the rollout/training importance weight of `importance_sampling_fix`: the advantages "
                    "are multiplied by min(π_recomputed/π_rollout, clip) (main; 2025-10 clamps from below).")
    clip_log_ratio_min: float | None = param(None, releases=TAGGED, description="Lower clamp of the log "
                                             "importance ratio before exp in the PPO loss; null: none.")
    clip_log_ratio_max: float | None = param(None, releases=TAGGED, description="Upper clamp of the log "
                                             "importance ratio before exp in the PPO loss; null: none.")
    shuffle_rollout: bool = param(True, description="Reorder each data-parallel rank's rollout samples before "
                                  "splitting them into mini-batches, by one permutation seeded with actor.seed (the "
                                  "same every step). RLinf reads it with a default of true.")
    sampling_params: SamplingParams = section(SamplingParams, description="Sampling parameters of the rollout.")


# ---- inference, rollout -------------------------------------------------------------------------------------


class InferenceModel(Inventoried, inventory="inference.model"):
    tensor_model_parallel_size: int = param(1, ge=1, description="TP degree inside the inference engine.")
    pipeline_model_parallel_size: int = param(1, ge=1, description="PP degree inside the inference engine.")
    sequence_parallel: bool = param(False, description="Enable Megatron sequence parallelism for inference.")


class Inference(Inventoried, inventory="inference"):
    group_name: str = param("InferenceGroup", description="Logical name for the inference worker group (which "
                                                          "recomputes log-probs in disaggregated placements).")
    load_from_actor: bool = param(True, description="Initialize inference weights from the actor.")
    model: InferenceModel = section(InferenceModel, description="Parallelism of the inference model.")


class RolloutModel(Inventoried, inventory="rollout.model"):
    model_path: str | None = param(None, description="Path to the HF model the rollout engine serves "
                                                     "(from 2025-12; was `rollout.model_dir`). RLinf also reads "
                                                     "its config.json to fill the actor's architecture.")
    model_type: str | None = param(None, description="Model family, one registered in RLinf's SupportedModel "
                                                     "(from 2025-12; was `rollout.model_arch`).")


class SGLang(Inventoried, inventory="rollout.sglang"):
    attention_backend: str = param("triton", description="SGLang attention kernel backend (e.g. triton, "
                                                         "flashinfer).")
    decode_log_interval: int = param(500000, ge=1, description="Interval for SGLang to log decode stats.")
    use_torch_compile: bool = param(False, description="Enable torch.compile inside SGLang.")
    torch_compile_max_bs: int = param(128, ge=1, description="Max batch size eligible for torch.compile.")


class VLLM(Inventoried, inventory="rollout.vllm"):
    attention_backend: str = param("FLASH_ATTN", description="vLLM attention backend (e.g. FLASH_ATTN, XFORMERS).")
    enable_chunked_prefill: bool = param(True, description="Let vLLM split long prefills into chunks.")
    enable_prefix_caching: bool = param(True, description="Let vLLM reuse the KV cache of shared prefixes.")
    enable_flash_infer_sampler: bool = param(True, description="Sample with FlashInfer's kernels.")
    max_num_batched_tokens: int | None = param(None, ge=1, description="Token budget per vLLM step; null uses "
                                                                       "vLLM's default.")
    torch_profiler_dir: str | None = param(None, description="Enable vLLM's torch profiler, writing here.")


class Rollout(Inventoried, inventory="rollout"):
    group_name: str = param("RolloutGroup", description="Logical name for the rollout workers.")
    gpu_memory_utilization: float = param(
        0.65, gt=0, le=1,
        description="Target VRAM fraction per rollout worker. The docs and examples show 0.55; RLinf's code default "
                    "when the key is absent is 0.65, which rlcfg follows.")
    model_dir: str | None = param(None, releases=OLD,
                                  description="Path to the HF model used by the generation backend (the mid-2025 "
                                              "layout). No default: the path in RLinf's configuration guide is an "
                                              "example, and RLinf needs "
                                              "one.")
    model_arch: str | None = param(None, releases=OLD,
                                   description="Model family served (e.g. qwen2.5), one of the release's "
                                               "SUPPORTED_MODEL_ARCHS (from 2025-12 `rollout.model.model_type`).")
    model: RolloutModel = section(RolloutModel, releases=TAGGED,
                                  description="The served model (from 2025-12; was `model_dir`/`model_arch`).")
    precision: str | None = param(None, description="Precision of the rollout model (2025-10 and later; examples "
                                                    "write `${actor.model.precision}`).")
    enforce_eager: bool = param(False, description="If true, disable CUDA graph capture to shorten warm-up.")
    distributed_executor_backend: Literal["mp", "ray"] = param("mp", description="Backend for launching rollout "
                                                                                  "workers.")
    disable_log_stats: bool = param(False, description="Suppress periodic backend stats logging.")
    detokenize: bool = param(False, description="Detokenize outputs for debugging (RL uses token ids only).")
    padding: int | None = param(None, description="Pad token id override; null uses the tokenizer's pad id.")
    eos: int | None = param(None, description="EOS token id override; null uses the tokenizer's eos id.")
    rollout_backend: Literal["sglang", "vllm"] = param("sglang", releases=LATER, description="Generation engine (2025-10 and later; "
                                                                             "mid-2025 RLinf used SGLang).")
    attention_backend: str = param("triton", releases=("2025-08",),
                                   description="Attention kernel backend (e.g. triton).")
    recompute_logprobs: bool = param(True,
                                     description="Recompute log-probs for sampled sequences with the actor (the "
                                                 "2025-08 reasoning key; later reasoning configs use "
                                                 "`algorithm.recompute_logprobs`, embodied ones still read this). "
                                                 "false: the PPO ratio is taken against the engine's log-probs "
                                                 "of the sampled tokens (2025-08 still computes the reference's).")
    return_logprobs: bool = param(False, description="Have the engine return the sampled tokens' log-probs "
                                                     "(2025-10 and later); examples write "
                                                     "`${not:${algorithm.recompute_logprobs}}`.")
    tensor_parallel_size: int = param(1, ge=1, description="TP degree inside the generation backend.")
    pipeline_parallel_size: int = param(1, ge=1, description="PP degree inside the generation backend.")
    validate_weight: bool = param(False, description="Send full weights once for cross-check/validation.")
    validate_save_dir: str | None = param(None, description="Directory to store weights for comparison when "
                                                            "`validate_weight` is on.")
    print_outputs: bool = param(False, description="Print token ids/texts from the engine for debugging.")
    sglang_decode_log_interval: int = param(500000, ge=1, releases=("2025-08",),
                                            description="Interval for SGLang to log decode stats.")
    max_running_requests: int = param(64, ge=1, description="Max concurrent decode requests.")
    cuda_graph_max_bs: int = param(128, ge=1, description="Max batch size eligible for CUDA graph.")
    use_torch_compile: bool = param(False, releases=("2025-08",),
                                    description="Enable torch.compile inside SGLang.")
    torch_compile_max_bs: int = param(128, ge=1, releases=("2025-08",),
                                      description="Max batch size eligible for torch.compile.")
    sglang: SGLang | None = section(SGLang, optional=True, releases=LATER,
                                    description="SGLang settings (2025-10 and later: required with either backend).")
    vllm: VLLM | None = section(VLLM, optional=True, releases=LATER,
                                description="vLLM settings (2025-10 and later: required with either backend).")


# ---- data ---------------------------------------------------------------------------------------------------


class Data(Inventoried, inventory="data"):
    type: str = param("math", description="Dataset/task family (e.g. math).")
    max_prompt_length: int = param(1024, ge=1, description="Maximum tokens allowed for prompts.")
    rollout_batch_size: int = param(64, ge=1, description="Global rollout batch size (prompts per step) across "
                                                          "engines.")
    val_rollout_batch_size: int | None = param(None, ge=1, description="Global validation rollout batch size; null "
                                                                      "falls back to `data.rollout_batch_size`.")
    num_workers: int = param(2, ge=0, description="Data loader workers per actor rank.")
    prompt_key: str = param("prompt", description="JSONL key that stores the prompt text.")
    shuffle: bool = param(True, description="Shuffle training data each epoch.")
    validation_shuffle: bool = param(True, description="Shuffle validation data.")
    seed: int = param(1234, description="RNG seed for loaders and sampling.")
    train_data_paths: str | list | None = param(
        None, description="List of training JSONL file paths. No default (the path in RLinf's configuration guide is "
                          "an example); reasoning "
                          "and agent training configs need it (rule rlinf/reasoning-inputs), embodied ones have no "
                          "dataset.")
    val_data_paths: str | list | None = param(None, description="List of validation JSONL file paths (or "
                                                                      "one path).")
    dataset_name: str | None = param(None, description="Dataset name used to pick the reward parser (2025-10 and "
                                                       "later).")
    answer_key: str | None = param(None, description="JSONL key of the reference answer (2025-10 and later).")
    apply_chat_template: bool = param(False, description="Wrap prompts in the tokenizer's chat template.")
    filter_prompt_by_length: bool = param(False, description="Drop prompts longer than `max_prompt_length`; "
                                          "when false, RLinf keeps their first `max_prompt_length` tokens.")


# ---- actor --------------------------------------------------------------------------------------------------


class ActorModel(Inventoried, inventory="actor.model"):
    precision: Precision | None = param("fp16", description="Numerical precision for training (bf16, fp16, fp32 or the "
                                                     "Lightning spellings RLinf maps to a torch dtype).")
    add_bias_linear: bool = param(False, description="Add bias terms to linear layers.")
    tensor_model_parallel_size: int = param(1, ge=1, description="TP degree for the actor.")
    pipeline_model_parallel_size: int = param(1, ge=1, description="PP degree for the actor.")
    context_parallel_size: int = param(1, ge=1, description="CP degree for the actor (2025-10 and later).")
    virtual_pipeline_model_parallel_size: int | None = param(None, ge=1, description="Interleaved pipeline stages "
                                                                                    "per rank.")
    expert_model_parallel_size: int = param(1, ge=1, description="EP degree for MoE layers.")
    expert_tensor_parallel_size: int | None = param(None, ge=1, description="TP degree inside experts; must not "
                                                                           "exceed the TP degree.")
    activation: Activation = param("swiglu", description="Activation function (e.g. swiglu).")
    sequence_parallel: bool = param(True, description="Enable sequence parallelism (needs TP > 1).")
    recompute_method: Literal["block", "uniform"] | None = param("block", description="Activation recompute "
                                                                                      "strategy.")
    recompute_granularity: Literal["full", "selective"] | None = param("full", description="Recompute scope.")
    recompute_num_layers: int | None = param(20, ge=0, description="Number of layers to checkpoint/recompute.")
    seq_length: int = param("${runner.seq_length}", ge=1, description="Decoder context length for training.")
    encoder_seq_length: int = param("${runner.seq_length}", ge=1, description="Encoder length (mirrors seq_length "
                                                                              "here).")
    normalization: Literal["rmsnorm", "layernorm", "layernorm1p"] = param("rmsnorm", description="Norm layer type.")
    position_embedding_type: Literal["rope", "learned_absolute", "mrope", "none"] = param(
        "rope", description="Positional embedding type.")
    apply_rope_fusion: bool = param(True, description="Use fused RoPE kernels if available.")
    bias_dropout_fusion: bool = param(False, description="Fuse bias + dropout kernels.")
    persist_layer_norm: bool = param(False, description="Use the persistent fused LayerNorm kernel.")
    bias_activation_fusion: bool = param(False, description="Fuse bias + activation kernels.")
    attention_softmax_in_fp32: bool = param(True, description="Compute attention softmax in FP32 for stability.")
    batch_p2p_comm: bool = param(False, description="Batch pipeline point-to-point communications.")
    variable_seq_lengths: bool = param(True, description="Allow variable sequence lengths per micro-batch.")
    gradient_accumulation_fusion: bool = param(False, description="Fused gradient accumulation (needs APEX/TE).")
    moe_token_dispatcher_type: Literal["allgather", "alltoall", "alltoall_seq", "flex"] = param(
        "alltoall", description="MoE token dispatcher.")
    moe_grouped_gemm: Literal["te"] | None = param(None, description="Grouped GEMM for experts: null or `te`.")
    use_cpu_initialization: bool = param(False, description="Initialize weights on CPU to reduce GPU spikes.")
    megatron_checkpoint: str | None = param(None, description="Megatron checkpoint to start from (2025-10 and "
                                                              "later); needs `actor.megatron.use_hf_ckpt: false`.")
    padded_vocab_size: int | None = param(None, ge=1, description="Vocabulary size; RLinf overwrites it with "
                                                                  "config.json's vocab_size.")
    num_layers: int | None = param(None, ge=1, description="Transformer layers; RLinf overwrites it from "
                                                          "config.json.")
    hidden_size: int | None = param(None, ge=1, description="Hidden size; RLinf overwrites it from config.json.")
    ffn_hidden_size: int | None = param(None, ge=1, description="MLP size; RLinf overwrites it from config.json.")
    num_attention_heads: int | None = param(None, ge=1, description="Attention heads; RLinf overwrites it from "
                                                                   "config.json.")
    num_query_groups: int | None = param(None, ge=1, description="KV heads; RLinf overwrites it from config.json.")
    max_position_embeddings: int | None = param(None, ge=1, description="Maximum positions; RLinf overwrites it "
                                                                       "from config.json.")


class Optim(Inventoried, inventory="actor.optim"):
    optimizer: Literal["adam", "sgd"] = param("adam", description="Optimizer choice.")
    bf16: bool | None = param(None, description="BF16 mixed precision flag. RLinf derives it from "
                                                "`actor.model.precision` (2025-08 and 2025-10 always, overwriting "
                                                "a value written here; later releases when it is null).")
    fp16: bool | None = param(None, description="FP16 mixed precision flag. RLinf derives it from "
                                                "`actor.model.precision` (2025-08 and 2025-10 always, overwriting "
                                                "a value written here; later releases when it is null).")
    lr: float = param(2e-05, gt=0, description="Base learning rate.")
    adam_beta1: float = param(0.9, ge=0, lt=1, description="Adam's decay rate for the running mean of gradients.")
    adam_beta2: float = param(0.95, ge=0, lt=1, description="Adam's decay rate for the running mean of squared "
                                                           "gradients.")
    adam_eps: float = param(1.0e-05, gt=0, description="Adam epsilon.")
    min_lr: float = param(2.0e-6, ge=0, description="Minimum LR (for schedulers that decay below the base LR).")
    weight_decay: float = param(0.05, ge=0, description="L2 weight decay.")
    use_distributed_optimizer: bool = param(True, description="Use Megatron's distributed optimizer.")
    overlap_grad_reduce: bool = param(True, description="Overlap gradient reduction with the backward pass.")
    overlap_param_gather: bool = param(True, description="Overlap parameter all-gather with the forward pass.")
    optimizer_enable_pin: bool = param(False, description="Pin optimizer state memory on the host.")
    overlap_param_gather_with_optimizer_step: bool = param(False, description="Overlap parameter gather with the "
                                                                              "optimizer step.")
    clip_grad: float = param(1.0, ge=0, description="Global gradient clipping norm.")
    loss_scale_window: float = param(5, gt=0, description="Steps between dynamic FP16 loss scale increases.")
    loss_scale: float | None = param(None, gt=0, description="Static FP16 loss scale; null uses dynamic scaling.")


class LrSched(Inventoried, inventory="actor.lr_sched"):
    lr_warmup_fraction: float | None = param(None, ge=0, le=1, description="Warm-up as a fraction of the decay "
                                                                           "iterations. Whenever it is set (not null), "
                                                                           "even to 0, Megatron takes the warm-up from "
                                                                           "it and ignores `lr_warmup_iters`. Absent "
                                                                           "means null (RLinf's examples write 0.01).")
    lr_warmup_init: float = param(0.0, ge=0, description="Initial LR value during warm-up.")
    lr_warmup_iters: int = param(0, ge=0, description="Warm-up iterations; used only when `lr_warmup_fraction` is "
                                                      "null.")
    max_lr: float = param(2.0e-5, gt=0, description="Upper LR bound for the scheduler.")
    min_lr: float = param(0.0, ge=0, description="Lower LR bound for the scheduler.")
    lr_decay_style: Literal["constant", "linear", "cosine", "inverse-square-root", "WSD"] = param(
        "constant", description="Decay policy.")
    lr_decay_iters: int | None = param(None, ge=1, description="Total decay iterations; absent or null means "
                                                               "RLinf's fixed Megatron train_iters (100000). "
                                                               "RLinf's examples write 10.")
    start_weight_decay: float | None = param(None, ge=0, description="Weight decay at the start (needed by every "
                                                                     "decay style but constant, 2025-10 and later).")
    end_weight_decay: float | None = param(None, ge=0, description="Weight decay at the end (needed by every decay "
                                                                   "style but constant, 2025-10 and later).")
    weight_decay_incr_style: Literal["constant", "linear", "cosine"] = param("constant", description="How weight "
                                                                                                   "decay changes.")


class Tokenizer(Inventoried, inventory="actor.tokenizer"):
    tokenizer_model: str | None = param(None, description="Path or name of the tokenizer. No default (the path in "
                                                             "RLinf's configuration guide is an example); reasoning "
                                                             "and agent configs need "
                                                             "it (rule rlinf/reasoning-inputs).")
    use_fast: bool = param(False, description="Use the HF fast tokenizer.")
    trust_remote_code: bool = param(True, description="Allow custom tokenizer code.")
    padding_side: Literal["left", "right"] = param("right", description="Left or right padding.")


class MegatronCkpt(Inventoried, inventory="actor.megatron.ckpt_convertor"):
    model: str | None = param("DeepSeek-R1-Distill-Qwen-1.5B", description="Model name for the converter metadata.")
    model_type: str | None = param(None, description="Model type; inferred from the HF config when null.")
    hf_model_path: str | None = param("${rollout.model_dir}", description="Source HF model path.")
    save_path: str = param("${runner.output_dir}/${runner.experiment_name}/actor/megatron_ckpt_from_hf",
                           description="Target directory to write Megatron checkpoints.")
    use_gpu_num: int = param(0, ge=0, description="Number of GPUs to use for conversion (0: CPU).")
    use_gpu_index: int | None = param(None, ge=0, description="Specific GPU index to use for conversion.")
    process_num: int = param(16, ge=1, description="CPU processes for conversion work.")
    tensor_model_parallel_size: int = param("${actor.model.tensor_model_parallel_size}", ge=1,
                                            description="TP degree for converted checkpoints.")
    pipeline_model_parallel_size: int = param("${actor.model.pipeline_model_parallel_size}", ge=1,
                                              description="PP degree for converted checkpoints.")


class Megatron(Inventoried, inventory="actor.megatron"):
    ddp_bucket_size: int | None = param(None, ge=1, description="DDP gradient bucket size, in parameters.")
    distributed_backend: Literal["nccl", "gloo"] = param("nccl", description="Collective backend for Megatron's process groups (nccl on GPUs, gloo on "
                                                                 "CPU).")
    distributed_timeout_minutes: int = param(30, ge=1, description="Backend communication timeout.")
    ckpt_format: Literal["torch", "torch_dist", "zarr"] = param("torch", description="Checkpoint format.")
    use_dist_ckpt: bool = param(False, description="Use distributed (sharded) checkpointing.")
    tp_comm_bootstrap_backend: Literal["nccl", "mpi", "gloo"] = param("nccl", description="Backend used to "
                                                                                         "bootstrap TP comm overlap.")
    tp_comm_overlap_cfg: str | None = param(None, description="YAML path for TP comm/compute overlap.")
    use_hf_ckpt: bool = param(True, description="Convert the HF model to a Megatron checkpoint and train from it.")
    use_profiler: bool = param(False, description="Profile Megatron with torch's profiler (2025-10 and later).")
    ckpt: MegatronCkpt = section(MegatronCkpt, description="The HF-to-Megatron checkpoint converter (the mid-2025 "
                                                           "name; later `ckpt_convertor`).")
    ckpt_convertor: MegatronCkpt | None = section(MegatronCkpt, optional=True,
                                                  description="The checkpoint converter (2025-10 and later name).")


class MixedPrecision(Inventoried, inventory="actor.fsdp_config.mixed_precision"):
    param_dtype: str | None = param(None, description="Dtype FSDP keeps parameters in for compute (bf16, fp16, "
                                                      "fp32); null with the other two null means no mixed precision.")
    reduce_dtype: str | None = param(None, description="Dtype of gradient reduction.")
    buffer_dtype: str | None = param(None, description="Dtype of buffers.")


class AmpAutocast(Inventoried, inventory="actor.fsdp_config.amp_autocast"):
    enabled: bool = param(False, description="Run the forward pass under torch autocast. RLinf refuses it together "
                                             "with FSDP mixed precision (a `mixed_precision` dtype other than fp32).")
    precision: str = param("bf16", description="Autocast dtype: fp16, bf16 or fp32.")


class FsdpConfig(Inventoried, inventory="actor.fsdp_config"):
    mixed_precision: MixedPrecision | None = section(MixedPrecision, optional=True,
                                                     description="FSDP mixed precision (required by RLinf).")
    amp_autocast: AmpAutocast | None = section(AmpAutocast, optional=True, releases=TAGGED,
                                               description="torch autocast settings (later releases).")
    backward_prefetch: str | None = param(None, description="FSDP backward prefetch: null, pre or post.")


class Actor(Inventoried, inventory="actor"):
    group_name: str = param("ActorGroup", description="Logical name for the training (actor) workers.")
    training_backend: Literal["megatron", "fsdp"] = param("megatron", description="Library that trains the actor: Megatron-LM "
                                                                                  "(megatron) or torch FSDP (fsdp).")
    mcore_gpt: bool = param(True, description="Use the Megatron-Core GPT model.")
    spec_name: str = param("decoder_gpt", description="Megatron layer spec preset name.")
    checkpoint_load_path: str | None = param(None, description="Path to a checkpoint to load before training.")
    offload_optimizer: bool = param(True, description="Offload optimizer state to CPU to reduce GPU memory.")
    offload_weight: bool = param(True, description="Offload model weights to CPU when possible.")
    offload_grad: bool = param(True, description="Offload gradients to CPU to reduce GPU memory.")
    enable_dp_load_balance: bool = param(False, description="Balance sequence lengths across data-parallel ranks "
                                                            "(collocated placements only).")
    calculate_flops: bool = param(False, description="Compute and log FLOPs for profiling.")
    seed: int = param(1234, description="Global seed for reproducibility.")
    global_batch_size: int | None = param(None, ge=1, description="Samples per optimizer step. For reasoning tasks "
                                                                  "RLinf overwrites it with rollout_batch_size × "
                                                                  "group_size // n_minibatches.")
    micro_batch_size: int | None = param(None, ge=1, description="Samples per micro-batch. For reasoning tasks "
                                                                 "RLinf overwrites it with "
                                                                 "`algorithm.training_batch_size_per_gpu`.")
    model: ActorModel = section(ActorModel, description="The model and its parallel layout.")
    optim: Optim = section(Optim, description="The optimizer.")
    lr_sched: LrSched = section(LrSched, description="The learning-rate schedule.")
    tokenizer: Tokenizer = section(Tokenizer, description="The tokenizer.")
    megatron: Megatron = section(Megatron, description="Megatron integration settings.")
    fsdp_config: FsdpConfig | None = section(FsdpConfig, optional=True,
                                             description="FSDP settings, used when `training_backend` is fsdp "
                                                         "(RLinf requires its `mixed_precision` section).")


# ---- reward, critic -----------------------------------------------------------------------------------------


class RewardTokenizer(Inventoried, inventory="reward.tokenizer"):
    tokenizer_model: str | None = param(None, description="Tokenizer for decoding responses to score.")
    use_fast: bool = param(False, description="Use the HF fast tokenizer.")
    trust_remote_code: bool = param(True, description="Allow custom tokenizer code.")
    padding_side: Literal["left", "right"] = param("right", description="Left or right padding.")


class Reward(Inventoried, inventory="reward"):
    group_name: str = param("RewardGroup", description="Logical name for the reward workers (2025-10 and later).")
    use_reward_model: bool = param(False, description="Whether to use a reward model.")
    reward_type: str = param("math", description="Which reward function to use for training.")
    reward_scale: float = param(5.0, gt=0, description="A correct answer receives `reward_scale`, an incorrect one "
                                                       "`-reward_scale`.")
    tokenizer: RewardTokenizer | None = section(RewardTokenizer, optional=True,
                                                description="Tokenizer of the reward worker (2025-10 and later).")


class Critic(Inventoried, inventory="critic"):
    use_critic_model: bool = param(False, description="Whether to use a critic model.")
    training_backend: Literal["megatron", "fsdp"] | None = param(None, description="Critic training backend "
                                                                                   "(needed with a critic).")
    group_name: str | None = param(None, description="Logical name for the critic workers.")
    global_batch_size: int | None = param(None, ge=1, description="Overwritten by RLinf like the actor's.")
    micro_batch_size: int | None = param(None, ge=1, description="Overwritten by RLinf like the actor's.")


class RLinfConfig(Inventoried, inventory=""):
    hydra: dict[str, Any] | None = param(None, description="Hydra's own settings (run dir, search path); not part "
                                                           "of the job's config.")
    cluster: Cluster = section(Cluster, description="The cluster and where each component runs.")
    runner: Runner = section(Runner, description="The training loop: epochs, steps, logging, checkpoints.")
    algorithm: Algorithm = section(Algorithm, description="The RL algorithm: batch sizes, loss, advantages, sampling.")
    inference: Inference = section(Inference, description="The inference (log-prob) workers of disaggregated "
                                                          "placements.")
    rollout: Rollout = section(Rollout, description="The generation engine.")
    data: Data = section(Data, description="The datasets.")
    actor: Actor = section(Actor, description="The trained policy.")
    reward: Reward = section(Reward, description="The reward.")
    critic: Critic = section(Critic, description="The critic (PPO with GAE).")



# ---- the run ledger -------------------------------------------------------------------------------------------
# What `rlcfg run` does with each hand-written key (the inventoried ones get theirs in inventoried.run_fate).
# A section's `run_fate` covers its fields that are named nowhere below; the keys named here are the exceptions.
# HONORED keys are read by lower.py and act in the runtime with RLinf's reasoning meaning; the values of
# loss_type, adv_type and importance_sampling_fix that rlcfg computes otherwise are refused by rlinf/run-refusals.

_SECTION = inert("a section: each of its keys declares its own fate")
_LOGS = inert("logging only: where and how metrics are written changes nothing that is computed")
_PERF = inert("a parallel layout, memory, kernel or engine knob: it changes speed and memory, not the loss, the "
              "advantages or the sampling distribution rlcfg computes")
_CKPT_TOOLS = inert("Megatron checkpoint conversion, format and profiling: rlcfg loads the HF model itself and "
                    "writes its own checkpoints")
_ARCH = inert("RLinf overwrites or checks it against the HF model's config.json; rlcfg builds the model from "
              "config.json")
_NO_EVAL = inert("validation: RLinf's reasoning runners run none during training (a separate reasoning_eval job "
                 "does), and rlcfg lowers none")
_NO_CRITIC = inert("read only with `critic.use_critic_model`, which rlcfg refuses")
_FROM_HF = refused("rlcfg starts the actor from the HF model (rollout.model.model_path / rollout.model_dir), "
                   "not from another checkpoint")
_WD_SCHEDULE = refused("rlcfg keeps the weight decay constant (Megatron's constant increment style: "
                       "end_weight_decay, or actor.optim.weight_decay with a constant LR schedule)")


declare_fates(RLinfConfig, _SECTION, hydra=inert("Hydra's own settings (run folder, output subfolder) are not part of the "
                                          "job's config"))
declare_fates(Cluster, HONORED, auto_scheduler=inert("RLinf's auto scheduler moves GPUs between actor and rollout at run "
                                              "time; rlcfg keeps the static placement the run starts from, which "
                                              "changes timing, not what is computed"))
for _logger in (Logger, Tensorboard, Wandb):
    declare_fates(_logger, _LOGS)
declare_fates(Runner, HONORED, logger=_SECTION, val_check_interval=_NO_EVAL, experiment_name=_LOGS, output_dir=_LOGS,
       per_worker_log=_LOGS, enable_dynamic_batch_size=_PERF, max_tokens_per_mbs=_PERF)
declare_fates(SamplingParams, HONORED,
       min_new_tokens=unread("RLinf's rollout workers never pass it to SGLang or vLLM (sglang_worker and "
                            "vllm_worker _get_sampling_params): a response may end at any token, as in rlcfg"))
declare_fates(Algorithm, HONORED, sampling_params=_SECTION, rollout_batch_size_per_gpu=_PERF,
       val_rollout_batch_size_per_gpu=_NO_EVAL,
)
declare_fates(Inference, _PERF, model=_SECTION,
       load_from_actor=refused("rlcfg recomputes log-probabilities with the actor's current weights"))
declare_fates(InferenceModel, _PERF)
declare_fates(RolloutModel, HONORED, model_type=_ARCH)
declare_fates(SGLang, _PERF, decode_log_interval=_LOGS)
declare_fates(VLLM, _PERF, torch_profiler_dir=_LOGS)
declare_fates(Rollout, _PERF, model=_SECTION, sglang=_SECTION, vllm=_SECTION, model_dir=HONORED, model_arch=_ARCH,
       precision=HONORED, rollout_backend=HONORED, recompute_logprobs=HONORED,
       return_logprobs=inert("whether the engine returns the sampled tokens' log-probabilities: rlcfg's engines "
                             "always return them, and the run uses them where recompute_logprobs is false (as the "
                             "old log-probs) or importance_sampling_fix is on"),
       disable_log_stats=_LOGS, sglang_decode_log_interval=_LOGS, print_outputs=_LOGS, detokenize=_LOGS,
       validate_weight=_LOGS, validate_save_dir=_LOGS,
       padding=refused("rlcfg pads with the tokenizer's pad id"),
       eos=refused("rlcfg stops generation at the tokenizer's EOS id"))
declare_fates(Data, HONORED, val_rollout_batch_size=_NO_EVAL, val_data_paths=_NO_EVAL, validation_shuffle=_NO_EVAL,
       num_workers=_PERF,
       type=refused("rlcfg reads prompts as RLinf's `math` dataset does"),
       dataset_name=inert("read only by RLinf's VLM datasets (data.type vlm, refused); the math dataset ignores it"))
declare_fates(Actor, _PERF, model=_SECTION, optim=_SECTION, lr_sched=_SECTION, tokenizer=_SECTION, megatron=_SECTION,
       fsdp_config=_SECTION, training_backend=HONORED, seed=HONORED, checkpoint_load_path=_FROM_HF,
       calculate_flops=_LOGS, group_name=_LOGS, mcore_gpt=_ARCH, spec_name=_ARCH,
       global_batch_size=inert("RLinf overwrites it with rollout_batch_size × group_size // n_minibatches for "
                               "reasoning"),
       micro_batch_size=inert("RLinf overwrites it with algorithm.training_batch_size_per_gpu for reasoning"))
declare_fates(FsdpConfig, _PERF, mixed_precision=_SECTION, amp_autocast=_SECTION)
declare_fates(MixedPrecision, _PERF)
declare_fates(AmpAutocast, _PERF)
declare_fates(LrSched, HONORED,
       max_lr=inert("RLinf reads no lr_sched.max_lr: Megatron's scheduler peaks at actor.optim.lr, as rlcfg's does"),
       weight_decay_incr_style=_WD_SCHEDULE)
declare_fates(Megatron, _CKPT_TOOLS, ckpt=_SECTION, ckpt_convertor=_SECTION, ddp_bucket_size=_PERF,
       distributed_backend=_PERF, distributed_timeout_minutes=_PERF, tp_comm_bootstrap_backend=_PERF,
       tp_comm_overlap_cfg=_PERF)
declare_fates(MegatronCkpt, _CKPT_TOOLS)
declare_fates(ActorModel, _ARCH, precision=HONORED, tensor_model_parallel_size=HONORED,
       pipeline_model_parallel_size=HONORED, context_parallel_size=HONORED, expert_model_parallel_size=HONORED,
       expert_tensor_parallel_size=HONORED, virtual_pipeline_model_parallel_size=HONORED, sequence_parallel=HONORED,
       recompute_granularity=HONORED, recompute_method=_PERF, recompute_num_layers=_PERF, apply_rope_fusion=_PERF,
       bias_dropout_fusion=_PERF, persist_layer_norm=_PERF, bias_activation_fusion=_PERF,
       attention_softmax_in_fp32=_PERF, batch_p2p_comm=_PERF, variable_seq_lengths=_PERF,
       gradient_accumulation_fusion=_PERF, moe_token_dispatcher_type=_PERF, moe_grouped_gemm=_PERF,
       use_cpu_initialization=_PERF, megatron_checkpoint=_FROM_HF)
declare_fates(Optim, HONORED, bf16=inert("the training dtype comes from actor.model.precision"),
       fp16=inert("the training dtype comes from actor.model.precision"),
       loss_scale=_PERF, loss_scale_window=_PERF, use_distributed_optimizer=_PERF, overlap_grad_reduce=_PERF,
       overlap_param_gather=_PERF, optimizer_enable_pin=_PERF, overlap_param_gather_with_optimizer_step=_PERF)
declare_fates(Tokenizer, HONORED, use_fast=_PERF, padding_side=_PERF)
declare_fates(RewardTokenizer, inert("the reward workers' tokenizer decodes responses: rlcfg's verifier decodes them with "
                              "the actor's tokenizer"))
declare_fates(Reward, HONORED, group_name=_LOGS, tokenizer=_SECTION,
       use_reward_model=refused("rlcfg scores reasoning responses with a rule-based verifier, never a reward model"))
declare_fates(Critic, _NO_CRITIC,
       use_critic_model=refused("rlcfg trains no critic for RLinf's reasoning GRPO (adv_type gae is refused too)"))
