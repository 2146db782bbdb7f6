"""What every emitter reads off an Experiment: a role's settings, its GPUs split into nodes, the groups that share
GPUs, and small helpers for building nested configs."""

from __future__ import annotations

from typing import Any

from rlcfg.ir import Experiment, Parallelism, Role
from rlcfg.schema import REGISTRY

# The dialects rlcfg converts into, and how a converted file's header names them.
DIALECTS = tuple(e.name for e in REGISTRY)
TITLES = {e.name: e.title for e in REGISTRY}


def engine(experiment: Experiment) -> dict[str, Any]:
    rollout = experiment.role("rollout")
    return rollout.engine_args() if rollout is not None else {}


def shares(experiment: Experiment, *names: str) -> bool:
    """Whether all the named roles sit in one colocation group."""
    return any(set(names) <= set(group) for group in experiment.colocation)


def nodes_of(experiment: Experiment, r: Role) -> tuple[int, int]:
    """(nodes, GPUs per node) for a role, from what the source pinned or the cluster's node size."""
    res = r.resources
    if res.nodes and res.gpus_per_node:
        return res.nodes, res.gpus_per_node
    per_node = experiment.cluster.gpus_per_node
    if res.nodes:
        return res.nodes, max(res.gpus // res.nodes, 1)
    if per_node and res.gpus > per_node and res.gpus % per_node == 0:
        return res.gpus // per_node, per_node
    return 1, max(res.gpus, 1)


def put(tree: dict, dotted: str, value: Any) -> None:
    """Set a dotted key in a nested mapping, creating the mappings on the way."""
    parts = dotted.split(".")
    node = tree
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def per_engine_gpus(r: Role) -> int:
    return max(r.parallelism.tp * r.parallelism.pp, 1)


def engines(r: Role) -> int:
    count = r.engine_args().get("engines")
    return int(count) if count else max(r.resources.gpus // per_engine_gpus(r), 1)


def gpu_ids(experiment: Experiment, r: Role) -> tuple[int, ...]:
    """The global GPU ids a role holds: the source's own ids when it named them, otherwise laid out in the order
    the roles come, colocated roles on the same ids."""
    if r.resources.gpu_ids:
        return tuple(r.resources.gpu_ids)
    return layout(experiment).get(r.name, ())


def layout(experiment: Experiment) -> dict[str, tuple[int, ...]]:
    placed: dict[str, tuple[int, ...]] = {}
    cursor = 0
    order = ["actor", "reference", "critic", "rollout", "reward"]
    roles = sorted((r for r in experiment.roles if r.resources.gpus > 0), key=lambda r: order.index(r.name))
    for r in roles:
        if r.resources.gpu_ids:
            placed[r.name] = tuple(r.resources.gpu_ids)
            continue
        partner = next((p for p in placed if shares(experiment, p, r.name)), None)
        if partner is not None and len(placed[partner]) >= r.resources.gpus:
            placed[r.name] = placed[partner][:r.resources.gpus]
            continue
        placed[r.name] = tuple(range(cursor, cursor + r.resources.gpus))
        cursor += r.resources.gpus
    return placed


def step_count(value: float) -> int:
    """A step count for a target that counts whole optimizer steps. Megatron-based sources can carry a fractional
    warm-up (a fraction of the decay length); the nearest whole step is written, and the re-lowered Experiment then
    differs, so the comparison lists it as a loss rather than hiding it."""
    return int(round(value))


def megatron_sizes(p: Parallelism) -> dict[str, Any]:
    """A role's parallel layout under megatron-core's own key names, which ChatLearn and RLinf write as they are."""
    sizes: dict[str, Any] = {"tensor_model_parallel_size": p.tp, "pipeline_model_parallel_size": p.pp,
                             "context_parallel_size": p.cp, "expert_model_parallel_size": p.ep,
                             "sequence_parallel": p.sequence_parallel}
    if p.etp is not None:
        sizes["expert_tensor_parallel_size"] = p.etp
    if p.vpp is not None:
        sizes["virtual_pipeline_model_parallel_size"] = p.vpp
    return sizes
