"""One step of supervised training (SFT, reward model), as AReaL computes it: the losses, a worker's optimizer step
and evaluation over its share of the batch (TrainWorker.train_supervised and evaluate_supervised call these), and the
padded batches and metrics the supervised run hands out and gathers (rlcfg.runtime.supervised).

Pure functions of tensors and a model engine: nothing here starts a process or knows a run.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

# ---------------------------------------------------------------------------------------------- losses (pure)

def token_logprobs(logits: Any, input_ids: Any, temperature: float = 1.0) -> Any:
    """log p(token t+1 | tokens ≤ t) for every position but the last: shape [rows, width − 1]."""
    import torch

    logp = torch.log_softmax(logits[:, :-1].float() / temperature, dim=-1)
    return logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)


def sft_loss(logprobs: Any, loss_mask: Any, denominator: float | None = None) -> Any:
    """The SFT loss: −Σ log p over the tokens `loss_mask` marks, divided by `denominator` (the whole batch's
    count of such tokens, when this is one micro-batch of it; by default this batch's own count).
    `logprobs` are token_logprobs (position t scores token t + 1); `loss_mask` is per input token, so token
    t + 1 is scored where loss_mask[:, t + 1] is set."""
    mask = loss_mask[:, 1:].to(logprobs.dtype)
    count = float(mask.sum()) if denominator is None else float(denominator)
    return -(logprobs * mask).sum() / max(count, 1.0)


def sft_sums(logprobs: Any, scored: Any) -> dict[str, float]:
    """What step_metrics adds up for SFT: the negative log-likelihood and count of the scored tokens, and each
    sequence's perplexity. `scored` marks the tokens `logprobs` score (one column each)."""
    import torch

    with torch.no_grad():
        m = scored.to(logprobs.dtype)
        nll = -(logprobs.detach() * m).sum(dim=1)
        tokens = m.sum(dim=1)
        per_seq = nll / tokens.clamp(min=1)
        return {"nll_sum": float(nll.sum()), "tokens": float(tokens.sum()),
                "ppl_sum": float(per_seq.exp()[tokens > 0].sum()), "sequences": float((tokens > 0).sum())}


def last_token_scores(values: Any, attention_mask: Any) -> Any:
    """Each right-padded row's score at its last real token."""
    import torch

    last = attention_mask.long().sum(dim=1) - 1
    return values[torch.arange(values.shape[0], device=values.device), last.to(values.device)]


def pairwise_loss(chosen: Any, rejected: Any, denominator: float | None = None) -> Any:
    """Bradley–Terry: Σ −log σ(chosen − rejected) over the pairs, divided by `denominator` (the whole batch's
    pair count; by default these pairs' own count)."""
    import torch

    count = chosen.shape[0] if denominator is None else float(denominator)
    return -torch.nn.functional.logsigmoid(chosen.float() - rejected.float()).sum() / max(count, 1.0)


# ---------------------------------------------------------------------------------------------- worker side

def _micro_batches(batch: Mapping[str, Any], rows: int):
    n = batch["input_ids"].shape[0]
    for i in range(0, n, rows):
        mb = {k: v[i:i + rows] for k, v in batch.items()}
        width = int(mb["attention_mask"].sum(dim=1).max())  # right-padded: the columns any row uses
        yield {k: v[:, :width] for k, v in mb.items()}


def _forward(engine: Any, mb: Mapping[str, Any]) -> Any:
    ids = mb["input_ids"].to(engine.device)
    attn = mb["attention_mask"].to(engine.device)
    pos = (attn.cumsum(dim=1) - 1).clamp(min=0)
    mask = None if bool(attn.all()) else attn  # see FSDPEngine._forward: SDPA's causal fast path
    return engine.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False).logits


def _micro_loss(engine: Any, kind: str, mb: Mapping[str, Any], denominator: float | None):
    """One micro-batch's loss (its share of the batch's, with `denominator`) and its sums for the metrics."""
    import torch

    logits = _forward(engine, mb)
    if kind == "sft":
        logprobs = token_logprobs(logits, mb["input_ids"].to(engine.device), engine.temperature)
        mask = mb["loss_mask"].to(engine.device)
        return sft_loss(logprobs, mask, denominator), sft_sums(logprobs, mask[:, 1:])
    scores = last_token_scores(logits[..., 0], mb["attention_mask"].to(engine.device)).float()
    chosen, rejected = scores[0::2], scores[1::2]
    loss = pairwise_loss(chosen, rejected, denominator)
    with torch.no_grad():
        real = (mb["loss_mask"][0::2].sum(dim=1) > 0).to(scores.device).float()  # evaluation pads with empty pairs
        stats = {"loss_sum": float((-torch.nn.functional.logsigmoid(chosen - rejected) * real).sum()),
                 "pairs": float(real.sum()), "correct": float(((chosen > rejected).float() * real).sum()),
                 "chosen_sum": float((chosen * real).sum()), "rejected_sum": float((rejected * real).sum())}
    return loss, stats


def _rows_per_micro(kind: str, micro_batch: int) -> int:
    # A reward model's micro-batch counts pairs, and a pair's two rows must stay together.
    return 2 * max(1, micro_batch) if kind == "reward_model" else max(1, micro_batch)


def train_step(engine: Any, batch: Mapping[str, Any], cfg: Mapping[str, Any]) -> dict[str, float]:
    """One optimizer step of an FSDPEngine on this rank's share of a batch. `cfg["denominator"]`: the batch's
    answer tokens (SFT) or pairs (reward model) over all ranks; × world undoes FSDP's gradient averaging, so the
    update is that of the whole batch's mean loss."""
    kind = cfg["kind"]
    engine.model.train()
    engine.optimizer.zero_grad(set_to_none=True)
    sums: dict[str, float] = {}
    t0 = time.perf_counter()
    for mb in _micro_batches(batch, _rows_per_micro(kind, int(cfg["micro_batch"]))):
        loss, stats = _micro_loss(engine, kind, mb, cfg["denominator"])
        (loss * engine.world).backward()
        for k, v in stats.items():
            sums[k] = sums.get(k, 0.0) + v
    t1 = time.perf_counter()
    sums["lr"] = engine.optimizer.param_groups[0]["lr"]  # the rate of this update (the scheduler moves on after it)
    sums["grad_norm"] = engine._step()
    sums.update(forward_backward_s=t1 - t0, optimizer_s=time.perf_counter() - t1)
    return sums


def evaluate_step(engine: Any, batch: Mapping[str, Any], cfg: Mapping[str, Any]) -> dict[str, float]:
    """The loss sums of this rank's share of the validation data, without gradients."""
    import torch

    kind = cfg["kind"]
    engine.model.eval()
    sums: dict[str, float] = {}
    with torch.no_grad():
        for mb in _micro_batches(batch, _rows_per_micro(kind, int(cfg["micro_batch"]))):
            _loss, stats = _micro_loss(engine, kind, mb, None)
            for k, v in stats.items():
                sums[k] = sums.get(k, 0.0) + v
    return sums


def step_metrics(kind: str, parts: list[Mapping[str, float]], prefix: str) -> dict[str, float]:
    """The ranks' sums as the step's metrics: the token-mean loss and per-sequence perplexity (SFT), the pair-
    mean loss, accuracy and scores (reward model)."""
    total = {k: sum(p.get(k, 0.0) for p in parts) for k in parts[0]} if parts else {}
    if kind == "sft":
        return {f"{prefix}/loss": total["nll_sum"] / max(total["tokens"], 1.0),
                f"{prefix}/ppl": total["ppl_sum"] / max(total["sequences"], 1.0),
                f"{prefix}/answer_tokens": total["tokens"]}
    pairs = max(total["pairs"], 1.0)
    return {f"{prefix}/loss": total["loss_sum"] / pairs, f"{prefix}/accuracy": total["correct"] / pairs,
            f"{prefix}/chosen_score": total["chosen_sum"] / pairs,
            f"{prefix}/rejected_score": total["rejected_sum"] / pairs}


def padded_batch(data: Any, indices: list[int], pad_id: int) -> dict[str, Any]:
    """The rows of the examples `indices` (a pair's two rows together), right-padded: input_ids,
    attention_mask, loss_mask (numpy, which Ray ships out of band)."""
    import numpy as np

    rows = [r for i in indices for r in data.rows(i)]
    width = max(len(data.token_ids[r]) for r in rows)
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    attn = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for j, r in enumerate(rows):
        n = len(data.token_ids[r])
        ids[j, :n] = data.token_ids[r]
        attn[j, :n] = 1
        mask[j, :n] = data.loss_masks[r]
    return {"input_ids": ids, "attention_mask": attn, "loss_mask": mask}


def denominator(kind: str, batch: Mapping[str, Any]) -> float:
    if kind == "sft":
        return float(batch["loss_mask"][:, 1:].sum())
    return batch["input_ids"].shape[0] / 2
