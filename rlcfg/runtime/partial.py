"""Partial rollout (ir.PartialRollout): the responses that carry over from step to step, which of them a step
trains, and their advantages, as ChatLearn's PartialRolloutManager and AdvantageComputer decide them
(chatlearn/algorithm/grpo_utils/partial_rollout_manager.py, advantage_compute.py).

The driver owns one PartialRollouts. Per step it hands over the new prompts' responses (`start`), generates every
pending response for its round's limit, gives back each one's new tokens (`after_round`, which returns the responses
to train), and has them scored and normalised (`advantages`). The state is plain data, kept in checkpoints
(`state_dict`), so a resumed run continues the same responses."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from rlcfg.ir import AdvantageOptions, PartialRollout
from rlcfg.runtime.data import DataError


@dataclass
class Response:
    """One response on its way: its prompt's index in the training data (ChatLearn's prompt_uid), the answer its
    reward checks, the tokens each round generated, and the step that drew its prompt."""

    prompt: int
    answer: str | None
    started: int
    rounds: list[list[int]] = field(default_factory=list)
    # Whether a round ended it short of that round's limit; False for one cut at the last round's.
    ended: bool = False

    @property
    def tokens(self) -> list[int]:
        return [t for r in self.rounds for t in r]


class PartialRolloutStarved(DataError, RuntimeError):
    """A step's rollouts finished no prompt's responses, so it has nothing to train on (ChatLearn fails there: its
    AdvantageComputer divides by the empty batch's size). A DataError: `rlcfg run` says so in one line (exit 1)."""


class PartialRollouts:
    def __init__(self, spec: PartialRollout, max_new_tokens: int, group_size: int, options: AdvantageOptions):
        # A round's limit may be 0 (a small share of a short response): it generates nothing, as SGLang does with
        # max_new_tokens 0, and the response goes on to the next round.
        self.limits = spec.round_limits(max_new_tokens)
        self.min_finished = spec.min_finished
        self.kept_until = spec.rewards_kept_until
        self.group_size = group_size
        self.options = options
        self.unfinished: list[Response] = []
        self.waiting: dict[int, list[Response]] = {}  # finished and not trained yet, by prompt
        self.finished: dict[int, int] = {}  # finished responses so far, by prompt, until the whole group has
        self.rewards: dict[int, list[float]] = {}  # the trained rewards a prompt's advantages are normalised with

    def start(self, new: list[Response]) -> list[Response]:
        """The step's new responses join the unfinished ones; all of them generate a round now."""
        self.unfinished += new
        return list(self.unfinished)

    def limit(self, response: Response) -> int:
        """How many tokens the response may generate in its next round."""
        return self.limits[len(response.rounds)]

    def after_round(self, pending: list[Response], generated: list[list[int]]) -> list[Response]:
        """Each pending response's new tokens, in order. Returns the responses the step trains: every finished
        response of a prompt of which more than min_finished have finished."""
        still = []
        for response, tokens in zip(pending, generated):
            limit = self.limit(response)
            response.rounds.append(list(tokens))
            response.ended = len(tokens) < limit
            if response.ended or len(response.rounds) == len(self.limits):
                self.waiting.setdefault(response.prompt, []).append(response)
                self.finished[response.prompt] = self.finished.get(response.prompt, 0) + 1
            else:
                still.append(response)
        self.unfinished = still
        train: list[Response] = []
        for prompt in list(self.waiting):
            if self.finished[prompt] > self.min_finished:
                train += self.waiting.pop(prompt)
                if self.finished[prompt] == self.group_size:
                    del self.finished[prompt]
        return train

    def advantages(self, train: list[Response], scores: list[float]) -> list[float]:
        """GRPO's advantage of each trained response against every reward of its prompt trained so far (this
        step's included); a prompt's rewards are let go once `kept_until` of them have gathered."""
        import numpy as np

        for response, score in zip(train, scores):
            self.rewards.setdefault(response.prompt, []).append(float(score))
        ddof = 0 if self.options.std == "population" else 1
        out = []
        for response, score in zip(train, scores):
            group = np.asarray(self.rewards[response.prompt], dtype=np.float64)
            std = float(group.std(ddof=ddof)) if group.size > ddof else 0.0
            out.append(float((score - group.mean()) / (std + self.options.eps)))
        self.rewards = {k: v for k, v in self.rewards.items() if len(v) < self.kept_until}
        return out

    def metrics(self, step: int, train: list[Response], generated: int) -> dict[str, Any]:
        waited = [step - r.started for r in train]
        rounds = [len(r.rounds) for r in train]
        return {"partial/generated": generated, "partial/trained": len(train),
                "partial/unfinished": len(self.unfinished),
                "partial/waiting": sum(len(v) for v in self.waiting.values()),
                "partial/rounds_mean": sum(rounds) / len(rounds) if rounds else 0.0,
                "partial/steps_waited_max": max(waited, default=0),
                "partial/steps_waited_mean": sum(waited) / len(waited) if waited else 0.0}

    def state_dict(self) -> dict[str, Any]:
        return {"unfinished": [asdict(r) for r in self.unfinished],
                "waiting": [[prompt, [asdict(r) for r in responses]] for prompt, responses in self.waiting.items()],
                "finished": [[prompt, n] for prompt, n in self.finished.items()],
                "rewards": [[prompt, scores] for prompt, scores in self.rewards.items()]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.unfinished = [Response(**r) for r in state["unfinished"]]
        self.waiting = {int(prompt): [Response(**r) for r in responses] for prompt, responses in state["waiting"]}
        self.finished = {int(prompt): int(n) for prompt, n in state["finished"]}
        self.rewards = {int(prompt): [float(s) for s in scores] for prompt, scores in state["rewards"]}
