"""A mixture-of-experts layer's weights under two namings.

Checkpoints, vLLM, SGLang and rlcfg's Megatron converter name each expert's three matrices
(`model.layers.3.mlp.experts.5.gate_proj.weight`, `up_proj`, `down_proj`). transformers ≥ 5 holds a layer's experts
as two stacked parameters instead: `mlp.experts.gate_up_proj` [experts, 2·ffn, hidden] (each expert's gate rows,
then its up rows) and `mlp.experts.down_proj` [experts, hidden, ffn], converting on load and back on save. A
trainer that hands its weights to an in-process transformers model, or a transformers model whose weights go to an
engine, crosses between the two here. Plain torch on whole tensors; nothing is computed, only sliced and stacked.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

_PER_EXPERT = re.compile(r"^(.*\.mlp\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")
_STACKED = re.compile(r"^(.*\.mlp\.experts)\.(gate_up_proj|down_proj)$")


def per_expert(state: Mapping[str, Any]) -> dict[str, Any]:
    """`state` with every stacked expert tensor split into the per-expert names; other tensors unchanged."""
    out: dict[str, Any] = {}
    for name, tensor in state.items():
        m = _STACKED.match(name)
        if m is None:
            out[name] = tensor
            continue
        prefix = m.group(1)
        for e in range(tensor.shape[0]):
            if m.group(2) == "down_proj":
                out[f"{prefix}.{e}.down_proj.weight"] = tensor[e]
            else:
                gate, up = tensor[e].chunk(2, dim=0)
                out[f"{prefix}.{e}.gate_proj.weight"], out[f"{prefix}.{e}.up_proj.weight"] = gate, up
    return out


def stacked_target(params: Mapping[str, Any], name: str) -> Any | None:
    """The slice of a stacked transformers parameter that the per-expert tensor `name` is, or None when `name` is
    not one (or the model holds its experts per expert)."""
    m = _PER_EXPERT.match(name)
    if m is None:
        return None
    prefix, expert, which = m.group(1), int(m.group(2)), m.group(3)
    stacked = params.get(f"{prefix}.down_proj" if which == "down_proj" else f"{prefix}.gate_up_proj")
    if stacked is None or expert >= stacked.shape[0]:
        return None
    if which == "down_proj":
        return stacked[expert]
    gate, up = stacked[expert].chunk(2, dim=0)
    return gate if which == "gate_proj" else up
