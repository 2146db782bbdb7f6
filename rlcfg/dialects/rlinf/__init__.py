"""The RLinf dialect: reasoning (math) and agent GRPO/PPO configs and embodied RL configs; Megatron or FSDP
training, SGLang or vLLM rollout.

Releases rlcfg claims (the names `--framework-version` takes), and how RLinf's tags map onto them:
  2025-08  the seed's layout (commit 298084c8b, 2025-08-19): `runner.task_type: math`, `rollout.model_dir`,
           `rollout.model_arch`, SGLang settings at the top of `rollout`.
  2025-10  after PR #128 (FSDP + vLLM, reward worker; read at d80c9195f, 2025-10-31): `task_type: reasoning`
           (RLinf refuses `math`), `rollout.sglang`/`rollout.vllm` sections (both required), still
           `rollout.model_dir`/`model_arch` and `sampling_params.use_greedy`.
  main     from PR #409 (2025-12-09) on, which covers tags v0.1, v0.2, v0.3 and the current main branch (read at
           a3816b596, 2026-08-22): `rollout.model.model_path`/`model_type`, `sampling_params.do_sample`, `reward`
           must be placed, FSDP needs `mixed_precision`, more task types (embodied_eval, reasoning_eval, sft,
           offline).
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

from typing import Any

from rlcfg.dialects.rlinf import derived
from rlcfg.dialects.rlinf.models import RLinfConfig
from rlcfg.dialects.rlinf.resolvers import RESOLVERS
from rlcfg.dialects.rlinf.rules import rules
from rlcfg.schema import entry
from rlcfg.schema.base import Dialect

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


class RLinfDialect(Dialect):
    name = ENTRY.name
    title = "RLinf"
    documents = "RLinf of mid-2025 (the `GRPO + Megatron-LM + SGLang` basic configuration guide)"
    override_grammar = ENTRY.override_grammar
    resolvers = RESOLVERS
    rules = rules
    releases = ENTRY.releases
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
            return "main", "`rollout.model.model_path` is the layout from PR #409 (2025-12, tags v0.1 and later) on"
        if _has(data, "algorithm", "sampling_params", "do_sample"):
            return "main", "`algorithm.sampling_params.do_sample` replaced `use_greedy` in 2025-12"
        if _has(data, "rollout", "model_dir") or _has(data, "rollout", "model_arch"):
            if task in ("embodied", "embodied_eval") and not _has(data, "actor", "fsdp_config") \
                    and _has(data, "cluster", "num_gpus_per_node"):
                return "2025-08", "an embodied config with `rollout.model_dir`, `cluster.num_gpus_per_node` and no " \
                                  "`actor.fsdp_config` is the 2025-08 layout"
            return "2025-10", "`rollout.model_dir` with `runner.task_type` " + str(task) + \
                " is the 2025-10 layout (2025-12 moved it to `rollout.model.model_path`)"
        if _has(data, "rollout", "sglang") or _has(data, "rollout", "vllm"):
            return "2025-10", "`rollout.sglang`/`rollout.vllm` sections without `rollout.model` are the 2025-10 layout"
        return "main", "no key tells the releases apart; assuming the newest"

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
