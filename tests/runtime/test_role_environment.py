"""A role's environment variables (Role.env, ROLL system_envs) and frozen parameters (Role.frozen_prefixes) in a
run on Ray: each worker process starts with its role's variables, roles with different variables get processes
of their own, and the frozen parameters come out of training unchanged."""

from __future__ import annotations

import dataclasses
import io
import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("ray")
pytest.importorskip("transformers")

from rlcfg.runtime import quickstart  # noqa: E402
from rlcfg.runtime.driver import Run, RunOptions, run  # noqa: E402

VARIABLE = "RLCFG_TEST_ROLE_ENV"
KEY = "actor_train.model_args.freeze_module_prefix"


@pytest.fixture(scope="module", autouse=True)
def ray_instance():
    yield
    import ray

    if ray.is_initialized():
        ray.shutdown()


def _environment(worker):
    return {name: os.environ.get(name) for name in (VARIABLE, "RLCFG_TEST_SHARED")}


def test_each_worker_starts_with_its_role_s_variables_and_frozen_parameters_stay(tmp_path, monkeypatch):
    out = str(tmp_path / "run")
    exp = quickstart.experiment(out, steps=1, prompts_per_step=2, group_size=4, kl_coef=0.05,
                                files_dir=str(tmp_path / "files"))
    shared = {"RLCFG_TEST_SHARED": "1"}

    def with_settings(role):
        if role.name in ("actor", "reference"):
            extra = {"frozen_prefixes": ("model.layers.0.", "vision_model"),
                     "keys": role.keys + (("frozen_prefixes", KEY),)} if role.name == "actor" else {}
            return dataclasses.replace(role, env=tuple(sorted({**shared, VARIABLE: "trainer"}.items())), **extra)
        if role.name == "rollout":
            return dataclasses.replace(role, env=tuple(sorted({**shared, VARIABLE: "rollout"}.items())))
        return role

    # The entropy bonus gives every trained parameter a gradient even where the random model scores nothing.
    exp = dataclasses.replace(exp, roles=tuple(with_settings(r) for r in exp.roles),
                              algorithm=dataclasses.replace(exp.algorithm, entropy_coef=0.05))
    seen = {}
    record = Run._record_placement

    def probing(self):
        ray = self.cluster.ray
        seen["hybrid"], seen["fused_reference"] = self.hybrid, self.reference is self.actor
        for name, workers in (("actor", self.actor), ("rollout", self.rollout)):
            seen[name] = ray.get(workers[0].__ray_call__.remote(_environment))
        record(self)

    monkeypatch.setattr(Run, "_record_placement", probing)
    stream = io.StringIO()
    run(quickstart.plan_for(exp), RunOptions(output_dir=out, threads=1, stream=stream))

    assert seen["actor"] == {VARIABLE: "trainer", "RLCFG_TEST_SHARED": "1"}
    assert seen["rollout"] == {VARIABLE: "rollout", "RLCFG_TEST_SHARED": "1"}
    # The rollout asks for another environment, so it does not live in the actor's process; the reference asks
    # for the actor's, so it does.
    assert seen["hybrid"] is False and seen["fused_reference"] is True
    assert f"rlcfg: warning: {KEY}: 'vision_model' matches no parameter of the actor's model" in stream.getvalue()

    import torch
    from transformers import AutoModelForCausalLM

    trained = AutoModelForCausalLM.from_pretrained(os.path.join(out, "hf_model")).state_dict()
    initial = AutoModelForCausalLM.from_pretrained(exp.role("actor").model.path).state_dict()
    frozen = [k for k in trained if k.startswith("model.layers.0.")]
    assert frozen and all(torch.equal(trained[k], initial[k]) for k in frozen)
    assert not torch.equal(trained["model.layers.1.mlp.up_proj.weight"], initial["model.layers.1.mlp.up_proj.weight"])
