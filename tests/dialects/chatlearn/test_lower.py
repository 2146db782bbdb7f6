"""ChatLearn → Experiment: the roles, lengths, batch algebra and GRPO that ChatLearn would run, derived by hand from
the templates, the 1.2.0-style fixture and ChatLearn's own code (chatlearn/algorithm/grpo_utils at v1.2.0 and main),
and compared with the lowering and with what rlcfg's algorithms compute from it."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from rlcfg.frontend import check_file
from rlcfg.ir import Experiment, Sampling
from rlcfg.dialects.chatlearn.lower import lower
from tests.helpers import TEMPLATES

FSDP = TEMPLATES / "chatlearn-fsdp-vllm.yaml"
MEGATRON = TEMPLATES / "chatlearn-megatron-vllm.yaml"
V120_FSDP = Path(__file__).resolve().parents[2] / "fixtures" / "chatlearn" / "v1.2.0-fsdp.yaml"
ENV = {"HOME": "/home/user"}


def checked(path, *overrides: str):
    result = check_file(str(path), list(overrides), env=ENV)
    assert result.config is not None, [f"{d.path}: {d.message}" for d in result.diagnostics]
    return result


def experiment(path, *overrides: str) -> Experiment:
    return lower(checked(path, *overrides).config)


def role(exp: Experiment, name: str):
    return next(r for r in exp.roles if r.name == name)


def engine(exp: Experiment) -> dict:
    return dict(role(exp, "rollout").engine)


def notes(path, *overrides: str) -> dict[str, str]:
    """The run ledger's refusals (RLC118) of a config, by key."""
    return {d.path: d.message for d in checked(path, *overrides).diagnostics if d.code == "RLC118"}


def warnings(path, *overrides: str) -> dict[str, str]:
    return {d.path: d.message for d in checked(path, *overrides).diagnostics if d.code == "RLC307"}


# ---- lengths ---------------------------------------------------------------------------------------------------

def test_main_lengths_come_from_prompt_and_response_limits():
    exp = experiment(FSDP, "models.policy.max_prompt_tokens_length=512", "models.policy.max_response_tokens_length=1536")
    assert exp.sampling.max_new_tokens == 1536 and exp.eval_sampling.max_new_tokens == 1536
    # PromptPipeline keeps a prompt when `max_prompt_tokens_length > len(input_ids)`: at most 511 tokens
    assert exp.data.max_prompt_length == 511
    assert engine(exp)["max_model_len"] == 2048  # ChatLearn main's seq_length: prompt + response


def test_max_response_tokens_length_moves_the_rollout_limit():
    # The issue measured it as ignored (rlcfg kept max_new_tokens' 2048): it is the limit rollout and training use.
    short, long = experiment(FSDP, "models.policy.max_response_tokens_length=256"), experiment(FSDP)
    assert (short.sampling.max_new_tokens, long.sampling.max_new_tokens) == (256, 3072)


def test_1_2_lengths_are_seq_length_minus_the_prompt():
    # ChatLearn 1.2.0 never reads max_new_tokens (3072 in the fixture): vllm_module.generate_vllm gives each prompt
    # seq_length - len(prompt) tokens, and PromptPipeline keeps prompts shorter than seq_length. The plan sizes with
    # the longest case; each prompt gets its own budget, and `rlcfg run` runs it.
    exp = experiment(V120_FSDP)
    assert engine(exp)["max_model_len"] == 4096
    assert exp.sampling.max_new_tokens == 4095 and exp.data.max_prompt_length == 4095
    assert exp.sampling.max_total_length == exp.eval_sampling.max_total_length == 4096
    # a prompt of 1000 tokens may get 3096 response tokens, the longest kept prompt (4095) one
    assert [exp.sampling.response_budget(p) for p in (1, 1000, 4095)] == [4095, 3096, 1]
    assert "models.policy.seq_length" not in notes(V120_FSDP)


def test_a_document_judged_by_1_2_has_its_lengths_without_max_new_tokens():
    # ChatLearn's reference document writes seq_length and no key of main (nor max_new_tokens): it is judged by 1.2.0,
    # whose engines give each prompt seq_length minus its length whatever main's length keys default to
    from rlcfg import lower as lowering

    for name in ("reference-example.yaml", "reference-example-megatron.yaml"):
        result = checked(V120_FSDP.parent / name)
        assert result.release == "1.2.0"
        exp = lowering.lower("chatlearn", result.config, result.release)
        assert (exp.sampling.max_total_length, exp.sampling.max_new_tokens, exp.data.max_prompt_length) == (
            2048, 2047, 2047)
        assert engine(exp)["max_model_len"] == 2048
        # judged by main, the same keys mean main's limits: prompt 1024 (default) + response 2048
        main = lowering.lower("chatlearn", result.config, "main")
        assert (main.sampling.max_total_length, main.sampling.max_new_tokens, main.data.max_prompt_length) == (
            None, 2048, 1023)


def test_main_responses_have_one_limit_for_every_prompt():
    exp = experiment(FSDP, "models.policy.max_prompt_tokens_length=512", "models.policy.max_response_tokens_length=1536")
    assert exp.sampling.max_total_length is None and exp.eval_sampling.max_total_length is None
    assert exp.sampling.response_budget(511) == exp.sampling.response_budget(3) == 1536


def test_megatron_lr_decays_to_min_lr_after_the_first_step():
    # megatron_module.py sets train_iters to 1, so Megatron's linear decay (lr_decay_iters = train_iters) ends at the
    # first step: lr for it, min_lr for every later one.
    opt = role(experiment(MEGATRON, "models.policy_trainer.optimizer.lr=2e-6",
                          "models.policy_trainer.optimizer.min_lr=1e-7"), "actor").optimizer
    assert (opt.lr, opt.min_lr, opt.scheduler, opt.decay_steps, opt.warmup_steps) == (2e-6, 1e-7, "linear", 1, 0)
    constant = role(experiment(MEGATRON), "actor").optimizer  # the template keeps min_lr = lr
    assert (constant.scheduler, constant.decay_steps, constant.min_lr) == ("constant", None, constant.lr)
    # ChatLearn's FSDP trainer has no schedule: lr throughout, whatever min_lr says
    fsdp = role(experiment(FSDP, "models.policy_trainer.optimizer.min_lr=0"), "actor").optimizer
    assert fsdp.scheduler == "constant" and fsdp.decay_steps is None


# ---- roles -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("template", [FSDP, MEGATRON])
def test_templates_lower_with_their_written_gpus(template):
    exp = experiment(template)
    gpus = {r.name: r.resources.gpus for r in exp.roles}
    assert gpus["actor"] == gpus["rollout"] > 0
    assert exp.schedule.samples_per_step == 2048 and exp.algorithm.group_size == exp.sampling.n


@pytest.mark.parametrize("template", [FSDP, MEGATRON])
def test_the_reference_runs_only_when_the_loss_reads_it(template):
    # Without a KL term nothing reads the reference's log-probs: the plan does not place it and the run starts none.
    exp = experiment(template)
    assert exp.role("reference") is None and exp.algorithm.kl.placement == "none"
    assert all("reference" not in group for group in exp.colocation)


def test_a_kl_loss_brings_the_reference_colocated_as_written():
    exp = experiment(FSDP, "models.policy_trainer.kl_coef=0.01")
    ref = role(exp, "reference")
    assert ref.resources.gpus == 8 and ref.forward_micro_batch_size == 8 and ref.offload.params
    assert set(exp.colocation[0]) == {"actor", "rollout", "reference"}


def test_roles_speak_chatlearns_keys():
    exp = experiment(FSDP, "models.policy_trainer.kl_coef=0.01")
    actor, ref = role(exp, "actor"), role(exp, "reference")
    assert actor.section == "models.policy_trainer" and ref.section == "models.ref_policy"
    assert role(exp, "rollout").section == "models.policy" and role(exp, "reward").section == "models.reward"
    assert actor.key_for("micro_batch_size") == "runtime_args.train_micro_batch_size"
    assert actor.key_for("forward_micro_batch_size") == "models.policy_trainer.generation_batch_size"
    assert actor.key_for("max_tokens_per_micro_batch") == "models.policy_trainer.max_token_in_packing"
    assert ref.key_for("forward_micro_batch_size") == "models.ref_policy.generation_batch_size"


def test_packing_budget_follows_packing():
    assert role(experiment(FSDP), "actor").max_tokens_per_micro_batch is None
    packed = role(experiment(FSDP, "models.policy_trainer.packing=true",
                             "models.policy_trainer.max_token_in_packing=8192"), "actor")
    assert packed.sequence_packing and packed.max_tokens_per_micro_batch == 8192


def test_adam_beta2_is_chatlearns_default():
    assert role(experiment(FSDP), "actor").optimizer.betas == (0.9, 0.95)


def test_data_is_read_as_chatlearn_reads_it():
    data = experiment(FSDP).data
    assert (data.prompt_key, data.answer_key) == ("prompt", "reward_model.ground_truth")


# ---- the algorithm: what ChatLearn's GRPO is, setting by setting ------------------------------------------------

def test_grpo_uses_the_population_std_plus_1e_5():
    options = experiment(FSDP).algorithm.advantage_options
    assert (options.std, options.eps) == ("population", 1e-5)


def test_clip_ratios_and_chatlearns_caps_are_typed_settings():
    alg = experiment(FSDP, "models.policy_trainer.pos_clip_ratio=0.28", "models.policy_trainer.neg_clip_ratio=0.1",
                     "models.policy_trainer.diff_clip_ratio=5", "models.policy_trainer.final_clip_ratio=2").algorithm
    assert (alg.clip_low, alg.clip_high) == (0.1, 0.28)
    assert (alg.policy_options.log_ratio_max, alg.policy_options.loss_cap) == (5, 2)
    default = experiment(FSDP).algorithm.policy_options
    assert (default.log_ratio_min, default.log_ratio_max, default.loss_cap) == (None, 10, 3)


def test_fsdp_adds_kl_and_entropy_to_the_loss():
    alg = experiment(FSDP, "models.policy_trainer.kl_coef=0.01", "models.policy_trainer.entropy_coef=0.001").algorithm
    assert (alg.kl.placement, alg.kl.coef, alg.kl.estimator) == ("loss", 0.01, "low_var_kl")
    spec = alg.actor_loss_spec()
    assert (spec.kl_coef, spec.entropy_coef, spec.aggregation) == (0.01, 0.001, "token-mean")


def test_megatron_back_propagates_the_policy_loss_alone():
    # train_helper.py: require_bp_keys = ['pg_loss']; kl_coef and entropy_coef are never read.
    overrides = ("models.policy_trainer.kl_coef=0.01", "models.policy_trainer.entropy_coef=0.001")
    alg = experiment(MEGATRON, *overrides).algorithm
    assert alg.kl.placement == "none" and alg.actor_loss_spec().kl_coef == 0 and alg.entropy_coef == 0
    found = warnings(MEGATRON, *overrides)
    assert {"models.policy_trainer.kl_coef", "models.policy_trainer.entropy_coef"} <= set(found)


def test_gspo_runs_on_megatron_only():
    assert experiment(MEGATRON, "models.policy_trainer.use_group_sequence_policy=true").algorithm.policy_loss == "gspo"
    # ChatLearn's FSDP trainer always calls calculate_grpo_loss
    assert experiment(FSDP, "models.policy_trainer.use_group_sequence_policy=true").algorithm.policy_loss == "regular"
    assert "models.policy_trainer.use_group_sequence_policy" in warnings(
        FSDP, "models.policy_trainer.use_group_sequence_policy=true")


def test_epochs_and_group_size():
    alg = experiment(FSDP, "runtime_args.num_training_epoch=2").algorithm
    assert alg.ppo_epochs == 2 and alg.group_size == 32


def test_replay_window_changes_nothing_computed():
    # AdvantageComputer reads episode_replay_buffers[-1]: ChatLearn trains on the newest episode whatever the window.
    assert experiment(FSDP, "runtime_args.max_replay_episode=4") == experiment(FSDP)


# ---- the numbers: rlcfg's algorithms on the lowered settings against ChatLearn's formulas --------------------------

torch = pytest.importorskip("torch")


def _chatlearn_losses() -> dict:
    """calculate_grpo_loss and calculate_gspo_loss from ChatLearn's own loss_gallery.py (HEAD; the two functions are
    the same at v1.2.0), read from the mirror of its repository: nothing of ChatLearn's is kept in rlcfg."""
    import os
    import subprocess

    root = os.environ.get("MIRROR_ROOT")
    if not root:
        pytest.skip("MIRROR_ROOT is not set (the bare clones the differential suite compares against)")
    text = subprocess.run(["git", f"--git-dir={os.path.join(root, 'alibaba+ChatLearn', 'repo')}", "show",
                           "HEAD:chatlearn/algorithm/grpo_utils/loss_gallery.py"],
                          capture_output=True, text=True, check=True).stdout
    namespace: dict = {}
    exec(compile(text, "loss_gallery.py", "exec"), namespace)  # noqa: S102 - the framework's code, in a test only
    return namespace


def _batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(4, 6, generator=g) * 3
    old = logp + torch.randn(4, 6, generator=g) * 0.5
    old[0, 1] = logp[0, 1] - 12.0  # a log-ratio above diff_clip_ratio (10): ChatLearn clamps it
    old[1, 2] = logp[1, 2] - 4.0  # a ratio of e^4 with a negative advantage: the loss is capped at 3
    mask = torch.ones(4, 6)
    mask[2, 4:] = 0
    mask[3, 3:] = 0
    return logp, old, [1.5, -2.0, 0.5, -0.25], mask


def test_grpo_advantage_matches_chatlearns_numbers():
    from rlcfg.runtime import algorithms as A

    alg = experiment(FSDP, "runtime_args.num_inference_per_prompt=4").algorithm
    scores = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    mask = torch.ones(8, 3)
    adv, _ = A.compute_advantages(scores, mask, estimator=alg.advantage, group_size=alg.group_size,
                                  options=alg.advantage_options, normalize_std=alg.normalize_advantage_std)
    # by hand, as advantage_compute.py: np.mean 0.25, np.std (population) sqrt(0.1875) = 0.4330127
    std = 0.1875 ** 0.5
    expected = [0.75 / (std + 1e-5)] + [-0.25 / (std + 1e-5)] * 3 + [0.0] * 4  # an all-equal group: 0 / 1e-5
    assert torch.allclose(adv[:, 0], torch.tensor(expected), atol=1e-5)
    assert abs(float(adv[0, 0]) - 1.7320108) < 1e-5  # verl's unbiased std (0.5) would give 1.5


@pytest.mark.oracle
def test_grpo_policy_loss_is_chatlearns_calculate_grpo_loss():
    from rlcfg.runtime import algorithms as A

    chatlearn = _chatlearn_losses()

    alg = experiment(FSDP, "models.policy_trainer.pos_clip_ratio=0.28").algorithm
    logp, old, advantages, mask = _batch()
    adv = torch.tensor(advantages).unsqueeze(1) * mask
    ours, _ = A.policy_loss(logp, old, adv, mask, alg.policy_loss_spec())
    theirs = chatlearn["calculate_grpo_loss"](logp, old, advantages, pos_clip_ratio=0.28)
    # ChatLearn has no lower clamp of the log-ratio; rlcfg's −20 bound never binds on these numbers.
    assert torch.allclose(ours * mask, theirs * mask, atol=1e-6)
    assert float(theirs[1, 2]) == 3.0 and float(ours[1, 2]) == 3.0  # the final clip
    uncapped = A.policy_loss(logp, old, adv, mask)[0]
    assert float(uncapped[1, 2]) > 3.0  # without ChatLearn's cap the same token weighs more


@pytest.mark.oracle
def test_gspo_policy_loss_is_chatlearns_calculate_gspo_loss():
    from rlcfg.runtime import algorithms as A

    chatlearn = _chatlearn_losses()

    alg = experiment(MEGATRON, "models.policy_trainer.use_group_sequence_policy=true",
                     "models.policy_trainer.final_clip_ratio=0.5").algorithm
    logp, old, advantages, mask = _batch(1)
    logp = logp.clone().requires_grad_(True)
    adv = torch.tensor(advantages).unsqueeze(1) * mask
    ours, _ = A.policy_loss(logp, old, adv, mask, alg.policy_loss_spec())
    # ChatLearn's Megatron trainer passes pos/neg_clip_ratio (0.2) and final_clip_ratio from the config
    theirs = chatlearn["calculate_gspo_loss"](logp, old, advantages, pos_clip_ratio=0.2, neg_clip_ratio=0.2,
                                              final_clip_ratio=0.5, loss_mask=mask)[0]
    assert torch.allclose(ours * mask, theirs * mask, atol=1e-6)
    g1, = torch.autograd.grad((ours * mask).sum(), logp)
    g2, = torch.autograd.grad((theirs * mask).sum(), logp)
    assert torch.allclose(g1, g2, atol=1e-6)


def test_fsdp_actor_loss_is_chatlearns_total_loss():
    """policy_trainer.py train_step: Σ pg / tokens + kl_coef·Σ clamp(k3, ±10) / tokens − entropy_coef·Σ H / tokens,
    the sums over the loss mask and the token count that of the global batch."""
    from rlcfg.runtime import algorithms as A

    alg = experiment(FSDP, "models.policy_trainer.kl_coef=0.05", "models.policy_trainer.entropy_coef=0.01").algorithm
    logp, old, advantages, mask = _batch(2)
    ref = logp + torch.randn(4, 6, generator=torch.Generator().manual_seed(3))
    ref[2, 0] = logp[2, 0] + 15.0  # a KL estimate above 10: clamped
    entropy = torch.rand(4, 6, generator=torch.Generator().manual_seed(4))
    adv = torch.tensor(advantages).unsqueeze(1) * mask
    tokens = float(mask.sum()) * 2  # this micro-batch is half of the global batch's tokens
    mb = {"response_mask": mask, "advantages": adv, "old_logprobs": old, "ref_logprobs": ref}
    ours, _ = A.actor_loss(logp, mb, alg.actor_loss_spec(), num_tokens=tokens, entropy=entropy)
    live = mask.bool()
    # ChatLearn's per-token policy loss by its definition: the PPO clip on r = exp(min(log-ratio, 10)), capped at 3
    ratio = torch.exp(torch.clamp(logp - old, max=10.0))
    a = torch.tensor(advantages).unsqueeze(1)
    per_token = torch.clamp(torch.max(-a * ratio, -a * torch.clamp(ratio, 0.8, 1.2)), max=3.0)
    pg = torch.masked_select(per_token, live)
    kl = torch.masked_select(ref - logp, live)
    kl_loss = torch.clamp(torch.exp(kl) - kl - 1, min=-10, max=10)
    theirs = (pg.sum() / tokens - 0.01 * torch.masked_select(entropy, live).sum() / tokens
              + 0.05 * kl_loss.sum() / tokens)
    assert abs(float(ours) - float(theirs)) < 1e-6


# ---- what rlcfg's rollout can take ---------------------------------------------------------------------------------

def test_rollout_penalties_are_lowered_to_the_sampling():
    # ChatLearn hands them to vLLM's / SGLang's sampling params; rlcfg's Sampling carries them with those meanings.
    assert {"presence_penalty", "frequency_penalty", "repetition_penalty"} <= {f.name for f in fields(Sampling)}
    for key, value in (("presence_penalty", 0.5), ("frequency_penalty", 0.5), ("repetition_penalty", 1.1)):
        assert not notes(FSDP, f"models.policy.{key}={value}")
        exp = experiment(FSDP, f"models.policy.{key}={value}")
        assert getattr(exp.sampling, key) == value and getattr(exp.eval_sampling, key) != value
        exp = experiment(FSDP, f"models.policy.eval_{key}={value}")
        assert getattr(exp.eval_sampling, key) == value and getattr(exp.sampling, key) != value


def test_a_sampling_temperature_other_than_1_is_refused():
    # ChatLearn trains on untempered log-probs; rlcfg's trainers divide the logits by the temperature.
    assert "untempered" in notes(FSDP, "models.policy.temperature=0.8")["models.policy.temperature"]
    assert experiment(FSDP, "models.policy.eval_temperature=0.3").eval_sampling.temperature == 0.3


def test_rlcfg_run_stops_on_a_refused_setting(capsys):
    import typer

    from rlcfg.cli.run import _lower

    with pytest.raises(typer.Exit) as stopped:
        _lower(str(FSDP), ["models.policy.temperature=0.8"], None)
    assert stopped.value.exit_code == 1
    assert "`rlcfg run` refuses `models.policy.temperature` = 0.8" in capsys.readouterr().err


# ChatLearn's Moonlight script: the Megatron trainer loads the converted checkpoint, the rollout the Hugging Face one.
MOONLIGHT = ("models.policy_trainer.load=/mnt/models/Moonlight-16B-A3B-Instruct-to-mcore",
             "models.policy.load=/mnt/models/Moonlight-16B-A3B-Instruct",
             "models.policy_trainer.decoder_first_pipeline_num_layers=14",
             "models.policy_trainer.decoder_last_pipeline_num_layers=13")


def test_megatron_deepseek_routes_without_its_correction_after_1_2():
    """ChatLearn main's update_cfg turns DeepSeek-V3's routing correction off; 1.2.0 routed with it beside a
    sequence auxiliary loss and YaRN rotary embeddings, which `rlcfg run` refuses at the trainer's checkpoint."""
    from rlcfg import lower as lowering

    exp = experiment(MEGATRON, *MOONLIGHT)
    actor = role(exp, "actor")
    assert actor.expert_bias == "off" and actor.router_dtype == "fp32"
    assert (actor.parallelism.pp, actor.parallelism.pp_first_layers, actor.parallelism.pp_last_layers) == (2, 14, 13)
    assert "models.policy_trainer.load" not in notes(MEGATRON, *MOONLIGHT)
    old = check_file(str(V120_FSDP.parent / "reference-example-megatron.yaml"), list(MOONLIGHT[:2]), env=ENV)
    assert old.release == "1.2.0"
    assert role(lowering.lower("chatlearn", old.config, "1.2.0"), "actor").expert_bias == "unmapped"
    [refusal] = [d.message for d in old.diagnostics if d.code == "RLC118" and d.path == "models.policy_trainer.load"]
    assert "ChatLearn's after 1.2.0" in refusal
