"""The conversions the tests pin: every template and example config into every dialect, with the losses each one
is expected to report.

`python -m tests.convert.cases` rewrites expected_losses.json from what the converter reports now; review the diff
before committing it: every new line is a setting that some conversion can no longer express.
"""

from __future__ import annotations

import json
import sys
from functools import lru_cache
from pathlib import Path

from rlcfg.convert import DIALECTS, ConversionError, convert
from tests.helpers import ROOT, TEMPLATES

EXPECTED = Path(__file__).with_name("expected_losses.json")
# Every template, and the frameworks' own example configs of the reference documents (tests/fixtures).
FIXTURES = ROOT / "tests" / "fixtures"
EXAMPLE_FILES = [p for p in FIXTURES.glob("*/*.yaml") if "broken" not in p.name]
SOURCES = sorted(p.relative_to(ROOT).as_posix() for p in [*TEMPLATES.glob("*.yaml"), *EXAMPLE_FILES])
PAIRS = [(source, target) for source in SOURCES for target in DIALECTS]


@lru_cache(maxsize=None)
def dialect_of(source: str) -> str | None:
    from rlcfg.frontend import check_file

    return check_file(str(ROOT / source)).dialect


def key(template: str, target: str) -> str:
    return f"{template} -> {target}"


def outcome(template: str, target: str) -> dict:
    """What a conversion reports: its lost Experiment fields, or the error that stops it."""
    try:
        conversion = convert(str(ROOT / template), target)
    except ConversionError as exc:
        return {"error": str(exc).replace(str(ROOT) + "/", "")}
    return {"losses": sorted(loss.path for loss in conversion.losses)}


def expected() -> dict:
    return json.loads(EXPECTED.read_text())


def main() -> None:
    table = {key(t, d): outcome(t, d) for t, d in PAIRS}
    EXPECTED.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"wrote {EXPECTED} ({len(table)} conversions)", file=sys.stderr)


if __name__ == "__main__":
    main()
