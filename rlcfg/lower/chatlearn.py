"""ChatLearn → Experiment.

ChatLearn's models map to rlcfg's roles: policy_trainer → actor, policy → rollout, ref_policy → reference,
reward → reward (rule-based, on CPUs). Its derivations are reproduced: FSDP shards over all of a model's GPUs
whatever `fsdp_size` says; the advantage group is the rollout's `num_inference_per_prompt`; one episode is one
training step of `sample_per_episode` samples; the response limit is `max_response_tokens_length` (ChatLearn main) or
`max_new_tokens` (1.2.0), and main's sequence limit is the prompt limit plus the response limit.
"""

from __future__ import annotations

from typing import Any

from rlcfg.ir import (KL, Algorithm, Checkpointing, Cluster, Data, Experiment, Logging, Model, Offload, Optimizer,
                      Parallelism, Resources, Role, Sampling, Schedule)
from rlcfg.schema.chatlearn import (FSDPOptions, MegatronOptions, colocation_groups, prompt_limit, response_limit,
                                    sequence_limit)

ROLE_OF_MODEL = {"policy_trainer": "actor", "policy": "rollout", "ref_policy": "reference", "reward": "reward"}


def _parallelism(model: Any) -> Parallelism:
    if isinstance(model, MegatronOptions):
        return Parallelism(tp=model.tensor_model_parallel_size, pp=model.pipeline_model_parallel_size,
                           cp=model.context_parallel_size, ep=model.expert_model_parallel_size,
                           etp=model.expert_tensor_parallel_size,
                           vpp=getattr(model, "virtual_pipeline_model_parallel_size", None),
                           sequence_parallel=model.sequence_parallel and model.tensor_model_parallel_size > 1)
    assert isinstance(model, FSDPOptions)
    return Parallelism(sp=model.ulysses_sequence_parallel_size, fsdp_shard=model.num_gpu)


def _dtype(model: Any) -> str:
    return "float32" if isinstance(model, MegatronOptions) and not model.bf16 else "bfloat16"


def lower(cfg: Any) -> Experiment:
    rt, models = cfg.runtime_args, cfg.models
    trainer, ref, policy, reward = models.policy_trainer, models.ref_policy, models.policy, models.reward
    train_backend = rt.train_backend
    group = policy.num_inference_per_prompt

    actor = Role(
        name="actor", backend=train_backend,
        resources=Resources(gpus=trainer.num_gpu),
        model=Model(path=trainer.load or "", dtype=_dtype(trainer),
                    tokenizer=getattr(trainer, "tokenizer_model", None)),
        parallelism=_parallelism(trainer),
        offload=Offload(params=trainer.free_gpu_memory.offload_weights,
                        optimizer=trainer.free_gpu_memory.offload_optimizer_states,
                        grads=trainer.free_gpu_memory.free_grad_buffers),
        optimizer=Optimizer(lr=trainer.optimizer.lr, weight_decay=trainer.optimizer.weight_decay,
                            betas=(trainer.optimizer.adam_beta1, trainer.optimizer.adam_beta2),
                            grad_clip=trainer.optimizer.clip_grad or None, min_lr=trainer.optimizer.min_lr),
        micro_batch_size=rt.train_micro_batch_size,
        forward_micro_batch_size=trainer.generation_batch_size,
        gradient_checkpointing=getattr(trainer, "gradient_checkpointing", False)
        or getattr(trainer, "recompute_granularity", None) is not None,
        sequence_packing=trainer.packing,
        max_tokens_per_micro_batch=trainer.max_token_in_packing if trainer.packing else None,
    )
    engine: dict[str, Any] = {
        "max_num_seqs": policy.generation_batch_size,
        "max_model_len": sequence_limit(cfg),
        "max_num_batched_tokens": policy.max_num_batched_tokens,
        "enforce_eager": policy.enforce_eager,
        "seed": policy.seed,
    }
    # ChatLearn hands the same share to either engine; SGLang calls it mem_fraction_static.
    memory_key = "gpu_memory_utilization" if rt.rollout_backend == "vllm" else "mem_fraction_static"
    engine[memory_key] = policy.gpu_memory_utilization
    rollout = Role(
        name="rollout", backend=rt.rollout_backend,
        resources=Resources(gpus=policy.num_gpu),
        model=Model(path=policy.load or "", dtype="bfloat16"),
        parallelism=Parallelism(tp=policy.tensor_model_parallel_size),
        offload=Offload(params=policy.free_gpu_memory.offload_weights),
        engine=tuple(sorted(engine.items())),
    )
    reference = Role(
        name="reference", backend=train_backend,
        resources=Resources(gpus=ref.num_gpu),
        model=Model(path=ref.load or "", dtype=_dtype(ref)),
        parallelism=_parallelism(ref),
        offload=Offload(params=ref.free_gpu_memory.offload_weights),
        forward_micro_batch_size=ref.generation_batch_size,
        sequence_packing=ref.packing,
        max_tokens_per_micro_batch=ref.max_token_in_packing if ref.packing else None,
    )
    reward_role = Role(name="reward", backend="rule", resources=Resources(gpus=reward.num_gpu, cpus=reward.num_cpu))

    kl_on = trainer.kl_coef > 0
    algorithm = Algorithm(
        advantage="grpo", group_size=group,
        policy_loss="gspo" if getattr(trainer, "use_group_sequence_policy", False) else "regular",
        clip_low=trainer.neg_clip_ratio, clip_high=trainer.pos_clip_ratio,
        kl=KL(placement="loss" if kl_on else "none", coef=trainer.kl_coef, estimator="k3"),
        entropy_coef=trainer.entropy_coef, ppo_epochs=rt.num_training_epoch,
    )
    sampling = Sampling(max_new_tokens=response_limit(cfg), temperature=policy.temperature, top_p=policy.top_p,
                        top_k=policy.top_k, n=group)
    eval_sampling = Sampling(max_new_tokens=response_limit(cfg), temperature=policy.eval_temperature,
                             top_p=policy.eval_top_p, top_k=policy.eval_top_k, n=1)
    data = Data(
        train_files=tuple(p.strip() for p in rt.data_path.split(",") if p.strip()),
        eval_files=tuple(p.strip() for p in (rt.eval_data_path or "").split(",") if p.strip()),
        max_prompt_length=prompt_limit(cfg), shuffle=rt.data_shuffle, seed=trainer.seed,
    )
    schedule = Schedule(
        prompts_per_step=rt.sample_per_episode // group, samples_per_step=rt.sample_per_episode,
        samples_per_optimizer_step=rt.train_global_batch_size, total_steps=rt.num_episode,
        eval_interval=rt.eval_episode_interval or None, eval_before_train=rt.enable_eval_before_training,
    )
    logs = rt.log_args_dict
    backends = ("jsonl", "console") + (("tensorboard",) if logs.enable_tensorboard else ()) + (
        ("wandb",) if logs.enable_wandb else ())
    colocation = tuple(
        tuple(ROLE_OF_MODEL[name] for name in g if name in ROLE_OF_MODEL) for g in colocation_groups(cfg) if len(g) > 1)
    return Experiment(
        name=rt.exp_name, dialect="chatlearn", variant=train_backend, cluster=Cluster(),
        roles=(actor, rollout, reference, reward_role), colocation=colocation,
        algorithm=algorithm, sampling=sampling, eval_sampling=eval_sampling, data=data, schedule=schedule,
        checkpointing=Checkpointing(directory=rt.output_dir, interval=rt.save_episode_interval,
                                    resume="latest" if rt.enable_resume_training else "none",
                                    save_hf=getattr(trainer, "save_hf", False)),
        logging=Logging(directory=logs.log_dir, project=logs.wandb_project, run_name=logs.wandb_name or rt.exp_name,
                        backends=backends),
        seed=trainer.seed,
    )
