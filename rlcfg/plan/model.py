"""The ExecutionPlan: where each role's ranks sit, how a step's batch splits, and whether it fits in memory.

A plain serialisable value (what `rlcfg plan` prints as text or JSON), built by rlcfg.plan.build_plan from an
Experiment and the facts about the cluster, and the only thing besides the Experiment that runtime/ reads.
GPU ids are global: node × gpus_per_node + local index.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlcfg.ir import Experiment


@dataclass(frozen=True)
class ClusterShape:
    nodes: int
    gpus_per_node: int
    gpu_name: str | None = None  # e.g. "h100"
    gpu_memory_bytes: int | None = None

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def node_of(self, gpu: int) -> int:
        return gpu // self.gpus_per_node

    def local_of(self, gpu: int) -> int:
        return gpu % self.gpus_per_node


@dataclass(frozen=True, slots=True)  # slots: a plan holds one per rank, thousands of them
class RankSlot:
    rank: int
    gpu: int  # global GPU id
    coords: tuple[tuple[str, int], ...]  # training: tp, cp, ep, dp, pp; rollout: engine, tp


@dataclass(frozen=True)
class PlacementGroup:
    """GPUs shared by one colocation group of roles: one Ray placement group, one bundle per GPU."""

    index: int
    roles: tuple[str, ...]
    gpus: tuple[int, ...]


@dataclass(frozen=True)
class RolePlacement:
    role: str
    group: int  # index into ExecutionPlan.groups
    gpus: tuple[int, ...]
    ranks: tuple[RankSlot, ...]
    dp: int  # data-parallel size (training) or number of engines (rollout)
    cpus: int = 0  # CPU-only roles (rule-based rewards)


@dataclass(frozen=True)
class BatchPlan:
    prompts_per_step: int
    group_size: int
    samples_per_step: int
    samples_per_optimizer_step: int
    optimizer_steps_per_step: int  # × ppo_epochs passes
    ppo_epochs: int
    trained_role: str | None  # whose ranks split the batch: the actor, else the critic (reward-model training)
    dp: int  # that role's data-parallel size
    samples_per_rank: int  # of one optimizer step, on one of those DP ranks
    micro_batch_size: int
    grad_accumulation: int  # micro-batches per optimizer step on one rank
    total_steps: int | None

    @property
    def actor_dp(self) -> int:
        """The trained role's DP size under its first name, from when only an actor could be trained."""
        return self.dp


@dataclass(frozen=True)
class Architecture:
    """The figures of a model that memory depends on, from a config.json or the built-in table."""

    name: str  # the table entry or the config's model_type
    source: str  # "config.json at <path>", "--model-config <file>", "built-in table"
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied_embeddings: bool
    params: int  # total parameter count, computed from the figures above
    qkv_bias: bool = False
    qk_norm: bool = False
    experts: int = 0  # MoE: routed experts per layer (0: dense)
    expert_intermediate: int = 0
    shared_expert_intermediate: int = 0
    kv_lora_rank: int | None = None  # MLA: the compressed KV latent replaces per-head K and V
    qk_rope_head_dim: int = 0
    model_type: str | None = None  # the Hugging Face family (config.json's model_type), where known


@dataclass(frozen=True)
class MemoryTerm:
    name: str  # "parameters", "gradients", "optimizer states", "activations", "logits", "kv cache", ...
    bytes: int


@dataclass(frozen=True)
class RoleMemory:
    role: str
    per_gpu_bytes: int  # the role's own peak on one of its GPUs, in its busiest phase
    terms: tuple[MemoryTerm, ...]
    offloaded_between_phases: bool = False
    phase: str = ""  # what the peak is: "train step", "log-prob forward", "generation"
    resident_bytes: int = 0  # what it keeps on the GPU while a colocated role has its phase
    model: str | None = None  # Architecture.name
    kv_cache_tokens: int | None = None  # rollout: tokens the KV pool holds on one engine
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class GpuVerdict:
    gpus: tuple[int, ...]  # GPUs with this same load
    roles: tuple[str, ...]
    peak_bytes: int
    capacity_bytes: int
    fits: bool  # with every sample at its longest
    biggest: str  # "<role>: <term>"
    advice: str | None = None
    fits_typical: bool | None = None  # at a typical length; None where the worst case fits (so this does too)


@dataclass(frozen=True)
class MemoryPlan:
    model_source: str  # where the architecture came from: a config.json path, a table entry, --model-config
    roles: tuple[RoleMemory, ...]
    verdicts: tuple[GpuVerdict, ...]
    architectures: tuple[Architecture, ...] = ()
    gpu_name: str | None = None
    capacity_bytes: int | None = None
    notes: tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        return all(v.fits for v in self.verdicts)

    @property
    def fits_typical(self) -> bool:
        return all(v.fits or v.fits_typical for v in self.verdicts)


@dataclass(frozen=True)
class ExecutionPlan:
    experiment: Experiment
    cluster: ClusterShape
    groups: tuple[PlacementGroup, ...]
    placements: tuple[RolePlacement, ...]
    batch: BatchPlan
    memory: MemoryPlan | None = None
    notes: tuple[str, ...] = ()  # assumptions the plan made (a cluster size nobody gave, ...)

    def placement(self, role: str) -> RolePlacement | None:
        return next((p for p in self.placements if p.role == role), None)
