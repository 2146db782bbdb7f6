"""SkyRL-Gym's `text2sql` environment (skyrl_gym/envs/sql): the model answers a question about a SQLite database in
turns; each turn may run one query (`<sql>...</sql>`) and see its rows, and the episode ends with a final query in
`<solution>...</solution>` or at the turn limit.

Read in skyrl-gym's envs/sql/env.py, envs/sql/utils.py and tools/sql.py, which say the same at every SkyRL release
whose multi-turn loop rlcfg runs (skyrl-train 0.3.0, 0.4.0 and its last commit, the skyrl package 0.1.0 to 0.4.0; up
to skyrl 0.2.0 the environment also stops the run on a turn that goes on after `</sql>` or `</solution>`, which the
stop strings the lowering requires there rule out; 0.3.0 times queries out with func_timeout, to the same texts),
and kept here as they are:
- a task is a row with `db_id`, `data` (spider, bird or synsql, which picks the folder under `db_path`) and the gold
  query in `reward_spec.ground_truth`; its database is `<db_path>/<folder>/<db_id>/<db_id>.sqlite`;
- a turn ends the episode when it holds both `<solution>` and `</solution>`, or when it is the last turn allowed;
  otherwise its first `<sql>` query runs (5 s at most) and the observation is the query's rows (or its error),
  wrapped in `<observation>` with a reminder of the turns left; a turn with no `<sql>` is told its action is invalid;
- the reward, at the end only: −1 unless the whole transcript (every turn and observation, joined) is well formed
  (one `<solution>`, some `<think>`, a `<think>` after every observation, no tags inside the solution); else 1 when
  the solution's query returns the same rows as the gold query (30 s each at most), else 0.

Every query runs in rlcfg's sandbox, with the databases read-only (rlcfg.runtime.sql_harness), one sandbox per
round of turns.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlcfg.runtime import sandbox
from rlcfg.runtime.episodes import EpisodeError, Step

HARNESS = Path(__file__).with_name("sql_harness.py")
TASK_FOLDERS = {"synsql": "SynSQL-2.5M/databases", "spider": "spider/database", "bird": "bird/train/train_databases"}
TOOL_TIMEOUT_S = 5.0
REWARD_TIMEOUT_S = 30.0
DATABASES = "/databases"  # where the sandbox sees db_path
_SQL = re.compile(r"<sql>(.*?)</sql>", re.DOTALL)
_THINK = re.compile(r"<think>(.*?)</think>", re.S)
_TAG_IN_SOLUTION = re.compile(r"</?(think|sql|observation)\b", re.I)
_OBSERVATION_END = re.compile(r"</observation>", re.I)


@dataclass
class Task:
    db_id: str
    db_file: str  # as the host sees it
    gold_sql: str
    max_turns: int
    turns: int = 0
    history: list[str] = field(default_factory=list)  # every turn and observation, in order


def make(settings: dict[str, Any], answer: str | None, max_turns: int) -> Task:
    """A task from a row's answer record (ir.Data.answer_fields: db_id, data, reward_spec, as JSON)."""
    try:
        record = json.loads(answer or "")
        db_id, task, gold = record["db_id"], record["data"], record["reward_spec"]["ground_truth"]
    except (ValueError, KeyError, TypeError):
        raise EpisodeError("a text2sql row needs `db_id`, `data` and `reward_spec.ground_truth`, as SkyRL's SQL "
                           "dataset has them") from None
    if task not in TASK_FOLDERS:
        raise EpisodeError(f"a text2sql row's `data` is {task!r}; the environment knows "
                           f"{', '.join(TASK_FOLDERS)}, which name the folder of its databases under db_path")
    db_file = os.path.join(str(settings["db_path"]), TASK_FOLDERS[task], db_id, db_id + ".sqlite")
    if not os.path.exists(db_file):
        raise EpisodeError(f"the database of task {db_id!r} is not at {db_file} (environment.skyrl_gym.text2sql."
                           "db_path); download SkyRL's SQL data there, or point db_path at it")
    return Task(db_id, db_file, str(gold), max_turns)


def well_formed(transcript: str) -> str | None:
    """The solution's query when the transcript has the form the reward asks for (verify_format_and_extract)."""
    if transcript.count("<solution>") != 1:
        return None
    before, tail = transcript.split("<solution>", 1)
    if tail.count("</solution>") != 1:
        return None
    solution, _ = tail.split("</solution>", 1)
    if _TAG_IN_SOLUTION.search(solution) or not _THINK.findall(transcript):
        return None
    for end in _OBSERVATION_END.finditer(before):
        if not before[end.end():].lstrip().lower().startswith("<think>"):
            return None
    return solution.strip()


def _sandbox_path(task: Task, db_path: str) -> str:
    """Where the sandbox sees the task's database: the same path under DATABASES as under db_path (as configured,
    before any link in it is resolved, as the task's own path is)."""
    return os.path.join(DATABASES, os.path.relpath(task.db_file, db_path))


def step(tasks: list[Task], actions: list[str], settings: dict[str, Any]) -> list[Step]:
    """One turn of each task: the model's `actions[i]` for `tasks[i]`. All queries of the round run in one
    sandbox."""
    db_path = str(settings["db_path"])
    jobs: list[dict[str, Any]] = []
    plans: list[tuple[str, Any]] = []
    for task, action in zip(tasks, actions):
        task.turns += 1
        task.history.append(action)
        done = task.turns >= task.max_turns or ("<solution>" in action and "</solution>" in action)
        inside = _sandbox_path(task, db_path)
        if done:
            solution = well_formed("".join(task.history))
            if solution is None:
                plans.append(("reward", -1.0))
            else:
                plans.append(("compare", len(jobs)))
                jobs.append({"kind": "compare", "db": inside, "pred": solution, "gold": task.gold_sql,
                             "timeout": REWARD_TIMEOUT_S})
            continue
        match = _SQL.search(action)
        if match is None:
            plans.append(("invalid", None))
        else:
            plans.append(("tool", len(jobs)))
            jobs.append({"kind": "tool", "db": inside, "shown": task.db_file, "sql": match.group(1),
                         "timeout": TOOL_TIMEOUT_S})
    results = _run(jobs, os.path.realpath(db_path)) if jobs else []
    steps = []
    for task, (kind, value) in zip(tasks, plans):
        if kind == "reward":
            steps.append(Step([], value, True))
        elif kind == "compare":
            steps.append(Step([], 1.0 if results[value] else 0.0, True))
        else:
            found = results[value] if kind == "tool" else ("Your previous action is invalid. Follow the format of "
                                                            "outputting thinking process and sql tool, and try again.")
            left = task.max_turns - task.turns
            text = (f"\n\n<observation>{found}\n<reminder>You have {left} turns left to complete the task."
                    f"</reminder></observation>\n\n")
            task.history.append(text)
            steps.append(Step([{"role": "user", "content": text}], 0.0, False))
    return steps


def _run(jobs: list[dict[str, Any]], db_path: str) -> list[Any]:
    # Each job may take its whole time limit; they run eight at a time inside the sandbox.
    budget = sum(job["timeout"] * (2 if job["kind"] == "compare" else 1) for job in jobs) / min(8, len(jobs)) + 30
    limits = sandbox.Limits(wall_s=budget, cpu_s=int(budget) + 1, memory_bytes=8 << 30, processes=64)
    results, done = sandbox.run_json({"harness.py": HARNESS.read_text(encoding="utf-8")},
                                     ["python", "-I", "harness.py"], limits, stdin=json.dumps({"jobs": jobs}),
                                     readonly=((db_path, DATABASES),))
    if not isinstance(results, list) or len(results) != len(jobs):
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the text2sql environment's queries did not run in the sandbox "
                           f"({'out of time' if done.timed_out else why})")
    return results


def check_ready(settings: dict[str, Any]) -> None:
    """Raise before a run starts when its queries could not run here: no sandbox, or no database folder."""
    sandbox.check_available()
    db_path = str(settings.get("db_path") or "")
    if not os.path.isdir(db_path):
        raise FileNotFoundError(f"the text2sql environment's databases are not at {db_path or '(unset)'} "
                                "(environment.skyrl_gym.text2sql.db_path); download SkyRL's SQL data and point "
                                "db_path at its db_files/data folder")
