"""The YAML loader: positions, OmegaConf's reading of scalars, and every way a file can be malformed."""

from __future__ import annotations

import time

import pytest

from rlcfg.source.yaml_loader import UsageError, load_yaml, read_text, type_plain_scalar


def load(text: str):
    tree, diagnostics = load_yaml(text, "cfg.yaml")
    return tree, diagnostics


def only(diagnostics):
    assert len(diagnostics) == 1, [d.message for d in diagnostics]
    return diagnostics[0]


# ---- positions ----------------------------------------------------------------------------------------------


def test_keys_and_values_keep_line_and_column():
    tree, diagnostics = load("runtime_args:\n  num_episode: 200\n  exp_name: 'grpo run'\nmodels:\n  policy:\n    num_gpu: 8\n")
    assert diagnostics == []
    key = tree.keys[("runtime_args", "num_episode")]
    value = tree.values[("runtime_args", "num_episode")]
    assert (key.file, key.line, key.column) == ("cfg.yaml", 2, 3)
    assert (value.line, value.column, value.end_column) == (2, 16, 19)
    quoted = tree.values[("runtime_args", "exp_name")]
    assert (quoted.line, quoted.column) == (3, 13)
    assert tree.values[("models", "policy", "num_gpu")].line == 6
    assert tree.values[("models", "policy", "num_gpu")].describe() == "cfg.yaml:6:14"


def test_list_items_have_their_own_positions():
    tree, _ = load("a:\n  - 1\n  - [x, y]\n")
    assert tree.data == {"a": [1, ["x", "y"]]}
    assert (tree.values[("a", 0)].line, tree.values[("a", 0)].column) == (2, 5)
    assert (tree.values[("a", 1, 1)].line, tree.values[("a", 1, 1)].column) == (3, 9)


def test_each_value_starts_its_history_with_the_file():
    tree, _ = load("a:\n  b: 3\n")
    (layer,) = tree.history[("a", "b")]
    assert layer.value == 3 and layer.origin.kind == "file" and layer.origin.line == 2


# ---- scalars as OmegaConf reads them ------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("1e-6", 1e-6),  # PyYAML alone reads this as a string; OmegaConf fixes it, and so do we
    ("2e-5", 2e-5),
    ("1.0e+3", 1000.0),
    ("3.5", 3.5),
    ("10", 10),
    ("1_000", 1000),
    ("-7", -7),
    (".inf", float("inf")),
    ("yes", True),
    ("on", True),
    ("True", True),
    ("no", False),
    ("off", False),
    ("null", None),
    ("~", None),
    ("2024-01-01", "2024-01-01"),  # OmegaConf leaves dates as strings
    ("12:30:00", 45000),  # YAML 1.1 sexagesimal, as OmegaConf reads it
    ("fsdp", "fsdp"),
])
def test_plain_scalars_are_typed_like_omegaconf(text, expected):
    tree, diagnostics = load(f"k: {text}\n")
    assert diagnostics == []
    value = tree.data["k"]
    assert value == expected and type(value) is type(expected)


def test_type_plain_scalar_matches_omegaconf_itself():
    from omegaconf import OmegaConf

    for text in ["1e-6", "yes", "off", "2024-01-01", "0x10", "1_000", "3.", "-.5", "NaN", "8", "null"]:
        theirs = OmegaConf.create(f"k: {text}\n")["k"]
        ours = type_plain_scalar(text)
        assert type(ours) is type(theirs) and (ours == theirs or ours != ours), text


def test_type_plain_scalar_matches_omegaconf_on_every_short_numberlike_text():
    """rlcfg types scalars without importing OmegaConf; over texts made of the characters YAML's numbers, booleans
    and nulls use, it reads each one as OmegaConf's loader does (or fails where that loader fails)."""
    import math
    import random

    import yaml
    from omegaconf._yaml import get_yaml_loader

    loader = get_yaml_loader()("")

    def theirs(text):
        tag = loader.resolve(yaml.ScalarNode, text, (True, False))
        return loader.construct_object(yaml.ScalarNode(tag, text))

    def outcome(read, text):
        try:
            value = read(text)
        except Exception:
            return "fails"
        return type(value), ("nan" if isinstance(value, float) and math.isnan(value) else value)

    shuffle = random.Random(16)
    alphabet = "0123456789_.:+-eExXbBoaINFnfyYsSlu~<="
    texts = {"".join(shuffle.choice(alphabet) for _ in range(shuffle.randint(1, 7))) for _ in range(30_000)}
    texts |= {"yes", "No", "OFF", "~", "null", "Null", "<<", "=", "0o17", "0x_1f", "-0", "+.inf", "190:20:30.15"}
    # the forms type_plain_scalar reads without the grammar's patterns, and their near misses
    texts |= {"8", "1024", "+12", "0", "00", "007", "0.5", "-0.5", "01.5", "1.", "1e-6", "1E5", "1e+5", "1.e5",
              "3.0e+2", "1.0e-06", "1e", "1e+", ".5", "-.5", "1..2", "1.2.3", "1e5e5", "9" * 40, "1." + "0" * 40}
    differ = [t for t in sorted(texts) if outcome(type_plain_scalar, t) != outcome(theirs, t)]
    assert differ == []


def test_plain_yaml_special_values_are_a_diagnostic_not_a_crash():
    tree, diagnostics = load("a: =\nb: 1\n")
    d = only(diagnostics)
    assert d.code == "RLC100" and d.origin.line == 1 and "'='" in d.hint
    assert tree.data["b"] == 1


@pytest.mark.parametrize("text", ["'8'", '"1e-6"', "'yes'", '"null"', "'2024-01-01'"])
def test_quoted_scalars_stay_strings(text):
    tree, _ = load(f"k: {text}\n")
    assert isinstance(tree.data["k"], str)
    assert tree.data["k"] == text[1:-1]


def test_block_scalars_stay_strings():
    tree, _ = load("k: |\n  line one\n  42\n")
    assert tree.data["k"] == "line one\n42\n"


# ---- duplicate keys -----------------------------------------------------------------------------------------


def test_duplicate_key_is_an_error_naming_both_locations():
    tree, diagnostics = load("models:\n  policy:\n    num_gpu: 8\n    tp: 2\n    num_gpu: 4\n")
    d = only(diagnostics)
    assert d.code == "RLC101" and d.severity.value == "error"
    assert d.path == "models.policy.num_gpu"
    assert (d.origin.line, d.origin.column) == (5, 5)
    (related_path, first), = d.related
    assert related_path == "models.policy.num_gpu" and (first.line, first.column) == (3, 5)
    assert "line 3" in d.message
    assert d.hint
    # the first value is kept, so later stages still see a value
    assert tree.data["models"]["policy"]["num_gpu"] == 8


def test_same_key_in_different_mappings_is_fine():
    _, diagnostics = load("a:\n  x: 1\nb:\n  x: 2\n")
    assert diagnostics == []


def test_every_duplicate_is_reported():
    _, diagnostics = load("a: 1\na: 2\nb: 1\nb: 2\n")
    assert [d.path for d in diagnostics] == ["a", "b"]
    assert all(d.code == "RLC101" for d in diagnostics)


# ---- malformed documents ------------------------------------------------------------------------------------


def test_tab_indentation():
    tree, diagnostics = load("runtime_args:\n\tnum_episode: 200\n")
    d = only(diagnostics)
    assert tree is None
    assert d.code == "RLC100"
    assert d.origin.line == 2 and d.origin.column == 1
    assert "tab" in d.hint.lower()


def test_unclosed_bracket():
    tree, diagnostics = load("a:\n  b: [1, 2\n  c: 3\n")
    d = only(diagnostics)
    assert tree is None and d.code == "RLC100"
    # pointed at the `[` that needs closing; the message says where the parser noticed
    assert (d.origin.line, d.origin.column) == (2, 6)
    assert "line 3" in d.message
    assert "]" in d.hint


def test_unclosed_brace():
    _, diagnostics = load("a: {x: 1\n")
    d = only(diagnostics)
    assert d.code == "RLC100" and "}" in (d.hint + d.message)


def test_unclosed_quote():
    tree, diagnostics = load("a:\n  b: 'unfinished\n")
    d = only(diagnostics)
    assert tree is None and d.code == "RLC100"
    assert (d.origin.line, d.origin.column) == (2, 6)
    assert "quote" in d.hint.lower() or "quoted" in d.message


def test_bad_indentation():
    _, diagnostics = load("a:\n  b: 1\n c: 2\n")
    d = only(diagnostics)
    assert d.code == "RLC100" and d.origin.line == 3


def test_several_documents_in_one_file():
    _, diagnostics = load("a: 1\n---\nb: 2\n")
    d = only(diagnostics)
    assert d.code == "RLC100" and d.origin.line == 2 and "---" in d.hint


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "---\n"])
def test_empty_document(text):
    tree, diagnostics = load(text)
    d = only(diagnostics)
    assert tree is None and d.code == "RLC103" and "empty" in d.message
    assert d.origin.line == 1


@pytest.mark.parametrize("text, word", [("- 1\n- 2\n", "list"), ("42\n", "42"), ("just words\n", "just words")])
def test_document_that_is_not_a_mapping(text, word):
    tree, diagnostics = load(text)
    d = only(diagnostics)
    assert tree is None and d.code == "RLC103" and word in d.message
    assert d.hint


def test_non_scalar_key():
    tree, diagnostics = load("? [1, 2]\n: 3\nb: 1\n")
    d = only(diagnostics)
    assert d.code == "RLC100"
    assert tree.data == {"b": 1}


def test_byte_order_mark_is_ignored():
    tree, diagnostics = load("\ufeffa:\n  b: 1\n")
    assert diagnostics == [] and tree.data == {"a": {"b": 1}}
    assert tree.values[("a", "b")].line == 2


def test_python_tags_are_never_constructed():
    tree, diagnostics = load("a: !!python/object/apply:os.system ['echo hi']\nb: !!python/name:os.system x\n")
    assert diagnostics == []
    assert tree.data["b"] == "x"


# ---- anchors, aliases, merge keys ---------------------------------------------------------------------------


def test_anchors_aliases_and_merge_keys():
    text = ("base: &base\n  lr: 1e-6\n  num_gpu: 8\n"
            "policy:\n  <<: *base\n  num_gpu: 4\n"
            "copy: *base\n")
    tree, diagnostics = load(text)
    assert diagnostics == []
    assert tree.data["policy"] == {"num_gpu": 4, "lr": 1e-6}  # the mapping's own key wins over the merged one
    assert tree.data["copy"] == {"lr": 1e-6, "num_gpu": 8}
    # an explicit key points at the line that wrote it
    assert tree.values[("policy", "num_gpu")].line == 6


def test_merge_of_several_mappings_first_wins():
    text = "a: &a {x: 1}\nb: &b {x: 2, y: 2}\nc:\n  <<: [*a, *b]\n"
    tree, diagnostics = load(text)
    assert diagnostics == [] and tree.data["c"] == {"x": 1, "y": 2}


def test_undefined_alias():
    tree, diagnostics = load("a: *nowhere\n")
    d = only(diagnostics)
    assert tree is None and d.code == "RLC100" and "anchor" in d.hint


def test_alias_bomb_is_stopped():
    text = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    previous = "a"
    for name in "bcdefghij":
        text += f"{name}: &{name} [" + ", ".join([f"*{previous}"] * 10) + "]\n"
        previous = name
    start = time.perf_counter()
    tree, diagnostics = load(text)
    assert time.perf_counter() - start < 30
    d = only(diagnostics)
    assert tree is None and d.code == "RLC100"


def test_recursive_alias():
    tree, diagnostics = load("a: &a [1, *a]\n")
    d = only(diagnostics)
    assert tree is None and d.code == "RLC100"


@pytest.mark.parametrize("text", [
    "a: " + "[" * 3000 + "]" * 3000 + "\n",
    "a: " + "{x: " * 2000 + "1" + "}" * 2000 + "\n",
    "".join("  " * i + f"k{i}:\n" for i in range(2000)) + "  " * 2000 + "v: 1\n",
])
def test_deep_nesting_is_a_diagnostic(text):
    tree, diagnostics = load(text)
    d = only(diagnostics)
    assert tree is None and d.code == "RLC100"


def test_moderate_nesting_loads():
    text = "".join("  " * i + f"k{i}:\n" for i in range(50)) + "  " * 50 + "v: 1\n"
    tree, diagnostics = load(text)
    assert diagnostics == [] and tree is not None


# ---- reading files ------------------------------------------------------------------------------------------


def test_read_text_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        read_text(str(tmp_path / "nope.yaml"))
    with pytest.raises(UsageError, match="directory"):
        read_text(str(tmp_path))
    binary = tmp_path / "junk.yaml"
    binary.write_bytes(b"\x7fELF\x00\x01\x02")
    with pytest.raises(UsageError, match="binary"):
        read_text(str(binary))
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("a: caf\xe9\n".encode("latin-1"))
    with pytest.raises(UsageError, match="UTF-8"):
        read_text(str(latin))
    good = tmp_path / "ok.yaml"
    good.write_text("a: 1\n")
    assert read_text(str(good)) == "a: 1\n"
