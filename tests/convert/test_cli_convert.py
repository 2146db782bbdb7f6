"""`rlcfg convert` as a user types it: output, warnings, --strict, exit codes, light imports."""

from __future__ import annotations

import subprocess

import yaml

from rlcfg.frontend import check_file, check_text
from tests.helpers import ROOT, assert_golden, cli

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


def _written(result) -> dict:
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def test_by_default_the_newest_release_is_written_and_its_loader_takes_it():
    result = cli("convert", SOURCE, "--to", "areal", cwd=ROOT)
    assert "read as skyrl-train (last commit), to AReaL 1.0." in result.stdout.splitlines()[1]
    tree = _written(result)
    # AReaL 1.0 places each engine by its own backend string: no allocation_mode, no actor.group_size
    assert "allocation_mode" not in tree and "group_size" not in tree["actor"]
    assert tree["actor"]["backend"].startswith("fsdp:") and tree["rollout"]["backend"].startswith("vllm:")
    checked = check_text(result.stdout, "<converted>", dialect="areal", release="1.0")
    assert checked.errors == 0, [d.message for d in checked.diagnostics]
    assert "not expressible in areal 1.0" in result.stderr


def test_an_older_release_is_written_in_its_own_layout():
    result = cli("convert", SOURCE, "--to", "areal", "--to-release", "0.3", cwd=ROOT)
    tree = _written(result)
    assert tree["allocation_mode"].startswith("vllm.") and "backend" not in tree["actor"]
    assert check_text(result.stdout, "<converted>", dialect="areal", release="0.3").errors == 0


def test_a_config_is_moved_to_a_newer_release_of_its_framework():
    areal = "templates/areal-fsdp-sglang-grpo.yaml"  # written for AReaL 0.3
    result = cli("convert", areal, "--to", "areal", "--to-release", "1.0", cwd=ROOT)
    assert "read as AReaL 0.3, to AReaL 1.0." in result.stdout.splitlines()[1]
    assert "written unchanged" not in result.stderr
    tree = _written(result)
    assert tree["rollout"]["backend"] == "sglang:d4p1t1" and tree["actor"]["backend"] == "fsdp:d4p1t1"
    checked = check_text(result.stdout, "<converted>", dialect="areal")
    assert checked.release == "1.0" and checked.errors == 0


def test_a_key_the_release_lacks_is_left_out_and_reported():
    result = cli("convert", "templates/roll-fsdp2-vllm.yaml", "--to", "chatlearn", "--to-release", "1.2.0", cwd=ROOT)
    tree = _written(result)
    assert "max_prompt_tokens_length" not in tree["models"]["policy"]
    assert "(ChatLearn 1.2.0 has no `models.policy.max_prompt_tokens_length`)" in result.stderr
    assert "not expressible in chatlearn 1.2.0" in result.stderr
    assert check_text(result.stdout, "<converted>", dialect="chatlearn", release="1.2.0").errors == 0


def test_a_release_that_cannot_take_the_experiment_is_refused_with_its_errors():
    result = cli("convert", "templates/roll-fsdp2-vllm.yaml", "--to", "roll", "--to-release", "v0.1.0", cwd=ROOT)
    assert result.returncode == 1 and not result.stdout
    assert "ROLL v0.1.0 does not accept this experiment as rlcfg writes it" in result.stderr
    assert "ROLL main takes it (--to-release main)" in result.stderr
    assert "RLC202 actor_train.strategy_args.strategy_name" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_skyrl_package_gets_a_launch_script_that_reads_back_to_the_same_experiment(tmp_path):
    from rlcfg.convert import convert, experiment_of
    from rlcfg.convert.compare import diff

    out = tmp_path / "run.sh"
    result = cli("convert", SOURCE, "--to", "skyrl", "--to-release", "skyrl-0.4.0", "--strict", "-o", str(out),
                 cwd=ROOT)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert_golden("cli/convert_skyrl_package.sh", text.replace(str(ROOT) + "/", ""))
    assert subprocess.run(["bash", "-n", str(out)]).returncode == 0
    # the package's layout and names: engine keys under generator.inference_engine, and the micro-batch mean of the
    # loss kept as token_mean_legacy (this release's token_mean spans the mini-batch); FSDP2 is its default
    assert "  generator.inference_engine.num_engines=4 \\\n" in text and "generator.num_inference_engines" not in text
    assert "loss_reduction=token_mean_legacy" in text and "trainer.strategy" not in text
    checked = check_file(str(out))
    assert (checked.dialect, checked.release, checked.errors) == ("skyrl", "skyrl-0.4.0", 0)
    # read back in this process's environment (the CLI's HOME differs), the script lowers to the source's Experiment
    converted = tmp_path / "here.sh"
    converted.write_text(convert(str(ROOT / SOURCE), "skyrl", to_release="skyrl-0.4.0").text)
    _, source = experiment_of(str(ROOT / SOURCE))
    _, written = experiment_of(str(converted))
    assert not diff(source, written)


def test_an_older_package_release_is_pinned_in_the_script():
    result = cli("convert", "templates/roll-fsdp2-vllm.yaml", "--to", "skyrl", "--to-release", "skyrl-0.2.0",
                 cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "check it with `rlcfg validate FILE --framework-version skyrl-0.2.0`" in result.stdout
    assert "not expressible in skyrl skyrl-0.2.0" in result.stderr


def test_a_launch_script_is_not_written_to_a_yaml_file(tmp_path):
    out = tmp_path / "run.yaml"
    result = cli("convert", SOURCE, "--to", "skyrl", "--to-release", "skyrl-0.4.0", "-o", str(out), cwd=ROOT)
    assert result.returncode == 2 and not out.exists()
    assert "skyrl 0.4.0 reads its config from a command line" in result.stderr and "-o run.sh" in result.stderr


def test_a_release_convert_does_not_know():
    unknown = cli("convert", SOURCE, "--to", "areal", "--to-release", "2.0", cwd=ROOT)
    assert unknown.returncode == 2
    assert "--to-release 2.0: AReaL releases rlcfg knows are 0.3, 0.4, 0.5, 1.0" in unknown.stderr


def test_losses_come_algorithm_first_then_resources_then_logging():
    result = cli("convert", "templates/chatlearn-fsdp-vllm.yaml", "--to", "areal", cwd=ROOT)
    kinds = [line.split("[", 1)[1].split("]", 1)[0] for line in result.stderr.splitlines()
             if "not expressible in areal 1.0: [" in line]
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
