"""The plan speaks the user's words: each role under its config section, with rlcfg's role beside it."""

from __future__ import annotations

from dataclasses import replace

from rlcfg.plan import build_plan
from rlcfg.plan.render import render_text
from tests.plan.factory import experiment, rollout, trainer


def test_roles_are_shown_under_the_dialects_section_names():
    exp = experiment(replace(trainer(), section="actor_train"), replace(rollout(sleep=True), section="actor_infer"),
                     colocation=(("actor", "rollout"),))
    plan, _ = build_plan(exp, gpu="h100")
    text = render_text(plan, show_gpu_map=True)
    assert "actor_train (actor)" in text and "actor_infer (rollout)" in text
    assert "A actor_train (actor)" in text  # the GPU map's legend


def test_without_a_section_the_canonical_role_is_shown():
    plan, _ = build_plan(experiment(trainer(), rollout(sleep=True), colocation=(("actor", "rollout"),)), gpu="h100")
    text = render_text(plan, show_gpu_map=True)
    assert "(actor)" not in text and "A actor" in text
