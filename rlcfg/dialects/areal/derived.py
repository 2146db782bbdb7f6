"""What AReaL computes from a config (each engine's backend and parallel layout, read from `allocation_mode` or a
1.0 `backend` string; which engines train; where they are placed) and the names rlcfg reads them by: read by the
rules, the lowering and the dialect alike, declared here once. Each function is a plain computation on the
validated models; nothing here reports or lowers anything.
"""

from __future__ import annotations

from typing import Any

from rlcfg.dialects.areal import allocation as alloc
from rlcfg.records import record

_BACKEND_TITLES = {"fsdp": "FSDP", "megatron": "Megatron", "archon": "Archon", "sglang": "SGLang", "vllm": "vLLM"}


def pipeline_kind(cfg: Any) -> str:
    return {"GRPOConfig": "grpo", "RWConfig": "rw"}.get(type(cfg).__name__, "sft")


def training_engines(cfg: Any) -> list[tuple[str, Any]]:
    """The training engines a config has, with their dotted names."""
    if pipeline_kind(cfg) == "grpo":
        out = [("actor", cfg.actor)]
        out += [(name, getattr(cfg, name)) for name in ("ref", "critic") if getattr(cfg, name) is not None]
        return out
    return [(name, getattr(cfg, name)) for name in ("model", "actor") if getattr(cfg, name, None) is not None]


def trained_engine(cfg: Any) -> tuple[str, Any] | None:
    """The engine being trained: GRPO's actor, SFT's/RW's model (v0.3) or actor (1.0)."""
    if pipeline_kind(cfg) == "grpo":
        return "actor", cfg.actor
    for name in ("actor", "model"):
        engine = getattr(cfg, name, None)
        if engine is not None:
            return name, engine
    return None


def legacy_backend_name(text: str) -> bool:
    """A bare backend name such as `fsdp`: what v0.3's `backend` field ("Training backend") held, no sizes."""
    return text.strip().lower() in alloc.TRAIN_BACKENDS + alloc.INFERENCE_BACKENDS


def backend_paths(cfg: Any) -> list[tuple[str, str, str]]:
    """(dotted path, text, role kind) of every per-engine backend field written in the 1.0 form."""
    out = [(f"{name}.backend", engine.backend, "train") for name, engine in training_engines(cfg)
           if engine.backend and not legacy_backend_name(engine.backend)]
    if pipeline_kind(cfg) == "grpo" and cfg.rollout.backend and not legacy_backend_name(cfg.rollout.backend):
        out.append(("rollout.backend", cfg.rollout.backend, "inference"))
    return out


def parsed_allocation(cfg: Any) -> alloc.Allocation | None:
    try:
        return alloc.parse(cfg.allocation_mode) if cfg.allocation_mode else None
    except alloc.AllocationSyntaxError:
        return None


def parsed_backend(text: str) -> alloc.Component | None:
    try:
        return alloc.parse_backend(text)
    except alloc.AllocationSyntaxError:
        return None


@record
class _Placement:
    source: str  # "allocation_mode" or "backends"
    world: int
    rollout: alloc.Component | None
    train: alloc.Component | None
    inference_parts: list
    # (dotted backend key, its text, its GPUs) for each engine that takes GPUs of its own (1.0's backends)
    shares: tuple = ()


def placement(cfg: Any) -> _Placement | None:
    """The GPUs the config asks for, from the 1.0 backends when set, else from allocation_mode."""
    backends = backend_paths(cfg)
    if backends:
        parsed = {path: parsed_backend(text) for path, text, _ in backends}
        texts = {path: text for path, text, _ in backends}
        if any(c is None for c in parsed.values()):
            return None
        world = 0
        shares = []
        for path, component in parsed.items():
            owner = path.rsplit(".", 1)[0]
            if owner == "ref" and pipeline_kind(cfg) == "grpo" and cfg.actor.kl_ctl == 0:
                continue  # AReaL builds the reference model only when actor.kl_ctl > 0
            strategy = _strategy(cfg, owner)
            if strategy is not None and strategy.type == "colocation" and strategy.target:
                continue
            world += component.world
            shares.append((path, texts[path], component.world))
        rollout = parsed.get("rollout.backend")
        trained = trained_engine(cfg)
        train = parsed.get(f"{trained[0]}.backend") if trained else None
        return _Placement("backends", world, rollout, train, [rollout] if rollout else [], tuple(shares))
    parsed_alloc = parsed_allocation(cfg)
    if parsed_alloc is None or parsed_alloc.keyword:
        return None
    inference = parsed_alloc.of_kind("inference")
    train = parsed_alloc.of_kind("train")
    return _Placement("allocation_mode", parsed_alloc.world, inference[0] if inference else None,
                      train[0] if train else None, inference)


def _strategy(cfg: Any, owner: str) -> Any:
    engine = getattr(cfg, owner, None)
    return getattr(engine, "scheduling_strategy", None)


ROLE_OF_NAME = {"actor": "actor", "ref": "reference", "critic": "critic", "rollout": "rollout"}


def engine_component(text: str) -> alloc.Component | None:
    """A 1.0 backend string as a component; None when empty, a v0.3 bare backend name, or malformed."""
    if not text or legacy_backend_name(text):
        return None
    try:
        return alloc.parse_backend(text)
    except alloc.AllocationSyntaxError:
        return None


def layout(cfg: Any, roles: list[str]) -> tuple[dict[str, alloc.Component | None], list[tuple[str, ...]],
                                                 list[int]]:
    """Each role's component (its backend and parallel sizes), the groups of roles that share GPUs in the order
    AReaL hands GPUs out, and each group's GPU count. `roles` are rlcfg's names of the engines the experiment builds
    (lower.py), the trained one first."""
    engines = {"actor": "actor", "critic": "critic", "reference": "ref", "rollout": "rollout"}
    if pipeline_kind(cfg) != "grpo":
        engines = {roles[0]: "actor" if getattr(cfg, "actor", None) is not None else "model"}
    backends = {role: engine_component(getattr(getattr(cfg, section, None), "backend", "") or "")
                for role, section in engines.items() if role in roles}
    # With a deprecated allocation_mode and no scheduler (1.0's single controller), an SPMD launcher starts the
    # engines: servers first.
    spmd = bool(cfg.allocation_mode) and cfg.scheduler.type is None
    if any(c is not None for c in backends.values()):
        return _layout_backends(cfg, roles, engines, backends, spmd)
    return _layout_allocation(cfg, roles)


def _layout_backends(cfg: Any, roles: list[str], engines: dict[str, str],
                     backends: dict[str, alloc.Component | None], spmd: bool):
    primary = roles[0]  # the trained model: actor, or SFT's/RW's model
    shares: dict[str, str] = {}
    for role in roles:
        if role not in engines or role == primary:
            continue
        strategy = getattr(getattr(cfg, engines[role], None), "scheduling_strategy", None)
        kind, named = (strategy.type, strategy.target) if strategy is not None else ("separation", None)
        target = ROLE_OF_NAME.get(named) if kind == "colocation" and named else None
        if target in roles and target != role:
            shares[role] = target
        elif backends.get(role) is None and role != "rollout":
            # A reference or critic without a backend of its own runs in the trainer's processes.
            shares[role] = primary
    order = ["rollout", "actor", "critic", "reference"] if spmd else ["actor", "critic", "reference", "rollout"]
    order = [r for r in order if r in roles]
    groups: list[list[str]] = []
    for role in order:
        if role in shares:
            continue
        groups.append([role])

    def root(role: str) -> str:
        seen = set()
        while role in shares and role not in seen:
            seen.add(role)
            role = shares[role]
        return role

    for role in order:
        if role in shares:
            home = root(role)
            host = next((g for g in groups if home in g), None)
            if host is None:  # engines colocated only with each other in a cycle: they get GPUs of their own
                host = [home] if home != role else []
                groups.append(host)
            host.append(role)
    components = dict(backends)
    sizes = [max((components[r].world for r in g if components.get(r) is not None), default=0) for g in groups]
    for group in groups:
        # An engine that shares GPUs without naming its own sizes runs with its host's layout.
        host = next((components[r] for r in group if components.get(r) is not None), None)
        for r in group:
            if components.get(r) is None and host is not None and (host.kind == "train") == (r != "rollout"):
                components[r] = host
    return components, [tuple(g) for g in groups], sizes


def _layout_allocation(cfg: Any, roles: list[str]):
    primary = roles[0]
    components: dict[str, alloc.Component | None] = {r: None for r in roles}
    try:
        parsed = alloc.parse(cfg.allocation_mode) if cfg.allocation_mode else None
    except alloc.AllocationSyntaxError:
        parsed = None
    if parsed is None or parsed.keyword:
        # No allocation, or the pre-pattern `manual`/`heuristic` modes: nothing says how many GPUs each engine
        # gets (the validator already warned), so the roles ask for none and the plan places nothing.
        return components, [(r,) for r in roles if r != "reward"], [0] * len([r for r in roles if r != "reward"])
    placed: dict[str, int] = {}
    groups: list[list[str]] = []
    sizes: list[int] = []
    # The launchers start the servers before the trainer, whatever the order written.
    ordered = sorted(parsed.groups, key=lambda g: not any(c.kind == "inference" for c in g))
    for group in ordered:
        members: list[str] = []
        for c in group:
            if c.kind == "eval":
                continue  # `+eval` / `+cpu`: evaluation beside the servers, on no GPU of its own
            if c.kind == "inference":
                role = "rollout"
            else:
                role = ROLE_OF_NAME.get(c.name or "", primary)
                if role == "actor" and primary != "actor":
                    role = primary
            if role not in roles or role in placed:
                continue  # an engine this experiment does not build (or a second server pool): no role for it
            components[role] = c
            placed[role] = len(groups)
            members.append(role)
        if members:
            groups.append(members)
            sizes.append(max(c.world for c in group))
    for role in roles:
        if role in placed or role == "reward":
            continue
        if role in ("reference", "critic") and primary in placed:
            groups[placed[primary]].append(role)  # inside the trainer processes, on the actor's GPUs
            components[role] = components[primary]
        else:
            groups.append([role])
            sizes.append(0)
    return components, [tuple(g) for g in groups], sizes


def engine_roles(cfg: Any) -> list[str]:
    """The engines an experiment builds, in rlcfg's names, the trained one first: GRPO's actor and rollout, the
    reference when actor.kl_ctl > 0 (AReaL builds it only then), the critic when configured; SFT's model (`actor`)
    or the reward model (a `critic`, its scalar head) alone."""
    if pipeline_kind(cfg) == "grpo":
        return (["actor", "rollout"] + (["reference"] if cfg.actor.kl_ctl > 0 and cfg.ref is not None else [])
                + (["critic"] if cfg.critic is not None else []))
    return ["critic" if pipeline_kind(cfg) == "rw" else "actor"]


def backend_key(cfg: Any, role: str, section: str) -> str:
    """The key where a role's backend and parallel sizes are written: the engine's own 1.0 `backend` string, the
    trainer's when it runs in the trainer's processes, or the deprecated allocation_mode."""
    if engine_component(getattr(getattr(cfg, section, None), "backend", "") or "") is not None:
        return f"{section}.backend"
    if role != "rollout" and engine_component(getattr(getattr(cfg, "actor", None), "backend", "") or ""):
        return "actor.backend"
    return "allocation_mode"


def describe(cfg: Any) -> str:
    kind = {"grpo": "GRPO", "sft": "SFT", "rw": "reward model"}[pipeline_kind(cfg)]
    parts = [kind]
    where = placement(cfg)
    if where is None:
        if cfg.allocation_mode:
            parts.append(f"allocation {cfg.allocation_mode}")
        return ", ".join(parts)
    if where.train is not None:
        backend = where.train.effective_backend
        parts.append(f"{_BACKEND_TITLES.get(backend, backend)} training")
    if where.rollout is not None:
        parts.append(f"{_BACKEND_TITLES.get(where.rollout.backend, where.rollout.backend)} rollout")
    gpus = f"{where.world} GPU" + ("" if where.world == 1 else "s")
    if where.source == "allocation_mode":
        parts.append(f"allocation {alloc.parse(cfg.allocation_mode).text()} on {gpus}")
    else:
        parts.append(f"per-engine backends on {gpus}")
    return ", ".join(parts)
