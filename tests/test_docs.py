"""`rlcfg docs`: the reference pages are generated from the schemas, complete, and kept fresh."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any, Literal

import pytest

from rlcfg import schema
from rlcfg.schema.base import REQUIRED, Dialect, RuleSet, Section, param, section
from tests.helpers import ROOT, assert_golden, cli

# ---- a small dialect that has every shape the real ones have --------------------------------------------------
# Variants chosen by a key, interpolated and required defaults, a renamed key, an optional section, a mapping
# of sections, a union of sections and rules (one of them a silent rewrite). The golden page is rendered from
# it, so it changes only when the renderer does, not whenever a real dialect gains a parameter.


class ToyLogging(Section):
    log_dir: str = param("${runtime.output_dir}/logs", description="Where metrics are written.")
    enable_wandb: bool = param(False, description="Also send metrics to Weights & Biases.")
    interval: int = param(1, description="Log every this many steps.", ge=1)


class ToyRuntime(Section):
    train_backend: Literal["fsdp", "megatron"] = param("fsdp", description="Which library trains the policy.")
    output_dir: str = param(REQUIRED, description="Directory for checkpoints and logs.")
    sample_per_episode: int = param(512, description="Samples generated per episode, across all rollout engines.",
                                    ge=1)
    train_global_batch_size: int = param(512, description="Samples per optimizer step. Must divide the "
                                                           "samples per episode.", ge=1)
    colocation: list[str] = param(["policy", "trainer"], description="Roles that share GPUs | in turn.")
    log_every: int = param(1, description="Older spelling of the logging interval.", ge=1,
                           renamed_to="runtime.logging.interval")
    logging: ToyLogging = section(ToyLogging, description="Metric logging.")


class ToyFsdpTrainer(Section):
    num_gpu: int = param(8, description="GPUs the trainer uses.", ge=1)
    lr: float = param(2e-6, description="Peak learning rate.", gt=0)
    fsdp_size: int = param(-1, description="Shard group size; -1 shards over every GPU.")


class ToyMegatronTrainer(Section):
    num_gpu: int = param(8, description="GPUs the trainer uses.", ge=1)
    lr: float = param(1e-6, description="Peak learning rate.", gt=0)
    tensor_model_parallel_size: int = param(1, description="Tensor-parallel group size.", ge=1, le=64)


class ToyRollout(Section):
    num_gpu: int = param("${trainer.num_gpu}", description="GPUs for rollout; the trainer's count by default.")
    temperature: float = param(1.0, description="Sampling temperature.", ge=0)
    stop: list[str] | None = param(None, description="Strings that end a response.", min_length=1)


class ToyRewardFunction(Section):
    kind: Literal["function"] = param("function", description="A Python function scores each response.")
    path: str = param(REQUIRED, description="`module:function` of the scorer.")


class ToyRewardModel(Section):
    kind: Literal["model"] = param("model", description="A reward model scores each response.")
    model_path: str = param(REQUIRED, description="Checkpoint of the reward model.")
    num_gpu: int = param(1, description="GPUs for the reward model.", ge=1)


class ToyEvaluator(Section):
    every: int = param(5, description="Evaluate every this many episodes.", ge=1)
    data_path: str = param(REQUIRED, description="Evaluation prompts.")


class _ToyCommon(Section):
    runtime: ToyRuntime = section(ToyRuntime, description="How the run is laid out and logged.")
    rollout: ToyRollout = section(ToyRollout, description="Response generation.")
    rewards: dict[str, ToyRewardFunction | ToyRewardModel] = param(
        {}, description="Named reward sources, summed.")
    eval: ToyEvaluator | None = section(ToyEvaluator, description="Periodic evaluation.", optional=True)
    extra: dict[str, Any] = param({}, description="Free-form keys passed to the framework unchanged.")


class ToyFsdp(_ToyCommon):
    """Training with PyTorch FSDP."""

    trainer: ToyFsdpTrainer = section(ToyFsdpTrainer, description="The policy trainer.")


class ToyMegatron(_ToyCommon):
    """Training with Megatron-core."""

    trainer: ToyMegatronTrainer = section(ToyMegatronTrainer, description="The policy trainer.")


toy_rules = RuleSet()


@toy_rules.rule("toy/batch-divides", "RLC300", "The samples per episode are a multiple of the global batch size.",
                keys=["runtime.sample_per_episode", "runtime.train_global_batch_size"])
def _batch_divides(cfg: Any, ctx: Any):
    runtime = cfg.runtime
    if runtime.sample_per_episode % runtime.train_global_batch_size:
        yield ctx.error("RLC300", "runtime.sample_per_episode", "does not divide")


@toy_rules.rule("toy/fsdp-size", "RLC304", "The trainer ignores `trainer.fsdp_size` and shards over `trainer.num_gpu`.",
                keys=["trainer.fsdp_size"])
def _fsdp_size(cfg: Any, ctx: Any):
    return ()


@toy_rules.rule("toy/rollout-gpus", "RLC400", "Rollout GPUs are a multiple of the trainer's; the trainer raises a "
                "smaller count to its own.", keys=["rollout.num_gpu", "trainer.num_gpu"], also=("RLC304",))
def _rollout_gpus(cfg: Any, ctx: Any):
    return ()


class ToyDialect(Dialect):
    name = "toy"
    title = "Toy"
    documents = "Toy 1.0 (a test fixture)"
    override_grammar = "dotlist"
    rules = toy_rules

    def variants(self) -> dict[str, type[Section]]:
        return {"fsdp": ToyFsdp, "megatron": ToyMegatron}

    def root(self, data: dict) -> type[Section]:
        runtime = data.get("runtime")
        backend = runtime.get("train_backend") if isinstance(runtime, dict) else None
        return ToyMegatron if backend == "megatron" else ToyFsdp


TOY = ToyDialect()


# ---- every dialect that exists ------------------------------------------------------------------------------

DIALECTS = schema.names()


def _words(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def _missing_descriptions(dialect: Dialect) -> list[str]:
    from docs_gen.model import dotted_path, iter_all_fields

    bad = []
    for variant, root in dialect.variants().items():
        for ref in iter_all_fields(root):
            description = (ref.info.description or "").strip()
            key = str(ref.path[-1])
            if not description or _words(description) in (_words(key), _words(dotted_path(ref.path))):
                bad.append(f"{dotted_path(ref.path)} ({variant}, {ref.owner.__name__}): {description!r}")
    return sorted(set(bad))


@pytest.mark.parametrize("name", DIALECTS)
def test_every_field_of_every_dialect_has_a_description(name: str) -> None:
    bad = _missing_descriptions(schema.load(name))
    assert not bad, f"{len(bad)} fields of {name} have no real description:\n  " + "\n  ".join(bad)


def test_the_description_check_catches_a_field_without_one() -> None:
    class Bare(Section):
        num_gpu: int = param(1, description="Num gpu")
        lr: float = param(1e-6, description="")

    class BareDialect(ToyDialect):
        def variants(self) -> dict[str, type[Section]]:
            return {"only": Bare}

    bad = _missing_descriptions(BareDialect())
    assert [b.split(" ")[0] for b in bad] == ["lr", "num_gpu"]


@pytest.mark.parametrize("name", DIALECTS)
def test_each_dialect_page_documents_every_key_once(name: str) -> None:
    from docs_gen import docs_files
    from docs_gen.model import dialect_doc, dotted_path, iter_all_fields

    dialect = schema.load(name)
    page = docs_files([dialect], "md", pages="one")[f"{name}.md"]
    doc = dialect_doc(dialect)
    headings = re.findall(r"^### <a id=\"([^\"]+)\"></a>", page, flags=re.M)
    assert len(headings) == len(set(headings)) == len(doc.sections), "a section is documented twice"
    for variant, root in dialect.variants().items():
        for ref in iter_all_fields(root):
            assert f"| `{ref.path[-1]}` |" in page, f"{dotted_path(ref.path)} ({variant}) has no row on {name}.md"
    for rule in dialect.rules:
        assert f'<a id="rule-' in page and f"`{rule.id}`" in page, f"rule {rule.id} is not on {name}.md"


# ---- the committed pages are fresh ----------------------------------------------------------------------------


def test_docs_check_passes_on_the_committed_pages() -> None:
    result = cli("docs", "--check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "up to date" in result.stdout


def test_docs_check_names_a_stale_and_a_missing_page(tmp_path) -> None:
    out = tmp_path / "reference"
    shutil.copytree(ROOT / "docs" / "reference", out)
    index = out / "index.md"
    index.write_text(index.read_text() + "\nA hand edit.\n")
    (out / "diagnostics.md").unlink()
    result = cli("docs", "--check", "--out", str(out))
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{index}: out of date" in result.stdout
    assert f"{out / 'diagnostics.md'}: missing" in result.stdout
    assert f"regenerate with `rlcfg docs --out {out}`" in result.stdout
    assert index.read_text().endswith("A hand edit.\n"), "--check must not write"


def test_docs_writes_pages_that_then_pass_the_check(tmp_path) -> None:
    for fmt in ("md", "rst"):
        out = tmp_path / fmt
        written = cli("docs", "--format", fmt, "--out", str(out))
        assert written.returncode == 0, written.stderr
        assert (out / f"index.{fmt}").exists() and (out / f"diagnostics.{fmt}").exists()
        for name in DIALECTS:
            assert (out / f"{name}.{fmt}").exists()
        again = cli("docs", "--format", fmt, "--out", str(out), "--check")
        assert again.returncode == 0, again.stdout


def test_docs_rejects_an_unknown_dialect_as_a_usage_error() -> None:
    result = cli("docs", "--dialect", "verl")
    assert result.returncode == 2
    assert "unknown dialect `verl`" in result.stderr
    assert "Traceback" not in result.stderr


# ---- what a reader sees ---------------------------------------------------------------------------------------


def test_toy_page_matches_the_golden_markdown() -> None:
    from docs_gen import docs_files

    assert_golden("docs/toy.md", docs_files([TOY], "md", pages="one")["toy.md"])


def test_toy_page_matches_the_golden_rst() -> None:
    from docs_gen import docs_files

    assert_golden("docs/toy.rst", docs_files([TOY], "rst", pages="one")["toy.rst"])


def test_rows_read_as_a_user_writes_the_config() -> None:
    from docs_gen import docs_files

    page = docs_files([TOY], "md", pages="one")["toy.md"]
    assert "| `output_dir` | str | `???` |" in page  # required
    assert "| `num_gpu` | int | `${trainer.num_gpu}` |" in page  # interpolation kept, unquoted
    assert "| `enable_wandb` | bool | `false` |" in page
    assert "| `colocation` | list of str | `[policy, trainer]` |" in page  # flow style
    assert "| `train_backend` | one of fsdp, megatron | `fsdp` |" in page
    assert "| `tensor_model_parallel_size` | int >= 1, <= 64 | `1` |" in page
    assert "| `lr` | float > 0 | `2e-6` |" in page
    assert "Roles that share GPUs \\| in turn." in page  # a pipe does not split the cell


def test_shared_rows_are_written_once_and_variant_rows_are_marked() -> None:
    from docs_gen import docs_files

    page = docs_files([TOY], "md", pages="one")["toy.md"]
    assert page.count("| `output_dir` |") == 1
    assert page.count("| `num_gpu` | int >= 1 | `8` |") == 1  # same in both trainers
    assert "Only with `runtime.train_backend: megatron`:" in page
    trainer = page[page.index('<a id="trainer">'):page.index('<a id="rules">')]
    assert trainer.index("| `fsdp_size` |") < trainer.index("Only with `runtime.train_backend: megatron`:")


def test_rules_rewrites_and_renames_are_listed() -> None:
    from docs_gen import docs_files

    page = docs_files([TOY], "md", pages="one")["toy.md"]
    rules = page[page.index("## <a id=\"rules\">"):]
    assert "[RLC300](diagnostics.md#rlc300) error" in rules and "`toy/batch-divides`" in rules
    rewrites = page[page.index("## <a id=\"rewrites\">"):page.index("## <a id=\"renamed\">")]
    assert "ignores `trainer.fsdp_size`" in rewrites and "batch-divides" not in rewrites
    # A rule whose own code is another one is listed with the rewrites when it may also report RLC304.
    assert "[RLC400](diagnostics.md#rlc400) error; also [RLC304](diagnostics.md#rlc304)" in rules
    assert "[`toy/rollout-gpus`](#rule-toy-rollout-gpus)" in rewrites
    assert "| `runtime.log_every` | `runtime.logging.interval` |" in page


def test_diagnostics_page_lists_every_code_with_its_example() -> None:
    from docs_gen import docs_files
    from rlcfg.diagnostics import CODES

    page = docs_files([TOY], "md")["diagnostics.md"]
    for code, info in CODES.items():
        row = next(line for line in page.splitlines() if f'<a id="{code.lower()}"></a>`{code}`' in line)
        assert info.severity.value in row and info.title in row
    assert "[Toy](toy.md#rules) 1" in page
    rewrite_row = next(line for line in page.splitlines() if '<a id="rlc304"></a>' in line)
    assert "[Toy](toy.md#rules) 2" in rewrite_row  # toy/fsdp-size, and toy/rollout-gpus that may also report it


@pytest.mark.parametrize("value,text", [
    (None, "null"), (True, "true"), (2e-6, "2e-6"), (1.0, "1.0"), ("${a.b}", "${a.b}"), ("yes", '"yes"'),
    ("", '""'), (["a", "${b}"], '[a, "${b}"]'), ({"k": [1, 2]}, "{k: [1, 2]}"), ("a: b", '"a: b"'),
])
def test_defaults_are_spelled_in_yaml(value: Any, text: str) -> None:
    from docs_gen.values import yaml_value

    assert yaml_value(value) == text


def test_an_installed_wheel_carries_the_doc_templates(tmp_path):
    """`rlcfg docs` outside a source checkout reads the templates from <prefix>/share/rlcfg (pyproject data-files)."""
    import subprocess
    import sys
    import zipfile

    from docs_gen import render

    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                            str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    wheel = next(tmp_path.glob("rlcfg-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {n.rsplit("/", 1)[-1] for n in names if "/data/share/rlcfg/templates/docs/" in n}
    assert shipped == {p.name for p in render._CANDIDATES[0].glob("*.j2")}
    assert render._CANDIDATES[1] == Path(sys.prefix) / "share" / "rlcfg" / "templates" / "docs"
