"""The RL loop end to end on Ray: FSDP2 across two gloo processes with a reference model, the quickstart's
reward rising. (A run killed with SIGKILL and resumed: test_kill_resume.py.)"""

import dataclasses
import io
import json
import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("ray")
pytest.importorskip("transformers")

from rlcfg.runtime import quickstart  # noqa: E402
from rlcfg.runtime.driver import RunOptions, run  # noqa: E402

pytestmark = pytest.mark.usefixtures("ray_instance")


@pytest.fixture(scope="module")
def qs(tmp_path_factory):
    """The quickstart as these tests run it: its warm-started model, built once for the module (a random model
    scores 0 everywhere, which would leave every update, gradient and KL at 0)."""
    files = str(tmp_path_factory.mktemp("quickstart-files"))

    def experiment(out, **kwargs):
        return quickstart.experiment(out, warm_start=True, files_dir=files, **kwargs)

    return experiment


def metrics(out):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_fsdp_across_two_gloo_ranks_with_a_reference_model(tmp_path, qs):
    out = str(tmp_path)
    exp = qs(out, steps=3, actor_ranks=2, kl_coef=0.05, checkpoint_interval=2, keep_last=1)
    plan = quickstart.plan_for(exp)
    assert plan.placement("actor").dp == 2 and len(plan.placement("rollout").ranks) == 2

    result = run(plan, RunOptions(output_dir=out, threads=1, stream=io.StringIO()))

    history = metrics(out)
    assert [m["step"] for m in history] == [1, 2, 3] == [m["step"] for m in result.history]
    last = history[-1]
    for key in ("reward/mean", "kl", "actor/pg_loss", "actor/kl_loss", "actor/grad_norm", "response/length_mean",
                "throughput/samples_per_s", "time/generate", "time/train_backward", "time/overhead_share"):
        assert key in last, key
    assert last["kl"] > 0  # the actor has moved away from the frozen reference
    assert len(last["data/prompt_indices"]) == 16
    # keep_last=1: only the final checkpoint remains, with one shard per rank
    checkpoints = sorted(os.listdir(os.path.join(out, "checkpoints")))
    assert checkpoints == ["step-00000003"]
    shards = os.listdir(os.path.join(out, "checkpoints", "step-00000003", "actor"))
    assert {"__0_0.distcp", "__1_0.distcp", "extra-rank0.pt", "extra-rank1.pt"} <= set(shards)
    # the exported model is a plain Hugging Face checkpoint with trained weights
    import torch
    from transformers import AutoModelForCausalLM

    trained = AutoModelForCausalLM.from_pretrained(os.path.join(out, "hf_model"))
    initial = AutoModelForCausalLM.from_pretrained(exp.role("actor").model.path)
    assert not torch.equal(trained.lm_head.weight, initial.lm_head.weight)
    assert "rlcfg run: 3 steps" in result.summary


def test_the_warm_started_quickstart_learns_to_answer_and_stop(tmp_path, qs):
    """The quickstart's model after its supervised warm start (an SFT run through the same driver) answers the
    table often but rarely stops after the answer; GRPO raises the reward and shrinks the responses to the
    answer's length, and the run shows a few responses with their rewards at its start and its end."""
    out = str(tmp_path)
    exp = qs(out, steps=30, checkpoint_interval=None)
    stream = io.StringIO()
    result = run(quickstart.plan_for(exp), RunOptions(output_dir=out, resume=None, threads=1, stream=stream))
    rewards = [m["reward/mean"] for m in result.history]
    lengths = [m["response/length_mean"] for m in result.history]
    first, last = sum(rewards[:3]) / 3, sum(rewards[-5:]) / 5
    assert 0.02 <= first <= 0.35, rewards[:3]  # above chance, far from solved
    assert last >= first + 0.3, (first, last)
    assert sum(lengths[-5:]) / 5 <= sum(lengths[:3]) / 3 - 2, lengths
    shown = stream.getvalue()
    assert "sample responses at step 1 " in shown and "sample responses at step 30 " in shown
    assert "<eos>" in shown.split("sample responses at step 30 ")[1]


def test_the_fused_step_computes_what_the_general_path_computes(tmp_path, qs):
    """A single colocated worker runs each step in one call (HybridWorker.fused_step); forcing the general
    path, where the driver batches and computes advantages between worker calls, changes nothing a user
    sees: same prompts, rewards, losses and gradient norms, step for step, across an evaluation and a
    checkpoint (neither may see the next step's weights)."""
    runs = {}
    for fused in (True, False):
        out = str(tmp_path / str(fused))
        exp = qs(out, steps=6, checkpoint_interval=3)
        exp = dataclasses.replace(exp, schedule=dataclasses.replace(exp.schedule, eval_interval=2),
                                  data=dataclasses.replace(exp.data, eval_files=exp.data.train_files))
        result = run(quickstart.plan_for(exp), RunOptions(output_dir=out, resume=None, threads=1,
                                                          stream=io.StringIO(), fused_step=fused))
        runs[fused] = [{k: m[k] for k in ("step", "data/prompt_indices", "reward/mean", "actor/pg_loss",
                                          "actor/grad_norm", "response/length_mean") + (
                            ("eval/reward",) if m["step"] % 2 == 0 else ())}
                       for m in result.history]
    assert runs[True] == runs[False]
    assert [m["step"] for m in runs[True]] == [1, 2, 3, 4, 5, 6]


def test_dapo_options_evaluation_and_old_log_probs(tmp_path, qs):
    """Dynamic sampling, the overlong penalty, masking of truncated responses, decoupled clipping, two PPO
    epochs over two mini-batches (so old log-probs are computed), RLOO, and periodic evaluation, in one run."""
    import dataclasses

    from rlcfg.ir import RewardShaping

    out = str(tmp_path)
    base = qs(out, steps=2, checkpoint_interval=None, prompts_per_step=8, group_size=8)
    alg = dataclasses.replace(base.algorithm, advantage="rloo", dynamic_sampling=True, mask_truncated=True,
                              clip_low=0.2, clip_high=0.28, ppo_epochs=2, loss_aggregation="seq-mean-token-sum",
                              reward=RewardShaping(scale=2.0, bias=-0.5, overlong_penalty_length=2))
    exp = dataclasses.replace(
        base, algorithm=alg, sampling=dataclasses.replace(base.sampling, max_new_tokens=3),
        data=dataclasses.replace(base.data, eval_files=base.data.train_files),
        schedule=dataclasses.replace(base.schedule, samples_per_optimizer_step=32, eval_interval=2,
                                     eval_before_train=True),
        roles=tuple(dataclasses.replace(r, micro_batch_size=16) if r.name == "actor" else r for r in base.roles))
    result = run(quickstart.plan_for(exp), RunOptions(output_dir=out, resume=None, threads=1, stream=io.StringIO()))
    history = metrics(out)
    assert history[0] == {"step": 0, "eval/reward": history[0]["eval/reward"], "eval/samples": 169}
    last = history[-1]
    assert last["step"] == 2 and "eval/reward" in last
    assert "time/old_logprob" in last  # 4 optimizer steps per step: the ratio needs the pre-update log-probs
    assert last["data/draws"] >= 1 and last["data/groups_seen"] >= 8
    # every group kept by dynamic sampling has rewards that differ
    assert len(last["data/prompt_indices"]) <= 8
    assert 0.0 <= last["response/truncated_frac"] <= 1.0
    assert result.steps == 2


def _adaptive_kl(exp):
    """The quickstart with its KL (k3) in the reward under an adaptive controller whose target is far below any
    KL a trained actor shows: step 1 measures 0 (actor = reference), which lowers the coefficient by
    1 − 0.2·samples/horizon; every later step raises it by 1 + 0.2·samples/horizon."""
    from rlcfg.ir import KL, KLController, Role

    model = exp.role("actor").model
    samples = exp.schedule.samples_per_step
    reference = Role(name="reference", backend="fsdp", resources=exp.role("actor").resources, model=model,
                     forward_micro_batch_size=samples)
    kl = KL(placement="reward", coef=0.05, estimator="k3",
            controller=KLController(kind="adaptive", target=1e-9, horizon=1000))
    return dataclasses.replace(exp, roles=exp.roles[:2] + (reference,) + exp.roles[2:],
                               colocation=(("actor", "rollout", "reference"),),
                               algorithm=dataclasses.replace(exp.algorithm, kl=kl))


def test_the_adaptive_kl_coefficient_is_carried_across_steps_paths_and_a_resume(tmp_path, qs):
    """Step k+1 runs with the coefficient step k's controller left (Update.next_kl_coef), in the fused and the
    general path alike; a checkpoint keeps it, so a run resumed after step 2 continues as the uninterrupted
    one."""
    def kl_coefs(out, fused=True, max_steps=None):
        exp = _adaptive_kl(qs(out, steps=4, checkpoint_interval=2, prompts_per_step=4,
                                                 group_size=4))
        result = run(quickstart.plan_for(exp), RunOptions(output_dir=out, threads=1, stream=io.StringIO(),
                                                          fused_step=fused, max_steps=max_steps))
        return [(m["step"], m["kl_coef"]) for m in result.history]

    fused = kl_coefs(str(tmp_path / "fused"))
    coefs = [c for _s, c in fused]
    step = 0.2 * 16 / 1000  # the clipped error times samples / horizon
    assert coefs[0] == 0.05 and coefs[1] == pytest.approx(0.05 * (1 - step), rel=1e-12)
    for a, b in zip(coefs[1:], coefs[2:]):
        assert b == pytest.approx(a * (1 + step), rel=1e-12)
    # the general path, stopped after step 2 and resumed from its checkpoint, runs the same coefficients
    resumed = str(tmp_path / "resumed")
    assert kl_coefs(resumed, fused=False, max_steps=2) == fused[:2]
    with open(os.path.join(resumed, "checkpoints", "step-00000002", "driver.json")) as f:
        assert json.load(f)["kl_coef"] == pytest.approx(coefs[2], rel=1e-12)
    assert [c for c in kl_coefs(resumed, fused=False) if c[0] > 2] == fused[2:]


def test_ppo_runs_are_reproducible_the_value_head_is_seeded(tmp_path, qs):
    """The critic's value head is new weights: drawn from the config's seed, two runs of one PPO config give
    the same first-step value loss."""
    from rlcfg.ir import Optimizer, Role

    losses = []
    for k in range(2):
        out = str(tmp_path / str(k))
        exp = qs(out, steps=1, checkpoint_interval=None, prompts_per_step=4, group_size=2)
        actor = exp.role("actor")
        critic = Role(name="critic", backend="fsdp", resources=actor.resources, model=actor.model,
                      optimizer=Optimizer(lr=1e-3), micro_batch_size=8)
        exp = dataclasses.replace(exp, roles=exp.roles + (critic,),
                                  colocation=(("actor", "rollout", "critic"),),
                                  algorithm=dataclasses.replace(exp.algorithm, advantage="gae", lam=0.95))
        result = run(quickstart.plan_for(exp), RunOptions(output_dir=out, resume=None, threads=1,
                                                          stream=io.StringIO()))
        losses.append(result.history[0]["critic/value_loss"])
    assert losses[0] == losses[1] and losses[0] > 0


def test_old_log_probs_from_the_rollout_engine_and_evaluation_with_several_samples(tmp_path, qs):
    """Algorithm.old_logprobs "rollout" (RLinf recompute_logprobs: false): two PPO epochs would need a recompute
    pass, which never runs; the update trains against the engine's log-probs. An evaluation with n samples per
    prompt (SkyRL eval_n_samples_per_prompt) rolls out n responses for each prompt and reports pass@n."""
    from rlcfg.ir import Sampling

    out = str(tmp_path / "run")
    base = qs(out, steps=2, checkpoint_interval=None, prompts_per_step=4, group_size=4)
    with open(base.data.train_files[0]) as f:
        head = [next(f) for _ in range(6)]
    eval_file = tmp_path / "eval.jsonl"
    eval_file.write_text("".join(head))
    exp = dataclasses.replace(
        base, algorithm=dataclasses.replace(base.algorithm, ppo_epochs=2, old_logprobs="rollout"),
        eval_sampling=Sampling(max_new_tokens=base.sampling.max_new_tokens, temperature=1.0, n=3),
        data=dataclasses.replace(base.data, eval_files=(str(eval_file),)),
        schedule=dataclasses.replace(base.schedule, eval_before_train=True))
    result = run(quickstart.plan_for(exp), RunOptions(output_dir=out, resume=None, threads=1, stream=io.StringIO()))
    history = metrics(out)
    first = history[0]
    assert first["step"] == 0 and first["eval/samples"] == 18  # 6 prompts × 3
    assert 0.0 <= first["eval/reward"] <= first["eval/pass_at_3"] <= 1.0
    assert first["eval/mean_positive_reward"] == pytest.approx(first["eval/reward"])  # 0/1 rewards
    trained = [m for m in history if "actor/pg_loss" in m]
    assert [m["step"] for m in trained] == [1, 2] and result.steps == 2
    assert not any(k.startswith("time/old_logprob") for m in trained for k in m)


def test_a_ulysses_group_trains_as_data_parallel_ranks_do(tmp_path, qs):
    """Two actor ranks as one Ulysses group (sp=2, each sample's tokens split between them) take the update two
    data-parallel ranks take from the same rollouts: the driver hands both ranks of the group the same samples and
    counts the group's metrics once."""
    from rlcfg.ir import Parallelism

    def first_step(name, parallelism):
        out = str(tmp_path / name)
        exp = qs(out, steps=1, actor_ranks=2, kl_coef=0.05)
        exp = dataclasses.replace(exp, roles=tuple(dataclasses.replace(r, parallelism=parallelism)
                                                   if r.name == "actor" else r for r in exp.roles))
        plan = quickstart.plan_for(exp)
        run(plan, RunOptions(output_dir=out, threads=1, stream=io.StringIO()))
        return plan, metrics(out)[0]

    plan, split = first_step("ulysses", Parallelism(sp=2))
    assert plan.placement("actor").dp == 1
    _, data_parallel = first_step("data-parallel", Parallelism())
    assert split["reward/mean"] == data_parallel["reward/mean"]  # the same rollouts
    for key in ("actor/pg_loss", "actor/kl_loss", "actor/grad_norm", "kl"):
        assert split[key] == pytest.approx(data_parallel[key], rel=1e-4, abs=1e-6), key
