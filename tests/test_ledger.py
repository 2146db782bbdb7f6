"""The run ledger: every parameter says what `rlcfg run` does with it, and that is what happens.

A dialect that declares `ledger_complete` is held to it here: no field without a fate, no honored field that the
lowering never reads, no refused field that a run does not stop on. The mechanism itself is pinned on a small
dialect declared below.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Iterator

import pytest

from rlcfg import frontend, lower, run_limits, schema
from rlcfg.dialects.rlinf.fields import FIELDS
from rlcfg.schema.base import (ENTRY_KEY, HONORED, Dialect, RuleSet, Section, field_fate, fields_along, inert,
                               iter_fields, param, refused, section, unread)
from rlcfg.schema.ledger import fates
from tests.helpers import FIXTURES, TEMPLATES, register_dialect

COMPLETE = [name for name in schema.names() if schema.load(name).ledger_complete]


# ---- the mechanism, on a small dialect ------------------------------------------------------------------------

class Logging(Section):
    run_fate = inert("where logs go changes nothing that is computed")
    folder: str = param("logs", description="Log folder.")


class Algo(Section):
    lr: float = param(1e-6, description="Learning rate.", fate=HONORED)
    outlier_mask: float | None = param(None, description="Mask tokens above this ratio.",
                                       fate=refused("rlcfg runs no outlier masking"))
    length_weight: bool = param(False, description="Weight the loss by length.",
                                fate=unread("Toy never applies it: its loss reads no lengths"))


class Root(Section):
    algo: Algo = section(Algo, description="The algorithm.")
    logging: Logging = section(Logging, description="Logs.")


class Toy(Dialect):
    name = "toy"
    title = "Toy"
    documents = "a stand-in"
    rules = RuleSet()
    ledger_complete: ClassVar = True

    def variants(self) -> dict:
        return {"toy": Root}


@pytest.fixture
def toy(monkeypatch):
    dialect = Toy()
    register_dialect(monkeypatch, dialect)
    return dialect


def test_fates_come_from_the_field_or_its_section():
    found = dict(fates(Root))
    assert found[("algo", "lr")].kind == "honored"
    assert found[("algo", "outlier_mask")].kind == "refused"
    assert found[("logging", "folder")].kind == "inert" and "changes nothing" in found[("logging", "folder")].reason


def test_a_refused_setting_is_a_note_for_validate(toy):
    result = frontend.check_text("algo:\n  outlier_mask: 3.0\n", "toy.yaml", dialect="toy", env={})
    assert result.ok
    [note] = [d for d in result.diagnostics if d.code == "RLC118"]
    assert note.path == "algo.outlier_mask" and "rlcfg runs no outlier masking" in note.message
    assert note.origin.line == 2


def test_a_refused_setting_left_at_its_default_is_not_refused(toy):
    result = frontend.check_text("algo:\n  outlier_mask: null\n", "toy.yaml", dialect="toy", env={})
    assert not [d for d in result.diagnostics if d.code == "RLC118"]


SKYRL_ROPE = """\
trainer:
  rope_scaling: {scaling}
generator:
  rope_scaling: {engine}
"""


@pytest.mark.parametrize("engine", ["${{trainer.rope_scaling}}", "null"])
def test_a_refusal_judges_the_resolved_value_not_the_written_text(engine):
    # skyrl-train 0.3.0's own base config writes `generator.rope_scaling: ${trainer.rope_scaling}`, which resolves
    # to the default (null): it sets nothing, so it refuses nothing.
    text = SKYRL_ROPE.format(scaling="null", engine=engine)
    result = frontend.check_text(text, "ppo.yaml", dialect="skyrl", env={"HOME": "/home/u"}, release="0.3.0")
    assert not [d for d in result.diagnostics if d.code == "RLC118" and "rope" in d.path], result.diagnostics


def test_an_interpolation_that_resolves_to_a_refused_value_is_refused():
    text = SKYRL_ROPE.format(scaling="{type: yarn, factor: 4.0}", engine="${trainer.rope_scaling}")
    result = frontend.check_text(text, "ppo.yaml", dialect="skyrl", env={"HOME": "/home/u"}, release="0.3.0")
    refused = {d.path for d in result.diagnostics if d.code == "RLC118"}
    assert {"trainer.rope_scaling", "generator.rope_scaling"} <= refused


def test_a_setting_the_framework_never_applies_is_a_warning_at_its_line(toy):
    result = frontend.check_text("algo:\n  lr: 0.1\n  length_weight: true\n", "toy.yaml", dialect="toy", env={})
    assert result.ok
    [warning] = [d for d in result.diagnostics if d.code == "RLC307"]
    assert warning.severity.value == "warning" and warning.path == "algo.length_weight"
    assert "has no effect: Toy never applies it" in warning.message and warning.origin.line == 3
    assert not frontend.check_text("algo:\n  length_weight: false\n", "toy.yaml", dialect="toy", env={}).diagnostics


def test_rolls_difficulty_loss_weight_is_named_as_unapplied():
    # ROLL logs a warning and trains without the weight; a user who turns it on should hear it from validate.
    result = frontend.check_file(str(TEMPLATES / "roll-fsdp2-vllm.yaml"), ["+difficulty_loss_weight=true"], env={})
    assert result.ok
    assert [d.path for d in result.diagnostics if d.code == "RLC307"] == ["difficulty_loss_weight"]


def test_a_deleted_refused_key_is_not_refused(toy):
    result = frontend.check_text("algo:\n  lr: 0.1\n", "toy.yaml", ["~algo.outlier_mask"], dialect="toy", env={})
    assert not [d for d in result.diagnostics if d.code == "RLC118"]


# ---- the dialects that declare their ledger complete ------------------------------------------------------------

@contextmanager
def reads() -> Iterator[set]:
    """The (section class, field name) pairs read while the block runs."""
    seen: set = set()
    original = Section.__getattribute__

    def recording(self: Any, name: str) -> Any:
        cls = type(self)
        if name in cls.model_fields:
            seen.add((cls, name))
        return original(self, name)

    Section.__getattribute__ = recording  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        Section.__getattribute__ = original  # type: ignore[method-assign]


def _non_default(info: Any) -> Any:
    default = info.get_default(call_default_factory=True)
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default + 1
    if isinstance(default, float):
        return default * 2 + 0.5
    if isinstance(default, str):
        return default + "x"
    return None


@pytest.mark.parametrize("name", COMPLETE)
def test_every_field_declares_its_fate(name):
    dialect = schema.load(name)
    missing = [".".join(map(str, path)) for root in dialect.variants().values() for path, fate in fates(root)
               if fate is None]
    assert not missing, f"{len(missing)} fields of {name} have no run fate: {missing[:40]}"
    vague = [".".join(map(str, p)) for root in dialect.variants().values() for p, f in fates(root)
             if f is not None and f.kind != "honored" and not f.reason]
    assert not vague, f"refused and inert fields say why: {vague[:40]}"


# Override sets that take a dialect's templates down the lowering's other branches (another training backend, say),
# so that a field read only there is seen read.
PROBES: dict[str, list[tuple[str, ...]]] = {
    "skyrl": [("trainer.strategy=megatron",),
              # LoRA's settings count only with a rank above 0; up to v0.3.0 one pair of module keys serves both
              ("trainer.policy.model.lora.rank=8", "trainer.critic.model.lora.rank=4"),
              ("trainer.policy.model.lora.rank=8", "trainer.critic.model.lora.rank=4", "trainer.exclude_modules=null"),
              # Megatron-Bridge's LoRA flavour counts only for adapters on the megatron strategy
              ("trainer.strategy=megatron", "trainer.policy.model.lora.rank=8"),
              # the sequence mask's bounds count only with its metric set
              ("trainer.algorithm.off_policy_correction.sequence_mask_metric=geometric",),
              ("trainer.algorithm.off_policy_correction.sequence_mask_metric=product",),
              # max_seq_len counts only where the reduction divides by it
              ("trainer.algorithm.loss_reduction=seq_mean_token_sum_norm",),
              # the multi-turn loop's settings count only for an environment rlcfg steps through episodes
              ("environment.env_class=text2sql", "generator.max_turns=3"),
              ("environment.env_class=search", "generator.max_turns=3"),
              # the judge's settings count only for the LLM-as-a-judge example's environment
              ("environment.env_class=llm_as_a_judge",),
              ],
    # lr_warmup_iters counts only where lr_warmup_fraction is null, which the RLinf template does not write
    "rlinf": [("actor.lr_sched.lr_warmup_fraction=null",),
              # the router's settings are read where a config writes them (the others are not built)
              tuple(f"+actor.model.{key}=null" for key in run_limits.MOE_ROUTER_KEYS
                    if f"actor.model.{key}" in FIELDS)],
    # LoRA's settings count only where it is on
    "areal": [("+actor.use_lora=true",)],
    # partial rollout's settings count only where it is on (and runs: one optimizer step per episode)
    "chatlearn": [("runtime_args.use_partial_rollout=true", "runtime_args.train_global_batch_size=2048",
                   "runtime_args.sample_per_episode=2048")],
    # the importance weight's settings count only where it is on
    "roll": [("++train_infer_correction.is_weight.enabled=true", "++train_infer_correction.is_weight.upper_bound=2.0"),
             ("++actor_train.worker_cls=roll.pipeline.rlvr.actor_pg_worker.ActorPGWorker", "++actor_train.pg_variant=topr")],
}
# Configs beside the templates whose settings the templates leave at defaults: the AReaL templates train without
# a reference model, and the framework-style GRPO/PPO configs give it one, with a KL term and decoupled loss.
EXTRA_CONFIGS: dict[str, list[Path]] = {
    "areal": [FIXTURES / "areal" / "gsm8k-grpo-v0.3.yaml", FIXTURES / "areal" / "gsm8k-ppo-v1.0.yaml"],
    # The 2025-08 layout, whose math runner reads rollout.recompute_logprobs.
    "rlinf": [FIXTURES / "rlinf" / "seed.yaml"],
}


# The loops an entry module runs instead of the usual one (CheckResult.entry_runs), whose keys only that loop reads:
# SkyRL's fully-asynchronous trainer reads trainer.fully_async.
ENTRY_RUNS: dict[str, tuple[str, ...]] = {"skyrl": ("fully_async", "one_step_async")}

REFUSAL_RULES = ("run-ledger", "run-refusals")  # rule ids (after the dialect's prefix) that emit RLC118 by value


def _run_refusal_rules(dialect: Any, result: Any) -> None:
    """A key is honored also when the lowering has no use for it because a refusal rule stops every value that
    rlcfg would compute differently (AReaL's recompute_logprob: rlcfg always recomputes, and the rule refuses the
    value that would not); such a rule reads it."""
    from rlcfg.schema.base import HostFacts, RuleContext

    context = RuleContext(result.tree, False, HostFacts(), result.release)
    for rule in dialect.rules:
        if rule.id.split("/", 1)[-1] in REFUSAL_RULES:
            list(rule.check(result.config, context) or ())


@pytest.mark.parametrize("name", COMPLETE)
def test_every_honored_field_is_read_by_the_lowering(name):
    dialect = schema.load(name)
    configs = (sorted(TEMPLATES.glob(f"{name}-*.yaml")) + sorted(TEMPLATES.glob("quickstart-*.yaml"))
               + EXTRA_CONFIGS.get(name, []))
    read: set = set()
    lowered = 0
    for path in configs:
        for overrides in [()] + PROBES.get(name, []):
            result = frontend.check_file(str(path), list(overrides), env={"HOME": "/home/user"})
            if result.dialect != name or result.config is None:
                continue
            with reads() as seen:
                for runs in (None, *ENTRY_RUNS.get(name, ())):
                    lower.lower(name, result.config, result.release, runs)
                _run_refusal_rules(dialect, result)
            read |= seen
            lowered += 1
    assert lowered, f"no template of {name} lowers"
    unread = []
    for root in dialect.variants().values():
        for path, info, owner in iter_fields(root):
            fate = field_fate(info, owner)
            # A key only an entry module adds (SkyRL's DAPO entrypoints), or a key of such a section, is not in any
            # template's release: its lowering is tested with that entry module (tests/dialects/skyrl/test_package.py).
            entry_only = any(isinstance(f.json_schema_extra, dict) and ENTRY_KEY in f.json_schema_extra
                             for f, _owner in fields_along(root, tuple(path)) if f is not None)
            if fate is not None and fate.kind == "honored" and not entry_only and not any(
                    issubclass(cls, owner) and field == key for cls, field in read
                    for key in [next(n for n, f in owner.model_fields.items() if f is info)]):
                unread.append(".".join(map(str, path)))
    assert not unread, f"honored but never read by the {name} lowering: {sorted(set(unread))[:40]}"


@pytest.mark.parametrize("name", COMPLETE)
def test_every_refused_field_stops_a_run(name):
    dialect = schema.load(name)
    templates = sorted(TEMPLATES.glob(f"{name}-*.yaml"))
    variants = {t: frontend.check_file(str(t), env={"HOME": "/home/user"}).variant for t in templates}
    missed = []
    for variant, root in dialect.variants().items():
        # A key is tried on a template of its own variant (a GRPO key on a GRPO config, an SFT key on an SFT one).
        template = next((t for t in templates if variants[t] == variant), None)
        if template is None:
            continue
        for path, info, owner in iter_fields(root):
            fate = field_fate(info, owner)
            if fate is None or fate.kind != "refused":
                continue
            value = _non_default(info)
            if value is None:
                continue
            key = ".".join(map(str, path))
            result = frontend.check_file(str(template), [f"++{key}={value}" if dialect.override_grammar == "hydra"
                                                         else f"{key}={value}"], env={"HOME": "/home/user"})
            if result.errors:
                continue  # the value breaks a rule of its own; the refusal is checked where it validates
            if not any(d.code == "RLC118" and d.path == key for d in result.diagnostics):
                missed.append(key)
    assert not missed, f"refused but not refused by a run: {missed[:40]}"


def test_rlcfg_run_stops_on_a_refused_setting_before_anything_starts(toy, tmp_path, capsys):
    import typer

    from rlcfg.cli.run import _lower

    config = tmp_path / "toy.yaml"
    config.write_text("algo:\n  outlier_mask: 3.0\n")
    with pytest.raises(typer.Exit) as stopped:
        _lower(str(config), [], "toy")
    assert stopped.value.exit_code == 1
    err = capsys.readouterr().err
    assert "`rlcfg run` refuses `algo.outlier_mask` = 3.0" in err and "toy.yaml:2" in err
