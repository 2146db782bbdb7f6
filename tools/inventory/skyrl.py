"""Inventory of skyrl-train's base config at each release rlcfg claims (test data for tests/test_inventory.py).

skyrl-train has one config schema: `skyrl_train/config/ppo_base_config.yaml` plus the fragments its Hydra defaults
list pulls in (deepspeed_config/*, megatron_config/*, skyrl_gym_config/default). Every key a user may set is in
that composed tree, since main_base.py runs Hydra in struct mode. This script reads the files straight out of the
bare mirror (git show), composes them the way Hydra does (a fragment lands at the `@pkg` of its defaults entry,
else at its `# @package` header, else at its group; `_self_` first means the fragments win), flattens the result
to dotted keys with the YAML type and default, and writes tests/inventory/skyrl/<release>.json.

It never imports skyrl_train. Not run in CI:

    python tools/inventory/skyrl.py [--mirror /work/.mirror/NovaSky-AI+SkyRL/repo] [--out tests/inventory/skyrl]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

from ruamel.yaml import YAML

CONFIG_DIR = "skyrl-train/skyrl_train/config"
BASE = f"{CONFIG_DIR}/ppo_base_config.yaml"
# release name (as rlcfg says it) -> git revision. "main" is the last commit that still has the base config: the
# next one (6dc221fc2, "Remove deprecated skyrl-train package") deleted skyrl-train.
RELEASES = {
    # The layout the reference document describes: the base config before #52 (2025-07-02) moved num_warmup_steps
    # into the optimizer configs, with ppo_loss_type, kl_target and init_kl_coef still in trainer.algorithm.
    "pre-0.1.0": "0b2b28216538e307f85e78876f214966e3edd117",
    "0.1.0": "skyrl_train-v0.1.0",
    "0.2.0": "skyrl_train-v0.2.0",
    "0.3.0": "skyrl_train-v0.3.0",
    "0.4.0": "skyrl_train-v0.4.0",
    "main": None,  # found with git log on BASE
}
_HEADER = re.compile(r"^\s*#\s*@package\s+(\S+)\s*$", re.M)

# Mappings that hold a pass-through dictionary for another library (DeepSpeed's JSON config): their inner keys are
# facts of that library, not of skyrl-train, so the inventory stops at the mapping.
PASS_THROUGH = {"deepspeed_config.train", "deepspeed_config.eval"}
# Keys in the base config that no user sets; each with the reason (copied into the JSON's "unmodelled").
UNMODELLED: dict[str, str] = {}


def git(mirror: str, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={mirror}", *args], check=True, capture_output=True, text=True).stdout


def last_commit(mirror: str) -> str:
    """The newest commit of the default branch in which BASE exists."""
    removed = git(mirror, "log", "-1", "--format=%H", "--diff-filter=D", "HEAD", "--", BASE).strip()
    rev = f"{removed}^" if removed else "HEAD"
    return git(mirror, "rev-parse", rev).strip()


def load(mirror: str, rev: str, path: str) -> tuple[dict, str | None]:
    text = git(mirror, "show", f"{rev}:{path}")
    header = _HEADER.search(text)
    data = YAML(typ="safe", pure=True).load(text) or {}
    return data, header.group(1) if header else None


def merge(base: dict, over: dict) -> dict:
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value
    return base


def place(package: str, data: dict) -> dict:
    out: dict = data
    for part in reversed([p for p in package.split(".") if p]):
        out = {part: out}
    return out


def compose(mirror: str, rev: str) -> tuple[dict, list[str]]:
    primary, _ = load(mirror, rev, BASE)
    sources = [BASE]
    entries = primary.pop("defaults", []) or []
    layers: list[dict] = []
    self_seen = False
    for entry in entries:
        if entry == "_self_":
            layers.append(primary)
            self_seen = True
            continue
        (key, option), = entry.items()
        group, _, package = str(key).partition("@")
        path = f"{CONFIG_DIR}/{group}/{option}.yaml"
        data, header = load(mirror, rev, path)
        sources.append(path)
        layers.append(place(package or header or group, data))
    if not self_seen:
        layers.append(primary)
    tree: dict = {}
    for layer in layers:
        merge(tree, layer)
    return tree, sources


def type_of(value) -> str:
    if isinstance(value, str) and "${" in value:
        return "interpolation"
    for name, kind in (("bool", bool), ("int", int), ("float", float), ("str", str), ("list", list), ("dict", dict)):
        if isinstance(value, kind):
            return name
    return "null"


def flatten(tree: dict, prefix: str = "") -> dict:
    out: dict = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and path not in PASS_THROUGH:
            out.update(flatten(value, path + "."))
        else:
            out[path] = {"type": type_of(value), "default": value}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", default="/work/.mirror/NovaSky-AI+SkyRL/repo")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[2] / "tests/inventory/skyrl"))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for release, rev in RELEASES.items():
        commit = git(args.mirror, "rev-parse", f"{rev}^{{commit}}").strip() if rev else last_commit(args.mirror)
        tree, sources = compose(args.mirror, commit)
        keys = flatten(tree)
        doc = {"dialect": "skyrl", "release": release, "commit": commit, "sources": sources,
               "pipelines": {"default": dict(sorted(keys.items()))},
               "unmodelled": {k: v for k, v in UNMODELLED.items() if k in keys}}
        (out / f"{release}.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
        print(f"{release}: {commit[:12]} {len(keys)} keys", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
