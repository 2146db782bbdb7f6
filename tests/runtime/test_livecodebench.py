"""SkyRL's lcb environment as rlcfg scores it: the response's last fenced program run against the task's tests in
the sandbox. Checked against expected verdicts, and (with MIRROR_ROOT) against SkyRL-Gym's own grader."""

import json
import os
import subprocess
import types

import pytest

from rlcfg.runtime import livecodebench, rewards
from tests.runtime.skyrl_gym import require_sandbox


@pytest.fixture(scope="module", autouse=True)
def bubblewrap():
    require_sandbox(livecodebench.check_ready)


def stdin_task(*pairs: tuple[str, str]) -> str:
    return json.dumps([{"input": i, "output": o, "testtype": "stdin"} for i, o in pairs])


def functional_task(name: str, *pairs: tuple[str, str]) -> str:
    return json.dumps([{"input": i, "output": o, "testtype": "functional", "metadata": {"func_name": name}}
                       for i, o in pairs])


def fenced(code: str, tag: str = "python") -> str:
    return f"Here is my solution.\n```{tag}\n{code}\n```\nDone."


ADD = stdin_task(("1 2\n", "3\n"), ("5 7", "12"))
HALVE = stdin_task(("3\n", "1.5\n"))
SCALE = functional_task("scale", ("[1, 2, 3]\n2", "[2, 4, 6]"), ("[]\n5", "[]"))
READ_ADD = "a, b = map(int, input().split())\nprint(a + b)"

CASES = [
    ("stdin, right", fenced(READ_ADD), ADD, 1.0),
    ("stdin, wrong", fenced("a, b = map(int, input().split())\nprint(a - b)"), ADD, 0.0),
    ("no code block", READ_ADD, ADD, 0.0),
    ("the last block counts", fenced(READ_ADD) + fenced("print(0)"), ADD, 0.0),
    ("a block without a tag", fenced(READ_ADD, tag=""), ADD, 1.0),
    ("main guard unwrapped", fenced("def main():\n    a, b = map(int, input().split())\n    print(a + b)\n\n"
                                    "if __name__ == '__main__':\n    main()"), ADD, 1.0),
    ("decimals compare as numbers", fenced("print(int(input()) / 2 + 0.00)"), HALVE, 1.0),
    ("1.50 is 1.5", fenced("print('1.50')"), HALVE, 1.0),
    ("an extra line fails", fenced("print(int(input()) / 2)\nprint()\nprint('x')"), HALVE, 0.0),
    ("the preamble's names", fenced("d = defaultdict(int)\nd[1] += float(np.float64(1.5))\nprint(d[1])"), HALVE,
     1.0),
    ("sys.stdin.read", fenced("import sys\nprint(sum(map(int, sys.stdin.read().split())))"), ADD, 1.0),
    ("exit after printing", fenced("import sys\nprint(sum(map(int, input().split())))\nsys.exit(0)"), ADD, 1.0),
    ("a runtime error", fenced("raise ValueError('no')"), ADD, 0.0),
    ("a syntax error", fenced("print(1 +"), ADD, 0.0),
    ("a disabled call", fenced("import os\nos.remove('x')\n" + READ_ADD), ADD, 0.0),
    ("closing stdout", fenced("import sys\nprint(3)\nsys.stdout.close()"), stdin_task(("", "3")), 0.0),
    ("functional, Solution", fenced("class Solution:\n    def scale(self, xs: List[int], k: int) -> List[int]:\n"
                                    "        return [x * k for x in xs]"), SCALE, 1.0),
    ("functional, module function, tuple", fenced("def scale(xs, k):\n    return tuple(x * k for x in xs)"), SCALE,
     1.0),
    ("functional, wrong", fenced("def scale(xs, k):\n    return xs"), SCALE, 0.0),
    ("functional, missing function", fenced("def other(xs, k):\n    return xs"), SCALE, 0.0),
    ("functional, numpy result", fenced("def scale(xs, k):\n    return np.array(xs) * k"), SCALE, 0.0),
]


@pytest.mark.parametrize("name, response, truth, expected", CASES, ids=[c[0] for c in CASES])
def test_a_program_scores_1_when_it_passes_every_test(name, response, truth, expected):
    assert rewards.get("lcb")(response, truth) == expected


def test_many_programs_are_graded_at_once_in_order():
    pairs = [(response, truth) for _name, response, truth, _expected in CASES]
    assert livecodebench.score_many(pairs) == [expected for *_rest, expected in CASES]


def test_a_program_that_runs_too_long_fails(monkeypatch):
    monkeypatch.setattr(livecodebench, "TEST_TIMEOUT_S", 1)
    assert livecodebench.score(fenced("while True: pass"), ADD) == 0.0
    assert livecodebench.score(fenced(READ_ADD), ADD) == 1.0


@pytest.mark.parametrize("truth", ["not json", "[]", json.dumps([{"input": "1"}]), json.dumps({"input": "1"}),
                                   json.dumps([{"input": "1", "output": "1", "testtype": "functional"}])])
def test_tests_not_in_skyrls_format_stop_the_run_with_what_is_wrong(truth):
    with pytest.raises(livecodebench.GroundTruthError, match="reward_spec.ground_truth|metadata.func_name"):
        livecodebench.score(fenced(READ_ADD), truth)


def _skyrl_grader() -> types.ModuleType:
    """SkyRL-Gym's livecodebench.py at the mirror's last commit (skipped without MIRROR_ROOT)."""
    root = os.environ.get("MIRROR_ROOT")
    if not root:
        pytest.skip("MIRROR_ROOT is not set")
    text = subprocess.run(["git", "-C", os.path.join(root, "NovaSky-AI+SkyRL", "repo"), "show",
                           "HEAD:skyrl-gym/skyrl_gym/envs/lcb/livecodebench.py"], capture_output=True, text=True,
                          check=True).stdout
    module = types.ModuleType("skyrl_lcb")
    exec(compile(text, "livecodebench.py", "exec"), module.__dict__)  # the framework's grader, as the oracle
    return module


def test_rlcfg_grades_as_skyrl_gyms_own_grader():
    theirs = _skyrl_grader()
    # Its grading process is forked from SkyRL's, which has numpy and pandas loaded (its data loading imports them):
    # the preamble then finds them in sys.modules rather than importing them after its guard.
    import importlib

    for module in ("numpy", "pandas"):
        importlib.import_module(module)

    for name, response, truth, _expected in CASES:
        assert livecodebench.score(response, truth) == theirs.compute_score(response, json.loads(truth))[1], name


def test_a_rollout_workers_scorer_grades_its_programs_in_one_batch(monkeypatch):
    from rlcfg.runtime.workers import RewardScorer

    graded = []
    real = livecodebench.score_many
    monkeypatch.setattr(livecodebench, "score_many", lambda pairs: graded.append(len(pairs)) or real(pairs))
    scorer = RewardScorer("lcb", tokenizer=None)
    right, wrong = fenced(READ_ADD), fenced("print(0)")
    assert scorer.score_texts([right, wrong, right], [ADD, ADD, ADD]) == [1.0, 0.0, 1.0]
    assert graded == [2]  # the repeated pair is graded once, the two new ones together
