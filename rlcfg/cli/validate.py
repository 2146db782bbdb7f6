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
           "Exit codes: 0 valid, 1 errors (or warnings with --strict), 2 usage error, 101 a bug in rlcfg.",
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
        if explain is not None:
            explanation = _explain_or_exit(result, explain, json_output)
        else:
            explanation = None
        failed = result.errors > 0 or (strict and result.warnings > 0)
        if output is OutputFormat.json:
            typer.echo(_json(result, explanation, strict))
        else:
            colored = use_color(color)
            typer.echo(_text(result, explanation, colored, strict), color=colored)  # click strips colour off a pipe otherwise
        raise typer.Exit(EXIT_INVALID if failed else EXIT_OK)


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


def _text(result: Any, explanation: Any, color: bool, strict: bool) -> str:
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
    lines.append(status)
    return "\n".join(lines)


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


def _json(result: Any, explanation: Any, strict: bool) -> str:
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
