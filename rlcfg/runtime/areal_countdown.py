"""AReaL's countdown reward (examples/countdown/reward_score.py, the same from 0.3 to 1.0), computed without eval.

A response scores CORRECT when the equation in the last `<answer>...</answer>` of its last line uses the given
numbers, each exactly once, and comes within 1e-5 of the target; FORMAT for any other equation; 0 when it writes
none. AReaL checks the equation's characters (digits, `+ - * / ( ) .` and white space) and computes it with Python's
eval(). rlcfg parses those characters with Python's grammar for them (its literals, `**` and `//`, unary signs,
parentheses across line breaks, the 200-deep nesting limit) and computes with Python's own operators on Python
numbers, so an equation comes to the value eval gives it, complex and infinite ones included, and fails where eval
raises (a syntax error, a division by zero, an overflow, a call such as `2(3)`).

Where rlcfg stops short of eval: an integer power or product whose result would pass MAX_BITS bits fails here,
where eval would go on computing it (`99**99**99` never finishes), and an equation nested more than MAX_NESTING
operators deep fails here, where eval's own limit depends on the interpreter (about 2,000 to 3,000 on CPython 3.11).
Both score FORMAT, as AReaL scores every equation it cannot compute.
"""

from __future__ import annotations

import json
import operator
import re
from typing import Any, Callable

CORRECT = 1.0  # compute_score's `score`
FORMAT = 0.1  # its `format_score`: an equation that is not right
TOLERANCE = 1e-5  # |value − target| below this is right
MAX_BITS = 1 << 20  # the largest integer an equation may reach on its way (eval has no limit and may never finish)
MAX_PARENTHESES = 200  # Python's tokenizer refuses deeper nesting ("too many nested parentheses")
MAX_NESTING = 1000  # unary signs and powers in one chain

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_ALLOWED = re.compile(r"^[\d+\-*/().\s]+$")  # reward_score.py's check before eval
_NUMBERS = re.compile(r"\d+")
# Python's tokens over the allowed characters. A number is digits with at most one point (Python reads `1.2.3` as two
# numbers in a row, which is a syntax error here as there); every other character is an operator, a parenthesis or
# white space: space, tab and form feed anywhere, a line break only inside parentheses, any other white space (and
# any digit outside ASCII) nowhere.
_TOKEN = re.compile(r"(?P<number>[0-9]+\.?[0-9]*|\.[0-9]+)|(?P<op>\*\*|//|[-+*/()])|(?P<space>[ \t\f]+)"
                    r"|(?P<newline>[\r\n])")
_LEADING_ZERO = re.compile(r"0+[1-9]")  # `012` is a syntax error in Python 3; `00`, `0.5` and `012.5` are not


class _Failed(Exception):
    """The equation does not compute: eval would raise (or, past MAX_BITS, not finish)."""


class _TooLarge(_Failed):
    """An integer on the way passes MAX_BITS bits."""


def extract_equation(response: str) -> str | None:
    """reward_score.extract_solution: after the first "Assistant:" (or `<|im_start|>assistant`) if there is one, the
    response's last line, and in it the last `<answer>...</answer>`, stripped."""
    if "Assistant:" in response:
        response = response.split("Assistant:", 1)[1]
    elif "<|im_start|>assistant" in response:
        response = response.split("<|im_start|>assistant", 1)[1]
    found = _ANSWER.findall(response.split("\n")[-1])
    return found[-1].strip() if found else None


def uses_numbers(equation: str, numbers: Any) -> bool:
    """reward_score.validate_equation: the equation's digit runs, as integers, are the given numbers (each once)."""
    try:
        return sorted(int(n) for n in _NUMBERS.findall(equation)) == sorted(numbers)
    except Exception:  # numbers that do not sort with integers (strings, None) match nothing, as in AReaL
        return False


def _tokens(equation: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    depth, at = 0, 0
    while at < len(equation):
        match = _TOKEN.match(equation, at)
        if match is None:
            raise _Failed(f"unexpected character {equation[at]!r}")
        at = match.end()
        kind, text = match.lastgroup or "", match.group()
        if kind == "space" or (kind == "newline" and depth > 0):  # line breaks join inside parentheses
            continue
        if kind == "newline":
            raise _Failed("a line break outside parentheses")
        if kind == "number" and "." not in text and _LEADING_ZERO.match(text):
            raise _Failed("a decimal integer with a leading zero")
        if text == "(":
            depth += 1
            if depth > MAX_PARENTHESES:
                raise _Failed("too many nested parentheses")
        elif text == ")":
            depth -= 1
        tokens.append((kind, text))
    return tokens


def _literal(text: str) -> int | float:
    if "." in text:
        return float(text)
    try:
        return int(text)
    except ValueError as exc:  # past Python's limit on the digits of an integer literal
        raise _Failed(str(exc)) from None


def _bits(value: Any) -> int:
    return value.bit_length() if isinstance(value, int) else 0


def _power(base: Any, exponent: Any) -> Any:
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1 and \
            exponent * (_bits(base) - 1) > MAX_BITS:
        raise _TooLarge("the power passes MAX_BITS bits")
    return base ** exponent


def _product(left: Any, right: Any) -> Any:
    if _bits(left) + _bits(right) > MAX_BITS:
        raise _TooLarge("the product passes MAX_BITS bits")
    return left * right


_ADDITIVE: dict[str, Callable[[Any, Any], Any]] = {"+": operator.add, "-": operator.sub}
_MULTIPLICATIVE: dict[str, Callable[[Any, Any], Any]] = {"*": _product, "/": operator.truediv,
                                                          "//": operator.floordiv}


class _Parser:
    """Python's expression grammar over the allowed tokens, computing as it reads, left operand first:
    sum := term (("+" | "-") term)*; term := factor (("*" | "/" | "//") factor)*; factor := ("+" | "-")* power;
    power := atom ("**" factor)?; atom := number | "(" sum ")"."""

    def __init__(self, tokens: list[tuple[str, str]]):
        self.tokens, self.at = tokens, 0

    def peek(self) -> str | None:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        if self.at >= len(self.tokens):
            raise _Failed("the equation ends early")
        self.at += 1
        return self.tokens[self.at - 1]

    def whole(self) -> Any:
        value = self.sum()
        if self.at != len(self.tokens):
            raise _Failed(f"unexpected {self.peek()!r}")
        return value

    # sum and term are written out rather than shared through a helper: each level of parentheses costs Python
    # frames, and Python's own 200 levels must fit in the interpreter's default recursion limit.
    def sum(self) -> Any:
        value = self.term()
        while self.peek() in _ADDITIVE:
            op = _ADDITIVE[self.take()[1]]
            value = op(value, self.term())
        return value

    def term(self) -> Any:
        value = self.factor()
        while self.peek() in _MULTIPLICATIVE:
            op = _MULTIPLICATIVE[self.take()[1]]
            value = op(value, self.factor())
        return value

    def signs(self) -> list[str]:
        signs = []
        while self.peek() in ("+", "-"):
            signs.append(self.take()[1])
        return signs

    def factor(self) -> Any:
        # A chain `-a ** -b ** c` is -(a ** (-(b ** c))): read left to right, then computed from the right, without
        # one Python frame per link.
        links = [(self.signs(), self.atom())]
        while self.peek() == "**":
            self.take()
            links.append((self.signs(), self.atom()))
        if sum(len(signs) for signs, _ in links) + len(links) > MAX_NESTING:
            raise _Failed("nested too deep")
        value = None
        for signs, atom in reversed(links):
            value = atom if value is None else _power(atom, value)
            for sign in reversed(signs):
                value = -value if sign == "-" else +value
        return value

    def atom(self) -> Any:
        kind, text = self.take()
        if kind == "number":
            value: Any = _literal(text)
        elif text == "(":
            if self.peek() == ")":
                raise _Failed("() is an empty tuple, not a number")
            value = self.sum()
            if self.take()[1] != ")":
                raise _Failed("an unclosed parenthesis")
        else:
            raise _Failed(f"unexpected {text!r}")
        if self.peek() == "(":
            raise _Failed("a number is not callable")
        return value


def evaluate(equation: str) -> Any:
    """reward_score.evaluate_equation of an equation as extract_equation gives it (stripped): its value, or None where
    its characters are not allowed or where eval would raise."""
    if not _ALLOWED.match(equation):
        return None
    try:
        return _Parser(_tokens(equation)).whole()
    except (_Failed, ArithmeticError, ValueError, TypeError, MemoryError, RecursionError):  # eval's, or rlcfg's bounds
        return None


def passes_max_bits(equation: str) -> bool:
    """Whether computing the equation passes MAX_BITS bits, where eval would go on for as long as it takes (so a
    comparison with eval must leave it out)."""
    try:
        _Parser(_tokens(equation)).whole()
    except _TooLarge:
        return True
    except Exception:
        return False
    return False


def score(response: str, answer: str | None) -> float:
    """reward_score.compute_score with its defaults. `answer` is the record of COUNTDOWN_ANSWER_FIELDS as JSON text
    (ir.Data.answer_fields)."""
    if answer is None:
        return 0.0
    truth = json.loads(answer)
    equation = extract_equation(response)
    if equation is None:
        return 0.0
    if not uses_numbers(equation, truth["numbers"]):
        return FORMAT
    value = evaluate(equation)
    if value is None:
        return FORMAT
    try:
        return CORRECT if abs(value - truth["target"]) < TOLERANCE else FORMAT
    except Exception:  # a target that does not subtract from a number (AReaL catches it the same way)
        return FORMAT
