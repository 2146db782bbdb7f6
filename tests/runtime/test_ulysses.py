"""Ulysses sequence parallelism on the fsdp backend: two ranks of one sequence-parallel group split each
micro-batch's columns, and must give the log-probs, values, losses, gradient norm and updated weights of one rank
running the whole micro-batch (fp32, gloo)."""

import socket

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlcfg.ir import ActorLossSpec, Lora, Optimizer, PolicyLossSpec  # noqa: E402
from rlcfg.runtime import step as S  # noqa: E402
from rlcfg.runtime.backends.fsdp import FSDPEngine, init_distributed  # noqa: E402
from rlcfg.runtime.backends.ulysses import UlyssesError, attention_spans, check_model  # noqa: E402
from tests.runtime.test_packing import VOCAB, groups  # noqa: E402

SGD = Optimizer(name="sgd", lr=0.5, grad_clip=None)
# (layout name, engine settings, batch): padded rows, packed rows, packed under a token budget, recomputation,
# LoRA adapters (PEFT's wrapper passes the layout keyword on), and prompts so much longer than the responses that the first rank's columns score nothing
LONG_PROMPTS = {"longest_prompt": 16, "longest_response": 3}
LAYOUTS = (("padded", {}, {}), ("packed", {"sequence_packing": True}, {}),
           ("budget", {"sequence_packing": True, "max_tokens_per_micro_batch": 26}, {}),
           ("checkpointed", {"gradient_checkpointing": True}, {}),
           ("lora", {"lora": Lora(rank=4, alpha=8)}, {}),
           ("long-prompts", {}, LONG_PROMPTS), ("long-prompts-packed", {"sequence_packing": True}, LONG_PROMPTS))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build(directory, kv_heads=2):
    import transformers

    torch.manual_seed(0)
    config = transformers.Qwen2Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=kv_heads,
                                      max_position_embeddings=64, tie_word_embeddings=False)
    transformers.Qwen2ForCausalLM(config).save_pretrained(str(directory))
    return str(directory)


def batch_and_cfg(shape):
    batch, _, _ = S.make_batch(groups(seed=3, **shape), pad=0)
    mask = batch["response_mask"]
    g = torch.Generator().manual_seed(5)
    batch["advantages"] = torch.randn(mask.shape, generator=g) * mask
    batch["old_logprobs"] = -3.0 * mask
    batch["ref_logprobs"] = -3.2 * mask
    batch["old_values"] = 0.1 * torch.randn(mask.shape, generator=g) * mask
    batch["returns"] = torch.randn(mask.shape, generator=g) * mask
    mini = 6
    cfg = {"ppo_epochs": 1, "mini_batch": mini, "micro_batch": 2, "denominators": S.denominators(mask, 1, mini),
           "loss": ActorLossSpec(PolicyLossSpec(clip_low=0.05, clip_high=0.05), "token-mean", kl_coef=0.5,
                                 entropy_coef=0.01)}
    return batch, cfg


def run_layouts(path: str, sequence_parallel: int) -> dict:
    """Per layout: the actor's log-probs, its metrics and weights after one PPO update, and the critic's values
    and value-loss metrics."""
    out = {}
    for name, settings, shape in LAYOUTS:
        batch, cfg = batch_and_cfg(shape)
        torch.manual_seed(7)
        actor = FSDPEngine("actor", path, optimizer=SGD, sequence_parallel=sequence_parallel, **settings)
        logprobs = actor.compute(batch, 4)["values"]
        metrics = actor.train(batch, cfg)
        torch.manual_seed(7)  # the critic's new value head: the same draw in every run
        critic = FSDPEngine("critic", path, optimizer=SGD, sequence_parallel=sequence_parallel,
                            disable_dropout=True, **settings)  # the scalar head's dropout draws per rank
        values = critic.compute(batch, 4)["values"]
        critic_metrics = critic.train(batch, dict(cfg, value_clip=0.2))
        out[name] = {"logprobs": logprobs, "metrics": metrics, "weights": actor.full_state_dict(),
                     "values": values, "critic": critic_metrics}
    return out


def _two_rank_worker(rank: int, port: int, path: str, out: str) -> None:
    import warnings

    import torch.distributed as dist

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    results = run_layouts(path, sequence_parallel=2)
    if rank == 0:
        torch.save(results, out)
    dist.destroy_process_group()


@pytest.mark.parametrize("kv_heads", [2, 1], ids=["kv-heads-split", "kv-heads-repeated"])
def test_two_sequence_parallel_ranks_train_as_one_rank(tmp_path, kv_heads):
    import torch.distributed as dist
    import torch.multiprocessing as mp

    path = build(tmp_path / "model", kv_heads)
    init_distributed(0, 1, "127.0.0.1", _free_port(), "cpu")
    try:
        one = run_layouts(path, sequence_parallel=1)
    finally:
        dist.destroy_process_group()
    out = str(tmp_path / "two.pt")
    mp.spawn(_two_rank_worker, args=(_free_port(), path, out), nprocs=2, join=True)
    two = torch.load(out, weights_only=False)
    assert one["padded"]["metrics"]["clip_frac"] > 0  # the clipped branch is exercised
    for name, _, _ in LAYOUTS:
        got, base = two[name], one[name]  # the same engine settings on one rank, the whole sequence
        torch.testing.assert_close(got["logprobs"], base["logprobs"], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(got["values"], base["values"], rtol=1e-5, atol=1e-5)
        for key in ("pg_loss", "kl_loss", "entropy", "grad_norm"):
            assert got["metrics"][key] == pytest.approx(base["metrics"][key], rel=1e-5, abs=1e-6), (name, key)
        for key in ("value_loss", "grad_norm"):
            assert got["critic"][key] == pytest.approx(base["critic"][key], rel=1e-5, abs=1e-6), (name, key)
        for key, value in got["weights"].items():
            torch.testing.assert_close(value, base["weights"][key], rtol=1e-5, atol=1e-6)
    from transformers import AutoModelForCausalLM

    fresh = AutoModelForCausalLM.from_pretrained(path).state_dict()
    assert [k for k, v in one["padded"]["weights"].items() if not torch.equal(v, fresh[k])]  # the update moved weights


def test_a_model_whose_heads_the_ranks_cannot_share_is_refused_with_a_reason():
    import transformers

    config = transformers.Qwen2Config(num_attention_heads=6, num_key_value_heads=2, hidden_size=48)
    with pytest.raises(UlyssesError, match="6 attention heads"):
        check_model(config, 4)
    with pytest.raises(UlyssesError, match="3 key/value heads"):
        check_model(transformers.Qwen2Config(num_attention_heads=12, num_key_value_heads=3, hidden_size=48), 4)
    check_model(transformers.Qwen2Config(num_attention_heads=8, num_key_value_heads=2, hidden_size=64), 4)
    check_model(transformers.Qwen2Config(num_attention_heads=8, num_key_value_heads=1, hidden_size=64), 4)
    with pytest.raises(UlyssesError, match="sliding window"):
        check_model(transformers.Qwen2Config(num_attention_heads=8, num_key_value_heads=2, hidden_size=64,
                                             use_sliding_window=True, sliding_window=16), 2)


def test_attention_spans_are_the_samples_of_a_packed_row_and_the_unpadded_columns_of_a_padded_one():
    packed = torch.tensor([[0, 1, 2, 0, 1, 0, 1, 2, 3, 0]])  # three samples, then a column of padding
    assert attention_spans(None, packed, packed=True) == (((0, 3), (3, 5), (5, 9), (9, 10)),)
    valid = torch.tensor([[0, 0, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0]])
    assert attention_spans(valid, None, packed=False) == (((2, 6),), ((0, 6),), ())
    assert attention_spans(None, None, packed=False) is None  # nothing padded: plain causal attention
