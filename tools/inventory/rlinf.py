"""Field inventory of RLinf, per release claimed by rlcfg's `rlinf` dialect (not run in CI).

RLinf has no config schema: its code reads the keys it asks for (`cfg.actor.model.precision`,
`cfg.rollout.get("gpu_memory_utilization", 0.65)`), and its example YAMLs are the only list of what users
write. So the inventory of a release is the union of
  1. every key of every example config of that release, composed with its Hydra `defaults:` list the way
     RLinf's entry points compose it (rlcfg's own composer), grouped by the pipeline the config runs; and
  2. every key that `rlinf/` reads by attribute chain or `.get("key", default)` from the top config (or, in
     `rlinf/config.py`'s validate_* helpers, from the sub-config each helper is handed), with the code's
     default where it gives one.
Types are the JSON types of the values seen (interpolations `${...}` say nothing about the type).

Usage: python tools/inventory/rlinf.py [--mirror DIR] [--out tests/inventory/rlinf] [--fields rlcfg/dialects/rlinf/fields.py]
Writes tests/inventory/rlinf/<release>.json and the generated field table the schema binds
(rlcfg/dialects/rlinf/fields.py).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

# The releases the dialect claims and the commit each one is read at (see rlcfg/dialects/rlinf/__init__.py for how the
# tags map onto them).
RELEASES = {
    "2025-08": "298084c8b1a043b56147526267f974e1d86c5e13",  # docs + seed; task_type math, rollout.model_dir
    "2025-10": "d80c9195f81c784d7410e736da98199f29ae8a30",  # last commit of 2025-10: reasoning, rollout.sglang/vllm
    "v0.1": "9df6dc80dc729a6caccab92dd676004e51b1d3a2",     # the tags: rollout.model.model_path, do_sample
    "v0.2": "46213e88caa910a4a52e68bde4fb96416c1efa55",
    "v0.3": "0505431899574619da86f551bad70b71e0ea2177",     # the last tag with the `training_backend/` config group
    "main": "a3816b596478dcd8a5c69a6ec1468c9519f77b5b",     # after its rename to `hybrid_engines/`
}
TOP = ("cluster", "runner", "algorithm", "rollout", "actor", "critic", "data", "reward", "env", "inference",
       "agentloop", "tools", "value", "model", "sft", "offline")
# rlinf/config.py helpers that are handed a sub-config: what their `cfg` is.
HELPER_PREFIX = {
    "validate_rollout_cfg": "rollout", "validate_sglang_cfg": "rollout.sglang", "validate_vllm_cfg": "rollout.vllm",
    "validate_fsdp_cfg": "actor", "validate_amp_cfg": "actor.fsdp_config", "validate_megatron_cfg": "actor",
    "validate_model_cfg_by_hf_config": "actor",
}
METHODS = {"get", "items", "keys", "values", "pop", "copy", "setdefault", "update", "append", "split", "lower",
           "upper", "strip", "startswith", "endswith", "format", "replace", "join", "__dict__", "__class__"}
# Mappings whose keys are the user's own names (components, node groups, tool names), not fields.
UNMODELLED_PIPELINES = {"sft": "RLinf SFT pipeline (task_type sft): rlcfg warns that it does not model it",
                        "offline": "RLinf offline RL pipeline (task_type offline): rlcfg warns that it does not "
                                   "model it"}
OPEN_MAPPINGS = ("cluster.component_placement", "hydra")
ENV_VARS = {"EMBODIED_PATH": "examples/embodiment", "REPO_PATH": "", "DIFFUSION_PATH": "examples/diffusion",
            "REWARD_PATH": "examples/reward"}


def extract(gitdir: str, commit: str, dest: Path) -> None:
    data = subprocess.run(["git", f"--git-dir={gitdir}", "archive", commit, "examples", "rlinf"],
                          capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(dest)


def pipeline_of(data: dict, rel: str) -> str:
    runner = data.get("runner") if isinstance(data.get("runner"), dict) else {}
    task = runner.get("task_type")
    if task in ("sft",):
        return "sft"
    if task in ("offline",):
        return "offline"
    if task in ("embodied", "embodied_eval"):
        return "embodied"
    if task == "coding_online_rl" or "agentloop" in data or rel.startswith("examples/agent/"):
        return "agent"
    if task in ("math", "reasoning", "reasoning_eval"):
        return "reasoning"
    return str(task)


def json_type(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return None if "${" in value else "str"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "dict"
    return None


def merge_type(old: str | None, new: str | None) -> str | None:
    if old is None or old == new:
        return new if old is None else old
    if new is None:
        return old
    if {old, new} == {"int", "float"}:
        return "float"
    return "any"


class Inventory:
    def __init__(self):
        self.pipelines: dict[str, dict[str, dict]] = {}
        self.sources: set[str] = set()

    def add(self, pipeline: str, key: str, value, code_default=False, source: str = "") -> None:
        entry = self.pipelines.setdefault(pipeline, {}).setdefault(key, {"type": None, "default": None})
        entry["type"] = merge_type(entry["type"], json_type(value))
        if code_default and entry.get("_code") is None and not isinstance(value, (dict, list)):
            entry["default"] = value
            entry["_code"] = True
        if source:
            self.sources.add(source)


def walk_keys(data: dict, prefix: str = ""):
    for key, value in data.items():
        if not isinstance(key, str):
            continue
        path = f"{prefix}.{key}" if prefix else key
        yield path, value
        if isinstance(value, dict) and not any(path == m or path.startswith(m + ".") for m in OPEN_MAPPINGS):
            yield from walk_keys(value, path)


def example_keys(tree_dir: Path, inv: Inventory) -> int:
    from rlcfg.source.compose import compose, searchpath_of
    from rlcfg.source.yaml_loader import load_yaml

    env = {name: str(tree_dir / sub) for name, sub in ENV_VARS.items()}
    count = 0
    for path in sorted(tree_dir.glob("examples/**/*.yaml")):
        text = path.read_text(errors="replace")
        if not re.search(r"^(runner|cluster):", text, re.M):
            continue  # a defaults-group file (env/, model/) or a helper; it counts through the configs using it
        tree, _ = load_yaml(text, str(path))
        if tree is None or not isinstance(tree.data, dict):
            continue
        folders, unusable = searchpath_of(tree, env)
        composed, _ = compose(tree, str(path.parent), folders, unusable)
        data = composed.data if isinstance(composed.data, dict) else {}
        rel = str(path.relative_to(tree_dir))
        pipe = pipeline_of(data, rel)
        for key, value in walk_keys({k: v for k, v in data.items() if k not in ("defaults",)}):
            inv.add(pipe, key, value, source=rel)
        count += 1
    return count


CHAIN = re.compile(r"\b(?:self\.)?(cfg|config)((?:\.(?!get\()[A-Za-z_]\w*)*)(\.get\(\s*[\"'](\w+)[\"']\s*(?:,\s*([^()]*?))?\s*\))?")


def literal(text: str | None):
    if text is None:
        return None
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        return None


def code_keys(tree_dir: Path, inv: Inventory) -> None:
    for path in sorted(tree_dir.glob("rlinf/**/*.py")):
        rel = str(path.relative_to(tree_dir))
        text = path.read_text(errors="replace")
        spans = []  # (first line, last line, name) of each function in rlinf/config.py, innermost last
        if rel == "rlinf/config.py":
            spans = sorted(((n.lineno, n.end_lineno, n.name) for n in ast.walk(ast.parse(text))
                            if isinstance(n, ast.FunctionDef)), key=lambda s: (s[0], -s[1]))
        for match in CHAIN.finditer(text):
            chain = [p for p in match.group(2).split(".") if p]
            prefix = ""
            if spans:
                line = text.count("\n", 0, match.start()) + 1
                inside = [name for first, last, name in spans if first <= line <= last]
                prefix = HELPER_PREFIX.get(inside[-1], "") if inside else ""
            elif not chain:
                continue
            while chain and chain[-1] in METHODS:
                chain.pop()
            if not prefix and (not chain or chain[0] not in TOP):
                continue
            parts = ([prefix] if prefix else []) + chain
            get_key, default = match.group(4), match.group(5)
            full = ".".join(parts)
            if not full:
                continue
            if get_key:
                inv.add("code", f"{full}.{get_key}", literal(default), code_default=default is not None, source=rel)
            for i in range(1, len(parts) + 1):
                inv.add("code", ".".join(parts[:i]), None, source=rel)


def build(gitdir: str, release: str, commit: str) -> dict:
    inv = Inventory()
    n = 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        extract(gitdir, commit, root)
        n += example_keys(root, inv)
        code_keys(root, inv)
    code = inv.pipelines.pop("code", {})
    pipelines = {}
    for name, keys in inv.pipelines.items():
        merged = dict(keys)
        if name in ("reasoning", "agent", "embodied"):
            # code-read keys count for every RL pipeline whose config has the section they live in
            tops = {k.split(".")[0] for k in keys}
            for key, entry in code.items():
                if key.split(".")[0] in tops:
                    old = merged.get(key)
                    if old is None:
                        merged[key] = dict(entry)
                    else:
                        merged[key] = {"type": merge_type(old["type"], entry["type"]),
                                       "default": entry["default"] if entry.get("_code") else old["default"],
                                       **({"_code": True} if entry.get("_code") or old.get("_code") else {})}
        pipelines[name] = {k: {"type": v["type"] or "any", "default": v["default"]}
                           for k, v in sorted(merged.items())}
    return {"dialect": "rlinf", "release": release, "commit": commit,
            "examples": n,
            "sources": sorted(inv.sources), "pipelines": pipelines, "unmodelled": {},
            # rlcfg names these pipelines (one RLC116 warning) instead of modelling them; their keys are still in
            # the field table, so the keys they share with the RL pipelines are type-checked
            "unmodelled_pipelines": {p: UNMODELLED_PIPELINES[p] for p in pipelines if p in UNMODELLED_PIPELINES}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mirror", default=os.path.join(os.environ.get("MIRROR_ROOT", "/work/.mirror"),
                                                         "RLinf+RLinf", "repo"))
    parser.add_argument("--out", default=str(REPO_ROOT / "tests" / "inventory" / "rlinf"))
    parser.add_argument("--fields", default=str(REPO_ROOT / "rlcfg" / "dialects" / "rlinf" / "fields.py"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    inventories = {}
    for release, commit in RELEASES.items():
        data = build(args.mirror, release, commit)
        inventories[release] = data
        (out / f"{release}.json").write_text(json.dumps(data, indent=1, sort_keys=False, default=str) + "\n")
        sizes = {p: len(k) for p, k in data["pipelines"].items()}
        print(f"{release} {commit[:12]}: {data['examples']} example configs, keys per pipeline {sizes}")
    write_fields(Path(args.fields), inventories)



# ---- the generated field table (rlcfg/dialects/rlinf/fields.py) ------------------------------------------------


def field_table(inventories: dict[str, dict]) -> dict[str, list]:
    """dotted key -> [type, code default, releases or None, pipelines], over every release and pipeline."""
    table: dict[str, dict] = {}
    for release, data in inventories.items():
        for pipeline, keys in data["pipelines"].items():
            for key, entry in keys.items():
                row = table.setdefault(key, {"type": None, "default": None, "releases": set(), "pipelines": set()})
                seen = None if entry["type"] == "any" and row["type"] is None else entry["type"]
                row["type"] = "any" if entry["type"] == "any" else merge_type(row["type"], seen)
                if entry["default"] is not None and row["default"] is None:
                    row["default"] = entry["default"]
                row["releases"].add(release)
                row["pipelines"].add(pipeline)
    every = set(inventories)
    return {key: [row["type"] or "any", row["default"],
                  None if row["releases"] == every else [r for r in RELEASES if r in row["releases"]],
                  sorted(row["pipelines"])]
            for key, row in sorted(table.items())}


def write_fields(path: Path, inventories: dict[str, dict]) -> None:
    table = field_table(inventories)
    lines = ['"""Generated by tools/inventory/rlinf.py from RLinf\'s example configs and code at each release rlcfg',
             "claims; do not edit by hand. Each row: dotted key -> (type, the code's default or None, the releases",
             'that have it (None: all), the pipelines whose configs use it). inventoried.py binds it."""',
             "", "# fmt: off", "FIELDS = {"]
    for key, (kind, default, releases, pipelines) in table.items():
        rel = "None" if releases is None else repr(tuple(releases))
        lines.append(f"    {key!r}: ({kind!r}, {default!r}, {rel}, {tuple(pipelines)!r}),")
    lines += ["}", "# fmt: on", ""]
    path.write_text("\n".join(lines))
    print(f"wrote {path} ({len(table)} keys)")


if __name__ == "__main__":
    main()
