"""SkyRL (skyrl-train) → Experiment.

SkyRL's models map to rlcfg's roles: the policy → actor, the inference engines → rollout, `trainer.ref` →
reference (only when use_kl_loss or use_kl_in_reward asks for its log-probs and kl_loss_coef is above 0),
`trainer.critic` → critic (only with a critic model path and the `gae` estimator, the one that reads its values),
and `trainer.reward` → reward: a reward model when it names one, otherwise the
environment's rule-based reward, computed in the generator on CPU. `trainer.placement` gives each training model
its nodes × GPUs per node; the engines take num_inference_engines × TP × PP × DP GPUs. `colocate_all` puts every
model and the engines on the policy's GPUs, taking turns (each one offloaded while another runs); without it,
`colocate_policy_ref` and `colocate_critic_reward` pair models on shared GPUs and everything else gets GPUs of
its own.

What skyrl-train derives or rewrites, and the lowering reproduces:
  - a model's DP size is its GPUs divided by its Ulysses sequence-parallel size (FSDP, DeepSpeed) or by
    TP × PP × CP (Megatron);
  - `_remove_tail_data` trims every batch to a multiple of lcm(DP sizes of the policy, ref, critic and reward
    model) / gcd(that, n_samples_per_prompt) prompts, so a train_batch_size that is not such a multiple trains
    on fewer prompts than it says;
  - each worker's mini-batch is policy_mini_batch_size × n_samples_per_prompt // DP samples (a floor), so the
    global optimizer batch is that times DP;
  - the KL estimator: `use_abs_kl` and `use_kl_estimator_k3` (deprecated, up to v0.3.0) override
    kl_estimator_type when true (validate_cfg); false leaves kl_estimator_type in charge;
  - evaluation runs only with eval_interval > 0 and validation data (eval_before_train included);
  - the engines load the policy's model path (`generator.model_name` only names the HTTP endpoint's model), seed
    engine i × DP rank r with trainer.seed + i × DP + r, and with rope_scaling and no max_model_len of their
    own get max_model_len = factor × original_max_position_embeddings.

An environment rlcfg steps through whole episodes (`text2sql`) becomes Experiment.episodes: the generator's
max_turns (which it also hands the environment as its turn limit), max_input_length, how observations are appended
(use_conversation_multi_turn) and the EOS after a stop string, with the environment's own settings; the dataset's
answer is then the row's record of the columns the environment reads.

The `seq_mean_token_sum_norm` loss divides each sequence's token sum by algorithm.max_seq_len, which defaults to
generator.max_input_length + sampling_params.max_generate_length (`effective_max_seq_len`, Algorithm.loss_length_norm).
One derivation has no place in the Experiment and is only described here: `override_existing_update_group: auto`
means `enable` for remote vLLM engines and `disable` otherwise (`effective_update_group`).

The algorithm (skyrl_train/utils/ppo_utils.py, trainer.py, workers/worker.py at the claimed releases) is lowered into
rlcfg's typed settings: every built-in policy loss with its own knobs (CISPO's clip bounds, SAPO's temperatures,
Clip-Cov's and KL-Cov's shares), truncated importance sampling (use_tis, off_policy_correction's token or sequence
cap; only for the losses that apply it), the KL in the loss or in the reward (with its controller), zero reward for
responses that did not stop, overlong filtering, and the group filters. What rlcfg runs differently is refused before
a run: by key in the schema (the run ledger), by value in rules.run_refusals.

The losses are normalised as skyrl-train does (workers/worker.py, at every claimed release): each micro-batch's loss is
reduced on its own (reduce_loss: `token_mean` over its tokens, `sequence_mean` over all its rows) and the gradients
are averaged over the micro-batches and the data-parallel ranks (Algorithm.loss_normalization "micro-batch"); the
KL-loss term is reduced by sequence (masked mean per sequence, then the mean) and the entropy bonus by token,
whatever loss_reduction says, and the critic's loss by sequence. From skyrl 0.2.0 the policy loss is reduced over the
whole mini-batch instead ("mini-batch"; `token_mean_legacy` keeps the micro-batch mean), and the entropy bonus, still
a mean per micro-batch there, is refused with it (rules.run_refusals).
"""

from __future__ import annotations

import math
from typing import Any

from rlcfg import run_limits
from rlcfg.ir import (KL, AdvantageOptions, Algorithm, Checkpointing, Cluster, Data, Episodes, Experiment, FilterSpec,
                      KLController, Logging, Lora, Model, Offload, Optimizer, Parallelism, PolicyOptions, Resources,
                      RewardShaping, Role, Sampling, Schedule, Spelling)
from rlcfg.dialects.skyrl.package import (DAPO_CONTEXT_BUFFER, DISTILLATION_RUNS, ONE_STEP_ASYNC, PACKAGE_FROM_030,
                                          entry_estimator, entry_policy_loss)
from rlcfg.dialects.skyrl.derived import (ADVANTAGE_ESTIMATORS_RUN, ENVIRONMENT_ANSWER_KEYS, EPISODE_ENVIRONMENTS,
                                          FINAL_OBSERVATION_KEPT,
                                          ENVIRONMENT_REWARDS, LOSS_AGGREGATIONS, OFF_POLICY_CORRECTED,
                                          POLICY_LOSSES_RUN, SCHEDULERS, SGLANG_KWARGS, VLLM_KWARGS, critic_in_use,
                                          critic_trained, dataset_files, dp_size, loggers, lora_module_keys,
                                          lora_modules, loss_normalization, overlong_buffer, policy_loss,
                                          ref_in_use, rollout_gpus, routing_correction_read, transformer_kwargs,
                                          world)

# The estimators and losses rlcfg runs with SkyRL's meaning, by SkyRL's names. The others (custom estimators and
# losses registered in code, except those of the examples rlcfg recognises; cross_entropy, and importance_sampling
# before skyrl 0.2.0, which sum over tokens as Tinker's losses do) are refused before a run (rules.run_refusals);
# `rlcfg plan` shows them as the nearest rlcfg has.
ADVANTAGES = {name: name for name in ADVANTAGE_ESTIMATORS_RUN}
POLICY_LOSSES = {name: name for name in POLICY_LOSSES_RUN}


# ---- derived values -----------------------------------------------------------------------------------------


def lcm_dp_all(cfg: Any) -> int:
    """The lcm of the DP sizes of every training or forward model that runs, as `_remove_tail_data` takes it."""
    size = max(dp_size(cfg, "policy"), 1)
    if ref_in_use(cfg):
        size = math.lcm(size, max(dp_size(cfg, "ref"), 1))
    if critic_in_use(cfg):
        size = math.lcm(size, max(dp_size(cfg, "critic"), 1))
    if reward_model_in_use(cfg):
        size = math.lcm(size, max(world(cfg, "reward") // max(cfg.trainer.reward.sequence_parallel_size, 1), 1))
    return size


def prompts_kept(cfg: Any) -> int:
    """Prompts per step after the tail trim: the largest multiple of the stride not above train_batch_size."""
    lcm = lcm_dp_all(cfg)
    stride = lcm // math.gcd(lcm, cfg.generator.n_samples_per_prompt)
    return cfg.trainer.train_batch_size // stride * stride


def effective_max_seq_len(cfg: Any) -> int:
    a, g = cfg.trainer.algorithm, cfg.generator
    return a.max_seq_len if a.max_seq_len is not None else g.max_input_length + g.sampling_params.max_generate_length


def effective_update_group(cfg: Any) -> str:
    g = cfg.generator
    if g.override_existing_update_group != "auto":
        return g.override_existing_update_group
    return "enable" if not g.run_engines_locally and g.backend == "vllm" else "disable"


def kl_estimator(cfg: Any) -> str:
    a = cfg.trainer.algorithm
    if a.use_abs_kl:
        return "abs"
    if a.use_kl_estimator_k3:
        # v0.1.0 to v0.3.0: validate_cfg lets the deprecated flags win over kl_estimator_type (abs first, then k3).
        return "k3"
    return a.kl_estimator_type




def reference_runs(cfg: Any) -> bool:
    """skyrl-train starts the reference model with use_kl_loss or use_kl_in_reward; its log-probs change nothing
    when kl_loss_coef is 0, and rlcfg's runtime then does not start it, so the Experiment has no such role (the plan
    shows what `rlcfg run` starts). The tail trim still counts its DP size, as skyrl-train does."""
    return ref_in_use(cfg) and cfg.trainer.algorithm.kl_loss_coef > 0


def critic_runs(cfg: Any) -> bool:
    """skyrl-train trains a critic whenever critic.model.path is set; only GAE reads its values, and rlcfg's runtime
    starts a critic only for GAE, so with another estimator the Experiment has none (the policy's training is the
    same; the tail trim still counts the critic's DP size, as skyrl-train does)."""
    return critic_trained(cfg)


def reward_model_in_use(cfg: Any) -> bool:
    return cfg.trainer.reward.model.path is not None


# ---- roles --------------------------------------------------------------------------------------------------


def _resources(cfg: Any, model: str) -> Resources:
    p = cfg.trainer.placement
    nodes, per_node = getattr(p, f"{model}_num_nodes"), getattr(p, f"{model}_num_gpus_per_node")
    return Resources(gpus=nodes * per_node, nodes=nodes, gpus_per_node=per_node)


def _megatron_parallelism(options: Any) -> Parallelism:
    m = options.megatron_config
    # SkyRL turns Megatron's sequence parallelism on whenever TP > 1, unless transformer_config_kwargs says
    # otherwise.
    kwargs = transformer_kwargs(options)
    sp = kwargs.get("sequence_parallel", m.tensor_model_parallel_size > 1)
    # Uneven first and last pipeline stages reach megatron-core the same way (Moonlight's 27 layers as 14 + 13).
    return Parallelism(tp=m.tensor_model_parallel_size, pp=m.pipeline_model_parallel_size,
                       cp=m.context_parallel_size, ep=m.expert_model_parallel_size,
                       etp=m.expert_tensor_parallel_size,
                       pp_first_layers=kwargs.get("num_layers_in_first_pipeline_stage"),
                       pp_last_layers=kwargs.get("num_layers_in_last_pipeline_stage"),
                       sequence_parallel=bool(sp) and m.tensor_model_parallel_size > 1)


def _parallelism(cfg: Any, model: str) -> Parallelism:
    t = cfg.trainer
    options = getattr(t, model)
    if t.strategy == "megatron" and model in ("policy", "ref"):
        return _megatron_parallelism(options)
    shard = None
    if t.strategy in ("fsdp", "fsdp2"):
        # FSDP shards over all of a model's ranks unless fsdp_size is positive and smaller; then it is HSDP with
        # groups of fsdp_size ranks.
        size = options.fsdp_config.fsdp_size
        if 0 < size < world(cfg, model):
            shard = size
    return Parallelism(sp=options.sequence_parallel_size, fsdp_shard=shard)


def _cpu_offload_in_step(cfg: Any, options: Any) -> bool:
    strategy = cfg.trainer.strategy
    if strategy in ("fsdp", "fsdp2"):
        return options.fsdp_config.cpu_offload
    if strategy == "deepspeed":
        zero = (options.deepspeed_config or {}).get("zero_optimization") or {}
        param = zero.get("offload_param") if isinstance(zero, dict) else None
        return isinstance(param, dict) and param.get("device") == "cpu"
    return False


def _offload(cfg: Any, options: Any, trains: bool) -> Offload:
    # Only colocate_all makes models take turns: each one is moved to CPU while another runs. Models paired by
    # colocate_policy_ref or colocate_critic_reward split the GPUs' memory and stay resident.
    turns = cfg.trainer.placement.colocate_all
    after_step = trains and options.optimizer_config.offload_after_step
    return Offload(params=turns, optimizer=turns and after_step,
                   grads=turns and trains, cpu_offload_during_step=_cpu_offload_in_step(cfg, options))


def _dtype(cfg: Any) -> str:
    return "bfloat16" if cfg.trainer.bf16 else "float32"


def _warmup(cfg: Any, options: Any) -> int:
    o = options.optimizer_config
    steps = o.num_warmup_steps
    # transformers' get_scheduler("constant") is get_constant_schedule, which ignores num_warmup_steps.
    return 0 if o.scheduler == "constant" else steps


def _optimizer(cfg: Any, options: Any) -> Optimizer:
    o = options.optimizer_config
    return Optimizer(lr=o.lr, name="adamw", weight_decay=o.weight_decay, betas=(o.adam_betas[0], o.adam_betas[1]),
                     # Schedulers rlcfg lacks are refused before a run (rules.run_refusals).
                     grad_clip=o.max_grad_norm, scheduler=SCHEDULERS.get(o.scheduler, "constant"),
                     warmup_steps=_warmup(cfg, options))


# The trainer-wide keys that set the micro-batches of every model (SkyRL has no per-model micro-batch).
TRAIN_KEYS = (("micro_batch_size", "trainer.micro_train_batch_size_per_gpu"),
              ("forward_micro_batch_size", "trainer.micro_forward_batch_size_per_gpu"))
FORWARD_KEYS = TRAIN_KEYS[1:]


# The Megatron parallel sizes of a model's megatron_config.
MEGATRON_SIZE_KEYS = (("tp", "tensor_model_parallel_size"), ("pp", "pipeline_model_parallel_size"),
                      ("cp", "context_parallel_size"), ("ep", "expert_model_parallel_size"),
                      ("etp", "expert_tensor_parallel_size"))


def _model_keys(cfg: Any, model: str) -> tuple[tuple[str, str], ...]:
    # One strategy trains every model; Ulysses, and the Megatron sizes of the models Megatron builds, per model.
    keys = (("backend", "trainer.strategy"), ("parallelism.sp", f"trainer.{model}.sequence_parallel_size"))
    if cfg.trainer.strategy != "megatron" or model not in ("policy", "ref"):
        return keys
    return keys + tuple((f"parallelism.{size}", f"trainer.{model}.megatron_config.{name}")
                        for size, name in MEGATRON_SIZE_KEYS)


def _trained(cfg: Any, name: str, key: str, release: str | None) -> Role:
    """The actor (`policy`) or the critic: a model trained with its own optimizer and the trainer's batches."""
    t = cfg.trainer
    section = getattr(t, key)
    lora, lora_keys = _lora(cfg, key, release)
    return Role(name=name, backend=training_backend(t.strategy, release), resources=_resources(cfg, key),
                model=Model(path=section.model.path, dtype=_dtype(cfg), trust_remote_code=True),
                parallelism=_parallelism(cfg, key), offload=_offload(cfg, section, trains=True),
                optimizer=_optimizer(cfg, section), micro_batch_size=t.micro_train_batch_size_per_gpu,
                forward_micro_batch_size=t.micro_forward_batch_size_per_gpu,
                gradient_checkpointing=t.gradient_checkpointing, sequence_packing=t.use_sample_packing, lora=lora,
                router_dtype=router_dtype(t.strategy, release, section.model.path),
                expert_bias=expert_bias(t.strategy, section, release), section=f"trainer.{key}",
                keys=TRAIN_KEYS + _model_keys(cfg, key) + lora_keys)


def router_dtype(strategy: str, release: str | None, model_path: object = None) -> str | None:
    """The `skyrl` package from 0.3.0 computes a Megatron-trained MoE router's logits in fp32
    (megatron_config.moe_router_dtype, whose other values `rlcfg run` refuses); before, SkyRL left them in the
    dtype of Megatron-Bridge's provider: the model's, or fp32 for DeepSeek-V3 (its provider sets it). The FSDP
    strategies run the Hugging Face model's own router."""
    if strategy != "megatron":
        return None
    return "fp32" if release in PACKAGE_FROM_030 or run_limits.routing_correction_family(model_path) else None


# megatron-core's moe_router_bias_update_rate, which Megatron-Bridge's DeepSeek-V3 and Moonlight providers keep.
BRIDGE_EXPERT_BIAS_RATE = 1e-3


def expert_bias(strategy: str, section: Any, release: str | None) -> float | str:
    """How SkyRL's Megatron setup treats DeepSeek-V3's routing correction: Megatron-Bridge's provider routes with
    the checkpoint's and moves it after each optimizer step (SkyRL sets the load-balancing type to `none`, so no
    auxiliary loss runs); transformer_config_kwargs, which SkyRL applies last, may turn it off or change the rate.
    The FSDP strategies run the Hugging Face model, which holds it fixed; earlier releases set it up otherwise
    (derived.ROUTING_UNREAD)."""
    if strategy != "megatron" or getattr(section, "megatron_config", None) is None:  # no critic on Megatron
        return "unmapped"
    if not routing_correction_read(release):
        return "unmapped"
    kwargs = transformer_kwargs(section)
    if kwargs.get("moe_router_enable_expert_bias") is False:
        return "off"
    return float(kwargs.get("moe_router_bias_update_rate", BRIDGE_EXPERT_BIAS_RATE))


def _lora(cfg: Any, key: str, release: str | None) -> tuple[Lora | None, tuple[tuple[str, str], ...]]:
    """skyrl-train's LoRA (rank > 0): PEFT's LoraConfig of the model's rank, alpha, dropout, target and excluded
    modules and init method (HFModelWrapper; the critic's get_llm_for_sequence_regression passes no init method,
    so PEFT's default, kaiming, holds there)."""
    lora = getattr(cfg.trainer, key).model.lora
    if lora.rank <= 0:
        return None, ()
    targets_key, excluded_key = lora_module_keys(key, release)
    targets, excluded = lora_modules(cfg, key, release)
    base = f"trainer.{key}.model.lora"
    keys = (("lora.rank", f"{base}.rank"), ("lora.alpha", f"{base}.alpha"), ("lora.dropout", f"{base}.dropout"),
            ("lora.target_modules", targets_key), ("lora.exclude_modules", excluded_key))
    init = lora.init_method if key == "policy" else "kaiming"
    if key == "policy":
        keys += (("lora.init", f"{base}.init_method"),)
    return Lora(rank=lora.rank, alpha=lora.alpha, dropout=lora.dropout,
                target_modules=_modules(targets) or "all-linear", exclude_modules=_modules(excluded), init=init), keys


def _modules(value: str | list[str] | None) -> str | tuple[str, ...] | None:
    return tuple(value) if isinstance(value, list) else value


def overlong_penalty(cfg: Any, entry_runs: str | None = None) -> dict[str, Any]:
    """DAPO's soft overlong punishment of SkyRL's DAPO entrypoints (DAPOTrainer.postprocess_generator_output): a
    response longer than max_generate_length − the buffer tokens loses its excess over that, divided by the buffer,
    × the penalty factor; a buffer of 0 or less punishes nothing. Where the trainer's buffer ends at the context
    limit (DAPO_CONTEXT_BUFFER), the window starts max_input_length − the prompt's tokens later (a prompt is never
    longer than max_input_length there, so the window never passes that limit, where the trainer zeroes the
    reward). Empty without the entrypoint."""
    found = overlong_buffer(cfg)
    if found is None or found[0] <= 0:
        return {}
    room = cfg.generator.max_input_length if entry_runs == DAPO_CONTEXT_BUFFER else None
    return {"overlong_penalty_length": cfg.generator.sampling_params.max_generate_length - found[0],
            "overlong_penalty_factor": found[1], "overlong_penalty_prompt_room": room}


def training_backend(strategy: str, release: str | None) -> str:
    """rlcfg's name for `trainer.strategy`: from skyrl 0.3.0 the package's `fsdp` is FSDP2 (its validate_cfg renames a
    written `fsdp2` to `fsdp`); before, `fsdp` was FSDP1."""
    return "fsdp2" if strategy == "fsdp" and release in PACKAGE_FROM_030 else strategy


def _actor(cfg: Any, release: str | None) -> Role:
    return _trained(cfg, "actor", "policy", release)


def _reference(cfg: Any, release: str | None) -> Role:
    t = cfg.trainer
    return Role(name="reference", backend=training_backend(t.strategy, release), resources=_resources(cfg, "ref"),
                model=Model(path=t.ref.model.path or t.policy.model.path, dtype=_dtype(cfg), trust_remote_code=True),
                parallelism=_parallelism(cfg, "ref"),
                router_dtype=router_dtype(t.strategy, release, t.ref.model.path or t.policy.model.path),
                expert_bias=expert_bias(t.strategy, t.ref, release),
                offload=Offload(params=t.placement.colocate_all,
                                cpu_offload_during_step=_cpu_offload_in_step(cfg, t.ref)),
                forward_micro_batch_size=t.micro_forward_batch_size_per_gpu, sequence_packing=t.use_sample_packing,
                section="trainer.ref", keys=FORWARD_KEYS + _model_keys(cfg, "ref"))


def _critic(cfg: Any, release: str | None) -> Role:
    return _trained(cfg, "critic", "critic", release)


def _reward(cfg: Any, release: str | None) -> Role:
    t = cfg.trainer
    if reward_model_in_use(cfg):
        # skyrl-train of mid-2025 stops with "reward models are not supported yet" when this path is set, and
        # later releases removed the key; the role says what the config asks for.
        return Role(name="reward", backend=training_backend(t.strategy, release), resources=_resources(cfg, "reward"),
                    model=Model(path=t.reward.model.path, dtype=_dtype(cfg), trust_remote_code=True),
                    parallelism=Parallelism(sp=t.reward.sequence_parallel_size),
                    offload=Offload(params=t.placement.colocate_all,
                                    cpu_offload_during_step=_cpu_offload_in_step(cfg, t.reward)),
                    forward_micro_batch_size=t.micro_forward_batch_size_per_gpu, section="trainer.reward",
                    keys=FORWARD_KEYS + _model_keys(cfg, "reward"))
    # The environment (environment.env_class) scores each trajectory inside the generator's process.
    return Role(name="reward", backend="rule", resources=Resources(gpus=0), section="environment")


def _engine_args(cfg: Any) -> dict[str, Any]:
    g = cfg.generator
    dp = g.inference_engine_data_parallel_size
    # A vLLM engine with internal DP d is d replicas of TP × PP GPUs, each with a scheduler of its own (SkyRL
    # starts one actor per DP rank); rlcfg counts the replicas.
    engine: dict[str, Any] = {"engines": g.num_inference_engines * dp}
    if not g.run_engines_locally:
        # Remote servers were started with their own settings; SkyRL only sends them requests and weights.
        return engine
    engine["seed"] = cfg.trainer.seed
    engine["max_num_seqs"] = g.max_num_seqs
    engine["max_num_batched_tokens"] = g.max_num_batched_tokens
    engine["enable_prefix_caching"] = g.enable_prefix_caching
    if g.backend == "vllm":
        engine["gpu_memory_utilization"] = g.gpu_memory_utilization
        engine["enforce_eager"] = g.enforce_eager
        engine["enable_chunked_prefill"] = g.enable_chunked_prefill
        rope = g.rope_scaling or {}
        if rope.get("factor") and rope.get("original_max_position_embeddings"):
            engine["max_model_len"] = int(rope["factor"] * rope["original_max_position_embeddings"])
        names = VLLM_KWARGS
    else:
        # SkyRL starts SGLang with mem_fraction_static = gpu_memory_utilization, max_running_requests =
        # max_num_seqs, max_prefill_tokens = max_num_batched_tokens, the radix cache as prefix caching, and the
        # fa3 attention backend; it has no eager switch or chunked-prefill flag of its own.
        engine["mem_fraction_static"] = g.gpu_memory_utilization
        engine["attention_backend"] = "fa3"
        names = SGLANG_KWARGS
    # engine_init_kwargs are spread last into the engine's constructor, so they win.
    for key, value in (g.engine_init_kwargs or {}).items():
        if key in names:
            engine[names[key]] = value
    return engine


def _rollout(cfg: Any) -> Role:
    g, t = cfg.generator, cfg.trainer
    # Remote engines run outside this job's Ray cluster and take none of its GPUs.
    gpus = rollout_gpus(cfg) if g.run_engines_locally else 0
    return Role(name="rollout", backend=g.backend, resources=Resources(gpus=gpus),
                model=Model(path=t.policy.model.path, dtype=g.model_dtype, trust_remote_code=True),
                parallelism=Parallelism(tp=g.inference_engine_tensor_parallel_size,
                                        pp=g.inference_engine_pipeline_parallel_size,
                                        ep=g.inference_engine_expert_parallel_size),
                # With colocate_all the engines sleep while the models train (vLLM sleep level 2, SGLang's memory
                # saver), dropping their weights and KV cache.
                offload=Offload(params=t.placement.colocate_all and g.run_engines_locally),
                engine=tuple(sorted(_engine_args(cfg).items())), section="generator",
                keys=(("backend", "generator.backend"),
                      ("parallelism.tp", "generator.inference_engine_tensor_parallel_size"),
                      ("parallelism.pp", "generator.inference_engine_pipeline_parallel_size")))


def _colocation(cfg: Any, roles: list[Role]) -> tuple[tuple[str, ...], ...]:
    p = cfg.trainer.placement
    on_gpus = {r.name for r in roles if r.resources.gpus > 0}
    if p.colocate_all:
        group = tuple(r.name for r in roles if r.name in on_gpus)
        return (group,) if len(group) > 1 else ()
    groups = []
    if p.colocate_policy_ref and {"actor", "reference"} <= on_gpus:
        groups.append(("actor", "reference"))
    if p.colocate_critic_reward and {"critic", "reward"} <= on_gpus:
        groups.append(("critic", "reward"))
    return tuple(groups)


# ---- algorithm, sampling, schedule --------------------------------------------------------------------------


def _kl(cfg: Any, entry_runs: str | None) -> KL:
    a = cfg.trainer.algorithm
    estimator = kl_estimator(cfg)
    # kl_ctrl drives the reward-side coefficient only (RayPPOTrainer.apply_reward_kl_penalty); it starts at
    # kl_loss_coef; the driver carries it from step to step (the adaptive controller moves it after each step).
    # The one-step off-policy trainer never builds the controller (RayPPOTrainer.train does), so its coefficient
    # stays kl_loss_coef.
    c = a.kl_ctrl
    kind = "fixed" if entry_runs == ONE_STEP_ASYNC else c.type
    controller = KLController(kind=kind, target=c.kl_target, horizon=c.horizon)
    if a.use_kl_loss:
        # The worker adds kl_loss_coef × KL to the policy loss (PolicyWorker._forward_backward_micro). Every release
        # rlcfg claims computes that KL under torch.no_grad (ppo_utils.compute_approx_kl, SkyRL issue #1340, fixed
        # after skyrl-train's last commit), so it moves no gradient there; rlcfg runs the intended, fixed meaning.
        return KL(placement="loss", coef=a.kl_loss_coef, estimator=estimator)
    if a.use_kl_in_reward and entry_runs in DISTILLATION_RUNS:
        # The distillation example's apply_reward_kl_penalty: each token's reward is −(π_old − π_ref), the teacher's
        # log-prob less the policy's (k1 at coefficient 1, no controller), and the environment's rewards are dropped.
        return KL(placement="reward", coef=1.0, estimator="k1", penalty_only=True)
    if a.use_kl_in_reward:
        # rewards − coef × KL per token, before the estimator (verl's "sequence" meaning for GRPO/RLOO, which sum the
        # token rewards per sequence; per token for REINFORCE++ and GAE).
        return KL(placement="reward", coef=a.kl_loss_coef, estimator=estimator, controller=controller,
                  reward_mode="sequence")
    return KL(placement="none", coef=0.0, estimator=estimator)


def _clip_range(cfg: Any, kind: str) -> tuple[float, float]:
    a = cfg.trainer.algorithm
    # CISPO clips its importance weights with cispo.cispo_eps_clip_low/high (compute_policy_loss_cispo); every
    # other loss with eps_clip_low/high.
    cispo = (a.cispo.cispo_eps_clip_low, a.cispo.cispo_eps_clip_high)
    return cispo if kind == "cispo" else (a.eps_clip_low, a.eps_clip_high)


def _tis(cfg: Any, kind: str) -> tuple[float | None, str]:
    """Truncated importance sampling (cap, level). use_tis is token-level TIS with tis_imp_ratio_cap (up to v0.3.0
    inside ppo_policy_loss; from v0.4.0 validate_cfg rewrites it into off_policy_correction's token TIS with that
    cap). off_policy_correction (compute_tis_ratio) caps the token or the sequence ratio. Only the losses that call
    apply_off_policy_correction use it."""
    a = cfg.trainer.algorithm
    oc = a.off_policy_correction
    legacy_cap = a.tis_imp_ratio_cap
    caps = {"token": oc.token_tis_ratio_clip_high, "sequence": oc.sequence_tis_ratio_clip_high}
    if kind not in OFF_POLICY_CORRECTED:
        return None, "token"
    if a.use_tis:
        return legacy_cap, "token"
    if oc.tis_ratio_type is not None:
        return caps[oc.tis_ratio_type], oc.tis_ratio_type
    return None, "token"


def _policy_options(cfg: Any, kind: str) -> PolicyOptions:
    a = cfg.trainer.algorithm
    cap, level = _tis(cfg, kind)
    # The knobs of every loss are filled whatever the kind; each loss reads its own (algorithms.policy_loss).
    # kl_cov.kl_cov_frac is a fraction of the tokens, like rlcfg's kl_cov_ratio (SkyRL's default 0.2 is 20 %).
    return PolicyOptions(sapo_tau_pos=a.sapo.tau_pos, sapo_tau_neg=a.sapo.tau_neg,
                         clip_cov_ratio=a.clip_cov.clip_ratio, clip_cov_lb=a.clip_cov.clip_cov_lb,
                         clip_cov_ub=a.clip_cov.clip_cov_ub, kl_cov_ratio=a.kl_cov.kl_cov_frac,
                         kl_cov_coef=a.kl_cov.ppo_kl_coef, tis_cap=cap, tis_level=level, **_sequence_mask(cfg, kind))


def _sequence_mask(cfg: Any, kind: str) -> dict[str, Any]:
    """off_policy_correction's sequence mask (compute_sequence_mask), for the losses that apply the correction."""
    oc = cfg.trainer.algorithm.off_policy_correction
    if oc.sequence_mask_metric is None or kind not in OFF_POLICY_CORRECTED:
        return {}
    low, high = ((oc.geo_mask_low, oc.geo_mask_high) if oc.sequence_mask_metric == "geometric"
                 else (oc.product_mask_low, oc.product_mask_high))
    return {"sequence_mask": oc.sequence_mask_metric, "sequence_mask_low": low, "sequence_mask_high": high}


def _filters(cfg: Any, entry_runs: str | None) -> FilterSpec:
    """zero_variance_filter (trainer_utils.zero_variance_filter: groups of more than one sample whose rewards have
    zero std) and dynamic sampling (handle_dynamic_sampling: `filter` or `replace`, at most max_sample_batches
    draws, -1 without limit, then a RuntimeError, as RayPPOTrainer.handle_dynamic_sampling). Without dynamic
    sampling the zero-variance groups stay in the batch with their loss masked (trainer.py zeroes their
    loss_masks): FilterSpec.failed "mask"."""
    a = cfg.trainer.algorithm
    d = a.dynamic_sampling
    limit = d.max_sample_batches
    dynamic = dynamic_sampling(cfg, entry_runs)
    return FilterSpec(zero_variance=a.zero_variance_filter or dynamic is not None, zero_variance_tol=0.0,
                      dynamic=dynamic, max_draws=None if limit <= 0 else limit, min_replace_ratio=d.min_replace_ratio,
                      on_exhausted="error", failed="mask")


def dynamic_sampling(cfg: Any, entry_runs: str | None) -> str | None:
    """The dynamic sampling that runs: none under the one-step off-policy trainer, whose training step never calls
    handle_dynamic_sampling."""
    return None if entry_runs == ONE_STEP_ASYNC else cfg.trainer.algorithm.dynamic_sampling.type


def _algorithm(cfg: Any, release: str | None, entry_runs: str | None) -> Algorithm:
    a, g = cfg.trainer.algorithm, cfg.generator
    loss = policy_loss(cfg)[0]
    kind = POLICY_LOSSES.get(loss, "regular")
    clip_low, clip_high = _clip_range(cfg, kind)
    entropy_coef = a.entropy_loss_coef
    advantage, options, gamma = ADVANTAGES.get(a.advantage_estimator, "grpo"), AdvantageOptions(), a.gamma
    registered = entry_estimator(entry_runs)
    if a.advantage_estimator == registered == "no_op":
        advantage = "token_reward"  # the on-policy distillation example's: the token rewards as they are
    elif a.advantage_estimator == registered:
        # The custom-estimator example's simple_baseline: the score less its batch mean on every token is
        # REINFORCE++'s return (the score on the last token, undiscounted) of the batch-centred score, unwhitened.
        advantage, options, gamma = "reinforce++", AdvantageOptions(whiten=False, reward_norm_mean="batch"), 1.0
    aggregation = LOSS_AGGREGATIONS.get(a.loss_reduction, "seq-mean-token-sum")
    length_norm = effective_max_seq_len(cfg) if a.loss_reduction == "seq_mean_token_sum_norm" else None
    if loss == entry_policy_loss(entry_runs):
        # skyrl-train 0.3.0's distillation example registers importance_sampling itself: −r·A reduced as
        # seq_mean_token_sum_norm (over algorithm.max_seq_len, which validate_cfg derives) whatever loss_reduction says.
        aggregation, length_norm = "seq-mean-token-sum", effective_max_seq_len(cfg)
    return Algorithm(
        # GRPO: (score − group mean) / (unbiased group std + 1e-6) (compute_grpo_outcome_advantage); GAE and
        # REINFORCE++ are always whitened with the masked, unbiased variance (masked_whiten).
        advantage=advantage, advantage_options=options, group_size=g.n_samples_per_prompt,
        normalize_advantage_std=a.grpo_norm_by_std, gamma=gamma, lam=a.lambd, policy_loss=kind,
        clip_low=clip_low, clip_high=clip_high, clip_ratio_c=a.clip_ratio_c,
        loss_aggregation=aggregation, kl=_kl(cfg, entry_runs),
        loss_normalization=loss_normalization(a.loss_reduction, release), kl_loss_aggregation="seq-mean-token-mean",
        loss_length_norm=length_norm,
        # reduce_loss (skyrl-train: .mean() over a micro-batch's rows) and the package's mini-batch scaling
        # (batch_size) count the rows that the filters masked out of the loss.
        count_masked_rows=True,
        entropy_aggregation="token-mean",
        value_aggregation="seq-mean-token-mean",
        entropy_coef=entropy_coef if a.use_entropy_loss else 0.0,
        value_clip=a.value_clip if critic_runs(cfg) else None, ppo_epochs=cfg.trainer.update_epochs_per_batch,
        # zero_reward_on_non_stop: a response that did not stop on its own scores 0 (it stays in the loss);
        # apply_overlong_filtering: such a response leaves the loss.
        reward=RewardShaping(zero_truncated=g.zero_reward_on_non_stop, **overlong_penalty(cfg, entry_runs)),
        mask_truncated=g.apply_overlong_filtering,
        policy_options=_policy_options(cfg, kind), filters=_filters(cfg, entry_runs),
        dynamic_sampling=dynamic_sampling(cfg, entry_runs) is not None,
        # advantage_batch_normalize (normalize_advantages_dict) is refused: its mean runs over padding too.
        batch_normalize_advantage=False,
    )


def _sampling(params: Any, n: int) -> Sampling:
    # repetition_penalty goes to vLLM's / SGLang's sampling params unchanged (skyrl_train inference_engines).
    return Sampling(max_new_tokens=params.max_generate_length, temperature=params.temperature, top_p=params.top_p,
                    top_k=params.top_k, min_p=params.min_p, n=n, stop=tuple(params.stop or ()),
                    repetition_penalty=params.repetition_penalty)


def _schedule(cfg: Any, entry_runs: str | None = None) -> Schedule:
    """The batch schedule. Under the fully-asynchronous entrypoint (FullyAsyncRayPPOTrainer) a group scheduled while
    step i trains is trained at a step ≤ i + max_staleness_steps (its _AsyncStalenessManager admits groups while
    (max_staleness_steps + current step) × mini-batch exceeds those accepted or running), and at most
    num_parallel_generation_workers groups (prompts) generate at once. Under the one-step off-policy entrypoint
    (AsyncRayPPOTrainer) rollouts run one update behind within each epoch."""
    t, g = cfg.trainer, cfg.generator
    n = g.n_samples_per_prompt
    prompts = prompts_kept(cfg)
    dp = max(dp_size(cfg, "policy"), 1)
    evaluates = t.eval_interval > 0 and bool(cfg.data.val_data)
    # total_steps is len(dataloader) × epochs: it depends on the dataset's length, known only at run time.
    # SkyRL also evaluates after the last step whatever the interval.
    # The critic steps over mini-batches of critic_mini_batch_size prompts' samples (trainer.train_critic_and_policy).
    critic_mini = t.critic_mini_batch_size * n if critic_trained(cfg) and t.critic_mini_batch_size < t.train_batch_size \
        else None
    if entry_runs == ONE_STEP_ASYNC:
        # AsyncRayPPOTrainer: step k+1's rollouts generate while step k trains, under the weights step k started
        # from; each epoch starts a new generator (its first step waits for the last update of the epoch before).
        running_ahead = {"max_staleness": 1, "ahead_across_epochs": False}
    elif entry_runs == "fully_async":
        running_ahead = {"max_staleness": t.fully_async.max_staleness_steps,
                         "rollout_concurrency": t.fully_async.num_parallel_generation_workers}
    else:
        running_ahead = {}
    return Schedule(prompts_per_step=prompts, samples_per_step=prompts * n,
                    samples_per_optimizer_step=t.policy_mini_batch_size * n // dp * dp, total_steps=None,
                    critic_samples_per_optimizer_step=critic_mini,
                    epochs=t.epochs, eval_interval=t.eval_interval if evaluates else None,
                    eval_before_train=evaluates and t.eval_before_train, **running_ahead)


def _checkpointing(cfg: Any) -> Checkpointing:
    t = cfg.trainer
    resume = {None: "none", "none": "none", "latest": "latest"}.get(t.resume_mode, t.resume_path or "none")
    # ckpt_interval -1 saves no checkpoint at all, not even at the end; the Experiment's None (only at the end)
    # is the nearest it can say.
    return Checkpointing(directory=t.ckpt_path, interval=t.ckpt_interval if t.ckpt_interval > 0 else None,
                         keep_last=t.max_ckpts_to_keep if t.max_ckpts_to_keep > 0 else None, resume=resume,
                         save_hf=t.hf_save_interval > 0)


def _logging(cfg: Any) -> Logging:
    t = cfg.trainer
    # SkyRL writes no log directory of its own; mlflow has no rlcfg backend and leaves the console.
    chosen = loggers(cfg)
    extra = tuple(name for name in ("wandb", "tensorboard") if name in chosen)
    return Logging(directory=None, project=t.project_name, run_name=t.run_name, backends=("jsonl", "console") + extra)


def _reward_settings(cfg: Any) -> tuple[tuple[str, Any], ...]:
    """The LLM-as-a-judge example's judge: its model and OpenAI-compatible endpoint."""
    if cfg.environment.env_class != "llm_as_a_judge":
        return ()
    judge = cfg.environment.skyrl_gym.llm_as_a_judge
    return (("model", judge.model), ("base_url", judge.base_url))


def _episodes(cfg: Any, release: str | None) -> Episodes | None:
    """SkyRLGymGenerator.agent_loop's settings, for an environment rlcfg steps through whole episodes. The generator
    hands the environment generator.max_turns as its own turn limit (env_extras["max_turns"])."""
    g, env = cfg.generator, cfg.environment.env_class
    if env not in EPISODE_ENVIRONMENTS:
        return None
    own = getattr(cfg.environment.skyrl_gym, env)
    return Episodes(environment=env, max_turns=g.max_turns, max_input_length=g.max_input_length,
                    observations="chat" if g.use_conversation_multi_turn else "inline",
                    eos_after_stop=g.append_eos_token_after_stop_str_in_multi_turn,
                    final_observation=release in FINAL_OBSERVATION_KEPT,
                    settings=tuple((key, getattr(own, key)) for key in EPISODE_ENVIRONMENTS[env][1]))


def lower(cfg: Any, release: str | None = None, entry_runs: str | None = None) -> Experiment:
    t, g = cfg.trainer, cfg.generator
    roles = [_actor(cfg, release), _rollout(cfg)]
    if reference_runs(cfg):
        roles.append(_reference(cfg, release))
    if critic_runs(cfg):
        roles.append(_critic(cfg, release))
    roles.append(_reward(cfg, release))
    data = Data(train_files=dataset_files(cfg.data.train_data), eval_files=dataset_files(cfg.data.val_data),
                prompt_key="prompt",
                # SkyRL's datasets carry the answer where the environment reads it.
                answer_key=ENVIRONMENT_ANSWER_KEYS.get(cfg.environment.env_class, "reward_spec.ground_truth"),
                answer_fields=EPISODE_ENVIRONMENTS.get(cfg.environment.env_class, ((),))[0],
                # PromptDataset drops prompts longer than max_prompt_length (tokens, after the chat template).
                max_prompt_length=t.max_prompt_length, shuffle=True, seed=t.seed, apply_chat_template=True,
                chat_template_kwargs=tuple(sorted((g.chat_template_kwargs or {}).items())))
    return Experiment(
        name=t.run_name, dialect="skyrl", variant=training_backend(t.strategy, release), cluster=Cluster(),
        roles=tuple(roles),
        colocation=_colocation(cfg, roles), algorithm=_algorithm(cfg, release, entry_runs),
        sampling=_sampling(g.sampling_params, g.n_samples_per_prompt),
        eval_sampling=_sampling(g.eval_sampling_params, g.eval_n_samples_per_prompt), data=data,
        schedule=_schedule(cfg, entry_runs), checkpointing=_checkpointing(cfg), logging=_logging(cfg), seed=t.seed,
        # SkyRL-Gym's gsm8k and aime environments compare the final answer with the ground truth, text2sql scores
        # its episodes itself; `rlcfg run` refuses the environments it does not run.
        reward_function=ENVIRONMENT_REWARDS.get(cfg.environment.env_class, "math"), episodes=_episodes(cfg, release),
        reward_settings=_reward_settings(cfg),
    )


# skyrl-train's `trainer.strategy` calls torch's FSDP2 `fsdp2` (`fsdp` is FSDP1, which rlcfg also runs as FSDP2).
_BACKEND_NAMES = (("vllm", "vllm"), ("sglang", "sglang"), ("fsdp", "fsdp2"), ("megatron", "megatron"))


def spelling(role: Role) -> Spelling:
    return Spelling(backends=_BACKEND_NAMES)
