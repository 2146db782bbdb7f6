"""AReaL's math_parser reward: rlcfg's `areal_math_parser` against AReaL's own process_results, on answers written
many ways; and its countdown reward: rlcfg's `areal_countdown` against examples/countdown/reward_score.py.

AReaL's GSM8K scripts of 0.3 and 0.4 score `int(process_results(completion, answer)[0])`. The oracle runs
areal/reward/math_parser.py from the v0.4.1 tree (v0.3.4's differs in syntax only: bare excepts, typing.List) in a
venv of its own that has what AReaL's 0.4.1 lock file pins for it (sympy 1.14.0, antlr4-python3-runtime 4.11.1,
word2number) and the latex2sympy the release ships (evaluation/latex2sympy). Each pair is a response (an answer
written in one of many ways, in a `boxed{}`, after "The answer is", in Chinese, with the end-of-sequence marker...)
and a reference (GSM8K's solution text, a boxed answer, a plain one). Run: MIRROR_ROOT=/work/.mirror python -m
pytest -m oracle -s tests/oracle/test_areal_reward_oracle.py (a few minutes: each side scores some 36,000 pairs).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = "inclusionAI+AReaL"
TAG = "v0.4.1"
PINS = ["sympy==1.14.0", "antlr4-python3-runtime==4.11.1", "word2number==1.1", "regex", "pebble"]

ANSWERS = ["72", "1,234", "0.5", "\\frac{1}{2}", "\\frac12", "1/2", "\\dfrac{3}{4}", "3\\sqrt2", "2\\sqrt{3}",
           "10^{\\circ}", "17 degrees", "$5$", "\\$4.50", "4.50", "4.5", "50\\%", "50%", "0.50", "x = 5", "x=5", "5",
           "k = 3", "(1, 2)", "[1,2]", "(1,2)", "\\text{(B)}", "B", "(B)", "seventy two", "twelve apples",
           "12 apples", "\\pi", "2\\pi", "6.28318", "\\infty", "infinity", "-\\infty", "(-\\infty, \\infty)",
           "\\emptyset", "\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}", "\\begin{bmatrix}1&2\\\\3&4\\end{bmatrix}",
           "{1,2}", "x^2+2x+1", "(x+1)^2", "y = 2x + 3", "2x+3=y", "\\sqrt{2}/2", "\\frac{\\sqrt{2}}{2}", "0.7071",
           "1e3", "1000", "nan", "inf", "72 dollars", "\\text{72 dollars}", "72\\text{ dollars}", "72 cm", "72 m",
           "72.", "72.0", "072", "-3", "- 3", "3.14", "\\pi/2", "90", "a", "A", "E", "", "  ", "3/4", "6/8",
           "2^{10}", "1024", "10!", "3628800", "\\log_2 8", "3", "e^{i\\pi}", "-1", "i", "j", "\\sqrt{-1}",
           "x\\in[0,1]", "[0,1]", "12:30", "12 hours", "1 hour", "\\frac{a}{b}", "a/b", "\\mathbf{72}", "\\boxed{72}",
           "ки 72", "72 ки", "__import__", "x.__class__", "9**9"]
RESPONSES = ["\\boxed{%s}", "So the answer is \\boxed{%s}.", "The answer is %s.", "The answer is %s",
             "The final answer is %s", "The final answer is $%s$. I hope it is correct.", "答案是%s",
             "boxed %s$ and more", "%s", "Thus, the answer is: %s\n\nDone.", "first \\boxed{1} then \\boxed{%s}",
             "\\boxed{%s", "the answer is %s<|im_end|>", "\\boxed{%s}<|im_end|>", "\\boxed {%s}", "\\fbox{%s}",
             "The answer is\n%s\n."]
GSM8K_SOLUTION = "Natalia sold 48/2 = 24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips.\n#### 72"
REFERENCES = ["%s", "\\boxed{%s}", "The answer is %s", "#### %s"]


def pairs() -> list[tuple[str, str]]:
    out = {(template % answer, GSM8K_SOLUTION) for answer in ANSWERS for template in RESPONSES}
    out |= {(template % answer, reference % other) for answer in ANSWERS for template in RESPONSES
            for reference in REFERENCES for other in (answer, "72")}
    out |= {("\\boxed{%s}" % a, reference % b) for a, b in itertools.product(ANSWERS, repeat=2)
            for reference in ("%s", "\\boxed{%s}")}
    return sorted(out)


THEIRS = r'''
import importlib.util, json, logging, sys, types
utils = types.ModuleType("areal.utils")
utils.logging = types.SimpleNamespace(getLogger=logging.getLogger)
sys.modules.update({"areal": types.ModuleType("areal"), "areal.utils": utils})
spec = importlib.util.spec_from_file_location("math_parser", sys.argv[1])
parser = importlib.util.module_from_spec(spec)
spec.loader.exec_module(parser)
for line in sys.stdin:
    response, reference = json.loads(line)
    print(json.dumps(int(parser.process_results(response, reference)[0])), flush=True)
'''


def _areal_side(home: Path) -> tuple[Path, Path]:
    """The release's math_parser.py and a venv that runs it, under ORACLE_HOME."""
    git_dir = Path(os.environ["MIRROR_ROOT"]) / REPO / "repo"
    tree = home / "trees" / f"areal-math-parser-{TAG}"
    if not (tree / "areal" / "reward" / "math_parser.py").is_file():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", f"--git-dir={git_dir}", "archive", TAG, "areal/reward/math_parser.py",
                                  "evaluation/latex2sympy"], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    venv = home / "venvs" / f"areal-math-parser-{TAG}"
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *PINS, str(tree / "evaluation" / "latex2sympy")],
                       check=True)
    return tree / "areal" / "reward" / "math_parser.py", venv / "bin" / "python"


def test_areal_math_parser_scores_as_areals_process_results(oracle_dir, tmp_path):
    from rlcfg.runtime.areal_math_parser import score

    home = Path(os.environ.get("ORACLE_HOME", "/tmp/oracle"))
    parser, python = _areal_side(home)
    cases = pairs()
    driver = tmp_path / "theirs.py"
    driver.write_text(THEIRS)
    run = subprocess.run([str(python), str(driver), str(parser)], input="".join(json.dumps(c) + "\n" for c in cases),
                         capture_output=True, text=True, timeout=3600)
    theirs = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(theirs) == len(cases), run.stderr[-2000:]
    ours = [int(score(response, reference)) for response, reference in cases]
    differ = [(case, t, o) for case, t, o in zip(cases, theirs, ours) if t != o]
    print(f"\nAReaL math_parser {TAG}: {len(cases)} pairs, {sum(theirs)} scored 1 by AReaL, {len(differ)} differ")
    for case, t, o in differ:
        print(f"  AReaL {t}, rlcfg {o}: {case!r}")
    assert not differ, differ[:20]


WORDS_THEIRS = r'''
import json, sys
from word2number import w2n
for line in sys.stdin:
    try:
        print(json.dumps(w2n.word_to_num(json.loads(line))), flush=True)
    except Exception:
        print("null", flush=True)
'''


def test_number_words_read_as_word2number_reads_them(oracle_dir, tmp_path):
    """AReaL's normalisation turns an answer's number words into digits with word2number 1.1, which rlcfg reads
    itself (word2number has no wheel): every phrase of up to seven words drawn from number words, scales, "point",
    digits and others, against the package in the oracle's venv."""
    import random

    from rlcfg.runtime.areal_math_parser import _words_to_number

    _parser, python = _areal_side(Path(os.environ.get("ORACLE_HOME", "/tmp/oracle")))
    words = ["zero", "one", "two", "three", "five", "nine", "ten", "eleven", "nineteen", "twenty", "forty", "ninety",
             "hundred", "thousand", "million", "billion", "point", "and", "apples", "-", "x", "72", "007", "²", "One",
             "Twenty-Two"]
    draw = random.Random(5)
    phrases = ["", " ", "0", "12.5", "point", "point five", "seventy-two", "two million nineteen thousand"]
    phrases += [" ".join(draw.choice(words) for _ in range(n)) for n in range(1, 8) for _ in range(3000)]
    driver = tmp_path / "words.py"
    driver.write_text(WORDS_THEIRS)
    run = subprocess.run([str(python), str(driver)], input="".join(json.dumps(p) + "\n" for p in phrases),
                         capture_output=True, text=True, timeout=600)
    theirs = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(theirs) == len(phrases), run.stderr[-2000:]
    differ = [(p, t, o) for p, t, o in zip(phrases, theirs, map(_words_to_number, phrases))
              if t != o or type(t) is not type(o)]
    print(f"\nword2number 1.1: {len(phrases)} phrases, {len(differ)} differ")
    assert not differ, differ[:20]


COUNTDOWN_TAG = "v1.0.4"  # examples/countdown/reward_score.py; v0.3.4's differs in syntax only (bare excepts)
COUNTDOWN_THEIRS = r'''
import contextlib, importlib.util, io, json, sys
spec = importlib.util.spec_from_file_location("reward_score", sys.argv[1])
reward = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reward)
for line in sys.stdin:
    response, truth = json.loads(line)
    with contextlib.redirect_stdout(io.StringIO()):  # it prints one response in 64
        value = reward.compute_score(response, truth)
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()
'''


def countdown_cases(count: int) -> list[tuple[str, dict]]:
    """Responses to countdown problems: equations over the problem's numbers (and others), with Python's operators,
    parentheses, signs, decimals and stray characters, in the answer tags of the last line or elsewhere."""
    import random

    from rlcfg.runtime.areal_countdown import passes_max_bits

    draw = random.Random(3)
    ops = ["+", "-", "*", "/", "//", "**", " + ", " * ", " - ", "/ "]

    def equation(numbers: list) -> str:
        terms = [str(n) for n in numbers]
        draw.shuffle(terms)
        text = terms[0]
        for term in terms[1:]:
            text = f"{text}{draw.choice(ops)}{term}"
            if draw.random() < 0.3:
                text = f"({text})"
        for noise in ("-", "(", ")", ".", " ", "0", "=", "x", "\t", "1.5", "()", "\r"):
            if draw.random() < 0.04:
                at = draw.randrange(len(text) + 1)
                text = text[:at] + noise + text[at:]
        return text

    wrappers = ["<think>a</think>\n<answer>%s</answer><|im_end|>", "<answer> %s </answer>", "%s",
                "<answer>%s</answer>\nthe end", "Assistant: <answer>%s</answer>",
                "<answer>1</answer><answer>%s</answer>", "<|im_start|>assistant\n<answer>%s</answer>", "<answer>%s"]
    cases: list[tuple[str, dict]] = []
    while len(cases) < count:
        numbers = [draw.randint(0, 30) for _ in range(draw.randint(2, 4))]
        text = equation(numbers if draw.random() < 0.9 else numbers + [draw.randint(1, 9)])
        if passes_max_bits(text.strip()):  # eval would compute it for as long as it takes
            continue
        # a target the equation often reaches: the value of the numbers in order with + and *
        target = numbers[0] * numbers[1] + sum(numbers[2:]) if draw.random() < 0.5 else draw.randint(0, 100)
        cases.append((draw.choice(wrappers) % text, {"target": target, "numbers": numbers}))
    return cases


def test_areal_countdown_scores_as_areals_countdown_reward(oracle_dir, tmp_path):
    """rlcfg's `areal_countdown` against examples/countdown/reward_score.py (which computes with eval) as released,
    run with the interpreter the tests run on."""
    from rlcfg.runtime.areal_countdown import score

    git_dir = Path(os.environ["MIRROR_ROOT"]) / REPO / "repo"
    theirs_file = tmp_path / "reward_score.py"
    theirs_file.write_bytes(subprocess.run(["git", f"--git-dir={git_dir}", "show",
                                            f"{COUNTDOWN_TAG}:examples/countdown/reward_score.py"],
                                           capture_output=True, check=True).stdout)
    driver = tmp_path / "countdown.py"
    driver.write_text(COUNTDOWN_THEIRS)
    cases = countdown_cases(60000)
    run = subprocess.run([sys.executable, "-W", "ignore", str(driver), str(theirs_file)],
                         input="".join(json.dumps(c) + "\n" for c in cases), capture_output=True, text=True,
                         timeout=3600)
    theirs = [json.loads(line) for line in run.stdout.split("\n") if line]
    assert len(theirs) == len(cases), run.stderr[-2000:]
    ours = [score(response, json.dumps(truth)) for response, truth in cases]
    differ = [(case, t, o) for case, t, o in zip(cases, theirs, ours) if t != o]
    counts = {value: theirs.count(value) for value in sorted(set(theirs))}
    print(f"\nAReaL countdown reward {COUNTDOWN_TAG}: {len(cases)} responses, AReaL's scores {counts}, "
          f"{len(differ)} differ")
    for case, t, o in differ[:20]:
        print(f"  AReaL {t}, rlcfg {o}: {case!r}")
    assert not differ, differ[:20]
