"""The sections of a SkyRL config (skyrl-train's `ppo_base_config.yaml`): `data`, `trainer`, `generator`,
`deepspeed_config` and `environment`. Each field names the releases whose base config has it (`releases=`; none
means all of them); the inventories under tests/inventory/skyrl/ hold the facts they were read from
(tools/inventory/skyrl.py).
"""

# Annotations are evaluated as the classes are defined, not postponed: see `Section` in rlcfg.schema.base.
from typing import Any, Literal

from pydantic import ConfigDict

from rlcfg.dialects.skyrl.package import PACKAGE_FROM_030
from rlcfg.schema import entry
from rlcfg.schema.base import HONORED, Section, inert, param, refused, section, unread

# The releases whose base config has a key (tags skyrl_train-vX.Y.Z; "main" is the last commit with skyrl-train;
# "pre-0.1.0" is the layout of SkyRL's mid-2025 reference document, before v0.1.0 moved and renamed four keys).
RELEASES = entry("skyrl").releases
# The `skyrl` package's releases ("skyrl-0.1.0", ...; rlcfg.dialects.skyrl.package) come after skyrl-train's last
# commit: a key skyrl-train kept to its end is the package's too unless a field says otherwise.
PACKAGE = tuple(r for r in RELEASES if r.startswith("skyrl-"))
ONLY_PRE = ("pre-0.1.0",)
UNTIL_010 = ("pre-0.1.0", "0.1.0")
UNTIL_030 = ("pre-0.1.0", "0.1.0", "0.2.0", "0.3.0")
FROM_010 = ("0.1.0", "0.2.0", "0.3.0", "0.4.0", "main", *PACKAGE)
FROM_020 = ("0.2.0", "0.3.0", "0.4.0", "main", *PACKAGE)
FROM_030 = ("0.3.0", "0.4.0", "main", *PACKAGE)
FROM_040 = ("0.4.0", "main", *PACKAGE)
ONLY_MAIN = ("main", *PACKAGE)


# The `skyrl` package's DAPO example entrypoint, whose trainer applies the soft overlong punishment of the two keys it
# adds to trainer.algorithm (package.DAPO_ENTRY_FINGERPRINTS tells it from an edited copy).
DAPO_ENTRY = "SkyRL's DAPO example entrypoint (examples.train.algorithms.dapo.main_dapo)"
SKYRL_TRAIN_DAPO_ENTRY = ("skyrl-train's DAPO example entrypoints (examples.algorithms.dapo.main_dapo, "
                          "examples.tis_correction.main_tis_dapo)")


def upto(last: str, tags: tuple = RELEASES) -> tuple:
    """The releases of `tags` up to `last`: for a key a later release removed."""
    return tuple(r for r in tags if RELEASES.index(r) <= RELEASES.index(last))

# ---- the run ledger: what `rlcfg run` does with each key (schema/base.py Fate; schema/ledger.py) -------------------
# A section's `run_fate` covers its keys that declare none. Values `rlcfg run` refuses for a key it otherwise runs
# (a custom policy loss, a scheduler it lacks, ...) are refused by the rule skyrl/run-refusals (rules.py).

_LOG = inert("where logs, metrics, dumps, profiles or exports go, or what they are called; nothing computed changes")
_PERF = inert("a speed, memory or communication knob of skyrl-train's own; what is computed is the same")
_KEYS = inert("a group of pass-through settings; each of its keys declares what `rlcfg run` does with it")
_LORA_SYNC = inert("rlcfg hands the inference engines the merged weights (base + adapter) in memory, so no adapter "
                   "folder is written for them; what they generate with is the same model")
_DEEPSPEED = inert("DeepSpeed's own config, read only with strategy deepspeed, which `rlcfg run` does not train with")
_NO_REWARD_MODEL = refused("rlcfg scores responses with the environment's rule (the answer check); a learned reward "
                           "model is not run (skyrl-train itself stops on one)")
_REWARD_MODEL_ONLY = inert("read only with a reward model (trainer.reward.model.path), which `rlcfg run` refuses")
_OWN_ENGINES = refused("`rlcfg run` starts its own inference engines in its Ray cluster; remote servers or an external "
                       "router are not used")
_REMOTE_ONLY = inert("read only with remote engines (run_engines_locally: false), which `rlcfg run` refuses")
_MODEL_OVERRIDES = refused("rlcfg builds each model from its own config.json; overrides of it are not applied")
_ROPE = refused("rlcfg runs the model with the RoPE settings of its own config.json")
_ENDPOINT = inert("an HTTP endpoint that serves the engines to outside clients; the training loop's generation is the "
                  "same")
_OUTLIER = refused("rlcfg masks no sequence for an outlying token importance ratio; it would train on all of them")
_CHAT_TEMPLATE_ONLY = inert("read only with chat_template.name_or_path set, which `rlcfg run` refuses")
_ENVIRONMENT = inert("settings of SkyRL-Gym environments rlcfg does not run, which `rlcfg run` refuses "
                     "(environment.env_class)")

# Its dtype settings (main_params_dtype, exp_avg_dtype, ...) default to fp32, and no SkyRL release sets them: the
# update is the one rlcfg's fp32 master weights and Adam states make (bf16 weights plus their stored remainders are
# the fp32 masters exactly); only how and where the states are kept differs.
_PRECISION_AWARE = inert("with the fp32 master weights and Adam states its dtype settings default to, megatron-core's "
                         "precision-aware optimizer makes rlcfg's update; it changes how the states are stored and "
                         "where the step runs")
_NO_BATCH_NORMALIZE = refused("rlcfg's batch normalisation whitens with the masked mean and unbiased variance; "
                              "skyrl-train's normalize_advantages_dict takes the mean over the padding too and "
                              "the biased variance")
_VALUE_HEAD_NAME = inert("the name under which a critic checkpoint stores its value head; rlcfg builds its own "
                         "value head whatever the name")
_FSDP_NO_WARMUP = inert("before v0.1.0 only skyrl-train's DeepSpeed strategy, which `rlcfg run` does not train with, "
                        "reads it; its FSDP strategies schedule the learning rate without warm-up, as rlcfg does")
_UNREAD_PRE = inert("no code of skyrl-train before v0.1.0 reads it; rlcfg reads it nowhere either")
_UNREAD_010 = inert("read only by skyrl-train 0.1.0's reward-model worker (its critic is built with "
                    "normalize_reward=False), and `rlcfg run` refuses reward models")
_ONE_VALUE = inert("ulysses is its only value")
_FROZEN_REF = refused("rlcfg keeps the reference model at its starting weights for the whole run")
_LOGPROBS = inert("rlcfg's engines return the sampled tokens' log-probs whenever the algorithm needs them "
                  "(truncated importance sampling)")
_OWN_TEMPLATE = refused("rlcfg renders prompts with the tokenizer's own chat template")
_ENGINE_MODEL_NAME = inert("it names the model behind the HTTP endpoint and remote servers; the engines load "
                           "trainer.policy.model.path")
_HF_EXPORT = inert("exports the weights in Hugging Face format beside the run; nothing computed changes (rlcfg "
                   "writes them with its checkpoints)")
_EXPERT_LAYOUT = inert("how an engine lays its experts over its GPUs; the generated tokens are the same (rlcfg's "
                       "engines keep vLLM's default layout)")


# ---- data ---------------------------------------------------------------------------------------------------


class Data(Section):
    run_fate = HONORED
    # One path alone is a list of one from skyrl-train 0.2.0 (PromptDataset wraps a string); rule
    # skyrl/dataset-files says what the releases before do with it.
    train_data: list[str] | str = param(
        ["${oc.env:HOME}/data/gsm8k/train.parquet"],
        description="Files of the training dataset (parquet; later releases also take JSON files or a Hugging Face "
                    "dataset name). The whole dataset is loaded into the CPU memory of a worker node.")
    val_data: list[str] | str = param(
        ["${oc.env:HOME}/data/gsm8k/validation.parquet"],
        description="Files of the evaluation dataset. With several files, each one is evaluated and logged on its "
                    "own, plus an aggregate.")


# ---- trainer.placement --------------------------------------------------------------------------------------


class Placement(Section):
    run_fate = HONORED
    colocate_all: bool = param(
        True, description="Put every model (policy, ref, critic) and the inference engines on the same GPUs, "
                          "offloading each one while another runs. Needs the policy's GPUs to equal the inference "
                          "engines' GPUs (num_inference_engines × TP).")
    colocate_policy_ref: bool = param(
        True, description="Without colocate_all: put the policy and the reference model on the same GPUs. They must "
                          "then have the same number of nodes and GPUs per node.")
    colocate_critic_reward: bool = param(
        False, description="Put the critic and the reward model on the same GPUs. skyrl-train v0.2.0 removed the "
                           "reward model and this key.", releases=UNTIL_010, fate=_REWARD_MODEL_ONLY)
    policy_num_nodes: int = param(1, description="Number of nodes for the policy's training workers.", ge=1)
    policy_num_gpus_per_node: int = param(
        4, description="GPUs per node for the policy's training workers. v0.1.0 to v0.3.0 default to 4; v0.4.0 and "
                       "later default to 1 (so do the critic's and the reference model's); rlcfg keeps the documented "
                       "4.", ge=1)
    critic_num_nodes: int = param(1, description="Number of nodes for the critic's training workers.", ge=1)
    critic_num_gpus_per_node: int = param(4, description="GPUs per node for the critic's training workers.", ge=1)
    ref_num_nodes: int = param(1, description="Number of nodes for the reference model's workers.", ge=1)
    ref_num_gpus_per_node: int = param(4, description="GPUs per node for the reference model's workers.", ge=1)
    reward_num_nodes: int = param(
        1, description="Number of nodes for the reward model's workers (up to v0.1.0; removed in v0.2.0).", ge=1,
        releases=UNTIL_010, fate=_REWARD_MODEL_ONLY)
    reward_num_gpus_per_node: int = param(
        4, description="GPUs per node for the reward model's workers (up to v0.1.0; removed in v0.2.0).", ge=1,
        releases=UNTIL_010, fate=_REWARD_MODEL_ONLY)


# ---- models -------------------------------------------------------------------------------------------------


class CriticLora(Section):
    run_fate = HONORED
    rank: int = param(0, description="LoRA rank; 0 trains the full model. LoRA needs the vLLM backend and an "
                                     "fsdp, fsdp2 or megatron strategy. (v0.2.0 and later.)", ge=0)
    alpha: int = param(16, description="LoRA scaling factor alpha.", ge=0)
    dropout: float = param(0.0, description="Dropout applied inside the LoRA adapters.", ge=0, le=1)
    target_modules: str | list[str] = param(
        "all-linear", description="Modules that receive adapters (`all-linear` or a name pattern; v0.4.0 and later, "
                                  "before that trainer.target_modules).", releases=FROM_040)
    exclude_modules: str | list[str] | None = param(
        None, description="Modules to leave without adapters (v0.4.0 and later, before that trainer.exclude_modules).",
        releases=FROM_040)
    init_method: str = param("kaiming", description="How the adapter weights are initialised (v0.4.0 and later).",
                             releases=FROM_040,
                             fate=unread("skyrl-train's critic builder (get_llm_for_sequence_regression) passes no "
                                         "init method to PEFT, so the critic's adapters start with PEFT's default "
                                         "(kaiming) whatever this says"))


class Lora(CriticLora):
    """The policy's LoRA settings: the critic's, plus where adapters are handed to the engines."""

    init_method: str = param("kaiming", description="How the adapter weights are initialised: PEFT's "
                                                    "init_lora_weights for FSDP (kaiming is PEFT's default); xavier, "
                                                    "normal, kaiming or zero for Megatron (v0.4.0 and later).",
                             releases=FROM_040, fate=HONORED)
    lora_sync_path: str = param(
        "/tmp/skyrl_lora_sync", description="Directory through which adapter weights are handed to the inference "
                                            "engines.", fate=_LORA_SYNC)


class PolicyModel(Section):
    run_fate = HONORED
    path: str = param("Qwen/Qwen2.5-1.5B-Instruct",
                      description="Hugging Face model name or local directory of the policy model.")
    lora: Lora = section(Lora, description="LoRA adapters for the policy (v0.2.0 and later).", releases=FROM_020)


class RefModel(Section):
    run_fate = HONORED
    path: str | None = param("${trainer.policy.model.path}",
                             description="Model of the reference policy; by default the policy's own starting point. "
                                         "(The YAML interpolates the policy's path; the Python dataclass of later "
                                         "releases hard-codes a model name instead; rlcfg follows the YAML.)")


class CriticModel(Section):
    run_fate = HONORED
    path: str | None = param(None, description="Model of the critic (value model). Null means no critic: GRPO and "
                                               "other critic-free estimators. `gae` needs one.")
    lora: CriticLora = section(CriticLora, description="LoRA adapters for the critic (v0.2.0 and later).",
                               releases=FROM_020)


class RewardModel(Section):
    run_fate = _REWARD_MODEL_ONLY
    path: str | None = param(None, description="Model of a learned reward model; null uses the environment's rewards.",
        fate=_NO_REWARD_MODEL)


class OptimizerConfig(Section):
    run_fate = HONORED
    lr: float = param(1.0e-6, description="Learning rate of AdamW.", gt=0)
    adam_betas: list[float] = param([0.9, 0.999], description="AdamW's betas (beta1, beta2).", min_length=2)
    weight_decay: float = param(1e-2, description="AdamW's weight decay (L2 regularisation strength).", ge=0)
    max_grad_norm: float = param(1.0, description="Gradient clipping: the total L2 norm of the gradients is scaled "
                                                  "down to this value. Applies to every training backend.", gt=0)
    offload_after_step: bool = param(
        True, description="Move the optimizer state to CPU after each step when the models are colocated. DeepSpeed "
                          "requires true.")
    num_warmup_steps: int = param(
        0, description="Learning-rate warm-up, in optimizer steps (v0.1.0 and later; before, "
                       "`trainer.num_warmup_steps`).", ge=0, releases=FROM_010)
    scheduler: str = param("constant_with_warmup",
                           description="Learning-rate schedule, one of transformers' scheduler names (v0.1.0 and "
                                       "later).", releases=FROM_010)


class FsdpConfig(Section):
    run_fate = HONORED
    cpu_offload: bool = param(
        False, description="Keep parameters and optimizer state in CPU memory and copy parameters to the GPU only for "
                           "the forward pass (FSDP1 cpu_offload, FSDP2 offload_policy). Not supported by the `fsdp` "
                           "(FSDP1) strategy for the policy and critic. Unrelated to the offloading done for colocation.")
    reshard_after_forward: bool | int = param(
        True, description="FSDP2 only: re-shard the parameters after the forward pass (true), keep them gathered "
                          "(false, like ZeRO-2), or an integer between 1 and fsdp_size.", fate=_PERF)
    fsdp_size: int = param(
        -1, description="Size of the group within which state is sharded (hybrid sharding across nodes); -1 shards "
                        "over all of the model's workers. Must divide the model's GPU count.")


class OffloadedFsdpConfig(FsdpConfig):
    """FSDP settings of the inference-only models (reference, reward), which are offloaded by default."""

    cpu_offload: bool = param(
        True, description="Keep parameters in CPU memory and copy them to the GPU only for the forward pass; on by "
                          "default for the models that only run forward passes up to v0.3.0, off from v0.4.0.")


class CriticOptimizerConfig(OptimizerConfig):
    """The critic's optimizer: the same keys, a higher default learning rate."""

    lr: float = param(5.0e-6, description="Learning rate of the critic's AdamW. The YAML and SkyRL's mid-2025 docs "
                                          "give 5e-6; the "
                                          "later Python dataclass gives 1e-6; rlcfg follows the YAML.", gt=0)


# Megatron's pass-through mappings: the base config names a few keys of each; like every mapping of the composed
# config they are in struct mode, so further keys of Megatron's own config objects are added with
# `+trainer.policy.megatron_config.transformer_config_kwargs.KEY=...`.


class MegatronDdpConfig(Section):
    run_fate = _PERF
    grad_reduce_in_fp32: bool = param(True, description="Reduce gradients in fp32 (DistributedDataParallelConfig).")
    overlap_grad_reduce: bool = param(False, description="Overlap the gradient reduce-scatter with the backward pass.")
    overlap_param_gather: bool = param(False, description="Overlap the parameter all-gather with the forward pass.")
    average_in_collective: bool = param(True, description="Average gradients inside the collective.")


class MegatronOptimizerKwargs(Section):
    run_fate = _PERF
    overlap_cpu_optimizer_d2h_h2d: bool = param(False, description="Overlap the CPU optimizer's device-host copies "
                                                                   "(for optimizer offloading).")
    use_precision_aware_optimizer: bool = param(
        False, description="Megatron's precision-aware optimizer; skyrl-train advises false (checkpointing can fail).",
            fate=_PRECISION_AWARE)
    optimizer_cpu_offload: bool = param(False, description="Run the optimizer on the CPU.")
    optimizer_offload_fraction: float = param(0.0, description="Share of the optimizer state offloaded to the CPU.",
                                              ge=0, le=1)


class MegatronTransformerKwargs(Section):
    # SkyRL sets every key of this mapping on megatron-core's TransformerConfig, the base config's and any other; the
    # others stay on the section (model_extra), where the lowering reads those rlcfg honors and the rule
    # skyrl/run-refusals refuses the rest.
    model_config = ConfigDict(extra="allow")
    run_fate = _PERF
    recompute_granularity: str | None = param("full", description="Activation recomputation: `full`, `selective` "
                                                                  "or null.")
    recompute_modules: list[str] | None = param(["core_attn"], description="Modules recomputed with `selective`.")
    recompute_method: str | None = param("uniform", description="`uniform` or `block` recomputation.")
    recompute_num_layers: int | None = param(1, description="Layers per recomputation unit.")


class MegatronProfiler(Section):
    run_fate = _LOG
    enable: bool = param(False, description="Profile the Megatron workers with torch's profiler.")
    ranks: list[int] = param([], description="Ranks that are profiled.")
    save_path: str | None = param(None, description="Directory of the profiler traces.")


class MegatronLora(Section):
    run_fate = HONORED
    lora_type: Literal["lora", "canonical_lora"] = param(
        "lora", description="Megatron-Bridge's LoRA flavour: `lora` puts one adapter on each fused layer (qkv, "
                            "gate-up), `canonical_lora` separate ones on q, k, v, gate and up.")


class MegatronParallel(Section):
    run_fate = HONORED
    tensor_model_parallel_size: int = param(1, description="Megatron tensor parallel size (TP).", ge=1)
    pipeline_model_parallel_size: int = param(1, description="Megatron pipeline parallel size (PP).", ge=1)
    context_parallel_size: int = param(1, description="Megatron context parallel size (CP); CP > 1 needs sample "
                                                      "packing.", ge=1)
    expert_model_parallel_size: int = param(1, description="Megatron expert parallel size (EP) for MoE models.", ge=1)
    expert_tensor_parallel_size: int | None = param(
        None, description="Tensor parallel size inside each expert; null lets Megatron use the TP size.")
    model_config_kwargs: dict[str, Any] = param({}, description="Overrides of the Hugging Face model config.",
        fate=_MODEL_OVERRIDES)


class MegatronConfig(MegatronParallel):
    """The policy's Megatron settings (megatron_config/policy.yaml)."""

    ddp_config: MegatronDdpConfig = section(MegatronDdpConfig, description="Passed through to Megatron's "
                                                                           "DistributedDataParallelConfig.", fate=_PERF)
    optimizer_config_kwargs: MegatronOptimizerKwargs = section(
        MegatronOptimizerKwargs, description="Passed through to Megatron's OptimizerConfig; these win over "
                                             "trainer.policy.optimizer_config.", fate=_KEYS)
    transformer_config_kwargs: MegatronTransformerKwargs = section(
        MegatronTransformerKwargs, description="Passed through to Megatron's TransformerConfig.")
    torch_profiler_config: MegatronProfiler = section(MegatronProfiler, description="Torch profiler for the "
                                                                                    "Megatron workers (up to skyrl "
                                                                                    "0.2.0).", fate=_LOG,
                                                      releases=upto("skyrl-0.2.0"))
    lora_config: MegatronLora = section(MegatronLora, description="Megatron LoRA settings (v0.4.0 and later).",
                                        releases=FROM_040)
    empty_cuda_cache: bool = param(
        True, description="Empty torch's CUDA cache between backward and optimizer step to avoid fragmentation OOMs "
                          "(v0.4.0 and later).", releases=FROM_040, fate=_PERF)


class RefMegatronConfig(MegatronParallel):
    """The reference model's Megatron settings (megatron_config/ref.yaml): parallelism and model overrides only."""

    expert_tensor_parallel_size: int | None = param(
        1, description="Tensor parallel size inside each expert of the reference model.")
    transformer_config_kwargs: dict[str, Any] = param(
        {}, description="Overrides of Megatron's TransformerConfig for the reference model; add keys with "
                        "`+trainer.ref.megatron_config.transformer_config_kwargs.KEY=...`.")


class Policy(Section):
    run_fate = HONORED
    model: PolicyModel = section(PolicyModel, description="The policy model.")
    deepspeed_config: dict[str, Any] = param(
        "${deepspeed_config.train}", description="DeepSpeed config of the policy, used with strategy `deepspeed`; by "
                                                 "default the shared `deepspeed_config.train` (up to v0.3.0).",
        releases=UNTIL_030, fate=_DEEPSPEED)
    optimizer_config: OptimizerConfig = section(OptimizerConfig, description="Optimizer of the policy.")
    fsdp_config: FsdpConfig = section(FsdpConfig, description="FSDP settings of the policy (strategies fsdp, fsdp2).")
    megatron_config: MegatronConfig = section(
        MegatronConfig, description="Megatron parallelism of the policy (strategy `megatron`; v0.2.0 and later).",
        releases=FROM_020)
    sequence_parallel_size: int = param(
        1, description="Ulysses sequence parallel size of the policy; the policy's data-parallel size is its GPU "
                       "count divided by this.", ge=1)
    use_torch_compile: bool = param(False, description="Compile the entropy computation with torch.compile.",
        fate=_PERF)
    record_memory: bool = param(
        False, description="Record CUDA memory snapshots after every policy training step (under the checkpoint path).",
            fate=_LOG)
    model_config_kwargs: dict[str, Any] = param({}, description="Overrides of the Hugging Face model config for "
                                                                "the FSDP backends (v0.4.0 and later).",
                                                releases=FROM_040, fate=_MODEL_OVERRIDES)


class Ref(Section):
    run_fate = HONORED
    model: RefModel = section(RefModel, description="The reference model (v0.3.0 and later; before, the policy's "
                                                    "starting point).", releases=FROM_030)
    deepspeed_config: dict[str, Any] = param(
        "${deepspeed_config.eval}", description="DeepSpeed config of the reference model; by default "
                                                "`deepspeed_config.eval` (up to v0.3.0).", releases=UNTIL_030,
                                                    fate=_DEEPSPEED)
    fsdp_config: OffloadedFsdpConfig = section(OffloadedFsdpConfig, description="FSDP settings of the reference "
                                                                                "model; its cpu_offload defaults to true.")
    megatron_config: RefMegatronConfig = section(RefMegatronConfig, description="Megatron parallelism of the "
                                                                                "reference model (v0.2.0 and later).",
                                                 releases=FROM_020)
    sequence_parallel_size: int = param(1, description="Ulysses sequence parallel size of the reference model.", ge=1)
    model_config_kwargs: dict[str, Any] = param({}, description="Overrides of the Hugging Face model config "
                                                                "(v0.4.0 and later).", releases=FROM_040,
                                                                    fate=_MODEL_OVERRIDES)


class Critic(Section):
    run_fate = HONORED
    model: CriticModel = section(CriticModel, description="The critic (value) model.")
    deepspeed_config: dict[str, Any] = param(
        "${deepspeed_config.train}", description="DeepSpeed config of the critic; by default `deepspeed_config.train` "
                                                 "(up to v0.3.0).", releases=UNTIL_030, fate=_DEEPSPEED)
    optimizer_config: CriticOptimizerConfig = section(
        CriticOptimizerConfig, description="Optimizer of the critic; its learning rate defaults to 5e-6.")
    fsdp_config: FsdpConfig = section(FsdpConfig, description="FSDP settings of the critic.")
    sequence_parallel_size: int = param(1, description="Ulysses sequence parallel size of the critic.", ge=1)
    model_config_kwargs: dict[str, Any] = param({}, description="Overrides of the Hugging Face model config "
                                                                "(v0.4.0 and later).", releases=FROM_040,
                                                                    fate=_MODEL_OVERRIDES)


class Reward(Section):
    run_fate = _REWARD_MODEL_ONLY
    model: RewardModel = section(RewardModel, description="A learned reward model (removed in later releases).")
    deepspeed_config: dict[str, Any] = param(
        "${deepspeed_config.eval}", description="DeepSpeed config of the reward model; by default `deepspeed_config.eval`.")
    fsdp_config: OffloadedFsdpConfig = section(OffloadedFsdpConfig, description="FSDP settings of the reward model.")
    sequence_parallel_size: int = param(1, description="Ulysses sequence parallel size of the reward model.", ge=1)


# ---- trainer.algorithm --------------------------------------------------------------------------------------


class KlCtrl(Section):
    # The driver carries the coefficient across steps and checkpoints (Update.next_kl_coef, metric kl_coef).
    run_fate = HONORED
    type: Literal["fixed", "adaptive"] = param(
        "fixed", description="KL controller for the KL-in-reward penalty: a fixed coefficient (kl_loss_coef) or an "
                             "adaptive one that tracks kl_target.")
    kl_target: float = param(0.1, description="Target KL of the adaptive controller.")
    horizon: int = param(10000, description="Update horizon of the adaptive controller; must be > 0 when adaptive.")


class OverlongBuffer(Section):
    # lower.overlong_penalty: the reward shaping the driver applies
    run_fate = HONORED
    len: int = param(description="DAPO's soft overlong punishment: the last this many tokens before "
                                 "max_generate_length (up to 0.3.0, and in the TIS-DAPO example: before "
                                 "max_input_length + max_generate_length less the prompt's tokens) are its buffer, "
                                 "and a response that ends in it loses (tokens into the buffer) / len × "
                                 "penalty_factor of its reward; 0 or less punishes nothing.")
    penalty_factor: float = param(description="The reward a response at max_generate_length loses to DAPO's soft "
                                              "overlong punishment.")


class DynamicSampling(Section):
    # The driver draws, filters and replaces as handle_dynamic_sampling does, and stops at the draw limit
    # (metrics data/draws, data/groups_passed, data/groups_kept).
    run_fate = HONORED
    type: Literal["filter", "replace"] | None = param(
        None, description="Dynamic sampling (DAPO): `filter` drops groups whose rewards are all equal and samples more "
                          "batches, `replace` replaces them with good groups; null disables it.")
    max_sample_batches: int = param(30, description="At most this many batches are sampled per step; -1 samples "
                                                    "without limit.")
    min_replace_ratio: float = param(0.3, description="For `replace`: the smallest share of good groups that can "
                                                      "replace the bad ones.", ge=0, le=1)


class ClipCov(Section):
    run_fate = HONORED
    clip_ratio: float = param(0.0002, description="Share of tokens whose updates Clip-Cov clips.")
    clip_cov_lb: float = param(1.0, description="Lower covariance bound of Clip-Cov.")
    clip_cov_ub: float = param(5.0, description="Upper covariance bound of Clip-Cov.")


class KlCov(Section):
    run_fate = HONORED
    kl_cov_frac: float = param(0.2, description="Share of tokens that KL-Cov penalises.")
    ppo_kl_coef: float = param(1.0, description="KL coefficient of KL-Cov.")


class Cispo(Section):
    run_fate = HONORED
    cispo_eps_clip_low: float = param(0.0, description="Lower clip of CISPO's importance weights.")
    cispo_eps_clip_high: float = param(5.0, description="Upper clip of CISPO's importance weights.")


class Sapo(Section):
    run_fate = HONORED
    tau_pos: float = param(1.0, description="SAPO temperature for positive advantages.")
    tau_neg: float = param(1.05, description="SAPO temperature for negative advantages.")


class OffPolicyCorrection(Section):
    run_fate = HONORED
    tis_ratio_type: Literal["token", "sequence"] | None = param(
        None, description="Truncated importance sampling on the ratio of the trained policy's old log-probs to the "
                          "rollout engine's: per token, per sequence, or off (null).")
    token_tis_ratio_clip_high: float = param(2.0, description="Cap of the per-token ratio (tis_ratio_type token; "
                                                              "1.5 to 5 is usual).")
    sequence_tis_ratio_clip_high: float = param(5.0, description="Cap of the per-sequence ratio (tis_ratio_type "
                                                                 "sequence; 2 to 10 is usual).")
    sequence_mask_metric: Literal["product", "geometric"] | None = param(
        None, description="Mask whole sequences whose product or geometric mean of ratios leaves the bounds below; "
                          "null disables it. The masked sequences still count in the loss's denominators.")
    geo_mask_high: float = param(1.01, description="Upper bound of the geometric-mean mask.")
    geo_mask_low: float = param(0.99, description="Lower bound of the geometric-mean mask.")
    product_mask_high: float = param(2.0, description="Upper bound of the product mask.")
    product_mask_low: float = param(0.5, description="Lower bound of the product mask.")
    outlier_token_is_threshold_low: float | None = param(
        None, description="With any correction on: mask sequences holding a token whose ratio is below this; null "
                          "disables it.", fate=_OUTLIER)
    outlier_token_is_threshold_high: float | None = param(
        None, description="With any correction on: mask sequences holding a token whose ratio is above this; null "
                          "disables it.", fate=_OUTLIER)


class Algorithm(Section):
    run_fate = HONORED
    advantage_estimator: str = param(
        "grpo", description="Advantage estimator: `grpo` or `gae` (SkyRL's mid-2025 docs); later releases add `rloo` "
                            "and "
                            "`reinforce++`, and custom estimators can be registered in code.")
    kl_ctrl: KlCtrl = section(KlCtrl, description="KL controller for use_kl_in_reward (v0.1.0 and later; before, "
                                                   "kl_loss_coef is the fixed coefficient).", releases=FROM_010)
    use_kl_estimator_k3: bool = param(
        False, description="Use the k3 KL estimator (non-negative, unbiased, low variance) instead of k1; from "
                           "v0.1.0 it overrides kl_estimator_type. Deprecated; true before v0.1.0, false in the base "
                           "config from v0.1.0; removed in v0.4.0.", releases=UNTIL_030)
    use_abs_kl: bool = param(False, description="Use the absolute-value KL estimator. Deprecated in favour of "
                                                "kl_estimator_type: abs; removed in v0.4.0.", releases=UNTIL_030)
    kl_estimator_type: Literal["k1", "k2", "k3", "abs"] = param(
        "k3", description="KL estimator (replacing use_kl_estimator_k3 and use_abs_kl; v0.1.0 and later).",
        releases=FROM_010)
    use_kl_in_reward: bool = param(
        False, description="Subtract kl × kl_loss_coef from the rewards. Mutually exclusive with use_kl_loss.")
    use_kl_loss: bool = param(
        True, description="Add kl × kl_loss_coef to the policy loss. Mutually exclusive with use_kl_in_reward; either "
                          "one makes the reference model run.")
    kl_loss_coef: float = param(0.001, description="Coefficient of the KL term (in the loss or in the reward).", ge=0)
    use_entropy_loss: bool = param(False, description="Add an entropy bonus to the policy loss (v0.3.0 and later).",
                                   releases=FROM_030)
    entropy_loss_coef: float = param(0.01, description="Coefficient of the entropy bonus (v0.3.0 and later).", ge=0,
                                     releases=FROM_030)
    advantage_batch_normalize: bool = param(
        False, description="Normalise advantages by the mean and standard deviation of the whole training batch.",
            fate=_NO_BATCH_NORMALIZE)
    value_head_prefix: str = param("value_head", description="Name of the value head in the critic model.",
        fate=_VALUE_HEAD_NAME)
    policy_loss_type: str = param(
        "regular", description="Policy loss (v0.1.0 and later; before, `ppo_loss_type`): regular, dual_clip, gspo, "
                               "cispo, clip_cov, kl_cov, sapo, cross_entropy, importance_sampling, or one registered "
                               "in code.", releases=FROM_010)
    ppo_loss_type: Literal["regular", "dual_clip"] | None = param(
        None, description="Policy loss before v0.1.0 (its default there: regular), which v0.1.0 renamed "
                          "policy_loss_type.", releases=ONLY_PRE)
    kl_target: float | None = param(
        None, description="Before v0.1.0: a target KL that no code of skyrl-train reads (its KL coefficient is "
                          "kl_loss_coef, fixed).", releases=ONLY_PRE, fate=_UNREAD_PRE)
    init_kl_coef: float | None = param(
        None, description="Before v0.1.0 (its default there: 0.0): an initial KL coefficient that no code of "
                          "skyrl-train reads (its KL coefficient is kl_loss_coef, fixed).", releases=ONLY_PRE,
        fate=_UNREAD_PRE)
    loss_reduction: Literal["token_mean", "sequence_mean", "seq_mean_token_sum_norm", "token_mean_legacy",
                            "prompt_mean"] = param(
        "token_mean", description="How token losses are reduced to one number (v0.1.0 and later; before, every loss "
                                  "is a mean per sequence, then over the batch: sequence_mean). From skyrl 0.2.0 the "
                                  "reduction runs over the whole mini-batch, and token_mean_legacy is the per-micro-"
                                  "batch token mean of before; skyrl 0.3.0 adds prompt_mean.", releases=FROM_010)
    grpo_norm_by_std: bool = param(True, description="Divide GRPO advantages by the group's reward standard deviation "
                                                     "(v0.1.0 and later; before, always).", releases=FROM_010)
    zero_variance_filter: bool = param(False, description="Mask out groups whose rewards are all equal (v0.4.0 and "
                                                          "later).", releases=FROM_040)
    overlong_buffer_len: int | None = param(
        None, description="DAPO's soft overlong punishment: the last this many tokens before max_generate_length "
                          "are its buffer, and a response that ends in it loses (tokens into the buffer) / "
                          "overlong_buffer_len × overlong_buffer_penalty_factor of its reward. Added by SkyRL's DAPO "
                          "example entrypoint (its default there: 512); 0 or less punishes nothing.",
        releases=(), entry=DAPO_ENTRY)
    overlong_buffer_penalty_factor: float | None = param(
        None, description="The reward a response at max_generate_length loses to DAPO's soft overlong punishment "
                          "(added by SkyRL's DAPO example entrypoint; its default there: 1.0).",
        releases=(), entry=DAPO_ENTRY)
    overlong_buffer: OverlongBuffer | None = section(
        OverlongBuffer, optional=True, releases=(), entry=SKYRL_TRAIN_DAPO_ENTRY,
        description="DAPO's soft overlong punishment as skyrl-train's DAPO example entrypoint reads it, added with "
                    "`+trainer.algorithm.overlong_buffer.len=...` and `+...penalty_factor=...` (the skyrl package "
                    "names it overlong_buffer_len and overlong_buffer_penalty_factor).")
    lambd: float = param(1.0, description="GAE lambda.", ge=0, le=1)
    gamma: float = param(1.0, description="GAE discount gamma.", ge=0, le=1)
    eps_clip_low: float = param(0.2, description="PPO ratio clip below 1 (the ratio is clamped to 1 - eps_clip_low).",
                                ge=0)
    eps_clip_high: float = param(0.2, description="PPO ratio clip above 1 (the ratio is clamped to 1 + eps_clip_high).",
                                 ge=0)
    clip_ratio_c: float = param(3.0, description="Dual-clip constant c of the dual_clip loss (greater than 1).", gt=1)
    tis_imp_ratio_cap: float = param(
        -1.0, description="Cap of truncated importance sampling; must be > 0 when use_tis is true.", releases=FROM_010)
    use_tis: bool = param(
        False, description="Truncated importance sampling between the inference engine and the trainer (v0.1.0 and "
                           "later). Later releases replace it with off_policy_correction.tis_ratio_type: token.",
        releases=FROM_010)
    off_policy_correction: OffPolicyCorrection = section(
        OffPolicyCorrection, description="Importance-sampling corrections between the rollout policy and the "
                                         "trained one (v0.4.0 and later).", releases=FROM_040)
    value_clip: float = param(0.2, description="Clip range of the value loss.", ge=0)
    normalize_reward: bool = param(
        True, description="Let the critic learn the mean and standard deviation of the values and normalise them "
                          "(up to v0.1.0).", releases=UNTIL_010, fate=_UNREAD_010)
    dynamic_sampling: DynamicSampling = section(DynamicSampling, description="Dynamic sampling (DAPO; v0.1.0 and "
                                                                             "later).", releases=FROM_010)
    clip_cov: ClipCov = section(ClipCov, description="Settings of the clip_cov policy loss (v0.2.0 and later).",
                                releases=FROM_020)
    kl_cov: KlCov = section(KlCov, description="Settings of the kl_cov policy loss (v0.2.0 and later).",
                            releases=FROM_020)
    cispo: Cispo = section(Cispo, description="Settings of the cispo policy loss (v0.3.0 and later).",
                           releases=FROM_030)
    sapo: Sapo = section(Sapo, description="Settings of the sapo policy loss (v0.4.0 and later).", releases=FROM_040)
    max_seq_len: int | None = param(
        None, description="Sequence length that normalises the seq_mean_token_sum_norm loss. Null: skyrl-train "
                          "derives generator.max_input_length + sampling_params.max_generate_length (too short for "
                          "multi-turn). Only the last commit has the key.", ge=1, releases=ONLY_MAIN)


class FullyAsync(Section):
    run_fate = HONORED
    enabled: bool = param(False, description="Train fully asynchronously; the fully-asynchronous entrypoint "
                                             "(examples/train/fully_async/main_fully_async) stops unless it is true, "
                                             "and main_base trains synchronously whatever it says.",
                          releases=PACKAGE_FROM_030,
                          fate=inert("a switch the fully-asynchronous entrypoint requires on (rlcfg validate checks it); "
                                     "the entrypoint makes the run asynchronous, and under another the key is "
                                     "refused"))
    max_staleness_steps: int = param(4, description="Fully-async training: a group scheduled at step i is trained "
                                                    "at a step j ≤ i + this. Read by the fully-asynchronous "
                                                    "entrypoint only.", ge=0)
    num_parallel_generation_workers: int = param(768, description="Fully-async training: the prompts (groups) "
                                                                  "generating at once, between policy_mini_batch_size "
                                                                  "and policy_mini_batch_size × (max_staleness_steps "
                                                                  "+ 1). Read by the fully-asynchronous entrypoint "
                                                                  "only.", ge=1)


# ---- trainer ------------------------------------------------------------------------------------------------


class Trainer(Section):
    run_fate = HONORED
    placement: Placement = section(Placement, description="Where the models run, and which of them share GPUs.")
    sequence_parallel_backend: Literal["ulysses"] = param("ulysses", description="Sequence parallelism; only Ulysses "
                                                                                 "is implemented.", fate=_ONE_VALUE)
    strategy: Literal["fsdp", "fsdp2", "deepspeed", "megatron"] = param(
        "fsdp2", description="Training backend: `fsdp` (FSDP1), `fsdp2` or `deepspeed` (SkyRL's mid-2025 docs); "
                             "`megatron` in "
                             "later releases. Those docs give no default; the code's is fsdp2.")
    policy: Policy = section(Policy, description="The policy model and how it is trained.")
    ref: Ref = section(Ref, description="The reference model, used only when use_kl_loss or use_kl_in_reward is on.")
    critic: Critic = section(Critic, description="The critic, used when critic.model.path is set.")
    reward: Reward = section(Reward, description="A learned reward model (up to v0.1.0).", releases=UNTIL_010)
    algorithm: Algorithm = section(Algorithm, description="The RL algorithm: advantages, KL, loss.")
    fully_async: FullyAsync = section(FullyAsync, description="Fully asynchronous training (v0.3.0 and later), read "
                                                               "by the fully-asynchronous entrypoint.",
                                      releases=FROM_030)
    gradient_checkpointing: bool = param(True, description="Recompute activations in the backward pass to save memory.")
    gradient_checkpointing_use_reentrant: bool = param(False, description="Use torch's reentrant checkpointing.",
        fate=_PERF)
    seed: int = param(42, description="Random seed of the training run.")
    resume_mode: Literal["none", "latest", "from_path"] | None = param(
        "latest", description="Resume from nothing (null or `none`), the latest checkpoint under ckpt_path, or "
                              "resume_path (`from_path`).")
    resume_path: str | None = param(None, description="Checkpoint directory (`global_step_N`) to resume from with "
                                                      "resume_mode `from_path`.")
    log_path: str = param("/tmp/skyrl-logs", description="Directory of the infrastructure log files "
                                                         "(infra-YYMMDD_HHMMSS.log); on several nodes, a shared file "
                                                         "system gathers them in one file (last commit only).",
                          releases=ONLY_MAIN, fate=_LOG)
    ckpt_path: str = param("${oc.env:HOME}/ckpts/", description="Directory of resumable checkpoints (model and "
                                                               "optimizer state).")
    max_ckpts_to_keep: int = param(-1, description="Keep the last N checkpoints; a negative value keeps all. 0 is "
                                                   "rejected.")
    ckpt_interval: int = param(10, description="Save a full checkpoint every this many steps; 0 or less never.")
    hf_save_interval: int = param(-1, description="Save the model(s) in Hugging Face format every this many steps; "
                                                  "-1 never.", fate=_HF_EXPORT)
    export_path: str = param("${oc.env:HOME}/exports/", description="Directory of exported artifacts (Hugging Face "
                                                                   "models, dumped batches and eval results).",
                                                                       fate=_LOG)
    bf16: bool = param(True, description="Train in bfloat16.")
    epochs: int = param(1, description="Passes over the whole training dataset.", ge=0)
    update_epochs_per_batch: int = param(
        1, description="Gradient passes over each training batch (PPO epochs).", ge=1)
    train_batch_size: int = param(1024, description="Prompts per training step (each one gives n_samples_per_prompt "
                                                    "samples).", ge=1)
    policy_mini_batch_size: int = param(
        256, description="Prompts per policy optimizer step (global, over all DP ranks). Must divide train_batch_size.")
    critic_mini_batch_size: int = param(
        256, description="Prompts per critic optimizer step. Must divide train_batch_size. rlcfg runs one critic step "
                         "over the whole batch, so with a critic it refuses a value below train_batch_size.")
    micro_train_batch_size_per_gpu: int = param(
        1, description="Samples per GPU per gradient-accumulation step (policy and critic).", ge=1)
    micro_forward_batch_size_per_gpu: int = param(
        1, description="Samples per GPU per forward pass when computing log-probabilities or values.", ge=1)
    update_ref_every_epoch: bool = param(False, description="Copy the policy into the reference model every epoch.",
        fate=_FROZEN_REF)
    use_sample_packing: bool = param(True, description="Pack samples into one sequence for the forward pass "
                                                       "(all models); the `skyrl` package calls it "
                                                       "trainer.remove_microbatch_padding from 0.3.0.")
    eval_batch_size: int = param(1024, description="Prompts per evaluation batch.", ge=1, fate=_PERF)
    eval_before_train: bool = param(True, description="Evaluate once before the first training step.")
    eval_interval: int = param(5, description="Evaluate every this many steps; 0 or less disables evaluation.")
    max_prompt_length: int = param(512, description="Longest prompt in tokens; longer prompts are truncated.", ge=1)
    flash_attn: bool = param(True, description="Use flash attention in the training models.", fate=_PERF)
    disable_fast_tokenizer: bool = param(False, description="Use the slow (Python) tokenizer.", fate=_PERF)
    target_modules: str | list[str] = param(
        "all-linear", description="Modules LoRA targets (up to v0.3.0; v0.4.0 moved it to "
                                  "trainer.policy.model.lora.target_modules).", releases=UNTIL_030)
    exclude_modules: str | list[str] | None = param(
        None, description="Modules LoRA leaves alone (v0.2.0 and v0.3.0; v0.4.0 moved it to "
                          "trainer.policy.model.lora.exclude_modules).", releases=("0.2.0", "0.3.0"))
    use_orm_score: bool = param(False, description="Use the outcome reward model's score as the reward (up to "
                                                   "v0.1.0).", releases=UNTIL_010, fate=_NO_REWARD_MODEL)
    num_warmup_steps: int | None = param(
        None, description="Learning-rate warm-up before v0.1.0 (its default there: 0), which v0.1.0 moved into "
                          "trainer.policy.optimizer_config and trainer.critic.optimizer_config. Only the DeepSpeed "
                          "strategy read it then: the FSDP strategies built their schedule without warm-up.", ge=0,
        releases=ONLY_PRE, fate=_FSDP_NO_WARMUP)
    project_name: str = param("skyrl", description="Project name in the logger (WandB, MLflow).", fate=_LOG)
    run_name: str = param("test_run", description="Run name in the logger.", fate=_LOG)
    logger: Literal["wandb", "console", "mlflow", "tensorboard"] | list[Literal["wandb", "console", "mlflow",
                                                                               "tensorboard"]] = param(
        "wandb", description="Where metrics go: `wandb` (needs WANDB_API_KEY) or `console` (SkyRL's mid-2025 docs); "
                             "later releases "
                             "add mlflow and tensorboard.", fate=_LOG)
    dump_data_batch: bool = param(False, description="Write each training batch under export_path/dumped_data.",
        fate=_LOG)
    dump_eval_results: bool = param(True, description="Write evaluation results under export_path/dumped_eval.",
        fate=_LOG)
    rope_scaling: dict[str, Any] | None = param(None, description="RoPE scaling override for the training models "
                                                                  "(v0.3.0 to skyrl 0.2.0).",
                                                releases=upto("skyrl-0.2.0", FROM_030), fate=_ROPE)
    rope_theta: float | None = param(None, description="RoPE theta override for the training models (v0.3.0 to "
                                                       "skyrl 0.2.0).", releases=upto("skyrl-0.2.0", FROM_030),
                                     fate=_ROPE)


# ---- generator ----------------------------------------------------------------------------------------------


class SamplingParams(Section):
    run_fate = HONORED
    max_generate_length: int = param(1024, description="Most tokens generated per response (per turn).", ge=1)
    temperature: float = param(1.0, description="Sampling temperature; 0 is greedy.", ge=0)
    top_p: float = param(1.0, description="Nucleus sampling threshold.", gt=0, le=1)
    min_p: float = param(0.0, description="Min-p sampling threshold.", ge=0, le=1)
    top_k: int = param(-1, description="Top-k sampling; -1 disables it.")
    repetition_penalty: float = param(1.0, description="Repetition penalty (v0.2.0 and later).", gt=0,
                                      releases=FROM_020)
    logprobs: int | None = param(
        None, description="Return the log-probability of each sampled token (0 or 1: only the chosen token). "
                          "Null returns none. (YAML of later releases: 1 or null; dataclass: 0.) v0.1.0 and later.",
        ge=0, fate=_LOGPROBS, releases=FROM_010)
    stop: list[str] | None = param(None, description="Stop strings (not with SGLang; v0.2.0 and later).",
                                   releases=FROM_020)


class EvalSamplingParams(SamplingParams):
    max_generate_length: int = param("${generator.sampling_params.max_generate_length}",
                                     description="Most tokens generated per response in evaluation; by default the "
                                                 "training value.", ge=1)
    temperature: float = param(0.0, description="Sampling temperature in evaluation; 0 (greedy) in the base config "
                                                "from v0.1.0, 1.0 before.", ge=0)


class ChatTemplate(Section):
    run_fate = _CHAT_TEMPLATE_ONLY
    source: Literal["name", "file"] = param("name", description="Where the chat template comes from.")
    name_or_path: str | None = param(None, description="The template's name or file; null uses the tokenizer's.",
        fate=_OWN_TEMPLATE)


class Generator(Section):
    run_fate = HONORED
    model_name: str = param("${trainer.policy.model.path}", description="Model served by the inference engines; by "
                                                                        "default the policy's (skyrl-train "
                                                                        "0.2.0 to its last commit).",
                            releases=upto("main", FROM_020),
                                                                            fate=_ENGINE_MODEL_NAME)
    model_dtype: Literal["bfloat16", "float16", "float32"] = param(
        "bfloat16", description="Dtype of the inference engines; weights are cast to it when synced. Should match the "
                                "engines' dtype.")
    run_engines_locally: bool = param(
        True, description="Start the inference engines in this Ray cluster (true) or talk to remote servers over HTTP "
                          "(false, see remote_inference_engine_urls).", fate=_OWN_ENGINES)
    num_inference_engines: int = param(1, description="Number of inference engines (replicas). With remote engines, "
                                                      "the number of URLs.", ge=1)
    backend: Literal["vllm", "sglang"] = param("vllm", description="Inference engine: vllm or sglang (SkyRL's mid-2025 "
                                                                   "docs: sglang "
                                                                   "only for remote engines).")
    weight_sync_backend: Literal["nccl", "gloo", "delta"] = param(
        "nccl", description="How policy weights reach the engines: nccl or gloo (`delta` in the newest releases).",
            fate=_PERF)
    weight_transfer_threshold_cuda_ipc_GB: float = param(1.0, description="Batch size in GB of CUDA-IPC weight "
                                                                          "transfers (v0.1.0 and later).", gt=0,
                                                         fate=_PERF, releases=FROM_010)
    inference_engine_tensor_parallel_size: int = param(4, description="Tensor parallel size of each engine.", ge=1)
    inference_engine_pipeline_parallel_size: int = param(
        1, description="Pipeline parallel size of each engine (v0.3.0 and later).", ge=1, releases=FROM_030)
    inference_engine_expert_parallel_size: int = param(
        1, description="Expert parallel size of each engine (v0.2.0 and later).", ge=1, releases=FROM_020,
        fate=_EXPERT_LAYOUT)
    inference_engine_data_parallel_size: int = param(
        1, description="Data parallel size inside each engine (v0.2.0 and later).", ge=1, releases=FROM_020)
    n_samples_per_prompt: int = param(5, description="Samples per prompt; a training batch has train_batch_size × "
                                                     "n_samples_per_prompt sequences.", ge=1)
    async_engine: bool = param(True, description="Use vLLM's asynchronous engine (false: the offline engine, which "
                                                 "needs batched: true; up to skyrl 0.2.0).", fate=_PERF,
                               releases=upto("skyrl-0.2.0"))
    batched: bool = param(False, description="Generate all single-turn prompts in one batched call. False in the "
                                             "base config from v0.1.0, true before.", fate=_PERF)
    max_input_length: int = param(
        "${trainer.max_prompt_length}", description="Longest engine input. Single-turn: equal to "
                                                    "trainer.max_prompt_length. Multi-turn: at least that, the input "
                                                    "limit of every turn.", ge=1, fate=HONORED)
    vllm_v1_disable_multiproc: bool = param(True, description="Set VLLM_ENABLE_V1_MULTIPROCESSING=0, which makes "
                                                              "scheduling deterministic.", fate=_PERF)
    enable_prefix_caching: bool = param(True, description="vLLM prefix caching (must match remote servers).")
    enable_chunked_prefill: bool = param(True, description="vLLM chunked prefill.")
    max_num_batched_tokens: int = param(8192, description="vLLM continuous batching: most tokens per batch.", ge=1)
    enforce_eager: bool = param(False, description="Disable CUDA graphs in the engine.")
    distributed_executor_backend: Literal["mp", "ray"] = param(
        "ray", description="How vLLM starts an engine's tensor- and pipeline-parallel workers: Ray actors, or "
                           "processes on one node (`mp`; skyrl 0.2.0 and later).", releases=PACKAGE[1:], fate=_PERF)
    fully_sharded_loras: bool = param(
        False, description="vLLM's fully_sharded_loras: shard the LoRA computation over the engine's tensor-parallel "
                           "ranks (v0.3.0 and later).", releases=FROM_030, fate=_LORA_SYNC)
    enable_ray_prometheus_stats: bool = param(
        False, description="Export vLLM engine metrics through Ray's Prometheus stats logger (vLLM v1; v0.4.0 and "
                           "later).", releases=FROM_040, fate=_LOG)
    external_proxy_url: str | None = param(
        None, description="New inference layer (_SKYRL_USE_NEW_INFERENCE=1): URL of an external load-balancing router "
                          "for generation; null builds the servers from the placement (v0.4.0 and later).",
        releases=FROM_040, fate=_OWN_ENGINES)
    external_server_urls: list[str] | None = param(
        None, description="New inference layer: URLs of the backend servers for control calls (weight sync, "
                          "pause); null builds them from the placement (v0.4.0 and later).", releases=FROM_040,
                              fate=_OWN_ENGINES)
    gpu_memory_utilization: float = param(0.8, description="Share of GPU memory the engine may use (local engines).",
                                          gt=0, le=1)
    max_num_seqs: int = param(1024, description="vLLM continuous batching: most sequences per batch.", ge=1)
    remote_inference_engine_urls: list[str] = param(
        ["127.0.0.1:8001"], description="host:port of each remote engine; used only when run_engines_locally is false, "
                                        "then one per engine (up to skyrl 0.2.0).", fate=_REMOTE_ONLY,
        releases=upto("skyrl-0.2.0"))
    enable_http_endpoint: bool = param(False, description="Serve an OpenAI-compatible HTTP endpoint in front of the "
                                                          "engines (vLLM with async_engine only).", releases=upto("skyrl-0.2.0", FROM_020),
                                                              fate=_ENDPOINT)
    http_endpoint_host: str = param("127.0.0.1", description="Host of the HTTP endpoint.", releases=upto("skyrl-0.2.0", FROM_020),
        fate=_ENDPOINT)
    http_endpoint_port: int = param(8000, description="Port of the HTTP endpoint.", ge=1, le=65535, releases=upto("skyrl-0.2.0", FROM_020),
        fate=_ENDPOINT)
    served_model_name: str | None = param(None, description="Model name the HTTP endpoint answers to.",
        releases=FROM_040, fate=_ENDPOINT)
    engine_init_kwargs: dict[str, Any] = param({}, description="Extra arguments for the engine's constructor; add "
                                                               "keys with `+generator.engine_init_kwargs.KEY=...`.",
                                                                   releases=FROM_020)
    max_turns: int = param(1, description="Most turns of multi-turn generation; 1 is single-turn.", ge=1,
        fate=HONORED)
    override_existing_update_group: Literal["auto", "enable", "disable"] = param(
        "auto", description="Remote engines: replace a weight-update group left by an earlier run. `auto` becomes "
                            "`enable` for remote vLLM engines and `disable` otherwise (up to skyrl 0.2.0).",
        fate=_REMOTE_ONLY, releases=upto("skyrl-0.2.0"))
    sampling_params: SamplingParams = section(SamplingParams, description="Sampling during trajectory generation.")
    use_conversation_multi_turn: bool = param(
        True, description="Multi-turn: append observations as new chat turns (true) or as raw tokens after the "
                          "assistant's response (false). True in the base config from v0.1.0, false before.",
        fate=HONORED)
    append_eos_token_after_stop_str_in_multi_turn: bool = param(
        True, description="Multi-turn with stop strings: append the EOS token after a stop string.", releases=FROM_020,
            fate=HONORED)
    chat_template: ChatTemplate = section(ChatTemplate, description="Chat template override (v0.2.0 and later).",
                                          releases=FROM_020, fate=_CHAT_TEMPLATE_ONLY)
    chat_template_kwargs: dict[str, Any] = param({}, description="Arguments for the chat template (not with batched).",
        releases=FROM_020, fate=HONORED)
    eval_sampling_params: EvalSamplingParams = section(EvalSamplingParams, description="Sampling during evaluation.")
    eval_n_samples_per_prompt: int = param(1, description="Samples per prompt in evaluation: each prompt gets this "
                                                 "many responses, and evaluation reports the mean reward and "
                                                 "pass@n (the share of prompts with a positive reward among their "
                                                 "n responses).", ge=1, fate=HONORED)
    zero_reward_on_non_stop: bool = param(False, description="Give 0 reward to responses that did not stop on their "
                                                             "own (truncated or aborted).")
    apply_overlong_filtering: bool = param(False, description="DAPO overlong filtering: mask the loss of truncated "
                                                              "responses (v0.1.0 and later).", releases=FROM_010)
    step_wise_trajectories: bool = param(False, description="Train on each turn of a multi-turn trajectory as its own "
                                                            "sample.", releases=FROM_040,
                                          fate=refused("rlcfg trains each episode as one sample; it does not split "
                                                       "an episode into a sample per turn"))
    rope_scaling: dict[str, Any] | None = param(None, description="RoPE scaling override for the engines (v0.3.0 to "
                                                                  "skyrl 0.2.0).",
                                                releases=upto("skyrl-0.2.0", FROM_030), fate=_ROPE)
    rope_theta: float | None = param(None, description="RoPE theta override for the engines (v0.3.0 to skyrl "
                                                       "0.2.0).", releases=upto("skyrl-0.2.0", FROM_030), fate=_ROPE)


# ---- other top-level sections -------------------------------------------------------------------------------


# deepspeed_config/train.yaml and eval.yaml of v0.1.0 to v0.3.0: DeepSpeed's own JSON config, passed through. The
# base config holds these keys, so Hydra overrides such as `deepspeed_config.train.zero_optimization.offload_param.
# device=cpu` find them.
_DS_TRAIN = {
    "zero_optimization": {
        "stage": 3, "offload_param": {"device": "none"}, "offload_optimizer": {"device": "none", "pin_memory": True},
        "sub_group_size": "auto", "reduce_bucket_size": "auto", "stage3_param_persistence_threshold": "auto",
        "stage3_prefetch_bucket_size": "auto", "stage3_max_live_parameters": "auto",
        "stage3_max_reuse_distance": "auto", "round_robin_gradients": True, "zero_hpz_partition_size": 1,
        "zero_quantized_weights": False, "zero_quantized_gradients": False},
    "disable_trace_cache": False, "data_types": {"grad_accum_dtype": "fp32"}, "gradient_clipping": 1.0,
    "wall_clock_breakdown": False, "prescale_gradient": False,
}
_DS_EVAL = {
    "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": "auto",
                          "offload_param": {"device": "cpu", "pin_memory": True}},
    "torch_autocast": {"enabled": True, "dtype": "bfloat16"}, "gradient_clipping": 1.0, "prescale_gradient": False,
    "wall_clock_breakdown": False,
}


class DeepspeedConfig(Section):
    run_fate = _DEEPSPEED
    train: dict[str, Any] = param(
        _DS_TRAIN,
        description="DeepSpeed config for training (policy, critic); DeepSpeed's own JSON config keys, passed "
                    "through. Only ZeRO stage 3 is supported; leave gradient_clipping unset (max_grad_norm applies).")
    eval: dict[str, Any] = param(
        _DS_EVAL,
        description="DeepSpeed config for inference-only models (reference, reward), passed through.")


class Text2Sql(Section):
    run_fate = HONORED
    db_path: str = param("/home/ray/default/sql_data", description="Folder of the text-to-SQL databases.")


class LlmAsAJudge(Section):
    run_fate = HONORED
    model: str = param("gpt-4o-mini", description="Judge model of the llm_as_a_judge environment.")
    base_url: str | None = param(None, description="OpenAI-compatible endpoint of the judge; null uses OpenAI's.")


class Search(Section):
    run_fate = HONORED
    log_requests: bool = param(False, description="Log every request of the search environment.",
                               fate=inert("what the environment logs changes nothing it computes"))
    search_url: str = param("http://127.0.0.1:8000/retrieve", description="Retrieval server of the search "
                                                                         "environment.")
    topk: int = param(3, description="Documents returned per search.", ge=1)
    timeout: int | float = param(30, description="Seconds a search request may take.", gt=0)


class SkyRLGym(Section):
    """skyrl_gym_config/default.yaml, placed at environment.skyrl_gym; each environment reads its own block."""
    run_fate = _ENVIRONMENT

    max_env_workers: int = param(32, description="Background threads for environment steps; 0 steps them inline "
                                                 "(v0.1.0 and later).", ge=0, fate=_PERF, releases=FROM_010)
    text2sql: Text2Sql = section(Text2Sql, description="Settings of the text2sql environment.", fate=HONORED)
    llm_as_a_judge: LlmAsAJudge = section(LlmAsAJudge, description="Settings of the llm_as_a_judge environment "
                                                                   "(v0.1.0 and later).", releases=FROM_010,
                                          fate=HONORED)
    search: Search = section(Search, description="Settings of the search environment (v0.1.0 and later).",
                             releases=FROM_010, fate=HONORED)


class Environment(Section):
    run_fate = HONORED
    env_class: str = param("gsm8k", description="SkyRL-Gym environment the generator steps through. `rlcfg run` "
                                                "runs gsm8k, gsm8k_multi_turn (in one turn), aime, lcb, text2sql, "
                                                "search, and the multiply and LLM-as-a-judge examples' own; "
                                                "it refuses the others.")
    skyrl_gym: SkyRLGym = section(SkyRLGym, description="Environment settings (skyrl_gym_config/default.yaml); "
                                                        "settings of custom environments are added with "
                                                        "`+environment.skyrl_gym.NAME.KEY=...`.", fate=HONORED)


class SkyRLConfig(Section):
    run_fate = HONORED
    data: Data = section(Data, description="Training and evaluation datasets.")
    trainer: Trainer = section(Trainer, description="Training: placement, models, algorithm, batches, checkpoints, "
                                                    "logging.")
    generator: Generator = section(Generator, description="Rollout: inference engines and sampling.")
    deepspeed_config: DeepspeedConfig = section(DeepspeedConfig, description="Shared DeepSpeed configs that the "
                                                                             "models refer to (up to v0.3.0).",
                                                releases=UNTIL_030, fate=_DEEPSPEED)
    environment: Environment = section(Environment, description="The environment that scores and steps "
                                                                "trajectories.")


