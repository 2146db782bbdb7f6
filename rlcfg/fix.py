"""Fixes for batch and parallel-size errors, found by solving a dialect's rules together.

Each rule's hint speaks for that rule alone: "use a sample_per_episode of 1536 or 2048" is right for the global
batch and wrong for the prompt groups. The solver here looks for one assignment that satisfies all of them: it
tries values near the user's (multiples and divisors of the other numbers involved, the rules' own suggestions),
re-running the real validator on each candidate, and keeps the one that changes the fewest keys by the smallest
ratio and leaves no batch or parallel-size error and no error that was not there before. Because the judge is the
validator itself, a fix is never proposed that the rules would then reject.

`solve` finds the edits; `attach` hangs them on the diagnostics they clear; `apply_to_text` writes the edits whose
old value sits in the checked file, byte for byte in place, so comments, key order and quoting are untouched.
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from rlcfg.diagnostics import Diagnostic, Edit, Origin, Severity
from rlcfg.patterns import lazy
from rlcfg.source.tree import Path, dotted, split_dotted

# The codes whose errors are arithmetic over integer keys: batches that must divide, parallel sizes that must
# divide a GPU count, colocated roles that must have equal sizes.
SOLVABLE_CODES = frozenset({"RLC300", "RLC400", "RLC402"})

# Validator runs per search (each takes 10-100 ms): `validate` spends a short search on its `fix:` lines, and
# `--fix`/`--diff` a longer one.
DEFAULT_BUDGET = 30
FIX_BUDGET = 120
MAX_EDITS = 3  # more keys than this is a redesign, not a fix
BEAM = 4  # partial assignments kept between rounds
CANDIDATES_PER_KEY = 10
MAX_RATIO = 8.0  # a proposed value is within this factor of the user's
MAX_VALUE = 10**12  # larger numbers are typos or hostile input, not batch sizes to fit


@dataclass
class Problem:
    """What the validator needs to check a config again with edits laid over it."""

    text: str
    filename: str
    overrides: Sequence[str] = ()
    dialect: str | None = None
    release: str | None = None
    env: Mapping[str, str] | None = None
    base_dir: str = "."

    def check(self, extra: Sequence[str] = ()) -> Any:
        from rlcfg.frontend import check_text

        return check_text(self.text, self.filename, [*self.overrides, *extra], self.dialect, False, self.env,
                          self.base_dir, self.release)


@dataclass
class Solution:
    edits: list[Edit]
    cleared: list[Diagnostic]  # the original diagnostics that no longer appear once the edits are applied
    runs: int  # validator runs the search took


@dataclass
class _State:
    values: dict[str, int] = field(default_factory=dict)  # key -> new value
    result: Any = None
    remaining: int = 0  # solvable errors left
    new: int = 0  # errors that the original config did not have
    last: str = ""  # the key this state changed last


def _error_keys(result: Any) -> set[tuple[str, str]]:
    return {(d.code, d.path) for d in result.diagnostics if d.severity is Severity.ERROR}


def solvable(result: Any) -> list[Diagnostic]:
    return [d for d in result.diagnostics if d.severity is Severity.ERROR and d.code in SOLVABLE_CODES]


def solve(problem: Problem, result: Any | None = None, budget: int = DEFAULT_BUDGET,
          partial_when_cut_short: bool = True, safe_only: bool = False,
          committed: Any = None) -> Solution | None:
    """The nearest edits that leave no batch or parallel-size error and add no error; failing that, the edits that
    clear the most of them and add none; None when no candidate clears any. A search that runs out of budget
    gives its best partial fix only with `partial_when_cut_short`: a longer search might have found a whole one.

    `safe_only` tries only safe edits (`unsafe_reason`). `committed`: the checked file as last committed
    (`committed_tree`); a key the user changed since is tried at its committed value first, which costs nothing."""
    result = result if result is not None else problem.check()
    if result.dialect is None or result.tree is None or not solvable(result):
        return None
    from rlcfg import schema

    spec = schema.load(result.dialect)
    rule_keys = {rule.id: rule.keys for rule in spec.rules}
    before = _error_keys(result)
    original: dict[str, int] = {}
    unwritten = {dotted(path) for path, origin in result.tree.values.items() if origin.kind == "default"}
    restores = _restores(result, committed)
    runs = 0
    seen: dict[tuple, _State] = {}

    def evaluate(values: dict[str, int], last: str) -> _State | None:
        nonlocal runs
        marker = tuple(sorted(values.items()))
        if marker in seen:
            return None
        overrides = [_override_text(spec, result.tree, split_dotted(k), v) for k, v in sorted(values.items())]
        runs += 1
        try:
            checked = problem.check(overrides)
        except Exception:  # noqa: BLE001 - a rule that trips over a value the user never wrote must not stop validate
            seen[marker] = _State(dict(values), None, 10**9, 10**9, last)
            return None
        errors = _error_keys(checked)
        state = _State(dict(values), checked, len(solvable(checked)),
                       len({e for e in errors if e not in before and e[0] not in SOLVABLE_CODES}), last)
        seen[marker] = state
        return state

    def clean(state: _State) -> bool:  # no error the original config did not have
        return not (_error_keys(state.result) - before)

    def best_partial() -> Solution | None:
        """When no assignment clears every batch and parallel-size error (one may need a placement string
        changed, which is no number), the one that clears the most of them and adds none."""
        kept = [s for s in seen.values() if s.result is not None and clean(s) and s.remaining < len(solvable(result))]
        if not kept:
            return None
        best = min(kept, key=lambda s: (s.remaining, _cost(s.values, original, unwritten, restores)))
        return _solution(best, result, spec, original, runs, restores)

    frontier = [_State({}, result, len(solvable(result)), 0)]
    for depth in range(MAX_EDITS):
        # Best first: every assignment one edit beyond the frontier, cheapest first, so the first that clears
        # everything is the nearest this round can reach.
        options: list[tuple[tuple, dict[str, int], str]] = []
        for state in frontier:
            for key, value, satisfied in _candidates(state.result, rule_keys, problem, restores):
                original.setdefault(key, _int_at(result.tree, split_dotted(key)) or value)
                if safe_only and unsafe_reason(spec, result, key, value, restores):
                    continue
                if key not in state.values:
                    values = {**state.values, key: value}
                    # As few keys as possible; among as many, each constraint the new value satisfies counts as
                    # a change of SATISFIED_BONUS less, in the key's own weight (a value that satisfies two errors'
                    # constraints is tried before one 10 times nearer that satisfies none, hardware sizes too).
                    keys_changed, change, order = _cost(values, original, unwritten, restores)
                    bonus = SATISFIED_BONUS * satisfied * _weight(key)
                    options.append(((keys_changed, change - bonus, order), values, key))
        options.sort(key=lambda option: option[0])
        grown: list[_State] = []
        # A round may spend half of what is left, so that a fix of two keys is still reached when the nearest
        # one-key candidates are many; the last round may spend it all.
        round_end = budget if depth == MAX_EDITS - 1 else runs + max((budget - runs) // 2, 1)
        for _cost_of, values, key in options:
            if runs >= budget:
                return best_partial() if partial_when_cut_short else None
            if runs >= round_end:
                break
            new = evaluate(values, key)
            if new is None:
                continue
            if new.remaining == 0 and clean(new):
                return _solution(new, result, spec, original, runs, restores)
            grown.append(new)
        # Keep the best partial assignment per key it last changed: the errors left are a poor guide to which
        # key a two-key fix starts from, so the beam must not fill up with values of one key.
        grown.sort(key=lambda s: (s.remaining, _cost(s.values, original, unwritten, restores)))
        frontier, keys_kept = [], set()
        for state in grown:
            if state.new == 0 and state.last not in keys_kept:
                frontier.append(state)
                keys_kept.add(state.last)
            if len(frontier) == BEAM:
                break
        if not frontier:
            break
    return best_partial()


def _cost(values: Mapping[str, int], original: Mapping[str, int], unwritten: Any = frozenset(),
          restores: Mapping[str, Any] | None = None) -> tuple:
    """Fewest keys first, then the smallest change in ratio (hardware sizes weigh more, and so does losing factors
    of two the user's value had: 64 prompts become 63 only when nothing rounder is near, and so does a key the
    user left at its default), then by name and value. Giving a key back the value it has in the last commit costs
    no change: the nearest config to what the user wrote is often the one before their edit."""
    restores = restores or {}
    return (len(values), sum(0.0 if k in restores and restores[k] == v else
                             _weight(k) * abs(math.log(v / original[k])) + _lost_twos(original[k], v)
                             + (UNWRITTEN_COST if k in unwritten else 0.0) for k, v in values.items()),
            sorted(values.items()))


SATISFIED_BONUS = 2.5  # in units of |log(new / old)|
UNWRITTEN_COST = 0.1  # a key the config does not write costs as much as a change of about 10 % more


TWO_WEIGHT = 0.05  # per factor of two lost, against the log of the ratio: 64 -> 63 costs as much as 3 -> 4


def _lost_twos(old: int, new: int) -> float:
    def twos(n: int) -> int:
        return (n & -n).bit_length() - 1

    return TWO_WEIGHT * max(0, twos(old) - twos(new))


def _solution(best: _State, result: Any, spec: Any, original: Mapping[str, int], runs: int,
              restores: Mapping[str, Any]) -> Solution:
    edits = [dataclasses.replace(make_edit(spec, result, key, value, original[key],
                                           unsafe_reason(spec, result, key, value, restores)),
                                 restores=restores.get(key) == value)
             for key, value in sorted(best.values.items())]
    after = _error_keys(best.result)
    cleared = [d for d in solvable(result) if (d.code, d.path) not in after]
    return Solution(edits, cleared, runs)


def make_edit(spec: Any, result: Any, key: str, value: Any, old_value: Any, unsafe: str = "") -> Edit:
    path = split_dotted(key)
    origin = result.tree.origin(path) if result.tree.has(path) else None
    in_file = (origin is not None and origin.kind == "file" and origin.file == result.file and not origin.via
               and bool(origin.line) and bool(origin.end_column) and result.tree.values.get(path) is origin)
    return Edit(key, value, old_value, origin, _override_text(spec, result.tree, path, value), in_file,
                unsafe=unsafe)


# ---- safe and unsafe edits ----------------------------------------------------------------------------------

# Keys that size the hardware the job asks for, whatever the dialect calls them.
_HARDWARE = lazy(r"(^|_)(gpus?|nodes?|devices?|world_size)(_|$)")


def unsafe_reason(spec: Any, result: Any, key: str, value: Any, restores: Mapping[str, Any]) -> str:
    """Why setting `key` to `value` may change what the experiment computes or asks for, or "" when it cannot: a
    safe edit changes a key the config writes, among those of the erring constraint (the solver tries no other),
    and no quantity of the algorithm (the dialect's `algorithm_keys`) nor the hardware. Giving a key back its
    value of the last commit is safe: it returns to the experiment as committed."""
    if key in restores and restores[key] == value:
        return ""
    what = spec.algorithm_quantity(key)
    if what is not None:
        return f"changes {what}"
    name = key.rsplit(".", 1)[-1]
    if _HARDWARE.search(name) and "batch" not in name:
        return "changes the GPUs the job asks for"
    if not result.tree.written(split_dotted(key)):
        return "sets a key the config leaves at its default"
    return ""


def committed_tree(problem: Problem) -> Any:
    """The checked file as its last commit has it (git's HEAD), read as a YAML tree; None when the file is not in a
    git work tree, is new there, or git is not installed. Read with `git cat-file` (a plain object read: no
    filter, hook or file-system monitor of the repository runs)."""
    import os
    import subprocess

    from rlcfg.source.yaml_loader import load_yaml

    folder, name = os.path.split(os.path.abspath(problem.filename))
    try:
        done = subprocess.run(["git", "-c", "core.fsmonitor=false", "-C", folder, "cat-file", "blob",
                               f"HEAD:./{name}"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    try:
        tree, _problems = load_yaml(done.stdout.decode("utf-8"), problem.filename)
    except (UnicodeDecodeError, ValueError):
        return None
    return tree


def _restores(result: Any, committed: Any) -> dict[str, Any]:
    """The integer keys the checked file writes whose value differs from the last commit's: key -> committed
    value."""
    if committed is None or result.tree is None:
        return {}
    out: dict[str, Any] = {}
    for path, origin in result.tree.values.items():
        if origin.kind != "file" or origin.file != result.file or origin.via:
            continue
        now, then = result.tree.get(path), committed.get(path) if committed.has(path) else None
        if isinstance(now, int) and isinstance(then, int) and not isinstance(then, bool) and now != then:
            out[dotted(path)] = then
    return out


_PLAIN = lazy(r"^[A-Za-z_][\w\-./]*$")
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "none", "~", "nan", "inf"}


def scalar_text(value: Any, written: str = "") -> str:
    """How to write `value` in YAML or an override: a word as a bare word, or in the quotes the old value had."""
    if isinstance(value, str):
        if written[:1] in ("'", '"') and written[:1] not in value and "\\" not in value:
            return f"{written[0]}{value}{written[0]}"
        if _PLAIN.match(value) and value.lower() not in _YAML_WORDS:
            return value
    return json.dumps(value)


def _override_text(spec: Any, tree: Any, path: Path, value: Any) -> str:
    return f"{spec.override_prefix(tree, path)}{dotted(path)}={scalar_text(value)}"


def attach(result: Any, solution: Solution) -> None:
    """Give each diagnostic the solution clears all of its edits: they were checked together, and a part of a joint
    fix applied alone may leave this error or cause another."""
    cleared = {(d.code, d.path) for d in solution.cleared}
    for d in result.diagnostics:
        if (d.code, d.path) in cleared and not d.edits:
            d.edits = list(solution.edits)


_DID_YOU_MEAN = lazy(r"did you mean `([^`]+)`\?")


def value_suggestions(problem: Problem, result: Any, into: Any = None) -> list[Edit]:
    """Make the did-you-mean of a value outside its allowed set (RLC202) an edit, once the validator has confirmed
    that the suggested value clears the error and causes none. The edits go on the diagnostics of `into` (the
    report shown, when `result` is the check of the text after its renames), else of `result`; the errors the
    wrong value caused besides (a strategy's options judged by the default strategy) fold into its error."""
    if result.dialect is None or result.tree is None:
        return []
    from rlcfg import schema

    spec = schema.load(result.dialect)
    before = _error_keys(result)
    shown = into or result
    by_key = {(d.code, d.path): d for d in shown.diagnostics}
    found: list[Edit] = []
    for d in result.diagnostics:
        match = _DID_YOU_MEAN.search(d.hint or "")
        path = split_dotted(d.path)
        target = by_key.get((d.code, d.path))
        if d.code != "RLC202" or target is None or target.edits or match is None or not d.path \
                or not result.tree.has(path):
            continue
        edit = make_edit(spec, result, d.path, match.group(1), result.tree.get(path),
                         unsafe_reason(spec, result, d.path, match.group(1), {}))
        after = _error_keys(problem.check([edit.override]))
        if (d.code, d.path) not in after and not (after - before):
            target.edits = [edit]
            found.append(edit)
            _fold(shown, target, before - after, "; the wrong value also causes")
    return found


FOLDED_SHOWN = 3  # the folded errors a message names; the rest are counted


def _fold(shown: Any, cause: Diagnostic, cleared: set, saying: str) -> None:
    """Fold into `cause` the errors of `shown` that its fix clears besides its own (`cleared`: (code, path) keys):
    one error per cause, naming the others."""
    consequences = [d for d in shown.diagnostics if d is not cause and d.severity is Severity.ERROR
                    and (d.code, d.path) in cleared]
    if not consequences:
        return
    listed = ", ".join(f"{d.code} at `{d.path or 'the top level'}`" for d in consequences[:FOLDED_SHOWN])
    if len(consequences) > FOLDED_SHOWN:
        listed += f" and {len(consequences) - FOLDED_SHOWN} more"
    cause.message += f"{saying} {'this error' if len(consequences) == 1 else 'these errors'}: {listed}"
    shown.diagnostics = [d for d in shown.diagnostics if not any(d is c for c in consequences)]


_SIBLING = lazy(r"^did you mean `([A-Za-z_][\w\-]*)`\?")


def renames(problem: Problem, result: Any) -> list[Edit]:
    """Renames for the unknown keys of the checked file whose did-you-mean names a key of the same mapping (RLC102),
    each confirmed by the validator: the renamed file no longer has that error and has no new one, except at the
    renamed key itself (its value, now read, may be wrong too). Each goes on its diagnostic. An error the rename
    clears besides (a required key the typo left unset, a batch rule broken by the default the typo left in place)
    is the typo's consequence: it is folded into the typo's error, which says so, instead of reported again."""
    if result.dialect is None or result.tree is None:
        return []
    before = _error_keys(result)
    found: list[Edit] = []
    for d in list(result.diagnostics):
        if not any(d is shown for shown in result.diagnostics):
            continue  # folded into an earlier typo's error
        match = _SIBLING.match(d.hint or "")
        origin = d.origin
        if d.code != "RLC102" or d.edits or match is None or origin is None or origin.kind != "file" \
                or origin.file != problem.filename or not origin.line or not origin.end_column:
            continue
        old_path = split_dotted(d.path)
        new_name = match.group(1)
        if result.tree.written((*old_path[:-1], new_name)):
            continue  # the mapping writes that key too: renaming would write it twice
        line = problem.text.split("\n")[origin.line - 1] if origin.line <= problem.text.count("\n") + 1 else ""
        if _unquoted(line[origin.column - 1:origin.end_column - 1]) != str(old_path[-1]):
            continue  # the key is not written where the report points (a flow mapping, an alias)
        edit = Edit(d.path, new_name, str(old_path[-1]), origin, "", True, rename=True)
        new_key = dotted((*old_path[:-1], new_name))
        renamed = Problem(apply_to_text(problem.text, [edit]), problem.filename, problem.overrides,
                          problem.dialect, problem.release, problem.env, problem.base_dir)
        try:
            after = _error_keys(renamed.check())
        except Exception:  # noqa: BLE001 -- a rename the validator cannot judge is not proposed
            continue
        if (d.code, d.path) in after or any(path != new_key and not path.startswith(new_key + ".")
                                            for _code, path in after - before):
            continue
        d.edits = [edit]
        found.append(edit)
        _fold(result, d, before - after, f"; as written, `{new_key}` is not set, which also causes")
    return found


def _unquoted(text: str) -> str:
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in ("'", '"') else text


# ---- candidate values ---------------------------------------------------------------------------------------

_NUMBER = lazy(r"(?<![\w.])(\d{1,7})(?![\w.])")
_REFERENCE = lazy(r"^\$\{\s*([A-Za-z_][\w\-]*(?:\.[\w\-]+)*)\s*\}$")


def _int_at(tree: Any, path: Path) -> int | None:
    value = tree.get(path)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _candidates(result: Any, rule_keys: Mapping[str, tuple[str, ...]], problem: Problem,
                restores: Mapping[str, int] | None = None) -> list[tuple[str, int, int]]:
    """(key, value, satisfied) to try from this state, best first: for each integer key the solvable errors
    involve, the values that satisfy the constraints those errors state (`satisfied` counts them), values near its
    own that are multiples or divisors of the other keys' values (or of their products and least common multiples),
    and the numbers the rules' hints for that key propose."""
    tree = result.tree
    keys: list[str] = []
    suggested: dict[str, set[int]] = {}
    # For each key, one set per error whose stated constraint involves it: the key's values that satisfy it.
    satisfying: dict[str, list[set[int]]] = {}
    for d in solvable(result):
        named = [d.path, *(p for p, _ in d.related), *_expand(rule_keys.get(d.rule or "", ()), tree)]
        for key in named:
            target = _edit_target(tree, key, result, problem)
            if target is not None and target not in keys:
                keys.append(target)
        target = _edit_target(tree, d.path, result, problem)
        if target is not None:
            suggested.setdefault(target, set()).update(int(n) for n in _NUMBER.findall(d.hint or "") if int(n) > 0)
        if d.constraint is not None:
            for key, found in solve_constraint(d.constraint).items():
                target = _edit_target(tree, key, result, problem)
                if target is not None:
                    if target not in keys:
                        keys.append(target)
                    satisfying.setdefault(target, []).append(found)
    for key in keys:  # the value a key had before the user changed it
        if restores and restores.get(key, 0) > 0:
            suggested.setdefault(key, set()).add(restores[key])
    values = {k: _int_at(tree, split_dotted(k)) for k in keys}
    numbers = sorted({v for v in values.values() if v and v > 0})
    numbers = [n for n in numbers if n <= MAX_VALUE]
    steps = set(numbers)
    for i, a in enumerate(numbers):
        for b in numbers[i + 1:]:
            g = math.gcd(a, b)
            steps.update(x for x in (a * b, a * b // g) if x <= 10_000_000)
            # What is left of one after the other's common factor: x·a is a multiple of b exactly when x is a
            # multiple of b / gcd(a, b) (32 prompts × n responses fill batches of 256 when n is a multiple of 8).
            steps.update(x for x in (a // g, b // g) if x > 1)
    out: list[tuple[int, float, str, int]] = []
    for key in keys:
        current = values[key]
        if not current or current < 1 or current > MAX_VALUE:
            continue
        weight = _weight(key)
        sets = satisfying.get(key, [])
        exact = set().union(*sets)
        for value in _near(current, steps - {current}, suggested.get(key, set()) | exact, set(numbers)):
            # The more stated constraints a value satisfies, the earlier it is tried.
            satisfied = sum(value in found for found in sets)
            restored = bool(restores) and restores.get(key) == value
            out.append((-satisfied, 0.0 if restored else weight * abs(math.log(value / current)), key, value))
    out.sort()
    return [(key, value, -satisfied) for satisfied, _distance, key, value in out]


def solve_constraint(constraint: Any, spread: int = 2) -> dict[str, set[int]]:
    """For each key of a constraint, the values nearest its own (up to `spread` on each side) that satisfy the
    constraint when every other factor keeps its value. A key that appears twice, or a constraint that no value of
    the key can satisfy, gives none."""
    out: dict[str, set[int]] = {}
    sides = (constraint.left, constraint.right)
    counts: dict[str, int] = {}
    for side in sides:
        for key, _ in side:
            if key is not None:
                counts[key] = counts.get(key, 0) + 1
    for which, side in enumerate(sides):
        other = math.prod(v for _, v in sides[1 - which])
        for i, (key, value) in enumerate(side):
            if key is None or counts[key] > 1 or value < 1:
                continue
            rest = math.prod(v for j, (_, v) in enumerate(side) if j != i)
            if rest < 1 or other < 1 or other > MAX_VALUE:
                continue
            if constraint.kind == "equal":
                found = {other // rest} if other % rest == 0 else set()
            elif which == 1:  # the key is a factor of the dividend: a multiple of what the rest lacks
                step = other // math.gcd(other, rest)
                below = value // step * step
                found = {m for k in range(spread) for m in (below - k * step, below + (k + 1) * step) if m >= 1}
            else:  # a factor of the divisor: a divisor of what the dividend leaves it
                found = set()
                if other % rest == 0:
                    divisors = _divisors(other // rest)
                    smaller = [x for x in divisors if x <= value]
                    larger = [x for x in divisors if x > value]
                    found = set(smaller[-spread:] + larger[:spread])
            found.discard(value)
            if found:
                out[key] = found
    return out


# Keys that size the hardware (GPU and node counts) weigh most: a fix changes them only when batch keys cannot.
# The number of responses per prompt is the advantage group of GRPO, part of the algorithm, so it weighs more
# than a batch size too.
_RESOURCE = lazy(r"gpu|node|device|world")
_GROUP = lazy(r"n_samples|per_prompt|group_size|return_sequences")
RESOURCE_WEIGHT = 4.0
GROUP_WEIGHT = 2.0


def _weight(key: str) -> float:
    name = key.rsplit(".", 1)[-1]
    if _RESOURCE.search(name) and "batch" not in name:  # a batch size per GPU is a batch size
        return RESOURCE_WEIGHT
    return GROUP_WEIGHT if _GROUP.search(name) else 1.0


def _near(value: int, steps: set[int], suggested: set[int], peers: set[int] = frozenset()) -> list[int]:
    found: set[int] = set(suggested)
    for step in steps | suggested:
        below = value // step * step
        found.update(x for x in (below, below + step) if x >= 1)
        divisors = _divisors(step)
        smaller = [d for d in divisors if d <= value]
        larger = [d for d in divisors if d >= value]
        if smaller:
            found.add(smaller[-1])
        if larger:
            found.add(larger[0])
    power = 1 << max(value.bit_length() - 1, 0)
    found.update((power, power * 2))
    found.discard(value)
    kept = [v for v in found if 1 <= v and value / MAX_RATIO <= v <= value * MAX_RATIO]
    kept.sort(key=lambda v: (abs(math.log(v / value)), v))
    # What the rule itself proposes is always tried, however many rounder numbers lie nearer, and so is the value
    # of each other key involved or of a product of two of them (a mini-batch larger than the batch is fixed by
    # making them equal; 11 prompts × 8 responses fill batches of 4 × 16 × 8 / 2 with 4 × 8 prompts).
    return sorted(set(kept[:CANDIDATES_PER_KEY]) | (set(kept) & (suggested | peers | steps)))


def _divisors(n: int) -> list[int]:
    if n > 10_000_000:
        return []
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _expand(patterns: Sequence[str], tree: Any) -> list[str]:
    """A rule's declared keys, with `*` (one level) matched against the keys the config has."""
    out: list[str] = []
    for pattern in patterns:
        if "*" not in pattern:
            out.append(pattern)
            continue
        parts = pattern.split(".")
        for path in tree.values:
            if len(path) == len(parts) and all(isinstance(p, str) and fnmatch.fnmatchcase(p, q)
                                                for p, q in zip(path, parts)):
                out.append(dotted(path))
    return out


def _edit_target(tree: Any, key: str, result: Any, problem: Problem, hops: int = 5) -> str | None:
    """The integer key to change to change `key`: itself, or the key its `${...}` interpolation copies; None when
    it is no plain integer (a computed interpolation, a string, a flag)."""
    path = split_dotted(key)
    if _int_at(tree, path) is None:
        return None
    origin = tree.values.get(path)
    if origin is None or not origin.via:
        return key
    reference = _REFERENCE.match(_source_text(origin, result, problem))
    if reference is None or hops == 0:
        return None
    return _edit_target(tree, reference.group(1), result, problem, hops - 1)


def _source_text(origin: Origin, result: Any, problem: Problem) -> str:
    if origin.kind != "file" or not origin.line or not origin.column:
        return ""
    text = problem.text if origin.file == problem.filename else result.sources.get(origin.file)
    if text is None:
        try:
            with open(origin.file, encoding="utf-8") as handle:
                text = handle.read()
        except OSError:
            return ""
    lines = text.split("\n")
    if origin.line > len(lines):
        return ""
    line = lines[origin.line - 1]
    end = origin.end_column - 1 if origin.end_column else len(line)
    return line[origin.column - 1:end].strip().strip("'\"")


# ---- writing edits ------------------------------------------------------------------------------------------


def apply_to_text(text: str, edits: Sequence[Edit]) -> str:
    """The text with each in-file edit's old value replaced by the new one, at its position (the rest of every
    line, comments and quoting included, is kept byte for byte)."""
    lines = text.split("\n")  # YAML counts lines by line feeds only (str.splitlines would split at \x1c or \u2028)
    for edit in sorted((e for e in edits if e.in_file), key=lambda e: (e.origin.line, e.origin.column), reverse=True):
        origin = edit.origin
        line = lines[origin.line - 1]
        start, end = origin.column - 1, origin.end_column - 1
        written = line[start:end]
        if edit.rename:  # the new name in the quotes the old one had
            new = f"{written[0]}{edit.value}{written[0]}" if _unquoted(written) != written else edit.value
        else:
            new = scalar_text(edit.value, written)
        lines[origin.line - 1] = line[:start] + new + line[end:]
    return "\n".join(lines)


def written_correctly(text: str, filename: str, edits: Sequence[Edit]) -> bool:
    """Whether reading the edited text back with the YAML loader gives each in-file edit's value at its key."""
    from rlcfg.source.yaml_loader import load_yaml

    tree, _problems = load_yaml(text, filename)  # problems the file already had are not the edit's doing
    if tree is None:
        return False
    missing = object()
    for e in edits:
        if not e.in_file:
            continue
        path = split_dotted(e.key)
        if e.rename:
            renamed = (*path[:-1], e.value)
            if tree.has(path) or not tree.has(renamed):
                return False
        elif tree.get(path, missing) != e.value:
            return False
    return True


def unified_diff(before: str, after: str, filename: str) -> str:
    old, new = (filename, filename) if filename.startswith("/") else (f"a/{filename}", f"b/{filename}")
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        fromfile=old, tofile=new))

