"""Compiled section schemas kept between runs (rlcfg.schema.compiled): a run that finds them checks a config exactly
as one that builds them, never runs what a cache file names, and survives a broken cache."""

from __future__ import annotations

import functools
import json
import marshal
import os
import subprocess
import sys
import zlib

import pytest

from rlcfg import schema
from rlcfg.schema import compiled
from tests.helpers import ROOT, TEMPLATES, cli

# Runs `rlcfg validate ARGS` in-process, as the console script would, and reports how many sections pydantic had
# to build from their annotations (complete_model_class) instead of loading them.
PROBE = """
import json, sys
import pydantic._internal._model_construction as construction
built = []
original = construction.complete_model_class
def counting(cls, *args, **kwargs):
    built.append(cls.__name__)
    return original(cls, *args, **kwargs)
construction.complete_model_class = counting
sys.argv = ["rlcfg", "validate", *sys.argv[1:]]
from rlcfg.cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code
print("PROBE " + json.dumps({"code": code, "built": built}))
"""


def probe(cache, *args: str) -> tuple[str, dict]:
    env = {**os.environ, "NO_COLOR": "1", "RLCFG_CACHE_DIR": str(cache)}
    env.pop("RLCFG_NO_CACHE", None)
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=120)
    report, _, line = done.stdout.rpartition("PROBE ")
    assert line, done.stdout + done.stderr
    return report, json.loads(line)


def roots() -> list:
    out = []
    for name in schema.names():
        for variant, root in schema.load(name).variants().items():
            out.append(pytest.param(root, id=f"{name}-{variant}"))
    return out


@pytest.mark.parametrize("root", roots())
def test_every_root_schema_survives_the_trip_through_a_cache_file(root):
    root.model_rebuild(force=True)
    built = root.__pydantic_core_schema__
    stored = compiled.dumps(built)
    loaded = compiled.loads(stored)
    # the same schema, down to the validator functions and default factories it names
    assert compiled.encode(loaded) == compiled.encode(built)
    assert_same_objects(loaded, built)


def assert_same_objects(loaded, built, path=()):
    """The loaded schema holds the very objects the built one does (classes, functions, factories, enums), and
    plain data equal to its, except the id() in a definition reference, which names its class instead."""
    if isinstance(built, dict):
        assert isinstance(loaded, dict) and list(loaded) == list(built), path
        for key in loaded:
            assert_same_objects(loaded[key], built[key], (*path, key))
    elif isinstance(built, (list, tuple)):
        assert type(loaded) is type(built) and len(loaded) == len(built), path
        for i, (a, b) in enumerate(zip(loaded, built)):
            assert_same_objects(a, b, (*path, i))
    elif isinstance(built, str):
        assert isinstance(loaded, str) and (loaded == built or ":" in built), path
    elif isinstance(built, (int, float, bool)) or built is None:
        assert loaded == built and type(loaded) is type(built), path
    elif isinstance(built, (set, frozenset)):
        assert loaded == built and type(loaded) is type(built), path
    elif isinstance(built, functools.partial):  # made again, of the same function and arguments
        assert isinstance(loaded, functools.partial) and loaded.func is built.func, path
        assert (loaded.args, loaded.keywords) == (built.args, built.keywords), path
    else:
        assert loaded is built or loaded == built, path


@pytest.mark.parametrize("template", ["skyrl-fsdp-vllm.yaml", "areal-fsdp-sglang-grpo.yaml", "roll-fsdp2-vllm.yaml",
                                      "rlinf-megatron-sglang.yaml"])
def test_a_second_run_loads_the_schemas_and_reports_the_same(tmp_path, template):
    first_report, first = probe(tmp_path, str(TEMPLATES / template), "--format", "json")
    assert first["built"], "the first run builds its sections"
    assert any(tmp_path.rglob("*" + compiled.SUFFIX)), "and keeps their schemas"
    second_report, second = probe(tmp_path, str(TEMPLATES / template), "--format", "json")
    assert second["built"] == []
    assert (second_report, second["code"]) == (first_report, first["code"])


def test_a_cached_run_reports_errors_exactly_as_a_fresh_one(tmp_path):
    args = (str(TEMPLATES / "roll-fsdp2-vllm.yaml"), "rollout_batch_size=-3", "actor_train.bogus=1",
            "actor_infer.generating_args.temperature=hot")
    fresh = cli("validate", *args, env={"RLCFG_NO_CACHE": "1"})
    cli("validate", *args, env={"RLCFG_CACHE_DIR": str(tmp_path)})
    cached = cli("validate", *args, env={"RLCFG_CACHE_DIR": str(tmp_path)})
    assert fresh.returncode == cached.returncode == 1
    assert cached.stdout == fresh.stdout


def test_rlcfg_no_cache_writes_nothing(tmp_path):
    result = cli("validate", str(TEMPLATES / "skyrl-fsdp-vllm.yaml"),
                 env={"RLCFG_CACHE_DIR": str(tmp_path), "RLCFG_NO_CACHE": "1"})
    assert result.returncode == 0
    assert not any(tmp_path.rglob("*" + compiled.SUFFIX))


def cache_file(data, links=()) -> bytes:
    body = marshal.dumps((data, list(links)))
    return compiled.FORMAT + zlib.crc32(body).to_bytes(4, "big") + body


MODEL = {"type": "model", "cls": None, "schema": {"type": "model-fields", "fields": {}}}
HOSTILE = {
    "not a cache file": b"{not json",
    "an empty file": b"",
    "a truncated file": cache_file(MODEL)[:-3],
    "a damaged file": cache_file(MODEL).replace(b"model-fields", b"model-fieldz"),
    "a file of an older format": b"rlcfg compiled schema 1\n" + cache_file(MODEL)[len(compiled.FORMAT):],
    "a name outside rlcfg": cache_file(MODEL, [(("cls",), {"$name": "os:system"})]),
    "a name that does not resolve": cache_file(MODEL, [(("cls",), {"$name": "rlcfg.dialects.skyrl.models:NoSuchSection"})]),
    "a link to a value that is no placeholder": cache_file({**MODEL, "cls": "x"},
                                                          [(("cls",), {"$name": "rlcfg.dialects.skyrl.models:Trainer"})]),
    "an unknown tag": cache_file(MODEL, [(("cls",), {"$eval": "1"})]),
    "not a schema": cache_file([]),
    "another section's schema": cache_file(MODEL, [(("cls",), {"$name": "rlcfg.dialects.skyrl.models:Trainer"})]),
}


@pytest.mark.parametrize("content", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_broken_or_hostile_cache_file_is_rebuilt_and_runs_nothing(tmp_path, content):
    probe(tmp_path, str(TEMPLATES / "skyrl-fsdp-vllm.yaml"))
    [stored] = [p for p in tmp_path.rglob("*" + compiled.SUFFIX)]
    stored.write_bytes(content)
    report, found = probe(tmp_path, str(TEMPLATES / "skyrl-fsdp-vllm.yaml"))
    assert found["code"] == 0 and "valid skyrl config" in report
    assert found["built"] == ["SkyRLConfig"]  # built again, from the annotations
    assert compiled.loads(stored.read_bytes())["type"] in ("model", "definitions")  # and kept again


def test_names_resolve_only_to_loaded_rlcfg_and_pydantic_objects():
    for name in ("os:system", "builtins:eval", "subprocess:run", "rlcfg.schema.base:__builtins__.eval",
                 "rlcfg.never_imported:thing"):
        with pytest.raises((LookupError, AttributeError)):
            compiled._resolve(name)


def test_what_a_new_process_could_not_find_again_is_not_kept():
    with pytest.raises(compiled.Uncacheable):
        compiled.encode({"type": "function-plain", "function": {"type": "no-info", "function": lambda v: v}})


def test_old_cache_folders_are_pruned(tmp_path, monkeypatch):
    base = tmp_path / "schemas"
    for age in range(compiled.KEPT_FOLDERS + 3):
        folder = base / f"old{age}"
        folder.mkdir(parents=True)
        (folder / "MANIFEST").write_text("an older rlcfg")
        os.utime(folder / "MANIFEST", (1_000_000 + age, 1_000_000 + age))
    (base / "not-a-cache").mkdir()
    monkeypatch.setenv("RLCFG_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("RLCFG_NO_CACHE", raising=False)
    compiled._checked_folder.cache_clear()
    current = compiled.folder()
    left = sorted(p.name for p in base.iterdir())
    assert os.path.basename(current) in left
    assert len([name for name in left if name.startswith("old")]) == compiled.KEPT_FOLDERS - 1
    assert "old0" not in left and f"old{compiled.KEPT_FOLDERS + 2}" in left  # the oldest go first
    assert "not-a-cache" in left
    compiled._checked_folder.cache_clear()


def test_a_cache_file_keeps_what_validation_needs_and_not_the_json_schema_hints():
    schema = {"type": "model", "cls": schema_root(), "metadata": {"pydantic_js_updates": {"description": "x"}},
              "schema": {"type": "model-fields", "metadata": {}, "fields": {
                  "metadata": {"type": "model-field", "metadata": {"js": 1},
                               "schema": {"type": "default", "default": {"type": "cosine", "metadata": [1]},
                                          "schema": {"type": "any"}}}}}}
    stored, _ = compiled.encode(schema, validation_only=True)
    assert "metadata" not in stored and "metadata" not in stored["schema"]
    field = stored["schema"]["fields"]["metadata"]  # a field may be called `metadata`
    assert "metadata" not in field
    assert field["schema"]["default"] == {"type": "cosine", "metadata": [1]}  # and a default may hold one: data


def schema_root():
    return next(iter(schema.load("skyrl").variants().values()))


JSON_SCHEMAS = """
import json, sys
from rlcfg import schema
from rlcfg.frontend import check_file
for template in sys.argv[1:]:
    check_file(template)  # installs every section it validates from the cache, when there is one
print(json.dumps({f"{name}:{variant}": root.model_json_schema() for name in schema.names()
                  for variant, root in schema.load(name).variants().items()}, sort_keys=True))
"""


def test_sections_installed_from_the_cache_still_give_their_full_json_schema(tmp_path):
    # The cache leaves out the descriptions and the rest of what JSON Schema generation reads: after a cached check,
    # in the same process, `rlcfg schema` and the docs must still see all of it.
    templates = [str(TEMPLATES / name) for name in ("skyrl-fsdp-vllm.yaml", "areal-fsdp-sglang-grpo.yaml",
                                                    "areal-rw.yaml", "roll-fsdp2-vllm.yaml",
                                                    "rlinf-megatron-sglang.yaml", "chatlearn-fsdp-vllm.yaml")]
    outputs = []
    for extra in ({"RLCFG_CACHE_DIR": str(tmp_path)}, {"RLCFG_CACHE_DIR": str(tmp_path)}, {"RLCFG_NO_CACHE": "1"}):
        env = {key: value for key, value in os.environ.items() if key not in ("RLCFG_NO_CACHE", "RLCFG_CACHE_DIR")}
        done = subprocess.run([sys.executable, "-c", JSON_SCHEMAS, *templates], capture_output=True, text=True,
                              cwd=ROOT, env={**env, **extra}, timeout=300)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    assert any(tmp_path.rglob("*" + compiled.SUFFIX))
    assert outputs[1] == outputs[2]  # the second run found every section in the cache
    assert outputs[0] == outputs[2]


def test_an_enum_member_comes_back_as_itself_not_as_its_value():
    from rlcfg.diagnostics import Severity

    schema = {"type": "model", "cls": schema_root(), "schema": {
        "type": "literal", "expected": [Severity.ERROR, "error", 3], "default": (Severity.NOTE, 1)}}
    loaded = compiled.loads(compiled.dumps(schema))
    expected, default = loaded["schema"]["expected"], loaded["schema"]["default"]
    assert expected[0] is Severity.ERROR and type(expected[1]) is str and expected[1:] == ["error", 3]
    assert type(default) is tuple and default[0] is Severity.NOTE and default[1] == 1
    assert loaded["cls"] is schema_root()


DUMP = """
import sys
from rlcfg.frontend import check_file
from rlcfg.schema.base import Section
result = check_file(sys.argv[1], sys.argv[2:], env={"HOME": "/home/user"})
assert result.ok, result.diagnostics
sections, pending = 0, [result.config]
while pending:
    section = pending.pop()
    stand_in = type(section).__pydantic_serializer__
    if hasattr(type(stand_in), "rebuild"):  # pydantic rebuilds it so when a model that holds it is built
        stand_in.rebuild(parent_namespace_depth=2)
    section.model_dump()  # what the lowerings and `rlcfg plan` do; the serializer is built here, from the cache
    sections += 1
    pending.extend(v for v in vars(section).values() if isinstance(v, Section))
print(sections)
"""


def test_sections_installed_from_the_cache_can_be_dumped(tmp_path):
    # pydantic asks the stand-in serializer to rebuild itself with options of its own (parent_namespace_depth, from
    # 2.14 on); a section from the cache must dump as a freshly built one does.
    env = {key: value for key, value in os.environ.items() if key not in ("RLCFG_NO_CACHE", "RLCFG_CACHE_DIR")}
    for _ in range(2):  # the first run fills the cache, the second installs from it
        # RLinf's FSDP section: its lowering dumps it (an open section the cache installs with a stand-in serializer).
        done = subprocess.run([sys.executable, "-c", DUMP, str(TEMPLATES / "rlinf-megatron-sglang.yaml"),
                               "actor.training_backend=fsdp", "++actor.fsdp_config.mixed_precision.param_dtype=bf16"],
                              capture_output=True, text=True, cwd=ROOT, env={**env, "RLCFG_CACHE_DIR": str(tmp_path)},
                              timeout=300)
        assert done.returncode == 0, done.stderr
        assert int(done.stdout) > 5
