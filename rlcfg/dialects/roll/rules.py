"""ROLL's cross-field rules (research/validation-rules.md section 4, RO-*) and its silent rewrites.

Each rule reads the validated config; values that ROLL derives are recomputed here the way ROLL computes
them (world size from device_mapping, num_gpus_per_worker from the strategy, the global train batch from
the seed's formulas), and a value ROLL would overwrite gives an RLC304 warning only when the user wrote it.
`device_mapping` strings are read with the grammar in device_mapping.py, never evaluated.
"""

from __future__ import annotations

from typing import Any, Iterator

from rlcfg.diagnostics import Constraint, Severity, close_matches
from rlcfg.dialects.roll.derived import (BACKEND_OF_STRATEGY, ENGINE_NAMES, FILTER_THRESHOLDS, KL_ESTIMATORS,
                                         MATH_RULE_WORKER, MODEL_BACKENDS, PG_VARIANTS, PG_WORKER,
                                         PG_WORKER_RELEASES, REWARD_FUNCTIONS, ROLLOUT_STRATEGIES,
                                         SCHEDULERS, TRAIN_STRATEGIES, chosen_reward_domain, cpu_capable, critic_on,
                                         effective_sequence_length, frozen_prefixes, gpus_per_worker, group_size,
                                         is_agentic, loads_reward_model, megatron_sizes, pg_variant, placed_workers,
                                         reference_on,
                                         reward_class, reward_kl_on, rollout_only, schedule_length, strategy_name,
                                         strategy_value, unrun_pipeline, warmup_steps, worker_env, workers)
from rlcfg.dialects.roll.device_mapping import ACCEPTED_FORMS, describe_ids, format_device_mapping
from rlcfg.dialects.roll.models import (CONFIG_OF_STRATEGY, DEEPSPEED_STRATEGIES, STRATEGIES_OF, STRATEGY_NAMES,
                                        WITH_DEEPSPEED, configured, device_ids, parsed_device_mapping)
from rlcfg.schema.base import Finding, RuleContext, RuleSet

RULES = RuleSet()


def _sc_path(worker_path: str, key: str) -> str:
    return f"{worker_path}.strategy_args.strategy_config.{key}"


def _ids_text(ids: tuple[int, ...] | set[int]) -> str:
    return f"GPU {describe_ids(ids)}" if len(set(ids)) == 1 else f"GPUs {describe_ids(ids)}"


# ---- device_mapping -----------------------------------------------------------------------------------------


@RULES.rule("roll/device-mapping-syntax", "RLC204",
            "Every device_mapping is `list(range(a,b[,step]))`, a literal list of GPU ids or a YAML list; anything "
            "else is rejected without being evaluated.", keys=["*.device_mapping"])
def device_mapping_syntax(cfg: Any, ctx: RuleContext):
    for path, worker in workers(cfg):
        mapping = worker.device_mapping
        key = f"{path}.device_mapping"
        if mapping is None:
            continue
        if isinstance(mapping, str):
            ids, error = parsed_device_mapping(mapping)
            if error is not None:
                yield ctx.error("RLC204", key, f"`{key}` ({mapping!r}) is not a device mapping: {error.message}",
                                hint=f"write {ACCEPTED_FORMS}; rlcfg never evaluates it (ROLL passes it to "
                                     "Python's eval())")
                continue
        else:
            ids = tuple(mapping)
            yield ctx.warning(
                "RLC204", key, f"`{key}` is a YAML list; ROLL passes device_mapping to eval(), which raises "
                               "TypeError for anything but a string",
                hint=f"quote it as a string: `device_mapping: \"{format_device_mapping(ids)}\"`")
        if not ids:
            yield ctx.error("RLC204", key, f"`{key}` ({mapping!r}) names no GPU",
                            hint="give the worker at least one GPU id, or remove device_mapping to run it on CPU")
            continue
        negative = sorted({i for i in ids if i < 0})
        if negative:
            yield ctx.error("RLC204", key, f"`{key}` names negative GPU ids ({', '.join(map(str, negative))})",
                            hint="GPU ids count from 0")
        seen: set[int] = set()
        twice = sorted({i for i in ids if i in seen or seen.add(i)})  # type: ignore[func-returns-value]
        if twice:
            yield ctx.error("RLC204", key, f"`{key}` names {_ids_text(set(twice))} more than once",
                            hint="list each GPU once; ROLL would start two ranks of the same worker on one GPU")


@RULES.rule("roll/device-mapping-required", "RLC203",
            "actor_train and actor_infer (and reference or critic when the pipeline uses them) need a "
            "device_mapping; a CPU-only reward worker needs world_size.", keys=["*.device_mapping", "*.world_size"],
            also=("RLC302",))
def device_mapping_required(cfg: Any, ctx: RuleContext):
    needed = [("actor_infer", "it generates the rollouts")]
    if not rollout_only(cfg):
        needed.insert(0, ("actor_train", "it trains the policy"))
    # the rollout pipeline (start_rlvr_rollout_pipeline.py) starts actor_infer and the reward workers only
    if reference_on(cfg) and not rollout_only(cfg):
        why = ("use_kl_loss is true" if cfg.use_kl_loss else
               f"init_kl_coef is {cfg.init_kl_coef}" if cfg.init_kl_coef > 0 else "enable_reference is true")
        needed.append(("reference", f"the reference model is on because {why}"))
    if critic_on(cfg) and not rollout_only(cfg):
        needed.append(("critic", "adv_estimator is gae"))
    for path, why in needed:
        if getattr(cfg, path).device_mapping is None:
            hint = "e.g. `device_mapping: list(range(0,8))`"
            if path == "reference" and not cfg.enable_reference:
                hint += ", or set init_kl_coef: 0 and use_kl_loss: false to run without a reference model"
            if path == "critic":
                # The seed's example leaves adv_estimator at its default (gae) and shows no critic, so by
                # DESIGN rule 5 this cannot be an error; ROLL itself fails when it builds the critic cluster.
                yield ctx.warning("RLC203", f"{path}.device_mapping",
                                  f"`critic.device_mapping` is not set, but adv_estimator is {cfg.adv_estimator!r} "
                                  "(its default), which trains a critic; ROLL fails when it starts the critic",
                                  hint="set adv_estimator: grpo (or reinforce) to train without a critic, or give the "
                                       "critic GPUs with `critic.device_mapping`")
                continue
            yield ctx.error("RLC203", f"{path}.device_mapping",
                            f"`{path}.device_mapping` is not set, but {path} needs GPUs ({why})", hint=hint)
    for key, worker in (getattr(cfg, "rewards", None) or {}).items():
        if worker.device_mapping is None and worker.world_size is None:
            yield ctx.error("RLC302", f"rewards.{key}.world_size",
                            f"reward worker `rewards.{key}` has no device_mapping, so it runs on CPU and needs "
                            "world_size, which is not set",
                            hint=f"set `rewards.{key}.world_size` (e.g. 8), or give it GPUs with device_mapping")


@RULES.rule("roll/gpus-per-worker-divides", "RLC400",
            "len(device_mapping) must divide by the worker's effective num_gpus_per_worker (tp × pp for vLLM).",
            keys=["*.device_mapping", "*.num_gpus_per_worker"])
def gpus_per_worker_divides(cfg: Any, ctx: RuleContext):
    for path, worker, ids in placed_workers(cfg):
        per = gpus_per_worker(worker)
        if per <= 0 or len(ids) % per == 0:
            continue
        if strategy_name(worker) == "vllm":
            tp = strategy_value(worker, "tensor_parallel_size", 1)
            pp = strategy_value(worker, "pipeline_parallel_size", 1)
            yield ctx.error("RLC400", f"{path}.device_mapping",
                            f"`{path}.device_mapping` has {len(ids)} GPUs, not a multiple of the {per} GPUs of one "
                            f"vLLM engine (tensor_parallel_size {tp} × pipeline_parallel_size {pp})",
                            hint=f"use a multiple of {per} GPUs, or change the vLLM parallel sizes",
                            related=[_sc_path(path, "tensor_parallel_size")])
        else:
            yield ctx.error("RLC400", f"{path}.device_mapping",
                            f"`{path}.device_mapping` has {len(ids)} GPUs, not a multiple of "
                            f"`{path}.num_gpus_per_worker` ({per})",
                            hint=f"use a multiple of {per} GPUs, or change num_gpus_per_worker",
                            related=[f"{path}.num_gpus_per_worker"])


@RULES.rule("roll/placement-fits-cluster", "RLC403",
            "When num_nodes is set, every GPU id should be below num_nodes × num_gpus_per_node. ROLL ignores "
            "num_nodes (it derives the node count from the highest id), so a mapping beyond it is a warning: the run "
            "needs more nodes than the file says.",
            keys=["num_nodes", "num_gpus_per_node", "*.device_mapping"])
def placement_fits_cluster(cfg: Any, ctx: RuleContext):
    if not ctx.is_set("num_nodes"):
        return
    total = cfg.num_nodes * cfg.num_gpus_per_node
    for path, _worker, ids in placed_workers(cfg):
        high = max(ids)
        if high >= total:
            beyond = {i for i in ids if i >= total}
            nodes = -(-(high + 1) // cfg.num_gpus_per_node)
            yield ctx.warning("RLC403", f"{path}.device_mapping",
                              f"`{path}.device_mapping` uses {_ids_text(beyond)}, but num_nodes ({cfg.num_nodes}) × "
                              f"num_gpus_per_node ({cfg.num_gpus_per_node}) gives GPU ids 0-{total - 1}; ROLL ignores "
                              f"num_nodes and needs {nodes} nodes for this mapping",
                              hint=f"use GPU ids below {total}, or set num_nodes to {nodes}",
                              related=["num_nodes"])


@RULES.rule("roll/num-nodes-derived", "RLC304",
            "ROLL ignores num_nodes and derives it from the highest GPU id and num_gpus_per_node; "
            "num_gpus_per_node is overwritten with the driver node's GPU count.",
            keys=["num_nodes", "num_gpus_per_node"])
def num_nodes_derived(cfg: Any, ctx: RuleContext):
    if ctx.is_set("num_gpus_per_node"):
        yield ctx.warning("RLC304", "num_gpus_per_node",
                          f"ROLL ignores num_gpus_per_node ({cfg.num_gpus_per_node}) and uses the number of GPUs it "
                          "sees on the node that starts the pipeline",
                          hint="remove it, and make sure every node has that many GPUs; rlcfg still uses the value "
                               "to check that the device mappings fit")
    if not ctx.is_set("num_nodes"):
        return
    ids = [i for _p, _w, worker_ids in placed_workers(cfg) for i in worker_ids]
    if not ids:
        return
    derived = max(1, -(-(max(ids) + 1) // cfg.num_gpus_per_node))
    if derived < cfg.num_nodes:
        yield ctx.warning("RLC304", "num_nodes",
                          f"ROLL ignores num_nodes ({cfg.num_nodes}): it derives {derived} node"
                          f"{'s' if derived != 1 else ''} from the highest GPU id ({max(ids)}) and "
                          f"num_gpus_per_node ({cfg.num_gpus_per_node})",
                          hint=f"to use {cfg.num_nodes} nodes, extend the device mappings to GPU "
                               f"{cfg.num_nodes * cfg.num_gpus_per_node - 1}; otherwise remove num_nodes")


@RULES.rule("roll/idle-gpus", "RLC404",
            "GPU ids below the highest one that no worker uses are idle; ROLL maps id i to node "
            "i // num_gpus_per_node, so gaps still reserve nodes.", keys=["*.device_mapping"])
def idle_gpus(cfg: Any, ctx: RuleContext):
    used: set[int] = set()
    last_path = None
    for path, _worker, ids in placed_workers(cfg):
        used.update(i for i in ids if i >= 0)
        last_path = path
    if not used or last_path is None:
        return
    idle = set(range(max(used) + 1)) - used
    if idle:
        owner = next(p for p, _w, ids in placed_workers(cfg) if max(used) in ids)
        yield ctx.warning("RLC404", f"{owner}.device_mapping",
                          f"{_ids_text(idle)} below the highest GPU id in use ({max(used)}) are assigned to no "
                          "worker",
                          hint="start the mappings at GPU 0 without gaps (ROLL counts nodes from the highest id, "
                               "see ROLL issue #205)")


@RULES.rule("roll/reward-overlaps-rollout", "RLC401",
            "A reward worker with a model must not share GPUs with actor_infer (it scores while generation is "
            "running); in async mode actor_infer sharing with training workers is only a warning.",
            keys=["rewards.*.device_mapping", "actor_infer.device_mapping", "async_generation_ratio"])
def reward_overlaps_rollout(cfg: Any, ctx: RuleContext):
    infer = set(device_ids(cfg.actor_infer) or ())
    placed = list(placed_workers(cfg))
    gpu_rewards = [(p, w, ids) for p, w, ids in placed
                   if (p.startswith("rewards.") or p in ("reward_model", "reward")) and loads_reward_model(w)]
    for path, _worker, ids in gpu_rewards:
        shared = infer & set(ids)
        if shared:
            yield ctx.error("RLC401", f"{path}.device_mapping",
                            f"`{path}` ({_ids_text(ids)}) shares {_ids_text(shared)} with actor_infer "
                            f"({_ids_text(infer)}); reward models score responses while actor_infer is still "
                            "generating, so they compete with the rollout engine for GPU memory",
                            hint="give the reward model GPUs outside actor_infer's device_mapping (it may share "
                                 "actor_train's)", related=["actor_infer.device_mapping"])
    for index, (path, _worker, ids) in enumerate(gpu_rewards):
        for other, _w, other_ids in gpu_rewards[index + 1:]:
            shared = set(ids) & set(other_ids)
            if shared:
                yield ctx.warning("RLC401", f"{other}.device_mapping",
                                  f"reward workers `{path}` and `{other}` share {_ids_text(shared)}; both models stay "
                                  "loaded during scoring", hint="give each reward model its own GPUs",
                                  related=[f"{path}.device_mapping"])
    if cfg.async_generation_ratio > 0 and infer:
        for path, _worker, ids in placed:
            if path in ("actor_train", "reference", "critic"):
                shared = infer & set(ids)
                if shared:
                    yield ctx.warning(
                        "RLC401", "actor_infer.device_mapping",
                        f"with async_generation_ratio {cfg.async_generation_ratio}, actor_infer shares "
                        f"{_ids_text(shared)} with {path}; generation then waits for training on those GPUs",
                        hint="give actor_infer its own GPUs in async mode", related=[f"{path}.device_mapping"])


# ---- strategies ---------------------------------------------------------------------------------------------


@RULES.rule("roll/strategy-roles", "RLC306",
            "actor_train needs a training strategy; actor_infer must use vllm or sglang. hf_infer, which "
            "ROLL's Configuration Guide lists, only warns, and is accepted silently when every worker's strategy "
            "also runs on CPU (fsdp2_train / fsdp2_infer / hf_infer), the CPU-only setup rlcfg run executes.",
            keys=["actor_train.strategy_args.strategy_name", "actor_infer.strategy_args.strategy_name"],
            also=("RLC203",))
def strategy_roles(cfg: Any, ctx: RuleContext):
    train = strategy_name(cfg.actor_train)
    if train is None and rollout_only(cfg):
        pass  # a rollout-only config: actor_train is never started
    elif train is None:
        yield ctx.error("RLC203", "actor_train.strategy_args",
                        "`actor_train.strategy_args` is not set, so actor_train has no training strategy",
                        hint="add `strategy_args: {strategy_name: megatron_train}` (or fsdp2_train)")
    elif train not in TRAIN_STRATEGIES:
        yield ctx.error("RLC306", "actor_train.strategy_args.strategy_name",
                        f"`actor_train.strategy_args.strategy_name` is {train}, an inference strategy; actor_train "
                        "must train", hint="use megatron_train or fsdp2_train")
    infer = strategy_name(cfg.actor_infer)
    if infer is None:
        yield ctx.error("RLC203", "actor_infer.strategy_args",
                        "`actor_infer.strategy_args` is not set, so actor_infer has no rollout engine",
                        hint="add `strategy_args: {strategy_name: vllm}` (or sglang)")
    elif infer == "hf_infer":
        # The seed documents hf_infer for inference; ROLL at HEAD refuses it for actor_infer, but a pipeline that
        # is CPU-capable throughout is the one rlcfg's runtime runs with transformers generate, so it stays quiet.
        if cpu_capable(cfg):
            return
        yield ctx.warning("RLC306", "actor_infer.strategy_args.strategy_name",
                          "`actor_infer.strategy_args.strategy_name` is hf_infer; ROLL's Configuration Guide lists "
                          "it, but ROLL (main) asserts that actor_infer uses vllm or sglang",
                          hint="use vllm or sglang")
    elif infer not in ROLLOUT_STRATEGIES:
        yield ctx.error("RLC306", "actor_infer.strategy_args.strategy_name",
                        f"`actor_infer.strategy_args.strategy_name` is {infer}; ROLL requires vllm or sglang for "
                        "actor_infer", hint="use vllm or sglang")


@RULES.rule("roll/strategy-release", "RLC202",
            "A worker's strategy is one the judged release has: the DeepSpeed strategies (deepspeed_train, "
            "deepspeed_infer, diffusion_deepspeed_train) are v0.2.1's and earlier (v0.3.0 removed them); FSDP2 came "
            "in v0.2.x, diffusion_deepspeed_train in v0.1.x after v0.1.0.", keys=["*.strategy_args.strategy_name"])
def strategy_release(cfg: Any, ctx: RuleContext):
    allowed = STRATEGIES_OF.get(ctx.release or "main", STRATEGY_NAMES)
    for path, worker in workers(cfg):
        name = strategy_name(worker)
        if name is None or name in allowed:
            continue
        if name not in DEEPSPEED_STRATEGIES or ctx.release in WITH_DEEPSPEED:
            having = [r for r, names in STRATEGIES_OF.items() if name in names]
            yield ctx.error("RLC202", f"{path}.strategy_args.strategy_name",
                            f"`{path}.strategy_args.strategy_name` is {name}, which ROLL {ctx.release} does not have "
                            f"(its loader stops on it; it has {', '.join(allowed)})",
                            hint=f"use one of those, or judge the file by a release that has it "
                                 f"(`--framework-version {having[-1]}`)" if having else "use one of those")
            continue
        if name in DEEPSPEED_STRATEGIES:
            yield ctx.error("RLC202", f"{path}.strategy_args.strategy_name",
                            f"`{path}.strategy_args.strategy_name` is {name}: ROLL removed DeepSpeed after v0.2.1 "
                            "(v0.3.0 and main have no DeepSpeed strategy), so this config is written for v0.2.1 or "
                            "earlier", hint="judge it by that release with `--framework-version v0.2.1`, or use "
                                            "fsdp2_train / megatron_train (fsdp2_infer / megatron_infer to infer)")


# The strategies that look up their strategy_config options by name (`strategy_config.get("fsdp_size", 1)`) or not
# at all, rather than passing the mapping on as keyword arguments: another strategy's option is never read there.
STRATEGIES_READING_BY_NAME = ("fsdp2_train", "fsdp2_infer", "hf_infer")


@RULES.rule("roll/strategy-config-keys", "RLC102",
            "strategy_config keys must be options of the chosen strategy: a near-miss is an error; another "
            "strategy's key is an error where the strategy passes its options on as keyword arguments (Megatron, "
            "DeepSpeed, vLLM, SGLang) and a warning where it only looks up its own (FSDP2, hf_infer: RLC307); an "
            "option rlcfg does not list is passed to the engine unchecked (warning).",
            keys=["*.strategy_args.strategy_config"], also=("RLC307",))
def strategy_config_keys(cfg: Any, ctx: RuleContext):
    owners: dict[str, list[str]] = {}
    for name, model in CONFIG_OF_STRATEGY.items():
        for key in model.model_fields:
            owners.setdefault(key, []).append(name)
    for path, worker in workers(cfg):
        name = strategy_name(worker)
        config = worker.strategy_args.strategy_config if name else None
        if config is None or getattr(type(config), "open", False):
            continue
        known = list(type(config).model_fields)
        for key in (config.model_extra or {}):
            where = f"`{path}.strategy_args.strategy_config`"
            full = _sc_path(path, key)
            # judged against the chosen strategy: muted with it when its name is wrong (a default stands in)
            chosen = [f"{path}.strategy_args.strategy_name"]
            close = close_matches(key, known, n=1, cutoff=0.75)
            if close:
                yield ctx.error("RLC102", full, f"unknown key `{key}` in {where} (strategy {name})",
                                hint=f"did you mean `{close[0]}`?", related=chosen)
            elif key in owners:
                alike = close_matches(key, known, n=1, cutoff=0.5)
                hint = f"`{key}` is an option of {', '.join(owners[key])}"
                hint += f"; {name} takes `{alike[0]}`" if alike else f", not of {name}"
                if name in STRATEGIES_READING_BY_NAME:
                    yield ctx.warning("RLC307", full, f"`{key}` is not an option of strategy {name} ({where}): ROLL's "
                                      f"{name} strategy reads only the options it asks for, so it is never read",
                                      hint=hint + "; remove it", related=chosen)
                else:
                    yield ctx.error("RLC102", full, f"`{key}` is not an option of strategy {name} ({where})",
                                    hint=hint, related=chosen)
            else:
                yield ctx.warning("RLC102", full,
                                  f"`{key}` in {where} is not an option rlcfg knows for {name}; ROLL passes it to "
                                  f"{ENGINE_NAMES.get(name, name)} unchecked",
                                  hint=f"check the spelling against {ENGINE_NAMES.get(name, name)}'s documentation",
                                  related=chosen)


@RULES.rule("roll/megatron-parallel", "RLC400",
            "A Megatron worker's GPU count must divide by tp × pp × cp and by etp × ep × pp.",
            keys=["*.strategy_args.strategy_config.tensor_model_parallel_size", "*.device_mapping"])
def megatron_parallel(cfg: Any, ctx: RuleContext):
    for path, worker, ids in placed_workers(cfg):
        if strategy_name(worker) not in ("megatron_train", "megatron_infer"):
            continue
        tp, pp, cp = megatron_sizes(worker)
        world = len(ids)
        if world % (tp * pp * cp):
            yield ctx.error("RLC400", f"{path}.device_mapping",
                            f"`{path}` has {world} GPUs, not a multiple of tensor_model_parallel_size ({tp}) × "
                            f"pipeline_model_parallel_size ({pp}) × context_parallel_size ({cp}) = {tp * pp * cp}",
                            hint=f"use a multiple of {tp * pp * cp} GPUs, or smaller parallel sizes",
                            related=[_sc_path(path, "tensor_model_parallel_size")])
            continue
        ep = int(strategy_value(worker, "expert_model_parallel_size", 1))
        etp = int(strategy_value(worker, "expert_tensor_parallel_size", tp))
        if ep > 1 and world % (etp * ep * pp):
            yield ctx.error("RLC400", _sc_path(path, "expert_model_parallel_size"),
                            f"`{path}` has {world} GPUs, not a multiple of expert_tensor_parallel_size ({etp}) × "
                            f"expert_model_parallel_size ({ep}) × pipeline_model_parallel_size ({pp}) = "
                            f"{etp * ep * pp}", hint=f"choose expert_model_parallel_size dividing {world // (etp * pp)}"
                            if world % (etp * pp) == 0 else "change the expert parallel sizes",
                            related=[f"{path}.device_mapping"])


@RULES.rule("roll/megatron-options", "RLC306",
            "ROLL's Megatron strategy does not support overlap_param_gather; the allgather dispatcher cannot "
            "handle variable sequence lengths.",
            keys=["*.strategy_args.strategy_config.overlap_param_gather",
                  "*.strategy_args.strategy_config.moe_token_dispatcher_type"])
def megatron_options(cfg: Any, ctx: RuleContext):
    for path, worker in workers(cfg):
        if strategy_name(worker) not in ("megatron_train", "megatron_infer"):
            continue
        if strategy_value(worker, "overlap_param_gather", False):
            yield ctx.error("RLC306", _sc_path(path, "overlap_param_gather"),
                            f"`{_sc_path(path, 'overlap_param_gather')}` is true, which ROLL's Megatron strategy "
                            "does not support", hint="set it to false (overlap_grad_reduce is supported)")
        if (strategy_value(worker, "variable_seq_lengths", False)
                and strategy_value(worker, "moe_token_dispatcher_type", "allgather") == "allgather"
                and int(strategy_value(worker, "expert_model_parallel_size", 1)) > 1):
            yield ctx.error("RLC306", _sc_path(path, "moe_token_dispatcher_type"),
                            "the allgather MoE token dispatcher cannot handle variable_seq_lengths: true",
                            hint="set moe_token_dispatcher_type: alltoall",
                            related=[_sc_path(path, "variable_seq_lengths")])


@RULES.rule("roll/fsdp2-parallel", "RLC400",
            "FSDP2: ulysses_size must divide the GPU count and be <= fsdp_size; an HSDP fsdp_size "
            "must divide the GPU count.", keys=["*.model_args.ulysses_size",
                                                "*.strategy_args.strategy_config.fsdp_size"], also=("RLC306",))
def fsdp2_parallel(cfg: Any, ctx: RuleContext):
    for path, worker, ids in placed_workers(cfg):
        name = strategy_name(worker)
        if name not in ("fsdp2_train", "fsdp2_infer"):
            continue
        world = len(ids)
        ulysses = worker.model_args.ulysses_size or 1
        if ulysses > 1 and world % ulysses:
            yield ctx.error("RLC400", f"{path}.model_args.ulysses_size",
                            f"`{path}.model_args.ulysses_size` ({ulysses}) does not divide the worker's {world} GPUs",
                            hint=f"choose a ulysses_size that divides {world}", related=[f"{path}.device_mapping"])
            continue
        if not name.startswith("fsdp2"):
            continue
        fsdp = int(strategy_value(worker, "fsdp_size", 1))
        if 1 < fsdp < world and world % fsdp:
            yield ctx.error("RLC400", _sc_path(path, "fsdp_size"),
                            f"`{_sc_path(path, 'fsdp_size')}` ({fsdp}) does not divide the worker's {world} GPUs "
                            "(HSDP needs world_size / fsdp_size replicas)",
                            hint=f"choose an fsdp_size that divides {world}, or >= {world} for pure FSDP2")
        elif 1 < fsdp < ulysses:
            yield ctx.error("RLC306", _sc_path(path, "fsdp_size"),
                            f"`{_sc_path(path, 'fsdp_size')}` ({fsdp}) is smaller than ulysses_size ({ulysses})",
                            hint=f"set fsdp_size >= {ulysses}", related=[f"{path}.model_args.ulysses_size"])


@RULES.rule("roll/rollout-engine-sizes", "RLC305",
            "SGLang: tp × pp must be a multiple of num_gpus_per_worker, which ROLL does not derive (tp "
            "defaults to num_gpus_per_worker). vLLM: data_parallel_size must equal the worker's world size.",
            keys=["actor_infer.num_gpus_per_worker", "actor_infer.strategy_args.strategy_config.data_parallel_size"])
def rollout_engine_sizes(cfg: Any, ctx: RuleContext):
    for path, worker, ids in placed_workers(cfg):
        name = strategy_name(worker)
        if name == "sglang":
            per = worker.num_gpus_per_worker
            # SGLang's strategy defaults tensor_parallel_size to the worker's own GPUs (its placement groups, one
            # per GPU of num_gpus_per_worker), so an unset tp always fits.
            tp = int(strategy_value(worker, "tensor_parallel_size", per))
            pp = int(strategy_value(worker, "pipeline_parallel_size", 1))
            if (tp * pp) % per:
                yield ctx.error("RLC305", f"{path}.num_gpus_per_worker",
                                f"SGLang engine of `{path}` spans tensor_parallel_size ({tp}) × pipeline_parallel_size "
                                f"({pp}) = {tp * pp} GPUs, not a multiple of `{path}.num_gpus_per_worker` ({per})",
                                hint=f"set num_gpus_per_worker: {tp * pp} (ROLL does not derive it for SGLang)",
                                related=[_sc_path(path, "tensor_parallel_size")])
        elif name == "vllm":
            dp = strategy_value(worker, "data_parallel_size", None)
            per = gpus_per_worker(worker)
            if dp is not None and per and len(ids) % per == 0 and dp != len(ids) // per:
                yield ctx.error("RLC305", _sc_path(path, "data_parallel_size"),
                                f"`{_sc_path(path, 'data_parallel_size')}` ({dp}) differs from the number of vLLM "
                                f"workers, len(device_mapping) {len(ids)} / (tp × pp) {per} = {len(ids) // per}",
                                hint=f"remove it, or set it to {len(ids) // per}")


@RULES.rule("roll/router-replay", "RLC306",
            "router_replay.mode R2 is not implemented; R3 works with megatron_train and sglang only.",
            keys=["*.router_replay.mode"])
def router_replay(cfg: Any, ctx: RuleContext):
    for path, worker in workers(cfg):
        mode = worker.router_replay.mode
        key = f"{path}.router_replay.mode"
        if mode == "R2":
            yield ctx.error("RLC306", key, f"`{key}` is R2, which ROLL does not implement",
                            hint="use R3 or disable")
        elif mode == "R3" and strategy_name(worker) not in ("megatron_train", "sglang"):
            yield ctx.warning("RLC306", key, f"`{key}` is R3, which ROLL supports only with megatron_train and "
                                             f"sglang, not {strategy_name(worker)}", hint="set it to disable")


@RULES.rule("roll/lora-strategy", "RLC306", "LoRA is not supported by the sglang and hf_infer strategies.",
            keys=["*.model_args.lora_target"])
def lora_strategy(cfg: Any, ctx: RuleContext):
    for path, worker in workers(cfg):
        if worker.model_args.lora_target and strategy_name(worker) in ("sglang", "hf_infer"):
            yield ctx.error("RLC306", f"{path}.model_args.lora_target",
                            f"`{path}.model_args.lora_target` is set, but the {strategy_name(worker)} strategy does "
                            "not support LoRA", hint="use vllm for LoRA rollouts")


# ---- batch sizes --------------------------------------------------------------------------------------------


@RULES.rule("roll/global-train-batch", "RLC300",
            "rollout_batch_size × num_return_sequences_in_group must be a multiple of the global train batch: "
            "per_device_train_batch_size × gradient_accumulation_steps × world_size / ulysses_size (FSDP2) or "
            "/ (tp × pp × cp) (Megatron).",
            keys=["rollout_batch_size", "num_return_sequences_in_group", "*.training_args.per_device_train_batch_size",
                  "*.training_args.gradient_accumulation_steps"])
def global_train_batch(cfg: Any, ctx: RuleContext):
    if is_agentic(cfg):
        return  # a trajectory may yield several samples (step-wise env managers): the count is not known here
    samples = cfg.rollout_batch_size * cfg.num_return_sequences_in_group
    for path in ("actor_train", "critic"):
        worker = getattr(cfg, path)
        if path == "critic" and not critic_on(cfg):
            continue
        name = strategy_name(worker)
        ids = device_ids(worker)
        if not ids or name not in TRAIN_STRATEGIES:
            continue
        world = len(ids)
        if name == "megatron_train":
            tp, pp, cp = megatron_sizes(worker)
            divisor = tp * pp * cp
            split = (f"world_size {world} / (tensor_model_parallel_size {tp} × pipeline_model_parallel_size {pp} × "
                     f"context_parallel_size {cp})")
        else:
            divisor = worker.model_args.ulysses_size or 1
            split = f"world_size {world} / ulysses_size {divisor}"
        if divisor <= 0 or world % divisor:
            continue  # reported by the parallel-size rules
        dp = world // divisor
        args = worker.training_args
        micro = args.per_device_train_batch_size
        global_batch = micro * args.gradient_accumulation_steps * dp
        if samples % global_batch == 0:
            continue
        if samples % (micro * dp) == 0:
            hint = (f"set `{path}.training_args.gradient_accumulation_steps: {samples // (micro * dp)}` for one "
                    f"optimizer step per rollout")
        else:
            hint = (f"per_device_train_batch_size × gradient_accumulation_steps × {dp} (data-parallel ranks) must "
                    f"divide {samples}")
        yield ctx.error("RLC300", f"{path}.training_args.gradient_accumulation_steps",
                        f"rollout_batch_size ({cfg.rollout_batch_size}) × num_return_sequences_in_group "
                        f"({cfg.num_return_sequences_in_group}) = {samples} samples per step is not a multiple of "
                        f"{path}'s global train batch: per_device_train_batch_size ({micro}) × "
                        f"gradient_accumulation_steps ({args.gradient_accumulation_steps}) × {split} = {global_batch}",
                        hint=hint, related=["rollout_batch_size", "num_return_sequences_in_group",
                                            f"{path}.training_args.per_device_train_batch_size"],
                        constraint=Constraint.divides(
                            [(f"{path}.training_args.per_device_train_batch_size", micro),
                             (f"{path}.training_args.gradient_accumulation_steps", args.gradient_accumulation_steps),
                             (None, dp)],
                            [("rollout_batch_size", cfg.rollout_batch_size),
                             ("num_return_sequences_in_group", cfg.num_return_sequences_in_group)]))


@RULES.rule("roll/megatron-rollout-batch", "RLC300",
            "With a Megatron actor_train, rollout_batch_size must divide by its data-parallel size.",
            keys=["rollout_batch_size", "actor_train.device_mapping"])
def megatron_rollout_batch(cfg: Any, ctx: RuleContext):
    worker = cfg.actor_train
    ids = device_ids(worker)
    if strategy_name(worker) != "megatron_train" or not ids:
        return
    tp, pp, cp = megatron_sizes(worker)
    if len(ids) % (tp * pp * cp):
        return
    dp = len(ids) // (tp * pp * cp)
    if dp > 1 and cfg.rollout_batch_size % dp:
        yield ctx.error("RLC300", "rollout_batch_size",
                        f"rollout_batch_size ({cfg.rollout_batch_size}) is not a multiple of actor_train's Megatron "
                        f"data-parallel size {dp} ({len(ids)} GPUs / (tp {tp} × pp {pp} × cp {cp}))",
                        hint=f"use a multiple of {dp}, e.g. {-(-cfg.rollout_batch_size // dp) * dp}",
                        related=["actor_train.device_mapping"],
                        constraint=Constraint.divides([(None, dp)], [("rollout_batch_size", cfg.rollout_batch_size)]))


@RULES.rule("roll/megatron-warmup-within-decay", "RLC305",
            "A Megatron training worker's LR warm-up ends before its schedule does: ROLL hands Megatron's scheduler "
            "the worker's max_steps as the decay length, and Megatron asserts warm-up < decay when the worker starts.",
            keys=["*.training_args.warmup_steps", "*.training_args.warmup_ratio", "max_steps"])
def megatron_warmup_within_decay(cfg: Any, ctx: RuleContext):
    if is_agentic(cfg) or cfg.max_steps <= 0:
        return  # agentic step counts are the env managers'; max_steps <= 0 has its own error
    for path in ("actor_train", "critic"):
        worker = getattr(cfg, path)
        if (path == "critic" and not critic_on(cfg)) or strategy_name(worker) != "megatron_train":
            continue
        ids = device_ids(worker)
        tp, pp, cp = megatron_sizes(worker)
        if not ids or len(ids) % (tp * pp * cp):
            continue  # reported by the parallel-size rules
        args = worker.training_args
        if args.per_device_train_batch_size * args.gradient_accumulation_steps <= 0:
            continue
        length = schedule_length(cfg, path, len(ids) // (tp * pp * cp))
        warmup = warmup_steps(args, length)
        if 0 < length and warmup < length:
            continue
        key = "warmup_steps" if args.warmup_steps > 0 else "warmup_ratio"
        written = args.warmup_steps if args.warmup_steps > 0 else args.warmup_ratio
        yield ctx.error("RLC305", f"{path}.training_args.{key}",
                        f"`{path}`'s LR schedule is {length} optimizer steps long (max_steps {cfg.max_steps} × "
                        f"{cfg.rollout_batch_size * cfg.num_return_sequences_in_group} samples per step"
                        + (f" × ppo_epochs {cfg.ppo_epochs}" if path == "actor_train" and cfg.ppo_epochs != 1 else "")
                        + f" / global train batch), and a warm-up of {warmup} steps ({key} {written}) does not end "
                        "before it; ROLL accepts this at load but fails when the worker starts: Megatron's LR "
                        "scheduler asserts warm-up < decay",
                        hint=(f"use a warm-up below {length} steps" if length > 0 else
                              "raise max_steps: the schedule needs at least one step"),
                        related=["max_steps"])


@RULES.rule("roll/dynamic-batching", "RLC302",
            "Dynamic batching needs a token budget per micro-batch of at least sequence_length; load-balanced "
            "sequence packing needs max_packed_sequence_length_* >= sequence_length.",
            keys=["*.use_dynamic_batching_in_train", "*.max_tokens_per_microbatch_in_train",
                  "*.sequence_packing_args.algorithm"], also=("RLC303",))
def dynamic_batching(cfg: Any, ctx: RuleContext):
    length = effective_sequence_length(cfg)
    for path, worker in workers(cfg):
        for phase in ("train", "infer"):
            if not getattr(worker, f"use_dynamic_batching_in_{phase}"):
                continue
            key = f"{path}.max_tokens_per_microbatch_in_{phase}"
            budget = getattr(worker, f"max_tokens_per_microbatch_in_{phase}")
            if not budget:
                yield ctx.error("RLC302", key, f"`{path}.use_dynamic_batching_in_{phase}` is true but `{key}` is "
                                               f"{budget if budget is not None else 'not set'}",
                                hint=f"set it, e.g. to {length * 2 if length else 8192} (sequence_length × 2)")
            elif length and budget < length:
                yield ctx.error("RLC303", key, f"`{key}` ({budget}) is smaller than sequence_length ({length}); a "
                                               "full-length sample would not fit in a micro-batch",
                                hint=f"set it to at least {length}")
        packing = worker.sequence_packing_args
        if worker.use_sequence_packing and packing.algorithm == "load_balance" and length:
            for phase in ("train", "forward"):
                limit = getattr(packing, f"max_packed_sequence_length_{phase}")
                key = f"{path}.sequence_packing_args.max_packed_sequence_length_{phase}"
                if limit is None:
                    yield ctx.error("RLC302", key, f"load_balance sequence packing on `{path}` needs `{key}`",
                                    hint=f"set it to at least sequence_length ({length})")
                elif limit < length:
                    yield ctx.error("RLC303", key, f"`{key}` ({limit}) is smaller than sequence_length ({length})",
                                    hint=f"set it to at least {length}")


# ---- pipeline keys ------------------------------------------------------------------------------------------


@RULES.rule("roll/lengths", "RLC203",
            "response_length or sequence_length must be set; val_prompt_length and val_sequence_length go "
            "together; sequence_length wins over response_length.",
            keys=["response_length", "sequence_length", "val_prompt_length", "val_sequence_length"],
            also=("RLC302", "RLC303", "RLC304"))
def lengths(cfg: Any, ctx: RuleContext):
    if not cfg.response_length and not cfg.sequence_length:
        yield ctx.error("RLC203", "response_length", "neither response_length nor sequence_length is set",
                        hint="set response_length (e.g. 4096); ROLL derives sequence_length = prompt_length + "
                             "response_length", related=["sequence_length"])
    if (cfg.val_prompt_length is None) != (cfg.val_sequence_length is None):
        given, missing = (("val_prompt_length", "val_sequence_length") if cfg.val_prompt_length is not None
                          else ("val_sequence_length", "val_prompt_length"))
        yield ctx.error("RLC302", given, f"{given} is set but {missing} is not; ROLL needs both or neither",
                        hint=f"set {missing} too, or remove {given} to use the training lengths")
    if (cfg.sequence_length and cfg.response_length and cfg.prompt_length is not None
            and cfg.prompt_length + cfg.response_length != cfg.sequence_length):
        yield ctx.warning("RLC304", "response_length",
                          f"response_length ({cfg.response_length}) is ignored because sequence_length "
                          f"({cfg.sequence_length}) is set; responses get sequence_length − prompt_length = "
                          f"{cfg.sequence_length - cfg.prompt_length} tokens", related=["sequence_length"],
                          hint="set only one of response_length and sequence_length")
    # RLVR generates sequence_length − prompt_length tokens per response; the agentic pipeline bounds each turn
    # by generating_args.max_new_tokens and the whole trajectory by sequence_length, so prompt_length is unused.
    if (not is_agentic(cfg) and cfg.sequence_length and cfg.prompt_length
            and cfg.sequence_length <= cfg.prompt_length):
        yield ctx.error("RLC303", "sequence_length",
                        f"sequence_length ({cfg.sequence_length}) leaves no room for a response after prompt_length "
                        f"({cfg.prompt_length}); ROLL accepts this at load but fails when it generates with "
                        "max_new_tokens = sequence_length − prompt_length <= 0",
                        hint="make sequence_length larger than prompt_length", related=["prompt_length"])


@RULES.rule("roll/max-steps", "RLC201", "The agentic pipeline needs max_steps > 0 or -1 (no limit), which its "
                                      "config checks at load; the RLVR pipeline runs no step with max_steps <= 0 "
                                      "(a warning, and `rlcfg run` refuses it).", keys=["max_steps"],
            also=("RLC118",))
def max_steps(cfg: Any, ctx: RuleContext):
    if is_agentic(cfg):
        if not (cfg.max_steps > 0 or cfg.max_steps == -1):
            yield ctx.error("RLC201", "max_steps", f"max_steps ({cfg.max_steps}) must be > 0, or -1 for no limit; "
                                                   "ROLL's agentic config stops at load", hint="set max_steps: 200")
        return
    if cfg.max_steps <= 0:
        yield ctx.warning("RLC201", "max_steps", f"max_steps is {cfg.max_steps}: ROLL accepts it and starts the RLVR "
                                                 "pipeline, whose loop then runs no step: the run trains nothing",
                          hint="set the number of pipeline steps, e.g. max_steps: 500")
        yield _run_refusal("max_steps", cfg.max_steps, "rlcfg runs at least one step", "set max_steps: 500")


@RULES.rule("roll/ppo-epochs", "RLC201", "ppo_epochs 0: ROLL runs, and its actor takes no optimiser step (the "
                                        "samples of each step are iterated zero times); `rlcfg run` refuses it.",
            keys=["ppo_epochs"], also=("RLC118",))
def ppo_epochs(cfg: Any, ctx: RuleContext):
    if cfg.ppo_epochs == 0:
        yield ctx.warning("RLC201", "ppo_epochs", "ppo_epochs is 0: ROLL accepts it and runs, but the actor iterates "
                                                  "each step's samples zero times and never takes an optimiser step; "
                                                  "the rollouts train nothing",
                          hint="set ppo_epochs: 1")
        yield _run_refusal("ppo_epochs", 0, "rlcfg runs at least one pass over each step's samples",
                           "set ppo_epochs: 1")


@RULES.rule("roll/profilers-exclusive", "RLC301", "profiler_timeline and profiler_memory are mutually "
                                                  "exclusive.", keys=["profiler_timeline", "profiler_memory"])
def profilers_exclusive(cfg: Any, ctx: RuleContext):
    if cfg.profiler_timeline and cfg.profiler_memory:
        yield ctx.error("RLC301", "profiler_memory", "profiler_timeline and profiler_memory are both true; ROLL runs "
                                                     "one profiling mode at a time",
                        hint="set one of them to false", related=["profiler_timeline"])


@RULES.rule("roll/prompt-or-messages", "RLC301", "data_args.prompt and data_args.messages are mutually "
                                                 "exclusive.", keys=["*.data_args.prompt", "*.data_args.messages"])
def prompt_or_messages(cfg: Any, ctx: RuleContext):
    for path, worker in workers(cfg):
        data = worker.data_args
        if data is not None and data.prompt is not None and data.messages is not None:
            yield ctx.error("RLC301", f"{path}.data_args.messages",
                            f"`{path}.data_args.prompt` ({data.prompt!r}) and `{path}.data_args.messages` "
                            f"({data.messages!r}) are both set; a sample is built from one column or the other",
                            hint="keep `prompt` for a plain-text column or `messages` for a chat column",
                            related=[f"{path}.data_args.prompt"])


@RULES.rule("roll/async-generation", "RLC302",
            "async_generation_ratio > 0 needs generate_opt_level 1 and a ratio >= 1.",
            keys=["async_generation_ratio", "generate_opt_level"], also=("RLC201", "RLC304"))
def async_generation(cfg: Any, ctx: RuleContext):
    ratio = cfg.async_generation_ratio
    if ratio == 0:
        return
    if ratio < 1:
        yield ctx.error("RLC201", "async_generation_ratio",
                        f"async_generation_ratio ({ratio}) must be 0 (synchronous) or >= 1.0",
                        hint="use 1 for one step of generation ahead, or 0")
    if cfg.generate_opt_level != 1:
        yield ctx.error("RLC302", "generate_opt_level",
                        f"async_generation_ratio ({ratio}) needs generate_opt_level 1 (the request scheduler), "
                        f"got {cfg.generate_opt_level}", hint="set generate_opt_level: 1",
                        related=["async_generation_ratio"])
    if (group_size(cfg) > 1 and ctx.is_set("is_num_return_sequences_expand")
            and not cfg.is_num_return_sequences_expand):
        yield ctx.warning("RLC304", "is_num_return_sequences_expand",
                          "ROLL sets is_num_return_sequences_expand to true in async mode when "
                          f"num_return_sequences_in_group ({cfg.num_return_sequences_in_group}) > 1",
                          hint="remove the key or set it to true")


# ---- silent rewrites (RLC304) and keys without effect (RLC307) ----------------------------------------------


@RULES.rule("roll/num-gpus-per-worker-rewritten", "RLC304",
            "ROLL forces num_gpus_per_worker to 1 for training/megatron/fsdp2 strategies and to tp × pp for vLLM; "
            "world_size is derived from device_mapping.",
            keys=["*.num_gpus_per_worker", "*.world_size"])
def num_gpus_per_worker_rewritten(cfg: Any, ctx: RuleContext):
    for path, worker in workers(cfg):
        key = f"{path}.num_gpus_per_worker"
        effective = gpus_per_worker(worker)
        if ctx.is_set(key) and effective != worker.num_gpus_per_worker:
            name = strategy_name(worker)
            why = ("tensor_parallel_size × pipeline_parallel_size of vLLM" if name == "vllm"
                   else f"always 1 for {name}")
            yield ctx.warning("RLC304", key, f"ROLL replaces `{key}` ({worker.num_gpus_per_worker}) with {effective} "
                                             f"({why})", hint="remove it")
        ids = device_ids(worker)
        wkey = f"{path}.world_size"
        if ids and ctx.is_set(wkey) and effective and len(ids) % effective == 0 \
                and worker.world_size != len(ids) // effective:
            yield ctx.warning("RLC304", wkey, f"ROLL replaces `{wkey}` ({worker.world_size}) with len(device_mapping) "
                                              f"/ num_gpus_per_worker = {len(ids) // effective}",
                              hint="remove world_size; device_mapping decides it")


@RULES.rule("roll/generation-rewritten", "RLC304",
            "RLVR overwrites actor_infer's max_new_tokens with sequence_length − prompt_length and its "
            "num_return_sequences with num_return_sequences_in_group.",
            keys=["actor_infer.generating_args.max_new_tokens", "actor_infer.generating_args.num_return_sequences",
                  "validation.generating_args.max_new_tokens"])
def generation_rewritten(cfg: Any, ctx: RuleContext):
    if is_agentic(cfg):
        return  # the agentic pipeline keeps max_new_tokens and forces num_return_sequences to 1
    length = effective_sequence_length(cfg)
    gen = cfg.actor_infer.generating_args
    if gen is not None:
        key = "actor_infer.generating_args.max_new_tokens"
        if length and cfg.prompt_length and ctx.is_set(key) and gen.max_new_tokens != length - cfg.prompt_length:
            yield ctx.warning("RLC304", key,
                              f"ROLL replaces `{key}` ({gen.max_new_tokens}) with sequence_length − prompt_length = "
                              f"{length} − {cfg.prompt_length} = {length - cfg.prompt_length}",
                              hint="set response_length instead (or write `max_new_tokens: ${response_length}`)")
        key = "actor_infer.generating_args.num_return_sequences"
        if ctx.is_set(key) and gen.num_return_sequences != cfg.num_return_sequences_in_group:
            yield ctx.warning("RLC304", key,
                              f"ROLL replaces `{key}` ({gen.num_return_sequences}) with num_return_sequences_in_group "
                              f"({cfg.num_return_sequences_in_group})",
                              hint="set num_return_sequences_in_group (or write "
                                   "`num_return_sequences: ${num_return_sequences_in_group}`)")
    val = cfg.validation
    if val is not None and val.generating_args is not None:
        val_prompt = cfg.val_prompt_length if cfg.val_prompt_length is not None else cfg.prompt_length
        val_length = cfg.val_sequence_length if cfg.val_sequence_length is not None else length
        key = "validation.generating_args.max_new_tokens"
        if val_prompt and val_length and ctx.is_set(key) \
                and val.generating_args.max_new_tokens != val_length - val_prompt:
            yield ctx.warning("RLC304", key,
                              f"ROLL replaces `{key}` ({val.generating_args.max_new_tokens}) with "
                              f"val_sequence_length − val_prompt_length = {val_length - val_prompt}",
                              hint="set val_prompt_length and val_sequence_length instead")


@RULES.rule("roll/model-paths", "RLC304",
            "Unless actor_train, actor_infer and reference all set model_name_or_path, ROLL gives all three "
            "`pretrain`; the critic falls back to reward_pretrain.",
            keys=["pretrain", "reward_pretrain", "*.model_args.model_name_or_path"], also=("RLC203",))
def model_paths(cfg: Any, ctx: RuleContext):
    trio = ("actor_train", "actor_infer", "reference")
    lacking = [p for p in trio if getattr(cfg, p).model_args.model_name_or_path is None]
    if lacking:
        if cfg.pretrain is None:
            # A warning, not an error: the seed's example elides the model (DESIGN rule 5).
            yield ctx.warning("RLC203", "pretrain",
                              f"no model for {', '.join(lacking)}: pretrain is not set and "
                              f"`{lacking[0]}.model_args.model_name_or_path` is not set either; ROLL fails when it "
                              "loads the model",
                              hint="set `pretrain:` to the policy model (a Hugging Face id or a local path)")
        for path in trio:
            key = f"{path}.model_args.model_name_or_path"
            value = getattr(cfg, path).model_args.model_name_or_path
            if ctx.is_set(key) and value != cfg.pretrain:
                yield ctx.warning("RLC304", key,
                                  f"ROLL replaces `{key}` ({value!r}) with pretrain ({cfg.pretrain!r}) because "
                                  f"`{lacking[0]}.model_args.model_name_or_path` is not set",
                                  hint="set model_name_or_path on all three of actor_train, actor_infer and reference, "
                                       "or only pretrain", related=["pretrain"])
    if (critic_on(cfg) and cfg.critic.device_mapping is not None  # else roll/device-mapping-required warns
            and cfg.critic.model_args.model_name_or_path is None and cfg.reward_pretrain is None):
        yield ctx.warning("RLC203", "reward_pretrain",
                          "adv_estimator gae trains a critic, but neither reward_pretrain nor "
                          "`critic.model_args.model_name_or_path` names its model; ROLL fails when it loads it",
                          hint="set reward_pretrain (often the same model as pretrain), or use adv_estimator: grpo")


@RULES.rule("roll/pipeline-overrides", "RLC304",
            "Values ROLL overwrites after loading: enable_reference, enable_old_logprobs_recompute, "
            "workers' training_args.seed, actor_infer.max_concurrency, offload_nccl, "
            "checkpoint output_dir timestamps.",
            keys=["enable_reference", "enable_old_logprobs_recompute", "*.training_args.seed",
                  "actor_infer.max_concurrency", "*.offload_nccl", "checkpoint_config"])
def pipeline_overrides(cfg: Any, ctx: RuleContext):
    if ctx.is_set("enable_reference") and not cfg.enable_reference and (cfg.use_kl_loss or cfg.init_kl_coef > 0):
        why = "use_kl_loss is true" if cfg.use_kl_loss else f"init_kl_coef is {cfg.init_kl_coef}"
        yield ctx.warning("RLC304", "enable_reference",
                          f"ROLL turns enable_reference on because {why}",
                          hint="set init_kl_coef: 0 and use_kl_loss: false to run without a reference model "
                               "(init_kl_coef defaults to 0.2)")
    if ctx.is_set("enable_old_logprobs_recompute"):
        effective = _old_logprobs_recompute(cfg)
        if effective is not None and effective != cfg.enable_old_logprobs_recompute:
            yield ctx.warning("RLC304", "enable_old_logprobs_recompute",
                              f"ROLL sets enable_old_logprobs_recompute to {str(effective).lower()} "
                              f"({_old_logprobs_reason(cfg, effective)})",
                              hint="remove the key" if effective else "remove force_disable_old_logprobs_recompute")
    for path, worker in workers(cfg):
        key = f"{path}.training_args.seed"
        if ctx.is_set(key) and worker.training_args.seed != cfg.seed:
            yield ctx.warning("RLC304", key, f"ROLL replaces `{key}` ({worker.training_args.seed}) with the "
                                             f"pipeline's seed ({cfg.seed})", hint="set the top-level seed instead")
        key = f"{path}.offload_nccl"
        if ctx.is_set(key) and worker.offload_nccl:
            yield ctx.warning("RLC304", key, f"ROLL forces `{key}` to false", hint="remove it")
    key = "actor_infer.max_concurrency"
    floor = max(cfg.max_running_requests + 1, 1000)
    if ctx.is_set(key) and cfg.actor_infer.max_concurrency < floor:
        yield ctx.warning("RLC304", key, f"ROLL raises `{key}` ({cfg.actor_infer.max_concurrency}) to "
                                         f"max(max_running_requests + 1, 1000) = {floor}", hint="remove it")
    checkpoint = cfg.checkpoint_config or {}
    if checkpoint.get("type") == "file_system" and checkpoint.get("output_dir"):
        yield ctx.warning("RLC304", "checkpoint_config.output_dir",
                          f"with checkpoint_config.type file_system, ROLL appends a timestamp to "
                          f"checkpoint_config.output_dir ({checkpoint['output_dir']!r}): checkpoints go to "
                          f"{checkpoint['output_dir']}/<YYYYmmdd-HHMMSS>",
                          hint="point resume_from_checkpoint at the timestamped directory when resuming")


def _backward_steps_per_rank(cfg: Any) -> int | None:
    worker = cfg.actor_train
    ids = device_ids(worker)
    name = strategy_name(worker)
    if not ids or name is None:
        return None
    if name == "megatron_train":
        tp, pp, cp = megatron_sizes(worker)
        dp = len(ids) // (tp * pp * cp) if len(ids) % (tp * pp * cp) == 0 else None
    else:
        dp = len(ids) // (worker.model_args.ulysses_size or 1)
    if not dp:
        return None
    batch = cfg.rollout_batch_size * group_size(cfg)
    backward = worker.training_args.per_device_train_batch_size * worker.training_args.gradient_accumulation_steps
    return (batch // dp) // backward


def _old_logprobs_recompute(cfg: Any) -> bool | None:
    if cfg.force_disable_old_logprobs_recompute:
        return False
    if cfg.adv_estimator in ("step_reinforce", "gigpo") or cfg.init_kl_coef > 0:
        return True
    steps = _backward_steps_per_rank(cfg)
    if steps is None:
        return None
    return True if steps > 1 else cfg.enable_old_logprobs_recompute


def _old_logprobs_reason(cfg: Any, effective: bool) -> str:
    if cfg.force_disable_old_logprobs_recompute:
        return "force_disable_old_logprobs_recompute is true"
    if cfg.adv_estimator in ("step_reinforce", "gigpo"):
        return f"adv_estimator is {cfg.adv_estimator}"
    if cfg.init_kl_coef > 0:
        return f"init_kl_coef is {cfg.init_kl_coef}"
    return "actor_train takes several optimizer steps per rollout"


_IGNORED = ("model_args.flash_attn", "data_args.dataset_dir", "data_args.interleave_probs")


@RULES.rule("roll/ignored-keys", "RLC307",
            "Keys that ROLL's own examples write but ROLL has no field for (model_args.flash_attn, "
            "data_args.dataset_dir, data_args.interleave_probs, reward_norm, reward_shift, reward_scale): dacite "
            "drops them.", keys=["*.model_args.flash_attn", "reward_norm", "reward_shift", "reward_scale"])
def ignored_keys(cfg: Any, ctx: RuleContext):
    for key in ("reward_norm", "reward_shift", "reward_scale"):
        if ctx.is_set(key):
            yield ctx.warning("RLC307", key, f"`{key}` has no effect: ROLL has no such option and drops it",
                              hint="remove it (reward normalisation is norm_mean_type / norm_std_type)")
    for path, _worker in workers(cfg):
        for suffix in _IGNORED:
            key = f"{path}.{suffix}"
            if ctx.is_set(key):
                hint = "use `attn_implementation` instead" if suffix.endswith("flash_attn") else "remove it"
                yield ctx.warning("RLC307", key, f"`{key}` has no effect: no release of ROLL rlcfg claims has such an option, and ROLL drops it",
                                  hint=hint)


# ---- the agentic pipeline (AgenticConfig.__post_init__) ------------------------------------------------------


def _env_managers(cfg: Any) -> Iterator[tuple[str, Any]]:
    for name in ("train_env_manager", "val_env_manager"):
        yield name, getattr(cfg, name)


@RULES.rule("roll/agentic-generating-args", "RLC302",
            "The agentic pipeline needs sampling parameters under actor_infer.generating_args or "
            "train_env_manager.generating_args (AgenticConfig asserts it at load).",
            keys=["actor_infer.generating_args", "train_env_manager.generating_args"])
def agentic_generating_args(cfg: Any, ctx: RuleContext):
    if not is_agentic(cfg):
        return
    if cfg.actor_infer.generating_args is None and cfg.train_env_manager.generating_args is None:
        yield ctx.error("RLC302", "actor_infer.generating_args",
                        "neither `actor_infer.generating_args` nor `train_env_manager.generating_args` is set; "
                        "ROLL's agentic pipeline stops at load without sampling parameters",
                        hint="add `actor_infer.generating_args` (max_new_tokens, temperature, ...)")


@RULES.rule("roll/v010-load-checks", "RLC400",
            "What ROLL v0.1.0's loader checks that later releases do not: each env manager's environments "
            "(num_env_groups × group_size) split evenly over max_env_num_per_worker, and RLVR's reward_norm is one of "
            "batch, group, running or null.", keys=["train_env_manager.max_env_num_per_worker",
                                                    "val_env_manager.max_env_num_per_worker", "reward_norm"],
            also=("RLC202",))
def v010_load_checks(cfg: Any, ctx: RuleContext):
    if ctx.release != "v0.1.0":
        return
    if is_agentic(cfg):
        for path, manager in _env_managers(cfg):
            envs, per_worker = manager.num_env_groups * manager.group_size, manager.max_env_num_per_worker
            if per_worker > 0 and envs % per_worker:
                yield ctx.error("RLC400", f"{path}.max_env_num_per_worker",
                                f"`{path}`: its {envs} environments (num_env_groups {manager.num_env_groups} × "
                                f"group_size {manager.group_size}) do not split over max_env_num_per_worker "
                                f"{per_worker}; ROLL v0.1.0 stops at load on it (later releases allow it)",
                                hint=f"set max_env_num_per_worker to a divisor of {envs} (or 0: one worker for all)",
                                related=[f"{path}.num_env_groups", f"{path}.group_size"])
    elif ctx.is_set("reward_norm") and getattr(cfg, "reward_norm", None) not in ("batch", "group", "running", None):
        yield ctx.error("RLC202", "reward_norm", f"`reward_norm` is {cfg.reward_norm!r}; ROLL v0.1.0's RLVR config "
                        "takes batch, group, running or null, and its loader stops on anything else",
                        hint="write null (not the string None), or batch, group or running")


@RULES.rule("roll/agentic-envs", "RLC302",
            "Each env manager runs the custom_envs its `tags` name, num_groups_partition[i] groups of tags[i]; the "
            "groups must add up to num_env_groups, and every custom_envs entry used needs env_type.",
            keys=["train_env_manager.tags", "train_env_manager.num_groups_partition",
                  "train_env_manager.num_env_groups", "val_env_manager.tags", "val_env_manager.num_groups_partition", "val_env_manager.num_env_groups",
                  "custom_envs"])
def agentic_envs(cfg: Any, ctx: RuleContext):
    if not is_agentic(cfg):
        return
    envs = cfg.custom_envs or {}
    for path, manager in _env_managers(cfg):
        # ROLL pairs the two lists with zip(): extra entries of either list are ignored.
        pairs = list(zip(manager.tags, manager.num_groups_partition))
        for tag, _groups in pairs:
            if tag not in envs:
                close = close_matches(str(tag), [str(k) for k in envs], n=1, cutoff=0.6)
                yield ctx.error("RLC302", f"{path}.tags",
                                f"`{path}.tags` names {tag!r}, which is not an entry of custom_envs"
                                + (f" (it has {', '.join(sorted(map(str, envs)))})" if envs else " (it is empty)"),
                                hint=f"did you mean {close[0]!r}?" if close else f"add `custom_envs.{tag}` with its "
                                                                                 "env_type, or fix the tag",
                                related=["custom_envs"])
            elif not isinstance(envs[tag], dict) or "env_type" not in envs[tag]:
                yield ctx.error("RLC302", f"custom_envs.{tag}",
                                f"`custom_envs.{tag}` has no env_type; ROLL reads it when it builds the "
                                f"environments of `{path}`", hint="set env_type (e.g. sokoban, frozen_lake)")
        total = sum(groups for _tag, groups in pairs)
        if total != manager.num_env_groups:
            yield ctx.error("RLC302", f"{path}.num_env_groups",
                            f"`{path}.num_groups_partition` ({manager.num_groups_partition}, paired with tags "
                            f"{manager.tags}) adds up to {total} groups, but `{path}.num_env_groups` is "
                            f"{manager.num_env_groups}",
                            hint=f"make num_groups_partition add up to num_env_groups (or set num_env_groups: {total})",
                            related=[f"{path}.num_groups_partition", f"{path}.tags"])


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@RULES.rule("roll/agentic-batch", "RLC300",
            "rollout_batch_size must divide by train_env_manager.group_size; val_batch_size by the validation "
            "group size and by num_env_groups × group_size; an explicit max_traj_per_env must cover "
            "ceil(batch / (num_env_groups × group_size)) (AgenticConfig).",
            keys=["rollout_batch_size", "val_batch_size", "train_env_manager.group_size",
                  "train_env_manager.max_traj_per_env", "val_env_manager.group_size",
                  "val_env_manager.max_traj_per_env"])
def agentic_batch(cfg: Any, ctx: RuleContext):
    if not is_agentic(cfg):
        return
    train = cfg.train_env_manager
    train_envs = train.num_env_groups * train.group_size
    if cfg.rollout_batch_size > 0 and cfg.rollout_batch_size % train.group_size:
        options = [g for g in (1, 2, 4, 8, 16) if cfg.rollout_batch_size % g == 0]
        yield ctx.error("RLC300", "rollout_batch_size",
                        f"rollout_batch_size ({cfg.rollout_batch_size}) is not a multiple of "
                        f"train_env_manager.group_size ({train.group_size}); ROLL collects whole groups",
                        hint=f"use a group_size in {options} or a multiple of {train.group_size} as rollout_batch_size",
                        related=["train_env_manager.group_size"])
    if train_envs > 0 and cfg.async_generation_ratio == 0 and train.max_traj_per_env >= 0:
        needed = _ceil_div(cfg.rollout_batch_size, train_envs)
        if train.max_traj_per_env < needed:
            yield ctx.error("RLC300", "train_env_manager.max_traj_per_env",
                            f"`train_env_manager.max_traj_per_env` ({train.max_traj_per_env}) is below "
                            f"ceil(rollout_batch_size {cfg.rollout_batch_size} / {train_envs} environments) = {needed}",
                            hint=f"set it to {needed} or more, or -1 to derive it", related=["rollout_batch_size"])
    val = cfg.val_env_manager
    val_envs = val.num_env_groups * val.group_size
    if cfg.val_batch_size < 0 or val_envs <= 0:
        return  # a negative val_batch_size validates without a limit
    if cfg.val_batch_size % val.group_size:
        yield ctx.error("RLC300", "val_batch_size",
                        f"val_batch_size ({cfg.val_batch_size}) is not a multiple of val_env_manager.group_size "
                        f"({val.group_size})", hint=f"use a multiple of {val.group_size}",
                        related=["val_env_manager.group_size"])
    elif cfg.val_batch_size % val_envs:
        yield ctx.error("RLC300", "val_batch_size",
                        f"val_batch_size ({cfg.val_batch_size}) is not a multiple of the validation environments, "
                        f"val_env_manager.num_env_groups × group_size = {val.num_env_groups} × {val.group_size} = "
                        f"{val_envs}", hint=f"use a multiple of {val_envs}",
                        related=["val_env_manager.num_env_groups"])
    elif val.max_traj_per_env >= 0 and val.max_traj_per_env < cfg.val_batch_size // val_envs:
        needed = cfg.val_batch_size // val_envs
        yield ctx.error("RLC300", "val_env_manager.max_traj_per_env",
                        f"`val_env_manager.max_traj_per_env` ({val.max_traj_per_env}) is below val_batch_size "
                        f"{cfg.val_batch_size} / {val_envs} environments = {needed}",
                        hint=f"set it to {needed} or more, or -1 to derive it", related=["val_batch_size"])


# ---- on-policy distillation (PPOConfig._handle_opd_mapping) -------------------------------------------------


@RULES.rule("roll/opd", "RLC301",
            "is_pure_opd and use_opd exclude each other; both need a teacher; pure OPD needs student_train and "
            "student_infer; mixed OPD must leave `reference` unset (PPOConfig).",
            keys=["is_pure_opd", "use_opd", "teacher", "student_train", "student_infer", "reference"])
def opd(cfg: Any, ctx: RuleContext):
    if not (cfg.is_pure_opd or cfg.use_opd):
        return
    if cfg.is_pure_opd and cfg.use_opd:
        yield ctx.error("RLC301", "use_opd", "is_pure_opd and use_opd are both true; pick pure OPD (reward from the "
                                             "teacher's KL only) or mixed OPD (external reward plus the KL)",
                        hint="set one of them to false", related=["is_pure_opd"])
        return
    # several teachers by name, or one teacher worker
    if cfg.teacher is None:
        has_teacher = False
    else:
        has_teacher = bool(cfg.teacher) if isinstance(cfg.teacher, dict) else configured(cfg.teacher)
    if not has_teacher:
        mode = "is_pure_opd" if cfg.is_pure_opd else "use_opd"
        yield ctx.error("RLC301", "teacher", f"{mode} is true but no teacher is configured",
                        hint="give `teacher` a model path and device_mapping", related=[mode])
    if cfg.is_pure_opd and not (configured(cfg.student_train) and configured(cfg.student_infer)):
        yield ctx.error("RLC301", "student_train", "is_pure_opd is true but student_train and student_infer are not "
                                                   "both configured (a model path or a device_mapping each)",
                        hint="configure student_train and student_infer (they become actor_train and actor_infer)",
                        related=["is_pure_opd", "student_infer"])
    if cfg.use_opd and configured(cfg.reference):
        yield ctx.error("RLC301", "reference", "use_opd is true and `reference` is configured; in mixed OPD the "
                                               "teacher takes the reference's place",
                        hint="remove `reference` and configure `teacher`", related=["use_opd"])


# ---- checks ROLL makes after loading ------------------------------------------------------------------------


TRACKERS = ("tensorboard", "wandb", "stdout", "swanlab", "trackio")  # roll/utils/tracking.py's registry


@RULES.rule("roll/tracker", "RLC202",
            "track_with must name a tracker in ROLL's registry (tensorboard, wandb, stdout, swanlab, trackio) or be "
            "empty; ROLL looks it up when the pipeline starts.", keys=["track_with"])
def tracker(cfg: Any, ctx: RuleContext):
    name = cfg.track_with
    if name and name not in TRACKERS:
        close = close_matches(name, TRACKERS, n=1, cutoff=0.6)
        yield ctx.error("RLC202", "track_with",
                        f"`track_with` is {name!r}, which is not one of ROLL's trackers ({', '.join(TRACKERS)}); "
                        "ROLL accepts this at load but fails when the pipeline creates its tracker",
                        hint=f"did you mean {close[0]!r}?" if close else "use tensorboard, or leave it empty for none")


@RULES.rule("roll/rlvr-generating-args", "RLC302",
            "RLVR writes num_return_sequences and max_new_tokens into actor_infer.generating_args (and "
            "validation.generating_args when validation is set) at load, so both must exist.",
            keys=["actor_infer.generating_args", "validation.generating_args"])
def rlvr_generating_args(cfg: Any, ctx: RuleContext):
    if is_agentic(cfg):
        return
    if cfg.actor_infer.generating_args is None:
        yield ctx.error("RLC302", "actor_infer.generating_args",
                        "`actor_infer.generating_args` is not set; ROLL's RLVR config writes num_return_sequences and "
                        "max_new_tokens into it at load and stops", hint="add `actor_infer.generating_args` "
                                                                         "(temperature, top_p, ...)")
    if cfg.validation is not None and cfg.validation.generating_args is None:
        yield ctx.error("RLC302", "validation.generating_args",
                        "`validation` is set without `generating_args`; ROLL writes max_new_tokens into it at load "
                        "and stops", hint="add `validation.generating_args`, or remove `validation`")


@RULES.rule("roll/checkpoint-config", "RLC302",
            "checkpoint_config with type file_system needs output_dir: ROLL appends a timestamp to it at load.",
            keys=["checkpoint_config"])
def checkpoint_config(cfg: Any, ctx: RuleContext):
    config = cfg.checkpoint_config or {}
    if config.get("type") == "file_system" and not isinstance(config.get("output_dir"), str):
        yield ctx.error("RLC302", "checkpoint_config.output_dir",
                        "`checkpoint_config.type` is file_system but `checkpoint_config.output_dir` is not set; ROLL "
                        "joins a timestamp onto it at load and stops",
                        hint="set checkpoint_config.output_dir (e.g. ./output/checkpoints)",
                        related=["checkpoint_config.type"])


# ---- what `rlcfg run` runs of ROLL's pipelines and names (read by lower.py; the rest is refused) -----------------


# The names mcore_adapter's get_megatron_lr_scheduler maps to Megatron's constant, linear and cosine decay styles.
MEGATRON_SCHEDULERS = ("constant", "constant_with_warmup", "linear", "cosine", "cosine_with_min_lr")
# ROLL's chat templates that are the tokenizer's own apply_chat_template (roll/datasets/chat_template.py registers
# both names on native_chat_template).
TOKENIZER_TEMPLATES = ("native", "qwen2_5")
# ROLL's standard RLVR workers (RLVRConfig.__post_init__ picks them when worker_cls is null); rlcfg runs its own
# equivalents of these and of nothing else.
STANDARD_WORKERS = {
    "actor_train": "roll.pipeline.rlvr.actor_worker.ActorWorker",
    "actor_infer": "roll.pipeline.base_worker.InferWorker",
    "reference": "roll.pipeline.rlvr.actor_worker.ActorWorker",
    "critic": "roll.pipeline.base_worker.CriticWorker",
}
SAMPLE_MASKS = ("max_len_mask", "difficulty_mask", "error_max_len_clip")


def _run_refusal(path: str, value: Any, why: str, hint: str, related: Iterator[str] | tuple[str, ...] = ()
                 ) -> Finding:
    """An RLC118 note worded as the run ledger's own (frontend._refusal_notes), with the value that runs as hint."""
    from rlcfg.schema.validate import describe_value

    return Finding("RLC118", Severity.NOTE, path, f"`rlcfg run` refuses `{path}` = {describe_value(value)}: {why}",
                   hint, tuple(related))


@RULES.rule("roll/run-refusals", "RLC118",
            "`rlcfg run` refuses the RLVR settings its runtime would compute otherwise than ROLL: reward domains "
            "beyond one, reward workers other than the math rule and reward plug-ins, worker classes other than "
            "ROLL's standard ones and, for actor_train, ActorPGWorker with its topr and ppo variants from v0.2.1 "
            "(ppo from v0.3.0), learning-rate schedules it has no shape for, a KL both in the loss and in the reward or the "
            "`full` KL, running reward statistics, gamma < 1 with GRPO, reward_clip with a KL in the reward and no "
            "normalisation, sample masks with length weights or an entropy bonus, seq-mean-token-sum-norm, a critic with "
            "another loss_agg_mode than seq-mean-token-mean, sequence importance sampling with per-token "
            "advantages or dual clip, train-infer weights other than capped and detached token or sequence "
            "ratios, mixed domain_interleave_probs and chat templates other than the tokenizer's, a fractional "
            "async_generation_ratio; and vision-language models.",
            keys=["pretrain", "reward_pretrain", "*.model_args.model_name_or_path", "rewards", "actor_train.worker_cls",
                  "actor_train.pg_variant",
                  "actor_infer.worker_cls", "reference.worker_cls",
                  "critic.worker_cls", "actor_train.training_args.lr_scheduler_type",
                  "critic.training_args.lr_scheduler_type", "adv_estimator", "norm_mean_type", "norm_std_type",
                  "gamma", "reward_clip", "max_len_mask", "difficulty_mask", "error_max_len_clip",
                  "loss_agg_mode", "importance_sampling", "add_token_level_kl", "use_kl_loss", "kl_penalty",
                  "train_infer_correction.is_weight", "actor_train.data_args.domain_interleave_probs",
                  "global_template", "actor_train.data_args.template", "tag_to_template", "async_generation_ratio"])
def run_refusals(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    if unrun_pipeline(cfg) is not None:
        return  # validate says once that `rlcfg run` does not run the whole pipeline (RLC116)
    yield from _model_refusals(cfg)
    yield from _worker_refusals(cfg, ctx.release)
    yield from _reward_refusals(cfg)
    yield from _schedule_refusals(cfg)
    yield from _algorithm_refusals(cfg)
    yield from _data_refusals(cfg)


def _model_refusals(cfg: Any) -> Iterator[Finding]:
    """Vision-language checkpoints, at the key that names each worker's model (its own, else `pretrain`, or
    `reward_pretrain` for the critic)."""
    from rlcfg import run_limits

    models = []
    workers = [("actor_train", "pretrain"), ("actor_infer", "pretrain"), ("reference", "pretrain")]
    for worker, fallback in workers + ([("critic", "reward_pretrain")] if critic_on(cfg) else []):
        own = getattr(cfg, worker).model_args.model_name_or_path
        models.append((f"{worker}.model_args.model_name_or_path", own) if own else (fallback, getattr(cfg, fallback)))
    for key, path, why in run_limits.vision_language_models(models):
        yield _run_refusal(key, path, f"a vision-language model ({why}); {run_limits.VISION_LANGUAGE}",
                           run_limits.vision_language_hint(key, path))


def _worker_refusals(cfg: Any, release: str | None) -> Iterator[Finding]:
    running = {"reference": reference_on(cfg), "critic": critic_on(cfg)}
    for path, standard in STANDARD_WORKERS.items():
        cls = getattr(cfg, path).worker_cls
        if path == "actor_train" and cls == PG_WORKER:
            yield from _pg_worker_refusals(cfg, release)
        elif running.get(path, True) and cls is not None and cls != standard:
            also = " or its ActorPGWorker" if path == "actor_train" else ""
            yield _run_refusal(f"{path}.worker_cls", cls,
                               f"rlcfg runs ROLL's standard {standard.rsplit('.', 1)[-1]}{also}",
                               f"leave it unset (ROLL then runs {standard})")


def _pg_worker_refusals(cfg: Any, release: str | None) -> Iterator[Finding]:
    variant = pg_variant(cfg)
    if release not in PG_WORKER_RELEASES:
        why = ("ROLL v0.1.0 has no such class" if release == "v0.1.0" else
               f"{release}'s copy computes its loss otherwise than its standard actor")
        yield _run_refusal("actor_train.worker_cls", PG_WORKER,
                           f"rlcfg runs ActorPGWorker as ROLL {', '.join(PG_WORKER_RELEASES)} release it; {why}",
                           f"leave it unset (ROLL then runs {STANDARD_WORKERS['actor_train']})")
    elif release not in PG_VARIANTS.get(variant, ()):
        runs = [name for name, releases in PG_VARIANTS.items() if release in releases]
        why = ("its _compute_ppo_loss stops on its first call at this release" if variant == "ppo" else
               f"rlcfg runs ActorPGWorker's {' and '.join(runs)} only")
        yield _run_refusal("actor_train.pg_variant", variant, why, f"use {' or '.join(runs)}",
                           ("actor_train.worker_cls",))


def _reward_refusals(cfg: Any) -> Iterator[Finding]:
    # ROLL runs one reward cluster per domain and normalises, whitens and clips each domain's batch on its own
    # (rlvr_pipeline.py groups the batch by domain); rlcfg scores every sample with one function over one batch.
    rewards = dict(cfg.rewards or {})
    if len(rewards) > 1:
        yield _run_refusal("rewards", list(rewards),
                           f"{len(rewards)} reward domains; rlcfg scores every sample with one reward function over "
                           "one batch (ROLL normalises each domain on its own), and `rlcfg plan` describes the "
                           f"domain `{chosen_reward_domain(cfg)}` only", "keep one domain")
    for key, worker in rewards.items():
        if reward_class(worker) not in REWARD_FUNCTIONS:
            yield _run_refusal(f"rewards.{key}.worker_cls", worker.worker_cls,
                               f"rlcfg scores with ROLL's math rule only ({', '.join(REWARD_FUNCTIONS)})",
                               f"set `worker_cls: {MATH_RULE_WORKER}`")
        if worker.reward_manager_config:
            yield _run_refusal(f"rewards.{key}.reward_manager_config", worker.reward_manager_config,
                               "rlcfg runs no reward plug-ins", "remove it")


def _schedule_refusals(cfg: Any) -> Iterator[Finding]:
    ratio = cfg.async_generation_ratio
    if ratio > 0 and ratio != int(ratio):
        # ROLL then starts a fraction of a step's prompts ahead and trains that fraction of the oldest step.
        yield _run_refusal("async_generation_ratio", ratio, "rlcfg starts whole steps' prompts ahead of the trainer",
                           f"use {int(ratio)} or {int(ratio) + 1}")
    for path in ("actor_train", "critic") if critic_on(cfg) else ("actor_train",):
        worker = getattr(cfg, path)
        name = worker.training_args.lr_scheduler_type
        key = f"{path}.training_args.lr_scheduler_type"
        megatron = strategy_name(worker) == "megatron_train"
        if name not in SCHEDULERS:
            yield _run_refusal(key, name, f"rlcfg has no such schedule (it has {', '.join(sorted(SCHEDULERS))})",
                               "use linear, cosine or constant")
        elif megatron and name not in MEGATRON_SCHEDULERS:
            # mcore_adapter's get_megatron_lr_scheduler raises on the others.
            yield _run_refusal(key, name, "ROLL's Megatron strategy does not run it (it runs "
                                          f"{', '.join(MEGATRON_SCHEDULERS)})", "use linear, cosine or constant")
        elif not megatron and name == "cosine_with_min_lr":
            # ROLL hands transformers' get_scheduler no scheduler kwargs, and this one needs min_lr or min_lr_rate.
            yield _run_refusal(key, name, f"it stops ROLL's {strategy_name(worker) or 'fsdp2_train'} strategy at "
                                          "start (transformers needs a min_lr it is not given)", "use cosine")


def _algorithm_refusals(cfg: Any) -> Iterator[Finding]:
    estimator = cfg.adv_estimator
    if estimator == "agentic_reinforce":
        yield _run_refusal("adv_estimator", estimator, "it belongs to the agentic pipeline; ROLL's RLVR "
                                                       "compute_advantage refuses it too", "use reinforce or grpo")
    grpo = estimator == "grpo"
    if not grpo:  # grpo: the estimator itself is the group normalisation, and these are not read
        for key in ("norm_mean_type", "norm_std_type"):
            if getattr(cfg, key) == "running":
                yield _run_refusal(key, "running", "statistics carried across steps are not offered",
                                   "use batch or group")
    reward_kl = reward_kl_on(cfg)
    if cfg.use_kl_loss and reward_kl:
        yield _run_refusal("add_token_level_kl", True, "with use_kl_loss and init_kl_coef > 0 ROLL applies both a KL "
                                                       "loss and a KL reward penalty; rlcfg runs one KL term",
                           "set one of add_token_level_kl and use_kl_loss", ("use_kl_loss", "init_kl_coef"))
    if reward_kl and cfg.kl_penalty not in KL_ESTIMATORS:
        yield _run_refusal("kl_penalty", cfg.kl_penalty, "ROLL's full-vocabulary KL has no rlcfg estimator",
                           "use kl, abs or mse", ("add_token_level_kl",))
    kl_in_reward = reward_kl and not cfg.use_kl_loss
    per_token = kl_in_reward or cfg.whiten_rewards  # rewards on more than the last token
    if grpo and cfg.gamma != 1 and not per_token:
        # ROLL discounts the normalised score back from the last token; rlcfg's GRPO advantage is the score on
        # every token (the same only for gamma 1).
        yield _run_refusal("gamma", cfg.gamma, "with adv_estimator grpo rlcfg discounts the advantages only with a "
                                               "KL in the reward or whiten_rewards", "use gamma 1",
                           ("adv_estimator",))
    unnormalised = cfg.norm_mean_type is None and cfg.norm_std_type is None
    if not grpo and cfg.reward_clip is not None and unnormalised and kl_in_reward:
        yield _run_refusal("reward_clip", cfg.reward_clip, "with a KL in the reward and no reward normalisation "
                                                           "rlcfg clamps the score only after the KL penalty, ROLL "
                                                           "before and after",
                           "remove reward_clip, or set norm_mean_type / norm_std_type",
                           ("add_token_level_kl", "norm_mean_type", "norm_std_type"))
    masks = [key for key in SAMPLE_MASKS if getattr(cfg, key)]
    weights = [key for key in ("length_loss_weight",) if cfg.length_loss_weight]
    weights += ["entropy_loss_coef"] if cfg.entropy_loss_coef > 0 else []
    if masks and weights:
        yield _run_refusal(masks[0], getattr(cfg, masks[0]), f"with {' and '.join(weights)} ROLL measures lengths "
                                                             "and entropy over all samples, rlcfg over the samples "
                                                             "the masks keep",
                           f"set {' and '.join(masks)} to false, or turn off {' and '.join(weights)}",
                           (*masks[1:], *weights))
    if cfg.loss_agg_mode == "seq-mean-token-sum-norm":
        yield _run_refusal("loss_agg_mode", cfg.loss_agg_mode, "it divides by the padded width of each "
                                                               "micro-batch; rlcfg has no such aggregation",
                           "use seq-mean-token-sum, seq-mean-token-mean or token-mean")
    elif estimator == "gae" and cfg.loss_agg_mode != "seq-mean-token-mean":
        # base_worker.CriticWorker.loss_func averages the value loss per sequence, then over sequences, whatever
        # loss_agg_mode says; rlcfg's critic aggregates like the actor.
        yield _run_refusal("loss_agg_mode", cfg.loss_agg_mode, "with adv_estimator gae ROLL's critic always averages "
                                                               "its loss per sequence (seq-mean-token-mean), rlcfg's "
                                                               "critic follows loss_agg_mode",
                           "use seq-mean-token-mean", ("adv_estimator",))
    if cfg.importance_sampling == "seq":
        # ROLL's sequence ratio exp(mean log-ratio) with its gradient equals GSPO-token's gradient when every token
        # of a sequence has the same advantage; it differs otherwise.
        if estimator == "gae" or per_token or cfg.gamma != 1:
            yield _run_refusal("importance_sampling", "seq", "with per-token advantages (gae, a KL in the reward, "
                                                             "whiten_rewards or gamma < 1) rlcfg's sequence ratio "
                                                             "differs from ROLL's, which it matches only for one "
                                                             "advantage per sequence", "use token")
        elif cfg.dual_clip_loss:
            yield _run_refusal("importance_sampling", "seq", "with dual_clip_loss: rlcfg's sequence-ratio loss has "
                                                             "no dual clip", "use token, or dual_clip_loss false",
                               ("dual_clip_loss",))
    yield from _importance_weight_refusals(cfg)


def _importance_weight_refusals(cfg: Any) -> Iterator[Finding]:
    # roll/utils/train_infer_corrections.py compute_train_infer_correction: the token ratio exp(old − infer) or the
    # sequence's exp(Σ(old − infer)), clamped to upper_bound and detached, multiplies the per-token policy loss;
    # rlcfg runs that as truncated importance sampling (the filters are refused by the ledger).
    weight = cfg.train_infer_correction.is_weight
    if not weight.enabled:
        return
    key = "train_infer_correction.is_weight"
    if weight.weight_type not in ("token", "sequence"):
        yield _run_refusal(f"{key}.weight_type", weight.weight_type, "rlcfg weighs by the token or the sequence "
                                                                     "ratio only", "use token or sequence")
    if weight.upper_bound is None:
        yield _run_refusal(f"{key}.upper_bound", None, "an unbounded weight; rlcfg caps the weight",
                           "set a cap (ROLL's default is 1.2)")
    if not weight.detach:
        yield _run_refusal(f"{key}.detach", False, "rlcfg's importance weight carries no gradient", "use true")


def _data_refusals(cfg: Any) -> Iterator[Finding]:
    train_data = cfg.actor_train.data_args
    if train_data is None:
        return
    shares = dict(train_data.domain_interleave_probs or {})
    if sum(1 for share in shares.values() if share) > 1:
        yield _run_refusal("actor_train.data_args.domain_interleave_probs", shares,
                           "it mixes several domains; rlcfg draws prompts uniformly from one dataset scored by one "
                           "reward worker", "give one domain all of the share")
    if not train_data.messages:
        return  # a prompt column is tokenized as it is, without a chat template
    # rlvr_pipeline.get_encode_function formats a messages column with global_template, else
    # actor_train.data_args.template, or a tag's own template from tag_to_template; ROLL's `native` and `qwen2_5`
    # are the tokenizer's own chat template, which is what rlcfg applies.
    hint = "use native (the tokenizer's own chat template) or qwen2_5"
    why = "rlcfg formats messages with the tokenizer's own chat template, ROLL's `native` or `qwen2_5`"
    template_key = "global_template" if cfg.global_template else "actor_train.data_args.template"
    template = cfg.global_template or train_data.template or "native"
    if template not in TOKENIZER_TEMPLATES:
        yield _run_refusal(template_key, template, why, hint)
    for tag, name in dict(cfg.tag_to_template or {}).items():
        if name not in TOKENIZER_TEMPLATES:
            yield _run_refusal(f"tag_to_template.{tag}", name, why, hint)


@RULES.rule("roll/query-filter-args", "RLC200",
            "The thresholds of a reward worker's query_filter_config (threshold_down, threshold_up, std_threshold) "
            "must be numbers: ROLL's request scheduler compares the rewards with them (generate_opt_level 1).",
            keys=["rewards"])
def query_filter_args(cfg: Any, ctx: RuleContext):
    if is_agentic(cfg) or cfg.generate_opt_level == 0:
        return  # at level 0 query_filter gets all of a prompt's responses as one item and keeps it unread
    for key, worker in dict(cfg.rewards or {}).items():
        config = worker.query_filter_config
        args = config.filter_args or {}
        for name in FILTER_THRESHOLDS.get(config.type, ()):
            value = args.get(name)
            if name in args and (isinstance(value, bool) or not isinstance(value, (int, float))):
                yield ctx.error("RLC200", f"rewards.{key}.query_filter_config.filter_args.{name}",
                                f"`rewards.{key}.query_filter_config.filter_args.{name}` is {value!r}, not a number; "
                                "ROLL accepts it at load but fails when its scheduler compares the rewards with it",
                                hint="give a number, or remove it for ROLL's default")


@RULES.rule("roll/run-refusals-of-worker-settings", "RLC118",
            "`rlcfg run` refuses a freeze_module_prefix with an empty item (every parameter name starts with it, so "
            "nothing would train) or on a Megatron worker (ROLL matches it against mcore_adapter's parameter "
            "names), and a rule reward worker whose environment variables (system_envs) differ from actor_infer's "
            "(rlcfg scores rule rewards inside the rollout workers' processes).",
            keys=["actor_train.model_args.freeze_module_prefix", "critic.model_args.freeze_module_prefix",
                  "system_envs", "actor_infer.system_envs", "rewards"])
def run_refusals_of_worker_settings(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    if unrun_pipeline(cfg) is not None:
        return
    # Only a worker that trains reads freeze_module_prefix (the others load their model frozen).
    for path in ("actor_train", "critic") if critic_on(cfg) else ("actor_train",):
        worker = getattr(cfg, path)
        prefixes = frozen_prefixes(worker)
        key = f"{path}.model_args.freeze_module_prefix"
        if "" in prefixes:
            yield _run_refusal(key, worker.model_args.freeze_module_prefix,
                               "it has an empty item, and every parameter name starts with the empty string: ROLL "
                               "would freeze the whole model, leaving nothing to train",
                               "remove the empty item (a stray comma)")
        elif prefixes and strategy_name(worker) in ("megatron_train", "megatron_infer"):
            yield _run_refusal(key, worker.model_args.freeze_module_prefix,
                               "with the Megatron strategy ROLL matches it against mcore_adapter's parameter names, "
                               "which rlcfg's Megatron trainer does not have; rlcfg freezes parameters with the "
                               "FSDP2 strategy", "train with strategy_name fsdp2_train, or remove it",
                               (f"{path}.strategy_args.strategy_name",))
    rollout_env = worker_env(cfg, cfg.actor_infer)
    for key, worker in dict(cfg.rewards or {}).items():
        if worker.strategy_args is not None and device_ids(worker):
            continue  # a reward model runs in processes of its own (and is refused as such)
        env = worker_env(cfg, worker)
        differing = sorted(n for n in env.keys() | rollout_env.keys() if env.get(n) != rollout_env.get(n))
        if differing:
            name = differing[0]

            def shown(value: str | None) -> str:
                return "unset" if value is None else repr(value)

            yield _run_refusal(f"rewards.{key}.system_envs", dict(worker.system_envs or {}),
                               f"it gives {name} another value than actor_infer.system_envs ({shown(env.get(name))} "
                               f"and {shown(rollout_env.get(name))}); rlcfg scores rule rewards inside the rollout "
                               "workers' processes, so the two need one environment",
                               "set the variable the same in both, or only in the pipeline's system_envs",
                               ("actor_infer.system_envs",))


# ---- what rlcfg's runtime does not run (rlcfg/run_limits.py), said before the preflight says it ------------------


def _limited_workers(cfg: Any) -> Iterator[tuple[str, Any, str]]:
    """(path, worker, rlcfg backend) of each worker lower.py makes a model role of, the rollout aside: actor_train,
    the reference when a KL reads it, the critic for GAE, and the chosen reward domain's worker when it has a model
    (strategy_args and GPUs; a rule worker scores on CPU)."""
    workers = [("actor_train", "fsdp2_train")] + ([("reference", "fsdp2_train")] if reference_on(cfg) else []) + (
        [("critic", "fsdp2_train")] if critic_on(cfg) else [])
    for path, default in workers:
        worker = getattr(cfg, path)
        yield path, worker, BACKEND_OF_STRATEGY.get(strategy_name(worker) or default, "")
    key = chosen_reward_domain(cfg)
    worker = cfg.rewards[key] if key is not None else None
    if worker is not None and loads_reward_model(worker):
        yield f"rewards.{key}", worker, BACKEND_OF_STRATEGY.get(strategy_name(worker) or "fsdp2_train", "")


@RULES.rule("roll/run-refusals-of-runtime-limits", "RLC118",
            "`rlcfg run` refuses what its runtime does not do (rlcfg/run_limits.py), as its preflight would: a "
            "model worker on a strategy other than fsdp2 or megatron (deepspeed is not wired in; hf_infer, vllm and "
            "sglang roll out only), on Megatron expert parallelism (ROLL's MoE router "
            "settings are not mapped), a model family it does not build and a critic, an "
            "actor_infer on a training strategy, and an hf_infer rollout spread over several "
            "GPUs.",
            keys=["actor_train.strategy_args.strategy_name",
                  "actor_train.strategy_args.strategy_config.expert_model_parallel_size",
                  "critic.strategy_args.strategy_name", "actor_infer.strategy_args.strategy_name",
                  "actor_infer.num_gpus_per_worker"])
def run_refusals_of_runtime_limits(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    from rlcfg import run_limits

    if unrun_pipeline(cfg) is not None:
        return
    for path, worker, backend in _limited_workers(cfg):
        strategy_key = f"{path}.strategy_args.strategy_name"
        if backend == "deepspeed":
            yield _run_refusal(strategy_key, strategy_name(worker), run_limits.DEEPSPEED,
                               f"use fsdp2_{'train' if path in ('actor_train', 'critic') else 'infer'}")
            continue
        if backend not in MODEL_BACKENDS:
            yield _run_refusal(strategy_key, strategy_name(worker), run_limits.TRAINING_BACKENDS,
                               f"use fsdp2_{'train' if path in ('actor_train', 'critic') else 'infer'} or "
                               f"megatron_{'train' if path in ('actor_train', 'critic') else 'infer'}")
            continue
        if backend != "megatron":
            continue
        own = worker.model_args.model_name_or_path
        fallback = "reward_pretrain" if path == "critic" else "pretrain"
        model_key, model = (f"{path}.model_args.model_name_or_path", own) if own else (fallback,
                                                                                     getattr(cfg, fallback))
        for key, model_path, why in run_limits.megatron_unbuilt_models([(model_key, model)]):
            yield _run_refusal(key, model_path, why,
                               f"use fsdp2_{'train' if path in ('actor_train', 'critic') else 'infer'}")
        if path == "critic":
            yield _run_refusal(strategy_key, strategy_name(worker), run_limits.MEGATRON_CRITIC,
                               "use fsdp2_train for the critic")
        experts = int(strategy_value(worker, "expert_model_parallel_size", 1))
        if experts > 1:
            yield _run_refusal(_sc_path(path, "expert_model_parallel_size"), experts, run_limits.EXPERT_PARALLEL,
                               run_limits.SIZE_THAT_RUNS)
    rollout = cfg.actor_infer
    rollout_backend = BACKEND_OF_STRATEGY.get(strategy_name(rollout) or "vllm")
    if rollout_backend not in ("hf", "vllm", "sglang"):
        yield _run_refusal("actor_infer.strategy_args.strategy_name", strategy_name(rollout),
                           run_limits.ROLLOUT_BACKENDS, "use vllm, sglang or hf_infer")
    elif rollout_backend == "hf" and gpus_per_worker(rollout) > 1:
        # A transformers worker spreads its layers over its GPUs: the stages of a pipeline.
        yield _run_refusal("actor_infer.num_gpus_per_worker", gpus_per_worker(rollout),
                           run_limits.HF_ROLLOUT_PARALLEL, "set it to 1, or use the vllm or sglang strategy",
                           ("actor_infer.strategy_args.strategy_name",))


@RULES.rule("roll/run-refusals-of-partly-shared-gpus", "RLC118",
            "`rlcfg run` refuses workers whose device_mapping shares some GPUs without naming the same ones: ROLL "
            "time-shares the GPUs they have in common, and rlcfg runs two roles either on exactly the same GPUs "
            "(colocated, taking turns) or on disjoint ones.",
            keys=["*.device_mapping"])
def run_refusals_of_partly_shared_gpus(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    # The roles the lowering places on GPUs: rule-based reward workers score on CPUs, whatever their mapping says.
    placed = [(path, ids) for path, worker, ids in placed_workers(cfg)
              if not (path.startswith("rewards.") or path in ("reward_model", "reward")) or loads_reward_model(worker)]
    groups: dict[frozenset[int], list[str]] = {}
    for path, ids in placed:
        groups.setdefault(frozenset(ids), []).append(path)
    sets = list(groups.items())
    for index, (ids, paths) in enumerate(sets):
        for other_ids, other_paths in sets[:index]:
            shared = ids & other_ids
            if not shared:
                continue
            path, other = paths[0], other_paths[0]
            yield _run_refusal(
                f"{path}.device_mapping", ctx.tree.get((*path.split("."), "device_mapping")),
                f"it shares {_ids_text(shared)} with `{other}` ({_ids_text(other_ids)}) without naming the same "
                "GPUs; ROLL time-shares the GPUs they have in common, rlcfg runs two roles either on the same GPUs "
                "(colocated, taking turns) or on disjoint ones",
                f"give `{path}` the device_mapping of `{other}`, or GPUs of its own",
                (f"{other}.device_mapping",))


REWARD_NORM_METHODS = ("identity", "mean", "mean_std", "asym_clip")


@RULES.rule("roll/reward-normalization-fallback", "RLC304",
            "An agentic config's `reward_normalization.method` outside identity / mean / mean_std / asym_clip is "
            "replaced by identity: ROLL (from v0.1.3) only logs it, where norm_mean_type / norm_std_type leave the "
            "choice to the method.",
            keys=["reward_normalization.method"])
def _reward_normalization_fallback(cfg: Any, ctx: RuleContext) -> Iterator[Finding]:
    norm = getattr(cfg, "reward_normalization", None)
    if norm is None or ctx.release == "v0.1.0" or (norm.norm_mean_type is not None and norm.norm_std_type is not None):
        return  # v0.1.0 reads method another way; with both types set, the method decides nothing
    if ctx.is_set("reward_normalization.method") and norm.method not in REWARD_NORM_METHODS:
        yield ctx.warning("RLC304", "reward_normalization.method",
                          f"`reward_normalization.method` is {norm.method!r}, which ROLL does not know: its loader "
                          "replaces it with `identity`, so rewards are not normalised, and only logs it",
                          hint=f"use one of {', '.join(REWARD_NORM_METHODS)}, or set norm_mean_type / norm_std_type")
