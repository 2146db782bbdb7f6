"""Experiment → ChatLearn (main).

ChatLearn counts a step (an episode) in samples: sample_per_episode = prompts × num_inference_per_prompt, and its
optimizer batch in samples too (train_global_batch_size); each model has num_gpu GPUs, and models named together in
runtime_args.colocation share them. Its GRPO divides by the population group std + 1e-5, its policy loss clamps the
log-ratio above at diff_clip_ratio and caps each token's loss at final_clip_ratio; the FSDP trainer adds kl_coef × KL
(low_var_kl) to the loss, the Megatron trainer back-propagates the policy loss alone.
"""

from __future__ import annotations

from typing import Any

from rlcfg.convert import Emitted
from rlcfg.convert.common import engine, megatron_sizes
from rlcfg.ir import Experiment, Role

SECTIONS = {"actor": "policy_trainer", "rollout": "policy", "reference": "ref_policy", "reward": "reward"}
# ChatLearn's own loss clamps, which a source without them has to keep: no log-ratio clamp is its default of 10
# there, and no cap the largest finite value.
NO_CAP = 1.0e9
EPISODES_UNKNOWN = 100

REASONS = {
    "algorithm.advantage": "ChatLearn trains with GRPO only",
    "algorithm.advantage_options.std": "ChatLearn's GRPO divides by the population group std",
    "algorithm.advantage_options.eps": "ChatLearn's GRPO adds 1e-5 to the group std",
    "algorithm.advantage_options": "ChatLearn's GRPO has no such option",
    "algorithm.normalize_advantage_std": "ChatLearn's GRPO always divides by the group std",
    "algorithm.batch_normalize_advantage": "ChatLearn does not whiten advantages over the batch",
    "algorithm.kl": "ChatLearn's FSDP trainer adds kl_coef × low_var_kl to the loss; the Megatron trainer none",
    "algorithm.entropy_coef": "ChatLearn's Megatron trainer back-propagates the policy loss alone",
    "algorithm.loss_aggregation": "ChatLearn averages the loss over the global batch's tokens",
    "algorithm.policy_loss": "ChatLearn's losses are GRPO's clip loss and (Megatron) GSPO",
    "algorithm.policy_options": "ChatLearn's loss has its own log-ratio clamp and per-token cap only",
    "algorithm.reward": "ChatLearn has no reward shaping",
    "algorithm.filters": "ChatLearn keeps every group",
    "algorithm.weighting": "ChatLearn has no per-sample loss weights or masks",
    "algorithm.gamma": "ChatLearn's GRPO has no discount",
    "algorithm.mask_truncated": "ChatLearn keeps truncated responses in the loss",
    "algorithm.balance_ranks_by_length": "ChatLearn deals a step to its ranks by length only with its rollout manager, "
                                         "which needs SGLang rollout",
    "schedule.partial_rollout.rewards_kept_until": "ChatLearn keeps a prompt's rewards until "
                                                   "runtime_args.num_inference_per_prompt, the group size, have gathered",
    "roles.critic": "ChatLearn has no critic (GRPO only)",
    "roles.reward": "ChatLearn's rule reward runs on num_cpu CPUs",
    "roles.actor.resources": "ChatLearn gives each model num_gpu GPUs",
    "roles.reference.resources": "ChatLearn gives each model num_gpu GPUs",
    "roles.rollout.resources": "ChatLearn gives each model num_gpu GPUs",
    "roles.actor.model.trust_remote_code": "rlcfg's ChatLearn dialect does not say trust_remote_code",
    "roles.reference.model.trust_remote_code": "rlcfg's ChatLearn dialect does not say trust_remote_code",
    "roles.rollout.model.trust_remote_code": "rlcfg's ChatLearn dialect does not say trust_remote_code",
    "roles.reference.model.tokenizer": "ChatLearn's ref_policy tokenizer",
    "roles.rollout.model.tokenizer": "ChatLearn's policy loads the model's own tokenizer",
    "roles.actor.model.tokenizer": "ChatLearn's FSDP trainer loads the model's own tokenizer",
    "roles.rollout.model.dtype": "ChatLearn's engines run bfloat16",
    "roles.rollout.engine": "ChatLearn's policy section has no such engine setting",
    "roles.rollout.parallelism": "ChatLearn's engines use tensor parallelism only",
    "roles.actor.optimizer": "ChatLearn's optimizer has no schedule, Adam epsilon or warm-up of its own",
    "roles.actor.parallelism.fsdp_shard": "ChatLearn's FSDP shards over all of a model's GPUs",
    "roles.reference.parallelism.fsdp_shard": "ChatLearn's FSDP shards over all of a model's GPUs",
    "roles.actor.offload.cpu_offload_during_step": "ChatLearn keeps parameters on the GPU while it trains",
    "roles.reference.offload": "ChatLearn's ref_policy offloads its weights only",
    "roles.actor.max_tokens_per_micro_batch": "ChatLearn's max_token_in_packing",
    "roles.reference.micro_batch_size": "ChatLearn's reference does not train",
    "roles.reference.gradient_checkpointing": "ChatLearn's reference does not train",
    "roles.reference.sequence_packing": "ChatLearn's ref_policy packing",
    "data.prompt_key": "ChatLearn reads each record's `prompt`",
    "data.answer_key": "ChatLearn reads the answer at reward_model.ground_truth",
    "data.apply_chat_template": "ChatLearn always applies the chat template",
    "data.seed": "ChatLearn shuffles with the trainer's seed",
    "data.max_prompt_length": "ChatLearn keeps a prompt shorter than max_prompt_tokens_length",
    "schedule.epochs": "ChatLearn counts episodes (num_episode), not epochs",
    "schedule.total_steps": "ChatLearn needs num_episode; the source counts epochs over a dataset whose size rlcfg "
                            "does not know, so set runtime_args.num_episode yourself",
    "checkpointing": "ChatLearn saves under output_dir every save_episode_interval episodes",
    "logging": "ChatLearn logs under log_dir, to tensorboard and wandb",
    "cluster": "ChatLearn's config does not name the cluster's size",
    "eval_sampling": "ChatLearn's eval_* sampling settings",
    "sampling.min_p": "ChatLearn's policy has no min_p",
    "sampling.stop": "ChatLearn's policy has no stop strings",
    "sampling.stop_token_ids": "ChatLearn's policy has no stop token ids",
    "sampling.min_new_tokens": "ChatLearn's policy has no minimum length",
    "seed": "ChatLearn seeds with the trainer's seed",
}


def _offload(r: Role, trains: bool) -> dict[str, Any]:
    out = {"offload_weights": r.offload.params}
    if trains:
        out.update(offload_optimizer_states=r.offload.optimizer, free_grad_buffers=r.offload.grads)
    return out


def _trainer_parallel(section: dict[str, Any], r: Role, megatron: bool) -> None:
    p = r.parallelism
    if megatron:
        section.update(megatron_sizes(p))
        section["bf16"] = r.model is None or r.model.dtype != "float32"
    else:
        section["ulysses_sequence_parallel_size"] = p.sp
    section["packing"] = r.sequence_packing
    if r.sequence_packing and r.max_tokens_per_micro_batch is not None:
        section["max_token_in_packing"] = r.max_tokens_per_micro_batch


def emit(experiment: Experiment, release: str | None = None) -> Emitted:
    """`release`: the one asked for; the layout written is the same for each (convert drops a key the release lacks)."""
    e = experiment
    actor, rollout, reference, reward = (e.role(n) for n in ("actor", "rollout", "reference", "reward"))
    a, s, d = e.algorithm, e.schedule, e.data
    megatron = actor.backend == "megatron"
    n = a.group_size

    rt: dict[str, Any] = {"train_backend": "megatron" if megatron else "fsdp",
                          "rollout_backend": rollout.backend if rollout and rollout.backend in ("vllm", "sglang")
                          else "vllm",
                          "exp_name": e.name}
    colocated = [[SECTIONS[name] for name in group if name in SECTIONS and name != "reward"]
                 for group in e.colocation]
    colocated = [g for g in colocated if len(g) > 1]
    if colocated:
        rt["colocation"] = colocated[0] if len(colocated) == 1 else colocated
    if e.checkpointing.directory is not None:
        rt["output_dir"] = e.checkpointing.directory
    rt["data_path"] = ",".join(d.train_files)
    if d.eval_files:
        rt["eval_data_path"] = ",".join(d.eval_files)
    rt["data_shuffle"] = d.shuffle
    manager = a.balance_ranks_by_length and rt["rollout_backend"] == "sglang"
    if manager:
        # The rollout manager runs one CPU actor, on SGLang's asynchronous engine, and needs the data unreranked.
        rt.update(use_rollout_manager=True, data_rerank=False)
    # ChatLearn must be told its episodes; a source that counts epochs over a dataset of a size rlcfg does not
    # know leaves a placeholder that the loss list names.
    rt["num_episode"] = s.total_steps if s.total_steps is not None else EPISODES_UNKNOWN
    rt["sample_per_episode"] = s.samples_per_step
    rt["train_global_batch_size"] = s.samples_per_optimizer_step
    rt["train_micro_batch_size"] = actor.micro_batch_size or 1
    rt["num_inference_per_prompt"] = n
    rt["num_training_epoch"] = a.ppo_epochs
    # ChatLearn computes GRPO advantages only for the episodes in its replay window; one is this step's.
    rt["max_replay_episode"] = 1
    rt["save_episode_interval"] = e.checkpointing.interval or rt["num_episode"]
    rt["enable_resume_training"] = e.checkpointing.resume != "none"
    rt["eval_episode_interval"] = s.eval_interval or 0
    rt["enable_eval_before_training"] = s.eval_before_train
    logs: dict[str, Any] = {"log_dir": e.logging.directory or rt.get("output_dir", "./output"),
                            "enable_tensorboard": "tensorboard" in e.logging.backends,
                            "enable_wandb": "wandb" in e.logging.backends}
    if e.logging.project is not None:
        logs["wandb_project"] = e.logging.project
    if e.logging.run_name is not None:
        logs["wandb_name"] = e.logging.run_name
    rt["log_args_dict"] = logs

    trainer: dict[str, Any] = {"load": actor.model.path if actor.model else None, "num_gpu": actor.resources.gpus,
                               "trainable": True, "free_gpu_memory": _offload(actor, True)}
    if megatron and actor.model is not None and actor.model.tokenizer:
        trainer["tokenizer_model"] = actor.model.tokenizer
    _trainer_parallel(trainer, actor, megatron)
    if not megatron:
        trainer["gradient_checkpointing"] = actor.gradient_checkpointing
    elif actor.gradient_checkpointing:
        trainer["recompute_granularity"] = "full"
    o = actor.optimizer
    optimizer: dict[str, Any] = {"lr": o.lr, "weight_decay": o.weight_decay, "adam_beta1": o.betas[0],
                                 "adam_beta2": o.betas[1], "clip_grad": o.grad_clip or 0.0}
    if megatron:
        optimizer["min_lr"] = o.lr if o.scheduler == "constant" else o.min_lr
    trainer["optimizer"] = optimizer
    if actor.forward_micro_batch_size is not None:
        trainer["generation_batch_size"] = actor.forward_micro_batch_size
    trainer["train_micro_batch_size"] = rt["train_micro_batch_size"]  # ChatLearn reads both; they must agree
    trainer["seed"] = e.seed
    trainer["pos_clip_ratio"] = a.clip_high
    trainer["neg_clip_ratio"] = a.clip_low
    po = a.policy_options
    trainer["diff_clip_ratio"] = po.log_ratio_max if po.log_ratio_max is not None else 20.0
    trainer["final_clip_ratio"] = po.loss_cap if po.loss_cap is not None else NO_CAP
    if not megatron:
        trainer["kl_coef"] = a.kl.coef if a.kl.placement == "loss" else 0.0
        trainer["entropy_coef"] = a.entropy_coef
    else:
        trainer["use_group_sequence_policy"] = a.policy_loss == "gspo"
    models: dict[str, Any] = {"policy_trainer": trainer}

    ref_role = reference or actor
    ref: dict[str, Any] = {"load": ref_role.model.path if ref_role.model else None,
                           "num_gpu": ref_role.resources.gpus, "free_gpu_memory": _offload(ref_role, False)}
    if megatron:
        _trainer_parallel(ref, ref_role, True)
        if ref_role.model is not None and ref_role.model.tokenizer:
            ref["tokenizer_model"] = ref_role.model.tokenizer
    else:
        ref["ulysses_sequence_parallel_size"] = ref_role.parallelism.sp
        ref["packing"] = ref_role.sequence_packing
        if ref_role.sequence_packing and ref_role.max_tokens_per_micro_batch is not None:
            ref["max_token_in_packing"] = ref_role.max_tokens_per_micro_batch
    if ref_role.forward_micro_batch_size is not None:
        ref["generation_batch_size"] = ref_role.forward_micro_batch_size
    models["ref_policy"] = ref

    if rollout is not None:
        args = engine(e)
        policy: dict[str, Any] = {"load": rollout.model.path if rollout.model else None,
                                  "num_gpu": rollout.resources.gpus, "free_gpu_memory": _offload(rollout, False),
                                  "tensor_model_parallel_size": rollout.parallelism.tp,
                                  "num_inference_per_prompt": n,
                                  "enable_thinking": bool(dict(d.chat_template_kwargs).get("enable_thinking", False))}
        if args.get("max_num_seqs") is not None:
            policy["generation_batch_size"] = args["max_num_seqs"]
        prompt = (d.max_prompt_length + 1) if d.max_prompt_length is not None else 1024
        policy["max_prompt_tokens_length"] = prompt
        policy["max_response_tokens_length"] = e.sampling.max_new_tokens
        for key in ("max_num_batched_tokens", "enforce_eager", "seed"):
            if args.get(key) is not None:
                policy[key] = args[key]
        memory = args.get("gpu_memory_utilization", args.get("mem_fraction_static"))
        if memory is not None:
            policy["gpu_memory_utilization"] = memory
        sp = e.sampling
        policy.update(temperature=sp.temperature, top_p=sp.top_p, top_k=sp.top_k,
                      presence_penalty=sp.presence_penalty, frequency_penalty=sp.frequency_penalty,
                      repetition_penalty=sp.repetition_penalty)
        ev = e.eval_sampling
        if ev is not None:
            policy.update(eval_temperature=ev.temperature, eval_top_p=ev.top_p, eval_top_k=ev.top_k,
                          eval_presence_penalty=ev.presence_penalty, eval_frequency_penalty=ev.frequency_penalty,
                          eval_repetition_penalty=ev.repetition_penalty)
        if manager:
            policy["is_sync_mode"] = False
        models["policy"] = policy
    models["reward"] = {"num_cpu": max(reward.resources.cpus, 1) if reward else 1,
                        "cpu_per_process": 1}
    if reward is not None and reward.resources.gpus:
        models["reward"]["num_gpu"] = reward.resources.gpus
    if manager:
        models["rollout_manager"] = {"num_cpu": 1, "cpu_per_process": 1}
    partial = s.partial_rollout
    if partial is not None and not manager:
        rt["use_partial_rollout"] = True
        models["partial_rollout_manager"] = {"num_cpu": 1, "cpu_per_process": 1,
                                             "max_rollout_round": len(partial.round_shares),
                                             "rollout_ratio": list(partial.round_shares),
                                             "mini_response_per_prompt": partial.min_finished}
    notes = []
    if s.total_steps is None:
        notes.append(f"runtime_args.num_episode: {EPISODES_UNKNOWN} (the source runs {s.epochs or 'its'} epoch(s) "
                     "over a dataset whose size rlcfg does not know)")
    return Emitted({"runtime_args": rt, "models": models}, REASONS, notes)
