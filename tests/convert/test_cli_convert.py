"""`rlcfg convert` as a user types it: output, warnings, --strict, exit codes, light imports."""

from __future__ import annotations

from rlcfg.frontend import check_file
from tests.helpers import ROOT, cli

SOURCE = "templates/skyrl-fsdp-vllm.yaml"


def test_convert_writes_a_config_that_validates(tmp_path):
    out = tmp_path / "roll.yaml"
    result = cli("convert", SOURCE, "--to", "roll", "-o", str(out), cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "warning: not expressible in roll" in result.stderr
    text = out.read_text()
    assert text.startswith("# yaml-language-server: $schema=")
    assert SOURCE in text.splitlines()[1]
    checked = check_file(str(out))
    assert checked.dialect == "roll" and checked.errors == 0


def test_convert_to_stdout_with_overrides():
    result = cli("convert", SOURCE, "trainer.train_batch_size=512", "--to", "skyrl", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "train_batch_size: 512" in result.stdout


def test_strict_fails_on_a_loss_and_writes_nothing(tmp_path):
    out = tmp_path / "chatlearn.yaml"
    result = cli("convert", SOURCE, "--to", "chatlearn", "--strict", "-o", str(out), cwd=ROOT)
    assert result.returncode == 1
    assert "error: not expressible in chatlearn" in result.stderr
    assert not out.exists()


def test_strict_passes_when_nothing_is_lost():
    result = cli("convert", SOURCE, "trainer.epochs=3", "--to", "skyrl", "--strict", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "# It lowers to the same rlcfg Experiment as the source." in result.stdout


def test_a_file_converted_to_its_own_dialect_is_written_unchanged():
    areal = "templates/areal-fsdp-sglang-grpo.yaml"
    result = cli("convert", areal, "--to", "areal", "--strict", cwd=ROOT)
    assert result.returncode == 0 and result.stdout == (ROOT / areal).read_text()
    assert "already in the areal dialect: written unchanged" in result.stderr


def test_losses_come_algorithm_first_then_resources_then_logging():
    result = cli("convert", "templates/chatlearn-fsdp-vllm.yaml", "--to", "areal", cwd=ROOT)
    kinds = [line.split("[", 1)[1].split("]", 1)[0] for line in result.stderr.splitlines()
             if "not expressible in areal: [" in line]
    assert kinds and kinds == sorted(kinds, key=("algorithm", "resources", "logging").index)
    assert {"algorithm", "resources", "logging"} <= set(kinds)


def test_usage_errors_exit_2():
    assert cli("convert", SOURCE, "--to", "verl", cwd=ROOT).returncode == 2
    assert cli("convert", "no/such/file.yaml", "--to", "roll", cwd=ROOT).returncode == 2


def test_a_source_with_errors_exits_1():
    result = cli("convert", SOURCE, "trainer.train_batch_size=-1", "--to", "roll", cwd=ROOT)
    assert result.returncode == 1
    assert "has errors" in result.stderr
    assert "Traceback" not in result.stderr


def test_help_has_examples():
    result = cli("convert", "--help", cwd=ROOT)
    assert result.returncode == 0
    assert "rlcfg convert templates/skyrl-fsdp-vllm.yaml --to roll" in result.stdout


def test_convert_imports_no_heavy_module():
    from tests.test_light_imports import probe

    found = probe("convert", SOURCE, "--to", "areal")
    assert found["code"] == 0
    assert found["heavy"] == []
