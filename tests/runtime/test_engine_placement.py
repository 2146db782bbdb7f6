"""Where rollout engines go on Ray, and the order in which the driver brings its workers up.

An engine over several GPUs (tp × pp > 1) must get exactly its own GPUs (bundles): vLLM's `ray` executor puts
one worker per GPU into the engine process's placement group, on the bundles and with the GPU fraction the
process's environment names (VLLM_RAY_BUNDLE_INDICES, VLLM_RAY_PER_WORKER_GPUS; without them the group's first
bundles and a whole GPU each, which beside a colocated trainer never fits: the run hangs at start-up). An SGLang
engine starts its ranks as subprocesses of its own process, which must therefore see all of the engine's GPUs.
And an engine sizes its memory by what is free when it is built, so no other process may load a model on its
GPUs meanwhile.

`rollout_engines` is checked on plans directly; `Run.start` against a stand-in for Ray that records what the
driver asks of it (the actors, their resources and environments, and the order of calls and waits), with vLLM's
worker placement computed from the environment an engine process is given, as vLLM 0.32 reads it. A last test
runs the same layout on a real Ray instance with declared (fake) GPUs.
"""

from __future__ import annotations

import dataclasses
import sys
import types
from collections import defaultdict
from typing import Any

import pytest

pytest.importorskip("torch")  # the driver's module imports it

from rlcfg.plan import build_plan  # noqa: E402
from rlcfg.plan.model import ClusterShape  # noqa: E402
from rlcfg.runtime import driver, shell  # noqa: E402
from rlcfg.runtime.backends import Machine, check_plan  # noqa: E402
from tests.plan.factory import experiment, rollout, trainer  # noqa: E402

OVERFULL = 1.0 + 1e-6  # more than one GPU reserved on one GPU's bundle: Ray would never place the last of them


def plan_of(exp, nodes: int | None = None, gpus_per_node: int | None = None):
    cluster = ClusterShape(nodes=nodes, gpus_per_node=gpus_per_node) if nodes else None
    plan, diags = build_plan(exp, cluster)
    # The memory estimate is for real models on real GPUs; only the layout matters here.
    assert not [d for d in diags if d.severity.name == "ERROR" and not d.code.startswith("RLC5")], diags
    return plan


def colocated(gpus: int, tp: int, backend: str = "vllm", reference: bool = False):
    roles = [trainer(gpus=gpus), rollout(gpus=gpus, tp=tp, backend=backend)]
    if reference:
        roles.append(trainer("reference", gpus=gpus, trains=False))
    return experiment(*roles, colocation=(tuple(r.name for r in roles),))


def engine_gpus(plan) -> list[tuple[int, ...]]:
    """Each engine's GPUs, in its rank order, as the plan lays them out."""
    engines: dict[int, list[int]] = defaultdict(list)
    for slot in plan.placement("rollout").ranks:
        engines[dict(slot.coords)["engine"]].append(slot.gpu)
    return [tuple(engines[e]) for e in sorted(engines)]


# ---- rollout_engines: a pure function of the plan ------------------------------------------------------------

@pytest.mark.parametrize("tp", [2, 4])
def test_each_vllm_engine_names_its_own_bundles_and_the_rollouts_share_of_each_gpu(tp):
    plan = plan_of(colocated(8, tp))
    engines = shell.rollout_engines(plan)
    assert [e.slots for e in engines] == engine_gpus(plan) and len(engines) == 8 // tp
    for engine in engines:
        env = dict(engine.env)
        # one group holds every GPU in order, so a GPU's bundle is its number
        assert env["VLLM_RAY_BUNDLE_INDICES"] == ",".join(str(g) for g in engine.slots)
        assert float(env["VLLM_RAY_PER_WORKER_GPUS"]) == 0.5  # actor and rollout take turns on each GPU
        assert engine.num_gpus == 0  # the engine's workers hold its GPUs, not its own process
    bundles = [b for e in engines for b in e.bundles]
    assert sorted(bundles) == list(range(8))  # every engine on GPUs of its own


def test_three_roles_on_a_gpu_each_take_a_third_of_it():
    plan = plan_of(colocated(4, 2, reference=True))
    assert {float(dict(e.env)["VLLM_RAY_PER_WORKER_GPUS"]) for e in shell.rollout_engines(plan)} == {1 / 3}


def test_single_gpu_engines_are_one_process_on_the_rollouts_share_of_their_gpu():
    plan = plan_of(colocated(4, 1))
    engines = shell.rollout_engines(plan)
    assert [(e.slots, e.bundles, e.num_gpus, e.env) for e in engines] == [((g,), (g,), 0.5, ()) for g in range(4)]


def test_an_engine_on_gpus_of_its_own_takes_them_whole():
    plan = plan_of(experiment(trainer(gpus=4), rollout(gpus=4, tp=4)))
    [engine] = shell.rollout_engines(plan)
    assert engine.slots == (4, 5, 6, 7)
    assert engine.group != plan.placement("actor").group
    # bundles count within the rollout's own placement group
    assert dict(engine.env) == {"VLLM_RAY_BUNDLE_INDICES": "0,1,2,3", "VLLM_RAY_PER_WORKER_GPUS": "1.0"}


def test_on_two_nodes_each_engine_keeps_its_own_bundles():
    plan = plan_of(colocated(16, 4), nodes=2, gpus_per_node=8)
    engines = shell.rollout_engines(plan)
    assert [e.bundles for e in engines] == [(0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11), (12, 13, 14, 15)]
    assert [{plan.cluster.node_of(g) for g in e.slots} for e in engines] == [{0}, {0}, {1}, {1}]
    # a vLLM engine may span nodes: its Ray workers go wherever its bundles are
    [wide] = shell.rollout_engines(plan_of(colocated(16, 16), nodes=2, gpus_per_node=8))
    assert dict(wide.env)["VLLM_RAY_BUNDLE_INDICES"] == ",".join(map(str, range(16)))


def test_an_sglang_engine_over_several_gpus_sees_them_all():
    plan = plan_of(colocated(4, 2, backend="sglang", reference=True))
    engines = shell.rollout_engines(plan)
    assert [e.slots for e in engines] == [(0, 1), (2, 3)]
    for engine in engines:
        assert engine.sees_all_gpus and dict(engine.env) == {shell.KEEP_VISIBLE_DEVICES_ENV: "1"}
        assert engine.num_gpus == pytest.approx(1 / 3)  # its process holds the rollout's share of its first GPU
    [single] = shell.rollout_engines(plan_of(colocated(1, 1, backend="sglang")))
    assert not single.sees_all_gpus and single.env == ()  # one GPU: Ray's own CUDA_VISIBLE_DEVICES is right


def test_an_sglang_engine_across_nodes_is_refused_by_the_preflight_that_run_and_the_dry_run_share():
    plan = plan_of(colocated(16, 16, backend="sglang"), nodes=2, gpus_per_node=8)
    problems = check_plan(plan, Machine(gpus=0, cpus=1), has_cluster=True, installed=lambda module: True)
    assert [p for p in problems if "SGLang engine 0 spans nodes" in p and "within a node's GPUs" in p], problems
    within = plan_of(colocated(16, 8, backend="sglang"), nodes=2, gpus_per_node=8)
    assert check_plan(within, Machine(gpus=0, cpus=1), has_cluster=True, installed=lambda module: True) == []


# ---- Run.start against a stand-in for Ray -------------------------------------------------------------------

class Ref:
    def __init__(self, actor=None, value=None):
        self.actor, self.value = actor, value


class Actor:
    """A placed actor: what the driver asked for, and the calls it makes on it."""

    replies = {"rendezvous": ("127.0.0.1", 29500), "node_id": "node-0", "setup": 0.0}

    def __init__(self, ray, cls, options, args):
        self.ray, self.cls, self.options, self.args = ray, cls, options, args
        strategy = options["scheduling_strategy"]
        self.bundle = (strategy.placement_group.index, strategy.placement_group_bundle_index)

    @property
    def env(self) -> dict[str, str]:
        return dict(self.options.get("runtime_env", {}).get("env_vars", {}))

    def __getattr__(self, method):
        if method.startswith("__"):
            raise AttributeError(method)
        actor = self

        class Method:
            @staticmethod
            def remote(*args):
                actor.ray.log.append(("call", actor, method))
                return Ref(actor, Actor.replies.get(method))

        return Method()


class Remote:
    def __init__(self, ray, target, options):
        self.ray, self.target, self.options_ = ray, target, options

    def options(self, **options):
        return Remote(self.ray, self.target, {**self.options_, **options})

    def remote(self, *args):
        if isinstance(self.target, type):
            actor = Actor(self.ray, self.target, self.options_, args)
            self.ray.placed.append(actor)
            return actor
        strategy = self.options_["scheduling_strategy"]
        group, bundle = strategy.placement_group, strategy.placement_group_bundle_index
        self.ray.probes.append(((group.index, bundle), self.options_["num_gpus"], len(self.ray.placed)))
        return Ref(value=[group.device_ids[bundle]])


class PlacementGroup:
    def __init__(self, ray, bundles):
        self.index = len(ray.groups)
        # The GPU Ray ties each bundle to: numbered against the bundle order, so that a mix-up shows.
        self.device_ids = [str(ray.free_gpus.pop()) for _ in bundles]
        ray.groups.append(self)

    def ready(self):
        return Ref()


class FakeRay(types.ModuleType):
    """What the driver uses of Ray: a cluster that is up, placement groups, actors, tasks, waits."""

    def __init__(self, gpus: int):
        super().__init__("ray")
        self.gpus = gpus
        self.free_gpus = list(range(gpus))
        self.groups: list[PlacementGroup] = []
        self.placed: list[Actor] = []
        self.probes: list[tuple[tuple[int, int], float, int]] = []
        self.log: list[tuple] = []

    def is_initialized(self):
        return True

    def cluster_resources(self):
        return {"GPU": float(self.gpus), "CPU": float(2 * self.gpus)}

    def nodes(self):
        return [{"NodeID": "node-0", "Alive": True, "NodeManagerAddress": "10.0.0.1",
                 "Resources": {"GPU": float(self.gpus), "CPU": float(2 * self.gpus)}}]

    def wait(self, refs, num_returns=1, timeout=None):
        return list(refs), []

    def remote(self, *target, **options):
        if target:
            return Remote(self, target[0], {})
        return lambda function: Remote(self, function, options)

    def get(self, refs):
        many = isinstance(refs, list)
        refs = refs if many else [refs]
        self.log.append(("get", [r.actor for r in refs if r.actor is not None]))
        return [r.value for r in refs] if many else refs[0].value

    def kill(self, actor):
        pass


@pytest.fixture
def fake_ray(monkeypatch):
    def install(gpus: int) -> FakeRay:
        ray = FakeRay(gpus)
        util = types.ModuleType("ray.util")
        groups = types.ModuleType("ray.util.placement_group")
        groups.placement_group = lambda bundles, **options: PlacementGroup(ray, bundles)
        groups.remove_placement_group = lambda group: None
        strategies = types.ModuleType("ray.util.scheduling_strategies")

        @dataclasses.dataclass
        class PlacementGroupSchedulingStrategy:
            placement_group: Any
            placement_group_bundle_index: int = -1

        strategies.PlacementGroupSchedulingStrategy = PlacementGroupSchedulingStrategy
        util.placement_group, util.scheduling_strategies = groups, strategies
        ray.util = util
        for name, module in (("ray", ray), ("ray.util", util), ("ray.util.placement_group", groups),
                             ("ray.util.scheduling_strategies", strategies)):
            monkeypatch.setitem(sys.modules, name, module)
        return ray

    return install


def started(plan, fake_ray, tmp_path) -> tuple[driver.Run, FakeRay]:
    """Run.start on the stand-in, from the state Run.prepare leaves (no model, tokenizer or data is read)."""
    ray = fake_ray(plan.cluster.gpus)
    run = driver.Run(plan, driver.RunOptions(output_dir=str(tmp_path), threads=1))
    run.ray_address, run.tokenizer_path, run.megatron, run.total_steps = None, "tokenizer", {}, 1
    run.sampler = types.SimpleNamespace(state_dict=dict)
    run.filters = run.alg.filter_spec()
    run.start()
    return run, ray


def gpu_of(plan) -> dict[tuple[int, int], int]:
    """(placement group, bundle) → the plan's GPU: the stand-in numbers groups in the order the driver makes them."""
    return {(i, b): g for i, grp in enumerate(grp for grp in plan.groups if grp.gpus) for b, g in enumerate(grp.gpus)}


def vllm_workers(engine: Actor) -> list[tuple[tuple[int, int], float]]:
    """The Ray workers vLLM 0.32's `ray` executor starts from this engine process: one per rank, in the process's
    placement group, on the bundles VLLM_RAY_BUNDLE_INDICES names (else the group's first GPU bundles), each
    reserving VLLM_RAY_PER_WORKER_GPUS of a GPU (else 1.0). None for an engine on one GPU (in-process)."""
    if engine.cls.__name__ != "RolloutWorker":
        return []
    args = engine.args[0].engine_args or {}
    if args.get("distributed_executor_backend") != "ray":
        return []
    world = args["tensor_parallel_size"] * args["pipeline_parallel_size"]
    env = engine.env
    group = engine.bundle[0]
    bundles = ([int(b) for b in env["VLLM_RAY_BUNDLE_INDICES"].split(",")] if env.get("VLLM_RAY_BUNDLE_INDICES")
               else list(range(world)))
    return [((group, b), float(env.get("VLLM_RAY_PER_WORKER_GPUS", "1.0"))) for b in bundles]


def reserved(ray: FakeRay) -> dict[tuple[int, int], float]:
    """The GPU reserved on each bundle once every actor and every engine's workers are placed."""
    total: dict[tuple[int, int], float] = defaultdict(float)
    for actor in ray.placed:
        total[actor.bundle] += actor.options.get("num_gpus", 0.0)
        for bundle, gpus in vllm_workers(actor):
            total[bundle] += gpus
    return total


def engines_of(run: driver.Run, ray: FakeRay) -> list[Actor]:
    return [a for a in ray.placed if a.cls.__name__ == "RolloutWorker"]


@pytest.mark.parametrize("exp, nodes", [
    pytest.param(colocated(8, 2), None, id="4-engines-tp2-colocated"),
    pytest.param(colocated(4, 4, reference=True), None, id="tp4-colocated-with-actor-and-reference"),
    pytest.param(experiment(trainer(gpus=4), rollout(gpus=4, tp=4)), None, id="tp4-on-gpus-of-its-own"),
    pytest.param(experiment(trainer(gpus=4), rollout(gpus=8, tp=2), trainer("critic", gpus=4)), None,
                 id="4-engines-tp2-separate"),
    pytest.param(colocated(8, 4), 2, id="two-nodes"),
])
def test_every_vllm_worker_finds_room_on_its_own_engines_gpus(exp, nodes, fake_ray, tmp_path):
    plan = plan_of(exp, nodes=nodes, gpus_per_node=4 if nodes else None)
    run, ray = started(plan, fake_ray, tmp_path)
    # Nothing waits forever: on no GPU do the actors and the engines' workers reserve more than the whole GPU.
    overfull = {bundle: gpus for bundle, gpus in reserved(ray).items() if gpus > OVERFULL}
    assert not overfull, f"bundles asked for more than one GPU: {overfull}"
    # and each engine's workers sit on that engine's GPUs, rank i on its i-th GPU
    where = gpu_of(plan)
    placed = [tuple(where[bundle] for bundle, _ in vllm_workers(engine)) for engine in engines_of(run, ray)]
    assert placed == engine_gpus(plan)


def test_an_sglang_engine_process_sees_its_engines_gpus_in_rank_order(fake_ray, tmp_path):
    plan = plan_of(colocated(4, 2, backend="sglang", reference=True))
    run, ray = started(plan, fake_ray, tmp_path)
    [group] = ray.groups
    engines = engines_of(run, ray)
    assert [e.env["CUDA_VISIBLE_DEVICES"] for e in engines] == [
        ",".join(group.device_ids[b] for b in gpus) for gpus in engine_gpus(plan)]
    assert all(e.env[shell.KEEP_VISIBLE_DEVICES_ENV] == "1" for e in engines)
    assert all(e.options["num_gpus"] == pytest.approx(1 / 3) for e in engines)
    assert not {b: g for b, g in reserved(ray).items() if g > OVERFULL}
    # Each GPU was asked for while there was still room on its bundle for the question.
    for bundle, gpus, placed_before in ray.probes:
        taken = sum(a.options.get("num_gpus", 0.0) for a in ray.placed[:placed_before] if a.bundle == bundle)
        assert taken + gpus <= OVERFULL


# ---- start-up order: engines before the models that share their GPUs ----------------------------------------

def loads_before_engines_are_built(ray: FakeRay, run: driver.Run) -> list[str]:
    """Every model load (a `setup` call) issued on a GPU where an engine of another process had not yet answered a
    call, i.e. might still be measuring its free memory. An actor answers a call only once it is built."""
    where = gpu_of(run.plan)
    gpus_of: dict[int, set[int]] = {}
    for actor in ray.placed:
        gpus_of[id(actor)] = {where[actor.bundle]}
        if actor.cls.__name__ == "RolloutWorker":  # on its engine's first GPU, and the engine on all of them
            gpus_of[id(actor)] = next(set(gpus) for gpus in engine_gpus(run.plan) if gpus[0] == where[actor.bundle])
    engines = [a for a in ray.placed if a.cls.__name__ in ("RolloutWorker", "HybridWorker")]
    answered: set[int] = set()
    early = []
    for event in ray.log:
        if event[0] == "get":
            answered.update(id(a) for a in event[1])
        elif event[2] == "setup":
            loader = event[1]
            for engine in engines:
                if engine is not loader and gpus_of[id(engine)] & gpus_of[id(loader)] and id(engine) not in answered:
                    early.append(f"{loader.cls.__name__} on GPU {sorted(gpus_of[id(loader)])} loads before the "
                                 f"engine on GPUs {sorted(gpus_of[id(engine)])} is built")
    return early


def test_a_colocated_engine_is_built_before_the_trainer_loads_on_its_gpus(fake_ray, tmp_path):
    plan = plan_of(colocated(2, 2))  # one tp=2 engine in a process of its own, beside 2 actor ranks
    run, ray = started(plan, fake_ray, tmp_path)
    assert not run.hybrid
    assert loads_before_engines_are_built(ray, run) == []


def test_hybrid_engines_are_all_built_before_a_separate_reference_loads_on_their_gpus(fake_ray, tmp_path):
    exp = colocated(2, 1, reference=True)
    # a reference with variables of its own gets processes of its own (it cannot join the actor's)
    exp = dataclasses.replace(exp, roles=tuple(dataclasses.replace(r, env=(("RLCFG_TEST", "1"),))
                                               if r.name == "reference" else r for r in exp.roles))
    run, ray = started(plan_of(exp), fake_ray, tmp_path)
    assert run.hybrid and run.reference is not run.actor and len(run.actor) == 2
    assert loads_before_engines_are_built(ray, run) == []



# ---- on Ray itself, with declared GPUs ----------------------------------------------------------------------

def test_on_ray_engines_get_their_own_gpus_beside_the_trainer():
    ray = pytest.importorskip("ray")
    from rlcfg.runtime.backends import Machine
    from tests.runtime.ray_standins import Visible, VLLMStandIn

    if ray.is_initialized():
        ray.shutdown()
    # Declared GPUs: Ray reserves them, and sets CUDA_VISIBLE_DEVICES, as it does real ones.
    machine = Machine(gpus=2, cpus=2)
    try:
        for backend, standin in (("vllm", VLLMStandIn), ("sglang", Visible)):
            plan = plan_of(colocated(2, 2, backend=backend))
            cluster = shell.Cluster(plan, machine, None, debug=False, threads=1)
            try:
                group = plan.placement("actor").group
                ranks = [cluster.spawn(Visible, "actor", group, slot.gpu, ())
                         for slot in plan.placement("actor").ranks]
                engines = [cluster.spawn_engine(standin, engine, ()) for engine in shell.rollout_engines(plan)]
                gpu = dict(zip(plan.placement("actor").gpus, ray.get([r.visible.remote() for r in ranks])))
                if backend == "vllm":
                    # every worker finds room beside the actor's rank on its GPU, and on its own engine's GPUs
                    found = [ray.get(e.worker_gpus.remote(60)) for e in engines]
                else:
                    found = [ray.get(e.visible.remote()).split(",") for e in engines]
                assert found == [[gpu[g] for g in gpus] for gpus in engine_gpus(plan)], backend
            finally:
                cluster.shutdown()
    finally:
        ray.shutdown()


def test_when_one_of_several_calls_fails_the_others_are_read_before_its_error_is_raised():
    """A worker error ends the run with one line; the same error of the other workers' calls, never read, would
    follow it as Ray's "Unhandled error" tracebacks (Cluster.get and Cluster.settle)."""

    class Failed(Exception):
        pass

    class FakeRay:
        def __init__(self, ready):
            self.ready, self.read = ready, []

        def get(self, calls):
            if isinstance(calls, list):
                raise Failed(calls[0])
            self.read.append(calls)
            raise Failed(calls)

        def wait(self, calls, num_returns, timeout):
            assert num_returns == len(calls) and timeout == shell.SETTLE_S
            return [c for c in calls if c in self.ready], [c for c in calls if c not in self.ready]

    cluster = shell.Cluster.__new__(shell.Cluster)
    cluster.ray = FakeRay(ready={"a", "b"})
    with pytest.raises(Failed, match="a"):
        cluster.get(["a", "b", "still running"])
    assert cluster.ray.read == ["a", "b"]  # read quietly; the one still running is left to the shutdown
    cluster.settle([])  # nothing pending: nothing to wait for
