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


@pytest.mark.parametrize("response,answer,expected", [
    ("Let me add.\nAnswer: 1,234", "1234", 1.0),
    ("Answer: $\\frac12$", "\\frac{1}{2}", 1.0),
    ("Answer: \\boxed{204}", "204", 1.0),
    ("answer:  17 degrees", "17", 1.0),  # case-insensitive; units Minerva drops
    ("Answer: x = 5", "5", 1.0),  # what follows the last `=`
    ("Answer: 3\nthen Answer: 4", "3", -1.0),  # the last answer line counts
    ("The answer is 204", "204", -1.0),  # no `Answer:` line
    ("Answer: 204" + " padding" * 40, "204", -1.0),  # outside the last 300 characters
    ("Answer: 204<|im_end|>", "204", 1.0),
    ("Answer: 204", None, -1.0),
])
def test_answer_line_is_skyrl_gyms_aime_score(response, answer, expected):
    assert rewards.get("answer_line")(response, answer) == expected


def _aime_compute_score():
    """SkyRL-Gym's aime scorer at the mirror's last commit (skipped without MIRROR_ROOT)."""
    import os
    import subprocess

    root = os.environ.get("MIRROR_ROOT")
    if not root:
        pytest.skip("MIRROR_ROOT is not set")
    text = subprocess.run(["git", "-C", os.path.join(root, "NovaSky-AI+SkyRL", "repo"), "show",
                           "HEAD:skyrl-gym/skyrl_gym/envs/aime/utils.py"], capture_output=True, text=True,
                          check=True).stdout
    namespace: dict = {}
    exec(compile(text, "aime/utils.py", "exec"), namespace)  # the framework's own scorer, as the oracle
    return namespace["compute_score"]


ANSWERS = ["204", "1,234", "\\frac{1}{2}", "\\frac12", "$5$", "\\boxed{7}", "17 degrees", "x = 5", "\\text{(B)}",
           "3\\sqrt2", "10^{\\circ}", "a 12", "\\$4.50", "2,3", "\\dfrac{3}{4}", "0.5"]


@pytest.mark.parametrize("truth", ["204", "1234", "\\frac{1}{2}", "5", "7", "17", "(B)", "3\\sqrt{2}", "0.5"])
def test_answer_line_agrees_with_skyrl_gym_on_written_answers(truth):
    theirs = _aime_compute_score()
    for written in ANSWERS:
        for response in (f"Work.\nAnswer: {written}", f"answer : {written}<|im_end|>", f"Answer:{written}\nDone."):
            assert rewards.answer_line(response, truth) == theirs(response, truth)["score"], (response, truth)


@pytest.mark.parametrize("response, answer, expected", [
    # AReaL's GSM8K data keeps the whole reference solution; math-verify finds its final number
    ("So she sold \\boxed{72} clips.", "Natalia sold 48/2 = 24 clips in May.\n#### 72", 1.0),
    ("She sold 72 clips altogether.", "72", 1.0),  # no anchor needed: the number alone counts
    ("\\boxed{71}", "72", 0.0),
    ("\\boxed{0.5}", "\\frac{1}{2}", 1.0),
    ("no number here", "72", 0.0),
    ("\\boxed{72}", None, 0.0),
])
def test_areal_math_verify_is_areals_gsm8k_reward(response, answer, expected):
    assert rewards.get("areal_math_verify")(response, answer) == expected


@pytest.mark.parametrize("response, answer, expected", [
    ("3 × 14 = \\boxed{42}", "42", 1.0),
    ("\\boxed{ 42 } and later \\boxed{7}", "42", 1.0),  # the first one counts, stripped
    ("\\boxed{41}", "42", 0.5),  # a boxed answer that is wrong still earns half
    ("42", "42", 0.0),  # no box, no reward
    ("\\boxed{{42}}", "42", 0.5),  # nested braces are not unwrapped
])
def test_boxed_multiply_is_skyrls_multiply_example(response, answer, expected):
    assert rewards.get("boxed_multiply")(response, answer) == expected
