"""Hydra defaults lists: fragments placed at their package, in order, with every value's file:line:col kept."""

from __future__ import annotations

from pathlib import Path

from rlcfg.source.compose import compose, searchpath_of
from rlcfg.source.yaml_loader import load_yaml


def _write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _compose(root: Path, text: str, search_path=(), name: str = "main.yaml"):
    path = _write(root, name, text)
    tree, problems = load_yaml(text, str(path))
    assert tree is not None and not problems
    return compose(tree, str(root), search_path)


def test_a_fragment_lands_at_its_package_and_keeps_its_own_location(tmp_path):
    _write(tmp_path, "model/small.yaml", "layers: 4\nhidden: 256\n")
    tree, problems = _compose(tmp_path, "defaults:\n  - model/small@actor.model\nactor:\n  lr: 0.1\n")
    assert problems == []
    assert tree.data == {"actor": {"model": {"layers": 4, "hidden": 256}, "lr": 0.1}}
    origin = tree.origin(("actor", "model", "hidden"))
    assert (origin.file, origin.line, origin.column) == (str(tmp_path / "model/small.yaml"), 2, 9)
    assert tree.origin(("actor", "lr")).file == str(tmp_path / "main.yaml")
    assert "defaults" not in tree.data and ("defaults",) not in tree.values


def test_without_a_package_a_fragment_lands_at_its_group(tmp_path):
    _write(tmp_path, "optim/adam.yaml", "lr: 0.001\n")
    tree, problems = _compose(tmp_path, "defaults:\n  - optim/adam\nname: x\n")
    assert problems == [] and tree.data == {"optim": {"lr": 0.001}, "name": "x"}


def test_the_package_header_of_a_fragment_is_honoured(tmp_path):
    _write(tmp_path, "env/sim.yaml", "# @package _global_\nseed: 7\n")
    tree, problems = _compose(tmp_path, "defaults:\n  - env/sim\n")
    assert problems == [] and tree.data == {"seed": 7}


def test_the_mapping_form_selects_a_file_of_the_group(tmp_path):
    _write(tmp_path, "engines/fsdp.yaml", "shard: full\n")
    tree, problems = _compose(tmp_path, "defaults:\n  - engines@actor.fsdp: fsdp\n")
    assert problems == [] and tree.data == {"actor": {"fsdp": {"shard": "full"}}}


def test_self_last_by_default_so_the_file_wins(tmp_path):
    _write(tmp_path, "model/a.yaml", "layers: 4\nheads: 8\n")
    tree, _ = _compose(tmp_path, "defaults:\n  - model/a@model\nmodel:\n  layers: 12\n")
    assert tree.data["model"] == {"layers": 12, "heads": 8}
    layers = [layer.value for layer in tree.history[("model", "layers")]]
    assert layers == [4, 12], "--explain tells the value's story: the fragment's, then the file's"


def test_self_first_lets_the_fragments_win(tmp_path):
    _write(tmp_path, "model/a.yaml", "layers: 4\n")
    tree, _ = _compose(tmp_path, "defaults:\n  - _self_\n  - model/a@model\nmodel:\n  layers: 12\n  heads: 2\n")
    assert tree.data["model"] == {"layers": 4, "heads": 2}
    assert tree.origin(("model", "layers")).file == str(tmp_path / "model/a.yaml")


def test_later_fragments_override_earlier_ones_key_by_key(tmp_path):
    _write(tmp_path, "base/a.yaml", "x: 1\ny: {p: 1, q: 2}\n")
    _write(tmp_path, "base/b.yaml", "y: {q: 3}\n")
    tree, _ = _compose(tmp_path, "defaults:\n  - base/a@cfg\n  - base/b@cfg\n")
    assert tree.data == {"cfg": {"x": 1, "y": {"p": 1, "q": 3}}}


def test_fragments_may_have_defaults_of_their_own_relative_to_their_folder(tmp_path):
    _write(tmp_path, "actor/megatron.yaml", "defaults:\n  - optim/adam@optim\nbackend: megatron\n")
    _write(tmp_path, "actor/optim/adam.yaml", "lr: 0.5\n")
    tree, problems = _compose(tmp_path, "defaults:\n  - actor/megatron@actor\n")
    assert problems == [] and tree.data == {"actor": {"optim": {"lr": 0.5}, "backend": "megatron"}}


def test_a_missing_fragment_is_reported_at_its_entry_with_a_suggestion(tmp_path):
    _write(tmp_path, "model/qwen2.5-1.5b.yaml", "layers: 28\n")
    tree, problems = _compose(tmp_path, "name: x\ndefaults:\n  - _self_\n  - model/qwen2.5-1.5B@actor.model\n")
    assert [p.code for p in problems] == ["RLC112"]
    problem = problems[0]
    assert problem.path == "defaults[1]"
    assert (problem.origin.line, problem.origin.column) == (4, 5)
    assert "model/qwen2.5-1.5B.yaml" in problem.message and str(tmp_path) in problem.message
    assert problem.hint == "did you mean `model/qwen2.5-1.5b`?"
    assert tree.data == {"name": "x"}, "the rest of the config is still checked"


def test_a_missing_fragment_in_an_empty_group_says_how_to_fix_it(tmp_path):
    _, problems = _compose(tmp_path, "defaults:\n  - model/none@actor.model\n")
    assert "create the file" in problems[0].hint and "hydra.searchpath" in problems[0].hint


def test_an_optional_fragment_may_be_missing(tmp_path):
    tree, problems = _compose(tmp_path, "defaults:\n  - optional model/none@actor.model\nname: x\n")
    assert problems == [] and tree.data == {"name": "x"}


def test_hydra_settings_and_null_choices_are_not_part_of_the_config(tmp_path):
    tree, problems = _compose(tmp_path, "defaults:\n  - override hydra/job_logging: stdout\n"
                                        "  - model: null\nname: x\n")
    assert problems == [] and tree.data == {"name": "x"}


def test_an_override_entry_replaces_an_earlier_choice(tmp_path):
    _write(tmp_path, "model/a.yaml", "size: a\n")
    _write(tmp_path, "model/b.yaml", "size: b\n")
    tree, problems = _compose(tmp_path, "defaults:\n  - model: a\n  - override model: b\n")
    assert problems == [] and tree.data == {"model": {"size": "b"}}


def test_the_search_path_is_searched_after_the_config_folder(tmp_path):
    _write(tmp_path, "shared/cluster/one.yaml", "nodes: 1\n")
    tree, problems = _compose(tmp_path / "job", "defaults:\n  - cluster/one@cluster\n",
                              search_path=[str(tmp_path / "shared")])
    assert problems == [] and tree.data == {"cluster": {"nodes": 1}}


def test_searchpath_entries_read_environment_variables(tmp_path):
    text = "hydra:\n  searchpath:\n    - file://${oc.env:CONF_ROOT}/config\n    - pkg://rlinf.config\n"
    tree, _ = load_yaml(text, "main.yaml")
    folders, unusable = searchpath_of(tree, {"CONF_ROOT": "/opt/x"})
    assert folders == ["/opt/x/config"] and unusable == ["pkg://rlinf.config"]
    folders, unusable = searchpath_of(tree, {})
    assert folders == [] and unusable[0] == "file://${oc.env:CONF_ROOT}/config"


def test_an_unset_searchpath_variable_is_named_in_the_hint(tmp_path):
    path = _write(tmp_path, "main.yaml", "defaults:\n  - env/sim@env\n")
    tree, _ = load_yaml(path.read_text(), str(path))
    _, problems = compose(tree, str(tmp_path), [], ["file://${oc.env:EMBODIED_PATH}/config/"])
    assert "EMBODIED_PATH" in problems[0].hint


def test_an_include_cycle_is_reported_not_followed(tmp_path):
    _write(tmp_path, "a/x.yaml", "defaults:\n  - y@y\nv: 1\n")
    _write(tmp_path, "a/y.yaml", "defaults:\n  - x@x\nw: 2\n")
    _, problems = _compose(tmp_path, "defaults:\n  - a/x@x\n")
    assert [p.code for p in problems] == ["RLC112"] and "includes itself" in problems[0].message


def test_an_empty_fragment_is_an_empty_mapping(tmp_path):
    _write(tmp_path, "model/empty.yaml", "# nothing here\n")
    tree, problems = _compose(tmp_path, "defaults:\n  - model/empty@model\nname: x\n")
    assert problems == [] and tree.data == {"model": {}, "name": "x"}


def test_a_broken_fragment_reports_its_own_file(tmp_path):
    _write(tmp_path, "model/bad.yaml", "layers: [1, 2\n")
    _, problems = _compose(tmp_path, "defaults:\n  - model/bad@model\n")
    assert [p.code for p in problems] == ["RLC100"]
    assert problems[0].origin.file == str(tmp_path / "model/bad.yaml")


def test_malformed_entries_are_reported(tmp_path):
    _, problems = _compose(tmp_path, "defaults:\n  - 3\n  - {a: 1, b: 2}\n  - model/x@\n")
    assert [p.code for p in problems] == ["RLC112"] * 3
    assert all("is not a config name" in p.message for p in problems)
    _, problems = _compose(tmp_path, "defaults: model/x\n")
    assert problems[0].message.startswith("`defaults` must be a list")


def test_a_config_without_defaults_is_left_alone(tmp_path):
    tree, problems = _compose(tmp_path, "name: x\n")
    assert problems == [] and tree.data == {"name": "x"}
