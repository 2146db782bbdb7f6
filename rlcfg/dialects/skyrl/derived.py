"""What skyrl-train computes from a config (world and data-parallel sizes, whether the reference model and the
critic run, the rollout's GPUs, the defaults list it composes) and the names rlcfg runs with SkyRL's meaning: read
by the rules, the lowering and the dialect alike, declared here once. Each function is a plain computation on the
validated models; nothing here reports or lowers anything.
"""

from __future__ import annotations

from typing import Any

from rlcfg.diagnostics import plural
from rlcfg.dialects.skyrl.models import UNTIL_030

ADVANTAGE_ESTIMATORS = ("grpo", "gae", "rloo", "reinforce++")
# The `skyrl` package added maxrl in 0.2.0 (AdvantageEstimatorRegistry).
ADVANTAGE_ESTIMATORS_BY_RELEASE = {"skyrl-0.2.0": (*ADVANTAGE_ESTIMATORS, "maxrl"),
                                   "skyrl-0.3.0": (*ADVANTAGE_ESTIMATORS, "maxrl"),
                                   "skyrl-0.4.0": (*ADVANTAGE_ESTIMATORS, "maxrl")}
# The estimators `rlcfg run` runs with SkyRL's meaning (each release's validate rule says which it has).
ADVANTAGE_ESTIMATORS_RUN = (*ADVANTAGE_ESTIMATORS, "maxrl")
# Before v0.1.0 validate_cfg accepted these two and had no registry for others.
ADVANTAGE_ESTIMATORS_PRE = ("gae", "grpo")

# The built-in policy losses of skyrl-train's newest release.
POLICY_LOSSES = ("regular", "dual_clip", "gspo", "cispo", "clip_cov", "kl_cov", "sapo", "cross_entropy",
                 "importance_sampling")
# The policy losses each release registers itself (PolicyLossRegistry before any user code runs).
POLICY_LOSSES_BY_RELEASE = {
    "0.1.0": ("regular", "dual_clip", "gspo"),
    "0.2.0": ("regular", "dual_clip", "gspo", "clip_cov", "kl_cov"),
    "0.3.0": ("regular", "dual_clip", "gspo", "cispo", "clip_cov", "kl_cov"),
    # the `skyrl` package: rollout_is from 0.2.0, dppo from 0.3.0 (rlcfg does not run dppo)
    "skyrl-0.2.0": (*POLICY_LOSSES, "rollout_is"),
    "skyrl-0.3.0": (*POLICY_LOSSES, "rollout_is", "dppo"),
    "skyrl-0.4.0": (*POLICY_LOSSES, "rollout_is", "dppo"),
}

def dataset_files(value: list[str] | str) -> tuple[str, ...]:
    """`data.train_data` or `data.val_data` as the files PromptDataset reads: one path alone is a list of one."""
    return (value,) if isinstance(value, str) else tuple(value)


# skyrl-train releases whose PromptDataset iterates a string given as the files, one character at a time
DATASET_STRING_ITERATED = ("pre-0.1.0", "0.1.0")


def policy_loss(cfg: Any) -> tuple[str, str]:
    """The policy loss that runs and the key that chose it: before v0.1.0 `ppo_loss_type` (null in the later
    releases, which do not have it), else `policy_loss_type`."""
    a = cfg.trainer.algorithm
    if a.ppo_loss_type is not None:
        return a.ppo_loss_type, "trainer.algorithm.ppo_loss_type"
    return a.policy_loss_type, "trainer.algorithm.policy_loss_type"


# The losses whose ratio use_tis truncates up to v0.3.0 (inside ppo_policy_loss).
TIS_LOSSES_UNTIL_030 = ("regular", "dual_clip")


# The built-in policy losses rlcfg runs with SkyRL's meaning. cross_entropy and importance_sampling sum their
# token losses whatever loss_reduction says (Tinker's semantics), which rlcfg runs only where that sum is reduced as
# every other loss is: from skyrl 0.2.0 the trainer scales the advantages so that each loss's token sum is
# loss_reduction's reduction (MINI_BATCH_REDUCTION), and importance_sampling's −r·A then runs as rlcfg's.
POLICY_LOSSES_RUN = ("regular", "dual_clip", "gspo", "cispo", "clip_cov", "kl_cov", "sapo", "rollout_is",
                     "importance_sampling")


# The built-in losses whose ratio reads the old log-probs, which the fully-asynchronous trainer refuses from skyrl
# 0.3.0 (ppo_utils.LOSSES_WITH_OLD_LOGPROBS): the stale policy that sampled a response is gone.
LOSSES_WITH_OLD_LOGPROBS = ("regular", "dual_clip", "gspo", "cispo", "clip_cov", "kl_cov", "sapo", "cross_entropy",
                            "importance_sampling")


# The losses that call apply_off_policy_correction (truncated importance sampling), from v0.4.0; up to v0.3.0
# use_tis applies inside ppo_policy_loss only (regular, dual_clip).
OFF_POLICY_CORRECTED = ("regular", "dual_clip", "gspo", "cispo", "sapo", "rollout_is")


# loss_reduction → rlcfg's aggregation; seq_mean_token_sum_norm is the token sum per sequence divided by max_seq_len
# (Algorithm.loss_length_norm).
LOSS_AGGREGATIONS = {"token_mean": "token-mean", "sequence_mean": "seq-mean-token-mean",
                     "token_mean_legacy": "token-mean", "seq_mean_token_sum_norm": "seq-mean-token-sum"}
# The reductions each release's validate_cfg accepts (skyrl-train's three elsewhere).
LOSS_REDUCTIONS = ("token_mean", "sequence_mean", "seq_mean_token_sum_norm")
LOSS_REDUCTIONS_BY_RELEASE = {"skyrl-0.2.0": (*LOSS_REDUCTIONS, "token_mean_legacy"),
                              "skyrl-0.3.0": (*LOSS_REDUCTIONS, "token_mean_legacy", "prompt_mean"),
                              "skyrl-0.4.0": (*LOSS_REDUCTIONS, "token_mean_legacy", "prompt_mean")}
# From skyrl 0.2.0 the trainer scales the advantages so that the policy loss is reduced over the whole mini-batch
# (apply_loss_reduction_to_advantages_minibatch); token_mean_legacy keeps the per-micro-batch mean of before.
MINI_BATCH_REDUCTION = tuple(LOSS_REDUCTIONS_BY_RELEASE)  # the releases that keep the old mean as token_mean_legacy


def loggers(cfg: Any) -> tuple[str, ...]:
    """The trackers `trainer.logger` names: one, or a list of them (Tracking takes either)."""
    value = cfg.trainer.logger
    return (value,) if isinstance(value, str) else tuple(value)


def loss_normalization(loss_reduction: str, release: str | None) -> str:
    """rlcfg's Algorithm.loss_normalization for the policy loss of `release`."""
    return "mini-batch" if release in MINI_BATCH_REDUCTION and loss_reduction != "token_mean_legacy" \
        else "micro-batch"


# transformers' scheduler names (get_scheduler) that rlcfg's schedules reproduce: linear and cosine decay to 0
# after the warm-up; constant_with_warmup is constant after it; constant ignores num_warmup_steps.
SCHEDULERS = {"constant": "constant", "constant_with_warmup": "constant", "linear": "linear", "cosine": "cosine"}


# engine_init_kwargs rlcfg hands to the engine, in rlcfg's names (the others are refused).
SGLANG_KWARGS = {"context_length": "max_model_len", "disable_cuda_graph": "enforce_eager",
                 "attention_backend": "attention_backend", "load_format": "load_format",
                 "cuda_graph_bs": "cuda_graph_bs", "mem_fraction_static": "mem_fraction_static",
                 "max_running_requests": "max_num_seqs", "random_seed": "seed"}


VLLM_KWARGS = {k: k for k in ("gpu_memory_utilization", "max_num_seqs", "max_model_len", "max_num_batched_tokens",
                              "enforce_eager", "enable_prefix_caching", "enable_chunked_prefill", "block_size", "seed",
                              "load_format", "attention_backend")}


# The SkyRL-Gym environments whose meaning rlcfg's reward reproduces: gsm8k's `#### <number>` answer equal to the
# ground truth (rlcfg's `gsm8k_strict` reward), aime's `Answer: ...` line scored ±1 (`answer_line`), and the
# multiply example's first \boxed{} answer, 1 when right and 0.5 when wrong (`boxed_multiply`), in one turn.
# gsm8k_multi_turn is given generator.max_turns as its own turn limit by every release's generator, so at the
# default 1 it is done after one answer: gsm8k's score with 0.2 for a wrong `#### <number>` (`gsm8k_format_credit`);
# more turns are refused with max_turns itself.
# lcb runs the response's last fenced program against the task's tests, in a sandbox (`lcb`); the LLM-as-a-judge
# example's environment asks its judge model (`llm_judge`, with the environment's model and base_url).
ENVIRONMENT_REWARDS = {"gsm8k": "gsm8k_strict", "gsm8k_multi_turn": "gsm8k_format_credit", "aime": "answer_line",
                       "multiply": "boxed_multiply", "lcb": "lcb", "text2sql": "text2sql", "search": "search",
                       "llm_as_a_judge": "llm_judge"}
# Where each environment reads the ground truth in a dataset row (its `extras`): gsm8k in reward_spec, aime in the
# reward_model column of DAPO's datasets.
ENVIRONMENT_ANSWER_KEYS = {"gsm8k": "reward_spec.ground_truth", "aime": "reward_model.ground_truth"}

# The SkyRL-Gym environments rlcfg steps through whole episodes (rlcfg.runtime.episodes), with the columns of a row
# each reads and the settings of its own it reads (environment.skyrl_gym.<name>.<key>). Their episodes score
# themselves, so each is also the run's reward.
EPISODE_ENVIRONMENTS = {"text2sql": (("db_id", "data", "reward_spec"), ("db_path",)),
                        "search": (("reward_spec",), ("search_url", "topk", "timeout"))}
# The releases whose generator loop rlcfg's episodes follow (SkyRLGymGenerator.agent_loop of skyrl-train 0.3.0 and
# later, its last commit and the skyrl package): before 0.3.0 it checked the input length after a turn and cut the
# response to a budget.
EPISODE_RELEASES = ("0.3.0", "0.4.0", "main", "skyrl-0.1.0", "skyrl-0.2.0", "skyrl-0.3.0", "skyrl-0.4.0")
# skyrl-train 0.3.0's loop keeps the observation after the last turn in the response (no loss), and tracks no
# log-probs of the engine for episodes (rollout_logprobs stays None).
FINAL_OBSERVATION_KEPT = ("0.3.0",)
# The releases whose environment stops the run on a turn that goes on after one of its stop tags (text2sql up to
# skyrl 0.2.0, search up to skyrl 0.1.0), and those tags: only stop strings holding them all rule that out.
EPISODE_STOP_CHECKS = {"text2sql": (("0.3.0", "0.4.0", "main", "skyrl-0.1.0", "skyrl-0.2.0"),
                                    ("</sql>", "</solution>")),
                       "search": (("0.3.0", "0.4.0", "main", "skyrl-0.1.0"), ("</search>", "</answer>"))}
# The estimators whose advantage depends on the episode's score alone, not on where in its tokens each turn's
# reward lands (which rlcfg's runtime does not keep).
EPISODE_ESTIMATORS = ("grpo", "rloo", "maxrl")


def lora_module_keys(key: str, release: str | None) -> tuple[str, str]:
    """The keys of the modules LoRA targets and leaves alone: one pair for every model up to v0.3.0
    (trainer.target_modules), each model's own from v0.4.0."""
    if release in UNTIL_030:
        return "trainer.target_modules", "trainer.exclude_modules"
    return f"trainer.{key}.model.lora.target_modules", f"trainer.{key}.model.lora.exclude_modules"


def lora_modules(cfg: Any, key: str, release: str | None) -> tuple[Any, Any]:
    """The values of lora_module_keys: the modules the `key` model's LoRA targets and those it leaves alone."""
    source = cfg.trainer if release in UNTIL_030 else getattr(cfg.trainer, key).model.lora
    return source.target_modules, source.exclude_modules


def ref_in_use(cfg: Any) -> bool:
    algorithm = cfg.trainer.algorithm
    return bool(algorithm.use_kl_loss or algorithm.use_kl_in_reward)


def critic_in_use(cfg: Any) -> bool:
    return cfg.trainer.critic.model.path is not None


def world(cfg: Any, role: str) -> int:
    placement = cfg.trainer.placement
    return getattr(placement, f"{role}_num_nodes") * getattr(placement, f"{role}_num_gpus_per_node")


def model_parallel(cfg: Any, role: str) -> tuple[int, str]:
    """The product that divides a role's GPUs into data-parallel ranks, and how to say it."""
    trainer = cfg.trainer
    model = getattr(trainer, role)
    if trainer.strategy == "megatron" and role in ("policy", "ref"):
        m = model.megatron_config
        size = m.tensor_model_parallel_size * m.pipeline_model_parallel_size * m.context_parallel_size
        return size, (f"TP {m.tensor_model_parallel_size} × PP {m.pipeline_model_parallel_size} × "
                      f"CP {m.context_parallel_size}")
    return model.sequence_parallel_size, f"sequence_parallel_size {model.sequence_parallel_size}"


def dp_size(cfg: Any, role: str) -> int:
    size, _ = model_parallel(cfg, role)
    return world(cfg, role) // max(size, 1)


def rollout_gpus(cfg: Any) -> int:
    g = cfg.generator
    return (g.num_inference_engines * g.inference_engine_tensor_parallel_size *
            g.inference_engine_pipeline_parallel_size * g.inference_engine_data_parallel_size)


# Group selections of ppo_base_config's own defaults list: rlcfg's defaults already hold what they select.
_BUILT_IN_GROUPS = ("deepspeed_config", "megatron_config", "skyrl_gym_config")


def compose_defaults_list(tree: Any) -> tuple[Any, list]:
    """A SkyRL config may start from `defaults: [ppo_base_config, _self_]`; rlcfg's defaults are that base config,
    so such entries are dropped. Other entries name files rlcfg does not compose and are reported."""
    from rlcfg.diagnostics import diagnostic
    from rlcfg.source.tree import drop_subtree

    entries = tree.data.get("defaults")
    if entries is None:
        return tree, []
    found = []
    if not isinstance(entries, list):
        found.append(diagnostic("RLC112", "defaults", "`defaults` must be a list of config names",
                                origin=tree.origin(("defaults",)), hint="write `defaults: [ppo_base_config, _self_]`"))
    else:
        for index, entry in enumerate(entries):
            name = next(iter(entry)) if isinstance(entry, dict) and len(entry) == 1 else entry
            text = str(name)
            base = text.split("@", 1)[0].lstrip("/")
            if text in ("_self_", "ppo_base_config", "/ppo_base_config") or base in _BUILT_IN_GROUPS:
                continue
            found.append(diagnostic(
                "RLC112", f"defaults[{index}]", f"defaults list entry {entry!r} names a config rlcfg does not compose",
                origin=tree.origin(("defaults", index)),
                hint="rlcfg starts every SkyRL config from ppo_base_config; write the other file's keys into this one"))
    del tree.data["defaults"]
    drop_subtree(tree.values, ("defaults",))
    drop_subtree(tree.keys, ("defaults",))
    return tree, found


_STRATEGY = {"fsdp": "FSDP", "fsdp2": "FSDP2", "deepspeed": "DeepSpeed ZeRO-3", "megatron": "Megatron"}


_BACKEND = {"vllm": "vLLM", "sglang": "SGLang"}


def describe(cfg: Any) -> str:
    t = cfg.trainer
    g = cfg.generator
    training = _STRATEGY[t.strategy]
    if t.strategy == "megatron":
        m = t.policy.megatron_config
        experts = f", EP {m.expert_model_parallel_size}" if m.expert_model_parallel_size > 1 else ""
        training += f" (TP {m.tensor_model_parallel_size}, PP {m.pipeline_model_parallel_size}{experts})"
    engines = f"{g.num_inference_engines} engine{'s' if g.num_inference_engines != 1 else ''}"
    if g.run_engines_locally:
        rollout = f"{_BACKEND[g.backend]} rollout ({engines} × TP {g.inference_engine_tensor_parallel_size})"
    else:
        rollout = f"remote {_BACKEND[g.backend]} rollout ({engines})"
    policy = world(cfg, "policy")
    if t.placement.colocate_all:
        gpus = f"{plural(policy, 'GPU')} colocated"
    else:
        total = policy + (rollout_gpus(cfg) if g.run_engines_locally else 0)
        if ref_in_use(cfg) and not t.placement.colocate_policy_ref:
            total += world(cfg, "ref")
        if critic_in_use(cfg):
            total += world(cfg, "critic")
        gpus = plural(total, "GPU")
    return f"{training} training, {rollout}, {gpus}"


def critic_trained(cfg: Any) -> bool:
    """Whether `rlcfg run` trains the critic: only for GAE, the one estimator that reads its values."""
    return critic_in_use(cfg) and cfg.trainer.algorithm.advantage_estimator == "gae"


def overlong_buffer(cfg: Any) -> tuple[int, float] | None:
    """The DAPO entrypoint's overlong buffer and penalty factor (the skyrl package's keys, or skyrl-train's
    `overlong_buffer` section), or None without the entrypoint."""
    a = cfg.trainer.algorithm
    if a.overlong_buffer is not None:
        return a.overlong_buffer.len, a.overlong_buffer.penalty_factor
    if a.overlong_buffer_len is not None:
        return a.overlong_buffer_len, a.overlong_buffer_penalty_factor
    return None


# The keys of megatron_config.transformer_config_kwargs that rlcfg honors (SkyRL sets every key of it on
# megatron-core's TransformerConfig): recomputation (memory only; the policy's base config writes these), sequence
# parallelism, uneven first and last pipeline stages, and, for a DeepSeek-V3 model, its routing correction
# (ir.Role.expert_bias).
HONORED_TRANSFORMER_KWARGS = ("recompute_granularity", "recompute_modules", "recompute_method",
                              "recompute_num_layers", "sequence_parallel", "num_layers_in_first_pipeline_stage",
                              "num_layers_in_last_pipeline_stage")
ROUTING_CORRECTION_KWARGS = ("moe_router_enable_expert_bias", "moe_router_bias_update_rate")
# The releases whose Megatron setup for DeepSeek-V3 rlcfg has read: skyrl-train 0.4.0 and later, and the `skyrl`
# package, build it through Megatron-Bridge and set the load-balancing type to `none`. skyrl-train 0.2.0 built it
# through mbridge, and 0.3.0 left Megatron-Bridge's sequence auxiliary loss on.
ROUTING_UNREAD = ("pre-0.1.0", "0.1.0", "0.2.0", "0.3.0")


def routing_correction_read(release: str | None) -> bool:
    return release not in ROUTING_UNREAD


def transformer_kwargs(options: Any) -> dict[str, Any]:
    """The policy's or reference's megatron_config.transformer_config_kwargs, the keys added to the base config's
    with them; SkyRL sets each on megatron-core's TransformerConfig."""
    kwargs = options.megatron_config.transformer_config_kwargs
    return dict(kwargs) if isinstance(kwargs, dict) else kwargs.model_dump()
