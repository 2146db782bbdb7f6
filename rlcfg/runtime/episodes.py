"""Multi-turn rollouts (ir.Episodes): each response is an episode in which the model acts, an environment answers,
and the answer is appended to the model's next input, until the environment says done or the input grows past its
limit. It runs in the rollout worker, beside the engine, as SkyRL's SkyRLGymGenerator.agent_loop does beside its
engines.

The loop is the one of skyrl-train 0.4.0, its last commit and the skyrl package 0.1.0 to 0.4.0 (token in, token
out; no custom chat template, no step-wise trajectories), kept as it is (skyrl-train 0.3.0's differs only in keeping
the final observation, Episodes.final_observation):
- the first input is the prompt with the chat template's generation prompt; before every turn, an input longer than
  max_input_length ends the episode (finish reason "length");
- a turn is one generation of at most max_new_tokens, whose text, cut after the first stop string as the engine's
  include_stop_str_in_output leaves it, is the environment's action;
- "chat" observations: each is a user turn of the chat template, tokenized after a fixed two-message base
  conversation and cut where the base ends, with the generation prompt unless the episode is done; a turn that
  ended on a stop string rather than EOS gets the EOS token appended, with no loss (eos_after_stop);
- "inline" observations: the turn's tokens lose a final EOS, and the observations' own tokens follow them in the
  same assistant message; the episode's response ends with EOS (with loss) unless it ran out of length;
- the response is everything after the prompt up to the model's last token (a final observation is dropped); the
  model's tokens carry loss, the environment's none; the episode's score is the sum of its turns' rewards, each at
  the last token of its turn (the rewards of turns cut off with the final observation are lost, as SkyRL's are).

Episodes are batched: every round, each unfinished episode generates one turn, in one call to the engine, and then
the environment steps them all at once.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from rlcfg.ir import Episodes, Sampling
from rlcfg.runtime.data import DataError

BASE_CONVERSATION = [{"role": "system", "content": "You are a helpful assistant."},
                     {"role": "user", "content": "I am a user."}]
# The environments rlcfg runs, by the name the IR gives them: the module of each, with its make (which raises
# EpisodeError for a row it cannot start), step and check_ready.
ENVIRONMENTS = {"text2sql": "rlcfg.runtime.text2sql", "search": "rlcfg.runtime.search"}


class EpisodeError(DataError):
    """A row an environment cannot start an episode on; the message names the row's problem. A DataError, so that a
    run stops on it with its message, as on any other row it cannot use."""


@dataclass(frozen=True)
class Step:
    """An environment's answer to one turn: the chat messages to append (none when done), the turn's reward, and
    whether the episode is over."""

    observations: list[dict[str, str]]
    reward: float
    done: bool


@dataclass
class _Episode:
    task: Any
    input_ids: list[int]
    prompt_length: int
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    response_end: int | None = None
    rewards: list[tuple[float, int]] = field(default_factory=list)
    finish: str = "stop"
    done: bool = False
    turns: int = 0
    input_limit: bool = False  # ended because the next turn's input was too long


# How an episode ended: the environment said done before the turn limit, at the turn limit, or the next turn's input
# was past max_input_length.
ENDINGS = ("environment", "turn limit", "input limit")


@dataclass(frozen=True)
class Outcome:
    """One episode as a response: its tokens, their log-probs (0 where the environment wrote them), whether it ended
    on its own (finish reason "stop"), which tokens carry loss, its score and its text; its turns and how it ended
    (ENDINGS), for the run's metrics."""

    token_ids: list[int]
    logprobs: list[float]
    finished: bool
    loss_mask: list[int]
    score: float
    text: str
    turns: int = 0
    ending: str = "environment"

    def response(self) -> tuple:
        """The response as the rollout side hands it to the step: tokens, log-probs, finished, loss mask, and the
        episode's turns and ending."""
        return (self.token_ids, self.logprobs, self.finished, self.loss_mask, (self.turns, self.ending))


class Environment:
    """What the loop asks of an environment: tasks from the rows' answers, and steps."""

    def __init__(self, spec: Episodes):
        self.spec = spec
        self.settings = dict(spec.settings)
        if spec.environment not in ENVIRONMENTS:
            raise ValueError(f"rlcfg runs no `{spec.environment}` environment; it runs {', '.join(ENVIRONMENTS)}")
        self.module = importlib.import_module(ENVIRONMENTS[spec.environment])

    def make(self, answer: Any) -> Any:
        return self.module.make(self.settings, answer, self.spec.max_turns)

    def step(self, tasks: list[Any], actions: list[str]) -> list[Any]:
        return self.module.step(tasks, actions, self.settings)


def check_ready(spec: Episodes) -> None:
    """Raise (ImportError, OSError) before a run starts when its environment could not run here."""
    env = Environment(spec)
    env.module.check_ready(env.settings)


def action_text(tokenizer: Any, token_ids: Sequence[int], stop: Sequence[str]) -> str:
    """A turn's text as the engine returns it: special tokens left out, and nothing after the first stop string
    (the token that completes a stop string may carry more characters)."""
    text = tokenizer.decode(list(token_ids), skip_special_tokens=True)
    ends = [text.index(s) + len(s) for s in stop if s in text]
    return text[:min(ends)] if ends else text


class Runner:
    """The loop for one rollout engine; `tokenizer` is its tokenizer."""

    def __init__(self, spec: Episodes, tokenizer: Any, template_kwargs: Sequence[tuple[str, Any]] = ()):
        self.spec = spec
        self.tokenizer = tokenizer
        self.template_kwargs = dict(template_kwargs)
        self.environment = Environment(spec)
        self.eos = tokenizer.eos_token_id
        if spec.observations == "chat":
            base = self._template(BASE_CONVERSATION, add_generation_prompt=False)
            # What follows the base's last EOS (Qwen's newline after <|im_end|>) belongs to the next message.
            if self.eos in base:
                base = base[:len(base) - base[::-1].index(self.eos)]
            self.base_ids = base
            empty = [{"role": "user", "content": ""}]
            plain = self._template(empty, add_generation_prompt=False)
            self.generation_prompt_ids = self._template(empty, add_generation_prompt=True)[len(plain):]

    def _template(self, messages: list[dict[str, str]], add_generation_prompt: bool) -> list[int]:
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt,
                                                 tokenize=True, **self.template_kwargs)
        if isinstance(ids, dict) or hasattr(ids, "keys"):  # transformers releases that return a BatchEncoding
            ids = ids["input_ids"]
        return list(ids)

    def observation_ids(self, observations: list[dict[str, str]], done: bool) -> list[int]:
        if self.spec.observations == "inline":
            return [t for o in observations for t in self.tokenizer.encode(o["content"], add_special_tokens=False)]
        if observations:
            ids = self._template([*BASE_CONVERSATION, *observations], add_generation_prompt=not done)
            return ids[len(self.base_ids):]
        return [] if done else list(self.generation_prompt_ids)

    def run(self, engine: Any, prompts: list[list[int]], answers: list[Any], sampling: Sampling,
            seed: int | None) -> list[Outcome]:
        """`sampling.n` episodes for every prompt, those of prompt i at [i·n, (i+1)·n); `answers` has one entry per
        episode."""
        n = sampling.n
        episodes = [_Episode(self.environment.make(answers[i * n + k]), list(p), len(p))
                    for i, p in enumerate(prompts) for k in range(n)]
        one = replace(sampling, n=1)
        turn = 0
        while True:
            active = []
            for ep in episodes:
                if ep.done:
                    continue
                if len(ep.input_ids) > self.spec.max_input_length:
                    ep.finish, ep.done, ep.input_limit = "length", True, True
                else:
                    active.append(ep)
            if not active:
                break
            gens = engine.generate([ep.input_ids for ep in active], one,
                                   None if seed is None else seed + 7919 * turn)
            actions = [action_text(self.tokenizer, g.token_ids, sampling.stop) for g in gens]
            steps = self.environment.step([ep.task for ep in active], actions)
            for ep, gen, action, result in zip(active, gens, actions, steps):
                self._advance(ep, gen, action, result, sampling.stop)
            turn += 1
        return [self._outcome(ep) for ep in episodes]

    def _advance(self, ep: _Episode, gen: Any, action: str, result: Any, stop: Sequence[str]) -> None:
        ep.finish = "stop" if gen.finished else "length"
        ep.done = result.done
        ep.turns += 1
        output, logprobs = list(gen.token_ids), list(gen.logprobs)
        obs = self.observation_ids(result.observations, result.done)
        if self.spec.observations == "chat":
            added_eos = bool(stop and self.spec.eos_after_stop and action.endswith(tuple(stop))
                             and (not output or output[-1] != self.eos))
            if added_eos:
                output.append(self.eos)
                logprobs.append(0.0)
            ep.response_end = len(ep.input_ids) + len(output) - 1
            ep.loss_mask += [1] * (len(output) - added_eos) + [0] * added_eos + [0] * len(obs)
        else:
            if output and output[-1] == self.eos:
                output, logprobs = output[:-1], logprobs[:-1]
            ep.response_end = len(ep.input_ids) + len(output) - 1
            ep.loss_mask += [1] * len(output) + [0] * len(obs)
        ep.input_ids += output + obs
        ep.logprobs += logprobs[:len(output)] + [0.0] * len(obs)
        ep.rewards.append((float(result.reward), ep.response_end))

    def _outcome(self, ep: _Episode) -> Outcome:
        end = (ep.response_end if ep.response_end is not None else ep.prompt_length - 1) + 1
        if self.spec.final_observation:
            end = len(ep.input_ids)
        response = ep.input_ids[ep.prompt_length:end]
        mask = ep.loss_mask[:end - ep.prompt_length]
        logprobs = ep.logprobs[:end - ep.prompt_length]
        if self.spec.observations == "inline" and ep.finish != "length" and response and response[-1] != self.eos:
            response, mask, logprobs = response + [self.eos], mask + [1], logprobs + [0.0]
        score = 0.0
        for reward, at in ep.rewards:
            if at - ep.prompt_length >= len(response):
                break
            score += reward
        text = self.tokenizer.decode(response, skip_special_tokens=True)
        ending = "input limit" if ep.input_limit else "turn limit" if ep.turns >= self.spec.max_turns else "environment"
        return Outcome(response, logprobs, ep.finish == "stop", mask, score, text, ep.turns, ending)
