"""The dialect registry and dialect detection.

Each entry names the module that defines the dialect (imported only when needed, so that `validate` on a
ChatLearn file never builds the SkyRL schema) and the top-level keys that identify its documents.
"""

from __future__ import annotations

import importlib
import importlib.util
from functools import lru_cache
from typing import Any

from rlcfg.records import record
from rlcfg.schema.base import Dialect

# SkyRL's releases: skyrl-train (its Hydra config, ppo_base_config.yaml) up to its last commit, then the `skyrl`
# package, configured by dataclasses and the command line. Which package a launch script's entrypoint belongs to
# decides which of the two families its config is judged among (Launcher.releases).
_SKYRL_TRAIN = ("pre-0.1.0", "0.1.0", "0.2.0", "0.3.0", "0.4.0", "main")
_SKYRL_PACKAGE = ("skyrl-0.1.0", "skyrl-0.2.0", "skyrl-0.3.0", "skyrl-0.4.0")
_SKYRL_OTHER_ENTRYPOINT = ("this script calls {what} of the `skyrl` package, whose config is not the RL trainer's "
                           "(SkyRLTrainConfig); rlcfg judges the RL trainer's entrypoints (main_base and the "
                           "examples' main_* modules built on it)")


@record(frozen=True)
class DialectEntry:
    """What rlcfg knows of a dialect without importing it: what the command line's help, the converter's messages and
    detection read. The dialect's package reads its title, releases and override grammar from here."""

    name: str
    module: str
    title: str  # the framework's name, as messages and help say it
    # The framework releases the dialect claims, oldest first, named as users say them (Dialect.releases).
    releases: tuple[str, ...]
    override_grammar: str  # "hydra" or "dotlist" (Dialect.override_grammar)
    required: frozenset  # top-level keys every document of the dialect's main pipeline has
    typical: frozenset  # other top-level keys its documents often have
    alternatives: tuple = ()  # key sets that tell the dialect's other pipelines (ROLL SFT, distillation, ...)
    # The entrypoints its users call in launch scripts: the keywords of rlcfg.source.launch.Launcher, which only a
    # check of a script imports.
    launchers: tuple = ()

    def fits(self, keys: set) -> frozenset | None:
        """The key set of this dialect that the document has, if any."""
        return next((req for req in (self.required, *self.alternatives) if req <= keys), None)

    def available(self) -> bool:
        return importlib.util.find_spec(self.module) is not None


REGISTRY: tuple[DialectEntry, ...] = (
    DialectEntry("chatlearn", "rlcfg.dialects.chatlearn", "ChatLearn", ("1.2.0", "main"), "dotlist",
                 frozenset({"runtime_args", "models"}), frozenset(),
                 launchers=(dict(name="ChatLearn's entrypoint.py", script=r"(^|/)entrypoint\.py$",
                                     config_file=("--config-file", "--config_file")),)),
    DialectEntry("skyrl", "rlcfg.dialects.skyrl", "SkyRL", _SKYRL_TRAIN + _SKYRL_PACKAGE,
                 "hydra",
                 frozenset({"trainer", "generator"}),
                 frozenset({"data", "deepspeed_config", "environment"}),
                 launchers=(dict(name="the skyrl package's SFT trainer", module=r"skyrl\.train\.main_sft\w*"
                                                                          r"|examples\.train\.[\w.]*main_sft\w*",
                                     unclaimed=_SKYRL_OTHER_ENTRYPOINT.format(what="the SFT trainer")),
                            dict(name="the skyrl package's serving entrypoints",
                                 module=r"skyrl\.(tinker\.[\w.]+|train\.entrypoints\.(serve|main_generate)\w*)",
                                 unclaimed=_SKYRL_OTHER_ENTRYPOINT.format(what="a serving or generation entrypoint")),
                            dict(name="the skyrl package's main_base", module=r"skyrl\.train\.entrypoints\.main_\w+"
                                                                           r"|examples\.train(_\w+)?\.[\w.]*main_\w+",
                                 releases=_SKYRL_PACKAGE),
                            dict(name="skyrl-train's main_base", module=r"skyrl_train\.entrypoints\.main_\w+"
                                                                      r"|examples\.(?!train)[\w.]*main_\w+",
                                 releases=_SKYRL_TRAIN))),
    DialectEntry("rlinf", "rlcfg.dialects.rlinf", "RLinf", ("2025-08", "2025-10", "v0.1", "v0.2", "v0.3", "main"),
                 "hydra",
                 frozenset({"cluster", "runner"}),
                 frozenset({"actor", "algorithm", "rollout", "data", "reward", "critic", "inference", "defaults",
                            "hydra"}),
                 launchers=(dict(name="RLinf's Hydra entry script", script=r"\.py$",
                                     config_dir=("--config-path", "-cp"), config_name=("--config-name", "-cn")),)),
    DialectEntry("roll", "rlcfg.dialects.roll", "ROLL", ("v0.1.0", "v0.1.3", "v0.2.1", "v0.3.0", "main"), "hydra", frozenset({"actor_train", "actor_infer"}),
                 frozenset({"pretrain", "reward_pretrain", "rollout_batch_size", "num_return_sequences_in_group",
                            "reference", "critic", "rewards", "exp_name", "device_mapping"}),
                 # SFT (sft_train), distillation (student, teacher), on-policy distillation (student_train, ...),
                 # DPO (actor_train with its preference-pair keys, no actor_infer), and a rollout- or
                 # evaluation-only config (the rollout start scripts: actor_infer and rewards, no actor_train)
                 (frozenset({"sft_train"}), frozenset({"student", "teacher"}),
                  frozenset({"student_train", "student_infer"}), frozenset({"actor_train", "chosen_key"}),
                  frozenset({"actor_infer", "rewards"})),
                 launchers=(dict(name="ROLL's start_*_pipeline.py", script=r"(^|/)start_\w+\.py$",
                                     config_dir=("--config_path",), config_name=("--config_name",)),)),
    DialectEntry("areal", "rlcfg.dialects.areal", "AReaL", ("0.3", "0.4", "0.5", "1.0"), "hydra",
                 frozenset({"experiment_name", "trial_name"}),
                 frozenset({"cluster", "allocation_mode", "actor", "ref", "rollout", "gconfig", "train_dataset",
                            "valid_dataset", "saver", "evaluator", "stats_logger", "recover", "launcher", "sglang"}),
                 launchers=(dict(name="AReaL's launcher", module=r"areal\.launcher\.\w+", config_file=("--config",)),
                            dict(name="an AReaL example's entry script", script=r"(^|/)examples/.+\.py$",
                                     config_file=("--config",)))),
)


def launchers(dialect: str | None = None) -> list[tuple[str, Any]]:
    """Every dialect's entrypoints (or `dialect`'s), as (dialect, rlcfg.source.launch.Launcher), in registry order."""
    from rlcfg.source.launch import Launcher

    return [(e.name, Launcher(**spec)) for e in REGISTRY if dialect in (None, e.name) for spec in e.launchers]


def entry(name: str) -> DialectEntry:
    """The registry's entry of a dialect, installed or not."""
    return next(e for e in REGISTRY if e.name == name)


def listing(words: str = "names", last: str = ", ") -> str:
    """The dialects in registry order, by `names` (chatlearn, skyrl, ...) or `titles` (ChatLearn, SkyRL, ...)."""
    shown = [e.name if words == "names" else e.title for e in REGISTRY]
    return ", ".join(shown[:-1]) + last + shown[-1]


def entries() -> list[DialectEntry]:
    return [e for e in REGISTRY if e.available()]


def names() -> list[str]:
    return [e.name for e in entries()]


@lru_cache(maxsize=None)
def load(name: str) -> Dialect:
    entry = next((e for e in entries() if e.name == name), None)
    if entry is None:
        raise KeyError(name)
    module = importlib.import_module(entry.module)
    return module.DIALECT


@record
class Detection:
    name: str | None
    reason: str  # why it was chosen, or why none was


def detect(data: dict) -> Detection:
    keys = set(data)
    fitting = [e for e in entries() if e.fits(keys) is not None]
    if len(fitting) == 1:
        return Detection(fitting[0].name, f"has the top-level keys {', '.join(sorted(fitting[0].fits(keys)))}")
    if len(fitting) > 1:
        scored = sorted(fitting, key=lambda e: len(keys & e.typical), reverse=True)
        best, second = scored[0], scored[1]
        if len(keys & best.typical) > len(keys & second.typical):
            return Detection(best.name, f"has the top-level keys of {best.name} and more of its usual sections")
        both = ", ".join(e.name for e in scored)
        return Detection(None, f"the document fits several dialects equally well ({both}); pass --dialect")
    ranked = sorted(entries(), key=lambda e: (len(keys & e.required), len(keys & e.typical)), reverse=True)
    close = []
    for e in ranked:
        have = sorted(keys & (e.required | e.typical))
        if not have:
            continue
        lacks = sorted(e.required - keys)
        close.append(f"{e.name} (has {', '.join(have)}; lacks {', '.join(lacks)})")
        if len(close) == 2:
            break
    if close:
        return Detection(None, "the document's top-level keys fit no dialect; closest: " + "; ".join(close))
    seen = ", ".join(sorted(map(str, keys))[:6]) or "none"
    return Detection(None, f"the document's top-level keys ({seen}) fit no dialect")
