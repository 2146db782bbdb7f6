"""Inputs nobody writes on purpose: devices, huge files, numbers beyond any reader, nesting and interpolations that
explode, secrets in the environment. `validate` answers each within seconds, in bounded memory, with one clear
message and the right exit code; never a traceback, never a value read from the environment."""

from __future__ import annotations

import json
import time

import pytest

from rlcfg.frontend import check_text
from rlcfg.source.yaml_loader import MAX_CONFIG_BYTES, MAX_ENTRIES
from tests.helpers import TEMPLATES, cli

ROLL = TEMPLATES / "roll-fsdp2-vllm.yaml"


def no_traceback(result) -> None:
    assert "Traceback" not in result.stdout + result.stderr and "internal error" not in result.stderr


def test_an_endless_device_is_refused_after_reading_no_more_than_the_limit():
    started = time.monotonic()
    result = cli("validate", "/dev/zero")
    no_traceback(result)
    assert result.returncode == 2
    assert f"larger than {MAX_CONFIG_BYTES // 2**20} MiB" in result.stderr
    assert time.monotonic() - started < 30


def test_a_file_over_the_size_limit_is_a_usage_error(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("a: " + "x" * (MAX_CONFIG_BYTES + 10) + "\n")
    result = cli("validate", str(big))
    no_traceback(result)
    assert result.returncode == 2 and "larger than" in result.stderr


def test_a_file_of_too_many_entries_is_refused_before_parsing():
    text = ROLL.read_text() + "notes:\n" + "".join(f"  k{i}: {i}\n" for i in range(MAX_ENTRIES + 10))
    started = time.monotonic()
    result = check_text(text, "many.yaml", env={})
    assert time.monotonic() - started < 5
    assert [d.code for d in result.diagnostics] == ["RLC100"]
    assert "lines and list items" in result.diagnostics[0].message


@pytest.mark.parametrize("where", ["file", "override"])
def test_a_number_longer_than_python_reads_is_one_error(tmp_path, where):
    digits = "9" * 5000
    config = tmp_path / "c.yaml"
    if where == "file":
        config.write_text(f"seed: {digits}\n" + "".join(l + "\n" for l in ROLL.read_text().splitlines()
                                                         if not l.startswith("seed:")))
        result = cli("validate", str(config))
    else:
        result = cli("validate", str(ROLL), f"seed={digits}")
    no_traceback(result)
    assert result.returncode == 1
    errors = [l for l in result.stdout.splitlines() if l.startswith("error[")]
    assert len(errors) == 1 and ("4300 digits" in errors[0] or "4300 digits" in result.stdout)
    # a line of thousands of characters is shown clipped, not in full
    assert max(len(l) for l in result.stdout.splitlines()) < 400


@pytest.mark.parametrize("value", ["[" * 5000 + "]" * 5000, "{a: " * 3000 + "1" + "}" * 3000])
def test_an_override_nested_thousands_deep_is_a_syntax_error(value):
    result = cli("validate", str(ROLL), f"seed={value}")
    no_traceback(result)
    assert result.returncode == 1 and "RLC104" in result.stdout and "levels deep" in result.stdout


def test_an_override_key_thousands_deep_is_a_syntax_error():
    result = cli("validate", str(ROLL), "+" + ".".join(["a"] * 5000) + "=1")
    no_traceback(result)
    assert result.returncode == 1 and "levels deep" in result.stdout


def test_yaml_nested_far_beyond_any_config_is_one_error():
    text = "".join("  " * i + f"k{i}:\n" for i in range(300)) + "  " * 300 + "x: 1\n"
    result = check_text(text, "deep.yaml", env={})
    assert [d.code for d in result.diagnostics] == ["RLC100"]
    assert "levels deep" in result.diagnostics[0].message


def test_an_interpolation_that_fans_out_exponentially_is_stopped_quickly():
    lines = [ROLL.read_text(), "l0: x"]
    lines += [f"l{i}: '" + f"${{l{i - 1}}}" * 10 + "'" for i in range(1, 10)]
    started = time.monotonic()
    result = check_text("\n".join(lines) + "\n", "fan.yaml", env={})
    assert time.monotonic() - started < 10
    exploding = {d.path for d in result.diagnostics if d.code == "RLC109"}
    assert {"l4", "l9"} <= exploding and "l3" not in exploding
    assert all("expands to more than" in d.message for d in result.diagnostics if d.code == "RLC109")


def test_a_value_read_from_the_environment_is_never_shown():
    env = {"MY_SECRET": "hunter2-token"}
    for fmt in ("text", "json"):
        result = cli("validate", str(ROLL), "seed=${oc.env:MY_SECRET}", "--format", fmt, env=env)
        no_traceback(result)
        assert result.returncode == 1
        assert "hunter2" not in result.stdout + result.stderr
        assert "$MY_SECRET" in result.stdout
    explained = cli("validate", str(ROLL), "exp_name=${oc.env:MY_SECRET}", "--explain", "exp_name",
                    "--format", "json", env=env)
    assert "hunter2" not in explained.stdout
    assert json.loads(explained.stdout)["explain"]["value"] == "<value of $MY_SECRET, not shown>"


@pytest.mark.parametrize("command", [["validate"], ["plan"], ["convert", "--to", "skyrl"], ["validate", "--diff"]])
@pytest.mark.parametrize("where", ["file", "override"])
def test_malformed_interpolations_in_a_nested_list_are_errors_at_their_place(tmp_path, command, where):
    # Issue #25: the second malformed `${...}` of one list ended every command in an internal error
    config = tmp_path / "c.yaml"
    if where == "file":
        config.write_text(ROLL.read_text() + "notes: [[ok, '${}', '${a.}'], '${pretrain}']\n")
        args = [str(config)]
    else:
        config.write_text(ROLL.read_text())
        args = [str(config), "+notes=[[ok, '${}', '${a.}'], '${pretrain}']"]
    result = cli(command[0], *args, *command[1:])
    no_traceback(result)
    assert result.returncode == 1
    out = result.stdout + result.stderr
    assert "`${}` is not a valid interpolation" in out and "`${a.}` is not a valid interpolation" in out
    assert "RLC106" not in out  # the valid `${pretrain}` after them still resolves
    if where == "file" and command[0] != "convert":
        assert f"{config}:{len(ROLL.read_text().splitlines()) + 1}:" in out
