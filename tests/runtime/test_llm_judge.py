"""SkyRL's LLM-as-a-judge reward: what is sent to the judge, how its reply is read, and what a failing judge scores,
against a local stand-in of an OpenAI-compatible endpoint."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rlcfg.runtime import llm_judge, rewards


class Judge:
    """An OpenAI-compatible /chat/completions that answers with the queued replies (an int: that HTTP status)."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.requests = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                outer.requests.append((self.path, self.headers.get("Authorization"),
                                       json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
                reply = outer.replies.pop(0)
                if isinstance(reply, int):
                    self.send_response(reply)
                    self.end_headers()
                    return
                body = json.dumps({"choices": [{"message": {"role": "assistant", "content": reply}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setattr(llm_judge.time, "sleep", lambda s: None)


def score(judge, response="3 + 4 = 7\n#### 7", gold="#### 7"):
    return rewards.get("llm_judge", {"model": "judge-7b", "base_url": judge.url})(response, gold)


def test_the_judge_is_asked_with_the_examples_prompt_and_its_final_score_is_the_reward():
    judge = Judge(["The numbers match.\n### Final Score: 1"])
    assert score(judge) == 1.0
    path, auth, body = judge.requests[0]
    assert path == "/v1/chat/completions" and auth == "Bearer sk-test" and body["model"] == "judge-7b"
    [message] = body["messages"]
    assert message["role"] == "user" and message["content"].startswith(llm_judge.PROMPT)
    assert message["content"].endswith("GOLD SOLUTION:\n#### 7\n\nPREDICTED SOLUTION:\n3 + 4 = 7\n#### 7\n\nAnswer:")


@pytest.mark.parametrize("reply, expected", [("### Final Score: 0", 0.0), ("### Final Score: 1.0", 1.0),
                                             (" 1 ", 1.0), ("yes", 0.0), ("### Final Score: 2", 0.0)])
def test_a_reply_is_read_as_the_example_reads_it(reply, expected):
    assert score(Judge([reply])) == expected


def test_a_busy_judge_is_asked_again_and_a_failing_one_scores_0():
    assert score(Judge([503, "### Final Score: 1"])) == 1.0
    assert score(Judge([500, 500, 500])) == 0.0
    assert score(Judge([401])) == 0.0


def test_a_step_is_judged_in_one_batch_in_order():
    judge = Judge(["### Final Score: 1", "### Final Score: 1", "### Final Score: 1"])
    many = rewards.batch("llm_judge", {"model": "m", "base_url": judge.url})
    assert many([("a", "g"), ("b", "g"), ("c", "g")]) == [1.0, 1.0, 1.0]


def test_without_a_key_the_run_stops_before_it_starts(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ImportError, match="OPENAI_API_KEY"):
        rewards.get("llm_judge", {"model": "m"})
