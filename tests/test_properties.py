"""Property tests for the front end: whatever a user writes, rlcfg answers with a validated config or with
diagnostics, never with an exception; and override values survive being printed and parsed again."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rlcfg import schema
from rlcfg.diagnostics import CODES, Diagnostic
from rlcfg.frontend import check_text
from rlcfg.source.overrides import parse_hydra_value
from rlcfg.source.yaml_loader import load_yaml
from tests.helpers import TEMPLATES

TEMPLATE_FILES = sorted(TEMPLATES.glob("*.yaml"))
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def examples(n: int) -> int:
    """`n` under the default profile, which keeps hypothesis's default of 100 examples a test; more under `fuzz`,
    in proportion to its own max_examples (tests/conftest.py)."""
    return max(1, n * settings.default.max_examples // 100)


def _template_data() -> list[tuple[str, str, dict]]:
    out = []
    for path in TEMPLATE_FILES:
        text = path.read_text()
        tree, _ = load_yaml(text, path.name)
        if tree is not None:
            out.append((path.name, text, tree.data))
    return out


TEMPLATES_DATA = _template_data()


def assert_only_diagnostics(result) -> None:
    for d in result.diagnostics:
        assert isinstance(d, Diagnostic)
        assert d.code in CODES, d.code
        assert d.message
        assert d.origin is not None or d.path, d
    if result.config is not None:
        assert result.errors == 0


# ---- strategies ---------------------------------------------------------------------------------------------

weird_strings = st.sampled_from([
    "", " ", "${", "}", "${}", "${a.b", "${oc.env:NOPE}", "${oc.env:HOME,x}", "${..x}", "???", "null", "~", "yes",
    "1e-6", "nan", "inf", "-.inf", "0x1F", "'", '"', "\\", "\t", "\n", "a: b", "- x", "[1, 2", "{a: 1", "*alias",
    "&anchor", "!!python/object:os.system", "%YAML", "@", "`", "é", "\u202e", "\x00", "a" * 300, "#comment",
    "${oc.select:x,1}", "${oc.decode:'[1'}", "${subtract:1,2}", "1,2", "[]", "{}", "--", "=", "a=b",
    "9" * 5000, "[" * 300, "{a: " * 150, "${x}" * 50, "-" + "1" * 4400, "1_000_000", "+inf", "0o17", ".5e+3",
])
scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(), st.integers(min_value=-(10 ** 40), max_value=10 ** 40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20), weird_strings,
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=3)), max_leaves=6)


def _paths(node, prefix=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield prefix + (key,)
            yield from _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield prefix + (index,)
            yield from _paths(value, prefix + (index,))


def _copy(node):
    if isinstance(node, dict):
        return {k: _copy(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_copy(v) for v in node]
    return node


@st.composite
def mutated(draw):
    name, _text, data = draw(st.sampled_from(TEMPLATES_DATA))
    data = _copy(data)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        paths = list(_paths(data))
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = data
        for part in path[:-1]:
            parent = parent[part]
        key = path[-1]
        action = draw(st.sampled_from(["delete", "rename", "retype", "scalar", "value"]))
        if action == "delete":
            del parent[key]
        elif action == "rename" and isinstance(parent, dict):
            new = draw(st.one_of(st.text(min_size=1, max_size=12), st.sampled_from([key + "s", key[:-1] or "x", key.upper()])))
            parent[new] = parent.pop(key)
        elif action == "retype":
            current = parent[key]
            parent[key] = (str(current) if not isinstance(current, str) else draw(st.sampled_from([0, 1.5, True, None, [current], {"x": current}])))
        elif action == "scalar":
            parent[key] = draw(scalars)
        else:
            parent[key] = draw(values)
    return name, data


def _dump(data) -> str:
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.allow_unicode = True
    buffer = io.StringIO()
    yaml.dump(data, buffer)
    return buffer.getvalue()


def hydra_text(value) -> str:
    """A value as a Hydra override would spell it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, list):
        return "[" + ", ".join(hydra_text(v) for v in value) + "]"
    return "{" + ", ".join(f"{hydra_text(str(k))}: {hydra_text(v)}" for k, v in value.items()) + "}"


def _grammar(name: str) -> str:
    dialect = next((e.name for e in schema.entries() if name.startswith(e.name)), None)
    return schema.load(dialect).override_grammar if dialect else "hydra"


override_keys = st.one_of(
    st.sampled_from(["runtime_args.num_episode", "models.policy.num_gpu", "trainer.epochs", "generator.n_samples_per_prompt",
                     "trainer.placement.colocate_all", "actor.lr", "nope.nope", "a", "runtime_args"]),
    st.text(alphabet="abcdefghij._-+~[]0123", min_size=1, max_size=15))


@st.composite
def overrides(draw):
    out = []
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        prefix = draw(st.sampled_from(["", "", "+", "++", "~"]))
        key = draw(override_keys)
        if prefix == "~" and draw(st.booleans()):
            out.append(f"~{key}")
            continue
        raw = draw(st.one_of(st.builds(hydra_text, values), weird_strings, st.text(max_size=15)))
        out.append(f"{prefix}{key}={raw}")
    return out


# ---- properties ---------------------------------------------------------------------------------------------

pytestmark = pytest.mark.skipif(not TEMPLATES_DATA, reason="no templates to mutate")


def _roll_with(path: tuple, value) -> tuple[str, dict]:
    """The ROLL template's data with `value` at `path` (an example the fuzzer once found)."""
    name, _text, data = next((t for t in TEMPLATES_DATA if t[0] == "roll-fsdp2-vllm.yaml"), ("x", "", {}))
    data = _copy(data)
    node = data
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value
    return name, data


# issue #25: a second malformed interpolation in one list escaped as OmegaConf's GrammarParseError
@example(_roll_with(("rewards", "math_rule", "tag_included"), ["math", ["${a.}", "${}"]]), [])
@example(_roll_with(("seed",), 1), ["+notes=[[1, '${}', '${[}'], '${pretrain}']"])
@settings(max_examples=examples(40), **SETTINGS)
@given(mutated(), overrides())
def test_mutated_templates_give_only_diagnostics(case, extra):
    name, data = case
    text = _dump(data)
    result = check_text(text, name, extra, env={"HOME": "/home/user"})
    assert_only_diagnostics(result)


@settings(max_examples=examples(25), **SETTINGS)
@given(st.sampled_from(TEMPLATES_DATA or [("x", "", {})]), st.data())
def test_template_text_edits_give_only_diagnostics(template, data):
    name, text, _ = template
    lines = text.splitlines()
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        index = data.draw(st.integers(min_value=0, max_value=max(len(lines) - 1, 0)))
        edit = data.draw(st.sampled_from(["delete", "duplicate", "indent", "dedent", "tab", "junk", "truncate"]))
        if not lines:
            break
        if edit == "delete":
            del lines[index]
        elif edit == "duplicate":
            lines.insert(index, lines[index])
        elif edit == "indent":
            lines[index] = "  " + lines[index]
        elif edit == "dedent":
            lines[index] = lines[index][1:]
        elif edit == "tab":
            lines[index] = "\t" + lines[index]
        elif edit == "junk":
            lines[index] += data.draw(weird_strings)
        else:
            lines[index] = lines[index][: len(lines[index]) // 2]
    result = check_text("\n".join(lines) + "\n", name, env={})
    assert_only_diagnostics(result)


@settings(max_examples=examples(80), **SETTINGS)
@given(st.text(max_size=200))
def test_arbitrary_text_gives_only_diagnostics(text):
    assert_only_diagnostics(check_text(text, "random.yaml", env={}))


@settings(max_examples=examples(10), **SETTINGS)
@given(st.sampled_from(TEMPLATES_DATA or [("x", "", {})]), overrides())
def test_random_overrides_in_each_grammar_give_only_diagnostics(template, extra):
    name, text, _ = template
    for grammar_dialect in {None, *schema.names()}:
        try:
            result = check_text(text, name, extra, dialect=grammar_dialect, env={})
        except Exception as exc:  # only the usage error of a dialect that does not exist is allowed
            raise AssertionError(f"{type(exc).__name__}: {exc}") from exc
        assert_only_diagnostics(result)


hydra_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=12), weird_strings),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=10)


@settings(max_examples=examples(300), **SETTINGS)
@given(hydra_values)
def test_hydra_values_round_trip(value):
    assert parse_hydra_value(hydra_text(value)) == value


override_chars = st.sampled_from(list("ab.=+~[]{}:,'\"$\\ _-0129") + ["${", "}", "oc.env:", "\n", "é"])


@settings(max_examples=examples(60), **SETTINGS)
@given(st.sampled_from(TEMPLATES_DATA or [("x", "", {})]), st.lists(
    st.lists(override_chars, max_size=30).map("".join), min_size=1, max_size=3))
def test_free_form_override_strings_give_only_diagnostics(template, extra):
    name, text, _ = template
    assert_only_diagnostics(check_text(text, name, extra, env={}))


@settings(max_examples=examples(40), **SETTINGS)
@given(st.sampled_from(TEMPLATES_DATA or [("x", "", {})]), st.data())
def test_byte_level_mutations_of_whole_files_give_only_diagnostics(template, data):
    """Flipped, inserted and deleted characters anywhere in a real config, as a damaged copy or a bad paste
    would leave it."""
    name, text, _ = template
    chars = list(text)
    for _ in range(data.draw(st.integers(min_value=1, max_value=8))):
        if not chars:
            break
        at = data.draw(st.integers(min_value=0, max_value=len(chars) - 1))
        action = data.draw(st.sampled_from(["flip", "insert", "delete"]))
        if action == "delete":
            del chars[at]
        else:
            new = data.draw(st.sampled_from(list(":-[]{}$'\"#&*!|>%@` \t\n0a9.,?") + ["${", "\u00e9"]))
            if action == "flip":
                chars[at] = new
            else:
                chars.insert(at, new)
    assert_only_diagnostics(check_text("".join(chars), name, env={}))


def test_the_default_profile_draws_the_same_examples_on_every_run():
    # issue #25: randomized draws made CI pass or fail by chance; `HYPOTHESIS_PROFILE=fuzz` explores on purpose
    import os

    if os.environ.get("HYPOTHESIS_PROFILE", "ci") != "ci":
        pytest.skip("another hypothesis profile was chosen")
    assert settings.default.derandomize and settings.default.database is None and settings.default.deadline is None
