"""The RL run: places an ExecutionPlan's workers on Ray and runs the RL loop, in the shell every run shares
(rlcfg.runtime.shell: the cluster, checkpoints, metrics and the loop itself).

Per step: sample prompts → roll out n responses each → score them → reference / old log-probs and critic
values when the algorithm needs them → advantages → mini-batch updates of the actor (and critic) for the
configured epochs → weight sync to the rollout engines → evaluation and checkpoint when due.

Ray layout: one placement group per colocation group of the plan, one bundle per GPU (on a machine without
GPUs, one CPU bundle per planned GPU slot); one actor per rank of each role, on its rank's bundle, and one per
rollout engine, on the bundle of its first GPU. Colocated roles share a bundle and take turns: on a GPU the
rollout engine sleeps and the trainer offloads between phases as the plan says. An engine over several GPUs
(tp × pp > 1) is given exactly its own bundles (`rollout_engines`). Engines that share their GPUs with another
role are built before any model loads there. Everything the data can get wrong is checked before Ray starts.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from typing import Any

from rlcfg.ir import Role, Sampling
from rlcfg.plan.model import ExecutionPlan
from rlcfg.runtime import step as S
from rlcfg.runtime.ahead import AheadStep, RolloutsAhead
from rlcfg.runtime.backends import PreflightError, preflight
from rlcfg.runtime.environment import looks_like_hub_id
from rlcfg.runtime.partial import PartialRollouts, PartialRolloutStarved, Response
from rlcfg.runtime.shell import (Cluster, RunOptions, RunResult, RunShell, plan_here, rollout_engines, run_length,
                                 run_tokenizer, threads_for, worker_path)
from rlcfg.runtime.specs import RolloutSpec

# Running a plan from Python: `run(plan_here(experiment)[0], RunOptions(output_dir=...))`.
__all__ = ["Run", "RunOptions", "RunResult", "plan_here", "run"]


class Run(RunShell):
    """A run of an RL Experiment: rollouts, scores, advantages and the actor's (and critic's) updates."""

    def prepare(self) -> None:
        from rlcfg.runtime import rewards
        from rlcfg.runtime.data import PromptSampler, load_prompts

        preflight(self.plan, self.machine, has_cluster=bool(self.opt.address or os.environ.get("RAY_ADDRESS")))
        exp = self.exp
        try:
            if exp.episodes is not None:  # the environment scores; what it needs fails here, not in a worker
                from rlcfg.runtime import episodes

                episodes.check_ready(exp.episodes)
            else:
                # an unknown or uninstallable reward fails here, not in a worker
                rewards.get(exp.reward_function, dict(exp.reward_settings))
        except ImportError as err:
            raise PreflightError(f"this plan cannot run here: its reward `{exp.reward_function}` needs {err}") from err
        except OSError as err:
            raise PreflightError(f"this plan cannot run here: {err}") from err
        actor = exp.role("actor")
        self.tokenizer_path = worker_path(actor.model.tokenizer or actor.model.path)
        for role in exp.roles:
            path = role.model.path if role.model else ""
            if path and not os.path.exists(path) and not looks_like_hub_id(path):
                raise FileNotFoundError(f"the {role.name}'s model path `{path}` does not exist")
        self.tokenizer = run_tokenizer(self.tokenizer_path)
        d = exp.data
        self.train_data = load_prompts(d.train_files, self.tokenizer, d.prompt_key, d.answer_key,
                                       d.max_prompt_length, d.apply_chat_template, d.long_prompts,
                                       d.chat_template_kwargs, d.prompt_suffix, d.prompt_length_of,
                                       d.prompt_removals, d.answer_list, d.answer_fields)
        self.eval_data = (load_prompts(d.eval_files, self.tokenizer, d.prompt_key, d.answer_key,
                                       d.eval_prompt_limit, d.apply_chat_template, d.long_prompts,
                                       d.chat_template_kwargs, d.prompt_suffix, d.prompt_length_of,
                                       d.prompt_removals, d.answer_list, d.answer_fields)
                          if d.eval_files else None)
        self.sampler = PromptSampler(len(self.train_data), exp.schedule.prompts_per_step, d.seed, d.shuffle)
        self.total_steps = run_length(exp, self.plan, len(self.train_data))
        self.megatron = self._lower_megatron()
        b = self.plan.batch
        self.step_settings = S.StepSettings(
            algorithm=self.alg, max_new_tokens=exp.sampling.max_new_tokens,
            max_total_length=exp.sampling.max_total_length,
            pad_token_id=self.tokenizer.pad_token_id or 0, needs_reference=self._needs_reference(),
            on_policy=self.alg.ppo_epochs == 1 and b.samples_per_optimizer_step >= b.samples_per_step,
            samples_per_rank=b.samples_per_rank, micro_batch_size=b.micro_batch_size,
            has_critic=self.alg.advantage == "gae",
            forward_micro_batch={r.name: r.forward_micro_batch_size or r.micro_batch_size or b.micro_batch_size or 8
                                 for r in exp.roles})
        self.filters = self.alg.filter_spec()
        partial = exp.schedule.partial_rollout
        self.partial = PartialRollouts(partial, exp.sampling.max_new_tokens, self.alg.group_size,
                                       self.alg.advantage_options) if partial else None
        if self.partial is not None:
            # Each step trains the responses that finished, however many: all of them in one optimizer step.
            self.step_settings = replace(self.step_settings, samples_per_rank=None)
        # The KL coefficient of the next step: KL.controller moves it after every step (Update.next_kl_coef);
        # checkpoints keep it (driver.json `kl_coef`).
        self.kl_coef = float(self.alg.kl.coef)
        self._prepare_folders()
        # A cluster that is absent or does not answer is an error now, in seconds, not after Ray's own retries.
        self.ray_address = None
        if self.opt.address:
            from rlcfg.runtime.environment import resolve_address

            self.ray_address = resolve_address(self.opt.address)

    def data_note(self) -> str | None:
        """What the run says about the training data it left out, if anything."""
        if self.train_data.dropped:
            return (f"{self.train_data.dropped} prompts longer than {self.exp.data.max_prompt_length} tokens were "
                    "left out")
        if self.train_data.cut:
            return (f"{self.train_data.cut} prompts longer than {self.exp.data.max_prompt_length} tokens were cut to "
                    "their first that many tokens")
        return None

    def _scatter(self, batch: dict[str, Any], role: str, workers: list[Any]) -> list[dict[str, Any]]:
        shards = self._shards(role, workers)
        parts = self._split(batch, max(shards) + 1)
        return [parts[s] for s in shards]

    def _beside_actor(self, name: str) -> bool:
        """Whether a role sits on exactly the actor's GPUs (slots), rank for rank, and asks for the same
        environment variables, so it can share the actor's worker processes (a process has one environment,
        fixed when it starts)."""
        ap, other = self.plan.placement("actor"), self.plan.placement(name)
        if ap is None or other is None or ap.group != other.group:
            return False
        if self.exp.role(name).env != self.exp.role("actor").env:
            return False
        return [s.gpu for s in ap.ranks] == [s.gpu for s in other.ranks]

    def _hybrid(self) -> bool:
        """Whether each rollout engine can live in the process of the actor rank on the same GPU (slot):
        colocated, one single-GPU engine per actor rank, on the same GPUs in the same order."""
        ap, rp = self.plan.placement("actor"), self.plan.placement("rollout")
        if ap is None or rp is None or ap.group != rp.group:
            return False
        return self._beside_actor("rollout") and rp.dp == len(rp.ranks)

    def start(self) -> None:
        from rlcfg.runtime.workers import RolloutWorker

        exp = self.exp
        self.engines = rollout_engines(self.plan)
        t0 = time.perf_counter()
        threads = self.opt.threads or os.environ.get("RLCFG_TORCH_THREADS") or threads_for(exp)
        self.cluster = Cluster(self.plan, self.machine, self.ray_address, self.opt.debug,
                               int(threads) if threads else None)
        self.startup = {"ray_s": time.perf_counter() - t0}
        rollout_role = exp.role("rollout")
        engine_args = rollout_role.engine_args()
        model_path = rollout_role.model.path if rollout_role.model and rollout_role.model.path \
            else exp.role("actor").model.path
        rollout_spec = RolloutSpec(
            model_path=worker_path(model_path), tokenizer=self.tokenizer_path, device=self.device,
            dtype="float32" if self.device == "cpu" else (rollout_role.model.dtype if rollout_role.model else "bfloat16"),
            max_num_seqs=engine_args.get("max_num_seqs"), episodes=exp.episodes,
            chat_template_kwargs=exp.data.chat_template_kwargs, reward_settings=exp.reward_settings)
        if rollout_role.backend == "vllm":
            from rlcfg.runtime.backends import vllm

            rollout_spec = replace(rollout_spec, backend="vllm",
                                   engine_args=vllm.engine_args(rollout_role, self.plan, device=self.device))
        elif rollout_role.backend == "sglang":
            from rlcfg.runtime.backends import sglang

            rollout_spec = replace(rollout_spec, backend="sglang", engine_args=sglang.server_args(
                rollout_role, self.plan, fields=sglang.installed_fields()))
            warning = sglang.unseeded_sampling_warning(rollout_role, self.plan, rollout_spec.engine_args)
            if warning:
                print(warning, file=self.opt.stream or sys.stderr, flush=True)
        self.hybrid = self._hybrid()
        wanted = [("reference", exp.role("reference") is not None and self._needs_reference()),
                  ("critic", self.alg.advantage == "gae")]
        # Roles share a process only on fsdp: megatron-core keeps one parallel state per process.
        fused = [name for name, want in wanted if want and self._beside_actor(name)
                 and not self.megatron.keys() & {"actor", name}]
        self.actor = self._start_trainers([(exp.role("actor"), "actor")] + [(exp.role(n), n) for n in fused],
                                          rollout_spec if self.hybrid else None)
        self.reference = self.critic = []
        for name, want in wanted:
            if want:
                setattr(self, name, self.actor if name in fused else self._start_trainers([(exp.role(name), name)]))
        if self.hybrid:
            self.rollout = self.actor
        else:
            self.rollout = [self.cluster.spawn_engine(RolloutWorker, engine,
                                                      (rollout_spec, self.cluster.threads, exp.reward_function),
                                                      rollout_role.env_vars())
                            for engine in self.engines]
        groups = [self.actor] + [g for g in (self.reference, self.critic) if g and g is not self.actor]
        # An engine measures its GPUs' free memory while it is built (vLLM sizes its cache by it, and refuses to
        # start when less is free than it was told to take): a model loading on those GPUs meanwhile takes memory
        # from under it. So an engine that shares its GPUs with another process is built, and asleep, before any
        # model loads; engines on GPUs of their own build while the trainers load.
        if self.hybrid:  # each engine is built inside its actor rank's world (HybridWorker.start_rollout)
            address, port = self.cluster.get(self.actor[0].rendezvous.remote())
            asleep = [worker.start_rollout.remote(address, port) for worker in self.actor]
        else:
            asleep = [engine.sleep.remote() for engine in self.rollout]  # each runs once its engine is built
        shared = self._engines_sharing_gpus()
        self.cluster.get([call for call, share in zip(asleep, shared) if share])
        self._setup_trainers(groups)
        self.cluster.get([call for call, share in zip(asleep, shared) if not share])
        self.startup["workers_s"] = time.perf_counter() - t0 - self.startup["ray_s"]
        self._record_placement()
        self.pending_weights = None
        self.prefetched = None
        self.sampler_state = self.sampler.state_dict()
        # One worker holding every role (rollout colocated, one rank, reference fused or absent, no critic)
        # runs each step in a single call; group filters (dynamic sampling's extra draws need the driver's
        # sampler between rollouts) and rollouts started ahead keep the general path.
        sch = exp.schedule
        # Asynchronous RL: steps' rollouts start ahead of the updates, within the staleness bound (ahead.py).
        self.ahead = RolloutsAhead(sch.max_staleness, sch.steps_generating_at_once(), sch.ahead_across_epochs) \
            if sch.max_staleness else None
        self.fused = (self.opt.fused_step and self.hybrid and len(self.actor) == 1 and not self.critic
                      and self.reference in ([], self.actor) and not S.filters_active(self.filters)
                      and self.ahead is None and self.partial is None)
        self.last_reply = 0.0

    def _engines_sharing_gpus(self) -> list[bool]:
        """For each engine's process (self.rollout: the rollout workers, or the actor's workers that hold the
        engines), whether a process of its own loads a model on one of the engine's GPUs."""
        workers = {"actor": self.actor, "reference": self.reference, "critic": self.critic}
        # The roles with processes of their own; a role fused into the actor's process loads there, after the
        # engine that process holds (HybridWorker builds it first).
        separate = ["actor"] + [name for name in ("reference", "critic")
                                if workers[name] and workers[name] is not self.actor]
        if self.hybrid:
            engine_gpus = [{slot.gpu} for slot in self.plan.placement("actor").ranks]
            separate.remove("actor")
        else:
            engine_gpus = [set(engine.slots) for engine in self.engines]
        loading = {g for name in separate for g in self.plan.placement(name).gpus}
        return [bool(gpus & loading) for gpus in engine_gpus]

    def _needs_reference(self) -> bool:
        # Whether the reference runs is decided once, by the lowering (so `rlcfg plan` shows what runs): a lowering
        # builds the role exactly when a KL term reads it (tests/lower/test_roles_and_algorithm.py).
        return self.exp.role("reference") is not None

    def _submit(self, prompt_ids: list[tuple[int, ...]], sampling: Sampling, seed: int,
                answers: list[str | None] | None) -> list[Any]:
        """Start generation on every engine (a contiguous share of the prompts each), scoring the responses
        there; `answers` has one entry per sample (n per prompt), or is None to score nothing. Returns the calls'
        ObjectRefs."""
        k = len(self.rollout)
        n = sampling.n
        share = -(-len(prompt_ids) // k)
        calls = []
        weights, self.pending_weights = self.pending_weights, None
        for e, engine in enumerate(self.rollout):
            part = [list(p) for p in prompt_ids[e * share:(e + 1) * share]]
            scored = None if answers is None else answers[e * share * n:(e + 1) * share * n]
            # Every engine takes the pending weights, even one without prompts this time.
            calls.append(engine.generate.remote(part, sampling, seed * 1009 + e, weights, scored))
        return calls

    def _finish(self, calls: list[Any]):
        results = self.cluster.get(calls)
        gens = [g for out, _info in results for g in out]
        scores = [x for _o, info in results for x in info.get("scores", ())]  # none where nothing was scored
        texts = [x for _o, info in results for x in info.get("texts", ())]
        infos = [info for _o, info in results]
        times = {"generate": max(i["generate_s"] for i in infos), "weight_load": max(i["load_s"] for i in infos),
                 "reward": max(i.get("reward_s", 0.0) for i in infos),
                 "rollout_idle": max(i.get("idle_s", 0.0) for i in infos)}
        return gens, scores, texts, times

    def _rollout(self, prompt_ids: list[tuple[int, ...]], sampling: Sampling, seed: int,
                 answers: list[str | None]):
        return self._finish(self._submit(prompt_ids, sampling, seed, answers))

    def _draw(self, step: int, draws: int) -> dict[str, Any]:
        """Take the next prompts and start rolling them out."""
        idx = self.sampler.next()
        prompts = [self.train_data.token_ids[i] for i in idx]
        answers = [self.train_data.answers[i] for i in idx]
        n = self.alg.group_size
        calls = self._submit(prompts, self._sampling(), self.exp.seed * 100_003 + step * 7 + draws,
                             [a for a in answers for _ in range(n)])
        return {"idx": idx, "prompts": prompts, "calls": calls, "t0": time.perf_counter()}

    def _sampling(self, eval_mode: bool = False) -> Sampling:
        s = self.exp.eval_sampling if eval_mode and self.exp.eval_sampling else self.exp.sampling
        # An evaluation samples its own n per prompt; one without sampling settings of its own, one response.
        n = (self.exp.eval_sampling.n if self.exp.eval_sampling else 1) if eval_mode else self.alg.group_size
        return replace(s, n=n)

    def _collect(self, step: int, timing: dict[str, float], first: dict[str, Any] | None = None):
        """Roll out and score one step's prompts (`first`: the draw already started while the previous step
        trained), then apply the group filters (FilterSpec, algorithms.keep_groups): without dynamic sampling
        the failing groups are dropped or loss-masked (FilterSpec.failed); with it, draw again until
        algorithms.select_groups has the step's groups (DAPO `filter`: accumulate the passing groups over
        draws; SkyRL `replace`: the latest draw with its failing groups replaced by passing ones), at most
        FilterSpec.max_draws draws. At the limit, `on_exhausted` says whether to train on what passed or
        stop (SkyRL)."""
        import torch

        from rlcfg.runtime import algorithms as A

        n = self.alg.group_size
        want = self.exp.schedule.prompts_per_step
        spec = self.filters
        active = S.filters_active(spec)
        seen: list[dict[str, Any]] = []
        passed: list[bool] = []
        draws = 0
        # `replace` picks its substitutes at random: from a generator of the run's seed and the step, so that a
        # resumed run picks as the uninterrupted one did.
        generator = torch.Generator().manual_seed(self.exp.seed * 1_000_003 + step)
        while True:
            draw = first if (first is not None and draws == 0) else self._draw(step, draws)
            idx, prompts = draw["idx"], draw["prompts"]
            gens, scores, texts, times = self._finish(draw["calls"])
            for k, v in times.items():
                timing[k] = timing.get(k, 0.0) + v
            timing["rollout_call"] = timing.get("rollout_call", 0.0) + time.perf_counter() - draw["t0"]
            groups = S.make_groups(idx, prompts, gens, scores, texts, n)
            seen += groups
            passed += S.group_passes(groups, spec, n, self.alg) if active else [True] * len(groups)
            draws += 1
            if spec.dynamic is None:
                kept = S.apply_filters(seen, passed, spec)
                break
            chosen = A.select_groups(passed, want, draws, spec, generator)
            if chosen.exhausted and spec.on_exhausted == "error":
                limit = spec.max_draws
                raise S.DynamicSamplingExhausted(
                    f"step {step}: dynamic sampling ({spec.dynamic}) drew {draws} batches (the limit, "
                    f"max_sample_batches {limit}) and found {sum(passed)} groups whose rewards differ, fewer "
                    f"than the {want} the step needs; the run stops here as the framework's does (SkyRL: "
                    "'hitting dynamic sampling limit'). Check the data's difficulty, or raise the limit")
            if not chosen.draw_again:
                kept = [seen[i] for i in chosen.groups]
                break
        if not kept:
            # Nothing passed (a dropping filter, or dynamic sampling that trains on what passed at its limit):
            # the latest groups stay in the batch with their loss masked, so the step trains on nothing.
            kept = [dict(g, loss_masked=True) for g in seen[-want:]]
        live = [g for g in kept if not g.get("loss_masked")]
        return kept, {"data/prompt_indices": [g["index"] for g in kept], "data/draws": draws,
                      "data/groups_seen": len(seen), "data/groups_passed": sum(passed),
                      "data/groups_kept": len(live), "data/epoch": self.sampler.epoch}

    def _collect_partial(self, step: int, timing: dict[str, float]):
        """A step of partial rollout (ir.PartialRollout; the bookkeeping is runtime/partial.py's): the step's new
        prompts' responses join the unfinished ones, each generates up to its round's limit under the current
        weights (one generation per limit, continuing from its prompt and the tokens so far), and the responses of
        the prompts with enough finished are scored on their rounds' texts and normalised. Returns the groups (one
        response each), the data and partial-rollout metrics, and the advantages."""
        t0 = time.perf_counter()
        idx = self.sampler.next()
        data = self.train_data
        n = self.alg.group_size
        new = [Response(prompt=i, answer=data.answers[i], started=step) for i in idx for _ in range(n)]
        pending = self.partial.start(new)
        by_limit: dict[int, list[int]] = {}
        for k, response in enumerate(pending):
            by_limit.setdefault(self.partial.limit(response), []).append(k)
        sampling = self._sampling()
        calls = []
        for j, (limit, ks) in enumerate(sorted(by_limit.items())):
            if limit == 0:
                continue  # nothing to generate this round
            inputs = [tuple(data.token_ids[pending[k].prompt]) + tuple(pending[k].tokens) for k in ks]
            calls.append((ks, self._submit(inputs, replace(sampling, n=1, max_new_tokens=limit),
                                           self.exp.seed * 100_003 + step * 7 + j, None)))
        generated: list[list[int]] = [[] for _ in pending]
        for ks, call in calls:
            gens, _scores, _texts, times = self._finish(call)
            for k, (tokens, _logprobs, _finished) in zip(ks, gens):
                generated[k] = list(tokens)
            for key, value in times.items():
                timing[key] = timing.get(key, 0.0) + value
        train = self.partial.after_round(pending, generated)
        if not train:
            raise PartialRolloutStarved(
                f"step {step}: partial rollout finished no prompt's responses this step (a prompt's go to training "
                f"once more than {self.partial.min_finished} of them have finished), so the step has nothing to "
                "train on; ChatLearn stops here too. Give the first round a larger share of the response length, or "
                "lower mini_response_per_prompt")
        scores, texts = self._score_rounds(train)
        advantages = self.partial.advantages(train, scores)
        timing["rollout_call"] = time.perf_counter() - t0
        groups = [{"index": r.prompt, "prompt": data.token_ids[r.prompt], "responses": [(r.tokens, None, r.ended)],
                   "scores": [score], "texts": [text]} for r, score, text in zip(train, scores, texts)]
        info = {"data/prompt_indices": idx, "data/draws": 1, "data/groups_seen": len(idx),
                "data/groups_passed": len(idx), "data/groups_kept": len(idx), "data/epoch": self.sampler.epoch,
                **self.partial.metrics(step, train, len(pending))}
        return groups, info, advantages

    def _score_rounds(self, train: list[Response]) -> tuple[list[float], list[str]]:
        """Score responses generated in rounds on the rollout workers (a contiguous share each)."""
        share = -(-len(train) // len(self.rollout))
        parts = [train[e * share:(e + 1) * share] for e in range(len(self.rollout))]
        results = self.cluster.get([engine.score_rounds.remote([r.rounds for r in part],
                                                                   [r.answer for r in part])
                                        for engine, part in zip(self.rollout, parts) if part])
        return [x for scores, _ in results for x in scores], [x for _, texts in results for x in texts]

    def _split(self, batch: dict[str, Any], parts: int) -> list[dict[str, Any]]:
        """Equal shares of the rows, as numpy arrays: Ray ships those out of band, where a torch tensor goes
        through torch.save and torch.load (the workers turn them back into tensors)."""
        n = batch["response_mask"].shape[0]
        size = n // parts
        arrays = {k: _to_numpy(v) for k, v in batch.items()}
        return [{k: v[r * size:(r + 1) * size] for k, v in arrays.items()} for r in range(parts)]

    def _compute(self, workers: list[Any], batch: dict[str, Any], role: Role, timing: dict[str, float], key: str):
        import torch

        micro = self.step_settings.forward_micro_batch[role.name]
        t0 = time.perf_counter()
        outs = self.cluster.get([w.compute.remote(part, micro, role.name)
                                     for w, part in zip(workers, self._scatter(batch, role.name, workers))])
        timing[key] = time.perf_counter() - t0
        timing[key + "_compute"] = max(o["forward_s"] for o in outs)
        return torch.cat([o["values"] for o in self._one_per_shard(role.name, outs)], dim=0)

    def step(self, step: int, prefetch: bool = False) -> dict[str, Any]:
        """One training step. With `prefetch`, the next step's first rollout is queued right behind this
        step's update (same process, same order, so it sees the new weights): the engines start it without
        waiting for the driver's round trip. With rollouts started ahead (asynchronous RL) the next steps'
        rollouts start before this update instead, as far as the staleness bound allows, and `prefetch` is not
        needed. `self.sampler_state` keeps the data position as of the end of this step, which is what a
        checkpoint must record."""
        if self.fused:
            return self._fused_step(step, prefetch)
        exp = self.exp
        timing: dict[str, float] = {}
        advantages = None  # computed with the rollouts only by partial rollout
        t_step = time.perf_counter()  # until the step's rollouts are scored, the trainers wait for them
        if self.ahead is not None:
            entry = self._take_ahead(step)
            groups, data_info = self._collect(step, timing, entry.draw)
            timing["rollout_wait"] = time.perf_counter() - t_step
            # A checkpoint records the data position of the trained steps: the steps started ahead are drawn
            # again after a resume, so none is lost or trained twice.
            self.sampler_state = entry.sampler
            data_info["data/epoch"] = entry.epoch
            self._top_up(step)  # this step's rollouts are done: the next ones may start before it trains
            data_info.update(self._ahead_metrics(step, entry))
        elif self.partial is not None:
            groups, data_info, advantages = self._collect_partial(step, timing)
            timing["rollout_wait"] = time.perf_counter() - t_step
            self.sampler_state = self.sampler.state_dict()
        else:
            first, self.prefetched = self.prefetched, None
            groups, data_info = self._collect(step, timing, first)
            timing["rollout_wait"] = time.perf_counter() - t_step
            self.sampler_state = self.sampler.state_dict()
        workers = {"actor": self.actor, "reference": self.reference, "critic": self.critic}
        update = S.prepare_update(
            groups, self.step_settings, max(self._shards("actor", self.actor)) + 1,
            lambda role, batch: self._compute(workers[role], batch, exp.role(role), timing, S.COMPUTE_TIMING[role]),
            timing, kl_coef=self.kl_coef, staleness=entry.staleness if self.ahead is not None else 0,
            advantages=advantages)
        if update.next_kl_coef is not None:
            self.kl_coef = update.next_kl_coef
        batch = update.batch

        t0 = time.perf_counter()
        calls, weight_refs = [], []
        actor_batch = {k: batch[k] for k in S.ACTOR_KEYS if k in batch}
        for w, part in zip(self.actor, self._scatter(actor_batch, "actor", self.actor)):
            if self.hybrid:
                calls.append(w.train_and_sync.remote(part, update.cfg))
            else:
                metrics_ref, weights_ref = w.train_and_gather.options(num_returns=2).remote(part, update.cfg)
                calls.append(metrics_ref)
                weight_refs.append(weights_ref)
        if weight_refs:
            self.pending_weights = weight_refs[0]  # loaded by the engines at their next generate
        # Asynchronous rollouts have started the next steps already; partial rollout's next step continues the
        # responses this one left unfinished.
        if prefetch and self.ahead is None and self.partial is None:
            self.prefetched = self._draw(step + 1, 0)
        if self.critic:
            ccfg = S.critic_cfg(update, max(self._shards("critic", self.critic)) + 1, self.alg,
                                self.exp.schedule.critic_samples_per_optimizer_step)
            critic_calls = [w.train.remote(part, ccfg, "critic") for w, part in
                            zip(self.critic, self._scatter({k: batch[k] for k in S.CRITIC_KEYS}, "critic",
                                                           self.critic))]
        results = self.cluster.get(calls)
        if self.critic:
            critic_results = self.cluster.get(critic_calls)
            update.metrics["critic/value_loss"] = sum(r.get("value_loss", 0.0)
                                                      for r in self._one_per_shard("critic", critic_results))
        timing["train"] = time.perf_counter() - t0
        S.train_metrics(update, self._one_per_shard("actor", results), results, timing)
        metrics = S.step_metrics(update.metrics, **update.outcome(), timing=timing,
                                 step_s=time.perf_counter() - t_step, example=groups[0]["texts"][0] if groups else "")
        metrics.update(step=step, **data_info)
        return metrics

    def _top_up(self, training: int) -> None:
        """Start the rollouts of every step the staleness bound allows now (before `training`'s update)."""
        def running(queue: list[AheadStep]) -> int:
            calls = [call for entry in queue for call in entry.draw["calls"]]
            if not calls:
                return 0
            ready, _ = self.cluster.ray.wait(calls, num_returns=len(calls), timeout=0)
            done = set(ready)
            return sum(1 for entry in queue if not all(call in done for call in entry.draw["calls"]))

        def start(step: int, version: int) -> AheadStep:
            draw = self._draw(step, 0)
            return AheadStep(step=step, version=version, draw=draw, sampler=self.sampler.state_dict(),
                             epoch=self.sampler.epoch)

        self.ahead.top_up(training, self.last_step, running, start, self.sampler.opens_epoch)

    def _take_ahead(self, step: int) -> AheadStep:
        self._top_up(step)  # at least this step's rollouts, when none started ahead (the first step)
        return self.ahead.take(step)

    def _ahead_metrics(self, step: int, entry: AheadStep) -> dict[str, Any]:
        """How stale the trained rollouts are, in updates (one version per step's rollouts: mean and max agree),
        and how many steps' rollouts have started and wait to be trained."""
        staleness = entry.staleness
        return {"async/staleness_mean": float(staleness), "async/staleness_max": staleness,
                "async/steps_ahead": len(self.ahead.queue), "async/max_staleness": self.ahead.max_staleness}

    def _submit_fused(self, step: int, kl_coef: float | None) -> dict[str, Any]:
        """Queue step `step` on the worker. `kl_coef`: its KL coefficient, or None while the previous step is
        still in flight (the worker carries the coefficient that step leaves, in submission order)."""
        idx = self.sampler.next()
        n = self.alg.group_size
        # The seed the general path gives its one engine (see _draw and _submit): both paths sample alike.
        seed = (self.exp.seed * 100_003 + step * 7) * 1009
        ref = self.actor[0].fused_step.remote([list(self.train_data.token_ids[i]) for i in idx], idx,
                                              [self.train_data.answers[i] for i in idx for _ in range(n)],
                                              self._sampling(), seed, self.step_settings, kl_coef)
        return {"ref": ref, "idx": idx, "sampler": self.sampler.state_dict(), "epoch": self.sampler.epoch,
                "t0": time.perf_counter()}

    def _fused_step(self, step: int, prefetch: bool) -> dict[str, Any]:
        """One step as one worker call (see HybridWorker.fused_step). With `prefetch` the next step's call is
        queued before this one's reply is read, so the worker goes straight on. A step's time is the interval
        between the replies of consecutive steps, or from its submission when nothing was queued."""
        entry, self.prefetched = self.prefetched, None
        if entry is None:
            entry = self._submit_fused(step, self.kl_coef)
        if prefetch:
            self.prefetched = self._submit_fused(step + 1, None)
        reply = self.cluster.get(entry["ref"])
        now = time.perf_counter()
        step_s, self.last_reply = now - max(entry["t0"], self.last_reply), now
        self.sampler_state = entry["sampler"]
        if reply.get("next_kl_coef") is not None:
            self.kl_coef = reply["next_kl_coef"]
        metrics = S.step_metrics(reply["metrics"], **reply["outcome"], timing=reply["timing"], step_s=step_s,
                                 example=reply["example"])
        metrics.update({"step": step, "data/prompt_indices": entry["idx"], "data/draws": 1,
                        "data/groups_seen": len(entry["idx"]), "data/groups_passed": len(entry["idx"]),
                        "data/groups_kept": len(entry["idx"]), "data/epoch": entry["epoch"]})
        return metrics

    def evaluate(self) -> dict[str, float]:
        if not self.eval_data:
            return {}
        from rlcfg.runtime import algorithms as A

        ids = list(self.eval_data.token_ids)
        sampling = self._sampling(eval_mode=True)
        n = sampling.n
        _gens, scores, _texts, _times = self._rollout(ids, sampling, self.exp.seed,
                                                      [a for a in self.eval_data.answers for _ in range(n)])
        return A.evaluation_metrics(scores, n)

    def pending_calls(self) -> list[Any]:
        """The calls queued ahead and not read yet: the next step's (prefetched) and the steps running ahead (none
        when the run fails while it starts, before it queues any)."""
        prefetched, ahead = getattr(self, "prefetched", None), getattr(self, "ahead", None)
        entries = ([prefetched] if prefetched else []) + ([entry.draw for entry in ahead.queue] if ahead else [])
        return [ref for entry in entries for ref in ([entry["ref"]] if "ref" in entry else entry.get("calls", []))]

    def carried_state(self) -> dict[str, Any]:
        # Partial rollout's unfinished responses continue after a resume, as they would have without it.
        return {"partial_rollout": self.partial.state_dict()} if self.partial is not None else {}

    def load_carried_state(self, state: dict[str, Any]) -> None:
        if self.partial is not None and state.get("partial_rollout") is not None:
            self.partial.load_state_dict(state["partial_rollout"])

    def _sync_weights(self) -> None:
        """Push the actor's weights to the rollout engines now (after a restore)."""
        if self.hybrid:
            self.cluster.get([w.sync_rollout.remote() for w in self.actor])
        else:
            states = [w.full_state_dict.remote() for w in self.actor]
            self.cluster.get([r.update_weights.remote(states[0]) for r in self.rollout])
            self.cluster.get(states[1:])
        self.pending_weights = None


def _to_numpy(value: Any) -> Any:
    """A CPU tensor numpy can hold, as a numpy array sharing its memory; anything else (bfloat16, a GPU
    tensor) as it is."""
    import torch

    if isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.dtype != torch.bfloat16 \
            and not value.requires_grad:
        return value.numpy()
    return value


def run(plan: ExecutionPlan, options: RunOptions) -> RunResult:
    """Execute a plan. Raises PreflightError / DataError / FileNotFoundError before any worker starts."""
    if plan.experiment.kind != "rl":  # SFT and reward-model training: no rollout
        from rlcfg.runtime.supervised import SupervisedRun

        return SupervisedRun(plan, options).run()
    return Run(plan, options).run()
