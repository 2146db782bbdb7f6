"""rlcfg's GPU acceptance checks: what `rlcfg run` does on a GPU, engine by engine, in a few minutes on one GPU.

    bench/gpu_acceptance.sh [--only NAME[,NAME...]] [--verbose] [--list] [--budget-s 450]

Each check drives rlcfg's own engine classes (FSDPEngine, HFRolloutEngine, MegatronEngine, HybridWorker with
VLLMRolloutEngine, SGLangRolloutEngine) on tiny Qwen2 models built here, with nothing downloaded, and compares
what they compute with transformers. It prints one line per check:

    PASS name (what was measured)
    FAIL name: the reason (the last line of the error)
    SKIP name: why it did not run (no CUDA device, a package that is not installed, too few GPUs)

then a summary line, and exits 1 when a check failed, else 0. Each check runs in a process of its own, with a
time limit, so a check that crashes CUDA, hangs in NCCL or leaves memory behind cannot take the others with it.
Ray is never imported, and vLLM, SGLang and megatron-core only inside the checks that use them.

The bf16 log-prob checks compare against transformers' forward in float32, one sample at a time without
padding (the exact values), and allow BF16_FACTOR × the error of transformers' own bf16 forward on the same
tokens plus BF16_SLACK: the engines may round differently from transformers, not worse. A sample that sees
another's tokens, or padding, is off by far more than that.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

NO_CUDA = "no CUDA device"
BUDGET_S = 450  # the whole run; bench/gpu_acceptance.sh stops it at 480 s

# The test models: Qwen2 with 64-wide heads (every attention kernel of vLLM and SGLang has them) and the
# quickstart's character tokenizer. Weights drawn with this std give log-probs from about -4 to 0: spread enough
# that a token seeing the wrong context is off by more than 0.5, small enough that bf16 rounds them to ~0.01.
INIT_STD = 0.05
POLICY_SEED, OTHER_SEED = 0, 1
GROUP = 4  # responses per prompt in the training batch
MICRO = 4  # samples per micro-batch
MAX_RESPONSE = 12  # longest response of the training batch
MAX_PROMPT = 16  # longest prompt an engine is sized for
NEW_TOKENS = 8  # greedy tokens generated per prompt
BF16_FACTOR, BF16_SLACK = 4.0, 0.03
FP32_LOGPROB_TOL = 1e-3  # generation in float32: the engines' log-probs against transformers'
LR = 1e-2
# What a training step must reach: the output head, the first layer (gradients flowed through the whole model) and
# the embedding.
TRAINED = ("lm_head.weight", "model.layers.0.self_attn.q_proj.weight", "model.embed_tokens.weight")
PROMPTS = ("7*8=", "12*11=", "3*4=", "10*0=")


class CheckError(AssertionError):
    """A check whose engine ran but did not do what a user relies on. `details`: more for --verbose (the
    traceback of a rank process, say)."""

    def __init__(self, message: str, details: str = ""):
        super().__init__(message)
        self.details = details


def require(condition: Any, message: str) -> None:
    if not condition:
        raise CheckError(message)


@dataclass(frozen=True)
class Context:
    """What a check gets: the test models and a folder of its own."""

    policy: str  # model folder
    other: str  # a second model of the same shape, other weights
    scratch: str
    device: str = "cuda"  # where the engines run


# ------------------------------------------------------------------------------------------------ shared pieces

def build_model(directory: str, seed: int, experts: int = 0, latent: bool = False) -> str:
    """A tiny Qwen2 (hidden 128, 2 heads of 64, 1 KV head, 2 layers, untied head) with the quickstart's
    tokenizer; with `experts`, a Qwen3-MoE of the same figures routing each token to 2 of them, or with `latent`
    too a DeepSeek-V3 (Moonlight's shape: multi-latent attention, a dense first layer, then those experts beside
    a shared one, sigmoid routing with its per-expert correction). Every weight is drawn, norms, biases and the
    correction too: a norm weight of 1 or a bias of 0 would hide a misplaced tensor."""
    import torch
    import transformers
    from transformers.utils import logging as hf_logging

    from rlcfg.runtime.quickstart import build_tokenizer

    hf_logging.disable_progress_bar()  # the output is one line per check
    tokenizer = build_tokenizer(directory)
    torch.manual_seed(seed)
    figures = dict(vocab_size=len(tokenizer), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                   num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128,
                   pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                   bos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False)
    if experts and latent:
        figures["num_key_value_heads"] = figures["num_attention_heads"]
        model = transformers.DeepseekV3ForCausalLM(transformers.DeepseekV3Config(
            n_routed_experts=experts, num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=128,
            first_k_dense_replace=1, kv_lora_rank=64, q_lora_rank=None, qk_nope_head_dim=64, qk_rope_head_dim=32,
            v_head_dim=64, n_group=1, topk_group=1, routed_scaling_factor=2.446, norm_topk_prob=True,
            rope_scaling=None, num_nextn_predict_layers=0, **figures))
    elif experts:
        model = transformers.Qwen3MoeForCausalLM(transformers.Qwen3MoeConfig(
            head_dim=64, num_experts=experts, num_experts_per_tok=2, moe_intermediate_size=128, norm_topk_prob=True,
            **figures))
    else:
        model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**figures))
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() >= 2:
                param.normal_(0.0, INIT_STD)
            else:
                param.add_(torch.randn_like(param) * INIT_STD)
        for name, buffer in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                buffer.copy_(torch.randn_like(buffer) * 0.1)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(directory)
    return directory


def tokenizer_of(model_dir: str) -> Any:
    from rlcfg.runtime.data import load_tokenizer

    return load_tokenizer(model_dir)


def prompt_ids(model_dir: str) -> list[list[int]]:
    tokenizer = tokenizer_of(model_dir)
    return [tokenizer(text, add_special_tokens=False)["input_ids"] for text in PROMPTS]


def training_groups(model_dir: str) -> list[dict[str, Any]]:
    """Scored rollouts as the driver hands them to rlcfg.runtime.step: prompts of 2 to 9 tokens, GROUP responses
    each of 1 to MAX_RESPONSE tokens (some ending in EOS), rewards that differ inside every group."""
    import torch

    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        vocab = json.load(f)["vocab_size"]  # the model's: a loaded tokenizer may list an extra special token
    eos = tokenizer_of(model_dir).eos_token_id
    g = torch.Generator().manual_seed(1234)

    def tokens(count: int) -> list[int]:
        return [t + 2 for t in torch.randint(0, vocab - 2, (count,), generator=g).tolist()]  # not <pad>, <eos>

    groups = []
    for i in range(4):
        prompt = tokens(int(torch.randint(2, 10, (1,), generator=g)))
        responses = []
        for j in range(GROUP):
            body = tokens(int(torch.randint(1, MAX_RESPONSE, (1,), generator=g)))
            finished = j % 2 == 0
            responses.append((body + [eos] if finished else body, None, finished))
        scores = [float((i + j) % 3 == 0) for j in range(GROUP)]
        groups.append({"index": i, "prompt": prompt, "responses": responses, "scores": scores,
                       "texts": [""] * GROUP})
    return groups


def padded_batch(model_dir: str) -> dict[str, Any]:
    """The training groups as rlcfg.runtime.step.make_batch lays them out for the trainers."""
    from rlcfg.runtime import step as S

    batch, _scores, _finished = S.make_batch(training_groups(model_dir), tokenizer_of(model_dir).pad_token_id)
    return batch


def rl_update(model_dir: str, compute: Callable[[dict[str, Any]], Any], shards: int = 1
              ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The GRPO update the driver would run on the training groups (rlcfg.runtime.step.prepare_update, old
    log-probs from `compute(batch)`): the actor's batch and its update settings."""
    from rlcfg.ir import Algorithm
    from rlcfg.runtime import step as S

    settings = S.StepSettings(algorithm=Algorithm(group_size=GROUP), max_new_tokens=MAX_RESPONSE,
                              pad_token_id=tokenizer_of(model_dir).pad_token_id, needs_reference=False,
                              on_policy=False, samples_per_rank=None, micro_batch_size=MICRO, has_critic=False,
                              forward_micro_batch={"actor": MICRO})
    update = S.prepare_update(training_groups(model_dir), settings, shards, lambda _role, batch: compute(batch), {})
    return {k: update.batch[k] for k in S.ACTOR_KEYS if k in update.batch}, update.cfg


def reference_logprobs(model_dir: str, batch: dict[str, Any], dtype: str, device: str) -> Any:
    """transformers' log-prob of every response token of `batch`, each sample alone and unpadded ([samples,
    response columns], 0 past a response's end)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype)).to(device).eval()
    n, width = batch["response_mask"].shape
    prompt_width = batch["input_ids"].shape[1] - width
    out = torch.zeros((n, width), dtype=torch.float32)
    with torch.no_grad():
        for i in range(n):
            ids = batch["input_ids"][i][batch["attention_mask"][i].bool()]
            prompt = int(batch["attention_mask"][i, :prompt_width].sum())
            length = int(batch["attention_mask"][i, prompt_width:].sum())
            logits = model(input_ids=ids[None].to(device)).logits[0, prompt - 1:prompt - 1 + length].float()
            targets = ids[prompt:prompt + length].to(device)
            out[i, :length] = torch.log_softmax(logits, -1).gather(-1, targets[:, None]).squeeze(-1).cpu()
    return out * batch["response_mask"]


@dataclass(frozen=True)
class Bf16Bound:
    exact: Any  # float32 reference log-probs
    floor: float  # transformers' own bf16 error on these tokens (max)
    bound: float


def bf16_bound(model_dir: str, batch: dict[str, Any], device: str) -> Bf16Bound:
    exact = reference_logprobs(model_dir, batch, "float32", device)
    rounded = reference_logprobs(model_dir, batch, "bfloat16", device)
    floor = max_error(rounded, exact, batch)
    return Bf16Bound(exact, floor, BF16_FACTOR * floor + BF16_SLACK)


def max_error(got: Any, want: Any, batch: dict[str, Any]) -> float:
    mask = batch["response_mask"] > 0
    return float((got.float().cpu() - want.float().cpu())[mask].abs().max())


def require_within(what: str, got: Any, ref: Bf16Bound, batch: dict[str, Any]) -> float:
    error = max_error(got, ref.exact, batch)
    require(math.isfinite(error) and error <= ref.bound,
            f"{what} differ from transformers' float32 forward by up to {error:.4f}, more than {ref.bound:.4f} "
            f"({BF16_FACTOR:g} × transformers' own bf16 error {ref.floor:.4f} + {BF16_SLACK:g})")
    return error


def init_world(device: str) -> str:
    """A one-rank torch.distributed world through rlcfg's own rendezvous (what a trainer worker does): NCCL on a
    GPU. Returns the backend's name."""
    import torch.distributed as dist

    from rlcfg.runtime.backends.fsdp import init_distributed

    init_distributed(0, 1, "127.0.0.1", free_port(), device)
    return str(dist.get_backend())


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fsdp_engine(ctx: Context, **settings: Any) -> Any:
    """rlcfg's FSDP actor in bf16 (fp32 master weights, bf16 compute: FSDP2 with a MixedPrecisionPolicy)."""
    from rlcfg.ir import Optimizer
    from rlcfg.runtime.backends.fsdp import FSDPEngine

    return FSDPEngine("actor", ctx.policy, dtype="bfloat16", device=ctx.device,
                      optimizer=Optimizer(name="adamw", lr=LR, grad_clip=1.0), total_optimizer_steps=10,
                      **settings)


def local(tensor: Any) -> Any:
    """A DTensor's shard on this rank (the whole tensor on one rank); a plain tensor as it is."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def finite(value: Any) -> bool:
    return value is not None and math.isfinite(float(value))


def changed_tensors(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    import torch

    return [name for name in before if not torch.equal(before[name], after[name])]


def require_trained(before: dict[str, Any], after: dict[str, Any], metrics: dict[str, Any]) -> str:
    """The step's loss and gradient norm are finite, the norm is not 0, and the update reached the head, the
    first layer and the embedding. Returns what to report."""
    require(finite(metrics.get("pg_loss")), f"the policy loss is {metrics.get('pg_loss')}")
    grad_norm = metrics.get("grad_norm")
    require(finite(grad_norm) and grad_norm > 0, f"the gradient norm is {grad_norm}")
    changed = changed_tensors(before, after)
    missed = [name for name in TRAINED if name not in changed]
    require(not missed, f"the step left {', '.join(missed)} unchanged ({len(changed)} of {len(before)} tensors "
                        "changed)")
    return (f"pg_loss {metrics['pg_loss']:.4f}, grad norm {grad_norm:.3f}, {len(changed)}/{len(before)} tensors "
            "changed")


def synchronize(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def allocated(device: str) -> int:
    """Bytes torch has allocated on the GPU, after the garbage a check left (models of a reference pass) is
    collected, so that only what the engine moved changes it."""
    import gc

    import torch

    gc.collect()
    synchronize(device)
    return torch.cuda.memory_allocated() if device == "cuda" else 0


def used_on_device() -> int:
    """Bytes in use on the GPU by every process and allocator (vLLM's and SGLang's pools are not torch's)."""
    import torch

    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    return total - free


def mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:.1f} MiB"


def greedy_reference(model_dir: str, prompts: list[list[int]], device: str, state: dict[str, Any] | None = None
                     ) -> list[tuple[list[int], list[float]]]:
    """transformers' generate, greedy, one prompt at a time: the tokens through the first EOS and the log-prob
    of each (from the raw logits)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if state is not None:
        model.load_state_dict(state)
    model = model.to(device).eval()
    eos = model.generation_config.eos_token_id
    out = []
    for prompt in prompts:
        ids = torch.tensor([prompt], device=device)
        with torch.no_grad():
            result = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                    max_new_tokens=NEW_TOKENS, output_logits=True, return_dict_in_generate=True,
                                    pad_token_id=model.generation_config.pad_token_id, eos_token_id=eos)
        tokens = result.sequences[0, len(prompt):].tolist()
        logits = torch.stack(result.logits, dim=1)[0].float()
        logprobs = torch.log_softmax(logits, -1).gather(-1, torch.tensor(tokens, device=device)[:, None])
        logprobs = logprobs.squeeze(-1).tolist()
        if eos in tokens:
            end = tokens.index(eos) + 1
            tokens, logprobs = tokens[:end], logprobs[:end]
        out.append((tokens, logprobs))
    return out


def require_greedy(what: str, got: list[tuple[list[int], list[float]]],
                   want: list[tuple[list[int], list[float]]]) -> float:
    """Same tokens as transformers' greedy generate, log-probs within FP32_LOGPROB_TOL; returns the largest
    log-prob difference."""
    worst = 0.0
    for i, ((tokens, logprobs), (ref_tokens, ref_logprobs)) in enumerate(zip(got, want)):
        require(tokens == ref_tokens, f"{what}: prompt {i} gave tokens {tokens}, transformers' greedy generate "
                                      f"{ref_tokens}")
        require(len(logprobs) == len(tokens), f"{what}: prompt {i} has {len(logprobs)} log-probs for "
                                              f"{len(tokens)} tokens")
        worst = max([worst] + [abs(a - b) for a, b in zip(logprobs, ref_logprobs)])
    require(worst <= FP32_LOGPROB_TOL, f"{what}: log-probs differ from transformers' by up to {worst:.2e}")
    return worst


def hf_state(model_dir: str) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).state_dict()


# ------------------------------------------------------------------------------------------------ FSDP

def check_fsdp2_logprobs_bf16(ctx: Context) -> str:
    backend = init_world(ctx.device)
    batch = padded_batch(ctx.policy)
    ref = bf16_bound(ctx.policy, batch, ctx.device)
    errors = {}
    for layout, packing in (("padded", False), ("packed", True)):
        engine = fsdp_engine(ctx, sequence_packing=packing)
        param = next(engine.model.parameters())
        require(engine.sharded and hasattr(param, "to_local"), "the model was not sharded with fully_shard")
        require(local(param).device.type == ctx.device, f"the parameters are on {local(param).device}")
        got = engine.compute(batch, MICRO)["values"]
        errors[layout] = require_within(f"{layout} log-probs", got, ref, batch)
        del engine
    return (f"{backend} world of 1, bf16: max |Δ| vs transformers fp32: padded {errors['padded']:.4f}, "
            f"packed {errors['packed']:.4f} ≤ {ref.bound:.4f} (transformers' own bf16 error {ref.floor:.4f})")


def check_fsdp2_ppo_step(ctx: Context) -> str:
    import torch

    init_world(ctx.device)
    engine = fsdp_engine(ctx)
    batch, cfg = rl_update(ctx.policy, lambda b: engine.compute(b, MICRO)["values"])
    before = engine.full_state_dict()
    metrics = engine.train(batch, cfg)
    report = require_trained(before, engine.full_state_dict(), metrics)
    # The log-probs moved the way the advantages point: up where positive, down where negative, on the whole.
    after = engine.compute(batch, MICRO)["values"]
    gain = float((batch["advantages"] * (after - batch["old_logprobs"]) * batch["response_mask"]).sum())
    require(torch.isfinite(after).all(), "the log-probs after the step are not finite")
    require(gain > 0, f"the advantage-weighted log-prob went down ({gain:+.4f}) after the step")
    return f"{report}, advantage-weighted log-prob {gain:+.3f}"


def trained_params(engine: Any) -> list[Any]:
    """The FSDP engine's sharded parameters, as its optimizer holds them. (model.parameters() can yield FSDP2's
    unsharded bf16 copies instead: the root module stays unsharded after a forward pass.)"""
    return [p for group in engine.optimizer.param_groups for p in group["params"]]


def placement(engine: Any) -> dict[str, int]:
    """Bytes of the engine's sharded parameters and optimizer moments on each device type (distinct storages).
    Adam's step counts, scalars, are left out: they start on the CPU and are no memory to speak of."""
    import torch

    tensors = [local(p) for p in trained_params(engine)]
    tensors += [local(v) for state in engine.optimizer.state.values() for v in state.values()
                if torch.is_tensor(v) and v.dim() > 0]
    storages: dict[tuple[str, int], int] = {}
    for t in tensors:
        storage = t.untyped_storage()
        storages[(t.device.type, storage.data_ptr())] = storage.nbytes()
    out: dict[str, int] = {}
    for (device, _ptr), nbytes in storages.items():
        out[device] = out.get(device, 0) + nbytes
    return out


def check_fsdp2_offload_onload(ctx: Context) -> str:
    init_world(ctx.device)
    engine = fsdp_engine(ctx, offload_params=True, offload_optimizer=True)
    batch, cfg = rl_update(ctx.policy, lambda b: engine.compute(b, MICRO)["values"])
    engine.train(batch, cfg)  # the optimizer has its moments now
    before = engine.compute(batch, MICRO)["values"]
    moved = placement(engine).get(ctx.device, 0)
    require(moved > 0 and not placement(engine).get("cpu"), "the parameters and optimizer moments are not all on "
                                                            f"the GPU before offload: {placement(engine)}")
    resident = allocated(ctx.device)
    engine.offload()
    offloaded = allocated(ctx.device)
    left = placement(engine).get(ctx.device, 0)
    require(left == 0, f"{mib(left)} of parameters and optimizer moments stayed on the GPU after offload")
    require(resident - offloaded >= 0.9 * moved,
            f"offload freed {mib(resident - offloaded)} of GPU memory, not the {mib(moved)} it moved")
    engine.onload()
    onloaded = allocated(ctx.device)
    where = placement(engine)
    require(not where.get("cpu") and where.get(ctx.device, 0) >= moved,
            f"after onload {mib(where.get('cpu', 0))} stayed on the CPU and {mib(where.get(ctx.device, 0))} of "
            f"{mib(moved)} is back on the GPU")
    require(onloaded - offloaded >= 0.9 * moved, f"onload allocated {mib(onloaded - offloaded)}, not {mib(moved)}")
    drift = max_error(engine.compute(batch, MICRO)["values"], before, batch)
    # Same weights, same kernels: the forward pass repeats (a restore that lost or mixed up data is off by far more).
    require(drift <= 1e-2, f"log-probs after offload and onload differ from before by {drift:.2e}")
    # The optimizer must still hold the model's parameters: a step after onload trains them.
    batch, cfg = rl_update(ctx.policy, lambda b: engine.compute(b, MICRO)["values"])
    weights = engine.full_state_dict()
    metrics = engine.train(batch, cfg)
    report = require_trained(weights, engine.full_state_dict(), metrics)
    return (f"{mib(moved)} of weights and Adam moments: allocated {mib(resident)} → {mib(offloaded)} → "
            f"{mib(onloaded)}; log-probs after onload within {drift:.1e}; a step after onload: {report}")


def optimizer_state(engine: Any) -> list[tuple[str, dict[str, Any]]]:
    """The optimizer's state of each parameter (local shards, on CPU), in the optimizer's order (the same in two
    engines built alike), each with the parameter's name where the model has it registered."""
    import torch

    names = {id(p): n for n, p in engine.model.named_parameters()}
    return [(names.get(id(p), f"parameter {i}"), {k: local(v).detach().cpu() if torch.is_tensor(v) else v
                                                  for k, v in engine.optimizer.state.get(p, {}).items()})
            for i, p in enumerate(trained_params(engine))]


def check_fsdp2_checkpoint(ctx: Context) -> str:
    import torch

    init_world(ctx.device)
    saved = fsdp_engine(ctx)
    batch, cfg = rl_update(ctx.policy, lambda b: saved.compute(b, MICRO)["values"])
    saved.train(batch, cfg)
    path = os.path.join(ctx.scratch, "checkpoint")
    saved.save(path)
    loaded = fsdp_engine(ctx)
    weights = saved.full_state_dict()
    require(changed_tensors(weights, loaded.full_state_dict()), "a fresh engine already has the trained weights")
    loaded.load(path)
    differ = changed_tensors(weights, loaded.full_state_dict())
    require(not differ, f"after load {len(differ)} weight tensors differ from the saved ones: {differ[:3]}")
    want, got = optimizer_state(saved), optimizer_state(loaded)
    require(len(got) == len(want), f"the loaded optimizer holds {len(got)} parameters, the saved one {len(want)}")
    states = 0
    for (name, state), (_, restored) in zip(want, got):
        require(set(restored) == set(state), f"{name}: optimizer state {sorted(restored)}, saved {sorted(state)}")
        for key, value in state.items():
            same = torch.equal(restored[key], value) if torch.is_tensor(value) else restored[key] == value
            require(same, f"{name}: the optimizer's {key} differs after load")
            states += 1
    schedule = [(e.scheduler.last_epoch, e.scheduler.get_last_lr()) for e in (saved, loaded)]
    require(schedule[0] == schedule[1], f"the lr schedule is at {schedule[1]} after load, saved at {schedule[0]}")
    return (f"{len(weights)} weight tensors, {states} optimizer state values and the lr schedule (step "
            f"{schedule[0][0]}) restored exactly")


def check_fsdp2_cpu_offload(ctx: Context) -> str:
    import torch

    init_world(ctx.device)
    engine = fsdp_engine(ctx, cpu_offload=True)
    param = next(engine.model.parameters())
    require(engine.sharded and local(param).device.type == "cpu",
            f"with cpu_offload the sharded parameters are on {local(param).device}, not the CPU")
    batch, cfg = rl_update(ctx.policy, lambda b: engine.compute(b, MICRO)["values"])
    initial = hf_state(ctx.policy)
    metrics = engine.train(batch, cfg)
    state = engine.full_state_dict()
    require(set(state) == set(initial), "the full state dict's names are not the Hugging Face model's: "
                                        f"{sorted(set(state) ^ set(initial))[:4]}")
    wrong = [n for n in initial if tuple(state[n].shape) != tuple(initial[n].shape)]
    require(not wrong, f"the full state dict's shapes differ from the model's for {wrong[:3]}")
    bad = [n for n, t in state.items() if not torch.isfinite(t).all()]
    require(not bad, f"the full state dict holds non-finite values in {bad[:3]}")
    report = require_trained(initial, state, metrics)
    return f"a step with parameters on the CPU: {report}; the full state dict has every Hugging Face name"


# ------------------------------------------------------------------------------------------------ rollout

def check_hf_rollout_gpu(ctx: Context) -> str:
    from rlcfg.ir import Sampling
    from rlcfg.runtime.backends.hf import HFRolloutEngine

    prompts = prompt_ids(ctx.policy)
    greedy = Sampling(max_new_tokens=NEW_TOKENS, temperature=0.0, n=1)
    engine = HFRolloutEngine(ctx.policy, device=ctx.device, dtype="float32")
    require(next(engine.model.parameters()).device.type == ctx.device, "the model is not on the GPU")
    first = [(g.token_ids, g.logprobs) for g in engine.generate(prompts, greedy)]
    worst = require_greedy("before the update", first, greedy_reference(ctx.policy, prompts, ctx.device))
    weights = sum(p.numel() * p.element_size() for p in engine.model.parameters())
    awake = allocated(ctx.device)
    engine.sleep()
    asleep = allocated(ctx.device)
    require(awake - asleep >= 0.9 * weights, f"sleep freed {mib(awake - asleep)}, not the {mib(weights)} of weights")
    engine.update_weights(hf_state(ctx.other))  # while asleep, as the trainer's sync does
    second = [(g.token_ids, g.logprobs) for g in engine.generate(prompts, greedy)]
    require(next(engine.model.parameters()).device.type == ctx.device, "generate did not wake the model up")
    worst = max(worst, require_greedy("after a weight update", second,
                                      greedy_reference(ctx.other, prompts, ctx.device)))
    require(second != first, "the two models generated the same tokens: the update cannot be told apart")
    return (f"{len(prompts)} prompts × {NEW_TOKENS} greedy tokens equal transformers' generate (log-probs within "
            f"{worst:.1e}), before and after a weight update taken asleep; sleep freed {mib(awake - asleep)}")


# ------------------------------------------------------------------------------------------------ Megatron

def check_megatron_tp1_bf16(ctx: Context) -> str:
    from rlcfg.ir import Model, Optimizer, Resources, Role
    from rlcfg.runtime.backends import megatron as M

    init_world(ctx.device)
    batch = padded_batch(ctx.policy)
    role = Role(name="actor", backend="megatron", resources=Resources(gpus=1),
                model=Model(path=ctx.policy, dtype="bfloat16"), optimizer=Optimizer(lr=LR, grad_clip=1.0),
                micro_batch_size=MICRO)
    settings = M.lower_role(role, M.model_spec_for(role), 1, total_optimizer_steps=10,
                            seq_length=batch["input_ids"].shape[1])
    engine = M.MegatronEngine("actor", ctx.policy, settings)
    ref = bf16_bound(ctx.policy, batch, ctx.device)
    error = require_within("Megatron's log-probs", engine.compute(batch, MICRO)["values"], ref, batch)
    update, cfg = rl_update(ctx.policy, lambda b: engine.compute(b, MICRO)["values"])
    before = engine.full_state_dict()
    metrics = engine.train(update, cfg)
    report = require_trained(before, engine.full_state_dict(), metrics)
    return f"max |Δ| vs transformers fp32 {error:.4f} ≤ {ref.bound:.4f}; one step: {report}"


def check_megatron_moe_bf16(ctx: Context) -> str:
    """A mixture of experts on the Megatron engine: megatron-core's router and experts without Transformer Engine
    (the path rlcfg's wheel installs), the router in fp32 as SkyRL and ChatLearn set it."""
    init_world(ctx.device)
    path = build_model(os.path.join(ctx.scratch, "moe"), seed=3, experts=4)
    step = megatron_moe_step(path, ctx.device, "Megatron's MoE log-probs")
    return f"4 experts, 2 per token: {step.error}; one step: {step.report}"


@dataclass(frozen=True)
class MegatronStep:
    error: str  # the log-probs' distance from transformers' fp32 forward, and its bound
    report: str  # what require_trained measured of the step
    before: dict[str, Any]  # the Hugging Face-named weights before and after the step
    after: dict[str, Any]


def megatron_moe_step(path: str, device: str, what: str, **role_settings: Any) -> MegatronStep:
    """The mixture of experts at `path` on a one-rank bf16 Megatron engine, its router in fp32 (as SkyRL and
    ChatLearn set it): log-probs within the bf16 bound of transformers' fp32 forward, then one RL step that trains."""
    from rlcfg.ir import Model, Optimizer, Resources, Role
    from rlcfg.runtime.backends import megatron as M

    batch = padded_batch(path)
    role = Role(name="actor", backend="megatron", resources=Resources(gpus=1),
                model=Model(path=path, dtype="bfloat16"), optimizer=Optimizer(lr=LR, grad_clip=1.0),
                micro_batch_size=MICRO, router_dtype="fp32", **role_settings)
    settings = M.lower_role(role, M.model_spec_for(role), 1, total_optimizer_steps=10,
                            seq_length=batch["input_ids"].shape[1])
    engine = M.MegatronEngine("actor", path, settings)
    ref = bf16_bound(path, batch, device)
    error = require_within(what, engine.compute(batch, MICRO)["values"], ref, batch)
    update, cfg = rl_update(path, lambda b: engine.compute(b, MICRO)["values"])
    before = engine.full_state_dict()
    metrics = engine.train(update, cfg)
    after = engine.full_state_dict()
    return MegatronStep(f"max |Δ| vs transformers fp32 {error:.4f} ≤ {ref.bound:.4f}",
                        require_trained(before, after, metrics), before, after)


def check_megatron_mla_bf16(ctx: Context) -> str:
    """DeepSeek-V3's architecture on the Megatron engine in bf16: multi-latent attention through rlcfg's core
    attention, the dense first layer, routed and shared experts, sigmoid routing with the checkpoint's correction,
    moved after the step as SkyRL's setup moves it, and kept in float32."""
    import torch

    init_world(ctx.device)
    path = build_model(os.path.join(ctx.scratch, "mla"), seed=5, experts=4, latent=True)
    rate = 1e-3
    step = megatron_moe_step(path, ctx.device, "Megatron's DeepSeek-V3 log-probs", expert_bias=rate)
    name = "model.layers.1.mlp.gate.e_score_correction_bias"
    before, after = step.before[name], step.after[name]
    require(after.dtype == before.dtype == torch.float32, f"the routing correction is {after.dtype}, not float32")
    moved = (after - before).abs()
    require(bool(((moved - rate).abs() < 1e-6).all()), f"the routing correction moved by {moved.tolist()}, not by "
                                                        f"{rate} each")
    return f"{step.error}; one step: {step.report}; the correction moved by {rate} per expert, in float32"


def check_megatron_lora_bf16(ctx: Context) -> str:
    """LoRA on the Megatron engine in bf16, on a mixture of experts: Megatron-Bridge's adapters (one per fused layer,
    one pair the experts share) start as the model, train alone, and merge into an export that computes what the
    engine computes."""
    from rlcfg.ir import Lora, Model, Optimizer, Resources, Role
    from rlcfg.runtime.backends import megatron as M

    init_world(ctx.device)
    path = build_model(os.path.join(ctx.scratch, "moe-lora"), seed=3, experts=4)
    batch = padded_batch(path)
    role = Role(name="actor", backend="megatron", resources=Resources(gpus=1),
                model=Model(path=path, dtype="bfloat16"), optimizer=Optimizer(lr=LR, grad_clip=1.0),
                micro_batch_size=MICRO, router_dtype="fp32", lora=Lora(rank=8, alpha=16.0))
    settings = M.lower_role(role, M.model_spec_for(role), 1, total_optimizer_steps=10,
                            seq_length=batch["input_ids"].shape[1])
    engine = M.MegatronEngine("actor", path, settings)
    error = require_within("Megatron's log-probs under fresh adapters", engine.compute(batch, MICRO)["values"],
                           bf16_bound(path, batch, ctx.device), batch)
    update, cfg = rl_update(path, lambda b: engine.compute(b, MICRO)["values"])
    before = engine.full_state_dict()
    metrics = engine.train(update, cfg)
    after = engine.full_state_dict()
    require(finite(metrics.get("pg_loss")) and finite(metrics.get("grad_norm")) and metrics["grad_norm"] > 0,
            f"the step's policy loss is {metrics.get('pg_loss')}, its gradient norm {metrics.get('grad_norm')}")
    changed = set(changed_tensors(before, after))
    adapted = [k for k in before if k.endswith("_proj.weight")]  # attention's and every expert's projections
    require(bool(adapted) and changed == set(adapted),
            f"the step changed {sorted(changed - set(adapted))[:3]} beside the adapted layers, or left "
            f"{sorted(set(adapted) - changed)[:3]} unchanged")
    export = os.path.join(ctx.scratch, "moe-lora-merged")
    engine.export_hf(export)
    merged = bf16_bound(export, batch, ctx.device)
    error_merged = require_within("the trained engine's log-probs against its merged export",
                                  engine.compute(batch, MICRO)["values"], merged, batch)
    return (f"rank 8 on 4 experts: fresh adapters max |Δ| {error:.4f}; one step changed the {len(adapted)} adapted "
            f"weights alone; merged export max |Δ| {error_merged:.4f} ≤ {merged.bound:.4f}")


# ------------------------------------------------------------------------------------------------ vLLM, SGLang

def rollout_plan(ctx: Context, backend: str, gpus: int, engine: tuple[tuple[str, Any], ...]) -> Any:
    """The plan of an actor and a rollout colocated on `gpus` GPUs of this machine, as rlcfg.plan lays it out
    for a config (the engine arguments come from it)."""
    import torch

    from rlcfg.ir import (Algorithm, Cluster, Data, Experiment, Model, Optimizer, Resources, Role, Sampling,
                          Schedule)
    from rlcfg.plan import build_plan
    from rlcfg.plan.model import ClusterShape

    model = Model(path=ctx.policy, dtype="float32")
    samples = len(PROMPTS) * GROUP
    exp = Experiment(
        name="gpu-acceptance", dialect="rlcfg", variant=None, cluster=Cluster(nodes=1),
        roles=(Role(name="actor", backend="fsdp", resources=Resources(gpus=gpus), model=model,
                    optimizer=Optimizer(lr=LR), micro_batch_size=MICRO),
               Role(name="rollout", backend=backend, resources=Resources(gpus=gpus), model=model, engine=engine)),
        colocation=(("actor", "rollout"),), algorithm=Algorithm(group_size=GROUP),
        sampling=Sampling(max_new_tokens=NEW_TOKENS, n=GROUP), eval_sampling=None,
        data=Data(max_prompt_length=MAX_PROMPT),
        schedule=Schedule(prompts_per_step=len(PROMPTS), samples_per_step=samples,
                          samples_per_optimizer_step=samples, total_steps=1))
    props = torch.cuda.get_device_properties(0)
    plan, _ = build_plan(exp, ClusterShape(nodes=1, gpus_per_node=gpus, gpu_name=props.name,
                                           gpu_memory_bytes=props.total_memory))
    return plan


HYBRID_RANKS = 2
# Engine settings for the colocated engines: a third of the GPU (the trainer shares it) and no CUDA graphs,
# whose capture would take most of a check's time.
VLLM_ENGINE = (("gpu_memory_utilization", 0.3), ("enforce_eager", True), ("seed", 0))
SGLANG_ENGINE = (("mem_fraction_static", 0.3), ("enforce_eager", True), ("seed", 0))


def hybrid_rank(rank: int, port: int, ctx: Context, results: Any) -> None:
    """One rank of the hybrid layout `rlcfg run` uses for a rollout colocated with the actor: a HybridWorker
    (FSDP trainer and vLLM engine in one process) on its own GPU, as Ray would give it. Puts (rank, report)."""
    # Before torch is imported: this process sees only its own GPU, as cuda:0.
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = visible.split(",")[rank] if visible else str(rank)
    try:
        results.put((rank, _hybrid_rank(rank, port, ctx)))
    except BaseException as exc:  # noqa: BLE001 - reported to the check, which fails with it
        results.put((rank, {"error": last_line(exc), "traceback": traceback.format_exc()}))


def _hybrid_rank(rank: int, port: int, ctx: Context) -> dict[str, Any]:
    import torch.distributed as dist

    from rlcfg.ir import Optimizer, Sampling
    from rlcfg.runtime.backends import vllm as vllm_backend
    from rlcfg.runtime.specs import RolloutSpec, TrainSpec
    from rlcfg.runtime.workers import HybridWorker

    plan = rollout_plan(ctx, "vllm", HYBRID_RANKS, VLLM_ENGINE)
    args = vllm_backend.engine_args(plan.experiment.role("rollout"), plan, device="cuda")
    spec = TrainSpec(kind="actor", model_path=ctx.policy, dtype="float32", device="cuda", backend="fsdp", seed=0,
                     optimizer=Optimizer(name="adamw", lr=LR, grad_clip=1.0), total_optimizer_steps=10,
                     schedule_train_steps=10, temperature=1.0)
    rollout = RolloutSpec(backend="vllm", engine_args=args, model_path=ctx.policy, tokenizer=ctx.policy,
                          device="cuda", dtype="float32")
    worker = HybridWorker({"actor": spec}, rank, HYBRID_RANKS, 1, rollout, "arithmetic")
    # The driver's order: every rank joins the world and builds its engine (a collective), then loads the trainer.
    worker.start_rollout("127.0.0.1", port)
    worker.setup("127.0.0.1", port)
    report: dict[str, Any] = {"world": dist.get_world_size(), "engine_world": worker.engine.world,
                              "backend": str(dist.get_backend()), "sleep_mode": bool(args.get("enable_sleep_mode"))}
    prompts = prompt_ids(ctx.policy)
    greedy = Sampling(max_new_tokens=NEW_TOKENS, temperature=0.0, n=1)
    first, _info = worker.generate(prompts, greedy, 0)
    first = [(tokens, logprobs) for tokens, logprobs, _finished in first]
    report["before"] = _greedy_problem(first, greedy_reference(ctx.policy, prompts, "cuda"))
    worker.rollout.wake_up()
    awake = used_on_device()
    worker.rollout.sleep()
    report["freed"] = awake - used_on_device()
    # One step over the two ranks (rlcfg.runtime.step with 2 shards): every rank computes the old log-probs of the
    # whole batch (a forward pass of the sharded model is a collective, so the ranks must run as many), then trains
    # on its own half with the denominators of the whole.
    batch, cfg = rl_update(ctx.policy, lambda b: worker.compute(b, MICRO)["values"], shards=HYBRID_RANKS)
    half = batch["response_mask"].shape[0] // HYBRID_RANKS
    mine = {k: v[rank * half:(rank + 1) * half] for k, v in batch.items()}
    metrics = worker.train_and_sync(mine, cfg)
    report["grad_norm"] = float(metrics.get("grad_norm", float("nan")))
    trained = {k: v.detach().float().cpu() for k, v in worker.engine.full_state_dict(all_ranks=True).items()}
    second, _info = worker.generate(prompts, greedy, 0)
    second = [(tokens, logprobs) for tokens, logprobs, _finished in second]
    report["after"] = _greedy_problem(second, greedy_reference(ctx.policy, prompts, "cuda", trained))
    report["moved"] = max(abs(a - b) for (_, x), (_, y) in zip(first, second) for a, b in zip(x, y))
    dist.barrier()  # neither rank leaves while the other may still be in a collective
    return report


def _greedy_problem(got: list[tuple[list[int], list[float]]], want: list[tuple[list[int], list[float]]]
                    ) -> str | None:
    try:
        require_greedy("greedy", got, want)
    except CheckError as exc:
        return str(exc)
    return None


def check_vllm_hybrid_2ranks(ctx: Context) -> str:
    import multiprocessing
    import queue

    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    port = free_port()
    ranks = [spawn.Process(target=hybrid_rank, args=(rank, port, ctx, results), daemon=False)
             for rank in range(HYBRID_RANKS)]
    for process in ranks:
        process.start()
    reports: dict[int, dict[str, Any]] = {}
    deadline = time.monotonic() + CHECKS_BY_NAME["vllm_hybrid_2ranks"].limit_s - 20
    try:
        while len(reports) < HYBRID_RANKS:
            try:
                rank, report = results.get(timeout=max(1.0, deadline - time.monotonic()))
            except queue.Empty:
                raise CheckError(f"ranks {sorted(set(range(HYBRID_RANKS)) - set(reports))} did not finish") from None
            reports[rank] = report
            if "error" in report:  # the other rank waits for this one in a collective: do not wait for it
                break
    finally:
        for process in ranks:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
    for rank, report in sorted(reports.items()):
        if "error" in report:
            raise CheckError(f"rank {rank}: {report['error']}", f"rank {rank}:\n{report['traceback']}")
    for rank, report in sorted(reports.items()):
        require(report["world"] == HYBRID_RANKS and report["engine_world"] == HYBRID_RANKS,
                f"rank {rank}: torch.distributed has {report['world']} ranks and the FSDP engine sees "
                f"{report['engine_world']}, not {HYBRID_RANKS} (the engine built first set up a world of its own: "
                "the ranks train without gradient sync)")
        require(report["sleep_mode"], "the colocated engine was built without sleep mode")
        require(report["before"] is None, f"rank {rank}, before the update: {report['before']}")
        require(finite(report["grad_norm"]) and report["grad_norm"] > 0, f"rank {rank}: grad norm "
                                                                         f"{report['grad_norm']}")
        require(report["after"] is None, f"rank {rank}, after train_and_sync: {report['after']}")
        require(report["moved"] > FP32_LOGPROB_TOL, f"rank {rank}: the engine's log-probs did not move after the "
                                                    "update")
        require(report["freed"] >= 2**30, f"rank {rank}: sleep freed only {mib(report['freed'])}")
    freed = min(r["freed"] for r in reports.values())
    return (f"{HYBRID_RANKS} ranks in one {reports[0]['backend']} world; greedy equals transformers before and "
            f"after train_and_sync; sleep frees ≥ {mib(freed)} per GPU")


def check_sglang_sleep_update_wake(ctx: Context) -> str:
    from rlcfg.ir import Sampling
    from rlcfg.runtime.backends import sglang as sglang_backend

    plan = rollout_plan(ctx, "sglang", 1, SGLANG_ENGINE)
    args = sglang_backend.server_args(plan.experiment.role("rollout"), plan, fields=sglang_backend.installed_fields())
    require(args.get("enable_memory_saver"), "the colocated engine was built without the memory saver")
    engine = sglang_backend.SGLangRolloutEngine(args)
    try:
        prompts = prompt_ids(ctx.policy)
        greedy = Sampling(max_new_tokens=NEW_TOKENS, temperature=0.0, n=1)
        first = [(g.token_ids, g.logprobs) for g in engine.generate(prompts, greedy)]
        worst = require_greedy("before the update", first, greedy_reference(ctx.policy, prompts, ctx.device))
        awake = used_on_device()
        engine.sleep()
        freed = awake - used_on_device()
        require(freed >= 2**30, f"sleep freed only {mib(freed)}")
        engine.update_weights(hf_state(ctx.other))
        engine.wake_up()
        second = [(g.token_ids, g.logprobs) for g in engine.generate(prompts, greedy)]
        worst = max(worst, require_greedy("after sleep, update and wake_up", second,
                                          greedy_reference(ctx.other, prompts, ctx.device)))
    finally:
        engine.shutdown()
    return (f"greedy equals transformers before and after sleep → update → wake_up (log-probs within {worst:.1e}); "
            f"sleep freed {mib(freed)}")


# ------------------------------------------------------------------------------------------------ the registry

@dataclass(frozen=True)
class Check:
    name: str
    run: Callable[[Context], str]
    limit_s: int  # its process is stopped after this long
    package: str | None = None  # a module that must be installed (else SKIP)
    gpus: int = 1


CHECKS = (
    Check("fsdp2_logprobs_bf16", check_fsdp2_logprobs_bf16, 120),
    Check("fsdp2_ppo_step", check_fsdp2_ppo_step, 120),
    Check("fsdp2_offload_onload", check_fsdp2_offload_onload, 120),
    Check("fsdp2_checkpoint", check_fsdp2_checkpoint, 120),
    Check("fsdp2_cpu_offload", check_fsdp2_cpu_offload, 120),
    Check("hf_rollout_gpu", check_hf_rollout_gpu, 120),
    Check("megatron_tp1_bf16", check_megatron_tp1_bf16, 240, package="megatron.core"),
    Check("megatron_moe_bf16", check_megatron_moe_bf16, 240, package="megatron.core"),
    Check("megatron_mla_bf16", check_megatron_mla_bf16, 240, package="megatron.core"),
    Check("megatron_lora_bf16", check_megatron_lora_bf16, 240, package="megatron.core"),
    Check("vllm_hybrid_2ranks", check_vllm_hybrid_2ranks, 300, package="vllm", gpus=HYBRID_RANKS),
    Check("sglang_sleep_update_wake", check_sglang_sleep_update_wake, 300, package="sglang"),
)
CHECKS_BY_NAME = {c.name: c for c in CHECKS}
# What a user installs for each optional package.
EXTRA_OF = {"megatron.core": "megatron", "vllm": "vllm", "sglang": "sglang"}


def last_line(exc: BaseException) -> str:
    """The last line of the exception as Python prints it, with its type when the message spans lines."""
    lines = [line for line in "".join(traceback.format_exception_only(type(exc), exc)).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    return lines[-1] if len(lines) == 1 else f"{type(exc).__name__}: {lines[-1].strip()}"


def installed(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # the parent package is missing
        return False


# ------------------------------------------------------------------------------------------------ one check

def run_child(name: str, ctx: Context, result_file: str) -> int:
    """Run one check in this process and write its outcome (status, detail, traceback) as JSON."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    outcome: dict[str, Any]
    try:
        _quiet()
        outcome = {"status": "PASS", "detail": CHECKS_BY_NAME[name].run(ctx)}
    except CheckError as exc:  # its message says it all
        outcome = {"status": "FAIL", "detail": str(exc), "traceback": traceback.format_exc() + exc.details}
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a FAIL line
        outcome = {"status": "FAIL", "detail": last_line(exc), "traceback": traceback.format_exc()}
    with open(result_file, "w", encoding="utf-8") as f:
        json.dump(outcome, f)
    _leave_world()  # after the outcome is written: a teardown that fails must not hide it
    return 0


def _quiet() -> None:
    import warnings

    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)


def _leave_world() -> None:
    if "torch" not in sys.modules:
        return
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


# ------------------------------------------------------------------------------------------------ the run

@dataclass
class Outcome:
    status: str  # PASS, FAIL, SKIP
    detail: str
    traceback: str = ""
    log: str = ""  # the end of what the check's process printed (libraries' own messages), for --verbose

    def line(self, name: str) -> str:
        return f"PASS {name} ({self.detail})" if self.status == "PASS" else f"{self.status} {name}: {self.detail}"


def machine() -> tuple[int, str]:
    """(CUDA devices, a description of torch and the devices)."""
    try:
        import torch
    except ImportError:
        return 0, "torch is not installed"
    if not torch.cuda.is_available():
        return 0, f"torch {torch.__version__}, {NO_CUDA}"
    count = torch.cuda.device_count()
    return count, f"torch {torch.__version__}, {count} × {torch.cuda.get_device_name(0)}"


def skip_reason(check: Check, gpus: int) -> str | None:
    if gpus == 0:
        return NO_CUDA
    if check.package and not installed(check.package):
        extra = EXTRA_OF[check.package]
        return f"{check.package} is not installed (the rlcfg[{extra}] extra)"
    if gpus < check.gpus:
        return f"needs {check.gpus} CUDA devices (one per rank), this machine has {gpus}"
    return None


class Runner:
    """Runs checks one at a time, each in a process of its own (and its own session, so that a timeout or a stop
    ends every process the check started: engines, ranks). SIGTERM (bench/gpu_acceptance.sh's timeout) ends the
    running check; the rest are reported as not run."""

    def __init__(self, work: str):
        self.work = work
        self.models: tuple[str, str] | None = None
        self.process: subprocess.Popen | None = None
        self.stopped = False

    def stop(self, _signum: int, _frame: Any) -> None:
        """The signal handler: kill the running check; its wait() in run() then returns. (Waiting here could
        deadlock with that wait.)"""
        self.stopped = True
        if self.process is not None:
            _kill_session(self.process)

    def build_models(self) -> tuple[str, str]:
        """The test models, built once, on the CPU, before the first check that runs."""
        if self.models is None:
            self.models = (build_model(os.path.join(self.work, "policy"), POLICY_SEED),
                           build_model(os.path.join(self.work, "other"), OTHER_SEED))
        return self.models

    def run(self, check: Check, limit_s: float) -> Outcome:
        assert self.models is not None
        scratch = os.path.join(self.work, check.name)
        os.makedirs(scratch)
        result_file, log_file = os.path.join(scratch, "result.json"), os.path.join(scratch, "log.txt")
        env = dict(os.environ, PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1",
                   TRANSFORMERS_OFFLINE="1")
        command = [sys.executable, os.path.abspath(__file__), "--child", check.name, "--policy", self.models[0],
                   "--other", self.models[1], "--scratch", scratch, "--result", result_file]
        with open(log_file, "w", encoding="utf-8") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                            start_new_session=True)
            try:
                self.process.wait(timeout=limit_s)
            except subprocess.TimeoutExpired:
                _kill_session(self.process)
                self.process.wait()
                return Outcome("FAIL", f"timed out after {limit_s:.0f} s", log=_tail(log_file))
            finally:
                code, self.process = self.process.returncode, None
        if self.stopped:
            return Outcome("FAIL", "stopped (SIGTERM) while running", log=_tail(log_file))
        try:
            with open(result_file, encoding="utf-8") as f:
                found = json.load(f)
        except (OSError, ValueError):
            tail = _tail(log_file)
            last = next((line.strip() for line in reversed(tail.splitlines()) if line.strip()), "")
            return Outcome("FAIL", f"the check's process exited with code {code} without a result"
                                   + (f": {last}" if last else ""), log=tail)
        log = _tail(log_file) if found["status"] == "FAIL" else ""
        return Outcome(found["status"], found["detail"], found.get("traceback", ""), log)


def _kill_session(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path: str, lines: int = 40) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="print the checks' names and exit")
    parser.add_argument("--only", help="run only these checks (comma-separated names)")
    parser.add_argument("--verbose", action="store_true",
                        help="print a failed check's traceback and the end of its log")
    parser.add_argument("--budget-s", type=float, default=BUDGET_S, help="time for the whole run, in seconds")
    for internal in ("--child", "--policy", "--other", "--scratch", "--result"):
        parser.add_argument(internal, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return run_child(args.child, Context(args.policy, args.other, args.scratch), args.result)
    if args.list:
        print("\n".join(c.name for c in CHECKS))
        return 0
    checks = list(CHECKS)
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in CHECKS_BY_NAME]
        if unknown:
            parser.error(f"unknown check {', '.join(unknown)}; --list names them")
        checks = [c for c in CHECKS if c.name in wanted]
    return run_checks(checks, args.budget_s, args.verbose)


def run_one(runner: Runner, check: Check, left_s: float) -> Outcome:
    """A check that is not skipped, given `left_s` seconds of the run's budget."""
    if not runner.stopped:
        started = time.monotonic()
        try:
            runner.build_models()
        except Exception as exc:  # noqa: BLE001 - every check that needs them fails with the reason
            return Outcome("FAIL", f"building the test models: {last_line(exc)}", traceback.format_exc())
        left_s -= time.monotonic() - started
    if runner.stopped:
        return Outcome("FAIL", "not run: the run was stopped (SIGTERM)")
    if left_s < 10:
        return Outcome("FAIL", "not run: the run's time budget is spent")
    return runner.run(check, min(check.limit_s, left_s))


def run_checks(checks: list[Check], budget_s: float, verbose: bool) -> int:
    import shutil

    start = time.monotonic()
    work = tempfile.mkdtemp(prefix="rlcfg-gpu-acceptance-")
    runner = Runner(work)
    signal.signal(signal.SIGTERM, runner.stop)
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    try:
        gpus, description = machine()
        print(f"rlcfg GPU acceptance: {description}", flush=True)
        for check in checks:
            reason = skip_reason(check, gpus)
            if reason is not None:
                outcome = Outcome("SKIP", reason)
            else:
                outcome = run_one(runner, check, budget_s - (time.monotonic() - start))
            counts[outcome.status] += 1
            print(outcome.line(check.name), flush=True)
            if verbose and outcome.status == "FAIL":
                for title, text in (("traceback", outcome.traceback), ("the end of its log", outcome.log)):
                    if text.strip():
                        print(f"  {title}:\n    " + text.rstrip().replace("\n", "\n    "), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"summary: {counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped "
          f"({len(checks)} checks, {time.monotonic() - start:.0f} s)", flush=True)
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
