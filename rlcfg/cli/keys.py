"""`rlcfg keys DIALECT [PREFIX]`: a dialect's keys on stdout, one line each, for the terminal and for grep."""

from __future__ import annotations

from typing import Optional

import typer

from rlcfg.cli import completion
from rlcfg.cli.base import DIALECT_NAMES, app, bug_guard, usage_error
from rlcfg.cli.common import echo

DESCRIPTION_WIDTH = 100  # a key's line keeps the first sentence of its description, up to this many characters


@app.command(
    epilog="Examples:\n\n"
           "  rlcfg keys skyrl trainer.algorithm\n\n"
           "  rlcfg keys roll actor_train.training_args\n\n"
           "  rlcfg keys areal | grep -i clip\n\n"
           "`rlcfg docs` renders the same keys as reference pages, with the rules that read each one.\n\n"
           "Exit codes: 0 listed, 2 usage error (an unknown dialect, or a prefix no key has), 101 a bug in rlcfg.",
)
def keys(
    dialect: str = typer.Argument(..., metavar="DIALECT", help=f"The dialect ({DIALECT_NAMES}).",
                                  autocompletion=completion.dialects),
    prefix: Optional[str] = typer.Argument(None, metavar="[PREFIX]",
                                           help="Only the keys under this dotted section (or the key itself).",
                                           autocompletion=completion.key_prefixes),
    debug: bool = typer.Option(False, "--debug", help="Show the traceback if rlcfg itself fails."),
) -> None:
    """Print a dialect's keys, one per line: the dotted key, its type, its default and the first sentence of its
    description; the releases that have it when not all do. Sections are listed by their keys.
    """
    with bug_guard(debug):
        echo("\n".join(key_lines(dialect, (prefix or "").rstrip("."))))  # `a.b.`, as completion offers it


def key_lines(dialect: str, prefix: str) -> list[str]:
    from docs_gen.model import dialect_doc

    from rlcfg import schema

    if dialect not in schema.names():
        raise usage_error(f"unknown dialect `{dialect}`; choose one of: {', '.join(schema.names())}")
    doc = dialect_doc(schema.load(dialect))
    lines: list[str] = []
    seen: set[tuple] = set()
    for section in doc.sections:
        for group in section.groups:
            for row in group.rows:
                if row.nested or not (row.path == prefix or row.path.startswith(prefix + ".") or not prefix):
                    continue
                where = f" [{group.label}]" if group.variants else ""
                line = (f"{row.path}  {row.type}" + (f" = {row.default}" if row.default else "")
                        + (f"  (only in {', '.join(row.releases)})" if row.releases else "") + where
                        + (f"  {_first_sentence(row.description)}" if row.description else ""))
                if (row.path, line) not in seen:
                    seen.add((row.path, line))
                    lines.append(line)
    if not lines:
        raise usage_error(f"{doc.title} has no key `{prefix}` and no section of that name; "
                          f"`rlcfg keys {dialect}` lists them all")
    return lines


def _first_sentence(text: str) -> str:
    end = text.find(". ")
    sentence = text if end < 0 else text[:end + 1]
    return sentence if len(sentence) <= DESCRIPTION_WIDTH else sentence[:DESCRIPTION_WIDTH - 1].rstrip() + "…"
