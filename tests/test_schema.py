"""`rlcfg schema`: draft-07 JSON Schemas that accept what `rlcfg validate` accepts, for editors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from jsonschema import Draft7Validator

from rlcfg import schema
from rlcfg.source.tree import MISSING
from rlcfg.source.yaml_loader import load_yaml
from tests.helpers import ROOT, TEMPLATES, cli
from tests.test_docs import TOY

DIALECTS = schema.names()
TEMPLATE_FILES = sorted(TEMPLATES.glob("*.yaml"))


def _fresh(name: str) -> dict:
    from docs_gen.editor_schema import dialect_schema

    return dialect_schema(schema.load(name))


def _load(path: Path) -> dict:
    tree, problems = load_yaml(path.read_text(), str(path))
    assert tree is not None, problems
    return tree.data


def _dialect_of(path: Path, data: dict) -> str:
    found = schema.detect(data).name
    return found or path.name.split("-")[0]


def _errors(validator: Draft7Validator, data: object) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path)) or '<top>'}: {e.message}" for e in validator.iter_errors(data)]


# ---- the committed schemas ------------------------------------------------------------------------------------


def test_schema_check_passes_on_the_committed_files() -> None:
    result = cli("schema", "--check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_schema_check_names_a_stale_file(tmp_path) -> None:
    out = tmp_path / "schemas"
    shutil.copytree(ROOT / "schemas", out)
    name = DIALECTS[0] if DIALECTS else pytest.skip("no dialect yet")
    stale = out / f"{name}.schema.json"
    data = json.loads(stale.read_text())
    data["description"] = "edited by hand"
    stale.write_text(json.dumps(data, indent=2) + "\n")
    result = cli("schema", "--check", "--out", str(out))
    assert result.returncode == 1, result.stdout
    assert f"{stale}: out of date" in result.stdout
    assert f"regenerate with `rlcfg schema --out {out}`" in result.stdout
    assert json.loads(stale.read_text())["description"] == "edited by hand", "--check must not write"


def test_schema_writes_files_that_then_pass_the_check(tmp_path) -> None:
    result = cli("schema", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{n}.schema.json" for n in DIALECTS)
    assert cli("schema", "--out", str(tmp_path), "--check").returncode == 0


def test_schema_rejects_an_unknown_dialect_as_a_usage_error() -> None:
    result = cli("schema", "--dialect", "verl")
    assert result.returncode == 2 and "unknown dialect" in result.stderr


@pytest.mark.parametrize("name", DIALECTS)
def test_each_schema_is_draft_07_for_yaml_language_server(name: str) -> None:
    document = _fresh(name)
    Draft7Validator.check_schema(document)
    assert document["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert document["title"] and document["description"]
    text = json.dumps(document)
    assert "$defs" not in text and "#/$defs/" not in text


# ---- templates --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", TEMPLATE_FILES, ids=lambda p: p.name)
def test_template_validates_against_its_schema_and_names_it(path: Path) -> None:
    data = _load(path)
    name = _dialect_of(path, data)
    assert name in DIALECTS, f"{path.name}: no dialect {name}"
    first = path.read_text().splitlines()[0]
    assert first == f"# yaml-language-server: $schema=../schemas/{name}.schema.json", (
        f"{path.name} must start with the modeline for its schema, not {first!r}")
    errors = _errors(Draft7Validator(_fresh(name)), data)
    assert not errors, f"{path.name}:\n  " + "\n  ".join(errors)


def _typo(data: dict, root) -> tuple[dict, str]:
    """The template with one key of a section misspelled (two letters swapped), and that key's path."""
    from rlcfg.schema.base import section_at

    def visit(node: dict, path: tuple):
        owner = section_at(root, path)
        if owner is None:
            return None
        for key, value in node.items():
            if isinstance(value, dict):
                found = visit(value, path + (key,))
                if found:
                    return found
        for key in node:
            if len(key) > 3 and key[1] != key[2]:
                return path, key
        return None

    found = visit(data, ())
    assert found, "no key to misspell"
    path, key = found
    copy = json.loads(json.dumps(data))
    node = copy
    for part in path:
        node = node[part]
    wrong = key[0] + key[2] + key[1] + key[3:]
    node[wrong] = node.pop(key)
    return copy, ".".join(path + (wrong,))


@pytest.mark.parametrize("path", TEMPLATE_FILES, ids=lambda p: p.name)
def test_schema_rejects_a_template_with_a_typo(path: Path) -> None:
    data = _load(path)
    name = _dialect_of(path, data)
    dialect = schema.load(name)
    broken, where = _typo(data, dialect.root(data))
    errors = _errors(Draft7Validator(_fresh(name)), broken)
    assert errors, f"the schema accepted {path.name} with `{where}` misspelled"
    assert any(where.rsplit(".", 1)[-1] in e for e in errors), errors


@pytest.mark.parametrize("path", TEMPLATE_FILES, ids=lambda p: p.name)
def test_a_top_level_typo_is_the_only_complaint(path: Path) -> None:
    """An editor shows one problem, at the misspelled key, not a failed `anyOf` blaming every other key."""
    from docs_gen.model import discriminator

    data = _load(path)
    name = _dialect_of(path, data)
    chooser = discriminator(schema.load(name))  # misspelling the key that picks the variant changes the variant
    key = next(k for k in data if len(k) > 3 and k[1] != k[2] and not (chooser and chooser[0][0] == k))
    data[key[0] + key[2] + key[1] + key[3:]] = data.pop(key)
    validator = Draft7Validator(_fresh(name))
    errors = [e for e in validator.iter_errors(data) if not _only_required(e)]
    assert len(errors) == 1 and errors[0].validator == "additionalProperties", [e.message for e in errors]


def _drop_missing(node):
    if isinstance(node, dict):
        return {k: _drop_missing(v) for k, v in node.items() if v != MISSING}
    return node


@pytest.mark.parametrize("name", DIALECTS)
def test_documented_defaults_fit_the_schema(name: str) -> None:
    """Every variant's defaults, interpolations included, pass; only the keys without a default may be missing."""
    from docs_gen.model import discriminator

    dialect = schema.load(name)
    validator = Draft7Validator(_fresh(name))
    picked = discriminator(dialect)
    for variant, root in dialect.variants().items():
        data = _drop_missing(dialect.defaults(root))
        if picked:  # the variant's defaults carry the shared default of the key that picks it; set it
            path, values = picked
            node = data
            for part in path[:-1]:
                node = node.setdefault(part, {})
            node[path[-1]] = next(v for v, n in values.items() if n == variant)
        problems = [e for e in validator.iter_errors(data) if not _only_required(e)]
        assert not problems, f"{name}/{variant}: " + "; ".join(e.message[:200] for e in problems)


def _only_required(error) -> bool:
    """Whether the error is a missing key, or an anyOf/oneOf one of whose branches fails only for that."""
    if error.validator == "required":
        return True
    branches: dict = {}
    for sub in error.context or ():
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    return any(all(_only_required(e) for e in group) for group in branches.values())


# ---- behaviour, on the fixture dialect ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def toy() -> Draft7Validator:
    from docs_gen.editor_schema import dialect_schema

    document = dialect_schema(TOY)
    Draft7Validator.check_schema(document)
    return Draft7Validator(document)


def test_any_typed_value_may_be_an_interpolation(toy: Draft7Validator) -> None:
    config = {"runtime": {"output_dir": "/out", "sample_per_episode": "${data.samples}", "colocation": "${roles}",
                          "train_backend": "${oc.env:BACKEND}", "logging": {"enable_wandb": "${wandb}"}},
              "rollout": {"temperature": "${sampling.temperature}"}}
    assert _errors(toy, config) == []
    assert _errors(toy, {"runtime": {"output_dir": "/out", "sample_per_episode": "512"}})  # a string is no int


def test_the_discriminating_key_picks_the_variant(toy: Draft7Validator) -> None:
    fsdp_keys = {"runtime": {"output_dir": "/o"}, "trainer": {"fsdp_size": 4}}
    assert _errors(toy, fsdp_keys) == []
    megatron = {"runtime": {"output_dir": "/o", "train_backend": "megatron"}, "trainer": {"fsdp_size": 4}}
    assert any("fsdp_size" in e for e in _errors(toy, megatron))
    megatron["trainer"] = {"tensor_model_parallel_size": 2}
    assert _errors(toy, megatron) == []


def test_unknown_keys_and_ranges_are_rejected_where_they_are(toy: Draft7Validator) -> None:
    errors = _errors(toy, {"runtime": {"output_dir": "/o", "smaple_per_episode": 8}})
    assert errors == ["runtime: Additional properties are not allowed ('smaple_per_episode' was unexpected)"]
    assert _errors(toy, {"runtime": {"output_dir": "/o", "sample_per_episode": 0}})
    assert _errors(toy, {"rewards": {"acc": {"kind": "function"}}})  # path is required


def test_interpolated_defaults_stay_as_written(toy: Draft7Validator) -> None:
    rollout = toy.schema["definitions"]["ToyRollout"]["properties"]["num_gpu"]
    assert rollout["default"] == "${trainer.num_gpu}"
