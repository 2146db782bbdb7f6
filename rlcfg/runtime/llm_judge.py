"""SkyRL's LLM-as-a-judge example (examples/train/llm_as_a_judge/llm_judge_env.py): a GSM8K response is scored by
asking an OpenAI-compatible chat model whether it ends with the gold solution's `#### <number>`.

Kept as the example has it, at every release that ships it: one user message, the example's instructions followed
by the gold and the predicted solutions; the score is the `### Final Score: 0|1` of the reply (or a reply that is
just 0 or 1), else 0; any failure of the call scores 0 too. The judge is the config's
(`environment.skyrl_gym.llm_as_a_judge.model`, at `base_url`, default OpenAI's), with the key in OPENAI_API_KEY, as
the example reads it. Like OpenAI's client, a call is retried twice on a lost connection, a timeout, 408, 409, 429
and server errors; the responses of a step are judged 32 at a time, as SkyRL's environment workers step them.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

PROMPT = """
You are a strict math evaluation assistant.

Compare the following **gold** and **predicted** math solutions. Your job is to determine if the predicted solution is mathematically correct and if the predicted solution ends with a line of the form:

#### <number>

You must only give a score of "1" if:
- The final line of the predicted solution **ends with `#### <number>`**, and
- The number **matches the final answer in the gold solution** exactly.

Instructions:
- You may provide internal reasoning or explanation before giving your final judgment.
- Your final judgment must appear as a separate line at the end of your response, in the format:

### Final Score: 1

or

### Final Score: 0

Do not include any explanation after the final score.
"""
OPENAI_BASE_URL = "https://api.openai.com/v1"
KEY_VARIABLE = "OPENAI_API_KEY"
RETRIES = 2
RETRY_STATUSES = (408, 409, 429, 500, 502, 503, 504)
TIMEOUT_S = 600.0  # OpenAI's client's default
PARALLEL_CALLS = 32
_SCORE = re.compile(r"### Final Score:\s*([01](?:\.0)?)")


def check_ready() -> None:
    """The example's environment stops the run without a key; rlcfg says so before it starts."""
    if not os.environ.get(KEY_VARIABLE):
        raise ImportError(f"the judge's API key in {KEY_VARIABLE} (the LLM-as-a-judge example reads it there), and it "
                          "is not set; export it where `rlcfg run` starts (its workers inherit it)")


def verdict(reply: str) -> float:
    found = _SCORE.search(reply)
    if found:
        return float(found.group(1))
    return float(reply.strip()) if reply.strip() in {"0", "1"} else 0.0


def judge(response: str, gold: str | None, settings: dict[str, Any]) -> float:
    message = PROMPT + f"\n\nGOLD SOLUTION:\n{gold}\n\nPREDICTED SOLUTION:\n{response}\n\nAnswer:"
    try:
        reply = _complete(message, settings)
        return verdict(reply.strip())
    except Exception:  # the example scores any failure of the judge 0 and goes on
        return 0.0


def judge_many(pairs: list[tuple[str, str | None]], settings: dict[str, Any]) -> list[float]:
    with ThreadPoolExecutor(max_workers=min(PARALLEL_CALLS, max(1, len(pairs)))) as pool:
        return list(pool.map(lambda pair: judge(pair[0], pair[1], settings), pairs))


def _complete(message: str, settings: dict[str, Any]) -> str:
    base = (settings.get("base_url") or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL).rstrip("/")
    body = json.dumps({"model": settings.get("model"), "messages": [{"role": "user", "content": message}]}).encode()
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {os.environ.get(KEY_VARIABLE, '')}"}
    for attempt in range(RETRIES + 1):
        try:
            request = urllib.request.Request(f"{base}/chat/completions", body, headers, method="POST")
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as reply:
                return json.loads(reply.read())["choices"][0]["message"]["content"]
        except urllib.error.HTTPError as exc:
            if exc.code not in RETRY_STATUSES or attempt == RETRIES:
                raise
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            if attempt == RETRIES:
                raise
        time.sleep(min(0.5 * 2 ** attempt, 8.0))
    raise RuntimeError("unreachable")
