"""`rlcfg validate FILE [OVERRIDES...]`: its options and help; rlcfg.cli.validating does the work."""

from __future__ import annotations

from typing import List, Optional

import typer

import rlcfg.schema as registry
from rlcfg.cli import completion
from rlcfg.cli.base import (DIALECT_NAMES, FRAMEWORK_VERSION_HELP, IGNORE_HELP, OutputFormat, app, bug_guard,
                            file_help)


@app.command(
    epilog="Examples:\n\n"
           "  rlcfg validate templates/chatlearn-fsdp-vllm.yaml\n\n"
           "  rlcfg validate grpo.yaml runtime_args.sample_per_episode=1024 --format json\n\n"
           "  rlcfg validate skyrl.yaml trainer.policy_mini_batch_size=64 --explain trainer.train_batch_size\n\n"
           "  rlcfg validate examples/gsm8k/run_gsm8k.sh      (a launch script: the call it makes)\n\n"
           "  rlcfg validate -- python -m skyrl_train.entrypoints.main_base trainer.epochs=2\n\n"
           "  rlcfg validate grpo.yaml --diff      (show the fix for batch and parallel-size errors)\n\n"
           "  rlcfg validate grpo.yaml --fix       (write it into grpo.yaml)\n\n"
           "Batch sizes and parallel sizes constrain each other, so rlcfg solves them together: the `fix:` line "
           "under an error (`edits` in JSON) is the nearest change, to as few keys as possible, after which none of "
           "those rules fails and no new error appears. A misspelt key whose did-you-mean is unambiguous is "
           "renamed. --fix writes the keys that are in FILE in place (comments, order and quoting kept); a key that "
           "came from an override or a default is printed as the override to pass instead.\n\n"
           "A fix is safe when it changes only keys the config writes, and none that sets the algorithm: the group "
           "size, the prompts or samples per step, the learning rate, the loss, advantage or KL settings (nor the "
           "GPUs). Giving a key back the value its file has in the last git commit is safe, and tried first. An "
           "`unsafe fix:` line says what it would change; --fix applies it only with --unsafe-fixes.\n\n"
           "Exit codes: 0 valid, 1 errors (or warnings with --strict), 2 usage error, 101 a bug in rlcfg. With "
           "--fix, the code is that of the config after fixing.",
)
def validate(
    file: str = typer.Argument(..., help=file_help("check"), metavar="FILE"),
    overrides: Optional[List[str]] = typer.Argument(
        None, metavar="[OVERRIDES]...",
        help="Command-line overrides in the dialect's own grammar: `a.b=c` everywhere; Hydra dialects ("
             + ", ".join(e.title for e in registry.REGISTRY if e.override_grammar == "hydra")
             + ") also take `+a.b=c` (add), `++a.b=c` (add or change) and `~a.b` (delete).",
        autocompletion=completion.override_keys),
    dialect: Optional[str] = typer.Option(None, "--dialect", "-d",
                                          help=f"Force the dialect ({DIALECT_NAMES}) instead of "
                                               "detecting it from the document's top-level keys.",
                                          autocompletion=completion.dialects),
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
                                                    help=FRAMEWORK_VERSION_HELP,
                                                    autocompletion=completion.releases),
    fix: bool = typer.Option(False, "--fix",
                             help="Apply the safe fixes (batch and parallel sizes, misspelt keys) to FILE in place, "
                                  "print the unified diff and the overrides to change, then report on the fixed "
                                  "config."),
    diff: bool = typer.Option(False, "--diff", help="Print what --fix would change, without writing."),
    unsafe_fixes: bool = typer.Option(False, "--unsafe-fixes",
                                      help="With --fix or --diff, also apply the fixes that change the algorithm "
                                           "(group size, prompts per step, ...) or the GPUs."),
    debug: bool = typer.Option(False, "--debug", help="Show the traceback if rlcfg itself fails."),
) -> None:
    """Check a config: every parameter, every cross-field rule, all problems at once.

    The dialect is detected from the document. Each problem is printed with its code, the file:line:col of
    the key that owns it (or the override or default it came from), and a hint.
    """
    from rlcfg.cli.validating import validate_config

    with bug_guard(debug):
        code = validate_config(file, overrides or [], dialect, output is OutputFormat.json, strict, explain, color,
                               ignore, framework_version, fix, diff, debug, unsafe_fixes)
    raise typer.Exit(code)
