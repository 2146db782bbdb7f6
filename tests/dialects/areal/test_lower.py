"""AReaL's lowering: what AReaL would run for each template and for variations a user writes as overrides.

The numbers are worked out by hand from AReaL's launchers and trainers: the servers take the first GPUs and the
trainer the next ones, each trainer rank loads batch_size // dp prompts, ppo_n_minibatches splits a step into
optimizer steps, and so on (see rlcfg/dialects/areal/lower.py)."""

from __future__ import annotations

import json

import pytest

from rlcfg.frontend import check_file
from rlcfg import ir
from rlcfg.ir import to_json
from rlcfg.lower import lower
from tests.helpers import TEMPLATES

# AReaL's own GSM8K examples, as users write them (the templates are rlcfg's choices).
GRPO = str(TEMPLATES.parent / "tests" / "fixtures" / "areal" / "gsm8k-grpo-v0.3.yaml")
SFT = str(TEMPLATES / "areal-sft.yaml")


def lowered(path: str, *overrides: str):
    result = check_file(path, list(overrides))
    errors = [f"{d.code} {d.path}: {d.message}" for d in result.diagnostics if d.severity.name == "ERROR"]
    assert result.config is not None, errors
    return lower("areal", result.config)


# The GRPO template is written for AReaL 0.3; these overrides turn it into a 1.0 document (its 0.3-only keys
# removed) for the tests that add 1.0 keys (per-engine backends, eval_gconfig, ...): rlcfg judges one release, and
# AReaL 1.0 stops on the 0.3 keys.
V1 = ("~async_training", "~actor.group_size", "~actor.behav_imp_weight_cap", "~launcher")
# AReaL 1.0 also needs every engine's backend; the reference model shares the actor's GPUs.
REF_ON_ACTOR = ("+ref.backend=${actor.backend}", "+ref.scheduling_strategy.type=colocation",
                "+ref.scheduling_strategy.target=actor")
V1_PLACED = V1 + ("+actor.backend=fsdp:d4p1t1", "+rollout.backend=sglang:d4p1t1") + REF_ON_ACTOR


def ids(exp, role: str) -> tuple[int, ...] | None:
    return exp.role(role).resources.gpu_ids


@pytest.mark.parametrize("template", sorted(TEMPLATES.glob("areal-*.yaml")), ids=lambda p: p.stem)
def test_every_template_lowers_to_a_json_able_experiment(template):
    exp = lowered(str(template))
    assert exp.dialect == "areal"
    # The trained model: the actor, or a reward model's critic.
    assert exp.role("critic" if exp.kind == "reward_model" else "actor") is not None
    json.dumps(to_json(exp))


# ---- the GRPO template: sglang.d4p1t1+d4p1t1 on one node of 8 GPUs -------------------------------------------


def test_grpo_template_servers_take_the_first_gpus_and_training_the_rest():
    exp = lowered(GRPO)
    assert exp.kind == "rl" and exp.variant == "grpo"
    assert ids(exp, "rollout") == (0, 1, 2, 3)
    assert ids(exp, "actor") == (4, 5, 6, 7)
    # kl_ctl 0.001 > 0 with a `ref` section: the reference is built, inside the trainer processes.
    assert ids(exp, "reference") == (4, 5, 6, 7)
    assert exp.colocation == (("actor", "reference"),)
    assert exp.cluster.nodes == 1 and exp.cluster.gpus_per_node == 8
    assert [r.name for r in exp.roles] == ["rollout", "actor", "reference", "reward"]
    assert exp.role("reward").backend == "rule" and exp.role("reward").resources.gpus == 0


def test_grpo_template_backends_and_parallel_sizes():
    exp = lowered(GRPO)
    actor, rollout = exp.role("actor"), exp.role("rollout")
    # A bare training part with p1 and no e: AReaL picks FSDP, which shards with torch's FSDP2.
    assert actor.backend == "fsdp2" and actor.resources.gpus == 4
    assert (actor.parallelism.tp, actor.parallelism.pp, actor.parallelism.sp) == (1, 1, 1)
    assert rollout.backend == "sglang" and rollout.parallelism.tp == 1
    engine = rollout.engine_args()
    assert engine["engines"] == 4  # d4: four SGLang servers of one GPU each
    assert engine["mem_fraction_static"] == 0.8
    assert engine["max_model_len"] == 32768
    assert engine["seed"] == 1
    assert engine["enable_chunked_prefill"] is False  # chunked_prefill_size -1
    assert engine["enable_prefix_caching"] is True  # disable_radix_cache false
    assert "max_num_seqs" not in engine  # max_running_requests null: SGLang decides


def test_grpo_template_micro_batches_are_packed_by_tokens():
    actor = lowered(GRPO).role("actor")
    assert actor.sequence_packing and actor.max_tokens_per_micro_batch == 10240
    assert actor.micro_batch_size is None
    assert actor.gradient_checkpointing is False
    opt = actor.optimizer
    assert (opt.lr, opt.weight_decay, opt.betas, opt.eps, opt.grad_clip) == (1.7e-5, 0.017, (0.9, 0.999), 1e-8, 1.0)
    assert opt.name == "adamw" and opt.scheduler == "constant"
    assert opt.warmup_steps == 0  # AReaL counts its total steps from the dataset size


def test_grpo_template_batch_algebra():
    s = lowered(GRPO).schedule
    # 256 prompts split over 4 trainer ranks (64 each), 4 answers each, one minibatch.
    assert (s.prompts_per_step, s.samples_per_step, s.samples_per_optimizer_step) == (256, 1024, 1024)
    assert s.total_steps is None and s.epochs == 10
    assert s.eval_interval is None  # the evaluator counts epochs (freq_epochs 1), not steps


def test_grpo_template_algorithm():
    alg = lowered(GRPO).algorithm
    assert alg.group_size == 4
    # reward_norm within each group (GRPO), then adv_norm whitens over the batch.
    assert alg.advantage == "grpo" and alg.normalize_advantage_std and alg.batch_normalize_advantage
    # The KL penalty goes into the token rewards after the group normalisation (AReaL's order).
    assert (alg.kl.placement, alg.kl.coef, alg.kl.estimator, alg.kl.reward_mode) == ("reward", 0.001, "k1", "token")
    assert (alg.clip_low, alg.clip_high, alg.policy_loss) == (0.4, 0.4, "regular")
    # AReaL shapes (score + bias) × scale, clipped to ±20, after any overlong penalty: rlcfg's "penalty_first".
    assert (alg.reward.scale, alg.reward.bias, alg.reward.clip, alg.reward.order) == (10.0, -0.5, 20.0,
                                                                                      "penalty_first")
    assert alg.loss_aggregation == "token-mean" and alg.ppo_epochs == 1 and alg.entropy_coef == 0.0
    # The decoupled loss with v0.3's behav_imp_weight_cap; AReaL's std is the unbiased one, with eps 1e-5.
    assert alg.policy_options.decoupled and alg.policy_options.behav_imp_weight_cap == 5.0
    assert (alg.advantage_options.std, alg.advantage_options.eps) == ("unbiased", 1e-5)
    # No critic: GAE with zero values is the reward-to-go discounted by discount × gae_lambda (here 1).
    assert (alg.gamma, alg.lam) == (1.0, 1.0)


def test_grpo_template_sampling_data_and_bookkeeping():
    exp = lowered(GRPO)
    assert exp.sampling.n == 4 and exp.sampling.max_new_tokens == 1024
    assert exp.sampling.top_k == -1  # gconfig.top_k's 100000000 default is "all tokens"
    assert exp.eval_sampling == exp.sampling  # no eval_gconfig: a copy of gconfig
    assert exp.data.train_files == ("openai/gsm8k",) and exp.data.eval_files == ("openai/gsm8k",)
    assert (exp.data.prompt_key, exp.data.answer_key, exp.data.max_prompt_length) == ("question", "answer", 1024)
    assert exp.seed == 1 and exp.data.seed == 1
    assert exp.checkpointing.directory == "/tmp/areal/experiments/checkpoints/gsm8k-grpo/trial0"
    assert exp.checkpointing.resume == "none"  # recover.mode disabled
    assert exp.logging.backends == ("jsonl", "console")
    assert exp.role("actor").model.path == "Qwen/Qwen2.5-1.5B-Instruct"
    assert exp.role("rollout").model.path == "Qwen/Qwen2.5-1.5B-Instruct"


# ---- the SFT template: d8p1t1 -------------------------------------------------------------------------------


def test_sft_template_is_one_trained_model_without_rollout():
    exp = lowered(SFT)
    assert exp.kind == "sft" and exp.variant == "sft"
    assert [r.name for r in exp.roles] == ["actor"]
    actor = exp.role("actor")
    assert actor.backend == "fsdp2" and ids(exp, "actor") == tuple(range(8))
    assert actor.max_tokens_per_micro_batch == 4096
    assert actor.optimizer.scheduler == "cosine" and actor.optimizer.betas == (0.9, 0.95)
    assert exp.algorithm.group_size == 1 and exp.colocation == () and exp.eval_sampling is None
    s = exp.schedule
    assert (s.prompts_per_step, s.samples_per_step, s.samples_per_optimizer_step) == (128, 128, 128)
    assert s.epochs == 3
    # Nothing is generated; the longest training sequence rides in max_new_tokens for the memory estimate.
    assert exp.sampling.max_new_tokens == 1024 and exp.data.max_prompt_length is None


def test_reward_model_training_lowers_to_a_critic():
    exp = lowered(SFT, "train_dataset.type=rw", "+model.is_critic=true")
    assert exp.kind == "reward_model" and exp.variant == "rw"
    assert [r.name for r in exp.roles] == ["critic"]
    assert exp.role("critic").resources.gpu_ids == tuple(range(8)) and exp.role("critic").trains


def test_sft_on_megatron_rounds_the_batch_to_the_data_parallel_size():
    exp = lowered(SFT, "allocation_mode=megatron:d2p2t2", "train_dataset.batch_size=127",
                  "model.mb_spec.max_tokens_per_mb=null", "+model.mb_spec.n_mbs=4", "+total_train_steps=100")
    actor = exp.role("actor")
    assert actor.backend == "megatron"
    assert (actor.parallelism.tp, actor.parallelism.pp) == (2, 2)
    # dp 2: each rank loads 127 // 2 = 63 samples, 126 in all; 4 micro-batches of at most 16.
    assert exp.schedule.samples_per_step == 126
    assert actor.micro_batch_size == 16 and actor.max_tokens_per_micro_batch is None
    assert exp.schedule.total_steps == 100
    # AReaL warms up for int(0.03 × epochs × batches per epoch) steps (the step cap does not shorten it): the
    # runtime resolves the share once it has read the data.
    assert (actor.optimizer.warmup_steps, actor.optimizer.warmup_proportion) == (0, 0.03)


# ---- allocation_mode variations -----------------------------------------------------------------------------


def test_bare_training_part_with_pipeline_parallelism_runs_on_megatron():
    exp = lowered(GRPO, "allocation_mode=sglang.d2p1t2+d2p2t1")
    actor, rollout = exp.role("actor"), exp.role("rollout")
    assert actor.backend == "megatron" and (actor.parallelism.pp, actor.parallelism.tp) == (2, 1)
    assert rollout.parallelism.tp == 2 and rollout.engine_args()["engines"] == 2
    assert ids(exp, "rollout") == (0, 1, 2, 3) and ids(exp, "actor") == (4, 5, 6, 7)


def test_batch_rounding_and_minibatches():
    exp = lowered(GRPO, "allocation_mode=sglang.d2p1t2+d2p2t1", "train_dataset.batch_size=250",
                  "actor.ppo_n_minibatches=4")
    s = exp.schedule
    # dp 2 (d2 of the training part): 125 prompts per rank, 250 in all; ×4 answers; 4 minibatches of 250.
    assert (s.prompts_per_step, s.samples_per_step, s.samples_per_optimizer_step) == (250, 1000, 250)


def test_batch_not_divisible_by_dp_is_rounded_down():
    s = lowered(GRPO, "train_dataset.batch_size=254").schedule
    assert s.prompts_per_step == 252 and s.samples_per_step == 1008  # 254 // 4 × 4


def test_explicit_megatron_backend_and_cluster_of_two_nodes():
    exp = lowered(GRPO, "allocation_mode=sglang:d8t1+megatron:d2p2t2", "cluster.n_nodes=2")
    assert ids(exp, "rollout") == tuple(range(8)) and ids(exp, "actor") == tuple(range(8, 16))
    assert exp.role("actor").backend == "megatron" and exp.cluster.nodes == 2


def test_colocated_allocation_shares_the_gpus_from_zero():
    exp = lowered(GRPO, "allocation_mode='sglang[rollout]:d4|fsdp[actor]:d4'", "cluster.n_gpus_per_node=4")
    assert ids(exp, "rollout") == ids(exp, "actor") == ids(exp, "reference") == (0, 1, 2, 3)
    assert exp.colocation == (("rollout", "actor", "reference"),)
    # Colocated, AReaL swaps the server out while the actor trains, and the actor out while it generates.
    assert exp.role("rollout").offload.params and exp.role("actor").offload.params


def test_hybrid_moe_allocation():
    exp = lowered(GRPO, "allocation_mode='sglang:d4+megatron:(attn:d1p2t2|ffn:d1p2e2)'")
    par = exp.role("actor").parallelism
    assert exp.role("actor").backend == "megatron"
    assert (par.tp, par.pp, par.ep, par.etp) == (2, 2, 2, 1)


def test_the_seed_default_cluster_is_not_a_real_machine():
    exp = lowered(GRPO, "cluster.n_nodes=32")
    assert exp.cluster.nodes is None and exp.cluster.gpus_per_node == 8


# ---- the 1.0 per-engine backends ----------------------------------------------------------------------------


def test_single_controller_creates_the_actor_first():
    exp = lowered(GRPO, *V1, "allocation_mode=''", "+actor.backend=fsdp:d4", "+rollout.backend=sglang:d2t2",
                  "+ref.backend=fsdp:d4", "+ref.scheduling_strategy.type=colocation",
                  "+ref.scheduling_strategy.target=actor", "+scheduler.type=local")
    assert ids(exp, "actor") == ids(exp, "reference") == (0, 1, 2, 3)
    assert ids(exp, "rollout") == (4, 5, 6, 7)
    assert exp.role("rollout").parallelism.tp == 2 and exp.role("rollout").engine_args()["engines"] == 2


def test_spmd_launcher_with_backends_still_starts_the_servers_first():
    exp = lowered(GRPO, *V1, *REF_ON_ACTOR, "+actor.backend=fsdp:d4", "+rollout.backend=sglang:d2t2",
                  "allocation_mode=sglang:d2t2+fsdp:d4")
    assert ids(exp, "rollout") == (0, 1, 2, 3) and ids(exp, "actor") == (4, 5, 6, 7)
    assert ids(exp, "reference") == (4, 5, 6, 7)  # no backend of its own: inside the trainer


def test_rollout_colocated_with_the_actor_by_scheduling_strategy():
    exp = lowered(GRPO, *V1, *REF_ON_ACTOR, "allocation_mode=''", "+actor.backend=fsdp:d8", "+rollout.backend=sglang:d8",
                  "+rollout.scheduling_strategy.type=colocation", "+rollout.scheduling_strategy.target=actor",
                  "+scheduler.type=local", "+enable_offload=true",
                  "++actor.weight_update_mode=disk")  # AReaL 1.0 refuses colocation with its default xccl
    assert ids(exp, "rollout") == ids(exp, "actor") == tuple(range(8))
    assert set(exp.colocation[0]) == {"actor", "reference", "rollout"}
    assert exp.role("actor").offload.optimizer and exp.role("rollout").offload.params


def test_vllm_rollout_engine_args():
    exp = lowered(GRPO, "allocation_mode=vllm:d2t2+fsdp:d4", "+vllm.gpu_memory_utilization=0.7",
                  "+vllm.max_num_seqs=128")
    rollout = exp.role("rollout")
    assert rollout.backend == "vllm"
    engine = rollout.engine_args()
    assert engine["gpu_memory_utilization"] == 0.7 and engine["max_num_seqs"] == 128
    assert engine["engines"] == 2 and engine["enable_prefix_caching"] is False
    assert "mem_fraction_static" not in engine


# ---- the PPO actor's settings -------------------------------------------------------------------------------


def test_no_kl_means_no_reference():
    exp = lowered(GRPO, "actor.kl_ctl=0.0")
    assert exp.role("reference") is None
    assert exp.algorithm.kl.placement == "none" and exp.colocation == ()


def test_batch_normalisation_alone_is_reinforce_plus_plus():
    # Only adv_norm at batch level: returns (score minus the per-token KL) whitened over the batch.
    alg = lowered(GRPO, "~actor.reward_norm").algorithm
    assert alg.advantage == "reinforce++"


def test_group_mean_without_std_and_leave_one_out():
    alg = lowered(GRPO, "actor.reward_norm.std_level=null").algorithm
    assert alg.advantage == "grpo" and not alg.normalize_advantage_std
    alg = lowered(GRPO, "actor.reward_norm.std_level=null", "+actor.reward_norm.mean_leave1out=true").algorithm
    assert alg.advantage == "rloo"
    # AReaL's population std (std_unbiased false) and its eps reach the GRPO estimator.
    alg = lowered(GRPO, "+actor.reward_norm.std_unbiased=false", "+actor.reward_norm.eps=0.01").algorithm
    assert (alg.advantage_options.std, alg.advantage_options.eps) == ("population", 0.01)


def test_litepps_group_mean_and_batch_std_normalise_the_scores_before_the_return():
    """LitePPO (reward_norm: group mean, batch std): the scores so normalised with AReaL's Normalization (the
    spread about each group's mean, its eps and std_unbiased), then the discounted return, whitened by adv_norm."""
    from rlcfg.frontend import check_file

    overrides = ("actor.reward_norm.std_level=batch", "+actor.reward_norm.eps=0.01")
    result = check_file(GRPO, list(overrides))
    assert result.ok and not [d for d in result.diagnostics if d.code == "RLC118"], \
        [(d.code, d.path) for d in result.diagnostics]
    alg = lowered(GRPO, *overrides).algorithm
    options = alg.advantage_options
    assert alg.advantage == "reinforce++" and options.whiten and not alg.batch_normalize_advantage
    assert (options.reward_norm_mean, options.reward_norm_std, options.reward_norm_std_of) == \
        ("group", "batch", "centred")
    assert (options.reward_norm_eps, options.reward_norm_unbiased) == (0.01, True)
    # a batch mean is still not run
    refused = check_file(GRPO, ["actor.reward_norm.mean_level=batch"])
    assert "actor.reward_norm" in {d.path for d in refused.diagnostics if d.code == "RLC118"}


def test_no_norm_at_all_is_the_plain_return():
    alg = lowered(GRPO, "~actor.reward_norm", "~actor.adv_norm").algorithm
    assert alg.advantage == "reinforce++" and not alg.advantage_options.whiten


def test_clipping_variants():
    alg = lowered(GRPO, *V1_PLACED, "+actor.c_clip=3.5", "+actor.eps_clip_higher=0.28").algorithm
    assert alg.policy_loss == "dual_clip" and alg.clip_ratio_c == 3.5
    assert (alg.clip_low, alg.clip_high) == (0.4, 0.28)
    alg = lowered(GRPO, *V1_PLACED, "+actor.importance_sampling_level=sequence").algorithm
    # AReaL's GSPO differentiates through the sequence ratio and uses each sequence's mean advantage.
    assert alg.policy_loss == "gspo" and alg.policy_options.gspo_form == "sequence"
    # 1.0's rejection sampling masks before the sequence means (a flag only GSPO's sequence form reads).
    alg = lowered(GRPO, *V1_PLACED, "+actor.importance_sampling_level=sequence",
                  "+actor.rejection_sampling.upper=5.0").algorithm
    assert alg.policy_options.cap_before_sequence_means and alg.policy_options.behav_imp_weight_cap == 5.0
    alg = lowered(GRPO, *V1_PLACED, "+actor.rejection_sampling.upper=5.0").algorithm
    assert alg.policy_loss == "regular" and not alg.policy_options.cap_before_sequence_means


def test_overlong_penalty_starts_from_the_actors_max_new_tokens():
    alg = lowered(GRPO, "+actor.overlong_reward_penalty=true", "+actor.overlong_tokens=256",
                  "+actor.overlong_penalty_factor=0.5", "+actor.max_new_tokens=2048").algorithm
    assert alg.reward.overlong_penalty_length == 2048 - 256 and alg.reward.overlong_penalty_factor == 0.5


def test_truncated_responses_score_zero_and_stay_in_the_loss():
    alg = lowered(GRPO, "+actor.mask_no_eos_with_zero=true").algorithm
    assert alg.reward.zero_truncated and not alg.mask_truncated


def test_dynamic_sampling_is_refused_not_lowered():
    # AReaL drops equal-reward groups without drawing more; rlcfg's dynamic sampling redraws, so the key is refused
    # (tests/dialects/areal/test_schema.py) and nothing of it is lowered.
    alg = lowered(GRPO, "+actor.dynamic_sampling=true").algorithm
    assert not alg.dynamic_sampling and alg.filter_spec().dynamic is None


def test_greedy_sampling_and_eval_gconfig():
    exp = lowered(GRPO, *V1_PLACED, "gconfig.greedy=true", "+eval_gconfig.n_samples=1", "+eval_gconfig.temperature=0.6",
                  "+eval_gconfig.max_new_tokens=512")
    assert exp.sampling.temperature == 0.0 and exp.sampling.top_k == 1
    assert (exp.eval_sampling.n, exp.eval_sampling.temperature, exp.eval_sampling.max_new_tokens) == (1, 0.6, 512)


def test_sample_cap_and_step_cap():
    # 1024 samples a step: 5000 samples stop AReaL after ceil(5000 / 1024) = 5 steps, before the 8-step cap.
    s = lowered(GRPO, "+total_train_n_seqs=5000", "+total_train_steps=8").schedule
    assert s.total_steps == 5


def test_saving_eval_and_recovery_by_steps():
    exp = lowered(GRPO, "saver.freq_steps=50", "evaluator.freq_steps=20", "recover.mode=auto",
                  "stats_logger.wandb.mode=online", "+stats_logger.tensorboard.path=/tmp/tb")
    assert exp.checkpointing.interval == 50 and exp.schedule.eval_interval == 20
    assert exp.checkpointing.resume == "latest"
    assert exp.logging.backends == ("jsonl", "console", "tensorboard", "wandb")


def test_a_critic_makes_it_ppo_with_gae():
    exp = lowered(GRPO, "+critic.experiment_name=gsm8k-grpo", "+critic.trial_name=trial0",
                  "+critic.path=Qwen/Qwen2.5-1.5B-Instruct", "+critic.eps_clip=0.3", "+critic.optimizer.lr=1e-5",
                  "+actor.gae_lambda=0.95", "+actor.discount=0.99")
    alg = exp.algorithm
    assert alg.advantage == "gae" and (alg.gamma, alg.lam) == (0.99, 0.95) and alg.value_clip == 0.3
    assert alg.advantage_options.whiten  # adv_norm at batch level
    critic = exp.role("critic")
    assert critic.trains and critic.optimizer.lr == 1e-5
    assert ids(exp, "critic") == ids(exp, "actor") == (4, 5, 6, 7)  # inside the trainer processes


def test_adv_norm_other_than_the_batch_whitening_runs_as_areals_normalization():
    alg = lowered(GRPO, "actor.adv_norm.mean_level=group", "+actor.adv_norm.group_size=4",
                  "+actor.adv_norm.mean_leave1out=true", "+actor.adv_norm.eps=0.001").algorithm
    assert alg.advantage == "grpo" and not alg.batch_normalize_advantage
    assert alg.advantage_options.token_norm == ir.TokenNorm(mean="group", std="batch", leave_one_out=True, eps=0.001)
    # The batch form stays the whitening every dialect has, so that convert carries it.
    alg = lowered(GRPO).algorithm
    assert alg.batch_normalize_advantage and alg.advantage_options.token_norm is None


def test_a_cpu_cluster_says_nothing_about_gpus():
    # AReaL's CPU example writes n_gpus_per_node: 0; the plan's own flags then decide.
    exp = lowered(GRPO, "cluster.n_gpus_per_node=0")
    assert exp.cluster.gpus_per_node is None


# ---- the 1.0 PPO template: per-engine backends, a critic, vLLM, the decoupled loss with rejection sampling ----

PPO = str(TEMPLATES.parent / "tests" / "fixtures" / "areal" / "gsm8k-ppo-v1.0.yaml")


def test_ppo_template_places_the_engines_in_creation_order():
    exp = lowered(PPO)
    # The single controller creates actor, critic, ref, rollout in that order; critic and ref are colocated.
    assert ids(exp, "actor") == ids(exp, "critic") == ids(exp, "reference") == (0, 1, 2, 3)
    assert ids(exp, "rollout") == (4, 5, 6, 7)
    rollout = exp.role("rollout")
    assert rollout.backend == "vllm"
    engine = rollout.engine_args()
    assert (engine["gpu_memory_utilization"], engine["max_model_len"], engine["seed"]) == (0.9, 32768, 1)


def test_ppo_template_algorithm():
    alg = lowered(PPO).algorithm
    assert alg.advantage == "gae" and (alg.gamma, alg.lam) == (1.0, 0.95) and alg.value_clip == 0.5
    assert alg.advantage_options.whiten
    assert (alg.clip_low, alg.clip_high) == (0.2, 0.28)
    assert (alg.kl.coef, alg.kl.estimator, alg.kl.reward_mode) == (0.001, "k3", "token")
    # 1.0's rejection_sampling (token level, mask, ratio) bounds the behaviour importance weight.
    assert alg.policy_options.decoupled and alg.policy_options.behav_imp_weight_cap == 5.0


def test_roles_speak_areal():
    exp = lowered(PPO)
    assert {r.name: r.section for r in exp.roles if r.name != "reward"} == {
        "actor": "actor", "critic": "critic", "reference": "ref", "rollout": "rollout"}
    assert exp.role("actor").key_for("max_tokens_per_micro_batch") == "actor.mb_spec.max_tokens_per_mb"
    assert exp.role("critic").key_for("max_tokens_per_micro_batch") == "critic.mb_spec.max_tokens_per_mb"
    # Micro-batches by count: n_mbs sets both the training and the forward micro-batches.
    actor = lowered(GRPO, "~actor.mb_spec.max_tokens_per_mb", "+actor.mb_spec.n_mbs=4").role("actor")
    assert actor.micro_batch_size == 1024 // 4 // 4
    assert actor.key_for("micro_batch_size") == actor.key_for("forward_micro_batch_size") == "actor.mb_spec.n_mbs"
    assert lowered(SFT).role("actor").section == "model"


def test_sapo_loss_and_its_temperatures():
    alg = lowered(GRPO, *V1_PLACED, "actor.use_decoupled_loss=false", "+actor.use_sapo_loss=true",
                  "+actor.sapo_tau_pos=0.8", "+actor.sapo_tau_neg=1.2").algorithm
    assert alg.policy_loss == "sapo"
    assert (alg.policy_options.sapo_tau_pos, alg.policy_options.sapo_tau_neg) == (0.8, 1.2)
    assert not alg.policy_options.decoupled


def test_without_the_decoupled_loss_there_is_no_behaviour_weight():
    alg = lowered(GRPO, "actor.use_decoupled_loss=false", "~actor.behav_imp_weight_cap").algorithm
    assert not alg.policy_options.decoupled and alg.policy_options.behav_imp_weight_cap is None


def test_discount_and_lambda():
    # Without a critic AReaL's GAE runs on zero values: one discount, discount × gae_lambda.
    alg = lowered(GRPO, "+actor.discount=0.9", "+actor.gae_lambda=0.5").algorithm
    assert (alg.gamma, alg.lam) == (0.9 * 0.5, 1.0)


# ---- the numbers: what the runtime computes from the lowered settings, against AReaL's formulas by hand ---------


def test_reward_shaping_numbers():
    torch = pytest.importorskip("torch")
    from rlcfg.runtime import algorithms as A

    alg = lowered(GRPO, "gconfig.max_new_tokens=1024", "+actor.max_new_tokens=1024",
                  "+actor.overlong_reward_penalty=true", "+actor.overlong_tokens=256",
                  "+actor.overlong_penalty_factor=0.5").algorithm
    raw = torch.tensor([1.0, 0.0, 3.0])
    lengths = torch.tensor([1000, 500, 10])
    finished = torch.tensor([True, True, True])
    out = A.shape_scores(raw, lengths, finished, 1024, alg.reward)
    # AReaL reward_overlong_penalty: min(−(len − (1024 − 256)) / 256 · 0.5, 0) on the raw score, then
    # (score − 0.5) × 10, clipped to ±20: 1000 tokens → (1 − 232/256·0.5 − 0.5)·10; 3.0 → 25 → 20.
    expected = torch.tensor([(1.0 - 232 / 256 * 0.5 - 0.5) * 10, (0.0 - 0.5) * 10, 20.0])
    assert torch.allclose(out, expected)
    zeroed = A.shape_scores(raw, lengths, torch.tensor([True, False, True]),
                            1024, lowered(GRPO, "+actor.mask_no_eos_with_zero=true").algorithm.reward)
    assert float(zeroed[1]) == 0.0


def _areal_gae(token_rewards, mask, values, discount, lam):
    """AReaL PPOActor.compute_advantages' loop (tokens outside the mask skipped), written out by hand."""
    bs, width = len(token_rewards), len(token_rewards[0])
    out = [[0.0] * width for _ in range(bs)]
    for b in range(bs):
        last, next_value = 0.0, 0.0
        for t in reversed(range(width)):
            if not mask[b][t]:
                out[b][t] = last
                continue
            delta = token_rewards[b][t] + discount * next_value - values[b][t]
            last = delta + discount * lam * last
            next_value = values[b][t]
            out[b][t] = last
    return out


def test_advantages_with_the_kl_in_the_token_rewards():
    torch = pytest.importorskip("torch")
    from rlcfg.runtime import algorithms as A

    alg = lowered(GRPO, "~actor.adv_norm", "+actor.discount=0.9").algorithm
    scores = torch.tensor([1.0, 0.0, 0.0, 0.0])  # one group of 4
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 1, 1], [1, 0, 0]], dtype=torch.float32)
    kl = torch.tensor([[0.1, 0.2, 0.3], [0.0, 0.5, 0.0], [0.2, 0.2, 0.2], [0.4, 0.0, 0.0]])
    adv, _ = A.compute_advantages(scores, mask, estimator=alg.advantage, group_size=alg.group_size,
                                  options=alg.advantage_options, normalize_std=alg.normalize_advantage_std,
                                  batch_normalize=alg.batch_normalize_advantage, gamma=alg.gamma, lam=alg.lam,
                                  kl_penalty=alg.kl.coef * kl, kl_mode=alg.kl.reward_mode)
    # AReaL: reward_norm (group mean, unbiased std + 1e-5) on the score, on the last token; −kl_ctl·KL per token;
    # GAE with zero values (discount 0.9, lambda 1).
    mean, std = 0.25, float(torch.tensor([1.0, 0.0, 0.0, 0.0]).std())
    norm = [(s - mean) / (std + 1e-5) for s in [1.0, 0.0, 0.0, 0.0]]
    rewards = (-0.001 * kl * mask).tolist()
    for b, n in enumerate(int(m) for m in mask.sum(dim=1)):
        rewards[b][n - 1] += norm[b]
    expected = torch.tensor(_areal_gae(rewards, mask.tolist(), [[0.0] * 3] * 4, 0.9, 1.0)) * mask
    assert torch.allclose(adv, expected, atol=1e-6)


def test_gae_with_a_critic_and_batch_whitening():
    torch = pytest.importorskip("torch")
    from rlcfg.runtime import algorithms as A

    alg = lowered(PPO).algorithm
    scores = torch.tensor([1.0, -0.5])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.float32)
    values = torch.tensor([[0.2, 0.1, 0.4], [0.3, -0.2, 0.0]])
    adv, _ = A.compute_advantages(scores, mask, estimator=alg.advantage, group_size=1,
                                  options=alg.advantage_options, gamma=alg.gamma, lam=alg.lam, values=values)
    rewards = [[0.0, 0.0, 1.0], [0.0, -0.5, 0.0]]
    raw = torch.tensor(_areal_gae(rewards, mask.tolist(), values.tolist(), 1.0, 0.95))
    # AReaL adv_norm (batch mean and unbiased std over the loss tokens, + eps 1e-5); rlcfg's masked whitening
    # divides by sqrt(var + 1e-8) instead: the same to within 1e-4 here.
    live = raw[mask.bool()]
    expected = (raw - live.mean()) / (live.std() + 1e-5) * mask
    assert torch.allclose(adv, expected, atol=1e-4)


def _areal_decoupled_loss(logp, prox, behave, adv, mask, eps_low, eps_high, cap):
    """AReaL v0.3.4 areal/utils/functional.py ppo_actor_loss_fn, written out by hand (the loss's value)."""
    import torch

    ratio = torch.exp(logp - prox)
    clipped = ratio.clamp(1 - eps_low, 1 + eps_high)
    pg = torch.maximum(-adv * ratio, -adv * clipped)
    weight = torch.exp(prox - behave)
    keep = (weight <= cap) & mask.bool()
    pg = pg * torch.where(keep, weight, torch.zeros_like(weight))
    return torch.where(mask.bool(), pg, torch.zeros_like(pg)).sum() / mask.sum()


def test_decoupled_loss_numbers():
    torch = pytest.importorskip("torch")
    from rlcfg.runtime import algorithms as A

    alg = lowered(GRPO).algorithm  # eps_clip 0.4, decoupled, behav_imp_weight_cap 5
    logp = torch.tensor([[-1.0, -0.5, -2.0], [-0.3, -1.2, -0.7]])
    prox = torch.tensor([[-1.1, -0.4, -2.5], [-0.3, -1.0, -0.9]])
    behave = torch.tensor([[-1.0, -2.5, -2.4], [-0.6, -1.0, -0.9]])  # token (0, 1): weight e^2.1 > 5, dropped
    adv = torch.tensor([[1.0, -2.0, 0.5], [-1.0, 1.5, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.float32)
    loss, _ = A.actor_loss(logp, {"response_mask": mask, "advantages": adv, "old_logprobs": prox,
                                  "rollout_logprobs": behave}, alg.actor_loss_spec())
    expected = _areal_decoupled_loss(logp, prox, behave, adv, mask, 0.4, 0.4, 5.0)
    assert torch.allclose(loss, expected, atol=1e-6)


def test_sapo_loss_numbers():
    torch = pytest.importorskip("torch")
    from rlcfg.runtime import algorithms as A

    alg = lowered(GRPO, *V1_PLACED, "actor.use_decoupled_loss=false", "+actor.use_sapo_loss=true").algorithm
    logp = torch.tensor([[-1.0, -0.5], [-0.3, -1.2]])
    old = torch.tensor([[-1.2, -0.4], [-0.3, -1.0]])
    adv = torch.tensor([[1.0, -2.0], [-1.0, 1.5]])
    mask = torch.ones(2, 2)
    loss, _ = A.actor_loss(logp, {"response_mask": mask, "advantages": adv, "old_logprobs": old},
                           alg.actor_loss_spec())
    # AReaL 1.0 sapo_loss_fn: −σ(τ(r − 1))·4/τ·A, τ = 1.0 for A > 0 and 1.05 otherwise, token mean.
    ratio = torch.exp(logp - old)
    tau = torch.where(adv > 0, torch.tensor(1.0), torch.tensor(1.05))
    expected = (-torch.sigmoid(tau * (ratio - 1)) * 4 / tau * adv).mean()
    assert torch.allclose(loss, expected, atol=1e-6)


def test_frequency_penalty_and_stop_token_ids_move_the_sampling():
    exp = lowered(GRPO, "+gconfig.frequency_penalty=0.5", "+gconfig.stop_token_ids=[7,9]")
    assert exp.sampling.frequency_penalty == 0.5 and exp.sampling.stop_token_ids == (7, 9)
    base = lowered(GRPO)
    assert base.sampling.frequency_penalty == 0.0 and base.sampling.stop_token_ids == ()
    # AReaL's vLLM request leaves frequency_penalty out (areal/engine/vllm_remote.py): it changes nothing there
    vllm = lowered(GRPO, "allocation_mode=vllm:d2t2+fsdp:d4", "+gconfig.frequency_penalty=0.5",
                   "+gconfig.stop_token_ids=[7]")
    assert vllm.sampling.frequency_penalty == 0.0 and vllm.sampling.stop_token_ids == (7,)
    # min_new_tokens reaches neither engine in AReaL
    assert lowered(GRPO, "gconfig.min_new_tokens=4").sampling.min_new_tokens == 0


def test_the_staleness_bound_reaches_the_experiment():
    exp = lowered(GRPO, "rollout.max_head_offpolicyness=2", "rollout.max_concurrent_rollouts=64")
    assert (exp.schedule.max_staleness, exp.schedule.rollout_concurrency) == (2, 64)
    # v0.3 without async_training rolls out synchronously whatever the bound says; with no bound the concurrency
    # changes nothing that is computed.
    for overrides in (["async_training=false"], ["rollout.max_head_offpolicyness=0"]):
        exp = lowered(GRPO, "rollout.max_head_offpolicyness=2", "rollout.max_concurrent_rollouts=64", *overrides)
        assert (exp.schedule.max_staleness, exp.schedule.rollout_concurrency) == (0, None), overrides


def test_lora_on_the_actor_is_peft_s_as_areal_builds_it():
    exp = lowered(GRPO, "+actor.use_lora=true", "+actor.lora_rank=16", "+actor.lora_alpha=32")
    lora = exp.role("actor").lora
    assert (lora.rank, lora.alpha, lora.dropout, lora.target_modules, lora.init) == (16, 32, 0.0, "all-linear",
                                                                                     "kaiming")
    assert exp.role("actor").key_for("lora.rank") == "actor.lora_rank"
    named = lowered(GRPO, "+actor.use_lora=true", "+actor.target_modules=[q_proj,v_proj]").role("actor").lora
    assert named.target_modules == ("q_proj", "v_proj")
    assert lowered(GRPO, "+actor.use_lora=true", "+actor.target_modules=[all-linear]").role(
        "actor").lora.target_modules == "all-linear"
    assert lowered(GRPO).role("actor").lora is None


def test_lora_outside_the_rl_actor_is_refused():
    from rlcfg.frontend import check_file

    notes = {d.path for d in check_file(GRPO, ["+ref.use_lora=true", "+actor.use_lora=true"]).diagnostics
             if d.code == "RLC118"}
    assert not {"actor.use_lora", "ref.use_lora"} & notes  # a reference's adapter starts at zero and never moves
    sft = {d.path for d in check_file(SFT, ["+model.use_lora=true"]).diagnostics if d.code == "RLC118"}
    assert "model.use_lora" in sft


def test_without_recomputation_pi_old_is_the_engines():
    """recompute_logprob false without the decoupled loss: AReaL's PPO ratio and KL penalty take π_old from the
    inference engine's log-probabilities; the decoupled loss always recomputes (the proximal policy)."""
    plain = ("actor.use_decoupled_loss=false", "~actor.behav_imp_weight_cap")
    assert lowered(GRPO, *plain, "actor.recompute_logprob=false").algorithm.old_logprobs == "rollout"
    assert lowered(GRPO, *plain, "actor.recompute_logprob=true").algorithm.old_logprobs == "trainer"
    assert lowered(GRPO, "actor.recompute_logprob=false").algorithm.old_logprobs == "trainer"


def test_the_decoupled_loss_measures_the_kl_penalty_from_the_engines_log_probs():
    """PPOActor.compute_advantages: with the decoupled loss π_old of the KL penalty is the behaviour policy (the
    inference engine's log-probabilities); without it, the recomputed ones."""
    assert lowered(GRPO).algorithm.kl.policy_logprobs == "rollout"  # the fixture: decoupled, kl_ctl 0.001
    plain = lowered(GRPO, "actor.use_decoupled_loss=false", "~actor.behav_imp_weight_cap",
                    "actor.recompute_logprob=true")
    assert plain.algorithm.kl.policy_logprobs == "old" and plain.algorithm.kl.coef > 0
