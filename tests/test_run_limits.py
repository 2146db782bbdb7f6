"""`rlcfg validate` and `rlcfg run --dry-run` agree on what rlcfg's runtime does not run (rlcfg/run_limits.py):
for each limit, a template with the override that trips it gets an RLC118 note from validate at the dialect's own key,
and the dry run's backend preflight refuses it too (RLC119), with the same sentence. Without an override that trips a
limit, neither says anything about it."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlcfg.preflight import PREFLIGHT_CODE, dry_run
from rlcfg import run_limits

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"

# (template, overrides, release, the key validate's RLC118 is at, the limit)
CASES = [
    pytest.param("skyrl-fsdp-vllm", ["trainer.strategy=deepspeed"], "0.3.0", "trainer.strategy",
                 run_limits.DEEPSPEED, id="skyrl-deepspeed"),
    pytest.param("areal-sft", ["allocation_mode=d4c2"], None, "allocation_mode", run_limits.ULYSSES,
                 id="areal-sft-ulysses"),
    pytest.param("areal-fsdp-vllm-ppo", ["critic.backend=megatron:d4"], None, "critic.backend",
                 run_limits.MEGATRON_CRITIC, id="areal-megatron-critic"),
    pytest.param("areal-rw", ["allocation_mode=megatron:d4p1t1"], None, "allocation_mode",
                 run_limits.MEGATRON_SUPERVISED, id="areal-megatron-rw"),
    pytest.param("areal-fsdp-sglang-grpo", ["allocation_mode=sglang.d4p1t1+d2t2"], None, "allocation_mode",
                 run_limits.FSDP_MODEL_PARALLEL, id="areal-fsdp-tp"),
]


@pytest.mark.parametrize("template,overrides,release,key,limit", CASES)
def test_validate_says_what_the_dry_run_refuses(template, overrides, release, key, limit):
    report = dry_run(str(TEMPLATES / f"{template}.yaml"), overrides, release=release)
    assert report.result.ok, [d.message for d in report.result.diagnostics if d.severity.name == "ERROR"]
    notes = [d for d in report.result.diagnostics if d.code == "RLC118" and limit in d.message]
    assert key in [d.path for d in notes]
    assert all(d.hint for d in notes), "each note says what runs"
    preflight = [b.message for b in report.blockers if b.code == PREFLIGHT_CODE]
    assert any(limit in message for message in preflight), preflight


# Context parallelism on Megatron runs (rlcfg.runtime.backends.megatron_cp): each dialect's key for it.
CONTEXT_PARALLEL = [
    pytest.param("skyrl-fsdp-vllm", ["trainer.strategy=megatron",
                                     "trainer.policy.megatron_config.context_parallel_size=2"], id="skyrl"),
    pytest.param("rlinf-megatron-sglang", ["+actor.model.context_parallel_size=2"], id="rlinf"),
    pytest.param("chatlearn-megatron-vllm", ["models.policy_trainer.context_parallel_size=2"], id="chatlearn"),
    pytest.param("roll-megatron-vllm", ["actor_train.strategy_args.strategy_config.context_parallel_size=2"],
                 id="roll"),
    pytest.param("areal-fsdp-vllm-ppo", ["actor.backend=megatron:d2c2", "critic.backend=fsdp:d4"], id="areal"),
]


@pytest.mark.parametrize("template,overrides", CONTEXT_PARALLEL)
def test_context_parallelism_is_neither_noted_nor_refused(template, overrides):
    report = dry_run(str(TEMPLATES / f"{template}.yaml"), overrides)
    assert report.result.ok, [d.message for d in report.result.diagnostics if d.severity.name == "ERROR"]
    said = [d.message for d in report.result.diagnostics if d.code == "RLC118"] + [b.message for b in report.blockers]
    assert not [m for m in said if "context parallel" in m or "context_parallel" in m or "`c` size" in m], said



# Expert parallelism runs (the workers check the model's experts); what is refused is a framework whose MoE router
# settings rlcfg has not mapped (validate's note only: the runtime runs the same layout for the frameworks it has),
# and, where a framework's Megatron config writes them, router settings other than what rlcfg computes.
EP_TEMPLATES = {"skyrl": ("skyrl-fsdp-vllm", ["trainer.strategy=megatron",
                                              "trainer.policy.megatron_config.expert_model_parallel_size=2"]),
                "rlinf": ("rlinf-megatron-sglang", ["+actor.model.expert_model_parallel_size=2"]),
                "chatlearn": ("chatlearn-megatron-vllm", ["models.policy_trainer.expert_model_parallel_size=2"]),
                "areal": ("areal-fsdp-vllm-ppo", ["actor.backend=megatron:d4e2", "critic.backend=fsdp:d4"]),
                "roll": ("roll-megatron-vllm",
                         ["+actor_train.strategy_args.strategy_config.expert_model_parallel_size=2"])}


@pytest.mark.parametrize("dialect", ["skyrl", "rlinf", "chatlearn"])
def test_expert_parallelism_runs_where_the_router_settings_are_mapped(dialect):
    template, overrides = EP_TEMPLATES[dialect]
    report = dry_run(str(TEMPLATES / f"{template}.yaml"), overrides)
    assert report.result.ok
    said = [d.message for d in report.result.diagnostics if d.code == "RLC118"] + [b.message for b in report.blockers]
    assert not [m for m in said if "expert" in m or "MoE" in m], said


@pytest.mark.parametrize("dialect,key", [
    ("areal", "actor.backend"), ("roll", "actor_train.strategy_args.strategy_config.expert_model_parallel_size")])
def test_expert_parallelism_is_refused_where_the_router_settings_are_not_mapped(dialect, key):
    template, overrides = EP_TEMPLATES[dialect]
    report = dry_run(str(TEMPLATES / f"{template}.yaml"), overrides)
    notes = [d for d in report.result.diagnostics if d.code == "RLC118" and run_limits.EXPERT_PARALLEL in d.message]
    assert [d.path for d in notes] == [key] and all(d.hint for d in notes)
    assert not report.launches


@pytest.mark.parametrize("template,overrides,key", [
    ("chatlearn-megatron-vllm", ["models.policy_trainer.megatron_model_cfg.moe_aux_loss_coeff=0.001",
                                 "models.policy_trainer.megatron_model_cfg.moe_router_load_balancing_type=aux_loss"],
     "models.policy_trainer.megatron_model_cfg.moe_aux_loss_coeff"),
    ("chatlearn-megatron-vllm", ["models.policy_trainer.megatron_model_cfg.moe_router_score_function=sigmoid"],
     "models.policy_trainer.megatron_model_cfg.moe_router_score_function"),
    ("rlinf-megatron-sglang", ["+actor.model.moe_router_load_balancing_type=aux_loss",
                               "+actor.model.moe_aux_loss_coeff=0.01"], "actor.model.moe_aux_loss_coeff"),
    ("rlinf-megatron-sglang", ["+actor.model.moe_router_pre_softmax=true"], "actor.model.moe_router_pre_softmax"),
])
def test_router_settings_that_change_what_is_computed_are_refused(template, overrides, key):
    report = dry_run(str(TEMPLATES / f"{template}.yaml"), overrides)
    notes = [d for d in report.result.diagnostics if d.code == "RLC118" and run_limits.MOE_ROUTING in d.message]
    assert [d.path for d in notes] == [key] and all(d.hint for d in notes)


@pytest.mark.parametrize("template,overrides", [
    # An aux-loss type with a coefficient of 0 (RLinf's Qwen3-30B example) and a coefficient without an aux-loss
    # type add no loss in megatron-core.
    ("rlinf-megatron-sglang", ["+actor.model.moe_router_load_balancing_type=aux_loss",
                               "+actor.model.moe_aux_loss_coeff=0.0"]),
    ("chatlearn-megatron-vllm", ["models.policy_trainer.megatron_model_cfg.moe_aux_loss_coeff=0.001"]),
])
def test_router_settings_that_add_nothing_are_not_refused(template, overrides):
    report = dry_run(str(TEMPLATES / f"{template}.yaml"), overrides)
    assert not [d for d in report.result.diagnostics if d.code == "RLC118" and run_limits.MOE_ROUTING in d.message]


GLM = "zai-org/GLM-4.7-Flash"


@pytest.mark.parametrize("template,overrides,key", [
    ("skyrl-fsdp-vllm", ["trainer.strategy=megatron", f"trainer.policy.model.path={GLM}"], "trainer.policy.model.path"),
    ("chatlearn-megatron-vllm", [f"models.policy_trainer.load={GLM}"], "models.policy_trainer.load"),
    ("rlinf-megatron-sglang", [f"rollout.model.model_path={GLM}"], "rollout.model.model_path"),
    ("roll-megatron-vllm", [f"pretrain={GLM}"], "pretrain"),
    ("areal-fsdp-vllm-ppo", ["actor.backend=megatron:d4", "critic.backend=fsdp:d4", f"actor.path={GLM}"],
     "actor.path"),
])
def test_a_model_the_megatron_backend_does_not_build_is_refused_by_both(template, overrides, key):
    """GLM-4.7 on Megatron would stop in the workers once the cluster is up: validate says so at the model's key,
    and the dry run's preflight refuses it with the same sentence."""
    report = dry_run(str(TEMPLATES / f"{template}.yaml"), overrides)
    notes = [d for d in report.result.diagnostics if d.code == "RLC118" and run_limits.MEGATRON_FAMILY in d.message]
    assert key in [d.path for d in notes] and all(d.hint for d in notes)
    assert "its name says it is a GLM-4 model" in notes[0].message
    preflight = [b.message for b in report.blockers if b.code == PREFLIGHT_CODE]
    assert any(run_limits.MEGATRON_FAMILY in message for message in preflight), preflight


@pytest.mark.parametrize("template", ["skyrl-fsdp-vllm", "rlinf-megatron-sglang", "chatlearn-megatron-vllm",
                                      "chatlearn-fsdp-vllm", "areal-fsdp-vllm-ppo", "areal-sft", "areal-rw",
                                      "roll-megatron-vllm"])
def test_a_config_within_the_limits_gets_neither_refusal(template):
    report = dry_run(str(TEMPLATES / f"{template}.yaml"))
    limits = [value for name, value in vars(run_limits).items() if name.isupper() and name != "SIZE_THAT_RUNS"]
    said = [d.message for d in report.result.diagnostics if d.code == "RLC118"]
    said += [b.message for b in report.blockers]
    assert not [m for m in said if any(limit in m for limit in limits)]


# ---- vision-language models: refused at validate, never run as text --------------------------------------------

VLM = "Qwen/Qwen2.5-VL-7B-Instruct"
# (template, the override that points a role at a vision-language model, the key the refusal names)
VISION_CASES = [
    pytest.param("areal-fsdp-vllm-ppo", [f"actor.path={VLM}"], "actor.path", id="areal"),
    pytest.param("skyrl-fsdp-vllm", [f"trainer.policy.model.path={VLM}"], "trainer.policy.model.path", id="skyrl"),
    pytest.param("roll-fsdp2-vllm", [f"pretrain={VLM}"], "pretrain", id="roll"),
    pytest.param("chatlearn-fsdp-vllm", [f"models.policy_trainer.load={VLM}"], "models.policy_trainer.load",
                 id="chatlearn"),
    pytest.param("rlinf-megatron-sglang", [f"rollout.model.model_path={VLM}"], "rollout.model.model_path",
                 id="rlinf"),
]


@pytest.mark.parametrize("template,overrides,key", VISION_CASES)
def test_a_vision_language_model_is_refused_at_its_key_in_every_dialect(template, overrides, key):
    report = dry_run(str(TEMPLATES / f"{template}.yaml"), overrides)
    refusals = [b for b in report.blockers if b.code == "RLC118" and run_limits.VISION_LANGUAGE in b.message]
    assert [b.key for b in refusals] == [key]  # once, though the other roles load the same model
    assert VLM in refusals[0].message and not report.launches


@pytest.mark.parametrize("name", ["Qwen/Qwen2-VL-7B", "Qwen/Qwen2.5-VL-3B-Instruct", "OpenGVLab/InternVL3-8B",
                                  "llava-hf/llava-1.5-7b-hf", "meta-llama/Llama-3.2-11B-Vision-Instruct",
                                  "moonshotai/Kimi-VL-A3B-Instruct", "HuggingFaceM4/idefics2-8b",
                                  "Qwen/Qwen3-Omni-30B-A3B-Thinking"])
def test_a_vision_language_checkpoint_is_known_by_its_name(name):
    assert run_limits.vision_language(name) == "its name says so"


@pytest.mark.parametrize("name", ["Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-Math-1.5B", "deepseek-ai/DeepSeek-V3",
                                  "openai/gpt-oss-20b", "/data/vl/qwen2.5-7b", "", None])
def test_a_text_checkpoint_is_not_refused(name):
    assert run_limits.vision_language(name) is None


def test_a_local_checkpoint_is_judged_by_its_config_not_its_name(tmp_path):
    vision = tmp_path / "my-model"
    vision.mkdir()
    (vision / "config.json").write_text('{"model_type": "qwen2_5_vl", "vision_config": {"depth": 32}}')
    assert run_limits.vision_language(str(vision)) == "its config.json has model_type 'qwen2_5_vl' and a vision_config"
    text = tmp_path / "Qwen2-VL-text-only"
    text.mkdir()
    (text / "config.json").write_text('{"model_type": "qwen2"}')
    assert run_limits.vision_language(str(text)) is None


@pytest.mark.parametrize("template,overrides,key", VISION_CASES)
def test_the_smoke_run_stands_in_for_the_text_sibling_and_says_so(template, overrides, key):
    from rlcfg.frontend import check_file
    from rlcfg.smoke_settings import settle

    file = str(TEMPLATES / f"{template}.yaml")
    settled = settle(lambda more: check_file(file, [*overrides, *more]), check_file(file, overrides))
    assert [(c.key, c.new) for c in settled.changes] == [(key, "'Qwen/Qwen2.5-7B-Instruct'")]
    assert not settled.refused and not settled.result.errors


def test_a_name_without_a_vl_part_gets_no_sibling():
    assert run_limits.vision_language_hint("actor.path", "OpenGVLab/InternVL3-8B") == (
        "point it at a text model; vision-language models are not run yet")
    assert run_limits.vision_language_hint("pretrain", "/m/Qwen2-VL-7B/").endswith("(its text sibling: "
                                                                                  "`pretrain: /m/Qwen2-7B`)")


def test_a_mixture_of_experts_is_told_by_its_config_or_its_name(tmp_path):
    import json

    (tmp_path / "moe").mkdir()
    (tmp_path / "moe" / "config.json").write_text(json.dumps({"model_type": "qwen3_moe", "num_experts": 128}))
    (tmp_path / "dense").mkdir()
    (tmp_path / "dense" / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    assert "128 experts" in run_limits.mixture_of_experts(str(tmp_path / "moe"))
    assert run_limits.mixture_of_experts(str(tmp_path / "dense")) is None
    for name in ("Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-235B-A22B-Instruct", "moonshotai/Moonlight-16B-A3B"):
        assert run_limits.mixture_of_experts(name), name
    for name in ("Qwen/Qwen3-4B-Base", "Qwen/Qwen2.5-7B-Instruct", "", None):
        assert run_limits.mixture_of_experts(name) is None, name


def test_megatron_lora_problems_name_each_setting_megatron_bridges_lora_does_not_train():
    ok = dict(dropout=0.0, target_modules="all-linear", exclude_modules=None, init="kaiming", experts=None)
    assert run_limits.megatron_lora_problems(**ok) == []
    assert run_limits.megatron_lora_problems(**{**ok, "target_modules": ("linear_qkv", "linear_fc2")}) == []
    # The experts' shared adapters, whole on each rank
    assert run_limits.megatron_lora_problems(**{**ok, "experts": "its name says so", "expert_tp": 1}) == []
    for change, key in ((dict(dropout=0.1), "lora.dropout"), (dict(target_modules="q_proj"), "lora.target_modules"),
                        (dict(target_modules=("linear_qkv", "q_proj")), "lora.target_modules"),
                        (dict(target_modules=()), "lora.target_modules"),
                        (dict(exclude_modules=("linear_fc2",)), "lora.exclude_modules"),
                        (dict(init="xavier"), "lora.init"),
                        (dict(experts="its name says so", expert_tp=2), "parallelism.etp")):
        (problem,) = run_limits.megatron_lora_problems(**{**ok, **change})
        assert problem[0] == key
