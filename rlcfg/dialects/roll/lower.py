"""ROLL (RLVR pipeline) → Experiment.

ROLL's workers map to rlcfg's roles: actor_train → actor, actor_infer → rollout, reference → reference (only
when the pipeline turns it on), critic → critic (only for adv_estimator gae), and the `rewards` mapping →
reward. Every worker that holds GPUs names them in `device_mapping`, read with the dialect's own grammar
(device_mapping.py, through models.device_ids) and handed on as explicit global GPU ids;
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
Settings rlcfg's runtime does not compute are refused by the run ledger (their fates in models.py);
combinations of honored settings that the runtime would compute with another meaning, and values it has no
implementation for, are refused by the rule roll/run-refusals (rules.py), and the pipelines
`rlcfg run` does not run by derived.unrun_pipeline. `rlcfg run` stops on those notes before it lowers; `plan`
and `convert` lower such a config to the nearest Experiment rlcfg runs, which they describe.
"""

from __future__ import annotations

import math
from typing import Any

from rlcfg.ir import (KL, AdvantageOptions, Algorithm, Checkpointing, Cluster, Data, Experiment, FilterSpec,
                      KLController, Logging,
                      Model, Offload, Optimizer, Parallelism, PolicyOptions, Resources, RewardShaping, Role, Sampling,
                      SampleWeighting, Schedule, Spelling)
from rlcfg.dialects.roll.derived import (BACKEND_OF_STRATEGY, FILTER_THRESHOLDS, KL_ESTIMATORS, REWARD_FUNCTIONS,
                                     SCHEDULERS, chosen_reward_domain, critic_on, device_ids, effective_sequence_length,
                                     frozen_prefixes, gpus_per_worker, loads_reward_model, megatron_sizes, reference_on,
                                     pg_variant, reward_class, reward_kl_on, schedule_length, strategy_name,
                                     strategy_value, unrun_pipeline, warmup_steps, worker_env)
from rlcfg.source.yaml_loader import UsageError

ROLE_OF_WORKER = {"actor_train": "actor", "actor_infer": "rollout", "reference": "reference", "critic": "critic"}
_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


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
    # A schedule rlcfg has no shape for (roll/run-refusals) is described as constant.
    name = args.lr_scheduler_type
    megatron = backend_of(worker) == "megatron"
    length = schedule_length(cfg, path, data_parallel_size(worker))
    warmup = warmup_steps(args, length)
    if name == "constant" and not megatron:
        warmup = 0  # transformers' get_constant_schedule takes no warm-up
    # transformers' polynomial schedule ends at its lr_end default, 1e-7, at its default power 1 (a line).
    min_lr = 1e-7 if name == "polynomial" else 0.0
    shape = SCHEDULERS.get(name, "constant")
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
    frozen = _frozen_prefixes(worker)
    if frozen:
        keys.append(("frozen_prefixes", f"{path}.model_args.freeze_module_prefix"))
    return Role(name=ROLE_OF_WORKER[path], backend=backend, resources=resources, model=_model(cfg, path),
                parallelism=_parallelism(worker, resources.gpus), offload=_offload(worker, trains=True),
                optimizer=_optimizer(cfg, worker, path),
                micro_batch_size=worker.training_args.per_device_train_batch_size,
                forward_micro_batch_size=worker.infer_batch_size, gradient_checkpointing=checkpointing,
                frozen_prefixes=frozen, env=_env(cfg, worker), section=path, keys=tuple(keys), **batching)


def _frozen_prefixes(worker: Any) -> tuple[str, ...]:
    # An empty item (every name starts with it) and a Megatron worker are refused by
    # roll/run-refusals-of-worker-settings; the Experiment describes the other items.
    return tuple(p for p in frozen_prefixes(worker) if p)


def _env(cfg: Any, worker: Any) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(worker_env(cfg, worker).items()))


def _worker_keys(path: str) -> tuple[tuple[str, str], ...]:
    return (("backend", f"{path}.strategy_args.strategy_name"), ("parallelism.sp", f"{path}.model_args.ulysses_size"))


def _reference(cfg: Any) -> Role:
    worker = cfg.reference
    resources = _resources(worker)
    # With LoRA (actor_train.model_args.lora_target) ROLL starts no reference cluster and takes the reference
    # log-probs from actor_train with its adapter disabled. `rlcfg run` refuses ROLL's LoRA, so the Experiment
    # describes the full fine-tuning run, which needs the reference model as a role of its own.
    return Role(name="reference", backend=backend_of(worker), resources=resources, model=_model(cfg, "reference"),
                parallelism=_parallelism(worker, resources.gpus), offload=_offload(worker, trains=False),
                forward_micro_batch_size=worker.infer_batch_size, env=_env(cfg, worker), section="reference",
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
                env=_env(cfg, worker), section="actor_infer", keys=(("forward_micro_batch_size", "actor_infer.infer_batch_size"),)
                + _worker_keys("actor_infer")
                + (("parallelism.tp", "actor_infer.strategy_args.strategy_config.tensor_parallel_size"),
                   ("parallelism.pp", "actor_infer.strategy_args.strategy_config.pipeline_parallel_size")))


def _reward(cfg: Any) -> tuple[Role | None, str]:
    """The reward role and the reward function.

    ROLL runs one reward cluster per domain and normalises, whitens and clips each domain's batch on its own
    (rlvr_pipeline.py groups the batch by domain); rlcfg scores every sample with one function over one batch, so
    it runs a single reward worker of a class it has a twin for. A worker with a model (a strategy and GPUs, and a
    class that is no rule) becomes a model reward role; a rule worker, which needs no model, runs on CPU with its
    world size. Several domains, or a class without a twin, are refused by roll/run-refusals; the Experiment then
    describes one domain (derived.chosen_reward_domain) scored by the math rule."""
    key = chosen_reward_domain(cfg)
    if key is None:
        return None, "math"
    worker = cfg.rewards[key]
    function = REWARD_FUNCTIONS.get(reward_class(worker), "math")
    section = f"rewards.{key}"
    ids = device_ids(worker)
    env = _env(cfg, worker)
    if loads_reward_model(worker):
        return Role(name="reward", backend=backend_of(worker), resources=Resources(gpus=len(ids), gpu_ids=ids),
                    model=Model(path=worker.model_args.model_name_or_path or "",
                                dtype=_DTYPES.get(worker.model_args.dtype or "", "bfloat16")),
                    parallelism=_parallelism(worker, len(ids)), offload=_offload(worker, trains=False),
                    forward_micro_batch_size=worker.infer_batch_size, env=env, section=section,
                    keys=(("forward_micro_batch_size", f"{section}.infer_batch_size"),)), function
    return Role(name="reward", backend="rule", resources=Resources(gpus=0, cpus=worker.world_size or 1),
                env=env, section=section), function


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
    key = chosen_reward_domain(cfg)
    if key is None or cfg.generate_opt_level == 0:
        return FilterSpec()
    f = cfg.rewards[key].query_filter_config
    if f.type not in FILTER_THRESHOLDS:
        return FilterSpec()
    args = f.filter_args or {}

    def number(name: str, default: float) -> float:
        # a threshold that is not a number is an error (roll/query-filter-args)
        value = args.get(name, default)
        return default if isinstance(value, bool) or not isinstance(value, (int, float)) else float(value)

    if f.type == "mean_filter":
        return FilterSpec(mean_range=(number("threshold_down", -1.0), number("threshold_up", math.inf)),
                          dynamic="filter", max_draws=None)
    return FilterSpec(std_min=number("std_threshold", -1.0), dynamic="filter", max_draws=None)


def _kl(cfg: Any) -> KL:
    """ROLL's two KL terms (actor_worker.loss_func's KL loss, compute_token_reward's reward penalty) as one KL."""
    reward_kl = reward_kl_on(cfg)
    # `full` (refused by roll/run-refusals) is described by the plain log-ratio
    estimator = KL_ESTIMATORS.get(cfg.kl_penalty, "k1")
    # target_kl turns on ROLL's AdaptiveKLController (roll/utils/kl_controller.py get_kl_controller), updated once
    # per step (one domain) in compute_token_reward with the batch's mean sequence KL and n_steps = batch size; the
    # driver carries its coefficient from step to step. It moves only the reward penalty's beta.
    horizon = cfg.kl_horizon
    controller = (KLController(kind="adaptive", target=cfg.target_kl, horizon=horizon)
                  if cfg.target_kl is not None else KLController())
    if cfg.use_kl_loss:
        # The KL loss in actor_worker.loss_func is always the k3 estimator (clamped to ±10), aggregated like the
        # policy loss and inside rl_loss_coef. With a KL reward penalty as well (refused by roll/run-refusals:
        # rlcfg runs one KL term) the Experiment describes the loss.
        return KL(placement="loss", coef=cfg.kl_loss_coef, estimator="k3")
    if reward_kl:
        # compute_token_reward: the normalised score on the last token, minus init_kl_coef × KL per token, and the
        # advantage is the per-token reward-to-go: the "token" meaning of a KL in the reward.
        return KL(placement="reward", coef=cfg.init_kl_coef, estimator=estimator, controller=controller,
                  reward_mode="token")
    # init_kl_coef > 0 alone turns the reference model on (and old log-prob recomputation) but adds no KL term.
    return KL(placement="none", coef=0.0)


def _importance_weights(cfg: Any) -> tuple[float | None, str]:
    """train_infer_correction.is_weight as truncated importance sampling (the filters are refused by the ledger)."""
    weight = cfg.train_infer_correction.is_weight
    if not weight.enabled or weight.upper_bound is None:
        return None, "token"  # an unbounded weight is refused by roll/run-refusals, and described as none
    # roll/utils/train_infer_corrections.py compute_train_infer_correction: the token ratio exp(old − infer) or the
    # sequence's exp(Σ(old − infer)), clamped to upper_bound and detached, multiplies the per-token policy loss:
    # algorithms.tis_weights with the same cap. Other weight types and an undetached weight are refused by
    # roll/run-refusals and described as the token ratio, detached.
    level = weight.weight_type if weight.weight_type in ("token", "sequence") else "token"
    return float(weight.upper_bound), level


def _algorithm(cfg: Any) -> Algorithm:
    """ROLL's PPO/GRPO settings as rlcfg's typed algorithm, with ROLL's meanings (rlvr_pipeline.py: per domain,
    get_sample_level_mask → reward_postprocess → compute_token_reward → compute_advantage; the loss is
    actor_worker.ActorWorker.loss_func)."""
    estimator = cfg.adv_estimator
    # grpo: reward_postprocess forces group mean and std normalisation, which is rlcfg's grpo estimator; reinforce
    # (and gigpo / step_reinforce, which RLVR computes the same way) discount the token rewards
    # (compute_reinforce_return) after the reward normalisation norm_mean_type / norm_std_type picks: rlcfg's
    # reinforce++ with those options and ROLL's whitening switch.
    advantage = {"gae": "gae", "grpo": "grpo"}.get(estimator, "reinforce++")
    mean_type, std_type = cfg.norm_mean_type, cfg.norm_std_type
    if advantage == "grpo":
        mean_type = std_type = None  # the estimator itself is the group normalisation
    # Running statistics (refused by roll/run-refusals) are described as the batch's.
    mean_type, std_type = ("batch" if t == "running" else t for t in (mean_type, std_type))
    kl = _kl(cfg)
    # The combinations roll/run-refusals refuses (gamma < 1 with GRPO on the last token only, sample masks with
    # whitening or length weights, reward_clip with a KL in the reward and no normalisation, a critic with another
    # loss_agg_mode, seq-mean-token-sum-norm, sequence ratios with per-token advantages or dual clip) are
    # described with rlcfg's meaning of each setting.
    loss_aggregation = "seq-mean-token-sum" if cfg.loss_agg_mode == "seq-mean-token-sum-norm" else cfg.loss_agg_mode
    policy_loss = "dual_clip" if cfg.dual_clip_loss else "regular"
    variant = pg_variant(cfg)
    if variant == "topr":
        policy_loss = "topr"  # ActorPGWorker: no clip range, dual clip or sequence ratio
    elif cfg.importance_sampling == "seq" and variant is None:  # ActorPGWorker takes the token ratio always
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
        loss_aggregation=loss_aggregation, kl=kl,
        # loss_func adds the entropy bonus only when entropy_loss_coef > 0.
        entropy_coef=float(cfg.entropy_loss_coef) if cfg.entropy_loss_coef > 0 else 0.0,
        value_clip=cfg.value_clip, ppo_epochs=cfg.ppo_epochs,
        # reward_postprocess clamps the normalised reward with reward_clip (and compute_token_reward the token
        # rewards once more).
        reward=RewardShaping(clip=cfg.reward_clip, order="clip_normalized"),
        advantage_options=AdvantageOptions(
            std="unbiased", eps=1e-6, whiten=bool(cfg.whiten_advantages), whiten_rewards=bool(cfg.whiten_rewards),
            reward_norm_mean=mean_type, reward_norm_std=std_type, clip=cfg.advantage_clip),
        policy_options=PolicyOptions(loss_coef=float(cfg.rl_loss_coef), tis_cap=tis_cap, tis_level=tis_level,
                                     topr_positive_weight=float(cfg.actor_train.topr_positive_weight),
                                     topr_negative_weight=float(cfg.actor_train.topr_negative_weight)),
        weighting=SampleWeighting(
            length_loss_weight=bool(cfg.length_loss_weight), max_len_mask=bool(cfg.max_len_mask),
            difficulty_mask=difficulty if cfg.difficulty_mask else None,
            error_max_len_clip=error_len if cfg.error_max_len_clip else None),
        filters=_query_filter(cfg),
    )


def _asynchrony(cfg: Any) -> dict[str, Any]:
    """async_generation_ratio r (a whole number; the run-refusal rule refuses a fraction): ROLL's replay buffer lets
    the prompts started reach r steps' worth beyond those of the steps begun, and trains no group started more than r
    steps back, which is a staleness bound of r with no other limit on what generates at once."""
    ratio = cfg.async_generation_ratio
    if ratio <= 0 or ratio != int(ratio):
        return {}
    return {"max_staleness": int(ratio), "rollout_concurrency": (int(ratio) + 1) * cfg.rollout_batch_size}


def lower(cfg: Any) -> Experiment:
    unrun = unrun_pipeline(cfg)
    if unrun is not None:  # validate says so (RLC116); this guards the lowering's other callers
        raise UsageError(f"rlcfg validates the {unrun[0]} but cannot plan or run it: {unrun[1]}")
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
    # Several domains of domain_interleave_probs (refused by roll/run-refusals) are described as one dataset.
    val_files = _files(validation.data_args.file_name) if validation is not None and validation.data_args else ()
    # rlvr_pipeline.get_encode_function formats a messages column with global_template, else
    # actor_train.data_args.template, or a tag's own template from tag_to_template (validation uses the same).
    # ROLL's `native` and `qwen2_5` are the tokenizer's own chat template, which is what rlcfg applies; other names
    # are refused by roll/run-refusals and described as the tokenizer's.
    if train_data is not None and train_data.messages:
        prompt_key, chat = train_data.messages, True
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
        **_asynchrony(cfg),
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


def spelling(role: Role) -> Spelling:
    """ROLL names a strategy by what its worker does: a model it trains (`*_train`) or one it only runs (`*_infer`),
    the rollout engines included."""
    suffix = "_train" if role.trains else "_infer"
    names: dict[str, str] = {}
    for name, ours in BACKEND_OF_STRATEGY.items():
        backend = "fsdp" if ours == "fsdp2" else ours
        fits = backend in ("hf", "vllm", "sglang") if role.name == "rollout" else name.endswith(suffix)
        if fits and not name.startswith("diffusion"):
            names.setdefault(backend, name)
    return Spelling(backends=tuple(names.items()))
