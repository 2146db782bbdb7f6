"""Would `rlcfg run` launch this config on its cluster? Everything a run decides before a worker starts, without
a GPU, torch or Ray: the checks of `validate`, the run ledger's refusals, the lowering, the plan with its memory
verdict, and the backend preflight as it would run on the cluster.

`rlcfg run FILE --dry-run` prints the answer; `rlcfg run FILE` asks the same questions (`launch_blockers`) before it
starts Ray, so a config the dry run passes is one the run starts, and one it refuses stops the run for the same
reasons. Each refusal speaks the dialect: the key to change, the value it has, and the value that runs.
"""

from __future__ import annotations

import json
import os
from dataclasses import field
from pathlib import Path
from typing import Any, Sequence

from rlcfg.diagnostics import Diagnostic, Severity
from rlcfg.frontend import CheckResult, check_file, pipeline_name
from rlcfg.records import record

# validate's note on what `rlcfg run` runs that the config does not name
ASSUMED = "RLC124"

# The extras a cluster's nodes need for each backend a plan uses (pip install 'rlcfg[...]').
EXTRA_OF_BACKEND = {"vllm": "vllm", "sglang": "sglang", "megatron": "megatron", "fsdp": "run", "hf": "run"}


@record
class Blocker:
    """One reason the run would not launch."""

    code: str  # RLC116 (pipeline), RLC118 (a refused setting), RLC119 (backend preflight), RLC4xx/RLC5xx (plan)
    message: str
    key: str = ""  # the config's dotted key, where one key owns it
    where: str = ""  # file:line:col, override or default
    fix: str = ""  # what to change, in the dialect's words

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "key": self.key, "where": self.where, "message": self.message, "fix": self.fix}


@record
class DryRun:
    result: CheckResult
    blockers: list[Blocker] = field(default_factory=list)
    plan: Any = None  # the ExecutionPlan, when the config lowers
    notes: list[str] = field(default_factory=list)  # what the run will assume (a path not on this machine, ...)
    extras: list[str] = field(default_factory=list)  # what the cluster's nodes must have installed

    @property
    def launches(self) -> bool:
        return self.result.ok and not self.blockers


# What the backend preflight reports (runtime.backends.check_plan) has no key of its own in the ledger.
PREFLIGHT_CODE = "RLC119"


def dry_run(file: str, overrides: Sequence[str] = (), *, dialect: str | None = None, release: str | None = None,
            nodes: int | None = None, gpus_per_node: int | None = None, gpu: str | None = None) -> DryRun:
    """Everything `rlcfg run` checks before a worker starts, for the cluster the config describes (or `nodes` ×
    `gpus_per_node` where given). Raises UsageError for a file that cannot be read or a flag that is wrong."""
    result = check_file(file, overrides, dialect=dialect, release=release)
    report = DryRun(result)
    if not result.ok:
        return report
    report.blockers.extend(setting_blockers(result))
    if result.pipeline is not None or result.unrun is not None:
        return report
    experiment, lowering = lower_result(result)
    if experiment is None:
        report.blockers.extend(lowering)
        return report
    from rlcfg.plan import build_plan

    local = local_model_configs(experiment)
    plan, diagnostics = build_plan(experiment, gpu=gpu, nodes=nodes, gpus_per_node=gpus_per_node,
                                   model_configs=local)
    report.plan = plan
    for d in diagnostics:
        if d.severity is Severity.ERROR:
            report.blockers.append(_from_diagnostic(d, result))
    report.blockers.extend(backend_blockers(plan))
    extras = {EXTRA_OF_BACKEND[r.backend] for r in experiment.roles if r.backend in EXTRA_OF_BACKEND}
    if "sglang" in extras:  # it brings the runtime with the torch SGLang needs, which `run`'s pin is not
        extras.discard("run")
    report.extras = sorted(extras)
    report.notes.extend([*assumptions(result), *_path_notes(experiment), *_tool_notes(experiment)])
    return report


def _tool_notes(experiment: Any) -> list[str]:
    from rlcfg.runtime.rewards import SYSTEM_TOOLS

    tool = SYSTEM_TOOLS.get(experiment.reward_function)
    return [f"the nodes that generate need {tool}; the run checks it before it starts"] if tool else []


def assumptions(result: Any) -> list[str]:
    """What the run will do that the config does not name (RLC124 notes of validate: AReaL's reward for a config
    file given without its entry script), said before a run as validate says it."""
    return [d.message for d in result.diagnostics if d.code == ASSUMED]


def cluster_at(address: str) -> tuple[int, int, str | None]:
    """The shape of the Ray cluster at `address` (`auto`, host:port or ray://...): its nodes with GPUs, the GPUs of
    the smallest of them, and their GPU kind where Ray knows it (`accelerator_type:H100` → "h100"). Joining a cluster
    needs Ray, which only this path of a dry run imports. Raises RunEnvironmentError when the cluster does not
    answer or has no GPUs."""
    from rlcfg.runtime.environment import RunEnvironmentError, resolve_address

    target = resolve_address(address)
    import ray

    try:
        ray.init(address=target, log_to_driver=False, logging_level="ERROR")
        try:
            nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
        finally:
            ray.shutdown()
    except (ConnectionError, RuntimeError, TimeoutError) as exc:  # it answered the probe, then went away
        line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise RunEnvironmentError(f"joining the Ray cluster at {address} failed: {line}") from None
    with_gpus = [r for r in nodes if r.get("GPU", 0) >= 1]
    if not with_gpus:
        raise RunEnvironmentError(f"the Ray cluster at {address} has no node with GPUs; `rlcfg run` would have none "
                                  "to place the roles on")
    kinds = {key.split(":", 1)[1].lower() for r in with_gpus for key in r if key.startswith("accelerator_type:")}
    return len(with_gpus), int(min(r["GPU"] for r in with_gpus)), kinds.pop() if len(kinds) == 1 else None


def setting_blockers(result: CheckResult) -> list[Blocker]:
    """What `validate` already says a run refuses: the pipeline as a whole (RLC116) or a setting (RLC118)."""
    blockers = []
    if result.pipeline is not None:
        blockers.append(Blocker("RLC116", f"{result.file} is for the {pipeline_name(result.pipeline)}, which "
                                          "rlcfg does not model"))
    if result.unrun is not None:
        name, why = result.unrun
        blockers.append(Blocker("RLC116", f"{result.file} is for the {pipeline_name(name)}, which `rlcfg run` does "
                                          f"not run: {why}"))
    for d in result.diagnostics:
        if d.code == "RLC118":
            blockers.append(_from_diagnostic(d, result))
    return blockers


def lower_result(result: CheckResult) -> tuple[Any, list[Blocker]]:
    """The Experiment of a valid config, or why it has none."""
    from rlcfg import lower
    from rlcfg.source.yaml_loader import UsageError

    if not lower.available(result.dialect):
        return None, [Blocker("RLC116", f"`rlcfg run` cannot run {result.dialect} configs yet: there is no lowering "
                                        "for that dialect")]
    try:
        return lower.lower(result.dialect, result.config, result.release, result.entry_runs), []
    except UsageError as exc:  # a pipeline the dialect validates but does not run (ROLL agentic, say)
        return None, [Blocker("RLC116", str(exc))]


def backend_blockers(plan: Any) -> list[Blocker]:
    """The backend preflight as it runs on the cluster: every node has the plan's GPUs and the backends' extras
    (a dry run on a login node judges the cluster, not the login node)."""
    from rlcfg.runtime.backends import Machine, check_plan

    machine = Machine(gpus=plan.cluster.gpus_per_node, cpus=os.cpu_count() or 1)
    return [Blocker(PREFLIGHT_CODE, problem)
            for problem in check_plan(plan, machine, has_cluster=True, installed=lambda module: True)]


def local_model_configs(experiment: Any) -> dict[str, dict]:
    """config.json of every model path that is a local directory (unreadable ones are left to the table)."""
    found: dict[str, dict] = {}
    for role in experiment.roles:
        path = role.model.path if role.model else ""
        if not path or path in found:
            continue
        candidate = Path(path).expanduser() / "config.json"
        try:
            data = json.loads(candidate.read_text()) if candidate.is_file() else None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            data = None
        if isinstance(data, dict):
            found[path] = data
    return found


def _path_notes(experiment: Any) -> list[str]:
    """Model and data paths that are not on this machine: the cluster's nodes must have them (or, for a model,
    reach the Hugging Face Hub). Not a refusal: a login node often does not mount the data the nodes read."""
    from rlcfg.runtime.environment import looks_like_hub_id
    from rlcfg.runtime.quickstart import builds  # the quickstart's model and data, which `run` builds where named

    notes = []
    seen = set()
    for role in experiment.roles:
        path = role.model.path if role.model else ""
        if path and path not in seen and not os.path.exists(os.path.expanduser(path)) and not builds(path):
            seen.add(path)
            hub = looks_like_hub_id(path)
            notes.append(f"the {role.name}'s model `{path}` is not on this machine"
                         + ("; the nodes load it from the Hugging Face Hub unless they have it" if hub
                            else "; the cluster's nodes must have it"))
    data = experiment.data
    for kind, files in (("training", data.train_files), ("evaluation", data.eval_files)):
        for path in files or ():
            if path and not os.path.exists(os.path.expanduser(path)) and not builds(path):
                notes.append(f"the {kind} data `{path}` is not on this machine; the cluster's nodes must have it")
    episodes = experiment.episodes
    folder = episodes.setting("db_path") if episodes is not None else None
    if folder and not os.path.isdir(os.path.expanduser(str(folder))):
        notes.append(f"the {episodes.environment} environment's databases `{folder}` are not on this machine; the "
                     "nodes that generate must have them")
    server = episodes.setting("search_url") if episodes is not None else None
    if server:
        notes.append(f"the search environment's retrieval server `{server}` must answer the nodes that generate")
    return notes


def _from_diagnostic(d: Diagnostic, result: CheckResult) -> Blocker:
    return Blocker(d.code, d.message, key=d.path, where=d.origin.describe() if d.origin else "default",
                   fix=d.hint or "")


def render_text(report: DryRun, file: str) -> str:
    lines = []
    plan = report.plan
    if plan is not None:
        cluster = plan.cluster
        memory = plan.memory
        fits = ("no memory estimate" if memory is None else "fits in memory" if memory.fits else
                "fits in memory at typical lengths, not at the longest" if memory.fits_typical
                else "does not fit in memory")
        lines.append(f"rlcfg: dry run of {file} on {cluster.nodes} node{'s' if cluster.nodes != 1 else ''} × "
                     f"{cluster.gpus_per_node} GPUs: {fits}")
        for role in plan.experiment.roles:
            placement = plan.placement(role.name)
            if placement is not None and placement.ranks:
                lines.append(f"  {role.section or role.name}: {role.backend}, {len(placement.ranks)} "
                             f"rank{'s' if len(placement.ranks) != 1 else ''}")
    for note in report.notes:
        lines.append(f"rlcfg: note: {note}")
    if report.extras and not report.blockers:
        lines.append("rlcfg: the nodes need " + ", ".join(f"rlcfg[{e}]" for e in report.extras))
    if report.blockers:
        lines.append(f"rlcfg: `rlcfg run` would not launch {file}: {len(report.blockers)} "
                     f"reason{'s' if len(report.blockers) != 1 else ''}")
        for b in report.blockers:
            head = f"  {b.code}"
            if b.key:
                head += f" `{b.key}`"
            if b.where and b.where != "default":
                head += f" ({b.where})"
            lines.append(f"{head}: {b.message}")
            if b.fix:
                lines.append(f"      fix: {b.fix}")
    else:
        lines.append(f"rlcfg: {file} would launch")
    return "\n".join(lines)


def render_json(report: DryRun) -> dict[str, Any]:
    plan = report.plan
    return {
        "file": report.result.file,
        "dialect": report.result.dialect,
        "launches": report.launches,
        "blockers": [b.to_json() for b in report.blockers],
        "notes": list(report.notes),
        "extras": list(report.extras),
        "cluster": None if plan is None else {"nodes": plan.cluster.nodes,
                                              "gpus_per_node": plan.cluster.gpus_per_node},
        "fits_in_memory": None if plan is None or plan.memory is None else plan.memory.fits,
    }
