"""The `sglang` rollout backend: SGLang's own offline engine (`sglang.Engine`), with the plan's engine
settings, log-probs of the sampled tokens, weight updates from tensors or from a broadcast group, and memory
release/resume for colocation.

It implements the rollout interface of rlcfg.runtime.backends.hf (generate / update_weights / sleep /
wake_up) and, for engines on GPUs of their own, the receiving side of a broadcast from trainer rank 0
(`init_weight_group` + `receive_weights`), whose sending side is `SGLangWeightBroadcaster`.

SGLang's engine needs a CUDA (or ROCm/NPU) device: nothing of it runs on a CPU-only machine. What is tested
there is `server_args`, a pure function (no SGLang import), against the field names and types of SGLang's own
`ServerArgs`.
"""

from __future__ import annotations

import time
from typing import Any, Collection, Mapping, Sequence

from rlcfg.ir import Role, Sampling
from rlcfg.plan.model import ExecutionPlan
from rlcfg.runtime.backends.hf import Generation
from rlcfg.runtime.specs import RolloutSpec
from rlcfg.runtime.backends.vllm import colocated_with_training, context_length, penalties, rollout_model

INSTALL_HINT = "install it with pip install 'rlcfg[sglang]' on a machine with a GPU"
GROUP_NAME = "rlcfg_weights"

# SGLang renamed some arguments between releases; each rlcfg setting lists its spellings, newest first, and
# the first one the installed ServerArgs has wins. 0.5.23 split the CUDA graph settings per phase (decode is
# the one generation uses); releases before it have the single names.
SPELLINGS = {
    "cuda_graph_max_bs": ("cuda_graph_max_bs_decode", "cuda_graph_max_bs"),
    "cuda_graph_bs": ("cuda_graph_bs_decode", "cuda_graph_bs"),
}


def _spelling(name: str, fields: Collection[str] | None) -> str:
    options = SPELLINGS.get(name, (name,))
    if fields is None:
        return options[0]
    return next((o for o in options if o in fields), options[0])


def server_args(role: Role, plan: ExecutionPlan, *, fields: Collection[str] | None = None) -> dict[str, Any]:
    """`sglang.Engine(**server_args(role, plan))` for one engine of the rollout role.

    `fields`: the installed ServerArgs' field names, to pick the spelling of renamed arguments (None: the
    newest known). One engine spans tp × pp GPUs with `dp_size` 1: the plan's `dp` engines are separate
    instances, each on its own GPUs, each taking weight updates itself."""
    exp = plan.experiment
    model = rollout_model(role, exp)
    settings = role.engine_args()
    par = role.parallelism
    args: dict[str, Any] = {
        "model_path": model.path,
        "dtype": model.dtype,
        "trust_remote_code": model.trust_remote_code,
        "tp_size": par.tp,
        "pp_size": par.pp,
        "dp_size": 1,
        "random_seed": int(settings["seed"]) if settings.get("seed") is not None else exp.seed,
        "log_level": "error",
    }
    if model.tokenizer:
        args["tokenizer_path"] = model.tokenizer
    if settings.get("mem_fraction_static") is not None:
        args["mem_fraction_static"] = float(settings["mem_fraction_static"])
    if settings.get("attention_backend"):
        args["attention_backend"] = settings["attention_backend"]
    length = context_length(role, exp)
    if length:
        args["context_length"] = length
    if settings.get("max_num_seqs") is not None:
        args["max_running_requests"] = int(settings["max_num_seqs"])
    if settings.get("max_num_batched_tokens") is not None:
        args["max_prefill_tokens"] = int(settings["max_num_batched_tokens"])
    if settings.get("enable_chunked_prefill") is False:
        args["chunked_prefill_size"] = -1  # SGLang's way of turning chunked prefill off
    elif settings.get("enable_chunked_prefill") and settings.get("max_num_batched_tokens") is not None:
        args["chunked_prefill_size"] = int(settings["max_num_batched_tokens"])
    if settings.get("enable_prefix_caching") is not None:
        args["disable_radix_cache"] = not settings["enable_prefix_caching"]
    if settings.get("enforce_eager") is not None:
        args["disable_cuda_graph"] = bool(settings["enforce_eager"])
    graphs = settings.get("cuda_graph_bs")
    if isinstance(graphs, (list, tuple)):
        args[_spelling("cuda_graph_bs", fields)] = [int(b) for b in graphs]
    elif graphs is not None:  # one number: the largest batch captured (RLinf's cuda_graph_max_bs)
        args[_spelling("cuda_graph_max_bs", fields)] = int(graphs)
    if settings.get("block_size") is not None:
        args["page_size"] = int(settings["block_size"])
    if settings.get("load_format"):
        args["load_format"] = settings["load_format"]
    if colocated_with_training(role, plan):
        # torch_memory_saver: lets release_memory_occupation hand weights and KV cache back to training.
        args["enable_memory_saver"] = True
    return args


def unseeded_sampling_warning(role: Role, plan: ExecutionPlan, args: Mapping[str, Any]) -> str | None:
    """What the driver says when it starts engines with `args` (from server_args) for a run that samples.

    SGLang samples with a request's sampling_seed only when the engine runs with enable_deterministic_inference
    (sglang/srt/sampling/sampling_batch_info.py); otherwise every request draws from the engine's one generator,
    seeded once from random_seed. rlcfg leaves that mode off because no framework's config turns it on (they give
    SGLang their seed as random_seed alone), and it slows rollouts by 25-45% (SGLang's own measurement), swaps in
    SGLang's pytorch sampler and refuses some attention backends. The seeds rlcfg sends are therefore ignored, and
    the run is told so once instead of silently."""
    exp = plan.experiment
    if all(s.temperature == 0 for s in (exp.sampling, exp.eval_sampling) if s is not None):
        return None  # greedy decoding draws no random numbers
    from rlcfg.runtime.backends import _switch_to

    switch = _switch_to(role, "vllm")
    return ("rlcfg: warning: SGLang ignores the per-sample seeds rlcfg gives its requests unless the engine runs "
            "with enable_deterministic_inference, which rlcfg leaves off as no framework's config turns it on (it "
            "slows rollouts by 25-45%): every sample comes from the engine's one generator "
            f"(random_seed {args['random_seed']}), so a rerun or a resumed run samples other responses"
            + (f"; for per-sample seeds, {switch}" if switch else ""))


def sampling_params(sampling: Sampling, seed: int | None = None,
                    prompt_tokens: int | None = None) -> dict[str, Any]:
    """SGLang's sampling_params for one sample of a prompt of `prompt_tokens` tokens (its response budget; None:
    max_new_tokens). rlcfg asks for the n samples as n requests, so that each has its own seed and the results keep
    the prompt-major order."""
    max_tokens = sampling.max_new_tokens if prompt_tokens is None else sampling.response_budget(prompt_tokens)
    params: dict[str, Any] = {
        "max_new_tokens": max_tokens,
        "temperature": max(0.0, sampling.temperature),
        "top_p": sampling.top_p,
        "top_k": sampling.top_k if sampling.top_k > 0 else -1,
        "min_p": sampling.min_p,
        # repetition/presence/frequency_penalty, min_new_tokens, stop_token_ids: SGLang's sampling params
        # (sglang/srt/sampling/sampling_params.py), the same meanings as vLLM's; only those not at their defaults.
        **penalties(sampling, "min_new_tokens", max_tokens),
    }
    if sampling.stop:
        params["stop"] = list(sampling.stop)
    if seed is not None:  # used only by an engine with enable_deterministic_inference (unseeded_sampling_warning)
        params["sampling_seed"] = int(seed)
    return params


def _memory_tags() -> tuple[tuple[str, ...], str]:
    """The installed SGLang's memory tags: every one that release_memory_occupation() frees when given none
    (0.5.23: KV cache, weights and CUDA graphs, its GPU_MEMORY_ALL_TYPES; releases without that list free the
    weights and the KV cache), and the weights' own."""
    from sglang.srt import constants

    weights = constants.GPU_MEMORY_TYPE_WEIGHTS
    every = getattr(constants, "GPU_MEMORY_ALL_TYPES", (weights, constants.GPU_MEMORY_TYPE_KV_CACHE))
    return tuple(every), weights


def _server_args_fields() -> frozenset[str] | None:
    try:
        from sglang.srt.server_args import ServerArgs
    except ImportError:
        return None
    names = getattr(ServerArgs, "__struct_fields__", None)  # msgspec Struct (0.5.23+)
    if names is None:
        import dataclasses

        names = [f.name for f in dataclasses.fields(ServerArgs)]
    return frozenset(names)


class SGLangRolloutEngine:
    """One SGLang engine (its scheduler and TP workers are SGLang's own subprocesses)."""

    def __init__(self, args: Mapping[str, Any], *, tokenizer_path: str | None = None):
        try:
            import sglang
        except ImportError as exc:
            raise ImportError(f"the sglang rollout backend needs SGLang, which is not installed; {INSTALL_HINT}") from exc
        from rlcfg.runtime.data import load_tokenizer

        self.args = dict(args)
        self.engine = sglang.Engine(**self.args)
        self.tokenizer = load_tokenizer(tokenizer_path or self.args.get("tokenizer_path") or self.args["model_path"])
        self.memory_saver = bool(self.args.get("enable_memory_saver"))
        self.memory_tags, self.weights_tag = _memory_tags()
        # The tags whose memory SGLang holds released now. Its scheduler keeps the same set and fails on a resume
        # of a tag that is not in it (KeyError) or a release of one that is (torch_memory_saver ends the process
        # when asked to pause paused memory): every call names exactly the tags that change state.
        self.released: set[str] = set()
        self.last_generate_s = 0.0

    def generate(self, prompt_token_ids: list[list[int]], sampling: Sampling,
                 seed: int | None = None) -> list[Generation]:
        """n samples for every prompt, the n of prompt i at [i·n, (i+1)·n)."""
        self.wake_up()
        start = time.perf_counter()
        rows = [list(ids) for ids in prompt_token_ids for _ in range(sampling.n)]
        params = [sampling_params(sampling, None if seed is None else seed + i, len(row))
                  for i, row in enumerate(rows)]
        outputs = self.engine.generate(input_ids=rows, sampling_params=params, return_logprob=True)
        gens = []
        for out in outputs:
            meta = out["meta_info"]
            tokens = list(out["output_ids"])
            # (log-prob, token id, text) per token; SGLang's are after temperature unless
            # SGLANG_RETURN_ORIGINAL_LOGPROB is set, which is the distribution the trainer recomputes.
            logprobs = [float(lp) for lp, _tok, *_ in meta["output_token_logprobs"]]
            reason = meta.get("finish_reason") or {}
            gens.append(Generation(tokens, logprobs[:len(tokens)], reason.get("type") == "stop"))
        self.last_generate_s = time.perf_counter() - start
        return gens

    def update_weights(self, named_tensors: Mapping[str, Any]) -> int:
        """Load the trainer's weights (Hugging Face names) from tensors in this process; SGLang serializes
        them to its TP workers (CUDA IPC on the same GPUs) and flushes its radix cache. Asleep, only the weights
        come back: the KV cache stays released while colocated training may still hold the GPU."""
        from rlcfg.runtime.backends.expert_names import per_expert

        self._resume([self.weights_tag])
        # SGLang loads a checkpoint's per-expert names, which transformers ≥ 5 stacks in memory.
        result = self.engine.update_weights_from_tensor(list(per_expert(named_tensors).items()), flush_cache=True)
        _check(result, "update_weights_from_tensor")
        return len(named_tensors)

    def share_weights(self, named_tensors: Mapping[str, Any]) -> bool:
        del named_tensors
        return False

    def init_weight_group(self, host: str, port: int, rank_offset: int, world_size: int,
                          backend: str = "nccl") -> None:
        """Join trainer rank 0's group (SGLang's own torch.distributed custom group); this engine's TP workers
        take ranks rank_offset … + tp − 1. Call it while the trainer builds its SGLangWeightBroadcaster."""
        result = self.engine.init_weights_update_group(host, int(port), int(rank_offset), int(world_size),
                                                       GROUP_NAME, backend)
        _check(result, "init_weights_update_group")

    def receive_weights(self, metas: Sequence[tuple[str, str, tuple[int, ...]]]) -> int:
        """Receive one broadcast of the tensors in `metas` ((name, dtype, shape), the trainer's sending order)."""
        self._resume([self.weights_tag])
        result = self.engine.update_weights_from_distributed(
            names=[m[0] for m in metas], dtypes=[m[1] for m in metas], shapes=[list(m[2]) for m in metas],
            group_name=GROUP_NAME, flush_cache=True)
        _check(result, "update_weights_from_distributed")
        return len(metas)

    def sleep(self) -> None:
        """Release the GPU memory of weights, KV cache (and CUDA graphs) to colocated training (needs
        enable_memory_saver, which server_args sets for a colocated engine); what is already released stays so."""
        held = [tag for tag in self.memory_tags if tag not in self.released]
        if self.memory_saver and held:
            self.engine.release_memory_occupation(tags=held)
            self.released.update(held)

    def wake_up(self) -> None:
        self._resume(self.memory_tags)

    def _resume(self, tags: Sequence[str]) -> None:
        """Take back the memory of those of `tags` that are released (a weight update while asleep has already
        taken back the weights)."""
        missing = [tag for tag in tags if tag in self.released]
        if missing:
            self.engine.resume_memory_occupation(tags=missing)
            self.released.difference_update(missing)

    def shutdown(self) -> None:
        self.engine.shutdown()


def from_spec(spec: RolloutSpec) -> SGLangRolloutEngine:
    """The engine a rollout worker builds from the driver's rollout spec: `engine_args` (from
    `server_args(role, plan, fields=installed_fields())`), and optionally `dtype` and `tokenizer` overrides."""
    args = dict(spec.engine_args or {})
    if spec.dtype:
        args["dtype"] = spec.dtype
    return SGLangRolloutEngine(args, tokenizer_path=spec.tokenizer)


def _check(result: Any, what: str) -> None:
    """SGLang's weight calls answer (success, message) instead of raising."""
    if isinstance(result, tuple) and result and result[0] is False:
        raise RuntimeError(f"SGLang {what} failed: {result[1] if len(result) > 1 else result}")


class SGLangWeightBroadcaster:
    """Trainer rank 0's side of the broadcast to SGLang engines: rank 0 of the custom process group the
    engines' TP workers join in `init_weights_update_group` (SGLang's own helper builds it on both sides, so
    the two agree on the store layout and group name)."""

    def __init__(self, host: str, port: int, world_size: int, backend: str = "nccl"):
        from sglang.srt.utils.common import init_custom_process_group

        self.backend = backend
        self.group = init_custom_process_group(backend=backend, init_method=f"tcp://{host}:{port}",
                                               world_size=world_size, rank=0, group_name=GROUP_NAME)

    @staticmethod
    def metas(named_tensors: Mapping[str, Any]) -> list[tuple[str, str, tuple[int, ...]]]:
        return [(name, str(t.dtype).removeprefix("torch."), tuple(t.shape)) for name, t in named_tensors.items()]

    def send(self, named_tensors: Mapping[str, Any]) -> int:
        import torch
        import torch.distributed as dist

        device = "cuda" if self.backend == "nccl" else "cpu"
        for tensor in named_tensors.values():
            dist.broadcast(tensor.detach().to(device).contiguous(), src=0, group=self.group)
        if device == "cuda":
            torch.cuda.synchronize()
        return len(named_tensors)


def installed_fields() -> frozenset[str] | None:
    """The installed SGLang's ServerArgs field names (None without SGLang), for `server_args(fields=...)`."""
    return _server_args_fields()
