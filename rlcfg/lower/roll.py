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
"""

from __future__ import annotations

import math
from typing import Any

from rlcfg.ir import (KL, Algorithm, Checkpointing, Cluster, Data, Experiment, Logging, Model, Offload, Optimizer,
                      Parallelism, Resources, RewardShaping, Role, Sampling, Schedule)
from rlcfg.schema.roll_rules import (critic_on, device_ids, effective_sequence_length, gpus_per_worker,
                                     megatron_sizes, reference_on, rollout_only, strategy_name, strategy_value)
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
# rlcfg has no shape for (inverse_sqrt, reduce_lr_on_plateau, warmup_stable_decay) run as constant.
_SCHEDULERS = {"linear": "linear", "polynomial": "linear", "cosine": "cosine", "cosine_with_restarts": "cosine",
               "cosine_with_min_lr": "cosine", "constant": "constant", "constant_with_warmup": "constant"}
# ROLL's kl_penalty names for the reward-side KL (apply_kl_penalty). `full` (the KL over the whole vocabulary)
# has no rlcfg estimator; it lowers to k1, the per-token log-ratio it reduces to for sampled tokens.
_KL_ESTIMATORS = {"kl": "k1", "abs": "abs", "mse": "k2", "full": "k1"}
# ROLL's reward workers that score with a rule rlcfg also has. The others (code sandbox, IFEval and the general
# rule worker, CrossThinkQA, LLM judges) have no rlcfg equivalent: their domains are scored with "math", the
# rule rlcfg falls back to, and a run with them is not the run ROLL would do.
_REWARD_FUNCTIONS = {"MathRuleRewardWorker": "math"}


def backend_of(worker: Any, default: str = "fsdp2_train") -> str:
    # A worker without strategy_args gets ROLL's StrategyArguments default, fsdp2_train (deepspeed_train before
    # ROLL 0.3).
    return BACKEND_OF_STRATEGY[strategy_name(worker) or default]


def _model(cfg: Any, path: str) -> Model:
    worker = getattr(cfg, path)
    own = worker.model_args.model_name_or_path
    trio = ("actor_train", "actor_infer", "reference")
    if path in trio:
        all_named = all(getattr(cfg, p).model_args.model_name_or_path is not None for p in trio)
        location = own if all_named else cfg.pretrain
    elif path == "critic":
        location = own if own is not None else cfg.reward_pretrain
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


def _optimizer(cfg: Any, worker: Any, samples_per_step: int) -> Optimizer:
    args = worker.training_args
    warmup = args.warmup_steps
    if warmup <= 0 and args.warmup_ratio > 0:
        # Hugging Face's rule, counted in optimizer steps: ROLL sets the worker's max_steps to
        # max_steps × samples per step × ppo_epochs / global train batch (set_max_steps).
        optimizer_steps = cfg.max_steps * samples_per_step * cfg.ppo_epochs // global_train_batch(worker)
        warmup = math.ceil(optimizer_steps * args.warmup_ratio)
    return Optimizer(lr=args.learning_rate, name="adamw", weight_decay=args.weight_decay,
                     betas=(args.adam_beta1, args.adam_beta2), grad_clip=cfg.max_grad_norm,
                     scheduler=_SCHEDULERS.get(args.lr_scheduler_type, "constant"), warmup_steps=warmup)


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


def _batching(worker: Any) -> dict[str, Any]:
    packing_args = worker.sequence_packing_args
    if worker.use_dynamic_batching_in_train:
        return {"sequence_packing": True, "max_tokens_per_micro_batch": worker.max_tokens_per_microbatch_in_train}
    if worker.use_sequence_packing:
        limit = packing_args.max_packed_sequence_length_train if packing_args.algorithm == "load_balance" else None
        return {"sequence_packing": True, "max_tokens_per_micro_batch": limit}
    return {"sequence_packing": False, "max_tokens_per_micro_batch": None}


def _trainer(cfg: Any, path: str, samples_per_step: int) -> Role:
    worker = getattr(cfg, path)
    resources = _resources(worker)
    backend = backend_of(worker)
    if backend == "megatron":
        checkpointing = strategy_value(worker, "recompute_granularity", None) is not None
    else:
        # The seed: disable_gradient_checkpointing applies to actor_train with fsdp2_train; the HF-model
        # strategies (FSDP2, DeepSpeed) checkpoint unless it is set.
        checkpointing = not worker.model_args.disable_gradient_checkpointing
    return Role(name=ROLE_OF_WORKER[path], backend=backend, resources=resources, model=_model(cfg, path),
                parallelism=_parallelism(worker, resources.gpus), offload=_offload(worker, trains=True),
                optimizer=_optimizer(cfg, worker, samples_per_step),
                micro_batch_size=worker.training_args.per_device_train_batch_size,
                forward_micro_batch_size=worker.infer_batch_size, gradient_checkpointing=checkpointing,
                **_batching(worker))


def _reference(cfg: Any) -> Role:
    worker = cfg.reference
    resources = _resources(worker)
    # With LoRA (actor_train.model_args.lora_target) ROLL starts no reference cluster and takes the reference
    # log-probs from actor_train with its adapter disabled. The Experiment has no LoRA, so it describes the
    # full fine-tuning run, which needs the reference model as a role of its own.
    return Role(name="reference", backend=backend_of(worker), resources=resources, model=_model(cfg, "reference"),
                parallelism=_parallelism(worker, resources.gpus), offload=_offload(worker, trains=False),
                forward_micro_batch_size=worker.infer_batch_size)


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
                forward_micro_batch_size=worker.infer_batch_size, engine=tuple(sorted(engine.items())))


def _reward(cfg: Any) -> tuple[Role | None, str, bool]:
    """The reward role, the reward function, and whether a reward worker filters groups (dynamic sampling).

    ROLL runs one reward cluster per domain; the Experiment has one reward role. A worker with a model (a
    strategy and GPUs) becomes a model reward role (the first such worker, in the order of `rewards`); rule
    workers, which need no model, run on CPU and their world sizes add up to the role's CPUs."""
    rewards = dict(cfg.rewards or {})
    if not rewards:
        return None, "math", False
    function = "math"
    for worker in rewards.values():
        cls = (worker.worker_cls or "").rsplit(".", 1)[-1]
        if cls in _REWARD_FUNCTIONS:
            function = _REWARD_FUNCTIONS[cls]
            break
    # std_filter drops groups whose rewards vary too little (std_threshold 0: all equal), which is DAPO's
    # dynamic sampling. mean_filter drops groups by their mean reward, which rlcfg cannot say; it is left out.
    dynamic = any(w.query_filter_config.type == "std_filter" for w in rewards.values())
    for key, worker in rewards.items():
        ids = device_ids(worker)
        if worker.strategy_args is not None and ids:
            return Role(name="reward", backend=backend_of(worker), resources=Resources(gpus=len(ids), gpu_ids=ids),
                        model=Model(path=worker.model_args.model_name_or_path or "",
                                    dtype=_DTYPES.get(worker.model_args.dtype or "", "bfloat16")),
                        parallelism=_parallelism(worker, len(ids)), offload=_offload(worker, trains=False),
                        forward_micro_batch_size=worker.infer_batch_size), function, dynamic
    cpus = sum(w.world_size or 1 for w in rewards.values())
    return Role(name="reward", backend="rule", resources=Resources(gpus=0, cpus=cpus)), function, dynamic


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
    return Sampling(max_new_tokens=max_new_tokens, temperature=0.0 if greedy else float(gen.temperature or 1.0),
                    top_p=float(gen.top_p if gen.top_p is not None else 1.0), top_k=top_k, n=n,
                    stop=tuple(gen.stop_strings or ()))


def _files(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def _algorithm(cfg: Any, dynamic_sampling: bool) -> Algorithm:
    # ROLL's own estimators; the agentic ones have no rlcfg twin: gigpo is GRPO with step-level groups, and
    # step_reinforce / agentic_reinforce are REINFORCE over turns. ROLL's plain `reinforce` discounts returns and
    # takes its baseline from the reward normalisation, which is REINFORCE++ when that is batch-level.
    advantage = {"gae": "gae", "grpo": "grpo", "gigpo": "grpo"}.get(cfg.adv_estimator, "reinforce++")
    if cfg.use_kl_loss:
        # The KL loss in actor_worker.loss_func is always the k3 estimator.
        kl = KL(placement="loss", coef=cfg.kl_loss_coef, estimator="k3")
    elif cfg.add_token_level_kl and reference_on(cfg):
        # The reward-side penalty starts at init_kl_coef (adapted towards target_kl when that is set).
        kl = KL(placement="reward", coef=cfg.init_kl_coef, estimator=_KL_ESTIMATORS[cfg.kl_penalty])
    else:
        # init_kl_coef > 0 alone turns the reference model on (and old log-prob recomputation) but adds no KL
        # term: ROLL applies the reward penalty only with add_token_level_kl.
        kl = KL(placement="none", coef=0.0)
    # ROLL applies both a KL loss and a reward penalty when both are asked for; the Experiment carries one, the
    # loss.
    clip_low, clip_high = ((cfg.pg_clip_low, cfg.pg_clip_high) if cfg.use_pg_clip_range else (cfg.pg_clip, cfg.pg_clip))
    # seq-mean-token-sum-norm divides each sequence's token sum by a constant length: seq-mean-token-sum scaled.
    aggregation = "seq-mean-token-sum" if cfg.loss_agg_mode == "seq-mean-token-sum-norm" else cfg.loss_agg_mode
    return Algorithm(
        advantage=advantage, group_size=cfg.num_return_sequences_in_group,
        normalize_advantage_std=cfg.norm_std_type == "group",
        batch_normalize_advantage=bool(cfg.whiten_advantages or cfg.norm_std_type == "batch"),
        gamma=float(cfg.gamma), lam=float(cfg.lambd),
        policy_loss="gspo" if cfg.importance_sampling == "seq" else ("dual_clip" if cfg.dual_clip_loss else "regular"),
        clip_low=float(clip_low if clip_low is not None else 0.2),
        clip_high=float(clip_high if clip_high is not None else 0.2),
        # actor_worker's dual clip bounds negative-advantage losses at (1 + 2 × pg_clip) × advantage.
        clip_ratio_c=1.0 + 2.0 * float(cfg.pg_clip if cfg.pg_clip is not None else 0.2),
        loss_aggregation=aggregation, kl=kl, entropy_coef=float(cfg.entropy_loss_coef),
        value_clip=cfg.value_clip, ppo_epochs=cfg.ppo_epochs,
        reward=RewardShaping(clip=cfg.reward_clip),
        dynamic_sampling=dynamic_sampling, mask_truncated=cfg.max_len_mask,
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

    roles: list[Role] = [_trainer(cfg, "actor_train", samples_per_step), _rollout(cfg)]
    placed = {"actor": device_ids(cfg.actor_train) or (), "rollout": device_ids(cfg.actor_infer) or ()}
    if reference_on(cfg):
        roles.append(_reference(cfg))
        placed["reference"] = device_ids(cfg.reference) or ()
    if critic_on(cfg):
        roles.append(_trainer(cfg, "critic", samples_per_step))
        placed["critic"] = device_ids(cfg.critic) or ()
    reward_role, reward_function, dynamic = _reward(cfg)
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
    val_files = _files(validation.data_args.file_name) if validation is not None and validation.data_args else ()
    if train_data is not None and train_data.messages:
        # A messages column goes through the chat template (global_template, else data_args.template).
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
        colocation=colocation, algorithm=_algorithm(cfg, dynamic), sampling=sampling, eval_sampling=eval_sampling,
        data=data, schedule=schedule, checkpointing=checkpointing, logging=logging, seed=cfg.seed,
        reward_function=reward_function,
    )
