"""`rlcfg plan FILE [OVERRIDES...]`: where each role lands, how a step's batch splits, whether it fits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, List, Optional

import typer

from rlcfg.cli import completion
from rlcfg.cli.base import (EXIT_INVALID, EXIT_OK, FRAMEWORK_VERSION_HELP, IGNORE_HELP, OutputFormat, app, bug_guard,
                            drop_ignored, file_help, ignored_codes, usage_error, use_color)


@app.command(
    epilog="Examples:\n\n"
           "  rlcfg plan templates/chatlearn-fsdp-vllm.yaml --show-gpu-map\n\n"
           "  rlcfg plan grpo.yaml --nodes 4 --gpus-per-node 8 --gpu h200\n\n"
           "  rlcfg plan grpo.yaml --model-config ~/models/Qwen3-8B/config.json --format json\n\n"
           "Exit codes: 0 the plan holds, 1 the config or the plan has errors (a placement that overlaps or does "
           "not fit the cluster, a GPU that runs out of memory) or rlcfg has no plan for its pipeline, 2 usage "
           "error, 101 a bug in rlcfg. What `rlcfg run` would not launch is a note beside the map, not an error.",
)
def plan(
    file: str = typer.Argument(..., help=file_help("plan"), metavar="FILE"),
    overrides: Optional[List[str]] = typer.Argument(
        None, metavar="[OVERRIDES]...", help="Command-line overrides in the dialect's own grammar, as for validate.",
        autocompletion=completion.override_keys),
    show_gpu_map: bool = typer.Option(False, "--show-gpu-map",
                                      help="Also draw the node × GPU grid and each role's rank coordinates."),
    output: OutputFormat = typer.Option(OutputFormat.text, "--format", "-f",
                                        help="text for people, json for tools (the whole plan)."),
    nodes: Optional[int] = typer.Option(None, "--nodes", min=1,
                                        help="Nodes in the cluster (default: the config's, else the fewest that hold "
                                             "the roles)."),
    gpus_per_node: Optional[int] = typer.Option(None, "--gpus-per-node", min=1,
                                                help="GPUs per node (default: the config's, else 8)."),
    gpu: Optional[str] = typer.Option(None, "--gpu", metavar="NAME",
                                      help="The GPU kind for the memory estimate: h100, h200, h800, h20, b200, "
                                           "a100-80g, a100-40g, l40s, l4, ... or a size such as 96GB (default h100).",
                                      autocompletion=completion.gpus),
    model_config: Optional[str] = typer.Option(None, "--model-config", metavar="FILE",
                                               help="The policy model's config.json, when its path in the config is "
                                                    "not a local directory; read as JSON, nothing is downloaded."),
    dialect: Optional[str] = typer.Option(None, "--dialect", "-d",
                                          help="Force the dialect instead of detecting it from the document.",
                                          autocompletion=completion.dialects),
    color: Optional[bool] = typer.Option(None, "--color/--no-color",
                                         help="Colour the text output (default: on a terminal, unless NO_COLOR is set)."),
    ignore: Optional[List[str]] = typer.Option(None, "--ignore", metavar="CODE[,CODE...]", help=IGNORE_HELP),
    framework_version: Optional[str] = typer.Option(None, "--framework-version", metavar="RELEASE",
                                                    help=FRAMEWORK_VERSION_HELP,
                                                    autocompletion=completion.releases),
    debug: bool = typer.Option(False, "--debug", help="Show the traceback if rlcfg itself fails."),
) -> None:
    """Plan a config: placement of each role on the cluster's GPUs, the rank layout, the batch schedule and a
    memory estimate per GPU, all without touching a GPU.

    The config is checked first, as `rlcfg validate` would; a config with errors is not planned.
    """
    from rlcfg.frontend import check_file, pipeline_name
    from rlcfg.source.yaml_loader import UsageError

    json_output = output is OutputFormat.json
    with bug_guard(debug):
        silenced = ignored_codes(ignore, json_output)
        try:
            result = check_file(file, overrides or [], dialect=dialect, release=framework_version)
        except UsageError as exc:
            raise usage_error(str(exc), json_output)
        result.diagnostics = drop_ignored(result.diagnostics, silenced)
        if result.pipeline is not None and not result.errors:
            typer.echo(f"rlcfg plan: {file} is for the {pipeline_name(result.pipeline)}, which rlcfg does not model; "
                       "`rlcfg validate` checks what it can of it", err=True)
            raise typer.Exit(EXIT_INVALID)
        if result.errors:
            from rlcfg.cli.validating import _json as validate_json
            from rlcfg.cli.validating import _text as validate_text
            from rlcfg.cli.validating import attach_fixes

            attach_fixes(file, overrides or [], dialect, framework_version, result)

            typer.echo(validate_json(result, None, False) if output is OutputFormat.json
                       else validate_text(result, None, use_color(color), False), color=use_color(color))
            raise typer.Exit(EXIT_INVALID)

        from rlcfg.plan import build_plan
        from rlcfg.preflight import backend_blockers, lower_result

        experiment, blockers = (None, []) if result.unrun is not None else lower_result(result)
        if experiment is None:
            # Valid, but rlcfg has no Experiment for it: say so as validate would, and why there is no map.
            from rlcfg.cli.validating import _json as validate_json
            from rlcfg.cli.validating import _text as validate_text

            why = (f"the {pipeline_name(result.unrun[0])} has no rlcfg plan: {result.unrun[1]}" if result.unrun
                   else blockers[0].message)
            typer.echo(validate_json(result, None, False) if output is OutputFormat.json
                       else validate_text(result, None, use_color(color), False), color=use_color(color))
            typer.echo(f"rlcfg plan: {file}: no GPU map: {why}", err=True)
            raise typer.Exit(EXIT_INVALID)
        policy_config, source = _read_model_config(model_config, json_output) if model_config else (None, None)
        local = {} if policy_config is not None else _local_model_configs(experiment)
        try:
            execution, diagnostics = build_plan(experiment, gpu=gpu, model_config=policy_config, nodes=nodes,
                                                gpus_per_node=gpus_per_node, model_configs=local,
                                                model_source=source)
        except ValueError as exc:  # an unknown --gpu
            raise usage_error(str(exc), json_output)
        # What `rlcfg run` would not launch on this cluster, said once, beside the map (the plan still describes it).
        launch = backend_blockers(execution)
        if launch:
            from rlcfg.diagnostics import diagnostic

            diagnostics.append(diagnostic(
                "RLC119", "", "`rlcfg run` would not launch this plan: " + "; ".join(b.message for b in launch),
                hint=f"`rlcfg run {file} --dry-run` lists everything that stops a run"))
        everything = drop_ignored(list(result.diagnostics) + diagnostics, silenced)
        if output is OutputFormat.json:
            typer.echo(_json(result, execution, everything))
        else:
            typer.echo(_text(result, execution, everything, show_gpu_map, use_color(color)), color=use_color(color))
        errors = sum(d.severity.value == "error" for d in everything)
        raise typer.Exit(EXIT_INVALID if errors else EXIT_OK)


def _read_model_config(path: str, json_output: bool = False) -> tuple[dict, str]:
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise usage_error(f"--model-config: no such file: {p}", json_output)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise usage_error(f"--model-config: cannot read {p} as JSON: {exc}", json_output)
    if not isinstance(data, dict):
        raise usage_error(f"--model-config: {p} is not a JSON object", json_output)
    return data, f"--model-config {path}"


def _local_model_configs(experiment: Any) -> dict[str, dict]:
    from rlcfg.preflight import local_model_configs

    return local_model_configs(experiment)


def _text(result: Any, execution: Any, diagnostics: list, show_gpu_map: bool, color: bool = False) -> str:
    from rlcfg.diagnostics import Severity, TextRenderer, count, plural, report_lines, tally
    from rlcfg.plan.render import render_text

    lines = [render_text(execution, show_gpu_map=show_gpu_map), ""]
    renderer = TextRenderer(result.sources, color=color)
    lines.extend(report_lines(renderer, diagnostics))
    errors, warnings = count(diagnostics)
    if errors:
        status = (f"{result.file}: the plan has {plural(errors, 'error')}, {plural(warnings, 'warning')}"
                  + (f" [{tally(diagnostics, Severity.WARNING)}]" if warnings > 1 else ""))
    else:
        memory = execution.memory
        fits = "no memory estimate" if memory is None else "fits in memory" if memory.fits else (
            "fits in memory at typical lengths, not at the longest" if memory.fits_typical else "does not fit in memory")
        status = f"{result.file}: plan for {plural(execution.cluster.gpus, 'GPU')}, {fits}"
        if warnings:
            status += f", {plural(warnings, 'warning')}"
    notes = sum(d.severity is Severity.NOTE for d in diagnostics)
    if notes:
        status += f", {plural(notes, 'note')}"
    lines.append(status)
    return "\n".join(lines)


def _json(result: Any, execution: Any, diagnostics: list) -> str:
    from rlcfg.diagnostics import count, render_json
    from rlcfg.ir import to_json

    errors, warnings = count(diagnostics)
    plan = to_json(execution)
    # Each placement also carries the config's own name for its role (ROLL's `actor_train` for rlcfg's `actor`),
    # as the text does, so a tool need not join it from the experiment.
    for placement in plan["placements"]:
        role = execution.experiment.role(placement["role"])
        placement["section"] = role.section if role is not None and role.section else placement["role"]
    return render_json({
        "file": result.file,
        "dialect": result.dialect,
        "variant": result.variant,
        "valid": errors == 0,
        "errors": errors,
        "warnings": warnings,
        "diagnostics": [d.to_json() for d in diagnostics],
        "plan": plan,
    })
