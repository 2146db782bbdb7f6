"""Lowering: a validated dialect config → the canonical Experiment (rlcfg.ir).

One module per dialect, `rlcfg.lower.<dialect>`, with `lower(config) -> Experiment`; it reproduces the framework's
semantics, derivations included. Imported lazily, like the dialects themselves.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from rlcfg.ir import Experiment


def lower(dialect: str, config: Any) -> Experiment:
    module = importlib.import_module(f"rlcfg.lower.{dialect}")
    return module.lower(config)


def available(dialect: str) -> bool:
    return importlib.util.find_spec(f"rlcfg.lower.{dialect}") is not None
