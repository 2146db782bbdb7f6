"""The typer app of the `rlcfg` command line and what its commands share: one module per command registers on the
app (rlcfg.cli.commands imports them all). The exit codes and the helpers are rlcfg.cli.common's; here they are
adapted to typer.

Exit codes: 0 valid, 1 the config has errors (or warnings under --strict), 2 usage error (missing file, bad
flag), 101 a bug in rlcfg (a short message; the traceback only under --debug).
"""

from __future__ import annotations

import inspect
from contextlib import contextmanager
from enum import Enum
from typing import Any, Callable, Iterator

import typer

import rlcfg.cli.common as common
import rlcfg.schema as registry
from rlcfg import __version__
# The exit codes and helpers the command modules import from here.
from rlcfg.cli.common import EXIT_BUG, EXIT_INVALID, EXIT_OK, EXIT_USAGE, drop_ignored, use_color  # noqa: F401



def _either(words: tuple[str, ...]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


# The help strings that list the dialects and their releases read them from the registry.
DIALECT_NAMES = registry.listing("names")


def file_help(verb: str) -> str:
    """The help of a command's FILE argument: a config, a launch script, or a command line after `--`."""
    return (f"The YAML config to {verb}, or a launch script (`run_gsm8k.sh`) that calls the framework's entrypoint: "
            "rlcfg reads the config the call loads and its key=value arguments, without running the script. After "
            "`--`, a command line: `-- python -m skyrl_train.entrypoints.main_base k=v ...`.")
FRAMEWORK_VERSION_HELP = ("Judge the config by this release of its framework ("
                          + ", ".join(f"{e.title} {_either(e.releases)}" for e in registry.REGISTRY)
                          + ") instead of the release its keys point to; `rlcfg validate` names the one it chose.")


class OutputFormat(str, Enum):
    """`--format` of the commands that report: text for people, json for tools."""

    text = "text"
    json = "json"

def reflowed(doc: str) -> str:
    """A docstring as help text whose paragraphs rich wraps to the terminal: typer keeps the line breaks inside the
    paragraphs after the first, which rich then wraps again, leaving every source line's end ragged."""
    return "\n\n".join(" ".join(line.strip() for line in paragraph.splitlines())
                       for paragraph in inspect.cleandoc(doc).split("\n\n"))


class _App(typer.Typer):
    def command(self, *args: Any, **kwargs: Any) -> Callable:
        register = super().command(*args, **kwargs)

        def decorate(function: Callable) -> Callable:
            if kwargs.get("help") is None and function.__doc__:
                return super(_App, self).command(*args, **kwargs, help=reflowed(function.__doc__))(function)
            return register(function)

        return decorate


app = _App(
    name="rlcfg",
    help="Check, explain and document the configs of LLM RL post-training frameworks "
         f"({registry.listing('titles')}) before a single GPU is touched.",
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
    """Report a usage error (exit 2), as rlcfg.cli.common.usage_error does, as typer's exit."""
    return typer.Exit(common.usage_error(message, json_output).code)


def ignored_codes(values: list[str] | None, json_output: bool = False) -> frozenset:
    try:
        return common.ignored_codes(values, json_output)
    except common.Exit as exc:
        raise typer.Exit(exc.code) from None


@contextmanager
def bug_guard(debug: bool) -> Iterator[None]:
    """rlcfg.cli.common.bug_guard for a typer command: its exits become typer's."""
    try:
        yield
    except (typer.Exit, typer.Abort, SystemExit, KeyboardInterrupt):
        raise
    except common.Exit as exc:
        raise typer.Exit(exc.code) from None
    except Exception as exc:  # anything else is rlcfg's fault, not the user's
        raise typer.Exit(common.report_bug(exc, debug).code) from None
