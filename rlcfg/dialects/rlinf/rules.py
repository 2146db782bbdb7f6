"""RLinf's cross-field rules (RL-* of research/validation-rules.md), checked before anything is launched.

Each rule applies to the release the document is judged by (`ctx.release`, see the package's docstring): rules
that RLinf only added after 2025-08 are errors for the later releases and warnings for 2025-08 (DESIGN rule 5: a
config written as the seed documents it must validate). Rules read the models and what derived.py computes from
them; the dialect's __init__ imports this module, never the other way round.
"""

from __future__ import annotations

from typing import Iterator

from rlcfg import run_limits
from rlcfg.diagnostics import Severity, close_matches
from rlcfg.dialects.rlinf import placement as lang
from rlcfg.dialects.rlinf.derived import (ADVANTAGES, GROUP_ADVANTAGES, LOSSES, REASONING, REWARD_FUNCTIONS,
                                          SCHEDULES, TRAINING, megatron_warmup, placement, placement_mode, training)
from rlcfg.dialects.rlinf.models import EMBODIED_MODEL_TYPES, MODEL_TYPES, TAGGED, TASK_TYPES, RLinfConfig
from rlcfg.schema.base import Finding, RuleContext, RuleSet

rules = RuleSet()

def _later(ctx: RuleContext) -> bool:
    """Whether the document is judged by RLinf 2025-10 or later rather than the seed's 2025-08."""
    return getattr(ctx, "release", None) != "2025-08"


def _versioned(ctx: RuleContext, cfg: RLinfConfig, code: str, path: str, message: str, hint: str,
               related: list[str] = ()) -> Finding:
    """An error for the later layout; a warning for the seed's, whose RLinf did not have the rule yet."""
    if _later(ctx):
        return ctx.error(code, path, message, hint, related)
    return ctx.warning(code, path, message + " (RLinf enforces this from 2025-10 on)", hint, related)


def _recompute(cfg: RLinfConfig, ctx: RuleContext) -> tuple[bool, str]:
    """The effective `recompute_logprobs` and the key it was read from (either layout's)."""
    if not ctx.is_set("algorithm.recompute_logprobs") and ctx.is_set("rollout.recompute_logprobs"):
        return cfg.rollout.recompute_logprobs, "rollout.recompute_logprobs"
    return cfg.algorithm.recompute_logprobs, "algorithm.recompute_logprobs"


def _key_path(component: lang.Component) -> str:
    return f"cluster.component_placement.{component.key}"


def _gpus_text(component: lang.Component) -> str:
    if component.gpus is None:
        return "all GPUs" if component.takes_all else "GPUs of unknown number"
    return f"GPUs {lang.describe_ranks(component.gpus)}"


# The GPUs per node a check assumes where the config leaves them to RLinf's count at start: the usual node, which the
# warning names.
ASSUMED_GPUS_PER_NODE = 8


def _world(component: lang.Component | None, cfg: RLinfConfig) -> int | None:
    if component is None:
        return None
    if component.world_size is not None:
        return component.world_size
    return None


# ---- placement --------------------------------------------------------------------------------------------


@rules.rule("rlinf/placement-syntax", "RLC204",
            "Every `cluster.component_placement` entry follows RLinf's placement language: ascending, "
            "non-overlapping GPU ranks, process ranks running on from 0, and each component placed once.",
            keys=["cluster.component_placement"], also=("RLC401",))
def placement_syntax(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    for issue in placement(cfg).issues:
        if issue.code in ("RLC204", "RLC401"):
            path = "cluster.component_placement." + ".".join(str(p) for p in issue.key)
            yield ctx.error(issue.code, path, issue.message, issue.hint)


@rules.rule("rlinf/placement-in-cluster", "RLC403",
            "Placed GPU ranks lie inside the cluster (num_nodes × num_gpus_per_node, or the node group); checked "
            "only when `cluster.num_gpus_per_node` is set, since RLinf otherwise counts GPUs at start.",
            keys=["cluster.component_placement", "cluster.num_nodes", "cluster.num_gpus_per_node",
                  "cluster.node_groups"], also=("RLC308",))
def placement_in_cluster(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    analysis = placement(cfg)
    for issue in analysis.issues:
        if issue.code == "RLC403":
            path = "cluster.component_placement." + ".".join(str(p) for p in issue.key)
            yield ctx.error("RLC403", path, issue.message, issue.hint,
                            related=["cluster.num_nodes", "cluster.num_gpus_per_node"])
    if cfg.cluster.num_gpus_per_node is None and analysis.explicit_ranks:
        highest = max((max(c.gpus) for c in analysis.components.values() if c.gpus and not c.node_groups),
                      default=None)
        if highest is not None and highest > 0:  # rank 0 exists on any node RLinf can run on
            yield ctx.machine(
                "cluster.component_placement",
                f"the placement uses GPU ranks up to {highest}, but `cluster.num_gpus_per_node` is not set, so "
                f"whether the cluster has {highest + 1} GPUs is only known when RLinf starts",
                f"set `cluster.num_gpus_per_node` (for example {max(1, -(-(highest + 1) // cfg.cluster.num_nodes))}) "
                f"so that the ranks can be checked now")


@rules.rule("rlinf/reserved-node-group-label", "RLC204",
            "A `cluster.node_groups` entry takes neither of the labels RLinf's scheduler defines itself: `cluster` "
            "(every node) and `node` (every node, placed by node rank).",
            keys=["cluster.node_groups"])
def reserved_node_group_label(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    for index, group in enumerate(cfg.cluster.node_groups or []):
        label = group.get("label") if isinstance(group, dict) else None
        if label in lang.RESERVED_LABELS:
            yield ctx.error("RLC204", f"cluster.node_groups.{index}.label",
                            f"node group label `{label}` is reserved: RLinf's scheduler defines `cluster` (every "
                            f"node) and `node` (every node, placed by node rank) itself, and stops at start on a "
                            f"node group that takes either label",
                            f"rename the group (and the `node_group:` entries that name it), or drop it and place "
                            f"on `{label}` directly")


@rules.rule("rlinf/placement-mode", "RLC401",
            "Reasoning placements are either collocated (actor and rollout on the same GPUs) or disaggregated "
            "(actor, rollout, inference and critic on disjoint, contiguous GPU ranges); actor and rollout (and, "
            "from 2025-12 (main), reward) must be placed.",
            keys=["cluster.component_placement"], also=("RLC302", "RLC306"))
def placement_mode_rule(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if cfg.runner.task_type not in REASONING:
        return
    analysis = placement(cfg)
    components = analysis.components
    named = set()  # components a key names, even one whose entry is broken (reported on its own)
    for key in cfg.cluster.component_placement:
        named.update(name.strip() for name in str(key).split(","))
    needed = ["actor", "rollout"] + (["reward"] if ctx.release in (None, *TAGGED) else [])
    if cfg.runner.task_type == "reasoning_eval":
        needed = ["rollout"]
    for name in needed:
        if name not in named:
            shown = ", ".join(f"`{k}`" for k in cfg.cluster.component_placement) or "nothing"
            example = "actor,rollout,reward: all" if "reward" in needed else "actor,rollout: all"
            yield ctx.error("RLC302", "cluster.component_placement",
                            f"`cluster.component_placement` places no `{name}` (it places {shown}); RLinf needs "
                            f"{' and '.join(f'`{n}`' for n in needed)} placed",
                            f"add `{name}` to a key, for example `{example}`")
    mode = placement_mode(cfg, analysis)
    if mode == "collocated":
        for name in ("inference", "critic_inference"):
            if name in components and _later(ctx):
                component = components[name]
                yield ctx.error("RLC306", _key_path(component),
                                f"`{name}` is placed (on {_gpus_text(component)}) although actor and rollout are "
                                f"collocated; RLinf 2025-10 accepts an inference group only in disaggregated "
                                f"placements", f"drop `{name}` from `{component.key}` (the actor recomputes "
                                               f"log-probs itself when collocated)")
        return
    if mode != "disaggregated":
        return
    roles = [components[n] for n in ("actor", "rollout", "inference", "critic", "critic_inference")
             if n in components]
    for i, first in enumerate(roles):
        for second in roles[i + 1:]:
            if first.gpus and second.gpus and first.gpus & second.gpus:
                common = first.gpus & second.gpus
                shared = ("GPU " if len(common) == 1 else "GPUs ") + lang.describe_ranks(common)
                yield ctx.error(
                    "RLC401", _key_path(second),
                    f"`{first.name}` ({_gpus_text(first)}) and `{second.name}` ({_gpus_text(second)}) share "
                    f"{shared} without being collocated; RLinf accepts actor and rollout on the same GPUs "
                    f"(collocated) or every role on its own GPUs (disaggregated)",
                    f"give `{second.name}` GPUs outside {lang.describe_ranks(first.gpus)}, or put "
                    f"`{first.name},{second.name}` on one key to collocate them", related=[_key_path(first)])
    for role in roles:
        if role.gpus and not lang.is_contiguous(role.gpus):
            yield ctx.error("RLC306", _key_path(role),
                            f"`{role.name}` is placed on GPUs {lang.describe_ranks(role.gpus)}, which are not "
                            f"contiguous; disaggregated placements need one contiguous range per role",
                            f"place `{role.name}` on one range such as `{min(role.gpus)}-"
                            f"{min(role.gpus) + len(role.gpus) - 1}`")


@rules.rule("rlinf/inference-needs-recompute", "RLC302",
            "A disaggregated placement with an inference group recomputes log-probs there, so "
            "`algorithm.recompute_logprobs` must be true.",
            keys=["cluster.component_placement", "algorithm.recompute_logprobs"])
def inference_needs_recompute(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if cfg.runner.task_type not in REASONING:
        return
    analysis = placement(cfg)
    inference = analysis.components.get("inference")
    if inference is None or placement_mode(cfg, analysis) != "disaggregated":
        return
    recompute, key = _recompute(cfg, ctx)
    if not recompute:
        yield ctx.error("RLC302", key,
                        f"`{key}` is false, but `inference` is placed on {_gpus_text(inference)} in a "
                        f"disaggregated placement; the inference group exists to recompute log-probs",
                        f"set `{key}: true`, or remove `inference` from the placement",
                        related=[_key_path(inference)])


@rules.rule("rlinf/auto-scheduler", "RLC306",
            "`cluster.auto_scheduler` needs a disaggregated placement and no critic.",
            keys=["cluster.auto_scheduler", "cluster.component_placement", "critic.use_critic_model"])
def auto_scheduler(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if not cfg.cluster.auto_scheduler:
        return
    if placement_mode(cfg) == "collocated":
        yield ctx.error("RLC306", "cluster.auto_scheduler",
                        "`cluster.auto_scheduler` is on, but actor and rollout are collocated; the auto scheduler "
                        "moves GPUs between disaggregated roles", "place actor, rollout and inference on separate "
                                                                  "ranges (in that order), or turn it off",
                        related=["cluster.component_placement"])
    if cfg.critic.use_critic_model:
        yield ctx.error("RLC306", "cluster.auto_scheduler",
                        "`cluster.auto_scheduler` is on together with `critic.use_critic_model`; RLinf's auto "
                        "scheduler does not handle a critic", "turn one of them off",
                        related=["critic.use_critic_model"])


@rules.rule("rlinf/idle-gpus", "RLC404",
            "Every GPU of the cluster is used by some component (when the cluster's size is known).",
            keys=["cluster.component_placement", "cluster.num_nodes", "cluster.num_gpus_per_node"])
def idle_gpus(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if cfg.cluster.num_gpus_per_node is None or cfg.cluster.node_groups:
        return
    analysis = placement(cfg)
    if analysis.issues or any(c.gpus is None for c in analysis.components.values()):
        return
    total = cfg.cluster.num_nodes * cfg.cluster.num_gpus_per_node
    used = set().union(*(c.gpus for c in analysis.components.values())) if analysis.components else set()
    idle = sorted(set(range(total)) - used)
    if idle and used:
        yield ctx.warning("RLC404", "cluster.component_placement",
                          f"GPUs {lang.describe_ranks(idle)} of the {total} in the cluster are placed to no component",
                          "extend a component's range over them, or lower `cluster.num_nodes`/"
                          "`cluster.num_gpus_per_node`", related=["cluster.num_gpus_per_node"])


# ---- parallel sizes -----------------------------------------------------------------------------------------


@rules.rule("rlinf/parallel-divides-gpus", "RLC400",
            "Each role's process count is a multiple of its model-parallel size: actor TP × PP × CP (Megatron), "
            "rollout TP × PP, inference TP × PP.",
            keys=["actor.model.tensor_model_parallel_size", "actor.model.pipeline_model_parallel_size",
                  "actor.model.context_parallel_size", "rollout.tensor_parallel_size",
                  "rollout.pipeline_parallel_size", "inference.model.tensor_model_parallel_size",
                  "inference.model.pipeline_model_parallel_size", "cluster.component_placement"])
def parallel_divides(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    components = placement(cfg).components
    model = cfg.actor.model
    checks = [("rollout", "rollout.tensor_parallel_size",
               [("rollout.tensor_parallel_size", cfg.rollout.tensor_parallel_size),
                ("rollout.pipeline_parallel_size", cfg.rollout.pipeline_parallel_size)]),
              ("inference", "inference.model.tensor_model_parallel_size",
               [("inference.model.tensor_model_parallel_size", cfg.inference.model.tensor_model_parallel_size),
                ("inference.model.pipeline_model_parallel_size", cfg.inference.model.pipeline_model_parallel_size)])]
    if cfg.actor.training_backend == "megatron":
        checks.insert(0, ("actor", "actor.model.tensor_model_parallel_size",
                          [("actor.model.tensor_model_parallel_size", model.tensor_model_parallel_size),
                           ("actor.model.pipeline_model_parallel_size", model.pipeline_model_parallel_size),
                           ("actor.model.context_parallel_size", model.context_parallel_size)]))
    for name, path, sizes in checks:
        world = _world(components.get(name), cfg)
        product = 1
        for _key, size in sizes:
            product *= size
        if world is None:
            component = components.get(name)
            if component is not None and component.takes_all and cfg.cluster.num_gpus_per_node is None \
                    and not cfg.cluster.node_groups:
                # `all` of a cluster whose nodes' size RLinf counts at start: judged on the usual node
                assumed = cfg.cluster.num_nodes * ASSUMED_GPUS_PER_NODE
                if assumed % product:
                    factors = [f"`{k}` ({v})" for k, v in sizes if v > 1 or k == path]
                    yield ctx.warning(
                        "RLC400", path,
                        f"`{name}` takes every GPU of the cluster, whose size RLinf counts when it starts: on nodes "
                        f"of {ASSUMED_GPUS_PER_NODE} GPUs (assumed; `cluster.num_gpus_per_node` is not set) that "
                        f"is {assumed} processes, not a multiple of {' × '.join(factors)}, and RLinf fails when "
                        f"it builds the {name}'s parallel groups",
                        "set `cluster.num_gpus_per_node` to the nodes' GPU count, and a model-parallel size that "
                        "divides it", related=["cluster.num_nodes"])
            continue
        if world % product:
            factors = [f"`{k}` ({v})" for k, v in sizes if v > 1 or k == path]
            shown = " × ".join(factors) + (f" = {product}" if len(factors) > 1 else "")
            fits = [n for n in range(product, 0, -1) if world % n == 0][0]
            later = ("" if name == "actor" else
                     f"; RLinf accepts this at load but fails when the {name} engines start (each engine owns "
                     f"{product} GPUs)")
            yield ctx.error("RLC400", path,
                            f"`{name}` runs {world} process{'es' if world != 1 else ''} "
                            f"({_gpus_text(components[name])}), which is not a multiple of {shown}{later}",
                            f"use a model-parallel size that divides {world} (for example {fits}), or place "
                            f"`{name}` on a multiple of {product} GPUs",
                            related=[_key_path(components[name])])


@rules.rule("rlinf/rollout-tp-divides-actor-tp", "RLC400",
            "With a Megatron actor, the rollout TP divides the actor TP and the rollout's process count is a "
            "multiple of the actor TP (RLinf's weight sync maps actor ranks onto rollout ranks that way).",
            keys=["actor.model.tensor_model_parallel_size", "rollout.tensor_parallel_size",
                  "cluster.component_placement"])
def rollout_tp(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if cfg.actor.training_backend != "megatron" or cfg.runner.task_type not in TRAINING:
        return
    actor_tp, rollout_tp_size = cfg.actor.model.tensor_model_parallel_size, cfg.rollout.tensor_parallel_size
    # 2025-08's placement refuses a rollout TP above the actor's at load; otherwise the weight sync fails later
    when = ("" if ctx.release == "2025-08" and rollout_tp_size > actor_tp
            else "; RLinf accepts this at load but fails when it first syncs the actor's weights to the rollout")
    if actor_tp % rollout_tp_size:
        yield ctx.error("RLC400", "rollout.tensor_parallel_size",
                        f"`rollout.tensor_parallel_size` ({rollout_tp_size}) does not divide "
                        f"`actor.model.tensor_model_parallel_size` ({actor_tp}); RLinf's weight sync splits each "
                        f"actor TP group into rollout TP groups{when}",
                        f"use a rollout TP that divides {actor_tp} (for example "
                        f"{max(n for n in range(1, actor_tp + 1) if actor_tp % n == 0 and n <= rollout_tp_size)})",
                        related=["actor.model.tensor_model_parallel_size"])
        return
    rollout = placement(cfg).components.get("rollout")
    world = _world(rollout, cfg)
    if world is not None and world % actor_tp:
        yield ctx.error("RLC400", _key_path(rollout),
                        f"`rollout` runs {world} processes, which is not a multiple of "
                        f"`actor.model.tensor_model_parallel_size` ({actor_tp}); RLinf's weight sync sends each "
                        f"actor TP group to a whole number of rollout instances; RLinf accepts this at load but "
                        f"fails when it first syncs the actor's weights to the rollout",
                        f"place rollout on a multiple of {actor_tp} GPUs",
                        related=["actor.model.tensor_model_parallel_size"])


@rules.rule("rlinf/expert-tp", "RLC306",
            "The expert TP size does not exceed the TP size.",
            keys=["actor.model.expert_tensor_parallel_size", "actor.model.tensor_model_parallel_size"])
def expert_tp(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    model = cfg.actor.model
    if model.expert_tensor_parallel_size is not None and \
            model.expert_tensor_parallel_size > model.tensor_model_parallel_size:
        yield ctx.error("RLC306", "actor.model.expert_tensor_parallel_size",
                        f"`actor.model.expert_tensor_parallel_size` ({model.expert_tensor_parallel_size}) exceeds "
                        f"`actor.model.tensor_model_parallel_size` ({model.tensor_model_parallel_size})",
                        f"use an expert TP of at most {model.tensor_model_parallel_size}",
                        related=["actor.model.tensor_model_parallel_size"])


@rules.rule("rlinf/vocab-divisible-by-tp", "RLC400",
            "The vocabulary divides by the actor TP. RLinf takes the vocabulary from config.json under the rollout "
            "model path, which rlcfg does not read: the rule is skipped unless `actor.model.padded_vocab_size` is "
            "written in the config.",
            keys=["actor.model.padded_vocab_size", "actor.model.tensor_model_parallel_size"])
def vocab_divisible(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    model = cfg.actor.model
    if cfg.actor.training_backend != "megatron" or model.padded_vocab_size is None:
        return
    if model.padded_vocab_size % model.tensor_model_parallel_size:
        yield ctx.error("RLC400", "actor.model.padded_vocab_size",
                        f"`actor.model.padded_vocab_size` ({model.padded_vocab_size}) does not divide by "
                        f"`actor.model.tensor_model_parallel_size` ({model.tensor_model_parallel_size})",
                        "choose a TP size that divides the vocabulary", related=["actor.model.tensor_model_parallel_size"])


@rules.rule("rlinf/sequence-parallel-needs-tp", "RLC307",
            "Megatron sequence parallelism, when written in the config, only acts with TP > 1.",
            keys=["actor.model.sequence_parallel", "actor.model.tensor_model_parallel_size"])
def sequence_parallel(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    model = cfg.actor.model
    if cfg.actor.training_backend == "megatron" and model.sequence_parallel and \
            model.tensor_model_parallel_size == 1 and ctx.is_set("actor.model.sequence_parallel"):
        yield ctx.warning("RLC307", "actor.model.sequence_parallel",
                          "`actor.model.sequence_parallel` is true but `actor.model.tensor_model_parallel_size` is 1; "
                          "sequence parallelism splits activations across a TP group, so it has nothing to do "
                          "(newer megatron-core rejects the combination)",
                          "set `sequence_parallel: false`, or raise the TP size",
                          related=["actor.model.tensor_model_parallel_size"])


# ---- batches ------------------------------------------------------------------------------------------------


@rules.rule("rlinf/minibatches-divide-batch", "RLC300",
            "rollout_batch_size × group_size divides into n_minibatches (RLinf floors the quotient into "
            "`actor.global_batch_size`, silently dropping the rest), and the quotient is at least 1.",
            keys=["data.rollout_batch_size", "algorithm.group_size", "algorithm.n_minibatches"])
def minibatches(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if not training(cfg):
        return
    samples = cfg.data.rollout_batch_size * cfg.algorithm.group_size
    n = cfg.algorithm.n_minibatches
    if samples % n:
        options = [d for d in range(1, min(samples, 64) + 1) if samples % d == 0]
        near = min(options, key=lambda d: (abs(d - n), d))
        yield ctx.error("RLC300", "algorithm.n_minibatches",
                        f"`data.rollout_batch_size` × `algorithm.group_size` = {cfg.data.rollout_batch_size} × "
                        f"{cfg.algorithm.group_size} = {samples} samples do not split into `algorithm.n_minibatches` "
                        f"({n}) equal updates; RLinf floors the global batch to {samples // n}",
                        f"use an n_minibatches that divides {samples} (for example {near})",
                        related=["data.rollout_batch_size", "algorithm.group_size"])


@rules.rule("rlinf/global-batch-divides", "RLC300",
            "The actor's global batch (rollout_batch_size × group_size / n_minibatches) is a multiple of the "
            "micro-batch size × the actor's data-parallel size.",
            keys=["data.rollout_batch_size", "algorithm.group_size", "algorithm.n_minibatches",
                  "algorithm.training_batch_size_per_gpu", "cluster.component_placement"])
def global_batch(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if not training(cfg):
        return
    actor = placement(cfg).components.get("actor")
    world = _world(actor, cfg)
    if world is None:
        return
    model = cfg.actor.model
    model_parallel = (model.tensor_model_parallel_size * model.pipeline_model_parallel_size *
                      model.context_parallel_size) if cfg.actor.training_backend == "megatron" else 1
    if world % model_parallel:
        return  # reported by rlinf/parallel-divides-gpus
    dp = world // model_parallel
    samples = cfg.data.rollout_batch_size * cfg.algorithm.group_size
    global_size = samples // cfg.algorithm.n_minibatches
    micro = cfg.algorithm.training_batch_size_per_gpu
    if global_size and global_size % (micro * dp):
        yield ctx.error("RLC300", "algorithm.training_batch_size_per_gpu",
                        f"the actor's global batch ({cfg.data.rollout_batch_size} × {cfg.algorithm.group_size} // "
                        f"{cfg.algorithm.n_minibatches} = {global_size}) is not a multiple of "
                        f"`algorithm.training_batch_size_per_gpu` ({micro}) × the actor's data-parallel size ({dp})",
                        f"make {global_size} a multiple of {micro * dp}: change `data.rollout_batch_size`, "
                        f"`algorithm.n_minibatches` or the micro-batch size",
                        related=["data.rollout_batch_size", "algorithm.n_minibatches", _key_path(actor)])
    elif global_size == 0:
        yield ctx.error("RLC300", "algorithm.n_minibatches",
                        f"`algorithm.n_minibatches` ({cfg.algorithm.n_minibatches}) is larger than the {samples} "
                        f"samples of a step, so RLinf's global batch would be 0",
                        f"use at most {samples} minibatches", related=["data.rollout_batch_size"])


@rules.rule("rlinf/reward-world-divides", "RLC300",
            "The samples of a step (rollout_batch_size × group_size) divide evenly across the reward workers.",
            keys=["data.rollout_batch_size", "algorithm.group_size", "cluster.component_placement"])
def reward_world(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if not training(cfg):
        return
    reward = placement(cfg).components.get("reward")
    world = _world(reward, cfg)
    samples = cfg.data.rollout_batch_size * cfg.algorithm.group_size
    if world and samples % world:
        yield ctx.error("RLC300", _key_path(reward),
                        f"the {samples} samples of a step ({cfg.data.rollout_batch_size} × "
                        f"{cfg.algorithm.group_size}) do not divide across the {world} reward workers",
                        f"place reward on a number of GPUs that divides {samples}",
                        related=["data.rollout_batch_size", "algorithm.group_size"])


@rules.rule("rlinf/group-size", "RLC302",
            "Group-baseline advantages (grpo, grpo_dynamic, reinpp_baseline) need more than one response per prompt.",
            keys=["algorithm.adv_type", "algorithm.group_size"])
def group_size(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if cfg.runner.task_type == "sft" or cfg.runner.only_eval or cfg.runner.task_type.endswith("_eval"):
        return
    if cfg.algorithm.adv_type in GROUP_ADVANTAGES and cfg.algorithm.group_size <= 1:
        yield ctx.error("RLC302", "algorithm.group_size",
                        f"`algorithm.adv_type` is `{cfg.algorithm.adv_type}`, which compares each response with the "
                        f"others of its group, but `algorithm.group_size` is {cfg.algorithm.group_size}",
                        "set `algorithm.group_size` to 2 or more (8 or 16 are common)",
                        related=["algorithm.adv_type"])


@rules.rule("rlinf/recomputed-batch-sizes", "RLC304",
            "For reasoning tasks RLinf overwrites `actor.micro_batch_size`, `actor.global_batch_size` (and the "
            "critic's) from the algorithm's batch settings; a value written there is ignored.",
            keys=["actor.global_batch_size", "actor.micro_batch_size", "critic.global_batch_size",
                  "critic.micro_batch_size"])
def recomputed_batches(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if not training(cfg):
        return
    samples = cfg.data.rollout_batch_size * cfg.algorithm.group_size
    derived = {"global_batch_size": samples // cfg.algorithm.n_minibatches,
               "micro_batch_size": cfg.algorithm.training_batch_size_per_gpu}
    formula = {"global_batch_size": "data.rollout_batch_size × algorithm.group_size // algorithm.n_minibatches",
               "micro_batch_size": "algorithm.training_batch_size_per_gpu"}
    through = {"global_batch_size": "`data.rollout_batch_size`, `algorithm.group_size` or `algorithm.n_minibatches`",
               "micro_batch_size": "`algorithm.training_batch_size_per_gpu`"}
    for role in ("actor", "critic"):
        for key, value in derived.items():
            path = f"{role}.{key}"
            written = getattr(getattr(cfg, role), key)
            if ctx.is_set(path) and written is not None and written != value:
                yield ctx.warning("RLC304", path,
                                  f"RLinf overwrites `{path}` ({written}) with {formula[key]} = {value}",
                                  f"delete `{path}`; change it through {through[key]}")


@rules.rule("rlinf/logprobs-source", "RLC302",
            "The old policy's log-probs come from somewhere: `recompute_logprobs` or `rollout.return_logprobs`; "
            "both at once need `algorithm.importance_sampling_fix`.",
            keys=["algorithm.recompute_logprobs", "rollout.recompute_logprobs", "rollout.return_logprobs",
                  "algorithm.importance_sampling_fix"])
def logprobs_source(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    # 2025-08 has no return_logprobs: its SGLang worker returns the log-probs exactly when recompute is off.
    if cfg.runner.task_type not in TRAINING or not _later(ctx):
        return
    recompute, key = _recompute(cfg, ctx)
    returned = cfg.rollout.return_logprobs or cfg.algorithm.importance_sampling_fix
    if not recompute and not returned:
        yield ctx.error("RLC302", key,
                        f"`{key}` and `rollout.return_logprobs` are both false, so nothing provides the old "
                        f"policy's log-probs for the PPO ratio",
                        f"set `{key}: true` (recompute with the actor) or `rollout.return_logprobs: true`",
                        related=["rollout.return_logprobs"])
    elif recompute and cfg.rollout.return_logprobs and not cfg.algorithm.importance_sampling_fix:
        yield ctx.error("RLC302", "rollout.return_logprobs",
                        f"`{key}` and `rollout.return_logprobs` are both true; RLinf accepts both only with "
                        f"`algorithm.importance_sampling_fix: true`",
                        "turn one of them off, or set `algorithm.importance_sampling_fix: true`",
                        related=[key, "algorithm.importance_sampling_fix"])


@rules.rule("rlinf/importance-sampling-overrides", "RLC304",
            "`algorithm.importance_sampling_fix` makes RLinf turn on `recompute_logprobs` and "
            "`rollout.return_logprobs`, whatever they were set to.",
            keys=["algorithm.importance_sampling_fix", "algorithm.recompute_logprobs", "rollout.return_logprobs"])
def importance_sampling(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if not cfg.algorithm.importance_sampling_fix:
        return
    recompute, key = _recompute(cfg, ctx)
    for path, value in ((key, recompute), ("rollout.return_logprobs", cfg.rollout.return_logprobs)):
        if ctx.is_set(path) and not value:
            yield ctx.warning("RLC304", path,
                              f"`{path}` is false, but `algorithm.importance_sampling_fix` is true, so RLinf "
                              f"turns it on", f"set `{path}: true` to say what runs",
                              related=["algorithm.importance_sampling_fix"])


def _kl_dropped(cfg: RLinfConfig, ctx: RuleContext) -> str | None:
    """The recompute key whose `false` makes RLinf's reasoning runner (2025-10 on; not 2025-08's math runner) skip
    the KL of kl_beta > 0: it runs no inference pass, so no reference log-probs, and the actor adds the KL only
    with them. None when the KL runs."""
    recompute, key = _recompute(cfg, ctx)
    if cfg.algorithm.kl_beta <= 0 or cfg.runner.task_type == "math" or recompute \
            or cfg.algorithm.importance_sampling_fix:
        return None
    return key


@rules.rule("rlinf/kl-needs-recompute", "RLC304",
            "Without `recompute_logprobs` RLinf computes no reference log-probs, so `algorithm.kl_beta` adds no KL "
            "term (2025-10 and later).",
            keys=["algorithm.kl_beta", "algorithm.recompute_logprobs"])
def kl_needs_recompute(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if cfg.runner.task_type not in TRAINING:
        return
    key = _kl_dropped(cfg, ctx)
    if key is not None:
        yield ctx.warning("RLC304", "algorithm.kl_beta",
                          f"`algorithm.kl_beta` is {cfg.algorithm.kl_beta}, but `{key}` is false: RLinf then skips "
                          f"the inference pass that computes the reference log-probs, and its actor adds the KL "
                          f"term only when it has them, so the run trains without KL",
                          f"set `algorithm.kl_beta: 0` to say what runs, or `{key}: true` to train with the KL",
                          related=[key])


def _refusal(path: str, message: str, hint: str, related: tuple[str, ...] = ()) -> Finding:
    return Finding("RLC118", Severity.NOTE, path, f"`rlcfg run` refuses {message}", hint, tuple(related))


def _runtime_limits(cfg: RLinfConfig) -> Iterator[Finding]:
    """What the runtime's preflight refuses of the roles lower.py builds: the actor's Megatron sizes (which a
    reference that shares the actor's workers inherits) and a critic (use_critic_model) trained with Megatron."""
    actor = cfg.actor
    if actor.training_backend == "megatron":
        # The actor trains the rollout's model (rollout.model.model_path from 2025-12 on, rollout.model_dir before).
        model = ("rollout.model.model_path", cfg.rollout.model.model_path) if cfg.rollout.model.model_path else (
            "rollout.model_dir", cfg.rollout.model_dir)
        for key, path, why in run_limits.megatron_unbuilt_models([model]):
            yield _refusal(key, f"`{key}` = {path}, {why}",
                           "set `actor.training_backend: fsdp`", ("actor.training_backend",))
        # RLinf builds megatron-core's TransformerConfig from these keys; the expert count, expert size and top k
        # it takes from the model's config.json, as rlcfg does.
        # (Only the keys a config writes are read: the others are inventoried fields not built until asked for.)
        written = actor.model.model_fields_set
        for name, value in run_limits.moe_routing_changes(
                lambda key: getattr(actor.model, key) if key in written else None):
            yield _refusal(f"actor.model.{name}", f"`actor.model.{name}` = {value}: {run_limits.MOE_ROUTING}",
                           "remove it, or set it to megatron-core's default", ("actor.training_backend",))
    critic = cfg.critic
    key = "critic.training_backend" if critic.training_backend else "actor.training_backend"
    if critic.use_critic_model and (critic.training_backend or actor.training_backend) == "megatron":
        yield _refusal(key, f"`{key}` = megatron for the critic (critic.use_critic_model): "
                       f"{run_limits.MEGATRON_CRITIC}", "set `critic.training_backend: fsdp`",
                       ("critic.use_critic_model",))


@rules.rule("rlinf/run-refusals", "RLC118",
            "`rlcfg run` refuses the RLinf reasoning settings whose values it would compute otherwise: a loss_type "
            "other than the PPO clip loss (`actor`), an adv_type other than grpo, importance_sampling_fix "
            "without RLinf main's capped weight, a reward_type other than math, a Megatron learning-rate "
            "schedule other than constant, linear or cosine, use_valid_token_scale with a sequence-mean "
            "aggregation, a per-micro-batch loss over dynamic micro-batches, max_num_gen_batches other than 1, "
            "and what "
            "rlcfg's runtime does not do "
            "(rlcfg/run_limits.py): on Megatron a model family it does not build, MoE router "
            "settings that compute otherwise than the model's own routing and a critic; and vision-language models.",
            keys=["actor.model.model_path", "rollout.model.model_path", "rollout.model_dir", "algorithm.loss_type",
                  "algorithm.adv_type", "algorithm.importance_sampling_fix",
                  "algorithm.importance_sampling_clip", "reward.reward_type", "actor.lr_sched.lr_decay_style",
                  "actor.model.moe_aux_loss_coeff", "actor.model.moe_router_pre_softmax",
                  "critic.training_backend", "algorithm.use_valid_token_scale", "runner.enable_dynamic_batch_size",
                  "algorithm.max_num_gen_batches"])
def run_refusals(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if not training(cfg):
        return  # embodied, agent, evaluation, SFT and offline configs are refused by `rlcfg run` as a whole
    models = [("actor.model.model_path", cfg.actor.model.model_path),
              ("rollout.model.model_path", cfg.rollout.model.model_path), ("rollout.model_dir", cfg.rollout.model_dir)]
    for key, path, why in run_limits.vision_language_models(models):
        yield _refusal(key, f"`{key}` = {path}, a vision-language model ({why}): {run_limits.VISION_LANGUAGE}",
                       run_limits.vision_language_hint(key, path))
    alg = cfg.algorithm
    if cfg.runner.task_type != "math" and alg.loss_type not in LOSSES:
        yield _refusal("algorithm.loss_type",
                       f"`algorithm.loss_type` = {alg.loss_type}: rlcfg runs only RLinf's PPO clip loss (`actor`, "
                       "with dual clip by clip_ratio_c); critic, decoupled, on-policy-distillation and embodied "
                       "losses are not run", "use `loss_type: actor`")
    if alg.adv_type not in ADVANTAGES:
        yield _refusal("algorithm.adv_type",
                       f"`algorithm.adv_type` = {alg.adv_type}: rlcfg runs RLinf's GRPO advantage only (group "
                       "mean and std + 1e-6, then the batch normalisation of normalize_advantages); RLinf's gae, "
                       "reinpp, grpo_dynamic and the others compute otherwise", "use `adv_type: grpo`")
    megatron = cfg.actor.training_backend == "megatron"
    per_mb = not (megatron and alg.use_valid_token_scale)
    # Each micro-batch's loss averaged over micro-batches is run (loss_normalization "micro-batch"), over
    # micro-batches of training_batch_size_per_gpu samples; RLinf's token-budget micro-batches are not.
    if per_mb and cfg.runner.enable_dynamic_batch_size:
        yield _refusal("runner.enable_dynamic_batch_size",
                       "a loss averaged per micro-batch (RLinf's FSDP actor, or its Megatron actor without "
                       "use_valid_token_scale) over micro-batches cut by max_tokens_per_mbs: rlcfg does not cut "
                       "them the way RLinf does, and the mean depends on the cut", "set "
                       "`runner.enable_dynamic_batch_size: false`, or `algorithm.use_valid_token_scale: true` "
                       "(Megatron)", ("algorithm.use_valid_token_scale", "actor.training_backend"))
    if not per_mb and placement_mode(cfg) == "disaggregated" and ctx.release == "2025-08":
        # Its pipelined actor estimates the tokens with the previous step's mean response length (from the second
        # step on); later releases with the longest response allowed, which rlcfg runs (lower.estimated_token_norm).
        yield _refusal("algorithm.use_valid_token_scale",
                       "`use_valid_token_scale` = true in a disaggregated placement at RLinf 2025-08: its pipelined "
                       "Megatron actor then divides the token losses by the previous step's mean response length × "
                       "a rank's samples, which rlcfg does not compute",
                       "set `use_valid_token_scale: false`, collocate actor and rollout, or use RLinf 2025-10 or "
                       "later", ("cluster.component_placement",))
    gen_batches = getattr(alg, "max_num_gen_batches", None)
    if gen_batches is not None and gen_batches != 1:
        yield _refusal("algorithm.max_num_gen_batches",
                       f"`algorithm.max_num_gen_batches` = {gen_batches}: RLinf's dataloader then draws "
                       f"rollout_batch_size × {gen_batches} prompts a step; rlcfg draws rollout_batch_size",
                       "set `max_num_gen_batches: 1` or remove it")
    if alg.loss_agg_func != "token-mean" and not per_mb:
        yield _refusal("algorithm.use_valid_token_scale",
                       f"`use_valid_token_scale` = true with loss_agg_func {alg.loss_agg_func}: RLinf then weights "
                       "each micro-batch's sequence mean by its share of tokens, which rlcfg does not run",
                       "set `use_valid_token_scale: false`", ("algorithm.loss_agg_func",))
    kl_on = alg.kl_beta > 0 and _kl_dropped(cfg, ctx) is None
    if not megatron and kl_on and alg.kl_penalty_type in ("kl", "k1", "low_var_kl", "k3"):
        yield _refusal("algorithm.kl_penalty_type",
                       f"`algorithm.kl_penalty_type` = {alg.kl_penalty_type} with the FSDP actor and kl_beta > 0: "
                       "RLinf's FSDP actor calls kl_penalty(ref_logprobs, logprobs), the estimator of the reverse "
                       "direction, which rlcfg does not compute", "use `kl_penalty_type: mse` (k2) or `abs`, which "
                       "are symmetric, or the Megatron actor", ("algorithm.kl_beta", "actor.training_backend"))
    if not megatron and not ctx.is_set("algorithm.clip_ratio_c"):
        yield _refusal("algorithm.clip_ratio_c",
                       "the FSDP actor without `algorithm.clip_ratio_c`: RLinf's FSDP actor then dual-clips at 3.0 "
                       "(algorithm.get('clip_ratio_c', 3.0)), rlcfg reads the absent key as no dual clip",
                       "set `algorithm.clip_ratio_c: 3.0` (RLinf's behaviour) or `null` (no dual clip)",
                       ("actor.training_backend",))
    if cfg.reward.reward_type not in REWARD_FUNCTIONS:
        yield _refusal("reward.reward_type",
                       f"`reward.reward_type` = {cfg.reward.reward_type}: rlcfg scores responses with its `math` "
                       "verifier only, which is RLinf's `math` reward", "use `reward_type: math`")
    style = cfg.actor.lr_sched.lr_decay_style
    if cfg.actor.training_backend == "megatron" and style not in SCHEDULES:
        yield _refusal("actor.lr_sched.lr_decay_style",
                       f"`actor.lr_sched.lr_decay_style` = {style}: rlcfg's schedules are constant, linear and "
                       "cosine", "use `lr_decay_style: cosine` (or linear, constant)")
    if alg.importance_sampling_fix:
        if alg.importance_sampling_clip is None:
            yield _refusal("algorithm.importance_sampling_fix",
                           "`algorithm.importance_sampling_fix` = true without `algorithm.importance_sampling_clip`: "
                           "RLinf clamps the weight with it (and fails without it); rlcfg needs the cap",
                           "set `algorithm.importance_sampling_clip` (2.0 is common)",
                           ("algorithm.importance_sampling_clip",))
    yield from _runtime_limits(cfg)


@rules.rule("rlinf/sequence-lengths", "RLC303",
            "`runner.seq_length` exceeds `data.max_prompt_length`, and the sampling lengths fit in what is left.",
            keys=["runner.seq_length", "data.max_prompt_length", "algorithm.sampling_params.max_new_tokens",
                  "algorithm.sampling_params.min_new_tokens"], also=("RLC201",))
def sequence_lengths(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if cfg.runner.task_type not in REASONING:
        return  # embodied policies act in an environment; they have no prompt/response sequence
    seq, prompt = cfg.runner.seq_length, cfg.data.max_prompt_length
    sampling = cfg.algorithm.sampling_params
    if seq <= prompt:
        yield ctx.error("RLC303", "runner.seq_length",
                        f"`runner.seq_length` ({seq}) must be greater than `data.max_prompt_length` ({prompt}): the "
                        f"sequence holds the prompt and the response",
                        f"raise `runner.seq_length` to at least {prompt + 1} (e.g. {prompt * 2}), or shorten the "
                        f"prompts", related=["data.max_prompt_length"])
        return
    if ctx.is_set("algorithm.sampling_params.max_new_tokens") and sampling.max_new_tokens > seq - prompt:
        yield ctx.error("RLC303", "algorithm.sampling_params.max_new_tokens",
                        f"`algorithm.sampling_params.max_new_tokens` ({sampling.max_new_tokens}) exceeds "
                        f"`runner.seq_length` − `data.max_prompt_length` = {seq} − {prompt} = {seq - prompt}; longer "
                        f"responses do not fit in the training sequence",
                        f"use at most {seq - prompt}, or write "
                        "`${subtract:${runner.seq_length}, ${data.max_prompt_length}}`",
                        related=["runner.seq_length", "data.max_prompt_length"])
    if sampling.max_new_tokens < 1:
        yield ctx.error("RLC201", "algorithm.sampling_params.max_new_tokens",
                        f"`algorithm.sampling_params.max_new_tokens` must be >= 1, got {sampling.max_new_tokens}",
                        "generate at least one token")
    elif sampling.min_new_tokens > sampling.max_new_tokens:
        yield ctx.error("RLC303", "algorithm.sampling_params.min_new_tokens",
                        f"`algorithm.sampling_params.min_new_tokens` ({sampling.min_new_tokens}) exceeds "
                        f"`max_new_tokens` ({sampling.max_new_tokens})",
                        f"use at most {sampling.max_new_tokens}", related=["algorithm.sampling_params.max_new_tokens"])


# ---- rollout ------------------------------------------------------------------------------------------------


@rules.rule("rlinf/rollout-model", "RLC203",
            "The rollout model's path and type are given: `rollout.model_dir`/`model_arch` in 2025-08 and 2025-10, "
            "`rollout.model.model_path`/`model_type` from 2025-12 (main) on.",
            keys=["rollout.model_dir", "rollout.model.model_path", "rollout.model_arch", "rollout.model.model_type"])
def rollout_model(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if cfg.runner.task_type not in REASONING:
        return
    rollout = cfg.rollout
    if ctx.release in (None, *TAGGED):
        if rollout.model.model_path is None:
            hint = ("RLinf from 2025-12 on reads `rollout.model.model_path`; move `rollout.model_dir` there (or pin "
                    "`--framework-version 2025-10`)" if rollout.model_dir is not None
                    else "add `model: {model_path: /path/to/hf_model}` under `rollout`")
            yield ctx.error("RLC203", "rollout.model.model_path",
                            "`rollout.model.model_path` is not set; RLinf serves and reads the config of this model",
                            hint, related=["rollout.model_dir"] if rollout.model_dir is not None else [])
        if rollout.model.model_type is None:
            hint = ("RLinf from 2025-12 on reads `rollout.model.model_type`; set it (`rollout.model_arch` is not "
                    "read)" if ctx.is_set("rollout.model_arch") else "add `model_type: qwen2.5` (or qwen3, ...) "
                                                                     "under `rollout.model`")
            yield ctx.error("RLC203", "rollout.model.model_type",
                            "`rollout.model.model_type` is not set; RLinf accepts this at load but fails when the "
                            "rollout worker looks the model family up in its registry", hint)
    elif rollout.model_dir is None:
        hint = ("RLinf 2025-08 and 2025-10 read `rollout.model_dir`; `rollout.model.model_path` is the later name"
                if ctx.is_set("rollout.model.model_path") else "add `model_dir: /path/to/hf_model` under `rollout`")
        yield ctx.error("RLC203", "rollout.model_dir",
                        f"`rollout.model_dir` is not set; RLinf {ctx.release} serves this model and reads its "
                        f"config.json", hint)


@rules.rule("rlinf/reasoning-inputs", "RLC203",
            "A reasoning or agent training config names its training data (`data.train_data_paths`) and the actor's "
            "tokenizer (`actor.tokenizer.tokenizer_model`); RLinf accepts their absence at load but its dataset and "
            "tokenizer fail to build when the run starts.",
            keys=["data.train_data_paths", "actor.tokenizer.tokenizer_model"])
def reasoning_inputs(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if cfg.runner.task_type not in ("math", "reasoning"):
        return  # evaluation reads val data; coding_online_rl takes its prompts from a server
    if not cfg.data.train_data_paths:
        yield ctx.error("RLC203", "data.train_data_paths",
                        "`data.train_data_paths` is not set; RLinf accepts this at load but fails when it builds the "
                        "training dataset", "add `train_data_paths: [/path/to/train.jsonl]` under `data`")
    if cfg.actor.tokenizer.tokenizer_model is None:
        yield ctx.error("RLC203", "actor.tokenizer.tokenizer_model",
                        "`actor.tokenizer.tokenizer_model` is not set; RLinf accepts this at load but fails when it "
                        "loads the tokenizer", "add `tokenizer_model: /path/to/hf_model` under `actor.tokenizer`")


@rules.rule("rlinf/engine-sections", "RLC302",
            "From 2025-10 on, RLinf requires both `rollout.sglang` and `rollout.vllm` sections, whichever backend "
            "runs.", keys=["rollout.sglang", "rollout.vllm", "rollout.rollout_backend"])
def engine_sections(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if not _later(ctx) or cfg.runner.task_type not in REASONING:
        return
    for name in ("sglang", "vllm"):
        if getattr(cfg.rollout, name) is None:
            yield ctx.error("RLC302", f"rollout.{name}",
                            f"`rollout.{name}` is missing; RLinf 2025-10 validates both engine sections whichever "
                            f"`rollout.rollout_backend` ({cfg.rollout.rollout_backend}) is chosen",
                            f"add `{name}: {{}}` under `rollout` (its settings then take their defaults)",
                            related=["rollout.rollout_backend"])


@rules.rule("rlinf/task-type", "RLC202",
            "`runner.task_type` is one the judged release runs (2025-08: math, embodied; 2025-10: embodied, reasoning, "
            "coding_online_rl; later also embodied_eval, reasoning_eval, sft, offline).",
            keys=["runner.task_type"])
def task_type(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    allowed = TASK_TYPES.get(ctx.release or "main", TASK_TYPES["main"])
    task = cfg.runner.task_type
    if task in allowed or (task == "math" and ctx.release is None):
        return
    if task == "math":
        hint = "write `task_type: reasoning` (RLinf 2025-10 renamed it), or pin `--framework-version 2025-08`"
    else:
        close = close_matches(str(task), allowed, n=1)
        hint = f"did you mean `{close[0]}`?" if close else f"use one of {', '.join(allowed)}"
    yield ctx.error("RLC202", "runner.task_type",
                    f"`runner.task_type`: {task!r} is not a task type RLinf {ctx.release or 'main'} runs "
                    f"({', '.join(allowed)})", hint)


@rules.rule("rlinf/model-type", "RLC202",
            "The model family is one the judged release supports: for reasoning and agent configs "
            "`rollout.model_arch` in SUPPORTED_MODEL_ARCHS (2025-08, 2025-10) or `rollout.model.model_type` in "
            "SupportedModel (later); for embodied configs `actor.model.model_name` (2025-08, 2025-10) or "
            "`actor.model.model_type` among the embodied models (later).",
            keys=["rollout.model_arch", "rollout.model.model_type", "actor.model.model_name", "actor.model.model_type"])
def model_type(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    release = ctx.release or "main"
    task = cfg.runner.task_type
    model = cfg.actor.model
    later = ""
    if task in ("embodied", "embodied_eval"):
        if release in TAGGED:
            path, value = "actor.model.model_type", getattr(model, "model_type", None)
            allowed = EMBODIED_MODEL_TYPES[release]
        else:
            path, value, allowed = "actor.model.model_name", getattr(model, "model_name", None), MODEL_TYPES[release]
    elif task in REASONING:
        if release in TAGGED:
            path, value, allowed = "rollout.model.model_type", cfg.rollout.model.model_type, MODEL_TYPES[release]
            if value is None:
                return  # reported by rlinf/rollout-model
            if task != "coding_online_rl":
                later = "; RLinf accepts it at load but fails when the rollout worker looks it up in its registry"
        else:
            path, value, allowed = "rollout.model_arch", cfg.rollout.model_arch, MODEL_TYPES[release]
        if release != "2025-08" and task == "coding_online_rl":
            allowed = ("qwen2.5",)  # its validator asserts exactly this family
    else:
        return
    if value in allowed:
        return
    close = close_matches(str(value), allowed, n=1)
    hint = f"did you mean `{close[0]}`?" if close else f"use one of {', '.join(allowed)}"
    what = "not set, so it is not" if value is None else f"{value!r}, which is not"
    yield ctx.error("RLC202", path, f"`{path}` is {what} a model family RLinf {release} supports for "
                                    f"{task} ({', '.join(allowed)}){later}", hint)


@rules.rule("rlinf/task-type-renamed", "RLC111",
            "`runner.task_type: math` is the mid-2025 name; RLinf 2025-10 calls it `reasoning` and rejects `math`.",
            keys=["runner.task_type"])
def task_type_renamed(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if cfg.runner.task_type == "math" and ctx.is_set("runner.task_type"):
        yield ctx.warning("RLC111", "runner.task_type",
                          "`runner.task_type: math` is RLinf's mid-2025 name for reasoning RL; RLinf 2025-10 and later "
                          "reject it", "for newer RLinf write `task_type: reasoning`, with `rollout.model.model_path`, "
                                       "`rollout.sglang: {}` and `rollout.vllm: {}`")


# ---- actor --------------------------------------------------------------------------------------------------


@rules.rule("rlinf/megatron-checkpoint-source", "RLC302",
            "A Megatron actor starts either from the HF model (`megatron.use_hf_ckpt: true`) or from a Megatron "
            "checkpoint, never both and never neither.",
            keys=["actor.megatron.use_hf_ckpt", "actor.model.megatron_checkpoint", "actor.checkpoint_load_path"],
            also=("RLC301",))
def checkpoint_source(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    actor = cfg.actor
    if actor.training_backend != "megatron":
        return
    checkpoint = actor.model.megatron_checkpoint
    if actor.megatron.use_hf_ckpt and checkpoint is not None:
        yield _versioned(ctx, cfg, "RLC301", "actor.model.megatron_checkpoint",
                         f"`actor.model.megatron_checkpoint` ({checkpoint}) is set while "
                         f"`actor.megatron.use_hf_ckpt` is true; RLinf takes one starting point",
                         "set `use_hf_ckpt: false` to start from the Megatron checkpoint, or remove it",
                         related=["actor.megatron.use_hf_ckpt"])
    if not actor.megatron.use_hf_ckpt and checkpoint is None and actor.checkpoint_load_path is None:
        yield ctx.error("RLC302", "actor.megatron.use_hf_ckpt",
                        "`actor.megatron.use_hf_ckpt` is false and no Megatron checkpoint is given "
                        "(`actor.model.megatron_checkpoint`, `actor.checkpoint_load_path`), so the actor has no "
                        "weights to start from", "set `use_hf_ckpt: true` to convert the HF model, or give the "
                                                 "checkpoint's path")


@rules.rule("rlinf/weight-decay-schedule", "RLC302",
            "A constant LR schedule takes its weight decay from `optim.weight_decay` (start/end unset); every other "
            "decay style needs `lr_sched.start_weight_decay` and `end_weight_decay`, equal under the constant "
            "`weight_decay_incr_style` (Megatron asserts it when it first sets the weight decay).",
            keys=["actor.lr_sched.lr_decay_style", "actor.lr_sched.start_weight_decay",
                  "actor.lr_sched.end_weight_decay"], also=("RLC301", "RLC305"))
def weight_decay_schedule(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if cfg.actor.training_backend != "megatron":
        return
    sched = cfg.actor.lr_sched
    if sched.lr_decay_style == "constant":
        for key in ("start_weight_decay", "end_weight_decay"):
            if getattr(sched, key) is not None:
                yield _versioned(ctx, cfg, "RLC301", f"actor.lr_sched.{key}",
                                 f"`actor.lr_sched.{key}` is set but `lr_decay_style` is constant, which takes "
                                 f"`actor.optim.weight_decay` ({cfg.actor.optim.weight_decay}) throughout",
                                 f"remove `{key}`", related=["actor.lr_sched.lr_decay_style"])
    else:
        for key in ("start_weight_decay", "end_weight_decay"):
            if getattr(sched, key) is None:
                yield _versioned(ctx, cfg, "RLC302", f"actor.lr_sched.{key}",
                                 f"`actor.lr_sched.lr_decay_style` is {sched.lr_decay_style}, which needs "
                                 f"`actor.lr_sched.{key}`",
                                 f"add `{key}: {cfg.actor.optim.weight_decay}` under `actor.lr_sched`",
                                 related=["actor.lr_sched.lr_decay_style"])
        start, end = sched.start_weight_decay, sched.end_weight_decay
        if sched.weight_decay_incr_style == "constant" and start is not None and end is not None and start != end:
            yield ctx.error("RLC305", "actor.lr_sched.end_weight_decay",
                            f"`actor.lr_sched.start_weight_decay` ({start}) and `end_weight_decay` ({end}) differ, "
                            "but `weight_decay_incr_style` is constant; RLinf accepts this at load, and Megatron's "
                            "scheduler asserts they are equal at the first training step",
                            f"set both to the same value, e.g. {end}",
                            related=["actor.lr_sched.start_weight_decay", "actor.lr_sched.weight_decay_incr_style"])


@rules.rule("rlinf/lr-bounds", "RLC305",
            "The LR schedule's `min_lr` does not exceed `max_lr`.",
            keys=["actor.lr_sched.min_lr", "actor.lr_sched.max_lr"])
def lr_bounds(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    sched = cfg.actor.lr_sched
    if sched.min_lr > sched.max_lr:
        yield ctx.error("RLC305", "actor.lr_sched.min_lr",
                        f"`actor.lr_sched.min_lr` ({sched.min_lr}) is above `actor.lr_sched.max_lr` ({sched.max_lr})",
                        "swap them, or lower min_lr", related=["actor.lr_sched.max_lr"])


@rules.rule("rlinf/warmup-iters-ignored", "RLC307",
            "`actor.lr_sched.lr_warmup_iters` has no effect while `lr_warmup_fraction` is set (not null): Megatron "
            "takes the warm-up from the fraction.",
            keys=["actor.lr_sched.lr_warmup_iters", "actor.lr_sched.lr_warmup_fraction"])
def warmup_iters_ignored(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    sched = cfg.actor.lr_sched
    if cfg.actor.training_backend == "megatron" and sched.lr_warmup_iters > 0 and sched.lr_warmup_fraction is not None:
        warmup, decay_end = megatron_warmup(sched)
        yield ctx.warning("RLC307", "actor.lr_sched.lr_warmup_iters",
                          f"`actor.lr_sched.lr_warmup_iters` ({sched.lr_warmup_iters}) is ignored: Megatron warms up "
                          f"for `lr_warmup_fraction` ({sched.lr_warmup_fraction}) × {decay_end} decay iterations = "
                          f"{warmup:g} steps whenever the fraction is set",
                          f"to warm up for {sched.lr_warmup_iters} iterations set `lr_warmup_fraction: null`; "
                          "otherwise remove `lr_warmup_iters`",
                          related=["actor.lr_sched.lr_warmup_fraction"])


@rules.rule("rlinf/warmup-within-decay", "RLC305",
            "Megatron's warm-up ends before the LR decay does; RLinf accepts a longer one at load, and the Megatron "
            "actor fails its start-up assertion.",
            keys=["actor.lr_sched.lr_warmup_iters", "actor.lr_sched.lr_warmup_fraction",
                  "actor.lr_sched.lr_decay_iters"])
def warmup_within_decay(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    sched = cfg.actor.lr_sched
    if cfg.actor.training_backend != "megatron" or cfg.runner.only_eval:
        return
    warmup, decay_end = megatron_warmup(sched)
    if warmup < decay_end:
        return
    if sched.lr_warmup_fraction is not None:
        yield ctx.error("RLC305", "actor.lr_sched.lr_warmup_fraction",
                        f"`actor.lr_sched.lr_warmup_fraction` ({sched.lr_warmup_fraction}) makes the warm-up as long "
                        f"as the whole decay ({decay_end} iterations); RLinf accepts it at load, but Megatron's LR "
                        "scheduler asserts warm-up < decay when the actor starts",
                        "use a fraction below 1, e.g. `lr_warmup_fraction: 0.01`",
                        related=["actor.lr_sched.lr_decay_iters"])
    else:
        yield ctx.error("RLC305", "actor.lr_sched.lr_warmup_iters",
                        f"`actor.lr_sched.lr_warmup_iters` ({sched.lr_warmup_iters}) is not below the decay end "
                        f"({decay_end} iterations, `lr_decay_iters`); RLinf accepts it at load, but Megatron's LR "
                        "scheduler asserts warm-up < decay when the actor starts",
                        f"lower `lr_warmup_iters` below {decay_end}, or raise `lr_decay_iters` above "
                        f"{sched.lr_warmup_iters}",
                        related=["actor.lr_sched.lr_decay_iters"])


@rules.rule("rlinf/precision-flags", "RLC305",
            "`actor.optim.fp16`/`bf16` agree with `actor.model.precision` and are not both on; RLinf derives them from "
            "the precision (2025-08 and 2025-10 overwrite a written value, later releases fill a null one).",
            keys=["actor.optim.fp16", "actor.optim.bf16", "actor.model.precision"], also=("RLC301", "RLC304"))
def precision_flags(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if cfg.actor.training_backend != "megatron":
        return  # only the Megatron actor reads the optimizer's precision flags
    optim, precision = cfg.actor.optim, cfg.actor.model.precision
    family = "bf16" if str(precision).startswith("bf16") else "fp16" if str(precision) in ("fp16", "16", "16-mixed") \
        else "fp32"
    if ctx.release in ("2025-08", "2025-10"):
        for flag in ("fp16", "bf16"):
            value = getattr(optim, flag)
            if value is not None and ctx.is_set(f"actor.optim.{flag}") and value != (family == flag):
                yield ctx.warning("RLC304", f"actor.optim.{flag}",
                                  f"RLinf {ctx.release} overwrites `actor.optim.{flag}` ({str(value).lower()}) with "
                                  f"{str(family == flag).lower()}, derived from `actor.model.precision` ({precision})",
                                  f"delete `{flag}`; `actor.model.precision` decides it",
                                  related=["actor.model.precision"])
        return
    if optim.fp16 and optim.bf16:
        yield ctx.error("RLC301", "actor.optim.bf16", "`actor.optim.fp16` and `actor.optim.bf16` are both true",
                        f"keep the one matching `actor.model.precision` ({precision})", related=["actor.optim.fp16"])
        return
    for flag in ("fp16", "bf16"):
        value = getattr(optim, flag)
        if value is not None and value != (family == flag):
            yield ctx.warning("RLC305", f"actor.optim.{flag}",
                              f"`actor.optim.{flag}` is {str(value).lower()} but `actor.model.precision` is "
                              f"{precision}; the optimizer's mixed-precision handling then mismatches the weights",
                              f"set `{flag}: {str(family == flag).lower()}`, or null to derive it from the precision",
                              related=["actor.model.precision"])


@rules.rule("rlinf/hf-architecture-overwritten", "RLC304",
            "RLinf overwrites the actor's architecture (layers, hidden size, heads, ...) from config.json of the "
            "rollout model; values written for them are ignored.",
            keys=["actor.model.num_layers", "actor.model.hidden_size", "actor.model.ffn_hidden_size",
                  "actor.model.num_attention_heads", "actor.model.num_query_groups",
                  "actor.model.max_position_embeddings"])
def hf_architecture(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if cfg.actor.training_backend != "megatron":
        return
    for key in ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups",
                "max_position_embeddings"):
        path = f"actor.model.{key}"
        if ctx.is_set(path) and getattr(cfg.actor.model, key) is not None:
            yield ctx.warning("RLC304", path,
                              f"RLinf overwrites `{path}` ({getattr(cfg.actor.model, key)}) with the value in the "
                              f"rollout model's config.json", f"delete `{path}`; the HF config decides it")


@rules.rule("rlinf/collocated-only-features", "RLC306",
            "Data-parallel load balancing needs a collocated placement; dynamic batch sizes do not work in "
            "disaggregated (pipelined) placements.",
            keys=["actor.enable_dp_load_balance", "runner.enable_dynamic_batch_size", "cluster.component_placement"])
def collocated_only(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if cfg.runner.task_type not in TRAINING or placement_mode(cfg) != "disaggregated":
        return
    for path, what in (("actor.enable_dp_load_balance", "data-parallel load balancing"),
                       ("runner.enable_dynamic_batch_size", "dynamic batch sizes")):
        section, key = path.split(".")
        if getattr(getattr(cfg, section), key):
            yield ctx.error("RLC306", path,
                            f"`{path}` is true, but actor and rollout are disaggregated; RLinf's workers refuse "
                            f"{what} in pipelined mode (after launch)",
                            f"set `{path}: false`, or collocate actor and rollout",
                            related=["cluster.component_placement"])


@rules.rule("rlinf/fsdp-config", "RLC302",
            "An FSDP actor needs `actor.fsdp_config` with a `mixed_precision` section; `backward_prefetch` is null, "
            "pre or post; `amp_autocast.precision` is fp16, bf16 or fp32; and torch autocast is not combined with "
            "FSDP mixed precision (RLinf refuses the pair at load).",
            keys=["actor.training_backend", "actor.fsdp_config"], also=("RLC202", "RLC301"))
def fsdp_config(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if cfg.actor.training_backend != "fsdp" or ctx.release == "2025-08":
        return  # RLinf 2025-08 does not validate FSDP settings at all
    if cfg.runner.task_type in ("embodied_eval", "reasoning_eval"):
        return  # evaluation jobs return from validate_cfg before the training backend is checked
    fsdp = cfg.actor.fsdp_config
    if ctx.release == "2025-10":
        # 2025-10 fills every FSDP default itself and checks backward_prefetch only
        if fsdp is not None and fsdp.backward_prefetch not in (None, "pre", "post"):
            yield ctx.error("RLC202", "actor.fsdp_config.backward_prefetch",
                            f"`actor.fsdp_config.backward_prefetch`: {fsdp.backward_prefetch!r} is not one of null, "
                            f"pre, post", "use null, pre or post")
        return
    if fsdp is None or fsdp.mixed_precision is None:
        yield ctx.error("RLC302", "actor.fsdp_config" if fsdp is not None else "actor.training_backend",
                        "`actor.training_backend` is fsdp, which needs `actor.fsdp_config.mixed_precision`",
                        "add `fsdp_config: {mixed_precision: {param_dtype: bf16, reduce_dtype: fp32, "
                        "buffer_dtype: fp32}}` under `actor`")
        return
    if fsdp.backward_prefetch not in (None, "pre", "post"):
        yield ctx.error("RLC202", "actor.fsdp_config.backward_prefetch",
                        f"`actor.fsdp_config.backward_prefetch`: {fsdp.backward_prefetch!r} is not one of null, pre, "
                        f"post", "use null, pre or post")
    amp = fsdp.amp_autocast
    if amp is None or ctx.release not in (None, *TAGGED):
        return  # autocast settings came with the 2025-12 FSDP rework; older releases never read them
    if amp.precision not in ("fp16", "bf16", "fp32"):
        yield ctx.error("RLC202", "actor.fsdp_config.amp_autocast.precision",
                        f"`actor.fsdp_config.amp_autocast.precision`: {amp.precision!r} is not one of fp16, "
                        f"bf16, fp32", "use fp16, bf16 or fp32")
    mixed = fsdp.mixed_precision
    dtypes = (mixed.param_dtype, mixed.reduce_dtype, mixed.buffer_dtype)
    mixed_on = not (all(d is None for d in dtypes) or all(d == "fp32" for d in dtypes))
    if amp.enabled and mixed_on:
        shown = ", ".join(f"{k}: {v}" for k, v in zip(("param_dtype", "reduce_dtype", "buffer_dtype"), dtypes))
        yield ctx.error("RLC301", "actor.fsdp_config.amp_autocast.enabled",
                        f"`actor.fsdp_config.amp_autocast.enabled` is true while FSDP mixed precision is on "
                        f"(`actor.fsdp_config.mixed_precision` {shown}); RLinf refuses autocast together with FSDP "
                        f"mixed precision", "turn `amp_autocast.enabled` off, or set the three mixed_precision "
                                            "dtypes to fp32 (or null) to use autocast instead",
                        related=["actor.fsdp_config.mixed_precision"])


@rules.rule("rlinf/critic-backend", "RLC302",
            "A critic (`critic.use_critic_model`) needs `critic.training_backend`.",
            keys=["critic.use_critic_model", "critic.training_backend"])
def critic_backend(cfg: RLinfConfig, ctx: RuleContext) -> Iterator[Finding]:
    if cfg.critic.use_critic_model and cfg.critic.training_backend is None:
        yield ctx.error("RLC302", "critic.training_backend",
                        "`critic.use_critic_model` is true but `critic.training_backend` is not set",
                        f"add `training_backend: {cfg.actor.training_backend}` under `critic`",
                        related=["critic.use_critic_model"])


# The robot hardware whose config RLinf checks at load (rlinf/scheduler/hardware/robots): the keys that must hold an
# IP address when set (RLinf may fill an unset one from the environment later).
_ROBOT_IP_KEYS = {"Franka": ("robot_ip",), "DualFranka": ("left_robot_ip", "right_robot_ip")}


@rules.rule("rlinf/robot-ip", "RLC201",
            "A Franka or DualFranka robot under `cluster.node_groups[*].hardware` names its robot by IP address: "
            "RLinf refuses anything else when it builds the cluster, whatever the pipeline (data collection too).",
            keys=["cluster.node_groups"], on_document=True)
def robot_ip(document: dict, ctx: RuleContext) -> Iterator[Finding]:
    import ipaddress

    cluster = document.get("cluster")
    groups = cluster.get("node_groups") if isinstance(cluster, dict) else None
    if ctx.release in ("2025-08", "2025-10") or not isinstance(groups, list):
        return  # real-robot hardware arrived after these releases
    for g, group in enumerate(groups):
        hardware = group.get("hardware") if isinstance(group, dict) else None
        if not isinstance(hardware, dict) or hardware.get("type") not in _ROBOT_IP_KEYS:
            continue
        configs = hardware.get("configs")
        for c, config in enumerate(configs if isinstance(configs, list) else []):
            for key in _ROBOT_IP_KEYS[hardware["type"]]:
                value = config.get(key) if isinstance(config, dict) else None
                if value is None:
                    continue
                try:
                    ipaddress.ip_address(str(value))
                except ValueError:
                    yield ctx.error("RLC201", f"cluster.node_groups.{g}.hardware.configs.{c}.{key}",
                                    f"`{key}` of the {hardware['type']} robot is {value!r}, not an IP address; "
                                    "RLinf's loader refuses it",
                                    "write the robot's address, such as 192.168.1.10, or leave the key out to have "
                                    "RLinf read it from the environment")
