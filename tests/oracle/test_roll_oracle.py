"""ROLL: rlcfg's verdict against ROLL's own loader (Hydra compose + dacite.from_dict of the pipeline's config class,
every __post_init__ included) on ROLL's example configs at each claimed release (`v0.1.0`, `v0.1.3`, `v0.2.1`, `v0.3.0`:
the tags; `main`, the mirror's HEAD), and on mutations of them.

The corpus is every `examples/**/*.yaml` except `examples/config/`, whose files are environment fragments that
other examples pull in through their `defaults:` lists (they are checked as part of those). Which config class a
file is loaded with comes from the example's run script (`python examples/start_<pipeline>_pipeline.py
--config_name <stem>`, as ROLL's users start it); a file no run script names is told by the top-level keys only
one config class defines (read from tests/inventory/roll/main.json, not from rlcfg's own detection).

Run: MIRROR_ROOT=/work/.mirror python -m pytest -m oracle tests/oracle/test_roll_oracle.py -s
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

import pytest
import yaml

from tests.oracle.common import Agreement, mirror

REPO = "alibaba+ROLL"
# Each tag judged by its own loader (its tag's roll/, the same venv); v0.2.1 is the last with the DeepSpeed strategies
RELEASES = {"v0.1.0": "v0.1.0", "v0.1.3": "v0.1.3", "v0.2.1": "v0.2.1", "v0.3.0": "v0.3.0", "main": "HEAD"}
INVENTORY = Path(__file__).resolve().parents[1] / "inventory" / "roll" / "main.json"
START_SCRIPT_PIPELINE = {"rlvr": "rlvr", "rlvr_vl": "rlvr", "rlvr_rollout": "rlvr", "agentic": "agentic",
                         "agentic_rollout": "agentic", "distill": "distill", "distill_vl": "distill", "sft": "sft",
                         "dpo": "dpo", "onpolicy_distill": "opd"}

# Disagreements rlcfg makes on purpose. Each names the mutation kind or file and why; rlcfg's message says so too.
KNOWINGLY_STRICTER = {
    # dacite drops unknown keys, so ROLL loads a typo'd key and runs with the default value; rlcfg reports a key
    # close to a known one as an error with a did-you-mean (issue 11: "a key the framework silently drops, and that
    # is close to a known key, is an error").
    "typo",
    # the same, in an example of v0.1.3 and v0.2.1: `env_groups: 64` where the env managers read `num_env_groups`,
    # which then keeps its default
    "examples/qwen2.5-7B-agentic_megatron/agentic_val_webshop_amd.yaml@v0.1.3",
    "examples/qwen2.5-7B-agentic_megatron/agentic_val_webshop_amd.yaml@v0.2.1",
}
# Loader failures that are the oracle machine's, not the config's, per release (counted as "oracle failed"): v0.1.0
# registers its webshop environment only where the webshop-minimal package imports, which the venv does not install.
ENVIRONMENT = {"v0.1.0": re.compile(r"^KeyError: 'webshop'")}
# A rule that knowingly reports what ROLL hits only after load says so in its message (DESIGN: "<framework> accepts
# this at load but fails when ..."); a file rejected only by such rules is not a disagreement.
AFTER_LOAD = "ROLL accepts this at load but fails when"


def _git(*args: str, check: bool = True) -> str:
    """git's output ("" where check is off and git fails)."""
    done = subprocess.run(["git", f"--git-dir={mirror(REPO)}", *args], capture_output=True, text=True, check=check)
    return done.stdout if done.returncode == 0 else ""


def _tree(commit: str, oracle_dir: Path) -> Path:
    home = Path(os.environ.get("ORACLE_HOME", "/tmp/oracle"))
    dest = home / "trees" / REPO / commit[:12]
    if not (dest / "examples").is_dir():
        subprocess.run(["python3", str(oracle_dir / "extract_tree.py"), str(mirror(REPO)), commit, str(dest)],
                       check=True, capture_output=True)
    return dest


@lru_cache(maxsize=None)
def _distinctive_keys() -> dict[str, set[str]]:
    pipelines = json.loads(INVENTORY.read_text())["pipelines"]
    tops = {p: {k.split(".")[0] for k in keys} for p, keys in pipelines.items()}
    return {p: tops[p] - set().union(*(tops[q] for q in tops if q != p)) for p in tops}


def _pipelines_from_run_scripts(tree: Path) -> tuple[dict[Path, str], dict[Path, set[str]]]:
    """From the run scripts' `python examples/start_<x>_pipeline.py ... --config_name <stem>`: (example file ->
    pipeline, folder -> the pipelines its scripts start). Line continuations and plain `NAME=value` shell variables
    are followed."""
    found: dict[Path, str] = {}
    folders: dict[Path, set[str]] = {}
    for script in tree.glob("examples/**/*.sh"):
        text = script.read_text(errors="replace").replace("\\\n", " ")
        names = dict(re.findall(r"^\s*(?:export\s+)?(\w+)=[\"']?([^\"'\s]*)[\"']?\s*$", text, flags=re.M))
        for match in re.finditer(r"start_(\w+?)_pipeline\.py([^\n]*)", text):
            pipeline = START_SCRIPT_PIPELINE.get(match.group(1))
            if pipeline is None:
                continue
            folders.setdefault(script.parent, set()).add(pipeline)
            name = re.search(r"--config_name[= ]+(\S+)", match.group(2))
            if name is None:
                continue
            stem = re.sub(r"\$\{?(\w+)\}?", lambda m: names.get(m.group(1), m.group(0)), name.group(1).strip("'\""))
            if "$" not in stem:
                found[script.parent / f"{stem}.yaml"] = pipeline
    return found, folders


def _pipeline(path: Path, by_script: dict[Path, str], folders: dict[Path, set[str]]) -> str:
    data = yaml.safe_load(path.read_text()) or {}
    pipeline = by_script.get(path)
    if pipeline is None and len(folders.get(path.parent, ())) == 1:
        pipeline = next(iter(folders[path.parent]))  # the one launcher of that example folder
    if pipeline is None:
        keys = set(data) if isinstance(data, dict) else set()
        for name in ("agentic", "sft", "dpo", "distill"):
            if keys & _distinctive_keys()[name]:
                pipeline = name
                break
        else:
            pipeline = "rlvr"
    return pipeline


def _launcher_view(path: Path) -> tuple[Path, str]:
    """examples/start_onpolicy_distill_pipeline.py sets is_pure_opd before dacite builds the config (RLVRConfig or
    AgenticConfig, by pure_opd_pipeline_type); the batch oracle loads files as they are, so both sides judge a copy
    that says is_pure_opd: true, which is what that launcher builds."""
    data = yaml.safe_load(path.read_text()) or {}
    pipeline = "agentic" if data.get("pure_opd_pipeline_type") == "agentic" else "rlvr"
    view = path.parent / f"_mut_opd_{path.name}"
    view.write_text("is_pure_opd: true\n" + path.read_text())
    return view, pipeline


def corpus(tree: Path) -> list[tuple[Path, str]]:
    """(file, pipeline) for every example; OPD examples as the OPD launcher sees them (written beside them)."""
    by_script, folders = _pipelines_from_run_scripts(tree)
    files = sorted(p for p in tree.glob("examples/**/*.yaml")
                   if "examples/config/" not in str(p) and not p.name.startswith("_mut_"))
    out = []
    for path in files:
        pipeline = _pipeline(path, by_script, folders)
        out.append(_launcher_view(path) if pipeline == "opd" else (path, pipeline))
    return out


def oracle_batch(oracle_dir: Path, cases: list[tuple[str, Path, str]], rev: str = "HEAD"
                 ) -> dict[str, tuple[bool | None, str]]:
    """Run ROLL's loader at `rev` on many files in one process (run_roll_batch.sh does it for HEAD): id ->
    (accepted, message)."""
    lines = "".join(json.dumps({"id": i, "path": str(p), "pipeline": pl}) + "\n" for i, p, pl in cases)
    env = dict(os.environ)
    env.setdefault("ORACLE_HOME", "/tmp/oracle")
    # stand-ins for packages a release imports as its config module loads and the venv lacks (stubs/roll_<rev>),
    # copied where the sandbox sees them
    stubs = Path(__file__).parent / "stubs" / f"roll_{rev}"
    search = '"$S"'
    if stubs.is_dir():
        seen = Path(env["ORACLE_HOME"]) / "stubs" / stubs.name
        shutil.copytree(stubs, seen, dirs_exist_ok=True)
        search = f'"$S:{seen}"'
    # the parts of the tree the loader needs, as far as the tag has them (v0.1.x has no setup.py)
    parts = " ".join(p for p in ("roll", "examples", "mcore_adapter", "pyproject.toml", "setup.py",
                                 "requirements_common.txt") if _git("cat-file", "-t", f"{rev}:{p}", check=False))
    command = ["bash", str(oracle_dir / "run_roll_batch.sh")] if rev == "HEAD" else ["bash", "-c", (
        f'. "{oracle_dir}/common.sh"; S=$(ensure_src roll_{rev} {REPO} {rev} {parts}); V=$(ensure_venv roll); '
        'W=$(mktemp -d "$ORACLE_HOME/run/rollb.XXXXXX"); cd "$W"; '
        f'PYTHONPATH={search} "{oracle_dir}/sandbox.sh" "$V/bin/python" -W ignore "{oracle_dir}/roll_batch_oracle.py" '
        '2>/dev/null | grep "^@@RESULT "; cd /; rm -rf "$W"')]
    proc = subprocess.run(command, input=lines, capture_output=True, text=True, timeout=3600, env=env)
    out: dict[str, tuple[bool | None, str]] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("@@RESULT "):
            row = json.loads(line[len("@@RESULT "):])
            out[row["id"]] = (row["verdict"] == "ACCEPT", row["error"])
    return out


def rlcfg_verdict(path: Path, release: str) -> tuple[bool, str]:
    from rlcfg.frontend import check_file

    result = check_file(str(path), dialect="roll", release=release, env={})
    errors = [f"{d.code} {d.path}: {d.message}" for d in result.diagnostics if d.severity.name == "ERROR"]
    return result.ok, "; ".join(errors)[:600]


# ---- mutations ----------------------------------------------------------------------------------------------


def _get(data: dict, dotted: str):
    node = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _set(data: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value


def mutations(data: dict, pipeline: str) -> dict[str, dict]:
    """Mutated copies of one example: kind -> document. Each should make ROLL's loader fail (except `typo`)."""
    out: dict[str, dict] = {}

    def variant(kind: str, change) -> None:
        copy = json.loads(json.dumps(data))
        if change(copy) is not False:
            out[kind] = copy

    def typo(d):
        if "rollout_batch_size" not in d:
            return False
        d["rollout_batch_sizee"] = d.pop("rollout_batch_size")

    def wrong_type(d):
        d["rollout_batch_size"] = "sixty-four"

    def bad_enum(d):
        d["adv_estimator"] = "grpoo"

    def reward_clip_null(d):
        d["reward_clip"] = None

    def broken_divisibility(d):
        # vLLM's tp × pp becomes the GPUs per engine, which must divide the worker's GPU count
        if _get(d, "actor_infer.strategy_args.strategy_name") != "vllm" or not _get(d, "actor_infer.device_mapping"):
            return False
        _set(d, "actor_infer.strategy_args.strategy_config.tensor_parallel_size", 7)

    def deleted_key(d):
        if pipeline == "agentic":
            if "custom_envs" not in d:
                return False
            del d["custom_envs"]
        else:
            if not isinstance(d.get("actor_infer"), dict) or "generating_args" not in d["actor_infer"]:
                return False
            del d["actor_infer"]["generating_args"]

    # the kinds of issue 29: coerced types, boundary values, keys of a sibling section, enum case, conflicting
    # settings, nulls
    def flag_as_1(d):
        d["add_token_level_kl"] = 1

    def flag_as_null(d):
        d["add_token_level_kl"] = None

    def flag_as_string(d):
        d["add_token_level_kl"] = "false"

    def number_as_string(d):
        d["rollout_batch_size"] = "64"

    def zero_epochs(d):
        d["ppo_epochs"] = 0

    def zero_steps(d):
        d["max_steps"] = 0

    def estimator_in_capitals(d):
        d["adv_estimator"] = "GRPO"

    def sibling_key(d):
        # every worker declares training_args; the inference worker never reads them
        if not isinstance(d.get("actor_infer"), dict):
            return False
        d["actor_infer"].setdefault("training_args", {})["learning_rate"] = 1.0e-6

    def other_strategy_option(d):
        args = _get(d, "actor_train.strategy_args")
        if not isinstance(args, dict) or args.get("strategy_name") != "fsdp2_train":
            return False
        args.setdefault("strategy_config", {})["tensor_model_parallel_size"] = 2

    def kl_twice(d):
        d["use_kl_loss"] = True
        d["add_token_level_kl"] = True

    for kind, change in (("typo", typo), ("wrong type", wrong_type), ("bad enum", bad_enum),
                         ("reward_clip null", reward_clip_null), ("broken divisibility", broken_divisibility),
                         ("deleted key", deleted_key), ("flag as 1", flag_as_1), ("flag as null", flag_as_null),
                         ("flag as the string false", flag_as_string), ("number as a string", number_as_string),
                         ("zero epochs", zero_epochs), ("zero steps", zero_steps),
                         ("estimator in capitals", estimator_in_capitals), ("sibling section key", sibling_key),
                         ("another strategy's option", other_strategy_option), ("kl in loss and reward", kl_twice)):
        variant(kind, change)
    return out


def _write_mutations(files: list[tuple[Path, str]], per_pipeline: int = 4) -> list[tuple[Path, str, str]]:
    written: list[tuple[Path, str, str]] = []
    taken: dict[str, int] = {}
    for path, pipeline in files:
        if pipeline not in ("rlvr", "agentic") or taken.get(pipeline, 0) >= per_pipeline:
            continue
        data = yaml.safe_load(path.read_text())
        if not isinstance(data, dict):
            continue
        taken[pipeline] = taken.get(pipeline, 0) + 1
        for kind, doc in mutations(data, pipeline).items():
            target = path.parent / f"_mut_{path.stem}_{kind.replace(' ', '_')}.yaml"
            target.write_text(yaml.safe_dump(doc, sort_keys=False))
            written.append((target, pipeline, kind))
    return written


def _usable(oracle_ok: bool | None, message: str) -> bool:
    # The loader evaluates `device_mapping` and reads this machine's GPU count; a file the oracle cannot judge
    # (exit 2) is reported separately, never counted as agreement.
    return oracle_ok is not None


@pytest.mark.oracle
@pytest.mark.parametrize("release", list(RELEASES))
def test_examples_and_mutations_agree(oracle_dir, release):
    commit = _git("rev-parse", RELEASES[release]).strip()
    tree = _tree(commit, oracle_dir)
    files = corpus(tree)
    muts = _write_mutations([(p, pl) for p, pl in files])
    try:
        cases = [(f"f{i}", p, pl) for i, (p, pl) in enumerate(files)]
        cases += [(f"m{i}", p, pl) for i, (p, pl, _k) in enumerate(muts)]
        verdicts = oracle_batch(oracle_dir, cases, RELEASES[release])
        assert verdicts, f"ROLL's loader at {release} answered for none of the {len(cases)} cases"
        table = Agreement()
        unexpected: list[str] = []
        for (case_id, path, pipeline) in cases:
            kind = muts[int(case_id[1:])][2] if case_id.startswith("m") else None
            corpus_name = f"{release} {pipeline}" + (" mutations" if kind else "")
            oracle_ok, oracle_msg = verdicts.get(case_id, (None, "no result"))
            if release in ENVIRONMENT and ENVIRONMENT[release].search(oracle_msg):
                oracle_ok = None
            ok, why = rlcfg_verdict(path, release)
            name = str(path.relative_to(tree))
            table.add(corpus_name, name, ok, oracle_ok, f"rlcfg: {why} | ROLL: {oracle_msg}")
            if oracle_ok is None or ok == oracle_ok:
                continue
            if (kind in KNOWINGLY_STRICTER or f"{path.relative_to(tree)}@{release}" in KNOWINGLY_STRICTER) and not ok:
                continue
            if not ok and all(AFTER_LOAD in e for e in why.split("; RLC")):
                continue
            unexpected.append(f"{name} [{pipeline}{', ' + kind if kind else ''}]: rlcfg "
                              f"{'accepts' if ok else 'rejects'} ({why}); ROLL "
                              f"{'accepts' if oracle_ok else 'rejects'} ({oracle_msg[:300]})")
        print(f"\nROLL {release} ({commit[:12]}): rlcfg against ROLL's loader\n{table.table()}")
        for line in unexpected:
            print("  DISAGREE", line)
        assert not unexpected, f"{len(unexpected)} disagreements with ROLL's loader"
    finally:
        for path in tree.glob("examples/**/_mut_*.yaml"):
            path.unlink()
