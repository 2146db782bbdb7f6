"""Command-line overrides, in each dialect's own grammar.

`hydra`: Hydra's override grammar, as SkyRL, RLinf, ROLL and AReaL read it: `a.b=c` changes an existing key,
`+a.b=c` adds a new one (onto an existing mapping it merges, as Hydra 1.3 does), `++a.b=c` sets it either way, `~a.b` (or `~a.b=c`) deletes it; values are Hydra
primitives, quoted strings, `[lists]` and `{mappings}`.

`dotlist`: OmegaConf's dotlist, as ChatLearn and the `skyrl` package read it: `a.b=c` only, the value read as
YAML. Neither has the `+`/`~` prefixes: ChatLearn would take them as part of the key name, the `skyrl` package
refuses `+`.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from rlcfg.diagnostics import Diagnostic, Edit, Origin, diagnostic
from rlcfg.patterns import lazy
from rlcfg.records import record
from rlcfg.source.yaml_loader import MAX_DEPTH, MAX_NUMBER_DIGITS
from rlcfg.source.tree import Layer, SourceTree, copy_containers, delete_path, dotted, drop_subtree, walk

_KEY = lazy(r"^[A-Za-z_][\w\-]*(\.[A-Za-z_0-9][\w\-]*)*$")


@record
class Override:
    op: str  # "set" (a.b=c), "add" (+a.b=c), "force" (++a.b=c), "delete" (~a.b)
    path: tuple
    value: Any
    has_value: bool
    origin: Origin


class OverrideSyntaxError(Exception):
    pass


def parse_override(text: str, index: int, grammar: str) -> tuple[Override | None, Diagnostic | None]:
    # An argument of a launch script (rlcfg.source.launch.Arg) is located where the script writes it.
    origin = Origin("override", override_index=index, override_text=str(text), file=getattr(text, "file", None),
                    line=getattr(text, "line", None), column=getattr(text, "column", None),
                    end_column=getattr(text, "end_column", None))

    def bad(message: str, hint: str) -> tuple[None, Diagnostic]:
        if len(text) > 80:  # the whole override is in the location line already; messages quote a short form
            message = message.replace(text, text[:60] + "...")
        return None, diagnostic("RLC104", "", message, origin=origin, hint=hint)

    op = "set"
    body = text
    if grammar == "hydra":
        if body.startswith("++"):
            op, body = "force", body[2:]
        elif body.startswith("+"):
            op, body = "add", body[1:]
        elif body.startswith("~"):
            op, body = "delete", body[1:]
    elif body[:1] and body[:1] in "+~":
        return bad(f"override `{text}` uses the Hydra prefix `{body[0]}`, which this loader (OmegaConf's dotlist) does "
                   "not read: it adds no key and deletes none", "write plain `key=value` for a key the config has")
    key, eq, raw = body.partition("=")
    key = key.strip()
    if not eq and op != "delete":
        return bad(f"override `{text}` has no `=`", "write overrides as `section.key=value`")
    if "@" in key and grammar == "hydra":
        return bad(f"override `{text}` selects a config group (`@`), which rlcfg does not compose from the command line",
                   "edit the config's defaults list instead")
    if not _KEY.match(key):
        return bad(f"override `{text}`: `{key}` is not a dotted key name",
                   "keys are names joined by dots, for example `trainer.policy.optimizer_config.lr`")
    path = tuple(key.split("."))
    if len(path) > MAX_DEPTH:
        return bad(f"override `{text[:60]}...`: the key is nested more than {MAX_DEPTH} levels deep",
                   "keys are a few names joined by dots")
    if op == "delete" and not eq:
        return Override(op, path, None, False, origin), None
    try:
        value = parse_hydra_value(raw) if grammar == "hydra" else parse_yaml_value(raw)
    except OverrideSyntaxError as exc:
        if exc.args[1:] == ("sweep",) and "(" in raw:
            _, problem = bad(f"override `{text}`: Hydra's override grammar reads the commas in `{raw.strip()}` as "
                             "separating values, not as part of one string", _sweep_hint(text, body, raw))
            quoted = f"{text[: len(text) - len(body)]}{key}='{raw.strip()}'"
            if "'" not in raw:
                problem.edits = [Edit(key, raw.strip(), None, origin, quoted, in_file=False)]
            return None, problem
        if exc.args[1:] == ("sweep",):
            return bad(f"override `{text}`: {exc.args[0]}", _sweep_hint(text, body, raw))
        return bad(f"override `{text}`: {exc}", "quote values that contain `,`, `[`, `]`, `{`, `}`, `=` or spaces: key='a value'")
    return Override(op, path, value, True, origin), None


def _sweep_hint(text: str, body: str, raw: str) -> str:
    """How to pass a value with a comma outside brackets as one string (ROLL's `list(range(0,8))` must be one):
    quoted for Hydra, and the whole override quoted again for the shell, which strips one level of quotes."""
    prefix = text[: len(text) - len(body)]
    key = body.partition("=")[0].strip()
    as_string = f"{prefix}{key}='{raw.strip()}'" if "'" not in raw else f'{prefix}{key}="{raw.strip()}"'
    shell = '"' if "'" in as_string.partition("=")[2][:1] else "'"
    typed = f"{shell}{as_string}{shell}"
    if "(" in raw:
        return f"quote the value to pass it as one string, and the whole override for the shell: {typed}"
    return f"to pass one string instead, quote the value, and the whole override for the shell: {typed}"


def parse_yaml_value(raw: str) -> Any:
    """A dotlist value, read the way OmegaConf reads it (as a YAML document)."""
    import yaml
    from omegaconf._yaml import get_yaml_loader

    if raw == "":
        return ""
    try:
        value = yaml.load(raw, Loader=get_yaml_loader())
    except yaml.YAMLError as exc:
        raise OverrideSyntaxError(f"the value is not valid YAML ({getattr(exc, 'problem', None) or exc})") from None
    except RecursionError:
        raise OverrideSyntaxError(f"the value is nested more than {MAX_DEPTH} levels deep") from None
    except ValueError:  # Python's limit on the digits of an integer
        raise OverrideSyntaxError(f"the value holds a number longer than {MAX_NUMBER_DIGITS} digits") from None
    if _depth(value) > MAX_DEPTH:
        raise OverrideSyntaxError(f"the value is nested more than {MAX_DEPTH} levels deep")
    return value


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 0)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((child, depth + 1) for child in children)
    return deepest


# ---- Hydra values -------------------------------------------------------------------------------------------

_INT = lazy(r"^[+-]?\d(_?\d)*$")
_FLOAT = lazy(r"^[+-]?((\d(_?\d)*)?\.\d(_?\d)*([eE][+-]?\d+)?|\d(_?\d)*\.?([eE][+-]?\d+)|\d(_?\d)*\.)$")
_SPECIAL_FLOATS = {"inf": float("inf"), "+inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}


def hydra_primitive(token: str) -> Any:
    text = token.strip()
    lower = text.lower()
    if lower == "null":
        return None
    if lower in ("true", "false"):
        return lower == "true"
    if _INT.match(text):
        if sum(c.isdigit() for c in text) > MAX_NUMBER_DIGITS:
            raise OverrideSyntaxError(f"`{text[:20]}...` has more than {MAX_NUMBER_DIGITS} digits, more than Python "
                                      "(and so Hydra) reads as a number")
        return int(text.replace("_", ""))
    if _FLOAT.match(text):
        return float(text.replace("_", ""))
    if lower in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[lower]
    return text


class _HydraValueParser:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0
        self.depth = 0

    def error(self, message: str) -> OverrideSyntaxError:
        return OverrideSyntaxError(f"{message} at character {self.pos + 1} of `{self.text}`")

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_ws(self) -> None:
        while self.peek() in (" ", "\t") and self.peek():
            self.pos += 1

    def parse(self) -> Any:
        self.skip_ws()
        if not self.text.strip():
            return ""
        value = self.element()
        self.skip_ws()
        if self.peek() == ",":
            raise OverrideSyntaxError(
                f"`{self.text}` is a sweep (several values separated by commas); rlcfg checks one config at a time, "
                f"so write a list as `[{self.text}]`", "sweep")
        if self.pos != len(self.text):
            raise self.error(f"unexpected `{self.peek()}`")
        return value

    def element(self) -> Any:
        self.skip_ws()
        c = self.peek()
        if c in "[{" and c:
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise self.error(f"the value is nested more than {MAX_DEPTH} levels deep")
            try:
                return self.sequence() if c == "[" else self.mapping()
            finally:
                self.depth -= 1
        if c in ("'", '"'):
            return self.quoted()
        return self.primitive()

    def quoted(self) -> str:
        quote = self.peek()
        self.pos += 1
        out = []
        while True:
            c = self.peek()
            if not c:
                raise self.error(f"unterminated {quote}quoted string")
            if c == "\\" and self.pos + 1 < len(self.text) and self.text[self.pos + 1] in (quote, "\\"):
                out.append(self.text[self.pos + 1])
                self.pos += 2
                continue
            self.pos += 1
            if c == quote:
                return "".join(out)
            out.append(c)

    def primitive(self, stop_at_colon: bool = False) -> Any:
        start = self.pos
        depth = 0
        while self.pos < len(self.text):
            c = self.text[self.pos]
            if c == "$" and self.text[self.pos + 1:self.pos + 2] == "{":
                depth += 1
                self.pos += 2
                continue
            if c == "}" and depth:
                depth -= 1
                self.pos += 1
                continue
            if not depth and (c in ",]}[{'\"" or (c == ":" and stop_at_colon)):
                break
            self.pos += 1
        if depth:
            raise self.error("unclosed `${`")
        token = self.text[start:self.pos]
        if not token.strip():
            raise self.error("expected a value")
        return hydra_primitive(token)

    def sequence(self) -> list:
        self.pos += 1
        items: list = []
        self.skip_ws()
        if self.peek() == "]":
            self.pos += 1
            return items
        while True:
            items.append(self.element())
            self.skip_ws()
            c = self.peek()
            self.pos += 1
            if c == "]":
                return items
            if c != ",":
                self.pos -= 1
                raise self.error("expected `,` or `]`")

    def mapping(self) -> dict:
        self.pos += 1
        out: dict = {}
        self.skip_ws()
        if self.peek() == "}":
            self.pos += 1
            return out
        while True:
            self.skip_ws()
            key = self.quoted() if self.peek() in ("'", '"') else str(self.primitive(stop_at_colon=True)).strip()
            self.skip_ws()
            if self.peek() != ":":
                raise self.error("expected `:` after a mapping key")
            self.pos += 1
            out[key] = self.element()
            self.skip_ws()
            c = self.peek()
            self.pos += 1
            if c == "}":
                return out
            if c != ",":
                self.pos -= 1
                raise self.error("expected `,` or `}`")


def parse_hydra_value(raw: str) -> Any:
    return _HydraValueParser(raw).parse()


# ---- applying -----------------------------------------------------------------------------------------------


@record
class AppliedOverrides:
    diagnostics: list[Diagnostic]
    created: dict[tuple, Override]  # paths a plain `a.b=c` created although Hydra would want `+a.b=c`
    added: dict[tuple, Override] = field(default_factory=dict)  # paths the user added on purpose (`+a.b=c`, `++a.b=c`)
    deleted: dict[tuple, Override] = field(default_factory=dict)  # paths removed with `~a.b`


def apply_overrides(tree: SourceTree, overrides: list[Override], grammar: str) -> AppliedOverrides:
    diagnostics: list[Diagnostic] = []
    created: dict[tuple, Override] = {}
    added: dict[tuple, Override] = {}
    deleted: dict[tuple, Override] = {}
    for override in overrides:
        path = override.path
        exists = tree.has(path)
        name = dotted(path)
        if override.op == "delete":
            if not exists:
                diagnostics.append(diagnostic(
                    "RLC105", name, f"`~{name}` deletes a key that the config does not have",
                    origin=override.origin, hint="check the key's spelling with `rlcfg validate FILE --explain KEY`"))
                continue
            if override.has_value and tree.get(path) != override.value:
                diagnostics.append(diagnostic(
                    "RLC105", name,
                    f"`~{name}={override.value}` deletes the key only if its value is {override.value!r}, but it is {tree.get(path)!r}",
                    origin=override.origin, hint=f"write `~{name}` to delete it whatever its value"))
                continue
            delete_path(tree.data, path)
            drop_subtree(tree.values, path)
            drop_subtree(tree.keys, path)
            deleted[path] = override
            continue
        if override.op == "add" and exists and isinstance(tree.get(path), dict) and isinstance(override.value, dict):
            # Hydra 1.3 merges `+a={...}` into an existing mapping `a` instead of refusing it.
            for sub, leaf in _mapping_leaves(override.value, path):
                if not tree.has(sub):
                    added[sub] = override
                _set_with_origin(tree, sub, copy_containers(leaf), override.origin)
            continue
        if override.op == "add" and exists:
            diagnostics.append(diagnostic(
                "RLC105", name, f"`+{name}` adds a key, but `{name}` already exists (value {tree.get(path)!r})",
                origin=override.origin, hint=f"write `{name}=...` to change an existing key"))
            continue
        parent = tree.get(path[:-1]) if len(path) > 1 else tree.data
        if parent is not None and not isinstance(parent, dict):
            diagnostics.append(diagnostic(
                "RLC105", name, f"cannot set `{name}`: `{dotted(path[:-1])}` is {type(parent).__name__}, not a mapping",
                origin=override.origin, hint=f"override `{dotted(path[:-1])}` itself"))
            continue
        if override.op == "set" and not exists and grammar == "hydra":
            created[path] = override
        if override.op in ("add", "force") and not exists:
            added[path] = override
        _set_with_origin(tree, path, override.value, override.origin)
    return AppliedOverrides(diagnostics, created, added, deleted)


def _mapping_leaves(node: Any, path: tuple) -> Any:
    """(path, value) of every non-mapping value (or empty mapping) below a mapping; lists count as values."""
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from _mapping_leaves(value, path + (key,))
    else:
        yield path, node


def _set_with_origin(tree: SourceTree, path: tuple, value: Any, origin: Origin) -> None:
    from rlcfg.source.tree import set_path

    set_path(tree.data, path, value)
    for i in range(1, len(path)):
        tree.values.setdefault(path[:i], origin)
    drop_subtree(tree.values, path)
    for sub, _ in walk(value, path):
        tree.values[sub] = origin
    tree.keys[path] = origin
    tree.history.setdefault(path, []).append(Layer(origin, value))
