"""The run-coverage suite: the frameworks' own example configs and launch scripts through `rlcfg validate` and
`rlcfg run --dry-run`, to find what validate passes and a run would still refuse.

Every test here is marked `run_coverage`; the default test run deselects them (pyproject's addopts) because they
need bare clones of the five frameworks and take minutes. Run them with
`MIRROR_ROOT=/work/.mirror python -m pytest -m run_coverage tests/coverage -s -q` (`-s` shows the table).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items):
    # pytest calls this hook with every collected test, not only this folder's
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.run_coverage)


@pytest.fixture(scope="session")
def mirror_root() -> Path:
    root = os.environ.get("MIRROR_ROOT")
    if not root:
        pytest.skip("MIRROR_ROOT is unset: the run-coverage suite reads the frameworks' example configs from their "
                    "bare clones")
    return Path(root)
