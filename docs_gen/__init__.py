"""Generated artifacts: the reference pages (docs/reference/) and the editor JSON Schemas (schemas/).

Both are derived from the dialect schemas alone, so they cannot drift from what `rlcfg validate` checks;
`rlcfg docs --check` and `rlcfg schema --check` compare the committed files with a fresh rendering.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from rlcfg.schema.base import Dialect


def select(selection: str = "all") -> list[Dialect]:
    """The dialects named by --dialect: one name, or "all" of those whose module exists. KeyError if unknown."""
    from rlcfg import schema

    names = schema.names()
    if selection == "all":
        return [schema.load(n) for n in names]
    if selection not in names:
        raise KeyError(selection)
    return [schema.load(selection)]


def docs_files(dialects: Iterable[Dialect], fmt: str = "md", pages: str = "all") -> dict[str, str]:
    """Relative path -> text of every reference page (pages="all" adds the index and the code list)."""
    from docs_gen.render import render

    return {page.path: page.text for page in render(dialects, fmt, pages)}


def schema_files(dialects: Iterable[Dialect]) -> dict[str, str]:
    from docs_gen.editor_schema import schema_text

    return {f"{d.name}.schema.json": schema_text(d) for d in dialects}


@dataclass(frozen=True)
class Stale:
    path: Path
    reason: str  # "missing" or "out of date"


def compare(files: dict[str, str], out: Path) -> list[Stale]:
    found = []
    for name, text in files.items():
        path = out / name
        if not path.exists():
            found.append(Stale(path, "missing"))
        elif path.read_text(encoding="utf-8") != text:
            found.append(Stale(path, "out of date"))
    return found


def write(files: dict[str, str], out: Path) -> list[Path]:
    """Write the files that differ; returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for stale in compare(files, out):
        stale.path.write_text(files[stale.path.relative_to(out).as_posix()], encoding="utf-8")
        written.append(stale.path)
    return written
