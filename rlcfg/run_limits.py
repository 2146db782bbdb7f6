"""What `rlcfg run`'s runtime does not do, each said once.

The runtime's preflight (rlcfg.runtime.backends.check_plan) refuses a plan that asks for one of these, and each
dialect's run-refusal rule says so already in `rlcfg validate` (an RLC118 note at the dialect's own key), under the
same condition, so that `validate`, `run --dry-run` and `run` agree. Both build their messages from these sentences;
this module imports nothing of rlcfg, so `validate` can read it without the lowering, the plan or the runtime.
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable, Iterable, Iterator, Mapping

# The model types rlcfg's Megatron weight converter builds (rlcfg.runtime.backends.megatron_weights).
MEGATRON_FAMILIES = ("qwen2", "qwen3", "llama", "qwen3_moe", "deepseek_v3")
MEGATRON_FAMILY = f"rlcfg's Megatron backend builds {', '.join(MEGATRON_FAMILIES)} models only"
# Checkpoint names of families the Megatron converter does not build (a hub name, whose config.json only the workers
# read): a distilled model keeps its base's family (DeepSeek-R1-Distill-Qwen is a Qwen2, and is not matched).
_UNBUILT_FAMILY_NAME = (r"(?i)(?:^|[-_.])(mixtral|mistral|gemma\d*|phi-?\d|glm-?\d|chatglm|"
                        r"deepseek-(?:v\d|r1(?!-distill))|kimi|mimo|qwen3[._]5|qwen3-next|qwen1\.5-moe|"
                        r"qwen2-57b|olmo\d*|internlm\d*|minimax|gpt-oss)")
# DeepSeek-V3's router corrects each expert's score by a bias of the checkpoint, which each framework's Megatron setup
# treats its own way (SkyRL's, through Megatron-Bridge, moves it after each step; ChatLearn's routes without it).
# rlcfg builds such a model on megatron only for the frameworks whose way it has read (ir.Role.expert_bias).
ROUTING_CORRECTION_FAMILIES = ("deepseek_v3",)
_ROUTING_CORRECTION_NAME = r"(?i)(?:^|[-_.])(moonlight)"
ROUTING_CORRECTION = ("rlcfg builds DeepSeek-V3 models on megatron only where it has read how the framework's Megatron "
                      "setup routes them (its routing correction, e_score_correction_bias, and any auxiliary loss): "
                      "SkyRL's from skyrl-train 0.4.0 and the skyrl package, and ChatLearn's after 1.2.0")
# rlcfg/runtime/backends/megatron.py lower_role: DeepSeek-V3's projections to its latents are whole on every
# tensor-parallel rank, and only sequence parallelism sums their key gradient over the ranks.
LATENT_ATTENTION_TP = ("rlcfg's Megatron backend runs multi-latent attention (DeepSeek-V3, Moonlight) on tensor "
                       "parallel ranks with sequence parallelism on only: only then does its key gradient sum over "
                       "the ranks' heads")
# AReaL's and ROLL's Megatron setups choose the router's settings (logit dtype, load-balancing loss) in code of their
# own, which rlcfg has not mapped; SkyRL's, RLinf's and ChatLearn's are.
EXPERT_PARALLEL = ("rlcfg runs expert parallelism with the MoE router settings of SkyRL, RLinf and ChatLearn; this "
                   "framework's are not mapped onto megatron-core, so it runs none")
# What rlcfg's Megatron backend computes for a mixture-of-experts layer (rlcfg.runtime.backends.megatron
# moe_transformer_config), which the MoE keys of a framework's Megatron config must leave as it is.
MOE_ROUTING = ("rlcfg routes each token by softmax to the top k experts of the model's config.json (their weights "
               "renormalised as its norm_topk_prob says), drops no token, and adds no load-balancing, z- or bias "
               "term")
_AUX_LOSSES = ("aux_loss", "seq_aux_loss", "global_aux_loss")
ULYSSES = ("rlcfg runs Ulysses sequence parallelism in RL training on its fsdp backend only, not on Megatron (whose "
           "sequence split is context parallelism) nor in SFT or reward-model training")
FSDP_MODEL_PARALLEL = ("rlcfg's fsdp backend shards data-parallel only; tensor, pipeline, context and expert parallel "
                       "sizes need its Megatron backend")
MEGATRON_CRITIC = "rlcfg's Megatron backend has no value head, so it trains no critic"
# The prefixes name Hugging Face parameters (`model.embed_tokens.`); megatron-core names its modules otherwise.
MEGATRON_FROZEN = ("rlcfg freezes parameters by their Hugging Face names, which megatron-core's modules do not have, "
                   "so only its fsdp backend freezes them")
# Megatron-Bridge's LoRA targets, its `all-linear`: the fused query-key-value and gate-up projections, the attention
# output and the down projection (rlcfg.runtime.backends.megatron_lora adapts them).
MEGATRON_LORA_TARGETS = ("linear_qkv", "linear_proj", "linear_fc1", "linear_fc2")
MEGATRON_LORA_EXPERTS = ("the adapter pair that Megatron-Bridge gives the experts of an expert-parallel rank to share "
                         "is built whole on each rank by rlcfg, not split over expert tensor-parallel ranks")
# A checkpoint name that gives its active parameters is a mixture of experts: Qwen3-30B-A3B, Moonlight-16B-A3B.
_MOE_NAME = r"(?i)-a\d+(?:\.\d+)?b(?:$|[-_.])"
# PEFT's initialisations that start B at zero and leave the base weights as loaded.
LORA_INITS = ("kaiming", "gaussian")
MEGATRON_SUPERVISED = "rlcfg trains reward models (a scalar head on the model) on its fsdp backend only"
DEEPSPEED = "the deepspeed backend is not wired into `rlcfg run`, which trains with fsdp or megatron"
HF_ROLLOUT_PARALLEL = ("rlcfg's `hf` rollout backend runs one whole model per engine, so tensor and pipeline parallel "
                       "sizes need vLLM or SGLang")
TRAINING_BACKENDS = ("rlcfg runs the models it does not roll out with (trained or not) on its fsdp or megatron "
                     "backend only")
ROLLOUT_BACKENDS = "rlcfg rolls out with its hf, vllm or sglang backend only"
SGLANG_ACROSS_NODES = "rlcfg starts each SGLang engine on one node, so its GPUs (tp × pp) must fit in one"
REWARD_MODEL = "rlcfg scores responses with a rule-based reward and runs no reward model"
# Its extra draws would take prompts after the steps already started ahead, which a checkpoint could not record.
ASYNC_DYNAMIC_SAMPLING = ("rlcfg starts a step's rollouts ahead of the trainer one whole step at a time, and does not "
                          "draw again for a step whose groups a filter rejected")

# The hint of a parallel size the runtime does not run: the value that runs.
SIZE_THAT_RUNS = "set it to 1"

VISION_LANGUAGE = ("rlcfg trains and rolls out text models only, so the images of the data would be dropped and the "
                   "model trained as text")
_VL_PART = r"(?i)[-_]vl(?=[-_]|$)"
# Model types of vision-language checkpoints whose config.json has no `vision_config` of its own.
_VISION_LANGUAGE_TYPES = ("llava", "llava_next", "mllama", "paligemma", "idefics2", "idefics3", "pixtral",
                          "internvl_chat")
# A checkpoint's name that says vision-language: a `VL` part (Qwen2.5-VL-7B, InternVL3-8B, Kimi-VL), a `Vision` or
# `Omni` part (Llama-3.2-11B-Vision, Qwen3-Omni-30B-A3B), or a family that is only multimodal. OpenVLA-style action
# models do not match: the embodied pipelines that train them are refused as a whole.
# (Patterns, not compiled ones: `re` compiles them on first use, and `validate` starts without the cost.)
_VISION_LANGUAGE_NAME = (r"(?i)(?:^|[-_.])(?:[a-z]*vl\d*|vision|omni|llava|paligemma|idefics\d*|pixtral)"
                         r"(?=$|[-_.\d])")


def ulysses_heads_problem(heads: int | None, kv_heads: int | None, sliding_window: bool, size: int) -> str | None:
    """Why Ulysses over `size` ranks cannot split a model's attention (its attention and key/value head counts,
    and whether it attends through a sliding window), or None when it can. Each rank takes heads / size attention
    heads; key/value heads are shared out the same way or, when there are fewer than `size`, repeated whole."""
    if heads is None:
        return "the model names no attention head count, so rlcfg cannot split its heads over the Ulysses ranks"
    if heads % size:
        return (f"the model has {heads} attention heads, which {size} Ulysses ranks cannot share; choose a size "
                f"that divides {heads}")
    kv_heads = kv_heads or heads
    if kv_heads % size and size % kv_heads:
        return (f"the model has {kv_heads} key/value heads, which {size} Ulysses ranks can neither share nor each "
                f"repeat whole; choose a size that divides, or is a multiple of, {kv_heads}")
    if sliding_window:
        return "the model attends through a sliding window, which rlcfg's Ulysses attention does not apply; set the size to 1"
    return None


def attends_through_window(config: Mapping[str, Any]) -> bool:
    """Whether a model's config.json has it attend through a sliding window: a window size, and no
    `use_sliding_window: false` beside it (Qwen2 keeps a size it does not use)."""
    return bool(config.get("sliding_window")) and bool(config.get("use_sliding_window", True))


def local_model_config(path: object) -> dict | None:
    """The config.json of a local model folder, or None when `path` is no local folder with a readable one (a hub
    name: the workers read it)."""
    if not isinstance(path, str) or not path.strip():
        return None
    import json

    try:
        with open(os.path.join(os.path.expanduser(path), "config.json"), encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def routed_experts(config: dict) -> int:
    """A config.json's routed experts per layer (0: a dense model), under the names the MoE families give them."""
    return int(config.get("num_experts") or config.get("num_local_experts") or config.get("n_routed_experts") or 0)


def mixture_of_experts(path: object) -> str | None:
    """Why the model at `path` is a mixture of experts (its config.json's routed experts, or its name when it is not
    a local folder), or None when it is dense or nothing here tells."""
    if not isinstance(path, str) or not path.strip():
        return None
    config = local_model_config(path)
    if config is not None:
        experts = routed_experts(config)
        return f"its config.json names {experts} experts per layer" if experts else None
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return "its name gives its active parameters, as a mixture of experts' does" if re.search(_MOE_NAME, name) else None


def megatron_lora_problems(*, dropout: float, target_modules: object, exclude_modules: object, init: str,
                           experts: str | None, expert_tp: int = 1) -> list[tuple[str, object, str, str]]:
    """(the Experiment's key, its value, why, hint) for each LoRA setting rlcfg's Megatron backend cannot train as
    Megatron-Bridge's LoRA does; `experts` says why the model is a mixture of experts (None: a dense one), whose
    experts split over `expert_tp` tensor-parallel ranks."""
    out: list[tuple[str, object, str, str]] = []
    if experts and expert_tp > 1:
        out.append(("parallelism.etp", expert_tp, f"the model is a mixture of experts ({experts}) with an expert "
                                                  f"tensor parallel size of {expert_tp}; {MEGATRON_LORA_EXPERTS}",
                    "set the expert tensor parallel size to 1"))
    if dropout:
        out.append(("lora.dropout", dropout, "rlcfg's Megatron adapters apply no dropout", "set it to 0"))
    names = target_modules if isinstance(target_modules, (list, tuple)) else None
    if target_modules != "all-linear" and (names is None or not names
                                           or any(n not in MEGATRON_LORA_TARGETS for n in names)):
        out.append(("lora.target_modules", target_modules,
                    f"Megatron-Bridge's LoRA adapts megatron-core's modules by name: "
                    f"{', '.join(MEGATRON_LORA_TARGETS)} (rlcfg reads no wildcard or Hugging Face name there)",
                    "set it to all-linear or to a list of those names"))
    if exclude_modules:
        out.append(("lora.exclude_modules", exclude_modules,
                    "Megatron-Bridge's LoRA excludes modules only when it is given no target modules, and it is "
                    "always given some (all-linear names them)", "leave it empty"))
    if init != "kaiming":
        out.append(("lora.init", init, "rlcfg draws a Megatron adapter's A as Megatron-Bridge's kaiming init does, "
                                       "and no other way", "set it to kaiming"))
    return out


def megatron_unbuilt(path: object, corrections_mapped: bool = False) -> str | None:
    """Why rlcfg's Megatron backend cannot build the model at `path` for this framework (from its config.json's
    model_type, or its name when it is not a local folder), or None when it can or nothing here tells.
    `corrections_mapped`: the framework's treatment of DeepSeek-V3's routing correction is read
    (ROUTING_CORRECTION)."""
    if not isinstance(path, str) or not path.strip():
        return None
    config = local_model_config(path)
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if config is not None:
        what = f"its config.json has model_type {config.get('model_type', '')!r}"
        if config.get("model_type") not in MEGATRON_FAMILIES:
            return f"{what}: {MEGATRON_FAMILY}"
    else:
        found = re.search(_UNBUILT_FAMILY_NAME, name)
        if found:
            return f"its name says it is a {found.group(1)} model: {MEGATRON_FAMILY}"
        found = re.search(_ROUTING_CORRECTION_NAME, name)
        what = f"its name says it is a {found.group(1)} model (deepseek_v3)" if found else ""
    if not corrections_mapped and _corrected_routing(config, name):
        return f"{what}: {ROUTING_CORRECTION}"
    return None


def routing_correction_family(path: object) -> bool:
    """Whether the model at `path` routes with DeepSeek-V3's per-expert correction (its config.json's model_type,
    or its name when it is not a local folder)."""
    if not isinstance(path, str) or not path.strip():
        return False
    return _corrected_routing(local_model_config(path), path.rstrip("/").rsplit("/", 1)[-1])


def _corrected_routing(config: dict | None, name: str) -> bool:
    if config is not None:
        return config.get("model_type") in ROUTING_CORRECTION_FAMILIES
    return re.search(_ROUTING_CORRECTION_NAME, name) is not None


def megatron_unbuilt_models(models: Iterable[tuple[str, object]], corrections_mapped: bool = False
                            ) -> Iterator[tuple[str, str, str]]:
    """(key, path, why) for each (key, path) of a Megatron-trained model that megatron_unbuilt names, each path once."""
    seen = set()
    for key, path in models:
        if path in seen:
            continue
        seen.add(path)
        why = megatron_unbuilt(path, corrections_mapped)
        if why:
            yield key, str(path), why


def vision_language(path: object) -> str | None:
    """Why the checkpoint at `path` is a vision-language model, or None: its config.json where the path is a local
    folder (a `vision_config`, or the model type of one), else its name."""
    if not isinstance(path, str) or not path.strip():
        return None
    config = os.path.join(os.path.expanduser(path), "config.json")
    if os.path.isfile(config):
        import json

        try:
            with open(config, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, UnicodeDecodeError, ValueError):
            data = None
        if isinstance(data, dict):
            kind = str(data.get("model_type", ""))
            if "vision_config" in data or kind.endswith("_vl") or "_vl_" in kind or kind in _VISION_LANGUAGE_TYPES:
                return f"its config.json has model_type {kind!r}" + (" and a vision_config" if "vision_config" in
                                                                      data else "")
            return None
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return "its name says so" if re.search(_VISION_LANGUAGE_NAME, name) else None


def vision_language_models(keys: Iterable[tuple[str, object]]) -> Iterator[tuple[str, object, str]]:
    """(key, model path, why) for each of the (dotted key, model path) pairs that names a vision-language model; a
    path several keys share is told at the first of them."""
    seen: set[str] = set()
    for key, path in keys:
        why = vision_language(path)
        if why is not None and path not in seen:
            seen.add(str(path))
            yield key, path, why


def vision_language_hint(key: str, path: object) -> str:
    """Point `key` at a text model: where the checkpoint's name has a `VL` part, its text sibling (Qwen2.5-VL-7B →
    Qwen2.5-7B), which `--smoke` then stands in for like any model."""
    hint = "point it at a text model; vision-language models are not run yet"
    head, _, name = str(path).rstrip("/").rpartition("/")
    text = re.sub(_VL_PART, "", name, count=1)
    if text == name or os.path.isdir(os.path.expanduser(str(path))):
        return hint
    return f"{hint} (its text sibling: `{key}: {head + '/' if head else ''}{text}`)"


# megatron-core's MoE router settings a framework's Megatron config can write, by megatron-core's names.
MOE_ROUTER_KEYS = ("moe_router_load_balancing_type", "moe_aux_loss_coeff", "moe_z_loss_coeff",
                   "moe_router_enable_expert_bias", "moe_router_topk_scaling_factor", "moe_router_pre_softmax",
                   "moe_router_num_groups", "moe_router_group_topk", "moe_input_jitter_eps",
                   "moe_expert_capacity_factor", "moe_shared_expert_intermediate_size", "moe_router_score_function")


def moe_routing_changes(value_of: Callable[[str], object]) -> Iterator[tuple[str, object]]:
    """The router settings (MOE_ROUTER_KEYS; `value_of(name)`, None for one not written: its default) that would
    compute something other than MOE_ROUTING, as (name, value). An auxiliary loss runs only with a load-balancing
    type that has one and a coefficient above 0 (megatron-core's router checks both)."""
    values = {name: value_of(name) for name in MOE_ROUTER_KEYS}
    if values["moe_router_load_balancing_type"] in _AUX_LOSSES and values["moe_aux_loss_coeff"]:
        yield "moe_aux_loss_coeff", values["moe_aux_loss_coeff"]
    for name in MOE_ROUTER_KEYS[2:-1]:
        if values[name]:
            yield name, values[name]
    if values["moe_router_score_function"] not in (None, "softmax"):
        yield "moe_router_score_function", values["moe_router_score_function"]
