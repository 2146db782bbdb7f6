"""Load-time meanings checked against the frameworks' code at the releases rlcfg claims: AReaL 0.3's late check
of the normalisation levels, ChatLearn 1.2.0's typed reading of command-line values."""

from __future__ import annotations

from rlcfg.frontend import check_file
from tests.helpers import TEMPLATES

AREAL_03 = str(TEMPLATES.parent / "tests" / "fixtures" / "areal" / "gsm8k-grpo-v0.3.yaml")
CHATLEARN_120 = str(TEMPLATES.parent / "tests" / "fixtures" / "chatlearn" / "v1.2.0-fsdp.yaml")


def findings(path: str, *overrides: str, release: str | None = None):
    return check_file(path, list(overrides), env={}, release=release)


def test_areal_03_norm_level_says_areal_accepts_it_at_load():
    result = findings(AREAL_03, "actor.adv_norm.mean_level=global")
    assert result.release == "0.3"
    [d] = [d for d in result.diagnostics if d.path == "actor.adv_norm.mean_level"]
    # AReaL 0.3's NormConfig takes any string; utils/data.py Normalization raises when the trainer builds it.
    assert d.severity.name == "ERROR"
    assert "AReaL 0.3 accepts this at load but fails when the trainer builds its normalization" in d.message
    [d] = [d for d in findings(AREAL_03, "actor.adv_norm.std_level=global").diagnostics
           if d.path == "actor.adv_norm.std_level"]
    assert "accepts this at load" in d.message


def value(result, path: str):
    node = result.config
    for part in path.split("."):
        node = getattr(node, part)
    return node


def test_chatlearn_120_reads_a_string_field_as_text():
    result = findings(CHATLEARN_120, "runtime_args.exp_name=123")
    assert result.release == "1.2.0"
    assert result.config is not None, [d.message for d in result.diagnostics if d.severity.name == "ERROR"]
    assert value(result, "runtime_args.exp_name") == "123"


def test_chatlearn_120_reads_a_bool_as_true_only_for_true():
    result = findings(CHATLEARN_120, "runtime_args.log_args_dict.enable_wandb=yes",
                      "models.policy_trainer.gradient_checkpointing=TRUE")
    assert value(result, "runtime_args.log_args_dict.enable_wandb") is False
    assert value(result, "models.policy_trainer.gradient_checkpointing") is True
    warned = [d for d in result.diagnostics if d.code == "RLC200"]
    assert [d.path for d in warned] == ["runtime_args.log_args_dict.enable_wandb"]
    assert warned[0].severity.name == "WARNING"


def test_chatlearn_120_numbers_go_through_int_and_float():
    result = findings(CHATLEARN_120, "runtime_args.num_episode=2.0", "models.policy_trainer.optimizer.lr=3e-6")
    errors = [d for d in result.diagnostics if d.severity.name == "ERROR"]
    # int("2.0") stops ChatLearn 1.2.0's launcher; float("3e-6") is read.
    assert [(d.code, d.path) for d in errors] == [("RLC200", "runtime_args.num_episode")]
    assert "int()" in errors[0].message
    ok = findings(CHATLEARN_120, "runtime_args.num_episode=7", "models.policy_trainer.optimizer.lr=3e-6")
    assert value(ok, "runtime_args.num_episode") == 7
    assert value(ok, "models.policy_trainer.optimizer.lr") == 3e-6


def test_chatlearn_main_reads_values_as_yaml():
    main = str(TEMPLATES / "chatlearn-fsdp-vllm.yaml")
    result = findings(main, "runtime_args.log_args_dict.enable_wandb=false", "runtime_args.num_episode=7")
    assert result.release == "main"
    assert not [d for d in result.diagnostics if d.code == "RLC200"]
    assert value(result, "runtime_args.num_episode") == 7


def test_skyrl_group_chosen_on_the_command_line_composes_from_a_command_line_searchpath(tmp_path):
    # skyrl-train's terminal-bench scripts: hydra.searchpath=['file://examples/terminal_bench']
    # +terminal_bench_config=default ++terminal_bench_config.trials_dir=...
    group = tmp_path / "terminal_bench" / "terminal_bench_config"
    group.mkdir(parents=True)
    (group / "default.yaml").write_text("trials_dir: null\nagent_name: terminus\n")
    skyrl = str(TEMPLATES / "skyrl-fsdp-vllm.yaml")
    overrides = [f"hydra.searchpath=['file://{tmp_path / 'terminal_bench'}']", "+terminal_bench_config=default",
                 "++terminal_bench_config.trials_dir=/runs/trials"]
    result = check_file(skyrl, overrides, env={"HOME": "/home/user"})
    assert not [d for d in result.diagnostics if d.severity.name == "ERROR"]
    assert result.tree.data["terminal_bench_config"] == {"trials_dir": "/runs/trials", "agent_name": "terminus"}
    # Without the search path the option is a plain string, and setting a key under it fails, as in Hydra.
    alone = check_file(skyrl, overrides[1:], env={"HOME": "/home/user"})
    assert [d.code for d in alone.diagnostics if d.severity.name == "ERROR"] == ["RLC105"]
