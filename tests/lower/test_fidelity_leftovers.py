"""Settings whose framework meaning was checked against the framework's code at the release rlcfg claims, each
asserting that meaning: ROLL's query/response filters and difficulty weight."""

from __future__ import annotations

import math

import pytest

from rlcfg.frontend import check_file
from rlcfg.lower import lower
from tests.helpers import TEMPLATES

ROLL = TEMPLATES / "quickstart-cpu.yaml"
FILTER = "++rewards.math_rule.query_filter_config"


def roll_algorithm(*overrides: str):
    result = check_file(str(ROLL), list(overrides), env={})
    assert result.config is not None, [f"{d.path}: {d.message}" for d in result.diagnostics]
    return lower("roll", result.config).algorithm


def refusals(*overrides: str) -> list[str]:
    return [d.path for d in check_file(str(ROLL), list(overrides), env={}).diagnostics if d.code == "RLC118"]


def test_roll_mean_filter_redraws_prompts_whose_mean_reward_is_outside_the_thresholds():
    spec = roll_algorithm(f"{FILTER}.type=mean_filter",
                          f"{FILTER}.filter_args={{threshold_down: 0.1, threshold_up: 0.9}}").filters
    # user_defined_rollout_loop.query_filter: dropped when mean ≤ threshold_down or ≥ threshold_up; the
    # scheduler draws further prompts until the batch is full, with no limit.
    assert (spec.mean_range, spec.std_min, spec.dynamic, spec.max_draws) == ((0.1, 0.9), None, "filter", None)
    defaults = roll_algorithm(f"{FILTER}.type=mean_filter").filters
    assert defaults.mean_range == (-1.0, math.inf)


def test_roll_std_filter_keeps_prompts_whose_rewards_spread_above_the_threshold():
    spec = roll_algorithm(f"{FILTER}.type=std_filter", f"{FILTER}.filter_args={{std_threshold: 0.0}}").filters
    assert (spec.std_min, spec.mean_range, spec.dynamic) == (0.0, None, "filter")
    assert roll_algorithm(f"{FILTER}.type=std_filter").filters.std_min == -1.0


def test_roll_query_filter_is_not_applied_by_the_batch_generate_interface():
    # generate_opt_level 0 passes query_filter one item holding all of a prompt's responses: always kept.
    spec = roll_algorithm(f"{FILTER}.type=std_filter", "++generate_opt_level=0").filters
    assert (spec.std_min, spec.dynamic) == (None, None)


def test_roll_filters_are_not_refused_and_the_response_filter_is_inert():
    assert not refusals(f"{FILTER}.type=std_filter")
    assert not refusals("++rewards.math_rule.response_filter_config.type=mean_filter")
    # ROLL's response_filter keeps every response.
    assert roll_algorithm("++rewards.math_rule.response_filter_config.type=mean_filter").filters.dynamic is None


def test_roll_difficulty_loss_weight_changes_nothing_as_in_roll():
    # ROLL keeps the difficulty column as an object array, which torch.tensor refuses; ROLL logs it and goes on
    # with the weight left out, so the setting has no effect.
    assert "difficulty_loss_weight" not in refusals("++difficulty_loss_weight=true")
    weighting = roll_algorithm("++difficulty_loss_weight=true").weighting
    assert weighting.difficulty_loss_weight is False


def test_torch_refuses_the_object_array_roll_hands_it():
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    column = np.empty(2, dtype=object)
    column[:] = [0.2, 0.9]
    with pytest.raises(TypeError):
        torch.tensor(column, dtype=torch.float32)
