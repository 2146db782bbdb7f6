"""Experiment → ROLL (RLVR pipeline).

ROLL counts a step in prompts (rollout_batch_size) times num_return_sequences_in_group, and the optimizer batch in
samples: per_device_train_batch_size × gradient_accumulation_steps × data-parallel ranks. Every worker names its
GPUs in device_mapping; workers with the same GPUs are colocated, and ROLL offloads every worker between phases.
Its GRPO normalises by the group's unbiased std + 1e-6; its KL loss is k3, its reward KL is subtracted per token
after the score's normalisation; its responses are sequence_length − prompt_length tokens long.
"""

from __future__ import annotations

from typing import Any

from rlcfg.convert import Emitted
from rlcfg.convert.common import engine, gpu_ids, put, step_count
from rlcfg.ir import Experiment, Role
from rlcfg.dialects.roll.derived import PG_WORKER

DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
KL_PENALTIES = {"k1": "kl", "abs": "abs", "k2": "mse"}
ESTIMATORS = {"grpo": "grpo", "gae": "gae", "reinforce++": "reinforce"}
TRAIN_STRATEGIES = {"megatron": "megatron_train", "fsdp2": "fsdp2_train", "fsdp": "fsdp2_train",
                    "deepspeed": "deepspeed_train"}
INFER_STRATEGIES = {"megatron": "megatron_infer", "fsdp2": "fsdp2_infer", "fsdp": "fsdp2_infer",
                    "deepspeed": "deepspeed_infer"}
MATH_RULE = "roll.pipeline.rlvr.rewards.math_rule_reward_worker.MathRuleRewardWorker"

REASONS = {
    "algorithm.advantage_options.std": "ROLL's GRPO divides by the unbiased group std",
    "algorithm.advantage_options.eps": "ROLL's GRPO adds 1e-6 to the group std",
    "algorithm.kl.estimator": "ROLL's KL loss is k3; its reward KL offers kl (k1), abs and mse (k2)",
    "algorithm.kl.reward_mode": "ROLL subtracts the reward KL per token after normalising the score",
    "algorithm.reward": "ROLL's reward_clip clamps the normalised reward; it has no scale or bias",
    "algorithm.policy_options.log_ratio_max": "ROLL's loss has no log-ratio clamp of its own",
    "algorithm.policy_options.log_ratio_min": "ROLL's loss has no log-ratio clamp of its own",
    "algorithm.policy_options.loss_cap": "ROLL's loss has no per-token cap",
    "algorithm.policy_options.decoupled": "ROLL has no decoupled (proximal-policy) loss",
    "algorithm.policy_options.behav_imp_weight_cap": "ROLL has no decoupled (proximal-policy) loss",
    "algorithm.policy_options.early_stop_ratio": "ROLL has no early stop on the importance ratio",
    "algorithm.policy_options.gspo_form": "ROLL's sequence importance sampling is GSPO's token form",
    "algorithm.clip_ratio_c": "ROLL's dual clip bound is 1 + 2 × pg_clip",
    "algorithm.filters": "rlcfg runs ROLL's group filters only as the reward worker's query filter, not yet offered",
    "algorithm.batch_normalize_advantage": "ROLL whitens advantages only with whiten_advantages",
    "algorithm.advantage_options.whiten": "ROLL whitens advantages only with whiten_advantages",
    "algorithm.normalize_advantage_std": "ROLL's GRPO always divides by the group std",
    "algorithm.advantage": "ROLL's estimators are gae, grpo and reinforce",
    "algorithm.loss_aggregation": "ROLL's critic averages per sequence, and rlcfg runs its GAE only so",
    "algorithm.mask_truncated": "ROLL's max_len_mask masks only responses exactly at the limit",
    "roles.actor.offload": "ROLL offloads every worker between phases",
    "roles.reference.offload": "ROLL offloads every worker between phases",
    "roles.critic.offload": "ROLL offloads every worker between phases",
    "roles.rollout.offload": "ROLL offloads every worker between phases",
    "roles.actor.model.tokenizer": "ROLL loads the model's own tokenizer",
    "roles.reference.model.tokenizer": "ROLL loads the model's own tokenizer",
    "roles.rollout.model.tokenizer": "ROLL loads the model's own tokenizer",
    "roles.critic.model.tokenizer": "ROLL loads the model's own tokenizer",
    "roles.actor.model.trust_remote_code": "rlcfg's ROLL dialect does not say trust_remote_code",
    "roles.reference.model.trust_remote_code": "rlcfg's ROLL dialect does not say trust_remote_code",
    "roles.rollout.model.trust_remote_code": "rlcfg's ROLL dialect does not say trust_remote_code",
    "roles.critic.model.trust_remote_code": "rlcfg's ROLL dialect does not say trust_remote_code",
    "roles.actor.resources": "ROLL places workers by GPU ids",
    "roles.reference.resources": "ROLL places workers by GPU ids",
    "roles.rollout.resources": "ROLL places workers by GPU ids",
    "roles.critic.resources": "ROLL places workers by GPU ids",
    "roles.reward": "ROLL's math rule worker runs on CPU with world_size workers",
    "roles.rollout.engine": "ROLL's strategy_config has no such engine setting",
    "roles.rollout.forward_micro_batch_size": "ROLL's actor_infer.infer_batch_size",
    "roles.actor.optimizer.eps": "ROLL's training_args have no Adam epsilon",
    "roles.critic.optimizer.eps": "ROLL's training_args have no Adam epsilon",
    "roles.actor.optimizer.min_lr": "ROLL's schedules decay to 0",
    "roles.actor.optimizer.name": "ROLL trains with AdamW",
    "schedule.epochs": "ROLL counts steps (max_steps), not epochs",
    "schedule.ahead_across_epochs": "ROLL's rollouts run ahead across epochs",
    "schedule.total_steps": "ROLL counts steps (max_steps)",
    "schedule.eval_before_train": "ROLL evaluates before training whenever it has validation data",
    "schedule.eval_interval": "ROLL evaluates every eval_steps when it has validation data",
    "schedule.samples_per_optimizer_step": "ROLL's global batch is per_device_train_batch_size × "
                                           "gradient_accumulation_steps × data-parallel ranks",
    "data.answer_key": "ROLL's math rule reads `ground_truth`",
    "data.shuffle": "ROLL always shuffles",
    "data.eval_files": "ROLL evaluates only with validation data",
    "checkpointing.save_hf": "rlcfg's ROLL dialect saves no HF weights",
    "checkpointing.interval": "ROLL's save_steps",
    "logging": "ROLL logs under logging_dir/exp_name, with one tracker",
    "cluster": "ROLL's num_gpus_per_node; its node count follows from the GPU ids",
    "eval_sampling": "ROLL's validation generating_args",
    "sampling.min_p": "ROLL's generating_args have no min_p",
    "sampling.presence_penalty": "ROLL's generating_args have no presence penalty",
    "sampling.frequency_penalty": "ROLL's generating_args have no frequency penalty",
    "sampling.min_new_tokens": "ROLL's generating_args have no minimum length",
    "sampling.stop_token_ids": "ROLL's generating_args have no stop token ids",
    "sampling.max_new_tokens": "ROLL's response length is sequence_length − prompt_length",
}


def _mapping(ids: tuple[int, ...]) -> str:
    if ids and list(ids) == list(range(ids[0], ids[0] + len(ids))):
        return f"list(range({ids[0]},{ids[-1] + 1}))"
    return "[" + ", ".join(str(i) for i in ids) + "]"


def _strategy(r: Role, names: dict[str, str], trains: bool) -> dict[str, Any]:
    p = r.parallelism
    name = names.get(r.backend, "fsdp2_train" if trains else "fsdp2_infer")
    config: dict[str, Any] = {}
    if name.startswith("megatron"):
        config = {"tensor_model_parallel_size": p.tp, "pipeline_model_parallel_size": p.pp,
                  "context_parallel_size": p.cp}
        if p.ep != 1:
            config["expert_model_parallel_size"] = p.ep
        if p.etp is not None:
            config["expert_tensor_parallel_size"] = p.etp
        if p.vpp is not None:
            config["virtual_pipeline_model_parallel_size"] = p.vpp
        if p.sequence_parallel:
            config["sequence_parallel"] = True
        if trains and r.gradient_checkpointing:
            config["recompute_granularity"] = "full"
    elif name.startswith("fsdp2"):
        config = {"fsdp_size": p.fsdp_shard or 1}
        if r.offload.cpu_offload_during_step:
            config["offload_policy"] = True
    return {"strategy_name": name, "strategy_config": config}


def _pretrain(e: Experiment) -> str | None:
    actor = e.role("actor")
    return actor.model.path if actor is not None and actor.model is not None else None


def _worker(e: Experiment, r: Role, trains: bool) -> dict[str, Any]:
    worker: dict[str, Any] = {"model_args": {"dtype": DTYPES.get(r.model.dtype if r.model else "", "bf16")}}
    if r.backend != "megatron":
        worker["model_args"]["disable_gradient_checkpointing"] = not (trains and r.gradient_checkpointing)
    if r.parallelism.sp > 1:
        worker["model_args"]["ulysses_size"] = r.parallelism.sp
    # The critic falls back to reward_pretrain, not pretrain.
    if r.model is not None and (r.name == "critic" or r.model.path != _pretrain(e)):
        worker["model_args"]["model_name_or_path"] = r.model.path
    names = TRAIN_STRATEGIES if trains else INFER_STRATEGIES
    worker["strategy_args"] = _strategy(r, names, trains)
    worker["device_mapping"] = _mapping(gpu_ids(e, r))
    if r.forward_micro_batch_size is not None:
        worker["infer_batch_size"] = r.forward_micro_batch_size
    return worker


def _training_args(e: Experiment, r: Role) -> dict[str, Any]:
    o = r.optimizer
    dp = r.data_parallel()
    per_step = e.schedule.samples_per_optimizer_step
    micro = r.micro_batch_size or 1
    if per_step % (micro * dp):
        micro = 1
    args = {"learning_rate": o.lr, "weight_decay": o.weight_decay, "adam_beta1": o.betas[0],
            "adam_beta2": o.betas[1], "lr_scheduler_type": o.scheduler, "warmup_steps": step_count(o.warmup_steps),
            "per_device_train_batch_size": micro,
            "gradient_accumulation_steps": max(per_step // (micro * dp), 1)}
    return args


def _packing(worker: dict[str, Any], r: Role) -> None:
    if r.sequence_packing and r.max_tokens_per_micro_batch is not None:
        worker["use_dynamic_batching_in_train"] = True
        worker["max_tokens_per_microbatch_in_train"] = r.max_tokens_per_micro_batch
    elif r.sequence_packing:
        worker["use_sequence_packing"] = True


def _generating(s: Any, n: int) -> dict[str, Any]:
    out: dict[str, Any] = {"max_new_tokens": s.max_new_tokens}
    if s.temperature == 0:
        out["do_sample"] = False
    else:
        out.update(temperature=s.temperature, top_p=s.top_p)
        out["top_k"] = s.top_k if s.top_k > 0 else 0
    out["num_return_sequences"] = n
    if s.repetition_penalty != 1.0:
        out["repetition_penalty"] = s.repetition_penalty
    if s.stop:
        out["stop_strings"] = list(s.stop)
    return out


def emit(experiment: Experiment, release: str | None = None) -> Emitted:
    """`release`: the one asked for; the layout written is the same for each (convert drops a key the release lacks)."""
    e = experiment
    tree: dict[str, Any] = {}
    actor, rollout = e.role("actor"), e.role("rollout")
    reference, critic, reward = e.role("reference"), e.role("critic"), e.role("reward")
    a, s, d = e.algorithm, e.schedule, e.data

    tree["exp_name"] = e.name
    tree["pretrain"] = _pretrain(e)
    tree["seed"] = e.seed
    c = e.checkpointing
    if c.directory is not None:
        tree["output_dir"] = c.directory
    if e.logging.directory is not None and e.logging.directory.endswith("/" + e.name):
        tree["logging_dir"] = e.logging.directory[: -len(e.name) - 1]
    backends = e.logging.backends
    tree["track_with"] = "wandb" if "wandb" in backends else "tensorboard" if "tensorboard" in backends else "stdout"
    tracker = {}
    if e.logging.project is not None:
        tracker["project"] = e.logging.project
    if e.logging.run_name not in (None, e.name):
        tracker["name"] = e.logging.run_name
    if tracker:
        tree["tracker_kwargs"] = tracker
    if s.total_steps is not None:
        tree["max_steps"] = s.total_steps
    if c.interval is not None:
        tree["save_steps"] = c.interval
    if c.keep_last is not None:
        tree["max_ckpt_to_keep"] = c.keep_last
    if s.eval_interval is not None:
        tree["eval_steps"] = s.eval_interval
    tree["rollout_batch_size"] = s.prompts_per_step
    if s.max_staleness:  # its prompts ahead are bounded by the staleness alone (roll lower._asynchrony)
        tree["async_generation_ratio"] = s.max_staleness
    tree["resume_from_checkpoint"] = {"latest": True, "none": False}.get(c.resume, c.resume)
    prompt_length = d.max_prompt_length or 1024
    tree["prompt_length"] = prompt_length
    tree["response_length"] = e.sampling.max_new_tokens
    if e.cluster.gpus_per_node is not None:
        tree["num_gpus_per_node"] = e.cluster.gpus_per_node

    # ---- algorithm
    tree["ppo_epochs"] = a.ppo_epochs
    if actor.optimizer is not None:
        tree["max_grad_norm"] = actor.optimizer.grad_clip if actor.optimizer.grad_clip is not None else 0.0
    if a.advantage == "gae":
        tree["lambd"] = a.lam
    tree["gamma"] = a.gamma
    if a.clip_low == a.clip_high:
        tree["pg_clip"] = a.clip_low
    else:
        tree.update(use_pg_clip_range=True, pg_clip_low=a.clip_low, pg_clip_high=a.clip_high)
    if a.policy_loss == "dual_clip":
        tree["pg_clip"] = (a.clip_ratio_c - 1.0) / 2.0
    if a.value_clip is not None:
        tree["value_clip"] = a.value_clip
    kl = a.kl
    tree["use_kl_loss"] = kl.placement == "loss"
    tree["kl_loss_coef"] = kl.coef if kl.placement == "loss" else 0
    tree["init_kl_coef"] = kl.coef if kl.placement == "reward" else 0.0
    if kl.placement == "reward":
        tree["add_token_level_kl"] = True
        tree["kl_penalty"] = KL_PENALTIES.get(kl.estimator, "kl")
        if kl.controller.kind == "adaptive":
            tree["target_kl"] = kl.controller.target
            tree["kl_horizon"] = kl.controller.horizon
    adv = a.advantage_options
    tree["whiten_rewards"] = adv.whiten_rewards
    whiten = a.batch_normalize_advantage if a.advantage == "grpo" else adv.whiten
    tree["whiten_advantages"] = whiten
    tree["adv_estimator"] = ESTIMATORS.get(a.advantage, "grpo")
    if a.advantage == "grpo":
        tree["norm_mean_type"] = "group"
        tree["norm_std_type"] = "group"
    else:
        tree["norm_mean_type"] = adv.reward_norm_mean
        tree["norm_std_type"] = adv.reward_norm_std
    if adv.clip is not None:
        tree["advantage_clip"] = adv.clip
    # rlcfg runs ROLL's reward_clip with a reward KL only after a normalisation (ROLL clamps before and after).
    if a.reward.clip is not None and (a.advantage == "grpo" or kl.placement != "reward"
                                      or adv.reward_norm_mean or adv.reward_norm_std):
        tree["reward_clip"] = a.reward.clip
    tree["entropy_loss_coef"] = a.entropy_coef
    # rlcfg runs ROLL's GAE only with the critic's own aggregation (seq-mean-token-mean).
    tree["loss_agg_mode"] = "seq-mean-token-mean" if a.advantage == "gae" else a.loss_aggregation
    tree["dual_clip_loss"] = a.policy_loss == "dual_clip"
    tree["num_return_sequences_in_group"] = a.group_size
    w = a.weighting
    tree["difficulty_loss_weight"] = w.difficulty_loss_weight
    tree["length_loss_weight"] = w.length_loss_weight
    tree["rl_loss_coef"] = a.policy_options.loss_coef
    if a.policy_loss == "gspo":
        tree["importance_sampling"] = "seq"
    tree["max_len_mask"] = w.max_len_mask
    if w.difficulty_mask is not None:
        tree.update(difficulty_mask=True, difficulty_low_threshold=w.difficulty_mask[0],
                    difficulty_high_threshold=w.difficulty_mask[1])
    if w.error_max_len_clip is not None:
        tree.update(error_max_len_clip=True, error_max_len_threshold=w.error_max_len_clip)
    o = a.policy_options
    if o.tis_cap is not None:
        put(tree, "train_infer_correction.is_weight.enabled", True)
        put(tree, "train_infer_correction.is_weight.weight_type", o.tis_level)
        put(tree, "train_infer_correction.is_weight.upper_bound", o.tis_cap)

    # ---- workers
    train = _worker(e, actor, trains=True)
    train["training_args"] = _training_args(e, actor)
    data_args: dict[str, Any] = {"file_name": list(d.train_files)}
    if d.apply_chat_template:
        data_args["messages"] = d.prompt_key
    else:
        data_args["prompt"] = d.prompt_key
    train["data_args"] = data_args
    _packing(train, actor)
    if a.policy_loss == "topr":
        o = a.policy_options
        train.update(worker_cls=PG_WORKER, pg_variant="topr", topr_positive_weight=o.topr_positive_weight,
                     topr_negative_weight=o.topr_negative_weight)
    tree["actor_train"] = train
    if rollout is not None:
        infer = _worker(e, rollout, trains=False)
        name = {"vllm": "vllm", "sglang": "sglang", "hf": "hf_infer"}.get(rollout.backend, "vllm")
        args = engine(e)
        config: dict[str, Any] = {}
        if name == "vllm":
            config["tensor_parallel_size"] = rollout.parallelism.tp
            if rollout.parallelism.pp != 1:
                config["pipeline_parallel_size"] = rollout.parallelism.pp
            for key in ("gpu_memory_utilization", "max_model_len", "max_num_batched_tokens", "max_num_seqs",
                        "enforce_eager", "enable_prefix_caching", "enable_chunked_prefill", "block_size",
                        "load_format"):
                if args.get(key) is not None:
                    config[key] = args[key]
        elif name == "sglang":
            config["tensor_parallel_size"] = rollout.parallelism.tp
            for ours, theirs in (("mem_fraction_static", "mem_fraction_static"), ("max_model_len", "context_length"),
                                 ("max_num_seqs", "max_running_requests"), ("attention_backend", "attention_backend"),
                                 ("enforce_eager", "disable_cuda_graph"), ("load_format", "load_format")):
                if args.get(ours) is not None:
                    config[theirs] = args[ours]
            infer["num_gpus_per_worker"] = rollout.parallelism.tp
        infer["strategy_args"] = {"strategy_name": name, "strategy_config": config}
        infer["generating_args"] = _generating(e.sampling, a.group_size)
        if args.get("seed") is not None:
            infer["generating_args"]["seed"] = args["seed"]
        tree["actor_infer"] = infer
    if reference is not None:
        tree["reference"] = _worker(e, reference, trains=False)
        if kl.placement == "none":
            tree["enable_reference"] = True  # nothing reads its log-probs, yet the source starts it
    else:
        tree["enable_reference"] = False
    if critic is not None:
        worker = _worker(e, critic, trains=True)
        worker["training_args"] = _training_args(e, critic)
        _packing(worker, critic)
        tree["critic"] = worker
    if d.eval_files:
        validation: dict[str, Any] = {"data_args": {"file_name": list(d.eval_files)}}
        # ROLL writes the validation length into generating_args at load, so the section must be there.
        sampled = e.eval_sampling if e.eval_sampling is not None else e.sampling
        validation["generating_args"] = _generating(sampled, sampled.n if e.eval_sampling is not None else 1)
        tree["validation"] = validation
    if reward is not None:
        tree["rewards"] = {"math_rule": {"worker_cls": MATH_RULE, "world_size": max(reward.resources.cpus, 1)}}
    return Emitted(tree, REASONS)
