"""Rollouts started ahead of the trainer (rlcfg.runtime.ahead): over any timing of the engines, every step is
started once, in order, and trained no staler than the bound; with a bound of 0 the loop is the synchronous one."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlcfg.runtime.ahead import AheadStep, RolloutsAhead


def simulate(bound: int, at_once: int, last: int, seed: int, epoch_steps: int | None = None):
    """Train steps 1..last, with each started step finishing generation at a random later moment. With
    `epoch_steps`, rollouts run ahead within epochs of that many steps only."""
    rng = random.Random(seed)
    ahead = RolloutsAhead(bound, at_once, across_epochs=epoch_steps is None)
    done: set[int] = set()
    started: list[tuple[int, int, int]] = []  # (step, version, steps generating when it started)
    trained: list[tuple[int, int]] = []  # (step, staleness)

    def running(queue):
        for entry in queue:  # time passes: some generations finish
            if rng.random() < 0.5:
                done.add(entry.step)
        return sum(1 for entry in queue if entry.step not in done)

    def start(step, version):
        started.append((step, version, sum(1 for e in ahead.queue if e.step not in done)))
        return AheadStep(step=step, version=version, draw={}, sampler={}, epoch=0)

    def opens_epoch():
        return epoch_steps is not None and ahead.next_step(step) % epoch_steps == 1 % epoch_steps

    for step in range(1, last + 1):
        ahead.top_up(step, last, running, start, opens_epoch)
        entry = ahead.take(step)
        done.add(entry.step)  # the trainer waits for its rollouts
        trained.append((step, step - 1 - entry.version))
        ahead.top_up(step, last, running, start, opens_epoch)
    return started, trained, ahead


@settings(max_examples=300, deadline=None)
@given(bound=st.integers(0, 4), at_once=st.integers(1, 4), last=st.integers(1, 25), seed=st.integers(0, 10**6))
def test_no_sample_is_trained_staler_than_the_bound(bound, at_once, last, seed):
    started, trained, ahead = simulate(bound, at_once, last, seed)
    assert [s for s, _, _ in started] == list(range(1, last + 1))  # each step once, in order, none beyond the last
    assert [s for s, _ in trained] == list(range(1, last + 1))
    assert all(0 <= staleness <= bound for _, staleness in trained)
    assert all(generating < at_once for _, _, generating in started)
    assert not ahead.queue


def test_a_bound_of_zero_is_the_synchronous_loop():
    _, trained, _ = simulate(0, 4, 12, seed=1)
    assert [staleness for _, staleness in trained] == [0] * 12


def test_with_room_the_bound_is_reached_and_kept():
    """Generation always finished in time and room for every step: the engines run as far ahead as allowed."""
    ahead = RolloutsAhead(2, 8)
    versions = {}

    def start(step, version):
        versions[step] = version
        return AheadStep(step=step, version=version, draw={}, sampler={}, epoch=0)

    for step in range(1, 7):
        ahead.top_up(step, 6, lambda queue: 0, start)
        ahead.take(step)
    assert [step - 1 - versions[step] for step in range(1, 7)] == [0, 1, 2, 2, 2, 2]


def test_one_step_generating_at_once_overlaps_one_update():
    """AReaL's examples set max_concurrent_rollouts to a step's prompts: the next step generates while one trains."""
    ahead = RolloutsAhead(2, 1)
    staleness = []

    def start(step, version):
        return AheadStep(step=step, version=version, draw={}, sampler={}, epoch=0)

    for step in range(1, 6):
        ahead.top_up(step, 5, lambda queue: len(queue), start)  # nothing finishes by itself
        entry = ahead.take(step)
        staleness.append(step - 1 - entry.version)
        ahead.top_up(step, 5, lambda queue: len(queue), start)
    assert staleness == [0, 1, 1, 1, 1]


@settings(max_examples=200, deadline=None)
@given(bound=st.integers(1, 3), at_once=st.integers(1, 3), epoch_steps=st.integers(1, 6), last=st.integers(1, 20),
       seed=st.integers(0, 10**6))
def test_within_epochs_only_each_epochs_first_step_is_on_policy(bound, at_once, epoch_steps, last, seed):
    """SkyRL's one-step off-policy trainer: a new generator each epoch, so an epoch's first step generates under the
    weights that train on it; the others stay within the bound."""
    started, trained, _ = simulate(bound, at_once, last, seed, epoch_steps)
    assert [s for s, _, _ in started] == list(range(1, last + 1))
    for step, staleness in trained:
        assert staleness == 0 if step % epoch_steps == 1 % epoch_steps else 0 <= staleness <= bound


def test_one_update_behind_within_an_epoch_is_skyrls_one_step_trainer():
    """Generation finishes in time: every step after an epoch's first trains one update behind its rollouts."""
    _, trained, _ = simulate(1, 1, 9, seed=3, epoch_steps=3)
    assert [staleness for _, staleness in trained] == [0, 1, 1] * 3


def test_taking_a_step_out_of_order_is_a_bug_caught():
    ahead = RolloutsAhead(1, 1)
    ahead.top_up(1, 3, lambda q: 0, lambda s, v: AheadStep(step=s, version=v, draw={}, sampler={}, epoch=0))
    with pytest.raises(RuntimeError, match="step 2 trains"):
        ahead.take(2)
