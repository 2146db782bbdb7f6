"""SkyRL-Gym's search environment as rlcfg runs it: queries to a retrieval server, the observations and rewards of
each turn. Checked against expected values on a local server, and (with MIRROR_ROOT) against SkyRL-Gym's own
environment on the same turns and server."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rlcfg.runtime import search
from rlcfg.runtime.episodes import EpisodeError
from rlcfg.runtime.smoke import serve_retrieval
from tests.runtime.skyrl_gym import rlcfg_steps, skyrl_gym_steps


@pytest.fixture(scope="module")
def server():
    return serve_retrieval()


def settings(url):
    return {"search_url": url, "topk": 2, "timeout": 5}


def answer(*targets):
    return json.dumps({"reward_spec": {"ground_truth": {"target": list(targets)}}})


def run(url, actions, max_turns=3, targets=("Pim",)):
    task = search.make(settings(url), answer(*targets), max_turns)
    return [search.step([task], [a], settings(url))[0] for a in actions]


QUERY = "<think>look it up</think><search> capital of Zorland </search>"


def test_a_query_returns_the_passages_as_the_tool_prints_them(server):
    first = run(server, [QUERY])[0]
    assert not first.done and first.reward == 0.0
    expected = json.dumps({"result": "Doc 1: The capital of Zorland is Pim.\n"})
    assert first.observations == [{"role": "user", "content": f"\n<information>{expected}</information>\n"}]


def test_a_turn_without_a_query_gets_empty_information(server):
    assert run(server, ["thinking"])[0].observations[0]["content"] == "\n<information></information>\n"


def test_the_last_answer_of_the_transcript_is_scored_after_normalising(server):
    assert run(server, [QUERY, "<answer> the PIM. </answer>"])[-1].reward == 1.0
    assert run(server, ["<answer>Aro</answer>"])[0].reward == 0.0
    # an unclosed answer neither ends the episode nor scores
    assert run(server, ["<answer>Pim</answer"] + ["x"] * 2, max_turns=3)[-1].reward == 0.0
    assert run(server, [QUERY, "<answer>Pim</answer>"], targets=("Aro", "pim"))[-1].reward == 1.0


def test_the_turn_limit_ends_the_episode(server):
    steps = run(server, [QUERY, QUERY], max_turns=2)
    assert [s.done for s in steps] == [False, True] and steps[-1].observations == []


class Failing(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_server_that_refuses_is_reported_in_the_observation():
    failing = ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=failing.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{failing.server_address[1]}/retrieve"
    content = run(url, [QUERY])[0].observations[0]["content"]
    result = json.loads(content.removeprefix("\n<information>").removesuffix("</information>\n"))["result"]
    assert result.startswith("Search error: [Search Request ID: ") and "API Request Error" in result
    failing.shutdown()


def test_a_row_without_targets_is_a_clear_error():
    with pytest.raises(EpisodeError, match="reward_spec.ground_truth.target"):
        search.make({}, json.dumps({"reward_spec": {"ground_truth": "Pim"}}), 3)


def test_check_ready_wants_an_http_url():
    with pytest.raises(FileNotFoundError, match="search_url"):
        search.check_ready({"search_url": "127.0.0.1:8000/retrieve"})


# ---- against SkyRL-Gym's own environment ----------------------------------------------------------------------

SEQUENCES = [
    [QUERY, "<think>so</think><answer>Pim</answer>"],
    ["no query", "<search>capital of Quess</search>", "<answer>Aro</answer>"],
    ["<search>nothing matches</search>", "<search>capital of Velt</search>", "<answer>pim</answer>"],
    ["<answer>The Pim</answer>"],
]


def test_rlcfg_steps_as_skyrl_gyms_own_environment(server, tmp_path_factory):
    expected = skyrl_gym_steps(tmp_path_factory, f"""
from skyrl_gym.envs.search.env import SearchEnv, SearchEnvConfig
env = SearchEnv(SearchEnvConfig(search_url={server!r}, topk=2, timeout=5),
                {{"reward_spec": {{"ground_truth": {{"target": ["Pim"]}}}}, "max_turns": 3}})""", SEQUENCES)
    ours = rlcfg_steps(lambda: search.make(settings(server), answer("Pim"), 3),
                       lambda task, action: search.step([task], [action], settings(server))[0], SEQUENCES)
    assert ours == expected
