"""`rlcfg run FILE [OVERRIDES...]` and `rlcfg run --quickstart`.

FILE goes through the same front end as `validate` (a config with errors never starts), is lowered to the
canonical Experiment and planned for this machine, then executed by rlcfg.runtime. torch, ray and
transformers are imported only here, inside the command.
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import replace
from typing import List, Optional

import typer

from rlcfg.cli import completion
from rlcfg.cli.base import (FRAMEWORK_VERSION_HELP, EXIT_INVALID, EXIT_OK, EXIT_USAGE, OutputFormat, app, file_help,
                                bug_guard, usage_error)

RUN_PACKAGES = ("torch", "ray", "transformers")


def _require_run_extra() -> None:
    missing = [name for name in RUN_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        typer.echo(f"rlcfg: error: `rlcfg run` needs {', '.join(missing)}, which "
                   f"{'is' if len(missing) == 1 else 'are'} not installed; install the run extra: "
                   "pip install 'rlcfg[run]'", err=True)
        raise typer.Exit(EXIT_USAGE)


def _fail(message: str, json_output: bool = False) -> typer.Exit:
    """A run that cannot start (exit 1); tools that asked for JSON get the reason on stdout too."""
    typer.echo(f"rlcfg: error: {message}", err=True)
    if json_output:
        import json

        typer.echo(json.dumps({"format_version": 1, "launches": False, "environment_error": message}, indent=2))
    return typer.Exit(EXIT_INVALID)


@app.command(
    epilog="Examples:\n\n"
           "  rlcfg run --quickstart\n\n"
           "  rlcfg run --quickstart --output runs/qs --no-resume\n\n"
           "  rlcfg run grpo.yaml trainer.epochs=1 --output runs/grpo\n\n"
           "  rlcfg run grpo.yaml --address auto   (join the Ray cluster this node belongs to)\n\n"
           "  rlcfg run grpo.yaml --smoke   (3 steps of the config's algorithm on this machine, with a tiny model)\n\n"
           "  rlcfg run grpo.yaml --dry-run   (would it launch on the config's cluster? no GPU, torch or Ray needed)\n\n"
           "  rlcfg run grpo.yaml --dry-run --nodes 2 --gpus-per-node 8 --format json\n\n"
           "Exit codes: 0 finished (with --dry-run: it would launch), 1 the config has errors or cannot run (there, "
           "or here), 2 usage error (or the run extra is missing), 101 a bug in rlcfg.",
)
def run(
    file: Optional[str] = typer.Argument(None, metavar="[FILE]", help=file_help("run")),
    overrides: Optional[List[str]] = typer.Argument(None, metavar="[OVERRIDES]...",
                                                    help="Overrides in the dialect's own grammar, as for validate.",
                                                    autocompletion=completion.override_keys),
    quickstart: bool = typer.Option(False, "--quickstart",
                                    help="Run the built-in quickstart: a tiny model, warm-started with a short SFT, learns "
                                         "with GRPO to answer the multiplication table and stop, on CPU, in a couple "
                                         "of minutes. Nothing is downloaded."),
    output: Optional[str] = typer.Option(None, "--output", "-o", metavar="DIR",
                                         help="The run's folder: metrics.jsonl, checkpoints/, plots/, hf_model/ and "
                                              "experiment.json all go there, and rerunning with the same folder "
                                              "resumes that run (default: the config's log directory, with its "
                                              "checkpoint directory, else ./rlcfg-runs/<name>)."),
    resume: Optional[bool] = typer.Option(None, "--resume/--no-resume",
                                          help="Continue from the newest checkpoint in the output folder that "
                                               "verifies, if any (default: what the config says, else resume). "
                                               "--no-resume in a folder that holds checkpoints needs --overwrite."),
    overwrite: bool = typer.Option(False, "--overwrite",
                                   help="Start over in an output folder that holds a run: delete its checkpoints, "
                                        "metrics.jsonl, plots/, hf_model/, tensorboard/ and experiment.json (each "
                                        "named as it goes), nothing else."),
    resume_from: Optional[str] = typer.Option(None, "--resume-from", metavar="CHECKPOINT",
                                              help="Continue from this checkpoint directory (a checkpoints/step-N)."),
    address: Optional[str] = typer.Option(None, "--address", metavar="ADDR",
                                          help="Join an existing Ray cluster (`auto`, host:port, or ray://...); "
                                               "default: RAY_ADDRESS, else a private local instance."),
    dialect: Optional[str] = typer.Option(None, "--dialect", "-d", help="Force the config's dialect.",
                                          autocompletion=completion.dialects),
    steps: Optional[int] = typer.Option(None, "--steps", min=1,
                                        help="Stop after this many steps of this invocation (a resumed run counts "
                                             "from its checkpoint)."),
    framework_version: Optional[str] = typer.Option(None, "--framework-version", metavar="RELEASE",
                                                    help=FRAMEWORK_VERSION_HELP,
                                                    autocompletion=completion.releases),
    smoke: bool = typer.Option(False, "--smoke",
                               help="Try the config here before the cluster: its algorithm, roles, colocation and batch "
                                    "structure run for a few steps (3 unless --steps) with stand-ins for what this "
                                    "machine lacks: a tiny model of the same family, generated data when the config's "
                                    "is not here, CPU workers for GPUs, hf for a rollout engine that does not run here, "
                                    "batches divided by one factor and short sequences. Every substitution is printed "
                                    "first, with each setting `rlcfg run` refuses, set here to a value it runs; "
                                    "nothing is downloaded. "
                                    "Default output: ./rlcfg-runs/smoke-<name>, started over each time."),
    dry_run: bool = typer.Option(False, "--dry-run",
                                 help="Do everything `run` does before a worker starts, for the cluster the config "
                                      "describes (or --nodes/--gpus-per-node, or the Ray cluster at --address as Ray "
                                      "reports it), and say whether it would launch: "
                                      "validation, the settings `run` refuses, the lowering, the plan and its memory "
                                      "verdict, the backend checks as on the cluster's nodes, and the model and data "
                                      "paths. Every reason it would not launch is listed at once, with the key to "
                                      "change. Needs no GPU or torch, and Ray only with --address. Exit 0: it would "
                                      "launch; 1: it would not."),
    nodes: Optional[int] = typer.Option(None, "--nodes", min=1,
                                        help="With --dry-run: nodes in the cluster (default: the config's, else the "
                                             "fewest that hold the roles)."),
    gpus_per_node: Optional[int] = typer.Option(None, "--gpus-per-node", min=1,
                                                help="With --dry-run: GPUs per node (default: the config's, else 8)."),
    gpu: Optional[str] = typer.Option(None, "--gpu", metavar="NAME",
                                      help="With --dry-run: the GPU kind for the memory verdict (h100, h200, "
                                           "a100-80g, ... or a size such as 96GB; default h100).",
                                      autocompletion=completion.gpus),
    output_format: OutputFormat = typer.Option(OutputFormat.text, "--format", "-f",
                                               help="With --dry-run: text for people, json for tools."),
    debug: bool = typer.Option(False, "--debug", help="Show worker logs, and the traceback if rlcfg itself fails."),
) -> None:
    """Run a config (or the quickstart) on Ray: GRPO/PPO with FSDP training and hf/vLLM/SGLang rollout.

    The config is validated, lowered and planned first; a config with errors, a backend this machine cannot
    run, or a missing data file stops the run before any worker starts.
    """
    if quickstart == (file is not None):
        raise usage_error("give a config FILE or --quickstart (one of them)")
    if quickstart and overrides:
        raise usage_error("--quickstart takes no overrides")
    if overwrite and (resume or resume_from):
        raise usage_error("--overwrite starts the run over; it cannot go with --resume or --resume-from")
    if smoke and quickstart:
        raise usage_error("--smoke runs a config FILE; the quickstart is small already")
    if smoke and address:
        raise usage_error("--smoke runs on this machine; it cannot go with --address")
    cluster_flags = [name for name, value in (("--nodes", nodes), ("--gpus-per-node", gpus_per_node), ("--gpu", gpu))
                     if value is not None]
    if output_format is OutputFormat.json:
        cluster_flags.append("--format")
    if dry_run:
        if quickstart or smoke:
            raise usage_error("--dry-run checks a config FILE for its cluster; it cannot go with "
                              f"{'--quickstart' if quickstart else '--smoke'}")
        if address and (nodes or gpus_per_node):
            raise usage_error("--address judges that Ray cluster as it is; --nodes and --gpus-per-node describe "
                              "another: give one or the other")
        with bug_guard(debug):
            _dry_run(file, overrides or [], dialect, framework_version, nodes, gpus_per_node, gpu,
                     output_format is OutputFormat.json, address)
    if cluster_flags:
        raise usage_error(f"{', '.join(cluster_flags)} go with --dry-run; a run uses the machine or the Ray cluster "
                          "it starts on")
    _require_run_extra()
    # A smoke run is planned for this machine, so it never joins the cluster RAY_ADDRESS names.
    address = None if smoke else (address or os.environ.get("RAY_ADDRESS") or None)

    with bug_guard(debug):
        if quickstart:
            from rlcfg.runtime import quickstart as qs

            out = output or os.path.join("rlcfg-runs", "quickstart")
            _writable(out)
            experiment = _os_guard(lambda: qs.experiment(out, warm_start=True), out, "output folder")
            threads = 1  # a tiny model gains nothing from intra-op threads, and loses to their contention
        else:
            if smoke:
                from rlcfg.runtime.smoke import DEFAULT_STEPS

                experiment = _smoke(file, overrides or [], dialect, framework_version)
                steps = steps or DEFAULT_STEPS
                if output is None and resume is None and resume_from is None:
                    # A smoke run is a check, not a run to continue: its default folder starts over each time.
                    output, overwrite = os.path.join("rlcfg-runs", f"smoke-{experiment.name or 'run'}"), True
            else:
                experiment = _lower(file, overrides or [], dialect, framework_version)
            out = output or experiment.logging.directory or os.path.join("rlcfg-runs", experiment.name or "run")
            threads = None
        # With --output the run is that folder, checkpoints included, whatever the config's checkpoint
        # directory says: a new --output is a new run, never a continuation of the config's.
        checkpoints = os.path.join(out, "checkpoints") if output else None
        _execute(experiment, out, resume, resume_from, address, debug, steps, threads, checkpoints,
                 overwrite)
    raise typer.Exit(EXIT_OK)


def _dry_run(file: Optional[str], overrides: list[str], dialect: Optional[str], release: Optional[str],
             nodes: Optional[int], gpus_per_node: Optional[int], gpu: Optional[str], json_output: bool,
             address: Optional[str] = None) -> None:
    import json

    from rlcfg.preflight import dry_run, render_json, render_text
    from rlcfg.source.yaml_loader import UsageError

    if file is None:
        raise usage_error("--dry-run needs a config FILE", json_output)
    if address:  # the cluster as Ray sees it, instead of the one the config describes
        if importlib.util.find_spec("ray") is None:
            raise usage_error("--dry-run --address asks the Ray cluster for its nodes and GPUs, and Ray is not "
                              "installed here: pip install 'rlcfg[run]', or give --nodes and --gpus-per-node",
                              json_output)
        from rlcfg.preflight import cluster_at
        from rlcfg.runtime.environment import RunEnvironmentError

        try:
            nodes, gpus_per_node, kind = cluster_at(address)
        except RunEnvironmentError as exc:
            raise _fail(str(exc), json_output)
        gpu = gpu or _known_gpu(kind)
    try:
        report = dry_run(file, overrides, dialect=dialect, release=release, nodes=nodes, gpus_per_node=gpus_per_node,
                         gpu=gpu)
    except UsageError as exc:
        raise usage_error(str(exc), json_output)
    except ValueError as exc:  # an unknown --gpu
        raise usage_error(str(exc), json_output)
    if not report.result.ok:
        from rlcfg.cli.validating import _json, _text

        typer.echo(_json(report.result, None, False) if json_output else _text(report.result, None, False, False))
        raise typer.Exit(EXIT_INVALID)
    if json_output:
        typer.echo(json.dumps(render_json(report), indent=2))
    else:
        typer.echo(render_text(report, file))
    raise typer.Exit(EXIT_OK if report.launches else EXIT_INVALID)


def _known_gpu(kind: Optional[str]) -> Optional[str]:
    """Ray's accelerator type as a GPU name the memory verdict knows, else None (the default GPU)."""
    if kind is None:
        return None
    from rlcfg.plan.memory import gpu_capacity

    try:
        gpu_capacity(kind)
    except ValueError:
        return None
    return kind


def _lower(file: str, overrides: list[str], dialect: Optional[str], release: Optional[str] = None):
    from rlcfg.frontend import check_file
    from rlcfg.preflight import assumptions, lower_result, setting_blockers
    from rlcfg.source.yaml_loader import UsageError

    try:
        result = check_file(file, overrides, dialect=dialect, release=release)
    except UsageError as exc:
        raise usage_error(str(exc))
    if result.errors:
        from rlcfg.cli.validating import _text

        typer.echo(_text(result, None, False, False), err=True)
        raise _fail(f"{file} has errors; fix them before running (rlcfg validate {file})")
    blockers = setting_blockers(result)
    if not blockers:
        experiment, blockers = lower_result(result)
    if blockers:
        raise _fail(f"`rlcfg run` would not do what {file} says, so it does not start:\n"
                    + "\n".join(f"  {b.message}" + (f" ({b.where})" if b.where else "") for b in blockers)
                    + f"\n(`rlcfg run {file} --dry-run` lists everything that stops it on its cluster; `--smoke` "
                      "runs it here with the values rlcfg runs)")
    for d in result.diagnostics:  # what validate would warn about is said before a run starts, not skipped
        if d.severity.value == "warning":
            typer.echo(f"rlcfg: warning[{d.code}]: {d.message}", err=True)
    for note in assumptions(result):
        typer.echo(f"rlcfg: note: {note}", err=True)
    return experiment


def _smoke(file: str, overrides: list[str], dialect: Optional[str], release: Optional[str]):
    """The smoke Experiment for this machine; its substitutions printed, its tiny models and data built.

    The settings `rlcfg run` refuses are set first, in the config, to values it runs (rlcfg.smoke_settings), so
    that the lowering sees only those; each is listed with the other substitutions."""
    from rlcfg.frontend import check_file
    from rlcfg.runtime.backends import MEGATRON_ON_CPU_ENV, detect_machine
    from rlcfg.runtime import smoke
    from rlcfg.smoke_settings import settle
    from rlcfg.source.yaml_loader import UsageError

    changes, extra = (), ()
    try:
        first = check_file(file, overrides, dialect=dialect, release=release)
    except UsageError:
        first = None  # _lower says why, as without --smoke
    if first is not None:
        settled = settle(lambda more: check_file(file, [*overrides, *more], dialect=dialect, release=release), first)
        changes, extra = settled.changes, settled.overrides
    experiment = _lower(file, [*overrides, *extra], dialect, release)
    machine = detect_machine()
    host = smoke.describe_host(experiment, gpus=machine.gpus)
    if experiment.episodes is not None and experiment.episodes.environment == "search":
        # The config's retrieval server is the cluster's; the smoke run's episodes search a stand-in of it.
        host = replace(host, retrieval_url=smoke.serve_retrieval())
    result = smoke.smoke_experiment(experiment, host)
    if changes:
        refused = tuple(smoke.Substitution(c.key, c.old, f"{c.new} ({c.reason})") for c in changes)
        result = replace(result, substitutions=refused + result.substitutions)
    typer.echo(smoke.summary(result, file), err=True)
    import sys

    for path in _os_guard(lambda: smoke.materialize(result, sys.stderr), smoke.default_cache(), "smoke cache folder"):
        typer.echo(f"rlcfg: built {path}", err=True)
    if result.megatron_on_cpu:
        # Megatron roles run through megatron-core's CPU path (the workers inherit the switch).
        os.environ[MEGATRON_ON_CPU_ENV] = "1"
    return result.experiment


def _resume_setting(experiment, resume: Optional[bool], resume_from: Optional[str]) -> Optional[str]:
    """A flag wins over the config; the config's `resume` is "latest", "none" or a checkpoint path."""
    if resume_from:
        return resume_from
    if resume is not None:
        return "latest" if resume else None
    configured = experiment.checkpointing.resume or "latest"
    return None if configured == "none" else configured


def _writable(path: str, what: str = "output folder") -> None:
    from rlcfg.runtime.environment import RunEnvironmentError, check_writable

    try:
        check_writable(path, what)
    except RunEnvironmentError as exc:
        raise _fail(str(exc))


def _os_guard(action, path: str, what: str):
    """Run `action`; an OSError of the file system (permissions, a full disk) becomes a one-line error."""
    from rlcfg.runtime.environment import describe_os_error

    try:
        return action()
    except OSError as exc:
        raise _fail(describe_os_error(exc, exc.filename or path, what))


def _os_error(exc: BaseException) -> Optional[OSError]:
    """The OSError behind `exc`: also when a worker raised it (Ray wraps it as the `cause` of a RayTaskError)
    and when torch.distributed.checkpoint collected it from a rank (its `failures`: rank → (error, trace))."""
    pending = [exc]
    seen = 0
    while pending and seen < 16:
        current = pending.pop(0)
        seen += 1
        if isinstance(current, OSError) and current.errno is not None:
            return current
        # Libraries that report the OS's error in their own type, with its number in the message (safetensors:
        # "I/O error: No space left on device (os error 28)").
        named = re.search(r"\(os error (\d+)\)", str(current)) if not isinstance(current, OSError) else None
        if named:
            number = int(named.group(1))
            return OSError(number, os.strerror(number))
        failures = getattr(current, "failures", None)
        if isinstance(failures, dict):
            for failure in failures.values():
                pending.append(failure[0] if isinstance(failure, tuple) else failure)
        for nested in (getattr(current, "cause", None), current.__cause__, current.__context__):
            if isinstance(nested, BaseException):
                pending.append(nested)
    return None


def _execute(experiment, out: str, resume: Optional[bool], resume_from: Optional[str], address: Optional[str],
             debug: bool, steps: Optional[int], threads: Optional[int], checkpoints: Optional[str] = None,
             overwrite: bool = False) -> None:
    from rlcfg.runtime.backends import PreflightError
    from rlcfg.runtime.checkpoint import CheckpointError
    from rlcfg.runtime.data import DataError
    from rlcfg.runtime.driver import RunOptions, plan_here, run
    from rlcfg.runtime.environment import describe_os_error

    from rlcfg.runtime.quickstart import materialize

    if address:
        from rlcfg.runtime.environment import RunEnvironmentError, resolve_address

        try:  # a cluster that does not answer is one line now, before anything is built on it
            resolve_address(address)
        except RunEnvironmentError as exc:
            raise _fail(str(exc))
    # The quickstart model's warm start runs where the run will: this process joins one Ray, once.
    try:
        built = _os_guard(lambda: materialize(experiment, address=address), "rlcfg-quickstart", "quickstart folder")
    except PreflightError as exc:
        raise _fail(str(exc))
    for path in built:
        typer.echo(f"rlcfg: built the quickstart's {'data' if path.endswith('.jsonl') else 'model'} at {path}",
                   err=True)
    plan, errors = plan_here(experiment, address)
    if errors:
        raise _fail("the plan has errors:\n" + "\n".join(f"  {e}" for e in errors)
                    + "\n(see them in context with `rlcfg plan`)")
    options = RunOptions(output_dir=out, resume=None if overwrite else _resume_setting(experiment, resume, resume_from),
                         address=address, debug=debug, max_steps=steps, threads=threads, checkpoint_dir=checkpoints,
                         overwrite=overwrite)
    try:
        run(plan, options)
    except (PreflightError, DataError, CheckpointError) as exc:
        # Raised in a worker, Ray's wrapper prints the remote traceback; its `cause` is the error itself.
        raise _fail(str(getattr(exc, "cause", None) or exc))
    except FileExistsError as exc:
        raise _fail(str(exc))
    except FileNotFoundError as exc:
        raise _fail(str(exc.args[0] if exc.args and isinstance(exc.args[0], str) else exc))
    except Exception as exc:
        # The disk filling up or a folder turning read-only during the run, in the driver or in a worker.
        cause = _os_error(exc)
        if cause is None:
            raise
        raise _fail(describe_os_error(cause, cause.filename or out, "output folder"))
    except KeyboardInterrupt:
        typer.echo("rlcfg: interrupted; the last complete checkpoint is kept (rerun to resume)", err=True)
        raise typer.Exit(130)
