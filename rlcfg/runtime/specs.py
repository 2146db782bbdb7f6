"""What the driver hands a worker to build its engines from: typed, with the Experiment's own values (an
ir.Optimizer as it is), so no worker or backend declares a default of its own. Plain frozen dataclasses: Ray ships
them to the workers as they are."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from rlcfg.ir import Episodes, Lora, Optimizer


@dataclass(frozen=True)
class TrainSpec:
    """One role's training (or frozen forward-only) engine on one rank (RunShell._train_spec)."""

    kind: str  # actor, critic, reference, sft or reward_model: what the engine computes
    model_path: str
    dtype: str
    device: str
    backend: Literal["fsdp", "megatron"]
    seed: int
    optimizer: Optimizer | None  # None: a frozen role
    total_optimizer_steps: int
    schedule_train_steps: int
    temperature: float  # log-probs are taken at the rollout's sampling temperature
    megatron: Any = None  # the role's MegatronSettings (backends.megatron.lower_role) on the megatron backend
    gradient_checkpointing: bool = False
    fsdp_shard: int | None = None
    cpu_offload: bool = False
    offload_params: bool = False
    offload_optimizer: bool = False
    sequence_packing: bool = False
    max_tokens_per_micro_batch: int | None = None
    budget_key: str | None = None  # the config key of max_tokens_per_micro_batch, for its messages
    disable_dropout: bool = False
    frozen_prefixes: tuple[str, ...] = ()
    lora: Lora | None = None
    sequence_parallel: int = 1  # Ulysses ranks that split each sample's columns (fsdp backend)


@dataclass(frozen=True)
class RolloutSpec:
    """One rollout engine (RolloutWorker, or the actor rank that holds it)."""

    model_path: str
    tokenizer: str
    device: str
    dtype: str
    backend: Literal["hf", "vllm", "sglang"] = "hf"
    max_num_seqs: int | None = None
    engine_args: dict[str, Any] | None = None  # vLLM's engine_args or SGLang's server_args
    # Multi-turn rollouts: the engine's worker runs the episodes (rlcfg.runtime.episodes), with the chat template
    # rendered as the prompts were.
    episodes: Episodes | None = None
    chat_template_kwargs: tuple[tuple[str, Any], ...] = ()
    reward_settings: tuple[tuple[str, Any], ...] = ()  # ir.Experiment.reward_settings
