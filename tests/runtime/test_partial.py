"""Partial rollout (ir.PartialRollout, ChatLearn's use_partial_rollout): which responses continue, which a step
trains, and their advantages, as ChatLearn's PartialRolloutManager and AdvantageComputer decide them, and the state
a checkpoint carries. A run whose responses span steps, and its resume, are in test_smoke.py."""

from __future__ import annotations

import json
import os
import random

import pytest

from rlcfg.ir import AdvantageOptions, PartialRollout
from rlcfg.runtime.partial import PartialRollouts, Response

CHATLEARN = AdvantageOptions(std="population", eps=1e-5)


def rollouts(min_finished=1, group=4, kept_until=4, shares=(0.5, 0.5), max_new_tokens=4):
    return PartialRollouts(PartialRollout(shares, min_finished, kept_until), max_new_tokens, group, CHATLEARN)


def test_a_prompt_trains_once_more_than_min_finished_of_its_responses_have_finished():
    p = rollouts()  # rounds of 2 tokens; a prompt trains once 2 of its 4 responses have finished
    a = [Response(prompt=0, answer="x", started=1) for _ in range(4)]
    b = [Response(prompt=1, answer="y", started=1) for _ in range(4)]
    pending = p.start(a + b)
    assert [p.limit(r) for r in pending] == [2] * 8
    # Prompt 0: two end short of the limit (1 token < 2); prompt 1: one does, and one ends exactly at the limit,
    # which ChatLearn counts as unfinished (its test is `length < limit`).
    train = p.after_round(pending, [[7], [7], [7, 8], [7, 8], [9], [9, 2], [9, 9], [9, 9]])
    assert [id(r) for r in train] == [id(r) for r in a[:2]]
    assert [id(r) for r in p.unfinished] == [id(r) for r in a[2:] + b[1:]] and p.waiting == {1: [b[0]]}
    # The first two of prompt 0 are normalised with each other only: rewards 1, 0 → ±1 (population std 0.5).
    assert [round(x, 4) for x in p.advantages(train, [1.0, 0.0])] == [1.0, -1.0]

    pending = p.start([])
    assert [p.limit(r) for r in pending] == [2] * 5  # the second (last) round
    # The last round finishes everything, cut or not.
    train = p.after_round(pending, [[1], [3, 4], [5, 6], [1], [2, 3]])
    # In the order the prompts first had a finished response waiting (ChatLearn's dict order).
    assert [id(r) for r in train] == [id(r) for r in b + a[2:]]
    assert [r.tokens for r in a] == [[7], [7], [7, 8, 1], [7, 8, 3, 4]]
    assert [r.ended for r in a] == [True, True, True, False]
    assert p.unfinished == [] and p.waiting == {} and p.finished == {}
    adv = p.advantages(train, [0.0, 1.0, 1.0, 0.0, 1.0, 1.0])
    # Prompt 1 trains all four at once: [0, 1, 1, 0].
    assert [round(x, 3) for x in adv[:4]] == [-1.0, 1.0, 1.0, -1.0]
    # Prompt 0's later two join the rewards of its first two: [1, 0, 1, 1], mean 0.75, std 0.433.
    assert [round(x, 3) for x in adv[4:]] == [0.577, 0.577]
    assert p.rewards == {}  # every prompt's four rewards have gathered: they are let go


def test_the_state_continues_the_same_responses_after_a_round_trip_through_json():
    p = rollouts()
    pending = p.start([Response(prompt=i // 4, answer=None, started=3) for i in range(8)])
    p.advantages(p.after_round(pending, [[1], [1], [1, 2], [1, 2], [1], [3, 3], [3, 3], [3, 3]]), [1.0, 0.0])
    copy = rollouts()
    copy.load_state_dict(json.loads(json.dumps(p.state_dict())))
    assert copy.state_dict() == p.state_dict()
    rest = [[5], [5], [5], [5], [5]]
    assert [r.tokens for r in copy.after_round(copy.start([]), rest)] == \
        [r.tokens for r in p.after_round(p.start([]), rest)]


def test_a_round_that_may_generate_nothing_passes_the_response_on():
    p = rollouts(min_finished=0, group=1, kept_until=1, shares=(0.1, 0.9), max_new_tokens=5)  # rounds of 0 and 4
    response = Response(prompt=0, answer=None, started=1)
    pending = p.start([response])
    assert p.limit(response) == 0
    assert p.after_round(pending, [[]]) == [] and p.unfinished == [response]  # 0 tokens are not fewer than 0
    assert p.after_round(p.start([]), [[1, 2]]) == [response] and response.ended


def _chatlearn_classes():
    """ChatLearn's own PartialRolloutManager and AdvantageComputer (chatlearn/algorithm/grpo_utils, at the commit
    rlcfg's ChatLearn main is judged by), with its Ray module base and decorators stubbed out; skipped without
    MIRROR_ROOT."""
    import subprocess
    from collections import defaultdict

    import numpy as np

    root = os.environ.get("MIRROR_ROOT")
    if not root:
        pytest.skip("MIRROR_ROOT is not set")

    def show(path):
        return subprocess.run(["git", "-C", os.path.join(root, "alibaba+ChatLearn", "repo"), "show",
                               f"b7af31a972eb6c420ef0b5c04ea920820d68f784:{path}"],
                              capture_output=True, text=True, check=True).stdout

    def passthrough(*_args, **_kwargs):
        return lambda f: f

    namespace = {"random": random, "np": np, "defaultdict": defaultdict, "Dict": dict, "List": list, "Any": object,
                 "BaseModule": object, "timeit": passthrough, "compute_decorator": passthrough,
                 "monitor_error": passthrough, "map_reduce_metrics": None}
    for path, name in (("chatlearn/algorithm/grpo_utils/partial_rollout_manager.py", "class PartialRolloutManager"),
                       ("chatlearn/algorithm/grpo_utils/advantage_compute.py", "class AdvantageComputer")):
        text = show(path)
        exec(compile(text[text.index(name):], path, "exec"), namespace)  # the framework's own classes
    return namespace["PartialRolloutManager"], namespace["AdvantageComputer"]


@pytest.mark.parametrize("seed", range(6))
def test_the_same_responses_train_with_the_same_advantages_as_in_chatlearn(seed):
    import types

    import torch

    manager_cls, advantage_cls = _chatlearn_classes()
    group, min_finished, shares, max_new = 6, 2, [0.25, 0.25, 0.5], 8
    manager = manager_cls()
    manager.module_args = types.SimpleNamespace(max_rollout_round=len(shares), rollout_ratio=shares,
                                                mini_response_per_prompt=min_finished)
    manager.global_args = types.SimpleNamespace(models=types.SimpleNamespace(policy=types.SimpleNamespace(
        max_response_tokens_length=max_new, num_inference_per_prompt=group)))
    manager._metric_list = []
    manager.setup()
    computer = advantage_cls(group)
    ours = PartialRollouts(PartialRollout(tuple(shares), min_finished, group), max_new, group, CHATLEARN)
    assert ours.limits == tuple(manager.max_token_per_round)

    rng = random.Random(seed)
    length = {}  # (uid, round) → tokens the stand-in engine generates, up to the round's limit
    reward = {}
    uid_of = {}
    uid = 0
    for step in range(1, 7):
        prompts = [rng.randrange(5) + 10 * step for _ in range(2)]  # a prompt may come twice in a step
        samples, responses = [], []
        for prompt in prompts:
            for _ in range(group):
                samples.append({"uid": uid, "prompt_uid": str(prompt), "input_ids": [prompt],
                                "prompt_token_length": 1})
                responses.append(Response(prompt=prompt, answer=None, started=step))
                uid_of[id(responses[-1])] = uid
                reward[uid] = float(rng.random() < 0.5)
                uid += 1
        manager._episode_id = step
        batch = manager.get_sample_for_rollout(samples)
        results = []
        for sample in batch:
            n = rng.choice([0, 1, sample["max_generate_token_length"] - 1, sample["max_generate_token_length"]])
            length[(sample["uid"], sample["rollout_round"])] = n
            results.append(dict(sample, rollout_round=sample["rollout_round"] + 1, response_token_length=n,
                                str_outputs="t" * n, all_tokens=torch.tensor(list(sample["input_ids"]) + [1] * n)))
        theirs = manager.post_process_rollout_results(results)
        for s in theirs:
            s["rule_reward"] = reward[s["uid"]]
        theirs = computer([types.SimpleNamespace(buffer=theirs)]) if theirs else []

        pending = ours.start(responses)
        generated = [[1] * length[(uid_of[id(r)], len(r.rounds))] for r in pending]
        train = ours.after_round(pending, generated)
        advantages = ours.advantages(train, [reward[uid_of[id(r)]] for r in train]) if train else []

        expected = {s["uid"]: s["advantages"] for s in theirs}
        got = {uid_of[id(r)]: a for r, a in zip(train, advantages)}
        assert got.keys() == expected.keys(), step
        assert all(abs(got[k] - expected[k]) < 1e-9 for k in got), step
        assert {s["uid"]: s["response_token_length"] for s in theirs} == \
            {uid_of[id(r)]: len(r.tokens) for r in train}
        assert sorted(uid_of[id(r)] for r in ours.unfinished) == sorted(d["uid"] for d in manager.rollout_not_finished)

