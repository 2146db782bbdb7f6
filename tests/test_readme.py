"""The README's two commands are what a newcomer types; CI must run the second one exactly."""

from __future__ import annotations

import re

from tests.helpers import ROOT


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```sh\n(.+?)\n```", text)[:2]


def test_readme_starts_with_the_quickstart_and_the_test_command():
    quickstart, tests = readme_commands()
    assert "rlcfg run templates/quickstart-cpu.yaml" in quickstart
    assert "pytest" in tests


def test_ci_runs_the_readme_test_command():
    _quickstart, tests = readme_commands()
    assert tests in (ROOT / ".ci" / "run").read_text()


def test_the_quickstart_template_exists_and_is_valid():
    from rlcfg.frontend import check_file

    result = check_file(str(ROOT / "templates" / "quickstart-cpu.yaml"), env={})
    assert result.errors == 0 and result.warnings == 0



def test_the_sample_output_is_what_the_quickstart_prints_today():
    """The block below the commands shows the current quickstart: the template's step count and response
    length, and the warm start announced in rlcfg's current words."""
    from ruamel.yaml import YAML

    from rlcfg.runtime import quickstart

    text = (ROOT / "README.md").read_text()
    block = re.search(r"```text\n\$ rlcfg run templates/quickstart-cpu.yaml\n(.+?)\n```", text, re.S).group(1)
    template = YAML(typ="safe").load((ROOT / "templates" / "quickstart-cpu.yaml").read_text())
    steps = template["max_steps"]
    assert f"step {steps}/{steps} " in block and f"rlcfg run: {steps} steps in" in block
    assert f"{template['response_length']}-token limit" in text
    assert quickstart.building_message(template["pretrain"]) in block.splitlines()
