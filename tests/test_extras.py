"""The extras install, on every Python rlcfg supports, the engine releases the backends are written for. Whether
each combination resolves needs the package index: tools/check_extras.py asks it in CI. What the declarations
alone decide is checked here."""

from __future__ import annotations

import importlib.util
import sys
import tomllib

from tests.helpers import ROOT


def check_extras():
    spec = importlib.util.spec_from_file_location("check_extras", ROOT / "tools" / "check_extras.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_each_backend_extra_pins_its_engine_to_one_release_for_every_python():
    # A range lets pip backtrack to a release the backend was never written for rather than fail (`sglang>=0.5`
    # beside torch 2.13 resolved to SGLang 0.5.2), and a marker leaves some Pythons with no engine at all
    # (megatron-core on 3.12).
    assert check_extras().loose_engines(pyproject()) == {}


def test_an_engine_a_marker_leaves_out_fails_the_check():
    tools = check_extras()
    declared = pyproject()
    declared["project"]["optional-dependencies"]["megatron"] = ["megatron-core==0.16.1; python_version < '3.12'"]
    assert "megatron" in tools.loose_engines(declared)
    resolved_on_312 = {"torch": "2.14.1", "safetensors": "0.6.2"}
    assert tools.left_out(declared, ("megatron",), resolved_on_312) == [
        "`megatron-core==0.16.1; python_version < '3.12'` is not installed"]

