"""Launch scripts and command lines (rlcfg.source.launch, rlcfg.frontend.open_config): what a user's script would
hand its framework's entrypoint, read without running anything."""

from __future__ import annotations

import textwrap

import pytest

from rlcfg import schema
from rlcfg.frontend import check_file, open_config
from rlcfg.source.launch import read_launch
from rlcfg.source.yaml_loader import UsageError
from tests.helpers import TEMPLATES, cli

ENV = {"HOME": "/home/user", "PWD": "/work", "WANDB_API_KEY": "x"}


def _run(*args: str, cwd=None) -> tuple[int, str]:
    done = cli(*args, cwd=cwd, env={"WANDB_API_KEY": "x"})
    return done.returncode, done.stdout + done.stderr


def _read(script: str, env: dict | None = None, name: str = "examples/gsm8k/run.sh"):
    return read_launch(textwrap.dedent(script), name, schema.launchers(), ENV if env is None else env)


def test_variables_defaults_arithmetic_and_quoting_as_the_shell_expands_them():
    found = _read("""\
        set -x
        : "${DATA_DIR:="$HOME/data/gsm8k"}"
        : "${NUM_GPUS:=4}"
        MAX_LEN=$((1024 * 2))
        export LOGGER=console  # or wandb
        : "${WORKERS:=$(( NUM_GPUS * (2 + 1) ))}"
        uv run --isolated --extra vllm -m skyrl_train.entrypoints.main_base \\
          data.train_data="['$DATA_DIR/train.parquet']" \\
          trainer.placement.policy_num_gpus_per_node=$NUM_GPUS \\
          generator.sampling_params.max_generate_length=${MAX_LEN} \\
          trainer.logger="$LOGGER" 'trainer.run_name=a b' \\
          +generator.engine_init_kwargs.max_model_len=8192 \\
          ~trainer.seed \\
          generator.max_turns=${TURNS:-3} \\
          "$@" 2>&1 | tee log.txt
        """)
    assert found.dialect == "skyrl" and found.config is None and found.line == 7
    assert [str(a) for a in found.arguments] == [
        "data.train_data=['/home/user/data/gsm8k/train.parquet']",
        "trainer.placement.policy_num_gpus_per_node=4",
        "generator.sampling_params.max_generate_length=2048",
        "trainer.logger=console", "trainer.run_name=a b",
        "+generator.engine_init_kwargs.max_model_len=8192", "~trainer.seed", "generator.max_turns=3"]
    first = found.arguments[0]
    assert (first.file, first.line, first.column) == ("examples/gsm8k/run.sh", 8, 3)
    assert found.diagnostics == []


def test_what_the_script_cannot_know_is_named_and_left_out_not_guessed():
    found = _read("""\
        python -m skyrl_train.entrypoints.main_base \\
          trainer.ckpt_path=$CKPT_PATH \\
          trainer.export_path="$(mktemp -d)/run" \\
          trainer.epochs=2
        """)
    assert [str(a) for a in found.arguments] == ["trainer.epochs=2"]
    messages = {d.path: (d.code, d.message, d.origin.line) for d in found.diagnostics}
    assert messages["trainer.ckpt_path"][0] == "RLC120" and "$CKPT_PATH" in messages["trainer.ckpt_path"][1]
    assert messages["trainer.ckpt_path"][2] == 2
    assert "$(mktemp -d)" in messages["trainer.export_path"][1]
    # the caller's environment is the script's: exported, the value is known
    known = _read("python -m skyrl_train.entrypoints.main_base trainer.ckpt_path=$CKPT_PATH\n",
                  env={**ENV, "CKPT_PATH": "/ckpt"})
    assert [str(a) for a in known.arguments] == ["trainer.ckpt_path=/ckpt"]


def test_branches_and_guards_are_followed_where_their_tests_can_be_decided():
    found = _read("""\
        if [ -z "$1" ]; then
            NAME="fallback"
        else
            NAME=$1
        fi
        [ -z "$WORKERS" ] && export WORKERS=2
        [ -n "$HOME" ] || export HOME=/nowhere
        if [ "$MODE" = fast ]; then STEPS=10; else STEPS=100; fi
        python -m skyrl_train.entrypoints.main_base trainer.run_name=$NAME trainer.epochs=$WORKERS \\
          trainer.eval_interval=$STEPS trainer.ckpt_path=$HOME/ckpt
        """, env={"HOME": "/home/user", "WORKERS": "8"})
    assert [str(a) for a in found.arguments] == ["trainer.run_name=fallback", "trainer.epochs=8",
                                                 "trainer.ckpt_path=/home/user/ckpt"]
    # `$MODE` is unset here, so which branch sets STEPS cannot be told
    (unknown,) = found.diagnostics
    assert unknown.path == "trainer.eval_interval" and "$MODE" in unknown.message


def test_hydra_config_folders_are_relative_to_the_entry_script_and_sourced_files_are_read(tmp_path):
    (tmp_path / "examples" / "rlvr").mkdir(parents=True)
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "env.sh").write_text("export GPUS=$((2 * 4))\n")
    script = tmp_path / "examples" / "rlvr" / "run.sh"
    script.write_text(textwrap.dedent("""\
        CONFIG_PATH=$(basename $(dirname $0))
        source scripts/env.sh
        python examples/start_rlvr_pipeline.py --config_path $CONFIG_PATH --config_name rlvr_config \\
            actor_train.world_size=$GPUS
        """))
    found = read_launch(script.read_text(), "examples/rlvr/run.sh", schema.launchers(), {"PWD": str(tmp_path)})
    assert found.dialect == "roll" and found.config == "examples/rlvr/rlvr_config.yaml"
    assert [str(a) for a in found.arguments] == ["actor_train.world_size=8"]
    here = read_launch('DIR="$( cd "$( dirname "${BASH_SOURCE[0]}" )" && pwd )"\n'
                       "python $DIR/main_grpo.py --config-path $DIR/config --config-name grpo\n",
                       "examples/reasoning/run.sh", schema.launchers(), {"PWD": "/repo"})
    assert here.dialect == "rlinf" and here.config == "/repo/examples/reasoning/config/grpo.yaml"


def test_a_chatlearn_script_is_checked_as_its_config_file_with_its_arguments(tmp_path, monkeypatch):
    (tmp_path / "template").mkdir()
    (tmp_path / "template" / "grpo.yaml").write_text((TEMPLATES / "chatlearn-fsdp-vllm.yaml").read_text())
    (tmp_path / "scripts").mkdir()
    script = tmp_path / "scripts" / "train.sh"
    script.write_text("export exp_name=demo\n"
                      "python chatlearn/entrypoint.py grpo --config-file template/grpo.yaml \\\n"
                      "    runtime_args.exp_name=${exp_name} runtime_args.sample_per_episode=1000 \\\n"
                      "    2>&1 | tee log_${exp_name}.log\n")
    monkeypatch.chdir(tmp_path)
    opened = open_config("scripts/train.sh", ["runtime_args.num_episode=3"], env=ENV)
    assert opened.dialect == "chatlearn" and opened.filename == "template/grpo.yaml"
    assert [str(o) for o in opened.overrides] == ["runtime_args.exp_name=demo", "runtime_args.sample_per_episode=1000",
                                                  "runtime_args.num_episode=3"]
    result = check_file("scripts/train.sh", env=ENV)
    assert result.file == "scripts/train.sh" and result.dialect == "chatlearn"
    # an error caused by the script's argument points at the script, where the user changes it
    located = [d.origin for d in result.diagnostics if d.origin and d.origin.file == "scripts/train.sh"]
    assert located and all(o.line == 3 for o in located)
    code, out = _run("validate", "scripts/train.sh", cwd=tmp_path)
    assert code == 1 and "--> scripts/train.sh:3:" in out and "runtime_args.sample_per_episode=1000" in out


def test_a_command_line_after_double_dash_is_read_like_a_script():
    code, out = _run("validate", "--", "python", "-m", "skyrl_train.entrypoints.main_base",
                    "trainer.train_batch_size=1000", "trainer.policy_mini_batch_size=256", "trainer.logger=console")
    assert code == 1
    # the safe fix keeps the prompts per step and changes the mini-batch, the argument at column 75
    assert "--> <command line>:1:45" in out
    assert "fix: change the argument at <command line>:1:75 to `trainer.policy_mini_batch_size=250`" in out


def test_scripts_that_cannot_be_judged_are_usage_errors_that_say_why(tmp_path):
    none = tmp_path / "prepare.sh"
    none.write_text("python prepare_data.py --out data\n")
    code, out = _run("validate", str(none))
    assert code == 2 and "calls no entrypoint rlcfg knows" in out
    serving = tmp_path / "serve.sh"
    serving.write_text("uv run -m skyrl.train.entrypoints.serve --port 8000\n")
    code, out = _run("validate", str(serving))
    assert code == 2 and f"{serving}:1:" in out and "serving or generation entrypoint" in out
    missing = tmp_path / "train.sh"
    missing.write_text("python chatlearn/entrypoint.py grpo --config-file template/nowhere.yaml\n")
    code, out = _run("validate", str(missing))
    assert code == 2 and "template/nowhere.yaml" in out


def test_a_script_with_several_runs_says_which_one_was_checked():
    found = _read("""\
        for lr in 1e-6 2e-6; do
          python -m skyrl_train.entrypoints.main_base trainer.policy.optimizer_config.lr=$lr trainer.epochs=1
        done
        python -m skyrl_train.entrypoints.main_base trainer.epochs=2
        """)
    assert [str(a) for a in found.arguments] == ["trainer.epochs=1"]
    codes = sorted(d.code for d in found.diagnostics)
    assert codes == ["RLC120", "RLC121"]
    several = next(d for d in found.diagnostics if d.code == "RLC121")
    assert "line 4" in several.message


@pytest.mark.parametrize("text", ["", "#!/bin/bash\n", "echo $((1 +\n", "python -m x '\n", "a=$(\n", "${\n"])
def test_broken_shell_never_crashes_the_reader(text):
    with pytest.raises(UsageError):
        _read(text)


@pytest.mark.parametrize("expression, value", [("$((GPUS * (2 + 1)))", "24"), ("$((-7 / 2))", "-3"),
                                               ("$((-7 % 3))", "-1"), ("$((GPUS / 0))", None)])
def test_arithmetic_is_bash_integer_arithmetic(expression, value):
    found = _read(f"GPUS=8\npython -m skyrl_train.entrypoints.main_base trainer.epochs={expression}\n")
    assert [str(a) for a in found.arguments] == ([f"trainer.epochs={value}"] if value else [])


def test_a_command_kept_in_a_variable_is_read_where_it_runs():
    script = """\
        SRC_FILE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/train.py"
        LOG_DIR="/logs/$(date +%s)"
        CMD="python ${SRC_FILE} --config-path /cfg --config-name ppo runner.max_steps=5 runner.logger.log_path=${LOG_DIR}"
        echo ${CMD} > run.log
        ${CMD} 2>&1 | tee -a run.log
        """
    found = _read(script, name="examples/embodiment/run.sh")
    assert found.dialect == "rlinf" and found.config == "/cfg/ppo.yaml" and found.line == 5
    assert [str(a) for a in found.arguments] == ["runner.max_steps=5"]
    (unknown,) = found.diagnostics
    assert unknown.path == "runner.logger.log_path" and "$(date +%s)" in unknown.message
    evaluated = _read(script.replace("${CMD} 2>&1", 'eval "${CMD}" 2>&1'), name="examples/embodiment/run.sh")
    assert [str(a) for a in evaluated.arguments] == ["runner.max_steps=5"]


def test_what_the_script_exports_is_the_entrypoints_environment():
    found = _read("""\
        export EMBODIED_PATH=/repo/examples/embodiment
        LOCAL_ONLY=1
        export LATER
        LATER=2
        python -m skyrl_train.entrypoints.main_base trainer.epochs=1
        """, env={"HOME": "/home/user"})
    assert found.environment == {"EMBODIED_PATH": "/repo/examples/embodiment", "LATER": "2"}


@pytest.mark.parametrize("entry_class, errs", [("PPOConfig", True), ("GRPOConfig", False)])
def test_the_entry_script_decides_which_config_class_areal_loads(tmp_path, monkeypatch, entry_class, errs):
    # AReaL's docs run its RLOO example with gsm8k_ppo.py, whose 0.3 PPOConfig requires a critic section
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "train.py").write_text(
        f"from areal.api.cli_args import {entry_class}, load_expr_config\n\n"
        f"def main(args):\n    config, _ = load_expr_config(args, {entry_class})\n")
    (tmp_path / "examples" / "grpo.yaml").write_text((TEMPLATES / "areal-fsdp-sglang-grpo.yaml").read_text())
    (tmp_path / "run.sh").write_text("python3 -m areal.launcher.local examples/train.py "
                                     "--config examples/grpo.yaml\n")
    monkeypatch.chdir(tmp_path)
    result = check_file("run.sh", env=ENV)
    assert result.dialect == "areal" and result.release == "0.3"
    critic = [d for d in result.diagnostics if d.path == "critic"]
    assert bool(critic) is errs and result.ok is not errs
    if errs:
        assert critic[0].code == "RLC203" and "PPOConfig" in critic[0].message
        assert (critic[0].origin.file, critic[0].origin.line) == ("run.sh", 1)


def test_a_quote_the_script_never_closes_is_a_located_usage_error():
    with pytest.raises(UsageError, match=r"run\.sh:2:45: the quote ' is never closed"):
        _read("set -x\npython -m skyrl_train.entrypoints.main_base 'trainer.epochs=2\n", name="run.sh")
    # a quote inside a command substitution belongs to it, and one the reader's own splitting cuts is no error
    found = _read('N="$(python -c "import os; print(1)")"\n'
                  "python -m skyrl_train.entrypoints.main_base trainer.epochs=2\n")
    assert [str(a) for a in found.arguments] == ["trainer.epochs=2"]


def test_a_script_that_runs_another_script_is_read_through_it(tmp_path, monkeypatch):
    """SkyRL's variants call a base script with a few more arguments: `bash base.sh key=value "$@"`."""
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "base.sh").write_text(textwrap.dedent("""\
        : "${N:=4}"
        python -m skyrl.train.entrypoints.main_base trainer.placement.policy_num_gpus_per_node=$N \\
          trainer.run_name=$1 "$@"
        """))
    (tmp_path / "examples" / "variant.sh").write_text(textwrap.dedent("""\
        export N=2
        bash examples/base.sh variant trainer.epochs=many "$@"
        """))
    monkeypatch.chdir(tmp_path)
    found = read_launch((tmp_path / "examples" / "variant.sh").read_text(), "examples/variant.sh",
                        schema.launchers(), {**ENV, "PWD": str(tmp_path)})
    assert [str(a) for a in found.arguments] == ["trainer.placement.policy_num_gpus_per_node=2",
                                                 "trainer.run_name=variant", "trainer.epochs=many"]
    # each argument is located where it is written: the callee's in it, the caller's in the caller
    assert [(a.file, a.line) for a in found.arguments] == [("examples/base.sh", 2), ("examples/base.sh", 3),
                                                           ("examples/variant.sh", 2)]
    result = check_file("examples/variant.sh", ["trainer.seed=1"], env={**ENV, "PWD": str(tmp_path)})
    [error] = [d for d in result.diagnostics if d.code == "RLC200"]
    assert (error.path, error.origin.file, error.origin.line) == ("trainer.epochs", "examples/variant.sh", 2)
    # a script it runs that is not on this machine, or calls no entrypoint, is no call
    (tmp_path / "examples" / "lost.sh").write_text("bash examples/missing.sh a=1\n")
    with pytest.raises(UsageError, match="calls no entrypoint"):
        check_file("examples/lost.sh", [], env=ENV)


def test_a_called_scripts_own_error_reaches_the_user(tmp_path, monkeypatch):
    """A helper script that calls no entrypoint is passed over; a callee that calls one rlcfg cannot read says why,
    instead of the caller's "calls no entrypoint"."""
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "setup.sh").write_text("pip install -e .\n")
    (tmp_path / "examples" / "serve.sh").write_text("python -m skyrl.train.entrypoints.serve port=8000\n")
    (tmp_path / "examples" / "run.sh").write_text("bash examples/setup.sh\nbash examples/serve.sh \"$@\"\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="serving or generation entrypoint") as caught:
        check_file("examples/run.sh", [], env={**ENV, "PWD": str(tmp_path)})
    assert "calls no entrypoint" not in str(caught.value)


def _rlinf_example(tmp_path, script: str):
    """An RLinf-style example folder: an entry script with @hydra.main, configs whose defaults live in a group folder
    the search path reaches through a variable the launch script exports, and the launch script."""
    examples = tmp_path / "examples"
    (examples / "config" / "groups").mkdir(parents=True)
    (examples / "shared" / "engines").mkdir(parents=True)
    (examples / "shared" / "engines" / "plain.yaml").write_text("seed: 1\n")
    template = (TEMPLATES / "rlinf-megatron-sglang.yaml").read_text()
    for name in ("grpo", "other"):
        (examples / "config" / f"{name}.yaml").write_text(
            "defaults:\n  - engines/plain@runner.extra\n  - _self_\n" + template.replace(
                "hydra:\n", "hydra:\n  searchpath:\n    - file://${oc.env:SHARED_PATH}/\n", 1))
    (examples / "train.py").write_text(
        'import hydra\n\n\n@hydra.main(version_base="1.1", config_path="config", config_name="grpo")\n'
        "def main(cfg):\n    pass\n")
    (examples / "run.sh").write_text(textwrap.dedent(script))
    return examples / "run.sh"


def test_a_scripts_positional_arguments_and_its_entry_scripts_own_config(tmp_path, monkeypatch):
    """RLinf's scripts take the config's name as $1 and pass the rest on (`${@:2}`); an entry script called without
    --config-name loads the config its @hydra.main names; the script's exports reach the config's search path."""
    _rlinf_example(tmp_path, """\
        export SHARED_PATH="$( cd "$(dirname "${BASH_SOURCE[0]}" )" && pwd )/shared"
        if [ -z "$1" ]; then
            python examples/train.py runner.max_epochs=3 "$@"
        else
            python examples/train.py --config-name "$1" runner.max_epochs=3 "${@:2}"
        fi
        """)
    monkeypatch.chdir(tmp_path)
    env = {**ENV, "PWD": str(tmp_path)}
    plain = check_file("examples/run.sh", [], env=env)
    assert plain.ok, [(d.code, d.message) for d in plain.diagnostics if d.severity.value == "error"]
    assert open_config("examples/run.sh", [], env=env).filename.endswith("config/grpo.yaml")  # @hydra.main's
    assert not [d for d in plain.diagnostics if d.code == "RLC112"]  # the group found through $SHARED_PATH
    assert open_config("examples/run.sh", ["other"], env=env).filename.endswith("config/other.yaml")
    named = check_file("examples/run.sh", ["other", "runner.max_epochs=two"], env=env)
    assert ("RLC200", "runner.max_epochs") in [(d.code, d.path) for d in named.diagnostics]


def test_a_config_the_script_names_that_does_not_exist_says_so(tmp_path, monkeypatch):
    script = _rlinf_example(tmp_path, """\
        CONFIG_NAME=${1:-gone}
        python $PWD/examples/train.py --config-path $PWD/examples/config --config-name $CONFIG_NAME
        """)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="gone.yaml, which does not exist .*give them after it") as caught:
        check_file(str(script), [], env={**ENV, "PWD": str(tmp_path)})
    assert "neither under" not in str(caught.value)
