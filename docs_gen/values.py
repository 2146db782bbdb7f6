"""Values written the way a user writes them in a config: YAML spelling, flow style, interpolations kept."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from rlcfg.source.tree import MISSING

# A plain scalar may not start with one of these, or YAML reads it as structure.
_INDICATORS = set("-?:,[]{}#&*!|>'\"%@`")
_FLOW = set(",[]{}")


def yaml_value(value: Any, flow: bool = False) -> str:
    """One value in YAML flow style: `true`, `null`, `2e-6`, `[policy, ref]`, `{a: 1}`, `${x.y}`, `???`."""
    if value is MISSING or value is Ellipsis:
        return "???"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, str):
        return _string(value, flow)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(yaml_value(v, flow=True) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_string(str(k), True)}: {yaml_value(v, flow=True)}" for k, v in value.items()) + "}"
    if hasattr(value, "model_dump"):
        return yaml_value(value.model_dump(by_alias=True), flow)
    return _string(str(value), flow)


def _float(value: float) -> str:
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value)
    # Python writes 2e-06; people (and the framework docs) write 2e-6, which OmegaConf reads the same.
    return re.sub(r"e([+-]?)0*(\d)", r"e\1\2", text)


def _string(text: str, flow: bool) -> str:
    if _plain_ok(text, flow):
        return text
    return json.dumps(text, ensure_ascii=False)


def _plain_ok(text: str, flow: bool) -> bool:
    import yaml

    from rlcfg.source.yaml_loader import type_plain_scalar

    if not text or text != text.strip() or text[0] in _INDICATORS or "\n" in text:
        return False
    if ": " in text or " #" in text or text.endswith(":"):
        return False
    if flow and any(c in _FLOW for c in text):
        return False
    if text == "???":
        return False  # unquoted, this is OmegaConf's marker for a missing value
    try:
        return type_plain_scalar(text) == text
    except (ValueError, yaml.YAMLError):  # the loader rejects it as a scalar: quoting is the safe spelling
        return False
