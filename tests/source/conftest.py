"""A small dialect of our own, so the source layer's tests do not depend on any framework's schema."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from rlcfg import schema as registry
from rlcfg.schema.base import REQUIRED, Dialect, RuleSet, Section, param, section


class Optim(Section):
    lr: float = param(1e-5, description="Learning rate.", gt=0)
    betas: list[float] = param([0.9, 0.999], description="Adam betas.")


class Trainer(Section):
    epochs: int = param(1, description="Passes over the data.", ge=1)
    batch: int = param(REQUIRED, description="Global batch size.", ge=1)
    micro: int = param("${trainer.batch}", description="Micro batch size; defaults to the global batch.")
    out_dir: str = param("${oc.env:TOY_OUT,/tmp/toy}", description="Where checkpoints go.")
    backend: Literal["fsdp", "megatron"] = param("fsdp", description="Training backend.")
    optim: Optim = section(Optim, description="The optimizer.")
    extra: dict[str, Any] = param({}, description="An open mapping of extra options.")


class Root(Section):
    trainer: Trainer = section(Trainer, description="Training.")
    name: str = param("toy", description="Experiment name.")


class Toy(Dialect):
    name = "toy"
    title = "Toy"
    documents = "tests only"
    override_grammar = "hydra"
    overrides_see_defaults = True  # like SkyRL: a base config holds every documented key
    rules = RuleSet()

    def variants(self):
        return {"default": Root}


class DotToy(Toy):
    name = "dottoy"
    override_grammar = "dotlist"


class FileToy(Toy):
    """Like RLinf, ROLL and AReaL: Hydra composes only the user's files, so new keys need `+`."""

    name = "filetoy"
    overrides_see_defaults = False


@pytest.fixture
def toy(monkeypatch):
    """Make `toy` (Hydra overrides) and `dottoy` (dotlist overrides) dialects the only ones known."""
    dialects = {"toy": Toy(), "dottoy": DotToy(), "filetoy": FileToy()}
    monkeypatch.setattr(registry, "names", lambda: list(dialects))
    monkeypatch.setattr(registry, "load", lambda name: dialects[name])
    return dialects
