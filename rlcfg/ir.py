"""The canonical Experiment: what every dialect lowers to, and all that plan/ and runtime/ ever read.

Plain frozen dataclasses of plain values, so an Experiment can be compared, hashed, printed as JSON and sent to a
Ray worker. Names are rlcfg's own, not any framework's: a dialect's lowering (rlcfg/dialects/<name>/lower.py)
translates its keys into these, reproducing the framework's derivations (a DP size computed from GPUs and parallel
sizes, a sequence length derived from prompt and response lengths, ...).

Roles: `actor` (the policy being trained), `rollout` (generation), `reference` (frozen policy for the KL term),
`critic` (value model, PPO), `reward` (a reward model, or rule-based reward workers on CPUs).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from typing import Any, Literal

ROLE_NAMES = ("actor", "rollout", "reference", "critic", "reward")
# The fields that say where a value came from and how the user wrote it, not what runs: an Experiment converted to
# another dialect, or resumed from a checkpoint written under another spelling, is the same experiment.
# `idle_components` names config sections that run nothing, for the plan to show.
PROVENANCE = frozenset({"dialect", "variant", "idle_components"})
ROLE_PROVENANCE = frozenset({"section", "keys", "spelling"})
TrainBackend = Literal["fsdp", "fsdp2", "megatron", "deepspeed"]
RolloutBackend = Literal["vllm", "sglang", "hf"]


@dataclass(frozen=True)
class Parallelism:
    """How one role splits over its GPUs. Megatron orders ranks tp-cp-ep-dp-pp; FSDP shards over `fsdp_shard`
    ranks and replicates across groups of that size (HSDP); rollout engines use tp (and pp) inside each engine."""

    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int | None = None  # expert tensor parallel; None follows tp
    vpp: int | None = None  # virtual pipeline stages per rank
    # Layers on the first and last pipeline stages when they differ from the others' (megatron-core's
    # num_layers_in_first/last_pipeline_stage); None: an even split. Where layers sit changes no result.
    pp_first_layers: int | None = None
    pp_last_layers: int | None = None
    sp: int = 1  # Ulysses sequence parallel (FSDP backends)
    sequence_parallel: bool = False  # Megatron's sequence parallelism inside tp
    fsdp_shard: int | None = None  # FSDP sharding group size; None shards over the whole role


@dataclass(frozen=True)
class Model:
    path: str
    dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    tokenizer: str | None = None  # None: the model's own
    trust_remote_code: bool = False


@dataclass(frozen=True)
class Optimizer:
    lr: float
    name: Literal["adamw", "adam", "sgd"] = "adamw"
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    grad_clip: float | None = 1.0
    scheduler: Literal["constant", "linear", "cosine"] = "constant"
    # Schedule steps of linear warm-up; not always whole (Megatron-LM's lr_warmup_fraction × lr_decay_iters).
    warmup_steps: float = 0
    # The warm-up as a share of the run's optimizer steps where that count comes from the dataset's size (AReaL's
    # warmup_steps_proportion of a supervised run): the runtime resolves it, int(share × steps); it then replaces
    # warmup_steps.
    warmup_proportion: float | None = None
    min_lr: float = 0.0
    # The decay (linear or cosine, after the warm-up) reaches min_lr after this many optimizer steps and stays there;
    # None: it spans the run's optimizer steps. ChatLearn's Megatron trainer decays over one step (its Megatron runs
    # with train_iters 1): lr for the first step, min_lr for every later one.
    decay_steps: float | None = None
    # The lr of the warm-up's first step; it then climbs linearly to lr (Megatron's init_lr / lr_warmup_init; AReaL's
    # cosine schedule warms up from min_lr).
    warmup_start_lr: float = 0.0
    # What advances the schedule: each optimizer step, or each training step whatever its optimizer steps (AReaL
    # steps its scheduler once per rollout step, so every mini-batch update of a step shares one lr, and its
    # schedule spans the dataset's epochs × batches, which a step cap does not shorten).
    schedule_unit: Literal["optimizer_step", "train_step"] = "optimizer_step"


@dataclass(frozen=True)
class LrSchedule:
    """One optimizer's learning rate, resolved for a run: step k (k = 0 for the first update) warms up linearly from
    warmup_start_lr at k = 0 to lr at k = warmup_steps, then stays at lr (constant) or decays over decay_steps to
    min_lr and stays there. rlcfg.runtime.algorithms.lr_at reads it; both training backends use it."""

    lr: float
    shape: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: float = 0
    warmup_start_lr: float = 0.0
    min_lr: float = 0.0
    decay_steps: float | None = None  # None: no decay (the lr stays after the warm-up)


@dataclass(frozen=True)
class Offload:
    """What a role moves off the GPU between its phases (colocation), and what FSDP keeps on CPU throughout."""

    params: bool = False
    optimizer: bool = False
    grads: bool = False
    cpu_offload_during_step: bool = False  # FSDP CPUOffload: parameters live on CPU even during compute


@dataclass(frozen=True)
class Lora:
    """Low-rank adapters (LoRA) on a trained role's linear layers, with PEFT's meaning: each targeted weight W
    computes as W + (alpha / rank) · B·A, only A and B train, and B starts at zero, so the first step's policy is
    the model as loaded. The rollout engines receive the merged weights; the fsdp backend's exports carry the
    adapter beside them. On the megatron backend the adapters are Megatron-Bridge's, one per fused layer (its
    `all-linear`: linear_qkv, linear_proj, linear_fc1, linear_fc2), and one per expert layer that the experts of an
    expert-parallel rank share."""

    rank: int
    alpha: float
    dropout: float = 0.0
    # PEFT's target_modules: module names matched at the end of a module's dotted name, "all-linear" for every
    # linear layer but the output layer, or one string read as a regular expression over the whole name.
    target_modules: str | tuple[str, ...] = "all-linear"
    exclude_modules: str | tuple[str, ...] | None = None
    init: Literal["kaiming", "gaussian"] = "kaiming"  # how A is drawn (PEFT's init_lora_weights True, "gaussian")


@dataclass(frozen=True)
class Resources:
    """What a role asks for. `gpus` is the total; `nodes`/`gpus_per_node` when the dialect pins them; `gpu_ids`
    when the dialect names exact global GPU ids (RLinf's component_placement, ROLL's device_mapping)."""

    gpus: int
    nodes: int | None = None
    gpus_per_node: int | None = None
    gpu_ids: tuple[int, ...] | None = None
    cpus: int = 0


@dataclass(frozen=True)
class Spelling:
    """How the user's config writes a role's backend, so that the runtime can name the edit that switches it in the
    config's own words without knowing its dialect: the value the backend key (Role.key_for("backend")) takes for
    each of rlcfg's backends that the config can name there, and, when that key holds a compound string (AReaL's
    `allocation_mode`, `sglang:d2t4`), the letter of each parallel size inside it."""

    backends: tuple[tuple[str, str], ...] = ()  # (rlcfg backend, the config's value for it)
    size_letters: tuple[tuple[str, str], ...] = ()  # (Parallelism field, its letter in the compound string)

    def backend(self, name: str) -> str | None:
        return dict(self.backends).get(name)

    def size_letter(self, name: str) -> str | None:
        return dict(self.size_letters).get(name)

    @property
    def compound(self) -> bool:
        return bool(self.size_letters)


@dataclass(frozen=True)
class Role:
    name: str  # one of ROLE_NAMES
    backend: str  # TrainBackend, RolloutBackend, or "rule" for rule-based rewards
    resources: Resources
    model: Model | None = None
    parallelism: Parallelism = field(default_factory=Parallelism)
    offload: Offload = field(default_factory=Offload)
    optimizer: Optimizer | None = None
    micro_batch_size: int | None = None  # samples per forward/backward on one DP rank (training)
    forward_micro_batch_size: int | None = None  # samples per forward pass (log-probs, values)
    gradient_checkpointing: bool = False
    sequence_packing: bool = False
    max_tokens_per_micro_batch: int | None = None  # with packing
    disable_dropout: bool = False  # train with every dropout probability of the model at 0
    # Parameters left out of training: every parameter whose name, as the Hugging Face model names it
    # (`model.embed_tokens.weight`), starts with one of these (ROLL freeze_module_prefix). A prefix that matches
    # nothing freezes nothing; the run warns.
    frozen_prefixes: tuple[str, ...] = ()
    lora: Lora | None = None  # None: every weight trains
    # A mixture-of-experts model's router logits on the megatron backend: computed in this dtype, or (None) in the
    # model's own, as the framework's Megatron setup leaves them (megatron-core's moe_router_dtype).
    router_dtype: Literal["fp32", "fp64"] | None = None
    # A router's per-expert score correction (DeepSeek-V3's e_score_correction_bias) on the megatron backend, as
    # the framework's Megatron setup treats it: a rate (routed with it, moved by that rate toward even expert
    # loads after each optimizer step, megatron-core's moe_router_bias_update_rate; 0: held as the checkpoint has
    # it), "off" (routed without it), or "unmapped" (rlcfg has not read how, and refuses such a model there).
    expert_bias: float | Literal["off", "unmapped"] = "unmapped"
    # Environment variables of this role's worker processes, as (name, value), set before the process starts
    # (Ray runtime_env), so even what libraries read at import sees them. Roles share a process only when their
    # environments are equal.
    env: tuple[tuple[str, str], ...] = ()
    engine: tuple[tuple[str, Any], ...] = ()  # rollout engine settings in rlcfg's names (see ENGINE_KEYS)
    # The user's words for this role, so that plans and hints speak the dialect: the config section it comes from
    # (ChatLearn `policy_trainer`, ROLL `actor_train`), and for a setting of this Role (`micro_batch_size`,
    # `forward_micro_batch_size`, ...) the dotted key of the config that sets it.
    section: str | None = None
    keys: tuple[tuple[str, str], ...] = ()
    spelling: Spelling = field(default_factory=Spelling)

    @property
    def trains(self) -> bool:
        return self.optimizer is not None

    def data_parallel(self) -> int:
        """The role's data-parallel ranks: its GPUs over one model replica's (Megatron: tp·pp·cp; otherwise the
        Ulysses group, sp)."""
        p = self.parallelism
        group = p.tp * p.pp * p.cp if self.backend == "megatron" else p.sp
        return max(self.resources.gpus // max(group, 1), 1)

    def key_for(self, setting: str) -> str | None:
        """The config's dotted key that sets one of this Role's settings, where the lowering recorded it."""
        return dict(self.keys).get(setting)

    def engine_args(self) -> dict[str, Any]:
        return dict(self.engine)

    def env_vars(self) -> dict[str, str]:
        return dict(self.env)


# The rollout engine settings a lowering may fill (Role.engine), in rlcfg's names.
ENGINE_KEYS = (
    "gpu_memory_utilization",  # vLLM: share of GPU memory for weights + activations + KV cache
    "mem_fraction_static",  # SGLang: share of GPU memory for weights + KV cache pool
    "max_num_seqs", "max_model_len", "max_num_batched_tokens", "enforce_eager", "enable_prefix_caching",
    "enable_chunked_prefill", "block_size", "seed", "load_format", "attention_backend", "cuda_graph_bs",
    "engines",  # number of engine replicas when the dialect fixes it
)


KLEstimator = Literal["k1", "k2", "k3", "abs", "low_var_kl"]
LossAggregation = Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"]
# Where a loss is normalised (algorithms.loss_denominators). "mini-batch": by the tokens (sequences) of the whole
# global mini-batch, so the accumulated gradient is that of one loss over it (verl, ROLL, AReaL, ChatLearn, RLinf).
# "micro-batch": each micro-batch is reduced on its own, its sequence mean taken over all its rows (loss-masked ones
# count as zeros), and the optimizer step sees the mean of those losses over the micro-batches and ranks of the
# mini-batch (skyrl-train: reduce_loss per micro-batch, gradients scaled by 1/micro-batches, averaged over ranks).
# "step": each mini-batch's loss summed over its tokens (sequences) and divided by those of the whole step, so that a
# mini-batch weighs by its share of the step (RLinf's collocated Megatron actor with use_valid_token_scale: each
# micro-batch scaled by its tokens over the step's, all-reduced before the split into mini-batches); with one
# mini-batch per step it is "mini-batch".
LossNormalization = Literal["mini-batch", "micro-batch", "step"]


@dataclass(frozen=True)
class KLController:
    """How the KL coefficient moves between steps. `fixed` keeps KL.coef; `adaptive` is Ziegler et al.'s
    controller (verl/SkyRL/ROLL `AdaptiveKLController`): coef *= 1 + clip(kl/target − 1, ±0.2)·n/horizon, where
    n is the number of samples of the step."""

    kind: Literal["fixed", "adaptive"] = "fixed"
    target: float | None = None  # target_kl; required by `adaptive`
    horizon: int = 10000


@dataclass(frozen=True)
class KL:
    placement: Literal["none", "reward", "loss"] = "none"  # never both: a validated config chose one
    coef: float = 0.0
    # k3 and low_var_kl are the same estimator; low_var_kl additionally clamps the estimate to ±10 (verl, SkyRL,
    # ROLL, ChatLearn do; the plain k3 here does not, as rlcfg always did).
    estimator: KLEstimator = "k3"
    controller: KLController = field(default_factory=KLController)
    # With placement "reward", how the penalty meets a group-normalised (GRPO/RLOO) advantage.
    # "sequence" (verl's compute_rewards, rlcfg's default): score − β·KL per token, summed per sequence, then
    # group-normalised. "token" (ROLL's compute_token_reward / AReaL's PPOActor._compute_advantages): the score
    # is normalised first, then β·KL is subtracted per token and the advantage is the per-token reward-to-go.
    reward_mode: Literal["sequence", "token"] = "sequence"
    # The policy's side of the penalty: the old log-probs of the ratio ("old"), or the rollout engine's ("rollout":
    # AReaL with the decoupled loss, whose PPOActor.compute_advantages measures it from the behaviour policy).
    policy_logprobs: Literal["old", "rollout"] = "old"
    # With placement "reward": the token rewards are −β·KL alone, the scores left out, so that the policy learns to
    # follow the reference model as a teacher (SkyRL's on-policy distillation example). The scores still feed the
    # metrics and the group filters.
    penalty_only: bool = False


@dataclass(frozen=True)
class RewardShaping:
    scale: float = 1.0
    bias: float = 0.0
    clip: float | None = None  # rewards clipped to [-clip, clip]
    overlong_penalty_length: int | None = None  # DAPO: responses longer than this are penalised
    overlong_penalty_factor: float = 1.0
    # The penalty window starts this many tokens less the prompt's later (SkyRL's DAPO trainers whose buffer ends at
    # max_input_length + max_generate_length less the prompt: this is max_input_length); None: no shift.
    overlong_penalty_prompt_room: int | None = None
    # In which order the steps apply (algorithms.shape_scores):
    # "scale_first" (rlcfg's default): score·scale + bias, clip, then the overlong penalty.
    # "penalty_first" (AReaL PPOActor._compute_advantages): overlong penalty on the raw score, then
    #   (score + bias)·scale, then clip.
    # "clip_normalized" (ROLL reward_postprocess): score·scale + bias and the overlong penalty, the group
    #   normalisation (the advantage's), then `clip` clamps the normalised reward.
    order: Literal["scale_first", "penalty_first", "clip_normalized"] = "scale_first"
    # AReaL mask_no_eos_with_zero / SkyRL zero_reward_on_non_stop: a response cut at the length limit scores 0
    # (it stays in the loss, unlike Algorithm.mask_truncated).
    zero_truncated: bool = False


@dataclass(frozen=True)
class TokenNorm:
    """AReaL's adv_norm (areal/utils/data.py Normalization on the token advantages and the loss mask, in float64):
    each token less the masked mean of its batch or group (leave_one_out: of the others), divided by the masked
    root mean square about that mean (over n − 1 tokens when unbiased) plus eps; None on a side skips it. A group is
    one prompt's responses."""

    mean: Literal["batch", "group"] | None = "batch"
    std: Literal["batch", "group"] | None = "batch"
    leave_one_out: bool = False
    unbiased: bool = True
    eps: float = 1e-5


@dataclass(frozen=True)
class AdvantageOptions:
    """The estimator's details where frameworks differ (Algorithm.advantage names the estimator)."""

    # GRPO's group std: "unbiased" (torch.std; verl, SkyRL, ROLL, RLinf) or "population" (np.std; ChatLearn).
    std: Literal["unbiased", "population"] = "unbiased"
    eps: float = 1e-6  # added to the std (ChatLearn: 1e-5)
    # GAE and REINFORCE++: whiten the advantages over the batch (masked, unbiased variance as verl's
    # masked_whiten). rlcfg always whitened; ROLL's whiten_advantages defaults to False.
    whiten: bool = True
    # REINFORCE++-baseline (verl compute_reinforce_plus_plus_baseline_outcome_advantage, RLinf reinpp with
    # use_reinpp_baseline): subtract the group mean of the scores first.
    group_baseline: bool = False
    whiten_rewards: bool = False  # ROLL whiten_rewards: whiten the token rewards before the estimator
    # ROLL norm_mean_type / norm_std_type for the estimators other than GRPO (ROLL forces group/group for GRPO,
    # which is the grpo estimator itself): the scores are centred on the batch or group mean and divided by the
    # batch or group std (+ 1e-6) before anything else. ROLL's "running" statistics are not offered.
    reward_norm_mean: Literal["batch", "group"] | None = None
    reward_norm_std: Literal["batch", "group"] | None = None
    # Which spread that std measures: "scores" (ROLL: torch.std of the scores, about their own mean, + 1e-6) or
    # "centred" (AReaL's Normalization: the centred scores' root mean square, over n − 1 when unbiased, + eps;
    # with a group mean and a batch std that is the spread about each group's mean).
    reward_norm_std_of: Literal["scores", "centred"] = "scores"
    reward_norm_eps: float = 1e-6
    reward_norm_unbiased: bool = True
    clip: float | None = None  # ROLL advantage_clip: the final advantages clamped to ±clip
    # AReaL adv_norm where it is not the batch whitening `whiten` runs: the final token advantages normalised by
    # group or with its other knobs (whiten and batch_normalize_advantage are then off).
    token_norm: TokenNorm | None = None


@dataclass(frozen=True)
class PolicyOptions:
    """The policy loss's knobs beyond its kind and clip range (Algorithm.policy_loss, clip_low, clip_high,
    clip_ratio_c). Defaults reproduce what rlcfg always ran."""

    # Clamp of the log importance ratio before exp; None on a side: the formula's own (±20 for the token
    # ratio as verl, ≤10 for GSPO's sequence ratio). ChatLearn: (None, 10).
    log_ratio_min: float | None = None
    log_ratio_max: float | None = None
    loss_cap: float | None = None  # ChatLearn calculate_grpo_loss final_clip_ratio: per-token loss ≤ cap
    # GSPO's form: "token" (GSPO-token: verl, SkyRL, ROLL, ChatLearn) keeps each token's gradient under the
    # detached sequence ratio; "sequence" (AReaL importance_sampling_level: sequence) differentiates through the
    # sequence ratio itself and uses each sequence's mean advantage.
    gspo_form: Literal["token", "sequence"] = "token"
    sapo_tau_pos: float = 1.0
    sapo_tau_neg: float = 1.05
    clip_cov_ratio: float = 2e-4  # share of tokens Clip-Cov detaches
    clip_cov_lb: float = 1.0
    clip_cov_ub: float = 5.0
    kl_cov_ratio: float = 2e-4  # share of tokens KL-Cov penalises
    kl_cov_coef: float = 1.0
    # TOPR's weights of the samples whose score is positive and of the rest (ROLL topr_positive/negative_weight).
    topr_positive_weight: float = 1.0
    topr_negative_weight: float = 1.0
    # Truncated importance sampling against the rollout engine's log-probs (SkyRL tis_imp_ratio_cap,
    # RLinf importance_sampling_fix/importance_sampling_clip): loss × min(π_old/π_rollout, cap), detached.
    tis_cap: float | None = None
    tis_level: Literal["token", "sequence"] = "token"
    # RLinf's importance_sampling_fix up to v0.2 (and 2025-10): the weight is max(π_old/π_rollout, tis_cap), a floor
    # (torch.clamp min=), and the PPO ratio is taken against the rollout engine's log-probs; the recomputed π_old
    # enters the weight alone.
    tis_floor: bool = False
    # SkyRL's off-policy sequence mask: a sequence whose geometric mean ("geometric") or product ("product") of the
    # token ratios π_old/π_rollout lies outside [sequence_mask_low, sequence_mask_high] leaves the policy loss; the
    # loss's denominators still count it (the `skyrl` package scales its advantages by the unmasked tokens).
    sequence_mask: Literal["geometric", "product"] | None = None
    sequence_mask_low: float | None = None  # None: no bound on that side
    sequence_mask_high: float | None = None
    # AReaL's decoupled PPO: the ratio is taken against the proximal policy (the recomputed old log-probs) and
    # the loss weighted by π_prox/π_behave (behaviour = the rollout engine's log-probs); tokens whose weight
    # exceeds behav_imp_weight_cap leave the loss.
    decoupled: bool = False
    behav_imp_weight_cap: float | None = None
    # AReaL 1.0's rejection_sampling masks the tokens above the cap before anything else, so its sequence-level
    # (GSPO) ratio and mean advantage are taken over the kept tokens only; 0.4 and 0.5 cap after them.
    cap_before_sequence_means: bool = False
    # AReaL's M2PO: within each micro-batch, the tokens whose second moment (log π_behave − log π_prox)² is largest
    # leave the loss until the mean over the rest is below the threshold (one token at least stays); the
    # micro-batch's loss is the mean over the tokens kept, weighted by all its tokens, as AReaL weighs it.
    m2_threshold: float | None = None
    early_stop_ratio: float | None = None  # RLinf early_stop_imp_ratio: a micro-batch's loss is zeroed above it
    loss_coef: float = 1.0  # ROLL rl_loss_coef: multiplies policy + KL loss (not the entropy bonus)


PolicyLossKind = Literal["regular", "dual_clip", "gspo", "cispo", "sapo", "clip_cov", "kl_cov", "cross_entropy",
                         "importance_sampling", "rollout_is", "topr"]


@dataclass(frozen=True)
class PolicyLossSpec:
    """Everything algorithms.policy_loss reads (built by Algorithm.policy_loss_spec)."""

    kind: PolicyLossKind = "regular"
    clip_low: float = 0.2
    clip_high: float = 0.2
    clip_ratio_c: float = 3.0  # dual-clip bound, used by kind "dual_clip"
    options: PolicyOptions = field(default_factory=PolicyOptions)


@dataclass(frozen=True)
class SampleWeighting:
    """ROLL's per-sample loss weights and masks (ActorWorker.compute_sample_weights, get_sample_level_mask)."""

    difficulty_loss_weight: bool = False  # weight 0.5 + 1.5·clamp(difficulty, 0, 1), from the data's difficulty
    length_loss_weight: bool = False  # weight 1.5 − (len − min)/(max − min) over the micro-batch
    difficulty_mask: tuple[float, float] | None = None  # keep groups whose mean score is strictly inside
    error_max_len_clip: int | None = None  # keep score-1 samples and score-0 samples shorter than this
    max_len_mask: bool = False  # ROLL max_len_mask: drop responses exactly at the length limit

    @property
    def masks_samples(self) -> bool:
        """Whether a mask can leave whole samples out of the loss (algorithms.sample_mask)."""
        return self.difficulty_mask is not None or self.error_max_len_clip is not None or self.max_len_mask


@dataclass(frozen=True)
class ActorLossSpec:
    """Everything the actor's loss reads (algorithms.actor_loss); the same value for every backend."""

    policy: PolicyLossSpec = field(default_factory=PolicyLossSpec)
    aggregation: LossAggregation = "token-mean"
    kl_coef: float = 0.0  # KL in the loss; 0 when the KL goes to the reward
    kl_estimator: KLEstimator = "k3"
    entropy_coef: float = 0.0
    weighting: SampleWeighting = field(default_factory=SampleWeighting)
    normalization: LossNormalization = "mini-batch"
    # The KL-loss term and the entropy bonus reduced otherwise than the policy loss (None: by `aggregation`).
    kl_aggregation: LossAggregation | None = None
    entropy_aggregation: LossAggregation | None = None
    length_norm: float | None = None  # Algorithm.loss_length_norm
    length_norm_all_terms: bool = False  # Algorithm.loss_length_norm_all_terms


@dataclass(frozen=True)
class FilterSpec:
    """Which groups a step keeps (algorithms.keep_groups, select_groups)."""

    zero_variance: bool = False  # SkyRL zero_variance_filter: drop groups whose scores are all equal (± tol)
    zero_variance_tol: float = 0.0
    # ROLL query_filter_config mean_filter: keep a group when threshold_down < mean score < threshold_up.
    mean_range: tuple[float, float] | None = None
    std_min: float | None = None  # ROLL std_filter: keep a group when its (unbiased) score std > std_min
    # Dynamic sampling: "filter" (DAPO; SkyRL's `filter`): draw again until enough groups pass, at most
    # max_draws draws (None: without limit); "replace" (SkyRL/POLARIS): bad groups are replaced by copies of
    # good ones when more than min_replace_ratio of the groups are good, else draw again.
    dynamic: Literal["filter", "replace"] | None = None
    max_draws: int | None = 4
    min_replace_ratio: float = 0.3
    # When max_draws is reached without enough groups: "train" on what passed (rlcfg's behaviour so far),
    # "error" stops the run (SkyRL: RuntimeError "hitting dynamic sampling limit").
    on_exhausted: Literal["train", "error"] = "train"
    # Without dynamic sampling, what becomes of a group that fails the filters: "drop" leaves it out of the step
    # (the step trains on fewer groups), "mask" keeps it in the batch with its loss masked out (SkyRL
    # trainer.py: zero_variance_filter zeroes the group's loss_masks).
    failed: Literal["drop", "mask"] = "drop"


@dataclass(frozen=True)
class Algorithm:
    # "token_reward": each token's advantage is its reward as it is (the score on the last token, less any KL penalty
    # per token), with no baseline, discount or normalisation (SkyRL's on-policy distillation estimator, `no_op`).
    advantage: Literal["grpo", "gae", "rloo", "reinforce++", "maxrl", "token_reward"] = "grpo"
    group_size: int = 1  # responses per prompt
    normalize_advantage_std: bool = True  # GRPO: divide by the group's std
    batch_normalize_advantage: bool = False
    gamma: float = 1.0
    lam: float = 1.0
    policy_loss: PolicyLossKind = "regular"
    clip_low: float = 0.2
    clip_high: float = 0.2
    clip_ratio_c: float = 3.0  # dual-clip bound
    loss_aggregation: LossAggregation = "token-mean"
    loss_normalization: LossNormalization = "mini-batch"  # the actor's and the critic's losses
    # The policy loss's seq-mean-token-sum divided by this constant length (SkyRL's seq_mean_token_sum_norm, Dr.
    # GRPO's max_seq_len): each sequence's token sum over one length for all, so a long answer weighs no less.
    loss_length_norm: float | None = None
    # Whether the KL-loss term and the entropy bonus are divided by loss_length_norm too (RLinf's Megatron actor with
    # use_valid_token_scale in a disaggregated placement scales its whole loss by an estimated token count).
    loss_length_norm_all_terms: bool = False
    # Whether a sequence mean's denominators count the rows whose loss is masked out entirely (SkyRL: its filters
    # zero a row's loss mask and reduce_loss still averages over every row) or only the rows with a token in the loss.
    count_masked_rows: bool = False
    kl_loss_aggregation: LossAggregation | None = None  # None: as loss_aggregation
    entropy_aggregation: LossAggregation | None = None
    value_aggregation: LossAggregation | None = None  # the critic's loss
    # With a seed, each data-parallel rank's share of a step is reordered by torch.randperm(share, generator seeded
    # with it) before the split into mini-batches: the same order every step (RLinf shuffle_rollout,
    # get_iterator_k_split). None: the samples keep their order.
    shuffle_seed: int | None = None
    # Each data-parallel rank's share of a step dealt by length instead of in drawn order (ChatLearn's rollout
    # manager, RolloutManager.data_balance): the samples, longest (prompt + response) first, each to the rank whose
    # share holds the fewest tokens so far (the lower rank on a tie) until every share is full. A rank's mini-batches
    # then run from its longest samples to its shortest.
    balance_ranks_by_length: bool = False
    kl: KL = field(default_factory=KL)
    entropy_coef: float = 0.0
    value_clip: float | None = None
    ppo_epochs: int = 1  # passes over each step's samples
    # Where the PPO ratio's old log-probs come from. "trainer": the actor recomputes them before the update (an
    # on-policy update takes its own forward pass). "rollout": the rollout engine's log-probs of the sampled tokens,
    # at the sampling temperature, with no recompute pass (RLinf recompute_logprobs: false). "interpolated": no
    # recompute pass either; the proximal policy of the decoupled loss is interpolated in log space between the
    # engine's log-probs and the current policy's, by how stale the step's rollouts are (AReaL prox_logp_method
    # loglinear; algorithms.proximal_weight).
    old_logprobs: Literal["trainer", "rollout", "interpolated"] = "trainer"
    reward: RewardShaping = field(default_factory=RewardShaping)
    dynamic_sampling: bool = False  # DAPO: drop groups whose rewards are all equal
    mask_truncated: bool = False  # drop responses cut at the length limit from the loss
    advantage_options: AdvantageOptions = field(default_factory=AdvantageOptions)
    policy_options: PolicyOptions = field(default_factory=PolicyOptions)
    weighting: SampleWeighting = field(default_factory=SampleWeighting)
    filters: FilterSpec = field(default_factory=FilterSpec)

    def policy_loss_spec(self) -> PolicyLossSpec:
        return PolicyLossSpec(self.policy_loss, self.clip_low, self.clip_high, self.clip_ratio_c, self.policy_options)

    def needs_rollout_logprobs(self) -> bool:
        """Whether the update reads the rollout engine's log-probs of the sampled tokens."""
        o = self.policy_options
        return (o.tis_cap is not None or o.decoupled or o.sequence_mask is not None or o.m2_threshold is not None
                or self.policy_loss == "rollout_is" or self.kl.policy_logprobs == "rollout"
                or self.old_logprobs == "interpolated")

    def actor_loss_spec(self) -> ActorLossSpec:
        """The actor's loss settings, one value for every backend."""
        return ActorLossSpec(self.policy_loss_spec(), self.loss_aggregation,
                             self.kl.coef if self.kl.placement == "loss" else 0.0, self.kl.estimator,
                             self.entropy_coef, self.weighting, self.loss_normalization, self.kl_loss_aggregation,
                             self.entropy_aggregation, self.loss_length_norm, self.loss_length_norm_all_terms)

    def filter_spec(self) -> FilterSpec:
        """The group filters, with the legacy `dynamic_sampling` flag read as DAPO's filter-and-redraw."""
        if self.dynamic_sampling and self.filters.dynamic is None:
            return replace(self.filters, zero_variance=True, dynamic="filter")
        return self.filters


@dataclass(frozen=True)
class Sampling:
    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    n: int = 1
    stop: tuple[str, ...] = ()
    # Penalties and limits, with vLLM's meaning (vllm/sampling_params.py; SGLang and OpenAI agree):
    # repetition_penalty divides a positive logit (multiplies a negative one) of every token already in the prompt
    # or the output (1.0: none); presence_penalty subtracts p from the logit of every token already in the output;
    # frequency_penalty subtracts f × its count in the output; min_new_tokens forbids EOS and stop_token_ids
    # before that many tokens; stop_token_ids end a response like EOS.
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    min_new_tokens: int = 0
    stop_token_ids: tuple[int, ...] = ()
    # A limit on prompt + response, per prompt: a prompt of p tokens may get min(max_new_tokens, this − p) response
    # tokens, and a response cut there is truncated (finish reason "length"), as at max_new_tokens. ChatLearn 1.2.0
    # gives each prompt seq_length − its length (vllm_module.py generate_vllm). None: max_new_tokens alone.
    max_total_length: int | None = None

    def response_budget(self, prompt_tokens: int) -> int:
        return response_budget(self.max_new_tokens, self.max_total_length, prompt_tokens)


def response_budget(max_new_tokens: int, max_total_length: int | None, prompt_tokens: int) -> int:
    """The most response tokens a prompt of `prompt_tokens` tokens may get (Sampling.max_total_length)."""
    if max_total_length is None:
        return max_new_tokens
    return max(min(max_new_tokens, max_total_length - prompt_tokens), 0)


@dataclass(frozen=True)
class Episodes:
    """Multi-turn rollouts: each response is an episode in which the model acts, an environment answers, and the
    answer is appended to the model's next input, until the environment says done or a limit is reached (SkyRL's
    SkyRLGymGenerator.agent_loop with a SkyRL-Gym environment). The environment's reward is the response's score;
    the environment's tokens carry no loss."""

    environment: str  # rlcfg.runtime.episodes.ENVIRONMENTS names them
    max_turns: int
    # An episode ends before a turn whose input (prompt and everything since) is longer than this many tokens.
    max_input_length: int
    # "chat": every observation is a new user turn of the chat template, followed by the generation prompt;
    # "inline": the observations' own tokens follow the model's inside one assistant message, which ends with EOS.
    observations: Literal["chat", "inline"] = "chat"
    # With "chat" and stop strings: a turn that ended on a stop string gets the EOS token after it (no loss).
    eos_after_stop: bool = True
    # The observation after the last turn stays at the end of the response, with no loss (skyrl-train 0.3.0); else
    # the response ends with the model's last token.
    final_observation: bool = False
    # The environment's settings, as (name, value) pairs: text2sql's `db_path`.
    settings: tuple[tuple[str, Any], ...] = ()

    def setting(self, name: str, default: Any = None) -> Any:
        return dict(self.settings).get(name, default)

    def longest_sequence(self, max_new_tokens: int) -> int:
        """The most tokens an episode's sequence holds: its last turn starts from an input of at most
        max_input_length tokens and adds up to max_new_tokens (and, inline, the closing EOS)."""
        return self.max_input_length + max_new_tokens + 1


@dataclass(frozen=True)
class Data:
    train_files: tuple[str, ...] = ()
    eval_files: tuple[str, ...] = ()
    prompt_key: str = "prompt"
    answer_key: str | None = None
    # Text appended to each prompt before the chat template (AReaL's GSM8K loader asks for a boxed answer).
    prompt_suffix: str = ""
    max_prompt_length: int | None = None
    shuffle: bool = True
    seed: int = 42
    apply_chat_template: bool = True
    # Keyword arguments the chat template is rendered with, as (name, value) pairs: Qwen3's enable_thinking,
    # gpt-oss's reasoning_effort (SkyRL generator.chat_template_kwargs).
    chat_template_kwargs: tuple[tuple[str, Any], ...] = ()
    # Supervised experiments (Experiment.kind "sft", "reward_model"): sequences (prompt and answer together, or
    # each side of a preference pair) longer than this many tokens are left out, as AReaL's dataset loaders do.
    max_length: int | None = None
    # The columns of a preference pair (kind "reward_model"): the preferred and the dispreferred text.
    chosen_key: str = "chosen"
    rejected_key: str = "rejected"
    # A prompt longer than max_prompt_length is left out ("drop"), or cut to its first max_prompt_length tokens
    # ("truncate": RLinf's dataset without filter_prompt_by_length).
    long_prompts: Literal["drop", "truncate"] = "drop"
    # What max_prompt_length measures: the prompt as the model sees it, chat template and all ("rendered"); the
    # prompt's own text with its suffix, before the template, tokenized with the tokenizer's special tokens
    # ("message": AReaL's RL loaders, which filter on tokenizer.encode(content)); or the prompt as the data holds it,
    # before prompt_removals too ("source": AReaL's boba loader). A limit before the template leaves the rendered
    # prompt unbounded, so the rollout engines' context is not derived from it.
    prompt_length_of: Literal["rendered", "message", "source"] = "rendered"
    # The limit on evaluation prompts, measured the same way, where it is not max_prompt_length ("same"): AReaL
    # filters its validation set by valid_dataset.max_length (None: no limit).
    eval_max_prompt_length: int | None | Literal["same"] = "same"
    # Texts deleted from each prompt before its suffix and chat template (AReaL's boba script strips DeepSeek's role
    # markers and `<think>` from prompts written for DeepSeek-R1).
    prompt_removals: tuple[str, ...] = ()
    # The answer column holds a list of reference answers; a response's reward is the best it scores against any
    # of them (AReaL's boba reward: 1 when one solution matches).
    answer_list: bool = False
    # The columns a reward checks a response against, where it needs more than one: the answer is then the record
    # of them, as JSON text (AReaL's countdown reward reads `target` and `numbers`). answer_key names the one a
    # generated task's plain answer stands in for.
    answer_fields: tuple[str, ...] = ()

    @property
    def eval_prompt_limit(self) -> int | None:
        """The longest evaluation prompt kept (eval_max_prompt_length, "same" resolved)."""
        return self.max_prompt_length if self.eval_max_prompt_length == "same" else self.eval_max_prompt_length


@dataclass(frozen=True)
class PartialRollout:
    """Responses generated over several steps' rollouts, in rounds (ChatLearn's partial rollout,
    PartialRolloutManager). Each step generates its new prompts' responses and continues the unfinished ones, each
    under the step's weights, for at most its round's share of max_new_tokens (int(max_new_tokens × share)). A response
    is finished when a round ends it short of that round's limit, or after the last round. A prompt's finished
    responses are trained in the step where more than `min_finished` of them have finished, and every later one in the
    step it finishes; each is normalised, as GRPO, against the rewards of its prompt's responses trained so far, which
    are kept until `rewards_kept_until` have gathered (ChatLearn's AdvantageComputer). Unfinished responses carry over
    to the next step, and into checkpoints."""

    round_shares: tuple[float, ...]
    min_finished: int
    rewards_kept_until: int

    def round_limits(self, max_new_tokens: int) -> tuple[int, ...]:
        return tuple(int(max_new_tokens * share) for share in self.round_shares)


@dataclass(frozen=True)
class Schedule:
    """The batch algebra of one training step, in samples (a sample is one response)."""

    prompts_per_step: int
    samples_per_step: int  # prompts × group size
    samples_per_optimizer_step: int  # the global mini-batch
    # The critic's global mini-batch, when it is not the whole step (SkyRL critic_mini_batch_size × n_samples).
    critic_samples_per_optimizer_step: int | None = None
    total_steps: int | None = None
    epochs: int | None = None  # passes over the dataset, when the dialect counts that way
    eval_interval: int | None = None  # steps; None disables
    eval_before_train: bool = False
    # Also evaluate at the end of every this many epochs, and once this many seconds have passed since the last
    # time-triggered evaluation (AReaL evaluator.freq_epochs / freq_secs; each trigger counts on its own).
    eval_epoch_interval: int | None = None
    eval_time_interval_s: float | None = None
    # Asynchronous RL: the rollouts of a step may be generated up to this many weight updates before the update
    # that trains on them, while earlier steps train (AReaL rollout.max_head_offpolicyness); 0 generates every
    # step's rollouts with the weights of the update that trains on them.
    max_staleness: int = 0
    # Prompts being generated at once while rollouts run ahead (AReaL max_concurrent_rollouts); None: one step's.
    rollout_concurrency: int | None = None
    # False: rollouts run ahead within an epoch only, and each epoch's first step generates under the weights that
    # train on it (SkyRL's one-step off-policy trainer starts a new generator every epoch).
    ahead_across_epochs: bool = True
    # None: every step's responses are generated whole, in the step that trains on them.
    partial_rollout: PartialRollout | None = None

    def steps_generating_at_once(self) -> int:
        """Whole steps' rollouts that may generate at once when they run ahead: at least one (a framework that
        starts each prompt as a slot frees then generates a step in waves)."""
        return max(1, (self.rollout_concurrency or self.prompts_per_step) // max(self.prompts_per_step, 1))


@dataclass(frozen=True)
class Checkpointing:
    directory: str | None = None
    interval: int | None = None  # steps; None: only at the end
    # Also save at the end of every this many epochs, and once this many seconds have passed since the last
    # time-triggered save (AReaL saver.freq_epochs / freq_secs; each trigger counts on its own).
    epoch_interval: int | None = None
    time_interval_s: float | None = None
    keep_last: int | None = None  # None keeps all
    resume: str = "latest"  # "latest", "none", or a checkpoint path
    save_hf: bool = False


@dataclass(frozen=True)
class Logging:
    directory: str | None = None
    project: str | None = None
    run_name: str | None = None
    backends: tuple[str, ...] = ("jsonl",)  # jsonl, console, tensorboard, wandb


@dataclass(frozen=True)
class Cluster:
    """What the config itself says about the machines; None where it is silent (plan flags fill it)."""

    nodes: int | None = None
    gpus_per_node: int | None = None


@dataclass(frozen=True)
class Experiment:
    name: str
    dialect: str
    variant: str | None
    cluster: Cluster
    roles: tuple[Role, ...]
    colocation: tuple[tuple[str, ...], ...]  # groups of role names that share the same GPUs
    algorithm: Algorithm
    sampling: Sampling
    eval_sampling: Sampling | None
    data: Data
    schedule: Schedule
    checkpointing: Checkpointing = field(default_factory=Checkpointing)
    logging: Logging = field(default_factory=Logging)
    seed: int = 42
    # How responses are scored when no reward model is configured: "math" (the final answer checked with
    # math-verify), "exact_match" (the answer string), "gsm8k_strict" (a `#### <number>` answer, SkyRL-Gym's gsm8k)
    # or a built-in task's verifier such as "arithmetic"; rlcfg.runtime.rewards lists them all.
    reward_function: str = "math"
    # The reward function's own settings, as (name, value) pairs: the LLM judge's `model` and `base_url`.
    reward_settings: tuple[tuple[str, Any], ...] = ()
    # What the experiment trains. "rl": the GRPO/PPO loop. "sft" (supervised fine-tuning on the train data) and
    # "reward_model" (a scalar-head model trained on preference pairs) have no rollout, group size 1 and one
    # optimizer step per batch; a runtime that only runs the RL loop must refuse them rather than run RL.
    kind: Literal["rl", "sft", "reward_model"] = "rl"
    # Components the config gives GPUs that run no role of their own, as (the config's name, why): RLinf's
    # `inference` group when the actor does its work. The plan names each one, so none leaves the GPU map unsaid.
    idle_components: tuple[tuple[str, str], ...] = ()
    # Multi-turn rollouts with an environment (None: one response per prompt, scored by reward_function).
    episodes: Episodes | None = None

    def role(self, name: str) -> Role | None:
        return next((r for r in self.roles if r.name == name), None)


def to_json(value: Any) -> Any:
    """A plain JSON-able value for any IR object (tuples become lists)."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    return value


__all__ = [name for name in dir() if not name.startswith("_") and name not in ("annotations", "asdict", "replace")]
