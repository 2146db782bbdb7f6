"""DESIGN rule 7: `validate`, `--help` and the JSON path never import the heavy runtime stack."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import ROOT, TEMPLATES

HEAVY = ("torch", "ray", "transformers", "vllm", "sglang", "megatron", "deepspeed", "flash_attn",
         "tensorflow", "jax")

# Runs the CLI in-process, as `rlcfg ARGS...` would, then reports which heavy modules got imported.
PROBE = """
import json, sys
heavy = json.loads(sys.argv[1])
sys.argv = ["rlcfg", *sys.argv[2:]]
code = 0
try:
    from rlcfg.cli import main
    main()
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
loaded = sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in heavy))
print("\\nRLCFG-PROBE " + json.dumps({"code": code, "heavy": loaded}))
"""


def probe(*args: str) -> dict:
    result = subprocess.run([sys.executable, "-c", PROBE, json.dumps(HEAVY), *args], capture_output=True, text=True,
                            cwd=ROOT, timeout=120, env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin", "HOME": "/tmp"})
    line = next((l for l in result.stdout.splitlines() if l.startswith("RLCFG-PROBE ")), None)
    assert line, result.stdout + result.stderr
    return json.loads(line[len("RLCFG-PROBE "):])


def commands() -> list[tuple[str, ...]]:
    out = [("--help",), ("validate", "--help")]
    for optional in ("docs", "schema", "plan"):
        if (ROOT / "rlcfg" / "cli" / f"{optional}.py").exists():
            out.append((optional, "--help"))
    return out


TEMPLATE_FILES = sorted(TEMPLATES.glob("*.yaml"))


@pytest.mark.parametrize("args", commands(), ids=" ".join)
def test_help_is_light(args):
    found = probe(*args)
    assert found["code"] == 0
    assert found["heavy"] == []


@pytest.mark.parametrize("template", TEMPLATE_FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_validate_is_light(template, fmt):
    found = probe("validate", str(template.relative_to(ROOT)), "--format", fmt)
    assert found["code"] in (0, 1)
    assert found["heavy"] == [], f"validate imported {found['heavy']}"


def test_validate_of_a_broken_config_is_light():
    found = probe("validate", "tests/fixtures/chatlearn/broken.yaml", "--format", "json",
                  "--explain", "models.policy.temperature")
    assert found["heavy"] == []


def test_the_probe_would_notice_a_heavy_import():
    # Guards the guard: a module that is imported must show up.
    result = subprocess.run([sys.executable, "-c", PROBE.replace("from rlcfg.cli import main", "import json.decoder as main_mod; main = lambda: None"),
                             json.dumps(["json"]), "x"], capture_output=True, text=True, timeout=60)
    assert '"json"' in result.stdout


# Reading YAML and resolving plain references (`${a.b}`, `${oc.env:VAR}`) is rlcfg's own work: OmegaConf, and PyYAML
# under it, take longer to import than the rest of a check, so they load only for what needs them (a dialect's
# own resolvers, such as RLinf's `${subtract:...}`).
PLAIN_INTERPOLATION_TEMPLATES = [t for t in TEMPLATE_FILES if "${" in t.read_text() and not t.name.startswith("rlinf")]


@pytest.mark.parametrize("template", PLAIN_INTERPOLATION_TEMPLATES, ids=lambda p: p.name)
def test_validate_needs_no_omegaconf_for_plain_references(template):
    result = subprocess.run([sys.executable, "-c", PROBE, json.dumps(["omegaconf", "yaml"]), "validate",
                             str(template.relative_to(ROOT))], capture_output=True, text=True, cwd=ROOT, timeout=120,
                            env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin", "HOME": "/tmp"})
    line = next(l for l in result.stdout.splitlines() if l.startswith("RLCFG-PROBE "))
    found = json.loads(line[len("RLCFG-PROBE "):])
    assert found["code"] == 0 and found["heavy"] == []
