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


@pytest.mark.parametrize("response, answer, expected", [
    ("3 + 4 = 7 apples.\n#### 7", "7", 1.0),
    ("#### 1,234", "1234", 1.0),  # commas go
    ("#### $18", "18", 0.0),  # the number must follow "#### " directly
    ("#### 18$", "18", 1.0),
    ("#### 72 and later #### 9", "72", 1.0),  # the first one counts
    ("The answer is 72.", "72", 0.0),  # the right number without the format scores nothing
    ("\\boxed{72}", "72", 0.0),
    ("####72", "72", 0.0),
    ("#### 72.0", "72", 0.0),  # compared as strings
    ("#### -3", "-3", 1.0),
    ("#### 7", None, 0.0),
])
def test_gsm8k_strict_is_skyrl_gyms_gsm8k_score(response, answer, expected):
    assert rewards.get("gsm8k_strict")(response, answer) == expected
