"""LoRA adapters on megatron-core's linear layers, computing what Megatron-Bridge's `LoRA` (SkyRL's
`lora_type: lora`) computes: each adapted layer's output gains (alpha / rank) · B·A·x, one adapter per fused layer
(the fused query-key-value projection `linear_qkv`, the attention output `linear_proj`, the fused gate-and-up
projection `linear_fc1`, the down projection `linear_fc2`), A drawn as Megatron-Bridge's "kaiming" draws it, B
zero, so the first step's policy is the model as loaded. Only A and B train.

Under tensor parallelism each adapter is split the way its layer is, so that a rank's adapter weights merge into
exactly that rank's shard of the layer (the rollout engines get the merged weights, converted as any others):
- a column-parallel layer (its output rows split over the TP ranks): A whole on every rank, B split by rows;
- a row-parallel layer (its input columns split): A split by columns, B whole on every rank.
The hidden activation A·x crosses the ranks as the layer's own does: its gradient is summed over the ranks where A
is whole, its value summed where A is split; under sequence parallelism gathered along the sequence, or
reduce-scattered, as the layer's input and output are. A weight whole on every rank but fed one sequence shard
(`sequence_parallel`) has its gradient summed over the ranks by megatron-core's own finalize step, as a norm's is.

The adapters are parameters of the layer (`lora_a`, `lora_b`) and a forward hook adds their term, so megatron-core's
DDP, distributed optimizer, recomputation and checkpointing see them as the layer's own; the layer's checkpoint
description names their split (`sharded_state_dict`).

A mixture of experts' expert layers get what Megatron-Bridge gives megatron-core's grouped expert layer: one adapter
pair per layer that all the experts of an expert-parallel rank share (another rank's experts have their own), so
the model depends on the expert-parallel size as it does under Megatron-Bridge. Experts split over expert
tensor-parallel ranks take none (refused before launch).
"""

from __future__ import annotations

import math
import re
import types
import zlib
from typing import Any

from rlcfg.ir import Lora
from rlcfg.run_limits import MEGATRON_LORA_TARGETS

ADAPTER_A, ADAPTER_B = "lora_a", "lora_b"


def adapter_targets(lora: Lora) -> tuple[str, ...]:
    """The module names that get adapters: Megatron-Bridge's `all-linear`, or the config's names (run_limits checks
    them before launch)."""
    if lora.target_modules == "all-linear":
        return MEGATRON_LORA_TARGETS
    names = (lora.target_modules,) if isinstance(lora.target_modules, str) else tuple(lora.target_modules)
    return tuple(name for name in MEGATRON_LORA_TARGETS if name in names)


def add_adapters(chunks: list[Any], lora: Lora, seed: int, pp_rank: int) -> int:
    """Adapters on the targeted linear layers of this rank's model chunks, every other parameter frozen. Returns
    how many layers got one. Each A is drawn from a generator of its own (the seed, the pipeline rank and stage, the
    layer's name, and the TP rank where A is split), so ranks holding the same A draw the same values."""
    import torch
    from megatron.core.tensor_parallel import layers as L

    targets = adapter_targets(lora)
    adapted = 0
    for stage, chunk in enumerate(chunks):
        for param in chunk.parameters():
            param.requires_grad_(False)
        embedding = getattr(chunk, "embedding", None)
        if embedding is not None:
            # Recomputation runs each layer inside an autograd function whose output needs a gradient only when
            # an input does; under a frozen embedding none would, and the adapters would get no gradient.
            embedding.register_forward_hook(_needing_gradient)
        for name, module in list(chunk.named_modules()):
            if hasattr(module, "local_experts"):
                adapted += _adapt_experts(module, targets, lora, f"{seed}:{pp_rank}:{stage}:{name}", torch)
                continue
            if name.rpartition(".")[2] not in targets or ".local_experts." in name:
                continue
            if isinstance(module, L.ColumnParallelLinear):
                column = True
            elif isinstance(module, L.RowParallelLinear):
                column = False
            else:
                continue
            _adapt(module, column, lora, f"{seed}:{pp_rank}:{stage}:{name}", torch)
            adapted += 1
    return adapted


def _adapt_experts(experts: Any, targets: tuple[str, ...], lora: Lora, label: str, torch: Any) -> int:
    """One adapter per targeted expert layer (linear_fc1, linear_fc2) that all the experts this expert-parallel rank
    holds share, as Megatron-Bridge's LoRA puts one on megatron-core's grouped expert layer: each expert's output
    gains (alpha / rank) · B·A·x with the same A and B, and the experts of another rank have another pair. The pair
    is registered on the experts' module (`linear_fc1_lora_a`, ...), trained and checkpointed as the experts are
    (its gradient summed over the expert data-parallel ranks, its checkpoint indexed by the expert-parallel rank).
    Expert tensor parallelism is refused before launch (run_limits.megatron_lora_problems)."""
    first = experts.local_experts[0]
    names = [fc for fc in ("linear_fc1", "linear_fc2") if fc in targets]
    ep_rank = experts.ep_group.rank()
    for fc in names:
        weight = getattr(first, fc).weight
        out_features, in_features = weight.shape
        pair = _adapter_pair(lora.rank, in_features, out_features, weight, f"{label}:{fc}:ep{ep_rank}", torch)
        for suffix, param in zip((ADAPTER_A, ADAPTER_B), pair):
            # An expert's weights are reduced over the expert data-parallel group, not the data-parallel one.
            param.allreduce = getattr(weight, "allreduce", True)
            experts.register_parameter(f"{fc}_{suffix}", param)
        for expert in experts.local_experts:
            getattr(expert, fc).register_forward_hook(_shared_adapter_hook(experts, fc, lora.alpha / lora.rank))
    if names:
        experts.sharded_state_dict = types.MethodType(_experts_sharded_state_dict(type(experts).sharded_state_dict),
                                                      experts)
    return len(names)


def _shared_adapter_hook(experts: Any, fc: str, scale: float) -> Any:
    import torch.nn.functional as F

    def hook(module: Any, args: tuple, output: Any) -> Any:
        a, b = getattr(experts, f"{fc}_{ADAPTER_A}"), getattr(experts, f"{fc}_{ADAPTER_B}")
        out, bias = output
        return out + F.linear(F.linear(args[0], a), b) * scale, bias

    return hook


def _experts_sharded_state_dict(experts_own: Any) -> Any:
    """The experts' checkpoint description and their shared adapters', one slice per expert-parallel rank along an
    axis of their own, replicated as the experts are (over the expert data-parallel ranks)."""
    from megatron.core.transformer.utils import ensure_metadata_has_dp_cp_group, make_sharded_tensors_for_checkpoint

    def sharded_state_dict(self: Any, prefix: str = "", sharded_offsets: tuple = (), metadata: dict | None = None):
        metadata = ensure_metadata_has_dp_cp_group(metadata)
        out = experts_own(self, prefix, sharded_offsets, metadata)
        own = dict(self.named_parameters(recurse=False))
        offsets = (*sharded_offsets, (len(sharded_offsets), self.ep_group.rank(), self.ep_group.size()))
        adapters = make_sharded_tensors_for_checkpoint(own, prefix, {}, offsets,
                                                       tp_group=self.local_experts[0].linear_fc1.tp_group,
                                                       dp_cp_group=metadata["dp_cp_group"])
        for tensor in adapters.values():
            tensor.replica_id = (*tensor.replica_id[:2], self.dp_group.rank())
        out.update(adapters)
        return out

    return sharded_state_dict


def _needing_gradient(module: Any, args: tuple, output: Any) -> Any:
    return output.requires_grad_(True) if not output.requires_grad else output


def _adapt(module: Any, column: bool, lora: Lora, label: str, torch: Any) -> None:
    from megatron.core.tensor_parallel import layers as L

    weight = module.weight
    group = module.tp_group
    tp = group.size()
    out_local, in_local = weight.shape
    sequence_parallel = bool(module.sequence_parallel) and tp > 1
    # A row-parallel layer's A is split: each rank draws its own columns.
    lora_a, lora_b = _adapter_pair(lora.rank, in_local, out_local if column else module.output_size, weight,
                                   label if column else f"{label}:tp{group.rank()}", torch)
    split = lora_b if column else lora_a
    L.set_tensor_model_parallel_attributes(split, is_parallel=tp > 1, dim=0 if column else 1,
                                           stride=getattr(weight, "partition_stride", 1))
    whole = lora_a if column else lora_b
    if sequence_parallel:
        whole.sequence_parallel = True
    module.register_parameter(ADAPTER_A, lora_a)
    module.register_parameter(ADAPTER_B, lora_b)
    module.register_forward_hook(_adapter_hook(column, lora.alpha / lora.rank, sequence_parallel, group))
    module.sharded_state_dict = types.MethodType(_sharded_state_dict(column), module)


def _adapter_pair(rank: int, in_features: int, out_features: int, like: Any, label: str, torch: Any) -> tuple:
    """(A, B) parameters in `like`'s dtype and device: A [rank, in_features] drawn from a generator seeded by
    `label`, B [out_features, rank] zero."""
    generator = torch.Generator().manual_seed(zlib.crc32(label.encode()))
    a = torch.empty((rank, in_features), dtype=torch.float32)
    # Megatron-Bridge's "kaiming": kaiming_uniform_ with a = sqrt(5) over the local shard, so a bound of
    # 1/sqrt(fan_in) where fan_in is the shard's input width.
    bound = 1.0 / math.sqrt(in_features)
    a.uniform_(-bound, bound, generator=generator)
    return (torch.nn.Parameter(a.to(dtype=like.dtype, device=like.device)),
            torch.nn.Parameter(torch.zeros((out_features, rank), dtype=like.dtype, device=like.device)))


def _adapter_hook(column: bool, scale: float, sequence_parallel: bool, group: Any) -> Any:
    import torch.nn.functional as F
    from megatron.core.tensor_parallel import mappings

    tp = group.size()

    def hook(module: Any, args: tuple, output: Any) -> Any:
        x = args[0]
        hidden = F.linear(x, module.lora_a)
        if column and sequence_parallel:
            hidden = mappings.gather_from_sequence_parallel_region(hidden, True, group=group)
        elif column and tp > 1:
            hidden = mappings.copy_to_tensor_model_parallel_region(hidden, group=group)
        elif sequence_parallel:
            hidden = mappings.reduce_scatter_to_sequence_parallel_region(hidden, group=group)
        elif tp > 1:
            hidden = mappings.reduce_from_tensor_model_parallel_region(hidden, group=group)
        delta = F.linear(hidden, module.lora_b) * scale
        out, bias = output
        return out + delta, bias

    return hook


def _sharded_state_dict(column: bool) -> Any:
    """The layer's own checkpoint description with the adapters' split added: B by rows beside a column-parallel
    weight, A by columns beside a row-parallel one; the whole ones as replicas."""
    from megatron.core.transformer.utils import ensure_metadata_has_dp_cp_group, make_sharded_tensors_for_checkpoint

    axes = {"weight": 0, "bias": 0, ADAPTER_B: 0} if column else {"weight": 1, ADAPTER_A: 1}

    def sharded_state_dict(self: Any, prefix: str = "", sharded_offsets: tuple = (), metadata: dict | None = None):
        metadata = ensure_metadata_has_dp_cp_group(metadata)
        return make_sharded_tensors_for_checkpoint(self.state_dict(prefix="", keep_vars=True), prefix, axes,
                                                   sharded_offsets, tp_group=self.tp_group,
                                                   dp_cp_group=metadata["dp_cp_group"])

    return sharded_state_dict


_LOCAL_EXPERT = re.compile(r"^(.*\.experts\.)local_experts\.\d+\.(linear_fc[12])\.weight$")


def merge_adapters(state: dict[str, Any], scale: float) -> dict[str, Any]:
    """A chunk's local tensors with each adapter merged into its layer's shard (W + scale · B·A, in float32, then in
    the weight's dtype; an expert's from the adapter its rank's experts share) and the adapter tensors left out:
    the weights the rollout engines and exports receive."""
    out = {}
    for key, value in state.items():
        if key.rpartition(".")[2].endswith((ADAPTER_A, ADAPTER_B)):
            continue
        expert = _LOCAL_EXPERT.match(key)
        if expert:
            adapter = f"{expert.group(1)}{expert.group(2)}_"
        else:
            adapter = key[: -len("weight")] if key.endswith(".weight") else None
        if adapter is not None and f"{adapter}{ADAPTER_A}" in state:
            a, b = state[f"{adapter}{ADAPTER_A}"].float(), state[f"{adapter}{ADAPTER_B}"].float()
            value = (value.float() + scale * (b @ a)).to(value.dtype)
        out[key] = value
    return out
