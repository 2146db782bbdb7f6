"""Read a YAML file into a `SourceTree`, keeping file:line:col for every key and value.

ruamel.yaml's composer gives the node tree with positions; scalars are then typed the way OmegaConf reads
them (YAML 1.1 booleans such as `yes`, `1e-6` as a float, dates left as strings), since every dialect's
framework loads its YAML through OmegaConf. Duplicate keys, tabs and other syntax errors become diagnostics.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path as FsPath
from typing import Any

from rlcfg.diagnostics import Diagnostic, Origin, diagnostic
from rlcfg.patterns import lazy
from rlcfg.source.tree import Layer, Path, SourceTree

MAX_NODES = 200_000  # far above any real config; stops alias bombs
MAX_DEPTH = 100  # nesting levels; real configs use fewer than ten, and deeper trees exhaust recursive tools
MAX_CONFIG_BYTES = 2 * 1024 * 1024  # real configs are kilobytes; this bounds what a device or a pipe can make us read
MAX_ENTRIES = 50_000  # lines and list items; parsing that many takes seconds, and real configs have hundreds
MAX_NUMBER_DIGITS = 4300  # Python's (and so OmegaConf's) limit for reading an integer from text


class TooLongNumber(str):
    """A plain scalar of more digits than Python reads as a number: the loader reports it once, and later stages
    treat the key as already in error."""


class UsageError(Exception):
    """A problem with how rlcfg was called (missing file, unreadable file): exit code 2."""


def _composer() -> Any:
    """ruamel's C parser when it is installed (about seven times faster), its pure-Python one otherwise; both
    give every node its start and end marks. Composing only: typing scalars is done the OmegaConf way below."""
    from ruamel.yaml import YAML

    try:
        composer = YAML(typ="safe", pure=False)
    except Exception:  # no compiled parser for this platform
        return YAML(typ="rt")
    composer.Resolver = _merge_keys_resolver()
    return composer


@lru_cache(maxsize=None)
def _merge_keys_resolver() -> type:
    """A resolver that tags only what _Builder reads from a tag: a plain `<<` (a merge key). Every other node gets
    its kind's default tag. rlcfg types plain scalars itself (type_plain_scalar), and ruamel's own resolver, which
    looks up the document's YAML version for every scalar, took half the time of composing a document."""
    from ruamel.yaml.nodes import ScalarNode
    from ruamel.yaml.resolver import VersionedResolver
    from ruamel.yaml.tag import Tag

    merge = Tag(suffix="tag:yaml.org,2002:merge")

    class MergeKeysResolver(VersionedResolver):
        def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
            if kind is ScalarNode:
                return merge if implicit[0] and value == "<<" else self.DEFAULT_SCALAR_TAG
            return super().resolve(kind, value, implicit)

    return MergeKeysResolver


# YAML 1.1's implicit types, as OmegaConf's loader resolves plain scalars: PyYAML's safe resolvers without
# timestamps (a date stays a string), plus OmegaConf's float form that needs no dot (`1e-6`). Written out here so
# that reading a file imports neither OmegaConf nor PyYAML; a test holds it to OmegaConf's own loader.
_BOOLS = {word: value for words, value in (("yes true on", True), ("no false off", False))
          for base in words.split() for word in (base, base.capitalize(), base.upper())}
_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_FLOAT = lazy(r"""[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
    |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN)""", re.X)
_INT = lazy(r"""[-+]?0b[0-1_]+
    |[-+]?0[0-7_]+
    |[-+]?(?:0|[1-9][0-9_]*)
    |[-+]?0x[0-9a-fA-F_]+
    |[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+""", re.X)
_EXPONENT_FLOAT = lazy(r"""[-+]?[0-9]+(?:_[0-9]+)*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*[eE][-+]?[0-9]+
    |\.[0-9]+(?:_[0-9]+)*(?:[eE][-+][0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN)""", re.X)
_NUMBER_START = frozenset("-+0123456789.")
# Every character the three patterns above can match: a text with any other (a path, `./output`) is no number.
_NUMBER_CHARACTERS = frozenset("0123456789+-._:eEbxabcdefABCDEFinIN")


class UnreadableScalar(ValueError):
    """A plain `<<` or `=` as a value: YAML 1.1 gives them tags (merge, value) that OmegaConf cannot construct."""


def _sexagesimal(text: str, kind: type) -> Any:
    total = kind(0)
    for part in text.split(":"):
        total = total * 60 + kind(part)
    return total


def _to_int(text: str) -> int:
    sign, digits = (-1, text[1:]) if text[0] == "-" else (1, text.lstrip("+"))
    digits = digits.replace("_", "")
    if digits == "0":
        return 0
    if digits.startswith("0b"):
        return sign * int(digits[2:], 2)
    if digits.startswith("0x"):
        return sign * int(digits[2:], 16)
    if digits.startswith("0"):
        return sign * int(digits, 8)
    if ":" in digits:
        return sign * _sexagesimal(digits, int)
    return sign * int(digits)


def _to_float(text: str) -> float:
    sign, digits = (-1.0, text[1:]) if text[0] == "-" else (1.0, text.lstrip("+"))
    digits = digits.replace("_", "").lower()
    if digits == ".inf":
        return sign * float("inf")
    if digits == ".nan":
        return float("nan")
    if ":" in digits:
        return sign * _sexagesimal(digits, float)
    return sign * float(digits)


def type_plain_scalar(text: str) -> Any:
    """The value OmegaConf's YAML loader gives an unquoted scalar (a TooLongNumber where it would fail on the
    number of digits, as the framework's loader would)."""
    if text in _NULLS:
        return None
    if text in _BOOLS:
        return _BOOLS[text]
    if text in ("<<", "="):
        raise UnreadableScalar(text)
    # `-`, `+` and `.` alone are text, and configs write them (a placeholder, a folder): answered here, they do not
    # have the grammar's patterns compiled only to say so.
    if text[0] not in _NUMBER_START or not _NUMBER_CHARACTERS.issuperset(text) or text in (".", "+", "-"):
        return text
    try:
        number = _common_number(text)
        return number if number is not None else _number_by_grammar(text)
    except ValueError:
        if sum(c.isdigit() for c in text) > MAX_NUMBER_DIGITS:
            return TooLongNumber(text)
        raise


def _common_number(text: str) -> int | float | None:
    """The numbers configs write, `8`, `-1`, `0.5`, `1e-6`, `3.0e+2`, read without the grammar's patterns (compiling
    them is a millisecond of a check); None for any other text, which _number_by_grammar reads. tests/source holds
    type_plain_scalar to OmegaConf's own loader, these forms and their near misses included."""
    body = text[1:] if text[0] in "+-" else text
    if not body.isascii() or "_" in body or ":" in body:
        return None
    if body.isdigit():  # YAML 1.1 reads a leading zero as octal: the grammar's case
        return int(text) if body == "0" or body[0] != "0" else None
    mantissa, e, exponent = body.replace("E", "e").partition("e")
    if e and not (exponent[1:] if exponent[:1] in "+-" else exponent).isdigit():
        return None
    whole, dot, fraction = mantissa.partition(".")
    if not whole.isdigit() or (fraction and not fraction.isdigit()) or not (dot or e):
        return None
    return float(text)


def _number_by_grammar(text: str) -> Any:
    if _FLOAT.fullmatch(text):
        return _to_float(text)
    if _INT.fullmatch(text):
        return _to_int(text)
    if _EXPONENT_FLOAT.fullmatch(text):
        return _to_float(text)
    return text


def read_text(path: str) -> str:
    p = FsPath(path)
    if not p.exists():
        raise UsageError(f"{path}: no such file")
    if p.is_dir():
        raise UsageError(f"{path}: is a directory, not a config file")
    try:
        with open(p, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)  # devices and pipes never end: read no more than the limit
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise UsageError(f"{path}: is larger than {MAX_CONFIG_BYTES // (1024 * 1024)} MiB, the most rlcfg reads as a "
                         "config (real configs are kilobytes); is it the right file?")
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
        if len(path) > MAX_DEPTH:
            raise _TooDeep(self.origin(node))
        origin = self.origin(node)
        self.tree.values[path] = origin
        if isinstance(node, MappingNode):
            value = self.mapping(node, path)
        elif isinstance(node, SequenceNode):
            value = [self.build(item, path + (index,)) for index, item in enumerate(node.value)]
        else:
            value = self.scalar(node, path) if not node.style else node.value
            if isinstance(value, TooLongNumber):
                self.diagnostics.append(diagnostic(
                    "RLC200", _dotted(path), f"`{_dotted(path)}`: a number of {len(value)} characters is longer than "
                    f"YAML loaders read (Python reads integers of up to {MAX_NUMBER_DIGITS} digits)", origin=origin,
                    hint="write a number of a sensible size; the framework's loader would stop on this one"))
        self.tree.history[path] = [Layer(origin, value)]
        return value

    def scalar(self, node: Any, path: Path) -> Any:
        try:
            return type_plain_scalar(node.value)
        except UnreadableScalar:
            self.diagnostics.append(diagnostic(
                "RLC100", _dotted(path), f"a plain `{node.value}` is a YAML 1.1 special value that the framework's "
                "loader (OmegaConf) cannot read", origin=self.origin(node),
                hint=f"quote it: '{node.value}'"))
            return node.value

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
            key = key_node.value if key_node.style else self.scalar(key_node, path)
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


class _TooDeep(Exception):
    def __init__(self, origin: Origin):
        self.origin = origin


def _dotted(path: Path) -> str:
    from rlcfg.source.tree import dotted

    return dotted(path)


def load_yaml(text: str, filename: str) -> tuple[SourceTree | None, list[Diagnostic]]:
    """Parse YAML text. Returns the tree (None when nothing usable was read) and the diagnostics."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    if text.startswith("\ufeff"):
        text = text[1:]
    entries = text.count("\n") + text.count(",")
    if entries > MAX_ENTRIES:
        return None, [diagnostic("RLC100", "", f"the file has about {entries:,} lines and list items, more than the "
                                 f"{MAX_ENTRIES:,} rlcfg reads as a config (real configs have hundreds)",
                                 origin=Origin("file", file=filename, line=1, column=1),
                                 hint="is it the right file? Generated data belongs in a data file the config names")]
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
                                 hint="start from one of rlcfg's starter configs (the templates/ folder of its source), or see the keys with `rlcfg docs`")]
    builder = _Builder(filename)
    if not isinstance(root, MappingNode):
        kind = "a list" if root.__class__.__name__ == "SequenceNode" else f"the scalar `{str(root.value)[:40]}`"
        return None, [diagnostic("RLC103", "", f"the document is {kind}; a config is a YAML mapping of sections",
                                 origin=builder.origin(root),
                                 hint="a config looks like `section:` followed by indented `key: value` lines")]
    try:
        data = builder.build(root, ())
    except _TooDeep as exc:
        return None, [diagnostic("RLC100", "", f"the YAML is nested more than {MAX_DEPTH} levels deep, far beyond "
                                 "any config", origin=exc.origin, hint="check the indentation, or the file's origin")]
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
