"""RLinf → Experiment.

RLinf's components map to rlcfg's roles: `actor` → actor (Megatron or FSDP), `rollout` → rollout (SGLang or
vLLM), `reward` → reward (rule-based workers), `critic` → critic. Where each one runs comes from
`cluster.component_placement`, read with the dialect's own parser (placement.py), so the roles
carry the exact global GPU ids RLinf would give them, and roles on the same GPUs form a colocation group.

What RLinf derives, and the lowering reproduces:
- the actor's global batch is `data.rollout_batch_size × algorithm.group_size // algorithm.n_minibatches` (a
  floor) and its micro-batch `algorithm.training_batch_size_per_gpu`, whatever `actor.global_batch_size` and
  `actor.micro_batch_size` say (validate_reasoning_cfg overwrites them);
- a rollout process owns `tensor_parallel_size × pipeline_parallel_size` GPUs, so the engine count is the rollout's
  GPUs divided by that;
- a reasoning placement never gives GPUs to a component rlcfg does not know: `inference` is not the reference.
  RLinf's inference group is a forward-only copy of the *current* policy (it receives the actor's weights every
  step) that recomputes the old log-probs in disaggregated placements; in collocated placements (the seed's
  `actor,inference,rollout: all`) RLinf lets the actor do that work and starts no inference worker at all;
- there is no separate reference model: with `algorithm.kl_beta > 0` the worker that computes log-probs keeps the
  initial weights in CPU memory and swaps them in for the reference forward. The lowering therefore adds a
  `reference` role exactly when that KL runs (kl_runs: kl_beta > 0, and see recompute_logprobs below), on the
  GPUs of that worker (the inference group's when it has a dedicated one, otherwise the actor's), with its
  parameters offloaded;
- `algorithm.kl_beta` is a KL term added to the loss (never to the reward);
- the old log-probs come from the actor's recomputation when `recompute_logprobs` is on (read from
  `rollout.recompute_logprobs` in the mid-2025 layout, `algorithm.recompute_logprobs` later, and forced on by
  `algorithm.importance_sampling_fix`), otherwise from the rollout engine (Algorithm.old_logprobs "rollout"): the
  actor's loss then takes its ratio against the engine's log-probs. From 2025-10 on that also drops the KL term:
  the reasoning runner skips the whole inference pass, reference log-probs included, and the actor adds the KL
  only when it has them, so no reference role is lowered (rlinf/kl-needs-recompute warns). The 2025-08 math runner
  computes the reference log-probs either way;
- `cluster.auto_scheduler` lets RLinf move GPUs between actor and rollout at run time; the lowering keeps the
  static disaggregated placement the run starts from;
- the loss is RLinf's PPO clip loss (2025-08 reads no `loss_type`; later releases' `actor`), with dual clip when
  `clip_ratio_c` is set, `clip_log_ratio_min/max` clamping the log-ratio, `importance_sampling_fix` as the
  detached weight min(π_recomputed/π_rollout, importance_sampling_clip) (v0.3, main; up to v0.2 the weight
  max(π_recomputed/π_rollout, importance_sampling_clip) with the ratio against π_rollout: derived.
  FLOORED_IMPORTANCE_WEIGHT) and `early_stop_imp_ratio` zeroing a
  micro-batch's loss (Megatron actor only: RLinf's FSDP actor never stops early). RLinf has no GSPO loss; every
  other loss_type, and every adv_type but grpo, is refused (rlinf/run-refusals);
- RLinf's reasoning runners compute the validation flag of `runner.val_check_interval` and discard it (validation
  is a separate `reasoning_eval` job), so no periodic evaluation is lowered.
"""

from __future__ import annotations

from typing import Any

from rlcfg.ir import (KL, Algorithm, Checkpointing, Cluster, Data, Experiment, Logging, Model, Offload, Optimizer,
                      Parallelism, PolicyOptions, Resources, Role, RewardShaping, Sampling, Schedule, Spelling)
from rlcfg.dialects.rlinf import placement as lang
from rlcfg.dialects.rlinf.derived import (ADVANTAGES, FLOORED_IMPORTANCE_WEIGHT, REWARD_FUNCTIONS, SCHEDULES,
                                          megatron_warmup, placement, placement_mode, same_gpus, unrun_pipeline)

# RLinf counts the GPUs Ray reports when `cluster.num_gpus_per_node` is absent; a static lowering cannot, so a
# placement of `all` on such a cluster is taken to mean nodes of 8 GPUs, the size the plan also assumes.
ASSUMED_GPUS_PER_NODE = 8

DTYPES = {"bf16": "bfloat16", "bf16-mixed": "bfloat16", "fp16": "float16", "16": "float16", "16-mixed": "float16",
          "fp32": "float32", "32": "float32", "32-true": "float32"}
KL_ESTIMATORS = {"kl": "k1", "k1": "k1", "abs": "abs", "mse": "k2", "k2": "k2", "low_var_kl": "k3", "k3": "k3"}
# RLinf's documented way to switch top-k off is "a very large value".
TOP_K_OFF = 1_000_000


# A setting rlcfg computes otherwise is refused by the rule rlinf/run-refusals (an RLC118 note, on which `rlcfg run`
# stops before it lowers); the lowering itself then describes the nearest experiment rlcfg runs, so that `plan` can
# draw its map and `convert` carry the rest over.


def _dtype(precision: Any) -> str:
    return DTYPES.get(str(precision), "bfloat16")


def _later(cfg: Any) -> bool:
    return cfg.runner.task_type != "math"


def _placed(cfg: Any) -> dict[str, lang.Component]:
    return {name: c for name, c in placement(cfg).components.items() if not c.on_hardware}


def _resources(component: lang.Component | None, cfg: Any) -> Resources:
    """The GPUs a placed component holds: exact ids when the placement (and the cluster size) names them."""
    nodes = cfg.cluster.num_nodes
    if component is None:
        return Resources(gpus=0)
    if component.gpus is not None:
        ids = tuple(sorted(component.gpus))
        return Resources(gpus=len(ids), gpu_ids=ids)
    if component.takes_all:
        per_node = cfg.cluster.num_gpus_per_node or ASSUMED_GPUS_PER_NODE
        return Resources(gpus=nodes * per_node, nodes=nodes)
    if component.world_size:
        return Resources(gpus=component.world_size)
    return Resources(gpus=nodes * ASSUMED_GPUS_PER_NODE, nodes=nodes)


def _overlap(a: lang.Component, b: lang.Component) -> bool:
    if a.takes_all or b.takes_all:
        return True
    return bool(a.gpus and b.gpus and a.gpus & b.gpus)


def _megatron_parallelism(model: Any) -> Parallelism:
    tp = model.tensor_model_parallel_size
    return Parallelism(tp=tp, pp=model.pipeline_model_parallel_size, cp=model.context_parallel_size,
                       ep=model.expert_model_parallel_size, etp=model.expert_tensor_parallel_size,
                       vpp=model.virtual_pipeline_model_parallel_size,
                       sequence_parallel=bool(model.sequence_parallel) and tp > 1)


def _fsdp_parallelism(fsdp: dict[str, Any]) -> Parallelism:
    # RLinf's FSDP shards over every actor rank unless hybrid sharding names a group size; no_shard replicates.
    strategy = str(fsdp.get("sharding_strategy", "full_shard")).lower()
    shard = None
    if strategy == "no_shard":
        shard = 1
    elif strategy == "hybrid_shard" and isinstance(fsdp.get("fsdp_size"), int) and fsdp["fsdp_size"] > 0:
        shard = fsdp["fsdp_size"]
    return Parallelism(fsdp_shard=shard)


def _plain(section: Any) -> dict[str, Any]:
    """A section of keys RLinf reads (a validated Section, a mapping or None) as a plain mapping of the keys that
    have a value, so that `.get(key, RLinf's default)` applies RLinf's default for an absent key."""
    if section is None:
        return {}
    if hasattr(section, "model_dump"):
        return section.model_dump(by_alias=True, exclude_none=True)
    return dict(section)


def _paths(value: Any) -> tuple[str, ...]:
    # RLinf's datasets take one path or a list of them
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def _train_backend(backend: str, fsdp: Any) -> str:
    if backend == "megatron":
        return "megatron"
    # validate_fsdp_cfg fills `strategy: fsdp` when it is absent.
    return "fsdp2" if str(_plain(fsdp).get("strategy", "fsdp")).lower() == "fsdp2" else "fsdp"


def _recompute_logprobs(cfg: Any) -> bool:
    # Each RLinf version reads its own key (the mid-2025 MathRunner reads the rollout's).
    recompute = cfg.rollout.recompute_logprobs if not _later(cfg) else cfg.algorithm.recompute_logprobs
    return bool(recompute or cfg.algorithm.importance_sampling_fix)


def kl_runs(cfg: Any) -> bool:
    """Whether RLinf adds the KL term: kl_beta > 0, and from 2025-10 on only with recomputed log-probs (without
    them the reasoning runner computes no reference log-probs, and the actor skips a KL it has nothing for)."""
    return cfg.algorithm.kl_beta > 0 and (not _later(cfg) or _recompute_logprobs(cfg))


def per_micro_batch_mean(cfg: Any, megatron: bool) -> bool:
    """Whether RLinf averages the loss of each micro-batch on its own (loss_agg_func over the micro-batch's tokens,
    then a mean over micro-batches and ranks): its FSDP actor always, its Megatron actor unless
    use_valid_token_scale rescales each micro-batch by its share of the step's tokens."""
    scale = cfg.algorithm.use_valid_token_scale
    return not (megatron and scale)


def estimated_token_scale(cfg: Any, megatron: bool) -> bool:
    """Whether RLinf's Megatron actor divides its loss by an estimate of the tokens instead of their count:
    use_valid_token_scale in a disaggregated placement, where run_training_pipeline sets the scale up without a
    batch (megatron_worker._setup_valid_token_scale: the longest response encoder_seq_length - max_prompt_length
    allows × the samples of a rank's mini-batch, get_num_microbatches() × micro_batch_size)."""
    return not per_micro_batch_mean(cfg, megatron) and placement_mode(cfg) == "disaggregated"


def estimated_token_norm(cfg: Any, data_parallel: int) -> float:
    """What the estimate makes of the loss, as a length each sequence's token sum is divided by. Each micro-batch's
    token mean × its tokens ÷ the estimate × data-parallel ranks × micro-batches, which megatron-core divides by
    the micro-batches and averages over the ranks: every term (policy, KL, entropy) becomes its token sum over the
    mini-batch ÷ (L × n / dp), with L = encoder_seq_length - max_prompt_length and n the mini-batch's samples.
    That is the mean over the mini-batch's sequences of each one's token sum ÷ (L / dp)."""
    return (cfg.actor.model.encoder_seq_length - cfg.data.max_prompt_length) / data_parallel


def _normalization(cfg: Any, megatron: bool) -> str:
    """Where use_valid_token_scale rescales each micro-batch by its share of the step's tokens (all-reduced over
    the data-parallel ranks before the split into n_minibatches), a mini-batch's token mean is over the step's
    tokens: "step" ("mini-batch" when the step is one mini-batch); otherwise each micro-batch is reduced on its
    own. In a disaggregated placement the share is of an estimate per mini-batch (estimated_token_norm)."""
    if per_micro_batch_mean(cfg, megatron):
        return "micro-batch"
    if estimated_token_scale(cfg, megatron):
        return "mini-batch"
    return "step" if cfg.algorithm.n_minibatches > 1 else "mini-batch"


def _aggregation(cfg: Any, megatron: bool) -> str:
    """rlcfg's aggregation for what RLinf computes. Where RLinf reduces each micro-batch on its own (FSDP, or
    Megatron without use_valid_token_scale), the Algorithm's loss_normalization is "micro-batch" and
    loss_agg_func keeps its meaning: token-mean over the micro-batch's tokens, the seq-mean aggregations over all
    its rows, then `loss / gradient_accumulation` and the ranks' mean (fsdp_actor_worker.training_step). With
    enable_dynamic_batch_size RLinf cuts micro-batches by max_tokens_per_mbs, its own way, which rlcfg does not
    reproduce, so a per-micro-batch mean over them is refused. use_valid_token_scale rescales each micro-batch by
    its share of the step's tokens: with token-mean each mini-batch's token losses over the step's tokens
    (_normalization), or in a disaggregated placement a sequence mean of token sums over an estimated length
    (estimated_token_norm); the seq-mean aggregations it reweights, which rlcfg does not run (rlinf/run-refusals)."""
    # Refused (rlinf/run-refusals): the per-micro-batch mean over RLinf's token-budget micro-batches and a seq-mean
    # aggregation reweighted by use_valid_token_scale.
    if estimated_token_scale(cfg, megatron):
        return "seq-mean-token-sum"
    return cfg.algorithm.loss_agg_func


def _optimizer(optim: Any, sched: Any, megatron: bool = True) -> Optimizer:
    # Megatron's `adam` is the fused Adam with decoupled weight decay, i.e. AdamW.
    name = "sgd" if optim.optimizer == "sgd" else "adamw"
    warmup, decay_end = megatron_warmup(sched)
    # Megatron's scheduler decays to lr_sched.min_lr; RLinf's FSDP scheduler to optim.min_lr.
    megatron_min_lr, fsdp_min_lr = sched.min_lr, optim.min_lr
    min_lr = megatron_min_lr if megatron else fsdp_min_lr
    style = sched.lr_decay_style
    scheduler = SCHEDULES.get(style, "constant")  # any other style is refused (rlinf/run-refusals)
    weight_decay = optim.weight_decay
    start_wd, end_wd = sched.start_weight_decay, sched.end_weight_decay
    if megatron and style != "constant" and start_wd is not None and end_wd is not None:
        # Megatron's scheduler then sets the weight decay each step; with the (only run) constant increment style
        # it is end_weight_decay, equal to start_weight_decay (Megatron asserts it; rule rlinf/weight-decay-schedule).
        weight_decay = end_wd
    if not megatron:
        # RLinf's FSDP actor reads no actor.lr_sched: its schedule comes from actor.optim.lr_scheduler (constant by
        # default, no warm-up); those keys are refused by the ledger when set.
        scheduler, warmup = "constant", 0
    # Megatron's step k (one per optimizer step: RLinf's increment is the global batch, the unit of its steps)
    # warms up from lr_warmup_init and decays until decay_end.
    return Optimizer(lr=optim.lr, name=name, weight_decay=weight_decay,
                     betas=(optim.adam_beta1, optim.adam_beta2), eps=optim.adam_eps,
                     grad_clip=optim.clip_grad or None, scheduler=scheduler, warmup_steps=warmup, min_lr=min_lr,
                     warmup_start_lr=sched.lr_warmup_init if megatron else 0.0,
                     decay_steps=max(decay_end - warmup, 0) if megatron and scheduler != "constant" else None)


def _critic_optimizer(optim: dict[str, Any] | None, fallback: Optimizer) -> Optimizer:
    if not optim:
        return fallback
    return Optimizer(lr=float(optim.get("lr", fallback.lr)), name="sgd" if optim.get("optimizer") == "sgd" else "adamw",
                     weight_decay=float(optim.get("weight_decay", fallback.weight_decay)),
                     betas=(float(optim.get("adam_beta1", fallback.betas[0])),
                            float(optim.get("adam_beta2", fallback.betas[1]))),
                     eps=float(optim.get("adam_eps", fallback.eps)),
                     grad_clip=float(optim.get("clip_grad", fallback.grad_clip or 0.0)) or None,
                     scheduler=fallback.scheduler, warmup_steps=fallback.warmup_steps, min_lr=fallback.min_lr,
                     warmup_start_lr=fallback.warmup_start_lr, decay_steps=fallback.decay_steps)


def _sampling(params: Any, n: int) -> Sampling:
    use_greedy, do_sample = params.use_greedy, params.do_sample
    greedy = use_greedy or not do_sample  # 2025-08/2025-10 key, and its 2025-12 replacement
    top_k = params.top_k
    # RLinf's rollout workers (sglang_worker / vllm_worker _get_sampling_params) pass repetition_penalty only when
    # sampling; greedy requests carry temperature and max_new_tokens alone. min_new_tokens is never passed (inert).
    repetition = params.repetition_penalty
    return Sampling(max_new_tokens=params.max_new_tokens, temperature=0.0 if greedy else params.temperature,
                    top_p=1.0 if greedy else params.top_p,
                    top_k=-1 if greedy or top_k <= 0 or top_k >= TOP_K_OFF else top_k, n=n,
                    repetition_penalty=1.0 if greedy else repetition)


def _engine(cfg: Any, rollout_gpus: int) -> dict[str, Any]:
    rollout = cfg.rollout
    engine: dict[str, Any] = {
        # SGLang's context length is the training sequence: prompt plus response.
        "max_model_len": cfg.runner.seq_length,
        "max_num_seqs": rollout.max_running_requests,
        "enforce_eager": rollout.enforce_eager,
    }
    if rollout.rollout_backend == "sglang":
        engine["mem_fraction_static"] = rollout.gpu_memory_utilization
        # The mid-2025 layout has the SGLang keys at the top of `rollout`.
        engine["attention_backend"] = (rollout.sglang.attention_backend if rollout.sglang is not None
                                       else rollout.attention_backend)
        engine["cuda_graph_bs"] = rollout.cuda_graph_max_bs
    else:
        engine["gpu_memory_utilization"] = rollout.gpu_memory_utilization
        vllm = rollout.vllm
        if vllm is not None:
            engine["attention_backend"] = vllm.attention_backend
            engine["enable_chunked_prefill"] = vllm.enable_chunked_prefill
            engine["enable_prefix_caching"] = vllm.enable_prefix_caching
            if vllm.max_num_batched_tokens is not None:
                engine["max_num_batched_tokens"] = vllm.max_num_batched_tokens
    per_engine = rollout.tensor_parallel_size * rollout.pipeline_parallel_size
    if rollout_gpus and rollout_gpus % per_engine == 0:
        engine["engines"] = rollout_gpus // per_engine
    return engine


def _logging(cfg: Any) -> Logging:
    logger = cfg.runner.logger
    if logger.logger_backends is not None or logger.log_path is not None:  # the 2025-10 layout
        chosen = logger.logger_backends or []
        # swanlab has no counterpart among rlcfg's backends.
        extra = tuple(b for b in ("tensorboard", "wandb") if b in chosen)
        return Logging(directory=logger.log_path, project=logger.project_name,
                       run_name=logger.experiment_name or cfg.runner.experiment_name,
                       backends=("jsonl", "console") + extra)
    extra = (("tensorboard",) if logger.tensorboard.enable else ()) + (("wandb",) if logger.wandb.enable else ())
    return Logging(directory=logger.path, project=logger.wandb.project_name if logger.wandb.enable else None,
                   run_name=logger.wandb.experiment_name or cfg.runner.experiment_name,
                   backends=("jsonl", "console") + extra)


def _checkpointing(cfg: Any) -> Checkpointing:
    runner = cfg.runner
    resume = runner.resume_dir
    # RLinf 2025-10 resumes from the newest `global_step_*` under the log path when resume_dir is `auto`.
    resume_to = "none" if resume is None else "latest" if resume == "auto" else resume
    return Checkpointing(directory=f"{runner.output_dir}/{runner.experiment_name}/checkpoints",
                         interval=runner.save_interval if runner.save_interval > 0 else None, resume=resume_to)


def lower(cfg: Any, release: str | None = None) -> Experiment:
    unrun = unrun_pipeline(cfg)
    if unrun is not None:  # validate says so (RLC116); this guards the lowering's other callers
        from rlcfg.source.yaml_loader import UsageError

        raise UsageError(f"rlcfg validates the {unrun[0]} but cannot plan or run it: {unrun[1]}")
    placed = _placed(cfg)
    actor_cfg, alg, rollout_cfg = cfg.actor, cfg.algorithm, cfg.rollout
    group = alg.group_size
    samples = cfg.data.rollout_batch_size * group
    # rollout.model.model_path from 2025-12 on, rollout.model_dir before.
    model_path, model_dir = rollout_cfg.model.model_path, rollout_cfg.model_dir
    model_path = model_path or model_dir or ""
    trust = actor_cfg.tokenizer.trust_remote_code

    actor_component, rollout_component = placed.get("actor"), placed.get("rollout")
    collocated = bool(same_gpus(actor_component, rollout_component))
    inference_component = placed.get("inference") or placed.get("actor_inference")
    # Collocated placements reuse the actor as the inference worker; a listed `inference` gets nothing.
    dedicated_inference = (not collocated and inference_component is not None and _recompute_logprobs(cfg))
    idle: list[tuple[str, str]] = []
    if inference_component is not None and not dedicated_inference:
        inference_name = "inference" if placed.get("inference") is not None else "actor_inference"
        idle.append((inference_name, "the actor shares the rollout's GPUs, so RLinf has it recompute the log-probs "
                     "and starts no inference worker" if collocated else "it only recomputes log-probs, and this "
                     "config takes them from the rollout engine (recompute_logprobs is off), so RLinf starts no "
                     "inference worker"))

    # ---- actor ----------------------------------------------------------------------------------------------
    backend = _train_backend(actor_cfg.training_backend, actor_cfg.fsdp_config)
    fsdp = _plain(actor_cfg.fsdp_config)
    megatron = backend == "megatron"
    parallelism = _megatron_parallelism(actor_cfg.model) if megatron else _fsdp_parallelism(fsdp)
    optimizer = _optimizer(actor_cfg.optim, actor_cfg.lr_sched, megatron)
    dynamic = cfg.runner.enable_dynamic_batch_size
    actor = Role(
        name="actor", backend=backend, resources=_resources(actor_component, cfg),
        model=Model(path=model_path, dtype=_dtype(actor_cfg.model.precision),
                    tokenizer=actor_cfg.tokenizer.tokenizer_model, trust_remote_code=trust),
        parallelism=parallelism,
        offload=Offload(params=actor_cfg.offload_weight, optimizer=actor_cfg.offload_optimizer,
                        grads=actor_cfg.offload_grad,
                        cpu_offload_during_step=not megatron and bool(fsdp.get("cpu_offload", False))),
        optimizer=optimizer,
        # validate_reasoning_cfg overwrites actor.micro_batch_size with this.
        micro_batch_size=alg.training_batch_size_per_gpu,
        forward_micro_batch_size=alg.logprob_forward_micro_batch_size,
        gradient_checkpointing=(actor_cfg.model.recompute_granularity is not None) if megatron
        else bool(fsdp.get("gradient_checkpointing", False)),
        sequence_packing=dynamic,
        max_tokens_per_micro_batch=cfg.runner.max_tokens_per_mbs if dynamic else None,
        section="actor",
        keys=(("micro_batch_size", "algorithm.training_batch_size_per_gpu"),
              ("forward_micro_batch_size", "algorithm.logprob_forward_micro_batch_size"),
              ("max_tokens_per_micro_batch", "runner.max_tokens_per_mbs"),
              ("backend", "actor.training_backend")),
    )

    # ---- rollout --------------------------------------------------------------------------------------------
    rollout_resources = _resources(rollout_component, cfg)
    rollout_dtype = _dtype(rollout_cfg.precision if rollout_cfg.precision is not None else actor_cfg.model.precision)
    rollout = Role(
        name="rollout", backend=rollout_cfg.rollout_backend, resources=rollout_resources,
        model=Model(path=model_path, dtype=rollout_dtype, tokenizer=actor_cfg.tokenizer.tokenizer_model,
                    trust_remote_code=trust),
        parallelism=Parallelism(tp=rollout_cfg.tensor_parallel_size, pp=rollout_cfg.pipeline_parallel_size),
        # Collocated, the runner offloads the engine after each generation to make room for training.
        offload=Offload(params=collocated),
        engine=tuple(sorted(_engine(cfg, rollout_resources.gpus).items())),
        section="rollout",
        keys=(("backend", "rollout.rollout_backend"), ("parallelism.tp", "rollout.tensor_parallel_size"),
              ("parallelism.pp", "rollout.pipeline_parallel_size")),
    )
    roles: list[Role] = [actor, rollout]
    on_gpus: dict[str, lang.Component | None] = {"actor": actor_component, "rollout": rollout_component}

    # ---- reference (the initial weights, swapped in by whichever worker computes log-probs) -----------------
    if kl_runs(cfg):
        if dedicated_inference:
            inf = cfg.inference.model
            inf_tp = inf.tensor_model_parallel_size
            ref_parallelism = (Parallelism(tp=inf_tp, pp=inf.pipeline_model_parallel_size,
                                           sequence_parallel=inf.sequence_parallel and inf_tp > 1)
                               if megatron else parallelism)
            ref_component = inference_component
        else:
            ref_parallelism, ref_component = parallelism, actor_component
        roles.append(Role(
            name="reference", backend=backend, resources=_resources(ref_component, cfg),
            model=Model(path=model_path, dtype=_dtype(actor_cfg.model.precision),
                        tokenizer=actor_cfg.tokenizer.tokenizer_model, trust_remote_code=trust),
            parallelism=ref_parallelism, offload=Offload(params=True),
            forward_micro_batch_size=alg.logprob_forward_micro_batch_size,
            # RLinf has no reference section: the worker that computes log-probs swaps the initial weights in.
            section="inference" if dedicated_inference else "actor",
            keys=(("forward_micro_batch_size", "algorithm.logprob_forward_micro_batch_size"),
                  ("backend", "actor.training_backend")),
        ))
        on_gpus["reference"] = ref_component
    # Without kl_beta a dedicated inference group only recomputes the old log-probs: work the Experiment gives
    # to the actor. Its GPUs are then held by no role.
    elif dedicated_inference:
        idle.append(("inference" if placed.get("inference") is not None else "actor_inference",
                     "it recomputes the old log-probs with the current weights, which rlcfg counts as the actor's "
                     "work; with kl_beta 0 it holds no reference either"))

    # ---- critic ---------------------------------------------------------------------------------------------
    critic_cfg = cfg.critic
    if critic_cfg.use_critic_model:
        critic_model = _plain(getattr(critic_cfg, "model", None))
        critic_backend = _train_backend(critic_cfg.training_backend or actor_cfg.training_backend,
                                        getattr(critic_cfg, "fsdp_config", None))
        critic_component = placed.get("critic", actor_component)
        if critic_backend == "megatron":
            tp = int(critic_model.get("tensor_model_parallel_size", 1))
            critic_parallelism = Parallelism(tp=tp, pp=int(critic_model.get("pipeline_model_parallel_size", 1)),
                                             cp=int(critic_model.get("context_parallel_size", 1)),
                                             sequence_parallel=bool(critic_model.get("sequence_parallel", False))
                                             and tp > 1)
        else:
            critic_parallelism = _fsdp_parallelism(_plain(getattr(critic_cfg, "fsdp_config", None)))
        roles.append(Role(
            name="critic", backend=critic_backend, resources=_resources(critic_component, cfg),
            model=Model(path=str(critic_model.get("model_path") or model_path),
                        dtype=_dtype(critic_model.get("precision", actor_cfg.model.precision)),
                        trust_remote_code=trust),
            parallelism=critic_parallelism, optimizer=_critic_optimizer(_plain(getattr(critic_cfg, "optim", None)), optimizer),
            micro_batch_size=alg.training_batch_size_per_gpu,
            forward_micro_batch_size=alg.logprob_forward_micro_batch_size,
            section="critic",
            keys=(("micro_batch_size", "algorithm.training_batch_size_per_gpu"),
                  ("forward_micro_batch_size", "algorithm.logprob_forward_micro_batch_size"),
                  ("backend", "critic.training_backend" if critic_cfg.training_backend
                   else "actor.training_backend")),
        ))
        on_gpus["critic"] = critic_component

    # ---- reward ---------------------------------------------------------------------------------------------
    reward_component = placed.get("reward")
    if reward_component is None:
        # The mid-2025 layout scores rule-based rewards inside the rollout workers.
        reward = Role(name="reward", backend="rule", resources=Resources(gpus=0), section="rollout")
    elif any(same_gpus(reward_component, c) for c in on_gpus.values()) or not any(
            _overlap(reward_component, c) for c in on_gpus.values() if c is not None):
        reward = Role(name="reward", backend="rule", resources=_resources(reward_component, cfg), section="reward")
        on_gpus["reward"] = reward_component
    else:
        # Reward workers score on CPUs; ones that straddle other roles' GPUs hold no GPU of their own.
        world = reward_component.world_size or len(reward_component.gpus or ())
        reward = Role(name="reward", backend="rule", resources=Resources(gpus=0, cpus=world), section="reward")
    roles.append(reward)

    # ---- colocation: roles on the very same GPUs take turns on them ----------------------------------------
    order = [r.name for r in roles]
    groups: list[list[str]] = []
    for name in order:
        component = on_gpus.get(name)
        if component is None:
            continue
        for g in groups:
            if same_gpus(on_gpus[g[0]], component):
                g.append(name)
                break
        else:
            groups.append([name])
    colocation = tuple(tuple(g) for g in groups if len(g) > 1)

    # ---- algorithm, sampling, data, schedule ---------------------------------------------------------------
    kl_on = kl_runs(cfg)
    estimator = KL_ESTIMATORS.get(alg.kl_penalty_type, "k3")
    # RLinf's FSDP actor calls kl_penalty(ref_logprobs, logprobs): only the symmetric estimators mean the same there,
    # and rlinf/run-refusals refuses the others.
    entropy_bonus = alg.entropy_bonus
    # The loss: RLinf's PPO clip loss (2025-08 reads no loss_type; later releases' `actor`); RLinf has no GSPO or
    # other loss rlcfg could run, and rlinf/run-refusals refuses every other loss_type. Dual clip when clip_ratio_c
    # is set.
    policy_loss = "dual_clip" if alg.clip_ratio_c is not None else "regular"
    # importance_sampling_fix multiplies the advantages by min(π_recomputed/π_rollout, importance_sampling_clip)
    # (RLinf v0.3 and main), which is the detached truncated-importance weight on the loss; up to v0.2 by
    # max(..., importance_sampling_clip), with the ratio against the rollout's log-probs.
    fix, cap = alg.importance_sampling_fix, alg.importance_sampling_clip
    # early_stop_imp_ratio: RLinf's Megatron actor zeroes a micro-batch's loss when the mean importance ratio exceeds
    # it; its FSDP actor never stops early.
    early_stop = alg.early_stop_imp_ratio
    aggregation = _aggregation(cfg, megatron)
    estimated = estimated_token_scale(cfg, megatron)
    options = PolicyOptions(
        log_ratio_min=alg.clip_log_ratio_min, log_ratio_max=alg.clip_log_ratio_max,
        tis_cap=cap if fix else None, tis_level="token",
        tis_floor=bool(fix) and release in FLOORED_IMPORTANCE_WEIGHT,
        early_stop_ratio=early_stop if megatron else None,
    )
    algorithm = Algorithm(
        advantage=ADVANTAGES.get(alg.adv_type, "grpo"), group_size=group,
        normalize_advantage_std=True,  # RLinf's GRPO divides by the group's std (+1e-6)
        batch_normalize_advantage=alg.normalize_advantages,  # a masked normalisation over the whole batch
        policy_loss=policy_loss,
        clip_low=alg.clip_ratio_low if alg.clip_ratio_low is not None else alg.ratio_clip_eps,
        clip_high=alg.clip_ratio_high if alg.clip_ratio_high is not None else alg.ratio_clip_eps,
        clip_ratio_c=alg.clip_ratio_c if alg.clip_ratio_c is not None else 3.0,
        loss_aggregation=aggregation,
        loss_normalization=_normalization(cfg, megatron),
        loss_length_norm=estimated_token_norm(cfg, actor.data_parallel()) if estimated else None,
        loss_length_norm_all_terms=estimated,
        count_masked_rows=estimated,  # the estimate counts a rank's samples, whatever their masks
        # shuffle_rollout (absent: true, at every release): each rank's samples reordered by one permutation seeded
        # with actor.seed before the split into mini-batches (get_iterator_k_split).
        shuffle_seed=cfg.actor.seed if alg.shuffle_rollout else None,
        kl=KL(placement="loss" if kl_on else "none", coef=alg.kl_beta,
              estimator=estimator),
        # The actor subtracts the entropy bonus only when it computes entropy at all.
        entropy_coef=entropy_bonus if alg.calculate_entropy else 0.0,
        ppo_epochs=1,  # n_minibatches updates walk the step's samples once
        old_logprobs="trainer" if _recompute_logprobs(cfg) else "rollout",
        # A correct answer earns +reward_scale and a wrong one −reward_scale: from a 0/1 verifier that is
        # 2·scale·r − scale.
        reward=RewardShaping(scale=2 * cfg.reward.reward_scale, bias=-cfg.reward.reward_scale),
        policy_options=options,
    )
    sampling = _sampling(alg.sampling_params, group)
    data = Data(
        train_files=_paths(cfg.data.train_data_paths), eval_files=_paths(cfg.data.val_data_paths),
        prompt_key=cfg.data.prompt_key, answer_key=cfg.data.answer_key,
        # RLinf's dataset drops prompts over max_prompt_length with filter_prompt_by_length, and otherwise keeps
        # their first max_prompt_length tokens (reasoning/dataset.py __getitem__).
        max_prompt_length=cfg.data.max_prompt_length,
        long_prompts="drop" if cfg.data.filter_prompt_by_length else "truncate",
        shuffle=cfg.data.shuffle, seed=cfg.data.seed,
        apply_chat_template=cfg.data.apply_chat_template,
    )
    schedule = Schedule(
        prompts_per_step=cfg.data.rollout_batch_size, samples_per_step=samples,
        # RLinf floors the quotient into actor.global_batch_size (rlinf/minibatches-divide-batch warns first).
        samples_per_optimizer_step=samples // alg.n_minibatches,
        # -1 runs max_epochs over the dataset, whose size only the run knows.
        total_steps=cfg.runner.max_steps if cfg.runner.max_steps >= 0 else None,
        epochs=cfg.runner.max_epochs, eval_interval=None,
    )
    return Experiment(
        name=cfg.runner.experiment_name, dialect="rlinf", variant=actor_cfg.training_backend,
        cluster=Cluster(nodes=cfg.cluster.num_nodes, gpus_per_node=cfg.cluster.num_gpus_per_node),
        roles=tuple(roles), colocation=colocation, algorithm=algorithm, sampling=sampling, eval_sampling=None,
        data=data, schedule=schedule, checkpointing=_checkpointing(cfg), logging=_logging(cfg), seed=actor_cfg.seed,
        reward_function=REWARD_FUNCTIONS.get(cfg.reward.reward_type, "math"), idle_components=tuple(idle),
    )


_BACKEND_NAMES = (("vllm", "vllm"), ("sglang", "sglang"), ("fsdp", "fsdp"), ("megatron", "megatron"))


def spelling(role: Role) -> Spelling:
    return Spelling(backends=_BACKEND_NAMES)
