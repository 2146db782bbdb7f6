"""Shell completion of flag values and of the config keys an override names.

The shell asks while the user types, so each answer reads only what it needs: the dialect names from the registry,
the GPU kinds from the memory table, and for an override the schema of the dialect that FILE (or `--dialect`) is
written in. A completion never fails out loud: an unreadable FILE gives no key completions.
"""

from __future__ import annotations

import os
from typing import Iterator

import typer

# The prefixes of a Hydra override that adds (+), adds or changes (++) or deletes (~) a key.
OVERRIDE_PREFIXES = ("++", "+", "~")


def dialects(incomplete: str) -> list[str]:
    from rlcfg import schema

    return [name for name in schema.names() if name.startswith(incomplete)]


def gpus(incomplete: str) -> list[str]:
    from rlcfg.plan.memory import GPU_MEMORY_MIB

    return [name for name in GPU_MEMORY_MIB if name.startswith(incomplete)]


def releases(ctx: typer.Context, args: list[str], incomplete: str) -> list[str]:
    """The releases of the dialect `--dialect` names, else of the one FILE is written in, else of all dialects."""
    from rlcfg import schema

    chosen = _dialect_of(ctx, args)
    return _releases_of([chosen] if chosen else schema.names(), incomplete)


def target_releases(ctx: typer.Context, args: list[str], incomplete: str) -> list[str]:
    """`convert --to-release`: the releases of the dialect `--to` names (all dialects' while it is not given)."""
    from rlcfg import schema

    target = ctx.params.get("to") or _option_value(args or _typed_words(), ("--to", "-t"))
    return _releases_of([target] if target in schema.names() else schema.names(), incomplete)


def _releases_of(names: list[str], incomplete: str) -> list[str]:
    from rlcfg import schema

    found = dict.fromkeys(release for name in names for release in schema.load(name).releases)
    return [release for release in found if release.startswith(incomplete)]


def override_keys(ctx: typer.Context, args: list[str], incomplete: str) -> list[str]:
    """The keys of FILE's dialect that continue `incomplete`, one section level at a time: `trainer.` completes to
    `trainer.algorithm.` and `trainer.epochs=`. A `+`, `++` or `~` in front is kept; `~` takes no value."""
    if "=" in incomplete:
        return []
    prefix = next((p for p in OVERRIDE_PREFIXES if incomplete.startswith(p)), "")
    name = _dialect_of(ctx, args)
    if name is None:
        return []
    return [prefix + key for key in _continuations(name, incomplete[len(prefix):], "" if prefix == "~" else "=")]


def key_prefixes(ctx: typer.Context, args: list[str], incomplete: str) -> list[str]:
    """`rlcfg keys DIALECT PREFIX`: the sections and keys of DIALECT that continue `incomplete`."""
    name = _dialect_of(ctx, args)
    return [] if name is None else _continuations(name, incomplete, "")


def _continuations(dialect: str, typed: str, ending: str) -> list[str]:
    keys = list(_keys(dialect))
    sections = {key.rsplit(".", 1)[0] for key in keys if "." in key}
    found: dict[str, None] = {}
    for key in keys:
        if key.startswith(typed) and key not in sections:  # a section completes to its keys, not to a value
            rest = key[len(typed):]
            cut = rest.find(".")
            found[typed + (rest[:cut + 1] if cut >= 0 else rest + ending)] = None
    return list(found)


def _keys(dialect: str) -> Iterator[str]:
    from rlcfg import schema
    from rlcfg.schema.base import iter_fields

    seen: set[str] = set()
    for root in schema.load(dialect).variants().values():
        for path, _info, _owner in iter_fields(root):
            key = ".".join(map(str, path))
            if key not in seen:
                seen.add(key)
                yield key


def _dialect_of(ctx: typer.Context, args: list[str]) -> str | None:
    """`--dialect` (or the `keys` command's DIALECT) when given, else the dialect FILE's top-level keys point to.
    The words typed so far are read as well as the parsed parameters: while an option's value is being typed, click
    assigns no parameter at all."""
    from rlcfg import schema

    args = args or _typed_words()

    given = ctx.params.get("dialect") or _option_value(args, ("--dialect", "-d"))
    if given in schema.names():
        return given
    path = ctx.params.get("file") or next((word for word in args if not word.startswith("-")
                                           and word not in ctx.command_path.split() and os.path.isfile(word)), None)
    if not path:
        return None
    from rlcfg.frontend import dialect_of

    try:
        return dialect_of(path)
    except Exception:  # noqa: BLE001 - an unreadable or half-written file completes nothing, and never a traceback
        return None


def _typed_words() -> list[str]:
    """The command line being completed, as the shell hands it to the completion (bash: COMP_WORDS; zsh, fish and
    PowerShell: _TYPER_COMPLETE_ARGS)."""
    from click.shell_completion import split_arg_string

    return split_arg_string(os.environ.get("_TYPER_COMPLETE_ARGS") or os.environ.get("COMP_WORDS") or "")


def _option_value(args: list[str], names: tuple[str, ...]) -> str | None:
    for before, word in zip(args, args[1:]):
        if before in names:
            return word
    return next((word.split("=", 1)[1] for word in args if word.split("=", 1)[0] in names and "=" in word), None)
