"""Experiment → SkyRL (skyrl-train).

SkyRL counts a step in prompts (train_batch_size) and its optimizer batch in prompts too (policy_mini_batch_size,
times n_samples_per_prompt samples); each training model has nodes × GPUs per node; the inference engines take
num_inference_engines × TP GPUs, on the policy's GPUs with colocate_all or GPUs of their own otherwise. Its GRPO is
the unbiased group std + 1e-6, its KL is kl_loss_coef in the loss (use_kl_loss) or per token in the reward
(use_kl_in_reward).
"""

from __future__ import annotations

from typing import Any

from rlcfg.convert import Emitted
from rlcfg.convert.common import engine, engines, nodes_of, put, shares, step_count
from rlcfg.dialects.skyrl.derived import MINI_BATCH_REDUCTION
from rlcfg.dialects.skyrl.package import PACKAGE_FROM_030, PACKAGE_RELEASES, is_package, package_name
from rlcfg.ir import Experiment, Role
from rlcfg.schema import entry

# skyrl-train's releases, whose Hydra config reads a YAML file; the `skyrl` package reads a command line only, so
# convert writes it a launch script of its entrypoint, in the package's layout (written_key).
RELEASES = tuple(release for release in entry("skyrl").releases if release not in PACKAGE_RELEASES)
COMMAND_LINES = dict.fromkeys(PACKAGE_RELEASES, "python -m skyrl.train.entrypoints.main_base")


def written_key(dotted_key: str, release: str | None) -> str:
    """A key of the emitted tree (skyrl-train's layout) as `release` names it."""
    return package_name(dotted_key, release) if is_package(release) else dotted_key


AGGREGATIONS = {"token-mean": "token_mean", "seq-mean-token-mean": "sequence_mean"}
SCHEDULERS = {"constant": "constant_with_warmup", "linear": "linear", "cosine": "cosine"}
STRATEGIES = {"fsdp": "fsdp", "fsdp2": "fsdp2", "megatron": "megatron", "deepspeed": "deepspeed"}

_ASYNC_ENTRYPOINTS = ("SkyRL trains asynchronously only under its fully-asynchronous and one-step off-policy "
                      "entrypoints (main_fully_async, main_async); convert writes main_base's config")
REASONS = {
    "algorithm.advantage_options.std": "SkyRL's GRPO divides by the unbiased group std",
    "algorithm.advantage_options.eps": "SkyRL's GRPO adds 1e-6 to the group std",
    "algorithm.advantage_options": "SkyRL's estimators have no such option",
    "algorithm.reward": "SkyRL has no reward scaling, bias or clipping (only zero_reward_on_non_stop)",
    "algorithm.reward.overlong_penalty_length": "only SkyRL's DAPO entrypoint (main_dapo) punishes overlong "
                                                "responses, and convert writes main_base's config",
    "algorithm.reward.overlong_penalty_factor": "only SkyRL's DAPO entrypoint (main_dapo) punishes overlong "
                                                "responses, and convert writes main_base's config",
    "algorithm.loss_normalization": "SkyRL reduces the policy loss per micro-batch in skyrl-train and skyrl 0.1.0, and "
                                    "over the whole mini-batch from skyrl 0.2.0, where only token_mean_legacy keeps "
                                    "the micro-batch mean",
    "algorithm.policy_options.log_ratio_max": "SkyRL's loss clamps the log-ratio at ±20 only",
    "algorithm.policy_options.log_ratio_min": "SkyRL's loss clamps the log-ratio at ±20 only",
    "algorithm.policy_options.loss_cap": "SkyRL's loss has no per-token cap",
    "algorithm.policy_options.gspo_form": "SkyRL's GSPO is the token form",
    "algorithm.policy_options.decoupled": "SkyRL has no decoupled (proximal-policy) loss",
    **dict.fromkeys(("algorithm.policy_options.sequence_mask", "algorithm.policy_options.sequence_mask_low",
                     "algorithm.policy_options.sequence_mask_high"),
                    "SkyRL's sequence mask keeps a masked sequence in the loss's denominators only in the `skyrl` "
                    "package from 0.2.0"),
    "algorithm.policy_options.behav_imp_weight_cap": "SkyRL has no decoupled (proximal-policy) loss",
    "algorithm.policy_options.early_stop_ratio": "SkyRL has no early stop on the importance ratio",
    "algorithm.policy_options.loss_coef": "SkyRL has no policy-loss coefficient",
    "algorithm.policy_options.kl_cov_ratio": "SkyRL's kl_cov_frac default differs and only KL-Cov reads it",
    "algorithm.kl.reward_mode": "SkyRL subtracts the reward KL before the estimator (per sequence for GRPO)",
    "algorithm.advantage": "only SkyRL's on-policy distillation example (main_on_policy_distill) registers `no_op`, "
                           "the token rewards as advantages, and convert writes main_base's config",
    "algorithm.kl.penalty_only": "only SkyRL's on-policy distillation example (main_on_policy_distill) rewards the KL "
                                 "alone, and convert writes main_base's config",
    "algorithm.kl.estimator": "SkyRL's kl_estimator_type offers k1, k2, k3 and abs",
    "algorithm.kl.controller": "SkyRL's kl_ctrl applies to the reward KL only",
    "algorithm.batch_normalize_advantage": "SkyRL refuses advantage_batch_normalize (its mean runs over padding)",
    "algorithm.filters": "SkyRL's zero-variance filter masks failed groups; it has no mean/std filters",
    "algorithm.weighting": "SkyRL has no per-sample loss weights or masks",
    "algorithm.entropy_coef": "SkyRL's entropy bonus",
    "roles.reference.offload": "SkyRL offloads models only with colocate_all",
    "roles.rollout.offload": "SkyRL's engines sleep only with colocate_all",
    "roles.actor.offload": "SkyRL offloads models between phases only with colocate_all",
    "roles.critic.offload": "SkyRL offloads models between phases only with colocate_all",
    "roles.reference.forward_micro_batch_size": "SkyRL has one forward micro-batch for every model",
    "roles.critic.micro_batch_size": "SkyRL has one train micro-batch for every model",
    "roles.critic.forward_micro_batch_size": "SkyRL has one forward micro-batch for every model",
    "roles.reference.max_tokens_per_micro_batch": "SkyRL packs sequences without a token budget",
    "roles.actor.max_tokens_per_micro_batch": "SkyRL packs sequences without a token budget",
    "roles.critic.max_tokens_per_micro_batch": "SkyRL packs sequences without a token budget",
    "roles.reference.sequence_packing": "SkyRL packs sequences for every model or none",
    "roles.reference.gradient_checkpointing": "SkyRL has one gradient_checkpointing for every model",
    "roles.reward": "SkyRL scores with the environment's rule on CPU",
    "roles.actor.resources.gpu_ids": "SkyRL places models by counts, not GPU ids",
    "roles.reference.resources.gpu_ids": "SkyRL places models by counts, not GPU ids",
    "roles.critic.resources.gpu_ids": "SkyRL places models by counts, not GPU ids",
    "roles.rollout.resources.gpu_ids": "SkyRL places engines by counts, not GPU ids",
    "roles.actor.model.trust_remote_code": "SkyRL always loads models with trust_remote_code",
    "roles.reference.model.trust_remote_code": "SkyRL always loads models with trust_remote_code",
    "roles.critic.model.trust_remote_code": "SkyRL always loads models with trust_remote_code",
    "roles.rollout.model.trust_remote_code": "SkyRL always loads models with trust_remote_code",
    "roles.actor.model.tokenizer": "SkyRL loads the model's own tokenizer",
    "roles.reference.model.tokenizer": "SkyRL loads the model's own tokenizer",
    "roles.critic.model.tokenizer": "SkyRL loads the model's own tokenizer",
    "roles.rollout.model.tokenizer": "SkyRL loads the model's own tokenizer",
    "roles.rollout.model.path": "SkyRL's engines load the policy's model",
    "roles.rollout.engine": "SkyRL's generator has no such engine setting",
    "roles.rollout.backend": "SkyRL runs SGLang only with FSDP training and TP 1 engines",
    "roles.rollout.forward_micro_batch_size": "SkyRL's engines batch requests themselves",
    "cluster": "SkyRL's config does not name the cluster's size",
    "data.prompt_key": "SkyRL's datasets carry the prompt under `prompt`",
    "data.answer_key": "SkyRL's environments read reward_spec.ground_truth",
    "data.shuffle": "SkyRL always shuffles",
    "data.seed": "SkyRL shuffles with trainer.seed",
    "data.apply_chat_template": "SkyRL always applies the chat template",
    "schedule.total_steps": "SkyRL counts epochs over the dataset, not steps",
    "schedule.max_staleness": _ASYNC_ENTRYPOINTS,
    "schedule.rollout_concurrency": _ASYNC_ENTRYPOINTS,
    "schedule.ahead_across_epochs": _ASYNC_ENTRYPOINTS,
    "schedule.epochs": "SkyRL counts epochs over the dataset",
    "schedule.samples_per_optimizer_step": "SkyRL's mini-batch is a whole number of prompts per data-parallel rank",
    "checkpointing.keep_last": "SkyRL's max_ckpts_to_keep",
    "checkpointing.save_hf": "SkyRL exports HF weights on its own interval",
    "logging.directory": "SkyRL writes no log directory of its own",
    "logging.backends": "SkyRL's logger is one of console, wandb, tensorboard",
    "eval_sampling": "SkyRL's eval_sampling_params",
    "sampling.presence_penalty": "SkyRL's sampling_params have no presence penalty",
    "sampling.frequency_penalty": "SkyRL's sampling_params have no frequency penalty",
    "sampling.min_new_tokens": "SkyRL's sampling_params have no minimum length",
    "sampling.stop_token_ids": "SkyRL's sampling_params have no stop token ids",
    "algorithm.mask_truncated": "SkyRL's apply_overlong_filtering",
    "reward_function": "SkyRL's gsm8k environment takes only a `#### <number>` answer",
    "seed": "SkyRL seeds everything with trainer.seed",
}


def _place(tree: dict, experiment: Experiment, key: str, r: Role) -> None:
    nodes, per_node = nodes_of(experiment, r)
    put(tree, f"trainer.placement.{key}_num_nodes", nodes)
    put(tree, f"trainer.placement.{key}_num_gpus_per_node", per_node)


def _optimizer(tree: dict, section: str, r: Role) -> None:
    o = r.optimizer
    if o is None:
        return
    base = f"trainer.{section}.optimizer_config"
    put(tree, f"{base}.lr", o.lr)
    put(tree, f"{base}.adam_betas", list(o.betas))
    put(tree, f"{base}.weight_decay", o.weight_decay)
    put(tree, f"{base}.max_grad_norm", o.grad_clip if o.grad_clip is not None else 0.0)
    put(tree, f"{base}.scheduler", SCHEDULERS[o.scheduler])
    put(tree, f"{base}.num_warmup_steps", step_count(o.warmup_steps))
    # offload_after_step moves the optimizer state off the GPU between steps (under colocate_all).
    put(tree, f"{base}.offload_after_step", r.offload.optimizer or not r.offload.params)


def _model(tree: dict, section: str, r: Role, megatron: bool) -> None:
    put(tree, f"trainer.{section}.model.path", r.model.path if r.model else None)
    _parallel(tree, section, r, megatron)
    if r.lora is not None:
        lora, base = r.lora, f"trainer.{section}.model.lora"
        put(tree, f"{base}.rank", lora.rank)
        put(tree, f"{base}.alpha", lora.alpha)
        put(tree, f"{base}.dropout", lora.dropout)
        put(tree, f"{base}.target_modules", _modules(lora.target_modules))
        put(tree, f"{base}.exclude_modules", _modules(lora.exclude_modules))
        if section == "policy":  # the critic's adapters start with PEFT's default, kaiming
            put(tree, f"{base}.init_method", lora.init)


def _modules(value: str | tuple[str, ...] | None) -> str | list[str] | None:
    return list(value) if isinstance(value, tuple) else value


def _parallel(tree: dict, section: str, r: Role, megatron: bool) -> None:
    p = r.parallelism
    if megatron and section in ("policy", "ref"):
        m = f"trainer.{section}.megatron_config"
        put(tree, f"{m}.tensor_model_parallel_size", p.tp)
        put(tree, f"{m}.pipeline_model_parallel_size", p.pp)
        put(tree, f"{m}.context_parallel_size", p.cp)
        put(tree, f"{m}.expert_model_parallel_size", p.ep)
        put(tree, f"{m}.expert_tensor_parallel_size", p.etp)
        # SkyRL turns Megatron's sequence parallelism on with TP > 1 unless told otherwise.
        if p.tp > 1 and not p.sequence_parallel:
            put(tree, f"{m}.transformer_config_kwargs", {"sequence_parallel": False})
    else:
        put(tree, f"trainer.{section}.sequence_parallel_size", p.sp)
        put(tree, f"trainer.{section}.fsdp_config.cpu_offload", r.offload.cpu_offload_during_step)
        if p.fsdp_shard is not None:
            put(tree, f"trainer.{section}.fsdp_config.fsdp_size", p.fsdp_shard)


def emit(experiment: Experiment, release: str | None = None) -> Emitted:
    """`release`: the one asked for; the layout written is the same for each (convert drops a key the release lacks,
    and spells a package release's keys in its layout), except the loss reduction that keeps the micro-batch mean."""
    e = experiment
    tree: dict[str, Any] = {}
    actor, rollout = e.role("actor"), e.role("rollout")
    reference, critic = e.role("reference"), e.role("critic")
    a = e.algorithm
    n = a.group_size

    put(tree, "data.train_data", list(e.data.train_files))
    put(tree, "data.val_data", list(e.data.eval_files))

    strategy = STRATEGIES.get(actor.backend, "fsdp2")
    if strategy == "fsdp2" and release in PACKAGE_FROM_030:
        strategy = "fsdp"  # these releases' name of FSDP2 (`fsdp2` is a deprecated alias)
    megatron = strategy == "megatron"
    put(tree, "trainer.strategy", strategy)
    colocate_all = rollout is not None and shares(e, "actor", "rollout")
    put(tree, "trainer.placement.colocate_all", colocate_all)
    put(tree, "trainer.placement.colocate_policy_ref", reference is not None and shares(e, "actor", "reference"))
    _place(tree, e, "policy", actor)
    _model(tree, "policy", actor, megatron)
    _optimizer(tree, "policy", actor)
    if reference is not None:
        _place(tree, e, "ref", reference)
        if reference.model and actor.model and reference.model.path != actor.model.path:
            put(tree, "trainer.ref.model.path", reference.model.path)
        _parallel(tree, "ref", reference, megatron)
    if critic is not None:
        _place(tree, e, "critic", critic)
        _model(tree, "critic", critic, megatron)
        _optimizer(tree, "critic", critic)
    put(tree, "trainer.bf16", actor.model is None or actor.model.dtype != "float32")

    # ---- algorithm
    alg = "trainer.algorithm"
    if a.advantage != "token_reward":  # `no_op` is the distillation example's, which convert does not write
        put(tree, f"{alg}.advantage_estimator", a.advantage)
    put(tree, f"{alg}.grpo_norm_by_std", a.normalize_advantage_std)
    put(tree, f"{alg}.gamma", a.gamma)
    if a.advantage == "gae":
        put(tree, f"{alg}.lambd", a.lam)
    put(tree, f"{alg}.policy_loss_type", a.policy_loss)
    if a.policy_loss == "cispo":
        put(tree, f"{alg}.cispo.cispo_eps_clip_low", a.clip_low)
        put(tree, f"{alg}.cispo.cispo_eps_clip_high", a.clip_high)
    else:
        put(tree, f"{alg}.eps_clip_low", a.clip_low)
        put(tree, f"{alg}.eps_clip_high", a.clip_high)
    if a.policy_loss == "dual_clip":
        put(tree, f"{alg}.clip_ratio_c", a.clip_ratio_c)
    # SkyRL divides the policy loss alone, by a whole number of tokens; any other length norm stays unsaid and the
    # comparison of the two Experiments reports it.
    norm = a.loss_length_norm
    if a.loss_aggregation == "seq-mean-token-sum" and norm and norm == int(norm) \
            and not a.loss_length_norm_all_terms:
        put(tree, f"{alg}.loss_reduction", "seq_mean_token_sum_norm")
        put(tree, f"{alg}.max_seq_len", int(norm))
    elif release in MINI_BATCH_REDUCTION and a.loss_aggregation == "token-mean" \
            and a.loss_normalization == "micro-batch":
        put(tree, f"{alg}.loss_reduction", "token_mean_legacy")  # these releases' token_mean spans the mini-batch
    else:
        put(tree, f"{alg}.loss_reduction", AGGREGATIONS.get(a.loss_aggregation, "token_mean"))
    kl = a.kl
    put(tree, f"{alg}.use_kl_loss", kl.placement == "loss")
    put(tree, f"{alg}.use_kl_in_reward", kl.placement == "reward")
    put(tree, f"{alg}.kl_loss_coef", kl.coef)
    put(tree, f"{alg}.kl_estimator_type", kl.estimator if kl.estimator in ("k1", "k2", "k3", "abs") else "k3")
    if kl.placement == "reward":
        put(tree, f"{alg}.kl_ctrl.type", kl.controller.kind)
        if kl.controller.target is not None:
            put(tree, f"{alg}.kl_ctrl.kl_target", kl.controller.target)
        put(tree, f"{alg}.kl_ctrl.horizon", kl.controller.horizon)
    put(tree, f"{alg}.use_entropy_loss", a.entropy_coef > 0)
    if a.entropy_coef > 0:
        put(tree, f"{alg}.entropy_loss_coef", a.entropy_coef)
    if critic is not None and a.value_clip is not None:
        put(tree, f"{alg}.value_clip", a.value_clip)
    o = a.policy_options
    if o.tis_cap is not None:
        put(tree, f"{alg}.off_policy_correction.tis_ratio_type", o.tis_level)
        put(tree, f"{alg}.off_policy_correction.{o.tis_level}_tis_ratio_clip_high", o.tis_cap)
    if o.sequence_mask is not None and release in MINI_BATCH_REDUCTION:
        prefix = "geo" if o.sequence_mask == "geometric" else "product"
        put(tree, f"{alg}.off_policy_correction.sequence_mask_metric", o.sequence_mask)
        put(tree, f"{alg}.off_policy_correction.{prefix}_mask_low", o.sequence_mask_low)
        put(tree, f"{alg}.off_policy_correction.{prefix}_mask_high", o.sequence_mask_high)
    # Each loss reads only its own knobs.
    if a.policy_loss == "sapo":
        put(tree, f"{alg}.sapo.tau_pos", o.sapo_tau_pos)
        put(tree, f"{alg}.sapo.tau_neg", o.sapo_tau_neg)
    if a.policy_loss == "clip_cov":
        put(tree, f"{alg}.clip_cov.clip_ratio", o.clip_cov_ratio)
        put(tree, f"{alg}.clip_cov.clip_cov_lb", o.clip_cov_lb)
        put(tree, f"{alg}.clip_cov.clip_cov_ub", o.clip_cov_ub)
    if a.policy_loss == "kl_cov":
        put(tree, f"{alg}.kl_cov.kl_cov_frac", o.kl_cov_ratio)
        put(tree, f"{alg}.kl_cov.ppo_kl_coef", o.kl_cov_coef)
    f = a.filter_spec()
    put(tree, f"{alg}.zero_variance_filter", f.zero_variance and f.dynamic is None)
    if f.dynamic is not None:
        put(tree, f"{alg}.dynamic_sampling.type", f.dynamic)
        put(tree, f"{alg}.dynamic_sampling.max_sample_batches", f.max_draws if f.max_draws is not None else -1)
        put(tree, f"{alg}.dynamic_sampling.min_replace_ratio", f.min_replace_ratio)

    # ---- schedule
    s = e.schedule
    t = "trainer"
    if s.epochs is not None:
        put(tree, f"{t}.epochs", s.epochs)
    put(tree, f"{t}.update_epochs_per_batch", a.ppo_epochs)
    put(tree, f"{t}.train_batch_size", s.prompts_per_step)
    put(tree, f"{t}.policy_mini_batch_size", max(s.samples_per_optimizer_step // max(n, 1), 1))
    if critic is not None:
        per_opt = s.critic_samples_per_optimizer_step or s.samples_per_step
        put(tree, f"{t}.critic_mini_batch_size", max(per_opt // max(n, 1), 1))
    if actor.micro_batch_size is not None:
        put(tree, f"{t}.micro_train_batch_size_per_gpu", actor.micro_batch_size)
    if actor.forward_micro_batch_size is not None:
        put(tree, f"{t}.micro_forward_batch_size_per_gpu", actor.forward_micro_batch_size)
    put(tree, f"{t}.use_sample_packing", actor.sequence_packing)
    put(tree, f"{t}.gradient_checkpointing", actor.gradient_checkpointing)
    if e.data.max_prompt_length is not None:
        put(tree, f"{t}.max_prompt_length", e.data.max_prompt_length)
    put(tree, f"{t}.seed", e.seed)
    put(tree, f"{t}.eval_before_train", s.eval_before_train)
    put(tree, f"{t}.eval_interval", s.eval_interval if s.eval_interval is not None else -1)
    c = e.checkpointing
    put(tree, f"{t}.resume_mode", "latest" if c.resume == "latest" else "none" if c.resume == "none" else "from_path")
    if c.resume not in ("latest", "none"):
        put(tree, f"{t}.resume_path", c.resume)
    if c.directory is not None:
        put(tree, f"{t}.ckpt_path", c.directory)
    put(tree, f"{t}.ckpt_interval", c.interval if c.interval is not None else -1)
    put(tree, f"{t}.max_ckpts_to_keep", c.keep_last if c.keep_last is not None else -1)
    backends = e.logging.backends
    put(tree, f"{t}.logger", "wandb" if "wandb" in backends else "tensorboard" if "tensorboard" in backends
        else "console")
    if e.logging.project is not None:
        put(tree, f"{t}.project_name", e.logging.project)
    put(tree, f"{t}.run_name", e.name)

    # ---- generator
    g = "generator"
    args = engine(e)
    if rollout is not None:
        backend = rollout.backend if rollout.backend in ("vllm", "sglang") else "vllm"
        # SkyRL runs SGLang only with FSDP training and TP 1 engines started locally.
        if backend == "sglang" and (megatron or rollout.parallelism.tp > 1):
            backend = "vllm"
        put(tree, f"{g}.backend", backend)
        put(tree, f"{g}.num_inference_engines", engines(rollout))
        put(tree, f"{g}.inference_engine_tensor_parallel_size", rollout.parallelism.tp)
        put(tree, f"{g}.inference_engine_pipeline_parallel_size", rollout.parallelism.pp)
        if rollout.model is not None:
            put(tree, f"{g}.model_dtype", rollout.model.dtype)
        memory = args.get("gpu_memory_utilization", args.get("mem_fraction_static"))
        if memory is not None and backend != rollout.backend:
            memory = min(memory, 0.9)
        if memory is not None:
            put(tree, f"{g}.gpu_memory_utilization", memory)
        for key in ("max_num_seqs", "max_num_batched_tokens", "enable_prefix_caching"):
            if args.get(key) is not None:
                put(tree, f"{g}.{key}", args[key])
        if backend == "vllm":
            for key in ("enforce_eager", "enable_chunked_prefill"):
                if args.get(key) is not None:
                    put(tree, f"{g}.{key}", args[key])
        kwargs = {k: args[k] for k in ("max_model_len", "block_size", "load_format", "attention_backend")
                  if args.get(k) is not None and backend == "vllm"}
        if kwargs:
            put(tree, f"{g}.engine_init_kwargs", kwargs)
    put(tree, f"{g}.n_samples_per_prompt", n)
    if e.data.chat_template_kwargs:
        put(tree, f"{g}.chat_template_kwargs", dict(e.data.chat_template_kwargs))
    if e.data.max_prompt_length is not None:
        put(tree, f"{g}.max_input_length", e.data.max_prompt_length)
    put(tree, f"{g}.sampling_params", _sampling(e.sampling))
    if e.eval_sampling is not None:
        put(tree, f"{g}.eval_sampling_params", _sampling(e.eval_sampling))
        put(tree, f"{g}.eval_n_samples_per_prompt", e.eval_sampling.n)
    put(tree, f"{g}.zero_reward_on_non_stop", a.reward.zero_truncated)
    put(tree, f"{g}.apply_overlong_filtering", a.mask_truncated)
    episodes = e.episodes
    if episodes is None:
        put(tree, "environment.env_class", "gsm8k")
        return Emitted(tree, REASONS)
    put(tree, "environment.env_class", episodes.environment)
    put(tree, f"{g}.max_turns", episodes.max_turns)
    put(tree, f"{g}.max_input_length", episodes.max_input_length)
    put(tree, f"{g}.use_conversation_multi_turn", episodes.observations == "chat")
    put(tree, f"{g}.append_eos_token_after_stop_str_in_multi_turn", episodes.eos_after_stop)
    put(tree, f"{g}.batched", False)
    for key, value in episodes.settings:
        put(tree, f"environment.skyrl_gym.{episodes.environment}.{key}", value)
    return Emitted(tree, REASONS)


def _sampling(s: Any) -> dict[str, Any]:
    out = {"max_generate_length": s.max_new_tokens, "temperature": s.temperature, "top_p": s.top_p,
           "top_k": s.top_k, "min_p": s.min_p, "repetition_penalty": s.repetition_penalty}
    if s.stop:
        out["stop"] = list(s.stop)
    return out
