"""ROLL (RLVR pipeline) → Experiment.

ROLL's workers map to rlcfg's roles: actor_train → actor, actor_infer → rollout, reference → reference (only
when the pipeline turns it on), critic → critic (only for adv_estimator gae), and the `rewards` mapping →
reward. Every worker that holds GPUs names them in `device_mapping`, read with the dialect's own grammar
(rlcfg.schema.roll_device_mapping, through roll_rules.device_ids) and handed on as explicit global GPU ids;
workers whose id sets are identical share their GPUs, which is ROLL's colocation.

What ROLL derives or rewrites after loading is applied here, so that the Experiment says what ROLL runs:
  - num_gpus_per_worker: 1 for training and FSDP2/Megatron strategies, tp × pp for vLLM, as written for
    SGLang and hf_infer (RO-13); world_size = len(device_mapping) / num_gpus_per_worker (RO-15);
  - model paths: all of actor_train, actor_infer and reference get `pretrain` unless all three name their
    model; the critic falls back to reward_pretrain (RO-20);
  - max_new_tokens = sequence_length − prompt_length, with sequence_length = prompt_length + response_length
    when unset (RO-2, RO-29; the validation lengths likewise), and the group size is
    num_return_sequences_in_group whatever actor_infer's num_return_sequences says (RO-26);
  - the reference runs when use_kl_loss, init_kl_coef > 0 or enable_reference (RO-21);
  - num_nodes is derived from the highest GPU id and num_gpus_per_node (RO-6);
  - the seed's global train batch: per_device_train_batch_size × gradient_accumulation_steps × DP, with DP =
    world_size / ulysses_size (FSDP2, DeepSpeed) or world_size / (tp × pp × cp) (Megatron).

The algorithm keeps ROLL's meanings (rlvr_pipeline.py, roll/utils/functionals.py, actor_worker.py): GRPO is always
group mean and std normalisation, reward_clip clamps the normalised reward, a KL in the reward is subtracted per
token from the normalised score, the sample masks, length weights, advantage clip and rl_loss_coef are ROLL's.
Settings rlcfg's runtime does not compute are refused by the run ledger (their fates in rlcfg/schema/roll.py);
combinations of honored settings that the runtime would compute with another meaning, and values it has no
implementation for, stop plan and run here with a usage error (`_refuse`).
"""

from __future__ import annotations

import math
from typing import Any

from rlcfg.ir import (KL, AdvantageOptions, Algorithm, Checkpointing, Cluster, Data, Experiment, FilterSpec,
                      KLController, Logging,
                      Model, Offload, Optimizer, Parallelism, PolicyOptions, Resources, RewardShaping, Role, Sampling,
                      SampleWeighting, Schedule)
from rlcfg.schema.roll_rules import (critic_on, device_ids, effective_sequence_length, gpus_per_worker,
                                     megatron_sizes, reference_on, rollout_only, schedule_length, strategy_name,
                                     strategy_value, warmup_steps)
from rlcfg.source.yaml_loader import UsageError

BACKEND_OF_STRATEGY = {
    "megatron_train": "megatron", "megatron_infer": "megatron",
    "fsdp2_train": "fsdp2", "fsdp2_infer": "fsdp2",
    "deepspeed_train": "deepspeed", "deepspeed_infer": "deepspeed", "diffusion_deepspeed_train": "deepspeed",
    "vllm": "vllm", "sglang": "sglang", "hf_infer": "hf",
}
ROLE_OF_WORKER = {"actor_train": "actor", "actor_infer": "rollout", "reference": "reference", "critic": "critic"}
_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
# Hugging Face scheduler names (training_args.lr_scheduler_type) → rlcfg's three shapes. Warmup is separate in
# rlcfg, so constant_with_warmup is constant; polynomial decays linearly at its default power 1.0. Schedules
# rlcfg has no shape for (inverse_sqrt, reduce_lr_on_plateau, warmup_stable_decay) are refused.
_SCHEDULERS = {"linear": "linear", "polynomial": "linear", "cosine": "cosine", "cosine_with_restarts": "cosine",
               "cosine_with_min_lr": "cosine", "constant": "constant", "constant_with_warmup": "constant"}
# The names mcore_adapter's get_megatron_lr_scheduler maps to Megatron's constant, linear and cosine decay styles.
_MEGATRON_SCHEDULERS = ("constant", "constant_with_warmup", "linear", "cosine", "cosine_with_min_lr")
# ROLL's kl_penalty names for the reward-side KL (functionals.compute_approx_kl). `full` (F.kl_div summed over the
# last axis) has no rlcfg estimator and is refused.
_KL_ESTIMATORS = {"kl": "k1", "abs": "abs", "mse": "k2"}
# ROLL's reward workers that score with a rule rlcfg also has. The others (code sandbox, IFEval and the general
# rule worker, CrossThinkQA, LLM judges) have no rlcfg equivalent and are refused.
_REWARD_FUNCTIONS = {"MathRuleRewardWorker": "math"}
# ROLL's chat templates that are the tokenizer's own apply_chat_template (roll/datasets/chat_template.py registers
# both names on native_chat_template).
_TOKENIZER_TEMPLATES = ("native", "qwen2_5")


def backend_of(worker: Any, default: str = "fsdp2_train") -> str:
    # A worker without strategy_args gets ROLL's StrategyArguments default, fsdp2_train (deepspeed_train before
    # ROLL 0.3).
    return BACKEND_OF_STRATEGY[strategy_name(worker) or default]


def _model(cfg: Any, path: str) -> Model:
    worker = getattr(cfg, path)
    own = worker.model_args.model_name_or_path
    # actor_train, actor_infer and reference fall back to pretrain, the critic to reward_pretrain (RO-20).
    fallback = {"critic": cfg.reward_pretrain}.get(path, cfg.pretrain)
    trio = ("actor_train", "actor_infer", "reference")
    if path in trio:
        all_named = all(getattr(cfg, p).model_args.model_name_or_path is not None for p in trio)
        location = own if all_named else fallback
    elif path == "critic":
        location = own if own is not None else fallback
    else:
        location = own
    # dtype null keeps the checkpoint's torch_dtype, which rlcfg cannot know here; bfloat16 is what nearly
    # every checkpoint ROLL trains ships in.
    return Model(path=location or "", dtype=_DTYPES.get(worker.model_args.dtype or "", "bfloat16"))


def _parallelism(worker: Any, world: int) -> Parallelism:
    name = strategy_name(worker)
    backend = backend_of(worker)
    if backend == "megatron":
        tp, pp, cp = megatron_sizes(worker)
        return Parallelism(tp=tp, pp=pp, cp=cp, ep=int(strategy_value(worker, "expert_model_parallel_size", 1)),
                           etp=strategy_value(worker, "expert_tensor_parallel_size", None),
                           vpp=strategy_value(worker, "virtual_pipeline_model_parallel_size", None),
                           sequence_parallel=bool(strategy_value(worker, "sequence_parallel", False)) and tp > 1)
    if backend in ("vllm", "sglang"):
        # SGLang's unset tensor_parallel_size is the worker's GPU count (vLLM's is 1)
        unset_tp = worker.num_gpus_per_worker if backend == "sglang" else 1
        return Parallelism(tp=int(strategy_value(worker, "tensor_parallel_size", unset_tp)),
                           pp=int(strategy_value(worker, "pipeline_parallel_size", 1)))
    if backend == "hf":
        # A transformers worker spreads its layers over its num_gpus_per_worker GPUs (device_map balanced): the
        # stages of a pipeline without the pipelining.
        return Parallelism(pp=gpus_per_worker(worker))
    ulysses = worker.model_args.ulysses_size or 1
    if name in ("fsdp2_train", "fsdp2_infer"):
        # FSDP2: fsdp_size >= world_size or <= 1 shards over every rank; in between it is HSDP with
        # world_size / fsdp_size replicas of fsdp_size-rank shard groups.
        fsdp = int(strategy_value(worker, "fsdp_size", 1))
        return Parallelism(sp=ulysses, fsdp_shard=fsdp if 1 < fsdp < world else None)
    # DeepSpeed's ZeRO config is passed through unread; it shards over the whole worker.
    return Parallelism(sp=ulysses)


def data_parallel_size(worker: Any) -> int:
    """The DP size of a training worker, as the seed's global-batch formulas count it."""
    world = len(device_ids(worker) or ())
    if backend_of(worker) == "megatron":
        tp, pp, cp = megatron_sizes(worker)
        return max(world // (tp * pp * cp), 1)
    return max(world // (worker.model_args.ulysses_size or 1), 1)


def global_train_batch(worker: Any) -> int:
    args = worker.training_args
    return args.per_device_train_batch_size * args.gradient_accumulation_steps * data_parallel_size(worker)


def _optimizer(cfg: Any, worker: Any, path: str) -> Optimizer:
    args = worker.training_args
    if args.lr_scheduler_type not in _SCHEDULERS:
        _refuse(f"{path}.training_args.lr_scheduler_type: {args.lr_scheduler_type} has no rlcfg schedule (rlcfg has "
                f"{', '.join(sorted(_SCHEDULERS))})")
    name = args.lr_scheduler_type
    megatron = backend_of(worker) == "megatron"
    if megatron and name not in _MEGATRON_SCHEDULERS:
        # mcore_adapter's get_megatron_lr_scheduler raises on the others.
        _refuse(f"{path}.training_args.lr_scheduler_type: {name} is not one ROLL's Megatron strategy runs (it runs "
                f"{', '.join(_MEGATRON_SCHEDULERS)})")
    if not megatron and name == "cosine_with_min_lr":
        # ROLL hands transformers' get_scheduler no scheduler kwargs, and this one needs min_lr or min_lr_rate.
        _refuse(f"{path}.training_args.lr_scheduler_type: cosine_with_min_lr stops ROLL's {backend_of(worker)} "
                f"strategy at start (transformers needs a min_lr it is not given)")
    length = schedule_length(cfg, path, data_parallel_size(worker))
    warmup = warmup_steps(args, length)
    if name == "constant" and not megatron:
        warmup = 0  # transformers' get_constant_schedule takes no warm-up
    # transformers' polynomial schedule ends at its lr_end default, 1e-7, at its default power 1 (a line).
    min_lr = 1e-7 if name == "polynomial" else 0.0
    shape = _SCHEDULERS.get(name, "constant")
    return Optimizer(lr=args.learning_rate, name="adamw", weight_decay=args.weight_decay,
                     betas=(args.adam_beta1, args.adam_beta2), grad_clip=cfg.max_grad_norm,
                     scheduler=shape, warmup_steps=warmup, min_lr=min_lr,
                     decay_steps=max(length - warmup, 0) if shape != "constant" else None)


def _resources(worker: Any) -> Resources:
    ids = device_ids(worker)
    if not ids:
        return Resources(gpus=0)
    return Resources(gpus=len(ids), gpu_ids=tuple(ids))


def _offload(worker: Any, trains: bool) -> Offload:
    # ROLL's workers offload their states after every call (meta_info is_offload_states defaults to true), so
    # colocated workers take turns; a vLLM engine sleeps (level 1 moves its weights to CPU, level 2 drops
    # them), an SGLang engine releases its memory likewise. The pipeline's is_offload_optimizer_states_in_
    # train_step (optimizer states on CPU during forward/backward) has no rlcfg counterpart.
    during = bool(strategy_value(worker, "offload_policy", False)) if backend_of(worker) == "fsdp2" else False
    return Offload(params=True, optimizer=trains, grads=trains, cpu_offload_during_step=during)


def _batching(worker: Any, path: str) -> tuple[dict[str, Any], str | None]:
    """Packing settings of a training worker, and the dotted key of its micro-batch token budget (if any)."""
    packing_args = worker.sequence_packing_args
    if worker.use_dynamic_batching_in_train:
        return ({"sequence_packing": True, "max_tokens_per_micro_batch": worker.max_tokens_per_microbatch_in_train},
                f"{path}.max_tokens_per_microbatch_in_train")
    if worker.use_sequence_packing:
        if packing_args.algorithm == "load_balance":
            return ({"sequence_packing": True,
                     "max_tokens_per_micro_batch": packing_args.max_packed_sequence_length_train},
                    f"{path}.sequence_packing_args.max_packed_sequence_length_train")
        return {"sequence_packing": True, "max_tokens_per_micro_batch": None}, None
    return {"sequence_packing": False, "max_tokens_per_micro_batch": None}, None


def _trainer(cfg: Any, path: str) -> Role:
    worker = getattr(cfg, path)
    resources = _resources(worker)
    backend = backend_of(worker)
    if backend == "megatron":
        checkpointing = strategy_value(worker, "recompute_granularity", None) is not None
    else:
        # The seed: disable_gradient_checkpointing applies to actor_train with fsdp2_train; the HF-model
        # strategies (FSDP2, DeepSpeed) checkpoint unless it is set.
        checkpointing = not worker.model_args.disable_gradient_checkpointing
    batching, budget_key = _batching(worker, path)
    keys = [("micro_batch_size", f"{path}.training_args.per_device_train_batch_size"),
            ("forward_micro_batch_size", f"{path}.infer_batch_size")] + list(_worker_keys(path))
    if budget_key is not None:
        keys.append(("max_tokens_per_micro_batch", budget_key))
    return Role(name=ROLE_OF_WORKER[path], backend=backend, resources=resources, model=_model(cfg, path),
                parallelism=_parallelism(worker, resources.gpus), offload=_offload(worker, trains=True),
                optimizer=_optimizer(cfg, worker, path),
                micro_batch_size=worker.training_args.per_device_train_batch_size,
                forward_micro_batch_size=worker.infer_batch_size, gradient_checkpointing=checkpointing,
                section=path, keys=tuple(keys), **batching)


def _worker_keys(path: str) -> tuple[tuple[str, str], ...]:
    return (("backend", f"{path}.strategy_args.strategy_name"), ("parallelism.sp", f"{path}.model_args.ulysses_size"))


def _reference(cfg: Any) -> Role:
    worker = cfg.reference
    resources = _resources(worker)
    # With LoRA (actor_train.model_args.lora_target) ROLL starts no reference cluster and takes the reference
    # log-probs from actor_train with its adapter disabled. The Experiment has no LoRA, so it describes the
    # full fine-tuning run, which needs the reference model as a role of its own.
    return Role(name="reference", backend=backend_of(worker), resources=resources, model=_model(cfg, "reference"),
                parallelism=_parallelism(worker, resources.gpus), offload=_offload(worker, trains=False),
                forward_micro_batch_size=worker.infer_batch_size, section="reference",
                keys=(("forward_micro_batch_size", "reference.infer_batch_size"),) + _worker_keys("reference"))


def _engine_args(worker: Any, backend: str, world: int) -> dict[str, Any]:
    engine: dict[str, Any] = {}
    if backend == "vllm":
        for key in ("gpu_memory_utilization", "max_model_len", "max_num_batched_tokens", "max_num_seqs",
                    "enforce_eager", "enable_prefix_caching", "enable_chunked_prefill", "block_size", "load_format"):
            value = strategy_value(worker, key, None)
            if value is not None:
                engine[key] = value
    elif backend == "sglang":
        for ours, theirs in (("mem_fraction_static", "mem_fraction_static"), ("max_model_len", "context_length"),
                             ("max_num_seqs", "max_running_requests"), ("attention_backend", "attention_backend"),
                             ("enforce_eager", "disable_cuda_graph"), ("load_format", "load_format")):
            value = strategy_value(worker, theirs, None)
            if value is not None:
                engine[ours] = value
    gen = worker.generating_args
    if gen is not None and gen.seed is not None:
        engine["seed"] = gen.seed
    # One engine per tp × pp GPUs for vLLM and SGLang (an SGLang engine may span several ROLL workers), one
    # per worker for hf_infer.
    par = _parallelism(worker, world)
    per_engine = par.tp * par.pp
    if world and per_engine and world % per_engine == 0:
        engine["engines"] = world // per_engine
    return engine


def _rollout(cfg: Any) -> Role:
    worker = cfg.actor_infer
    resources = _resources(worker)
    backend = backend_of(worker, default="vllm")
    engine = _engine_args(worker, backend, resources.gpus)
    return Role(name="rollout", backend=backend, resources=resources, model=_model(cfg, "actor_infer"),
                parallelism=_parallelism(worker, resources.gpus), offload=_offload(worker, trains=False),
                forward_micro_batch_size=worker.infer_batch_size, engine=tuple(sorted(engine.items())),
                section="actor_infer", keys=(("forward_micro_batch_size", "actor_infer.infer_batch_size"),)
                + _worker_keys("actor_infer")
                + (("parallelism.tp", "actor_infer.strategy_args.strategy_config.tensor_parallel_size"),
                   ("parallelism.pp", "actor_infer.strategy_args.strategy_config.pipeline_parallel_size")))


def _reward(cfg: Any) -> tuple[Role | None, str]:
    """The reward role and the reward function.

    ROLL runs one reward cluster per domain and normalises, whitens and clips each domain's batch on its own
    (rlvr_pipeline.py groups the batch by domain); rlcfg scores every sample with one function over one batch, so
    it runs a single reward worker of a class it has a twin for. A worker with a model (a strategy and GPUs)
    becomes a model reward role; a rule worker, which needs no model, runs on CPU with its world size."""
    rewards = dict(cfg.rewards or {})
    if not rewards:
        return None, "math"
    if len(rewards) > 1:
        _refuse(f"`rewards` has {len(rewards)} domains ({', '.join(rewards)}); rlcfg scores every sample with one "
                "reward function over one batch (ROLL normalises each domain on its own). Keep one")
    (key, worker), = rewards.items()
    cls = (worker.worker_cls or "").rsplit(".", 1)[-1]
    if cls not in _REWARD_FUNCTIONS:
        _refuse(f"rewards.{key}.worker_cls is {worker.worker_cls}; rlcfg scores with ROLL's math rule only "
                f"({', '.join(_REWARD_FUNCTIONS)})")
    function = _REWARD_FUNCTIONS[cls]
    section = f"rewards.{key}"
    ids = device_ids(worker)
    if worker.strategy_args is not None and ids:
        return Role(name="reward", backend=backend_of(worker), resources=Resources(gpus=len(ids), gpu_ids=ids),
                    model=Model(path=worker.model_args.model_name_or_path or "",
                                dtype=_DTYPES.get(worker.model_args.dtype or "", "bfloat16")),
                    parallelism=_parallelism(worker, len(ids)), offload=_offload(worker, trains=False),
                    forward_micro_batch_size=worker.infer_batch_size, section=section,
                    keys=(("forward_micro_batch_size", f"{section}.infer_batch_size"),)), function
    return Role(name="reward", backend="rule", resources=Resources(gpus=0, cpus=worker.world_size or 1),
                section=section), function


def _colocation(placed: dict[str, tuple[int, ...]]) -> tuple[tuple[str, ...], ...]:
    """Roles whose device_mapping names the same set of GPUs; a partial overlap is not colocation (the dialect's
    rules and the plan report it)."""
    by_ids: dict[frozenset[int], list[str]] = {}
    for role, ids in placed.items():
        by_ids.setdefault(frozenset(ids), []).append(role)
    return tuple(tuple(group) for group in by_ids.values() if len(group) > 1)


def _sampling(gen: Any, max_new_tokens: int, n: int, greedy: bool = False) -> Sampling:
    if gen is None:
        return Sampling(max_new_tokens=max_new_tokens, n=n)
    # do_sample false decodes greedily: temperature 0 in rlcfg (and in vLLM/SGLang). top_k 0 and -1 both keep
    # every token.
    greedy = greedy or gen.do_sample is False
    top_k = gen.top_k if gen.top_k is not None and gen.top_k > 0 else -1
    # repetition_penalty: ROLL hands it to vLLM's SamplingParams / SGLang / HF generate, whose meanings agree
    # (prompt and output tokens penalised); null means none.
    repetition = gen.repetition_penalty
    return Sampling(max_new_tokens=max_new_tokens, temperature=0.0 if greedy else float(gen.temperature or 1.0),
                    top_p=float(gen.top_p if gen.top_p is not None else 1.0), top_k=top_k, n=n,
                    stop=tuple(gen.stop_strings or ()),
                    repetition_penalty=float(repetition) if repetition is not None else 1.0)


def _files(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def _query_filter(cfg: Any) -> FilterSpec:
    """The reward worker's query_filter_config, as ROLL's request scheduler applies it (generate_opt_level 1,
    user_defined_rollout_loop.query_filter over the raw rewards of a prompt's responses): mean_filter drops a prompt
    whose mean reward is ≤ threshold_down (default −1) or ≥ threshold_up (default ∞), std_filter one whose
    unbiased std is ≤ std_threshold (default −1); a prompt with one response always passes; dropped prompts are
    replaced by the next ones until the batch is full, without limit. With generate_opt_level 0
    (get_batch_opt_level_0) ROLL hands query_filter all of a prompt's responses as one item, which it always keeps:
    no filter. response_filter_config has no effect in ROLL (response_filter keeps every response)."""
    rewards = dict(cfg.rewards or {})
    if len(rewards) != 1 or cfg.generate_opt_level == 0:
        return FilterSpec()
    (key, worker), = rewards.items()
    f = worker.query_filter_config
    if f.type == "no_filter":
        return FilterSpec()
    args = f.filter_args or {}

    def number(name: str, default: float) -> float:
        value = args.get(name, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            _refuse(f"rewards.{key}.query_filter_config.filter_args.{name} is {value!r}; ROLL compares the rewards "
                    "with it, so it must be a number")
        return float(value)

    if f.type == "mean_filter":
        return FilterSpec(mean_range=(number("threshold_down", -1.0), number("threshold_up", math.inf)),
                          dynamic="filter", max_draws=None)
    return FilterSpec(std_min=number("std_threshold", -1.0), dynamic="filter", max_draws=None)


def _refuse(message: str) -> None:
    # A combination of settings, each honored alone, that rlcfg's runtime would compute with another meaning than
    # ROLL's: plan and run stop on it (a usage error) instead of running something else.
    raise UsageError(f"rlcfg cannot run this ROLL config as ROLL would: {message}")


# ROLL's standard RLVR workers (RLVRConfig.__post_init__ picks them when worker_cls is null); rlcfg runs its own
# equivalents of these and of nothing else.
_STANDARD_WORKERS = {
    "actor_train": "roll.pipeline.rlvr.actor_worker.ActorWorker",
    "actor_infer": "roll.pipeline.base_worker.InferWorker",
    "reference": "roll.pipeline.rlvr.actor_worker.ActorWorker",
    "critic": "roll.pipeline.base_worker.CriticWorker",
}


def _check_workers(cfg: Any) -> None:
    for path, standard in _STANDARD_WORKERS.items():
        cls = getattr(cfg, path).worker_cls
        if cls is not None and cls != standard:
            _refuse(f"{path}.worker_cls is {cls}; rlcfg runs ROLL's standard {standard.rsplit('.', 1)[-1]} "
                    "(the loss variants of ActorPGWorker, pg_variant, are not implemented)")


def _kl(cfg: Any) -> KL:
    """ROLL's two KL terms (actor_worker.loss_func's KL loss, compute_token_reward's reward penalty) as one KL."""
    # The reward penalty is subtracted whenever add_token_level_kl is set; without a reference model ROLL mocks
    # the reference log-probs with the old ones, so the penalty is then 0.
    reward_kl = cfg.add_token_level_kl and reference_on(cfg) and cfg.init_kl_coef > 0
    estimator = _KL_ESTIMATORS.get(cfg.kl_penalty)
    # target_kl turns on ROLL's AdaptiveKLController (roll/utils/kl_controller.py get_kl_controller), updated once
    # per step (one domain) in compute_token_reward with the batch's mean sequence KL and n_steps = batch size; the
    # driver carries its coefficient from step to step. It moves only the reward penalty's beta.
    horizon = cfg.kl_horizon
    controller = (KLController(kind="adaptive", target=cfg.target_kl, horizon=horizon)
                  if cfg.target_kl is not None else KLController())
    if cfg.use_kl_loss and reward_kl:
        _refuse("use_kl_loss and add_token_level_kl (with init_kl_coef > 0) are both set; ROLL applies both a KL "
                "loss and a KL reward penalty, rlcfg runs one KL term. Set one of them")
    if cfg.use_kl_loss:
        # The KL loss in actor_worker.loss_func is always the k3 estimator (clamped to ±10), aggregated like the
        # policy loss and inside rl_loss_coef.
        return KL(placement="loss", coef=cfg.kl_loss_coef, estimator="k3")
    if reward_kl:
        if estimator is None:
            _refuse(f"kl_penalty: {cfg.kl_penalty} (ROLL's full-vocabulary KL) has no rlcfg estimator; use kl, abs "
                    "or mse")
        # compute_token_reward: the normalised score on the last token, minus init_kl_coef × KL per token, and the
        # advantage is the per-token reward-to-go: the "token" meaning of a KL in the reward.
        return KL(placement="reward", coef=cfg.init_kl_coef, estimator=estimator, controller=controller,
                  reward_mode="token")
    # init_kl_coef > 0 alone turns the reference model on (and old log-prob recomputation) but adds no KL term.
    return KL(placement="none", coef=0.0)


def _importance_weights(cfg: Any) -> tuple[float | None, str]:
    """train_infer_correction.is_weight as truncated importance sampling (the filters are refused by the ledger)."""
    weight = cfg.train_infer_correction.is_weight
    enabled, level, bound, detach = weight.enabled, weight.weight_type, weight.upper_bound, weight.detach
    if not enabled:
        return None, "token"
    # roll/utils/train_infer_corrections.py compute_train_infer_correction: the token ratio exp(old − infer) or the
    # sequence's exp(Σ(old − infer)), clamped to upper_bound and detached, multiplies the per-token policy loss:
    # algorithms.tis_weights with the same cap.
    if level not in ("token", "sequence"):
        _refuse(f"train_infer_correction.is_weight.weight_type: {level} has no rlcfg equivalent; rlcfg weighs by the "
                "token or the sequence ratio")
    if bound is None:
        _refuse("train_infer_correction.is_weight.upper_bound: null (an unbounded weight); rlcfg caps the weight")
    if not detach:
        _refuse("train_infer_correction.is_weight.detach: false; rlcfg's importance weight carries no gradient")
    return float(bound), level


def _algorithm(cfg: Any) -> Algorithm:
    """ROLL's PPO/GRPO settings as rlcfg's typed algorithm, with ROLL's meanings (rlvr_pipeline.py: per domain,
    get_sample_level_mask → reward_postprocess → compute_token_reward → compute_advantage; the loss is
    actor_worker.ActorWorker.loss_func)."""
    _check_workers(cfg)
    estimator = cfg.adv_estimator
    if estimator == "agentic_reinforce":
        _refuse("adv_estimator: agentic_reinforce belongs to the agentic pipeline; ROLL's RLVR compute_advantage "
                "refuses it too")
    # grpo: reward_postprocess forces group mean and std normalisation, which is rlcfg's grpo estimator; reinforce
    # (and gigpo / step_reinforce, which RLVR computes the same way) discount the token rewards
    # (compute_reinforce_return) after the reward normalisation norm_mean_type / norm_std_type picks: rlcfg's
    # reinforce++ with those options and ROLL's whitening switch.
    advantage = {"gae": "gae", "grpo": "grpo"}.get(estimator, "reinforce++")
    mean_type, std_type = cfg.norm_mean_type, cfg.norm_std_type
    if advantage == "grpo":
        mean_type = std_type = None  # the estimator itself is the group normalisation
    if "running" in (mean_type, std_type):
        _refuse("norm_mean_type / norm_std_type: running (statistics carried across steps) are not offered; use "
                "batch or group")
    kl = _kl(cfg)
    per_token = kl.placement == "reward" or cfg.whiten_rewards  # rewards on more than the last token
    if advantage == "grpo" and cfg.gamma != 1 and not per_token:
        # ROLL discounts the normalised score back from the last token; rlcfg's GRPO advantage is the score on
        # every token (the same only for gamma 1).
        _refuse(f"gamma: {cfg.gamma} with adv_estimator grpo; rlcfg discounts GRPO advantages only with a KL in the "
                "reward or whiten_rewards. Use gamma 1")
    if (advantage != "grpo" and cfg.reward_clip is not None and mean_type is None and std_type is None
            and kl.placement == "reward"):
        _refuse("reward_clip with a KL in the reward and no reward normalisation; rlcfg clamps the score only "
                "after the KL penalty, ROLL before and after")

    sample_masks = cfg.max_len_mask or cfg.difficulty_mask or cfg.error_max_len_clip
    if sample_masks and (cfg.whiten_rewards or cfg.whiten_advantages):
        _refuse("max_len_mask / difficulty_mask / error_max_len_clip with whiten_rewards or whiten_advantages; ROLL "
                "whitens over the samples the masks keep, rlcfg over all samples")
    if sample_masks and (cfg.length_loss_weight or cfg.entropy_loss_coef > 0):
        _refuse("max_len_mask / difficulty_mask / error_max_len_clip with length_loss_weight or entropy_loss_coef; "
                "ROLL measures lengths and entropy over all samples, rlcfg over the samples the masks keep")

    if advantage == "gae" and cfg.loss_agg_mode != "seq-mean-token-mean":
        # base_worker.CriticWorker.loss_func averages the value loss per sequence, then over sequences, whatever
        # loss_agg_mode says; rlcfg's critic aggregates like the actor.
        _refuse(f"adv_estimator gae with loss_agg_mode {cfg.loss_agg_mode}; ROLL's critic always averages its loss "
                "per sequence (seq-mean-token-mean), rlcfg's critic follows loss_agg_mode. Use seq-mean-token-mean")
    if cfg.loss_agg_mode == "seq-mean-token-sum-norm":
        _refuse("loss_agg_mode: seq-mean-token-sum-norm divides by the padded width of each micro-batch; rlcfg "
                "has no such aggregation")
    policy_loss = "dual_clip" if cfg.dual_clip_loss else "regular"
    if cfg.importance_sampling == "seq":
        # ROLL's sequence ratio exp(mean log-ratio) with its gradient equals GSPO-token's gradient when every token
        # of a sequence has the same advantage; it differs otherwise.
        if advantage == "gae" or per_token or cfg.gamma != 1:
            _refuse("importance_sampling: seq with per-token advantages (gae, a KL in the reward, whiten_rewards or "
                    "gamma < 1); rlcfg's sequence ratio matches ROLL's only for one advantage per sequence")
        if cfg.dual_clip_loss:
            _refuse("importance_sampling: seq with dual_clip_loss; rlcfg's sequence-ratio loss has no dual clip")
        policy_loss = "gspo"
    # loss_func: pg_clip_low / pg_clip_high with use_pg_clip_range, else pg_clip on both sides.
    ranged, single = (cfg.pg_clip_low, cfg.pg_clip_high), (cfg.pg_clip, cfg.pg_clip)
    clip_low, clip_high = ranged if cfg.use_pg_clip_range else single
    tis_cap, tis_level = _importance_weights(cfg)
    difficulty = (float(cfg.difficulty_low_threshold), float(cfg.difficulty_high_threshold))
    error_len = int(cfg.error_max_len_threshold)
    return Algorithm(
        advantage=advantage, group_size=cfg.num_return_sequences_in_group,
        normalize_advantage_std=True,
        # whiten_advantages: masked_whiten of the advantages (grpo: rlcfg's batch normalisation; gae and reinforce:
        # the estimator's own whitening, off by default in ROLL).
        batch_normalize_advantage=bool(cfg.whiten_advantages) if advantage == "grpo" else False,
        gamma=float(cfg.gamma), lam=float(cfg.lambd),
        policy_loss=policy_loss,
        clip_low=float(clip_low if clip_low is not None else 0.2),
        clip_high=float(clip_high if clip_high is not None else 0.2),
        # actor_worker's dual clip bounds negative-advantage losses at (1 + 2 × pg_clip) × advantage.
        clip_ratio_c=1.0 + 2.0 * float(cfg.pg_clip if cfg.pg_clip is not None else 0.2),
        loss_aggregation=cfg.loss_agg_mode, kl=kl,
        # loss_func adds the entropy bonus only when entropy_loss_coef > 0.
        entropy_coef=float(cfg.entropy_loss_coef) if cfg.entropy_loss_coef > 0 else 0.0,
        value_clip=cfg.value_clip, ppo_epochs=cfg.ppo_epochs,
        # reward_postprocess clamps the normalised reward with reward_clip (and compute_token_reward the token
        # rewards once more).
        reward=RewardShaping(clip=cfg.reward_clip, order="clip_normalized"),
        advantage_options=AdvantageOptions(
            std="unbiased", eps=1e-6, whiten=bool(cfg.whiten_advantages), whiten_rewards=bool(cfg.whiten_rewards),
            reward_norm_mean=mean_type, reward_norm_std=std_type, clip=cfg.advantage_clip),
        policy_options=PolicyOptions(loss_coef=float(cfg.rl_loss_coef), tis_cap=tis_cap, tis_level=tis_level),
        weighting=SampleWeighting(
            length_loss_weight=bool(cfg.length_loss_weight), max_len_mask=bool(cfg.max_len_mask),
            difficulty_mask=difficulty if cfg.difficulty_mask else None,
            error_max_len_clip=error_len if cfg.error_max_len_clip else None),
        filters=_query_filter(cfg),
    )


def lower(cfg: Any) -> Experiment:
    # Pipelines rlcfg validates but cannot run: plan and run report these as usage errors.
    if not hasattr(cfg, "num_return_sequences_in_group"):
        # the agentic pipeline (AgenticConfig): rlcfg's runtime has no environment managers
        raise UsageError("rlcfg validates ROLL agentic configs but cannot plan or run them: its runtime has no "
                         "environment managers; run them with ROLL's examples/start_agentic_pipeline.py")
    if cfg.is_pure_opd or cfg.use_opd:
        raise UsageError("rlcfg validates ROLL on-policy distillation configs (is_pure_opd / use_opd) but cannot plan "
                         "or run them: its runtime has no teacher-KL reward")
    if rollout_only(cfg):
        raise UsageError("this ROLL config only generates (actor_train has no GPUs and no strategy: ROLL's rollout-"
                         "only pipeline); rlcfg plans and runs training pipelines only")
    group = cfg.num_return_sequences_in_group
    samples_per_step = cfg.rollout_batch_size * group
    seq_len = effective_sequence_length(cfg)
    max_new_tokens = (seq_len - cfg.prompt_length) if seq_len and cfg.prompt_length else seq_len or 0

    roles: list[Role] = [_trainer(cfg, "actor_train"), _rollout(cfg)]
    placed = {"actor": device_ids(cfg.actor_train) or (), "rollout": device_ids(cfg.actor_infer) or ()}
    if reference_on(cfg):
        roles.append(_reference(cfg))
        placed["reference"] = device_ids(cfg.reference) or ()
    if critic_on(cfg):
        roles.append(_trainer(cfg, "critic"))
        placed["critic"] = device_ids(cfg.critic) or ()
    reward_role, reward_function = _reward(cfg)
    if reward_role is not None:
        roles.append(reward_role)
        if reward_role.resources.gpu_ids:
            placed["reward"] = reward_role.resources.gpu_ids
    colocation = _colocation({role: ids for role, ids in placed.items() if ids})

    used = [i for ids in placed.values() for i in ids]
    # ROLL ignores num_nodes and counts nodes from the highest GPU id (RO-6); num_gpus_per_node is what the
    # nodes are expected to have (ROLL reads it from the driver node).
    cluster = Cluster(nodes=max(1, -(-(max(used) + 1) // cfg.num_gpus_per_node)) if used else None,
                      gpus_per_node=cfg.num_gpus_per_node)

    infer_gen = cfg.actor_infer.generating_args
    sampling = _sampling(infer_gen, max_new_tokens, group)
    validation = cfg.validation
    eval_sampling = None
    if validation is not None:
        val_prompt = cfg.val_prompt_length if cfg.val_prompt_length is not None else cfg.prompt_length
        val_seq = cfg.val_sequence_length if cfg.val_sequence_length is not None else seq_len
        val_new = (val_seq - val_prompt) if val_seq and val_prompt else max_new_tokens
        val_gen = validation.generating_args or infer_gen
        val_n = val_gen.num_return_sequences if val_gen is not None and val_gen.num_return_sequences else 1
        eval_sampling = _sampling(val_gen, val_new, val_n, greedy=cfg.val_greedy)

    train_data = cfg.actor_train.data_args
    domains = dict(train_data.domain_interleave_probs or {}) if train_data is not None else {}
    if sum(1 for share in domains.values() if share) > 1:
        _refuse("actor_train.data_args.domain_interleave_probs mixes several domains; rlcfg draws prompts uniformly "
                "from one dataset scored by one reward worker")
    val_files = _files(validation.data_args.file_name) if validation is not None and validation.data_args else ()
    # rlvr_pipeline.get_encode_function formats a messages column with global_template, else
    # actor_train.data_args.template, or a tag's own template from tag_to_template (validation uses the same).
    template = cfg.global_template or (train_data.template if train_data is not None else None) or "native"
    templates = {template, *dict(cfg.tag_to_template or {}).values()}
    if train_data is not None and train_data.messages:
        prompt_key, chat = train_data.messages, True
        # ROLL's `native` and `qwen2_5` are the tokenizer's own chat template, which is what rlcfg applies.
        other = sorted(t for t in templates if t not in _TOKENIZER_TEMPLATES)
        if other:
            _refuse(f"chat template {', '.join(other)} (global_template / data_args.template / tag_to_template); "
                    "rlcfg formats messages with the tokenizer's own chat template, ROLL's `native` or `qwen2_5`")
    else:
        # A prompt column is tokenized as it is, without the chat template (rlvr_pipeline's encode_function).
        prompt_key = train_data.prompt if train_data is not None and train_data.prompt else "prompt"
        chat = False
    data = Data(
        train_files=_files(train_data.file_name) if train_data is not None else (),
        # RLVR evaluates on validation.data_args.file_name only; actor_train's eval_file_name is not read.
        eval_files=val_files,
        prompt_key=prompt_key,
        # RLVR's rule reward workers read each sample's `ground_truth` column; data_args.response is the label
        # column of ROLL's SFT-style pipelines and is not read by RLVR.
        answer_key="ground_truth",
        # ROLL also drops prompts of 5 tokens or fewer (preprocess_dataset keeps 5 < length <= prompt_length);
        # the Experiment has no lower bound, so such prompts are kept.
        max_prompt_length=cfg.prompt_length, shuffle=True, seed=cfg.seed, apply_chat_template=chat,
    )
    schedule = Schedule(
        prompts_per_step=cfg.rollout_batch_size, samples_per_step=samples_per_step,
        samples_per_optimizer_step=global_train_batch(cfg.actor_train), total_steps=cfg.max_steps,
        # The pipeline validates at the start of every step whose index divides by eval_steps, step 0 included.
        eval_interval=cfg.eval_steps if val_files else None, eval_before_train=bool(val_files),
    )

    # With checkpoint_config.type file_system ROLL writes under output_dir/<start timestamp>, a name known only
    # when the run starts; the Experiment names output_dir.
    resume = cfg.resume_from_checkpoint
    checkpointing = Checkpointing(
        directory=cfg.output_dir, interval=cfg.save_steps, keep_last=cfg.max_ckpt_to_keep or None,
        resume=resume if isinstance(resume, str) else ("latest" if resume else "none"), save_hf=False)
    tracker = cfg.tracker_kwargs or {}
    # stdout is the console rlcfg always logs to; swanlab has no rlcfg backend.
    extra = {"tensorboard": ("tensorboard",), "wandb": ("wandb",)}.get(cfg.track_with, ())
    logging = Logging(directory=f"{cfg.logging_dir.rstrip('/')}/{cfg.exp_name}", project=tracker.get("project"),
                      run_name=tracker.get("name") or cfg.exp_name, backends=("jsonl", "console") + extra)

    return Experiment(
        name=cfg.exp_name, dialect="roll", variant="rlvr", cluster=cluster, roles=tuple(roles),
        colocation=colocation, algorithm=_algorithm(cfg), sampling=sampling, eval_sampling=eval_sampling,
        data=data, schedule=schedule, checkpointing=checkpointing, logging=logging, seed=cfg.seed,
        reward_function=reward_function,
    )
