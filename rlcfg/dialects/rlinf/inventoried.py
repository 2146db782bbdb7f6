"""Binds the generated RLinf field table (fields.py) into Section classes.

RLinf has no schema: its code reads whatever key it asks for, and its example configs carry hundreds of keys
per pipeline (an embodied config's simulator settings, a Megatron actor's every knob). rlcfg models the keys
its rules and lowering use by hand, in models.py, with their constraints and full descriptions. Every
other key that RLinf's examples write or its code reads, at any claimed release, comes from the inventory
(tools/inventory/rlinf.py) as one row: its type as seen in the examples and the code, and the releases that
have it. A hand-written section names its path (`class Cluster(Inventoried, inventory="cluster")`); the rows
under that path are fields of its own, in the inventory's order, built when something asks for them (see
`Inventoried`), and a hand-written field overrides the generated one of the same key, in its place.
`extension(path)` makes a section of the rows alone, for the paths nothing is written for by hand (the Deferred
ones).

Knowing these keys matters twice: a key RLinf reads is not reported as unknown, and a misspelling of one is
caught as close to a known key (RLinf would silently drop it).
"""

from __future__ import annotations

import keyword
import re
from functools import lru_cache
from typing import Any, Iterator, Optional, Union

from pydantic import BaseModel, create_model
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError, core_schema

from rlcfg import run_limits
from rlcfg.schema import base, compiled
from rlcfg.schema.base import Deferred, Fate, Section, inert, key_of, param, refused
from rlcfg.dialects.rlinf.fields import FIELDS

class Number:
    """Any number, kept as written (30 stays 30, 30.0 stays 30.0); a string, a boolean or a mapping is an error.
    A class rather than an annotated validator, so that the compiled-schema cache can name what the schema holds."""

    type_text = "number"  # as --explain and the reference docs show it (rlcfg.schema.types_text)

    @classmethod
    def __get_pydantic_core_schema__(cls, _source: Any, _handler: Any) -> Any:
        return core_schema.no_info_before_validator_function(cls.check, core_schema.any_schema())

    @classmethod
    def __get_pydantic_json_schema__(cls, _schema: Any, _handler: Any) -> dict:
        return {"type": "number"}

    @classmethod
    def check(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise PydanticCustomError("float_type", "Input should be a valid number")
        return value


# An inventoried key's kind is what its examples happen to write, not a declared type: RLinf declares none, and
# passes many of these keys on to a library that takes any number (IsaacLab's `episode_length_s: 30` is a float
# there). So a key seen only with integers accepts any number; a string or a mapping there is still an error.
_SCALARS: dict[str, Any] = {"bool": bool, "int": Number, "float": float, "str": str, "list": list,
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


# What `hasattr(BaseModel, name)` finds: the model's attributes and its metaclass's. Asking hasattr for each of
# the 800 inventoried keys went through pydantic's metaclass __getattr__ and its AttributeError every time.
_MODEL_ATTRIBUTES = frozenset(dir(BaseModel)) | frozenset(dir(type(BaseModel)))


def _python_name(key: str, taken: set[str]) -> str:
    """The attribute name of a generated field: the key itself where Python and pydantic allow it."""
    if key.isidentifier() and not keyword.iskeyword(key) and not key.startswith("_") \
            and key not in _MODEL_ATTRIBUTES:
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


# The run ledger's default for an inventoried key (a hand-written field of models.py declares its own). RLinf's
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


# The actor's MoE router settings, which RLinf's Megatron worker hands megatron-core's TransformerConfig: rlcfg runs
# them as megatron-core computes them at their defaults, and the rule rlinf/run-refusals refuses a value that computes
# otherwise. The expert count, the experts' size and the top k RLinf overwrites from the model's config.json
# (validate_model_cfg_by_hf_config), as rlcfg builds the model from it.
_ROUTER = frozenset(f"actor.model.{key}" for key in run_limits.MOE_ROUTER_KEYS)
_FROM_MODEL = frozenset(f"actor.model.{key}" for key in ("moe_router_topk", "num_moe_experts", "moe_ffn_hidden_size"))


# Read by the lowering's rules instead: rlinf/run-refusals refuses any value but the one rlcfg runs. RLinf's dataloader
# draws rollout_batch_size × max_num_gen_batches prompts a step, so 1 (its default from 2025-10) is one batch a step.
_RULED = frozenset({"algorithm.max_num_gen_batches"})


def run_fate(full: str, pipelines: tuple = ("reasoning",)) -> Fate:
    """The run-ledger fate of the inventoried key `full` (dotted), used by the configs of `pipelines`."""
    if full in _ROUTER or full in _RULED:
        return base.HONORED
    if full in _FROM_MODEL:
        return inert("RLinf overwrites it from the model's config.json, from which rlcfg builds the model")
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
        cls = super().__new__(mcs, name, bases, namespace, **kwargs)
        if inventory is not None:
            cls._inventory_path = inventory
            cls._hand_written = dict.fromkeys(cls.__pydantic_fields__)  # names in order, all pydantic declared
            cls._inventory_fields = {}  # the inventoried fields built so far, by attribute name
            cls._inventory_complete = False
            _DECLARED.append(cls)
        return cls

    @property
    def model_fields(cls) -> dict[str, FieldInfo]:  # type: ignore[override]
        complete_inventory(cls)
        return cls.__pydantic_fields__


class Inventoried(Section, metaclass=_InventoriedMeta):
    """The base of a hand-written RLinf section: `class X(Inventoried, inventory="path")` declares X with the
    inventoried keys under `path` too, in the inventory's order, a hand-written field taking the place of the
    inventoried one it overrides.

    Those keys are hundreds, and a check reads almost none of them: a reasoning config writes none, and the
    compiled schema (rlcfg.schema.compiled) validates them all without their pydantic fields. So pydantic declares
    the class with its hand-written fields, and an inventoried field is built when something asks for it: by its
    key (`keyed_field`, which a check uses for the keys a document sets), or all of them when the class's
    `model_fields` are read (the docs, --explain, a did-you-mean) or its schema is generated."""

    # Set by the metaclass: _inventory_path (the dotted path), _hand_written (the names of the hand-written fields),
    # _inventory_fields (the inventoried fields built so far, by attribute name) and _inventory_complete. Not annotated: pydantic would evaluate the annotations of
    # this class again for every section declared on it.

    @classmethod
    def hand_written_fields(cls) -> dict[str, FieldInfo]:
        return {name: cls.__pydantic_fields__[name] for name in cls._hand_written}

    @classmethod
    def field_named(cls, name: str) -> FieldInfo | None:
        if name in cls._hand_written:
            return cls.__pydantic_fields__[name]
        return _inventory_field(cls, name) if name in _keys_by_name(cls._inventory_path) else None

    @classmethod
    def keyed_field(cls, key: str) -> tuple[str, FieldInfo] | None:
        found = super().keyed_field(key)  # a hand-written field of that key
        if found is not None:
            return found
        name = _layout(cls._inventory_path).get(key)
        if name is None or name in cls._hand_written:
            return None  # not inventoried, or a hand-written field of that name holds another key
        return name, _inventory_field(cls, name)

    @classmethod
    def default_entries(cls) -> Iterator[tuple[str, FieldInfo | None]]:
        # every inventoried key defaults to null: its field is not needed to say so
        fields = cls.__pydantic_fields__
        for key, name in _layout(cls._inventory_path).items():
            yield (key_of(name, fields[name]), fields[name]) if name in cls._hand_written else (key, None)
        for name in cls._hand_written:
            if name not in _keys_by_name(cls._inventory_path):
                yield key_of(name, fields[name]), fields[name]

    def __eq__(self, other: Any) -> bool:
        complete_inventory(type(self))  # pydantic compares the fields it knows of
        return super().__eq__(other)

    def __repr_args__(self) -> Any:
        complete_inventory(type(self))
        return super().__repr_args__()


_DECLARED: list[type[Inventoried]] = []


def complete_inventory(cls: type) -> None:
    """Give `cls` all its inventoried fields, in the inventory's order (see Inventoried)."""
    if getattr(cls, "_inventory_complete", True):
        return
    own = cls.__pydantic_fields__
    _build_inventory_fields(cls, [name for name in _layout(cls._inventory_path).values()
                                  if name not in cls._hand_written and name not in cls._inventory_fields])
    fields: dict[str, FieldInfo] = {}
    for name in _layout(cls._inventory_path).values():
        # a hand-written field takes the place of the inventoried one it overrides
        fields[name] = own[name] if name in cls._hand_written else cls._inventory_fields[name]
    for name in cls._hand_written:
        fields.setdefault(name, own[name])
    cls.__pydantic_fields__ = fields
    cls._inventory_complete = True


def complete_every_inventory() -> None:
    """Before pydantic generates the schema of any section: the inventoried fields are part of it."""
    for cls in _DECLARED:
        complete_inventory(cls)


base.BEFORE_SCHEMA.append(complete_every_inventory)


def _inventory_field(cls: type, name: str) -> FieldInfo:
    if name not in cls._inventory_fields:
        _build_inventory_fields(cls, [name])
    return cls._inventory_fields[name]


def _build_inventory_fields(cls: type, names: list[str]) -> None:
    if not names:
        return
    # pydantic makes the fields, as it would have in the class: a model of just these fields, with the same config
    made = create_model(f"{cls.__name__}Keys", __config__=Section.model_config,
                        **{name: _definition(cls._inventory_path, name) for name in names})
    for name in names:
        cls._inventory_fields[name] = made.__pydantic_fields__[name]


@lru_cache(maxsize=None)
def _layout(path: str) -> dict[str, str]:
    """The inventoried keys directly under `path`, in order, with the attribute name of each."""
    taken: set[str] = set()
    return {key: _python_name(key, taken) for key in _CHILDREN.get(path, ())}


@lru_cache(maxsize=None)
def _keys_by_name(path: str) -> dict[str, str]:
    return {name: key for key, name in _layout(path).items()}


def _inventoried_fields(path: str) -> dict[str, tuple[Any, Any]]:
    """The inventoried keys directly under `path` as pydantic field definitions, by attribute name."""
    return {name: _definition(path, name) for name in _layout(path).values()}


def _definition(path: str, name: str) -> tuple[Any, Any]:
    """The annotation and the `param` of the inventoried field `name` under `path`."""
    key = _keys_by_name(path)[name]
    full = f"{path}.{key}" if path else key
    kind, default, releases, pipelines = FIELDS[full]
    if full in _CHILDREN:
        # a mapping in every example is a section; one that is sometimes a scalar keeps its keys known
        # without insisting on the shape
        nested = deferred(full)
        annotation = Optional[nested] if kind == "dict" else Union[nested, Any]
    else:
        annotation = Optional[_SCALARS[kind]] if kind in _SCALARS else Any
    return annotation, param(None, alias=None if name == key else key, releases=releases,
                             fate=run_fate(full, pipelines), description=_description(full, kind, default, pipelines))


@lru_cache(maxsize=None)
def deferred(path: str) -> type[Deferred]:
    """The annotation of the inventoried section at `path`, built on first use (see Deferred)."""
    return type(_deferred_name(path), (Deferred,),
                {"__module__": __name__, "build": staticmethod(lambda: extension(path)),
                 "section_name": f"{__name__}.{_class_name(path)}"})


def _deferred_name(path: str) -> str:
    return _class_name(path).removesuffix("Keys") + "Deferred"


@lru_cache(maxsize=None)
def _deferred_paths() -> dict[str, str]:
    return {_deferred_name(path): path for path in _CHILDREN if path}


def _lookup(qualname: str) -> Any:
    """A compiled schema names the Deferred annotations of inventoried sections; they are made when named."""
    path = _deferred_paths().get(qualname)
    if path is None:
        raise LookupError(qualname)
    return deferred(path)


compiled.register_lookup(__name__, _lookup)
