"""The `skyrl` package's releases (skyrl 0.1.0 to 0.4.0): command lines of its entrypoints, judged in its own layout
and grammar, with diagnostics that name the keys as the user wrote them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from rlcfg.frontend import check_file
from rlcfg.lower import lower

MAIN_BASE = ["-m", "skyrl.train.entrypoints.main_base"]
HOST_ENV = {"WANDB_API_KEY": "test-key", "HOME": "/home/user"}
# A small colocated run, in the package's layout.
BASE = ["trainer.policy.model.path=Qwen/Qwen2.5-0.5B-Instruct", "trainer.placement.colocate_all=true",
        "trainer.placement.policy_num_gpus_per_node=4", "trainer.placement.ref_num_gpus_per_node=4",
        "generator.inference_engine.num_engines=4", "generator.inference_engine.tensor_parallel_size=1",
        "trainer.train_batch_size=64", "trainer.policy_mini_batch_size=16", "generator.n_samples_per_prompt=4",
        "trainer.micro_train_batch_size_per_gpu=4", "trainer.micro_forward_batch_size_per_gpu=4"]


def check(*overrides: str, release: str | None = None, cwd: Path | None = None, monkeypatch=None):
    if cwd is not None:
        monkeypatch.chdir(cwd)
    return check_file("python", [*MAIN_BASE, *BASE, *overrides], env=HOST_ENV, release=release)


def codes(result, severity: str | None = None) -> list[tuple[str, str]]:
    return [(d.code, d.path) for d in result.diagnostics if severity is None or d.severity.value == severity]


def released(rev: str, path: str) -> str:
    """A file of SkyRL's repository at `rev`, from the mirror the oracle suites use (skipped without one)."""
    import os
    import subprocess

    root = os.environ.get("MIRROR_ROOT")
    if not root:
        pytest.skip("MIRROR_ROOT is not set")
    return subprocess.run(["git", "-C", os.path.join(root, "NovaSky-AI+SkyRL", "repo"), "show", f"{rev}:{path}"],
                          capture_output=True, text=True, check=True).stdout


def test_a_package_command_line_is_judged_among_the_package_releases():
    result = check()
    assert result.ok, [d.message for d in result.diagnostics]
    assert result.release == "skyrl-0.4.0"
    assert result.release_label == "skyrl 0.4.0"
    keyed = check("trainer.algorithm.loss_reduction=token_mean_legacy", "trainer.use_sample_packing=true")
    assert keyed.release in ("skyrl-0.3.0", "skyrl-0.4.0")


def test_a_yaml_file_stays_skyrl_train(tmp_path: Path):
    config = tmp_path / "c.yaml"
    config.write_text("trainer:\n  epochs: 1\ngenerator:\n  n_samples_per_prompt: 4\n")
    result = check_file(str(config), [], env=HOST_ENV)
    assert result.release == "main"


def test_diagnostics_name_the_keys_in_the_package_layout():
    result = check("generator.inference_engine.num_engines=3")
    [error] = [d for d in result.diagnostics if d.code == "RLC402"]
    assert error.path == "generator.inference_engine.num_engines"
    assert "num_engines 3" in error.message or "generator.inference_engine.num_engines" in error.message
    assert "generator.num_inference_engines" not in error.message + (error.hint or "")
    assert error.origin.override_text == "generator.inference_engine.num_engines=3"


def test_the_old_layout_is_an_error_from_030_and_a_warning_before():
    new = check("generator.backend=vllm", release="skyrl-0.3.0")
    [error] = [d for d in new.diagnostics if d.code == "RLC113"]
    assert error.path == "generator.backend" and "generator.inference_engine.backend" in error.hint
    old_layout = [o.replace("generator.inference_engine.num_engines", "generator.num_inference_engines")
                  .replace("generator.inference_engine.tensor_parallel_size",
                           "generator.inference_engine_tensor_parallel_size") for o in BASE]
    old = check_file("python", [*MAIN_BASE, *old_layout, "generator.backend=vllm"], env=HOST_ENV,
                     release="skyrl-0.1.0")
    assert old.ok and ("RLC122", "generator.num_inference_engines") in codes(old, "warning")
    # diagnostics keep the spelling the user wrote
    wrong = check_file("python", [*MAIN_BASE, *old_layout, "generator.num_inference_engines=3"], env=HOST_ENV,
                       release="skyrl-0.1.0")
    assert ("RLC402", "generator.num_inference_engines") in codes(wrong, "error")
    # the old layout beside the new one: the loader would replace the new layout's values
    mixed = check("generator.backend=vllm", release="skyrl-0.2.0")  # BASE writes generator.inference_engine.*
    assert ("RLC123", "generator.backend") in codes(mixed, "error")


def test_plus_and_tilde_are_refused():
    result = check("+trainer.my_flag=1", "~trainer.epochs")
    assert [c for c, _ in codes(result, "error")].count("RLC104") == 2


def test_keys_rlcfg_does_not_model_are_typed_and_refused_by_run_unless_default():
    result = check("trainer.mtp.enabled=false", release="skyrl-0.4.0")
    assert result.ok and not [d for d in result.diagnostics if d.code == "RLC118"]
    changed = check("trainer.mtp.enabled=true", release="skyrl-0.4.0")
    assert changed.ok and ("RLC118", "trainer.mtp.enabled") in codes(changed)
    wrong = check("trainer.mtp.num_speculative_tokens=many", release="skyrl-0.4.0")
    assert ("RLC200", "trainer.mtp.num_speculative_tokens") in codes(wrong, "error")
    missing = check("generator.inference_engine.delta_weight_sync.cloud_download_workers=2", release="skyrl-0.4.0")
    assert ("RLC203", "generator.inference_engine.delta_weight_sync.sync_dir") in codes(missing, "error")


def test_unmodelled_keys_that_compute_nothing_run_at_any_value():
    """Where profiles and logged examples go, the data loader's processes, and whether Megatron LoRA reaches the
    engines merged or as an adapter: a run computes the same."""
    result = check("trainer.policy.torch_profiler_config.save_path=/tmp/traces", "trainer.log_example_interval=3",
                   "data.dataloader.num_workers=4", "trainer.strategy=megatron", "trainer.policy.model.lora.rank=8",
                   "trainer.policy.megatron_config.lora_config.merge_lora=false", release="skyrl-0.4.0")
    assert result.ok and not [d for d in result.diagnostics if d.code == "RLC118"], codes(result)
    wrong = check("trainer.log_example_interval=often", release="skyrl-0.4.0")
    assert ("RLC200", "trainer.log_example_interval") in codes(wrong, "error")
    # a key of a later release
    early = check("trainer.mtp.enabled=true", release="skyrl-0.1.0")
    assert not early.ok


def test_megatron_kwargs_take_any_key_in_the_package():
    result = check("trainer.policy.megatron_config.transformer_config_kwargs.num_layers_in_last_pipeline_stage=2")
    assert result.ok, [d.message for d in result.diagnostics]


@pytest.mark.parametrize("release, ok", [("skyrl-0.1.0", False), ("skyrl-0.2.0", True), ("skyrl-0.4.0", True)])
def test_loss_reductions_of_each_release(release: str, ok: bool):
    result = check("trainer.algorithm.loss_reduction=token_mean_legacy", release=release)
    assert result.ok is ok
    if not ok:
        assert ("RLC202", "trainer.algorithm.loss_reduction") in codes(result, "error")


def test_the_reduction_runs_over_the_mini_batch_from_020():
    def normalization(release: str, *overrides: str) -> str:
        result = check(*overrides, release=release)
        return lower("skyrl", result.config, release=result.release).algorithm.loss_normalization

    assert normalization("skyrl-0.1.0") == "micro-batch"
    assert normalization("skyrl-0.2.0") == "mini-batch"
    assert normalization("skyrl-0.4.0", "trainer.algorithm.loss_reduction=token_mean_legacy") == "micro-batch"
    refused = check("trainer.algorithm.use_entropy_loss=true", release="skyrl-0.4.0")
    assert ("RLC118", "trainer.algorithm.use_entropy_loss") in codes(refused)


def test_remote_engines_need_external_servers_from_030():
    result = check("generator.inference_engine.run_engines_locally=false", "trainer.placement.colocate_all=false",
                   release="skyrl-0.3.0")
    [error] = [d for d in result.diagnostics if d.code == "RLC302"]
    assert error.path == "generator.inference_engine.run_engines_locally"
    assert "generator.inference_engine.external_server_urls" in error.message
    served = check("generator.inference_engine.run_engines_locally=false", "trainer.placement.colocate_all=false",
                   "generator.inference_engine.external_server_urls=[a:1]", release="skyrl-0.3.0")
    assert not [d for d in served.diagnostics if d.code == "RLC302"]


def test_keys_the_package_dropped_or_renamed():
    dropped = check("generator.inference_engine.async_engine=true", release="skyrl-0.3.0")
    assert dropped.ok and ("RLC307", "generator.inference_engine.async_engine") in codes(dropped, "warning")
    refused = check("generator.inference_engine.async_engine=false", release="skyrl-0.3.0")
    assert ("RLC113", "generator.inference_engine.async_engine") in codes(refused, "error")
    alias = check("trainer.use_sample_packing=false", release="skyrl-0.4.0")
    assert alias.ok and ("RLC111", "trainer.use_sample_packing") in codes(alias, "warning")
    both = check("trainer.use_sample_packing=false", "trainer.remove_microbatch_padding=true", release="skyrl-0.4.0")
    assert ("RLC301", "trainer.use_sample_packing") in codes(both, "error")


def test_local_sglang_engines_are_refused_by_the_package():
    result = check("generator.inference_engine.backend=sglang")
    [error] = [d for d in result.diagnostics if d.code == "RLC306"]
    assert error.path == "generator.inference_engine.backend" and "Unsupported backend" in error.message


def test_an_example_entrypoint_adds_its_config_keys(tmp_path: Path, monkeypatch):
    module = tmp_path / "examples" / "train" / "dapo"
    module.mkdir(parents=True)
    (module / "main_dapo.py").write_text(
        "import ray\nfrom dataclasses import dataclass\nfrom skyrl.train.config import AlgorithmConfig, make_config\n"
        "@dataclass\nclass DAPOAlgorithmConfig(AlgorithmConfig):\n    overlong_buffer_len: int = 512\n"
        "DAPOConfig = make_config(algorithm_cls=DAPOAlgorithmConfig)\n")
    (module / "main_dapo_async.py").write_text(
        "from examples.train.dapo.main_dapo import DAPOConfig\ncfg = DAPOConfig.from_cli_overrides([])\n")
    monkeypatch.chdir(tmp_path)
    for entry in ("examples.train.dapo.main_dapo", "examples.train.dapo.main_dapo_async"):
        result = check_file("python", ["-m", entry, *BASE, "trainer.algorithm.overlong_buffer_len=64"], env=HOST_ENV)
        assert result.ok, [d.message for d in result.diagnostics]
        [note] = [d for d in result.diagnostics if d.code == "RLC118" and d.path]
        assert f"{entry.replace('.', '/')}.py" in note.message
        # neither module is one SkyRL released: `rlcfg run` refuses the launch as a whole, at the call
        [launch] = [d for d in result.diagnostics if d.code == "RLC118" and not d.path]
        assert entry in launch.message and launch.origin.line == 1
        wrong = check_file("python", ["-m", entry, *BASE, "trainer.algorithm.overlong_buffer_len=long"], env=HOST_ENV)
        assert ("RLC200", "trainer.algorithm.overlong_buffer_len") in codes(wrong, "error")


def test_an_entrypoint_that_subclasses_the_config_adds_its_keys(tmp_path: Path, monkeypatch):
    """Harbor's entry modules run `HarborSkyRLConfig.from_cli_overrides(...)`, a subclass of SkyRLTrainConfig with a
    key of its own and a GeneratorConfig subclass in the generator's place (imported from a sibling module)."""
    module = tmp_path / "examples" / "train_integrations" / "harbor" / "entrypoints"
    module.mkdir(parents=True)
    (module / "main_harbor.py").write_text(
        "from dataclasses import dataclass, field\nfrom typing import Any, Dict\n"
        "from skyrl.train.config import GeneratorConfig, SkyRLTrainConfig\n"
        "@dataclass\nclass HarborGeneratorConfig(GeneratorConfig):\n    max_parallel: int = 4\n"
        "@dataclass\nclass HarborSkyRLConfig(SkyRLTrainConfig):\n"
        "    harbor_trial_config: Dict[str, Any] = field(default_factory=dict)\n"
        "    generator: HarborGeneratorConfig = field(default_factory=HarborGeneratorConfig)\n")
    (module / "main_harbor_generate.py").write_text(
        "import sys\nfrom .main_harbor import HarborSkyRLConfig\ncfg = HarborSkyRLConfig.from_cli_overrides(sys.argv[1:])\n")
    monkeypatch.chdir(tmp_path)
    entry = "examples.train_integrations.harbor.entrypoints.main_harbor_generate"
    result = check_file("python", ["-m", entry, *BASE, "harbor_trial_config.trials_dir=/t", "generator.max_parallel=8"],
                        env=HOST_ENV)
    assert result.ok, [d.message for d in result.diagnostics if d.severity.value == "error"]
    assert {d.path for d in result.diagnostics if d.code == "RLC118"} >= {"harbor_trial_config", "generator.max_parallel"}
    wrong = check_file("python", ["-m", entry, *BASE, "generator.max_parallel=many"], env=HOST_ENV)
    assert ("RLC200", "generator.max_parallel") in codes(wrong, "error")


def test_the_declared_keys_match_the_inventories():
    """rlcfg/dialects/skyrl/package_keys.json is what tools/inventory/skyrl_package.py --keys writes from the
    inventories and the schema: a schema change that models one of the keys regenerates it."""
    root = Path(__file__).resolve().parents[3]
    spec = importlib.util.spec_from_file_location("skyrl_package_tool", root / "tools/inventory/skyrl_package.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    shipped = json.loads((root / "rlcfg/dialects/skyrl/package_keys.json").read_text())
    assert shipped == tool.unmodelled(root / "tests/inventory/skyrl")


def test_the_mp_executor_keeps_an_engine_on_one_node():
    result = check("generator.inference_engine.distributed_executor_backend=mp",
                   "generator.inference_engine.tensor_parallel_size=8", "generator.inference_engine.num_engines=1",
                   "trainer.placement.policy_num_gpus_per_node=8", "trainer.placement.ref_num_gpus_per_node=8")
    assert result.ok
    split = check("generator.inference_engine.distributed_executor_backend=mp",
                  "generator.inference_engine.tensor_parallel_size=8", "generator.inference_engine.num_engines=1",
                  "trainer.placement.policy_num_nodes=2", "trainer.placement.ref_num_nodes=2")
    [error] = [d for d in split.diagnostics if d.code == "RLC403"]
    assert error.path == "generator.inference_engine.distributed_executor_backend"
    assert "generator.inference_engine.tensor_parallel_size" in error.message


def test_writing_part_of_a_section_resets_the_rest_to_the_class_defaults():
    """The package builds a section the command line writes from what it writes: the critic's learning rate (5e-6
    when untouched) becomes OptimizerConfig's 1e-6 once weight_decay is set, as its loader does."""
    untouched = check()
    assert untouched.config.trainer.critic.optimizer_config.lr == 5e-6
    result = check("trainer.critic.optimizer_config.weight_decay=0.1")
    assert result.config.trainer.critic.optimizer_config.lr == 1e-6
    [warning] = [d for d in result.diagnostics if d.code == "RLC304"]
    assert warning.path == "trainer.critic.optimizer_config.lr" and "5e-06" in warning.message
    assert warning.origin.override_text == "trainer.critic.optimizer_config.weight_decay=0.1"
    kept = check("trainer.critic.optimizer_config.weight_decay=0.1", "trainer.critic.optimizer_config.lr=5e-6")
    assert not [d for d in kept.diagnostics if d.code == "RLC304"]


def test_the_package_layout_judged_by_skyrl_train_says_which_release_reads_it():
    result = check(release="0.4.0")
    [error] = [d for d in result.diagnostics if d.code == "RLC113" and d.path.startswith("generator.inference_engine")]
    assert "`--framework-version skyrl-0.4.0`" in error.hint and "generator.num_inference_engines" in error.message


# ---- SkyRL's DAPO entrypoint: its soft overlong punishment runs ----------------------------------------------

DAPO_MODULE = ("import ray\nfrom dataclasses import dataclass\n"
               "from skyrl.train.config import AlgorithmConfig, make_config\n@dataclass\n"
               "class DAPOAlgorithmConfig(AlgorithmConfig):\n    overlong_buffer_len: int = 512\n"
               "    overlong_buffer_penalty_factor: float = 1.0\n"
               "DAPOConfig = make_config(algorithm_cls=DAPOAlgorithmConfig)\n")
DAPO_ENTRY = ["-m", "examples.train.algorithms.dapo.main_dapo"]


@pytest.fixture
def dapo_entry(tmp_path: Path, monkeypatch):
    """An entry module rlcfg takes for SkyRL's DAPO example: the released module's fingerprint is replaced by this
    stand-in's (test_the_released_dapo_entrypoints_are_recognised checks the real ones against the mirror)."""
    return stand_in(tmp_path, monkeypatch, "examples/train/algorithms/dapo/main_dapo.py", DAPO_MODULE,
                    "DAPO_ENTRY_FINGERPRINTS")


def stand_in(tmp_path: Path, monkeypatch, path: str, text: str, fingerprints: str) -> Path:
    """`text` written as the entry module at `path` under a source tree at tmp_path (the current directory), and
    taken for the released module: its fingerprint alone in the package's set `fingerprints`."""
    import ast

    from rlcfg.dialects.skyrl import package

    module = tmp_path / path
    module.parent.mkdir(parents=True)
    module.write_text(text)
    monkeypatch.setattr(package, fingerprints, frozenset({package.module_fingerprint(ast.parse(text))}))
    monkeypatch.chdir(tmp_path)
    return module


def dapo(*overrides: str):
    return check_file("python", [*DAPO_ENTRY, *BASE, "generator.sampling_params.max_generate_length=1024",
                                 *overrides], env=HOST_ENV)


def test_the_dapo_entrypoints_overlong_buffer_is_the_runs_overlong_penalty(dapo_entry):
    result = dapo("trainer.algorithm.overlong_buffer_len=256", "trainer.algorithm.overlong_buffer_penalty_factor=0.5")
    assert result.ok and not [d for d in result.diagnostics if d.code == "RLC118"], \
        [d.message for d in result.diagnostics]
    shaping = lower("skyrl", result.config, result.release).algorithm.reward
    assert (shaping.overlong_penalty_length, shaping.overlong_penalty_factor) == (1024 - 256, 0.5)
    # Left out, the entrypoint's own defaults hold: a buffer of 512 tokens and a factor of 1.
    defaults = lower("skyrl", dapo().config).algorithm.reward
    assert (defaults.overlong_penalty_length, defaults.overlong_penalty_factor) == (512, 1.0)
    # A buffer of 0 or less punishes nothing (DAPOTrainer's window is then empty).
    assert lower("skyrl", dapo("trainer.algorithm.overlong_buffer_len=0").config).algorithm.reward \
        .overlong_penalty_length is None


def test_the_penalty_is_dapo_trainers_formula():
    """DAPOTrainer.postprocess_generator_output by hand: a response of length n in the last `buffer` tokens before
    the limit L loses (n − (L − buffer)) / buffer × factor of its reward."""
    torch = pytest.importorskip("torch")
    from rlcfg.runtime.algorithms import overlong_penalty

    limit, buffer, factor = 1024, 256, 0.5
    lengths = torch.tensor([10, 768, 769, 896, 1024])
    expected = [0.0, 0.0, -(1 / 256) * 0.5, -(128 / 256) * 0.5, -0.5]
    assert overlong_penalty(lengths, limit, limit - buffer, factor).tolist() == pytest.approx(expected)


def test_the_dapo_keys_outside_its_entrypoint_and_with_settings_it_reorders(dapo_entry):
    plain = check("trainer.algorithm.overlong_buffer_len=256")
    [error] = [d for d in plain.diagnostics if d.path == "trainer.algorithm.overlong_buffer_len"]
    assert error.code == "RLC113" and "DAPO example entrypoint" in error.message
    zeroed = dapo("generator.zero_reward_on_non_stop=true")
    [note] = [d for d in zeroed.diagnostics if d.code == "RLC118"]
    assert note.path == "trainer.algorithm.overlong_buffer_len" and "zero_reward_on_non_stop" in note.message
    filtered = dapo("trainer.algorithm.zero_variance_filter=true")
    assert [d.path for d in filtered.diagnostics if d.code == "RLC118"] == ["trainer.algorithm.overlong_buffer_len"]


def test_an_edited_dapo_entrypoint_is_still_refused(dapo_entry):
    dapo_entry.write_text(DAPO_MODULE + "\nEXTRA = 1\n")
    result = dapo("trainer.algorithm.overlong_buffer_len=256")
    # the key it adds, and the launch as a whole; the key left unwritten is the module's own
    assert result.ok, codes(result)
    assert sorted(d.path for d in result.diagnostics if d.code == "RLC118") == \
        ["", "trainer.algorithm.overlong_buffer_len"]


@pytest.mark.parametrize("tag", ["skyrl-v0.1.0", "skyrl-v0.2.0", "skyrl-v0.3.0", "HEAD"])
def test_the_released_dapo_entrypoints_are_recognised(tag):
    import ast

    from rlcfg.dialects.skyrl.package import DAPO_ENTRY_FINGERPRINTS, module_fingerprint

    text = released(tag, "examples/train/algorithms/dapo/main_dapo.py")
    assert module_fingerprint(ast.parse(text)) in DAPO_ENTRY_FINGERPRINTS
    # Comments and docstrings aside: an edit to either keeps the fingerprint, an edit to the code does not.
    assert module_fingerprint(ast.parse(text.replace("# modify rewards here", "# changed"))) in DAPO_ENTRY_FINGERPRINTS
    assert module_fingerprint(ast.parse(text.replace("rewards[i] -= penalty", "rewards[i] -= 2 * penalty"))) \
        not in DAPO_ENTRY_FINGERPRINTS


def test_maxrl_runs_from_the_release_that_added_it():
    result = check("trainer.algorithm.advantage_estimator=maxrl", release="skyrl-0.2.0")
    assert result.ok and not [d for d in result.diagnostics if d.code == "RLC118"], codes(result)
    assert lower("skyrl", result.config, result.release).algorithm.advantage == "maxrl"
    # skyrl 0.1.0 has no maxrl: the name is a custom estimator's there, which `rlcfg run` refuses.
    before = check("trainer.algorithm.advantage_estimator=maxrl", release="skyrl-0.1.0")
    assert ("RLC118", "trainer.algorithm.advantage_estimator") in codes(before)


def test_rollout_is_and_the_sequence_mask_run_as_the_package_computes_them():
    mask = ["trainer.algorithm.off_policy_correction.sequence_mask_metric=geometric",
            "trainer.algorithm.off_policy_correction.geo_mask_low=0.98"]
    result = check("trainer.algorithm.policy_loss_type=rollout_is", *mask, release="skyrl-0.4.0")
    assert result.ok and not [d for d in result.diagnostics if d.code == "RLC118"], codes(result)
    algorithm = lower("skyrl", result.config, result.release).algorithm
    options = algorithm.policy_options
    assert algorithm.policy_loss == "rollout_is" and algorithm.needs_rollout_logprobs()
    assert (options.sequence_mask, options.sequence_mask_low, options.sequence_mask_high) == ("geometric", 0.98, 1.01)
    product = check("trainer.algorithm.off_policy_correction.sequence_mask_metric=product", release="skyrl-0.2.0")
    options = lower("skyrl", product.config, product.release).algorithm.policy_options
    assert (options.sequence_mask, options.sequence_mask_low, options.sequence_mask_high) == ("product", 0.5, 2.0)
    # skyrl 0.1.0 divides its token mean by the tokens the mask leaves, which rlcfg does not: refused at the key
    before = check(*mask, release="skyrl-0.1.0")
    assert ("RLC118", "trainer.algorithm.off_policy_correction.sequence_mask_metric") in codes(before)
    # rollout_is is not registered at 0.1.0: a custom loss's name there
    custom = check("trainer.algorithm.policy_loss_type=rollout_is", release="skyrl-0.1.0")
    assert ("RLC118", "trainer.algorithm.policy_loss_type") in codes(custom)


FULLY_ASYNC_MODULE = '''"""A stand-in for examples/train/fully_async/main_fully_async.py."""
from skyrl.train.fully_async_trainer import FullyAsyncRayPPOTrainer


def main():
    return FullyAsyncRayPPOTrainer
'''
FULLY_ASYNC_ENTRY = ["-m", "examples.train.fully_async.main_fully_async"]
# BASE's run, split as the fully-asynchronous trainer needs: engines of their own, one mini-batch per step
FULLY_ASYNC = ["trainer.placement.colocate_all=false", "trainer.train_batch_size=16", "generator.batched=false",
               "trainer.fully_async.enabled=true", "trainer.fully_async.max_staleness_steps=2",
               "trainer.fully_async.num_parallel_generation_workers=32",
               "trainer.algorithm.policy_loss_type=rollout_is"]


@pytest.fixture
def fully_async_entry(tmp_path: Path, monkeypatch):
    """An entry module rlcfg takes for the released fully-asynchronous one (its fingerprint stands in for theirs;
    test_the_released_fully_async_entrypoints_are_recognised checks the real ones against the mirror)."""
    return stand_in(tmp_path, monkeypatch, "examples/train/fully_async/main_fully_async.py", FULLY_ASYNC_MODULE,
                    "FULLY_ASYNC_ENTRY_FINGERPRINTS")


def fully_async(*overrides: str, release: str = "skyrl-0.4.0"):
    return check_file("python", [*FULLY_ASYNC_ENTRY, *BASE, *FULLY_ASYNC, *overrides], env=HOST_ENV, release=release)


def test_the_fully_async_entrypoint_runs_rollouts_ahead_within_its_bound(fully_async_entry):
    result = fully_async()
    assert result.ok and result.entry_runs == "fully_async", codes(result)
    assert not [d for d in result.diagnostics if d.code == "RLC118"], codes(result)
    schedule = lower("skyrl", result.config, result.release, result.entry_runs).schedule
    assert (schedule.max_staleness, schedule.rollout_concurrency) == (2, 32)
    assert schedule.steps_generating_at_once() == 2  # 32 prompts at once, 16 a step
    # without the entrypoint the keys are not the run's: synchronous, and `rlcfg run` says why it will not launch it
    plain = check_file("python", [*MAIN_BASE, *BASE, *FULLY_ASYNC], env=HOST_ENV, release="skyrl-0.4.0")
    assert plain.entry_runs is None and lower("skyrl", plain.config, plain.release).schedule.max_staleness == 0
    assert [d.path for d in plain.diagnostics if d.code == "RLC118"] == ["trainer.fully_async.enabled"]


@pytest.mark.parametrize("override, path", [
    ("trainer.fully_async.enabled=false", "trainer.fully_async.enabled"),
    ("trainer.train_batch_size=64", "trainer.train_batch_size"),
    ("trainer.fully_async.num_parallel_generation_workers=64", "trainer.fully_async.num_parallel_generation_workers"),
    ("trainer.placement.colocate_all=true", "trainer.placement.colocate_all"),
    ("generator.batched=true", "generator.batched"),
    ("trainer.algorithm.policy_loss_type=regular", "trainer.algorithm.policy_loss_type"),
])
def test_what_the_fully_async_trainer_stops_on_is_an_error_before_launch(fully_async_entry, override, path):
    result = fully_async(override)
    assert ("RLC306", path) in codes(result, "error"), codes(result)


def test_before_030_the_fully_async_trainer_has_no_enabled_key_and_takes_any_loss(fully_async_entry):
    overrides = [o for o in FULLY_ASYNC if not o.startswith("trainer.fully_async.enabled")
                 and not o.startswith("trainer.algorithm.policy_loss_type")]
    result = check_file("python", [*FULLY_ASYNC_ENTRY, *BASE, *overrides], env=HOST_ENV, release="skyrl-0.2.0")
    assert result.ok, codes(result)
    assert lower("skyrl", result.config, result.release, result.entry_runs).schedule.max_staleness == 2


@pytest.mark.parametrize("tag, module", [
    *[(tag, "examples/train/fully_async/main_fully_async.py")
      for tag in ("skyrl-v0.1.0", "skyrl-v0.2.0", "skyrl-v0.3.0", "HEAD")],
    *[(tag, "examples/train/algorithms/dapo/main_dapo_fully_async.py") for tag in ("skyrl-v0.2.0", "skyrl-v0.3.0", "HEAD")],
])
def test_the_released_fully_async_entrypoints_are_recognised(tag, module):
    import ast
    from rlcfg.dialects.skyrl.package import (DAPO_ENTRY_FINGERPRINTS, FULLY_ASYNC_ENTRY_FINGERPRINTS,
                                              module_fingerprint)

    text = released(tag, module)
    assert module_fingerprint(ast.parse(text)) in FULLY_ASYNC_ENTRY_FINGERPRINTS
    # the DAPO one is DAPO's entrypoint too: its overlong keys are modelled
    assert (module_fingerprint(ast.parse(text)) in DAPO_ENTRY_FINGERPRINTS) == ("dapo" in module)
    assert module_fingerprint(ast.parse(text.replace("(FullyAsyncRayPPOTrainer)", "(RayPPOTrainer)")
                                        .replace("return FullyAsyncRayPPOTrainer(", "return RayPPOTrainer("))) \
        not in FULLY_ASYNC_ENTRY_FINGERPRINTS


# ---- SkyRL's one-step off-policy entrypoint (examples/train/async) ------------------------------------------------

ONE_STEP_MODULE = '''"""A stand-in for examples/train/async/main_async.py."""
from .async_trainer import AsyncRayPPOTrainer


def main():
    return AsyncRayPPOTrainer
'''
ONE_STEP_TRAINER = '''"""A stand-in for examples/train/async/async_trainer.py."""
from skyrl.train.trainer import RayPPOTrainer


class AsyncRayPPOTrainer(RayPPOTrainer):
    pass
'''
ONE_STEP_ENTRY = ["-m", "examples.train.async.main_async"]


@pytest.fixture
def one_step_entry(tmp_path: Path, monkeypatch):
    """The entry module and its trainer's module, taken for the released ones (their fingerprints stand in;
    test_the_released_one_step_entrypoints_are_recognised checks the real ones against the mirror)."""
    import ast

    from rlcfg.dialects.skyrl import package

    trainer = tmp_path / "examples" / "train" / "async" / "async_trainer.py"
    stand_in(tmp_path, monkeypatch, "examples/train/async/main_async.py", ONE_STEP_MODULE,
             "ONE_STEP_ENTRY_FINGERPRINTS")
    trainer.write_text(ONE_STEP_TRAINER)
    monkeypatch.setattr(package, "ONE_STEP_TRAINER_FINGERPRINTS",
                        frozenset({package.module_fingerprint(ast.parse(ONE_STEP_TRAINER))}))
    return trainer


def one_step(*overrides: str, release: str = "skyrl-0.4.0"):
    return check_file("python", [*ONE_STEP_ENTRY, *BASE, "trainer.placement.colocate_all=false",
                                 "trainer.resume_mode=null", *overrides], env=HOST_ENV, release=release)


def test_the_one_step_entrypoint_trains_one_update_behind_within_each_epoch(one_step_entry):
    result = one_step()
    assert result.ok and result.entry_runs == "one_step_async", codes(result)
    assert not [d for d in result.diagnostics if d.code == "RLC118"], codes(result)
    schedule = lower("skyrl", result.config, result.release, result.entry_runs).schedule
    assert (schedule.max_staleness, schedule.ahead_across_epochs, schedule.steps_generating_at_once()) == (1, False, 1)


def test_what_the_one_step_trainer_skips_runs_as_it_skips_it(one_step_entry):
    """It never calls handle_dynamic_sampling and never builds the KL controller: validate says so, and the run
    trains every group with the fixed coefficient."""
    result = one_step("trainer.algorithm.dynamic_sampling.type=filter", "trainer.algorithm.use_kl_loss=false",
                      "trainer.algorithm.use_kl_in_reward=true", "trainer.algorithm.kl_ctrl.type=adaptive",
                      "trainer.algorithm.kl_ctrl.kl_target=0.1")
    assert result.ok, codes(result)
    assert {("RLC307", "trainer.algorithm.dynamic_sampling.type"), ("RLC307", "trainer.algorithm.kl_ctrl.type")} \
        <= set(codes(result, "warning"))
    algorithm = lower("skyrl", result.config, result.release, result.entry_runs).algorithm
    assert algorithm.filters.dynamic is None and not algorithm.dynamic_sampling
    assert algorithm.kl.placement == "reward" and algorithm.kl.controller.kind == "fixed"
    # under main_base the same settings are the run's
    plain = check_file("python", [*MAIN_BASE, *BASE, "trainer.algorithm.dynamic_sampling.type=filter"],
                       env=HOST_ENV, release="skyrl-0.4.0")
    assert lower("skyrl", plain.config, plain.release).algorithm.filters.dynamic == "filter"


def test_what_the_one_step_trainer_stops_on_or_resumes_differently(one_step_entry):
    colocated = one_step("trainer.placement.colocate_all=true")
    assert ("RLC306", "trainer.placement.colocate_all") in codes(colocated, "error")
    resumed = one_step("trainer.resume_mode=latest")
    assert ("RLC118", "trainer.resume_mode") in codes(resumed)


def test_an_edited_one_step_trainer_is_not_taken_for_the_released_one(one_step_entry):
    one_step_entry.write_text(ONE_STEP_TRAINER.replace("pass", "def train(self):\n        return None"))
    result = one_step()
    assert result.entry_runs is None
    [refusal] = [d for d in result.diagnostics if d.code == "RLC118"]
    assert refusal.path == "" and "examples.train.async.main_async" in refusal.message


def test_an_entry_module_not_on_this_machine_is_refused_and_skyrls_own_are_not(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    away = check_file("python", [*ONE_STEP_ENTRY, *BASE], env=HOST_ENV, release="skyrl-0.4.0")
    [refusal] = [d for d in away.diagnostics if d.code == "RLC118"]
    assert "cannot be read here (no such file, or not text)" in refusal.message
    # a file that is there but not text reads the same
    module = tmp_path / "examples" / "train" / "async" / "main_async.py"
    module.parent.mkdir(parents=True)
    module.write_bytes(b"\x00\xff\xfe binary")
    binary = check_file("python", [*ONE_STEP_ENTRY, *BASE], env=HOST_ENV, release="skyrl-0.4.0")
    [refusal] = [d for d in binary.diagnostics if d.code == "RLC118"]
    assert "cannot be read here" in refusal.message
    own = check_file("python", [*MAIN_BASE, *BASE], env=HOST_ENV, release="skyrl-0.4.0")
    assert not [d for d in own.diagnostics if d.code == "RLC118"]


@pytest.mark.parametrize("tag, folder", [
    *[(tag, "examples/train/async") for tag in ("skyrl-v0.1.0", "skyrl-v0.2.0", "skyrl-v0.3.0", "HEAD")],
    *[(tag, "skyrl-train/examples/async") for tag in ("skyrl_train-v0.1.0", "skyrl_train-v0.2.0", "skyrl_train-v0.4.0",
                                                       "0b2b28216538e307f85e78876f214966e3edd117")],
])
def test_the_released_one_step_entrypoints_are_recognised(tag, folder, tmp_path: Path):
    from rlcfg.dialects.skyrl.package import entry_extension

    def show(name: str) -> str:
        return released(tag, f"{folder}/{name}")

    trainer = show("async_trainer.py")
    module = "examples.train.async.main_async"
    found = entry_extension(show("main_async.py"), "main_async.py",
                            lambda name, level: trainer if name == "async_trainer" else None, module)
    assert found is not None and found.runs == "one_step_async" and found.refused is None
    edited = trainer.replace("asyncio.Queue(maxsize=1)", "asyncio.Queue(maxsize=2)")
    assert edited != trainer
    other = entry_extension(show("main_async.py"), "main_async.py",
                            lambda name, level: edited if name == "async_trainer" else None, module)
    assert other.runs is None and other.refused is not None


# ---- skyrl-train's DAPO entrypoint: `+trainer.algorithm.overlong_buffer.*` ---------------------------------------

SKYRL_TRAIN_DAPO_MODULE = ("from skyrl_train.trainer import RayPPOTrainer\n"
                           "class DAPOTrainer(RayPPOTrainer):\n"
                           "    def postprocess_generator_output(self, generator_output, uids):\n"
                           "        return self.cfg.trainer.algorithm.overlong_buffer.len\n")
SKYRL_TRAIN_BUFFER = ["+trainer.algorithm.overlong_buffer.len=256", "+trainer.algorithm.overlong_buffer.penalty_factor=0.5",
                      "generator.sampling_params.max_generate_length=1024"]
SKYRL_TRAIN_BASE = ["trainer.policy.model.path=Qwen/Qwen2.5-0.5B-Instruct"]


def test_skyrl_trains_dapo_entrypoint_reads_its_added_buffer(tmp_path: Path, monkeypatch):
    stand_in(tmp_path, monkeypatch, "examples/algorithms/dapo/main_dapo.py", SKYRL_TRAIN_DAPO_MODULE,
             "SKYRL_TRAIN_DAPO_ENTRY_FINGERPRINTS")
    result = check_file("python", ["-m", "examples.algorithms.dapo.main_dapo", *SKYRL_TRAIN_BASE, *SKYRL_TRAIN_BUFFER],
                        env=HOST_ENV, release="0.4.0")
    assert result.ok and not [d for d in result.diagnostics if d.code in ("RLC118", "RLC115")], codes(result)
    shaping = lower("skyrl", result.config, result.release).algorithm.reward
    assert (shaping.overlong_penalty_length, shaping.overlong_penalty_factor) == (1024 - 256, 0.5)
    # main_base passes the added keys on and nothing reads them: a warning, and no punishment
    plain = check_file("python", ["-m", "skyrl_train.entrypoints.main_base", *SKYRL_TRAIN_BASE, *SKYRL_TRAIN_BUFFER],
                       env=HOST_ENV, release="0.4.0")
    assert plain.ok and ("RLC115", "trainer.algorithm.overlong_buffer") in codes(plain, "warning"), codes(plain)
    assert lower("skyrl", plain.config, plain.release).algorithm.reward.overlong_penalty_length is None


@pytest.mark.parametrize("tag, module, fingerprints", [
    *[(tag, "skyrl-train/examples/algorithms/dapo/main_dapo.py", "SKYRL_TRAIN_DAPO_ENTRY_FINGERPRINTS")
      for tag in ("skyrl_train-v0.1.0", "skyrl_train-v0.3.0", "skyrl_train-v0.4.0", "27380cb")],
    *[(tag, "skyrl-train/examples/tis_correction/main_tis_dapo.py", "DAPO_CONTEXT_BUFFER_FINGERPRINTS")
      for tag in ("skyrl_train-v0.1.0", "27380cb")],
    *[(tag, "examples/train/tis_correction/main_tis_dapo.py", "DAPO_CONTEXT_BUFFER_FINGERPRINTS")
      for tag in ("skyrl-v0.1.0", "skyrl-v0.2.0", "HEAD")],
    *[(tag, "skyrl-train/examples/fully_async/main_fully_async.py", "FULLY_ASYNC_ENTRY_FINGERPRINTS")
      for tag in ("skyrl_train-v0.4.0", "27380cb")],
])
def test_skyrl_trains_released_entrypoints_are_recognised(tag, module, fingerprints):
    """skyrl-train's DAPO and TIS-DAPO, the package's TIS-DAPO, and skyrl-train's fully-asynchronous (0.4.0 on: the
    trainer of the package's 0.1.0) entrypoints."""
    import ast
    from rlcfg.dialects.skyrl import package

    def fingerprint(rev: str) -> str:
        return package.module_fingerprint(ast.parse(released(rev, module)))

    assert fingerprint(tag) in getattr(package, fingerprints)
    # skyrl-train's DAPO ends its buffer at the context limit up to 0.3.0, at max_generate_length from 0.4.0
    if module.endswith("dapo/main_dapo.py"):
        assert (fingerprint(tag) in package.DAPO_CONTEXT_BUFFER_FINGERPRINTS) == (tag in ("skyrl_train-v0.1.0",
                                                                                           "skyrl_train-v0.3.0"))


def test_up_to_skyrl_010_the_fully_async_trainer_needs_the_asynchronous_engine(fully_async_entry):
    overrides = [o for o in FULLY_ASYNC if not o.startswith(("trainer.fully_async.enabled",
                                                             "trainer.algorithm.policy_loss_type"))]
    sync_engine = [*FULLY_ASYNC_ENTRY, *BASE, *overrides, "generator.inference_engine.async_engine=false"]
    before = check_file("python", sync_engine, env=HOST_ENV, release="skyrl-0.1.0")
    assert ("RLC306", "generator.inference_engine.async_engine") in codes(before, "error"), codes(before)
    later = check_file("python", sync_engine, env=HOST_ENV, release="skyrl-0.2.0")
    assert not [c for c in codes(later) if c[1] == "generator.inference_engine.async_engine"], codes(later)


def test_dapo_trainers_whose_buffer_ends_at_the_context_limit(tmp_path: Path, monkeypatch):
    """skyrl-train's DAPO up to 0.3.0 and the TIS-DAPO examples: the buffer ends at max_input_length +
    max_generate_length less the prompt's tokens."""
    import ast

    from rlcfg.dialects.skyrl import package

    stand_in(tmp_path, monkeypatch, "examples/tis_correction/main_tis_dapo.py", SKYRL_TRAIN_DAPO_MODULE,
             "SKYRL_TRAIN_DAPO_ENTRY_FINGERPRINTS")
    monkeypatch.setattr(package, "DAPO_CONTEXT_BUFFER_FINGERPRINTS",
                        frozenset({package.module_fingerprint(ast.parse(SKYRL_TRAIN_DAPO_MODULE))}))
    result = check_file("python", ["-m", "examples.tis_correction.main_tis_dapo", *SKYRL_TRAIN_BASE,
                                   *SKYRL_TRAIN_BUFFER, "generator.max_input_length=512", "trainer.max_prompt_length=512"],
                        env=HOST_ENV, release="0.2.0")
    assert result.ok and result.entry_runs == package.DAPO_CONTEXT_BUFFER, codes(result)
    shaping = lower("skyrl", result.config, result.release, result.entry_runs).algorithm.reward
    assert (shaping.overlong_penalty_length, shaping.overlong_penalty_prompt_room) == (1024 - 256, 512)


def test_the_context_limited_penalty_is_those_trainers_formula():
    """DAPOTrainer (context limit) by hand: with L = max_input_length + max_generate_length and a prompt of p tokens,
    a response of r tokens past L − buffer − p loses (r − (L − buffer − p)) / buffer × factor."""
    torch = pytest.importorskip("torch")
    from rlcfg import ir
    from rlcfg.runtime import algorithms as A

    max_input, max_gen, buffer, factor = 512, 1024, 256, 0.5
    prompts = torch.tensor([512, 412, 100])
    responses = torch.tensor([1024, 1024, 1024])
    expected = []
    for p, r in zip(prompts.tolist(), responses.tolist()):
        start = max_input + max_gen - buffer - p
        expected.append(1.0 - (r - start) / buffer * factor if r > start else 1.0)
    spec = ir.RewardShaping(overlong_penalty_length=max_gen - buffer, overlong_penalty_factor=factor,
                            overlong_penalty_prompt_room=max_input)
    shaped = A.shape_scores(torch.ones(3), responses, torch.ones(3, dtype=torch.bool), max_gen, spec, prompts)
    assert shaped.tolist() == pytest.approx(expected)
    assert expected[0] == pytest.approx(0.5) and expected[2] == 1.0  # a short prompt's window lies past the limit


MULTIPLY_MODULE = '''"""A stand-in for examples/train/multiply/main_multiply.py."""
import sys

from skyrl.train.config import SkyRLTrainConfig
from skyrl.train.entrypoints.main_base import BasePPOExp
from skyrl_gym.envs import register


def main() -> None:
    register(id="multiply", entry_point="examples.train.multiply.env:MultiplyEnv")
    BasePPOExp(SkyRLTrainConfig.from_cli_overrides(sys.argv[1:])).run()
'''
MULTIPLY_ENV = '''"""A stand-in for examples/train/multiply/env.py."""
from skyrl_gym.envs.base_text_env import BaseTextEnv


class MultiplyEnv(BaseTextEnv):
    pass
'''
MULTIPLY = ["-m", "examples.train.multiply.main_multiply", "environment.env_class=multiply"]


def example_entry(tmp_path: Path, monkeypatch, folder: str, main: str, main_text: str, env_file: str,
                  fingerprints: str) -> Path:
    """An example's entry module (`main` in `folder`, as `main_text`) and the environment file it registers, taken
    for the released ones: their fingerprints alone in the package's sets `fingerprints`_ENTRY_FINGERPRINTS and
    `fingerprints`_ENV_FINGERPRINTS."""
    import ast

    from rlcfg.dialects.skyrl import package

    stand_in(tmp_path, monkeypatch, f"{folder}/{main}", main_text, f"{fingerprints}_ENTRY_FINGERPRINTS")
    env = tmp_path / folder / env_file
    env.write_text(MULTIPLY_ENV)
    monkeypatch.setattr(package, f"{fingerprints}_ENV_FINGERPRINTS",
                        frozenset({package.module_fingerprint(ast.parse(MULTIPLY_ENV))}))
    return env


@pytest.fixture
def multiply_entry(tmp_path: Path, monkeypatch):
    """The multiply example's entry module and the environment it registers, taken for the released ones."""
    return example_entry(tmp_path, monkeypatch, "examples/train/multiply", "main_multiply.py", MULTIPLY_MODULE,
                         "env.py", "MULTIPLY")


def example_experiment(launch: list[str], runs: str):
    """An example's launch at skyrl 0.4.0, checked to run its entry module's loop `runs` with nothing refused,
    lowered."""
    result = check_file("python", [*launch, *BASE], env=HOST_ENV, release="skyrl-0.4.0")
    assert result.ok and result.entry_runs == runs, codes(result)
    assert not [d for d in result.diagnostics if d.code == "RLC118"], codes(result)
    return lower("skyrl", result.config, result.release, result.entry_runs)


def test_the_multiply_example_runs_its_environment_in_one_turn(multiply_entry):
    experiment = example_experiment(MULTIPLY, "multiply_env")
    assert experiment.reward_function == "boxed_multiply"
    assert experiment.data.answer_key == "reward_spec.ground_truth"
    # more turns bring the environment's feedback, which rlcfg does not run
    assert ("RLC118", "generator.max_turns") in codes(
        check_file("python", [*MULTIPLY, *BASE, "generator.max_turns=5"], env=HOST_ENV, release="skyrl-0.4.0"))


def test_the_multiply_environment_needs_the_entry_module_that_registers_it(multiply_entry):
    plain = check_file("python", [*MAIN_BASE, *BASE, "environment.env_class=multiply"], env=HOST_ENV,
                       release="skyrl-0.4.0")
    [refusal] = [d for d in plain.diagnostics if d.code == "RLC118"]
    assert refusal.path == "environment.env_class" and "main_multiply" in refusal.message
    multiply_entry.write_text(MULTIPLY_ENV.replace("pass", "def step(self, action):\n        return None"))
    edited = check_file("python", [*MULTIPLY, *BASE], env=HOST_ENV, release="skyrl-0.4.0")
    assert edited.entry_runs is None
    assert any(d.code == "RLC118" and d.path == "" and "main_multiply" in d.message for d in edited.diagnostics)


def environment_experiment(env_class: str):
    """A main_base launch with `environment.env_class` set, checked to run, lowered."""
    result = check_file("python", [*MAIN_BASE, *BASE, f"environment.env_class={env_class}"], env=HOST_ENV,
                        release="skyrl-0.4.0")
    assert result.ok and not [d for d in result.diagnostics if d.code == "RLC118"], codes(result)
    return lower("skyrl", result.config, result.release, result.entry_runs)


def test_the_multi_turn_gsm8k_environment_runs_in_the_one_turn_the_generator_gives_it():
    experiment = environment_experiment("gsm8k_multi_turn")
    assert experiment.reward_function == "gsm8k_format_credit"
    assert experiment.data.answer_key == "reward_spec.ground_truth"
    # more turns bring the environment's follow-up questions and per-turn rewards, which rlcfg does not run
    more = check_file("python", [*MAIN_BASE, *BASE, "environment.env_class=gsm8k_multi_turn", "generator.max_turns=5",
                                 "generator.max_input_length=2048"], env=HOST_ENV, release="skyrl-0.4.0")
    assert ("RLC118", "generator.max_turns") in codes(more)


def test_the_livecodebench_environment_runs_each_program_against_its_tests():
    from rlcfg import preflight

    experiment = environment_experiment("lcb")
    assert experiment.reward_function == "lcb"
    assert experiment.data.answer_key == "reward_spec.ground_truth"  # the tests, as a JSON string
    # the programs run in a sandbox on the nodes that generate: the dry run says what those nodes need
    assert any("bubblewrap" in note for note in preflight._tool_notes(experiment))


TEXT2SQL = ["environment.env_class=text2sql", "generator.max_turns=6", "generator.max_input_length=4096",
            "environment.skyrl_gym.text2sql.db_path=/data/sql", "generator.use_conversation_multi_turn=false",
            "generator.sampling_params.stop=['</sql>','</solution>']",
            "generator.eval_sampling_params.stop=['</sql>','</solution>']"]


# BASE in skyrl-train's layout (the package moved the engine keys under generator.inference_engine).
TRAIN_BASE = [o.replace("generator.inference_engine.num_engines", "generator.num_inference_engines")
              .replace("generator.inference_engine.tensor_parallel_size", "generator.inference_engine_tensor_parallel_size")
              for o in BASE]


def text2sql(*overrides: str, release: str = "skyrl-0.4.0"):
    base = BASE if release.startswith("skyrl-") else TRAIN_BASE
    return check_file("python", [*MAIN_BASE, *base, *TEXT2SQL, *overrides], env=HOST_ENV, release=release)


def test_the_text2sql_environment_runs_whole_episodes():
    from rlcfg import preflight
    from rlcfg.ir import Episodes

    result = text2sql()
    assert result.ok and not [d for d in result.diagnostics if d.code == "RLC118"], codes(result)
    experiment = lower("skyrl", result.config, result.release, result.entry_runs)
    assert experiment.episodes == Episodes(environment="text2sql", max_turns=6, max_input_length=4096,
                                           observations="inline", eos_after_stop=True,
                                           settings=(("db_path", "/data/sql"),))
    # the environment reads the row's database, task and gold query, and scores the episodes itself
    assert experiment.data.answer_fields == ("db_id", "data", "reward_spec")
    assert experiment.reward_function == "text2sql"
    notes = preflight._tool_notes(experiment) + preflight._path_notes(experiment)
    assert any("bubblewrap" in n for n in notes) and any("`/data/sql` are not on this machine" in n for n in notes)
    chat = lower("skyrl", text2sql("generator.use_conversation_multi_turn=true").config, "skyrl-0.4.0")
    assert chat.episodes.observations == "chat"


@pytest.mark.parametrize("overrides, release, key", [
    # the generator loop before 0.3.0 builds its responses differently
    ((), "0.2.0", "environment.env_class"),
    # 0.3.0's keeps no engine log-probs for episodes
    (("trainer.algorithm.use_tis=true", "trainer.algorithm.tis_imp_ratio_cap=2.0"), "0.3.0",
     "trainer.algorithm.use_tis"),
    (("generator.batched=true",), "skyrl-0.4.0", "generator.batched"),
    (("trainer.algorithm.advantage_estimator=reinforce++",), "skyrl-0.4.0", "trainer.algorithm.advantage_estimator"),
    (("generator.step_wise_trajectories=true", "generator.use_conversation_multi_turn=true"), "skyrl-0.4.0",
     "generator.step_wise_trajectories"),
    # up to skyrl 0.2.0 the environment stops the run on a turn that goes on after a stop tag
    (("generator.sampling_params.stop=null",), "skyrl-0.2.0", "generator.sampling_params.stop"),
])
def test_text2sql_episodes_rlcfg_does_not_run_as_skyrl_does_are_refused(overrides, release, key):
    assert ("RLC118", key) in codes(text2sql(*overrides, release=release))


def test_skyrl_train_0_3_0_keeps_the_final_observation_in_the_response():
    result = text2sql(release="0.3.0")
    assert result.ok and not [d for d in result.diagnostics if d.code == "RLC118"], codes(result)
    assert lower("skyrl", result.config, "0.3.0").episodes.final_observation
    assert not lower("skyrl", text2sql().config, "skyrl-0.4.0").episodes.final_observation


def test_text2sql_without_stop_strings_runs_where_the_environment_does_not_check_them():
    assert not [d for d in text2sql("generator.sampling_params.stop=null").diagnostics if d.code == "RLC118"]


def test_the_search_environment_runs_whole_episodes_against_the_configured_server():
    from rlcfg import preflight

    result = check_file("python", [*MAIN_BASE, *BASE, "environment.env_class=search", "generator.max_turns=4",
                                   "generator.max_input_length=4096",
                                   "environment.skyrl_gym.search.search_url=http://retriever:8000/retrieve"],
                        env=HOST_ENV, release="skyrl-0.4.0")
    assert result.ok and not [d for d in result.diagnostics if d.code == "RLC118"], codes(result)
    experiment = lower("skyrl", result.config, result.release, result.entry_runs)
    assert experiment.episodes.environment == "search" and experiment.episodes.max_turns == 4
    assert dict(experiment.episodes.settings) == {"search_url": "http://retriever:8000/retrieve", "topk": 3,
                                                  "timeout": 30}
    assert experiment.data.answer_fields == ("reward_spec",)
    assert any("`http://retriever:8000/retrieve` must answer" in n for n in preflight._path_notes(experiment))
    # up to skyrl 0.1.0 the environment stops the run on a turn that goes on after </search> or </answer>
    older = check_file("python", [*MAIN_BASE, *BASE, "environment.env_class=search", "generator.max_turns=4",
                                  "generator.max_input_length=4096"], env=HOST_ENV, release="skyrl-0.1.0")
    assert ("RLC118", "generator.sampling_params.stop") in codes(older)


def test_episodes_convert_to_skyrl_and_are_named_where_a_dialect_has_none(tmp_path):
    from rlcfg.convert import convert

    script = tmp_path / "run_sql.sh"
    script.write_text("python " + " ".join([*MAIN_BASE, *BASE, *(f'"{o}"' for o in TEXT2SQL)]) + "\n")
    back = convert(str(script), "skyrl", release="skyrl-0.4.0")
    assert back.result.episodes == back.source.episodes and back.result.episodes.environment == "text2sql"
    assert not [loss for loss in back.losses if "episodes" in loss.path or "answer_fields" in loss.path]
    roll = convert(str(script), "roll", release="skyrl-0.4.0")
    [loss] = [loss for loss in roll.losses if loss.path == "episodes"]
    assert "no multi-turn environment" in loss.reason


def test_more_turns_outside_text2sql_are_refused():
    result = check_file("python", [*MAIN_BASE, *BASE, "generator.max_turns=3", "generator.max_input_length=2048"],
                        env=HOST_ENV, release="skyrl-0.4.0")
    [refusal] = [d for d in result.diagnostics if d.code == "RLC118"]
    assert refusal.path == "generator.max_turns" and "text2sql" in refusal.message


LLM_JUDGE_MODULE = MULTIPLY_MODULE.replace("multiply/main_multiply", "llm_as_a_judge/main_llm_judge").replace(
    'register(id="multiply", entry_point="examples.train.multiply.env:MultiplyEnv")',
    'register(id="llm_as_a_judge", entry_point="examples.train.llm_as_a_judge.llm_judge_env:GSM8kLLMJudgeEnv")')
LLM_JUDGE = ["-m", "examples.train.llm_as_a_judge.main_llm_judge", "environment.env_class=llm_as_a_judge",
             "environment.skyrl_gym.llm_as_a_judge.model=judge-7b",
             "environment.skyrl_gym.llm_as_a_judge.base_url=http://judge:8000/v1"]


@pytest.fixture
def llm_judge_entry(tmp_path: Path, monkeypatch):
    """The LLM-as-a-judge example's entry module and the environment it registers, taken for the released ones."""
    return example_entry(tmp_path, monkeypatch, "examples/train/llm_as_a_judge", "main_llm_judge.py",
                         LLM_JUDGE_MODULE, "llm_judge_env.py", "LLM_JUDGE")


def test_the_llm_judge_example_scores_with_its_judge_model(llm_judge_entry):
    from rlcfg import preflight

    experiment = example_experiment(LLM_JUDGE, "llm_judge_env")
    assert experiment.reward_function == "llm_judge"
    assert dict(experiment.reward_settings) == {"model": "judge-7b", "base_url": "http://judge:8000/v1"}
    assert any("OPENAI_API_KEY" in note for note in preflight._tool_notes(experiment))
    # under main_base the environment is not registered
    plain = check_file("python", [*MAIN_BASE, *BASE, "environment.env_class=llm_as_a_judge"], env=HOST_ENV,
                       release="skyrl-0.4.0")
    [refusal] = [d for d in plain.diagnostics if d.code == "RLC118"]
    assert "main_llm_judge" in refusal.message and "examples.train.llm_as_a_judge.main_llm_judge" in refusal.hint


@pytest.mark.parametrize("tag, folder, module", [
    *[(tag, "examples/train/llm_as_a_judge", "examples.train.llm_as_a_judge") for tag in ("skyrl-v0.1.0", "HEAD")],
    *[(tag, "skyrl-train/examples/llm_as_a_judge", "examples.llm_as_a_judge")
      for tag in ("skyrl_train-v0.1.0", "skyrl_train-v0.4.0")],
])
def test_the_released_llm_judge_entrypoints_are_recognised(tag, folder, module):
    from rlcfg.dialects.skyrl.package import entry_extension

    env = released(tag, f"{folder}/llm_judge_env.py")
    found = entry_extension(released(tag, f"{folder}/main_llm_judge.py"), "main_llm_judge.py",
                            lambda name, level: env if name == f"{module}.llm_judge_env" else None,
                            f"{module}.main_llm_judge")
    assert found is not None and found.runs == "llm_judge_env" and found.refused is None


@pytest.mark.parametrize("tag, folder, module", [
    *[(tag, "examples/train/multiply", "examples.train.multiply") for tag in ("skyrl-v0.1.0", "HEAD")],
    *[(tag, "skyrl-train/examples/multiply", "examples.multiply") for tag in ("skyrl_train-v0.1.0",
                                                                           "0b2b28216538e307f85e78876f214966e3edd117")],
])
def test_the_released_multiply_entrypoints_are_recognised(tag, folder, module):
    from rlcfg.dialects.skyrl.package import entry_extension

    def show(name: str) -> str:
        return released(tag, f"{folder}/{name}")

    env = show("env.py")
    found = entry_extension(show("main_multiply.py"), "main_multiply.py",
                            lambda name, level: env if name == f"{module}.env" else None, f"{module}.main_multiply")
    assert found is not None and found.runs == "multiply_env" and found.refused is None


CUSTOM_ESTIMATOR_MODULE = '''"""A stand-in for the custom-estimator example's main_custom_adv_est.py."""
import sys

from skyrl.backends.skyrl_train.utils.ppo_utils import AdvantageEstimatorRegistry
from skyrl.train.entrypoints.main_base import BasePPOExp


def compute_simple_baseline_advantage(token_level_rewards, response_mask, index, **kwargs):
    response_rewards = (token_level_rewards * response_mask).sum(dim=-1, keepdim=True)
    advantages = (response_rewards - response_rewards.mean()) * response_mask
    return advantages, advantages.clone()


AdvantageEstimatorRegistry.register("simple_baseline", compute_simple_baseline_advantage)
'''
CUSTOM_ESTIMATOR = ["-m", "examples.train.algorithms.custom_advantage_estimator.main_custom_adv_est",
                    "trainer.algorithm.advantage_estimator=simple_baseline", "trainer.algorithm.use_kl_loss=true"]


@pytest.fixture
def custom_estimator_entry(tmp_path: Path, monkeypatch):
    return stand_in(tmp_path, monkeypatch,
                    "examples/train/algorithms/custom_advantage_estimator/main_custom_adv_est.py",
                    CUSTOM_ESTIMATOR_MODULE, "SIMPLE_BASELINE_ENTRY_FINGERPRINTS")


def test_the_custom_estimator_example_runs_its_simple_baseline(custom_estimator_entry):
    torch = pytest.importorskip("torch")
    from rlcfg.runtime.algorithms import compute_advantages

    result = check_file("python", [*CUSTOM_ESTIMATOR, *BASE, "trainer.algorithm.gamma=0.9"], env=HOST_ENV,
                        release="skyrl-0.4.0")
    assert result.ok and result.entry_runs == "simple_baseline_estimator", codes(result)
    # the entry module registers the name: neither a refusal nor validate's warning on an unregistered one
    assert not [d for d in result.diagnostics if d.path == "trainer.algorithm.advantage_estimator"], codes(result)
    alg = lower("skyrl", result.config, result.release, result.entry_runs).algorithm
    # each response's score less the batch's mean score, on every one of its tokens (the estimator has no gamma)
    scores = torch.tensor([1.0, 0.0, 1.0, 1.0])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1]], dtype=torch.float)
    adv, _ = compute_advantages(scores, mask, estimator=alg.advantage, group_size=alg.group_size,
                                options=alg.advantage_options, normalize_std=alg.normalize_advantage_std,
                                batch_normalize=alg.batch_normalize_advantage, gamma=alg.gamma, lam=alg.lam)
    assert torch.allclose(adv, (scores - scores.mean()).unsqueeze(1) * mask)


def test_the_simple_baseline_needs_its_entry_module_and_no_kl_in_the_reward(custom_estimator_entry):
    plain = check_file("python", [*MAIN_BASE, *BASE, "trainer.algorithm.advantage_estimator=simple_baseline"],
                       env=HOST_ENV, release="skyrl-0.4.0")
    assert ("RLC118", "trainer.algorithm.advantage_estimator") in codes(plain)
    in_reward = check_file("python", [*CUSTOM_ESTIMATOR, *BASE, "trainer.algorithm.use_kl_loss=false",
                                      "trainer.algorithm.use_kl_in_reward=true"], env=HOST_ENV, release="skyrl-0.4.0")
    [refusal] = [d for d in in_reward.diagnostics if d.path == "trainer.algorithm.advantage_estimator"]
    assert refusal.code == "RLC118" and "KL penalties included" in refusal.message


@pytest.mark.parametrize("tag, folder", [
    ("skyrl-v0.1.0", "examples/train/algorithms/custom_advantage_estimator"),
    ("HEAD", "examples/train/algorithms/custom_advantage_estimator"),
    ("skyrl_train-v0.1.0", "skyrl-train/examples/algorithms/custom_advantage_estimator"),
])
def test_the_released_custom_estimator_entrypoints_are_recognised(tag, folder):
    from rlcfg.dialects.skyrl.package import entry_extension

    text = released(tag, f"{folder}/main_custom_adv_est.py")
    found = entry_extension(text, "main_custom_adv_est.py", lambda name, level: None,
                            "examples.train.algorithms.custom_advantage_estimator.main_custom_adv_est")
    assert found is not None and found.runs == "simple_baseline_estimator" and found.refused is None
    edited = entry_extension(text.replace("response_rewards.mean()", "response_rewards.median()"),
                             "main_custom_adv_est.py", lambda name, level: None, "x.main_custom_adv_est")
    assert edited.runs is None and edited.refused is not None


DISTILL_MODULE = '''"""A stand-in for the on-policy distillation example's main_on_policy_distill.py."""
from skyrl.backends.skyrl_train.utils.ppo_utils import register_advantage_estimator
from skyrl.train.trainer import RayPPOTrainer


class OnPolicyDistillationTrainer(RayPPOTrainer):
    def apply_reward_kl_penalty(self, data):
        data["rewards"] = -(data["action_log_probs"] - data["base_action_log_probs"]) * data["loss_mask"]
        return data


@register_advantage_estimator("no_op")
def compute_no_op_advantage(token_level_rewards, **kwargs):
    return token_level_rewards, token_level_rewards
'''
DISTILL = ["-m", "examples.train.on_policy_distillation.main_on_policy_distill",
           "trainer.algorithm.advantage_estimator=no_op", "trainer.algorithm.policy_loss_type=importance_sampling",
           "trainer.ref.model.path=/models/teacher", "trainer.algorithm.use_kl_loss=false",
           "trainer.algorithm.use_kl_in_reward=true", "environment.env_class=aime"]


def distillation_stand_in(tmp_path: Path, monkeypatch, folder: str, runs: str) -> None:
    """DISTILL_MODULE as the distillation example's entry module under `folder`, taken for the released copy that
    runs `runs` (its fingerprint alone in ON_POLICY_DISTILLATION_FINGERPRINTS)."""
    import ast

    from rlcfg.dialects.skyrl import package

    module = tmp_path / folder / "main_on_policy_distill.py"
    module.parent.mkdir(parents=True)
    module.write_text(DISTILL_MODULE)
    monkeypatch.setattr(package, "ON_POLICY_DISTILLATION_FINGERPRINTS",
                        {package.module_fingerprint(ast.parse(DISTILL_MODULE)): runs})
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def distillation_entry(tmp_path: Path, monkeypatch):
    """The distillation example's entry module, taken for the package's released copy."""
    from rlcfg.dialects.skyrl.package import ON_POLICY_DISTILLATION

    distillation_stand_in(tmp_path, monkeypatch, "examples/train/on_policy_distillation", ON_POLICY_DISTILLATION)


def test_the_distillation_example_rewards_the_teachers_log_probs(distillation_entry):
    """Each token's reward is the teacher's (the reference model's) log-prob less the policy's, the environment's
    score left out, and that reward is the token's advantage; the package trains it with its importance_sampling
    loss, reduced as loss_reduction says."""
    result = check_file("python", [*DISTILL, *BASE], env=HOST_ENV, release="skyrl-0.4.0")
    assert result.ok and result.entry_runs == "on_policy_distillation", codes(result)
    assert not [d for d in result.diagnostics if d.code == "RLC118"], codes(result)
    experiment = lower("skyrl", result.config, result.release, result.entry_runs)
    alg = experiment.algorithm
    assert alg.advantage == "token_reward" and alg.policy_loss == "importance_sampling"
    assert (alg.kl.placement, alg.kl.coef, alg.kl.estimator, alg.kl.penalty_only) == ("reward", 1.0, "k1", True)
    assert alg.kl.controller.kind == "fixed"
    assert (alg.loss_aggregation, alg.loss_normalization, alg.loss_length_norm) == ("token-mean", "mini-batch", None)
    [reference] = [r for r in experiment.roles if r.name == "reference"]
    assert reference.model.path == "/models/teacher"
    # without the KL in the reward the example's trainer keeps the environment's scores, on the last token
    plain = check_file("python", [*DISTILL, *BASE, "trainer.algorithm.use_kl_in_reward=false"], env=HOST_ENV,
                       release="skyrl-0.4.0")
    assert not lower("skyrl", plain.config, plain.release, plain.entry_runs).algorithm.kl.penalty_only


def test_the_no_op_estimator_needs_the_distillation_entry_module(distillation_entry):
    plain = check_file("python", [*MAIN_BASE, *BASE, *DISTILL[2:]], env=HOST_ENV, release="skyrl-0.4.0")
    assert ("RLC118", "trainer.algorithm.advantage_estimator") in codes(plain)
    # the package's own importance_sampling runs under main_base too, from 0.2.0
    assert ("RLC118", "trainer.algorithm.policy_loss_type") not in codes(plain)
    with_critic = check_file("python", [*DISTILL, *BASE, "trainer.critic.model.path=Qwen/Qwen2.5-0.5B-Instruct",
                                        "trainer.placement.critic_num_gpus_per_node=4"], env=HOST_ENV,
                             release="skyrl-0.4.0")
    [refusal] = [d for d in with_critic.diagnostics if d.path == "trainer.algorithm.advantage_estimator"]
    assert refusal.code == "RLC118" and "critic" in refusal.message


def test_skyrl_trains_distillation_example_trains_with_its_own_loss(tmp_path: Path, monkeypatch):
    """skyrl-train 0.3.0's copy registers importance_sampling itself, reduced as seq_mean_token_sum_norm over
    max_input_length + max_generate_length whatever loss_reduction says."""
    from rlcfg.dialects.skyrl.package import ON_POLICY_DISTILLATION_OWN_LOSS

    distillation_stand_in(tmp_path, monkeypatch, "examples/on_policy_distillation", ON_POLICY_DISTILLATION_OWN_LOSS)
    result = check_file("python", ["-m", "examples.on_policy_distillation.main_on_policy_distill", *SKYRL_TRAIN_BASE,
                                   *DISTILL[2:-1], "generator.max_input_length=512",
                                   "generator.sampling_params.max_generate_length=1024",
                                   "trainer.algorithm.loss_reduction=token_mean"], env=HOST_ENV, release="0.3.0")
    assert result.ok and not [d for d in result.diagnostics if d.code == "RLC118"], codes(result)
    # the release registers no importance_sampling of its own; the entry module's counts as registered
    assert not [d for d in result.diagnostics if d.path == "trainer.algorithm.policy_loss_type"], codes(result)
    alg = lower("skyrl", result.config, result.release, result.entry_runs).algorithm
    assert (alg.policy_loss, alg.advantage, alg.kl.penalty_only) == ("importance_sampling", "token_reward", True)
    assert (alg.loss_aggregation, alg.loss_length_norm, alg.loss_normalization) == \
        ("seq-mean-token-sum", 512 + 1024, "micro-batch")


def test_importance_sampling_is_refused_where_it_sums_over_a_micro_batch(distillation_entry):
    """skyrl 0.1.0's importance_sampling sums its token losses whatever loss_reduction says; from 0.2.0 the
    trainer's advantage scaling reduces it as every other loss."""
    old = check_file("python", [*DISTILL, *BASE], env=HOST_ENV, release="skyrl-0.1.0")
    [refusal] = [d for d in old.diagnostics if d.path == "trainer.algorithm.policy_loss_type"]
    assert refusal.code == "RLC118" and "sums this loss" in refusal.message and "0.2.0" in refusal.message
    assert not [d for d in old.diagnostics if d.path == "trainer.algorithm.advantage_estimator"]


@pytest.mark.parametrize("tag, folder, runs", [
    ("skyrl-v0.1.0", "examples/train/on_policy_distillation", "on_policy_distillation"),
    ("HEAD", "examples/train/on_policy_distillation", "on_policy_distillation"),
    ("skyrl_train-v0.3.0", "skyrl-train/examples/on_policy_distillation", "on_policy_distillation_own_loss"),
])
def test_the_released_distillation_entrypoints_are_recognised(tag, folder, runs):
    from rlcfg.dialects.skyrl.package import entry_extension

    text = released(tag, f"{folder}/main_on_policy_distill.py")
    found = entry_extension(text, "main_on_policy_distill.py", lambda name, level: None,
                            "examples.on_policy_distillation.main_on_policy_distill")
    assert found is not None and found.runs == runs and found.refused is None
    edited = entry_extension(text.replace("teacher_action_log_probs) * loss_masks_all",
                                          "teacher_action_log_probs) * 0.5 * loss_masks_all"),
                             "main_on_policy_distill.py", lambda name, level: None, "x.main_on_policy_distill")
    assert edited.runs is None and edited.refused is not None


def test_a_released_distillation_entrypoint_that_cannot_start_is_refused_as_such():
    """skyrl-train 0.4.0's copy registers importance_sampling, which that release registers already: its import
    raises before any training."""
    from rlcfg.dialects.skyrl.package import entry_extension

    for tag in ("skyrl_train-v0.4.0", "27380cb"):
        text = released(tag, "skyrl-train/examples/on_policy_distillation/main_on_policy_distill.py")
        found = entry_extension(text, "main_on_policy_distill.py", lambda name, level: None,
                                "examples.on_policy_distillation.main_on_policy_distill")
        assert found.runs is None and "cannot start" in found.refused[0] and "already" in found.refused[0]
