"""The `skyrl` package's releases (0.1.0 and later): skyrl-train's config, rebuilt as dataclasses and read from the
command line only.

What differs from skyrl-train, and how rlcfg reads it:

- **The layout.** The package moved the inference-engine settings of `generator` into `generator.inference_engine`,
  renaming six of them (`num_inference_engines` is `num_engines`, ...). rlcfg's schema keeps skyrl-train's layout:
  a package document is read into it (`to_schema_path`), and every diagnostic is spelled back in the package's
  layout (`spelled`), so a message names the key the user wrote.
- **The old layout.** 0.1.0 and 0.2.0 still read a command line in skyrl-train's layout, from a source checkout
  only: their loader falls back to `ppo_base_config.yaml`, which the PyPI wheels do not ship. 0.3.0 dropped it.
- **The grammar.** `SkyRLTrainConfig.from_cli_overrides` reads `key=value` with OmegaConf's dotlist (the value read
  as YAML) over the dataclass defaults; it refuses a `+` prefix and takes `~` as part of a key name. A key no
  dataclass declares is refused.
- **Keys rlcfg does not model.** The package added keys skyrl-train never had (fully_async, MTP, FP8, ...).
  rlcfg checks their type and lets `rlcfg run` refuse a value other than the release's default
  (`unmodelled_keys`, facts in package_keys.json, read from the releases' dataclasses: tests/inventory/skyrl/).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from rlcfg.diagnostics import Diagnostic, diagnostic
from rlcfg.patterns import lazy
from rlcfg.schema import entry
from rlcfg.source.project import module_fingerprint

PACKAGE_RELEASES = tuple(r for r in entry("skyrl").releases if r.startswith("skyrl-"))
# The releases whose loader falls back to skyrl-train's layout (from a source checkout).
OLD_LAYOUT_READ = ("skyrl-0.1.0", "skyrl-0.2.0")

ENGINE = ("generator", "inference_engine")
# skyrl-train's name of a `generator` key → its name under generator.inference_engine, for the six the package
# renamed; every other engine key keeps its name.
RENAMED = {"num_inference_engines": "num_engines",
           "inference_engine_tensor_parallel_size": "tensor_parallel_size",
           "inference_engine_pipeline_parallel_size": "pipeline_parallel_size",
           "inference_engine_expert_parallel_size": "expert_parallel_size",
           "inference_engine_data_parallel_size": "data_parallel_size",
           "remote_inference_engine_urls": "remote_urls"}
_SCHEMA_NAME = {new: old for old, new in RENAMED.items()}
# skyrl-train's `generator` keys that the package keeps in generator.inference_engine (the six renamed ones under
# their old names), and the engine keys the package added; no name is both an engine key and another generator key.
ENGINE_KEYS = frozenset({
    *RENAMED, "model_dtype", "run_engines_locally", "backend", "weight_sync_backend",
    "weight_transfer_threshold_cuda_ipc_GB", "async_engine", "vllm_v1_disable_multiproc", "enable_prefix_caching",
    "enable_chunked_prefill", "max_num_batched_tokens", "enforce_eager", "fully_sharded_loras",
    "enable_ray_prometheus_stats", "gpu_memory_utilization", "max_num_seqs", "enable_http_endpoint",
    "http_endpoint_host", "http_endpoint_port", "served_model_name", "engine_init_kwargs",
    "override_existing_update_group", "external_proxy_url", "external_server_urls",
    # added by the package
    "distributed_executor_backend", "enable_pd", "enable_return_routed_experts", "language_model_only", "num_prefill",
    "router_init_kwargs", "speculative_config", "use_expandable_segments", "decode_init_kwargs", "delta_weight_sync",
    "enable_return_sample_support_set", "fp8_weight_sync_mode", "offload_kv_for_weight_sync", "prefill_init_kwargs"})


# Mappings skyrl-train's base config lists the keys of (adding another takes `+`), which the package types
# Dict[str, Any]: any key is taken and handed to Megatron.
OPEN_MAPPINGS = tuple(("trainer", role, "megatron_config", name) for role in ("policy", "ref")
                      for name in ("optimizer_config_kwargs", "transformer_config_kwargs"))


def is_package(release: str | None) -> bool:
    return release in PACKAGE_RELEASES


# Keys the package renamed from 0.3.0, by their schema (skyrl-train) path; the old name stays an accepted alias.
RENAMED_FROM_030 = {("trainer", "use_sample_packing"): ("trainer", "remove_microbatch_padding")}
# The package releases from 0.3.0, which dropped the old layout, remote URLs and the offline engine.
PACKAGE_FROM_030 = ("skyrl-0.3.0", "skyrl-0.4.0")
# Keys every package release takes, though later ones only as an old name or to drop it: they tell no release.
ACCEPTED_EVERYWHERE = {(*ENGINE, "async_engine"), *RENAMED_FROM_030}


def to_schema_path(path: tuple, release: str | None = None) -> tuple:
    """A path in the package's layout (at `release`) → the same key in skyrl-train's (the schema's)."""
    if path[:2] == ENGINE and len(path) > 2:
        return ("generator", _SCHEMA_NAME.get(path[2], path[2]), *path[3:])
    if release in PACKAGE_FROM_030:
        for old, new in RENAMED_FROM_030.items():
            if path[:len(new)] == new:
                return (*old, *path[len(new):])
    return path


def to_package_path(path: tuple, release: str | None = None) -> tuple:
    if path[:1] == ("generator",) and len(path) > 1 and path[1] in ENGINE_KEYS:
        return (*ENGINE, RENAMED.get(path[1], path[1]), *path[2:])
    if release in PACKAGE_FROM_030:
        for old, new in RENAMED_FROM_030.items():
            if path[:len(old)] == old:
                return (*new, *path[len(old):])
    return path


def is_old_layout(path: tuple) -> bool:
    """A key the user wrote in skyrl-train's layout that the package moved."""
    return path[:1] == ("generator",) and len(path) > 1 and path[1] in ENGINE_KEYS


def package_name(dotted_key: str, release: str | None = None) -> str:
    return ".".join(to_package_path(tuple(dotted_key.split(".")), release))


def _alternatives(names) -> str:
    return "|".join(sorted(map(re.escape, names), key=len, reverse=True))


# A key in skyrl-train's spelling inside a message: an engine key under `generator`, a key renamed from 0.3.0, or a
# renamed engine key named bare ("num_inference_engines 3"), which is then named in full.
_OLD_NAMES = lazy(rf"(?<![\w.])(generator\.({_alternatives(ENGINE_KEYS)})"
                  rf"|{_alternatives('.'.join(p) for p in RENAMED_FROM_030)}|(?P<bare>{_alternatives(RENAMED)}))(?![\w])")


def respell(text: str | None, release: str, keep: frozenset = frozenset()) -> str | None:
    """A message with each key in skyrl-train's spelling named as `release` names it, except the keys in `keep`
    (dotted), which the user wrote that way."""
    if not text:
        return text

    def named(m: re.Match) -> str:
        full = f"generator.{m.group('bare')}" if m.group("bare") else m.group(0)
        return m.group(0) if full in keep else package_name(full, release)

    return _OLD_NAMES.sub(named, text)


def spelled(diagnostics: Iterable[Diagnostic], release: str, kept_old: frozenset) -> list[Diagnostic]:
    """The diagnostics of a package document in the package's layout. `kept_old`: the keys (dotted, as the schema
    names them) the user wrote in skyrl-train's spelling, which keep it."""
    out = []
    for found in diagnostics:
        path = found.path
        head = tuple(path.split(".")) if path else ()
        if head and not any(".".join(head[:n]) in kept_old for n in range(1, len(head) + 1)):
            found.path = ".".join(to_package_path(head, release))
        found.message = respell(found.message, release, kept_old)
        found.hint = respell(found.hint, release, kept_old)
        if found.rule:  # the dialect's rules speak of skyrl-train, whose checks the package kept
            found.message = found.message.replace("skyrl-train", "skyrl")
            found.hint = found.hint.replace("skyrl-train", "skyrl") if found.hint else found.hint
        out.append(found)
    return out


def read_overrides(overrides: list, release: str) -> tuple[list, list[Diagnostic]]:
    """The command line (already read as OmegaConf's dotlist: no `+`, no `~`, values as YAML) in the schema's layout,
    from the package's or, where `release` still reads it, skyrl-train's; and what the release makes of keys written
    in skyrl-train's layout."""
    found: list[Diagnostic] = []
    kept: list = []
    old: list = []  # overrides in skyrl-train's layout
    new_written = any(o.path[:2] == ENGINE for o in overrides)
    for override in overrides:
        path = override.path
        if is_old_layout(path):
            name = ".".join(to_package_path(path))
            if release not in OLD_LAYOUT_READ:
                found.append(diagnostic(
                    "RLC113", ".".join(path), f"`{'.'.join(path)}` is skyrl-train's name of `{name}`; "
                    f"{label(release)} has no key `{'.'.join(path)}`", origin=override.origin,
                    hint=f"write `{name}` (the `skyrl` package moved the engine settings into "
                         "generator.inference_engine; 0.3.0 dropped the old names)"))
                continue
            old.append(override)
        if release in PACKAGE_FROM_030 and tuple(path) == (*ENGINE, "async_engine"):
            # from 0.3.0 the engine is always the async one: the loader drops `true` and refuses anything else
            if override.value is True or str(override.value).lower() == "true":
                found.append(diagnostic(
                    "RLC307", ".".join(path), f"`{'.'.join(path)}` is no longer a key of {label(release)}, which "
                    "always runs the asynchronous engine: its loader drops `true`", origin=override.origin,
                    hint="remove the argument"))
            else:
                found.append(diagnostic(
                    "RLC113", ".".join(path), f"`{'.'.join(path)}={override.value}`: {label(release)} always runs "
                    "the asynchronous engine and refuses this key unless it is `true`", origin=override.origin,
                    hint="remove the argument"))
            continue
        if release in PACKAGE_FROM_030 and tuple(path) in RENAMED_FROM_030:
            alias, name = ".".join(path), ".".join(RENAMED_FROM_030[tuple(path)])
            if any(tuple(o.path) == RENAMED_FROM_030[tuple(path)] for o in overrides):
                found.append(diagnostic("RLC301", alias, f"`{alias}` (the old name of `{name}`) and `{name}` are both "
                                                         f"set; {label(release)} takes one of them only",
                                        origin=override.origin, hint=f"keep `{name}`"))
                continue
            found.append(diagnostic("RLC111", alias, f"`{alias}` was renamed to `{name}` in {label(release)}, which "
                                                     "still reads the old name", origin=override.origin,
                                    hint=f"write `{name}`"))
            kept.append(override)
            continue
        kept.append(type(override)(override.op, to_schema_path(path, release), override.value, override.has_value,
                                   override.origin))
    found.extend(_old_layout(old, new_written, release))
    return kept, found


def package_layout_under_train(overrides: list, release: str | None) -> tuple[list, list[Diagnostic]]:
    """Overrides judged by a skyrl-train release: one in the package's layout says which release it is written for
    (the rest are left to the schema, which knows none of them)."""
    for override in overrides:
        if override.path[:2] == ENGINE and len(override.path) > 2:
            name, train = ".".join(override.path), f"skyrl-train {release}" if release else "skyrl-train"
            return overrides, [diagnostic(
                "RLC113", name, f"`{name}` is in the `skyrl` package's layout, which {train} does not read (its "
                f"name there: `{'.'.join(to_schema_path(override.path))}`)", origin=override.origin,
                hint=f"judge it by the package with `--framework-version {PACKAGE_RELEASES[-1]}` (or the release you "
                     "run)")]
    return overrides, []


def old_layout_keys(overrides: Iterable[str]) -> frozenset:
    """The keys (dotted) a command line writes in skyrl-train's spelling: engine keys in the old layout, and the
    old names the package still reads."""
    out = set()
    for text in overrides:
        path = tuple(str(text).partition("=")[0].strip().lstrip("+~").split("."))
        if is_old_layout(path):
            out.add(".".join(path[:2]))
        elif path in RENAMED_FROM_030:
            out.add(".".join(path))
    return frozenset(out)


def _old_layout(old: list, new_written: bool, release: str) -> list[Diagnostic]:
    """What `release`'s fallback to skyrl-train's layout does with the overrides written in it."""
    if not old:
        return []
    if not new_written:
        first, name = old[0], ".".join(old[0].path)
        more = f" (as are {len(old) - 1} more engine keys)" if len(old) > 1 else ""
        return [diagnostic(
            "RLC122", name, f"`{name}` is in skyrl-train's layout{more}: {label(release)} reads that layout only "
            "from a source checkout, where its loader falls back to ppo_base_config.yaml, which the PyPI wheel does "
            "not ship; 0.3.0 dropped it", origin=first.origin, hint=f"write `{'.'.join(to_package_path(first.path))}`")]
    return [diagnostic(
        "RLC123", ".".join(o.path), f"`{'.'.join(o.path)}` is in skyrl-train's layout while other keys are in "
        f"generator.inference_engine: {label(release)} then reads the whole command line in the old layout, over "
        "skyrl-train's base config, whose engine values replace those written under generator.inference_engine",
        origin=o.origin, hint=f"write `{'.'.join(to_package_path(o.path))}`") for o in old]


def label(release: str) -> str:
    """A package release as messages name it: `skyrl 0.4.0` (against skyrl-train's `skyrl-train 0.4.0`)."""
    return f"skyrl {release.removeprefix('skyrl-')}"


@lru_cache(maxsize=None)
def unmodelled_keys() -> dict[str, dict]:
    """The package keys rlcfg does not model, by schema-layout dotted key: {"type", "default", "releases", and
    "changed": {release: {"type", "default"}} where a release changed them}."""
    return json.loads((Path(__file__).parent / "package_keys.json").read_text())


def unmodelled_at(release: str) -> dict[tuple, dict]:
    """`release`'s keys that rlcfg does not model: path (schema layout) → {"type", "default"}."""
    out = {}
    for key, fact in unmodelled_keys().items():
        if release in fact["releases"]:
            out[tuple(key.split("."))] = {**fact, **fact.get("changed", {}).get(release, {})}
    return out


# Unmodelled keys (by path prefix) that change nothing a run computes, so `rlcfg run` takes any value of them: where
# profiles, logged examples and tags go, and how often; allocator and data-loader process settings; whether Megatron
# LoRA reaches the engines merged or as an adapter they apply (merge_lora): the model they generate with is the same,
# and rlcfg hands them the merged weights either way, as it does lora_sync_path's adapter.
INERT_UNMODELLED = (("trainer", "policy", "torch_profiler_config"), ("trainer", "log_example_interval"),
                    ("trainer", "policy", "megatron_config", "lora_config", "merge_lora"),
                    ("trainer", "ref", "megatron_config", "lora_config", "merge_lora"),
                    ("trainer", "print_example_interval"), ("trainer", "num_logger_train_samples"),
                    ("trainer", "num_logger_eval_samples"), ("trainer", "tags"), ("trainer", "enable_ray_gpu_monitor"),
                    ("trainer", "use_expandable_segments"), ("generator", "use_expandable_segments"),
                    ("data", "dataloader", "num_workers"), ("data", "dataloader", "persistent_workers"))


@lru_cache(maxsize=None)
def release_extension(release: str) -> Any:
    """`release`'s keys that rlcfg does not model, as an extension of the schema: type-checked, and refused by
    `rlcfg run` at any value but the release's default (rlcfg.source.project), except the INERT_UNMODELLED ones."""
    from rlcfg.source.project import DeclaredKey, Extension

    def inert(path: tuple) -> bool:
        return any(path[:len(prefix)] == prefix for prefix in INERT_UNMODELLED)

    keys = tuple(DeclaredKey(path, fact["type"], None, inert(path), None, fact["default"], True)
                 for path, fact in unmodelled_at(release).items())
    return Extension(label(release), keys, source="release")


# Sections whose default factory builds the section with values other than its class's defaults. A command line
# that writes any key of one makes the loader build the section from what it wrote (build_nested_dataclass), so the
# keys it leaves out take the class's defaults: the critic's learning rate becomes OptimizerConfig's 1e-6, the
# evaluation temperature SamplingParams' 1.0. The same at every release (tests/inventory/skyrl/skyrl-*.json hold the
# factory values; the class defaults are read from the dataclasses).
SECTION_RESETS = {("trainer", "critic", "optimizer_config"): {"lr": 1e-6},
                  ("generator", "eval_sampling_params"): {"temperature": 1.0}}


def section_resets(tree: Any, release: str) -> list[Diagnostic]:
    """Apply SECTION_RESETS to a package document (in place) where the user writes part of such a section, with
    the warning that says so."""
    from rlcfg.diagnostics import Origin

    found = []
    for section, values in SECTION_RESETS.items():
        written = [p for p in tree.written_paths() if tuple(p[:len(section)]) == section and len(p) > len(section)]
        if not written:
            continue
        for key, value in values.items():
            path = (*section, key)
            if tree.written(path) or not tree.has(path) or tree.get(path) == value:
                continue
            before = tree.get(path)
            parent = tree.get(section)
            parent[key] = value
            tree.values[path] = Origin("derived")
            name = ".".join(path)
            found.append(diagnostic(
                "RLC304", name, f"`{name}` is {value!r}, not {before!r}: {label(release)} builds "
                f"`{'.'.join(section)}` from the keys the command line writes there "
                f"(`{'.'.join(written[0])}`), so the ones it leaves out take the section's own defaults",
                origin=tree.origin(written[0]), hint=f"write `{name}={before!r}` to keep the value the section has "
                                                      "when none of its keys is written"))
    return found


# make_config's keywords → where the class it takes sits in the config.
_MAKE_CONFIG = {"algorithm_cls": ("trainer", "algorithm"), "trainer_cls": ("trainer",), "generator_cls": ("generator",)}
_KINDS = {"int": "int", "float": "float", "bool": "bool", "str": "str", "list": "list", "List": "list",
          "tuple": "list", "Tuple": "list", "dict": "mapping", "Dict": "mapping"}


# SkyRL's DAPO example entrypoint as the package released it (skyrl 0.1.0; 0.2.0 to 0.4.0), by module_fingerprint:
# its trainer subtracts DAPO's soft overlong punishment from each reward with the two keys it adds, which rlcfg runs
# (the lowering's overlong penalty). A copy with any other code is an entrypoint rlcfg does not model.
# examples/train/algorithms/dapo/main_dapo_fully_async.py as released (0.2.0; 0.3.0 and 0.4.0): DAPO's punishment,
# the same formula on sequence-level rewards, in the fully-asynchronous trainer.
DAPO_FULLY_ASYNC_ENTRY_FINGERPRINTS = frozenset({"f0c3009ea9849ae1", "94f1d5e7c5dba557"})
# examples/train/tis_correction/main_tis_dapo.py as released (0.1.0; 0.2.0 to 0.4.0): DAPO's, with the buffer of
# DAPO_CONTEXT_BUFFER_FINGERPRINTS.
DAPO_ENTRY_FINGERPRINTS = frozenset({"79363b4908067abb", "e8ebce4ad5bb41de", "c7cb428a8c1e4a6f", "223fd64f23144e22",
                                     *DAPO_FULLY_ASYNC_ENTRY_FINGERPRINTS})
# examples/train/fully_async/main_fully_async.py as released (0.1.0 and 0.2.0; 0.3.0 and 0.4.0): it runs
# FullyAsyncRayPPOTrainer, whose rollouts run ahead of the trainer within trainer.fully_async's bound. An edited copy
# may run anything, so it is not recognised and its run is refused (trainer.fully_async.enabled).
# skyrl-train's examples/fully_async/main_fully_async.py (0.4.0 and its last commit) runs the same trainer as the
# package's 0.1.0 (skyrl_train/fully_async_trainer.py there).
FULLY_ASYNC_ENTRY_FINGERPRINTS = frozenset({"a66ed1f7f0ecd50f", "864de383feba7ba6", "4f9637598f4b3212",
                                            *DAPO_FULLY_ASYNC_ENTRY_FINGERPRINTS})
FULLY_ASYNC_ENTRY = "examples.train.fully_async.main_fully_async"
# examples/train/async/main_async.py (skyrl-train's examples/async/main_async.py) as released, with the module it
# imports AsyncRayPPOTrainer from (async_trainer.py) as released: SkyRL's one-step off-policy trainer. Its generator
# runs one step ahead of the trainer: step k+1's rollouts generate under the weights of update k−1 while update k
# trains, weights reach the engines between the two, and each epoch starts a new generator (its first step's
# rollouts are on-policy). Keyed by release family: skyrl-train (pre-0.1.0 to its last commit), the package's 0.1.0
# and 0.2.0, then 0.3.0 and 0.4.0.
ONE_STEP_ENTRY_FINGERPRINTS = frozenset({"50946743cca5518b", "d30e7c34672ecc02", "530cb45a00ffb939"})
ONE_STEP_TRAINER_FINGERPRINTS = frozenset({"43aab68e3fa1d2a2", "e39c385845006e4a", "859647988000b59b",
                                           "2feb8cd44a806b30", "244f2981663b152e", "d6e569c5866e36b6",
                                           "767c1c2ceaa948bd"})
ONE_STEP_ENTRY = "examples.train.async.main_async"
ONE_STEP_ASYNC = "one_step_async"  # CheckResult.entry_runs of that entrypoint
# Environments that an example's entry module registers, not skyrl-gym: the CheckResult.entry_runs of the entry
# module, as released, that registers each.
ENTRY_ENVIRONMENTS = {"multiply": "multiply_env", "llm_as_a_judge": "llm_judge_env"}
# The module of each, in the example's folder of the same name.
ENTRY_MODULES = {"multiply": "main_multiply", "llm_as_a_judge": "main_llm_judge"}
# examples/train/on_policy_distillation/main_on_policy_distill.py as released: its trainer's
# apply_reward_kl_penalty (run when use_kl_in_reward is on) makes each token's reward −(π_old − π_ref) log-probs, the
# reference model being the teacher (trainer.ref.model.path) and the environment's rewards dropped, and it registers
# the `no_op` estimator, whose advantages are those token rewards as they are. The `skyrl` package's copy (0.1.0 to
# 0.4.0) trains with the package's own importance_sampling loss (ON_POLICY_DISTILLATION); skyrl-train 0.3.0's also
# registers that loss itself, −r·A reduced as seq_mean_token_sum_norm whatever loss_reduction says
# (ON_POLICY_DISTILLATION_OWN_LOSS). skyrl-train 0.4.0's and its last commit's copy registers that loss under a name
# the release already registers, so its import stops the launch (ENTRY_FAILURES).
ON_POLICY_DISTILLATION = "on_policy_distillation"
ON_POLICY_DISTILLATION_OWN_LOSS = "on_policy_distillation_own_loss"
ON_POLICY_DISTILLATION_FINGERPRINTS = {"be84534d283d5bcc": ON_POLICY_DISTILLATION,
                                       "83d1ab400260aae9": ON_POLICY_DISTILLATION_OWN_LOSS}
DISTILLATION_RUNS = tuple(ON_POLICY_DISTILLATION_FINGERPRINTS.values())
# Entry modules as released whose import raises before any training: why, by fingerprint.
ENTRY_FAILURES = {"7af6b0134e3ae896": "it registers the policy loss `importance_sampling`, which skyrl-train 0.4.0 and "
                                      "its last commit register already, so PolicyLossRegistry.register raises "
                                      "ValueError when the module is imported"}
# Advantage estimators that an example's entry module registers (AdvantageEstimatorRegistry.register), with the
# CheckResult.entry_runs of the modules, as released, that register each: the custom-estimator example's
# `simple_baseline`, each response's summed token rewards less their mean over the batch, on every response token;
# the on-policy distillation example's `no_op`.
ENTRY_ESTIMATORS = {"simple_baseline": ("simple_baseline_estimator",), "no_op": DISTILLATION_RUNS}
# examples/train/multiply/main_multiply.py as released (skyrl-train's examples/multiply, every release; the package's,
# 0.1.0 to 0.4.0): main_base's loop with the example's `multiply` environment registered, from its env.py as released
# (MULTIPLY_ENV_FINGERPRINTS). CheckResult.entry_runs MULTIPLY_ENTRY_RUNS lets environment.env_class be `multiply`.
MULTIPLY_ENTRY_FINGERPRINTS = frozenset({"4af7ece6f1175912", "f8ab96dd30f756a0"})
MULTIPLY_ENV_FINGERPRINTS = frozenset({"2f9ef7038f23b954"})
MULTIPLY_ENTRY_RUNS = ENTRY_ENVIRONMENTS["multiply"]
# examples/train/llm_as_a_judge/main_llm_judge.py as released (skyrl-train's examples/llm_as_a_judge, 0.1.0 to its last
# commit; the package's, 0.1.0 to 0.4.0): main_base's loop with the example's `llm_as_a_judge` environment, from its
# llm_judge_env.py as released (the same judge at every release: an OpenAI-compatible model asked whether the response
# ends with the gold answer's `#### <number>`), in one turn.
LLM_JUDGE_ENTRY_FINGERPRINTS = frozenset({"3d8cf7d4de9f0722", "16582eb6130dda35"})
LLM_JUDGE_ENV_FINGERPRINTS = frozenset({"7f9c774fcaf756f5", "5dbc13fe69de2d85", "565ba0eff5322816"})
LLM_JUDGE_ENTRY_RUNS = ENTRY_ENVIRONMENTS["llm_as_a_judge"]
# examples/train/algorithms/custom_advantage_estimator/main_custom_adv_est.py as released (skyrl-train's
# examples/algorithms/..., 0.1.0 to its last commit; the package's, 0.1.0 to 0.4.0): main_base's loop with the
# `simple_baseline` estimator it declares and registers (ENTRY_ESTIMATORS).
SIMPLE_BASELINE_ENTRY_FINGERPRINTS = frozenset({"373651eda124487f", "1da5877f68e5e894"})
SIMPLE_BASELINE_ENTRY_RUNS = ENTRY_ESTIMATORS["simple_baseline"][0]


# Policy losses that an example's entry module registers in place of the release's (register_policy_loss), likewise.
ENTRY_POLICY_LOSSES = {"importance_sampling": (ON_POLICY_DISTILLATION_OWN_LOSS,)}


def entry_policy_loss(entry_runs: str | None) -> str | None:
    """The policy loss the launch's entry module, as released, registers (CheckResult.entry_runs), or None."""
    return _registered(ENTRY_POLICY_LOSSES, entry_runs)


def entry_estimator(entry_runs: str | None) -> str | None:
    """The advantage estimator the launch's entry module, as released, registers (CheckResult.entry_runs), or None."""
    return _registered(ENTRY_ESTIMATORS, entry_runs)


def _registered(table: dict[str, tuple[str, ...]], entry_runs: str | None) -> str | None:
    return next((name for name, runs in table.items() if entry_runs is not None and entry_runs in runs), None)


# The modules of SkyRL itself: an entrypoint among them runs main_base's loop (the launchers name the ones that do).
FRAMEWORK_MODULE = re.compile(r"(skyrl|skyrl_train)\.")
DAPO_ENTRY_KEYS = (("trainer", "algorithm", "overlong_buffer_len"),
                   ("trainer", "algorithm", "overlong_buffer_penalty_factor"))
# skyrl-train's examples/algorithms/dapo/main_dapo.py as released (0.1.0 to 0.3.0; 0.4.0 and its last commit), and
# its examples/tis_correction/main_tis_dapo.py (every release): the same punishment, read from
# `trainer.algorithm.overlong_buffer` (len, penalty_factor), which the launch adds with `+`.
SKYRL_TRAIN_DAPO_ENTRY_FINGERPRINTS = frozenset({"f416a5b88b3746d9", "7923351ac5fd0bb1"})
SKYRL_TRAIN_DAPO_SECTION = ("trainer", "algorithm", "overlong_buffer")
# The DAPO trainers whose buffer ends at the context limit less each prompt's length (generator.max_input_length +
# max_generate_length − the prompt's tokens) rather than at max_generate_length: skyrl-train's DAPO up to 0.3.0 and
# every release's TIS-DAPO example. CheckResult.entry_runs DAPO_CONTEXT_BUFFER tells the lowering.
DAPO_CONTEXT_BUFFER_FINGERPRINTS = frozenset({"7923351ac5fd0bb1", "c7cb428a8c1e4a6f", "223fd64f23144e22"})
DAPO_CONTEXT_BUFFER = "dapo_context_buffer"


def entry_extension(source: str | None, entry: str, read: Any, module: str) -> Any:
    """What a launch's entry module `module` (its file `entry`, whose text is `source`, None when it is not on this
    machine) changes: the keys it adds to the config, `X = make_config(algorithm_cls=C, ...)` with `C` a @dataclass
    subclass of the package's section class, or a @dataclass subclass of SkyRLTrainConfig itself (_subclassed_keys),
    declared in the module or imported from another module of the tree (`read(module, level)` gives its source, or
    None); and the loop it runs (entry_loop). None for SkyRL's own entrypoints. The module is parsed, never run."""
    import ast

    from rlcfg.source.project import DeclaredKey, Extension

    if FRAMEWORK_MODULE.match(module):
        return None

    def module_tree(text: str | None):
        try:
            return ast.parse(text) if text is not None else None
        except SyntaxError:
            return None

    tree = module_tree(source)
    if tree is None:
        why = "cannot be read here (no such file, or not text)" if source is None else "does not parse as Python"
        return Extension(entry, (), source="entry", refused=(
            f"`rlcfg run` refuses this launch: its entry module {module} {why}, so rlcfg cannot tell what its "
            "trainer does", "run rlcfg from the directory the script runs from (SkyRL's source tree), where the "
                            "module is"))
    fingerprint = module_fingerprint(tree)
    if fingerprint in ENTRY_FAILURES:
        return Extension(entry, (), source="entry", refused=(
            f"`rlcfg run` refuses this launch: its entry module {module}, as released, cannot start: "
            f"{ENTRY_FAILURES[fingerprint]}", "start the run with SkyRL's main_base, or with a release whose copy of "
                                              "the example starts"))
    runs = entry_loop(tree, fingerprint, read, module_tree)
    refused = None
    if runs == UNRECOGNISED_ENTRY:
        runs = None
        refused = (f"`rlcfg run` refuses this launch: rlcfg does not recognise the code of its entry module {module} "
                   "(it runs SkyRL's main_base and, as released, its DAPO, TIS-DAPO, fully-asynchronous, "
                   "one-step off-policy, multiply, LLM-as-a-judge, custom-estimator and on-policy distillation "
                   "examples), so its "
                   "trainer may do what rlcfg cannot tell",
                   "start the run with SkyRL's main_base, or with one of those examples as released")
    keys: list = []
    for call, home in _make_config_calls(tree, read, module_tree):
        for keyword in call.keywords:
            section = _MAKE_CONFIG.get(keyword.arg or "")
            if section is None or not isinstance(keyword.value, ast.Name):
                continue
            found = _class_named(home, keyword.value.id, read, module_tree)
            if found is None:
                continue
            for field in found.body:
                if not (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)):
                    continue
                default = _literal(field.value)
                keys.append(DeclaredKey((*section, field.target.id), _kind(field.annotation), None, False, None,
                                        default, default is not _UNREADABLE))
    keys.extend(_subclassed_keys(tree, read, module_tree))
    if fingerprint in SKYRL_TRAIN_DAPO_ENTRY_FINGERPRINTS:
        keys.append(DeclaredKey(SKYRL_TRAIN_DAPO_SECTION, "mapping", None, False, None, modelled=True))
    if not keys and runs is None and refused is None:
        return None
    if fingerprint in DAPO_ENTRY_FINGERPRINTS:
        from dataclasses import replace

        keys = [replace(k, modelled=True) if k.path in DAPO_ENTRY_KEYS else k for k in keys]
    return Extension(entry, tuple(keys), source="entry", runs=runs, refused=refused)


# entry_loop's word for an entry module whose code is not as SkyRL released it (an edited copy, a user's own): its
# trainer may do anything, so `rlcfg run` refuses it (Extension.refused).
UNRECOGNISED_ENTRY = "unrecognised"


def entry_loop(tree: Any, fingerprint: str, read: Any, parse: Any) -> str | None:
    """The loop an example's entry module (parsed: `tree`) runs, as rlcfg recognises it by its code: "fully_async"
    (FullyAsyncRayPPOTrainer), ONE_STEP_ASYNC (the one-step off-policy trainer, with the module it imports it from
    as released), MULTIPLY_ENTRY_RUNS, LLM_JUDGE_ENTRY_RUNS and SIMPLE_BASELINE_ENTRY_RUNS (main_base's loop with the
    multiply or LLM-as-a-judge example's environment, or the custom-estimator example's estimator, as released), the
    ON_POLICY_DISTILLATION_FINGERPRINTS
    loops (main_base's with the distillation example's trainer and estimator), None for main_base's own loop (the
    DAPO entrypoints' trainers change only the rewards, with the keys they read; DAPO_CONTEXT_BUFFER where their
    buffer ends at the context limit), or UNRECOGNISED_ENTRY."""
    if fingerprint in FULLY_ASYNC_ENTRY_FINGERPRINTS:
        return "fully_async"
    if fingerprint in DAPO_CONTEXT_BUFFER_FINGERPRINTS:
        return DAPO_CONTEXT_BUFFER
    if fingerprint in DAPO_ENTRY_FINGERPRINTS | SKYRL_TRAIN_DAPO_ENTRY_FINGERPRINTS:
        return None
    if fingerprint in ONE_STEP_ENTRY_FINGERPRINTS:
        _trainer, home = _class_and_home(tree, "AsyncRayPPOTrainer", read, parse)
        if home is not None and module_fingerprint(home) in ONE_STEP_TRAINER_FINGERPRINTS:
            return ONE_STEP_ASYNC
    if fingerprint in SIMPLE_BASELINE_ENTRY_FINGERPRINTS:
        return SIMPLE_BASELINE_ENTRY_RUNS
    if fingerprint in ON_POLICY_DISTILLATION_FINGERPRINTS:
        return ON_POLICY_DISTILLATION_FINGERPRINTS[fingerprint]
    if fingerprint in MULTIPLY_ENTRY_FINGERPRINTS:
        env = _registered_environment(tree, "multiply", read, parse)
        if env is not None and module_fingerprint(env) in MULTIPLY_ENV_FINGERPRINTS:
            return MULTIPLY_ENTRY_RUNS
    if fingerprint in LLM_JUDGE_ENTRY_FINGERPRINTS:
        env = _registered_environment(tree, "llm_as_a_judge", read, parse)
        if env is not None and module_fingerprint(env) in LLM_JUDGE_ENV_FINGERPRINTS:
            return LLM_JUDGE_ENTRY_RUNS
    return UNRECOGNISED_ENTRY


def _registered_environment(tree: Any, name: str, read: Any, parse: Any) -> Any:
    """The module (parsed) of the environment the entry module registers as `name` with skyrl-gym
    (`register(id=name, entry_point="module:Class")`), or None where it registers none or the module cannot be read."""
    import ast

    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and ast.unparse(node.func) == "register"):
            continue
        given = {k.arg: k.value.value for k in node.keywords
                 if isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)}
        if given.get("id") == name and ":" in given.get("entry_point", ""):
            text = read(given["entry_point"].split(":")[0], 0)
            return parse(text) if text is not None else None
    return None


def _make_config_calls(tree: Any, read: Any, parse: Any) -> list:
    """The `make_config(...)` calls that build the config the module runs, with the module (tree) each is in: the
    module's own, or, where it imports the config class (`from examples...main_dapo import DAPOConfig`), that
    module's."""
    import ast

    own = [(node.value, tree) for node in tree.body if isinstance(node, ast.Assign)
           and isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "make_config"]
    if own:
        return own
    used = {node.func.value.id for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute) and node.func.attr == "from_cli_overrides"
            and isinstance(node.func.value, ast.Name)}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and any((a.asname or a.name) in used for a in node.names):
            text = read(node.module, node.level)
            other = parse(text) if text is not None else None
            if other is None:
                continue
            names = {a.name for a in node.names if (a.asname or a.name) in used}
            return [(n.value, other) for n in other.body if isinstance(n, ast.Assign)
                    and isinstance(n.value, ast.Call) and ast.unparse(n.value.func) == "make_config"
                    and any(isinstance(t, ast.Name) and t.id in names for t in n.targets)]
    return []


_UNREADABLE = object()


def _literal(node: Any) -> Any:
    import ast

    if node is None:
        return _UNREADABLE
    try:
        return ast.literal_eval(node)
    except ValueError:
        return _UNREADABLE


def _kind(annotation: Any) -> str:
    import ast

    text = ast.unparse(annotation).replace("typing.", "")
    nullable = text.startswith("Optional[") or "None" in text.split("|")
    inner = text.removeprefix("Optional[").rstrip("]") if text.startswith("Optional[") else text.split("|")[0].strip()
    kind = _KINDS.get(inner.split("[")[0].strip(), "any")
    return f"{kind}|null" if nullable and kind != "any" else kind


def _class_named(tree: Any, name: str, read: Any, parse: Any) -> Any:
    return _class_and_home(tree, name, read, parse)[0]


def _class_and_home(tree: Any, name: str, read: Any, parse: Any) -> tuple[Any, Any]:
    """The class `name` means in the module `tree`, and the module that declares it: (None, None) if neither the
    module nor a module it imports the name from (read(module, level) gives its source) declares it."""
    import ast

    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node, tree
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and any((a.asname or a.name) == name for a in node.names):
            text = read(node.module, node.level)
            other = parse(text) if text is not None else None
            if other is not None:
                original = next(a.name for a in node.names if (a.asname or a.name) == name)
                found = next((n for n in other.body if isinstance(n, ast.ClassDef) and n.name == original), None)
                return (found, other) if found is not None else (None, None)
    return None, None


# The package's config classes an entry module may subclass (`class HarborSkyRLConfig(SkyRLTrainConfig)`), and where
# each one's keys are.
_SECTION_CLASSES = {"SkyRLTrainConfig": (), "TrainerConfig": ("trainer",), "GeneratorConfig": ("generator",),
                    "AlgorithmConfig": ("trainer", "algorithm")}


def _subclassed_keys(tree: Any, read: Any, parse: Any) -> list:
    """The keys the config class the module runs adds, where that class is a @dataclass subclass of the package's
    SkyRLTrainConfig (`HarborSkyRLConfig.from_cli_overrides(sys.argv[1:])`): its own fields, and the fields of the
    section subclasses it puts in place of the package's (`generator: HarborGeneratorConfig = ...`)."""
    import ast

    from rlcfg.source.project import DeclaredKey

    used = {node.func.value.id for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute) and node.func.attr == "from_cli_overrides"
            and isinstance(node.func.value, ast.Name)}
    keys: list = []

    def own_fields(cls: Any, home: Any, prefix: tuple, depth: int) -> None:
        for field in cls.body:
            if not (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)):
                continue
            annotation = field.annotation
            if depth < 2 and isinstance(annotation, ast.Name):
                inner, inner_home = _class_and_home(home, annotation.id, read, parse)
                bases = {ast.unparse(b) for b in inner.bases} if inner is not None else set()
                section = next((_SECTION_CLASSES[b] for b in bases if b in _SECTION_CLASSES), None)
                if section is not None:  # a subclass of a package section, in the section's place
                    own_fields(inner, inner_home, section, depth + 1)
                    continue
            default = _literal(field.value)
            keys.append(DeclaredKey((*prefix, field.target.id), _kind(annotation), None, False, None, default,
                                    default is not _UNREADABLE))

    for name in used:
        cls, home = _class_and_home(tree, name, read, parse)
        if cls is not None and "SkyRLTrainConfig" in {ast.unparse(b) for b in cls.bases}:
            own_fields(cls, home, (), 0)
    return keys
