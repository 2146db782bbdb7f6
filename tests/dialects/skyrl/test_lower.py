"""SkyRL → Experiment: the roles, GPU counts, parallel sizes, batch algebra and algorithm skyrl-train would run,
derived by hand from the template (and from variations of it, and from configs written the way the seed
documents them) and compared with the lowering."""

from __future__ import annotations

import textwrap

import pytest

from rlcfg.frontend import check_file
from rlcfg.ir import ENGINE_KEYS, ROLE_NAMES, Experiment, FilterSpec, KLController
from rlcfg.lower import lower as lower_any
from rlcfg.plan import build_plan
from rlcfg.dialects.skyrl.lower import effective_max_seq_len, effective_update_group, lower
from tests.helpers import TEMPLATES

FSDP2 = TEMPLATES / "skyrl-fsdp-vllm.yaml"
PPO = TEMPLATES / "skyrl-ppo-fsdp-vllm.yaml"
SKYRL_TEMPLATES = sorted(TEMPLATES.glob("skyrl-*.yaml"))
ENV = {"HOME": "/home/user"}
# Off colocate_all, each model and the engines get GPUs of their own.
APART = ("trainer.placement.colocate_all=false",)


def checked(path, *overrides: str):
    result = check_file(str(path), list(overrides), env=ENV)
    assert result.config is not None, [f"{d.path}: {d.message}" for d in result.diagnostics]
    return result


def experiment(path, *overrides: str) -> Experiment:
    return lower(checked(path, *overrides).config)


def seed_style(tmp_path, text: str, *overrides: str) -> Experiment:
    """A config written with the seed's keys (and none of the newer ones)."""
    path = tmp_path / "skyrl.yaml"
    path.write_text(textwrap.dedent(text))
    return experiment(path, *overrides)


# ---- every template -----------------------------------------------------------------------------------------


def test_there_is_a_template():
    assert SKYRL_TEMPLATES


@pytest.mark.parametrize("path", SKYRL_TEMPLATES, ids=lambda p: p.name)
def test_template_lowers(path):
    result = checked(path)
    assert result.dialect == "skyrl"
    exp = lower_any("skyrl", result.config)
    assert exp.dialect == "skyrl" and exp.kind == "rl"
    names = [r.name for r in exp.roles]
    assert len(names) == len(set(names)) and set(names) <= set(ROLE_NAMES)
    assert exp.role("actor").backend in ("fsdp", "fsdp2", "megatron", "deepspeed") and exp.role("actor").trains
    assert exp.role("rollout").backend in ("vllm", "sglang") and not exp.role("rollout").trains
    for role in exp.roles:
        assert set(role.engine_args()) <= set(ENGINE_KEYS)
        assert role.resources.gpu_ids is None  # SkyRL counts GPUs; Ray picks which
    for group in exp.colocation:
        assert len({exp.role(name).resources.gpus for name in group}) == 1
    s = exp.schedule
    assert s.samples_per_step == s.prompts_per_step * exp.algorithm.group_size
    assert s.samples_per_step % s.samples_per_optimizer_step == 0


def test_fsdp2_template():
    exp = experiment(FSDP2)
    assert exp.name == "gsm8k_grpo_qwen2.5_1.5b" and exp.variant == "fsdp2"
    assert exp.cluster.nodes is None and exp.cluster.gpus_per_node is None  # SkyRL never states the cluster
    assert [r.name for r in exp.roles] == ["actor", "rollout", "reference", "reward"]
    actor, rollout, ref, reward = (exp.role(n) for n in ("actor", "rollout", "reference", "reward"))

    # 1 node × 4 GPUs for the policy and the ref; 4 engines × TP 1 = 4 GPUs, all shared (colocate_all).
    assert (actor.resources.gpus, actor.resources.nodes, actor.resources.gpus_per_node) == (4, 1, 4)
    assert (ref.resources.gpus, ref.resources.nodes, ref.resources.gpus_per_node) == (4, 1, 4)
    assert rollout.resources.gpus == 4
    assert exp.colocation == (("actor", "rollout", "reference"),)
    assert actor.backend == ref.backend == "fsdp2" and rollout.backend == "vllm"
    # sequence_parallel_size 1, fsdp_size -1: DP 4, FSDP over all 4 ranks.
    assert actor.parallelism.sp == 1 and actor.parallelism.fsdp_shard is None
    assert rollout.parallelism.tp == 1 and rollout.parallelism.pp == 1

    # colocate_all: every model is moved off the GPU while another runs; the ref also keeps its parameters on
    # CPU during its forward (ref.fsdp_config.cpu_offload: true), the policy does not.
    assert actor.offload.params and actor.offload.optimizer and actor.offload.grads
    assert not actor.offload.cpu_offload_during_step
    assert ref.offload.params and ref.offload.cpu_offload_during_step
    assert rollout.offload.params

    assert actor.model.path == ref.model.path == rollout.model.path == "Qwen/Qwen2.5-1.5B-Instruct"
    assert actor.micro_batch_size == 16 and actor.forward_micro_batch_size == 32
    assert ref.forward_micro_batch_size == 32 and ref.optimizer is None
    assert actor.gradient_checkpointing and actor.sequence_packing
    opt = actor.optimizer
    assert (opt.lr, opt.weight_decay, opt.betas, opt.grad_clip) == (1e-6, 0.01, (0.9, 0.999), 1.0)
    assert (opt.name, opt.scheduler, opt.warmup_steps) == ("adamw", "constant", 0)  # constant_with_warmup

    assert rollout.engine_args() == {
        "engines": 4, "seed": 42, "gpu_memory_utilization": 0.8, "max_num_seqs": 1024,
        # enforce_eager defaults to true from skyrl-train 0.3.0 on; the template is judged by the newest release
        "max_num_batched_tokens": 8192, "enforce_eager": True, "enable_prefix_caching": True,
        "enable_chunked_prefill": True}
    assert reward.backend == "rule" and reward.resources.gpus == 0 and reward.model is None
    assert exp.reward_function == "gsm8k_strict"  # SkyRL-Gym gsm8k: a `#### <number>` answer

    # 1024 prompts × 5 samples = 5120 per step; mini batch 256 prompts × 5 = 1280 samples = 320 per GPU × DP 4.
    s = exp.schedule
    assert (s.prompts_per_step, s.samples_per_step, s.samples_per_optimizer_step) == (1024, 5120, 1280)
    assert s.total_steps is None and s.epochs == 20  # len(dataloader) × epochs: the data decides
    assert s.eval_interval == 5 and s.eval_before_train

    alg = exp.algorithm
    assert alg.advantage == "grpo" and alg.group_size == 5 and alg.normalize_advantage_std
    assert (alg.kl.placement, alg.kl.coef, alg.kl.estimator) == ("loss", 0.001, "k3")
    assert (alg.policy_loss, alg.clip_low, alg.clip_high, alg.clip_ratio_c) == ("regular", 0.2, 0.2, 3.0)
    assert alg.loss_aggregation == "token-mean" and alg.ppo_epochs == 1
    assert alg.entropy_coef == 0.0 and alg.value_clip is None  # no entropy bonus, no critic
    assert not alg.dynamic_sampling and not alg.mask_truncated

    assert exp.sampling.max_new_tokens == 1024 and exp.sampling.n == 5 and exp.sampling.temperature == 1.0
    # eval_sampling_params.max_generate_length interpolates the training value.
    assert exp.eval_sampling.max_new_tokens == 1024 and exp.eval_sampling.n == 1
    assert exp.eval_sampling.temperature == 0.0

    assert exp.data.train_files == ("/home/user/data/gsm8k/train.parquet",)
    assert exp.data.eval_files == ("/home/user/data/gsm8k/validation.parquet",)
    assert exp.data.prompt_key == "prompt" and exp.data.answer_key == "reward_spec.ground_truth"
    assert exp.data.max_prompt_length == 512 and exp.data.apply_chat_template and exp.data.seed == 42
    c = exp.checkpointing
    assert (c.directory, c.interval, c.keep_last, c.resume, c.save_hf) == (
        "/home/user/ckpts/gsm8k_1.5B_ckpt", 10, 3, "latest", False)
    assert exp.logging.backends == ("jsonl", "console") and exp.logging.project == "gsm8k"
    assert exp.logging.run_name == "gsm8k_grpo_qwen2.5_1.5b" and exp.seed == 42


# ---- placement and parallelism ------------------------------------------------------------------------------


def test_without_colocate_all_the_engines_get_their_own_gpus():
    exp = experiment(FSDP2, *APART, "generator.num_inference_engines=2",
                     "generator.inference_engine_tensor_parallel_size=2")
    rollout = exp.role("rollout")
    # 2 engines × TP 2 = 4 GPUs apart from the policy; the ref stays with the policy (colocate_policy_ref).
    assert rollout.resources.gpus == 4 and rollout.parallelism.tp == 2
    assert rollout.engine_args()["engines"] == 2
    assert exp.colocation == (("actor", "reference"),)
    # Paired models split the GPUs' memory and stay resident: no offloading between phases.
    assert not exp.role("actor").offload.params and not rollout.offload.params


def test_nothing_colocated():
    exp = experiment(FSDP2, *APART, "trainer.placement.colocate_policy_ref=false",
                     "trainer.placement.ref_num_gpus_per_node=2")
    assert exp.colocation == ()
    assert exp.role("reference").resources.gpus == 2 and exp.role("actor").resources.gpus == 4


def test_multi_node_policy_with_ulysses():
    exp = experiment(FSDP2, "trainer.placement.policy_num_nodes=2", "trainer.placement.policy_num_gpus_per_node=8",
                     "trainer.placement.ref_num_nodes=2", "trainer.placement.ref_num_gpus_per_node=8",
                     "generator.num_inference_engines=8", "generator.inference_engine_tensor_parallel_size=2",
                     "trainer.policy.sequence_parallel_size=2", "trainer.micro_train_batch_size_per_gpu=4")
    actor = exp.role("actor")
    assert (actor.resources.gpus, actor.resources.nodes, actor.resources.gpus_per_node) == (16, 2, 8)
    assert actor.parallelism.sp == 2
    # DP = 16 / SP 2 = 8 (the ref: 16 / 1 = 16); 256 × 5 // 8 = 160 per rank, × 8 = 1280.
    assert exp.schedule.samples_per_optimizer_step == 1280
    # lcm(8, 16) = 16, / gcd(16, 5) = 16: 1024 is a multiple, nothing is trimmed.
    assert exp.schedule.prompts_per_step == 1024
    assert exp.role("rollout").resources.gpus == 16 and exp.role("rollout").engine_args()["engines"] == 8


def test_hsdp_shard_groups():
    two_nodes = ("trainer.placement.policy_num_nodes=2", "trainer.placement.ref_num_nodes=2",
                 "generator.num_inference_engines=8")
    assert experiment(FSDP2, *two_nodes, "trainer.policy.fsdp_config.fsdp_size=4").role(
        "actor").parallelism.fsdp_shard == 4
    # fsdp_size equal to the world size is plain FSDP over every rank.
    assert experiment(FSDP2, *two_nodes, "trainer.policy.fsdp_config.fsdp_size=8").role(
        "actor").parallelism.fsdp_shard is None


def test_megatron_parallel_sizes():
    exp = experiment(FSDP2, "trainer.strategy=megatron", "trainer.policy.megatron_config.tensor_model_parallel_size=2",
                     "trainer.ref.megatron_config.tensor_model_parallel_size=2",
                     "trainer.micro_train_batch_size_per_gpu=8")
    actor, ref = exp.role("actor"), exp.role("reference")
    assert actor.backend == ref.backend == "megatron" and exp.variant == "megatron"
    assert (actor.parallelism.tp, actor.parallelism.pp, actor.parallelism.cp) == (2, 1, 1)
    assert actor.parallelism.sequence_parallel and ref.parallelism.sequence_parallel  # on with TP > 1
    # The ref's FSDP cpu_offload (true by default) does not apply to Megatron.
    assert not ref.offload.cpu_offload_during_step
    # DP = 4 / TP 2 = 2: 256 × 5 // 2 = 640 per rank, × 2 = 1280.
    assert exp.schedule.samples_per_optimizer_step == 1280


def test_deepspeed_offload_comes_from_its_zero_config():
    exp = experiment(FSDP2, "trainer.strategy=deepspeed",
                     "+deepspeed_config.eval.zero_optimization.offload_param={device: cpu}")
    assert exp.role("actor").backend == "deepspeed"
    assert exp.role("reference").offload.cpu_offload_during_step
    assert not exp.role("actor").offload.cpu_offload_during_step


# ---- batch algebra ------------------------------------------------------------------------------------------


def test_tail_trim_and_per_gpu_floor():
    exp = experiment(FSDP2, "trainer.placement.policy_num_gpus_per_node=6", "trainer.placement.ref_num_gpus_per_node=6",
                     "generator.num_inference_engines=6", "generator.n_samples_per_prompt=4",
                     "trainer.train_batch_size=8", "trainer.policy_mini_batch_size=2",
                     "trainer.micro_train_batch_size_per_gpu=1")
    s = exp.schedule
    # DP 6 for policy and ref; stride 6 / gcd(6, 4) = 3 prompts: 8 prompts are cut to 6 (24 samples).
    assert (s.prompts_per_step, s.samples_per_step) == (6, 24)
    # Each rank's mini batch is 2 × 4 // 6 = 1 sample, so an optimizer step sees 6 samples, not 8.
    assert s.samples_per_optimizer_step == 6 and s.samples_per_step // s.samples_per_optimizer_step == 4


def test_several_epochs_per_batch_and_fewer_optimizer_steps():
    exp = experiment(FSDP2, "trainer.update_epochs_per_batch=2", "trainer.policy_mini_batch_size=1024")
    assert exp.algorithm.ppo_epochs == 2
    assert exp.schedule.samples_per_optimizer_step == exp.schedule.samples_per_step == 5120


def test_group_size_follows_n_samples_per_prompt():
    exp = experiment(FSDP2, "generator.n_samples_per_prompt=8")
    assert exp.algorithm.group_size == exp.sampling.n == 8
    assert (exp.schedule.samples_per_step, exp.schedule.samples_per_optimizer_step) == (8192, 2048)


# ---- the reference, the critic, the reward model ------------------------------------------------------------


def test_no_kl_no_reference():
    exp = experiment(FSDP2, "trainer.algorithm.use_kl_loss=false")
    assert exp.role("reference") is None
    assert exp.algorithm.kl.placement == "none" and exp.algorithm.kl.coef == 0.0
    assert exp.colocation == (("actor", "rollout"),)


def test_kl_in_reward():
    exp = experiment(FSDP2, "trainer.algorithm.use_kl_loss=false", "trainer.algorithm.use_kl_in_reward=true",
                     "trainer.algorithm.kl_loss_coef=0.01", "trainer.algorithm.kl_estimator_type=k2")
    assert exp.role("reference") is not None
    assert (exp.algorithm.kl.placement, exp.algorithm.kl.coef, exp.algorithm.kl.estimator) == ("reward", 0.01, "k2")


def test_abs_kl_overrides_the_estimator():
    assert experiment(FSDP2, "trainer.algorithm.use_abs_kl=true").algorithm.kl.estimator == "abs"


def test_gae_with_a_critic():
    # from skyrl-train 0.4.0 on the critic's placement defaults to one GPU: give it the policy's four
    exp = experiment(FSDP2, "trainer.critic.model.path=Qwen/Qwen2.5-0.5B-Instruct",
                     "trainer.algorithm.advantage_estimator=gae", "trainer.critic.sequence_parallel_size=2",
                     "trainer.critic_mini_batch_size=128", "trainer.placement.critic_num_nodes=1",
                     "trainer.placement.critic_num_gpus_per_node=4")
    critic = exp.role("critic")
    assert [r.name for r in exp.roles] == ["actor", "rollout", "reference", "critic", "reward"]
    assert critic.backend == "fsdp2" and critic.trains and critic.model.path == "Qwen/Qwen2.5-0.5B-Instruct"
    assert critic.resources.gpus == 4 and critic.parallelism.sp == 2
    assert critic.optimizer.lr == 5e-6  # the critic's own default
    assert exp.colocation == (("actor", "rollout", "reference", "critic"),)
    assert exp.algorithm.advantage == "gae" and exp.algorithm.value_clip == 0.2
    # The critic's DP 2 joins the trim: lcm(4, 4, 2) = 4, 1024 stays.
    assert exp.schedule.prompts_per_step == 1024
    # 1024 / 128 = 8 critic optimizer steps per epoch, of 128 prompts' samples each
    assert exp.schedule.critic_samples_per_optimizer_step == 128 * exp.algorithm.group_size


def test_critic_and_reward_model_paired():
    exp = experiment(FSDP2, *APART, "trainer.critic.model.path=critic", "trainer.reward.model.path=rm",
                     "trainer.placement.colocate_critic_reward=true", "trainer.algorithm.advantage_estimator=gae")
    reward = exp.role("reward")
    assert reward.backend == "fsdp2" and reward.model.path == "rm" and reward.resources.gpus == 4
    assert exp.colocation == (("actor", "reference"), ("critic", "reward"))


# ---- rollout ------------------------------------------------------------------------------------------------


def test_remote_engines_take_no_gpus():
    exp = experiment(FSDP2, "generator.run_engines_locally=false", "generator.num_inference_engines=2",
                     "generator.sampling_params.logprobs=null", "trainer.placement.colocate_all=false",
                     "generator.remote_inference_engine_urls=[host-a:8001,host-b:8001]")
    rollout = exp.role("rollout")
    assert rollout.resources.gpus == 0 and rollout.engine_args() == {"engines": 2}
    assert not rollout.offload.params
    assert exp.colocation == (("actor", "reference"),)


def test_sglang_engine_args():
    exp = experiment(FSDP2, "generator.backend=sglang", "generator.use_conversation_multi_turn=true",
                     "generator.gpu_memory_utilization=0.7", "+generator.engine_init_kwargs.context_length=4096")
    rollout = exp.role("rollout")
    assert rollout.backend == "sglang"
    assert rollout.engine_args() == {
        "engines": 4, "seed": 42, "mem_fraction_static": 0.7, "max_num_seqs": 1024,
        "max_num_batched_tokens": 8192, "enable_prefix_caching": True, "attention_backend": "fa3",
        "max_model_len": 4096}


def test_engine_data_parallel_and_rope_scaling():
    exp = experiment(FSDP2, "generator.num_inference_engines=2", "generator.inference_engine_data_parallel_size=2",
                     "generator.rope_scaling={factor: 4.0, original_max_position_embeddings: 32768}",
                     "trainer.rope_scaling={factor: 4.0, original_max_position_embeddings: 32768}")
    rollout = exp.role("rollout")
    # 2 engines × DP 2 × TP 1 = 4 GPUs, as colocate_all needs; each DP rank is a replica of its own.
    assert rollout.resources.gpus == 4 and rollout.engine_args()["engines"] == 4
    assert rollout.engine_args()["max_model_len"] == 131072


def test_engine_init_kwargs_win():
    exp = experiment(FSDP2, "+generator.engine_init_kwargs.max_model_len=2048",
                     "+generator.engine_init_kwargs.enforce_eager=true")
    args = exp.role("rollout").engine_args()
    assert args["max_model_len"] == 2048 and args["enforce_eager"] is True


# ---- evaluation, checkpoints, logging -----------------------------------------------------------------------


def test_eval_interval_minus_one_disables_evaluation():
    s = experiment(FSDP2, "trainer.eval_interval=-1").schedule
    assert s.eval_interval is None and not s.eval_before_train


def test_no_validation_data_no_evaluation():
    s = experiment(FSDP2, "data.val_data=[]", "trainer.eval_before_train=false").schedule
    assert s.eval_interval is None and not s.eval_before_train


def test_checkpoint_settings():
    c = experiment(FSDP2, "trainer.ckpt_interval=-1", "trainer.max_ckpts_to_keep=-1", "trainer.resume_mode=from_path",
                   "trainer.resume_path=/ckpt/global_step_20", "trainer.hf_save_interval=50").checkpointing
    assert c.interval is None and c.keep_last is None and c.resume == "/ckpt/global_step_20" and c.save_hf
    assert experiment(FSDP2, "trainer.resume_mode=null").checkpointing.resume == "none"


def test_loggers():
    assert experiment(FSDP2, "trainer.logger=tensorboard").logging.backends == ("jsonl", "console", "tensorboard")
    assert experiment(FSDP2, "trainer.logger=mlflow").logging.backends == ("jsonl", "console")


# ---- the algorithm's newer keys -----------------------------------------------------------------------------


def test_newer_algorithm_keys():
    exp = experiment(FSDP2, "trainer.algorithm.policy_loss_type=gspo", "trainer.algorithm.loss_reduction=sequence_mean",
                     "trainer.algorithm.use_entropy_loss=true", "trainer.algorithm.entropy_loss_coef=0.005",
                     "trainer.algorithm.dynamic_sampling.type=filter", "generator.apply_overlong_filtering=true",
                     "trainer.algorithm.grpo_norm_by_std=false", "trainer.policy.optimizer_config.scheduler=cosine",
                     "trainer.policy.optimizer_config.num_warmup_steps=10")
    alg = exp.algorithm
    assert alg.policy_loss == "gspo" and alg.loss_aggregation == "seq-mean-token-mean"
    assert alg.entropy_coef == 0.005 and alg.mask_truncated
    # DAPO's filter: groups of equal rewards out, at most max_sample_batches (30) draws, then skyrl-train stops.
    assert alg.filter_spec() == FilterSpec(zero_variance=True, dynamic="filter", max_draws=30, on_exhausted="error",
                                           failed="mask")
    assert not alg.normalize_advantage_std
    opt = exp.role("actor").optimizer
    assert opt.scheduler == "cosine" and opt.warmup_steps == 10


def test_max_seq_len_and_update_group_derivations():
    cfg = checked(FSDP2, "trainer.algorithm.loss_reduction=seq_mean_token_sum_norm").config
    alg = lower(cfg).algorithm
    # Dr. GRPO: each sequence's token sum over max_seq_len, the mean over every row the micro-batch holds
    assert (alg.loss_aggregation, alg.loss_length_norm, alg.count_masked_rows) == ("seq-mean-token-sum", 1536, True)
    assert effective_max_seq_len(cfg) == 512 + 1024
    explicit = checked(FSDP2, "trainer.algorithm.loss_reduction=seq_mean_token_sum_norm",
                       "trainer.algorithm.max_seq_len=4096").config
    assert effective_max_seq_len(explicit) == 4096 and lower(explicit).algorithm.loss_length_norm == 4096
    assert lower(checked(FSDP2).config).algorithm.loss_length_norm is None
    assert effective_update_group(cfg) == "disable"  # local engines
    remote = ("generator.run_engines_locally=false", "generator.num_inference_engines=1",
              "generator.sampling_params.logprobs=null", "trainer.placement.colocate_all=false")
    assert effective_update_group(checked(FSDP2, *remote).config) == "enable"
    assert effective_update_group(checked(FSDP2, *remote, "generator.backend=sglang",
                                          "generator.use_conversation_multi_turn=true").config) == "disable"


# ---- configs in v0.1.0's words (the oldest claimed release; the seed's renamed keys are refused there) ------------

SEED_STYLE = """\
    trainer:
      strategy: fsdp
      placement:
        colocate_all: false
        colocate_critic_reward: false
      policy:
        optimizer_config:
          num_warmup_steps: 7
      algorithm:
        policy_loss_type: dual_clip
        use_kl_estimator_k3: false
      logger: console
    generator:
      num_inference_engines: 1
      inference_engine_tensor_parallel_size: 4
"""


def test_seed_style_keys(tmp_path):
    exp = seed_style(tmp_path, SEED_STYLE)
    assert exp.variant == "fsdp"
    # The seed's defaults: 4 GPUs each for the policy and the ref (colocated), one engine of TP 4 apart.
    assert [(r.name, r.resources.gpus) for r in exp.roles] == [("actor", 4), ("rollout", 4), ("reference", 4),
                                                              ("reward", 0)]
    assert exp.colocation == (("actor", "reference"),)
    assert exp.role("rollout").parallelism.tp == 4 and exp.role("rollout").engine_args()["engines"] == 1
    assert exp.role("actor").optimizer.warmup_steps == 7
    assert exp.algorithm.policy_loss == "dual_clip"
    # use_kl_estimator_k3: false leaves kl_estimator_type (k3) in charge at every claimed release.
    assert exp.algorithm.kl.estimator == "k3"
    # The seed's defaults: 1024 prompts × 5, mini batch 256 × 5 over DP 4, micro batch 1.
    s = exp.schedule
    assert (s.prompts_per_step, s.samples_per_step, s.samples_per_optimizer_step) == (1024, 5120, 1280)
    assert exp.role("actor").micro_batch_size == 1 and s.epochs == 1


def test_seed_style_newer_estimator_wins(tmp_path):
    exp = seed_style(tmp_path, SEED_STYLE, "trainer.algorithm.kl_estimator_type=k2")
    assert exp.algorithm.kl.estimator == "k2"


# ---- the PPO template: a critic, GAE, the KL in the reward --------------------------------------------------------


def test_ppo_template():
    exp = experiment(PPO)
    assert [r.name for r in exp.roles] == ["actor", "rollout", "reference", "critic", "reward"]
    actor, rollout, ref, critic = (exp.role(n) for n in ("actor", "rollout", "reference", "critic"))
    # colocate_all false, colocate_policy_ref true: the policy and the ref share 4 GPUs; critic and engines apart.
    assert exp.colocation == (("actor", "reference"),)
    assert (actor.resources.gpus, ref.resources.gpus, critic.resources.gpus, rollout.resources.gpus) == (4, 4, 2, 2)
    assert not actor.offload.params and not actor.offload.optimizer  # no turns to take without colocate_all
    assert critic.trains and critic.model.path == "Qwen/Qwen2.5-1.5B-Instruct" and critic.optimizer.lr == 5e-6
    assert critic.optimizer.warmup_steps == 10 and critic.optimizer.scheduler == "constant"
    alg = exp.algorithm
    assert (alg.advantage, alg.gamma, alg.lam, alg.value_clip) == ("gae", 1.0, 0.95, 0.2)
    assert alg.advantage_options.whiten  # compute_gae_advantage_return always whitens (masked_whiten)
    assert (alg.kl.placement, alg.kl.coef, alg.kl.estimator, alg.kl.reward_mode) == ("reward", 0.001, "k1", "sequence")
    assert alg.kl.controller == KLController(kind="fixed", target=0.1, horizon=10000)
    # sequence_mean: the policy loss, and the critic's (ppo_critic_loss always takes the sequences' token means)
    assert alg.loss_aggregation == "seq-mean-token-mean"
    s = exp.schedule
    assert (s.prompts_per_step, s.samples_per_step, s.samples_per_optimizer_step) == (256, 1280, 320)


# ---- the dialect's own words on each role --------------------------------------------------------------------------


def test_roles_speak_skyrl():
    exp = experiment(PPO)
    assert exp.role("actor").section == "trainer.policy" and exp.role("critic").section == "trainer.critic"
    assert exp.role("reference").section == "trainer.ref" and exp.role("rollout").section == "generator"
    assert exp.role("reward").section == "environment"
    for name in ("actor", "critic"):
        role = exp.role(name)
        assert role.key_for("micro_batch_size") == "trainer.micro_train_batch_size_per_gpu"
        assert role.key_for("forward_micro_batch_size") == "trainer.micro_forward_batch_size_per_gpu"
    assert exp.role("reference").key_for("forward_micro_batch_size") == "trainer.micro_forward_batch_size_per_gpu"
    assert exp.role("reference").key_for("micro_batch_size") is None  # the ref does not train


# ---- every algorithm setting rlcfg honors changes the Experiment, with skyrl-train's meaning -------------------------


def test_policy_losses_keep_their_kind():
    for kind in ("regular", "dual_clip", "gspo", "cispo", "clip_cov", "kl_cov", "sapo"):
        assert experiment(FSDP2, f"trainer.algorithm.policy_loss_type={kind}").algorithm.policy_loss == kind


def test_cispo_clips_with_its_own_bounds():
    base = experiment(FSDP2, "trainer.algorithm.policy_loss_type=cispo").algorithm
    assert (base.clip_low, base.clip_high) == (0.0, 5.0)  # cispo_eps_clip_low/high, not eps_clip_low/high
    moved = experiment(FSDP2, "trainer.algorithm.policy_loss_type=cispo",
                       "trainer.algorithm.cispo.cispo_eps_clip_low=0.1",
                       "trainer.algorithm.cispo.cispo_eps_clip_high=2.0").algorithm
    assert (moved.clip_low, moved.clip_high) == (0.1, 2.0)
    regular = experiment(FSDP2, "trainer.algorithm.eps_clip_high=0.28").algorithm
    assert (regular.clip_low, regular.clip_high) == (0.2, 0.28)


def test_loss_knobs_reach_the_policy_options():
    o = experiment(FSDP2, "trainer.algorithm.sapo.tau_pos=2.0", "trainer.algorithm.sapo.tau_neg=3.0",
                   "trainer.algorithm.clip_cov.clip_ratio=0.01", "trainer.algorithm.clip_cov.clip_cov_lb=0.5",
                   "trainer.algorithm.clip_cov.clip_cov_ub=4.0", "trainer.algorithm.kl_cov.kl_cov_frac=0.1",
                   "trainer.algorithm.kl_cov.ppo_kl_coef=2.0").algorithm.policy_options
    assert (o.sapo_tau_pos, o.sapo_tau_neg) == (2.0, 3.0)
    assert (o.clip_cov_ratio, o.clip_cov_lb, o.clip_cov_ub) == (0.01, 0.5, 4.0)
    assert (o.kl_cov_ratio, o.kl_cov_coef) == (0.1, 2.0)


def test_dual_clip_constant():
    alg = experiment(FSDP2, "trainer.algorithm.policy_loss_type=dual_clip",
                     "trainer.algorithm.clip_ratio_c=5.0").algorithm
    assert alg.policy_loss_spec().kind == "dual_clip" and alg.policy_loss_spec().clip_ratio_c == 5.0


def test_truncated_importance_sampling():
    assert experiment(FSDP2).algorithm.policy_options.tis_cap is None
    legacy = experiment(FSDP2, "trainer.algorithm.use_tis=true", "trainer.algorithm.tis_imp_ratio_cap=2.5")
    assert (legacy.algorithm.policy_options.tis_cap, legacy.algorithm.policy_options.tis_level) == (2.5, "token")
    token = experiment(FSDP2, "trainer.algorithm.off_policy_correction.tis_ratio_type=token",
                       "trainer.algorithm.off_policy_correction.token_tis_ratio_clip_high=1.5").algorithm
    assert (token.policy_options.tis_cap, token.policy_options.tis_level) == (1.5, "token")
    seq = experiment(FSDP2, "trainer.algorithm.off_policy_correction.tis_ratio_type=sequence").algorithm
    assert (seq.policy_options.tis_cap, seq.policy_options.tis_level) == (5.0, "sequence")
    # use_tis wins: validate_cfg rewrites it into token TIS with tis_imp_ratio_cap.
    both = experiment(FSDP2, "trainer.algorithm.use_tis=true", "trainer.algorithm.tis_imp_ratio_cap=3.0",
                      "trainer.algorithm.off_policy_correction.tis_ratio_type=sequence").algorithm
    assert (both.policy_options.tis_cap, both.policy_options.tis_level) == (3.0, "token")


def test_zero_reward_on_non_stop_and_overlong_filtering():
    base = experiment(FSDP2).algorithm
    assert not base.reward.zero_truncated and not base.mask_truncated
    alg = experiment(FSDP2, "generator.zero_reward_on_non_stop=true").algorithm
    assert alg.reward.zero_truncated and not alg.mask_truncated
    assert experiment(FSDP2, "generator.apply_overlong_filtering=true").algorithm.mask_truncated


def test_filters_and_the_kl_controller_are_lowered_for_the_driver():
    """What skyrl-train does, for the driver (Run._collect, the KL coefficient carried across steps)."""
    alg = experiment(FSDP2, "trainer.algorithm.zero_variance_filter=true").algorithm
    # without dynamic sampling, zero-variance groups stay in the batch with their loss masked
    assert alg.filter_spec().zero_variance and alg.filter_spec().dynamic is None
    assert alg.filter_spec().failed == "mask"
    assert not experiment(FSDP2).algorithm.filter_spec().zero_variance
    replace = experiment(FSDP2, "trainer.algorithm.dynamic_sampling.type=replace",
                         "trainer.algorithm.dynamic_sampling.max_sample_batches=-1",
                         "trainer.algorithm.dynamic_sampling.min_replace_ratio=0.5").algorithm.filter_spec()
    assert (replace.dynamic, replace.max_draws, replace.min_replace_ratio) == ("replace", None, 0.5)
    kl = experiment(FSDP2, "trainer.algorithm.use_kl_loss=false", "trainer.algorithm.use_kl_in_reward=true",
                    "trainer.algorithm.kl_ctrl.type=adaptive", "trainer.algorithm.kl_ctrl.kl_target=0.05",
                    "trainer.algorithm.kl_ctrl.horizon=500").algorithm.kl
    assert kl.controller == KLController(kind="adaptive", target=0.05, horizon=500)
    # the coefficient it carries moves after a step whose KL is off the target (k3 of 0.2 per token ≫ 0.05)
    import torch

    from rlcfg.runtime import algorithms as A
    from rlcfg.runtime.step import StepSettings, prepare_update

    settings = StepSettings(algorithm=experiment(
        FSDP2, "trainer.algorithm.use_kl_loss=false", "trainer.algorithm.use_kl_in_reward=true",
        "trainer.algorithm.kl_ctrl.type=adaptive", "trainer.algorithm.kl_ctrl.kl_target=0.05",
        "trainer.algorithm.kl_ctrl.horizon=500", "generator.n_samples_per_prompt=2").algorithm,
        max_new_tokens=4, pad_token_id=0, needs_reference=True, on_policy=False, samples_per_rank=None,
        micro_batch_size=None, has_critic=False, forward_micro_batch={})
    groups = [{"prompt": (5,), "responses": [([7, 8], [-0.1, -0.2], True), ([7], [-0.3], True)], "scores": [1.0, 0.0]}]
    logps = {"reference": lambda b: torch.zeros(b["response_mask"].shape),
             "actor": lambda b: torch.full(b["response_mask"].shape, -0.5)}
    update = prepare_update(groups, settings, 1, lambda role, b: logps[role](b), {}, kl_coef=0.01)
    k3 = float(A.kl_estimate(torch.tensor(-0.5), torch.tensor(0.0), "k3"))
    assert k3 > 0.05 and update.metrics["kl_coef"] == 0.01
    assert update.next_kl_coef == pytest.approx(0.01 * (1 + 0.2 * 2 / 500))


def test_grpo_std_and_entropy():
    assert not experiment(FSDP2, "trainer.algorithm.grpo_norm_by_std=false").algorithm.normalize_advantage_std
    # the coefficient counts only with use_entropy_loss
    assert experiment(FSDP2, "trainer.algorithm.entropy_loss_coef=0.3").algorithm.entropy_coef == 0.0
    assert experiment(FSDP2, "trainer.algorithm.use_entropy_loss=true",
                      "trainer.algorithm.entropy_loss_coef=0.3").algorithm.entropy_coef == 0.3


def test_constant_scheduler_ignores_warmup():
    # transformers' get_scheduler("constant") is get_constant_schedule: num_warmup_steps does nothing.
    opt = experiment(FSDP2, "trainer.policy.optimizer_config.scheduler=constant",
                     "trainer.policy.optimizer_config.num_warmup_steps=10").role("actor").optimizer
    assert (opt.scheduler, opt.warmup_steps) == ("constant", 0)
    opt = experiment(FSDP2, "trainer.policy.optimizer_config.scheduler=linear",
                     "trainer.policy.optimizer_config.num_warmup_steps=10").role("actor").optimizer
    assert (opt.scheduler, opt.warmup_steps) == ("linear", 10)


# ---- and the losses computed from them, by hand from skyrl-train's ppo_utils.py ------------------------------------


def _loss(alg, logp, old, adv, mask, rollout=None):
    torch = pytest.importorskip("torch")
    t = lambda v: torch.tensor(v, dtype=torch.float32)  # noqa: E731
    from rlcfg.runtime import algorithms as A

    loss, _ = A.policy_loss(t(logp), t(old), t(adv), t(mask), alg.policy_loss_spec(),
                            rollout_logprobs=None if rollout is None else t(rollout))
    return loss.tolist()


def test_cispo_loss_with_skyrl_bounds():
    # compute_policy_loss_cispo: −A · sg(clamp(r, 1 − 0, 1 + 5)) · log π. r = e^1 ≈ 2.718 stays (≤ 6); r = e^−0.5
    # ≈ 0.607 is raised to 1.
    alg = experiment(FSDP2, "trainer.algorithm.policy_loss_type=cispo").algorithm
    [[a, b]] = _loss(alg, [[-1.0, -2.0]], [[-2.0, -1.5]], [[1.0, -1.0]], [[1.0, 1.0]])
    assert a == pytest.approx(-1.0 * 2.718281828 * -1.0) and b == pytest.approx(1.0 * 1.0 * -2.0)


def test_sapo_loss_with_skyrl_temperatures():
    # sapo_policy_loss: −σ(τ(r − 1))·4/τ · A, τ = tau_pos for A > 0, tau_neg otherwise; r = 1 gives −(0.5·4/τ)·A.
    alg = experiment(FSDP2, "trainer.algorithm.policy_loss_type=sapo", "trainer.algorithm.sapo.tau_pos=2.0",
                     "trainer.algorithm.sapo.tau_neg=4.0").algorithm
    [[a, b]] = _loss(alg, [[-1.0, -1.0]], [[-1.0, -1.0]], [[1.0, -1.0]], [[1.0, 1.0]])
    assert a == pytest.approx(-1.0) and b == pytest.approx(0.5)


def test_token_tis_caps_the_behaviour_ratio():
    # apply_off_policy_correction: loss × min(π_old/π_rollout, cap), detached; on-policy π = π_old, so the
    # clipped surrogate is −A and the weights e^1 → 2.0 (capped) and e^−1 stay.
    alg = experiment(FSDP2, "trainer.algorithm.use_tis=true", "trainer.algorithm.tis_imp_ratio_cap=2.0").algorithm
    [[a, b]] = _loss(alg, [[-1.0, -1.0]], [[-1.0, -1.0]], [[1.0, 1.0]], [[1.0, 1.0]], rollout=[[-2.0, 0.0]])
    assert a == pytest.approx(-2.0) and b == pytest.approx(-0.36787944)


def test_zero_reward_on_non_stop_zeroes_the_score():
    torch = pytest.importorskip("torch")
    from rlcfg.runtime import algorithms as A

    alg = experiment(FSDP2, "generator.zero_reward_on_non_stop=true").algorithm
    scores = A.shape_scores(torch.tensor([1.0, 1.0]), torch.tensor([3.0, 1024.0]), torch.tensor([True, False]),
                            1024, alg.reward)
    assert scores.tolist() == [1.0, 0.0]


def test_grpo_advantage_as_skyrl_computes_it():
    # compute_grpo_outcome_advantage: (score − group mean) / (torch.std, unbiased + 1e-6); grpo_norm_by_std false
    # leaves the centred score. Group [1, 0, 0, 1]: mean 0.5, unbiased std √(1/3).
    torch = pytest.importorskip("torch")
    from rlcfg.runtime import algorithms as A

    def advantages(*overrides):
        alg = experiment(FSDP2, "generator.n_samples_per_prompt=4", *overrides).algorithm
        adv, _ = A.compute_advantages(torch.tensor([1.0, 0.0, 0.0, 1.0]), torch.ones(4, 1), estimator=alg.advantage,
                                      group_size=alg.group_size, options=alg.advantage_options,
                                      normalize_std=alg.normalize_advantage_std)
        return adv.squeeze(1).tolist()

    std = (1 / 3) ** 0.5
    assert advantages() == pytest.approx([0.5 / (std + 1e-6), -0.5 / (std + 1e-6), -0.5 / (std + 1e-6),
                                          0.5 / (std + 1e-6)])
    assert advantages("trainer.algorithm.grpo_norm_by_std=false") == pytest.approx([0.5, -0.5, -0.5, 0.5])
    # RLOO (compute_rloo_outcome_advantage): (score − group mean) × n/(n − 1)
    assert advantages("trainer.algorithm.advantage_estimator=rloo") == pytest.approx([2 / 3, -2 / 3, -2 / 3, 2 / 3])


def test_kl_cov_penalises_its_share_of_tokens():
    # compute_policy_loss_kl_cov: −A·r on every token, plus ppo_kl_coef·|log r| on the int(n · kl_cov_frac) tokens of
    # largest covariance (A − mean A)(log π − mean log π). Four tokens, frac 0.25: one token. A = [1, 1, −1, −1],
    # log π − its mean = [1.125, −0.375, 0.625, −1.375]: the last token (covariance 1.375) is penalised.
    alg = experiment(FSDP2, "trainer.algorithm.policy_loss_type=kl_cov", "trainer.algorithm.kl_cov.kl_cov_frac=0.25",
                     "trainer.algorithm.kl_cov.ppo_kl_coef=2.0").algorithm
    logp, old = [[-0.5, -2.0, -1.0, -3.0]], [[-1.0, -2.0, -1.0, -3.5]]
    [[a, b, c, d]] = _loss(alg, logp, old, [[1.0, 1.0, -1.0, -1.0]], [[1.0, 1.0, 1.0, 1.0]])
    r = 2.718281828 ** 0.5
    assert (a, b, c) == pytest.approx((-r, -1.0, 1.0)) and d == pytest.approx(r + 2.0 * 0.5)


# ---- the plan shows what `rlcfg run` starts --------------------------------------------------------------------------


def test_a_reference_whose_kl_counts_nothing_is_not_started():
    exp = experiment(FSDP2, "trainer.algorithm.kl_loss_coef=0.0")
    assert exp.role("reference") is None and exp.colocation == (("actor", "rollout"),)
    assert exp.algorithm.kl.coef == 0.0


def test_a_critic_only_gae_reads_is_not_started():
    # skyrl-train trains it anyway; GRPO never reads its values, and rlcfg's runtime starts a critic only for GAE.
    exp = experiment(FSDP2, "trainer.critic.model.path=Qwen/Qwen2.5-0.5B-Instruct",
                     "trainer.placement.critic_num_gpus_per_node=4")
    assert exp.role("critic") is None and exp.algorithm.value_clip is None
    # Its DP size still joins skyrl-train's tail trim.
    assert exp.schedule.prompts_per_step == 1024


# ---- against skyrl-train's own loss functions (the differential suite: -m oracle, MIRROR_ROOT) ---------------------

_SKYRL_LOSSES = {"regular": "ppo_policy_loss", "dual_clip": "ppo_policy_loss", "gspo": "gspo_policy_loss",
                 "cispo": "compute_policy_loss_cispo", "sapo": "sapo_policy_loss",
                 "kl_cov": "compute_policy_loss_kl_cov"}
_SKYRL_KNOBS = {"dual_clip": ["trainer.algorithm.clip_ratio_c=1.2"],
                "cispo": ["trainer.algorithm.cispo.cispo_eps_clip_low=0.1",
                          "trainer.algorithm.cispo.cispo_eps_clip_high=0.5"],
                "sapo": ["trainer.algorithm.sapo.tau_pos=2.0"], "kl_cov": ["trainer.algorithm.kl_cov.kl_cov_frac=0.1"]}
_TIS = {"none": [], "token": ["trainer.algorithm.off_policy_correction.tis_ratio_type=token",
                              "trainer.algorithm.off_policy_correction.token_tis_ratio_clip_high=1.5"],
        "sequence": ["trainer.algorithm.off_policy_correction.tis_ratio_type=sequence"]}


def _skyrl_functions():
    """skyrl-train's loss functions at its last commit, taken from the mirror's source and run with the two small
    helpers they import from torch_utils (masked_mean, safe_exp_delta), read from the mirror too."""
    import ast
    import os
    import subprocess
    import sys
    import types
    from typing import Literal, Optional, Tuple, Union

    torch = pytest.importorskip("torch")
    root = os.environ.get("MIRROR_ROOT")
    if not root:
        pytest.skip("MIRROR_ROOT is not set")
    repo = os.path.join(root, "NovaSky-AI+SkyRL", "repo")

    def source(path: str, names: set[str]) -> str:
        text = subprocess.run(["git", "-C", repo, "show", f"27380cb:skyrl-train/skyrl_train/{path}"],
                              capture_output=True, text=True, check=True).stdout
        found = [node for node in ast.parse(text).body if isinstance(node, ast.FunctionDef) and node.name in names]
        for node in found:
            node.decorator_list = []
        return "\n\n".join(ast.unparse(node) for node in found)

    loguru = types.ModuleType("loguru")
    loguru.logger = types.SimpleNamespace(warning=lambda *a, **k: None, debug=lambda *a, **k: None)
    sys.modules.setdefault("loguru", loguru)
    ns = {"torch": torch, "Union": Union, "Optional": Optional, "Tuple": Tuple, "Literal": Literal,
          "AlgorithmConfig": object, "DictConfig": object}
    exec(source("utils/torch_utils.py", {"masked_mean", "safe_exp_delta"}), ns)  # noqa: S102
    exec(source("utils/off_policy_correction_utils.py",  # noqa: S102
                {"compute_tis_ratio", "compute_outlier_token_mask", "compute_sequence_mask",
                 "compute_off_policy_correction", "apply_off_policy_correction"}), ns)
    losses = set(_SKYRL_LOSSES.values()) | {"reduce_loss", "compute_approx_kl"}
    exec(source("utils/ppo_utils.py", losses), ns)  # noqa: S102
    return ns


@pytest.mark.oracle
@pytest.mark.parametrize("tis", list(_TIS))
@pytest.mark.parametrize("reduction", ["token_mean", "sequence_mean"])
@pytest.mark.parametrize("kind", list(_SKYRL_LOSSES))
def test_losses_agree_with_skyrl_train(kind, reduction, tis):
    import types

    torch = pytest.importorskip("torch")
    from rlcfg.runtime import algorithms as A

    if kind == "kl_cov" and tis != "none":
        pytest.skip("skyrl-train refuses off-policy correction with kl_cov")
    ns = _skyrl_functions()
    cfg = checked(FSDP2, f"trainer.algorithm.policy_loss_type={kind}", f"trainer.algorithm.loss_reduction={reduction}",
                  *_SKYRL_KNOBS.get(kind, []), *_TIS[tis]).config
    generator = torch.Generator().manual_seed(0)
    logp = -torch.rand(6, 7, generator=generator) * 3
    old = logp + 0.3 * torch.randn(6, 7, generator=generator)
    rollout = old + 0.3 * torch.randn(6, 7, generator=generator) if tis != "none" else None
    adv = 2 * torch.randn(6, 7, generator=generator)
    mask = (torch.rand(6, 7, generator=generator) > 0.2).float()
    a = cfg.trainer.algorithm
    config = types.SimpleNamespace(**{name: getattr(a, name) for name in type(a).model_fields})
    config.max_seq_len = None
    theirs, _ = ns[_SKYRL_LOSSES[kind]](logp, old, adv, config, loss_mask=mask, rollout_logprobs=rollout)
    alg = lower(cfg).algorithm
    per_token, _ = A.policy_loss(logp, old, adv, mask, alg.policy_loss_spec(), rollout_logprobs=rollout)
    ours = A.aggregate(per_token, mask, alg.loss_aggregation)
    assert float(ours) == pytest.approx(float(theirs), abs=1e-6)


@pytest.mark.oracle
@pytest.mark.parametrize("estimator", ["k1", "k2", "k3", "abs"])
def test_kl_estimators_agree_with_skyrl_train(estimator):
    torch = pytest.importorskip("torch")
    from rlcfg.runtime import algorithms as A

    ns = _skyrl_functions()
    generator = torch.Generator().manual_seed(1)
    logp = -torch.rand(4, 5, generator=generator) * 3
    ref = logp + torch.randn(4, 5, generator=generator)
    mask = (torch.rand(4, 5, generator=generator) > 0.2).float()
    kl = experiment(FSDP2, f"trainer.algorithm.kl_estimator_type={estimator}").algorithm.kl
    theirs = ns["compute_approx_kl"](logp, ref, loss_mask=mask, kl_estimator_type=estimator)
    assert torch.allclose(A.kl_estimate(logp, ref, kl.estimator) * mask, theirs, atol=1e-6)


def test_the_repetition_penalty_moves_the_sampling():
    exp = experiment(PPO, "generator.sampling_params.repetition_penalty=1.1",
                     "generator.eval_sampling_params.repetition_penalty=1.2")
    assert experiment(PPO).sampling.repetition_penalty == 1.0
    assert exp.sampling.repetition_penalty == 1.1 and exp.eval_sampling.repetition_penalty == 1.2
    assert not [d for d in checked(PPO, "generator.sampling_params.repetition_penalty=1.1").diagnostics
                if d.code == "RLC118"]


def test_eval_n_samples_per_prompt_is_the_evaluations_samples_per_prompt():
    result = checked(FSDP2, "generator.eval_n_samples_per_prompt=4")
    assert not any(d.code == "RLC118" for d in result.diagnostics), [d.message for d in result.diagnostics]
    exp = lower(result.config)
    assert exp.eval_sampling.n == 4 and exp.sampling.n == exp.algorithm.group_size


def test_chat_template_arguments_reach_the_prompts():
    exp = experiment(FSDP2, "+generator.chat_template_kwargs={enable_thinking: false}", "generator.batched=false")
    assert exp.data.chat_template_kwargs == (("enable_thinking", False),)
    assert experiment(FSDP2).data.chat_template_kwargs == ()


# ---- LoRA ---------------------------------------------------------------------------------------------------


LORA = ("trainer.policy.model.lora.rank=16", "trainer.policy.model.lora.alpha=32")


def test_lora_reaches_the_policy_with_skyrl_trains_defaults():
    result = checked(FSDP2, *LORA, "trainer.policy.model.lora.dropout=0.05")
    assert not [d for d in result.diagnostics if d.code == "RLC118"], [d.message for d in result.diagnostics]
    actor = lower(result.config).role("actor")
    assert (actor.lora.rank, actor.lora.alpha, actor.lora.dropout) == (16, 32, 0.05)
    assert (actor.lora.target_modules, actor.lora.exclude_modules, actor.lora.init) == ("all-linear", None, "kaiming")
    assert actor.key_for("lora.target_modules") == "trainer.policy.model.lora.target_modules"
    assert experiment(FSDP2).role("actor").lora is None
    assert experiment(FSDP2, *LORA).role("reference").lora is None  # the reference is the base model


def test_up_to_v030_one_pair_of_module_keys_serves_every_model():
    exp = lower(check_file(str(PPO), [*LORA, "trainer.critic.model.lora.rank=4", "trainer.critic.model.lora.alpha=4",
                                      "trainer.target_modules=[q_proj,v_proj]", "trainer.exclude_modules=[v_proj]"],
                           env=ENV, release="0.3.0").config, "0.3.0")
    for name in ("actor", "critic"):
        lora = exp.role(name).lora
        assert (lora.target_modules, lora.exclude_modules) == (("q_proj", "v_proj"), ("v_proj",))
        assert exp.role(name).key_for("lora.target_modules") == "trainer.target_modules"


MEGATRON_LORA = (*LORA, "trainer.strategy=megatron")
TP2 = "trainer.policy.megatron_config.tensor_model_parallel_size=2"


def refusals(result) -> dict[str, str]:
    return {d.path: d.message for d in result.diagnostics if d.code == "RLC118"}


def test_lora_on_megatron_runs_as_megatron_bridges_lora_on_a_dense_model():
    result = checked(FSDP2, *MEGATRON_LORA)
    assert not refusals(result)
    plan = build_plan(lower(result.config))[0]
    assert not launch_problems(plan, "LoRA")
    actor = plan.experiment.role("actor")
    assert actor.backend == "megatron" and (actor.lora.rank, actor.lora.target_modules) == (16, "all-linear")
    # A list of megatron-core's layer names narrows the adapters, as Megatron-Bridge's target_modules does.
    assert not refusals(checked(FSDP2, *MEGATRON_LORA, "trainer.policy.model.lora.target_modules=[linear_qkv]"))
    # A mixture of experts takes them too, each expert-parallel rank's experts sharing theirs, whole on the rank.
    moe = ("trainer.policy.model.path=Qwen/Qwen3-30B-A3B", TP2,
           "trainer.policy.megatron_config.expert_tensor_parallel_size=1")
    assert not refusals(checked(FSDP2, *MEGATRON_LORA, *moe))


@pytest.mark.parametrize("override,key,says", [
    # megatron-core's expert tensor parallel size follows the tensor parallel size when left out
    (("trainer.policy.model.path=Qwen/Qwen3-30B-A3B", TP2), "trainer.policy.megatron_config.tensor_model_parallel_size",
     "expert tensor parallel size of 2"),
    (("trainer.policy.model.path=Qwen/Qwen3-30B-A3B", TP2,
      "trainer.policy.megatron_config.expert_tensor_parallel_size=2"),
     "trainer.policy.megatron_config.expert_tensor_parallel_size", "mixture of experts"),
    ("trainer.policy.model.lora.dropout=0.05", "trainer.policy.model.lora.dropout", "no dropout"),
    ("trainer.policy.model.lora.target_modules=[q_proj,v_proj]", "trainer.policy.model.lora.target_modules",
     "linear_qkv, linear_proj, linear_fc1, linear_fc2"),
    ("trainer.policy.model.lora.exclude_modules=[linear_fc2]", "trainer.policy.model.lora.exclude_modules",
     "only when it is given no target modules"),
    ("trainer.policy.model.lora.init_method=xavier", "trainer.policy.model.lora.init_method", "kaiming"),
    ("trainer.policy.megatron_config.lora_config.lora_type=canonical_lora",
     "trainer.policy.megatron_config.lora_config.lora_type", "`lora` adapters"),
])
def test_megatron_lora_settings_its_adapters_do_not_train_are_refused_at_their_keys(override, key, says):
    result = checked(FSDP2, *MEGATRON_LORA, *((override,) if isinstance(override, str) else override))
    notes = refusals(result)
    assert set(notes) == {key} and says in notes[key]
    # The runtime's own check refuses the same, before any worker starts (the LoRA flavour is SkyRL's key alone:
    # the Experiment holds the adapters rlcfg builds).
    if not key.endswith("lora_type"):
        (problem,) = launch_problems(build_plan(lower(result.config))[0], "LoRA")
        assert says in problem


def launch_problems(plan, about: str) -> list[str]:
    from rlcfg.runtime.backends import Machine, check_plan

    return [p for p in check_plan(plan, Machine(gpus=0, cpus=1), has_cluster=True, installed=lambda module: True)
            if about in p]


def test_other_lora_initialisations_are_refused_before_launch():
    pissa = checked(FSDP2, *LORA, "trainer.policy.model.lora.init_method=pissa")
    notes = {d.path: d.message for d in pissa.diagnostics if d.code == "RLC118"}
    assert "kaiming or gaussian" in notes["trainer.policy.model.lora.init_method"]
    gaussian = checked(FSDP2, *LORA, "trainer.policy.model.lora.init_method=gaussian")
    assert not [d for d in gaussian.diagnostics if d.code == "RLC118"]
    assert lower(gaussian.config).role("actor").lora.init == "gaussian"


def test_the_plan_shows_the_adapters_and_counts_only_their_optimizer_states():
    from rlcfg.plan import build_plan
    from rlcfg.plan.render import render_text

    full = build_plan(experiment(PPO))[0]
    adapted = build_plan(experiment(PPO, *LORA))[0]
    assert "LoRA rank 16, alpha 32 on all-linear" in render_text(adapted)
    assert "LoRA" not in render_text(full)

    def actor_terms(plan):
        return {t.name: t.bytes for t in next(r for r in plan.memory.roles if r.role == "actor").terms}

    full_terms, lora_terms = actor_terms(full), actor_terms(adapted)
    # Qwen2.5-1.5B: hidden 1536, q 12 × 128, k and v 2 × 128, FFN 8960, 28 layers; rank 16 on every projection,
    # Adam's 8 bytes per adapter parameter, sharded over the policy's 4 GPUs.
    per_layer = (1536 + 1536) + 2 * (1536 + 256) + (1536 + 1536) + 2 * (1536 + 8960) + (8960 + 1536)
    assert lora_terms["optimizer states (Adam, LoRA adapters, sharded)"] == 8 * 16 * per_layer * 28 // 4
    assert "optimizer states (Adam, sharded)" in full_terms and "optimizer states (Adam, sharded)" not in lora_terms


def test_the_plan_counts_a_megatron_roles_adapters_alone_as_trained():
    def actor_terms(*overrides):
        # Forward micro-batches of one, so that the train step is the peak the plan itemises.
        plan = build_plan(experiment(FSDP2, "trainer.strategy=megatron", "trainer.micro_forward_batch_size_per_gpu=1",
                                     *overrides))[0]
        actor = next(r for r in plan.memory.roles if r.role == "actor")
        assert actor.phase == "train step"
        return {t.name: t.bytes for t in actor.terms}

    full, adapted = actor_terms(), actor_terms(*LORA)
    assert "gradients (fp32 main grads)" in full and "gradients (fp32 main grads)" not in adapted
    # bf16 weights either way; the adapters' fp32 master weights and Adam states are a sliver of the full model's.
    assert adapted["parameters (frozen base)"] == full["parameters (bf16)"]
    assert 0 < adapted["optimizer states (LoRA adapters, fp32 master + Adam)"] < \
        full[next(k for k in full if k.startswith("optimizer states"))] / 20


def test_a_megatron_ranks_experts_count_one_shared_adapter_pair_per_layer():
    from rlcfg.ir import Lora
    from rlcfg.plan.memory import architecture_from_config, lora_parameters

    arch = architecture_from_config({"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 128,
                                     "moe_intermediate_size": 32, "num_experts": 8, "num_experts_per_tok": 2,
                                     "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                                     "head_dim": 16, "vocab_size": 100}, "config.json")
    lora = Lora(rank=4, alpha=8.0)
    attention = 4 * ((64 + 64) + 2 * (64 + 32) + (64 + 64))  # q, k, v, o
    # gate, up and down of the (absent) shared expert count hidden inputs or outputs each: an upper bound
    dense_mlp = 4 * 3 * 64
    expert = 4 * 3 * (64 + 32)  # gate, up and down of one expert
    assert lora_parameters(arch, lora) == 2 * (attention + dense_mlp + 8 * expert)
    assert lora_parameters(arch, lora, shared_by_experts=True) == 2 * (attention + dense_mlp + expert)


# SkyRL's Moonlight example: DeepSeek-V3's architecture on Megatron, tensor parallel 2 (sequence parallelism on).
MOONLIGHT = ("trainer.strategy=megatron", "trainer.policy.model.path=/home/user/moonlight16b",
             "trainer.policy.megatron_config.tensor_model_parallel_size=2",
             "trainer.ref.megatron_config.tensor_model_parallel_size=2", "trainer.micro_train_batch_size_per_gpu=8")


def test_megatron_deepseek_routes_as_megatron_bridges_provider_does():
    """Megatron-Bridge's DeepSeek-V3 provider routes with the checkpoint's correction, moves it by 1e-3 after each
    step and computes the router in fp32; a transformer_config_kwargs entry, which SkyRL applies last, turns the
    correction off. The FSDP strategies run the Hugging Face model."""
    exp = experiment(FSDP2, *MOONLIGHT)
    actor, ref = exp.role("actor"), exp.role("reference")
    assert actor.expert_bias == ref.expert_bias == 1e-3
    assert actor.router_dtype == ref.router_dtype == "fp32"
    off = experiment(FSDP2, *MOONLIGHT,
                     "+trainer.policy.megatron_config.transformer_config_kwargs.moe_router_enable_expert_bias=false")
    assert off.role("actor").expert_bias == "off" and off.role("reference").expert_bias == 1e-3
    # skyrl-train 0.3.0 left Megatron-Bridge's sequence auxiliary loss on (and 0.2.0 built the model with mbridge)
    old = lower(check_file(str(FSDP2), list(MOONLIGHT), env=ENV, release="0.3.0").config, "0.3.0")
    assert old.role("actor").expert_bias == "unmapped"
    fsdp = experiment(FSDP2, "trainer.policy.model.path=/home/user/moonlight16b")
    assert fsdp.role("actor").expert_bias == "unmapped" and fsdp.role("actor").router_dtype is None


def test_megatron_uneven_pipeline_stages_come_from_transformer_config_kwargs():
    exp = experiment(FSDP2, *MOONLIGHT, "trainer.policy.megatron_config.pipeline_model_parallel_size=2",
                     "+trainer.policy.megatron_config.transformer_config_kwargs.num_layers_in_last_pipeline_stage=13")
    par = exp.role("actor").parallelism
    assert (par.pp, par.pp_first_layers, par.pp_last_layers) == (2, None, 13)


def test_megatron_transformer_kwargs_rlcfg_does_not_compute_are_refused_at_run():
    """SkyRL sets every transformer_config_kwargs key on megatron-core's TransformerConfig. rlcfg runs the ones it
    computes as megatron-core does and refuses the others; uneven stages without a pipeline are what megatron-core
    itself stops SkyRL's workers on (SkyRL's Moonlight example writes num_layers_in_last_pipeline_stage=13 with
    pipeline size 1)."""
    base = "trainer.policy.megatron_config.transformer_config_kwargs"
    result = checked(FSDP2, *MOONLIGHT, f"+{base}.num_layers_in_last_pipeline_stage=13",
                     f"+{base}.moe_router_enable_expert_bias=false", f"+{base}.apply_rope_fusion=true")
    refusals = {d.path: d.message for d in result.diagnostics if d.code == "RLC118"}
    assert "megatron-core's TransformerConfig stops SkyRL's workers" in refusals[
        f"{base}.num_layers_in_last_pipeline_stage"]
    assert "rlcfg builds that config itself" in refusals[f"{base}.apply_rope_fusion"]
    assert f"{base}.moe_router_enable_expert_bias" not in refusals  # honored: Moonlight is a DeepSeek-V3
    dense = checked(FSDP2, *MOONLIGHT[:1], f"+{base}.moe_router_enable_expert_bias=false")
    assert f"{base}.moe_router_enable_expert_bias" in {d.path for d in dense.diagnostics if d.code == "RLC118"}
