"""The ChatLearn dialect against its spec (seed 000) and its rules."""

from __future__ import annotations

import re

import pytest

from rlcfg.frontend import check_file, check_text
from rlcfg.schema import load
from rlcfg.schema.base import defaults_tree, field_at
from rlcfg.source.tree import split_dotted, walk
from rlcfg.source.yaml_loader import load_yaml
from tests.helpers import TEMPLATES, seed

DIALECT = load("chatlearn")
FSDP_TEMPLATE = str(TEMPLATES / "chatlearn-fsdp-vllm.yaml")
MEGATRON_TEMPLATE = str(TEMPLATES / "chatlearn-megatron-vllm.yaml")
HOST_ENV = {"HOME": "/home/user"}


def documented_blocks() -> list[tuple[str, dict]]:
    """(variant, tree) for each YAML block of the seed; variant is fsdp, megatron or both."""
    text = seed("000")
    blocks = []
    variant = "both"
    lines = iter(text.splitlines())
    for line in lines:
        if line.startswith("#"):
            variant = "fsdp" if "FSDP" in line else "megatron" if "Megatron" in line else "both"
        elif line.strip() == "```yaml":
            block = []
            for inner in lines:
                if inner.strip() == "```":
                    break
                block.append(inner)
            tree, problems = load_yaml("\n".join(block), "seed")
            assert not problems, problems
            blocks.append((variant, tree.data))
    return blocks


def _qualify(data: dict) -> dict:
    """Seed blocks show model sections without their `models:` parent."""
    if "runtime_args" in data or "models" in data:
        return data
    return {"models": data}


def documented_parameters() -> list[tuple[str, str, object]]:
    """(variant, dotted key, documented default); a later block wins, as the Megatron block's `load` does."""
    expected: dict[tuple[str, str], object] = {}
    for variant, data in documented_blocks():
        for path, value in walk(_qualify(data)):
            if not path or isinstance(value, dict) or any(isinstance(p, int) for p in path):
                continue
            for v in (("fsdp", "megatron") if variant == "both" else (variant,)):
                expected[(v, ".".join(path))] = value
    return [(v, key, value) for (v, key), value in expected.items()]


def test_every_documented_parameter_exists_with_its_documented_default():
    params = documented_parameters()
    assert len(params) > 100, "the seed's YAML blocks were not found"
    defaults = {name: defaults_tree(model) for name, model in DIALECT.variants().items()}
    problems = []
    for variant, key, documented in params:
        root = DIALECT.variants()[variant]
        info, _owner = field_at(root, split_dotted(key))
        if info is None:
            problems.append(f"{variant}: {key} is missing from the schema")
            continue
        actual = _get(defaults[variant], key)
        if key == "models.policy_trainer.train_micro_batch_size":
            assert actual == "${runtime_args.train_micro_batch_size}"
        elif actual != documented:
            problems.append(f"{variant}: {key} defaults to {actual!r}, the seed documents {documented!r}")
    assert not problems, "\n".join(problems)


def _get(tree: dict, key: str):
    node = tree
    for part in key.split("."):
        node = node[part]
    return node


def test_train_micro_batch_size_is_required_and_reported_once():
    text = "runtime_args:\n  train_backend: fsdp\nmodels:\n  policy_trainer:\n    num_gpu: 1\n"
    result = check_text(text, "cl.yaml", env=HOST_ENV)
    errors = [d for d in result.diagnostics if d.severity.value == "error"]
    assert [(d.code, d.path) for d in errors] == [("RLC203", "runtime_args.train_micro_batch_size")]
    assert "no default" in errors[0].message


@pytest.mark.parametrize("variant", ["fsdp", "megatron"])
def test_seed_yaml_assembled_validates(variant):
    merged: dict = {}
    for block_variant, data in documented_blocks():
        if block_variant in (variant, "both"):
            _deep_merge(merged, _qualify(data))
    merged["runtime_args"]["train_backend"] = variant
    merged["runtime_args"]["train_micro_batch_size"] = 8
    import json

    result = check_text(json.dumps(merged), "seed.yaml", env=HOST_ENV)
    errors = [(d.code, d.path, d.message) for d in result.diagnostics if d.severity.value == "error"]
    assert errors == []


def _deep_merge(target: dict, source: dict) -> None:
    for key, value in source.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _deep_merge(target[key], value)
        else:
            target[key] = value


@pytest.mark.parametrize("template", [FSDP_TEMPLATE, MEGATRON_TEMPLATE])
def test_templates_have_no_errors(template):
    result = check_file(template, env=HOST_ENV)
    assert result.errors == 0, [d.message for d in result.diagnostics]
    # the only warnings are that the cluster's data files are not on this machine
    assert {d.code for d in result.diagnostics} <= {"RLC308"}


def findings(template: str, *overrides: str, strict: bool = False) -> list[tuple[str, str, str]]:
    result = check_file(template, list(overrides), env=HOST_ENV, strict=strict)
    return [(d.code, d.path, d.message) for d in result.diagnostics if d.code != "RLC308"]


def assert_finds(found, code, path, *words):
    matches = [f for f in found if f[0] == code and f[1] == path]
    assert matches, f"expected {code} at {path}, got {found}"
    for word in words:
        assert any(word in m[2] for m in matches), f"{word!r} not in {matches}"


def test_sample_per_episode_must_divide_into_global_batches():
    found = findings(FSDP_TEMPLATE, "runtime_args.sample_per_episode=2016")
    assert_finds(found, "RLC300", "runtime_args.sample_per_episode", "2016", "512")


def test_sample_per_episode_must_be_whole_prompt_groups():
    found = findings(FSDP_TEMPLATE, "runtime_args.sample_per_episode=1040", "runtime_args.train_global_batch_size=520",
                     "runtime_args.train_micro_batch_size=5")
    assert_finds(found, "RLC300", "runtime_args.sample_per_episode", "1040", "num_inference_per_prompt (32)")


def test_sample_per_episode_must_divide_over_trainer_dp():
    found = findings(FSDP_TEMPLATE, "models.policy_trainer.num_gpu=6", "models.policy.num_gpu=6")
    assert_finds(found, "RLC300", "runtime_args.sample_per_episode", "6 data-parallel ranks")


def test_global_batch_must_divide_over_dp():
    found = findings(FSDP_TEMPLATE, "runtime_args.train_global_batch_size=100", "runtime_args.sample_per_episode=3200")
    assert_finds(found, "RLC300", "runtime_args.train_global_batch_size", "100", "8 data-parallel")


def test_generation_batch_must_divide_rank_share():
    found = findings(FSDP_TEMPLATE, "models.policy_trainer.generation_batch_size=48")
    assert_finds(found, "RLC300", "models.policy_trainer.generation_batch_size", "48", "256 samples")
    assert not any(f[1].endswith("generation_batch_size") for f in
                   findings(FSDP_TEMPLATE, "models.policy_trainer.generation_batch_size=48",
                            "models.policy_trainer.packing=true", "models.ref_policy.packing=true")
                   if f[0] == "RLC300")


def test_micro_batch_must_divide_rank_share():
    found = findings(FSDP_TEMPLATE, "runtime_args.train_micro_batch_size=48")
    assert_finds(found, "RLC300", "runtime_args.train_micro_batch_size", "48", "64 samples")


def test_trainer_micro_batch_linked_to_runtime():
    found = findings(FSDP_TEMPLATE, "models.policy_trainer.train_micro_batch_size=4")
    assert_finds(found, "RLC305", "models.policy_trainer.train_micro_batch_size", "(4)", "(8)")


def test_group_sizes_linked():
    found = findings(FSDP_TEMPLATE, "models.policy.num_inference_per_prompt=16")
    assert_finds(found, "RLC305", "models.policy.num_inference_per_prompt", "32", "16")


def test_rollout_gpus_divide_by_tp():
    found = findings(FSDP_TEMPLATE, "models.policy.tensor_model_parallel_size=3")
    assert_finds(found, "RLC400", "models.policy.tensor_model_parallel_size", "(8)", "(3)")


def test_episode_divides_over_rollout_engines():
    found = findings(FSDP_TEMPLATE, "models.policy.tensor_model_parallel_size=1", "models.policy.num_gpu=3")
    assert_finds(found, "RLC300", "runtime_args.sample_per_episode", "3 rollout engines")


def test_trainable_flags():
    found = findings(FSDP_TEMPLATE, "models.policy.trainable=true", "models.policy_trainer.trainable=false")
    assert_finds(found, "RLC306", "models.policy.trainable", "requires false")
    assert_finds(found, "RLC306", "models.policy_trainer.trainable", "requires true")


def test_rollout_has_no_pipeline_or_expert_parallelism():
    found = findings(FSDP_TEMPLATE, "models.policy.pipeline_model_parallel_size=2")
    assert_finds(found, "RLC306", "models.policy.pipeline_model_parallel_size", "is 2")


def test_max_seq_len_to_capture_covers_seq_length():
    found = findings(FSDP_TEMPLATE, "models.policy.max_seq_len_to_capture=2048")
    assert_finds(found, "RLC303", "models.policy.max_seq_len_to_capture", "2048", "4096")


def test_max_new_tokens_leaves_room_for_prompt():
    found = findings(FSDP_TEMPLATE, "models.policy.max_new_tokens=4096")
    assert_finds(found, "RLC303", "models.policy.max_new_tokens", "4096")


def test_derived_sequence_lengths_warn_when_set():
    found = findings(FSDP_TEMPLATE, "models.policy.max_prompt_tokens_length=1024",
                     "models.policy.max_response_tokens_length=2048")
    assert_finds(found, "RLC304", "models.policy.seq_length", "3072")
    assert_finds(found, "RLC304", "models.policy.max_seq_len_to_capture", "3072")


def test_fsdp_size_is_forced_to_num_gpu():
    found = findings(FSDP_TEMPLATE, "models.policy_trainer.fsdp_size=4")
    assert_finds(found, "RLC304", "models.policy_trainer.fsdp_size", "(4)", "(8)")
    assert not [f for f in findings(FSDP_TEMPLATE) if f[0] == "RLC304"]


def test_ulysses_divides_gpus():
    found = findings(FSDP_TEMPLATE, "models.policy_trainer.ulysses_sequence_parallel_size=3")
    assert_finds(found, "RLC400", "models.policy_trainer.ulysses_sequence_parallel_size", "(8)", "(3)")


def test_megatron_parallel_sizes_divide_gpus():
    found = findings(MEGATRON_TEMPLATE, "models.policy_trainer.tensor_model_parallel_size=3")
    assert_finds(found, "RLC400", "models.policy_trainer.tensor_model_parallel_size", "16", "TP 3")
    # the reference model follows the trainer by interpolation, so it is caught too
    assert_finds(found, "RLC400", "models.ref_policy.tensor_model_parallel_size", "16")


def test_megatron_expert_parallel_divides_gpus():
    found = findings(MEGATRON_TEMPLATE, "models.policy_trainer.expert_model_parallel_size=3")
    assert_finds(found, "RLC400", "models.policy_trainer.expert_model_parallel_size", "EP 3")


def test_pipeline_options_need_pipeline_parallelism():
    found = findings(MEGATRON_TEMPLATE, "models.policy_trainer.pipeline_model_parallel_size=1",
                     "models.policy_trainer.virtual_pipeline_model_parallel_size=2")
    assert_finds(found, "RLC302", "models.policy_trainer.virtual_pipeline_model_parallel_size", "(2)")


def test_sequence_parallel_without_tp_warns():
    found = findings(MEGATRON_TEMPLATE, "models.policy_trainer.tensor_model_parallel_size=1")
    assert_finds(found, "RLC307", "models.policy_trainer.sequence_parallel", "no effect")


def test_recompute_granularity_sel_warns():
    found = findings(MEGATRON_TEMPLATE, "models.policy_trainer.recompute_granularity=sel")
    assert_finds(found, "RLC306", "models.policy_trainer.recompute_granularity", "selective")


def test_packing_makes_batch_sizes_ignored():
    found = findings(FSDP_TEMPLATE, "models.policy_trainer.packing=true")
    assert_finds(found, "RLC307", "models.policy_trainer.generation_batch_size", "ignored")


def test_gpu_per_process_fits():
    found = findings(FSDP_TEMPLATE, "models.policy_trainer.gpu_per_process=3")
    assert_finds(found, "RLC400", "models.policy_trainer.gpu_per_process", "(3)", "(8)")


def test_colocation_names_known_models_once():
    found = findings(FSDP_TEMPLATE, "runtime_args.colocation=[[policy, policy_trainr], [policy]]")
    assert_finds(found, "RLC202", "runtime_args.colocation", "policy_trainr")
    assert_finds(found, "RLC401", "runtime_args.colocation", "two groups")


def test_colocated_models_should_offload():
    found = findings(FSDP_TEMPLATE, "models.policy_trainer.free_gpu_memory.offload_optimizer_states=false")
    assert_finds(found, "RLC306", "models.policy_trainer.free_gpu_memory.offload_optimizer_states", "colocated")


def test_data_paths_are_machine_dependent():
    result = check_file(FSDP_TEMPLATE, env=HOST_ENV)
    machine = [d for d in result.diagnostics if d.code == "RLC308"]
    assert machine and all(d.severity.value == "warning" for d in machine)
    strict = check_file(FSDP_TEMPLATE, env=HOST_ENV, strict=True)
    assert all(d.severity.value == "error" for d in strict.diagnostics if d.code == "RLC308")


def test_wandb_needs_api_key():
    result = check_file(FSDP_TEMPLATE, ["runtime_args.log_args_dict.enable_wandb=true"], env=HOST_ENV)
    assert any(d.code == "RLC308" and d.path.endswith("enable_wandb") for d in result.diagnostics)
    with_key = check_file(FSDP_TEMPLATE, ["runtime_args.log_args_dict.enable_wandb=true"],
                          env={**HOST_ENV, "WANDB_API_KEY": "x"})
    assert not any(d.path.endswith("enable_wandb") for d in with_key.diagnostics)


def test_key_of_the_other_backend_is_explained():
    result = check_file(MEGATRON_TEMPLATE, ["models.policy_trainer.fsdp_size=4"], env=HOST_ENV)
    unknown = [d for d in result.diagnostics if d.code == "RLC102"]
    assert unknown and "fsdp variant" in unknown[0].message
    assert "runtime_args.train_backend: fsdp" in unknown[0].hint


def test_override_can_switch_the_backend():
    result = check_file(FSDP_TEMPLATE, ["runtime_args.train_backend=megatron"], env=HOST_ENV)
    assert result.variant == "megatron"
    assert any(d.code == "RLC102" and d.path == "models.policy_trainer.gradient_checkpointing" for d in result.diagnostics)


def test_hydra_prefixes_are_rejected_for_chatlearn():
    result = check_file(FSDP_TEMPLATE, ["+runtime_args.debug=true"], env=HOST_ENV)
    assert [d.code for d in result.diagnostics if d.severity.value == "error"] == ["RLC104"]


def test_interpolated_defaults_remember_their_origin():
    result = check_file(FSDP_TEMPLATE, env=HOST_ENV)
    origin = result.tree.origin(("models", "ref_policy", "load"))
    assert origin.kind == "default" and origin.default_of == "${models.policy_trainer.load}"
    assert origin.via and origin.via[0].kind == "file" and origin.via[0].line is not None
