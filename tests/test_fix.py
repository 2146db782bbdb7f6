"""Fixes solved together: `fix:` hints and JSON `edits` that clear batch and parallel-size errors without causing
others, and `rlcfg validate --fix` / `--diff`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from rlcfg.cli import app
from rlcfg.diagnostics import Severity
from rlcfg.fix import FIX_BUDGET, SOLVABLE_CODES, Problem, apply_to_text, solve
from rlcfg.frontend import check_text
from rlcfg.source.tree import split_dotted
from rlcfg.source.yaml_loader import read_text
from tests.helpers import GOLDEN, ROOT, TEMPLATES, cli

CHATLEARN = TEMPLATES / "chatlearn-fsdp-vllm.yaml"
SKYRL = TEMPLATES / "skyrl-fsdp-vllm.yaml"
ROLL = TEMPLATES / "roll-fsdp2-vllm.yaml"


def validate_json(*args: str) -> dict:
    result = CliRunner().invoke(app, ["validate", *args, "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.output)


def error_keys(diagnostics) -> set[tuple[str, str]]:
    return {(d.code, d.path) for d in diagnostics if d.severity is Severity.ERROR}


def solvable(diagnostics) -> list:
    return [d for d in diagnostics if d.severity is Severity.ERROR and d.code in SOLVABLE_CODES]


def apply_json_edits(text: str, overrides: list[str], edits: list[dict]) -> tuple[str, list[str]]:
    """Apply edits as a tool reading `--format json` would: a file edit replaces the value at its location, an
    override edit replaces the override it names or is passed as a new one."""
    lines = text.splitlines(keepends=True)
    overrides = list(overrides)
    for edit in sorted(edits, key=lambda e: (e["location"] or {}).get("column", 0), reverse=True):
        where = edit["location"] or {}
        if edit["apply"] == "file":
            line = lines[where["line"] - 1]
            new = edit["value"] if edit["kind"] == "rename" else json.dumps(edit["value"])
            lines[where["line"] - 1] = line[:where["column"] - 1] + new + line[where["end_column"] - 1:]
        elif where.get("kind") == "override":
            overrides[where["override_index"] - 1] = edit["override"]
        else:
            overrides.append(edit["override"])
    return "".join(lines), overrides


# ---- the cases of issue #16 -----------------------------------------------------------------------------------


def test_chatlearn_episode_fix_satisfies_every_batch_rule_at_once():
    payload = validate_json(str(CHATLEARN), "runtime_args.sample_per_episode=2000")
    errors = [d for d in payload["diagnostics"] if d["severity"] == "error"]
    assert len(errors) == 4  # global batch, prompt groups, and the generation batch of two models
    for d in errors:
        assert d["edits"] == [{
            "key": "runtime_args.sample_per_episode", "kind": "set", "value": 2048, "old_value": 2000,
            "safe": False, "unsafe_because": "changes the samples per step", "restores": False, "apply": "override",
            "override": "runtime_args.sample_per_episode=2048",
            "location": {"kind": "override", "override_index": 1,
                         "override_text": "runtime_args.sample_per_episode=2000"}}]
    again = validate_json(str(CHATLEARN), "runtime_args.sample_per_episode=2048")
    assert again["errors"] == 0


def test_global_batch_hint_offers_multiples_near_the_value():
    payload = validate_json(str(CHATLEARN), "runtime_args.train_global_batch_size=500")
    hints = [d["hint"] for d in payload["diagnostics"] if d["path"] == "runtime_args.train_global_batch_size"]
    assert "use a multiple of 8: 496 or 504" in hints
    fixes = {e["value"] for d in payload["diagnostics"] for e in d["edits"]}
    assert fixes == {512}  # 496 and 504 are multiples of 8 but divide no episode of 2048


def test_skyrl_micro_batch_hint_speaks_of_the_fixed_mini_batch():
    payload = validate_json(str(SKYRL), "trainer.policy_mini_batch_size=300")
    micro = next(d for d in payload["diagnostics"] if d["path"] == "trainer.micro_train_batch_size_per_gpu")
    assert "375" not in micro["hint"] and "policy_mini_batch_size 256" in micro["hint"]
    assert {(e["key"], e["value"]) for d in payload["diagnostics"] for e in d["edits"]} == {
        ("trainer.policy_mini_batch_size", 256)}


@pytest.mark.parametrize("train_batch, mini", [(1000, 256), (1024, 300), (960, 100), (1000, 7), (768, 500)])
def test_skyrl_mini_batch_hints_offer_only_values_the_per_gpu_rules_accept(train_batch, mini):
    """The template has 5 samples per prompt, 4 policy DP ranks and a micro batch of 16: most divisors of the
    train batch would break the per-GPU rules, and a hint that offered one would lead to the next error."""
    overrides = [f"trainer.train_batch_size={train_batch}", f"trainer.policy_mini_batch_size={mini}"]
    hints = [d["hint"] for d in validate_json(str(SKYRL), *overrides)["diagnostics"]
             if d["path"] in ("trainer.train_batch_size", "trainer.micro_train_batch_size_per_gpu")]
    assert hints
    for hint in hints:
        if "change train_batch_size too" in hint:
            continue
        offered = int(re.search(r"mini batch that divides \d+, e\.g\. (\d+)|policy_mini_batch_size (\d+)", hint)
                      .group(1, 2)[hint.startswith("with")])
        after = validate_json(str(SKYRL), overrides[0], f"trainer.policy_mini_batch_size={offered}")
        assert not [d for d in after["diagnostics"] if d["severity"] == "error"], (hint, after["diagnostics"])


def test_roll_device_mapping_override_is_quoted_not_bracketed():
    payload = validate_json(str(ROLL), "actor_train.device_mapping=list(range(0,7))")
    [problem] = payload["diagnostics"]
    assert problem["code"] == "RLC104"
    assert "[list(range(0,7))]" not in problem["message"] + problem["hint"]
    [edit] = problem["edits"]
    assert edit["override"] == "actor_train.device_mapping='list(range(0,7))'"
    followed = validate_json(str(ROLL), edit["override"])
    codes = {d["code"] for d in followed["diagnostics"] if d["severity"] == "error"}
    assert codes == {"RLC300"}  # 7 GPUs is a real problem for the batch of 256, and that error has its own fix
    assert all(d["edits"] for d in followed["diagnostics"] if d["severity"] == "error")


def test_fix_changes_two_keys_when_one_cannot_do_it(tmp_path):
    text = CHATLEARN.read_text().replace("sample_per_episode: 2048 ", "sample_per_episode: 2000 ") \
        .replace("train_global_batch_size: 512 ", "train_global_batch_size: 500 ")
    path = tmp_path / "grpo.yaml"
    path.write_text(text)
    solution = solve(Problem(text, str(path), base_dir=str(tmp_path)), budget=FIX_BUDGET)
    assert solution is not None
    assert {(e.key, e.value) for e in solution.edits} == {("runtime_args.sample_per_episode", 2048),
                                                         ("runtime_args.train_global_batch_size", 512)}


# ---- --fix and --diff -----------------------------------------------------------------------------------------


def broken_copy(tmp_path: Path) -> Path:
    """The ChatLearn template with its episode and global batch knocked out of step."""
    text = CHATLEARN.read_text()
    broken = text.replace("sample_per_episode: 2048 ", "sample_per_episode: 2000 ") \
        .replace("train_global_batch_size: 512 ", "train_global_batch_size: 500 ")
    assert broken != text
    path = tmp_path / "grpo.yaml"
    path.write_text(broken)
    return path


def test_fix_writes_only_the_values_and_keeps_everything_else(tmp_path):
    path = broken_copy(tmp_path)
    result = cli("validate", "grpo.yaml", "--fix", "--unsafe-fixes", "--ignore", "RLC308", cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    # the template itself is the fixed file, byte for byte: comments, order, quoting and spacing kept
    assert path.read_text() == CHATLEARN.read_text()
    diff = result.stdout.split("fixed grpo.yaml")[0]
    assert diff == (
        "--- a/grpo.yaml\n"
        "+++ b/grpo.yaml\n"
        "@@ -13,8 +13,8 @@\n"
        "   data_path: /mnt/data/math/train.jsonl\n"
        "   eval_data_path: /mnt/data/math/test.jsonl\n"
        "   num_episode: 200\n"
        "-  sample_per_episode: 2000          # 64 prompts × 32 responses\n"
        "-  train_global_batch_size: 500      # 4 optimizer steps per episode\n"
        "+  sample_per_episode: 2048          # 64 prompts × 32 responses\n"
        "+  train_global_batch_size: 512      # 4 optimizer steps per episode\n"
        "   train_micro_batch_size: 8         # 512 / 8 ranks = 64 per rank, 8 micro-batches\n"
        "   num_inference_per_prompt: 32      # the advantage group size; models.policy follows it\n"
        "   max_replay_episode: 2             # ChatLearn computes advantages only for replayed episodes\n")
    assert "valid chatlearn config" in result.stdout


def test_diff_prints_the_fix_and_writes_nothing(tmp_path):
    path = broken_copy(tmp_path)
    before = path.read_bytes()
    result = cli("validate", "grpo.yaml", "--diff", "--unsafe-fixes", cwd=tmp_path)
    assert result.returncode == 1  # the file is still broken
    assert path.read_bytes() == before
    assert "+  sample_per_episode: 2048" in result.stdout and "--fix would write this into grpo.yaml" in result.stdout


def test_fix_of_a_value_from_an_override_is_printed_not_written(tmp_path):
    path = tmp_path / "grpo.yaml"
    path.write_text(CHATLEARN.read_text())
    before = path.read_bytes()
    result = cli("validate", "grpo.yaml", "runtime_args.sample_per_episode=2000", "--fix", "--unsafe-fixes",
                 cwd=tmp_path)
    assert result.returncode == 1  # the config as run, with the override, still has the errors
    assert path.read_bytes() == before
    assert "change override 1 to `runtime_args.sample_per_episode=2048`" in result.stdout
    assert "---" not in result.stdout  # no diff: nothing in the file changes


def test_fix_json_reports_what_it_wrote(tmp_path):
    path = broken_copy(tmp_path)
    payload = validate_json(str(path), "--fix", "--unsafe-fixes")
    assert payload["valid"] and payload["fix"]["written"]
    assert {(e["key"], e["value"], e["apply"]) for e in payload["fix"]["edits"]} == {
        ("runtime_args.sample_per_episode", 2048, "file"), ("runtime_args.train_global_batch_size", 512, "file")}
    assert payload["fix"]["overrides"] == []


def test_fix_and_diff_json_follow_the_documented_schema(tmp_path):
    import jsonschema

    from tests.test_cli import documented_schema

    validator = jsonschema.Draft202012Validator(documented_schema())
    path = broken_copy(tmp_path)
    for args in ((str(path), "--diff"), (str(CHATLEARN), "runtime_args.sample_per_episode=2000", "--diff"),
                 (str(ROLL), "actor_train.device_mapping=list(range(0,7))"), (str(path), "--fix")):
        payload = validate_json(*args)
        assert not [e.message for e in validator.iter_errors(payload)], args


def test_fix_with_nothing_to_fix_says_so(tmp_path):
    path = tmp_path / "grpo.yaml"
    path.write_text(CHATLEARN.read_text())
    result = cli("validate", "grpo.yaml", "--fix", cwd=tmp_path)
    assert result.returncode == 0 and "nothing to fix" in result.stdout
    assert path.read_text() == CHATLEARN.read_text()


# ---- every proposed edit is validated again ---------------------------------------------------------------------


def golden_validations() -> list[Path]:
    return sorted(p for p in GOLDEN.glob("*/*.json") if "diagnostics" in json.loads(p.read_text()))


@pytest.mark.parametrize("golden", golden_validations(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_edit_in_the_goldens_clears_its_error_and_adds_none(golden, monkeypatch):
    monkeypatch.delenv("RLCFG_TEST_UNSET_OUTPUT", raising=False)
    payload = json.loads(golden.read_text())
    if not any("edits" in d for d in payload["diagnostics"]):  # goldens written before edits existed
        payload = validate_json(payload["file"])
    file = payload["file"]
    text = read_text(str(ROOT / file))
    before = check_text(text, file, base_dir=str((ROOT / file).parent), env={})
    for d in payload["diagnostics"]:
        if not d["edits"]:
            continue
        fixed, overrides = apply_json_edits(text, [], d["edits"])
        after = check_text(fixed, file, overrides, base_dir=str((ROOT / file).parent), env={})
        assert (d["code"], d["path"]) not in error_keys(after.diagnostics), d
        assert not error_keys(after.diagnostics) - error_keys(before.diagnostics), d


# ---- property: injected batch and parallel-size errors are fixed ----------------------------------------------


FIXABLE = [*(f"templates/{name}.yaml" for name in (
    "chatlearn-fsdp-vllm", "chatlearn-megatron-vllm", "skyrl-fsdp-vllm", "skyrl-ppo-fsdp-vllm", "roll-fsdp2-vllm",
    "roll-megatron-vllm", "areal-fsdp-sglang-grpo", "rlinf-megatron-sglang")),
    # The examples of the frameworks' reference documents.
    "tests/fixtures/chatlearn/reference-example.yaml", "tests/fixtures/chatlearn/reference-example-megatron.yaml",
    "tests/fixtures/skyrl/reference-example.yaml", "tests/fixtures/roll/reference-example.yaml",
    "tests/fixtures/rlinf/seed.yaml"]


def rule_keys_in_file(file: str) -> tuple[str, object, list[str]]:
    """The integer keys that the file writes itself and a batch or parallel-size rule reads."""
    from rlcfg import schema

    text = read_text(str(ROOT / file))
    base = check_text(text, file, base_dir=str((ROOT / file).parent), env={})
    spec = schema.load(base.dialect)
    keys = []
    for rule in spec.rules:
        for key in rule.keys:
            origin = base.tree.values.get(split_dotted(key))
            value = base.tree.get(split_dotted(key))
            if (rule.code in SOLVABLE_CODES and origin is not None and origin.kind == "file" and not origin.via
                    and type(value) is int and key not in keys):
                keys.append(key)
    return text, base, keys


FILE_KEYS = {file: rule_keys_in_file(file) for file in FIXABLE}


# A fixed sample of cases, so CI is repeatable (every case this strategy can draw was checked once by hand).
@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fix_of_injected_batch_and_parallel_errors_clears_them_all_and_adds_none(data, tmp_path_factory):
    file = data.draw(st.sampled_from(FIXABLE), label="file")
    text, base, keys = FILE_KEYS[file]
    name = Path(file).stem
    key = data.draw(st.sampled_from(keys), label="key")
    old = base.tree.get(split_dotted(key))
    new = data.draw(st.sampled_from(sorted({old + 1, old + 3, max(old - 1, 1), old * 3, max(old // 3, 1) + 1,
                                            old * 2 + 1} - {old})), label="value")
    origin = base.tree.values[split_dotted(key)]
    lines = text.splitlines(keepends=True)
    line = lines[origin.line - 1]
    lines[origin.line - 1] = line[:origin.column - 1] + str(new) + line[origin.end_column - 1:]
    folder = tmp_path_factory.mktemp(name)
    path = folder / f"{name}.yaml"
    path.write_text("".join(lines))
    env = {"HOME": "/home/user"}
    broken = check_text(path.read_text(), str(path), base_dir=str(folder), env=env)
    if not solvable(broken.diagnostics):
        return  # the new value happens to satisfy every rule
    from rlcfg import schema

    spec = schema.load(broken.dialect)
    # --unsafe-fixes: every batch and parallel-size error is cleared, and none added
    result = CliRunner().invoke(app, ["validate", str(path), "--diff", "--unsafe-fixes", "--format", "json"],
                                env=env)
    payload = json.loads(result.output)
    assert payload["fix"]["edits"], (key, old, new)
    fixed = check_text(apply_json_edits(path.read_text(), [], [e for e in payload["fix"]["edits"]
                                                                 if e["apply"] == "file"])[0],
                       str(path), payload["fix"]["overrides"], base_dir=str(folder), env=env)
    assert not solvable(fixed.diagnostics), (key, old, new, payload["fix"])
    assert not error_keys(fixed.diagnostics) - error_keys(broken.diagnostics), (key, old, new, payload["fix"])
    # --fix alone: only safe edits, of keys the file writes and of no algorithm quantity; each error it says it
    # fixes safely is cleared, and none is added
    result = CliRunner().invoke(app, ["validate", str(path), "--fix", "--format", "json"], env=env)
    payload = json.loads(result.output)
    for edit in payload["fix"]["edits"]:
        assert edit["safe"] and edit["apply"] == "file", (key, old, new, edit)
        assert spec.algorithm_quantity(edit["key"]) is None, (key, old, new, edit)
    for edit in payload["fix"]["left_out"]:
        assert not edit["safe"] and edit["unsafe_because"], edit
    fixed = check_text(path.read_text(), str(path), base_dir=str(folder), env=env)
    assert not error_keys(fixed.diagnostics) - error_keys(broken.diagnostics), (key, old, new, payload["fix"])
    safely_fixed = {(d.code, d.path) for d in broken.diagnostics if d.severity is Severity.ERROR} \
        - error_keys(fixed.diagnostics)
    assert bool(safely_fixed) == bool(payload["fix"]["edits"]), (key, old, new, payload["fix"])


def test_a_constraint_gives_each_key_the_nearest_values_that_satisfy_it():
    from rlcfg.diagnostics import Constraint
    from rlcfg.fix import solve_constraint

    # ROLL: per_device 4 × accumulation 16 × 4 data-parallel ranks must divide 11 prompts × 8 responses.
    divides = Constraint.divides([("micro", 4), ("accumulation", 16), (None, 4)], [("prompts", 11), ("group", 8)])
    # 88 has no factor of 16 left for the micro-batch or the accumulation steps: only the dividend can change.
    assert solve_constraint(divides) == {"prompts": {32, 64}, "group": {256, 512}}
    # With 12 prompts, 96 samples leave 96 / (4 × 4) = 6 for the accumulation steps: its divisors nearest 16.
    divides = Constraint.divides([("micro", 4), ("accumulation", 16), (None, 4)], [("prompts", 12), ("group", 8)])
    assert solve_constraint(divides) == {"prompts": {32, 64}, "group": {64, 128}, "accumulation": {3, 6}}
    # SkyRL colocate_all: 1 node × 7 policy GPUs must equal 4 engines × TP 1.
    equal = Constraint.equal([("nodes", 1), ("gpus", 7)], [("engines", 4), ("tp", 1)])
    assert solve_constraint(equal) == {"gpus": {4}, "engines": {7}}


def test_apply_to_text_replaces_only_the_value():
    from rlcfg.diagnostics import Edit, Origin

    text = "a:\n  b: 3   # three\n  c: 'x'\n"
    edit = Edit("a.b", 4, 3, Origin("file", file="f.yaml", line=2, column=6, end_column=7), "a.b=4", True)
    assert apply_to_text(text, [edit]) == "a:\n  b: 4   # three\n  c: 'x'\n"


def test_solver_leaves_valid_configs_alone():
    text = read_text(str(CHATLEARN))
    assert solve(Problem(text, str(CHATLEARN), base_dir=str(TEMPLATES), env={"HOME": "/home/user"})) is None


def test_an_edit_of_a_default_is_an_override_that_hydra_accepts():
    from rlcfg import schema
    from rlcfg.fix import make_edit

    text = read_text(str(ROLL))
    problem = Problem(text, str(ROLL), base_dir=str(TEMPLATES), env={"HOME": "/home/user"})
    result = problem.check()
    assert result.tree.values[("val_batch_size",)].kind == "default"
    edit = make_edit(schema.load("roll"), result, "val_batch_size", 64, result.tree.get(("val_batch_size",)))
    assert not edit.in_file and edit.override == "++val_batch_size=64"  # ROLL's Hydra has no such key to override
    checked = problem.check([edit.override])
    assert checked.errors == 0 and checked.tree.get(("val_batch_size",)) == 64
    assert "RLC105" in {d.code for d in problem.check(["val_batch_size=64"]).diagnostics}


# ---- safe and unsafe fixes ------------------------------------------------------------------------------------


RLINF = TEMPLATES / "rlinf-megatron-sglang.yaml"


def edited_copy(tmp_path: Path, template: Path, old: str, new: str, commit: bool = False) -> Path:
    """The template in tmp_path, edited; with `commit`, the unedited template is the last commit of a git work tree
    there, and the edit is the user's uncommitted change."""
    import subprocess

    path = tmp_path / template.name
    path.write_text(template.read_text())
    if commit:
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
        subprocess.run([*git, "init", "-q"], check=True)
        subprocess.run([*git, "add", path.name], check=True)
        subprocess.run([*git, "commit", "-qm", "base"], check=True)
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return path


def fix_edits(path: Path, *flags: str) -> dict:
    return validate_json(str(path), "--diff", *flags)["fix"]


def test_roll_fix_keeps_the_prompts_and_the_group_and_the_hint_is_the_fix(tmp_path):
    path = edited_copy(tmp_path, ROLL, "rollout_batch_size: 32", "rollout_batch_size: 48")
    fix = fix_edits(path)
    assert [e["key"] for e in fix["edits"]] == ["actor_train.training_args.gradient_accumulation_steps"]
    assert all(e["safe"] for e in fix["edits"])
    text = cli("validate", path.name, cwd=tmp_path).stdout
    assert "= fix: set `actor_train.training_args.gradient_accumulation_steps` to 6" in text
    assert "= hint:" not in text  # the rule's own suggestion gives way to the fix --fix would apply
    assert "1 error (1 fixable with --fix)" in text


def test_rlinf_fix_changes_the_mini_batches_not_the_prompts(tmp_path):
    path = edited_copy(tmp_path, RLINF, "n_minibatches: 4", "n_minibatches: 3")
    fix = fix_edits(path)
    assert {(e["key"], e["value"]) for e in fix["edits"]} == {("algorithm.n_minibatches", 4)}


@pytest.mark.skipif(__import__("shutil").which("git") is None, reason="git is not installed")
@pytest.mark.parametrize("template, old, new, key, value", [
    (ROLL, "rollout_batch_size: 32", "rollout_batch_size: 48", "rollout_batch_size", 32),
    (RLINF, "n_minibatches: 4", "n_minibatches: 3", "algorithm.n_minibatches", 4),
    (SKYRL, "policy_mini_batch_size: 256 ", "policy_mini_batch_size: 384 ", "trainer.policy_mini_batch_size", 256),
])
def test_safe_fix_gives_back_the_committed_value(tmp_path, template, old, new, key, value):
    path = edited_copy(tmp_path, template, old, new, commit=True)
    fix = fix_edits(path)
    assert [(e["key"], e["value"], e["safe"], e["restores"]) for e in fix["edits"]] == [(key, value, True, True)]
    assert "(its value in the last commit)" in cli("validate", path.name, cwd=tmp_path).stdout


def test_an_unsafe_fix_is_shown_and_applied_only_when_asked(tmp_path):
    path = broken_copy(tmp_path)  # ChatLearn's samples per step broken: only changing them clears the error
    before = path.read_text()
    result = cli("validate", "grpo.yaml", "--fix", cwd=tmp_path)
    assert result.returncode == 1 and path.read_text() == before
    assert "no safe fix" in result.stdout
    assert "left out, as it may change what the experiment computes: unsafe fix: set " \
           "`runtime_args.sample_per_episode` to 2048" in result.stdout
    assert "changes the samples per step" in result.stdout
    report = cli("validate", "grpo.yaml", cwd=tmp_path).stdout
    assert "= unsafe fix: set `runtime_args.sample_per_episode` to 2048" in report
    assert "with --unsafe-fixes)" in report
    assert cli("validate", "grpo.yaml", "--fix", "--unsafe-fixes", "--ignore", "RLC308", cwd=tmp_path).returncode == 0


def test_fix_renames_a_misspelt_key_and_folds_what_the_typo_caused(tmp_path):
    path = edited_copy(tmp_path, ROLL, "num_return_sequences_in_group: 8", "num_return_sequence_in_group: 8")
    payload = validate_json(str(path))
    errors = [d for d in payload["diagnostics"] if d["severity"] == "error"]
    # the batch rule broken by the group size the typo left at its default is the typo's error, not one more
    assert [d["code"] for d in errors] == ["RLC102"]
    assert "`num_return_sequences_in_group` is not set, which also causes this error: RLC300" in errors[0]["message"]
    assert errors[0]["edits"][0]["kind"] == "rename" and errors[0]["edits"][0]["safe"]
    result = cli("validate", path.name, "--fix", cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    assert path.read_text() == ROLL.read_text()
    assert "fixed roll-fsdp2-vllm.yaml: rename `num_return_sequence_in_group` to `num_return_sequences_in_group`" \
        in result.stdout


def test_a_typo_of_a_required_key_is_one_error(tmp_path):
    path = edited_copy(tmp_path, CHATLEARN, "  sample_per_episode:", "  sample_per_episod:")
    payload = validate_json(str(path))
    assert [d["code"] for d in payload["diagnostics"] if d["severity"] == "error"] == ["RLC102"]
    assert cli("validate", path.name, "--fix", "--ignore", "RLC308", cwd=tmp_path).returncode == 0
    assert path.read_text() == CHATLEARN.read_text()


def test_a_rename_keeps_the_quotes_of_the_key(tmp_path):
    path = edited_copy(tmp_path, ROLL, "num_return_sequences_in_group: 8", '"num_return_sequence_in_group": 8')
    assert cli("validate", path.name, "--fix", cwd=tmp_path).returncode == 0
    assert '"num_return_sequences_in_group": 8' in path.read_text()


def test_a_misspelt_strategy_is_one_error_not_a_cascade_over_the_default_strategy(tmp_path):
    megatron = TEMPLATES / "roll-megatron-vllm.yaml"
    path = edited_copy(tmp_path, megatron, "strategy_name: megatron_train", "strategy_name: megatron_trian")
    payload = validate_json(str(path))
    errors = [d for d in payload["diagnostics"] if d["severity"] == "error"]
    assert [d["code"] for d in errors] == ["RLC202"]
    assert "the wrong value also causes this error: RLC300" in errors[0]["message"]
    # nor warnings about the Megatron options under the strategy that stands in for the wrong name
    assert not [d for d in payload["diagnostics"] if "strategy_config" in d["path"]]
    assert cli("validate", path.name, "--fix", cwd=tmp_path).returncode == 0
    assert path.read_text() == megatron.read_text()
