"""Supervised training: the Experiment kinds without a rollout, "sft" and "reward_model", with AReaL's meaning
(areal/trainer/sft/lm_engine.py and areal/trainer/rw/rw_engine.py at 0.3.4 and 1.0).

- SFT: each example is the prompt followed by its answer and EOS (rlcfg.runtime.data.load_sft); the loss is the
  negative log-likelihood of the answer's tokens, the prompt's masked out, averaged over every answer token of the
  step's whole batch (all ranks, all micro-batches): AReaL weighs each micro-batch by its answer-token count.
- Reward model: a scalar head on the model (a one-label token classifier, as AReaL's `is_critic` engines) scores
  the last token (EOS) of the chosen and of the rejected text of each pair (data.load_pairs); the loss is the
  Bradley–Terry −log σ(chosen − rejected), averaged over the step's pairs.
- Every batch of `Schedule.prompts_per_step` examples is one optimizer step; the order is PromptSampler's
  (seeded shuffle per epoch, a short tail skipped, as AReaL's drop_last loaders do). Evaluation computes the
  same loss over the whole validation set.

The run itself is the RL driver's (rlcfg.runtime.driver.Run): the same Ray placement and FSDP2 workers,
checkpoints and resume, metrics.jsonl, plots and the exported hf_model/; SupervisedRun replaces what a step is.

For a supervised warm start from Python (the quickstart's), `sft_experiment` builds the Experiment:

    from rlcfg.runtime.driver import RunOptions, plan_here, run
    from rlcfg.runtime.supervised import sft_experiment

    exp = sft_experiment("model_dir", "pairs.jsonl", steps=30, batch_size=16, lr=1e-3)
    result = run(plan_here(exp)[0], RunOptions(output_dir="out/sft"))   # out/sft/hf_model/ is the trained model
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Any, Mapping

from rlcfg.ir import (Algorithm, Checkpointing, Cluster, Data, Experiment, Logging, Model, Optimizer, Resources, Role,
                      Sampling, Schedule)
from rlcfg.runtime.driver import Run, _local, run_tokenizer
from rlcfg.runtime.environment import looks_like_hub_id

# The role each supervised kind trains (rlcfg/lower names the reward model's role `critic`, as its value head).
TRAINED_ROLE = {"sft": "actor", "reward_model": "critic"}


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
        loss = sft_loss(logprobs, mask, denominator)
        with torch.no_grad():
            m = mask[:, 1:].float()
            nll = -(logprobs.detach() * m).sum(dim=1)
            tokens = m.sum(dim=1)
            per_seq = nll / tokens.clamp(min=1)
            stats = {"nll_sum": float(nll.sum()), "tokens": float(tokens.sum()),
                     "ppl_sum": float(per_seq.exp()[tokens > 0].sum()), "sequences": float((tokens > 0).sum())}
        return loss, stats
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


# ---------------------------------------------------------------------------------------------- driver side

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


def _denominator(kind: str, batch: Mapping[str, Any]) -> float:
    if kind == "sft":
        return float(batch["loss_mask"][:, 1:].sum())
    return batch["input_ids"].shape[0] / 2


class SupervisedRun(Run):
    """A run of an SFT or reward-model Experiment: the driver's run with a supervised step."""

    def prepare(self) -> None:
        from rlcfg.runtime import driver
        from rlcfg.runtime.backends import preflight
        from rlcfg.runtime.data import DataError, PromptSampler, load_pairs, load_sft

        preflight(self.plan, self.machine, has_cluster=bool(self.opt.address or os.environ.get("RAY_ADDRESS")))
        exp = self.exp
        self.kind = exp.kind
        self.trained = exp.role(TRAINED_ROLE[self.kind])
        model = self.trained.model
        if not os.path.exists(model.path) and not looks_like_hub_id(model.path):
            raise FileNotFoundError(f"the {self.trained.name}'s model path `{model.path}` does not exist")
        self.tokenizer_path = _local(model.tokenizer or model.path)
        self.tokenizer = run_tokenizer(self.tokenizer_path)
        d = exp.data

        def load(files: tuple[str, ...]) -> Any:
            if self.kind == "sft":
                return load_sft(files, self.tokenizer, d.prompt_key, d.answer_key or "answer", d.max_length,
                                d.apply_chat_template)
            return load_pairs(files, self.tokenizer, d.chosen_key, d.rejected_key, d.max_length)

        self.train_data = load(d.train_files)
        self.eval_data = load(d.eval_files) if d.eval_files else None
        what = "examples" if self.kind == "sft" else "pairs"
        for name, data in (("training", self.train_data), ("validation", self.eval_data)):
            if data is not None and data.too_long:
                self.notes.add(f"{data.too_long} {name} {what} longer than {d.max_length} tokens were left out")
        ranks = len(self.plan.placement(self.trained.name).ranks)
        if exp.schedule.prompts_per_step % ranks:
            # AReaL's loaders refuse it too: each rank takes batch_size // world examples.
            raise DataError(f"a step's {exp.schedule.prompts_per_step} {what} do not split evenly over the "
                            f"{ranks} ranks of the `{self.trained.name}`; make the batch size a multiple of {ranks}")
        self.sampler = PromptSampler(len(self.train_data), exp.schedule.prompts_per_step, d.seed, d.shuffle)
        self.total_steps = driver._total_steps(exp, self.plan, len(self.train_data))
        self.megatron: dict[str, Any] = {}
        self.kl_coef = 0.0
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.micro_batch = self.trained.micro_batch_size or self.plan.batch.micro_batch_size or 8
        self._prepare_folders()
        self.ray_address = None
        if self.opt.address:
            from rlcfg.runtime.environment import resolve_address

            self.ray_address = resolve_address(self.opt.address)

    def _optimizer_steps(self) -> int:
        """The length of the learning-rate schedule: with epochs, the epochs' batches (AReaL's FinetuneSpec:
        a step cap such as total_train_steps stops the run, not the schedule); else the run's steps."""
        if self.exp.schedule.epochs:
            return int(self.exp.schedule.epochs) * (self.sampler.size // self.sampler.batch)
        return self.total_steps

    def _train_spec(self, role: Role, kind: str) -> dict[str, Any]:
        spec = super()._train_spec(role, kind)
        share = role.optimizer.warmup_proportion if role.optimizer is not None else None
        if share is not None:
            spec["optimizer"]["warmup_steps"] = int(share * self._optimizer_steps())
        return spec

    def data_note(self) -> str | None:
        return None  # said once among the notes, in the supervised data's own terms

    def start(self) -> None:
        from rlcfg.runtime import driver

        t0 = time.perf_counter()
        # _threads_for sizes the threads by the `actor` role's model: the trained model, under that name.
        sized = replace(self.exp, roles=(replace(self.trained, name="actor"),))
        threads = self.opt.threads or os.environ.get("RLCFG_TORCH_THREADS") or driver._threads_for(sized)
        self.cluster = driver.Cluster(self.plan, self.machine, self.ray_address, self.opt.debug,
                                      int(threads) if threads else None)
        self.startup = {"ray_s": time.perf_counter() - t0}
        # The trained model's workers are the run's `actor` workers whatever its role's name: they hold what
        # checkpoints save (actor/) and what hf_model exports.
        self.actor = self._start_trainers([(self.trained, self.kind)])
        self.reference, self.critic, self.rollout = [], [], []
        self.hybrid = self.fused = False
        self._setup_trainers([self.actor])
        self.startup["workers_s"] = time.perf_counter() - t0 - self.startup["ray_s"]
        self._record_placement()
        self.sampler_state = self.sampler.state_dict()
        self.prefetched = None

    def _sync_weights(self) -> None:
        pass  # nothing generates

    def _micro(self, batch: dict[str, Any]) -> int:
        """Examples per micro-batch: the role's count, or as many of the batch's longest as its token budget
        holds (AReaL's max_tokens_per_mb). One count for every rank: sharded ranks must run the same number of
        forward passes."""
        budget = self.trained.max_tokens_per_micro_batch
        if not budget:
            return self.micro_batch
        return max(1, budget // (batch["input_ids"].shape[1] * self.train_data.rows_per_example))

    def _shares(self, batch: dict[str, Any]) -> list[dict[str, Any]]:
        """Equal shares of the examples, one per worker (a pair's two rows stay together)."""
        k = len(self.actor)
        per = batch["input_ids"].shape[0] // k  # prepare() checked that the examples divide evenly
        return [{key: v[r * per:(r + 1) * per] for key, v in batch.items()} for r in range(k)]

    def step(self, step: int, prefetch: bool = False) -> dict[str, Any]:
        t_step = time.perf_counter()
        indices = self.sampler.next()
        epoch = self.sampler.epoch  # the batch's own epoch: next() moves on to a new one before drawing from it
        self.sampler_state = self.sampler.state_dict()
        batch = padded_batch(self.train_data, indices, self.pad_id)
        cfg = {"kind": self.kind, "micro_batch": self._micro(batch), "denominator": _denominator(self.kind, batch)}
        t0 = time.perf_counter()
        parts = self.cluster.ray.get([w.train_supervised.remote(part, cfg)
                                      for w, part in zip(self.actor, self._shares(batch))])
        train_s = time.perf_counter() - t0
        prefix = "sft" if self.kind == "sft" else "rw"
        metrics: dict[str, Any] = {"step": step, **step_metrics(self.kind, parts, prefix)}
        metrics.update({"lr": parts[0]["lr"], "grad_norm": parts[0]["grad_norm"], "time/train": train_s,
                        "time/step": time.perf_counter() - t_step, "data/epoch": epoch,
                        "data/prompt_indices": indices,
                        "throughput/samples_per_s": len(indices) / max(time.perf_counter() - t_step, 1e-9)})
        return metrics

    def evaluate(self) -> dict[str, float]:
        if not self.eval_data:
            return {}
        n, k = len(self.eval_data), len(self.actor)
        # Sharded ranks must run the same forward passes (each one gathers the weights from all): every rank
        # gets as many examples, the last ones padded with copies that count for nothing (their mask is empty).
        per = -(-n // k)
        batch = padded_batch(self.eval_data, list(range(n)) + [0] * (per * k - n), self.pad_id)
        batch["loss_mask"][n * self.eval_data.rows_per_example:] = 0
        cfg = {"kind": self.kind, "micro_batch": self._micro(batch)}
        sums = self.cluster.ray.get([w.evaluate_supervised.remote(part, cfg)
                                     for w, part in zip(self.actor, self._shares(batch))])
        return step_metrics(self.kind, sums, "eval")


# ---------------------------------------------------------------------------------------------- Python API

def sft_experiment(model_path: str, train_file: str, *, steps: int | None = None, epochs: int | None = None,
                   batch_size: int = 8, micro_batch_size: int | None = None, lr: float = 1e-4,
                   weight_decay: float = 0.0, grad_clip: float | None = 1.0, scheduler: str = "constant",
                   warmup_steps: int = 0, prompt_key: str = "prompt", answer_key: str = "answer",
                   eval_file: str | None = None, eval_interval: int | None = None, max_length: int | None = None,
                   apply_chat_template: bool = False, shuffle: bool = True, seed: int = 0, ranks: int = 1,
                   dtype: str = "float32", checkpoint_interval: int | None = None, keep_last: int | None = 1,
                   name: str = "sft") -> Experiment:
    """An SFT Experiment: fine-tune the Hugging Face model at `model_path` on the prompt/answer pairs of
    `train_file` (JSONL, JSON, Parquet or CSV; columns `prompt_key`, `answer_key`), `batch_size` examples per
    optimizer step over `ranks` FSDP ranks, for `steps` steps or `epochs` passes. Run it with
    `rlcfg.runtime.driver.run(plan_here(exp)[0], RunOptions(output_dir=...))`; the trained model is exported to
    `<output_dir>/hf_model/` (and kept with the last checkpoint)."""
    if (steps is None) == (epochs is None):
        raise ValueError("give exactly one of `steps` and `epochs`")
    model = Model(path=model_path, dtype=dtype)  # type: ignore[arg-type]
    actor = Role(name="actor", backend="fsdp", resources=Resources(gpus=ranks), model=model,
                 optimizer=Optimizer(lr=lr, weight_decay=weight_decay, grad_clip=grad_clip,
                                     scheduler=scheduler, warmup_steps=warmup_steps),  # type: ignore[arg-type]
                 micro_batch_size=micro_batch_size or max(1, batch_size // ranks))
    return Experiment(
        name=name, dialect="rlcfg", variant="sft", cluster=Cluster(nodes=1), roles=(actor,), colocation=(),
        algorithm=Algorithm(group_size=1, ppo_epochs=1), sampling=Sampling(max_new_tokens=max_length or 0, n=1),
        eval_sampling=None,
        data=Data(train_files=(train_file,), eval_files=(eval_file,) if eval_file else (), prompt_key=prompt_key,
                  answer_key=answer_key, shuffle=shuffle, seed=seed, apply_chat_template=apply_chat_template,
                  max_length=max_length),
        schedule=Schedule(prompts_per_step=batch_size, samples_per_step=batch_size,
                          samples_per_optimizer_step=batch_size, total_steps=steps, epochs=epochs,
                          eval_interval=eval_interval if eval_file else None),
        checkpointing=Checkpointing(interval=checkpoint_interval, keep_last=keep_last, save_hf=False),
        logging=Logging(backends=("jsonl",)), seed=seed, kind="sft")
