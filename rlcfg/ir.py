"""The canonical Experiment: what every dialect lowers to, and all that plan/ and runtime/ ever read.

Plain frozen dataclasses of plain values, so an Experiment can be compared, hashed, printed as JSON and sent to a
Ray worker. Names are rlcfg's own, not any framework's: a dialect's lowering (rlcfg/lower/<dialect>.py) translates
its keys into these, reproducing the framework's derivations (a DP size computed from GPUs and parallel sizes,
a sequence length derived from prompt and response lengths, ...).

Roles: `actor` (the policy being trained), `rollout` (generation), `reference` (frozen policy for the KL term),
`critic` (value model, PPO), `reward` (a reward model, or rule-based reward workers on CPUs).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any, Literal

ROLE_NAMES = ("actor", "rollout", "reference", "critic", "reward")
TrainBackend = Literal["fsdp", "fsdp2", "megatron", "deepspeed"]
RolloutBackend = Literal["vllm", "sglang", "hf"]


@dataclass(frozen=True)
class Parallelism:
    """How one role splits over its GPUs. Megatron orders ranks tp-cp-ep-dp-pp; FSDP shards over `fsdp_shard`
    ranks and replicates across groups of that size (HSDP); rollout engines use tp (and pp) inside each engine."""

    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int | None = None  # expert tensor parallel; None follows tp
    vpp: int | None = None  # virtual pipeline stages per rank
    sp: int = 1  # Ulysses sequence parallel (FSDP backends)
    sequence_parallel: bool = False  # Megatron's sequence parallelism inside tp
    fsdp_shard: int | None = None  # FSDP sharding group size; None shards over the whole role


@dataclass(frozen=True)
class Model:
    path: str
    dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    tokenizer: str | None = None  # None: the model's own
    trust_remote_code: bool = False


@dataclass(frozen=True)
class Optimizer:
    lr: float
    name: Literal["adamw", "adam", "sgd"] = "adamw"
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    grad_clip: float | None = 1.0
    scheduler: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = 0
    min_lr: float = 0.0


@dataclass(frozen=True)
class Offload:
    """What a role moves off the GPU between its phases (colocation), and what FSDP keeps on CPU throughout."""

    params: bool = False
    optimizer: bool = False
    grads: bool = False
    cpu_offload_during_step: bool = False  # FSDP CPUOffload: parameters live on CPU even during compute


@dataclass(frozen=True)
class Resources:
    """What a role asks for. `gpus` is the total; `nodes`/`gpus_per_node` when the dialect pins them; `gpu_ids`
    when the dialect names exact global GPU ids (RLinf's component_placement, ROLL's device_mapping)."""

    gpus: int
    nodes: int | None = None
    gpus_per_node: int | None = None
    gpu_ids: tuple[int, ...] | None = None
    cpus: int = 0


@dataclass(frozen=True)
class Role:
    name: str  # one of ROLE_NAMES
    backend: str  # TrainBackend, RolloutBackend, or "rule" for rule-based rewards
    resources: Resources
    model: Model | None = None
    parallelism: Parallelism = field(default_factory=Parallelism)
    offload: Offload = field(default_factory=Offload)
    optimizer: Optimizer | None = None
    micro_batch_size: int | None = None  # samples per forward/backward on one DP rank (training)
    forward_micro_batch_size: int | None = None  # samples per forward pass (log-probs, values)
    gradient_checkpointing: bool = False
    sequence_packing: bool = False
    max_tokens_per_micro_batch: int | None = None  # with packing
    engine: tuple[tuple[str, Any], ...] = ()  # rollout engine settings in rlcfg's names (see ENGINE_KEYS)
    # The user's words for this role, so that plans and hints speak the dialect: the config section it comes from
    # (ChatLearn `policy_trainer`, ROLL `actor_train`), and for a setting of this Role (`micro_batch_size`,
    # `forward_micro_batch_size`, ...) the dotted key of the config that sets it.
    section: str | None = None
    keys: tuple[tuple[str, str], ...] = ()

    @property
    def trains(self) -> bool:
        return self.optimizer is not None

    def key_for(self, setting: str) -> str | None:
        """The config's dotted key that sets one of this Role's settings, where the lowering recorded it."""
        return dict(self.keys).get(setting)

    def engine_args(self) -> dict[str, Any]:
        return dict(self.engine)


# The rollout engine settings a lowering may fill (Role.engine), in rlcfg's names.
ENGINE_KEYS = (
    "gpu_memory_utilization",  # vLLM: share of GPU memory for weights + activations + KV cache
    "mem_fraction_static",  # SGLang: share of GPU memory for weights + KV cache pool
    "max_num_seqs", "max_model_len", "max_num_batched_tokens", "enforce_eager", "enable_prefix_caching",
    "enable_chunked_prefill", "block_size", "seed", "load_format", "attention_backend", "cuda_graph_bs",
    "engines",  # number of engine replicas when the dialect fixes it
)


@dataclass(frozen=True)
class KL:
    placement: Literal["none", "reward", "loss"] = "none"  # never both: a validated config chose one
    coef: float = 0.0
    estimator: Literal["k1", "k2", "k3", "abs"] = "k3"


@dataclass(frozen=True)
class RewardShaping:
    scale: float = 1.0
    bias: float = 0.0
    clip: float | None = None  # rewards clipped to [-clip, clip]
    overlong_penalty_length: int | None = None  # DAPO: responses longer than this are penalised
    overlong_penalty_factor: float = 1.0


@dataclass(frozen=True)
class Algorithm:
    advantage: Literal["grpo", "gae", "rloo", "reinforce++"] = "grpo"
    group_size: int = 1  # responses per prompt
    normalize_advantage_std: bool = True  # GRPO: divide by the group's std
    batch_normalize_advantage: bool = False
    gamma: float = 1.0
    lam: float = 1.0
    policy_loss: Literal["regular", "dual_clip", "gspo"] = "regular"
    clip_low: float = 0.2
    clip_high: float = 0.2
    clip_ratio_c: float = 3.0  # dual-clip bound
    loss_aggregation: Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"] = "token-mean"
    kl: KL = field(default_factory=KL)
    entropy_coef: float = 0.0
    value_clip: float | None = None
    ppo_epochs: int = 1  # passes over each step's samples
    reward: RewardShaping = field(default_factory=RewardShaping)
    dynamic_sampling: bool = False  # DAPO: drop groups whose rewards are all equal
    mask_truncated: bool = False  # drop responses cut at the length limit from the loss


@dataclass(frozen=True)
class Sampling:
    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    n: int = 1
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class Data:
    train_files: tuple[str, ...] = ()
    eval_files: tuple[str, ...] = ()
    prompt_key: str = "prompt"
    answer_key: str | None = None
    max_prompt_length: int | None = None
    shuffle: bool = True
    seed: int = 42
    apply_chat_template: bool = True


@dataclass(frozen=True)
class Schedule:
    """The batch algebra of one training step, in samples (a sample is one response)."""

    prompts_per_step: int
    samples_per_step: int  # prompts × group size
    samples_per_optimizer_step: int  # the global mini-batch
    total_steps: int | None = None
    epochs: int | None = None  # passes over the dataset, when the dialect counts that way
    eval_interval: int | None = None  # steps; None disables
    eval_before_train: bool = False


@dataclass(frozen=True)
class Checkpointing:
    directory: str | None = None
    interval: int | None = None  # steps; None: only at the end
    keep_last: int | None = None  # None keeps all
    resume: str = "latest"  # "latest", "none", or a checkpoint path
    save_hf: bool = False


@dataclass(frozen=True)
class Logging:
    directory: str | None = None
    project: str | None = None
    run_name: str | None = None
    backends: tuple[str, ...] = ("jsonl",)  # jsonl, console, tensorboard, wandb


@dataclass(frozen=True)
class Cluster:
    """What the config itself says about the machines; None where it is silent (plan flags fill it)."""

    nodes: int | None = None
    gpus_per_node: int | None = None


@dataclass(frozen=True)
class Experiment:
    name: str
    dialect: str
    variant: str | None
    cluster: Cluster
    roles: tuple[Role, ...]
    colocation: tuple[tuple[str, ...], ...]  # groups of role names that share the same GPUs
    algorithm: Algorithm
    sampling: Sampling
    eval_sampling: Sampling | None
    data: Data
    schedule: Schedule
    checkpointing: Checkpointing = field(default_factory=Checkpointing)
    logging: Logging = field(default_factory=Logging)
    seed: int = 42
    # How responses are scored when no reward model is configured: "math" (the final answer checked with
    # math-verify), "exact_match" (the answer string), or a built-in task's verifier such as "arithmetic".
    reward_function: str = "math"
    # What the experiment trains. "rl": the GRPO/PPO loop. "sft" (supervised fine-tuning on the train data) and
    # "reward_model" (a scalar-head model trained on preference pairs) have no rollout, group size 1 and one
    # optimizer step per batch; a runtime that only runs the RL loop must refuse them rather than run RL.
    kind: Literal["rl", "sft", "reward_model"] = "rl"

    def role(self, name: str) -> Role | None:
        return next((r for r in self.roles if r.name == name), None)


def to_json(value: Any) -> Any:
    """A plain JSON-able value for any IR object (tuples become lists)."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    return value


__all__ = [name for name in dir() if not name.startswith("_") and name not in ("annotations", "asdict")]
