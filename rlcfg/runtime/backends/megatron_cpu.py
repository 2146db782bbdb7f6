"""Run megatron-core's CUDA-only training path on CPU, for debugging and tests.

megatron-core 0.16 hard-codes CUDA in its forward-backward schedules (`torch.zeros(..., device="cuda")`), DDP
gradient buffers (`device=torch.cuda.current_device()`), optimizer and gradient clipping (`device='cuda'`
scalars, `param.type() == 'torch.cuda.FloatTensor'` checks). `cuda_as_cpu()` lets those allocations land on CPU
so that megatron-core's real schedule, DistributedDataParallel, optimizer and dist_checkpointing can be exercised
with gloo on a machine without a GPU, which is how rlcfg's tests run MegatronEngine end to end.

It is a testing aid, not a way to train: everything runs in fp32 on CPU, slowly. `rlcfg run` never uses it
unless the environment variable RLCFG_MEGATRON_ON_CPU=1 is set, in which case MegatronEngine runs on CPU under
it instead of refusing a machine without CUDA.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

import torch
from torch.overrides import TorchFunctionMode

_CPU = torch.device("cpu")
_state = threading.local()
_patch_lock = threading.Lock()
_patch_depth = 0
_saved: dict[tuple[Any, str], Any] = {}


def active() -> bool:
    """Whether `cuda_as_cpu()` is in effect on this thread."""
    return getattr(_state, "depth", 0) > 0


def _is_cuda(device: Any) -> bool:
    if isinstance(device, torch.device):
        return device.type == "cuda"
    return isinstance(device, str) and device.split(":")[0] == "cuda"


class _CudaAsCpu(TorchFunctionMode):
    """megatron-core names CUDA as a `device=` keyword (`"cuda"`, or `torch.cuda.current_device()`, which the
    patch below answers with the CPU), asks `Tensor.type()` for a CUDA type name, and moves the output layer's copy
    of a tied embedding with `.cuda()` (pipeline parallelism's last stage), which stays where it is; nothing on its
    training path moves a tensor with a positional `.to("cuda")`, so that is not rewritten."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if kwargs.get("pin_memory"):  # the context-parallel rotary embedding's index tensor: pinned for a CUDA copy
            kwargs = {**kwargs, "pin_memory": False}
        if "device" in kwargs and _is_cuda(kwargs["device"]):
            kwargs = {**kwargs, "device": _CPU}
        elif func is torch.Tensor.cuda:
            return args[0]
        elif func is torch.Tensor.type and len(args) == 1 and not kwargs:
            # The optimizers and gradient clipping accept only parameters whose type() names CUDA.
            name = func(*args)
            return name.replace("torch.", "torch.cuda.", 1) if args[0].device.type == "cpu" else name
        return func(*args, **kwargs)


def _host_copy(tensor: Any, as_numpy: bool = False, record_stream: bool = False) -> Any:
    """megatron-core's maybe_move_tensor_to_cpu for tensors already on the CPU: the MoE dispatcher's split sizes
    must come out as the host arrays its all-to-all takes, not stay tensors because no CUDA copy ran."""
    if as_numpy and torch.is_tensor(tensor):
        return tensor.numpy()
    return tensor


def _cuda_replacements() -> dict[tuple[Any, str], Any]:
    """torch.cuda functions megatron-core calls on its training path, answered for the CPU."""
    return {
        # DDP's gradient buffers, the rotary embedding and tensor parallelism's communication buffers allocate on
        # `device=torch.cuda.current_device()`, some of them inside autograd's backward, where no torch function
        # mode is active: so the answer is the CPU itself, not an ordinal for the mode to rewrite.
        (torch.cuda, "current_device"): lambda: _CPU,
        # Activation recomputation (gradient checkpointing) saves the CUDA RNG state with every checkpoint and
        # restores it through torch.cuda's lazy-call queue, which never runs without CUDA.
        (torch.cuda.random, "get_rng_state"): lambda device="cuda": torch.get_rng_state(),
        # dist_checkpointing's writer synchronizes before copying tensors out.
        (torch.cuda, "synchronize"): lambda device=None: None,
        # The MoE all-to-all dispatcher copies its split sizes to the host on a side stream of its own; on CPU
        # there is one stream and nothing to copy.
        (torch.cuda, "Stream"): _HostStream,
        (torch.cuda, "current_stream"): lambda device=None: _HOST_STREAM,
        (torch.cuda, "stream"): lambda stream=None: contextlib.nullcontext(),
        (_token_dispatcher(), "maybe_move_tensor_to_cpu"): _host_copy,
    }


def _token_dispatcher() -> Any:
    from megatron.core.transformer.moe import token_dispatcher

    return token_dispatcher


class _HostStream:
    """The one stream a CPU has: waiting on it is a no-op, and every stream is it."""

    def __new__(cls, *args: Any, **kwargs: Any) -> "_HostStream":
        return _HOST_STREAM

    def wait_stream(self, other: Any) -> None:
        return None

    def synchronize(self) -> None:
        return None

    def record_event(self, event: Any = None) -> "_HostStream":
        return self  # an event whose synchronize() returns at once


_HOST_STREAM = object.__new__(_HostStream)


@contextlib.contextmanager
def cuda_as_cpu() -> Iterator[None]:
    """While inside: `device="cuda"` (or `"cuda:N"`, a CUDA torch.device) allocates on CPU, CPU tensors'
    `type()` reads as CUDA, and the torch.cuda functions megatron-core calls answer for the CPU. Re-entrant; the
    torch.cuda patches are process-wide (restored when the last user leaves), the mode is per thread."""
    global _patch_depth
    if active():
        # A second mode on the stack would see (and rewrite) the first one's results again.
        yield
        return
    with _patch_lock:
        if _patch_depth == 0:
            for (owner, name), fn in _cuda_replacements().items():
                _saved[(owner, name)] = getattr(owner, name)
                setattr(owner, name, fn)
        _patch_depth += 1
    _state.depth = 1
    try:
        with _CudaAsCpu():
            yield
    finally:
        _state.depth = 0
        with _patch_lock:
            _patch_depth -= 1
            if _patch_depth == 0:
                for (owner, name), fn in _saved.items():
                    setattr(owner, name, fn)
                _saved.clear()
