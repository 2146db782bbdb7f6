"""Read a YAML file into a `SourceTree`, keeping file:line:col for every key and value.

ruamel.yaml's composer gives the node tree with positions; scalars are then typed the way OmegaConf reads
them (YAML 1.1 booleans such as `yes`, `1e-6` as a float, dates left as strings), since every dialect's
framework loads its YAML through OmegaConf. Duplicate keys, tabs and other syntax errors become diagnostics.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path as FsPath
from typing import Any

from rlcfg.diagnostics import Diagnostic, Origin, diagnostic
from rlcfg.source.tree import Layer, Path, SourceTree

MAX_NODES = 200_000  # far above any real config; stops alias bombs


class UsageError(Exception):
    """A problem with how rlcfg was called (missing file, unreadable file): exit code 2."""


def _composer() -> Any:
    """ruamel's C parser when it is installed (about seven times faster), its pure-Python one otherwise; both
    give every node its start and end marks. Composing only: typing scalars is done the OmegaConf way below."""
    from ruamel.yaml import YAML

    try:
        return YAML(typ="safe", pure=False)
    except Exception:  # no compiled parser for this platform
        return YAML(typ="rt")


@lru_cache(maxsize=1)
def _omegaconf_scalar_loader() -> Any:
    from omegaconf._yaml import get_yaml_loader

    return get_yaml_loader()("")


def type_plain_scalar(text: str) -> Any:
    """The value OmegaConf's YAML loader gives an unquoted scalar."""
    import yaml

    loader = _omegaconf_scalar_loader()
    tag = loader.resolve(yaml.ScalarNode, text, (True, False))
    return loader.construct_object(yaml.ScalarNode(tag, text))


def read_text(path: str) -> str:
    p = FsPath(path)
    if not p.exists():
        raise UsageError(f"{path}: no such file")
    if p.is_dir():
        raise UsageError(f"{path}: is a directory, not a config file")
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if b"\x00" in raw:
        raise UsageError(f"{path}: is a binary file, not YAML text")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: is not UTF-8 text (byte {exc.start} is 0x{raw[exc.start]:02x})") from None


class _Builder:
    def __init__(self, filename: str):
        self.filename = filename
        self.tree = SourceTree({})
        self.diagnostics: list[Diagnostic] = []
        self.nodes = 0

    def origin(self, node: Any) -> Origin:
        start, end = node.start_mark, node.end_mark
        end_column = end.column + 1 if end.line == start.line else None
        return Origin("file", file=self.filename, line=start.line + 1, column=start.column + 1, end_column=end_column)

    def build(self, node: Any, path: Path) -> Any:
        from ruamel.yaml.nodes import MappingNode, SequenceNode

        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _TooBig()
        origin = self.origin(node)
        self.tree.values[path] = origin
        if isinstance(node, MappingNode):
            value = self.mapping(node, path)
        elif isinstance(node, SequenceNode):
            value = [self.build(item, path + (index,)) for index, item in enumerate(node.value)]
        else:
            value = type_plain_scalar(node.value) if not node.style else node.value
        self.tree.history[path] = [Layer(origin, value)]
        return value

    def mapping(self, node: Any, path: Path) -> dict:
        from ruamel.yaml.nodes import MappingNode, ScalarNode

        out: dict = {}
        merged: dict = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                sources = value_node.value if not isinstance(value_node, MappingNode) else [value_node]
                for source in sources:
                    if isinstance(source, MappingNode):
                        for k, v in self.mapping(source, path).items():
                            merged.setdefault(k, v)
                continue
            if not isinstance(key_node, ScalarNode):
                self.diagnostics.append(diagnostic(
                    "RLC100", _dotted(path), "a mapping key must be a plain name, not a list or a mapping",
                    origin=self.origin(key_node), hint="write the key as a plain word, for example `num_gpu:`"))
                continue
            key = key_node.value if key_node.style else type_plain_scalar(key_node.value)
            key = key if isinstance(key, str) else str(key)
            key_origin = self.origin(key_node)
            child = path + (key,)
            if key in out:
                first = self.tree.keys[child]
                self.diagnostics.append(diagnostic(
                    "RLC101", _dotted(child),
                    f"key `{key}` appears twice in the same mapping (first at line {first.line})",
                    origin=key_origin, related=[(_dotted(child), first)],
                    hint="delete one of the two; YAML keeps neither reliably and frameworks disagree on which wins"))
                continue
            self.tree.keys[child] = key_origin
            out[key] = self.build(value_node, child)
        for k, v in merged.items():
            out.setdefault(k, v)
        return out


class _TooBig(Exception):
    pass


def _dotted(path: Path) -> str:
    from rlcfg.source.tree import dotted

    return dotted(path)


def load_yaml(text: str, filename: str) -> tuple[SourceTree | None, list[Diagnostic]]:
    """Parse YAML text. Returns the tree (None when nothing usable was read) and the diagnostics."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        try:
            root = _composer().compose(text)
        except MarkedYAMLError:
            # The pure-Python parser words its errors better (it names a tab, for one): ask it again.
            root = YAML(typ="rt").compose(text)
    except MarkedYAMLError as exc:
        return None, [_syntax_diagnostic(exc, filename, text)]
    except YAMLError as exc:
        return None, [diagnostic("RLC100", "", f"the file is not valid YAML: {exc}", origin=Origin("file", file=filename, line=1, column=1))]
    except RecursionError:
        return None, [diagnostic("RLC100", "", "the YAML is nested too deeply to be a config",
                                 origin=Origin("file", file=filename, line=1, column=1))]

    from ruamel.yaml.nodes import MappingNode, ScalarNode

    if root is None or (isinstance(root, ScalarNode) and not root.style and root.value == ""):
        return None, [diagnostic("RLC103", "", "the file is empty; a config is a YAML mapping of sections",
                                 origin=Origin("file", file=filename, line=1, column=1),
                                 hint="start from a template: `rlcfg templates` lists them")]
    builder = _Builder(filename)
    if not isinstance(root, MappingNode):
        kind = "a list" if root.__class__.__name__ == "SequenceNode" else f"the scalar `{str(root.value)[:40]}`"
        return None, [diagnostic("RLC103", "", f"the document is {kind}; a config is a YAML mapping of sections",
                                 origin=builder.origin(root),
                                 hint="a config looks like `section:` followed by indented `key: value` lines")]
    try:
        data = builder.build(root, ())
    except (_TooBig, RecursionError):
        return None, [diagnostic("RLC100", "", "the YAML expands to too many nodes (aliases?) to be a config",
                                 origin=Origin("file", file=filename, line=1, column=1))]
    builder.tree.data = data
    return builder.tree, builder.diagnostics


_SYNTAX_HINTS = (
    ("'\\t'", "YAML forbids tabs for indentation; indent with spaces"),
    ("expected ',' or ']'", "a `[` list is not closed; add the missing `]`"),
    ("expected ',' or '}'", "a `{` mapping is not closed; add the missing `}`"),
    ("found unexpected end of stream", "a quoted string or a bracket is not closed"),
    ("mapping values are not allowed", "a value contains `: `; quote it, or fix the indentation of this line"),
    ("could not find expected ':'", "a key is missing its `:`, or a line is indented wrongly"),
    ("found undefined alias", "the `*alias` refers to no `&anchor` above it"),
    ("found another document", "a config is one YAML document; remove the `---` line and merge the documents"),
)


def _syntax_diagnostic(exc: Any, filename: str, text: str) -> Diagnostic:
    mark = exc.problem_mark or exc.context_mark
    problem = (exc.problem or exc.context or "invalid YAML").strip()
    context = (exc.context or "").strip()
    message = f"invalid YAML: {problem}" + (f" ({context})" if context and context != problem else "")
    if context.startswith(("while parsing a flow", "while scanning a quoted")) and exc.context_mark and mark:
        # The fix belongs where the bracket or quote was opened, not where the parser gave up.
        message += f"; the parser gave up at line {mark.line + 1}, column {mark.column + 1}"
        mark = exc.context_mark
    hint = next((h for needle, h in _SYNTAX_HINTS if needle in problem), "check the indentation and brackets near this line")
    origin = Origin("file", file=filename, line=mark.line + 1, column=mark.column + 1) if mark else \
        Origin("file", file=filename, line=1, column=1)
    return diagnostic("RLC100", "", message, origin=origin, hint=hint)
