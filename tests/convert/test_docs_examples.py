"""docs/converting.md shows what `rlcfg convert` really prints."""

from __future__ import annotations

from tests.convert.examples import PAGE, current


def test_the_worked_examples_are_current():
    page = PAGE.read_text()
    assert page == current(page), "docs/converting.md is stale: run `python -m tests.convert.examples`"
