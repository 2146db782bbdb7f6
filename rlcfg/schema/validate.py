"""Check a resolved tree against a dialect: types and ranges, unknown keys, renamed keys, then the rules."""

from __future__ import annotations

from dataclasses import field
from functools import lru_cache
from typing import Any, Callable, Iterable, Iterator, Mapping

from pydantic import ValidationError

from rlcfg.diagnostics import Diagnostic, Origin, Severity, close_matches, diagnostic
from rlcfg.records import record
from rlcfg.schema.base import (ENTRY_KEY, LATE_CHECK_KEY, Dialect, Finding, HostFacts, RuleContext, Section,
                               UndeclaredCode, choices_of, field_at, field_releases, fields_along, is_deferred,
                               iter_fields, key_of, section_at, section_types)
from rlcfg.source.tree import Path, SourceTree, copy_containers, delete_path, dotted, set_path, split_dotted
from rlcfg.source.yaml_loader import TooLongNumber

_TYPE_WORDS = {
    "int_type": "an integer", "int_from_float": "an integer", "int_parsing": "an integer",
    "float_type": "a number", "float_parsing": "a number", "bool_type": "true or false", "bool_parsing": "true or false",
    "string_type": "a string", "list_type": "a list", "dict_type": "a mapping", "model_type": "a mapping of keys",
    "model_attributes_type": "a mapping of keys", "none_required": "null", "tuple_type": "a list",
    "finite_number": "a finite number",
}
_RANGE = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}


def describe_value(value: Any) -> str:
    if value is None:
        return "null"
    kind = {bool: "a boolean", int: "an integer", float: "a float", str: "a string", list: "a list",
            dict: "a mapping"}.get(type(value), type(value).__name__)
    shown = repr(value) if isinstance(value, str) else _short(value)
    return f"{shown} ({kind})"


def _short(value: Any) -> str:
    text = "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


@record
class SchemaResult:
    config: Section | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    error_paths: set = field(default_factory=set)  # paths that carry an error; rules touching them are muted


@record
class Judgement:
    """How the document is judged beyond its types: by which release, and what the user's overrides did."""

    release: str | None = None
    release_reason: str = ""
    referenced: frozenset = frozenset()  # paths some interpolation refers to (helper variables live here)
    # paths the user added on purpose with `+key=value` or `++key=value` -> the prefix written
    added: Mapping = field(default_factory=dict)
    known_keys_only: bool = False  # a pipeline rlcfg does not model: only the keys it knows are checked
    # keys the launch script's entry module adds that the schema declares for it (DeclaredKey.modelled): no
    # release's base config has them, and here they are the entry module's own
    entry_modelled: frozenset = frozenset()


def validate_tree(root: type[Section], tree: SourceTree, dialect: Dialect | None = None,
                  judgement: Judgement | None = None) -> SchemaResult:
    judgement = judgement or Judgement()
    result = SchemaResult(None)
    data = tree.data
    passed_on = _passed_on(root, tree, judgement)
    if passed_on:
        data = copy_containers(data)
        for path, found in passed_on.items():
            delete_path(data, path)
            result.diagnostics.append(found)
    try:
        result.config = root.model_validate(data)
        errors = []
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
    if errors:
        cleaned = copy_containers(data)
        converted: set[Path] = set()  # values the loader converts, which are then checked as converted
        for error in errors:
            path = _tree_path(error["loc"], data)
            read_as: Any = None
            if error["type"] == "extra_forbidden":
                found = _unknown_key_verdict(path, root, tree, dialect, judgement)
            elif error["type"] == "bool_type" and dialect is not None and dialect.untyped_values:
                found, read_as = _flag_by_truth(error["input"], path, tree, dialect, judgement.release)
            elif (dialect is not None and dialect.converts_strings
                  and (read_as := _converted(error["type"], error["input"])) is not None):
                found = _converted_string(error["input"], read_as, path, tree, dialect, judgement.release)
                converted.add(path)
            elif error["type"] == "missing" and judgement.known_keys_only:
                found = None  # a key of the modelled pipeline that this one has no use for
            else:
                found = _error_diagnostic(error, path, root, tree, dialect, judgement.release)
            if found is not None:
                result.diagnostics.append(found)
            if found is not None and found.severity is Severity.ERROR:
                result.error_paths.add(path)
            if read_as is not None:
                set_path(cleaned, path, read_as)  # what the framework's code reads, so that what runs is the same
            elif error["type"] != "missing":
                delete_path(cleaned, path)
        try:
            result.config = root.model_validate(cleaned)
        except ValidationError as again:
            for error in again.errors(include_url=False):  # a converted value the field's own checks refuse
                path = _tree_path(error["loc"], cleaned)
                if path in converted:
                    result.diagnostics.append(_error_diagnostic(error, path, root, tree, dialect, judgement.release))
                    result.error_paths.add(path)
                    delete_path(cleaned, path)
            # Still invalid (a required value is missing): build what can be built, so that the rules can check
            # everything else; a rule that reaches for the missing value is skipped.
            result.config = _lenient(root, cleaned)
    if dialect is not None and judgement.release is not None:
        result.diagnostics.extend(d for d in _release_diagnostics(root, tree, dialect, judgement)
                                  if split_dotted(d.path) not in passed_on)
    return result


def _passed_on(root: type[Section], tree: SourceTree, judgement: Judgement) -> dict[Path, Diagnostic]:
    """Keys added with `+` that only an entry module reads (a field declared with `entry`), where the launch does not
    run that module: the loader passes them on and nothing reads them, so they are left out of the config, with a
    warning each."""
    found: dict[Path, Diagnostic] = {}
    for added, plus in judgement.added.items():
        if not tree.has(added):
            continue
        for depth, (info, _owner) in enumerate(fields_along(root, added), start=1):
            extra = info.json_schema_extra if info is not None and isinstance(info.json_schema_extra, dict) else {}
            if not extra.get(ENTRY_KEY):
                continue
            path = added[:depth]
            if path not in judgement.entry_modelled and path not in found:
                found[path] = diagnostic(
                    "RLC115", dotted(path), f"`{plus}{dotted(added)}` adds a key that only {extra[ENTRY_KEY]} reads; "
                    "this launch does not run that entrypoint as released, so nothing rlcfg runs reads the key",
                    origin=tree.key_origin(added) or tree.origin(added), severity=Severity.WARNING,
                    hint="run it with that entrypoint, or remove it")
            break
    return found


# Strings that say false but that a truth test reads as true, as any non-empty string.
FALSE_WORDS = frozenset({"false", "no", "off", "0", "n", "f", "none", "null"})
TRUE_WORDS = frozenset({"true", "yes", "on", "1", "y", "t"})


def _flag_by_truth(value: Any, path: Path, tree: SourceTree, dialect: Dialect, release: str | None
                   ) -> tuple[Diagnostic, bool | None]:
    """A flag of another type, where the framework's code tests its truth (`Dialect.untyped_values`): a warning and
    the bool the code reads where that is what the value says (1, 0, null, "yes"), an error where it is not (the
    string "false" reads as true; a list, a mapping, any other string)."""
    name = dotted(path)
    framework = dialect.release_label(release) if release is not None else dialect.title
    read = bool(value)
    word = str(read).lower()
    says = value.strip().lower() if isinstance(value, str) else None
    plain = isinstance(value, (int, float)) or value is None or (says is not None and (says in TRUE_WORDS or not says))
    if plain:
        return diagnostic("RLC200", name, f"`{name}` is {describe_value(value)}, which {framework} reads as {word}: "
                          "its code tests the flag's truth", origin=tree.origin(path), severity=Severity.WARNING,
                          hint=f"write `{path[-1]}: {word}`"), read
    flipped = says in FALSE_WORDS
    meaning = "the opposite of what it says" if flipped else "whatever it was meant to say"
    return diagnostic("RLC200", name, f"`{name}`: expected true or false, got {describe_value(value)}; {framework} "
                      f"accepts this at load but reads it as {word} when its code tests the flag, {meaning}",
                      origin=tree.origin(path),
                      hint=f"write `{path[-1]}: false`" if flipped else "write true or false"), None


def _to_bool(text: str) -> bool:
    word = text.strip().lower()
    if word in ("y", "yes", "on", "true"):
        return True
    if word in ("n", "no", "off", "false"):
        return False
    return int(word) != 0


# OmegaConf's conversion of a string to a typed field's type (its IntegerNode, FloatNode and BooleanNode), by the
# pydantic error a strict field raises for a string.
_CONVERTERS: dict[str, Callable[[str], Any]] = {"int_type": int, "float_type": float, "bool_type": _to_bool}


def _late(info: Any, dialect: Dialect | None, release: str | None) -> str:
    """Where the release's loader takes any value of the field and its run fails later (`param(late_check=...)`):
    when, in the house wording; else nothing."""
    extra = info.json_schema_extra if info is not None and isinstance(info.json_schema_extra, dict) else {}
    late = extra.get(LATE_CHECK_KEY, {}).get(release) if release is not None else None
    if not late:
        return ""
    return f"; {dialect.title if dialect is not None else 'the framework'} {release} accepts this at load but fails {late}"


def _converted(kind: str, value: Any) -> Any:
    """The value OmegaConf makes of a string for a field of that kind, or None where it refuses it too (or the value
    is not a string, or the kind is not one it converts)."""
    if kind not in _CONVERTERS or not isinstance(value, str):
        return None
    try:
        return _CONVERTERS[kind](value)
    except ValueError:
        return None


def _converted_string(text: str, value: Any, path: Path, tree: SourceTree, dialect: Dialect,
                      release: str | None) -> Diagnostic:
    """A quoted number or boolean that the loader converts to the field's type (`Dialect.converts_strings`): it runs
    as the converted value, which rlcfg then checks like any other; a warning, since the file says a string."""
    name = dotted(path)
    framework = dialect.release_label(release) if release is not None else dialect.title
    shown = str(value).lower() if isinstance(value, bool) else repr(value)
    return diagnostic("RLC200", name, f"`{name}` is {describe_value(text)}, which {framework}'s loader converts to "
                      f"{shown}", origin=tree.origin(path), severity=Severity.WARNING,
                      hint=f"write `{path[-1]}: {shown}` without quotes")


def _unknown_key_verdict(path: Path, root: type[Section], tree: SourceTree, dialect: Dialect | None,
                         judgement: Judgement) -> Diagnostic | None:
    """An unknown key, judged the way the framework's loader treats it."""
    name = dotted(path)
    # `+a.b.c=1` on a config without `a.b` creates the mapping `a.b`, which is where pydantic reports it
    adding = next((a for a in judgement.added if path[: len(a)] == a or a[: len(path)] == path), None)
    if adding is not None:
        plus = judgement.added[adding]
        origin = tree.key_origin(path) or tree.origin(path)
        close = _close_sibling(path, root)
        if close is not None:
            # Most likely a typo of the key the user meant to set: that key keeps its value, silently.
            target = dotted((*path[:-1], close))
            prefix = dialect.override_prefix(tree, (*path[:-1], close)) if dialect is not None else ""
            return diagnostic("RLC115", name, f"`{plus}{name}` adds a key rlcfg does not know, and `{target}` keeps its "
                              "value", origin=origin, severity=Severity.WARNING,
                              hint=f"did you mean `{target}`? Set it with `{prefix}{target}=...`")
        return diagnostic("RLC115", name, f"`{plus}{name}` adds a key rlcfg does not know; it is passed on for the code "
                          "that reads it", origin=origin,
                          hint="nothing to do if your entrypoint or plugin reads it; check the spelling otherwise")
    if judgement.known_keys_only:
        return None
    policy = dialect.unknown_key_policy(path, judgement.release) if dialect is not None else "error"
    if policy == "open":
        return None
    found = _unknown_key(path, root, tree, dialect)
    if policy == "error":
        return found
    if any(ref[: len(path)] == path for ref in judgement.referenced):
        return None  # a helper variable: only interpolations read it, whatever known key its name resembles
    misplaced = _elsewhere_hint(path, root)
    if misplaced is None and _close_sibling(path, root) is not None:
        return found  # most likely a typo of a key the framework reads: the framework would silently lose it
    # A key the dialect has, written in the wrong section (a top-level `lora_rank` beside `lora_alpha`), is dropped
    # like any other: not a typo of the sibling it happens to resemble.
    title = dialect.title if dialect is not None else "the framework"
    return diagnostic("RLC114", name, f"{title} ignores the unknown key `{path[-1]}` in "
                      f"{('`' + dotted(path[:-1]) + '`') if len(path) > 1 else 'the top level'}: its loader drops keys "
                      "it does not read", origin=found.origin, hint=misplaced or found.hint)


def _close_sibling(path: Path, root: type[Section]) -> str | None:
    owner = section_at(root, path[:-1])
    if owner is None:
        return None
    siblings = [key_of(n, f) for n, f in owner.model_fields.items()]
    close = close_matches(str(path[-1]), siblings, n=1, cutoff=0.8)
    return close[0] if close else None


def _release_diagnostics(root: type[Section], tree: SourceTree, dialect: Dialect, judgement: Judgement) -> list[Diagnostic]:
    """Keys the user wrote that the judged release does not have (one finding per subtree)."""
    release = judgement.release
    label = dialect.release_label(release)
    found: list[Diagnostic] = []
    reported: list[Path] = []
    user_paths = sorted(tree.written_paths(), key=lambda p: (len(p), tuple(map(str, p))))
    for path in user_paths:
        if any(path[: len(r)] == r for r in reported) or any(isinstance(part, int) for part in path):
            continue
        if not tree.has(path):  # an extension's key, taken out of the document before the schema judges it
            continue
        # The outermost key of the path that the release lacks: a key below a section that only some releases
        # have is missing from the others too.
        found_gap = None
        for depth, (info, _owner) in enumerate(fields_along(root, path), start=1):
            releases = field_releases(info) if info is not None else None
            if releases is not None and release not in releases:
                found_gap = (path[:depth], info, releases)
                break
        if found_gap is None or found_gap[0] in judgement.entry_modelled:
            continue
        path, info, releases = found_gap
        if any(path[: len(r)] == r for r in reported):
            continue
        if judgement.known_keys_only and len(path) == 1:
            continue  # a pipeline rlcfg does not model may define top-level keys of its own with these names
        reported.append(path)
        name = dotted(path)
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        renamed = extra.get("x-rlcfg-renamed-to")
        others = ", ".join(releases) or "no release rlcfg claims"
        why = f"rlcfg judges this file as {label}" + (f" ({judgement.release_reason})" if judgement.release_reason else "")
        entry = extra.get(ENTRY_KEY)
        if entry:
            others = f"{entry} adds, and only there does it exist"
            hint = f"run it with that entrypoint, or remove it; {why}"
        elif renamed:
            hint = f"write `{renamed}` instead; {why}"
        elif releases:
            hint = f"remove it, or pin the release the file is written for with `--framework-version {releases[-1]}`; {why}"
        else:
            hint = f"remove it; {why}"
        refused = dialect.unknown_key_policy(path, judgement.release) == "error"
        consequence = "its loader stops on it" if refused else "it is ignored there"
        whose = "that " + others if entry else "of " + (f"{dialect.title} {others}" if releases else others)
        found.append(diagnostic("RLC113", name, f"`{name}` does not exist in {label} ({consequence}); it is a key "
                                f"{whose}", origin=tree.key_origin(path) or tree.origin(path),
                                hint=hint, severity=None if refused else Severity.WARNING))
    return found


def _lenient(model: type[Section], data: Any) -> Section:
    from rlcfg.schema.base import is_deferred, section_types

    values = {}
    for name, info in model.model_fields.items():
        key = key_of(name, info)
        if key not in data and is_deferred(info.annotation):
            values[name] = info.get_default()  # absent, as in a valid config: not built
            continue
        subs = section_types(info.annotation)
        if key in data:
            value = data[key]
            values[name] = _lenient(subs[0], value) if subs and isinstance(value, dict) else value
        elif not info.is_required():
            values[name] = info.get_default(call_default_factory=True) if not subs else _lenient(subs[0], {})
    return model.model_construct(**values)


def _tree_path(loc: tuple, data: Any) -> Path:
    """Pydantic's error location with union-member tags removed, so it names keys of the document."""
    path: list = []
    node = data
    for index, part in enumerate(loc):
        if isinstance(node, dict) and part in node:
            path.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            path.append(part)
            node = node[part]
        elif index == len(loc) - 1 and isinstance(part, str) and isinstance(node, dict):
            path.append(part)  # a missing key
        elif isinstance(part, str) and ("[" in part or part[:1].isupper() or part in _TYPE_WORDS or "-" in part):
            continue  # a union member or validator tag such as 'function-after[...]' or 'int'
        elif isinstance(node, dict) and index + 1 < len(loc) and loc[index + 1] in node:
            continue  # a discriminated union's tag (the variant's name), not a key of the document
        else:
            path.append(part)
            node = None
    return tuple(path)


def _error_diagnostic(error: dict, path: Path, root: type[Section], tree: SourceTree,
                      dialect: Dialect | None = None, release: str | None = None) -> Diagnostic | None:
    kind = error["type"]
    name = dotted(path)
    value = error.get("input")
    if isinstance(value, TooLongNumber):
        return None  # the loader has reported it
    info, owner = field_at(root, path)
    description = info.description if info is not None else None
    origin = tree.origin(path)
    if kind == "extra_forbidden":
        return _unknown_key(path, root, tree, dialect)
    if kind == "missing":
        where = dotted(path[:-1]) or "the top level"
        hint = f"add `{path[-1]}: <value>` under `{where}`"
        if description:
            hint += f" ({_first_sentence(description)})"
        return diagnostic("RLC203", name, f"`{name}` has no default and must be set", origin=tree.key_origin(path[:-1]) or origin,
                          hint=hint)
    if kind == "literal_error":
        allowed = choices_of(info.annotation) if info is not None else None
        allowed_text = ", ".join(_short(a) for a in allowed) if allowed else error.get("ctx", {}).get("expected", "")
        suggestion = None
        if allowed and isinstance(value, str):
            same_but_case = [str(a) for a in allowed if str(a).lower() == value.lower()]
            close = same_but_case or close_matches(value, [str(a) for a in allowed], n=1, cutoff=0.6)
            suggestion = close[0] if close else None
        hint = f"did you mean `{suggestion}`?" if suggestion else f"use one of: {allowed_text}"
        message = f"`{name}`: {_short(value)} is not one of {allowed_text}"
        return diagnostic("RLC202", name, message + _late(info, dialect, release), origin=origin, hint=hint)
    if kind in _RANGE:
        bound = next(iter(error.get("ctx", {}).values()), "?")
        return diagnostic("RLC201", name, f"`{name}` must be {_RANGE[kind]} {bound}, got {_short(value)}"
                          + _late(info, dialect, release), origin=origin,
                          hint=_first_sentence(description) if description else None)
    if kind in ("too_short", "too_long"):
        return diagnostic("RLC201", name, f"`{name}`: {error['msg'].lower()}", origin=origin,
                          hint=_first_sentence(description) if description else None)
    if kind in _TYPE_WORDS:
        expected = _TYPE_WORDS[kind]
        hint = None
        if isinstance(value, str) and kind.startswith(("int", "float")):
            hint = f"write the number without quotes: `{path[-1]}: {value}`" if _numeric(value) else None
        if isinstance(value, float) and kind.startswith("int") and value.is_integer():
            hint = f"write `{int(value)}`, without the decimal point"
        if hint is None and description:
            hint = _first_sentence(description)
        message = f"`{name}`: expected {expected}, got {describe_value(value)}"
        if dialect is not None and dialect.untyped_values:
            framework = dialect.release_label(release) if release is not None else dialect.title
            message += (f"; {framework} keeps config values as written, so the run fails where its code first "
                        "computes with this one (at load for what its config check reads, else later)")
        return diagnostic("RLC200", name, message, origin=origin, hint=hint)
    return diagnostic("RLC200", name, f"`{name}`: {error['msg']} (got {describe_value(value)})", origin=origin,
                      hint=_first_sentence(description) if description else None)


def _numeric(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


@lru_cache(maxsize=None)
def _all_keys(root: type[Section]) -> dict[str, list[str]]:
    """key name -> every dotted path where the dialect has a key of that name."""
    out: dict[str, list[str]] = {}
    for path, _info, _owner in iter_fields(root):
        out.setdefault(path[-1], []).append(".".join(path))
    return out


def _elsewhere_hint(path: Path, root: type[Section]) -> str | None:
    """Where else the dialect has a key of this name, if anywhere."""
    elsewhere = [p for p in _all_keys(root).get(str(path[-1]), []) if p != dotted(path)]
    if not elsewhere:
        return None
    return f"this key exists under `{elsewhere[0].rsplit('.', 1)[0]}`" + (
        f" (and {len(elsewhere) - 1} more places)" if len(elsewhere) > 1 else "")


def _other_variant(path: Path, root: type[Section], dialect: Dialect | None) -> str | None:
    """The name of another variant of the dialect that does have this key."""
    if dialect is None:
        return None
    for name, model in dialect.variants().items():
        if model is not root and field_at(model, path)[0] is not None:
            return name
    return None


def _unknown_key(path: Path, root: type[Section], tree: SourceTree, dialect: Dialect | None = None) -> Diagnostic:
    name = dotted(path)
    variant = _other_variant(path, root, dialect)
    if variant is not None:
        chooser = f" ({dialect.variant_key}: {variant})" if dialect.variant_key else ""
        return diagnostic("RLC102", name, f"`{name}` is a key of the {variant} variant{chooser}, not of this one",
                          origin=tree.key_origin(path),
                          hint=f"remove it, or switch to the {variant} variant" + (
                              f" with `{dialect.variant_key}: {variant}`" if dialect.variant_key else ""))
    key = str(path[-1])
    parent = path[:-1]
    owner = section_at(root, parent)
    siblings = [key_of(n, f) for n, f in owner.model_fields.items()] if owner is not None else []
    close = close_matches(key, siblings, n=1, cutoff=0.7)
    elsewhere = [p for p in _all_keys(root).get(key, []) if p != name]
    where = f"`{dotted(parent)}`" if parent else "the top level"
    if close:
        hint = f"did you mean `{close[0]}`?"
        if elsewhere:
            hint += f" (`{key}` also exists under `{elsewhere[0].rsplit('.', 1)[0]}`)"
    elif elsewhere:
        hint = _elsewhere_hint(path, root)
    else:
        cross = close_matches(key, list(_all_keys(root)), n=1, cutoff=0.8)
        if cross:
            target = _all_keys(root)[cross[0]][0]
            hint = f"did you mean `{target}`?"
        else:
            listing = "rlcfg docs" if dialect is None else \
                f"rlcfg keys {dialect.name}" + (f" {dotted(parent)}" if parent else "")
            hint = (f"{where} has no such key; `{listing}` lists the keys it accepts (a key your fork adds: "
                    "declare it in rlcfg.project.yaml)")
    return diagnostic("RLC102", name, f"unknown key `{key}` in {where}", origin=tree.key_origin(path), hint=hint)


# ---- renamed keys -------------------------------------------------------------------------------------------


def _written_renames(model: type[Section], prefix: Path, written: set[Path],
                     context: RuleContext) -> Iterator[tuple[str, str]]:
    """(old key, its new name) for each renamed key the user set, in the order the sections declare them. Only
    sections the user wrote something under are visited: a check no longer walks every section of the dialect."""
    for name, info in model.hand_written_fields().items():  # an inventory renames nothing
        path = (*prefix, key_of(name, info))
        if path not in written:
            continue
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        target = extra.get("x-rlcfg-renamed-to")
        if target and context.is_set(".".join(path)):
            yield ".".join(path), target
        if is_deferred(info.annotation):
            continue  # RLinf's inventoried sections rename nothing, and stay unbuilt
        for sub in section_types(info.annotation):
            yield from _written_renames(sub, path, written, context)
            break


def check_renames(root: type[Section], tree: SourceTree, context: RuleContext) -> list[Diagnostic]:
    written = {path[:depth] for path in tree.written_paths() for depth in range(1, len(path) + 1)}
    found = []
    for old, new in _written_renames(root, (), written, context):
        old_path, new_path = split_dotted(old), split_dotted(new)
        if context.is_set(new) and tree.get(old_path) != tree.get(new_path):
            found.append(diagnostic(
                "RLC305", old, f"`{old}` ({_short(tree.get(old_path))}) and its newer name `{new}` "
                f"({_short(tree.get(new_path))}) are both set, to different values",
                origin=tree.origin(old_path), related=[(new, tree.origin(new_path))],
                hint=f"keep only `{new}`"))
        else:
            found.append(diagnostic(
                "RLC111", old, f"`{old}` is the older name of `{new}`; both are accepted",
                origin=tree.key_origin(old_path), hint=f"rename it to `{new}` for newer framework versions"))
    return found


# ---- rules --------------------------------------------------------------------------------------------------


def run_rules(dialect: Dialect, config: Section | None, tree: SourceTree, strict: bool, host: HostFacts,
              muted: set, config_has_errors: bool, release: str | None = None,
              entry_runs: str | None = None) -> list[Diagnostic]:
    """The dialect's rules over `config`; without one (a pipeline rlcfg does not model), only the rules of the
    composed document. `entry_runs`: CheckResult.entry_runs."""
    context = RuleContext(tree, strict, host, release, entry_runs)
    out: list[Diagnostic] = []
    for rule in dialect.rules:
        if config is None and not rule.on_document:
            continue
        context.rule = rule
        try:
            findings: Iterable[Finding] = list(rule.check(tree.data if rule.on_document else config, context) or ())
        except UndeclaredCode:
            raise
        except Exception:
            if config_has_errors:
                continue  # the rule tripped over a value that already has an error
            raise
        for f in findings:
            paths = (f.path, *f.related)
            if any(_touches(split_dotted(p), muted) for p in paths if p):
                continue
            path = split_dotted(f.path) if f.path else ()
            origin: Origin | None = tree.origin(path)
            related = [(p, tree.origin(split_dotted(p))) for p in f.related]
            out.append(diagnostic(f.code, f.path, f.message, hint=f.hint, origin=origin, severity=f.severity,
                                  related=related, rule=rule.id, constraint=f.constraint))
    context.rule = None
    if config is not None:
        out.extend(check_renames(type(config), tree, context))
    return out


def _touches(path: Path, muted: set) -> bool:
    return any(path[: len(m)] == m or m[: len(path)] == path for m in muted)
