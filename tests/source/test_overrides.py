"""Command-line overrides: Hydra's grammar (SkyRL and the other Hydra dialects) and OmegaConf's dotlist
(ChatLearn), parsing and applying, with the origin each override leaves behind."""

from __future__ import annotations

import math

import pytest

from rlcfg.source.overrides import apply_overrides, parse_hydra_value, parse_override
from rlcfg.source.yaml_loader import load_yaml


def hydra(text: str, index: int = 1):
    override, problem = parse_override(text, index, "hydra")
    assert problem is None, problem and problem.message
    return override


def hydra_error(text: str):
    override, problem = parse_override(text, 1, "hydra")
    assert override is None, f"{text!r} parsed as {override}"
    assert problem.code == "RLC104" and problem.severity.value == "error"
    assert problem.origin.kind == "override" and problem.origin.override_text == text
    assert problem.hint
    return problem


def dotlist(text: str):
    override, problem = parse_override(text, 1, "dotlist")
    assert problem is None, problem and problem.message
    return override


# ---- Hydra: keys and operations -----------------------------------------------------------------------------


@pytest.mark.parametrize("text, op, path, value", [
    ("a.b=c", "set", ("a", "b"), "c"),
    ("+a.b=c", "add", ("a", "b"), "c"),
    ("++a.b=c", "force", ("a", "b"), "c"),
    ("trainer.policy.optimizer_config.lr=1e-6", "set", ("trainer", "policy", "optimizer_config", "lr"), 1e-6),
    ("a.b-c_d=1", "set", ("a", "b-c_d"), 1),
    ("a=b=c", "set", ("a",), "b=c"),
])
def test_hydra_operations(text, op, path, value):
    o = hydra(text)
    assert (o.op, o.path, o.value, o.has_value) == (op, path, value, True)


def test_hydra_delete_with_and_without_value():
    o = hydra("~a.b")
    assert (o.op, o.path, o.has_value) == ("delete", ("a", "b"), False)
    o = hydra("~a.b=3")
    assert (o.op, o.path, o.value, o.has_value) == ("delete", ("a", "b"), 3, True)


def test_override_origin_records_index_and_text():
    o = hydra("trainer.epochs=3", index=4)
    assert o.origin.kind == "override"
    assert (o.origin.override_index, o.origin.override_text) == (4, "trainer.epochs=3")
    assert o.origin.describe() == "<override 4: trainer.epochs=3>"


# ---- Hydra: values ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw, expected", [
    ("null", None),
    ("NULL", None),
    ("true", True),
    ("False", False),
    ("10", 10),
    ("-3", -3),
    ("+3", 3),
    ("1_000", 1000),
    ("1e-6", 1e-6),
    ("-1.5", -1.5),
    (".5", 0.5),
    ("1.", 1.0),
    ("inf", math.inf),
    ("-inf", -math.inf),
    ("fsdp2", "fsdp2"),
    ("/data/gsm8k/train.parquet", "/data/gsm8k/train.parquet"),
    ("Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct"),
    ("http://localhost:8000", "http://localhost:8000"),
    (" spaced words ", "spaced words"),
    ("", ""),
    ("[]", []),
    ("{}", {}),
    ("[1,2,3]", [1, 2, 3]),
    ("[1, [2, 3], []]", [1, [2, 3], []]),
    ("[a b, c]", ["a b", "c"]),
    ("{x: 1, y: [2, 3]}", {"x": 1, "y": [2, 3]}),
    ("{x: {y: {z: null}}}", {"x": {"y": {"z": None}}}),
    ("{'a key': 1}", {"a key": 1}),
    ("'a,b'", "a,b"),
    ('"a,b=[c]"', "a,b=[c]"),
    ("'10'", "10"),
    ("'true'", "true"),
    ("'it\\'s'", "it's"),
    ('"say \\"hi\\""', 'say "hi"'),
    ("['x,y', \"z\"]", ["x,y", "z"]),
    ("${trainer.batch}", "${trainer.batch}"),
    ("pre-${a.b}-post", "pre-${a.b}-post"),
    ("${oc.env:HOME,/tmp}", "${oc.env:HOME,/tmp}"),
    ("[${a}, ${b}]", ["${a}", "${b}"]),
])
def test_hydra_values(raw, expected):
    assert parse_hydra_value(raw) == expected
    assert type(parse_hydra_value(raw)) is type(expected)


def test_hydra_nan():
    assert math.isnan(parse_hydra_value("nan"))


@pytest.mark.parametrize("text, words", [
    ("a=1,2", ["sweep", "[1,2]"]),
    ("a=x,y,z", ["sweep"]),
    ("a=[1,2", ["`]`"]),
    ("a=[[1,2]", ["`]`"]),
    ("a={x: 1", ["`}`"]),
    ("a={x 1}", ["`:`"]),
    ("a='abc", ["unterminated"]),
    ('a="abc', ["unterminated"]),
    ("a=${b.c", ["${"]),
    ("a=[1,]", ["expected a value"]),
    ("a=x'y", ["unexpected"]),
])
def test_hydra_malformed_values(text, words):
    problem = hydra_error(text)
    for word in words:
        assert word in problem.message


@pytest.mark.parametrize("text, word", [
    ("a.b", "no `=`"),
    ("+a.b", "no `=`"),
    ("=3", "not a dotted key"),
    ("1a=3", "not a dotted key"),
    ("a..b=3", "not a dotted key"),
    ("a b=3", "not a dotted key"),
    ("model@trainer=x", "config group"),
])
def test_hydra_malformed_keys(text, word):
    assert word in hydra_error(text).message


# ---- dotlist (ChatLearn) ------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, value", [
    ("a.b=c", "c"),
    ("a=1e-6", 1e-6),
    ("a=yes", True),
    ("a=8", 8),
    ("a='8'", "8"),
    ("a=null", None),
    ("a=[1, 2]", [1, 2]),
    ("a={x: 1}", {"x": 1}),
    ("a=1,2", "1,2"),  # no sweeps in a dotlist: the value is YAML, and `1,2` is a plain string there
    ("a=${runtime_args.x}", "${runtime_args.x}"),
    ("a=", ""),
])
def test_dotlist_values_are_read_as_yaml(text, value):
    o = dotlist(text)
    assert o.op == "set" and o.value == value and type(o.value) is type(value)


@pytest.mark.parametrize("text", ["+a.b=1", "++a.b=1", "~a.b", "~a.b=1"])
def test_dotlist_rejects_hydra_prefixes_with_a_hint(text):
    override, problem = parse_override(text, 2, "dotlist")
    assert override is None
    assert problem.code == "RLC104"
    assert "Hydra" in problem.message
    assert "key=value" in problem.hint
    assert problem.origin.override_index == 2


@pytest.mark.parametrize("text", ["a=[1,", "a={x: 1", "a=@x", "a=*alias", "a=!!python/object:os.system x"])
def test_dotlist_malformed_yaml(text):
    override, problem = parse_override(text, 1, "dotlist")
    assert override is None and problem.code == "RLC104" and "YAML" in problem.message


# ---- applying -----------------------------------------------------------------------------------------------


def tree_of(text: str):
    tree, diagnostics = load_yaml(text, "cfg.yaml")
    assert diagnostics == []
    return tree


BASE = "trainer:\n  epochs: 1\n  extra:\n    a: 1\n  items: [1, 2]\n"


def apply(*texts: str, grammar: str = "hydra", base: str = BASE):
    tree = tree_of(base)
    overrides = [parse_override(t, i, grammar)[0] for i, t in enumerate(texts, start=1)]
    return tree, apply_overrides(tree, overrides, grammar)


def test_set_changes_a_value_and_records_its_origin():
    tree, applied = apply("trainer.epochs=3")
    assert applied.diagnostics == [] and applied.created == {}
    assert tree.data["trainer"]["epochs"] == 3
    origin = tree.origin(("trainer", "epochs"))
    assert origin.kind == "override" and origin.override_index == 1 and origin.override_text == "trainer.epochs=3"


def test_history_has_one_layer_per_override():
    tree, _ = apply("trainer.epochs=3", "trainer.epochs=5")
    layers = tree.history[("trainer", "epochs")]
    assert [layer.value for layer in layers] == [1, 3, 5]
    assert [layer.origin.kind for layer in layers] == ["file", "override", "override"]
    assert [layer.origin.override_index for layer in layers[1:]] == [1, 2]
    assert tree.data["trainer"]["epochs"] == 5


def test_set_of_a_mapping_gives_every_leaf_the_override_origin():
    tree, _ = apply("trainer.extra={b: {c: 2}}")
    assert tree.data["trainer"]["extra"] == {"b": {"c": 2}}
    assert tree.origin(("trainer", "extra", "b", "c")).override_index == 1
    assert not tree.has(("trainer", "extra", "a"))


def test_plain_set_of_a_missing_key_is_recorded_as_created():
    # The front end turns this into RLC105 unless the schema already calls the key unknown (RLC102).
    tree, applied = apply("trainer.extra.b=2")
    assert applied.diagnostics == []
    assert list(applied.created) == [("trainer", "extra", "b")]
    assert tree.data["trainer"]["extra"] == {"a": 1, "b": 2}


def test_dotlist_set_of_a_missing_key_is_not_flagged():
    # OmegaConf's dotlist adds keys freely; the schema decides whether they are known.
    _, applied = apply("trainer.extra.b=2", grammar="dotlist")
    assert applied.diagnostics == [] and applied.created == {}


def test_add_of_an_existing_key_is_an_error():
    tree, applied = apply("+trainer.epochs=3")
    (d,) = applied.diagnostics
    assert d.code == "RLC105" and d.path == "trainer.epochs" and d.origin.override_index == 1
    assert "already exists" in d.message and "trainer.epochs=" in d.hint
    assert tree.data["trainer"]["epochs"] == 1


def test_add_of_a_new_key():
    tree, applied = apply("+trainer.extra.b=2")
    assert applied.diagnostics == [] and applied.created == {}
    assert tree.data["trainer"]["extra"]["b"] == 2


def test_add_creates_missing_parents():
    tree, applied = apply("+trainer.extra.deep.er=2")
    assert applied.diagnostics == []
    assert tree.data["trainer"]["extra"]["deep"] == {"er": 2}
    assert tree.origin(("trainer", "extra", "deep")).kind == "override"


def test_force_sets_either_way():
    tree, applied = apply("++trainer.epochs=4", "++trainer.extra.z=1")
    assert applied.diagnostics == [] and applied.created == {}
    assert tree.data["trainer"]["epochs"] == 4 and tree.data["trainer"]["extra"]["z"] == 1


def test_delete():
    tree, applied = apply("~trainer.extra")
    assert applied.diagnostics == []
    assert "extra" not in tree.data["trainer"]
    assert ("trainer", "extra", "a") not in tree.values


def test_delete_of_a_missing_key_is_an_error():
    _, applied = apply("~trainer.nope")
    (d,) = applied.diagnostics
    assert d.code == "RLC105" and d.path == "trainer.nope" and d.origin.override_text == "~trainer.nope"


def test_delete_with_a_value_checks_the_value():
    tree, applied = apply("~trainer.epochs=1")
    assert applied.diagnostics == [] and "epochs" not in tree.data["trainer"]
    tree, applied = apply("~trainer.epochs=2")
    (d,) = applied.diagnostics
    assert d.code == "RLC105" and "1" in d.message
    assert tree.data["trainer"]["epochs"] == 1


def test_set_below_a_scalar_is_an_error():
    tree, applied = apply("trainer.epochs.x=1")
    (d,) = applied.diagnostics
    assert d.code == "RLC105" and "not a mapping" in d.message
    assert tree.data["trainer"]["epochs"] == 1


def test_every_override_is_applied_and_every_problem_reported():
    tree, applied = apply("~trainer.nope", "trainer.epochs=7", "+trainer.epochs=1")
    assert [d.origin.override_index for d in applied.diagnostics] == [1, 3]
    assert tree.data["trainer"]["epochs"] == 7


# ---- through the front end ----------------------------------------------------------------------------------


TOY = "trainer:\n  batch: 8\n  extra:\n    a: 1\n"


def codes(result):
    return [(d.code, d.path) for d in result.diagnostics]


def test_front_end_set_of_a_key_the_schema_does_not_know_is_one_unknown_key(toy):
    from rlcfg.frontend import check_text

    result = check_text(TOY, "t.yaml", ["trainer.epoch=3"], dialect="toy", env={})
    assert codes(result) == [("RLC102", "trainer.epoch")]
    assert result.diagnostics[0].origin.describe() == "<override 1: trainer.epoch=3>"
    assert "epochs" in result.diagnostics[0].hint  # did-you-mean, never "use +"
    assert "+" not in result.diagnostics[0].hint


def test_front_end_set_of_a_missing_key_in_an_open_mapping_needs_plus(toy):
    from rlcfg.frontend import check_text

    result = check_text(TOY, "t.yaml", ["trainer.extra.b=2"], dialect="toy", env={})
    assert codes(result) == [("RLC105", "trainer.extra.b")]
    assert "+trainer.extra.b=2" in result.diagnostics[0].hint
    assert check_text(TOY, "t.yaml", ["+trainer.extra.b=2"], dialect="toy", env={}).ok


def test_front_end_dotlist_dialect(toy):
    from rlcfg.frontend import check_text

    assert check_text(TOY, "t.yaml", ["trainer.extra.b=2"], dialect="dottoy", env={}).ok
    result = check_text(TOY, "t.yaml", ["+trainer.extra.b=2", "trainer.epochs=3"], dialect="dottoy", env={})
    assert codes(result) == [("RLC104", "")]
    assert result.tree.get(("trainer", "epochs")) == 3  # the good override still applies


def test_front_end_override_of_a_default_value(toy):
    from rlcfg.frontend import check_text, explain

    result = check_text(TOY, "t.yaml", ["trainer.epochs=3", "trainer.optim.lr=2e-6"], dialect="toy", env={})
    assert result.ok
    assert result.config.trainer.optim.lr == 2e-6
    story = explain(result, "trainer.epochs")
    assert [(layer.origin.kind, layer.value) for layer in story.layers] == [("default", 1), ("override", 3)]


def test_front_end_hydra_over_the_files_alone_needs_plus_for_a_default(toy):
    from rlcfg.frontend import check_text

    result = check_text(TOY, "t.yaml", ["trainer.epochs=3"], dialect="filetoy", env={})
    assert codes(result) == [("RLC105", "trainer.epochs")]
    added = check_text(TOY, "t.yaml", ["+trainer.epochs=3"], dialect="filetoy", env={})
    assert added.ok and added.config.trainer.epochs == 3
    assert check_text(TOY, "t.yaml", ["trainer.batch=16"], dialect="filetoy", env={}).ok


def test_front_end_wrong_type_from_an_override_points_at_it(toy):
    from rlcfg.frontend import check_text

    result = check_text(TOY, "t.yaml", ["trainer.optim.lr=fast"], dialect="toy", env={})
    (d,) = result.diagnostics
    assert d.code == "RLC200" and d.origin.override_index == 1


def test_front_end_reports_all_bad_overrides(toy):
    from rlcfg.frontend import check_text

    result = check_text(TOY, "t.yaml", ["a=1,2", "trainer.epochs=0", "~trainer.nope", "trainer"], dialect="toy",
                        env={})
    assert sorted(d.origin.override_index for d in result.diagnostics) == [1, 2, 3, 4]
