"""The `rlcfg` command line: `console` is the console script. The commands are typer's (rlcfg.cli.commands, one module
per command); a plain `rlcfg validate` call is parsed here and run without importing typer, whose import alone
costs a tenth of a check.

Exit codes: 0 valid, 1 the config has errors (or warnings under --strict), 2 usage error (missing file, bad
flag), 101 a bug in rlcfg (a short message; the traceback only under --debug).
"""

from __future__ import annotations

import gc
import os
import sys
from typing import Any

# Commands that check a config and exit. They allocate tens of thousands of long-lived objects (the dialect's
# models and validators; thousands of fields for RLinf and ROLL) and little garbage, so the cyclic collector's
# passes over them are pure cost: a fifth of `validate`'s CPU time on an RLinf config. Every other command (`run`
# lives for hours) keeps the collector.
SHORT_LIVED_COMMANDS = frozenset({"validate", "plan"})

# `validate`'s options as its typer command declares them (rlcfg.cli.validate): flags, and options that take a
# value (keyword of validating.validate_config, and whether it may repeat).
_VALIDATE_FLAGS = {"--strict": ("strict", True), "--fix": ("fix", True), "--diff": ("diff", True),
                   "--unsafe-fixes": ("unsafe_fixes", True),
                   "--debug": ("debug", True), "--color": ("color", True), "--no-color": ("color", False)}
_VALIDATE_OPTIONS = {"--dialect": ("dialect", False), "-d": ("dialect", False), "--format": ("output", False),
                     "-f": ("output", False), "--explain": ("explain", False), "--ignore": ("ignore", True),
                     "--framework-version": ("framework_version", False)}


def validate_arguments(args: list[str]) -> dict[str, Any] | None:
    """The keyword arguments of rlcfg.cli.validating.validate_config for `rlcfg validate ARGS`, or None for
    anything typer must handle (help, a flag it does not know, a missing value, no FILE): typer then parses the
    same arguments and reports the usage error in its own words."""
    parsed: dict[str, Any] = {"overrides": [], "ignore": []}
    positional: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            continue
        name, equals, value = arg.partition("=")
        if arg in _VALIDATE_FLAGS:
            key, flag = _VALIDATE_FLAGS[arg]
            parsed[key] = flag
            continue
        if arg in _VALIDATE_OPTIONS:
            if i >= len(args):
                return None
            name, value = arg, args[i]
            i += 1
        elif not (equals and name.startswith("--") and name in _VALIDATE_OPTIONS):
            return None
        key, repeats = _VALIDATE_OPTIONS[name]
        if repeats:
            parsed[key].append(value)
        else:
            parsed[key] = value
    if not positional or parsed.get("output", "text") not in ("text", "json"):
        return None
    parsed["file"], parsed["overrides"] = positional[0], positional[1:]
    parsed["json_output"] = parsed.pop("output", "text") == "json"
    return parsed


def _fast_validate(args: list[str]) -> int | None:
    parsed = validate_arguments(args)
    if parsed is None:
        return None
    from rlcfg.cli import common
    from rlcfg.cli.validating import validate_config

    try:
        return validate_config(**parsed)
    except common.Exit as exc:
        return exc.code
    except KeyboardInterrupt:
        common.echo("Aborted!", err=True)  # what typer says
        return 1
    except BrokenPipeError:  # `rlcfg validate ... | head`
        sys.stdout = None  # nothing more can be written there
        return 1


def _command(args: list[str]) -> str | None:
    return next((arg for arg in args if not arg.startswith("-")), None)


def main() -> None:
    args = sys.argv[1:]
    command = _command(args)
    if command in SHORT_LIVED_COMMANDS:
        gc.disable()
        # pydantic looks for plugins (tracing, metrics of a long-running service's validation) by reading the entry
        # points of every installed package when it builds its first validator: a twentieth of a `validate`, with
        # nothing for a plugin to observe in a one-shot check. pydantic's documented switch turns the search off;
        # a user who sets the variable keeps their own setting.
        os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    else:
        gc.enable()
    if args[:1] == ["validate"]:
        code = _fast_validate(args[1:])
        if code is not None:
            sys.exit(code)
    from rlcfg.cli.commands import app

    app()


def console() -> None:
    """The `rlcfg` console script and `python -m rlcfg`: `main`, and a quick exit after a command that only checks.

    Tearing the interpreter down after `validate` or `plan` means freeing every model, validator and field object
    the check built, one by one, which costs as long as building the dialect's validator: a sixth of a `validate`.
    Those commands hold no resource that needs closing (a `--fix` edit is written and closed before they return),
    so once their output is flushed the process ends at once. Long-lived commands exit normally."""
    try:
        main()
        code: Any = 0
    except SystemExit as exc:
        code = exc.code
    if _command(sys.argv[1:]) not in SHORT_LIVED_COMMANDS:
        sys.exit(code)
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (BrokenPipeError, ValueError):  # a reader that left (`| head`), or a stream already closed
            pass
    os._exit(code)


def __getattr__(name: str) -> Any:
    # `from rlcfg.cli import app` (tests, embedding tools) still finds the typer app and its helpers. Submodule
    # names are left to the import system, which asks here before it loads one.
    import importlib
    import importlib.util

    if name.startswith("_") or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        raise AttributeError(name)
    importlib.import_module(f"{__name__}.commands")  # the app with its commands on it
    return getattr(importlib.import_module(f"{__name__}.base"), name)
