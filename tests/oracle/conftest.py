"""The differential suite: rlcfg's verdict against each framework's own config loader (../shared/oracle/).

Every test here is marked `oracle`; the default test run deselects them (pyproject's addopts) because the
loaders need the frameworks' mirrors and their own virtualenvs (minutes to build, seconds per file). Run them with
`MIRROR_ROOT=/path/to/mirrors python -m pytest -m oracle tests/oracle -s` (`-s` shows the agreement tables).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ORACLE_DIR = Path(os.environ.get("RLCFG_ORACLE_DIR", Path(__file__).resolve().parents[3] / "shared" / "oracle"))


HERE = Path(__file__).parent


def pytest_collection_modifyitems(items):
    # pytest calls this hook with every collected test, not only this folder's
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.oracle)


@pytest.fixture(scope="session")
def oracle_dir() -> Path:
    if not os.environ.get("MIRROR_ROOT"):
        pytest.skip("MIRROR_ROOT is unset: the oracles need bare clones of the five frameworks")
    if not ORACLE_DIR.is_dir():
        pytest.skip(f"no oracle scripts at {ORACLE_DIR} (set RLCFG_ORACLE_DIR)")
    return ORACLE_DIR
