"""LoRA on the fsdp backend (Role.lora, SkyRL trainer.policy.model.lora): PEFT adapters on the targeted linear
layers, the only weights that train; the rollout engines and exports get the merged model, exports the adapter
beside it.

The update is checked against full fine-tuning of the same model: with B at zero the first loss is the plain
model's, and the gradient reaching B is scaling · (the full model's gradient of W) · Aᵀ.
"""

import json
import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from rlcfg.ir import ActorLossSpec, Lora, Optimizer, PolicyLossSpec  # noqa: E402
from rlcfg.runtime import step as S  # noqa: E402
from rlcfg.runtime.backends.fsdp import (LORA_ADAPTER_DIR, FSDPEngine, LoraTargetError,  # noqa: E402
                                         merged_lora_state)
from tests.runtime.test_packing import build, groups, process_group, training_batch  # noqa: E402,F401

LORA = Lora(rank=4, alpha=8, target_modules="all-linear")
ADAMW = Optimizer(name="adamw", lr=1e-2, weight_decay=0.1, grad_clip=1.0)
LAYER = "model.layers.0.self_attn.q_proj"


def step_cfg(batch, micro_batch=3):
    mask = batch["response_mask"]
    return {"ppo_epochs": 1, "mini_batch": 6, "micro_batch": micro_batch, "denominators": S.denominators(mask, 1, 6),
            "loss": ActorLossSpec(PolicyLossSpec(), "token-mean", kl_coef=0.1, entropy_coef=0.01)}


def actor(path, lora=LORA, **settings):
    torch.manual_seed(7)  # the adapters' A: the same draw for every engine of a comparison
    return FSDPEngine("actor", path, dtype="float32", optimizer=ADAMW, lora=lora, **settings)


def first_micro_batch_loss(engine, batch, cfg):
    """The loss of the mini-batch's first micro-batch and its gradients (no optimizer step)."""
    mb = {k: v[:cfg["micro_batch"]] for k, v in batch.items()}
    prompt_width = batch["input_ids"].shape[1] - batch["response_mask"].shape[1]
    tokens, seqs = cfg["denominators"][0]
    engine.model.train()
    loss, _ = engine._loss(mb, prompt_width, cfg, tokens, seqs)
    loss.backward()
    return float(loss)


def test_only_the_adapters_train_and_the_base_stays_as_loaded(tmp_path):
    path = build(tmp_path)
    batch = training_batch(path, groups(seed=3))
    engine = actor(path)
    trainable = {n for n, p in engine.model.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    # all-linear: every projection of every layer, not the output layer.
    assert {n.split(".lora_")[0].rsplit(".", 1)[1] for n in trainable} == {
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    assert not any("lm_head" in n for n in trainable)
    assert sum(len(g["params"]) for g in engine.optimizer.param_groups) == len(trainable)
    before = {k: v.clone() for k, v in engine.model.state_dict().items()}
    metrics = engine.train(batch, step_cfg(batch))
    assert metrics["grad_norm"] > 0
    after = engine.model.state_dict()
    moved = {k for k in after if not torch.equal(after[k], before[k])}
    assert all(".lora_" in k for k in moved), sorted(moved)[:5]
    assert any(".lora_B." in k for k in moved)  # B leaves zero: the adapted model differs from the base


def test_the_first_loss_is_the_plain_models_and_b_gets_the_projected_full_gradient(tmp_path):
    path = build(tmp_path)
    batch = training_batch(path, groups(seed=3))
    cfg = step_cfg(batch)
    plain = actor(path, lora=None)
    plain_loss = first_micro_batch_loss(plain, batch, cfg)
    full_grad = dict(plain.model.named_parameters())[f"{LAYER}.weight"].grad
    adapted = actor(path)
    lora_loss = first_micro_batch_loss(adapted, batch, cfg)
    params = dict(adapted.model.named_parameters())
    a = params[f"base_model.model.{LAYER}.lora_A.default.weight"]
    b_grad = params[f"base_model.model.{LAYER}.lora_B.default.weight"].grad
    assert lora_loss == pytest.approx(plain_loss, rel=1e-6, abs=1e-7)
    scaling = LORA.alpha / LORA.rank
    torch.testing.assert_close(b_grad, scaling * full_grad @ a.detach().T, rtol=1e-4, atol=1e-7)


def test_the_rollout_gets_the_merged_model_under_the_base_names(tmp_path):
    path = build(tmp_path)
    batch = training_batch(path, groups(seed=3))
    engine = actor(path)
    for _ in range(2):  # two steps: A and B both moved
        engine.train(batch, step_cfg(batch))
    merged = engine.full_state_dict()
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(path)
    assert set(merged) == set(base.state_dict())
    base.load_state_dict(merged)
    ids = batch["input_ids"][:4]
    engine.model.eval()
    with torch.no_grad():
        torch.testing.assert_close(base(input_ids=ids).logits, engine.model(input_ids=ids).logits,
                                   rtol=1e-5, atol=1e-5)


def test_merging_by_hand():
    w = torch.randn(3, 5)
    a, b = torch.randn(2, 5), torch.randn(3, 2)
    state = {"base_model.model.layer.proj.base_layer.weight": w, "base_model.model.layer.proj.base_layer.bias":
             torch.ones(3), "base_model.model.layer.proj.lora_A.default.weight": a,
             "base_model.model.layer.proj.lora_B.default.weight": b, "base_model.model.norm.weight": torch.ones(5)}
    merged = merged_lora_state(state, 0.5)
    assert set(merged) == {"layer.proj.weight", "layer.proj.bias", "norm.weight"}
    torch.testing.assert_close(merged["layer.proj.weight"], w + 0.5 * b @ a)
    conv = merged_lora_state({**state, "base_model.model.layer.proj.base_layer.weight": w.T.contiguous()}, 0.5,
                             fan_in_fan_out=True)
    torch.testing.assert_close(conv["layer.proj.weight"], (w + 0.5 * b @ a).T)


def test_the_export_is_the_merged_model_with_the_adapter_beside_it(tmp_path):
    path = build(tmp_path / "base")
    batch = training_batch(path, groups(seed=3))
    engine = actor(path)
    for _ in range(2):
        engine.train(batch, step_cfg(batch))
    out = str(tmp_path / "export")
    engine.export_hf(out)
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    adapter_dir = os.path.join(out, LORA_ADAPTER_DIR)
    config = json.load(open(os.path.join(adapter_dir, "adapter_config.json")))
    assert (config["r"], config["lora_alpha"], config["peft_type"]) == (4, 8, "LORA")
    merged = AutoModelForCausalLM.from_pretrained(out)
    over_base = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(path), adapter_dir)
    ids = batch["input_ids"][:4]
    with torch.no_grad():
        torch.testing.assert_close(merged(input_ids=ids).logits, over_base(input_ids=ids).logits,
                                   rtol=1e-5, atol=1e-5)


def test_a_checkpoint_resumes_the_adapters_and_their_optimizer(tmp_path):
    path = build(tmp_path / "base")
    batch = training_batch(path, groups(seed=3))
    engine = actor(path)
    engine.train(batch, step_cfg(batch))
    engine.save(str(tmp_path / "ckpt"))
    expected = engine.train(batch, step_cfg(batch))
    resumed = actor(path)
    resumed.load(str(tmp_path / "ckpt"))
    again = resumed.train(batch, step_cfg(batch))
    assert again["grad_norm"] == pytest.approx(expected["grad_norm"], rel=1e-5)
    for (name, p), (_, q) in zip(engine.model.named_parameters(), resumed.model.named_parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=name)


def test_named_targets_and_a_target_that_names_nothing(tmp_path):
    path = build(tmp_path)
    engine = actor(path, lora=Lora(rank=2, alpha=2, target_modules=("q_proj", "v_proj"), exclude_modules=None))
    adapted = {n.split(".lora_")[0] for n, p in engine.model.named_parameters() if p.requires_grad}
    assert {n.rsplit(".", 1)[1] for n in adapted} == {"q_proj", "v_proj"}
    with pytest.raises(LoraTargetError, match=r"= \[vision_proj\]: PEFT cannot adapt"):
        actor(path, lora=Lora(rank=2, alpha=2, target_modules=("vision_proj",)))
    with pytest.raises(LoraTargetError, match="linear layers only"):
        actor(path, lora=Lora(rank=2, alpha=2, target_modules=("embed_tokens",)))


def test_a_critic_with_lora_trains_its_adapters(tmp_path):
    path = build(tmp_path)
    torch.manual_seed(7)
    critic = FSDPEngine("critic", path, dtype="float32", optimizer=ADAMW, lora=LORA)
    trainable = [n for n, p in critic.model.named_parameters() if p.requires_grad]
    assert trainable and all(".lora_" in n for n in trainable)
    batch = training_batch(path, groups(seed=3))
    values = critic.compute(batch, 4)["values"]
    batch["old_values"], batch["returns"] = values, values + 0.5 * batch["response_mask"]
    cfg = {"ppo_epochs": 1, "mini_batch": 6, "micro_batch": 3,
           "denominators": S.denominators(batch["response_mask"], 1, 6)}
    assert critic.train(batch, cfg)["grad_norm"] > 0


LORA_OVERRIDES = ["trainer.policy.model.lora.rank=8", "trainer.policy.model.lora.alpha=16",
                  "trainer.critic.model.lora.rank=4", "trainer.critic.model.lora.alpha=8"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("smoke-cache")


def test_a_ppo_config_with_lora_runs_and_exports_the_adapter(tmp_path, cache):
    """SkyRL's PPO starter with adapters on the policy and the critic, engines on GPUs of their own (the weights
    reach them through Ray's object store, merged)."""
    from tests.helpers import TEMPLATES
    from tests.runtime.test_smoke import run_cli, training_steps

    out = tmp_path / "out"
    done, _ = run_cli(str(TEMPLATES / "skyrl-ppo-fsdp-vllm.yaml"), *LORA_OVERRIDES, "--smoke", "--steps", "2",
                      "-o", str(out), cache=cache)
    assert done.returncode == 0, done.stderr[-3000:]
    assert training_steps(out / "metrics.jsonl") == [1, 2]
    ran = json.loads((out / "experiment.json").read_text())
    loras = {r["name"]: r["lora"] for r in ran["roles"] if r.get("lora")}
    assert {name: (lora["rank"], lora["alpha"]) for name, lora in loras.items()} == {"actor": (8, 16),
                                                                                     "critic": (4, 8)}
    adapter = json.loads((out / "hf_model" / LORA_ADAPTER_DIR / "adapter_config.json").read_text())
    assert (adapter["r"], adapter["lora_alpha"]) == (8, 16)


def test_a_target_the_model_lacks_stops_the_run_under_its_key(tmp_path, cache):
    from tests.helpers import TEMPLATES
    from tests.runtime.test_smoke import run_cli

    done, _ = run_cli(str(TEMPLATES / "skyrl-ppo-fsdp-vllm.yaml"), *LORA_OVERRIDES,
                      "trainer.policy.model.lora.target_modules=[vision_proj]", "--smoke", "--steps", "1",
                      "-o", str(tmp_path / "out"), cache=cache)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "`trainer.policy.model.lora.target_modules` = [vision_proj]: PEFT cannot adapt the model" in done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
