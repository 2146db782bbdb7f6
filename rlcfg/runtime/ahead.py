"""Rollouts generated ahead of the trainer, within a staleness bound (asynchronous RL).

A step's rollouts may start before the updates that precede it are done: while step k trains, the engines already
generate step k+1's. The bound is AReaL's (StalenessManager.get_capacity): with version v the number of updates
the engines' weights have seen, the samples started so far may not exceed (η + v + 1) × a step's prompts, and no
more than `max_concurrent_rollouts` prompts generate at once. rlcfg starts a whole step's prompts at a time, so a
step j (1-based) may start under version v when j − 1 − v ≤ η, and while fewer steps than the concurrency allows
are still generating. The step is trained by update j, under version j − 1: its staleness, (j − 1) − v, is at most
η. With η = 0 every step starts under the weights that train on it, which is the synchronous loop.

AReaL starts each prompt as soon as a slot frees, so with `max_concurrent_rollouts` below a step's prompts its
later prompts may start under newer weights than rlcfg's; the bound holds the same in both.

Without `across_epochs` (SkyRL's one-step off-policy trainer, which starts a new generator each epoch) a step that
opens an epoch starts only under the weights that train on it: the epoch's last update comes first.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Callable


@dataclass
class AheadStep:
    """A step whose rollouts were started before it trains."""

    step: int
    version: int  # updates the engines' weights had seen when it started
    draw: dict[str, Any]  # the driver's draw: prompt indices, prompts, the engines' calls
    sampler: dict[str, Any]  # the data position just after this step's prompts
    epoch: int

    @property
    def staleness(self) -> int:
        """How many updates before the one that trains on them its rollouts were generated."""
        return staleness(self.step, self.version)


def staleness(step: int, version: int) -> int:
    """Of rollouts generated under weights that had seen `version` updates, trained at (1-based) `step`."""
    return step - 1 - version


class RolloutsAhead:
    """The steps started and not yet trained, oldest first."""

    def __init__(self, max_staleness: int, concurrency_steps: int, across_epochs: bool = True):
        if max_staleness < 0 or concurrency_steps < 1:
            raise ValueError("max_staleness >= 0 and concurrency_steps >= 1")
        self.max_staleness = max_staleness
        self.concurrency_steps = concurrency_steps
        self.across_epochs = across_epochs
        self.queue: deque[AheadStep] = deque()
        self.last_started: int | None = None  # the latest step started, trained or not

    def next_step(self, training: int) -> int:
        """The next step to start, when `training` is the step about to train (or training)."""
        return training if self.last_started is None or self.last_started < training else self.last_started + 1

    def may_start(self, step: int, version: int, running: int, last_step: int, opens_epoch: bool = False) -> bool:
        """Whether `step` may start now, under `version`, with `running` steps still generating; `opens_epoch`:
        the step is the first of an epoch."""
        bound = 0 if opens_epoch and not self.across_epochs else self.max_staleness
        return step <= last_step and staleness(step, version) <= bound and running < self.concurrency_steps

    def top_up(self, training: int, last_step: int, running: Callable[[list[AheadStep]], int],
               start: Callable[[int, int], AheadStep], opens_epoch: Callable[[], bool] = lambda: False) -> int:
        """Start every step the bound allows now, when `training` is the step about to train (or training) and
        the engines' weights have seen `training - 1` updates. `running(queue)` counts the queued steps still
        generating; `start(step, version)` starts one; `opens_epoch()`: whether the next step to start is the
        first of an epoch. Returns how many started."""
        started = 0
        version = training - 1
        while True:
            step = self.next_step(training)
            if not self.may_start(step, version, running(list(self.queue)), last_step,
                                  not self.across_epochs and opens_epoch()):
                return started
            entry = start(step, version)
            if entry.step != step or entry.version != version:
                raise RuntimeError(f"started step {entry.step} under version {entry.version}, expected step {step} "
                                   f"under {version}")
            self.queue.append(entry)
            self.last_started = step
            started += 1

    def take(self, step: int) -> AheadStep:
        """The started rollouts of `step`, which trains now."""
        if not self.queue or self.queue[0].step != step:
            raise RuntimeError(f"step {step} trains, but the rollouts started are for "
                               f"{[e.step for e in self.queue]}")
        entry = self.queue.popleft()
        if entry.staleness > self.max_staleness:
            raise RuntimeError(f"step {step}'s rollouts are {entry.staleness} updates stale, above the bound "
                               f"{self.max_staleness}")
        return entry
