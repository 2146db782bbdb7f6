"""Reference pages from the dialect model, through the jinja2 templates in templates/docs/.

The templates decide the layout; the filters here decide how one value is spelled in each markup (a code
span, a table cell, a link), so that a pipe in a description never breaks a Markdown table and a backtick
never breaks a reST literal.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from rlcfg.schema.base import Dialect

from docs_gen.model import DialectDoc, anchor_of, dialect_doc

# In a source checkout the templates sit beside the package; an installed rlcfg has them under the environment's
# share/ folder (pyproject's data-files), so `rlcfg docs` works from anywhere.
_CANDIDATES = (Path(__file__).resolve().parent.parent / "templates" / "docs",
               Path(sys.prefix) / "share" / "rlcfg" / "templates" / "docs")
TEMPLATES = next((p for p in _CANDIDATES if p.is_dir()), _CANDIDATES[0])
FORMATS = {"md": "md", "rst": "rst"}
FAMILIES = {
    "1": "syntax, sources and unknown keys",
    "2": "types and ranges",
    "3": "cross-field rules",
    "4": "placement and resources",
    "5": "memory",
}


class TemplatesMissing(Exception):
    """The doc templates are not beside the package (rlcfg installed without its source tree)."""


# ---- spelling, per markup -----------------------------------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def md_cell(text: str) -> str:
    return _one_line(text).replace("|", "\\|")


def md_code(text: str) -> str:
    text = _one_line(text)
    if not text:
        return ""
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}".replace("|", "\\|")


_MD_CODE = re.compile(r"(?<!`)`([^`]+)`(?!`)")


def rst_text(text: str) -> str:
    """Markdown-flavoured prose (single backticks for code) as reST."""
    text = _one_line(text)
    parts = []
    last = 0
    for match in _MD_CODE.finditer(text):
        parts.append(_rst_escape(text[last:match.start()]))
        parts.append(rst_code(match.group(1)))
        last = match.end()
    parts.append(_rst_escape(text[last:]))
    return "".join(parts)


def _rst_escape(text: str) -> str:
    # `*` and `|` start emphasis and substitutions in reST; a lone `_` after a word makes a link.
    return re.sub(r"([*|\\]|_(?=\W|$))", r"\\\1", text)


def rst_code(text: str) -> str:
    text = _one_line(text)
    return f"``{text}``" if text else ""


def underline(text: str, char: str) -> str:
    return char * max(len(text), 4)


@dataclass
class Page:
    path: str  # relative to the output folder
    text: str


def _environment(fmt: str):
    import jinja2

    if not TEMPLATES.is_dir():
        raise TemplatesMissing(f"the doc templates are in none of {', '.join(map(str, _CANDIDATES))}; reinstall "
                               "rlcfg, or run rlcfg docs from a source checkout")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    env.filters.update(cell=md_cell if fmt == "md" else rst_text, code=md_code if fmt == "md" else rst_code,
                       underline=underline, anchor=anchor_of)
    env.globals.update(families=FAMILIES)
    return env


def _links(doc: DialectDoc) -> dict[str, str]:
    """dotted section path -> anchor of its first documented section (the target of a `section` row)."""
    out: dict[str, str] = {}
    for sec in doc.sections:
        out.setdefault(sec.path, sec.anchor)
    return out


def render(dialects: Iterable[Dialect], fmt: str = "md", pages: str = "all") -> list[Page]:
    """The reference pages. pages="all" adds the index and the diagnostics page to one page per dialect."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}")
    env = _environment(fmt)
    docs = [dialect_doc(d) for d in dialects]
    out: list[Page] = []
    for doc in docs:
        text = env.get_template(f"dialect.{fmt}.j2").render(d=doc, links=_links(doc), ext=fmt)
        out.append(Page(f"{doc.name}.{fmt}", _tidy(text)))
    if pages == "all":
        out.append(Page(f"index.{fmt}", _tidy(env.get_template(f"index.{fmt}.j2").render(docs=docs, ext=fmt))))
        out.append(Page(f"diagnostics.{fmt}", _tidy(env.get_template(f"diagnostics.{fmt}.j2").render(
            codes=_codes(docs), ext=fmt))))
    return out


def _tidy(text: str) -> str:
    """One blank line between blocks and a single final newline, whatever the template's whitespace."""
    text = "\n".join(line.rstrip() for line in text.splitlines())
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip("\n") + "\n"


@dataclass
class CodeDoc:
    code: str
    anchor: str
    title: str
    severity: str
    example: str
    used_by: list[tuple[str, str, int]]  # (dialect name, dialect title, rules of that dialect that may report this code)


def _codes(docs: list[DialectDoc]) -> list[tuple[str, list[CodeDoc]]]:
    from rlcfg.diagnostics import CODES

    families: dict[str, list[CodeDoc]] = {}
    for code in sorted(CODES):
        info = CODES[code]
        used = [(d.name, d.title, n) for d in docs if (n := sum(code in r.codes for r in d.rules))]
        families.setdefault(code[3], []).append(CodeDoc(code, code.lower(), info.title, info.severity.value,
                                                        info.example, used))
    return sorted(families.items())
