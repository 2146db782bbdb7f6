"""Experiment → AReaL, in the layout of the release asked for: `allocation_mode` up to 0.5 (the SPMD launchers), each
engine's own `backend` string from 1.0 (the single controller). From 0.5 there is no `actor.group_size`, SFT trains
`actor` rather than `model`, and an unused `ref` section is no longer needed.

AReaL counts a step in prompts (train_dataset.batch_size) times gconfig.n_samples and splits it into
ppo_n_minibatches optimizer steps; `allocation_mode` gives the generation servers the first GPUs and the trainer
the next ones (`sglang.d4p1t1+d4p1t1`). Its KL always goes into the token rewards (kl_ctl), after
reward_norm; its reward is (score + reward_bias) × reward_scaling clipped to ±reward_clip; GRPO is a group-level
reward_norm, and adv_norm normalises the token advantages (a whitening elsewhere is AReaL's batch adv_norm).
"""

from __future__ import annotations

from typing import Any

from rlcfg.convert import Emitted
from rlcfg.convert.common import engine, engines, put, shares
from rlcfg.dialects.areal.models import (BEFORE_1_0, SECTIONS_ALWAYS_BUILT, EvaluatorConfig, GRPOConfig,
                                         PPOActorConfig, SFTConfig, VLLMConfig)
from rlcfg.ir import Experiment, Role
from rlcfg.schema import entry
from rlcfg.schema.base import Section, field_releases

ENTRY = entry("areal")

KINDS = ("rl", "sft", "reward_model")
DTYPES = {"bfloat16": "bfloat16", "float16": "float16", "float32": "float32"}
TOP_K_UNLIMITED = 100000000

REASONS = {
    "algorithm.kl.placement": "AReaL's KL (kl_ctl) always goes into the token rewards",
    "algorithm.kl.reward_mode": "AReaL subtracts the KL per token after reward_norm",
    "algorithm.kl.estimator": "AReaL's kl_estimator offers k1, k2 and k3",
    "algorithm.kl.controller": "AReaL's kl_ctl is fixed",
    "algorithm.advantage_options.std": "AReaL's reward_norm std",
    "algorithm.policy_options.log_ratio_max": "AReaL's loss has no log-ratio clamp",
    "algorithm.policy_options.log_ratio_min": "AReaL's loss has no log-ratio clamp",
    "algorithm.policy_options.loss_cap": "AReaL's loss has no per-token cap",
    "algorithm.policy_options.gspo_form": "AReaL's GSPO is the sequence form (importance_sampling_level)",
    "algorithm.policy_options.cap_before_sequence_means": "AReaL 1.0's rejection_sampling leaves the rejected tokens "
                                                          "out of GSPO's sequence means; 0.4 and 0.5's "
                                                          "behav_imp_weight_cap weighs them out after",
    "algorithm.policy_options.tis_cap": "AReaL corrects off-policy rollouts with its decoupled loss instead",
    "algorithm.policy_options.tis_level": "AReaL corrects off-policy rollouts with its decoupled loss instead",
    "algorithm.policy_options.early_stop_ratio": "AReaL has no early stop on the importance ratio",
    "algorithm.policy_options.loss_coef": "AReaL has no policy-loss coefficient",
    "algorithm.loss_aggregation": "AReaL averages the loss over the tokens",
    "algorithm.entropy_coef": "AReaL's actor has no entropy bonus",
    "algorithm.ppo_epochs": "AReaL walks a step's samples once",
    "algorithm.reward.order": "AReaL applies the overlong penalty first, then (score + bias) × scale, then clips",
    "algorithm.reward.clip": "AReaL clips the shaped reward to ±reward_clip (20 by default)",
    "algorithm.filters": "AReaL's trainer keeps every group",
    "algorithm.weighting": "AReaL has no per-sample loss weights or masks",
    "algorithm.mask_truncated": "AReaL has no overlong filtering of the loss",
    "roles.actor.micro_batch_size": "AReaL splits a rank's batch by a token budget or a count (mb_spec)",
    "roles.actor.forward_micro_batch_size": "AReaL splits a rank's batch by a token budget or a count (mb_spec)",
    "roles.reference.forward_micro_batch_size": "AReaL splits a rank's batch by a token budget or a count",
    "roles.critic.micro_batch_size": "AReaL splits a rank's batch by a token budget or a count (mb_spec)",
    "roles.critic.forward_micro_batch_size": "AReaL splits a rank's batch by a token budget or a count",
    "roles.actor.sequence_packing": "AReaL always packs sequences",
    "roles.reference.sequence_packing": "AReaL always packs sequences",
    "roles.critic.sequence_packing": "AReaL always packs sequences",
    "roles.actor.offload": "AReaL offloads only with enable_offload",
    "roles.reference.offload": "AReaL offloads only with enable_offload",
    "roles.critic.offload": "AReaL offloads only with enable_offload",
    "roles.rollout.offload": "AReaL's servers sleep only when they share the trainer's GPUs",
    "roles.reference.resources": "AReaL runs the reference model inside the trainer processes",
    "roles.critic.resources": "AReaL runs the critic inside the trainer processes",
    "roles.reference.parallelism": "AReaL runs the reference model inside the trainer processes",
    "roles.critic.parallelism": "AReaL runs the critic inside the trainer processes",
    "roles.reference.max_tokens_per_micro_batch": "AReaL's ref.mb_spec",
    "roles.actor.model.trust_remote_code": "rlcfg's AReaL dialect does not say trust_remote_code",
    "roles.reference.model.trust_remote_code": "rlcfg's AReaL dialect does not say trust_remote_code",
    "roles.critic.model.trust_remote_code": "rlcfg's AReaL dialect does not say trust_remote_code",
    "roles.rollout.model.trust_remote_code": "rlcfg's AReaL dialect does not say trust_remote_code",
    "roles.reward": "AReaL scores with a Python reward function in the rollout workflow",
    "roles.rollout.engine": "AReaL's sglang/vllm section has no such setting",
    "roles.rollout.parallelism": "AReaL's generation servers take d × p × t GPUs",
    "roles.actor.parallelism": "AReaL's trainer layout (allocation_mode)",
    "roles.actor.optimizer.warmup_steps": "AReaL's warm-up is a proportion of the run's steps",
    "roles.critic.optimizer.warmup_steps": "AReaL's warm-up is a proportion of the run's steps",
    "roles.actor.optimizer.min_lr": "AReaL's min_lr_ratio",
    "roles.actor.optimizer.name": "AReaL's optimizers are adam (AdamW) and sgd",
    "roles.critic.optimizer": "AReaL's critic optimizer",
    "data.prompt_key": "AReaL's datasets are read by their loader (GSM8K: `question`)",
    "data.answer_key": "AReaL's datasets are read by their loader (GSM8K: `answer`)",
    "data.answer_fields": "AReaL's datasets are read by their loader (countdown: `target` and `numbers`)",
    "data.apply_chat_template": "AReaL always applies the chat template",
    "data.prompt_length_of": "AReaL's RL loaders measure max_length on the prompt's text before the chat template",
    "data.prompt_suffix": "AReaL's GSM8K loader asks for a boxed answer; its other loaders add nothing",
    "data.chat_template_kwargs": "AReaL's GSM8K RLVR script renders prompts with enable_thinking=False",
    "reward_function": "AReaL's reward is its entry script's; rlcfg runs its GSM8K reward (math-verify)",
    "data.seed": "AReaL shuffles with the experiment's seed",
    "data.train_files": "AReaL reads one dataset path",
    "data.eval_files": "AReaL reads one dataset path",
    "checkpointing": "AReaL saves under fileroot/checkpoints/<experiment>/<trial>, with HF weights",
    "logging": "AReaL logs under fileroot/logs/<experiment>/<trial>",
    "cluster": "AReaL's cluster.n_nodes and n_gpus_per_node",
    "schedule.total_steps": "AReaL's total_train_steps",
    "schedule.eval_before_train": "AReaL evaluates before training from 1.0 (evaluator.eval_before_train)",
    "schedule.samples_per_optimizer_step": "AReaL's mini-batch is the step divided by ppo_n_minibatches",
    "schedule.prompts_per_step": "AReaL rounds the batch down to a multiple of the data-parallel size",
    "schedule.ahead_across_epochs": "AReaL's rollouts run ahead across epochs",
    "eval_sampling": "AReaL evaluates with gconfig's sampling before 0.5 (eval_gconfig)",
    "sampling.repetition_penalty": "AReaL's gconfig has no repetition penalty",
    "sampling.presence_penalty": "AReaL's gconfig has no presence penalty",
    "sampling.frequency_penalty": "AReaL sends frequency_penalty to SGLang only",
    "sampling.min_p": "AReaL's gconfig has no min_p",
    "roles.rollout.model.path": "AReaL's servers load the actor's model unless their own path is set",
    "colocation": "AReaL's allocation_mode shares GPUs between the servers and the trainer only as a whole",
}


def _has(release: str, section: type[Section], name: str) -> bool:
    """Whether `release` has the section's field (the releases declared on it from releases.json)."""
    releases = field_releases(section.model_fields[name])
    return releases is None or release in releases


def _trainer_backend(r: Role) -> str:
    """A 1.0 training engine's `backend` string: the backend is named (1.0 no longer picks one), then its sizes."""
    return f"{'megatron' if r.backend == 'megatron' else 'fsdp'}:{_trainer_dims(r)}"


def _colocated_with_actor(section: dict, backend: str) -> None:
    """A 1.0 engine that runs on the actor's GPUs, as the reference and the critic do in AReaL."""
    section["backend"] = backend
    section["scheduling_strategy"] = {"type": "colocation", "target": "actor"}


def _trainer_dims(r: Role) -> str:
    p = r.parallelism
    cp = p.cp if r.backend == "megatron" else p.sp
    dp = max(r.resources.gpus // max(p.tp * p.pp * cp, 1), 1)
    return f"d{dp}p{p.pp}t{p.tp}" + (f"c{cp}" if cp > 1 else "")


def _optimizer(r: Role, e: Experiment) -> dict[str, Any] | None:
    o = r.optimizer
    if o is None:
        return None
    steps = e.schedule.total_steps
    proportion = getattr(o, "warmup_proportion", None)
    if proportion is None:
        proportion = o.warmup_steps / steps if steps and o.warmup_steps else 0.0
    return {"type": "sgd" if o.name == "sgd" else "adam", "lr": o.lr, "weight_decay": o.weight_decay,
            "beta1": o.betas[0], "beta2": o.betas[1], "eps": o.eps,
            "min_lr_ratio": (o.min_lr / o.lr) if o.lr else 0.0, "lr_scheduler_type": o.scheduler,
            "gradient_clipping": o.grad_clip if o.grad_clip is not None else 0.0,
            "warmup_steps_proportion": proportion}


def _engine_section(e: Experiment, r: Role, name: str, samples_per_rank: int | None, trains: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"experiment_name": e.name, "trial_name": _trial(e)}
    if r.model is not None:
        out["path"] = r.model.path
        out["dtype"] = DTYPES.get(r.model.dtype, "bfloat16")
    if trains:
        out["gradient_checkpointing"] = r.gradient_checkpointing
        out["disable_dropout"] = getattr(r, "disable_dropout", False)
    if trains and r.lora is not None:  # AReaL's PEFT settings; what it cannot say (dropout, ...) is a listed loss
        out.update(use_lora=True, lora_rank=r.lora.rank, lora_alpha=r.lora.alpha,
                   target_modules=["all-linear"] if r.lora.target_modules == "all-linear"
                   else list(r.lora.target_modules) if isinstance(r.lora.target_modules, tuple)
                   else [r.lora.target_modules])
    if r.max_tokens_per_micro_batch is not None:
        out["mb_spec"] = {"max_tokens_per_mb": r.max_tokens_per_micro_batch}
    else:
        micro = r.micro_batch_size if trains else r.forward_micro_batch_size
        if micro and samples_per_rank:
            out["mb_spec"] = {"n_mbs": max(samples_per_rank // micro, 1)}
    out["optimizer"] = _optimizer(r, e)
    return out


def _trial(e: Experiment) -> str:
    return e.logging.run_name or "trial0"


def _fileroot(e: Experiment) -> str:
    directory = e.checkpointing.directory
    suffix = f"/checkpoints/{e.name}/{_trial(e)}"
    if directory and directory.endswith(suffix):
        return directory[: -len(suffix)]
    return directory or "/tmp/areal/experiments"


def _gpus_used(e: Experiment) -> int:
    """The GPUs allocation_mode takes: the servers' and the trainer's (reference and critic live in the trainer)."""
    trained = e.role("actor") or e.role("critic")
    rollout = e.role("rollout")
    trainer = trained.resources.gpus if trained is not None else 0
    if rollout is None:
        return trainer
    servers = engines(rollout) * rollout.parallelism.tp * rollout.parallelism.pp
    return max(trainer, servers) if shares(e, "actor", "rollout") else trainer + servers


def _gconfig(s: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"n_samples": s.n, "min_new_tokens": s.min_new_tokens, "max_new_tokens": s.max_new_tokens}
    if s.temperature == 0:
        out["greedy"] = True
    else:
        out.update(greedy=False, temperature=s.temperature, top_p=s.top_p,
                   top_k=s.top_k if s.top_k > 0 else TOP_K_UNLIMITED)
    if s.stop:
        out["stop"] = list(s.stop)
    if s.stop_token_ids:
        out["stop_token_ids"] = list(s.stop_token_ids)
    if s.frequency_penalty:
        out["frequency_penalty"] = s.frequency_penalty
    return out


def emit(experiment: Experiment, release: str | None = None) -> Emitted:
    e = experiment
    release = release or ENTRY.releases[-1]
    per_engine = release not in BEFORE_1_0
    tree: dict[str, Any] = {"experiment_name": e.name, "trial_name": _trial(e), "seed": e.seed}
    s = e.schedule
    if s.epochs is not None:
        tree["total_train_epochs"] = s.epochs
    if s.total_steps is not None:
        tree["total_train_steps"] = s.total_steps
    total = _gpus_used(e)
    per_node = e.cluster.gpus_per_node or max(total, 1)
    if total < per_node or total % per_node:
        per_node = max(total, 1)  # AReaL's allocation must use the whole cluster
    put(tree, "cluster.n_nodes", max(total // per_node, 1))
    put(tree, "cluster.n_gpus_per_node", per_node)
    put(tree, "cluster.fileroot", _fileroot(e))

    if e.kind != "rl":
        return _supervised(e, tree, release)

    actor, rollout = e.role("actor"), e.role("rollout")
    reference, critic = e.role("reference"), e.role("critic")
    a = e.algorithm
    n = a.group_size
    backend = rollout.backend if rollout is not None and rollout.backend in ("sglang", "vllm") else "sglang"
    colocated = rollout is not None and shares(e, "actor", "rollout")
    if not per_engine:  # from 1.0 each engine's section names its backend (below)
        inference = (f"{backend}.d{engines(rollout)}p{rollout.parallelism.pp}t{rollout.parallelism.tp}"
                     f"{'|' if colocated else '+'}") if rollout is not None else ""
        tree["allocation_mode"] = inference + _trainer_dims(actor)
    if actor.model is not None and actor.model.tokenizer and actor.model.tokenizer != actor.model.path:
        tree["tokenizer_path"] = actor.model.tokenizer

    put(tree, "rollout.experiment_name", e.name)
    put(tree, "rollout.trial_name", _trial(e))
    # One training batch per rollout batch: the window rlcfg runs.
    put(tree, "rollout.consumer_batch_size", s.prompts_per_step)
    if s.max_staleness:  # AReaL's default, 0, is the synchronous loop
        put(tree, "rollout.max_head_offpolicyness", s.max_staleness)
    if s.rollout_concurrency is not None:
        put(tree, "rollout.max_concurrent_rollouts", s.rollout_concurrency)
    if per_engine and rollout is not None:
        put(tree, "rollout.backend", f"{backend}:d{engines(rollout)}p{rollout.parallelism.pp}t{rollout.parallelism.tp}")
        if colocated:
            # AReaL swaps the servers and the trainer on the shared GPUs, and then updates weights through disk.
            put(tree, "rollout.scheduling_strategy", {"type": "colocation", "target": "actor"})
            tree["enable_offload"] = True
    tree["gconfig"] = _gconfig(e.sampling)
    if e.eval_sampling is not None and e.eval_sampling != e.sampling and _has(release, GRPOConfig, "eval_gconfig"):
        tree["eval_gconfig"] = _gconfig(e.eval_sampling)

    dp = max(actor.resources.gpus // max(actor.parallelism.tp * actor.parallelism.pp, 1), 1)
    samples = s.samples_per_step
    minibatches = max(samples // max(s.samples_per_optimizer_step, 1), 1)
    section = _engine_section(e, actor, "actor", samples // minibatches // dp, trains=True)
    if per_engine:
        section["backend"] = _trainer_backend(actor)
        if colocated:
            section["weight_update_mode"] = "disk"
    if _has(release, PPOActorConfig, "group_size"):
        section["group_size"] = n
    section["eps_clip"] = a.clip_low
    if a.clip_high != a.clip_low:
        section["eps_clip_higher"] = a.clip_high
    if a.policy_loss == "dual_clip":
        section["c_clip"] = a.clip_ratio_c
    if a.policy_loss == "gspo":
        section["importance_sampling_level"] = "sequence"
    if a.policy_loss == "sapo":
        section.update(use_sapo_loss=True, sapo_tau_pos=a.policy_options.sapo_tau_pos,
                       sapo_tau_neg=a.policy_options.sapo_tau_neg)
    section["temperature"] = e.sampling.temperature if e.sampling.temperature else 1.0
    r = a.reward
    section.update(reward_scaling=r.scale, reward_bias=r.bias)
    section["reward_clip"] = r.clip if r.clip is not None else 1.0e9
    if r.overlong_penalty_length is not None:
        section.update(overlong_reward_penalty=True,
                       overlong_tokens=max(e.sampling.max_new_tokens - r.overlong_penalty_length, 0),
                       overlong_penalty_factor=r.overlong_penalty_factor)
    section["mask_no_eos_with_zero"] = r.zero_truncated
    kl = a.kl
    section["kl_ctl"] = kl.coef if kl.placement != "none" else 0.0
    if kl.placement != "none":
        section["kl_estimator"] = kl.estimator if kl.estimator in ("k1", "k2", "k3") else "k3"
    if critic is not None:
        section.update(discount=a.gamma, gae_lambda=a.lam)
    else:
        section.update(discount=a.gamma, gae_lambda=1.0)
    section["ppo_n_minibatches"] = minibatches
    o = a.policy_options
    section["recompute_logprob"] = True
    section["use_decoupled_loss"] = o.decoupled
    if o.decoupled and o.behav_imp_weight_cap is not None:
        section["behav_imp_weight_cap"] = o.behav_imp_weight_cap
    adv = a.advantage_options
    if a.advantage in ("grpo", "rloo") and critic is None:
        section["reward_norm"] = {"mean_level": "group", "mean_leave1out": a.advantage == "rloo",
                                  "std_level": "group" if a.advantage == "grpo" and a.normalize_advantage_std
                                  else None,
                                  "std_unbiased": adv.std == "unbiased", "eps": adv.eps, "group_size": n}
    elif adv.reward_norm_mean or adv.reward_norm_std:
        section["reward_norm"] = {"mean_level": adv.reward_norm_mean, "std_level": adv.reward_norm_std}
    else:
        section["reward_norm"] = None
    whiten = a.batch_normalize_advantage if a.advantage in ("grpo", "rloo") else adv.whiten
    norm = adv.token_norm
    if norm is not None:
        section["adv_norm"] = {"mean_level": norm.mean, "std_level": norm.std, "mean_leave1out": norm.leave_one_out,
                               "std_unbiased": norm.unbiased, "eps": norm.eps, "group_size": n}
    else:
        section["adv_norm"] = {"mean_level": "batch", "std_level": "batch"} if whiten else None
    section["max_new_tokens"] = e.sampling.max_new_tokens
    tree["actor"] = section
    if reference is not None:
        tree["ref"] = _engine_section(e, reference, "ref", samples // dp, trains=False)
        if per_engine:
            _colocated_with_actor(tree["ref"], section["backend"])
    elif release in SECTIONS_ALWAYS_BUILT:
        # These releases build `ref` whatever kl_ctl says, and its names are mandatory.
        tree["ref"] = {"experiment_name": e.name, "trial_name": _trial(e),
                       "path": actor.model.path if actor.model else None, "optimizer": None}
    if critic is not None:
        c = _engine_section(e, critic, "critic", samples // minibatches // dp, trains=True)
        if per_engine:
            _colocated_with_actor(c, section["backend"])
        c.update(is_critic=True, ppo_n_minibatches=minibatches)
        if a.value_clip is not None:
            c["eps_clip"] = a.value_clip
        tree["critic"] = c

    args = engine(e)
    if rollout is not None and backend == "sglang":
        sglang: dict[str, Any] = {"dtype": DTYPES.get(rollout.model.dtype, "bfloat16") if rollout.model else "bfloat16"}
        for ours, theirs in (("mem_fraction_static", "mem_fraction_static"), ("max_model_len", "context_length"),
                             ("max_num_seqs", "max_running_requests"), ("max_num_batched_tokens", "max_prefill_tokens"),
                             ("enforce_eager", "disable_cuda_graph"), ("seed", "random_seed"),
                             ("attention_backend", "attention_backend")):
            if args.get(ours) is not None:
                sglang[theirs] = args[ours]
        if args.get("enable_prefix_caching") is not None:
            sglang["disable_radix_cache"] = not args["enable_prefix_caching"]
        if args.get("enable_chunked_prefill") is False:
            sglang["chunked_prefill_size"] = -1
        if rollout.model is not None and rollout.model.path != (actor.model.path if actor.model else None):
            sglang["model_path"] = rollout.model.path
        tree["sglang"] = sglang
    elif rollout is not None:
        vllm: dict[str, Any] = {"dtype": DTYPES.get(rollout.model.dtype, "bfloat16") if rollout.model else "bfloat16"}
        for key in ("gpu_memory_utilization", "max_model_len", "max_num_seqs", "enforce_eager", "block_size", "seed"):
            if args.get(key) is not None:
                vllm[key] = args[key]
        for key in ("enable_prefix_caching", "enable_chunked_prefill"):
            if args.get(key) is None:
                continue
            if _has(release, VLLMConfig, f"no_{key}"):  # from 0.5 the flag passed is vLLM's --no-enable-...
                vllm[f"no_{key}"] = not args[key]
            else:
                vllm[key] = args[key]
        if rollout.model is not None and rollout.model.path != (actor.model.path if actor.model else None):
            vllm["model"] = rollout.model.path
        tree["vllm"] = vllm
    _datasets(e, tree, s.prompts_per_step, "rl")
    _savers(e, tree, release)
    return Emitted(tree, REASONS)


def _datasets(e: Experiment, tree: dict, batch: int, kind: str) -> None:
    d = e.data
    train = {"batch_size": batch, "shuffle": d.shuffle, "path": d.train_files[0] if d.train_files else "",
             "type": kind}
    longest = d.max_prompt_length if kind == "rl" else getattr(d, "max_length", None)
    if longest is not None:
        train["max_length"] = longest
    tree["train_dataset"] = train
    if d.eval_files:
        tree["valid_dataset"] = {"batch_size": batch, "path": d.eval_files[0], "type": kind}
        eval_longest = d.eval_prompt_limit if kind == "rl" else longest
        if eval_longest is not None:
            tree["valid_dataset"]["max_length"] = eval_longest


def _savers(e: Experiment, tree: dict, release: str) -> None:
    s, c = e.schedule, e.checkpointing
    common = {"experiment_name": e.name, "trial_name": _trial(e), "fileroot": _fileroot(e)}
    tree["saver"] = dict(common, freq_steps=c.interval, freq_epochs=getattr(c, "epoch_interval", None),
                         freq_secs=_seconds(getattr(c, "time_interval_s", None)))
    tree["recover"] = dict(common, mode="disabled" if c.resume == "none" else "auto")
    tree["evaluator"] = dict(common, freq_steps=s.eval_interval, freq_epochs=getattr(s, "eval_epoch_interval", None),
                             freq_secs=_seconds(getattr(s, "eval_time_interval_s", None)))
    if s.eval_before_train and _has(release, EvaluatorConfig, "eval_before_train"):
        tree["evaluator"]["eval_before_train"] = True
    logger = dict(common)
    wandb: dict[str, Any] = {"mode": "online" if "wandb" in e.logging.backends else "disabled"}
    if e.logging.project is not None:
        wandb["project"] = e.logging.project
    logger["wandb"] = wandb
    if "tensorboard" in e.logging.backends:
        logger["tensorboard"] = {"path": f"{_fileroot(e)}/tensorboard/{e.name}/{_trial(e)}"}
    tree["stats_logger"] = logger


def _seconds(value: float | None) -> int | None:
    return int(value) if value is not None and float(value).is_integer() else value


def _supervised(e: Experiment, tree: dict, release: str) -> Emitted:
    per_engine = release not in BEFORE_1_0
    trained = e.role("actor") or e.role("critic")
    samples = e.schedule.samples_per_step
    dp = max(trained.resources.gpus // max(trained.parallelism.tp * trained.parallelism.pp, 1), 1)
    model = _engine_section(e, trained, "model", samples // dp, trains=True)
    if e.kind == "reward_model":
        model["is_critic"] = True
    if per_engine:
        model["backend"] = _trainer_backend(trained)
    else:
        tree["allocation_mode"] = _trainer_dims(trained)
    # From 0.5, SFT and reward modelling train their model as `actor`.
    tree["model" if _has(release, SFTConfig, "model") else "actor"] = model
    _datasets(e, tree, samples, "sft" if e.kind == "sft" else "rw")
    _savers(e, tree, release)
    return Emitted(tree, REASONS)
