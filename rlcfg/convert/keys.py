"""The dialect keys behind an Experiment field, so that a conversion's losses speak the source's and the target's
words (`actor_rollout_ref.actor.clip_ratio_c`, not `algorithm.policy_options.loss_cap`).

Each dialect's emitter is the one place that knows which of its keys an Experiment field becomes. So the keys are
found by asking it: the Experiment is emitted twice, once as it is and once with the field set to the other side's
value, and the keys whose values differ are the field's. A field the dialect cannot express changes no key.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import Any, Callable

from rlcfg.convert.compare import ABSENT, SECTION
from rlcfg.ir import Experiment

MAX_KEYS = 2  # a field that several keys carry (a batch size, say) is named by its first ones


def keys_of(emit: Callable[[Experiment], Any], experiment: Experiment, path: str, value: Any,
            base: dict | None = None) -> tuple[str, ...]:
    """The dotted keys that `emit` writes differently when the Experiment's field `path` is `value`; empty where
    the emitter has no key for it (or cannot write the changed Experiment). `base`: the flattened emission of
    `experiment` itself, when already at hand."""
    try:
        before = base if base is not None else flat(emit(experiment).tree)
    except Exception:  # noqa: BLE001 - an Experiment the emitter cannot write names no key
        return ()
    for tried in (value, _nudged(_current(experiment, path))):
        if tried is ABSENT or tried is SECTION:
            continue
        try:
            after = flat(emit(with_field(experiment, path.split("."), tried)).tree)
        except Exception:  # noqa: BLE001 - a value the emitter cannot write (it checks its own invariants)
            continue
        differ = [key for key in dict.fromkeys([*before, *after])
                  if before.get(key, ABSENT) != after.get(key, ABSENT)]
        if differ:
            return tuple(differ[:MAX_KEYS])
    return ()


def _nudged(value: Any) -> Any:
    """Another value of the same kind, for a field whose other side's value this dialect cannot write (null, say):
    a key that holds the field still changes with it."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 2 + 1
    return ABSENT


def _current(node: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(node, tuple):
            node = next((r for r in node if getattr(r, "name", None) == part),
                        dict(p for p in node if isinstance(p, tuple) and len(p) == 2).get(part) if node else None)
        else:
            node = getattr(node, part, None)
    return node


def flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping's leaves by dotted key (lists are leaves)."""
    if not isinstance(tree, dict) or not tree:
        return {prefix: tree} if prefix else {}
    out: dict[str, Any] = {}
    for key, inner in tree.items():
        out.update(flat(inner, f"{prefix}.{key}" if prefix else str(key)))
    return out


def with_field(node: Any, parts: list[str], value: Any) -> Any:
    """`node` (an Experiment, or a part of one) with the field at `parts` set to `value`: roles are named by their
    name (`roles.actor.optimizer.lr`), a rollout engine's settings by their key (`roles.rollout.engine.seed`)."""
    if not parts:
        return value
    head, rest = parts[0], parts[1:]
    if isinstance(node, tuple) and all(is_dataclass(r) and hasattr(r, "name") for r in node):
        return tuple(with_field(r, rest, value) if r.name == head else r for r in node)
    if isinstance(node, tuple) and all(isinstance(pair, tuple) and len(pair) == 2 for pair in node):
        if rest:
            raise KeyError(head)
        return tuple((k, value if k == head else v) for k, v in node)
    if not is_dataclass(node) or head not in {f.name for f in fields(node)}:
        raise KeyError(head)
    return replace(node, **{head: with_field(getattr(node, head), rest, value)})
