"""Lowering: a validated dialect config → the canonical Experiment (rlcfg.ir).

One module per dialect, `rlcfg.lower.<dialect>`, with `lower(config) -> Experiment`; it reproduces the framework's
semantics, derivations included. A dialect whose meaning differs between the releases it claims takes the release the
document was judged by too, `lower(config, release=...)`. Imported lazily, like the dialects themselves.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from typing import Any

from rlcfg.ir import Experiment


def lower(dialect: str, config: Any, release: str | None = None) -> Experiment:
    """`release`: the framework release the document was judged by (CheckResult.release); None when unknown."""
    module = importlib.import_module(f"rlcfg.lower.{dialect}")
    if "release" in inspect.signature(module.lower).parameters:
        return module.lower(config, release=release)
    return module.lower(config)


def available(dialect: str) -> bool:
    return importlib.util.find_spec(f"rlcfg.lower.{dialect}") is not None
