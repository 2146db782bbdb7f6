"""Stand-in processes for placement tests on a Ray instance with declared (fake) GPUs (test_engine_placement).
Kept apart from the tests, with nothing heavy imported: each Ray worker that runs one imports this module."""

from __future__ import annotations

import os


class Visible:
    """A process that reports the GPUs it is shown."""

    def visible(self) -> str | None:
        return os.environ.get("CUDA_VISIBLE_DEVICES")


class VLLMStandIn(Visible):
    """An engine process that starts its workers as vLLM's `ray` executor does (a Ray actor per rank, in the
    placement group this process runs in, on the bundles and with the GPU fraction its environment names)."""

    def __init__(self):
        import ray
        from ray.util.placement_group import get_current_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        group = get_current_placement_group()
        gpus = float(os.environ.get("VLLM_RAY_PER_WORKER_GPUS", "1.0"))
        self.workers = [ray.remote(Visible).options(
            num_cpus=0, num_gpus=gpus,
            scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=int(b))).remote()
            for b in os.environ["VLLM_RAY_BUNDLE_INDICES"].split(",")]

    def worker_gpus(self, timeout_s: float) -> list[str] | None:
        """The GPU of each worker; None when some worker found no room within the time."""
        import ray

        calls = [w.visible.remote() for w in self.workers]
        _ready, pending = ray.wait(calls, num_returns=len(calls), timeout=timeout_s)
        return None if pending else ray.get(calls)
