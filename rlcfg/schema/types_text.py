"""Types as a user reads them: `int >= 1`, `one of fsdp, megatron`, `list of str`, `float or null`."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

from pydantic.fields import FieldInfo

_NAMES = {int: "int", float: "float", str: "str", bool: "bool", type(None): "null", Any: "any"}


def _literal(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def type_text(annotation: Any) -> str:
    from rlcfg.schema.base import Section

    origin = get_origin(annotation)
    if annotation in _NAMES:
        return _NAMES[annotation]
    if isinstance(annotation, type) and issubclass(annotation, Section):
        return "section"
    if origin is Literal:
        values = get_args(annotation)
        return "one of " + ", ".join(_literal(v) for v in values) if len(values) > 1 else _literal(values[0])
    if origin in (Union, types.UnionType):
        args = get_args(annotation)
        nullable = type(None) in args
        rest = [a for a in args if a is not type(None)]
        literals = [v for a in rest if get_origin(a) is Literal for v in get_args(a)]
        others = [a for a in rest if get_origin(a) is not Literal]
        parts = [type_text(a) for a in others]
        if literals:
            parts.append("one of " + ", ".join(_literal(v) for v in literals))
        text = " or ".join(parts)
        return f"{text} or null" if nullable else text
    if origin is typing.Annotated:
        return type_text(get_args(annotation)[0])
    if origin is list:
        args = get_args(annotation)
        return f"list of {type_text(args[0])}" if args else "list"
    if origin is dict:
        args = get_args(annotation)
        return f"mapping of {type_text(args[1])}" if args and args[1] is not Any else "mapping"
    return getattr(annotation, "__name__", str(annotation))


def constraint_text(info: FieldInfo) -> str:
    parts = []
    for item in info.metadata:
        for attribute, symbol in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            bound = getattr(item, attribute, None)
            if bound is not None:
                parts.append(f"{symbol} {bound}")
        min_length = getattr(item, "min_length", None)
        if min_length:
            parts.append(f"at least {min_length} item{'s' if min_length != 1 else ''}")
    return ", ".join(parts)


def field_type_text(info: FieldInfo) -> str:
    """The type of a field with its range, as in `int >= 1`."""
    base = type_text(info.annotation)
    constraints = constraint_text(info)
    return f"{base} {constraints}" if constraints else base
