"""`rlcfg convert`: one experiment, written in another framework's dialect.

A config is read and lowered to its Experiment as `rlcfg plan` does; the target dialect's emitter (the `emit` of its
package, `rlcfg.dialects.<name>.emit`) writes the keys that reproduce that Experiment in the target's terms, for one
release of the target (by default the newest its emitter writes); the result is checked by reading it back
exactly as a user's file would be, judged by that release (validated, lowered), and comparing the two Experiments
field by field (rlcfg.convert.compare). Every field where they still differ is a loss: a setting the target cannot
express. Losses are never dropped silently: they are listed at the top of the written config, and the caller
reports them (a warning, or an error under --strict). What the emitter could not say at all (an SFT experiment in
a dialect whose pipeline only does RL) is fatal.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from rlcfg.convert.common import DIALECTS, TITLES
from rlcfg.convert.compare import ABSENT, SECTION, Difference, covered, diff
from rlcfg.ir import Experiment


class ConversionError(Exception):
    """The source cannot be converted: it has errors, or the target cannot express what it is at all."""

    def __init__(self, message: str, diagnostics: Sequence[Any] = ()):
        super().__init__(message)
        self.diagnostics = list(diagnostics)


class ReleaseCannotTake(ConversionError):
    """The release asked for lacks what the experiment needs (a strategy, a combination): its errors tell."""


class EmitterBug(ConversionError):
    """The converted config does not validate or lower: a bug in an emitter, not in the user's config."""


@dataclass
class Emitted:
    """What an emitter returns: the target config as a nested mapping, and why it cannot say some fields
    (dotted Experiment paths or path prefixes → the reason, in the target's terms)."""

    tree: dict
    reasons: dict[str, str] = field(default_factory=dict)
    # Values the target requires that the Experiment does not hold, so the emitter had to choose them (a model
    # family the target looks up by name, say): each one a sentence naming the key, for the user to check.
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Loss:
    path: str  # the Experiment field, dotted (roles by name), or `dialect:key` for a source key it does not hold
    source: Any
    target: Any
    reason: str
    # The keys that hold the field in the source's dialect and in the target's (rlcfg.convert.keys); empty where
    # the dialect has none
    source_keys: tuple[str, ...] = ()
    target_keys: tuple[str, ...] = ()

    @property
    def of_experiment(self) -> bool:
        """An Experiment field that differs; otherwise a source key (`dialect:key`) the Experiment does not hold."""
        return ":" not in self.path

    @property
    def rank(self) -> int:
        """0: it changes the algorithm or its schedule (or is a source setting rlcfg cannot place); 1: only the
        resources and how they are used; 2: only logging and bookkeeping."""
        if not self.of_experiment:
            return 0
        parts = self.path.split(".")
        if parts[0] in ("logging", "checkpointing") or parts[-1] in ("project", "run_name"):
            return 2
        if parts[0] in ("cluster", "colocation", "engine") or any(p in _EXECUTION for p in parts):
            return 1
        return 0

    def describe(self) -> str:
        """`[kind] source_key: value -> target_key: value (why)`, in the dialects' words; the Experiment field
        names a side whose dialect has no key for it."""
        source = ", ".join(self.source_keys) or (self.path.split(":", 1)[1] if not self.of_experiment
                                                  else f"(rlcfg: {self.path})")
        target = ", ".join(self.target_keys) or "(no key)"
        return (f"[{LOSS_KINDS[self.rank]}] {source}: {_show(self.source)} -> {target}: {_show(self.target)} "
                f"({self.reason})")


# What a loss changes, by rank (Loss.rank), as the report names it.
LOSS_KINDS = ("algorithm", "resources", "logging")
# Experiment fields of how a role is executed, not of what it computes.
_EXECUTION = frozenset({"resources", "parallelism", "backend", "micro_batch_size", "forward_micro_batch_size",
                        "max_tokens_per_micro_batch", "sequence_packing", "dtype", "offload", "gradient_checkpointing",
                        "engine"})


@dataclass
class Conversion:
    source_file: str
    source_dialect: str
    target_dialect: str
    target_release: str | None  # the release of the target the config is written for, and judged by
    text: str  # the converted config, as written
    tree: dict  # its keys
    source: Experiment
    result: Experiment  # what the converted config lowers to
    losses: list[Loss]
    diagnostics: list = field(default_factory=list)  # rlcfg validate's findings on the converted config
    notes: list[str] = field(default_factory=list)  # values the emitter chose (Emitted.notes)
    is_script: bool = False  # `text` is a launch script: the target release reads a command line, not a file


def _show(value: Any) -> str:
    if value is ABSENT:
        return "(none)"
    if value is SECTION:
        return "(set)"
    if isinstance(value, tuple):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return repr(value) if isinstance(value, str) else str(value)


def experiment_of(path: str, overrides: Sequence[str] = (), dialect: str | None = None,
                  release: str | None = None) -> tuple[Any, Experiment]:
    """Read, validate and lower a config file (raises ConversionError with the diagnostics when it has errors)."""
    from rlcfg.frontend import check_file

    result = check_file(path, overrides, dialect=dialect, release=release)
    return result, _lowered(result, path)


def _lowered(result: Any, label: str) -> Experiment:
    from rlcfg.lower import available, lower
    from rlcfg.source.yaml_loader import UsageError

    if result.config is None:
        raise ConversionError(f"{label} has errors; fix them before converting it", result.diagnostics)
    if not available(result.dialect):
        raise ConversionError(f"{label}: rlcfg cannot lower {TITLES.get(result.dialect, result.dialect)} configs")
    try:
        return lower(result.dialect, result.config, result.release, result.entry_runs)
    except UsageError as exc:
        raise ConversionError(f"{label}: {exc}") from None


def _reread(dialect: str, tree: dict, label: str, release: str | None, must_validate: bool = True,
            checked: Any = None) -> tuple[Any, Any]:
    """Validate and lower the converted config exactly as a user's file, judged by `release`; (the check result, its
    Experiment). `checked`: the tree's check result, where already at hand."""
    from rlcfg import schema

    checked = checked or _checked(dialect, tree, release)
    if checked.config is None:
        if not must_validate:
            return checked, None
        if release is not None and release != default_release(dialect):
            # The emitter writes one layout; an older release may lack a backend or a combination the experiment
            # needs. That is the release's limit, not a bug.
            raise ReleaseCannotTake(f"{schema.load(dialect).release_label(release)} does not accept this experiment "
                                    "as rlcfg writes it (its errors below)", checked.diagnostics)
        raise EmitterBug(f"rlcfg convert wrote a {dialect} config that does not validate; this is a bug in "
                         "rlcfg, please report it with the source config", checked.diagnostics)
    try:
        return checked, _lowered(checked, f"the {dialect} config converted from {label}")
    except ConversionError as exc:
        raise EmitterBug(f"{exc}; this is a bug in rlcfg convert, please report it with the source config") from None


def _checked(dialect: str, tree: dict, release: str | None, pinned: bool = True) -> Any:
    """`rlcfg validate` of a config converted for `release`, written out as text (a config file, or the command line
    of a release that reads one), judged by that release, or unless `pinned` by the one its keys point to."""
    from rlcfg.convert.render import command_line, dump
    from rlcfg.frontend import check_script, check_text

    shown = f"<converted to {dialect}>"
    judged_by = release if pinned else None
    command = command_of(dialect, release)
    if command is not None:
        return check_script(command_line(tree, command, written_key(dialect, release)), shown, dialect, judged_by)
    return check_text(dump(tree), shown, dialect=dialect, release=judged_by)


def emitter(dialect: str) -> Any:
    """The `emit` of the dialect's package (rlcfg/dialects/<name>/)."""
    return importlib.import_module(f"rlcfg.dialects.{dialect}.emit")


def written_releases(dialect: str) -> tuple[str, ...]:
    """The releases of `dialect` its emitter writes for, oldest first: those that read a config file (the emitter's
    RELEASES, else every release the dialect claims), then those that read a command line only (COMMAND_LINES)."""
    from rlcfg.schema import entry

    module = emitter(dialect)
    return (tuple(getattr(module, "RELEASES", ())) or entry(dialect).releases) + tuple(command_lines(dialect))


def default_release(dialect: str) -> str | None:
    """What `convert` writes when no release is asked for: the newest release that reads a config file."""
    files = [release for release in written_releases(dialect) if release not in command_lines(dialect)]
    return files[-1] if files else None


def command_lines(dialect: str) -> dict[str, str]:
    """The releases of `dialect` that read their config from a command line only, each with the command that
    starts the run (`python -m skyrl.train.entrypoints.main_base`): convert writes them a launch script."""
    return dict(getattr(emitter(dialect), "COMMAND_LINES", {}))


def command_of(dialect: str, release: str | None) -> str | None:
    return command_lines(dialect).get(release) if release is not None else None


def written_key(dialect: str, release: str | None) -> Callable[[str], str]:
    """A dotted key as the emitter's tree names it (the dialect's schema layout) → as `release` spells it."""
    spell = getattr(emitter(dialect), "written_key", None)
    return (lambda key: spell(key, release)) if spell is not None else (lambda key: key)


def target_release(dialect: str, asked: str | None) -> str | None:
    """The release a conversion into `dialect` is written for: `asked` (`--to-release`, aliases resolved), else the
    newest one the emitter writes. Raises UsageError for a release the dialect does not claim, ConversionError for
    one it claims but the emitter cannot write."""
    from rlcfg import schema
    from rlcfg.frontend import claimed_release

    written = written_releases(dialect)
    if asked is None:
        return default_release(dialect)
    spec = schema.load(dialect)
    release = claimed_release(spec, asked, "--to-release")
    if release not in written:
        why = getattr(emitter(dialect), "UNWRITTEN", {}).get(release, "it reads another layout")
        raise ConversionError(f"rlcfg convert cannot write configs for {spec.release_label(release)}: {why}; it "
                              f"writes {spec.title} {', '.join(written)} (--to-release {default_release(dialect)} by "
                              "default)")
    return release


def convert(path: str, target: str, overrides: Sequence[str] = (), dialect: str | None = None,
            release: str | None = None, schema_line: str | None = None,
            to_release: str | None = None) -> Conversion:
    """Convert one config file to `target`'s dialect, written for `to_release` (by default the newest release the
    target's emitter writes). Raises ConversionError when the source has errors or the target release cannot
    express the experiment at all."""
    from rlcfg import schema
    from rlcfg.convert import render

    if target not in DIALECTS:
        raise ValueError(target)
    checked, source = experiment_of(path, overrides, dialect, release)
    written_for = target_release(target, to_release)
    if (checked.dialect == target and not overrides and path.endswith((".yaml", ".yml"))
            and (to_release is None or written_for == checked.release)):
        return _unchanged(path, checked, source)
    module = emitter(target)
    if source.kind not in getattr(module, "KINDS", ("rl",)):
        raise ConversionError(f"{TITLES[target]} cannot express this experiment: it is {source.kind!r} training, "
                              f"and rlcfg's {TITLES[target]} dialect describes only the RL (GRPO/PPO) pipeline")
    emitted = module.emit(source, written_for)
    tree, dropped, checked_tree = _keys_the_release_has(target, render.ordered(target, emitted.tree), written_for)
    try:
        reread, result = _reread(target, tree, path, written_for, checked=checked_tree)
    except ReleaseCannotTake as exc:
        raise _naming_the_default(exc, path, target, overrides, dialect, release) from None
    tree, reread = _without_defaults(target, tree, reread, result, path, written_for)
    differences = diff(source, result)
    source_release = checked.release if checked.release in written_releases(checked.dialect) else None
    named = _dialect_keys(_for_release(emitter(checked.dialect).emit, source_release),
                          _for_release(module.emit, written_for), source, result)
    source_spelling, target_spelling = written_key(checked.dialect, source_release), written_key(target, written_for)

    def loss(d: Difference) -> Loss:
        source_keys, target_keys = named(d)
        lacking = [key for key in target_keys if key in dropped]
        reason = dropped[lacking[0]] if lacking else _reason(d, emitted.reasons, target)
        return Loss(d.path, d.source, d.target, reason, tuple(map(source_spelling, source_keys)),
                    tuple(target_spelling(key) for key in target_keys if key not in dropped))

    losses = _not_modelled(checked) + [loss(d) for d in differences]
    # what changes the experiment first, then its resources, then its logging
    losses.sort(key=lambda loss: loss.rank)
    label = schema.load(target).release_label(written_for) if written_for is not None else TITLES[target]
    command = command_of(target, written_for)
    header = render.Header(checked.dialect, path, losses, emitted.notes, label, _pin_hint(target, tree, written_for),
                           checked.release_label or None)
    text = render.command_script(tree, command, written_key(target, written_for), target, header) if command \
        else render.text(tree, target, header, schema_line)
    return Conversion(path, checked.dialect, target, written_for, text, tree, source, result, losses,
                      reread.diagnostics, emitted.notes, is_script=command is not None)


def _without_defaults(dialect: str, tree: dict, checked: Any, result: Experiment, label: str,
                      release: str | None) -> tuple[dict, Any]:
    """The converted tree without the target's defaults, and its check result. Leaving a default out can change
    what a dialect infers (AReaL's release, say) or what a section's other keys default to (the `skyrl` package
    rebuilds a section a command line writes into from that section's own defaults): the shorter config is kept
    only where it reads back to the same Experiment, the whole tree at once, else one mapping at a time."""
    from rlcfg.convert import render
    from rlcfg.convert.keys import flat

    def same(candidate: dict) -> Any:
        try:
            candidate_check, candidate_result = _reread(dialect, candidate, label, release, must_validate=False)
        except ConversionError:
            return None
        return candidate_check if candidate_result is not None and not diff(result, candidate_result) else None

    pruned = render.prune_defaults(dialect, tree, checked)
    if pruned == tree:
        return tree, checked
    found = same(pruned)
    if found is not None:
        return pruned, found
    kept = flat(pruned)
    by_mapping: dict[str, list[str]] = {}
    for key in flat(tree):
        if key not in kept:
            by_mapping.setdefault(key.rpartition(".")[0], []).append(key)
    leaves = flat(tree)
    for keys in by_mapping.values():
        trial = {key: value for key, value in leaves.items() if key not in keys}
        found = same(_nested(trial))
        if found is not None:
            leaves, checked = trial, found
    return _nested(leaves), checked


def _nested(leaves: dict[str, Any]) -> dict:
    """Dotted leaves (rlcfg.convert.keys.flat) → the nested mapping, in their order."""
    tree: dict = {}
    for dotted, value in leaves.items():
        *parents, last = dotted.split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return tree


def _naming_the_default(exc: ReleaseCannotTake, path: str, target: str, overrides: Sequence[str],
                        dialect: str | None, release: str | None) -> ReleaseCannotTake:
    """The refusal, naming the release convert writes by default where that one takes the experiment."""
    from rlcfg import schema

    try:
        written = convert(path, target, overrides, dialect, release)
    except ConversionError:
        return exc
    default = written.target_release
    return ReleaseCannotTake(f"{exc}; {schema.load(target).release_label(default)} takes it (--to-release {default})",
                             exc.diagnostics)


def _keys_the_release_has(dialect: str, tree: dict, release: str | None) -> tuple[dict, dict[str, str], Any]:
    """The emitted config without the keys `release` does not have (RLC113: its loader stops on them, or drops them),
    those keys, each with why (the fields they carried become losses), and the check result of what is left (None
    where the last pass removed keys). An emitter writes one layout for the releases that share it; what an older
    release lacks of it is left out here, one pass per level it uncovers."""
    from rlcfg import schema

    dropped: dict[str, str] = {}
    if release is None:
        return tree, dropped, None
    spec = schema.load(dialect)
    label, spelled = spec.release_label(release), written_key(dialect, release)
    for _ in range(3):
        checked = _checked(dialect, tree, release)
        # the diagnostics name keys as the release spells them, the tree as the schema does
        lacking = [".".join(spec.schema_path(tuple(d.path.split(".")), release)) for d in checked.diagnostics
                   if d.code == "RLC113" and d.path]
        removed = [key for key in lacking if _pop(tree, key)]
        if not removed:
            return tree, dropped, checked
        dropped.update((key, f"{label} has no `{spelled(key)}`") for key in removed)
    return tree, dropped, None


def _pop(tree: dict, dotted: str) -> bool:
    """Remove a dotted key from a nested mapping, and the mappings it leaves empty; whether it was there."""
    *parents, last = dotted.split(".")
    chain = [tree]
    for part in parents:
        node = chain[-1].get(part)
        if not isinstance(node, dict):
            return False
        chain.append(node)
    if last not in chain[-1]:
        return False
    del chain[-1][last]
    for parent, part in zip(reversed(chain[:-1]), reversed(parents)):
        if parent[part]:
            break
        del parent[part]
    return True


def _for_release(emit: Any, release: str | None) -> Any:
    """An emitter with its release fixed, as rlcfg.convert.keys calls it (with the Experiment alone)."""
    return lambda experiment: emit(experiment, release)


def _pin_hint(dialect: str, tree: dict, release: str | None) -> str | None:
    """`--framework-version RELEASE`, when rlcfg would judge the written config by another release than the one it
    was written for: a config that writes no key only some releases have reads as the newest."""
    if release is None:
        return None
    inferred = _checked(dialect, tree, release, pinned=False).release
    return None if inferred == release else f"--framework-version {release}"


def _dialect_keys(source_emit: Any, target_emit: Any, source: Experiment, result: Experiment) -> Any:
    """For a difference: (the source dialect's keys for its field, the target's), each found by asking that
    dialect's emitter which keys the other side's value changes (rlcfg.convert.keys)."""
    from rlcfg.convert.keys import flat, keys_of

    bases: dict[str, dict] = {}

    def base(side: str) -> dict | None:
        if side not in bases:
            emit, experiment = (source_emit, source) if side == "source" else (target_emit, result)
            try:
                bases[side] = flat(emit(experiment).tree)
            except Exception:  # noqa: BLE001 - an emitter that cannot write it names no key
                bases[side] = {}
        return bases[side]

    def named(d: Difference) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return (keys_of(source_emit, source, d.path, d.target, base("source")),
                keys_of(target_emit, result, d.path, d.source, base("target")))

    return named


def _unchanged(path: str, checked: Any, source: Experiment) -> Conversion:
    """A config file converted to its own dialect: the file as written (an emitter writes one layout of its dialect
    and would drop what another of its releases has: AReaL 1.0's Megatron backend, say). With overrides, the emitter
    writes them in, and lists what it cannot say as for any target."""
    from rlcfg.source.yaml_loader import read_text

    return Conversion(path, checked.dialect, checked.dialect, checked.release, read_text(path), {}, source, source,
                      [], checked.diagnostics)


def _not_modelled(checked: Any) -> list[Loss]:
    """The source's settings that its Experiment does not hold (rlcfg's run ledger refuses them, RLC118), so no
    target receives them: each one is a loss, named by the source's own key."""
    from rlcfg.source.tree import split_dotted

    found = []
    for d in checked.diagnostics:
        if d.code != "RLC118" or not d.path:
            continue
        value = checked.tree.get(split_dotted(d.path)) if checked.tree is not None else None
        found.append(Loss(f"{checked.dialect}:{d.path}", value, ABSENT,
                          "a source setting rlcfg does not model (`rlcfg run` refuses it), so it is not carried over"))
    return found


# Why a target misses a field, where no emitter says more: by the path's last parts ({T}: the target's name).
GENERIC_REASONS = {
    "disable_dropout": "{T} trains with the model's own dropout settings",
    "lora": "rlcfg writes no LoRA adapters for {T}: the converted config trains every weight",
    "micro_batch_size": "{T} sizes micro-batches its own way",
    "forward_micro_batch_size": "{T} sizes forward micro-batches its own way (one size for every model, or a token "
                                "budget)",
    "max_tokens_per_micro_batch": "{T} packs sequences without this token budget",
    "sequence_packing": "{T} packs sequences for every model or none",
    "backend": "{T} runs this role with another implementation",
    "schedule.epochs": "{T} counts the run in steps; its epochs follow from the dataset's size",
    "eval_epoch_interval": "{T} has no epoch-based evaluation trigger",
    "epoch_interval": "{T} has no epoch-based checkpoint trigger",
    "colocation": "{T} shares GPUs between roles differently",
    "logging.project": "{T} names the project differently",
    "logging.run_name": "{T} names the run differently",
    "optimizer.eps": "{T}'s optimizer has no Adam epsilon setting",
    "resources.nodes": "{T} counts a role's GPUs, not its nodes",
    "resources.gpus_per_node": "{T} counts a role's GPUs, not its nodes",
    "resources.gpu_ids": "{T} places roles in its own order",
    "algorithm.lam": "{T} has no GAE lambda for this estimator",
    "algorithm.value_clip": "{T} trains no critic here",
    "model.dtype": "{T} runs this role in another precision",
    "model.path": "{T} loads one model path for these roles",
    "parallelism.tp": "{T} constrains the rollout's tensor parallelism",
    "kl.controller.target": "{T} has no adaptive KL controller here",
    "algorithm.balance_ranks_by_length": "{T} hands each data-parallel rank its share of a step in another order",
    "schedule.partial_rollout": "{T} generates each response whole, in the step that trains on it",
    "data.answer_fields": "{T}'s rewards read one answer column",
    "episodes": "{T} has no multi-turn environment that rlcfg runs: each response is generated in one turn",
    "reward_settings": "{T}'s reward here is a rule, with no judge model of its own to set",
    "kl.penalty_only": "{T} subtracts a reward KL penalty from the score; it has no reward of the penalty alone "
                       "(on-policy distillation)",
}


def _reason(difference: Difference, reasons: dict[str, str], target: str) -> str:
    best = None
    for prefix, why in reasons.items():
        if covered(difference.path, {prefix}) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, why)
    if best is not None:
        return best[1]
    for suffix, why in GENERIC_REASONS.items():
        if difference.path == suffix or difference.path.endswith("." + suffix):
            return why.format(T=TITLES[target])
    if difference.path == "roles.reference":
        return (f"{TITLES[target]} starts a reference model only for a KL term it computes"
                if difference.target is ABSENT else f"{TITLES[target]} starts a reference model here")
    if difference.path.startswith("roles.") and difference.path.count(".") == 1:
        name = difference.path.split(".")[1]
        return (f"{TITLES[target]} starts no {name} role here" if difference.target is ABSENT
                else f"{TITLES[target]} adds a {name} role here")
    return f"{TITLES[target]} has no setting that gives this value"
