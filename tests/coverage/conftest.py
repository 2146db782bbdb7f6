"""The coverage suites over the frameworks' own example configs and launch scripts:

- run coverage (`-m run_coverage`, under a minute): `rlcfg validate` and `rlcfg run --dry-run`, to find what validate
  passes and a run would still refuse;
- smoke coverage (`-m smoke_coverage`, hours of CPU): `rlcfg run --smoke --steps 2` on every config that validates.

The default test run deselects both (pyproject's addopts) because they need bare clones of the five frameworks.
Run them with `MIRROR_ROOT=/work/.mirror python -m pytest -m run_coverage tests/coverage -s -q` (`-s` shows the
table), or `-m smoke_coverage`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items):
    # pytest calls this hook with every collected test, not only this folder's
    for item in items:
        path = Path(str(item.fspath))
        if HERE in path.parents:
            item.add_marker(pytest.mark.smoke_coverage if path.name == "test_smoke_coverage.py"
                            else pytest.mark.run_coverage)


@pytest.fixture(scope="session")
def mirror_root() -> Path:
    root = os.environ.get("MIRROR_ROOT")
    if not root:
        pytest.skip("MIRROR_ROOT is unset: the run-coverage suite reads the frameworks' example configs from their "
                    "bare clones")
    return Path(root)
