"""Types as a user reads them: `int >= 1`, `one of fsdp, megatron`, `list of str`, `float or null`.

`rlcfg validate --explain` and the reference docs both print types through this module, so a key reads the
same in both places.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

from pydantic.fields import FieldInfo

_NAMES = {int: "int", float: "float", str: "str", bool: "bool", type(None): "null", Any: "any"}


def literal_text(value: Any) -> str:
    """A constant as it is written in YAML (true, null, fsdp)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)




def _item(annotation: Any) -> str:
    # "list of any" says nothing a bare "list" does not.
    return "" if annotation is Any else type_text(annotation)


def type_text(annotation: Any) -> str:
    from rlcfg.schema.base import Section

    origin = get_origin(annotation)
    if annotation in _NAMES:
        return _NAMES[annotation]
    if isinstance(getattr(annotation, "type_text", None), str):  # a type of rlcfg's own names itself
        return annotation.type_text
    if isinstance(annotation, type) and issubclass(annotation, Section):
        return "section"
    if origin is Literal:
        values = get_args(annotation)
        return "one of " + ", ".join(literal_text(v) for v in values) if len(values) > 1 else literal_text(values[0])
    if origin in (Union, types.UnionType):
        args = get_args(annotation)
        nullable = type(None) in args
        rest = [a for a in args if a is not type(None)]
        literals = [v for a in rest if get_origin(a) is Literal for v in get_args(a)]
        others = [a for a in rest if get_origin(a) is not Literal]
        parts = []
        for text in (type_text(a) for a in others):
            if text not in parts:  # two section types read the same; say it once
                parts.append(text)
        if literals:
            parts.append("one of " + ", ".join(literal_text(v) for v in literals))
        text = " or ".join(parts)
        return f"{text} or null" if nullable else text
    if origin is typing.Annotated:
        return type_text(get_args(annotation)[0])
    if origin in (list, tuple, set, frozenset):
        args = [a for a in get_args(annotation) if a is not Ellipsis]
        if origin is tuple and len(args) > 1 and len(set(args)) > 1:
            return "list of " + ", ".join(type_text(a) for a in args)
        inner = _item(args[0]) if args else ""
        return f"list of {inner}" if inner else "list"
    if origin is dict:
        args = get_args(annotation)
        inner = _item(args[1]) if args else ""
        return f"mapping of {inner}" if inner else "mapping"
    return getattr(annotation, "__name__", str(annotation))


def _number(bound: Any) -> str:
    # A float field's bound `gt=0.0` reads better as `> 0`.
    if isinstance(bound, float) and bound.is_integer():
        return str(int(bound))
    return str(bound)


def range_text(info: FieldInfo) -> str:
    """The numeric bounds of a field, as in `>= 1, <= 8`."""
    parts = []
    for item in info.metadata:
        for attribute, symbol in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            bound = getattr(item, attribute, None)
            if bound is not None:
                parts.append(f"{symbol} {_number(bound)}")
    return ", ".join(parts)


def length_text(info: FieldInfo) -> str:
    for item in info.metadata:
        min_length = getattr(item, "min_length", None)
        if min_length:
            return f"at least {min_length} item{'s' if min_length != 1 else ''}"
    return ""


def constraint_text(info: FieldInfo) -> str:
    return ", ".join(part for part in (range_text(info), length_text(info)) if part)


def field_type_text(info: FieldInfo) -> str:
    """The type of a field with its range, as in `int >= 1` or `list of str (at least 1 item)`."""
    text = type_text(info.annotation)
    bounds = range_text(info)
    if bounds:
        text = f"{text} {bounds}"
    length = length_text(info)
    if length:
        text = f"{text} ({length})"
    return text
