"""Hydra defaults lists: build one config tree out of a primary file and the fragments it names.

    defaults:
      - model/qwen2.5@actor.model          # the file model/qwen2.5.yaml, placed at actor.model
      - training_backend/megatron@actor    # merged into actor
      - {hybrid_engines@actor.fsdp_config: fsdp}
      - override hydra/job_logging: stdout # Hydra's own settings: not part of the job's config
      - _self_                             # where the primary file's own keys go in the merge order

A fragment `group/name` is the file `group/name.yaml`, looked for next to the config, then in each folder of
the search path (`hydra.searchpath` entries written `file://...`). Without a package (`@pkg`) it lands at its
group (`model/x` at `model`), or where its own `# @package` header says. Fragments merge in list order,
later ones over earlier ones (mappings key by key, anything else replaced); `_self_` marks where the file's
own keys go, and when it is absent they go last (Hydra 1.1 and later). Fragments may have defaults lists of
their own. Every value keeps the file:line:col it was read from.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path as FsPath
from typing import Any, Mapping, Sequence

from rlcfg.diagnostics import Diagnostic, close_matches, diagnostic
from rlcfg.patterns import lazy
from rlcfg.source.tree import Layer, Path, SourceTree, copy_containers, drop_subtree, dotted, walk
from rlcfg.source.yaml_loader import load_yaml

MAX_DEPTH = 16  # fragments including fragments; far beyond real configs, stops include cycles early
_PACKAGE_HEADER = lazy(r"^\s*#\s*@package\s+(\S+)\s*$")
_ENV = lazy(r"\$\{oc\.env:([A-Za-z_][A-Za-z0-9_]*)(?:,([^}]*))?\}")


@dataclass
class Entry:
    """One item of a defaults list."""

    group: str | None  # "model" for `model/qwen2.5`; None for a file beside the config or `_self_`
    name: str | None  # "qwen2.5"; None for `_self_` or a group deselected with `null`
    package: str | None  # from `@pkg`, or None (the default package)
    index: int  # position in the list, for locations
    self_marker: bool = False
    override: bool = False
    optional: bool = False

    @property
    def option(self) -> str:
        return f"{self.group}/{self.name}" if self.group else str(self.name)


def searchpath_of(tree: SourceTree, env: Mapping[str, str] | None = None) -> tuple[list[str], list[str]]:
    """Folders named by `hydra.searchpath` (`file://` entries), and the entries that could not be used
    (an unset environment variable, a `pkg://` path) for hints."""
    hydra = tree.data.get("hydra") if isinstance(tree.data, dict) else None
    entries = hydra.get("searchpath") if isinstance(hydra, dict) else None
    if isinstance(entries, str):
        entries = [entries]
    env = os.environ if env is None else env
    folders, skipped = [], []
    for entry in entries or []:
        if not isinstance(entry, str):
            continue
        text, unset = _expand_env(entry, env)
        if unset or not text.startswith("file://"):
            skipped.append(entry)
            continue
        folders.append(text[len("file://"):])
    return folders, skipped


def _expand_env(text: str, env: Mapping[str, str]) -> tuple[str, bool]:
    unset = False

    def replace(match: re.Match) -> str:
        nonlocal unset
        name, default = match.group(1), match.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default.strip().strip("'\"")
        unset = True
        return ""

    return _ENV.sub(replace, text), unset


def compose(tree: SourceTree, base_dir: str, search_path: Sequence[str] = (),
            unusable_search_path: Sequence[str] = ()) -> tuple[SourceTree, list[Diagnostic]]:
    """Resolve the tree's `defaults:` list. Returns the composed tree (without `defaults`) and diagnostics."""
    composer = _Composer(base_dir, list(search_path), list(unusable_search_path))
    result = composer.compose(tree, base_dir, depth=0, stack=())
    return result, composer.diagnostics


class _Composer:
    def __init__(self, base_dir: str, search_path: list[str], unusable: list[str]):
        self.base_dir = base_dir
        self.search_path = search_path
        self.unusable = unusable
        self.diagnostics: list[Diagnostic] = []

    def compose(self, tree: SourceTree, here: str, depth: int, stack: tuple) -> SourceTree:
        data = tree.data if isinstance(tree.data, dict) else {}
        if "defaults" not in data:
            return tree
        raw = data["defaults"]
        own = _without_defaults(tree)
        if not isinstance(raw, list):
            self.error(tree, ("defaults",), "`defaults` must be a list of config names, "
                       f"got {type(raw).__name__}", "write `defaults: [model/name@package, _self_]`")
            return own
        entries = [e for e in (self.entry(item, i, tree) for i, item in enumerate(raw)) if e is not None]
        entries = _apply_overrides(entries)
        if not any(e.self_marker for e in entries):
            entries.append(Entry(None, None, None, -1, self_marker=True))
        result = SourceTree({})
        for entry in entries:
            if entry.self_marker:
                merge_into(result, own, ())
                continue
            if entry.name is None:
                continue
            fragment = self.load(entry, tree, here, depth, stack)
            if fragment is None:
                continue
            fragment_tree, header_package = fragment
            package = entry.package if entry.package is not None else (
                header_package if header_package is not None else (entry.group or "").replace("/", "."))
            prefix = _package_path(package)
            merge_into(result, fragment_tree, prefix)
        return result

    def entry(self, item: Any, index: int, tree: SourceTree) -> Entry | None:
        path = ("defaults", index)
        if isinstance(item, str):
            text = item.strip()
            if text == "_self_":
                return Entry(None, None, None, index, self_marker=True)
            optional = text.startswith("optional ")
            if optional:
                text = text[len("optional "):].strip()
            option, _, package = text.partition("@")
            if not option or (package == "" and "@" in text):
                return self.bad(tree, path, item)
            group, _, name = option.rpartition("/")
            return Entry(group or None, name, package or None, index, optional=optional)
        if isinstance(item, dict) and len(item) == 1:
            key, value = next(iter(item.items()))
            text = str(key).strip()
            override = text.startswith("override ")
            optional = text.startswith("optional ")
            if override or optional:
                text = text.split(None, 1)[1] if len(text.split(None, 1)) > 1 else ""
            group, _, package = text.partition("@")
            if not group or (value is not None and not isinstance(value, str)):
                return self.bad(tree, path, item)
            if group == "hydra" or group.startswith("hydra/"):
                return None  # Hydra's own logging/launcher settings: not part of the job's config
            return Entry(group, value, package or None, index, override=override, optional=optional)
        return self.bad(tree, path, item)

    def bad(self, tree: SourceTree, path: Path, item: Any) -> None:
        self.error(tree, path, f"defaults list entry `{item}` is not a config name",
                   "write `group/name`, `group/name@package`, `{group@package: name}` or `_self_`")
        return None

    def error(self, tree: SourceTree, path: Path, message: str, hint: str) -> None:
        self.diagnostics.append(diagnostic("RLC112", dotted(path), message, origin=tree.origin(path), hint=hint))

    def folders(self, here: str) -> list[str]:
        out = []
        for folder in [here, self.base_dir, *self.search_path]:
            if folder not in out:
                out.append(folder)
        return out

    def load(self, entry: Entry, tree: SourceTree, here: str, depth: int,
             stack: tuple) -> tuple[SourceTree, str | None] | None:
        relative = FsPath(*(entry.group.split("/") if entry.group else ()), f"{entry.name}.yaml")
        folders = self.folders(here)
        found = next((FsPath(f) / relative for f in folders if (FsPath(f) / relative).is_file()), None)
        path = ("defaults", entry.index)
        if found is None:
            if entry.optional:
                return None
            self.error(tree, path, f"defaults list entry `{entry.option}` names `{relative.as_posix()}`, which is "
                       f"not in {_folders_text(folders)}", self.missing_hint(entry, folders))
            return None
        key = str(found.resolve())
        if key in stack:
            self.error(tree, path, f"defaults list entry `{entry.option}` includes itself (through "
                       f"{' -> '.join(FsPath(s).name for s in stack)})", "remove the entry that closes the cycle")
            return None
        if depth >= MAX_DEPTH:
            self.error(tree, path, f"defaults lists nest more than {MAX_DEPTH} levels deep at `{entry.option}`",
                       "flatten the fragments")
            return None
        try:
            text = found.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self.error(tree, path, f"defaults list entry `{entry.option}`: `{found}` cannot be read ({exc})",
                       "check the file's permissions and encoding")
            return None
        name = str(found)
        if not text.strip() or all(line.strip().startswith("#") or not line.strip() for line in text.splitlines()):
            fragment = SourceTree({})
        else:
            fragment, problems = load_yaml(text, name)
            self.diagnostics.extend(problems)
            if fragment is None:
                return None
        fragment = self.compose(fragment, str(found.parent), depth + 1, stack + (key,))
        return fragment, _header_package(text)

    def missing_hint(self, entry: Entry, folders: list[str]) -> str:
        choices: list[str] = []
        for folder in folders:
            group_dir = FsPath(folder, *(entry.group.split("/") if entry.group else ()))
            if group_dir.is_dir():
                choices.extend(sorted(p.stem for p in group_dir.glob("*.yaml")))
        close = close_matches(str(entry.name), choices, n=1, cutoff=0.6)
        if close:
            hint = f"did you mean `{entry.group + '/' if entry.group else ''}{close[0]}`?"
        elif choices:
            hint = f"the `{entry.group or '.'}` folder has: {', '.join(dict.fromkeys(choices))}"
        else:
            hint = "create the file, fix the name, or add its folder to `hydra.searchpath` (file://...)"
        if self.unusable:
            hint += f"; the search path entry `{self.unusable[0]}` was not used (an unset environment variable?)"
        return hint


def _folders_text(folders: list[str]) -> str:
    shown = [f"`{f}`" for f in folders]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + f" or {shown[-1]}"


def _header_package(text: str) -> str | None:
    for line in text.splitlines()[:10]:
        match = _PACKAGE_HEADER.match(line)
        if match:
            return match.group(1)
        if line.strip() and not line.strip().startswith("#"):
            break
    return None


def _package_path(package: str) -> Path:
    # `_here_` is the package of the config that holds the defaults list; fragments are composed relative to
    # where they land, so for the composer it is the root of the file being composed
    if package in ("", "_global_", "_here_"):
        return ()
    if package.startswith("_global_."):
        package = package[len("_global_."):]
    return tuple(part for part in package.split(".") if part)


def _apply_overrides(entries: list[Entry]) -> list[Entry]:
    """`override group: name` replaces the choice an earlier entry made for that group (in place)."""
    out: list[Entry] = []
    for entry in entries:
        if entry.override:
            earlier = next((i for i, e in enumerate(out) if e.group == entry.group and not e.self_marker
                            and (entry.package is None or e.package == entry.package)), None)
            if earlier is not None:
                previous = out[earlier]
                out[earlier] = Entry(previous.group, entry.name, previous.package, entry.index)
                continue
        out.append(entry)
    return out


def _without_defaults(tree: SourceTree) -> SourceTree:
    own = tree.copy()
    own.data.pop("defaults", None)
    for mapping in (own.values, own.keys, own.history):
        drop_subtree(mapping, ("defaults",))
    return own


def merge_into(target: SourceTree, source: SourceTree, prefix: Path) -> None:
    """Merge `source` (a tree read from one file) into `target` at `prefix`, keeping every value's origin."""
    node: Any = target.data
    for i, part in enumerate(prefix):
        if not isinstance(node.get(part), dict):
            drop_subtree(target.values, prefix[: i + 1])
            node[part] = {}
        node = node[part]
    if source.data is None:
        return
    parent = node
    _merge(parent, source.data, prefix, target, source)
    for path, origin in source.keys.items():
        if path:
            target.keys[prefix + path] = origin


def _merge(into: dict, data: dict, prefix: Path, target: SourceTree, source: SourceTree,
           relative: Path = ()) -> None:
    if relative in source.values:
        target.values[prefix + relative] = source.values[relative]
    for key, value in data.items():
        sub = relative + (key,)
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value, prefix, target, source, sub)
            continue
        drop_subtree(target.values, prefix + sub)
        into[key] = copy_containers(value)
        for path, _ in walk(value, sub):
            if path in source.values:
                target.values[prefix + path] = source.values[path]
            layers = source.history.get(path)
            if layers is not None:
                earlier = target.history.get(prefix + path, []) if path == sub else []
                target.history[prefix + path] = earlier + [Layer(l.origin, l.value) for l in layers]
