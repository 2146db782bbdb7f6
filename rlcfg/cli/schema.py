"""`rlcfg schema`: one JSON Schema per dialect, for editors and tools."""

from __future__ import annotations

from pathlib import Path

import typer

from rlcfg.cli import completion
from rlcfg.cli.base import DIALECT_NAMES, app, bug_guard
from rlcfg.cli.docs import _flags, _select, finish

DEFAULT_OUT = "schemas"


@app.command(
    epilog="Examples:\n\n"
           "  rlcfg schema\n\n"
           "  rlcfg schema --dialect skyrl --out /tmp/schemas\n\n"
           "  rlcfg schema --check\n\n"
           "Then start a config with `# yaml-language-server: $schema=../schemas/chatlearn.schema.json` to get "
           "completion and checking in the editor.\n\n"
           "Exit codes: 0 written (or up to date with --check), 1 stale files with --check, 2 usage error, "
           "101 a bug in rlcfg.",
)
def schema(
    dialect: str = typer.Option("all", "--dialect", "-d", metavar="DIALECT",
                                help=f"One dialect ({DIALECT_NAMES}), or all of them.",
                                autocompletion=completion.dialects),
    out: Path = typer.Option(Path(DEFAULT_OUT), "--out", "-o", metavar="DIR",
                             help="Folder for the <dialect>.schema.json files."),
    check: bool = typer.Option(False, "--check",
                               help="Write nothing; exit 1 and list the files that are missing or differ from a "
                                    "fresh rendering."),
    debug: bool = typer.Option(False, "--debug", help="Show the traceback if rlcfg itself fails."),
) -> None:
    """Write a draft-07 JSON Schema per dialect (what yaml-language-server validates): every key with its
    type, default, range and description; any value may also be a `${...}` interpolation. Cross-field rules
    are not expressible there: `rlcfg validate` checks them.
    """
    import docs_gen

    with bug_guard(debug):
        dialects = _select(dialect)
        files = docs_gen.schema_files(dialects)
        command = "rlcfg schema" + _flags(dialect, False, out, DEFAULT_OUT)
        raise typer.Exit(finish(files, out, check, command))
