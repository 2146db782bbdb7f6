"""What the runtime tests share."""

from __future__ import annotations

import sys

import pytest


@pytest.fixture(scope="module")
def ray_instance():
    """One local Ray instance for a module's in-process runs (each run reuses it), shut down after the module so the
    next starts clean."""
    yield
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()
