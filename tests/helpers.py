"""Shared test helpers: golden files, running the CLI, locating the seeds."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
TEMPLATES = ROOT / "templates"
FIXTURES = ROOT / "tests" / "fixtures"
SEEDS = ROOT.parent / "shared" / "seeds"
UPDATE = os.environ.get("RLCFG_UPDATE_GOLDEN") == "1"


def assert_golden(name: str, actual: str) -> None:
    """Compare with tests/golden/<name>; RLCFG_UPDATE_GOLDEN=1 rewrites the file instead."""
    path = GOLDEN / name
    if UPDATE or not path.exists():
        if not UPDATE:
            pytest.fail(f"golden file {path.relative_to(ROOT)} is missing; run with RLCFG_UPDATE_GOLDEN=1 to create it")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual)
        return
    expected = path.read_text()
    assert actual == expected, f"output differs from {path.relative_to(ROOT)} (RLCFG_UPDATE_GOLDEN=1 to accept)"


def cli(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run `rlcfg` as a user would, in a subprocess."""
    # A fixed HOME: templates write `${oc.env:HOME}/...`, and what the CLI prints must not depend on who runs it.
    # The compiled schemas then go to a folder of the tests' own, not under that HOME.
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "100", "HOME": "/home/user",
                "RLCFG_CACHE_DIR": os.path.join(tempfile.gettempdir(), "rlcfg-tests-cache"), **(env or {})}
    return subprocess.run([sys.executable, "-m", "rlcfg", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env=full_env, timeout=120)


def seed(name: str) -> str:
    """The text of a seed document (the spec), or skip when the shared folder is not beside the checkout."""
    matches = sorted(SEEDS.glob(f"{name}_*.txt")) if SEEDS.exists() else []
    if not matches:
        pytest.skip(f"seed {name} not found under {SEEDS}")
    return matches[0].read_text()


def register_dialect(monkeypatch, dialect) -> None:
    """Make a dialect declared in a test known to the registry, under its own name, for that test only."""
    from rlcfg import schema

    original_load, original_names = schema.load, schema.names
    monkeypatch.setattr(schema, "load", lambda name: dialect if name == dialect.name else original_load(name))
    monkeypatch.setattr(schema, "names", lambda: original_names() + [dialect.name])
