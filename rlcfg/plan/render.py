"""The text form of an ExecutionPlan: cluster, placement groups, roles, the GPU map, the batch schedule and the
memory estimate, in that order. Plain text for a terminal or a golden file.

It must stay readable from 8 GPUs to thousands: identical consecutive nodes fold into one row ("nodes 0-127"),
GPU and rank lists fold into ranges, and rank tables show their first and last rows around an ellipsis.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from rlcfg.ir import Lora
from rlcfg.plan.model import ExecutionPlan, RolePlacement

GiB = 1024 ** 3
LETTER = {"actor": "A", "rollout": "R", "reference": "F", "critic": "C", "reward": "W"}
LEGEND = {"actor": "actor", "rollout": "rollout", "reference": "reference (frozen policy)", "critic": "critic",
          "reward": "reward"}
RANK_ROWS_SHOWN = 16  # a rank table longer than this shows its head and tail only
ENGINES_SHOWN = 8


def ranges(ids: Iterable[int]) -> str:
    """`0-3, 6, 8-15` for a collection of integers (sorted, duplicates dropped)."""
    values = sorted(set(ids))
    if not values:
        return "none"
    parts: list[str] = []
    start = prev = values[0]
    for v in values[1:]:
        if v == prev + 1:
            prev = v
            continue
        parts.append(f"{start}-{prev}" if prev > start else str(start))
        start = prev = v
    parts.append(f"{start}-{prev}" if prev > start else str(start))
    return ", ".join(parts)


def gib(n: int | float) -> str:
    return f"{n / GiB:.1f} GiB"


def word_for(n: int, word: str, many: str | None = None) -> str:
    """The noun that goes with a count: `many` for a plural that is not word + s."""
    return word if n == 1 else (many or word + "s")


def plural(n: int, word: str, many: str | None = None) -> str:
    """`1 GPU`, `8 GPUs`."""
    return f"{n} {word_for(n, word, many)}"


def gpus_word(ids: Sequence[int]) -> str:
    return word_for(len(set(ids)), "GPU")


def _span(ids: Sequence[int], gpn: int) -> str:
    """GPUs with the nodes they sit on: `0-7 (node 0)`, `0-15 (nodes 0-1)`."""
    if not ids:
        return "no GPUs"
    nodes = sorted({g // gpn for g in ids})
    return f"{ranges(ids)} ({'node' if len(nodes) == 1 else 'nodes'} {ranges(nodes)})"


def layout(plan: ExecutionPlan, placement: RolePlacement) -> str:
    role = plan.experiment.role(placement.role)
    assert role is not None
    par, n = role.parallelism, len(placement.gpus)
    if role.backend == "rule":
        cpus = f", {plural(placement.cpus, 'CPU')}" if placement.cpus else ""
        return f"rule-based, no model{cpus}"
    if n == 0:
        return f"{plural(placement.cpus, 'CPU')}" if placement.cpus else "CPU only"
    if role.backend in ("vllm", "sglang", "hf"):
        engine = f"TP {par.tp}" + (f" × PP {par.pp}" if par.pp > 1 else "")
        return f"{plural(placement.dp, 'engine')} × {engine}"
    if role.backend == "megatron":
        dims = [f"TP {par.tp}", f"CP {par.cp}"] + ([f"EP {par.ep}"] if par.ep > 1 else []) + \
            [f"DP {placement.dp}", f"PP {par.pp}"]
        extra = []
        if par.vpp:
            extra.append(plural(par.vpp, "virtual stage"))
        if par.sequence_parallel:
            extra.append("sequence parallel")
        return " × ".join(dims) + (f" ({', '.join(extra)})" if extra else "")
    shard = par.fsdp_shard or n
    text = f"DP {placement.dp}"
    if par.sp > 1:
        text += f" × Ulysses SP {par.sp}"
    if par.tp > 1:
        # Tensor parallelism splits each layer across a TP group; FSDP shards what is left over the other ranks.
        text += f" × TP {par.tp}"
    tp = max(par.tp, 1)
    text += f", FSDP shards over {max(shard // tp, 1)}" if shard >= n else \
        f", HSDP: {plural(n // shard, 'replica')} × {plural(shard, 'shard')}"
    return text


def _header(plan: ExecutionPlan) -> list[str]:
    exp, c = plan.experiment, plan.cluster
    variant = f", {exp.variant}" if exp.variant else ""
    gpu = f" ({c.gpu_name}, {gib(c.gpu_memory_bytes)} each)" if c.gpu_name and c.gpu_memory_bytes else ""
    lines = [f"plan for {exp.name} ({exp.dialect}{variant})",
             f"cluster: {plural(c.nodes, 'node')} × {plural(c.gpus_per_node, 'GPU')} = {plural(c.gpus, 'GPU')}{gpu}"]
    lines += [f"  note: {n}" for n in plan.notes]
    return lines


def label(plan: ExecutionPlan, role_name: str) -> str:
    """A role as the user knows it: the config's own section name, with rlcfg's role beside it
    (`actor_train (actor)`); just the role where the lowering recorded no section, or the two are the same."""
    role = plan.experiment.role(role_name)
    section = role.section if role is not None else None
    return f"{section} ({role_name})" if section and section != role_name else role_name


def _groups(plan: ExecutionPlan) -> list[str]:
    lines = ["", "placement groups"]
    gpn = plan.cluster.gpus_per_node
    for g in plan.groups:
        roles = " + ".join(label(plan, r) for r in g.roles)
        if g.gpus:
            what = "colocated, taking turns on the same GPUs" if len(g.roles) > 1 else ""
            lines.append(f"  group {g.index}  {gpus_word(g.gpus)} {_span(g.gpus, gpn)}  {roles}"
                         + (f"  ({what})" if what else ""))
        else:
            cpus = sum(p.cpus for p in plan.placements if p.role in g.roles)
            lines.append(f"  group {g.index}  {plural(cpus, 'CPU') if cpus else 'no GPUs'}  {roles}")
    return lines


def _roles(plan: ExecutionPlan) -> list[str]:
    lines = ["", "roles"]
    gpn = plan.cluster.gpus_per_node
    rows = []
    for p in plan.placements:
        role = plan.experiment.role(p.role)
        assert role is not None
        where = f"{plural(len(p.gpus), 'GPU')}: {_span(p.gpus, gpn)}" if p.gpus else "-"
        adapters = f"; {lora_text(role.lora)}" if role.lora is not None else ""
        rows.append((label(plan, p.role), role.backend, where, layout(plan, p) + adapters))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        lines.append(f"  {r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}".rstrip())
    return lines


def _gpu_map(plan: ExecutionPlan) -> list[str]:
    c = plan.cluster
    gpn = c.gpus_per_node
    on: dict[int, list[str]] = {}
    for p in plan.placements:
        for g in p.gpus:
            on.setdefault(g, []).append(p.role)
    # GPUs a role was put on beyond the cluster (RLC403) are shown too, on the nodes they would need.
    last_gpu = max([c.gpus - 1] + list(on))
    nodes = last_gpu // gpn + 1

    def cell_roles(g: int) -> tuple[str, ...]:
        return tuple(on.get(g, ()))

    rows: list[tuple[int, int, tuple[tuple[str, ...], ...]]] = []  # (first node, last node, cells)
    for node in range(nodes):
        cells = tuple(cell_roles(node * gpn + i) for i in range(gpn))
        if rows and rows[-1][2] == cells and (rows[-1][1] < c.nodes) == (node < c.nodes):
            rows[-1] = (rows[-1][0], node, cells)
        else:
            rows.append((node, node, cells))

    def node_label(a: int, b: int) -> str:
        text = f"node {a}" if a == b else f"nodes {a}-{b}"
        return text + (" (beyond the cluster)" if a >= c.nodes else "")

    lines = ["", f"GPU map ({plural(c.nodes, 'node')} × {plural(gpn, 'GPU')}; columns are a node's local GPU index)"]
    used = [p.role for p in plan.placements if p.gpus]
    if gpn <= 16:
        letter = {r: LETTER.get(r, r[:1].upper()) for r in used}
        width = max([len("".join(letter[r] for r in cells)) for _, _, row in rows for cells in row] + [1, len(str(gpn - 1))])
        labels = [node_label(a, b) for a, b, _ in rows]
        lw = max(len(s) for s in labels)
        lines.append(f"  {'':<{lw}}  " + " ".join(f"{i:<{width}}" for i in range(gpn)).rstrip())
        for node_text, (_, _, cells) in zip(labels, rows):
            text = " ".join(f"{''.join(letter[r] for r in cell) or '.':<{width}}" for cell in cells)
            lines.append(f"  {node_text:<{lw}}  {text}".rstrip())
        legend = "  ".join(f"{letter[r]} {label(plan, r) if label(plan, r) != r else LEGEND.get(r, r)}" for r in used)
        lines.append(f"  {legend}  . idle")
    for a, b, cells in rows:
        segments: list[str] = []
        start = 0
        for i in range(1, gpn + 1):
            if i == gpn or cells[i] != cells[start]:
                what = " + ".join(label(plan, r) for r in cells[start]) or "idle"
                span = f"GPU {start}" if i - 1 == start else f"GPUs {start}-{i - 1}"
                segments.append(f"{span} {what}")
                start = i
        lines.append(f"  {node_label(a, b)}: {'; '.join(segments)}")
    return lines


def lora_text(lora: Lora) -> str:
    """`LoRA rank 32, alpha 32 on all-linear`: what a role's adapters are, for the plan and the dry run."""
    targets = lora.target_modules if isinstance(lora.target_modules, str) else ", ".join(lora.target_modules)
    excluded = lora.exclude_modules if isinstance(lora.exclude_modules, str) or lora.exclude_modules is None \
        else ", ".join(lora.exclude_modules)
    return (f"LoRA rank {lora.rank}, alpha {lora.alpha:g} on {targets}" + (f" except {excluded}" if excluded else "")
            + (f", dropout {lora.dropout:g}" if lora.dropout else ""))


def _coords(coords: tuple[tuple[str, int], ...]) -> str:
    return " ".join(f"{k} {v}" for k, v in coords)


def _rank_tables(plan: ExecutionPlan) -> list[str]:
    lines: list[str] = []
    gpn = plan.cluster.gpus_per_node
    for p in plan.placements:
        role = plan.experiment.role(p.role)
        if role is None or not p.ranks:
            continue
        par = role.parallelism
        if role.backend in ("vllm", "sglang", "hf"):
            per = par.tp * par.pp
            order = "one GPU each" if per == 1 else f"engine e on ranks e×{per} to e×{per}+{per - 1}"
            lines += ["", f"{label(plan, p.role)} engines ({layout(plan, p)}): {order}"]
            by_engine: dict[int, list[int]] = {}
            for r in p.ranks:
                by_engine.setdefault(r.coords[0][1], []).append(r.gpu)
            engines = sorted(by_engine)
            shown = engines if len(engines) <= ENGINES_SHOWN else engines[:ENGINES_SHOWN - 2] + engines[-2:]
            for k, e in enumerate(shown):
                if len(engines) > ENGINES_SHOWN and k == ENGINES_SHOWN - 2:
                    lines.append(f"  ... {plural(len(engines) - len(shown), 'more engine')} ...")
                lines.append(f"  engine {e}: {gpus_word(by_engine[e])} {_span(by_engine[e], gpn)}")
            continue
        if role.backend == "megatron":
            order = "Megatron order tp-cp-ep-dp-pp, tp fastest" if par.ep > 1 else \
                "Megatron order tp-cp-dp-pp, tp fastest"
        elif par.tp > 1:
            order = f"FSDP mesh {'dp × sp × tp' if par.sp > 1 else 'dp × tp'}, tp fastest"
        elif par.sp > 1 or (par.fsdp_shard and par.fsdp_shard < len(p.gpus)):
            order = "FSDP: Ulysses groups and shard groups are consecutive ranks"
        else:
            order = "FSDP: one data-parallel rank per GPU"
        lines += ["", f"{label(plan, p.role)} ranks ({layout(plan, p)}; {order})"]
        keys = [k for k, _ in p.ranks[0].coords]
        header = ["rank", "GPU", "node", "local"] + keys
        rows: list[list[str]] = []
        ranks = list(p.ranks)
        shown = ranks if len(ranks) <= RANK_ROWS_SHOWN else ranks[:RANK_ROWS_SHOWN - 4] + ranks[-4:]
        for r in shown:
            rows.append([str(r.rank), str(r.gpu), str(r.gpu // gpn), str(r.gpu % gpn)]
                        + [str(v) for _, v in r.coords])
        widths = [max(len(x) for x in [h] + [row[i] for row in rows]) for i, h in enumerate(header)]
        lines.append("  " + "  ".join(f"{h:>{w}}" for h, w in zip(header, widths)))
        for k, row in enumerate(rows):
            if len(ranks) > RANK_ROWS_SHOWN and k == RANK_ROWS_SHOWN - 4:
                lines.append(f"  {'...':>{widths[0]}}  ({plural(len(ranks) - len(shown), 'more rank')})")
            lines.append("  " + "  ".join(f"{x:>{w}}" for x, w in zip(row, widths)))
    return lines


def _batch(plan: ExecutionPlan) -> list[str]:
    b = plan.batch
    exp = plan.experiment
    trainer = exp.role(b.trained_role) if b.trained_role else None
    who = b.trained_role or "trainer"
    rows = [
        ("prompts per step", f"{b.prompts_per_step:,}"),
        ("responses per prompt", f"{b.group_size:,}"),
        ("samples per step", f"{b.samples_per_step:,}"),
        ("samples per optimizer step", f"{b.samples_per_optimizer_step:,}"),
        ("optimizer steps per step", f"{b.optimizer_steps_per_step:,}"
         + (f" ({b.optimizer_steps_per_step // max(b.ppo_epochs, 1)} × {b.ppo_epochs} epochs)" if b.ppo_epochs > 1
            else "")),
        (f"{who} data-parallel ranks", f"{b.dp:,}"),
        ("samples per rank per optimizer step", f"{b.samples_per_rank:,}"),
    ]
    critic_per_opt = exp.schedule.critic_samples_per_optimizer_step
    if critic_per_opt:
        critic_steps = b.samples_per_step // critic_per_opt * b.ppo_epochs
        rows.insert(5, ("critic optimizer steps per step",
                        f"{critic_steps:,} of {critic_per_opt:,} {word_for(critic_per_opt, 'sample')}"))
    if trainer is not None and trainer.sequence_packing and trainer.max_tokens_per_micro_batch:
        rows.append(("micro-batches", f"packed up to {trainer.max_tokens_per_micro_batch:,} tokens each"))
    else:
        rows.append(("micro-batch", f"{b.micro_batch_size:,} {word_for(b.micro_batch_size, 'sample')}"))
        accumulation = word_for(b.grad_accumulation, "micro-batch", "micro-batches")
        rows.append(("gradient accumulation", f"{b.grad_accumulation:,} {accumulation} per optimizer step"))
    if b.total_steps is not None:
        samples, opt_steps = b.total_steps * b.samples_per_step, b.total_steps * b.optimizer_steps_per_step
        rows.append(("total steps", f"{b.total_steps:,} ({samples:,} {word_for(samples, 'sample')}, "
                                    f"{opt_steps:,} {word_for(opt_steps, 'optimizer step')})"))
    elif exp.schedule.epochs:
        rows.append(("total steps",
                     f"{plural(exp.schedule.epochs, 'epoch')} over the dataset (its size sets the steps)"))
    sch = exp.schedule
    if sch.max_staleness:
        rows.append(("asynchronous rollouts", f"up to {plural(sch.max_staleness, 'update')} stale; "
                                              f"{plural(sch.steps_generating_at_once(), 'step')} of prompts "
                                              "generating at once"
                                              + ("" if sch.ahead_across_epochs else
                                                 "; each epoch's first step waits for the last update")))
    alg = exp.algorithm
    if alg.balance_ranks_by_length:
        rows.append(("rank shares", "dealt by length, longest first, each to the rank with the fewest tokens"))
    elif alg.shuffle_seed is not None:
        rows.append(("rank shares", f"each reordered by one permutation seeded with {alg.shuffle_seed}, every step"))
    if sch.partial_rollout is not None:
        limits = sch.partial_rollout.round_limits(exp.sampling.max_new_tokens)
        rows.append(("partial rollout", f"rounds of up to {', '.join(f'{t:,}' for t in limits)} tokens, unfinished "
                                        "responses continue in the next step; a prompt's finished responses train "
                                        f"once more than {sch.partial_rollout.min_finished} have finished"))
    width = max(len(k) for k, _ in rows)
    return ["", "batch schedule (one step)"] + [f"  {k:<{width}}  {v}" for k, v in rows]


def _memory(plan: ExecutionPlan) -> list[str]:
    m = plan.memory
    if m is None:
        return ["", "memory estimate: not available (the model's architecture is unknown; pass --model-config)"]
    lines = ["", f"memory estimate per GPU on {m.gpu_name} ({gib(m.capacity_bytes or 0)})"]
    for a in m.architectures:
        attn = f"{a.heads} heads ({a.kv_heads} KV × {a.head_dim})"
        moe = f", {a.experts} experts × FFN {a.expert_intermediate}" if a.experts else ""
        lines.append(f"  model {a.name} ({a.source}): {a.layers} layers, hidden {a.hidden}, {attn}, "
                     f"FFN {a.intermediate}{moe}, vocab {a.vocab:,}, {'tied' if a.tied_embeddings else 'untied'} "
                     f"embeddings; {a.params / 1e9:.2f} B parameters")
    lines += [f"  {n}" for n in m.notes]
    for r in m.roles:
        kept = (f"offloads between phases, keeps {gib(r.resident_bytes)}" if r.offloaded_between_phases
                else f"keeps {gib(r.resident_bytes)} while other roles run")
        kv = f"; KV cache holds {r.kv_cache_tokens:,} tokens" if r.kv_cache_tokens is not None else ""
        lines.append(f"  {label(plan, r.role)}, {r.phase}: {gib(r.per_gpu_bytes)}; {kept}{kv}")
        width = max(len(t.name) for t in r.terms)
        for t in r.terms:
            lines.append(f"    {t.name:<{width}}  {gib(t.bytes):>10}")
        for n in r.notes:
            lines.append(f"    ({n})")
    gpn = plan.cluster.gpus_per_node
    for v in m.verdicts:
        verdict = "fits" if v.fits else (
            "fits at a typical length, NOT with every sample at its longest" if v.fits_typical else "DOES NOT FIT")
        roles = " + ".join(label(plan, r) for r in v.roles)
        role_name, sep, term = v.biggest.partition(": ")
        biggest = f"{label(plan, role_name)}{sep}{term}" if sep else v.biggest
        lines.append(f"  {gpus_word(v.gpus)} {_span(v.gpus, gpn)} {roles}: peak {gib(v.peak_bytes)} of "
                     f"{gib(v.capacity_bytes)}: {verdict}; biggest term {biggest}")
        if v.advice:
            lines.append(f"    → {v.advice}")
    return lines


def render_text(plan: ExecutionPlan, show_gpu_map: bool = False) -> str:
    lines = _header(plan) + _groups(plan) + _roles(plan)
    if show_gpu_map:
        lines += _gpu_map(plan) + _rank_tables(plan)
    lines += _batch(plan) + _memory(plan)
    return "\n".join(lines)
