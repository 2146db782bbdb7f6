"""`rlcfg convert FILE [OVERRIDES...] --to DIALECT`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional

import typer

from rlcfg.cli import completion
from rlcfg.cli.base import (DIALECT_NAMES, EXIT_BUG, EXIT_INVALID, EXIT_OK, FRAMEWORK_VERSION_HELP, app, bug_guard,
                            file_help, usage_error)


@app.command(
    epilog="Examples:\n\n"
           "  rlcfg convert templates/skyrl-fsdp-vllm.yaml --to roll -o roll-grpo.yaml\n\n"
           "  rlcfg convert templates/chatlearn-fsdp-vllm.yaml --to areal\n\n"
           "  rlcfg convert templates/areal-fsdp-sglang-grpo.yaml --to areal --to-release 1.0   (upgrade a config)\n\n"
           "  rlcfg convert templates/skyrl-fsdp-vllm.yaml --to skyrl --to-release skyrl-0.4.0 -o run.sh   (the `skyrl` "
           "package reads a command line: a launch script)\n\n"
           "  rlcfg convert grpo.yaml trainer.train_batch_size=512 --to skyrl --strict\n\n"
           "Exit codes: 0 converted (losses, if any, are warnings on stderr), 1 the source has errors, the target "
           "release cannot take the experiment or, with --strict, cannot express some setting, 2 usage error, 101 a "
           "bug in rlcfg.",
)
def convert(
    file: str = typer.Argument(..., help=file_help("convert"), metavar="FILE"),
    overrides: Optional[List[str]] = typer.Argument(
        None, metavar="[OVERRIDES]...", help="Command-line overrides in the source dialect's own grammar.",
        autocompletion=completion.override_keys),
    to: str = typer.Option(..., "--to", "-t", metavar="DIALECT", help=f"The target dialect: {DIALECT_NAMES}.",
                           autocompletion=completion.dialects),
    to_release: Optional[str] = typer.Option(
        None, "--to-release", metavar="RELEASE", autocompletion=completion.target_releases,
        help="The release of the target framework to write the config for, in that release's layout and judged by "
             "it; by default the newest release that reads a config file. A release that reads a command line only "
             "(the `skyrl` package, skyrl-*) gets a launch script. A key that release lacks is left out and its "
             "setting listed as not expressible."),
    out: Optional[str] = typer.Option(None, "--output", "-o", metavar="OUT",
                                      help="Write the converted config here instead of standard output."),
    strict: bool = typer.Option(False, "--strict",
                                help="Fail (exit 1, nothing written) when the target cannot express a setting."),
    dialect: Optional[str] = typer.Option(None, "--dialect", "-d",
                                          help="Force the source dialect instead of detecting it.",
                                          autocompletion=completion.dialects),
    framework_version: Optional[str] = typer.Option(None, "--framework-version", metavar="RELEASE",
                                                    help=FRAMEWORK_VERSION_HELP,
                                                    autocompletion=completion.releases),
    debug: bool = typer.Option(False, "--debug", help="Show the traceback if rlcfg itself fails."),
) -> None:
    """Write the same experiment in another framework's dialect.

    The source is validated and lowered to rlcfg's Experiment; the converted config is written in the target's
    style (its defaults left out, keys in its reference order) and read back to check that it lowers to the same
    Experiment. Every setting the target cannot express is listed at the top of the output and on stderr.
    """
    from rlcfg.convert import DIALECTS, ConversionError, EmitterBug
    from rlcfg.convert import convert as run_conversion
    from rlcfg.source.yaml_loader import UsageError

    with bug_guard(debug):
        target = to.strip().lower()
        if target not in DIALECTS:
            raise usage_error(f"--to {to}: choose one of {DIALECT_NAMES}")
        try:
            conversion = run_conversion(file, target, overrides or [], dialect=dialect, release=framework_version,
                                        schema_line=_schema_line(target, out), to_release=to_release)
        except UsageError as exc:
            raise usage_error(str(exc))
        except ConversionError as exc:
            typer.echo(f"rlcfg: error: {exc}", err=True)
            for d in exc.diagnostics:
                if d.severity.value == "error":
                    typer.echo(f"  {d.code} {d.path or '(document)'}: {d.message}", err=True)
            raise typer.Exit(EXIT_BUG if isinstance(exc, EmitterBug) else EXIT_INVALID)
        if conversion.source_dialect == target and not conversion.tree:
            typer.echo(f"rlcfg: note: {file} is already in the {target} dialect: written unchanged (--to-release "
                       "writes it for another release)", err=True)
        written_for = f"{target} {conversion.target_release}" if conversion.target_release else target
        label = "error" if strict else "warning"
        for loss in conversion.losses:
            typer.echo(f"rlcfg: {label}: not expressible in {written_for}: {loss.describe()}", err=True)
        for note in conversion.notes:
            typer.echo(f"rlcfg: note: chosen by rlcfg, check it: {note}", err=True)
        if strict and conversion.losses:
            typer.echo(f"rlcfg: error: {len(conversion.losses)} setting(s) cannot be expressed in {written_for}; "
                       "nothing written (--strict)", err=True)
            raise typer.Exit(EXIT_INVALID)
        if out is not None and conversion.is_script and out.endswith((".yaml", ".yml")):
            from rlcfg import schema

            label = schema.load(target).release_label(conversion.target_release)
            raise usage_error(f"-o {out}: {label} reads its config from a command line, and convert writes it a "
                              "launch script; name the output .sh (`-o run.sh`), then `bash run.sh`")
        if out is None:
            typer.echo(conversion.text, nl=False)
        else:
            try:
                Path(out).write_text(conversion.text, encoding="utf-8")
            except OSError as exc:
                raise usage_error(f"cannot write {out}: {exc.strerror or exc}")
            typer.echo(f"rlcfg: wrote {out} ({conversion.source_dialect} -> {written_for}, "
                       f"{len(conversion.losses)} setting(s) not expressible)", err=True)
        raise typer.Exit(EXIT_OK)


def _schema_line(target: str, out: Optional[str]) -> str:
    """The JSON Schema's path relative to where the config is written, when rlcfg's own schemas/ folder is
    there to point at; otherwise the bare file name."""
    import rlcfg

    schemas = Path(rlcfg.__file__).resolve().parent.parent / "schemas" / f"{target}.schema.json"
    if not schemas.exists():
        return f"{target}.schema.json"
    base = Path(out).resolve().parent if out else Path.cwd()
    try:
        return os.path.relpath(schemas, base)
    except ValueError:  # another drive
        return str(schemas)
