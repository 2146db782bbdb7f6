"""ROLL's `device_mapping` language, parsed by a grammar and never evaluated.

ROLL hands the string to Python's `eval()` with full builtins, so whatever expression it holds runs while
the config is being built. rlcfg accepts only the forms ROLL's documentation and examples use, and reads
them with a small recursive-descent parser that can build nothing but a list of integers:

    mapping  := expr EOF
    expr     := "list" "(" (range | list) ")" | range | list
    range    := "range" "(" int ["," int ["," int]] [","] ")"
    list     := "[" [int ("," int)* [","]] "]"
    int      := ["-"] digit+

Names other than `list` and `range`, attribute access, other calls, arithmetic, strings and everything
else are errors that say where the parser stopped and which forms it accepts.
"""

from __future__ import annotations

from rlcfg.records import record

ACCEPTED_FORMS = "`list(range(0,8))`, `list(range(0,16,2))`, `[0, 1, 2, 3]` or a YAML list"
MAX_DEVICES = 65536  # far beyond any cluster; stops `range(0,10**12)`-sized lists from being built
_MAX_TEXT = 10000


class DeviceMappingError(ValueError):
    """A string that is not in the device_mapping language; `column` is 1-based within the string."""

    def __init__(self, message: str, column: int | None = None):
        super().__init__(message)
        self.message = message
        self.column = column


@record(frozen=True)
class _Token:
    kind: str  # "name", "int", "punct", "bad" (a character outside the language; text is the message), "end"
    text: str
    column: int  # 1-based


_PUNCT = "()[],"


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in " \t\r\n":
            i += 1
        elif ch in _PUNCT:
            tokens.append(_Token("punct", ch, i + 1))
            i += 1
        elif ch.isascii() and (ch.isdigit() or (ch == "-" and i + 1 < len(text) and text[i + 1].isascii()
                                                and text[i + 1].isdigit())):
            start = i
            i += 1
            while i < len(text) and text[i].isascii() and text[i].isdigit():
                i += 1
            tokens.append(_Token("int", text[start:i], start + 1))
        elif ch.isascii() and (ch.isalpha() or ch == "_"):
            start = i
            while i < len(text) and text[i].isascii() and (text[i].isalnum() or text[i] == "_"):
                i += 1
            tokens.append(_Token("name", text[start:i], start + 1))
        else:
            # Reported only when the parser reaches it, so that the first problem in reading order is named.
            tokens.append(_Token("bad", _describe_stray(ch, text, i), i + 1))
            break
    tokens.append(_Token("end", "", len(text) + 1))
    return tokens


def _describe_stray(ch: str, text: str, index: int) -> str:
    if ch == ".":
        return f"attribute access (`.` at column {index + 1}) is not allowed in a device_mapping"
    if ch in "+-*/%@&|^~<>=":
        return f"arithmetic (`{ch}` at column {index + 1}) is not allowed in a device_mapping"
    if ch in "'\"":
        return f"a string literal (column {index + 1}) is not allowed in a device_mapping"
    return f"unexpected character {ch!r} at column {index + 1}"


class _Parser:
    def __init__(self, text: str):
        self.tokens = _tokenize(text)
        self.pos = 0

    @property
    def tok(self) -> _Token:
        self._check_bad()
        return self.tokens[self.pos]

    def _check_bad(self) -> None:
        if self.tokens[self.pos].kind == "bad":
            raise DeviceMappingError(self.tokens[self.pos].text, self.tokens[self.pos].column)

    def advance(self) -> _Token:
        tok = self.tokens[self.pos]
        if tok.kind != "end":
            self.pos += 1
        return tok

    def expect(self, text: str, context: str) -> None:
        tok = self.tok
        if tok.kind == "punct" and tok.text == text:
            self.advance()
            return
        found = "the end of the string" if tok.kind == "end" else f"`{tok.text}`"
        raise DeviceMappingError(f"expected `{text}` {context} at column {tok.column}, found {found}", tok.column)

    def mapping(self) -> tuple[int, ...]:
        if self.tok.kind == "end":
            raise DeviceMappingError("device_mapping is empty", 1)
        ids = self.expr(top=True)
        if self.tok.kind != "end":
            raise DeviceMappingError(
                f"unexpected `{self.tok.text}` at column {self.tok.column} after a complete device_mapping",
                self.tok.column)
        return ids

    def expr(self, top: bool) -> tuple[int, ...]:
        tok = self.tok
        if tok.kind == "punct" and tok.text == "[":
            return self.literal_list()
        if tok.kind == "name":
            if tok.text == "range":
                return self.range_call()
            if tok.text == "list" and top:
                self.advance()
                self.expect("(", "after `list`")
                if self.tok.kind == "name" and self.tok.text == "range":
                    ids = self.range_call()
                elif self.tok.kind == "punct" and self.tok.text == "[":
                    ids = self.literal_list()
                elif self.tok.kind == "name":
                    self._reject_name(self.tok)
                else:
                    found = "the end of the string" if self.tok.kind == "end" else f"`{self.tok.text}`"
                    raise DeviceMappingError(
                        f"`list(...)` must hold `range(...)` or `[...]`, found {found} at column {self.tok.column}",
                        self.tok.column)
                self.expect(")", "to close `list(`")
                return ids
            self._reject_name(tok)
        found = "the end of the string" if tok.kind == "end" else f"`{tok.text}`"
        raise DeviceMappingError(f"expected `list(...)`, `range(...)` or `[...]` at column {tok.column}, found {found}",
                                 tok.column)

    def _reject_name(self, tok: _Token) -> None:
        following = self.tokens[self.pos + 1] if self.pos + 1 < len(self.tokens) else None
        if following is not None and following.kind == "punct" and following.text == "(":
            raise DeviceMappingError(
                f"calling `{tok.text}` is not allowed in a device_mapping (only `list` and `range`)", tok.column)
        raise DeviceMappingError(f"the name `{tok.text}` is not allowed in a device_mapping (only `list` and `range`)",
                                 tok.column)

    def integer(self, context: str) -> int:
        tok = self.tok
        if tok.kind == "int":
            if len(tok.text.lstrip("-")) > 12:
                raise DeviceMappingError(f"the number at column {tok.column} is too large for a GPU id", tok.column)
            self.advance()
            return int(tok.text)
        if tok.kind == "name":
            self._reject_name(tok)
        found = "the end of the string" if tok.kind == "end" else f"`{tok.text}`"
        raise DeviceMappingError(f"expected an integer {context} at column {tok.column}, found {found}", tok.column)

    def range_call(self) -> tuple[int, ...]:
        start_tok = self.advance()  # "range"
        self.expect("(", "after `range`")
        args = [self.integer("in `range(...)`")]
        while self.tok.kind == "punct" and self.tok.text == ",":
            self.advance()
            if self.tok.kind == "punct" and self.tok.text == ")":
                break
            if len(args) == 3:
                raise DeviceMappingError(f"`range` takes at most 3 arguments (column {self.tok.column})",
                                         self.tok.column)
            args.append(self.integer("in `range(...)`"))
        self.expect(")", "to close `range(`")
        if len(args) == 1:
            start, stop, step = 0, args[0], 1
        else:
            start, stop, step = args[0], args[1], args[2] if len(args) == 3 else 1
        if step == 0:
            raise DeviceMappingError("the step of `range` must not be 0", start_tok.column)
        span = range(start, stop, step)
        if len(span) > MAX_DEVICES:
            raise DeviceMappingError(f"`range` asks for {len(span)} GPUs, more than any cluster has", start_tok.column)
        return tuple(span)

    def literal_list(self) -> tuple[int, ...]:
        self.advance()  # "["
        ids: list[int] = []
        while not (self.tok.kind == "punct" and self.tok.text == "]"):
            ids.append(self.integer("in the list"))
            if len(ids) > MAX_DEVICES:
                raise DeviceMappingError("the list names more GPUs than any cluster has", self.tok.column)
            if self.tok.kind == "punct" and self.tok.text == ",":
                self.advance()
                continue
            if not (self.tok.kind == "punct" and self.tok.text == "]"):
                found = "the end of the string" if self.tok.kind == "end" else f"`{self.tok.text}`"
                raise DeviceMappingError(f"expected `,` or `]` at column {self.tok.column}, found {found}",
                                         self.tok.column)
        self.advance()
        return tuple(ids)


def parse_device_mapping(text: str) -> tuple[int, ...]:
    """The GPU ids a device_mapping string names, in order. Raises DeviceMappingError for anything else.

    Only the syntax is checked here; whether the ids make sense (non-negative, distinct, on the cluster) is
    for the rules, which can name the keys involved."""
    if not isinstance(text, str):
        raise DeviceMappingError(f"device_mapping must be a string or a list of integers, got {type(text).__name__}")
    if len(text) > _MAX_TEXT:
        raise DeviceMappingError("device_mapping is implausibly long")
    return _Parser(text).mapping()


def format_device_mapping(ids: tuple[int, ...] | list[int]) -> str:
    """The canonical text for a list of ids: a `list(range(...))` where the ids form one, else a literal list."""
    ids = tuple(ids)
    if len(ids) >= 2:
        step = ids[1] - ids[0]
        if step != 0 and all(b - a == step for a, b in zip(ids, ids[1:])):
            stop = ids[-1] + step
            if step == 1:
                return f"list(range({ids[0]},{stop}))"
            return f"list(range({ids[0]},{stop},{step}))"
    return "[" + ", ".join(str(i) for i in ids) + "]"


def describe_ids(ids: tuple[int, ...] | list[int] | set[int]) -> str:
    """Ids as compact ranges for messages: `0-7, 12, 14-15`."""
    ordered = sorted(set(ids))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ", ".join(parts)
