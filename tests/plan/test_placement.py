"""Placement, rank grids, the batch schedule and the placement rules (RLC400-RLC404)."""

from __future__ import annotations

import dataclasses
import re

from rlcfg.plan import build_plan
from rlcfg.plan.model import ClusterShape
from rlcfg.plan.render import ranges, render_text
from tests.plan.factory import experiment, reward_rule, rollout, trainer


def codes(diags, code):
    return [d for d in diags if d.code == code]


def gpus(plan, role):
    return plan.placement(role).gpus


# ---- where roles land ----------------------------------------------------------------------------------------

def test_colocated_roles_share_one_placement_group():
    plan, diags = build_plan(experiment(trainer(), rollout(tp=2), trainer("reference", trains=False), reward_rule(),
                                        colocation=(("rollout", "actor", "reference"),)))
    assert gpus(plan, "actor") == gpus(plan, "rollout") == gpus(plan, "reference") == tuple(range(8))
    [group] = [g for g in plan.groups if len(g.roles) > 1]
    assert group.roles == ("actor", "rollout", "reference") and group.gpus == tuple(range(8))
    assert plan.placement("reward").gpus == () and plan.placement("reward").cpus == 4
    assert not [d for d in diags if d.code.startswith("RLC4")]


def test_separate_roles_are_packed_onto_the_next_free_gpus():
    plan, _ = build_plan(experiment(trainer(gpus=4), rollout(gpus=4)))
    assert gpus(plan, "actor") == (0, 1, 2, 3) and gpus(plan, "rollout") == (4, 5, 6, 7)
    assert plan.cluster.gpus == 8


def test_a_role_that_spans_nodes_starts_on_a_node_boundary():
    plan, _ = build_plan(experiment(trainer(gpus=4), rollout(gpus=16)))
    assert gpus(plan, "rollout") == tuple(range(8, 24))
    assert plan.cluster.nodes == 3


def test_a_role_that_fits_on_one_node_is_not_split_over_two():
    plan, _ = build_plan(experiment(trainer(gpus=6), rollout(gpus=4)))
    assert gpus(plan, "rollout") == (8, 9, 10, 11)


def test_explicit_gpu_ids_are_honoured_and_others_step_around_them():
    plan, diags = build_plan(experiment(trainer(gpus=2), rollout(gpus=4, ids=(0, 1, 2, 3))))
    assert gpus(plan, "rollout") == (0, 1, 2, 3) and gpus(plan, "actor") == (4, 5)
    assert [d.code for d in diags if d.code.startswith("RLC40") and d.code != "RLC404"] == []


def test_gpus_per_node_pinned_by_the_dialect():
    plan, _ = build_plan(experiment(trainer(gpus=8, per_node=4), rollout(gpus=4)), gpus_per_node=8)
    assert gpus(plan, "actor") == (0, 1, 2, 3, 8, 9, 10, 11)
    assert gpus(plan, "rollout") == (4, 5, 6, 7)


# ---- the cluster ---------------------------------------------------------------------------------------------

def test_smallest_cluster_is_assumed_and_noted():
    plan, _ = build_plan(experiment(trainer(gpus=16), rollout(gpus=16), colocation=(("actor", "rollout"),)))
    assert (plan.cluster.nodes, plan.cluster.gpus_per_node) == (2, 8)
    assert any("--nodes" in n for n in plan.notes) and any("--gpus-per-node" in n for n in plan.notes)


def test_the_config_cluster_is_used_and_flags_override_it():
    exp = experiment(trainer(gpus=8), rollout(gpus=8), colocation=(("actor", "rollout"),), nodes=2, gpus_per_node=4)
    plan, diags = build_plan(exp)
    assert (plan.cluster.nodes, plan.cluster.gpus_per_node) == (2, 4)
    assert not any("nodes" in n for n in plan.notes)
    plan, _ = build_plan(exp, nodes=1, gpus_per_node=8)
    assert (plan.cluster.nodes, plan.cluster.gpus_per_node) == (1, 8)
    plan, _ = build_plan(exp, cluster=ClusterShape(nodes=4, gpus_per_node=2))
    assert (plan.cluster.nodes, plan.cluster.gpus_per_node) == (4, 2)


# ---- rank grids ---------------------------------------------------------------------------------------------

def test_megatron_ranks_follow_tp_cp_dp_pp_order():
    plan, _ = build_plan(experiment(trainer(gpus=16, backend="megatron", tp=2, cp=2, pp=2)))
    p = plan.placement("actor")
    assert p.dp == 2
    coords = [dict(r.coords) for r in p.ranks]
    assert [c["tp"] for c in coords[:4]] == [0, 1, 0, 1]
    assert [c["cp"] for c in coords[:4]] == [0, 0, 1, 1]
    assert [c["dp"] for c in coords[:8]] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [c["pp"] for c in coords] == [0] * 8 + [1] * 8
    # Every coordinate tuple appears exactly once.
    assert len({tuple(sorted(c.items())) for c in coords}) == 16


def test_megatron_expert_parallel_coordinates():
    plan, diags = build_plan(experiment(trainer(gpus=8, backend="megatron", ep=4, model="/m/unknown")))
    eps = [dict(r.coords)["ep"] for r in plan.placement("actor").ranks]
    assert eps == [0, 1, 2, 3, 0, 1, 2, 3]
    assert not codes(diags, "RLC400")


def test_hsdp_shard_groups_and_ulysses():
    plan, _ = build_plan(experiment(trainer(gpus=16, fsdp_shard=8, sp=2)))
    p = plan.placement("actor")
    assert p.dp == 8
    r9 = dict(p.ranks[9].coords)
    assert r9 == {"dp": 4, "sp": 1, "replica": 1, "shard": 1}


def test_fsdp_tensor_parallel_groups_share_one_data_parallel_rank():
    # AReaL 1.0's FSDP engine takes t > 1: a (dp, sp, tp) mesh with tp fastest, so 8 GPUs at TP 2 × SP 2 are
    # 2 data-parallel ranks, not 8 or 4.
    plan, diags = build_plan(experiment(trainer(gpus=8, tp=2, sp=2), global_batch=128))
    p = plan.placement("actor")
    assert p.dp == 2
    assert [dict(r.coords) for r in p.ranks[:6]] == [
        {"dp": 0, "sp": 0, "tp": 0}, {"dp": 0, "sp": 0, "tp": 1}, {"dp": 0, "sp": 1, "tp": 0},
        {"dp": 0, "sp": 1, "tp": 1}, {"dp": 1, "sp": 0, "tp": 0}, {"dp": 1, "sp": 0, "tp": 1}]
    assert (plan.batch.dp, plan.batch.samples_per_rank) == (2, 64)
    assert not codes(diags, "RLC400")
    text = render_text(plan, show_gpu_map=True)
    assert "DP 2 × Ulysses SP 2 × TP 2" in text and re.search(r"actor data-parallel ranks +2\n", text)


def test_fsdp_tensor_parallel_size_that_does_not_divide_the_gpus():
    _, diags = build_plan(experiment(trainer(gpus=6, tp=4)))
    [d] = codes(diags, "RLC400")
    assert d.path == "roles.actor" and "tensor parallel size (4)" in d.message and "4, 8" in d.hint


def test_rollout_engines_by_tensor_parallel_size():
    plan, _ = build_plan(experiment(trainer(), rollout(gpus=8, tp=4), colocation=(("actor", "rollout"),)))
    p = plan.placement("rollout")
    assert p.dp == 2
    assert [dict(r.coords)["engine"] for r in p.ranks] == [0] * 4 + [1] * 4
    assert [dict(r.coords)["tp"] for r in p.ranks] == [0, 1, 2, 3] * 2


# ---- batch schedule ------------------------------------------------------------------------------------------

def test_batch_schedule():
    plan, diags = build_plan(experiment(trainer(gpus=8, micro=4), rollout(), colocation=(("actor", "rollout"),),
                                        prompts=64, group=8, global_batch=128, steps=10))
    b = plan.batch
    assert (b.samples_per_step, b.optimizer_steps_per_step, b.actor_dp) == (512, 4, 8)
    assert (b.samples_per_rank, b.micro_batch_size, b.grad_accumulation) == (16, 4, 4)
    assert b.total_steps == 10
    assert not codes(diags, "RLC300")


def test_a_reward_model_splits_its_batch_over_the_critic_ranks():
    # Reward-model training has no actor: the critic is the trained model, and its DP ranks split the batch.
    exp = dataclasses.replace(experiment(trainer("critic", gpus=8, micro=4), prompts=128, group=1, global_batch=128),
                              kind="reward_model")
    plan, diags = build_plan(exp)
    b = plan.batch
    assert (b.trained_role, b.dp, b.samples_per_rank, b.grad_accumulation) == ("critic", 8, 16, 4)
    text = render_text(plan)
    assert "critic data-parallel ranks" in text and "actor data-parallel" not in text
    assert not codes(diags, "RLC300")


def test_a_reward_model_batch_that_does_not_split_is_reported_on_the_critic():
    exp = dataclasses.replace(experiment(trainer("critic", gpus=6), prompts=128, group=1, global_batch=128),
                              kind="reward_model")
    [d] = codes(build_plan(exp)[1], "RLC300")
    assert d.path == "roles.critic" and "critic's 6 data-parallel ranks" in d.message


def test_batch_that_does_not_split_over_dp_ranks():
    _, diags = build_plan(experiment(trainer(gpus=6), rollout(gpus=6), colocation=(("actor", "rollout"),),
                                     global_batch=128))
    [d] = codes(diags, "RLC300")
    assert "6 data-parallel ranks" in d.message


# ---- rules ------------------------------------------------------------------------------------------------------

def test_rlc400_rollout_tp_does_not_divide():
    _, diags = build_plan(experiment(trainer(gpus=6), rollout(gpus=6, tp=4), colocation=(("actor", "rollout"),)))
    [d] = codes(diags, "RLC400")
    assert d.path == "roles.rollout" and "(4)" in d.message and "4, 8" in d.hint


def test_rlc400_megatron_model_parallel_does_not_divide():
    _, diags = build_plan(experiment(trainer(gpus=12, backend="megatron", tp=2, pp=4)))
    [d] = codes(diags, "RLC400")
    assert d.path == "roles.actor" and "TP × CP × PP (8)" in d.message


def test_rlc401_roles_overlap_without_being_colocated():
    _, diags = build_plan(experiment(trainer(gpus=4, ids=(0, 1, 2, 3)), rollout(gpus=4, ids=(2, 3, 4, 5))))
    [d] = codes(diags, "RLC401")
    assert d.severity.value == "error"
    assert "actor (GPUs 0-3) and rollout (GPUs 2-5) share GPUs 2-3" in d.message


def test_rlc402_colocated_roles_with_different_gpu_counts():
    plan, diags = build_plan(experiment(trainer(gpus=8), rollout(gpus=4), colocation=(("actor", "rollout"),)))
    [d] = codes(diags, "RLC402")
    assert "actor 8, rollout 4" in d.message
    assert gpus(plan, "rollout") == (0, 1, 2, 3)  # on the group's GPUs, never beside them


def test_rlc402_colocated_roles_on_different_explicit_gpus():
    _, diags = build_plan(experiment(trainer(gpus=2, ids=(0, 1)), rollout(gpus=2, ids=(2, 3)),
                                     colocation=(("actor", "rollout"),)))
    assert codes(diags, "RLC402")


def test_rlc403_placement_beyond_the_cluster():
    plan, diags = build_plan(experiment(trainer(gpus=16), rollout(gpus=16), colocation=(("actor", "rollout"),)),
                             nodes=1)
    found = codes(diags, "RLC403")
    assert {d.path for d in found} == {"roles.actor", "roles.rollout"}
    assert "cluster has 8 GPUs" in found[0].message and "2 nodes" in found[0].hint
    text = render_text(plan, show_gpu_map=True)
    assert "node 1 (beyond the cluster)" in text


def test_rlc403_explicit_ids_beyond_the_cluster():
    _, diags = build_plan(experiment(trainer(gpus=4, ids=(6, 7, 8, 9))), nodes=1)
    assert codes(diags, "RLC403")


def test_rlc404_idle_gpus_are_a_warning():
    _, diags = build_plan(experiment(trainer(gpus=6), rollout(gpus=6), colocation=(("actor", "rollout"),)), nodes=1)
    [d] = codes(diags, "RLC404")
    assert d.severity.value == "warning" and "GPUs 6-7 of node 0" in d.message


def test_no_idle_warning_for_a_cluster_nobody_described():
    _, diags = build_plan(experiment(trainer(gpus=6), rollout(gpus=6), colocation=(("actor", "rollout"),)))
    assert not codes(diags, "RLC404")


def test_rlc404_folds_whole_idle_nodes():
    _, diags = build_plan(experiment(trainer(gpus=8), rollout(gpus=8), colocation=(("actor", "rollout"),)), nodes=4)
    [d] = codes(diags, "RLC404")
    assert "24 of the cluster's 32 GPUs" in d.message and "nodes 1-3 (all GPUs)" in d.message


# ---- text ----------------------------------------------------------------------------------------------------

def test_ranges():
    assert ranges([3, 0, 1, 2, 6, 8, 9]) == "0-3, 6, 8-9"
    assert ranges([]) == "none"


PLURAL_AFTER_ONE = re.compile(r"(?<![\d.,])1 (GPUs|nodes|CPUs|engines|ranks|more ranks|samples|micro-batches|epochs|"
                              r"optimizer steps|replicas|shards|virtual stages)\b")


def test_one_of_a_thing_is_singular():
    plan, diags = build_plan(experiment(trainer(gpus=1, micro=16), prompts=16, group=1, global_batch=16, steps=1),
                             nodes=1, gpus_per_node=1)
    text = render_text(plan, show_gpu_map=True)
    assert "cluster: 1 node × 1 GPU = 1 GPU" in text
    assert "group 0  GPU 0 (node 0)" in text and "GPU map (1 node × 1 GPU;" in text
    assert "1 micro-batch per optimizer step" in text and "1 optimizer step)" in text
    assert not PLURAL_AFTER_ONE.search(text), PLURAL_AFTER_ONE.search(text)
    assert not PLURAL_AFTER_ONE.search(" ".join(d.message + " " + (d.hint or "") for d in diags))


def test_one_idle_gpu_is_singular():
    _, diags = build_plan(experiment(trainer(gpus=7)), nodes=1)
    [d] = codes(diags, "RLC404")
    assert d.message.startswith("1 of the cluster's 8 GPUs is assigned") and "GPU 7 of node 0" in d.message


def test_a_thousand_nodes_fold_into_a_few_lines():
    exp = experiment(trainer(gpus=8192, backend="megatron", tp=8, pp=4), rollout(gpus=8192, tp=4),
                     trainer("reference", gpus=8192, backend="megatron", trains=False, tp=8, pp=4),
                     colocation=(("actor", "rollout", "reference"),), prompts=4096, group=16, global_batch=2048)
    plan, diags = build_plan(exp)
    assert plan.cluster.nodes == 1024
    text = render_text(plan, show_gpu_map=True)
    assert "nodes 0-1023: GPUs 0-7 actor + rollout + reference" in text
    assert len(text.splitlines()) < 150
    assert "more ranks" in text and "more engines" in text
