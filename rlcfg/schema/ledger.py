"""The run ledger: what `rlcfg run` does with each parameter, read off the fields' own declarations.

Every parameter of a dialect is honored (the lowering reads it and the runtime acts on it with the framework's
meaning), refused (`rlcfg run` stops before Ray starts when it is set to anything but its default) or inert (it
changes nothing that is computed). `refusals` finds the refused settings a config sets; `rlcfg validate` shows
them as notes (RLC118) and `rlcfg run` stops on them. `unread_settings` finds the inert settings the framework itself
never applies (`Fate.unread`), which `rlcfg validate` warns of (RLC307).
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from rlcfg.records import record
from rlcfg.schema.base import Fate, Section, declared_field, field_fate, iter_fields
from rlcfg.source.tree import SourceTree


@record(frozen=True)
class Setting:
    """A parameter a config sets to something other than its default, with its fate's reason."""

    path: tuple
    value: Any
    reason: str


def fates(root: type[Section]) -> Iterator[tuple[tuple, Fate | None]]:
    """Every parameter of a dialect's tree with its declared fate (None: not declared)."""
    for path, info, owner in iter_fields(root):
        yield path, field_fate(info, owner)


def refusals(root: type[Section], tree: SourceTree, defaults: dict,
             resolved_defaults: Callable[[], dict] | None = None) -> list[Setting]:
    """The refused parameters the user set to something other than their default, in the document's order."""
    return _set_with(lambda fate: fate.kind == "refused", root, tree, defaults, resolved_defaults)


def unread_settings(root: type[Section], tree: SourceTree, defaults: dict,
                    resolved_defaults: Callable[[], dict] | None = None) -> list[Setting]:
    """The parameters the framework never applies that the user set to something other than their default."""
    return _set_with(lambda fate: fate.unread, root, tree, defaults, resolved_defaults)


def _set_with(chosen: Callable[[Fate], bool], root: type[Section], tree: SourceTree, defaults: dict,
              resolved_defaults: Callable[[], dict] | None) -> list[Setting]:
    """The parameters whose fate is `chosen` and that the user set to something other than their default.

    Both sides are compared resolved: a release whose default is an interpolation (SkyRL's
    `generator.rope_scaling: ${trainer.rope_scaling}`) defaults to what that resolves to, so a config that writes the
    same interpolation, or the value it resolves to, sets nothing. `resolved_defaults` gives the defaults with their
    interpolations resolved; it is asked only when such a default is met."""
    found = []
    resolved: list[dict] = []
    for path in tree.written_paths():
        if not tree.has(path):
            continue
        # the keys the document sets, not every field of the dialect: RLinf's inventoried sections are then built
        # only where the document has them
        located = declared_field(root, path)
        if located is None:
            continue
        info, owner = located
        fate = field_fate(info, owner)
        if fate is None or not chosen(fate):
            continue
        value = tree.get(path)
        default = lookup(defaults, path)
        if isinstance(default, str) and "${" in default:
            if not resolved:
                resolved.append(resolved_defaults() if resolved_defaults is not None else {})
            default = lookup(resolved[0], path)
        if default is ABSENT and not info.is_required():
            # A key inside a section that is absent by default (an optional section such as AReaL's `ref`): the
            # key's own default.
            default = info.get_default(call_default_factory=True)
        if default == value:
            continue
        found.append(Setting(path, value, fate.reason))
    return found


ABSENT = object()  # what `lookup` gives for a path the tree does not hold


def lookup(tree: Any, path: tuple) -> Any:
    """The value at `path` in a tree of plain mappings (a dialect's defaults), else ABSENT."""
    for part in path:
        if not isinstance(tree, dict) or part not in tree:
            return ABSENT
        tree = tree[part]
    return tree
