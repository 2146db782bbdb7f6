"""Experiment → RLinf (math reasoning, the 2025-10 layout: task_type reasoning, rollout.model.*, both engine
sections).

RLinf counts a step in prompts (data.rollout_batch_size) times algorithm.group_size, split into n_minibatches
optimizer steps of training_batch_size_per_gpu samples per micro-batch; `cluster.component_placement` names each
component's GPU ranks, and components on the same ranks are collocated. Its only estimator is GRPO (unbiased std +
1e-6), its KL is kl_beta × KL in the loss, its reward is the verifier's 0/1 score mapped to ±reward_scale; it averages
a token-mean loss per micro-batch unless the Megatron actor rescales by the step's tokens (use_valid_token_scale).
"""

from __future__ import annotations

import math
from typing import Any

from rlcfg.convert import ConversionError, Emitted
from rlcfg.convert.common import engine, gpu_ids, megatron_sizes, step_count
from rlcfg.dialects.rlinf.derived import FLOORED_IMPORTANCE_WEIGHT
from rlcfg.dialects.rlinf.models import OLD
from rlcfg.ir import Experiment
from rlcfg.schema import entry

# The tagged releases' layout; the 2025 snapshots name the rollout model by rollout.model_arch and model_dir.
RELEASES = tuple(release for release in entry("rlinf").releases if release not in OLD)
UNWRITTEN = dict.fromkeys(OLD, "it names the rollout model by `rollout.model_arch` and `rollout.model_dir`, a layout "
                               "convert does not write")

PRECISIONS = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
KL_TYPES = {"k1": "kl", "k2": "mse", "abs": "abs", "k3": "k3", "low_var_kl": "low_var_kl"}
TOP_K_OFF = 1_000_000

_IMPORTANCE_FORMS = ("RLinf's importance_sampling_fix floors the weight (taking the ratio against the rollout's "
                     "log-probs) up to v0.2, and caps it from v0.3")
REASONS = {
    "algorithm.advantage": "RLinf's reasoning runner computes GRPO only",
    "algorithm.advantage_options": "RLinf's GRPO divides by the unbiased group std + 1e-6",
    "algorithm.normalize_advantage_std": "RLinf's GRPO always divides by the group std",
    "algorithm.kl": "RLinf's kl_beta puts the KL in the loss (its FSDP actor: mse or abs only)",
    "algorithm.reward": "RLinf maps the verifier's 0/1 score to ±reward_scale (scale 2·s, bias −s)",
    "algorithm.loss_aggregation": "RLinf averages a token-mean loss per micro-batch unless the collocated Megatron "
                                  "actor rescales by the step's tokens",
    "algorithm.loss_normalization": "RLinf reduces each micro-batch on its own unless the collocated Megatron actor "
                                    "rescales by the step's tokens (token-mean)",
    "algorithm.loss_length_norm": "RLinf divides by a length only in its pipelined Megatron actor's "
                                  "use_valid_token_scale: every term by the response limit ÷ data-parallel ranks",
    "algorithm.policy_loss": "RLinf's loss is PPO's clip loss, with dual clip",
    "algorithm.policy_options": "RLinf's loss has log-ratio clamps, importance-sampling fix and early stop only",
    "algorithm.policy_options.tis_floor": _IMPORTANCE_FORMS,
    "algorithm.policy_options.tis_cap": _IMPORTANCE_FORMS,
    "algorithm.ppo_epochs": "RLinf walks a step's samples once",
    "algorithm.filters": "RLinf's reasoning runner keeps every group",
    "algorithm.weighting": "RLinf has no per-sample loss weights or masks",
    "algorithm.gamma": "RLinf's GRPO has no discount",
    "algorithm.value_clip": "RLinf's reasoning runner has no critic",
    "algorithm.mask_truncated": "RLinf keeps truncated responses in the loss",
    "roles.critic": "rlcfg's RLinf reasoning dialect trains no critic",
    "roles.reference": "RLinf keeps the reference weights on the log-prob worker (actor or inference group)",
    "roles.reward": "RLinf's reward workers run beside the actor",
    "roles.rollout.offload": "RLinf offloads the engines only when they share the actor's GPUs",
    "roles.actor.offload.cpu_offload_during_step": "RLinf's Megatron actor keeps parameters on the GPU",
    "roles.rollout.engine": "RLinf's rollout section has no such engine setting",
    "roles.rollout.model": "RLinf's rollout loads the actor's model",
    "roles.actor.model.tokenizer": "RLinf's actor.tokenizer.tokenizer_model",
    "roles.actor.model.trust_remote_code": "RLinf's actor.tokenizer.trust_remote_code",
    "roles.actor.optimizer": "RLinf's optimizer (its FSDP actor has no schedule)",
    "roles.actor.forward_micro_batch_size": "RLinf's algorithm.logprob_forward_micro_batch_size",
    "roles.actor.micro_batch_size": "RLinf's algorithm.training_batch_size_per_gpu",
    "roles.actor.max_tokens_per_micro_batch": "RLinf's runner.max_tokens_per_mbs with dynamic batch sizes",
    "roles.actor.sequence_packing": "RLinf packs only with dynamic batch sizes",
    "roles.actor.parallelism": "RLinf's actor parallel sizes",
    "roles.actor.resources": "RLinf places components by GPU ranks",
    "roles.rollout.resources": "RLinf places components by GPU ranks",
    "colocation": "RLinf collocates components by naming the same GPU ranks",
    "data.eval_files": "RLinf validates in a separate job",
    "eval_sampling": "RLinf validates in a separate job",
    "schedule.eval_interval": "RLinf validates in a separate job",
    "schedule.eval_before_train": "RLinf validates in a separate job",
    "schedule.epochs": "RLinf's runner.max_epochs",
    "sampling": "RLinf's sampling_params (greedy drops top-p, top-k and the repetition penalty)",
    "sampling.stop": "RLinf's sampling_params have no stop strings",
    "sampling.min_p": "RLinf's sampling_params have no min_p",
    "sampling.presence_penalty": "RLinf's sampling_params have no presence penalty",
    "sampling.frequency_penalty": "RLinf's sampling_params have no frequency penalty",
    "checkpointing": "RLinf saves under output_dir/experiment_name/checkpoints every save_interval steps",
    "logging": "RLinf's runner.logger",
    "seed": "RLinf seeds with actor.seed",
}


def _ranks(ids: tuple[int, ...]) -> str:
    if not ids:
        return "all"
    if list(ids) == list(range(ids[0], ids[-1] + 1)):
        return f"{ids[0]}-{ids[-1]}" if len(ids) > 1 else str(ids[0])
    return ",".join(str(i) for i in ids)


def _model_type(path: str) -> str:
    lowered = path.lower()
    return "qwen3" if "qwen3" in lowered else "qwen2.5"


def emit(experiment: Experiment, release: str | None = None) -> Emitted:
    """`release`: the one asked for; the layout written is the same for each (convert drops a key the release lacks)."""
    e = experiment
    actor, rollout = e.role("actor"), e.role("rollout")
    a, s, d = e.algorithm, e.schedule, e.data
    megatron = actor.backend == "megatron"
    tree: dict[str, Any] = {}
    if a.group_size < 2:
        raise ConversionError("RLinf cannot express this experiment: its reasoning runner trains with GRPO, which "
                              "compares several responses to each prompt, and the source samples "
                              f"{a.group_size} per prompt")

    # ---- cluster
    placed = {name: gpu_ids(e, r) for name in ("actor", "rollout") if (r := e.role(name)) is not None}
    used = sorted({i for ids in placed.values() for i in ids})
    span = max(used) + 1 if used else 8
    nodes = e.cluster.nodes or 1
    per_node = e.cluster.gpus_per_node or max(-(-span // nodes), 1)
    nodes = e.cluster.nodes or max(-(-span // per_node), 1)
    placement: dict[str, str] = {}
    total = nodes * per_node
    groups: dict[tuple[int, ...], list[str]] = {}
    for name, ids in placed.items():
        groups.setdefault(ids, []).append(name)
    for ids, names in groups.items():
        if "actor" in names:
            # RLinf places its reward workers; beside the actor they hold no GPU of their own.
            names = names + ["reward"]
        text = "all" if list(ids) == list(range(total)) else _ranks(ids)
        placement[",".join(names)] = text
    tree["cluster"] = {"num_nodes": nodes, "num_gpus_per_node": per_node, "component_placement": placement}

    # ---- runner
    runner: dict[str, Any] = {"task_type": "reasoning", "experiment_name": e.name}
    if s.epochs is not None:
        runner["max_epochs"] = s.epochs
    runner["max_steps"] = s.total_steps if s.total_steps is not None else -1
    if e.checkpointing.interval is not None:
        runner["save_interval"] = e.checkpointing.interval
    prompt = d.max_prompt_length or 1024
    runner["seq_length"] = prompt + e.sampling.max_new_tokens
    suffix = f"/{e.name}/checkpoints"
    directory = e.checkpointing.directory
    if directory:
        runner["output_dir"] = directory[: -len(suffix)] if directory.endswith(suffix) else directory
    # RLinf's workers refuse dynamic batch sizes when actor and rollout are pipelined on separate GPUs.
    collocated = rollout is None or gpu_ids(e, actor) == gpu_ids(e, rollout)
    runner["enable_dynamic_batch_size"] = actor.sequence_packing and collocated
    if actor.sequence_packing and actor.max_tokens_per_micro_batch is not None:
        runner["max_tokens_per_mbs"] = actor.max_tokens_per_micro_batch
    c = e.checkpointing
    runner["resume_dir"] = None if c.resume == "none" else "auto" if c.resume == "latest" else c.resume
    backends = [b for b in ("tensorboard", "wandb") if b in e.logging.backends]
    logger: dict[str, Any] = {"logger_backends": backends}
    if e.logging.directory is not None:
        logger["log_path"] = e.logging.directory
    if e.logging.project is not None:
        logger["project_name"] = e.logging.project
    if e.logging.run_name is not None:
        logger["experiment_name"] = e.logging.run_name
    runner["logger"] = logger
    tree["runner"] = runner

    # ---- algorithm
    n = a.group_size
    minibatches = max(s.samples_per_step // max(s.samples_per_optimizer_step, 1), 1)
    alg: dict[str, Any] = {"group_size": n, "n_minibatches": minibatches}
    normalization = getattr(a, "loss_normalization", "mini-batch")
    step_mean = normalization == "step" or (normalization == "mini-batch" and minibatches == 1)
    collocated = placed.get("actor") == placed.get("rollout")
    # The pipelined (disaggregated) Megatron actor's use_valid_token_scale divides every term's token sums by the
    # response limit ÷ data-parallel ranks (rlinf/lower.estimated_token_norm).
    estimated = (megatron and not collocated and normalization == "mini-batch"
                 and a.loss_aggregation == "seq-mean-token-sum" and a.loss_length_norm_all_terms
                 and a.loss_length_norm == e.sampling.max_new_tokens / actor.data_parallel())
    if estimated:
        alg.update(loss_agg_func="token-mean", use_valid_token_scale=True,
                   training_batch_size_per_gpu=actor.micro_batch_size or 1)
    elif step_mean and a.loss_aggregation == "token-mean" and megatron and collocated:
        # use_valid_token_scale makes the collocated Megatron actor's token means over the step's tokens (one
        # mini-batch's when the step is one).
        alg.update(loss_agg_func="token-mean", use_valid_token_scale=True,
                   training_batch_size_per_gpu=actor.micro_batch_size or 1)
    else:
        # Otherwise RLinf reduces each micro-batch on its own, and rlcfg reproduces that only over micro-batches
        # of a fixed size (no dynamic batches).
        alg.update(loss_agg_func=a.loss_aggregation, use_valid_token_scale=False,
                   training_batch_size_per_gpu=actor.micro_batch_size or 1)
        runner["enable_dynamic_batch_size"] = False
        runner.pop("max_tokens_per_mbs", None)
    if actor.forward_micro_batch_size is not None:
        alg["logprob_forward_micro_batch_size"] = actor.forward_micro_batch_size
    kl = a.kl
    alg["kl_beta"] = kl.coef if kl.placement == "loss" else 0.0
    estimator = kl.estimator if megatron or kl.estimator in ("k2", "abs") else "k2"
    alg["kl_penalty_type"] = KL_TYPES.get(estimator, "low_var_kl")
    if a.clip_low == a.clip_high:
        alg["ratio_clip_eps"] = a.clip_low
    else:
        alg.update(clip_ratio_low=a.clip_low, clip_ratio_high=a.clip_high)
    alg["calculate_entropy"] = a.entropy_coef > 0
    alg["entropy_bonus"] = a.entropy_coef
    alg["clip_ratio_c"] = a.clip_ratio_c if a.policy_loss == "dual_clip" else None
    alg["adv_type"] = "grpo"
    alg["normalize_advantages"] = a.batch_normalize_advantage
    o = a.policy_options
    alg["early_stop_imp_ratio"] = o.early_stop_ratio if megatron else None
    alg["clip_log_ratio_min"] = o.log_ratio_min
    alg["clip_log_ratio_max"] = o.log_ratio_max
    if o.tis_cap is not None and o.tis_floor == (release in FLOORED_IMPORTANCE_WEIGHT):
        alg.update(importance_sampling_fix=True, importance_sampling_clip=o.tis_cap)
    alg["shuffle_rollout"] = False
    sp = e.sampling
    greedy = sp.temperature == 0
    alg["sampling_params"] = {"do_sample": not greedy, "temperature": sp.temperature if not greedy else 1.0,
                              "top_k": sp.top_k if sp.top_k > 0 else TOP_K_OFF, "top_p": sp.top_p,
                              "repetition_penalty": sp.repetition_penalty, "max_new_tokens": sp.max_new_tokens,
                              "min_new_tokens": sp.min_new_tokens}
    tree["algorithm"] = alg

    # ---- rollout
    args = engine(e)
    backend = rollout.backend if rollout is not None and rollout.backend in ("sglang", "vllm") else "sglang"
    path = actor.model.path if actor.model else ""
    ro: dict[str, Any] = {"model": {"model_path": path, "model_type": _model_type(path)},
                          "rollout_backend": backend}
    if rollout is not None:
        if rollout.model is not None:
            ro["precision"] = PRECISIONS.get(rollout.model.dtype, "bf16")
        tp = rollout.parallelism.tp
        if megatron and actor.parallelism.tp % tp:
            # RLinf's weight sync splits each actor TP group into rollout TP groups.
            tp = math.gcd(tp, actor.parallelism.tp)
        ro["tensor_parallel_size"] = tp
        ro["pipeline_parallel_size"] = rollout.parallelism.pp
    memory = args.get("gpu_memory_utilization", args.get("mem_fraction_static"))
    if memory is not None:
        ro["gpu_memory_utilization"] = memory
    for ours, theirs in (("max_num_seqs", "max_running_requests"), ("enforce_eager", "enforce_eager"),
                         ("cuda_graph_bs", "cuda_graph_max_bs")):
        if args.get(ours) is not None and not isinstance(args[ours], (list, tuple)):
            ro[theirs] = args[ours]
    sglang: dict[str, Any] = {}
    vllm: dict[str, Any] = {}
    if backend == "sglang" and args.get("attention_backend") is not None:
        sglang["attention_backend"] = args["attention_backend"]
    if backend == "vllm":
        for key in ("attention_backend", "enable_chunked_prefill", "enable_prefix_caching", "max_num_batched_tokens"):
            if args.get(key) is not None:
                vllm[key] = args[key]
    # RLinf 2025-10 validates both engine sections whichever backend runs.
    ro["sglang"] = sglang
    ro["vllm"] = vllm
    tree["rollout"] = ro

    # ---- data
    data: dict[str, Any] = {"type": "math", "max_prompt_length": prompt, "rollout_batch_size": s.prompts_per_step,
                            "prompt_key": d.prompt_key, "answer_key": d.answer_key,
                            "shuffle": d.shuffle, "seed": d.seed, "apply_chat_template": d.apply_chat_template,
                            "train_data_paths": list(d.train_files),
                            "filter_prompt_by_length": d.long_prompts == "drop"}
    if d.eval_files:
        data["val_data_paths"] = list(d.eval_files)
    tree["data"] = data

    # ---- actor
    model: dict[str, Any] = {"precision": PRECISIONS.get(actor.model.dtype if actor.model else "", "bf16")}
    p = actor.parallelism
    act: dict[str, Any] = {"training_backend": "megatron" if megatron else "fsdp"}
    if megatron:
        model.update(megatron_sizes(p))
        model["recompute_granularity"] = "full" if actor.gradient_checkpointing else None
        if actor.gradient_checkpointing:
            model["recompute_method"] = "uniform"
            model["recompute_num_layers"] = 1
    else:
        fsdp: dict[str, Any] = {"strategy": "fsdp2" if actor.backend == "fsdp2" else "fsdp",
                                "gradient_checkpointing": actor.gradient_checkpointing,
                                "cpu_offload": actor.offload.cpu_offload_during_step}
        if p.fsdp_shard == 1:
            fsdp["sharding_strategy"] = "no_shard"
        elif p.fsdp_shard:
            fsdp.update(sharding_strategy="hybrid_shard", fsdp_size=p.fsdp_shard)
        dtype = actor.model.dtype if actor.model else "bfloat16"
        fsdp["mixed_precision"] = {"param_dtype": PRECISIONS.get(dtype, "bf16"), "reduce_dtype": "fp32",
                                   "buffer_dtype": "fp32"}
        act["fsdp_config"] = fsdp
    act["model"] = model
    act.update(offload_weight=actor.offload.params, offload_optimizer=actor.offload.optimizer,
               offload_grad=actor.offload.grads, seed=e.seed)
    opt = actor.optimizer
    act["optim"] = {"optimizer": "sgd" if opt.name == "sgd" else "adam", "lr": opt.lr,
                    "weight_decay": opt.weight_decay, "adam_beta1": opt.betas[0], "adam_beta2": opt.betas[1],
                    "adam_eps": opt.eps, "clip_grad": opt.grad_clip or 0.0, "min_lr": opt.min_lr}
    act["lr_sched"] = {"lr_decay_style": opt.scheduler, "lr_warmup_iters": step_count(opt.warmup_steps), "min_lr": opt.min_lr}
    if opt.scheduler != "constant":
        act["lr_sched"].update(start_weight_decay=opt.weight_decay, end_weight_decay=opt.weight_decay)
    tokenizer = (actor.model.tokenizer or actor.model.path) if actor.model else path
    act["tokenizer"] = {"tokenizer_model": tokenizer,
                        "trust_remote_code": bool(actor.model and actor.model.trust_remote_code)}
    tree["actor"] = act
    scale = a.reward.scale / 2
    tree["reward"] = {"reward_type": "math", "reward_scale": scale}
    tree["critic"] = {"use_critic_model": False}
    notes = [f"rollout.model.model_type: {ro['model']['model_type']} (RLinf looks the model family up by this "
             "name; taken from the model path)"]
    return Emitted(tree, REASONS, notes)
