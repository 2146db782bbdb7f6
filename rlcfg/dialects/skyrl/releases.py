"""Which skyrl-train release a SkyRL document is written for, told from the keys it sets.

Each field of the SkyRL schema names the releases whose `ppo_base_config.yaml` has it. A document fits the releases
that have every key it sets; rlcfg judges it by the newest of those. Keys of the seed's snapshot that no claimed
release has (`trainer.num_warmup_steps`, `trainer.algorithm.ppo_loss_type`) point at 0.1.0, the closest one, where
they are then reported with their newer names. When no release has all the keys, the one that has the most wins
(the newest on a tie), and the keys it lacks are what the user gets told about.
"""

from __future__ import annotations

from typing import Any

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


# Keys of the seed's snapshot (before v0.1.0) that no claimed release has: they say the file follows the oldest layout.
SEED_KEYS = {("trainer", "num_warmup_steps"), ("trainer", "algorithm", "ppo_loss_type"),
             ("trainer", "algorithm", "kl_target"), ("trainer", "algorithm", "init_kl_coef")}


def releases_of_keys(root: type[Section], data: dict, claimed: tuple[str, ...]) -> tuple[str, str]:
    newest = claimed[-1]
    if not isinstance(data, dict):
        return newest, "no key tells the releases apart; assuming the newest"
    telling: dict[tuple, tuple[str, ...]] = {}
    seed: list[tuple] = []
    for path in _leaves({k: v for k, v in data.items() if k != "defaults"}):
        if path in SEED_KEYS:
            seed.append(path)
            continue
        found = key_releases(root, path, claimed)
        if found is None or len(found) == len(claimed):
            continue
        if not found:
            seed.append(path)
        else:
            telling[path] = found
    if not telling and not seed:
        return newest, "no key tells the releases apart; assuming the newest"
    fits = [r for r in claimed if all(r in found for found in telling.values())]
    if fits:
        if seed and claimed[0] in fits:
            return claimed[0], (f"`{'.'.join(seed[0])}` is a key of the pre-0.1.0 layout; judged by the oldest "
                                "claimed release")
        keys = sorted(telling, key=lambda p: (len(telling[p]), p))[:2]
        span = fits[0] if len(fits) == 1 else f"{fits[0]} to {fits[-1]}"
        return fits[-1], (f"the keys fit skyrl-train {span}, e.g. `{'.'.join(keys[0])}`"
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
    "0.1.0": {},
    "0.2.0": {**_RECOMPUTE_OFF, "trainer.ref.fsdp_config.cpu_offload": False},
    "0.3.0": {**_RECOMPUTE_OFF, "trainer.ref.fsdp_config.cpu_offload": False, "generator.enforce_eager": True,
              "generator.rope_scaling": "${trainer.rope_scaling}", "generator.rope_theta": "${trainer.rope_theta}"},
    "0.4.0": {**_NEWER, "generator.sampling_params.logprobs": 0, "generator.eval_sampling_params.logprobs": 0},
    "main": {**_NEWER, "generator.sampling_params.logprobs": 1, "generator.eval_sampling_params.logprobs": 1},
}


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
