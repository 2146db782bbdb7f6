"""ROLL → Experiment: the roles, GPU ids, parallel sizes, batch algebra and algorithm ROLL would run, derived
by hand from each template (and from variations of it) and compared with the lowering."""

from __future__ import annotations

import pytest

from rlcfg.frontend import check_file
from rlcfg.ir import ENGINE_KEYS, ROLE_NAMES, Experiment
from rlcfg.lower import lower as lower_any
from rlcfg.lower.roll import lower
from tests.helpers import ROOT, TEMPLATES

MEGATRON = TEMPLATES / "roll-megatron-vllm.yaml"
FSDP2 = TEMPLATES / "roll-fsdp2-vllm.yaml"
QUICKSTART = TEMPLATES / "quickstart-cpu.yaml"
ROLL_TEMPLATES = sorted(TEMPLATES.glob("roll-*.yaml")) + [QUICKSTART]
TRAIN_BACKENDS = ("fsdp", "fsdp2", "megatron", "deepspeed")
ROLLOUT_BACKENDS = ("vllm", "sglang", "hf")
EIGHT = tuple(range(8))


def experiment(path, *overrides: str) -> Experiment:
    result = check_file(str(path), list(overrides), env={})
    assert result.config is not None, [f"{d.path}: {d.message}" for d in result.diagnostics]
    return lower(result.config)


# ---- every template -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ROLL_TEMPLATES, ids=lambda p: p.name)
def test_template_lowers(path):
    result = check_file(str(path), env={})
    assert result.dialect == "roll"
    exp = lower_any("roll", result.config)
    assert exp.dialect == "roll"
    names = [r.name for r in exp.roles]
    assert len(names) == len(set(names)) and set(names) <= set(ROLE_NAMES)
    assert exp.role("actor").backend in TRAIN_BACKENDS and exp.role("actor").trains
    assert exp.role("rollout").backend in ROLLOUT_BACKENDS and not exp.role("rollout").trains
    for role in exp.roles:
        assert set(role.engine_args()) <= set(ENGINE_KEYS)
        if role.resources.gpu_ids is not None:
            assert role.resources.gpus == len(role.resources.gpu_ids)
    for group in exp.colocation:
        assert len({exp.role(name).resources.gpu_ids for name in group}) == 1
    s = exp.schedule
    assert s.samples_per_step == s.prompts_per_step * exp.algorithm.group_size
    assert s.samples_per_step % s.samples_per_optimizer_step == 0


def test_megatron_template():
    exp = experiment(MEGATRON)
    actor, rollout, ref, reward = (exp.role(n) for n in ("actor", "rollout", "reference", "reward"))
    assert [r.name for r in exp.roles] == ["actor", "rollout", "reference", "reward"]
    assert exp.cluster.nodes == 1 and exp.cluster.gpus_per_node == 8
    # device_mapping list(range(0,8)) on all three GPU workers: one colocation group on GPUs 0-7.
    assert actor.resources.gpu_ids == rollout.resources.gpu_ids == ref.resources.gpu_ids == EIGHT
    assert exp.colocation == (("actor", "rollout", "reference"),)
    assert actor.backend == "megatron" and ref.backend == "megatron"
    assert (actor.parallelism.tp, actor.parallelism.pp, actor.parallelism.cp) == (2, 1, 1)
    assert actor.parallelism.sequence_parallel
    assert ref.parallelism.tp == 2 and not ref.parallelism.sequence_parallel
    assert actor.gradient_checkpointing  # recompute_granularity: full
    # DP = 8 / (tp 2 × pp 1 × cp 1) = 4; global train batch = 2 × 64 × 4 = 512 = 64 prompts × 8.
    assert actor.micro_batch_size == 2
    assert (exp.schedule.prompts_per_step, exp.schedule.samples_per_step, exp.schedule.samples_per_optimizer_step) \
        == (64, 512, 512)
    assert exp.schedule.total_steps == 500
    assert actor.optimizer.lr == 1e-6 and actor.optimizer.warmup_steps == 20 and actor.optimizer.grad_clip == 1.0
    # vLLM tp 2 on 8 GPUs: ROLL sets num_gpus_per_worker = tp × pp = 2, so 4 engines.
    assert rollout.backend == "vllm" and rollout.parallelism.tp == 2
    assert rollout.engine_args() == {"gpu_memory_utilization": 0.6, "block_size": 16, "max_model_len": 8192,
                                     "load_format": "dummy", "enforce_eager": False, "engines": 4}
    assert reward.backend == "rule" and reward.resources.gpus == 0 and reward.resources.cpus == 8
    assert exp.reward_function == "math"
    # All three models are `pretrain` (none names its own).
    assert {r.model.path for r in (actor, rollout, ref)} == {"Qwen/Qwen2.5-7B-Instruct"}
    alg = exp.algorithm
    assert alg.advantage == "grpo" and alg.group_size == 8 and alg.normalize_advantage_std
    assert (alg.kl.placement, alg.kl.coef, alg.kl.estimator) == ("loss", 0.001, "k3")
    assert (alg.clip_low, alg.clip_high, alg.loss_aggregation) == (0.2, 0.2, "token-mean")
    # max_new_tokens = sequence_length − prompt_length = (2048 + 4096) − 2048.
    assert exp.sampling.max_new_tokens == 4096 and exp.sampling.n == 8
    assert (exp.sampling.temperature, exp.sampling.top_p, exp.sampling.top_k) == (0.99, 0.99, 100)
    assert exp.eval_sampling.max_new_tokens == 4096 and exp.eval_sampling.n == 1
    assert exp.eval_sampling.temperature == 0.6
    assert exp.data.train_files == ("data/math_train.jsonl",) and exp.data.eval_files == ("data/math_eval.jsonl",)
    assert exp.data.prompt_key == "messages" and exp.data.apply_chat_template
    assert exp.data.answer_key == "ground_truth" and exp.data.max_prompt_length == 2048
    assert exp.schedule.eval_interval == 10 and exp.schedule.eval_before_train
    assert exp.checkpointing.directory == "./output" and exp.checkpointing.interval == 100
    assert exp.checkpointing.resume == "none"
    assert exp.logging.backends == ("jsonl", "console", "tensorboard")
    assert exp.logging.directory == "./output/logs/qwen2.5-7b-grpo-megatron"


def test_fsdp2_template():
    exp = experiment(FSDP2)
    actor, rollout, ref = exp.role("actor"), exp.role("rollout"), exp.role("reference")
    assert actor.backend == "fsdp2" and ref.backend == "fsdp2"
    # ulysses_size 2; fsdp_size 8 == world size 8 is pure FSDP2 (shards over every rank).
    assert actor.parallelism.sp == 2 and actor.parallelism.fsdp_shard is None
    assert ref.parallelism.sp == 1
    # DP = 8 / ulysses 2 = 4; global train batch = 4 × 16 × 4 = 256 = 32 prompts × 8.
    assert (exp.schedule.samples_per_step, exp.schedule.samples_per_optimizer_step) == (256, 256)
    assert actor.micro_batch_size == 4 and actor.forward_micro_batch_size == 8
    assert rollout.parallelism.tp == 1 and rollout.engine_args()["engines"] == 8
    assert exp.colocation == (("actor", "rollout", "reference"),)
    assert exp.sampling.max_new_tokens == 3072
    assert actor.gradient_checkpointing  # disable_gradient_checkpointing: false


def test_quickstart_template():
    exp = experiment(QUICKSTART)
    assert [r.name for r in exp.roles] == ["actor", "rollout", "reward"]  # KL off: no reference model
    actor, rollout, reward = exp.role("actor"), exp.role("rollout"), exp.role("reward")
    assert actor.backend == "fsdp2" and rollout.backend == "hf"
    assert actor.resources.gpu_ids == rollout.resources.gpu_ids == (0,)
    assert exp.colocation == (("actor", "rollout"),)
    assert actor.model.path == rollout.model.path == "rlcfg-quickstart/tiny-qwen2"
    assert actor.model.dtype == "float32"
    assert actor.optimizer.lr == 2e-3 and actor.optimizer.scheduler == "constant"
    assert not actor.gradient_checkpointing and actor.micro_batch_size == 256
    assert rollout.engine_args() == {"engines": 1}
    assert reward.backend == "rule" and reward.resources.cpus == 1
    assert exp.algorithm.kl.placement == "none" and exp.algorithm.group_size == 16
    # 16 prompts × 16 = 256 samples; 256 × 1 accumulation step × 1 worker = 256 per optimizer step.
    s = exp.schedule
    assert (s.prompts_per_step, s.samples_per_step, s.samples_per_optimizer_step, s.total_steps) == (16, 256, 256, 100)
    assert exp.sampling.max_new_tokens == 1 and exp.eval_sampling is None and s.eval_interval is None
    # A `prompt` column is tokenized as it is: ROLL applies the chat template to `messages` only.
    assert exp.data.train_files == ("rlcfg-quickstart/train.jsonl",)
    assert exp.data.prompt_key == "prompt" and not exp.data.apply_chat_template
    assert exp.reward_function == "math" and exp.seed == 0


# ---- derivations, through overrides ------------------------------------------------------------------------


def test_seed_layout_on_sixteen_gpus_spans_two_nodes():
    sixteen = "'list(range(0,16))'"
    exp = experiment(MEGATRON, f"actor_train.device_mapping={sixteen}", f"actor_infer.device_mapping={sixteen}",
                     f"reference.device_mapping={sixteen}", "actor_train.training_args.gradient_accumulation_steps=32")
    # ROLL derives num_nodes = ceil(16 / num_gpus_per_node 8) = 2, whatever num_nodes says.
    assert exp.cluster.nodes == 2
    assert exp.role("actor").resources.gpu_ids == tuple(range(16))
    # DP = 16 / 2 = 8; 2 × 32 × 8 = 512.
    assert exp.schedule.samples_per_optimizer_step == 512
    assert exp.role("rollout").engine_args()["engines"] == 8


def test_disjoint_rollout_gpus_are_not_colocated():
    exp = experiment(MEGATRON, "actor_infer.device_mapping='list(range(8,16))'")
    assert exp.role("rollout").resources.gpu_ids == tuple(range(8, 16))
    assert exp.colocation == (("actor", "reference"),)
    assert exp.cluster.nodes == 2


def test_megatron_pipeline_parallel_shrinks_dp():
    exp = experiment(MEGATRON, "actor_train.strategy_args.strategy_config.pipeline_model_parallel_size=2",
                     "actor_train.training_args.gradient_accumulation_steps=128")
    actor = exp.role("actor")
    assert (actor.parallelism.tp, actor.parallelism.pp) == (2, 2)
    assert exp.schedule.samples_per_optimizer_step == 2 * 128 * 2  # DP = 8 / (2 × 2) = 2


def test_several_optimizer_steps_per_rollout():
    exp = experiment(MEGATRON, "actor_train.training_args.gradient_accumulation_steps=16")
    assert exp.schedule.samples_per_optimizer_step == 2 * 16 * 4 == exp.schedule.samples_per_step // 4


def test_hsdp_shard_group():
    exp = experiment(FSDP2, "actor_train.strategy_args.strategy_config.fsdp_size=4")
    assert exp.role("actor").parallelism.fsdp_shard == 4


def test_vllm_engines_follow_tensor_parallel_size():
    exp = experiment(FSDP2, "++actor_infer.strategy_args.strategy_config.tensor_parallel_size=4")
    rollout = exp.role("rollout")
    assert rollout.parallelism.tp == 4 and rollout.engine_args()["engines"] == 2


def test_sglang_engine_args():
    exp = experiment(FSDP2, "actor_infer.strategy_args.strategy_name=sglang",
                     "actor_infer.strategy_args.strategy_config={tensor_parallel_size: 2, mem_fraction_static: 0.7, "
                     "context_length: 4096}", "++actor_infer.num_gpus_per_worker=2")
    rollout = exp.role("rollout")
    assert rollout.backend == "sglang" and rollout.parallelism.tp == 2
    assert rollout.engine_args() == {"mem_fraction_static": 0.7, "max_model_len": 4096, "load_format": "dummy",
                                     "engines": 4}


def test_sglang_tensor_parallel_defaults_to_the_worker_gpus():
    # ROLL's SGLang strategy takes tensor_parallel_size from the worker's own GPUs when it is unset
    exp = experiment(FSDP2, "actor_infer.strategy_args.strategy_name=sglang",
                     "actor_infer.strategy_args.strategy_config={mem_fraction_static: 0.7}",
                     "++actor_infer.num_gpus_per_worker=2")
    assert exp.role("rollout").parallelism.tp == 2


def test_kl_off_drops_the_reference():
    exp = experiment(MEGATRON, "use_kl_loss=false")
    assert exp.role("reference") is None
    assert exp.algorithm.kl.placement == "none"
    assert exp.colocation == (("actor", "rollout"),)


def test_init_kl_coef_starts_the_reference_without_a_kl_term():
    exp = experiment(MEGATRON, "use_kl_loss=false", "init_kl_coef=0.1")
    assert exp.role("reference") is not None
    assert exp.algorithm.kl.placement == "none"


@pytest.mark.parametrize("penalty,estimator", [("kl", "k1"), ("mse", "k2"), ("abs", "abs")])
def test_token_level_kl_is_a_reward_penalty(penalty, estimator):
    exp = experiment(MEGATRON, "use_kl_loss=false", "init_kl_coef=0.05", "++add_token_level_kl=true",
                     f"++kl_penalty={penalty}")
    kl = exp.algorithm.kl
    assert (kl.placement, kl.coef, kl.estimator) == ("reward", 0.05, estimator)


def test_max_new_tokens_is_rewritten_from_the_lengths():
    # sequence_length wins over response_length; ROLL gives responses 5000 − 2048 tokens (validation too, its
    # lengths defaulting to the training ones).
    exp = experiment(MEGATRON, "++sequence_length=5000")
    assert exp.sampling.max_new_tokens == 2952 and exp.eval_sampling.max_new_tokens == 2952


def test_validation_lengths():
    exp = experiment(MEGATRON, "++val_prompt_length=1024", "++val_sequence_length=3072")
    assert exp.eval_sampling.max_new_tokens == 2048 and exp.sampling.max_new_tokens == 4096


def test_group_size_is_num_return_sequences_in_group():
    exp = experiment(MEGATRON, "actor_infer.generating_args.num_return_sequences=4")
    assert exp.algorithm.group_size == 8 and exp.sampling.n == 8


def test_pretrain_wins_unless_all_three_name_their_model():
    exp = experiment(MEGATRON, "++actor_train.model_args.model_name_or_path=/models/other")
    assert exp.role("actor").model.path == "Qwen/Qwen2.5-7B-Instruct"
    exp = experiment(MEGATRON, *(f"++{w}.model_args.model_name_or_path=/models/{w}"
                                 for w in ("actor_train", "actor_infer", "reference")))
    assert exp.role("actor").model.path == "/models/actor_train"
    assert exp.role("rollout").model.path == "/models/actor_infer"
    assert exp.role("reference").model.path == "/models/reference"


def test_gae_adds_the_critic():
    exp = experiment(FSDP2, "adv_estimator=gae", "++reward_pretrain=/models/critic",
                     "++critic.device_mapping='list(range(0,8))'", "++critic.strategy_args.strategy_name=fsdp2_train",
                     "++critic.training_args.learning_rate=5e-6",
                     "++critic.training_args.per_device_train_batch_size=4",
                     "++critic.training_args.gradient_accumulation_steps=8", "++value_clip=0.5")
    critic = exp.role("critic")
    assert critic.backend == "fsdp2" and critic.trains and critic.optimizer.lr == 5e-6
    assert critic.model.path == "/models/critic" and critic.resources.gpu_ids == EIGHT
    assert exp.algorithm.advantage == "gae" and exp.algorithm.value_clip == 0.5 and exp.algorithm.lam == 0.95
    assert exp.colocation == (("actor", "rollout", "reference", "critic"),)


def test_clip_ranges_and_dual_clip():
    exp = experiment(MEGATRON, "++use_pg_clip_range=true", "++pg_clip_low=0.2", "++pg_clip_high=0.28",
                     "++dual_clip_loss=true")
    alg = exp.algorithm
    assert (alg.clip_low, alg.clip_high, alg.policy_loss) == (0.2, 0.28, "dual_clip")
    assert alg.clip_ratio_c == pytest.approx(1.4)  # 1 + 2 × pg_clip
    assert experiment(MEGATRON, "++importance_sampling=seq").algorithm.policy_loss == "gspo"


def test_warmup_ratio_counts_optimizer_steps():
    # 500 steps × 512 samples / 512 per optimizer step = 500 optimizer steps; 10% of them.
    exp = experiment(MEGATRON, "actor_train.training_args.warmup_steps=0",
                     "++actor_train.training_args.warmup_ratio=0.1")
    assert exp.role("actor").optimizer.warmup_steps == 50


def test_reward_shaping_and_filters():
    exp = experiment(MEGATRON, "++reward_clip=5", "++max_len_mask=true",
                     "++rewards.math_rule.query_filter_config.type=std_filter")
    alg = exp.algorithm
    assert alg.reward.clip == 5 and alg.mask_truncated and alg.dynamic_sampling


def test_reward_model_on_its_own_gpus():
    exp = experiment(MEGATRON, "++rewards.math_rule.strategy_args.strategy_name=hf_infer",
                     "++rewards.math_rule.device_mapping='list(range(8,10))'", "~rewards.math_rule.world_size")
    reward = exp.role("reward")
    assert reward.backend == "hf" and reward.resources.gpu_ids == (8, 9)
    assert exp.cluster.nodes == 2


def test_checkpoint_and_logging():
    exp = experiment(MEGATRON, "++resume_from_checkpoint=true", "++max_ckpt_to_keep=3", "++track_with=wandb",
                     "++tracker_kwargs={project: roll-runs, name: try1}")
    assert exp.checkpointing.resume == "latest" and exp.checkpointing.keep_last == 3
    assert exp.logging.backends == ("jsonl", "console", "wandb")
    assert (exp.logging.project, exp.logging.run_name) == ("roll-runs", "try1")
    assert experiment(MEGATRON, "++resume_from_checkpoint=/ckpt/step-100").checkpointing.resume == "/ckpt/step-100"


def test_greedy_validation():
    exp = experiment(MEGATRON, "++val_greedy=true")
    assert exp.eval_sampling.temperature == 0.0 and exp.sampling.temperature == 0.99


def test_agentic_configs_are_refused_by_the_lowering():
    from rlcfg.source.yaml_loader import UsageError

    result = check_file(str(ROOT / "tests" / "fixtures" / "roll" / "agentic.yaml"), env={})
    assert result.ok
    with pytest.raises(UsageError, match="agentic"):
        lower(result.config)
