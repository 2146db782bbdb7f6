"""Supervised training (Experiment.kind "sft" and "reward_model"): the losses with AReaL's normalisation, the
data, the epoch triggers, and runs on Ray (train, checkpoint, export, resume), down to `rlcfg run` of an AReaL SFT
config."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ray")
pytest.importorskip("transformers")

from rlcfg.runtime import quickstart  # noqa: E402
from rlcfg.runtime import supervised as SV  # noqa: E402
from rlcfg.runtime import supervised_step as SS  # noqa: E402
from rlcfg.runtime.data import PromptSampler, load_pairs, load_sft, load_tokenizer  # noqa: E402
from rlcfg.runtime.driver import RunOptions, plan_here, run  # noqa: E402
from rlcfg.runtime.shell import Trigger  # noqa: E402

ADDITIONS = [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a in range(5) for b in range(5)]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("tiny") / "model")
    quickstart.build_model_dir(path)
    return path


@pytest.fixture(scope="module")
def tokenizer(model_dir):
    return load_tokenizer(model_dir)


@pytest.fixture(scope="module", autouse=True)
def ray_instance():
    """One local Ray instance for the in-process runs of this module."""
    yield
    import ray

    if ray.is_initialized():
        ray.shutdown()


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return str(path)


def metrics(out):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


# ---- losses -------------------------------------------------------------------------------------------------


def test_sft_loss_is_the_token_mean_nll_of_the_answer_tokens_only():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 6, requires_grad=True)
    ids = torch.tensor([[1, 2, 3, 4], [5, 1, 2, 0]])
    # Row 0: prompt of 2 tokens, answer of 2; row 1: prompt of 1, answer of 2, then padding.
    mask = torch.tensor([[0, 0, 1, 1], [0, 1, 1, 0]])
    loss = SS.sft_loss(SS.token_logprobs(logits, ids), mask)

    logp = torch.log_softmax(logits.detach(), dim=-1)
    # Token t is predicted at position t − 1: answer tokens (0,2), (0,3), (1,1), (1,2).
    by_hand = -(logp[0, 1, 3] + logp[0, 2, 4] + logp[1, 0, 1] + logp[1, 1, 2]) / 4
    assert loss.item() == pytest.approx(by_hand.item(), rel=1e-6)

    loss.backward()
    # The positions that predict prompt tokens (and padding) receive no gradient.
    assert torch.all(logits.grad[0, 0] == 0) and torch.all(logits.grad[1, 2] == 0)
    assert torch.any(logits.grad[0, 1] != 0) and torch.any(logits.grad[1, 0] != 0)


def test_sft_loss_of_a_micro_batch_is_its_share_of_the_batch_mean():
    logprobs = torch.tensor([[-1.0, -2.0, -3.0]])
    mask = torch.tensor([[0, 1, 1, 1]])
    assert SS.sft_loss(logprobs, mask, denominator=12).item() == pytest.approx(6.0 / 12)


def test_pairwise_loss_is_the_mean_bradley_terry_loss():
    chosen = torch.tensor([1.0, -0.5, 2.0])
    rejected = torch.tensor([0.0, 0.5, 2.5])
    expected = -torch.nn.functional.logsigmoid(chosen - rejected).mean()
    assert SS.pairwise_loss(chosen, rejected).item() == pytest.approx(expected.item(), rel=1e-6)
    assert SS.pairwise_loss(chosen, rejected, denominator=6).item() == pytest.approx(expected.item() / 2, rel=1e-6)


def test_the_score_is_taken_at_each_rows_last_token():
    values = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    attention = torch.tensor([[1, 1, 0], [1, 1, 1]])
    assert SS.last_token_scores(values, attention).tolist() == [2.0, 6.0]


# ---- data ---------------------------------------------------------------------------------------------------


def test_sft_examples_mask_the_prompt_and_end_with_eos(tmp_path, tokenizer):
    path = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "3+4=", "answer": "7"}, {"prompt": "1+1=", "answer": "22222"}])
    data = load_sft([path], tokenizer, max_length=7)
    assert len(data) == 1 and data.too_long == 1  # 4 + 5 + EOS = 10 tokens > 7: left out
    ids = data.token_ids[0]
    assert tokenizer.decode(ids[:5]) == "3+4=7" and ids[-1] == tokenizer.eos_token_id
    assert data.loss_masks[0] == (0, 0, 0, 0, 1, 1)


def test_preference_pairs_give_two_rows_each(tmp_path, tokenizer):
    path = write_jsonl(tmp_path / "p.jsonl", [{"chosen": "1+1=2", "rejected": "1+1=3"}])
    data = load_pairs([path], tokenizer)
    assert len(data) == 1 and list(data.rows(0)) == [0, 1]
    assert tokenizer.decode(data.token_ids[1][:-1]) == "1+1=3" and data.token_ids[1][-1] == tokenizer.eos_token_id
    batch = SS.padded_batch(data, [0], tokenizer.pad_token_id)
    assert batch["input_ids"].shape == (2, 6) and batch["loss_mask"].sum() == 12


def test_a_missing_answer_column_names_the_record(tmp_path, tokenizer):
    from rlcfg.runtime.data import DataError

    path = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "1+1=", "solution": "2"}])
    with pytest.raises(DataError, match=r"d.jsonl:1: no `answer` column"):
        load_sft([path], tokenizer)


# ---- one optimizer step, in process ---------------------------------------------------------------------------


class _Engine:
    """What train_step reads of an FSDPEngine, around a plain model (one rank)."""

    def __init__(self, model):
        self.model, self.device, self.world, self.temperature = model, torch.device("cpu"), 1, 1.0
        self.optimizer, self.scheduler = torch.optim.SGD(model.parameters(), lr=0.0), None

    def _step(self):
        self.grads = [p.grad.clone() for p in self.model.parameters() if p.grad is not None]
        return 0.0


@pytest.mark.parametrize("kind", ["sft", "reward_model"])
def test_micro_batches_add_up_to_the_whole_batch(tmp_path, model_dir, tokenizer, kind):
    """AReaL weighs each micro-batch by its answer tokens (pairs): the gradient does not depend on the split."""
    from transformers import AutoModelForCausalLM, AutoModelForTokenClassification

    if kind == "sft":
        rows = [{"prompt": "1+1=", "answer": "2"}, {"prompt": "2+3=", "answer": "5555"},
                {"prompt": "4=", "answer": "31"}, {"prompt": "0+0+0=", "answer": "0"}]
        data = load_sft([write_jsonl(tmp_path / "d.jsonl", rows)], tokenizer)
        model = AutoModelForCausalLM.from_pretrained(model_dir)
    else:
        rows = [{"chosen": "1+1=2", "rejected": "1+1=3333"}, {"chosen": "2=2", "rejected": "2=1"}]
        data = load_pairs([write_jsonl(tmp_path / "p.jsonl", rows)], tokenizer)
        torch.manual_seed(0)
        model = AutoModelForTokenClassification.from_pretrained(model_dir, num_labels=1)
        model.dropout = torch.nn.Identity()  # the head's dropout would make the two passes differ by chance
    batch = {k: torch.tensor(v) for k, v in SS.padded_batch(data, list(range(len(data))),
                                                               tokenizer.pad_token_id).items()}
    engine = _Engine(model)
    grads = []
    for micro in (1, len(data)):
        cfg = {"kind": kind, "micro_batch": micro, "denominator": SS.denominator(kind, batch)}
        stats = SS.train_step(engine, batch, cfg)
        grads.append(engine.grads)
    for a, b in zip(*grads):
        assert torch.allclose(a, b, atol=1e-6)
    if kind == "sft":
        assert stats["tokens"] == 2 + 5 + 3 + 2  # every answer token and its EOS
    else:
        assert stats["pairs"] == 2


# ---- triggers -------------------------------------------------------------------------------------------------


def test_epoch_triggers_fire_at_the_end_of_every_nth_epoch():
    sampler = PromptSampler(7, 3, seed=0)  # two batches an epoch, the seventh prompt skipped
    state, fired = sampler.state_dict(), []
    every_other_epoch = Trigger(steps=None, epochs=2)
    every_third_step = Trigger(steps=3)
    for step in range(1, 9):
        after = sampler.after_draw(state)
        epochs = (sampler.epochs_done(state), sampler.epochs_done(after))
        fired.append((every_other_epoch.due(step, *epochs), every_third_step.due(step, *epochs)))
        state = after
    assert [s for s, (e, _) in enumerate(fired, 1) if e] == [4, 8]
    assert [s for s, (_, k) in enumerate(fired, 1) if k] == [3, 6]


def test_the_time_trigger_fires_once_its_interval_has_passed():
    trigger = Trigger(steps=None, seconds=3600)
    assert not trigger.due(1, 0, 0)
    trigger.last_fired -= 3600
    assert trigger.due(2, 0, 0) and not trigger.due(3, 0, 0)


# ---- preflight --------------------------------------------------------------------------------------------------


def test_supervised_experiments_need_no_rollout(tmp_path, model_dir):
    from rlcfg.runtime.backends import Machine, check_plan

    exp = SV.sft_experiment(model_dir, write_jsonl(tmp_path / "d.jsonl", ADDITIONS), steps=2, batch_size=5)
    plan, errors = plan_here(exp, machine=Machine(gpus=0, cpus=2))
    assert errors == [] and check_plan(plan, Machine(gpus=0, cpus=2)) == []
    as_rl = dataclasses.replace(exp, kind="rl")
    assert "the experiment has no `rollout` role" in check_plan(plan_here(as_rl)[0], Machine(gpus=0, cpus=2))
    as_rw = dataclasses.replace(exp, kind="reward_model")
    assert "the experiment has no trainable `critic` role" in check_plan(plan_here(as_rw)[0], Machine(gpus=0, cpus=2))
    # SFT trains on either backend; a reward model's scalar head only on fsdp.
    on_megatron = dataclasses.replace(exp, roles=(dataclasses.replace(exp.roles[0], backend="megatron"),))
    assert not [p for p in check_plan(plan_here(on_megatron)[0], Machine(gpus=1, cpus=2), has_cluster=True)
                if "megatron" in p]
    rw_on_megatron = dataclasses.replace(on_megatron, kind="reward_model", roles=(
        dataclasses.replace(on_megatron.roles[0], name="critic"),))
    problems = check_plan(plan_here(rw_on_megatron)[0], Machine(gpus=1, cpus=2), has_cluster=True)
    assert any("reward-model training on the megatron backend: rlcfg trains reward models" in p for p in problems)


def test_a_batch_that_does_not_split_over_the_ranks_is_refused_before_ray(tmp_path, model_dir):
    from rlcfg.runtime.data import DataError
    from rlcfg.runtime.supervised import SupervisedRun

    exp = SV.sft_experiment(model_dir, write_jsonl(tmp_path / "d.jsonl", ADDITIONS), steps=2, batch_size=5, ranks=2)
    with pytest.raises(DataError, match="5 examples do not split evenly over the 2 data-parallel ranks"):
        SupervisedRun(plan_here(exp)[0], RunOptions(output_dir=str(tmp_path / "out"))).prepare()


# ---- runs on Ray ------------------------------------------------------------------------------------------------


def test_an_sft_run_learns_checkpoints_exports_and_resumes_exactly(tmp_path, model_dir):
    train = write_jsonl(tmp_path / "train.jsonl", ADDITIONS)
    exp = SV.sft_experiment(model_dir, train, steps=8, batch_size=5, lr=1e-2, checkpoint_interval=4,
                            keep_last=None, seed=3)
    plan = plan_here(exp)[0]
    whole = str(tmp_path / "whole")
    result = run(plan, RunOptions(output_dir=whole, threads=1, stream=io.StringIO()))
    history = metrics(whole)
    assert [m["step"] for m in history] == list(range(1, 9))
    losses = [m["sft/loss"] for m in history]
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.3
    assert {"sft/ppl", "sft/answer_tokens", "lr", "grad_norm"} <= set(history[-1])
    assert sorted(os.listdir(os.path.join(whole, "checkpoints"))) == ["step-00000004", "step-00000008"]
    from transformers import AutoModelForCausalLM

    trained = AutoModelForCausalLM.from_pretrained(os.path.join(whole, "hf_model"))
    assert trained.config.vocab_size == AutoModelForCausalLM.from_pretrained(model_dir).config.vocab_size
    assert result.resumed_from is None

    # The same run stopped after 4 steps and resumed: the same losses, step for step.
    split = str(tmp_path / "split")
    run(plan, RunOptions(output_dir=split, threads=1, stream=io.StringIO(), max_steps=4))
    resumed = run(plan, RunOptions(output_dir=split, threads=1, stream=io.StringIO()))
    assert resumed.resumed_from and resumed.resumed_from.endswith("step-00000004")
    again = [m["sft/loss"] for m in metrics(split)]
    assert again == pytest.approx(losses, rel=1e-4)


def test_two_ranks_take_the_same_steps_as_one(tmp_path, model_dir):
    """The loss is the token mean over the whole batch, whatever the ranks and micro-batches: the second step
    (taken after the first update) and the evaluation agree."""
    train = write_jsonl(tmp_path / "train.jsonl", ADDITIONS[:23])  # 23: evaluation pads the second rank's share
    losses = []
    for ranks in (1, 2):
        exp = SV.sft_experiment(model_dir, train, steps=2, batch_size=4, micro_batch_size=1, lr=1e-2, ranks=ranks,
                                eval_file=train, eval_interval=2)
        out = str(tmp_path / f"ranks{ranks}")
        run(plan_here(exp)[0], RunOptions(output_dir=out, threads=1, stream=io.StringIO()))
        history = metrics(out)
        losses.append([history[0]["sft/loss"], history[1]["sft/loss"], history[1]["eval/loss"]])
    assert losses[1] == pytest.approx(losses[0], rel=1e-5)


def test_a_reward_model_run_learns_to_prefer_the_chosen_answers(tmp_path, model_dir):
    # The rejected answer runs on with a stray "+": a preference a 12-step run learns whatever the seed.
    pairs = [{"chosen": f"{r['prompt']}{r['answer']}", "rejected": f"{r['prompt']}{r['answer']}+"} for r in ADDITIONS]
    train = write_jsonl(tmp_path / "pairs.jsonl", pairs)
    exp = SV.sft_experiment(model_dir, train, steps=12, batch_size=5, lr=3e-3, seed=1)
    critic = dataclasses.replace(exp.roles[0], name="critic")
    exp = dataclasses.replace(exp, kind="reward_model", roles=(critic,))
    out = str(tmp_path / "rw")
    run(plan_here(exp)[0], RunOptions(output_dir=out, threads=1, stream=io.StringIO()))
    history = metrics(out)
    losses = [m["rw/loss"] for m in history]
    assert sum(losses[-3:]) / 3 < 0.5 * sum(losses[:3]) / 3
    assert min(m["rw/accuracy"] for m in history[-3:]) >= 0.8
    assert {"rw/accuracy", "rw/chosen_score", "rw/rejected_score"} <= set(history[-1])
    from transformers import AutoModelForTokenClassification

    scorer = AutoModelForTokenClassification.from_pretrained(os.path.join(out, "hf_model"))
    assert scorer.config.num_labels == 1


REWARD_RUN = """
import dataclasses, io, json, os, sys
from rlcfg.runtime import supervised as SV
from rlcfg.runtime.driver import RunOptions, plan_here, run
model_dir, train, out = sys.argv[1:]
exp = SV.sft_experiment(model_dir, train, steps=2, batch_size=5, lr=3e-3, seed=7)
exp = dataclasses.replace(exp, kind="reward_model", roles=(dataclasses.replace(exp.roles[0], name="critic"),))
run(plan_here(exp)[0], RunOptions(output_dir=out, threads=1, stream=io.StringIO()))
"""


def test_a_seeded_run_repeats_exactly_in_a_new_process(tmp_path, model_dir):
    """The scalar head trains with transformers' classifier dropout (as AReaL's and ROLL's critics do): its
    masks follow the config's seed, so two runs of one config from fresh processes log the same losses."""
    pairs = [{"chosen": f"{r['prompt']}{r['answer']}", "rejected": f"{r['prompt']}{r['answer']}+"} for r in ADDITIONS]
    train = write_jsonl(tmp_path / "pairs.jsonl", pairs)
    runs = []
    for attempt in (1, 2):
        out = str(tmp_path / f"run{attempt}")
        proc = subprocess.run([sys.executable, "-c", REWARD_RUN, model_dir, train, out], capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append([(m["rw/loss"], m["rw/chosen_score"], m["grad_norm"]) for m in metrics(out)])
    assert runs[0] == runs[1]


# ---- AReaL configs --------------------------------------------------------------------------------------------


AREAL_SFT = """\
experiment_name: tiny-sft
trial_name: t0
seed: 1
total_train_epochs: 2
tokenizer_path: {model}
cluster: {{n_nodes: 1, n_gpus_per_node: 1, fileroot: {root}}}
allocation_mode: d1p1t1
model:
  experiment_name: tiny-sft
  trial_name: t0
  path: {model}
  dtype: float32
  optimizer: {{type: adam, lr: 0.01, weight_decay: 0.0, lr_scheduler_type: cosine, warmup_steps_proportion: 0.2}}
train_dataset: {{batch_size: 5, shuffle: true, path: {train}, type: sft, max_length: 8}}
valid_dataset: {{batch_size: 5, shuffle: false, path: {train}, type: sft}}
saver: {{experiment_name: tiny-sft, trial_name: t0, fileroot: {root}, freq_epochs: 1}}
evaluator: {{experiment_name: tiny-sft, trial_name: t0, fileroot: {root}, freq_epochs: 1}}
recover: {{mode: disabled, experiment_name: tiny-sft, trial_name: t0, fileroot: {root}}}
stats_logger: {{experiment_name: tiny-sft, trial_name: t0, fileroot: {root}}}
sglang: {{mem_fraction_static: 0.5}}
"""


def _areal_sft(tmp_path, model_dir):
    train = write_jsonl(tmp_path / "train.jsonl", ADDITIONS)
    path = tmp_path / "sft.yaml"
    path.write_text(AREAL_SFT.format(model=model_dir, root=tmp_path / "files", train=train))
    return str(path)


def test_an_areal_sft_config_lowers_to_what_areal_trains(tmp_path, model_dir):
    from rlcfg.frontend import check_file
    from rlcfg.lower import lower

    result = check_file(_areal_sft(tmp_path, model_dir), [])
    assert result.errors == 0
    # Saving and evaluating by epoch run; the generation server's settings are inert without a rollout.
    assert not [d for d in result.diagnostics if d.code == "RLC118"]
    exp = lower("areal", result.config)
    assert exp.kind == "sft" and exp.role("rollout") is None
    d = exp.data
    assert (d.prompt_key, d.answer_key, d.apply_chat_template, d.max_length) == ("prompt", "answer", False, 8)
    assert exp.checkpointing.epoch_interval == 1 and exp.schedule.eval_epoch_interval == 1
    assert exp.role("actor").optimizer.warmup_proportion == 0.2


def test_rlcfg_run_of_an_areal_sft_config(tmp_path, model_dir):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "rlcfg", "run", _areal_sft(tmp_path, model_dir), "-o", str(out)],
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, RLCFG_TORCH_THREADS="1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    history = metrics(str(out))
    # 25 examples, 5 a batch: 5 steps an epoch, 2 epochs; a checkpoint and an evaluation at each epoch's end.
    assert [m["step"] for m in history] == list(range(1, 11))
    assert [m["step"] for m in history if "eval/loss" in m] == [5, 10]
    # (`rlcfg run -o DIR` keeps the run's checkpoints in DIR/checkpoints)
    assert sorted(os.listdir(out / "checkpoints")) == ["step-00000005", "step-00000010"]
    # warm-up: int(0.2 × 10 scheduler steps) = 2 steps from min_lr_ratio (0) as AReaL's cosine does (0, lr/2), then
    # the cosine decay from lr
    lrs = [m["lr"] for m in history]
    assert lrs[:3] == pytest.approx([0.0, 0.005, 0.01]) and lrs[-1] < lrs[2]
    assert os.path.isfile(out / "hf_model" / "config.json")
