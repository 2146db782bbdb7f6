"""What `rlcfg validate` does, without typer: the command line's fast path runs it directly (rlcfg.cli.main), and
the typer command (rlcfg.cli.validate) declares its options and help and calls it."""

from __future__ import annotations

from typing import Any, Optional

from rlcfg.cli.common import (EXIT_INVALID, EXIT_OK, bug_guard, drop_ignored, echo, ignored_codes, usage_error,
                              use_color)


def validate_config(file: str, overrides: list[str], dialect: Optional[str] = None, json_output: bool = False,
                    strict: bool = False, explain: Optional[str] = None, color: Optional[bool] = None,
                    ignore: Optional[list[str]] = None, framework_version: Optional[str] = None, fix: bool = False,
                    diff: bool = False, debug: bool = False, unsafe_fixes: bool = False) -> int:
    """Check FILE with OVERRIDES, print the report, and return the exit code (rlcfg.cli.validate documents the
    options). A usage error raises rlcfg.cli.common.Exit after printing its message."""
    from rlcfg.frontend import check_file
    from rlcfg.source.yaml_loader import UsageError

    with bug_guard(debug):
        silenced = ignored_codes(ignore, json_output)
        try:
            result = check_file(file, overrides, dialect=dialect, strict=strict, release=framework_version)
        except UsageError as exc:
            raise usage_error(str(exc), json_output)
        result.diagnostics = drop_ignored(result.diagnostics, silenced)
        problem = None
        if fix or diff or any(_solver_may_help(d) for d in result.diagnostics):
            # the solver (rlcfg.fix) is not even imported for a clean config, or one with warnings only
            problem = _problem(file, overrides, dialect, framework_version)
            _solve(problem, result, thorough=fix or diff)
        repair = None
        if fix or diff:
            repair = _repair(problem, result, write=fix, json_output=json_output, unsafe=unsafe_fixes)
            if repair.written:
                result = check_file(file, overrides, dialect=dialect, strict=strict, release=framework_version)
                result.diagnostics = drop_ignored(result.diagnostics, silenced)
                _solve(problem, result, reread=True, thorough=True)
        explanation = _explain_or_exit(result, explain, json_output) if explain is not None else None
        failed = result.errors > 0 or (strict and result.warnings > 0)
        if json_output:
            echo(_json(result, explanation, strict, repair))
        else:
            if repair is not None:
                echo(_repair_text(repair, problem.filename))
            echo(_text(result, explanation, use_color(color), strict, searched_longer=repair is not None,
                       applied=repair is not None and repair.written))
        return EXIT_INVALID if failed else EXIT_OK


def _solver_may_help(diagnostic: Any) -> bool:
    # rlcfg.fix solves errors, and makes a did-you-mean of a value (RLC202) an edit
    return diagnostic.severity.value == "error" or diagnostic.code == "RLC202"


def attach_fixes(file: str, overrides: list[str], dialect: Optional[str], release: Optional[str], result: Any) -> None:
    """Hang on the diagnostics the fixes `validate` shows (`plan` reports a config with errors the same way)."""
    _solve(_problem(file, overrides, dialect, release), result)


def _problem(file: str, overrides: list[str], dialect: Optional[str], release: Optional[str]) -> Any:
    from rlcfg.fix import Problem
    from rlcfg.frontend import open_config

    # A launch script's fixes are to the config file it names and to its own arguments (rlcfg.frontend.open_config).
    opened = open_config(file, overrides, dialect)
    return Problem(opened.text, opened.filename, opened.overrides, opened.dialect, release, None, opened.base_dir)


def _solve(problem: Any, result: Any, reread: bool = False, thorough: bool = False) -> Any:
    """Find the fixes and hang each on the diagnostics it clears: renames of misspelt keys first, then the
    did-you-means of misspelt values (the errors a misspelling causes fold into its error), then, on the config with
    those put right, safe edits for the batch and parallel-size errors, or unsafe ones where no safe edit clears
    them all."""
    import dataclasses

    from rlcfg.fix import (DEFAULT_BUDGET, FIX_BUDGET, apply_to_text, attach, committed_tree, renames, solve,
                           solvable, value_suggestions)

    if reread:  # the file was just rewritten
        from rlcfg.source.yaml_loader import read_text

        problem.text = read_text(problem.filename)
    found = renames(problem, result)
    checked = result
    if found:
        problem = dataclasses.replace(problem, text=apply_to_text(problem.text, found))
        checked = problem.check()
    values = [e for e in value_suggestions(problem, checked, into=result) if not e.unsafe]
    if values:  # the batch and parallel sizes are solved with the misspelt values put right
        problem = dataclasses.replace(problem, overrides=[*problem.overrides, *(e.override for e in values)])
        checked = problem.check()
    if solvable(checked):
        committed = committed_tree(problem)
        budget = FIX_BUDGET if thorough else DEFAULT_BUDGET
        best = solve(problem, checked, budget=budget, partial_when_cut_short=thorough, safe_only=True,
                     committed=committed)
        if best is None or len(best.cleared) < len(solvable(checked)):
            # One solution is shown, never a safe part beside an unsafe whole: the two were not checked together.
            unsafe = solve(problem, checked, budget=budget, partial_when_cut_short=thorough, committed=committed)
            if unsafe is not None and (best is None or len(unsafe.cleared) > len(best.cleared)):
                best = unsafe
        if best is not None:
            attach(result, best)


class _Repair:
    def __init__(self, edits: list, diff: str, written: bool, unwritable: list, needed: bool, held: list,
                 errors: bool):
        self.needed = needed  # the config has errors with fixes, or batch and parallel-size errors
        self.edits = edits
        self.diff = diff
        self.written = written
        self.unwritable = unwritable  # in-file edits the loader did not read back as written
        self.held = held  # unsafe edits left out without --unsafe-fixes
        self.errors = errors  # the config has errors (with a fix or not)

    @property
    def overrides(self) -> list:
        return [e for e in self.edits if not e.in_file]


def _repair(problem: Any, result: Any, write: bool, json_output: bool, unsafe: bool = False) -> _Repair:
    """Apply the fixes hung on the diagnostics: renames first (the other edits were found on the renamed text),
    then the values. Unsafe edits only with `unsafe`."""
    from rlcfg.diagnostics import Severity
    from rlcfg.fix import SOLVABLE_CODES, apply_to_text, unified_diff, written_correctly

    edits, held = [], []
    for d in result.diagnostics:
        # a diagnostic's edits were checked together: an unsafe one holds back its safe companions too
        kept = edits if unsafe or not any(e.unsafe for e in d.edits) else held
        for e in d.edits:
            if e not in edits and e not in held:
                kept.append(e)
    needed = any(d.severity is Severity.ERROR and (d.code in SOLVABLE_CODES or d.edits) for d in result.diagnostics)
    errors = any(d.severity is Severity.ERROR for d in result.diagnostics)
    renames = [e for e in edits if e.rename and e.in_file]
    values = [e for e in edits if not e.rename and e.in_file]
    text = problem.text
    fixed = apply_to_text(apply_to_text(text, renames), values)
    in_file = renames + values
    if in_file and not written_correctly(fixed, problem.filename, in_file):
        return _Repair(edits, "", False, in_file, needed, held, errors)
    diff = unified_diff(text, fixed, problem.filename)
    written = False
    if write and fixed != text:
        try:
            with open(problem.filename, "w", encoding="utf-8", newline="") as handle:
                handle.write(fixed)
        except OSError as exc:
            raise usage_error(f"--fix cannot write {problem.filename}: {exc.strerror or exc}", json_output)
        written = True
    return _Repair(edits, diff, written, [], needed, held, errors)


def _repair_text(repair: _Repair, file: str) -> str:
    lines: list[str] = []
    if not repair.edits and repair.held:
        lines.append("no safe fix: every change rlcfg found that clears the errors may change what the experiment "
                     "computes")
    elif not repair.edits and repair.needed:
        lines.append("no fix: rlcfg found no change to at most a few keys that clears the batch and parallel-size "
                     "errors without causing another; the hints below say what each rule needs")
    elif not repair.edits and repair.errors:
        lines.append("no fix: --fix changes batch and parallel sizes, misspelt keys and misspelt values; the "
                     "errors below need the changes their hints describe")
    elif not repair.edits:
        lines.append("nothing to fix: the config has no error")
    if repair.diff:
        lines.append(repair.diff.rstrip("\n"))
    in_file = [e for e in repair.edits if e.in_file]
    if in_file and repair.written:
        lines.append(f"fixed {file}: " + "; ".join(e.describe() for e in in_file))
    elif in_file and repair.unwritable:
        lines.append(f"could not write the fix into {file} safely; make these changes by hand: "
                     + "; ".join(e.describe() for e in in_file))
    elif in_file:
        lines.append(f"--fix would write this into {file}")
    if repair.overrides:
        lines.append("these values come from overrides or defaults, so the fix is on your command line: "
                     + "; ".join(e.describe() for e in repair.overrides))
    if repair.held:
        from rlcfg.diagnostics import fix_line

        lines.append(f"left out, as it may change what the experiment computes: {fix_line(repair.held)}")
    lines.append("")
    return "\n".join(lines)


def _explain_or_exit(result: Any, key: str, json_output: bool = False) -> Any:
    from rlcfg.frontend import explain

    if result.tree is None:
        return None
    try:
        return explain(result, key)
    except KeyError as exc:
        suggestion = exc.args[0] if exc.args else None
        raise usage_error(f"`{key}` is not a key of this {result.dialect} config"
                          + (f"; did you mean `{suggestion}`?" if suggestion else ""), json_output)


def _text(result: Any, explanation: Any, color: bool, strict: bool, searched_longer: bool = False,
          applied: bool = False) -> str:
    from rlcfg.diagnostics import Severity, TextRenderer, plural, report_lines, tally

    lines: list[str] = []
    if explanation is not None:
        lines.extend(_explain_text(explanation))
        lines.append("")
    renderer = TextRenderer(result.sources, color=color)
    lines.extend(report_lines(renderer, result.diagnostics))
    dialect = f"{result.dialect} config" if result.dialect else "config"
    warnings = plural(result.warnings, "warning")
    if result.warnings > 1:
        warnings += f" [{tally(result.diagnostics, Severity.WARNING)}]"
    notes = sum(d.severity is Severity.NOTE for d in result.diagnostics)
    noted = plural(notes, "note")
    if result.errors:
        status = f"{result.file}: {plural(result.errors, 'error')}{_fixable(result, applied)}, {warnings}"
        status += f", {noted} ({dialect})" if notes else f" ({dialect})"
    elif result.warnings:
        verdict = "fails --strict" if strict else "valid"
        status = f"{result.file}: {verdict} {dialect} with {warnings}" + (f" and {noted}" if notes else "")
    elif notes:
        status = f"{result.file}: valid {dialect} with {noted}"
    else:
        status = f"{result.file}: valid {dialect}"
    if result.release_label and not result.errors:
        status += f" ({result.release_label}: {result.release_reason})"
    if result.summary and not result.errors:
        status += f": {result.summary}"
    if not searched_longer and _unfixed(result):
        lines.append("(a short search found no fix for the batch and parallel-size errors; "
                     "`rlcfg validate --diff` searches longer)")
    lines.append(status)
    return "\n".join(lines)


def _fixable(result: Any, applied: bool) -> str:
    """How many errors `--fix` clears, and how many more `--unsafe-fixes` would (nothing once a fix was written:
    the report is then of the fixed config)."""
    from rlcfg.diagnostics import Severity

    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR and d.edits]
    safe = sum(not any(e.unsafe for e in d.edits) for d in errors)
    unsafe = len(errors) - safe
    parts = ([f"{safe} fixable with --fix"] if safe else []) + ([f"{unsafe} with --unsafe-fixes"] if unsafe else [])
    return f" ({', '.join(parts)})" if parts and not applied else ""


def _unfixed(result: Any) -> bool:
    if not result.errors:
        return False  # nothing to solve, and the solver stays unimported
    from rlcfg.diagnostics import Severity
    from rlcfg.fix import SOLVABLE_CODES

    solvable = [d for d in result.diagnostics if d.severity is Severity.ERROR and d.code in SOLVABLE_CODES]
    return bool(solvable) and not any(d.edits for d in solvable)


def _show(value: Any) -> str:
    import json

    return json.dumps(value) if not isinstance(value, str) else value


def _explain_text(e: Any) -> list[str]:
    lines = [f"{e.key} = {_show(e.value) if e.present else '(not set)'}"]
    if e.type:
        lines.append(f"  type: {e.type}")
    if e.description:
        lines.append(f"  {e.description}")
    if e.layers:
        lines.append("  how it got this value:")
        for layer in e.layers:
            origin = layer.origin
            if origin.kind == "derived":
                via = ", ".join(o.describe() for o in origin.via) or "interpolation"
                lines.append(f"    resolved     {_show(layer.value)}  (from {via})")
            else:
                lines.append(f"    {origin.kind:<12} {_show(layer.value)}  {origin.describe()}")
    elif e.present and e.origin is not None:
        lines.append(f"  from: {e.origin.describe()}")
    return lines


def _json(result: Any, explanation: Any, strict: bool, repair: Optional[_Repair] = None) -> str:
    from rlcfg.diagnostics import render_json

    payload: dict = {
        "file": result.file,
        "dialect": result.dialect,
        "variant": result.variant,
        "framework_release": result.release,
        "pipeline": result.pipeline,
        "valid": result.errors == 0 and not (strict and result.warnings),
        "errors": result.errors,
        "warnings": result.warnings,
        "diagnostics": [d.to_json() for d in result.diagnostics],
    }
    if repair is not None:
        payload["fix"] = {
            "written": repair.written,
            "diff": repair.diff,
            "edits": [e.to_json() for e in repair.edits],
            "overrides": [e.override for e in repair.overrides],
            "left_out": [e.to_json() for e in repair.held],
        }
    if explanation is not None:
        payload["explain"] = {
            "key": explanation.key,
            "value": explanation.value,
            "set": explanation.present,
            "type": explanation.type,
            "description": explanation.description,
            "default": explanation.default,
            "layers": [{"value": layer.value, "origin": layer.origin.to_json()} for layer in explanation.layers],
        }
    return render_json(payload)
