"""Regular expressions compiled when first used.

A module-level `re.compile` costs about 0.1 ms when the module is imported, whether or not the pattern is ever
matched. `rlcfg validate` imports two dozen of them on its way to a verdict, and a clean config needs a few: the
others read overrides, interpolations or mini-languages the config does not use. `lazy` defers the compilation
to the first match, and then hands out the compiled pattern's own methods.
"""

from __future__ import annotations

import re
from typing import Any


class LazyPattern:
    """Stands for `re.compile(pattern, flags)`: its attributes are the compiled pattern's."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._source = (pattern, flags)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy, pickle and the like probe for protocols: they are not the pattern's
            raise AttributeError(name)
        value = getattr(re.compile(*self._source), name)
        setattr(self, name, value)  # later lookups find it without coming here
        return value

    def __repr__(self) -> str:
        return f"lazy({self._source[0]!r}{f', {self._source[1]!r}' if self._source[1] else ''})"


def lazy(pattern: str, flags: int = 0) -> Any:
    """`re.compile(pattern, flags)`, compiled at its first use. Typed as Any: it is used as a re.Pattern."""
    return LazyPattern(pattern, flags)
