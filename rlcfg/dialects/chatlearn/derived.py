"""What ChatLearn computes from a config (data-parallel sizes, colocation groups, the length limits of each release):
read by the rules, the lowering and the dialect alike, declared here once.
"""

from __future__ import annotations

from math import gcd
from typing import Any

from rlcfg.dialects.chatlearn.models import FSDPOptions

def trainer_dp(cfg: Any) -> int:
    """Data-parallel size of the trainer, as ChatLearn derives it (num_replica × replica_dp_size): GPUs / Ulysses SP
    for FSDP, GPUs / (TP·CP·PP) for Megatron."""
    return _total_dp(cfg.models.policy_trainer)


def ref_dp(cfg: Any) -> int:
    """Data-parallel size of the reference model."""
    return _total_dp(cfg.models.ref_policy)


def _total_dp(m: Any) -> int:
    """ChatLearn's num_replica × replica_dp_size of a trainer or reference model (at least 1, so that rules can
    divide by it; a model without GPUs is reported by its own rule). A Megatron model that is not trainable is split
    into replicas of lcm(TP·CP, ETP·EP)·PP GPUs, where ChatLearn reads a null ETP as 1."""
    if m.num_gpu <= 0:
        return 1
    if isinstance(m, FSDPOptions):
        return max(m.num_gpu // m.ulysses_sequence_parallel_size, 1)
    tp_cp = m.tensor_model_parallel_size * m.context_parallel_size
    replicas = 1
    if not m.trainable:
        etp_ep = (m.expert_tensor_parallel_size or 1) * m.expert_model_parallel_size
        replicas = max(m.num_gpu // (tp_cp * etp_ep // gcd(tp_cp, etp_ep) * m.pipeline_model_parallel_size), 1)
    return max(replicas * (m.num_gpu // (replicas * tp_cp * m.pipeline_model_parallel_size)), 1)


def colocation_groups(cfg: Any) -> list[list[str]]:
    groups = cfg.runtime_args.colocation
    if groups and all(isinstance(g, str) for g in groups):
        return [list(groups)]
    return [list(g) for g in groups]


def v120_lengths(cfg: Any, release: str | None = None) -> bool:
    """Whether the document uses ChatLearn 1.2.0's lengths: judged by 1.2.0 (a document that writes only the lengths
    main derives, `seq_length`, is), or, with the release unknown, one that sets `max_new_tokens` (main refuses it)."""
    if release is not None:
        return release == "1.2.0"
    return cfg.models.policy.max_new_tokens is not None


def response_limit(cfg: Any, release: str | None = None) -> int:
    """The longest response. ChatLearn main: `max_response_tokens_length`. ChatLearn 1.2.0 never reads
    `max_new_tokens`: its engines give each prompt `seq_length` minus the prompt's length (vllm_module.py
    generate_vllm), so the longest response is `seq_length` − 1 (each prompt's own budget: `total_limit`)."""
    p = cfg.models.policy
    if v120_lengths(cfg, release):
        return max(p.seq_length - 1, 1)
    return p.max_response_tokens_length


def total_limit(cfg: Any, release: str | None = None) -> int | None:
    """ChatLearn 1.2.0's limit on each prompt's prompt + response, `seq_length`. None at main: it overwrites
    seq_length with max_prompt_tokens_length + max_response_tokens_length, which the prompt and response limits
    already keep every sample within."""
    seq_length = cfg.models.policy.seq_length
    return seq_length if v120_lengths(cfg, release) else None


def sequence_limit(cfg: Any, release: str | None = None) -> int:
    """The longest prompt + response of rollout: `seq_length` as written in ChatLearn 1.2.0; ChatLearn main overwrites
    it with max_prompt_tokens_length + max_response_tokens_length."""
    p = cfg.models.policy
    if v120_lengths(cfg, release):
        return p.seq_length
    return p.max_prompt_tokens_length + p.max_response_tokens_length


def prompt_limit(cfg: Any, release: str | None = None) -> int:
    """The longest prompt ChatLearn keeps: it drops a prompt unless it is shorter than max_prompt_tokens_length (main)
    or seq_length (1.2.0) (chatlearn/data/prompt_dataset.py PromptPipeline: `if limit > len(input_ids)`)."""
    p = cfg.models.policy
    limit = p.seq_length if v120_lengths(cfg, release) else p.max_prompt_tokens_length
    return max(limit - 1, 1)


def expert_bias(cfg: Any, release: str | None) -> str:
    """ChatLearn's Megatron setup for DeepSeek-V3 (update_cfg): after 1.2.0 it turns the routing correction off
    (moe_router_enable_expert_bias false) and runs no auxiliary loss; 1.2.0 routed with it beside a sequence
    auxiliary loss and YaRN rotary embeddings, which rlcfg does not compute."""
    return "unmapped" if v120_lengths(cfg, release) else "off"
