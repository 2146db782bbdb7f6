"""`rlcfg validate` as a user runs it: exit codes, bad input, the text and JSON output, --strict, --explain."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.helpers import GOLDEN, ROOT, TEMPLATES, assert_golden, cli

FIXTURES = ROOT / "tests" / "fixtures" / "chatlearn"
BROKEN = "tests/fixtures/chatlearn/broken.yaml"
TEMPLATE_FILES = sorted(TEMPLATES.glob("*.yaml"))
CHATLEARN = TEMPLATES / "chatlearn-fsdp-vllm.yaml"
SKYRL = TEMPLATES / "skyrl-fsdp-vllm.yaml"
LOCATION = re.compile(r"^  --> (?P<file>[^:<>]+):(?P<line>\d+):(?P<col>\d+)$")


def no_traceback(result) -> None:
    assert "Traceback" not in result.stdout + result.stderr


def run(*args: str, **kwargs):
    result = cli(*args, **kwargs)
    no_traceback(result)
    return result


def blocks(text: str) -> list[list[str]]:
    """The diagnostics of a text report, each as its lines."""
    out: list[list[str]] = []
    for line in text.splitlines():
        if re.match(r"^(error|warning|note)\[RLC\d{3}\]: ", line):
            out.append([line])
        elif out and line.startswith(" "):
            out[-1].append(line)
    return out


def error_locations(text: str) -> list[tuple[str, int, int]]:
    found = []
    for block in blocks(text):
        if not block[0].startswith("error"):
            continue
        match = LOCATION.match(block[1]) if len(block) > 1 else None
        assert match, f"this error does not name file:line:col:\n" + "\n".join(block)
        found.append((match["file"], int(match["line"]), int(match["col"])))
    return found


@pytest.fixture
def chatlearn_available():
    if not CHATLEARN.exists():
        pytest.skip("the ChatLearn template is not there yet")


def write(tmp_path: Path, name: str, content: str | bytes) -> str:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return str(path)


# ---- exit codes ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("template", TEMPLATE_FILES, ids=lambda p: p.name)
def test_every_template_is_valid(template):
    result = run("validate", str(template.relative_to(ROOT)))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "valid" in result.stdout.splitlines()[-1]
    assert not [b for b in blocks(result.stdout) if b[0].startswith("error")]


def test_invalid_config_exits_1(chatlearn_available):
    result = run("validate", BROKEN)
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1].startswith(f"{BROKEN}: ")
    assert "errors" in result.stdout.splitlines()[-1]


def test_missing_file_exits_2(tmp_path):
    result = run("validate", str(tmp_path / "nope.yaml"))
    assert result.returncode == 2
    assert "no such file" in result.stderr and result.stdout == ""


def test_directory_exits_2(tmp_path):
    result = run("validate", str(tmp_path))
    assert result.returncode == 2 and "directory" in result.stderr


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_unreadable_file_exits_2(tmp_path):
    path = Path(write(tmp_path, "secret.yaml", "runtime_args: {}\n"))
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):
            pytest.skip("running as a user who can read any file (root)")
        result = run("validate", str(path))
        assert result.returncode == 2 and "cannot be read" in result.stderr
    finally:
        path.chmod(0o644)


def test_binary_file_exits_2(tmp_path):
    result = run("validate", write(tmp_path, "model.yaml", bytes(range(256)) * 4))
    assert result.returncode == 2 and "binary" in result.stderr


def test_non_utf8_file_exits_2(tmp_path):
    result = run("validate", write(tmp_path, "latin1.yaml", "runtime_args:\n  exp_name: caf\xe9\n".encode("latin-1")))
    assert result.returncode == 2 and "UTF-8" in result.stderr


@pytest.mark.parametrize("args", [
    ("validate", "--no-such-flag", "x.yaml"),
    ("validate",),
    ("validate", "x.yaml", "--format", "xml"),
    ("no-such-command",),
])
def test_bad_usage_exits_2(args):
    assert run(*args).returncode == 2


def test_unknown_dialect_exits_2(chatlearn_available):
    result = run("validate", str(CHATLEARN), "--dialect", "chatlern")
    assert result.returncode == 2
    assert "chatlern" in result.stderr and "chatlearn" in result.stderr


def test_usage_error_under_json_is_json_on_stdout_and_text_on_stderr(tmp_path):
    result = run("validate", str(tmp_path / "nope.yaml"), "--format", "json")
    assert result.returncode == 2 and "rlcfg: error:" in result.stderr
    assert json.loads(result.stdout)["usage_error"].endswith("nope.yaml: no such file")


# ---- a bug in rlcfg -----------------------------------------------------------------------------------------


@pytest.fixture
def broken_rlcfg(tmp_path):
    """An environment in which rlcfg's front end raises, as a bug would."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import rlcfg.frontend\n\n"
        "def _explode(*args, **kwargs):\n"
        "    raise RuntimeError('simulated internal failure')\n\n"
        "rlcfg.frontend.check_file = _explode\n")
    return {"PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}


def test_bug_exits_101_with_a_short_message(broken_rlcfg, tmp_path):
    config = write(tmp_path, "c.yaml", "runtime_args: {}\nmodels: {}\n")
    result = cli("validate", config, env=broken_rlcfg)
    assert result.returncode == 101, result.stderr
    no_traceback(result)
    assert "bug" in result.stderr and "--debug" in result.stderr
    assert "simulated internal failure" in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 3


def test_bug_traceback_only_under_debug(broken_rlcfg, tmp_path):
    config = write(tmp_path, "c.yaml", "runtime_args: {}\nmodels: {}\n")
    result = cli("validate", config, "--debug", env=broken_rlcfg)
    assert result.returncode == 101
    assert "Traceback" in result.stderr and "simulated internal failure" in result.stderr


# ---- bad input: one clear diagnostic with its location, exit 1 ----------------------------------------------


@pytest.mark.parametrize("content, code, line", [
    ("runtime_args:\n\ttrain_backend: fsdp\n", "RLC100", 2),
    ("runtime_args:\n  colocation: [policy, policy_trainer\nmodels: {}\n", "RLC100", 2),
    ("runtime_args:\n  exp_name: 'unfinished\n", "RLC100", 2),
    ("runtime_args:\n  a: 1\n a: 2\n", "RLC100", 3),
    ("", "RLC103", 1),
    ("# nothing but a comment\n", "RLC103", 1),
    ("- runtime_args\n- models\n", "RLC103", 1),
    ("}{ ][ ::: @@@ %%% !!! ```\n", "RLC100", 1),
    ("just some prose, not a config\n", "RLC103", 1),
])
def test_malformed_input(tmp_path, content, code, line):
    path = write(tmp_path, "bad.yaml", content)
    result = run("validate", path)
    assert result.returncode == 1, result.stdout + result.stderr
    (block,) = blocks(result.stdout)
    assert block[0].startswith(f"error[{code}]: ")
    assert LOCATION.match(block[1]) and f":{line}:" in block[1]
    assert any(l.startswith("   = hint: ") for l in block)


def test_duplicate_key_names_both_places(chatlearn_available, tmp_path):
    text = CHATLEARN.read_text().replace("  num_episode: 200\n", "  num_episode: 200\n  num_episode: 300\n", 1)
    result = run("validate", write(tmp_path, "dup.yaml", text))
    assert result.returncode == 1
    errors = [b for b in blocks(result.stdout) if b[0].startswith("error")]
    assert len(errors) == 1 and errors[0][0].startswith("error[RLC101]"), result.stdout
    first = text.splitlines().index("  num_episode: 200") + 1
    assert f"dup.yaml:{first + 1}:3" in errors[0][1]
    assert any(f"dup.yaml:{first}:3" in line for line in errors[0] if "note" in line)


def test_document_of_no_known_dialect(tmp_path):
    result = run("validate", write(tmp_path, "x.yaml", "learning_rate: 3\nepochs: 2\n"))
    assert result.returncode == 1
    (block,) = blocks(result.stdout)
    assert block[0].startswith("error[RLC110]") and "--dialect" in "\n".join(block)


def test_wrong_type_and_unknown_enum_value(chatlearn_available, tmp_path):
    text = CHATLEARN.read_text()
    text = text.replace("train_backend: fsdp", "train_backend: fdsp", 1)
    text = text.replace("num_episode: 200", "num_episode: two hundred", 1)
    result = run("validate", write(tmp_path, "c.yaml", text))
    assert result.returncode == 1
    found = {b[0].split("]")[0]: b for b in blocks(result.stdout) if b[0].startswith("error")}
    assert "error[RLC202" in found and "error[RLC200" in found, result.stdout
    # the did-you-mean, checked by the validator, is the fix --fix applies
    assert 'fix: set `runtime_args.train_backend` to "fsdp"' in "\n".join(found["error[RLC202"])
    lines = text.splitlines()
    for block in found.values():
        match = LOCATION.match(block[1])
        assert match, block
        assert ("fdsp" in lines[int(match["line"]) - 1]) or ("two hundred" in lines[int(match["line"]) - 1])


def test_override_errors_point_at_the_override(chatlearn_available):
    result = run("validate", str(CHATLEARN), "runtime_args.num_episode=x", "+runtime_args.foo=1")
    assert result.returncode == 1
    text = result.stdout
    assert "<override 1: runtime_args.num_episode=x>" in text
    assert "<override 2: +runtime_args.foo=1>" in text


# ---- output -------------------------------------------------------------------------------------------------


def test_text_output_golden(chatlearn_available, monkeypatch):
    monkeypatch.delenv("RLCFG_TEST_UNSET_OUTPUT", raising=False)
    result = run("validate", BROKEN)
    assert result.returncode == 1
    assert_golden("cli/broken.txt", result.stdout)


def test_json_output_golden(chatlearn_available, monkeypatch):
    monkeypatch.delenv("RLCFG_TEST_UNSET_OUTPUT", raising=False)
    result = run("validate", BROKEN, "--format", "json")
    assert result.returncode == 1
    assert_golden("cli/broken.json", result.stdout)


def test_syntax_error_golden():
    result = run("validate", "tests/fixtures/chatlearn/broken_syntax.yaml")
    assert result.returncode == 1
    assert_golden("cli/broken_syntax.txt", result.stdout)


def test_golden_text_every_error_names_file_line_col():
    for name in ("broken.txt", "broken_syntax.txt"):
        path = GOLDEN / "cli" / name
        if not path.exists():
            pytest.skip(f"{path} not generated yet")
        text = path.read_text()
        locations = error_locations(text)
        assert locations, name
        source = (ROOT / locations[0][0]).read_text().splitlines()
        for file, line, col in locations:
            assert (ROOT / file).exists()
            assert 1 <= line <= len(source) and 1 <= col <= len(source[line - 1]) + 1
        # ordered by location
        assert locations == sorted(locations)


def test_golden_broken_config_reports_every_kind_of_mistake():
    path = GOLDEN / "cli" / "broken.txt"
    if not path.exists():
        pytest.skip("golden file not generated yet")
    text = path.read_text()
    # (seq_length above max_seq_len_to_capture is no error at ChatLearn main, which derives both: RLC303 is gone)
    for code in ("RLC102", "RLC106", "RLC107", "RLC200", "RLC201", "RLC300"):
        assert f"error[{code}]" in text, code
    assert "fix: rename `models.policy.tempreature` to `temperature`" in text
    assert "did you mean `models.policy_trainer.load`?" in text


def test_golden_json_every_error_has_a_file_location():
    path = GOLDEN / "cli" / "broken.json"
    if not path.exists():
        pytest.skip("golden file not generated yet")
    payload = json.loads(path.read_text())
    errors = [d for d in payload["diagnostics"] if d["severity"] == "error"]
    assert errors and len(errors) == payload["errors"]
    for d in errors:
        location = d["location"]
        assert location["kind"] == "file" and location["line"] >= 1 and location["column"] >= 1, d


def documented_schema() -> dict:
    text = (ROOT / "docs" / "diagnostics.md").read_text()
    match = re.search(r"```json\n(.*?)\n```", text, re.S)
    assert match, "docs/diagnostics.md has no JSON Schema block"
    return json.loads(match.group(1))


def json_outputs(tmp_path) -> list[tuple[str, dict]]:
    runs = [
        ("broken", ("validate", BROKEN, "--format", "json")),
        ("syntax", ("validate", "tests/fixtures/chatlearn/broken_syntax.yaml", "--format", "json")),
        ("empty", ("validate", write(tmp_path, "empty.yaml", ""), "--format", "json")),
        ("override", ("validate", str(CHATLEARN), "runtime_args.num_episode=x", "~runtime_args.foo", "--format", "json")),
        ("explain", ("validate", str(CHATLEARN), "models.policy_trainer.num_gpu=16", "--format", "json",
                     "--explain", "models.policy_trainer.num_gpu")),
        ("explain-interpolated", ("validate", str(CHATLEARN), "--format", "json", "--explain", "models.ref_policy.load")),
    ]
    out = []
    for name, args in runs:
        result = run(*args)
        assert result.returncode in (0, 1), (name, result.stderr)
        out.append((name, json.loads(result.stdout)))
    return out


def test_json_output_follows_the_documented_schema(chatlearn_available, tmp_path):
    import jsonschema

    schema = documented_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for name, payload in json_outputs(tmp_path):
        problems = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(payload)]
        assert not problems, (name, problems)
        assert payload["valid"] == (payload["errors"] == 0)
        assert len(payload["diagnostics"]) >= payload["errors"] + payload["warnings"]


def test_json_and_text_report_the_same_diagnostics(chatlearn_available):
    text = run("validate", BROKEN).stdout
    payload = json.loads(run("validate", BROKEN, "--format", "json").stdout)
    headers = [b[0] for b in blocks(text)]
    # the text puts errors first; both list the same diagnostics, each in the order of their locations
    rank = {"error": 0, "warning": 1, "note": 2}
    ordered = sorted(payload["diagnostics"], key=lambda d: rank[d["severity"]])
    assert headers == [f"{d['severity']}[{d['code']}]: {d['message']}" for d in ordered]


def test_every_code_is_documented():
    from rlcfg.diagnostics import CODES

    text = (ROOT / "docs" / "diagnostics.md").read_text()
    for code, info in CODES.items():
        row = re.search(rf"^\| `{code}` \| (\w+) \|", text, re.M)
        assert row, f"{code} is missing from the code table of docs/diagnostics.md"
        assert row.group(1) == info.severity.value, code
    for hundreds in {code[:4] for code in CODES}:
        assert f"`{hundreds}xx`" in text


# ---- --strict -----------------------------------------------------------------------------------------------


@pytest.fixture
def quiet_chatlearn(tmp_path, chatlearn_available):
    """The ChatLearn template, with data files that exist, so that it validates without any warning."""
    (tmp_path / "train.jsonl").write_text("{}\n")
    (tmp_path / "test.jsonl").write_text("{}\n")
    text = CHATLEARN.read_text()
    text = re.sub(r"(?m)^(\s*data_path:).*$", r"\1 train.jsonl", text)
    text = re.sub(r"(?m)^(\s*eval_data_path:).*$", r"\1 test.jsonl", text)
    path = tmp_path / "quiet.yaml"
    path.write_text(text)
    result = run("validate", str(path))
    if result.returncode != 0 or "warning[" in result.stdout:
        pytest.skip("the ChatLearn template has warnings that do not depend on its paths:\n" + result.stdout)
    return str(path)


def test_strict_makes_warnings_fail(quiet_chatlearn):
    assert run("validate", quiet_chatlearn, "--strict").returncode == 0
    override = "models.policy_trainer.fsdp_size=4"
    relaxed = run("validate", quiet_chatlearn, override)
    assert relaxed.returncode == 0 and "warning[" in relaxed.stdout, relaxed.stdout
    strict = run("validate", quiet_chatlearn, override, "--strict")
    assert strict.returncode == 1 and "fails --strict" in strict.stdout
    payload = json.loads(run("validate", quiet_chatlearn, override, "--strict", "--format", "json").stdout)
    assert payload["valid"] is False and payload["errors"] == 0 and payload["warnings"] >= 1


def test_strict_makes_machine_checks_errors(quiet_chatlearn, tmp_path):
    missing = "runtime_args.data_path=/nonexistent/rlcfg/train.jsonl"
    relaxed = run("validate", quiet_chatlearn, missing)
    assert relaxed.returncode == 0 and "warning[RLC308]" in relaxed.stdout
    strict = run("validate", quiet_chatlearn, missing, "--strict")
    assert strict.returncode == 1 and "error[RLC308]" in strict.stdout


# ---- --explain ----------------------------------------------------------------------------------------------


def explain_lines(result) -> list[str]:
    return result.stdout.split("\n\n")[0].splitlines()


def test_explain_shows_default_file_and_overrides(chatlearn_available):
    key = "models.policy.tensor_model_parallel_size"
    result = run("validate", str(CHATLEARN), f"{key}=4", f"{key}=8", "--explain", key)
    lines = explain_lines(result)
    assert lines[0] == f"{key} = 8"
    story = [l.split()[0] for l in lines[lines.index("  how it got this value:") + 1:]]
    assert story == ["default", "file", "override", "override"]
    assert f"<override 2: {key}=8>" in lines[-1]
    file_line = next(l for l in lines if l.strip().startswith("file"))
    assert re.search(r"chatlearn-fsdp-vllm\.yaml:\d+:\d+$", file_line)


def test_explain_interpolated_default():
    skyrl = TEMPLATES / "skyrl-fsdp-vllm.yaml"
    result = run("validate", str(skyrl), "--explain", "trainer.ref.model.path")
    lines = explain_lines(result)
    policy = re.search(r"(?m)^      path: \"?([^\"\s]+)", skyrl.read_text()).group(1)
    assert lines[0] == f"trainer.ref.model.path = {policy}"
    text = "\n".join(lines)
    assert "<default ${trainer.policy.model.path}>" in text
    assert re.search(r"resolved .*skyrl-fsdp-vllm\.yaml:\d+:\d+", text)


def test_explain_unknown_key_exits_2_with_did_you_mean(chatlearn_available):
    result = run("validate", str(CHATLEARN), "--explain", "models.ref_policy.lod")
    assert result.returncode == 2
    assert "did you mean `models.ref_policy.load`?" in result.stderr
    assert result.stdout == ""


def test_explain_json(chatlearn_available):
    payload = json.loads(run("validate", str(CHATLEARN), "runtime_args.num_episode=3", "--format", "json",
                             "--explain", "runtime_args.num_episode").stdout)
    story = payload["explain"]
    assert story["value"] == 3 and story["set"] is True
    assert [layer["origin"]["kind"] for layer in story["layers"]] == ["default", "file", "override"]
    assert story["layers"][-1]["origin"]["override_index"] == 1


# ---- help ---------------------------------------------------------------------------------------------------


def test_help():
    result = run("--help")
    assert result.returncode == 0 and "validate" in result.stdout
    result = run("validate", "--help")
    assert result.returncode == 0
    for flag in ("--dialect", "--format", "--strict", "--explain", "--debug"):
        assert flag in result.stdout


@pytest.mark.parametrize("command", ["validate", "plan", "run", "convert", "docs", "schema", "keys"])
def test_help_paragraphs_fill_the_terminal_width(command):
    # A description wrapped at the docstring's own line ends and again at the terminal's reads raggedly: every
    # line of a paragraph but its last reaches most of the width.
    lines = [line.strip() for line in run(command, "--help").stdout.split("╭")[0].splitlines()]
    paragraphs: list[list[str]] = [[]]
    for line in lines[2:]:  # after the usage line
        if line:
            paragraphs[-1].append(line)
        elif paragraphs[-1]:
            paragraphs.append([])
    assert len(paragraphs) >= 2
    for paragraph in paragraphs:
        for line in paragraph[:-1]:
            assert len(line) > 70, f"{command} --help: a short line inside a paragraph: {line!r}"


# ---- silencing codes, usage errors for tools, colour ----------------------------------------------------------

def test_ignore_silences_warnings_but_never_errors(tmp_path):
    loud = run("validate", str(CHATLEARN))
    warned = {line.split("]")[0].split("[")[1] for line in loud.stdout.splitlines() if line.startswith("warning[")}
    assert warned, "the template is expected to carry warnings"
    quiet = run("validate", str(CHATLEARN), "--ignore", ",".join(sorted(warned)))
    assert quiet.returncode == 0 and "warning[" not in quiet.stdout and "valid chatlearn config (" in quiet.stdout
    broken = run("validate", BROKEN, "--ignore", "RLC102,RLC300,RLC203")
    assert broken.returncode == 1 and "error[RLC102]" in broken.stdout


def test_ignore_refuses_a_code_that_does_not_exist():
    result = run("validate", str(CHATLEARN), "--ignore", "RLC999")
    assert result.returncode == 2 and "RLC999 is not a diagnostic code" in result.stderr


@pytest.mark.parametrize("command", ["validate", "plan"])
def test_usage_errors_reach_tools_as_json_on_stdout(command):
    result = run(command, "no-such-file.yaml", "--format", "json")
    assert result.returncode == 2
    assert json.loads(result.stdout) == {"format_version": 1, "usage_error": "no-such-file.yaml: no such file"}


def test_no_color_and_the_no_color_variable_keep_escape_codes_out():
    forced = run("validate", BROKEN, "--color")
    assert "\x1b[" in forced.stdout
    assert "\x1b[" not in run("validate", BROKEN, "--color", "--no-color").stdout
    assert "\x1b[" not in run("plan", BROKEN, "--no-color").stdout


def test_shell_completion_is_offered():
    assert "--install-completion" in run("--help").stdout


def complete(line: str, shell: str = "bash") -> list[str]:
    """What the shell would offer for the last word of `line`, asked as an installed completion asks."""
    import subprocess
    import sys

    env = {**os.environ, "_RLCFG_COMPLETE": f"complete_{shell}", "NO_COLOR": "1"}
    if shell == "bash":
        env.update(COMP_WORDS=line, COMP_CWORD=str(len(line.split()) - (0 if line.endswith(" ") else 1)))
    else:
        env["_TYPER_COMPLETE_ARGS"] = line
    rlcfg = str(Path(sys.executable).parent / "rlcfg")
    result = subprocess.run([rlcfg], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert result.returncode == 0 and not result.stderr, result.stderr
    return result.stdout.split()


def test_completion_of_flag_values():
    assert complete("rlcfg convert templates/skyrl-fsdp-vllm.yaml --to r") == ["rlinf", "roll"]
    assert complete("rlcfg plan templates/skyrl-fsdp-vllm.yaml --gpu h2") == ["h200", "h20"]
    assert complete("rlcfg validate x.yaml -d a") == ["areal"]
    # the releases of the config's own dialect, read from FILE while its value is being typed
    assert complete("rlcfg validate templates/roll-fsdp2-vllm.yaml --framework-version v0") == [
        "v0.1.0", "v0.1.3", "v0.2.1", "v0.3.0"]
    # convert's target release: the releases of the dialect --to names, not of FILE's
    assert complete("rlcfg convert templates/roll-fsdp2-vllm.yaml --to areal --to-release ") == [
        "0.3", "0.4", "0.5", "1.0"]


def test_completion_of_override_keys_one_section_at_a_time():
    roll = "rlcfg validate templates/roll-fsdp2-vllm.yaml "
    assert complete(roll + "actor_tr") == ["actor_train."]
    assert complete(roll + "actor_train.training_args.learning_r") == ["actor_train.training_args.learning_rate="]
    assert "++actor_train.model_args." in complete(roll + "++actor_train.model_")
    assert complete(roll + "~actor_train.model_args.dty") == ["~actor_train.model_args.dtype"]  # a deletion takes no value
    assert complete(roll + "seed=") == []
    assert complete("rlcfg keys skyrl trainer.algorithm.kl_loss_c") == ["trainer.algorithm.kl_loss_coef"]
    # zsh and fish hand the words over in another variable
    assert any("actor_train." in word for word in complete(roll + "actor_tr", "zsh"))
    # a file that cannot be read completes nothing, quietly
    assert complete("rlcfg validate missing.yaml actor") == []


def test_keys_lists_a_section_one_line_per_key():
    result = run("keys", "skyrl", "trainer.algorithm")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert all(line.startswith("trainer.algorithm.") for line in lines)
    assert any(line.startswith("trainer.algorithm.kl_loss_coef  float >= 0 = 0.001  ") for line in lines)


def test_keys_of_an_unknown_section_is_a_usage_error():
    result = run("keys", "roll", "no_such_section")
    assert result.returncode == 2
    assert "`rlcfg keys roll` lists them all" in result.stderr


def test_an_unknown_key_without_a_near_name_points_at_the_keys_of_its_section(tmp_path):
    text = SKYRL.read_text().replace("trainer:\n", "trainer:\n  zzz_qqq: 1\n", 1)
    result = run("validate", write(tmp_path, "s.yaml", text))
    assert "`rlcfg keys skyrl trainer` lists the keys it accepts" in result.stdout


def test_a_problem_an_interpolation_copies_is_one_error_naming_the_copy(tmp_path):
    text = SKYRL.read_text().replace("  policy:\n", "  policy:\n    megatron_config:\n      zzz_qqq: 1\n", 1) \
        .replace("  ref:\n", "  ref:\n    megatron_config: ${trainer.policy.megatron_config}\n", 1)
    result = run("validate", write(tmp_path, "s.yaml", text), "--format", "json")
    found = [d for d in json.loads(result.stdout)["diagnostics"] if d["path"].endswith("zzz_qqq")]
    assert [d["path"] for d in found] == ["trainer.policy.megatron_config.zzz_qqq"]
    assert [r["path"] for r in found[0]["related"]] == ["trainer.ref.megatron_config.zzz_qqq"]
