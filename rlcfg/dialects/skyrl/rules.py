"""Cross-field rules of the SkyRL dialect (research/validation-rules.md, SK-1 .. SK-51).

Each rule restates one check of skyrl-train's `validate_cfg` / `validate_batch_sizes` /
`validate_generator_cfg` (or a runtime failure those miss, such as the empty batch of SK-11b), reading the
validated config. Where skyrl-train rewrites a value on its own, the rule warns (RLC304). A check that changed
between releases reads the judged release (`ctx.release`): the logprobs limits, the built-in policy losses, and the
release's own defaults (releases.RELEASE_DEFAULTS) for keys the user left alone. Where rlcfg rejects what
skyrl-train accepts at load and fails on only at start-up, the message says so (DESIGN.md, rule 5).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterator

from rlcfg import run_limits
from rlcfg.diagnostics import Constraint, Severity, close_matches, plural
from rlcfg.dialects.skyrl.derived import (ADVANTAGE_ESTIMATORS, ADVANTAGE_ESTIMATORS_BY_RELEASE,
                                          ADVANTAGE_ESTIMATORS_RUN, DATASET_STRING_ITERATED, ADVANTAGE_ESTIMATORS_PRE,
                                          ENVIRONMENT_REWARDS, EPISODE_ENVIRONMENTS, EPISODE_ESTIMATORS,
                                          EPISODE_RELEASES, EPISODE_STOP_CHECKS, FINAL_OBSERVATION_KEPT,
                                          LOSS_REDUCTIONS,
                                          LOSS_REDUCTIONS_BY_RELEASE, LOSSES_WITH_OLD_LOGPROBS, MINI_BATCH_REDUCTION,
                                          loggers, loss_normalization, overlong_buffer,
                                          POLICY_LOSSES, POLICY_LOSSES_BY_RELEASE, POLICY_LOSSES_RUN, SCHEDULERS,
                                          SGLANG_KWARGS, TIS_LOSSES_UNTIL_030, VLLM_KWARGS, critic_in_use,
                                          critic_trained, dp_size, lora_module_keys, lora_modules, model_parallel,
                                          policy_loss, ref_in_use, rollout_gpus, world, HONORED_TRANSFORMER_KWARGS,
                                          ROUTING_CORRECTION_KWARGS, routing_correction_read, transformer_kwargs)
from rlcfg.dialects.skyrl.package import (ENTRY_ENVIRONMENTS, ENTRY_MODULES, FULLY_ASYNC_ENTRY, OLD_LAYOUT_READ, ONE_STEP_ASYNC,
                                          ONE_STEP_ENTRY, PACKAGE_FROM_030, PACKAGE_RELEASES, entry_estimator,
                                          entry_policy_loss, is_package, label)
from rlcfg.schema.base import Finding, RuleContext, RuleSet

RULES = RuleSet()


def _v(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f"`{value}`"
    return str(value)


# ---- derived quantities -------------------------------------------------------------------------------------


def _rollout_text(cfg: Any) -> str:
    g = cfg.generator
    parts = [f"num_inference_engines {g.num_inference_engines}", f"TP {g.inference_engine_tensor_parallel_size}"]
    if g.inference_engine_pipeline_parallel_size != 1:
        parts.append(f"PP {g.inference_engine_pipeline_parallel_size}")
    if g.inference_engine_data_parallel_size != 1:
        parts.append(f"DP {g.inference_engine_data_parallel_size}")
    return " × ".join(parts)


def _placement_text(cfg: Any, role: str) -> str:
    p = cfg.trainer.placement
    return (f"{plural(getattr(p, f'{role}_num_nodes'), 'node')} × "
            f"{plural(getattr(p, f'{role}_num_gpus_per_node'), 'GPU')} = {world(cfg, role)}")


def lcm_dp(cfg: Any) -> int:
    size = dp_size(cfg, "policy")
    if ref_in_use(cfg):
        size = math.lcm(size, max(dp_size(cfg, "ref"), 1))
    return max(size, 1)


# ---- batch sizes (validate_batch_sizes) ---------------------------------------------------------------------


@RULES.rule("skyrl/policy-mini-batch", "RLC300",
            "trainer.policy_mini_batch_size must not exceed trainer.train_batch_size and must divide it.",
            keys=["trainer.train_batch_size", "trainer.policy_mini_batch_size"], also=("RLC201",))
def policy_mini_batch(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    t = cfg.trainer
    if t.policy_mini_batch_size <= 0:
        yield ctx.error("RLC201", "trainer.policy_mini_batch_size",
                        f"`trainer.policy_mini_batch_size` must be > 0, got {t.policy_mini_batch_size}",
                        hint="it counts prompts per policy optimizer step, e.g. train_batch_size / 4")
    elif t.policy_mini_batch_size > t.train_batch_size:
        yield ctx.error("RLC300", "trainer.policy_mini_batch_size",
                        f"`trainer.policy_mini_batch_size` ({t.policy_mini_batch_size}) is larger than "
                        f"`trainer.train_batch_size` ({t.train_batch_size})",
                        hint=f"set policy_mini_batch_size to at most {t.train_batch_size}",
                        related=["trainer.train_batch_size"])
    elif t.train_batch_size % t.policy_mini_batch_size:
        yield ctx.error("RLC300", "trainer.train_batch_size",
                        f"`trainer.train_batch_size` ({t.train_batch_size}) is not a multiple of "
                        f"`trainer.policy_mini_batch_size` ({t.policy_mini_batch_size})",
                        hint=_mini_hint(cfg, "policy", "policy_mini_batch_size"),
                        related=["trainer.policy_mini_batch_size"])


def _divisor_near(total: int, wanted: int, fits: Callable[[int], bool] = lambda d: True) -> int | None:
    """The divisor of `total` that `fits` closest to `wanted` (the larger one on a tie), in O(sqrt(total)); None
    when no divisor fits."""
    divisors = set()
    for d in range(1, math.isqrt(total) + 1):
        if total % d == 0:
            divisors.update((d, total // d))
    return min((d for d in divisors if fits(d)), key=lambda d: (abs(d - wanted), -d), default=None)


def _fitting_mini(cfg: Any, role: str, mini_key: str) -> int | None:
    """The divisor of train_batch_size nearest the role's mini batch that also passes the role's per-GPU rules (a
    whole number of samples per DP rank, a multiple of the micro batch): the mini batch a hint can offer without
    its value raising the next error. None when no divisor does."""
    t = cfg.trainer
    n, mbs, dp = cfg.generator.n_samples_per_prompt, t.micro_train_batch_size_per_gpu, dp_size(cfg, role)
    if n <= 0 or mbs <= 0 or dp <= 0:  # reported by their own rules; the divisor alone is all there is to offer
        return _divisor_near(t.train_batch_size, getattr(t, mini_key))
    return _divisor_near(t.train_batch_size, getattr(t, mini_key),
                         lambda mini: mini * n % dp == 0 and (mini * n // dp) % mbs == 0)


def _no_fitting_mini(cfg: Any, role: str) -> str:
    t = cfg.trainer
    return (f"no mini batch that divides train_batch_size {t.train_batch_size} gives each of the {role}'s "
            f"{dp_size(cfg, role)} DP ranks a multiple of the micro batch {t.micro_train_batch_size_per_gpu} "
            f"(with n_samples_per_prompt {cfg.generator.n_samples_per_prompt}): change train_batch_size too")


def _mini_hint(cfg: Any, role: str, mini_key: str) -> str:
    """The hint of a mini batch that does not divide train_batch_size."""
    fitting = _fitting_mini(cfg, role, mini_key)
    if fitting is None:
        return _no_fitting_mini(cfg, role)
    return f"use a{' critic' if role == 'critic' else ''} mini batch that divides {cfg.trainer.train_batch_size}, " \
           f"e.g. {fitting}"


def _micro_hint(cfg: Any, role: str, mini_key: str) -> str:
    """The micro-batch hint, for the mini batch the user will have once the mini-batch error is fixed too: a hint
    about the per-GPU share of a mini batch that does not divide train_batch_size would be stale after that fix."""
    t = cfg.trainer
    train_batch, mini, mbs = t.train_batch_size, getattr(t, mini_key), t.micro_train_batch_size_per_gpu
    n, dp = cfg.generator.n_samples_per_prompt, dp_size(cfg, role)
    if train_batch % mini == 0:
        per_gpu = mini * n // dp
        return f"use a micro batch that divides {per_gpu}, e.g. {_divisor_near(per_gpu, mbs)}"
    fixed_mini = _fitting_mini(cfg, role, mini_key)
    if fixed_mini is None:
        return _no_fitting_mini(cfg, role)
    return (f"with {mini_key} {fixed_mini} (a divisor of train_batch_size {train_batch}) each GPU gets "
            f"{fixed_mini * n // dp}, which the micro batch {mbs} divides")


def _per_gpu_checks(cfg: Any, ctx: RuleContext, role: str, mini_key: str) -> Iterator[Finding]:
    """SK-6..8 for one model: per-GPU mini batch > 0, divisible by the micro batch, dividing the per-GPU batch."""
    t = cfg.trainer
    n = cfg.generator.n_samples_per_prompt
    mini = getattr(t, mini_key)
    mbs = t.micro_train_batch_size_per_gpu
    if mini <= 0 or mbs <= 0:
        return
    dp = dp_size(cfg, role)
    if dp <= 0:
        return
    _, split = model_parallel(cfg, role)
    dp_text = f"{role} DP size {dp} ({_placement_text(cfg, role)} GPUs / {split})"
    mini_per_gpu = mini * n // dp
    mini_path = f"trainer.{mini_key}"
    if mini_per_gpu == 0:
        yield ctx.error("RLC300", mini_path,
                        f"`{mini_path}` × `generator.n_samples_per_prompt` ({mini} × {n} = {mini * n} samples) is less "
                        f"than the {dp_text}: each GPU would get 0 samples per mini batch",
                        hint=f"raise {mini_key} to at least {math.ceil(dp / n)}",
                        related=["generator.n_samples_per_prompt", f"trainer.placement.{role}_num_gpus_per_node"])
        return
    if mini_per_gpu % mbs:
        yield ctx.error("RLC300", "trainer.micro_train_batch_size_per_gpu",
                        f"the {role}'s per-GPU mini batch ({mini_key} {mini} × n_samples_per_prompt {n} // DP {dp} = "
                        f"{mini_per_gpu}) is not a multiple of `trainer.micro_train_batch_size_per_gpu` ({mbs})",
                        hint=_micro_hint(cfg, role, mini_key),
                        related=[mini_path, "generator.n_samples_per_prompt"])
    train_per_gpu = t.train_batch_size * n // dp
    if train_per_gpu % mini_per_gpu and t.train_batch_size % mini == 0:
        yield ctx.error("RLC300", mini_path,
                        f"the {role}'s per-GPU train batch (train_batch_size {t.train_batch_size} × {n} // DP {dp} = "
                        f"{train_per_gpu}) is not a multiple of its per-GPU mini batch ({mini} × {n} // {dp} = "
                        f"{mini_per_gpu}); the last mini batch would be incomplete",
                        hint=f"make {mini_key} × n_samples_per_prompt a multiple of the DP size {dp}",
                        related=["trainer.train_batch_size", "generator.n_samples_per_prompt"])


@RULES.rule("skyrl/policy-per-gpu-batches", "RLC300",
            "Per-GPU policy batches: mini batch × n_samples_per_prompt / DP must be > 0, a multiple of "
            "micro_train_batch_size_per_gpu, and divide the per-GPU train batch.",
            keys=["trainer.policy_mini_batch_size", "trainer.micro_train_batch_size_per_gpu",
                  "generator.n_samples_per_prompt", "trainer.placement.policy_num_gpus_per_node"])
def policy_per_gpu(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    yield from _per_gpu_checks(cfg, ctx, "policy", "policy_mini_batch_size")


@RULES.rule("skyrl/critic-batches", "RLC300",
            "With a critic: critic_mini_batch_size > 0, at most train_batch_size, dividing it, and the per-GPU rules "
            "of the policy applied to the critic's DP size.",
            keys=["trainer.critic_mini_batch_size", "trainer.critic.model.path", "trainer.placement.critic_num_nodes"],
            also=("RLC201",))
def critic_batches(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    if not critic_in_use(cfg):
        return
    t = cfg.trainer
    if t.critic_mini_batch_size <= 0:
        yield ctx.error("RLC201", "trainer.critic_mini_batch_size",
                        f"`trainer.critic_mini_batch_size` must be > 0 when a critic is used, got "
                        f"{t.critic_mini_batch_size}", hint="it counts prompts per critic optimizer step",
                        related=["trainer.critic.model.path"])
        return
    if t.critic_mini_batch_size > t.train_batch_size:
        yield ctx.error("RLC300", "trainer.critic_mini_batch_size",
                        f"`trainer.critic_mini_batch_size` ({t.critic_mini_batch_size}) is larger than "
                        f"`trainer.train_batch_size` ({t.train_batch_size})",
                        hint=f"set critic_mini_batch_size to at most {t.train_batch_size}",
                        related=["trainer.train_batch_size"])
        return
    if t.train_batch_size % t.critic_mini_batch_size:
        yield ctx.error("RLC300", "trainer.critic_mini_batch_size",
                        f"`trainer.train_batch_size` ({t.train_batch_size}) is not a multiple of "
                        f"`trainer.critic_mini_batch_size` ({t.critic_mini_batch_size})",
                        hint=_mini_hint(cfg, "critic", "critic_mini_batch_size"),
                        related=["trainer.train_batch_size"])
        return
    yield from _per_gpu_checks(cfg, ctx, "critic", "critic_mini_batch_size")


@RULES.rule("skyrl/train-batch-vs-dp", "RLC300",
            "train_batch_size × n_samples_per_prompt must reach the lcm of the policy's and reference model's DP "
            "sizes (no claimed release, pre-0.1.0 included, compares train_batch_size alone with them).",
            keys=["trainer.train_batch_size", "generator.n_samples_per_prompt"])
def train_batch_vs_dp(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    t = cfg.trainer
    n = cfg.generator.n_samples_per_prompt
    lcm = lcm_dp(cfg)
    what = f"lcm of the policy DP {dp_size(cfg, 'policy')}" + (
        f" and ref DP {dp_size(cfg, 'ref')}" if ref_in_use(cfg) else "") + f" = {lcm}"
    if t.train_batch_size * n < lcm:
        yield ctx.error("RLC300", "trainer.train_batch_size",
                        f"`trainer.train_batch_size` × `generator.n_samples_per_prompt` ({t.train_batch_size} × {n} = "
                        f"{t.train_batch_size * n}) is smaller than the {what}",
                        hint=f"raise train_batch_size to at least {math.ceil(lcm / n)}, or use fewer GPUs",
                        related=["generator.n_samples_per_prompt"])


@RULES.rule("skyrl/empty-batch-after-tail-drop", "RLC300",
            "The trainer keeps prompts in strides of lcm_dp / gcd(lcm_dp, n_samples_per_prompt); a train batch smaller "
            "than one stride becomes empty, a batch that is not a multiple of it silently loses prompts (skyrl-train "
            "issue #1609).",
            keys=["trainer.train_batch_size", "generator.n_samples_per_prompt"], also=("RLC304",))
def tail_drop(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    t = cfg.trainer
    n = cfg.generator.n_samples_per_prompt
    lcm = lcm_dp(cfg)
    stride = lcm // math.gcd(lcm, n)
    if t.train_batch_size * n < lcm:
        return  # already reported by skyrl/train-batch-vs-dp
    if t.train_batch_size < stride:
        yield ctx.error("RLC300", "trainer.train_batch_size",
                        f"`trainer.train_batch_size` ({t.train_batch_size}) is smaller than the stride in which the "
                        f"trainer keeps prompts (lcm of DP sizes {lcm} / gcd({lcm}, n_samples_per_prompt {n}) = "
                        f"{stride}): every batch would be cut to 0 prompts and the run fails after start-up",
                        hint=f"use a train_batch_size that is a multiple of {stride}",
                        related=["generator.n_samples_per_prompt"])
    elif t.train_batch_size % stride:
        kept = t.train_batch_size // stride * stride
        yield ctx.warning("RLC304", "trainer.train_batch_size",
                          f"skyrl-train trims each batch to a multiple of {stride} prompts (lcm of DP sizes {lcm} / "
                          f"gcd({lcm}, n_samples_per_prompt {n})): `trainer.train_batch_size` {t.train_batch_size} "
                          f"trains on {kept} prompts per step",
                          hint=f"use a train_batch_size that is a multiple of {stride}",
                          related=["generator.n_samples_per_prompt"])


@RULES.rule("skyrl/parallel-size-divides", "RLC400",
            "Each model's GPU count must be a multiple of its sequence-parallel size (or, with Megatron, of TP × PP × "
            "CP) and of its fsdp_size.",
            keys=["trainer.policy.sequence_parallel_size", "trainer.policy.megatron_config",
                  "trainer.policy.fsdp_config.fsdp_size"])
def parallel_divides(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    t = cfg.trainer
    roles = ["policy"] + (["ref"] if ref_in_use(cfg) else []) + (["critic"] if critic_in_use(cfg) else [])
    for role in roles:
        size, text = model_parallel(cfg, role)
        gpus = world(cfg, role)
        megatron = t.strategy == "megatron" and role in ("policy", "ref")
        key = (f"trainer.{role}.megatron_config.tensor_model_parallel_size" if megatron
               else f"trainer.{role}.sequence_parallel_size")
        if size > 0 and gpus % size:
            yield ctx.error("RLC400", key,
                            f"the {role}'s {gpus} GPUs ({_placement_text(cfg, role)}) are not a multiple of {text}",
                            hint=f"use a parallel size that divides {gpus}, or give the {role} a multiple of {size} GPUs",
                            related=[f"trainer.placement.{role}_num_gpus_per_node"])
        fsdp_size = getattr(t, role).fsdp_config.fsdp_size
        if t.strategy in ("fsdp", "fsdp2") and fsdp_size > 0 and gpus % fsdp_size:
            yield ctx.error("RLC400", f"trainer.{role}.fsdp_config.fsdp_size",
                            f"`trainer.{role}.fsdp_config.fsdp_size` ({fsdp_size}) does not divide the {role}'s {gpus} GPUs",
                            hint=f"use -1 (shard over all {gpus}) or a divisor of {gpus}, e.g. the GPUs per node",
                            related=[f"trainer.placement.{role}_num_gpus_per_node"])


# ---- algorithm ----------------------------------------------------------------------------------------------


@RULES.rule("skyrl/kl-in-reward-and-loss", "RLC301",
            "use_kl_in_reward and use_kl_loss are mutually exclusive.",
            keys=["trainer.algorithm.use_kl_in_reward", "trainer.algorithm.use_kl_loss"])
def kl_exclusive(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    a = cfg.trainer.algorithm
    if a.use_kl_in_reward and a.use_kl_loss:
        yield ctx.error("RLC301", "trainer.algorithm.use_kl_in_reward",
                        "`trainer.algorithm.use_kl_in_reward` and `trainer.algorithm.use_kl_loss` are both true; "
                        "SkyRL applies the KL penalty in one place only",
                        hint="keep use_kl_loss: true (KL in the policy loss, GRPO's usual choice) and set "
                             "use_kl_in_reward: false, or the other way round",
                        related=["trainer.algorithm.use_kl_loss"])


@RULES.rule("skyrl/pre-010-fsdp-warmup", "RLC304",
            "Before v0.1.0, the FSDP strategies build their learning-rate schedule without warm-up, whatever "
            "trainer.num_warmup_steps says (only DeepSpeed reads it).",
            keys=["trainer.num_warmup_steps", "trainer.strategy"])
def pre_010_fsdp_warmup(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    t = cfg.trainer
    if ctx.release == "pre-0.1.0" and t.num_warmup_steps and t.strategy in ("fsdp", "fsdp2"):
        yield ctx.warning("RLC304", "trainer.num_warmup_steps",
                          f"`trainer.num_warmup_steps` is {t.num_warmup_steps}, but {_release_text(ctx)} builds the "
                          f"{t.strategy} strategy's schedule without warm-up: the learning rate is constant from the "
                          "first step (rlcfg runs it the same way)",
                          hint="v0.1.0 and later read trainer.policy.optimizer_config.num_warmup_steps with every "
                               "strategy", related=["trainer.strategy"])


@RULES.rule("skyrl/kl-estimator-old-keys", "RLC111",
            "use_kl_estimator_k3 and use_abs_kl are the older form of kl_estimator_type; when set they override it.",
            keys=["trainer.algorithm.use_kl_estimator_k3", "trainer.algorithm.use_abs_kl",
                  "trainer.algorithm.kl_estimator_type"], also=("RLC304",))
def kl_estimator_old_keys(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    if ctx.release == "pre-0.1.0":
        return  # no kl_estimator_type yet: use_kl_estimator_k3 is the only form
    a = cfg.trainer.algorithm
    new_set = ctx.is_set("trainer.algorithm.kl_estimator_type")
    if a.use_abs_kl:
        old, old_value, implied = "trainer.algorithm.use_abs_kl", True, "abs"
    elif a.use_kl_estimator_k3 and ctx.is_set("trainer.algorithm.use_kl_estimator_k3"):
        old, old_value, implied = "trainer.algorithm.use_kl_estimator_k3", True, "k3"
    else:
        # `use_kl_estimator_k3: false` (the base config's own value up to v0.3.0) leaves kl_estimator_type in charge.
        return
    if new_set and a.kl_estimator_type != implied:
        yield ctx.warning("RLC304", old,
                          f"`{old}: {_v(old_value)}` overrides `trainer.algorithm.kl_estimator_type: "
                          f"{a.kl_estimator_type}`: skyrl-train uses the `{implied}` estimator",
                          hint=f"remove `{old.rsplit('.', 1)[1]}` and keep kl_estimator_type",
                          related=["trainer.algorithm.kl_estimator_type"])
    else:
        yield ctx.warning("RLC111", old,
                          f"`{old}` is the older form of `trainer.algorithm.kl_estimator_type: {implied}`; both are "
                          "accepted", hint=f"write `kl_estimator_type: {implied}` for newer skyrl-train releases")


@RULES.rule("skyrl/gae-needs-critic", "RLC302", "advantage_estimator `gae` needs trainer.critic.model.path.",
            keys=["trainer.algorithm.advantage_estimator", "trainer.critic.model.path"])
def gae_needs_critic(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    if cfg.trainer.algorithm.advantage_estimator == "gae" and not cfg.trainer.critic.model.path:
        yield ctx.error("RLC302", "trainer.algorithm.advantage_estimator",
                        "`trainer.algorithm.advantage_estimator` is `gae`, which needs a critic, but "
                        f"`trainer.critic.model.path` is {_v(cfg.trainer.critic.model.path)}",
                        hint="set trainer.critic.model.path (often the policy's model), or use `grpo`",
                        related=["trainer.critic.model.path"])


@RULES.rule("skyrl/loss-reduction-release", "RLC202",
            "loss_reduction must be one the judged release accepts: token_mean_legacy from skyrl 0.2.0, prompt_mean "
            "from skyrl 0.3.0.", keys=["trainer.algorithm.loss_reduction"])
def loss_reduction_release(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    known = LOSS_REDUCTIONS_BY_RELEASE.get(ctx.release or "", LOSS_REDUCTIONS)
    value = cfg.trainer.algorithm.loss_reduction
    if ctx.release != "pre-0.1.0" and value not in known:
        yield ctx.error("RLC202", "trainer.algorithm.loss_reduction",
                        f"`trainer.algorithm.loss_reduction`: {value} is not one of {', '.join(known)}, the reductions "
                        f"of {_release_text(ctx)}; validate_cfg stops on it",
                        hint="token_mean_legacy and prompt_mean are the `skyrl` package's (0.2.0 and 0.3.0 on)")


@RULES.rule("skyrl/registered-names", "RLC202",
            "advantage_estimator and policy_loss_type must name one of the release's built-ins or a custom-registered "
            "implementation: a name close to a built-in is a typo (error, as validate_cfg stops on it); another "
            "unknown name is a warning, since a custom entrypoint registers it in code.",
            keys=["trainer.algorithm.advantage_estimator", "trainer.algorithm.policy_loss_type"])
def registered_names(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    a = cfg.trainer.algorithm
    if ctx.release == "pre-0.1.0":
        # no registries yet: validate_cfg asserts a built-in estimator (ppo_loss_type's own type names its losses)
        if a.advantage_estimator not in ADVANTAGE_ESTIMATORS_PRE:
            close = close_matches(a.advantage_estimator, ADVANTAGE_ESTIMATORS_PRE, n=1, cutoff=0.6)
            yield ctx.error("RLC202", "trainer.algorithm.advantage_estimator",
                            f"`trainer.algorithm.advantage_estimator`: {_v(a.advantage_estimator)} is not one of "
                            f"{', '.join(ADVANTAGE_ESTIMATORS_PRE)}, the estimators of {_release_text(ctx)}; "
                            "validate_cfg stops on it",
                            hint=f"did you mean `{close[0]}`?" if close else "use grpo or gae (rloo and reinforce++ "
                                                                             "came with v0.1.0)")
        return
    losses = POLICY_LOSSES_BY_RELEASE.get(ctx.release or "", POLICY_LOSSES)
    estimators = ADVANTAGE_ESTIMATORS_BY_RELEASE.get(ctx.release or "", ADVANTAGE_ESTIMATORS)
    # What the launch's entry module, as released, registers counts as known.
    registered, own_loss = entry_estimator(ctx.entry_runs), entry_policy_loss(ctx.entry_runs)
    checks = [("trainer.algorithm.advantage_estimator", a.advantage_estimator,
               (*estimators, registered) if registered else estimators,
               "AdvantageEstimatorRegistry"),
              ("trainer.algorithm.policy_loss_type", a.policy_loss_type, (*losses, own_loss) if own_loss else losses,
               "PolicyLossRegistry")]
    for path, value, known, registry in checks:
        if value in known:
            continue
        # A built-in in another case is a typo too: the registries' names are case-sensitive
        typo = [k for k in known if k.lower() == str(value).lower()] or close_matches(value, known, n=1, cutoff=0.8)
        if typo:
            yield ctx.error("RLC202", path, f"`{path}`: {_v(value)} is not one of skyrl-train's built-ins "
                                            f"({', '.join(known)}); validate_cfg stops on it",
                            hint=f"did you mean `{typo[0]}`?")
            continue
        close = close_matches(value, known, n=1, cutoff=0.6)
        hint = (f"did you mean `{close[0]}`?" if close else f"built-ins: {', '.join(known)}") + \
            f"; a custom name must be registered with {registry} before validate_cfg runs (a custom entrypoint)"
        yield ctx.warning("RLC202", path, f"`{path}`: {_v(value)} is not a built-in ({', '.join(known)}); "
                                          "skyrl-train's main_base stops on it unless your entrypoint registers it",
                          hint=hint)


@RULES.rule("skyrl/grpo-needs-samples", "RLC306",
            "GRPO and RLOO compare samples of the same prompt; with n_samples_per_prompt 1 GRPO has no baseline and "
            "every RLOO advantage is 0.",
            keys=["trainer.algorithm.advantage_estimator", "generator.n_samples_per_prompt"])
def grpo_needs_samples(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    a = cfg.trainer.algorithm
    n = cfg.generator.n_samples_per_prompt
    if a.advantage_estimator in ("grpo", "rloo") and n == 1:
        # compute_grpo_outcome_advantage gives a group of one mean 0 and std 1 (the advantage is the raw score, no
        # baseline); compute_rloo_outcome_advantage gives it 0.
        what = ("the advantage is the raw score, with no baseline" if a.advantage_estimator == "grpo"
                else "every advantage is 0 and the policy does not learn")
        yield ctx.warning("RLC306", "generator.n_samples_per_prompt",
                          f"`trainer.algorithm.advantage_estimator` is {_v(a.advantage_estimator)} but "
                          f"`generator.n_samples_per_prompt` is 1: each group has one sample, so {what}",
                          hint="use n_samples_per_prompt of 4 or more", related=["trainer.algorithm.advantage_estimator"])


@RULES.rule("skyrl/kl-controller", "RLC201", "An adaptive KL controller needs kl_ctrl.horizon > 0.",
            keys=["trainer.algorithm.kl_ctrl.type", "trainer.algorithm.kl_ctrl.horizon"])
def kl_controller(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    k = cfg.trainer.algorithm.kl_ctrl
    if k.type == "adaptive" and k.horizon <= 0:
        yield ctx.error("RLC201", "trainer.algorithm.kl_ctrl.horizon",
                        f"`trainer.algorithm.kl_ctrl.horizon` must be > 0 for the adaptive KL controller, got {k.horizon}",
                        hint="the default is 10000", related=["trainer.algorithm.kl_ctrl.type"])


@RULES.rule("skyrl/max-seq-len-derived", "RLC304",
            "With loss_reduction seq_mean_token_sum_norm and no algorithm.max_seq_len, skyrl-train derives it as "
            "max_input_length + max_generate_length (the newest releases require it).",
            keys=["trainer.algorithm.loss_reduction", "trainer.algorithm.max_seq_len"])
def max_seq_len(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    a = cfg.trainer.algorithm
    g = cfg.generator
    if a.loss_reduction != "seq_mean_token_sum_norm" or a.max_seq_len is not None:
        return
    derived = g.max_input_length + g.sampling_params.max_generate_length
    turns = (f"; with max_turns {g.max_turns} a trajectory can be longer than that, so the loss is normalised by too "
             f"small a length") if g.max_turns > 1 else ""
    yield ctx.warning("RLC304", "trainer.algorithm.loss_reduction",
                      "`trainer.algorithm.loss_reduction` is `seq_mean_token_sum_norm` and "
                      "`trainer.algorithm.max_seq_len` is null: skyrl-train uses generator.max_input_length + "
                      f"sampling_params.max_generate_length = {g.max_input_length} + "
                      f"{g.sampling_params.max_generate_length} = {derived}{turns}; the newest releases reject it",
                      hint=f"set trainer.algorithm.max_seq_len explicitly (e.g. {derived})",
                      related=["trainer.algorithm.max_seq_len"])


@RULES.rule("skyrl/truncated-importance-sampling", "RLC302",
            "use_tis needs tis_imp_ratio_cap > 0 and the vLLM backend; it forces sampling logprobs on.",
            keys=["trainer.algorithm.use_tis", "trainer.algorithm.tis_imp_ratio_cap", "generator.backend",
                  "generator.sampling_params.logprobs"], also=("RLC111", "RLC304", "RLC306"))
def tis(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    a = cfg.trainer.algorithm
    g = cfg.generator
    if not a.use_tis:
        return
    if a.tis_imp_ratio_cap <= 0:
        yield ctx.error("RLC302", "trainer.algorithm.tis_imp_ratio_cap",
                        f"`trainer.algorithm.use_tis` is true but `trainer.algorithm.tis_imp_ratio_cap` is "
                        f"{a.tis_imp_ratio_cap}; it must be > 0", hint="a cap of 2.0 is common",
                        related=["trainer.algorithm.use_tis"])
    if g.backend == "sglang":
        yield ctx.error("RLC306", "trainer.algorithm.use_tis",
                        "`trainer.algorithm.use_tis` is not supported with `generator.backend: sglang`",
                        hint="use generator.backend: vllm", related=["generator.backend"])
    if ctx.release in ("0.1.0", "0.2.0") and not g.batched:
        yield ctx.error("RLC302", "trainer.algorithm.use_tis",
                        f"`trainer.algorithm.use_tis` needs `generator.batched: true` in {_release_text(ctx)} "
                        "(single-turn batched generation only)", hint="set generator.batched=true",
                        related=["generator.batched"])
    if g.sampling_params.logprobs is None:
        yield ctx.warning("RLC304", "generator.sampling_params.logprobs",
                          "`generator.sampling_params.logprobs` is null but `trainer.algorithm.use_tis` is true: "
                          "skyrl-train turns logprobs on by itself", hint="set sampling_params.logprobs: 0",
                          related=["trainer.algorithm.use_tis"])
    yield ctx.warning("RLC111", "trainer.algorithm.use_tis",
                      "`trainer.algorithm.use_tis` is the older form of "
                      "`trainer.algorithm.off_policy_correction.tis_ratio_type: token`",
                      hint="newer releases rewrite it, with tis_imp_ratio_cap as the clip")


@RULES.rule("skyrl/off-policy-correction", "RLC202",
            "off_policy_correction.tis_ratio_type is null, token or sequence; sequence_mask_metric is null, product or "
            "geometric; neither works with SGLang or the clip_cov/kl_cov losses.",
            keys=["trainer.algorithm.off_policy_correction"], also=("RLC306",))
def off_policy_correction(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    # The choices of tis_ratio_type and sequence_mask_metric are Literal fields: the schema reports bad values.
    if not ctx.is_set("trainer.algorithm.off_policy_correction.tis_ratio_type") and \
            not ctx.is_set("trainer.algorithm.off_policy_correction.sequence_mask_metric"):
        return
    opc = cfg.trainer.algorithm.off_policy_correction
    base = "trainer.algorithm.off_policy_correction"
    if opc.tis_ratio_type is None and opc.sequence_mask_metric is None:
        return
    loss, loss_key = policy_loss(cfg)
    if cfg.generator.backend == "sglang":
        yield ctx.error("RLC306", base, f"`{base}` is not supported with `generator.backend: sglang`",
                        hint="use generator.backend: vllm", related=["generator.backend"])
    if loss in ("clip_cov", "kl_cov"):
        yield ctx.error("RLC306", base, f"`{base}` is not supported with `{loss_key}: {loss}`",
                        hint="use another policy loss or turn off-policy correction off", related=[loss_key])


# ---- strategy -----------------------------------------------------------------------------------------------


@RULES.rule("skyrl/fsdp1-cpu-offload", "RLC306",
            "Strategy `fsdp` (FSDP1) cannot offload the policy's or critic's parameters to CPU; FSDP2 can.",
            keys=["trainer.strategy", "trainer.policy.fsdp_config.cpu_offload", "trainer.critic.fsdp_config.cpu_offload"])
def fsdp1_offload(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    t = cfg.trainer
    if t.strategy != "fsdp" or ctx.release in PACKAGE_FROM_030:  # from skyrl 0.3.0 fsdp is FSDP2
        return
    for role in ("policy", "critic"):
        if getattr(t, role).fsdp_config.cpu_offload:
            yield ctx.error("RLC306", f"trainer.{role}.fsdp_config.cpu_offload",
                            f"`trainer.{role}.fsdp_config.cpu_offload` is true but `trainer.strategy` is `fsdp` "
                            "(FSDP1), which cannot offload the forward pass to CPU",
                            hint="use trainer.strategy: fsdp2, or set cpu_offload: false",
                            related=["trainer.strategy"])


@RULES.rule("skyrl/deepspeed", "RLC306",
            "DeepSpeed: only ZeRO stage 3, offload_after_step must be true for policy and critic, and "
            "gradient_clipping belongs in optimizer_config.max_grad_norm.",
            keys=["trainer.strategy", "trainer.policy.deepspeed_config", "trainer.policy.optimizer_config.offload_after_step"],
            also=("RLC307",))
def deepspeed(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    t = cfg.trainer
    if t.strategy != "deepspeed":
        return
    zero = (t.policy.deepspeed_config or {}).get("zero_optimization")
    stage = zero.get("stage") if isinstance(zero, dict) else None
    if stage is not None and stage != 3:
        yield ctx.error("RLC306", "trainer.policy.deepspeed_config.zero_optimization.stage",
                        f"SkyRL supports only ZeRO stage 3 with DeepSpeed, but the policy's "
                        f"deepspeed_config.zero_optimization.stage is {stage}",
                        hint="set deepspeed_config.train.zero_optimization.stage: 3", related=["trainer.strategy"])
    for role in ("policy", "critic"):
        if not getattr(t, role).optimizer_config.offload_after_step:
            yield ctx.error("RLC306", f"trainer.{role}.optimizer_config.offload_after_step",
                            f"`trainer.{role}.optimizer_config.offload_after_step` is false, which DeepSpeed does "
                            "not support", hint="set offload_after_step: true", related=["trainer.strategy"])
    clip = (t.policy.deepspeed_config or {}).get("gradient_clipping")
    if clip is not None and clip != t.policy.optimizer_config.max_grad_norm:
        yield ctx.warning("RLC307", "trainer.policy.deepspeed_config.gradient_clipping",
                          f"DeepSpeed's `gradient_clipping` is {clip} in the policy's deepspeed_config; SkyRL clips with "
                          f"`trainer.policy.optimizer_config.max_grad_norm` ({t.policy.optimizer_config.max_grad_norm})",
                          hint="remove gradient_clipping and set optimizer_config.max_grad_norm")


# The training backends each release can build (main_base picks the worker classes by strategy).
STRATEGIES_BY_RELEASE = {"0.1.0": ("fsdp", "fsdp2", "deepspeed"), "0.2.0": ("fsdp", "fsdp2", "deepspeed", "megatron"),
                         "0.3.0": ("fsdp", "fsdp2", "deepspeed", "megatron"), "0.4.0": ("fsdp", "fsdp2", "megatron"),
                         "main": ("fsdp", "fsdp2", "megatron"),
                         **{release: ("fsdp", "fsdp2", "megatron") for release in PACKAGE_RELEASES}}


@RULES.rule("skyrl/strategy-release", "RLC306",
            "The strategy must be one the judged release can build: megatron from v0.2.0, deepspeed up to v0.3.0.",
            keys=["trainer.strategy"])
def strategy_release(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    known = STRATEGIES_BY_RELEASE.get(ctx.release or "")
    strategy = cfg.trainer.strategy
    if known and strategy not in known:
        yield ctx.error("RLC306", "trainer.strategy",
                        f"`trainer.strategy` is {_v(strategy)}, which {_release_text(ctx)} cannot build; it accepts "
                        "this at load but fails when it creates the workers (\"Unknown strategy type\")",
                        hint=f"use one of {', '.join(known)}")


@RULES.rule("skyrl/megatron-support", "RLC306",
            "Megatron: NCCL weight sync, vLLM rollout, no critic, no Ulysses sequence parallelism, and context "
            "parallelism only with sample packing.",
            keys=["trainer.strategy", "generator.weight_sync_backend", "generator.backend", "trainer.critic.model.path"],
            also=("RLC302",))
def megatron_support(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    t = cfg.trainer
    g = cfg.generator
    if t.strategy != "megatron":
        return
    if g.weight_sync_backend not in ("nccl", "delta"):
        yield ctx.error("RLC306", "generator.weight_sync_backend",
                        f"`generator.weight_sync_backend` is {_v(g.weight_sync_backend)}, but the megatron strategy "
                        "syncs weights over NCCL only", hint="set generator.weight_sync_backend: nccl",
                        related=["trainer.strategy"])
    if g.backend != "vllm":
        yield ctx.error("RLC306", "generator.backend",
                        f"`generator.backend` is {_v(g.backend)}, but the megatron strategy works with vLLM only",
                        hint="set generator.backend: vllm", related=["trainer.strategy"])
    if ctx.release == "0.2.0" and not t.placement.colocate_all:
        yield ctx.error("RLC306", "trainer.placement.colocate_all",
                        "`trainer.placement.colocate_all` is false, but skyrl-train 0.2.0 supports the megatron strategy "
                        "only with colocate_all: true", hint="set trainer.placement.colocate_all: true",
                        related=["trainer.strategy"])
    if critic_in_use(cfg):
        yield ctx.error("RLC306", "trainer.critic.model.path",
                        f"`trainer.critic.model.path` is {_v(t.critic.model.path)}, but the megatron strategy trains "
                        "no critic (GRPO-style estimators only)", hint="set trainer.critic.model.path: null or use fsdp2",
                        related=["trainer.strategy"])
    for role in ("policy", "ref"):
        model = getattr(t, role)
        if model.sequence_parallel_size != 1:
            yield ctx.error("RLC306", f"trainer.{role}.sequence_parallel_size",
                            f"`trainer.{role}.sequence_parallel_size` is {model.sequence_parallel_size}, but Ulysses "
                            "sequence parallelism is not available with the megatron strategy",
                            hint=f"set it to 1 and use trainer.{role}.megatron_config.context_parallel_size instead",
                            related=["trainer.strategy"])
        cp = model.megatron_config.context_parallel_size
        if cp > 1 and not t.use_sample_packing:
            yield ctx.error("RLC302", f"trainer.{role}.megatron_config.context_parallel_size",
                            f"`trainer.{role}.megatron_config.context_parallel_size` is {cp}, which needs "
                            "`trainer.use_sample_packing: true` (it is false)",
                            hint="set trainer.use_sample_packing: true", related=["trainer.use_sample_packing"])


@RULES.rule("skyrl/lora", "RLC306", "LoRA (rank > 0) needs the vLLM backend and an fsdp, fsdp2 or megatron strategy.",
            keys=["trainer.policy.model.lora.rank", "generator.backend", "trainer.strategy"])
def lora(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    t = cfg.trainer
    rank = t.policy.model.lora.rank
    if rank <= 0:
        return
    if cfg.generator.backend != "vllm":
        yield ctx.error("RLC306", "trainer.policy.model.lora.rank",
                        f"LoRA (`trainer.policy.model.lora.rank` {rank}) needs `generator.backend: vllm`, not "
                        f"{_v(cfg.generator.backend)}", hint="use vLLM for rollout", related=["generator.backend"])
    if t.strategy == "deepspeed":
        yield ctx.error("RLC306", "trainer.policy.model.lora.rank",
                        f"LoRA (`trainer.policy.model.lora.rank` {rank}) is not supported with `trainer.strategy: "
                        "deepspeed`", hint="use fsdp2", related=["trainer.strategy"])


# ---- placement ----------------------------------------------------------------------------------------------


@RULES.rule("skyrl/colocate-all-engines", "RLC402",
            "With colocate_all, the policy's GPUs must equal the inference engines' GPUs (engines × TP × PP × DP).",
            keys=["trainer.placement.colocate_all", "trainer.placement.policy_num_gpus_per_node",
                  "generator.num_inference_engines", "generator.inference_engine_tensor_parallel_size"])
def colocate_engines(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    p = cfg.trainer.placement
    g = cfg.generator
    # From v0.2.0 validate_cfg compares the counts whenever colocate_all is on, remote engines included.
    if not p.colocate_all or (not g.run_engines_locally and ctx.release in (None, "pre-0.1.0", "0.1.0")):
        return
    policy, rollout = world(cfg, "policy"), rollout_gpus(cfg)
    if policy != rollout:
        hint = (f"with {policy} policy GPUs, use num_inference_engines: "
                f"{policy // (rollout // g.num_inference_engines)}" if policy % (rollout // g.num_inference_engines) == 0
                else f"make {_rollout_text(cfg)} equal {policy}")
        yield ctx.error("RLC402", "generator.num_inference_engines",
                        f"`trainer.placement.colocate_all` is true, so the policy's {plural(policy, 'GPU')} "
                        f"({_placement_text(cfg, 'policy')}) must equal the inference engines' GPUs "
                        f"({_rollout_text(cfg)} = {rollout})" + (
                            f"; {_release_text(ctx)} accepts this at load but fails when the trainer builds the "
                            "models" if ctx.release in ("pre-0.1.0", "0.1.0") else ""),
                        hint=hint + ", or set colocate_all: false",
                        related=["trainer.placement.policy_num_gpus_per_node",
                                 "generator.inference_engine_tensor_parallel_size", "trainer.placement.colocate_all"],
                        constraint=Constraint.equal(_placement_factors(cfg, "policy"), [
                            ("generator.num_inference_engines", g.num_inference_engines),
                            ("generator.inference_engine_tensor_parallel_size", g.inference_engine_tensor_parallel_size),
                            ("generator.inference_engine_pipeline_parallel_size",
                             g.inference_engine_pipeline_parallel_size),
                            ("generator.inference_engine_data_parallel_size", g.inference_engine_data_parallel_size)]))


@RULES.rule("skyrl/colocate-all-models", "RLC402",
            "With colocate_all, the reference model (when used) and the critic (when set) must have as many GPUs as "
            "the policy.",
            keys=["trainer.placement.colocate_all", "trainer.placement.ref_num_gpus_per_node",
                  "trainer.placement.critic_num_gpus_per_node"])
def colocate_models(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    p = cfg.trainer.placement
    if not p.colocate_all:
        return
    roles = (["ref"] if ref_in_use(cfg) else []) + (["critic"] if critic_in_use(cfg) else [])
    for role in roles:
        if (getattr(p, f"{role}_num_nodes"), getattr(p, f"{role}_num_gpus_per_node")) != (
                p.policy_num_nodes, p.policy_num_gpus_per_node):
            yield ctx.error("RLC402", f"trainer.placement.{role}_num_gpus_per_node",
                            f"`trainer.placement.colocate_all` is true, so the {role} ({_placement_text(cfg, role)}) "
                            f"must sit on the policy's GPUs ({_placement_text(cfg, 'policy')}); skyrl-train accepts "
                            "this at load but fails when the trainer builds the models",
                            hint=f"set {role}_num_nodes: {p.policy_num_nodes} and {role}_num_gpus_per_node: "
                                 f"{p.policy_num_gpus_per_node}",
                            related=["trainer.placement.policy_num_gpus_per_node", "trainer.placement.colocate_all"],
                            constraint=_same_placement(cfg, "policy", role))


@RULES.rule("skyrl/colocate-policy-ref", "RLC402",
            "Without colocate_all, colocate_policy_ref (with a reference model in use) needs the same nodes and GPUs "
            "per node for policy and ref; colocate_critic_reward likewise for critic and reward model.",
            keys=["trainer.placement.colocate_policy_ref", "trainer.placement.ref_num_gpus_per_node"])
def colocate_pairs(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    p = cfg.trainer.placement
    if p.colocate_all:
        return
    pairs = []
    if p.colocate_policy_ref and ref_in_use(cfg):
        pairs.append(("policy", "ref", "colocate_policy_ref"))
    if p.colocate_critic_reward and critic_in_use(cfg) and cfg.trainer.reward.model.path is not None:
        pairs.append(("critic", "reward", "colocate_critic_reward"))
    for first, second, flag in pairs:
        a = (getattr(p, f"{first}_num_nodes"), getattr(p, f"{first}_num_gpus_per_node"))
        b = (getattr(p, f"{second}_num_nodes"), getattr(p, f"{second}_num_gpus_per_node"))
        if a != b:
            yield ctx.error("RLC402", f"trainer.placement.{second}_num_gpus_per_node",
                            f"`trainer.placement.{flag}` is true, so the {second} ({_placement_text(cfg, second)}) "
                            f"must have the {first}'s nodes and GPUs per node ({_placement_text(cfg, first)})",
                            hint=f"set {second}_num_nodes: {a[0]} and {second}_num_gpus_per_node: {a[1]}, or "
                                 f"{flag}: false",
                            related=[f"trainer.placement.{first}_num_gpus_per_node", f"trainer.placement.{flag}"],
                            constraint=_same_placement(cfg, first, second))


def _placement_factors(cfg: Any, role: str) -> list[tuple[str, int]]:
    p = cfg.trainer.placement
    return [(f"trainer.placement.{role}_{part}", getattr(p, f"{role}_{part}")) for part in ("num_nodes", "num_gpus_per_node")]


def _same_placement(cfg: Any, first: str, second: str) -> Constraint | None:
    """Two roles on the same nodes and GPUs per node: as a constraint on the one count they differ in."""
    a, b = _placement_factors(cfg, first), _placement_factors(cfg, second)
    differ = [i for i in range(2) if a[i][1] != b[i][1]]
    return Constraint.equal([a[differ[0]]], [b[differ[0]]]) if len(differ) == 1 else None


# ---- generator ----------------------------------------------------------------------------------------------


@RULES.rule("skyrl/max-input-length", "RLC305",
            "Single-turn: generator.max_input_length equals trainer.max_prompt_length; multi-turn: at least it.",
            keys=["generator.max_input_length", "trainer.max_prompt_length", "generator.max_turns"], also=("RLC303",))
def max_input_length(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    g = cfg.generator
    prompt = cfg.trainer.max_prompt_length
    if g.max_turns == 1 and g.max_input_length != prompt:
        yield ctx.error("RLC305", "generator.max_input_length",
                        f"`generator.max_input_length` ({g.max_input_length}) must equal `trainer.max_prompt_length` "
                        f"({prompt}) for single-turn generation (`generator.max_turns` 1)",
                        hint="leave max_input_length at its default `${trainer.max_prompt_length}`",
                        related=["trainer.max_prompt_length", "generator.max_turns"])
    elif g.max_turns > 1 and g.max_input_length < prompt:
        yield ctx.error("RLC303", "generator.max_input_length",
                        f"`generator.max_input_length` ({g.max_input_length}) is smaller than "
                        f"`trainer.max_prompt_length` ({prompt}); with `generator.max_turns` {g.max_turns} it must be "
                        "at least the prompt length", hint=f"set max_input_length to {prompt} or more",
                        related=["trainer.max_prompt_length", "generator.max_turns"])


@RULES.rule("skyrl/remote-engine-urls", "RLC305",
            "Remote engines: num_inference_engines equals the number of remote_inference_engine_urls.",
            keys=["generator.run_engines_locally", "generator.num_inference_engines",
                  "generator.remote_inference_engine_urls"])
def remote_urls(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    g = cfg.generator
    if g.run_engines_locally or ctx.release in PACKAGE_FROM_030:  # no remote URLs from skyrl 0.3.0
        return
    urls = g.remote_inference_engine_urls
    if g.num_inference_engines != len(urls):
        yield ctx.error("RLC305", "generator.remote_inference_engine_urls",
                        f"`generator.remote_inference_engine_urls` lists {len(urls)} URL(s) but "
                        f"`generator.num_inference_engines` is {g.num_inference_engines}",
                        hint=f"list one host:port per engine, or set num_inference_engines: {len(urls)}",
                        related=["generator.num_inference_engines", "generator.run_engines_locally"])


@RULES.rule("skyrl/mp-executor-one-node", "RLC403",
            "With colocate_all and vLLM's `mp` executor, an engine's TP × PP workers fit on one node "
            "(policy_num_gpus_per_node GPUs).",
            keys=["generator.distributed_executor_backend", "generator.inference_engine_tensor_parallel_size",
                  "generator.inference_engine_pipeline_parallel_size", "trainer.placement.policy_num_gpus_per_node"])
def mp_executor_one_node(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    g, p = cfg.generator, cfg.trainer.placement
    if not is_package(ctx.release) or g.distributed_executor_backend != "mp" or not p.colocate_all:
        return
    workers = g.inference_engine_tensor_parallel_size * g.inference_engine_pipeline_parallel_size
    if workers > p.policy_num_gpus_per_node:
        yield ctx.error("RLC403", "generator.distributed_executor_backend",
                        f"an engine's {workers} workers (generator.inference_engine_tensor_parallel_size × "
                        f"generator.inference_engine_pipeline_parallel_size) do not fit on one node of "
                        f"{p.policy_num_gpus_per_node} GPUs (trainer.placement.policy_num_gpus_per_node), which vLLM's "
                        f"`mp` executor needs; validate_cfg stops on it",
                        hint="use distributed_executor_backend: ray for engines that span nodes",
                        related=["generator.inference_engine_tensor_parallel_size",
                                 "trainer.placement.policy_num_gpus_per_node"])


@RULES.rule("skyrl/external-servers", "RLC302",
            "From skyrl 0.3.0, engines that do not run locally are reached through external_proxy_url or "
            "external_server_urls.",
            keys=["generator.run_engines_locally", "generator.external_proxy_url", "generator.external_server_urls"])
def external_servers(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    g = cfg.generator
    if ctx.release in PACKAGE_FROM_030 and not g.run_engines_locally \
            and not g.external_proxy_url and not g.external_server_urls:
        yield ctx.error("RLC302", "generator.run_engines_locally",
                        f"`generator.run_engines_locally` is false, which {_release_text(ctx)} accepts only with "
                        "`generator.external_proxy_url` or `generator.external_server_urls` set (validate_cfg stops "
                        "on it)", hint="set external_server_urls to the servers' host:port, or run the engines "
                                       "locally", related=["generator.external_proxy_url", "generator.external_server_urls"])


@RULES.rule("skyrl/offline-engine-batched", "RLC302",
            "The offline vLLM engine (async_engine false) needs batched true; before v0.1.0, async_engine false "
            "needs it whatever the backend.",
            keys=["generator.async_engine", "generator.batched", "generator.backend"])
def offline_engine(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    g = cfg.generator
    if not g.async_engine and (g.backend == "vllm" or ctx.release == "pre-0.1.0") and not g.batched:
        engine = "vLLM's offline engine" if g.backend == "vllm" else f"which {_release_text(ctx)} reads as offline"
        yield ctx.error("RLC302", "generator.batched",
                        f"`generator.async_engine` is false ({engine}), which needs "
                        "`generator.batched: true`, but batched is false",
                        hint="set generator.async_engine: true (needed for multi-turn) or batched: true",
                        related=["generator.async_engine"])


@RULES.rule("skyrl/wandb-api-key", "RLC308",
            "The wandb logger needs WANDB_API_KEY in the job's environment (a warning, an error under --strict).",
            keys=["trainer.logger"])
def wandb_key(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    if "wandb" in loggers(cfg) and not ctx.host.env.get("WANDB_API_KEY"):
        yield ctx.machine("trainer.logger",
                          "`trainer.logger` is `wandb`, and skyrl-train stops at start-up unless WANDB_API_KEY is set; "
                          "it is not set here",
                          hint="export WANDB_API_KEY=... where the job runs, or use trainer.logger: console")


@RULES.rule("skyrl/update-group-remote-only", "RLC307",
            "override_existing_update_group matters only for remote engines; `auto` becomes `enable` for remote vLLM "
            "and `disable` otherwise.",
            keys=["generator.override_existing_update_group", "generator.run_engines_locally"], also=("RLC304",))
def update_group(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    g = cfg.generator
    if g.run_engines_locally and g.override_existing_update_group != "auto" and \
            ctx.is_set("generator.override_existing_update_group"):
        yield ctx.warning("RLC307", "generator.override_existing_update_group",
                          f"`generator.override_existing_update_group: {g.override_existing_update_group}` has no "
                          "effect with local engines (`generator.run_engines_locally` is true): a fresh update group "
                          "is created each run", hint="leave it at `auto`", related=["generator.run_engines_locally"])
    elif not g.run_engines_locally and g.override_existing_update_group == "auto" and \
            ctx.is_set("generator.override_existing_update_group"):
        resolved = "enable" if g.backend == "vllm" else "disable"
        effect = ("replaces any weight-update group the remote servers still hold, including one that another run "
                  "is using" if resolved == "enable" else "keeps an existing weight-update group on the servers")
        yield ctx.warning("RLC304", "generator.override_existing_update_group",
                          f"`generator.override_existing_update_group: auto` becomes `{resolved}` for remote "
                          f"{g.backend} engines: skyrl-train {effect}",
                          hint=f"write `{resolved}` to make the choice visible, or the other value to change it",
                          related=["generator.run_engines_locally", "generator.backend"])


@RULES.rule("skyrl/sglang-limits", "RLC306",
            "SGLang: local engines need TP 1 (and are refused before v0.1.0); no stop strings or min_new_tokens; no HTTP endpoint; "
            "use_conversation_multi_turn false is unsupported in later releases.",
            keys=["generator.backend", "generator.inference_engine_tensor_parallel_size",
                  "generator.sampling_params.stop", "generator.use_conversation_multi_turn",
                  "generator.run_engines_locally"])
def sglang_limits(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    g = cfg.generator
    if g.backend != "sglang":
        return
    if is_package(ctx.release):
        # the package's engine creation knows vLLM only; a remote SGLang server (up to 0.2.0) is the user's own
        if g.run_engines_locally:
            yield ctx.error("RLC306", "generator.backend",
                            f"`generator.backend` is sglang with local engines, which {_release_text(ctx)} cannot "
                            "start: it accepts this at load but fails when it creates the engines (\"Unsupported "
                            "backend\")", hint="use vllm")
        return
    if g.run_engines_locally and ctx.release == "pre-0.1.0":
        yield ctx.error("RLC306", "generator.run_engines_locally",
                        f"`generator.backend` is sglang with local engines, which {_release_text(ctx)} does not "
                        "support (validate_cfg stops on it)",
                        hint="set generator.run_engines_locally: false and serve SGLang yourself, or use vLLM",
                        related=["generator.backend"])
    elif g.run_engines_locally and g.inference_engine_tensor_parallel_size != 1:
        yield ctx.error("RLC306", "generator.inference_engine_tensor_parallel_size",
                        f"`generator.inference_engine_tensor_parallel_size` is "
                        f"{g.inference_engine_tensor_parallel_size}, but local SGLang engines support TP 1 only",
                        hint="set it to 1 and raise num_inference_engines instead, or use vLLM",
                        related=["generator.backend", "generator.run_engines_locally"])
    for which in ("sampling_params", "eval_sampling_params"):
        params = getattr(g, which)
        for key in ("stop", "min_new_tokens"):
            # min_new_tokens is in no release's base config: only a `+...min_new_tokens=N` override brings it
            present = getattr(params, key, None) is not None if key == "stop" else \
                ctx.tree.has(("generator", which, key))
            if present:
                yield ctx.error("RLC306", f"generator.{which}.{key}",
                                f"`generator.{which}.{key}` is not supported with `generator.backend: sglang` (SkyRL "
                                "starts SGLang without its tokenizer)",
                                hint=f"remove {key}, or use vLLM", related=["generator.backend"])
    if g.enable_http_endpoint:
        yield ctx.error("RLC306", "generator.enable_http_endpoint",
                        "`generator.enable_http_endpoint` is not supported with `generator.backend: sglang`",
                        hint="use generator.backend: vllm", related=["generator.backend"])
    if not g.use_conversation_multi_turn:
        yield ctx.warning("RLC306", "generator.use_conversation_multi_turn",
                          "`generator.use_conversation_multi_turn` is false, which later skyrl-train releases reject "
                          "with `generator.backend: sglang`", hint="set use_conversation_multi_turn: true",
                          related=["generator.backend"])


@RULES.rule("skyrl/http-endpoint-async", "RLC302", "The HTTP endpoint needs async_engine true.",
            keys=["generator.enable_http_endpoint", "generator.async_engine"])
def http_endpoint(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    g = cfg.generator
    if g.enable_http_endpoint and not g.async_engine:
        yield ctx.error("RLC302", "generator.enable_http_endpoint",
                        "`generator.enable_http_endpoint` is true, which needs `generator.async_engine: true` (it is "
                        "false)", hint="set generator.async_engine: true", related=["generator.async_engine"])


@RULES.rule("skyrl/logprobs", "RLC306",
            "sampling_params.logprobs is null or the chosen token only (0; 0 or 1 on the last commit), not available "
            "with remote engines, and (v0.1.0, v0.2.0) only with batched generation.",
            keys=["generator.sampling_params.logprobs", "generator.run_engines_locally", "generator.batched"])
def logprobs(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    from rlcfg.dialects.skyrl.releases import effective

    # skyrl-train's validate_cfg checks the training sampling_params only; the release decides the default (null up
    # to v0.3.0, 0 in v0.4.0, 1 on the last commit), so a remote-engine config that leaves it alone is refused there.
    g = cfg.generator
    path = "generator.sampling_params.logprobs"
    value = effective(cfg, ctx, path)
    if value is None:
        return
    highest = 1 if ctx.release in (None, "main") or is_package(ctx.release) else 0
    where = "" if ctx.is_set(path) else f" (the default of {_release_text(ctx)})"
    if isinstance(value, int) and value > highest:
        yield ctx.error("RLC306", path, f"`{path}` is {value}; SkyRL returns only the chosen token's logprob, so it "
                                        f"must be {'0, 1' if highest else '0'} or null", hint="set it to 0")
    if not g.run_engines_locally and (not is_package(ctx.release) or ctx.release in OLD_LAYOUT_READ):
        yield ctx.error("RLC306", path, f"`{path}` is {value}{where}, but remote engines "
                                        "(`generator.run_engines_locally: false`) do not return logprobs: skyrl-train "
                                        "refuses the combination", hint=f"set `{path}=null`",
                        related=["generator.run_engines_locally"])
    if ctx.release in ("0.1.0", "0.2.0") and not effective(cfg, ctx, "generator.batched"):
        yield ctx.error("RLC306", path, f"`{path}` is {value}{where}, which {_release_text(ctx)} supports only with "
                                        "`generator.batched: true`", hint="set generator.batched=true or logprobs=null",
                        related=["generator.batched"])


# The releases whose fully-asynchronous trainer asserts generator.async_engine (dropped from skyrl 0.2.0).
FULLY_ASYNC_NEEDS_ASYNC_ENGINE = frozenset({"0.4.0", "main", "skyrl-0.1.0"})


@RULES.rule("skyrl/fully_async", "RLC306",
            "The fully-asynchronous entrypoint's trainer (FullyAsyncRayPPOTrainer) stops at start unless "
            "fully_async.enabled is true (0.3.0 and later), train_batch_size equals policy_mini_batch_size, "
            "num_parallel_generation_workers lies between policy_mini_batch_size and policy_mini_batch_size × "
            "(max_staleness_steps + 1), no model is colocated with the engines (colocate_all), generation is not "
            "batched and (up to skyrl 0.1.0) runs on the asynchronous engine, dynamic sampling is off and (0.3.0 "
            "and later) the loss reads the rollout's log-probs (rollout_is or dppo).",
            keys=["trainer.fully_async.enabled", "trainer.fully_async.max_staleness_steps",
                  "trainer.fully_async.num_parallel_generation_workers", "trainer.train_batch_size",
                  "trainer.policy_mini_batch_size", "trainer.placement.colocate_all", "generator.batched",
                  "generator.async_engine",
                  "trainer.algorithm.dynamic_sampling.type", "trainer.algorithm.policy_loss_type"])
def fully_async(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    if ctx.entry_runs != "fully_async":
        return
    t, g, a = cfg.trainer, cfg.generator, cfg.trainer.algorithm
    f = t.fully_async
    why = "the fully-asynchronous trainer stops at start"
    if ctx.release in PACKAGE_FROM_030 and not f.enabled:
        yield ctx.error("RLC306", "trainer.fully_async.enabled", f"`trainer.fully_async.enabled` is false: {why} "
                        "unless it is true", hint="set trainer.fully_async.enabled=true")
    if t.train_batch_size != t.policy_mini_batch_size:
        yield ctx.error("RLC306", "trainer.train_batch_size",
                        f"`trainer.train_batch_size` ({t.train_batch_size}) must equal `trainer.policy_mini_batch_size` "
                        f"({t.policy_mini_batch_size}): {why} otherwise (one optimizer step per training step)",
                        hint=f"set trainer.train_batch_size={t.policy_mini_batch_size}",
                        related=["trainer.policy_mini_batch_size"])
    workers, mini, stale = f.num_parallel_generation_workers, t.policy_mini_batch_size, f.max_staleness_steps
    if not mini <= workers <= mini * (stale + 1):
        yield ctx.error("RLC306", "trainer.fully_async.num_parallel_generation_workers",
                        f"`trainer.fully_async.num_parallel_generation_workers` is {workers}; {why} unless it lies "
                        f"between policy_mini_batch_size ({mini}) and policy_mini_batch_size × (max_staleness_steps + "
                        f"1) ({mini * (stale + 1)})", hint=f"set it to {mini * (stale + 1)}",
                        related=["trainer.policy_mini_batch_size", "trainer.fully_async.max_staleness_steps"])
    if t.placement.colocate_all:
        yield ctx.error("RLC306", "trainer.placement.colocate_all", f"`trainer.placement.colocate_all` is true: {why} "
                        "(the engines must keep generating while the policy trains)",
                        hint="set trainer.placement.colocate_all=false and give the engines GPUs of their own")
    if g.batched:
        yield ctx.error("RLC306", "generator.batched", f"`generator.batched` is true: {why} (a batched generate call "
                        "cannot be paused for a weight update)", hint="set generator.batched=false")
    if not g.async_engine and ctx.release in FULLY_ASYNC_NEEDS_ASYNC_ENGINE:
        yield ctx.error("RLC306", "generator.async_engine", f"`generator.async_engine` is false: {why} (it asserts "
                        "the asynchronous engine)", hint="set generator.async_engine=true")
    if a.dynamic_sampling.type is not None:
        yield ctx.error("RLC306", "trainer.algorithm.dynamic_sampling.type",
                        f"`trainer.algorithm.dynamic_sampling.type` is {a.dynamic_sampling.type}: {why} with dynamic "
                        "sampling", hint="set trainer.algorithm.dynamic_sampling.type=null")
    loss = policy_loss(cfg)[0]
    if ctx.release in PACKAGE_FROM_030 and loss in LOSSES_WITH_OLD_LOGPROBS:
        yield ctx.error("RLC306", "trainer.algorithm.policy_loss_type",
                        f"`trainer.algorithm.policy_loss_type` is {loss}, whose ratio reads the old log-probs: {why} "
                        "(a stale response's sampling policy is gone; the loss must read the rollout's log-probs)",
                        hint="use policy_loss_type=rollout_is")


@RULES.rule("skyrl/one_step_async", "RLC306",
            "SkyRL's one-step off-policy entrypoint (examples/train/async/main_async.py) stops at start when a model "
            "is colocated with the engines (colocate_all). Its trainer never applies dynamic sampling and never "
            "builds the adaptive KL controller (the reward's KL coefficient stays kl_loss_coef), which validate "
            "says (RLC307) and `rlcfg run` runs; it resumes from a checkpoint its own way, which `rlcfg run` "
            "refuses.",
            keys=["trainer.placement.colocate_all", "trainer.algorithm.dynamic_sampling.type",
                  "trainer.algorithm.kl_ctrl.type", "trainer.resume_mode"], also=("RLC307", "RLC118"))
def one_step_async(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    if ctx.entry_runs != ONE_STEP_ASYNC:
        return
    t, a = cfg.trainer, cfg.trainer.algorithm
    trainer = f"SkyRL's one-step off-policy trainer ({ONE_STEP_ENTRY})"
    if t.placement.colocate_all:
        yield ctx.error("RLC306", "trainer.placement.colocate_all",
                        f"`trainer.placement.colocate_all` is true: {trainer} stops at start (the engines generate "
                        "the next step while the policy trains)",
                        hint="set trainer.placement.colocate_all=false and give the engines GPUs of their own")
    if a.dynamic_sampling.type is not None:
        yield ctx.warning("RLC307", "trainer.algorithm.dynamic_sampling.type",
                          f"`trainer.algorithm.dynamic_sampling.type` is {a.dynamic_sampling.type}, but {trainer} "
                          "never applies dynamic sampling: it trains every group it generates, and so does `rlcfg "
                          "run`", hint="set trainer.algorithm.dynamic_sampling.type=null to say so")
    if a.use_kl_in_reward and ctx.release != "pre-0.1.0" and a.kl_ctrl.type != "fixed":
        yield ctx.warning("RLC307", "trainer.algorithm.kl_ctrl.type",
                          f"`trainer.algorithm.kl_ctrl.type` is {a.kl_ctrl.type}, but {trainer} never builds the KL "
                          "controller: the reward's KL coefficient stays trainer.algorithm.kl_loss_coef, and so it "
                          "does in `rlcfg run`", hint="set trainer.algorithm.kl_ctrl.type=fixed to say so")
    if t.resume_mode not in (None, "none"):
        yield _refusal("trainer.resume_mode", t.resume_mode,
                       f"{trainer} resumes its own way (up to skyrl-train 0.1.0 it loads the weights and counts its "
                       "steps from 1 again; later ones wait for a whole epoch's batches, so a resume in the middle of "
                       "an epoch never ends); rlcfg would resume at the checkpoint's data position",
                       hint="set trainer.resume_mode=null")


def _loss_refusal(loss: str, ctx: RuleContext) -> Finding | None:
    """Why `rlcfg run` refuses the release's policy loss `loss`, or None where it runs it."""
    if loss == "cross_entropy" or (loss == "importance_sampling" and ctx.release not in MINI_BATCH_REDUCTION):
        return _refusal("trainer.algorithm.policy_loss_type", loss,
                        f"{_release_text(ctx)} sums this loss over the tokens whatever loss_reduction says (Tinker's "
                        "semantics); rlcfg aggregates every loss with loss_reduction"
                        + (", which the skyrl package's trainer does for importance_sampling from 0.2.0"
                           if loss == "importance_sampling" else ""))
    registered = POLICY_LOSSES_BY_RELEASE.get(ctx.release or "", POLICY_LOSSES)
    if loss not in POLICY_LOSSES_RUN or loss not in registered:
        return _refusal("trainer.algorithm.policy_loss_type", loss,
                        "a custom loss registered in code is not known to rlcfg; it runs "
                        f"{', '.join(x for x in POLICY_LOSSES_RUN if x in registered)} at {_release_text(ctx)}")
    return None


def _release_text(ctx: RuleContext) -> str:
    if ctx.release == "pre-0.1.0":
        return "skyrl-train before v0.1.0"
    if is_package(ctx.release):
        return label(ctx.release)
    return "skyrl-train's last commit" if ctx.release == "main" else f"skyrl-train {ctx.release}"


@RULES.rule("skyrl/stop-strings-multi-turn", "RLC302",
            "Conversation multi-turn with stop strings should append EOS after them (a warning).",
            keys=["generator.use_conversation_multi_turn", "generator.sampling_params.stop",
                  "generator.append_eos_token_after_stop_str_in_multi_turn"])
def stop_strings(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    g = cfg.generator
    if g.use_conversation_multi_turn and not g.append_eos_token_after_stop_str_in_multi_turn and (
            g.sampling_params.stop is not None or g.eval_sampling_params.stop is not None):
        yield ctx.warning("RLC302", "generator.append_eos_token_after_stop_str_in_multi_turn",
                          "stop strings are set with conversation multi-turn generation but "
                          "`generator.append_eos_token_after_stop_str_in_multi_turn` is false: responses that end on a "
                          "stop string lack the EOS token the chat template expects",
                          hint="set append_eos_token_after_stop_str_in_multi_turn: true",
                          related=["generator.sampling_params.stop"])


@RULES.rule("skyrl/inference-expert-parallel", "RLC305",
            "Inference expert parallelism > 1 needs DP × TP == EP.",
            keys=["generator.inference_engine_expert_parallel_size", "generator.inference_engine_data_parallel_size",
                  "generator.inference_engine_tensor_parallel_size"])
def inference_ep(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    g = cfg.generator
    ep, dp, tp = (g.inference_engine_expert_parallel_size, g.inference_engine_data_parallel_size,
                  g.inference_engine_tensor_parallel_size)
    if ep > 1 and dp * tp != ep:
        yield ctx.error("RLC305", "generator.inference_engine_expert_parallel_size",
                        f"`generator.inference_engine_expert_parallel_size` ({ep}) must equal data parallel × tensor "
                        f"parallel size ({dp} × {tp} = {dp * tp})",
                        hint=f"set inference_engine_expert_parallel_size: {dp * tp}",
                        related=["generator.inference_engine_tensor_parallel_size",
                                 "generator.inference_engine_data_parallel_size"])


@RULES.rule("skyrl/template-kwargs-unbatched", "RLC302",
            "generator.chat_template_kwargs needs batched: false (with batched generation the engine renders the "
            "template; SkyRLGymGenerator refuses the pair when it starts).",
            keys=["generator.chat_template_kwargs", "generator.batched"])
def template_kwargs_unbatched(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    g = cfg.generator
    if g.chat_template_kwargs and g.batched:
        # At the first argument: a mapping written in one override is located by its keys.
        yield ctx.error("RLC302", f"generator.chat_template_kwargs.{next(iter(g.chat_template_kwargs))}",
                        f"`generator.chat_template_kwargs` is set with `generator.batched: true`; {_release_text(ctx)} "
                        "accepts this at load but fails when the generator starts: batched generation leaves the "
                        "chat template to the engine, which takes no template arguments",
                        hint="set `generator.batched: false`, or drop chat_template_kwargs",
                        related=["generator.batched"])


@RULES.rule("skyrl/top-k", "RLC201", "sampling top_k is -1 (off) or at least 1.",
            keys=["generator.sampling_params.top_k", "generator.eval_sampling_params.top_k"])
def top_k(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    for which in ("sampling_params", "eval_sampling_params"):
        value = getattr(cfg.generator, which).top_k
        if value == 0 or value < -1:
            yield ctx.error("RLC201", f"generator.{which}.top_k",
                            f"`generator.{which}.top_k` must be -1 (off) or at least 1, got {value}",
                            hint="use -1 to sample from the whole vocabulary")


# ---- evaluation, checkpoints, logging -----------------------------------------------------------------------


@RULES.rule("skyrl/dataset-files", "RLC200",
            "One path alone as data.train_data or data.val_data: from skyrl-train 0.2.0 PromptDataset reads it as a "
            "list of one; before, it takes each character of the string for a file and fails.",
            keys=["data.train_data", "data.val_data"])
def dataset_files_rule(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    if ctx.release not in DATASET_STRING_ITERATED:
        return
    for key in ("train_data", "val_data"):
        value = getattr(cfg.data, key)
        if isinstance(value, str):
            yield ctx.error("RLC200", f"data.{key}", f"`data.{key}` is one path, {value!r}, not a list; "
                            f"{_release_text(ctx)} accepts this at load but fails when it reads the dataset: its "
                            "PromptDataset takes each character of the string for a file",
                            hint=f"write it as a list: `{key}: [{value!r}]`")


@RULES.rule("skyrl/eval-needs-data", "RLC307", "Evaluation settings have no effect without data.val_data.",
            keys=["trainer.eval_interval", "trainer.eval_before_train", "data.val_data"])
def eval_needs_data(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    t = cfg.trainer
    if cfg.data.val_data:
        return
    for key in ("eval_interval", "eval_before_train"):
        value = getattr(t, key)
        if ctx.is_set(f"trainer.{key}") and (value is True or (not isinstance(value, bool) and value > 0)):
            yield ctx.warning("RLC307", f"trainer.{key}",
                              f"`trainer.{key}` is {_v(value)} but `data.val_data` is empty, so nothing is evaluated",
                              hint="list validation files in data.val_data, or set eval_interval: -1 and "
                                   "eval_before_train: false", related=["data.val_data"])


@RULES.rule("skyrl/zero-epochs", "RLC201", "trainer.epochs 0: skyrl-train starts, and its training loop runs no "
                                           "step; `rlcfg run` refuses it.", keys=["trainer.epochs"], also=("RLC118",))
def zero_epochs(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    if cfg.trainer.epochs == 0:
        yield ctx.warning("RLC201", "trainer.epochs",
                          f"`trainer.epochs` is 0: {_release_text(ctx)} accepts it and starts, but its training loop "
                          "runs no step: the run trains nothing",
                          hint="set trainer.epochs: 1")
        yield _refusal("trainer.epochs", 0, "rlcfg runs at least one pass over the training data",
                       "set trainer.epochs: 1")


@RULES.rule("skyrl/max-ckpts-to-keep", "RLC201", "max_ckpts_to_keep must not be 0.",
            keys=["trainer.max_ckpts_to_keep"])
def max_ckpts(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    if cfg.trainer.max_ckpts_to_keep == 0:
        yield ctx.error("RLC201", "trainer.max_ckpts_to_keep",
                        "`trainer.max_ckpts_to_keep` is 0; it must be positive (keep the last N) or negative (keep all)",
                        hint="use -1 to keep every checkpoint, or e.g. 3 to keep the last three")


@RULES.rule("skyrl/resume-from-path", "RLC302",
            "resume_mode from_path needs resume_path, a global_step_N directory that exists where the job "
            "runs.", keys=["trainer.resume_mode", "trainer.resume_path"], also=("RLC308",))
def resume_from_path(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    t = cfg.trainer
    if t.resume_mode != "from_path":
        return
    if not t.resume_path:
        yield ctx.error("RLC302", "trainer.resume_mode",
                        f"`trainer.resume_mode` is `from_path` but `trainer.resume_path` is {_v(t.resume_path)}",
                        hint="set resume_path to a checkpoint directory such as <ckpt_path>/global_step_100, or use "
                             "resume_mode: latest", related=["trainer.resume_path"])
        return
    if not t.resume_path.rstrip("/").rsplit("/", 1)[-1].startswith("global_step_"):
        yield ctx.warning("RLC302", "trainer.resume_path",
                          f"`trainer.resume_path` ({t.resume_path!r}) does not name a `global_step_N` directory, "
                          "which skyrl-train expects", hint="point it at <ckpt_path>/global_step_N")
    elif not ctx.host.path_exists(t.resume_path):
        yield ctx.machine("trainer.resume_path", f"`trainer.resume_path` ({t.resume_path!r}) does not exist here",
                          hint="check the path on the machine that runs the job")


# ---- composition and the summary line -----------------------------------------------------------------------


# ---- what `rlcfg run` refuses for the value, not the key (the run ledger: schema/ledger.py) ---------------------


def _episode_refusals(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    """What rlcfg's episodes (rlcfg.runtime.episodes) do not run as SkyRL's generator does."""
    a, g = cfg.trainer.algorithm, cfg.generator
    env = cfg.environment.env_class
    if ctx.release not in EPISODE_RELEASES:
        yield _refusal("environment.env_class", env,
                       f"rlcfg steps episodes as the generator of skyrl-train 0.3.0 and later does; "
                       f"{_release_text(ctx)}'s generator checks the input's length after each turn and cuts the "
                       "response to a budget", "write the config for skyrl-train 0.3.0 or later, or the skyrl package")
    elif ctx.release in FINAL_OBSERVATION_KEPT and (a.use_tis or g.sampling_params.logprobs is not None):
        key, value = ("trainer.algorithm.use_tis", True) if a.use_tis else \
            ("generator.sampling_params.logprobs", g.sampling_params.logprobs)
        yield _refusal(key, value, f"{_release_text(ctx)}'s generator keeps no engine log-probs for episodes, so "
                                   "what reads them has none to read")
    if g.batched:
        yield _refusal("generator.batched", True,
                       f"SkyRL's batched generation steps the `{env}` environment once per prompt, whatever "
                       "max_turns says; rlcfg steps whole episodes", "set generator.batched=false")
    if a.advantage_estimator not in EPISODE_ESTIMATORS:
        yield _refusal("trainer.algorithm.advantage_estimator", a.advantage_estimator,
                       f"with `{env}` episodes rlcfg runs {', '.join(EPISODE_ESTIMATORS)}, whose advantages depend "
                       "on an episode's score alone; this estimator reads where each turn's reward lands among the "
                       "tokens, which rlcfg does not keep")
    buffer = overlong_buffer(cfg)
    if buffer is not None:
        key = "trainer.algorithm.overlong_buffer" + (".len" if a.overlong_buffer is not None else "_len")
        yield _refusal(key, buffer[0], "rlcfg's episodes compute no overlong penalty (an episode's length counts "
                                       "the environment's tokens)")
    releases, tags = EPISODE_STOP_CHECKS.get(env, ((), ()))
    if ctx.release in releases:
        for key, params in (("generator.sampling_params.stop", g.sampling_params),
                            ("generator.eval_sampling_params.stop", g.eval_sampling_params)):
            if not all(tag in (params.stop or ()) for tag in tags):
                yield _refusal(key, params.stop,
                               f"at {_release_text(ctx)} the {env} environment stops the run on a turn that goes on "
                               f"after {' or '.join(tags)}; only these stop strings rule that out",
                               f"set {key} to {list(tags)}")


def _refusal(path: str, value: Any, instead: str, hint: str | None = None) -> Finding:
    """An RLC118 note worded as the ledger's own (frontend._refusal_notes)."""
    from rlcfg.schema.validate import describe_value

    return Finding("RLC118", Severity.NOTE, path, f"`rlcfg run` refuses `{path}` = {describe_value(value)}: {instead}",
                   hint or "`rlcfg validate` and `rlcfg plan` check it; to run with rlcfg, choose a value it runs")


def _transformer_kwargs_refusals(options: Any, model: str, path: object) -> Iterator[Finding]:
    """The keys added to a Megatron model's transformer_config_kwargs that rlcfg does not compute as megatron-core
    does with them (SkyRL sets each on its TransformerConfig); and uneven first or last pipeline stages without a
    pipeline, which megatron-core refuses when SkyRL's workers build that config."""
    base = f"trainer.{model}.megatron_config.transformer_config_kwargs"
    kwargs = transformer_kwargs(options)
    honored = HONORED_TRANSFORMER_KWARGS + (ROUTING_CORRECTION_KWARGS if run_limits.routing_correction_family(path)
                                            else ())
    for key, value in kwargs.items():
        if key not in honored:
            yield _refusal(f"{base}.{key}", value,
                           "SkyRL sets it on megatron-core's TransformerConfig, and rlcfg builds that config itself, "
                           f"taking from these keys only {', '.join(HONORED_TRANSFORMER_KWARGS)} and, for a "
                           f"DeepSeek-V3 model, {', '.join(ROUTING_CORRECTION_KWARGS)}", "remove it")
    if options.megatron_config.pipeline_model_parallel_size == 1:
        for key in ("num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage"):
            if kwargs.get(key) is not None:
                yield _refusal(f"{base}.{key}", kwargs[key],
                               f"with `trainer.{model}.megatron_config.pipeline_model_parallel_size` 1, megatron-core's "
                               "TransformerConfig stops SkyRL's workers at start-up unless it is the model's whole "
                               "layer count (its uneven-pipeline check finds layers left over and no stage for them)",
                               "remove it, or set a pipeline_model_parallel_size above 1")


def _runtime_limits(cfg: Any, release: str | None) -> Iterator[Finding]:
    """What the runtime's preflight refuses of the roles lower.py builds: the policy, the reference when its
    log-probs count (kl_loss_coef > 0) and the critic when GAE trains it, each on trainer.strategy (a critic on
    Megatron is an error of its own: skyrl-train does not build one)."""
    t = cfg.trainer
    if t.strategy == "deepspeed":
        yield _refusal("trainer.strategy", t.strategy, run_limits.DEEPSPEED, "set `trainer.strategy: fsdp2`")
        return
    models = ["policy"] + (["ref"] if ref_in_use(cfg) and t.algorithm.kl_loss_coef > 0 else [])
    if t.strategy == "megatron":
        paths = [(f"trainer.{model}.model.path", getattr(t, model).model.path or t.policy.model.path)
                 for model in models]
        for key, path, why in run_limits.megatron_unbuilt_models(paths,
                                                                 corrections_mapped=routing_correction_read(release)):
            yield _refusal(key, path, why, "set `trainer.strategy: fsdp2`")
        for model, (_key, path) in zip(models, paths):
            yield from _transformer_kwargs_refusals(getattr(t, model), model, path)
    # The critic's adapters need no check of their own: skyrl-train builds no critic on Megatron and passes the
    # critic no init method.
    adapters = t.policy.model.lora
    if adapters.rank > 0 and t.strategy == "megatron":
        yield from _megatron_lora_refusals(cfg, release)
    elif adapters.rank > 0 and adapters.init_method not in run_limits.LORA_INITS:
        yield _refusal("trainer.policy.model.lora.init_method", adapters.init_method,
                       f"rlcfg starts LoRA adapters with PEFT's {' or '.join(run_limits.LORA_INITS)} "
                       "initialisation only", f"set it to {run_limits.LORA_INITS[0]}")


def _megatron_lora_refusals(cfg: Any, release: str | None) -> Iterator[Finding]:
    """The policy's LoRA settings that rlcfg's Megatron adapters cannot train as Megatron-Bridge's LoRA does (its
    experts' shared adapters split over expert tensor-parallel ranks among them), and Megatron-Bridge's canonical
    LoRA (separate q, k, v, gate and up adapters), which rlcfg does not build."""
    t = cfg.trainer
    adapters = t.policy.model.lora
    base = "trainer.policy.model.lora"
    targets_key, excluded_key = lora_module_keys("policy", release)
    targets, excluded = lora_modules(cfg, "policy", release)
    sizes = t.policy.megatron_config
    expert_tp = sizes.expert_tensor_parallel_size or sizes.tensor_model_parallel_size
    keys = {"lora.dropout": f"{base}.dropout", "lora.target_modules": targets_key,
            "lora.exclude_modules": excluded_key, "lora.init": f"{base}.init_method",
            # megatron-core's expert tensor parallel size follows the tensor parallel size when left out
            "parallelism.etp": "trainer.policy.megatron_config." + ("expert_tensor_parallel_size"
                                                                    if sizes.expert_tensor_parallel_size
                                                                    else "tensor_model_parallel_size")}
    for name, value, why, hint in run_limits.megatron_lora_problems(
            dropout=adapters.dropout, target_modules=targets, exclude_modules=excluded, init=adapters.init_method,
            experts=run_limits.mixture_of_experts(t.policy.model.path), expert_tp=expert_tp):
        yield _refusal(keys[name], value, why, hint)
    lora_type = t.policy.megatron_config.lora_config.lora_type
    if lora_type != "lora":
        yield _refusal("trainer.policy.megatron_config.lora_config.lora_type", lora_type,
                       "rlcfg builds Megatron-Bridge's `lora` adapters (one per fused layer) only",
                       "set it to lora")


@RULES.rule("skyrl/run-refusals", "RLC118",
            "`rlcfg run` refuses values it cannot run with skyrl-train's meaning: environments it does not run "
            "(it runs gsm8k, gsm8k_multi_turn in one turn, aime, lcb, the multiply and LLM-as-a-judge "
            "examples', text2sql and search), "
            "more than one turn outside text2sql and search, their episodes at releases before 0.3.0 (at 0.3.0 "
            "with engine log-probs), in batched "
            "generation, with estimators that read where each turn's reward lands, with an overlong penalty, or "
            "(where the environment checks them) without its stop strings; custom advantage estimators and "
            "policy losses, the Tinker-style summed losses, the prompt_mean reduction, schedulers it lacks (on "
            "Megatron, any but constant_with_warmup), engine_init_kwargs it does not pass, keys added to the "
            "sampling parameters, GRPO on groups of one, use_tis with a loss that ignores it (up to v0.3.0), the "
            "off-policy sequence mask where a masked sequence leaves the token mean's denominator (skyrl-train, "
            "skyrl 0.1.0), trainer.fully_async.enabled under an entrypoint rlcfg does not know as the "
            "fully-asynchronous one, "
            "overlong filtering with stop strings, and what rlcfg's runtime does not do "
            "(rlcfg/run_limits.py): the deepspeed strategy, model families it does "
            "not build on Megatron, Megatron LoRA it does not train as Megatron-Bridge does (with the experts' "
            "shared adapters split over expert tensor-parallel ranks, with dropout, excluded modules, targets "
            "other than linear_qkv, linear_proj, linear_fc1 and linear_fc2, an init other than kaiming, "
            "canonical_lora), "
            "FSDP LoRA initialisations other than kaiming and gaussian; and "
            "vision-language models.",
            keys=["trainer.policy.model.path", "trainer.ref.model.path", "trainer.critic.model.path",
                  "environment.env_class", "generator.max_turns", "generator.batched", "trainer.algorithm.use_tis",
                  "trainer.algorithm.overlong_buffer_len", "trainer.algorithm.overlong_buffer.len",
                  "generator.eval_sampling_params", "trainer.algorithm.advantage_estimator",
                  "trainer.algorithm.policy_loss_type",
                  "trainer.algorithm.off_policy_correction.sequence_mask_metric", "trainer.fully_async.enabled",
                  "trainer.algorithm.loss_reduction", "trainer.algorithm.use_entropy_loss",
                  "trainer.policy.optimizer_config.scheduler",
                  "generator.engine_init_kwargs", "generator.sampling_params", "generator.apply_overlong_filtering",
                  "trainer.strategy",
                  "trainer.policy.model.lora.rank", "trainer.policy.model.lora.init_method",
                  "trainer.policy.model.lora.dropout", "trainer.policy.model.lora.target_modules",
                  "trainer.policy.model.lora.exclude_modules", "trainer.target_modules", "trainer.exclude_modules",
                  "trainer.policy.megatron_config.lora_config.lora_type",
                  "trainer.policy.megatron_config.expert_tensor_parallel_size"])
def run_refusals(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    t, a, g = cfg.trainer, cfg.trainer.algorithm, cfg.generator
    models = [(f"trainer.{name}.model.path", getattr(t, name).model.path) for name in ("policy", "ref", "critic")]
    for key, path, why in run_limits.vision_language_models(models):
        yield _refusal(key, path, f"a vision-language model ({why}); {run_limits.VISION_LANGUAGE}",
                       run_limits.vision_language_hint(key, path))
    env = cfg.environment.env_class
    if env not in ENVIRONMENT_REWARDS:
        yield _refusal("environment.env_class", env,
                       "rlcfg scores each response as the gsm8k, gsm8k_multi_turn (in one turn) or aime environment "
                       "does (their answer against the ground truth), as lcb does (the program against the task's "
                       "tests), as the multiply and LLM-as-a-judge examples' do, and steps text2sql's and search's "
                       "episodes; other SkyRL-Gym environments are not run")
    elif env in EPISODE_ENVIRONMENTS:
        yield from _episode_refusals(cfg, ctx)
    elif g.max_turns > 1:
        yield _refusal("generator.max_turns", g.max_turns,
                       f"rlcfg steps whole episodes only through the {' and '.join(EPISODE_ENVIRONMENTS)} "
                       f"environments; with `{env}` it generates one response per prompt")
    if env in ENTRY_ENVIRONMENTS and ctx.entry_runs != ENTRY_ENVIRONMENTS[env]:
        main = ENTRY_MODULES[env]
        yield _refusal("environment.env_class", env,
                       f"the `{env}` environment is an example's own, which only that example's entry module as "
                       f"released ({main}) registers, and this launch does not run it",
                       f"start the run with the example's entry module as SkyRL released it (`python -m "
                       f"examples.train.{env}.{main}`; skyrl-train's `examples.{env}.{main}`)")
    # A name the release does not register is a custom estimator's, whatever it is called.
    runnable = [e for e in ADVANTAGE_ESTIMATORS_BY_RELEASE.get(ctx.release or "", ADVANTAGE_ESTIMATORS)
                if e in ADVANTAGE_ESTIMATORS_RUN]
    registered = entry_estimator(ctx.entry_runs)
    if a.advantage_estimator == registered == "no_op":
        if critic_in_use(cfg):
            yield _refusal("trainer.algorithm.advantage_estimator", a.advantage_estimator,
                           "the distillation example's estimator gives a critic the token rewards as its returns; "
                           "rlcfg's token-reward advantages train no critic", "train without a critic")
    elif a.advantage_estimator == registered:
        if a.use_kl_in_reward or critic_in_use(cfg):
            yield _refusal("trainer.algorithm.advantage_estimator", a.advantage_estimator,
                           "the example's estimator sums each response's token rewards, KL penalties included, into "
                           "one advantage for all its tokens and gives a critic those as returns; rlcfg runs it with "
                           "the KL as a loss (or none) and no critic",
                           "use `trainer.algorithm.use_kl_loss=true` and `use_kl_in_reward=false`, with no critic")
    elif a.advantage_estimator not in runnable:
        yield _refusal("trainer.algorithm.advantage_estimator", a.advantage_estimator,
                       "a custom estimator registered in code is not known to rlcfg; it runs "
                       f"{', '.join(runnable)} at {_release_text(ctx)}")
    elif a.advantage_estimator == "grpo" and g.n_samples_per_prompt == 1:
        yield _refusal("trainer.algorithm.advantage_estimator", a.advantage_estimator,
                       "with n_samples_per_prompt 1 skyrl-train's GRPO advantage is the score itself (mean 0, std 1 "
                       "for a group of one); rlcfg's GRPO gives such a group advantage 0")
    loss = policy_loss(cfg)[0]
    # The entry module's own loss runs with the reduction it names (lower._algorithm).
    refusal = None if loss == entry_policy_loss(ctx.entry_runs) else _loss_refusal(loss, ctx)
    if refusal is not None:
        yield refusal
    elif a.use_tis and ctx.release in ("0.1.0", "0.2.0", "0.3.0") and loss not in TIS_LOSSES_UNTIL_030:
        yield _refusal("trainer.algorithm.policy_loss_type", loss,
                       f"{_release_text(ctx)} applies use_tis inside the regular/dual_clip loss only, so this loss "
                       "runs there without truncated importance sampling; rlcfg would apply it")
    if ctx.entry_runs != "fully_async" and ctx.release in PACKAGE_FROM_030 and t.fully_async.enabled:
        # The fully-asynchronous trainer stops unless this is on, so it tells such a run where rlcfg does not
        # recognise the entry module; main_base with it on trains synchronously but keeps the engines' KV cache
        # across weight updates.
        yield _refusal("trainer.fully_async.enabled", True,
                       "rlcfg runs fully-asynchronous training only under the entrypoint that does it, "
                       f"{FULLY_ASYNC_ENTRY} of the `skyrl` package as released; this launch "
                       "runs another (or an edited copy), which rlcfg cannot tell from a synchronous one",
                       hint=f"start the run with `python -m {FULLY_ASYNC_ENTRY}` from SkyRL's "
                            "source tree (where rlcfg can read it), or set trainer.fully_async.enabled=false")
    sequence_mask = a.off_policy_correction.sequence_mask_metric
    if sequence_mask is not None and ctx.release not in MINI_BATCH_REDUCTION:
        yield _refusal("trainer.algorithm.off_policy_correction.sequence_mask_metric", sequence_mask,
                       f"{_release_text(ctx)} drops a masked sequence's tokens from its token mean's denominator; "
                       "rlcfg's sequence mask keeps the denominators, as the `skyrl` package does from 0.2.0")
    if a.loss_reduction == "prompt_mean":
        yield _refusal("trainer.algorithm.loss_reduction", a.loss_reduction,
                       f"{_release_text(ctx)} averages the loss per prompt's group of responses; rlcfg has no such "
                       "reduction")
    elif a.use_entropy_loss and loss_normalization(a.loss_reduction, ctx.release) == "mini-batch":
        yield _refusal("trainer.algorithm.use_entropy_loss", a.use_entropy_loss,
                       f"{_release_text(ctx)} reduces the policy loss over the whole mini-batch but the entropy bonus "
                       "per micro-batch; rlcfg reduces both one way")
    for role in ("policy", "critic"):
        scheduler = getattr(t, role).optimizer_config.scheduler
        if scheduler not in SCHEDULERS and (role == "policy" or critic_trained(cfg)):
            yield _refusal(f"trainer.{role}.optimizer_config.scheduler", scheduler,
                           f"rlcfg's learning-rate schedules reproduce {', '.join(SCHEDULERS)} only")
        elif t.strategy == "megatron" and scheduler != "constant_with_warmup" and role == "policy":
            # distributed/megatron/optimizer.py get_megatron_optimizer_param_scheduler raises on any other.
            yield _refusal(f"trainer.{role}.optimizer_config.scheduler", scheduler,
                           "skyrl-train's Megatron strategy stops at start unless it is constant_with_warmup")
    known = SGLANG_KWARGS if g.backend == "sglang" else VLLM_KWARGS
    for key in (g.engine_init_kwargs or {}):
        if key not in known:
            yield _refusal(f"generator.engine_init_kwargs.{key}", g.engine_init_kwargs[key],
                           f"rlcfg hands the {g.backend} engine only {', '.join(sorted(known))} of engine_init_kwargs")
    buffer = overlong_buffer(cfg)
    buffer_key = "trainer.algorithm.overlong_buffer.len" if a.overlong_buffer is not None else \
        "trainer.algorithm.overlong_buffer_len"
    if buffer is not None and buffer[0] > 0:
        # DAPOTrainer punishes in postprocess_generator_output, after the generator has zeroed what did not stop and
        # before the base class filters zero-variance groups, which therefore see the punished rewards.
        if g.zero_reward_on_non_stop:
            yield _refusal(buffer_key, buffer[0],
                           "with zero_reward_on_non_stop the DAPO entrypoint punishes a response cut at the limit "
                           "below 0 (0 − the penalty factor); rlcfg's zeroing comes after the punishment and leaves "
                           "it at 0")
        if a.zero_variance_filter:
            yield _refusal(buffer_key, buffer[0],
                           "the DAPO entrypoint's zero-variance filter judges the punished rewards; rlcfg's judges "
                           "the environment's")
    if g.apply_overlong_filtering and g.sampling_params.stop:
        yield _refusal("generator.apply_overlong_filtering", True,
                       "with stop strings skyrl-train's overlong filtering (generators/utils.apply_overlong_filtering) "
                       "also masks the responses that end on a stop string, since they do not end with the EOS "
                       "token; rlcfg masks only the responses cut at the length limit")
    # Keys added to the sampling parameters (`+generator.sampling_params.presence_penalty=...`): skyrl-train hands every
    # key of the block to the engine's SamplingParams (get_vllm_sampling_params, get_sglang_sampling_params).
    for block in ("sampling_params", "eval_sampling_params"):
        known_keys = set(type(getattr(g, block)).model_fields)
        added = sorted({path[2] for path in ctx.tree.written_paths()
                        if len(path) >= 3 and path[:2] == ("generator", block) and path[2] not in known_keys}, key=str)
        for key in added:
            yield _refusal(f"generator.{block}.{key}", ctx.tree.get(("generator", block, key)),
                           "skyrl-train hands it to the engine's sampling parameters; rlcfg's rollout samples with "
                           "max_generate_length, temperature, top_p, top_k, min_p and stop only")
    yield from _runtime_limits(cfg, ctx.release)
