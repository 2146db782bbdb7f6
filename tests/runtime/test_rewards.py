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


@pytest.mark.parametrize("response, answer, expected", [
    ("3 + 4 = 7 apples.\n#### 7", "7", 1.0),
    ("#### 8", "7", 0.2),  # the format earns a fifth of the score
    ("#### 1,234", "1234", 1.0),
    ("The answer is 7.", "7", 0.0),
    ("#### $7", "7", 0.0),  # not the format
    ("#### 7", None, 0.0),
])
def test_gsm8k_format_credit_is_skyrl_gyms_multi_turn_gsm8k_in_one_turn(response, answer, expected):
    assert rewards.get("gsm8k_format_credit")(response, answer) == expected


def _skyrl_gym_source(path: str) -> str:
    """A file of SkyRL-Gym at the mirror's last commit (skipped without MIRROR_ROOT)."""
    import os
    import subprocess

    root = os.environ.get("MIRROR_ROOT")
    if not root:
        pytest.skip("MIRROR_ROOT is not set")
    return subprocess.run(["git", "-C", os.path.join(root, "NovaSky-AI+SkyRL", "repo"), "show",
                           f"HEAD:skyrl-gym/skyrl_gym/envs/{path}"], capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.parametrize("truth", ["7", "1234", "-3", "0.5"])
def test_gsm8k_format_credit_agrees_with_the_multi_turn_environment_given_one_turn(truth):
    namespace: dict = {}
    exec(compile(_skyrl_gym_source("gsm8k/utils.py"), "gsm8k/utils.py", "exec"), namespace)  # the oracle
    # GSM8kMultiTurnEnv.step with max_turns 1: compute_score(method="strict", format_score=0.2 / 1, score=1.0).
    env = _skyrl_gym_source("gsm8k/multi_turn_env.py")
    assert "format_score = 0.2" in env and "format_score / self.max_turns" in env
    for written in ("7", "1,234", "-3", "0.5", "$7", "8", "x"):
        for response in (f"So.\n#### {written}", f"####{written}", f"The answer is {written}"):
            theirs = namespace["compute_score"](response, truth, method="strict", format_score=0.2, score=1.0)
            assert rewards.gsm8k_format_credit(response, truth) == theirs, (response, truth)


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
    text = _skyrl_gym_source("aime/utils.py")
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


GSM8K_SOLUTION = "Natalia sold 48/2 = 24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips.\n#### 72"


# Each score is the one AReaL's own process_results (v0.4.1) gives: tests/oracle/test_areal_reward_oracle.py compares
# the two on some 34,000 pairs.
@pytest.mark.parametrize("response, answer, expected", [
    ("\\boxed{72}", GSM8K_SOLUTION, 1.0),  # the reference answers its last number
    ("The answer is 72.", GSM8K_SOLUTION, 1.0),
    ("the answer is 72<|im_end|>", GSM8K_SOLUTION, 0.0),  # the end-of-sequence marker stays in the answer
    ("\\boxed{72}<|im_end|>", GSM8K_SOLUTION, 1.0),
    ("72", GSM8K_SOLUTION, 0.0),  # a bare number states no answer
    ("\\boxed{seventy two}", GSM8K_SOLUTION, 1.0),  # number words
    ("\\boxed{72 dollars}", GSM8K_SOLUTION, 0.0),  # "dollars" is no unit of AReaL's list
    ("\\boxed{72.0}", GSM8K_SOLUTION, 1.0),
    ("first \\boxed{1} then \\boxed{72}", GSM8K_SOLUTION, 1.0),  # the last box
    ("\\boxed{72", GSM8K_SOLUTION, 1.0),  # an unclosed box runs to the end
    ("The final answer is $72$. I hope it is correct.", GSM8K_SOLUTION, 1.0),
    ("答案是72", GSM8K_SOLUTION, 1.0),
    ("\\boxed{\\frac12}", "0.5", 1.0),
    ("\\boxed{x = 5}", "5", 1.0),
    ("\\boxed{10!}", "3628800", 1.0),  # sympy evaluates the factorial
    ("\\boxed{50\\%}", "0.5", 1.0),  # the reference counts as a percentage too
    ("\\boxed{0.7071}", "\\boxed{\\frac{\\sqrt{2}}{2}}", 1.0),  # numerically, within 1e-4
    ("\\boxed{}", "72", 0.0),
    ("\\boxed{72}", "no number", 0.0),
    ("\\boxed{72}", None, 0.0),
])
def test_areal_math_parser_is_areals_gsm8k_reward_of_0_3_and_0_4(response, answer, expected):
    assert rewards.get("areal_math_parser")(response, answer) == expected


def test_areal_math_parser_gives_up_after_areals_time_limit_and_starts_afresh(monkeypatch):
    from rlcfg.runtime import areal_math_parser

    slow = ("\\boxed{0.7071}", "\\boxed{\\frac{\\sqrt{2}}{2}}")  # a comparison only sympy decides
    assert areal_math_parser.score(*slow) == 1.0
    first = areal_math_parser._CHILD._process
    monkeypatch.setattr(areal_math_parser, "TIMEOUT_S", 0.0)
    assert areal_math_parser.score(*slow) == 0.0  # AReaL scores a reward that outlives its limit 0
    assert areal_math_parser._CHILD._process is None and first.poll() is not None  # the child is gone
    monkeypatch.undo()
    assert areal_math_parser.score(*slow) == 1.0


@pytest.mark.parametrize("text, inert", [
    ("x**2 + 2*x + 1", True), ("sqrt(2)/2", True), ("Max(a, b)", True), ("3.5*pi", True),
    ("x.__class__", False), ("().__class__.__bases__", False), ("eval(chr(49))", False), ("open(x)", False),
    ("__import__", False), ("'os'", False), ("lambda x: x", False), ("S(1).func", False),
])
def test_areal_math_parser_hands_parse_expr_no_code(text, inert):
    # parse_expr evaluates its text as Python, and reference answers come from the user's data
    from rlcfg.runtime.areal_math_parser import _expression_is_inert

    assert _expression_is_inert(text) is inert


def test_areals_rewards_read_responses_with_their_special_tokens():
    from rlcfg.runtime.workers import RewardScorer

    class Tokenizer:
        def batch_decode(self, seqs, skip_special_tokens=True):
            return ["The answer is 72." + ("" if skip_special_tokens else "<|im_end|>") for _ in seqs]

    scores, shown = RewardScorer("areal_math_parser", Tokenizer()).score([[1]], ["72"])
    assert scores == [0.0] and shown == ["The answer is 72."]  # samples are shown without the marker
    assert RewardScorer("math", Tokenizer()).score([[1]], ["72"])[0] == [1.0]

    class Equation(Tokenizer):
        def batch_decode(self, seqs, skip_special_tokens=True):
            return ["x = 3/4" + ("" if skip_special_tokens else "<|im_end|>") for _ in seqs]

    # AReaL 0.5 and 1.0 decode the same way: math-verify then finds no answer after the marker
    assert RewardScorer("areal_math_verify", Equation()).score([[1]], ["0.75"])[0] == [0.0]
    assert rewards.areal_math_verify("x = 3/4", "0.75") == 1.0


COUNTDOWN = '{"numbers": [3, 5, 7, 8], "target": 24}'


@pytest.mark.parametrize("response, answer, expected", [
    ("<think>try</think>\n<answer>(8 - 5) * 7 + 3</answer><|im_end|>", COUNTDOWN, 1.0),
    ("<answer> 8 * (7 - 5 + 3) </answer>", COUNTDOWN, 0.1),  # each number once, but 40
    ("<answer>(8 - 5) * 7 + 3</answer>\nso that is it", COUNTDOWN, 0.0),  # the answer is not on the last line
    ("<answer>1</answer> <answer>(8-5)*7+3</answer>", COUNTDOWN, 1.0),  # the last answer of the line
    ("<answer>(8 - 5) * 7 + 3 * 1</answer>", COUNTDOWN, 0.1),  # a number that is not given
    ("<answer>(8 - 5) * 7 + 3 = 24</answer>", COUNTDOWN, 0.1),  # `=` is not allowed, and 24 is a number too
    ("<answer>7 * 3 + 8 - 5</answer>", COUNTDOWN, 1.0),
    ("<answer>(8 / (3 - 8 / 3))</answer>", '{"numbers": [3, 3, 8, 8], "target": 24}', 1.0),  # 23.999999999999996
    ("<answer>(8 - 5) * 7 + 3</answer>", '{"numbers": [3, 5, 7, 8], "target": 24.000001}', 1.0),
    ("<answer>3 * 8 * (7 - 7) + 5 ** 0</answer>", '{"numbers": [0, 3, 5, 7, 7, 8], "target": 1}', 1.0),
    ("<answer>3**2 // 5 + 7 - 8</answer>", '{"numbers": [2, 3, 5, 7, 8], "target": 0}', 1.0),  # Python's ** and //
    ("<answer>03 * 8</answer>", '{"numbers": [3, 8], "target": 24}', 0.1),  # a leading zero: a syntax error
    ("<answer>3. * 8</answer>", '{"numbers": [3, 8], "target": 24}', 1.0),  # `3.` is a float, as in Python
    ("<answer>3 * 8 / (5 - 5)</answer>", '{"numbers": [3, 5, 5, 8], "target": 24}', 0.1),  # division by zero
    ("<answer>3(8)</answer>", '{"numbers": [3, 8], "target": 24}', 0.1),  # calls an int
    ("Assistant: <answer>3 * 8</answer>", '{"numbers": [3, 8], "target": 24}', 1.0),
    ("no answer here", COUNTDOWN, 0.0),
    ("<answer>3 * 8</answer>", '{"numbers": ["3", "8"], "target": 24}', 0.1),  # numbers that are text match nothing
    ("<answer>99**99**99 - 99 + 99</answer>", '{"numbers": [99, 99, 99, 99, 99], "target": 0}', 0.1),  # bounded
])
def test_areal_countdown_is_areals_countdown_reward(response, answer, expected):
    assert rewards.areal_countdown(response, answer) == expected


def test_areal_countdown_computes_what_python_would():
    """AReaL computes the equation with eval() once its characters pass a check; rlcfg parses and computes it itself.
    On seeded random strings over those characters (and white space, line breaks and digits that the check lets
    through but Python's grammar does not), the value is eval's, or None where eval raises."""
    import random
    import re
    import warnings

    from rlcfg.runtime.areal_countdown import evaluate, passes_max_bits

    def python(equation):
        if not re.match(r"^[\d+\-*/().\s]+$", equation):
            return None
        try:
            with warnings.catch_warnings():  # `2(3)` compiles with a warning before it fails
                warnings.simplefilter("ignore", SyntaxWarning)
                value = eval(equation, {"__builtins__": None}, {})  # the oracle: generated text, no names in scope
        except Exception:
            return None
        return value if isinstance(value, (int, float, complex)) else None  # `()` is a tuple: no score

    alphabet = list("0123456789+-*/(). ") + ["**", "//", "\t", "\n", "\r", "\x0b", "\x0c", "\xa0", "٣", "00", "1.5"]
    draw = random.Random(11)
    compared = valued = 0
    for _ in range(20000):
        equation = "".join(draw.choice(alphabet) for _ in range(draw.randint(1, 12))).strip()
        if not equation or passes_max_bits(equation):  # eval would compute it for as long as it takes
            continue
        ours, theirs = evaluate(equation), python(equation)
        assert type(ours) is type(theirs) and (ours == theirs or repr(ours) == repr(theirs)), equation
        compared += 1
        valued += ours is not None
    assert compared > 15000 and valued > 1500


@pytest.mark.parametrize("equation, value", [
    ("(" * 200 + "1" + ")" * 200, 1), ("(" * 201 + "1" + ")" * 201, None),  # Python's nesting limit
    ("(1 +\n 2)", 3), ("1 +\n 2", None),  # a line break joins lines inside parentheses only
    ("-2**2", -4), ("2**-1", 0.5), ("2**3**2", 512), ("--1", 1), ("7//2", 3), ("7/2", 3.5),
    ("(-8)**(1/3)", (-8) ** (1 / 3)), ("2.0**1024", None), ("10**400/10**399", 10.0), ("()", None),
    ("1 2", None), ("1.2.3", None), ("00", 0), ("012", None), ("012.5", 12.5), (".5", 0.5), ("٣", None),
])
def test_areal_countdown_follows_pythons_grammar_and_arithmetic(equation, value):
    from rlcfg.runtime.areal_countdown import evaluate

    assert evaluate(equation) == value and type(evaluate(equation)) is type(value)


def test_countdown_responses_are_read_with_their_special_tokens():
    from rlcfg.runtime.workers import RewardScorer

    class Tokenizer:
        def batch_decode(self, seqs, skip_special_tokens=True):
            return ["<answer>3 * 8</answer>\n" + ("" if skip_special_tokens else "<|im_end|>") for _ in seqs]

    # AReaL decodes with the marker, which is then the response's last line: no answer there
    assert RewardScorer("areal_countdown", Tokenizer()).score([[1]], ['{"numbers": [3, 8], "target": 24}'])[0] == [0.0]
