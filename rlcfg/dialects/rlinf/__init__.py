"""The RLinf dialect: reasoning (math) and agent GRPO/PPO configs and embodied RL configs; Megatron or FSDP
training, SGLang or vLLM rollout.

Releases rlcfg claims (the names `--framework-version` takes), and how RLinf's history maps onto them:
  2025-08  the seed's layout (commit 298084c8b, 2025-08-19): `runner.task_type: math`, `rollout.model_dir`,
           `rollout.model_arch`, SGLang settings at the top of `rollout`.
  2025-10  after PR #128 (FSDP + vLLM, reward worker; read at d80c9195f, 2025-10-31): `task_type: reasoning`
           (RLinf refuses `math`), `rollout.sglang`/`rollout.vllm` sections (both required), still
           `rollout.model_dir`/`model_arch` and `sampling_params.use_greedy`.
  v0.1, v0.2, v0.3
           the tags (2025-12-17, 2026-03-26, 2026-07-15), each read at its own commit: from PR #409 (2025-12-09) on,
           `rollout.model.model_path`/`model_type`, `sampling_params.do_sample`, `reward` must be placed, FSDP needs
           `mixed_precision`; each adds task types and model families (models.TASK_TYPES, MODEL_TYPES) and keys
           (fields.py says which release has which). v0.3 is the last with the `training_backend/` config group.
  main     the current branch (read at a3816b596, 2026-08-22), which renamed that group `hybrid_engines/`.
`infer_release` tells them apart by these keys.

RLinf has no schema: `validate_cfg` fills in the defaults its code needs and its workers read what they ask
for; a key nobody reads is silently dropped. rlcfg's unknown-key policy is therefore "drop": a key close to
one RLinf reads is an error (most likely a typo RLinf would lose), any other a warning. The keys RLinf reads are
the hand-modelled ones of models.py plus the inventoried ones (fields.py, the table tools/inventory/rlinf.py
writes) that inventoried.py binds to them.

Modules, each importing only those before it: placement (RLinf's placement language), resolvers, fields and
inventoried; models (the sections); derived (what RLinf computes from them, and the names rlcfg runs); rules,
lower (to the Experiment) and emit (for `convert`), which never import each other; and this module, the dialect.
"""

from __future__ import annotations

from typing import Any, Iterator

from rlcfg.dialects.rlinf import derived
from rlcfg.dialects.rlinf.fields import FIELDS
from rlcfg.dialects.rlinf.models import TAGGED, RLinfConfig
from rlcfg.dialects.rlinf.resolvers import RESOLVERS
from rlcfg.dialects.rlinf.rules import rules
from rlcfg.schema import entry
from rlcfg.schema.base import Dialect, key_paths

# Mappings whose keys are the user's own names (component groups, node groups), not keys RLinf reads by name.
OPEN_PATHS = (("hydra",), ("cluster", "component_placement"), ("cluster", "node_groups"))
NOT_MODELLED = {"sft": "RLinf SFT pipeline", "offline": "RLinf offline RL pipeline"}


def _get(data: Any, *path: str) -> Any:
    for part in path:
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


def _has(data: Any, *path: str) -> bool:
    for part in path[:-1]:
        if not isinstance(data, dict):
            return False
        data = data.get(part)
    return isinstance(data, dict) and path[-1] in data


ENTRY = entry("rlinf")


def _written_keys(data: Any) -> Iterator[str]:
    """The dotted keys a document writes, outside the mappings whose keys are the user's own names."""
    for path in key_paths(data):
        path = tuple(map(str, path))
        if not any(path[: len(open_path)] == open_path for open_path in OPEN_PATHS):
            yield ".".join(path)


def _tagged_release(data: dict, layout: str) -> tuple[str, str]:
    """Which of the tagged releases (v0.1 … main) a document of their layout is written for: the newest that has
    every key it writes that some of them lack. A key that contradicts the keys before it decides nothing."""
    candidates = TAGGED
    ruled_out_by = None  # the key that ruled the newer releases out
    for key in _written_keys(data):
        releases = FIELDS.get(key, (None, None, None))[2]
        if releases is None:
            continue
        kept = tuple(r for r in candidates if r in releases)
        if kept and kept[-1] != candidates[-1]:
            ruled_out_by = key
        candidates = kept or candidates
    newest = candidates[-1]
    if ruled_out_by is None:
        return newest, (f"{layout}; no key it writes rules out the newest, {newest} (pin an older tag with "
                        f"--framework-version)")
    has = f"RLinf {newest} only" if len(candidates) == 1 else f"RLinf {', '.join(candidates)}"
    return newest, f"{layout}; `{ruled_out_by}` is a key of {has}, not of the releases after {newest}"


class RLinfDialect(Dialect):
    name = ENTRY.name
    algorithm_keys = {
        "data.rollout_batch_size": "the prompts per step",
        "algorithm.group_size": "the group size",
        "actor.optim.*lr": "the learning rate",
        "actor.lr_sched.*lr": "the learning rate",
        "algorithm.adv_type": "the advantage",
        "algorithm.normalize_advantages": "the advantage",
        "algorithm.gamma": "the advantage",
        "algorithm.gae_lambda": "the advantage",
        "algorithm.loss_type": "the loss",
        "algorithm.loss_agg_func": "the loss",
        "algorithm.*clip*": "the loss",
        "algorithm.entropy_bonus": "the loss",
        "algorithm.kl_*": "the KL term",
        "algorithm.update_epoch": "the updates per step",
    }
    title = "RLinf"
    documents = "RLinf of mid-2025 (the `GRPO + Megatron-LM + SGLang` basic configuration guide)"
    override_grammar = ENTRY.override_grammar
    resolvers = RESOLVERS
    rules = rules
    releases = ENTRY.releases
    # The wheels on PyPI hold the tags' code, file for file.
    release_aliases = {"0.2": "v0.2", "0.3.0": "v0.3"}
    unknown_keys = "drop"
    ledger_complete = True

    def unknown_key_policy(self, path: tuple, release: str | None = None) -> str:
        if any(path[: len(open_path)] == open_path for open_path in OPEN_PATHS):
            return "open"
        return "drop"

    def infer_release(self, data: dict) -> tuple[str, str]:
        task = _get(data, "runner", "task_type")
        if task == "math":
            return "2025-08", "`runner.task_type: math` is the 2025-08 name of reasoning RL"
        if _has(data, "rollout", "model", "model_path") or _has(data, "rollout", "model", "model_type"):
            return _tagged_release(data, "`rollout.model.model_path` is the layout of the tags (v0.1 and later)")
        if _has(data, "algorithm", "sampling_params", "do_sample"):
            return _tagged_release(data, "`algorithm.sampling_params.do_sample` (the tags, v0.1 and later)")
        if _has(data, "rollout", "model_dir") or _has(data, "rollout", "model_arch"):
            if task in ("embodied", "embodied_eval") and not _has(data, "actor", "fsdp_config") \
                    and _has(data, "cluster", "num_gpus_per_node"):
                return "2025-08", "an embodied config with `rollout.model_dir`, `cluster.num_gpus_per_node` and no " \
                                  "`actor.fsdp_config` is the 2025-08 layout"
            return "2025-10", "`rollout.model_dir` with `runner.task_type` " + str(task) + \
                " is the 2025-10 layout (2025-12 moved it to `rollout.model.model_path`)"
        if _has(data, "rollout", "sglang") or _has(data, "rollout", "vllm"):
            return "2025-10", "`rollout.sglang`/`rollout.vllm` sections without `rollout.model` are the 2025-10 layout"
        return _tagged_release(data, "no layout key tells the releases apart")

    def pipeline(self, data: dict) -> str | None:
        task = _get(data, "runner", "task_type")
        if task in NOT_MODELLED:
            return NOT_MODELLED[task]
        if task in ("embodied", "embodied_eval") and "actor" not in data:
            # collect_real_data.py / teleoperation scripts: they drive the environment and never call validate_cfg
            return "RLinf data-collection (no policy is trained)"
        return None

    def variants(self) -> dict:
        return {"rlinf": RLinfConfig}

    def unrun_pipeline(self, config: RLinfConfig) -> tuple[str, str] | None:
        return derived.unrun_pipeline(config)

    def describe(self, config: RLinfConfig) -> str:
        return derived.describe(config)


DIALECT = RLinfDialect()
