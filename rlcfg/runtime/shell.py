"""The shell of every `rlcfg run`: what a run is whatever it trains.

The Ray cluster (one placement group per colocation group of the plan, one bundle per GPU or CPU slot, one actor per
rank), the output folder and its lock, checkpoints, resume and the checks before Ray starts, metrics and plots, the
exported model, and the loop that calls a step and decides when to evaluate and save. What a step is belongs to the
kind of run, a subclass of RunShell: the RL loop (rlcfg.runtime.driver.Run) or supervised training
(rlcfg.runtime.supervised.SupervisedRun). Each fills in `prepare`, `start`, `step`, `evaluate`, `data_note` and
`_sync_weights`, and nothing here knows which one runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rlcfg.ir import Experiment, Role, to_json
from rlcfg.plan.model import ExecutionPlan
from rlcfg.runtime import checkpoint as ckpt
from rlcfg.runtime.backends import MEGATRON_ON_CPU_ENV, Machine, PreflightError, detect_machine
from rlcfg.runtime.specs import RolloutSpec, TrainSpec

# Environment switches the workers read.
FORWARDED_ENV = (MEGATRON_ON_CPU_ENV,)


@dataclass
class RunOptions:
    output_dir: str
    resume: str | None = "latest"  # "latest", None (start fresh), or a checkpoint directory
    address: str | None = None  # an existing Ray cluster ("auto", "ray://...", host:port)
    debug: bool = False
    stream: Any = None  # where progress goes (stderr by default)
    max_steps: int | None = None  # stop after this many steps of this invocation (tests, benchmarks)
    threads: int | None = None  # torch threads per worker; None: the CPUs of its slot
    # Where checkpoints go; None: the config's checkpoint folder, else <output_dir>/checkpoints. `rlcfg run
    # --output DIR` sets DIR/checkpoints, so that a run is its output folder.
    checkpoint_dir: str | None = None
    overwrite: bool = False  # start over in a folder that holds a run: delete its checkpoints and outputs
    # A single worker holding every role runs each step in one call; False keeps the general path (the tests
    # compare the two).
    fused_step: bool = True


@dataclass
class RunResult:
    steps: int
    history: list[dict[str, Any]]
    elapsed_s: float
    summary: str
    output_dir: str
    plots: list[str] = field(default_factory=list)
    resumed_from: str | None = None


def run_length(exp: Experiment, plan: ExecutionPlan, prompts: int) -> int:
    total = plan.batch.total_steps or exp.schedule.total_steps
    if total:
        return int(total)
    if exp.schedule.epochs:
        return int(exp.schedule.epochs) * max(1, prompts // exp.schedule.prompts_per_step)
    raise ValueError("the experiment says neither how many steps nor how many epochs to train")


# Ray's environment switch that leaves CUDA_VISIBLE_DEVICES as the process was started with, instead of setting it
# to the GPUs the actor reserved.
KEEP_VISIBLE_DEVICES_ENV = "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"


# Ray counts fractions of a resource down to this.
SMALLEST_GPU_FRACTION = 0.0001
# How long a failed run waits for its other calls to fail too before it shuts the workers down (Cluster.settle).
SETTLE_S = 2.0


def bundle_index(plan: ExecutionPlan) -> dict[int, tuple[int, int]]:
    """Each GPU (slot) of the plan → (its placement group, its bundle there): a group's bundles are its GPUs in
    the plan's order."""
    return {g: (grp.index, b) for grp in plan.groups for b, g in enumerate(grp.gpus)}


def gpu_share(plan: ExecutionPlan, group: int) -> float:
    """The fraction of each GPU (slot) of a placement group that one role's processes reserve there: colocated
    roles take turns on the same GPUs, so each reserves an equal share and together they never ask for more
    than the bundle holds."""
    roles = next((grp.roles for grp in plan.groups if grp.index == group), ())
    return 1.0 / max(1, len(roles))


@dataclass(frozen=True)
class EnginePlacement:
    """Where one rollout engine runs and what its process asks of Ray."""

    index: int  # the engine's number (the plan's `engine` coordinate)
    group: int  # the placement group of its GPUs
    slots: tuple[int, ...]  # its GPUs (slots) in the engine's rank order (tp fastest, then pp)
    bundles: tuple[int, ...]  # their bundles in the group, in the same order
    gpu_share: float  # the fraction of each of those GPUs the plan gives the rollout
    num_gpus: float  # what the engine's own process reserves of its first bundle's GPU
    env: tuple[tuple[str, str], ...] = ()  # variables its process starts with, over the role's own
    # Whether the process must see every GPU of the engine (CUDA_VISIBLE_DEVICES naming the bundles' GPUs): an
    # SGLang engine starts its tensor-parallel ranks as subprocesses of this one, on GPUs 0 … tp·pp − 1.
    sees_all_gpus: bool = False


def rollout_engines(plan: ExecutionPlan) -> list[EnginePlacement]:
    """The rollout's engines, each on its own GPUs (bundles), in engine order; none for a plan without a rollout.

    An engine on one GPU is one process that reserves the rollout's share of that GPU. A vLLM engine over several
    GPUs starts one Ray worker per GPU itself (its `ray` executor), in the placement group of the engine's
    process: that process reserves no GPU (the workers run the model), and its environment tells vLLM which
    bundles are this engine's and how much of each GPU a worker may reserve (vllm.ray_worker_env); left to
    itself, every engine would take the group's first bundles, a whole GPU per worker, beside roles already
    holding part of them, and wait forever. An SGLang engine over several GPUs starts its ranks as subprocesses,
    which see what its process sees: a Ray actor reserves part of a single bundle only, so the process reserves
    the rollout's share of its first GPU and is shown all of the engine's GPUs by CUDA_VISIBLE_DEVICES, which Ray
    is told to leave alone (Cluster.spawn_engine names the GPUs once Ray has tied each bundle to one).
"""
    role, placement = plan.experiment.role("rollout"), plan.placement("rollout")
    if role is None or placement is None or not placement.ranks:
        return []
    bundles = bundle_index(plan)
    share = gpu_share(plan, placement.group)
    ranks: dict[int, list[int]] = {}
    for slot in placement.ranks:  # in rank order, which is the engines' own (tp fastest, then pp)
        ranks.setdefault(dict(slot.coords).get("engine", 0), []).append(slot.gpu)
    engines = []
    for index, slots in sorted(ranks.items()):
        group = bundles[slots[0]][0]
        indices = tuple(bundles[g][1] for g in slots)
        num_gpus, env, sees_all = share, {}, False
        if len(slots) > 1 and role.backend == "vllm":
            from rlcfg.runtime.backends import vllm

            num_gpus, env = 0.0, vllm.ray_worker_env(indices, share)
        elif len(slots) > 1 and role.backend == "sglang":  # on one node: check_plan refuses one across nodes
            env, sees_all = {KEEP_VISIBLE_DEVICES_ENV: "1"}, True
        engines.append(EnginePlacement(index=index, group=group, slots=tuple(slots), bundles=indices,
                                       gpu_share=share, num_gpus=num_gpus, env=tuple(sorted(env.items())),
                                       sees_all_gpus=sees_all))
    return engines


@contextlib.contextmanager
def _reaped_instance():
    """Mark the processes of the private Ray instance about to start (they inherit the marker from this
    process's environment while ray.init starts them) and start the watcher that ends them, and every other
    process descended from this driver, once the driver is gone (rlcfg/runtime/reaper.py)."""
    if not os.path.isdir("/proc"):  # the watcher reads /proc; elsewhere Ray's own fate-sharing is all there is
        yield
        return
    marker = f"RLCFG_RUN_MARK={uuid.uuid4().hex}"
    reaper = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reaper.py")
    # Its own session: a kill of the driver's process group must not take the watcher with it. Its stdin is
    # the read end of a pipe whose write end only this process holds.
    proc = subprocess.Popen([sys.executable, reaper, marker, str(os.getpid())], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
    _REAPERS.append(proc)  # kept referenced: the pipe must stay open as long as this process lives
    key, value = marker.split("=", 1)
    # RAY_ADDRESS would turn even address="local" into joining that cluster; a private instance ignores it
    # (the CLI has already taken it as --address when it was meant).
    saved = {k: os.environ.get(k) for k in (key, "RAY_ADDRESS")}
    os.environ[key] = value
    os.environ.pop("RAY_ADDRESS", None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


_REAPERS: list[Any] = []


def _job_env() -> dict[str, str]:
    """Environment of every worker of this run. The driver's pid and host tell a worker whom to watch: it
    exits as soon as the driver is gone (workers.watch_driver), instead of when Ray notices, seconds later."""
    return {"TOKENIZERS_PARALLELISM": "false", "RLCFG_DRIVER_PID": str(os.getpid()),
            "RLCFG_DRIVER_HOST": socket.gethostname()}


def slot_cpus(plan: ExecutionPlan, nodes: list[dict[str, Any]], node_ids: list[str], kind: str) -> float:
    """The CPUs of each slot of the plan: the CPUs of the Ray node it lands on, shared among the plan's slots
    there, and the smallest such share over the plan's nodes, so that one bundle size fits on every node. `nodes`
    is ray.nodes(); `node_ids` the node that plays each plan node (Cluster._plan_nodes), empty when the plan's one
    node may be any alive node with `kind` ("GPU", or "CPU" on a cluster without GPUs). The driver's own host
    has no say: it may be a small head node, or no node of the cluster at all."""
    resources = {n["NodeID"]: n.get("Resources", {}) for n in nodes if n.get("Alive")}
    slots = sorted({g for grp in plan.groups for g in grp.gpus})
    if node_ids:
        per_node = Counter(plan.cluster.node_of(g) for g in slots)
        shares = [resources.get(node_ids[k], {}).get("CPU", 0.0) / count for k, count in per_node.items()]
    else:
        shares = [r.get("CPU", 0.0) / max(1, len(slots)) for r in resources.values() if r.get(kind, 0) > 0]
    return max(0.01, min(shares, default=0.0))


class Cluster:
    """Ray, the placement groups of the plan, and the actors on them."""

    def __init__(self, plan: ExecutionPlan, machine: Machine, address: str | None, debug: bool,
                 threads: int | None = None):
        import ray
        from ray.util.placement_group import placement_group

        self.ray = ray
        self.machine = machine
        if not ray.is_initialized():
            if address:
                from rlcfg.runtime.environment import RunEnvironmentError

                try:
                    ray.init(address=address, log_to_driver=debug, logging_level="INFO" if debug else "WARNING",
                             runtime_env={"env_vars": _job_env()})
                except (ConnectionError, RuntimeError, ValueError) as exc:
                    line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                    raise RunEnvironmentError(f"cannot join the Ray cluster at {address}: {line}") from None
            else:
                # A private local instance turns Ray's token authentication on by itself and logs a warning
                # about it on every run: nothing the user chose or has to act on, so it stays out of the output.
                import logging

                logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
                # The dashboard stays off (and would only listen on 127.0.0.1).
                # address="local": a private instance, even when `ray start` runs on this machine (ray.init
                # without an address would join that cluster, which is not what a plain `rlcfg run` means).
                # Ray ties its processes to this driver (they die with it) and the workers watch it too.
                with _reaped_instance():
                    ray.init(address="local", num_cpus=machine.cpus, num_gpus=machine.gpus,
                             include_dashboard=False, dashboard_host="127.0.0.1", log_to_driver=debug,
                             logging_level="INFO" if debug else "WARNING", runtime_env={"env_vars": _job_env()})
        self.slots = sorted({g for grp in plan.groups for g in grp.gpus})
        # On a cluster the GPUs are wherever Ray says, not necessarily on this machine.
        self.use_gpu = ray.cluster_resources().get("GPU", 0) > 0
        self.node_ids = self._plan_nodes(plan, address) if address else []
        cpus_per_slot = slot_cpus(plan, ray.nodes(), self.node_ids, "GPU" if self.use_gpu else "CPU")
        self.cpus_per_slot = cpus_per_slot
        # Threads per worker: colocated roles take turns on a slot, so each may use the slot's whole share.
        self.threads = threads or max(1, int(cpus_per_slot))
        self.groups: dict[int, Any] = {}
        self.bundle_of = bundle_index(plan)  # slot → (group, bundle index)
        for grp in plan.groups:
            if not grp.gpus:
                continue
            bundle = {"GPU": 1, "CPU": 1} if self.use_gpu else {"CPU": cpus_per_slot}
            pinned: dict[str, Any] = {}
            if self.node_ids:
                # Each GPU of the plan on the Ray node that plays its plan node (see _plan_nodes).
                pinned["bundle_label_selector"] = [{"ray.io/node-id": self.node_ids[plan.cluster.node_of(g)]}
                                                   for g in grp.gpus]
            pg = placement_group([dict(bundle) for _ in grp.gpus], strategy="PACK",
                                 name=f"rlcfg-{plan.experiment.name}-group{grp.index}", **pinned)
            self.groups[grp.index] = pg
        if self.groups:
            timeout = 600 if address else 60
            ready = [pg.ready() for pg in self.groups.values()]
            done, pending = ray.wait(ready, num_returns=len(ready), timeout=timeout)
            if pending:
                raise RuntimeError(f"Ray could not reserve the plan's {len(self.slots)} "
                                   f"{'GPUs' if self.use_gpu else 'CPU slots'} within {timeout} s; the cluster is "
                                   "too small for this plan")
        self.shares = {grp.index: gpu_share(plan, grp.index) for grp in plan.groups}
        self.actors: list[Any] = []

    def _plan_nodes(self, plan: ExecutionPlan, address: str) -> list[str]:
        """The Ray node id that plays each node of the plan on a joined cluster: the alive nodes with GPUs
        (with CPUs, on a cluster without GPUs), the head first, then by address and id. Empty for a one-node
        plan (any node will do)."""
        from rlcfg.runtime.environment import RunEnvironmentError

        if plan.cluster.nodes <= 1:
            return []
        # Placement groups take per-bundle label selectors since Ray 2.46, and honour them since ray-project/ray
        # PR 55599 (August 2025, Ray 2.50); before, the plan's nodes could only be ignored.
        version = tuple(int(p) for p in re.findall(r"\d+", self.ray.__version__)[:2])
        if version < (2, 50):
            raise RunEnvironmentError(
                f"placing the roles on the plan's {plan.cluster.nodes} nodes needs Ray 2.50 or later (placement-"
                f"group label selectors); this is Ray {self.ray.__version__}: upgrade Ray on the cluster and here "
                "(pip install -U 'ray>=2.50')")
        kind = "GPU" if self.use_gpu else "CPU"
        alive = [n for n in self.ray.nodes() if n.get("Alive") and n.get("Resources", {}).get(kind, 0) > 0]
        alive.sort(key=lambda n: ("node:__internal_head__" not in n.get("Resources", {}),
                                  n.get("NodeManagerAddress", ""), n.get("NodeID", "")))
        if len(alive) < plan.cluster.nodes:
            raise RunEnvironmentError(
                f"the plan places roles on {plan.cluster.nodes} nodes, and the Ray cluster at {address} has "
                f"{len(alive)} node{'s' if len(alive) != 1 else ''} with {kind}s; add nodes (`ray start --address "
                "<head>:6379` on each) or plan for fewer (`rlcfg plan --show-gpu-map`)")
        return [n["NodeID"] for n in alive[:plan.cluster.nodes]]

    def spawn(self, cls: type, role: str, group: int, slot: int, args: tuple,
              env: dict[str, str] | None = None, num_gpus: float | None = None) -> Any:
        """An actor of `cls` for `role` on the bundle of `slot`, its process started with the environment
        variables `env` (the role's, Role.env). Its share of the bundle assumes every role of the group has a
        process there (gpu_share), so fused workers reserve less than the bundle holds, never more; `num_gpus`
        overrides the GPU it reserves (a multi-GPU engine's process, rollout_engines)."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        g, bundle = self.bundle_of[slot]
        share = self.shares.get(group, 1.0)
        options: dict[str, Any] = {
            "scheduling_strategy": PlacementGroupSchedulingStrategy(self.groups[g], placement_group_bundle_index=bundle),
            "max_concurrency": 1,  # calls run in submission order: the phases of a step never interleave
        }
        # rlcfg's own switches reach the workers even on a cluster started before this driver's environment; they
        # win over the role's variables, which win over the job's (Ray merges a job's env_vars under an actor's).
        switches = {k: v for k, v in os.environ.items() if k in FORWARDED_ENV}
        env_vars = {**(env or {}), **switches}
        if env_vars:
            options["runtime_env"] = {"env_vars": env_vars}
        if self.use_gpu:
            options.update(num_gpus=share if num_gpus is None else num_gpus, num_cpus=share)
        else:
            options.update(num_cpus=self.cpus_per_slot * share)
        actor = self.ray.remote(cls).options(**options).remote(*args)
        self.actors.append(actor)
        return actor

    def spawn_engine(self, cls: type, engine: EnginePlacement, args: tuple, env: dict[str, str] | None = None) -> Any:
        """The process of one rollout engine (rollout_engines), on its first GPU's bundle, started with the role's
        variables `env` and the engine's own over them."""
        env_vars = {**(env or {}), **dict(engine.env)}
        if engine.sees_all_gpus and self.use_gpu:
            env_vars["CUDA_VISIBLE_DEVICES"] = ",".join(self.device_ids(engine.slots))
        return self.spawn(cls, "rollout", engine.group, engine.slots[0], args, env_vars, num_gpus=engine.num_gpus)

    def device_ids(self, slots: list[int] | tuple[int, ...]) -> list[str]:
        """The GPU of each slot's bundle, as its node's CUDA_VISIBLE_DEVICES names it (what Ray would set for an
        actor that reserves part of that bundle). Ray ties each bundle to one GPU when it reserves the group; a
        task that reserves the smallest fraction Ray counts learns which. Asked while some of every bundle is free:
        before the processes that share the slots are all there."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        # Defined here, it travels to the task by value: the task's process need not import this module (and torch).
        def reserved_gpus() -> list[str]:
            import ray

            return [str(i) for i in ray.get_runtime_context().get_accelerator_ids().get("GPU", [])]

        probe = self.ray.remote(num_cpus=0, num_gpus=SMALLEST_GPU_FRACTION)(reserved_gpus)
        calls = []
        for slot in slots:
            g, bundle = self.bundle_of[slot]
            strategy = PlacementGroupSchedulingStrategy(self.groups[g], placement_group_bundle_index=bundle)
            calls.append(probe.options(scheduling_strategy=strategy).remote())
        return [ids[0] for ids in self.get(calls)]

    def get(self, calls: Any) -> Any:
        """ray.get; when one of several calls fails, the others are read too (settle) before its error is raised,
        so that Ray does not print theirs as unhandled after the run's one-line message."""
        try:
            return self.ray.get(calls)
        except Exception:
            if isinstance(calls, list):
                self.settle(calls)
            raise

    def settle(self, calls: list[Any]) -> None:
        """Read, quietly, the calls of a failing run that end within SETTLE_S (they fail the same way a moment
        later); those still running are left to the shutdown."""
        if not calls:
            return
        ready, _running = self.ray.wait(calls, num_returns=len(calls), timeout=SETTLE_S)
        for call in ready:
            try:
                self.ray.get(call)
            except Exception:  # the run is failing already, with the first error
                pass

    def shutdown(self) -> None:
        from ray.util.placement_group import remove_placement_group

        for actor in self.actors:
            try:
                self.ray.kill(actor)
            except Exception:  # already dead
                pass
        for pg in self.groups.values():
            try:
                remove_placement_group(pg)
            except Exception:  # already gone with the cluster
                pass


class Trigger:
    """When a periodic action (a checkpoint, an evaluation) is due, as AReaL's EpochStepTimeFreqCtl decides it:
    after every `steps`-th step, at the end of every `epochs`-th epoch, or once `seconds` have passed since the
    time trigger last fired (counted from the start of this invocation); each trigger counts on its own. The
    time is read when a step starts, since a step to be saved or evaluated must not have the next one queued
    behind it."""

    def __init__(self, steps: int | None, epochs: int | None = None, seconds: float | None = None):
        self.steps, self.epochs, self.seconds = steps, epochs, seconds
        self.last_fired = time.monotonic()

    def due(self, step: int, epochs_before: int, epochs_after: int) -> bool:
        by_steps = bool(self.steps and step % self.steps == 0)
        by_epochs = bool(self.epochs and epochs_after > epochs_before and epochs_after % self.epochs == 0)
        by_time = bool(self.seconds and time.monotonic() - self.last_fired >= self.seconds)
        if by_time:
            self.last_fired = time.monotonic()
        return by_steps or by_epochs or by_time


def plan_here(exp: Experiment, address: str | None = None, machine: Machine | None = None
              ) -> tuple[ExecutionPlan, list[str]]:
    """The plan of `exp` on the machine at hand: its GPUs, or, with none, one CPU slot per GPU the roles ask
    for (each becomes a CPU bundle). Joining a cluster (`address`) keeps the cluster the config describes.
    Returns the plan and its error messages (warnings, like idle GPUs, are not the runtime's concern)."""
    from rlcfg.diagnostics import Severity
    from rlcfg.plan import build_plan
    from rlcfg.plan.model import ClusterShape

    machine = machine or detect_machine()
    if address:
        plan, diagnostics = build_plan(exp)
    elif machine.gpus:
        import torch

        memory = torch.cuda.get_device_properties(0).total_memory
        plan, diagnostics = build_plan(exp, ClusterShape(nodes=1, gpus_per_node=machine.gpus,
                                                         gpu_name=torch.cuda.get_device_name(0),
                                                         gpu_memory_bytes=memory))
    else:
        # Lay the roles out on a roomy virtual node first, then size the node to the slots they took.
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        roomy, _ = build_plan(exp, ClusterShape(nodes=1, gpus_per_node=1024, gpu_name="cpu", gpu_memory_bytes=ram))
        used = sorted({g for p in roomy.placements for g in p.gpus}) or [0]
        plan, diagnostics = build_plan(exp, ClusterShape(nodes=1, gpus_per_node=max(used) + 1, gpu_name="cpu",
                                                         gpu_memory_bytes=ram))
        # A memory estimate for GPUs says nothing about a CPU run.
        diagnostics = [d for d in diagnostics if not d.code.startswith("RLC5")]
    errors = [f"{d.code} {d.path}: {d.message}" + (f" ({d.hint})" if d.hint else "")
              for d in diagnostics if d.severity == Severity.ERROR]
    return plan, errors


def threads_for(exp: Experiment) -> int | None:
    """1 torch thread per worker for a tiny model (under ~20M parameters, from its config.json): its matrices
    are too small for intra-op parallelism to pay, and idle threads spinning on a shared CPU cost more than
    they give. None (the slot's CPUs) otherwise."""
    actor = exp.role("actor")
    config_file = os.path.join(actor.model.path, "config.json") if actor and actor.model else ""
    if not os.path.isfile(config_file):
        return None
    with open(config_file, encoding="utf-8") as f:
        config = json.load(f)
    try:
        hidden, layers = int(config["hidden_size"]), int(config["num_hidden_layers"])
        vocab = int(config.get("vocab_size", 0))
    except (KeyError, TypeError, ValueError):
        return None
    return 1 if 12 * layers * hidden * hidden + 2 * vocab * hidden < 20_000_000 else None


def run_tokenizer(path: str) -> Any:
    """The tokenizer at `path`; one that is neither local nor fetchable is a FileNotFoundError naming it."""
    from rlcfg.runtime.data import load_tokenizer

    try:
        return load_tokenizer(path)
    except OSError as exc:
        reason = str(exc).strip().splitlines()[0]
        raise FileNotFoundError(f"cannot load the tokenizer of `{path}`: it is not a local directory, and fetching "
                                f"it from the Hugging Face Hub failed ({reason})") from None


def worker_path(path: str) -> str:
    """A model path as the workers must see it: a local folder made absolute (on a cluster a worker's working
    directory is its raylet's, not the driver's), a Hub id as it is."""
    return os.path.abspath(path) if path and os.path.exists(path) else path


class RunShell:
    """One run of an ExecutionPlan. `run()` prepares (everything that can fail before Ray starts), starts the
    workers, restores a checkpoint, and loops over the steps; a subclass says what preparing, starting, a step and
    an evaluation are."""

    def __init__(self, plan: ExecutionPlan, options: RunOptions):
        self.plan, self.opt = plan, options
        self.exp = plan.experiment
        self.alg = self.exp.algorithm
        # The driver's host: what a private Ray instance is started with, and what preflight judges when no
        # cluster is joined. Where the workers compute is the cluster's to say (device).
        self.machine = detect_machine()
        self.notes: set[str] = set()

    @property
    def device(self) -> str:
        """The workers' device: CUDA when the Ray cluster has GPUs. Launched with --address from a CPU-only head
        node, the driver's host has none, and the workers still run on the cluster's GPU nodes."""
        return "cuda" if self.cluster.use_gpu else "cpu"

    def _prepare_folders(self) -> None:
        """The output and checkpoint folders: writable, room for a checkpoint, and which checkpoint (if any)
        this run continues from. All before Ray starts."""
        from rlcfg.runtime import outputs
        from rlcfg.runtime.environment import RunEnvironmentError, check_writable

        exp, opt = self.exp, self.opt
        out = opt.output_dir
        # Absolute: workers write into it, and on a cluster a worker's working directory is its raylet's.
        self.ckpt_root = os.path.abspath(opt.checkpoint_dir or exp.checkpointing.directory
                                         or os.path.join(out, "checkpoints"))
        check_writable(out, "output folder")
        check_writable(self.ckpt_root, "checkpoint folder")
        try:
            self.lock = outputs.lock(out)
        except outputs.RunFolderBusy as exc:
            raise RunEnvironmentError(str(exc)) from None
        try:
            self._choose_checkpoint()
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        """Let go of the output folder's lock (a killed run's goes with its process)."""
        lock, self.lock = getattr(self, "lock", None), None
        if lock is not None:
            lock.close()

    def _choose_checkpoint(self) -> None:
        from rlcfg.runtime import outputs
        from rlcfg.runtime.environment import RunEnvironmentError, check_free_space, directory_bytes

        exp, opt = self.exp, self.opt
        out = opt.output_dir
        # What a killed run left half-written goes first (this run holds the folder's lock: no live run owns it),
        # also so that it does not count against the free space.
        outputs.clean_leftovers(out)
        ckpt.clean_partial(self.ckpt_root)
        # One checkpoint holds the weights, the optimizer's two moments and the exported model, in fp32 where
        # the model's files may be bf16: measured at about five times the model's files (the actor's, when it is
        # a local folder), which must fit before the previous checkpoint is pruned.
        actor = exp.role("actor")
        if actor and actor.model and os.path.isdir(actor.model.path):
            check_free_space(self.ckpt_root, 5 * directory_bytes(actor.model.path), "checkpoint folder")
        existing = ckpt.candidates(self.ckpt_root)
        self.resume_path = None
        self.skipped: list[tuple[str, str]] = []
        if opt.overwrite:
            for path in outputs.overwrite(out, self.ckpt_root):
                print(f"rlcfg: --overwrite: deleted {path}", file=opt.stream or sys.stderr)
        elif not opt.resume and existing:
            # Starting over beside an earlier run's checkpoints would mix the two runs (and let pruning delete
            # the new ones first): the user says which they mean.
            raise RunEnvironmentError(
                f"{out} already holds a run (checkpoints up to step {existing[-1][0]} in {self.ckpt_root}); rerun "
                "with --resume to continue it, add --overwrite to delete its checkpoints, metrics, plots "
                "and exported model and start over, or choose another --output")
        elif opt.resume == "latest":
            self.resume_path, self.skipped = ckpt.newest_good(self.ckpt_root)
        elif opt.resume:
            ckpt.read_driver_state(opt.resume)  # a bad path fails before Ray starts
            ckpt.verify_loadable(opt.resume)  # a hostile file is refused as such, before anything reads it
            reason = ckpt.verify(opt.resume)
            if reason is not None:
                raise ckpt.DamagedCheckpointError(f"cannot resume from {opt.resume}: {reason}; choose another "
                                                  "checkpoint (--resume-from), or leave it out to take the newest "
                                                  "one that verifies")
            self.resume_path = opt.resume
        if self.resume_path:
            saved = ckpt.read_settings(self.resume_path)
            changed = ckpt.math_differences(saved, to_json(exp)) if saved is not None else []
            if changed:
                shown = "; ".join(changed[:5]) + (f"; and {len(changed) - 5} more" if len(changed) > 5 else "")
                raise RunEnvironmentError(
                    f"cannot resume from {self.resume_path}: the config changed settings that change what the run "
                    f"computes ({shown}); restore them, or start a new run in another --output (or --overwrite)")

    def _optimizer_steps(self) -> int:
        return self.total_steps * max(1, self.plan.batch.optimizer_steps_per_step)

    def _schedule_train_steps(self) -> int:
        """The length, in training steps, of a learning-rate schedule advanced once per training step (AReaL's
        FinetuneSpec.total_train_steps): with epochs, the epochs' batches, which a step cap does not shorten."""
        if self.exp.schedule.epochs:
            return int(self.exp.schedule.epochs) * max(1, self.sampler.size // self.sampler.batch)
        return self.total_steps

    def _lower_megatron(self) -> dict[str, Any]:
        """The Megatron roles lowered to megatron-core's settings, here rather than in the workers so that a
        model or layout megatron cannot take (heads vs TP, layers vs pipeline stages) fails before Ray starts."""
        from rlcfg.runtime.backends import megatron as M

        out = {}
        for role in self.exp.roles:
            if role.backend != "megatron":
                continue
            try:
                spec = M.model_spec_for(role)
                seq = (self.exp.data.max_prompt_length or 0) + (self.exp.sampling.max_new_tokens or 0)
                seq = min(seq, self.exp.sampling.max_total_length or seq)
                if self.exp.episodes is not None:
                    seq = self.exp.episodes.longest_sequence(self.exp.sampling.max_new_tokens)
                out[role.name] = M.lower_role(role, spec, len(self.plan.placement(role.name).ranks),
                                              self._optimizer_steps(), seq_length=seq or None,
                                              schedule_train_steps=self._schedule_train_steps())
            except M.MegatronConfigError as e:
                raise PreflightError(f"this plan cannot run here:\n  - {e}") from None
        return out

    def _shards(self, role: str, workers: list[Any]) -> list[int]:
        """The data shard each worker of a role trains on: its own with fsdp, or its Ulysses group's (runs of
        `sp` consecutive ranks); with megatron every rank of a tensor/pipeline group shares its data-parallel
        rank's shard."""
        settings = self.megatron.get(role)
        if settings is None:
            sp = max(self.exp.role(role).parallelism.sp, 1)
            return [rank // sp for rank in range(len(workers))]
        from rlcfg.runtime.backends.megatron import data_parallel_rank

        return [data_parallel_rank(rank, settings.layout) for rank in range(len(workers))]

    def _one_per_shard(self, role: str, results: list[Any]) -> list[Any]:
        """One worker's result per data shard, in shard order: the ranks of a tensor/pipeline (or Ulysses) group
        return the same values, which must be counted once."""
        first: dict[int, Any] = {}
        for shard, result in zip(self._shards(role, results), results):
            first.setdefault(shard, result)
        return [first[s] for s in sorted(first)]

    def _train_spec(self, role: Role, kind: str) -> TrainSpec:
        dtype = role.model.dtype if role.model else "float32"
        if self.device == "cpu" and dtype == "float16":
            dtype = "bfloat16"  # CPUs have no fast fp16 kernels; bf16 keeps the same memory
            self.notes.add(f"{role.name}: float16 runs as bfloat16 on CPU (no fast fp16 kernels there)")
        return TrainSpec(kind=kind, model_path=worker_path(role.model.path), dtype=dtype, device=self.device,
                         backend="megatron" if role.name in self.megatron else "fsdp",
                         megatron=self.megatron.get(role.name), seed=self.exp.seed, optimizer=role.optimizer,
                         total_optimizer_steps=self._optimizer_steps(),
                         schedule_train_steps=self._schedule_train_steps(),
                         gradient_checkpointing=role.gradient_checkpointing, fsdp_shard=role.parallelism.fsdp_shard,
                         temperature=self.exp.sampling.temperature, cpu_offload=role.offload.cpu_offload_during_step,
                         offload_params=role.offload.params, offload_optimizer=role.offload.optimizer,
                         sequence_packing=role.sequence_packing,
                         max_tokens_per_micro_batch=role.max_tokens_per_micro_batch,
                         budget_key=role.key_for("max_tokens_per_micro_batch"), disable_dropout=role.disable_dropout,
                         frozen_prefixes=role.frozen_prefixes, lora=role.lora,
                         sequence_parallel=max(role.parallelism.sp, 1))

    def _start_trainers(self, roles: list[tuple[Role, str]], rollout_spec: RolloutSpec | None = None) -> list[Any]:
        """One worker per rank of roles[0]; the other roles share its processes (same GPUs, same ranks)."""
        from rlcfg.runtime.workers import HybridWorker, TrainWorker

        placement = self.plan.placement(roles[0][0].name)
        world = len(placement.ranks)
        specs = {role.name: self._train_spec(role, kind) for role, kind in roles}
        cls, extra = (HybridWorker, (rollout_spec, self.exp.reward_function)) if rollout_spec else (TrainWorker, ())
        env = roles[0][0].env_vars()
        if any(role.env_vars() != env for role, _ in roles):
            raise AssertionError("roles with different environments were given one process (see _beside_actor)")
        return [self.cluster.spawn(cls, roles[0][0].name, placement.group, slot.gpu,
                                   (specs, slot.rank, world, self.cluster.threads, *extra), env)
                for slot in placement.ranks]

    def _setup_trainers(self, groups: list[list[Any]]) -> None:
        calls = []
        for workers in groups:
            address, port = self.cluster.get(workers[0].rendezvous.remote())
            calls += [w.setup.remote(address, port) for w in workers]
        from rlcfg.runtime.backends.fsdp import LoraTargetError
        from rlcfg.runtime.backends.ulysses import UlyssesError

        try:
            self.cluster.get(calls)
        except LoraTargetError as exc:  # Ray's wrapper of a worker's error is an instance of it too
            raise PreflightError(self._lora_target_problem(getattr(exc, "cause", None) or exc)) from None
        except UlyssesError as exc:
            raise PreflightError(self._ulysses_problem(getattr(exc, "cause", None) or exc)) from None
        if any(role.frozen_prefixes for role in self.exp.roles):
            self._warn_unmatched_prefixes(groups)

    def _lora_target_problem(self, exc: Any) -> str:
        """The message of a LoRA target the loaded model refuses, under the config's key for it."""
        roles = [r for r in self.exp.roles if r.lora is not None]
        keys = [r.key_for("lora.target_modules") for r in roles]
        key = next((k for k in keys if k), "the LoRA target modules")
        return f"this plan cannot run here:\n  - `{key}` {getattr(exc, 'problem', exc)}"

    def _ulysses_problem(self, exc: Any) -> str:
        """The message of a model whose attention the Ulysses size cannot split, under the config's key for it."""
        roles = [r for r in self.exp.roles if r.parallelism.sp > 1]
        keys = [f"`{r.key_for('parallelism.sp')}` = {r.parallelism.sp}" for r in roles if r.key_for("parallelism.sp")]
        said = keys[0] if keys else f"the Ulysses sequence parallel size ({roles[0].parallelism.sp})"
        return f"this plan cannot run here:\n  - {said}: {exc}"

    def _warn_unmatched_prefixes(self, groups: list[list[Any]]) -> None:
        """A frozen prefix that names no parameter freezes nothing, silently in ROLL; said here, once the models
        are loaded (every rank holds the same names)."""
        unmatched: dict[str, list[str]] = {}
        for found in self.cluster.get([workers[0].unmatched_frozen_prefixes.remote() for workers in groups]):
            unmatched.update(found)
        stream = self.opt.stream or sys.stderr
        for name, prefixes in sorted(unmatched.items()):
            role = self.exp.role(name)
            key = (role.key_for("frozen_prefixes") if role is not None else None) or f"the {name}'s frozen prefixes"
            print(f"rlcfg: warning: {key}: {', '.join(repr(p) for p in prefixes)} "
                  f"match{'es' if len(prefixes) == 1 else ''} no parameter of the {name}'s model, so "
                  f"{'it freezes' if len(prefixes) == 1 else 'they freeze'} nothing", file=stream, flush=True)

    def _record_placement(self) -> None:
        """DIR/placement.json: where each worker of each role runs (its plan GPU and node, and the Ray node
        that holds it), for anyone checking a multi-node run against `rlcfg plan --show-gpu-map`."""
        from rlcfg.runtime.outputs import write_json

        record: dict[str, list[dict[str, Any]]] = {}
        for role, workers in (("actor", self.actor), ("reference", self.reference), ("critic", self.critic),
                              ("rollout", self.rollout)):
            placement = self.plan.placement(role)
            if not workers or placement is None:
                continue
            nodes = self.cluster.get([w.node_id.remote() for w in workers])
            slots = placement.ranks if len(placement.ranks) == len(workers) else \
                [s for s in placement.ranks if s.rank % max(1, len(placement.ranks) // len(workers)) == 0]
            record[role] = [{"rank": i, "gpu": slot.gpu, "plan_node": self.plan.cluster.node_of(slot.gpu),
                             "ray_node": node} for i, (slot, node) in enumerate(zip(slots, nodes))]
        write_json(os.path.join(self.opt.output_dir, "placement.json"), record)

    def save(self, step: int, metrics: dict[str, Any], t0: float, final: bool) -> str:
        """Checkpoint `step`: the workers' sharded states, the exported model in Hugging Face format (hf/) when
        the config asks for it in checkpoints (save_hf) and always in the `final` checkpoint of an invocation
        (so the output folder's hf_model can be redone from it without a worker), the driver's state with this
        step's metrics line, the run's settings, and the manifest last. `t0`: when saving began."""
        import torch

        tmp = ckpt.begin(self.ckpt_root, step)
        calls = [w.save.remote(os.path.join(tmp, "actor")) for w in self.actor]
        calls += [w.save.remote(os.path.join(tmp, "critic"), "critic") for w in self.critic]
        self.cluster.get(calls)
        if self.exp.checkpointing.save_hf or final:
            self._export(os.path.join(tmp, "hf"))
        torch.save({"python": random.getstate(), "torch": torch.get_rng_state()}, os.path.join(tmp, "driver_rng.pt"))
        metrics["time/checkpoint"] = time.perf_counter() - t0
        state = {"step": step, "sampler": self.sampler_state, "experiment": self.exp.name,
                 "total_steps": self.total_steps, "metrics": metrics, "kl_coef": self.kl_coef,
                 **self.carried_state()}
        path = ckpt.commit(tmp, self.ckpt_root, step, state, settings=to_json(self.exp))
        ckpt.prune(self.ckpt_root, self.exp.checkpointing.keep_last)
        return path

    def _export(self, path: str) -> None:
        self.cluster.get([w.export_hf.remote(path) for w in self.actor])
        self.tokenizer.save_pretrained(path)

    def restore(self, path: str) -> int:
        import torch

        state = ckpt.read_driver_state(path)
        calls = [w.load.remote(os.path.join(path, "actor")) for w in self.actor]
        if self.critic:
            calls += [w.load.remote(os.path.join(path, "critic"), "critic") for w in self.critic]
        self.cluster.get(calls)
        self.sampler.load_state_dict(state["sampler"])
        self.sampler_state = self.sampler.state_dict()
        if state.get("kl_coef") is not None:  # checkpoints before the controller was carried: the configured one
            self.kl_coef = float(state["kl_coef"])
        self.load_carried_state(state)
        rng_file = os.path.join(path, "driver_rng.pt")
        if os.path.exists(rng_file):
            rng = torch.load(rng_file, weights_only=True)
            random.setstate(rng["python"])
            torch.set_rng_state(rng["torch"])
        self._sync_weights()
        return int(state["step"])

    def _publish(self, checkpoint: str, step: int, reporter: Any) -> list[str]:
        """Refresh what a user looks at after a checkpoint: the exported model (copied from the checkpoint when
        it holds one, else exported straight into the output folder) and the plots."""
        from rlcfg.runtime import outputs

        if os.path.isdir(os.path.join(checkpoint, "hf")):
            outputs.publish_model(os.path.join(checkpoint, "hf"), self.opt.output_dir, step)
        elif hasattr(self, "cluster"):
            tmp = outputs.model_tmp(os.path.abspath(self.opt.output_dir))  # absolute: a worker writes it
            self._export(tmp)
            outputs.install_model(tmp, self.opt.output_dir, step)
        return reporter.plots()

    def _finish_only(self, done_steps: int) -> RunResult:
        """The run in this folder is complete: redo what a kill after its last checkpoint may have left
        undone (its last metrics line, the exported model, the plots), without starting Ray."""
        from rlcfg.runtime import outputs
        from rlcfg.runtime.reporting import Reporter

        opt = self.opt
        state = ckpt.read_driver_state(self.resume_path)
        reporter = Reporter(opt.output_dir, ("jsonl",), stream=opt.stream, resume_step=done_steps,
                            restore=state.get("metrics"))
        plots = reporter.plots()
        if outputs.exported_step(opt.output_dir) != done_steps:
            self._publish(self.resume_path, done_steps, reporter)
        reporter.close()
        summary = (f"rlcfg run: the run in {opt.output_dir} is already complete ({done_steps} of "
                   f"{self.total_steps} steps); nothing to do (--overwrite starts it over, another --output "
                   "starts a new one)")
        print(summary, file=opt.stream or sys.stderr, flush=True)
        return RunResult(steps=done_steps, history=[], elapsed_s=0.0, summary=summary, output_dir=opt.output_dir,
                         plots=plots, resumed_from=self.resume_path)

    def run(self) -> RunResult:
        try:
            return self._run()
        finally:
            self.release()

    def _run(self) -> RunResult:
        from rlcfg.runtime.outputs import write_json
        from rlcfg.runtime.reporting import Reporter, summary_line

        self.prepare()
        exp, opt = self.exp, self.opt
        stream0 = opt.stream or sys.stderr
        for path, reason in self.skipped:
            print(f"rlcfg: warning: skipping the checkpoint {path}: {reason}", file=stream0, flush=True)
        if self.skipped and not self.resume_path:
            print("rlcfg: warning: no checkpoint verifies; starting from step 0", file=stream0, flush=True)
        if self.resume_path:
            done_steps = int(ckpt.read_driver_state(self.resume_path)["step"])
            if done_steps >= self.total_steps:  # nothing left to train
                return self._finish_only(done_steps)
        write_json(os.path.join(opt.output_dir, "experiment.json"), to_json(exp))
        if self.resume_path:
            ckpt.verify_loadable(self.resume_path)  # before any worker could unpickle it
        slots = len({g for grp in self.plan.groups for g in grp.gpus})
        kind = "GPU" if self.machine.gpus or opt.address else "CPU slot"
        where = f"the Ray cluster at {opt.address}" if opt.address else "a local Ray instance"
        # Starting Ray and loading every model takes seconds to minutes before the first step: say what is
        # happening rather than sit silent.
        print(f"rlcfg: starting the workers on {where} ({slots} {kind}{'s' if slots != 1 else ''})",
              file=stream0, flush=True)
        try:
            self.start()
            start_step = self.restore(self.resume_path) if self.resume_path else 0
            ready = self.startup["ray_s"] + self.startup["workers_s"]
            print(f"rlcfg: ready in {ready:.1f} s (Ray {self.startup['ray_s']:.1f} s, workers and models "
                  f"{self.startup['workers_s']:.1f} s)", file=stream0, flush=True)
            restore = ckpt.read_driver_state(self.resume_path).get("metrics") if self.resume_path else None
            reporter = Reporter(opt.output_dir, exp.logging.backends, exp.logging.project,
                                exp.logging.run_name or exp.name, stream=opt.stream, resume_step=start_step,
                                config=to_json(exp), restore=restore)
            stream = reporter.stream
            for note in sorted(self.notes):
                print(f"rlcfg: note: {note}", file=stream)
            if self.resume_path:
                print(f"rlcfg: resuming from {self.resume_path} (step {start_step})", file=stream, flush=True)
            note = self.data_note()
            if note:
                print(f"rlcfg: note: {note}", file=stream)
            c, sch = exp.checkpointing, exp.schedule
            saves = Trigger(c.interval, c.epoch_interval, c.time_interval_s)
            evals = Trigger(sch.eval_interval, sch.eval_epoch_interval, sch.eval_time_interval_s)
            if exp.schedule.eval_before_train and start_step == 0 and self.eval_data:
                reporter.log({"step": 0, **self.evaluate()})
            last = self.total_steps
            if opt.max_steps is not None:
                last = min(last, start_step + opt.max_steps)
            self.last_step = last  # no step's rollouts start beyond it
            t_run = time.perf_counter()
            done = 0
            plots: list[str] = []
            for step in range(start_step + 1, last + 1):
                # Whether this step completes an epoch, foreseen from where the previous one left the data (one
                # draw: a step that draws again, with dynamic sampling, never has the next step queued behind it).
                epochs = (self.sampler.epochs_done(self.sampler_state),
                          self.sampler.epochs_done(self.sampler.after_draw(self.sampler_state)))
                evaluating = bool(self.eval_data) and evals.due(step, *epochs)
                # The last step of every invocation is saved too (a run shortened with --steps keeps its
                # progress and exports its model); its checkpoint is where the exported model comes from.
                saving = saves.due(step, *epochs) or step == last
                # Prefetching starts the next step's work behind this one's: an evaluation or a checkpoint must
                # see this step's weights, so they come first.
                metrics = self.step(step, prefetch=step < last and not evaluating and not saving)
                if evaluating:
                    metrics.update(self.evaluate())
                if step == 1 or (step == start_step + 1):
                    metrics.update({f"startup/{k}": v for k, v in self.startup.items()})
                path = self.save(step, metrics, time.perf_counter(), final=step == last) if saving else None
                reporter.log(metrics)
                done += 1
                # The bar and the ETA count to where this invocation stops (--steps), not the config's total.
                reporter.progress(step, last, metrics, time.perf_counter() - t_run, done)
                if step in (start_step + 1, last):  # what the model answers before and after
                    reporter.show_samples(metrics, getattr(self.train_data, "texts", None))
                if path:
                    plots = self._publish(path, step, reporter)
            elapsed = time.perf_counter() - t_run
            summary = summary_line(reporter.history, elapsed, opt.output_dir)
            print(summary, file=stream, flush=True)
            history = list(reporter.history)
            reporter.close()
            return RunResult(steps=last, history=history, elapsed_s=elapsed, summary=summary,
                             output_dir=opt.output_dir, plots=plots, resumed_from=self.resume_path)
        except BaseException:
            if hasattr(self, "cluster"):  # the calls queued behind the one that failed fail too
                self.cluster.settle(self.pending_calls())
            raise
        finally:
            if hasattr(self, "cluster"):
                self.cluster.shutdown()

    def pending_calls(self) -> list[Any]:
        """The worker calls submitted ahead and not yet read (none in the shell)."""
        return []

    # ---- what a kind of run fills in --------------------------------------------------------------------------

    def prepare(self) -> None:
        """Everything that can be checked before Ray starts: the data, the models' paths, the folders
        (_prepare_folders); sets total_steps, sampler, tokenizer, megatron, kl_coef and the train and eval data."""
        raise NotImplementedError

    def start(self) -> None:
        """Start the cluster and the workers; sets cluster, startup, actor, reference, critic and rollout."""
        raise NotImplementedError

    def step(self, step: int, prefetch: bool = False) -> dict[str, Any]:
        """Train one step; its metrics. `prefetch`: start the next step's work behind this one."""
        raise NotImplementedError

    def evaluate(self) -> dict[str, float]:
        raise NotImplementedError

    def data_note(self) -> str | None:
        """What the run says about the training data it left out, if anything."""
        return None

    def _sync_weights(self) -> None:
        """Bring whatever serves the trained model up to its weights (after a restore)."""
        raise NotImplementedError

    def carried_state(self) -> dict[str, Any]:
        """What a kind of run carries from step to step beyond the sampler and the KL coefficient, as JSON: it
        goes into the driver's state of every checkpoint."""
        return {}

    def load_carried_state(self, state: dict[str, Any]) -> None:
        """Take back carried_state() from a checkpoint's driver state."""
