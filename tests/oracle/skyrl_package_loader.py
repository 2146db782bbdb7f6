"""The `skyrl` package's own loader, as its RL entrypoints run it: `<Config>.from_cli_overrides(argv)`, then
`validate_cfg(cfg)`. Run by tests/oracle/test_skyrl_package_oracle.py inside a virtualenv that has the release's
`skyrl` and `skyrl_gym` on PYTHONPATH; never imported by rlcfg.

stdin: one JSON object per line, {"id", "overrides", "entry", "values"}; `entry` is the module the script runs
(`skyrl.train.entrypoints.main_base`, or an example's `examples.train....main_dapo`, whose own config class, a
subclass of SkyRLTrainConfig made by make_config, is used when it has one); `values` (optional): dotted keys and
the values the loaded config must hold (what `rlcfg convert` meant each `key=value` to say). stdout: one JSON line
per case, {"id", "verdict": "ACCEPT" | "REJECT", "error"}.
"""

import ast
import json
import os
import sys
import typing

import typing_extensions

# Python 3.11: pydantic refuses typing.TypedDict in the package's models (0.3.0 and later need 3.12); the config
# dataclasses are unaffected.
typing.TypedDict = typing_extensions.TypedDict

from skyrl.train.config import SkyRLTrainConfig  # noqa: E402
from skyrl.train.utils import validate_cfg  # noqa: E402


def config_statements(path: str, depth: int = 0) -> dict:
    """The namespace of a module's config statements: imports from skyrl.train.config, dataclasses and typing, its
    @dataclass classes, `X = make_config(...)`, and the classes it imports from other modules of the example tree
    (read the same way). The module itself imports the whole trainer (vLLM, transformers), so it is not imported."""
    with open(path) as f:
        tree = ast.parse(f.read())
    namespace: dict = {}
    kept = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module in ("skyrl.train.config", "dataclasses", "typing"):
            kept.append(node)
        elif isinstance(node, ast.Import) and all(a.name in ("dataclasses", "typing") for a in node.names):
            kept.append(node)
        elif isinstance(node, ast.ImportFrom) and depth < 3 and \
                (node.level or (node.module or "").startswith("examples.")):
            folder = os.path.dirname(path)
            for _ in range(max(node.level - 1, 0)):
                folder = os.path.dirname(folder)
            other = os.path.join(folder if node.level else ".", (node.module or "").replace(".", "/") + ".py")
            if os.path.exists(other):
                found = config_statements(other, depth + 1)
                namespace.update({a.asname or a.name: found[a.name] for a in node.names if a.name in found})
        elif isinstance(node, ast.ClassDef) and any("dataclass" in ast.unparse(d) for d in node.decorator_list):
            kept.append(node)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and ast.unparse(node.value.func) == "make_config":
            kept.append(node)
    exec(compile(ast.Module(kept, type_ignores=[]), path, "exec"), namespace)  # noqa: S102 - the oracle's own copy
    return namespace


def config_class(entry: str):
    """The config class an example's entry module builds (make_config), else SkyRLTrainConfig."""
    path = entry.replace(".", "/") + ".py"
    if not entry.startswith("examples.") or not os.path.exists(path):
        return SkyRLTrainConfig
    own = [v for v in config_statements(path).values()
           if isinstance(v, type) and issubclass(v, SkyRLTrainConfig) and v is not SkyRLTrainConfig]
    return own[0] if own else SkyRLTrainConfig


def read(cfg, dotted: str):
    """The value at a dotted key of the loaded config (dataclasses, dicts and lists as the loader built them)."""
    node = cfg
    for part in dotted.split("."):
        node = node[part] if isinstance(node, dict) else getattr(node, part)
    return node


def same(found, value) -> bool:
    """Whether the loaded value is the one written (floats to 1e-9 relative; tuples and lists alike)."""
    if isinstance(found, (list, tuple)) and isinstance(value, (list, tuple)):
        return len(found) == len(value) and all(same(f, v) for f, v in zip(found, value))
    if isinstance(found, dict) and isinstance(value, dict):
        return found.keys() == value.keys() and all(same(found[k], value[k]) for k in found)
    if isinstance(found, bool) or isinstance(value, bool):
        return found is value
    if isinstance(found, (int, float)) and isinstance(value, (int, float)):
        return abs(found - value) <= 1e-9 * max(abs(found), abs(value), 1.0)
    return found == value and type(found) is type(value)


for line in sys.stdin:
    case = json.loads(line)
    try:
        config = config_class(case.get("entry", ""))
    except Exception as exc:  # noqa: BLE001 - the harness cannot read the example's config: no verdict
        print(json.dumps({"id": case["id"], "verdict": "ERROR", "error": f"{type(exc).__name__}: {exc}"}), flush=True)
        continue
    try:
        cfg = config.from_cli_overrides(case["overrides"])
        validate_cfg(cfg)
        wrong = [f"{key}: the loader has {found!r}, rlcfg wrote {value!r}"
                 for key, value in case.get("values", {}).items() if not same(found := read(cfg, key), value)]
        out = {"id": case["id"], "verdict": "REJECT" if wrong else "ACCEPT",
               "error": ("values differ: " + "; ".join(wrong)) if wrong else ""}
    except BaseException as exc:  # noqa: BLE001 - every failure of the loader is a verdict
        if isinstance(exc, KeyboardInterrupt):
            raise
        message = " ".join(str(exc).split())[:400]
        out = {"id": case["id"], "verdict": "REJECT", "error": f"{type(exc).__name__}: {message}"}
    print(json.dumps(out), flush=True)
