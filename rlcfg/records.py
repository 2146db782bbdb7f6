"""`record`: `dataclasses.dataclass` for rlcfg's plain records, declared at a fraction of the cost.

Every `rlcfg validate` declares a few dozen dataclasses on its way to a verdict (diagnostics, origins, rules,
results). Before Python 3.13, the standard decorator compiles each generated method on its own: six compilations for
a frozen class, about half a millisecond. Together they were a fifth of what rlcfg's own code adds to a check's
start-up (bench/validate_startup.py). `record` has the standard decorator find the fields, their defaults and the
match args, with no method of its own to generate, then compiles `__init__`, `__repr__` and `__eq__` (and, when
frozen, `__hash__`, `__setattr__` and `__delattr__`) from one source: what Python 3.13's decorator does too.

The result is a dataclass in every way rlcfg relies on: `dataclasses.fields`, `replace`, `asdict` and
`is_dataclass` work, the methods behave as the standard ones (tests/test_records.py holds them side by side).
Only plain records are supported: fields with a default or a `field(default_factory=...)`, and none of the
generated methods written by hand. A record that needs more fails when it is declared, and should use
`dataclasses.dataclass`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, TypeVar, overload

T = TypeVar("T", bound=type)

_NO_VALUE = object()  # the default of a parameter whose field has a default factory


@overload
def record(cls: T, /) -> T: ...


@overload
def record(*, frozen: bool = False) -> Callable[[T], T]: ...


def record(cls: Any = None, /, *, frozen: bool = False) -> Any:
    """Use as `@record` or `@record(frozen=True)`, like `@dataclass` and `@dataclass(frozen=True)`."""
    if cls is None:
        return lambda cls: _declare(cls, frozen)
    return _declare(cls, frozen)


def _declare(cls: T, frozen: bool) -> T:
    if not cls.__dict__.get("__doc__"):
        cls.__doc__ = cls.__name__  # the standard decorator would otherwise compute a signature for it
    # The standard decorator finds the fields (inherited ones included), removes default factories from the class
    # and sets __match_args__; with init, repr and eq off it compiles nothing.
    cls = dataclasses.dataclass(cls, init=False, repr=False, eq=False)
    fields = dataclasses.fields(cls)
    unsupported = [f.name for f in fields if not f.init or f.kw_only is True]
    if unsupported or len(fields) != len(cls.__dataclass_fields__):
        what = ", ".join(unsupported) or "an InitVar or ClassVar"
        raise TypeError(f"record {cls.__qualname__}: only plain fields are supported ({what}); declare it with "
                        "dataclasses.dataclass")
    namespace: dict[str, Any] = {"NO_VALUE": _NO_VALUE, "FrozenInstanceError": dataclasses.FrozenInstanceError,
                                 "set_attribute": object.__setattr__, "FIELDS": frozenset(f.name for f in fields),
                                 "cls": cls}
    parameters, body = [], []
    for f in fields:
        value = f.name
        if f.default is not dataclasses.MISSING:
            namespace[f"default_{f.name}"] = f.default
            parameters.append(f"{f.name}=default_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"factory_{f.name}"] = f.default_factory
            parameters.append(f"{f.name}=NO_VALUE")
            value = f"factory_{f.name}() if {f.name} is NO_VALUE else {f.name}"
        else:
            parameters.append(f.name)
        body.append(f"    set_attribute(self, {f.name!r}, {value})" if frozen else f"    self.{f.name} = {value}")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    shown = ", ".join(f"{f.name}={{self.{f.name}!r}}" for f in fields if f.repr)
    compared = [f.name for f in fields if f.compare]
    mine, theirs = (f"({''.join(f'{who}.{name},' for name in compared)})" for who in ("self", "other"))
    source = [
        f"def __init__(self, {', '.join(parameters)}):", *(body or ["    pass"]),
        "def __repr__(self):",
        f"    return self.__class__.__qualname__ + f\"({shown})\"",
        "def __eq__(self, other):",
        "    if other.__class__ is self.__class__:",
        f"        return {mine} == {theirs}",
        "    return NotImplemented",
    ]
    methods = ["__init__", "__repr__", "__eq__"]
    if frozen:
        hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
        source += [
            "def __hash__(self):",
            f"    return hash(({''.join(f'self.{name},' for name in hashed)}))",
            "def __setattr__(self, name, value):",
            "    if type(self) is cls or name in FIELDS:",
            "        raise FrozenInstanceError(f'cannot assign to field {name!r}')",
            "    super(cls, self).__setattr__(name, value)",
            "def __delattr__(self, name):",
            "    if type(self) is cls or name in FIELDS:",
            "        raise FrozenInstanceError(f'cannot delete field {name!r}')",
            "    super(cls, self).__delattr__(name)",
        ]
        methods += ["__hash__", "__setattr__", "__delattr__"]
    written = [name for name in (*methods, "__hash__") if name in cls.__dict__]
    if written:
        raise TypeError(f"record {cls.__qualname__} writes {', '.join(written)} itself; declare it with "
                        "dataclasses.dataclass")
    exec("\n".join(source), namespace)  # noqa: S102 -- the source is built above from field names only
    for name in methods:
        method = namespace[name]
        method.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, method)
    if not frozen:
        cls.__hash__ = None  # type: ignore[assignment]  # mutable and compared by value: unhashable, as standard
    cls.__doc__ = cls.__doc__ if cls.__doc__ != cls.__name__ else f"{cls.__name__}({', '.join(f.name for f in fields)})"
    return cls
