"""Lowering: a validated dialect config → the canonical Experiment (rlcfg.ir).

One module per dialect, the `lower` of its package (`rlcfg.dialects.<name>.lower`), with `lower(config) ->
Experiment`; it reproduces the framework's semantics, derivations included. A dialect whose meaning differs between
the releases it claims takes the release the document was judged by too, `lower(config, release=...)`. Imported
lazily, like the dialects themselves.

A module's `spelling(role) -> Spelling` says how its configs write each role's backend; every role of the Experiment
carries it, so the runtime speaks the user's dialect without knowing any.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from dataclasses import replace
from typing import Any

from rlcfg.ir import Experiment


def lower(dialect: str, config: Any, release: str | None = None, entry_runs: str | None = None) -> Experiment:
    """`release`: the framework release the document was judged by (CheckResult.release); None when unknown.
    `entry_runs`: the loop the launch's entry module runs instead of the framework's usual one
    (CheckResult.entry_runs), for a lowering that takes it."""
    module = importlib.import_module(f"rlcfg.dialects.{dialect}.lower")
    parameters = inspect.signature(module.lower).parameters
    given = {"release": release, "entry_runs": entry_runs}
    experiment = module.lower(config, **{name: value for name, value in given.items() if name in parameters})
    return replace(experiment, roles=tuple(replace(role, spelling=module.spelling(role)) for role in experiment.roles))


def available(dialect: str) -> bool:
    """Whether the dialect's package has a lowering."""
    try:
        return importlib.util.find_spec(f"rlcfg.dialects.{dialect}.lower") is not None
    except ModuleNotFoundError:  # no package of that name
        return False
