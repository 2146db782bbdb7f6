"""How the front end judges a document beyond its types: by which framework release, how the framework's loader
treats unknown keys, what `+key` and `~key` overrides mean, pipelines rlcfg does not model, and detection after
composition. A small dialect declared here stands in for the five, so these tests pin the shared behaviour."""

from __future__ import annotations

from typing import ClassVar

import pytest

from rlcfg import frontend
from rlcfg.schema.base import Dialect, RuleSet, Section, param, section
from rlcfg.source.yaml_loader import UsageError
from tests.helpers import register_dialect


class Actor(Section):
    lr: float = param(1e-6, description="Learning rate.", gt=0)
    group_size: int = param(1, description="Samples per prompt (the old layout only).", ge=1, releases=("0.3",))
    backend: str = param("fsdp", description="Training engine (the new layout only).", releases=("1.0",))


class Root(Section):
    experiment_name: str = param("toy", description="Name of the run.")
    actor: Actor = section(Actor, description="The trained policy.")
    launcher: dict = param({}, description="Launcher settings (the old layout only).", releases=("0.3",))


class Toy(Dialect):
    name = "toy"
    title = "Toy"
    documents = "a stand-in"
    releases: ClassVar = ("0.3", "1.0")
    rules = RuleSet()
    policy = "error"

    def variants(self) -> dict:
        return {"toy": Root}

    def unknown_key_policy(self, path: tuple, release: str | None = None) -> str:
        return self.policy

    def infer_release(self, data: dict) -> tuple:
        if "backend" in (data.get("actor") or {}):
            return "1.0", "it has actor.backend"
        if "launcher" in data or "group_size" in (data.get("actor") or {}):
            return "0.3", "it has keys only 0.3 reads"
        return "1.0", "no key of 0.3"

    def pipeline(self, data: dict) -> str | None:
        return "Toy SFT pipeline" if data.get("experiment_name") == "sft" else None


@pytest.fixture
def toy(monkeypatch):
    dialect = Toy()
    register_dialect(monkeypatch, dialect)
    return dialect


def check(text: str, *overrides: str, release: str | None = None) -> frontend.CheckResult:
    return frontend.check_text(text, "toy.yaml", list(overrides), dialect="toy", env={}, release=release)


def codes(result: frontend.CheckResult) -> list[tuple[str, str, str]]:
    return [(d.code, d.severity.value, d.path) for d in result.diagnostics]


def test_a_key_of_another_release_is_the_error_that_release_raises(toy):
    result = check("actor:\n  backend: fsdp\n  group_size: 4\n")
    assert result.release == "1.0" and result.release_label == "Toy 1.0"
    assert codes(result) == [("RLC113", "error", "actor.group_size")]
    message = result.diagnostics[0]
    assert "does not exist in Toy 1.0" in message.message and "Toy 0.3" in message.message
    assert "--framework-version 0.3" in message.hint and "it has actor.backend" in message.hint
    assert message.origin.line == 3


def test_the_inferred_release_accepts_its_own_keys(toy):
    result = check("launcher: {}\nactor:\n  group_size: 4\n")
    assert result.ok and result.release == "0.3" and result.release_reason == "it has keys only 0.3 reads"


def test_a_pinned_release_wins_over_inference(toy):
    result = check("launcher: {}\n", release="1.0")
    assert result.release_reason == "pinned with --framework-version"
    assert codes(result) == [("RLC113", "error", "launcher")]


def test_a_release_the_dialect_does_not_claim_is_a_usage_error(toy):
    with pytest.raises(UsageError, match="releases rlcfg knows are 0.3, 1.0"):
        check("actor: {}\n", release="2.0")


def test_where_the_loader_drops_unknown_keys_a_release_mismatch_is_a_warning(toy):
    toy.policy = "drop"
    result = check("actor:\n  group_size: 4\n", release="1.0")
    assert codes(result) == [("RLC113", "warning", "actor.group_size")]
    assert "it is ignored there" in result.diagnostics[0].message


def test_unknown_keys_follow_the_loader(toy):
    toy.policy = "drop"
    text = "max_len: 8\nnotes: hello\nactor:\n  lrr: 0.1\n  backend: ${max_len}\n"
    result = check(text)
    found = codes(result)
    # a typo of a key the framework reads is an error; a helper variable read by an interpolation is fine; any
    # other unknown key is dropped by the framework, so it is a warning
    assert ("RLC102", "error", "actor.lrr") in found
    assert ("RLC114", "warning", "notes") in found
    assert not any(path == "max_len" for _c, _s, path in found)
    assert "did you mean `lr`" in next(d.hint for d in result.diagnostics if d.path == "actor.lrr")


def test_open_mappings_take_any_key_and_strict_loaders_refuse_them(toy):
    toy.policy = "open"
    assert check("notes: hello\n").ok
    toy.policy = "error"
    assert codes(check("notes: hello\n")) == [("RLC102", "error", "notes")]


def test_a_key_added_with_plus_is_accepted_with_a_note(toy):
    result = check("actor: {}\n", "+actor.my_flag=1", "+my_plugin={a: 1}")
    assert result.ok
    assert sorted(codes(result)) == [("RLC115", "note", "actor.my_flag"), ("RLC115", "note", "my_plugin")]


def test_a_key_added_with_plus_close_to_a_known_key_is_a_likely_typo(toy):
    result = check("actor: {}\n", "+actor.lrr=0.1")
    assert codes(result) == [("RLC115", "warning", "actor.lrr")]
    (found,) = result.diagnostics
    assert "`actor.lr` keeps its value" in found.message
    # the toy dialect composes only the user's files (Hydra): the key the file does not write takes `++`
    assert "did you mean `actor.lr`? Set it with `++actor.lr=...`" in found.hint


def test_a_key_added_with_double_plus_is_named_as_written(toy):
    (found,) = check("actor: {}\n", "++my_plugin=1").diagnostics
    assert found.code == "RLC115" and found.message.startswith("`++my_plugin` adds a key")


def test_plus_onto_an_existing_mapping_merges_as_hydra_does(toy):
    result = check("actor:\n  lr: 0.5\n", "+actor={backend: megatron}")
    assert result.ok
    assert result.tree.get(("actor", "backend")) == "megatron" and result.tree.get(("actor", "lr")) == 0.5


def test_deleting_a_key_the_framework_reads_stops_where_overrides_see_the_base_config(toy):
    toy.overrides_see_defaults = True
    result = check("actor:\n  lr: 0.5\n", "~actor.lr")
    assert codes(result) == [("RLC117", "error", "actor.lr")]
    assert "ConfigAttributeError" in result.diagnostics[0].message


def test_deleting_a_key_elsewhere_brings_back_the_default(toy):
    result = check("actor:\n  lr: 0.5\n", "~actor.lr")
    assert result.ok and result.config.actor.lr == 1e-6


def test_a_pipeline_rlcfg_does_not_model_gets_one_warning_and_the_checks_that_apply(toy):
    result = check("experiment_name: sft\nsft_only: {x: 1}\nactor:\n  lr: -1\n")
    assert result.pipeline == "Toy SFT pipeline"
    found = codes(result)
    assert ("RLC116", "warning", "") in found
    assert ("RLC201", "error", "actor.lr") in found  # a key it knows is still checked
    assert not any(code == "RLC102" for code, _s, _p in found)
    assert result.config is None  # nothing to plan or run


def test_the_dialect_is_detected_after_the_defaults_list_is_composed(tmp_path):
    (tmp_path / "base.yaml").write_text("trainer:\n  epochs: 1\ngenerator:\n  n_samples_per_prompt: 2\n")
    main = tmp_path / "main.yaml"
    main.write_text("defaults:\n  - base\n  - _self_\ndata:\n  train_data: []\n")
    result = frontend.check_file(str(main), env={})
    assert result.dialect == "skyrl"


def test_the_summary_line_names_the_release(toy, capsys):
    from rlcfg.cli.validating import _text

    result = check("launcher: {}\n")
    assert "(Toy 0.3: it has keys only 0.3 reads)" in _text(result, None, False, False)


def test_hydras_own_settings_given_as_overrides_are_not_keys_of_the_job():
    from tests.helpers import TEMPLATES

    result = frontend.check_file(str(TEMPLATES / "skyrl-fsdp-vllm.yaml"),
                                 ["hydra.searchpath=[file:///opt/extra]", "hydra.run.dir=/tmp/x"], env={"HOME": "/h"})
    assert not [d for d in result.diagnostics if d.path.startswith("hydra")]
