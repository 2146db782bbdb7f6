"""SkyRL-Gym's text2sql environment as rlcfg runs it: queries in the sandbox against a read-only database, the
observations and rewards of each turn. Checked against expected values, and (with MIRROR_ROOT) against SkyRL-Gym's
own environment on the same turns."""

import json
import os
import sqlite3

import pytest

from rlcfg.runtime import text2sql
from rlcfg.runtime.episodes import EpisodeError
from tests.runtime.skyrl_gym import require_sandbox, rlcfg_steps, skyrl_gym_steps


@pytest.fixture(scope="module", autouse=True)
def bubblewrap():
    require_sandbox()


@pytest.fixture(scope="module")
def db_path(tmp_path_factory):
    root = tmp_path_factory.mktemp("sql")
    folder = root / "spider" / "database" / "shop"
    folder.mkdir(parents=True)
    with sqlite3.connect(folder / "shop.sqlite") as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, price INTEGER, stock INTEGER)")
        conn.executemany("INSERT INTO items VALUES (?, ?, ?)", [(i, 10 * i, i % 3) for i in range(1, 8)])
    conn.close()
    os.chmod(folder / "shop.sqlite", 0o444)
    return str(root)


GOLD = "SELECT id FROM items WHERE stock = 0"


def answer(db_id="shop", data="spider", gold=GOLD):
    return json.dumps({"db_id": db_id, "data": data, "reward_spec": {"ground_truth": gold}})


def run(db_path, actions, max_turns=3):
    task = text2sql.make({"db_path": db_path}, answer(), max_turns)
    return [text2sql.step([task], [a], {"db_path": db_path})[0] for a in actions]


QUERY = "<think>look</think><sql>SELECT price FROM items WHERE id = 2</sql>"
RIGHT = "<think>the zero-stock ones</think><solution>SELECT id FROM items WHERE stock = 0</solution>"


def test_a_query_turn_shows_its_rows_and_the_turns_left(db_path):
    first = run(db_path, [QUERY])[0]
    assert not first.done and first.reward == 0.0
    # the rows as pandas prints a frame of them: columns numbered, not named
    assert first.observations == [{"role": "user", "content": "\n\n<observation> 0\n20\n<reminder>You have 2 "
                                                              "turns left to complete the task.</reminder>"
                                                              "</observation>\n\n"}]


def test_a_right_solution_after_a_query_scores_1(db_path):
    steps = run(db_path, [QUERY, RIGHT])
    assert steps[-1].done and steps[-1].reward == 1.0 and steps[-1].observations == []


def test_a_wrong_solution_scores_0_and_a_malformed_transcript_minus_1(db_path):
    wrong = RIGHT.replace("stock = 0", "stock = 1")
    assert run(db_path, [wrong])[0].reward == 0.0
    assert run(db_path, ["<solution>" + GOLD + "</solution>"])[0].reward == -1.0  # no <think>
    # an observation must be followed by <think>
    assert run(db_path, [QUERY, "<solution>" + GOLD + "</solution><think>x</think>"])[-1].reward == -1.0


def test_the_last_turn_ends_the_episode_whatever_it_says(db_path):
    steps = run(db_path, [QUERY, QUERY], max_turns=2)
    assert [s.done for s in steps] == [False, True] and steps[-1].reward == -1.0


def test_an_action_without_a_query_is_told_it_is_invalid(db_path):
    content = run(db_path, ["I am thinking"])[0].observations[0]["content"]
    assert "Your previous action is invalid." in content and "You have 2 turns left" in content


def test_an_error_names_the_database_as_the_host_sees_it(db_path):
    content = run(db_path, ["<sql>SELECT nope FROM items</sql>"])[0].observations[0]["content"]
    shown = os.path.join(db_path, "spider", "database", "shop", "shop.sqlite")
    assert f"Error executing SQL: no such column: nope, db file: {shown}" in content


def test_a_statement_that_writes_returns_its_rows_and_changes_nothing(db_path):
    content = run(db_path, ["<sql>DELETE FROM items RETURNING id</sql>"])[0].observations[0]["content"]
    # SkyRL runs it in a transaction it rolls back: the deleted ids, and the file as it was
    assert "Error" not in content and "\n 7\n" in content
    with sqlite3.connect(os.path.join(db_path, "spider", "database", "shop", "shop.sqlite")) as conn:
        assert conn.execute("SELECT count(*) FROM items").fetchone() == (7,)


def test_a_slow_query_times_out(db_path, monkeypatch):
    monkeypatch.setattr(text2sql, "TOOL_TIMEOUT_S", 0.5)
    forever = ("<sql>WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n</sql>")
    content = run(db_path, [forever])[0].observations[0]["content"]
    assert content.startswith("\n\n<observation>SQL Timeout:\nWITH RECURSIVE")


def test_a_query_writes_nothing_outside_the_sandbox(db_path, tmp_path):
    target = tmp_path / "attached.db"
    content = run(db_path, [f"<sql>ATTACH DATABASE '{target}' AS x</sql>"])[0].observations[0]["content"]
    assert not target.exists() and "<observation>" in content


def test_a_row_without_its_database_is_a_clear_error(db_path):
    with pytest.raises(EpisodeError, match="not at .*nowhere.sqlite"):
        text2sql.make({"db_path": db_path}, answer(db_id="nowhere"), 3)
    with pytest.raises(EpisodeError, match="`data` is 'mysql'"):
        text2sql.make({"db_path": db_path}, answer(data="mysql"), 3)
    with pytest.raises(EpisodeError, match="db_id"):
        text2sql.make({"db_path": db_path}, json.dumps({"data": "spider"}), 3)


def test_check_ready_names_a_missing_database_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="db_path"):
        text2sql.check_ready({"db_path": str(tmp_path / "absent")})


# ---- against SkyRL-Gym's own environment ----------------------------------------------------------------------

SEQUENCES = [
    [QUERY, RIGHT],
    ["<think>a</think><sql>SELECT nope FROM items</sql>", "<think>b</think><sql>SELECT id FROM items</sql>",
     "<think>c</think><solution>SELECT id FROM items</solution>"],
    ["no query here", QUERY, "<think>x</think>"],
    ["<think>a</think><sql>SELECT id, price FROM items WHERE price > 30</sql>",
     RIGHT.replace("stock = 0", "stock = 2")],
    ["<solution>SELECT 1</solution>"],
]


def test_rlcfg_steps_as_skyrl_gyms_own_environment(db_path, tmp_path_factory):
    expected = skyrl_gym_steps(tmp_path_factory, f"""
from skyrl_gym.envs.sql.env import SQLEnv, Text2SQLEnvConfig
env = SQLEnv(Text2SQLEnvConfig(db_path={db_path!r}), {{"db_id": "shop", "data": "spider",
             "reward_spec": {{"ground_truth": {GOLD!r}}}, "max_turns": 3}})""", SEQUENCES)
    settings = {"db_path": db_path}
    ours = rlcfg_steps(lambda: text2sql.make(settings, answer(), 3),
                       lambda task, action: text2sql.step([task], [action], settings)[0], SEQUENCES)
    assert ours == expected


def test_a_database_folder_reached_through_a_link_is_found_inside_the_sandbox(db_path, tmp_path):
    link = tmp_path / "linked"
    link.symlink_to(db_path)
    task = text2sql.make({"db_path": str(link)}, answer(), 3)
    [step] = text2sql.step([task], [QUERY], {"db_path": str(link)})
    assert " 0\n20\n" in step.observations[0]["content"]
