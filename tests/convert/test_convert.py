"""`rlcfg convert`: every template into every dialect validates, keeps its Experiment wherever the target can say
it, lists exactly the pinned losses, and converts back to the same Experiment wherever nothing was lost."""

from __future__ import annotations

from functools import lru_cache

import pytest

from rlcfg.convert import DIALECTS, LOSS_KINDS, ConversionError, convert
from rlcfg.convert.compare import covered, diff
from rlcfg.ir import Experiment
from rlcfg.diagnostics import Severity
from rlcfg.schema import REGISTRY
from tests.convert.cases import PAIRS, ROOT, dialect_of, expected, key, outcome

EXPECTED = expected()


@lru_cache(maxsize=None)
def converted(template: str, target: str):
    return convert(str(ROOT / template), target)


@pytest.mark.parametrize("template,target", PAIRS, ids=[key(t, d) for t, d in PAIRS])
def test_conversion_reports_exactly_the_pinned_losses(template, target):
    # A new loss (or a loss that went away) changes this; `python -m tests.convert.cases` re-pins after review.
    assert outcome(template, target) == EXPECTED.get(key(template, target)), (
        "run `python -m tests.convert.cases` and review the change to tests/convert/expected_losses.json")


RUNNABLE = [(t, d) for t, d in PAIRS if "losses" in EXPECTED.get(key(t, d), {})]


@pytest.mark.parametrize("template,target", RUNNABLE, ids=[key(t, d) for t, d in RUNNABLE])
def test_converted_config_validates_and_keeps_every_expressible_field(template, target):
    conversion = converted(template, target)
    assert not [d for d in conversion.diagnostics if d.severity is Severity.ERROR]
    if dialect_of(template) == target:  # its own dialect: the file as written
        assert conversion.text == (ROOT / template).read_text() and not conversion.losses
        return
    lost = {loss.path for loss in conversion.losses if loss.of_experiment}
    assert {d.path for d in diff(conversion.source, conversion.result)} == lost
    assert conversion.text.splitlines()[0].startswith("# yaml-language-server: $schema=")
    assert template in conversion.text.splitlines()[1]


ROUND_TRIPS = [(t, d) for t, d in RUNNABLE if dialect_of(t) != d]


@pytest.mark.parametrize("template,target", ROUND_TRIPS, ids=[key(t, d) for t, d in ROUND_TRIPS])
def test_round_trip_gives_back_the_source_where_nothing_was_lost(template, target, tmp_path):
    there = converted(template, target)
    written = tmp_path / f"converted-{target}.yaml"
    written.write_text(there.text)
    back = convert(str(written), there.source_dialect)
    lost = {loss.path for loss in there.losses} | {loss.path for loss in back.losses}
    changed = {d.path for d in diff(there.source, back.result)}
    # A lost section (eval_sampling) covers its fields.
    assert not [p for p in changed if not covered(p, lost)], sorted(p for p in changed if not covered(p, lost))


# The templates are written to be converted; the frameworks' example configs may use what rlcfg writes in another
# form (an older release's keys), and the pinned table holds what their conversions lose.
OWN = sorted({t for t, d in RUNNABLE if dialect_of(t) == d and t.startswith("templates/")})


@pytest.mark.parametrize("template", OWN)
def test_converting_into_the_own_dialect_loses_nothing(template):
    losses = EXPECTED[key(template, dialect_of(template))]["losses"]
    # AReaL 1.0's per-engine layout gives the trainer the first GPUs; the v0.3 allocation_mode rlcfg writes gives
    # them to the servers: the same GPUs, in another order.
    if template.endswith("areal-fsdp-vllm-ppo.yaml"):
        losses = [p for p in losses if not p.endswith(".resources.gpu_ids")]
    assert losses == []


def test_a_supervised_experiment_is_refused_by_a_dialect_that_only_does_rl():
    with pytest.raises(ConversionError, match="'sft' training"):
        convert(str(ROOT / "templates/areal-sft.yaml"), "skyrl")


def test_target_defaults_are_left_out():
    from rlcfg import schema
    from rlcfg.convert.compare import same

    conversion = converted("templates/skyrl-fsdp-vllm.yaml", "roll")
    spec = schema.load("roll")
    defaults = spec.defaults(spec.root(conversion.tree), None)
    scalar_defaults = {k: v for k, v in defaults.items() if not isinstance(v, (dict, list)) and v is not None}
    written = {k: v for k, v in conversion.tree.items() if k in scalar_defaults}
    assert not [k for k, v in written.items() if same(v, scalar_defaults[k]) and type(v) is type(scalar_defaults[k])]


def test_keys_follow_the_target_schema_order():
    from rlcfg import schema
    from rlcfg.schema.base import key_of

    conversion = converted("templates/chatlearn-fsdp-vllm.yaml", "skyrl")
    root = schema.load("skyrl").root(conversion.tree)
    order = [key_of(n, f) for n, f in root.model_fields.items()]
    top = list(conversion.tree)
    assert top == sorted(top, key=order.index)


def test_every_loss_is_listed_in_the_output_header():
    conversion = converted("templates/chatlearn-fsdp-vllm.yaml", "areal")
    header = [line for line in conversion.text.splitlines() if line.startswith("#")]
    assert conversion.losses
    for loss in conversion.losses:
        assert any(line.strip("# ") == loss.describe() for line in header), loss.path
        assert loss.describe().startswith(f"[{LOSS_KINDS[loss.rank]}] ")


def test_losses_are_named_by_the_source_and_target_keys():
    conversion = converted("templates/skyrl-fsdp-vllm.yaml", "roll")
    by_field = {loss.path: loss for loss in conversion.losses}
    # SkyRL counts epochs, ROLL steps: each side names its own key, or has none
    epochs, steps = by_field["schedule.epochs"], by_field["schedule.total_steps"]
    assert epochs.source_keys == ("trainer.epochs",) and epochs.target_keys == ()
    assert steps.target_keys == ("max_steps",)
    assert epochs.describe().startswith("[algorithm] trainer.epochs: 20 -> (no key): None")


def test_the_diff_names_a_role_field_by_role_name():
    from dataclasses import replace

    source = converted("templates/skyrl-fsdp-vllm.yaml", "skyrl").source
    actor = source.role("actor")
    changed: Experiment = replace(source, roles=tuple(
        replace(r, optimizer=replace(r.optimizer, lr=2e-6)) if r is actor else r for r in source.roles))
    assert [d.path for d in diff(source, changed)] == ["roles.actor.optimizer.lr"]


def test_known_differences_of_meaning_are_reported():
    # ChatLearn's GRPO divides by the population std; SkyRL's by the unbiased one. The conversion must say so.
    losses = {loss.path: loss for loss in converted("templates/chatlearn-fsdp-vllm.yaml", "skyrl").losses}
    assert losses["algorithm.advantage_options.std"].source == "population"
    assert losses["algorithm.advantage_options.std"].target == "unbiased"
    # Every dialect of the registry is a target, in the registry's order.
    assert DIALECTS == tuple(entry.name for entry in REGISTRY) == ("chatlearn", "skyrl", "rlinf", "roll", "areal")


def test_a_source_setting_rlcfg_does_not_model_is_reported_not_dropped():
    # AReaL's dynamic sampling is not in the Experiment; converting must say it is left behind.
    conversion = convert(str(ROOT / "templates/areal-fsdp-sglang-grpo.yaml"), "roll", ["+actor.dynamic_sampling=true"])
    lost = {loss.path: loss for loss in conversion.losses if not loss.of_experiment}
    assert lost["areal:actor.dynamic_sampling"].source is True


def test_asynchronous_rollouts_reach_areal_and_are_a_loss_elsewhere():
    overrides = ["async_training=true", "rollout.max_head_offpolicyness=2", "+rollout.max_concurrent_rollouts=64"]
    # ROLL's async_generation_ratio is the same bound, with no limit of its own on what generates at once.
    to_roll = convert(str(ROOT / "templates/areal-fsdp-sglang-grpo.yaml"), "roll", overrides)
    lost = {loss.path: loss for loss in to_roll.losses}
    assert "async_generation_ratio: 2" in to_roll.text and "schedule.max_staleness" not in lost
    assert lost["schedule.rollout_concurrency"].source == 64
    to_skyrl = convert(str(ROOT / "templates/areal-fsdp-sglang-grpo.yaml"), "skyrl", overrides)
    lost = {loss.path: loss for loss in to_skyrl.losses}
    assert (lost["schedule.max_staleness"].source, lost["schedule.max_staleness"].target) == (2, 0)
    to_areal = convert(str(ROOT / "templates/areal-fsdp-sglang-grpo.yaml"), "areal", overrides, to_release="1.0")
    assert "max_head_offpolicyness: 2" in to_areal.text and "max_concurrent_rollouts: 64" in to_areal.text
    assert not [loss for loss in to_areal.losses if loss.path.startswith("schedule.")]


def test_scalars_read_back_as_written_by_a_yaml_1_1_loader():
    # The frameworks load YAML with PyYAML (YAML 1.1), which reads `1e-06` and `no` as strings.
    import yaml

    from rlcfg.convert.render import dump

    tree = {"lr": 1e-06, "name": "no", "mode": "none", "path": "/a/b", "ids": [0, 1], "nothing": None, "n": "8"}
    assert yaml.safe_load(dump(tree)) == tree


def test_the_packages_sequence_mask_converts_only_where_it_means_the_same():
    command = ["-m", "skyrl.train.entrypoints.main_base", "trainer.policy.model.path=Qwen/Qwen2.5-0.5B-Instruct",
               "trainer.algorithm.policy_loss_type=rollout_is",
               "trainer.algorithm.off_policy_correction.sequence_mask_metric=product",
               "trainer.algorithm.off_policy_correction.product_mask_high=3.0"]
    package = convert("python", "skyrl", command, release="skyrl-0.4.0", to_release="skyrl-0.2.0")
    assert not [loss.path for loss in package.losses if "sequence_mask" in loss.path]
    assert "off_policy_correction.product_mask_high=3.0" in package.text
    # skyrl-train divides its token mean by the tokens the mask leaves: the mask is not written there
    train = convert("python", "skyrl", command, release="skyrl-0.4.0")
    lost = {loss.path: loss.reason for loss in train.losses}
    assert "only in the `skyrl` package from 0.2.0" in lost["algorithm.policy_options.sequence_mask"]


def test_chatlearns_rollout_manager_converts_to_chatlearn_and_is_a_loss_elsewhere():
    manager = ["runtime_args.use_rollout_manager=true", "runtime_args.rollout_backend=sglang",
               "models.policy.is_sync_mode=false", "runtime_args.data_rerank=false",
               "models.rollout_manager.num_cpu=1", "models.rollout_manager.cpu_per_process=1"]
    source = str(ROOT / "templates/chatlearn-fsdp-vllm.yaml")
    same = convert(source, "chatlearn", manager)
    assert "use_rollout_manager: true" in same.text and "data_rerank: false" in same.text
    assert not [loss.path for loss in same.losses if loss.path.startswith("algorithm")]
    to_skyrl = convert(source, "skyrl", manager)
    lost = {loss.path: loss for loss in to_skyrl.losses}
    assert (lost["algorithm.balance_ranks_by_length"].source, lost["algorithm.balance_ranks_by_length"].target) == \
        (True, False)


def test_chatlearns_partial_rollout_converts_to_chatlearn_and_is_a_loss_elsewhere():
    partial = ["runtime_args.use_partial_rollout=true", "runtime_args.train_global_batch_size=2048",
               "models.partial_rollout_manager.rollout_ratio=[0.25,0.75]",
               "models.partial_rollout_manager.mini_response_per_prompt=4"]
    source = str(ROOT / "templates/chatlearn-fsdp-vllm.yaml")
    same = convert(source, "chatlearn", partial)
    assert "use_partial_rollout: true" in same.text and "mini_response_per_prompt: 4" in same.text
    assert not [loss.path for loss in same.losses if loss.path.startswith("schedule")]
    lost = {loss.path: loss for loss in convert(source, "roll", partial).losses}
    assert lost["schedule.partial_rollout"].target is None
    assert "generates each response whole" in lost["schedule.partial_rollout"].reason
