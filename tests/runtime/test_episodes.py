"""Multi-turn episodes as SkyRL's generator builds them (SkyRLGymGenerator.agent_loop from skyrl-train 0.4.0): which
tokens a response holds, which of them carry loss, where an episode stops and what it scores. A scripted engine and
environment stand in for the model and the task, so every token is known."""

from dataclasses import dataclass

import pytest

from rlcfg.ir import Episodes, Sampling
from rlcfg.runtime import episodes
from rlcfg.runtime.backends.hf import Generation

EOS = 0


class CharTokenizer:
    """One token per character (its code point), EOS 0; a chat template that ends every message with EOS and a
    newline, as Qwen's ends it with <|im_end|> and a newline."""

    eos_token_id = EOS

    def encode(self, text, add_special_tokens=False):
        return [ord(c) for c in text]

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids if i != EOS or not skip_special_tokens)

    def apply_chat_template(self, messages, add_generation_prompt=False, tokenize=True, **kwargs):
        ids = []
        for m in messages:
            ids += self.encode(f"[{m['role']}]{m['content']}") + [EOS] + self.encode("\n")
        return ids + (self.encode("[assistant]") if add_generation_prompt else [])


class ScriptedEngine:
    """Answers each call with the next scripted turn of the episodes still running, in order; an episode runs as
    long as its script does."""

    def __init__(self, turns):
        self.turns = [list(t) for t in turns]  # per episode: its turns, each (text, ends with EOS, finished)
        self.inputs = []

    def generate(self, prompts, sampling, seed=None):
        assert sampling.n == 1
        self.inputs.append([list(p) for p in prompts])
        running = [t for t in self.turns if t]
        out = []
        for _prompt, script in zip(prompts, running):
            text, eos, finished = script.pop(0)
            token_ids = ids(text) + ([EOS] if eos else [])
            out.append(Generation(token_ids, [-0.5] * len(token_ids), finished))
        return out


@dataclass
class Task:
    turns_left: int
    reward: float


@dataclass(frozen=True)
class Step:
    observations: list
    reward: float
    done: bool


def make(settings, answer, max_turns):
    return Task(max_turns, float(answer))


def step(tasks, actions, settings):
    out = []
    for task, action in zip(tasks, actions):
        task.turns_left -= 1
        if "DONE" in action or task.turns_left == 0:
            out.append(Step([], task.reward if "DONE" in action else 0.0, True))
        else:
            out.append(Step([{"role": "user", "content": "obs"}], 0.0, False))
    return out


@pytest.fixture(autouse=True)
def scripted_environment(monkeypatch):
    monkeypatch.setitem(episodes.ENVIRONMENTS, "scripted", __name__)


def spec(observations="inline", max_turns=3, max_input_length=1000, eos_after_stop=True, final_observation=False):
    return Episodes("scripted", max_turns, max_input_length, observations, eos_after_stop,
                    final_observation=final_observation)


def ids(text):
    return [ord(c) for c in text]


PROMPT = CharTokenizer().apply_chat_template([{"role": "user", "content": "q0"}], add_generation_prompt=True)


def play(turns, observations="inline", stop=("</sql>",), answers=("1.0",), n=1, **kw):
    engine = ScriptedEngine(turns)
    runner = episodes.Runner(spec(observations, **kw), CharTokenizer())
    return runner.run(engine, [list(PROMPT)], list(answers), Sampling(max_new_tokens=50, n=n, stop=tuple(stop)),
                      seed=1), engine


def test_inline_observations_follow_the_turns_in_one_message_that_ends_with_eos():
    (out,), engine = play([[("a</sql>", False, True), ("b DONE", True, True)]])
    # the turn's EOS is dropped, the observation's own tokens follow, and the response ends with EOS again
    assert out.token_ids == ids("a</sql>") + ids("obs") + ids("b DONE") + [EOS]
    assert out.loss_mask == [1] * 7 + [0] * 3 + [1] * 6 + [1]
    assert out.logprobs == [-0.5] * 7 + [0.0] * 3 + [-0.5] * 6 + [0.0]
    assert out.finished and out.score == 1.0 and (out.turns, out.ending) == (2, "environment")
    # the second turn's input is the first's with the turn and the observation
    assert engine.inputs[1][0] == PROMPT + ids("a</sql>") + ids("obs")


def test_chat_observations_are_user_turns_and_a_stop_string_gets_an_eos_without_loss():
    (out,), engine = play([[("a</sql>", False, True), ("b DONE", True, True)]], observations="chat")
    observation = ids("\n[user]obs") + [EOS] + ids("\n[assistant]")
    assert out.token_ids == ids("a</sql>") + [EOS] + observation + ids("b DONE") + [EOS]
    assert out.loss_mask == [1] * 7 + [0] + [0] * len(observation) + [1] * 7
    assert out.score == 1.0
    assert engine.inputs[1][0] == PROMPT + ids("a</sql>") + [EOS] + observation


def test_without_eos_after_stop_the_turn_is_kept_as_generated():
    (out,), _ = play([[("a</sql>", False, True), ("b DONE", True, True)]], observations="chat",
                     eos_after_stop=False)
    assert out.token_ids[:8] == ids("a</sql>") + ids("\n")


def test_an_input_past_max_input_length_ends_the_episode_before_its_turn():
    limit = len(PROMPT) + 7 + 3  # room for the first turn and its observation, not for a second turn's input
    (out,), engine = play([[("a</sql>", False, True), ("never", True, True)]], max_input_length=limit - 1)
    assert len(engine.inputs) == 1
    # the final observation is dropped, and a response that ran out of length gets no EOS
    assert out.token_ids == ids("a</sql>") and out.loss_mask == [1] * 7
    assert not out.finished and out.score == 0.0 and out.ending == "input limit"


def test_skyrl_train_0_3_0_keeps_the_final_observation_without_loss():
    limit = len(PROMPT) + 7 + 3
    (out,), _ = play([[("a</sql>", False, True), ("never", True, True)]], max_input_length=limit - 1,
                     final_observation=True)
    assert out.token_ids == ids("a</sql>") + ids("obs") and out.loss_mask == [1] * 7 + [0] * 3
    assert out.logprobs == [-0.5] * 7 + [0.0] * 3 and not out.finished


def test_a_turn_cut_at_its_token_limit_leaves_the_episode_unfinished():
    (out,), _ = play([[("a</sql>", False, True), ("b DONE", False, False)]])
    assert not out.finished and out.token_ids[-1] != EOS and out.score == 1.0


def test_the_turn_limit_ends_the_episode():
    (out,), engine = play([[("a", False, True), ("b", False, True)]], max_turns=2)
    assert len(engine.inputs) == 2 and out.score == 0.0 and (out.turns, out.ending) == (2, "turn limit")


def test_text_after_the_first_stop_string_is_not_the_action():
    assert episodes.action_text(CharTokenizer(), ids("x</sql>\nmore") + [EOS], ["</sql>", "</solution>"]) == \
        "x</sql>"


def test_episodes_of_one_prompt_run_side_by_side_and_keep_their_order():
    (first, second), engine = play([[("a DONE", True, True)], [("b</sql>", False, True), ("c DONE", True, True)]],
                                   answers=("1.0", "0.5"), n=2)
    assert [len(call) for call in engine.inputs] == [2, 1]  # both first turns in one call, then the one running
    assert first.score == 1.0 and second.score == 0.5
    assert second.token_ids == ids("b</sql>") + ids("obs") + ids("c DONE") + [EOS]


def test_a_row_the_environment_cannot_start_is_an_episode_error(monkeypatch):
    def refuse(settings, answer, max_turns):
        raise episodes.EpisodeError("no database")

    monkeypatch.setitem(globals(), "make", refuse)
    with pytest.raises(episodes.EpisodeError, match="no database") as raised:
        play([])
    # a data error: the run stops with its message, not a worker's traceback
    from rlcfg.runtime.data import DataError

    assert isinstance(raised.value, DataError)
