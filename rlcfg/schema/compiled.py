"""Compiled section validators, kept between runs the way Python keeps a module's bytecode.

Before a dialect's first check, pydantic generates the core schema of its root section, in Python: 15 to 50 ms,
as long as everything else a `validate` does after its imports. That schema depends only on rlcfg's code and the
pydantic release, never on the config being checked. So the first build of a section writes its schema to the
cache folder, and every later run hands the stored schema straight to pydantic-core, which builds the validator in
well under a millisecond. Only rlcfg's own sections are kept. The folder belongs to one description of the Python
and pydantic releases and of every rlcfg source file (size and modification time), which it holds in a MANIFEST
file and is named by a checksum of: an upgrade or an edit starts a fresh folder, and the oldest folders beyond
KEPT_FOLDERS are removed.

A cache file holds what validation needs: the schema without its `metadata`, which only JSON Schema generation
reads and which is half of its size. An installed section's `__pydantic_core_schema__` is therefore a placeholder
that has pydantic build the full schema again when something asks for it (`rlcfg schema`, the docs).

A cache file is plain data in `marshal`'s format, the one Python reads its own bytecode files with, and never
pickle: strings, numbers, lists, tuples, sets and mappings, which loading neither imports nor runs anything for.
Where the schema holds an object (a section class, a validator function, a default factory), the data holds a
placeholder, and a list of links gives its place and its name. Loading looks those names up among rlcfg's section
classes and already-imported rlcfg and pydantic modules, or has RLinf's inventoried module make the Deferred
annotation of an inventoried RLinf section it names (`register_lookup`), and puts them in place: about a hundred
lookups, where reading JSON had Python visit each of the schema's thousands of nodes. A checksum guards the data. A file that does not
load, fails its checksum, or names something that does not resolve, is ignored and written again.

`RLCFG_CACHE_DIR` moves the cache (default: `$XDG_CACHE_HOME/rlcfg`, else `~/.cache/rlcfg`); `RLCFG_NO_CACHE=1`
turns it off.
"""

from __future__ import annotations

import enum
import functools
import marshal
import os
import re
import sys
import types
import zlib
from typing import Any

from rlcfg.patterns import lazy

# Section classes and Deferred annotations by `module:qualname`. Generated ones (RLinf's inventory) are not module
# attributes, so a name is looked up here first; a name two live classes share is ambiguous, and a schema that
# refers to it is not kept.
_SECTIONS: dict[str, type] = {}
_AMBIGUOUS: set[str] = set()
# Where names in a cache file may point: objects already imported by rlcfg or pydantic.
_TRUSTED_MODULES = ("rlcfg.", "pydantic.", "pydantic_core.")
_REF_ID = lazy(r":(\d+)")


class Uncacheable(Exception):
    """A schema holds something that has no name in a new process (a closure, an object of an unknown type)."""


# Modules whose objects a cache file may name before they exist: a function that makes the object of a qualname
# (RLinf's inventoried Deferred annotations, made when first named), or raises LookupError.
_LOOKUPS: dict[str, Any] = {}


def register_lookup(module: str, lookup: Any) -> None:
    _LOOKUPS[module] = lookup


def register(cls: type) -> None:
    name = f"{cls.__module__}:{cls.__qualname__}"
    if name in _SECTIONS and _SECTIONS[name] is not cls:
        _AMBIGUOUS.add(name)
    _SECTIONS[name] = cls


def folder() -> str | None:
    if os.environ.get("RLCFG_NO_CACHE", "") not in ("", "0"):
        return None
    base = os.environ.get("RLCFG_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "rlcfg")
    return _checked_folder(os.path.join(base, "schemas"))


@functools.lru_cache(maxsize=None)
def _checked_folder(base: str) -> str:
    """The folder for this Python, pydantic and rlcfg source. Its name is a checksum of their description, and the
    full description is kept inside: a folder whose description differs (a checksum collision) is emptied."""
    source = _source().encode()
    where = os.path.join(base, f"{zlib.crc32(source):08x}{zlib.adler32(source):08x}")
    manifest = os.path.join(where, "MANIFEST")
    try:
        with open(manifest, encoding="utf-8") as found:
            if found.read() == _source():
                return where
    except OSError:
        pass
    try:
        os.makedirs(where, exist_ok=True)
        for stale in os.listdir(where):
            os.remove(os.path.join(where, stale))
        with open(manifest, "w", encoding="utf-8") as out:
            out.write(_source())
        _prune(base, keep=where)
    except OSError:
        pass
    return where


KEPT_FOLDERS = 8  # every edit of rlcfg's source starts a folder: the newest few are kept, for a few installs


def _prune(base: str, keep: str) -> None:
    """Remove all but the KEPT_FOLDERS newest folders (by their MANIFEST's time); a folder removed while another
    process uses it costs that process a rebuild, nothing else."""
    import shutil

    folders = []
    for entry in os.scandir(base):
        try:
            folders.append((os.stat(os.path.join(entry.path, "MANIFEST")).st_mtime, entry.path))
        except OSError:
            continue  # not a cache folder, or one being made right now
    folders.sort(reverse=True)
    for _, path in folders[KEPT_FOLDERS:]:
        if path != keep:
            shutil.rmtree(path, ignore_errors=True)


@functools.lru_cache(maxsize=None)
def _source() -> str:
    import pydantic
    import pydantic_core

    lines = [f"python {sys.version}", f"pydantic {pydantic.VERSION}", f"pydantic-core {pydantic_core.__version__}"]
    _describe_sources(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "", lines)
    return "\n".join(lines) + "\n"


def _describe_sources(folder: str, prefix: str, lines: list[str]) -> None:
    # every run reads this description: scandir, not os.walk and relpath, keeps it to a few hundred microseconds
    with os.scandir(folder) as found:
        entries = sorted(found, key=lambda entry: entry.name)
    for entry in entries:
        if entry.name.endswith(".py") and entry.is_file():
            stat = entry.stat()
            lines.append(f"{prefix}{entry.name} {stat.st_size} {stat.st_mtime_ns}")
        elif entry.is_dir() and entry.name != "__pycache__":
            _describe_sources(entry.path, f"{prefix}{entry.name}/", lines)


def _file(cls: type) -> str | None:
    name = f"{cls.__module__}:{cls.__qualname__}"
    # Only rlcfg's own sections: the folder's fingerprint covers rlcfg's source, not a test's or a plugin's.
    if not name.startswith("rlcfg.") or _SECTIONS.get(name) is not cls or name in _AMBIGUOUS:
        return None
    where = folder()
    return os.path.join(where, re.sub(r"[^\w.-]", "_", name) + SUFFIX) if where else None


# ---- writing ------------------------------------------------------------------------------------------------

SUFFIX = ".schema"
# A cache file: this line, a CRC-32 of the rest, and the rest: `marshal` data of the schema and its links.
FORMAT = b"rlcfg compiled schema 2\n"


def store(cls: type) -> None:
    """Keep the core schema pydantic just built for `cls`; nothing happens when it cannot be kept."""
    path = _file(cls)
    if path is None:
        return
    try:
        blob = dumps(cls.__pydantic_core_schema__, validation_only=True)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        partial = f"{path}.{os.getpid()}.tmp"
        with open(partial, "wb") as out:
            out.write(blob)
        os.replace(partial, path)  # a reader sees the whole file or none
    except (Uncacheable, OSError, TypeError, ValueError):
        pass


def dumps(schema: dict, *, validation_only: bool = False) -> bytes:
    """A cache file's bytes for `schema`; raises Uncacheable for what a new process could not find again."""
    data, links = encode(schema, validation_only=validation_only)
    body = marshal.dumps((data, links))
    return FORMAT + zlib.crc32(body).to_bytes(4, "big") + body


def encode(schema: dict, *, validation_only: bool = False) -> tuple[Any, list]:
    """The schema as plain data, and its links: where the schema holds an object (a section class, a validator
    function, a default factory), the data holds None and a link gives its path and its name, as a small tagged
    value (`_tagged`). Loading looks up only the links, about a hundred, and never walks the thousands of plain nodes.
    `validation_only` leaves out each schema node's `metadata` (JSON Schema hints pydantic-core never reads)."""
    ids: dict[int, str] = {}
    _collect_types(schema, ids)
    links: list = []
    return _plain(schema, _Context(ids, None, None, validation_only, links), ()), links


# Keys of a schema node whose value is the user's data (a default, a literal's values, an error's context), not
# schema nodes: a `metadata` key inside them is data too.
_DATA_KEYS = frozenset({"default", "expected", "custom_error_context", "members"})
# Exactly these types: a subclass (an enum of str or int) would come back from the file as its base type.
_SCALARS = frozenset({type(None), bool, int, float, str})


def _collect_types(value: Any, ids: dict[int, str]) -> None:
    if isinstance(value, dict):
        for item in value.values():
            _collect_types(item, ids)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _collect_types(item, ids)
    elif isinstance(value, type):
        try:
            ids[id(value)] = _name_of(value)
        except Uncacheable:
            pass


class _Context:
    """Where `_plain` and `_tagged` are in a schema: the section whose fields they are under, the field, and
    whether `metadata` keys are still left out (not inside data)."""

    __slots__ = ("ids", "model", "field", "strip", "links")

    def __init__(self, ids: dict[int, str], model: type | None, field: str | None, strip: bool,
                 links: list) -> None:
        self.ids, self.model, self.field, self.strip, self.links = ids, model, field, strip, links

    def inside(self, model: type | None = None, field: str | None = None, strip: bool | None = None) -> "_Context":
        return _Context(self.ids, model or self.model, field if field is not None else self.field,
                        self.strip if strip is None else strip, self.links)


def _stable_ref(text: str, ids: dict[int, str]) -> str:
    # pydantic's definition references carry the id() of the class they stand for, which a new process does not
    # share: the class's name stands in for it. A reference only has to match its definition inside one schema.
    return _REF_ID.sub(lambda m: ":" + ids[int(m.group(1))] if int(m.group(1)) in ids else m.group(0), text)


def _children(value: dict, context: _Context) -> Any:
    """(key, item, context of the item, whether the item maps field names to their schemas and whose fields those
    are) for each entry of a schema mapping, the `metadata` of a node left out."""
    model = value["cls"] if value.get("type") == "model" and isinstance(value.get("cls"), type) else None
    node = context.strip and isinstance(value.get("type"), str)  # a schema node, not a mapping of names
    for key, item in value.items():
        if node and key == "metadata":
            continue
        if key == "fields" and isinstance(item, dict) and value.get("type") in ("model-fields", "typed-dict"):
            yield key, item, context.inside(model), value["type"]
        else:
            yield key, item, context.inside(model, strip=context.strip and key not in _DATA_KEYS), None


def _plain(value: Any, context: _Context, path: tuple) -> Any:
    if type(value) is str:
        return _stable_ref(value, context.ids)
    if type(value) in _SCALARS:
        return value
    if type(value) is list:
        return [_plain(item, context, (*path, i)) for i, item in enumerate(value)]
    if type(value) is dict and _only_scalars(value.keys()):
        out: dict[Any, Any] = {}
        for key, item, inner, fields_of in _children(value, context):
            if key == "default_factory" and inner.model is not None and inner.field is not None \
                    and not isinstance(item, type):
                out[key] = None
                context.links.append(((*path, key), _factory(item, inner.model, inner.field)))
            elif fields_of is not None:  # a model's fields are named for its default factories
                out[key] = {name: _plain(spec, inner.inside(field=name) if fields_of == "model-fields" else inner,
                                         (*path, key, name)) for name, spec in item.items()}
            else:
                out[key] = _plain(item, inner, (*path, key))
        return out
    if type(value) in (tuple, set, frozenset) and _only_scalars(value):
        return type(value)(_stable_ref(v, context.ids) if type(v) is str else v for v in value)
    # an object, or a container that holds one: linked, by name
    context.links.append((path, _tagged(value, context)))
    return None


def _only_scalars(items: Any) -> bool:
    return all(type(item) in _SCALARS for item in items)


def _tagged(value: Any, context: _Context) -> Any:
    """A link's value: plain data in which each object is a one-key mapping, its tag and what names it."""
    if isinstance(value, enum.Enum):
        return {"$enum": [_name_of(type(value)), value.name]}
    if type(value) is str:
        return _stable_ref(value, context.ids)
    if type(value) in _SCALARS:
        return value
    if type(value) is list:
        return [_tagged(v, context) for v in value]
    if type(value) is tuple:
        return {"$tuple": [_tagged(v, context) for v in value]}
    if type(value) in (set, frozenset):
        return {"$set" if type(value) is set else "$frozenset": [_tagged(v, context) for v in value]}
    if type(value) is dict:
        return {"$dict": [[_tagged(k, context), _tagged(v, context)] for k, v in value.items()]}
    if isinstance(value, functools.partial):
        return {"$partial": [_tagged(value.func, context), _tagged(value.args, context),
                             _tagged(value.keywords, context)]}
    if isinstance(value, types.MethodType):
        owner, name = value.__self__, value.__func__.__name__
        if getattr(owner, name, None) != value:
            raise Uncacheable(repr(value))
        return {"$method": [_tagged(owner, context), name]}
    if isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)):
        return {"$name": _name_of(value)}
    raise Uncacheable(f"{type(value).__name__}: {value!r}")


def _factory(factory: Any, model: type, field: str) -> Any:
    """A field's default factory (a closure over the default, see base.param) as the field it belongs to."""
    info = getattr(model, "__pydantic_fields__", {}).get(field)
    if info is None or info.default_factory is not factory:
        raise Uncacheable(f"default factory of {model.__qualname__}.{field}")
    return {"$factory": [_name_of(model), field]}


def _name_of(obj: Any) -> str:
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        raise Uncacheable(repr(obj))
    name = f"{module}:{qualname}"
    try:
        found = _resolve(name)
    except (LookupError, AttributeError):
        raise Uncacheable(name) from None
    if found is not obj:
        raise Uncacheable(name)
    return name


# ---- reading ------------------------------------------------------------------------------------------------


def _resolve(name: str) -> Any:
    if name in _SECTIONS:
        if name in _AMBIGUOUS:
            raise LookupError(name)
        return _SECTIONS[name]
    module, _, qualname = name.partition(":")
    if not (module + ".").startswith(_TRUSTED_MODULES) or module not in sys.modules:
        raise LookupError(name)
    if module in _LOOKUPS and not hasattr(sys.modules[module], qualname.partition(".")[0]):
        made = _LOOKUPS[module](qualname)
        if _SECTIONS.get(name) is not made or name in _AMBIGUOUS:  # only a registered class of that very name
            raise LookupError(name)
        return made
    found: Any = sys.modules[module]
    for part in qualname.split("."):
        if not part.isidentifier():
            raise LookupError(name)
        found = getattr(found, part)
    return found


def loads(blob: bytes) -> Any:
    """The schema a cache file holds (`dumps`'s bytes). Raises ValueError (or another exception: a damaged file
    breaks in many ways) for a file that is not one."""
    head = len(FORMAT)
    if blob[:head] != FORMAT:
        raise ValueError("not an rlcfg schema file of this release")
    body = blob[head + 4:]
    if zlib.crc32(body) != int.from_bytes(blob[head:head + 4], "big"):
        raise ValueError("damaged schema file")
    data, links = marshal.loads(body)
    for path, tagged in links:
        value = _untagged(tagged)
        if not path:
            data = value
            continue
        *parents, last = path
        container = data
        for key in parents:
            container = container[key]
        if not isinstance(container, (dict, list)) or container[last] is not None:
            raise ValueError(f"a link to {path!r} points at no placeholder")
        container[last] = value
    return data


def _untagged(value: Any) -> Any:
    if isinstance(value, list):
        return [_untagged(v) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) != 1:
        raise ValueError("a link's mapping has one key, its tag")
    (tag, body), = value.items()
    if tag == "$tuple":
        return tuple(_untagged(body))
    if tag == "$set":
        return set(_untagged(body))
    if tag == "$frozenset":
        return frozenset(_untagged(body))
    if tag == "$dict":
        return {_untagged(key): _untagged(item) for key, item in body}
    if tag == "$name":
        return _resolve(body)
    if tag == "$enum":
        return getattr(_resolve(body[0]), body[1])
    if tag == "$partial":
        return functools.partial(_untagged(body[0]), *_untagged(body[1]), **_untagged(body[2]))
    if tag == "$method":
        return getattr(_untagged(body[0]), body[1])
    if tag == "$factory":
        return _resolve(body[0]).__pydantic_fields__[body[1]].default_factory
    raise ValueError(f"unknown tag {tag!r}")


def _model_class(schema: Any) -> Any:
    """The class a section's core schema builds: its root `model` schema's, found behind definitions and the
    section's own model validators."""
    definitions: dict = {}
    for _ in range(16):
        if not isinstance(schema, dict):
            return None
        kind = schema.get("type")
        if kind == "model":
            return schema.get("cls")
        if kind == "definitions":
            definitions.update((d.get("ref"), d) for d in schema.get("definitions", ()) if isinstance(d, dict))
            schema = schema.get("schema")
        elif kind == "definition-ref":
            schema = definitions.get(schema.get("schema_ref"))
        elif kind in ("function-before", "function-after", "function-wrap"):
            schema = schema.get("schema")
        else:
            return None
    return None


def install(cls: type) -> bool:
    """Complete `cls` from its stored schema, as pydantic would have from a freshly generated one; False when there
    is none to use (pydantic then builds it, and `store` keeps it)."""
    path = _file(cls)
    if path is None:
        return False
    try:
        from pydantic._internal._config import ConfigWrapper
        from pydantic._internal._mock_val_ser import MockValSer
        from pydantic._internal._signature import generate_pydantic_signature
        from pydantic._internal._utils import LazyClassAttribute
        from pydantic_core import SchemaSerializer, SchemaValidator

        if "validate_by_alias" not in generate_pydantic_signature.__code__.co_varnames \
                or not cls.__pydantic_fields_complete__ or cls.__pydantic_decorators__.computed_fields \
                or any(f.deprecated for f in cls.__pydantic_fields__.values()):
            return False
        with open(path, "rb") as stored:
            schema = loads(stored.read())
        if _model_class(schema) is not cls:  # a file of another section's (or of nothing's) schema
            return False
        config = ConfigWrapper(cls.model_config, check=False)
        core_config = config.core_config(title=cls.__name__)
        validator = SchemaValidator(schema, core_config)
    except Exception:  # noqa: BLE001 -- a cache that does not load is a cache miss, whatever broke it
        return False
    cls.__pydantic_computed_fields__ = {}
    defer_full_schema(cls)
    cls.__pydantic_validator__ = validator

    def serializer(**_rebuild_options: Any) -> Any:
        # a check never dumps a section: the serializer is built the first time something does (`rlcfg plan`).
        # pydantic passes its rebuild options (parent_namespace_depth, from 2.14 on), which a stored schema needs not.
        cls.__pydantic_serializer__ = SchemaSerializer(schema, core_config)
        return cls.__pydantic_serializer__

    cls.__pydantic_serializer__ = MockValSer(f"{cls.__qualname__}'s serializer is built on first use",
                                             code="class-not-fully-defined", val_or_ser="serializer",
                                             attempt_rebuild=serializer)
    cls.__signature__ = LazyClassAttribute("__signature__", lambda: generate_pydantic_signature(
        init=cls.__init__, fields=cls.model_fields, validate_by_alias=config.validate_by_alias, extra=config.extra))
    cls.__pydantic_complete__ = True
    on_complete = getattr(cls, "__pydantic_on_complete__", None)
    if on_complete is not None:
        on_complete()
    return True


def defer_full_schema(cls: type) -> None:
    """Make `cls.__pydantic_core_schema__` a placeholder that has pydantic build the full schema when something
    reads it. A stored schema lacks the metadata that JSON Schema generation needs, so an installed section gets
    one; and so does every section as it is declared, replacing pydantic's own placeholder, whose rebuild would
    install the stored schema. pydantic treats the placeholder as no schema when it builds another section around
    this one, and rebuilds through it before it generates a JSON Schema."""
    from pydantic._internal._mock_val_ser import MockCoreSchema

    cls.__pydantic_core_schema__ = MockCoreSchema(
        f"{cls.__qualname__}'s full core schema is built on demand", code="class-not-fully-defined",
        attempt_rebuild=functools.partial(_full_schema, cls))


def _full_schema(cls: type, **_: Any) -> Any:
    cls.model_rebuild(force=True, _parent_namespace_depth=0)
    return cls.__pydantic_core_schema__
