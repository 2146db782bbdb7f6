"""Ulysses sequence parallelism on the fsdp backend, as SkyRL (`sequence_parallel_size`), ROLL (`ulysses_size`),
ChatLearn (`ulysses_sequence_parallel_size`) and AReaL (the `c` of an FSDP allocation) run it.

The ranks of one sequence-parallel group hold the same samples. Each runs the model on its own slice of the
sequence columns: embeddings, MLPs, norms and the output layer see only that slice. Attention needs every column,
so around it an all-to-all trades the column split for a head split (each rank then holds all columns of
heads / sp heads), the rank attends over the whole sequence for its heads, and a second all-to-all trades back.
The per-column results (log-probs, entropies, values) are then gathered, so that every rank of the group computes
the group's loss from all of its columns.

The attention runs through transformers' attention interface (`ATTENTION`), so every model family whose attention
goes through that interface is split this way; which columns attend to which travels as a model keyword
(`SequenceLayout`), which transformers hands to the attention function, also when gradient checkpointing recomputes
a layer in the backward pass. No mask is built: each row's attention is causal over spans of whole columns (a
padded row's unpadded columns, each sample of a packed row), computed span by span, so memory stays linear in the
sequence length and the GPU's flash and memory-efficient kernels apply.
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
    """One forward pass of a sequence-parallel group: its process group and size, and which columns attend to which
    over the whole (padded) sequence: per row, the spans (first, end) of columns within which attention is causal
    and outside of which nothing is seen (attention_spans); None for plain causal attention over every row."""

    group: Any
    size: int
    spans: tuple[tuple[tuple[int, int], ...], ...] | None


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
    out = _spans_attention(q, k, v, layout.spans, dropout, scaling)
    # [rows, heads / size, columns, dim] → [rows, columns / size, heads, dim]
    return _AllToAll.apply(out.transpose(1, 2), group, size, 1, 2).contiguous(), None


def _spans_attention(q: Any, k: Any, v: Any, spans: Any, dropout: float, scaling: float | None) -> Any:
    """Causal attention within each span of each row ([rows, heads, columns, dim] in and out); columns before a
    row's first span (left padding) get zeros. Every call is 4-D with as many key/value heads as query heads: the
    GPU's flash and memory-efficient kernels take nothing else, and the fallback would hold a column × column
    score matrix per head."""
    if k.shape[1] != q.shape[1]:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)

    def attend(q: Any, k: Any, v: Any) -> Any:
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True,
                                                                scale=scaling)

    if spans is None:
        return attend(q, k, v)
    rows = []
    for r, row_spans in enumerate(spans):
        lead = row_spans[0][0] if row_spans else q.shape[2]
        parts = [q.new_zeros((1, q.shape[1], lead, v.shape[-1]))] if lead else []
        parts += [attend(q[r:r + 1, :, a:b], k[r:r + 1, :, a:b], v[r:r + 1, :, a:b]) for a, b in row_spans]
        rows.append(torch.cat(parts, dim=2))
    return torch.cat(rows)


def attention_spans(key_valid: Any, position_ids: Any, packed: bool) -> tuple | None:
    """Per row, the spans (first, end) of columns within which attention is causal, together covering the row from
    its first unpadded column on: a packed row's samples, each starting where its position ids restart at 0; a
    padded row's columns from its first unpadded one (`key_valid` [rows, columns], None when nothing is padding)
    to the end. Left-padded prompts and right-padded responses leave a padded row's unpadded columns contiguous;
    the padding after a response is seen only by later padding, which nothing scores. None: every row is one
    span."""
    if packed:
        starts = [torch.nonzero(row == 0).flatten().tolist() for row in position_ids]
        return tuple(tuple(zip(s, s[1:] + [position_ids.shape[1]])) for s in starts)
    if key_valid is None:
        return None
    columns = key_valid.shape[1]
    firsts = torch.where(key_valid.bool().any(dim=1), key_valid.bool().int().argmax(dim=1),
                         torch.full_like(key_valid[:, 0], columns, dtype=torch.long)).tolist()
    return tuple(((first, columns),) if first < columns else () for first in firsts)
