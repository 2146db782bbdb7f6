"""ChatLearn's cross-field rules, and the settings `rlcfg run` refuses in combination (chatlearn/run-refusals)."""

from __future__ import annotations

from typing import Any

from rlcfg import run_limits
from rlcfg.diagnostics import Severity, close_matches
from rlcfg.dialects.chatlearn.derived import colocation_groups, expert_bias, ref_dp, trainer_dp
from rlcfg.dialects.chatlearn.models import MODEL_NAMES, FSDPOptions, MegatronOptions, MegatronPolicyTrainer
from rlcfg.schema.base import Finding, RuleSet

rules = RuleSet()
RT = "runtime_args"
PT = "models.policy_trainer"
REF = "models.ref_policy"
POL = "models.policy"
# ChatLearn 1.2.0's BaseConfig.validate() runs only GrpoConfig's own checks; main also runs every nested config's
# `_validate_impl` (runtime, policy, FSDP/Megatron, rollout managers). A check that only main's loader makes is an
# error at main; at 1.2.0 it is what 1.2.0's code then does, read at its tag: an error where the run fails (and
# where), a warning where it goes on (and what it does instead). Only a case that reading could not settle keeps
# the hedge.
V120_LETS_THROUGH = " (ChatLearn 1.2.0 does not check this when it loads the config; the run may fail later)"


def _checked_at_load(ctx: Any) -> bool:
    return ctx.release != "1.2.0"


def _nested_check(ctx: Any, code: str, path: str, message: str, *, fails_when: str | None = None,
                  runs_but: str | None = None, **kwargs: Any):
    """A finding for a check that ChatLearn main's nested `_validate_impl` makes and 1.2.0 does not: at 1.2.0, an
    error that says when the run fails (`fails_when`), or a warning that says what the run does instead
    (`runs_but`); with neither, the hedge."""
    if _checked_at_load(ctx):
        return ctx.error(code, path, message, **kwargs)
    if fails_when is not None:
        return ctx.error(code, path, f"{message}; ChatLearn 1.2.0 accepts this at load but fails {fails_when}",
                         **kwargs)
    if runs_but is not None:
        return ctx.warning(code, path, f"{message}; ChatLearn 1.2.0 runs it, but {runs_but}", **kwargs)
    return ctx.warning(code, path, message + V120_LETS_THROUGH, **kwargs)


def _nearest_multiples(value: int, n: int) -> str:
    """The multiples of n on either side of value, e.g. "1984 or 2016"."""
    below = value // n * n
    return f"{below} or {below + n}" if below else str(n)


@rules.rule("chatlearn/models-need-gpus", "RLC306",
            "The trainer, the reference model and the rollout model each have at least one GPU (`num_gpu`; "
            "ChatLearn's default is 0).", keys=[f"{PT}.num_gpu", f"{REF}.num_gpu", f"{POL}.num_gpu"])
def _models_need_gpus(cfg: Any, ctx: Any):
    for name in ("policy_trainer", "ref_policy", "policy"):
        if getattr(cfg.models, name).num_gpu <= 0:
            where = "set" if ctx.is_set(f"models.{name}.num_gpu") else "left at ChatLearn's default"
            message = f"models.{name}.num_gpu is 0 ({where}): ChatLearn needs at least one GPU for this model"
            hint = (f"set models.{name}.num_gpu" + ("" if name == "policy_trainer"
                                                  else ", e.g. `${models.policy_trainer.num_gpu}`"))
            if name == "policy":
                yield _nested_check(ctx, "RLC306", f"models.{name}.num_gpu", message, hint=hint,
                                    fails_when="as soon as it builds the rollout model (ZeroDivisionError in "
                                               "BaseModule: no rollout replica)")
            else:  # its data-parallel size becomes 0, and GrpoConfig's own batch checks divide by it
                yield ctx.error("RLC306", f"models.{name}.num_gpu", message, hint=hint)


@rules.rule("chatlearn/episode-divides-into-global-batches", "RLC300",
            "`sample_per_episode` is a multiple of `train_global_batch_size`.",
            keys=[f"{RT}.sample_per_episode", f"{RT}.train_global_batch_size"])
def _episode_global_batches(cfg: Any, ctx: Any):
    r = cfg.runtime_args
    if r.sample_per_episode % r.train_global_batch_size:
        steps = r.sample_per_episode // r.train_global_batch_size
        # 1.2.0's StreamDataset makes sample_per_episode // train_global_batch_size steps of an episode, each on
        # that share of it per rank, and never fetches what is left over
        runs_but = (f"makes {steps} optimizer step{'s' if steps != 1 else ''} per episode on larger batches than "
                    "train_global_batch_size, and never trains on the rest of each episode" if steps else
                    "trains nothing: an episode holds less than one global batch, so no optimizer step runs")
        yield _nested_check(
            ctx, "RLC300", f"{RT}.sample_per_episode",
            f"runtime_args.sample_per_episode ({r.sample_per_episode}) is not a multiple of "
            f"runtime_args.train_global_batch_size ({r.train_global_batch_size})",
            hint=f"each episode is split into global batches; use a sample_per_episode of "
                 f"{_nearest_multiples(r.sample_per_episode, r.train_global_batch_size)}, or a "
                 f"train_global_batch_size that divides {r.sample_per_episode}",
            related=[f"{RT}.train_global_batch_size"], runs_but=runs_but)


@rules.rule("chatlearn/episode-whole-prompt-groups", "RLC300",
            "`sample_per_episode` is a whole number of prompt groups (`models.policy.num_inference_per_prompt`).",
            keys=[f"{RT}.sample_per_episode", f"{POL}.num_inference_per_prompt"])
def _episode_prompt_groups(cfg: Any, ctx: Any):
    n = cfg.models.policy.num_inference_per_prompt
    spe = cfg.runtime_args.sample_per_episode
    if spe % n:
        yield ctx.error("RLC300", f"{RT}.sample_per_episode",
                        f"runtime_args.sample_per_episode ({spe}) is not a multiple of "
                        f"models.policy.num_inference_per_prompt ({n}): an episode must hold whole prompt groups",
                        hint=f"use a sample_per_episode of {_nearest_multiples(spe, n)} (a whole number of "
                             f"prompts × {n} responses)",
                        related=[f"{POL}.num_inference_per_prompt"])


@rules.rule("chatlearn/episode-divides-over-dp", "RLC300",
            "`sample_per_episode` divides evenly over the data-parallel ranks of the trainer and of the reference model.",
            keys=[f"{RT}.sample_per_episode", f"{PT}.num_gpu", f"{REF}.num_gpu"])
def _episode_dp(cfg: Any, ctx: Any):
    spe = cfg.runtime_args.sample_per_episode
    for path, dp in ((PT, trainer_dp(cfg)), (REF, ref_dp(cfg))):
        if spe % dp:
            yield ctx.error("RLC300", f"{RT}.sample_per_episode",
                            f"runtime_args.sample_per_episode ({spe}) does not divide over the {dp} data-parallel "
                            f"ranks of {path}",
                            hint=f"use a sample_per_episode that is a multiple of {dp}", related=[f"{path}.num_gpu"])


def _batch_checked_models(cfg: Any, ctx: Any):
    """(path, model, dp) of the models whose batches GrpoConfig checks: trainer and reference model."""
    return ((PT, cfg.models.policy_trainer, trainer_dp(cfg)), (REF, cfg.models.ref_policy, ref_dp(cfg)))


@rules.rule("chatlearn/global-batch-divides-over-dp", "RLC300",
            "`train_global_batch_size` divides evenly over the trainer's data-parallel ranks.",
            keys=[f"{RT}.train_global_batch_size", f"{PT}.num_gpu"])
def _global_batch_dp(cfg: Any, ctx: Any):
    gb = cfg.runtime_args.train_global_batch_size
    for path, model, dp in _batch_checked_models(cfg, ctx):
        if model.trainable and gb % dp:
            message = (f"runtime_args.train_global_batch_size ({gb}) does not divide over the {dp} data-parallel "
                       f"ranks of {path}")
            verdict = (dict(fails_when="when Megatron initializes (it asserts that the global batch divides over "
                                       "micro-batch × data-parallel ranks)")
                       if isinstance(model, MegatronOptions) else
                       dict(runs_but=f"each step trains {dp * (gb // dp)} samples and skips {gb % dp}"))
            yield _nested_check(ctx, "RLC300", f"{RT}.train_global_batch_size", message,
                                hint=f"use a multiple of {dp}: {_nearest_multiples(gb, dp)}", related=[f"{path}.num_gpu"],
                                **verdict)


@rules.rule("chatlearn/generation-batch-multiple", "RLC300",
            "Each data-parallel rank's share of an episode is a multiple of the model's `generation_batch_size` "
            "(trainer and reference model; ChatLearn main skips the check with packing, 1.2.0 does not).",
            keys=[f"{RT}.sample_per_episode", f"{PT}.generation_batch_size", f"{REF}.generation_batch_size"])
def _generation_batch(cfg: Any, ctx: Any):
    spe = cfg.runtime_args.sample_per_episode
    for path, model, dp in _batch_checked_models(cfg, ctx):
        if (model.packing and _checked_at_load(ctx)) or spe % dp:
            continue
        share = spe // dp
        if share % model.generation_batch_size:
            yield ctx.error("RLC300", f"{path}.generation_batch_size",
                            f"{path}.generation_batch_size ({model.generation_batch_size}) does not divide the "
                            f"{share} samples each of its {dp} data-parallel ranks gets per episode "
                            f"(sample_per_episode {spe} / {dp})",
                            hint=f"use a generation_batch_size that divides {share}"
                                 + (", or enable packing" if _checked_at_load(ctx) else ""),
                            related=[f"{RT}.sample_per_episode"])


@rules.rule("chatlearn/micro-batch-multiple", "RLC300",
            "Each data-parallel rank's share of a global batch is a multiple of `runtime_args.train_micro_batch_size` "
            "(ChatLearn main: the trainer, without packing; 1.2.0: trainer and reference model).",
            keys=[f"{RT}.train_global_batch_size", f"{RT}.train_micro_batch_size"])
def _micro_batch(cfg: Any, ctx: Any):
    r = cfg.runtime_args
    for path, model, dp in _batch_checked_models(cfg, ctx):
        if _checked_at_load(ctx) and (not model.trainable or model.packing):
            continue
        share = r.train_global_batch_size // dp
        if share and share % r.train_micro_batch_size:
            yield ctx.error("RLC300", f"{RT}.train_micro_batch_size",
                            f"runtime_args.train_micro_batch_size ({r.train_micro_batch_size}) does not divide the "
                            f"{share} samples each data-parallel rank of {path} gets per global batch "
                            f"(train_global_batch_size {r.train_global_batch_size} / {dp} ranks)",
                            hint=f"use a micro batch size that divides {share}",
                            related=[f"{RT}.train_global_batch_size"])
            return


@rules.rule("chatlearn/micro-batch-linked", "RLC305",
            "`models.policy_trainer.train_micro_batch_size` equals `runtime_args.train_micro_batch_size`, which "
            "ChatLearn's batch checks read.",
            keys=[f"{PT}.train_micro_batch_size", f"{RT}.train_micro_batch_size"])
def _micro_batch_linked(cfg: Any, ctx: Any):
    a, b = cfg.models.policy_trainer.train_micro_batch_size, cfg.runtime_args.train_micro_batch_size
    if a != b:
        yield ctx.warning("RLC305", f"{PT}.train_micro_batch_size",
                          f"models.policy_trainer.train_micro_batch_size ({a}) differs from "
                          f"runtime_args.train_micro_batch_size ({b}); ChatLearn checks batches with the latter",
                          hint="set models.policy_trainer.train_micro_batch_size: ${runtime_args.train_micro_batch_size}",
                          related=[f"{RT}.train_micro_batch_size"])


@rules.rule("chatlearn/group-size-linked", "RLC305",
            "ChatLearn main: `runtime_args.num_inference_per_prompt` (advantages) equals "
            "`models.policy.num_inference_per_prompt` (rollout).",
            keys=[f"{RT}.num_inference_per_prompt", f"{POL}.num_inference_per_prompt"])
def _group_size_linked(cfg: Any, ctx: Any):
    if ctx.release == "1.2.0":
        return  # 1.2.0 has only the rollout's group size
    a, b = cfg.runtime_args.num_inference_per_prompt, cfg.models.policy.num_inference_per_prompt
    if a != b:
        path = f"{RT}.num_inference_per_prompt" if ctx.is_set(f"{RT}.num_inference_per_prompt") else f"{POL}.num_inference_per_prompt"
        yield ctx.warning("RLC305", path,
                          f"runtime_args.num_inference_per_prompt ({a}) differs from "
                          f"models.policy.num_inference_per_prompt ({b}): advantages would be computed over groups of "
                          f"{a} while rollout makes groups of {b}",
                          hint=f"set both to {b}", related=[f"{RT}.num_inference_per_prompt",
                                                            f"{POL}.num_inference_per_prompt"])


@rules.rule("chatlearn/rollout-gpus-divide-by-tp", "RLC400",
            "`models.policy.num_gpu` is a multiple of its `tensor_model_parallel_size`.",
            keys=[f"{POL}.num_gpu", f"{POL}.tensor_model_parallel_size"])
def _rollout_tp(cfg: Any, ctx: Any):
    p = cfg.models.policy
    if p.num_gpu % p.tensor_model_parallel_size:
        yield _nested_check(ctx, "RLC400", f"{POL}.tensor_model_parallel_size",
                            f"models.policy.num_gpu ({p.num_gpu}) is not a multiple of "
                            f"models.policy.tensor_model_parallel_size ({p.tensor_model_parallel_size})",
                            hint=f"each rollout engine takes {p.tensor_model_parallel_size} GPUs; use a num_gpu of "
                                 f"{_nearest_multiples(p.num_gpu, p.tensor_model_parallel_size)}", related=[f"{POL}.num_gpu"],
                            fails_when="when it places the rollout engines (their GPUs do not split into engines "
                                       f"of TP {p.tensor_model_parallel_size})")


@rules.rule("chatlearn/rollout-replicas-cover-episode", "RLC300",
            "`sample_per_episode` divides over the rollout engines (num_gpu / TP) and is at least their number "
            "(a warning: otherwise some engines get more prompts than others).",
            keys=[f"{RT}.sample_per_episode", f"{POL}.num_gpu", f"{POL}.tensor_model_parallel_size"])
def _rollout_replicas(cfg: Any, ctx: Any):
    p = cfg.models.policy
    if p.num_gpu <= 0 or p.num_gpu % p.tensor_model_parallel_size:
        return
    engines = p.num_gpu // p.tensor_model_parallel_size
    spe = cfg.runtime_args.sample_per_episode
    if spe % engines or spe < engines:
        yield ctx.warning("RLC300", f"{RT}.sample_per_episode",
                          f"runtime_args.sample_per_episode ({spe}) does not divide over the {engines} rollout "
                          f"engines (models.policy.num_gpu {p.num_gpu} / TP {p.tensor_model_parallel_size}), so some "
                          f"engines get more prompts than others", hint=f"use a multiple of {engines}",
                          related=[f"{POL}.num_gpu"])


@rules.rule("chatlearn/rollout-not-trainable", "RLC306", "`models.policy` and `models.ref_policy` are not trainable; "
            "`models.policy_trainer` is.", keys=[f"{POL}.trainable", f"{REF}.trainable", f"{PT}.trainable"])
def _trainable(cfg: Any, ctx: Any):
    if cfg.models.policy.trainable:
        yield _nested_check(ctx, "RLC306", f"{POL}.trainable", "models.policy.trainable is true; ChatLearn's rollout "
                                                              "model does not support training",
                            hint=f"set {POL}.trainable: false",
                            runs_but="ignores the flag (it only changes how the models share GPUs)")
    for path, model, expected in ((REF, cfg.models.ref_policy, False), (PT, cfg.models.policy_trainer, True)):
        if model.trainable is not expected:
            # ChatLearn does not check these at load; the flag decides which batch checks and replica layout apply
            yield ctx.warning("RLC306", f"{path}.trainable",
                              f"{path}.trainable is {str(model.trainable).lower()}; this model should be "
                              f"{'trained' if expected else 'frozen'}",
                              hint=f"set {path}.trainable: {str(expected).lower()}")


@rules.rule("chatlearn/rollout-no-pp-ep", "RLC306", "The rollout model supports neither pipeline nor expert "
            "parallelism (both must be 1).",
            keys=[f"{POL}.pipeline_model_parallel_size", f"{POL}.expert_model_parallel_size"])
def _rollout_pp_ep(cfg: Any, ctx: Any):
    p = cfg.models.policy
    for key in ("pipeline_model_parallel_size", "expert_model_parallel_size"):
        value = getattr(p, key)
        if value != 1:
            # 1.2.0 never hands vLLM the expert-parallel size; what a pipeline size does there, and SGLang's
            # handling of either, its code does not settle
            idle = (f"never gives vLLM the expert-parallel size: it starts {value}× fewer engines, and in each only "
                    f"its {p.tensor_model_parallel_size} tensor-parallel GPUs generate while the rest stay idle"
                    if key == "expert_model_parallel_size" and cfg.runtime_args.rollout_backend == "vllm" else None)
            yield _nested_check(ctx, "RLC306", f"{POL}.{key}", f"models.policy.{key} is {value}; ChatLearn's rollout "
                                                               f"supports only 1",
                                hint="use tensor_model_parallel_size to split the model", runs_but=idle)


@rules.rule("chatlearn/capture-covers-sequence", "RLC303",
            "ChatLearn 1.2.0: `models.policy.max_seq_len_to_capture` >= `models.policy.seq_length` (main derives both).",
            keys=[f"{POL}.max_seq_len_to_capture", f"{POL}.seq_length"])
def _capture(cfg: Any, ctx: Any):
    p = cfg.models.policy
    if ctx.release != "1.2.0":
        return  # ChatLearn main sets both to max_prompt_tokens_length + max_response_tokens_length
    if p.max_seq_len_to_capture < p.seq_length:
        yield ctx.warning("RLC303", f"{POL}.max_seq_len_to_capture",
                          f"models.policy.max_seq_len_to_capture ({p.max_seq_len_to_capture}) is smaller than "
                          f"models.policy.seq_length ({p.seq_length}): longer sequences fall out of CUDA graphs "
                          f"and run slower", hint=f"set max_seq_len_to_capture to at least {p.seq_length}",
                          related=[f"{POL}.seq_length"])


@rules.rule("chatlearn/new-tokens-fit-sequence", "RLC303",
            "ChatLearn 1.2.0: `models.policy.max_new_tokens` is smaller than `models.policy.seq_length` (room for "
            "the prompt).", keys=[f"{POL}.max_new_tokens", f"{POL}.seq_length"])
def _new_tokens(cfg: Any, ctx: Any):
    p = cfg.models.policy
    if ctx.release == "1.2.0" and p.max_new_tokens is not None and p.max_new_tokens >= p.seq_length:
        yield ctx.warning("RLC303", f"{POL}.max_new_tokens",
                          f"models.policy.max_new_tokens ({p.max_new_tokens}) leaves no room for the prompt within "
                          f"models.policy.seq_length ({p.seq_length})",
                          hint="make seq_length the prompt budget plus max_new_tokens", related=[f"{POL}.seq_length"])


@rules.rule("chatlearn/sequence-lengths-derived", "RLC304",
            "ChatLearn main overwrites the rollout's `seq_length` and `max_seq_len_to_capture`, and the Megatron "
            "models' `seq_length`, with max_prompt_tokens_length + max_response_tokens_length.",
            keys=[f"{POL}.seq_length", f"{POL}.max_seq_len_to_capture", f"{PT}.seq_length"])
def _lengths_derived(cfg: Any, ctx: Any):
    if ctx.release == "1.2.0":
        return
    targets = [(POL, cfg.models.policy, ("seq_length", "max_seq_len_to_capture"))]
    trainers = ((PT, cfg.models.policy_trainer), (REF, cfg.models.ref_policy))
    targets += [(path, m, ("seq_length",)) for path, m in trainers if isinstance(m, MegatronOptions)]
    for path, m, keys in targets:
        total = m.max_prompt_tokens_length + m.max_response_tokens_length
        for key in keys:
            if ctx.is_set(f"{path}.{key}") and getattr(m, key) != total:
                yield ctx.warning("RLC304", f"{path}.{key}",
                                  f"ChatLearn replaces {path}.{key} ({getattr(m, key)}) with "
                                  f"max_prompt_tokens_length + max_response_tokens_length = {total}",
                                  hint=f"remove {key}; set {path}.max_prompt_tokens_length and "
                                       f"max_response_tokens_length instead",
                                  related=[f"{path}.max_prompt_tokens_length", f"{path}.max_response_tokens_length"])


@rules.rule("chatlearn/megatron-seq-length-1-2", "RLC203",
            "ChatLearn 1.2.0: Megatron models need `seq_length` (its dataclass has no default; main derives it).",
            keys=[f"{PT}.seq_length", f"{REF}.seq_length"])
def _megatron_seq_length(cfg: Any, ctx: Any):
    if ctx.release != "1.2.0":
        return
    for path in (PT, REF):
        m = getattr(cfg.models, path.split(".")[1])
        if isinstance(m, MegatronOptions) and m.seq_length is None:
            yield ctx.error("RLC203", f"{path}.seq_length",
                            f"{path}.seq_length is not set: ChatLearn 1.2.0 accepts this at load but fails when it "
                            f"builds the Megatron model (the value stays OmegaConf's `???`)",
                            hint="set it to the rollout's models.policy.seq_length")


@rules.rule("chatlearn/fsdp-size-is-num-gpu", "RLC304",
            "ChatLearn ignores `fsdp_size` and shards over all of the model's GPUs (`num_gpu`).",
            keys=[f"{PT}.fsdp_size", f"{REF}.fsdp_size"])
def _fsdp_size(cfg: Any, ctx: Any):
    for path in (PT, REF):
        model = getattr(cfg.models, path.split(".")[1])
        if isinstance(model, FSDPOptions) and ctx.is_set(f"{path}.fsdp_size") and model.fsdp_size != model.num_gpu:
            yield ctx.warning("RLC304", f"{path}.fsdp_size",
                              f"ChatLearn ignores {path}.fsdp_size ({model.fsdp_size}) and shards over num_gpu "
                              f"({model.num_gpu}) GPUs", hint=f"remove fsdp_size, or set it to {model.num_gpu}",
                              related=[f"{path}.num_gpu"])


@rules.rule("chatlearn/ulysses-divides-gpus", "RLC400",
            "FSDP models' GPUs are a multiple of their Ulysses sequence parallel size.",
            keys=[f"{PT}.ulysses_sequence_parallel_size", f"{REF}.ulysses_sequence_parallel_size"])
def _ulysses(cfg: Any, ctx: Any):
    for path in (PT, REF):
        model = getattr(cfg.models, path.split(".")[1])
        if isinstance(model, FSDPOptions) and model.num_gpu % model.ulysses_sequence_parallel_size:
            if model.num_gpu < model.ulysses_sequence_parallel_size:
                # its data-parallel size is 0, which GrpoConfig's own batch checks divide by at load, at every release
                yield ctx.error("RLC400", f"{path}.ulysses_sequence_parallel_size",
                                f"{path}.num_gpu ({model.num_gpu}) is less than ulysses_sequence_parallel_size "
                                f"({model.ulysses_sequence_parallel_size}): no data-parallel rank is left, and "
                                "ChatLearn's loader stops",
                                hint=f"use a sequence parallel size that divides {model.num_gpu}",
                                related=[f"{path}.num_gpu"])
                continue
            yield _nested_check(ctx, "RLC400", f"{path}.ulysses_sequence_parallel_size",
                                f"{path}.num_gpu ({model.num_gpu}) is not a multiple of "
                                f"ulysses_sequence_parallel_size ({model.ulysses_sequence_parallel_size})",
                                hint=f"use a sequence parallel size that divides {model.num_gpu}",
                                related=[f"{path}.num_gpu"],
                                fails_when="when it sets up the FSDP model (it asserts that the FSDP size divides "
                                           "by the sequence parallel size)")


@rules.rule("chatlearn/megatron-parallel-divides-gpus", "RLC400",
            "Megatron models' GPUs are a multiple of TP·CP·PP, and of EP·ETP·PP for MoE layers (ChatLearn accepts "
            "this at load; Megatron-core fails when it builds its parallel groups).",
            keys=[f"{PT}.tensor_model_parallel_size", f"{PT}.pipeline_model_parallel_size",
                  f"{PT}.context_parallel_size", f"{PT}.expert_model_parallel_size"])
def _megatron_divides(cfg: Any, ctx: Any):
    for path in (PT, REF):
        m = getattr(cfg.models, path.split(".")[1])
        if not isinstance(m, MegatronOptions) or m.num_gpu <= 0:
            continue
        dense = m.tensor_model_parallel_size * m.context_parallel_size * m.pipeline_model_parallel_size
        experts = (m.expert_tensor_parallel_size or m.tensor_model_parallel_size) * m.expert_model_parallel_size \
            * m.pipeline_model_parallel_size
        for size, what, key in ((dense, f"TP {m.tensor_model_parallel_size} × CP {m.context_parallel_size} × PP "
                                        f"{m.pipeline_model_parallel_size}", "tensor_model_parallel_size"),
                                (experts, f"ETP {m.expert_tensor_parallel_size or m.tensor_model_parallel_size} × EP "
                                          f"{m.expert_model_parallel_size} × PP {m.pipeline_model_parallel_size}",
                                 "expert_model_parallel_size")):
            if m.num_gpu % size:
                # fewer GPUs than one model-parallel group: ChatLearn's data-parallel size is 0 and its own batch
                # checks divide by it at load; otherwise Megatron-core stops when it builds its groups
                when = ("ChatLearn stops at load (its data-parallel size is 0)" if m.num_gpu < size else
                        "ChatLearn accepts this at load but Megatron-core fails when it builds its parallel groups")
                yield ctx.error("RLC400", f"{path}.{key}",
                                f"{path}.num_gpu ({m.num_gpu}) is not a multiple of {what} = {size}: {when}",
                                hint=f"use a num_gpu of {_nearest_multiples(m.num_gpu, size)}, or smaller parallel sizes",
                                related=[f"{path}.num_gpu"])
                break


@rules.rule("chatlearn/pipeline-options-need-pp", "RLC302",
            "Virtual pipeline stages and uneven first/last stages need `pipeline_model_parallel_size` > 1.",
            keys=[f"{PT}.virtual_pipeline_model_parallel_size", f"{PT}.decoder_first_pipeline_num_layers",
                  f"{PT}.decoder_last_pipeline_num_layers"])
def _pipeline_options(cfg: Any, ctx: Any):
    for path in (PT, REF):
        m = getattr(cfg.models, path.split(".")[1])
        if not isinstance(m, MegatronOptions) or m.pipeline_model_parallel_size > 1:
            continue
        for key in ("virtual_pipeline_model_parallel_size", "decoder_first_pipeline_num_layers",
                    "decoder_last_pipeline_num_layers"):
            if getattr(m, key, None) is not None and ctx.is_set(f"{path}.{key}"):
                yield ctx.error("RLC302", f"{path}.{key}",
                                f"{path}.{key} ({getattr(m, key)}) needs pipeline parallelism, but "
                                f"pipeline_model_parallel_size is 1: ChatLearn accepts this at load but Megatron-core "
                                f"fails when it initialises", hint=f"set pipeline_model_parallel_size above 1, or "
                                                                   f"remove {key}",
                                related=[f"{path}.pipeline_model_parallel_size"])


@rules.rule("chatlearn/sequence-parallel-needs-tp", "RLC307",
            "Megatron sequence parallelism has no effect with tensor parallel size 1.",
            keys=[f"{PT}.sequence_parallel", f"{PT}.tensor_model_parallel_size"])
def _sequence_parallel(cfg: Any, ctx: Any):
    for path in (PT, REF):
        m = getattr(cfg.models, path.split(".")[1])
        if isinstance(m, MegatronOptions) and m.sequence_parallel and m.tensor_model_parallel_size == 1 \
                and ctx.is_set(f"{path}.sequence_parallel"):
            yield ctx.warning("RLC307", f"{path}.sequence_parallel",
                              f"{path}.sequence_parallel is true but tensor_model_parallel_size is 1, so it has no "
                              f"effect", hint="set tensor_model_parallel_size above 1, or sequence_parallel: false",
                              related=[f"{path}.tensor_model_parallel_size"])


@rules.rule("chatlearn/recompute-granularity-spelling", "RLC306",
            "`recompute_granularity: sel` (the docs' spelling) is not a value Megatron-core accepts; it expects "
            "`selective`.", keys=[f"{PT}.recompute_granularity"])
def _recompute(cfg: Any, ctx: Any):
    m = cfg.models.policy_trainer
    if isinstance(m, MegatronPolicyTrainer) and m.recompute_granularity == "sel":
        yield ctx.warning("RLC306", f"{PT}.recompute_granularity",
                          "models.policy_trainer.recompute_granularity is `sel`, as ChatLearn's docs write it; "
                          "Megatron-core only accepts `selective` or `full`", hint="write `selective`")


@rules.rule("chatlearn/per-token-loss", "RLC306",
            "ChatLearn main requires `calculate_per_token_loss: true` for the Megatron trainer.",
            keys=[f"{PT}.calculate_per_token_loss"])
def _per_token_loss(cfg: Any, ctx: Any):
    m = cfg.models.policy_trainer
    if isinstance(m, MegatronPolicyTrainer) and not m.calculate_per_token_loss:
        yield _nested_check(ctx, "RLC306", f"{PT}.calculate_per_token_loss",
                            "models.policy_trainer.calculate_per_token_loss is false; ChatLearn requires the "
                            "per-token loss for RL training", hint="remove it, or set it to true",
                            runs_but="averages the loss per micro-batch (each weighted alike) instead of per token "
                                     "over the global batch")


@rules.rule("chatlearn/packing-ignores-batch-sizes", "RLC307",
            "With packing, `generation_batch_size` and `train_micro_batch_size` are ignored (and Megatron's "
            "`seq_length`).", keys=[f"{PT}.packing", f"{PT}.generation_batch_size", f"{PT}.train_micro_batch_size"])
def _packing_ignores(cfg: Any, ctx: Any):
    for path in (PT, REF):
        m = getattr(cfg.models, path.split(".")[1])
        if not m.packing:
            continue
        for key in ("generation_batch_size", "train_micro_batch_size", "seq_length"):
            if hasattr(m, key) and ctx.is_set(f"{path}.{key}"):
                yield ctx.warning("RLC307", f"{path}.{key}",
                                  f"{path}.{key} ({getattr(m, key)}) is ignored because {path}.packing is true",
                                  hint="remove it, or disable packing", related=[f"{path}.packing"])


@rules.rule("chatlearn/gpu-per-process-fits", "RLC400", "A model's `gpu_per_process` is at most its `num_gpu` and "
            "divides it (a warning: ChatLearn does not check it).",
            keys=[f"{PT}.gpu_per_process", f"{POL}.gpu_per_process", f"{REF}.gpu_per_process"])
def _gpu_per_process(cfg: Any, ctx: Any):
    for name in ("policy_trainer", "ref_policy", "policy"):
        m = getattr(cfg.models, name)
        if m.gpu_per_process and m.num_gpu and (m.gpu_per_process > m.num_gpu or m.num_gpu % m.gpu_per_process):
            yield ctx.warning("RLC400", f"models.{name}.gpu_per_process",
                              f"models.{name}.gpu_per_process ({m.gpu_per_process}) does not divide "
                              f"models.{name}.num_gpu ({m.num_gpu})", hint="use gpu_per_process: 1",
                              related=[f"models.{name}.num_gpu"])


@rules.rule("chatlearn/colocation-names", "RLC202",
            "`runtime_args.colocation` names only models under `models`, each in at most one group.",
            keys=[f"{RT}.colocation"], also=("RLC401",))
def _colocation_names(cfg: Any, ctx: Any):
    seen: dict[str, int] = {}
    for index, group in enumerate(colocation_groups(cfg)):
        for name in group:
            if name not in MODEL_NAMES:
                close = close_matches(name, MODEL_NAMES, n=1)
                yield ctx.error("RLC202", f"{RT}.colocation",
                                f"runtime_args.colocation names `{name}`, which is not a model "
                                f"(models are {', '.join(MODEL_NAMES)}): ChatLearn accepts this at load but fails "
                                f"when it places the models",
                                hint=f"did you mean `{close[0]}`?" if close else "remove it")
            elif name in seen and seen[name] != index:
                yield ctx.error("RLC401", f"{RT}.colocation",
                                f"runtime_args.colocation puts `{name}` in two groups (groups {seen[name] + 1} and "
                                f"{index + 1})", hint="a model can share GPUs with one group only")
            seen.setdefault(name, index)


@rules.rule("chatlearn/colocated-models-offload", "RLC306",
            "Colocated models free their GPU memory between phases (`free_gpu_memory.offload_weights`; for the "
            "trainer also optimizer states and gradient buffers).", keys=[f"{RT}.colocation"])
def _colocated_offload(cfg: Any, ctx: Any):
    for group in colocation_groups(cfg):
        if len(group) < 2:
            continue
        for name in group:
            if name not in ("policy_trainer", "ref_policy", "policy"):
                continue
            memory = getattr(cfg.models, name).free_gpu_memory
            for key in ("offload_weights", "offload_optimizer_states", "free_grad_buffers"):
                if name != "policy_trainer" and key != "offload_weights":
                    continue
                if not getattr(memory, key):
                    yield ctx.warning("RLC306", f"models.{name}.free_gpu_memory.{key}",
                                      f"models.{name} is colocated with {', '.join(n for n in group if n != name)} but "
                                      f"free_gpu_memory.{key} is false, so its memory stays on the GPUs while the "
                                      f"others run", hint=f"set models.{name}.free_gpu_memory.{key}: true",
                                      related=[f"{RT}.colocation"])


# Keys ChatLearn types as plain strings but reads as a choice. An unknown value passes its loader; (choices,
# severity, what happens) per key.
_CHOICES: dict[str, tuple[tuple[str, ...], str, str]] = {
    f"{RT}.rollout_backend": (("vllm", "sglang"), "error", "fails when run() builds the rollout model"),
    f"{RT}.task_type": (("chat", "agent"), "error", "fails when run() builds the rollout model"),
    f"{RT}.log_args_dict.wandb_resume": (("allow", "must", "never", "auto"), "error",
                                         "Weights & Biases refuses it when logging starts"),
    f"{RT}.stream_data_loader_type": (("fixed", "dynamic"), "warning", "its data loader does not know it"),
    f"{RT}.cpu_schedule_strategy": (("PACK", "SPREAD"), "warning", "Ray does not know this placement strategy"),
    f"{RT}.model_type": (("llm", "vlm"), "warning", "its data pipeline does not know it"),
}


@rules.rule("chatlearn/zero-episodes", "RLC201", "`runtime_args.num_episode: 0` is accepted by ChatLearn, whose "
            "engine then runs no episode and trains nothing; `rlcfg run` refuses it.",
            keys=[f"{RT}.num_episode"], also=("RLC118",))
def _zero_episodes(cfg: Any, ctx: Any):
    if cfg.runtime_args.num_episode == 0:
        yield ctx.warning("RLC201", f"{RT}.num_episode", "runtime_args.num_episode is 0; ChatLearn runs it, but its "
                          "engine's episode loop never starts, so the job loads every model and trains nothing",
                          hint="set the number of episodes to train")
        yield _refusal(f"{RT}.num_episode", 0, "it trains nothing", "set runtime_args.num_episode to 1 or more")


@rules.rule("chatlearn/choices", "RLC202",
            "String keys that ChatLearn reads as a choice (rollout_backend, task_type, wandb_resume, ...) hold one "
            "of its values.", keys=list(_CHOICES))
def _choices(cfg: Any, ctx: Any):
    for path, (choices, severity, effect) in _CHOICES.items():
        value: Any = cfg
        for part in path.split("."):
            value = getattr(value, part)
        if value in choices or not ctx.is_set(path):
            continue
        close = close_matches(str(value), choices, n=1)
        message = (f"{path}: `{value}` is not one of {', '.join(choices)}; ChatLearn accepts this at load but "
                   f"{effect}")
        hint = f"did you mean `{close[0]}`?" if close else f"use one of {', '.join(choices)}"
        yield (ctx.error if severity == "error" else ctx.warning)("RLC202", path, message, hint=hint)


@rules.rule("chatlearn/agent-needs-async-sglang", "RLC306",
            "ChatLearn main: agent tasks and the rollout manager need asynchronous SGLang rollout "
            "(`is_sync_mode: false`, `rollout_backend: sglang`), and agent tasks need `use_rollout_manager`.",
            keys=[f"{RT}.task_type", f"{RT}.use_rollout_manager", f"{POL}.is_sync_mode"], also=("RLC302",))
def _agent(cfg: Any, ctx: Any):
    if ctx.release == "1.2.0":
        return
    r, p = cfg.runtime_args, cfg.models.policy
    if r.task_type == "agent" and not r.use_rollout_manager:
        yield ctx.error("RLC302", f"{RT}.task_type", "runtime_args.task_type is `agent` but use_rollout_manager is "
                                                     "false: ChatLearn accepts this at load but fails when run() "
                                                     "starts (it asserts the rollout manager)", hint="set runtime_args.use_rollout_manager: true",
                        related=[f"{RT}.use_rollout_manager"])
    if (r.task_type == "agent" or r.use_rollout_manager) and (p.is_sync_mode or r.rollout_backend != "sglang"):
        path = f"{RT}.task_type" if r.task_type == "agent" else f"{RT}.use_rollout_manager"
        yield ctx.error("RLC306", path, f"{path.split('.')[-1]} needs asynchronous SGLang rollout, but rollout_backend "
                                        f"is `{r.rollout_backend}` and models.policy.is_sync_mode is "
                                        f"{str(p.is_sync_mode).lower()}: ChatLearn accepts this at load but fails "
                                        f"when run() starts (it asserts asynchronous SGLang)",
                        hint="set runtime_args.rollout_backend: sglang and models.policy.is_sync_mode: false",
                        related=[f"{RT}.rollout_backend", f"{POL}.is_sync_mode"])


@rules.rule("chatlearn/rollout-manager-has-no-gpu", "RLC306",
            "ChatLearn main: `models.rollout_manager.num_gpu` is 0.", keys=["models.rollout_manager.num_gpu"])
def _rollout_manager_gpu(cfg: Any, ctx: Any):
    if ctx.release != "1.2.0" and cfg.models.rollout_manager.num_gpu != 0:
        yield ctx.error("RLC306", "models.rollout_manager.num_gpu",
                        f"models.rollout_manager.num_gpu is {cfg.models.rollout_manager.num_gpu}; ChatLearn's rollout "
                        f"manager runs on CPUs and requires 0", hint="remove it, or set it to 0")


@rules.rule("chatlearn/rollout-manager-starts", "RLC306",
            "ChatLearn main: with `runtime_args.use_rollout_manager` the data is not reranked "
            "(`runtime_args.data_rerank: false`) and the rollout manager is one Ray actor "
            "(`models.rollout_manager.num_cpu` // `cpu_per_process` = 1).",
            keys=[f"{RT}.data_rerank", "models.rollout_manager.num_cpu", "models.rollout_manager.cpu_per_process"])
def _rollout_manager_starts(cfg: Any, ctx: Any):
    r, m = cfg.runtime_args, cfg.models.rollout_manager
    if ctx.release == "1.2.0" or not r.use_rollout_manager:
        return
    if r.data_rerank:
        # chatlearn/models/agent/rollout_manager.py RolloutManager._forward_step asserts it at the first rollout.
        yield ctx.error("RLC306", f"{RT}.data_rerank", "runtime_args.data_rerank is true with use_rollout_manager: "
                                                       "ChatLearn accepts this at load but its rollout manager fails "
                                                       "at the first rollout (it asserts data_rerank is false)",
                        hint="set runtime_args.data_rerank: false", related=[f"{RT}.use_rollout_manager"])
    replicas = m.num_cpu // m.cpu_per_process if m.cpu_per_process else None
    if replicas != 1:
        # RolloutManager.__init__: `assert self._num_replica == 1`, with _num_replica = num_cpu // cpu_per_process.
        shown = f"{m.num_cpu} // {m.cpu_per_process} = {replicas}" if replicas is not None else \
            f"num_cpu {m.num_cpu} with no cpu_per_process"
        yield ctx.error("RLC306", "models.rollout_manager.num_cpu",
                        f"the rollout manager would have {shown} replicas: ChatLearn accepts this at load but fails "
                        f"when the rollout manager starts (it asserts exactly one)",
                        hint="set models.rollout_manager.num_cpu: 1 and cpu_per_process: 1",
                        related=["models.rollout_manager.cpu_per_process", f"{RT}.use_rollout_manager"])


_EVAL_SAMPLING = ("temperature", "top_p", "top_k", "presence_penalty", "frequency_penalty", "repetition_penalty")


@rules.rule("chatlearn/rollout-manager-eval", "RLC307",
            "ChatLearn main: the rollout manager evaluates with the training sampling settings (its eval_forward "
            "generates with is_eval false), so `models.policy.eval_*` that differ from them have no effect.",
            keys=[f"{POL}.eval_{key}" for key in _EVAL_SAMPLING])
def _rollout_manager_eval(cfg: Any, ctx: Any):
    p = cfg.models.policy
    if ctx.release == "1.2.0" or not cfg.runtime_args.use_rollout_manager:
        return
    for key in _EVAL_SAMPLING:
        path = f"{POL}.eval_{key}"
        if ctx.is_set(path) and getattr(p, f"eval_{key}") != getattr(p, key):
            yield ctx.warning("RLC307", path, f"{path} ({getattr(p, f'eval_{key}')}) has no effect with "
                                              f"use_rollout_manager: ChatLearn's rollout manager evaluates with the "
                                              f"training {key} ({getattr(p, key)}), and rlcfg does the same",
                              hint=f"remove it, or set {POL}.{key} if evaluation should sample that way too",
                              related=[f"{RT}.use_rollout_manager", f"{POL}.{key}"])


@rules.rule("chatlearn/partial-rollout-ratio", "RLC305",
            "ChatLearn main: `models.partial_rollout_manager.rollout_ratio` has one entry per rollout round "
            "(`max_rollout_round`) and sums to 1.",
            keys=["models.partial_rollout_manager.rollout_ratio", "models.partial_rollout_manager.max_rollout_round"])
def _partial_rollout(cfg: Any, ctx: Any):
    if ctx.release == "1.2.0":
        return
    m = cfg.models.partial_rollout_manager
    path = "models.partial_rollout_manager.rollout_ratio"
    if len(m.rollout_ratio) != m.max_rollout_round:
        yield ctx.error("RLC305", path, f"{path} has {len(m.rollout_ratio)} entries but max_rollout_round is "
                                        f"{m.max_rollout_round}; ChatLearn needs one ratio per round",
                        hint=f"give {m.max_rollout_round} ratios",
                        related=["models.partial_rollout_manager.max_rollout_round"])
    elif sum(m.rollout_ratio) != 1.0:
        yield ctx.error("RLC305", path, f"{path} sums to {sum(m.rollout_ratio)}; ChatLearn requires exactly 1.0",
                        hint="make the ratios sum to 1")


@rules.rule("chatlearn/partial-rollout-starts", "RLC306",
            "ChatLearn main: with `runtime_args.use_partial_rollout` (and no rollout manager), "
            "`models.partial_rollout_manager.mini_response_per_prompt` is below `models.policy.num_inference_per_prompt`, "
            "and with vLLM every round may generate at least one token.",
            keys=["models.partial_rollout_manager.mini_response_per_prompt", f"{POL}.num_inference_per_prompt",
                  "models.partial_rollout_manager.rollout_ratio"])
def _partial_rollout_starts(cfg: Any, ctx: Any):
    r, m, p = cfg.runtime_args, cfg.models.partial_rollout_manager, cfg.models.policy
    if ctx.release == "1.2.0" or not r.use_partial_rollout or r.use_rollout_manager:
        return
    if m.mini_response_per_prompt >= p.num_inference_per_prompt:
        # PartialRolloutManager.setup: `assert self.mini_response_per_prompt < self.num_inference_per_prompt`.
        path = "models.partial_rollout_manager.mini_response_per_prompt"
        yield ctx.error("RLC306", path, f"{path} ({m.mini_response_per_prompt}) is not below "
                                        f"models.policy.num_inference_per_prompt ({p.num_inference_per_prompt}): "
                                        f"ChatLearn accepts this at load but its partial rollout manager fails when it "
                                        f"starts (a prompt's responses go to training once more than this many have "
                                        f"finished)", hint=f"set it below {p.num_inference_per_prompt}",
                        related=[f"{POL}.num_inference_per_prompt", f"{RT}.use_partial_rollout"])
    limits = [int(p.max_response_tokens_length * share) for share in m.rollout_ratio]
    if r.rollout_backend == "vllm" and limits and min(limits) < 1:
        # vLLM's SamplingParams refuse max_tokens 0 (SGLang generates nothing and the response goes on).
        path = "models.partial_rollout_manager.rollout_ratio"
        yield ctx.error("RLC306", path, f"{path} gives a round of {min(limits)} tokens "
                                        f"(int({p.max_response_tokens_length} × {min(m.rollout_ratio)})): ChatLearn "
                                        f"accepts this at load but vLLM refuses to generate 0 tokens in that round",
                        hint="give every round a share of at least one token", related=[f"{RT}.rollout_backend"])


@rules.rule("chatlearn/partial-rollout-needs-grpo-engine", "RLC307",
            "ChatLearn main: `runtime_args.use_partial_rollout` has no effect with `use_rollout_manager`, whose "
            "engine starts no partial rollout manager.", keys=[f"{RT}.use_partial_rollout", f"{RT}.use_rollout_manager"])
def _partial_rollout_ignored(cfg: Any, ctx: Any):
    r = cfg.runtime_args
    if ctx.release != "1.2.0" and r.use_partial_rollout and r.use_rollout_manager:
        yield ctx.warning("RLC307", f"{RT}.use_partial_rollout",
                          "runtime_args.use_partial_rollout has no effect with use_rollout_manager: ChatLearn's "
                          "rollout-manager engine (RolloutManagerGRPOEngine) starts no partial rollout manager, and "
                          "rlcfg generates each response whole, as it does",
                          hint="remove one of them", related=[f"{RT}.use_rollout_manager"])


@rules.rule("chatlearn/data-paths-exist", "RLC308",
            "Each comma-separated `data_path` / `eval_data_path` exists on the machine that runs the job "
            "(a warning here; an error under --strict).", keys=[f"{RT}.data_path", f"{RT}.eval_data_path"])
def _data_paths(cfg: Any, ctx: Any):
    for key in ("data_path", "eval_data_path"):
        value = getattr(cfg.runtime_args, key)
        if not value or not ctx.is_set(f"{RT}.{key}"):
            continue
        missing = [p.strip() for p in value.split(",") if p.strip() and not ctx.host.path_exists(p.strip())]
        if missing:
            yield ctx.machine(f"{RT}.{key}", f"runtime_args.{key}: {', '.join(missing)} does not exist on this machine",
                              hint="it must exist where the job runs; ignore this if you validate away from the cluster")


@rules.rule("chatlearn/wandb-needs-login", "RLC308",
            "With `enable_wandb`, the job needs Weights & Biases credentials (WANDB_API_KEY) — a warning here, an "
            "error under --strict.", keys=[f"{RT}.log_args_dict.enable_wandb"])
def _wandb(cfg: Any, ctx: Any):
    if cfg.runtime_args.log_args_dict.enable_wandb and "WANDB_API_KEY" not in ctx.host.env:
        yield ctx.machine(f"{RT}.log_args_dict.enable_wandb",
                          "Weights & Biases logging is enabled but WANDB_API_KEY is not set in this environment",
                          hint="export WANDB_API_KEY where the job runs (or run `wandb login` there)")


@rules.rule("chatlearn/replay-feeds-advantages", "RLC306",
            "ChatLearn computes GRPO advantages only for episodes that enter its replay window: with "
            "`max_replay_episode: 0` (its default), or before `replay_episode_offset`, its trainer finds no advantages "
            "and stops at the first step (a warning: ChatLearn accepts this at load).",
            keys=[f"{RT}.max_replay_episode", f"{RT}.replay_episode_offset"])
def _replay_feeds_advantages(cfg: Any, ctx: Any):
    # chatlearn/data/data.py StreamDataset.set_dataset: the replay sample manager (AdvantageComputer) runs only when
    # max_replay_episode > 0 and episode_id >= replay_episode_offset; the trainers read data_b["advantages"].
    r = cfg.runtime_args
    if r.max_replay_episode == 0:
        where = "set" if ctx.is_set(f"{RT}.max_replay_episode") else "left at ChatLearn's default"
        yield ctx.warning("RLC306", f"{RT}.max_replay_episode",
                          f"runtime_args.max_replay_episode is 0 ({where}): ChatLearn then never runs its GRPO "
                          f"advantage computation, and its trainer stops at the first step for want of the samples' "
                          f"advantages; ChatLearn accepts this at load (rlcfg computes the advantages either way)",
                          hint="set runtime_args.max_replay_episode: 2, as ChatLearn's templates do")
    elif r.replay_episode_offset > 0:
        yield ctx.warning("RLC306", f"{RT}.replay_episode_offset",
                          f"runtime_args.replay_episode_offset is {r.replay_episode_offset}: ChatLearn computes no "
                          f"advantages for the episodes before it, and its trainer stops at the first step; ChatLearn "
                          f"accepts this at load (rlcfg computes the advantages either way)",
                          hint="remove replay_episode_offset")


@rules.rule("chatlearn/trainer-ignores", "RLC307",
            "Settings ChatLearn's trainer of the chosen backend never reads: its Megatron trainer back-propagates the "
            "policy loss alone (kl_coef, entropy_coef), its FSDP trainer always runs the GRPO loss "
            "(use_group_sequence_policy).",
            keys=[f"{PT}.kl_coef", f"{PT}.entropy_coef", f"{PT}.use_group_sequence_policy"])
def _trainer_ignores(cfg: Any, ctx: Any):
    t = cfg.models.policy_trainer
    if isinstance(t, MegatronPolicyTrainer):
        for key in ("kl_coef", "entropy_coef"):
            if getattr(t, key) > 0:
                term = "KL" if key == "kl_coef" else "entropy"
                yield ctx.warning("RLC307", f"{PT}.{key}",
                                  f"{PT}.{key} ({getattr(t, key)}) has no effect with the Megatron backend: "
                                  f"ChatLearn's Megatron trainer computes the {term} term for its metrics only and "
                                  f"back-propagates the policy loss alone (rlcfg does the same)",
                                  hint="remove it, or train with the FSDP backend, whose trainer adds the term",
                                  related=[f"{RT}.train_backend"])
    elif t.use_group_sequence_policy:
        yield ctx.warning("RLC307", f"{PT}.use_group_sequence_policy",
                          f"{PT}.use_group_sequence_policy has no effect with the FSDP backend: ChatLearn's FSDP "
                          f"trainer always runs the GRPO loss (rlcfg does the same)",
                          hint="remove it, or train with the Megatron backend, whose trainer runs GSPO",
                          related=[f"{RT}.train_backend"])


def _refusal(path: str, value: Any, instead: str, hint: str | None = None) -> Finding:
    shown = "null" if value is None else str(value).lower() if isinstance(value, bool) else value
    return Finding("RLC118", Severity.NOTE, path, f"`rlcfg run` refuses `{path}` = {shown}: {instead}",
                   hint or "`rlcfg validate` and `rlcfg plan` check it; to run with rlcfg, choose a value it runs")


def _runtime_limits(cfg: Any, release: str | None):
    """What the runtime's preflight refuses of the roles lower.py builds: the policy trainer, and the
    reference when a KL term reads it (kl_coef > 0, which only the FSDP trainer back-propagates)."""
    trainer, ref = cfg.models.policy_trainer, cfg.models.ref_policy
    if isinstance(trainer, MegatronPolicyTrainer):
        for key, path, why in run_limits.megatron_unbuilt_models(
                [(f"{PT}.load", trainer.load), (f"{REF}.load", ref.load if trainer.kl_coef > 0 else None)],
                corrections_mapped=expert_bias(cfg, release) != "unmapped"):
            yield _refusal(key, path, why, "set `runtime_args.train_backend: fsdp`")
        model = trainer.megatron_model_cfg
        for name, value in run_limits.moe_routing_changes(lambda key: getattr(model, key, None)):
            yield _refusal(f"{PT}.megatron_model_cfg.{name}", value, run_limits.MOE_ROUTING,
                           "leave it at ChatLearn's default")
        return


@rules.rule("chatlearn/run-refusals", "RLC118",
            "`rlcfg run` refuses what ChatLearn computes otherwise than rlcfg can: advantage groups that outlive an "
            "episode (runtime_args.num_inference_per_prompt above the rollout's), partial rollout over several "
            "optimizer steps per episode, and what rlcfg's runtime does not "
            "do (rlcfg/run_limits.py): on Megatron a model family it does not build and MoE "
            "router settings that compute otherwise than the model's own routing; and "
            "vision-language models.",
            keys=[f"models.{name}.load" for name in ("policy_trainer", "policy", "ref_policy")] + [
                  f"{RT}.num_inference_per_prompt",
                  f"{PT}.megatron_model_cfg.moe_aux_loss_coeff", f"{PT}.megatron_model_cfg.moe_router_score_function",
                  f"{RT}.train_global_batch_size"])
def _run_refusals(cfg: Any, ctx: Any):
    r, p = cfg.runtime_args, cfg.models.policy
    models = [(f"models.{name}.load", getattr(cfg.models, name).load) for name in ("policy_trainer", "policy",
                                                                                    "ref_policy")]
    for key, path, why in run_limits.vision_language_models(models):
        yield _refusal(key, path, f"a vision-language model ({why}); {run_limits.VISION_LANGUAGE}",
                       run_limits.vision_language_hint(key, path))
    if ctx.release != "1.2.0" and r.num_inference_per_prompt > p.num_inference_per_prompt:
        # chatlearn/algorithm/grpo_utils/advantage_compute.py AdvantageComputer: rewards are kept per prompt_uid until
        # runtime_args.num_inference_per_prompt of them arrived, so with fewer per episode a prompt drawn again in a
        # later epoch is normalised together with its earlier responses.
        yield _refusal(f"{RT}.num_inference_per_prompt", r.num_inference_per_prompt,
                       f"ChatLearn keeps a prompt's rewards until {r.num_inference_per_prompt} have arrived, but "
                       f"rollout makes {p.num_inference_per_prompt} per episode, so a prompt drawn again later is "
                       f"normalised together with its earlier responses; rlcfg normalises each group of "
                       f"{p.num_inference_per_prompt} on its own",
                       f"set `{RT}.num_inference_per_prompt: {p.num_inference_per_prompt}`, the rollout's count, so "
                       "that each prompt's group is one episode's")
    steps = r.sample_per_episode // r.train_global_batch_size if r.train_global_batch_size else 1
    if ctx.release != "1.2.0" and r.use_partial_rollout and not r.use_rollout_manager and steps > 1:
        # chatlearn/data/data.py StreamDataset.iter_fixed: the episode's trained responses, however many, are cut
        # into sample_per_episode // train_global_batch_size even slices per data-parallel rank (even_slice).
        yield _refusal(f"{RT}.train_global_batch_size", r.train_global_batch_size,
                       f"with partial rollout ChatLearn trains an episode's finished responses, however many, in "
                       f"{steps} optimizer steps of even slices; rlcfg runs partial rollout with one optimizer step "
                       f"per episode",
                       f"set `{RT}.train_global_batch_size: {r.sample_per_episode}` (sample_per_episode) to run it "
                       "with rlcfg")
    yield from _runtime_limits(cfg, ctx.release)


@rules.rule("chatlearn/megatron-min-lr", "RLC305",
            "With the Megatron trainer `models.policy_trainer.optimizer.min_lr` is at most `lr`: ChatLearn's Megatron "
            "decays the learning rate from lr to min_lr over its single training iteration, and Megatron's scheduler "
            "refuses a floor above the peak when the trainer starts.",
            keys=[f"{PT}.optimizer.min_lr", f"{PT}.optimizer.lr"])
def _megatron_min_lr(cfg: Any, ctx: Any):
    t = cfg.models.policy_trainer
    opt = t.optimizer
    if isinstance(t, MegatronPolicyTrainer) and opt.min_lr > opt.lr:
        # megatron/core/optimizer_param_scheduler.py OptimizerParamScheduler: `assert self.max_lr >= self.min_lr`.
        yield ctx.error("RLC305", f"{PT}.optimizer.min_lr",
                        f"{PT}.optimizer.min_lr ({opt.min_lr}) is above {PT}.optimizer.lr ({opt.lr}): Megatron's "
                        f"learning-rate scheduler refuses it when ChatLearn's trainer starts (ChatLearn accepts it at "
                        f"load; rlcfg is stricter and says so before launch)",
                        hint=f"set min_lr to at most {opt.lr} (equal to lr keeps the rate constant)",
                        related=[f"{PT}.optimizer.lr"])
