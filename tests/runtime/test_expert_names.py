"""A mixture-of-experts model's weights cross between transformers' stacked expert tensors and a checkpoint's
per-expert names (which vLLM, SGLang and the Megatron converter use) without a value changing: the names the
trainer hands the rollout engines must land on the same numbers the checkpoint holds."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
safetensors = pytest.importorskip("safetensors.torch")

from rlcfg.runtime.backends import hf as H  # noqa: E402
from rlcfg.runtime.backends.expert_names import per_expert  # noqa: E402
from tests.runtime.test_megatron import tiny_hf  # noqa: E402


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    model = tiny_hf("qwen3_moe")
    path = str(tmp_path_factory.mktemp("moe"))
    model.save_pretrained(path)
    return path, model


def test_per_expert_names_are_the_checkpoints_own(saved):
    path, model = saved
    on_disk = safetensors.load_file(os.path.join(path, "model.safetensors"))
    ours = per_expert(model.state_dict())
    assert "model.layers.0.mlp.experts.3.up_proj.weight" in ours
    assert not any(name.endswith(("gate_up_proj", "experts.down_proj")) for name in ours)
    assert set(ours) - {"lm_head.weight"} == set(on_disk) - {"lm_head.weight"}
    assert all(torch.equal(ours[name], on_disk[name]) for name in on_disk)


def test_the_hf_rollout_engine_loads_per_expert_names_into_its_stacked_experts(saved):
    path, model = saved
    engine = H.HFRolloutEngine(path)
    changed = {name: tensor + 1.0 for name, tensor in per_expert(model.state_dict()).items()}
    assert engine.update_weights(changed) == len(changed)
    loaded = per_expert(engine.model.state_dict())
    assert all(torch.equal(loaded[name], changed[name]) for name in changed)
    with pytest.raises(KeyError, match="no parameters named model.layers.0.mlp.experts.9.gate_proj.weight"):
        engine.update_weights({"model.layers.0.mlp.experts.9.gate_proj.weight": changed[
            "model.layers.0.mlp.experts.0.gate_proj.weight"]})
