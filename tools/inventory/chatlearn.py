"""Inventory of ChatLearn's GRPO config at each release rlcfg claims (test data for tests/test_inventory.py).

ChatLearn's config is a tree of dataclasses: `GrpoConfig` (chatlearn/algorithm/grpo.py) holds `env_args`,
`runtime_args` and `models`, and `models.policy_trainer` / `models.ref_policy` become the FSDP or the Megatron
dataclasses according to `runtime_args.train_backend`. The launcher hands the tree to Hydra/OmegaConf as a
structured config, so every key a user may set is a dataclass field. This script reads the config modules
straight out of the bare mirror (git show), parses them with `ast` (ChatLearn is never imported: it needs CUDA
packages), resolves each dataclass's fields the way `dataclasses` does (base classes first, in MRO order, later
classes overriding), and writes one pipeline per training backend, named as rlcfg's variants are ("fsdp",
"megatron"), to tests/inventory/chatlearn/<release>.json.

Not run in CI:

    python tools/inventory/chatlearn.py [--mirror /work/.mirror/alibaba+ChatLearn/repo] [--out tests/inventory/chatlearn]
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from pathlib import Path

RELEASES = {"1.2.0": "v1.2.0", "main": "HEAD"}
CONFIG_FILES = [
    "chatlearn/configs/base/base_config.py",
    "chatlearn/configs/base/base_model_config.py",
    "chatlearn/configs/base/common.py",
    "chatlearn/configs/runtime_config.py",
    "chatlearn/configs/policy_config.py",
    "chatlearn/configs/fsdp_config.py",
    "chatlearn/configs/megatron_config.py",
    "chatlearn/configs/partial_rollout_manager_config.py",
    "chatlearn/algorithm/grpo.py",
]
# The trainer and reference model are `Any` in GrpoModelConfig; GrpoConfig.__post_init__ turns them into these.
BACKENDS = {
    "fsdp": {"policy_trainer": "FSDPPolicyTrainerConfig", "ref_policy": "FSDPRefPolicyConfig"},
    "megatron": {"policy_trainer": "MegatronPolicyTrainerConfig", "ref_policy": "MegatronRefPolicyConfig"},
}
# Keys deliberately not modelled, each with the reason (copied into the JSON's "unmodelled"). None today: even the
# replica layout ChatLearn derives (`num_replica`, `replica_dp_size`) is a dataclass field a user may write.
UNMODELLED: dict[str, str] = {}
# Expressions in defaults that are not literals, and the value they stand for (facts read from ChatLearn's code).
KNOWN_EXPRESSIONS = {
    "MISSING": "???",
    "RAY_PG_STRATEGY.SPREAD.value": "SPREAD",
    "AttnBackend.auto": "auto",
}


def git(mirror: str, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={mirror}", *args], check=True, capture_output=True, text=True).stdout


def annotation_type(node: ast.expr | None) -> str:
    """A short type name for an annotation: int, float, bool, str, list, dict, any; `|null` when Optional."""
    if node is None:
        return "any"
    text = ast.unparse(node)
    if text.startswith("Optional["):
        return annotation_type(node.slice) + "|null"  # type: ignore[attr-defined]
    if text.startswith(("List[", "list[")) or text in ("list", "List"):
        return "list"
    if text.startswith(("Dict[", "dict[")) or text in ("dict", "Dict"):
        return "dict"
    if text in ("int", "float", "bool", "str"):
        return text
    if text == "moe_freq_type":
        return "int|list"  # Megatron's argument type: an integer ratio or a per-layer list
    if isinstance(node, ast.Lambda):
        return "str"  # attention_backend: a name of Megatron's AttnBackend enum
    return text  # a dataclass name (a nested section) or Any


def default_of(call: ast.expr | None) -> tuple[str, object]:
    """('value', literal) | ('factory', class name or literal) | ('none', None) for a field's right-hand side."""
    if call is None:
        return "none", None
    if isinstance(call, ast.Call) and ast.unparse(call.func) == "field":
        for kw in call.keywords:
            if kw.arg == "default":
                return default_of(kw.value)
            if kw.arg == "default_factory":
                value = kw.value
                if isinstance(value, ast.Name) and value.id in ("list", "dict"):
                    return "value", [] if value.id == "list" else {}
                if isinstance(value, ast.Lambda):
                    return "value", ast.literal_eval(value.body)
                return "factory", ast.unparse(value)
        return "none", None
    text = ast.unparse(call)
    if text in KNOWN_EXPRESSIONS:
        return "value", KNOWN_EXPRESSIONS[text]
    if isinstance(call, ast.Name) and call.id[:1].isupper() and call.id.endswith("Config"):
        return "factory", call.id  # `default=SomeConfig` (a class as default): OmegaConf builds the section
    return "value", ast.literal_eval(call)


def read_classes(mirror: str, rev: str) -> tuple[dict, list[str]]:
    """Every dataclass of the config modules: name -> (base names, [(field, annotation, default)])."""
    classes: dict[str, tuple[list[str], list]] = {}
    sources = []
    listed = set(git(mirror, "ls-tree", "-r", "--name-only", rev).split())
    for path in CONFIG_FILES:
        if path not in listed:
            continue
        sources.append(path)
        tree = ast.parse(git(mirror, "show", f"{rev}:{path}"))
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            if not any(ast.unparse(d).startswith("dataclass") for d in node.decorator_list):
                continue
            found = []
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    found.append((item.target.id, item.annotation, item.value))
            classes[node.name] = ([ast.unparse(b) for b in node.bases], found)
    return classes, sources


def fields_of(classes: dict, name: str) -> dict:
    """The dataclass fields of `name` in declaration order, as `dataclasses` collects them (reverse MRO)."""
    made: dict[str, type] = {}

    def make(cls: str) -> type:
        if cls not in made:
            bases = tuple(make(b) for b in classes[cls][0] if b in classes)
            made[cls] = type(cls, bases or (object,), {})
        return made[cls]

    out: dict = {}
    for klass in reversed(make(name).__mro__):
        for field, annotation, value in classes.get(klass.__name__, ([], []))[1]:
            out[field] = (annotation, value)  # a later class overrides the type and default, keeping the position
    return out


def flatten(classes: dict, name: str, prefix: str, out: dict) -> None:
    for field, (annotation, value) in fields_of(classes, name).items():
        key = f"{prefix}{field}"
        kind, default = default_of(value)
        type_name = annotation_type(annotation)
        nested = default if kind == "factory" else (type_name if type_name in classes else None)
        if nested in classes:
            flatten(classes, nested, key + ".", out)
            continue
        out[key] = {"type": type_name, "default": default}


def inventory(mirror: str, release: str, rev: str) -> dict:
    classes, sources = read_classes(mirror, rev)
    commit = git(mirror, "rev-parse", f"{rev}^{{commit}}").strip()
    pipelines = {}
    for backend, chosen in BACKENDS.items():
        keys: dict = {}
        for field, (annotation, value) in fields_of(classes, "GrpoConfig").items():
            if field == "models":
                continue  # walked below, with the backend's trainer and reference classes
            kind, default = default_of(value)
            flatten(classes, default if kind == "factory" else ast.unparse(annotation), f"{field}.", keys)
        model_fields = fields_of(classes, "GrpoModelConfig")
        for field, (annotation, value) in model_fields.items():
            kind, default = default_of(value)
            cls = chosen.get(field) or (default if kind == "factory" else ast.unparse(annotation))
            flatten(classes, cls, f"models.{field}.", keys)
        pipelines[backend] = dict(sorted(keys.items()))
    return {"dialect": "chatlearn", "release": release, "commit": commit, "sources": sources,
            "pipelines": pipelines, "unmodelled": dict(sorted(UNMODELLED.items()))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", default="/work/.mirror/alibaba+ChatLearn/repo")
    parser.add_argument("--out", default="tests/inventory/chatlearn")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for release, rev in RELEASES.items():
        data = inventory(args.mirror, release, rev)
        (out / f"{release}.json").write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
        print(f"{release}: {rev} {data['commit'][:12]}, "
              + ", ".join(f"{p} {len(k)} keys" for p, k in data["pipelines"].items()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
