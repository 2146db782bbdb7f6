"""The `hf` rollout backend: transformers' `generate`, batched, with its KV cache.

It defines the rollout interface the vLLM and SGLang backends implement too:
  generate(prompt_token_ids, sampling, seed) -> [Generation]   (n per prompt, grouped)
  update_weights(named tensors)                                  (from the trainer, after each step)
  sleep() / wake_up()                                            (free the device between colocated phases)
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping

from rlcfg.ir import Sampling


@dataclass
class Generation:
    token_ids: list[int]  # the response only, EOS included when the model emitted it
    logprobs: list[float]  # log π(token) under the sampling temperature, one per token
    finished: bool  # ended on EOS or a stop string (False: cut at its response budget, finish reason "length")


def sampling_kwargs(sampling: Sampling) -> dict[str, Any]:
    """transformers' generate arguments for rlcfg's Sampling fields."""
    greedy = sampling.temperature <= 0.0
    kwargs: dict[str, Any] = {"max_new_tokens": sampling.max_new_tokens, "do_sample": not greedy}
    if not greedy:
        kwargs["temperature"] = sampling.temperature
        kwargs["top_p"] = sampling.top_p
        kwargs["top_k"] = sampling.top_k if sampling.top_k > 0 else None
        if sampling.min_p > 0:
            kwargs["min_p"] = sampling.min_p
    # Limits apply to greedy decoding too. The penalties are applied by PenaltyProcessor (HFRolloutEngine), not by
    # transformers' RepetitionPenaltyLogitsProcessor, which would count the left padding as prompt tokens.
    if sampling.min_new_tokens > 0:
        kwargs["min_new_tokens"] = sampling.min_new_tokens
    return kwargs


def plain_sampling(kwargs: Mapping[str, Any]) -> bool:
    """Whether HFRolloutEngine's own decoding loop produces what transformers' generate would for these generate
    arguments: greedy, or sampling with temperature, top-k and top-p (min_p and min_new_tokens go to generate)."""
    return set(kwargs) <= {"max_new_tokens", "do_sample", "temperature", "top_p", "top_k"}


def warp(logits: Any, kwargs: Mapping[str, Any]) -> Any:
    """The scores transformers' generate samples from: the logits divided by the temperature, cut to the top k,
    then to the smallest set whose probability exceeds top_p (the most likely token always kept); cut tokens
    are -inf."""
    import torch

    scores = logits / float(kwargs.get("temperature", 1.0))
    top_k = kwargs.get("top_k")
    if top_k:
        kth = torch.topk(scores, min(int(top_k), scores.shape[-1]), dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    top_p = float(kwargs.get("top_p", 1.0))
    if top_p < 1.0:
        ascending, order = torch.sort(scores, descending=False, dim=-1)
        drop = ascending.softmax(dim=-1).cumsum(dim=-1) <= (1 - top_p)
        drop[..., -1:] = False
        scores = scores.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    return scores


def _sample(logits: Any, kwargs: Mapping[str, Any]) -> Any:
    """One token per row: argmax when not sampling, else a draw from the softmax of the warped scores."""
    import torch

    if not kwargs.get("do_sample", True):
        return logits.argmax(dim=-1)
    return torch.multinomial(warp(logits, kwargs).softmax(dim=-1), num_samples=1).squeeze(1)


class PenaltyProcessor:
    """The repetition, presence and frequency penalties with vLLM's definition (vllm/model_executor/layers/utils.py
    apply_penalties; presence and frequency as in OpenAI's API reference):
      repetition: every token seen in the prompt or the output so far has a positive logit divided by r and a
        negative one multiplied by r (as transformers' RepetitionPenaltyLogitsProcessor, minus the padding);
      presence / frequency: logit[t] -= presence × [count(t) > 0] + frequency × count(t), count(t) being how often
        t occurs in the output so far (the prompt does not count).
    A transformers LogitsProcessor (merged before the temperature and top-k/p warpers, as vLLM applies penalties
    before them): called with the running input_ids, whose first `prompt_width` columns are the left-padded
    prompt; `prompt_mask` (rows × prompt_width, 1 for real tokens) keeps the padding out of the prompt."""

    def __init__(self, prompt_width: int, presence: float = 0.0, frequency: float = 0.0, repetition: float = 1.0,
                 prompt_mask: Any = None):
        self.prompt_width, self.presence, self.frequency = prompt_width, float(presence), float(frequency)
        self.repetition, self.prompt_mask = float(repetition), prompt_mask

    def __call__(self, input_ids, scores):
        import torch

        out = input_ids[:, self.prompt_width:]
        counts = torch.zeros_like(scores).scatter_add_(1, out, torch.ones_like(out, dtype=scores.dtype))
        if self.repetition != 1.0:
            prompt = input_ids[:, :self.prompt_width]
            real = (torch.ones_like(prompt, dtype=scores.dtype) if self.prompt_mask is None
                    else self.prompt_mask.to(device=scores.device, dtype=scores.dtype))
            seen = (torch.zeros_like(scores).scatter_add_(1, prompt, real) + counts) > 0
            penalised = torch.where(scores > 0, scores / self.repetition, scores * self.repetition)
            scores = torch.where(seen, penalised, scores)
        return scores - self.presence * (counts > 0).to(scores.dtype) - self.frequency * counts


class HFRolloutEngine:
    def __init__(self, model_path: str, device: str = "cpu", dtype: str = "float32",
                 max_num_seqs: int | None = None, tokenizer_path: str | None = None):
        import torch
        from transformers import AutoModelForCausalLM

        from rlcfg.runtime.data import load_tokenizer

        self.device = torch.device(device)
        self.dtype = getattr(torch, dtype)
        self.model = AutoModelForCausalLM.from_pretrained(model_path, dtype=self.dtype).to(self.device).eval()
        self.tokenizer = load_tokenizer(tokenizer_path or model_path)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.eos_id = self.tokenizer.eos_token_id
        self.max_num_seqs = max_num_seqs
        self.asleep = False
        self.last_generate_s = 0.0

    def generate(self, prompt_token_ids: list[list[int]], sampling: Sampling,
                 seed: int | None = None) -> list[Generation]:
        """n samples for every prompt, the n of prompt i at [i·n, (i+1)·n)."""
        import torch

        if self.asleep:
            self.wake_up()
        start = time.perf_counter()
        rows = [ids for ids in prompt_token_ids for _ in range(sampling.n)]
        if not rows:  # an engine left without prompts this step
            self.last_generate_s = 0.0
            return []
        if seed is not None:
            torch.manual_seed(seed)
        kwargs = sampling_kwargs(sampling)
        temperature = kwargs.get("temperature", 1.0)
        stop = tuple(sampling.stop)
        penalties = (sampling.presence_penalty, sampling.frequency_penalty, sampling.repetition_penalty)
        stop_ids = tuple(sampling.stop_token_ids)
        chunk = self.max_num_seqs or len(rows)
        out: list[Generation] = []
        for i in range(0, len(rows), chunk):
            part = rows[i:i + chunk]
            out.extend(self._generate_chunk(part, kwargs, temperature, stop, penalties, stop_ids,
                                            [sampling.response_budget(len(r)) for r in part]))
        self.last_generate_s = time.perf_counter() - start
        return out

    def _generate_chunk(self, rows: list[list[int]], kwargs: dict[str, Any], temperature: float,
                        stop: tuple[str, ...], penalties: tuple[float, float, float] = (0.0, 0.0, 1.0),
                        stop_ids: tuple[int, ...] = (), budgets: list[int] | None = None) -> list[Generation]:
        """`budgets`: each row's response limit (max_new_tokens when None). The chunk generates to the longest and
        cuts each row at its own: a row's tokens never depend on the rows beside it, so the kept prefix is sampled
        as if generated alone."""
        import torch

        if budgets is not None:
            kwargs = {**kwargs, "max_new_tokens": max(budgets)}
            if "min_new_tokens" in kwargs:
                kwargs["min_new_tokens"] = min(kwargs["min_new_tokens"], kwargs["max_new_tokens"])

        width = max(len(r) for r in rows)
        # Left padding, so every row's next token sits in the last column; built as lists and converted once.
        ids = torch.tensor([[self.pad_id] * (width - len(r)) + list(r) for r in rows], dtype=torch.long)
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], dtype=torch.long)
        extra: dict[str, Any] = {}
        if stop:
            extra = {"stop_strings": list(stop), "tokenizer": self.tokenizer}
        if penalties != (0.0, 0.0, 1.0):
            from transformers import LogitsProcessorList

            extra["logits_processor"] = LogitsProcessorList([PenaltyProcessor(width, *penalties, prompt_mask=mask)])
        # stop_token_ids end a response as EOS does (and min_new_tokens holds them back as it holds EOS).
        ends = [t for t in ([self.eos_id] if self.eos_id is not None else []) + list(stop_ids)]
        ends = list(dict.fromkeys(ends))
        if not extra and plain_sampling(kwargs):
            all_tokens, all_logprobs = self._decode(ids, mask, kwargs, temperature, ends, budgets)
        else:
            eos_arg = ends if len(ends) > 1 else (ends[0] if ends else None)
            with torch.inference_mode():
                result = self.model.generate(
                    input_ids=ids.to(self.device), attention_mask=mask.to(self.device), pad_token_id=self.pad_id,
                    eos_token_id=eos_arg, output_logits=True, return_dict_in_generate=True, **kwargs, **extra)
            new = result.sequences[:, width:]
            # Raw logits / temperature: the distribution the trainer's log-probs are computed under.
            logits = torch.stack(result.logits, dim=1).float()
            if temperature and temperature > 0:
                logits = logits / temperature
            logprobs = torch.log_softmax(logits, dim=-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
            all_tokens, all_logprobs = new.cpu().tolist(), logprobs.cpu().tolist()
        gens: list[Generation] = []
        for row, (tokens, row_logprobs) in enumerate(zip(all_tokens, all_logprobs)):
            if budgets is not None:
                tokens = tokens[:budgets[row]]
            finished = False
            first_end = next((j for j, t in enumerate(tokens) if t in ends), None)
            if first_end is not None:
                tokens = tokens[:first_end + 1]
                finished = True
            elif stop:
                text = self.tokenizer.decode(tokens)
                finished = any(s in text for s in stop)
                if finished:  # generate stopped right after the stop string; the rest is padding
                    while tokens and tokens[-1] == self.pad_id:
                        tokens.pop()
            gens.append(Generation(tokens, row_logprobs[:len(tokens)], finished))
        return gens

    def _decode(self, ids: Any, mask: Any, kwargs: Mapping[str, Any], temperature: float, ends: list[int],
                budgets: list[int] | None) -> tuple[list[list[int]], list[list[float]]]:
        """transformers' sampling (temperature, then top-k, then top-p, as its warpers apply them; or greedy) with
        a KV cache that drops each row once it has ended or used its budget: after the first tokens most rows of a
        batch have stopped, and the later steps run only the rest. Returns each row's tokens (through its end
        token) and their log-probs under logits / temperature; a row's tokens after that are not produced."""
        import torch
        from transformers import DynamicCache

        rows, max_new = ids.shape[0], int(kwargs["max_new_tokens"])
        if max_new <= 0:
            return [[] for _ in range(rows)], [[] for _ in range(rows)]
        limits = torch.tensor(budgets if budgets is not None else [max_new] * rows, dtype=torch.long)
        tokens = torch.zeros((rows, max_new), dtype=torch.long)
        logprobs = torch.zeros((rows, max_new), dtype=torch.float32)
        lengths = torch.zeros(rows, dtype=torch.long)
        ends_t = torch.tensor(ends or [-1], dtype=torch.long, device=self.device)
        active = torch.arange(rows)
        attention = mask.to(self.device)
        positions = (attention.cumsum(dim=1) - 1).clamp(min=0)
        cache = DynamicCache()
        with torch.inference_mode():
            out = self.model(input_ids=ids.to(self.device), attention_mask=attention, position_ids=positions,
                             past_key_values=cache, use_cache=True)
            last = positions[:, -1:]
            for step in range(max_new):
                logits = out.logits[:, -1, :].float()
                chosen = _sample(logits, kwargs)
                scaled = logits / temperature if temperature and temperature > 0 else logits
                chosen_logprobs = torch.log_softmax(scaled, dim=-1).gather(-1, chosen[:, None]).squeeze(-1)
                tokens[active, step] = chosen.cpu()
                logprobs[active, step] = chosen_logprobs.cpu()
                lengths[active] = step + 1
                stopped = torch.isin(chosen, ends_t).cpu() | (step + 1 >= limits[active])
                if bool(stopped.all()) or step + 1 == max_new:
                    break
                if bool(stopped.any()):
                    keep = (~stopped).nonzero().squeeze(1)
                    cache.batch_select_indices(keep.to(self.device))
                    active, chosen = active[keep], chosen[keep.to(self.device)]
                    attention, last = attention[keep.to(self.device)], last[keep.to(self.device)]
                attention = torch.cat([attention, attention.new_ones((attention.shape[0], 1))], dim=1)
                last = last + 1
                out = self.model(input_ids=chosen[:, None], attention_mask=attention, position_ids=last,
                                 past_key_values=cache, use_cache=True)
        counts = lengths.tolist()
        return ([row[:n] for row, n in zip(tokens.tolist(), counts)],
                [row[:n] for row, n in zip(logprobs.tolist(), counts)])

    def update_weights(self, named_tensors: Mapping[str, Any]) -> int:
        """Copy the trainer's weights in, by parameter name (a checkpoint's per-expert names land in the model's
        stacked expert tensors). Returns how many tensors were loaded."""
        import torch

        from rlcfg.runtime.backends.expert_names import stacked_target

        params = dict(self.model.named_parameters())
        params.update(dict(self.model.named_buffers()))
        loaded = 0
        unknown = []
        with torch.no_grad():
            for name, tensor in named_tensors.items():
                target = params.get(name)
                if target is None:
                    target = stacked_target(params, name)
                if target is None:
                    unknown.append(name)
                    continue
                target.copy_(tensor.to(device=target.device, dtype=target.dtype))
                loaded += 1
        if unknown:
            raise KeyError(f"the rollout model has no parameters named {', '.join(sorted(unknown)[:5])}")
        return loaded

    def share_weights(self, named_tensors: Mapping[str, Any]) -> bool:
        """Make the engine's parameters views of `named_tensors` (same device, dtype and shape), so that updates
        made in place by the trainer are seen without copying. Returns False, changing nothing, when any
        tensor does not fit."""
        params = dict(self.model.named_parameters())
        for name, param in params.items():
            t = named_tensors.get(name)
            if t is None or t.shape != param.shape or t.dtype != param.dtype or t.device != param.device:
                return False
        for name, param in params.items():
            param.data = named_tensors[name]
        return True

    def sleep(self) -> None:
        """Give the device back to colocated training. On CPU there is nothing to free."""
        if self.device.type != "cpu" and not self.asleep:
            import torch

            self.model.to("cpu")
            torch.cuda.empty_cache()
        self.asleep = True

    def wake_up(self) -> None:
        if self.device.type != "cpu" and self.asleep:
            self.model.to(self.device)
        self.asleep = False
