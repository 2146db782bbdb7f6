"""FSDP's CPU offload on GPUs (a role's `cpu_offload`): FSDP2's CPUOffloadPolicy keeps the sharded weights and
gradients in host memory as DTensors of the GPU mesh, so the trainer's own reductions over them (the gradient
norm that clips a step, the gather of the full weights for the rollout and the export) run on CPU tensors. The
workers' process group must take those too; on an NCCL-only group they fail with "No backend type associated
with device type cpu". The training step and the gather themselves need CUDA and are skipped without it."""

import math
import os
import socket

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch.distributed as dist  # noqa: E402

from rlcfg.ir import ActorLossSpec, Optimizer  # noqa: E402
from rlcfg.runtime import step as S  # noqa: E402
from rlcfg.runtime.backends.fsdp import FSDPEngine, init_distributed  # noqa: E402
from tests.runtime.test_packing import build, groups  # noqa: E402

# A clip well under the step's gradient norm, so that clipping scales every gradient.
SGD = Optimizer(name="sgd", lr=0.5, grad_clip=0.05)


def test_a_gpu_workers_process_group_also_takes_cpu_tensors(monkeypatch):
    """What a trainer worker on a GPU joins: NCCL for CUDA tensors and gloo for CPU ones. (Nothing is started:
    the group's backend string is read back with torch's own parser.)"""
    from torch.distributed.distributed_c10d import Backend, BackendConfig

    joined = {}
    for key in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.setenv(key, "")  # init_distributed sets them; monkeypatch puts the old values back
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    monkeypatch.setattr(dist, "init_process_group", lambda backend, **kw: joined.update(backend=backend, **kw))
    init_distributed(1, 2, "10.0.0.1", 29500, "cuda")
    assert (joined["rank"], joined["world_size"]) == (1, 2)
    by_device = BackendConfig(Backend(joined["backend"])).get_device_backend_map()
    assert {device: str(backend) for device, backend in by_device.items()} == {"cuda": "nccl", "cpu": "gloo"}


# ---- on GPUs ----------------------------------------------------------------------------------------------------

def _share(rank: int, world: int):
    """This rank's equal share of a seeded PPO batch, and the update's settings for it (one mini-batch)."""
    batch, _, _ = S.make_batch(groups(seed=4), pad=0)
    mask = batch["response_mask"]
    g = torch.Generator().manual_seed(2)
    batch["advantages"] = torch.randn(mask.shape, generator=g) * mask
    batch["old_logprobs"] = -3.0 * mask
    per = mask.shape[0] // world
    share = {k: v[rank * per:(rank + 1) * per] for k, v in batch.items()}
    return share, {"ppo_epochs": 1, "mini_batch": per, "micro_batch": 2,
                   "denominators": S.denominators(mask, world, per), "loss": ActorLossSpec()}


def _train_and_gather(rank: int, world: int, port: int, path: str, out: str, device: str) -> None:
    """Rank `rank`: one clipped step of the same model with and without CPU offload, and its full weights as rank
    0 gathers them and as every rank does; rank 0 saves what it saw to `out`."""
    init_distributed(rank, world, "127.0.0.1", port, device)
    share, cfg = _share(rank, world)
    results = {}
    for offload in (False, True):
        trainer = FSDPEngine("actor", path, dtype="float32", device=device, optimizer=SGD, cpu_offload=offload)
        metrics = trainer.train(share, cfg)
        every = trainer.full_state_dict(all_ranks=True)
        results[offload] = {"grad_norm": metrics["grad_norm"], "rank0": trainer.full_state_dict(),
                            "every_rank": {k: v.cpu() for k, v in every.items()},
                            "every_rank_devices": sorted({v.device.type for v in every.values()})}
        del trainer, every
    if rank == 0:
        torch.save(results, out)
    dist.destroy_process_group()


def _gpus() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.parametrize("world", [
    pytest.param(1, marks=pytest.mark.skipif(_gpus() < 1, reason="CPU offload moves FSDP's shards between a CUDA "
                                                                  "GPU and host memory; this machine has no GPU")),
    pytest.param(2, marks=pytest.mark.skipif(_gpus() < 2, reason="two NCCL ranks need two GPUs")),
])
def test_cpu_offload_clips_and_gathers_like_training_on_the_gpu(tmp_path, monkeypatch, world):
    import torch.multiprocessing as mp
    from transformers import AutoModelForCausalLM

    path = build(tmp_path / "model")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = str(tmp_path / "results.pt")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    gpus = visible.split(",") if visible else [str(i) for i in range(_gpus())]
    ranks = []
    for rank in range(world):
        # Each rank's process sees only its own GPU from the start, as Ray starts a trainer (init_distributed
        # takes device 0).
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", gpus[rank])
        process = mp.get_context("spawn").Process(target=_train_and_gather,
                                                  args=(rank, world, port, path, out, "cuda"))
        process.start()
        ranks.append(process)
    for process in ranks:
        process.join(timeout=300)
        if process.is_alive():
            process.kill()
    assert [process.exitcode for process in ranks] == [0] * world
    on_gpu, offloaded = (torch.load(out, weights_only=False)[k] for k in (False, True))
    assert math.isfinite(offloaded["grad_norm"]) and offloaded["grad_norm"] > SGD["grad_clip"]
    assert offloaded["grad_norm"] == pytest.approx(on_gpu["grad_norm"], rel=1e-5)
    initial = AutoModelForCausalLM.from_pretrained(path).state_dict()
    assert set(offloaded["rank0"]) == set(initial)
    for name, value in on_gpu["rank0"].items():
        torch.testing.assert_close(offloaded["rank0"][name], value, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(offloaded["every_rank"][name], value, rtol=1e-5, atol=1e-6)
    assert any(not torch.equal(offloaded["rank0"][n], initial[n]) for n in initial)
    # Every rank's copy of an offloaded model stays in host memory, where the offload keeps its weights.
    assert offloaded["every_rank_devices"] == ["cpu"] and on_gpu["every_rank_devices"] == ["cuda"]
