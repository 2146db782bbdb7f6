"""RLinf: rlcfg's verdict against RLinf's own loader at every claimed release.

RLinf's entry points compose the YAML with Hydra (its `defaults:` lists and `hydra.searchpath`), run
`rlinf.config.validate_cfg`, resolve the config and, for the reasoning task types, build the component placement.
`../shared/oracle/rlinf_oracle.py` does exactly that; here it runs, in place inside a tree of the release's
`examples/` (so sibling defaults resolve), with the source and virtualenv of that release:

    2025-08  commit 298084c8b  venv rlinf0819
    2025-10  commit d80c9195f  venv rlinf0819 (the Oct-2025 code imports with the Aug-2025 pins)
    v0.1     tag v0.1 (9df6dc80d): venv rlinf0819 (its model code reads `rope_theta`, which newer transformers moved)
    v0.2     tag v0.2 (46213e88c), v0.3 (050543189): venv rlinf
    main     commit a3816b596  venv rlinf (the oracle's HEAD)

Cases, per release:
1. the release's example configs (every file with a top-level `runner:`/`cluster:`), sampled: every config rlcfg
   rejects, plus up to RLINF_ORACLE_PER_FOLDER (default 3) others per example folder (examples/embodiment,
   examples/reasoning, examples/agent/searchr1, ...). Only single-node configs are run: RLinf's Cluster waits for
   `cluster.num_nodes` Ray nodes, which this machine does not have (multi-node files are listed as skipped).
2. mutations of one reasoning and one embodied example: a misspelt key that RLinf reads, a wrong type, a bad enum
   value, broken divisibility, a deleted key.

From 2025-10 on RLinf sizes the cluster from the GPUs Ray reports; this machine has none, so the oracle's Ray node
declares `cluster.num_gpus_per_node` GPUs (8 when the config leaves it to Ray) through RAY_OVERRIDE_RESOURCES.

Megatron actors make RLinf read the HF `config.json` of the rollout model; those cases point the model path at the
oracle's stand-in model (`fixtures/rlinf/model`), on both sides.

Known, deliberate differences (ALLOWED): rlcfg reports them and its message says "accepts this at load but fails
when" (the failure comes after the loader, e.g. when the entry script builds the placement or a worker starts).

Verdicts are cached in $ORACLE_HOME/rlinf_verdicts_<release>.json (key: commit, file, overrides); delete it to rerun.
RLINF_ORACLE_CACHED_ONLY=1 judges only the cached cases (the table without new loader runs).
Run: MIRROR_ROOT=/work/.mirror python -m pytest -m oracle tests/oracle/test_rlinf_oracle.py -s
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.oracle.common import Agreement

REPO = "RLinf+RLinf"
RELEASES = {"2025-08": ("298084c8b1a043b56147526267f974e1d86c5e13", "rlinf0819"),
            "2025-10": ("d80c9195f81c784d7410e736da98199f29ae8a30", "rlinf0819"),
            "v0.1": ("9df6dc80dc729a6caccab92dd676004e51b1d3a2", "rlinf0819"),
            "v0.2": ("46213e88caa910a4a52e68bde4fb96416c1efa55", "rlinf"),
            "v0.3": ("0505431899574619da86f551bad70b71e0ea2177", "rlinf"),
            "main": ("a3816b596478dcd8a5c69a6ec1468c9519f77b5b", "rlinf")}
ENV_FOLDERS = {"EMBODIED_PATH": "examples/embodiment", "REPO_PATH": "", "DIFFUSION_PATH": "examples/diffusion",
               "REWARD_PATH": "examples/reward"}
PER_FOLDER = int(os.environ.get("RLINF_ORACLE_PER_FOLDER", "3"))
MARK = "accepts this at load but fails when"
# Loader rejections that are the oracle machine's, not the config's; they count as "oracle failed". RLinf from
# 2025-12 on counts the node's GPUs with NVML (RAY_OVERRIDE_RESOURCES does not reach it): on this GPU-less machine
# it places GPU ranks as node ranks and sizes `all` as one process. And some model families import packages the
# oracle's virtualenv does not install (e.g. DreamZero's `groot`).
ENVIRONMENT_SIGNS = re.compile(r"must be within the available\s+(Node )?ranks|must be less than or equal to \w+ world size 1\b"
                               r"|must be less than total number of GPUs 0|ModuleNotFoundError")

# Runs RLinf's loader at one commit, in place: the same steps as the oracle's my_run_rlinf.sh, for any release.
RUNNER = r'''
. "$ORACLE_DIR/common.sh"
commit=$1; venv=$2; shift 2
if [ "$commit" = "$(git --git-dir="$MIRROR/RLinf+RLinf/repo" rev-parse HEAD)" ]; then
  S=$(ensure_src rlinf RLinf+RLinf HEAD rlinf pyproject.toml)
else
  S=$(ensure_src rlinf_${commit:0:12} RLinf+RLinf $commit rlinf)
fi
V=$(ensure_venv $venv)
IN=$(readlink -f "$1"); shift
W=$(mktemp -d "$ORACLE_HOME/run/rlinf.cwd.XXXXXX"); cd "$W"
PYTHONPATH="$S:$HERE/stubs/rlinf" timeout ${RLINF_TIMEOUT:-150} "$HERE/sandbox.sh" "$V/bin/python" -W ignore \
  "$HERE/rlinf_oracle.py" "$IN" "$@" 2>"$W.stderr" | grep -E "^(ACCEPT|REJECT)"
rc=${PIPESTATUS[0]}; cd /; rm -rf "$W" "$W.stderr"; exit $rc
'''


def oracle_home() -> Path:
    return Path(os.environ.get("ORACLE_HOME", "/tmp/oracle"))


def tree(release: str) -> Path:
    """The release's examples/ (and rlinf/, for reading) under ORACLE_HOME, where the sandbox can see them."""
    commit = RELEASES[release][0]
    dest = oracle_home() / "trees" / REPO / commit[:12]
    if not (dest / "examples").is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        data = subprocess.run(["git", f"--git-dir={Path(os.environ['MIRROR_ROOT']) / REPO / 'repo'}", "archive",
                               commit, "examples", "rlinf"], capture_output=True, check=True).stdout
        import io
        import tarfile
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(dest, filter="data")
    return dest


def use_tree_env(root: Path) -> None:
    """The search-path variables RLinf's run scripts export (`${oc.env:EMBODIED_PATH}/config/`, ...)."""
    for name, sub in ENV_FOLDERS.items():
        os.environ[name] = str(root / sub)


def entry_configs(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("examples/**/*.yaml")
                  if re.search(r"^(runner|cluster):", p.read_text(errors="replace"), re.M))


def folder_of(root: Path, path: Path) -> str:
    parts = path.relative_to(root).parts
    return "/".join(parts[1:3]) if parts[1] == "agent" else parts[1]


class Cache:
    def __init__(self, release: str) -> None:
        # one file per release, so that releases can run in parallel processes
        self.path = oracle_home() / f"rlinf_verdicts_{release}.json"
        self.data = json.loads(self.path.read_text()) if self.path.exists() else {}

    def verdict(self, oracle_dir: Path, release: str, config: Path, overrides: list[str],
                gpus: int | None = None) -> tuple[bool | None, str]:
        commit, venv = RELEASES[release]
        key = f"{commit[:12]}|{config}|{' '.join(overrides)}" + (f"|gpus={gpus}" if gpus else "")
        if key not in self.data and os.environ.get("RLINF_ORACLE_CACHED_ONLY"):
            return None, "not run (RLINF_ORACLE_CACHED_ONLY)"
        if key not in self.data:
            env = dict(os.environ, ORACLE_DIR=str(oracle_dir), ORACLE_HOME=str(oracle_home()))
            if gpus:
                # Ray's node then reports this many GPUs: RLinf (2025-10 on) sizes the cluster from what Ray
                # reports, and this machine has none
                env["RAY_OVERRIDE_RESOURCES"] = json.dumps({"GPU": gpus})
            proc = subprocess.run(["bash", "-c", f'HERE="{oracle_dir}"; {RUNNER}', "runner", commit, venv,
                                   str(config), *overrides], capture_output=True, text=True, env=env, timeout=400)
            line = next((l for l in proc.stdout.splitlines() if l.startswith(("ACCEPT", "REJECT"))), "")
            if not line:
                return None, (proc.stdout + proc.stderr)[-500:] or f"exit {proc.returncode} (timed out?)"
            self.data[key] = [line.startswith("ACCEPT"), line[:400]]
            self.path.write_text(json.dumps(self.data, indent=1))
        accepted, detail = self.data[key]
        return accepted, detail


def model_overrides(release: str, data: dict) -> list[str]:
    """Point the served model at the oracle's stand-in when RLinf will read its config.json (Megatron actor)."""
    actor = data.get("actor") if isinstance(data.get("actor"), dict) else {}
    rollout = data.get("rollout") if isinstance(data.get("rollout"), dict) else {}
    if actor.get("training_backend") != "megatron":
        return []
    fixture = str(oracle_home() / "model_fixture" / "DeepSeek-R1-Distill-Qwen-1.5B")
    if isinstance(rollout.get("model"), dict) and "model_path" in rollout["model"]:
        return [f"rollout.model.model_path={fixture}"]
    if "model_dir" in rollout:
        return [f"rollout.model_dir={fixture}"]
    return []


def composed(path: Path) -> dict:
    from rlcfg.schema import load
    from rlcfg.source.yaml_loader import load_yaml

    tree_, _ = load_yaml(path.read_text(), str(path))
    data, _ = load("rlinf").compose(tree_, str(path.parent))
    return data.data if isinstance(data.data, dict) else {}


def rlcfg_verdict(path: Path, overrides: list[str], release: str) -> tuple[bool, str]:
    from rlcfg.frontend import check_file

    result = check_file(str(path), overrides, dialect="rlinf", release=release)
    errors = [d for d in result.diagnostics if d.severity.value == "error"]
    detail = "; ".join(f"{d.code} {d.path}: {d.message}" for d in errors)[:400]
    return not errors, detail


def mutations(release: str, pipeline: str, data: dict) -> list[tuple[str, list[str]]]:
    out = [("wrong type: group_size", ["algorithm.group_size=abc"]),
           ("deleted key: component_placement", ["~cluster.component_placement"]),
           # the kinds every differential suite covers: a quoted number (RLinf's untyped config keeps it a
           # string), a boundary value, a null, a key added to a sibling section
           ("quoted number: group_size", ["algorithm.group_size='8'"]),
           ("boundary: group_size 0", ["algorithm.group_size=0"]),
           ("null: group_size", ["algorithm.group_size=null"]),
           ("sibling key: actor.group_size", ["+actor.group_size=8"])]
    if release != "2025-08":  # 2025-08 checks no training backend name at load
        out.append(("bad enum: training_backend", ["actor.training_backend=fsdq"]))
        out.append(("enum case: training_backend", ["actor.training_backend=FSDP"]))
    if pipeline == "reasoning":
        out.append(("divisibility: rollout TP", ["rollout.tensor_parallel_size=3"]))
        if release != "2025-08":
            out.append(("bad enum: rollout_backend", ["rollout.rollout_backend=sglangg"]))
    return out


def typo_file(path: Path, key: str, typo: str) -> Path | None:
    """A copy of `path` beside it (so its defaults resolve) with the first `key:` line misspelt."""
    text = path.read_text()
    mutated, n = re.subn(rf"^(\s+){key}:", rf"\g<1>{typo}:", text, count=1, flags=re.M)
    if not n:
        return None
    out = path.with_name(f"zz_typo_{path.name}")
    out.write_text(mutated)
    return out


def stage_model_fixture(oracle_dir: Path) -> None:
    """The oracle's stand-in model (its config.json only) where model_overrides points RLinf, inside ORACLE_HOME,
    which the sandbox can read."""
    dest = oracle_home() / "model_fixture"
    if not (dest / "DeepSeek-R1-Distill-Qwen-1.5B" / "config.json").is_file():
        shutil.copytree(oracle_dir / "fixtures" / "rlinf" / "model", dest, dirs_exist_ok=True)


def run_release(oracle_dir: Path, release: str, agreement: Agreement, skipped: dict) -> None:
    stage_model_fixture(oracle_dir)
    root = tree(release)
    use_tree_env(root)
    cache = Cache(release)
    chosen: dict[str, list[tuple[Path, dict]]] = defaultdict(list)
    bases: dict[str, tuple[Path, dict]] = {}
    for path in entry_configs(root):
        if path.name.startswith("zz_typo_"):
            continue
        data = composed(path)
        nodes = (data.get("cluster") or {}).get("num_nodes", 1) if isinstance(data.get("cluster"), dict) else 1
        if nodes != 1:
            skipped[release] = skipped.get(release, 0) + 1
            continue
        folder = folder_of(root, path)
        rl_ok, _ = rlcfg_verdict(path, model_overrides(release, data), release)
        if not rl_ok or len(chosen[folder]) < PER_FOLDER:
            chosen[folder].append((path, data))
        task = (data.get("runner") or {}).get("task_type")
        pipe = "embodied" if task == "embodied" else "reasoning" if task in ("math", "reasoning") else None
        if pipe and rl_ok and "actor" in data and pipe not in bases:
            bases[pipe] = (path, data)
    # the files rlcfg rejects first (the informative ones when time is short), then the mutations, then the rest
    examples = [(path, data, rlcfg_verdict(path, model_overrides(release, data), release)[0])
                for items in chosen.values() for path, data in items]
    for path, data, _ok in sorted(examples, key=lambda item: item[2]):
        if not _ok:
            judge(cache, oracle_dir, agreement, f"{release} examples", release, path, model_overrides(release, data),
                  root)
    run_mutations(cache, oracle_dir, agreement, release, root, bases)
    for path, data, _ok in examples:
        if _ok:
            judge(cache, oracle_dir, agreement, f"{release} examples", release, path, model_overrides(release, data),
                  root)


def run_mutations(cache: "Cache", oracle_dir: Path, agreement: Agreement, release: str, root: Path,
                  bases: dict) -> None:
    for pipe, (path, data) in sorted(bases.items()):
        base = model_overrides(release, data)
        for name, extra in mutations(release, pipe, data):
            judge(cache, oracle_dir, agreement, f"{release} mutations", release, path, base + extra, root, name)
        typo = typo_file(path, "group_size", "group_sise")
        if typo is not None:
            try:
                judge(cache, oracle_dir, agreement, f"{release} mutations", release, typo, base, root,
                      "typo: group_size")
            finally:
                typo.unlink()


def judge(cache: Cache, oracle_dir: Path, agreement: Agreement, corpus: str, release: str, path: Path,
          overrides: list[str], root: Path, label: str = "") -> None:
    rl_ok, rl_detail = rlcfg_verdict(path, overrides, release)
    gpus = None
    if release != "2025-08":  # 2025-08 takes the GPU count from the config, later releases from Ray
        cluster = composed(path).get("cluster")
        gpus = (cluster.get("num_gpus_per_node") if isinstance(cluster, dict) else None) or 8
    or_ok, or_detail = cache.verdict(oracle_dir, release, path, overrides, gpus)
    name = f"{path.relative_to(root)} {label or ' '.join(o for o in overrides if 'model' not in o)}".strip()
    if or_ok is True and not rl_ok and MARK in rl_detail:
        corpus += " (rlcfg stricter, allowed)"
    if or_ok is False and ENVIRONMENT_SIGNS.search(or_detail):
        or_ok, or_detail = None, "the loader needs GPUs or packages this machine lacks: " + or_detail
    agreement.add(corpus, name, rl_ok, or_ok, f"rlcfg: {rl_detail or 'accept'} | loader: {or_detail}")


@pytest.mark.parametrize("release", list(RELEASES))
def test_rlinf_agrees_with_its_loader(oracle_dir: Path, release: str) -> None:
    agreement, skipped = Agreement(), {}
    run_release(oracle_dir, release, agreement, skipped)
    print(f"\nRLinf {release} (multi-node configs not run: {skipped.get(release, 0)})")
    print(agreement.table())
    for corpus, name, what, detail in agreement.disagreements:
        print(f"  {corpus}: {name}: {what}\n      {detail}")
    unexpected = [d for d in agreement.disagreements if "allowed" not in d[0]]
    assert not unexpected, f"{len(unexpected)} disagreements with RLinf's loader (see the output above)"


if __name__ == "__main__":  # python tests/oracle/test_rlinf_oracle.py [release ...]: the table without pytest
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    here = Path(os.environ.get("RLCFG_ORACLE_DIR", Path(__file__).resolve().parents[3] / "shared" / "oracle"))
    for rel in sys.argv[1:] or list(RELEASES):
        agreement, skipped = Agreement(), {}
        run_release(here, rel, agreement, skipped)
        print(f"\nRLinf {rel} (multi-node configs not run: {skipped.get(rel, 0)})")
        print(agreement.table())
        for corpus, name, what, detail in agreement.disagreements:
            print(f"  {corpus}: {name}: {what}\n      {detail}")
