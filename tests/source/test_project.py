"""The project file (rlcfg.source.project): keys a fork adds to its framework's config, declared with their types."""

from __future__ import annotations

import pytest

from rlcfg.frontend import check_file
from rlcfg.preflight import setting_blockers
from rlcfg.source.yaml_loader import UsageError
from tests.helpers import TEMPLATES, cli

ENV = {"HOME": "/home/user"}


def _fork(tmp_path, declaration: str | None, extra: str):
    (tmp_path / "configs").mkdir()
    config = tmp_path / "configs" / "rlvr.yaml"
    config.write_text((TEMPLATES / "roll-fsdp2-vllm.yaml").read_text() + extra)
    if declaration is not None:
        (tmp_path / "rlcfg.project.yaml").write_text(declaration)
    return str(config)


DECLARED = """\
extend:
  roll:
    my_tag: {type: str, run: inert, description: "a label our dashboards read"}
    reward_mode: {type: str, choices: [soft, hard]}
    patch_level: int
"""


def test_a_forks_keys_are_unknown_until_declared(tmp_path):
    undeclared = check_file(_fork(tmp_path, None, "my_tag: exp1\n"), env=ENV)
    assert [d.code for d in undeclared.diagnostics if d.path == "my_tag"] == ["RLC114"]


def test_declared_keys_are_accepted_typed_and_refused_by_run_unless_inert(tmp_path):
    path = _fork(tmp_path, DECLARED, "my_tag: exp1\nreward_mode: soft\npatch_level: 2\n")
    result = check_file(path, env=ENV)
    assert result.ok and not [d for d in result.diagnostics if d.path == "my_tag"]
    notes = {d.path: d for d in result.diagnostics if d.code == "RLC118"}
    assert set(notes) == {"reward_mode", "patch_level"} and "rlcfg.project.yaml" in notes["patch_level"].message
    assert {b.code for b in setting_blockers(result)} == {"RLC118"}  # `rlcfg run` stops on them
    wrong = check_file(path, ["reward_mode=medium", "patch_level=two"], env=ENV)
    assert {(d.code, d.path) for d in wrong.diagnostics if d.severity.value == "error"} == {
        ("RLC202", "reward_mode"), ("RLC200", "patch_level")}


def test_the_nearest_project_file_counts(tmp_path):
    path = _fork(tmp_path, DECLARED, "my_tag: exp1\n")
    (tmp_path / "configs" / "rlcfg.project.yaml").write_text("extend:\n  skyrl:\n    my_flag: bool\n")
    # the nearer file declares nothing for ROLL: my_tag is unknown again
    assert [d.code for d in check_file(path, env=ENV).diagnostics if d.path == "my_tag"] == ["RLC114"]


@pytest.mark.parametrize("declaration, words", [
    ("extend:\n  roll:\n    rollout_batch_size: int\n", "already a key of roll"),
    ("extend:\n  roll:\n    my_tag: text\n", "use one of bool"),
    ("extend:\n  roll:\n    my_tag: {type: str, run: sometimes}\n", "`run` is `refused`"),
    ("extends:\n  roll: {}\n", "not a section of a project file"),
    ("extend: [roll]\n", "maps a dialect"),
    ("", "a project file is a YAML mapping"),
    ("extend:\n  roll:\n    a: int\n    a: str\n", "appears twice"),
    ("extend: {roll: [\n", "rlcfg.project.yaml:"),
])
def test_a_declaration_rlcfg_cannot_read_is_a_usage_error_located_in_the_project_file(tmp_path, declaration, words):
    path = _fork(tmp_path, declaration, "")
    with pytest.raises(UsageError, match=words):
        check_file(path, env=ENV)
    done = cli("validate", path, cwd=tmp_path)
    assert done.returncode == 2 and "rlcfg.project.yaml:" in done.stderr + done.stdout


def test_a_declared_section_written_empty_is_still_the_forks_to_run(tmp_path):
    """`my_opts: {}` hands the fork's code an empty mapping: run refuses it like any other key the fork reads."""
    declaration = "extend:\n  roll:\n    my_opts: mapping\n    my_opts.level: int\n"
    result = check_file(_fork(tmp_path, declaration, "my_opts: {}\n"), env=ENV)
    assert result.ok
    assert [d.path for d in result.diagnostics if d.code == "RLC118"] == ["my_opts"]
