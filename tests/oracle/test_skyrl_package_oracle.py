"""SkyRL's `skyrl` package: rlcfg's verdict against the package's own loader at every claimed release (skyrl 0.1.0 to
0.4.0).

The package's RL entrypoints are started as `python -m skyrl.train.entrypoints.main_base key=value ...` (or an
example's `main_*` module): the config is `SkyRLTrainConfig.from_cli_overrides(argv)` over the dataclass defaults,
then `validate_cfg` runs. So every case is a command line, judged twice:

- rlcfg: `check_file("python", ["-m", "skyrl.train.entrypoints.main_base", *overrides])`, the command-line form of
  `rlcfg validate`, which judges it among the package's releases, pinned to the case's release;
- the oracle: tests/oracle/skyrl_package_loader.py in a virtualenv with the release's `skyrl` on its path.

The releases' sources: the tags skyrl-v0.1.0 to skyrl-v0.3.0 of the mirror (a source checkout, SkyRL's documented
install: 0.1.0 and 0.2.0 then still read skyrl-train's layout), and the PyPI wheel of 0.4.0, which has no tag in the
mirror; its example scripts are those of the mirror's newest commit, which predates 0.4.0 by weeks.

The cases, per release: the defaults alone; every script under examples/train that runs main_base or an example's
`main_*` module, read as `rlcfg validate SCRIPT` reads it; mutations; every RL template converted to the release by
`rlcfg convert --to-release`, where the loader must also hold the value each written key says.

Run: MIRROR_ROOT=/work/.mirror python -m pytest -m oracle tests/oracle/test_skyrl_package_oracle.py -s
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rlcfg.convert import written_key
from tests.helpers import ROOT
from tests.oracle.common import Agreement, compare, extract, listed, mirror, report, verdict_lines
# an example's entry module registers a custom estimator or loss in code, which the oracle does not run
from tests.oracle.test_skyrl_oracle import ENV, REGISTERED_IN_CODE, SHARED_MUTATIONS

REPO = "NovaSky-AI+SkyRL"
# release -> (revision of the mirror with its sources, or None for the wheel; revision for its example scripts)
RELEASES = {"0.1.0": ("skyrl-v0.1.0", "skyrl-v0.1.0"), "0.2.0": ("skyrl-v0.2.0", "skyrl-v0.2.0"),
            "0.3.0": ("skyrl-v0.3.0", "skyrl-v0.3.0"), "0.4.0": (None, "HEAD")}
ENTRY = "skyrl.train.entrypoints.main_base"
HERE = Path(__file__).parent
# What the package's modules import beyond the skyrl-train oracle's virtualenv (torch, ray, omegaconf, hydra).
EXTRA_PACKAGES = ("pydantic", "cloudpathlib", "aiohttp", "orjson", "pybase64", "rich")

MUTATIONS = [
    *SHARED_MUTATIONS,
    ("plus-added key", ["+trainer.my_flag=1"], None),
    ("tilde", ["~trainer.epochs"], None),
    ("kl twice", ["trainer.algorithm.use_kl_in_reward=true", "trainer.algorithm.use_kl_loss=true"], None),
    ("colocate_all GPU mismatch", ["generator.inference_engine.num_engines=3"], None),
    ("remote engines", ["generator.inference_engine.run_engines_locally=false"], None),
    ("strategy deepspeed", ["trainer.strategy=deepspeed"], None),
    ("strategy megatron", ["trainer.strategy=megatron", "trainer.flash_attn=false"], None),
    ("old layout", ["generator.backend=vllm", "generator.num_inference_engines=1"], None),
    ("mixed layouts", ["generator.backend=vllm", "generator.inference_engine.num_engines=1"], None),
    ("removed key rope", ["trainer.rope_theta=10000.0"], None),
    ("unmodelled key", ["trainer.fully_async.enabled=false"], ("0.3.0", "0.4.0")),
    ("unmodelled key, wrong type", ["trainer.mtp.num_speculative_tokens=many"], ("0.3.0", "0.4.0")),
    ("estimator rloo", ["trainer.algorithm.advantage_estimator=rloo"], None),
    ("sglang", ["generator.inference_engine.backend=sglang"], None),
    ("eval_interval 0", ["trainer.eval_interval=0"], None),
    ("logprobs off", ["generator.sampling_params.logprobs=null"], None),
    ("remote engines, urls", ["generator.inference_engine.run_engines_locally=false",
                              "generator.inference_engine.remote_urls=[a:1]",
                              "trainer.placement.colocate_all=false"], ("0.1.0", "0.2.0")),
]

# Disagreements rlcfg makes on purpose (rlcfg rejects, the loader accepts), by case name or name@release.
KNOWINGLY_STRICTER = {
    # The package builds its dataclasses without checking a value's type (build_nested_dataclass passes values
    # through); the trainer fails where it first computes with the value.
    "wrong type: epochs": "no type check at load; the trainer fails when it counts the steps",
    "unmodelled key, wrong type": "no type check at load",
    # 0.1.0 and 0.2.0 then read the old layout over ppo_base_config.yaml, whose engine values replace those written
    # under generator.inference_engine: the run silently uses other values than the command line's.
    "mixed layouts@0.1.0": "the old layout's values replace generator.inference_engine's",
    "mixed layouts@0.2.0": "the old layout's values replace generator.inference_engine's",
    # main_base picks the workers by strategy and the engines by backend when it creates them; validate_cfg does not
    # look. rlcfg's messages: "... it accepts this at load but fails when it creates the workers/engines".
    "strategy deepspeed": "no deepspeed workers in the package",
    "sglang": "the package creates vLLM engines only (\"Unsupported backend\")",
}



@pytest.fixture(scope="module")
def package_python(oracle_dir: Path) -> str:
    """A Python with the skyrl-train oracle's packages and what the `skyrl` package imports besides."""
    home = Path(os.environ.get("ORACLE_HOME", "/tmp/oracle"))
    base = subprocess.run(["bash", "-c", f"source {oracle_dir}/common.sh; ensure_venv skyrl"], capture_output=True,
                          text=True, env={**os.environ, "ORACLE_HOME": str(home)}, timeout=3600).stdout.strip()
    venv = home / "venv" / "skyrlpkg"
    if not (venv / ".ok").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        site = next((venv / "lib").glob("python3*/site-packages"))
        (site / "base.pth").write_text(str(next(Path(base, "lib").glob("python3*/site-packages"))) + "\n")
        subprocess.run([str(venv / "bin/pip"), "install", "-q", *EXTRA_PACKAGES], check=True)
        (venv / ".ok").touch()
    return str(venv / "bin/python")


def sources(release: str, rev: str | None, tmp: Path) -> Path:
    """The release's `skyrl` and `skyrl_gym` (a folder for PYTHONPATH's two entries: it and it/skyrl-gym)."""
    if rev is not None:
        return extract(REPO, rev, tmp / f"src-{release}", "skyrl", "skyrl-gym")
    wheels = Path(os.environ.get("ORACLE_HOME", "/tmp/oracle")) / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = sorted(wheels.glob(f"skyrl-{release}-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "--python-version", "3.12", f"skyrl=={release}", "-d", str(wheels)], check=True)
        found = sorted(wheels.glob(f"skyrl-{release}-*.whl"))
    target = tmp / f"src-{release}"
    with zipfile.ZipFile(found[0]) as archive:
        archive.extractall(target)
    return target


def cases(release: str, tree: Path, converted: list = ()) -> list[tuple[str, list[str], str]]:
    """(name, overrides, entry module): the defaults, the example scripts as rlcfg reads them, the mutations, and
    the templates converted to the release (converted_cases)."""
    from rlcfg import schema
    from rlcfg.source.launch import read_launch
    from rlcfg.source.yaml_loader import UsageError

    out = [("defaults", [], ENTRY)]
    env = {"HOME": "/home/user", "PWD": str(tree)}
    launchers = schema.launchers("skyrl")
    for script in sorted((tree / "examples" / "train").rglob("*.sh")):
        try:
            found = read_launch(script.read_text(errors="replace"), str(script), launchers, env)
        except UsageError:
            continue  # calls none of the RL entrypoints
        if not found.launcher.releases[0].startswith("skyrl-"):
            continue  # skyrl-train's
        out.append((str(script.relative_to(tree / "examples" / "train")), [str(a) for a in found.arguments],
                    found.module or ENTRY))
    for name, overrides, only in MUTATIONS:
        if only is None or release in only:
            out.append((name, overrides, ENTRY))
    return out + [(name, overrides, ENTRY) for name, overrides, _values in converted]


def converted_cases(release: str) -> list[tuple[str, list[str], dict]]:
    """(name, overrides, values): every RL template written for the release by `rlcfg convert --to-release`, its
    command line as rlcfg reads the written script, and the value each of its keys must load as."""
    from rlcfg.convert import ConversionError, convert
    from rlcfg.convert.keys import flat
    from rlcfg.source.launch import read_launch
    from rlcfg import schema

    out = []
    for template in sorted((ROOT / "templates").glob("*.yaml")):
        try:
            conversion = convert(str(template), "skyrl", to_release=f"skyrl-{release}")
        except ConversionError:
            continue  # an SFT template, or an experiment the release cannot take (rlcfg says which)
        found = read_launch(conversion.text, "converted.sh", schema.launchers("skyrl"), {})
        spell = written_key("skyrl", f"skyrl-{release}")
        values = {spell(key): value for key, value in flat(conversion.tree).items()}
        out.append((f"converted {template.name}", [str(a) for a in found.arguments], values))
    return out


def rlcfg_verdict(overrides: list[str], entry: str, release: str, cwd: Path) -> tuple[bool, str]:
    from rlcfg.diagnostics import Severity
    from rlcfg.frontend import check_file

    here = os.getcwd()
    os.chdir(cwd)  # an example's entry module is found from where the script runs
    try:
        result = check_file("python", ["-m", entry, *overrides], dialect="skyrl", release=f"skyrl-{release}",
                            env={**os.environ, **ENV})
    finally:
        os.chdir(here)
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    return not errors, "; ".join(f"{d.code} {d.message}" for d in errors)[:300]


def oracle_verdicts(python: str, paths: str, cwd: Path, batch: list,
                    values: dict | None = None) -> dict[str, tuple[bool | None, str]]:
    """`values`: by case name, the values its keys must load as (a case is rejected where the loader holds others)."""
    lines = "".join(json.dumps({"id": name, "overrides": overrides, "entry": entry,
                                "values": (values or {}).get(name, {})}) + "\n"
                    for name, overrides, entry in batch)
    proc = subprocess.run([python, "-W", "ignore", str(HERE / "skyrl_package_loader.py")], input=lines, text=True,
                          capture_output=True, timeout=1800, cwd=str(cwd),
                          env={**os.environ, **ENV, "PYTHONPATH": paths})
    out = verdict_lines(proc.stdout)
    if not out:
        out["<loader>"] = (None, proc.stderr[-2000:])
    return out


def test_skyrl_package_agrees_with_its_loader(oracle_dir: Path, package_python: str, tmp_path: Path) -> None:
    assert mirror(REPO).exists()
    agreement = Agreement()
    unexpected, both_reject = [], []
    for release, (rev, examples_rev) in RELEASES.items():
        tree = sources(release, rev, tmp_path)
        scripts = extract(REPO, examples_rev, tmp_path / f"examples-{release}", "examples/train")
        converted = converted_cases(release)
        batch = cases(release, scripts, converted)
        gym = tree / "skyrl-gym"
        stubs = oracle_dir / "stubs" / "skyrl"
        written = {name: values for name, _overrides, values in converted}
        oracle = oracle_verdicts(package_python, f"{tree}:{gym}:{scripts}:{stubs}", scripts, batch, written)
        assert "<loader>" not in oracle, oracle.get("<loader>")
        for name, overrides, entry in batch:
            ok, why = rlcfg_verdict(overrides, entry, release, scripts)
            loader_ok, loader_why = oracle.get(name, (None, "no answer from the oracle"))
            corpus = f"skyrl {release} " + ("scripts" if name.endswith(".sh") else
                                            "converted" if name in written else "mutations")
            if not compare(agreement, both_reject, corpus, release, name, ok, why, loader_ok, loader_why):
                continue
            if not ok and listed(KNOWINGLY_STRICTER, name, release):
                continue
            if ok and entry != ENTRY and any(m in loader_why for m in REGISTERED_IN_CODE):
                continue
            unexpected.append((release, name, ok, loader_ok, why, loader_why))
    report(agreement, both_reject, unexpected)
