"""Context parallelism on the megatron backend (rlcfg.runtime.backends.megatron_cp): two ranks of one
context-parallel group, each holding two of the four chunks of every sequence, must give the log-probs, losses,
gradient norm and updated weights of one rank holding the whole sequence (fp32, gloo, megatron-core on CPU)."""

import dataclasses
import os
import socket

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("megatron.core")

from rlcfg.ir import ActorLossSpec, PolicyLossSpec  # noqa: E402
from tests.runtime.test_packing import _megatron_batch, build  # noqa: E402

# (layout name, role settings): padded rows, packed rows under a token budget, and full recomputation (whose
# backward pass gathers the keys and values again)
LAYOUTS = (("padded", {}), ("packed", {"sequence_packing": True, "max_tokens_per_micro_batch": 40}),
           ("recomputed", {"gradient_checkpointing": True}))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _batch():
    """test_packing's Megatron batch, with a clipped, KL- and entropy-regularised loss."""
    batch, cfg = _megatron_batch()
    batch["ref_logprobs"] = -3.2 * batch["response_mask"]
    cfg["loss"] = ActorLossSpec(PolicyLossSpec(clip_low=0.05, clip_high=0.05), "token-mean", kl_coef=0.5,
                                entropy_coef=0.01)
    return batch, cfg


def run_layouts(path: str, cp: int, world: int) -> dict:
    from rlcfg.runtime.backends import megatron as M
    from tests.runtime.test_megatron import _role, spec_of
    from tests.runtime.test_packing import _fp32_sgd
    from transformers import AutoModelForCausalLM

    spec = spec_of(AutoModelForCausalLM.from_pretrained(path))
    batch, cfg = _batch()
    out = {}
    for name, settings in LAYOUTS:
        role = _fp32_sgd(_role(1))
        role = dataclasses.replace(role, parallelism=dataclasses.replace(role.parallelism, cp=cp), **settings)
        engine = M.MegatronEngine("actor", path, M.lower_role(role, spec, world, total_optimizer_steps=10))
        logprobs = engine.compute(batch, 4)["values"]
        metrics = engine.train(batch, cfg)
        out[name] = {"logprobs": logprobs, "metrics": metrics, "weights": engine.full_state_dict()}
    return out


def _two_rank_worker(rank: int, port: int, path: str, out: str) -> None:
    import warnings

    import torch.distributed as dist

    from rlcfg.runtime.backends import MEGATRON_ON_CPU_ENV

    os.environ[MEGATRON_ON_CPU_ENV] = "1"
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    results = run_layouts(path, cp=2, world=2)
    if rank == 0:
        torch.save(results, out)
    dist.destroy_process_group()


def test_two_context_parallel_ranks_train_as_one_rank(tmp_path):
    import torch.multiprocessing as mp
    from megatron.core import parallel_state

    from rlcfg.runtime.backends import megatron_cpu as C

    import torch.distributed as dist

    from rlcfg.runtime.backends.fsdp import init_distributed

    path = build(tmp_path / "model")
    init_distributed(0, 1, "127.0.0.1", _free_port(), "cpu")
    try:
        with C.cuda_as_cpu():
            one = run_layouts(path, cp=1, world=1)
    finally:
        parallel_state.destroy_model_parallel()
        dist.destroy_process_group()
    out = str(tmp_path / "two.pt")
    mp.spawn(_two_rank_worker, args=(_free_port(), path, out), nprocs=2, join=True)
    two = torch.load(out, weights_only=False)
    assert one["padded"]["metrics"]["clip_frac"] > 0  # the clipped branch is exercised
    for name, _ in LAYOUTS:
        got, base = two[name], one[name]
        torch.testing.assert_close(got["logprobs"], base["logprobs"], rtol=1e-5, atol=1e-5)
        for key in ("pg_loss", "kl_loss", "entropy", "grad_norm"):
            assert got["metrics"][key] == pytest.approx(base["metrics"][key], rel=1e-5, abs=1e-6), (name, key)
        for key, value in got["weights"].items():
            torch.testing.assert_close(value, base["weights"][key], rtol=1e-5, atol=1e-5)
