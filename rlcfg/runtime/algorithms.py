"""The RL mathematics as pure torch functions: advantages, KL estimators, policy and value losses, loss
aggregation, reward shaping, DAPO's filters.

Conventions: per-token tensors are [batch, response_len] with a 0/1 `mask` of the same shape marking real
response tokens; per-sample tensors are [batch]. Samples of one prompt's group sit next to each other
(sample i belongs to group i // group_size). Nothing here knows about workers, devices or configs, so every
function is tested against numbers worked out by hand.
"""

from __future__ import annotations

import torch

AGGREGATIONS = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean")
KL_ESTIMATORS = ("k1", "k2", "k3", "abs")


# ---------------------------------------------------------------------------------------------------- advantages

def _groups(values: torch.Tensor, group_size: int) -> torch.Tensor:
    if values.ndim != 1 or values.numel() % group_size:
        raise ValueError(f"{values.numel()} samples do not split into groups of {group_size}")
    return values.view(-1, group_size)


def grpo_advantages(scores: torch.Tensor, group_size: int, normalize_std: bool = True,
                    eps: float = 1e-6) -> torch.Tensor:
    """(score − group mean), divided by the group's standard deviation (unbiased, as torch.std) when asked.
    A group of identical scores gets advantage 0 (the eps keeps it finite)."""
    g = _groups(scores.float(), group_size)
    centred = g - g.mean(dim=1, keepdim=True)
    if normalize_std and group_size > 1:
        centred = centred / (g.std(dim=1, keepdim=True) + eps)
    return centred.reshape(-1)


def rloo_advantages(scores: torch.Tensor, group_size: int) -> torch.Tensor:
    """Leave-one-out baseline: a sample's score minus the mean of the other samples of its group."""
    if group_size < 2:
        raise ValueError("RLOO needs at least 2 samples per prompt")
    g = _groups(scores.float(), group_size)
    others = (g.sum(dim=1, keepdim=True) - g) / (group_size - 1)
    return (g - others).reshape(-1)


def whiten(values: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True, eps: float = 1e-8) -> torch.Tensor:
    """Normalise the masked entries to unit variance (and zero mean unless shift_mean=False)."""
    n = mask.sum().clamp(min=1)
    mean = (values * mask).sum() / n
    var = (((values - mean) * mask) ** 2).sum() / n
    out = (values - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return out * mask


def discounted_returns(token_rewards: torch.Tensor, mask: torch.Tensor, gamma: float) -> torch.Tensor:
    """G_t = r_t + γ·G_{t+1}, restarted after each sequence's last real token."""
    returns = torch.zeros_like(token_rewards, dtype=torch.float32)
    running = torch.zeros(token_rewards.shape[0], dtype=torch.float32, device=token_rewards.device)
    for t in reversed(range(token_rewards.shape[1])):
        running = token_rewards[:, t].float() + gamma * running * mask[:, t]
        returns[:, t] = running
    return returns * mask


def reinforce_pp_advantages(token_rewards: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0) -> torch.Tensor:
    """REINFORCE++: discounted return of the token rewards (score at the last token, minus any KL penalty per
    token), whitened over the whole batch instead of per group."""
    return whiten(discounted_returns(token_rewards, mask, gamma), mask)


def gae(token_rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float,
        lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation. Returns (advantages, returns); returns = advantages + values are the
    critic's targets. The value after a sequence's last token is 0."""
    rewards, values = token_rewards.float(), values.float()
    advantages = torch.zeros_like(rewards)
    last = torch.zeros(rewards.shape[0], dtype=torch.float32, device=rewards.device)
    next_value = torch.zeros_like(last)
    for t in reversed(range(rewards.shape[1])):
        m = mask[:, t].float()
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        last = (delta + gamma * lam * last) * m
        advantages[:, t] = last
        # Padding after the end must not leak a value into the last real token.
        next_value = values[:, t] * m
    returns = (advantages + values) * mask
    return advantages * mask, returns


def token_level_scores(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Put each sample's scalar score on its last response token."""
    out = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
    lengths = mask.sum(dim=1).long()
    rows = torch.nonzero(lengths > 0).squeeze(1)
    out[rows, lengths[rows] - 1] = scores[rows].float()
    return out


# ---------------------------------------------------------------------------------------------------- KL

def kl_estimate(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, estimator: str) -> torch.Tensor:
    """Per-token estimate of KL(π‖π_ref) from samples of π (Schulman's k1, k2, k3; `abs` is |k1|).
    k3 = exp(ref − logp) − (ref − logp) − 1, with the log-ratio clamped to ±20 so one outlier cannot overflow."""
    diff = logprobs.float() - ref_logprobs.float()
    if estimator == "k1":
        return diff
    if estimator == "abs":
        return diff.abs()
    if estimator == "k2":
        return 0.5 * diff.square()
    if estimator == "k3":
        log_ratio = (-diff).clamp(-20.0, 20.0)
        return log_ratio.exp() - log_ratio - 1.0
    raise ValueError(f"unknown KL estimator {estimator!r}; expected one of {', '.join(KL_ESTIMATORS)}")


# ---------------------------------------------------------------------------------------------------- aggregation

def aggregate(values: torch.Tensor, mask: torch.Tensor, mode: str, num_tokens: float | None = None,
              num_sequences: float | None = None) -> torch.Tensor:
    """Reduce a per-token loss to a scalar.

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


# ---------------------------------------------------------------------------------------------------- losses

def policy_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                mode: str = "regular", clip_low: float = 0.2, clip_high: float = 0.2,
                clip_ratio_c: float = 3.0) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per-token clipped surrogate loss (to be aggregated) and diagnostics.

    regular: PPO's −min(r·A, clip(r, 1−ε_low, 1+ε_high)·A) (ε_low ≠ ε_high is DAPO's decoupled clip);
    dual_clip: additionally bounds the loss of negative-advantage tokens by −c·A (c = clip_ratio_c > 1);
    gspo: the importance ratio is the sequence's geometric-mean ratio, applied to every token of it, with the
    per-token gradient kept (GSPO's token-level form)."""
    advantages = advantages.float()
    mask_f = mask.float()
    log_ratio = logprobs.float() - old_logprobs.float()
    if mode == "gspo":
        seq_log_ratio = (log_ratio * mask_f).sum(dim=1) / mask_f.sum(dim=1).clamp(min=1.0)
        log_ratio = seq_log_ratio.detach().unsqueeze(1) + logprobs.float() - logprobs.float().detach()
        log_ratio = log_ratio.clamp(max=10.0)
    else:
        log_ratio = log_ratio.clamp(-20.0, 20.0)
    ratio = log_ratio.exp()
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    loss = torch.maximum(unclipped, clipped)
    clip_frac = ((clipped > unclipped).float() * mask_f).sum() / mask_f.sum().clamp(min=1.0)
    if mode == "dual_clip":
        if clip_ratio_c <= 1.0:
            raise ValueError(f"dual-clip needs clip_ratio_c > 1, got {clip_ratio_c}")
        bounded = torch.minimum(loss, -advantages * clip_ratio_c)
        loss = torch.where(advantages < 0, bounded, loss)
    elif mode not in ("regular", "gspo"):
        raise ValueError(f"unknown policy loss {mode!r}; expected regular, dual_clip or gspo")
    approx_kl = (-log_ratio * mask_f).sum() / mask_f.sum().clamp(min=1.0)
    return loss, {"clip_frac": clip_frac.detach(), "approx_kl": approx_kl.detach()}


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor,
               clip: float | None) -> torch.Tensor:
    """Per-token ½·(V − R)², and with `clip` PPO's pessimistic max with the clipped prediction
    V_old + clip(V − V_old, −c, c)."""
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


# ---------------------------------------------------------------------------------------------------- rewards

def shape_rewards(scores: torch.Tensor, scale: float = 1.0, bias: float = 0.0,
                  clip: float | None = None) -> torch.Tensor:
    """score·scale + bias, then clipped to [−clip, clip]."""
    out = scores.float() * scale + bias
    if clip is not None:
        out = out.clamp(-clip, clip)
    return out


def overlong_penalty(lengths: torch.Tensor, max_length: int, penalty_start: int, factor: float = 1.0) -> torch.Tensor:
    """DAPO's soft overlong punishment: 0 up to `penalty_start` tokens, then falling linearly to −factor at
    `max_length` (and staying there)."""
    buffer = max_length - penalty_start
    if buffer <= 0:
        raise ValueError(f"the overlong penalty starts at {penalty_start} tokens, which is not below the "
                         f"maximum response length {max_length}")
    excess = (lengths.float() - penalty_start).clamp(min=0.0)
    return -(excess / buffer).clamp(max=1.0) * factor


def groups_with_signal(scores: torch.Tensor, group_size: int) -> torch.Tensor:
    """DAPO dynamic sampling: a per-sample bool, False for every sample of a group whose scores are all equal
    (such a group has zero advantage and only dilutes the batch)."""
    g = _groups(scores.float(), group_size)
    varied = (g.max(dim=1).values - g.min(dim=1).values) > 0
    return varied.repeat_interleave(group_size)


def mask_truncated(mask: torch.Tensor, finished: torch.Tensor) -> torch.Tensor:
    """The loss mask with every response cut at the length limit (finished = False) removed entirely: a cut
    response's score judges an unfinished answer, so it teaches nothing reliable."""
    return mask * finished.to(mask.dtype).unsqueeze(1)
