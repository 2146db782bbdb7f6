"""Launch scripts and command lines, read as the framework's entrypoint would receive them, never run.

Most SkyRL and ChatLearn users configure a run in a shell script: a few variables, then one call of the framework's
entrypoint with dozens of `key=value` arguments. `rlcfg validate run_gsm8k.sh` reads such a script and checks what
that call would load: the config file it names (or the release's base config, for an entrypoint that takes none)
with its arguments as overrides, each located at its place in the script.

The reading is a small shell word scanner, not a shell:
- quotes, backslash escapes and line continuations as the shell treats them; `#` comments; a command ends at a
  newline, `;`, `&&`, `||` or `|`, and a redirection (`> log`, `2>&1`) is no argument;
- variables: `NAME=value`, `export NAME=value`, and the `${NAME:=value}` / `${NAME:-value}` defaults a script gives
  itself; `$0` is the script's path; the caller's environment (the `env` given) supplies the rest, as it would for the
  shell; `$((...))` integer arithmetic; `$(dirname ...)`, `$(basename ...)`, `$(pwd)`, `$(realpath ...)` and
  `$(cd DIR && pwd)` on values already known;
- `source FILE`; `if` branches and `[ ... ] &&` guards whose tests follow from known values; a command kept in a
  variable and run as `${CMD}`, `eval` or `bash -c`; `echo` and `printf` run nothing;
- what the script exports is the entrypoint's environment too (`${oc.env:X}` in its config reads it);
- the script is read as called with the words given to rlcfg after it: bare words (no `=`) are its positional
  arguments, `$1`, `$2`, ...; `"$@"` (or `"${@:N}"` past them) forwards the rest, which the key=value overrides
  given to rlcfg after the script play;
- anything else (another command's output, a variable neither the script nor the environment sets, a branch whose
  test cannot be decided) is not guessed: an argument that depends on one is left out of the check and reported
  with what it depends on (RLC120). A script that launches more than once is checked at its first call (RLC121).

The entrypoints each dialect's users call are declared in its registry entry (`Launcher`).
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import field
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

from rlcfg.diagnostics import Diagnostic, Origin, diagnostic
from rlcfg.patterns import lazy
from rlcfg.records import record
from rlcfg.source.yaml_loader import UsageError


class NoEntrypoint(UsageError):
    """The script calls no entrypoint rlcfg knows (as opposed to calling one in a way rlcfg cannot read)."""


SCRIPT_SUFFIXES = (".sh", ".bash")
# Words that start a command line given after `--` (`rlcfg validate -- python -m ... k=v`).
COMMAND_STARTS = ("python", "python3", "uv", "torchrun", "deepspeed", "accelerate", "ray", "bash", "sh", "env")
_NAME = lazy(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = lazy(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=(.*)", re.S)
_DECLARING = ("export", "local", "readonly", "declare", "typeset")
_PRINTING = ("echo", "printf", ":")
_BARE_EXPANSION = lazy(r"\$(?:[A-Za-z_][A-Za-z0-9_]*|\{[A-Za-z_][A-Za-z0-9_]*\})")  # `$CMD`, `${CMD}`, unquoted
_UNKNOWN = "\x00"  # stands in an expanded word for a value that cannot be known


class Arg(str):
    """A command-line argument that came from a launch script: the text the entrypoint receives, and where the
    script writes it (rlcfg.source.overrides locates its diagnostics there)."""

    file: str
    line: int
    column: int
    end_column: int

    def __new__(cls, text: str, file: str, line: int, column: int, end_column: int) -> "Arg":
        made = super().__new__(cls, text)
        made.file, made.line, made.column, made.end_column = file, line, column, end_column
        return made


@record(frozen=True)
class Launcher:
    """How one of a dialect's entrypoints is called.

    module: a regular expression for the module of `python -m MODULE`; script: one for the path of `python SCRIPT`.
    config_file: the option that names the config file (`--config-file`, `--config`); config_dir and config_name:
    Hydra's pair (`--config-path DIR --config-name NAME`, DIR relative to the entrypoint's own file, as Hydra reads
    it). With none of them, the entrypoint loads the release's base config. `unclaimed` is the message for an
    entrypoint rlcfg does not judge; `releases`, where a dialect's releases come from more than one package, the
    ones the entrypoint's package has (SkyRL: skyrl-train's or the `skyrl` package's)."""

    name: str  # as users know the entrypoint, for messages
    module: str = ""
    script: str = ""
    config_file: tuple[str, ...] = ()
    config_dir: tuple[str, ...] = ()
    config_name: tuple[str, ...] = ()
    unclaimed: str = ""
    releases: tuple[str, ...] = ()


@record
class Word:
    text: str  # after expansion; _UNKNOWN marks what could not be known
    start: int  # offsets into the script's text
    end: int
    unknown: list[str] = field(default_factory=list)  # why: `$NAME`, `$(command)`


@record
class Launch:
    """One call of a dialect's entrypoint found in a script."""

    dialect: str
    launcher: Launcher
    line: int
    config: str | None  # the config file it loads; None: the release's base config
    arguments: list[Arg]
    diagnostics: list[Diagnostic]
    environment: dict[str, str]  # what the script exports, known in full: the entrypoint reads it (`${oc.env:X}`)
    entry: str | None = None  # the Python file the call runs, when it names one (`launcher examples/x.py`)
    module: str | None = None  # the module of `python -m MODULE`, when the call runs one
    forwards: bool = False  # the call passes the script's own arguments on ("$@")
    sources: dict[str, str] = field(default_factory=dict)  # other scripts read on the way (a script it calls)


def is_script(path: str) -> bool:
    """A launch script rather than a config file: by its suffix, or a shell's `#!` line."""
    if path.endswith(SCRIPT_SUFFIXES):
        return True
    if path.endswith((".yaml", ".yml", ".json")):
        return False
    try:
        with open(path, "rb") as f:
            first = f.read(64)
    except OSError:
        return False
    return first.startswith(b"#!") and any(shell in first.split(b"\n")[0] for shell in (b"sh", b"bash"))


def is_command(path: str, arguments: Sequence[str]) -> bool:
    """`rlcfg validate -- python -m module k=v`: the file argument is a program, not a file."""
    return not os.path.exists(path) and Path(path).name in COMMAND_STARTS and bool(arguments)


def command_text(words: Sequence[str]) -> str:
    """A command line given as arguments, as one line of shell text."""
    import shlex

    return " ".join(shlex.quote(w) for w in words)


# ---- the scanner ------------------------------------------------------------------------------------------------


class _Scanner:
    def __init__(self, text: str, script: str, env: Mapping[str, str]):
        self.text = text
        self.script = script
        self.variables: dict[str, str] = dict(env)
        # Read as the script runs when called with no arguments: rlcfg's own extra overrides stand for "$@".
        self.variables.update({"0": script, "BASH_SOURCE": script, "#": "0"})
        # Variables whose value depends on what rlcfg cannot know, with why.
        self.unknowable: dict[str, list[str]] = {}
        self.separator = ""  # what ended the last command: "\n", ";", "&&", "||", "|", "&"
        self.depth = 0  # of `source`
        self.exported: set[str] = set()  # what the script exports: the entrypoint's environment too
        self.undecided: list[str] = []  # what decides whether the command being read runs, when rlcfg cannot tell
        self.block_causes: list[str] = []  # the same, for the innermost undecided `if` or loop
        self.pos = 0

    # -- commands --

    def commands(self) -> Iterator[list[Word]]:
        """Each simple command's words, in order, with assignments applied as the script runs them.

        `if` blocks and `TEST && command` are followed as far as their tests can be decided (`[ -z "$1" ]`,
        `[ "$X" = y ]`, ...): only what the shell would run is read. Where a test cannot be decided, and in the body
        of a loop, commands are read but what they assign becomes unknown, since it depends on what runs.
        `source FILE` (`. FILE`) reads the assignments of FILE."""
        # One entry per open `if` or loop: whether its current branch runs (True, False, or None: cannot be known)
        # and whether an earlier branch already ran.
        blocks: list[list] = []
        condition: bool | None = True  # whether the command after `&&` / `||` runs
        gate_causes: list[str] = []  # what an undecided `&&` / `||` test depends on
        while self.pos < len(self.text):
            words = self._command()
            separator = self.separator
            gate, condition = condition, True
            while words and words[0].text in ("if", "elif", "else", "then", "fi", "for", "while", "until", "do",
                                              "done"):
                keyword, words = words[0].text, words[1:]
                if keyword == "if":
                    outer = self._running(blocks)
                    test = self._test(words) if outer is not False else False
                    if test is None:
                        self.block_causes = [c for w in words for c in w.unknown] or ["an `if` rlcfg cannot decide"]
                    blocks.append([test if outer is not None or test is False else None, test is True])
                    words = []
                elif keyword == "elif" and blocks:
                    block = blocks[-1]
                    test = self._test(words)
                    if test is None:
                        self.block_causes = [c for w in words for c in w.unknown] or ["an `if` rlcfg cannot decide"]
                    block[0] = False if block[1] else (None if block[0] is None and test is not False else test)
                    block[1] = block[1] or test is True
                    words = []
                elif keyword == "else" and blocks:
                    block = blocks[-1]
                    block[0] = False if block[1] else (None if block[0] is None else not block[0])
                elif keyword in ("fi", "done") and blocks:
                    blocks.pop()
                elif keyword in ("for", "while", "until"):
                    self.block_causes = [f"a `{keyword}` loop"]
                    if keyword == "for" and words:
                        self._forget(words[0].text, f"the loop variable of `for {words[0].text}`")
                    blocks.append([None if self._running(blocks) is not False else False, False])
                    words = []
            if not words:
                continue
            running = self._running(blocks)
            if gate is False or running is False:
                condition = gate if separator == "&&" else True
                continue
            known = running is True and gate is True
            self.undecided = [] if known else (gate_causes if gate is None else self.block_causes)
            if words[0].text in ("[", "[[", "test"):
                test = self._test(words)
                if separator in ("&&", "||"):
                    condition = None if test is None else (test if separator == "&&" else not test)
                    gate_causes = [c for w in words for c in w.unknown] or ["a test rlcfg cannot decide"]
                continue
            if words[0].text in _PRINTING:
                continue  # `echo $CMD` shows a command line without running it
            if words[0].text in ("source", ".") and len(words) == 2:
                self._source(words[1], known)
                continue
            words = self._assignments(words, known=known)
            if words:
                yield from self._reparsed(words)

    def _reparsed(self, words: list[Word]) -> Iterator[list[Word]]:
        """A command kept in a variable and run as `${CMD}`, `eval "$CMD"` or `bash -c "$CMD"`: the words the shell
        then runs. An unquoted expansion is split at blanks, as the shell splits it; eval and `-c` read the string
        as a script. Each word is located where the command is run."""
        split: list[Word] = []
        for word in words:
            raw = self.text[word.start:word.end]
            if _BARE_EXPANSION.fullmatch(raw) and any(c in word.text for c in " \t\n"):
                # a piece is unknown only where the value is (a log folder named by `$(date)`, say)
                split.extend(Word(piece, word.start, word.end, word.unknown if _UNKNOWN in piece else [])
                             for piece in word.text.split())
            else:
                split.append(word)
        head = [w.text for w in split[:2]]
        if head[:1] == ["eval"] or (head[:1] in (["bash"], ["sh"]) and head[1:2] == ["-c"] and len(split) > 2):
            body = split[1:] if head[0] == "eval" else split[2:3]
            if self.depth >= 4:
                yield split
                return
            causes = [c for w in body for c in w.unknown]
            for command in self._nested(" ".join(w.text for w in body)).commands():
                # what was unknown in the string stays unknown in the words it makes, for the same causes
                yield [Word(w.text, body[0].start, body[-1].end, w.unknown or (causes if _UNKNOWN in w.text else []))
                       for w in command]
            return
        yield split

    def _unterminated(self, offset: int, quote: str) -> None:
        """The script's own text leaves a quote open: the shell would not run it. Text the reader builds itself (a
        command substitution split at `;`) may cut a quoted string, and is read to its end as before."""
        if self.depth:
            return
        line, column = _position(self.text, offset)
        raise UsageError(f"{self.script}:{line}:{column}: the quote {quote} is never closed, so the shell stops on this "
                         "script before it runs anything; close it")

    def _nested(self, text: str) -> "_Scanner":
        """A scanner of text the script builds (an eval'd string, a sourced file, a default value, a command
        substitution) that sees and changes this one's variables, what is unknown of them, and what it exports."""
        inner = _Scanner(text, self.script, {})
        inner.variables, inner.unknowable, inner.exported = self.variables, self.unknowable, self.exported
        inner.depth = self.depth + 1
        return inner

    def known_exports(self) -> dict[str, str]:
        """What the script exports and rlcfg knows in full: the environment of what it runs."""
        return {name: self.variables[name] for name in self.exported
                if name in self.variables and _UNKNOWN not in self.variables[name]}

    def _forget(self, name: str, why: str) -> None:
        self.variables.pop(name, None)
        self.unknowable[name] = [why]

    def _source(self, word: Word, known: bool) -> None:
        """Apply the assignments of a sourced file (no entrypoint call in it is taken as the launch)."""
        if word.unknown or _UNKNOWN in word.text or self.depth >= 4:
            return
        if not known:
            return  # what it sets is then reported as unknown where it is used
        path = locate(word.text, self.script, self.variables.get("PWD"))
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return
        for _words in self._nested(text).commands():
            pass

    @staticmethod
    def _running(blocks: list[list]) -> bool | None:
        if any(block[0] is False for block in blocks):
            return False
        return None if any(block[0] is None for block in blocks) else True

    def _test(self, words: list[Word]) -> bool | None:
        """The value of `[ ... ]` / `[[ ... ]]` when it follows from known strings and integers; else None."""
        texts = [w.text for w in words]
        if any(w.unknown or _UNKNOWN in w.text for w in words):
            return None
        if len(texts) >= 2 and (texts[0], texts[-1]) in (("[", "]"), ("[[", "]]")):
            texts = texts[1:-1]
        elif texts[:1] == ["test"]:
            texts = texts[1:]
        else:
            return None
        negate = texts[:1] == ["!"]
        texts = texts[1:] if negate else texts
        result: bool | None = None
        if len(texts) == 1:
            result = texts[0] != ""
        elif len(texts) == 2 and texts[0] in ("-z", "-n"):
            result = (texts[1] == "") == (texts[0] == "-z")
        elif len(texts) == 3 and texts[1] in ("=", "==", "!="):
            result = (texts[0] == texts[2]) == (texts[1] != "!=")
        elif len(texts) == 3 and texts[1] in ("-eq", "-ne", "-gt", "-ge", "-lt", "-le"):
            try:
                left, right = int(texts[0]), int(texts[2])
            except ValueError:
                return None
            result = {"-eq": left == right, "-ne": left != right, "-gt": left > right, "-ge": left >= right,
                      "-lt": left < right, "-le": left <= right}[texts[1]]
        if result is None:
            return None
        return not result if negate else result

    def _command(self) -> list[Word]:
        words: list[Word] = []
        text = self.text
        self.separator = ""
        while self.pos < len(text):
            char = text[self.pos]
            if char == "\\" and text.startswith("\\\n", self.pos):
                self.pos += 2
            elif char in " \t\r":
                self.pos += 1
            elif char == "#":
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
            elif char in "\n;&|":
                double = text.startswith(("&&", "||", ";;"), self.pos)
                self.separator = text[self.pos:self.pos + 2] if double else char
                self.pos += 2 if double else 1
                if words:
                    return words
            elif char in "<>" or (char.isdigit() and text[self.pos + 1:self.pos + 2] in ("<", ">")):
                self._redirection()
            elif char in "(){}" and text[self.pos + 1:self.pos + 2] in (" ", "\t", "\n", ""):
                self.pos += 1  # a subshell's or a group's brackets
            else:
                words.append(self._word())
        return words

    def _redirection(self) -> None:
        """Skip `> file`, `2>&1`, `&> log`, `< input`: no argument of the command."""
        text = self.text
        while self.pos < len(text) and text[self.pos].isdigit():
            self.pos += 1
        while self.pos < len(text) and text[self.pos] in "<>":
            self.pos += 1
        if text[self.pos:self.pos + 1] == "&":  # onto another descriptor: `2>&1`, `>&-`
            self.pos += 1
            while self.pos < len(text) and (text[self.pos].isdigit() or text[self.pos] == "-"):
                self.pos += 1
            return
        while self.pos < len(text) and text[self.pos] in " \t":
            self.pos += 1
        if self.pos < len(text) and text[self.pos] not in "\n;|&":
            self._word()  # the target file

    def _word(self) -> Word:
        text = self.text
        start = self.pos
        out: list[str] = []
        unknown: list[str] = []
        while self.pos < len(text):
            char = text[self.pos]
            if char in " \t\r\n;|&<>":
                break
            if char == "\\":
                if text.startswith("\\\n", self.pos):
                    self.pos += 2
                    continue
                out.append(text[self.pos + 1:self.pos + 2])
                self.pos += 2
            elif char == "'":
                end = text.find("'", self.pos + 1)
                if end < 0:
                    self._unterminated(self.pos, "'")
                    end = len(text)
                out.append(text[self.pos + 1:end])
                self.pos = end + 1
            elif char == '"':
                opened = self.pos
                self.pos += 1
                if _closing_quote(text, self.pos) < 0:
                    self._unterminated(opened, '"')
                while self.pos < len(text) and text[self.pos] != '"':
                    if text[self.pos] == "\\" and text[self.pos + 1:self.pos + 2] in ('"', "\\", "$", "`", "\n"):
                        out.append("" if text[self.pos + 1] == "\n" else text[self.pos + 1])
                        self.pos += 2
                    elif text[self.pos] in "$`":
                        out.append(self._expansion(unknown))
                    else:
                        out.append(text[self.pos])
                        self.pos += 1
                self.pos += 1
            elif char in "$`":
                out.append(self._expansion(unknown))
            else:
                out.append(char)
                self.pos += 1
        return Word("".join(out), start, self.pos, unknown)

    # -- expansions --

    def _expansion(self, unknown: list[str]) -> str:
        text = self.text
        if text[self.pos] == "`":
            end = text.find("`", self.pos + 1)
            end = len(text) if end < 0 else end
            command = text[self.pos + 1:end]
            self.pos = end + 1
            return self._substitution(command, unknown)
        after = text[self.pos + 1:self.pos + 2]
        if text.startswith("$((", self.pos):
            end = _closing(text, self.pos + 1)
            inner = text[self.pos + 3:end - 1]
            self.pos = end + 1
            return self._arithmetic(inner, unknown)
        if after == "(":
            end = _closing(text, self.pos + 1)
            command = text[self.pos + 2:end]
            self.pos = end + 1
            return self._substitution(command, unknown)
        if after == "{":
            end = _closing(text, self.pos + 1, "{", "}")
            inner = text[self.pos + 2:end]
            self.pos = end + 1
            return self._braced(inner, unknown)
        found = _NAME.match(text, self.pos + 1)
        if found:
            self.pos = found.end()
            return self._value(found.group(), unknown)
        if after and (after.isdigit() or after in "@*#?$!-"):
            self.pos += 2
            if after in "@*":
                return "\x01"  # the script's own arguments: rlcfg's extra overrides stand for them
            return self._value(after, unknown)
        self.pos += 1
        return "$"

    def _value(self, name: str, unknown: list[str]) -> str:
        if name in self.variables:
            value = self.variables[name]
            if _UNKNOWN in value:  # known in part (a log folder named by `$(date)` inside a command line)
                unknown.extend(self.unknowable.get(name, []))
            return value
        if name.isdigit():
            return ""  # a positional argument the script is not given: unset, so empty
        if name in self.unknowable:
            unknown.extend(self.unknowable[name])  # what it was set from: the causes, not the name
            return _UNKNOWN
        unknown.append(f"${name}")
        return _UNKNOWN

    def _braced(self, inner: str, unknown: list[str]) -> str:
        if inner in ("BASH_SOURCE[0]", "BASH_SOURCE[@]"):
            return self.variables["BASH_SOURCE"]
        sliced = re.fullmatch(r"[@*](?::(\d+))?", inner)
        if sliced:  # "${@:2}": the arguments after the ones given by position, which rlcfg's overrides stand for
            if int(sliced.group(1) or 1) > int(self.variables.get("#", "0")):
                return "\x01"
            unknown.append("${" + inner + "}")
            return _UNKNOWN
        found = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*|\d+)(?:(:?)([-=+?])(.*))?", inner, re.S)
        if not found:
            unknown.append("${" + inner + "}")
            return _UNKNOWN
        name, colon, operator, word = found.groups()
        if operator is None or (name in self.unknowable and name not in self.variables):
            return self._value(name, unknown)  # set where rlcfg cannot tell: its default would be a guess
        value = self.variables.get(name)
        empty = value is None or (colon and value == "")
        if operator in "-=":
            if not empty:
                return self._value(name, unknown)
            default = self._expand_inline(word or "", unknown)
            if operator == "=" and _UNKNOWN not in default:
                self.variables[name] = default
            return default
        if operator == "+":
            return "" if empty else self._expand_inline(word or "", unknown)
        return self._value(name, unknown)  # `?`: the shell stops when it is unset

    def _expand_inline(self, text: str, unknown: list[str]) -> str:
        """A word inside an expansion (a default value), read as the shell reads it there."""
        word = self._nested(text)._word() if text else Word("", 0, 0)
        unknown.extend(word.unknown)
        return word.text

    def _arithmetic(self, inner: str, unknown: list[str]) -> str:
        def name(match: re.Match) -> str:
            value = self._value(match.group(1), unknown)
            if _UNKNOWN in value:
                return "0"
            if not value.strip().lstrip("-").isdigit():
                unknown.append(f"${match.group(1)} (`{value}`, not an integer)")
                return "0"
            return value.strip()

        before = len(unknown)
        expanded = re.sub(r"\$?\{?([A-Za-z_][A-Za-z0-9_]*)\}?", name, inner)
        if len(unknown) > before:
            return _UNKNOWN
        result = _integer_arithmetic(expanded)
        if result is None:
            unknown.append(f"$(({inner}))")
            return _UNKNOWN
        return str(result)

    def _substitution(self, command: str, unknown: list[str]) -> str:
        """The few commands whose output follows from their arguments alone; any other is not run."""
        steps = [s.strip() for s in re.split(r"&&|;", command)]
        value: str | None = None
        directory: str | None = None
        for step in steps:
            words = self._expand_inline_words(step, unknown)
            if words is None or not words:
                value = None
                break
            program, arguments = words[0], words[1:]
            if program == "cd" and len(arguments) == 1:
                directory = posixpath.normpath(posixpath.join(directory or self.variables.get("PWD", ""),
                                                              arguments[0]))
                value = ""
            elif program == "pwd" and not arguments:
                value = directory or self.variables.get("PWD")
            elif program == "dirname" and len(arguments) == 1:
                value = posixpath.dirname(arguments[0].rstrip("/")) or "."
            elif program == "basename" and len(arguments) in (1, 2):
                value = posixpath.basename(arguments[0].rstrip("/"))
                if len(arguments) == 2 and value.endswith(arguments[1]):
                    value = value[:-len(arguments[1])]
            elif program in ("realpath", "readlink") and arguments:
                value = posixpath.normpath(posixpath.join(self.variables.get("PWD", ""), arguments[-1]))
            else:
                value = None
                break
        if value is None:
            shown = " ".join(command.split())
            unknown.append(f"$({shown if len(shown) <= 40 else shown[:37] + '...'})")
            return _UNKNOWN
        return value

    def _expand_inline_words(self, text: str, unknown: list[str]) -> list[str] | None:
        words = self._nested(text)._command()
        seen: list[str] = []
        for word in words:
            seen.extend(word.unknown)
        if seen or any(_UNKNOWN in w.text for w in words):
            return None
        return [w.text for w in words]

    # -- assignments --

    def _assignments(self, words: list[Word], known: bool = True) -> list[Word]:
        """Apply the command's assignments; what is left is the command (empty for a plain assignment). Where
        `known` is False (a branch that may not run), an assigned variable becomes unknown."""
        declaring = words[0].text in _DECLARING
        rest = words[1:] if declaring else words
        while rest:
            found = _ASSIGNMENT.fullmatch(rest[0].text)
            raw = self.text[rest[0].start:rest[0].end]
            if declaring and words[0].text == "export" and _NAME.fullmatch(rest[0].text):
                self.exported.add(rest[0].text)  # `export NAME`: its value (if any) goes to the program
                rest = rest[1:]
                continue
            if not found or not _NAME.match(raw) or "=" not in raw.split("$", 1)[0]:
                break
            name, append, value = found.groups()
            if words[0].text == "export":
                self.exported.add(name)
            if not known:
                self.variables.pop(name, None)
                why = [*rest[0].unknown, *self.undecided]
                self.unknowable[name] = list(dict.fromkeys(why or ["a branch rlcfg cannot decide"]))
            elif _UNKNOWN in value:  # kept with the unknown part marked, and why
                self.variables[name] = self.variables.get(name, "") + value if append else value
                self.unknowable[name] = list(dict.fromkeys([*self.unknowable.get(name, []), *rest[0].unknown]))
            else:
                self.variables[name] = self.variables.get(name, "") + value if append else value
                if not append:
                    self.unknowable.pop(name, None)
            rest = rest[1:]
        if declaring:
            return []
        return rest


def _closing_quote(text: str, start: int) -> int:
    """The offset of the `"` that closes a double-quoted string whose text starts at `start`; -1 if none does."""
    position = start
    while position < len(text):
        if text[position] == "\\":
            position += 2
            continue
        if text[position] == '"':
            return position
        if text.startswith("$(", position) or text.startswith("${", position):
            # a quote inside an expansion belongs to it
            position = _closing(text, position + 1, "(" if text[position + 1] == "(" else "{",
                                ")" if text[position + 1] == "(" else "}") + 1
            continue
        position += 1
    return -1


def _closing(text: str, start: int, opening: str = "(", closing: str = ")") -> int:
    """The offset of the bracket that closes the one at `start`."""
    depth = 0
    position = start
    while position < len(text):
        char = text[position]
        if char == "\\":
            position += 2
            continue
        if char == opening:
            depth += 1
        elif char == closing:
            depth -= 1
            if depth == 0:
                return position
        position += 1
    return len(text) - 1


def _integer_arithmetic(text: str) -> int | None:
    """+ - * / % and parentheses on integers; None for anything else."""
    tokens = re.findall(r"\d+|[-+*/%()]", text)
    if "".join(tokens) != re.sub(r"\s+", "", text) or not tokens:
        return None
    position = 0

    # bash's integer division and remainder truncate toward zero
    operations = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
                  "/": lambda a, b: int(a / b), "%": lambda a, b: a - b * int(a / b)}

    def level(operators: str, operand: Callable[[], int]) -> int:
        """One precedence level: operands joined by `operators`, left to right."""
        nonlocal position
        value = operand()
        while position < len(tokens) and tokens[position] in operators:
            operator = tokens[position]
            position += 1
            value = operations[operator](value, operand())
        return value

    def expression() -> int:
        return level("+-", term)

    def term() -> int:
        return level("*/%", atom)

    def atom() -> int:
        nonlocal position
        token = tokens[position]
        position += 1
        if token == "(":
            value = expression()
            position += 1
            return value
        if token == "-":
            return -atom()
        if token == "+":
            return atom()
        return int(token)

    try:
        value = expression()
    except (IndexError, ValueError, ZeroDivisionError):
        return None
    return value if position == len(tokens) else None


# ---- finding the entrypoint's call -----------------------------------------------------------------------------


def _match(words: list[Word], launcher: Launcher, script: str) -> int | None:
    """The index of the first word after the entrypoint, if `words` call it (`script`: the script that runs them)."""
    for index, word in enumerate(words):
        if launcher.module and word.text == "-m" and index + 1 < len(words) \
                and re.fullmatch(launcher.module, words[index + 1].text):
            return index + 2
        if launcher.module and word.text.startswith("-m") and re.fullmatch(launcher.module, word.text[2:]):
            return index + 1
        if launcher.script and word.text.endswith(".py") and re.search(launcher.script, word.text) \
                and (_names_config(words[index + 1:], launcher) or _hydra_entry(word, launcher, script)):
            return index + 1
    return None


def _names_config(words: list[Word], launcher: Launcher) -> bool:
    """A script entrypoint is told apart by the option that names its config (a path like `examples/x.py` alone
    could be any framework's)."""
    flags = (*launcher.config_file, *launcher.config_name)
    return not flags or any(w.text in flags or w.text.partition("=")[0] in flags for w in words)


def _hydra_entry(entry: Word, launcher: Launcher, script: str) -> bool:
    """An entry script called without the config flags whose own `@hydra.main` names its config, for a launcher
    whose flags are Hydra's."""
    if "--config-name" not in launcher.config_name or entry.unknown or _UNKNOWN in entry.text:
        return False
    return _hydra_main(locate(entry.text, script))[1] is not None


_SHELLS = ("bash", "sh", "zsh")


def read_launch(text: str, script: str, launchers: Sequence[tuple[str, Launcher]],
                env: Mapping[str, str] | None = None, shown_as: str | None = None,
                arguments: Sequence[Word] = (), depth: int = 0) -> Launch:
    """The first call of an entrypoint in `launchers` ((dialect, launcher) pairs) that the script `text` makes, or,
    when it makes none, that a script it runs (`bash other.sh key=value "$@"`) makes, with the arguments it passes.
    `shown_as` names the script in messages (default: its path); `arguments`: what a calling script passes it ($1,
    $2, ...). Raises NoEntrypoint when it makes none, UsageError when its call cannot be read."""
    env = dict(os.environ if env is None else env)
    env.setdefault("PWD", os.getcwd())
    shown = shown_as or script
    scanner = _Scanner(text, script, env)
    for index, word in enumerate(arguments[:9], start=1):
        scanner.variables[str(index)] = word.text
    scanner.variables["#"] = str(len(arguments))
    calls: list[tuple[str, Launcher, list[Word], int]] = []
    runs: list[list[Word]] = []  # commands that run another script
    for words in scanner.commands():
        for dialect, launcher in launchers:
            after = _match(words, launcher, script)
            if after is not None:
                calls.append((dialect, launcher, words, after))
                break
        else:
            if _runs_script(words):
                runs.append(words)
    if not calls:
        for words in runs:
            found = _delegated(words, text, script, shown, launchers, scanner, env, depth)
            if found is not None:
                return found
        known = "; ".join(sorted({f"{launcher.name}" for _d, launcher in launchers}))
        raise NoEntrypoint(f"{shown}: calls no entrypoint rlcfg knows ({known}); pass the config file itself, with "
                           "the script's key=value arguments after it")
    dialect, launcher, words, after = calls[0]
    if launcher.unclaimed:
        raise UsageError(f"{shown}:{_line(text, words[0].start)}: {launcher.unclaimed}")
    diagnostics: list[Diagnostic] = []
    if len(calls) > 1:
        lines = ", ".join(str(_line(text, call[2][0].start)) for call in calls[1:])
        diagnostics.append(diagnostic(
            "RLC121", "", f"the script calls {launcher.name} {len(calls)} times; rlcfg checked the first call "
                          f"(the others are on line{'s' if len(calls) > 2 else ''} {lines})",
            origin=_origin(text, shown, words[0]),
            hint="split the runs into scripts of their own to check each"))
    config, found_arguments = _configuration(words[after:], launcher, words, text, shown, diagnostics)
    exported = scanner.known_exports()
    entry = next((w.text for w in words if w.text.endswith(".py") and not w.unknown and _UNKNOWN not in w.text), None)
    module = next((w.text[2:] or words[i + 1].text for i, w in enumerate(words[:after])
                   if w.text.startswith("-m") and (w.text[2:] or i + 1 < after)), None)
    forwards = any("\x01" in w.text for w in words[after:])
    return Launch(dialect, launcher, _line(text, words[0].start), config, found_arguments, diagnostics, exported,
                  entry, module, forwards)


def _runs_script(words: list[Word]) -> bool:
    """`bash other.sh ...`, `sh other.sh ...` or `./other.sh ...`."""
    if not words:
        return False
    first = words[0].text
    if first in _SHELLS and len(words) > 1 and not words[1].text.startswith("-"):
        return words[1].text.endswith(".sh")
    return first.endswith(".sh") and "/" in first


def _delegated(words: list[Word], text: str, script: str, shown: str, launchers: Sequence[tuple[str, Launcher]],
               scanner: "_Scanner", env: Mapping[str, str], depth: int) -> Launch | None:
    """The entrypoint call of the script that `words` run, with the arguments this script passes to it appended
    where that call forwards them ("$@"); None when the script is not on this machine or calls none."""
    at = 1 if words[0].text in _SHELLS else 0
    target = words[at]
    if depth >= 3 or target.unknown or _UNKNOWN in target.text:
        return None
    path = locate(target.text, script)
    try:
        callee = Path(path).read_text(errors="replace")
    except OSError:
        return None
    passed = words[at + 1:]
    try:  # the callee runs in the caller's environment, with what the caller exports on top
        found = read_launch(callee, path, launchers, {**env, **scanner.known_exports()}, shown_as=target.text,
                            arguments=passed, depth=depth + 1)
    except NoEntrypoint:
        return None  # a helper script (setup, downloads): the caller's own call may still come later
    found.sources[target.text] = callee
    if found.forwards:
        _config, forwarded = _configuration(passed, Launcher(name=""), words, text, shown, found.diagnostics)
        found.arguments.extend(forwarded)
    return found


def _configuration(words: list[Word], launcher: Launcher, call: list[Word], text: str, shown: str,
                   diagnostics: list[Diagnostic]) -> tuple[str | None, list[Arg]]:
    options: dict[str, Word] = {}
    arguments: list[Arg] = []
    flags = (*launcher.config_file, *launcher.config_dir, *launcher.config_name)
    index = 0
    while index < len(words):
        word = words[index]
        name, equals, inline = word.text.partition("=")
        if name in flags:
            value = Word(inline, word.start, word.end, word.unknown) if equals else \
                (words[index + 1] if index + 1 < len(words) else Word("", word.end, word.end))
            options[name] = value
            index += 1 if equals else 2
            continue
        index += 1
        if word.text.replace("\x01", "") == "":
            continue  # "$@": rlcfg's own extra overrides stand for the script's arguments
        if word.text.startswith("-") or ("=" not in word.text and not word.text.startswith("~")):
            continue  # an option of the launcher, or a word the entrypoint reads itself (ChatLearn's `grpo`)
        if word.unknown or _UNKNOWN in word.text:
            key = word.text.partition("=")[0].lstrip("+~")
            diagnostics.append(diagnostic(
                "RLC120", key if _UNKNOWN not in key else "",
                f"`{_shown_text(word.text)}` depends on {_listed(word.unknown)}, which rlcfg cannot know without "
                "running the script; this argument was left out of the check",
                origin=_origin(text, shown, word),
                hint="export the variable before running rlcfg (the script would read it from the environment), or "
                     "pass the argument with its value after the script"))
            continue
        line, column = _position(text, word.start)
        _end_line, end_column = _position(text, word.end)
        arguments.append(Arg(word.text.replace("\x01", ""), shown, line, column,
                             end_column if _end_line == line else column + 1))
    config = _config_path(options, launcher, call, text, shown)
    return config, arguments


def _config_path(options: dict[str, Word], launcher: Launcher, call: list[Word], text: str,
                 shown: str) -> str | None:
    def value(names: tuple[str, ...], what: str) -> str | None:
        word = next((options[n] for n in names if n in options), None)
        if word is None:
            return None
        if word.unknown or _UNKNOWN in word.text or not word.text:
            because = f"depends on {', '.join(dict.fromkeys(word.unknown))}" if word.unknown else "is empty"
            raise UsageError(f"{shown}:{_line(text, word.start)}: the {what} of the call {because}, which rlcfg "
                             "cannot know without running the script; export it before running rlcfg, or pass the "
                             "config file itself")
        return word.text

    if launcher.config_file:
        found = value(launcher.config_file, "config file")
        if found is None:
            raise UsageError(f"{shown}:{_line(text, call[0].start)}: the call of {launcher.name} names no config file "
                             f"({' or '.join(launcher.config_file)})")
        return found
    if launcher.config_name:
        name = value(launcher.config_name, "config name")
        directory = value(launcher.config_dir, "config folder")
        entry = next((w.text for w in call if w.text.endswith(".py")), "")
        if name is None or directory is None:  # what the flags leave out, the entry script's @hydra.main gives
            declared_dir, declared_name = _hydra_main(locate(entry, shown)) if entry else (None, None)
            name, directory = name or declared_name, directory if directory is not None else declared_dir
        if name is None:
            raise UsageError(f"{shown}:{_line(text, call[0].start)}: the call of {launcher.name} names no config "
                             f"({' or '.join(launcher.config_name)}), and its entry script's @hydra.main names none "
                             "rlcfg could read")
        folder = posixpath.join(posixpath.dirname(entry), directory or "")
        return posixpath.normpath(posixpath.join(folder, name if name.endswith(".yaml") else name + ".yaml"))
    return None


def _hydra_main(entry: str) -> tuple[str | None, str | None]:
    """The `config_path` and `config_name` an entry script's `@hydra.main(...)` declares, read from its source (never
    run); (None, None) where the script is not on this machine or declares them otherwise than as plain strings."""
    import ast

    try:
        tree = ast.parse(Path(entry).read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None, None
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for decorator in node.decorator_list:
            called = decorator.func if isinstance(decorator, ast.Call) else None
            name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", None)
            if name != "main":
                continue
            given = {k.arg: k.value.value for k in decorator.keywords
                     if isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)}
            return given.get("config_path"), given.get("config_name")
    return None, None


def locate(config: str, script: str, cwd: str | None = None) -> str:
    """Where a config path the script names lies: relative to the directory the script is run from, which rlcfg
    takes to be the current one, or else the nearest folder above the script that has it (scripts are usually run
    from the top of the repository that holds them)."""
    if os.path.isabs(config):
        return config
    here = os.path.join(cwd or os.getcwd(), config)
    if os.path.exists(here):
        return os.path.relpath(here) if cwd is None else here
    folder = Path(script).resolve().parent
    for candidate in (folder, *folder.parents):
        if (candidate / config).exists():
            return str(candidate / config)
    return config


def _listed(causes: list[str]) -> str:
    shown = list(dict.fromkeys(causes))
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


def _shown_text(text: str) -> str:
    shown = text.replace(_UNKNOWN, "?").replace("\x01", "")
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _position(text: str, offset: int) -> tuple[int, int]:
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


def _origin(text: str, shown: str, word: Word) -> Origin:
    line, column = _position(text, word.start)
    end_line, end_column = _position(text, word.end)
    return Origin("file", file=shown, line=line, column=column, end_column=end_column if end_line == line else None)
