"""AReaL → Experiment.

AReaL's engines map to rlcfg's roles: `actor` → actor, the SGLang/vLLM servers → rollout, `ref` → reference,
`critic` → critic, and the reward function (Python, run by the rollout workflow on CPUs) → a rule reward.
SFT's trained model (`model:` in v0.3, `actor:` in 1.0) → actor; a reward model's (is_critic) → critic.

Where the GPUs come from (reusing the dialect's own parser, allocation.py):
- v0.3 / v0.4 `allocation_mode`: the SPMD launchers start the generation servers first, so they take the first
  GPUs and the trainer the next ones (`sglang.d4p1t1+d4p1t1` → rollout 0-3, actor 4-7); a `|` group shares
  one set of GPUs from 0. The reference and the critic run inside the trainer processes, so they share the
  actor's GPUs.
- 1.0 per-engine `backend` fields: the single controller creates the engines in the order actor, critic, ref,
  rollout, each on the next free GPUs, except that an engine whose scheduling_strategy is `colocation` shares
  its target's. When a deprecated allocation_mode is kept and no scheduler is set, the SPMD launcher places
  them instead (servers first).

Derivations reproduced here: the backend AReaL picks for a bare training part (megatron when p>1 or e>1);
the prompts of a step are train_dataset.batch_size rounded down to a multiple of the trainer's data-parallel
size (each rank loads batch_size // dp); a step's samples split into ppo_n_minibatches optimizer steps; the
reference is built only when actor.kl_ctl > 0 and a `ref` section exists, and then its KL term goes into the
token rewards; use_decoupled_loss implies recompute_logprob.

The algorithm (areal/engine/ppo/actor.py at v0.3.4, areal/trainer/ppo/actor.py at v1.0.4, PPOActor
compute_advantages and the loss functions of areal/utils/functional): the overlong penalty on the raw score, then
(score + reward_bias) × reward_scaling, clipped to ±reward_clip (RewardShaping order "penalty_first"); reward_norm
on the sequence scores (group level: GRPO, or RLOO with mean_leave1out); minus kl_ctl × KL per token (reward_mode
"token"); GAE with the critic's values, or with zero values, which is the reward-to-go discounted by
discount × gae_lambda; adv_norm normalises the token advantages by batch or group (AReaL's Normalization,
ir.TokenNorm). The loss is PPO's clipped loss against
the proximal (recomputed) log-probabilities, with eps_clip_higher, c_clip (dual clip), importance_sampling_level
`sequence` (GSPO, AReaL's sequence form) or SAPO, weighted in the decoupled loss by π_prox/π_behave with the tokens
above behav_imp_weight_cap / rejection_sampling.upper left out. Combinations rlcfg's runtime computes otherwise
are refused before a run by the rule areal/run-ledger (rules.py); each key's fate is declared
on its field (models.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rlcfg.ir import (KL, AdvantageOptions, Algorithm, Checkpointing, Cluster, Data, Experiment, Logging, Lora, Model,
                      Offload, Optimizer, Parallelism, PolicyOptions, Resources, RewardShaping, Role, Sampling,
                      Schedule, Spelling, TokenNorm)
from rlcfg.dialects.areal import allocation as alloc
# Where each engine runs is read once, in the schema layer, so that areal/run-ledger judges the same layout.
from rlcfg.dialects.areal.derived import backend_key, engine_roles, pipeline_kind
from rlcfg.dialects.areal.derived import layout as _layout
from rlcfg.dialects.areal.entries import (BOBA_PROMPT_REMOVALS, BOBA_PROMPT_TOKENS, BOBA_SCRIPTS,
                                         COUNTDOWN_ANSWER_FIELDS, COUNTDOWN_EVAL_TEMPERATURE, COUNTDOWN_EVALUATED,
                                         COUNTDOWN_SCRIPTS, GSM8K_PROMPT_SUFFIX, GSM8K_RLVR_EVAL_TEMPERATURE,
                                         GSM8K_SCRIPTS, MATH_PARSER_SCRIPTS)

# AReaL's FSDP engine shards with torch's FSDP2 (fully_shard); Archon is its torchtitan-style engine, FSDP2 with
# TP/PP/EP on top, the closest of rlcfg's backends.
TRAIN_BACKEND = {"fsdp": "fsdp2", "megatron": "megatron", "archon": "fsdp2"}
DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
# The seed's ClusterSpecConfig defaults (32 nodes × 8 GPUs) describe no real machine; the rules only check a
# written cluster, and so the lowering only passes on a node count that differs from that placeholder.
SEED_DEFAULT_CLUSTER = (32, 8)
# gconfig.top_k's default: larger than any vocabulary, so it samples from all tokens.
TOP_K_UNLIMITED = 100000000


def _dtype(text: str) -> str:
    name = DTYPE.get(text, text)
    return name if name in ("bfloat16", "float16", "float32") else "bfloat16"


# ---- where each engine runs ----------------------------------------------------------------------------------


def _gpu_ids(groups: list[tuple[str, ...]], sizes: list[int]) -> dict[str, tuple[int, ...]]:
    ids: dict[str, tuple[int, ...]] = {}
    cursor = 0
    for group, size in zip(groups, sizes):
        for role in group:
            ids[role] = tuple(range(cursor, cursor + size))
        cursor += size
    return ids


def _parallelism(c: alloc.Component | None, engine: Any = None) -> Parallelism:
    if c is None:
        return Parallelism()
    if c.kind == "inference":
        return Parallelism(tp=c.dims.get("t"), pp=c.dims.get("p"))
    megatron_cfg = getattr(engine, "megatron", None)
    vpp = megatron_cfg.virtual_pipeline_parallel_size if megatron_cfg is not None else 1
    if c.hybrid is not None:
        attn, ffn = c.hybrid
        tp, pp, cp, ep, etp = attn.get("t"), attn.get("p"), attn.get("c"), ffn.get("e"), ffn.get("t")
    else:
        tp, pp, cp, ep, etp = c.dims.get("t"), c.dims.get("p"), c.dims.get("c"), c.dims.get("e"), None
    backend = c.effective_backend
    if backend == "megatron":
        # AReaL's Megatron engine has no sequence_parallel key of its own (it leaves Megatron's default, off).
        return Parallelism(tp=tp, pp=pp, cp=cp, ep=ep, etp=etp if etp != tp else None,
                           vpp=vpp if isinstance(vpp, int) and vpp > 1 else None)
    # AReaL's FSDP engine reads c as its Ulysses sequence-parallel size (dp·sp·tp = world) and shards over all
    # of the engine's GPUs.
    return Parallelism(tp=tp, pp=pp, ep=ep, sp=cp)


def _data_parallel(c: alloc.Component | None) -> int:
    if c is None:
        return 1
    dims = c.hybrid[0] if c.hybrid is not None else c.dims
    return max(dims.get("d"), 1) if dims is not None else 1


# ---- engines -------------------------------------------------------------------------------------------------


def _optimizer(engine: Any, total_steps: int | None, backend: str = "fsdp2") -> Optimizer | None:
    opt = engine.optimizer
    if opt is None or opt.type == "empty":
        return None
    # AReaL warms up for int(proportion × total_train_epochs × batches per epoch) scheduler steps, counted from
    # the dataset's size (total_train_steps does not shorten it), which the lowering does not know. At the default
    # 0.001 that is no warm-up for runs under 1000 steps, which is what rlcfg runs; areal/run-ledger refuses larger
    # proportions (the plan then shows the warm-up of the capped steps, as the nearest figure).
    proportion = opt.warmup_steps_proportion
    warmup = 0 if proportion <= 0.001 else int(proportion * (total_steps or 0))
    min_lr = opt.lr * opt.min_lr_ratio
    warmup_start_lr = 0.0
    if backend != "megatron":
        # The FSDP engine's schedules: its own cosine (areal/utils/fsdp get_cosine_schedule_with_warmup) warms up
        # from min_lr_ratio and decays to it; transformers' linear one ignores min_lr_ratio and decays to 0.
        # Megatron's OptimizerParamScheduler warms up from 0 and decays to min_lr in both shapes.
        if opt.lr_scheduler_type == "cosine":
            warmup_start_lr = min_lr
        elif opt.lr_scheduler_type == "linear":
            min_lr = 0.0
    # AReaL steps its scheduler once per training step (after ppo_update), over the dataset's
    # epochs × batches (FinetuneSpec.total_train_steps), in both engines.
    return Optimizer(lr=opt.lr, name="sgd" if opt.type == "sgd" else "adamw", weight_decay=opt.weight_decay,
                     betas=(opt.beta1, opt.beta2), eps=opt.eps,
                     grad_clip=opt.gradient_clipping if opt.gradient_clipping > 0 else None,
                     scheduler=opt.lr_scheduler_type, warmup_steps=warmup, min_lr=min_lr,
                     warmup_start_lr=warmup_start_lr, schedule_unit="train_step")


def _micro(engine: Any, samples_per_rank: int) -> tuple[int | None, int | None]:
    """(samples per micro-batch, token budget): AReaL packs sequences and splits a rank's batch either by a
    token budget (max_tokens_per_mb, n_mbs then being a minimum count) or into n_mbs micro-batches."""
    spec = engine.mb_spec
    n = max(spec.n_mbs or 1, 1)
    if spec.max_tokens_per_mb is not None:
        return None, spec.max_tokens_per_mb
    return (max(-(-samples_per_rank // n), 1) if samples_per_rank else None), None


# Where AReaL writes each field of ir.Lora, under the engine's section.
LORA_KEYS = (("rank", "lora_rank"), ("alpha", "lora_alpha"), ("target_modules", "target_modules"))


def _lora(engine: Any) -> Lora:
    """FSDPEngine._apply_peft_wrapper: PEFT's LoraConfig of lora_rank and lora_alpha on target_modules (empty or
    [all-linear] is PEFT's all-linear), with PEFT's defaults for the rest (no dropout, kaiming A, zero B)."""
    targets = list(engine.target_modules or [])
    return Lora(rank=engine.lora_rank, alpha=engine.lora_alpha,
                target_modules="all-linear" if targets in ([], ["all-linear"]) else tuple(targets))


def _train_role(name: str, engine: Any, c: alloc.Component | None, gpu_ids: tuple[int, ...],
                samples_per_rank_opt: int, samples_per_rank_step: int, trains: bool, total_steps: int | None,
                tokenizer: str | None, colocated_with_rollout: bool = False, path: str | None = None,
                section: str = "actor") -> Role:
    backend = TRAIN_BACKEND.get(c.effective_backend if c else "fsdp", "fsdp2")
    offload_all = bool(getattr(engine, "offload", False)) or colocated_with_rollout
    optimizer = _optimizer(engine, total_steps, backend) if trains else None
    micro, budget = _micro(engine, samples_per_rank_opt if trains else samples_per_rank_step)
    forward_micro, _ = _micro(engine, samples_per_rank_step)
    # Only a trained engine's adapter changes anything: a reference's starts at zero and never moves.
    lora = _lora(engine) if trains and getattr(engine, "use_lora", False) else None
    return Role(
        name=name, backend=backend,
        resources=Resources(gpus=len(gpu_ids), gpu_ids=gpu_ids or None),
        model=Model(path=path if path is not None else engine.path, dtype=_dtype(engine.dtype), tokenizer=tokenizer),
        parallelism=_parallelism(c, engine),
        offload=Offload(params=offload_all or engine.fsdp.offload_params,
                        optimizer=offload_all or bool(engine.optimizer and engine.optimizer.offload),
                        grads=offload_all, cpu_offload_during_step=engine.fsdp.offload_params),
        optimizer=optimizer,
        micro_batch_size=micro if trains else None,
        forward_micro_batch_size=forward_micro,
        gradient_checkpointing=engine.gradient_checkpointing if trains else False,
        disable_dropout=engine.disable_dropout if trains else False,
        sequence_packing=True,
        max_tokens_per_micro_batch=budget,
        lora=lora,
        section=section,
        # AReaL sizes micro-batches by a token budget (max_tokens_per_mb) or by their count (n_mbs).
        keys=(("max_tokens_per_micro_batch", f"{section}.mb_spec.max_tokens_per_mb"),)
        + ((("micro_batch_size", f"{section}.mb_spec.n_mbs"),) if trains and micro is not None else ())
        + ((("forward_micro_batch_size", f"{section}.mb_spec.n_mbs"),) if forward_micro is not None else ())
        + (tuple((f"lora.{field}", f"{section}.{key}") for field, key in LORA_KEYS) if lora else ()),
    )


def _rollout_role(cfg: Any, c: alloc.Component | None, gpu_ids: tuple[int, ...], colocated: bool) -> Role:
    backend = c.backend if c is not None and c.backend in ("sglang", "vllm") else "sglang"
    engines = c.dims.get("d") if c is not None and c.dims is not None else None
    if backend == "sglang":
        s = cfg.sglang
        engine: dict[str, Any] = {
            "mem_fraction_static": s.mem_fraction_static,
            "max_model_len": s.context_length,
            "max_num_seqs": s.max_running_requests,
            "max_num_batched_tokens": s.max_prefill_tokens,
            "enforce_eager": s.disable_cuda_graph,
            "enable_prefix_caching": not s.disable_radix_cache,
            # -1 turns chunked prefill off (AReaL's default, for precision); null leaves SGLang's own, which chunks.
            "enable_chunked_prefill": s.chunked_prefill_size != -1,
            # The launchers start server i with random_seed + i; this is the first server's.
            "seed": s.random_seed,
            "attention_backend": s.attention_backend,
            "cuda_graph_bs": tuple(s.cuda_graph_bs) if s.cuda_graph_bs else None,
        }
        model_path, dtype, offload = s.model_path or cfg.actor.path, s.dtype, s.enable_memory_saver
    else:
        v = cfg.vllm
        engine = {
            "gpu_memory_utilization": v.gpu_memory_utilization,
            "max_model_len": v.max_model_len,
            "max_num_seqs": v.max_num_seqs,
            "enforce_eager": v.enforce_eager,
            # The older flag turns a feature on, the 1.0 one passes --no-enable-...; either spelling counts.
            "enable_prefix_caching": v.enable_prefix_caching or not v.no_enable_prefix_caching,
            "enable_chunked_prefill": v.enable_chunked_prefill or not v.no_enable_chunked_prefill,
            "block_size": v.block_size,
            "seed": v.seed,
        }
        model_path, dtype, offload = v.model or cfg.actor.path, v.dtype, v.enable_sleep_mode
    engine["engines"] = engines
    return Role(
        name="rollout", backend=backend,
        resources=Resources(gpus=len(gpu_ids), gpu_ids=gpu_ids or None),
        model=Model(path=model_path, dtype=_dtype(dtype)),
        parallelism=_parallelism(c),
        # Sharing the actor's GPUs, AReaL releases the server's memory while the actor trains.
        offload=Offload(params=offload or colocated),
        section="rollout",
        engine=tuple(sorted((k, v) for k, v in engine.items() if v is not None)),
    )


def _with_backend_keys(cfg: Any, role: Role) -> Role:
    """The role with the key where its backend and parallel sizes are written: the engine's own 1.0 `backend`
    string, the trainer's when it runs in the trainer's processes, or the deprecated allocation_mode."""
    key = backend_key(cfg, role.name, role.section or "actor")
    # One string holds the backend and every parallel size (the FSDP engine reads `c` as Ulysses).
    return dataclasses.replace(role, keys=role.keys + tuple((setting, key) for setting in (
        "backend", "parallelism.sp", "parallelism.tp", "parallelism.pp")))


# ---- the rest of the experiment ------------------------------------------------------------------------------


def _cluster(cfg: Any) -> Cluster:
    nodes, per_node = cfg.cluster.n_nodes, cfg.cluster.n_gpus_per_node
    if per_node == 0:
        # AReaL's CPU example (n_gpus_per_node: 0): the config says nothing about GPUs; the plan's flags decide.
        return Cluster(nodes=nodes, gpus_per_node=None)
    if (nodes, per_node) == SEED_DEFAULT_CLUSTER:
        return Cluster(nodes=None, gpus_per_node=per_node)
    return Cluster(nodes=nodes, gpus_per_node=per_node)


def _data(cfg: Any, max_prompt_length: int | None, rl: bool = True) -> Data:
    train, valid = cfg.train_dataset, cfg.valid_dataset
    # AReaL picks a dataset loader by the path's name; its GSM8K loader reads `question` and `answer`, and its RL
    # loader asks for a boxed answer and drops a prompt whose question and request, tokenized before the chat
    # template, pass max_length (the validation set's own max_length for it). The GSM8K RLVR script renders the chat
    # template with enable_thinking=False.
    gsm8k = "gsm8k" in train.path.lower()
    return Data(train_files=(train.path,), eval_files=(valid.path,) if valid is not None else (),
                prompt_key="question" if gsm8k else "prompt", answer_key="answer" if gsm8k else None,
                prompt_suffix=GSM8K_PROMPT_SUFFIX if gsm8k and rl else "",
                chat_template_kwargs=(("enable_thinking", False),) if rl else (),
                max_prompt_length=max_prompt_length, shuffle=train.shuffle, seed=cfg.seed,
                prompt_length_of="message" if rl else "rendered",
                eval_max_prompt_length="same" if not rl or valid is None or valid.max_length == max_prompt_length
                else valid.max_length)


def _boba_data(cfg: Any) -> Data:
    """examples/math/boba_grpo.py's data: a JSON file of `prompt` (written for DeepSeek-R1) and `solutions`; prompts
    of at most BOBA_PROMPT_TOKENS tokens as written, stripped of BOBA_PROMPT_REMOVALS, rendered with thinking on."""
    return Data(train_files=(cfg.train_dataset.path,), prompt_key="prompt", answer_key="solutions", answer_list=True,
                prompt_removals=BOBA_PROMPT_REMOVALS, chat_template_kwargs=(("enable_thinking", True),),
                max_prompt_length=BOBA_PROMPT_TOKENS, prompt_length_of="source", shuffle=cfg.train_dataset.shuffle,
                seed=cfg.seed)


def _countdown_data(cfg: Any, evaluates: bool) -> Data:
    """examples/countdown/train.py's data: JSON lines of `query`, `target` and `numbers`, every prompt kept, each query
    tokenized as written; 0.3 and 0.4 (`evaluates`) also read valid_dataset.path, unfiltered, for evaluation."""
    valid = cfg.valid_dataset
    return Data(train_files=(cfg.train_dataset.path,),
                eval_files=(valid.path,) if evaluates and valid is not None else (),
                prompt_key="query", answer_key=COUNTDOWN_ANSWER_FIELDS[0], answer_fields=COUNTDOWN_ANSWER_FIELDS,
                apply_chat_template=False, shuffle=cfg.train_dataset.shuffle, seed=cfg.seed)


def _data_of(cfg: Any, entry_runs: str | None) -> Data:
    if entry_runs in BOBA_SCRIPTS:
        return _boba_data(cfg)
    if entry_runs in COUNTDOWN_SCRIPTS:
        return _countdown_data(cfg, evaluates=entry_runs == COUNTDOWN_EVALUATED)
    # For RL data, train_dataset.max_length drops prompts longer than it.
    return _data(cfg, cfg.train_dataset.max_length)


def _reward_of(entry_runs: str | None) -> str:
    if entry_runs in MATH_PARSER_SCRIPTS:
        return "areal_math_parser"
    return "areal_countdown" if entry_runs in COUNTDOWN_SCRIPTS else "areal_math_verify"


def _checkpointing(cfg: Any) -> Checkpointing:
    saver = cfg.saver
    # AReaL saves under <fileroot>/checkpoints/<user>/<experiment>/<trial>; the user is only known where the job
    # runs, so it is left out. Each of AReaL's triggers (freq_steps, freq_epochs, freq_secs) saves on its own.
    return Checkpointing(directory=f"{saver.fileroot}/checkpoints/{cfg.experiment_name}/{cfg.trial_name}",
                         interval=saver.freq_steps, epoch_interval=saver.freq_epochs, time_interval_s=saver.freq_secs,
                         keep_last=None,
                         resume="none" if cfg.recover.mode in ("disabled", "off") else "latest", save_hf=True)


def _logging(cfg: Any) -> Logging:
    s = cfg.stats_logger
    backends = ["jsonl", "console"]
    if s.tensorboard.path:
        backends.append("tensorboard")
    if s.wandb.mode in ("online", "offline", "shared"):
        backends.append("wandb")
    # SwanLab and Trackio have no counterpart among rlcfg's logging backends.
    return Logging(directory=f"{s.fileroot}/logs/{cfg.experiment_name}/{cfg.trial_name}",
                   project=s.wandb.project or cfg.experiment_name, run_name=s.wandb.name or cfg.trial_name,
                   backends=tuple(backends))


def _asynchrony(cfg: Any) -> dict[str, Any]:
    """How far rollouts run ahead of the trainer. v0.3 with async_training false rolls out synchronously whatever
    the bound says; without a bound, how many rollouts generate at once changes nothing that is computed."""
    staleness = cfg.rollout.max_head_offpolicyness if cfg.async_training else 0
    return {"max_staleness": staleness,
            "rollout_concurrency": cfg.rollout.max_concurrent_rollouts if staleness else None}


def _eval_schedule(cfg: Any, evaluates: bool) -> dict[str, Any]:
    """When to evaluate, when the run evaluates (validation data its script reads): each of evaluator.freq_steps,
    freq_epochs and freq_secs triggers on its own (AReaL's EpochStepTimeFreqCtl)."""
    e, valid = cfg.evaluator, evaluates
    return {"eval_interval": e.freq_steps if valid else None, "eval_epoch_interval": e.freq_epochs if valid else None,
            "eval_time_interval_s": e.freq_secs if valid else None, "eval_before_train": e.eval_before_train}


def _sampling(g: Any, backend: str = "sglang") -> Sampling:
    # stop_token_ids go to both engines (areal/engine/sglang_remote.py and vllm_remote.py
    # build_generation_request); frequency_penalty only to SGLang: AReaL's vLLM request leaves it out, so with
    # vLLM it changes nothing, in AReaL as in rlcfg. min_new_tokens reaches neither (inert).
    frequency = g.frequency_penalty
    return Sampling(max_new_tokens=g.max_new_tokens, temperature=0.0 if g.greedy else g.temperature, top_p=g.top_p,
                    top_k=1 if g.greedy else (-1 if g.top_k >= TOP_K_UNLIMITED else g.top_k), n=g.n_samples,
                    stop=tuple(g.stop or ()), stop_token_ids=tuple(int(t) for t in g.stop_token_ids or ()),
                    frequency_penalty=frequency if backend == "sglang" else 0.0)


def _steps(cfg: Any, samples_per_step: int) -> int | None:
    """AReaL runs total_train_epochs × (dataset batches); total_train_steps and total_train_n_seqs stop it
    earlier. Only the caps are known without the dataset."""
    caps = [cfg.total_train_steps] if cfg.total_train_steps else []
    if cfg.total_train_n_seqs and samples_per_step:
        caps.append(-(-cfg.total_train_n_seqs // samples_per_step))
    return min(caps) if caps else None


def _norm_advantage(actor: Any, has_critic: bool) -> dict[str, Any]:
    """The estimator AReaL's reward_norm / adv_norm amount to (PPOActor.compute_advantages: the shaped score,
    reward_norm'ed, on the last token, minus the KL per token, through GAE with the critic's values or zero values,
    then adv_norm'ed over the loss mask's tokens, ir.TokenNorm).

    - a critic: GAE;
    - a group-level reward_norm: GRPO, (score − group mean) / (group std + eps) with AReaL's eps and std
      (std_unbiased), or without the std (std_level null); RLOO with mean_leave1out;
    - a group mean with a batch std (LitePPO): the scores so normalised (the std is the spread about each group's
      mean, AReaL's Normalization), then as without reward_norm: the discounted returns;
    - no reward_norm: the plain (discounted) returns, REINFORCE++.
    Norm settings outside these (batch-level reward_norm, ...) are refused by the rule areal/run-ledger; the nearest
    form is lowered here so that `rlcfg plan` can still show the rest."""
    rn, an = actor.reward_norm, actor.adv_norm
    # Only the forms above are lowered faithfully; for the others (and for a group_size other than n_samples)
    # areal/run-ledger refuses the run.
    norm = TokenNorm(an.mean_level, an.std_level, an.mean_leave1out, an.std_unbiased, an.eps) if an is not None \
        else None
    # The batch form is the whitening every dialect has (AReaL divides by std + 1e-5, the others by √(var + 1e-8),
    # the same to about 1e-5 of the result), which convert carries to the others; any other form runs as itself.
    whiten = norm == TokenNorm()
    plain = AdvantageOptions(whiten=whiten, token_norm=None if whiten else norm)
    if has_critic:
        options = plain
        if rn is not None:
            options = dataclasses.replace(plain, reward_norm_mean=rn.mean_level, reward_norm_std=rn.std_level)
        return {"advantage": "gae", "advantage_options": options}
    if rn is not None and rn.mean_level == "group" and rn.std_level == "batch":
        options = dataclasses.replace(plain, reward_norm_mean="group", reward_norm_std="batch",
                                      reward_norm_std_of="centred", reward_norm_eps=rn.eps,
                                      reward_norm_unbiased=rn.std_unbiased)
        return {"advantage": "reinforce++", "normalize_advantage_std": False, "batch_normalize_advantage": False,
                "advantage_options": options}
    if rn is not None and rn.mean_level == "group":
        options = dataclasses.replace(plain, std="unbiased" if rn.std_unbiased else "population", eps=rn.eps)
        return {"advantage": "rloo" if rn.mean_leave1out and rn.std_level is None else "grpo",
                "normalize_advantage_std": rn.std_level is not None, "batch_normalize_advantage": whiten,
                "advantage_options": options}
    options = plain
    if rn is not None:
        options = dataclasses.replace(plain, reward_norm_mean=rn.mean_level, reward_norm_std=rn.std_level)
    return {"advantage": "reinforce++", "normalize_advantage_std": False, "batch_normalize_advantage": False,
            "advantage_options": options}


def _policy(a: Any) -> tuple[str, PolicyOptions]:
    """The policy loss (areal/utils/functional ppo_actor_loss_fn, sapo_loss_fn; v1.0 grpo_loss_fn picks one) and
    its options. The decoupled loss weights each token by π_prox/π_behave (v0.3: always; 1.0: with
    rejection_sampling) and leaves out the tokens above behav_imp_weight_cap (v0.3) / rejection_sampling.upper
    (1.0, action mask, metric ratio, token level; masked before the GSPO sequence means are taken)."""
    if a.use_sapo_loss:
        kind = "sapo"
    elif a.importance_sampling_level == "sequence":
        kind = "gspo"
    elif a.c_clip is not None:
        kind = "dual_clip"
    else:
        kind = "regular"
    rs = a.rejection_sampling
    cap = rs.upper if rs is not None else a.behav_imp_weight_cap
    # recompute_logprob (implied by the decoupled loss) makes the proximal log-probabilities the trainer's; without
    # either AReaL takes π_old of the ratio and of the KL penalty from the inference engine (Algorithm.old_logprobs).
    decoupled = a.use_decoupled_loss
    options = PolicyOptions(gspo_form="sequence", sapo_tau_pos=a.sapo_tau_pos, sapo_tau_neg=a.sapo_tau_neg,
                            decoupled=decoupled, behav_imp_weight_cap=cap if decoupled else None,
                            cap_before_sequence_means=kind == "gspo" and decoupled and rs is not None,
                            m2_threshold=a.m2_threshold)
    return kind, options


def _algorithm(cfg: Any, group: int, reference_built: bool) -> Algorithm:
    a = cfg.actor
    has_critic = cfg.critic is not None
    kind, options = _policy(a)
    # AReaL measures the overlong tail from the actor's max_new_tokens (areal/run-ledger refuses a gconfig that
    # differs, as the penalty would then not end at the generation limit).
    longest, tail, factor = a.max_new_tokens, a.overlong_tokens, a.overlong_penalty_factor
    start = max(longest - tail, 0) if tail is not None else None
    overlong = start if a.overlong_reward_penalty else None
    # GAE with zero values (no critic) is the reward-to-go discounted by discount × gae_lambda.
    gamma, lam = (a.discount, a.gae_lambda) if has_critic else (a.discount * a.gae_lambda, 1.0)
    return Algorithm(
        **_norm_advantage(a, has_critic),
        group_size=group, gamma=gamma, lam=lam, policy_loss=kind,
        clip_low=a.eps_clip, clip_high=a.eps_clip_higher if a.eps_clip_higher is not None else a.eps_clip,
        clip_ratio_c=a.c_clip if a.c_clip is not None else 3.0,
        # The loss weighs every micro-batch by its count of loss tokens: a token mean over the minibatch.
        loss_aggregation="token-mean",
        # The KL penalty goes into the token rewards after the score's normalisation (reward_mode "token").
        # With the decoupled loss π_old of the penalty is the behaviour policy, the inference engine's log-probs.
        kl=KL(placement="reward", coef=a.kl_ctl, estimator=a.kl_estimator, reward_mode="token",
              policy_logprobs="rollout" if a.use_decoupled_loss else "old")
        if reference_built else KL(),
        entropy_coef=0.0,
        value_clip=cfg.critic.eps_clip if has_critic else None,
        ppo_epochs=1,
        reward=RewardShaping(scale=a.reward_scaling, bias=a.reward_bias, clip=a.reward_clip,
                             overlong_penalty_length=overlong,
                             overlong_penalty_factor=factor if overlong is not None and factor is not None else 1.0,
                             order="penalty_first",
                             # A response without EOS scores 0 and stays in the loss (its KL terms too).
                             zero_truncated=a.mask_no_eos_with_zero),
        policy_options=options,
        old_logprobs=_old_logprobs(a),
    )


def _old_logprobs(actor: Any) -> str:
    """The decoupled loss's proximal policy: recomputed by the trainer, or with prox_logp_method loglinear
    interpolated from the engine's log-probs (AReaL skips the recompute pass); without the decoupled loss or
    recompute_logprob, π_old is the engine's."""
    if actor.use_decoupled_loss and actor.prox_logp_method == "loglinear":
        return "interpolated"
    return "trainer" if actor.recompute_logprob or actor.use_decoupled_loss else "rollout"


# ---- lowering ------------------------------------------------------------------------------------------------


def lower(cfg: Any, entry_runs: str | None = None) -> Experiment:
    """`entry_runs`: what the launch's entry script runs (rlcfg.dialects.areal.entries), None for a config file run
    alone, which rlcfg scores and prompts as GSM8K_RLVR does."""
    if pipeline_kind(cfg) == "grpo":
        return _lower_rl(cfg, entry_runs)
    return _lower_supervised(cfg)


def _lower_rl(cfg: Any, entry_runs: str | None) -> Experiment:
    actor = cfg.actor
    group = cfg.gconfig.n_samples
    reference_built = actor.kl_ctl > 0 and cfg.ref is not None
    # The runtime takes the trainer's (and the reference's) log-probabilities at the sampling temperature; the rule
    # areal/run-ledger refuses an actor.temperature / ref.temperature that differs, so in every run that starts these
    # are that temperature.
    roles = engine_roles(cfg)
    components, groups, sizes = _layout(cfg, roles)
    ids = _gpu_ids(groups, sizes)
    dp = _data_parallel(components["actor"])

    batch = cfg.train_dataset.batch_size
    prompts = batch // dp * dp if batch >= dp else batch
    samples = prompts * group
    # 0 mini-batches: AReaL cuts the step by its token budget alone, one optimizer step where it all fits (the rule
    # areal/zero-minibatches warns, and `rlcfg run` refuses it); plan counts it as that one step.
    per_opt = max(samples // max(actor.ppo_n_minibatches, 1), 1)
    total_steps = _steps(cfg, samples)
    tokenizer = cfg.tokenizer_path or None
    colocated = [g for g in groups if len(g) > 1]
    rollout_shares = any("rollout" in g and "actor" in g for g in colocated)

    out = [_train_role("actor", actor, components["actor"], ids["actor"], per_opt // dp, samples // dp, True,
                       total_steps, tokenizer, colocated_with_rollout=rollout_shares),
           _rollout_role(cfg, components["rollout"], ids["rollout"], rollout_shares)]
    if reference_built:
        # v0.3.4 builds ref with an empty path unless told; AReaL would fail to load it (the validator warns), and
        # the policy's weights are what every AReaL example points it at.
        out.append(_train_role("reference", cfg.ref, components["reference"], ids["reference"], 0, samples // dp,
                               False, None, tokenizer, path=cfg.ref.path or actor.path, section="ref"))
    if cfg.critic is not None:
        out.append(_train_role("critic", cfg.critic, components["critic"], ids["critic"],
                               max(samples // max(cfg.critic.ppo_n_minibatches, 1), 1) // dp, samples // dp, True,
                               total_steps, tokenizer, section="critic"))
    out = [_with_backend_keys(cfg, role) for role in out]
    # Listed in the order of their GPUs, so that a plan reads like AReaL's launch order.
    out.sort(key=lambda role: min(role.resources.gpu_ids or (1 << 30,)))
    # The reward function runs in the rollout workflow's CPU worker pool, on no GPU.
    out.append(Role(name="reward", backend="rule", resources=Resources(gpus=0)))

    eval_g = cfg.eval_gconfig or cfg.gconfig  # 1.0 copies gconfig when eval_gconfig is null (AR-20)
    if entry_runs in GSM8K_SCRIPTS:  # the script evaluates with its own copy of gconfig
        eval_g = cfg.gconfig.model_copy(update={"temperature": GSM8K_RLVR_EVAL_TEMPERATURE})
    elif entry_runs == COUNTDOWN_EVALUATED:
        eval_g = cfg.gconfig.model_copy(update={"temperature": COUNTDOWN_EVAL_TEMPERATURE})
    engine = next((r.backend for r in out if r.backend in ("sglang", "vllm")), "sglang")
    data = _data_of(cfg, entry_runs)
    return Experiment(
        name=cfg.experiment_name, dialect="areal", variant="grpo", cluster=_cluster(cfg), roles=tuple(out),
        colocation=tuple(colocated), algorithm=_algorithm(cfg, group, reference_built),
        sampling=_sampling(cfg.gconfig, engine),
        eval_sampling=_sampling(eval_g, engine) if data.eval_files else None,
        data=data,
        schedule=Schedule(prompts_per_step=prompts, samples_per_step=samples, samples_per_optimizer_step=per_opt,
                          total_steps=total_steps, epochs=cfg.total_train_epochs,
                          **_asynchrony(cfg),
                          **_eval_schedule(cfg, evaluates=bool(data.eval_files))),
        checkpointing=_checkpointing(cfg), logging=_logging(cfg), seed=cfg.seed,
        reward_function=_reward_of(entry_runs), kind="rl",
    )


def _lower_supervised(cfg: Any) -> Experiment:
    """SFT and reward-model training: one trained model, no rollout. Each dataloader batch is one optimizer
    step (AReaL's train_lm / reward-model step on the whole batch); rlcfg.runtime.supervised runs them."""
    engine = cfg.actor if cfg.actor is not None else cfg.model
    reward_model = pipeline_kind(cfg) == "rw"
    [name] = engine_roles(cfg)
    components, groups, sizes = _layout(cfg, [name])
    ids = _gpu_ids(groups, sizes)
    dp = _data_parallel(components[name])
    batch = cfg.train_dataset.batch_size
    # A reward-model batch holds preference pairs; rlcfg counts the pairs as its samples.
    samples = batch // dp * dp if batch >= dp else batch
    total_steps = _steps(cfg, samples)
    role = _train_role(name, engine, components[name], ids[name], samples // dp, samples // dp, True, total_steps,
                       cfg.tokenizer_path or None, section="actor" if cfg.actor is not None else "model")
    role = _with_backend_keys(cfg, role)
    if role.optimizer is not None:
        # A supervised run's step count is known once its data is read: the runtime takes the warm-up from it, as
        # AReaL does (int(proportion × epochs × batches per epoch), at every proportion).
        # Each supervised step is one optimizer step (train_lm), so its schedule counts them as such.
        role = dataclasses.replace(role, optimizer=dataclasses.replace(
            role.optimizer, warmup_steps=0, warmup_proportion=engine.optimizer.warmup_steps_proportion,
            schedule_unit="optimizer_step"))
    max_length = cfg.train_dataset.max_length
    # Nothing is generated: max_new_tokens carries the longest training sequence (train_dataset.max_length,
    # prompt and answer together) so that the plan sizes activations for it; it is no generation limit. The
    # temperature is the one SFT's log-probabilities are taken at (1.0's engine `temperature`; 0.3 has none).
    sampling = Sampling(max_new_tokens=max_length or 0, n=1, temperature=getattr(engine, "temperature", 1.0))
    # AReaL's SFT loaders tokenize the plain question + answer + EOS (no chat template) and drop what is longer
    # than max_length; its reward-model loader reads the `chosen` and `rejected` texts (Data's defaults).
    data = dataclasses.replace(_data(cfg, None, rl=False), answer_key="answer", apply_chat_template=False,
                               max_length=max_length)
    return Experiment(
        name=cfg.experiment_name, dialect="areal", variant=pipeline_kind(cfg), cluster=_cluster(cfg), roles=(role,),
        colocation=(), algorithm=Algorithm(group_size=1, ppo_epochs=1), sampling=sampling, eval_sampling=None,
        data=data,
        schedule=Schedule(prompts_per_step=samples, samples_per_step=samples, samples_per_optimizer_step=samples,
                          total_steps=total_steps, epochs=cfg.total_train_epochs,
                          **_eval_schedule(cfg, evaluates=bool(data.eval_files))),
        checkpointing=_checkpointing(cfg), logging=_logging(cfg), seed=cfg.seed, reward_function="math",
        kind="reward_model" if reward_model else "sft",
    )


_BACKEND_NAMES = (("vllm", "vllm"), ("sglang", "sglang"), ("fsdp", "fsdp"), ("megatron", "megatron"))
# AReaL writes an engine's backend and every parallel size in one string (`allocation_mode`, or a 1.0 `backend`:
# `sglang:d2t4`); the letter of each size there.
_SIZE_LETTERS = (("tp", "t"), ("pp", "p"), ("sp", "c"), ("cp", "c"), ("ep", "e"))


def spelling(role: Role) -> Spelling:
    return Spelling(backends=_BACKEND_NAMES, size_letters=_SIZE_LETTERS)
