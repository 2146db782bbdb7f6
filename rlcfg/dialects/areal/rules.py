"""AReaL's cross-field rules (AR-* in research/validation-rules.md, section 5) and the allocation checks.

Each rule reads the validated config (see models.py) and yields findings. Rules that AReaL only
enforces in 1.0 are errors when they concern keys that only exist in 1.0 (a seed-documented config cannot
trip them) and warnings otherwise (DESIGN rule 5).
"""

from __future__ import annotations

from typing import Any, Iterator

from rlcfg import run_limits
from rlcfg.diagnostics import Severity
from rlcfg.dialects.areal import allocation as alloc
from rlcfg.dialects.areal.derived import (backend_key, backend_paths, engine_roles, layout, legacy_backend_name,
                                          parsed_allocation, parsed_backend, pipeline_kind, placement, trained_engine,
                                          training_engines)
from rlcfg.dialects.areal.entries import (BOBA_PROMPT_TOKENS, BOBA_SCRIPTS, BUILT_ENGINES, COUNTDOWN,
                                         COUNTDOWN_EVALUATED, COUNTDOWN_SCRIPTS, GSM8K_MATH_PARSER_LORA,
                                         GSM8K_RLVR_SCRIPT, GSM8K_SCRIPTS)
from rlcfg.dialects.areal.models import BEFORE_1_0, SECTIONS_ALWAYS_BUILT
from rlcfg.schema.base import Finding, RuleSet

RULES = RuleSet()


# ---- names -------------------------------------------------------------------------------------------------


@RULES.rule("areal/names", "RLC307", "A `/` in experiment_name or trial_name nests the log, checkpoint and "
            "name-resolve folders one level deeper. AReaL's docs also ask for no `_` in experiment_name and no `-` "
            "in trial_name, but nothing in AReaL checks or relies on that (its own examples break it), so rlcfg "
            "does not either.", keys=["experiment_name", "trial_name"])
def _names(cfg, ctx):
    for key in ("experiment_name", "trial_name"):
        value = getattr(cfg, key, None)
        if isinstance(value, str) and "/" in value:
            yield ctx.warning("RLC307", key, f"`{key}` ({value!r}) contains `/`, so AReaL's log, checkpoint and "
                              f"name-resolve folders for it are nested one level deeper than the others",
                              hint=f"AReaL accepts it; write `{key}: {value.replace('/', '-')}` for flat folders")


# ---- allocation ----------------------------------------------------------------------------------------------


@RULES.rule("areal/allocation-syntax", "RLC204", "allocation_mode parses in one of the grammars AReaL has used "
            "(v0.3 `sglang.d4p1t1+d4p1t1`, v0.4 named/colocated components, training-only `d8p1t1`) and is "
            "well formed (unique names, equal colocated sizes, FSDP without p/e, e dividing the world).",
            keys=["allocation_mode"])
def _allocation_syntax(cfg, ctx):
    if not cfg.allocation_mode:
        return
    try:
        parsed = alloc.parse(cfg.allocation_mode)
    except alloc.AllocationSyntaxError as exc:
        yield ctx.error("RLC204", "allocation_mode", f"`allocation_mode` ({cfg.allocation_mode!r}): {exc.message}",
                        hint=exc.hint)
        return
    for problem in alloc.check(parsed):
        yield ctx.error(problem.code, "allocation_mode",
                        f"`allocation_mode` ({cfg.allocation_mode!r}): {problem.message}", hint=problem.hint)


@RULES.rule("areal/backend-syntax", "RLC204", "Each per-engine `backend` (AReaL 1.0) is one component with an "
            "explicit backend of the right kind: fsdp/megatron/archon for training engines, sglang/vllm for "
            "rollout.", keys=["actor.backend", "ref.backend", "critic.backend", "rollout.backend", "model.backend"])
def _backend_syntax(cfg, ctx):
    for path, text, role in backend_paths(cfg):
        try:
            component = alloc.parse_backend(text)
        except alloc.AllocationSyntaxError as exc:
            yield ctx.error("RLC204", path, f"`{path}` ({text!r}): {exc.message}", hint=exc.hint)
            continue
        if component.kind != role:
            wanted = "fsdp, megatron or archon" if role == "train" else "sglang or vllm"
            yield ctx.error("RLC204", path, f"`{path}` ({text!r}) names the {component.kind} backend "
                            f"`{component.backend}`, but this engine needs {wanted}",
                            hint=alloc.BACKEND_FORMS)
            continue
        for problem in alloc.check_component(component):
            yield ctx.error(problem.code, path, f"`{path}` ({text!r}): {problem.message}", hint=problem.hint)


@RULES.rule("areal/backend-required", "RLC203", "In AReaL 1.0 each engine section's `backend` is mandatory (`???`): "
            "actor, rollout, and ref/critic/teacher when present; the loader stops without it.",
            keys=["actor.backend", "rollout.backend", "ref.backend", "critic.backend", "teacher.backend"])
def _backend_required(cfg, ctx):
    if ctx.release != "1.0":
        return
    names = [name for name, _engine in training_engines(cfg)]
    if pipeline_kind(cfg) == "grpo":
        names.append("rollout")
        if cfg.teacher is not None:
            names.append("teacher")
    for name in names:
        engine = getattr(cfg, name, None)
        if engine is not None and not engine.backend:
            example = "sglang:d4p1t1" if name == "rollout" else "fsdp:d4p1t1"
            yield ctx.error("RLC203", f"{name}.backend", f"`{name}.backend` is mandatory in AReaL 1.0 (its loader "
                            f"stops with MissingMandatoryValue), and it is not set",
                            hint=f"write the backend and its parallel sizes, e.g. `backend: {example}`"
                                 + (" (or `${actor.backend}`)" if name in ("ref", "critic", "teacher") else ""))


@RULES.rule("areal/allocation-cluster", "RLC403", "The GPUs the allocation asks for fit the cluster "
            "(n_nodes × n_gpus_per_node), fill it, and no inference server spans more than one node.",
            keys=["allocation_mode", "actor.backend", "rollout.backend", "cluster.n_nodes",
                  "cluster.n_gpus_per_node"], also=("RLC404",))
def _allocation_cluster(cfg, ctx):
    if not (ctx.is_set("cluster.n_nodes") or ctx.is_set("cluster.n_gpus_per_node")):
        return  # the seed's default cluster (32 × 8) describes no real machine; only a written one is checked
    where = placement(cfg)
    if where is None:
        return
    nodes, per_node = cfg.cluster.n_nodes, cfg.cluster.n_gpus_per_node
    if per_node == 0:
        return  # a CPU-only cluster (AReaL's CPU example): the d/t/p sizes count processes, not GPUs
    total = nodes * per_node
    related = ["cluster.n_nodes", "cluster.n_gpus_per_node"]
    if where.source == "allocation_mode":
        path, asked, plural = "allocation_mode", f"`allocation_mode` ({cfg.allocation_mode!r})", False
    else:
        # At the engine that takes the most GPUs (the user's change, as a rule), each engine's share named.
        path = max(where.shares, key=lambda share: share[2])[0] if where.shares else (
            "rollout.backend" if pipeline_kind(cfg) == "grpo" and cfg.rollout.backend
            else f"{trained_engine(cfg)[0]}.backend")
        related = [*(p for p, _text, _n in where.shares if p != path), *related]
        asked = "the engines' `backend` fields (" + " + ".join(
            f"`{p}` {text!r} {n}" for p, text, n in where.shares) + ")"
        plural = True
    asks, uses = ("ask", "use") if plural else ("asks", "uses")
    if where.world > total and where.source == "backends" and cfg.scheduler.type is not None:
        # AReaL 1.0's single controller hands GPUs out round-robin from the devices it finds, so engines then
        # share GPUs instead of failing.
        yield ctx.warning("RLC403", path, f"{asked} {asks} for {where.world} GPUs but the cluster has {total} "
                          f"(cluster.n_nodes {nodes} × cluster.n_gpus_per_node {per_node}); AReaL's "
                          f"`scheduler.type: {cfg.scheduler.type}` then puts several engines on one GPU",
                          hint=f"shrink the d/t/p sizes to {total} GPUs in all unless the engines fit together",
                          related=related)
    elif where.world > total:
        yield ctx.error("RLC403", path, f"{asked} {asks} for {where.world} GPUs but the cluster has {total} "
                        f"(cluster.n_nodes {nodes} × cluster.n_gpus_per_node {per_node}); AReaL accepts this at "
                        f"load but fails when the launcher places the job (its ray and slurm launchers refuse it "
                        f"at start)",
                        hint=f"shrink the d/t/p sizes to {total} GPUs in all, or give the cluster more nodes "
                             f"(n_nodes: {-(-where.world // per_node)})", related=related)
    elif where.world < total:
        yield ctx.warning("RLC404", path, f"{asked} {uses} {where.world} of the cluster's {total} GPUs "
                          f"(cluster.n_nodes {nodes} × cluster.n_gpus_per_node {per_node}); "
                          f"{total - where.world} stay idle",
                          hint=f"raise the data-parallel size d to use all {total} GPUs, or set the cluster to "
                               f"the GPUs the job uses (AReaL 1.0's launchers require them to be equal)",
                          related=related)
    for component in where.inference_parts:
        tp = component.dims.get("t") if component.dims else 1
        if tp > per_node:
            yield ctx.error("RLC403", path, f"`{component.text()}`: one {component.backend} server with tensor "
                            f"parallelism t{tp} would span more than one node of {per_node} GPUs",
                            hint=f"use t <= {per_node} and raise d instead", related=["cluster.n_gpus_per_node"])


@RULES.rule("areal/colocation-sizes", "RLC402", "An engine colocated with another (1.0 scheduling_strategy "
            "`colocation`) has the same number of GPUs as its target.",
            keys=["ref.scheduling_strategy", "rollout.scheduling_strategy", "critic.scheduling_strategy"],
            also=("RLC302",))
def _colocation_sizes(cfg, ctx):
    if pipeline_kind(cfg) != "grpo":
        return
    for owner in ("rollout", "ref", "critic"):
        engine = getattr(cfg, owner, None)
        if engine is None or engine.scheduling_strategy.type != "colocation":
            continue
        target_name = engine.scheduling_strategy.target
        target = getattr(cfg, target_name, None) if target_name in ("actor", "ref", "critic", "rollout") else None
        if target is None:
            yield ctx.error("RLC302", f"{owner}.scheduling_strategy.target",
                            f"`{owner}.scheduling_strategy` is `colocation` but its target "
                            f"{target_name!r} is not an engine of this config",
                            hint="set `target: actor` (or another engine section that exists)")
            continue
        mine, theirs = parsed_backend(engine.backend or ""), parsed_backend(target.backend or "")
        if mine is not None and theirs is not None and mine.world != theirs.world:
            yield ctx.error("RLC402", f"{owner}.backend",
                            f"`{owner}` is colocated with `{target_name}` but uses {mine.world} GPUs "
                            f"({engine.backend!r}) against {theirs.world} ({target.backend!r})",
                            hint=f"give both the same d·c·t·p product, e.g. {theirs.world}",
                            related=[f"{target_name}.backend"])


@RULES.rule("areal/allocation-present", "RLC302", "The experiment says where it runs: an allocation_mode (v0.3) "
            "or the engines' backend fields (1.0); a GRPO allocation has an inference part.",
            keys=["allocation_mode", "actor.backend", "rollout.backend"], also=("RLC307",))
def _allocation_present(cfg, ctx):
    parsed = parsed_allocation(cfg)
    if not cfg.allocation_mode and not backend_paths(cfg):
        example = "sglang.d4p1t1+d4p1t1" if pipeline_kind(cfg) == "grpo" else "d8p1t1"
        yield ctx.warning("RLC302", "allocation_mode", "neither `allocation_mode` nor any engine `backend` is "
                          "set, so AReaL cannot place the job (v0.3.4's scripts fail to parse the empty "
                          "allocation; 1.0 requires the backend fields)",
                          hint=f"write `allocation_mode: {example}` (v0.3) or the engines' backend fields "
                               f"(1.0), e.g. `actor.backend: fsdp:d4p1t1`")
        return
    if parsed is None or parsed.keyword:
        return
    if pipeline_kind(cfg) == "grpo" and not parsed.of_kind("inference") and not (cfg.rollout.backend):
        yield ctx.error("RLC302", "allocation_mode", f"`allocation_mode` ({cfg.allocation_mode!r}) has no "
                        "inference part, but GRPO generates its rollouts on SGLang or vLLM servers",
                        hint=f"put the servers first, e.g. `sglang.d4p1t1+{cfg.allocation_mode}`")
    if pipeline_kind(cfg) != "grpo" and parsed.of_kind("inference"):
        yield ctx.warning("RLC307", "allocation_mode", f"`allocation_mode` ({cfg.allocation_mode!r}) reserves "
                          f"GPUs for {parsed.of_kind('inference')[0].backend} servers, which an SFT or reward-model "
                          f"experiment never starts",
                          hint="give only the training part, e.g. "
                               f"`{'+'.join(c.text() for c in parsed.of_kind('train')) or 'd8p1t1'}`")


@RULES.rule("areal/allocation-vs-backends", "RLC305", "When both the deprecated allocation_mode and the 1.0 "
            "backend fields are set, they ask for the same GPUs.",
            keys=["allocation_mode", "actor.backend", "rollout.backend"])
def _allocation_vs_backends(cfg, ctx):
    parsed = parsed_allocation(cfg)
    if parsed is None or parsed.keyword or not backend_paths(cfg):
        return
    trained = trained_engine(cfg)
    pairs = []
    if pipeline_kind(cfg) == "grpo" and cfg.rollout.backend:
        pairs.append(("rollout.backend", cfg.rollout.backend, parsed.of_kind("inference")))
    if trained and trained[1].backend:
        pairs.append((f"{trained[0]}.backend", trained[1].backend, parsed.of_kind("train")))
    for path, text, parts in pairs:
        component = parsed_backend(text)
        if component is None or not parts:
            continue
        if component.world != parts[0].world:
            yield ctx.warning("RLC305", path, f"`{path}` ({text!r}) uses {component.world} GPUs but "
                              f"`allocation_mode` ({cfg.allocation_mode!r}) gives that part {parts[0].world}",
                              hint="AReaL 1.0 places engines by their backend fields and reads allocation_mode "
                                   "only in the SPMD launchers; drop allocation_mode or make them agree",
                              related=["allocation_mode"])


# ---- engines -----------------------------------------------------------------------------------------------


@RULES.rule("areal/sft-model", "RLC203", "An SFT or reward-model config has its model under `model` (v0.3) or "
            "`actor` (1.0), not both.", keys=["model", "actor"], also=("RLC301",))
def _sft_model(cfg, ctx):
    if pipeline_kind(cfg) == "grpo":
        return
    if cfg.model is None and cfg.actor is None:
        yield ctx.error("RLC203", "model", "the config has no `model` section (the model to train)",
                        hint="add `model:` with at least `experiment_name: ${experiment_name}`, "
                             "`trial_name: ${trial_name}` and `path:` (AReaL 1.0 calls the section `actor`)")
    elif cfg.model is not None and cfg.actor is not None:
        yield ctx.error("RLC301", "actor", "both `model` (v0.3) and `actor` (1.0) are set; they name the same "
                        "engine in different AReaL versions", hint="keep the one your AReaL version reads",
                        related=["model"])


@RULES.rule("areal/rw-critic", "RLC302", "Reward-model training needs a critic (scalar-head) model: "
            "is_critic true.", keys=["model.is_critic", "actor.is_critic", "train_dataset.type"])
def _rw_critic(cfg, ctx):
    if pipeline_kind(cfg) != "rw":
        return
    trained = trained_engine(cfg)
    if trained and not trained[1].is_critic:
        yield ctx.error("RLC302", f"{trained[0]}.is_critic", f"`train_dataset.type` is 'rw' (reward modelling) but "
                        f"`{trained[0]}.is_critic` is false", hint=f"set `{trained[0]}.is_critic: true`",
                        related=["train_dataset.type"])


@RULES.rule("areal/norm-group-size", "RLC201", "Group-level normalization needs group_size >= 1, and "
            "should group as many samples as gconfig.n_samples.",
            keys=["actor.reward_norm.group_size", "actor.adv_norm.group_size", "gconfig.n_samples"], also=("RLC305",))
def _norm_group_size(cfg, ctx):
    if pipeline_kind(cfg) != "grpo":
        return
    for name in ("reward_norm", "adv_norm"):
        norm = getattr(cfg.actor, name)
        if norm is None or "group" not in (norm.mean_level, norm.std_level):
            continue
        path = f"actor.{name}.group_size"
        if norm.group_size < 1:
            late = (f"; AReaL {ctx.release} accepts this at load but fails when the trainer takes its first batch"
                    if ctx.release in BEFORE_1_0 else "")
            yield ctx.error("RLC201", path, f"`{path}` is {norm.group_size} but group-level normalization needs "
                            f">= 1{late}", hint="set it to `${gconfig.n_samples}`")
        elif norm.group_size != cfg.gconfig.n_samples:
            yield ctx.warning("RLC305", path, f"`{path}` ({norm.group_size}) differs from `gconfig.n_samples` "
                              f"({cfg.gconfig.n_samples}), so the normalization groups do not match the GRPO "
                              f"groups", hint="write `group_size: ${gconfig.n_samples}`",
                              related=["gconfig.n_samples"])


@RULES.rule("areal/entry-script", "RLC124", "AReaL's reward function, dataset loader and workflow are in the entry "
            "script a launch runs the config with; a config file alone names none, so `rlcfg run` scores and "
            "prompts an RL config as examples/math/gsm8k_rl.py (0.5, 1.0) does, and says so. That script evaluates "
            "with gconfig at temperature 0.6, so an eval_gconfig it launches with has no effect; the boba script "
            "reads neither valid_dataset, eval_gconfig nor train_dataset.max_length; the countdown script reads "
            "neither eval_gconfig nor a max_length, nor from 0.5 valid_dataset.",
            keys=["eval_gconfig", "valid_dataset", "train_dataset.max_length", "valid_dataset.max_length"],
            also=("RLC307",))
def _entry_script(cfg, ctx):
    if pipeline_kind(cfg) != "grpo":
        return
    if ctx.entry_runs in GSM8K_SCRIPTS and cfg.eval_gconfig is not None and ctx.is_set("eval_gconfig"):
        yield ctx.warning("RLC307", "eval_gconfig", "`eval_gconfig` has no effect: AReaL's GSM8K RL scripts evaluate "
                          "with a copy of gconfig at temperature 0.6 and do not read it",
                          hint="set what evaluation should sample with in gconfig, or remove eval_gconfig")
    if ctx.entry_runs in BOBA_SCRIPTS:
        yield from _unread(ctx, [("valid_dataset", cfg.valid_dataset),
                                 ("eval_gconfig", getattr(cfg, "eval_gconfig", None)),
                                 ("train_dataset.max_length", cfg.train_dataset.max_length)],
                           "boba script (examples/math/boba_grpo.py)",
                           f"evaluates nothing and keeps the prompts of at most {BOBA_PROMPT_TOKENS} tokens as written")
    if ctx.entry_runs in COUNTDOWN_SCRIPTS:
        yield from _countdown_unread(cfg, ctx)
    if ctx.entry_runs is not None:
        return
    yield ctx.note("RLC124", "", "AReaL's reward function, dataset loader and workflow are in the entry script a "
                   "launch runs this config with, which a config file alone does not name: `rlcfg run` scores each "
                   f"response as {GSM8K_RLVR_SCRIPT} of AReaL 0.5 and 1.0 does (math-verify) and renders its prompts "
                   "as that script does", hint="to have rlcfg judge the script you launch, give it the launch "
                                               "(`rlcfg validate -- python -m areal.launcher.local SCRIPT.py --config "
                                               "FILE`) or the shell script that runs it")


def _countdown_unread(cfg: Any, ctx: Any) -> Iterator[Finding]:
    """The keys examples/countdown/train.py does not read: it evaluates at temperature 1.0 (0.3, 0.4) or not at all
    (0.5, 1.0), and keeps every prompt."""
    unread = [("eval_gconfig", getattr(cfg, "eval_gconfig", None)),
              ("train_dataset.max_length", cfg.train_dataset.max_length)]
    if ctx.entry_runs == COUNTDOWN:
        unread.append(("valid_dataset", cfg.valid_dataset))
    elif cfg.valid_dataset is not None:
        unread.append(("valid_dataset.max_length", cfg.valid_dataset.max_length))
    evaluates = ("evaluates the validation set with gconfig at temperature 1.0" if ctx.entry_runs == COUNTDOWN_EVALUATED
                 else "evaluates nothing")
    yield from _unread(ctx, unread, "countdown script (examples/countdown/train.py)",
                       f"{evaluates} and keeps every prompt")


def _unread(ctx: Any, keys: list[tuple[str, Any]], script: str, does: str) -> Iterator[Finding]:
    """RLC307 for each of `keys` (key, value) the config sets that the launch's entry `script` does not read."""
    for key, value in keys:
        if value is not None and ctx.is_set(key):
            yield ctx.warning("RLC307", key, f"`{key}` has no effect: AReaL's {script} does not read it; it {does}",
                              hint=f"remove `{key}`")


@RULES.rule("areal/group-size", "RLC305", "The v0.3 actor.group_size equals gconfig.n_samples (the examples "
            "interpolate it); otherwise advantages are grouped wrongly.", keys=["actor.group_size", "gconfig.n_samples"])
def _group_size(cfg, ctx):
    if pipeline_kind(cfg) != "grpo" or not ctx.is_set("actor.group_size"):
        return
    if cfg.actor.group_size != cfg.gconfig.n_samples:
        yield ctx.error("RLC305", "actor.group_size", f"`actor.group_size` ({cfg.actor.group_size}) differs from "
                        f"`gconfig.n_samples` ({cfg.gconfig.n_samples}): AReaL v0.3 groups the advantages by "
                        f"group_size while each prompt gets n_samples answers",
                        hint="write `group_size: ${gconfig.n_samples}`", related=["gconfig.n_samples"])


@RULES.rule("areal/temperature", "RLC305", "actor.temperature (used for the trainer's log-probabilities) equals "
            "gconfig.temperature (used for sampling).", keys=["actor.temperature", "gconfig.temperature"])
def _temperature(cfg, ctx):
    if pipeline_kind(cfg) != "grpo" or not ctx.is_set("gconfig.temperature"):
        return
    if cfg.actor.temperature != cfg.gconfig.temperature:
        yield ctx.warning("RLC305", "actor.temperature", f"`actor.temperature` ({cfg.actor.temperature}) differs "
                          f"from `gconfig.temperature` ({cfg.gconfig.temperature}): the trainer's "
                          f"log-probabilities are then computed at another temperature than the one sampled at",
                          hint="write `temperature: ${gconfig.temperature}` under actor",
                          related=["gconfig.temperature"])


@RULES.rule("areal/fsdp-memory-efficient-load", "RLC301", "fsdp.memory_efficient_load loads pretrained weights, "
            "so it excludes init_from_scratch.", keys=["actor.fsdp.memory_efficient_load"])
def _memory_efficient_load(cfg, ctx):
    for name, engine in training_engines(cfg):
        if engine.fsdp.memory_efficient_load and engine.init_from_scratch:
            yield ctx.error("RLC301", f"{name}.fsdp.memory_efficient_load",
                            f"`{name}.fsdp.memory_efficient_load` and `{name}.init_from_scratch` are both true",
                            hint="memory_efficient_load broadcasts loaded weights; turn one of them off",
                            related=[f"{name}.init_from_scratch"])


@RULES.rule("areal/scheduling-spec", "RLC201", "An engine takes one or two scheduling specs, and "
            "a non-blank admin_api_key.", keys=["actor.scheduling_spec", "rollout.scheduling_spec"])
def _scheduling_spec(cfg, ctx):
    engines = list(training_engines(cfg))
    if pipeline_kind(cfg) == "grpo":
        engines.append(("rollout", cfg.rollout))
    for name, engine in engines:
        if len(engine.scheduling_spec) > 2:
            yield ctx.error("RLC201", f"{name}.scheduling_spec", f"`{name}.scheduling_spec` has "
                            f"{len(engine.scheduling_spec)} entries; AReaL takes 1 (worker and engine in one "
                            f"process) or 2 (worker, then engine)", hint="keep one or two entries")
        if not engine.admin_api_key.strip():
            yield ctx.error("RLC201", f"{name}.admin_api_key", f"`{name}.admin_api_key` is blank",
                            hint="leave the default `areal-admin-key` or set a real key")


@RULES.rule("areal/archon", "RLC306", "Archon FP8 needs use_triton; Archon's memory_budget "
            "checkpointing needs enable_compile.", keys=["actor.archon.fp8_config.use_triton", "actor.archon.ac_mode"],
            also=("RLC302",))
def _archon(cfg, ctx):
    for name, engine in training_engines(cfg):
        fp8 = engine.archon.fp8_config
        if fp8.mode != "disabled" and not fp8.use_triton:
            yield ctx.error("RLC306", f"{name}.archon.fp8_config.use_triton", f"`{name}.archon.fp8_config.mode` is "
                            f"{fp8.mode!r} but use_triton is false; blockwise FP8 only runs on the Triton kernel",
                            hint="set `use_triton: true`", related=[f"{name}.archon.fp8_config.mode"])
        if engine.archon.ac_mode == "memory_budget" and not engine.archon.enable_compile:
            yield ctx.error("RLC302", f"{name}.archon.ac_mode", f"`{name}.archon.ac_mode` is 'memory_budget', which "
                            f"needs `{name}.archon.enable_compile: true`", hint="enable compile or pick `selective`",
                            related=[f"{name}.archon.enable_compile"])


@RULES.rule("areal/megatron", "RLC302", "Megatron settings: bridge_type is mbridge or megatron-bridge; virtual "
            "pipeline parallelism needs p > 1; the Megatron engine takes optimizer adam or sgd.",
            keys=["actor.megatron", "actor.backend", "actor.optimizer.type"], also=("RLC202", "RLC306"))
def _megatron(cfg, ctx):
    for name, engine in training_engines(cfg):
        megatron = engine.megatron
        bridge = getattr(megatron, "bridge_type", None)
        if bridge is not None and bridge not in ("mbridge", "megatron-bridge"):
            yield ctx.error("RLC202", f"{name}.megatron.bridge_type", f"`{name}.megatron.bridge_type`: {bridge!r} "
                            "is not one of mbridge, megatron-bridge", hint="use `mbridge` or `megatron-bridge`")
        component = parsed_backend(engine.backend) if engine.backend else None
        if component is None and name in ("actor", "model"):
            parsed = parsed_allocation(cfg)
            trains = parsed.of_kind("train") if parsed and not parsed.keyword else []
            component = trains[0] if trains else None
        if component is None or component.effective_backend != "megatron":
            continue
        vpp = getattr(megatron, "virtual_pipeline_parallel_size", 1)
        pp = component.hybrid[0].get("p") if component.hybrid else component.dims.get("p")
        if isinstance(vpp, int) and vpp > 1 and pp <= 1:
            yield ctx.error("RLC302", f"{name}.megatron.virtual_pipeline_parallel_size",
                            f"`{name}.megatron.virtual_pipeline_parallel_size` is {vpp} but the pipeline size is "
                            f"{pp}; virtual pipeline stages need p > 1", hint="set p > 1 or leave vpp at 1")
        if engine.optimizer is not None and engine.optimizer.type not in ("adam", "sgd"):
            yield ctx.warning("RLC306", f"{name}.optimizer.type", f"`{name}.optimizer.type` is "
                              f"{engine.optimizer.type!r}, which AReaL's Megatron engine does not build (it takes "
                              f"adam or sgd)", hint="use `adam`")


# ---- PPO actor ---------------------------------------------------------------------------------------------


def _actor_paths(cfg: Any) -> Iterator[tuple[str, Any]]:
    if pipeline_kind(cfg) != "grpo":
        return
    yield "actor", cfg.actor
    if cfg.ref is not None:
        yield "ref", cfg.ref


@RULES.rule("areal/c-clip", "RLC201", "The dual-clip factor c_clip is > 1 when set (AReaL checks it only "
            "inside the loss).", keys=["actor.c_clip"])
def _c_clip(cfg, ctx):
    for name, actor in _actor_paths(cfg):
        if actor.c_clip is not None and actor.c_clip <= 1.0:
            yield ctx.error("RLC201", f"{name}.c_clip", f"`{name}.c_clip` must be > 1, got {actor.c_clip}",
                            hint="dual clipping caps the loss of negative-advantage tokens at c_clip times the "
                                 "advantage, which needs c_clip > 1; use e.g. 3.0, or null to disable it")


@RULES.rule("areal/behav-imp-weight-cap", "RLC307", "behav_imp_weight_cap is > 1, and acts only with use_decoupled_loss "
            "(AReaL's docs say it needs it; its loader accepts it without, and the loss then never reads it).",
            keys=["actor.behav_imp_weight_cap", "actor.use_decoupled_loss"], also=("RLC201",))
def _behav_cap(cfg, ctx):
    for name, actor in _actor_paths(cfg):
        cap = actor.behav_imp_weight_cap
        if cap is None:
            continue
        if cap <= 1.0:
            yield ctx.error("RLC201", f"{name}.behav_imp_weight_cap", f"`{name}.behav_imp_weight_cap` must be > 1, "
                            f"got {cap}", hint="a cap of 5.0 is AReaL's usual value")
        if not actor.use_decoupled_loss:
            yield ctx.warning("RLC307", f"{name}.behav_imp_weight_cap", f"`{name}.behav_imp_weight_cap` ({cap}) has no "
                              f"effect because `{name}.use_decoupled_loss` is false: AReaL applies the cap only in "
                              f"its decoupled loss", hint="enable the decoupled loss, or remove the cap",
                              related=[f"{name}.use_decoupled_loss"])


@RULES.rule("areal/legacy-imp-weight", "RLC113", "behave_imp_weight_cap/behave_imp_weight_mode (AReaL v1.0.0.post1 to "
            "v1.0.3) exist in no claimed release: AReaL 1.0.4 stops at load and asks for rejection_sampling; "
            "0.3 to 0.5 reject them as unknown keys (they spell the cap behav_imp_weight_cap).",
            keys=["actor.behave_imp_weight_cap", "actor.behave_imp_weight_mode"])
def _legacy_imp_weight(cfg, ctx):
    for name, actor in _actor_paths(cfg):
        for key in ("behave_imp_weight_cap", "behave_imp_weight_mode"):
            if not ctx.is_set(f"{name}.{key}"):
                continue
            if ctx.release != "1.0":
                yield ctx.error("RLC113", f"{name}.{key}", f"`{name}.{key}` does not exist in AReaL {ctx.release} (its "
                                f"loader stops on it); it is a key of AReaL v1.0.0.post1 to v1.0.3",
                                hint=f"AReaL {ctx.release} spells the cap `{name}.behav_imp_weight_cap` (with "
                                     f"use_decoupled_loss: true) and has no mode")
                continue
            action = "clamp" if (actor.behave_imp_weight_mode or "").endswith("truncate") else "mask"
            upper = actor.behave_imp_weight_cap if actor.behave_imp_weight_cap is not None else 5.0
            yield ctx.error("RLC113", f"{name}.{key}", f"`{name}.{key}` was removed in AReaL 1.0.4, which stops "
                            f"at load when it is present",
                            hint=f"write `rejection_sampling: {{level: token, action: {action}, metric: ratio, "
                                 f"upper: {upper}}}` (or `rejection_sampling: null` for mode 'disabled') and enable "
                                 f"use_decoupled_loss")


@RULES.rule("areal/rejection-sampling", "RLC201", "rejection_sampling bounds are consistent: lower <= upper, a "
            "ratio needs upper > 1 and lower > 0, k2/k3 need upper > 0, clamp needs the ratio metric; "
            "it only acts with use_decoupled_loss.", keys=["actor.rejection_sampling"], also=("RLC306", "RLC307"))
def _rejection_sampling(cfg, ctx):
    for name, actor in _actor_paths(cfg):
        rs = actor.rejection_sampling
        base = f"{name}.rejection_sampling"
        if rs is None:
            if actor.use_decoupled_loss and ctx.release == "1.0":
                yield ctx.warning("RLC307", f"{name}.use_decoupled_loss", f"`{name}.use_decoupled_loss` is true "
                                  f"without `{base}`, so AReaL 1.0 filters no stale samples (older versions "
                                  f"capped the importance weight at 5.0 by default)",
                                  hint=f"add `rejection_sampling: {{level: token, action: mask, metric: ratio, "
                                       f"upper: 5.0}}` under {name} to keep the old behaviour")
            continue
        if not actor.use_decoupled_loss:
            yield ctx.warning("RLC307", base, f"`{base}` has no effect because `{name}.use_decoupled_loss` is false",
                              hint=f"set `{name}.use_decoupled_loss: true` or remove the section",
                              related=[f"{name}.use_decoupled_loss"])
        if rs.lower is not None and rs.lower > rs.upper:
            yield ctx.error("RLC201", f"{base}.lower", f"`{base}.lower` ({rs.lower}) is above `{base}.upper` "
                            f"({rs.upper})", hint="swap them", related=[f"{base}.upper"])
        if rs.metric == "ratio":
            if rs.upper <= 1.0:
                yield ctx.error("RLC201", f"{base}.upper", f"`{base}.upper` must be > 1 for the ratio metric, got "
                                f"{rs.upper}", hint="typical values are 2.0 or 5.0")
            if rs.lower is not None and rs.lower <= 0:
                yield ctx.error("RLC201", f"{base}.lower", f"`{base}.lower` must be > 0 for the ratio metric, got "
                                f"{rs.lower}", hint="a typical value is 0.5")
        if rs.metric in ("kl_k2", "kl_k3") and rs.upper <= 0:
            yield ctx.error("RLC201", f"{base}.upper", f"`{base}.upper` must be > 0 for {rs.metric}, got {rs.upper}",
                            hint="typical values are 0.5 to 2.0")
        if rs.action == "clamp" and rs.metric != "ratio":
            yield ctx.error("RLC306", f"{base}.action", f"`{base}.action` 'clamp' bounds the importance ratio and "
                            f"needs `metric: ratio`, got {rs.metric!r}", hint="use `action: mask` with KL metrics",
                            related=[f"{base}.metric"])
        if rs.level == "token" and ctx.is_set(f"{base}.agg") and rs.agg != "mean":
            yield ctx.warning("RLC307", f"{base}.agg", f"`{base}.agg` ({rs.agg!r}) is only used at sequence level; "
                              f"`level` is 'token'", hint="remove agg or set `level: sequence`")


@RULES.rule("areal/sapo", "RLC301", "SAPO needs positive temperatures and excludes the decoupled loss.",
            keys=["actor.use_sapo_loss", "actor.sapo_tau_pos", "actor.sapo_tau_neg", "actor.use_decoupled_loss"],
            also=("RLC201",))
def _sapo(cfg, ctx):
    for name, actor in _actor_paths(cfg):
        if not actor.use_sapo_loss:
            continue
        for key in ("sapo_tau_pos", "sapo_tau_neg"):
            if getattr(actor, key) <= 0:
                yield ctx.error("RLC201", f"{name}.{key}", f"`{name}.{key}` must be > 0 with SAPO, got "
                                f"{getattr(actor, key)}", hint="the defaults are 1.0 and 1.05")
        if actor.use_decoupled_loss:
            yield ctx.error("RLC301", f"{name}.use_sapo_loss", f"`{name}.use_sapo_loss` and "
                            f"`{name}.use_decoupled_loss` are both true; SAPO replaces the decoupled PPO loss",
                            hint=f"set `{name}.use_decoupled_loss: false`", related=[f"{name}.use_decoupled_loss"])


@RULES.rule("areal/decoupled-recompute", "RLC304", "use_decoupled_loss implicitly enables recompute_logprob, "
            "whatever the config says.", keys=["actor.use_decoupled_loss", "actor.recompute_logprob"])
def _decoupled_recompute(cfg, ctx):
    for name, actor in _actor_paths(cfg):
        if actor.use_decoupled_loss and actor.prox_logp_method == "loglinear":
            continue  # 1.0's log-linear approximation of the proximal policy skips the forward pass
        if actor.use_decoupled_loss and not actor.recompute_logprob and ctx.is_set(f"{name}.recompute_logprob"):
            yield ctx.warning("RLC304", f"{name}.recompute_logprob", f"`{name}.recompute_logprob` is false, but AReaL "
                              f"recomputes the log-probabilities anyway because `{name}.use_decoupled_loss` is true",
                              hint="write `recompute_logprob: true` to say what runs",
                              related=[f"{name}.use_decoupled_loss"])


@RULES.rule("areal/overlong-penalty", "RLC302", "overlong_reward_penalty needs overlong_tokens and "
            "overlong_penalty_factor.", keys=["actor.overlong_reward_penalty"])
def _overlong(cfg, ctx):
    for name, actor in _actor_paths(cfg):
        if not actor.overlong_reward_penalty:
            continue
        for key in ("overlong_tokens", "overlong_penalty_factor"):
            if getattr(actor, key) is None:
                yield ctx.error("RLC302", f"{name}.overlong_reward_penalty", f"`{name}.overlong_reward_penalty` is "
                                f"true but `{name}.{key}` is not set; AReaL fails when it computes the first "
                                f"advantages", hint=f"set `{name}.{key}` (e.g. overlong_tokens: 512, "
                                                    f"overlong_penalty_factor: 1.0)",
                                related=[f"{name}.{key}"])


@RULES.rule("areal/reference-model", "RLC307", "The reference model is built only when actor.kl_ctl > 0 (and a "
            "`ref` section exists); it then needs a path.", keys=["actor.kl_ctl", "ref", "ref.path"], also=("RLC302",))
def _reference_model(cfg, ctx):
    if pipeline_kind(cfg) != "grpo":
        return
    kl = cfg.actor.kl_ctl
    if cfg.ref is None:
        if ctx.release in SECTIONS_ALWAYS_BUILT:
            # 0.3's and 0.4's GRPOConfig build `ref` from its defaults whatever kl_ctl is, and OmegaConf then finds
            # the mandatory (`???`) experiment_name/trial_name of that section unset.
            yield ctx.error("RLC302", "ref", f"AReaL {ctx.release} builds `ref` from its defaults even when "
                            f"actor.kl_ctl is 0, and the section's experiment_name/trial_name are mandatory, so AReaL "
                            f"{ctx.release} stops at load without a `ref` section", hint="add `ref: {experiment_name: ${experiment_name}, "
                                                            "trial_name: ${trial_name}, path: ${actor.path}}`")
        elif kl > 0:
            yield ctx.warning("RLC307", "actor.kl_ctl", f"`actor.kl_ctl` is {kl} but there is no `ref` section, so "
                              f"AReaL 1.0 builds no reference model and applies no KL penalty",
                              hint="add `ref:` with `path: ${actor.path}` and the names, or set `kl_ctl: 0.0`")
        return
    # A `ref` section kept with kl_ctl 0 is AReaL's own habit (v0.3 requires the section; its examples keep it in
    # 1.0): nothing to say about it.
    if kl > 0 and not cfg.ref.path:
        # A warning, not an error: the seed's defaults (kl_ctl 0.1, ref.path "") are exactly this.
        yield ctx.warning("RLC302", "actor.kl_ctl", f"`actor.kl_ctl` is {kl}, so AReaL loads the reference model, "
                        f"but `ref.path` is empty", hint="write `path: ${actor.path}` under ref, or set "
                                                         "`kl_ctl: 0.0` to train without the KL penalty",
                        related=["ref"])


# ---- rollout, batches and lengths --------------------------------------------------------------------------


@RULES.rule("areal/queue-size", "RLC300", "The rollout queue holds at least one training batch.",
            keys=["rollout.queue_size", "rollout.consumer_batch_size"])
def _queue_size(cfg, ctx):
    if pipeline_kind(cfg) != "grpo" or cfg.rollout.queue_size is None:
        return
    if cfg.rollout.queue_size < cfg.rollout.consumer_batch_size:
        yield ctx.error("RLC300", "rollout.queue_size", f"`rollout.queue_size` ({cfg.rollout.queue_size}) is smaller "
                        f"than `rollout.consumer_batch_size` ({cfg.rollout.consumer_batch_size}); a training batch "
                        f"never fits in the queue", hint=f"use queue_size >= {cfg.rollout.consumer_batch_size}, or "
                                                         f"null (16 × max_concurrent_rollouts)",
                        related=["rollout.consumer_batch_size"])


@RULES.rule("areal/zero-minibatches", "RLC300", "`ppo_n_minibatches: 0` asks for no fixed split: AReaL then cuts "
            "each step by the token budget alone (mb_spec.max_tokens_per_mb), at least one mini-batch; `rlcfg run`, "
            "which splits a step into a fixed number of optimizer steps, refuses it.",
            keys=["actor.ppo_n_minibatches", "critic.ppo_n_minibatches"], also=("RLC118",))
def _zero_minibatches(cfg, ctx):
    if pipeline_kind(cfg) != "grpo":
        return
    for name in ("actor", "critic"):
        engine = getattr(cfg, name, None)
        if engine is None or engine.ppo_n_minibatches != 0:
            continue
        key = f"{name}.ppo_n_minibatches"
        yield ctx.warning("RLC300", key, f"`{key}` is 0; AReaL runs it, but cuts each step into mini-batches by the "
                          f"token budget alone (`{name}.mb_spec.max_tokens_per_mb`, at least one), so the number of "
                          "optimizer steps per step follows the lengths of the responses", hint="set 1 for one "
                          "optimizer step per step, or the number of steps you want")
        if name == "actor":  # the run ledger refuses any critic split but one (areal/run-ledger)
            yield _refusal(key, f"`{key}` = 0: rlcfg splits a step into a fixed number of optimizer steps",
                           f"set `{key}: 1`")


@RULES.rule("areal/micro-batch-granularity", "RLC300", "The sequences of a training batch divide by "
            "mb_spec.granularity, and there are at least ppo_n_minibatches of them.",
            keys=["actor.mb_spec.granularity", "train_dataset.batch_size", "gconfig.n_samples",
                  "actor.ppo_n_minibatches"])
def _granularity(cfg, ctx):
    trained = trained_engine(cfg)
    if trained is None:
        return
    name, engine = trained
    n = cfg.gconfig.n_samples if pipeline_kind(cfg) == "grpo" else 1
    sequences = cfg.train_dataset.batch_size * n
    what = (f"train_dataset.batch_size {cfg.train_dataset.batch_size} × gconfig.n_samples {n}"
            if pipeline_kind(cfg) == "grpo" else f"train_dataset.batch_size {cfg.train_dataset.batch_size}")
    granularity = engine.mb_spec.granularity
    if sequences % granularity:
        yield ctx.error("RLC300", f"{name}.mb_spec.granularity", f"a training batch has {sequences} sequences "
                        f"({what}), which is not a multiple of `{name}.mb_spec.granularity` ({granularity})",
                        hint=f"use a granularity that divides {sequences} (GRPO usually sets it to "
                             f"gconfig.n_samples)", related=["train_dataset.batch_size"])
    if pipeline_kind(cfg) == "grpo" and sequences < cfg.actor.ppo_n_minibatches:
        # A warning: the seed's own defaults (batch 1, 4 minibatches) trip it.
        yield ctx.warning("RLC300", "actor.ppo_n_minibatches", f"`actor.ppo_n_minibatches` ({cfg.actor.ppo_n_minibatches}) "
                        f"is larger than the {sequences} sequences of a batch ({what}); some minibatches would be "
                        f"empty", hint=f"use ppo_n_minibatches <= {sequences}", related=["train_dataset.batch_size"])


@RULES.rule("areal/micro-batch-tokens", "RLC303", "mb_spec.max_tokens_per_mb holds the longest sequence a training "
            "batch can have (prompt up to train_dataset.max_length plus gconfig.max_new_tokens for RL; "
            "train_dataset.max_length for SFT); AReaL accepts a smaller budget at load and fails at the first "
            "training step, when that sequence cannot be packed into any micro-batch.",
            keys=["actor.mb_spec.max_tokens_per_mb", "gconfig.max_new_tokens", "train_dataset.max_length"])
def _micro_batch_tokens(cfg, ctx):
    for name, engine in training_engines(cfg):
        budget = engine.mb_spec.max_tokens_per_mb
        if budget is None or not ctx.is_set(f"{name}.mb_spec.max_tokens_per_mb"):
            continue
        prompt = cfg.train_dataset.max_length
        if pipeline_kind(cfg) == "grpo":
            generated = cfg.gconfig.max_new_tokens
            longest = (prompt or 1) + generated
            what = (f"train_dataset.max_length {prompt} + gconfig.max_new_tokens {generated}" if prompt
                    else f"a prompt of at least one token + gconfig.max_new_tokens {generated}")
        elif prompt:
            longest, what = prompt, f"train_dataset.max_length {prompt}"
        else:
            continue
        if budget < longest:
            path = f"{name}.mb_spec.max_tokens_per_mb"
            yield ctx.error("RLC303", path, f"`{path}` ({budget}) is below the longest sequence a batch can hold "
                            f"({longest} tokens: {what}); AReaL accepts this at load but fails at the first training "
                            f"step, when that sequence fits in no micro-batch",
                            hint=f"raise max_tokens_per_mb to at least {longest}, or lower the lengths",
                            related=["gconfig.max_new_tokens"] if pipeline_kind(cfg) == "grpo" else
                            ["train_dataset.max_length"])


def _trainer_component(cfg: Any) -> tuple[alloc.Component, str, str] | None:
    """The trained engine's component, with the key that sets it and that key's text."""
    trained = trained_engine(cfg)
    if trained is None:
        return None
    name, engine = trained
    if backend_paths(cfg):
        component = parsed_backend(engine.backend) if engine.backend and not legacy_backend_name(engine.backend) \
            else None
        return (component, f"{name}.backend", engine.backend) if component is not None else None
    parsed = parsed_allocation(cfg)
    if parsed is None or parsed.keyword:
        return None
    parts = parsed.of_kind("train")
    # A v0.4 allocation may name its training parts; the ref's and the critic's are not the trainer's in GRPO.
    others = ("ref", "critic") if pipeline_kind(cfg) == "grpo" else ()
    component = next((c for c in parts if c.name not in others), parts[0] if parts else None)
    return (component, "allocation_mode", cfg.allocation_mode) if component is not None else None


@RULES.rule("areal/batch-data-parallel", "RLC304", "Each trainer rank loads train_dataset.batch_size // dp of "
            "a batch, so AReaL drops the remainder of a batch_size that is not a multiple of the trainer's "
            "data-parallel size.",
            keys=["train_dataset.batch_size", "allocation_mode", "actor.backend", "model.backend"])
def _batch_data_parallel(cfg, ctx):
    if not ctx.is_set("train_dataset.batch_size"):
        return
    found = _trainer_component(cfg)
    if found is None:
        return
    component, source, text = found
    dims = component.hybrid[0] if component.hybrid is not None else component.dims
    dp = dims.get("d") if dims is not None else 1
    batch = cfg.train_dataset.batch_size
    if dp <= 1 or batch % dp == 0:
        return
    loaded = batch // dp
    dropped = batch - loaded * dp
    item = "prompt" if pipeline_kind(cfg) == "grpo" else "sample"
    if loaded:
        outcome = (f"so {dropped} {item}{'s' if dropped > 1 else ''} of every batch of {batch} "
                   f"{'are' if dropped > 1 else 'is'} dropped")
    else:
        outcome = f"so all {batch} {item}s of every batch are dropped and the ranks get no data"
    lower, upper = loaded * dp, (loaded + 1) * dp
    nearest = f"{lower} or {upper}" if lower else str(upper)
    yield ctx.warning("RLC304", "train_dataset.batch_size",
                      f"`train_dataset.batch_size` ({batch}) is not a multiple of the trainer's data-parallel size "
                      f"dp {dp} (`{source}`: {text!r}): each of the {dp} ranks loads {batch} // {dp} = {loaded} "
                      f"{item}{'' if loaded == 1 else 's'}, {outcome}",
                      hint=f"use a batch_size that is a multiple of {dp}: {nearest}", related=[source])


@RULES.rule("areal/generation-lengths", "RLC303", "min_new_tokens <= max_new_tokens <= max_tokens, and the "
            "generation fits SGLang's context_length.",
            keys=["gconfig.min_new_tokens", "gconfig.max_new_tokens", "gconfig.max_tokens", "sglang.context_length"])
def _lengths(cfg, ctx):
    if pipeline_kind(cfg) != "grpo":
        return
    g = cfg.gconfig
    if g.min_new_tokens > g.max_new_tokens:
        yield ctx.error("RLC303", "gconfig.min_new_tokens", f"`gconfig.min_new_tokens` ({g.min_new_tokens}) is "
                        f"above `gconfig.max_new_tokens` ({g.max_new_tokens})", hint="lower min_new_tokens",
                        related=["gconfig.max_new_tokens"])
    if g.max_new_tokens > g.max_tokens:
        yield ctx.error("RLC303", "gconfig.max_new_tokens", f"`gconfig.max_new_tokens` ({g.max_new_tokens}) is "
                        f"above `gconfig.max_tokens` ({g.max_tokens}), the limit of prompt plus generation",
                        hint=f"raise max_tokens above {g.max_new_tokens} plus the prompt length",
                        related=["gconfig.max_tokens"])
    where = placement(cfg)
    uses_sglang = where is not None and where.rollout is not None and where.rollout.backend == "sglang"
    context = cfg.sglang.context_length
    if uses_sglang and context is not None and context <= g.max_new_tokens:
        yield ctx.error("RLC303", "sglang.context_length", f"`sglang.context_length` ({context}) leaves no room for "
                        f"a prompt before `gconfig.max_new_tokens` ({g.max_new_tokens}) generated tokens",
                        hint=f"raise context_length above {g.max_new_tokens} plus the longest prompt",
                        related=["gconfig.max_new_tokens"])


@RULES.rule("areal/offpolicyness", "RLC307", "With async_training false, rollouts are synchronous and "
            "max_head_offpolicyness is not used.", keys=["async_training", "rollout.max_head_offpolicyness"])
def _offpolicyness(cfg, ctx):
    if pipeline_kind(cfg) != "grpo":
        return
    if not cfg.async_training and cfg.rollout.max_head_offpolicyness > 0:
        yield ctx.warning("RLC307", "rollout.max_head_offpolicyness", f"`rollout.max_head_offpolicyness` "
                          f"({cfg.rollout.max_head_offpolicyness}) has no effect because `async_training` is false "
                          f"(v0.3 then rolls out synchronously)", hint="set `async_training: true` to train "
                                                                       "off-policy", related=["async_training"])


# ---- 1.0 resources and combinations ------------------------------------------------------------------------


@RULES.rule("areal/offload", "RLC302", "Offloading (an engine's offload, or actor-rollout colocation) needs "
            "enable_offload; colocating rollout with the actor needs weight_update_mode disk.",
            keys=["enable_offload", "actor.offload", "rollout.scheduling_strategy", "actor.weight_update_mode"])
def _offload(cfg, ctx):
    engines = list(training_engines(cfg))
    for name, engine in engines:
        if engine.offload and not cfg.enable_offload:
            yield ctx.error("RLC302", f"{name}.offload", f"`{name}.offload` is true but `enable_offload` is false",
                            hint="set `enable_offload: true` (it needs torch_memory_saver, e.g. via LD_PRELOAD)",
                            related=["enable_offload"])
    if pipeline_kind(cfg) != "grpo":
        return
    r, a = cfg.rollout.scheduling_strategy, cfg.actor.scheduling_strategy
    colocated = (r.type == "colocation" and r.target == "actor") or (a.type == "colocation" and a.target == "rollout")
    if not colocated:
        return
    path = ("rollout.scheduling_strategy" if cfg.rollout.scheduling_strategy.type == "colocation"
            else "actor.scheduling_strategy")
    if not cfg.enable_offload:
        yield ctx.error("RLC302", path, "the rollout engine is colocated with the actor, which needs "
                        "`enable_offload: true` to swap them on the shared GPUs", hint="set `enable_offload: true`",
                        related=["enable_offload"])
    # AReaL 1.0 defaults actor.weight_update_mode to xccl (rlcfg's documented default is v0.3's disk).
    mode = cfg.actor.weight_update_mode if ctx.is_set("actor.weight_update_mode") or ctx.release != "1.0" else "xccl"
    if mode != "disk":
        yield ctx.error("RLC302", "actor.weight_update_mode", f"the rollout engine is colocated with the actor, "
                        f"which needs `actor.weight_update_mode: disk`, got {mode!r}"
                        f"{'' if ctx.is_set('actor.weight_update_mode') else ' (AReaL 1.0' + chr(39) + 's default)'}; "
                        f"AReaL accepts this at load but fails when the trainer starts",
                        hint="set `actor.weight_update_mode: disk`", related=[path])


@RULES.rule("areal/rollout-backend-features", "RLC306", "return_routed_experts needs SGLang; a Megatron "
            "actor with LoRA cannot update an SGLang rollout; LoRA hot-loading needs the single "
            "controller (scheduler.type).",
            keys=["rollout.return_routed_experts", "actor.use_lora", "rollout.backend", "scheduler.type"])
def _rollout_features(cfg, ctx):
    if pipeline_kind(cfg) != "grpo":
        return
    where = placement(cfg)
    rollout = where.rollout.backend if where and where.rollout else None
    train = where.train.effective_backend if where and where.train else None
    if cfg.rollout.return_routed_experts and rollout not in (None, "sglang"):
        yield ctx.error("RLC306", "rollout.return_routed_experts", f"`rollout.return_routed_experts` only works "
                        f"with SGLang, but the rollout runs on {rollout}", hint="switch the rollout to sglang or "
                                                                              "turn it off")
    if cfg.actor.use_lora and train == "megatron" and rollout == "sglang":
        yield ctx.error("RLC306", "actor.use_lora", "LoRA on a Megatron actor cannot update an SGLang rollout",
                        hint="use the fsdp backend for LoRA, or vllm for the rollout")
    if cfg.actor.use_lora and cfg.scheduler.type is None and ctx.release == "1.0":
        yield ctx.warning("RLC306", "actor.use_lora", "LoRA weight hot-loading needs AReaL's single controller "
                          "(`scheduler.type` set), not an SPMD launcher", hint="set `scheduler.type: local` "
                                                                              "(or ray/slurm)",
                          related=["scheduler.type"])


# ---- layout hints ------------------------------------------------------------------------------------------

@RULES.rule("areal/total-epochs", "RLC201", "total_train_epochs is positive: AReaL 1.0 stops at load on 0; 0.3 to "
            "0.5 accept it and train nothing.", keys=["total_train_epochs"])
def _total_epochs(cfg, ctx):
    if cfg.total_train_epochs > 0:
        return
    if ctx.release in BEFORE_1_0:
        yield ctx.warning("RLC201", "total_train_epochs", f"`total_train_epochs` is 0, so AReaL {ctx.release} starts "
                          "and trains nothing", hint="set it to 1 or more")
    else:
        yield ctx.error("RLC201", "total_train_epochs", f"`total_train_epochs` must be > 0, got "
                        f"{cfg.total_train_epochs}; AReaL 1.0 stops at load on it", hint="set it to 1 or more")


@RULES.rule("areal/lora-modules", "RLC200", "vllm.lora_modules has the judged release's type: a JSON string in 0.5, "
            "a list of adapters in 1.0.", keys=["vllm.lora_modules"])
def _lora_modules(cfg, ctx):
    value = cfg.vllm.lora_modules
    if value is None or not ctx.is_set("vllm.lora_modules"):
        return
    if ctx.release == "0.5" and not isinstance(value, str):
        yield ctx.error("RLC200", "vllm.lora_modules", "`vllm.lora_modules`: expected a string (AReaL 0.5 reads one "
                        "JSON string), got a list", hint='write it as one string, e.g. \'{"name": "lora", "path": '
                                                          '"/path/to/adapter"}\'')
    elif ctx.release == "1.0" and isinstance(value, str):
        yield ctx.error("RLC200", "vllm.lora_modules", "`vllm.lora_modules`: expected a list (AReaL 1.0 reads a list "
                        "of adapters), got a string", hint="write each adapter as an item of a list")


@RULES.rule("areal/recover-mode", "RLC202", "recover.mode takes the values of the judged release: AReaL 1.0 "
            "accepts on/off/auto/disabled and stops at load on 0.3 to 0.5's fault and resume.", keys=["recover.mode"])
def _recover_mode(cfg, ctx):
    mode = cfg.recover.mode
    if ctx.release == "1.0" and mode in ("fault", "resume"):
        yield ctx.error("RLC202", "recover.mode", f"`recover.mode` {mode!r} was removed in AReaL 1.0, which stops at "
                        f"load on it", hint="use `auto` (or `on`) to recover, `disabled` (or `off`) not to")
    elif ctx.release in BEFORE_1_0 and mode in ("on", "off"):
        yield ctx.warning("RLC202", "recover.mode", f"`recover.mode` {mode!r} is a 1.0 spelling; AReaL {ctx.release} "
                          f"knows disabled, auto, fault and resume", hint="use `auto` or `disabled`")


# ---- where each engine runs (lower.py plans it; areal/run-ledger refuses what the runtime does not run) --


# ---- the run ledger ----------------------------------------------------------------------------------------
#
# Each key declares what `rlcfg run` does with it (models.py). Some keys are honored alone but not in
# every combination: AReaL then computes something rlcfg's runtime does not, and the run is refused (an RLC118 note,
# on which `rlcfg run` stops) rather than approximated. `validate` and `plan` are not affected.


def _refusal(path: str, message: str, hint: str, related: tuple[str, ...] = ()) -> Finding:
    return Finding("RLC118", Severity.NOTE, path, f"`rlcfg run` refuses {message}", hint, related)


def _group_size_refusal(norm: str, group_size: int, n_samples: int) -> Finding:
    return _refusal(f"actor.{norm}.group_size", f"`actor.{norm}.group_size` = {group_size} with gconfig.n_samples "
                    f"{n_samples}: rlcfg's groups are each prompt's n_samples responses",
                    "write `group_size: ${gconfig.n_samples}`", ("gconfig.n_samples",))


def engine_section(cfg: Any, role: str) -> str:
    if pipeline_kind(cfg) != "grpo":
        return "actor" if getattr(cfg, "actor", None) is not None else "model"
    return {"reference": "ref"}.get(role, role)


def _runtime_limits(cfg: Any) -> Iterator[Finding]:
    """What the runtime's preflight refuses of the training engines, laid out as lower.py lays them out: AReaL's
    FSDP (and Archon) engines read `c` as Ulysses and run t, p and e on top of FSDP; its Megatron engine takes them
    all. The letters are the sizes of the engine's allocation (the attention part's, and the FFN's `e`, of a hybrid
    MoE allocation)."""
    roles = engine_roles(cfg)
    components, _groups, _sizes = layout(cfg, roles)
    said: set[str] = set()  # a reference or critic in the trainer's processes shares its component and key
    for finding in _limits_of_roles(cfg, roles, components):
        if finding.message not in said:
            said.add(finding.message)
            yield finding


def _lora_script_layout(cfg: Any) -> Iterator[Finding]:
    """AReaL's LoRA script of 0.3 and 0.4 (examples/lora/gsm8k_grpo_lora.py) builds an FSDP actor and raises unless
    every trainer process holds a whole data-parallel replica."""
    components, _groups, _sizes = layout(cfg, engine_roles(cfg))
    actor = components["actor"]
    parts = actor.hybrid or ((actor.dims,) if actor.dims else ())
    if actor.effective_backend != "fsdp" or all(size == 1 for part in parts for letter, size in part.items
                                                   if letter != "d"):
        return  # (a trainer on another backend is refused as one the script does not build)
    key = backend_key(cfg, "actor", engine_section(cfg, "actor"))
    yield _refusal(key, f"the trainer's part of `{key}`, {actor.text()}: AReaL's LoRA script "
                   "(examples/lora/gsm8k_grpo_lora.py) trains on FSDP with data parallelism alone and raises otherwise "
                   "(\"LoRA does not support parallelism other than FSDP\")",
                   f"give the trainer's part of `{key}` a d size alone (d{actor.world})")


_BUILT = {"fsdp": "trains on FSDP", "megatron": "trains on Megatron", "sglang": "generates through SGLang's client",
          "vllm": "generates through vLLM's client"}


def _built_engines(cfg: Any, trainer: str, generation: str | None) -> Iterator[Finding]:
    """The launch's entry script (0.3 and 0.4's, 0.5's LoRA examples) builds its trainer and its client of the
    generation servers itself (entries.BUILT_ENGINES): an allocation naming other backends would start servers and
    processes the script does not speak to."""
    components, _groups, _sizes = layout(cfg, engine_roles(cfg))
    for role, backend in (("actor", trainer), ("rollout", generation)):
        component = components.get(role)
        if backend is None or component is None or component.effective_backend == backend:
            continue
        key = backend_key(cfg, role, engine_section(cfg, role))
        whose = "the trainer's" if role == "actor" else "the generation servers'"
        yield _refusal(key, f"{whose} part of `{key}`, {component.text()}: the launch's entry script "
                       f"{_BUILT[backend]} whatever the allocation says",
                       f"write {backend} for {component.effective_backend} in {whose} part of `{key}`, or launch "
                       "the script AReaL wrote for that backend")


def _fsdp_instead(cfg: Any, key: str, component: Any) -> str:
    """The hint for a supervised trainer on Megatron: when the key holds that one component, the value that trains
    on the same GPUs with FSDP (data parallel over all of them); else the edit in words."""
    written: Any = cfg
    for part in key.split("."):
        written = getattr(written, part, None)
    if component.hybrid is None and isinstance(written, str) and written.strip() == component.text():
        prefix = "fsdp:" if component.backend else ""  # a bare part is FSDP whenever p and e are 1
        return f"set `{key}: {prefix}d{component.world}` (FSDP over the same {component.world} GPUs)"
    return f"write `fsdp` for `megatron` in `{key}`"


def _limits_of_roles(cfg: Any, roles: list[str], components: dict) -> Iterator[Finding]:
    for role in roles:
        c = components.get(role)
        if role == "rollout" or c is None or c.kind != "train":
            continue
        key = backend_key(cfg, role, engine_section(cfg, role))
        attn, ffn = c.hybrid if c.hybrid is not None else (c.dims, c.dims)
        size = {"t": attn.get("t"), "p": attn.get("p"), "c": attn.get("c"), "e": ffn.get("e")}

        def refuse(letter: str, limit: str) -> Finding:
            return _refusal(key, f"the `{letter}` size {size[letter]} in `{key}`: {limit}",
                            f"write {letter}1 in `{key}` (or leave the letter out)")

        if c.effective_backend == "megatron":
            section = engine_section(cfg, role)
            path_key = f"{section}.path"
            for model_key, path, why in run_limits.megatron_unbuilt_models(
                    [(path_key, getattr(getattr(cfg, section, None), "path", None))]):
                yield _refusal(model_key, f"`{model_key}` = {path}, {why}",
                               _fsdp_instead(cfg, key, c))
            if pipeline_kind(cfg) == "rw":
                yield _refusal(key, f"reward-model training on the Megatron backend of `{key}`: "
                                    f"{run_limits.MEGATRON_SUPERVISED}", _fsdp_instead(cfg, key, c))
                continue
            if role == "critic":
                own = getattr(getattr(cfg, "critic", None), "backend", None) or ""
                hint = (f"give the critic an fsdp backend: `critic.backend: {own.replace('megatron', 'fsdp', 1)}`"
                        if own.startswith("megatron") else
                        "give the critic an fsdp backend of its own (`critic.backend: fsdp:d…`)")
                yield _refusal(key, f"the critic on the Megatron backend of `{key}`: {run_limits.MEGATRON_CRITIC}",
                               hint)
            if size["e"] > 1:
                yield refuse("e", run_limits.EXPERT_PARALLEL)
            continue
        if size["c"] > 1 and pipeline_kind(cfg) != "grpo":  # Ulysses runs in RL training only
            yield refuse("c", run_limits.ULYSSES)
        for letter in ("t", "p", "e"):
            if size[letter] > 1:
                yield refuse(letter, run_limits.FSDP_MODEL_PARALLEL)


def _norm_text(norm: Any) -> str:
    return "null" if norm is None else f"mean_level {norm.mean_level}, std_level {norm.std_level}"


@RULES.rule("areal/run-ledger", "RLC118", "`rlcfg run` refuses combinations that AReaL computes otherwise than "
            "rlcfg's runtime (log-linear proximal log-probabilities outside the decoupled loss, reward "
            "normalisations other than GRPO's, RLOO's or LitePPO's, groups other than n_samples, a trainer "
            "temperature other than the sampling one, an overlong penalty measured from another length, off-policy "
            "rollouts through consumer_batch_size, ...), "
            "although each key alone is honored; and the parallel sizes and backends rlcfg's runtime does not run "
            "(rlcfg/run_limits.py): on Megatron expert parallelism (AReaL's MoE router settings are not mapped), "
            "a model family it does not build, a critic and reward-model training; on FSDP "
            "Ulysses (`c`) outside RL training, and the t, p and e sizes; LoRA outside the RL actor; vision-language "
            "models; RL data that AReaL's GSM8K loader does not read; the LoRA script of 0.3 and 0.4 with any "
            "parallelism but data parallelism, where it raises; the countdown script of 0.3 and 0.4 without "
            "valid_dataset; and the scripts of 0.3 and 0.4 (and 0.5's LoRA examples), which build their trainer "
            "and their client of the generation servers themselves, with an allocation naming other backends.",
            keys=["actor.path", "ref.path", "critic.path", "model.path", "sglang.model_path", "vllm.model",
                  "allocation_mode", "actor.backend", "critic.backend", "actor.prox_logp_method",
                  "actor.use_decoupled_loss", "actor.rejection_sampling",
                  "actor.reward_norm", "actor.adv_norm", "actor.temperature", "actor.discount", "actor.gae_lambda",
                  "actor.mask_no_eos_with_zero", "actor.overlong_reward_penalty", "rollout.consumer_batch_size",
                  "gconfig.max_tokens", "critic.ppo_n_minibatches", "actor.optimizer.warmup_steps_proportion",
                  "model.use_lora", "actor.use_lora", "train_dataset.path", "valid_dataset"])
def _run_ledger(cfg, ctx):
    yield from _runtime_limits(cfg)
    engines = [(f"{name}.path", getattr(engine, "path", None)) for name, engine in training_engines(cfg)]
    if pipeline_kind(cfg) == "grpo":
        engines += [("sglang.model_path", cfg.sglang.model_path), ("vllm.model", cfg.vllm.model)]
    for key, path, why in run_limits.vision_language_models(engines):
        yield _refusal(key, f"`{key}` = {path}, a vision-language model ({why}): {run_limits.VISION_LANGUAGE}",
                       run_limits.vision_language_hint(key, path))
    for name, engine in training_engines(cfg) if pipeline_kind(cfg) != "grpo" else ():
        if engine.use_lora:  # (a critic's use_lora is refused by its own fate)
            yield _refusal(f"{name}.use_lora", f"`{name}.use_lora` = true: rlcfg trains LoRA adapters on an RL "
                           f"actor only, not in SFT and reward-model training", f"set `use_lora: false` under {name}")
    if pipeline_kind(cfg) != "grpo":
        return  # the combinations below are the RL loop's; SFT and reward-model keys are judged one by one
    path = cfg.train_dataset.path
    if (ctx.entry_runs is None or ctx.entry_runs in GSM8K_SCRIPTS) and "gsm8k" not in path.lower():
        yield _refusal("train_dataset.path", f"`train_dataset.path` = {path}: AReaL's GSM8K RLVR script reads it with "
                       "the dataset loader its path names, or from 1.0 as a folder saved by `datasets` with `messages` "
                       "and `answer` columns; rlcfg runs AReaL's GSM8K loader only",
                       "use AReaL's GSM8K data (`train_dataset.path: openai/gsm8k`, or a local copy whose path holds "
                       "`gsm8k`, with `question` and `answer` columns)")
    if ctx.entry_runs in BUILT_ENGINES:
        yield from _built_engines(cfg, *BUILT_ENGINES[ctx.entry_runs])
    if ctx.entry_runs == GSM8K_MATH_PARSER_LORA:
        yield from _lora_script_layout(cfg)
    if ctx.entry_runs == COUNTDOWN_EVALUATED and cfg.valid_dataset is None:
        yield _refusal("valid_dataset", "`valid_dataset` = null: AReaL's countdown script of 0.3 and 0.4 "
                       "(examples/countdown/train.py) reads valid_dataset.path and stops without it",
                       "set `valid_dataset.path` to the countdown test set (countdown.py writes test_e.jsonl)")
    a, g = cfg.actor, cfg.gconfig
    critic = cfg.critic
    reference = a.kl_ctl > 0 and cfg.ref is not None
    if a.prox_logp_method == "loglinear" and not a.use_decoupled_loss:
        yield _refusal("actor.prox_logp_method", "`actor.prox_logp_method` = loglinear without the decoupled loss: "
                       "AReaL then skips the recompute pass and takes the interpolated proximal log-probabilities "
                       "into a loss rlcfg runs only as the decoupled one",
                       "use `prox_logp_method: recompute`, or `use_decoupled_loss: true`")
    if ctx.release == "1.0" and a.use_decoupled_loss and a.rejection_sampling is None and not a.use_sapo_loss:
        yield _refusal("actor.use_decoupled_loss", "`actor.use_decoupled_loss` = true without rejection_sampling: "
                       "AReaL 1.0 then applies no behaviour importance weight, rlcfg's decoupled loss always weights "
                       "each token by π_prox/π_behave", "add `rejection_sampling: {upper: 5.0}` under actor, or use "
                       "`use_decoupled_loss: false` with `recompute_logprob: true` (the same loss without the weight)")
    if a.importance_sampling_level == "sequence":
        if a.use_sapo_loss:
            yield _refusal("actor.importance_sampling_level", "`actor.importance_sampling_level` = sequence with "
                           "use_sapo_loss: rlcfg's SAPO gates each token's own ratio", "use the token level with SAPO",
                           ("actor.use_sapo_loss",))
        elif a.c_clip is not None:
            yield _refusal("actor.c_clip", f"`actor.c_clip` = {a.c_clip} with importance_sampling_level sequence: "
                           f"rlcfg's sequence-level (GSPO) loss has no dual clip", "drop c_clip, or use the token level",
                           ("actor.importance_sampling_level",))
    # The temperature the log-probabilities are taken at is the sampling one in rlcfg.
    sampled = 0.0 if g.greedy else g.temperature
    for name, engine in (("actor", a), ("ref", cfg.ref if reference else None)):
        if engine is not None and engine.temperature != sampled:
            yield _refusal(f"{name}.temperature", f"`{name}.temperature` = {engine.temperature} while rollouts are "
                           f"sampled at {'greedy (0)' if g.greedy else sampled}: rlcfg computes the trainer's "
                           f"log-probabilities at the sampling temperature", f"write `temperature: "
                           f"${{gconfig.temperature}}` under {name}" + (" and sample (greedy: false)" if g.greedy else ""),
                           ("gconfig.temperature",))
    # Reward normalisations: GRPO (group mean, with or without the group std), RLOO, LitePPO (group mean, batch std).
    rn, an = a.reward_norm, a.adv_norm
    if rn is not None:
        supported = (rn.mean_level == "group" and rn.std_level in ("group", "batch", None)
                     and not (rn.mean_leave1out and rn.std_level is not None) and critic is None)
        if not supported:
            yield _refusal("actor.reward_norm", f"`actor.reward_norm` = {{{_norm_text(rn)}, mean_leave1out "
                           f"{str(rn.mean_leave1out).lower()}}}" + (" with a critic" if critic is not None else "") +
                           ": rlcfg normalises scores by group mean only, as GRPO (group mean and std, or mean "
                           "alone), RLOO (leave-one-out mean, no std) or LitePPO (group mean, batch std), and not "
                           "before GAE",
                           "use `mean_level: group` with `std_level: group`, batch or null, or drop reward_norm")
        elif rn.group_size != g.n_samples:
            yield _group_size_refusal("reward_norm", rn.group_size, g.n_samples)
    # adv_norm runs in every form AReaL's Normalization has (ir.TokenNorm); only its groups must be rlcfg's.
    if an is not None and "group" in (an.mean_level, an.std_level) and an.group_size != g.n_samples:
        yield _group_size_refusal("adv_norm", an.group_size, g.n_samples)
    if critic is None and a.discount * a.gae_lambda != 1.0 and not reference and \
            (rn is not None and rn.mean_level == "group" and rn.std_level != "batch"):
        yield _refusal("actor.discount", f"`actor.discount` × `actor.gae_lambda` = {a.discount * a.gae_lambda} with a "
                       f"group-normalised score and no KL penalty: AReaL discounts the score back from the last token, "
                       f"rlcfg's GRPO/RLOO gives every token the same advantage", "set discount and gae_lambda to 1",
                       ("actor.gae_lambda",))
    if a.mask_no_eos_with_zero and rn is not None:
        yield _refusal("actor.mask_no_eos_with_zero", "`actor.mask_no_eos_with_zero` = true with reward_norm: AReaL "
                       "zeroes a truncated response's score after normalising the group, rlcfg before",
                       "drop one of the two", ("actor.reward_norm",))
    if a.overlong_reward_penalty and a.max_new_tokens != g.max_new_tokens:
        yield _refusal("actor.max_new_tokens", f"`actor.max_new_tokens` = {a.max_new_tokens} with the overlong "
                       f"penalty and gconfig.max_new_tokens {g.max_new_tokens}: rlcfg's penalty ends at the generation "
                       f"limit", "write `max_new_tokens: ${gconfig.max_new_tokens}` under actor",
                       ("gconfig.max_new_tokens", "actor.overlong_reward_penalty"))
    # Rollouts: on-policy batches of exactly train_dataset.batch_size prompts.
    synchronous_v03 = ctx.release == "0.3" and not cfg.async_training
    if not synchronous_v03 and cfg.rollout.consumer_batch_size != cfg.train_dataset.batch_size:
        yield _refusal("rollout.consumer_batch_size", f"`rollout.consumer_batch_size` = "
                       f"{cfg.rollout.consumer_batch_size} with train_dataset.batch_size {cfg.train_dataset.batch_size}: "
                       f"AReaL's staleness window then differs from one training batch (with a larger one it generates "
                       f"the next batch with the current weights, off-policy)",
                       "write `consumer_batch_size: ${train_dataset.batch_size}`", ("train_dataset.batch_size",))
    longest = cfg.train_dataset.max_length
    if longest is not None and longest + g.max_new_tokens > g.max_tokens:
        yield _refusal("gconfig.max_tokens", f"`gconfig.max_tokens` = {g.max_tokens} below train_dataset.max_length "
                       f"{longest} + max_new_tokens {g.max_new_tokens}: AReaL shortens the generation of long prompts, "
                       f"rlcfg generates max_new_tokens after every prompt", "raise max_tokens, or lower max_length",
                       ("train_dataset.max_length", "gconfig.max_new_tokens"))
    if critic is not None and critic.ppo_n_minibatches != 1:
        yield _refusal("critic.ppo_n_minibatches", f"`critic.ppo_n_minibatches` = {critic.ppo_n_minibatches}: rlcfg "
                       f"updates the critic once per step, on the whole batch", "set `ppo_n_minibatches: 1` under "
                       "critic")
    for name, engine in (("actor", a), ("critic", critic)):
        opt = engine.optimizer if engine is not None else None
        if opt is None or opt.type == "empty":
            continue
        if opt.warmup_steps_proportion > 0.001:
            yield _refusal(f"{name}.optimizer.warmup_steps_proportion", f"`{name}.optimizer.warmup_steps_proportion` "
                           f"= {opt.warmup_steps_proportion}: AReaL counts the warm-up from the dataset's size, which "
                           f"rlcfg does not know before it runs; it runs without warm-up",
                           "use 0 (or AReaL's default 0.001, no warm-up under 1000 steps)")
        if opt.lr_scheduler_type != "constant" and (engine.ppo_n_minibatches > 1 or cfg.total_train_steps
                                                    or cfg.total_train_n_seqs):
            yield _refusal(f"{name}.optimizer.lr_scheduler_type", f"`{name}.optimizer.lr_scheduler_type` = "
                           f"{opt.lr_scheduler_type} with several minibatches a step or a step cap: AReaL's schedule "
                           f"spans epochs × batches scheduler steps, rlcfg's the optimizer steps it runs",
                           "use the constant schedule, or one minibatch a step without total_train_steps/n_seqs")


# ---- summary -----------------------------------------------------------------------------------------------


