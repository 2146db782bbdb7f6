"""`record`: `dataclasses.dataclass` for rlcfg's plain records, declared at a fraction of the cost.

Every `rlcfg validate` declares a few dozen dataclasses on its way to a verdict (diagnostics, origins, rules,
results). Before Python 3.13, the standard decorator compiles each generated method on its own: six compilations for
a frozen class, about half a millisecond. Together they were a fifth of what rlcfg's own code adds to a check's
start-up (bench/validate_startup.py). `record` has the standard decorator find the fields, their defaults and the
match args, with no method of its own to generate. It writes the source of `__init__`, `__repr__` and `__eq__` (and
`__hash__` of a frozen record) and compiles each the first time it is called: a check makes most of its records and
reads them, and never prints, compares or hashes them. Even `__init__` is compiled only for a class made more than
a few times (MADE_BEFORE_COMPILING); before that, the arguments are bound in Python. A frozen record's
`__setattr__` and `__delattr__` need no source of their own.

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
    namespace: dict[str, Any] = {"NO_VALUE": _NO_VALUE, "set_attribute": object.__setattr__}
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
    sources = {
        "__init__": [f"def __init__(self, {', '.join(parameters)}):", *(body or ["    pass"])],
        "__repr__": ["def __repr__(self):", f"    return self.__class__.__qualname__ + f\"({shown})\""],
        "__eq__": ["def __eq__(self, other):",
                   "    if other.__class__ is self.__class__:",
                   f"        return {mine} == {theirs}",
                   "    return NotImplemented"],
    }
    if frozen:
        hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
        sources["__hash__"] = ["def __hash__(self):",
                               f"    return hash(({''.join(f'self.{name},' for name in hashed)}))"]
    assignment = ("__setattr__", "__delattr__") if frozen else ()
    written = [name for name in dict.fromkeys((*sources, *assignment, "__hash__")) if name in cls.__dict__]
    if written:
        raise TypeError(f"record {cls.__qualname__} writes {', '.join(written)} itself; declare it with "
                        "dataclasses.dataclass")
    for name, lines in sources.items():
        setattr(cls, name, _compiled_on_first_call(cls, name, lines, namespace))
    cls.__init__ = _init_until_compiled(cls, fields, frozen, cls.__init__)  # type: ignore[method-assign]
    if frozen:
        _forbid_assignment(cls, frozenset(f.name for f in fields))
    if not frozen:
        cls.__hash__ = None  # type: ignore[assignment]  # mutable and compared by value: unhashable, as standard
    cls.__doc__ = cls.__doc__ if cls.__doc__ != cls.__name__ else f"{cls.__name__}({', '.join(f.name for f in fields)})"
    return cls


def _compiled_on_first_call(cls: type, name: str, lines: list[str], namespace: dict[str, Any]) -> Callable:
    """A stand-in for the method `lines` define, which compiles it, puts it on `cls` and calls it. Most records of a
    check are made and read, never printed, compared or hashed, so most of these methods are never compiled."""

    compiled: list[Callable] = []

    def first_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not compiled:
            exec("\n".join(lines), namespace)  # noqa: S102 -- the source is built in _declare from field names only
            method = namespace[name]
            method.__qualname__ = f"{cls.__qualname__}.{name}"
            setattr(cls, name, method)
            compiled.append(method)
        return compiled[0](self, *args, **kwargs)

    first_call.__name__, first_call.__qualname__ = name, f"{cls.__qualname__}.{name}"
    return first_call


# How many records of one class are made without its compiled `__init__`. Most record classes of a check are made
# once or twice (the result, the detection, the resolution): binding their arguments in Python costs microseconds,
# compiling their `__init__` a tenth of a millisecond each. The classes made by the hundred (origins, layers) are
# compiled on their ninth.
MADE_BEFORE_COMPILING = 8


def _init_until_compiled(cls: type, fields: tuple, frozen: bool, compile_init: Callable) -> Callable:
    """`__init__` for the first MADE_BEFORE_COMPILING records of `cls`: the arguments are bound as the compiled
    `__init__` would bind them, errors included; then `compile_init` (its stand-in) takes over."""
    names = tuple(f.name for f in fields)
    required = [f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    accepted = f"{len(names) + 1}" if len(required) == len(names) else f"from {len(required) + 1} to {len(names) + 1}"
    assign = object.__setattr__ if frozen else setattr
    post_init = hasattr(cls, "__post_init__")  # as the compiled source decides it: when the record is declared
    made = 0

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal made
        made += 1
        if made > MADE_BEFORE_COMPILING:
            compile_init(self, *args, **kwargs)
            return
        where = f"{cls.__qualname__}.__init__()"
        if len(args) > len(names):
            raise TypeError(f"{where} takes {accepted} positional arguments but {len(args) + 1} were given")
        values = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names:
                raise TypeError(f"{where} got an unexpected keyword argument {key!r}")
            if key in values:
                raise TypeError(f"{where} got multiple values for argument {key!r}")
            values[key] = value
        missing = [name for name in required if name not in values]
        if missing:
            quoted = [repr(name) for name in missing]
            listed = " and ".join(quoted) if len(quoted) < 3 else f"{', '.join(quoted[:-1])}, and {quoted[-1]}"
            raise TypeError(f"{where} missing {len(missing)} required positional argument"
                            f"{'s' if len(missing) > 1 else ''}: {listed}")
        for f in fields:
            if f.name in values:
                value = values[f.name]
            else:
                value = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            assign(self, f.name, value)
        if post_init:
            self.__post_init__()

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__


def _forbid_assignment(cls: type, fields: frozenset) -> None:
    # as the standard frozen dataclass: a subclass that is not a record may set attributes of its own
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in fields:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in fields:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    for method in (__setattr__, __delattr__):
        method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
        setattr(cls, method.__name__, method)
