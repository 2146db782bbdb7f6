import pytest

from rlcfg.runtime import rewards


def test_exact_match_and_arithmetic():
    assert rewards.exact_match(" 7 ", "7") == 1.0
    assert rewards.exact_match("7", "8") == 0.0
    assert rewards.exact_match("7", None) == 0.0
    assert rewards.arithmetic("7", "7") == 1.0


@pytest.mark.parametrize("response,answer,expected", [
    ("so the answer is \\boxed{\\frac{1}{2}}", "0.5", 1.0),
    ("The answer is 1,234.", "1234", 1.0),
    ("I think 3 then 4", "4", 1.0),
    ("I think 3 then 4", "3", 0.0),
    ("\\boxed{x+1}", "x+1", 1.0),
    ("no number here", "4", 0.0),
    ("The answer is: $12$", "\\boxed{12}", 1.0),
])
def test_builtin_math_normaliser(response, answer, expected):
    assert rewards._math_builtin(response, answer) == expected


def test_registry():
    assert rewards.get("arithmetic") is rewards.arithmetic
    assert callable(rewards.get("math"))
    with pytest.raises(KeyError, match="exact_match"):
        rewards.get("nope")
