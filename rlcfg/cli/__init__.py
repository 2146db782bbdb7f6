"""The `rlcfg` command line. One module per command; this one builds the app and owns the exit codes.

Exit codes: 0 valid, 1 the config has errors (or warnings under --strict), 2 usage error (missing file, bad
flag), 101 a bug in rlcfg (a short message; the traceback only under --debug).
"""

from __future__ import annotations

import gc
import os
import sys
import traceback
from contextlib import contextmanager
from enum import Enum
from typing import Iterator

import typer

from rlcfg import __version__

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_BUG = 0, 1, 2, 101

FRAMEWORK_VERSION_HELP = ("Judge the config by this release of its framework (SkyRL 0.1.0 ... 0.4.0 or main, AReaL 0.3 "
                          "or 1.0, ChatLearn 1.2.0 or main, RLinf 2025-08, 2025-10 or main, ROLL main) instead of the "
                          "release its keys point to; `rlcfg validate` names the one it chose.")


class OutputFormat(str, Enum):
    """`--format` of the commands that report: text for people, json for tools."""

    text = "text"
    json = "json"

app = typer.Typer(
    name="rlcfg",
    help="Check, explain and document the configs of LLM RL post-training frameworks "
         "(ChatLearn, SkyRL, RLinf, ROLL, AReaL) before a single GPU is touched.",
    add_completion=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"rlcfg {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """Check, explain and document RL post-training configs."""


IGNORE_HELP = ("Silence warnings and notes of these codes (comma-separated, e.g. RLC111,RLC404); errors cannot be "
               "silenced. --strict counts only what is left.")


def usage_error(message: str, json_output: bool = False) -> typer.Exit:
    """Report a usage error (exit 2). Tools that asked for JSON get it on stdout too, so they need not parse stderr."""
    typer.echo(f"rlcfg: error: {message}", err=True)
    if json_output:
        import json

        typer.echo(json.dumps({"format_version": 1, "usage_error": message}, indent=2))
    return typer.Exit(EXIT_USAGE)


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


@contextmanager
def bug_guard(debug: bool) -> Iterator[None]:
    """Turn an unexpected exception into the short 'this is a bug' message and exit 101."""
    try:
        yield
    except (typer.Exit, typer.Abort, SystemExit, KeyboardInterrupt):
        raise
    except Exception as exc:  # anything else is rlcfg's fault, not the user's
        if debug:
            traceback.print_exc()
        typer.echo(f"rlcfg: internal error: {type(exc).__name__}: {exc}", err=True)
        typer.echo("This is a bug in rlcfg, not a problem with your config. "
                   + ("" if debug else "Re-run with --debug for the traceback, and ")
                   + "please report it with the config that triggered it.", err=True)
        raise typer.Exit(EXIT_BUG) from None


def _register() -> None:
    # Each module registers its command on `app` when imported, in the order `--help` lists them; the heavy
    # imports of `run` stay inside its command.
    import rlcfg.cli.validate  # noqa: F401
    import rlcfg.cli.plan  # noqa: F401
    import rlcfg.cli.run  # noqa: F401
    import rlcfg.cli.docs  # noqa: F401
    import rlcfg.cli.schema  # noqa: F401
    import rlcfg.cli.convert  # noqa: F401


_register()


# Commands that check a config and exit. They allocate tens of thousands of long-lived objects (the dialect's
# models and validators; thousands of fields for RLinf and ROLL) and little garbage, so the cyclic collector's
# passes over them are pure cost: a fifth of `validate`'s CPU time on an RLinf config. Every other command (`run`
# lives for hours) keeps the collector.
SHORT_LIVED_COMMANDS = frozenset({"validate", "plan"})


def main() -> None:
    command = next((arg for arg in sys.argv[1:] if not arg.startswith("-")), None)
    if command in SHORT_LIVED_COMMANDS:
        gc.disable()
        # pydantic looks for plugins (tracing, metrics of a long-running service's validation) by reading the entry
        # points of every installed package when it builds its first validator: a twentieth of a `validate`, with
        # nothing for a plugin to observe in a one-shot check. pydantic's documented switch turns the search off;
        # a user who sets the variable keeps their own setting.
        os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    else:
        gc.enable()
    app()


if __name__ == "__main__":
    sys.exit(main())
