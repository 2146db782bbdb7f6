"""The RL mathematics as pure torch functions: rewards, filters, advantages, KL estimators and controllers, policy
and value losses, loss aggregation, per-sample weights and masks. Every formula is written once, here; the FSDP and
Megatron backends and the step (runtime/step.py) call these.

Conventions: per-token tensors are [batch, response_len] with a 0/1 `mask` of the same shape marking real
response tokens (responses are right-padded); per-sample tensors are [batch]. Samples of one prompt's group sit next
to each other (sample i belongs to group i // group_size). Nothing here knows about workers, devices or dialects:
the functions read the Experiment's typed settings (rlcfg.ir) and are tested against numbers worked out by hand
and against verl's core_algos (tests/runtime/test_algorithms.py).

Each formula names, in a comment, the framework file and function whose meaning it reproduces. Paths are those of
the frameworks' repositories: verl `verl/trainer/ppo/core_algos.py`, SkyRL
`skyrl/backends/skyrl_train/utils/ppo_utils.py`, ROLL `roll/utils/functionals.py`, AReaL
`areal/utils/functional/functional.py`, RLinf `rlinf/algorithms/{losses,advantages}.py`, ChatLearn
`chatlearn/algorithm/grpo_utils/{loss_gallery,advantage_compute}.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence, get_args

import torch

from rlcfg.ir import (ActorLossSpec, AdvantageOptions, FilterSpec, KLController, KLEstimator, LossAggregation,
                      LrSchedule, Optimizer, PolicyLossKind, PolicyLossSpec, RewardShaping, SampleWeighting, TokenNorm)

# rlcfg's names are the Experiment's (rlcfg.ir); what each one computes is here.
AGGREGATIONS = get_args(LossAggregation)
KL_ESTIMATORS = get_args(KLEstimator)
# Names the frameworks use for the same estimators (verl/ROLL "kl", "mse"; RLinf/verl "low_var_kl").
KL_ALIASES = {"kl": "k1", "mse": "k2", "low_var_kl": "k3"}
POLICY_LOSSES = get_args(PolicyLossKind)
# Per-token batch entries the actor's loss reads (besides the log-probs its forward pass computes).
ACTOR_TOKEN_KEYS = ("response_mask", "advantages", "old_logprobs", "ref_logprobs", "rollout_logprobs")
# Per-sample batch entries it may read.
ACTOR_SAMPLE_KEYS = ("difficulty", "proximal_weight", "positive")


def proximal_weight(staleness: int) -> float:
    """How far toward the current policy the interpolated proximal policy lies (Algorithm.old_logprobs
    "interpolated"), for rollouts generated `staleness` updates before the one that trains on them: AReaL's
    log-linear approximation takes the proximal policy to be one update behind the current one, so
    α = (staleness − 1) / staleness, and 0 for rollouts at most one update old (the engine's log-probs stand)."""
    return (staleness - 1) / staleness if staleness > 1 else 0.0


def _masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    # verl's verl_F.masked_mean: the 1e-8 keeps an all-masked input finite (result 0).
    if dim is None:
        return (values * mask).sum() / (mask.sum() + 1e-8)
    return (values * mask).sum(dim=dim) / (mask.sum(dim=dim) + 1e-8)


# ---------------------------------------------------------------------------------------------------- rewards

def shape_rewards(scores: torch.Tensor, scale: float = 1.0, bias: float = 0.0,
                  clip: float | None = None) -> torch.Tensor:
    """score·scale + bias, then clipped to [−clip, clip]."""
    out = scores.float() * scale + bias
    if clip is not None:
        out = out.clamp(-clip, clip)
    return out


def overlong_penalty(lengths: torch.Tensor, max_length: int, penalty_start: int, factor: float = 1.0,
                     shift: torch.Tensor | None = None) -> torch.Tensor:
    """DAPO's soft overlong punishment: 0 up to `penalty_start` tokens, then falling linearly to −factor at
    `max_length` (and staying there). AReaL's reward_overlong_penalty is the same with
    penalty_start = max_new_tokens − overlong_tokens (a response never exceeds max_length there). `shift`: per
    response, how many tokens later its window starts and ends (RewardShaping.overlong_penalty_prompt_room)."""
    buffer = max_length - penalty_start
    if buffer <= 0:
        raise ValueError(f"the overlong penalty starts at {penalty_start} tokens, which is not below the "
                         f"maximum response length {max_length}")
    start = penalty_start if shift is None else penalty_start + shift.float()
    excess = (lengths.float() - start).clamp(min=0.0)
    return -(excess / buffer).clamp(max=1.0) * factor


def shape_scores(raw: torch.Tensor, lengths: torch.Tensor, finished: torch.Tensor, max_length: int,
                 spec: RewardShaping, prompt_lengths: torch.Tensor | None = None) -> torch.Tensor:
    """The sequence scores the advantage starts from, in the order the dialect's framework applies its steps
    (RewardShaping.order):

    scale_first (rlcfg): score·scale + bias, clip, then + overlong penalty;
    penalty_first (AReaL areal/trainer/ppo/actor.py PPOActor._compute_advantages): score + overlong penalty,
      then (score + bias)·scale, then clip;
    clip_normalized (ROLL reward_postprocess): score·scale + bias + overlong penalty; the clip is applied by
      the advantage to the group-normalised reward (compute_advantages' `normalized_clip`).
    zero_truncated (AReaL mask_no_eos_with_zero, SkyRL zero_reward_on_non_stop) makes the score of a response
    cut at the length limit 0, whatever the shaping. `prompt_lengths`: each response's prompt tokens, which an
    overlong penalty with a prompt room reads."""
    raw = raw.float()
    shift = None
    if spec.overlong_penalty_prompt_room is not None:
        if prompt_lengths is None:
            raise ValueError("an overlong penalty with a prompt room needs the prompts' lengths")
        shift = spec.overlong_penalty_prompt_room - prompt_lengths
    penalty = (overlong_penalty(lengths, max_length, spec.overlong_penalty_length, spec.overlong_penalty_factor,
                                shift) if spec.overlong_penalty_length is not None else torch.zeros_like(raw))
    if spec.order == "scale_first":
        out = shape_rewards(raw, spec.scale, spec.bias, spec.clip) + penalty
    elif spec.order == "penalty_first":
        out = (raw + penalty + spec.bias) * spec.scale
        if spec.clip is not None:
            out = out.clamp(-spec.clip, spec.clip)
    elif spec.order == "clip_normalized":
        out = raw * spec.scale + spec.bias + penalty
    else:
        raise ValueError(f"unknown reward order {spec.order!r}")
    if spec.zero_truncated:
        out = torch.where(finished.bool(), out, torch.zeros_like(out))
    return out


def token_level_scores(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Put each sample's scalar score on its last response token."""
    out = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
    lengths = mask.sum(dim=1).long()
    rows = torch.nonzero(lengths > 0).squeeze(1)
    out[rows, lengths[rows] - 1] = scores[rows].float()
    return out


# ---------------------------------------------------------------------------------------------------- filters

def _groups(values: torch.Tensor, group_size: int) -> torch.Tensor:
    if values.ndim != 1 or values.numel() % group_size:
        raise ValueError(f"{values.numel()} samples do not split into groups of {group_size}")
    return values.view(-1, group_size)


def groups_with_signal(scores: torch.Tensor, group_size: int) -> torch.Tensor:
    """DAPO dynamic sampling: a per-sample bool, False for every sample of a group whose scores are all equal
    (such a group has zero advantage and only dilutes the batch)."""
    g = _groups(scores.float(), group_size)
    varied = (g.max(dim=1).values - g.min(dim=1).values) > 0
    return varied.repeat_interleave(group_size)


def keep_groups(scores: torch.Tensor, group_size: int, spec: FilterSpec,
                lengths: torch.Tensor | None = None) -> torch.Tensor:
    """A bool per group: does it pass the filters of `spec`?

    zero_variance (SkyRL skyrl/train/utils/trainer_utils.py zero_variance_filter): a group with more than one
    live response (length > 0, when `lengths` is given) whose scores spread by no more than the tolerance is
    dropped; a singleton group is kept (DAPO/SkyRL filter with n_samples_per_prompt == 1 keep everything).
    mean_range (ROLL roll/distributed/scheduler/user_defined_rollout_loop.py query_filter, mean_filter): dropped
    when the group's mean score ≤ threshold_down or ≥ threshold_up. std_min (query_filter, std_filter): dropped
    when the unbiased std ≤ threshold. ROLL keeps a group of one response whatever its score."""
    g = _groups(scores.float(), group_size)
    keep = torch.ones(g.shape[0], dtype=torch.bool, device=g.device)
    if spec.zero_variance:
        live = (torch.ones_like(g, dtype=torch.bool) if lengths is None
                else _groups(lengths.float(), group_size) > 0)
        big = torch.finfo(torch.float32).max
        hi = torch.where(live, g, torch.full_like(g, -big)).max(dim=1).values
        lo = torch.where(live, g, torch.full_like(g, big)).min(dim=1).values
        keep &= ~((live.sum(dim=1) > 1) & ((hi - lo) <= spec.zero_variance_tol))
    if group_size > 1:
        if spec.mean_range is not None:
            down, up = spec.mean_range
            mean = g.mean(dim=1)
            keep &= (mean > down) & (mean < up)
        if spec.std_min is not None:
            keep &= g.std(dim=1) > spec.std_min
    return keep


@dataclass(frozen=True)
class GroupSelection:
    """What select_groups decided: the groups to train on, in order (a group may repeat under `replace`), and
    whether to draw another batch first. `exhausted`: the draw limit was reached without enough groups."""

    groups: tuple[int, ...]
    draw_again: bool
    exhausted: bool = False


def select_groups(passed: Sequence[bool], wanted: int, draws: int, spec: FilterSpec,
                  generator: torch.Generator | None = None) -> GroupSelection:
    """Dynamic sampling as a pure selection over the groups drawn so far (`passed`: keep_groups of all of them,
    in draw order; `draws`: how many batches were drawn, this one included).

    No dynamic sampling: every group that passed. "filter" (DAPO; SkyRL trainer_utils.handle_filter_sampling):
    the groups that passed, the first `wanted` of them once there are enough, else draw again.
    "replace" (SkyRL handle_replace_sampling, after POLARIS): looks at the latest `wanted` groups only; when more
    than min_replace_ratio of them passed, each failed group is replaced by a passed one (a random permutation of
    the passed groups when there are enough, else random picks with repetition), so the step trains on exactly
    `wanted` groups; otherwise draw again. With max_draws reached and still not enough, `exhausted` is set (what
    follows is FilterSpec.on_exhausted: SkyRL stops with an error)."""
    passed = [bool(p) for p in passed]
    limit_hit = spec.max_draws is not None and draws >= spec.max_draws
    if spec.dynamic is None:
        return GroupSelection(tuple(i for i, p in enumerate(passed) if p), False)
    if spec.dynamic == "filter":
        kept = [i for i, p in enumerate(passed) if p]
        if len(kept) >= wanted:
            return GroupSelection(tuple(kept[:wanted]), False)
        return GroupSelection(tuple(kept), not limit_hit, exhausted=limit_hit)
    if spec.dynamic == "replace":
        start = len(passed) - wanted
        latest = list(range(max(start, 0), len(passed)))
        good = [i for i in latest if passed[i]]
        bad = [i for i in latest if not passed[i]]
        if len(good) > len(latest) * spec.min_replace_ratio:
            if len(good) >= len(bad):
                perm = torch.randperm(len(good), generator=generator)[:len(bad)].tolist()
            else:
                perm = torch.randint(0, len(good), (len(bad),), generator=generator).tolist()
            swap = dict(zip(bad, (good[j] for j in perm)))
            return GroupSelection(tuple(swap.get(i, i) for i in latest), False)
        return GroupSelection(tuple(latest), not limit_hit, exhausted=limit_hit)
    raise ValueError(f"unknown dynamic sampling {spec.dynamic!r}; expected filter or replace")


def evaluation_metrics(scores: Sequence[float], samples_per_prompt: int) -> dict[str, float]:
    """An evaluation's figures from its scores, prompt-major (prompt i's samples at [i·n, (i+1)·n)): the mean
    reward, and with several samples per prompt skyrl-train's pass@n (the share of prompts with a positive reward
    among their n samples) and mean positive reward (the mean of max(reward, 0))."""
    n = max(1, samples_per_prompt)
    out = {"eval/reward": sum(scores) / max(1, len(scores)), "eval/samples": len(scores)}
    if n > 1:  # with one sample pass@1 and the positive mean repeat eval/reward for a 0/1 verifier
        prompts = [scores[i:i + n] for i in range(0, len(scores), n)]
        out[f"eval/pass_at_{n}"] = sum(1 for p in prompts if any(r > 0 for r in p)) / max(1, len(prompts))
        out["eval/mean_positive_reward"] = sum(max(r, 0.0) for r in scores) / max(1, len(scores))
    return out


def mask_truncated(mask: torch.Tensor, finished: torch.Tensor) -> torch.Tensor:
    """The loss mask with every response cut at the length limit (finished = False) removed entirely: a cut
    response's score judges an unfinished answer, so it teaches nothing reliable."""
    return mask * finished.to(mask.dtype).unsqueeze(1)


def sample_mask(scores: torch.Tensor, lengths: torch.Tensor, group_size: int, max_length: int,
                spec: SampleWeighting) -> torch.Tensor:
    """ROLL's per-sample loss mask (roll/utils/functionals.py get_sample_level_mask), 1.0 keep / 0.0 drop:
    max_len_mask drops responses exactly `max_length` long; difficulty_mask (functionals.difficulty_mask) keeps
    the groups whose mean score is strictly between the thresholds (every sample kept when group_size is 1);
    error_max_len_clip keeps score-1 samples and score-0 samples shorter than the threshold (others dropped)."""
    keep = torch.ones(scores.shape[0], dtype=torch.float32, device=scores.device)
    lengths = lengths.float()
    if spec.max_len_mask:
        keep = keep * (lengths != max_length).float()
    if spec.difficulty_mask is not None and group_size > 1:
        low, high = spec.difficulty_mask
        mean = _groups(scores.float(), group_size).mean(dim=1, keepdim=True).expand(-1, group_size).reshape(-1)
        keep = keep * ((mean > low) & (mean < high)).float()
    if spec.error_max_len_clip is not None:
        ok = ((scores == 0) & (lengths < spec.error_max_len_clip)) | (scores == 1)
        keep = keep * ok.float()
    return keep


def sample_weights(mask: torch.Tensor, spec: SampleWeighting, difficulty: torch.Tensor | None = None) -> torch.Tensor:
    """ROLL's per-sample loss weights over one micro-batch (roll/pipeline/rlvr/actor_worker.py
    ActorWorker.compute_sample_weights): difficulty: 0.5 + 1.5·clamp(d, 0, 1) (only when the data carries a
    difficulty; ROLL skips it otherwise); length: 1.5 − (len − min)/(max − min + 1e-8); then rescaled to mean 1
    over the micro-batch."""
    n = mask.shape[0]
    weights = torch.ones(n, dtype=torch.float32, device=mask.device)
    if spec.difficulty_loss_weight and difficulty is not None:
        weights = weights * (0.5 + 1.5 * difficulty.float().to(mask.device).clamp(0.0, 1.0))
    if spec.length_loss_weight:
        lengths = mask.float().sum(dim=1)
        weights = weights * (1.5 - (lengths - lengths.min()) / (lengths.max() - lengths.min() + 1e-8))
    if weights.sum() > 0:
        weights = weights * (n / (weights.sum() + 1e-8))
    return weights


# ---------------------------------------------------------------------------------------------------- advantages

def grpo_advantages(scores: torch.Tensor, group_size: int, normalize_std: bool = True, eps: float = 1e-6,
                    std: str = "unbiased") -> torch.Tensor:
    """(score − group mean), divided by (group std + eps) when asked.

    std "unbiased" is torch.std (verl compute_grpo_outcome_advantage, SkyRL compute_grpo_outcome_advantage,
    ROLL reward_norm with norm_std_type group, RLinf compute_grpo_advantages with eps 1e-6); "population" is
    np.std (ChatLearn advantage_compute.AdvantageComputer, with eps 1e-5). A group of identical scores gets
    advantage 0. A group of one response gets 0 too (verl and SkyRL give it its score: rlcfg does not train
    GRPO on groups of one)."""
    g = _groups(scores.float(), group_size)
    centred = g - g.mean(dim=1, keepdim=True)
    if normalize_std and group_size > 1:
        if std not in ("unbiased", "population"):
            raise ValueError(f"unknown GRPO std {std!r}; expected unbiased or population")
        centred = centred / (g.std(dim=1, keepdim=True, unbiased=std == "unbiased") + eps)
    return centred.reshape(-1)


def rloo_advantages(scores: torch.Tensor, group_size: int) -> torch.Tensor:
    """Leave-one-out baseline: a sample's score minus the mean of the other samples of its group
    (verl compute_rloo_outcome_advantage: (s − mean)·n/(n − 1), the same number)."""
    if group_size < 2:
        raise ValueError("RLOO needs at least 2 samples per prompt")
    g = _groups(scores.float(), group_size)
    others = (g.sum(dim=1, keepdim=True) - g) / (group_size - 1)
    return (g - others).reshape(-1)


def maxrl_advantages(scores: torch.Tensor, group_size: int, eps: float = 1e-6) -> torch.Tensor:
    """MaxRL (SkyRL compute_maxrl_advantage): (score − group mean) / (group mean + eps), the group-relative gain
    as a share of the group's mean reward; a group of one keeps its score."""
    g = _groups(scores.float(), group_size)
    if group_size == 1:
        return g.reshape(-1)
    mean = g.mean(dim=1, keepdim=True)
    return ((g - mean) / (mean + eps)).reshape(-1)


def reward_norm(scores: torch.Tensor, group_size: int, mean: str | None, std: str | None, eps: float = 1e-6,
                unbiased: bool = True, std_of: str = "scores") -> torch.Tensor:
    """ROLL roll/utils/functionals.py reward_norm (without the running statistics): score − the batch or group
    mean (or nothing), divided by the batch or group std (unbiased, torch.std) + `eps` when a std is named.
    std_of "centred" is AReaL's Normalization instead: the std is the root mean square of the centred scores (over
    the batch or each group, n − 1 when `unbiased`, and 1 where that leaves nothing to divide by), + `eps`."""
    if std_of == "centred":
        return _centred_norm(scores.double(), group_size, mean, std, eps, unbiased)
    scores = scores.float()
    g = _groups(scores, group_size)
    centred = _centre(scores, group_size, mean)
    correction = 1 if unbiased else 0
    if std is None:
        return centred
    if std == "batch":
        return centred / (scores.std(correction=correction) + eps)
    if std == "group":
        return centred / (g.std(dim=1, keepdim=True, correction=correction).expand(-1, group_size).reshape(-1) + eps)
    raise ValueError(f"unknown reward normalisation std {std!r}; expected batch or group")


def _centre(x: torch.Tensor, group_size: int, mean: str | None) -> torch.Tensor:
    """`x` less its batch or group mean, or as it is (mean None)."""
    if mean == "batch":
        return x - x.mean()
    if mean == "group":
        g = _groups(x, group_size)
        return (g - g.mean(dim=1, keepdim=True)).reshape(-1)
    if mean is None:
        return x
    raise ValueError(f"unknown reward normalisation mean {mean!r}; expected batch or group")


def _centred_norm(x: torch.Tensor, group_size: int, mean: str | None, std: str | None, eps: float,
                  unbiased: bool) -> torch.Tensor:
    """AReaL areal/utils/data.py Normalization on sequence scores `x` (no mask; float64, as its high_precision)."""
    centred = _centre(x, group_size, mean)
    if std is None:
        return centred.float()

    def spread(deviations: torch.Tensor) -> torch.Tensor:
        n = deviations.shape[-1]
        if (unbiased and n <= 1) or n == 0:
            return torch.ones(deviations.shape[:-1] + (1,), dtype=deviations.dtype)
        return ((deviations ** 2).sum(dim=-1, keepdim=True) / (n - 1 if unbiased else n)).sqrt()

    if std == "batch":
        scale = spread(centred).expand_as(centred)
    elif std == "group":
        scale = spread(_groups(centred, group_size)).expand(-1, group_size).reshape(-1)
    else:
        raise ValueError(f"unknown reward normalisation std {std!r}; expected batch or group")
    return (centred / (scale + eps)).float()


def token_normalize(x: torch.Tensor, mask: torch.Tensor, group_size: int, norm: TokenNorm) -> torch.Tensor:
    """AReaL's Normalization (areal/utils/data.py) of token values `x` under `mask`, as its adv_norm runs it:
    float64, masked sums over the batch or over each group of `group_size` rows, a leave-one-out mean per token,
    the std about that mean (a group of one: mean 0 with leave-one-out, std 1 when unbiased), zero outside the
    mask. A batch or group without tokens keeps mean 0 and std 1."""
    mask64 = mask.to(torch.float64)
    if mask64.sum().item() == 0:
        return x.float()
    x64 = x.to(torch.float64)
    rows = x64.shape[0] // group_size * group_size  # AReaL's loop leaves a trailing part group alone

    def spans(level: str) -> list[slice]:
        return [slice(0, x64.shape[0])] if level == "batch" else \
            [slice(i, i + group_size) for i in range(0, rows, group_size)]

    def mean_of(xx: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        factor, total = m.sum(), (xx * m).sum()
        if norm.leave_one_out:
            if factor.item() <= 1:
                return torch.zeros_like(xx)
            others = (total - xx * m) / torch.clamp(factor - m, min=1.0)
            return torch.where(m > 0, others, (total / factor).expand_as(xx))
        return torch.zeros_like(xx) if factor.item() == 0 else (total / factor).expand_as(xx)

    def std_of(xx: torch.Tensor, m: torch.Tensor, mean: torch.Tensor) -> torch.Tensor:
        factor, squares = m.sum(), ((xx * m - mean * m) ** 2).sum()
        if norm.unbiased:
            return torch.ones_like(xx) if factor.item() <= 1 else (squares / (factor - 1)).sqrt().expand_as(xx)
        return torch.ones_like(xx) if factor.item() == 0 else (squares / factor).sqrt().expand_as(xx)

    mean = torch.zeros_like(x64)
    if norm.mean is not None:
        for s in spans(norm.mean):
            lone = norm.mean == "group" and group_size == 1 and norm.leave_one_out
            mean[s] = 0.0 if lone else mean_of(x64[s], mask64[s])
    centred = (x64 - mean) * mask64
    if norm.std is None:
        return centred.float()
    std = torch.zeros_like(x64)
    for s in spans(norm.std):
        lone = norm.std == "group" and group_size == 1 and norm.unbiased
        std[s] = 1.0 if lone else std_of(x64[s], mask64[s], mean[s])
    return (centred / (std + norm.eps)).float()


def whiten(values: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True, unbiased: bool = True) -> torch.Tensor:
    """Normalise the masked entries to unit variance (and zero mean unless shift_mean=False); zero outside the
    mask. verl verl/utils/torch_functional.py masked_whiten (also SkyRL's and ROLL's): the masked mean, the
    masked variance with Bessel's correction n/(n − 1), (v − mean)·rsqrt(var + 1e-8). unbiased=False is the
    population variance (RLinf compute_reinpp_advantages). With fewer than two tokens the correction is
    undefined (verl raises, ROLL skips whitening): the population variance is used."""
    mask = mask.float()
    n = mask.sum()
    mean = _masked_mean(values, mask)
    var = _masked_mean((values - mean) ** 2, mask)
    if unbiased and n > 1:
        var = var * n / (n - 1)
    out = (values - mean) * torch.rsqrt(var + 1e-8)
    if not shift_mean:
        out = out + mean
    return out * mask


def discounted_returns(token_rewards: torch.Tensor, mask: torch.Tensor, gamma: float) -> torch.Tensor:
    """G_t = r_t + γ·G_{t+1}, restarted after each sequence's last real token (verl
    compute_reinforce_plus_plus_outcome_advantage's loop; ROLL compute_reinforce_return)."""
    returns = torch.zeros_like(token_rewards, dtype=torch.float32)
    running = torch.zeros(token_rewards.shape[0], dtype=torch.float32, device=token_rewards.device)
    for t in reversed(range(token_rewards.shape[1])):
        running = token_rewards[:, t].float() + gamma * running
        returns[:, t] = running
        running = running * mask[:, t]  # a padding token resets the sum: nothing leaks into the real tokens
    return returns * mask


def reinforce_pp_advantages(token_rewards: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0,
                            whiten_advantages: bool = True) -> torch.Tensor:
    """REINFORCE++ (verl compute_reinforce_plus_plus_outcome_advantage, SkyRL's copy): discounted return of the
    token rewards (score at the last token, minus any KL penalty per token), whitened over the whole batch."""
    returns = discounted_returns(token_rewards, mask, gamma)
    return whiten(returns, mask) if whiten_advantages else returns


def reinforce_pp_baseline_advantages(token_rewards: torch.Tensor, mask: torch.Tensor,
                                     group_size: int) -> torch.Tensor:
    """REINFORCE++-baseline (verl compute_reinforce_plus_plus_baseline_outcome_advantage): each sequence's
    summed reward minus its group's mean (0 for a group of one), on every token, whitened over the batch."""
    seq = token_rewards.float().sum(dim=1)
    g = _groups(seq, group_size)
    centred = (g - g.mean(dim=1, keepdim=True)) if group_size > 1 else g
    return whiten(centred.reshape(-1).unsqueeze(1) * mask, mask)


def gae(token_rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float,
        lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation (verl compute_gae_advantage_return, before its whitening): tokens
    outside the mask are skipped (their value and TD error do not enter), so the value after a sequence's last
    token is 0. Returns (advantages, returns); returns = advantages + values are the critic's targets."""
    rewards, values, mask = token_rewards.float(), values.float(), mask.float()
    advantages = torch.zeros_like(rewards)
    last = torch.zeros(rewards.shape[0], dtype=torch.float32, device=rewards.device)
    next_value = torch.zeros_like(last)
    for t in reversed(range(rewards.shape[1])):
        m = mask[:, t]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        new = delta + gamma * lam * last
        next_value = values[:, t] * m + (1 - m) * next_value
        last = new * m + (1 - m) * last
        advantages[:, t] = last
    returns = (advantages + values) * mask
    return advantages * mask, returns


def compute_advantages(scores: torch.Tensor, mask: torch.Tensor, *, estimator: str, group_size: int,
                       options: AdvantageOptions, normalize_std: bool = True, batch_normalize: bool = False,
                       gamma: float = 1.0, lam: float = 1.0, kl_penalty: torch.Tensor | None = None,
                       kl_mode: str = "sequence", normalized_clip: float | None = None,
                       values: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A step's per-token advantages (and the critic's returns for GAE) from the shaped sequence scores.

    `kl_penalty` is β·KL per token (or None) for a KL in the reward. For grpo/rloo, kl_mode "sequence" is verl's
    meaning (compute_rewards: score − β·KL per token, summed per sequence, then the group baseline); "token" is
    ROLL's (functionals.reward_postprocess → compute_token_reward → compute_advantage with
    compute_reinforce_return) and AReaL's: the score is group-normalised first, `normalized_clip` clamps it
    (ROLL reward_clip), then β·KL is subtracted per token and the advantage is the per-token discounted
    reward-to-go (AReaL's GAE with zero values is the same with γ·λ as the discount); ROLL clamps the token
    rewards with reward_clip once more after the penalty (compute_token_reward). For reinforce++ and gae,
    options.reward_norm_mean/std normalise the scores first (ROLL reward_norm; normalized_clip then clamps them,
    and the token rewards as above). reinforce++ and gae put
    the score on the last token and subtract the penalty per token (verl). options.group_baseline turns
    reinforce++ into REINFORCE++-baseline: verl's meaning in "sequence" mode, RLinf's compute_reinpp_advantages
    (score − group mean at the last token, then per-token KL and reward-to-go) in "token" mode. token_reward (SkyRL's
    `no_op`) takes the token rewards themselves as the advantages: the score on the last token less the penalty
    on each token, undiscounted and unnormalised.
    options.whiten_rewards (ROLL whiten_rewards) whitens the token rewards before the estimator; options.whiten
    whitens GAE/REINFORCE++ advantages; batch_normalize whitens grpo/rloo advantages (ROLL whiten_advantages,
    verl's batch std); options.clip clamps the result (ROLL advantage_clip)."""
    mask = mask.float()
    penalty = kl_penalty.float() * mask if kl_penalty is not None else None
    if kl_mode not in ("sequence", "token"):
        raise ValueError(f"unknown KL reward mode {kl_mode!r}; expected sequence or token")

    def baseline(seq: torch.Tensor) -> torch.Tensor:
        if estimator == "grpo":
            return grpo_advantages(seq, group_size, normalize_std, options.eps, options.std)
        if estimator == "maxrl":
            return maxrl_advantages(seq, group_size, options.eps)
        return rloo_advantages(seq, group_size)

    def token_rewards(seq_scores: torch.Tensor, per_token_clip: bool = True) -> torch.Tensor:
        tokens = token_level_scores(seq_scores, mask)
        if penalty is not None:
            tokens = tokens - penalty
        if normalized_clip is not None and per_token_clip:
            # ROLL compute_token_reward clamps the token rewards (after the KL penalty) with reward_clip again.
            tokens = tokens.clamp(-normalized_clip, normalized_clip)
        if options.whiten_rewards:
            tokens = whiten(tokens, mask)
        return tokens

    def normalized(seq_scores: torch.Tensor) -> torch.Tensor:
        if options.reward_norm_mean is None and options.reward_norm_std is None:
            return seq_scores.float()
        out = reward_norm(seq_scores, group_size, options.reward_norm_mean, options.reward_norm_std,
                          options.reward_norm_eps, options.reward_norm_unbiased, options.reward_norm_std_of)
        return out.clamp(-normalized_clip, normalized_clip) if normalized_clip is not None else out

    returns = None
    if estimator in ("grpo", "rloo", "maxrl"):
        if kl_mode == "token" or penalty is None:
            norm = baseline(scores.float())
            if normalized_clip is not None:
                norm = norm.clamp(-normalized_clip, normalized_clip)
            if penalty is None and not options.whiten_rewards:
                adv = norm.unsqueeze(1) * mask
            else:
                adv = discounted_returns(token_rewards(norm), mask, gamma)
        else:
            adv = baseline(token_rewards(scores, per_token_clip=False).sum(dim=1))
            if normalized_clip is not None:
                adv = adv.clamp(-normalized_clip, normalized_clip)
            adv = adv.unsqueeze(1) * mask
        if batch_normalize:
            adv = whiten(adv, mask)
    elif estimator == "reinforce++":
        if options.group_baseline and kl_mode == "sequence":
            adv = reinforce_pp_baseline_advantages(token_rewards(normalized(scores)), mask, group_size)
        else:
            base = normalized(scores)
            if options.group_baseline:
                g = _groups(base, group_size)
                base = (g - g.mean(dim=1, keepdim=True)).reshape(-1) if group_size > 1 else base
            adv = reinforce_pp_advantages(token_rewards(base), mask, gamma, options.whiten)
    elif estimator == "token_reward":
        adv = token_rewards(normalized(scores))
    elif estimator == "gae":
        if values is None:
            raise ValueError("GAE needs the critic's values")
        adv, returns = gae(token_rewards(normalized(scores)), values, mask, gamma, lam)
        if options.whiten:
            adv = whiten(adv, mask)
    else:
        raise ValueError(f"unknown advantage estimator {estimator!r}; expected grpo, rloo, maxrl, reinforce++, "
                         "gae or token_reward")
    if options.token_norm is not None:
        adv = token_normalize(adv, mask, group_size, options.token_norm)
    if options.clip is not None:
        adv = adv.clamp(-options.clip, options.clip)
    return adv * mask, returns


# ---------------------------------------------------------------------------------------------------- KL

def kl_estimate(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, estimator: str) -> torch.Tensor:
    """Per-token estimate of KL(π‖π_ref) from samples of π (Schulman's k1, k2, k3; `abs` is |k1|), as verl
    kl_penalty_forward: k1 = logp − ref; k2 = ½(logp − ref)²; k3 (= low_var_kl) = exp(ref − logp) − (ref − logp)
    − 1 with the log-ratio clamped to ±20 and the estimate to ±10 (verl, SkyRL compute_approx_kl, ROLL
    compute_approx_kl and ChatLearn all clamp the estimate at ±10)."""
    estimator = KL_ALIASES.get(estimator, estimator)
    diff = logprobs.float() - ref_logprobs.float()
    if estimator == "k1":
        return diff
    if estimator == "abs":
        return diff.abs()
    if estimator == "k2":
        return 0.5 * diff.square()
    if estimator == "k3":
        log_ratio = (-diff).clamp(-20.0, 20.0)
        return (log_ratio.exp() - log_ratio - 1.0).clamp(-10.0, 10.0)
    raise ValueError(f"unknown KL estimator {estimator!r}; expected one of {', '.join(KL_ESTIMATORS)}")


def sequence_mean_kl(kl: torch.Tensor, mask: torch.Tensor) -> float:
    """The figure the KL controllers read: each sequence's masked mean KL, averaged over sequences (verl
    apply_kl_penalty, ROLL apply_kl_penalty / compute_token_reward)."""
    return float(_masked_mean(kl, mask.float(), dim=-1).mean())


def next_kl_coef(coef: float, current_kl: float, n_steps: int, controller: KLController) -> float:
    """The KL coefficient for the next step. fixed: unchanged. adaptive (Ziegler et al. 2019; verl
    core_algos.AdaptiveKLController.update, SkyRL's and ROLL roll/utils/kl_controller.py's copies):
    coef·(1 + clip(kl/target − 1, −0.2, 0.2)·n_steps/horizon), n_steps being the step's sample count."""
    if controller.kind == "fixed":
        return coef
    if controller.kind != "adaptive":
        raise ValueError(f"unknown KL controller {controller.kind!r}; expected fixed or adaptive")
    if controller.target is None or controller.horizon <= 0:
        raise ValueError("the adaptive KL controller needs a target KL and a horizon > 0")
    error = min(max(current_kl / controller.target - 1.0, -0.2), 0.2)
    return coef * (1.0 + error * n_steps / controller.horizon)


# ---------------------------------------------------------------------------------------------------- aggregation

def aggregate(values: torch.Tensor, mask: torch.Tensor, mode: str, num_tokens: float | None = None,
              num_sequences: float | None = None) -> torch.Tensor:
    """Reduce a per-token loss to a scalar (verl core_algos.agg_loss).

    token-mean: Σ loss / Σ tokens; seq-mean-token-sum: mean over sequences of each sequence's token sum;
    seq-mean-token-mean: mean over sequences of each sequence's token mean. `num_tokens`/`num_sequences`
    replace the local denominators when a mini-batch is split into micro-batches (or across ranks), so that
    the accumulated gradient equals the one of the whole mini-batch."""
    mask = mask.float()
    if mode == "token-mean":
        denom = num_tokens if num_tokens is not None else mask.sum().clamp(min=1.0)
        return (values * mask).sum() / denom
    seq_has_tokens = (mask.sum(dim=1) > 0).float()
    if mode == "seq-mean-token-sum":
        per_seq = (values * mask).sum(dim=1)
    elif mode == "seq-mean-token-mean":
        per_seq = (values * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
    else:
        raise ValueError(f"unknown loss aggregation {mode!r}; expected one of {', '.join(AGGREGATIONS)}")
    denom = num_sequences if num_sequences is not None else seq_has_tokens.sum().clamp(min=1.0)
    return (per_seq * seq_has_tokens).sum() / denom


def loss_denominators(normalization: str, mask: torch.Tensor, mini_batch: tuple[float, float], micro_batches: int,
                      ranks: int) -> tuple[float, float]:
    """The (tokens, sequences) that divide one micro-batch's loss in `aggregate`, given the step's
    denominators of its global mini-batch (step.denominators), the number of micro-batches this rank runs in
    that mini-batch and the number of data-parallel ranks. The backends scale each loss by `ranks` (and
    Megatron by its micro-batch count too) to undo their own averaging, so the gradient is that of

      "mini-batch": Σ loss over the global mini-batch / its tokens (sequences);
      "step": the same with the whole step's tokens (sequences), which step.denominators then gives for every
              mini-batch;
      "micro-batch": the mean over ranks and micro-batches of each micro-batch's own reduction: Σ loss / its
                     tokens, or Σ per-sequence values / all its rows (skyrl-train's reduce_loss, masked_mean
                     with dim=-1 then .mean(), then 1/accumulation steps and the ranks' mean)."""
    if normalization in ("mini-batch", "step"):
        return mini_batch
    if normalization != "micro-batch":
        raise ValueError(f"unknown loss normalization {normalization!r}")
    share = float(max(micro_batches, 1) * max(ranks, 1))
    return max(float(mask.sum()), 1.0) * share, max(float(mask.shape[0]), 1.0) * share


# ---------------------------------------------------------------------------------------------------- losses

def _clamped(log_ratio: torch.Tensor, spec: PolicyLossSpec, low: float | None, high: float | None) -> torch.Tensor:
    o = spec.options
    low = o.log_ratio_min if o.log_ratio_min is not None else low
    high = o.log_ratio_max if o.log_ratio_max is not None else high
    return log_ratio if low is None and high is None else log_ratio.clamp(min=low, max=high)


def _clip_surrogate(ratio: torch.Tensor, advantages: torch.Tensor, spec: PolicyLossSpec
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's pessimistic max of the unclipped and clipped surrogate, and where the clipped one won."""
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - spec.clip_low, 1.0 + spec.clip_high)
    return torch.maximum(unclipped, clipped), clipped > unclipped


def policy_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                spec: PolicyLossSpec = PolicyLossSpec(), rollout_logprobs: torch.Tensor | None = None,
                positive: torch.Tensor | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per-token policy loss (to be aggregated) and diagnostics (clip_frac, approx_kl = mean of log π_old/π,
    ratio_mean = masked mean of π/π_old).

    regular (verl compute_policy_loss_vanilla, SkyRL ppo_policy_loss, RLinf compute_ppo_actor_loss):
      −min(r·A, clip(r, 1−ε_low, 1+ε_high)·A) with r = exp(clamp(log π − log π_old, ±20)); ε_low ≠ ε_high is
      DAPO's decoupled clip (ROLL pg_clip_low/high, AReaL eps_clip_higher).
    dual_clip (the same, and verl's/SkyRL's dual clip; AReaL c_clip and RLinf clip_ratio_c are the same
      bound): for A < 0 the loss is at most −c·A (c = clip_ratio_c > 1; ROLL's dual_clip_loss is c = 1 + 2·pg_clip).
    gspo (verl compute_policy_loss_gspo, SkyRL gspo_policy_loss, ROLL importance_sampling: seq, ChatLearn
      calculate_gspo_loss with its loss_cap): the sequence's geometric-mean ratio on every token (log-ratio
      clamped ≤ 10), per-token gradient kept (GSPO-token). options.gspo_form "sequence" is AReaL's
      (ppo_actor_loss_fn with importance_sampling_level "sequence"): the gradient flows through the sequence
      ratio and each token carries its sequence's mean advantage.
    cispo (verl compute_policy_loss_cispo, SkyRL compute_policy_loss_cispo): −sg(clip(r, 1−ε_low, 1+ε_high))·A·log π.
    sapo (verl compute_policy_loss_sapo, SkyRL sapo_policy_loss, AReaL sapo_loss_fn): −f(r)·A with the gate
      f(r) = σ(τ(r − 1))·4/τ, τ = τ_pos for A > 0 and τ_neg otherwise.
    clip_cov (verl/SkyRL compute_policy_loss_clip_cov): PPO's clipped loss, with a random clip_cov_ratio share
      of the unclipped tokens whose covariance (A − mean A)(log π − mean log π) lies in (lb, ub) detached.
    kl_cov (verl/SkyRL compute_policy_loss_kl_cov): −r·A, plus kl_cov_coef·|log r| on the kl_cov_ratio share of
      tokens with the largest covariance.
    cross_entropy (SkyRL cross_entropy_loss): −log π (supervised). importance_sampling (SkyRL
      importance_sampling_loss): −r·A, unclipped.
    rollout_is (the `skyrl` package's rollout_is_policy_loss): CISPO's −sg(w)·A·log π with the ratio taken
      against the rollout engine's log-probs, w = r inside (1−ε_low, 1+ε_high) and 0 outside (what an
      asynchronous run trains with: the policy that sampled a stale response is gone).
    topr (ROLL ActorPGWorker._compute_topr_loss, Tapered Off-Policy REINFORCE): −A·log π for the samples whose score
      is positive (`positive`, per sample), −sg(clip(r, 0, 1))·A·log π for the rest, each side × its weight.

    Options (ir.PolicyOptions): loss_cap (ChatLearn calculate_grpo_loss: min(loss, 3), after the clip, with the
    log-ratio clamped ≤ 10 by log_ratio_max); decoupled (AReaL ppo_actor_loss_fn: π_old is the proximal policy,
    the loss is × π_prox/π_behave, π_behave = rollout_logprobs, tokens above behav_imp_weight_cap drop out);
    tis_cap (SkyRL compute_tis_ratio, RLinf importance_sampling_fix): × min(π_old/π_rollout, cap), detached,
    per token or per sequence; with tis_floor (RLinf up to v0.2) × max(π_old/π_rollout, cap) instead, and the
    ratio r taken against π_rollout (π_old enters the weight alone); sequence_mask (SkyRL compute_sequence_mask):
    × 0 for the sequences whose ratio π_old/π_rollout leaves its bounds (sequence_mask below)."""
    o = spec.options
    advantages = advantages.float()
    mask_f = mask.float()
    logp = logprobs.float()
    zero = torch.zeros((), device=logp.device)
    clip_frac = zero
    behave = None
    if o.decoupled or o.tis_cap is not None or o.sequence_mask is not None:
        if rollout_logprobs is None:
            raise ValueError("decoupled PPO, truncated importance sampling and the sequence mask need the rollout "
                             "engine's log-probs")
        behave = rollout_logprobs.float()
    raw_log_ratio = logp - (behave if o.tis_floor and behave is not None else old_logprobs.float())
    # The decoupled loss's tokens: within the mask and, with a cap, a behaviour weight π_prox/π_behave ≤ cap.
    behaviour_kept = mask_f > 0
    if o.decoupled:
        with torch.no_grad():
            weight = (old_logprobs.float() - behave).exp()
            if o.behav_imp_weight_cap is not None:
                behaviour_kept = behaviour_kept & (weight <= o.behav_imp_weight_cap)
    kind = spec.kind
    if kind in ("regular", "dual_clip"):
        log_ratio = _clamped(raw_log_ratio, spec, -20.0, 20.0)
        ratio = log_ratio.exp()
        loss, was_clipped = _clip_surrogate(ratio, advantages, spec)
        clip_frac = _masked_mean(was_clipped.float(), mask_f)
        if kind == "dual_clip":
            if spec.clip_ratio_c <= 1.0:
                raise ValueError(f"dual-clip needs clip_ratio_c > 1, got {spec.clip_ratio_c}")
            loss = torch.where(advantages < 0, torch.minimum(loss, -advantages * spec.clip_ratio_c), loss)
    elif kind == "gspo" and o.gspo_form == "sequence":
        # AReaL _compute_sequence_level_ratio_and_advantages: exp(mean log-ratio) with its gradient, and the
        # sequence's mean advantage on each token (no log-ratio clamp), over the tokens its loss mask keeps.
        seq_mask = behaviour_kept.float() if o.decoupled and o.cap_before_sequence_means else mask_f
        lengths = seq_mask.sum(dim=1, keepdim=True).clamp(min=1.0)
        seq = (raw_log_ratio * seq_mask).sum(dim=1, keepdim=True) / lengths
        ratio = _clamped(seq, spec, None, None).exp().expand_as(raw_log_ratio)
        advantages = ((advantages * seq_mask).sum(dim=1, keepdim=True) / lengths).expand_as(raw_log_ratio)
        loss, was_clipped = _clip_surrogate(ratio, advantages, spec)
        clip_frac = _masked_mean(was_clipped.float(), mask_f)
    elif kind == "gspo":
        seq = (raw_log_ratio * mask_f).sum(dim=1) / mask_f.sum(dim=1).clamp(min=1.0)
        log_ratio = _clamped(logp - logp.detach() + seq.detach().unsqueeze(1), spec, None, 10.0)
        ratio = log_ratio.exp()
        loss, was_clipped = _clip_surrogate(ratio, advantages, spec)
        clip_frac = _masked_mean(was_clipped.float(), mask_f)
    elif kind == "topr":
        if positive is None:
            raise ValueError("the TOPR loss needs each sample's score sign (`positive`)")
        ratio = raw_log_ratio.exp()  # unclamped, as ROLL takes it; the negative side caps it at 1
        negative = (positive.float().to(logp.device) <= 0).unsqueeze(1).expand_as(logp)
        weight = torch.where(negative, o.topr_negative_weight * ratio.clamp(0.0, 1.0).detach(),
                             torch.full_like(logp, o.topr_positive_weight))
        loss = -weight * advantages * logp
        clip_frac = _masked_mean((negative & (ratio > 1.0)).float(), mask_f)
    elif kind == "cispo":
        ratio = _clamped(raw_log_ratio, spec, -20.0, 20.0).exp()
        capped = ratio.clamp(1.0 - spec.clip_low, 1.0 + spec.clip_high)
        loss = -capped.detach() * advantages * logp
        clip_frac = _masked_mean((ratio != capped).float(), mask_f)
    elif kind == "sapo":
        ratio = _clamped(raw_log_ratio, spec, -20.0, 20.0).exp()
        tau = torch.where(advantages > 0, torch.full_like(advantages, o.sapo_tau_pos),
                          torch.full_like(advantages, o.sapo_tau_neg))
        loss = -torch.sigmoid(tau * (ratio - 1.0)) * (4.0 / tau) * advantages
    elif kind == "clip_cov":
        ratio = _clamped(raw_log_ratio, spec, None, None).exp()
        loss, was_clipped = _clip_surrogate(ratio, advantages, spec)
        with torch.no_grad():
            live = mask_f > 0
            cov = (advantages - _masked_mean(advantages, mask_f)) * (logp - _masked_mean(logp, mask_f))
            cov = cov.masked_fill(~live | was_clipped, -math.inf)
            n_clip = max(int(o.clip_cov_ratio * float(mask_f.sum())), 1)
            candidates = torch.nonzero((cov < o.clip_cov_ub) & (cov > o.clip_cov_lb) & live)
            keep = torch.ones_like(advantages)
            if len(candidates):
                chosen = candidates[torch.randperm(len(candidates))[:min(n_clip, len(candidates))]]
                keep[chosen[:, 0], chosen[:, 1]] = 0.0
        loss = loss * keep
        clip_frac = _masked_mean((keep == 0).float(), mask_f)
    elif kind == "kl_cov":
        log_ratio = _clamped(raw_log_ratio, spec, None, None)
        ratio = log_ratio.exp()
        loss = -advantages * ratio
        with torch.no_grad():
            live = torch.nonzero(mask_f.reshape(-1) > 0, as_tuple=True)[0]
            chosen = torch.zeros(mask_f.numel(), dtype=torch.bool, device=mask_f.device)
            if len(live):
                adv_v, logp_v = advantages.reshape(-1)[live], logp.detach().reshape(-1)[live]
                cov = (adv_v - adv_v.mean()) * (logp_v - logp_v.mean())
                k = max(1, int(len(cov) * o.kl_cov_ratio))
                chosen[live[torch.topk(cov, min(k, len(cov)), largest=True).indices]] = True
        loss = torch.where(chosen.view_as(loss), loss + o.kl_cov_coef * log_ratio.abs(), loss)
        ratio = ratio.detach()
    elif kind == "cross_entropy":
        ratio = raw_log_ratio.exp()
        loss = -logp
    elif kind == "importance_sampling":
        ratio = raw_log_ratio.exp()
        loss = -ratio * advantages
    elif kind == "rollout_is":
        if rollout_logprobs is None:
            raise ValueError("the rollout_is loss needs the rollout engine's log-probs")
        ratio = _clamped(logp - rollout_logprobs.float(), spec, -20.0, 20.0).exp()
        inside = (ratio > 1.0 - spec.clip_low) & (ratio < 1.0 + spec.clip_high)
        loss = -torch.where(inside, ratio, torch.zeros_like(ratio)).detach() * advantages * logp
        clip_frac = _masked_mean((~inside).float(), mask_f)
    else:
        raise ValueError(f"unknown policy loss {kind!r}; expected one of {', '.join(POLICY_LOSSES)}")
    if o.loss_cap is not None:
        loss = torch.minimum(loss, torch.full_like(loss, o.loss_cap))
    if o.decoupled:
        # A weight above the cap, infinite ones included, is 0.
        loss = loss * torch.where(behaviour_kept, weight, torch.zeros_like(weight))
    if o.tis_cap is not None:
        loss = loss * tis_weights(old_logprobs, behave, mask_f, o.tis_cap, o.tis_level, floor=o.tis_floor)
    stats = {}
    if o.sequence_mask is not None:
        kept = sequence_mask(old_logprobs, behave, mask_f, o.sequence_mask, o.sequence_mask_low, o.sequence_mask_high)
        loss = loss * kept
        stats["masked_sequences"] = 1.0 - kept[:, 0].mean()
    approx_kl = _masked_mean(-raw_log_ratio, mask_f)
    ratio_mean = _masked_mean(ratio.detach(), mask_f)
    return loss, {"clip_frac": clip_frac.detach(), "approx_kl": approx_kl.detach(), "ratio_mean": ratio_mean, **stats}


def m2po_kept(behaviour_logprobs: torch.Tensor, proximal_logprobs: torch.Tensor, mask: torch.Tensor,
              threshold: float) -> torch.Tensor:
    """AReaL's M2PO mask over one micro-batch: 1 for the tokens kept, 0 for those left out. Among the tokens in
    `mask`, sorted by their second moment m = (log π_behave − log π_prox)² from the largest, the first k leave, k the
    least number for which the mean of the rest is below `threshold`; when no such k exists all but the smallest
    leave. Without a token in the mask nothing changes."""
    live = mask.reshape(-1) > 0
    m2 = (behaviour_logprobs.float() - proximal_logprobs.float()).detach().square().reshape(-1)[live]
    kept = torch.zeros(live.shape, dtype=torch.float32, device=mask.device)
    n = m2.numel()
    if n == 0:
        return mask.float()
    ordered, order = torch.sort(m2, descending=True)
    tail_means = ordered.flip(0).cumsum(0).flip(0) / torch.arange(n, 0, -1, device=m2.device, dtype=m2.dtype)
    below = torch.nonzero(tail_means < threshold)
    leave = int(below[0]) if len(below) else n - 1
    sorted_kept = torch.ones(n, dtype=torch.float32, device=mask.device)
    sorted_kept[:leave] = 0.0
    kept[live] = sorted_kept[torch.argsort(order)]
    return kept.view_as(mask)


def sequence_mask(old_logprobs: torch.Tensor, rollout_logprobs: torch.Tensor, mask: torch.Tensor, metric: str,
                  low: float | None, high: float | None) -> torch.Tensor:
    """1 for the sequences kept, 0 for those whose importance ratio π_old/π_rollout leaves [low, high], per token
    (SkyRL off_policy_correction_utils.compute_sequence_mask): geometric: exp(the masked mean log-ratio); product:
    exp(the masked sum); both clamped to ±20 in log space. A bound that is None does not mask."""
    log_ratio = _sequence_log_ratio(old_logprobs, rollout_logprobs, mask)
    if metric == "geometric":
        log_ratio = log_ratio / mask.sum(dim=-1, keepdim=True).clamp(min=1.0)
    elif metric != "product":
        raise ValueError(f"unknown sequence mask {metric!r}; expected geometric or product")
    ratio = log_ratio.clamp(-20.0, 20.0).exp()
    keep = torch.ones_like(ratio, dtype=torch.bool)
    if low is not None:
        keep &= ratio >= low
    if high is not None:
        keep &= ratio <= high
    return keep.float().expand_as(mask)


def _sequence_log_ratio(old_logprobs: torch.Tensor, rollout_logprobs: torch.Tensor, mask: torch.Tensor
                        ) -> torch.Tensor:
    """Each sequence's log π_old/π_rollout over its tokens in `mask`, detached (rows × 1)."""
    return ((old_logprobs.float() - rollout_logprobs.float()).detach() * mask.float()).sum(dim=-1, keepdim=True)


def tis_weights(old_logprobs: torch.Tensor, rollout_logprobs: torch.Tensor, mask: torch.Tensor, cap: float,
                level: str = "token", floor: bool = False) -> torch.Tensor:
    """Truncated importance-sampling weights between the trainer's and the rollout engine's policy (SkyRL
    skyrl/backends/skyrl_train/utils/off_policy_correction_utils.py compute_tis_ratio): token: min(π_old/π_rollout,
    cap) per token; sequence: min(Π_t π_old/π_rollout, cap) per sequence (the log-ratio summed over the mask),
    both with the log-ratio clamped to ±20 and detached. `floor` (RLinf's importance_sampling_fix up to v0.2, per
    token): max(π_old/π_rollout, cap), the log-ratio unclamped as RLinf has it."""
    log_ratio = (old_logprobs.float() - rollout_logprobs.float()).detach()
    if floor:
        if level != "token":
            raise ValueError("a floored importance weight is RLinf's, per token")
        return log_ratio.exp().clamp(min=cap)
    if level == "token":
        return log_ratio.clamp(-20.0, 20.0).exp().clamp(max=cap)
    if level == "sequence":
        seq = _sequence_log_ratio(old_logprobs, rollout_logprobs, mask)
        return seq.clamp(-20.0, 20.0).exp().clamp(max=cap).expand_as(log_ratio)
    raise ValueError(f"unknown TIS level {level!r}; expected token or sequence")


def actor_loss(logprobs: torch.Tensor, mb: Mapping[str, Any], spec: ActorLossSpec, num_tokens: float | None = None,
               num_sequences: float | None = None, entropy: torch.Tensor | None = None
               ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The actor's loss for one micro-batch, the one implementation both training backends call.

    `mb` holds the micro-batch's per-token tensors (ACTOR_TOKEN_KEYS, same width as `logprobs`; without
    old_logprobs the update is on-policy and the current log-probs, detached, stand in) and per-sample ones
    (ACTOR_SAMPLE_KEYS; with proximal_weight the old log-probs are interpolated from the engine's). `entropy` is
    the per-token entropy when spec.entropy_coef is set (the backend computes it from its logits). The result is
    this micro-batch's share of the global mini-batch loss given the (num_tokens, num_sequences) denominators:

        (agg(policy loss × sample weights) + kl_coef·agg(KL to the reference))·loss_coef − entropy_coef·agg(H)

    (ROLL ActorWorker.loss_func's order: the KL inside rl_loss_coef, the entropy bonus outside; with loss_coef 1
    and no weights this is verl's dp_actor update_policy). RLinf's early_stop_imp_ratio zeroes the whole loss of a
    micro-batch whose mean importance ratio exceeds it (RLinf averages that ratio over data-parallel ranks
    first; here each rank decides for its own micro-batch)."""
    mask = mb["response_mask"].float()
    old = mb["old_logprobs"] if "old_logprobs" in mb else logprobs.detach()
    if "proximal_weight" in mb:  # log π_prox = log π_behave + α·(log π − log π_behave), π detached
        behave = mb["rollout_logprobs"].float()
        old = behave + mb["proximal_weight"].float().unsqueeze(1) * (logprobs.detach().float() - behave)
    pg, stats = policy_loss(logprobs, old, mb["advantages"], mask, spec.policy,
                            rollout_logprobs=mb.get("rollout_logprobs"), positive=mb.get("positive"))
    threshold = spec.policy.options.m2_threshold
    if threshold is not None and "rollout_logprobs" in mb:
        kept = m2po_kept(mb["rollout_logprobs"], old, mask, threshold)
        # the mean over the kept tokens, with the micro-batch's weight that of all its tokens (AReaL's loss weight)
        pg = pg * kept * (mask.sum() / kept.sum().clamp(min=1.0))
    w = spec.weighting
    if w.difficulty_loss_weight or w.length_loss_weight:
        pg = pg * sample_weights(mask, w, mb.get("difficulty")).unsqueeze(1)
    loss = aggregate(pg, mask, spec.aggregation, num_tokens, num_sequences)
    if spec.length_norm:
        loss = loss / spec.length_norm
    out = {"pg_loss": loss.detach(), "clip_frac": stats["clip_frac"], "approx_kl": stats["approx_kl"]}
    if "masked_sequences" in stats:  # the share of sequences the off-policy sequence mask took out of the loss
        out["masked_sequences"] = stats["masked_sequences"]
    # Only the policy loss is divided by the length unless the framework scales its whole loss (length_norm_all_terms);
    # the KL and entropy reported stay the plain aggregates.
    term_norm = spec.length_norm if spec.length_norm and spec.length_norm_all_terms else 1.0
    if spec.kl_coef and "ref_logprobs" in mb:
        kl = aggregate(kl_estimate(logprobs, mb["ref_logprobs"], spec.kl_estimator), mask,
                       spec.kl_aggregation or spec.aggregation, num_tokens, num_sequences)
        loss = loss + spec.kl_coef * kl / term_norm
        out["kl_loss"] = kl.detach()
    loss = loss * spec.policy.options.loss_coef
    if spec.entropy_coef:
        if entropy is None:
            raise ValueError("the entropy bonus needs the per-token entropy")
        ent = aggregate(entropy, mask, spec.entropy_aggregation or spec.aggregation, num_tokens, num_sequences)
        loss = loss - spec.entropy_coef * ent / term_norm
        out["entropy"] = ent.detach()
    stop = spec.policy.options.early_stop_ratio
    if stop is not None and float(stats["ratio_mean"]) > stop:
        loss = loss * 0.0
        out["early_stopped"] = torch.ones((), device=loss.device)
    return loss, out


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor,
               clip: float | None) -> torch.Tensor:
    """Per-token ½·(V − R)², and with `clip` PPO's pessimistic max with the clipped prediction
    V_old + clip(V − V_old, −c, c) (verl compute_value_loss, SkyRL ppo_critic_loss; aggregate it)."""
    values, returns = values.float(), returns.float()
    loss = (values - returns).square()
    if clip is not None:
        clipped = old_values.float() + (values - old_values.float()).clamp(-clip, clip)
        loss = torch.maximum(loss, (clipped - returns).square())
    return 0.5 * loss


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the softmax over the last dimension, per position."""
    logits = logits.float()
    logz = torch.logsumexp(logits, dim=-1)
    return logz - (torch.softmax(logits, dim=-1) * logits).sum(dim=-1)


# ------------------------------------------------------------------------------------------ learning rate


def lr_schedule(opt: Optimizer, length: int | None) -> LrSchedule:
    """The schedule of `opt` for a run of `length` schedule steps (optimizer or training steps, opt.schedule_unit):
    a decay of opt.decay_steps after the warm-up when set, else one that ends with the run (transformers'
    num_training_steps, Megatron's lr_decay_steps at the run's length); without a length, no decay."""
    warmup = max(opt.warmup_steps, 0)
    if opt.decay_steps is not None:
        decay: float | None = opt.decay_steps
    else:
        decay = max(length - warmup, 0) if length else None
    return LrSchedule(lr=opt.lr, shape=opt.scheduler, warmup_steps=warmup, warmup_start_lr=opt.warmup_start_lr,
                      min_lr=opt.min_lr, decay_steps=decay)


def lr_at(step: int, schedule: LrSchedule) -> float:
    """The learning rate of schedule step `step` (0 for the first update).

    One formula serves every framework rlcfg reads, because they agree on it:
    - transformers' schedulers (SkyRL, ROLL's FSDP path, AReaL's FSDP engine) are LambdaLR, evaluated at 0 before the
      first optimizer step: warm-up step/warmup (transformers/optimization.py _get_linear_schedule_with_warmup_lr_lambda
      and the cosine and constant ones), then progress (step - warmup)/max(1, total - warmup);
    - Megatron's OptimizerParamScheduler (ChatLearn, RLinf, ROLL, SkyRL and AReaL Megatron paths) calls step(0) at
      construction and step(1) after each update: init_lr + (max_lr - init_lr)·step/warmup while step <= warmup,
      then min_lr + coeff·(max_lr - min_lr) with ratio (step - warmup)/(decay_steps - warmup), min_lr past the end.
    Both give lr at step == warmup. Past the decay's end the lr stays at min_lr (transformers' linear lambda is
    floored at 0 there; its cosine would rise again, which no lowered run reaches: each spans its run)."""
    s = schedule
    if s.warmup_steps > 0 and step < s.warmup_steps:
        return s.warmup_start_lr + (s.lr - s.warmup_start_lr) * step / s.warmup_steps
    if s.shape == "constant" or s.decay_steps is None:
        return s.lr
    # transformers divides by max(1, total - warmup); Megatron asserts a decay of at least one step.
    progress = min(1.0, max(step - s.warmup_steps, 0) / max(1, s.decay_steps))
    if s.shape == "linear":
        coeff = 1.0 - progress
    else:
        coeff = 0.5 * (1.0 + math.cos(math.pi * progress))
    return s.min_lr + coeff * (s.lr - s.min_lr)
