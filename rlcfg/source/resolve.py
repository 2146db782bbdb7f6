"""Defaults, then the file, then overrides; then `${...}` interpolation resolved as OmegaConf resolves it (plain
references here, everything else by OmegaConf itself).

Each stage records a `Layer` in the tree's history, so `rlcfg validate --explain KEY` can tell a value's
story (default → file → override), and each resolved interpolation keeps the location where it was written
plus, in `Origin.via`, where the values it refers to came from.
"""

from __future__ import annotations

import re
from dataclasses import field, replace
from typing import Any, Callable, Mapping

from rlcfg.diagnostics import Diagnostic, Origin, close_matches, diagnostic
from rlcfg.patterns import lazy
from rlcfg.records import record
from rlcfg.source.tree import (MISSING, Layer, Path, SourceTree, copy_containers, delete_path, dotted, drop_subtree,
                               walk)

_DEFAULT_ORIGIN = Origin("default")


def merge_over_defaults(defaults: dict, user: SourceTree) -> SourceTree:
    """The user's tree laid over the dialect's defaults. Mappings merge key by key; anything else replaces."""
    merged = SourceTree({})
    for path, value in walk(defaults):
        if not path:
            continue
        origin = Origin("default", default_of=value) if _is_interpolation(value) else _DEFAULT_ORIGIN
        merged.values[path] = origin
        if not isinstance(value, (dict, list)):
            merged.history[path] = [Layer(origin, value)]
    merged.data = _merge(defaults, user.data, (), merged, user)
    return merged


def _merge(default: Any, user: Any, path: Path, merged: SourceTree, source: SourceTree) -> Any:
    if isinstance(default, dict) and isinstance(user, dict):
        if path in source.values:
            merged.values[path] = source.values[path]
        if path in source.keys:
            merged.keys[path] = source.keys[path]
        out = {k: copy_containers(v) for k, v in default.items()}
        for key, value in user.items():
            out[key] = _merge(default.get(key), value, path + (key,), merged, source)
        return out
    if isinstance(default, (dict, list)):
        drop_subtree(merged.values, path)
    else:
        merged.values.pop(path, None)
    for sub, _ in walk(user, path):
        if sub in source.values:
            merged.values[sub] = source.values[sub]
        if sub in source.keys:
            merged.keys[sub] = source.keys[sub]
        layers = merged.history.get(sub, []) if sub == path else []
        merged.history[sub] = layers + source.history.get(sub, [])
    return copy_containers(user)


def _is_interpolation(value: Any) -> bool:
    return isinstance(value, str) and "${" in value


# ---- interpolation ------------------------------------------------------------------------------------------


@record
class Resolution:
    tree: SourceTree
    diagnostics: list[Diagnostic] = field(default_factory=list)
    missing: set = field(default_factory=set)  # required values nobody gave ("???")
    unresolved: set = field(default_factory=set)  # interpolations that failed (already reported or missing-dependent)


_REF = lazy(r"\$\{(\.*)([A-Za-z_][\w\-]*(?:\.[\w\-]+|\[\d+\])*)\}")
_ENV_REF = lazy(r"\$\{oc\.env:([^,}]+)")


class _EnvReader:
    """`oc.env` reading a given environment (not the process's), and noting which variables were read."""

    def __init__(self, env: Mapping[str, str]):
        self.env = env
        self.read: list[str] = []

    def __call__(self, key: str, default: Any = MISSING) -> Any:
        self.read.append(key)
        if key in self.env:
            return self.env[key]
        if default is not MISSING:
            return str(default) if default is not None else None
        raise KeyError(f"Environment variable '{key}' not found")


def resolve(tree: SourceTree, env: Mapping[str, str], resolvers: Mapping[str, Callable] | None = None) -> Resolution:
    """Resolve every `${...}` in the tree with OmegaConf, in place of the raw strings."""
    result = Resolution(tree)
    interpolations: list[Path] = []
    for path, value in list(walk(tree.data)):
        if value == MISSING:
            result.missing.add(path)
        elif _is_interpolation(value):
            interpolations.append(path)
    if not interpolations:
        _drop(tree, result.missing)
        return result
    for path in _oversized(tree.data, interpolations):
        result.unresolved.add(path)
        result.diagnostics.append(diagnostic(
            "RLC109", dotted(path), f"`{dotted(path)}` expands to more than {MAX_EXPANSION:,} characters or through "
            f"more than {MAX_SUBSTITUTIONS:,} nested references", origin=tree.origin(path),
            hint="an interpolation that refers several times to values that refer several times to others grows "
                 "exponentially; refer to each value once"))
    interpolations = [p for p in interpolations if p not in result.unresolved]
    if not interpolations:
        _drop(tree, result.missing | result.unresolved)
        return result

    # A dialect that brings its own `oc.env` has it read by OmegaConf.
    simple = None if "oc.env" in (resolvers or {}) else _resolve_plain_references(tree.data, interpolations, env,
                                                                                     resolvers)
    if simple is not None:
        _record(tree, simple, env)
        _drop(tree, result.missing | result.unresolved)
        return result

    from omegaconf import OmegaConf

    from omegaconf.basecontainer import BaseContainer

    reader = _EnvReader(env)
    ours = {"oc.env": reader, **(resolvers or {})}
    # OmegaConf's resolvers are global to the process: put back whatever was there, so one dialect's
    # resolvers never leak into another dialect's check (nor our env reader into the user's OmegaConf).
    saved = {name: BaseContainer._resolvers.get(name) for name in ours}
    resolved: dict[Path, Any] = {}
    failures: dict[Path, Exception] = {}
    try:
        for name, function in ours.items():
            OmegaConf.register_resolver(name, function, replace=True, use_cache=False, annotation_validation="off")
        cfg = _create_config(tree, interpolations, result)
        interpolations = [p for p in interpolations if p not in result.unresolved]  # empty when cfg is None
        for path in interpolations:
            reader.read.clear()
            try:
                value = _select(cfg, path)
            except Exception as exc:  # OmegaConf raises a family of errors; each one becomes a diagnostic
                failures[path] = exc
                continue
            resolved[path] = (value, list(reader.read))
    finally:
        for name, previous in saved.items():
            if previous is None:
                BaseContainer._resolvers.pop(name, None)
            else:
                BaseContainer._resolvers[name] = previous
    result.diagnostics.extend(_failure_diagnostics(failures, tree, result.unresolved | result.missing))
    result.unresolved.update(failures)
    _record(tree, resolved, env)
    _drop(tree, result.missing | result.unresolved)
    return result


def _record(tree: SourceTree, resolved: dict[Path, tuple[Any, list[str]]], env: Mapping[str, str]) -> None:
    """Put resolved values in place of their interpolations, each keeping where it was written and, in `via`,
    where the values it refers to (and the environment variables it read) came from."""
    for path, (value, env_read) in resolved.items():
        raw = tree.get(path)
        via = tuple(_referenced_origins(raw, path, tree)) + tuple(
            Origin("env", env_var=name) for name in env_read if name in env)
        origin = tree.origin(path) or _DEFAULT_ORIGIN
        new_origin = replace(origin, via=via)
        from rlcfg.source.tree import set_path

        set_path(tree.data, path, value)
        if isinstance(value, (dict, list)):
            drop_subtree(tree.values, path)
            for sub, _ in walk(value, path):
                tree.values[sub] = new_origin
        else:
            tree.values[path] = new_origin
        tree.history.setdefault(path, []).append(Layer(Origin("derived", via=via), value))


# ---- plain references without OmegaConf ----------------------------------------------------------------------
# Nearly every config interpolates only plain forms: `${a.b}`, `${..b}`, `${oc.env:VAR}` or `${oc.env:VAR,word}`,
# and a dialect's own resolvers over those or whole numbers (RLinf's `${subtract:${a.b}, ${c}}`), whole or inside a
# string. Importing and building OmegaConf costs more than the rest of a check, so these are resolved here, to
# the values OmegaConf gives (a test holds the two together); anything else, and any reference that fails, goes
# to OmegaConf, whose errors the diagnostics are worded from.

_RESOLVER_CALL = lazy(r"([A-Za-z_][\w.]*):(.*)", re.S)
_WHOLE_NUMBER = lazy(r"-?(?:0|[1-9][0-9]*)")  # what OmegaConf's grammar reads as an int ("007" it does not)
_PLAIN_REF = lazy(r"(\.*)([A-Za-z_]\w*(?:\.\w+)*)")
_ENV_GROUP = lazy(r"oc\.env:([A-Za-z_]\w*)(?:,([A-Za-z_/~][\w/.~-]*))?")
_GRAMMAR_WORDS = frozenset({"true", "false", "null", "inf", "nan"})  # OmegaConf types these as a default's value


class _NotPlain(Exception):
    """The interpolation needs OmegaConf: a form the fast path does not read, or a reference that fails."""


def _resolve_plain_references(data: dict, interpolations: list[Path], env: Mapping[str, str],
                              resolvers: Mapping[str, Callable] | None = None
                              ) -> dict[Path, tuple[Any, list[str]]] | None:
    """Every interpolation's value and the environment variables it read, or None when one of them needs
    OmegaConf."""
    resolver = _PlainResolver(data, env, resolvers or {})
    try:
        return {path: resolver.top(path) for path in interpolations}
    except (_NotPlain, RecursionError):
        return None


class _PlainResolver:
    def __init__(self, data: dict, env: Mapping[str, str], resolvers: Mapping[str, Callable]):
        self.data = data
        self.env = env
        self.resolvers = resolvers
        self.read: list[str] = []
        self.active: set = set()

    def top(self, path: Path) -> tuple[Any, list[str]]:
        self.read = []
        value = self.value_at(path)
        return value, list(self.read)

    def value_at(self, path: Path) -> Any:
        if path in self.active:
            raise _NotPlain()  # a cycle: OmegaConf reports it
        node = _get(self.data, path)
        if node is _ABSENT or node == MISSING:
            raise _NotPlain()
        self.active.add(path)
        try:
            return self.deep(node, path)
        finally:
            self.active.discard(path)

    def deep(self, node: Any, path: Path) -> Any:
        if isinstance(node, dict):
            return {k: self.deep(v, path + (k,)) if not _is_interpolation(v) else self.value_at(path + (k,))
                    for k, v in node.items()}
        if isinstance(node, list):
            return [self.deep(v, path + (i,)) if not _is_interpolation(v) else self.value_at(path + (i,))
                    for i, v in enumerate(node)]
        if node == MISSING and path:
            raise _NotPlain()
        return self.string(node, path) if _is_interpolation(node) else node

    def string(self, text: str, path: Path) -> Any:
        parts = _split_groups(text)
        if len(parts) == 1 and parts[0][0] == "group":
            return self.group(parts[0][1], path)
        out = ""
        for kind, part in parts:
            if kind == "text":
                out += part
                continue
            value = self.group(part, path)
            if isinstance(value, (dict, list)):
                raise _NotPlain()
            out += str(value)
        return out

    def group(self, inner: str, path: Path) -> Any:
        call = _RESOLVER_CALL.fullmatch(inner)
        if call is not None and call.group(1) in self.resolvers:
            return self.call(self.resolvers[call.group(1)], call.group(2), path)
        ref = _PLAIN_REF.fullmatch(inner)
        if ref is not None:
            dots, target = ref.groups()
            if dots and any(isinstance(part, int) for part in path):
                raise _NotPlain()
            return self.value_at(_absolute(dots, target, path))
        env = _ENV_GROUP.fullmatch(inner)
        if env is None:
            raise _NotPlain()
        name, default = env.groups()
        if default is not None and default.lower() in _GRAMMAR_WORDS:
            raise _NotPlain()
        self.read.append(name)
        if name in self.env:
            return self.env[name]
        if default is None:
            raise _NotPlain()
        return default

    def call(self, function: Callable, text: str, path: Path) -> Any:
        """A dialect resolver over arguments that are each a whole interpolation or a whole number."""
        args = []
        for raw in _split_arguments(text):
            raw = raw.strip()
            parts = _split_groups(raw)
            if len(parts) == 1 and parts[0][0] == "group":
                args.append(self.group(parts[0][1], path))
            elif _WHOLE_NUMBER.fullmatch(raw):
                args.append(int(raw))
            else:
                raise _NotPlain()
        try:
            return function(*args)
        except Exception:  # the resolver refuses its arguments: OmegaConf words that diagnostic
            raise _NotPlain() from None


def _split_groups(text: str) -> list[tuple[str, str]]:
    """`text` as ("text", ...) and ("group", the inside of a `${...}`) parts, nested groups kept whole. Raises
    _NotPlain for a `$`, `{`, `}` or backslash outside a well-formed group (escapes, stray braces)."""
    parts: list[tuple[str, str]] = []
    plain = ""
    i, n = 0, len(text)
    while i < n:
        if text.startswith("${", i):
            depth, j = 1, i + 2
            while j < n:
                if text.startswith("${", j):
                    depth, j = depth + 1, j + 2
                    continue
                if text[j] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                elif text[j] in "${\\":
                    raise _NotPlain()
                j += 1
            if depth:
                raise _NotPlain()
            if plain:
                parts.append(("text", plain))
                plain = ""
            parts.append(("group", text[i + 2:j]))
            i = j + 1
            continue
        if text[i] in "${}\\":
            raise _NotPlain()
        plain += text[i]
        i += 1
    if plain:
        parts.append(("text", plain))
    return parts


def _split_arguments(text: str) -> list[str]:
    """A resolver's arguments, split at the commas outside nested groups."""
    args, current, depth, i = [], "", 0, 0
    while i < len(text):
        if text.startswith("${", i):
            depth, current, i = depth + 1, current + "${", i + 2
            continue
        if text[i] == "}":
            depth -= 1
        if text[i] == "," and depth == 0:
            args.append(current)
            current = ""
        else:
            current += text[i]
        i += 1
    args.append(current)
    return args


def _create_config(tree: SourceTree, interpolations: list[Path], result: Resolution) -> Any:
    """An OmegaConf config of the part of the tree the interpolations can reach (building one of a whole
    dialect's defaults costs more than all the rest of a check), or None when OmegaConf cannot build it. A
    malformed interpolation is reported and stood in for; OmegaConf finds those as it builds, so a config
    without one has each string parsed once."""
    from omegaconf import OmegaConf
    from omegaconf.errors import GrammarParseError

    from rlcfg.source.tree import set_path

    data = _reachable(tree.data, interpolations)
    try:
        return OmegaConf.create(data, flags={"allow_objects": True})
    except GrammarParseError:
        pass
    # OmegaConf stops at the first malformed string and names it by a key that may not read back as a path (a
    # key holding a dot or a bracket), so every string is checked here. Each malformed one becomes MISSING
    # rather than being deleted: the items after it in a list keep their indices, and an interpolation that
    # refers to it fails as one that refers to a missing value, which is not reported a second time.
    for path in interpolations:
        if path not in result.unresolved and not _grammar_ok(tree.get(path)) and _get(data, path) is not _ABSENT:
            _report_grammar(path, tree, result)
            set_path(data, path, MISSING)
    try:
        return OmegaConf.create(data, flags={"allow_objects": True})
    except GrammarParseError as exc:  # a string this OmegaConf refuses though its parser reads it
        from rlcfg.source.tree import split_dotted

        pending = [p for p in interpolations if p not in result.unresolved]
        if not pending:
            return None
        named = split_dotted(str(getattr(exc, "full_key", None) or ""))
        culprit = named if named in pending else min(pending, key=lambda p: _order(tree, p))
        result.unresolved.update(pending)
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        result.diagnostics.append(diagnostic(
            "RLC109", dotted(culprit), f"`{tree.get(culprit)}` is not a valid interpolation ({text}); OmegaConf "
            f"stops there, so no interpolation of this config was resolved", origin=tree.origin(culprit),
            hint="an interpolation looks like `${section.key}` or `${oc.env:VAR,default}`; check the braces"))
        return None


MAX_EXPANSION = 1_000_000  # characters one interpolated string may grow to; a config value never comes close
MAX_SUBSTITUTIONS = 10_000  # references followed to resolve one value (OmegaConf does not cache them)


def _oversized(data: dict, interpolations: list[Path]) -> list[Path]:
    """Interpolated strings whose resolution would grow past MAX_EXPANSION characters or follow more than
    MAX_SUBSTITUTIONS references, found without resolving (references that nest ten deep and fan out ten wide
    would otherwise take hours). Cycles count as empty here: they are reported on their own."""
    cost: dict[Path, tuple[int, int]] = {}  # path -> (characters, references followed)
    for start in interpolations:
        stack: list[tuple[Path, bool]] = [(start, False)]
        visiting: set = set()
        while stack:
            path, children_done = stack.pop()
            if path in cost:
                continue
            value = _get(data, path)
            refs = [_absolute(dots, target, path) for dots, target in _REF.findall(value)] \
                if _is_interpolation(value) else []
            if not children_done:
                if path in visiting:
                    cost[path] = (0, 0)
                    continue
                visiting.add(path)
                stack.append((path, True))
                stack.extend((ref, False) for ref in refs if ref not in cost and ref not in visiting)
                continue
            visiting.discard(path)
            own = len(value) if isinstance(value, str) else 0 if value is _ABSENT or isinstance(value, (dict, list)) \
                else len(str(value))
            chars = own + sum(cost.get(ref, (0, 0))[0] for ref in refs)
            follows = len(refs) + sum(cost.get(ref, (0, 0))[1] for ref in refs)
            cost[path] = (min(chars, MAX_EXPANSION + 1), min(follows, MAX_SUBSTITUTIONS + 1))
    return [p for p in interpolations
            if cost.get(p, (0, 0))[0] > MAX_EXPANSION or cost.get(p, (0, 0))[1] > MAX_SUBSTITUTIONS]


_UNTRACKABLE = lazy(r"\$\{oc\.(select|dict|deprecated|create)\b")


def _reachable(data: dict, interpolations: list[Path]) -> dict:
    """The subtrees the interpolations refer to, followed transitively, laid out at their own paths. Falls back
    to the whole tree when a reference cannot be read off the text (oc.select takes a bare key)."""
    needed: set = set()
    stack = list(interpolations)
    while stack:
        path = stack.pop()
        if path in needed:
            continue
        needed.add(path)
        node = _get(data, path)
        for sub, value in walk(node, path):
            if not _is_interpolation(value):
                continue
            if _UNTRACKABLE.search(value):
                return copy_containers(data)
            stack.extend(_absolute(dots, target, sub) for dots, target in _REF.findall(value))
    out: dict = {}
    for path in needed:
        cut = next((i for i, part in enumerate(path) if isinstance(part, int)), len(path))
        path = path[:cut]  # a list is taken whole
        node = _get(data, path)
        if node is _ABSENT or not path:
            continue
        from rlcfg.source.tree import set_path

        set_path(out, path, copy_containers(node))
    return out


_ABSENT = object()


def _get(data: Any, path: Path) -> Any:
    node = data
    for part in path:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            return _ABSENT
    return node


def _overlap(a: Path, b: Path) -> bool:
    return a[: len(b)] == b or b[: len(a)] == a


def _failure_diagnostics(failures: dict[Path, Exception], tree: SourceTree, blocked: set) -> list[Diagnostic]:
    """One diagnostic per root cause: a cycle is reported once, at its first member in the document, and an
    interpolation that fails only because what it refers to failed (or is missing) is not reported again."""
    refs = {p: [_absolute(dots, target, p) for dots, target in _REF.findall(str(tree.get(p)))] for p in failures}
    edges = {p: [q for q in failures if any(_overlap(t, q) for t in refs[p])] for p in failures}

    def reach(start: Path) -> set:
        seen: set = set()
        stack = [start]
        while stack:
            for q in edges[stack.pop()]:
                if q not in seen:
                    seen.add(q)
                    stack.append(q)
        return seen

    reachable = {p: reach(p) for p in failures}
    out: list[Diagnostic] = []
    reported_cycles: list[set] = []
    for path, exc in failures.items():
        if path in reachable[path]:
            members = {q for q in reachable[path] if path in reachable[q]}
            if any(members == seen for seen in reported_cycles):
                continue
            reported_cycles.append(members)
            out.append(_cycle_diagnostic(sorted(members, key=lambda q: _order(tree, q)), tree, edges))
            continue
        if edges[path] or any(_overlap(t, b) for t in refs[path] for b in blocked):
            continue
        found = _resolution_diagnostic(exc, path, tree)
        if found is not None:
            out.append(found)
    return out


def _order(tree: SourceTree, path: Path) -> tuple:
    origin = tree.origin(path)
    return (origin.sort_key() if origin else (9,), dotted(path))


def _cycle_diagnostic(members: list[Path], tree: SourceTree, edges: dict[Path, list[Path]]) -> Diagnostic:
    first = members[0]
    chain = [first]
    while len(chain) <= len(members):
        step = next((q for q in edges[chain[-1]] if q in members and (q == first or q not in chain)), None)
        if step is None:
            break
        chain.append(step)
        if step == first:
            break
    name = dotted(first)
    loop = " -> ".join(f"`{dotted(p)}`" for p in chain)
    message = (f"`{name}: {tree.get(first)}` refers to itself" if len(members) == 1
               else f"`{name}: {tree.get(first)}` is part of an interpolation cycle: {loop}")
    return diagnostic("RLC108", name, message, origin=tree.origin(first),
                      related=[(dotted(p), tree.origin(p)) for p in members[1:]],
                      hint="give one of the keys in the cycle a plain value")


def _drop(tree: SourceTree, paths: set) -> None:
    # Deepest first, and within one list the last item first, so a deletion never shifts an index still to go.
    for path in sorted(paths, key=lambda p: (len(p), [(0, x) if isinstance(x, int) else (1, str(x)) for x in p]),
                       reverse=True):
        delete_path(tree.data, path)


def _select(cfg: Any, path: Path) -> Any:
    from omegaconf import DictConfig, ListConfig, OmegaConf

    node = cfg
    for part in path[:-1]:
        node = node._get_node(part)
    value = node[path[-1]]
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value


def _grammar_ok(value: str) -> bool:
    from omegaconf.errors import GrammarParseError
    from omegaconf.grammar_parser import parse

    try:
        parse(value)
        return True
    except GrammarParseError:
        return False


def _report_grammar(path: Path, tree: SourceTree, result: Resolution) -> None:
    result.unresolved.add(path)
    result.diagnostics.append(diagnostic(
        "RLC109", dotted(path), f"`{tree.get(path)}` is not a valid interpolation",
        origin=tree.origin(path),
        hint="an interpolation looks like `${section.key}` or `${oc.env:VAR,default}`; check the braces"))


def _referenced_origins(raw: Any, path: Path, tree: SourceTree) -> list[Origin]:
    if not isinstance(raw, str):
        return []
    out = []
    for dots, target in _REF.findall(raw):
        target_path = _absolute(dots, target, path)
        origin = tree.origin(target_path)
        if origin is not None:
            out.append(origin)
    return out


def _absolute(dots: str, target: str, path: Path) -> Path:
    from rlcfg.source.tree import split_dotted

    parts = split_dotted(target)
    if not dots:
        return parts
    base = path[:-1]
    if len(dots) > 1:
        base = base[: len(base) - (len(dots) - 1)]
    return base + parts


def _resolution_diagnostic(exc: Exception, path: Path, tree: SourceTree) -> Diagnostic | None:
    from omegaconf.errors import (InterpolationKeyError, InterpolationToMissingValueError,
                                  UnsupportedInterpolationType)

    raw = tree.get(path)
    name = dotted(path)
    origin = tree.origin(path)
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if isinstance(exc, InterpolationToMissingValueError):
        return None  # the missing value itself is reported once, where it belongs
    if "Environment variable" in text:
        var = re.search(r"Environment variable '([^']+)'", text)
        var_name = var.group(1) if var else "?"
        return diagnostic(
            "RLC107", name, f"`{raw}` needs the environment variable {var_name}, which is not set",
            origin=origin,
            hint=f"export {var_name}=... before running, or give a default: `${{oc.env:{var_name},/some/path}}`")
    if isinstance(exc, InterpolationKeyError):
        key = re.search(r"Interpolation key '([^']+)' not found", text)
        target = key.group(1) if key else raw
        suggestion = _suggest_key(target, tree)
        return diagnostic(
            "RLC106", name, f"`{raw}` refers to `{target}`, which does not exist",
            origin=origin, hint=f"did you mean `{suggestion}`?" if suggestion else "check the key path; interpolations use the full dotted path from the top of the config, or `${.sibling}`")
    if "Recursive interpolation" in text or "RecursionError" in text or "to parent node" in text:
        return diagnostic("RLC108", name, f"`{raw}` is part of an interpolation cycle: following it leads back to `{name}`",
                          origin=origin, hint="give one of the keys in the cycle a plain value")
    if isinstance(exc, UnsupportedInterpolationType):
        kind = re.search(r"Unsupported interpolation type (\S+)", text)
        return diagnostic("RLC109", name, f"`{raw}` uses the resolver `{kind.group(1) if kind else '?'}`, which this dialect does not have",
                          origin=origin, hint="the resolvers available everywhere are oc.env, oc.select and oc.decode")
    return diagnostic("RLC106", name, f"`{raw}` cannot be resolved: {text}", origin=origin,
                      hint="check the interpolation's key path and arguments")


def _suggest_key(target: str, tree: SourceTree) -> str | None:
    candidates = [dotted(p) for p, _ in walk(tree.data) if p and all(isinstance(x, str) for x in p)]
    match = close_matches(target, candidates, n=1, cutoff=0.75)
    return match[0] if match else None
