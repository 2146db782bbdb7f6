"""The ROLL dialect: seed coverage, the seed's YAML, templates, every rule, the device_mapping grammar and
golden diagnostics."""

from __future__ import annotations

import builtins
import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlcfg.frontend import check_file, check_text
from rlcfg.schema.base import field_at
from rlcfg.dialects.roll import DIALECT
from rlcfg.dialects.roll.models import RollConfig
from rlcfg.dialects.roll.device_mapping import (DeviceMappingError, describe_ids, format_device_mapping,
                                              parse_device_mapping)
from rlcfg.dialects.roll.rules import RULES
from tests.helpers import ROOT, TEMPLATES, assert_golden, cli, seed

FIXTURES = ROOT / "tests" / "fixtures" / "roll"
MEGATRON = TEMPLATES / "roll-megatron-vllm.yaml"
FSDP2 = TEMPLATES / "roll-fsdp2-vllm.yaml"
QUICKSTART = TEMPLATES / "quickstart-cpu.yaml"
AGENTIC = FIXTURES / "agentic.yaml"
_UNSET = object()

# ---- seed coverage ------------------------------------------------------------------------------------------

# Every parameter the seed (ROLL's Configuration Guide) documents, with its default. The seed shows example
# values, not defaults, so the defaults here are ROLL's code defaults; _UNSET marks a parameter whose
# default is not a plain value (a section, or a key of a union chosen by strategy_name).
SEED_PARAMETERS = {
    "rollout_batch_size": 128,
    "prompt_length": 1024,
    "response_length": None,
    "num_return_sequences_in_group": 1,
    "actor_train.model_args.dtype": "bf16",
    "actor_train.model_args.disable_gradient_checkpointing": False,
    "actor_train.model_args.ulysses_size": 1,
    "actor_train.training_args.learning_rate": 5e-5,
    "actor_train.training_args.weight_decay": 0.0,
    "actor_train.training_args.per_device_train_batch_size": 8,
    "actor_train.training_args.gradient_accumulation_steps": 1,
    "actor_train.training_args.warmup_steps": 0,
    "actor_train.data_args.template": "native",  # the seed: "Setting to native utilizes the default chat template"
    "actor_train.data_args.file_name": None,
    "actor_train.data_args.prompt": None,
    "actor_train.data_args.messages": None,
    "actor_infer.generating_args.max_new_tokens": 8192,
    "actor_infer.generating_args.temperature": 0.95,
    "actor_train.strategy_args": None,  # null: a worker without a model (rule-based reward workers)
    # The seed documents deepspeed_train; ROLL main (the release rlcfg claims) dropped DeepSpeed and defaults to
    # fsdp2_train.
    "actor_train.strategy_args.strategy_name": "fsdp2_train",
    "actor_train.strategy_args.strategy_config": _UNSET,
    "actor_train.infer_batch_size": 16,
    "actor_train.device_mapping": None,
    "actor_infer.num_gpus_per_worker": 1,
    "critic.device_mapping": None,
    "reference.device_mapping": None,
}

SEED_STRATEGY_PARAMETERS = {
    "megatron_train": {"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1,
                       "expert_model_parallel_size": 1, "context_parallel_size": 1,
                       "virtual_pipeline_model_parallel_size": None, "sequence_parallel": False,
                       "recompute_granularity": None, "moe_layer_recompute": False,
                       "moe_token_dispatcher_type": "allgather", "moe_grouped_gemm": False,
                       "moe_shared_expert_overlap": False, "overlap_grad_reduce": False},
    "megatron_infer": {"tensor_model_parallel_size": 1},
    # max_model_len: "If unspecified, will be automatically derived"; load_format: ROLL's code defaults to dummy.
    "vllm": {"gpu_memory_utilization": 0.9, "block_size": 16, "max_model_len": None, "load_format": "dummy"},
    "sglang": {"mem_fraction_static": None, "load_format": "dummy"},
    "fsdp2_train": {"fsdp_size": 1, "param_dtype": "bf16", "reduce_dtype": "float32", "reshard_after_forward": True,
                    "offload_policy": False},
}


def _default(info):
    return info.default_factory() if info.default_factory is not None else info.default


@pytest.mark.parametrize("key", sorted(SEED_PARAMETERS))
def test_seed_parameter_exists_with_its_default(key):
    info, _owner = field_at(RollConfig, tuple(key.split(".")))
    assert info is not None, f"{key} is documented by the seed but missing from the schema"
    assert info.description and len(info.description) > 10
    if SEED_PARAMETERS[key] is not _UNSET:
        assert _default(info) == SEED_PARAMETERS[key]


@pytest.mark.parametrize("strategy", sorted(SEED_STRATEGY_PARAMETERS))
def test_seed_strategy_config_keys_exist_with_their_defaults(strategy):
    from rlcfg.dialects.roll.models import CONFIG_OF_STRATEGY

    model = CONFIG_OF_STRATEGY[strategy]
    for key, expected in SEED_STRATEGY_PARAMETERS[strategy].items():
        assert key in model.model_fields, f"{strategy}.strategy_config.{key} is missing"
        assert _default(model.model_fields[key]) == expected, key


def test_every_strategy_config_key_is_explainable():
    # --explain and did-you-mean follow the first member of the strategy union, the merged view.
    from rlcfg.dialects.roll.models import CONFIG_OF_STRATEGY

    for model in set(CONFIG_OF_STRATEGY.values()):
        for key in model.model_fields:
            info, _ = field_at(RollConfig, ("actor_infer", "strategy_args", "strategy_config", key))
            assert info is not None and info.description, key


def test_every_field_has_a_description():
    from rlcfg.schema.base import iter_fields

    for path, info, _owner in iter_fields(RollConfig):
        assert info.description and len(info.description) > 8, ".".join(path)


# ---- the seed's YAML ----------------------------------------------------------------------------------------

# The seed's YAML lost its indentation in the export; this is it re-indented, with the `...` elisions
# removed (and `actor_infer.model_args`, which held nothing but an elision).
SEED_YAML = """\
rollout_batch_size: 64
prompt_length: 2048
response_length: 4096
num_return_sequences_in_group: 8
actor_train:
  model_args:
    dtype: bf16
    disable_gradient_checkpointing: False
  training_args:
    learning_rate: 1.0e-6
    weight_decay: 0
    per_device_train_batch_size: 1
    gradient_accumulation_steps: 32
    warmup_steps: 20
  data_args:
    template: native
    file_name: xxx/train.json
    prompt: instruction
  strategy_args:
    strategy_name: megatron_train # fsdp2_train/megatron_train for training
    strategy_config:
      tensor_model_parallel_size: 1
      pipeline_model_parallel_size: 1
      expert_model_parallel_size: 1
  infer_batch_size: 4
  device_mapping: list(range(0,16))
actor_infer:
  generating_args:
    max_new_tokens: ${response_length}
    temperature: 0.99
  strategy_args:
    strategy_name: vllm # vllm/sglang/hf_infer for inference
    strategy_config:
      gpu_memory_utilization: 0.6
      block_size: 16
      max_model_len: 8000
  num_gpus_per_worker: 1
  device_mapping: list(range(0,16))
reference:
  strategy_args:
    strategy_name: megatron_infer
    strategy_config:
      tensor_model_parallel_size: 1
  device_mapping: list(range(0,16))
"""


def test_seed_yaml_is_the_seeds_text():
    text = seed("003")
    start = text.index("rollout_batch_size: 64")
    end = text.index("device_mapping: The list of device ids")
    seed_lines = [line.strip() for line in text[start:end].splitlines()]
    seed_lines = [line for line in seed_lines if line and line != "..." and ":" in line
                  and not line.startswith(("rollout_batch_size: The", "Worker Config", "ActorTrain"))]
    ours = {line.strip() for line in SEED_YAML.splitlines()}
    missing = [line for line in seed_lines if line not in ours and line not in ("model_args:",)]
    assert not missing


def test_seed_yaml_validates():
    result = check_text(SEED_YAML, "seed.yaml", env={})
    assert result.errors == 0, [d.message for d in result.diagnostics]
    assert result.summary == "Megatron training, vLLM rollout, 16 GPUs"
    # What is left are warnings about what the seed elides: the model path, and a critic for adv_estimator gae.
    assert {d.path for d in result.diagnostics} <= {"pretrain", "critic.device_mapping"}


# ---- templates ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [MEGATRON, FSDP2, QUICKSTART], ids=lambda p: p.name)
def test_template_is_clean(path):
    lines = path.read_text().splitlines()
    assert lines[0] == "# yaml-language-server: $schema=../schemas/roll.schema.json"
    assert any(f"rlcfg validate templates/{path.name}" in line for line in lines[:8])
    result = check_file(str(path), env={})
    assert result.dialect == "roll"
    assert [(d.code, d.path) for d in result.diagnostics] == []


def test_quickstart_says_how_to_run_it():
    lines = QUICKSTART.read_text().splitlines()
    assert any("rlcfg run templates/quickstart-cpu.yaml" in line for line in lines[:8])
    assert check_file(str(QUICKSTART), env={}).summary == "FSDP2 training, transformers rollout, 1 GPU"


@pytest.mark.parametrize("overrides", [
    [],  # the quickstart: fsdp2_train + hf_infer, no reference
    ["init_kl_coef=0.1", "++reference.strategy_args.strategy_name=fsdp2_infer",
     "++reference.device_mapping='list(range(0,1))'"],  # a CPU-capable reference changes nothing
])
def test_hf_infer_rollout_is_quiet_when_the_whole_pipeline_runs_on_cpu(overrides):
    assert findings(QUICKSTART, *overrides) == []


@pytest.mark.parametrize("path,overrides", [
    (FSDP2, ["actor_infer.strategy_args.strategy_name=hf_infer", "~actor_infer.strategy_args.strategy_config",
             "reference.strategy_args.strategy_name=megatron_infer", "~reference.strategy_args.strategy_config"]),
    (QUICKSTART, ["++rewards.judge.strategy_args.strategy_name=vllm", "++rewards.judge.device_mapping='[1]'",
                  "++rewards.judge.tag_included=[judge]"]),
])
def test_hf_infer_rollout_still_warns_beside_a_gpu_only_worker(path, overrides):
    assert ("RLC306", "warning", "actor_infer.strategy_args.strategy_name", "roll/strategy-roles") \
        in findings(path, *overrides)


def test_describe():
    assert check_file(str(MEGATRON), env={}).summary == "Megatron training, vLLM rollout, 8 GPUs"
    assert check_file(str(FSDP2), env={}).summary == "FSDP2 training, vLLM rollout, 8 GPUs"


# ---- one test per rule --------------------------------------------------------------------------------------


def findings(path: Path, *overrides: str) -> list[tuple[str, str, str, str | None]]:
    result = check_file(str(path), list(overrides), env={})
    return [(d.code, d.severity.value, d.path, d.rule) for d in result.diagnostics]


# (rule, template, overrides, code, severity, path)
RULE_CASES = [
    ("roll/run-refusals-of-partly-shared-gpus", MEGATRON, ["reference.device_mapping='list(range(0,4))'"],
     "RLC118", "note", "reference.device_mapping"),
    ("roll/device-mapping-syntax", MEGATRON, ["actor_train.device_mapping='list(range(0,8)).copy()'"],
     "RLC204", "error", "actor_train.device_mapping"),
    ("roll/device-mapping-syntax", MEGATRON, ["actor_train.device_mapping=[0,1,2,3,4,5,6,7]"],
     "RLC204", "warning", "actor_train.device_mapping"),
    ("roll/device-mapping-syntax", MEGATRON, ["actor_train.device_mapping='[0,1,1,2,3,4,5,6]'"],
     "RLC204", "error", "actor_train.device_mapping"),
    ("roll/device-mapping-required", MEGATRON, ["~reference.device_mapping"],
     "RLC203", "error", "reference.device_mapping"),
    ("roll/device-mapping-required", MEGATRON, ["~rewards.math_rule.world_size"],
     "RLC302", "error", "rewards.math_rule.world_size"),
    ("roll/gpus-per-worker-divides", MEGATRON, ["actor_infer.device_mapping='list(range(0,7))'"],
     "RLC400", "error", "actor_infer.device_mapping"),
    ("roll/placement-fits-cluster", MEGATRON, ["num_nodes=1", "reference.device_mapping='list(range(8,16))'"],
     "RLC403", "warning", "reference.device_mapping"),
    ("roll/num-nodes-derived", MEGATRON, ["num_gpus_per_node=8"], "RLC304", "warning", "num_gpus_per_node"),
    ("roll/num-nodes-derived", MEGATRON, ["num_nodes=2"], "RLC304", "warning", "num_nodes"),
    ("roll/idle-gpus", MEGATRON, ["reference.device_mapping='list(range(10,18))'"],
     "RLC404", "warning", "reference.device_mapping"),
    # a reward worker with a model: an LLM judge (the math rule builds none, whatever its strategy says)
    ("roll/reward-overlaps-rollout", MEGATRON, ["++rewards.math_rule.strategy_args.strategy_name=hf_infer",
                                                "++rewards.math_rule.device_mapping='list(range(6,8))'",
                                                "++rewards.math_rule.worker_cls=roll.pipeline.rlvr.rewards."
                                                "llm_judge_reward_worker.LLMJudgeRewardWorker"],
     "RLC401", "error", "rewards.math_rule.device_mapping"),
    ("roll/reward-overlaps-rollout", MEGATRON, ["async_generation_ratio=1"],
     "RLC401", "warning", "actor_infer.device_mapping"),
    ("roll/strategy-roles", MEGATRON, ["actor_infer.strategy_args.strategy_name=hf_infer",
                                       "~actor_infer.strategy_args.strategy_config"],
     "RLC306", "warning", "actor_infer.strategy_args.strategy_name"),
    ("roll/strategy-roles", FSDP2, ["actor_train.strategy_args.strategy_name=fsdp2_infer"],
     "RLC306", "error", "actor_train.strategy_args.strategy_name"),
    ("roll/strategy-config-keys", MEGATRON, ["++actor_infer.strategy_args.strategy_config.max_num_seq=8"],
     "RLC102", "error", "actor_infer.strategy_args.strategy_config.max_num_seq"),
    ("roll/strategy-config-keys", MEGATRON, ["++actor_infer.strategy_args.strategy_config.served_model_name=x"],
     "RLC102", "warning", "actor_infer.strategy_args.strategy_config.served_model_name"),
    ("roll/megatron-parallel", MEGATRON, ["++reference.strategy_args.strategy_config.tensor_model_parallel_size=3"],
     "RLC400", "error", "reference.device_mapping"),
    ("roll/megatron-parallel", MEGATRON, ["++actor_train.strategy_args.strategy_config.expert_model_parallel_size=8"],
     "RLC400", "error", "actor_train.strategy_args.strategy_config.expert_model_parallel_size"),
    ("roll/megatron-options", MEGATRON, ["++actor_train.strategy_args.strategy_config.overlap_param_gather=true"],
     "RLC306", "error", "actor_train.strategy_args.strategy_config.overlap_param_gather"),
    ("roll/fsdp2-parallel", FSDP2, ["actor_train.model_args.ulysses_size=3"],
     "RLC400", "error", "actor_train.model_args.ulysses_size"),
    ("roll/fsdp2-parallel", FSDP2, ["actor_train.strategy_args.strategy_config.fsdp_size=3"],
     "RLC400", "error", "actor_train.strategy_args.strategy_config.fsdp_size"),
    ("roll/rollout-engine-sizes", MEGATRON, ["++actor_infer.strategy_args.strategy_config.data_parallel_size=8"],
     "RLC305", "error", "actor_infer.strategy_args.strategy_config.data_parallel_size"),
    ("roll/router-replay", MEGATRON, ["actor_train.router_replay.mode=R2"],
     "RLC306", "error", "actor_train.router_replay.mode"),
    ("roll/lora-strategy", MEGATRON, ["actor_infer.strategy_args.strategy_name=sglang",
                                      "~actor_infer.strategy_args.strategy_config", "actor_infer.num_gpus_per_worker=2",
                                      "actor_infer.model_args.lora_target=all"],
     "RLC306", "error", "actor_infer.model_args.lora_target"),
    ("roll/global-train-batch", MEGATRON, ["actor_train.training_args.gradient_accumulation_steps=48"],
     "RLC300", "error", "actor_train.training_args.gradient_accumulation_steps"),
    ("roll/global-train-batch", FSDP2, ["actor_train.training_args.gradient_accumulation_steps=24"],
     "RLC300", "error", "actor_train.training_args.gradient_accumulation_steps"),
    ("roll/megatron-rollout-batch", MEGATRON, ["rollout_batch_size=66"], "RLC300", "error", "rollout_batch_size"),
    # 500 steps × 512 samples / (2 × 64 per rank) / 4 data-parallel ranks = 500 schedule steps.
    ("roll/megatron-warmup-within-decay", MEGATRON, ["actor_train.training_args.warmup_steps=500"],
     "RLC305", "error", "actor_train.training_args.warmup_steps"),
    ("roll/megatron-warmup-within-decay", MEGATRON,
     ["actor_train.training_args.warmup_steps=0", "actor_train.training_args.warmup_ratio=1.0"],
     "RLC305", "error", "actor_train.training_args.warmup_ratio"),
    ("roll/dynamic-batching", MEGATRON, ["actor_train.use_dynamic_batching_in_train=true"],
     "RLC302", "error", "actor_train.max_tokens_per_microbatch_in_train"),
    ("roll/lengths", MEGATRON, ["response_length=null"], "RLC203", "error", "response_length"),
    ("roll/lengths", MEGATRON, ["val_prompt_length=1024"], "RLC302", "error", "val_prompt_length"),
    ("roll/max-steps", MEGATRON, ["max_steps=0"], "RLC201", "warning", "max_steps"),
    ("roll/max-steps", MEGATRON, ["max_steps=0"], "RLC118", "note", "max_steps"),
    ("roll/profilers-exclusive", MEGATRON, ["profiler_timeline=true", "profiler_memory=true"],
     "RLC301", "error", "profiler_memory"),
    ("roll/prompt-or-messages", MEGATRON, ["actor_train.data_args.prompt=question"],
     "RLC301", "error", "actor_train.data_args.messages"),
    ("roll/async-generation", MEGATRON, ["async_generation_ratio=1", "generate_opt_level=0"],
     "RLC302", "error", "generate_opt_level"),
    ("roll/async-generation", MEGATRON, ["async_generation_ratio=0.5"], "RLC201", "error", "async_generation_ratio"),
    ("roll/num-gpus-per-worker-rewritten", MEGATRON, ["actor_train.num_gpus_per_worker=2"],
     "RLC304", "warning", "actor_train.num_gpus_per_worker"),
    ("roll/num-gpus-per-worker-rewritten", MEGATRON, ["actor_infer.num_gpus_per_worker=1"],
     "RLC304", "warning", "actor_infer.num_gpus_per_worker"),
    ("roll/generation-rewritten", MEGATRON, ["actor_infer.generating_args.max_new_tokens=1024"],
     "RLC304", "warning", "actor_infer.generating_args.max_new_tokens"),
    ("roll/generation-rewritten", MEGATRON, ["actor_infer.generating_args.num_return_sequences=4"],
     "RLC304", "warning", "actor_infer.generating_args.num_return_sequences"),
    ("roll/model-paths", MEGATRON, ["actor_train.model_args.model_name_or_path=/models/other"],
     "RLC304", "warning", "actor_train.model_args.model_name_or_path"),
    ("roll/pipeline-overrides", MEGATRON, ["enable_reference=false"], "RLC304", "warning", "enable_reference"),
    ("roll/pipeline-overrides", MEGATRON, ["actor_train.training_args.seed=7"],
     "RLC304", "warning", "actor_train.training_args.seed"),
    ("roll/pipeline-overrides", MEGATRON, ["actor_infer.max_concurrency=8"],
     "RLC304", "warning", "actor_infer.max_concurrency"),
    ("roll/ignored-keys", MEGATRON, ["actor_train.model_args.flash_attn=fa2"],
     "RLC307", "warning", "actor_train.model_args.flash_attn"),
    ("roll/max-steps", AGENTIC, ["max_steps=0"], "RLC201", "error", "max_steps"),
    ("roll/agentic-generating-args", AGENTIC, ["~actor_infer.generating_args"],
     "RLC302", "error", "actor_infer.generating_args"),
    ("roll/agentic-envs", AGENTIC, ["train_env_manager.tags=[GridPuzle]"], "RLC302", "error", "train_env_manager.tags"),
    ("roll/agentic-envs", AGENTIC, ["~custom_envs.GridPuzzleLarge.env_type"],
     "RLC302", "error", "custom_envs.GridPuzzleLarge"),
    ("roll/agentic-envs", AGENTIC, ["val_env_manager.num_groups_partition=[32,16]"],
     "RLC302", "error", "val_env_manager.num_env_groups"),
    ("roll/agentic-batch", AGENTIC, ["train_env_manager.group_size=3"], "RLC300", "error", "rollout_batch_size"),
    ("roll/agentic-batch", AGENTIC, ["train_env_manager.max_traj_per_env=0", "rollout_batch_size=512"],
     "RLC300", "error", "train_env_manager.max_traj_per_env"),
    ("roll/agentic-batch", AGENTIC, ["val_batch_size=96"], "RLC300", "error", "val_batch_size"),
    ("roll/opd", MEGATRON, ["is_pure_opd=true", "use_opd=true"], "RLC301", "error", "use_opd"),
    ("roll/opd", MEGATRON, ["use_opd=true"], "RLC301", "error", "teacher"),
    ("roll/opd", MEGATRON, ["use_opd=true", "+teacher.device_mapping='list(range(0,8))'"],
     "RLC301", "error", "reference"),
    ("roll/tracker", MEGATRON, ["track_with=ml_tracker"], "RLC202", "error", "track_with"),
    ("roll/checkpoint-config", AGENTIC, ["+checkpoint_config.type=file_system"],
     "RLC302", "error", "checkpoint_config.output_dir"),
    ("roll/rlvr-generating-args", MEGATRON, ["~actor_infer.generating_args"],
     "RLC302", "error", "actor_infer.generating_args"),
    ("roll/run-refusals", MEGATRON, ["actor_train.training_args.lr_scheduler_type=polynomial"],
     "RLC118", "note", "actor_train.training_args.lr_scheduler_type"),
    ("roll/run-refusals", MEGATRON, ["++rewards.code.worker_cls=roll.pipeline.rlvr.rewards.code_sandbox_reward_worker."
                                     "CodeSandboxRewardWorker", "++rewards.code.world_size=1"],
     "RLC118", "note", "rewards"),
    ("roll/run-refusals", MEGATRON, ["++rewards.code.worker_cls=roll.pipeline.rlvr.rewards.code_sandbox_reward_worker."
                                     "CodeSandboxRewardWorker", "++rewards.code.world_size=1"],
     "RLC118", "note", "rewards.code.worker_cls"),
    ("roll/run-refusals-of-worker-settings", MEGATRON, ["+actor_train.model_args.freeze_module_prefix=vision_model"],
     "RLC118", "note", "actor_train.model_args.freeze_module_prefix"),
    ("roll/run-refusals-of-worker-settings", MEGATRON, ["+rewards.math_rule.system_envs={A: '1'}"],
     "RLC118", "note", "rewards.math_rule.system_envs"),
    ("roll/run-refusals-of-runtime-limits", MEGATRON,
     ["+actor_train.strategy_args.strategy_config.expert_model_parallel_size=2"],
     "RLC118", "note", "actor_train.strategy_args.strategy_config.expert_model_parallel_size"),
    ("roll/run-refusals-of-runtime-limits", MEGATRON, ["adv_estimator=gae", "++critic.device_mapping='list(range(0,8))'",
                                                        "++critic.strategy_args.strategy_name=megatron_train"],
     "RLC118", "note", "critic.strategy_args.strategy_name"),
    ("roll/query-filter-args", MEGATRON, ["++rewards.math_rule.query_filter_config.type=std_filter",
                                          "++rewards.math_rule.query_filter_config.filter_args={std_threshold: '0'}"],
     "RLC200", "error", "rewards.math_rule.query_filter_config.filter_args.std_threshold"),
    ("roll/ppo-epochs", MEGATRON, ["ppo_epochs=0"], "RLC201", "warning", "ppo_epochs"),
    ("roll/ppo-epochs", MEGATRON, ["ppo_epochs=0"], "RLC118", "note", "ppo_epochs"),
    # FSDP2 looks its options up by name: Megatron's are never read there, and the run goes on
    ("roll/strategy-config-keys", FSDP2, ["+actor_train.strategy_args.strategy_config.tensor_model_parallel_size=2"],
     "RLC307", "warning", "actor_train.strategy_args.strategy_config.tensor_model_parallel_size"),
    ("roll/reward-normalization-fallback", AGENTIC, ["++reward_normalization.method=mean_stdd",
                                                     "reward_normalization.norm_mean_type=null"],
     "RLC304", "warning", "reward_normalization.method"),
]


@pytest.mark.parametrize("rule,template,overrides,code,severity,path", RULE_CASES,
                         ids=[f"{c[0]}:{c[5]}:{c[4]}" for c in RULE_CASES])
def test_rule(rule, template, overrides, code, severity, path):
    found = findings(template, *overrides)
    assert (code, severity, path, rule) in found, found


def test_every_rule_has_a_test():
    # these fire for a pinned release only (test_deepspeed_under_main_names_the_release_that_...,
    # test_what_only_v0_1_0_checks_at_load)
    tested = {case[0] for case in RULE_CASES} | {"roll/strategy-release", "roll/v010-load-checks"}
    assert {rule.id for rule in RULES} <= tested


def test_rewrite_warnings_need_the_user_to_set_the_value():
    # The templates write max_new_tokens as ${response_length}: the value ROLL computes, so no warning.
    assert findings(MEGATRON) == []
    assert findings(MEGATRON, "response_length=2048") == []


def test_unknown_worker_key_is_an_error_with_a_suggestion(tmp_path):
    # written in the file (a `+key` override is a key the user adds on purpose: RLC115)
    result = check_file(str(written(tmp_path, MEGATRON, actor_train__trainig_args={"learning_rate": 1.0})), env={})
    unknown = [d for d in result.diagnostics if d.code == "RLC102"]
    assert unknown and "training_args" in unknown[0].hint


def test_unknown_strategy_name_suggests_the_right_one():
    result = check_file(str(MEGATRON), ["actor_infer.strategy_args.strategy_name=vllmm"], env={})
    [bad] = [d for d in result.diagnostics if d.code == "RLC202"]
    assert bad.path == "actor_infer.strategy_args.strategy_name"
    assert "vllm" in bad.hint


def test_strategy_config_key_of_another_engine_names_the_right_key():
    result = check_file(str(MEGATRON), ["++actor_train.strategy_args.strategy_config.tensor_parallel_size=2"],
                        env={})
    [bad] = [d for d in result.diagnostics if d.code == "RLC102"]
    assert "tensor_model_parallel_size" in bad.hint


def test_strategy_config_types_are_checked_per_strategy():
    result = check_file(str(MEGATRON), ["++actor_infer.strategy_args.strategy_config.gpu_memory_utilization=1.5"],
                        env={})
    [bad] = [d for d in result.diagnostics if d.severity.value == "error"]
    assert (bad.code, bad.path) == ("RLC201", "actor_infer.strategy_args.strategy_config.gpu_memory_utilization")


# ---- the device_mapping grammar -----------------------------------------------------------------------------


@pytest.mark.parametrize("text,ids", [
    ("list(range(0,16))", tuple(range(16))),
    ("list(range(8, 16))", tuple(range(8, 16))),
    ("list(range(0,16,2))", tuple(range(0, 16, 2))),
    ("list(range(4))", (0, 1, 2, 3)),
    ("range(0,4)", (0, 1, 2, 3)),
    ("[0,1,2]", (0, 1, 2)),
    ("[ 3, 1 ,]", (3, 1)),
    ("list([1, 3])", (1, 3)),
    ("  list( range( 0 , 2 ) )  ", (0, 1)),
])
def test_accepted_forms(text, ids):
    assert parse_device_mapping(text) == ids


@pytest.mark.parametrize("text,words", [
    ("__import__('os').system('true')", "calling `__import__`"),
    ("os.system('true')", "name `os`"),
    ("list(range(0,8)).copy()", "attribute access"),
    ("list(range(0,8)) + [8]", "arithmetic"),
    ("list(range(0, 2*4))", "arithmetic"),
    ("list(map(int, [1]))", "calling `map`"),
    ("[x for x in range(4)]", "name `x`"),
    ("list(range(0,8)", "expected `)`"),
    ("list(range(0,8,0))", "step"),
    ("list(range(0,10**12))", "arithmetic"),
    ("list(range(0,1000000000))", "more than any cluster"),
    ("", "empty"),
    ("'0,1'", "string literal"),
])
def test_rejected_forms(text, words):
    with pytest.raises(DeviceMappingError) as raised:
        parse_device_mapping(text)
    assert words in raised.value.message


def test_os_system_is_rejected_and_never_executed(tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    calls = []
    monkeypatch.setattr(os, "system", lambda *a: calls.append(a) or 0)
    for name in ("eval", "exec", "compile"):
        monkeypatch.setattr(builtins, name, lambda *a, _n=name, **k: calls.append((_n, a)) or None)
    config = MEGATRON.read_text().replace(
        "device_mapping: list(range(0,8))\n  infer_batch_size: 8",
        f"device_mapping: __import__('os').system('touch {marker}')\n  infer_batch_size: 8", 1)
    assert "__import__" in config
    result = check_text(config, "evil.yaml", env={})
    monkeypatch.undo()
    [bad] = [d for d in result.diagnostics if d.code == "RLC204"]
    assert bad.path == "reference.device_mapping" and "calling `__import__` is not allowed" in bad.message
    assert calls == [] and not marker.exists()
    # and through the CLI, as a user runs it
    evil = tmp_path / "evil.yaml"
    evil.write_text(config)
    run = cli("validate", str(evil))
    assert run.returncode == 1 and "RLC204" in run.stdout and not marker.exists()


id_lists = st.lists(st.integers(min_value=0, max_value=4096), min_size=1, max_size=64)


@settings(max_examples=300, deadline=None)
@given(id_lists)
def test_format_then_parse_round_trips(ids):
    assert parse_device_mapping(format_device_mapping(ids)) == tuple(ids)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 512), st.integers(0, 512), st.integers(1, 16))
def test_ranges_mean_what_python_means(start, stop, step):
    text = f"list(range({start},{stop},{step}))"
    assert parse_device_mapping(text) == tuple(range(start, stop, step))


_ALPHABET = st.sampled_from(list("()[],.+-*'\" _0123456789") + ["list", "range", "os", "system", "__import__",
                                                                   "eval", "lambda", "\n", "\x00", "é"])


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(max_size=80), st.lists(_ALPHABET, max_size=40).map("".join)))
def test_arbitrary_strings_never_raise_anything_else_and_never_execute(monkeypatch_text):
    calls = []
    saved = {name: getattr(builtins, name) for name in ("eval", "exec", "compile", "__import__")}
    try:
        for name in saved:
            setattr(builtins, name, lambda *a, _n=name, _f=saved[name], **k: calls.append(_n) or _f(*a, **k))
        try:
            ids = parse_device_mapping(monkeypatch_text)
        except DeviceMappingError as exc:
            assert exc.message
        else:
            assert all(isinstance(i, int) for i in ids)
    finally:
        for name, value in saved.items():
            setattr(builtins, name, value)
    assert "eval" not in calls and "exec" not in calls and "compile" not in calls


def test_describe_ids():
    assert describe_ids([0, 1, 2, 3, 7, 9, 10]) == "0-3, 7, 9-10"


# ---- golden diagnostics -------------------------------------------------------------------------------------


def test_broken_text_golden():
    run = cli("validate", "tests/fixtures/roll/broken.yaml")
    assert run.returncode == 1
    assert_golden("roll/broken.txt", run.stdout)
    assert re.search(r"tests/fixtures/roll/broken\.yaml:\d+:\d+", run.stdout)


def test_broken_json_golden():
    run = cli("validate", "tests/fixtures/roll/broken.yaml", "--format", "json")
    assert run.returncode == 1
    assert_golden("roll/broken.json", run.stdout)
    document = json.loads(run.stdout)
    text = json.dumps(document)
    assert "RLC204" in text and "RLC102" in text and "RLC300" in text and "RLC401" in text


# ---- issue 11: ROLL's loader (dacite over the config dataclasses at main) -----------------------------------

INVENTORY = ROOT / "tests" / "inventory" / "roll" / "main.json"


def errors_of(path: Path, *overrides: str) -> list[tuple[str, str]]:
    result = check_file(str(path), list(overrides), env={})
    return [(d.code, d.path) for d in result.diagnostics if d.severity.value == "error"]


def written(tmp_path: Path, base: Path, **changes) -> Path:
    """A copy of `base` with dotted keys (written with `__` for `.`) set in the document itself, as a user writes
    them (a `+key` override would instead be a key the user adds on purpose)."""
    import yaml

    data = yaml.safe_load(base.read_text())
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    out = tmp_path / base.name
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


@pytest.mark.parametrize("pipeline", ["rlvr", "agentic"])
def test_every_inventoried_key_is_known(pipeline):
    inventory = json.loads(INVENTORY.read_text())
    root = DIALECT.variants()[pipeline]
    unknown = [key for key in inventory["pipelines"][pipeline]
               if key not in inventory.get("unmodelled", {}) and field_at(root, tuple(key.split(".")))[0] is None]
    assert unknown == []


def test_keys_of_roll_main_that_the_doc_snapshot_lacked(tmp_path):
    path = written(tmp_path, MEGATRON, actor_train__data_args__image_max_pixels=1048576,
                   actor_train__data_args__video_fps=1.5, rollout_mock={"enable": True, "mode": "dump"},
                   actor_train__strategy_args__strategy_config__recompute_modules="moe,layernorm",
                   actor_train__strategy_args__strategy_config__pipeline_model_parallel_layout="Et|tL")
    result = check_file(str(path), env={})
    assert result.errors == 0 and not [d for d in result.diagnostics if d.code in ("RLC102", "RLC114")]


def test_explicit_null_of_a_non_optional_field_is_refused():
    # dacite refuses None for a field ROLL types without Optional, although the field defaults to None
    assert ("RLC200", "reward_clip") in errors_of(MEGATRON, "+reward_clip=null")
    assert errors_of(MEGATRON, "+reward_clip=5.0") == []
    assert ("RLC200", "actor_train.model_args.model_name_or_path") in errors_of(
        MEGATRON, "+actor_train.model_args.model_name_or_path=null")


def test_lora_target_may_be_written_as_null():
    # ROLL types it Optional[str] with None meaning the full model, as an unset key does
    assert errors_of(FSDP2, "++actor_train.model_args.lora_target=null") == []


MATH_RULE_ON_GPUS = ["++rewards.math_rule.strategy_args.strategy_name=vllm",
                     '++rewards.math_rule.device_mapping="list(range(0,2))"', "~rewards.math_rule.world_size"]


def test_a_math_rule_reward_worker_given_gpus_and_a_strategy_loads_no_model():
    # ROLL's MathRuleRewardWorker never builds its strategy: neither its GPUs nor its strategy make it a reward model
    # that competes with the rollout for memory, and rlcfg runs it as the rule it is.
    result = check_file(str(FSDP2), MATH_RULE_ON_GPUS, env={})
    assert result.ok, [(d.code, d.path) for d in result.diagnostics if d.severity.value == "error"]
    assert not [d for d in result.diagnostics if d.code in ("RLC118", "RLC401")]
    llm_judge = ("++rewards.math_rule.worker_cls=roll.pipeline.rlvr.rewards.llm_judge_reward_worker."
                 "LLMJudgeRewardWorker")
    judged = check_file(str(FSDP2), [*MATH_RULE_ON_GPUS, llm_judge], env={})
    assert ("RLC401", "rewards.math_rule.device_mapping") in {(d.code, d.path) for d in judged.diagnostics}
    refusal = next(d for d in judged.diagnostics if d.path == "rewards.math_rule.worker_cls")
    assert refusal.hint == ("set `worker_cls: roll.pipeline.rlvr.rewards.math_rule_reward_worker."
                            "MathRuleRewardWorker`")


def test_deepspeed_strategies_are_gone_from_roll_main():
    pinned = check_file(str(MEGATRON), ["actor_train.strategy_args.strategy_name=deepspeed_train"], env={},
                        release="main")
    assert ("RLC202", "actor_train.strategy_args.strategy_name") in [(d.code, d.path) for d in pinned.diagnostics]


def test_unknown_keys_are_dropped_like_dacite_does(tmp_path):
    path = written(tmp_path, MEGATRON, validation__eval_steps=10, unrelated_note="x")
    result = check_file(str(path), env={})
    by_path = {d.path: d for d in result.diagnostics}
    assert result.errors == 0
    assert by_path["validation.eval_steps"].code == "RLC114"
    assert by_path["unrelated_note"].code == "RLC114"
    # a near-miss of a known key is still an error, with the key ROLL reads
    typo = check_file(str(written(tmp_path, MEGATRON, rollout_batch_sizee=64)), env={})
    [bad] = [d for d in typo.diagnostics if d.path == "rollout_batch_sizee"]
    assert bad.severity.value == "error" and "rollout_batch_size" in bad.hint
    # a key ROLL reads elsewhere, written at the wrong level, is dropped like its siblings, not taken for a typo
    misplaced = check_file(str(written(tmp_path, MEGATRON, lora_rank=8, lora_alpha=16)), env={})
    found = {d.path: d for d in misplaced.diagnostics if d.path in ("lora_rank", "lora_alpha")}
    assert {p: d.code for p, d in found.items()} == {"lora_rank": "RLC114", "lora_alpha": "RLC114"}
    assert found["lora_rank"].hint.startswith("this key exists under `actor_train.model_args`")


def test_helper_variables_read_through_interpolation_pass_silently():
    result = check_file(str(AGENTIC), env={})
    assert result.ok and result.variant == "agentic"
    assert not [d for d in result.diagnostics if d.path in ("turn_tokens", "max_turns")]


def test_sglang_tensor_parallel_defaults_to_the_worker_gpus():
    overrides = ["actor_infer.strategy_args.strategy_name=sglang", "~actor_infer.strategy_args.strategy_config",
                 "actor_infer.num_gpus_per_worker=2"]
    assert ("RLC305", "actor_infer.num_gpus_per_worker") not in errors_of(MEGATRON, *overrides)
    assert ("RLC305", "actor_infer.num_gpus_per_worker") in errors_of(
        MEGATRON, *overrides, "+actor_infer.strategy_args.strategy_config.tensor_parallel_size=3")


def test_agentic_fixture_and_here_composition():
    for path in (AGENTIC, FIXTURES / "compose" / "agentic_here.yaml"):
        result = check_file(str(path), env={})
        assert result.ok and result.variant == "agentic", [d.message for d in result.diagnostics]
        assert result.release == "main"


@pytest.mark.parametrize("key,name", [("sft_train", "ROLL SFT pipeline"), ("chosen_key", "ROLL DPO pipeline"),
                                      ("student", "ROLL distill pipeline")])
def test_pipelines_rlcfg_does_not_model_get_one_warning(key, name):
    text = f"{key}: {{}}\nrollout_batch_size: 64\nsequence_length: 1024\nunknown_of_that_pipeline: 1\n"
    result = check_text(text, "other.yaml", dialect="roll", env={})
    assert result.ok and result.pipeline == name
    assert [d.code for d in result.diagnostics] == ["RLC116"]
    # the keys every pipeline shares are still checked
    bad = check_text(text + "seed: seven\n", "other.yaml", dialect="roll", env={})
    assert not bad.ok


def test_a_dpo_config_is_told_from_its_keys_without_dialect():
    # a DPO config has no actor_infer: it is ROLL's, named as a pipeline rlcfg does not model, not refused as unknown
    shape = "exp_name: x\npretrain: Qwen/Qwen2.5-3B\nactor_train: {}\nreference: {}\nchosen_key: c\nrejected_key: r\n"
    result = check_text(shape, "dpo.yaml", env={})
    assert result.dialect == "roll" and result.pipeline == "ROLL DPO pipeline"
    assert result.ok and [d.code for d in result.diagnostics] == ["RLC116"], [d.message for d in result.diagnostics]


def test_rollout_only_configs_need_no_training_gpus(tmp_path):
    # start_agentic_rollout_pipeline.py: the same AgenticConfig, but actor_train has no GPUs and no strategy
    path = written(tmp_path, AGENTIC, actor_train={"model_args": {"dtype": "bf16"}})
    result = check_file(str(path), env={})
    assert result.ok and result.pipeline is None, [d.message for d in result.diagnostics]
    # a training config that only forgot its device_mapping still gets the error
    assert ("RLC203", "actor_train.device_mapping") in errors_of(MEGATRON, "~actor_train.device_mapping")


def _codes(result) -> list[str]:
    return [d.code for d in result.diagnostics if d.code in ("RLC116", "RLC118")]


def test_an_agentic_config_gets_one_note_for_the_whole_pipeline_and_none_per_setting():
    # actor_train.pg_variant alone is a setting `rlcfg run` refuses; in an agentic config the pipeline is said once
    result = check_file(str(AGENTIC), ["++actor_train.pg_variant=topr"], env={})
    assert result.ok and _codes(result) == ["RLC116"]
    [note] = [d for d in result.diagnostics if d.code == "RLC116"]
    assert "ROLL agentic pipeline" in note.message and "environment managers" in note.message
    assert result.unrun is not None


def test_a_rollout_only_config_is_validated_but_not_run(tmp_path):
    path = written(tmp_path, AGENTIC, actor_train={"model_args": {"dtype": "bf16"}})
    assert _codes(check_file(str(path), env={})) == ["RLC116"]
    rlvr = check_file(str(QUICKSTART), ["~actor_train.device_mapping", "~actor_train.strategy_args"], env={})
    assert rlvr.ok and _codes(rlvr) == ["RLC116"]
    assert any("ROLL rollout-only pipeline" in d.message for d in rlvr.diagnostics if d.code == "RLC116")


def test_the_lowering_refuses_exactly_the_pipelines_validate_names():
    from rlcfg.dialects.roll.lower import lower
    from rlcfg.source.yaml_loader import UsageError

    result = check_file(str(AGENTIC), env={})
    with pytest.raises(UsageError, match="ROLL agentic pipeline"):
        lower(result.config)
    assert DIALECT.unrun_pipeline(check_file(str(QUICKSTART), env={}).config) is None


def test_a_multi_domain_config_plans_with_its_notes(tmp_path):
    # ROLL's own five-domain examples used to stop `rlcfg plan`; the plan now draws the map of one domain and says
    # what `rlcfg run` refuses
    run = cli("plan", str(QUICKSTART), "--show-gpu-map",
              "++rewards.code.worker_cls=roll.pipeline.rlvr.rewards.code_sandbox_reward_worker."
              "CodeSandboxRewardWorker", "++rewards.code.world_size=1")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "GPU map" in run.stdout or "placement" in run.stdout
    assert "RLC118" in run.stdout and "`rewards`" in run.stdout and "rewards.code.worker_cls" in run.stdout


def test_hydra_now_resolver(tmp_path):
    path = written(tmp_path, AGENTIC, model_name="${exp_name}-${now:%Y%m%d}")
    assert check_file(str(path), env={}).ok


@pytest.mark.parametrize("many", [False, True])
@pytest.mark.parametrize("written_flag", [True, False])
def test_pure_opd_runs_the_students_and_the_teacher(tmp_path, many, written_flag):
    import yaml

    data = yaml.safe_load(MEGATRON.read_text())
    teacher = data.pop("reference")
    flag = {"is_pure_opd": True} if written_flag else {}
    path = written(tmp_path, MEGATRON, **flag, student_train=data.pop("actor_train"),
                   student_infer=data.pop("actor_infer"), teacher={"math": teacher} if many else teacher)
    text = yaml.safe_load(path.read_text())
    for key in ("actor_train", "actor_infer", "reference"):
        text.pop(key)
    path.write_text(yaml.safe_dump(text, sort_keys=False))
    # the student roles tell ROLL's on-policy distillation; without is_pure_opd written, the config is one for the
    # OPD start script, which sets it (its examples never write it)
    result = check_file(str(path), env={})
    assert result.dialect == "roll" and result.ok, [d.message for d in result.diagnostics if d.severity.value == "error"]
    assert result.config.is_pure_opd and result.unrun is not None


def test_runtime_limits_only_on_the_backend_that_meets_them():
    # The Megatron strategy reads no ulysses_size, FSDP2 no Megatron sizes; the reference is judged only when it runs.
    rule = "roll/run-refusals-of-runtime-limits"
    assert not [f for f in findings(MEGATRON, "++actor_train.model_args.ulysses_size=2") if f[3] == rule]
    assert not [f for f in findings(FSDP2, "+actor_train.model_args.ulysses_size=1",
                                    "++actor_train.strategy_args.strategy_config.context_parallel_size=2")
                if f[3] == rule]


# ---- releases: main, and v0.2.1 (DeepSpeed's last) --------------------------------------------------------------


def _deepspeed(tmp_path: Path, *, name: bool = True) -> Path:
    """The FSDP2 template with actor_train and reference on DeepSpeed (ZeRO config passed through)."""
    text = FSDP2.read_text().replace("strategy_name: fsdp2_train", "strategy_name: deepspeed_train", 1) \
        .replace("strategy_name: fsdp2_infer", "strategy_name: deepspeed_infer", 1)
    if not name:
        text = text.replace("    strategy_name: deepspeed_train\n", "", 1)
    path = tmp_path / "deepspeed.yaml"
    path.write_text(text)
    return path


def test_a_deepspeed_config_is_judged_by_the_last_release_that_has_deepspeed(tmp_path):
    result = check_file(str(_deepspeed(tmp_path)), env={})
    assert result.release == "v0.2.1" and "DeepSpeed" in result.release_reason
    assert not [d for d in result.diagnostics if d.severity.value == "error"], [d.message for d in result.diagnostics]
    # `rlcfg run` does not train with DeepSpeed: it says so before any worker starts
    assert any(d.code == "RLC118" or d.code == "RLC119" for d in result.diagnostics) or result.unrun is None


def test_deepspeed_under_main_names_the_release_that_removed_it(tmp_path):
    result = check_file(str(_deepspeed(tmp_path)), env={}, release="main")
    errors = [d for d in result.diagnostics if d.code == "RLC202"]
    assert [d.path for d in errors] == ["actor_train.strategy_args.strategy_name",
                                        "reference.strategy_args.strategy_name"]
    assert "removed DeepSpeed after v0.2.1" in errors[0].message
    assert "--framework-version v0.2.1" in errors[0].hint


def test_v021_defaults_a_nameless_strategy_to_deepspeed_and_drops_later_keys(tmp_path):
    path = _deepspeed(tmp_path, name=False)
    text = path.read_text() + "otlp_output_dir: ./otlp\n"
    path.write_text(text)
    result = check_file(str(path), env={}, release="v0.2.1")
    assert result.config.actor_train.strategy_args.strategy_name == "deepspeed_train"
    [later] = [d for d in result.diagnostics if d.code == "RLC113"]
    assert later.path == "otlp_output_dir" and later.severity.value == "warning"
    # on main, the same nameless strategy_args is ROLL main's default, fsdp2_train
    main = check_file(str(_deepspeed(tmp_path, name=False)), env={}, release="main")
    assert main.config is None or main.config.actor_train.strategy_args.strategy_name == "fsdp2_train"


def test_the_v0_1_releases_are_told_by_their_keys_and_strategies(tmp_path):
    """v0.1.3 had train/infer mismatch masks that v0.2.1 removed; v0.1.0 had no FSDP2 and no
    diffusion_deepspeed_train."""
    path = _deepspeed(tmp_path)
    path.write_text(path.read_text() + "train_infer_ratio_mask: true\ntrain_infer_ratio_threshold_high: 1.5\n")
    result = check_file(str(path), env={})
    assert result.release == "v0.1.3", result.release_reason
    assert "`train_infer_ratio_mask` is a key of ROLL v0.1.3" in result.release_reason
    assert result.ok, [d.message for d in result.diagnostics if d.severity.value == "error"]
    # typed, and refused by `rlcfg run` unless at the release's default
    assert {d.path for d in result.diagnostics if d.code == "RLC118"} >= {"train_infer_ratio_mask",
                                                                         "train_infer_ratio_threshold_high"}
    wrong = check_file(str(path), ["train_infer_ratio_threshold_high=high"], env={})
    assert ("RLC200", "train_infer_ratio_threshold_high") in {(d.code, d.path) for d in wrong.diagnostics}
    # main drops them, as dacite drops any key it lacks
    main = check_file(str(path), env={}, release="main")
    assert ("RLC114", "train_infer_ratio_mask") in {(d.code, d.path) for d in main.diagnostics}
    # FSDP2 came after v0.1.x: under v0.1.0 it is an error that names a release that has it
    fsdp = check_file(str(FSDP2), env={}, release="v0.1.0")
    [error] = [d for d in fsdp.diagnostics if d.rule == "roll/strategy-release"][:1]
    assert "which ROLL v0.1.0 does not have" in error.message and "--framework-version" in error.hint


def test_what_only_v0_1_0_checks_at_load():
    """v0.1.0's RLVR config types reward_norm as a Literal (YAML's `None` is the string "None"), and its env managers
    must split their environments evenly over the workers; later releases check neither."""
    findings_at = lambda path, release, *o: {(d.code, d.path) for d in  # noqa: E731
                                             check_file(str(path), list(o), env={}, release=release).diagnostics}
    assert ("RLC202", "reward_norm") in findings_at(MEGATRON, "v0.1.0", "+reward_norm=None")
    assert ("RLC202", "reward_norm") not in findings_at(MEGATRON, "v0.1.0", "+reward_norm=group")
    assert ("RLC202", "reward_norm") not in findings_at(MEGATRON, "v0.1.3", "+reward_norm=None")
    uneven = ["train_env_manager.num_env_groups=1", "train_env_manager.group_size=1",
              "train_env_manager.num_groups_partition=[1]", "train_env_manager.max_env_num_per_worker=16"]
    assert ("RLC400", "train_env_manager.max_env_num_per_worker") in findings_at(AGENTIC, "v0.1.0", *uneven)
    assert ("RLC400", "train_env_manager.max_env_num_per_worker") not in findings_at(AGENTIC, "v0.1.3", *uneven)


def test_the_release_table_is_the_inventories():
    """rlcfg/dialects/roll/releases.json is what tools/inventory/roll.py --tables writes from the inventories."""
    import importlib.util

    from rlcfg.dialects.roll.models import RELEASE_TABLE

    import sys

    spec = importlib.util.spec_from_file_location("roll_tool", ROOT / "tools" / "inventory" / "roll.py")
    tool = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = tool  # its dataclasses look their module up
    spec.loader.exec_module(tool)
    assert RELEASE_TABLE == json.loads(json.dumps(tool.tables(ROOT / "tests" / "inventory" / "roll")))


def test_an_evaluation_only_config_is_rolls_rollout_pipeline(tmp_path):
    """start_rlvr_rollout_pipeline.py loads an RLVR config without actor_train: only actor_infer and the reward
    workers start, so neither a reference model nor a critic needs GPUs."""
    path = tmp_path / "eval.yaml"
    path.write_text("rollout_batch_size: 64\nnum_return_sequences_in_group: 1\npretrain: /models/qwen\n"
                    "response_length: 2048\nprompt_length: 1024\n"
                    "actor_infer:\n  generating_args: {max_new_tokens: 2048}\n"
                    "  strategy_args: {strategy_name: vllm}\n  device_mapping: list(range(0,8))\n"
                    "rewards:\n  math_rule:\n    worker_cls: roll.pipeline.rlvr.rewards.math_rule_reward_worker."
                    "MathRuleRewardWorker\n    world_size: 8\n")
    result = check_file(str(path), env={})
    assert result.dialect == "roll" and result.ok, [d.message for d in result.diagnostics]
    assert [d.code for d in result.diagnostics if d.severity.value != "note"] == ["RLC116"]


def test_an_unknown_reward_normalization_method_is_said_to_become_identity():
    result = check_file(str(AGENTIC), ["++reward_normalization.method=mean_stdd",
                                       "reward_normalization.norm_mean_type=null"])
    (found,) = [d for d in result.diagnostics if d.path == "reward_normalization.method"]
    assert found.code == "RLC304" and "replaces it with `identity`" in found.message
    # with both norm types written, ROLL never reads the method
    both = check_file(str(AGENTIC), ["++reward_normalization.method=mean_stdd"])
    assert not [d for d in both.diagnostics if d.path == "reward_normalization.method"]
