"""What one RL step does between the scored rollouts and the update, independent of where it runs.

The driver runs it for every layout, asking its workers over Ray for reference/old log-probs and critic
values; a single colocated worker runs the very same code inside its process for the fused step
(workers.HybridWorker.fused_step), so padding, advantages and metrics cannot differ between the two paths.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from rlcfg.runtime import algorithms as A
from rlcfg.runtime.data import DataError

# Train metrics that are each rank's share of a global figure (summed over data shards); the rest are averaged.
SHARE_METRICS = ("pg_loss", "kl_loss", "entropy", "value_loss")
# Per-call timings a trainer reports beside its metrics.
TRAIN_TIMES = ("forward_s", "backward_s", "optimizer_s", "gather_s")
# What the actor's update reads of the batch.
ACTOR_KEYS = ("input_ids", "attention_mask", "response_mask", "advantages", "old_logprobs", "ref_logprobs",
              "rollout_logprobs", "difficulty", "proximal_weight", "positive")
CRITIC_KEYS = ("input_ids", "attention_mask", "response_mask", "old_values", "returns")
# The timing key of each role's log-prob / value pass (time/<key> for the call, time/<key>_compute for the model).
COMPUTE_TIMING = {"actor": "old_logprob", "reference": "ref", "critic": "values"}


@dataclass(frozen=True)
class StepSettings:
    """The figures of the experiment and plan a step needs; small and picklable, so a worker can hold them."""

    algorithm: Any  # rlcfg.ir.Algorithm
    max_new_tokens: int
    pad_token_id: int
    needs_reference: bool
    # The actor's update is on-policy (one epoch, one optimizer step per step): its old log-probs are the
    # current ones, computed in the update's own forward pass.
    on_policy: bool
    samples_per_rank: int | None
    micro_batch_size: int | None
    has_critic: bool
    forward_micro_batch: dict[str, int]  # role → micro-batch of its log-prob / value passes
    max_total_length: int | None = None  # rlcfg.ir.Sampling.max_total_length


@dataclass
class Update:
    """A step's batch ready for the trainers, with what the metrics need."""

    batch: dict[str, Any]
    cfg: dict[str, Any]  # the actor's update settings
    raw_scores: Any
    shaped_scores: Any
    finished: Any
    lengths: Any
    metrics: dict[str, Any]
    # The KL coefficient for the next step (KL.controller: adaptive moves it, fixed keeps it); None without a
    # measured KL. The driver carries it into the next prepare_update's `kl_coef`.
    next_kl_coef: float | None = None
    # The rows that are samples; the batch's rows after them only even out the shards (no loss).
    rows: int | None = None

    def outcome(self) -> dict[str, Any]:
        """What step_metrics reads, without the batch: small enough to return from a worker, and as numpy
        arrays, which Ray passes without torch's serializer (a millisecond per reply for four tensors)."""
        return {"raw_scores": self.raw_scores.numpy(), "shaped_scores": self.shaped_scores.numpy(),
                "lengths": self.lengths.numpy(), "finished": self.finished.numpy(),
                "tokens": float(self.batch["attention_mask"][:self.rows].sum())}


def make_groups(indices: list[int], prompts: list[Any], generations: list[Any], scores: list[float],
                texts: list[str], n: int) -> list[dict[str, Any]]:
    """One group per prompt: its n responses (token ids, log-probs, finished), their scores and texts."""
    return [{"index": indices[g], "prompt": prompts[g], "responses": generations[g * n:(g + 1) * n],
             "scores": scores[g * n:(g + 1) * n], "texts": texts[g * n:(g + 1) * n]} for g in range(len(indices))]


def make_batch(groups: list[dict[str, Any]], pad: int):
    """Tensors for the trainers: prompts left-padded to a common width P, responses right-padded to R.
    Returns (batch, scores, finished)."""
    import numpy as np
    import torch

    P = max(len(g["prompt"]) for g in groups)
    lens = [len(r[0]) for g in groups for r in g["responses"]]
    R = max(max(lens, default=0), 1)
    N = len(lens)
    # Filled in place in numpy, one slice per group's prompt and one masked write for all responses: row-by-row
    # lists or tensor writes cost more than the rest of the step's bookkeeping for small models.
    # torch.from_numpy shares the memory (no copy).
    ids = np.full((N, P + R), pad, dtype=np.int64)
    attention = np.zeros((N, P + R), dtype=np.int64)
    response_mask = np.zeros((N, R), dtype=np.float32)
    done = [bool(r[2]) for g in groups for r in g["responses"]]
    scores: list[float] = []
    row = 0
    for g in groups:
        p = g["prompt"]
        lp, k = len(p), len(g["responses"])
        ids[row:row + k, P - lp:P] = p
        attention[row:row + k, P - lp:P] = 1
        row += k
        scores += g["scores"][:k]
    resp = np.arange(R)[None, :] < np.asarray(lens, dtype=np.int64)[:, None]
    # Row-major boolean indexing visits each row's response columns in order, so the flattened responses land
    # where they belong.
    ids[:, P:][resp] = [t for g in groups for r in g["responses"] for t in r[0]]
    if any(len(r) > 3 for g in groups for r in g["responses"]):
        # Multi-turn episodes (rlcfg.runtime.episodes): the environment's tokens are part of the sequence but
        # carry no loss.
        response_mask[resp] = [m for g in groups for r in g["responses"] for m in r[3]]
    else:
        response_mask[resp] = 1.0
    attention[:, P:] = resp
    batch = {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(attention),
             "response_mask": torch.from_numpy(response_mask)}
    return batch, torch.tensor(scores, dtype=torch.float32), torch.tensor(done, dtype=torch.bool)


def group_passes(groups: list[dict[str, Any]], spec: Any, group_size: int, spec_owner: Any = None) -> list[bool]:
    """algorithms.keep_groups over `groups` (FilterSpec `spec`; `spec_owner`: the ir.Algorithm, for its reward
    shaping): does each group pass the filters? Every response counts, whatever its length (SkyRL
    zero_variance_filter and handle_*_sampling: np.std of the group's rewards)."""
    import torch

    # The scores as the trainer receives them: a response cut at the length limit scores 0 under zero_truncated
    # (SkyRL's generator applies zero_reward_on_non_stop before the trainer filters).
    zero_cut = bool(getattr(getattr(spec_owner, "reward", None), "zero_truncated", False)) if spec_owner else False
    scores = torch.tensor([0.0 if zero_cut and not r[2] else float(s) for g in groups
                           for s, r in zip(g["scores"][:group_size], g["responses"][:group_size])],
                          dtype=torch.float32)
    return [bool(k) for k in A.keep_groups(scores, group_size, spec).tolist()]


def apply_filters(groups: list[dict[str, Any]], passed: list[bool], spec: Any) -> list[dict[str, Any]]:
    """The groups a step trains on when no dynamic sampling redraws: those that pass, or all of them with the
    loss of the failing ones masked (FilterSpec.failed "mask": SkyRL trainer.py, zero_variance_filter zeroes
    the failing groups' loss_masks and keeps them in the batch)."""
    if getattr(spec, "failed", "drop") == "mask":
        return [dict(g, loss_masked=True) if not p else g for g, p in zip(groups, passed)]
    return [g for g, p in zip(groups, passed) if p]


def filters_active(spec: Any) -> bool:
    """Whether a FilterSpec can change which groups a step trains on."""
    return bool(spec.zero_variance or spec.mean_range is not None or spec.std_min is not None
                or spec.dynamic is not None)


class DynamicSamplingExhausted(DataError, RuntimeError):
    """Dynamic sampling reached its draw limit without enough groups, and the framework stops there (SkyRL
    RayPPOTrainer.handle_dynamic_sampling raises a RuntimeError). A DataError: the data are too easy or too hard
    for the config, and `rlcfg run` says so in one line (exit 1)."""


def rollout_logprobs(groups: list[dict[str, Any]], width: int):
    """The rollout engine's per-token log-probs, [samples, width] like the response mask (0 on padding): the
    behaviour policy for truncated importance sampling and AReaL's decoupled loss, and the old policy's with
    Algorithm.old_logprobs "rollout"."""
    import torch

    rows = [r[1] for g in groups for r in g["responses"]]
    if any(r is None for r in rows):
        raise ValueError("this algorithm needs the rollout engine's log-probs, which the engine did not return")
    out = torch.zeros((len(rows), width), dtype=torch.float32)
    for i, lp in enumerate(rows):
        out[i, :len(lp)] = torch.tensor(lp, dtype=torch.float32)
    return out


def denominators(mask: Any, shards: int, mini: int, whole_step: bool = False,
                 count_masked_rows: bool = False) -> list[tuple[float, float]]:
    """(tokens, sequences) of each global mini-batch: mini-batch j is rows [j·mini, (j+1)·mini) of every
    shard's equal share of the batch. With `whole_step` (loss normalization "step") every mini-batch gets the
    step's. Sequences are the rows with a token in the loss, or every row with `count_masked_rows`."""
    def sequences(part: Any) -> float:
        return float(part.shape[0]) if count_masked_rows else float((part.sum(dim=1) > 0).sum())

    n = mask.shape[0] // shards
    out = []
    for m0 in range(0, n, mini):
        tokens = seqs = 0.0
        for r in range(shards):
            part = mask[r * n + m0:r * n + min(m0 + mini, n)]
            tokens += float(part.sum())
            seqs += sequences(part)
        out.append((max(tokens, 1.0), max(seqs, 1.0)))
    if whole_step:
        return [(max(float(mask[:n * shards].sum()), 1.0), max(sequences(mask[:n * shards]), 1.0))] * len(out)
    return out


def _response_limits(groups: list[dict[str, Any]], s: StepSettings, lengths: Any) -> Any:
    """Each sample's response limit: max_new_tokens, or with a limit on prompt + response its prompt's own budget
    (so that "cut at the limit" means the same for every sample)."""
    if s.max_total_length is None:
        return s.max_new_tokens
    import torch

    from rlcfg.ir import response_budget

    limits = [response_budget(s.max_new_tokens, s.max_total_length, len(g["prompt"]))
              for g in groups for _ in g["responses"]]
    return torch.tensor(limits[:lengths.shape[0]], dtype=lengths.dtype)


def shuffle_within_shards(batch: dict[str, Any], shards: int, seed: int) -> dict[str, Any]:
    """Every shard's rows in the order of one seeded permutation of its size (Algorithm.shuffle_seed)."""
    import torch

    n = batch["response_mask"].shape[0] // shards
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    order = torch.cat([r * n + perm for r in range(shards)])
    return {k: v[order] for k, v in batch.items()}


def balance_by_length(batch: dict[str, Any], shards: int) -> dict[str, Any]:
    """The rows dealt to the shards by length (Algorithm.balance_ranks_by_length, ChatLearn's
    RolloutManager.data_balance): longest first (a stable sort, so equal lengths keep their order), each to the
    shard whose rows hold the fewest tokens so far, the lower shard on a tie, until every shard has its share."""
    import heapq

    import torch

    lengths = batch["attention_mask"].sum(dim=1).tolist()
    share = len(lengths) // shards
    rows: list[list[int]] = [[] for _ in range(shards)]
    open_shards = [(0, r) for r in range(shards)]
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        tokens, r = heapq.heappop(open_shards)
        rows[r].append(i)
        if len(rows[r]) < share:
            heapq.heappush(open_shards, (tokens + lengths[i], r))
    order = torch.tensor([i for shard in rows for i in shard], dtype=torch.long)
    return {k: v[order] for k, v in batch.items()}


def prepare_update(groups: list[dict[str, Any]], s: StepSettings, shards: int,
                   compute: Callable[[str, dict[str, Any]], Any], timing: dict[str, float],
                   kl_coef: float | None = None, staleness: int = 0,
                   advantages: list[float] | None = None) -> Update:
    """Batch, shaped rewards, the log-probs and values the algorithm needs (`compute(role, batch)` returns
    them for the whole batch, timing itself), advantages and the actor's update settings. `kl_coef` is the
    current KL coefficient when a controller moves it (None: the configured one); `staleness`: how many updates
    before this one the step's rollouts were generated. `advantages`: one per sample, computed already (partial
    rollout: one response per group, as many as finished); the shards are evened out with rows of no loss."""
    alg = s.algorithm
    rows = None
    if advantages is not None:
        rows = len(groups)
        groups = groups + [dict(groups[-1], loss_masked=True)] * ((-rows) % shards)
    batch, raw_scores, finished = make_batch(groups, s.pad_token_id)
    if rows is not None:
        batch["response_mask"][rows:] = 0.0  # rows that even out the shards: no loss, no metric
    from_rollout = alg.old_logprobs in ("rollout", "interpolated")
    needs_engine = alg.needs_rollout_logprobs()
    engine = rollout_logprobs(groups, batch["response_mask"].shape[1]) if needs_engine or from_rollout else None
    if needs_engine:
        batch["rollout_logprobs"] = engine
    if from_rollout:
        # Even an on-policy update takes its ratio against the engine's log-probs, not its own forward pass, so
        # the engine/trainer mismatch shows in the ratio and its clipping (RLinf's actors without recomputation);
        # an interpolated proximal policy starts from them too (the loss moves it toward the current one).
        batch["old_logprobs"] = engine
    if alg.old_logprobs == "interpolated":
        import torch

        batch["proximal_weight"] = torch.full((engine.shape[0],), A.proximal_weight(staleness))
    usable = (raw_scores.shape[0] // shards) * shards
    if usable < raw_scores.shape[0]:  # dynamic sampling can leave a count the shards cannot share evenly
        batch = {k: v[:usable] for k, v in batch.items()}
        raw_scores, finished = raw_scores[:usable], finished[:usable]
    if alg.policy_loss == "topr":  # TOPR sides each sample by its score before any shaping (ROLL's `scores`)
        batch["positive"] = (raw_scores > 0).float()
    mask = batch["response_mask"]
    # A response's length counts every token of it, the environment's too (a multi-turn episode's).
    lengths = batch["attention_mask"][:, -mask.shape[1]:].sum(dim=1).to(mask.dtype)
    if rows is not None:
        lengths[rows:] = 0.0  # rows that even out the shards count no tokens

    t0 = time.perf_counter()
    scores = A.shape_scores(raw_scores, lengths, finished, s.max_new_tokens, alg.reward,
                            batch["attention_mask"].sum(dim=1) - lengths)
    timing["advantage"] = time.perf_counter() - t0

    metrics: dict[str, Any] = rollout_metrics(groups[:rows], raw_scores[:rows],
                                              alg.group_size if advantages is None else 1)
    if s.needs_reference:
        batch["ref_logprobs"] = compute("reference", batch)
    if not from_rollout and (not s.on_policy or (s.needs_reference and alg.kl.placement == "reward")):
        batch["old_logprobs"] = compute("actor", batch)
    if s.has_critic:
        batch["old_values"] = compute("critic", batch)

    t0 = time.perf_counter()
    live = None  # 1.0 per sample, 0.0 for the samples of groups a filter masked out of the loss
    if any(g.get("loss_masked") for g in groups):
        import torch

        live = torch.tensor([0.0 if g.get("loss_masked") else 1.0 for g in groups for _ in g["responses"]],
                            dtype=mask.dtype)[:mask.shape[0]]
    coef = alg.kl.coef if kl_coef is None else kl_coef
    penalty = None
    next_coef = None
    policy = batch.get("rollout_logprobs" if alg.kl.policy_logprobs == "rollout" else "old_logprobs")
    if "ref_logprobs" in batch and policy is not None:
        kl = A.kl_estimate(policy, batch["ref_logprobs"], alg.kl.estimator) * mask
        metrics["kl"] = float(kl.sum() / mask.sum().clamp(min=1))
        if alg.kl.placement == "reward":
            penalty = coef * kl
            metrics["kl_coef"] = coef
            # The controller reads the KL under the loss mask, so masked-out groups count as 0 (SkyRL
            # RayPPOTrainer.apply_reward_kl_penalty: masked_mean over loss_mask, averaged over the batch).
            seen = mask if live is None else mask * live.unsqueeze(1)
            next_coef = A.next_kl_coef(coef, A.sequence_mean_kl(kl * seen, seen), int(mask.shape[0]),
                                       alg.kl.controller)
    kept = None  # ROLL's sample-level masks (functionals.get_sample_level_mask): 1.0 keep, 0.0 no loss
    if alg.weighting.masks_samples:
        kept = A.sample_mask(raw_scores, lengths, alg.group_size, _response_limits(groups, s, lengths),
                             alg.weighting).unsqueeze(1)
    # ROLL computes the advantages under the kept samples' mask (compute_advantage with final_response_mask), so
    # that whitening's mean and variance leave the dropped samples out; their rows are zero either way.
    if advantages is not None:
        import torch

        given = torch.tensor(advantages + [0.0] * (mask.shape[0] - len(advantages)), dtype=mask.dtype)
        adv, returns = given.unsqueeze(1) * mask, None
    else:
        adv, returns = A.compute_advantages(
            # a reward of the KL penalty alone (on-policy distillation) leaves the scores to the metrics
            scores if not (penalty is not None and alg.kl.penalty_only) else scores.new_zeros(scores.shape),
            mask if kept is None else mask * kept, estimator=alg.advantage, group_size=alg.group_size,
            options=alg.advantage_options,
            normalize_std=alg.normalize_advantage_std, batch_normalize=alg.batch_normalize_advantage,
            gamma=alg.gamma, lam=alg.lam, kl_penalty=penalty, kl_mode=alg.kl.reward_mode,
            normalized_clip=alg.reward.clip if alg.reward.order == "clip_normalized" else None,
            values=batch.get("old_values"))
    if returns is not None:
        batch["returns"] = returns
    batch["advantages"] = adv
    loss_mask = A.mask_truncated(mask, finished) if alg.mask_truncated else mask
    if kept is not None:
        loss_mask = loss_mask * kept
    if live is not None:  # filtered groups kept in the batch with no loss (apply_filters)
        loss_mask = loss_mask * live.unsqueeze(1)
    batch["response_mask"] = loss_mask
    if alg.shuffle_seed is not None:
        batch = shuffle_within_shards(batch, shards, alg.shuffle_seed)
        loss_mask = batch["response_mask"]
    elif alg.balance_ranks_by_length:
        batch = balance_by_length(batch, shards)
        loss_mask = batch["response_mask"]
    timing["advantage"] += time.perf_counter() - t0

    per_shard = loss_mask.shape[0] // shards
    mini = min(s.samples_per_rank or per_shard, per_shard) or per_shard
    micro = min(s.micro_batch_size or mini, mini)
    # "loss" is everything the actor's loss reads (algorithms.actor_loss); the critic reads aggregation (its own),
    # normalization and value_clip.
    cfg = {"ppo_epochs": alg.ppo_epochs, "mini_batch": mini, "micro_batch": micro,
           "denominators": denominators(loss_mask, shards, mini, alg.loss_normalization == "step",
                                        alg.count_masked_rows),
           "loss": alg.actor_loss_spec(),
           "aggregation": alg.value_aggregation or alg.loss_aggregation, "normalization": alg.loss_normalization,
           "value_clip": alg.value_clip}
    return Update(batch=batch, cfg=cfg, raw_scores=raw_scores[:rows], shaped_scores=scores[:rows],
                  finished=finished[:rows], lengths=lengths[:rows], metrics=metrics, next_kl_coef=next_coef, rows=rows)


# How many of a step's responses go into its metrics line (one per group, the first groups), for people to read.
SAMPLES_PER_STEP = 4


def rollout_metrics(groups: list[dict[str, Any]], raw_scores: Any, group_size: int) -> dict[str, Any]:
    """What the rollout tells before any training: the spread of the rewards inside each group (GRPO learns
    only from groups whose rewards differ), the sampling policy's entropy, and a few responses with their rewards.

    The entropy is estimated from the rollout engine's own log-probs as the mean of −log π over the sampled
    tokens (an unbiased estimate of the per-token entropy at the sampling temperature); it costs nothing, where
    the exact entropy needs the whole vocabulary's distribution at every token (the trainer computes that one,
    `actor/entropy`, when the loss has an entropy term)."""
    out: dict[str, Any] = {}
    n = int(raw_scores.shape[0])
    if group_size > 1 and n and n % group_size == 0:
        by_group = raw_scores.view(-1, group_size)
        spread = by_group.std(dim=1)
        out["reward/group_std"] = float(spread.mean())
        out["reward/zero_std_frac"] = float((spread == 0).float().mean())
    responses = [r for g in groups for r in g["responses"]]
    # The model's own tokens only: an episode's environment tokens have log-prob 0 and no loss (mask 0).
    rows = [[p for p, m in zip(r[1], r[3]) if m] if len(r) > 3 else r[1] for r in responses if r[1] is not None]
    tokens = sum(len(lp) for lp in rows)
    if tokens:
        out["rollout/entropy"] = -sum(sum(lp) for lp in rows) / tokens
    episodes = [r[4] for r in responses if len(r) > 4]
    if episodes:  # multi-turn: how long the episodes ran and what ended them
        out["episode/turns_mean"] = sum(turns for turns, _ in episodes) / len(episodes)
        from rlcfg.runtime.episodes import ENDINGS

        for ending in ENDINGS:
            out[f"episode/ended_by_{ending.replace(' ', '_')}"] = (
                sum(end == ending for _, end in episodes) / len(episodes))
    # Groups built without their texts (by callers that only need the arithmetic) show none.
    out["samples"] = [{"prompt_index": g.get("index"), "response": g["texts"][0], "reward": float(g["scores"][0]),
                       "finished": bool(g["responses"][0][2])} for g in groups[:SAMPLES_PER_STEP] if g.get("texts")]
    return out


def critic_cfg(update: Update, ranks: int, alg: Any, samples_per_optimizer_step: int | None = None
               ) -> dict[str, Any]:
    """The critic's update settings: mini-batches of `samples_per_optimizer_step` samples over its ranks (None:
    each rank's whole share in one), for the actor's epochs, normalised as the algorithm says."""
    mask = update.batch["response_mask"]
    share = max(1, mask.shape[0] // ranks)
    mini = min(max(samples_per_optimizer_step // ranks, 1), share) if samples_per_optimizer_step else share
    return dict(update.cfg, denominators=denominators(mask, ranks, mini, alg.loss_normalization == "step",
                                                      alg.count_masked_rows),
                mini_batch=mini)


def train_metrics(update: Update, shard_results: list[dict[str, float]], all_results: list[dict[str, float]],
                  timing: dict[str, float]) -> None:
    """Fold the trainers' replies (one per data shard for the metrics, every rank for the timings) into the
    update's metrics and the step's timing."""
    for key in TRAIN_TIMES:
        timing["train_" + key[:-2]] = max(r.get(key, 0.0) for r in all_results)
    metrics = update.metrics
    for key in shard_results[0]:
        if key in TRAIN_TIMES:
            continue
        values = [r[key] for r in shard_results if key in r]
        metrics["actor/" + key] = sum(values) if key in SHARE_METRICS else sum(values) / len(values)
    if "kl" not in metrics and "actor/kl_loss" in metrics:
        metrics["kl"] = metrics["actor/kl_loss"]  # on-policy KL in the loss: the trainer measured it


def step_metrics(metrics: dict[str, Any], raw_scores: Any, shaped_scores: Any, lengths: Any, finished: Any,
                 tokens: float, timing: dict[str, float], step_s: float, example: str) -> dict[str, Any]:
    """The step's reward, length, throughput and time figures, added to `metrics` (the update's). The arrays
    are Update.outcome()'s."""
    import torch

    # Copies: arrays from Ray's object store are read-only, which torch warns about (they are tiny).
    raw_scores, shaped_scores, lengths, finished = (torch.tensor(a) for a in (raw_scores, shaped_scores, lengths,
                                                                              finished))
    n = int(raw_scores.shape[0])
    compute = sum(timing.get(k, 0.0) for k in ("generate", "train_forward", "train_backward", "train_optimizer",
                                               *(key + "_compute" for key in COMPUTE_TIMING.values())))
    metrics.update({
        "reward/mean": float(raw_scores.mean()), "reward/std": float(raw_scores.std()) if n > 1 else 0.0,
        "reward/shaped_mean": float(shaped_scores.mean()),
        "response/length_mean": float(lengths.float().mean()), "response/length_max": float(lengths.max()),
        "response/truncated_frac": float((~finished).float().mean()),
        "throughput/samples_per_s": n / step_s, "throughput/tokens_per_s": tokens / step_s,
        "time/step": step_s, "time/overhead_share": max(0.0, 1.0 - compute / step_s),
        **{f"time/{k}": v for k, v in timing.items()},
        "example": example,
    })
    return metrics
