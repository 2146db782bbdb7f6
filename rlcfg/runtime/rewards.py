"""Rule-based rewards: a response's text and the reference answer in, a score in [0, 1] out.

`exact_match` compares the stripped strings; `math` checks the final answer with math-verify when it is
installed, else with a small normaliser (the last \\boxed{...} or the last number, fractions and
thousands separators understood); `gsm8k_strict` takes only a `#### <number>` answer (SkyRL-Gym's gsm8k
environment) and `gsm8k_format_credit` also credits a wrong one (its gsm8k_multi_turn environment in one turn);
`answer_line` is SkyRL-Gym's aime environment; `areal_math_verify` is AReaL's GSM8K reward from 0.5,
`areal_math_parser` its GSM8K reward of 0.3 and 0.4 (rlcfg.runtime.areal_math_parser) and `areal_countdown` its
countdown example's (rlcfg.runtime.areal_countdown); `lcb` runs the response's program against the task's tests in
a sandbox, as SkyRL-Gym's lcb environment (rlcfg.runtime.livecodebench); `arithmetic` is the quickstart task's
verifier.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction
from typing import Any, Callable, Mapping

RewardFn = Callable[[str, "str | None"], float]


def exact_match(response: str, answer: str | None) -> float:
    return float(answer is not None and response.strip() == answer.strip())


def arithmetic(response: str, answer: str | None) -> float:
    """The quickstart task: the response, up to the end-of-sequence marker, is exactly the answer's digits."""
    return exact_match(response, answer)


_BOXED = re.compile(r"\\boxed\s*\{")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?")


def _last_boxed(text: str) -> str | None:
    starts = [m.end() for m in _BOXED.finditer(text)]
    if not starts:
        return None
    i, depth = starts[-1], 1
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j]
    return None


def extract_answer(text: str) -> str | None:
    """The final answer a response gives: its last \\boxed{...}, else what follows its last "answer is",
    else its last number."""
    boxed = _last_boxed(text)
    if boxed is not None:
        return boxed
    lowered = text.lower()
    at = lowered.rfind("answer is")
    if at >= 0:
        tail = text[at + len("answer is"):].strip().strip(":").strip()
        numbers = _NUMBER.findall(tail)
        if numbers:
            return numbers[0]
        return tail.split("\n")[0].rstrip(".").strip() or None
    numbers = _NUMBER.findall(text)
    return numbers[-1] if numbers else None


def normalise(answer: str) -> str | Fraction:
    """A canonical form: numbers (with thousands separators, decimals, a/b, \\frac{a}{b}) as exact fractions;
    anything else as text without spaces, dollar signs and a trailing period."""
    s = answer.strip().strip("$").strip()
    s = re.sub(r"\\(?:text|mathrm)\{([^}]*)\}", r"\1", s)
    s = re.sub(r"\\[dt]?frac\{([^}]*)\}\{([^}]*)\}", r"(\1)/(\2)", s)
    s = s.replace("\\left", "").replace("\\right", "").replace("\\!", "").replace(" ", "").rstrip(".")
    plain = s.replace(",", "").replace("(", "").replace(")", "")
    try:
        if "/" in plain:
            num, den = plain.split("/", 1)
            return Fraction(Fraction(num), Fraction(den))
        return Fraction(plain)
    except (ValueError, ZeroDivisionError):
        return s.lower()


def _math_builtin(response: str, answer: str | None) -> float:
    if answer is None:
        return 0.0
    predicted = extract_answer(response)
    if predicted is None:
        return 0.0
    gold = extract_answer(answer) if ("\\boxed" in answer) else answer
    return float(normalise(predicted) == normalise(gold))


def _math_verify() -> RewardFn | None:
    try:
        from math_verify import parse, verify
    except ImportError:
        return None

    def score(response: str, answer: str | None) -> float:
        if answer is None:
            return 0.0
        gold = parse(answer if "\\boxed" in answer or "$" in answer else f"${answer}$")
        predicted = parse(response)
        try:
            return float(bool(gold) and bool(predicted) and verify(gold, predicted))
        except Exception:  # math-verify's sympy back end can choke on odd expressions: that is a wrong answer
            return 0.0

    return score


AREAL_PRECISION = 6  # significant digits MathVerifyWorker compares to


def areal_math_verify(response: str, answer: str | None) -> float:
    """AReaL's gsm8k_reward_fn from 0.5 (MathVerifyWorker): the response and the ground truth each parsed with
    math-verify's expression (numbers anywhere in the text, no anchor needed) and LaTeX extraction, equal to six
    significant digits; 1 or 0, and 0 for anything math-verify cannot parse or compare."""
    from math_verify.grader import verify
    from math_verify.parser import ExprExtractionConfig, LatexExtractionConfig, parse

    targets = (ExprExtractionConfig(try_extract_without_anchor=True), LatexExtractionConfig())
    if answer is None:
        return 0.0
    try:
        gold = parse(str(answer), extraction_config=targets, parsing_timeout=None)
        predicted = parse(str(response), extraction_config=targets, parsing_timeout=None)
        if not gold or not predicted:
            return 0.0
        return 1.0 if verify(gold, predicted, float_rounding=AREAL_PRECISION, timeout_seconds=None) else 0.0
    except Exception:  # AReaL's worker scores whatever math-verify raises on as 0
        return 0.0


def math(response: str, answer: str | None) -> float:
    verifier = _math_verify()
    return verifier(response, answer) if verifier is not None else _math_builtin(response, answer)


# The first "#### " followed by a number, as GSM8K's reference solutions end.
_GSM8K_FINAL = re.compile(r"#### (-?[0-9.,]+)")


def gsm8k_strict(response: str, answer: str | None) -> float:
    """SkyRL-Gym's gsm8k environment (its compute_score in the default strict mode): 1 when the response's first
    `#### <number>`, without its commas and dollar signs, is the ground truth as a string; else 0. A right number
    written any other way scores 0, which is how the environment teaches the format."""
    found = _GSM8K_FINAL.search(response)
    if found is None or answer is None:
        return 0.0
    return float(found.group(1).replace(",", "").replace("$", "") == answer)


# SkyRL-Gym's gsm8k_multi_turn environment credits a well-formatted wrong answer with 0.2 / max_turns.
GSM8K_FORMAT_CREDIT = 0.2


def gsm8k_format_credit(response: str, answer: str | None) -> float:
    """SkyRL-Gym's gsm8k_multi_turn environment when SkyRL's generator gives it one turn (generator.max_turns 1,
    which the generator writes over the data's own max_turns): the strict `#### <number>` answer scores 1 when it
    is the ground truth and 0.2 when it is not; a response without one scores 0."""
    found = _GSM8K_FINAL.search(response)
    if found is None or answer is None:
        return 0.0
    return 1.0 if found.group(1).replace(",", "").replace("$", "") == answer else GSM8K_FORMAT_CREDIT


# Minerva's normalisation of a final answer (Lewkowycz et al., 2022), as DAPO's math verifier and SkyRL-Gym's aime
# environment apply it: literal edits, then words and LaTeX that carry no value, then rewrites by pattern.
_MINERVA_EDITS = (("an ", ""), ("a ", ""), (".$", "$"), ("\\$", ""), ("\\ ", ""), (" ", ""), ("mbox", "text"),
                  (",\\text{and}", ","), ("\\text{and}", ","), ("\\text{m}", "\\text{}"))
_MINERVA_DROPPED = ("square", "ways", "integers", "dollars", "mph", "inches", "hours", "km", "units", "\\ldots", "sue",
                    "points", "feet", "minutes", "digits", "cents", "degrees", "cm", "gm", "pounds", "meters", "meals",
                    "edges", "students", "childrentickets", "multiples", "\\text{s}", "\\text{.}", "\\text{\ns}",
                    "\\text{}^2", "\\text{}^3", "\\text{\n}", "\\text{}", "\\mathrm{th}", "^\\circ", "^{\\circ}",
                    "\\;", ",\\!", "{,}", '"', "\\dots")
_MINERVA_REWRITES = tuple((re.compile(pattern), replacement) for pattern, replacement in (
    (r"(.*?)(\$)(.*?)(\$)(.*)", r"$\3$"),  # the first $...$ alone
    (r"(\\text\{)(.*?)(\})", r"\2"), (r"(\\textbf\{)(.*?)(\})", r"\2"), (r"(\\overline\{)(.*?)(\})", r"\2"),
    (r"(\\boxed\{)(.*)(\})", r"\2"),
    (r"(frac)([^{])(.)", r"frac{\2}{\3}"),  # \frac12 is \frac{1}{2}
    (r"(sqrt)([^{])", r"sqrt{\2}"),  # \sqrt2 is \sqrt{2}
))
# "Answer: <final answer>" up to the end of its line (or a `<` that starts a special token).
_ANSWER_LINE = re.compile(r"(?i)Answer\s*:\s*([^\n<]+)")
ANSWER_LINE_TAIL = 300  # characters of the response's end the answer is looked for in


def minerva_normalised(answer: str) -> str:
    text = answer.split("=")[-1]
    for old, new in _MINERVA_EDITS:
        text = text.replace(old, new)
    for dropped in _MINERVA_DROPPED:
        text = text.replace(dropped, "")
    for pattern, replacement in _MINERVA_REWRITES:
        text = pattern.sub(replacement, text)
    text = text.replace("$", "")
    if text.replace(",", "").isdigit():
        text = text.replace(",", "")
    return text.strip()


def answer_line(response: str, answer: str | None) -> float:
    """SkyRL-Gym's aime environment (DAPO's verifier): the last `Answer: ...` in the response's final
    ANSWER_LINE_TAIL characters, normalised as Minerva's evaluation does, equal to the normalised ground truth
    scores 1; anything else, a missing answer line included, scores −1."""
    if answer is None:
        return -1.0
    found = _ANSWER_LINE.findall(response[-ANSWER_LINE_TAIL:])
    predicted = minerva_normalised(found[-1] if found else "[INVALID]")
    return 1.0 if predicted == minerva_normalised(str(answer)) else -1.0


# The first \boxed{...} without nested braces, as the multiply example's environment parses an action.
_FIRST_BOXED = re.compile(r"\\boxed\{([^}]+)\}")


def boxed_multiply(response: str, answer: str | None) -> float:
    """SkyRL's multiply example environment in one turn: 1 when the response's first \\boxed{...}, stripped, is the
    ground truth as a string; 0.5 for a boxed answer that is not; 0 with none."""
    found = _FIRST_BOXED.search(response)
    if found is None or answer is None:
        return 0.0
    return 1.0 if found.group(1).strip() == str(answer).strip() else 0.5


def areal_math_parser(response: str, answer: str | None) -> float:
    from rlcfg.runtime.areal_math_parser import score

    return score(response, answer)


def areal_countdown(response: str, answer: str | None) -> float:
    from rlcfg.runtime.areal_countdown import score

    return score(response, answer)


def llm_judge(response: str, answer: str | None, **settings: Any) -> float:
    from rlcfg.runtime.llm_judge import judge

    return judge(response, answer, settings)


def lcb(response: str, answer: str | None) -> float:
    from rlcfg.runtime.livecodebench import score

    return score(response, answer)


REWARD_FUNCTIONS: dict[str, RewardFn] = {"exact_match": exact_match, "math": math, "arithmetic": arithmetic,
                                         "gsm8k_strict": gsm8k_strict, "gsm8k_format_credit": gsm8k_format_credit,
                                         "answer_line": answer_line,
                                         "areal_math_verify": areal_math_verify, "boxed_multiply": boxed_multiply,
                                         "areal_math_parser": areal_math_parser, "areal_countdown": areal_countdown,
                                         "lcb": lcb, "llm_judge": llm_judge}
# The verifiers that read a response as its framework decodes it, special tokens (the end-of-sequence marker) kept:
# AReaL's RLVR and countdown workflows decode without skipping them (every release), and what follows the answer
# changes what math_parser's "answer is" branch and math-verify's extraction find (`x = 3/4<|im_end|>` is no answer
# to either), and which line countdown's reward takes as the last.
RAW_TEXT = frozenset({"areal_math_parser", "areal_math_verify", "areal_countdown"})
# The verifiers that score an answer format the smoke run's generated task does not write.
FORMATTED = {"gsm8k_strict": "`#### <number>` answers only",
             "gsm8k_format_credit": "`#### <number>` answers only, wrong ones 0.2",
             "answer_line": "`Answer: <answer>` lines only, wrong ones −1",
             "boxed_multiply": "`\\boxed{<answer>}` answers only, wrong ones 0.5",
             "areal_math_parser": "answers in `boxed{...}` or after \"the answer is\" only",
             "areal_countdown": "`<answer>` equations over the data's numbers only",
             "lcb": "programs in a fenced code block passing the task's tests only",
             "llm_judge": "a judge model's verdict, through an API this machine has no key for"}


# What a reward needs on the nodes that score (the rollout workers' nodes) beyond rlcfg's extras.
SYSTEM_TOOLS = {"lcb": "bubblewrap (`bwrap`), the sandbox the lcb environment's programs run in",
                "text2sql": "bubblewrap (`bwrap`), the sandbox the text2sql environment's queries run in",
                "llm_judge": "the judge's API key in OPENAI_API_KEY where `rlcfg run` starts, and its endpoint in "
                             "reach"}


def batch(name: str, settings: Mapping[str, Any] | None = None
          ) -> Callable[[list[tuple[str, "str | None"]]], list[float]] | None:
    """The reward's own way of scoring many (response, answer) pairs at once, where it has one: programs graded in
    parallel sandboxes, or a judge asked many times at once, rather than one after another."""
    if name == "lcb":
        from rlcfg.runtime.livecodebench import score_many

        return score_many
    if name == "llm_judge":
        from rlcfg.runtime.llm_judge import judge_many

        return functools.partial(judge_many, settings=dict(settings or {}))
    return None


def get(name: str, settings: Mapping[str, Any] | None = None) -> RewardFn:
    """The reward function `name`, with its settings (the LLM judge's model and endpoint) bound."""
    if name not in REWARD_FUNCTIONS:
        raise KeyError(f"unknown reward function `{name}`; rlcfg run knows {', '.join(sorted(REWARD_FUNCTIONS))}")
    fn = REWARD_FUNCTIONS[name]
    if fn is areal_math_parser:
        from rlcfg.runtime.areal_math_parser import check_installed

        check_installed()
    if fn is lcb:
        from rlcfg.runtime.livecodebench import check_ready

        check_ready()
    if fn is llm_judge:
        from rlcfg.runtime.llm_judge import check_ready as key_set

        key_set()
        return functools.partial(llm_judge, **dict(settings or {}))
    if fn is math:
        return _math_verify() or _math_builtin  # resolve the import once, not per response
    return fn
