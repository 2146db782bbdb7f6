"""SkyRL-Gym's `search` environment (skyrl_gym/envs/search, Search-R1's task): the model answers a question in
turns; each turn may search (`<search>query</search>`) a retrieval server and read the passages it returns, and the
episode ends with `<answer>...</answer>` or at the turn limit.

Read in skyrl-gym's envs/search/env.py, envs/search/utils.py and tools/search.py at every SkyRL release whose
multi-turn loop rlcfg runs (skyrl-train 0.3.0, 0.4.0 and its last commit, the skyrl package 0.1.0 to 0.4.0; up to
skyrl 0.1.0 the environment also stops the run on a turn that goes on after `</search>` or `</answer>`, which the
stop strings the lowering requires there rule out), and kept here as they are:
- a task is a row whose `reward_spec.ground_truth.target` holds the accepted answers;
- a turn ends the episode when it holds both `<answer>` and `</answer>`, or when it is the last turn allowed;
  otherwise its first `<search>` query (stripped) goes to the server, as {"query", "topk", "return_scores": true}
  POSTed as JSON, and the observation is `\\n<information>{"result": ...}</information>\\n`: the passages as
  "Doc i: contents" lines, the documents of each retrieval joined by "---"; "No search results found." for none;
  "Search error: ..." when the server fails (server errors, lost connections and timeouts are retried up to 10
  times, waiting 1, 2, ... s); an empty `<information></information>` for a turn without a query;
- the reward, at the end only: 1 when the last `<answer>` of the whole transcript, normalised (lower case, no
  punctuation, no articles, single spaces), equals a normalised target; else 0.

The server is the user's (environment.skyrl_gym.search.search_url), as with SkyRL; rlcfg's runs call it from the
rollout workers, every query of a round at once.
"""

from __future__ import annotations

import json
import re
import string
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from rlcfg.runtime.episodes import EpisodeError, Step

MAX_RETRIES = 10
RETRY_STATUSES = (500, 502, 503, 504)
PARALLEL_REQUESTS = 32  # SkyRL-Gym's environment workers (max_env_workers)
_SEARCH = re.compile(r"<search>(.*?)</search>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


@dataclass
class Task:
    targets: list[str]
    max_turns: int
    turns: int = 0
    history: list[str] = field(default_factory=list)


def make(settings: dict[str, Any], answer: str | None, max_turns: int) -> Task:
    """A task from a row's answer record (ir.Data.answer_fields: reward_spec, as JSON)."""
    try:
        target = json.loads(answer or "")["reward_spec"]["ground_truth"]["target"]
    except (ValueError, KeyError, TypeError):
        raise EpisodeError("a search row needs `reward_spec.ground_truth.target` (the accepted answers), as SkyRL's "
                           "searchR1 dataset has it") from None
    return Task([target] if isinstance(target, str) else [str(t) for t in target], max_turns)


_PUNCTUATION = frozenset(string.punctuation)


def normalize(text: str) -> str:
    """Search-R1's answer normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def score(transcript: str, targets: list[str]) -> float:
    answers = list(_ANSWER.finditer(transcript))
    if not answers:
        return 0.0
    guess = normalize(answers[-1].group(1).strip())
    return 1.0 if any(normalize(t) == guess for t in targets) else 0.0


def step(tasks: list[Task], actions: list[str], settings: dict[str, Any]) -> list[Step]:
    """One turn of each task; the round's queries go to the server at once."""
    plans: list[tuple[str, Any]] = []
    queries: list[str] = []
    for task, action in zip(tasks, actions):
        task.turns += 1
        task.history.append(action)
        if task.turns >= task.max_turns or ("<answer>" in action and "</answer>" in action):
            plans.append(("done", score("".join(task.history), task.targets)))
            continue
        match = _SEARCH.search(action) if "<search>" in action and "</search>" in action else None
        if match is None:
            plans.append(("text", ""))
        else:
            plans.append(("query", len(queries)))
            queries.append(match.group(1).strip())
    with ThreadPoolExecutor(max_workers=min(PARALLEL_REQUESTS, max(1, len(queries)))) as pool:
        results = list(pool.map(lambda q: search(q, settings), queries))
    steps = []
    for task, (kind, value) in zip(tasks, plans):
        if kind == "done":
            steps.append(Step([], value, True))
            continue
        text = "\n<information>" + (results[value] if kind == "query" else value) + "</information>\n"
        task.history.append(text)
        steps.append(Step([{"role": "user", "content": text}], 0.0, False))
    return steps


def _passages(retrieval: list[dict[str, Any]]) -> str:
    return "".join(f"Doc {i + 1}: {doc['document']['contents'].strip()}\n" for i, doc in enumerate(retrieval))


def search(query: str, settings: dict[str, Any]) -> str:
    """The tool's text for one query: the server's passages, or what went wrong, as JSON {"result": ...}."""
    response, error = _call(str(settings["search_url"]), query, int(settings["topk"]), float(settings["timeout"]))
    if error:
        return json.dumps({"result": f"Search error: {error}"})
    if not response:
        return json.dumps({"result": "Unknown API state (no response and no error message)."})
    try:
        retrievals = response.get("result", [])
        if not retrievals:
            return json.dumps({"result": "No search results found."})
        return json.dumps({"result": "\n---\n".join(_passages(r) for r in retrievals)})
    except Exception as exc:  # the server's reply is data: any shape it has is reported, as SkyRL-Gym does
        return json.dumps({"result": f"Error processing search results: {exc}"})


def _call(url: str, query: str, topk: int, timeout: float) -> tuple[dict[str, Any] | None, str | None]:
    prefix = f"[Search Request ID: {uuid.uuid4()}] "
    body = json.dumps({"query": query, "topk": topk, "return_scores": True}).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    last = None
    for attempt in range(MAX_RETRIES):
        try:
            with urllib.request.urlopen(urllib.request.Request(url, body, headers, method="POST"),
                                        timeout=timeout) as reply:
                text = reply.read().decode("utf-8", errors="replace")
            try:
                return json.loads(text), None
            except ValueError as exc:
                return None, f"{prefix}API Response JSON Decode Error: {exc}, Response: {text[:200]}"
        except urllib.error.HTTPError as exc:
            if exc.code not in RETRY_STATUSES:
                return None, f"{prefix}API Request Error: {exc}"
            last = (f"{prefix}API Request Error: Server Error ({exc.code}) on attempt {attempt + 1}/"
                    f"{MAX_RETRIES}")
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            reason = getattr(exc, "reason", exc)
            kind = "Timeout Error" if isinstance(reason, TimeoutError) or "timed out" in str(reason) \
                else "Connection Error"
            last = f"{prefix}{kind}: {reason}"
        except Exception as exc:  # what the server sent back, or a URL it cannot be reached at
            return None, f"{prefix}Unexpected Error: {exc}"
        if attempt < MAX_RETRIES - 1:
            time.sleep(attempt + 1)
    return None, last


def check_ready(settings: dict[str, Any]) -> None:
    """Nothing to install: the retrieval server is reached at run time, as SkyRL reaches it."""
    if not str(settings.get("search_url") or "").startswith(("http://", "https://")):
        raise FileNotFoundError(f"the search environment's server `{settings.get('search_url')}` is not an http(s) "
                                "URL (environment.skyrl_gym.search.search_url)")
