"""The SkyRL dialect: skyrl-train's Hydra config (`ppo_base_config.yaml`) and the `skyrl` package's dataclass config,
at the releases rlcfg claims.

A SkyRL config has four top-level sections: `data`, `trainer` (placement, the policy/ref/critic models, the
algorithm, batch sizes, checkpointing and logging), `generator` (the inference engines and sampling) and
`deepspeed_config` (two open mappings, `train` and `eval`, that the models refer to by interpolation).
`environment` selects the SkyRL-Gym environment.

skyrl-train's entrypoint composes the user's overrides onto `ppo_base_config.yaml` in OmegaConf's struct mode, so
that base config, release by release, is the spec: a key it lacks is refused unless added with `+key=value`. Each
field names the releases whose base config has it (`releases=`; none means all of them); the inventories under
tests/inventory/skyrl/ hold the facts they were read from (tools/inventory/skyrl.py). The oldest release,
`pre-0.1.0`, is the layout of SkyRL's mid-2025 docs (the commit before v0.1.0 moved `trainer.num_warmup_steps` into the
optimizer configs and renamed `trainer.algorithm.ppo_loss_type`); a later release refuses those keys and names where
they live there.

The `skyrl` package's releases ("skyrl-0.1.0" to "skyrl-0.4.0", the dataclass config its entrypoints read from the
command line) are judged with the same schema, in skyrl-train's layout: package.py reads a package command line into
it and spells the diagnostics back.

Modules, each importing only those before it: package (the `skyrl` package's layout, grammar and keys rlcfg does not
model); releases (what each release's base config holds); models (the
sections); derived (what skyrl-train computes from them, and the names rlcfg runs); rules, lower (to the Experiment)
and emit (for `convert`), which never import each other; and this module, the dialect.
"""

from typing import ClassVar

from rlcfg.dialects.skyrl.models import RELEASES, SkyRLConfig
from rlcfg.dialects.skyrl.rules import RULES
from rlcfg.schema import entry
from rlcfg.schema.base import Dialect


ENTRY = entry("skyrl")


class SkyRL(Dialect):
    name = ENTRY.name
    algorithm_keys = {
        "trainer.train_batch_size": "the prompts per step",
        "generator.n_samples_per_prompt": "the group size",
        "trainer.*.optimizer_config.lr": "the learning rate",
        "trainer.algorithm.*": "the loss, advantage or KL settings",
        "trainer.update_epochs_per_batch": "the updates per step",
    }
    title = "SkyRL"
    documents = "skyrl-train of mid-2025 (Hydra config ppo_base_config.yaml)"
    override_grammar = ENTRY.override_grammar
    overrides_see_defaults = True  # skyrl-train composes overrides onto ppo_base_config, which holds every key
    untyped_values = True  # its code asks `if cfg.trainer.algorithm.use_kl_loss:` of the value as written
    rules: ClassVar = RULES
    releases = ENTRY.releases
    ledger_complete: ClassVar = True

    def variants(self) -> dict:
        return {"skyrl": SkyRLConfig}

    def defaults(self, root, release: str | None = None) -> dict:
        """The documented defaults; with a release, that release's base-config values where they differ."""
        from rlcfg.dialects.skyrl.releases import release_defaults

        return release_defaults(super().defaults(root), release)

    def compose(self, tree, base_dir, env=None):
        from rlcfg.dialects.skyrl.derived import compose_defaults_list

        return compose_defaults_list(tree)

    def checks_copied_keys(self, release: str | None) -> bool:
        """skyrl-train composes a Hydra config in struct mode, which takes an interpolated section as it resolves;
        the package builds its dataclasses from the config, which refuse a key they do not declare."""
        from rlcfg.dialects.skyrl.package import is_package

        return is_package(release)

    def release_label(self, release: str) -> str:
        if release == "pre-0.1.0":
            return "skyrl-train before 0.1.0 (the layout of SkyRL's mid-2025 docs)"
        from rlcfg.dialects.skyrl.package import is_package, label

        if is_package(release):
            return label(release)
        return "skyrl-train (last commit)" if release == "main" else f"skyrl-train {release}"

    def infer_release(self, data: dict, among: tuple[str, ...] = ()) -> tuple[str | None, str]:
        """The releases whose config has every key the document sets; the newest of them (rlcfg.dialects.skyrl
        .releases). A config file is skyrl-train's (the `skyrl` package reads none); a launch script's entrypoint
        says which package it runs (`among`)."""
        from rlcfg.dialects.skyrl.package import PACKAGE_RELEASES
        from rlcfg.dialects.skyrl.releases import releases_of_keys

        candidates = among or tuple(r for r in RELEASES if r not in PACKAGE_RELEASES)
        return releases_of_keys(SkyRLConfig, data, candidates)

    def grammar(self, releases) -> str:
        from rlcfg.dialects.skyrl.package import is_package

        return "dotlist" if releases and all(map(is_package, releases)) else self.override_grammar

    def typed_overrides(self, overrides: list, root, release: str | None) -> tuple[list, list]:
        from rlcfg.dialects.skyrl.package import is_package, read_overrides, package_layout_under_train

        return read_overrides(overrides, release) if is_package(release) else \
            package_layout_under_train(overrides, release)

    def spelled(self, diagnostics: list, release: str | None, overrides) -> list:
        from rlcfg.dialects.skyrl.package import is_package, old_layout_keys, spelled

        return spelled(diagnostics, release, old_layout_keys(overrides)) if is_package(release) else diagnostics

    def unknown_key_policy(self, path: tuple, release: str | None = None) -> str:
        from rlcfg.dialects.skyrl.package import OPEN_MAPPINGS, is_package

        if is_package(release) and any(path[:len(m)] == m and len(path) > len(m) for m in OPEN_MAPPINGS):
            return "open"
        return self.unknown_keys

    def entry_keys(self, source: str | None, entry: str, read, module: str):
        from rlcfg.dialects.skyrl.package import entry_extension

        return entry_extension(source, entry, read, module)

    def prepare(self, tree, release: str | None) -> list:
        from rlcfg.dialects.skyrl.package import is_package, section_resets

        return section_resets(tree, release) if is_package(release) else []

    def schema_path(self, path: tuple, release: str | None) -> tuple:
        from rlcfg.dialects.skyrl.package import is_package, to_schema_path

        return to_schema_path(path, release) if is_package(release) else path

    def release_keys(self, release: str | None):
        from rlcfg.dialects.skyrl.package import is_package, release_extension

        return release_extension(release) if is_package(release) else None

    def describe(self, config: SkyRLConfig) -> str:
        from rlcfg.dialects.skyrl.derived import describe

        return describe(config)


DIALECT = SkyRL()
