"""The settings a smoke run changes in the config itself: each one `rlcfg run` refuses (an RLC118 note of
`rlcfg validate`) is set, for the smoke run only, to a value rlcfg runs, so that `rlcfg run FILE --smoke` tries
every config that validates and lists what it changed in the config's own keys.

The change is made at the config, before lowering: each is an override in the dialect's own grammar, laid after
the user's, and the config is checked again with it, so that the lowering sees only values it runs. The value
comes from the refusal itself: the value its hint proposes for the key, the field's default (a refused key), the
`key: value` the hint proposes for another key, the other boolean, the value of a key the refusal names with it,
or that key's default (a refused combination). The validator is the judge, as for `rlcfg validate --fix`: a
candidate is kept only when the refusal of its key is gone, no error is left and no more refusals than before are
left; a key is changed once. A candidate that breaks a rule tying its key to another (single-turn generation makes
SkyRL's input limit equal its prompt limit) brings that other key along, found the same way from the error
(`repair`), and both are listed.
What no candidate clears is still refused, as without --smoke. A pipeline rlcfg does not model (RLC116) is not
touched: the caller refuses it before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from rlcfg.patterns import lazy
from rlcfg.schema.ledger import ABSENT as _ABSENT
from rlcfg.schema.ledger import lookup as _lookup
from rlcfg.source.tree import dotted, split_dotted

REFUSED = "RLC118"
# Validator runs per smoke run (each takes 10-300 ms); a config with more refusals than this allows keeps the rest.
MAX_CHECKS = 60
MAX_ENTRIES = 8  # entries of a refused mapping tried alone
MAX_REPAIRS = 3  # keys changed to keep one change valid; more is a different config, not a value that runs
_DELETE = object()  # the candidate that removes a key the defaults do not have (a key added to an open mapping)
# A `key: value` or `key=value` the hint of a refusal proposes, in backquotes.
_HINT_SETTING = lazy(r"`([A-Za-z_][\w.]*)(?::\s+|=)([^`]+)`")


@dataclass(frozen=True)
class Change:
    key: str  # dotted, in the config's own keys
    old: str  # as `rlcfg validate` shows values
    new: str
    reason: str  # why `rlcfg run` refuses the old value, in the refusal's words
    override: str  # the override that makes it, in the dialect's grammar


@dataclass(frozen=True)
class Settled:
    result: Any  # the CheckResult of the config with `overrides` laid over it
    overrides: tuple[str, ...]
    changes: tuple[Change, ...]

    @property
    def refused(self) -> list[Any]:
        """The refusals no value cleared."""
        return refusals(self.result)


def refusals(result: Any) -> list[Any]:
    return [d for d in result.diagnostics if d.code == REFUSED]


def settle(check: Callable[[Sequence[str]], Any], result: Any, max_checks: int = MAX_CHECKS) -> Settled:
    """Clear the refusals of `result` (the check of the config as the user gave it) one at a time. `check(extra)`
    checks the config again with the overrides `extra` after the user's."""
    if result.config is None or result.pipeline is not None or not refusals(result):
        return Settled(result, (), ())
    from rlcfg import schema

    spec = schema.load(result.dialect)
    overrides: list[str] = []
    changes: list[Change] = []
    changed: set[str] = set()
    budget = Budget(max_checks)
    progress = True
    while progress and budget.left > 0:
        progress = False
        before = refusals(result)
        for refusal in before:
            # Of the candidates that clear this refusal, the one that leaves the fewest (the earliest of those).
            best = None
            for key, override, trial in _trials(spec, result, refusal, changed,
                                                lambda more: check([*overrides, *more]), budget):
                repairs: tuple[Change, ...] = ()
                if errors(trial):
                    # The value that runs may break a rule that ties the key to another (single-turn generation
                    # makes the input limit equal the prompt limit): that other key follows, or the value is out.
                    repaired = repair(spec, lambda more: check([*overrides, override, *more]), trial,
                                      changed | {key, refusal.path}, budget, len(before))
                    if repaired.changes is None:
                        continue
                    trial, repairs = repaired.result, repaired.changes
                left = refusals(trial) if trial.config is not None else None
                if left is None or any(d.path == refusal.path for d in left) or len(left) > len(before):
                    continue
                if best is None or len(left) < best[0]:
                    best = (len(left), key, override, trial, repairs)
                if not left:
                    break
            if best is None:
                continue
            _, key, override, trial, repairs = best
            old = _value(result, split_dotted(key))
            cause = old if key == refusal.path else _value(result, split_dotted(refusal.path))
            changes.append(Change(key, show(old), show(_value(trial, split_dotted(key))), reason(refusal, cause),
                                  override))
            changes += repairs
            overrides += [override, *(c.override for c in repairs)]
            changed.update([key, *(c.key for c in repairs)])
            result, progress = trial, True
            break  # the refusals are read again from the config as it now is
    return Settled(result, tuple(overrides), tuple(changes))


@dataclass
class Budget:
    left: int  # validator runs


@dataclass(frozen=True)
class Repaired:
    result: Any  # the check with the repairs laid over it
    changes: tuple[Change, ...] | None  # None: the errors stayed


def _trials(spec: Any, result: Any, diagnostic: Any, skip: set[str], check: Callable[[Sequence[str]], Any],
            budget: Budget) -> Iterator[tuple[str, str, Any]]:
    """The candidates of `diagnostic` whose key is not in `skip`, each checked while the budget lasts:
    (key, override, the check with the override)."""
    for key, value, text in candidates(spec, result, diagnostic):
        if key in skip or budget.left <= 0:
            continue
        override = override_text(spec, result, key, value, text)
        if override is None:
            continue
        budget.left -= 1
        yield key, override, check([override])


def errors(result: Any) -> list[Any]:
    return [d for d in result.diagnostics if d.severity.value == "error"]


def repair(spec: Any, check: Callable[[Sequence[str]], Any], result: Any, frozen: set[str], budget: Budget,
           most_refusals: int, max_repairs: int = MAX_REPAIRS) -> Repaired:
    """Clear the errors that a change made, one key at a time, leaving the keys in `frozen` alone: each error's
    own candidates (its key's default, its hint's `key: value`, the value of a key it names). A repair is kept when
    it leaves fewer errors and at most `most_refusals` refusals (a config with errors is not judged for refusals, so
    the count before the change is the measure)."""
    changes: list[Change] = []
    extra: list[str] = []
    while errors(result):
        if len(changes) >= max_repairs or budget.left <= 0:
            return Repaired(result, None)
        found = next(((trial, key, override, error) for error in errors(result)
                      for key, override, trial in _trials(spec, result, error, frozen,
                                                          lambda more: check([*extra, *more]), budget)
                      if _better(trial, result, most_refusals)), None)
        if found is None:
            return Repaired(result, None)
        trial, key, override, error = found
        path = split_dotted(key)
        changes.append(Change(key, show(_value(result, path)), show(_value(trial, path)),
                              f"so that the config still validates: {error.message}", override))
        extra.append(override)
        frozen = frozen | {key}
        result = trial
    return Repaired(result, tuple(changes))


def _better(trial: Any, than: Any, most_refusals: int) -> bool:
    return len(errors(trial)) < len(errors(than)) and len(refusals(trial)) <= most_refusals


def candidates(spec: Any, result: Any, refusal: Any) -> list[tuple[str, Any, str | None]]:
    """The (key, value, text as written) tried against one refusal, in order; text is None where the value is
    to be written from the Python value."""
    path = split_dotted(refusal.path)
    current = _value(result, path)
    found: list[tuple[str, Any, str | None]] = []
    if isinstance(current, dict) and len(current) > 1:
        # Several entries where rlcfg runs one (ROLL's reward domains): one of them is closer to the config than none.
        found += [(refusal.path, {name: current[name]}, None) for name in list(current)[:MAX_ENTRIES]]
    # The value the refusal's own hint gives its key is the rule's word on what runs: tried before the default,
    # which may clear the refusal by describing another run (AReaL's empty allocation_mode trains on no GPU).
    proposed = [(_in_context(result, key, path), None, text.strip())
                for key, text in _HINT_SETTING.findall(refusal.hint or "")]
    found += [c for c in proposed if c[0] == refusal.path]
    default = default_value(spec, result, path)
    if default is not _ABSENT:
        found.append((refusal.path, default, None))
    found += [c for c in proposed if c[0] != refusal.path]
    if isinstance(current, bool):
        found.append((refusal.path, not current, None))
    related = [name for name, _origin in (refusal.related or [])]
    for name in related:
        value = _value(result, split_dotted(name))
        if value is not _ABSENT:
            found.append((refusal.path, value, None))
    for name in related:
        other = default_value(spec, result, split_dotted(name))
        if other is not _ABSENT and other is not _DELETE:
            found.append((name, other, None))
    seen, unique = set(), []
    for key, value, text in found:
        if text is None and value is not _DELETE and value == _value(result, split_dotted(key)):
            continue  # no change
        mark = (key, repr(value), text)
        if mark not in seen:
            seen.add(mark)
            unique.append((key, value, text))
    return unique


def default_value(spec: Any, result: Any, path: tuple) -> Any:
    """What `path` holds when the config does not set it: the dialect's documented default, the field's own
    default inside a section that is absent by default, _DELETE for a key of an open mapping, _ABSENT when it has
    none (a required field)."""
    from rlcfg.schema.base import declared_field

    value = _lookup(spec.defaults(result.root, result.release), path)
    if value is not _ABSENT:
        return value
    located = declared_field(result.root, path)
    if located is None:
        return _DELETE
    info = located[0]
    return _ABSENT if info.is_required() else info.get_default(call_default_factory=True)


def override_text(spec: Any, result: Any, key: str, value: Any, text: str | None) -> str | None:
    """The override that gives `key` the value, in the dialect's grammar; None where the grammar cannot say it
    (OmegaConf's dotlist deletes nothing)."""
    from rlcfg.fix import scalar_text

    hydra = spec.override_grammar == "hydra"
    if value is _DELETE:
        return f"~{key}" if hydra else None
    written = text if text is not None else scalar_text(value)
    # `++` sets a key whether or not the composed config has it (Hydra refuses a plain set of an absent key).
    return f"++{key}={written}" if hydra else f"{key}={written}"


def show(value: Any) -> str:
    if value is _ABSENT:
        return "(not set)"
    from rlcfg.schema.validate import _short

    return repr(value) if isinstance(value, str) else _short(value)


def reason(refusal: Any, old: Any) -> str:
    """Why the old value is refused, without the `rlcfg run refuses key = value:` that the table says already."""
    from rlcfg.schema.validate import describe_value

    message = refusal.message
    for prefix in (f"`rlcfg run` refuses `{refusal.path}` = {describe_value(old)}: ",
                   f"`rlcfg run` refuses `{refusal.path}` = {show(old)}: "):
        if message.startswith(prefix):
            return message[len(prefix):]
    rest = message.removeprefix("`rlcfg run` refuses ")
    # A rule's own "`key` = value: why": the key and a bare value are in the table already.
    named = f"`{refusal.path}` = "
    value, colon, why = rest[len(named):].partition(": ")
    if rest.startswith(named) and colon and " " not in value:
        return why
    return rest


def _in_context(result: Any, key: str, refused: tuple) -> str:
    """A key a hint names, as a full path: as written when the config has it, else under the refused key's
    section (`use `loss_type: actor`` said of `algorithm.loss_type`)."""
    path = split_dotted(key)
    if result.tree is not None and result.tree.has(path):
        return key
    for depth in range(len(refused) - 1, 0, -1):
        candidate = refused[:depth] + path
        if result.tree is not None and result.tree.has(candidate):
            return dotted(candidate)
    return dotted(refused[:-1] + path)


def _value(result: Any, path: tuple) -> Any:
    tree = result.tree
    if tree is None or not tree.has(path):
        return _ABSENT
    return tree.get(path)


__all__ = ["Budget", "Change", "Repaired", "Settled", "candidates", "default_value", "errors", "override_text", "reason",
           "refusals", "repair", "settle"]
