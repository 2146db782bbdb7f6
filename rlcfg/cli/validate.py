"""`rlcfg validate FILE [OVERRIDES...]`."""

from __future__ import annotations

from typing import Any, List, Optional

import typer

from rlcfg.cli import (EXIT_INVALID, EXIT_OK, FRAMEWORK_VERSION_HELP, IGNORE_HELP, OutputFormat, app, bug_guard, drop_ignored,
                       ignored_codes, usage_error, use_color)


@app.command(
    epilog="Examples:\n\n"
           "  rlcfg validate templates/chatlearn-fsdp-vllm.yaml\n\n"
           "  rlcfg validate grpo.yaml runtime_args.sample_per_episode=1024 --format json\n\n"
           "  rlcfg validate skyrl.yaml trainer.policy_mini_batch_size=64 --explain trainer.train_batch_size\n\n"
           "  rlcfg validate grpo.yaml --diff      (show the fix for batch and parallel-size errors)\n\n"
           "  rlcfg validate grpo.yaml --fix       (write it into grpo.yaml)\n\n"
           "Batch sizes and parallel sizes constrain each other, so rlcfg solves them together: the `fix:` line "
           "under an error (`edits` in JSON) is the nearest change, to as few keys as possible, after which none of "
           "those rules fails and no new error appears. --fix writes the keys that are in FILE in place (comments, "
           "order and quoting kept); a key that came from an override or a default is printed as the override to "
           "pass instead.\n\n"
           "Exit codes: 0 valid, 1 errors (or warnings with --strict), 2 usage error, 101 a bug in rlcfg. With "
           "--fix, the code is that of the config after fixing.",
)
def validate(
    file: str = typer.Argument(..., help="The YAML config to check.", metavar="FILE"),
    overrides: Optional[List[str]] = typer.Argument(
        None, metavar="[OVERRIDES]...",
        help="Command-line overrides in the dialect's own grammar: `a.b=c` everywhere; Hydra dialects (SkyRL, "
             "RLinf, ROLL, AReaL) also take `+a.b=c` (add), `++a.b=c` (add or change) and `~a.b` (delete)."),
    dialect: Optional[str] = typer.Option(None, "--dialect", "-d",
                                          help="Force the dialect (chatlearn, skyrl, rlinf, roll, areal) instead of "
                                               "detecting it from the document's top-level keys."),
    output: OutputFormat = typer.Option(OutputFormat.text, "--format", "-f", help="text for people, json for tools."),
    strict: bool = typer.Option(False, "--strict",
                                help="Fail on warnings too; rules that depend on the machine the job runs on "
                                     "(an API key in the environment, a path that must exist) become errors."),
    explain: Optional[str] = typer.Option(None, "--explain", metavar="KEY",
                                          help="Print KEY's resolved value and how it got it "
                                               "(default, then file, then overrides)."),
    color: Optional[bool] = typer.Option(None, "--color/--no-color",
                                         help="Colour the text output (default: on a terminal, unless NO_COLOR is set)."),
    ignore: Optional[List[str]] = typer.Option(None, "--ignore", metavar="CODE[,CODE...]", help=IGNORE_HELP),
    framework_version: Optional[str] = typer.Option(None, "--framework-version", metavar="RELEASE",
                                                    help=FRAMEWORK_VERSION_HELP),
    fix: bool = typer.Option(False, "--fix",
                             help="Apply the fixes for batch and parallel-size errors to FILE in place, print the "
                                  "unified diff and the overrides to change, then report on the fixed config."),
    diff: bool = typer.Option(False, "--diff", help="Print what --fix would change, without writing."),
    debug: bool = typer.Option(False, "--debug", help="Show the traceback if rlcfg itself fails."),
) -> None:
    """Check a config: every parameter, every cross-field rule, all problems at once.

    The dialect is detected from the document. Each problem is printed with its code, the file:line:col of
    the key that owns it (or the override or default it came from), and a hint.
    """
    from rlcfg.frontend import check_file
    from rlcfg.source.yaml_loader import UsageError

    json_output = output is OutputFormat.json
    with bug_guard(debug):
        silenced = ignored_codes(ignore, json_output)
        try:
            result = check_file(file, overrides or [], dialect=dialect, strict=strict, release=framework_version)
        except UsageError as exc:
            raise usage_error(str(exc), json_output)
        result.diagnostics = drop_ignored(result.diagnostics, silenced)
        problem = _problem(file, overrides or [], dialect, framework_version)
        solution = _solve(problem, result, thorough=fix or diff)
        repair = None
        if fix or diff:
            repair = _repair(problem, result, solution, write=fix, json_output=json_output)
            if repair.written:
                result = check_file(file, overrides or [], dialect=dialect, strict=strict, release=framework_version)
                result.diagnostics = drop_ignored(result.diagnostics, silenced)
                _solve(problem, result, reread=True, thorough=True)
        if explain is not None:
            explanation = _explain_or_exit(result, explain, json_output)
        else:
            explanation = None
        failed = result.errors > 0 or (strict and result.warnings > 0)
        if output is OutputFormat.json:
            typer.echo(_json(result, explanation, strict, repair))
        else:
            colored = use_color(color)
            if repair is not None:
                typer.echo(_repair_text(repair, file))
            text = _text(result, explanation, colored, strict, searched_longer=repair is not None)
            typer.echo(text, color=colored)  # click strips colour off a pipe otherwise
        raise typer.Exit(EXIT_INVALID if failed else EXIT_OK)


def attach_fixes(file: str, overrides: list[str], dialect: Optional[str], release: Optional[str], result: Any) -> None:
    """Hang on the diagnostics the fixes `validate` shows (`plan` reports a config with errors the same way)."""
    _solve(_problem(file, overrides, dialect, release), result)


def _problem(file: str, overrides: list[str], dialect: Optional[str], release: Optional[str]) -> Any:
    from pathlib import Path

    from rlcfg.fix import Problem
    from rlcfg.source.yaml_loader import read_text

    return Problem(read_text(file), file, overrides, dialect, release, None, str(Path(file).parent))


def _solve(problem: Any, result: Any, reread: bool = False, thorough: bool = False) -> Any:
    """Solve the batch and parallel-size errors together and hang the edits on the diagnostics they clear."""
    from rlcfg.fix import DEFAULT_BUDGET, FIX_BUDGET, attach, solve, value_suggestions

    if reread:  # the file was just rewritten
        from rlcfg.source.yaml_loader import read_text

        problem.text = read_text(problem.filename)
    solution = solve(problem, result, budget=FIX_BUDGET if thorough else DEFAULT_BUDGET,
                     partial_when_cut_short=thorough)
    if solution is not None:
        attach(result, solution)
    value_suggestions(problem, result)
    return solution


class _Repair:
    def __init__(self, edits: list, diff: str, written: bool, unwritable: list, needed: bool):
        self.needed = needed  # the config has batch or parallel-size errors
        self.edits = edits
        self.diff = diff
        self.written = written
        self.unwritable = unwritable  # in-file edits the loader did not read back as written

    @property
    def overrides(self) -> list:
        return [e for e in self.edits if not e.in_file]


def _repair(problem: Any, result: Any, solution: Any, write: bool, json_output: bool) -> _Repair:
    from rlcfg.diagnostics import Severity
    from rlcfg.fix import SOLVABLE_CODES, apply_to_text, unified_diff, written_correctly

    edits = list(solution.edits) if solution is not None else []
    needed = any(d.severity is Severity.ERROR and d.code in SOLVABLE_CODES for d in result.diagnostics)
    in_file = [e for e in edits if e.in_file]
    fixed = apply_to_text(problem.text, in_file)
    if in_file and not written_correctly(fixed, problem.filename, in_file):
        return _Repair(edits, "", False, in_file, needed)
    diff = unified_diff(problem.text, fixed, problem.filename)
    written = False
    if write and fixed != problem.text:
        try:
            with open(problem.filename, "w", encoding="utf-8", newline="") as handle:
                handle.write(fixed)
        except OSError as exc:
            raise usage_error(f"--fix cannot write {problem.filename}: {exc.strerror or exc}", json_output)
        written = True
    return _Repair(edits, diff, written, [], needed)


def _repair_text(repair: _Repair, file: str) -> str:
    lines: list[str] = []
    if not repair.edits and repair.needed:
        lines.append("no fix: rlcfg found no change to at most a few keys that clears the batch and parallel-size "
                     "errors without causing another; the hints below say what each rule needs")
    elif not repair.edits:
        lines.append("nothing to fix: the config has no batch or parallel-size error")
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


def _text(result: Any, explanation: Any, color: bool, strict: bool, searched_longer: bool = False) -> str:
    from rlcfg.diagnostics import TextRenderer, plural

    lines: list[str] = []
    if explanation is not None:
        lines.extend(_explain_text(explanation))
        lines.append("")
    renderer = TextRenderer(result.sources, color=color)
    for d in result.diagnostics:
        lines.append(renderer.render(d))
        lines.append("")
    dialect = f"{result.dialect} config" if result.dialect else "config"
    if result.errors:
        status = f"{result.file}: {plural(result.errors, 'error')}, {plural(result.warnings, 'warning')} ({dialect})"
    elif result.warnings:
        verdict = "fails --strict" if strict else "valid"
        status = f"{result.file}: {verdict} {dialect} with {plural(result.warnings, 'warning')}"
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


def _unfixed(result: Any) -> bool:
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
