"""Where the actor's and the critic's losses are normalised: one mean over the global mini-batch, or skyrl-train's
mean of per-micro-batch reductions. Each case is the sum a backend's optimizer step sees (every micro-batch's loss
× ranks, then averaged over ranks by FSDP/DDP), checked against the formula written out by hand."""

import pytest

torch = pytest.importorskip("torch")

from rlcfg import ir  # noqa: E402
from rlcfg.runtime import algorithms as A  # noqa: E402
from rlcfg.runtime.step import denominators  # noqa: E402

RANKS, MINI, MICRO = 2, 4, 2
# Two ranks × four samples; row 5 is fully loss-masked (SkyRL masks a zero-variance group's loss this way).
MASK = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1],
                     [1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]], dtype=torch.float32)
ADV = torch.tensor([1.0, -2.0, 0.5, 3.0, -1.0, 2.0, 0.25, -0.5]).unsqueeze(1).expand(8, 4).contiguous()
g = torch.Generator().manual_seed(3)
LOGPROBS = -torch.rand(8, 4, generator=g) - 0.1
REF = -torch.rand(8, 4, generator=g) - 0.1
ENTROPY = torch.rand(8, 4, generator=g)
KL_COEF, ENT_COEF = 0.1, 0.01
MAX_SEQ_LEN = 16


def optimizer_loss(spec: ir.ActorLossSpec, mini: int = MINI, count_masked_rows: bool = False) -> float:
    """The loss whose gradient the optimizer applies, summed over the optimizer steps: each rank runs its
    micro-batches, each loss scaled by the rank count (the backends undo FSDP's averaging), then the ranks' mean."""
    mini_batches = denominators(MASK, RANKS, mini, spec.normalization == "step", count_masked_rows)
    share = MASK.shape[0] // RANKS
    total = 0.0
    for r in range(RANKS):
        for j, m0 in enumerate(range(0, share, mini)):
            starts = range(r * share + m0, r * share + m0 + mini, MICRO)
            for s in starts:
                rows = slice(s, s + MICRO)
                mb = {"response_mask": MASK[rows], "advantages": ADV[rows], "ref_logprobs": REF[rows]}
                tokens, seqs = A.loss_denominators(spec.normalization, MASK[rows], mini_batches[j], len(starts),
                                                   RANKS)
                loss, _ = A.actor_loss(LOGPROBS[rows], mb, spec, tokens, seqs, ENTROPY[rows])
                total += float(loss) * RANKS
    return total / RANKS


def masked_mean(x, m, dim=None):
    return (x * m).sum(dim) / m.sum(dim).clamp(min=1.0)


def skyrl_by_hand(loss_reduction: str) -> float:
    """skyrl-train's training step, written out: per micro-batch reduce_loss of the policy loss (on-policy PPO:
    −A per token), the KL term masked_mean(kl, mask, dim=-1).mean(), the entropy masked_mean(H, mask); the
    micro-batches' gradients summed and scaled by 1/their count; the ranks averaged."""
    kl = A.kl_estimate(LOGPROBS, REF, "k3")
    per_rank = []
    for r in range(RANKS):
        micro = []
        for s in range(r * MINI, (r + 1) * MINI, MICRO):
            m, rows = MASK[s:s + MICRO], slice(s, s + MICRO)
            pg = -ADV[rows]
            if loss_reduction == "token_mean":
                policy = masked_mean(pg, m)
            elif loss_reduction == "seq_mean_token_sum_norm":  # Dr. GRPO: each sequence's sum over max_seq_len
                policy = ((pg * m).sum(-1) / MAX_SEQ_LEN).mean()
            else:
                policy = masked_mean(pg, m, -1).mean()
            kl_term = masked_mean(kl[rows], m, -1).mean()
            micro.append(policy + KL_COEF * kl_term - ENT_COEF * masked_mean(ENTROPY[rows], m))
        per_rank.append(sum(micro) / len(micro))
    return float(sum(per_rank) / RANKS)


def skyrl_spec(aggregation: str, length_norm: int | None = None) -> ir.ActorLossSpec:
    return ir.ActorLossSpec(aggregation=aggregation, kl_coef=KL_COEF, entropy_coef=ENT_COEF,
                            normalization="micro-batch", kl_aggregation="seq-mean-token-mean",
                            entropy_aggregation="token-mean", length_norm=length_norm)


@pytest.mark.parametrize("loss_reduction,aggregation,length_norm", [
    ("token_mean", "token-mean", None), ("sequence_mean", "seq-mean-token-mean", None),
    ("seq_mean_token_sum_norm", "seq-mean-token-sum", MAX_SEQ_LEN)])
def test_micro_batch_normalisation_is_skyrls_formula(loss_reduction, aggregation, length_norm):
    assert optimizer_loss(skyrl_spec(aggregation, length_norm)) == \
        pytest.approx(skyrl_by_hand(loss_reduction), rel=1e-6)


@pytest.mark.parametrize("aggregation,length_norm", [("seq-mean-token-mean", None),
                                                     ("seq-mean-token-sum", MAX_SEQ_LEN)])
def test_the_skyrl_packages_mini_batch_sequence_reductions_count_the_masked_rows(aggregation, length_norm):
    """skyrl's apply_loss_reduction_to_advantages_minibatch divides by the mini-batch's batch_size, the rows its
    filters masked out of the loss included (row 5 here); the ranks' gradients are averaged."""
    per_token = (-ADV * MASK).sum(-1)
    per_seq = per_token / MAX_SEQ_LEN if length_norm else per_token / MASK.sum(-1).clamp(min=1.0)
    policy_only = ir.ActorLossSpec(aggregation=aggregation, length_norm=length_norm)
    assert optimizer_loss(policy_only, count_masked_rows=True) == pytest.approx(float(per_seq.sum() / 8), rel=1e-6)
    # Counting only the rows left in the loss divides by 7.
    assert optimizer_loss(policy_only) == pytest.approx(float(per_seq.sum() / 7), rel=1e-6)


def test_mini_batch_normalisation_is_one_mean_over_the_global_mini_batch():
    spec = ir.ActorLossSpec(aggregation="token-mean")
    # With MINI equal to each rank's share, the global mini-batch is the whole batch.
    assert optimizer_loss(spec) == pytest.approx(float(masked_mean(-ADV, MASK)), rel=1e-6)
    # The two scopes differ on this batch, so the SkyRL test above tells them apart.
    assert optimizer_loss(ir.ActorLossSpec(aggregation="token-mean", normalization="micro-batch")) != \
        pytest.approx(optimizer_loss(spec), rel=1e-3)


def rlinf_valid_token_scale_by_hand(mini: int, tokens: float | None = None) -> list[float]:
    """RLinf's Megatron actor with use_valid_token_scale, written out per optimizer step: each micro-batch's token
    mean (policy, KL and entropy terms) × its tokens / `tokens` × ranks × micro-batches, then Megatron's mean over
    the micro-batches and the ranks' mean. `tokens`: the collocated actor's step tokens all-reduced over the ranks
    (_setup_valid_token_scale with the batch; None), or the pipelined actor's estimate made without it."""
    kl = A.kl_estimate(LOGPROBS, REF, "k3")
    tokens = float(MASK.sum()) if tokens is None else tokens
    share = MASK.shape[0] // RANKS
    steps = []
    for m0 in range(0, share, mini):
        per_rank = []
        for r in range(RANKS):
            micro = []
            starts = range(r * share + m0, r * share + m0 + mini, MICRO)
            for s in starts:
                m, rows = MASK[s:s + MICRO], slice(s, s + MICRO)
                loss = masked_mean(-ADV[rows], m) + KL_COEF * masked_mean(kl[rows], m) \
                    - ENT_COEF * masked_mean(ENTROPY[rows], m)
                micro.append(loss * float(m.sum()) / tokens * RANKS * len(starts))
            per_rank.append(sum(micro) / len(micro))
        steps.append(float(sum(per_rank) / RANKS))
    return steps


def test_step_normalisation_is_rlinfs_use_valid_token_scale_over_several_mini_batches():
    spec = ir.ActorLossSpec(aggregation="token-mean", kl_coef=KL_COEF, entropy_coef=ENT_COEF, normalization="step")
    by_hand = rlinf_valid_token_scale_by_hand(mini=2)
    assert len(by_hand) == 2
    assert optimizer_loss(spec, mini=2) == pytest.approx(sum(by_hand), rel=1e-6)
    # Each mini-batch weighs by its share of the step's tokens: unlike a mean over the mini-batch's own tokens.
    own = ir.ActorLossSpec(aggregation="token-mean", kl_coef=KL_COEF, entropy_coef=ENT_COEF)
    assert optimizer_loss(own, mini=2) != pytest.approx(optimizer_loss(spec, mini=2), rel=1e-3)
    # With one mini-batch per step the two are one.
    assert optimizer_loss(spec) == pytest.approx(optimizer_loss(own), rel=1e-6)


@pytest.mark.parametrize("mini", [MINI, 2])
def test_a_sequence_mean_over_a_length_is_rlinfs_estimated_token_scale(mini):
    """rlinf/lower.estimated_token_norm: every term's token sums over the mini-batch's sequences, each divided by
    the response limit ÷ the data-parallel ranks."""
    response_limit = 12
    spec = ir.ActorLossSpec(aggregation="seq-mean-token-sum", kl_coef=KL_COEF, entropy_coef=ENT_COEF,
                            normalization="mini-batch", length_norm=response_limit / RANKS,
                            length_norm_all_terms=True)
    # the pipelined actor's estimate: the longest response × a rank's samples of the mini-batch
    by_hand = rlinf_valid_token_scale_by_hand(mini, tokens=response_limit * mini)
    assert optimizer_loss(spec, mini=mini, count_masked_rows=True) == pytest.approx(sum(by_hand), rel=1e-6)
    # dividing the policy loss alone (SkyRL's seq_mean_token_sum_norm) is another loss
    policy_only = ir.ActorLossSpec(aggregation="seq-mean-token-sum", kl_coef=KL_COEF, entropy_coef=ENT_COEF,
                                   normalization="mini-batch", length_norm=response_limit / RANKS)
    assert optimizer_loss(policy_only, mini=mini, count_masked_rows=True) != pytest.approx(sum(by_hand), rel=1e-3)


def test_a_fully_masked_row_counts_in_skyrls_sequence_mean_only():
    rows = MASK[4:6]
    mini = denominators(MASK, RANKS, MINI)[0]
    assert A.loss_denominators("micro-batch", rows, mini, 2, RANKS) == (2.0 * 2 * RANKS, 2.0 * 2 * RANKS)
    assert A.loss_denominators("mini-batch", rows, mini, 2, RANKS) == mini
    with pytest.raises(ValueError, match="normalization"):
        A.loss_denominators("batch", rows, mini, 2, RANKS)


def test_the_algorithm_hands_its_normalisation_to_the_actor_loss():
    alg = ir.Algorithm(loss_normalization="micro-batch", kl_loss_aggregation="seq-mean-token-mean",
                       entropy_aggregation="token-mean")
    spec = alg.actor_loss_spec()
    assert (spec.normalization, spec.kl_aggregation, spec.entropy_aggregation) == \
        ("micro-batch", "seq-mean-token-mean", "token-mean")


def test_shuffle_seed_reorders_each_shard_as_rlinfs_get_iterator_k_split():
    from rlcfg.runtime.step import shuffle_within_shards

    shards, share, seed = 2, 5, 1234
    batch = {"response_mask": torch.arange(shards * share).float().unsqueeze(1).expand(-1, 3),
             "advantages": torch.arange(shards * share).float()}
    out = shuffle_within_shards(batch, shards, seed)
    # RLinf: g = torch.Generator(); g.manual_seed(shuffle_seed); indices = torch.randperm(batch_size, generator=g),
    # on each rank's own share, the same seed (actor.seed) every step.
    g = torch.Generator()
    g.manual_seed(seed)
    indices = torch.randperm(share, generator=g)
    assert out["advantages"].tolist() == [float(r * share + i) for r in range(shards) for i in indices.tolist()]
    assert torch.equal(out["response_mask"][:, 0], out["advantages"])
    assert out["advantages"].tolist() != batch["advantages"].tolist()
    assert shuffle_within_shards(batch, shards, seed)["advantages"].tolist() == out["advantages"].tolist()


def _batch_of_lengths(lengths: list[int]) -> dict:
    width = max(lengths)
    attention = (torch.arange(width).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).long()
    return {"attention_mask": attention, "response_mask": attention.float(),
            "row": torch.arange(len(lengths))}


def test_balance_by_length_deals_the_longest_first_to_the_lightest_rank():
    from rlcfg.runtime.step import balance_by_length

    # Lengths 9 8 7 6 3 3 2 1 over 2 ranks of 4 rows, tokens so far in brackets: 9→0 (0 = 0, the lower rank),
    # 8→1 (0), 7→1 (8 < 9), 6→0 (9 < 15), 3→0 (15 = 15), 3→1 (15 < 18), 2→0 (18 = 18; rank 0 is full), 1→1.
    out = balance_by_length(_batch_of_lengths([3, 9, 1, 6, 8, 3, 2, 7]), 2)
    assert out["row"].tolist() == [1, 3, 0, 6, 4, 7, 5, 2]
    assert out["attention_mask"].sum(dim=1).tolist() == [9, 6, 3, 2, 8, 7, 3, 1]
    assert torch.equal(out["response_mask"], out["attention_mask"].float())  # every tensor follows its row


def _chatlearn_data_balance():
    """ChatLearn's own RolloutManager.data_balance (chatlearn/models/agent/rollout_manager.py, at the commit rlcfg's
    ChatLearn main is judged by), skipped without MIRROR_ROOT."""
    import ast
    import heapq
    import os
    import subprocess
    import textwrap

    root = os.environ.get("MIRROR_ROOT")
    if not root:
        pytest.skip("MIRROR_ROOT is not set")
    text = subprocess.run(["git", "-C", os.path.join(root, "alibaba+ChatLearn", "repo"), "show",
                           "b7af31a972eb6c420ef0b5c04ea920820d68f784:chatlearn/models/agent/rollout_manager.py"],
                          capture_output=True, text=True, check=True).stdout
    method = next(node for node in ast.walk(ast.parse(text))
                  if isinstance(node, ast.FunctionDef) and node.name == "data_balance")
    source = textwrap.dedent(ast.get_source_segment(text, method))
    namespace = {"heapq": heapq, "Dict": dict, "List": list}
    exec(compile(source, "rollout_manager.py", "exec"), namespace)  # the framework's own function, as the oracle
    return namespace["data_balance"]


@pytest.mark.parametrize("shards", [1, 2, 4])
def test_balance_by_length_agrees_with_chatlearns_rollout_manager(shards):
    from rlcfg.runtime.step import balance_by_length

    theirs = _chatlearn_data_balance()
    generator = torch.Generator().manual_seed(shards)
    for _ in range(20):
        # Few distinct lengths, so that ties (equal lengths, equal token totals) are common.
        lengths = torch.randint(1, 6, (shards * 6,), generator=generator).tolist()
        data = [{"row": i, "all_token_length": n} for i, n in enumerate(lengths)]
        dealt = [item["row"] for item in theirs(None, data, shards, len(data) / shards)]
        share = len(data) // shards
        # ChatLearn's trainer gives data-parallel rank r the r-th contiguous share, in order; which rank holds
        # which share does not change what an optimizer step trains on.
        expected = sorted(tuple(dealt[r * share:(r + 1) * share]) for r in range(shards))
        ours = balance_by_length(_batch_of_lengths(lengths), shards)["row"].tolist()
        assert sorted(tuple(ours[r * share:(r + 1) * share]) for r in range(shards)) == expected, lengths
