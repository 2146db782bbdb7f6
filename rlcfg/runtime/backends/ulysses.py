"""Ulysses sequence parallelism on the fsdp backend, as SkyRL (`sequence_parallel_size`), ROLL (`ulysses_size`),
ChatLearn (`ulysses_sequence_parallel_size`) and AReaL (the `c` of an FSDP allocation) run it.

The ranks of one sequence-parallel group hold the same samples. Each runs the model on its own slice of the
sequence columns: embeddings, MLPs, norms and the output layer see only that slice. Attention needs every column,
so around it an all-to-all trades the column split for a head split (each rank then holds all columns of
heads / sp heads), the rank attends over the whole sequence for its heads, and a second all-to-all trades back.
The per-column results (log-probs, entropies, values) are then gathered, so that every rank of the group computes
the group's loss from all of its columns.

The attention runs through transformers' attention interface (`ATTENTION`), so every model family whose attention
goes through that interface is split this way; the mask of the whole sequence travels as a model keyword
(`SequenceLayout`), which transformers hands to the attention function, also when gradient checkpointing recomputes
a layer in the backward pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from rlcfg import run_limits

ATTENTION = "rlcfg_ulysses"  # the name registered with transformers' AttentionInterface
LAYOUT_KEYWORD = "ulysses_layout"  # the model keyword that carries the SequenceLayout to the attention function


class UlyssesError(ValueError):
    """A model this sequence parallel size cannot split: found when the model is loaded."""


@dataclass(frozen=True)
class SequenceLayout:
    """One forward pass of a sequence-parallel group: its process group and size, and which columns may attend to
    which over the whole (padded) sequence: `mask` [rows, 1, columns, columns], True where a query column sees a
    key column; None for plain causal attention over unpadded rows."""

    group: Any
    size: int
    mask: Any


def groups(world: int, size: int) -> tuple[Any, int]:
    """This rank's sequence-parallel process group and its rank in it. Groups are runs of `size` consecutive ranks
    (the sequence dimension varies fastest, as in the frameworks' device meshes, and as the driver hands out the
    data: RunShell._shards); every rank creates every group, in the same order, as torch.distributed requires."""
    rank = dist.get_rank()
    mine = None
    for first in range(0, world, size):
        group = dist.new_group(list(range(first, first + size)))
        if first <= rank < first + size:
            mine = group
    return mine, rank % size


def check_model(config: Any, size: int) -> None:
    """Raise UlyssesError when `config`'s attention cannot be split over `size` ranks
    (run_limits.ulysses_heads_problem)."""
    text = getattr(config, "get_text_config", lambda: config)().to_dict()
    problem = run_limits.ulysses_heads_problem(text.get("num_attention_heads"), text.get("num_key_value_heads"),
                                               run_limits.attends_through_window(text), size)
    if problem:
        raise UlyssesError(problem)


def register() -> None:
    """Make ATTENTION known to transformers (once per process)."""
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION, attention)


class _AllToAll(torch.autograd.Function):
    """Split `x` along scatter_dim, send part i to rank i of the group, and join what arrives along gather_dim.
    Its gradient is the same exchange with the two dimensions swapped."""

    @staticmethod
    def forward(ctx, x, group, size, scatter_dim, gather_dim):
        ctx.args = (group, size, scatter_dim, gather_dim)
        return _exchange(x, group, size, scatter_dim, gather_dim)

    @staticmethod
    def backward(ctx, grad):
        group, size, scatter_dim, gather_dim = ctx.args
        return _exchange(grad, group, size, gather_dim, scatter_dim), None, None, None, None


def _exchange(x: Any, group: Any, size: int, scatter_dim: int, gather_dim: int) -> Any:
    parts = [p.contiguous() for p in x.chunk(size, dim=scatter_dim)]
    received = [torch.empty_like(parts[0]) for _ in range(size)]
    dist.all_to_all(received, parts, group=group)
    return torch.cat(received, dim=gather_dim)


class _GatherColumns(torch.autograd.Function):
    """Every rank's slice of the columns (dim 1), joined in rank order. Each rank of the group computes the same
    loss from the joined tensor, so each takes back only the gradient of its own slice: its own computation is the
    only one that produced those columns."""

    @staticmethod
    def forward(ctx, x, group, size, rank):
        ctx.args = (size, rank)
        parts = [torch.empty_like(x) for _ in range(size)]
        dist.all_gather(parts, x.contiguous(), group=group)
        return torch.cat(parts, dim=1)

    @staticmethod
    def backward(ctx, grad):
        size, rank = ctx.args
        return grad.chunk(size, dim=1)[rank].contiguous(), None, None, None


def gather_columns(x: Any, group: Any, size: int, rank: int) -> Any:
    """The whole row of columns from each rank's slice ([rows, columns / size, ...] → [rows, columns, ...])."""
    return _GatherColumns.apply(x, group, size, rank)


def attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, dropout: float = 0.0,
              scaling: float | None = None, **kwargs: Any) -> tuple[Any, None]:
    """transformers' attention function signature: query [rows, heads, local columns, dim], key and value
    [rows, kv heads, local columns, dim]; returns [rows, local columns, heads, dim]. transformers builds no mask
    for it (`attention_mask` is None): the SequenceLayout keyword carries the whole sequence's."""
    layout: SequenceLayout | None = kwargs.get(LAYOUT_KEYWORD)
    if layout is None:
        raise RuntimeError("rlcfg's sequence parallel attention ran without its layout: the model was called "
                           f"without the `{LAYOUT_KEYWORD}` keyword")
    if kwargs.get("sliding_window") or kwargs.get("softcap") or kwargs.get("s_aux") is not None:
        raise UlyssesError("this model's attention uses a sliding window, a logit soft cap or attention sinks, "
                           "which rlcfg's sequence parallel attention does not apply")
    size, group = layout.size, layout.group
    heads, kv_heads = query.shape[1], key.shape[1]
    if kv_heads % size:  # fewer key/value heads than ranks: each rank takes whole copies of the ones it needs
        repeat = heads // kv_heads
        key = key.repeat_interleave(repeat, dim=1)
        value = value.repeat_interleave(repeat, dim=1)
    # columns split, heads whole → columns whole, heads split
    q, k, v = (_AllToAll.apply(x, group, size, 1, 2) for x in (query, key, value))
    out = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=layout.mask, dropout_p=dropout, is_causal=layout.mask is None, scale=scaling,
        enable_gqa=k.shape[1] != q.shape[1])
    # [rows, heads / size, columns, dim] → [rows, columns / size, heads, dim]
    return _AllToAll.apply(out.transpose(1, 2), group, size, 1, 2).contiguous(), None


def whole_sequence_mask(key_valid: Any, position_ids: Any, packed: bool) -> Any:
    """The attention mask of the whole padded sequence, True where query column i may see key column j: causal,
    only unpadded keys (`key_valid` [rows, columns] or None when nothing is padding) and, in a packed row
    (samples side by side, each restarting its position ids at 0), only keys of the same sample. Every column sees
    itself, so that a padding column's attention has a key (a row of no keys would give NaN) — what padding
    columns compute is never scored. None when plain causal attention says it all."""
    if key_valid is None and not packed:
        return None
    rows, columns = position_ids.shape
    device = position_ids.device
    causal = torch.ones((columns, columns), dtype=torch.bool, device=device).tril()
    mask = causal.expand(rows, columns, columns)
    if packed:
        sample = (position_ids == 0).cumsum(dim=1)
        mask = mask & (sample[:, :, None] == sample[:, None, :])
    if key_valid is not None:
        mask = mask & key_valid.bool()[:, None, :]
    mask = mask | torch.eye(columns, dtype=torch.bool, device=device)
    return mask[:, None]
