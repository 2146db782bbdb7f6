"""How ChatLearn 1.2.0 reads the value of a command-line override `key=value`.

ChatLearn 1.2.0's launcher (chatlearn/entrypoint.py with utils/parse_utils.py) does not read the value as YAML: it
splits the override at the first `=` and converts the text with a parser chosen by the type of the dataclass field
the key names. A bool is true only for the text `true` in any case (`yes`, `1` and `on` are false); an int or float
is what int() or float() makes of the text, and any other text stops the launcher; a string keeps the text as
written (`123` stays a string, `null` the word "null"); an optional field is None for `none` or `null`. Fields of
other types (lists, mappings, unions) keep the value as rlcfg's dotlist grammar reads it. ChatLearn main reads
every value with OmegaConf's dotlist (YAML), as rlcfg's override grammar does.
"""

from __future__ import annotations

import types
from dataclasses import replace
from typing import Any, Literal, Union, get_args, get_origin

from rlcfg.diagnostics import Diagnostic, Severity, diagnostic
from rlcfg.schema.base import Section, field_at

# The releases whose launcher parses override values by field type.
TYPED_RELEASES = ("1.2.0",)


def _parsed_kind(annotation: Any) -> tuple[type, bool] | None:
    """The scalar type ChatLearn 1.2.0 converts a value to, and whether `none`/`null` means None; None where it
    has no parser rlcfg reproduces."""
    optional = False
    if get_origin(annotation) in (Union, types.UnionType):
        args = get_args(annotation)
        rest = [a for a in args if a is not type(None)]
        if len(args) != 2 or len(rest) != 1:
            return None
        annotation, optional = rest[0], True
    if get_origin(annotation) is Literal:
        # rlcfg spells ChatLearn's plain `str` choice fields as Literals; ChatLearn parses them with str.
        if not all(isinstance(a, str) for a in get_args(annotation)):
            return None
        annotation = str
    if annotation in (bool, int, float, str):
        return annotation, optional
    return None


def typed_overrides(overrides: list[Any], root: type[Section], release: str | None
                    ) -> tuple[list[Any], list[Diagnostic]]:
    """The overrides with each value as `release`'s launcher reads it, and the values it cannot read."""
    if release not in TYPED_RELEASES:
        return overrides, []
    out: list[Any] = []
    found: list[Diagnostic] = []
    for o in overrides:
        info = field_at(root, o.path)[0] if o.has_value else None
        kind = _parsed_kind(info.annotation) if info is not None else None
        if kind is None or o.origin.override_text is None:
            out.append(o)
            continue
        kind_type, optional = kind
        raw = o.origin.override_text.partition("=")[2]
        name = ".".join(map(str, o.path))
        if optional and raw.lower() in ("none", "null"):
            value: Any = None
        elif kind_type is bool:
            value = raw.lower() == "true"
            if raw.lower() != "true" and raw.lower() != "false":
                found.append(diagnostic(
                    "RLC200", name, f"`{name}={raw}`: ChatLearn 1.2.0 reads a command-line bool as true only for "
                    f"the text `true`, so this is false", origin=o.origin, severity=Severity.WARNING,
                    hint=f"write `{name}=true` or `{name}=false`"))
        elif kind_type is str:
            value = raw
        else:
            try:
                value = kind_type(raw)
            except ValueError:
                what = "an integer" if kind_type is int else "a number"
                found.append(diagnostic(
                    "RLC200", name, f"`{name}`: ChatLearn 1.2.0 converts a command-line value for this key with "
                    f"{kind_type.__name__}(), which fails on `{raw}`", origin=o.origin,
                    hint=f"write {what}" + (", or `null`" if optional else "")))
                continue
        out.append(replace(o, value=value))
    return out, found
