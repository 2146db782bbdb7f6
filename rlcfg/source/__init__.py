"""Reading what users write: YAML with positions, overrides, interpolation, composition, launch scripts, and the
project file.

The project file's name and its search live here, so that a check without one (nearly every check) imports
nothing more for it; rlcfg.source.project reads one when it is found.
"""

from __future__ import annotations

import os

PROJECT_FILE = "rlcfg.project.yaml"


def find_project(folder: str) -> str | None:
    """The nearest project file in `folder` or a folder above it, as messages show it (from where rlcfg runs)."""
    here = os.path.abspath(folder)
    while True:
        path = os.path.join(here, PROJECT_FILE)
        if os.path.isfile(path):
            shown = os.path.relpath(path)
            return path if shown.startswith("..") else shown
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent
