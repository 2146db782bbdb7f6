"""Lowering RLinf configs to the Experiment: the roles on the GPUs RLinf gives them, and the numbers RLinf derives
(data-parallel sizes, engine counts, the batch algebra it overwrites into the actor), worked out by hand."""

from __future__ import annotations

import copy

import pytest
import yaml

from rlcfg.frontend import check_file, check_text
from rlcfg.ir import Experiment
from rlcfg.lower import lower
from rlcfg.plan import build_plan
from rlcfg.source.yaml_loader import load_yaml
from tests.helpers import ROOT, TEMPLATES

FIXTURES = ROOT / "tests" / "fixtures" / "rlinf"
TEMPLATE = TEMPLATES / "rlinf-megatron-sglang.yaml"
SEED = FIXTURES / "seed.yaml"
RLINF_TEMPLATES = sorted(TEMPLATES.glob("rlinf-*.yaml"))
FSDP_OVERRIDES = ("actor.training_backend=fsdp", "++actor.fsdp_config.mixed_precision.param_dtype=bf16",
                  "++actor.fsdp_config.mixed_precision.reduce_dtype=fp32",
                  "++actor.fsdp_config.mixed_precision.buffer_dtype=fp32")


def lowered(path, *overrides: str) -> Experiment:
    result = check_file(str(path), list(overrides))
    assert result.ok, [d.message for d in result.diagnostics if d.severity.value == "error"]
    return lower("rlinf", result.config)


def lowered_variant(changes: dict) -> Experiment:
    """The template with whole sub-trees replaced (dotted path -> value): placements are awkward as overrides."""
    tree, problems = load_yaml(TEMPLATE.read_text(), "template.yaml")
    assert tree is not None, problems
    data = tree.data
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = copy.deepcopy(value)
    result = check_text(yaml.safe_dump(data, sort_keys=False), "variant.yaml", dialect="rlinf")
    assert result.ok, [d.message for d in result.diagnostics if d.severity.value == "error"]
    return lower("rlinf", result.config)


def dp(exp: Experiment, role: str) -> int:
    plan, _ = build_plan(exp)
    return next(p.dp for p in plan.placements if p.role == role)


def names(exp: Experiment) -> list[str]:
    return [r.name for r in exp.roles]


DISAGGREGATED = {"rollout": "0-3", "inference": "4-5", "actor": "6-7", "reward": "0-3"}


# ---- every template -------------------------------------------------------------------------------------------

def test_there_is_an_rlinf_template():
    assert RLINF_TEMPLATES


@pytest.mark.parametrize("template", RLINF_TEMPLATES, ids=lambda p: p.stem)
def test_every_template_lowers_and_plans(template):
    exp = lowered(template)
    assert exp.dialect == "rlinf"
    assert {"actor", "rollout", "reward"} <= set(names(exp))
    assert exp.schedule.samples_per_step == exp.schedule.prompts_per_step * exp.algorithm.group_size
    plan, diagnostics = build_plan(exp)
    assert not [d for d in diagnostics if d.severity.value == "error"], [d.message for d in diagnostics]


# ---- the template: collocated Megatron + SGLang on 8 GPUs --------------------------------------------------------

def test_template_places_every_component_on_all_eight_gpus():
    exp = lowered(TEMPLATE)
    assert (exp.cluster.nodes, exp.cluster.gpus_per_node) == (1, 8)
    assert names(exp) == ["actor", "rollout", "reward"]  # kl_beta 0: no reference forward at all
    for role in exp.roles:
        assert role.resources.gpu_ids == tuple(range(8)) and role.resources.gpus == 8
    assert exp.colocation == (("actor", "rollout", "reward"),)


def test_template_actor_is_megatron_tp2_dp4():
    exp = lowered(TEMPLATE)
    actor = exp.role("actor")
    assert actor.backend == "megatron"
    par = actor.parallelism
    assert (par.tp, par.pp, par.cp, par.ep) == (2, 1, 1, 1) and par.sequence_parallel
    assert dp(exp, "actor") == 8 // (2 * 1 * 1) == 4
    assert actor.model.dtype == "bfloat16" and actor.model.path == "/path/to/DeepSeek-R1-Distill-Qwen-1.5B"
    assert actor.gradient_checkpointing  # recompute_granularity: full
    assert (actor.offload.params, actor.offload.optimizer, actor.offload.grads) == (True, True, True)
    opt = actor.optimizer
    assert (opt.name, opt.lr, opt.betas, opt.eps, opt.weight_decay, opt.grad_clip) == (
        "adamw", 2e-6, (0.9, 0.95), 1e-8, 0.01, 1.0)
    assert (opt.scheduler, opt.warmup_steps) == ("constant", 0)


def test_template_rollout_runs_four_sglang_engines_of_tp2():
    exp = lowered(TEMPLATE)
    rollout = exp.role("rollout")
    assert rollout.backend == "sglang" and rollout.parallelism.tp == 2
    assert rollout.offload.params  # collocated: the engine is offloaded while the actor trains
    assert rollout.engine_args() == {
        "engines": 8 // 2, "mem_fraction_static": 0.55, "attention_backend": "triton", "max_num_seqs": 128,
        "max_model_len": 8192, "enforce_eager": False, "cuda_graph_bs": 128}
    assert dp(exp, "rollout") == 4


def test_template_batch_algebra_is_what_rlinf_overwrites_into_the_actor():
    exp = lowered(TEMPLATE)
    s = exp.schedule
    assert s.prompts_per_step == 128
    assert s.samples_per_step == 128 * 8 == 1024
    assert s.samples_per_optimizer_step == 1024 // 4 == 256  # rollout_batch_size × group_size // n_minibatches
    assert (s.total_steps, s.epochs, s.eval_interval) == (None, 5, None)
    assert exp.role("actor").micro_batch_size == 1  # training_batch_size_per_gpu
    assert exp.role("actor").forward_micro_batch_size == 1
    plan, _ = build_plan(exp)
    assert (plan.batch.actor_dp, plan.batch.samples_per_rank, plan.batch.grad_accumulation) == (4, 64, 64)


def test_template_algorithm_and_sampling():
    exp = lowered(TEMPLATE)
    alg = exp.algorithm
    assert (alg.advantage, alg.group_size, alg.policy_loss) == ("grpo", 8, "regular")
    # no use_valid_token_scale: RLinf takes each micro-batch's token mean, then the mean over micro-batches
    assert (alg.clip_low, alg.clip_high, alg.loss_aggregation) == (0.2, 0.2, "token-mean")
    assert alg.loss_normalization == "micro-batch"
    assert alg.normalize_advantage_std and alg.batch_normalize_advantage
    assert (alg.kl.placement, alg.kl.coef) == ("none", 0.0)
    assert (alg.entropy_coef, alg.ppo_epochs) == (0.0, 1)
    # ±reward_scale from a 0/1 verifier.
    assert (alg.reward.scale, alg.reward.bias) == (10.0, -5.0)
    sampling = exp.sampling
    assert (sampling.max_new_tokens, sampling.n, sampling.temperature, sampling.top_p, sampling.top_k) == (
        8192 - 1024, 8, 1.0, 1.0, -1)
    assert exp.eval_sampling is None
    assert exp.reward_function == "math"


def test_template_data_checkpoints_logging_seed():
    exp = lowered(TEMPLATE)
    assert exp.data.train_files == ("/path/to/data/train.jsonl",)
    assert exp.data.eval_files == ("/path/to/data/val.jsonl",)
    assert (exp.data.prompt_key, exp.data.answer_key, exp.data.max_prompt_length, exp.data.seed) == (
        "prompt", "solutions", 1024, 1234)
    assert exp.checkpointing.directory == "./results/grpo-qwen2.5-1.5b-math/checkpoints"
    assert (exp.checkpointing.interval, exp.checkpointing.resume) == (50, "none")
    assert exp.logging.backends == ("jsonl", "console", "tensorboard")
    assert exp.logging.directory == "./results/grpo-qwen2.5-1.5b-math"
    assert exp.logging.project == "rlinf"
    assert (exp.name, exp.variant, exp.seed) == ("grpo-qwen2.5-1.5b-math", "megatron", 1234)


# ---- the seed's mid-2025 layout -------------------------------------------------------------------------------

def test_seed_layout_ignores_the_collocated_inference_group():
    exp = lowered(FIXTURES / "seed.yaml")
    # `actor,inference,rollout: all` on 1 GPU: collocated, so the actor does the inference work itself.
    assert names(exp) == ["actor", "rollout", "reward"]
    assert exp.role("actor").resources.gpu_ids == exp.role("rollout").resources.gpu_ids == (0,)
    assert exp.colocation == (("actor", "rollout"),)
    # Mid-2025 RLinf scores rewards inside the rollout workers: no reward placement, no GPUs.
    assert exp.role("reward").resources.gpus == 0 and exp.role("reward").backend == "rule"


def test_seed_layout_reads_the_old_key_names():
    exp = lowered(FIXTURES / "seed.yaml")
    rollout = exp.role("rollout")
    assert rollout.model.path == "../../model/DeepSeek-R1-Distill-Qwen-1.5B/"  # rollout.model_dir
    assert rollout.engine_args()["attention_backend"] == "triton"  # rollout.attention_backend
    assert rollout.engine_args()["mem_fraction_static"] == 0.55
    assert rollout.engine_args()["engines"] == 1
    assert exp.role("actor").model.dtype == "float16"  # precision fp16
    assert exp.logging.backends == ("jsonl", "console", "tensorboard")
    assert exp.logging.directory == "../results/grpo-1.5b/tensorboard"


def test_seed_layout_numbers():
    exp = lowered(FIXTURES / "seed.yaml")
    s = exp.schedule
    assert (s.prompts_per_step, s.samples_per_step, s.samples_per_optimizer_step) == (64, 64 * 2, 128 // 4)
    assert exp.sampling.max_new_tokens == 2048 - 1024
    opt = exp.role("actor").optimizer
    assert (opt.lr, opt.eps, opt.weight_decay) == (2e-5, 1e-5, 0.05)
    # Megatron-LM's warm-up is lr_warmup_fraction × lr_decay_iters, unrounded: the first update runs at lr_warmup_init.
    assert opt.warmup_steps == pytest.approx(0.01 * 10)
    # TP 1 with sequence_parallel true: nothing to split, so it is not lowered.
    assert not exp.role("actor").parallelism.sequence_parallel
    assert dp(exp, "actor") == 1


def test_cluster_of_unknown_node_size_assumes_eight_gpus_per_node():
    exp = lowered(FIXTURES / "reasoning-2025-10.yaml")
    assert (exp.cluster.nodes, exp.cluster.gpus_per_node) == (2, None)
    actor = exp.role("actor")
    assert (actor.resources.gpus, actor.resources.nodes, actor.resources.gpu_ids) == (16, 2, None)
    assert exp.colocation == (("actor", "rollout", "reward"),)
    assert dp(exp, "actor") == 16 // 2


# ---- disaggregated placements --------------------------------------------------------------------------------

def test_disaggregated_placement_gives_each_role_its_gpu_ids():
    exp = lowered_variant({"cluster.component_placement": DISAGGREGATED})
    assert exp.role("rollout").resources.gpu_ids == (0, 1, 2, 3)
    assert exp.role("actor").resources.gpu_ids == (6, 7)
    assert exp.role("reward").resources.gpu_ids == (0, 1, 2, 3)
    # The inference group only recomputes old log-probs here (kl_beta 0): no role holds GPUs 4-5.
    assert "reference" not in names(exp)
    assert exp.colocation == (("rollout", "reward"),)
    assert not exp.role("rollout").offload.params  # nothing shares its GPUs
    assert exp.role("rollout").engine_args()["engines"] == 4 // 2
    assert dp(exp, "actor") == 2 // 2


def test_kl_in_a_disaggregated_placement_puts_the_reference_on_the_inference_gpus():
    exp = lowered_variant({"cluster.component_placement": DISAGGREGATED, "algorithm.kl_beta": 0.001,
                           "algorithm.kl_penalty_type": "kl", "inference.model.tensor_model_parallel_size": 2})
    reference = exp.role("reference")
    assert reference.resources.gpu_ids == (4, 5)
    assert (reference.backend, reference.parallelism.tp) == ("megatron", 2)
    assert reference.offload.params and reference.optimizer is None
    assert not any("reference" in group for group in exp.colocation)
    assert (exp.algorithm.kl.placement, exp.algorithm.kl.coef, exp.algorithm.kl.estimator) == ("loss", 0.001, "k1")
    assert dp(exp, "reference") == 2 // 2


def test_kl_in_a_collocated_placement_shares_the_actor_gpus():
    exp = lowered(TEMPLATE, "algorithm.kl_beta=0.01")
    reference = exp.role("reference")
    assert reference.resources.gpu_ids == tuple(range(8))
    assert reference.parallelism == exp.role("actor").parallelism
    assert exp.colocation == (("actor", "rollout", "reference", "reward"),)
    assert (exp.algorithm.kl.placement, exp.algorithm.kl.estimator) == ("loss", "k3")  # low_var_kl


def test_reward_straddling_other_roles_holds_no_gpu():
    exp = lowered_variant({"cluster.component_placement": {**DISAGGREGATED, "reward": "2-5"}})
    reward = exp.role("reward")
    assert (reward.resources.gpus, reward.resources.cpus) == (0, 4)


# ---- overrides the way a user types them ---------------------------------------------------------------------

@pytest.mark.parametrize("overrides, optimizer_batch, actor_dp, engines", [
    (["algorithm.n_minibatches=8"], 1024 // 8, 4, 4),
    (["data.rollout_batch_size=64"], 64 * 8 // 4, 4, 4),
    (["rollout.tensor_parallel_size=1"], 256, 4, 8),
    (["actor.model.tensor_model_parallel_size=4", "actor.model.pipeline_model_parallel_size=2"], 256, 1, 4),
    (["cluster.num_nodes=2"], 256, 8, 8),
])
def test_overrides_change_the_derived_numbers(overrides, optimizer_batch, actor_dp, engines):
    exp = lowered(TEMPLATE, *overrides)
    assert exp.schedule.samples_per_optimizer_step == optimizer_batch
    assert dp(exp, "actor") == actor_dp
    assert exp.role("rollout").engine_args()["engines"] == engines


def test_vllm_rollout_gets_vllm_engine_settings():
    exp = lowered(TEMPLATE, "rollout.rollout_backend=vllm", "rollout.vllm.max_num_batched_tokens=16384")
    engine = exp.role("rollout").engine_args()
    assert exp.role("rollout").backend == "vllm"
    assert engine["gpu_memory_utilization"] == 0.55 and "mem_fraction_static" not in engine
    assert (engine["attention_backend"], engine["enable_prefix_caching"], engine["enable_chunked_prefill"],
            engine["max_num_batched_tokens"]) == ("FLASH_ATTN", True, True, 16384)


def test_loss_and_sampling_options():
    exp = lowered(TEMPLATE, "algorithm.clip_ratio_c=3.0", "+algorithm.clip_ratio_low=0.2",
                  "+algorithm.clip_ratio_high=0.28", "algorithm.calculate_entropy=true",
                  "algorithm.entropy_bonus=0.001",
                  "algorithm.loss_agg_func=seq-mean-token-mean", "algorithm.sampling_params.top_k=20",
                  "algorithm.sampling_params.temperature=0.6")
    alg = exp.algorithm
    assert (alg.policy_loss, alg.clip_ratio_c, alg.clip_low, alg.clip_high) == ("dual_clip", 3.0, 0.2, 0.28)
    assert alg.entropy_coef == 0.001 and alg.loss_aggregation == "seq-mean-token-mean"
    assert (exp.sampling.top_k, exp.sampling.temperature) == (20, 0.6)


def test_entropy_bonus_without_entropy_has_no_effect():
    assert lowered(TEMPLATE, "algorithm.entropy_bonus=0.01").algorithm.entropy_coef == 0.0


def test_greedy_sampling():
    # the template is in the current layout (`do_sample`); `use_greedy` is the 2025-08/2025-10 key
    sampling = lowered(TEMPLATE, "algorithm.sampling_params.do_sample=false").sampling
    assert (sampling.temperature, sampling.top_k) == (0.0, -1)
    sampling = lowered(SEED, "algorithm.sampling_params.use_greedy=true").sampling
    assert (sampling.temperature, sampling.top_k) == (0.0, -1)


def test_steps_resume_and_dynamic_batching():
    exp = lowered(TEMPLATE, "runner.max_steps=300", "runner.resume_dir=auto", "runner.save_interval=-1",
                  "runner.enable_dynamic_batch_size=true", "algorithm.use_valid_token_scale=true",
                  "algorithm.n_minibatches=1")
    assert exp.schedule.total_steps == 300
    assert (exp.checkpointing.resume, exp.checkpointing.interval) == ("latest", None)
    actor = exp.role("actor")
    assert actor.sequence_packing and actor.max_tokens_per_micro_batch == 8192


def test_warmup_and_schedule():
    exp = lowered(TEMPLATE, "actor.lr_sched.lr_warmup_fraction=0.1", "actor.lr_sched.lr_decay_style=cosine",
                  "+actor.lr_sched.start_weight_decay=0.01", "+actor.lr_sched.end_weight_decay=0.01")
    opt = exp.role("actor").optimizer
    assert (opt.scheduler, opt.warmup_steps) == ("cosine", int(0.1 * 1000))


@pytest.mark.parametrize("fraction,iters,decay,warmup", [
    ("0.05", "0", "1000", 50),  # the fraction alone: its share of lr_decay_iters
    ("null", "7", "1000", 7),  # lr_warmup_iters counts only with the fraction null
    ("0.05", "7", "1000", 50),  # both: Megatron takes the fraction whenever it is set...
    ("0.0", "7", "1000", 0),  # ...even at 0, so the template's `0.0` turns a written lr_warmup_iters off
    ("0.05", "0", "null", 0.05 * 100000),  # no lr_decay_iters: RLinf's fixed train_iters ends the decay
])
def test_megatron_warmup_takes_the_fraction_whenever_it_is_set(fraction, iters, decay, warmup):
    exp = lowered(TEMPLATE, f"actor.lr_sched.lr_warmup_fraction={fraction}", f"actor.lr_sched.lr_warmup_iters={iters}",
                  f"actor.lr_sched.lr_decay_iters={decay}")
    assert exp.role("actor").optimizer.warmup_steps == pytest.approx(warmup)


# ---- FSDP and a critic ------------------------------------------------------------------------------------------

FSDP = {"strategy": "fsdp2", "sharding_strategy": "hybrid_shard", "fsdp_size": 4, "cpu_offload": True,
        "mixed_precision": {"param_dtype": "bf16", "reduce_dtype": "fp32", "buffer_dtype": "fp32"}}


def test_fsdp_actor_shards_in_groups_of_fsdp_size():
    exp = lowered_variant({"actor.training_backend": "fsdp", "actor.fsdp_config": FSDP})
    actor = exp.role("actor")
    assert actor.backend == "fsdp2" and actor.parallelism.fsdp_shard == 4
    assert actor.offload.cpu_offload_during_step
    assert exp.variant == "fsdp"
    assert dp(exp, "actor") == 8
    plain = lowered_variant({"actor.training_backend": "fsdp",
                             "actor.fsdp_config": {"mixed_precision": FSDP["mixed_precision"]}})
    assert plain.role("actor").backend == "fsdp" and plain.role("actor").parallelism.fsdp_shard is None


def test_critic_is_colocated_with_the_actor():
    exp = lowered_variant({
        "cluster.component_placement": {"actor,critic,rollout,reward": "all"},
        "critic": {"use_critic_model": True, "training_backend": "megatron",
                   "model": {"tensor_model_parallel_size": 2}, "optim": {"lr": 1e-5}},
    })
    critic = exp.role("critic")
    assert critic.resources.gpu_ids == tuple(range(8)) and critic.parallelism.tp == 2
    assert critic.optimizer.lr == 1e-5 and critic.optimizer.betas == (0.9, 0.95)
    assert exp.colocation == (("actor", "rollout", "critic", "reward"),)


def test_two_node_disaggregated_placement_uses_global_gpu_ids():
    exp = lowered_variant({"cluster.num_nodes": 2, "data.rollout_batch_size": 96, "algorithm.kl_beta": 0.001,
                           "cluster.component_placement": {"rollout": "0-7", "inference": "8-9", "actor": "10-15",
                                                           "reward": "0-7"}})
    assert exp.role("actor").resources.gpu_ids == tuple(range(10, 16))  # node 1, local GPUs 2-7
    assert exp.role("reference").resources.gpu_ids == (8, 9)
    assert dp(exp, "actor") == 6 // 2 == 3
    plan, _ = build_plan(exp)
    # 96 × 8 // 4 = 192 samples per optimizer step, 64 on each of the 3 actor DP ranks.
    assert (plan.batch.samples_per_optimizer_step, plan.batch.samples_per_rank) == (192, 64)
    assert exp.role("rollout").engine_args()["engines"] == 4


def test_embodied_and_agent_configs_are_refused_before_planning():
    # rlcfg validates them (tests/dialects/rlinf/test_schema.py) but its runtime has no simulators or agent loops
    from rlcfg.frontend import check_text
    from rlcfg.dialects.rlinf.lower import lower
    from rlcfg.source.yaml_loader import UsageError
    from tests.dialects.rlinf.test_schema import EMBODIED

    result = check_text(EMBODIED, "embodied.yaml", dialect="rlinf")
    assert result.ok
    with pytest.raises(UsageError, match="embodied"):
        lower(result.config)
    agent = check_file(str(TEMPLATE), ["+agentloop.max_turns=5"], dialect="rlinf")
    assert agent.ok
    with pytest.raises(UsageError, match="agent"):
        lower(agent.config)


# ---- the typed algorithm settings (issue 12) ----------------------------------------------------------------------

def test_early_stop_imp_ratio_reaches_the_megatron_actor_loss():
    import torch

    from rlcfg.runtime.algorithms import actor_loss

    exp = lowered(TEMPLATE, "algorithm.early_stop_imp_ratio=1.5")
    assert exp.algorithm.policy_options.early_stop_ratio == 1.5
    assert lowered(TEMPLATE, "algorithm.early_stop_imp_ratio=null").algorithm.policy_options.early_stop_ratio is None
    spec = exp.algorithm.actor_loss_spec()
    mb = {"response_mask": torch.ones(2, 3), "old_logprobs": torch.zeros(2, 3), "advantages": torch.ones(2, 3)}
    calm, _ = actor_loss(torch.full((2, 3), 0.1, requires_grad=True), mb, spec)
    wild, stats = actor_loss(torch.full((2, 3), 1.0, requires_grad=True), mb, spec)  # ratio e ≈ 2.7 > 1.5
    assert float(calm.detach()) != 0.0 and float(wild.detach()) == 0.0 and "early_stopped" in stats


def test_early_stop_is_megatron_only():
    # RLinf's FSDP actor never stops early.
    exp = lowered(TEMPLATE, *FSDP_OVERRIDES, "algorithm.early_stop_imp_ratio=1.5")
    assert exp.algorithm.policy_options.early_stop_ratio is None


def test_importance_sampling_fix_is_a_capped_weight():
    import torch

    from rlcfg.runtime.algorithms import policy_loss

    exp = lowered(TEMPLATE, "+algorithm.importance_sampling_fix=true", "+algorithm.importance_sampling_clip=2.0")
    opts = exp.algorithm.policy_options
    assert (opts.tis_cap, opts.tis_level) == (2.0, "token")
    assert lowered(TEMPLATE, "+algorithm.importance_sampling_clip=2.0").algorithm.policy_options.tis_cap is None
    # RLinf: advantages × min(exp(recomputed − rollout), clip); the PPO loss is linear in the advantage.
    logp, old = torch.zeros(1, 2), torch.zeros(1, 2)
    rollout = torch.tensor([[-2.0, 0.5]])  # weights e² ≈ 7.4 → capped at 2, and e^-0.5
    mask, adv = torch.ones(1, 2), torch.ones(1, 2)
    weighted, _ = policy_loss(logp, old, adv, mask, exp.algorithm.policy_loss_spec(), rollout_logprobs=rollout)
    weight = torch.clamp((old - rollout).exp(), max=2.0)
    plain, _ = policy_loss(logp, old, adv * weight, mask, exp.algorithm.policy_loss_spec().__class__())
    assert torch.allclose(weighted, plain)


@pytest.mark.parametrize("release", ["2025-10", "v0.1", "v0.2"])
def test_importance_sampling_fix_up_to_v0_2_floors_the_weight_and_takes_the_ratio_to_the_rollout(release):
    import torch

    from rlcfg.runtime.algorithms import policy_loss

    result = check_file(str(TEMPLATE), ["+algorithm.importance_sampling_fix=true",
                                        "+algorithm.importance_sampling_clip=1.5"])
    floored = lower("rlinf", result.config, release).algorithm.policy_options
    assert (floored.tis_cap, floored.tis_floor) == (1.5, True)
    assert not lower("rlinf", result.config, "v0.3").algorithm.policy_options.tis_floor
    # RLinf up to v0.2: PPO's ratio against prev_logprobs (the rollout's), the advantages
    # × clamp(exp(recomputed − rollout), min=clip)
    logp = torch.tensor([[-0.2, -1.0, -0.5]])
    recomputed = torch.tensor([[-0.4, -0.7, -0.5]])
    rollout = torch.tensor([[-0.3, -2.0, -0.1]])
    adv, mask = torch.tensor([[1.0, -1.0, 2.0]]), torch.ones(1, 3)
    spec = lower("rlinf", result.config, release).algorithm.policy_loss_spec()
    ours, _ = policy_loss(logp, recomputed, adv, mask, spec, rollout_logprobs=rollout)
    weight = torch.clamp((recomputed - rollout).exp(), min=1.5)
    plain = spec.__class__(spec.kind, spec.clip_low, spec.clip_high, spec.clip_ratio_c)
    theirs, _ = policy_loss(logp, rollout, adv * weight, mask, plain)
    assert torch.allclose(ours, theirs)


def test_clip_log_ratio_bounds_reach_the_policy_loss():
    exp = lowered(TEMPLATE, "+algorithm.clip_log_ratio_min=-3.0", "+algorithm.clip_log_ratio_max=3.0")
    opts = exp.algorithm.policy_options
    assert (opts.log_ratio_min, opts.log_ratio_max) == (-3.0, 3.0)


@pytest.mark.parametrize("key,value", [("algorithm.loss_type", "actor_critic"), ("algorithm.loss_type", "gspo"),
                                       ("algorithm.adv_type", "gae"), ("algorithm.adv_type", "reinpp"),
                                       ("algorithm.adv_type", "no_such_estimator")])
def test_losses_and_advantages_rlcfg_does_not_run_are_refused(key, value):
    result = check_file(str(TEMPLATE), [f"{key}={value}"])
    assert any(d.code == "RLC118" and d.path == key for d in result.diagnostics)
    # `run` stops on the note; `plan` and `convert` still describe the nearest experiment rlcfg runs.
    assert lower("rlinf", result.config).algorithm.advantage == "grpo"


def test_the_ppo_clip_loss_is_what_actor_and_ppo_run():
    for loss in ("actor", "ppo"):
        assert lowered(TEMPLATE, f"algorithm.loss_type={loss}").algorithm.policy_loss == "regular"
    # 2025-08 reads no loss_type at all
    assert lowered(SEED).algorithm.policy_loss in ("regular", "dual_clip")


def test_fsdp_decays_to_the_optimizer_min_lr():
    exp = lowered(TEMPLATE, *FSDP_OVERRIDES, "actor.optim.min_lr=1e-7")
    assert exp.role("actor").optimizer.min_lr == 1e-7


def test_roles_speak_rlinf():
    exp = lowered(TEMPLATE, "algorithm.kl_beta=0.001")
    actor = exp.role("actor")
    assert actor.section == "actor" and actor.key_for("micro_batch_size") == "algorithm.training_batch_size_per_gpu"
    assert actor.key_for("forward_micro_batch_size") == "algorithm.logprob_forward_micro_batch_size"
    assert actor.key_for("max_tokens_per_micro_batch") == "runner.max_tokens_per_mbs"
    assert exp.role("rollout").section == "rollout"
    assert exp.role("reference").section == "actor"  # collocated: the actor swaps the initial weights in


def test_fsdp_reads_no_megatron_schedule():
    # RLinf's FSDP actor takes its schedule from actor.optim.lr_scheduler (constant by default), never lr_sched.
    exp = lowered(TEMPLATE, *FSDP_OVERRIDES, "actor.lr_sched.lr_decay_style=cosine", "actor.lr_sched.lr_warmup_iters=5")
    assert (exp.role("actor").optimizer.scheduler, exp.role("actor").optimizer.warmup_steps) == ("constant", 0)


WD = ("+actor.lr_sched.start_weight_decay=0.01", "+actor.lr_sched.end_weight_decay=0.01")


@pytest.mark.parametrize("key,value,more", [("reward.reward_type", "vqa", ()),
                                            ("actor.lr_sched.lr_decay_style", "inverse-square-root", WD)])
def test_rewards_and_schedules_rlcfg_does_not_run_are_refused(key, value, more):
    result = check_file(str(TEMPLATE), [f"{key}={value}", *more])
    assert any(d.code == "RLC118" and d.path == key for d in result.diagnostics)
    assert lower("rlinf", result.config).role("actor") is not None


def test_a_megatron_decay_schedule_takes_its_weight_decay_from_lr_sched():
    exp = lowered(TEMPLATE, "actor.lr_sched.lr_decay_style=cosine", "+actor.lr_sched.start_weight_decay=0.1",
                  "+actor.lr_sched.end_weight_decay=0.1")
    assert exp.role("actor").optimizer.weight_decay == 0.1
    assert lowered(TEMPLATE).role("actor").optimizer.weight_decay == 0.01  # constant: actor.optim.weight_decay


def test_use_valid_token_scale_in_a_disaggregated_placement_divides_by_the_estimate():
    """RLinf's pipelined Megatron actor divides every loss term's token sum by the longest response
    (encoder_seq_length - max_prompt_length) × a rank's samples: rlcfg's sequence mean of token sums over that length
    ÷ the actor's data-parallel ranks (tests/runtime/test_loss_normalization.py checks the arithmetic)."""
    exp = lowered_variant({"cluster.component_placement": {"actor": "0-3", "rollout": "4-7", "reward": "4-7"},
                           "algorithm.use_valid_token_scale": True, "actor.model.encoder_seq_length": 2048,
                           "data.max_prompt_length": 512})
    a = exp.algorithm
    assert dp(exp, "actor") == 2  # four GPUs, tensor-parallel 2
    assert (a.loss_aggregation, a.loss_normalization) == ("seq-mean-token-sum", "mini-batch")
    assert a.loss_length_norm == (2048 - 512) / 2 and a.loss_length_norm_all_terms and a.count_masked_rows
    spec = a.actor_loss_spec()
    assert spec.length_norm == 768 and spec.length_norm_all_terms
    # collocated, the scale is the step's token count: no length
    assert lowered(TEMPLATE, "algorithm.use_valid_token_scale=true").algorithm.loss_length_norm is None


def test_use_valid_token_scale_gives_rlcfgs_token_mean():
    import torch

    from rlcfg.runtime.algorithms import aggregate

    exp = lowered(TEMPLATE, "algorithm.use_valid_token_scale=true", "algorithm.n_minibatches=1")
    assert (exp.algorithm.loss_aggregation, exp.algorithm.loss_normalization) == ("token-mean", "mini-batch")
    # several mini-batches: each one's token losses over the step's tokens (tests/runtime/test_loss_normalization.py)
    exp = lowered(TEMPLATE, "algorithm.use_valid_token_scale=true", "algorithm.n_minibatches=4")
    assert exp.algorithm.loss_normalization == "step"
    # RLinf without it, micro-batches of two samples on one rank: the mean of each micro-batch's token mean
    # (fsdp_actor_worker.training_step: loss_agg_func, then loss / gradient_accumulation).
    from rlcfg.runtime.algorithms import loss_denominators

    alg = lowered(TEMPLATE, "algorithm.training_batch_size_per_gpu=2").algorithm
    loss = torch.tensor([[1.0, 3.0, 0.0], [2.0, 0.0, 0.0], [5.0, 5.0, 5.0], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    rlinf = ((1.0 + 3.0 + 2.0) / 3 + (15.0 + 0.0) / 4) / 2
    ours = sum(aggregate(loss[i:i + 2], mask[i:i + 2], alg.loss_aggregation,
                         *loss_denominators(alg.loss_normalization, mask[i:i + 2], (7.0, 4.0), 2, 1))
               for i in (0, 2))
    assert torch.isclose(ours, torch.tensor(rlinf))
    dynamic = check_file(str(TEMPLATE), ["runner.enable_dynamic_batch_size=true"])
    assert any(d.code == "RLC118" and d.path == "runner.enable_dynamic_batch_size" for d in dynamic.diagnostics)


def test_fsdp_kl_runs_only_the_symmetric_estimators():
    # RLinf's FSDP actor swaps logprobs and ref_logprobs in kl_penalty.
    result = check_file(str(TEMPLATE), [*FSDP_OVERRIDES, "algorithm.kl_beta=0.01"])
    assert any(d.code == "RLC118" and d.path == "algorithm.kl_penalty_type" for d in result.diagnostics)
    exp = lowered(TEMPLATE, *FSDP_OVERRIDES, "algorithm.kl_beta=0.01", "algorithm.kl_penalty_type=mse")
    assert (exp.algorithm.kl.estimator, exp.algorithm.kl.coef) == ("k2", 0.01)


def test_the_repetition_penalty_moves_the_sampling_when_sampling():
    # RLinf's rollout workers pass repetition_penalty only with do_sample (sglang_worker._get_sampling_params).
    assert lowered(TEMPLATE).sampling.repetition_penalty == 1.0
    assert lowered(TEMPLATE, "algorithm.sampling_params.repetition_penalty=1.1").sampling.repetition_penalty == 1.1
    greedy = lowered(TEMPLATE, "algorithm.sampling_params.repetition_penalty=1.1",
                     "algorithm.sampling_params.do_sample=false")
    assert greedy.sampling.repetition_penalty == 1.0
    # min_new_tokens never reaches RLinf's engines: nothing moves
    assert lowered(TEMPLATE, "algorithm.sampling_params.min_new_tokens=8").sampling.min_new_tokens == 0


@pytest.mark.parametrize("filter_long, expected", [("true", "drop"), ("false", "truncate")])
def test_long_prompts_are_dropped_or_truncated_as_rlinf_does(filter_long, expected):
    exp = lowered(TEMPLATE, f"data.filter_prompt_by_length={filter_long}")
    assert exp.data.long_prompts == expected


def test_recompute_logprobs_false_takes_the_old_log_probs_from_the_rollout_engine():
    # The template writes `return_logprobs: ${not:${algorithm.recompute_logprobs}}`, as RLinf's examples do.
    assert lowered(TEMPLATE).algorithm.old_logprobs == "trainer"
    result = check_file(str(TEMPLATE), ["algorithm.recompute_logprobs=false"])
    assert not any(d.code == "RLC118" for d in result.diagnostics), [d.message for d in result.diagnostics]
    assert lower("rlinf", result.config).algorithm.old_logprobs == "rollout"
    # importance_sampling_fix makes RLinf recompute whatever the key says.
    fixed = lowered(TEMPLATE, "algorithm.recompute_logprobs=false", "++algorithm.importance_sampling_fix=true",
                    "++algorithm.importance_sampling_clip=2.0")
    assert fixed.algorithm.old_logprobs == "trainer"
    # The 2025-08 layout reads the rollout's key.
    assert lowered(SEED, "rollout.recompute_logprobs=false").algorithm.old_logprobs == "rollout"


def test_without_recompute_the_reasoning_runner_drops_the_kl_and_the_2025_08_math_runner_keeps_it():
    # 2025-10 on: no inference pass, so no reference log-probs, and the actor adds the KL only with them.
    result = check_file(str(TEMPLATE), ["algorithm.recompute_logprobs=false", "algorithm.kl_beta=0.01"])
    warned = [d for d in result.diagnostics if d.code == "RLC304" and d.path == "algorithm.kl_beta"]
    assert warned and "without KL" in warned[0].message
    exp = lower("rlinf", result.config)
    assert exp.algorithm.kl.placement == "none" and "reference" not in names(exp)
    # The KL that does not run refuses nothing: FSDP with the reverse-direction estimator is fine then.
    fsdp = check_file(str(TEMPLATE), [*FSDP_OVERRIDES, "algorithm.recompute_logprobs=false", "algorithm.kl_beta=0.01"])
    assert not any(d.code == "RLC118" and d.path == "algorithm.kl_penalty_type" for d in fsdp.diagnostics)
    # 2025-08 computes the reference log-probs whatever rollout.recompute_logprobs says.
    seed = check_file(str(SEED), ["rollout.recompute_logprobs=false", "algorithm.kl_beta=0.01"])
    assert not any(d.code == "RLC304" and d.path == "algorithm.kl_beta" for d in seed.diagnostics)
    exp = lower("rlinf", seed.config)
    assert exp.algorithm.kl.placement == "loss" and "reference" in names(exp)
    assert exp.algorithm.old_logprobs == "rollout"
