"""The driver's per-step batch and the rollout side's scoring: the layout the trainers rely on, and the same
texts and rewards however often a response repeats."""


import torch

from rlcfg.runtime.step import make_batch
from rlcfg.runtime.workers import RewardScorer


class CountingTokenizer:
    """Decodes token t to the character chr(ord('a') + t); counts the sequences it was asked to decode."""

    def __init__(self):
        self.decoded = 0

    def batch_decode(self, seqs, skip_special_tokens=True):
        self.decoded += len(seqs)
        return ["".join(chr(ord("a") + t) for t in s) for s in seqs]


def test_scoring_gives_each_response_its_own_text_and_reward_even_when_responses_repeat():
    tok = CountingTokenizer()
    scorer = RewardScorer("exact_match", tok)
    responses = [[0], [1], [0], [0, 1], [1], []]
    answers = ["a", "a", "b", "ab", "b", "a"]
    scores, texts = scorer.score(responses, answers)
    assert texts == ["a", "b", "a", "ab", "b", ""]
    assert scores == [1.0, 0.0, 0.0, 1.0, 1.0, 0.0]
    again_scores, again_texts = scorer.score(list(reversed(responses)), list(reversed(answers)))
    assert again_texts == list(reversed(texts)) and again_scores == list(reversed(scores))
    assert tok.decoded == 4  # each distinct response decoded once, across calls


def test_batch_left_pads_prompts_and_right_pads_responses():
    groups = [
        {"prompt": (5, 6), "responses": [([7, 8, 9], None, True), ([7], None, False)], "scores": [1.0, 0.0]},
        {"prompt": (4, 5, 6), "responses": [([], None, False), ([3, 2], None, True)], "scores": [0.5, 0.25, 9.0]},
    ]
    batch, scores, finished = make_batch(groups, pad=0)
    assert batch["input_ids"].tolist() == [[0, 5, 6, 7, 8, 9], [0, 5, 6, 7, 0, 0], [4, 5, 6, 0, 0, 0],
                                           [4, 5, 6, 3, 2, 0]]
    assert batch["attention_mask"].tolist() == [[0, 1, 1, 1, 1, 1], [0, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0],
                                                [1, 1, 1, 1, 1, 0]]
    assert batch["response_mask"].tolist() == [[1, 1, 1], [1, 0, 0], [0, 0, 0], [1, 1, 0]]
    assert batch["input_ids"].dtype == torch.long and batch["attention_mask"].dtype == torch.long
    assert batch["response_mask"].dtype == torch.float32
    assert scores.tolist() == [1.0, 0.0, 0.5, 0.25]  # a score without a response is left out
    assert finished.tolist() == [True, False, False, True]


def test_each_distinct_response_and_answer_pair_is_verified_once():
    """Verifiers like math-verify cost most of a millisecond per call; a group repeats its answers a lot."""
    scorer = RewardScorer("exact_match", CountingTokenizer())
    calls = []

    def verifier(text, answer):
        calls.append((text, answer))
        return float(text == answer)

    scorer.fn = verifier
    first, _ = scorer.score([[0], [0], [1], [0]], ["a", "a", "a", "b"])
    second, _ = scorer.score([[0], [1]], ["a", "b"])
    assert first == [1.0, 1.0, 0.0, 0.0] and second == [1.0, 1.0]
    assert calls == [("a", "a"), ("b", "a"), ("a", "b"), ("b", "b")]
