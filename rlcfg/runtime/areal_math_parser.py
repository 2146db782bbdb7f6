"""AReaL's math_parser reward, as its GSM8K scripts of 0.3 and 0.4 score a response.

Those scripts reward a completion with `int(process_results(completion, answer)[0])` (areal/reward/math_parser.py):

- The response's answer is the content of its last `boxed` (braces matched), else what follows its last "he answer
  is" or "final answer is", else nothing: a response without one scores 0. The reference's answer is found the same
  way, else it is its last number (GSM8K's reference solutions end in `#### 72`).
- Both are normalised by a long list of textual edits: LaTeX spacing and delimiters, `\\text{...}`, units and
  measure words, dollar and percent signs, number words ("seventy two", read as word2number 1.1 reads them, which
  AReaL calls), `x =` prefixes, `a/b` and `\\frac12`.
- They are equal when their texts are; or when both read as numbers within a relative 1e-4, the reference also
  counting as a percentage either way (÷100, ×100); or when tuples, matrices and equations agree part by part; or
  when sympy finds them equal (parsed as LaTeX by sympy's ANTLR parser, else as a Python expression, else by
  latex2sympy), directly, by simplification or numerically.

Every step keeps AReaL's quirks, since a response's reward is what training follows: a right answer written after
"The answer is" keeps the end-of-sequence marker the text is decoded with (RAW_TEXT in rlcfg.runtime.rewards) and so
does not match, as in AReaL.

Two safeguards, both where AReaL's own process would be at risk:

- The comparisons that reach sympy run in a child process, within AReaL's 15 seconds (its AsyncRewardWrapper scores
  a reward that runs longer 0), under a memory limit; a child that runs out is replaced. Most GSM8K answers are
  numbers and never leave the worker.
- sympy's parse_expr evaluates its text as Python. rlcfg hands it only texts whose names are single letters or
  sympy's mathematical functions and constants, with no attribute access, quotes or underscores; others go on to
  latex2sympy, as when parse_expr fails. The reference answers come from the data a user points rlcfg at, which
  must not run code.
"""

from __future__ import annotations

import math
import re
import threading
from typing import Any, Callable

# AReaL's AsyncRewardWrapper: a reward that takes longer scores 0.
TIMEOUT_S = 15.0
# Address space of the child that runs sympy: a comparison that needs more is unequal.
CHILD_MEMORY_BYTES = 4 << 30
# How long the child may take to import sympy and the parsers before its first comparison.
CHILD_START_S = 120.0

# Measure words removed from an answer where they stand alone (MathQA's units), each also with a trailing "s". Each
# is a regular expression as written: its "." matches any character, as in AReaL. Order matters: each removal sees
# the previous one's result.
_UNITS = """
east;degree;mph;kmph;ft;m sqaure; m east;sq m;deg;mile;q .;monkey;prime;ratio;profit of rs;rd;o;gm;p . m;lb;tile;per;
dm;lt;gain;ab;way;west;a .;b .;c .;d .;e .;f .;g .;h .;t;a;h;no change;men;soldier;pie;bc;excess;st;inches;noon;
percent;by;gal;kmh;c;acre;rise;a . m;th;π r 2;sq;mark;l;toy;coin;sq . m;gallon;° f;profit;minw;yr;women;feet;am;pm;
hr;cu cm;square;v â € ™;are;rupee;rounds;cubic;cc;mtr;s;ohm;number;kmph;day;hour;minute;min;second;man;woman;sec;
cube;mt;sq inch;mp;∏ cm ³;hectare;more;sec;unit;cu . m;cm 2;rs .;rs;kg;g;month;km;m;cm;mm;apple;liter;loss;yard;
pure;year;increase;decrease;d;less;Surface;litre;pi sq m;s .;metre;meter;inch
""".replace("\n", "").split(";")
_UNITS += [u + "s" for u in _UNITS]
_UNIT_PATTERNS = [re.compile(r"(^|\W)" + u + r"($|\W)") for u in _UNITS]

_DROPPED_PREFIXES = ("x=", "y=", "z=", "x\\in", "y\\in", "z\\in", "x\\to", "y\\to", "z\\to")
_LAST_NUMBER = re.compile(r"-?\d*\.?\d+")
_CHOICE = re.compile(r"\b(A|B|C|D|E)\b")
_BRACKETED = re.compile(r"(\(|\[).+(\)|\])")
_PMATRIX_OPEN, _PMATRIX_CLOSE = "\\begin{pmatrix}", "\\end{pmatrix}"


class _NeedsSympy(BaseException):
    """Raised by the in-worker comparison where sympy must decide (a BaseException, so that no `except Exception`
    on the way swallows it); the whole comparison then runs in the child."""


def _fix_fracs(text: str) -> str:
    """`\\frac12` and `\\frac1{72}` as `\\frac{1}{2}` and `\\frac{1}{72}`; a `\\frac` with fewer than two characters
    after it leaves the whole text unchanged."""
    head, *rest = text.split("\\frac")
    out = [head]
    for part in rest:
        out.append("\\frac")
        if part[:1] == "{":
            out.append(part)
            continue
        if len(part) < 2:
            return text
        first, second, tail = part[0], part[1], part[2:]
        out.append("{" + first + "}" + (second if second == "{" else "{" + second + "}") + tail)
    return "".join(out)


def _fix_a_slash_b(text: str) -> str:
    """`3/4` (integers, or anything with a sqrt) as `\\frac{3}{4}`, when the text is exactly that."""
    parts = text.split("/")
    if len(parts) != 2:
        return text
    try:
        a = parts[0] if "sqrt" in parts[0] else int(parts[0])
        b = parts[1] if "sqrt" in parts[1] else int(parts[1])
    except ValueError:
        return text
    if text != f"{a}/{b}":
        return text
    return "\\frac{" + str(a) + "}{" + str(b) + "}"


_UNIT_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
               "sixteen seventeen eighteen nineteen").split()
_NUMBER_WORDS = {**{word: value for value, word in enumerate(_UNIT_WORDS)},
                 **{word: 10 * tens for tens, word in enumerate("twenty thirty forty fifty sixty seventy eighty ninety"
                                                                .split(), start=2)},
                 "hundred": 100, "thousand": 1000, "million": 10 ** 6, "billion": 10 ** 9}
_SCALES = ("billion", "million", "thousand")


def _below_thousand(words: list[str]) -> int:
    """word2number's reading of the words between two scales: `a hundred b c` as a·100 + b + c, `a hundred b` as
    a·100 + b, `a hundred` as a·100, `a b` as a + b; one word, or five and more, as the first alone."""
    values = [_NUMBER_WORDS[w] for w in words]
    if len(values) == 4:
        return values[0] * values[1] + values[2] + values[3]
    if len(values) == 3:
        return values[0] * values[1] + values[2]
    if len(values) == 2:
        return values[0] * values[1] if 100 in values else values[0] + values[1]
    return values[0]  # no words at all raises, as in word2number


def _words_to_number(text: str) -> int | float | None:
    """The number word2number 1.1 reads in a text (w2n.word_to_num: the number words among its words, the rest
    ignored), None where it raises. A text of digits alone reads as that integer, leading zeros dropped."""
    text = text.replace("-", " ").lower()
    if text.isdigit():
        try:
            return int(text)
        except ValueError:  # digits of other scripts (², ³) that int() does not read
            return None
    words = [w for w in text.strip().split() if w in _NUMBER_WORDS or w == "point"]
    if not words or any(words.count(w) > 1 for w in (*_SCALES, "point")):
        return None
    decimals: list[str] = []
    if "point" in words:
        at = words.index("point")
        words, decimals = words[:at], words[at + 1:]
    at = {scale: words.index(scale) if scale in words else -1 for scale in _SCALES}
    if (at["thousand"] > -1 and (at["thousand"] < at["million"] or at["thousand"] < at["billion"])) or \
            (at["million"] > -1 and at["million"] < at["billion"]):
        return None
    total: int | float = 0
    try:
        if len(words) == 1:
            total = _NUMBER_WORDS[words[0]]
        elif words:
            start = 0
            for scale in _SCALES:
                if at[scale] > -1:
                    total += _below_thousand(words[start:at[scale]]) * _NUMBER_WORDS[scale]
                    start = at[scale] + 1
            # The words after a scale: those after the thousand, else after the million, else after the billion,
            # taking the first that does not end the text (so "two million nineteen thousand" also adds
            # "nineteen thousand" read as 19 + 1000, as word2number does).
            tail = next((at[scale] for scale in reversed(_SCALES) if -1 < at[scale] < len(words) - 1), None)
            if tail is not None:
                total += _below_thousand(words[tail + 1:])
            elif max(at.values()) == -1:
                total += _below_thousand(words)
    except IndexError:
        return None
    if decimals:
        if all(w in _UNIT_WORDS[:10] for w in decimals):
            total += float("0." + "".join(str(_NUMBER_WORDS[w]) for w in decimals))
    return total


def _word_number(text: str) -> str:
    number = _words_to_number(text)
    return text if number is None else str(number)


def normalise(text: str, drop_units: bool = True) -> str:
    """AReaL's strip_string: the edits that make equal answers equal text."""
    s = str(text).strip().replace("\n", "").rstrip(".").replace("\\!", "")
    s = re.sub(r"\\begin\{array\}\{.*?\}", r"\\begin{pmatrix}", s)
    s = re.sub(r"\\end\{array\}", r"\\end{pmatrix}", s).replace("bmatrix", "pmatrix")
    s = s.replace("tfrac", "frac").replace("dfrac", "frac")
    s = s.replace("\\neq", "\\ne").replace("\\leq", "\\le").replace("\\geq", "\\ge")
    s = s.replace("\\left", "").replace("\\right", "").replace("\\{", "{").replace("\\}", "}")
    without_text = re.sub(r"\\text{.*?}$", "", s).strip()
    if without_text not in ("", s):
        s = without_text
    if drop_units:
        for _ in range(2):
            for pattern in _UNIT_PATTERNS:
                s = pattern.sub(r"\1\2", s) or s
    s = s.replace("^{\\circ}", "").replace("^\\circ", "")
    s = s.replace("\\$", "").replace("$", "").replace("\\(", "").replace("\\)", "")
    s = _word_number(s)
    s = re.sub(r"\\text\{(.*?)\}", r"\1", s)
    for prefix in _DROPPED_PREFIXES:
        s = s.replace(prefix, "")
    s = s.replace("\\emptyset", "{}").replace("(-\\infty,\\infty)", "\\mathbb{R}")
    s = s.replace("\\%", "").replace("%", "")
    s = s.replace(" .", " 0.").replace("{.", "{0.")
    s = s.replace("infinity", "\\infty")
    if "\\infty" not in s:
        s = s.replace("inf", "\\infty")
    s = s.replace("+\\inity", "\\infty")
    s = s.replace("and", "").replace("\\mathbf", "")
    s = re.sub(r"\\mbox{.*?}", "", s)
    if "j" in s and "i" not in s:
        s = s.replace("j", "i")
    s = re.sub(r"(\d+)\.0*([^\d])", r"\1\2", s)
    s = re.sub(r"(\d+)\.0*$", r"\1", s)
    if not s:
        return s
    if s[0] == ".":
        s = "0" + s
    sides = s.split("=")
    if len(sides) == 2 and len(sides[0]) <= 2:
        s = sides[1]
    s = re.sub(r"\\sqrt(\w+)", r"\\sqrt{\1}", s).replace(" ", "")
    return _fix_a_slash_b(_fix_fracs(s))


def _braced(tail: str) -> str:
    """The text up to the brace that closes the one `tail` starts with (all of it if none does)."""
    depth, out = 1, []
    for ch in tail[1:]:
        depth += (ch == "{") - (ch == "}")
        if depth == 0:
            break
        out.append(ch)
    return "".join(out)


def extract(text: str, last_number: bool) -> str:
    """AReaL's extract_answer for its "math" data: the answer a text states, normalised; with `last_number`, a text
    that states none answers its last number."""
    text = text.replace("\u043a\u0438", "")
    if "final answer is $" in text and "$. I hope" in text:
        found = text.split("final answer is $", 1)[1].split("$. I hope", 1)[0].strip()
    elif "boxed" in text:
        tail = text.split("boxed")[-1]
        if not tail:
            return ""
        found = _braced(tail) if tail[0] == "{" else tail.split("$")[0].strip()
    elif "he answer is" in text:
        found = text.split("he answer is")[-1].strip()
    elif "final answer is" in text:
        found = text.split("final answer is")[-1].strip()
    elif "答案是" in text:
        found = text.split("答案是")[1].strip().split("\n\n")[0].strip()
    elif last_number:
        numbers = _LAST_NUMBER.findall(text.replace(",", ""))
        found = numbers[-1] if numbers else ""
    else:
        found = ""
    found = re.sub(r"\n\s*", "", found)
    for edge, cut in ((0, ":"), (-1, "."), (-1, "/")):
        if found and found[edge] == cut:
            found = found[1:] if edge == 0 else found[:-1]
    return normalise(found)


def _number(text: Any) -> float | None:
    """A number as Python's float reads it (thousands separators dropped), or a percentage as its fraction."""
    s = str(text).replace(",", "")
    try:
        return float(s)
    except ValueError:
        if s.endswith("%"):
            s = s[:-1].removesuffix("\\")
            try:
                return float(s) / 100
            except ValueError:
                return None
    return None


def _choice(text: str) -> str:
    text = text.strip("\n").rstrip(".").rstrip("/").strip(" ").lstrip(":")
    letters = _CHOICE.findall(text.upper())
    picked = letters[-1] if letters else text.strip().strip(".")
    return picked.rstrip(".").rstrip("/")


def _close(prediction: float, reference: float) -> bool:
    return math.isclose(reference, prediction, rel_tol=1e-4)


def _as_pmatrix(text: str) -> str:
    rows = [m.strip("{}") for m in re.findall(r"\{.*,.*\}", text.strip())]
    return ", ".join(_PMATRIX_OPEN + m.replace(",", "\\") + _PMATRIX_CLOSE for m in rows)


def _is_matrix(text: str) -> bool:
    return text.startswith(("\\begin{pmatrix}", "\\begin{bmatrix}")) and \
        text.endswith(("\\end{pmatrix}", "\\end{bmatrix}"))


def _matrix_rows(text: str) -> list[str]:
    inner = text[len(_PMATRIX_OPEN):-len(_PMATRIX_CLOSE)]
    return [row.strip() for row in inner.split("\\\\") if row.strip()]


def equal(prediction: str, reference: str, symbolic: Callable[[str, str], bool]) -> bool:
    """AReaL's math_equal (percentages included, numbers compared within 1e-4), with `symbolic` as its
    symbolic_equal."""
    if prediction is None or reference is None:
        return False
    if prediction.strip().lower() == reference.strip().lower():
        return True
    if reference in ("A", "B", "C", "D", "E") and _choice(prediction) == reference:
        return True
    p, r = _number(prediction), _number(reference)
    if p is not None and r is not None:
        return any(_close(p, candidate) for candidate in (r / 100, r, r * 100))
    if not prediction:
        return False
    reference, prediction = str(reference).strip(), str(prediction).strip()
    if "pmatrix" in prediction and "pmatrix" not in reference:
        reference = _as_pmatrix(reference)
    p_text, r_text = prediction, reference
    if (prediction.startswith("[") and prediction.endswith("]") and not reference.startswith("(")) or \
            (prediction.startswith("(") and prediction.endswith(")") and not reference.startswith("[")):
        p_text, r_text = p_text.strip("[]()"), r_text.strip("[]()")
    for bracket in "{}()":
        p_text, r_text = p_text.replace(bracket, ""), r_text.replace(bracket, "")
    if p_text.lower() == r_text.lower():
        return True
    if _BRACKETED.match(prediction) and _BRACKETED.match(reference):
        p_parts, r_parts = prediction[1:-1].split(","), reference[1:-1].split(",")
        if len(p_parts) == len(r_parts) and all(equal(a, b, symbolic) for a, b in zip(p_parts, r_parts)):
            return True
    if _is_matrix(prediction) and _is_matrix(reference):
        p_rows, r_rows = _matrix_rows(prediction), _matrix_rows(reference)
        if len(p_rows) == len(r_rows) and all(
                len(a.split("&")) == len(b.split("&")) and
                all(equal(x, y, symbolic) for x, y in zip(a.split("&"), b.split("&")))
                for a, b in zip(p_rows, r_rows)):
            return True
    p_eq, r_eq = prediction.count("="), reference.count("=")
    if p_eq == 1 and r_eq == 1:
        p_lhs, p_rhs = prediction.split("=")
        r_lhs, r_rhs = reference.split("=")
        p_zero = f"{p_lhs.strip()} - ({p_rhs.strip()})"
        r_zero = f"{r_lhs.strip()} - ({r_rhs.strip()})"
        if symbolic(p_zero, r_zero) or symbolic(f"-({p_zero})", r_zero):
            return True
    elif p_eq == 1 and len(prediction.split("=")[0].strip()) <= 2 and r_eq == 0:
        if equal(prediction.split("=")[1], reference, symbolic):
            return True
    elif r_eq == 1 and len(reference.split("=")[0].strip()) <= 2 and p_eq == 0:
        if equal(prediction, reference.split("=")[1], symbolic):
            return True
    return symbolic(prediction, reference)


# What parse_expr may see: names that are single letters or sympy's mathematical functions and constants, no
# attribute access, no strings, no underscores (which is how Python's internals are reached).
_SAFE_NAMES = frozenset("""
sqrt root cbrt exp log ln sin cos tan cot sec csc asin acos atan acot asec acsc sinh cosh tanh coth asinh acosh atanh
pi oo zoo nan Abs abs factorial binomial gcd lcm floor ceiling sign re im conjugate arg gamma Max Min max min
Rational Integer Float
""".split())
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ONE_GROUP = re.compile(r"\{([^{},]*)\}")


def _expression_is_inert(text: str) -> bool:
    if any(c in text for c in "'\"_`@;:\\") or re.search(r"\.\s*[A-Za-z_]", text):
        return False
    return all(len(name) == 1 or name in _SAFE_NAMES for name in _NAME.findall(text))


def _parse(text: str) -> Any:
    """sympy's LaTeX parser, else parse_expr, else latex2sympy, each tried on the text with `\\\\` read as `\\`
    and then as it is; the text itself when none reads it."""
    from latex2sympy2_extended import latex2sympy
    from latex2sympy2_extended.latex2sympy2 import ConversionConfig
    from latex2sympy2_extended.math_normalization import NormalizationConfig
    from sympy.parsing.latex import parse_latex
    from sympy.parsing.sympy_parser import parse_expr

    def guarded(expression: str) -> Any:
        if not _expression_is_inert(expression):
            raise ValueError("not handed to parse_expr")
        return parse_expr(expression)

    # latex2sympy2_extended as the latex2sympy AReaL ships reads LaTeX: no rewriting of the text first, letters kept
    # in their case, `1\frac12` a product, and a text that is one brace group (`{072}`) the group's content,
    # where latex2sympy2_extended would read a set.
    as_written = NormalizationConfig(basic_latex=False, units=False, malformed_operators=False, nits=False,
                                     boxed="none", equations=False)
    literal = ConversionConfig(interpret_as_mixed_fractions=False, interpret_simple_eq_as_assignment=False,
                               interpret_contains_as_eq=False, lowercase_symbols=False)

    def latex2sympy_as_areal(text: str) -> Any:
        group = _ONE_GROUP.fullmatch(text)
        return latex2sympy(group.group(1) if group else text, normalization_config=as_written,
                           conversion_config=literal)

    for parser in (parse_latex, guarded, latex2sympy_as_areal):
        for candidate in (text.replace("\\\\", "\\"), text):
            try:
                return parser(candidate)
            except Exception:
                continue
    return text


def symbolic_equal(a_text: str, b_text: str) -> bool:
    """AReaL's symbolic_equal: the same printed form, an equal simplification, equal equations, equal numeric
    values (within 1e-4), or equal matrices to three decimals."""
    from sympy import N, simplify

    a, b = _parse(a_text), _parse(b_text)
    checks = (lambda: str(a) == str(b) or a == b,
              lambda: a.equals(b) or simplify(a - b) == 0,
              lambda: abs(a.lhs - a.rhs).equals(abs(b.lhs - b.rhs)),
              lambda: _close(float(N(a)), float(N(b))),
              lambda: a.shape == b.shape and a.applyfunc(lambda x: round(x, 3)).equals(
                  b.applyfunc(lambda x: round(x, 3))))
    for check in checks:
        try:
            if check():
                return True
        except Exception:  # each check is one attempt; a type that lacks it (a text, a number) fails that one
            continue
    return False


def _defer(a: str, b: str) -> bool:
    raise _NeedsSympy


def _equal_in_child(prediction: str, reference: str) -> bool:
    try:
        return equal(prediction, reference, symbolic_equal)
    except Exception:  # AReaL's process_results scores any failure 0
        return False


def serve() -> None:
    """The child's loop: a JSON [prediction, reference] per line in, `true` or `false` per line out."""
    import json
    import os
    import resource
    import sys

    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY_BYTES, CHILD_MEMORY_BYTES))
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever sympy or ANTLR print must not mix with the replies
    symbolic_equal("1", "1")  # imports sympy and the parsers before the first comparison's clock starts
    replies.write("ready\n")
    replies.flush()
    for line in sys.stdin:
        prediction, reference = json.loads(line)
        replies.write(json.dumps(_equal_in_child(prediction, reference)) + "\n")
        replies.flush()


class _Child:
    """One child process that runs the sympy comparisons, started on first use (a plain interpreter running
    serve(), so that nothing of the worker's own process is re-imported), and replaced when a comparison outlives
    TIMEOUT_S or the child dies."""

    def __init__(self) -> None:
        self._process: Any = None
        self._lock = threading.Lock()

    def _start(self) -> Any:
        import subprocess
        import sys

        process = subprocess.Popen([sys.executable, "-c", "from rlcfg.runtime.areal_math_parser import serve; serve()"],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        import select

        ready, _, _ = select.select([process.stdout], [], [], CHILD_START_S)
        if not ready or process.stdout.readline() != "ready\n":
            process.kill()
            raise RuntimeError(f"the process that compares AReaL's math answers with sympy did not start within "
                               f"{CHILD_START_S:.0f} s ({sys.executable} -c 'from rlcfg.runtime.areal_math_parser "
                               "import serve; serve()' shows why)")
        return process

    def _stop(self) -> None:
        self._process.kill()
        self._process.wait()
        self._process = None

    def equal(self, prediction: str, reference: str) -> bool:
        import json
        import select

        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._process = self._start()
            try:
                self._process.stdin.write(json.dumps([prediction, reference]) + "\n")
                self._process.stdin.flush()
            except BrokenPipeError:
                self._stop()
                return False
            ready, _, _ = select.select([self._process.stdout], [], [], TIMEOUT_S)
            reply = self._process.stdout.readline() if ready else ""
            if not reply:  # out of time, or the child died (out of memory): AReaL scores that 0
                self._stop()
                return False
            return json.loads(reply) is True


_CHILD = _Child()


def score(response: str, answer: str | None) -> float:
    """The reward of AReaL's GSM8K scripts of 0.3 and 0.4: 1 when the response states the reference's answer,
    else 0."""
    if answer is None:
        return 0.0
    try:
        predicted = extract(response, last_number=False)
        gold = extract(answer, last_number=True)
    except Exception:  # AReaL's process_results scores any failure 0
        return 0.0
    if predicted.strip() in ("None", "none", "") or gold.strip() in ("None", "none", ""):
        return 0.0
    try:
        return float(equal(predicted, gold, _defer))
    except _NeedsSympy:
        return float(_CHILD.equal(predicted, gold))
    except Exception:
        return 0.0


def check_installed() -> None:
    """Raise ImportError, saying what to install, when sympy's LaTeX parser cannot run here: without it answers would
    be compared otherwise than in AReaL."""
    from sympy.parsing.latex import parse_latex

    try:
        parse_latex("1")
    except ImportError as err:
        raise ImportError("sympy's LaTeX parser, which runs on antlr4-python3-runtime 4.11 only (pip install "
                          "'antlr4-python3-runtime==4.11.*')") from err
