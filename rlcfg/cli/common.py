"""What every command shares and `validate` needs without typer: exit codes, output, usage errors, the bug
guard, --ignore and colour. Typer's import costs a tenth of a `validate`, so the command line's fast path for
`validate` (rlcfg.cli.main) runs on this module alone; the typer app adapts it (rlcfg.cli.base)."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_BUG = 0, 1, 2, 101


class Exit(Exception):
    """Leave the command with this exit code (what it had to say is already printed)."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


def echo(text: str, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(f"{text}\n")
    stream.flush()


def usage_error(message: str, json_output: bool = False) -> Exit:
    """Report a usage error (exit 2). Tools that asked for JSON get it on stdout too, so they need not parse stderr."""
    echo(f"rlcfg: error: {message}", err=True)
    if json_output:
        import json

        echo(json.dumps({"format_version": 1, "usage_error": message}, indent=2))
    return Exit(EXIT_USAGE)


def ignored_codes(values: list[str] | None, json_output: bool = False) -> frozenset:
    """The codes given to --ignore, checked against the registered ones."""
    from rlcfg.diagnostics import CODES

    codes = {part.strip().upper() for value in values or [] for part in value.split(",") if part.strip()}
    unknown = sorted(c for c in codes if c not in CODES)
    if unknown:
        raise usage_error(f"--ignore: {', '.join(unknown)} is not a diagnostic code (they are listed in "
                          "docs/diagnostics.md)", json_output)
    return frozenset(codes)


def drop_ignored(diagnostics: list, codes: frozenset) -> list:
    """Diagnostics without the silenced warnings and notes; errors always stay."""
    return [d for d in diagnostics if d.code not in codes or d.severity.value == "error"]


def use_color(flag: bool | None) -> bool:
    """--color/--no-color win; otherwise colour on a terminal unless NO_COLOR is set (no-color.org)."""
    import os

    if flag is not None:
        return flag
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def report_bug(exc: BaseException, debug: bool) -> Exit:
    """The short 'this is a bug' message for an unexpected exception (the traceback only under --debug)."""
    if debug:
        import traceback

        traceback.print_exc()
    echo(f"rlcfg: internal error: {type(exc).__name__}: {exc}", err=True)
    echo("This is a bug in rlcfg, not a problem with your config. "
         + ("" if debug else "Re-run with --debug for the traceback, and ")
         + "please report it with the config that triggered it.", err=True)
    return Exit(EXIT_BUG)


@contextmanager
def bug_guard(debug: bool) -> Iterator[None]:
    """Turn an unexpected exception into the short 'this is a bug' message and exit 101."""
    try:
        yield
    except (Exit, SystemExit, KeyboardInterrupt):
        raise
    except Exception as exc:  # anything else is rlcfg's fault, not the user's
        raise report_bug(exc, debug) from None
