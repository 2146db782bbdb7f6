"""Code that runs inside vLLM's own worker processes, one per GPU of an engine, added to vLLM's worker class
through `LLM(worker_extension_cls=WORKER_EXTENSION)` and called with `LLM.collective_rpc(<method>, ...)`.

vLLM builds its worker class by mixing this class in, so `self` here is vLLM's worker: `self.model_runner`,
`self.device`, `self.rank` (the worker's rank inside its engine) are vLLM's. Method names carry an `rlcfg_`
prefix so that they can never shadow one of vLLM's.

Two ways for weights to arrive:
- in the RPC's arguments (one machine: the rollout engine sits in the trainer's process or next to it), as
  tensors when the engine core runs in the caller's process, as serialized bytes across processes (vLLM's RPC
  encoder refuses tensors), or as CUDA IPC handles between processes on the same GPU;
- by a broadcast from trainer rank 0 over a process group that the trainer and every worker of every engine
  join: NCCL on GPUs (vLLM's PyNcclCommunicator, which does not touch torch.distributed's global state the
  engine relies on), or vLLM's TCP-store group on CPU, which carries the same protocol through a key-value
  store and is how the protocol is tested without a GPU.
"""

from __future__ import annotations

import io
from typing import Any, Iterable, Mapping, Sequence

# (name, dtype as in torch, e.g. "float32", shape) of each tensor a broadcast carries, in sending order.
TensorMeta = tuple[str, str, tuple[int, ...]]


def pack(named_tensors: Mapping[str, Any]) -> bytes:
    """Tensors as bytes for an RPC that crosses a process boundary (CPU tensors; safetensors-free so that
    any dtype, bfloat16 included, survives)."""
    import torch

    buffer = io.BytesIO()
    torch.save({name: t.detach().to("cpu").contiguous() for name, t in named_tensors.items()}, buffer)
    return buffer.getvalue()


def unpack(payload: bytes) -> dict[str, Any]:
    import torch

    return torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)


def ipc_handles(named_tensors: Mapping[str, Any]) -> bytes:
    """CUDA IPC handles of GPU tensors, for an engine on the same GPU in another process: the engine maps the
    trainer's memory instead of copying it through the host. The caller keeps the tensors alive until the
    engine has loaded them."""
    import pickle

    from torch.multiprocessing.reductions import reduce_tensor

    return pickle.dumps({name: reduce_tensor(t.detach().contiguous()) for name, t in named_tensors.items()})


def open_ipc_handles(payload: bytes, device: Any) -> dict[str, Any]:
    import pickle

    import torch

    out = {}
    for name, (rebuild, args) in pickle.loads(payload).items():
        args = list(args)
        args[6] = torch.device(device).index  # the device index as this process numbers it
        out[name] = rebuild(*args)
    return out


def meta_of(named_tensors: Mapping[str, Any]) -> list[TensorMeta]:
    return [(name, str(t.dtype).removeprefix("torch."), tuple(t.shape)) for name, t in named_tensors.items()]


class Channel:
    """A broadcast from rank 0 that fills the receivers' tensors in place, over NCCL or a TCP store."""

    def __init__(self, host: str, port: int, rank: int, world_size: int, backend: str, device: Any):
        from vllm.distributed.utils import StatelessProcessGroup

        self.rank, self.backend, self.device = rank, backend, device
        self.group = StatelessProcessGroup.create(host=host, port=port, rank=rank, world_size=world_size)
        self.nccl = None
        if backend == "nccl":
            from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator

            self.nccl = PyNcclCommunicator(self.group, device=device)
        elif backend != "store":
            raise ValueError(f"unknown weight broadcast backend {backend!r}; use 'nccl' (GPU) or 'store' (CPU)")

    def broadcast(self, tensor: Any, src: int = 0) -> Any:
        if self.nccl is not None:
            import torch

            self.nccl.broadcast(tensor, src=src, stream=torch.cuda.current_stream())
            return tensor
        received = self.group.broadcast(tensor, src=src)
        if self.rank != src:
            tensor.copy_(received)
        return tensor

    def barrier(self) -> None:
        if self.nccl is not None:
            import torch

            torch.cuda.current_stream().synchronize()
        self.group.barrier()


def load_into(worker: Any, weights: Iterable[tuple[str, Any]]) -> int:
    """Load (name, tensor) pairs, in the checkpoint's (Hugging Face) names, into the worker's model in place.
    `reload_weights` runs the model's own loader and its post-processing, which also works where the engine
    repacked its weights for its kernels (vLLM on CPU); older vLLM versions only have `model.load_weights`."""
    weights = list(weights)
    runner = worker.model_runner
    if hasattr(runner, "reload_weights"):
        runner.reload_weights(weights_iterator=iter(weights))
    else:
        runner.model.load_weights(weights=weights)
    return len(weights)


class WeightSyncExtension:
    """Mixed into vLLM's worker class; every method runs on each worker of the engine."""

    def rlcfg_load_weights(self, payload: Any, encoding: str = "tensors") -> int:
        if encoding == "tensors":
            named = payload
        elif encoding == "bytes":
            named = unpack(payload)
        elif encoding == "ipc":
            named = open_ipc_handles(payload, self.device)
        else:
            raise ValueError(f"unknown weight encoding {encoding!r}")
        return load_into(self, named.items())

    def rlcfg_init_weight_group(self, host: str, port: int, rank_offset: int, world_size: int,
                                backend: str) -> int:
        """Join the trainer's broadcast group as rank `rank_offset + this worker's rank in its engine`."""
        rank = rank_offset + self.rank
        self._rlcfg_channel = Channel(host, port, rank, world_size, backend, self.device)
        return rank

    def rlcfg_receive_weights(self, metas: Sequence[TensorMeta]) -> int:
        """Receive one broadcast of every tensor in `metas`, in that order, then load them."""
        import torch

        channel = self._rlcfg_channel
        received = []
        for name, dtype, shape in metas:
            tensor = torch.empty(tuple(shape), dtype=getattr(torch, dtype), device=self.device)
            received.append((name, channel.broadcast(tensor, src=0)))
        count = load_into(self, received)
        channel.barrier()
        return count

    def rlcfg_close_weight_group(self) -> None:
        self._rlcfg_channel = None

    def rlcfg_weight_checksum(self) -> float:
        """The sum of every parameter: lets a test see that an update reached the engine's own model."""
        import torch

        with torch.no_grad():
            return float(sum(p.detach().double().sum() for p in self.model_runner.model.parameters()))
