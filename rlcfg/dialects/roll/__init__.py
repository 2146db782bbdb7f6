"""The ROLL dialect at `main` (alibaba/ROLL's default branch) and at the tags `v0.3.0`, `v0.2.1` (the last with the
DeepSpeed strategies, which v0.3.0 removed; configs written for v0.2.x are judged by it), `v0.1.3` (for v0.1.x) and
`v0.1.0`: the RLVR pipeline (`RLVRConfig`) and the agentic pipeline (`AgenticConfig`), both built on `PPOConfig` and
`BaseConfig`. Which release has each field, and the keys old releases had that rlcfg does not model (v0.1.3's
train/infer mismatch masks, ...), are one table generated from the inventories (releases.json;
tests/inventory/roll/<release>.json hold each release's keys).

A ROLL config is one flat YAML document: pipeline keys at the top level (batch sizes, lengths, the PPO/GRPO
algorithm, logging) and one section per worker (`actor_train`, `actor_infer`, `reference`, `critic`; RLVR adds the
`rewards` mapping and `validation`, the agentic pipeline `train_env_manager`, `val_env_manager` and the
`custom_envs` they run), each with `model_args`, `training_args`, `data_args`, `generating_args` and
`strategy_args`. `strategy_args.strategy_config` takes different keys for each `strategy_name`; the models
below are chosen by that name. `device_mapping` is a string in a small language (device_mapping.py),
which ROLL itself passes to Python's eval() and rlcfg parses with a grammar. ROLL's SFT, DPO and distill
pipelines are recognised (`pipeline_of`) but not modelled.

ROLL builds the config with dacite's default from_dict: unknown keys are dropped (rlcfg: `unknown_keys = "drop"`),
and a field typed without Optional refuses an explicit null even when it defaults to None (rlcfg types those
fields the same way and keeps their null defaults out of the merged document). Where ROLL rewrites a value
after loading (num_gpus_per_node, num_nodes, num_gpus_per_worker, max_new_tokens, model paths, ...), the rules
warn when the user set it.

Modules, each importing only those before it: device_mapping (the language of `device_mapping`); models and
models_agentic (the sections); derived (what ROLL computes from them, and the names rlcfg runs); rules, lower (to
the Experiment) and emit (for `convert`), which never import each other; and this module, the dialect.
"""

from __future__ import annotations

import types
from datetime import datetime
from functools import lru_cache
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from rlcfg.dialects.roll.derived import describe_config, unrun_pipeline
from rlcfg.dialects.roll.models import RollConfig, _BaseRoot
from rlcfg.dialects.roll.rules import RULES
from rlcfg.schema import entry
from rlcfg.schema.base import Dialect, Section, by_annotation, key_of, section_types
from rlcfg.source.tree import SourceTree, interpolation_targets

# How rlcfg tells ROLL's pipelines apart. ROLL itself never looks at the document for this: each example's run
# script starts one `examples/start_<pipeline>_pipeline.py`, and that script picks the config class dacite builds
# (RLVRConfig, AgenticConfig, DistillConfig, SFTConfig, DPOConfig). A document carries no name of its class, so
# rlcfg reads the keys that only one class defines (read from the classes at HEAD; tests/inventory/roll/main.json
# lists every class's keys). A document with none of them is an RLVR config, the pipeline of most examples and of
# the start script ROLL's docs lead with.
_PIPELINE_KEYS: tuple[tuple[str, str | None, frozenset[str]], ...] = (
    ("agentic", None, frozenset({"train_env_manager", "val_env_manager", "custom_envs", "env_monitor",
                                 "reward_normalization", "render_save_dir", "batch_adjust_mode"})),
    ("sft", "ROLL SFT pipeline", frozenset({"sft_train", "system_key", "query_key", "response_key"})),
    ("dpo", "ROLL DPO pipeline", frozenset({"chosen_key", "rejected_key", "ipo", "label_smoothing"})),
    ("distill", "ROLL distill pipeline", frozenset({"student", "student_pretrain", "teacher_pretrain",
                                                    "distill_loss_weight", "kd_objective", "kd_temperature",
                                                    "teacher_temperature", "logits_topk"})),
)


def pipeline_of(data: dict) -> str:
    """The ROLL pipeline a composed document is for: rlvr, agentic, sft, dpo or distill.

    The rollout-only start scripts (start_rlvr_rollout_pipeline.py, start_agentic_rollout_pipeline.py) load the
    RLVR and agentic config classes too; their examples give actor_train neither GPUs nor a strategy, which the
    rules read as "nothing trains" (derived.rollout_only) instead of as a missing device_mapping."""
    keys = set(data) if isinstance(data, dict) else set()
    return next((name for name, _title, marks in _PIPELINE_KEYS if keys & marks), "rlvr")


ENTRY = entry("roll")


class Roll(Dialect):
    name = ENTRY.name
    algorithm_keys = {
        "rollout_batch_size": "the prompts per step",
        "num_return_sequences_in_group": "the group size",
        "*.generating_args.num_return_sequences": "the group size",
        "*.training_args.learning_rate": "the learning rate",
        "adv_estimator": "the advantage",
        "whiten_advantages": "the advantage",
        "advantage_clip": "the advantage",
        "gamma": "the advantage",
        "lambd": "the advantage",
        "loss_agg_mode": "the loss",
        "pg_clip*": "the loss",
        "dual_clip_loss": "the loss",
        "use_policy_loss_type": "the loss",
        "entropy_loss_coef": "the loss",
        "init_kl_coef": "the KL term",
        "kl_*": "the KL term",
        "use_kl_loss": "the KL term",
        "add_token_level_kl": "the KL term",
        "ppo_epochs": "the updates per step",
    }
    title = "ROLL"
    documents = "ROLL (alibaba/ROLL) main: the config dataclasses of the RLVR and agentic pipelines"
    override_grammar = ENTRY.override_grammar
    rules = RULES
    releases = ENTRY.releases
    ledger_complete = True
    # ROLL builds its config with dacite's default (non-strict) from_dict, which silently drops keys no dataclass
    # declares: examples keep helper variables at the top level (read only through `${...}`) and redundant keys
    # such as `validation.eval_steps`. The front end then reports a near-miss of a known key as an error and any
    # other unknown key as a warning.
    unknown_keys = "drop"
    # Hydra's own resolver, which ROLL's start scripts get from Hydra (`model_name: ${exp_name}-${now:%Y%m%d}`).
    resolvers = {"now": lambda pattern="%Y-%m-%d_%H-%M-%S": datetime.now().strftime(pattern)}

    def variants(self) -> dict[str, type[Section]]:
        from rlcfg.dialects.roll.models_agentic import AgenticConfig

        return {"rlvr": RollConfig, "agentic": AgenticConfig}

    def variant_of(self, root: type[Section]) -> str | None:
        # an RLVR document does not import the agentic pipeline's sections to be told it is not agentic
        return "rlvr" if root is RollConfig else super().variant_of(root)

    def root(self, data: dict) -> type[Section]:
        # SFT, DPO and distill are not modelled: their documents are checked against the keys every pipeline
        # shares (BaseConfig), and the front end drops the rest with its single "not modelled" warning.
        pipeline = pipeline_of(data)
        if pipeline == "agentic":
            from rlcfg.dialects.roll.models_agentic import AgenticConfig

            return AgenticConfig
        return RollConfig if pipeline == "rlvr" else _BaseRoot

    def pipeline(self, data: dict) -> str | None:
        found = pipeline_of(data)
        return next((title for name, title, _marks in _PIPELINE_KEYS if name == found), None)

    def defaults(self, root: type[Section], release: str | None = None) -> dict:
        return _without_null_defaults(root, super().defaults(root, release))

    def compose(self, tree: SourceTree, base_dir: str, env: Any = None) -> tuple[SourceTree, list]:
        primary = tree.origin(()).file if tree.origin(()) is not None else None
        composed, found = super().compose(tree, base_dir, env)
        return _without_unused_fragment_keys(composed, primary), found

    def release_label(self, release: str) -> str:
        return f"ROLL {release}" + (" (DeepSpeed's last release)" if release == "v0.2.1" else "")

    def infer_release(self, data: dict) -> tuple[str | None, str]:
        """A DeepSpeed strategy narrows the releases to those up to v0.2.1 (v0.3.0 removed them). Among the rest,
        the release that lacks the fewest of the keys the document writes that some releases lack (the fields the
        release table tags, and the keys only old releases have), the newest of those."""
        from rlcfg.dialects.roll.models import DEEPSPEED_STRATEGIES, RELEASE_TABLE, WITH_DEEPSPEED
        from rlcfg.schema.base import field_at, field_releases, release_lacking_fewest, key_paths

        named = next(((path, value) for path, value in _strategy_names(data) if value in DEEPSPEED_STRATEGIES), None)
        candidates = WITH_DEEPSPEED if named is not None else self.releases
        root = self.root(data)
        unmodelled = RELEASE_TABLE["unmodelled"]
        having: dict[str, tuple] = {}  # the written keys only some releases have, and those releases
        for path in key_paths(data):
            key = ".".join(map(str, path))
            generic = ".".join(("rewards", "*", *map(str, path[2:]))) if path[0] == "rewards" and len(path) > 2 else key
            info = field_at(root, path)[0]
            releases = field_releases(info) if info is not None else None
            if info is None and (key in unmodelled or generic in unmodelled):
                releases = tuple(unmodelled.get(key, unmodelled.get(generic))["releases"])
            if releases:
                having[key] = releases
        chosen, deciding = release_lacking_fewest(candidates, having)
        why = ""
        if named is not None:
            path, value = named
            why = f"`{path}` is {value}, a DeepSpeed strategy, which ROLL removed in v0.3.0"
        if deciding is not None:
            why += ("; " if why else "") + f"`{deciding}` is a key of ROLL {', '.join(having[deciding])}"
        elif chosen == candidates[-1] and named is None:
            return chosen, "no key it writes rules out the newest, main (v0.3.0 differs from it by one Megatron key)"
        return chosen, f"{why}; judged by ROLL {chosen}, the newest release that has the most of the keys it writes"

    def release_keys(self, release: str | None) -> Any:
        """The keys of `release`'s config classes that rlcfg does not model (v0.1.3's train/infer mismatch masks,
        ...): type-checked, and refused by `rlcfg run` unless at their default."""
        return _release_extension(release) if release is not None else None

    def prepare(self, tree: SourceTree, release: str | None) -> list:
        """A worker's strategy_args without strategy_name gets the release's default strategy (deepspeed_train up to
        v0.2.1, fsdp2_train on main), as StrategyArguments does."""
        from rlcfg.diagnostics import Origin
        from rlcfg.dialects.roll.models import DEFAULT_STRATEGY

        default = DEFAULT_STRATEGY.get(release or "main")
        for path, node in _strategy_args(tree.data):
            if "strategy_name" not in node and default != DEFAULT_STRATEGY["main"]:
                node["strategy_name"] = default
                tree.values[(*path, "strategy_name")] = Origin("default")
        return []

    def describe(self, config: Any) -> str:
        return describe_config(config)

    def unrun_pipeline(self, config: Any) -> tuple[str, str] | None:
        return unrun_pipeline(config)


@lru_cache(maxsize=None)
def _release_extension(release: str) -> Any:
    from rlcfg.dialects.roll.models import RELEASE_TABLE
    from rlcfg.source.project import release_extension

    return release_extension(f"ROLL {release}", RELEASE_TABLE["unmodelled"], release)


def _strategy_args(data: Any, path: tuple = ()):
    """Every `strategy_args` mapping of a document (the workers', the reward workers' under `rewards`, ...)."""
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "strategy_args" and isinstance(value, dict):
                yield (*path, key), value
            elif isinstance(value, dict):
                yield from _strategy_args(value, (*path, key))


def _strategy_names(data: Any):
    for path, node in _strategy_args(data):
        value = node.get("strategy_name")
        if isinstance(value, str):
            yield ".".join(map(str, (*path, "strategy_name"))), value


def _without_unused_fragment_keys(tree: SourceTree, primary: str | None) -> SourceTree:
    """The composed document less the top-level keys a defaults fragment brought in that ROLL has no field for and
    no interpolation reads.

    ROLL's shared fragments (examples/config/traj_envs.yaml and friends, pulled in with `@_here_`) are libraries
    of helper values: every agentic example composes the whole file and uses the few entries it needs through
    `${custom_env.X}`. dacite drops the rest. Such a key is not the user's writing, so it is neither a typo to report
    (`custom_env` is one letter from `custom_envs`) nor worth a warning; it is removed before validation."""
    if not isinstance(tree.data, dict) or primary is None:
        return tree
    read = {path[0] for path in interpolation_targets(tree.data) if path}
    rlvr_keys = _root_keys(RollConfig)
    unused = [key for key in tree.data if key not in rlvr_keys and key not in read and key != "defaults"
              and (origin := tree.key_origin((key,)) or tree.origin((key,))) is not None
              and origin.kind == "file" and origin.file != primary]
    if unused:  # only then are the agentic pipeline's sections needed
        from rlcfg.dialects.roll.models_agentic import AgenticConfig

        agentic_keys = _root_keys(AgenticConfig)
        unused = [key for key in unused if key not in agentic_keys]
    if not unused:
        return tree
    tree = tree.copy()
    for key in unused:
        del tree.data[key]
    return tree


def _root_keys(root: type[Section]) -> set[str]:
    return {key_of(name, info) for name, info in root.model_fields.items()}


@by_annotation  # asked for every null default of every check
def _accepts_null(annotation: Any) -> bool:
    if annotation is type(None) or annotation is Any:
        return True
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        return any(_accepts_null(a) for a in get_args(annotation))
    if origin is Annotated:
        return _accepts_null(get_args(annotation)[0])
    if origin is Literal:
        return None in get_args(annotation)
    return False


def _without_null_defaults(model: type[Section], tree: dict) -> dict:
    """The defaults tree less the null defaults of fields whose type takes no null.

    Many of ROLL's fields default to None but are typed without Optional (`reward_clip: float = None`): dacite
    leaves an absent key at None, yet refuses an explicit null. rlcfg types those fields the same way, so the
    default must stay out of the merged document (pydantic then keeps the field's own None) and only a null the
    user writes is checked."""
    for name, info in model.model_fields.items():
        key = key_of(name, info)
        if key not in tree:
            continue
        if tree[key] is None and not _accepts_null(info.annotation):
            del tree[key]
            continue
        subs = section_types(info.annotation)
        if len(subs) == 1 and isinstance(tree[key], dict):
            _without_null_defaults(subs[0], tree[key])
    return tree


DIALECT = Roll()
