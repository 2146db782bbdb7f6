"""The AReaL dialect: seed coverage, kind detection, each rule, the allocation grammar, golden diagnostics."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from rlcfg.frontend import check_file, check_text
from rlcfg.dialects.areal import DIALECT
from rlcfg.dialects.areal import allocation as alloc
from rlcfg.dialects.areal import models as areal
from rlcfg.dialects.areal.rules import RULES
from rlcfg.schema.base import choices_of, field_at, field_releases, iter_fields, section_types
from rlcfg.source.tree import MISSING
from tests.helpers import ROOT, TEMPLATES, assert_golden, cli, seed

# AReaL's own GSM8K examples, as users write them: the templates are rlcfg's choices, these are the dialect.
GRPO_TEMPLATE = ROOT / "tests" / "fixtures" / "areal" / "gsm8k-grpo-v0.3.yaml"
SFT_TEMPLATE = TEMPLATES / "areal-sft.yaml"
BROKEN = ROOT / "tests" / "fixtures" / "areal" / "broken.yaml"
PPO_TEMPLATE = ROOT / "tests" / "fixtures" / "areal" / "gsm8k-ppo-v1.0.yaml"


# What `rlcfg run` refuses (the run-ledger tests check those), and what it runs that a config file alone does not
# name (tests/dialects/areal/test_entries.py).
RUN_NOTES = ("RLC118", "RLC124")


def findings(result) -> list:
    """The diagnostics, without the notes on what `rlcfg run` refuses or assumes."""
    return [d for d in result.diagnostics if d.code not in RUN_NOTES]

# ---- seed coverage -----------------------------------------------------------------------------------------

SEED_SECTIONS = {
    "section-base-experiment": areal.BaseExperimentConfig,
    "section-sft": areal.SFTConfig,
    "section-grpo": areal.GRPOConfig,
    "section-reward-model": areal.RWConfig,
    "section-train-engine": areal.TrainEngineConfig,
    "section-ppo-actor": areal.PPOActorConfig,
    "section-optimizer": areal.OptimizerConfig,
    "section-microbatch": areal.MicroBatchSpec,
    "section-inference-engine": areal.InferenceEngineConfig,
    "section-sglang": areal.SGLangConfig,
    "section-generation": areal.GenerationHyperparameters,
    "section-dataset": areal.DatasetConfig,
    "section-normalization": areal.NormConfig,
    "section-cluster": areal.ClusterSpecConfig,
    "section-launcher": areal.LauncherConfig,
    "section-stats-logger": areal.StatsLoggerConfig,
    "section-saver": areal.SaverConfig,
    "section-evaluator": areal.EvaluatorConfig,
    "section-recovery": areal.RecoverConfig,
    "section-scheduler": areal.SchedulerConfig,
}

# Documented as **Required** (built by a default factory) but optional (null) in rlcfg, because AReaL 1.0
# made them optional or renamed them and the 1.0 layout must validate too. Their v0.3 requirement is a rule.
OPTIONAL_IN_RLCFG = {
    ("section-grpo", "ref"): "1.0 makes `ref` optional; rule areal/reference-model warns when v0.3 needs it",
    ("section-sft", "model"): "1.0 renamed it `actor`; rule areal/sft-model requires one of the two",
    ("section-reward-model", "model"): "same as SFT",
}


def _seed_tables() -> dict[str, list[tuple[str, str, str, str]]]:
    """anchor -> rows of (name, type, default, description) of the seed's parameter tables."""
    text = seed("004")
    tables: dict[str, list] = {}
    anchor = None
    for line in text.splitlines():
        found = re.match(r"^\((section-[\w-]+)\)=", line)
        if found:
            anchor = found.group(1)
            tables[anchor] = []
            continue
        if anchor and line.startswith("| `"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
            name, kind, default, description = cells[0].strip("`"), cells[1], cells[2], cells[3]
            tables[anchor].append((name, kind.replace("\\|", "|"), default, description))
    return tables


def _documented_default(text: str):
    if text == "**Required**":
        return "required-factory"
    value = text.strip("`")
    if value == '"???"':
        return MISSING
    if value.startswith('"'):
        return value.strip('"')
    return {"None": None, "True": True, "False": False}.get(value, None) if value in ("None", "True", "False") \
        else (float(value) if re.search(r"[.e]", value) else int(value))


def test_the_seed_has_every_documented_table():
    assert set(_seed_tables()) == set(SEED_SECTIONS)


@pytest.mark.parametrize("anchor", sorted(SEED_SECTIONS))
def test_every_documented_parameter_exists_with_its_default(anchor):
    model = SEED_SECTIONS[anchor]
    rows = _seed_tables()[anchor]
    assert rows, anchor
    fields = {(info.alias or name): info for name, info in model.model_fields.items()}
    for name, _kind, default_text, _description in rows:
        assert name in fields, f"{anchor}: `{name}` is documented but missing from {model.__name__}"
        info = fields[name]
        expected = _documented_default(default_text)
        if expected == MISSING:
            assert info.is_required(), f"{anchor}.{name} is `???` in the seed and must be REQUIRED"
        elif expected == "required-factory":
            if (anchor, name) in OPTIONAL_IN_RLCFG:
                assert info.default is None
                continue
            assert info.default_factory is not None, f"{anchor}.{name} is built by a default factory in the seed"
        else:
            assert not info.is_required(), f"{anchor}.{name} has a default in the seed"
            actual = info.default_factory() if info.default_factory else info.default
            assert actual == expected and type(actual) is type(expected) or (
                isinstance(expected, int) and isinstance(actual, float) and actual == expected), \
                f"{anchor}.{name}: seed default {expected!r}, schema {actual!r}"


@pytest.mark.parametrize("anchor", sorted(SEED_SECTIONS))
def test_documented_choices_are_enforced(anchor):
    model = SEED_SECTIONS[anchor]
    fields = {(info.alias or name): info for name, info in model.model_fields.items()}
    for name, _kind, _default, description in _seed_tables()[anchor]:
        found = re.search(r"Choices:\*?\*?\s*(.*)$", description)
        if not found:
            continue
        documented = re.findall(r"`([^`]+)`", found.group(1)) or [c.strip(" .") for c in found.group(1).split(",")]
        documented = [c.split(".")[0].strip() for c in documented if c.strip()]
        allowed = choices_of(fields[name].annotation)
        assert allowed is not None, f"{anchor}.{name} documents choices but accepts any string"
        assert set(documented) <= set(allowed), (anchor, name, documented, allowed)


def test_every_field_has_a_description():
    for root in DIALECT.variants().values():
        for path, info, _owner in iter_fields(root):
            assert info.description and len(info.description) > 8, ".".join(path)


def test_the_unenforced_choices_of_areal_are_literals():
    # research/validation-rules.md: AReaL documents these choices without checking them.
    actor = areal.PPOActorConfig.model_fields
    assert set(choices_of(actor["kl_estimator"].annotation)) == {"k1", "k2", "k3"}
    assert set(choices_of(actor["importance_sampling_level"].annotation)) == {"token", "sequence"}
    assert set(choices_of(actor["weight_update_mode"].annotation)) == {"disk", "xccl"}
    assert "sgd" in choices_of(areal.OptimizerConfig.model_fields["type"].annotation)
    assert set(choices_of(areal.NameResolveConfig.model_fields["type"].annotation)) == {"nfs", "etcd3", "ray"}
    assert set(choices_of(areal.SchedulingStrategy.model_fields["type"].annotation)) == {"separation", "colocation"}


# ---- configs written from the seed ---------------------------------------------------------------------------


def _filled_defaults(root) -> dict:
    """Every documented key at its default, with the mandatory `???` values given."""
    def fill(node, path=()):
        if isinstance(node, dict):
            return {k: fill(v, path + (k,)) for k, v in node.items()}
        if node == MISSING:
            return {"experiment_name": "demo", "trial_name": "t0", "fileroot": "/tmp/areal", "path": "data/x",
                    "type": "rl"}[path[-1]]
        return node
    data = fill(DIALECT.defaults(root))
    for optional in ("ref", "model"):  # the seed builds these by default factory: write them out
        if optional in root.model_fields and data.get(optional) is None:
            data[optional] = fill(DIALECT.defaults(areal.PPOActorConfig if optional == "ref"
                                                         else areal.TrainEngineConfig))
    return _only_in(root, data, "0.3")


# Keys of AReaL v0.4 to v0.5, in neither claimed release (rule areal/legacy-imp-weight reports them).
LATER_SPELLINGS = {"behave_imp_weight_cap", "behave_imp_weight_mode"}


def _only_in(root, data: dict, release: str, prefix: tuple = ()) -> dict:
    """The keys of `data` that exist in `release` (the seed documents AReaL 0.3)."""
    out = {}
    for key, value in data.items():
        info, _owner = field_at(root, prefix + (key,))
        releases = field_releases(info) if info is not None else None
        if releases is not None and release not in releases or key in LATER_SPELLINGS:
            continue
        out[key] = _only_in(root, value, release, prefix + (key,)) if isinstance(value, dict) and info is not None \
            and section_types(info.annotation) else value
    return out


@pytest.mark.parametrize("kind", ["grpo", "sft", "rw"])
def test_a_config_of_documented_defaults_validates(kind, tmp_path):
    root = DIALECT.variants()[kind]
    data = _filled_defaults(root)
    if kind == "rw":
        data["model"]["is_critic"] = True
    path = tmp_path / f"{kind}.yaml"
    with path.open("w") as out:
        YAML().dump(data, out)
    result = check_file(str(path), dialect="areal")
    assert result.variant == kind
    assert result.errors == 0, [d.message for d in result.diagnostics]


@pytest.mark.parametrize("template", sorted(TEMPLATES.glob("areal-*.yaml")), ids=lambda p: p.stem)
def test_templates_are_clean(template):
    result = check_file(str(template))
    assert result.dialect == "areal"
    # Nothing to fix; what `rlcfg run` refuses is listed as notes (tests below).
    assert findings(result) == []
    first = template.read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=../schemas/areal.schema.json"
    assert f"rlcfg validate templates/{template.name}" in template.read_text()


def test_describe():
    assert check_file(str(GRPO_TEMPLATE)).summary == \
        "GRPO, FSDP training, SGLang rollout, allocation sglang.d4p1t1+d4p1t1 on 8 GPUs"
    assert check_file(str(SFT_TEMPLATE)).summary == "SFT, FSDP training, allocation d8p1t1 on 8 GPUs"


V1_GRPO = """
experiment_name: gsm8k-grpo
trial_name: trial0
cluster: {n_nodes: 1, n_gpus_per_node: 8, fileroot: /tmp/areal}
rollout:
  backend: "sglang:d4p1t1"
gconfig: {n_samples: 4, max_new_tokens: 1024}
actor:
  backend: "fsdp:d4p1t1"
  experiment_name: ${experiment_name}
  trial_name: ${trial_name}
  path: Qwen/Qwen2.5-1.5B-Instruct
  kl_ctl: 0.0
  weight_update_mode: xccl
  kl_estimator: k3
  use_decoupled_loss: true
  rejection_sampling: {level: token, action: mask, metric: ratio, upper: 5.0}
ref:
  backend: ${actor.backend}
  experiment_name: ${experiment_name}
  trial_name: ${trial_name}
  scheduling_strategy: {type: colocation, target: actor}
train_dataset: {path: openai/gsm8k, type: rl, batch_size: 64}
saver: {experiment_name: x, trial_name: y, fileroot: /tmp, mode: auto}
evaluator: {experiment_name: x, trial_name: y, fileroot: /tmp}
recover: {experiment_name: x, trial_name: y, fileroot: /tmp, mode: auto}
stats_logger: {experiment_name: x, trial_name: y, fileroot: /tmp, trackio: {mode: disabled}}
"""


def test_the_1_0_layout_validates():
    result = check_text(V1_GRPO, "v1.yaml")
    assert findings(result) == [], [d.message for d in result.diagnostics]
    assert result.summary == "GRPO, FSDP training, SGLang rollout, per-engine backends on 8 GPUs"


def test_the_1_0_sft_layout_names_the_model_actor():
    text = SFT_TEMPLATE.read_text().replace("\nmodel:", "\nactor:").replace("${model.path}", "${actor.path}")
    text = text.replace("allocation_mode: d8p1t1", "")
    text = text.replace("  path: Qwen/Qwen2.5-1.5B-Instruct", "  path: Qwen/Qwen2.5-1.5B-Instruct\n  backend: fsdp:d8")
    result = check_text(text, "sft1.yaml")
    assert result.variant == "sft" and result.errors == 0, [d.message for d in result.diagnostics]
    assert result.summary == "SFT, FSDP training, per-engine backends on 8 GPUs"


def test_v0_3_keys_in_a_1_0_config_are_flagged():
    # AReaL 1.0 stops at load on a v0.3 key (it used to be a warning here: a false acceptance).
    result = check_text(V1_GRPO + "async_training: false\n", "v1.yaml")
    assert [(d.code, d.path) for d in findings(result)] == [("RLC113", "async_training")]
    assert result.errors == 1 and result.release == "1.0"


def test_a_bare_v0_3_backend_name_is_accepted():
    result = check_file(str(GRPO_TEMPLATE), ["+actor.backend=fsdp"])
    assert findings(result) == []


# ---- kind detection ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("data, kind", [
    ({"experiment_name": "a", "trial_name": "b", "rollout": {}}, "grpo"),
    ({"experiment_name": "a", "trial_name": "b", "gconfig": {}}, "grpo"),
    ({"experiment_name": "a", "trial_name": "b", "ref": {}}, "grpo"),
    ({"experiment_name": "a", "trial_name": "b", "async_training": True}, "grpo"),
    ({"experiment_name": "a", "trial_name": "b", "model": {"is_critic": True}}, "rw"),
    ({"experiment_name": "a", "trial_name": "b", "actor": {"is_critic": True}}, "rw"),
    ({"experiment_name": "a", "trial_name": "b", "train_dataset": {"type": "rw"}}, "rw"),
    ({"experiment_name": "a", "trial_name": "b", "model": {}}, "sft"),
    ({"experiment_name": "a", "trial_name": "b", "actor": {"path": "x"}}, "sft"),  # 1.0 SFT
    ({"experiment_name": "a", "trial_name": "b"}, "sft"),
])
def test_kind_detection(data, kind):
    assert DIALECT.root(data) is DIALECT.variants()[kind]


# ---- one test per rule -------------------------------------------------------------------------------------

# rule id -> (template, overrides, expected (code, path) among the findings)
RULE_CASES = {
    # a config file alone: the launch that names a script is the clean case (test_entries.py)
    "areal/entry-script": (GRPO_TEMPLATE, [], ("RLC124", "")),
    "areal/names": (GRPO_TEMPLATE, ["experiment_name=my/exp"], ("RLC307", "experiment_name")),
    "areal/allocation-syntax": (GRPO_TEMPLATE, ["allocation_mode=sglang.d4+fsdp.d4"], ("RLC204", "allocation_mode")),
    "areal/backend-syntax": (GRPO_TEMPLATE, ["actor.backend=sglang:d4"], ("RLC204", "actor.backend")),
    "areal/allocation-cluster": (GRPO_TEMPLATE, ["allocation_mode=sglang.d8p1t1+d4p1t1"],
                                 ("RLC403", "allocation_mode")),
    "areal/colocation-sizes": (GRPO_TEMPLATE, ["actor.backend=fsdp:d4", "rollout.backend=sglang:d2",
                                               "++rollout.scheduling_strategy.type=colocation",
                                               "++rollout.scheduling_strategy.target=actor",
                                               "enable_offload=true", "~allocation_mode"],
                               ("RLC402", "rollout.backend")),
    "areal/allocation-present": (GRPO_TEMPLATE, ["allocation_mode=d8p1t1"], ("RLC302", "allocation_mode")),
    "areal/allocation-vs-backends": (GRPO_TEMPLATE, ["actor.backend=fsdp:d2", "rollout.backend=sglang:d4"],
                                     ("RLC305", "actor.backend")),
    "areal/sft-model": (SFT_TEMPLATE, ["~model"], ("RLC203", "model")),
    "areal/rw-critic": (SFT_TEMPLATE, ["train_dataset.type=rw"], ("RLC302", "model.is_critic")),
    "areal/norm-group-size": (GRPO_TEMPLATE, ["actor.adv_norm.mean_level=group", "++actor.adv_norm.group_size=2"],
                              ("RLC305", "actor.adv_norm.group_size")),
    "areal/group-size": (GRPO_TEMPLATE, ["actor.group_size=8"], ("RLC305", "actor.group_size")),
    "areal/zero-minibatches": (GRPO_TEMPLATE, ["actor.ppo_n_minibatches=0"], ("RLC300", "actor.ppo_n_minibatches")),
    "areal/temperature": (GRPO_TEMPLATE, ["actor.temperature=0.7"], ("RLC305", "actor.temperature")),
    "areal/fsdp-memory-efficient-load": (GRPO_TEMPLATE, ["++actor.fsdp.memory_efficient_load=true",
                                                         "actor.init_from_scratch=true"],
                                         ("RLC301", "actor.fsdp.memory_efficient_load")),
    "areal/scheduling-spec": (GRPO_TEMPLATE, ["++rollout.admin_api_key= "], ("RLC201", "rollout.admin_api_key")),
    "areal/archon": (GRPO_TEMPLATE, ["++actor.archon.fp8_config.mode=blockwise",
                                     "++actor.archon.fp8_config.use_triton=false"],
                     ("RLC306", "actor.archon.fp8_config.use_triton")),
    "areal/megatron": (GRPO_TEMPLATE, ["allocation_mode=sglang.d4p1t1+megatron:d4p1t1",
                                       "++actor.megatron.virtual_pipeline_parallel_size=2"],
                       ("RLC302", "actor.megatron.virtual_pipeline_parallel_size")),
    "areal/c-clip": (GRPO_TEMPLATE, ["++actor.c_clip=1.0"], ("RLC201", "actor.c_clip")),
    "areal/behav-imp-weight-cap": (GRPO_TEMPLATE, ["actor.use_decoupled_loss=false"],
                                   ("RLC307", "actor.behav_imp_weight_cap")),
    "areal/legacy-imp-weight": (GRPO_TEMPLATE, ["++actor.behave_imp_weight_mode=token_mask"],
                                ("RLC113", "actor.behave_imp_weight_mode")),
    "areal/rejection-sampling": (GRPO_TEMPLATE, ["++actor.rejection_sampling.metric=kl_k2",
                                                 "++actor.rejection_sampling.action=clamp"],
                                 ("RLC306", "actor.rejection_sampling.action")),
    "areal/sapo": (GRPO_TEMPLATE, ["++actor.use_sapo_loss=true"], ("RLC301", "actor.use_sapo_loss")),
    "areal/decoupled-recompute": (GRPO_TEMPLATE, ["actor.recompute_logprob=false"],
                                  ("RLC304", "actor.recompute_logprob")),
    "areal/overlong-penalty": (GRPO_TEMPLATE, ["++actor.overlong_reward_penalty=true"],
                               ("RLC302", "actor.overlong_reward_penalty")),
    "areal/reference-model": (GRPO_TEMPLATE, ["actor.backend=fsdp:d4p1t1", "~ref", "actor.kl_ctl=0.1"],
                              ("RLC307", "actor.kl_ctl")),
    "areal/queue-size": (GRPO_TEMPLATE, ["rollout.queue_size=16"], ("RLC300", "rollout.queue_size")),
    "areal/micro-batch-granularity": (GRPO_TEMPLATE, ["++actor.mb_spec.granularity=3"],
                                      ("RLC300", "actor.mb_spec.granularity")),
    "areal/batch-data-parallel": (SFT_TEMPLATE, ["train_dataset.batch_size=130"],
                                  ("RLC304", "train_dataset.batch_size")),
    "areal/generation-lengths": (GRPO_TEMPLATE, ["gconfig.min_new_tokens=2048"], ("RLC303", "gconfig.min_new_tokens")),
    "areal/offpolicyness": (GRPO_TEMPLATE, ["async_training=false"], ("RLC307", "rollout.max_head_offpolicyness")),
    "areal/offload": (GRPO_TEMPLATE, ["++actor.offload=true"], ("RLC302", "actor.offload")),
    "areal/rollout-backend-features": (GRPO_TEMPLATE, ["++rollout.return_routed_experts=true",
                                                       "allocation_mode=vllm:d4p1t1+fsdp:d4p1t1"],
                                       ("RLC306", "rollout.return_routed_experts")),
    "areal/backend-required": (GRPO_TEMPLATE, ["rollout.backend=sglang:d4p1t1"], ("RLC203", "actor.backend")),
    "areal/total-epochs": (GRPO_TEMPLATE, ["actor.backend=fsdp:d4p1t1", "total_train_epochs=0"],
                           ("RLC201", "total_train_epochs")),
    "areal/recover-mode": (GRPO_TEMPLATE, ["actor.backend=fsdp:d4p1t1", "recover.mode=fault"],
                           ("RLC202", "recover.mode")),
    # a 1.0 document (its engines' backends) with 0.5's JSON-string spelling
    "areal/lora-modules": (GRPO_TEMPLATE, ["actor.backend=fsdp:d4p1t1", "vllm.lora_modules='{\"name\": \"a\"}'"],
                           ("RLC200", "vllm.lora_modules")),
    "areal/micro-batch-tokens": (GRPO_TEMPLATE, ["++actor.mb_spec.max_tokens_per_mb=512"],
                                 ("RLC303", "actor.mb_spec.max_tokens_per_mb")),
    "areal/run-ledger": (PPO_TEMPLATE, ["actor.temperature=0.7"], ("RLC118", "actor.temperature")),
}


def test_every_rule_has_a_case():
    assert {rule.id for rule in RULES} == set(RULE_CASES)


@pytest.mark.parametrize("rule_id", sorted(RULE_CASES))
def test_rule(rule_id):
    template, overrides, expected = RULE_CASES[rule_id]
    result = check_file(str(template), overrides)
    found = [(d.code, d.path) for d in result.diagnostics if d.rule == rule_id]
    assert expected in found, [(d.code, d.path, d.rule, d.message) for d in result.diagnostics]
    if rule_id != "areal/entry-script":
        clean = check_file(str(template))
        assert not [d for d in clean.diagnostics if d.rule == rule_id]


def test_rule_messages_name_keys_and_values():
    result = check_file(str(GRPO_TEMPLATE), ["allocation_mode=sglang.d8p1t1+d4p1t1"])
    [finding] = [d for d in result.diagnostics if d.code == "RLC403"]
    assert "12 GPUs" in finding.message and "8" in finding.message and "n_nodes" in finding.message
    assert finding.hint


def test_a_batch_that_does_not_split_over_the_trainer_ranks_names_what_is_dropped():
    # d2 of megatron:d2p2t2: each rank loads 127 // 2 = 63 samples, so one sample of each batch never trains.
    result = check_file(str(SFT_TEMPLATE), ["train_dataset.batch_size=127", "allocation_mode=megatron:d2p2t2"])
    [finding] = [d for d in result.diagnostics if d.rule == "areal/batch-data-parallel"]
    assert finding.severity.value == "warning"
    assert "`train_dataset.batch_size` (127)" in finding.message and "dp 2" in finding.message
    assert "1 sample of every batch of 127 is dropped" in finding.message
    assert finding.hint.endswith("126 or 128")
    # GRPO counts prompts; dp is that of the training part of `sglang.d4p1t1+d4p1t1`.
    result = check_file(str(GRPO_TEMPLATE), ["train_dataset.batch_size=258"])
    [finding] = [d for d in result.diagnostics if d.rule == "areal/batch-data-parallel"]
    assert "dp 4" in finding.message and "2 prompts of every batch of 258 are dropped" in finding.message
    assert finding.hint.endswith("256 or 260")


def test_the_batch_rule_speaks_only_of_a_batch_size_the_user_wrote():
    # The seed's default batch_size (1) against d8 is AReaL's own default, not the user's choice.
    text = SFT_TEMPLATE.read_text().replace("  batch_size: 128\n  shuffle: true\n", "  shuffle: true\n", 1)
    assert "batch_size: 128\n  shuffle: true" not in text.split("valid_dataset")[0]
    result = check_text(text, "sft.yaml")
    assert not [d for d in result.diagnostics if d.rule == "areal/batch-data-parallel"]


def test_idle_gpus_are_a_warning():
    result = check_file(str(GRPO_TEMPLATE), ["allocation_mode=sglang.d2p1t1+d4p1t1"])
    assert [(d.code, d.severity.value) for d in findings(result)] == [("RLC404", "warning")]


def test_the_default_cluster_is_not_checked():
    # The seed's default cluster (32 nodes × 8 GPUs) describes no real machine; only a written one counts.
    text = SFT_TEMPLATE.read_text().replace("  n_nodes: 1\n  n_gpus_per_node: 8\n", "")
    assert findings(check_text(text, "sft.yaml")) == []


def test_the_v0_3_dapo_example_allocation_is_rejected_with_a_fix():
    result = check_file(str(GRPO_TEMPLATE), ["allocation_mode=sglang.d4+fsdp.d4"])
    [finding] = [d for d in result.diagnostics if d.code == "RLC204"]
    assert "`fsdp:d4`" in finding.hint


# ---- allocation grammar ------------------------------------------------------------------------------------

HISTORICAL_FORMS = {
    # v0.3.x (the seed's era)
    "sglang.d4p1t1+d4p1t1": 8,
    "sglang:d4p1t1+d4p1t1": 8,
    "vllm.d2t2+d4": 8,
    "sglang.d4p1t1|d4p1t1": 4,
    "sglang.d4p1t1": 4,
    "sglang.d4p1t1+eval": 4,
    "sglang.d4p1t1+cpu": 4,
    "d8p1t1": 8,
    "d2p2t2": 8,
    "fsdp:d8": 8,
    "megatron:d2p2t2": 8,
    "sglang.d2p1t1+megatron:d2p2t1": 6,
    # v0.4.1 to v0.5: names, chains, colocation, archon, hybrid MoE
    "sglang:d4p1t1+fsdp:d4p1t1": 8,
    "sglang[rollout]:d4|fsdp[actor]:d4": 4,
    "sglang[rollout]:d2+fsdp[actor]:d4+fsdp[ref]:d2": 8,
    "sglang[rollout]:d4+fsdp[actor]:d4|fsdp[ref]:d4": 8,
    "[actor]:d4": 4,
    "archon:d4": 4,
    "megatron:(attn:d1p2t4|ffn:d1p2e4)": 8,
    "megatron[actor]:(attn:d2p1t2|ffn:e2t2)": 4,
    "vllm:d2t2+megatron:d2p2e2": 8,
    # pre-pattern modes the seed's description still names
    "manual": 0,
    "heuristic": 0,
}


@pytest.mark.parametrize("text, gpus", sorted(HISTORICAL_FORMS.items()))
def test_historical_forms_parse(text, gpus):
    parsed = alloc.parse(text)
    assert parsed.world == gpus
    assert alloc.check(parsed) == []
    assert alloc.parse(parsed.text()) == parsed


def test_whitespace_is_ignored():
    assert alloc.parse(" sglang : d4p1t1 + d4p1t1 ").text() == "sglang:d4p1t1+d4p1t1"


def test_a_bare_training_part_gets_the_backend_areal_picks():
    assert alloc.parse("d4p1t1").components()[0].effective_backend == "fsdp"
    assert alloc.parse("d2p2t1").components()[0].effective_backend == "megatron"
    assert alloc.parse("d2e2").components()[0].effective_backend == "megatron"


@pytest.mark.parametrize("text, fragment", [
    ("", "empty"),
    ("sglang.d4+fsdp.d4", "only an inference backend"),
    ("sglng:d4+d4", "not a backend"),
    ("sglang:d4c2+d4", "takes only the sizes d, t, p"),
    ("d0p1", "positive integer"),
    ("d04", "positive integer"),
    ("d4d2", "given twice"),
    ("sglang:d4+", "expected a backend"),
    ("sglang:d4++d4", "expected a backend"),
    ("fsdp[actor:d4", "expected `]`"),
    ("megatron:(attn:d2|d2)", "expected `ffn:`"),
    ("sglang:d4 d4", "expected `+`"),
    ("list(range(8))", "not a backend"),
    ("__import__('os')", "unexpected character"),
    ("sglang:d4;rm", "unexpected character"),
])
def test_malformed_allocations_are_syntax_errors(text, fragment):
    with pytest.raises(alloc.AllocationSyntaxError) as caught:
        alloc.parse(text)
    assert fragment in caught.value.message
    assert caught.value.hint


@pytest.mark.parametrize("text, code", [
    ("sglang[a]:d4+fsdp[a]:d4", "RLC204"),
    ("sglang:d2+fsdp:d4+fsdp:d2", "RLC204"),
    ("sglang[r]:d4|fsdp[a]:d2", "RLC402"),
    ("fsdp:d2p2", "RLC306"),
    ("fsdp:d2e2", "RLC306"),
    ("sglang:d2p2+d4", "RLC306"),
    ("megatron:d3e2", "RLC400"),
    ("megatron:(attn:d1p2t4|ffn:d2p2e4)", "RLC402"),
    ("megatron:(attn:d1p2t4|ffn:p1e4)", "RLC305"),
    ("d4+eval", "RLC204"),
])
def test_semantic_problems(text, code):
    assert code in [p.code for p in alloc.check(alloc.parse(text))]


@pytest.mark.parametrize("text", ["d4", "[actor]:d4", "sglang:d4+fsdp:d4", "sglang[r]:d4|fsdp[a]:d4", "sglang.d4",
                                  "fsdp.d4"])
def test_engine_backends_need_one_explicit_component(text):
    with pytest.raises(alloc.AllocationSyntaxError):
        alloc.parse_backend(text)


def test_engine_backend():
    component = alloc.parse_backend("megatron[actor]:d2p2t2")
    assert (component.backend, component.name, component.world) == ("megatron", "actor", 8)


_sizes = st.integers(min_value=1, max_value=16)


@st.composite
def _dims(draw, letters):
    chosen = draw(st.lists(st.sampled_from(letters), min_size=1, max_size=len(letters), unique=True))
    return alloc.Dims(tuple((letter, draw(_sizes)) for letter in chosen))


_names = st.one_of(st.none(), st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True))


@st.composite
def _component(draw):
    kind = draw(st.sampled_from(["inference", "train", "hybrid"]))
    name = draw(_names)
    if kind == "inference":
        return alloc.Component("inference", draw(st.sampled_from(alloc.INFERENCE_BACKENDS)), name,
                               draw(_dims(alloc.INFERENCE_DIMS)), separator=draw(st.sampled_from([":", "."])))
    backend = draw(st.sampled_from((None,) + alloc.TRAIN_BACKENDS))
    if kind == "hybrid":
        return alloc.Component("train", backend, name, hybrid=(draw(_dims(alloc.HYBRID_ATTN_DIMS)),
                                                               draw(_dims(alloc.HYBRID_FFN_DIMS))))
    return alloc.Component("train", backend, name, draw(_dims(alloc.TRAIN_DIMS)))


_allocations = st.lists(st.lists(_component(), min_size=1, max_size=3).map(tuple), min_size=1, max_size=3).map(
    lambda groups: alloc.Allocation(tuple(groups)))


@settings(max_examples=300, deadline=None)
@given(_allocations)
def test_parse_reads_what_format_prints(allocation):
    assert alloc.parse(alloc.format_allocation(allocation)) == allocation


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="sglangvlmfdpt0123456789:.+|[]() ace_x", max_size=30))
def test_any_text_parses_or_is_a_syntax_error(text):
    try:
        parsed = alloc.parse(text)
    except alloc.AllocationSyntaxError as exc:
        assert 0 <= exc.position <= len(text)
        return
    alloc.check(parsed)
    assert alloc.parse(parsed.text()) == parsed


# ---- golden diagnostics ------------------------------------------------------------------------------------


def test_broken_config_text():
    run = cli("validate", "tests/fixtures/areal/broken.yaml")
    assert run.returncode == 1
    assert_golden("areal/broken.txt", run.stdout)


def test_broken_config_json():
    run = cli("validate", "tests/fixtures/areal/broken.yaml", "--format", "json")
    assert run.returncode == 1
    payload = json.loads(run.stdout)
    assert all(d["location"] for d in payload["diagnostics"])
    assert_golden("areal/broken.json", run.stdout)


# ---- releases, pipelines and the rule fixes of issue 11 -----------------------------------------------------


@pytest.mark.parametrize("extra, release", [
    ("", "1.0"),  # V1_GRPO: per-engine `name:dims` backends
    ("async_training: true\n", "1.0"),  # a backend in the 1.0 form decides, whatever else is written
])
def test_the_release_is_inferred_from_the_keys(extra, release):
    assert check_text(V1_GRPO + extra, "v1.yaml").release == release


def test_v0_3_files_are_judged_by_the_newest_release_with_their_keys():
    grpo = check_file(str(GRPO_TEMPLATE))
    assert grpo.release == "0.3" and "`async_training` is a key of AReaL 0.3;" in grpo.release_reason
    # SFT's `model:` section is 0.3's and 0.4's (1.0 renamed it `actor:`, 0.5 ...): the newer of the two
    sft = check_file(str(SFT_TEMPLATE))
    assert sft.release == "0.4" and "`model` is a key of AReaL 0.3, 0.4;" in sft.release_reason


def test_the_releases_between_are_told_by_their_keys():
    """0.4 and 0.5 place engines by allocation_mode, like 0.3, but 0.5 dropped actor.group_size and the always-built
    ref; a file is judged by the newest release that has the most of its keys."""
    v04 = check_file(str(GRPO_TEMPLATE), ["~async_training"])
    assert v04.release == "0.4" and "`actor.group_size` is a key of AReaL 0.3, 0.4" in v04.release_reason
    v05 = check_file(str(GRPO_TEMPLATE), ["~async_training", "~actor.group_size", "~launcher"])
    assert v05.release == "0.5" and "`actor.behav_imp_weight_cap` is a key of AReaL 0.3, 0.4, 0.5" in v05.release_reason
    assert v05.ok, [d.message for d in v05.diagnostics if d.severity.name == "ERROR"]
    # 0.4 still builds `ref` from its defaults, whatever kl_ctl says; 0.5 does not
    no_ref = ["~async_training", "~ref"]
    assert ("RLC302", "ref") in {(d.code, d.path) for d in check_file(str(GRPO_TEMPLATE), no_ref).diagnostics}
    assert ("RLC302", "ref") not in {(d.code, d.path) for d in check_file(
        str(GRPO_TEMPLATE), [*no_ref, "~actor.group_size", "~launcher"]).diagnostics}


def test_a_pinned_release_wins():
    result = check_file(str(GRPO_TEMPLATE), release="1.0")
    assert {d.path for d in result.diagnostics if d.code == "RLC113"} == {
        "async_training", "actor.group_size", "actor.behav_imp_weight_cap", "launcher"}


def test_v1_keys_in_a_0_3_file_are_errors():
    result = check_file(str(GRPO_TEMPLATE), ["+actor.rejection_sampling.upper=5.0"])
    assert result.release == "0.3"
    assert [(d.code, d.path) for d in result.diagnostics if d.severity.name == "ERROR"] == \
        [("RLC113", "actor.rejection_sampling")]


def test_the_removed_importance_cap_is_an_error_in_1_0():
    result = check_text(V1_GRPO.replace("  kl_ctl: 0.0\n", "  kl_ctl: 0.0\n  behave_imp_weight_cap: 5.0\n"), "v1.yaml")
    found = [d for d in result.diagnostics if d.path == "actor.behave_imp_weight_cap"]
    assert [(d.code, d.severity.name) for d in found] == [("RLC113", "ERROR")]
    assert "rejection_sampling" in found[0].hint


@pytest.mark.parametrize("data, name", [
    ({"actor": {"beta": 0.1}, "ref": {}}, "AReaL DPO"),
    ({"tir": {"max_turns": 2}, "actor": {}}, "AReaL example-script TIRGRPOConfig (its own config class adds `tir`)"),
    ({"actor": {}, "ref": {}}, None),
])
def test_pipelines_rlcfg_does_not_model_are_named(data, name):
    assert DIALECT.pipeline(data) == name


def test_an_underscore_in_the_experiment_name_is_accepted():
    # AReaL documents "no `_`" but never checks it, and 13 of its own examples use one.
    result = check_file(str(GRPO_TEMPLATE), ["experiment_name=gsm8k_grpo"])
    assert findings(result) == []


def test_a_reference_model_that_is_never_built_takes_no_gpus():
    text = V1_GRPO.replace('backend: ${actor.backend}', 'backend: "fsdp:d4p1t1"').replace(
        "  scheduling_strategy: {type: colocation, target: actor}\n", "")
    assert check_text(text, "v1.yaml").errors == 0  # kl_ctl is 0: no reference model
    text = text.replace("kl_ctl: 0.0", "kl_ctl: 0.1")
    assert "RLC403" in {d.code for d in check_text(text, "v1.yaml").diagnostics}


def test_areals_own_bounds():
    cpu = V1_GRPO.replace("n_gpus_per_node: 8", "n_gpus_per_node: 0")
    assert check_text(cpu, "cpu.yaml").errors == 0  # AReaL's CPU example
    m2po = V1_GRPO.replace("  kl_ctl: 0.0\n", "  kl_ctl: 0.0\n  eps_clip: 0.0\n")
    assert check_text(m2po, "m2po.yaml").errors == 0  # AReaL's M2PO example


def test_a_micro_batch_budget_below_the_longest_sequence_fails_at_the_first_step():
    text = V1_GRPO.replace("  kl_ctl: 0.0\n", "  kl_ctl: 0.0\n  mb_spec: {max_tokens_per_mb: 512}\n")
    found = [d for d in check_text(text, "v1.yaml").diagnostics if d.path == "actor.mb_spec.max_tokens_per_mb"]
    assert [(d.code, d.severity.name) for d in found] == [("RLC303", "ERROR")]
    assert "AReaL accepts this at load but fails at the first training step" in found[0].message


def test_a_missing_ref_stops_0_3_but_not_1_0():
    assert ("RLC302", "ref") in {(d.code, d.path) for d in check_file(str(GRPO_TEMPLATE), ["~ref"]).diagnostics
                                 if d.severity.name == "ERROR"}
    text = V1_GRPO[:V1_GRPO.index("ref:")] + V1_GRPO[V1_GRPO.index("train_dataset:"):]
    assert check_text(text, "v1.yaml").errors == 0


def test_a_defaults_list_is_composed(tmp_path):
    # AReaL's loader is Hydra's compose, so a config may inherit from a sibling file.
    (tmp_path / "base.yaml").write_text(V1_GRPO)
    (tmp_path / "exp.yaml").write_text("defaults:\n  - base\n  - _self_\n\nexperiment_name: gsm8k-grpo-long\n"
                                       "gconfig: {n_samples: 4, max_new_tokens: 2048}\n")
    result = check_file(str(tmp_path / "exp.yaml"))
    assert result.dialect == "areal" and result.release == "1.0"
    assert result.errors == 0, [d.message for d in result.diagnostics]
    assert result.config.gconfig.max_new_tokens == 2048 and result.config.actor.backend == "fsdp:d4p1t1"


def test_1_0_documents_take_1_0_defaults():
    result = check_text(V1_GRPO, "v1.yaml")
    assert result.config.gconfig.max_tokens == 32768 and result.config.actor.gradient_checkpointing is False
    assert result.config.rollout.setup_timeout == 300.0 and result.config.sglang.disable_radix_cache is True
    old = check_file(str(GRPO_TEMPLATE))
    assert old.release == "0.3" and old.config.gconfig.max_tokens == 65536


def test_the_release_table_is_the_inventories():
    """rlcfg/dialects/areal/releases.json (which release has each field, each release's own defaults, the keys rlcfg
    does not model) is what tools/inventory/areal.py --tables writes from the inventories and the schema."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("areal_tool", ROOT / "tools" / "inventory" / "areal.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert areal.RELEASE_TABLE == json.loads(json.dumps(tool.tables(ROOT / "tests" / "inventory" / "areal")))


def test_each_release_takes_its_own_defaults():
    """AReaL 0.4 changed the optimizer's defaults (lr 2e-5 -> 1e-3, ...) and 0.5 the weight-update mode: a document
    judged by a release gets that release's values where it writes none."""
    for release, lr, beta2, mode in (("0.3", 2e-5, 0.95, "disk"), ("0.4", 1e-3, 0.999, "disk"),
                                     ("0.5", 1e-3, 0.999, "xccl"), ("1.0", 1e-3, 0.999, "xccl")):
        optimizer = DIALECT.defaults(areal.OptimizerConfig, release)
        actor = DIALECT.defaults(areal.PPOActorConfig, release)
        assert (optimizer["lr"], optimizer["beta2"], actor["weight_update_mode"]) == (lr, beta2, mode), release


# ---- the run ledger -------------------------------------------------------------------------------------------

from rlcfg.schema.ledger import fates  # noqa: E402

# The GRPO template as a 1.0 document (its 0.3-only keys removed), with per-engine backends.
V1 = ("~async_training", "~actor.group_size", "~actor.behav_imp_weight_cap", "~launcher", "+actor.backend=fsdp:d4p1t1",
      "+rollout.backend=sglang:d4p1t1", "+ref.backend=${actor.backend}", "+ref.scheduling_strategy.type=colocation",
      "+ref.scheduling_strategy.target=actor")


def refused_paths(path, *overrides) -> set[str]:
    result = check_file(str(path), list(overrides))
    assert result.errors == 0, [d.message for d in result.diagnostics if d.severity.name == "ERROR"]
    return {d.path for d in result.diagnostics if d.code == "RLC118"}


def test_every_key_declares_its_fate():
    assert DIALECT.ledger_complete
    for root in DIALECT.variants().values():
        assert all(fate is not None for _path, fate in fates(root))


def test_fates_of_the_algorithm_keys():
    found = dict(fates(areal.GRPOConfig))
    honored = ["actor.eps_clip", "actor.eps_clip_higher", "actor.c_clip", "actor.use_decoupled_loss",
               "actor.behav_imp_weight_cap", "actor.rejection_sampling.upper", "actor.use_sapo_loss",
               "actor.importance_sampling_level", "actor.kl_ctl", "actor.kl_estimator", "actor.reward_norm.mean_level",
               "actor.mask_no_eos_with_zero", "actor.overlong_reward_penalty", "actor.temperature", "gconfig.top_p",
               "ref.path", "ref.temperature", "critic.eps_clip", "gconfig.frequency_penalty", "gconfig.stop_token_ids",
               "rollout.max_head_offpolicyness", "rollout.max_concurrent_rollouts", "async_training",
               "actor.use_lora", "actor.lora_rank", "actor.lora_alpha", "actor.target_modules",
               "actor.prox_logp_method", "actor.recompute_logprob", "actor.m2_threshold"]
    refused = ["actor.dynamic_sampling", "actor.rejection_sampling.lower", "actor.rejection_sampling.level",
               "teacher", "rollout.agent"]
    inert = ["stats_logger.swanlab.project", "sglang.log_level", "actor.attn_impl",
             "ref.eps_clip", "ref.use_decoupled_loss", "ref.gradient_checkpointing", "teacher.path",
             "gconfig.min_new_tokens"]
    for kind, keys in (("honored", honored), ("refused", refused), ("inert", inert)):
        for key in keys:
            assert found[tuple(key.split("."))].kind == kind, key


def test_the_templates_refusals():
    # The v0.3 template trains asynchronously (off-policy by up to 2 versions), which runs.
    refused = refused_paths(GRPO_TEMPLATE)
    assert not {"rollout.max_head_offpolicyness", "rollout.max_concurrent_rollouts"} & refused
    assert not {"saver.freq_epochs", "evaluator.freq_epochs"} & refused  # saving and evaluating by epoch run
    assert not {"actor.eps_clip", "actor.reward_norm", "actor.temperature", "async_training",
                "actor.use_decoupled_loss", "actor.disable_dropout"} & refused
    # The 1.0 PPO template is synchronous and saves by steps: none of its algorithm settings is refused.
    assert not {p for p in refused_paths(PPO_TEMPLATE) if p.startswith(("actor.", "rollout.", "gconfig."))
                and not p.startswith("actor.rejection_sampling.")}


def test_synchronous_and_asynchronous_rollouts_run():
    for staleness in (0, 2, 8):
        for flag in ("true", "false"):
            refused = refused_paths(GRPO_TEMPLATE, f"rollout.max_head_offpolicyness={staleness}",
                                    f"async_training={flag}")
            assert not {"rollout.max_head_offpolicyness", "async_training"} & refused, (staleness, flag)


@pytest.mark.parametrize("overrides, path", [
    (("actor.temperature=0.7",), "actor.temperature"),
    (("gconfig.greedy=true",), "actor.temperature"),
    (("actor.reward_norm.mean_level=batch",), "actor.reward_norm"),
    (("actor.reward_norm.group_size=8",), "actor.reward_norm.group_size"),
    (("actor.adv_norm.mean_level=group", "+actor.adv_norm.group_size=2"), "actor.adv_norm.group_size"),
    (("actor.kl_ctl=0.0", "+actor.discount=0.9"), "actor.discount"),
    (("+actor.mask_no_eos_with_zero=true",), "actor.mask_no_eos_with_zero"),
    (("+actor.overlong_reward_penalty=true", "+actor.overlong_tokens=128", "+actor.overlong_penalty_factor=1.0",
      "+actor.max_new_tokens=2048"), "actor.max_new_tokens"),
    (("rollout.consumer_batch_size=512",), "rollout.consumer_batch_size"),
    (("+gconfig.max_tokens=1500",), "gconfig.max_tokens"),
    (("actor.optimizer.warmup_steps_proportion=0.05",), "actor.optimizer.warmup_steps_proportion"),
    (("actor.optimizer.lr_scheduler_type=cosine", "actor.ppo_n_minibatches=4"), "actor.optimizer.lr_scheduler_type"),
])
def test_combinations_the_runtime_computes_otherwise_are_refused(overrides, path):
    assert path in refused_paths(GRPO_TEMPLATE, *overrides)


def test_every_adv_norm_runs_with_rlcfgs_groups():
    # AReaL's Normalization runs in every form on the token advantages (ir.TokenNorm); only its groups are fixed.
    for overrides in (("actor.adv_norm.mean_level=group", "actor.adv_norm.std_level=group",
                       "+actor.adv_norm.group_size=4"),
                      ("+actor.adv_norm.eps=0.1", "+actor.adv_norm.mean_leave1out=true"),
                      ("actor.adv_norm.std_level=null",)):
        assert not {p for p in refused_paths(GRPO_TEMPLATE, *overrides) if p.startswith("actor.adv_norm")}, overrides


def test_combinations_refused_in_1_0():
    # log-linear proximal log-probabilities run in the decoupled loss (tests/runtime/test_algorithms.py), not elsewhere
    assert "actor.prox_logp_method" in refused_paths(GRPO_TEMPLATE, *V1, "+actor.prox_logp_method=loglinear",
                                                     "actor.use_decoupled_loss=false")
    assert "actor.prox_logp_method" not in refused_paths(GRPO_TEMPLATE, *V1, "+actor.prox_logp_method=loglinear",
                                                         "+actor.rejection_sampling.upper=5.0")
    assert "actor.prox_logp_method" not in refused_paths(GRPO_TEMPLATE, *V1, "+actor.prox_logp_method=metrics",
                                                         "+actor.rejection_sampling.upper=5.0")
    # AReaL 1.0's decoupled loss applies no behaviour weight without rejection_sampling; rlcfg's always does.
    assert "actor.use_decoupled_loss" in refused_paths(GRPO_TEMPLATE, *V1)
    assert "actor.use_decoupled_loss" not in refused_paths(GRPO_TEMPLATE, *V1, "+actor.rejection_sampling.upper=5.0")
    assert "actor.importance_sampling_level" in refused_paths(
        GRPO_TEMPLATE, *V1, "actor.use_decoupled_loss=false", "+actor.use_sapo_loss=true",
        "+actor.importance_sampling_level=sequence")
    # GSPO with rejection sampling runs as 1.0 runs it: the rejected tokens leave the sequence means.
    assert not {"actor.rejection_sampling", "actor.importance_sampling_level"} & refused_paths(
        GRPO_TEMPLATE, *V1, "+actor.rejection_sampling.upper=5.0", "+actor.importance_sampling_level=sequence")
    assert "critic.ppo_n_minibatches" in refused_paths(PPO_TEMPLATE, "critic.ppo_n_minibatches=4")
    assert "actor.reward_norm" in refused_paths(PPO_TEMPLATE, "+actor.reward_norm.mean_level=group",
                                                "+actor.reward_norm.std_level=group",
                                                "+actor.reward_norm.group_size=4")


def test_a_v0_3_config_rlcfg_runs_as_written_has_no_refusal():
    refused = refused_paths(GRPO_TEMPLATE, "rollout.max_head_offpolicyness=0", "actor.kl_ctl=0.0", "~ref",
                            "saver.freq_epochs=null", "saver.freq_steps=50",
                            "evaluator.freq_epochs=null", "evaluator.freq_steps=50", "+ref.experiment_name=x",
                            "+ref.trial_name=y")
    assert refused == set()


# ---- what rlcfg's runtime does not run (areal/run-ledger, rlcfg/run_limits.py) ----------------------------


def _limits(template: Path, *overrides: str) -> list[tuple[str, str]]:
    """(key, first words after the size) of the run-ledger notes about parallel sizes and backends."""
    result = check_file(str(template), list(overrides))
    assert result.ok, [(d.code, d.path, d.message) for d in result.diagnostics if d.severity.value == "error"]
    words = ("Ulysses", "shards data-parallel", "expert parallelism", "context parallelism", "no value head",
             "reward-model training")
    return [(d.path, next(w for w in words if w in d.message)) for d in result.diagnostics
            if d.code == "RLC118" and d.rule == "areal/run-ledger" and any(w in d.message for w in words)]


@pytest.mark.parametrize("template,overrides,expected", [
    # The FSDP engine reads `c` as Ulysses, which runs in RL training and not in SFT.
    (TEMPLATES / "areal-fsdp-vllm-ppo.yaml", ["actor.backend=fsdp:d2c2", "critic.backend=fsdp:d4"], []),
    (SFT_TEMPLATE, ["allocation_mode=d4c2"], [("allocation_mode", "Ulysses")]),
    # A bare training part with e > 1 is Megatron (AReaL's own choice), where e is expert parallelism.
    (GRPO_TEMPLATE, ["allocation_mode=sglang.d2p1t1+d2e2"], [("allocation_mode", "expert parallelism")]),
    (GRPO_TEMPLATE, ["allocation_mode=sglang.d2p1t1+d1t2"], [("allocation_mode", "shards data-parallel")]),
    (TEMPLATES / "areal-fsdp-vllm-ppo.yaml", ["critic.backend=megatron:d4"], [("critic.backend", "no value head")]),
    # Megatron runs context parallelism (`c`).
    (TEMPLATES / "areal-fsdp-vllm-ppo.yaml", ["actor.backend=megatron:d2c2", "critic.backend=fsdp:d4"], []),
    # SFT trains on megatron-core (MegatronEngine.train_supervised); a reward model needs a value head.
    (SFT_TEMPLATE, ["allocation_mode=megatron:d8p1t1"], []),
    (TEMPLATES / "areal-rw.yaml", ["allocation_mode=megatron:d4p1t1"], [("allocation_mode", "reward-model training")]),
    # Megatron runs t and p; FSDP runs d alone.
    (TEMPLATES / "areal-fsdp-vllm-ppo.yaml", ["actor.backend=megatron:d1t2p2", "critic.backend=fsdp:d4"], []),
    (TEMPLATES / "areal-fsdp-vllm-ppo.yaml", [], []),
])
def test_run_ledger_refuses_the_layouts_the_runtime_does_not_run(template, overrides, expected):
    assert _limits(template, *overrides) == expected


def test_a_releases_keys_rlcfg_does_not_model_are_typed_and_refused_by_run():
    """0.5's OpenAI-proxy settings (`rollout.openai.*`) are no key of rlcfg's schema: accepted and type-checked as
    0.5's, and refused by `rlcfg run` unless at their default."""
    v05 = ["~async_training", "~actor.group_size", "~launcher"]
    result = check_file(str(GRPO_TEMPLATE), [*v05, "+rollout.openai.mode=subproc"], release="0.5")
    assert result.ok, [d.message for d in result.diagnostics if d.severity.name == "ERROR"]
    assert [d.code for d in result.diagnostics if d.path == "rollout.openai.mode"] == ["RLC118"]
    wrong = check_file(str(GRPO_TEMPLATE), [*v05, "+rollout.openai.subproc_max_workers=many"], release="0.5")
    assert ("RLC200", "rollout.openai.subproc_max_workers") in {(d.code, d.path) for d in wrong.diagnostics}


def test_engines_that_outgrow_the_cluster_are_told_engine_by_engine_at_the_largest(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("experiment_name: x\ntrial_name: t\ncluster:\n  n_nodes: 1\n  n_gpus_per_node: 8\n"
                    "actor:\n  backend: \"megatron:d4p1t3\"\n  path: /tmp/model\nrollout:\n  backend: \"sglang:d4p1t1\"\n"
                    "gconfig:\n  n_samples: 4\ntrain_dataset:\n  batch_size: 32\n  path: /tmp/data\n")
    result = check_file(str(path))
    (found,) = [d for d in result.diagnostics if d.code == "RLC403"]
    assert found.path == "actor.backend" and found.origin.line == 7
    assert "(`actor.backend` 'megatron:d4p1t3' 12 + `rollout.backend` 'sglang:d4p1t1' 4) ask for 16 GPUs" \
        in found.message
    assert "rollout.backend" in [p for p, _origin in found.related]


def test_engines_that_outgrow_the_cluster_golden():
    """Told at the engine the user grew, with each engine's share (12 + 4 of 8), not at the rollout's backend."""
    run = cli("validate", "tests/fixtures/areal/broken-engines-outgrow-the-cluster.yaml")
    assert run.returncode == 1
    assert_golden("areal/engines-outgrow-the-cluster.txt", run.stdout)



def test_a_quoted_number_or_boolean_runs_as_areals_loader_converts_it():
    """OmegaConf's structured config converts "4" for an int and "true" for a bool: a warning, and the converted value
    is checked like any other (the differential suite's coerced mutations)."""
    result = check_file(str(GRPO_TEMPLATE), ["gconfig.n_samples='8'", "actor.recompute_logprob='true'"])
    assert result.ok and result.config.gconfig.n_samples == 8 and result.config.actor.recompute_logprob is True
    warned = {d.path: d.message for d in result.diagnostics if d.code == "RLC200"}
    assert warned["gconfig.n_samples"].endswith("'8' (a string), which AReaL 0.3's loader converts to 8")
    assert "converts to true" in warned["actor.recompute_logprob"]
    zero = check_file(str(GRPO_TEMPLATE), ["gconfig.n_samples='0'"])  # converted, then refused by its bound
    assert ("RLC201", "gconfig.n_samples") in {(d.code, d.path) for d in zero.diagnostics if d.severity.value == "error"}
    words = check_file(str(GRPO_TEMPLATE), ["gconfig.n_samples=four"])  # the loader refuses it too
    assert [d.severity.value for d in words.diagnostics if d.path == "gconfig.n_samples"] == ["error"]


def test_values_areal_checks_only_after_load_say_when_it_fails():
    case = check_file(str(GRPO_TEMPLATE), ["++actor.optimizer.type=Adam"])
    (error,) = [d for d in case.diagnostics if d.path == "actor.optimizer.type"]
    assert error.message.endswith("AReaL 0.3 accepts this at load but fails when the training engine creates its "
                                  "optimizer, after loading the model (it asserts the type)")
    zero = check_file(str(GRPO_TEMPLATE), ["gconfig.n_samples=0"])
    errors = [d for d in zero.diagnostics if d.severity.value == "error"]
    assert errors and all("AReaL 0.3 accepts this at load but fails when the trainer takes its first batch" in d.message
                          for d in errors)


def test_no_fixed_minibatch_split_is_run_by_areal_and_refused_by_rlcfg_run():
    result = check_file(str(GRPO_TEMPLATE), ["actor.ppo_n_minibatches=0"])
    assert result.ok
    codes = {(d.code, d.severity.value) for d in result.diagnostics if d.path == "actor.ppo_n_minibatches"}
    assert codes == {("RLC300", "warning"), ("RLC118", "note")}
