"""Runs the SQL of one round of text2sql episodes, inside rlcfg's sandbox (rlcfg.runtime.sandbox), and prints the
results as one JSON list, in the order of the jobs.

It is the part of SkyRL-Gym's text2sql environment that touches a database (skyrl_gym/tools/sql.py and
envs/sql/utils.py): it runs what the model wrote, so it runs where that can do no harm. Two kinds of job, read from
stdin as {"jobs": [...]}:
- `tool`: the model's `<sql>` query, as the environment's sql tool runs it: its rows as pandas prints them (50 rows
  where the text would pass 9,000 characters), "Error executing SQL: ..." on an error, "SQL Timeout:" past the
  time limit;
- `compare`: the `<solution>` query against the task's gold query, as the reward runs them: true when both ran and
  returned the same set of rows.

The databases are mounted read-only. SkyRL runs each query in a transaction it rolls back, so a statement that
writes returns its rows and leaves the file as it was; here such a statement runs again on a copy of the database in
memory, in the same kind of transaction, which gives the same rows and the same errors.

Nothing outside the standard library and pandas is imported: this file runs by itself, as a script.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

READ_ONLY_ERROR = "attempt to write a readonly database"
MAX_OBSERVATION_CHARS = 9000
TRUNCATED_ROWS = 50


def _connect(path: str, in_memory: bool) -> sqlite3.Connection:
    # immutable: the file cannot change while a run reads it, so SQLite takes no locks and needs no journal beside
    # it (the folder is read-only)
    source = sqlite3.connect(f"file:{path}?immutable=1", uri=True, check_same_thread=False)
    if not in_memory:
        return source
    copy = sqlite3.connect(":memory:", check_same_thread=False)
    source.backup(copy)
    source.close()
    return copy


def _rows(path: str, sql: str, timeout: float, in_memory: bool = False):
    """(rows as a frozenset, None) or (None, the error's text), or (None, None) past the time limit."""
    result: dict = {}
    done = threading.Event()
    holder: dict = {}

    def work() -> None:
        conn = None
        try:
            conn = _connect(path, in_memory)
            holder["conn"] = conn
            cursor = conn.cursor()
            conn.execute("BEGIN TRANSACTION;")
            cursor.execute(sql)
            result["rows"] = frozenset(cursor.fetchall())
            conn.rollback()
        except Exception as exc:  # the model's SQL: any error is its observation
            result["error"] = exc
        finally:
            if conn is not None:
                try:
                    conn.rollback()
                except Exception:
                    pass
                try:
                    conn.close()
                except Exception:
                    pass
            done.set()

    threading.Thread(target=work, daemon=True).start()
    if not done.wait(timeout):
        conn = holder.get("conn")
        if conn is not None:
            try:
                conn.interrupt()
            except Exception:
                pass
        done.wait()
        return None, None
    error = result.get("error")
    if error is not None and not in_memory and READ_ONLY_ERROR in str(error):
        return _rows(path, sql, timeout, in_memory=True)
    if error is not None:
        return None, str(error)
    return result["rows"], None


def tool(job: dict) -> str:
    rows, error = _rows(job["db"], job["sql"], job["timeout"])
    if rows is None and error is None:
        return f"SQL Timeout:\n{job['sql']}"
    if rows is None:
        return f"Error executing SQL: {error}, db file: {job['shown']}"
    import pandas as pd

    frame = pd.DataFrame(rows)
    text = frame.to_string(index=False)
    if len(text) > MAX_OBSERVATION_CHARS:
        text = (f"Truncated to {TRUNCATED_ROWS} lines since returned response too long: "
                + frame.head(TRUNCATED_ROWS).to_string(index=False))
    return text


def compare(job: dict) -> bool:
    predicted, _ = _rows(job["db"], job["pred"], job["timeout"])
    gold, _ = _rows(job["db"], job["gold"], job["timeout"])
    return predicted is not None and gold is not None and predicted == gold


def main() -> None:
    jobs = json.loads(sys.stdin.read())["jobs"]

    def one(job: dict):
        return tool(job) if job["kind"] == "tool" else compare(job)

    with ThreadPoolExecutor(max_workers=min(8, max(1, len(jobs)))) as pool:
        results = list(pool.map(one, jobs))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
