"""AReaL v0.3.x and 1.0.x (seed 004 documents v0.3.4, generated from its config dataclasses).

AReaL merges the YAML into `OmegaConf.structured(<ExperimentConfig>)`, so unknown keys and wrong types fail
at load and `"???"` values must be given. One document is one of three experiment kinds, each its own
dataclass (`SFTConfig`, `RWConfig`, `GRPOConfig`); rlcfg tells them apart from the document (see
`AReaLDialect.root`).

Releases. rlcfg claims AReaL v0.3.x and 1.0.x (read at v0.3.4 and v1.0.4; tests/inventory/areal holds every field
of both, produced by tools/inventory/areal.py). The seed documents v0.3.4: a top-level `allocation_mode`
(`sglang.d4p1t1+d4p1t1`), `async_training`, `actor.group_size`, `actor.behav_imp_weight_cap`, `launcher`, and
`model:` for SFT. AReaL 1.0 moved GPU allocation into per-engine `backend` fields (`actor.backend: fsdp:d4p1t1`,
`rollout.backend: sglang:d4p1t1`), added scheduling, rejection sampling, SAPO, vLLM, Megatron/Archon sections and
renamed SFT's `model:` to `actor:`. One schema holds both; a field that exists in only one release says so with
`releases=`, and a document is judged by exactly one release (`infer_release`, or `--framework-version`): a key of
the other release is then the error AReaL's loader raises (RLC113). Where the releases' defaults differ, the
documented default is the seed's (v0.3.4), and keys that only exist in 1.0 take 1.0's defaults.

Pipelines. GRPO/PPO (`GRPOConfig`, which also covers 1.0's rollout-only `PPOConfig` configs), SFT and reward-model
training are modelled. AReaL 1.0's DPO and the example scripts' own config subclasses (AgentRLConfig,
TIRGRPOConfig, ...; they add top-level keys) are named by `AReaLDialect.pipeline` and get the single "not
modelled" warning.

Choices. AReaL attaches `choices` to many fields but only re-checks a few in `__post_init__`; the rest are
documentation (research/validation-rules.md, section 5). rlcfg enforces all of them as `Literal` types.

Modules, each importing only those before it: allocation (the language of `allocation_mode` and the 1.0 `backend`
strings); models (the sections); derived (what AReaL computes from them); rules, lower (to the Experiment) and emit
(for `convert`), which never import each other; and this module, the dialect.
"""

import re
from typing import Any, Iterator

from rlcfg.dialects.areal.models import SCRIPT_KEYS, GRPOConfig, RWConfig, SFTConfig
from rlcfg.dialects.areal.rules import RULES
from rlcfg.schema import entry
from rlcfg.schema.base import Dialect, Section, defaults_tree, field_at, field_releases, section_types
from rlcfg.patterns import lazy
from rlcfg.source.tree import split_dotted

_LOAD_EXPR_CONFIG = lazy(r"load_expr_config\(\s*[\w.\[\]:]+\s*,\s*(\w+)\s*\)")

# Engine sections whose `backend` holds the 1.0 `name:dims` form.
_ENGINES = ("actor", "ref", "critic", "teacher", "rollout", "model")


def _user_paths(data: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every key path the document writes (list items are skipped: their fields are judged like the list's)."""
    if isinstance(data, dict):
        for key, value in data.items():
            path = prefix + (key,)
            yield path
            yield from _user_paths(value, path)


# AReaL 1.0's defaults where they differ from the documented (v0.3.4) ones, per section class (facts read from
# areal/api/cli_args.py at v1.0.4; tests/inventory/areal/1.0.json). A section class applies to its subclasses.
V1_DEFAULTS: dict[str, dict[str, Any]] = {
    "TrainEngineConfig": {"gradient_checkpointing": False, "weight_update_mode": "xccl"},
    "GenerationHyperparameters": {"max_tokens": 32768},
    "InferenceEngineConfig": {"setup_timeout": 300.0},
    "SGLangConfig": {"disable_radix_cache": True, "max_loaded_loras": 8},
    "ClusterSpecConfig": {"fileroot": "/tmp/areal/"},
}


def _overlay(model: type[Section], tree: dict, table: dict[str, dict[str, Any]]) -> None:
    """Replace, in a defaults tree of `model`, the values `table` gives for the model's classes."""
    for cls in reversed(model.__mro__):
        for key, value in table.get(cls.__name__, {}).items():
            if key in tree:
                tree[key] = value
    for name, info in model.model_fields.items():
        key = info.alias or name
        subs = section_types(info.annotation)
        if subs and isinstance(tree.get(key), dict):
            _overlay(subs[0], tree[key], table)


ENTRY = entry("areal")


class AReaLDialect(Dialect):
    name = ENTRY.name
    title = "AReaL"
    documents = "AReaL v0.3.4 and v1.0.4 (AReaL's reference documents v0.3.4)"
    override_grammar = ENTRY.override_grammar
    rules = RULES
    # AReaL v0.3.x and 1.0.x: the two layouts differ (allocation_mode and async_training vs per-engine backends).
    releases = ENTRY.releases
    # load_expr_config merges the YAML into OmegaConf.structured(<dataclass>): an unknown key stops it.
    unknown_keys = "error"
    # Every key declares what `rlcfg run` does with it (the fates in models.py and the rule areal/run-ledger).
    ledger_complete = True

    def defaults(self, root: type[Section], release: str | None = None) -> dict:
        """The documented (seed, v0.3.4) defaults; for a 1.0 document, 1.0's own defaults where they changed."""
        tree = defaults_tree(root)
        if release == "1.0":
            _overlay(root, tree, V1_DEFAULTS)
        return tree

    def infer_release(self, data: dict) -> tuple[str, str]:
        """Judge by the keys only one release has. A 1.0 `name:dims` engine backend decides at once (v0.3's
        `backend` held a bare name); otherwise the release whose own keys the document writes more of; with none,
        a v0.3 `allocation_mode` (`sglang.d4p1t1+...`) says 0.3; else the newest."""
        if not isinstance(data, dict):
            return "1.0", "no key tells the releases apart; assuming the newest"
        for engine in _ENGINES:
            section = data.get(engine)
            backend = section.get("backend") if isinstance(section, dict) else None
            if isinstance(backend, str) and ":" in backend and "${" not in backend:
                return "1.0", f"`{engine}.backend` uses the 1.0 form {backend!r}"
        root = self.root(data)
        only: dict[str, list[str]] = {"0.3": [], "1.0": []}
        for path in _user_paths(data):
            info, _owner = field_at(root, path)
            releases = field_releases(info) if info is not None else None
            if releases is not None and len(releases) == 1 and releases[0] in only:
                if not any(path[: len(p)] == p for p in map(split_dotted, only[releases[0]])):
                    only[releases[0]].append(".".join(map(str, path)))
        old, new = only["0.3"], only["1.0"]
        if old or new:
            release = "0.3" if len(old) > len(new) else "1.0"
            keys = old if release == "0.3" else new
            shown = ", ".join(f"`{k}`" for k in keys[:3]) + (" ..." if len(keys) > 3 else "")
            return release, f"it sets {shown}, which only AReaL {release} has"
        allocation = data.get("allocation_mode")
        if isinstance(allocation, str) and re.match(r"\s*(sglang|vllm)\.", allocation):
            return "0.3", f"`allocation_mode` uses the v0.3 form {allocation!r}"
        return "1.0", "no key tells the releases apart; assuming the newest"

    def entry_config(self, source: str) -> str | None:
        # every AReaL entry script loads its config with load_expr_config(argv, SomeConfig)
        found = _LOAD_EXPR_CONFIG.search(source)
        return found.group(1) if found else None

    def entry_findings(self, entry: tuple[str, str], config: Any, release: str | None, origin: Any) -> list:
        from rlcfg.diagnostics import diagnostic

        name, script = entry
        if name == "PPOConfig" and release == "0.3" and getattr(config, "critic", None) is None:
            # 0.3's PPOConfig has a critic of its own, whose experiment_name and trial_name are MISSING; 1.0's
            # critic is optional (GRPOConfig is PPOConfig there).
            return [diagnostic(
                "RLC203", "critic",
                f"`critic` is not set, but {script} loads AReaL 0.3's PPOConfig, whose critic section is required "
                "(critic.experiment_name and critic.trial_name have no default): AReaL stops at load",
                origin=origin, hint="add a `critic` section (path, experiment_name, trial_name, optimizer), or run "
                                    "the config with a GRPO entry script (examples/math/gsm8k_grpo.py)")]
        return []

    def pipeline(self, data: dict) -> str | None:
        # Example scripts that subclass the experiment config (AgentRLConfig, TIRGRPOConfig, ...) add top-level keys.
        added = [key for key in data if key in SCRIPT_KEYS]
        if added:
            return (f"AReaL example-script {SCRIPT_KEYS[added[0]]} (its own config class adds "
                    f"{', '.join(f'`{k}`' for k in added[:3])})")
        # DPO (1.0's DPOConfig): its engines carry DPO's own `beta` / `loss_type`.
        for engine in ("actor", "ref"):
            section = data.get(engine)
            if isinstance(section, dict) and ("beta" in section or "loss_type" in section):
                return "AReaL DPO"
        return None

    def variants(self) -> dict[str, type[Section]]:
        return {"grpo": GRPOConfig, "sft": SFTConfig, "rw": RWConfig}

    def root(self, data: dict) -> type[Section]:
        # AReaL picks the dataclass in the training script (gsm8k_grpo.py loads GRPOConfig, ...), not from the
        # YAML, so rlcfg infers it from what only one kind has:
        # - GRPO: any of the RL sections (rollout, gconfig, eval_gconfig, ref, critic, teacher) or
        #   async_training. An `actor` alone is not enough: AReaL 1.0's SFT config names its model `actor`.
        # - Reward model: the trained model is a critic (`model.is_critic` / `actor.is_critic`), which RWConfig
        #   requires, or the training data is reward-model data (`train_dataset.type: rw`).
        # - SFT: everything else.
        if not isinstance(data, dict):
            return SFTConfig
        # v0.3's SFT/RW name their model `model`, which no RL config has, and SFT/RW data (`train_dataset.type`
        # sft or rw) without a rollout engine is no RL config either: such a document is SFT/RW even with a stray
        # RL section (which is then the unknown key AReaL reports).
        dataset = data.get("train_dataset")
        sft_data = isinstance(dataset, dict) and dataset.get("type") in ("sft", "rw") and "rollout" not in data
        sft_layout = (isinstance(data.get("model"), dict) and "actor" not in data) or sft_data
        if not sft_layout and any(key in data for key in ("rollout", "gconfig", "eval_gconfig", "ref", "critic",
                                                          "teacher", "async_training", "dynamic_bs")):
            return GRPOConfig
        for key in ("model", "actor"):
            engine = data.get(key)
            if isinstance(engine, dict) and engine.get("is_critic") is True:
                return RWConfig
        if isinstance(dataset, dict) and dataset.get("type") == "rw":
            return RWConfig
        return SFTConfig

    def describe(self, config: Any) -> str:
        from rlcfg.dialects.areal.derived import describe

        return describe(config)


DIALECT = AReaLDialect()
