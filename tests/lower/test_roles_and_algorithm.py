"""`rlcfg plan` shows what `rlcfg run` starts: the runtime starts the roles the Experiment has, no more, no fewer,
so a lowering builds the reference model whenever a KL term reads it, and otherwise only where the framework itself
runs one (ROLL computes reference log-probs whenever init_kl_coef > 0, even with no KL term)."""

from __future__ import annotations

import pytest

from rlcfg import lower
from rlcfg.frontend import check_file
from tests.helpers import TEMPLATES

CASES = [(path, ()) for path in sorted(TEMPLATES.glob("*.yaml"))] + [
    # KL only in the reward (ROLL's init_kl_coef without use_kl_loss), and no KL at all
    (TEMPLATES / "roll-fsdp2-vllm.yaml", ("use_kl_loss=false", "++init_kl_coef=0.1")),
    (TEMPLATES / "roll-fsdp2-vllm.yaml", ("use_kl_loss=false", "++init_kl_coef=0.0")),
    (TEMPLATES / "skyrl-fsdp-vllm.yaml", ("trainer.algorithm.use_kl_loss=false",)),
]


@pytest.mark.parametrize("path, overrides", CASES, ids=lambda v: v.name if hasattr(v, "name") else ",".join(v))
def test_the_reference_model_exists_when_a_kl_term_reads_it_and_only_where_the_framework_runs_one(path, overrides):
    result = check_file(str(path), list(overrides), env={"HOME": "/home/user"})
    if result.config is None:
        pytest.skip(f"{path.name} {overrides} does not validate here: {[d.message for d in result.diagnostics][:2]}")
    try:
        exp = lower.lower(result.dialect, result.config)
    except Exception as exc:  # a pipeline the dialect validates but does not run (named in its refusal)
        pytest.skip(f"{path.name}: {exc}")
    kl = exp.algorithm.kl
    reads_it = kl.placement != "none" and kl.coef > 0
    if reads_it:
        assert exp.role("reference") is not None
    elif exp.role("reference") is not None:
        assert exp.dialect == "roll", f"{exp.dialect} builds a reference model no KL term reads"
