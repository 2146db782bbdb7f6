"""AReaL 0.3.x, 0.4.x, 0.5.x and 1.0.x (seed 004 documents v0.3.4, generated from its config dataclasses).

AReaL merges the YAML into `OmegaConf.structured(<ExperimentConfig>)`, so unknown keys and wrong types fail
at load and `"???"` values must be given. One document is one of three experiment kinds, each its own
dataclass (`SFTConfig`, `RWConfig`, `GRPOConfig`); rlcfg tells them apart from the document (see
`AReaLDialect.root`).

Releases. rlcfg claims AReaL 0.3, 0.4, 0.5 and 1.0 (read at v0.3.4, v0.4.1, v0.5.3 and v1.0.4; tests/inventory/areal
holds every field of each, produced by tools/inventory/areal.py). The seed documents v0.3.4: a top-level
`allocation_mode` (`sglang.d4p1t1+d4p1t1`), `async_training`, `actor.group_size`, `actor.behav_imp_weight_cap`,
`launcher`, and `model:` for SFT. 0.4 dropped `async_training` and each engine's `backend`, changed the optimizer's
defaults (lr 1e-3); 0.5 dropped `actor.group_size` and `launcher`, made `ref` and `critic` optional, added the
single-controller scheduler and defaults weight updates to xccl. AReaL 1.0 moved GPU allocation into per-engine
`backend` fields (`actor.backend: fsdp:d4p1t1`, mandatory), added rejection sampling, SAPO, Megatron/Archon sections
and renamed SFT's `model:` to `actor:`. One schema holds them all: which releases have each field, each release's
own defaults and the keys rlcfg does not model are one table (releases.json, written by the inventory tool from the
inventories), and a document is judged by exactly one release (`infer_release`, or `--framework-version`): a key of
another release is then the error AReaL's loader raises (RLC113). The schema's own defaults are the seed's (v0.3.4).

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

from functools import lru_cache
from typing import Any

from rlcfg.dialects.areal.models import (RELEASE_TABLE, SCRIPT_KEYS, SECTIONS_ALWAYS_BUILT, GRPOConfig, RWConfig,
                                         SFTConfig)
from rlcfg.dialects.areal.rules import RULES
from rlcfg.schema import entry
from rlcfg.schema.base import (Dialect, Section, defaults_tree, field_at, field_releases, release_lacking_fewest,
                               section_types, key_paths)
from rlcfg.patterns import lazy

_LOAD_EXPR_CONFIG = lazy(r"load_expr_config\(\s*[\w.\[\]:]+\s*,\s*(\w+)\s*\)")

# Engine sections whose `backend` holds the 1.0 `name:dims` form.
_ENGINES = ("actor", "ref", "critic", "teacher", "rollout", "model")


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


@lru_cache(maxsize=None)
def _release_extension(release: str) -> Any:
    from rlcfg.source.project import release_extension

    return release_extension(f"AReaL {release}", RELEASE_TABLE["unmodelled"], release)


class AReaLDialect(Dialect):
    name = ENTRY.name
    algorithm_keys = {
        "train_dataset.batch_size": "the prompts per step",
        "gconfig.n_samples": "the group size",
        "*.optimizer.lr": "the learning rate",
        "actor.eps_clip*": "the loss",
        "actor.c_clip": "the loss",
        "actor.use_decoupled_loss": "the loss",
        "actor.use_sapo_loss": "the loss",
        "actor.kl_ctl": "the KL term",
        "actor.kl_estimator": "the KL term",
        "actor.adv_norm.*": "the advantage",
        "actor.reward_norm.*": "the advantage",
        "actor.gae_lambda": "the advantage",
        "actor.group_size": "the advantage",
    }
    title = "AReaL"
    documents = "AReaL v0.3.4, v0.4.1, v0.5.3 and v1.0.4 (AReaL's reference documents v0.3.4)"
    override_grammar = ENTRY.override_grammar
    rules = RULES
    # AReaL 0.3.x to 0.5.x place engines by allocation_mode, 1.0.x by each engine's backend.
    releases = ENTRY.releases
    # load_expr_config merges the YAML into OmegaConf.structured(<dataclass>): an unknown key stops it.
    unknown_keys = "error"
    converts_strings = True  # load_expr_config merges into OmegaConf.structured: typed nodes convert strings
    # Every key declares what `rlcfg run` does with it (the fates in models.py and the rule areal/run-ledger).
    ledger_complete = True

    def defaults(self, root: type[Section], release: str | None = None) -> dict:
        """The documented (seed, v0.3.4) defaults; for a later release's document, that release's own defaults where
        they changed (RELEASE_TABLE, read from its config classes)."""
        tree = defaults_tree(root)
        if release in RELEASE_TABLE["defaults"]:
            _overlay(root, tree, RELEASE_TABLE["defaults"][release])
        return tree

    def infer_release(self, data: dict) -> tuple[str, str]:
        """A 1.0 `name:dims` engine backend decides at once (0.3's `backend` held a bare name, 0.4 and 0.5 have
        none). Otherwise the release that lacks the fewest of the keys the document writes that some releases lack,
        the newest of those; placing the engines by `allocation_mode` alone counts as a key 1.0 lacks (it requires
        each engine's `backend`)."""
        newest = self.releases[-1]
        if not isinstance(data, dict):
            return newest, "no key tells the releases apart; assuming the newest"
        for engine in _ENGINES:
            section = data.get(engine)
            backend = section.get("backend") if isinstance(section, dict) else None
            if isinstance(backend, str) and ":" in backend and "${" not in backend:
                return "1.0", f"`{engine}.backend` uses the 1.0 form {backend!r}"
        root = self.root(data)
        having: dict[str, tuple] = {}  # the written keys only some releases have, and those releases
        for path in key_paths(data):
            info, _owner = field_at(root, path)
            releases = field_releases(info) if info is not None else None
            if releases:
                having[".".join(map(str, path))] = releases
        if isinstance(data.get("allocation_mode"), str) and data["allocation_mode"] and \
                not any(isinstance(data.get(e), dict) and data[e].get("backend") for e in _ENGINES):
            having["allocation_mode"] = tuple(r for r in self.releases if r != "1.0")
        chosen, deciding = release_lacking_fewest(self.releases, having)
        if deciding is None:
            lacks = [key for key, have in having.items() if chosen not in have]
            return chosen, (f"no key it writes rules out the newest, {chosen}" if not lacks else
                            "the newest release, which has the most of the keys it writes") + \
                " (pin another with --framework-version)"
        if deciding == "allocation_mode":
            why = "`allocation_mode` places it, with no engine `backend` (which AReaL 1.0 requires)"
        else:
            why = f"`{deciding}` is a key of AReaL {', '.join(having[deciding])}"
        return chosen, f"{why}; judged by AReaL {chosen}, the newest release that has the most of the keys it writes"

    def release_keys(self, release: str | None) -> Any:
        """The keys of `release`'s config classes that rlcfg does not model (the 0.5 OpenAI proxy settings, ...):
        type-checked, and refused by `rlcfg run` at any value but their default."""
        if release is None:
            return None
        return _release_extension(release)

    def entry_config(self, source: str) -> str | None:
        # every AReaL entry script loads its config with load_expr_config(argv, SomeConfig)
        found = _LOAD_EXPR_CONFIG.search(source)
        return found.group(1) if found else None

    def entry_script(self, source: str | None, script: str) -> Any:
        from rlcfg.dialects.areal.entries import entry_extension

        return entry_extension(source, script)

    def entry_findings(self, entry: tuple[str, str], config: Any, release: str | None, origin: Any) -> list:
        from rlcfg.diagnostics import diagnostic

        name, script = entry
        if name == "PPOConfig" and release in SECTIONS_ALWAYS_BUILT and getattr(config, "critic", None) is None:
            # 0.3's and 0.4's PPOConfig have a critic of their own, whose experiment_name and trial_name are
            # MISSING; from 0.5 the critic is optional (GRPOConfig is PPOConfig there).
            return [diagnostic(
                "RLC203", "critic",
                f"`critic` is not set, but {script} loads AReaL {release}'s PPOConfig, whose critic section is required "
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
