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


def optimizer_loss(spec: ir.ActorLossSpec) -> float:
    """The loss whose gradient the optimizer applies: each rank runs its micro-batches, each loss scaled by the
    rank count (the backends undo FSDP's averaging), then the ranks' mean."""
    mini_batches = denominators(MASK, RANKS, MINI)
    share = MASK.shape[0] // RANKS
    total = 0.0
    for r in range(RANKS):
        for j, m0 in enumerate(range(0, share, MINI)):
            starts = range(r * share + m0, r * share + m0 + MINI, MICRO)
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
            policy = masked_mean(pg, m) if loss_reduction == "token_mean" else masked_mean(pg, m, -1).mean()
            kl_term = masked_mean(kl[rows], m, -1).mean()
            micro.append(policy + KL_COEF * kl_term - ENT_COEF * masked_mean(ENTROPY[rows], m))
        per_rank.append(sum(micro) / len(micro))
    return float(sum(per_rank) / RANKS)


def skyrl_spec(aggregation: str) -> ir.ActorLossSpec:
    return ir.ActorLossSpec(aggregation=aggregation, kl_coef=KL_COEF, entropy_coef=ENT_COEF,
                            normalization="micro-batch", kl_aggregation="seq-mean-token-mean",
                            entropy_aggregation="token-mean")


@pytest.mark.parametrize("loss_reduction,aggregation", [("token_mean", "token-mean"),
                                                        ("sequence_mean", "seq-mean-token-mean")])
def test_micro_batch_normalisation_is_skyrls_formula(loss_reduction, aggregation):
    assert optimizer_loss(skyrl_spec(aggregation)) == pytest.approx(skyrl_by_hand(loss_reduction), rel=1e-6)


def test_mini_batch_normalisation_is_one_mean_over_the_global_mini_batch():
    spec = ir.ActorLossSpec(aggregation="token-mean")
    # With MINI equal to each rank's share, the global mini-batch is the whole batch.
    assert optimizer_loss(spec) == pytest.approx(float(masked_mean(-ADV, MASK)), rel=1e-6)
    # The two scopes differ on this batch, so the SkyRL test above tells them apart.
    assert optimizer_loss(ir.ActorLossSpec(aggregation="token-mean", normalization="micro-batch")) != \
        pytest.approx(optimizer_loss(spec), rel=1e-3)


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
