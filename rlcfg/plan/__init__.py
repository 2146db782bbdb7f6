"""The plan: an Experiment and the facts about the machines in, an ExecutionPlan and its diagnostics out.

`build_plan` is a pure function. The cluster comes from the config (Experiment.cluster) or from the caller's
flags; a model's config.json is read by the CLI and passed in as a dict. Nothing here reads files, the
environment or devices, and nothing imports torch or ray.

Placement: roles that name exact GPU ids get them; each colocation group gets one set of GPUs that all its
roles share; every other role is packed onto the next free GPUs, starting on a fresh node when it spans nodes
or would otherwise straddle two. GPU ids are global: node × gpus_per_node + local index.
"""

from __future__ import annotations

from typing import Any, Mapping

from rlcfg.diagnostics import Diagnostic, Severity, diagnostic
from rlcfg.ir import Experiment, Role
from rlcfg.plan.model import (BatchPlan, ClusterShape, ExecutionPlan, PlacementGroup, RankSlot, RolePlacement)

DEFAULT_GPUS_PER_NODE = 8
ROLLOUT_BACKENDS = ("vllm", "sglang", "hf")

__all__ = ["build_plan", "ClusterShape", "ExecutionPlan", "DEFAULT_GPUS_PER_NODE"]


def _path(role: str) -> str:
    return f"roles.{role}"


def ranges(ids: list[int] | tuple[int, ...]) -> str:
    from rlcfg.plan.render import ranges as _ranges

    return _ranges(ids)


def _plural(n: int, word: str) -> str:
    from rlcfg.plan.render import plural

    return plural(n, word)


def _gpus_text(ids: list[int] | tuple[int, ...]) -> str:
    """`GPU 3` or `GPUs 0-3`."""
    from rlcfg.plan.render import gpus_word

    return f"{gpus_word(ids)} {ranges(ids)}"


# ---- placement -----------------------------------------------------------------------------------------------

class _Allocator:
    """Hands out free GPU ids in order; `capacity` is None while the cluster size is still to be inferred."""

    def __init__(self, gpus_per_node: int, capacity: int | None):
        self.gpn = gpus_per_node
        self.capacity = capacity
        self.used: set[int] = set()
        self.cursor = 0

    def claim(self, ids: list[int]) -> None:
        self.used.update(ids)

    def _take_from(self, start: int, n: int) -> list[int]:
        out, g = [], start
        while len(out) < n:
            if g not in self.used:
                out.append(g)
            g += 1
        return out

    def allocate(self, n: int, per_node: int | None = None) -> list[int]:
        gpn = self.gpn
        while self.cursor in self.used:
            self.cursor += 1
        if per_node and per_node < gpn:
            # The dialect pinned GPUs per node: take that many on each node in turn.
            out: list[int] = []
            node = self.cursor // gpn
            while len(out) < n:
                want = min(per_node, n - len(out))
                free = [g for g in range(node * gpn, (node + 1) * gpn) if g not in self.used and g >= self.cursor]
                if len(free) >= want:
                    out.extend(free[:want])
                node += 1
        else:
            start = self.cursor
            aligned = -(-start // gpn) * gpn
            if n > gpn:
                start = aligned  # a role spanning nodes gets whole nodes from a node boundary
            elif start % gpn + n > gpn and (self.capacity is None or aligned + n <= self.capacity):
                start = aligned  # keep a role that fits on one node on one node
            out = self._take_from(start, n)
        self.used.update(out)  # the cursor stays on the lowest free GPU, so later roles fill the holes
        return out


def _units(exp: Experiment) -> list[tuple[str, ...]]:
    """Colocation groups, then every other role alone; each in the order the roles are declared."""
    order = {r.name: i for i, r in enumerate(exp.roles)}
    seen: set[str] = set()
    units: list[tuple[str, ...]] = []
    for group in exp.colocation:
        members = tuple(sorted((r for r in dict.fromkeys(group) if r in order and r not in seen), key=order.get))
        if members:
            units.append(members)
            seen.update(members)
    for r in exp.roles:
        if r.name not in seen:
            units.append((r.name,))
            seen.add(r.name)
    return sorted(units, key=lambda u: order[u[0]])


def _place(exp: Experiment, gpn: int, capacity: int | None
           ) -> tuple[list[PlacementGroup], dict[str, tuple[int, ...]], list[Diagnostic]]:
    roles = {r.name: r for r in exp.roles}
    units = _units(exp)
    alloc = _Allocator(gpn, capacity)
    diags: list[Diagnostic] = []
    role_gpus: dict[str, tuple[int, ...]] = {}
    unit_gpus: dict[int, list[int]] = {}
    owner: dict[int, int] = {}  # GPU → unit, for explicit ids (the only way two units can meet)

    def gpu_members(unit: tuple[str, ...]) -> list[Role]:
        return [roles[n] for n in unit if roles[n].resources.gpus > 0 or roles[n].resources.gpu_ids]

    # Explicit ids first, so that packing the others steps around them.
    explicit_units = [i for i, u in enumerate(units) if any(r.resources.gpu_ids for r in gpu_members(u))]
    for i in explicit_units:
        ids: list[int] = []
        for r in gpu_members(units[i]):
            for g in r.resources.gpu_ids or ():
                if g not in ids:
                    ids.append(g)
        ids.sort()
        clashes: dict[int, list[int]] = {}
        for g in ids:
            if g in owner and owner[g] != i:
                clashes.setdefault(owner[g], []).append(g)
            owner.setdefault(g, i)
        for other, shared in clashes.items():
            a = gpu_members(units[other])[0].name
            b = gpu_members(units[i])[0].name
            a_ids = sorted(set(unit_gpus[other]))
            diags.append(diagnostic(
                "RLC401", _path(b),
                f"{'+'.join(units[other])} ({_gpus_text(a_ids)}) and {'+'.join(units[i])} ({_gpus_text(ids)}) "
                f"share {_gpus_text(shared)} without being colocated",
                hint=f"give them disjoint GPUs, or colocate {a} and {b} so that they take turns on the same GPUs",
                related=[(_path(a), None)]))
        alloc.claim(ids)
        unit_gpus[i] = ids

    for i, unit in enumerate(units):
        members = gpu_members(unit)
        if not members:
            unit_gpus.setdefault(i, [])
            continue
        need = max(r.resources.gpus if not r.resources.gpu_ids else len(r.resources.gpu_ids) for r in members)
        if i in unit_gpus:
            gpus = unit_gpus[i]
            if len(gpus) < need:
                gpus = gpus + alloc.allocate(need - len(gpus))
                unit_gpus[i] = gpus
        else:
            per_node = next((r.resources.gpus_per_node for r in members if r.resources.gpus_per_node), None)
            gpus = alloc.allocate(need, per_node)
            unit_gpus[i] = gpus
        for r in members:
            role_gpus[r.name] = tuple(r.resources.gpu_ids) if r.resources.gpu_ids else tuple(gpus[:r.resources.gpus])
        if len(members) > 1:
            sizes = {r.name: len(role_gpus[r.name]) for r in members}
            if len(set(sizes.values())) > 1:
                desc = ", ".join(f"{n} {s}" for n, s in sizes.items())
                biggest = max(sizes.values())
                diags.append(diagnostic(
                    "RLC402", _path(members[0].name),
                    f"colocated roles {', '.join(sizes)} ask for different numbers of GPUs ({desc})",
                    hint=f"colocated roles take turns on the same GPUs: give each of them {biggest} GPUs, or stop "
                         "colocating the smaller one",
                    related=[(_path(n), None) for n in list(sizes)[1:]]))
            elif any(r.resources.gpu_ids for r in members) and len({role_gpus[r.name] for r in members}) > 1:
                desc = "; ".join(f"{r.name} {_gpus_text(role_gpus[r.name])}" for r in members)
                diags.append(diagnostic(
                    "RLC402", _path(members[0].name),
                    f"colocated roles sit on different GPUs ({desc})",
                    hint="colocated roles must share exactly the same GPUs; give them the same GPU ids",
                    related=[(_path(r.name), None) for r in members[1:]]))

    for r in exp.roles:
        role_gpus.setdefault(r.name, ())
    groups = [PlacementGroup(index=i, roles=unit, gpus=tuple(unit_gpus.get(i, ()))) for i, unit in enumerate(units)]
    return groups, role_gpus, diags


# ---- rank grids ----------------------------------------------------------------------------------------------

def _pairs(name: str, n: int) -> list[tuple[str, int]]:
    # One ("tp", i) tuple per value, shared by every rank that has it: at thousands of ranks, allocation is the cost.
    return [(name, i) for i in range(max(n, 1))]


def _ranks(role: Role, gpus: tuple[int, ...]) -> tuple[tuple[RankSlot, ...], int]:
    world = len(gpus)
    par = role.parallelism
    if world == 0:
        return (), 0
    if role.backend in ROLLOUT_BACKENDS:
        tp, pp = max(par.tp, 1), max(par.pp, 1)
        per_engine = tp * pp
        engines = max(world // per_engine, 1)
        engine_p, tp_p, pp_p = _pairs("engine", -(-world // per_engine)), _pairs("tp", tp), _pairs("pp", pp)
        if pp > 1:
            slots = [RankSlot(r, g, (engine_p[r // per_engine], tp_p[r % tp], pp_p[(r // tp) % pp]))
                     for r, g in enumerate(gpus)]
        else:
            slots = [RankSlot(r, g, (engine_p[r // per_engine], tp_p[r % tp])) for r, g in enumerate(gpus)]
        return tuple(slots), engines
    if role.backend == "megatron":
        # Megatron-core's default order tp-cp-ep-dp-pp: tp varies fastest, pp slowest. Expert layers regroup
        # the same ranks as etp × ep × edp inside each pipeline stage.
        tp, cp, pp, ep = max(par.tp, 1), max(par.cp, 1), max(par.pp, 1), max(par.ep, 1)
        dp = max(world // (tp * cp * pp), 1)
        etp = par.etp or tp
        stage = tp * cp * dp
        tp_p, cp_p, ep_p = _pairs("tp", tp), _pairs("cp", cp), _pairs("ep", ep)
        dp_p, pp_p = _pairs("dp", dp), _pairs("pp", -(-world // stage))
        slots = []
        for r, g in enumerate(gpus):
            if ep > 1:
                coords = (tp_p[r % tp], cp_p[(r // tp) % cp], ep_p[((r % stage) // etp) % ep],
                          dp_p[(r // (tp * cp)) % dp], pp_p[r // stage])
            else:
                coords = (tp_p[r % tp], cp_p[(r // tp) % cp], dp_p[(r // (tp * cp)) % dp], pp_p[r // stage])
            slots.append(RankSlot(r, g, coords))
        return tuple(slots), dp
    # FSDP / DeepSpeed, as a (dp, sp, tp) device mesh with tp varying fastest: a tensor-parallel group (AReaL 1.0's
    # FSDP engine takes t > 1) and a Ulysses group of sp such groups all see the same data, so DP = GPUs / (tp × sp).
    # HSDP shards over groups of fsdp_shard consecutive ranks and replicates across them.
    sp, tp = max(par.sp, 1), max(par.tp, 1)
    model = sp * tp
    shard = par.fsdp_shard or world
    dp = max(world // model, 1)
    dp_p, sp_p, tp_p = _pairs("dp", -(-world // model)), _pairs("sp", sp), _pairs("tp", tp)
    rep_p, shard_p = _pairs("replica", -(-world // shard)), _pairs("shard", shard)
    slots = []
    for r, g in enumerate(gpus):
        coords: tuple[tuple[str, int], ...] = (dp_p[r // model],)
        if sp > 1:
            coords += (sp_p[(r // tp) % sp],)
        if tp > 1:
            coords += (tp_p[r % tp],)
        if shard < world:
            coords += (rep_p[r // shard], shard_p[r % shard])
        slots.append(RankSlot(r, g, coords))
    return tuple(slots), dp


def _divisibility(role: Role, world: int) -> list[Diagnostic]:
    par, path, out = role.parallelism, _path(role.name), []
    if world == 0:
        return out

    def bad(what: str, size: int, hint: str) -> None:
        out.append(diagnostic("RLC400", path,
                              f"{role.name} has {_plural(world, 'GPU')}, not a multiple of {what} ({size})", hint=hint))

    def near(size: int) -> str:
        lo = world // size * size
        return ", ".join(str(v) for v in (lo, lo + size) if v > 0)

    if role.backend in ROLLOUT_BACKENDS:
        size = par.tp * par.pp
        if world % size:
            bad("the engine size TP × PP" if par.pp > 1 else "the engine's tensor parallel size", size,
                f"each engine takes {size} GPUs: give the rollout {near(size)} GPUs")
    elif role.backend == "megatron":
        size = par.tp * par.cp * par.pp
        if world % size:
            bad("TP × CP × PP", size, f"Megatron needs the GPU count to be a multiple of {size}: use {near(size)}")
        elif par.ep > 1:
            etp = par.etp or par.tp
            stage = world // par.pp
            if stage % (etp * par.ep):
                out.append(diagnostic(
                    "RLC400", path, f"{role.name}'s {stage} GPUs per pipeline stage are not a multiple of "
                    f"expert TP × EP ({etp} × {par.ep})", hint="choose an expert parallel size that divides "
                    f"{stage // etp}"))
    elif role.backend != "rule":
        if par.tp > 1 and world % (par.tp * par.sp):
            size = par.tp * par.sp
            bad("TP × SP" if par.sp > 1 else "the tensor parallel size", size,
                f"each data-parallel rank takes {size} GPUs: use {near(size)}")
        elif world % max(par.sp, 1):
            bad("the sequence parallel size", par.sp, f"Ulysses groups take {par.sp} GPUs each: use {near(par.sp)}")
        if par.fsdp_shard and world % par.fsdp_shard:
            bad("the FSDP shard group size", par.fsdp_shard,
                f"HSDP replicates groups of {par.fsdp_shard} GPUs: use {near(par.fsdp_shard)} GPUs")
        elif par.fsdp_shard and par.sp > 1 and par.fsdp_shard % par.sp:
            out.append(diagnostic("RLC400", path, f"{role.name}'s FSDP shard group ({par.fsdp_shard}) is not a "
                                  f"multiple of its sequence parallel size ({par.sp})",
                                  hint="a Ulysses group must sit inside one shard group"))
    return out


# ---- batch schedule ------------------------------------------------------------------------------------------

def trained_role(exp: Experiment) -> Role | None:
    """The role whose data-parallel ranks split a step's batch: the policy, or the critic when it is the only model
    trained (reward-model training)."""
    return exp.role("actor") or exp.role("critic")


def _batch(exp: Experiment, placements: dict[str, RolePlacement]) -> tuple[BatchPlan, list[Diagnostic]]:
    s, alg = exp.schedule, exp.algorithm
    trainer = trained_role(exp)
    name = trainer.name if trainer is not None else None
    dp = max(placements[name].dp, 1) if name in placements else 1
    path = _path(name) if name else "schedule"
    diags: list[Diagnostic] = []
    per_opt = s.samples_per_optimizer_step
    opt_steps = s.samples_per_step // per_opt if per_opt else 0
    if per_opt and s.samples_per_step % per_opt:
        diags.append(diagnostic("RLC300", "schedule.samples_per_step",
                                f"a step's {s.samples_per_step} samples do not split into optimizer steps of {per_opt}",
                                hint=f"make the samples per step a multiple of {per_opt}"))
    per_rank = per_opt // dp
    micro = (trainer.micro_batch_size if trainer and trainer.micro_batch_size else per_rank) or 1
    packed = bool(trainer and trainer.sequence_packing)
    if per_opt % dp:
        diags.append(diagnostic("RLC300", path,
                                f"an optimizer step's {per_opt} samples do not split evenly over the {name}'s "
                                f"{dp} data-parallel ranks",
                                hint=f"use a global batch that is a multiple of {dp}, or change the {name}'s "
                                     "GPU count or parallel sizes"))
    elif per_rank and per_rank % micro and not packed:
        diags.append(diagnostic("RLC300", path,
                                f"each {name} rank's {per_rank} samples per optimizer step are not a multiple of the "
                                f"micro-batch ({micro})",
                                hint=f"choose a micro-batch that divides {per_rank}"))
    return BatchPlan(
        prompts_per_step=s.prompts_per_step, group_size=alg.group_size, samples_per_step=s.samples_per_step,
        samples_per_optimizer_step=per_opt, optimizer_steps_per_step=opt_steps * alg.ppo_epochs,
        ppo_epochs=alg.ppo_epochs, trained_role=name, dp=dp, samples_per_rank=per_rank, micro_batch_size=micro,
        grad_accumulation=max(per_rank // micro, 1) if per_rank else 0, total_steps=s.total_steps), diags


# ---- the cluster ---------------------------------------------------------------------------------------------

def _idle(cluster: ClusterShape, used: set[int]) -> list[Diagnostic]:
    gpn = cluster.gpus_per_node
    whole: list[int] = []
    partial: list[str] = []
    for node in range(cluster.nodes):
        base = node * gpn
        idle = [g for g in range(base, base + gpn) if g not in used]
        if len(idle) == gpn:
            whole.append(node)
        elif idle:
            partial.append(f"{_gpus_text([g - base for g in idle])} of node {node}")
    if not whole and not partial:
        return []
    parts = ([f"node{'s' if len(whole) > 1 else ''} {ranges(whole)} (all GPUs)"] if whole else []) + partial
    if len(parts) > 4:
        parts = parts[:4] + [f"and {len(parts) - 4} more"]
    count = cluster.gpus - len(used & set(range(cluster.gpus)))
    return [diagnostic("RLC404", "cluster",
                       f"{count} of the cluster's {_plural(cluster.gpus, 'GPU')} {'is' if count == 1 else 'are'} "
                       f"assigned to no role: {'; '.join(parts)}",
                       hint="give the idle GPUs to a role (more rollout engines or data-parallel ranks), or ask "
                            "for a smaller cluster with --nodes/--gpus-per-node")]


def build_plan(experiment: Experiment, cluster: ClusterShape | None = None, gpu: str | None = None,
               model_config: Mapping[str, Any] | None = None, *, nodes: int | None = None,
               gpus_per_node: int | None = None, model_configs: Mapping[str, Mapping[str, Any]] | None = None,
               model_source: str | None = None) -> tuple[ExecutionPlan, list[Diagnostic]]:
    """Place an Experiment's roles, lay out their ranks, split its batch and estimate its memory.

    `cluster` (a whole shape) or `nodes`/`gpus_per_node` (single flags) override what the config says; where
    neither says, the smallest cluster that holds the roles is assumed (8 GPUs per node), and the plan notes it.
    `gpu` names the GPU kind (h100, h200, a100-80g, ... or a size like 96GB). `model_config` is the policy
    model's config.json as a dict (from --model-config); `model_configs` maps other model paths to theirs.
    Raises ValueError for an unknown GPU name.
    """
    from rlcfg.plan.memory import DEFAULT_GPU, estimate, gpu_capacity, resolve_architectures

    exp = experiment
    diags: list[Diagnostic] = []
    notes: list[str] = []

    gpn = (cluster.gpus_per_node if cluster else None) or gpus_per_node or exp.cluster.gpus_per_node
    if gpn is None:
        pinned = [r.resources.gpus_per_node for r in exp.roles if r.resources.gpus_per_node]
        gpn = max(pinned) if pinned else DEFAULT_GPUS_PER_NODE
        if not pinned:
            notes.append(f"the config does not say how many GPUs a node has: assuming {gpn} "
                         "(set it with --gpus-per-node)")
    node_count = (cluster.nodes if cluster else None) or nodes or exp.cluster.nodes
    cluster_given = node_count is not None

    groups, role_gpus, placement_diags = _place(exp, gpn, node_count * gpn if node_count else None)
    diags.extend(placement_diags)
    used = {g for gpus in role_gpus.values() for g in gpus}
    if node_count is None:
        node_count = max(1, -(-(max(used) + 1) // gpn)) if used else 1
        notes.append(f"the config does not say how many nodes: assuming the smallest cluster that holds the roles, "
                     f"{_plural(node_count, 'node')} × {_plural(gpn, 'GPU')} (set it with --nodes)")

    gpu_label, capacity = None, None
    if gpu is not None:
        gpu_label, capacity = gpu_capacity(gpu)
    elif cluster is not None and cluster.gpu_memory_bytes:
        gpu_label, capacity = cluster.gpu_name, cluster.gpu_memory_bytes
    elif cluster is not None and cluster.gpu_name:
        gpu_label, capacity = gpu_capacity(cluster.gpu_name)
    else:
        gpu_label, capacity = gpu_capacity(DEFAULT_GPU)
        notes.append(f"the config does not say which GPU: assuming {gpu_label} for the memory estimate "
                     "(set it with --gpu)")
    shape = ClusterShape(nodes=node_count, gpus_per_node=gpn, gpu_name=gpu_label, gpu_memory_bytes=capacity)
    notes += [f"`{name}`, which the config places, runs no role of its own and is not in the GPU map: {why}"
              for name, why in getattr(exp, "idle_components", ())]

    group_of = {r: g.index for g in groups for r in g.roles}
    placements: dict[str, RolePlacement] = {}
    total_gpus = shape.gpus
    for role in exp.roles:
        gpus = role_gpus[role.name]
        ranks, dp = _ranks(role, gpus) if role.backend != "rule" else ((), 0)
        placements[role.name] = RolePlacement(role=role.name, group=group_of[role.name], gpus=gpus, ranks=ranks,
                                              dp=dp, cpus=role.resources.cpus)
        diags.extend(_divisibility(role, len(gpus)))
        beyond = gpus and max(gpus) >= total_gpus
        if beyond:
            diags.append(diagnostic(
                "RLC403", _path(role.name),
                f"{role.name} is placed on {_gpus_text(gpus)} but the cluster has {_plural(shape.gpus, 'GPU')} "
                f"({_plural(shape.nodes, 'node')} × {gpn})",
                hint=f"the roles need at least {_plural(-(-(max(used) + 1) // gpn), 'node')} of "
                     f"{_plural(gpn, 'GPU')}: raise --nodes, or give {role.name} fewer GPUs"))
    if cluster_given:  # idle GPUs of a cluster nobody described are an artefact of the assumption, not a problem
        diags.extend(_idle(shape, used))

    batch, batch_diags = _batch(exp, placements)
    diags.extend(batch_diags)

    archs, arch_problems = resolve_architectures(exp, model_config, model_source, model_configs)
    for code, role, message, hint in arch_problems:
        diags.append(diagnostic(code, _path(role), message, hint=hint, severity=Severity.WARNING))
    memory = None
    if archs:
        sources = sorted({f"{a.name} ({a.source})" for a in archs.values()})
        memory, problems = estimate(exp, placements.values(), archs, capacity, gpu_label, "; ".join(sources))
        for code, role, message, hint in problems:
            diags.append(diagnostic(code, _path(role), message, hint=hint or None))
        special = sorted({a.name for a in archs.values() if a.experts or a.kv_lora_rank is not None})
        if special:
            diags.append(diagnostic(
                "RLC501", "memory",
                f"the memory estimate for {', '.join(special)} is rougher than for dense models: expert weights are "
                "counted in full per expert-parallel shard, but activations, and MLA's compressed KV cache, are "
                "approximations", hint="compare with the framework's own memory report on the first steps"))
        if any(a.source == "built-in table" for a in archs.values()):
            diags.append(diagnostic(
                "RLC501", "memory",
                "the memory estimate uses rlcfg's built-in figures for "
                + ", ".join(sorted({a.name for a in archs.values() if a.source == 'built-in table'}))
                + " (the model path is not a local directory with a config.json)",
                hint="pass --model-config with the model's config.json for its exact figures"))

    plan = ExecutionPlan(experiment=exp, cluster=shape, groups=tuple(groups),
                         placements=tuple(placements[r.name] for r in exp.roles), batch=batch, memory=memory,
                         notes=tuple(notes))
    return plan, _ordered(diags)


def _ordered(diags: list[Diagnostic]) -> list[Diagnostic]:
    rank = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.NOTE: 2}
    return sorted(diags, key=lambda d: (rank[d.severity], d.code, d.path))
