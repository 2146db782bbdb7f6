"""`rlcfg validate` runs without typer when its arguments are plain (rlcfg.cli.main): what it prints and its exit
code must be those of the typer command, which still parses everything else (help, unknown flags, usage errors)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from rlcfg.cli import app, validate_arguments
from tests.helpers import ROOT, TEMPLATES

CHATLEARN = str(TEMPLATES / "chatlearn-fsdp-vllm.yaml")
SKYRL = str(TEMPLATES / "skyrl-fsdp-vllm.yaml")
BROKEN = "tests/fixtures/chatlearn/broken.yaml"
ENV = {**os.environ, "NO_COLOR": "1"}

CASES = [
    [SKYRL],
    [BROKEN],
    [BROKEN, "--format", "json", "--explain", "models.policy.temperature"],
    [CHATLEARN, "runtime_args.sample_per_episode=2000", "--strict", "--ignore", "RLC111", "--ignore=RLC404"],
    [CHATLEARN, "runtime_args.sample_per_episode=2000", "--diff", "--format=json"],
    [SKYRL, "-d", "skyrl", "--framework-version", "0.2.0", "--no-color"],
    [SKYRL, "--explain", "trainer.train_batch_size", "trainer.train_batch_size=512"],
    ["missing.yaml", "--format", "json"],
    [SKYRL, "--ignore", "BOGUS"],
    [SKYRL, "--explain", "trainer.no_such_key", "-f", "json"],
]


def fast(args: list[str]) -> subprocess.CompletedProcess:
    """`rlcfg validate ARGS` in a fresh process, reporting whether typer was imported."""
    probe = ("import sys; from rlcfg.cli import main\n"
             "sys.argv = ['rlcfg', 'validate', *sys.argv[1:]]\n"
             "try:\n    main()\n"
             "finally:\n    sys.stderr.write('typer imported: %s' % ('typer' in sys.modules))\n")
    return subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, cwd=ROOT, env=ENV,
                          timeout=120)


@pytest.mark.parametrize("args", CASES, ids=lambda a: " ".join(os.path.basename(x) for x in a))
def test_the_fast_path_prints_what_the_typer_command_prints(args, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("NO_COLOR", "1")
    typer_result = CliRunner().invoke(app, ["validate", *args])
    done = fast(args)
    assert done.stderr.endswith("typer imported: False"), done.stderr
    assert done.returncode == typer_result.exit_code
    assert done.stdout == typer_result.stdout


def test_arguments_typer_must_handle_are_left_to_it():
    for args in (["--help"], [SKYRL, "-h"], [SKYRL, "--unknown"], [SKYRL, "--dialect"], [], ["--strict"],
                 [SKYRL, "--format", "xml"], [SKYRL, "--strict=yes"], [SKYRL, "-dskyrl"], ["--", SKYRL]):
        assert validate_arguments(args) is None, args


def test_arguments_are_read_as_the_typer_command_reads_them():
    parsed = validate_arguments([SKYRL, "a.b=1", "--ignore", "RLC111", "-d", "skyrl", "--ignore=RLC404", "~c",
                                 "--format=json", "--no-color", "--strict"])
    assert parsed == {"file": SKYRL, "overrides": ["a.b=1", "~c"], "ignore": ["RLC111", "RLC404"], "dialect": "skyrl",
                      "json_output": True, "color": False, "strict": True}


def test_typer_still_reports_usage_errors_of_validate():
    done = subprocess.run([sys.executable, "-m", "rlcfg", "validate", SKYRL, "--format", "xml"], capture_output=True,
                          text=True, cwd=ROOT, env=ENV, timeout=120)
    assert done.returncode == 2 and "'xml' is not one of" in done.stderr


def test_a_usage_error_of_the_fast_path_is_json_on_stdout_when_json_was_asked():
    done = fast(["missing.yaml", "--format", "json"])
    assert done.returncode == 2
    assert json.loads(done.stdout)["usage_error"].startswith("missing.yaml")
