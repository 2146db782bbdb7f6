"""What RLinf derives from a config, and the names rlcfg runs with RLinf's meaning: read by the rules, the lowering
and the dialect alike, declared here once.

Nothing here reports or lowers anything: each function is a plain computation on the validated models."""

from __future__ import annotations

from typing import Any

from rlcfg.dialects.rlinf import placement as lang
from rlcfg.dialects.rlinf.models import RLinfConfig

# `runner.task_type`s of the reasoning runner (math is its 2025-08 name), and those of them that train.
REASONING = ("math", "reasoning", "reasoning_eval", "coding_online_rl")
TRAINING = ("math", "reasoning", "coding_online_rl")
GROUP_ADVANTAGES = ("grpo", "grpo_dynamic", "reinpp_baseline")

# What rlcfg runs with RLinf's meaning, each RLinf name with rlcfg's; rlinf/run-refusals refuses every other value.
# RLinf 2025-08 reads no loss_type (its math actor always runs the PPO clip loss); later releases look it up in their
# registry, where `actor` is that loss (2025-10 and later have no `ppo` entry and no GSPO loss at all).
LOSSES = ("actor", "ppo")
ADVANTAGES = {"grpo": "grpo"}
SCHEDULES = {"constant": "constant", "linear": "linear", "cosine": "cosine"}
# rlcfg's runtime verifiers that have an RLinf reward type of the same meaning (RLinf's registry: math, vqa,
# code_offline, searchr1, rstar2; only math has an rlcfg counterpart).
REWARD_FUNCTIONS = {"math": "math"}

# The releases whose importance_sampling_fix floors the weight (torch.clamp min=importance_sampling_clip) and takes
# the PPO ratio against the rollout's log-probs (the actors' prev_logprobs); v0.3 and main cap it (max=) and take the
# ratio against the recomputed ones.
FLOORED_IMPORTANCE_WEIGHT = frozenset({"2025-10", "v0.1", "v0.2"})

# RLinf's config.py fixes Megatron's train_iters at this (its "TODO fix this"), so a schedule without
# lr_decay_iters decays over it, whatever the run's length.
MEGATRON_TRAIN_ITERS = 100000


def training(cfg: RLinfConfig) -> bool:
    return cfg.runner.task_type in TRAINING and not cfg.runner.only_eval


def placement(cfg: RLinfConfig) -> lang.Analysis:
    """`cluster.component_placement` read with RLinf's placement language, against the cluster's size."""
    written = cfg.cluster.component_placement if isinstance(cfg.cluster.component_placement, dict) else {}
    return lang.analyze(written, cfg.cluster.num_nodes, cfg.cluster.num_gpus_per_node, cfg.cluster.node_groups)


def same_gpus(a: lang.Component | None, b: lang.Component | None) -> bool | None:
    """Whether two components sit on the same GPUs (None when that cannot be told, or one is not placed)."""
    if a is None or b is None:
        return None
    if a.takes_all and b.takes_all:
        return True
    if a.gpus is None or b.gpus is None:
        return None
    return a.gpus == b.gpus


def placement_mode(cfg: RLinfConfig, analysis: lang.Analysis | None = None) -> str | None:
    """`collocated` (actor and rollout share GPUs), `disaggregated`, or None when it cannot be told."""
    components = (analysis or placement(cfg)).components
    same = same_gpus(components.get("actor"), components.get("rollout"))
    if same is None:
        return None
    return "collocated" if same else "disaggregated"


def megatron_warmup(sched: Any) -> tuple[float, int]:
    """The warm-up and the decay end, in optimizer steps, that Megatron-LM's `get_optimizer_param_scheduler` makes of
    `actor.lr_sched` (RLinf hands it the keys as they are, without Megatron's own argument checks): a fraction that is
    not null wins over `lr_warmup_iters`, and its share of the decay end is not rounded."""
    decay_end = sched.lr_decay_iters or MEGATRON_TRAIN_ITERS
    if sched.lr_warmup_fraction is not None:
        return sched.lr_warmup_fraction * decay_end, decay_end
    return sched.lr_warmup_iters, decay_end


def unrun_pipeline(cfg: RLinfConfig) -> tuple[str, str] | None:
    """The RLinf pipelines rlcfg validates but `rlcfg run` does not run, with why (Dialect.unrun_pipeline)."""
    task = cfg.runner.task_type
    if task in ("embodied", "embodied_eval"):
        return ("RLinf embodied pipeline", "rlcfg's runtime has no simulator environments or VLA policies; run it "
                                           "with RLinf's examples/embodiment scripts")
    if task == "reasoning_eval" or cfg.runner.only_eval:
        return ("RLinf evaluation pipeline", "it only evaluates (`runner.task_type: reasoning_eval` or "
                                             "`runner.only_eval: true`), and rlcfg runs training pipelines only")
    if task == "coding_online_rl" or getattr(cfg, "agentloop", None) is not None:
        return ("RLinf agent pipeline", "rlcfg's runtime has no agent loop or tool workers (agent loops, tools, "
                                        "online coding RL); run it with RLinf's examples/agent scripts")
    return None


def describe(cfg: RLinfConfig) -> str:
    """The summary line's phrase for a valid config (Dialect.describe)."""
    model = cfg.actor.model
    if cfg.runner.task_type in ("embodied", "embodied_eval"):
        family = getattr(model, "model_type", None) or getattr(model, "model_name", None) or "a policy"
        backend = "Megatron" if cfg.actor.training_backend == "megatron" else "FSDP"
        what = "embodied evaluation" if cfg.runner.task_type == "embodied_eval" else "embodied RL"
        return f"{what} of {family} ({backend} training), {cfg.cluster.num_nodes} node" + \
            ("s" if cfg.cluster.num_nodes != 1 else "")
    if cfg.actor.training_backend == "megatron":
        backend = f"Megatron training (TP {model.tensor_model_parallel_size} × PP {model.pipeline_model_parallel_size}"
        backend += f" × CP {model.context_parallel_size}" if model.context_parallel_size > 1 else ""
        backend += f", EP {model.expert_model_parallel_size})" if model.expert_model_parallel_size > 1 else ")"
    else:
        backend = "FSDP training"
    engine = {"sglang": "SGLang", "vllm": "vLLM"}[cfg.rollout.rollout_backend]
    rollout = f"{engine} rollout" + (f" (TP {cfg.rollout.tensor_parallel_size})"
                                     if cfg.rollout.tensor_parallel_size > 1 else "")
    nodes = cfg.cluster.num_nodes
    if cfg.cluster.num_gpus_per_node is not None:
        total = nodes * cfg.cluster.num_gpus_per_node
        where = f"{total} GPU{'s' if total != 1 else ''}" + (f" on {nodes} nodes" if nodes > 1 else "")
    else:
        where = f"{nodes} node{'s' if nodes != 1 else ''}"
    mode = placement_mode(cfg) if cfg.runner.task_type in REASONING else None
    return f"{backend}, {rollout}, {where}" + (f" {mode}" if mode else "")
