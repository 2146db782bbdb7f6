"""Binds the generated RLinf field table (rlinf_fields.py) into Section classes.

RLinf has no schema: its code reads whatever key it asks for, and its example configs carry hundreds of keys
per pipeline (an embodied config's simulator settings, a Megatron actor's every knob). rlcfg models the keys
its rules and lowering use by hand, in rlinf_models.py, with their constraints and full descriptions. Every
other key that RLinf's examples write or its code reads, at any claimed release, comes from the inventory
(tools/inventory/rlinf.py) as one row: its type as seen in the examples and the code, and the releases that
have it. A hand-written section names its path (`class Cluster(Inventoried, inventory="cluster")`) and is
declared with the rows under that path as fields of its own, in the inventory's order; a hand-written field
overrides the generated one of the same key, in its place. `extension(path)` makes a section of the rows alone,
for the paths nothing is written for by hand (the Deferred ones).

Knowing these keys matters twice: a key RLinf reads is not reported as unknown, and a misspelling of one is
caught as close to a known key (RLinf would silently drop it).
"""

from __future__ import annotations

import keyword
import re
from functools import lru_cache
from typing import Any, Optional, Union

from pydantic import BaseModel, create_model

from rlcfg.schema.base import Deferred, Fate, Section, inert, param, refused
from rlcfg.schema.rlinf_fields import FIELDS

_SCALARS: dict[str, Any] = {"bool": bool, "int": int, "float": float, "str": str, "list": list,
                            "dict": dict[str, Any]}
_PIPELINE_WORDS = {"reasoning": "reasoning", "agent": "agent", "embodied": "embodied", "sft": "SFT",
                   "offline": "offline"}


def _children() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for key in FIELDS:
        parent, _, name = key.rpartition(".")
        out.setdefault(parent, []).append(name)
    return out


_CHILDREN = _children()


def _class_name(path: str) -> str:
    words = re.split(r"[^0-9A-Za-z]+", path)
    return "RLinf" + "".join(w[:1].upper() + w[1:] for w in words if w) + "Keys"


def _python_name(key: str, taken: set[str]) -> str:
    """The attribute name of a generated field: the key itself where Python and pydantic allow it."""
    if key.isidentifier() and not keyword.iskeyword(key) and not key.startswith("_") \
            and not hasattr(BaseModel, key):
        name = key
    else:
        name = "key_" + re.sub(r"\W", "_", key)
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def _description(full: str, kind: str, default: Any, pipelines: tuple) -> str:
    used = ", ".join(_PIPELINE_WORDS.get(p, p) for p in pipelines)
    text = (f"A key of RLinf's {used} configs, found in its example configs or read by its code; rlcfg checks "
            f"{'its type only' if kind != 'any' else 'nothing inside it'}.")
    if default is not None:
        shown = str(default).lower() if isinstance(default, bool) else default
        text += f" RLinf's code uses {shown!s} when the key is absent."
    return text


# The run ledger's default for an inventoried key (a hand-written field of rlinf_models.py declares its own). RLinf's
# algorithm, reward, data, optimizer and learning-rate schedule keys (the FSDP actor's own schedule keys among
# them) change what a run computes; the lowering reads only the hand-modelled ones, so any
# other that a config sets is refused. Every other inventoried key is an engine, backend, logging, checkpoint,
# placement or embodied/agent/SFT-pipeline key: the reasoning lowering does not read it and nothing rlcfg computes
# depends on it.
_COMPUTED = ("algorithm", "reward", "data", "actor.lr_sched") + tuple(
    f"actor.optim.{key}" for key in ("lr_scheduler", "lr_warmup_steps", "lr_warmup_steps_ratio", "total_training_steps",
                                     "num_cycles", "min_lr_rate", "warmup_style", "value_lr", "critic_warmup_steps"))
# The actor's optimizer and schedule keys are read by the FSDP/Megatron code every pipeline shares (the FSDP
# schedule's lr_scheduler, lr_warmup_steps, ...), whichever pipeline's examples happen to write them.
_SHARED = ("actor.optim", "actor.lr_sched")
UNMODELLED_ALGORITHM = refused("rlcfg's RLinf lowering does not read this key: the reasoning run computes its "
                               "GRPO/PPO loss, advantages, rewards and data from the hand-modelled keys only, as if "
                               "it were absent")
UNMODELLED_OTHER = inert("an engine, backend, logging, checkpoint, placement or embodied/agent/SFT-pipeline key that "
                         "rlcfg's reasoning lowering does not read; it changes no loss, advantage, reward or sample "
                         "that rlcfg computes (embodied and agent configs are refused as a whole)")


def run_fate(full: str, pipelines: tuple = ("reasoning",)) -> Fate:
    """The run-ledger fate of the inventoried key `full` (dotted), used by the configs of `pipelines`."""
    shared = any(full == p or full.startswith(p + ".") for p in _SHARED)
    if "reasoning" not in pipelines and not shared:
        used = ", ".join(_PIPELINE_WORDS.get(p, p) for p in pipelines)
        return inert(f"read only by RLinf's {used} pipelines, which rlcfg validates but does not run (`rlcfg run` "
                     "refuses such a config as a whole); the reasoning pipeline never reads it")
    computed = any(full == p or full.startswith(p + ".") for p in _COMPUTED)
    return UNMODELLED_ALGORITHM if computed else UNMODELLED_OTHER


@lru_cache(maxsize=None)
def extension(path: str) -> type[Section]:
    """A Section holding every inventoried key directly under `path` ("" is the top level)."""
    return create_model(_class_name(path), __base__=Section, **_inventoried_fields(path))


class _InventoriedMeta(type(Section)):  # type: ignore[misc]
    def __new__(mcs, name: str, bases: tuple, namespace: dict, inventory: str | None = None, **kwargs: Any) -> Any:
        if inventory is not None:
            namespace = _with_inventory(namespace, inventory)
        return super().__new__(mcs, name, bases, namespace, **kwargs)


class Inventoried(Section, metaclass=_InventoriedMeta):
    """The base of a hand-written RLinf section: `class X(Inventoried, inventory="path")` declares X with the
    inventoried keys under `path` too.

    It used to inherit a generated section of those keys instead. pydantic then built every inventoried field twice,
    once in the generated class and once as a copy in the hand-written one, on every RLinf check."""


def _with_inventory(namespace: dict, path: str) -> dict:
    """The class namespace with the inventoried fields of `path` added before the hand-written ones, each
    hand-written field taking the place of the generated one it overrides (where inheriting put it)."""
    own = namespace.get("__annotations__", {})
    annotations: dict[str, Any] = {}
    namespace = dict(namespace)
    for name, (annotation, info) in _inventoried_fields(path).items():
        if name in own:
            annotations[name] = own[name]
        else:
            annotations[name] = annotation
            namespace[name] = info
    for name, annotation in own.items():
        annotations.setdefault(name, annotation)
    namespace["__annotations__"] = annotations
    return namespace


def _inventoried_fields(path: str) -> dict[str, tuple[Any, Any]]:
    """The inventoried keys directly under `path` as pydantic field definitions, by attribute name."""
    fields: dict[str, Any] = {}
    taken: set[str] = set()
    for key in _CHILDREN.get(path, ()):
        full = f"{path}.{key}" if path else key
        kind, default, releases, pipelines = FIELDS[full]
        if full in _CHILDREN:
            # a mapping in every example is a section; one that is sometimes a scalar keeps its keys known
            # without insisting on the shape
            nested = deferred(full)
            annotation = Optional[nested] if kind == "dict" else Union[nested, Any]
        else:
            annotation = Optional[_SCALARS[kind]] if kind in _SCALARS else Any
        name = _python_name(key, taken)
        fields[name] = (annotation, param(None, alias=None if name == key else key, releases=releases,
                                          fate=run_fate(full, pipelines),
                                          description=_description(full, kind, default, pipelines)))
    return fields


def deferred(path: str) -> type[Deferred]:
    """The annotation of the inventoried section at `path`, built on first use (see Deferred)."""
    return type(_class_name(path).removesuffix("Keys") + "Deferred", (Deferred,),
                {"__module__": __name__, "build": staticmethod(lambda: extension(path)),
                 "section_name": f"{__name__}.{_class_name(path)}"})
