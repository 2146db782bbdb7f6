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

The run itself is the shell every run shares (rlcfg.runtime.shell.RunShell): the same Ray placement and FSDP2
workers, checkpoints and resume, metrics.jsonl, plots and the exported hf_model/; SupervisedRun says what a step is,
and the step's losses are rlcfg.runtime.supervised_step's. SFT also trains on the Megatron backend (AReaL's
megatron allocation modes), with the same loss through megatron-core's schedule (MegatronEngine.train_supervised);
its tensor- and pipeline-parallel ranks share their data-parallel rank's examples.

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
from typing import Any

from rlcfg.ir import (Algorithm, Checkpointing, Cluster, Data, Experiment, Logging, Model, Optimizer, Resources, Role,
                      Sampling, Schedule)
from rlcfg.runtime import shell
from rlcfg.runtime.environment import looks_like_hub_id
from rlcfg.runtime.shell import RunShell, run_length, run_tokenizer, threads_for, worker_path
from rlcfg.runtime.specs import TrainSpec
from rlcfg.runtime.supervised_step import denominator, padded_batch, step_metrics

# The role each supervised kind trains (rlcfg/lower names the reward model's role `critic`, as its value head).
TRAINED_ROLE = {"sft": "actor", "reward_model": "critic"}


class SupervisedRun(RunShell):
    """A run of an SFT or reward-model Experiment: the shell's run with a supervised step."""

    def prepare(self) -> None:
        from rlcfg.runtime.backends import preflight
        from rlcfg.runtime.data import DataError, PromptSampler, load_pairs, load_sft

        preflight(self.plan, self.machine, has_cluster=bool(self.opt.address or os.environ.get("RAY_ADDRESS")))
        exp = self.exp
        self.kind = exp.kind
        self.trained = exp.role(TRAINED_ROLE[self.kind])
        model = self.trained.model
        if not os.path.exists(model.path) and not looks_like_hub_id(model.path):
            raise FileNotFoundError(f"the {self.trained.name}'s model path `{model.path}` does not exist")
        self.tokenizer_path = worker_path(model.tokenizer or model.path)
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
        self.sampler = PromptSampler(len(self.train_data), exp.schedule.prompts_per_step, d.seed, d.shuffle)
        self.total_steps = run_length(exp, self.plan, len(self.train_data))
        # Megatron's tensor- and pipeline-parallel ranks share their data-parallel rank's examples.
        self.megatron: dict[str, Any] = self._lower_megatron()
        layout = self.megatron.get(self.trained.name)
        ranks = layout.layout.dp if layout is not None else len(self.plan.placement(self.trained.name).ranks)
        if exp.schedule.prompts_per_step % ranks:
            # AReaL's loaders refuse it too: each rank takes batch_size // world examples.
            raise DataError(f"a step's {exp.schedule.prompts_per_step} {what} do not split evenly over the "
                            f"{ranks} data-parallel ranks of the `{self.trained.name}`; make the batch size a "
                            f"multiple of {ranks}")
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

    def _train_spec(self, role: Role, kind: str) -> TrainSpec:
        spec = super()._train_spec(role, kind)
        share = role.optimizer.warmup_proportion if role.optimizer is not None else None
        if share is None:
            return spec
        return replace(spec, optimizer=replace(spec.optimizer, warmup_steps=int(share * self._optimizer_steps())))

    def data_note(self) -> str | None:
        return None  # said once among the notes, in the supervised data's own terms

    def start(self) -> None:
        t0 = time.perf_counter()
        # _threads_for sizes the threads by the `actor` role's model: the trained model, under that name.
        sized = replace(self.exp, roles=(replace(self.trained, name="actor"),))
        threads = self.opt.threads or os.environ.get("RLCFG_TORCH_THREADS") or threads_for(sized)
        self.cluster = shell.Cluster(self.plan, self.machine, self.ray_address, self.opt.debug,
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
        """Equal shares of the examples, one per data shard, in the workers' order (a pair's two rows stay
        together; the ranks of a Megatron tensor/pipeline group take their shard's)."""
        shards = self._shards(self.trained.name, self.actor)
        per = batch["input_ids"].shape[0] // (max(shards) + 1)  # prepare() checked that the examples divide evenly
        return [{key: v[s * per:(s + 1) * per] for key, v in batch.items()} for s in shards]

    def step(self, step: int, prefetch: bool = False) -> dict[str, Any]:
        t_step = time.perf_counter()
        indices = self.sampler.next()
        epoch = self.sampler.epoch  # the batch's own epoch: next() moves on to a new one before drawing from it
        self.sampler_state = self.sampler.state_dict()
        batch = padded_batch(self.train_data, indices, self.pad_id)
        cfg = {"kind": self.kind, "micro_batch": self._micro(batch), "denominator": denominator(self.kind, batch)}
        t0 = time.perf_counter()
        parts = self._one_per_shard(self.trained.name, self.cluster.get(
            [w.train_supervised.remote(part, cfg) for w, part in zip(self.actor, self._shares(batch))]))
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
        n, k = len(self.eval_data), max(self._shards(self.trained.name, self.actor)) + 1
        # Sharded ranks must run the same forward passes (each one gathers the weights from all): every rank
        # gets as many examples, the last ones padded with copies that count for nothing (their mask is empty).
        per = -(-n // k)
        batch = padded_batch(self.eval_data, list(range(n)) + [0] * (per * k - n), self.pad_id)
        batch["loss_mask"][n * self.eval_data.rows_per_example:] = 0
        cfg = {"kind": self.kind, "micro_batch": self._micro(batch)}
        sums = self._one_per_shard(self.trained.name, self.cluster.get(
            [w.evaluate_supervised.remote(part, cfg) for w, part in zip(self.actor, self._shares(batch))]))
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
