"""The `fsdp` training backend: torch FSDP2 (`fully_shard`) over a gloo (CPU) or NCCL (GPU) process group; on GPUs
the group has gloo beside NCCL for the tensors CPU offload keeps in host memory.

One FSDPEngine lives in each rank's Ray actor. It serves three roles: the actor (policy: log-probs and the
clipped policy-gradient update), the reference (frozen: log-probs only) and the critic (values and the
clipped value loss). Every decoder layer is its own FSDP unit (the model's `_no_split_modules`), then the
root; with `fsdp_shard` smaller than the world it is HSDP (replicate × shard mesh). With `sequence_parallel` above
1, groups of that many ranks share their samples and split each one's tokens (Ulysses: ulysses.py).
"""

from __future__ import annotations

import math
import os
import time
from typing import Any, Mapping

from rlcfg.ir import Lora, Optimizer
from rlcfg.plan.memory import CHUNKED_HEAD_FAMILIES, LOGPROB_CHUNK_TOKENS
from rlcfg.runtime import algorithms as A
from rlcfg.runtime import packing
from rlcfg.runtime.step import SHARE_METRICS


def init_distributed(rank: int, world: int, address: str, port: int, device: str) -> None:
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return
    os.environ.update(MASTER_ADDR=address, MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK="0")
    # CPU offload (CPUOffloadPolicy) keeps the sharded weights and gradients in host memory as DTensors of the
    # GPU mesh, and the gradient norm reduces them there: over an NCCL-only group that fails ("No backend type
    # associated with device type cpu"). Gloo takes the CPU tensors; CUDA tensors still go over NCCL.
    backend = "cuda:nccl,cpu:gloo" if device == "cuda" else "gloo"
    if device == "cuda":
        torch.cuda.set_device(0)  # Ray narrowed CUDA_VISIBLE_DEVICES to this actor's GPU
    dist.init_process_group(backend=backend, rank=rank, world_size=world)


def lr_factor(opt: Optimizer, length: int | None):
    """LambdaLR's multiplier of lr at each schedule step: rlcfg.runtime.algorithms.lr_at of the optimizer's
    schedule for a run of `length` schedule steps."""
    schedule = A.lr_schedule(opt, length)
    if not schedule.lr:
        return lambda step: 0.0
    return lambda step: A.lr_at(step, schedule) / schedule.lr


def _trim(batch: Mapping[str, Any], prompt_width: int) -> tuple[int, int]:
    """Columns worth computing: from the first prompt column any row uses to the last response column any row
    uses (left-padded prompts, right-padded responses)."""
    import torch

    used = batch["attention_mask"][:, :prompt_width].any(dim=0)
    lo = int(torch.nonzero(used)[0]) if used.any() else prompt_width - 1
    lo = min(lo, prompt_width - 1)
    resp_used = batch["response_mask"].any(dim=0)
    hi = int(torch.nonzero(resp_used)[-1]) + 1 if resp_used.any() else 1
    return lo, hi


SPLIT_SAVING = 0.25  # a micro-batch is run as two forward passes when that computes this share fewer columns
SPLIT_MIN_ROWS = 4  # rows a forward pass of a split micro-batch holds at least


def length_groups(attention: Any, response_mask: Any, prompt_width: int) -> list[Any] | None:
    """The rows of a padded micro-batch in two groups, shorter and longer responses, when computing each group
    at its own width costs SPLIT_SAVING less than the whole at the longest row's; None otherwise. The cost of a
    group is its rows × (its longest prompt + its longest response − 1) columns."""
    import torch

    n = attention.shape[0]
    if n < 2 * SPLIT_MIN_ROWS:
        return None
    prompts = attention[:, :prompt_width].sum(dim=1)
    used = response_mask > 0
    columns = torch.arange(used.shape[1], device=used.device)[None, :]
    responses = torch.where(used, columns + 1, torch.zeros_like(columns)).amax(dim=1)  # last column used
    order = torch.argsort(responses * (prompt_width + 1) + prompts, stable=True)
    p, r = prompts[order].tolist(), responses[order].tolist()
    whole = n * (max(p) + max(r) - 1)
    prefix = [0] * n
    running = 0
    for i, width in enumerate(p):
        running = max(running, width)
        prefix[i] = running
    best, split = whole, None
    suffix = 0
    for k in range(n - 1, SPLIT_MIN_ROWS - 1, -1):  # the long group is rows k.. of the sorted order
        suffix = max(suffix, p[k])
        if n - k < SPLIT_MIN_ROWS:
            continue
        cost = k * (prefix[k - 1] + r[k - 1] - 1) + (n - k) * (suffix + r[-1] - 1)
        if cost < best:
            best, split = cost, k
    if split is None or best > (1 - SPLIT_SAVING) * whole:
        return None
    return [order[:split], order[split:]]


def without_dropout(model: Any) -> None:
    """Every dropout probability of `model` at 0 (AReaL `disable_dropout`). Dropout layers are set to p=0;
    transformers' attention modules keep theirs as a float they pass to the attention kernel in train mode
    (`attention_dropout`), so those floats are zeroed too."""
    import torch

    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        for name, value in list(vars(module).items()):
            if name.endswith("dropout") and isinstance(value, float):
                setattr(module, name, 0.0)


def freeze(model: Any, prefixes: tuple[str, ...]) -> tuple[str, ...]:
    """Turn off requires_grad of every parameter whose name starts with one of `prefixes` (ROLL
    model_providers.freeze_model); returns the prefixes that matched no parameter."""
    matched: set[str] = set()
    for name, param in model.named_parameters():
        hits = [p for p in prefixes if name.startswith(p)]
        if hits:
            param.requires_grad_(False)
            matched.update(hits)
    return tuple(p for p in prefixes if p not in matched)


# PEFT's prefix of the wrapped model's parameter names, and its name of the one adapter rlcfg trains.
PEFT_PREFIX = "base_model.model."
ADAPTER = "default"
LORA_ADAPTER_DIR = "lora_adapter"  # beside the merged model in an export, as the frameworks name the adapter's folder


class LoraTargetError(ValueError):
    """A LoRA target that rlcfg cannot merge for the rollout engines, or one that names no module: found when the
    model is loaded. `problem` says what, without the config's key, which the driver adds."""

    def __init__(self, problem: str):
        super().__init__(problem)
        self.problem = problem


def with_lora(model: Any, lora: Lora, causal_lm: bool) -> Any:
    """`model` wrapped by PEFT with one LoRA adapter: only the adapter's weights still require gradients. PEFT keeps
    the adapter in fp32 over a bf16 or fp16 base (autocast_adapter_dtype), as the optimizer's master copy."""
    from peft import LoraConfig, TaskType, get_peft_model
    from peft.tuners.lora import Linear as LoraLinear
    from peft.tuners.lora import LoraLayer

    def modules(value: str | tuple[str, ...] | None) -> str | list[str] | None:
        return list(value) if isinstance(value, tuple) else value

    config = LoraConfig(r=lora.rank, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                        target_modules=modules(lora.target_modules), exclude_modules=modules(lora.exclude_modules),
                        bias="none", init_lora_weights=True if lora.init == "kaiming" else lora.init,
                        task_type=TaskType.CAUSAL_LM if causal_lm else None)
    try:
        wrapped = get_peft_model(model, config)
    except ValueError as e:  # PEFT: "Target modules {...} not found in the base model"
        raise LoraTargetError(f"= {_shown(lora.target_modules)}: PEFT cannot adapt the model with it ({e}); name "
                              "the model's linear layers (q_proj, v_proj, ...) or use all-linear") from None
    # The rollout engines get the merged weights (merged_lora_state), which is written for linear layers.
    other = sorted({type(m).__name__ for m in wrapped.modules() if isinstance(m, LoraLayer)
                    and not isinstance(m, LoraLinear)})
    if other:
        raise LoraTargetError(f"= {_shown(lora.target_modules)} puts adapters on {', '.join(other)} layers; rlcfg "
                              "merges adapters of linear layers only, so target linear layers")
    return wrapped


def _shown(targets: str | tuple[str, ...]) -> str:
    return repr(targets) if isinstance(targets, str) else "[" + ", ".join(targets) + "]"


def merged_lora_state(state: Mapping[str, Any], scaling: float, fan_in_fan_out: bool = False) -> dict[str, Any]:
    """A PEFT LoRA model's weights under the base model's Hugging Face names, each adapted weight merged:
    W + scaling · B·A (transposed for fan-in-fan-out layers, GPT-2's Conv1D), in W's dtype. What a rollout engine
    or a plain checkpoint of the trained model holds."""
    merged: dict[str, Any] = {}
    for name, tensor in state.items():
        if ".lora_A." in name or ".lora_B." in name:
            continue
        plain = name[len(PEFT_PREFIX):] if name.startswith(PEFT_PREFIX) else name
        if ".base_layer." in plain:
            module, leaf = plain.rsplit(".base_layer.", 1)
            if leaf == "weight":
                a = state[f"{PEFT_PREFIX}{module}.lora_A.{ADAPTER}.weight"].float()
                b = state[f"{PEFT_PREFIX}{module}.lora_B.{ADAPTER}.weight"].float()
                delta = scaling * (b @ a)
                tensor = (tensor.float() + (delta.T if fan_in_fan_out else delta)).to(tensor.dtype)
            plain = f"{module}.{leaf}"
        merged[plain] = tensor
    return merged


class ChunkedLogProbs:
    """The output layer's forward, replaced: with a request set, it turns the last hidden states into the targets'
    log-probs (and entropies), LOGPROB_CHUNK_TOKENS positions of logits at a time, and each chunk's logits are
    recomputed in the backward pass instead of kept. A micro-batch's whole fp32 logits (tokens × vocabulary × 4
    bytes: 180 GB for 64 samples of 4.6k tokens over a 152k vocabulary) then never exist at once. It stays the
    output layer's forward so that FSDP's root unit gathers the weight as it does for logits; without a request
    (SFT, reward models) it is the layer's own forward."""

    def __init__(self, head: Any):
        self.linear = head.forward  # the layer's own (bound) forward
        self.request: tuple | None = None

    def __call__(self, hidden: Any) -> Any:
        if self.request is None:
            return self.linear(hidden)
        import torch
        from torch.utils.checkpoint import checkpoint

        targets, temperature, want_entropy = self.request
        flat = hidden.reshape(-1, hidden.shape[-1])
        wanted = targets.reshape(-1)

        def chunk(states: Any, chosen: Any) -> Any:
            logits = self.linear(states).float() / temperature
            logprobs = torch.log_softmax(logits, dim=-1).gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
            if not want_entropy:
                return logprobs.unsqueeze(-1)
            return torch.stack([logprobs, A.entropy_from_logits(logits)], dim=-1)

        parts = []
        for start in range(0, flat.shape[0], LOGPROB_CHUNK_TOKENS):
            states, chosen = flat[start:start + LOGPROB_CHUNK_TOKENS], wanted[start:start + LOGPROB_CHUNK_TOKENS]
            parts.append(checkpoint(chunk, states, chosen, use_reentrant=False) if torch.is_grad_enabled()
                         else chunk(states, chosen))
        return torch.cat(parts).reshape(*hidden.shape[:-1], -1)


def chunked_head(model: Any) -> ChunkedLogProbs | None:
    """Install ChunkedLogProbs as the output layer's forward of a causal LM whose family allows it; None otherwise
    (the engine then computes whole logits)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    head = base.get_output_embeddings() if hasattr(base, "get_output_embeddings") else None
    if getattr(base.config, "model_type", None) not in CHUNKED_HEAD_FAMILIES or head is None:
        return None
    replacement = ChunkedLogProbs(head)
    head.forward = replacement
    return replacement


class FSDPEngine:
    def __init__(self, kind: str, model_path: str, *, dtype: str = "float32", device: str = "cpu",
                 optimizer: Optimizer | None = None, total_optimizer_steps: int | None = None,
                 schedule_train_steps: int | None = None,
                 gradient_checkpointing: bool = False, fsdp_shard: int | None = None, temperature: float = 1.0,
                 cpu_offload: bool = False, offload_params: bool = False, offload_optimizer: bool = False,
                 sequence_packing: bool = False, max_tokens_per_micro_batch: int | None = None,
                 budget_key: str | None = None, disable_dropout: bool = False,
                 frozen_prefixes: tuple[str, ...] = (), lora: Lora | None = None, sequence_parallel: int = 1):
        import torch
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

        self.kind = kind
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.device = torch.device("cuda", 0) if device == "cuda" else torch.device("cpu")
        self.temperature = temperature if temperature and temperature > 0 else 1.0
        self.packing = sequence_packing
        # The token budget of a packed micro-batch, and the user's key for it (for the message when a sample
        # alone exceeds it); None: a packed micro-batch holds the samples an unpacked one would.
        self.token_budget = max_tokens_per_micro_batch if sequence_packing else None
        self.budget_key = budget_key
        self.offload_params, self.offload_optimizer = offload_params and device == "cuda", offload_optimizer and device == "cuda"
        compute_dtype = getattr(torch, dtype)
        trains = optimizer is not None
        # Ulysses: ranks in runs of `sequence_parallel` hold the same samples and split their columns (ulysses.py).
        self.sp = max(sequence_parallel, 1)
        self.data_parallel = self.world // self.sp
        attention: dict[str, str] = {}
        if self.sp > 1:
            from transformers import AutoConfig

            from rlcfg.runtime.backends import ulysses

            ulysses.check_model(AutoConfig.from_pretrained(model_path), self.sp)
            ulysses.register()
            self.sp_group, self.sp_rank = ulysses.groups(self.world, self.sp)
            attention = {"attn_implementation": ulysses.ATTENTION}
        # Trainable weights are kept in fp32 (the optimizer's master copy) and computed in the configured
        # dtype; a frozen reference, and the frozen base under LoRA adapters, are simply loaded in that dtype.
        self.lora = lora if trains else None
        load_dtype = torch.float32 if trains and self.lora is None else compute_dtype
        # A reward model (Experiment.kind "reward_model") has the critic's scalar head.
        if kind in ("critic", "reward_model"):
            from transformers import AutoModelForTokenClassification

            model = AutoModelForTokenClassification.from_pretrained(model_path, num_labels=1, dtype=load_dtype,
                                                                    **attention)
        else:
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained(model_path, dtype=load_dtype, **attention)
        if gradient_checkpointing and trains:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
        if disable_dropout and trains:
            without_dropout(model)
        if not trains:
            model.requires_grad_(False)
        # Before sharding (the names are the Hugging Face ones) and before the optimizer, which takes only the
        # parameters that still require gradients.
        self.unmatched_prefixes = freeze(model, frozen_prefixes) if trains else ()
        if self.lora is not None:
            model = with_lora(model, self.lora, causal_lm=kind not in ("critic", "reward_model"))
        self.head = chunked_head(model) if kind in ("actor", "reference") else None
        model.to(self.device)

        if fsdp_shard and fsdp_shard < self.world:
            mesh = init_device_mesh(self.device.type, (self.world // fsdp_shard, fsdp_shard),
                                    mesh_dim_names=("replicate", "shard"))
        else:
            mesh = init_device_mesh(self.device.type, (self.world,), mesh_dim_names=("shard",))
        kwargs: dict[str, Any] = {"mesh": mesh}
        if trains and compute_dtype != torch.float32:
            kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=compute_dtype, reduce_dtype=torch.float32)
        if cpu_offload and self.device.type == "cuda":
            kwargs["offload_policy"] = CPUOffloadPolicy()
        # One rank in fp32 without offload has nothing to shard, cast or move: FSDP2 would only add its
        # all-gather copies and DTensor dispatch to every step (a third of a tiny model's step on CPU).
        self.sharded = self.world > 1 or len(kwargs) > 1
        if self.sharded:
            units = set(getattr(model, "_no_split_modules", None) or ())
            for module in model.modules():
                if type(module).__name__ in units:
                    fully_shard(module, **kwargs)
            fully_shard(model, **kwargs)
        self.model = model
        self.optimizer = None
        self.scheduler = None
        self.schedule_per_train_step = False
        if trains:
            opt = optimizer
            params = [p for p in model.parameters() if p.requires_grad]
            if opt.name == "sgd":
                self.optimizer = torch.optim.SGD(params, lr=opt.lr, weight_decay=opt.weight_decay)
            else:
                cls = torch.optim.AdamW if opt.name == "adamw" else torch.optim.Adam
                self.optimizer = cls(params, lr=opt.lr, betas=tuple(opt.betas), eps=opt.eps,
                                     weight_decay=opt.weight_decay,
                                     foreach=True)  # one DTensor dispatch per step, not one per parameter
            # AReaL advances its schedule once per training step (train()), the others once per optimizer step.
            self.schedule_per_train_step = opt.schedule_unit == "train_step"
            length = schedule_train_steps if self.schedule_per_train_step else total_optimizer_steps
            self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_factor(opt, length))
            self.grad_clip = opt.grad_clip

    # ------------------------------------------------------------------------------------------ forward

    def _forward(self, mb: Mapping[str, Any], prompt_width: int, want_entropy: bool = False):
        """Per-response-token log-probs (or values for the critic) of one micro-batch, trimmed to the columns
        it uses; returns (out, entropy or None, response columns)."""
        if self.sp > 1:
            return self._forward_sequence_parallel(mb, prompt_width, want_entropy)
        if self.packing:
            return self._forward_packed(mb, prompt_width, want_entropy)
        # Sharded ranks must run the same number of forward passes (each one gathers the weights from all), and
        # each rank's rows would split differently: only a lone rank splits.
        groups = length_groups(mb["attention_mask"], mb["response_mask"], prompt_width) if self.world == 1 else None
        if groups is None:
            return self._forward_padded(mb, prompt_width, want_entropy)
        # Most of a micro-batch is padding when a few responses run long: its short and its long rows are run as
        # two forward passes, each trimmed to its own width, and their outputs put back in the micro-batch's row
        # order, so the loss and its one backward are those of the micro-batch computed at once.
        hi = _trim(mb, prompt_width)[1]
        parts = [(rows, *self._forward_padded({k: mb[k][rows] for k in ("input_ids", "attention_mask",
                                                                          "response_mask")}, prompt_width,
                                              want_entropy)) for rows in groups]

        def assembled(which: int) -> Any:
            if parts[0][which] is None:
                return None
            out = parts[0][which].new_zeros((mb["input_ids"].shape[0], hi))
            for rows, *outputs, width in parts:
                out[rows.to(out.device), :width] = outputs[which - 1]
            return out

        return assembled(1), assembled(2), hi

    def _forward_padded(self, mb: Mapping[str, Any], prompt_width: int, want_entropy: bool = False):
        """_forward of rows padded to a common width (left-padded prompts, right-padded responses)."""
        import torch

        lo, hi = _trim(mb, prompt_width)
        # The last response token predicts nothing we score, so the input stops one short of it.
        end = prompt_width + hi - 1
        ids = mb["input_ids"][:, lo:end].to(self.device)
        attn = mb["attention_mask"][:, lo:end].to(self.device)
        pos = (attn.cumsum(dim=1) - 1).clamp(min=0)
        # Without padding the mask says nothing the causal kernel does not know, and leaving it out lets SDPA
        # take its causal fast path instead of materialising a mask.
        mask = None if bool(attn.all()) else attn
        start = prompt_width - 1 - lo  # logits at column c predict the token at c + 1; start + hi = input width
        targets = mb["input_ids"][:, prompt_width:prompt_width + hi].to(self.device)
        if self.head is not None:
            # Only the last `hi` columns predict response tokens: the output layer sees just those.
            scored = self._scored(targets, want_entropy, input_ids=ids, attention_mask=mask, position_ids=pos,
                                  logits_to_keep=hi)
            return scored[..., 0], (scored[..., 1] if want_entropy else None), hi
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False)
        if self.kind == "critic":
            return out.logits[:, start:, 0].float(), None, hi
        logits = out.logits[:, start:].float() / self.temperature
        logprobs = torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        entropy = A.entropy_from_logits(logits) if want_entropy else None
        return logprobs, entropy, hi

    def _scored(self, targets: Any, want_entropy: bool, **inputs: Any) -> Any:
        """The model run with the output layer handing back [..., log-prob (, entropy)] of `targets`
        (ChunkedLogProbs), for the positions `inputs["logits_to_keep"]` selects."""
        self.head.request = (targets, self.temperature, want_entropy)
        try:
            return self.model(**inputs, use_cache=False).logits
        finally:
            self.head.request = None

    def _forward_packed(self, mb: Mapping[str, Any], prompt_width: int, want_entropy: bool = False):
        """_forward with the micro-batch's samples packed into one row (packing.pack): no padding is computed,
        and each sample sees only its own tokens."""
        import torch

        row = packing.pack(mb["input_ids"], mb["attention_mask"], prompt_width)
        samples = mb["input_ids"].shape[0]
        sources = row.sources.to(self.device)
        rows, cols = row.rows.to(self.device), row.cols.to(self.device)
        targets = mb["input_ids"][:, prompt_width:].to(self.device)[rows, cols]
        # No attention mask: transformers then reads the sample boundaries from the restarting position ids.
        inputs = {"input_ids": row.input_ids.to(self.device), "position_ids": row.position_ids.to(self.device)}
        if self.head is not None:
            scored = self._scored(targets.unsqueeze(0), want_entropy, logits_to_keep=sources, **inputs)[0]
            entropy = row.unpack(scored[:, 1], samples) if want_entropy else None
            return row.unpack(scored[:, 0], samples), entropy, row.width
        out = self.model(**inputs, use_cache=False)
        if self.kind == "critic":
            return row.unpack(out.logits[0, sources, 0].float(), samples), None, row.width
        logits = out.logits[0, sources].float() / self.temperature
        logprobs = torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        entropy = row.unpack(A.entropy_from_logits(logits), samples) if want_entropy else None
        return row.unpack(logprobs, samples), entropy, row.width

    def _forward_sequence_parallel(self, mb: Mapping[str, Any], prompt_width: int, want_entropy: bool = False):
        """_forward on a Ulysses group: the columns of the padded (or packed) micro-batch are split over the
        group's ranks (ulysses.py), and each rank's per-column results are gathered, so every rank returns the
        whole micro-batch's."""
        import torch

        if self.packing:
            row = packing.pack(mb["input_ids"], mb["attention_mask"], prompt_width)
            samples = mb["input_ids"].shape[0]
            sources = row.sources.to(self.device)
            rows, cols = row.rows.to(self.device), row.cols.to(self.device)
            ids = row.input_ids.to(self.device)
            targets = torch.zeros_like(ids)
            targets[0, sources] = mb["input_ids"][:, prompt_width:].to(self.device)[rows, cols]
            scored = torch.zeros(ids.shape[1], dtype=torch.bool, device=self.device)
            scored[sources] = True
            out = self._columns(ids, row.position_ids.to(self.device), None, targets, scored, want_entropy,
                                packed=True)[0, sources]
            entropy = row.unpack(out[:, 1], samples) if want_entropy else None
            return row.unpack(out[:, 0], samples), entropy, row.width
        lo, hi = _trim(mb, prompt_width)
        end = prompt_width + hi - 1
        ids = mb["input_ids"][:, lo:end].to(self.device)
        attn = mb["attention_mask"][:, lo:end].to(self.device)
        pos = (attn.cumsum(dim=1) - 1).clamp(min=0)
        start = prompt_width - 1 - lo
        targets = torch.zeros_like(ids)
        targets[:, start:] = mb["input_ids"][:, prompt_width:prompt_width + hi].to(self.device)
        scored = torch.arange(ids.shape[1], device=self.device) >= start
        out = self._columns(ids, pos, None if bool(attn.all()) else attn, targets, scored, want_entropy,
                            packed=False)[:, start:]
        return out[..., 0], (out[..., 1] if want_entropy else None), hi

    def _columns(self, ids: Any, pos: Any, key_valid: Any, targets: Any, scored: Any, want_entropy: bool,
                 packed: bool) -> Any:
        """[rows, columns, k]: at each `scored` column, the log-prob of `targets` at it (and the entropy), or the
        critic's value; zeros elsewhere. This rank runs the model on its slice of the columns (padded to a
        multiple of the group's size) and the slices are gathered across the group."""
        import torch
        import torch.nn.functional as F

        from rlcfg.runtime.backends import ulysses

        columns = ids.shape[1]
        pad = -columns % self.sp
        if pad:  # padding columns, which no real column sees: after every span, or a packed sample of their own
            ids, targets = F.pad(ids, (0, pad)), F.pad(targets, (0, pad))
            scored = F.pad(scored, (0, pad))
            if packed:
                tail = torch.arange(pad, device=pos.device).expand(pos.shape[0], pad)
                pos = torch.cat([pos, tail], dim=1)
            else:
                pos = F.pad(pos, (0, pad))
                valid = key_valid if key_valid is not None else torch.ones_like(ids[:, :columns])
                key_valid = F.pad(valid, (0, pad))
        width = ids.shape[1] // self.sp
        mine = slice(self.sp_rank * width, (self.sp_rank + 1) * width)
        layout = ulysses.SequenceLayout(self.sp_group, self.sp, ulysses.attention_spans(key_valid, pos, packed))
        inputs = {"input_ids": ids[:, mine], "position_ids": pos[:, mine], ulysses.LAYOUT_KEYWORD: layout}
        local_targets = targets[:, mine]
        if self.kind == "critic":
            values = self.model(**inputs, use_cache=False).logits[..., :1].float()
        else:
            # Only the scored columns reach the output layer; a rank with none still runs one column, so that
            # its backward pass joins the group's exchanges (its value is never scored).
            keep = torch.nonzero(scored[mine]).flatten()
            if keep.numel() == 0:
                keep = torch.zeros(1, dtype=torch.long, device=ids.device)
            chosen = local_targets[:, keep]
            if self.head is not None:
                picked = self._scored(chosen, want_entropy, logits_to_keep=keep, **inputs)
            else:
                logits = self.model(**inputs, logits_to_keep=keep, use_cache=False).logits.float() / self.temperature
                logprobs = torch.log_softmax(logits, dim=-1).gather(-1, chosen.unsqueeze(-1))
                picked = (torch.cat([logprobs, A.entropy_from_logits(logits).unsqueeze(-1)], dim=-1)
                          if want_entropy else logprobs)
            values = picked.new_zeros((ids.shape[0], width, picked.shape[-1])).index_copy(1, keep, picked)
        whole = ulysses.gather_columns(values, self.sp_group, self.sp, self.sp_rank)
        return whole[:, :columns]

    def micro_batches(self, attention_mask: Any, per_group: int) -> list[Any]:
        """The rows of each micro-batch of a (mini-)batch (packing.micro_batch_rows); with a packing token
        budget, as many micro-batches on every rank, since each forward pass of a sharded model is a
        collective."""
        import torch

        rows = packing.micro_batch_rows(attention_mask, per_group, self.token_budget, self.budget_key)
        if self.token_budget is not None and self.world > 1:
            import torch.distributed as dist

            count = torch.tensor([len(rows)], dtype=torch.int64, device=self.device)
            dist.all_reduce(count, op=dist.ReduceOp.MAX)
            if int(count) > len(rows):
                rows = packing.micro_batch_rows(attention_mask, per_group, self.token_budget, self.budget_key,
                                                min_groups=int(count))
            if len(rows) != int(count):  # fewer samples here than micro-batches elsewhere: shares are equal
                raise RuntimeError(f"rank {self.rank} has {attention_mask.shape[0]} samples for {int(count)} "
                                   "packed micro-batches")
        return rows

    def compute(self, batch: Mapping[str, Any], micro_batch: int) -> dict[str, Any]:
        """Log-probs (actor, reference) or values (critic) for every response token of `batch`."""
        import torch

        start = time.perf_counter()
        n, width = batch["response_mask"].shape
        prompt_width = batch["input_ids"].shape[1] - width
        result = torch.zeros((n, width), dtype=torch.float32)
        self.model.eval()
        with torch.no_grad():
            for rows in self.micro_batches(batch["attention_mask"], micro_batch):
                mb = {k: v[rows] for k, v in batch.items()}
                values, _, hi = self._forward(mb, prompt_width)
                result[rows, :hi] = values.cpu()
        result *= batch["response_mask"]
        return {"values": result, "forward_s": time.perf_counter() - start}

    # ------------------------------------------------------------------------------------------ training

    def train(self, batch: Mapping[str, Any], cfg: Mapping[str, Any]) -> dict[str, float]:
        """PPO-style updates on this rank's share of a step: `ppo_epochs` passes, each over mini-batches of
        `mini_batch` samples (one optimizer step each), accumulated over micro-batches of `micro_batch` samples
        or, packed with a token budget, of as many samples as fit in it (micro_batches).

        `denominators[j]` = (tokens, sequences) of mini-batch j summed over all ranks, so a micro-batch's loss
        is its share of the global mini-batch loss; × world undoes FSDP's gradient averaging."""
        self.model.train()
        n, width = batch["response_mask"].shape
        prompt_width = batch["input_ids"].shape[1] - width
        mini, micro = int(cfg["mini_batch"]), int(cfg["micro_batch"])
        denominators = cfg["denominators"]
        times = {"forward_s": 0.0, "backward_s": 0.0, "optimizer_s": 0.0}
        sums: dict[str, float] = {}
        count = 0
        for _epoch in range(int(cfg.get("ppo_epochs", 1))):
            for j, m0 in enumerate(range(0, n, mini)):
                tokens, seqs = denominators[j]
                self.optimizer.zero_grad(set_to_none=True)
                m1 = min(m0 + mini, n)
                micro_rows = self.micro_batches(batch["attention_mask"][m0:m1], micro)
                for rows in micro_rows:
                    mb = {k: v[m0:m1][rows] for k, v in batch.items()}
                    t0 = time.perf_counter()
                    mb_tokens, mb_seqs = A.loss_denominators(cfg.get("normalization", "mini-batch"),
                                                             mb["response_mask"], (tokens, seqs), len(micro_rows),
                                                             self.data_parallel)
                    loss, stats = self._loss(mb, prompt_width, cfg, mb_tokens, mb_seqs)
                    t1 = time.perf_counter()
                    (loss * self.world).backward()
                    t2 = time.perf_counter()
                    times["forward_s"] += t1 - t0
                    times["backward_s"] += t2 - t1
                    for k, v in stats.items():
                        sums[k] = sums.get(k, 0.0) + v
                    count += 1
                t0 = time.perf_counter()
                sums["grad_norm"] = sums.get("grad_norm", 0.0) + self._step()
                times["optimizer_s"] += time.perf_counter() - t0
        if self.schedule_per_train_step:
            self.scheduler.step()
        steps = max(1, int(cfg.get("ppo_epochs", 1)) * len(denominators))
        # Loss readings are each micro-batch's share of its global mini-batch: summed they give this rank's
        # part of the mini-batch loss (the driver sums the ranks); the rest are plain averages.
        metrics = {k: (v / steps if k in SHARE_METRICS or k == "grad_norm" else v / max(count, 1))
                   for k, v in sums.items()}
        metrics["lr"] = self.optimizer.param_groups[0]["lr"]
        metrics.update(times)
        return metrics

    def _loss(self, mb: Mapping[str, Any], prompt_width: int, cfg: Mapping[str, Any], tokens: float,
              seqs: float) -> tuple[Any, dict[str, float]]:
        agg = cfg.get("aggregation", "token-mean")
        if self.kind == "critic":
            values, _, hi = self._forward(mb, prompt_width)
            mask = mb["response_mask"][:, :hi].to(self.device)
            vloss = A.value_loss(values, mb["old_values"][:, :hi].to(self.device), mb["returns"][:, :hi].to(self.device),
                                 cfg.get("value_clip"))
            loss = A.aggregate(vloss, mask, agg, tokens, seqs)
            return loss, {"value_loss": float(loss.detach())}
        # The actor's loss is algorithms.actor_loss, shared with the Megatron backend.
        spec: A.ActorLossSpec = cfg["loss"]  # step.prepare_update puts the Experiment's loss there
        logprobs, entropy, hi = self._forward(mb, prompt_width, bool(spec.entropy_coef))
        view = {k: mb[k][:, :hi].to(self.device) for k in A.ACTOR_TOKEN_KEYS if k in mb}
        view.update({k: mb[k].to(self.device) for k in A.ACTOR_SAMPLE_KEYS if k in mb})
        loss, stats = A.actor_loss(logprobs, view, spec, tokens, seqs, entropy)
        return loss, {k: float(v) for k, v in stats.items()}

    def _step(self) -> float:
        import torch

        params = [p for p in self.model.parameters() if p.grad is not None]
        max_norm = self.grad_clip if self.grad_clip else float("inf")
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm) if params else torch.tensor(0.0)
        if hasattr(norm, "full_tensor"):
            norm = norm.full_tensor()
        norm = float(norm)
        if math.isfinite(norm):
            self.optimizer.step()
        else:  # a non-finite gradient would poison the weights: skip this update (as torch's GradScaler does)
            self.optimizer.zero_grad(set_to_none=True)
        if not self.schedule_per_train_step:
            self.scheduler.step()
        return norm

    # ------------------------------------------------------------------------------------------ weights

    def full_state_dict(self, all_ranks: bool = False) -> dict[str, Any] | None:
        """The whole model's weights under their Hugging Face names, on rank 0 (None elsewhere) or, with
        `all_ranks`, on every rank (each colocated engine needs its own copy); with LoRA, the adapters merged in.
        Every rank must call it: gathering the shards is a collective."""
        state = self._gathered_state(all_ranks)
        if state is None or self.lora is None:
            return state
        return self._merged(state)

    def _merged(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """merged_lora_state of this engine's adapter, under its scaling and layout."""
        return merged_lora_state(state, self.lora.alpha / self.lora.rank,
                                 self.model.peft_config[ADAPTER].fan_in_fan_out)

    def _gathered_state(self, all_ranks: bool) -> dict[str, Any] | None:
        """full_state_dict under the model's own names (PEFT's, with LoRA), nothing merged."""
        from torch.distributed.tensor import DTensor

        state = {}
        for name, tensor in self.model.state_dict().items():
            if isinstance(tensor, DTensor):
                # All-gather of the shards, in the same order on every rank; on one rank the shard is the whole
                # tensor, and skipping DTensor's dispatch saves more time than the rest of the sync.
                if self.world == 1:
                    tensor = tensor.to_local()
                else:
                    # Shards CPU offload keeps in host memory are gathered on the mesh's GPU, one tensor at a time
                    # (NCCL, not gloo over the host's sockets); every rank's copy goes back to host memory, where
                    # the offload wants the weights kept.
                    held = tensor.device
                    tensor = tensor.to(tensor.device_mesh.device_type).full_tensor()
                    if all_ranks:
                        tensor = tensor.to(held)
            if self.rank == 0 or all_ranks:
                state[name] = tensor.detach().to("cpu", copy=True) if not all_ranks else tensor.detach()
        return state if self.rank == 0 or all_ranks else None

    def save(self, path: str) -> None:
        """Sharded model + optimizer with torch.distributed.checkpoint (resumable on another world size), and
        this rank's scheduler and RNG state beside it."""
        import torch
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict

        if self.optimizer is not None:
            model_state, optim_state = get_state_dict(self.model, self.optimizer)
            dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=path)
        else:
            dcp.save({"model": self.model.state_dict()}, checkpoint_id=path)
        extra = {"rng": torch.get_rng_state()}
        if self.scheduler is not None:
            extra["scheduler"] = self.scheduler.state_dict()
        if self.device.type == "cuda":
            extra["cuda_rng"] = torch.cuda.get_rng_state()
        torch.save(extra, os.path.join(path, f"extra-rank{self.rank}.pt"))

    def load(self, path: str) -> None:
        import torch
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

        from rlcfg.runtime.checkpoint import verify_loadable

        verify_loadable(path)
        if self.optimizer is not None:
            model_state, optim_state = get_state_dict(self.model, self.optimizer)
            state = {"model": model_state, "optim": optim_state}
            dcp.load(state, checkpoint_id=path)
            set_state_dict(self.model, self.optimizer, model_state_dict=state["model"],
                           optim_state_dict=state["optim"])
        else:
            state = {"model": self.model.state_dict()}
            dcp.load(state, checkpoint_id=path)
            self.model.load_state_dict(state["model"])
        extra_file = os.path.join(path, f"extra-rank{self.rank}.pt")
        if os.path.exists(extra_file):  # absent when resuming on more ranks than saved: RNG starts fresh there
            extra = torch.load(extra_file, weights_only=True)
            torch.set_rng_state(extra["rng"])
            if self.scheduler is not None and "scheduler" in extra:
                self.scheduler.load_state_dict(extra["scheduler"])
            if "cuda_rng" in extra and self.device.type == "cuda":
                torch.cuda.set_rng_state(extra["cuda_rng"])

    def export_hf(self, path: str) -> None:
        """A plain Hugging Face checkpoint (config + safetensors) of the current weights, written by rank 0. With
        LoRA, the merged model, and the adapter in PEFT's format in its LORA_ADAPTER_DIR (loadable over the base
        model with peft's PeftModel.from_pretrained)."""
        if self.lora is None:
            state = self.full_state_dict()
            if self.rank == 0:
                self.model.save_pretrained(path, state_dict=state)
            return
        state = self._gathered_state(all_ranks=False)
        if self.rank != 0:
            return
        from peft import get_peft_model_state_dict
        from safetensors.torch import save_file

        self.model.get_base_model().save_pretrained(path, state_dict=self._merged(state))
        adapter_dir = os.path.join(path, LORA_ADAPTER_DIR)
        os.makedirs(adapter_dir, exist_ok=True)
        adapter = get_peft_model_state_dict(self.model, state_dict=state, adapter_name=ADAPTER)
        save_file({k: v.contiguous() for k, v in adapter.items()},
                  os.path.join(adapter_dir, "adapter_model.safetensors"))
        self.model.peft_config[ADAPTER].save_pretrained(adapter_dir)

    # ------------------------------------------------------------------------------------------ colocation

    def offload(self) -> None:
        """Move parameters and optimizer states off the GPU while a colocated role has it."""
        if self.device.type != "cuda":
            return
        import torch

        if self.offload_params:
            self.model.to("cpu")
        if self.offload_optimizer and self.optimizer is not None:
            for state in self.optimizer.state.values():
                for k, v in state.items():
                    if torch.is_tensor(v):
                        state[k] = v.to("cpu", non_blocking=True)
        torch.cuda.empty_cache()

    def onload(self) -> None:
        if self.device.type != "cuda":
            return
        import torch

        if self.offload_params:
            self.model.to(self.device)
        if self.offload_optimizer and self.optimizer is not None:
            for state in self.optimizer.state.values():
                for k, v in state.items():
                    if torch.is_tensor(v):
                        state[k] = v.to(self.device, non_blocking=True)
