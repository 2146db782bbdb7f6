"""The SkyRL dialect: skyrl-train's Hydra config (`ppo_base_config.yaml`), as the seed documents it (mid-2025).

A SkyRL config has four top-level sections: `data`, `trainer` (placement, the policy/ref/critic models, the
algorithm, batch sizes, checkpointing and logging), `generator` (the inference engines and sampling) and
`deepspeed_config` (two open mappings, `train` and `eval`, that the models refer to by interpolation).
`environment` selects the SkyRL-Gym environment.

The seed is the spec; keys that later skyrl-train releases added (policy_loss_type, kl_estimator_type,
loss_reduction, megatron_config, LoRA, ...) are accepted too, and keys they renamed are accepted under both
names (the old one gives a warning naming the new one). Cross-field rules live in `skyrl_rules.py`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from rlcfg.schema.base import Dialect, Section, param, section
from rlcfg.schema.skyrl_rules import RULES

# ---- data ---------------------------------------------------------------------------------------------------


class Data(Section):
    train_data: list[str] = param(
        ["${oc.env:HOME}/data/gsm8k/train.parquet"],
        description="Files of the training dataset (parquet; later releases also take JSON files or a Hugging Face "
                    "dataset name). The whole dataset is loaded into the CPU memory of a worker node.")
    val_data: list[str] = param(
        ["${oc.env:HOME}/data/gsm8k/validation.parquet"],
        description="Files of the evaluation dataset. With several files, each one is evaluated and logged on its "
                    "own, plus an aggregate.")


# ---- trainer.placement --------------------------------------------------------------------------------------


class Placement(Section):
    colocate_all: bool = param(
        True, description="Put every model (policy, ref, critic) and the inference engines on the same GPUs, "
                          "offloading each one while another runs. Needs the policy's GPUs to equal the inference "
                          "engines' GPUs (num_inference_engines × TP).")
    colocate_policy_ref: bool = param(
        True, description="Without colocate_all: put the policy and the reference model on the same GPUs. They must "
                          "then have the same number of nodes and GPUs per node.")
    colocate_critic_reward: bool = param(
        False, description="Put the critic and the reward model on the same GPUs. Later skyrl-train releases removed "
                           "the reward model and this key.")
    policy_num_nodes: int = param(1, description="Number of nodes for the policy's training workers.", ge=1)
    policy_num_gpus_per_node: int = param(
        4, description="GPUs per node for the policy's training workers. The seed's default of 4 changed to 1 in "
                       "February 2026; rlcfg keeps the documented 4.", ge=1)
    critic_num_nodes: int = param(1, description="Number of nodes for the critic's training workers.", ge=1)
    critic_num_gpus_per_node: int = param(4, description="GPUs per node for the critic's training workers.", ge=1)
    ref_num_nodes: int = param(1, description="Number of nodes for the reference model's workers.", ge=1)
    ref_num_gpus_per_node: int = param(4, description="GPUs per node for the reference model's workers.", ge=1)
    reward_num_nodes: int = param(
        1, description="Number of nodes for the reward model's workers (removed in later releases).", ge=1)
    reward_num_gpus_per_node: int = param(
        4, description="GPUs per node for the reward model's workers (removed in later releases).", ge=1)


# ---- models -------------------------------------------------------------------------------------------------


class Lora(Section):
    rank: int = param(0, description="LoRA rank; 0 trains the full model. LoRA needs the vLLM backend and an "
                                     "fsdp, fsdp2 or megatron strategy. (Added after the seed.)", ge=0)
    alpha: int = param(16, description="LoRA scaling factor alpha.", ge=0)
    dropout: float = param(0.0, description="Dropout applied inside the LoRA adapters.", ge=0, le=1)
    lora_sync_path: str = param("/tmp/skyrl_lora_sync",
                                description="Directory through which adapter weights are handed to the inference engines.")
    target_modules: str = param("all-linear", description="Modules that receive adapters (`all-linear` or a name pattern).")
    exclude_modules: str | None = param(None, description="Modules to leave without adapters.")
    init_method: str = param("kaiming", description="How the adapter weights are initialised.")


class PolicyModel(Section):
    path: str = param("Qwen/Qwen2.5-1.5B-Instruct",
                      description="Hugging Face model name or local directory of the policy model.")
    lora: Lora = section(Lora, description="LoRA adapters for the policy (added after the seed).")


class RefModel(Section):
    path: str | None = param("${trainer.policy.model.path}",
                             description="Model of the reference policy; by default the policy's own starting point. "
                                         "(The YAML interpolates the policy's path; the Python dataclass of later "
                                         "releases hard-codes a model name instead; rlcfg follows the YAML.)")
    lora: Lora = section(Lora, description="LoRA settings of the reference model (added after the seed).")


class CriticModel(Section):
    path: str | None = param(None, description="Model of the critic (value model). Null means no critic: GRPO and "
                                               "other critic-free estimators. `gae` needs one.")
    lora: Lora = section(Lora, description="LoRA adapters for the critic (added after the seed).")


class RewardModel(Section):
    path: str | None = param(None, description="Model of a learned reward model; null uses the environment's rewards.")


class OptimizerConfig(Section):
    lr: float = param(1.0e-6, description="Learning rate of AdamW.", gt=0)
    adam_betas: list[float] = param([0.9, 0.999], description="AdamW's betas (beta1, beta2).", min_length=2)
    weight_decay: float = param(1e-2, description="AdamW's weight decay (L2 regularisation strength).", ge=0)
    max_grad_norm: float = param(1.0, description="Gradient clipping: the total L2 norm of the gradients is scaled "
                                                  "down to this value. Applies to every training backend.", gt=0)
    offload_after_step: bool = param(
        True, description="Move the optimizer state to CPU after each step when the models are colocated. DeepSpeed "
                          "requires true.")
    num_warmup_steps: int = param(
        0, description="Learning-rate warm-up, in optimizer steps. This is where skyrl-train v0.1.0 and later read it; "
                       "the seed's `trainer.num_warmup_steps` is the older spelling.", ge=0)
    scheduler: str = param("constant_with_warmup",
                           description="Learning-rate schedule, one of transformers' scheduler names (added after the seed).")


class MixedPrecision(Section):
    param_dtype: str = param("bf16", description="FSDP mixed precision: dtype of the parameters in compute.")
    reduce_dtype: str = param("fp32", description="FSDP mixed precision: dtype of gradient reduction.")
    buffer_dtype: str = param("fp32", description="FSDP mixed precision: dtype of buffers.")


class FsdpConfig(Section):
    cpu_offload: bool = param(
        False, description="Keep parameters and optimizer state in CPU memory and copy parameters to the GPU only for "
                           "the forward pass (FSDP1 cpu_offload, FSDP2 offload_policy). Not supported by the `fsdp` "
                           "(FSDP1) strategy for the policy and critic. Unrelated to the offloading done for colocation.")
    reshard_after_forward: bool | int = param(
        True, description="FSDP2 only: re-shard the parameters after the forward pass (true), keep them gathered "
                          "(false, like ZeRO-2), or an integer between 1 and fsdp_size.")
    fsdp_size: int = param(
        -1, description="Size of the group within which state is sharded (hybrid sharding across nodes); -1 shards "
                        "over all of the model's workers. Must divide the model's GPU count.")
    mixed_precision: MixedPrecision | None = section(
        MixedPrecision, description="FSDP mixed-precision dtypes; null uses the defaults (added after the seed).",
        optional=True)
    wrap_policy: dict[str, Any] = param(
        {}, description="Custom FSDP wrapping, e.g. `transformer_layer_cls_to_wrap` (added after the seed).")


class OffloadedFsdpConfig(FsdpConfig):
    """FSDP settings of the inference-only models (reference, reward), which are offloaded by default."""

    cpu_offload: bool = param(
        True, description="Keep parameters in CPU memory and copy them to the GPU only for the forward pass; on by "
                          "default for the models that only run forward passes.")


class CriticOptimizerConfig(OptimizerConfig):
    """The critic's optimizer: the same keys, a higher default learning rate."""

    lr: float = param(5.0e-6, description="Learning rate of the critic's AdamW. The YAML and the seed give 5e-6; the "
                                          "later Python dataclass gives 1e-6; rlcfg follows the YAML.", gt=0)


class MegatronConfig(Section):
    tensor_model_parallel_size: int = param(1, description="Megatron tensor parallel size (TP).", ge=1)
    pipeline_model_parallel_size: int = param(1, description="Megatron pipeline parallel size (PP).", ge=1)
    context_parallel_size: int = param(1, description="Megatron context parallel size (CP); CP > 1 needs sample "
                                                      "packing.", ge=1)
    expert_model_parallel_size: int = param(1, description="Megatron expert parallel size (EP) for MoE models.", ge=1)
    expert_tensor_parallel_size: int | None = param(
        None, description="Tensor parallel size inside each expert; null lets Megatron use the TP size.")
    ddp_config: dict[str, Any] = param({}, description="Passed through to Megatron's DistributedDataParallelConfig.")
    optimizer_config_kwargs: dict[str, Any] = param({}, description="Passed through to Megatron's OptimizerConfig.")
    transformer_config_kwargs: dict[str, Any] = param({}, description="Passed through to Megatron's TransformerConfig.")
    model_config_kwargs: dict[str, Any] = param({}, description="Overrides of the Hugging Face model config.")
    torch_profiler_config: dict[str, Any] = param({}, description="Torch profiler settings for Megatron workers.")
    lora_config: dict[str, Any] = param({}, description="Megatron LoRA settings.")
    empty_cuda_cache: bool | None = param(
        None, description="Empty torch's CUDA cache between backward and optimizer step to avoid fragmentation OOMs.")


class Policy(Section):
    model: PolicyModel = section(PolicyModel, description="The policy model.")
    deepspeed_config: dict[str, Any] = param(
        "${deepspeed_config.train}", description="DeepSpeed config of the policy, used with strategy `deepspeed`; by "
                                                 "default the shared `deepspeed_config.train`.")
    optimizer_config: OptimizerConfig = section(OptimizerConfig, description="Optimizer of the policy.")
    fsdp_config: FsdpConfig = section(FsdpConfig, description="FSDP settings of the policy (strategies fsdp, fsdp2).")
    megatron_config: MegatronConfig = section(
        MegatronConfig, description="Megatron parallelism of the policy (strategy `megatron`; added after the seed).")
    sequence_parallel_size: int = param(
        1, description="Ulysses sequence parallel size of the policy; the policy's data-parallel size is its GPU "
                       "count divided by this.", ge=1)
    use_torch_compile: bool = param(False, description="Compile the entropy computation with torch.compile.")
    record_memory: bool = param(
        False, description="Record CUDA memory snapshots after every policy training step (under the checkpoint path).")
    model_config_kwargs: dict[str, Any] = param({}, description="Overrides of the Hugging Face model config "
                                                                "(added after the seed).")


class Ref(Section):
    model: RefModel = section(RefModel, description="The reference model (not documented in the seed; the YAML has it).")
    deepspeed_config: dict[str, Any] = param(
        "${deepspeed_config.eval}", description="DeepSpeed config of the reference model; by default "
                                                "`deepspeed_config.eval`.")
    fsdp_config: OffloadedFsdpConfig = section(OffloadedFsdpConfig, description="FSDP settings of the reference "
                                                                                "model; its cpu_offload defaults to true.")
    megatron_config: MegatronConfig = section(MegatronConfig, description="Megatron parallelism of the reference model.")
    sequence_parallel_size: int = param(1, description="Ulysses sequence parallel size of the reference model.", ge=1)
    model_config_kwargs: dict[str, Any] = param({}, description="Overrides of the Hugging Face model config.")


class Critic(Section):
    model: CriticModel = section(CriticModel, description="The critic (value) model.")
    deepspeed_config: dict[str, Any] = param(
        "${deepspeed_config.train}", description="DeepSpeed config of the critic; by default `deepspeed_config.train`.")
    optimizer_config: CriticOptimizerConfig = section(
        CriticOptimizerConfig, description="Optimizer of the critic; its learning rate defaults to 5e-6.")
    fsdp_config: FsdpConfig = section(FsdpConfig, description="FSDP settings of the critic.")
    sequence_parallel_size: int = param(1, description="Ulysses sequence parallel size of the critic.", ge=1)
    model_config_kwargs: dict[str, Any] = param({}, description="Overrides of the Hugging Face model config.")


class Reward(Section):
    model: RewardModel = section(RewardModel, description="A learned reward model (removed in later releases).")
    deepspeed_config: dict[str, Any] = param(
        "${deepspeed_config.eval}", description="DeepSpeed config of the reward model; by default `deepspeed_config.eval`.")
    fsdp_config: OffloadedFsdpConfig = section(OffloadedFsdpConfig, description="FSDP settings of the reward model.")
    sequence_parallel_size: int = param(1, description="Ulysses sequence parallel size of the reward model.", ge=1)


# ---- trainer.algorithm --------------------------------------------------------------------------------------


class KlCtrl(Section):
    type: Literal["fixed", "adaptive"] = param(
        "fixed", description="KL controller for the KL-in-reward penalty: a fixed coefficient (kl_loss_coef) or an "
                             "adaptive one that tracks kl_target.")
    kl_target: float = param(0.1, description="Target KL of the adaptive controller.")
    horizon: int = param(10000, description="Update horizon of the adaptive controller; must be > 0 when adaptive.")


class DynamicSampling(Section):
    type: Literal["filter", "replace"] | None = param(
        None, description="Dynamic sampling (DAPO): `filter` drops groups whose rewards are all equal and samples more "
                          "batches, `replace` replaces them with good groups; null disables it.")
    max_sample_batches: int = param(30, description="At most this many batches are sampled per step; -1 samples "
                                                    "without limit.")
    min_replace_ratio: float = param(0.3, description="For `replace`: the smallest share of good groups that can "
                                                      "replace the bad ones.", ge=0, le=1)


class ClipCov(Section):
    clip_ratio: float = param(0.0002, description="Share of tokens whose updates Clip-Cov clips.")
    clip_cov_lb: float = param(1.0, description="Lower covariance bound of Clip-Cov.")
    clip_cov_ub: float = param(5.0, description="Upper covariance bound of Clip-Cov.")


class KlCov(Section):
    kl_cov_frac: float = param(0.2, description="Share of tokens that KL-Cov penalises.")
    ppo_kl_coef: float = param(1.0, description="KL coefficient of KL-Cov.")


class Cispo(Section):
    cispo_eps_clip_low: float = param(0.0, description="Lower clip of CISPO's importance weights.")
    cispo_eps_clip_high: float = param(5.0, description="Upper clip of CISPO's importance weights.")


class Sapo(Section):
    tau_pos: float = param(1.0, description="SAPO temperature for positive advantages.")
    tau_neg: float = param(1.05, description="SAPO temperature for negative advantages.")


class Algorithm(Section):
    advantage_estimator: str = param(
        "grpo", description="Advantage estimator: `grpo` or `gae` (the seed); later releases add `rloo` and "
                            "`reinforce++`, and custom estimators can be registered in code.")
    kl_target: float | None = param(None, description="Target KL of the older adaptive KL controller (replaced by "
                                                      "kl_ctrl.kl_target).")
    init_kl_coef: float = param(0.0, description="Initial KL coefficient of the older KL controller (replaced by "
                                                 "kl_ctrl).")
    kl_ctrl: KlCtrl = section(KlCtrl, description="KL controller for use_kl_in_reward (added after the seed).")
    use_kl_estimator_k3: bool = param(
        True, description="Estimate the KL with k3 (non-negative, unbiased, low variance). Later releases replace this "
                          "with kl_estimator_type and ignore `false` here.")
    use_abs_kl: bool = param(False, description="Use the absolute-value KL estimator. Later releases replace this "
                                                "with kl_estimator_type: abs.")
    kl_estimator_type: Literal["k1", "k2", "k3", "abs"] = param(
        "k3", description="KL estimator (added after the seed, replacing use_kl_estimator_k3 and use_abs_kl).")
    use_kl_in_reward: bool = param(
        False, description="Subtract kl × kl_loss_coef from the rewards. Mutually exclusive with use_kl_loss.")
    use_kl_loss: bool = param(
        True, description="Add kl × kl_loss_coef to the policy loss. Mutually exclusive with use_kl_in_reward; either "
                          "one makes the reference model run.")
    kl_loss_coef: float = param(0.001, description="Coefficient of the KL term (in the loss or in the reward).", ge=0)
    use_entropy_loss: bool = param(False, description="Add an entropy bonus to the policy loss (added after the seed).")
    entropy_loss_coef: float = param(0.01, description="Coefficient of the entropy bonus.", ge=0)
    advantage_batch_normalize: bool = param(
        False, description="Normalise advantages by the mean and standard deviation of the whole training batch.")
    value_head_prefix: str = param("value_head", description="Name of the value head in the critic model.")
    ppo_loss_type: Literal["regular", "dual_clip"] = param(
        "regular", description="PPO loss: `regular` (clipped surrogate) or `dual_clip`. Renamed policy_loss_type in "
                               "skyrl-train v0.1.0.", renamed_to="trainer.algorithm.policy_loss_type")
    policy_loss_type: str = param(
        "regular", description="Policy loss (newer name of ppo_loss_type): regular, dual_clip, gspo, cispo, clip_cov, "
                               "kl_cov, sapo, cross_entropy, importance_sampling, or one registered in code.")
    loss_reduction: Literal["token_mean", "sequence_mean", "seq_mean_token_sum_norm", "token_mean_legacy",
                            "prompt_mean"] = param(
        "token_mean", description="How token losses are reduced to one number (added after the seed; the last two "
                                  "values only in the newest releases).")
    grpo_norm_by_std: bool = param(True, description="Divide GRPO advantages by the group's reward standard deviation.")
    zero_variance_filter: bool = param(False, description="Mask out groups whose rewards are all equal.")
    lambd: float = param(1.0, description="GAE lambda.", ge=0, le=1)
    gamma: float = param(1.0, description="GAE discount gamma.", ge=0, le=1)
    eps_clip_low: float = param(0.2, description="PPO ratio clip below 1 (the ratio is clamped to 1 - eps_clip_low).",
                                ge=0)
    eps_clip_high: float = param(0.2, description="PPO ratio clip above 1 (the ratio is clamped to 1 + eps_clip_high).",
                                 ge=0)
    clip_ratio_c: float = param(3.0, description="Dual-clip constant c of the dual_clip loss (greater than 1).", gt=1)
    tis_imp_ratio_cap: float = param(
        -1.0, description="Cap of truncated importance sampling; must be > 0 when use_tis is true.")
    use_tis: bool = param(
        False, description="Truncated importance sampling between the inference engine and the trainer. Later "
                           "releases replace it with off_policy_correction.tis_ratio_type: token.")
    off_policy_correction: dict[str, Any] = param(
        {}, description="Off-policy correction settings of the newest releases, passed through (tis_ratio_type: "
                        "null, token or sequence; sequence_mask_metric: null, product or geometric; ...).")
    value_clip: float = param(0.2, description="Clip range of the value loss.", ge=0)
    normalize_reward: bool = param(
        True, description="Let the critic learn the mean and standard deviation of the values and normalise them "
                          "(removed in later releases).")
    dynamic_sampling: DynamicSampling = section(DynamicSampling, description="Dynamic sampling (added after the seed).")
    clip_cov: ClipCov = section(ClipCov, description="Settings of the clip_cov policy loss.")
    kl_cov: KlCov = section(KlCov, description="Settings of the kl_cov policy loss.")
    cispo: Cispo = section(Cispo, description="Settings of the cispo policy loss.")
    sapo: Sapo = section(Sapo, description="Settings of the sapo policy loss.")
    max_seq_len: int | None = param(
        None, description="Sequence length that normalises the seq_mean_token_sum_norm loss. Null: skyrl-train "
                          "derives generator.max_input_length + sampling_params.max_generate_length (too short for "
                          "multi-turn); the newest releases require it with that loss reduction.", ge=1)


class FullyAsync(Section):
    max_staleness_steps: int = param(4, description="Fully-async training: how many policy versions a sample may lag.",
                                     ge=0)
    num_parallel_generation_workers: int = param(768, description="Fully-async training: concurrent generation "
                                                                  "workers.", ge=1)


class S3Export(Section):
    enabled: bool = param(False, description="Copy checkpoints to S3.")
    bucket: str | None = param(None, description="S3 bucket; required when enabled.")
    prefix: str = param("checkpoints/${trainer.run_name}", description="S3 key prefix.")


# ---- trainer ------------------------------------------------------------------------------------------------


class Trainer(Section):
    placement: Placement = section(Placement, description="Where the models run, and which of them share GPUs.")
    sequence_parallel_backend: Literal["ulysses"] = param("ulysses", description="Sequence parallelism; only Ulysses "
                                                                                 "is implemented.")
    strategy: Literal["fsdp", "fsdp2", "deepspeed", "megatron"] = param(
        "fsdp2", description="Training backend: `fsdp` (FSDP1), `fsdp2` or `deepspeed` (the seed); `megatron` in "
                             "later releases. The seed gives no default; the code's is fsdp2.")
    policy: Policy = section(Policy, description="The policy model and how it is trained.")
    ref: Ref = section(Ref, description="The reference model, used only when use_kl_loss or use_kl_in_reward is on.")
    critic: Critic = section(Critic, description="The critic, used when critic.model.path is set.")
    reward: Reward = section(Reward, description="A learned reward model (not in the seed's docs; removed later).")
    algorithm: Algorithm = section(Algorithm, description="The RL algorithm: advantages, KL, loss.")
    fully_async: FullyAsync = section(FullyAsync, description="Fully asynchronous training (added after the seed).")
    gradient_checkpointing: bool = param(True, description="Recompute activations in the backward pass to save memory.")
    gradient_checkpointing_use_reentrant: bool = param(False, description="Use torch's reentrant checkpointing.")
    seed: int = param(42, description="Random seed of the training run.")
    resume_mode: Literal["none", "latest", "from_path"] | None = param(
        "latest", description="Resume from nothing (null or `none`), the latest checkpoint under ckpt_path, or "
                              "resume_path (`from_path`).")
    resume_path: str | None = param(None, description="Checkpoint directory (`global_step_N`) to resume from with "
                                                      "resume_mode `from_path`.")
    ckpt_path: str = param("${oc.env:HOME}/ckpts/", description="Directory of resumable checkpoints (model and "
                                                               "optimizer state).")
    max_ckpts_to_keep: int = param(-1, description="Keep the last N checkpoints; a negative value keeps all. 0 is "
                                                   "rejected.")
    ckpt_interval: int = param(10, description="Save a full checkpoint every this many steps; -1 never.")
    hf_save_interval: int = param(-1, description="Save the model(s) in Hugging Face format every this many steps; "
                                                  "-1 never.")
    export_path: str = param("${oc.env:HOME}/exports/", description="Directory of exported artifacts (Hugging Face "
                                                                   "models, dumped batches and eval results).")
    s3_export: S3Export = section(S3Export, description="Copy checkpoints to S3 (added after the seed).")
    bf16: bool = param(True, description="Train in bfloat16.")
    epochs: int = param(1, description="Passes over the whole training dataset.", ge=1)
    update_epochs_per_batch: int = param(
        1, description="Gradient passes over each training batch (PPO epochs).", ge=1)
    train_batch_size: int = param(1024, description="Prompts per training step (each one gives n_samples_per_prompt "
                                                    "samples).", ge=1)
    policy_mini_batch_size: int = param(
        256, description="Prompts per policy optimizer step (global, over all DP ranks). Must divide train_batch_size.")
    critic_mini_batch_size: int = param(
        256, description="Prompts per critic optimizer step. Must divide train_batch_size.")
    micro_train_batch_size_per_gpu: int = param(
        1, description="Samples per GPU per gradient-accumulation step (policy and critic).", ge=1)
    micro_forward_batch_size_per_gpu: int = param(
        1, description="Samples per GPU per forward pass when computing log-probabilities or values.", ge=1)
    update_ref_every_epoch: bool = param(False, description="Copy the policy into the reference model every epoch.")
    num_warmup_steps: int = param(
        0, description="Learning-rate warm-up steps of the policy (and critic). skyrl-train v0.1.0 moved it to "
                       "trainer.policy.optimizer_config.num_warmup_steps.", ge=0,
        renamed_to="trainer.policy.optimizer_config.num_warmup_steps")
    use_sample_packing: bool = param(True, description="Pack samples into one sequence for the forward pass "
                                                       "(all models).")
    eval_batch_size: int = param(1024, description="Prompts per evaluation batch.", ge=1)
    eval_before_train: bool = param(True, description="Evaluate once before the first training step.")
    eval_interval: int = param(5, description="Evaluate every this many steps; -1 disables evaluation.")
    max_prompt_length: int = param(512, description="Longest prompt in tokens; longer prompts are truncated.", ge=1)
    flash_attn: bool = param(True, description="Use flash attention in the training models.")
    disable_fast_tokenizer: bool = param(False, description="Use the slow (Python) tokenizer.")
    target_modules: str = param("all-linear", description="Modules LoRA targets (older releases; later "
                                                          "trainer.policy.model.lora.target_modules).")
    use_orm_score: bool = param(False, description="Use the outcome reward model's score as the reward.")
    project_name: str = param("skyrl", description="Project name in the logger (WandB, MLflow).")
    run_name: str = param("test_run", description="Run name in the logger.")
    logger: Literal["wandb", "console", "mlflow", "tensorboard"] = param(
        "wandb", description="Where metrics go: `wandb` (needs WANDB_API_KEY) or `console` (the seed); later releases "
                             "add mlflow and tensorboard.")
    dump_data_batch: bool = param(False, description="Write each training batch under export_path/dumped_data.")
    dump_eval_results: bool = param(True, description="Write evaluation results under export_path/dumped_eval.")
    rope_scaling: dict[str, Any] | None = param(None, description="RoPE scaling override for the training models.")
    rope_theta: float | None = param(None, description="RoPE theta override for the training models.")


# ---- generator ----------------------------------------------------------------------------------------------


class SamplingParams(Section):
    max_generate_length: int = param(1024, description="Most tokens generated per response (per turn).", ge=1)
    temperature: float = param(1.0, description="Sampling temperature; 0 is greedy.", ge=0)
    top_p: float = param(1.0, description="Nucleus sampling threshold.", gt=0, le=1)
    min_p: float = param(0.0, description="Min-p sampling threshold.", ge=0, le=1)
    top_k: int = param(-1, description="Top-k sampling; -1 disables it.")
    repetition_penalty: float = param(1.0, description="Repetition penalty (added after the seed).", gt=0)
    logprobs: int | None = param(
        None, description="Return the log-probability of each sampled token (0 or 1: only the chosen token). "
                          "Null returns none. (YAML of later releases: 1 or null; dataclass: 0.)", ge=0)
    stop: list[str] | None = param(None, description="Stop strings (not with SGLang).")
    min_new_tokens: int | None = param(None, description="Least tokens generated per response (not with SGLang).", ge=0)
    additional_kwargs: dict[str, Any] | None = param(None, description="Further sampling arguments passed to the "
                                                                       "engine.")


class EvalSamplingParams(SamplingParams):
    max_generate_length: int = param("${generator.sampling_params.max_generate_length}",
                                     description="Most tokens generated per response in evaluation; by default the "
                                                 "training value.", ge=1)


class ChatTemplate(Section):
    source: Literal["name", "file"] = param("name", description="Where the chat template comes from.")
    name_or_path: str | None = param(None, description="The template's name or file; null uses the tokenizer's.")


class Generator(Section):
    model_name: str = param("${trainer.policy.model.path}", description="Model served by the inference engines; by "
                                                                        "default the policy's.")
    model_dtype: Literal["bfloat16", "float16", "float32"] = param(
        "bfloat16", description="Dtype of the inference engines; weights are cast to it when synced. Should match the "
                                "engines' dtype.")
    run_engines_locally: bool = param(
        True, description="Start the inference engines in this Ray cluster (true) or talk to remote servers over HTTP "
                          "(false, see remote_inference_engine_urls).")
    num_inference_engines: int = param(1, description="Number of inference engines (replicas). With remote engines, "
                                                      "the number of URLs.", ge=1)
    backend: Literal["vllm", "sglang"] = param("vllm", description="Inference engine: vllm or sglang (the seed: sglang "
                                                                   "only for remote engines).")
    weight_sync_backend: Literal["nccl", "gloo", "delta"] = param(
        "nccl", description="How policy weights reach the engines: nccl or gloo (`delta` in the newest releases).")
    weight_transfer_threshold_cuda_ipc_GB: float = param(1.0, description="Batch size in GB of CUDA-IPC weight "
                                                                          "transfers.", gt=0)
    inference_engine_tensor_parallel_size: int = param(4, description="Tensor parallel size of each engine.", ge=1)
    inference_engine_pipeline_parallel_size: int = param(1, description="Pipeline parallel size of each engine.", ge=1)
    inference_engine_expert_parallel_size: int = param(1, description="Expert parallel size of each engine.", ge=1)
    inference_engine_data_parallel_size: int = param(1, description="Data parallel size inside each engine.", ge=1)
    n_samples_per_prompt: int = param(5, description="Samples per prompt; a training batch has train_batch_size × "
                                                     "n_samples_per_prompt sequences.", ge=1)
    async_engine: bool = param(True, description="Use vLLM's asynchronous engine (false: the offline engine, which "
                                                 "needs batched: true).")
    batched: bool = param(True, description="Generate all single-turn prompts in one batched call. (The YAML of "
                                            "later releases defaults to false; rlcfg follows the seed.)")
    max_input_length: int = param(
        "${trainer.max_prompt_length}", description="Longest engine input. Single-turn: equal to "
                                                    "trainer.max_prompt_length. Multi-turn: at least that, the input "
                                                    "limit of every turn.", ge=1)
    vllm_v1_disable_multiproc: bool = param(True, description="Set VLLM_ENABLE_V1_MULTIPROCESSING=0, which makes "
                                                              "scheduling deterministic.")
    enable_prefix_caching: bool = param(True, description="vLLM prefix caching (must match remote servers).")
    enable_chunked_prefill: bool = param(True, description="vLLM chunked prefill.")
    max_num_batched_tokens: int = param(8192, description="vLLM continuous batching: most tokens per batch.", ge=1)
    enforce_eager: bool = param(False, description="Disable CUDA graphs in the engine.")
    gpu_memory_utilization: float = param(0.8, description="Share of GPU memory the engine may use (local engines).",
                                          gt=0, le=1)
    max_num_seqs: int = param(1024, description="vLLM continuous batching: most sequences per batch.", ge=1)
    remote_inference_engine_urls: list[str] = param(
        ["127.0.0.1:8001"], description="host:port of each remote engine; used only when run_engines_locally is false, "
                                        "then one per engine.")
    enable_http_endpoint: bool = param(False, description="Serve an OpenAI-compatible HTTP endpoint in front of the "
                                                          "engines (vLLM with async_engine only).")
    http_endpoint_host: str = param("127.0.0.1", description="Host of the HTTP endpoint.")
    http_endpoint_port: int = param(8000, description="Port of the HTTP endpoint.", ge=1, le=65535)
    served_model_name: str | None = param(None, description="Model name the HTTP endpoint answers to.")
    engine_init_kwargs: dict[str, Any] = param({}, description="Extra arguments for the engine's constructor; add "
                                                               "keys with `+generator.engine_init_kwargs.KEY=...`.")
    max_turns: int = param(1, description="Most turns of multi-turn generation; 1 is single-turn.", ge=1)
    override_existing_update_group: Literal["auto", "enable", "disable"] = param(
        "auto", description="Remote engines: replace a weight-update group left by an earlier run. `auto` becomes "
                            "`enable` for remote vLLM engines and `disable` otherwise.")
    sampling_params: SamplingParams = section(SamplingParams, description="Sampling during trajectory generation.")
    use_conversation_multi_turn: bool = param(
        False, description="Multi-turn: append observations as new chat turns (true) or as raw tokens after the "
                           "assistant's response (false). (Later releases default to true; rlcfg follows the seed.)")
    append_eos_token_after_stop_str_in_multi_turn: bool = param(
        True, description="Multi-turn with stop strings: append the EOS token after a stop string.")
    chat_template: ChatTemplate = section(ChatTemplate, description="Chat template override.")
    chat_template_kwargs: dict[str, Any] = param({}, description="Arguments for the chat template (not with batched).")
    eval_sampling_params: EvalSamplingParams = section(EvalSamplingParams, description="Sampling during evaluation.")
    eval_n_samples_per_prompt: int = param(1, description="Samples per prompt in evaluation.", ge=1)
    zero_reward_on_non_stop: bool = param(False, description="Give 0 reward to responses that did not stop on their "
                                                             "own (truncated or aborted).")
    apply_overlong_filtering: bool = param(False, description="DAPO overlong filtering: mask the loss of truncated "
                                                              "responses.")
    step_wise_trajectories: bool = param(False, description="Train on each turn of a multi-turn trajectory as its own "
                                                            "sample.")
    rope_scaling: dict[str, Any] | None = param(None, description="RoPE scaling override for the engines.")
    rope_theta: float | None = param(None, description="RoPE theta override for the engines.")


# ---- other top-level sections -------------------------------------------------------------------------------


class DeepspeedConfig(Section):
    train: dict[str, Any] = param(
        {"zero_optimization": {"stage": 3}},
        description="DeepSpeed config for training (policy, critic); DeepSpeed's own JSON config keys, passed "
                    "through. Only ZeRO stage 3 is supported; leave gradient_clipping unset (max_grad_norm applies).")
    eval: dict[str, Any] = param(
        {"zero_optimization": {"stage": 3}},
        description="DeepSpeed config for inference-only models (reference, reward), passed through.")


class Environment(Section):
    env_class: str = param("gsm8k", description="SkyRL-Gym environment the generator steps through.")
    max_env_workers: int | None = param(None, description="Background workers for environment steps (older "
                                                          "releases; later under skyrl_gym).")
    skyrl_gym: dict[str, Any] = param({}, description="Environment-specific settings, passed through to SkyRL-Gym.")


class SkyRLConfig(Section):
    data: Data = section(Data, description="Training and evaluation datasets.")
    trainer: Trainer = section(Trainer, description="Training: placement, models, algorithm, batches, checkpoints, "
                                                    "logging.")
    generator: Generator = section(Generator, description="Rollout: inference engines and sampling.")
    deepspeed_config: DeepspeedConfig = section(DeepspeedConfig, description="Shared DeepSpeed configs that the "
                                                                             "models refer to.")
    environment: Environment = section(Environment, description="The environment that scores and steps "
                                                                "trajectories.")


class SkyRL(Dialect):
    name = "skyrl"
    title = "SkyRL (skyrl-train)"
    documents = "skyrl-train of mid-2025 (Hydra config ppo_base_config.yaml)"
    override_grammar = "hydra"
    overrides_see_defaults = True  # skyrl-train composes overrides onto ppo_base_config, which holds every key
    rules: ClassVar = RULES

    def variants(self) -> dict:
        return {"skyrl": SkyRLConfig}

    def compose(self, tree, base_dir):
        from rlcfg.schema.skyrl_rules import compose_defaults_list

        return compose_defaults_list(tree)

    def describe(self, config: SkyRLConfig) -> str:
        from rlcfg.schema.skyrl_rules import describe

        return describe(config)


DIALECT = SkyRL()
