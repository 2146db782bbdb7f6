"""The ChatLearn dialect against its spec (ChatLearn's config dataclasses at 1.2.0 and main, inventoried in
tests/inventory/chatlearn/; the seed 000 for the documented keys) and its rules."""

from __future__ import annotations

import json
import re
from pathlib import Path

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
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "chatlearn"
V120_FSDP = str(FIXTURES / "v1.2.0-fsdp.yaml")  # the FSDP template as a ChatLearn 1.2.0 user writes it
INVENTORY = Path(__file__).resolve().parents[2] / "inventory" / "chatlearn"
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


def test_every_documented_parameter_exists():
    """The seed documents ChatLearn's templates (their values, not the dataclass defaults, which are checked against
    the inventory below); every key it shows exists in the schema."""
    params = documented_parameters()
    assert len(params) > 100, "the seed's YAML blocks were not found"
    problems = []
    for variant, key, _documented in params:
        info, _owner = field_at(DIALECT.variants()[variant], split_dotted(key))
        if info is None:
            problems.append(f"{variant}: {key} is missing from the schema")
    assert not problems, "\n".join(problems)


# Defaults rlcfg deliberately states differently from one release's dataclass, each with the reason.
DEFAULT_EXCEPTIONS = {
    # null stands for ChatLearn 1.2.0's 2048, so that the lowering can tell a 1.2.0 document from a main one
    ("1.2.0", "models.policy.max_new_tokens"): None,
    # ChatLearn main turned these Megatron fusions on; 1.2.0 had them off. The schema states main's default.
    ("1.2.0", "models.policy_trainer.megatron_model_cfg.bias_swiglu_fusion"): True,
    ("1.2.0", "models.policy_trainer.megatron_model_cfg.bias_dropout_fusion"): True,
    ("1.2.0", "models.ref_policy.megatron_model_cfg.bias_swiglu_fusion"): True,
    ("1.2.0", "models.ref_policy.megatron_model_cfg.bias_dropout_fusion"): True,
}


@pytest.mark.parametrize("release", ["1.2.0", "main"])
def test_defaults_are_chatlearns(release):
    """Every inventoried field has ChatLearn's dataclass default at that release (OmegaConf's MISSING: required, or
    null where ChatLearn fills the value in itself)."""
    inventory = json.loads((INVENTORY / f"{release}.json").read_text())
    problems = []
    for variant, keys in inventory["pipelines"].items():
        defaults = defaults_tree(DIALECT.variants()[variant])
        for key, fact in keys.items():
            actual = _get(defaults, key)
            expected = DEFAULT_EXCEPTIONS.get((release, key), fact["default"])
            if actual != expected and not (expected == "???" and actual in ("???", None)):
                problems.append(f"{release} {variant}: {key} defaults to {actual!r}, ChatLearn's is {expected!r}")
    assert not problems, "\n".join(problems)


def _get(tree: dict, key: str):
    node = tree
    for part in key.split("."):
        node = node[part]
    return node


def test_chatlearns_missing_values_are_required():
    """ChatLearn leaves these at OmegaConf's MISSING; its loader stops with MissingMandatoryValue without them."""
    text = "runtime_args:\n  train_backend: fsdp\nmodels:\n  policy_trainer:\n    num_gpu: 1\n"
    result = check_text(text, "cl.yaml", env=HOST_ENV)
    errors = [d for d in result.diagnostics if d.severity.value == "error"]
    assert {d.path for d in errors if d.code == "RLC203"} == {
        f"runtime_args.{key}" for key in ("output_dir", "data_path", "num_episode", "sample_per_episode",
                                          "train_micro_batch_size", "train_global_batch_size",
                                          "save_episode_interval", "log_args_dict.log_dir")}
    assert all("no default" in d.message for d in errors if d.code == "RLC203")


@pytest.mark.parametrize("key", ["num_episode", "sample_per_episode", "train_global_batch_size", "data_path"])
def test_removing_a_required_value_from_the_template_is_an_error(key, tmp_path):
    text = Path(FSDP_TEMPLATE).read_text()
    path = tmp_path / "cl.yaml"
    path.write_text(re.sub(rf"(?m)^  {key}:.*\n", "", text))
    result = check_file(str(path), env=HOST_ENV)
    assert [(d.code, d.path) for d in result.diagnostics if d.severity.value == "error"] == \
        [("RLC203", f"runtime_args.{key}")]


def test_train_backend_is_required():
    result = check_file(FSDP_TEMPLATE, env=HOST_ENV)
    assert result.ok
    text = Path(FSDP_TEMPLATE).read_text().replace("  train_backend: fsdp\n", "")
    result = check_text(text, "cl.yaml", env=HOST_ENV)
    assert ("RLC203", "runtime_args.train_backend") in [(d.code, d.path) for d in result.diagnostics]


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
    assert_finds(found, "RLC305", "runtime_args.num_inference_per_prompt", "32", "16")
    # ChatLearn 1.2.0 has only the rollout's group size
    assert not [f for f in findings(V120_FSDP, "models.policy.num_inference_per_prompt=16") if f[0] == "RLC305"]


def test_rollout_gpus_divide_by_tp():
    found = findings(FSDP_TEMPLATE, "models.policy.tensor_model_parallel_size=3")
    assert_finds(found, "RLC400", "models.policy.tensor_model_parallel_size", "(8)", "(3)")


def test_episode_divides_over_rollout_engines():
    found = findings(FSDP_TEMPLATE, "models.policy.tensor_model_parallel_size=1", "models.policy.num_gpu=3")
    assert_finds(found, "RLC300", "runtime_args.sample_per_episode", "3 rollout engines")


def test_trainable_flags():
    found = findings(FSDP_TEMPLATE, "models.policy.trainable=true", "models.policy_trainer.trainable=false")
    assert_finds(found, "RLC306", "models.policy.trainable", "does not support training")
    assert_finds(found, "RLC306", "models.policy_trainer.trainable", "should be trained")


def test_rollout_has_no_pipeline_or_expert_parallelism():
    found = findings(FSDP_TEMPLATE, "models.policy.pipeline_model_parallel_size=2")
    assert_finds(found, "RLC306", "models.policy.pipeline_model_parallel_size", "is 2")


def test_max_seq_len_to_capture_covers_seq_length_in_1_2():
    found = findings(V120_FSDP, "models.policy.max_seq_len_to_capture=2048")
    assert_finds(found, "RLC303", "models.policy.max_seq_len_to_capture", "2048", "4096")


def test_max_new_tokens_leaves_room_for_prompt_in_1_2():
    found = findings(V120_FSDP, "models.policy.max_new_tokens=4096")
    assert_finds(found, "RLC303", "models.policy.max_new_tokens", "4096")


def test_derived_sequence_lengths_warn_when_set():
    found = findings(FSDP_TEMPLATE, "models.policy.seq_length=2048", "models.policy.max_seq_len_to_capture=2048")
    assert_finds(found, "RLC304", "models.policy.seq_length", "4096")
    assert_finds(found, "RLC304", "models.policy.max_seq_len_to_capture", "4096")
    # 1.2.0 reads them as written
    assert not [f for f in findings(V120_FSDP) if f[0] == "RLC304"]


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
    # the reference model follows the trainer by interpolation: the same cause, named on the trainer's error
    assert not [f for f in found if f[1] == "models.ref_policy.tensor_model_parallel_size"]
    result = check_file(MEGATRON_TEMPLATE, ["models.policy_trainer.tensor_model_parallel_size=3"], env=HOST_ENV)
    (error,) = [d for d in result.diagnostics if d.path == "models.policy_trainer.tensor_model_parallel_size"]
    assert "models.ref_policy.tensor_model_parallel_size" in [path for path, _origin in error.related]


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


def test_interpolations_into_the_trainer_see_only_written_keys():
    """ChatLearn types models.policy_trainer `Any`: OmegaConf holds only what the user wrote there, so an
    interpolation to an unwritten trainer key fails, as in ChatLearn main's own Megatron template."""
    result = check_file(MEGATRON_TEMPLATE, ["models.ref_policy.max_token_in_packing=${models.policy_trainer.seq_length}"],
                        env=HOST_ENV)
    assert [(d.code, d.path) for d in result.diagnostics if d.severity.value == "error"] == \
        [("RLC106", "models.ref_policy.max_token_in_packing")]


def test_defaults_remember_their_origin():
    result = check_file(FSDP_TEMPLATE, env=HOST_ENV)
    assert result.tree.origin(("models", "policy", "top_k")).kind == "default"
    origin = result.tree.origin(("models", "ref_policy", "load"))
    assert origin.kind == "file" and origin.line is not None


@pytest.mark.parametrize(("template", "release"), [(FSDP_TEMPLATE, "main"), (MEGATRON_TEMPLATE, "main"),
                                                   (V120_FSDP, "1.2.0")])
def test_release_is_inferred_from_the_keys(template, release):
    assert check_file(template, env=HOST_ENV).release == release


def test_keys_of_the_other_release_are_errors():
    old = check_file(FSDP_TEMPLATE, ["models.policy.max_new_tokens=1024"], env=HOST_ENV, release="main")
    assert [(d.code, d.path) for d in old.diagnostics if d.severity.value == "error"] == \
        [("RLC113", "models.policy.max_new_tokens")]
    new = check_file(V120_FSDP, ["runtime_args.use_partial_rollout=false"], env=HOST_ENV, release="1.2.0")
    assert [(d.code, d.path) for d in new.diagnostics if d.severity.value == "error"] == \
        [("RLC113", "runtime_args.use_partial_rollout")]


def test_rollout_manager_and_partial_rollout_sections():
    found = findings(FSDP_TEMPLATE, "models.rollout_manager.num_gpu=1",
                     "models.partial_rollout_manager.rollout_ratio=[0.5, 0.25]")
    assert_finds(found, "RLC306", "models.rollout_manager.num_gpu", "requires 0")
    assert_finds(found, "RLC305", "models.partial_rollout_manager.rollout_ratio", "1.0")


def test_checks_only_main_makes_at_load_get_1_2_s_own_verdict():
    # the run fails: an error that says where
    found = findings(V120_FSDP, "models.policy.tensor_model_parallel_size=3")
    assert_finds(found, "RLC400", "models.policy.tensor_model_parallel_size",
                 "ChatLearn 1.2.0 accepts this at load but fails when it places the rollout engines")
    # the run goes on: a warning that says what it does instead
    result = check_file(V120_FSDP, ["runtime_args.train_global_batch_size=3"], env=HOST_ENV)
    warned = [d for d in result.diagnostics if d.path == "runtime_args.train_global_batch_size"
              and "ChatLearn 1.2.0 runs it, but each step trains" in d.message]
    assert warned and all(d.severity.value == "warning" for d in warned)
    # no hedge is left but the one 1.2.0's code does not settle (a rollout pipeline size)
    hedged = findings(V120_FSDP, "models.policy.pipeline_model_parallel_size=2")
    assert_finds(hedged, "RLC306", "models.policy.pipeline_model_parallel_size", "the run may fail later")


def test_omegaconf_converts_values_in_typed_sections():
    result = check_file(FSDP_TEMPLATE, ["runtime_args.num_episode='10'", "models.policy.enforce_eager=yes",
                                        "runtime_args.exp_name=123"], env=HOST_ENV)
    assert result.ok, [d.message for d in result.diagnostics]
    assert result.config.runtime_args.num_episode == 10 and result.config.runtime_args.exp_name == "123"
    # the trainer is untyped in OmegaConf: ChatLearn passes a string on, and fails when it computes with it
    strict = check_file(FSDP_TEMPLATE, ["models.policy_trainer.num_gpu='8'"], env=HOST_ENV)
    assert ("RLC200", "models.policy_trainer.num_gpu") in [(d.code, d.path) for d in strict.diagnostics]


def test_agent_task_needs_async_sglang_and_the_rollout_manager():
    found = findings(FSDP_TEMPLATE, "runtime_args.task_type=agent")
    assert_finds(found, "RLC302", "runtime_args.task_type", "use_rollout_manager")
    assert_finds(found, "RLC306", "runtime_args.task_type", "asynchronous SGLang")
    ok = findings(FSDP_TEMPLATE, "runtime_args.task_type=agent", *MANAGER)
    assert not [f for f in ok if f[0] not in ("RLC118", "RLC307")], ok
    # ChatLearn loads and runs it; `rlcfg run` does not run agent tasks (the run ledger), and says so as a note.
    assert {f[1] for f in ok if f[0] == "RLC118"} == {"runtime_args.task_type"}


# The rollout manager as ChatLearn's scripts start it (scripts/*/train_*_rollout_manager.sh and the template).
MANAGER = ("runtime_args.use_rollout_manager=true", "runtime_args.rollout_backend=sglang",
           "models.policy.is_sync_mode=false", "runtime_args.data_rerank=false", "models.rollout_manager.num_cpu=1",
           "models.rollout_manager.cpu_per_process=1")


def test_the_rollout_manager_starts_only_unreranked_and_as_one_actor():
    assert not [f for f in findings(FSDP_TEMPLATE, *MANAGER) if f[0] != "RLC307"]
    rerank = findings(FSDP_TEMPLATE, *MANAGER, "runtime_args.data_rerank=true")
    assert_finds(rerank, "RLC306", "runtime_args.data_rerank", "fails at the first rollout")
    two = findings(FSDP_TEMPLATE, *MANAGER, "models.rollout_manager.num_cpu=2")
    assert_finds(two, "RLC306", "models.rollout_manager.num_cpu", "2 // 1 = 2 replicas")
    unset = findings(FSDP_TEMPLATE, *MANAGER[:4])  # ChatLearn's defaults: num_cpu 0, no cpu_per_process
    assert_finds(unset, "RLC306", "models.rollout_manager.num_cpu", "with no cpu_per_process")
    # Without the manager, neither is read.
    assert not [f for f in findings(FSDP_TEMPLATE, "models.rollout_manager.num_cpu=2") if f[0] == "RLC306"]


def test_the_rollout_manager_evaluates_with_the_training_sampling():
    found = findings(FSDP_TEMPLATE, *MANAGER, "models.policy.eval_temperature=0.6", "models.policy.temperature=1.0",
                     "models.policy.eval_top_p=1.0", "models.policy.top_p=1.0")
    assert_finds(found, "RLC307", "models.policy.eval_temperature", "no effect", "training temperature (1.0)")
    assert not [f for f in found if f[1] == "models.policy.eval_top_p"]  # the same as training's: nothing changes
    from dataclasses import replace

    from rlcfg.lower import lower

    def lowered(*overrides):
        result = check_file(FSDP_TEMPLATE, list(overrides), env=HOST_ENV)
        return lower("chatlearn", result.config, result.release)

    experiment = lowered(*MANAGER, "models.policy.eval_temperature=0.6")
    assert experiment.eval_sampling == replace(experiment.sampling, n=1)
    assert experiment.algorithm.balance_ranks_by_length
    plain = lowered("models.policy.eval_temperature=0.6")
    assert plain.eval_sampling.temperature == 0.6 and not plain.algorithm.balance_ranks_by_length


def test_unknown_choice_of_a_string_key():
    found = findings(FSDP_TEMPLATE, "runtime_args.rollout_backend=vlm")
    assert_finds(found, "RLC202", "runtime_args.rollout_backend", "vllm", "accepts this at load")


def test_models_need_gpus():
    text = Path(FSDP_TEMPLATE).read_text().replace("    num_gpu: ${models.policy_trainer.num_gpu}\n", "", 1)
    result = check_text(text, "cl.yaml", env=HOST_ENV)
    assert ("RLC306", "models.ref_policy.num_gpu") in [(d.code, d.path) for d in result.diagnostics]
    assert "ChatLearn's default" in next(d.message for d in result.diagnostics if d.path == "models.ref_policy.num_gpu")


# ---- the run ledger: what `rlcfg run` refuses ------------------------------------------------------------------


def refusals(template: str, *overrides: str) -> set[str]:
    return {path for code, path, _ in findings(template, *overrides) if code == "RLC118"}


def test_templates_run_as_written():
    assert not refusals(FSDP_TEMPLATE) and not refusals(MEGATRON_TEMPLATE)


def test_the_asynchronous_sglang_engine_and_the_rollout_manager_run():
    # is_sync_mode false only swaps SGLang's engine API: the loop is the same; the rollout manager's chat task runs
    # it too, dealing each episode by length.
    assert not refusals(FSDP_TEMPLATE, "runtime_args.rollout_backend=sglang", "models.policy.is_sync_mode=false")
    assert not refusals(FSDP_TEMPLATE, *MANAGER)


PARTIAL = ("runtime_args.use_partial_rollout=true", "models.partial_rollout_manager.mini_response_per_prompt=8")


def test_partial_rollout_runs_with_one_optimizer_step_per_episode():
    # The template's episode is 2048 samples in optimizer steps of 512: ChatLearn cuts however many finished
    # responses an episode trains into 4 even slices, which rlcfg does not run.
    assert refusals(FSDP_TEMPLATE, *PARTIAL) == {"runtime_args.train_global_batch_size"}
    assert not refusals(FSDP_TEMPLATE, *PARTIAL, "runtime_args.train_global_batch_size=2048")
    from rlcfg.ir import PartialRollout
    from rlcfg.lower import lower

    result = check_file(FSDP_TEMPLATE, [*PARTIAL, "runtime_args.train_global_batch_size=2048",
                                        "models.partial_rollout_manager.rollout_ratio=[0.25,0.75]"], env=HOST_ENV)
    experiment = lower("chatlearn", result.config, result.release)
    assert experiment.schedule.partial_rollout == PartialRollout((0.25, 0.75), 8, 32)
    longest = experiment.sampling.max_new_tokens  # models.policy.max_response_tokens_length
    assert experiment.schedule.partial_rollout.round_limits(longest) == (longest // 4, longest * 3 // 4)


def test_partial_rollout_needs_fewer_finished_than_a_group_and_no_rollout_manager():
    found = findings(FSDP_TEMPLATE, "runtime_args.use_partial_rollout=true",
                     "models.partial_rollout_manager.mini_response_per_prompt=32")
    assert_finds(found, "RLC306", "models.partial_rollout_manager.mini_response_per_prompt", "not below", "(32)")
    zero = findings(FSDP_TEMPLATE, "runtime_args.use_partial_rollout=true",
                    "models.partial_rollout_manager.rollout_ratio=[0.0001,0.9999]")
    assert_finds(zero, "RLC306", "models.partial_rollout_manager.rollout_ratio", "a round of 0 tokens", "vLLM")
    sglang = findings(FSDP_TEMPLATE, "runtime_args.use_partial_rollout=true", "runtime_args.rollout_backend=sglang",
                      "models.partial_rollout_manager.rollout_ratio=[0.0001,0.9999]")
    assert not [f for f in sglang if f[1] == "models.partial_rollout_manager.rollout_ratio"]
    # The rollout manager's engine starts no partial rollout manager: the flag does nothing, and nothing is checked.
    ignored = findings(FSDP_TEMPLATE, *MANAGER, "runtime_args.use_partial_rollout=true",
                       "models.partial_rollout_manager.mini_response_per_prompt=32")
    assert_finds(ignored, "RLC307", "runtime_args.use_partial_rollout", "no effect with use_rollout_manager")
    assert not [f for f in ignored if f[0] in ("RLC306", "RLC118")]
    result = check_file(FSDP_TEMPLATE, [*MANAGER, "runtime_args.use_partial_rollout=true"], env=HOST_ENV)
    from rlcfg.lower import lower

    assert lower("chatlearn", result.config, result.release).schedule.partial_rollout is None


def test_advantage_groups_that_outlive_an_episode_are_refused():
    # AdvantageComputer keeps a prompt's rewards until runtime_args.num_inference_per_prompt have arrived
    # (the template links models.policy.num_inference_per_prompt to the runtime's, so the rollout's is overridden)
    key = "runtime_args.num_inference_per_prompt"
    assert key in refusals(FSDP_TEMPLATE, "models.policy.num_inference_per_prompt=16")  # the runtime's stays 32
    assert key not in refusals(FSDP_TEMPLATE, "models.policy.num_inference_per_prompt=32", f"{key}=16")  # closes
    assert key not in refusals(FSDP_TEMPLATE, f"{key}=64")  # both 64


def test_parallel_sizes_the_runtime_does_not_run_are_refused_where_the_backend_reads_them():
    key = "models.policy_trainer.context_parallel_size"
    assert key not in refusals(MEGATRON_TEMPLATE, f"{key}=2")  # context parallelism runs
    # Expert parallelism runs; a router setting that computes otherwise than the model's own routing does not.
    assert "models.policy_trainer.expert_model_parallel_size" not in refusals(
        MEGATRON_TEMPLATE, "models.policy_trainer.expert_model_parallel_size=2")
    bias = "models.policy_trainer.megatron_model_cfg.moe_router_enable_expert_bias"
    assert bias in refusals(MEGATRON_TEMPLATE, f"{bias}=true")
    # Ulysses runs on FSDP, the policy's and the reference's.
    ulysses = "models.policy_trainer.ulysses_sequence_parallel_size"
    assert ulysses not in refusals(FSDP_TEMPLATE, f"{ulysses}=2")
    ref = "models.ref_policy.ulysses_sequence_parallel_size"
    assert ref not in refusals(FSDP_TEMPLATE, f"{ref}=2", "models.policy_trainer.kl_coef=0.001")


def test_megatron_min_lr_below_lr_runs_and_above_lr_is_an_error():
    # rlcfg runs ChatLearn's one-step decay (lr, then min_lr); Megatron's scheduler refuses a floor above the peak
    key = "models.policy_trainer.optimizer.min_lr"
    assert key not in refusals(MEGATRON_TEMPLATE, f"{key}=0")
    assert_finds(findings(MEGATRON_TEMPLATE, "models.policy_trainer.optimizer.lr=1e-6", f"{key}=1e-5"), "RLC305", key,
                 "above", "Megatron")
    assert not [f for f in findings(FSDP_TEMPLATE, "models.policy_trainer.optimizer.lr=1e-6", f"{key}=1e-5")
                if f[0] == "RLC305"]  # ChatLearn's FSDP trainer has no schedule


@pytest.mark.parametrize("override", [
    "models.policy_trainer.finetune=false", "models.policy_trainer.no_load_optim=false",
    "models.policy_trainer.no_load_scheduler=false", "models.policy_trainer.model_provider_module=qwen2_5_vl",
    "models.policy_trainer.moe_router_force_load_balancing=true",
    "models.policy_trainer.megatron_model_cfg.hidden_dropout=0.1",
    "models.policy_trainer.megatron_model_cfg.freeze_LM=true",
])
def test_megatron_settings_rlcfg_does_not_run_are_refused(override):
    assert override.split("=")[0] in refusals(MEGATRON_TEMPLATE, override)


@pytest.mark.parametrize("override", [
    "runtime_args.model_type=vlm",
    "runtime_args.data_ratio=[1,2]", "models.policy.sync_frequency=2",
])
def test_rollout_and_data_settings_rlcfg_does_not_run_are_refused(override):
    assert override.split("=")[0] in refusals(FSDP_TEMPLATE, override)


def test_prompts_are_rendered_with_chatlearns_enable_thinking():
    """PromptPipeline hands the chat template enable_thinking, False unless the policy turns it on: Qwen3's template
    then closes an empty thinking block before the response."""
    from rlcfg.lower import lower

    for value in (False, True):
        result = check_file(str(FSDP_TEMPLATE), [f"models.policy.enable_thinking={str(value).lower()}"])
        assert "models.policy.enable_thinking" not in refusals(FSDP_TEMPLATE, f"models.policy.enable_thinking={value}")
        assert lower("chatlearn", result.config, result.release).data.chat_template_kwargs == (
            ("enable_thinking", value),)


def test_every_chatlearn_key_declares_its_fate():
    from rlcfg.schema.ledger import fates

    counts: dict[str, int] = {}
    for root in DIALECT.variants().values():
        for _path, fate in fates(root):
            assert fate is not None
            counts[fate.kind] = counts.get(fate.kind, 0) + 1
    assert counts.keys() == {"honored", "refused", "inert"}


def test_chatlearns_own_megatron_defaults_are_not_refused():
    # ChatLearn's template/grpo_megatron.yaml writes these at their defaults; the trainer section holds only what is
    # written (its defaults arrive later), and the ledger compares with the key's own default.
    assert not refusals(MEGATRON_TEMPLATE, "models.policy_trainer.moe_router_force_load_balancing=false",
                        "models.policy_trainer.model_provider_module=pretrain_gpt",
                        "models.policy_trainer.pipeline_model_parallel_layout=null")


def test_without_replay_chatlearn_computes_no_advantages():
    # StreamDataset.set_dataset runs AdvantageComputer only for episodes in the replay window
    assert_finds(findings(FSDP_TEMPLATE, "runtime_args.max_replay_episode=0"), "RLC306",
                 "runtime_args.max_replay_episode", "never runs its GRPO advantage")
    assert_finds(findings(FSDP_TEMPLATE, "runtime_args.replay_episode_offset=3"), "RLC306",
                 "runtime_args.replay_episode_offset", "before it")
    assert not [f for f in findings(FSDP_TEMPLATE, "runtime_args.max_replay_episode=-1") if f[0] == "RLC306"]


def test_no_episode_is_run_by_chatlearn_and_refused_by_rlcfg_run():
    """ChatLearn's loader takes num_episode 0 and its engine trains nothing (the differential suite's boundary)."""
    result = check_file(FSDP_TEMPLATE, ["runtime_args.num_episode=0"])
    assert result.ok
    found = {(d.code, d.severity.value) for d in result.diagnostics if d.path == "runtime_args.num_episode"}
    assert found == {("RLC201", "warning"), ("RLC118", "note")}


def test_async_sglang_checks_say_when_chatlearn_fails():
    result = check_file(FSDP_TEMPLATE, ["runtime_args.use_rollout_manager=true"])
    (error,) = [d for d in result.diagnostics if d.path == "runtime_args.use_rollout_manager" and d.code == "RLC306"]
    assert "ChatLearn accepts this at load but fails when run() starts" in error.message
