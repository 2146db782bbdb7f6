"""A plain config tree whose every value remembers where it came from."""

from __future__ import annotations

import copy
from dataclasses import field
from typing import Any, Iterator

from rlcfg.diagnostics import WRITTEN_BY_USER, Origin
from rlcfg.patterns import lazy
from rlcfg.records import record

Path = tuple  # of str (mapping keys) and int (list indices)
MISSING = "???"  # OmegaConf's mark for a value the user must give


def dotted(path: Path) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def split_dotted(text: str) -> Path:
    """`a.b[0].c` -> ("a", "b", 0, "c")."""
    parts: list = []
    for chunk in text.split("."):
        while "[" in chunk and chunk.endswith("]"):
            head, _, rest = chunk.partition("[")
            if head:
                parts.append(head)
            index = rest[:-1].split("][")
            parts.extend(int(i) if i.lstrip("-").isdigit() else i for i in index)
            chunk = ""
        if chunk:
            parts.append(chunk)
    return tuple(parts)


@record
class Layer:
    """One value a key took on its way to the final config: a default, the file, then each override."""

    origin: Origin
    value: Any


@record
class SourceTree:
    data: dict
    values: dict[Path, Origin] = field(default_factory=dict)
    keys: dict[Path, Origin] = field(default_factory=dict)
    history: dict[Path, list[Layer]] = field(default_factory=dict)

    def origin(self, path: Path) -> Origin | None:
        """The origin of the value at `path`, or of its nearest ancestor that has one."""
        path = tuple(path)
        while True:
            if path in self.values:
                return self.values[path]
            if not path:
                return None
            path = path[:-1]

    def key_origin(self, path: Path) -> Origin | None:
        path = tuple(path)
        return self.keys.get(path) or self.origin(path)

    def get(self, path: Path, default: Any = None) -> Any:
        node: Any = self.data
        for part in path:
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and isinstance(part, int) and -len(node) <= part < len(node):
                node = node[part]
            else:
                return default
        return node

    def written(self, path: Path) -> bool:
        """Whether the user wrote the value at `path` (in a file, an override or the environment), rather than
        leaving it at its default or having rlcfg derive it."""
        origin = self.values.get(path)
        return origin is not None and origin.kind in WRITTEN_BY_USER

    def written_paths(self) -> Iterator[Path]:
        """Every path whose value the user wrote, in the tree's order."""
        return (path for path, origin in self.values.items()
                if origin is not None and origin.kind in WRITTEN_BY_USER)

    def has(self, path: Path) -> bool:
        sentinel = object()
        return self.get(path, sentinel) is not sentinel

    def copy(self) -> "SourceTree":
        return SourceTree(copy.deepcopy(self.data), dict(self.values), dict(self.keys),
                          {k: list(v) for k, v in self.history.items()})


def walk(node: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every (path, value) of a plain tree, parents before children."""
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from walk(value, path + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from walk(value, path + (index,))


_NODE_REFERENCE = lazy(r"\$\{\s*([A-Za-z_][\w\-]*(?:\.[\w\-]+)*)\s*\}")


def interpolation_targets(data: Any) -> set[tuple]:
    """The absolute paths that `${a.b}` interpolations anywhere in the tree refer to (relative ones are skipped)."""
    found: set[tuple] = set()
    for _path, value in walk(data):
        if isinstance(value, str) and "${" in value:
            for match in _NODE_REFERENCE.finditer(value):
                found.add(tuple(match.group(1).split(".")))
    return found


def copy_containers(value: Any) -> Any:
    """A copy of the tree's dicts and lists; the scalars they hold are shared (they are immutable)."""
    if isinstance(value, dict):
        return {k: copy_containers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_containers(v) for v in value]
    return value


def set_path(data: dict, path: Path, value: Any) -> None:
    node: Any = data
    for part in path[:-1]:
        if isinstance(node, dict):
            if not isinstance(node.get(part), (dict, list)):
                node[part] = {}
            node = node[part]
        else:
            node = node[part]
    node[path[-1]] = value


def delete_path(data: dict, path: Path) -> bool:
    node: Any = data
    for part in path[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return False
    try:
        del node[path[-1]]
        return True
    except (KeyError, IndexError, TypeError):
        return False


def drop_subtree(mapping: dict[Path, Any], path: Path) -> None:
    n = len(path)
    for key in [k for k in mapping if k[:n] == path]:
        del mapping[key]
