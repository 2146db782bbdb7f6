"""Hypothesis profiles.

`ci`, the default: every property test draws the same examples on every machine and every run (derandomized, no
example database, no deadline), so the suite fails only when the code changes, never by the luck of the draw or
by what a developer's local `.hypothesis/` database remembers.

`fuzz`: randomized, ten times the examples, and the local database on, to look for new failures:

    HYPOTHESIS_PROFILE=fuzz python -m pytest -q tests/test_properties.py tests/test_hostile_inputs.py

Each failure it finds becomes an explicit regression case (an `@example` or a plain test), so `ci` keeps it.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
# ten times hypothesis's default of 100 examples; tests that set their own count scale it the same way
settings.register_profile("fuzz", derandomize=False, deadline=None, print_blob=True, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
