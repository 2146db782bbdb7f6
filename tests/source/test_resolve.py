"""Interpolation: resolved by OmegaConf, every failure a diagnostic at the `${...}`, every value with its story."""

from __future__ import annotations

import pytest

from rlcfg.source.resolve import merge_over_defaults, resolve
from rlcfg.source.yaml_loader import load_yaml


def resolved(text: str, env: dict | None = None):
    tree, diagnostics = load_yaml(text, "cfg.yaml")
    assert diagnostics == []
    result = resolve(tree, env or {})
    return tree, result


def codes(result):
    return [(d.code, d.path) for d in result.diagnostics]


# ---- what resolves ------------------------------------------------------------------------------------------


def test_absolute_relative_and_string_interpolation():
    tree, result = resolved(
        "a:\n"
        "  b: 5\n"
        "  c: ${a.b}\n"
        "  d: ${.b}\n"
        "  e:\n"
        "    f: ${..b}\n"
        "  s: run-${a.b}-of-${a.d}\n"
        "  items: [1, '${a.b}']\n"
        "  whole: ${a.e}\n")
    assert result.diagnostics == []
    a = tree.data["a"]
    assert (a["c"], a["d"], a["e"]["f"]) == (5, 5, 5)
    assert a["s"] == "run-5-of-5"
    assert a["items"] == [1, 5]
    assert a["whole"] == {"f": 5}
    assert type(a["c"]) is int  # a lone interpolation keeps the target's type


def test_env_is_the_one_passed_in_never_the_process_env(monkeypatch):
    monkeypatch.setenv("RLCFG_TEST_VAR", "from-process")
    tree, result = resolved("a: ${oc.env:RLCFG_TEST_VAR}\nb: ${oc.env:RLCFG_TEST_VAR,dflt}\n", env={})
    assert codes(result) == [("RLC107", "a")]
    assert tree.data == {"b": "dflt"}
    tree, result = resolved("a: ${oc.env:RLCFG_TEST_VAR}\n", env={"RLCFG_TEST_VAR": "given"})
    assert result.diagnostics == [] and tree.data["a"] == "given"


def test_env_default_is_used_only_when_unset():
    tree, result = resolved("a: ${oc.env:DATA,/data}\nb: ${oc.env:DATA,/data}/x\n", env={"DATA": "/mnt"})
    assert tree.data == {"a": "/mnt", "b": "/mnt/x"}
    tree, result = resolved("a: ${oc.env:DATA,/data}\nb: ${oc.env:DATA,null}\n", env={})
    assert tree.data == {"a": "/data", "b": None}


def test_oc_select_with_default():
    tree, result = resolved("a:\n  b: 1\nx: ${oc.select:a.b,7}\ny: ${oc.select:a.zz,7}\nz: ${oc.select:a.zz}\n")
    assert result.diagnostics == []
    assert (tree.data["x"], tree.data["y"], tree.data["z"]) == (1, 7, None)


def test_a_custom_resolver_of_the_dialect():
    tree, _ = load_yaml("a: ${subtract:10, 3}\n", "cfg.yaml")
    result = resolve(tree, {}, {"subtract": lambda x, y: x - y})
    assert result.diagnostics == [] and tree.data["a"] == 7


def test_list_index_interpolation():
    tree, result = resolved("x: [10, 20]\na: ${x[1]}\nb: ${x.0}\n")
    assert result.diagnostics == [] and (tree.data["a"], tree.data["b"]) == (20, 10)


def test_escaped_interpolation_stays_literal():
    tree, result = resolved("a: \\${not.resolved}\n")
    assert result.diagnostics == [] and tree.data["a"] == "${not.resolved}"


# ---- what fails ---------------------------------------------------------------------------------------------


def test_unresolved_key_with_did_you_mean_at_the_interpolation():
    tree, result = resolved("models:\n  policy:\n    load: /ckpt\n  ref:\n    load: ${models.policy.lod}\n")
    (d,) = result.diagnostics
    assert d.code == "RLC106" and d.path == "models.ref.load"
    assert d.origin.describe() == "cfg.yaml:5:11"
    assert "models.policy.lod" in d.message
    assert "models.policy.load" in d.hint
    assert not tree.has(("models", "ref", "load"))  # dropped, so later stages do not report it again


def test_unresolved_relative_key():
    _, result = resolved("a:\n  b: ${.nope}\n  nop: 1\n")
    (d,) = result.diagnostics
    assert d.code == "RLC106" and d.path == "a.b"


def test_relative_key_above_the_root():
    _, result = resolved("a: ${...b}\n")
    (d,) = result.diagnostics
    assert d.code == "RLC106" and d.origin.line == 1


def test_missing_environment_variable():
    _, result = resolved("runtime_args:\n  output_dir: ${oc.env:OUT_DIR}/run\n")
    (d,) = result.diagnostics
    assert d.code == "RLC107" and d.path == "runtime_args.output_dir"
    assert "OUT_DIR" in d.message and "OUT_DIR" in d.hint
    assert (d.origin.line, d.origin.column) == (2, 15)


def test_cycle_is_reported_once_at_its_first_member():
    tree, result = resolved("a: ${b}\nb: ${c}\nc: ${a}\nx: ${a}\n")
    (d,) = result.diagnostics
    assert d.code == "RLC108" and d.path == "a" and d.origin.line == 1
    assert "`a` -> `b` -> `c` -> `a`" in d.message
    assert sorted(path for path, _ in d.related) == ["b", "c"]
    assert tree.data == {}


def test_self_reference_and_reference_to_a_parent():
    _, result = resolved("a: x${a}\n")
    assert codes(result) == [("RLC108", "a")]
    _, result = resolved("a:\n  b: ${a}\n")
    assert codes(result) == [("RLC108", "a.b")]


def test_two_separate_cycles_are_two_diagnostics():
    _, result = resolved("a: ${b}\nb: ${a}\nc: ${d}\nd: ${c}\n")
    assert codes(result) == [("RLC108", "a"), ("RLC108", "c")]


def test_cycle_through_a_resolver():
    _, result = resolved("a: ${oc.select:b}\nb: ${a}\n")
    assert [d.code for d in result.diagnostics] == ["RLC108"]


@pytest.mark.parametrize("value", ["'${a.b'", "'${}'", "'x ${a.b} ${'", "'${.}'", "'}${x'"])
def test_malformed_interpolation(value):
    tree, result = resolved(f"k:\n  v: {value}\n")
    (d,) = result.diagnostics
    assert d.code == "RLC109" and d.path == "k.v" and d.origin.line == 2


@pytest.mark.parametrize("bad", ["${}", "${", "${foo:}", "${a.}", "${[}", "${a..b}", "x${}y", "${${}}"])
def test_malformed_interpolations_in_one_list_are_each_reported_where_written(bad):
    # Issue #25: a second malformed item in the same list escaped as OmegaConf's GrammarParseError, and the
    # valid interpolation after them was reported as unresolvable.
    quoted = bad.replace("'", "''")
    tree, result = resolved(f"x: 1\nk:\n  l: [['{quoted}', '{quoted}'], ok, '{quoted}', '${{x}}']\n")
    assert codes(result) == [("RLC109", "k.l[0][0]"), ("RLC109", "k.l[0][1]"), ("RLC109", "k.l[2]")]
    assert all(d.origin.line == 3 for d in result.diagnostics)
    assert tree.data["k"]["l"] == [[], "ok", 1]


def test_malformed_interpolation_under_a_key_with_a_dot_is_reported_there():
    # OmegaConf names the culprit `k.a.b[1]`, which does not read back as the path of key "a.b"
    _, result = resolved("k:\n  'a.b': [ok, '${}', '${', '${x}']\nx: 2\n")
    assert codes(result) == [("RLC109", "k.a.b[1]"), ("RLC109", "k.a.b[2]")]


def test_a_reference_to_a_malformed_interpolation_is_not_reported_again():
    tree, result = resolved("a: ['${}', 5]\nb: ${a[1]}\nc: ${a}\n")
    assert codes(result) == [("RLC109", "a[0]")]
    assert tree.data["b"] == 5


def test_a_string_omegaconf_refuses_that_its_parser_reads_is_one_diagnostic(monkeypatch):
    # OmegaConf releases differ in what their grammar accepts; whatever its build refuses is still a diagnostic
    from rlcfg.source import resolve as resolve_module

    monkeypatch.setattr(resolve_module, "_grammar_ok", lambda value: True)
    tree, result = resolved("x: 1\nl: [ok, '${}']\ny: ${oc.select:x}\n")
    assert codes(result) == [("RLC109", "l[1]")]
    assert "not a valid interpolation" in result.diagnostics[0].message
    assert result.unresolved == {("l", 1), ("y",)}


def test_unknown_resolver():
    _, result = resolved("a: ${subtract:3,1}\n")
    (d,) = result.diagnostics
    assert d.code == "RLC109" and "subtract" in d.message


def test_interpolation_to_a_missing_value_is_not_reported_here():
    # The missing value is reported once, where it belongs (RLC203 by the schema), not at each reference.
    tree, result = resolved("a: ???\nb: ${a}\nc: ${b}\nd: pre-${a}\n")
    assert result.diagnostics == []
    assert result.missing == {("a",)}
    assert result.unresolved >= {("b",), ("c",), ("d",)}
    assert tree.data == {}


def test_cascading_failures_are_reported_once():
    _, result = resolved("a: ${nope}\nb: ${a}\nc: x-${b}\nd:\n  e: ${a}\nf: ${d}\n")
    assert codes(result) == [("RLC106", "a")]
    _, result = resolved("a: ${oc.env:UNSET}\nb: ${a}\n")
    assert codes(result) == [("RLC107", "a")]
    _, result = resolved("a: '${broken'\nb: ${a}\n")
    assert codes(result) == [("RLC109", "a")]


def test_every_independent_failure_is_reported():
    _, result = resolved("a: ${nope}\nb: ${oc.env:UNSET}\nc: ${x:1}\nd: ${e}\ne: ${d}\nok: 1\n")
    assert sorted(d.code for d in result.diagnostics) == ["RLC106", "RLC107", "RLC108", "RLC109"]


def test_odd_resolver_arguments_are_diagnostics_not_exceptions():
    for text in ["a: ${oc.env:}\n", "a: ${oc.select:}\n", "a: ${oc.decode:'[1'}\n", "a: ${oc.dict.keys:x}\n"]:
        _, result = resolved(text)
        assert len(result.diagnostics) == 1, text
        assert result.diagnostics[0].code.startswith("RLC1")


# ---- origins ------------------------------------------------------------------------------------------------


def test_resolved_value_points_at_the_interpolation_via_the_target():
    tree, _ = resolved("a:\n  b: 5\nc: ${a.b}\n")
    origin = tree.origin(("c",))
    assert origin.describe() == "cfg.yaml:3:4"
    (via,) = origin.via
    assert via.describe() == "cfg.yaml:2:6"
    layers = tree.history[("c",)]
    assert [layer.value for layer in layers] == ["${a.b}", 5]
    assert layers[-1].origin.kind == "derived" and layers[-1].origin.via == (via,)


def test_env_origin():
    tree, _ = resolved("a: ${oc.env:HOME}\nb: ${oc.env:UNSET,x}\n", env={"HOME": "/home/me"})
    (via,) = tree.origin(("a",)).via
    assert via.kind == "env" and via.env_var == "HOME" and via.describe() == "<environment variable HOME>"
    assert tree.origin(("b",)).via == ()  # the default in the file gave the value, not the environment


def test_interpolated_default_remembers_which_default():
    user, _ = load_yaml("trainer:\n  batch: 16\n", "cfg.yaml")
    defaults = {"trainer": {"batch": 8, "micro": "${trainer.batch}", "epochs": 1}}
    merged = merge_over_defaults(defaults, user)
    result = resolve(merged, {})
    assert result.diagnostics == []
    assert merged.data["trainer"] == {"batch": 16, "micro": 16, "epochs": 1}
    micro = merged.origin(("trainer", "micro"))
    assert micro.kind == "default" and micro.default_of == "${trainer.batch}"
    assert micro.describe() == "<default ${trainer.batch}>"
    assert [v.describe() for v in micro.via] == ["cfg.yaml:2:10"]
    assert merged.origin(("trainer", "epochs")).kind == "default"
    assert [layer.origin.kind for layer in merged.history[("trainer", "batch")]] == ["default", "file"]


def test_user_value_replaces_an_interpolated_default():
    user, _ = load_yaml("trainer:\n  micro: 2\n", "cfg.yaml")
    merged = merge_over_defaults({"trainer": {"batch": 8, "micro": "${trainer.batch}"}}, user)
    resolve(merged, {})
    assert merged.data["trainer"]["micro"] == 2
    assert merged.origin(("trainer", "micro")).describe() == "cfg.yaml:2:10"


def test_failed_interpolated_default_points_at_the_default():
    user, _ = load_yaml("trainer:\n  x: 1\n", "cfg.yaml")
    merged = merge_over_defaults({"trainer": {"micro": "${trainer.batch}"}}, user)
    result = resolve(merged, {})
    (d,) = result.diagnostics
    assert d.code == "RLC106" and d.origin.kind == "default" and d.origin.default_of == "${trainer.batch}"


# ---- plain references are resolved without OmegaConf, to OmegaConf's values -----------------------------------

PLAIN_REFERENCE_CASES = [
    "a:\n  b: 5\n  c: ${a.b}\n  d: ${.b}\n  e:\n    f: ${..b}\n  s: run-${a.b}-of-${a.d}\n  items: [1, '${a.b}']\n",
    "a: {x: 1.5e-6, y: true, n: null, s: text}\nb: '${a.x}/${a.y}/${a.n}/${a.s}'\nc: ${a}\nd: ${c}\n",
    "home: ${oc.env:HOME}\nwith_default: ${oc.env:RLCFG_UNSET,/tmp/x}\nin_text: ${oc.env:HOME}/data\n",
    "m:\n  x: 2\n  k: ${n.v}\n  deep: {z: '${m.k}'}\nn:\n  v: [1, '${m.x}']\nw: ${m}\n",
    "a: 3\nb: ${a}${a}\nc: pre ${a} post\nd: ${b}\n",
]
NEEDS_OMEGACONF = [
    "a: ${b}\n",  # the target is absent: OmegaConf words the error
    "a: ${b}\nb: ${a}\n",  # a cycle
    "a: ${oc.env:RLCFG_UNSET}\n",  # an unset variable without a default
    "a: ${oc.env:RLCFG_UNSET,true}\n",  # a default the grammar types
    "a: ${oc.select:b,1}\n",  # another resolver
    "a: [1, 2]\nb: ${a.0}\n",  # a list index
    "a: {b: 1}\nc: x${a}\n",  # a mapping inside a string
    "a: ???\nb: ${a}\n",  # a missing value
]


def _both_ways(text, monkeypatch, env):
    import rlcfg.source.resolve as resolve_module

    fast_tree, _ = load_yaml(text, "cfg.yaml")
    fast = resolve(fast_tree, env)
    with monkeypatch.context() as patched:
        patched.setattr(resolve_module, "_resolve_plain_references", lambda *args: None)
        slow_tree, _ = load_yaml(text, "cfg.yaml")
        slow = resolve(slow_tree, env)
    return (fast_tree, fast), (slow_tree, slow)


@pytest.mark.parametrize("text", PLAIN_REFERENCE_CASES)
def test_plain_references_resolve_as_omegaconf_resolves_them(text, monkeypatch):
    import rlcfg.source.resolve as resolve_module

    env = {"HOME": "/home/user"}
    tree, _ = load_yaml(text, "cfg.yaml")
    interpolations = [p for p, v in resolve_module.walk(tree.data) if resolve_module._is_interpolation(v)]
    assert resolve_module._resolve_plain_references(tree.data, interpolations, env) is not None
    (fast_tree, fast), (slow_tree, slow) = _both_ways(text, monkeypatch, env)
    assert repr(fast_tree.data) == repr(slow_tree.data)
    assert fast_tree.values == slow_tree.values and fast_tree.history == slow_tree.history
    assert fast.diagnostics == slow.diagnostics == []


@pytest.mark.parametrize("text", NEEDS_OMEGACONF)
def test_other_interpolations_go_to_omegaconf(text):
    import rlcfg.source.resolve as resolve_module

    tree, _ = load_yaml(text, "cfg.yaml")
    interpolations = [p for p, v in resolve_module.walk(tree.data) if resolve_module._is_interpolation(v)]
    assert resolve_module._resolve_plain_references(tree.data, interpolations, {}) is None


def test_every_template_resolves_the_same_without_omegaconf(monkeypatch):
    from pathlib import Path

    import rlcfg.source.resolve as resolve_module
    from rlcfg.frontend import check_file

    templates = sorted((Path(__file__).resolve().parents[2] / "templates").glob("*.yaml"))
    assert templates
    env = {"HOME": "/home/user"}
    for template in templates:
        fast = check_file(str(template), env=env)
        with monkeypatch.context() as patched:
            patched.setattr(resolve_module, "_resolve_plain_references", lambda *args: None)
            slow = check_file(str(template), env=env)
        assert repr(fast.tree.data) == repr(slow.tree.data), template.name
        assert fast.tree.values == slow.tree.values, template.name
        assert [d.message for d in fast.diagnostics] == [d.message for d in slow.diagnostics], template.name


@pytest.mark.parametrize("text", [
    "a: 4096\nb: 1024\nc: ${subtract:${a}, ${b}}\nd: ${not:${e}}\ne: false\nf: run-${multiply:${b},2}\n",
    "a: 7\nb: ${int_div:${a}, 2}\nc: ${torch.dtype:${p}}\np: bf16\n",
])
def test_a_dialects_resolvers_over_plain_arguments_resolve_as_omegaconf_does(text, monkeypatch):
    import rlcfg.source.resolve as resolve_module
    from rlcfg.dialects.rlinf.resolvers import RESOLVERS

    tree, _ = load_yaml(text, "cfg.yaml")
    interpolations = [p for p, v in resolve_module.walk(tree.data) if resolve_module._is_interpolation(v)]
    assert resolve_module._resolve_plain_references(tree.data, interpolations, {}, RESOLVERS) is not None
    fast_tree, _ = load_yaml(text, "cfg.yaml")
    fast = resolve(fast_tree, {}, RESOLVERS)
    with monkeypatch.context() as patched:
        patched.setattr(resolve_module, "_resolve_plain_references", lambda *args: None)
        slow_tree, _ = load_yaml(text, "cfg.yaml")
        slow = resolve(slow_tree, {}, RESOLVERS)
    assert repr(fast_tree.data) == repr(slow_tree.data)
    assert fast_tree.values == slow_tree.values
    assert fast.diagnostics == slow.diagnostics == []


def test_a_resolver_that_refuses_its_arguments_is_left_to_omegaconf():
    import rlcfg.source.resolve as resolve_module
    from rlcfg.dialects.rlinf.resolvers import RESOLVERS

    tree, _ = load_yaml("a: 1\nb: ${int_div:${a}, 0}\nc: ${subtract:${a}, x}\n", "cfg.yaml")
    for path in [("b",), ("c",)]:
        assert resolve_module._resolve_plain_references(tree.data, [path], {}, RESOLVERS) is None
