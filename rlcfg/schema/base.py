"""What every dialect is made of: sections, parameters, rules and the dialect itself.

A dialect module declares each documented parameter once, as a field of a `Section`, with `param(...)`: its
type, default, description and constraints. Validation, `--explain`, the JSON Schemas, the reference docs
and the list of renamed keys are all derived from those fields. Cross-field rules are plain functions
registered on the dialect's `RuleSet`; they read the validated config and yield findings through the
`RuleContext`, which knows where each value came from.
"""

import functools
import types
import typing
from dataclasses import field
from typing import Any, Callable, ClassVar, Iterable, Iterator, Literal, Mapping, Sequence, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict
from pydantic.fields import FieldInfo
from pydantic_core import PydanticKnownError, PydanticUndefined, core_schema

from rlcfg.diagnostics import CODES, Constraint, Severity
from rlcfg.records import record
from rlcfg.schema import compiled
from rlcfg.source.tree import MISSING, SourceTree, copy_containers, split_dotted

REQUIRED: Any = ...  # a parameter with no default: the user must give it (OmegaConf's "???")
RELEASES_KEY = "x-rlcfg-releases"  # where a field records the releases that have it


FATE_KEY = "x-rlcfg-run"  # where a field records what `rlcfg run` does with it
# Where a field records, per release, when the framework first rejects a value its type forbids, for the releases
# whose loader accepts any value: rlcfg is knowingly stricter there and says so.
LATE_CHECK_KEY = "x-rlcfg-late-check"
ENTRY_KEY = "x-rlcfg-entry"  # the entry module that adds a key no release's base config has


@record(frozen=True)
class Fate:
    """What `rlcfg run` does with a parameter (the run ledger).

    honored: the lowering reads it and the runtime acts on it, with the framework's meaning.
    refused: `rlcfg run` stops before Ray starts when it is set to anything but its default; `reason` says what
      rlcfg would run instead, for the message.
    inert: it changes nothing that is computed (a log folder, a framework-internal knob); `reason` says why.
    `unread`: an inert setting the framework itself never applies, though its name promises an effect; a user who
    sets it gets none, and `rlcfg validate` says so (RLC307).
    """

    kind: Literal["honored", "refused", "inert"]
    reason: str = ""
    unread: bool = False

    def to_json(self) -> dict:
        out: dict = {"kind": self.kind}
        if self.reason:
            out["reason"] = self.reason
        if self.unread:
            out["unread"] = True
        return out


HONORED = Fate("honored")


def refused(instead: str) -> Fate:
    return Fate("refused", instead)


def inert(why: str) -> Fate:
    return Fate("inert", why)


def unread(why: str) -> Fate:
    """Inert because the framework never applies the setting; `why` starts with the framework's name."""
    return Fate("inert", why, unread=True)


def field_fate(info: FieldInfo, owner: type["Section"] | None = None) -> Fate | None:
    """The field's own fate, else the one its section declares for all its fields (`Section.run_fate`)."""
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    found = extra.get(FATE_KEY)
    if found is not None:
        return Fate(found["kind"], found.get("reason", ""), found.get("unread", False))
    return getattr(owner, "run_fate", None) if owner is not None else None


def declare_fates(model: type["Section"], /, default: Fate | None = None, **by_name: Fate) -> None:
    """Record the run fate of some of `model`'s fields after the class is built (as `param(fate=...)` would), and
    `default` as the section's `run_fate` for the others. For inherited fields whose fate differs in a subclass:
    each class holds its own copy of a field. A misspelt name fails at import. (`model` is positional-only, because
    sections have fields called `model`.)"""
    for name, fate in by_name.items():
        info = model.field_named(name)
        if info is None:
            raise KeyError(f"{model.__qualname__} has no field {name!r}")
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        info.json_schema_extra = {**extra, FATE_KEY: fate.to_json()}
    if default is not None:
        model.run_fate = default


def declare_releases(model: type["Section"], releases: tuple[str, ...], /, *names: str) -> None:
    """Record that only `releases` have these fields of `model`, after the class is built (as `param(releases=...)`
    would): for a dialect whose later release added fields to classes many sections share. A misspelt name fails
    at import."""
    for name in names:
        info = model.field_named(name)
        if info is None:
            raise KeyError(f"{model.__qualname__} has no field {name!r}")
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        info.json_schema_extra = {**extra, RELEASES_KEY: list(releases)}


def declare_release_table(namespace: Mapping[str, Any], table: Mapping[str, Sequence[str]]) -> None:
    """declare_releases for each `Class.field` of `table` whose class `namespace` (a models module's globals)
    declares: a dialect whose releases' fields are read from its inventories (tools/inventory/<name>.py --tables).
    A subclass holds a copy of each inherited field, so every section of the namespace that inherits the field (and
    does not declare one of that name itself) gets the releases too."""
    sections = [value for value in namespace.values() if isinstance(value, type) and issubclass(value, Section)]
    by_name = {cls.__name__: cls for cls in sections}
    by_field: dict[str, dict[type, Sequence[str]]] = {}
    for name, releases in table.items():
        declaring, field_name = name.split(".")
        if declaring in by_name:  # else declared in another module of the dialect, which applies it
            by_field.setdefault(field_name, {})[by_name[declaring]] = releases
    for cls in sections:
        nearest: dict[str, type] = {}  # each field's nearest declaring class, as the MRO finds it
        for owner in reversed(cls.__mro__):
            for field_name in owner.__dict__.get("__annotations__", {}):
                nearest[field_name] = owner
        for field_name, declaring in nearest.items():
            releases = by_field.get(field_name, {}).get(declaring)
            if releases is not None:
                declare_releases(cls, tuple(releases), field_name)


def field_releases(info: FieldInfo) -> tuple[str, ...] | None:
    """The releases that have this field, or None when every release has it."""
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    found = extra.get(RELEASES_KEY)
    return tuple(found) if found is not None else None


def key_paths(data: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every key path a document writes, mappings and leaves (list items are not followed: their fields are judged
    like the list's)."""
    if isinstance(data, dict):
        for key, value in data.items():
            path = (*prefix, key)
            yield path
            yield from key_paths(value, path)


def release_lacking_fewest(releases: Sequence[str], having: Mapping[str, Sequence[str]]) -> tuple[str, str | None]:
    """How a document tells releases apart: among `releases` (oldest first), the one that lacks the fewest of the
    written keys only some releases have (`having`: each such key → the releases that have it), the newest of those;
    and the first of those keys that the next newer release lacks and the chosen one has (None: it is the newest)."""
    lacking = {release: [key for key, have in having.items() if release not in have] for release in releases}
    fewest = min(len(keys) for keys in lacking.values())
    chosen = [release for release in releases if len(lacking[release]) == fewest][-1]
    newer = releases[releases.index(chosen) + 1:]
    if not newer:
        return chosen, None
    return chosen, next((key for key in lacking[newer[0]] if key not in lacking[chosen]), None)


class Section(BaseModel):
    """A mapping of a config. Unknown keys are errors; values are never coerced from another type
    (a YAML string "8" is not the integer 8), except that an integer is accepted where a float is expected.

    The modules that declare sections, this one included, do not postpone their annotations (no `from __future__
    import annotations`): pydantic would then compile and evaluate each field's annotation string as it builds the
    class, an eighth of the time a dialect's import takes, and this class's own for every section declared.

    `run_fate`, when a section sets it, is the run-ledger fate of each of its fields that declares none."""

    run_fate: ClassVar[Fate | None] = None

    model_config = ConfigDict(strict=True, extra="forbid", protected_namespaces=(), populate_by_name=False,
                              validate_default=False, arbitrary_types_allowed=False, defer_build=True)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        compiled.register(cls)
        if not cls.__pydantic_complete__:
            compiled.defer_full_schema(cls)

    # How rlcfg's own introspection reads a section's fields. A section that builds some fields only when asked
    # (rlcfg.dialects.rlinf.inventoried.Inventoried) answers these without building them; `model_fields` has them all.

    @classmethod
    def hand_written_fields(cls) -> dict[str, FieldInfo]:
        """The fields declared in Python, without fields generated from an inventory."""
        return cls.model_fields

    @classmethod
    def field_named(cls, name: str) -> FieldInfo | None:
        return cls.model_fields.get(name)

    @classmethod
    def keyed_field(cls, key: str) -> tuple[str, FieldInfo] | None:
        """The (attribute name, field) of a config key; the first field of a key wins."""
        return _fields_by_key(cls).get(key)

    @classmethod
    def default_entries(cls) -> Iterator[tuple[str, FieldInfo | None]]:
        """(key, field) in field order; None for a field whose default is null and whose field is not built."""
        for name, info in cls.model_fields.items():
            yield key_of(name, info), info

    @classmethod
    def model_rebuild(cls, *, force: bool = False, raise_errors: bool = True, _parent_namespace_depth: int = 2,
                      _types_namespace: Any = None) -> bool | None:
        # A section is built on its first validation (defer_build): from the compiled schema of an earlier run
        # when there is one (rlcfg.schema.compiled), else by pydantic, whose schema is then kept for the next run.
        if not force and not cls.__pydantic_complete__ and compiled.install(cls):
            return True
        for prepare in BEFORE_SCHEMA:
            prepare()
        built = super().model_rebuild(force=force, raise_errors=raise_errors,
                                      _parent_namespace_depth=_parent_namespace_depth + 1,
                                      _types_namespace=_types_namespace)
        if built:
            compiled.store(cls)
        return built


# Called before pydantic generates a section's schema from its annotations (a cache miss, or the full schema for
# JSON Schema): rlcfg.dialects.rlinf.inventoried completes its sections' fields there.
BEFORE_SCHEMA: list[Callable[[], None]] = []


class Deferred:
    """The annotation of a section that pydantic builds only once a document has it.

    RLinf's inventory holds some two hundred sections (simulator settings, every Megatron knob), of which a config
    uses a handful; building them all took longer than the rest of a check. A field annotated with a Deferred
    subclass checks its value with the Section `build()` returns, built on the first value it meets, and errors
    inside keep their locations. Everything that reads the section tree (section_types, the docs, the JSON Schema,
    --explain) sees that Section."""

    build: ClassVar[Callable[[], type[Section]]]
    section_name: ClassVar[str]  # module.qualname of the section build() returns

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        compiled.register(cls)

    @classmethod
    def model(cls) -> type[Section]:
        return cls.build()

    @classmethod
    def validate_value(cls, value: Any) -> Any:
        if not isinstance(value, (dict, Section)):
            # what the section would say (a default null, a scalar where RLinf sometimes writes one), unbuilt
            raise PydanticKnownError("model_type", {"class_name": cls.section_name.rpartition(".")[2]})
        return cls.model().model_validate(value)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        # The reference names the section as pydantic names a built one (module.class), so that the JSON Schema
        # holds it as a definition of that name, as it holds every other section.
        return core_schema.no_info_plain_validator_function(cls.validate_value, ref=f"{cls.section_name}:deferred")

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: Any) -> Any:
        return handler(cls.model().__pydantic_core_schema__)


def param(default: Any = REQUIRED, *, description: str, ge: float | None = None, gt: float | None = None,
          le: float | None = None, lt: float | None = None, alias: str | None = None,
          renamed_to: str | None = None, examples: list | None = None, min_length: int | None = None,
          releases: Iterable[str] | None = None, fate: Fate | None = None,
          late_check: Mapping[str, str] | None = None, entry: str | None = None) -> Any:
    """Declare one parameter.

    default: the documented default as a user would write it; an interpolation such as
      "${models.policy_trainer.load}" is kept and resolved like any other (its type is checked after
      resolution). REQUIRED means the user must give a value.
    description: what the parameter does, in full sentences. Where the framework's docs and code disagree,
      say which one rlcfg follows.
    renamed_to: the dotted path later versions of the framework use for this key; setting this one then gives
      a warning naming the new key, and setting both to different values is an error.
    releases: the releases of the dialect (names from `Dialect.releases`) whose loader knows this key; None means
      every release. A user who sets the key in a file judged by another release is told so (RLC113).
    fate: what `rlcfg run` does with it (HONORED, refused("..."), inert("...")); see `Fate`.
    late_check: release → when that release's framework first fails on a value the type forbids ("when the
      trainer builds ..."), for releases whose loader accepts any value; the type error then says so.
    entry: the entry module that adds this key to the config (with `releases=()`: no base config has it), named
      in the message to a user who sets it without that entry module; the dialect's entry_keys marks it modelled.
    """
    extra: dict[str, Any] = {}
    if late_check:
        extra[LATE_CHECK_KEY] = dict(late_check)
    if renamed_to:
        extra["x-rlcfg-renamed-to"] = renamed_to
    if entry:
        extra[ENTRY_KEY] = entry
    if releases is not None:
        extra[RELEASES_KEY] = list(releases)
    if fate is not None:
        extra[FATE_KEY] = fate.to_json()
    factory = None
    if isinstance(default, (dict, list)):
        frozen = default
        default, factory = PydanticUndefined, lambda: copy_containers(frozen)
    return _field(default, factory, alias=alias, description=description, examples=examples, extra=extra, gt=gt,
                  ge=ge, lt=lt, le=le, min_length=min_length)


def section(model: type[Section], *, description: str, alias: str | None = None, optional: bool = False,
            releases: Iterable[str] | None = None, fate: Fate | None = None, entry: str | None = None) -> Any:
    """A nested section; `optional` sections default to null (absent) instead of their defaults.
    `releases`, `fate` and `entry` as for `param` (the fate of the section key itself; its fields declare their
    own)."""
    extra: dict[str, Any] = {}
    if entry:
        extra[ENTRY_KEY] = entry
    if releases is not None:
        extra[RELEASES_KEY] = list(releases)
    if fate is not None:
        extra[FATE_KEY] = fate.to_json()
    if optional:
        return _field(None, None, alias=alias or None, description=description, extra=extra)
    return _field(PydanticUndefined, _defaults_of(model), alias=alias or None, description=description, extra=extra)


def _defaults_of(model: type[Section]) -> Callable[[], Section]:
    """What makes an absent section: its defaults. pydantic would validate an empty mapping for it, which takes the
    section's validator, built (or loaded) just for that. Without validators of its own, the section is the same
    built field by field (model_construct: defaults are not validated either way), and a check whose document never
    has the section never builds its validator."""
    if model.__pydantic_decorators__.model_validators or model.model_post_init is not BaseModel.model_post_init:
        return model
    return model.model_construct


def _field(default: Any, factory: Callable[[], Any] | None, *, alias: str | None = None, description: str | None,
           examples: list | None = None, extra: dict[str, Any], gt: float | None = None, ge: float | None = None,
           lt: float | None = None, le: float | None = None, min_length: int | None = None) -> FieldInfo:
    """What pydantic's Field() returns for these arguments, without its checks of arguments rlcfg never passes.
    A dialect declares hundreds of fields on every check, and Field() took three times as long as the FieldInfo it
    makes. The keywords go in Field()'s order, which the FieldInfo records; tests/schema/test_base.py holds the
    two equal."""
    kwargs: dict[str, Any] = {}
    if factory is not None:
        kwargs["default_factory"] = factory
    if alias is not None:  # Field() makes the alias the validation and the serialization alias too
        kwargs.update(alias=alias, validation_alias=alias, serialization_alias=alias)
    if description is not None:
        kwargs["description"] = description
    if examples is not None:
        kwargs["examples"] = examples
    if extra:
        kwargs["json_schema_extra"] = extra
    for name, bound in (("gt", gt), ("ge", ge), ("lt", lt), ("le", le)):
        if bound is not None:
            kwargs[name] = bound
    if min_length is not None:
        kwargs["min_length"] = min_length
    return FieldInfo.from_field(default, **kwargs)


# ---- introspection of sections ------------------------------------------------------------------------------


def key_of(name: str, info: FieldInfo) -> str:
    return info.alias or name


def by_annotation(question: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`question` asked once per annotation: a check's walks ask it for every field they pass, thousands of times
    with the same few hundred annotations. An unhashable annotation (Annotated with unhashable metadata) is asked
    every time."""
    answers: dict[Any, Any] = {}

    @functools.wraps(question)
    def ask(annotation: Any) -> Any:
        try:
            return answers[annotation]
        except KeyError:
            found = answers[annotation] = question(annotation)
            return found
        except TypeError:
            return question(annotation)

    return ask


@by_annotation
def section_types(annotation: Any) -> tuple[type[Section], ...]:
    """The Section classes an annotation can hold directly (X, X | None, Union of sections)."""
    if isinstance(annotation, type) and issubclass(annotation, Section):
        return (annotation,)
    if isinstance(annotation, type) and issubclass(annotation, Deferred):
        return (annotation.model(),)
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        return tuple(section for arg in get_args(annotation) for section in section_types(arg))
    if origin is typing.Annotated:
        return section_types(get_args(annotation)[0])
    return ()


def container_section(annotation: Any) -> type[Section] | None:
    """For list[X] or dict[str, X] of a Section X, that X."""
    for arg in (get_args(annotation) if get_origin(annotation) in (list, dict) else ()):
        found = section_types(arg)
        if found:
            return found[0]
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        for arg in get_args(annotation):
            found = container_section(arg)
            if found:
                return found
    return None


def choices_of(annotation: Any) -> list | None:
    """The allowed values of a Literal (possibly inside Optional)."""
    origin = get_origin(annotation)
    if origin is Literal:
        return list(get_args(annotation))
    if origin in (Union, types.UnionType):
        out: list = []
        for arg in get_args(annotation):
            inner = choices_of(arg)
            if inner is None and arg is not type(None):
                return None
            out.extend(inner or [])
        return out or None
    return None


def iter_fields(model: type[Section], prefix: tuple = (), *,
                deferred: bool = True) -> Iterator[tuple[tuple, FieldInfo, type[Section]]]:
    """Every parameter of a section tree, depth first: (path, field, owning section). `deferred=False` leaves out
    what lies inside Deferred sections (RLinf's inventoried ones, where no key is renamed), which are then not
    built."""
    if not prefix:
        # A check walks its dialect's whole tree more than once (renamed keys, --explain), thousands of fields for
        # ROLL and RLinf: the walk of a class is made once per process.
        yield from _whole_tree(model, deferred)
        return
    yield from _walk_fields(model, prefix, deferred)


_WHOLE_TREES: dict[tuple[type, bool], tuple] = {}


def _whole_tree(model: type[Section], deferred: bool) -> tuple:
    if (model, deferred) not in _WHOLE_TREES:
        _WHOLE_TREES[model, deferred] = tuple(_walk_fields(model, (), deferred))
    return _WHOLE_TREES[model, deferred]


def _walk_fields(model: type[Section], prefix: tuple,
                 deferred: bool) -> Iterator[tuple[tuple, FieldInfo, type[Section]]]:
    for name, info in model.model_fields.items():
        path = prefix + (key_of(name, info),)
        yield path, info, model
        if not deferred and is_deferred(info.annotation):
            continue
        for sub in section_types(info.annotation):
            yield from _walk_fields(sub, path, deferred)
            break


@by_annotation
def is_deferred(annotation: Any) -> bool:
    """Whether an annotation is a Deferred section (or one that may be null)."""
    if isinstance(annotation, type):
        return issubclass(annotation, Deferred)
    return get_origin(annotation) in (Union, types.UnionType) and any(is_deferred(a) for a in get_args(annotation))


def declared_field(root: type[Section], path: tuple) -> tuple[FieldInfo, type[Section]] | None:
    """The field at `path` and its owner, where iter_fields(root) would yield it: through sections only, not into
    lists or mappings of them. Builds only the Deferred sections on the path."""
    model = root
    for depth, part in enumerate(path):
        found = model.keyed_field(part) if isinstance(part, str) else None
        if found is None:
            return None
        info = found[1]
        if depth == len(path) - 1:
            return info, model
        subs = section_types(info.annotation)
        if not subs:
            return None
        model = subs[0]
    return None


_KEYED: dict[type, dict[str, tuple[str, FieldInfo]]] = {}


def _fields_by_key(model: type[Section]) -> dict[str, tuple[str, FieldInfo]]:
    """A section's hand-written fields (all of them but RLinf's inventoried ones) by their config key, looked up for
    every key a config sets."""
    if model not in _KEYED:
        keyed: dict[str, tuple[str, FieldInfo]] = {}
        for name, info in model.hand_written_fields().items():
            keyed.setdefault(key_of(name, info), (name, info))  # the first field of a key wins, as before
        _KEYED[model] = keyed
    return _KEYED[model]


def field_at(root: type[Section], path: tuple) -> tuple[FieldInfo | None, type[Section] | None]:
    """The field a path names, and the section that owns it (list indices and mapping keys are skipped)."""
    return fields_along(root, path)[-1] if path else (None, None)


def fields_along(root: type[Section], path: tuple) -> list[tuple[FieldInfo | None, type[Section] | None]]:
    """field_at(root, path[:depth]) for each depth from 1 to len(path), in one walk."""
    out: list[tuple[FieldInfo | None, type[Section] | None]] = []
    model: type[Section] | None = root
    info: FieldInfo | None = None
    pending_container = False
    for depth, part in enumerate(path):
        if model is None:
            return out + [(None, None)] * (len(path) - depth)
        if isinstance(part, int) or pending_container:
            pending_container = False
            out.append((info, None))
            continue
        found = model.keyed_field(part)
        if found is None:
            return out + [(None, model)] * (len(path) - depth)
        owner = model
        info = found[1]
        subs = section_types(info.annotation)
        inner = container_section(info.annotation)
        if subs:
            model = subs[0]
        elif inner is not None:
            model = inner
            pending_container = get_origin(info.annotation) is dict or any(
                get_origin(a) is dict for a in get_args(info.annotation))
        else:
            model = None
        out.append((info, owner))
    return out


def section_at(root: type[Section], path: tuple) -> type[Section] | None:
    if not path:
        return root
    info, _ = field_at(root, path)
    if info is None:
        return None
    subs = section_types(info.annotation)
    return subs[0] if subs else container_section(info.annotation)


def defaults_tree(model: type[Section]) -> dict:
    """The documented defaults of a section tree as a plain tree; REQUIRED values are MISSING ("???")."""
    out: dict = {}
    for key, info in model.default_entries():
        if info is None:
            out[key] = None
            continue
        if info.is_required():
            out[key] = MISSING
            continue
        if is_deferred(info.annotation):  # absent unless the document has it: not built for its default
            out[key] = copy_containers(info.default)
            continue
        subs = section_types(info.annotation)
        if len(subs) > 1:
            continue  # a union of sections: which one applies depends on the document, so pydantic fills it
        elif subs and info.default_factory is not None:
            out[key] = defaults_tree(subs[0])
        elif info.default_factory is not None:
            value = info.default_factory()
            out[key] = defaults_tree(type(value)) if isinstance(value, Section) else copy_containers(value)
        elif subs and isinstance(info.default, Section):
            out[key] = defaults_tree(type(info.default))
        elif isinstance(info.default, BaseModel):
            out[key] = info.default.model_dump(by_alias=True)
        else:
            out[key] = copy_containers(info.default)
    return out


# ---- rules --------------------------------------------------------------------------------------------------


class UndeclaredCode(Exception):
    """A rule reported a code it does not declare: a bug in rlcfg, never the user's mistake."""


@record
class Finding:
    code: str
    severity: Severity
    path: str
    message: str
    hint: str | None = None
    related: tuple[str, ...] = ()
    constraint: Constraint | None = None


@record(frozen=True)
class Rule:
    id: str
    code: str
    summary: str
    keys: tuple[str, ...]
    check: Callable[[Any, "RuleContext"], Iterable[Finding]]
    # A rule of the composed document itself (a plain dict), not of the typed config: it runs for every pipeline,
    # the ones rlcfg does not model included, because the framework checks those keys whatever the pipeline.
    on_document: bool = False
    # The other codes its findings may carry (a batch rule that also warns of a silent rewrite, RLC304): declared so
    # that the generated pages list every rule under each code it gives, and enforced by RuleContext.
    also: tuple[str, ...] = ()

    @property
    def codes(self) -> tuple[str, ...]:
        return (self.code, *self.also)


class RuleSet:
    def __init__(self) -> None:
        self.rules: list[Rule] = []

    def rule(self, id: str, code: str, summary: str, keys: Iterable[str] = (), on_document: bool = False,
             also: Iterable[str] = ()) -> Callable:
        """Register a rule. `code` is the code of what it checks, `also` every other code its findings may carry;
        `summary` is one sentence for the reference docs; `keys` are the dotted keys it reads; `on_document`: the
        check reads the composed document (a dict) and runs for every pipeline (Rule)."""
        also = tuple(also)
        for declared in (code, *also):
            if declared not in CODES:
                raise KeyError(f"rule {id}: code {declared} is not registered in rlcfg.diagnostics.CODES")
        if code in also or len(set(also)) != len(also):
            raise ValueError(f"rule {id}: a code is declared twice")
        if any(r.id == id for r in self.rules):
            raise ValueError(f"rule id {id} is registered twice")

        def register(function: Callable) -> Callable:
            self.rules.append(Rule(id, code, summary, tuple(keys), function, on_document, also))
            return function

        return register

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)


@record
class HostFacts:
    """Facts about the machine rlcfg runs on, handed to rules explicitly (schemas never read them)."""

    env: Mapping[str, str] = field(default_factory=dict)
    path_exists: Callable[[str], bool] = lambda path: True


class RuleContext:
    def __init__(self, tree: SourceTree, strict: bool, host: HostFacts, release: str | None = None,
                 entry_runs: str | None = None):
        self.tree = tree
        self.strict = strict
        self.host = host
        self.release = release  # the dialect release the document is judged by
        self.entry_runs = entry_runs  # the loop the launch's entry module runs instead (CheckResult.entry_runs)
        self.rule: Rule | None = None  # the rule being run, whose declared codes bound what it may report

    def is_set(self, path: str) -> bool:
        """Whether the user wrote this key (in the file or an override), as opposed to taking its default."""
        return self.tree.written(split_dotted(path))

    def _finding(self, code: str, severity: Severity | None, path: str, message: str, hint: str | None,
                 related: Iterable[str], constraint: Constraint | None = None) -> Finding:
        if code not in CODES:
            raise KeyError(f"diagnostic code {code} is not registered")
        if self.rule is not None and code not in self.rule.codes:
            raise UndeclaredCode(f"rule {self.rule.id} reports {code}, which it does not declare "
                                 f"(it declares {', '.join(self.rule.codes)})")
        return Finding(code, severity or CODES[code].severity, path, message, hint, tuple(related), constraint)

    def error(self, code: str, path: str, message: str, hint: str | None = None, related: Iterable[str] = (),
              constraint: Constraint | None = None) -> Finding:
        """`constraint`: the arithmetic the error states (batch and parallel-size rules), which lets `--fix`
        compute the values of each key that satisfy it."""
        return self._finding(code, Severity.ERROR, path, message, hint, related, constraint)

    def warning(self, code: str, path: str, message: str, hint: str | None = None, related: Iterable[str] = ()) -> Finding:
        return self._finding(code, Severity.WARNING, path, message, hint, related)

    def note(self, code: str, path: str, message: str, hint: str | None = None,
             related: Iterable[str] = ()) -> Finding:
        return self._finding(code, Severity.NOTE, path, message, hint, related)

    def machine(self, path: str, message: str, hint: str | None = None, related: Iterable[str] = ()) -> Finding:
        """A rule that depends on the machine the job runs on: a warning, or an error under --strict."""
        return self._finding("RLC308", Severity.ERROR if self.strict else Severity.WARNING, path, message, hint, related)


# ---- dialects -----------------------------------------------------------------------------------------------


class Dialect:
    """One framework's config language. Subclasses set the class attributes and `root`."""

    name: ClassVar[str]
    title: ClassVar[str]
    documents: ClassVar[str]  # which framework version the seed documents, for the docs
    override_grammar: ClassVar[str] = "hydra"  # or "dotlist"
    variant_key: ClassVar[str | None] = None  # the dotted key that chooses the variant, when there are several
    # Whether command-line overrides see the documented defaults as existing keys. True where the framework's
    # loader composes the user's overrides onto a base config that holds every key (SkyRL's ppo_base_config, so
    # `key=value` works on any documented key and `+key=value` is refused for them); False where Hydra composes only
    # the user's own files (adding a key the file lacks then takes `+key=value`).
    overrides_see_defaults: ClassVar[bool] = False
    # Whether every field of the dialect declares its run-ledger fate; `rlcfg run` refuses the refused ones either
    # way, and a test holds a dialect that says True to having no field without one.
    ledger_complete: ClassVar[bool] = False
    resolvers: ClassVar[Mapping[str, Callable]] = {}
    rules: ClassVar[RuleSet]
    # The framework releases the dialect claims, oldest first, named as users say them ("0.3", "1.0"; "main" for the
    # newest commit of the default branch). A document is judged by exactly one of them (`infer_release`, or
    # `--framework-version`); an empty tuple means the dialect does not tell releases apart.
    releases: ClassVar[tuple[str, ...]] = ()
    # Other names of a claimed release that `--framework-version` takes: a package index's version of a tag whose
    # code it is (RLinf's PyPI 0.3.0 is tag v0.3).
    release_aliases: ClassVar[dict[str, str]] = {}
    # How the framework's loader treats a key it does not know: "error" (OmegaConf struct mode, dataclasses: it stops),
    # "drop" (dacite, or code that reads only the keys it asks for: the key is silently unused) or "open" (the mapping
    # takes any key and passes it on). See `unknown_key_policy`.
    unknown_keys: ClassVar[str] = "error"
    # The keys whose value is part of the algorithm rather than of how it is executed: fnmatch patterns over dotted
    # keys, each with what it sets as a fix's warning says it ("the group size", "the prompts per step", the learning
    # rate, the loss, advantage and KL settings). `rlcfg validate --fix` changes them only with --unsafe-fixes.
    algorithm_keys: ClassVar[Mapping[str, str]] = {}
    # Whether the framework's loader keeps config values as written, checking no type (SkyRL: its YAML nodes are
    # untyped, and its dataclasses are built without conversion). Its code then tests a flag's truth: `use_kl_loss: 1`
    # runs as true and `null` as false, which `rlcfg validate` says and honours, while the string "false" runs as
    # true, an error. A value of another type fails only where the code computes with it, which the error says.
    untyped_values: ClassVar[bool] = False
    # Whether the loader converts a quoted number or boolean to the field's type, as OmegaConf's structured configs
    # do ("4" for an int is 4, "true" for a bool is true; "four" stops it): such a value is a warning and is checked
    # as converted.
    converts_strings: ClassVar[bool] = False
    def checks_copied_keys(self, release: str | None) -> bool:
        """Whether the loader checks the keys a `${...}` interpolation copies into a section against that section's
        own. OmegaConf's struct mode checks the keys a merge sets, not what an interpolation resolves to: a loader
        built on it alone (skyrl-train) takes `ref.megatron_config: ${trainer.policy.megatron_config}` with the
        policy's keys as they are, even those the reference's section lacks."""
        return True

    def override_prefix(self, tree: Any, path: tuple) -> str:
        """What an override that sets `path` starts with: `++` where Hydra composes only the user's files and the
        composed config lacks the key (a key left at its default), else nothing."""
        if self.override_grammar != "hydra" or self.overrides_see_defaults or tree.written(path):
            return ""
        return "++"

    def algorithm_quantity(self, key: str) -> str | None:
        """What `key` sets of the algorithm (see `algorithm_keys`), or None for a key of its execution."""
        from fnmatch import fnmatchcase

        return next((what for pattern, what in self.algorithm_keys.items() if fnmatchcase(key, pattern)), None)

    def variants(self) -> dict[str, type[Section]]:
        """Every root model, by variant name (one entry when the dialect has no variants)."""
        raise NotImplementedError

    def variant_of(self, root: type[Section]) -> str | None:
        """The name of the variant whose root model `root` is."""
        return next((name for name, model in self.variants().items() if model is root), None)

    def root(self, data: dict) -> type[Section]:
        """The root model for this document (ChatLearn, for one, picks it by `runtime_args.train_backend`)."""
        variants = self.variants()
        return next(iter(variants.values()))

    def defaults(self, root: type[Section], release: str | None = None) -> dict:
        """The documented defaults as a plain tree; a dialect whose defaults differ between releases reads
        `release` (the one the document is judged by)."""
        return defaults_tree(root)

    def compose(self, tree: SourceTree, base_dir: str,
                env: Mapping[str, str] | None = None) -> tuple[SourceTree, list]:
        """Combine a multi-file config (Hydra defaults lists, looked up beside the file and on `hydra.searchpath`)
        into one tree. `env`: the environment the entrypoint runs in (a launch script's exports on top), which the
        search path's `${oc.env:...}` entries read."""
        if not isinstance(tree.data, dict) or "defaults" not in tree.data:
            return tree, []  # a single file: the composer is not even imported
        from rlcfg.source.compose import compose, searchpath_of

        folders, unusable = searchpath_of(tree, env)
        return compose(tree, base_dir, folders, unusable)

    def typed_overrides(self, overrides: list, root: type[Section], release: str | None) -> tuple[list, list]:
        """The command-line overrides with their values as `release`'s launcher reads them (given the document's
        root), and diagnostics for values it cannot read. By default the override grammar's reading stands."""
        return overrides, []

    def grammar(self, releases: Sequence[str]) -> str:
        """The override grammar of the loader of `releases` (the pinned release, or those a launch script's
        entrypoint allows; empty when nothing narrows them)."""
        return self.override_grammar

    def spelled(self, diagnostics: list, release: str | None, overrides: Sequence[str]) -> list:
        """The diagnostics in the layout the user wrote for `release` (a dialect whose schema keeps one layout for
        releases that moved keys spells them back here); `overrides` as the user gave them."""
        return diagnostics

    def entry_keys(self, source: str | None, entry: str, read: Callable[[str, int], str | None], module: str) -> Any:
        """The keys a launch script's entry module `module` (its file `entry`; its Python source, read, never run,
        or None where the file is not on this machine) adds to the config, and the loop it runs, as an extension
        (rlcfg.source.project.Extension), or None. `read(module, level)` gives the source of a module it imports
        from, or None."""
        return None

    def entry_script(self, source: str | None, script: str) -> Any:
        """What the Python script a launch runs by its path (`launcher examples/x.py --config ...`; its source, read,
        never run, or None where it cannot be read here) runs, where the framework keeps the reward, dataset loader
        or workflow in it: an extension (rlcfg.source.project.Extension) whose `runs` or `refused` says so, or
        None."""
        return None

    def prepare(self, tree: Any, release: str | None) -> list:
        """Fill in, in place, what `release`'s loader implies beyond its defaults tree (a default that depends on
        where a mapping is, such as ROLL's default strategy of a worker's strategy_args) before validation;
        diagnostics for what that finds."""
        return []

    def schema_path(self, path: tuple, release: str | None) -> tuple:
        """A key as `release` spells it → the schema's path of it (a dialect whose schema keeps one layout for
        releases that moved keys translates here)."""
        return path

    def release_keys(self, release: str | None) -> Any:
        """The keys `release` has that the schema does not model, as a project file's extension
        (rlcfg.source.project.Extension) of the release's own, or None."""
        return None

    def unknown_key_policy(self, path: tuple, release: str | None = None) -> str:
        """How the loader of `release` treats the unknown key at `path` ("error", "drop" or "open"); by default the
        same for every mapping of the document."""
        return self.unknown_keys

    def infer_release(self, data: dict) -> tuple[str | None, str]:
        """The release a document is written for, judged from its keys (the user's composed tree, before
        defaults), and why. By default the newest claimed release."""
        if not self.releases:
            return None, ""
        if len(self.releases) == 1:
            return self.releases[0], "the one release rlcfg checks against"
        return self.releases[-1], "no key tells the releases apart; assuming the newest"

    def release_label(self, release: str) -> str:
        """How the summary line names a release, e.g. "AReaL 1.0"."""
        return f"{self.title} {release}"

    def pipeline(self, data: dict) -> str | None:
        """None when the document is a pipeline this dialect models; otherwise the pipeline's name, for the
        single warning that says only the YAML, the interpolations and the known keys were checked."""
        return None

    def unrun_pipeline(self, config: Any) -> tuple[str, str] | None:
        """For a valid config of a pipeline this dialect models but `rlcfg run` does not run (RLinf embodied, ROLL
        agentic): the pipeline's name and why, e.g. ("RLinf embodied pipeline", "rlcfg's runtime has no simulator
        environments"); None when `rlcfg run` runs it. `validate` then says it once (RLC116) instead of listing the
        settings a run of another pipeline would refuse, and `plan`, `convert` and `run` agree."""
        return None

    def entry_config(self, source: str) -> str | None:
        """The config class a launch script's entry script (its Python source, read, never run) loads, where the
        framework picks it in the script (AReaL's `load_expr_config(args, PPOConfig)`); None where it does not."""
        return None

    def entry_findings(self, entry: str, config: Any, release: str | None, origin: Any) -> list:
        """What the entry script's config class requires beyond the document's own checks (`entry` as
        entry_config gave it): diagnostics located at `origin`, the call in the script."""
        return []

    def describe(self, config: Any) -> str:
        """A short phrase for a valid config's summary line, e.g. "FSDP training, vLLM rollout"."""
        return ""
