"""What ROLL derives from a config (a worker's GPUs per process, whether the reference and the critic run, the
schedule's length, the effective sequence length, ...) and the names rlcfg runs with ROLL's meaning: read by the
rules, the lowering and the dialect alike, declared here once. Each function is a plain computation on the
validated models; nothing here reports or lowers anything.
"""

from __future__ import annotations

import math
from typing import Any, Iterator

from rlcfg.dialects.roll.models import device_ids

TRAIN_STRATEGIES = ("megatron_train", "fsdp2_train", "deepspeed_train", "diffusion_deepspeed_train")


ROLLOUT_STRATEGIES = ("vllm", "sglang")


_KEEP_GPUS_PER_WORKER = ("hf_infer", "vllm", "sglang")  # ROLL forces 1 for every other strategy


ENGINE_NAMES = {"megatron_train": "Megatron", "megatron_infer": "Megatron", "fsdp2_train": "FSDP2",
                 "fsdp2_infer": "FSDP2", "vllm": "vLLM", "sglang": "SGLang", "hf_infer": "transformers",
                 "deepspeed_train": "DeepSpeed", "deepspeed_infer": "DeepSpeed",
                 "diffusion_deepspeed_train": "DeepSpeed"}


def strategy_name(worker: Any) -> str | None:
    args = getattr(worker, "strategy_args", None)
    return getattr(args, "strategy_name", None) if args is not None else None


def strategy_value(worker: Any, key: str, default: Any = None) -> Any:
    """A strategy_config value as the strategy reads it (null strategy_config means {})."""
    args = getattr(worker, "strategy_args", None)
    config = getattr(args, "strategy_config", None) if args is not None else None
    if config is None:
        return default
    if key in type(config).model_fields:
        value = getattr(config, key)
    else:
        value = (config.model_extra or {}).get(key, default)
    return default if value is None else value


def gpus_per_worker(worker: Any) -> int:
    """num_gpus_per_worker after WorkerConfig.__post_init__ (RO-13)."""
    name = strategy_name(worker)
    if name == "vllm":
        return int(strategy_value(worker, "tensor_parallel_size", 1)) * int(strategy_value(worker,
                                                                                      "pipeline_parallel_size", 1))
    if name is not None and name not in _KEEP_GPUS_PER_WORKER:
        return 1
    return worker.num_gpus_per_worker


def megatron_sizes(worker: Any) -> tuple[int, int, int]:
    return (int(strategy_value(worker, "tensor_model_parallel_size", 1)),
            int(strategy_value(worker, "pipeline_model_parallel_size", 1)),
            int(strategy_value(worker, "context_parallel_size", 1)))


def schedule_length(cfg: Any, path: str, data_parallel: int) -> int:
    """The length ROLL gives a training worker's LR schedule (its max_steps): set_max_steps (base_config.py) counts
    the run's backward batches per rank (ppo_epochs for the actor only), the strategy then divides by the
    data-parallel size."""
    args = getattr(cfg, path).training_args
    per_rank_batch = args.per_device_train_batch_size * args.gradient_accumulation_steps
    samples_per_step = cfg.rollout_batch_size * cfg.num_return_sequences_in_group
    epochs = cfg.ppo_epochs if path == "actor_train" else 1
    return max(1, cfg.max_steps * samples_per_step * epochs // per_rank_batch) // data_parallel


def warmup_steps(args: Any, length: int) -> int:
    """TrainingArguments.get_warmup_steps: warmup_steps when above 0, else ceil(length × warmup_ratio)."""
    return args.warmup_steps if args.warmup_steps > 0 else math.ceil(length * args.warmup_ratio)


def reference_on(cfg: Any) -> bool:
    return bool(cfg.enable_reference or cfg.use_kl_loss or cfg.init_kl_coef > 0)


def critic_on(cfg: Any) -> bool:
    return cfg.adv_estimator == "gae"


def is_agentic(cfg: Any) -> bool:
    """An AgenticConfig (env managers instead of a prompt dataset); otherwise an RLVRConfig."""
    return hasattr(cfg, "train_env_manager")


def rollout_only(cfg: Any) -> bool:
    """A config for ROLL's rollout-only start scripts (start_rlvr_rollout_pipeline.py,
    start_agentic_rollout_pipeline.py): actor_train has neither GPUs nor a strategy, so nothing trains."""
    return cfg.actor_train.device_mapping is None and cfg.actor_train.strategy_args is None


def group_size(cfg: Any) -> int:
    """Responses per prompt: RLVR's num_return_sequences_in_group; the agentic pipeline forces 1."""
    return getattr(cfg, "num_return_sequences_in_group", 1)


def workers(cfg: Any) -> Iterator[tuple[str, Any]]:
    """Every worker section: the four roles, the reward workers, validation (RLVR) and the env managers
    (agentic)."""
    for name in ("actor_train", "actor_infer", "reference", "critic", "reward"):
        worker = getattr(cfg, name, None)
        if worker is not None:  # the agentic pipeline's reward worker is optional
            yield name, worker
    for name in ("validation", "reward_model", "train_env_manager", "val_env_manager"):
        worker = getattr(cfg, name, None)
        if worker is not None:
            yield name, worker
    for key, worker in (getattr(cfg, "rewards", None) or {}).items():
        yield f"rewards.{key}", worker


def placed_workers(cfg: Any) -> Iterator[tuple[str, Any, tuple[int, ...]]]:
    """The workers the RLVR pipeline starts that hold GPUs, with their ids."""
    for path, worker in workers(cfg):
        if path == "validation":
            continue  # validation generates on actor_infer's cluster
        if path == "reference" and not reference_on(cfg):
            continue
        if path == "critic" and not critic_on(cfg):
            continue
        ids = device_ids(worker)
        if ids:
            yield path, worker, ids


def effective_sequence_length(cfg: Any) -> int | None:
    if cfg.sequence_length is not None:
        return cfg.sequence_length
    if cfg.response_length is not None and cfg.prompt_length is not None:
        return cfg.response_length + cfg.prompt_length
    return None


def describe_config(cfg: Any) -> str:
    parts = []
    train = strategy_name(cfg.actor_train)
    if train:
        parts.append(f"{ENGINE_NAMES.get(train, train)} training")
    infer = strategy_name(cfg.actor_infer)
    if infer:
        parts.append(f"{ENGINE_NAMES.get(infer, infer)} rollout")
    gpus: set[int] = set()
    for _path, _worker, ids in placed_workers(cfg):
        gpus.update(ids)
    if gpus:
        parts.append(f"{len(gpus)} GPU" + ("s" if len(gpus) != 1 else ""))
    return ", ".join(parts)


# Strategies rlcfg's own runtime can run without a GPU: FSDP2 over gloo, and transformers generate.
CPU_CAPABLE_STRATEGIES = ("fsdp2_train", "fsdp2_infer", "hf_infer")


def cpu_capable(cfg: Any) -> bool:
    """Every worker the pipeline starts with a model uses a strategy that also runs on CPU."""
    for path, worker in workers(cfg):
        if path == "validation" or (path == "reference" and not reference_on(cfg)) \
                or (path == "critic" and not critic_on(cfg)):
            continue
        name = strategy_name(worker)
        if name is not None and name not in CPU_CAPABLE_STRATEGIES:
            return False
    return True


def unrun_pipeline(cfg: Any) -> tuple[str, str] | None:
    """The ROLL pipelines rlcfg validates but `rlcfg run` does not run, with why (Dialect.unrun_pipeline); the
    lowering refuses the same ones."""
    if is_agentic(cfg):
        return ("ROLL agentic pipeline", "rlcfg's runtime has no environment managers; run it with ROLL's "
                                         "examples/start_agentic_pipeline.py")
    if cfg.is_pure_opd or cfg.use_opd:
        return ("ROLL on-policy distillation pipeline", "`is_pure_opd` / `use_opd` score with the teacher's KL, and "
                                                        "rlcfg's runtime has no teacher-KL reward")
    if rollout_only(cfg):
        return ("ROLL rollout-only pipeline", "actor_train has no GPUs and no strategy, so nothing trains; rlcfg "
                                              "runs training pipelines only")
    return None


# Hugging Face scheduler names (training_args.lr_scheduler_type) → rlcfg's three shapes. Warmup is separate in
# rlcfg, so constant_with_warmup is constant; polynomial decays linearly at its default power 1.0. Schedules
# rlcfg has no shape for (inverse_sqrt, reduce_lr_on_plateau, warmup_stable_decay) are refused.
SCHEDULERS = {"linear": "linear", "polynomial": "linear", "cosine": "cosine", "cosine_with_restarts": "cosine",
              "cosine_with_min_lr": "cosine", "constant": "constant", "constant_with_warmup": "constant"}


# ROLL's ActorPGWorker (roll/pipeline/rlvr/actor_pg_worker.py): the standard actor's loss with the policy-gradient
# term chosen by actor_train.pg_variant (default vanilla) and the token ratio always. rlcfg runs it at the releases
# whose copy shares the standard actor's loss_func otherwise (v0.2.1 on; v0.1.3's lacks its ActorWorker's
# loss_scale and rollout importance sampling), with the variants it has: topr, and ppo (the standard clipped loss)
# except at v0.2.1, whose _compute_ppo_loss stops on `.item().detach()`.
PG_WORKER = "roll.pipeline.rlvr.actor_pg_worker.ActorPGWorker"
PG_WORKER_RELEASES = ("v0.2.1", "v0.3.0", "main")
PG_VARIANTS = {"topr": PG_WORKER_RELEASES, "ppo": ("v0.3.0", "main")}


def pg_variant(cfg: Any) -> str | None:
    """The loss variant of actor_train's ActorPGWorker, None for the standard actor."""
    worker = cfg.actor_train
    return (worker.pg_variant or "vanilla") if worker.worker_cls == PG_WORKER else None


# ROLL's kl_penalty names for the reward-side KL (functionals.compute_approx_kl). `full` (F.kl_div summed over the
# last axis) has no rlcfg estimator and is refused.
KL_ESTIMATORS = {"kl": "k1", "abs": "abs", "mse": "k2"}


# ROLL's reward workers that score with a rule rlcfg also has. The others (code sandbox, IFEval and the general
# rule worker, CrossThinkQA, LLM judges) have no rlcfg equivalent and are refused.
REWARD_FUNCTIONS = {"MathRuleRewardWorker": "math"}


MATH_RULE_WORKER = "roll.pipeline.rlvr.rewards.math_rule_reward_worker.MathRuleRewardWorker"


def reward_kl_on(cfg: Any) -> bool:
    """Whether compute_token_reward subtracts a KL penalty: add_token_level_kl with a reference (without one ROLL
    mocks the reference log-probs with the old ones, so the penalty is 0) and init_kl_coef > 0."""
    return bool(cfg.add_token_level_kl and reference_on(cfg) and cfg.init_kl_coef > 0)


def reward_class(worker: Any) -> str:
    return (worker.worker_cls or "").rsplit(".", 1)[-1]


def loads_reward_model(worker: Any) -> bool:
    """Whether `rlcfg run` runs a reward worker as a model on GPUs: one with a strategy and GPUs, unless it is a rule
    rlcfg scores with (the math rule), which ROLL runs without building its strategy, whatever strategy_args say."""
    return (worker.strategy_args is not None and bool(device_ids(worker))
            and reward_class(worker) not in REWARD_FUNCTIONS)


def chosen_reward_domain(cfg: Any) -> str | None:
    """The reward domain the lowering describes when `rewards` has several (which `rlcfg run` refuses): the one
    with the largest share of actor_train.data_args.domain_interleave_probs (by its name or a tag it scores),
    else the first."""
    rewards = dict(cfg.rewards or {})
    if not rewards:
        return None
    train_data = cfg.actor_train.data_args
    shares = dict(train_data.domain_interleave_probs or {}) if train_data is not None else {}

    def share(key: str) -> float:
        names = [key, *(rewards[key].tag_included or [])]
        return max((float(shares.get(name) or 0) for name in names), default=0.0)

    return max(rewards, key=share)  # the first of equal shares


FILTER_THRESHOLDS = {"mean_filter": ("threshold_down", "threshold_up"), "std_filter": ("std_threshold",)}


def worker_env(cfg: Any, worker: Any) -> dict[str, str]:
    """A worker's environment variables as ROLL starts it: BaseConfig.__post_init__ adds the pipeline's
    system_envs to the worker's where the worker does not set the name, and Cluster._create_workers hands them to
    Ray's runtime_env env_vars. (ROLL copies them only into actor_train, actor_infer, reference and critic; its
    reward workers get the pipeline's too, from the environment of the driver that starts Ray after loading the
    config.) lower.py carries the same mapping into each Role."""
    return {**dict(cfg.system_envs or {}), **dict(worker.system_envs or {})}


def frozen_prefixes(worker: Any) -> tuple[str, ...]:
    """model_args.freeze_module_prefix as ROLL reads it: ModelArguments.__post_init__ splits it at commas and
    strips each item, and model_providers.freeze_model turns off requires_grad of every parameter whose name
    starts with one of them (a prefix that matches nothing freezes nothing, silently)."""
    written = worker.model_args.freeze_module_prefix
    return () if written is None else tuple(item.strip() for item in written.split(","))


# rlcfg's backend of each ROLL strategy (lower.py builds its roles with it, and the runtime's preflight names a
# strategy back from it).
BACKEND_OF_STRATEGY = {
    "megatron_train": "megatron", "megatron_infer": "megatron",
    "fsdp2_train": "fsdp2", "fsdp2_infer": "fsdp2",
    "deepspeed_train": "deepspeed", "deepspeed_infer": "deepspeed", "diffusion_deepspeed_train": "deepspeed",
    "vllm": "vllm", "sglang": "sglang", "hf_infer": "hf",
}


MODEL_BACKENDS = ("fsdp2", "megatron")  # the runtime's backends for a model it does not roll out with
