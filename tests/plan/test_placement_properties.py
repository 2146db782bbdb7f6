"""Random experiments give consistent placements: each role gets exactly its GPUs, colocated roles share,
nothing lands outside the cluster unnoticed, and roles outside one colocation group never overlap unnoticed."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlcfg.ir import Offload
from rlcfg.plan import build_plan
from rlcfg.plan.render import render_text
from tests.plan.factory import experiment, reward_rule, rollout, trainer

TRAINERS = ("actor", "reference", "critic")
MODELS = ("/m/Qwen2.5-0.5B", "/m/Qwen3-8B", "/m/unknown-model")


@st.composite
def experiments(draw):
    names = ["actor"] + [n for n in ("rollout", "reference", "critic") if draw(st.booleans())]
    explicit = draw(st.booleans())
    model = draw(st.sampled_from(MODELS))
    roles = []
    for name in names:
        gpus = draw(st.integers(1, 24))
        ids = None
        if explicit and draw(st.booleans()):
            start = draw(st.integers(0, 16))
            ids = tuple(range(start, start + gpus))
        tp = draw(st.sampled_from((1, 2, 4)))
        if name == "rollout":
            roles.append(rollout(gpus=gpus, tp=tp, ids=ids, backend=draw(st.sampled_from(("vllm", "sglang"))),
                                 sleep=draw(st.booleans()), model=model))
        else:
            backend = draw(st.sampled_from(("fsdp", "megatron")))
            parallel = ({"tp": tp, "pp": draw(st.sampled_from((1, 2))), "cp": draw(st.sampled_from((1, 2)))}
                        if backend == "megatron" else {"sp": draw(st.sampled_from((1, 2))),
                                                       "fsdp_shard": draw(st.sampled_from((None, 2, 4)))})
            off = Offload(params=draw(st.booleans()), optimizer=draw(st.booleans()))
            roles.append(trainer(name, gpus=gpus, backend=backend, trains=name != "reference", ids=ids,
                                 offload=off, model=model, micro=draw(st.sampled_from((1, 2, 8))), **parallel))
    if draw(st.booleans()):
        roles.append(reward_rule())
    # A random partition of some roles into colocation groups.
    colocation: list[tuple[str, ...]] = []
    pool = [n for n in names if draw(st.booleans())]
    while len(pool) >= 2:
        k = draw(st.integers(2, len(pool)))
        colocation.append(tuple(pool[:k]))
        pool = pool[k:]
    gpn = draw(st.sampled_from((1, 2, 4, 8)))
    nodes = draw(st.one_of(st.none(), st.integers(1, 8)))
    return experiment(*roles, colocation=tuple(colocation)), gpn, nodes


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(experiments())
def test_placements_are_consistent(case):
    exp, gpn, nodes = case
    plan, diags = build_plan(exp, nodes=nodes, gpus_per_node=gpn)
    by_code: dict[str, set[str]] = {}
    for d in diags:
        by_code.setdefault(d.code, set()).add(d.path)
    group_of = {r: i for i, g in enumerate(exp.colocation) for r in g}

    for role in exp.roles:
        p = plan.placement(role.name)
        want = role.resources.gpu_ids or ()
        # Each role gets exactly its GPUs: its explicit ids, or as many distinct GPUs as it asked for.
        if want:
            assert p.gpus == tuple(want)
        else:
            assert len(p.gpus) == role.resources.gpus == len(set(p.gpus))
        assert [s.gpu for s in p.ranks] == (list(p.gpus) if role.backend != "rule" else [])
        # Nothing outside the cluster without RLC403 (and never when the cluster size was inferred).
        if any(g >= plan.cluster.gpus for g in p.gpus):
            assert nodes is not None and f"roles.{role.name}" in by_code.get("RLC403", set())
        assert set(p.gpus) <= set(plan.groups[p.group].gpus)

    # Colocated roles share: the same GPUs when their sizes agree, the group's first GPUs otherwise (RLC402).
    for group in exp.colocation:
        members = [exp.role(r) for r in group if exp.role(r).resources.gpus]
        sets = [plan.placement(r.name).gpus for r in members]
        if len({len(s) for s in sets}) > 1:
            assert "RLC402" in by_code
        elif any(r.resources.gpu_ids for r in members):
            assert len(set(sets)) == 1 or "RLC402" in by_code
        else:
            assert len(set(sets)) == 1

    # Roles in different colocation groups overlap only through explicit ids, and then RLC401 says so.
    roles = [r for r in exp.roles if r.resources.gpus]
    for i, a in enumerate(roles):
        for b in roles[i + 1:]:
            same_group = a.name in group_of and group_of.get(a.name) == group_of.get(b.name)
            shared = set(plan.placement(a.name).gpus) & set(plan.placement(b.name).gpus)
            if shared and not same_group:
                assert a.resources.gpu_ids or b.resources.gpu_ids
                assert "RLC401" in by_code

    if nodes is None:
        assert "RLC403" not in by_code
        assert plan.cluster.gpus >= max((g + 1 for p in plan.placements for g in p.gpus), default=0)
    render_text(plan, show_gpu_map=True)  # never raises
