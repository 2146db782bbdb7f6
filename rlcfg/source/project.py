"""The project file: keys a fork adds to its framework's config, declared with their types.

A fork of a framework often adds keys to the framework's base config. rlcfg, which knows the framework's keys,
would report each of them as unknown. A project file, `rlcfg.project.yaml` in the config's folder or any folder
above it (the nearest one counts: rlcfg.source.find_project), declares them:

    extend:
      roll:                                  # the dialect whose configs the fork extends
        actor_train.model_args.my_patch: bool
        reward_mode: {type: str, choices: [soft, hard], run: inert,
                      description: "how our reward worker rounds"}

A declared key is accepted at its place and its value checked against its type (`bool`, `int`, `float`, `str`,
`list`, `mapping` or `any`) and choices. rlcfg cannot know what the fork computes with it, so `rlcfg run` refuses
a config that sets it (RLC118) unless the declaration says `run: inert`: the fork's author states that the key
changes nothing a run of the framework computes. A key rlcfg already knows cannot be declared again.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

from rlcfg.diagnostics import Diagnostic, Origin, diagnostic
from rlcfg.records import record
from rlcfg.source.tree import SourceTree, delete_path, dotted, split_dotted
from rlcfg.source.yaml_loader import UsageError, load_yaml, read_text

KINDS: dict[str, tuple[type, ...]] = {"bool": (bool,), "int": (int,), "float": (int, float), "str": (str,),
                                      "list": (list,), "mapping": (dict,), "any": (object,)}


@record(frozen=True)
class DeclaredKey:
    path: tuple
    kind: str
    choices: tuple | None
    # the author (or, for a release's key, the dialect) says a run computes the same with it; otherwise `rlcfg run`
    # refuses it when set (a release's key: set to anything but its default)
    inert: bool
    origin: Origin | None  # where the project file declares it
    # A release's own key (Dialect.release_keys): set to its default, it changes nothing `rlcfg run` computes.
    default: Any = None
    has_default: bool = False
    # An entry module's key whose meaning rlcfg models (Dialect.entry_keys marks it): it stays in the document, at
    # the module's default when unwritten, for the schema (which declares it for that entry module) and the lowering.
    modelled: bool = False


@record(frozen=True)
class Extension:
    file: str  # the project file; the entry script that adds the keys; or the release ("skyrl 0.4.0")
    keys: tuple[DeclaredKey, ...]
    # whose keys: a fork's (a project file), a framework release's that rlcfg does not model, or those the launch
    # script's own entry module adds (its config subclass)
    source: Literal["fork", "release", "entry"] = "fork"
    # An entry module's: the loop it runs in place of the framework's usual one (CheckResult.entry_runs), or None
    runs: str | None = None
    # An entry module's that `rlcfg run` refuses as a whole: why, and the hint (validate says it at the call, RLC118)
    refused: tuple[str, str] | None = None


def module_fingerprint(tree: Any) -> str:
    """An entry module's code (parsed, never run), comments and docstrings aside: the first 16 hex digits of its
    syntax tree's SHA-256. A dialect recognises the entry scripts a framework released by it (Extension.runs); an
    edited copy has another fingerprint, since it may do anything."""
    import ast
    import copy
    import hashlib

    tree = copy.deepcopy(tree)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body and \
                isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and \
                isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree, include_attributes=False).encode()).hexdigest()[:16]


def release_extension(label: str, unmodelled: Mapping[str, Any], release: str) -> Extension | None:
    """The keys of `release` that the schema does not model, from a dialect's generated table (dotted key ->
    {"type", "default", "releases"}), as the release's own extension: type-checked, and refused by `rlcfg run` at any
    value but their default. `label` names the release in messages ("AReaL 0.5")."""
    keys = tuple(DeclaredKey(tuple(key.split(".")), fact["type"], None, False, None, fact["default"], True)
                 for key, fact in unmodelled.items() if release in fact["releases"])
    return Extension(label, keys, source="release") if keys else None


def load_extension(path: str, dialect: str, known: Any) -> Extension | None:
    """The keys `path` declares for `dialect` (None when it declares none). `known(path_tuple)` tells a key the
    dialect already has. Raises UsageError, located in the project file, for a declaration rlcfg cannot read."""
    tree, problems = load_yaml(read_text(path), path)
    errors = [p for p in problems if p.severity.value == "error" and p.code != "RLC103"]  # RLC103: not a mapping
    if errors:
        first = errors[0]
        raise UsageError(f"{first.origin.describe() if first.origin else path}: {first.message}")
    data = tree.data if tree is not None and isinstance(tree.data, dict) else None
    if data is None:
        raise UsageError(f"{path}: a project file is a YAML mapping with an `extend` section")
    unknown = [k for k in data if k != "extend"]
    if unknown:
        raise UsageError(f"{_where(tree, (unknown[0],), path)}: `{unknown[0]}` is not a section of a project file "
                         "(it has `extend`)")
    sections = data.get("extend") or {}
    if not isinstance(sections, dict):
        raise UsageError(f"{_where(tree, ('extend',), path)}: `extend` maps a dialect to the keys its fork adds")
    declared = sections.get(dialect)
    if declared is None:
        return None
    if not isinstance(declared, dict):
        raise UsageError(f"{_where(tree, ('extend', dialect), path)}: `extend.{dialect}` maps each added key "
                         "(dotted) to its type")
    keys = []
    for key, spec in declared.items():
        where = _where(tree, ("extend", dialect, key), path)
        spec = {"type": spec} if isinstance(spec, str) else spec
        if not isinstance(key, str) or not isinstance(spec, dict):
            raise UsageError(f"{where}: write `KEY: TYPE` or `KEY: {{type: TYPE, ...}}`")
        extra = sorted(set(spec) - {"type", "choices", "run", "description"})
        if extra:
            raise UsageError(f"{where}: `{extra[0]}` is not part of a declaration (type, choices, run, description)")
        kind = spec.get("type")
        if kind not in KINDS:
            raise UsageError(f"{where}: the type of `{key}` is {kind!r}; use one of {', '.join(KINDS)}")
        if spec.get("run", "refused") not in ("refused", "inert"):
            raise UsageError(f"{where}: `run` is `refused` (the default) or `inert`")
        choices = spec.get("choices")
        if choices is not None and not isinstance(choices, list):
            raise UsageError(f"{where}: `choices` is a list of the values the key takes")
        parts = split_dotted(key)
        if known(parts):
            raise UsageError(f"{where}: `{key}` is already a key of {dialect}; a project file declares only keys "
                             "a fork adds")
        keys.append(DeclaredKey(parts, kind, tuple(choices) if choices is not None else None,
                                spec.get("run") == "inert", tree.origin(("extend", dialect, key))
                                or Origin("file", file=path, line=1, column=1)))
    return Extension(path, tuple(keys))


def apply_extension(extension: Extension, tree: SourceTree) -> list[Diagnostic]:
    """Check each declared key the document sets against its declaration, note those `rlcfg run` refuses, and take
    them out of the tree the dialect's schema then checks."""
    found: list[Diagnostic] = []
    owner = extension.file
    for key in extension.keys:
        # a release's section that the user writes needs its keys that have no default (a dataclass field without one)
        parent = key.path[:-1]
        if extension.source == "release" and key.default == "???" and isinstance(tree.get(parent), dict) \
                and not tree.has(key.path):
            found.append(diagnostic("RLC203", dotted(key.path), f"`{dotted(key.path)}` has no default in {owner} and "
                                                               f"must be set when `{dotted(parent)}` is",
                                    origin=tree.origin(parent), hint=f"set {dotted(key.path)}"))
    # a section's own keys first: the section is then what they leave of it
    for key in sorted(extension.keys, key=lambda k: -len(k.path)):
        # The schema's own default of such a key only stands for "no entry module adds it".
        if key.modelled and not tree.written(key.path) and key.has_default and \
                isinstance(tree.get(key.path[:-1]), dict):
            tree.get(key.path[:-1])[key.path[-1]] = key.default
            tree.values[key.path] = Origin("default")
            continue
        if not tree.has(key.path):
            continue
        if extension.source == "entry" and not key.modelled and not tree.written(key.path):
            # unwritten, it is the module's own default, which only the module reads; what stands here is the
            # schema's "no entry module adds it"
            delete_path(tree.data, key.path)
            continue
        value = tree.get(key.path)
        # A section left empty here was written `{}`: its written keys went before it (and took it with them). For a
        # release that is the section at its defaults; a fork's or an entry module's code still gets the mapping.
        if value == {} and extension.source == "release" and \
                any(k.path[:len(key.path)] == key.path and k.path != key.path for k in extension.keys):
            delete_path(tree.data, key.path)
            continue
        name = dotted(key.path)
        origin = tree.origin(key.path)
        typed_by = f"{owner}'s type" if extension.source == "release" else f"the type {owner} declares"
        if not _fits(value, key.kind):
            found.append(diagnostic("RLC200", name, f"`{name}`: expected {_article(key.kind)}, got {value!r} "
                                                    f"({typed_by})", origin=origin,
                                    hint=f"write {_article(key.kind)}" + ("" if extension.source != "fork" else
                                                                          f", or change the declaration in {owner}")))
        elif key.choices is not None and value not in key.choices:
            found.append(diagnostic("RLC202", name, f"`{name}`: {value!r} is not one of "
                                                    f"{', '.join(map(str, key.choices))} ({owner})",
                                    origin=origin, hint=f"use one of {', '.join(map(str, key.choices))}"))
        elif extension.source == "release" and not key.inert and not (key.has_default and value == key.default):
            shown = "" if not key.has_default else f" (its default is {key.default!r})"
            found.append(diagnostic("RLC118", name, f"`rlcfg run` refuses `{name}` = {value!r}: {owner} has the "
                                                    f"key, and rlcfg does not model what it does{shown}",
                                    origin=origin, hint="validate and plan go on; run it with the framework itself, "
                                                        "or leave the key at its default"))
        elif key.modelled:
            continue  # the schema checks it further, and the lowering reads it
        elif extension.source == "entry":
            found.append(diagnostic("RLC118", name, f"`rlcfg run` refuses `{name}` = {value!r}: the entrypoint "
                                                    f"{owner} adds the key, and rlcfg cannot run what that entrypoint "
                                                    "does with it", origin=origin,
                                    hint="validate and plan go on; run it with the framework itself"))
        elif extension.source == "fork" and not key.inert:
            found.append(diagnostic("RLC118", name, f"`rlcfg run` refuses `{name}` = {value!r}: it is a key your fork "
                                                    f"adds ({owner}), and rlcfg cannot run what the fork "
                                                    "does with it", origin=origin,
                                    hint="run it with the fork itself, or declare it `run: inert` if a run computes "
                                         "the same with it"))
        delete_path(tree.data, key.path)
        # a mapping that held only declared keys (a section the release adds) goes too: the schema knows none of it
        parent = key.path[:-1]
        while parent and tree.get(parent) == {}:
            delete_path(tree.data, parent)
            parent = parent[:-1]
    return found


def _fits(value: Any, kind: str) -> bool:
    """A value of a declared kind; `a|b` is either (a release's key typed `int | None` is declared `int|null`)."""
    for one in kind.split("|"):
        if one == "null":
            if value is None:
                return True
        elif isinstance(value, KINDS[one]) and not (one in ("int", "float") and isinstance(value, bool)):
            return True
    return False


def _article(kind: str) -> str:
    words = {"bool": "a boolean", "int": "an integer", "float": "a number", "str": "a string", "list": "a list",
             "mapping": "a mapping", "any": "a value", "null": "null"}
    return " or ".join(words[one] for one in kind.split("|"))


def _where(tree: SourceTree, path: tuple, file: str) -> str:
    origin = tree.origin(path)
    return origin.describe() if origin is not None else file
