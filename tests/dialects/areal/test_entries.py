"""AReaL's entry scripts: a launch is judged with the script it runs, which holds the reward, dataset loader and
workflow; a config file alone is run as AReaL's GSM8K RLVR script runs it, and validate says so."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

from rlcfg import lower
from rlcfg.dialects.areal import entries
from rlcfg.frontend import check_file
from rlcfg.source.project import module_fingerprint

ROOT = Path(__file__).resolve().parents[3]
GRPO = ROOT / "tests" / "fixtures" / "areal" / "gsm8k-grpo-v0.3.yaml"
SFT = ROOT / "templates" / "areal-sft.yaml"
PPO_1_0 = ROOT / "tests" / "fixtures" / "areal" / "gsm8k-ppo-v1.0.yaml"

# A stand-in for examples/math/gsm8k_rl.py (the released file is not in this repository): recognised by
# fingerprint in the tests that add its fingerprint to the released ones.
RLVR_SCRIPT = '''import sys
from areal.api.cli_args import GRPOConfig, load_expr_config


def main(args):
    config, _ = load_expr_config(args, GRPOConfig)
    workflow_kwargs = dict(reward_fn="areal.reward.gsm8k.gsm8k_reward_fn", enable_thinking=False)


if __name__ == "__main__":
    main(sys.argv[1:])
'''
MATH_PARSER_SCRIPT = '''import sys
from areal.api.cli_args import GRPOConfig, load_expr_config


def gsm8k_reward_fn(prompt, completions, prompt_ids, completion_ids, answer, **kwargs):
    from areal.reward.math_parser import process_results

    return int(process_results(completions, answer)[0])


def main(args):
    config, _ = load_expr_config(args, GRPOConfig)
'''
OWN_SCRIPT = '''import sys
from areal.api.cli_args import GRPOConfig, load_expr_config


def my_reward(prompt, completions, prompt_ids, completion_ids, answer, **kwargs):
    return float(len(completions) < 100)


def main(args):
    config, _ = load_expr_config(args, GRPOConfig)
'''


def launch(tmp_path: Path, monkeypatch, script: str | None, config: Path = GRPO, name: str = "train.py"):
    """Check `python -m areal.launcher.local NAME --config cfg.yaml` from a folder holding the script (None: the
    script is not there)."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(config, tmp_path / "cfg.yaml")
    if script is not None:
        (tmp_path / name).write_text(script)
    run = tmp_path / "run.sh"
    run.write_text(f"python3 -m areal.launcher.local {name} --config cfg.yaml\n")
    return check_file(str(run))


def codes(result) -> list[str]:
    return [d.code for d in result.diagnostics if d.code in ("RLC118", "RLC124")]


def test_a_config_file_alone_is_run_as_the_gsm8k_script_and_validate_says_so():
    result = check_file(str(GRPO))
    assert result.ok and codes(result) == ["RLC124"]
    note = next(d for d in result.diagnostics if d.code == "RLC124")
    assert "examples/math/gsm8k_rl.py" in note.message and "math-verify" in note.message
    exp = lower.lower("areal", result.config, result.release, result.entry_runs)
    assert exp.reward_function == "areal_math_verify"
    assert exp.data.prompt_suffix == entries.GSM8K_PROMPT_SUFFIX  # the dataset path names GSM8K
    assert exp.data.chat_template_kwargs == (("enable_thinking", False),)
    # each split is filtered by its own max_length, measured before the chat template as AReaL's loader measures it
    assert exp.data.max_prompt_length == result.config.train_dataset.max_length
    assert result.config.valid_dataset.max_length is None and exp.data.eval_max_prompt_length is None
    assert exp.data.prompt_length_of == "message"
    # the config's own evaluation settings: no script replaces them
    own = (result.config.eval_gconfig or result.config.gconfig).temperature
    assert own != entries.GSM8K_RLVR_EVAL_TEMPERATURE and exp.eval_sampling.temperature == own


def test_the_released_gsm8k_script_runs_with_its_evaluation_temperature(tmp_path, monkeypatch):
    monkeypatch.setattr(entries, "GSM8K_RLVR_FINGERPRINTS",
                        frozenset({module_fingerprint(ast.parse(RLVR_SCRIPT))}))
    result = launch(tmp_path, monkeypatch, RLVR_SCRIPT)
    assert result.ok and codes(result) == []
    assert result.entry_runs == entries.GSM8K_RLVR
    exp = lower.lower("areal", result.config, result.release, result.entry_runs)
    assert exp.reward_function == "areal_math_verify"
    assert exp.eval_sampling.temperature == entries.GSM8K_RLVR_EVAL_TEMPERATURE


def test_an_edited_copy_of_the_released_script_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(entries, "GSM8K_RLVR_FINGERPRINTS",
                        frozenset({module_fingerprint(ast.parse(RLVR_SCRIPT))}))
    result = launch(tmp_path, monkeypatch, RLVR_SCRIPT.replace("enable_thinking=False", "enable_thinking=True"))
    assert codes(result) == ["RLC118"]


def test_the_gsm8k_scripts_of_0_3_and_0_4_run_with_areals_math_parser(tmp_path, monkeypatch):
    monkeypatch.setattr(entries, "GSM8K_MATH_PARSER_FINGERPRINTS",
                        frozenset({module_fingerprint(ast.parse(MATH_PARSER_SCRIPT))}))
    result = launch(tmp_path, monkeypatch, MATH_PARSER_SCRIPT)
    assert result.ok and codes(result) == [] and result.entry_runs == entries.GSM8K_MATH_PARSER
    exp = lower.lower("areal", result.config, result.release, result.entry_runs)
    assert exp.reward_function == "areal_math_parser"
    assert exp.eval_sampling.temperature == entries.GSM8K_RLVR_EVAL_TEMPERATURE
    assert exp.data.prompt_suffix == entries.GSM8K_PROMPT_SUFFIX


def test_areals_lora_script_of_0_3_and_0_4_is_refused_beyond_data_parallelism(tmp_path, monkeypatch):
    monkeypatch.setattr(entries, "GSM8K_MATH_PARSER_LORA_FINGERPRINTS",
                        frozenset({module_fingerprint(ast.parse(MATH_PARSER_SCRIPT))}))
    config = tmp_path / "lora.yaml"
    plain = GRPO.read_text()
    assert "allocation_mode: sglang.d4p1t1+d4p1t1" in plain
    config.write_text(plain)
    result = launch(tmp_path, monkeypatch, MATH_PARSER_SCRIPT, config=config)
    assert result.entry_runs == entries.GSM8K_MATH_PARSER_LORA and codes(result) == []
    assert lower.lower("areal", result.config, result.release, result.entry_runs).reward_function == \
        "areal_math_parser"
    config.write_text(plain.replace("sglang.d4p1t1+d4p1t1", "sglang.d4p1t1+d2p1t2"))
    refused = launch(tmp_path, monkeypatch, MATH_PARSER_SCRIPT, config=config)
    found = [d for d in refused.diagnostics if d.code == "RLC118" and "LoRA script" in d.message]
    assert len(found) == 1 and found[0].path == "allocation_mode" and found[0].hint


@pytest.mark.parametrize("runs, fingerprints, reward", [
    (entries.BOBA_MATH_PARSER, "BOBA_MATH_PARSER_FINGERPRINTS", "areal_math_parser"),
    (entries.BOBA_MATH_VERIFY, "BOBA_MATH_VERIFY_FINGERPRINTS", "areal_math_verify"),
])
def test_the_boba_script_reads_its_json_prompts_scores_any_solution_and_evaluates_nothing(tmp_path, monkeypatch, runs,
                                                                                        fingerprints, reward):
    monkeypatch.setattr(entries, fingerprints, frozenset({module_fingerprint(ast.parse(MATH_PARSER_SCRIPT))}))
    config = tmp_path / "boba.yaml"
    config.write_text(GRPO.read_text().replace("path: openai/gsm8k", "path: /data/boba.jsonl"))
    result = launch(tmp_path, monkeypatch, MATH_PARSER_SCRIPT, config=config)
    assert result.ok and result.entry_runs == runs and codes(result) == []
    # the script reads neither the validation set nor max_length, and validate says so
    assert {d.path for d in result.diagnostics if d.code == "RLC307"} >= {"valid_dataset"}
    exp = lower.lower("areal", result.config, result.release, result.entry_runs)
    d = exp.data
    assert exp.reward_function == reward and exp.eval_sampling is None and exp.schedule.eval_interval is None
    assert (d.train_files, d.eval_files, d.prompt_key, d.answer_key, d.answer_list) == \
        (("/data/boba.jsonl",), (), "prompt", "solutions", True)
    assert d.prompt_removals == ("<｜User｜>", "<｜Assistant｜>", "<think>") and d.prompt_suffix == ""
    assert (d.max_prompt_length, d.prompt_length_of) == (1024, "source")
    assert d.chat_template_kwargs == (("enable_thinking", True),)


@pytest.mark.parametrize("script, says", [
    (MATH_PARSER_SCRIPT, "is not one rlcfg recognises"),
    (OWN_SCRIPT, "is not one rlcfg recognises"),
    (None, "cannot be read here"),
    ("def broken(:\n", "does not parse as Python"),
])
def test_any_other_script_is_refused_at_the_launch(tmp_path, monkeypatch, script, says):
    result = launch(tmp_path, monkeypatch, script)
    assert result.ok, "validate accepts the config: only `rlcfg run` refuses the launch"
    refusals = [d for d in result.diagnostics if d.code == "RLC118"]
    assert len(refusals) == 1 and says in refusals[0].message and "train.py" in refusals[0].message
    assert refusals[0].origin.file.endswith("run.sh") and refusals[0].hint
    assert "RLC124" not in codes(result)  # the launch names its script: nothing is assumed


def test_a_refused_launch_does_not_start(tmp_path, monkeypatch):
    from rlcfg.preflight import dry_run

    launch(tmp_path, monkeypatch, OWN_SCRIPT)
    report = dry_run(str(tmp_path / "run.sh"), [])
    assert not report.launches
    assert any(b.code == "RLC118" and "train.py" in b.message for b in report.blockers)


def test_the_released_sft_script_runs(tmp_path, monkeypatch):
    script = RLVR_SCRIPT.replace("GRPOConfig", "SFTConfig")
    monkeypatch.setattr(entries, "SUPERVISED_FINGERPRINTS", frozenset({module_fingerprint(ast.parse(script))}))
    result = launch(tmp_path, monkeypatch, script, config=SFT)
    assert result.ok and codes(result) == [] and result.entry_runs == entries.SUPERVISED
    exp = lower.lower("areal", result.config, result.release, result.entry_runs)
    assert exp.kind == "sft" and exp.data.prompt_suffix == "" and exp.data.chat_template_kwargs == ()


def test_rl_data_that_areals_gsm8k_loader_does_not_read_is_refused():
    # AReaL's script reads other data with the loader its path names (or, from 1.0, a saved folder of `messages` and
    # `answer`); rlcfg would read no answers from it and train on zero rewards
    result = check_file(str(GRPO), ["train_dataset.path=/data/my_prompts.jsonl"])
    refusals = [d for d in result.diagnostics if d.code == "RLC118" and d.path == "train_dataset.path"]
    assert result.ok and len(refusals) == 1 and "/data/my_prompts.jsonl" in refusals[0].message
    assert "train_dataset.path: openai/gsm8k" in refusals[0].hint  # the smoke run takes that value
    assert not [d for d in check_file(str(GRPO)).diagnostics if d.path == "train_dataset.path"]


def test_the_dry_run_says_which_reward_a_config_file_alone_runs_with(tmp_path, monkeypatch):
    from rlcfg.preflight import dry_run, render_text

    alone = dry_run(str(GRPO), [])
    assert any("examples/math/gsm8k_rl.py" in note for note in alone.notes)
    assert "examples/math/gsm8k_rl.py" in render_text(alone, str(GRPO))
    monkeypatch.setattr(entries, "GSM8K_RLVR_FINGERPRINTS",
                        frozenset({module_fingerprint(ast.parse(RLVR_SCRIPT))}))
    launch(tmp_path, monkeypatch, RLVR_SCRIPT)
    launched = dry_run(str(tmp_path / "run.sh"), [])
    assert launched.launches and not any("examples/math/gsm8k_rl.py" in note for note in launched.notes)


def test_the_gsm8k_script_does_not_read_eval_gconfig(tmp_path, monkeypatch):
    monkeypatch.setattr(entries, "GSM8K_RLVR_FINGERPRINTS",
                        frozenset({module_fingerprint(ast.parse(RLVR_SCRIPT))}))
    config = tmp_path / "with-eval.yaml"  # eval_gconfig is a key of AReaL 0.5 and 1.0
    config.write_text(PPO_1_0.read_text() + "\neval_gconfig:\n  n_samples: 1\n  temperature: 0.2\n")
    result = launch(tmp_path, monkeypatch, RLVR_SCRIPT, config=config)
    assert [(d.code, d.path) for d in result.diagnostics if d.severity.value == "warning"] == \
        [("RLC307", "eval_gconfig")]
    exp = lower.lower("areal", result.config, result.release, result.entry_runs)
    assert exp.eval_sampling.temperature == entries.GSM8K_RLVR_EVAL_TEMPERATURE
    # alone, the config's own eval_gconfig is what runs, and nothing is said of it
    alone = check_file(str(config))
    assert not [d for d in alone.diagnostics if d.path == "eval_gconfig"]
    assert lower.lower("areal", alone.config, alone.release).eval_sampling.temperature == 0.2


COUNTDOWN_SCRIPT = '''import sys
from reward_score import compute_score
from areal.api.cli_args import GRPOConfig, load_expr_config


def main(args):
    config, _ = load_expr_config(args, GRPOConfig)
'''


@pytest.mark.parametrize("runs, fingerprints", [
    (entries.COUNTDOWN_EVALUATED, "COUNTDOWN_EVALUATED_FINGERPRINTS"),
    (entries.COUNTDOWN, "COUNTDOWN_FINGERPRINTS"),
])
def test_the_countdown_script_reads_raw_queries_and_scores_its_equations(tmp_path, monkeypatch, runs, fingerprints):
    monkeypatch.setattr(entries, fingerprints, frozenset({module_fingerprint(ast.parse(COUNTDOWN_SCRIPT))}))
    config = tmp_path / "countdown.yaml"
    config.write_text(GRPO.read_text().replace("path: openai/gsm8k", "path: data/countdown/train_e.jsonl"))
    result = launch(tmp_path, monkeypatch, COUNTDOWN_SCRIPT, config=config)
    assert result.ok and result.entry_runs == runs and codes(result) == []
    unread = {d.path for d in result.diagnostics if d.code == "RLC307"}
    assert "train_dataset.max_length" in unread  # every prompt is kept
    assert ("valid_dataset" in unread) is (runs == entries.COUNTDOWN)  # 0.5 and 1.0 evaluate nothing
    exp = lower.lower("areal", result.config, result.release, result.entry_runs)
    d = exp.data
    assert exp.reward_function == "areal_countdown"
    assert (d.prompt_key, d.answer_fields, d.apply_chat_template, d.max_prompt_length, d.prompt_suffix) == \
        ("query", ("target", "numbers"), False, None, "")
    if runs == entries.COUNTDOWN_EVALUATED:
        assert d.eval_files == (result.config.valid_dataset.path,) and exp.eval_sampling.temperature == 1.0
    else:
        assert d.eval_files == () and exp.eval_sampling is None


def test_the_countdown_script_of_0_3_and_0_4_is_refused_where_it_would_fail(tmp_path, monkeypatch):
    monkeypatch.setattr(entries, "COUNTDOWN_EVALUATED_FINGERPRINTS",
                        frozenset({module_fingerprint(ast.parse(COUNTDOWN_SCRIPT))}))
    config = tmp_path / "countdown.yaml"
    text = GRPO.read_text().replace("path: openai/gsm8k", "path: data/countdown/train_e.jsonl")
    config.write_text(text.replace("sglang.d4p1t1+d4p1t1", "vllm.d4p1t1+d4p1t1"))
    result = launch(tmp_path, monkeypatch, COUNTDOWN_SCRIPT, config=config)
    found = [d for d in result.diagnostics if d.code == "RLC118"]
    assert [d.path for d in found] == ["allocation_mode"] and "SGLang's client" in found[0].message
    assert "write sglang for vllm" in found[0].hint
    config.write_text(re.sub(r"valid_dataset:\n(  .*\n)+", "valid_dataset: null\n", text))
    result = launch(tmp_path, monkeypatch, COUNTDOWN_SCRIPT, config=config)
    assert result.ok
    found = [d for d in result.diagnostics if d.code == "RLC118"]
    assert [d.path for d in found] == ["valid_dataset"] and "valid_dataset.path" in found[0].hint


@pytest.mark.parametrize("runs, fingerprints, allocation, refused", [
    (entries.GSM8K_MATH_PARSER, "GSM8K_MATH_PARSER_FINGERPRINTS", "sglang.d4p1t1+d4p1t1", None),
    (entries.GSM8K_MATH_PARSER, "GSM8K_MATH_PARSER_FINGERPRINTS", "vllm.d4p1t1+d4p1t1", "SGLang's client"),
    (entries.GSM8K_MATH_PARSER, "GSM8K_MATH_PARSER_FINGERPRINTS", "sglang.d4p1t1+d2p2t1", "FSDP"),
    (entries.GSM8K_MATH_PARSER_MEGATRON, "GSM8K_MATH_PARSER_MEGATRON_FINGERPRINTS", "sglang.d4p1t1+d2p2t1",
     None),
    (entries.GSM8K_MATH_PARSER_MEGATRON, "GSM8K_MATH_PARSER_MEGATRON_FINGERPRINTS", "sglang.d4p1t1+d4p1t1",
     "Megatron"),
    (entries.GSM8K_RLVR_LORA_VLLM, "GSM8K_RLVR_LORA_VLLM_FINGERPRINTS", "sglang.d4p1t1+d4p1t1", "vLLM's client"),
    (entries.GSM8K_RLVR, "GSM8K_RLVR_FINGERPRINTS", "vllm.d4p1t1+d2p2t1", None),  # PPOTrainer follows it
])
def test_scripts_that_build_their_own_engines_are_refused_with_other_backends(tmp_path, monkeypatch, runs,
                                                                              fingerprints, allocation, refused):
    monkeypatch.setattr(entries, fingerprints, frozenset({module_fingerprint(ast.parse(MATH_PARSER_SCRIPT))}))
    config = tmp_path / "engines.yaml"
    config.write_text(GRPO.read_text().replace("sglang.d4p1t1+d4p1t1", allocation))
    result = launch(tmp_path, monkeypatch, MATH_PARSER_SCRIPT, config=config)
    assert result.ok and result.entry_runs == runs
    found = [d for d in result.diagnostics if d.code == "RLC118" and "entry script" in d.message]
    if refused is None:
        assert found == []
    else:
        assert len(found) == 1 and refused in found[0].message and found[0].path == "allocation_mode"
