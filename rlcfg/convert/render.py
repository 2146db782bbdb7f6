"""The converted config as a user would write it: keys in the order of the target's schema (which is the order of
its reference page), the target's defaults left out, and a header naming the source and every loss."""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from rlcfg.convert.common import TITLES
from rlcfg.convert.compare import same

_PLAIN = re.compile(r"^[A-Za-z_/.][A-Za-z0-9_./+:,@-]*$")
# Words a YAML 1.1 loader (PyYAML, under OmegaConf and Hydra) reads as something other than a string.
_RESERVED = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "none", "~"}


def _spec(dialect: str) -> Any:
    from rlcfg import schema

    return schema.load(dialect)


def ordered(dialect: str, tree: dict) -> dict:
    """`tree` with every mapping's keys in the order its schema section declares them; keys of open mappings
    (a ROLL `rewards` domain, say) keep the emitter's order."""
    from rlcfg.schema.base import key_of, section_at

    root = _spec(dialect).root(tree)

    def walk(node: Any, path: tuple) -> Any:
        if not isinstance(node, dict):
            return node
        model = section_at(root, path) if path else root
        order = [key_of(n, f) for n, f in model.model_fields.items()] if model is not None else []
        rank = {key: i for i, key in enumerate(order)}
        keys = sorted(node, key=lambda k: (rank.get(k, len(rank)), list(node).index(k)))
        return {k: walk(node[k], path + (k,)) for k in keys}

    return walk(tree, ())


def prune_defaults(dialect: str, tree: dict, checked: Any) -> dict:
    """`tree` without the leaves that equal the target's documented default (interpolated defaults are kept:
    what they resolve to depends on other keys)."""
    spec = _spec(dialect)
    defaults = spec.defaults(spec.root(tree), checked.release)

    def walk(node: Any, default: Any) -> Any:
        if isinstance(node, dict):
            out = {}
            for key, value in node.items():
                inner = default.get(key, _NO_DEFAULT) if isinstance(default, dict) else _NO_DEFAULT
                kept = walk(value, inner)
                if kept is not _DROP:
                    out[key] = kept
            return out if out or not isinstance(default, dict) else _DROP
        if default is _NO_DEFAULT or (isinstance(default, str) and "${" in default) or default == "???":
            return node
        return _DROP if same(node, default) and type(node) is type(default) or (node is None and default is None) \
            else node

    pruned = walk(tree, defaults)
    return pruned if isinstance(pruned, dict) else {}


_NO_DEFAULT = object()
_DROP = object()


def scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        # PyYAML (YAML 1.1) reads `1e-06` as a string; `1.0e-06` is a float everywhere.
        if "e" in text and "." not in text.split("e")[0]:
            mantissa, exponent = text.split("e")
            text = f"{mantissa}.0e{exponent}"
        return text
    text = str(value)
    if _PLAIN.match(text) and text.lower() not in _RESERVED and not _numeric(text):
        return text
    return json.dumps(text)


def _numeric(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def dump(tree: dict, indent: int = 0) -> str:
    lines: list[str] = []
    _dump_mapping(tree, indent, lines)
    return "\n".join(lines) + "\n"


def _dump_mapping(node: dict, indent: int, lines: list[str]) -> None:
    pad = " " * indent
    for key, value in node.items():
        name = scalar(key)
        if isinstance(value, dict) and value:
            lines.append(f"{pad}{name}:")
            _dump_mapping(value, indent + 2, lines)
        elif isinstance(value, dict):
            lines.append(f"{pad}{name}: {{}}")
        elif isinstance(value, (list, tuple)) and any(isinstance(v, (dict, list, tuple)) for v in value):
            lines.append(f"{pad}{name}:")
            for item in value:
                if isinstance(item, dict):
                    body: list[str] = []
                    _dump_mapping(item, indent + 4, body)
                    lines.append(f"{pad}  - {body[0].lstrip()}")
                    lines.extend(body[1:])
                else:
                    lines.append(f"{pad}  - {_flow(item)}")
        elif isinstance(value, (list, tuple)):
            lines.append(f"{pad}{name}: {_flow(value)}")
        else:
            lines.append(f"{pad}{name}: {scalar(value)}")


def _flow(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{scalar(k)}: {_flow(v)}" for k, v in value.items()) + "}"
    return scalar(value)


@dataclass(frozen=True)
class Header:
    """What the comment lines at the top of a converted config say."""

    source_dialect: str
    source_file: str
    losses: Sequence[Any] = ()
    notes: Sequence[str] = ()
    written_for: str | None = None  # the target release's label ("AReaL 1.0")
    pin: str | None = None  # the flag that has rlcfg judge the file by that release, where its keys point to another
    read_as: str | None = None  # the release the source was judged by ("AReaL 0.3")

    def lines(self, target: str, hint: str | None = None) -> list[str]:
        written_for = self.written_for or TITLES[target]
        head = [f"# Converted by `rlcfg convert` from {self.source_file}, read as "
                f"{self.read_as or TITLES.get(self.source_dialect, self.source_dialect)}, to {written_for}.",
                "# It lowers to the same rlcfg Experiment as the source"
                + (", except where listed below." if self.losses else ".")]
        if hint:
            head.append(f"# {hint}")
        if self.pin:
            head.append(f"# Its keys alone do not tell the release: check it with `rlcfg validate FILE {self.pin}`.")
        if self.losses:
            head.append(f"# Not expressible in {written_for} ({len(self.losses)}), what it changes first: [kind] "
                        f"{TITLES.get(self.source_dialect, self.source_dialect)} key: source value -> key here: this "
                        "config's value (a side without a key for it names rlcfg's field)")
            head.extend(f"#   {loss.describe()}" for loss in self.losses)
        if self.notes:
            head.append("# Chosen by rlcfg, since the source does not say (check them):")
            head.extend(f"#   {note}" for note in self.notes)
        return head


def text(tree: dict, target: str, header: Header, schema_line: str | None = None) -> str:
    """The converted config file with its header."""
    head = [f"# yaml-language-server: $schema={schema_line or f'{target}.schema.json'}", *header.lines(target)]
    return "\n".join(head) + "\n" + dump(tree)


def command_line(tree: dict, command: str, spelled: Callable[[str], str] = str) -> str:
    """The launch script of a release that reads its config from the command line only: `command`, then one
    `key=value` per leaf of `tree` (its keys as `spelled` names them; each value as the YAML that OmegaConf's
    dotlist reads back to it), then the script's own arguments, passed on."""
    from rlcfg.convert.keys import flat

    words = [shlex.quote(f"{spelled(key)}={_flow(value)}") for key, value in flat(tree).items()]
    return " \\\n  ".join([command, *words, '"$@"']) + "\n"


def command_script(tree: dict, command: str, spelled: Callable[[str], str], target: str, header: Header) -> str:
    """The converted config as a launch script: a shell script whose one command starts the run."""
    head = ["#!/usr/bin/env bash", *header.lines(target, hint="This release reads its config from the command line "
                                                             "only. Check it with `rlcfg validate FILE`; start the "
                                                             "run with `bash FILE`, key=value arguments after it "
                                                             "override these.")]
    return "\n".join(head) + "\n" + command_line(tree, command, spelled)
