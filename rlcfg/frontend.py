"""The front end: YAML text and overrides in, a validated dialect config and its diagnostics out.

load (positions) → detect the dialect → compose (defaults lists) → lay over the dialect's defaults → apply
overrides → resolve interpolation → check types → check rules. Every stage reports into one list, so a run
shows all problems at once, ordered by location.
"""

from __future__ import annotations

import os
import re
from dataclasses import field
from pathlib import Path as FsPath
from typing import Any, Callable, Mapping, Sequence

from rlcfg.diagnostics import Diagnostic, Origin, Severity, close_matches, count, diagnostic, sort_diagnostics
from rlcfg.records import record
from rlcfg.source.tree import SourceTree, dotted, interpolation_targets, split_dotted
from rlcfg.source.yaml_loader import UsageError, load_yaml, read_text


@record
class CheckResult:
    file: str
    dialect: str | None = None
    variant: str | None = None
    root: Any = None  # the dialect's root model for this document
    config: Any = None  # the validated dialect config, when it has no errors
    tree: SourceTree | None = None  # the resolved tree, with origins
    diagnostics: list[Diagnostic] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)
    summary: str = ""
    release: str | None = None  # the framework release the document was judged by
    release_label: str = ""  # e.g. "AReaL 1.0", for the summary line
    release_reason: str = ""  # why that release ("pinned with --framework-version", or the keys that tell)
    pipeline: str | None = None  # set when the document is a pipeline the dialect does not model
    unrun: tuple[str, str] | None = None  # (pipeline, why) for a modelled pipeline `rlcfg run` does not run
    # The loop the launch script's entry module runs in place of the framework's usual one (SkyRL's fully
    # asynchronous trainer: "fully_async"), as Dialect.entry_keys recognises it; the rules and the lowering read it.
    entry_runs: str | None = None

    @property
    def errors(self) -> int:
        return count(self.diagnostics)[0]

    @property
    def warnings(self) -> int:
        return count(self.diagnostics)[1]

    @property
    def ok(self) -> bool:
        return self.errors == 0


@record
class Opened:
    """What a check reads: a config file and its overrides, or what a launch script's entrypoint call loads."""

    text: str  # the config's YAML ("{}" where the entrypoint loads the release's base config alone)
    filename: str  # where the YAML's positions point
    overrides: list[str]  # the script's arguments (rlcfg.source.launch.Arg, located) and then the user's
    dialect: str | None
    base_dir: str
    shown_as: str  # what the user named: the config file, the script, or `<command line>`
    sources: dict[str, str] = field(default_factory=dict)  # the script's text, for snippets
    diagnostics: list[Diagnostic] = field(default_factory=list)  # what reading the script found
    exported: dict[str, str] = field(default_factory=dict)  # what the script exports to the entrypoint
    entry: tuple[str, str] | None = None  # (config class, entry script) where the entry script picks the class
    call: Origin | None = None  # where the script calls the entrypoint
    releases: tuple[str, ...] = ()  # the releases the entrypoint's package has; empty: any the dialect claims
    entry_keys: Any = None  # the keys the entry module adds to the config (Dialect.entry_keys), or None


COMMAND_LINE = "<command line>"


def open_config(path: str, overrides: Sequence[str] = (), dialect: str | None = None,
                env: Mapping[str, str] | None = None) -> Opened:
    """The config `path` names, with its overrides: a YAML file; a launch script (`run_gsm8k.sh`), read for its call
    of a framework's entrypoint; or a command line given as `path` and `overrides` (`python -m ... k=v`). Raises
    UsageError for what cannot be read."""
    if path.endswith((".yaml", ".yml")):  # the common case, without importing the script reader
        return Opened(read_text(path), path, list(overrides), dialect, str(FsPath(path).parent), path)
    from rlcfg.source import launch as scripts

    command = scripts.is_command(path, overrides)
    if not command and not scripts.is_script(path):
        return Opened(read_text(path), path, list(overrides), dialect, str(FsPath(path).parent), path)
    positional: list = []
    if command:
        text, script, shown, extra = scripts.command_text([path, *overrides]), COMMAND_LINE, COMMAND_LINE, []
    else:
        text, script, shown, extra = read_text(path), path, path, list(overrides)
        # `rlcfg validate run.sh my_config k=v`: the bare words first are the script's own arguments ($1, ...); an
        # override always has `=` (or starts with `~`), so nothing a user means as an override is taken
        while extra and "=" not in extra[0] and not extra[0].startswith("~"):
            positional.append(scripts.Word(extra.pop(0), 0, 0))
    return open_script(text, script, shown, extra, positional, dialect, env, path if not command else ".")


def open_script(text: str, script: str, shown: str, extra: Sequence[str] = (), positional: Sequence[Any] = (),
                dialect: str | None = None, env: Mapping[str, str] | None = None, where: str = ".") -> Opened:
    """The config a launch script's text loads, as open_config reads it. `script`: its name; `shown`: what messages
    call it; `extra`: overrides after it; `positional`: its own arguments; `where`: the path that files it names
    are looked up from."""
    from rlcfg import schema
    from rlcfg.source import launch as scripts

    found = scripts.read_launch(text, script, schema.launchers(dialect), env, shown_as=shown,
                                arguments=list(positional))
    sources = {shown: text, **found.sources}
    entry = _entry_config(found.dialect, found.entry, where)
    added = _entry_keys(found.dialect, found.module, where) or _entry_script(found.dialect, found.entry, where)
    call = Origin("file", file=shown, line=found.line, column=1)
    extra = list(extra)
    if found.config is None:
        title = schema.entry(found.dialect).title
        return Opened("{}\n", f"<{title} base config>", [*found.arguments, *extra], found.dialect, ".", shown,
                      sources, found.diagnostics, found.environment, entry, call, found.launcher.releases, added)
    config = scripts.locate(found.config, where)
    if not FsPath(config).is_file():
        where_not = "which does not exist" if FsPath(found.config).is_absolute() else \
            "which is neither under the current directory nor above the script; run rlcfg from where the script is run"
        takes = " (the script reads arguments: give them after it, `rlcfg validate SCRIPT ARG ... key=value`)" \
            if script != COMMAND_LINE and re.search(r"\$\{?[1-9@*]", text) else ""
        raise UsageError(f"{shown}:{found.line}: the call loads {found.config}, {where_not}{takes}")
    return Opened(read_text(config), config, [*found.arguments, *extra], found.dialect, str(FsPath(config).parent),
                  shown, sources, found.diagnostics, found.environment, entry, call, found.launcher.releases, added)


def _entry_config(dialect: str, entry: str | None, script: str) -> tuple[str, str] | None:
    """(config class, entry script) when the call's Python entry script names the class it loads."""
    from rlcfg import schema
    from rlcfg.source import launch as scripts

    if entry is None:
        return None
    found = scripts.locate(entry, script)
    try:
        source = read_text(found)
    except UsageError:
        return None  # not on this machine: the document's own keys decide, as for a config file alone
    name = schema.load(dialect).entry_config(source)
    return (name, entry) if name else None


def _entry_script(dialect: str, entry: str | None, script: str) -> Any:
    """What the Python script a call runs by its path (`launcher examples/x.py`) runs, as the dialect reads it."""
    from rlcfg import schema
    from rlcfg.source import launch as scripts

    if entry is None:
        return None
    try:
        source = read_text(scripts.locate(entry, script))
    except UsageError:
        source = None  # missing here, or not text: the dialect says what that leaves unknown
    return schema.load(dialect).entry_script(source, entry)


def _entry_keys(dialect: str, module: str | None, script: str) -> Any:
    """What the module a call runs (`python -m examples.x.main_y`) adds to the config, where it is on this machine."""
    from rlcfg import schema
    from rlcfg.source import launch as scripts

    if module is None:
        return None
    found = scripts.locate(module.replace(".", "/") + ".py", script)
    try:
        source = read_text(found)
    except UsageError:
        source = None  # missing here, or not text: the dialect says what that leaves unknown

    def read(name: str, level: int) -> str | None:
        folder = FsPath(found).parent
        for _ in range(max(level - 1, 0)):
            folder = folder.parent
        path = str(folder / (name.replace(".", "/") + ".py")) if level else \
            scripts.locate(name.replace(".", "/") + ".py", script)
        try:
            return read_text(path)
        except UsageError:
            return None

    return schema.load(dialect).entry_keys(source, found, read, module)


def check_file(path: str, overrides: Sequence[str] = (), dialect: str | None = None, strict: bool = False,
               env: Mapping[str, str] | None = None, release: str | None = None) -> CheckResult:
    """Check a config file, or what a launch script or command line loads (open_config). Raises UsageError for a
    file that cannot be read at all, or for a `release` the dialect does not claim."""
    return check_opened(open_config(path, overrides, dialect, env), strict, env, release)


def check_script(text: str, shown_as: str, dialect: str | None = None, release: str | None = None) -> CheckResult:
    """A launch script given as its text, checked as `rlcfg validate SCRIPT` checks the file (rlcfg convert reads
    back the command lines it writes this way)."""
    return check_opened(open_script(text, shown_as, shown_as, dialect=dialect), release=release)


def check_opened(opened: Opened, strict: bool = False, env: Mapping[str, str] | None = None,
                 release: str | None = None) -> CheckResult:
    """Check what open_config or open_script opened: the document with its overrides, and what the script said."""
    if opened.exported:  # the entrypoint runs with what the script exports on top of the caller's environment
        env = {**(os.environ if env is None else env), **opened.exported}
    result = check_text(opened.text, opened.filename, opened.overrides, opened.dialect, strict, env,
                        base_dir=opened.base_dir, release=release, among=opened.releases,
                        entry_keys=opened.entry_keys)
    if opened.shown_as != opened.filename:
        found = list(opened.diagnostics)
        refused = getattr(opened.entry_keys, "refused", None)
        if refused is not None and result.config is not None:
            found.append(diagnostic("RLC118", "", refused[0], origin=opened.call, hint=refused[1]))
        if opened.entry is not None and result.config is not None:
            from rlcfg import schema

            found.extend(schema.load(result.dialect).entry_findings(opened.entry, result.config, result.release,
                                                                    opened.call))
            if any(d.severity is Severity.ERROR for d in found):
                result.config = None  # what the entry script loads is not valid: nothing is planned or run
        result.file = opened.shown_as
        result.sources.update(opened.sources)
        result.diagnostics = sort_diagnostics([*found, *result.diagnostics])
    return result


def dialect_of(path: str) -> str | None:
    """The dialect of the config `path` names (a YAML file or a launch script), as `check_file` would detect it;
    None when it cannot be told. Raises UsageError for what cannot be read."""
    from rlcfg import schema

    opened = open_config(path)
    if opened.dialect is not None:
        return opened.dialect
    tree, _problems = load_yaml(opened.text, opened.filename)
    if tree is None or not isinstance(tree.data, dict):
        return None
    return schema.detect(_composed_for_detection(tree, opened.base_dir, os.environ).data).name


def claimed_release(spec: Any, asked: str, flag: str = "--framework-version") -> str:
    """The release `asked` names among those the dialect claims (an alias resolved); UsageError for one it does not
    claim, naming `flag` and the releases it does."""
    release = spec.release_aliases.get(asked, asked)
    if release not in spec.releases:
        claimed = ", ".join(spec.releases) or "none (this dialect does not tell releases apart)"
        claimed += "".join(f"; {alias} is {name}" for alias, name in spec.release_aliases.items())
        raise UsageError(f"{flag} {asked}: {spec.title} releases rlcfg knows are {claimed}")
    return release


def check_text(text: str, filename: str, overrides: Sequence[str] = (), dialect: str | None = None,
               strict: bool = False, env: Mapping[str, str] | None = None, base_dir: str = ".",
               release: str | None = None, among: Sequence[str] = (), entry_keys: Any = None) -> CheckResult:
    """`among`: the releases the document may be judged by when none is pinned (a launch script's entrypoint says
    which package it runs); empty for any the dialect claims. `entry_keys`: the keys the launch script's entry module
    adds (Dialect.entry_keys)."""
    from rlcfg import schema
    from rlcfg.schema.base import HostFacts
    from rlcfg.schema.validate import Judgement, run_rules, validate_tree
    from rlcfg.source.overrides import apply_overrides, parse_override
    from rlcfg.source.resolve import merge_over_defaults, resolve

    env = dict(os.environ) if env is None else dict(env)
    result = CheckResult(filename, sources={filename: text})
    diagnostics: list[Diagnostic] = []

    if dialect is not None and dialect not in schema.names():
        raise UsageError(f"unknown dialect `{dialect}`; choose one of {', '.join(schema.names())}")
    tree, found = load_yaml(text, filename)
    diagnostics.extend(found)
    if tree is None:
        return _finish(result, diagnostics)

    if dialect is None:
        detection = schema.detect(_composed_for_detection(tree, base_dir, env).data)
        if detection.name is None:
            diagnostics.append(diagnostic("RLC110", "", f"cannot tell which framework this config is for: {detection.reason}",
                                          origin=Origin("file", file=filename, line=1, column=1),
                                          hint=f"pass --dialect with one of {', '.join(schema.names())}"))
            return _finish(result, diagnostics)
        dialect = detection.name
    spec = schema.load(dialect)
    result.dialect = dialect

    tree, found = spec.compose(tree, base_dir, env)
    diagnostics.extend(found)
    result.pipeline = spec.pipeline(tree.data) if isinstance(tree.data, dict) else None

    release = claimed_release(spec, release) if release is not None else None
    grammar = spec.grammar((release,) if release is not None else tuple(among))
    parsed, hydra_settings = [], []
    for index, text_override in enumerate(overrides, start=1):
        override, problem = parse_override(text_override, index, grammar)
        if problem is not None:
            diagnostics.append(problem)
        elif grammar == "hydra" and override.path[:1] == ("hydra",):
            # Hydra's own settings (hydra.searchpath, hydra.run.dir): Hydra consumes them, the job never sees them
            hydra_settings.append(override)
        else:
            parsed.append(override)
    if hydra_settings:
        from rlcfg.source.group_overrides import compose_group_overrides, searchpath_folders

        parsed, found = compose_group_overrides(parsed, searchpath_folders(hydra_settings, env))
        diagnostics.extend(found)
    # The variant (ChatLearn's train_backend, say) may itself be chosen by an override.
    preview = tree.copy()
    apply_overrides(preview, parsed, "dotlist")
    root = spec.root(preview.data)
    result.root = root
    result.variant = spec.variant_of(root)
    if release is not None:
        result.release, result.release_reason = release, "pinned with --framework-version"
    elif among:  # the entrypoint's package has only some of the dialect's releases
        result.release, result.release_reason = spec.infer_release(preview.data, among=tuple(among))
    else:
        result.release, result.release_reason = spec.infer_release(preview.data)
    result.release_label = spec.release_label(result.release) if result.release is not None else ""
    parsed, found = spec.typed_overrides(parsed, root, result.release)
    diagnostics.extend(found)
    defaults = spec.defaults(root, result.release)
    if spec.overrides_see_defaults:
        merged = merge_over_defaults(defaults, tree)
        applied = apply_overrides(merged, parsed, grammar)
    else:
        applied = apply_overrides(tree, parsed, grammar)
        merged = merge_over_defaults(defaults, tree)
    diagnostics.extend(applied.diagnostics)
    if spec.overrides_see_defaults:
        diagnostics.extend(_deleted_but_read(applied.deleted, root, spec))

    diagnostics.extend(spec.prepare(merged, result.release))
    judgement = Judgement(release=result.release, release_reason=result.release_reason,
                          referenced=frozenset(interpolation_targets(merged.data)),
                          added={path: "++" if o.op == "force" else "+" for path, o in applied.added.items()},
                          known_keys_only=result.pipeline is not None,
                          entry_modelled=frozenset(k.path for k in entry_keys.keys if k.modelled)
                          if entry_keys is not None else frozenset())
    resolution = resolve(merged, env, spec.resolvers)
    diagnostics.extend(resolution.diagnostics)
    result.tree = merged
    taken = _taken_keys(spec.release_keys(result.release), merged, diagnostics)
    taken |= _taken_keys(_fork_extension(base_dir, dialect, root), merged, diagnostics)
    taken |= _taken_keys(entry_keys, merged, diagnostics)

    checked = validate_tree(root, merged, spec, judgement)
    # A required key whose interpolation could not be resolved has been reported once, as the interpolation's error
    diagnostics.extend(d for d in checked.diagnostics
                       if not (d.code == "RLC203" and split_dotted(d.path) in resolution.unresolved))
    if result.pipeline is not None:
        host = HostFacts(env=env, path_exists=lambda p: os.path.exists(os.path.join(base_dir, p)))
        diagnostics.extend(run_rules(spec, None, merged, strict, host, checked.error_paths | resolution.unresolved,
                                     any(d.severity is Severity.ERROR for d in diagnostics), result.release))
        diagnostics.append(diagnostic(
            "RLC116", "", f"this config is for the {pipeline_name(result.pipeline)}, which rlcfg does not model: it "
            "checked the YAML, the interpolations and the keys it knows, not the pipeline's own keys and rules",
            origin=Origin("file", file=filename, line=1, column=1),
            hint="`rlcfg plan` and `rlcfg run` refuse it; validate it with the framework's own loader too"))
        result.summary = f"{result.pipeline} (not modelled; known keys checked)"
        return _finish(result, diagnostics, env, overrides)
    reported_unknown = {d.path for d in checked.diagnostics if d.code == "RLC102"}
    for path, override in applied.created.items():
        if dotted(path) not in reported_unknown and path not in taken:
            diagnostics.append(diagnostic(
                "RLC105", dotted(path), f"`{dotted(path)}` is not in the config, so Hydra cannot override it",
                origin=override.origin, hint=f"to add a new key to an open mapping, write `+{override.origin.override_text}`"))
    if checked.config is not None:
        has_errors = any(d.severity is Severity.ERROR for d in diagnostics)
        muted = checked.error_paths | resolution.unresolved | resolution.missing
        host = HostFacts(env=env, path_exists=lambda p: os.path.exists(os.path.join(base_dir, p)))
        result.entry_runs = entry_keys.runs if entry_keys is not None else None
        diagnostics.extend(run_rules(spec, checked.config, merged, strict, host, muted, has_errors, result.release,
                                     result.entry_runs))
        erring = {d.path for d in diagnostics if d.severity is Severity.ERROR}
        diagnostics.extend(d for d in _unread_warnings(root, merged, defaults, spec.resolvers) if d.path not in erring)
        if not has_errors and not any(d.severity is Severity.ERROR for d in diagnostics):
            result.config = checked.config
            result.summary = spec.describe(checked.config)
            unrun = spec.unrun_pipeline(checked.config)
            if unrun is None:
                diagnostics.extend(_refusal_notes(root, merged, defaults, spec.resolvers))
            else:
                # One word for the whole pipeline: the settings a run of another pipeline would refuse say nothing.
                name, why = unrun
                result.unrun = unrun
                diagnostics = [d for d in diagnostics if d.code != "RLC118"]
                diagnostics.append(diagnostic(
                    "RLC116", "", f"this config is for the {pipeline_name(name)}, which rlcfg validates but "
                    f"`rlcfg run` does not run: {why}", origin=Origin("file", file=filename, line=1, column=1),
                    hint="`rlcfg plan` describes what it can; run it with the framework itself"))
    return _finish(result, diagnostics, env, overrides)


def _fork_extension(base_dir: str, dialect: str, root: Any) -> Any:
    """The keys a fork adds, as the nearest project file declares them (rlcfg.source.project), or None."""
    from rlcfg.source import find_project

    project = find_project(base_dir)
    if project is None:
        return None
    from rlcfg.schema.base import field_at
    from rlcfg.source.project import load_extension

    return load_extension(project, dialect, lambda path: field_at(root, path)[0] is not None)


def _taken_keys(extension: Any, tree: SourceTree, diagnostics: list[Diagnostic]) -> set[tuple]:
    """Check the keys an extension (a fork's, or the judged release's keys the schema does not model) declares, and
    take them out of the tree before the dialect's schema sees it; the paths taken."""
    if extension is None:
        return set()
    from rlcfg.source.project import apply_extension

    taken = {key.path for key in extension.keys if tree.has(key.path)}
    diagnostics.extend(apply_extension(extension, tree))
    return taken


def pipeline_name(name: str) -> str:
    """A pipeline's name as a phrase: `AReaL DPO` → `AReaL DPO pipeline`."""
    return name if name.lower().endswith("pipeline") else f"{name} pipeline"


def _composed_for_detection(tree: SourceTree, base_dir: str, env: Mapping[str, str]) -> SourceTree:
    """The document with its Hydra defaults list composed, so that keys a config inherits from its base files count
    when telling the dialect (each dialect composes again, its own way, once chosen)."""
    if not isinstance(tree.data, dict) or "defaults" not in tree.data:
        return tree
    from rlcfg.source.compose import compose, searchpath_of

    folders, unusable = searchpath_of(tree, env)
    composed, _problems = compose(tree.copy(), base_dir, folders, unusable)
    return composed if isinstance(composed.data, dict) and composed.data else tree


def _refusal_notes(root: Any, tree: SourceTree, defaults: dict, resolvers: Mapping[str, Any] | None = None
                   ) -> list[Diagnostic]:
    from rlcfg.schema.ledger import refusals

    return _ledger_said(refusals(root, tree, defaults, _resolving(defaults, resolvers)), tree, "RLC118",
                        "`rlcfg run` refuses `{key}` = {value}: {reason}",
                        "`rlcfg validate` and `rlcfg plan` check it; to run with rlcfg, leave it at its default")


def _unread_warnings(root: Any, tree: SourceTree, defaults: dict, resolvers: Mapping[str, Any] | None = None
                     ) -> list[Diagnostic]:
    """A setting the framework never applies, set by the user: the run goes on without it, which they should know."""
    from rlcfg.schema.ledger import unread_settings

    return _ledger_said(unread_settings(root, tree, defaults, _resolving(defaults, resolvers)), tree, "RLC307",
                        "`{key}` = {value} has no effect: {reason}",
                        "remove it; `rlcfg run`, like the framework, runs without it")


def _ledger_said(settings: Sequence[Any], tree: SourceTree, code: str, message: str, hint: str) -> list[Diagnostic]:
    """What validate says of the settings the run ledger picked out, each at its own line."""
    from rlcfg.schema.validate import describe_value

    return [diagnostic(code, dotted(s.path), message.format(key=dotted(s.path), value=describe_value(s.value),
                                                            reason=s.reason),
                       origin=tree.origin(s.path), hint=hint) for s in settings]


def _resolving(defaults: dict, resolvers: Mapping[str, Any] | None) -> Callable[[], dict]:
    """The release's defaults with their interpolations resolved, computed when first asked for."""

    def resolved_defaults() -> dict:
        # The environment is left out: a default read from it is not one the release fixes.
        from rlcfg.source.resolve import resolve
        from rlcfg.source.tree import copy_containers

        own = SourceTree(copy_containers(defaults))
        resolve(own, {}, resolvers)
        return own.data

    return resolved_defaults


def _deleted_but_read(deleted: Mapping[tuple, Any], root: Any, spec: Any) -> list[Diagnostic]:
    from rlcfg.schema.base import field_at

    found = []
    for path, override in deleted.items():
        if field_at(root, path)[0] is None:
            continue
        name = dotted(path)
        found.append(diagnostic(
            "RLC117", name, f"`~{name}` deletes a key of the base config that {spec.title} reads: its loader accepts "
            "this, but the run stops with OmegaConf's ConfigAttributeError when the code asks for the key",
            origin=override.origin,
            hint=f"set it instead (`{name}=...`); to go back to the default, drop the override"))
    return found


def _fold_interpolated_copies(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """One error per cause: a value a `${...}` interpolation copied from a key where the same problem is reported
    (the reference's megatron_config interpolating the policy's, with a misspelt key in it; a learning rate of the
    wrong type that another role copies) is named as related to that error, not reported again."""

    def cause(d: Diagnostic) -> tuple:
        parent = d.path.rsplit(".", 1)[0] if "." in d.path else ""
        message = d.message.replace(d.path, "\0")
        return d.code, d.path.rsplit(".", 1)[-1], message.replace(parent, "\1") if parent else message

    written: dict[tuple, Diagnostic] = {}
    for d in diagnostics:
        if d.path and d.origin is not None and not d.origin.via and d.severity is Severity.ERROR:
            written.setdefault(cause(d), d)
    kept = []
    for d in diagnostics:
        # errors only: a note or warning about a copy (a refused setting another key repeats) is about that key
        source = written.get(cause(d)) if d.path and d.origin is not None and d.origin.via \
            and d.severity is Severity.ERROR else None
        if source is not None and source.path != d.path:
            source.related.append((d.path, d.origin))
            continue
        kept.append(d)
    return kept


def _finish(result: CheckResult, diagnostics: list[Diagnostic], env: Mapping[str, str] | None = None,
            overrides: Sequence[str] = ()) -> CheckResult:
    # "renamed, both spellings accepted" contradicts "this release does not have the key": the release wins
    missing_in_release = {d.path for d in diagnostics if d.code == "RLC113"}
    diagnostics = [d for d in diagnostics if not (d.code == "RLC111" and d.path in missing_in_release)]
    # a dialect rule that explains a key missing from the release (with the key that replaced it) says it better
    explained = {d.path for d in diagnostics if d.code == "RLC113" and d.rule}
    diagnostics = [d for d in diagnostics if not (d.code == "RLC113" and not d.rule and d.path in explained)]
    diagnostics = _fold_interpolated_copies(diagnostics)
    from rlcfg import schema

    if result.dialect is not None and not schema.load(result.dialect).checks_copied_keys(result.release):
        # a key an interpolation copied into a section that lacks it: the loader takes it as it is
        diagnostics = [d for d in diagnostics if not (d.code == "RLC102" and d.origin is not None and d.origin.via)]
    if result.release is not None:
        diagnostics = schema.load(result.dialect).spelled(diagnostics, result.release, overrides)
    result.diagnostics = sort_diagnostics(diagnostics)
    if env and result.tree is not None:
        _redact_environment(result.diagnostics, result.tree, env)
    return result


def env_vars_behind(origin: Origin | None) -> list[str]:
    """The environment variables a value was read from (directly or through an interpolation)."""
    if origin is None:
        return []
    found = [origin.env_var] if origin.kind == "env" and origin.env_var else []
    for inner in origin.via:
        found.extend(env_vars_behind(inner))
    return found


def _redact_environment(diagnostics: list[Diagnostic], tree: SourceTree, env: Mapping[str, str]) -> None:
    """A value read from the environment may be a secret (a token, a password): diagnostics name the variable,
    never its value."""
    names = {name for origin in tree.values.values() for name in env_vars_behind(origin)}
    secrets = sorted(((env[n], n) for n in names if env.get(n)), key=lambda pair: -len(pair[0]))
    if not secrets:
        return
    for d in diagnostics:
        for value, name in secrets:
            shown = f"<value of ${name}>"
            for attr in ("message", "hint"):
                text = getattr(d, attr)
                if not text:
                    continue
                # A value of a character or two would match inside unrelated words and numbers: replace it only
                # where it stands quoted, as type errors show it.
                if len(value) >= 3:
                    text = text.replace(value, shown)
                else:
                    text = text.replace(f"'{value}'", shown).replace(f'"{value}"', shown)
                setattr(d, attr, text)


@record
class Explanation:
    key: str
    value: Any
    present: bool
    type: str | None
    description: str | None
    default: Any
    layers: list  # rlcfg.source.tree.Layer, oldest first
    origin: Origin | None


def explain(result: CheckResult, key: str) -> Explanation:
    """What `--explain KEY` prints. Raises KeyError (with a suggestion as its argument) for an unknown key."""
    from rlcfg.schema.base import field_at, iter_fields
    from rlcfg.schema.types_text import field_type_text
    from rlcfg.source.tree import split_dotted

    path = split_dotted(key)
    if result.dialect is not None and result.release is not None:
        from rlcfg import schema

        path = schema.load(result.dialect).schema_path(path, result.release)  # the key as the release spells it
    tree = result.tree
    info = owner = None
    if result.root is not None:
        info, owner = field_at(result.root, path)
    present = tree is not None and tree.has(path)
    if info is None and not present:
        known = [".".join(p) for p, _i, _o in iter_fields(result.root)] if result.root is not None else []
        close = close_matches(key, known, n=1, cutoff=0.6)
        raise KeyError(close[0] if close else None)
    layers = list(tree.history.get(path, [])) if tree is not None else []
    value = tree.get(path) if present else None
    secret = env_vars_behind(tree.origin(path)) if tree is not None else []
    if secret:
        from rlcfg.source.tree import Layer

        hidden = f"<value of ${secret[0]}, not shown>"
        value = hidden
        layers = [Layer(layer.origin, hidden) if layer.origin.kind in ("derived", "env") else layer for layer in layers]
    return Explanation(
        key=key,
        value=value,
        present=present,
        type=field_type_text(info) if info is not None else None,
        description=info.description if info is not None else None,
        default=None if info is None or info.is_required() else (
            info.default_factory() if info.default_factory is not None else info.default),
        layers=layers,
        origin=tree.origin(path) if tree is not None else None,
    )

