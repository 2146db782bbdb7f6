"""Sequence packing for the training backends: which samples share a micro-batch, and how a micro-batch's
samples become one row without padding.

A packed row is the samples' tokens one after another, each sample's position ids starting again at 0. Given
no attention mask, transformers reads the restarts in the position ids as sequence boundaries (masking_utils
`find_packed_sequence_indices`; flash-attention's varlen path reads them the same way), so no token attends
across samples: a sample's log-probs are those it has alone. tests/runtime/test_packing.py checks that
isolation for the model families rlcfg builds.

Micro-batches are formed within one mini-batch, so the loss, whose denominators are the mini-batch's
(step.denominators), is the same however they are formed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from rlcfg.runtime.data import DataError


class PackingBudgetError(DataError, ValueError):
    """One sample alone holds more tokens than a packed micro-batch may: the frameworks refuse it too (AReaL's
    allocation of micro-batches, ROLL's load-balancing packer), rather than cut the sample. A DataError: the
    config's budget does not fit the data, and `rlcfg run` says so in one line (exit 1)."""


def sequence_lengths(attention_mask: Any) -> list[int]:
    """Tokens of each sample (prompt and response), as they count against a micro-batch's token budget."""
    return [int(n) for n in attention_mask.sum(dim=1).tolist()]


def split_by_budget(lengths: Sequence[int], budget: int, min_groups: int = 1, budget_key: str | None = None
                    ) -> list[list[int]]:
    """Indices of the samples of each micro-batch: no micro-batch holds more than `budget` tokens, and there
    are at least `min_groups` of them (ranks that train together must run as many forward passes).

    First fit, longest first: each sample joins the least-filled micro-batch it still fits in, else opens a
    new one; the first `min_groups` samples open one each. Few micro-batches, of balanced sizes; samples keep
    their order inside each."""
    too_long = [n for n in lengths if n > budget]
    if too_long:
        n = max(too_long)
        key = f"`{budget_key}`" if budget_key else "the token budget of a micro-batch"
        raise PackingBudgetError(
            f"a sample of {n} tokens (prompt and response) does not fit in a packed micro-batch of at most "
            f"{budget} tokens ({key}); raise {key} to at least the longest prompt plus the longest response "
            f"(max_prompt_length + max_new_tokens)")
    groups: list[list[int]] = []
    loads: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda k: (-lengths[k], k)):
        n = lengths[i]
        fits = [g for g in range(len(groups)) if loads[g] + n <= budget]
        if len(groups) < min_groups or not fits:
            groups.append([i])
            loads.append(n)
            continue
        g = min(fits, key=lambda k: (loads[k], k))
        groups[g].append(i)
        loads[g] += n
    for group in groups:
        group.sort()
    groups.sort(key=lambda group: group[0])
    return groups


def micro_batch_rows(attention_mask: Any, per_group: int, budget: int | None, budget_key: str | None = None,
                     min_groups: int = 1) -> list[Any]:
    """The rows of each micro-batch of a (mini-)batch: slices of `per_group` consecutive samples without a
    token budget, index tensors of the samples split_by_budget puts together with one."""
    import torch

    n = attention_mask.shape[0]
    if budget is None:
        return [slice(i, min(i + per_group, n)) for i in range(0, n, max(1, per_group))]
    groups = split_by_budget(sequence_lengths(attention_mask), budget, min(min_groups, n), budget_key)
    return [torch.tensor(g, dtype=torch.int64) for g in groups]


@dataclass(frozen=True)
class PackedRow:
    """One micro-batch packed into a single row.

    input_ids / position_ids: [1, T], every sample's tokens but its last (which predicts nothing scored);
    segments: [T], the sample each token belongs to. rows, cols: the (sample, response column) of every
    response token; sources: the position in the row whose output scores it (the token before it). width: the
    response columns of the micro-batch's padded layout."""

    input_ids: Any
    position_ids: Any
    segments: Any
    rows: Any
    cols: Any
    sources: Any
    width: int

    def unpack(self, flat: Any, samples: int) -> Any:
        """[samples, width] from one value per response token (`flat`, in rows/cols order), 0 elsewhere;
        differentiable, so a loss on the padded layout trains the packed forward."""
        import torch

        out = torch.zeros((samples, self.width), dtype=flat.dtype, device=flat.device)
        return out.index_put((self.rows.to(flat.device), self.cols.to(flat.device)), flat)


def pack(input_ids: Any, attention_mask: Any, prompt_width: int) -> PackedRow:
    """Pack samples laid out as make_batch lays them out (prompts left-padded to `prompt_width`, responses
    right-padded after them) into one row."""
    import torch

    present = attention_mask.bool()
    lengths = present.sum(dim=1)
    response = present[:, prompt_width:]
    response_lengths = response.sum(dim=1)
    prompt_lengths = lengths - response_lengths
    # A sample's last token is its last response token, or its last prompt token when the response is empty.
    # It is fed only when it is the sample's one token, so that every sample keeps a place in the row.
    fed = present.clone()
    last = torch.where(response_lengths > 0, prompt_width + response_lengths - 1,
                       torch.full_like(response_lengths, prompt_width - 1))
    drop = lengths > 1
    fed[torch.nonzero(drop).squeeze(1), last[drop]] = False
    positions = fed.long().cumsum(dim=1) - 1
    fed_lengths = fed.sum(dim=1)
    offsets = torch.cumsum(fed_lengths, dim=0) - fed_lengths
    rows, cols = torch.nonzero(response, as_tuple=True)
    # Response token c of a sample follows its prompt_length + c tokens; the output one position earlier
    # predicts it.
    sources = offsets[rows] + prompt_lengths[rows] + cols - 1
    width = int(response_lengths.max()) if response_lengths.numel() else 0
    segments = torch.arange(fed.shape[0], device=fed.device)[:, None].expand_as(fed)[fed]
    return PackedRow(input_ids=input_ids[fed].unsqueeze(0), position_ids=positions[fed].unsqueeze(0),
                     segments=segments, rows=rows, cols=cols, sources=sources, width=max(width, 1))


def block_causal_mask(segments: Any, length: int | None = None) -> Any:
    """The attention mask of a packed row for kernels that take one explicitly (megatron-core's local
    attention: [1, 1, T, T], True = not attended): causal within each sample, nothing across samples.
    `length` > len(segments) pads the row; each padding token then attends only to itself."""
    import torch

    t = int(segments.shape[0])
    length = max(length or t, t)
    if length > t:
        segments = torch.cat([segments, torch.arange(-1, t - length - 1, -1, device=segments.device)])
    same = segments[:, None] == segments[None, :]
    causal = torch.ones(length, length, dtype=torch.bool, device=segments.device).tril()
    return ~(same & causal)[None, None]
