"""The program that grades one LiveCodeBench answer, run inside rlcfg's sandbox (rlcfg.runtime.sandbox), never in
rlcfg's own process. It reads `job.json` from its folder: {"code": the model's program, "inputs": [...],
"outputs": [...], "fn_name": the function a functional task calls, or null for one that reads stdin,
"timeout": seconds per test}. Its last line of output is {"passed": bool, "verdict": "..."}.

It grades as SkyRL-Gym's `lcb` environment does (skyrl_gym/envs/lcb/livecodebench.py, the same file at every
SkyRL release rlcfg claims):
- the program runs after a fixed preamble of imports (numpy and pandas among them), so it may use those names
  without importing them;
- a functional task calls `fn_name` on the module, or on `Solution()` when the program mentions `class Solution`,
  with each test's input lines read as JSON arguments, and compares the result (a tuple as a list) with `==`;
- a stdin task wraps everything but the imports in a function (unwrapping a final `if __name__ == '__main__':`),
  runs it with the test's input as sys.stdin and as every file `open` returns, and compares the printed lines, each
  stripped, as strings or else as whitespace-separated decimals;
- a test runs under an alarm of `timeout` seconds; the first failure ends the grading;
- os, shutil and subprocess lose the calls that kill, fork, delete, rename or change directories, as there.
"""

import ast
import json
import os
import signal
import sys
from decimal import Decimal
from io import StringIO
from types import ModuleType
from unittest.mock import mock_open, patch

# Names the graded program finds already imported (the environment's preamble; numpy and pandas must be installed).
PREAMBLE = "\n".join([
    "from itertools import accumulate, chain, combinations, count, permutations, product, groupby, islice, repeat",
    "from copy import deepcopy",
    "from string import ascii_lowercase, ascii_uppercase",
    "from math import floor, log2, log10, sqrt, comb, gcd, ceil, inf, isqrt, factorial, atan2, pi",
    "from collections import defaultdict, deque, Counter",
    "from bisect import bisect, bisect_left, bisect_right, insort",
    "from heapq import heappush, heappop, heapify, merge, nlargest, nsmallest, heapreplace",
    "from functools import reduce, cache, lru_cache, cmp_to_key, reduce",
    "from random import randrange, shuffle",
    "from operator import itemgetter, sub, xor, or_",
    "from re import search as re_search",
    "from os.path import commonprefix",
    "from typing import List, Tuple, Dict, Set, Optional, Union, Any, Callable, Iterable, Iterator, Generator, Deque",
    "import copy", "import string", "import math", "import collections", "import bisect", "import heapq",
    "import functools", "import random", "import itertools", "import operator", "import re", "import datetime",
    "from time import time",
    "import numpy as np", "import pandas as pd",
    "from math import log, prod",
    "from collections import deque, defaultdict, Counter, OrderedDict",
    "from itertools import accumulate, permutations, combinations, product, groupby, islice, chain, repeat, "
    "zip_longest, cycle, pairwise",
    "from functools import lru_cache, reduce, partial",
    "from operator import iand",
    "import sys",
    "import io, os",
]) + "\n"

# What the environment takes away before the program runs (its reliability_guard).
DISABLED = {
    "os": ("kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork", "forkpty",
           "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod", "fchown", "chmod", "chown",
           "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir"),
    "shutil": ("rmtree", "move", "chown"),
    "subprocess": ("Popen",),
}
HIDDEN_MODULES = ("ipdb", "joblib", "resource", "psutil", "tkinter")


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout


def unwrap_main(code):
    try:
        body = ast.parse(code).body
        last = body[-1]
        if isinstance(last, ast.If) and ast.unparse(last.test).strip() == "__name__ == '__main__'":
            return ast.unparse(body[:-1]) + "\n" + ast.unparse(last.body)
    except Exception:
        pass
    return code


def as_function(code):
    """The program's imports at the top, the rest the body of `wrapped_function`, after the preamble."""
    try:
        body = ast.parse(code).body
        imports = [s for s in body if isinstance(s, (ast.Import, ast.ImportFrom))]
        rest = [s for s in body if not isinstance(s, (ast.Import, ast.ImportFrom))]
        function = ast.FunctionDef(name="wrapped_function", body=rest, decorator_list=[], lineno=-1,
                                   args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[],
                                                      defaults=[]))
        return PREAMBLE + "\n" + ast.unparse(imports) + "\n" + ast.unparse(function)
    except Exception:
        return code


def load(code, timeout):
    signal.alarm(timeout)
    try:
        module = ModuleType("tmp_sol", "")
        exec(code, module.__dict__)
        return module.Solution() if "class Solution" in code else module
    finally:
        signal.alarm(0)


def decimals(line):
    try:
        return [Decimal(token) for token in line.split()]
    except Exception:
        return None


def same_output(printed, expected):
    printed_lines = [line.strip() for line in printed.strip().split("\n")]
    expected_lines = [line.strip() for line in expected.strip().split("\n")]
    if len(printed_lines) != len(expected_lines):
        return False
    for mine, theirs in zip(printed_lines, expected_lines):
        if mine == theirs:
            continue
        mine_numbers, their_numbers = decimals(mine), decimals(theirs)
        if mine_numbers is None or their_numbers is None or mine_numbers != their_numbers:
            return False
    return True


def grade_functional(code, inputs, outputs, fn_name, timeout):
    solution = load(PREAMBLE + "\n\n" + code, timeout)
    method = getattr(solution, fn_name)
    arguments = [[json.loads(line) for line in text.split("\n")] for text in inputs]
    expected = [json.loads(text) for text in outputs]
    results = []
    for args, want in zip(arguments, expected):
        signal.alarm(timeout)
        try:
            got = method(*args)
        finally:
            signal.alarm(0)
        if isinstance(got, tuple):
            got = list(got)
        same = got == want
        results.append(same)
        if not same:
            return results, "wrong answer"
    return results, "accepted"


def grade_stdin(code, inputs, outputs, timeout):
    method = getattr(load(as_function(unwrap_main(code)), timeout), "wrapped_function")
    results = []
    for given, want in zip(inputs, outputs):
        text = "\n".join(given) if isinstance(given, list) else given
        printed = StringIO()
        # the environment's capture stream takes one argument in close(), so a program calling close() fails there
        printed.close = lambda x: 1
        real_stdout = sys.stdout
        signal.alarm(timeout)
        try:
            sys.stdout = printed
            with patch("builtins.open", mock_open(read_data=text)), patch("sys.stdin", StringIO(text)):
                try:
                    method()
                except SystemExit:
                    pass
        finally:
            signal.alarm(0)
            sys.stdout = real_stdout
        same = same_output(printed.getvalue(), want)
        results.append(same)
        if not same:
            return results, "wrong answer"
    return results, "accepted"


def guard():
    import builtins
    import importlib

    builtins.quit = None
    os.environ["OMP_NUM_THREADS"] = "1"
    for module_name, names in DISABLED.items():
        module = importlib.import_module(module_name)
        for name in names:
            setattr(module, name, None)
    builtins.help = None
    for name in HIDDEN_MODULES:
        sys.modules[name] = None


def main():
    with open("job.json", encoding="utf-8") as f:
        job = json.load(f)
    report = os.fdopen(os.dup(1), "w")  # the verdict's channel; the program's own output goes elsewhere
    sys.stdout = open(os.devnull, "w")
    signal.signal(signal.SIGALRM, _alarm)
    # The environment grades in a process forked from SkyRL's, where numpy and pandas are long imported; importing
    # them after the guard would fail (numpy calls os.putenv as it loads).
    exec(PREAMBLE, {})
    guard()
    try:
        if job["fn_name"] is not None:
            results, verdict = grade_functional(job["code"], job["inputs"], job["outputs"], job["fn_name"],
                                                job["timeout"])
        else:
            results, verdict = grade_stdin(job["code"], job["inputs"], job["outputs"], job["timeout"])
    except Timeout:
        results, verdict = [False], "time limit"
    except BaseException as err:  # the graded program's failure, whatever it raised
        results, verdict = [False], f"error: {type(err).__name__}"
    report.write("\n" + json.dumps({"passed": all(r is True for r in results), "verdict": verdict}) + "\n")
    report.flush()


if __name__ == "__main__":
    main()
