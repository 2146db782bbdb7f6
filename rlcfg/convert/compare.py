"""Two Experiments compared field by field, as dotted paths.

Roles are matched by name (`roles.actor.optimizer.lr`), a rollout engine's settings by their key
(`roles.rollout.engine.gpu_memory_utilization`), and colocation groups as sets. The fields that only say which
dialect a value came from (the dialect, its variant, a role's config section and the keys that set its fields)
are not part of what runs, so they are never compared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any, Iterator

from rlcfg import run_limits
from rlcfg.ir import (KL, PROVENANCE, ROLE_PROVENANCE, AdvantageOptions, Algorithm, Experiment, FilterSpec,
                      KLController, PolicyOptions, RewardShaping, Role)

ABSENT = "<absent>"
SECTION = "<set>"  # a whole section (eval_sampling, say) that one Experiment has and the other lacks
# A reward clip this wide never binds (dialects that always clip write it to say "no clip").
NO_CLIP = 1.0e9
LOG_RATIO_CLAMP = 20.0


@dataclass(frozen=True)
class Difference:
    path: str
    source: Any  # ABSENT when the first Experiment lacks the field (a role only the second one has)
    target: Any


def flatten(experiment: Experiment) -> dict[str, Any]:
    """Every compared leaf of an Experiment by its dotted path."""
    out: dict[str, Any] = {}
    for f in fields(experiment):
        if f.name in PROVENANCE:
            continue
        value = getattr(experiment, f.name)
        if f.name == "roles":
            for role in value:
                out[f"roles.{role.name}"] = True  # the role exists
                for rf in fields(role):
                    if rf.name in ROLE_PROVENANCE or rf.name == "name":
                        continue
                    inner = getattr(role, rf.name)
                    if rf.name == "engine":
                        for key, setting in inner:
                            out[f"roles.{role.name}.engine.{key}"] = setting
                    else:
                        out.update(_leaves(f"roles.{role.name}.{rf.name}", inner))
        elif f.name == "colocation":
            out["colocation"] = tuple(sorted(tuple(sorted(group)) for group in value))
        else:
            out.update(_leaves(f.name, value))
    return out


def _leaves(prefix: str, value: Any) -> Iterator[tuple[str, Any]]:
    if is_dataclass(value) and not isinstance(value, type):
        for f in fields(value):
            yield from _leaves(f"{prefix}.{f.name}", getattr(value, f.name))
    else:
        yield prefix, value


def same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or a == b and type(a) is type(b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def effective(experiment: Experiment) -> Experiment:
    """The Experiment with every setting that changes nothing in the run, given the others, at its default: the
    knobs of a loss or estimator that is not used, a KL controller without a KL in the reward, the filters' limits
    without a filter, evaluation sampling without evaluation, a tokenizer that is the model's own, a one-node
    placement spelled out. Two configs that run the same experiment then compare equal however each dialect
    fills its inert fields."""
    a = experiment.algorithm
    kl = a.kl
    if kl.placement == "none":
        kl = KL()
    elif kl.placement == "loss":
        kl = replace(kl, controller=KLController(), reward_mode="sequence")
    options, defaults = a.policy_options, PolicyOptions()
    unused = {"gspo_form": a.policy_loss != "gspo", "sapo_tau_pos": a.policy_loss != "sapo",
              "sapo_tau_neg": a.policy_loss != "sapo", "clip_cov_ratio": a.policy_loss != "clip_cov",
              "clip_cov_lb": a.policy_loss != "clip_cov", "clip_cov_ub": a.policy_loss != "clip_cov",
              "kl_cov_ratio": a.policy_loss != "kl_cov", "kl_cov_coef": a.policy_loss != "kl_cov",
              "behav_imp_weight_cap": not options.decoupled, "tis_level": options.tis_cap is None}
    options = replace(options, **{k: getattr(defaults, k) for k, off in unused.items() if off})
    # The token ratio's own clamp is ±20 (None says "the formula's own"), and a cap of 1e9 never binds.
    if a.policy_loss != "gspo":
        if options.log_ratio_max == LOG_RATIO_CLAMP:
            options = replace(options, log_ratio_max=None)
        if options.log_ratio_min == -LOG_RATIO_CLAMP:
            options = replace(options, log_ratio_min=None)
    if options.loss_cap is not None and options.loss_cap >= NO_CLIP:
        options = replace(options, loss_cap=None)
    filters = a.filter_spec()
    if not (filters.zero_variance or filters.mean_range or filters.std_min is not None or filters.dynamic):
        filters = FilterSpec()
    elif filters.dynamic is None:
        base = FilterSpec()
        filters = replace(filters, max_draws=base.max_draws, min_replace_ratio=base.min_replace_ratio,
                          on_exhausted=base.on_exhausted)
    # Without a filter, the truncation mask or a sample mask every row keeps a token in the loss, so whether a
    # sequence mean counts the rows masked out entirely changes nothing.
    masks_rows = filters != FilterSpec() or a.mask_truncated or a.weighting.masks_samples
    adv = a.advantage_options
    if a.advantage not in ("gae", "reinforce++"):
        adv = replace(adv, whiten=AdvantageOptions().whiten)
    if not (a.advantage == "grpo" and a.normalize_advantage_std):
        adv = replace(adv, std=AdvantageOptions().std)
        if a.advantage != "maxrl":  # MaxRL divides by the group's mean + eps
            adv = replace(adv, eps=AdvantageOptions().eps)
    reward = a.reward
    if reward.overlong_penalty_length is None:
        reward = replace(reward, overlong_penalty_factor=RewardShaping().overlong_penalty_factor)
    if reward.clip is not None and reward.clip >= NO_CLIP:
        reward = replace(reward, clip=None)
    # A group baseline (GRPO, RLOO) subtracts any constant added to every score: without a clip or an overlong
    # penalty for it to meet, the bias changes nothing.
    if (a.advantage in ("grpo", "rloo") and reward.clip is None and reward.overlong_penalty_length is None
            and not adv.reward_norm_mean):
        reward = replace(reward, bias=0.0)
    # The steps commute unless a clip or an overlong penalty is among them, or both a scale and a bias are.
    if reward.clip is None and reward.overlong_penalty_length is None and (reward.scale == 1 or reward.bias == 0):
        reward = replace(reward, order=RewardShaping().order)
    algorithm = replace(a, kl=kl, policy_options=options, filters=filters, dynamic_sampling=False,
                        advantage_options=adv, reward=reward, count_masked_rows=a.count_masked_rows and masks_rows,
                        clip_ratio_c=a.clip_ratio_c if a.policy_loss == "dual_clip" else Algorithm().clip_ratio_c,
                        lam=a.lam if a.advantage == "gae" else Algorithm().lam,
                        value_clip=a.value_clip if experiment.role("critic") is not None else None)
    roles = tuple(_effective_role(r) for r in experiment.roles)
    sampling, eval_sampling = _effective_sampling(experiment.sampling), _effective_sampling(experiment.eval_sampling)
    evaluates = experiment.schedule.eval_interval is not None or experiment.schedule.eval_before_train
    schedule = experiment.schedule
    critic = experiment.role("critic")
    if (critic is None or not critic.trains
            or schedule.critic_samples_per_optimizer_step in (None, schedule.samples_per_step)):
        schedule = replace(schedule, critic_samples_per_optimizer_step=None)
    return replace(experiment, algorithm=algorithm, roles=roles, sampling=sampling, schedule=schedule,
                   eval_sampling=eval_sampling if evaluates else None)


def _effective_sampling(s: Any) -> Any:
    # Greedy decoding reads no top-p, top-k or min-p.
    if s is None or s.temperature != 0:
        return s
    return replace(s, top_p=1.0, top_k=-1, min_p=0.0)


def _effective_role(r: Role) -> Role:
    res = r.resources
    if res.nodes == 1 and res.gpus_per_node in (None, res.gpus):
        res = replace(res, nodes=None, gpus_per_node=None)
    if res.gpu_ids is not None and tuple(res.gpu_ids) == tuple(range(res.gpus)):
        res = replace(res, gpu_ids=None)  # the first GPUs: where a plan puts a role that names none
    if r.parallelism.fsdp_shard == res.gpus:
        r = replace(r, parallelism=replace(r.parallelism, fsdp_shard=None))  # sharded over the whole role
    if r.backend != "megatron" or r.model is None or not run_limits.routing_correction_family(r.model.path):
        r = replace(r, expert_bias="unmapped")  # only a DeepSeek-V3 model on megatron reads it
    model = r.model
    if model is not None and model.tokenizer == model.path:
        model = replace(model, tokenizer=None)
    optimizer = r.optimizer
    if optimizer is not None and optimizer.scheduler == "constant":
        optimizer = replace(optimizer, min_lr=0.0)
    engine = r.engine
    if r.name == "rollout" and res.gpus and "engines" not in dict(engine):
        per_engine = max(r.parallelism.tp * r.parallelism.pp, 1)
        engine = tuple(sorted(engine + (("engines", res.gpus // per_engine),)))
    return replace(r, resources=res, model=model, optimizer=optimizer, engine=engine,
                   max_tokens_per_micro_batch=r.max_tokens_per_micro_batch if r.sequence_packing else None,
                   micro_batch_size=r.micro_batch_size if r.optimizer is not None else None,
                   # A rollout engine batches its requests itself.
                   forward_micro_batch_size=None if r.name == "rollout" else r.forward_micro_batch_size)


def diff(first: Experiment, second: Experiment) -> list[Difference]:
    """The fields where two Experiments differ in what they run (see `effective`), in path order. A role one of
    them lacks is one difference (`roles.critic`), not one per field."""
    a, b = flatten(effective(first)), flatten(effective(second))
    missing_roles = {p for p in set(a) ^ set(b) if p.startswith("roles.") and p.count(".") == 1}
    # A whole section one side lacks (eval_sampling None) is one difference.
    absent = {p for p in set(a) | set(b) if (a.get(p, 0) is None) != (b.get(p, 0) is None)
              and any(q.startswith(p + ".") for q in set(a) | set(b))}
    out = []
    for path in sorted(set(a) | set(b)):
        if path.count(".") >= 2 and path.startswith("roles.") and ".".join(path.split(".")[:2]) in missing_roles:
            continue
        if any(path.startswith(p + ".") for p in absent):
            continue
        # GPU ids and a cluster size that the first Experiment leaves to the plan may be anything in the second;
        # what it names must stay.
        if (path.endswith(".resources.gpu_ids") or path.startswith("cluster.")) and a.get(path) is None:
            continue
        x, y = a.get(path, ABSENT), b.get(path, ABSENT)
        if path in absent:
            x, y = (SECTION if x is ABSENT else x), (SECTION if y is ABSENT else y)
        if not same(x, y):
            out.append(Difference(path, x, y))
    return out


def covered(path: str, prefixes: set[str] | frozenset[str]) -> bool:
    """Whether a path is one of `prefixes` or lies under one of them."""
    return any(path == p or path.startswith(p + ".") for p in prefixes)
