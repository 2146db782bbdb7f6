"""`rlcfg run` with a Megatron-trained actor, end to end on Ray: megatron-core's schedule, DDP and optimizer on CPU
(RLCFG_MEGATRON_ON_CPU=1, see rlcfg.runtime.backends.megatron_cpu) with gloo standing in for NCCL.

The same quickstart, seed and sampling as with FSDP give the same rollouts step for step, which pins the
megatron lowering, the weight conversion and the loss scaling to the FSDP backend's; two data-parallel ranks
resume from megatron-core's distributed checkpoint exactly, and two pipeline stages make the same updates."""

from __future__ import annotations

import dataclasses
import io

import pytest

pytest.importorskip("megatron.core")
pytest.importorskip("torch")
pytest.importorskip("ray")
pytest.importorskip("transformers")

from rlcfg.ir import Parallelism  # noqa: E402
from rlcfg.runtime import quickstart  # noqa: E402
from rlcfg.runtime.driver import RunOptions, run  # noqa: E402

pytestmark = pytest.mark.usefixtures("ray_instance")


@pytest.fixture(scope="module")
def qs(tmp_path_factory):
    """The quickstart with its warm-started model, built once for the module (a random model scores 0
    everywhere, and gradient norms of 0 would compare equal whatever the backends did), answering in one token:
    over longer responses the backends' last-bit differences in the weights flip a sampled token within a few
    steps, and the runs would no longer be comparable step for step. One-token answers score on the products
    below 10."""
    files = str(tmp_path_factory.mktemp("quickstart-files"))

    def experiment(out, **kwargs):
        return quickstart.experiment(out, warm_start=True, files_dir=files, max_new_tokens=1, **kwargs)

    return experiment


@pytest.fixture(autouse=True)
def megatron_on_cpu(monkeypatch):
    monkeypatch.setenv("RLCFG_MEGATRON_ON_CPU", "1")


def megatron_actor(exp, **parallel):
    return dataclasses.replace(exp, roles=tuple(
        dataclasses.replace(r, backend="megatron", parallelism=Parallelism(**parallel)) if r.name == "actor" else r
        for r in exp.roles))


def go(exp, out, **options):
    return run(quickstart.plan_for(exp), RunOptions(output_dir=str(out), threads=1, stream=io.StringIO(), **options))


def test_a_megatron_actor_follows_the_fsdp_actor_step_for_step(tmp_path, qs):
    histories = {}
    for backend in ("fsdp", "megatron"):
        exp = qs(str(tmp_path / backend), steps=6, checkpoint_interval=None)
        if backend == "megatron":
            exp = megatron_actor(exp)
        histories[backend] = go(exp, tmp_path / backend, resume=None).history
    fsdp, megatron = histories["fsdp"], histories["megatron"]
    assert [m["reward/mean"] for m in megatron] == [m["reward/mean"] for m in fsdp]
    assert [m["data/prompt_indices"] for m in megatron] == [m["data/prompt_indices"] for m in fsdp]
    for a, b in zip(megatron, fsdp):
        assert a["actor/grad_norm"] == pytest.approx(b["actor/grad_norm"], rel=1e-3)
        assert a["actor/lr"] == pytest.approx(b["actor/lr"])


def test_two_megatron_ranks_resume_exactly_and_pipeline_alike(tmp_path, qs):
    """dp=2 runs megatron-core's distributed optimizer; the run stops after 2 of 4 steps (a checkpoint at 2) and
    a second invocation resumes: steps 3 and 4 are those of an uninterrupted run. pp=2 follows dp=2."""
    whole = megatron_actor(qs(str(tmp_path / "whole"), steps=4, actor_ranks=2,
                                                 checkpoint_interval=2), tp=1)
    reference = go(whole, tmp_path / "whole", resume=None).history

    split = megatron_actor(qs(str(tmp_path / "split"), steps=4, actor_ranks=2,
                                                 checkpoint_interval=2), tp=1)
    first = go(split, tmp_path / "split", resume=None, max_steps=2)
    assert [m["step"] for m in first.history] == [1, 2]
    second = go(split, tmp_path / "split")
    assert second.resumed_from and second.resumed_from.endswith("step-00000002")
    resumed = [m for m in second.history if m["step"] > 2]
    assert [m["step"] for m in resumed] == [3, 4]
    for a, b in zip(resumed, reference[2:]):
        assert a["data/prompt_indices"] == b["data/prompt_indices"]
        assert a["reward/mean"] == b["reward/mean"]
        assert a["actor/grad_norm"] == pytest.approx(b["actor/grad_norm"], rel=1e-4)

    # The same two ranks as two pipeline stages (one layer each, activations sent between them over gloo) make
    # the same updates.
    staged = megatron_actor(qs(str(tmp_path / "pp"), steps=4, actor_ranks=2,
                                                  checkpoint_interval=None), pp=2)
    pipelined = go(staged, tmp_path / "pp", resume=None).history
    assert [m["reward/mean"] for m in pipelined] == [m["reward/mean"] for m in reference]
    for a, b in zip(pipelined, reference):
        assert a["actor/grad_norm"] == pytest.approx(b["actor/grad_norm"], rel=1e-4)


def test_interleaved_pipeline_stages_make_the_fsdp_updates(tmp_path, qs):
    """Two ranks as two pipeline stages of two virtual chunks each (a 4-layer model, one layer per chunk) give
    the FSDP actor's rollouts and gradient norms, and the run's final checkpoint holds every chunk."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    # A random four-layer model still hits some of the one-digit products, so the gradients compared below are
    # not all 0.
    base = qs(str(tmp_path / "base"), steps=3, actor_ranks=2, checkpoint_interval=None)
    source = base.role("actor").model.path
    deeper = str(tmp_path / "four-layers")
    config = Qwen2Config.from_pretrained(source).to_dict()
    config.update(num_hidden_layers=4)
    config.pop("layer_types", None)  # sized for the two layers it was saved with
    torch.manual_seed(0)
    Qwen2ForCausalLM(Qwen2Config(**config)).save_pretrained(deeper)
    model = dataclasses.replace(base.role("actor").model, path=deeper, tokenizer=source)

    histories = {}
    for name, backend, parallel in (("fsdp", "fsdp", Parallelism()), ("vpp", "megatron", Parallelism(pp=2, vpp=2))):
        exp = dataclasses.replace(base, roles=tuple(
            dataclasses.replace(r, model=model, **({"backend": backend, "parallelism": parallel}
                                                   if r.name == "actor" else {})) if r.model else r
            for r in base.roles))
        histories[name] = go(exp, tmp_path / name, resume=None).history
    assert [m["reward/mean"] for m in histories["vpp"]] == [m["reward/mean"] for m in histories["fsdp"]]
    for a, b in zip(histories["vpp"], histories["fsdp"]):
        assert a["actor/grad_norm"] == pytest.approx(b["actor/grad_norm"], rel=1e-4)
    assert (tmp_path / "vpp" / "checkpoints" / "step-00000003" / "actor").is_dir()


def test_megatron_sft_follows_the_fsdp_sft_step_for_step(tmp_path, qs):
    """SFT on the Megatron backend (AReaL's megatron allocation modes): one schedule pass per step over the batch's
    answer tokens, tensor- or data-parallel, makes the FSDP backend's updates."""
    from rlcfg.runtime.supervised import sft_experiment

    base = qs(str(tmp_path / "quickstart"), steps=1)
    model, train = base.role("actor").model.path, base.data.train_files[0]
    histories = {}
    for name, parallel in (("fsdp", None), ("megatron-tp", {"tp": 2}), ("megatron-dp", {})):
        exp = sft_experiment(model, train, steps=3, batch_size=8, micro_batch_size=2, lr=1e-3, ranks=2)
        if parallel is not None:
            exp = megatron_actor(exp, **parallel)
        histories[name] = go(exp, tmp_path / name, resume=None).history
    fsdp = histories["fsdp"]
    for name in ("megatron-tp", "megatron-dp"):
        ours = histories[name]
        assert [m["data/prompt_indices"] for m in ours] == [m["data/prompt_indices"] for m in fsdp]
        assert [m["sft/answer_tokens"] for m in ours] == [m["sft/answer_tokens"] for m in fsdp]
        for a, b in zip(ours, fsdp):
            assert a["sft/loss"] == pytest.approx(b["sft/loss"], rel=1e-4), name
            assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-3), name
            assert a["lr"] == pytest.approx(b["lr"])
