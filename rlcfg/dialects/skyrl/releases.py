"""Which skyrl-train release a SkyRL document is written for, told from the keys it sets.

Each field of the SkyRL schema names the releases whose `ppo_base_config.yaml` has it. A document fits the releases
that have every key it sets; rlcfg judges it by the newest of those. The keys of the reference document's layout
that v0.1.0 moved or renamed (`trainer.num_warmup_steps`, `trainer.algorithm.ppo_loss_type`, ...) are keys of the
pre-0.1.0 release. When no release has all the keys, the one that has the most wins (the newest on a tie), and the
keys it lacks are what the user gets told about.
"""

from __future__ import annotations

from typing import Any

from rlcfg.dialects.skyrl.package import (ACCEPTED_EVERYWHERE, OLD_LAYOUT_READ, is_old_layout, is_package,
                                          to_schema_path, unmodelled_keys)
from rlcfg.schema.base import Section, field_at, field_releases


def key_releases(root: type[Section], path: tuple, claimed: tuple[str, ...]) -> tuple[str, ...] | None:
    """The releases that have `path` (every mapping on the way included); None for a key the schema does not know,
    or one inside a mapping that takes any key."""
    have = set(claimed)
    for depth in range(1, len(path) + 1):
        info, owner = field_at(root, path[:depth])
        if info is None:
            # Below an open mapping (dict[str, Any]) every key is the mapping's; an unknown key says nothing.
            return tuple(r for r in claimed if r in have) if owner is None and depth > 1 else None
        found = field_releases(info)
        if found is not None:
            have &= set(found)
    return tuple(r for r in claimed if r in have)


def _leaves(data: Any, prefix: tuple = ()):
    if isinstance(data, dict) and data:
        for key, value in data.items():
            if isinstance(key, str):
                yield from _leaves(value, prefix + (key,))
    elif prefix:
        yield prefix


def _package_key_releases(root: type[Section], path: tuple, claimed: tuple[str, ...]) -> tuple[str, ...] | None:
    """key_releases for a path in the `skyrl` package's layout (or skyrl-train's, which only its first releases
    read), with the package's keys that the schema does not model."""
    if tuple(path) in ACCEPTED_EVERYWHERE:
        return tuple(r for r in claimed if is_package(r))
    if is_old_layout(path):
        found = key_releases(root, path, claimed)
        return tuple(r for r in found if not is_package(r) or r in OLD_LAYOUT_READ) if found is not None else None
    schema_path = to_schema_path(path, claimed[-1])
    found = key_releases(root, schema_path, claimed)
    if found is None:
        fact = unmodelled_keys().get(".".join(schema_path))
        return tuple(r for r in claimed if r in fact["releases"]) if fact else None
    return found


def releases_of_keys(root: type[Section], data: dict, claimed: tuple[str, ...]) -> tuple[str, str]:
    newest = claimed[-1]
    if not isinstance(data, dict):
        return newest, "no key tells the releases apart; assuming the newest"
    telling: dict[tuple, tuple[str, ...]] = {}
    for path in _leaves({k: v for k, v in data.items() if k != "defaults"}):
        found = _package_key_releases(root, path, claimed) if any(map(is_package, claimed)) else \
            key_releases(root, path, claimed)
        if found and len(found) < len(claimed):
            telling[path] = found
    if not telling:
        return newest, "no key tells the releases apart; assuming the newest"
    fits = [r for r in claimed if all(r in found for found in telling.values())]
    if fits:
        keys = sorted(telling, key=lambda p: (len(telling[p]), p))[:2]
        span = fits[0] if len(fits) == 1 else f"{fits[0]} to {fits[-1]}"
        package = "skyrl" if is_package(fits[0]) else "skyrl-train"
        span = span.replace("skyrl-", "")
        return fits[-1], (f"the keys fit {package} {span}, e.g. `{'.'.join(keys[0])}`"
                          + (f" and `{'.'.join(keys[1])}`" if len(keys) > 1 else ""))
    # No release has every key: the one with the most of them, the newest on a tie.
    score = {r: sum(r in found for found in telling.values()) for r in claimed}
    best = max(reversed(claimed), key=lambda r: score[r])
    return best, (f"no release has all of its keys; {best} has the most of them "
                  f"({score[best]} of {len(telling)} release-specific keys)")


# The defaults of ppo_base_config.yaml that differ from the schema's (the seed's) defaults, release by release
# (facts from tests/inventory/skyrl/<release>.json). A key the user does not set takes its release's value.
_RECOMPUTE_OFF = {"trainer.policy.megatron_config.transformer_config_kwargs.recompute_granularity": None,
                  "trainer.policy.megatron_config.transformer_config_kwargs.recompute_method": None,
                  "trainer.policy.megatron_config.transformer_config_kwargs.recompute_num_layers": None}
_NEWER = {"generator.enforce_eager": True, "generator.inference_engine_tensor_parallel_size": 1,
          "generator.rope_scaling": "${trainer.rope_scaling}", "generator.rope_theta": "${trainer.rope_theta}",
          "trainer.placement.critic_num_gpus_per_node": 1, "trainer.placement.policy_num_gpus_per_node": 1,
          "trainer.placement.ref_num_gpus_per_node": 1, "trainer.ref.fsdp_config.cpu_offload": False}
RELEASE_DEFAULTS: dict[str, dict[str, Any]] = {
    # Before v0.1.0: the reference document's defaults, and for the keys v0.1.0 added, what the code then did without
    # them (every loss a mean per sequence, then over the batch).
    "pre-0.1.0": {"generator.batched": True, "generator.eval_sampling_params.temperature": 1.0,
                  "generator.use_conversation_multi_turn": False, "trainer.algorithm.use_kl_estimator_k3": True,
                  "trainer.algorithm.ppo_loss_type": "regular", "trainer.algorithm.init_kl_coef": 0.0,
                  "trainer.num_warmup_steps": 0, "trainer.algorithm.loss_reduction": "sequence_mean"},
    "0.1.0": {},
    "0.2.0": {**_RECOMPUTE_OFF, "trainer.ref.fsdp_config.cpu_offload": False},
    "0.3.0": {**_RECOMPUTE_OFF, "trainer.ref.fsdp_config.cpu_offload": False, "generator.enforce_eager": True,
              "generator.rope_scaling": "${trainer.rope_scaling}", "generator.rope_theta": "${trainer.rope_theta}"},
    "0.4.0": {**_NEWER, "generator.sampling_params.logprobs": 0, "generator.eval_sampling_params.logprobs": 0},
    "main": {**_NEWER, "generator.sampling_params.logprobs": 1, "generator.eval_sampling_params.logprobs": 1},
}
# The `skyrl` package's dataclass defaults where they differ from skyrl-train's last commit (facts from
# tests/inventory/skyrl/skyrl-<release>.json; a dataclass's None that __post_init__ fills as the base config's
# interpolation did is the same default). Its remote URLs default to none; from 0.3.0 `fsdp` is FSDP2 and the
# default strategy, and the engines run CUDA graphs.
_PACKAGE = {**RELEASE_DEFAULTS["main"],
            "trainer.ref.megatron_config.expert_tensor_parallel_size": None}
_PACKAGE_030 = {**_PACKAGE, "trainer.strategy": "fsdp", "generator.enforce_eager": False,
                "generator.enable_ray_prometheus_stats": True}
RELEASE_DEFAULTS.update({
    "skyrl-0.1.0": {**_PACKAGE, "generator.remote_inference_engine_urls": []},
    "skyrl-0.2.0": {**_PACKAGE, "generator.remote_inference_engine_urls": []},
    "skyrl-0.3.0": _PACKAGE_030,
    "skyrl-0.4.0": {**_PACKAGE_030, "trainer.algorithm.cispo.cispo_eps_clip_low": 1.0,
                    "trainer.algorithm.cispo.cispo_eps_clip_high": 4.0},
})


def release_defaults(tree: dict, release: str | None) -> dict:
    """The schema's defaults tree with the values of `release`'s base config where they differ (in place)."""
    for dotted_key, value in RELEASE_DEFAULTS.get(release or "", {}).items():
        node = tree
        *parents, last = dotted_key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return tree


def effective(cfg: Any, ctx: Any, dotted_key: str) -> Any:
    """The value skyrl-train sees for a key: the user's when set, else the judged release's default."""
    if not ctx.is_set(dotted_key):
        defaults = RELEASE_DEFAULTS.get(getattr(ctx, "release", None) or "", {})
        if dotted_key in defaults:
            return defaults[dotted_key]
    node = cfg
    for part in dotted_key.split("."):
        node = getattr(node, part)
    return node
