"""Small Experiments built in code, for plan tests that should not depend on any dialect."""

from __future__ import annotations

from typing import Any

from rlcfg.ir import (Algorithm, Cluster, Data, Experiment, Model, Offload, Optimizer, Parallelism, Resources, Role,
                      Sampling, Schedule)

QWEN7 = "/models/Qwen2.5-7B-Instruct"


def trainer(name: str = "actor", gpus: int = 8, backend: str = "fsdp", model: str = QWEN7, *, trains: bool = True,
            ids: tuple[int, ...] | None = None, offload: Offload | None = None, micro: int | None = 4,
            checkpointing: bool = True, packing_tokens: int | None = None, per_node: int | None = None,
            **parallel: Any) -> Role:
    return Role(name=name, backend=backend, resources=Resources(gpus=gpus, gpu_ids=ids, gpus_per_node=per_node),
                model=Model(path=model), parallelism=Parallelism(**parallel), offload=offload or Offload(),
                optimizer=Optimizer(lr=1e-6) if trains else None, micro_batch_size=micro if trains else None,
                forward_micro_batch_size=micro, gradient_checkpointing=checkpointing,
                sequence_packing=packing_tokens is not None, max_tokens_per_micro_batch=packing_tokens)


def rollout(gpus: int = 8, tp: int = 1, backend: str = "vllm", model: str = QWEN7, *, ids: tuple[int, ...] | None = None,
            sleep: bool = False, per_node: int | None = None, **engine: Any) -> Role:
    engine.setdefault("gpu_memory_utilization" if backend != "sglang" else "mem_fraction_static", 0.5)
    return Role(name="rollout", backend=backend, resources=Resources(gpus=gpus, gpu_ids=ids, gpus_per_node=per_node),
                model=Model(path=model), parallelism=Parallelism(tp=tp), offload=Offload(params=sleep),
                engine=tuple(sorted(engine.items())))


def reward_rule(cpus: int = 4) -> Role:
    return Role(name="reward", backend="rule", resources=Resources(gpus=0, cpus=cpus))


def experiment(*roles: Role, colocation: tuple[tuple[str, ...], ...] = (), nodes: int | None = None,
               gpus_per_node: int | None = None, prompts: int = 64, group: int = 8, global_batch: int = 128,
               prompt_len: int | None = 1024, response_len: int = 3072, steps: int | None = 10) -> Experiment:
    return Experiment(
        name="test", dialect="test", variant=None, cluster=Cluster(nodes=nodes, gpus_per_node=gpus_per_node),
        roles=tuple(roles), colocation=colocation, algorithm=Algorithm(group_size=group),
        sampling=Sampling(max_new_tokens=response_len, n=group), eval_sampling=None,
        data=Data(max_prompt_length=prompt_len),
        schedule=Schedule(prompts_per_step=prompts, samples_per_step=prompts * group,
                          samples_per_optimizer_step=global_batch, total_steps=steps))
