"""`rlcfg docs`: the parameter reference pages, rendered from the dialect schemas."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from rlcfg.cli import completion
from rlcfg.cli.base import DIALECT_NAMES, EXIT_INVALID, EXIT_OK, app, bug_guard, usage_error

DEFAULT_OUT = "docs/reference"


class DocFormat(str, Enum):
    md = "md"
    rst = "rst"


@app.command(
    epilog="Examples:\n\n"
           "  rlcfg docs\n\n"
           "  rlcfg docs --dialect chatlearn --format rst --out build/reference\n\n"
           "  rlcfg docs --check\n\n"
           "Exit codes: 0 written (or up to date with --check), 1 stale files with --check, 2 usage error, "
           "101 a bug in rlcfg.",
)
def docs(
    dialect: str = typer.Option("all", "--dialect", "-d", metavar="DIALECT",
                                help=f"One dialect ({DIALECT_NAMES}), or all of them plus the "
                                     "index and the diagnostic-code page.",
                                autocompletion=completion.dialects),
    output: DocFormat = typer.Option(DocFormat.md, "--format", "-f", help="Markdown (md) or reStructuredText (rst)."),
    out: Path = typer.Option(Path(DEFAULT_OUT), "--out", "-o", metavar="DIR",
                             help="Folder for the pages (one file per dialect, plus index and diagnostics)."),
    check: bool = typer.Option(False, "--check",
                               help="Write nothing; exit 1 and list the files that are missing or differ from a "
                                    "fresh rendering."),
    debug: bool = typer.Option(False, "--debug", help="Show the traceback if rlcfg itself fails."),
) -> None:
    """Render the parameter reference from the schemas: every key's type, default, description and range,
    the cross-field rules and their codes, the values a framework silently rewrites, and renamed keys.
    """
    import docs_gen
    from docs_gen.render import TemplatesMissing

    with bug_guard(debug):
        dialects = _select(dialect)
        try:
            files = docs_gen.docs_files(dialects, output.value, pages="all" if dialect == "all" else "one")
        except TemplatesMissing as exc:
            raise usage_error(str(exc))
        command = "rlcfg docs" + _flags(dialect, output.value != "md" and f"--format {output.value}", out, DEFAULT_OUT)
        raise typer.Exit(finish(files, out, check, command))


def _select(dialect: str) -> list:
    import docs_gen
    from rlcfg import schema

    try:
        return docs_gen.select(dialect)
    except KeyError:
        known = ", ".join(schema.names()) or "none yet"
        raise usage_error(f"unknown dialect `{dialect}`; choose all or one of: {known}")


def _flags(dialect: str, extra: str | bool, out: Path, default_out: str) -> str:
    parts = []
    if dialect != "all":
        parts.append(f"--dialect {dialect}")
    if extra:
        parts.append(str(extra))
    if out != Path(default_out):
        parts.append(f"--out {out}")
    return "".join(" " + p for p in parts)


def finish(files: dict[str, str], out: Path, check: bool, command: str) -> int:
    """Check or write the generated files and report; shared with `rlcfg schema`. Returns the exit code."""
    import docs_gen

    if check:
        stale = docs_gen.compare(files, out)
        for item in stale:
            typer.echo(f"{item.path}: {item.reason}")
        if stale:
            noun = "file is" if len(stale) == 1 else "files are"
            typer.echo(f"{len(stale)} generated {noun} stale; regenerate with `{command}`")
            return EXIT_INVALID
        typer.echo(f"{out}: {len(files)} generated files are up to date")
        return EXIT_OK
    written = docs_gen.write(files, out)
    for path in written:
        typer.echo(f"wrote {path}")
    if not written:
        typer.echo(f"{out}: {len(files)} generated files were already up to date")
    return EXIT_OK
