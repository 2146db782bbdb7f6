"""Context parallelism on the megatron backend without Transformer Engine, and the local core attention of
multi-latent attention.

megatron-core splits a sequence over the `cp` ranks of a context-parallel group in 2·cp equal chunks, rank r
holding chunks r and 2·cp−1−r (each rank then has as much causal attention work as the others); its rotary
embedding gives each rank the positions of its chunks. Only Transformer Engine's attention runs that layout in
megatron-core 0.16, and rlcfg[megatron] installs no Transformer Engine. So the layers here get rlcfg's own core
attention (`ContextParallelAttention`): it gathers the keys and values of the whole sequence from the group,
puts them in sequence order, and attends from this rank's queries through their rows of the whole sequence's
mask. The engine hands each rank its chunks of every micro-batch (`local`), and joins the per-token results of the
group back in sequence order (`gather_columns`), so every rank computes the group's loss from the whole sequence.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torch.distributed as dist
from megatron.core import parallel_state as ps
from megatron.core.transformer.dot_product_attention import DotProductAttention


def positions(width: int, cp: int, rank: int, device: Any = None) -> Any:
    """The columns of a `width`-column sequence that CP rank `rank` holds, in its order: chunks rank and
    2·cp−1−rank of 2·cp (width is a multiple of 2·cp)."""
    size = width // (2 * cp)
    first = torch.arange(rank * size, (rank + 1) * size, device=device)
    second = torch.arange((2 * cp - 1 - rank) * size, (2 * cp - rank) * size, device=device)
    return torch.cat([first, second])


def _order(width: int, cp: int, device: Any) -> Any:
    """For the ranks' local columns laid end to end in rank order, where each lands in sequence order."""
    return torch.cat([positions(width, cp, r, device) for r in range(cp)])


def local(x: Any, dim: int) -> Any:
    """This CP rank's columns of `x` along `dim`."""
    cp = ps.get_context_parallel_world_size()
    return x.index_select(dim, positions(x.shape[dim], cp, ps.get_context_parallel_rank(), x.device))


def _joined(x: Any, dim: int) -> Any:
    group, cp = ps.get_context_parallel_group(), ps.get_context_parallel_world_size()
    parts = [torch.empty_like(x) for _ in range(cp)]
    dist.all_gather(parts, x.contiguous(), group=group)
    stacked = torch.cat(parts, dim=dim)
    whole = torch.empty_like(stacked)
    index = _order(stacked.shape[dim], cp, x.device)
    return whole.index_copy(dim, index, stacked)


class _GatherColumns(torch.autograd.Function):
    """The whole sequence from every CP rank's columns. Every rank computes the same loss from it, so each takes
    back only its own columns' gradient."""

    @staticmethod
    def forward(ctx, x, dim):
        ctx.dim = dim
        return _joined(x, dim)

    @staticmethod
    def backward(ctx, grad):
        return local(grad, ctx.dim), None


class _GatherKeys(_GatherColumns):
    """The whole sequence's keys (or values) from every CP rank's. Every rank's queries attend to all of them, so
    a rank's own keys take the gradient summed over the group."""

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ps.get_context_parallel_group())
        return local(grad, ctx.dim), None


def gather_columns(x: Any, dim: int = 1) -> Any:
    """The group's per-column results in sequence order ([..., local columns, ...] → [..., columns, ...])."""
    return _GatherColumns.apply(x, dim)


class ContextParallelAttention(DotProductAttention):
    """megatron-core's local attention over the whole sequence's keys and values, from this CP rank's queries.
    query [sq, b, np, hn] holds this rank's columns; the mask [b, 1, s, s] is the whole sequence's."""

    def __init__(self, config: Any, *args: Any, **kwargs: Any):
        # megatron-core's local attention refuses a CP size; this one computes on one rank's share of it.
        super().__init__(dataclasses.replace(config, context_parallel_size=1), *args, **kwargs)

    def forward(self, query: Any, key: Any, value: Any, attention_mask: Any, attn_mask_type: Any = None,
                attention_bias: Any = None, packed_seq_params: Any = None) -> Any:
        key = _GatherKeys.apply(key, 0)
        value = _GatherKeys.apply(value, 0)
        rows = positions(key.shape[0], ps.get_context_parallel_world_size(), ps.get_context_parallel_rank(),
                         attention_mask.device)
        return super().forward(query, key, value, attention_mask.index_select(2, rows), attn_mask_type,
                               attention_bias, packed_seq_params)


class LatentAttention(DotProductAttention):
    """megatron-core's local attention for multi-latent attention, whose queries and keys are wider (k_channels:
    the heads' non-rotary and rotary channels) than its values (v_channels). megatron-core's MLA hands its core
    attention both sizes, which its local attention does not take: only Transformer Engine's does. Every head has
    its own key and value, and the softmax scale is MLA's."""

    def __init__(self, config: Any, *args: Any, k_channels: int | None = None, v_channels: int | None = None,
                 **kwargs: Any):
        # The scores' width comes from the query and key tensors, and MLA gives the scale. megatron-core's
        # Attention first builds a core attention of its own sizes, which MLA then replaces with one of its sizes.
        del k_channels
        if v_channels is not None:
            config = dataclasses.replace(config, kv_channels=v_channels, num_query_groups=config.num_attention_heads)
        super().__init__(config, *args, **kwargs)


class ContextParallelLatentAttention(ContextParallelAttention, LatentAttention):
    """Multi-latent attention's core attention under context parallelism."""
