"""The RLinf dialect: the seed's parameters and YAML, the 2025-10 layout, each rule, the resolvers, composition,
the `component_placement` language, and the diagnostics people read."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from rlcfg.frontend import check_file, check_text
from rlcfg.schema.base import field_at, defaults_tree
from rlcfg.dialects.rlinf import DIALECT, RLinfConfig
from rlcfg.dialects.rlinf import placement as lang
from rlcfg.dialects.rlinf.resolvers import RESOLVERS
from rlcfg.source.tree import MISSING
from rlcfg.source.yaml_loader import load_yaml
from tests.helpers import ROOT, TEMPLATES, assert_golden, cli, seed

FIXTURES = ROOT / "tests" / "fixtures" / "rlinf"
TEMPLATE = TEMPLATES / "rlinf-megatron-sglang.yaml"


def seed_yaml(text: str) -> str:
    """The seed's `.. code:: yaml` blocks, dedented and joined: one complete config."""
    lines, blocks, i = text.splitlines(), [], 0
    while i < len(lines):
        if lines[i].strip() == ".. code:: yaml":
            i += 1
            body = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
                body.append(lines[i])
                i += 1
            blocks.append(textwrap.dedent("\n".join(body)).strip("\n"))
        else:
            i += 1
    return "\n\n".join(blocks) + "\n"


def documented_keys(text: str) -> list[str]:
    """Every ``a.b.c`` the seed describes, with `x.y.a / b` shorthands expanded."""
    keys = []
    for line in text.splitlines():
        if line.startswith("``") and "``:" in line:
            entry = line[2:line.index("``:")]
            parts = [p.strip() for p in entry.split("/")]
            head = parts[0].rsplit(".", 1)[0]
            keys.append(parts[0])
            keys.extend(p if "." in p else f"{head}.{p}" for p in parts[1:])
    return keys


def plain(text: str) -> dict:
    """YAML read the way RLinf's OmegaConf reads it (`2e-05` is a float)."""
    tree, problems = load_yaml(text, "plain.yaml")
    assert tree is not None, problems
    return tree.data


def leaves(node, path=()):
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from leaves(value, path + (key,))
    else:
        yield path, node


def codes(result) -> list[tuple[str, str, str]]:
    return [(d.code, d.path, d.severity.value) for d in result.diagnostics]


def variant(changes: dict, base: Path = TEMPLATE, delete: tuple = ()):
    """Check the template with some keys changed (dotted path -> value) or deleted."""
    data = plain(base.read_text())
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = copy.deepcopy(value)
    for dotted in delete:
        node = data
        *parents, last = dotted.split(".")
        for part in parents:
            node = node[part]
        del node[last]
    return check_text(yaml.safe_dump(data, sort_keys=False), "variant.yaml", dialect="rlinf")


# ---- the seed ---------------------------------------------------------------------------------------------------

# Where rlcfg follows RLinf's code rather than the seed's example value (DESIGN rule 5), with the reason.
EXCEPTIONS = {
    "cluster.num_gpus_per_node": None,  # absent means "as many as Ray finds"; the seed's 1 is an example
    "cluster.component_placement": MISSING,  # RLinf asserts it is given (RL-43)
    "rollout.gpu_memory_utilization": 0.65,  # RLinf's code default when absent; the docs show 0.55
    "rollout.model_dir": None,  # the user's model; required by a rule, in either layout's key
    "data.train_data_paths": None,  # the user's data: required by rule rlinf/reasoning-inputs (embodied has none)
    "data.val_data_paths": None,  # optional: no validation without it
    "actor.tokenizer.tokenizer_model": None,  # the user's tokenizer: required by rule rlinf/reasoning-inputs
    "rollout.model_arch": None,  # RLinf has no default: it asserts the value is a supported family
    "actor.optim.fp16": None,  # RLinf derives both flags from actor.model.precision (overwrites them before 2025-12)
    "actor.optim.bf16": None,
    # RLinf's code leaves it null when absent, so that lr_warmup_iters counts; the seed's 0.01 is the example's
    "actor.lr_sched.lr_warmup_fraction": None,
    "actor.lr_sched.lr_decay_iters": None,  # absent, RLinf decays over its fixed train_iters (100000)
}


def test_every_documented_parameter_exists():
    text = seed("001")
    missing = [key for key in documented_keys(text) if field_at(RLinfConfig, tuple(key.split(".")))[0] is None]
    assert len(documented_keys(text)) > 150
    assert missing == []


def test_every_parameter_of_the_seed_yaml_has_the_documented_default():
    data = plain(seed_yaml(seed("001")))
    defaults = defaults_tree(RLinfConfig)
    wrong = []
    for path, value in leaves(data):
        key = ".".join(path)
        if key.startswith("cluster.component_placement"):
            key = "cluster.component_placement"
        expected = EXCEPTIONS.get(key, value)
        node = defaults
        for part in key.split("."):
            node = node[part]
        if node != expected:
            wrong.append(f"{key}: default {node!r}, expected {expected!r}")
    assert wrong == []


def test_the_seed_yaml_validates():
    text = seed_yaml(seed("001"))
    assert (FIXTURES / "seed.yaml").read_text().split("\n", 1)[1] == text, "the fixture is the seed's YAML"
    result = check_text(text, "seed.yaml")
    assert result.dialect == "rlinf" and result.ok, [d.message for d in result.diagnostics]
    # It is the mid-2025 layout: rlcfg points at what RLinf renamed later, and at the SP/TP 1 no-op.
    assert {c for c, _, _ in codes(result)} == {"RLC111", "RLC307"}
    assert result.summary == "Megatron training (TP 1 × PP 1), SGLang rollout, 1 GPU collocated"


def test_the_2025_10_layout_validates_without_a_warning():
    result = check_file(str(FIXTURES / "reasoning-2025-10.yaml"))
    assert result.ok and result.diagnostics == [], [d.message for d in result.diagnostics]
    assert result.summary == "Megatron training (TP 2 × PP 1), SGLang rollout, 2 nodes collocated"


def test_the_template_validates_without_a_warning():
    lines = TEMPLATE.read_text().splitlines()
    assert lines[0] == "# yaml-language-server: $schema=../schemas/rlinf.schema.json"
    assert "rlcfg validate templates/rlinf-megatron-sglang.yaml" in "\n".join(lines[:8])
    result = check_file(str(TEMPLATE))
    assert result.ok and result.diagnostics == [], [d.message for d in result.diagnostics]
    assert result.summary == "Megatron training (TP 2 × PP 1), SGLang rollout (TP 2), 8 GPUs collocated"


def test_every_field_has_a_description():
    from rlcfg.schema.base import iter_fields

    bare = [".".join(p) for p, info, _ in iter_fields(RLinfConfig) if not (info.description or "").strip()]
    assert bare == []


def test_hydra_overrides_use_hydra_grammar():
    result = check_file(str(TEMPLATE), ["algorithm.n_minibatches=3", "actor.model.num_layers=28"])
    found = {(d.code, d.path): d for d in result.diagnostics}
    assert found[("RLC300", "algorithm.n_minibatches")].origin.describe() == "<override 1: algorithm.n_minibatches=3>"
    assert ("RLC304", "actor.model.num_layers") in found


# ---- rules ------------------------------------------------------------------------------------------------------

DISAGGREGATED = {"rollout": "0-3", "inference": "4-5", "actor,reward": "6-7"}

# rule id -> (changes to the template, deleted keys, the (code, path, severity) it must report)
CASES = {
    "rlinf/placement-syntax": [
        ({"cluster.component_placement": {"actor,rollout,reward": "0-3,2-5"}}, (),
         ("RLC204", "cluster.component_placement.actor,rollout,reward", "error")),
        ({"cluster.component_placement": {"actor,rollout,reward": "all", "actor": "0-3"}}, (),
         ("RLC401", "cluster.component_placement.actor", "error")),
    ],
    "rlinf/placement-in-cluster": [
        ({"cluster.component_placement": {"actor,rollout,reward": "0-15"}}, (),
         ("RLC403", "cluster.component_placement.actor,rollout,reward", "error")),
        ({"cluster.component_placement": {"actor,rollout,reward": "0-7"}}, ("cluster.num_gpus_per_node",),
         ("RLC308", "cluster.component_placement", "warning")),
    ],
    "rlinf/placement-mode": [
        ({"cluster.component_placement": {"actor,rollout": "all"}}, (),
         ("RLC302", "cluster.component_placement", "error")),
        ({"cluster.component_placement": {"actor,rollout,reward,inference": "all"}}, (),
         ("RLC306", "cluster.component_placement.actor,rollout,reward,inference", "error")),
        ({"cluster.component_placement": {"rollout": "0-4", "actor,reward": "4-7"}}, (),
         ("RLC401", "cluster.component_placement.rollout", "error")),
        ({"cluster.component_placement": {"rollout": "0,2", "actor,reward": "4-7"}}, (),
         ("RLC306", "cluster.component_placement.rollout", "error")),
    ],
    "rlinf/inference-needs-recompute": [
        ({"cluster.component_placement": DISAGGREGATED, "algorithm.recompute_logprobs": False,
          "rollout.tensor_parallel_size": 1, "actor.model.tensor_model_parallel_size": 1}, (),
         ("RLC302", "algorithm.recompute_logprobs", "error")),
    ],
    "rlinf/auto-scheduler": [
        ({"cluster.auto_scheduler": True}, (), ("RLC306", "cluster.auto_scheduler", "error")),
    ],
    "rlinf/idle-gpus": [
        ({"cluster.component_placement": {"actor,rollout,reward": "0-5"}}, (),
         ("RLC404", "cluster.component_placement", "warning")),
    ],
    "rlinf/parallel-divides-gpus": [
        ({"actor.model.tensor_model_parallel_size": 3, "rollout.tensor_parallel_size": 1}, (),
         ("RLC400", "actor.model.tensor_model_parallel_size", "error")),
        ({"cluster.component_placement": DISAGGREGATED, "inference.model.tensor_model_parallel_size": 4}, (),
         ("RLC400", "inference.model.tensor_model_parallel_size", "error")),
    ],
    "rlinf/rollout-tp-divides-actor-tp": [
        ({"rollout.tensor_parallel_size": 4}, (), ("RLC400", "rollout.tensor_parallel_size", "error")),
        ({"cluster.component_placement": {"rollout": "0-2", "actor,reward": "4-7"}, "rollout.tensor_parallel_size": 1,
          "cluster.num_gpus_per_node": 8}, (), ("RLC400", "cluster.component_placement.rollout", "error")),
    ],
    "rlinf/expert-tp": [
        ({"actor.model.expert_tensor_parallel_size": 4}, (),
         ("RLC306", "actor.model.expert_tensor_parallel_size", "error")),
    ],
    "rlinf/vocab-divisible-by-tp": [
        ({"actor.model.padded_vocab_size": 151937}, (), ("RLC400", "actor.model.padded_vocab_size", "error")),
    ],
    "rlinf/sequence-parallel-needs-tp": [
        ({"actor.model.tensor_model_parallel_size": 1, "rollout.tensor_parallel_size": 1}, (),
         ("RLC307", "actor.model.sequence_parallel", "warning")),
    ],
    "rlinf/minibatches-divide-batch": [
        ({"algorithm.n_minibatches": 3}, (), ("RLC300", "algorithm.n_minibatches", "error")),
    ],
    "rlinf/global-batch-divides": [
        ({"algorithm.training_batch_size_per_gpu": 3}, (),
         ("RLC300", "algorithm.training_batch_size_per_gpu", "error")),
        ({"data.rollout_batch_size": 1, "algorithm.group_size": 2, "algorithm.n_minibatches": 4}, (),
         ("RLC300", "algorithm.n_minibatches", "error")),
    ],
    "rlinf/reward-world-divides": [
        ({"cluster.component_placement": {"actor,rollout": "all", "reward": "0-2"}}, (),
         ("RLC300", "cluster.component_placement.reward", "error")),
    ],
    "rlinf/run-refusals": [
        ({"algorithm.loss_type": "actor_critic"}, (), ("RLC118", "algorithm.loss_type", "note")),
        ({"algorithm.adv_type": "reinpp"}, (), ("RLC118", "algorithm.adv_type", "note")),
        ({"algorithm.importance_sampling_fix": True}, (), ("RLC118", "algorithm.importance_sampling_fix", "note")),
        ({"reward.reward_type": "vqa"}, (), ("RLC118", "reward.reward_type", "note")),
        ({"actor.training_backend": "fsdp", "algorithm.kl_beta": 0.01,
          "actor.fsdp_config": {"mixed_precision": {"param_dtype": "bf16", "reduce_dtype": "fp32",
                                                    "buffer_dtype": "fp32"}}}, (),
         ("RLC118", "algorithm.kl_penalty_type", "note")),
        ({"actor.lr_sched.lr_decay_style": "WSD"}, (), ("RLC118", "actor.lr_sched.lr_decay_style", "note")),
        ({"actor.model.moe_router_load_balancing_type": "aux_loss", "actor.model.moe_aux_loss_coeff": 0.001}, (),
         ("RLC118", "actor.model.moe_aux_loss_coeff", "note")),
        ({"critic.use_critic_model": True, "critic.training_backend": "megatron"}, (),
         ("RLC118", "critic.training_backend", "note")),
    ],
    "rlinf/group-size": [
        ({"algorithm.group_size": 1}, (), ("RLC302", "algorithm.group_size", "error")),
    ],
    "rlinf/recomputed-batch-sizes": [
        ({"actor.micro_batch_size": 4}, (), ("RLC304", "actor.micro_batch_size", "warning")),
        ({"critic.global_batch_size": 64}, (), ("RLC304", "critic.global_batch_size", "warning")),
    ],
    "rlinf/logprobs-source": [
        ({"algorithm.recompute_logprobs": False, "rollout.return_logprobs": False}, (),
         ("RLC302", "algorithm.recompute_logprobs", "error")),
        ({"rollout.return_logprobs": True}, (), ("RLC302", "rollout.return_logprobs", "error")),
    ],
    "rlinf/importance-sampling-overrides": [
        ({"algorithm.importance_sampling_fix": True}, (), ("RLC304", "rollout.return_logprobs", "warning")),
    ],
    "rlinf/kl-needs-recompute": [
        ({"algorithm.recompute_logprobs": False, "rollout.return_logprobs": True, "algorithm.kl_beta": 0.01}, (),
         ("RLC304", "algorithm.kl_beta", "warning")),
    ],
    "rlinf/sequence-lengths": [
        ({"runner.seq_length": 1024}, (), ("RLC303", "runner.seq_length", "error")),
        ({"algorithm.sampling_params.max_new_tokens": 9000}, (),
         ("RLC303", "algorithm.sampling_params.max_new_tokens", "error")),
        ({"algorithm.sampling_params.min_new_tokens": 8000}, (),
         ("RLC303", "algorithm.sampling_params.min_new_tokens", "error")),
    ],
    "rlinf/rollout-model": [
        ({"rollout.model": {"model_type": "qwen2.5"}}, (), ("RLC203", "rollout.model.model_path", "error")),
        ({"rollout.model": {"model_path": "/m"}}, (), ("RLC203", "rollout.model.model_type", "error")),
    ],
    "rlinf/engine-sections": [
        ({}, ("rollout.vllm",), ("RLC302", "rollout.vllm", "error")),
    ],
    "rlinf/reasoning-inputs": [
        ({}, ("data.train_data_paths",), ("RLC203", "data.train_data_paths", "error")),
        ({}, ("actor.tokenizer.tokenizer_model",), ("RLC203", "actor.tokenizer.tokenizer_model", "error")),
    ],
    "rlinf/task-type": [
        ({"runner.task_type": "reasonnig"}, (), ("RLC202", "runner.task_type", "error")),
        ({"runner.task_type": "sft_rl"}, (), ("RLC202", "runner.task_type", "error")),
    ],
    "rlinf/model-type": [
        ({"rollout.model.model_type": "qwen2"}, (), ("RLC202", "rollout.model.model_type", "error")),
    ],
    "rlinf/task-type-renamed": [
        ({"runner.task_type": "math"}, (), ("RLC111", "runner.task_type", "warning")),
    ],
    "rlinf/megatron-checkpoint-source": [
        ({"actor.megatron.use_hf_ckpt": False}, (), ("RLC302", "actor.megatron.use_hf_ckpt", "error")),
        ({"actor.model.megatron_checkpoint": "/ckpt"}, (), ("RLC301", "actor.model.megatron_checkpoint", "error")),
        ({"actor.model.megatron_checkpoint": "/ckpt", "runner.task_type": "math"}, (),
         ("RLC301", "actor.model.megatron_checkpoint", "warning")),
    ],
    "rlinf/weight-decay-schedule": [
        ({"actor.lr_sched.lr_decay_style": "cosine"}, (), ("RLC302", "actor.lr_sched.start_weight_decay", "error")),
        ({"actor.lr_sched.lr_decay_style": "cosine", "runner.task_type": "math"}, (),
         ("RLC302", "actor.lr_sched.end_weight_decay", "warning")),
        ({"actor.lr_sched.start_weight_decay": 0.1}, (), ("RLC301", "actor.lr_sched.start_weight_decay", "error")),
        ({"actor.lr_sched.lr_decay_style": "cosine", "actor.lr_sched.start_weight_decay": 0.0,
          "actor.lr_sched.end_weight_decay": 0.1}, (), ("RLC305", "actor.lr_sched.end_weight_decay", "error")),
    ],
    "rlinf/lr-bounds": [
        ({"actor.lr_sched.min_lr": 1.0e-5}, (), ("RLC305", "actor.lr_sched.min_lr", "error")),
    ],
    "rlinf/warmup-iters-ignored": [
        ({"actor.lr_sched.lr_warmup_iters": 10, "actor.lr_sched.lr_warmup_fraction": 0.1}, (),
         ("RLC307", "actor.lr_sched.lr_warmup_iters", "warning")),
        # the template's `lr_warmup_fraction: 0.0` is set too, and wins
        ({"actor.lr_sched.lr_warmup_iters": 10}, (), ("RLC307", "actor.lr_sched.lr_warmup_iters", "warning")),
    ],
    "rlinf/warmup-within-decay": [
        ({"actor.lr_sched.lr_warmup_fraction": None, "actor.lr_sched.lr_warmup_iters": 1000}, (),
         ("RLC305", "actor.lr_sched.lr_warmup_iters", "error")),
        ({"actor.lr_sched.lr_warmup_fraction": 1.0}, (), ("RLC305", "actor.lr_sched.lr_warmup_fraction", "error")),
    ],
    "rlinf/precision-flags": [
        ({"actor.optim.fp16": True}, (), ("RLC301", "actor.optim.bf16", "error")),
        ({"actor.optim.fp16": True, "actor.optim.bf16": False}, (), ("RLC305", "actor.optim.fp16", "warning")),
    ],
    "rlinf/hf-architecture-overwritten": [
        ({"actor.model.num_layers": 28}, (), ("RLC304", "actor.model.num_layers", "warning")),
    ],
    "rlinf/collocated-only-features": [
        ({"cluster.component_placement": {"rollout": "0-3", "actor,reward": "4-7"},
          "runner.enable_dynamic_batch_size": True}, (),
         ("RLC306", "runner.enable_dynamic_batch_size", "error")),
    ],
    "rlinf/fsdp-config": [
        ({"actor.training_backend": "fsdp"}, (), ("RLC302", "actor.training_backend", "error")),
        ({"actor.training_backend": "fsdp", "actor.fsdp_config": {"mixed_precision": {}, "backward_prefetch": "mid"}},
         (), ("RLC202", "actor.fsdp_config.backward_prefetch", "error")),
        # RLinf refuses torch autocast together with FSDP mixed precision (validate_fsdp_cfg's amp check)
        ({"actor.training_backend": "fsdp",
          "actor.fsdp_config": {"mixed_precision": {"param_dtype": "bf16", "reduce_dtype": "fp32",
                                                    "buffer_dtype": "fp32"}, "amp_autocast": {"enabled": True}}},
         (), ("RLC301", "actor.fsdp_config.amp_autocast.enabled", "error")),
    ],
    "rlinf/critic-backend": [
        ({"critic.use_critic_model": True}, (), ("RLC302", "critic.training_backend", "error")),
    ],
    "rlinf/reserved-node-group-label": [
        ({"cluster.node_groups": [{"label": "node", "node_ranks": 0}]}, (),
         ("RLC204", "cluster.node_groups.0.label", "error")),
    ],
    "rlinf/robot-ip": [
        ({"cluster.node_groups": [{"label": "franka", "node_ranks": 0, "hardware": {
            "type": "Franka", "configs": [{"robot_ip": "ROBOT_IP", "node_rank": 0}]}}]}, (),
         ("RLC201", "cluster.node_groups.0.hardware.configs.0.robot_ip", "error")),
        ({"cluster.node_groups": [{"label": "arms", "node_ranks": 0, "hardware": {
            "type": "DualFranka", "configs": [{"left_robot_ip": "10.0.0.2", "right_robot_ip": "10.0.0.300"}]}}]}, (),
         ("RLC201", "cluster.node_groups.0.hardware.configs.0.right_robot_ip", "error")),
    ],
}


def test_every_rule_has_a_test():
    assert set(CASES) == {rule.id for rule in DIALECT.rules}


@pytest.mark.parametrize("rule_id,changes,deleted,expected",
                         [(rule, *case) for rule, cases in CASES.items() for case in cases],
                         ids=lambda v: v if isinstance(v, str) and v.startswith("rlinf/") else "")
def test_rule(rule_id, changes, deleted, expected):
    result = variant(changes, delete=deleted)
    matching = [d for d in result.diagnostics if (d.code, d.path, d.severity.value) == expected]
    assert matching, f"expected {expected}, got {codes(result)}"
    assert any(d.rule == rule_id for d in matching), [d.rule for d in matching]
    for d in matching:
        assert d.hint and d.message, "every finding says what is wrong and how to fix it"


@pytest.mark.parametrize("changes", [
    # An FSDP actor reads no Megatron sizes; a critic is judged only when one is used.
    {"actor.training_backend": "fsdp", "actor.model.expert_model_parallel_size": 2,
     "actor.model.context_parallel_size": 2},
    {"critic.training_backend": "megatron"},
])
def test_megatron_limits_only_where_megatron_runs_them(changes):
    result = variant(changes)
    limits = ("expert parallelism", "context parallelism", "no value head")
    assert not [d for d in result.diagnostics if d.code == "RLC118" and any(w in d.message for w in limits)]


def test_an_absent_warmup_fraction_is_null_so_lr_warmup_iters_counts():
    from rlcfg.lower import lower
    result = variant({"actor.lr_sched.lr_warmup_iters": 5}, delete=("actor.lr_sched.lr_warmup_fraction",))
    assert result.ok and [d for d in result.diagnostics if d.path.startswith("actor.lr_sched")] == [], codes(result)
    assert lower("rlinf", result.config).role("actor").optimizer.warmup_steps == 5


def test_rules_stay_quiet_on_a_good_disaggregated_placement():
    result = variant({"cluster.component_placement": DISAGGREGATED, "rollout.tensor_parallel_size": 2,
                      "actor.model.tensor_model_parallel_size": 2, "inference.model.tensor_model_parallel_size": 2})
    assert result.ok and result.diagnostics == [], codes(result)
    assert result.summary == "Megatron training (TP 2 × PP 1), SGLang rollout (TP 2), 8 GPUs disaggregated"


def test_enums_rlinf_checks_only_after_launch_are_checked_now():
    result = variant({"algorithm.loss_agg_func": "token-sum", "algorithm.kl_penalty_type": "k4"})
    assert ("RLC202", "algorithm.loss_agg_func", "error") in codes(result)
    assert ("RLC202", "algorithm.kl_penalty_type", "error") in codes(result)


def test_the_seed_layout_accepts_inference_in_a_collocated_placement_but_2025_10_does_not():
    seed_text = (FIXTURES / "seed.yaml").read_text()
    assert check_text(seed_text, "seed.yaml").ok
    later = variant({"cluster.component_placement": {"actor,inference,rollout,reward": "all"}})
    assert ("RLC306", "cluster.component_placement.actor,inference,rollout,reward", "error") in codes(later)


def test_placement_beyond_a_node_group():
    result = variant({"cluster.num_nodes": 2,
                      "cluster.node_groups": [{"label": "trainers", "node_ranks": "1"}],
                      "cluster.component_placement": {"actor,rollout,reward": "all",
                                                      "env": {"node_group": "trainers", "placement": "0-8"}}})
    assert ("RLC403", "cluster.component_placement.env.placement", "error") in codes(result)
    unknown = variant({"cluster.component_placement": {"actor,rollout,reward": "all",
                                                       "env": {"node_group": "robots", "placement": "0"}}})
    found = [d for d in unknown.diagnostics if d.code == "RLC204"]
    assert found and "node group `robots` is not defined" in found[0].message


def test_the_schedulers_own_node_groups_need_no_declaration():
    """`cluster` (every node) and `node` (processes placed by node rank) are RLinf's own labels."""
    placed = {"actor,rollout,reward": "all", "agent": {"node_group": "node", "placement": "0-1:0-5"},
              "env": {"node_group": "cluster", "placement": "0-15"}}
    result = variant({"cluster.num_nodes": 2, "cluster.component_placement": placed})
    assert not [d for d in result.diagnostics if d.path.startswith("cluster.")], codes(result)
    beyond = variant({"cluster.num_nodes": 2, "cluster.component_placement": {
        **placed, "agent": {"node_group": "node", "placement": "0-2:0-5"}}})
    [error] = [d for d in beyond.diagnostics if d.code == "RLC403"]
    assert "the `node` group's resources are the cluster's nodes" in error.message and "node ranks 0-1" in error.hint


def test_a_key_seen_only_with_integers_takes_any_number():
    """RLinf declares no types; an environment's `episode_length_s: 30.0` goes on to IsaacLab, a float there."""
    key = "env.train.init_params.episode_length_s"
    assert not [d for d in variant({key: 30.0}).diagnostics if d.path == key]
    assert [(d.code, d.message) for d in variant({key: "long"}).diagnostics if d.path == key] == [
        ("RLC200", f"`{key}`: expected a number, got 'long' (a string)")]


# ---- resolvers --------------------------------------------------------------------------------------------------


def test_resolver_functions():
    assert RESOLVERS["subtract"](2048, 1024) == 1024
    assert RESOLVERS["multiply"](8, 64) == 512
    assert RESOLVERS["int_div"](512, 3) == 170
    assert RESOLVERS["not"](True) is False and RESOLVERS["not"]("false") is True
    assert RESOLVERS["torch.dtype"]("bf16") == "torch.bfloat16"
    assert RESOLVERS["torch.dtype"]("float16") == "torch.float16"
    assert RESOLVERS["torch.dtype"]("fp32") == "torch.float32"
    with pytest.raises(ValueError, match="does not know the precision 'bf61'"):
        RESOLVERS["torch.dtype"]("bf61")
    with pytest.raises(ValueError, match="divides 4 by zero"):
        RESOLVERS["int_div"](4, 0)


def test_resolvers_inside_a_config():
    result = variant({"actor.global_batch_size":
                      "${int_div:${multiply:${algorithm.group_size}, ${data.rollout_batch_size}}, "
                      "${algorithm.n_minibatches}}",
                      "rollout.precision": "${torch.dtype:${actor.model.precision}}"})
    assert result.ok and result.diagnostics == [], codes(result)
    assert result.config.actor.global_batch_size == 256
    assert result.config.rollout.precision == "torch.bfloat16"
    assert result.config.rollout.return_logprobs is False  # ${not:${algorithm.recompute_logprobs}}


def test_a_failing_resolver_is_a_diagnostic_at_its_key():
    result = variant({"rollout.precision": "${torch.dtype:bf61}"})
    found = [d for d in result.diagnostics if d.path == "rollout.precision"]
    assert [d.code for d in found] == ["RLC106"] and "bf61" in found[0].message


def test_no_heavy_imports():
    import subprocess
    import sys

    code = ("import sys; from rlcfg.frontend import check_file; check_file(%r); "
            "print(','.join(m for m in ('torch', 'ray', 'transformers') if m in sys.modules))" % str(TEMPLATE))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "", out.stderr


# ---- composition ------------------------------------------------------------------------------------------------


def test_a_composed_config_validates(monkeypatch):
    monkeypatch.setenv("RLCFG_TEST_EXTRA", str(FIXTURES / "compose" / "extra"))
    result = check_file(str(FIXTURES / "compose" / "main.yaml"))
    assert result.ok and result.diagnostics == [], codes(result)
    assert result.config.actor.model.tensor_model_parallel_size == 2
    assert result.config.actor.optim.lr == 2.0e-6  # the file's own keys come last (_self_)
    assert result.config.cluster.num_gpus_per_node == 8  # from the search path, placed by its @package header
    origin = result.tree.origin(("actor", "model", "precision"))
    assert origin.file.endswith("compose/model/qwen2.5-1.5b.yaml") and origin.line == 2


def test_a_missing_fragment_is_an_error_at_the_defaults_entry():
    result = check_file(str(FIXTURES / "compose" / "missing.yaml"))
    found = [d for d in result.diagnostics if d.code == "RLC112"]
    assert len(found) == 1 and not result.ok
    assert found[0].origin.describe().endswith("missing.yaml:2:5")
    assert found[0].hint == "did you mean `model/qwen2.5-1.5b`?"


# ---- the placement language -------------------------------------------------------------------------------------


@pytest.mark.parametrize("text,printed", [
    ("all", "all"), ("0-4", "0-4"), (" 0 - 3 ", "0-3"), ("3", "3"), ("0-3,4-7", "0-3,4-7"),
    ("0-1:0-3,4-5", "0-1:0-3,4-5"), ("0-3:0-7", "0-3:0-7"), ("0,,2", "0,2"),
])
def test_rank_strings_parse(text, printed):
    assert lang.parse_rank_map(text).text() == printed


def test_a_yaml_integer_is_a_single_rank():
    assert lang.parse_rank_map(5).text() == "5"


@pytest.mark.parametrize("text,words", [
    ("", "names no GPU ranks"), ("0-", "expected GPU ranks"), ("a-b", "found `a`"), ("3-1", "runs backwards"),
    ("0-3:all", "cannot be `all`"), ("0-3;4", "unexpected `;`"), ("0:1:2", "unexpected `:`"),
])
def test_malformed_rank_strings(text, words):
    with pytest.raises(lang.PlacementSyntaxError, match=words):
        lang.parse_rank_map(text)


def test_expansion_numbers_processes_and_checks_the_rules():
    expanded = lang.expand(lang.parse_rank_map("0-1:0-3,4-5"), 8)
    assert expanded.parts == [([0, 1], [0, 1, 2, 3]), ([4, 5], [4, 5])]
    assert expanded.world_size == 6
    assert lang.expand(lang.parse_rank_map("all"), 4).resources == [0, 1, 2, 3]
    for text, words in [("0-3,2-5", "ascending"), ("4-7,0-3", "ascending"), ("0-2:0-1", "multiple or a divisor"),
                        ("0-1:1-2", "should start at 0"), ("all,0", "stand alone")]:
        with pytest.raises(lang.PlacementSyntaxError, match=words):
            lang.expand(lang.parse_rank_map(text), 8)
    with pytest.raises(lang.PlacementRangeError, match="beyond the 8 GPUs"):
        lang.expand(lang.parse_rank_map("4-8"), 8)


def test_component_keys_and_the_dict_form():
    analysis = lang.analyze({"actor, rollout": "0-3", "env": {"node_group": "a", "placement": "0-1"}}, 2, 4,
                            [{"label": "a", "node_ranks": "1"}])
    assert analysis.issues == []
    assert analysis.components["rollout"].gpus == frozenset({0, 1, 2, 3})
    assert analysis.components["env"].gpus == frozenset({4, 5}), "node group ranks count from the group's first GPU"
    bad = lang.analyze({"actor,,rollout": "all", "x": {"placement": "0", "gpus": 1}, "y": {"node_group": "a"}}, 1, 8)
    assert [i.code for i in bad.issues] == ["RLC204"] * 3


@st.composite
def rank_maps(draw):
    parts, resource, process = [], 0, 0
    if draw(st.booleans()) and draw(st.booleans()):
        return lang.RankMap((lang.Part(None),))
    for _ in range(draw(st.integers(1, 4))):
        resource += draw(st.integers(0, 3))
        n_res = draw(st.integers(1, 4))
        span = lang.Span(resource, resource + n_res - 1)
        resource += n_res
        explicit = draw(st.booleans())
        n_proc = n_res * draw(st.integers(1, 3)) if explicit else n_res
        procs = lang.Span(process, process + n_proc - 1) if explicit else None
        process += n_proc
        parts.append(lang.Part(span, procs))
    return lang.RankMap(tuple(parts))


@given(rank_maps())
@settings(max_examples=200, deadline=None)
def test_parse_reads_what_format_prints(rank_map):
    text = lang.format_rank_map(rank_map)
    assert lang.parse_rank_map(text) == rank_map
    expanded = lang.expand(rank_map, 64)
    assert expanded.world_size >= 1


@given(st.text(alphabet="0123456789-:, al", max_size=20))
@settings(max_examples=300, deadline=None)
def test_any_text_parses_or_fails_cleanly(text):
    try:
        lang.expand(lang.parse_rank_map(text), 8)
    except (lang.PlacementSyntaxError, lang.PlacementRangeError):
        pass


def test_a_rank_beyond_any_cluster_is_an_error_not_a_list_of_billions():
    # hypothesis found `9-5183723386`: expanding it took 40 GB and the test process was killed
    with pytest.raises(lang.PlacementSyntaxError, match="beyond any cluster"):
        lang.parse_rank_map("9-5183723386")
    assert len(lang.expand(lang.parse_rank_map(f"0-{lang.MAX_RANK}"), None).parts[0][0]) == lang.MAX_RANK + 1


# ---- golden diagnostics -----------------------------------------------------------------------------------------


def test_golden_diagnostics_text():
    result = cli("validate", "tests/fixtures/rlinf/broken.yaml")
    assert result.returncode == 1
    assert_golden("rlinf/broken.txt", result.stdout)


def test_golden_diagnostics_json():
    result = cli("validate", "tests/fixtures/rlinf/broken.yaml", "--format", "json")
    assert result.returncode == 1
    payload = json.loads(result.stdout)
    assert all(d["location"] for d in payload["diagnostics"])
    assert_golden("rlinf/broken.json", result.stdout)


# ---- releases, unknown keys, pipelines (issue 11) ------------------------------------------------------------


def _release_of(changes: dict = (), delete: tuple = (), base: Path = TEMPLATE) -> str:
    return variant(dict(changes), base, delete).release


def test_the_release_is_inferred_from_the_layout():
    assert check_file(str(FIXTURES / "seed.yaml")).release == "2025-08"  # task_type math
    assert check_file(str(TEMPLATE)).release == "main"  # rollout.model.model_path
    # reasoning with the rollout model at `rollout.model_dir` is the 2025-10 layout
    assert _release_of({"rollout.model_dir": "/m", "rollout.model_arch": "qwen2.5"},
                       ("rollout.model", "algorithm.sampling_params.do_sample")) == "2025-10"
    result = check_file(str(TEMPLATE), release="2025-10")
    assert result.release == "2025-10" and "pinned" in result.release_reason


def test_the_tags_are_told_apart_by_the_keys_only_some_of_them_have():
    """v0.1, v0.2, v0.3 and main share a layout: a key that only some of them have picks the newest of those."""
    plain_result = check_file(str(TEMPLATE))
    assert plain_result.release == "main" and "no key it writes rules out the newest, main" in \
        plain_result.release_reason
    drift = variant({"algorithm.max_drift": 0.5})  # the decoupled loss's drift bound: v0.3 had it, main dropped it
    assert drift.release == "v0.3"
    assert "`algorithm.max_drift` is a key of RLinf v0.3 only, not of the releases after v0.3" in drift.release_reason
    assert drift.ok and not [d for d in drift.diagnostics
                             if d.path == "algorithm.max_drift" and d.severity.value != "note"], codes(drift)
    # the same key under main is one main no longer reads: dropped, with a warning
    pinned = check_file(str(TEMPLATE), ["+algorithm.max_drift=0.5"], release="main")
    assert ("RLC113", "algorithm.max_drift", "warning") in codes(pinned)


def test_each_tag_runs_its_own_task_types_and_model_families():
    eval_at_v01 = check_file(str(TEMPLATE), ["runner.task_type=reasoning_eval"], release="v0.1")
    assert ("RLC202", "runner.task_type", "error") in codes(eval_at_v01)  # added in v0.2
    assert ("RLC202", "runner.task_type", "error") not in codes(
        check_file(str(TEMPLATE), ["runner.task_type=reasoning_eval"], release="v0.2"))
    qwen3_at_v01 = check_file(str(TEMPLATE), ["rollout.model.model_type=qwen3"], release="v0.1")
    assert ("RLC202", "rollout.model.model_type", "error") in codes(qwen3_at_v01)  # registered from v0.2
    assert check_file(str(TEMPLATE), ["rollout.model.model_type=qwen3"], release="v0.2").ok


def test_the_package_index_names_of_the_tags_are_taken():
    """PyPI's rlinf 0.3.0 is tag v0.3's code, file for file; `--framework-version 0.3.0` judges by v0.3."""
    result = check_file(str(TEMPLATE), release="0.3.0")
    assert result.release == "v0.3" and result.release_label == "RLinf v0.3"


def test_a_file_judged_by_2025_10_reads_its_own_keys():
    result = variant({"rollout.model_dir": "/m", "rollout.model_arch": "qwen2.5",
                      "algorithm.sampling_params.use_greedy": False}, delete=("rollout.model",
                                                                             "algorithm.sampling_params.do_sample"))
    assert result.release == "2025-10"
    assert result.ok and result.diagnostics == [], codes(result)


def test_a_key_of_another_release_is_a_warning():
    # RLinf from 2025-12 on no longer reads `rollout.model_dir`: it is ignored there, not refused
    result = variant({"rollout.model_dir": "/m"})
    assert ("RLC113", "rollout.model_dir", "warning") in codes(result) and result.ok


def test_keys_rlinf_reads_are_known():
    # flagged as unknown before issue 11, though RLinf's code reads them
    result = variant({"rollout.model.precision": "bf16", "algorithm.sampling_params.do_sample": True,
                      "actor.fsdp_config": None, "runner.logger.log_path": "/tmp/logs"})
    assert result.ok and result.diagnostics == [], codes(result)


def test_unknown_keys_are_judged_as_rlinf_drops_them():
    result = variant({"algorithm.group_sise": 8, "algorithm.my_notes": "x", "my_top_level_note": 1})
    found = codes(result)
    assert ("RLC102", "algorithm.group_sise", "error") in found  # close to `group_size`: a typo RLinf would lose
    assert ("RLC114", "algorithm.my_notes", "warning") in found  # resembles nothing RLinf reads: dropped
    assert ("RLC114", "my_top_level_note", "warning") in found
    # the placement's keys are component names, not fields
    quiet = variant({"cluster.component_placement": {"actor,rollout,reward": "all", "agent_worker": "all"}})
    assert not [c for c in codes(quiet) if c[0] in ("RLC102", "RLC114")]


def test_deepseek_v3_is_a_model_type():
    result = variant({"rollout.model.model_type": "deepseek_v3"})
    assert not [c for c in codes(result) if c[1] == "rollout.model.model_type"], codes(result)


def test_optimizer_precision_flags_follow_the_release():
    # RLinf 2025-08/2025-10 overwrite optim.fp16/bf16 from the precision; later releases keep a written value
    old = check_file(str(FIXTURES / "seed.yaml"), ["actor.optim.fp16=true", "actor.model.precision=bf16"])
    assert ("RLC304", "actor.optim.fp16", "warning") in codes(old)
    new = variant({"actor.optim.fp16": True, "actor.optim.bf16": False, "actor.model.precision": "bf16"})
    assert ("RLC305", "actor.optim.fp16", "warning") in codes(new)
    quiet = variant({"actor.model.precision": "fp16"}, delete=("actor.optim.fp16", "actor.optim.bf16"))
    assert not [c for c in codes(quiet) if c[1].startswith("actor.optim")], codes(quiet)


EMBODIED = """\
cluster:
  num_nodes: 1
  component_placement:
    actor,env,rollout: all
runner:
  task_type: embodied
  max_epochs: 10
  logger:
    log_path: ./logs
algorithm:
  adv_type: gae
  loss_type: actor_critic
  group_size: 1
  update_epoch: 4
env:
  group_name: EnvGroup
  train:
    total_num_envs: 64
    max_episode_steps: 80
  eval:
    total_num_envs: 32
rollout:
  group_name: RolloutGroup
  model:
    model_path: /models/openvla-oft
actor:
  group_name: ActorGroup
  training_backend: fsdp
  micro_batch_size: 8
  global_batch_size: 256
  model:
    model_type: openvla_oft
    action_dim: 7
    precision: bf16
  fsdp_config:
    mixed_precision:
      param_dtype: bf16
      reduce_dtype: bf16
      buffer_dtype: bf16
"""


def test_an_embodied_config_validates():
    result = check_text(EMBODIED, "embodied.yaml", dialect="rlinf")
    assert result.release == "main" and result.pipeline is None
    assert result.ok and not [d for d in result.diagnostics if d.code in ("RLC102", "RLC114", "RLC203")], codes(result)


def test_an_embodied_config_names_a_model_rlinf_has():
    result = check_text(EMBODIED.replace("model_type: openvla_oft", "model_type: openvla_of"), "e.yaml", dialect="rlinf")
    assert ("RLC202", "actor.model.model_type", "error") in codes(result)
    assert "did you mean `openvla_oft`" in next(d.hint for d in result.diagnostics if d.code == "RLC202")


def test_an_agent_config_validates():
    agent = {"agentloop": {"group_name": "AgentLoopWorkerGroup", "max_turns": 5}, "tools": {"search": {"topk": 3}}}
    result = variant(agent)
    assert result.ok and result.pipeline is None, codes(result)


@pytest.mark.parametrize("task,name", [("sft", "RLinf SFT pipeline"), ("offline", "RLinf offline RL pipeline")])
def test_sft_and_offline_configs_are_named_not_modelled(task, name):
    text = f"runner:\n  task_type: {task}\n  my_runner_key: 3\nactor:\n  training_backend: fsdp\ncluster:\n" \
           f"  num_nodes: 1\n  component_placement:\n    actor: all\n"
    result = check_text(text, f"{task}.yaml", dialect="rlinf")
    assert result.pipeline == name
    assert [d.code for d in result.diagnostics] == ["RLC116"] and result.ok


def test_autocast_with_fsdp_mixed_precision_is_refused_only_where_rlinf_refuses_it():
    text = EMBODIED.replace("  fsdp_config:\n", "  fsdp_config:\n    amp_autocast:\n      enabled: true\n")
    assert ("RLC301", "actor.fsdp_config.amp_autocast.enabled", "error") in codes(
        check_text(text, "e.yaml", dialect="rlinf"))
    fp32 = text.replace("_dtype: bf16", "_dtype: fp32")  # autocast without FSDP mixed precision is fine
    assert not [c for c in codes(check_text(fp32, "e.yaml", dialect="rlinf")) if c[0] == "RLC301"]
    older = check_text(text, "e.yaml", dialect="rlinf", release="2025-10")  # 2025-10 never read amp_autocast
    assert not [c for c in codes(older) if c[0] == "RLC301"]


# ---- the run ledger -----------------------------------------------------------------------------------------------

def _notes(result) -> dict:
    return {d.path: d.message for d in result.diagnostics if d.code == "RLC118"}


def test_the_rlinf_ledger_is_complete_and_every_field_has_a_fate():
    from rlcfg.schema.ledger import fates

    assert DIALECT.ledger_complete
    found = dict(fates(RLinfConfig))
    assert all(f is not None for f in found.values())
    # generated keys: an unmodelled algorithm key is refused, an engine key is inert
    assert found[("algorithm", "reinpp_kl_beta")].kind == "refused"
    assert found[("rollout", "sglang", "use_torch_compile")].kind == "inert"
    # the settings the issue measured as silently ignored
    for key in ("early_stop_imp_ratio", "importance_sampling_fix", "importance_sampling_clip", "clip_log_ratio_min",
                "loss_type", "adv_type"):
        assert found[("algorithm", key)].kind == "honored", key
    assert found[("algorithm", "use_valid_token_scale")].kind == "honored"
    assert found[("algorithm", "sampling_params", "repetition_penalty")].kind == "honored"
    # RLinf's rollout workers never pass min_new_tokens to their engines
    assert found[("algorithm", "sampling_params", "min_new_tokens")].kind == "inert"


def test_sampling_penalties_are_run_not_refused():
    result = variant({"algorithm.sampling_params.repetition_penalty": 1.1,
                      "algorithm.sampling_params.min_new_tokens": 8})
    notes = _notes(result)
    assert not {"algorithm.sampling_params.repetition_penalty", "algorithm.sampling_params.min_new_tokens"} & set(notes)


def test_a_per_micro_batch_mean_runs_except_over_token_budget_micro_batches():
    # rlcfg runs RLinf's mean of per-micro-batch token means (loss_normalization "micro-batch") ...
    assert not _notes(variant({"algorithm.training_batch_size_per_gpu": 2}))
    # ... but not over micro-batches cut by max_tokens_per_mbs.
    assert "runner.enable_dynamic_batch_size" in _notes(variant({"runner.enable_dynamic_batch_size": True}))
    assert "runner.enable_dynamic_batch_size" not in _notes(
        variant({"runner.enable_dynamic_batch_size": True, "algorithm.use_valid_token_scale": True,
                 "algorithm.n_minibatches": 1}))
    # The collocated Megatron actor's use_valid_token_scale runs over one mini-batch or several (their token losses
    # over the step's tokens); the pipelined actor's estimate of those tokens does not.
    for minibatches in (1, 4):
        assert not _notes(variant({"algorithm.training_batch_size_per_gpu": 2, "algorithm.use_valid_token_scale": True,
                                   "algorithm.n_minibatches": minibatches}))
    # The pipelined actor's estimate of those tokens runs too (tests/dialects/rlinf/test_lower.py).
    disaggregated = {"cluster.component_placement": {"actor": "0-3", "rollout": "4-7"},
                     "algorithm.use_valid_token_scale": True, "algorithm.n_minibatches": 1}
    assert "algorithm.use_valid_token_scale" not in _notes(variant(disaggregated))
    assert "algorithm.use_valid_token_scale" in _notes(variant({"algorithm.use_valid_token_scale": True,
                                                                "algorithm.loss_agg_func": "seq-mean-token-sum"}))


def test_rlinf_2025_08s_estimate_from_the_last_steps_responses_is_refused():
    pipelined = variant({"cluster.num_gpus_per_node": 3, "algorithm.use_valid_token_scale": True,
                         "cluster.component_placement": {"actor": "0", "rollout": "1", "inference": "2"}},
                        base=FIXTURES / "seed.yaml")
    assert pipelined.ok and pipelined.release == "2025-08", codes(pipelined)
    assert "previous step's mean response length" in _notes(pipelined)["algorithm.use_valid_token_scale"]


def test_one_generation_batch_a_step_runs_and_more_are_refused():
    assert "algorithm.max_num_gen_batches" not in _notes(variant({"algorithm.max_num_gen_batches": 1}))
    notes = _notes(variant({"algorithm.max_num_gen_batches": 2}))
    assert "rollout_batch_size × 2 prompts a step" in notes["algorithm.max_num_gen_batches"]


def test_losses_and_advantages_rlcfg_runs_are_not_refused():
    for changes in ({"algorithm.loss_type": "actor"}, {"algorithm.adv_type": "grpo"},
                    {"algorithm.importance_sampling_fix": True, "algorithm.importance_sampling_clip": 2.0},
                    {"algorithm.early_stop_imp_ratio": 3.0}):
        assert not _notes(variant(changes)), changes


def test_an_unmodelled_algorithm_key_is_refused():
    assert "algorithm.reinpp_kl_beta" in _notes(variant({"algorithm.reinpp_kl_beta": 0.01}))


def test_the_fsdp_actors_own_schedule_keys_are_refused():
    notes = _notes(variant({"actor.optim.lr_scheduler": "cosine", "actor.optim.lr_warmup_steps": 10}))
    assert {"actor.optim.lr_scheduler", "actor.optim.lr_warmup_steps"} <= set(notes)


def test_an_fsdp_config_without_clip_ratio_c_is_refused():
    fsdp = {"actor.training_backend": "fsdp",
            "actor.fsdp_config": {"mixed_precision": {"param_dtype": "bf16", "reduce_dtype": "fp32",
                                                      "buffer_dtype": "fp32"}}}
    assert "algorithm.clip_ratio_c" in _notes(variant(fsdp, delete=("algorithm.clip_ratio_c",)))
    assert "algorithm.clip_ratio_c" not in _notes(variant(fsdp))


# ---- inventoried sections, built when a document has them --------------------------------------------------------


def test_a_type_error_inside_an_inventoried_section_is_reported_at_its_key():
    result = variant({"actor.fsdp_config.amp_autocast": {"enabled": 3, "precisoin": "bf16"}})
    assert ("RLC200", "actor.fsdp_config.amp_autocast.enabled", "error") in codes(result)
    [typo] = [d for d in result.diagnostics if d.path == "actor.fsdp_config.amp_autocast.precisoin"]
    assert "precision" in (typo.hint or "")


def test_an_inventoried_section_written_as_a_scalar_where_rlinf_allows_one_is_accepted():
    result = variant({"rollout.sampling_params": "greedy"})
    assert not [c for c in codes(result) if c[1].startswith("rollout.sampling_params")]


def test_validating_a_reasoning_config_builds_only_the_inventoried_sections_it_has():
    # RLinf's inventory has about two hundred sections, most of them embodied simulator settings: a reasoning
    # config must not pay for building them.
    probe = ("import sys\n"
             "from rlcfg.frontend import check_file\n"
             "from rlcfg.dialects.rlinf import inventoried\n"
             "assert check_file(sys.argv[1]).ok\n"
             "print(inventoried.extension.cache_info().currsize, len(inventoried._CHILDREN))\n")
    done = subprocess.run([sys.executable, "-c", probe, str(TEMPLATE)], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    built, inventoried = map(int, done.stdout.split())
    assert built < inventoried / 3, (built, inventoried)


def test_a_reasoning_config_is_checked_without_building_the_inventoried_fields_of_its_sections():
    # The hand-written sections hold some nine hundred inventoried keys, which a reasoning config does not write;
    # their fields are built when asked for (Inventoried): here, from the compiled schema, never.
    probe = ("import sys\n"
             "from rlcfg.frontend import check_file\n"
             "from rlcfg.dialects.rlinf import inventoried\n"
             "result = check_file(sys.argv[1])\n"
             "assert result.ok and not result.diagnostics, result.diagnostics\n"
             "print(sum(len(c._inventory_fields) for c in inventoried._DECLARED))\n"
             "print(sum(c._inventory_complete for c in inventoried._DECLARED))\n")
    for run in range(2):  # the first run may build the schemas; the second loads them
        done = subprocess.run([sys.executable, "-c", probe, str(TEMPLATE)], capture_output=True, text=True, cwd=ROOT,
                              timeout=120)
        assert done.returncode == 0, done.stderr
    fields, completed = map(int, done.stdout.split())
    assert (fields, completed) == (0, 0)


def test_an_inventoried_key_is_found_by_its_key_without_building_its_neighbours():
    from rlcfg.dialects.rlinf import inventoried
    from rlcfg.schema.base import declared_field

    root = RLinfConfig
    cluster = declared_field(root, ("cluster",))[0].annotation
    key = next(k for k, name in inventoried._layout("cluster").items()
               if name not in cluster.hand_written_fields())
    info, owner = declared_field(root, ("cluster", key))
    assert owner is cluster and (info.alias or key) == key and "A key of RLinf" in info.description
    # the full field list, built later, holds the very same field, in the inventory's order
    assert list(cluster.model_fields.values()).count(info) == 1
    assert list(cluster.model_fields)[:len(inventoried._layout("cluster"))] == \
        list(inventoried._layout("cluster").values())


def test_a_model_parallel_size_that_cannot_fill_the_usual_node_is_a_warning_when_nodes_are_uncounted():
    result = check_file(str(TEMPLATE), ["actor.model.tensor_model_parallel_size=3", "rollout.tensor_parallel_size=3",
                                        "cluster.num_gpus_per_node=null"])
    warned = {d.path: d for d in result.diagnostics if d.code == "RLC400"}
    assert result.errors == 0 and set(warned) == {"actor.model.tensor_model_parallel_size",
                                                  "rollout.tensor_parallel_size"}
    assert all(d.severity.value == "warning" for d in warned.values())
    assert "on nodes of 8 GPUs (assumed; `cluster.num_gpus_per_node` is not set)" in \
        warned["actor.model.tensor_model_parallel_size"].message
    # a size that divides the assumed node says nothing
    quiet = check_file(str(TEMPLATE), ["actor.model.tensor_model_parallel_size=4", "cluster.num_gpus_per_node=null"])
    assert not [d for d in quiet.diagnostics if d.code == "RLC400"]


def test_a_model_parallel_size_that_cannot_fill_the_assumed_node_golden():
    run = cli("validate", str(TEMPLATE.relative_to(ROOT)), "actor.model.tensor_model_parallel_size=3",
              "rollout.tensor_parallel_size=3", "cluster.num_gpus_per_node=null", cwd=ROOT)
    assert run.returncode == 0
    assert_golden("rlinf/model-parallel-on-an-assumed-node.txt", run.stdout)
