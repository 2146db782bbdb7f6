"""Inventory of the `skyrl` package's config dataclasses at each release rlcfg claims (test data for
tests/test_inventory.py).

From 0.1.0 the `skyrl` package replaces skyrl-train. Its config is a tree of dataclasses rooted at
`skyrl.train.config.SkyRLTrainConfig`; the entrypoint builds it from the command line's `key=value` overrides onto
the dataclass defaults and refuses a key no dataclass declares. So the keys a user may write are the dataclass
fields, recursively. This script fetches each release's wheel from PyPI (`pip download --no-deps`), and walks the
dataclasses in a child Python that has the wheel on its path (the package's own imports need omegaconf, pydantic
and skyrl-gym: run it with the SkyRL oracle's virtualenv, ../shared/oracle). It writes
tests/inventory/skyrl/skyrl-<release>.json: dotted keys with their type and default, as the skyrl-train
inventories hold them.

Not run in CI:

    python tools/inventory/skyrl_package.py --python /tmp/oracle/venv/skyrlpkg/bin/python \
        [--wheels /tmp/wheels] [--mirror /work/.mirror/NovaSky-AI+SkyRL/repo] [--out tests/inventory/skyrl]

`--keys` then writes rlcfg/dialects/skyrl/package_keys.json: the keys of those inventories that rlcfg's schema does
not model (rlcfg checks their types; tests/dialects/skyrl/test_package.py holds the file to the inventories).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

RELEASES = ("0.1.0", "0.2.0", "0.3.0", "0.4.0")
# The package's modules import typing.TypedDict into pydantic models, which Python 3.11 refuses; 0.4.0 requires
# 3.12. The child walks the dataclasses only, so the 3.12 behaviour is borrowed from typing_extensions.
_WALK = r'''
import dataclasses, json, sys, typing, typing_extensions
typing.TypedDict = typing_extensions.TypedDict
from skyrl.train.config import SkyRLTrainConfig

def nested(kind):
    origin = typing.get_origin(kind)
    if origin is typing.Union:
        return next((n for n in map(nested, typing.get_args(kind)) if n is not None), None)
    if origin is typing.Annotated:
        return nested(typing.get_args(kind)[0])
    return kind if isinstance(kind, type) and dataclasses.is_dataclass(kind) else None

def type_name(kind):
    origin = typing.get_origin(kind)
    if origin is typing.Annotated:
        return type_name(typing.get_args(kind)[0])
    if origin is typing.Union:
        names = sorted({type_name(a) for a in typing.get_args(kind) if a is not type(None)})
        return "|".join(names)
    if origin is typing.Literal:
        return "str"
    if kind in (list, tuple) or origin in (list, tuple):
        return "list"
    if kind is dict or origin is dict:
        return "dict"
    if kind is typing.Any:
        return "any"
    if isinstance(kind, type) and issubclass(kind, bool):
        return "bool"
    for name, base in (("int", int), ("float", float), ("str", str)):
        if isinstance(kind, type) and issubclass(kind, base):
            return name  # a str Enum is written as its value
    return str(kind).replace("typing.", "")

def plain(value):
    value = getattr(value, "value", value)  # a str Enum member is written as its value
    try:
        json.dumps(value)
        return value
    except TypeError:
        return repr(value)

def class_default(f):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return "???"  # required: the section cannot be built without it

def walk(cls, instance, prefix=""):
    """The fields of a dataclass, with the values of `instance` (None: the class's own defaults). A field's default
    factory may build its section with other values than the section's own defaults (the critic's optimizer has its
    own learning rate); an optional section that is None by default is listed with its class's keys."""
    out = {}
    for f in dataclasses.fields(cls):
        key = prefix + f.name
        value = class_default(f) if instance is None else getattr(instance, f.name)
        inner = nested(f.type)
        if inner is not None and dataclasses.fields(inner):
            if value is None:
                out[key] = {"type": "dict", "default": None}
            out.update(walk(inner, value if dataclasses.is_dataclass(value) else None, key + "."))
        else:
            out[key] = {"type": type_name(f.type), "default": plain(value)}
    return out

json.dump(dict(sorted(walk(SkyRLTrainConfig, SkyRLTrainConfig()).items())), sys.stdout)
'''


def wheel(release: str, folder: Path) -> Path:
    found = sorted(folder.glob(f"skyrl-{release}-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "--python-version", "3.12", f"skyrl=={release}", "-d", str(folder)], check=True)
        found = sorted(folder.glob(f"skyrl-{release}-*.whl"))
    return found[0]


def unpacked(path: Path, folder: Path) -> Path:
    target = folder / path.stem
    if not target.is_dir():
        with zipfile.ZipFile(path) as archive:
            archive.extractall(target)
    return target


def gym_folder(tree: Path, mirror: str, release: str) -> Path:
    """skyrl-gym, which the config imports: in the wheel from 0.2.0, else from the release's tag in the mirror."""
    if (tree / "skyrl-gym" / "skyrl_gym").is_dir():
        return tree / "skyrl-gym"
    target = tree.parent / f"skyrl-gym-{release}"
    if not target.is_dir():
        target.mkdir()
        archive = subprocess.run(["git", f"--git-dir={mirror}", "archive", f"skyrl-v{release}", "skyrl-gym"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target / "skyrl-gym"


def tag_commit(mirror: str, release: str) -> str | None:
    done = subprocess.run(["git", f"--git-dir={mirror}", "rev-parse", f"skyrl-v{release}^{{commit}}"],
                          capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def unmodelled(inventories: Path) -> dict[str, dict]:
    """The package keys rlcfg's schema does not model, in the schema's layout, with their type (as a project file's
    extension names types), default and releases: the contents of rlcfg/dialects/skyrl/package_keys.json."""
    from rlcfg.dialects.skyrl.models import PACKAGE, SkyRLConfig
    from rlcfg.dialects.skyrl.package import to_schema_path
    from rlcfg.schema.base import field_at

    out: dict[str, dict] = {}
    for release in PACKAGE:
        keys = json.loads((inventories / f"{release}.json").read_text())["pipelines"]["default"]
        for key, fact in keys.items():
            path = to_schema_path(tuple(key.split(".")), release)
            info, owner = field_at(SkyRLConfig, path)
            if info is not None or (owner is None and field_at(SkyRLConfig, path[:-1])[0] is not None):
                continue  # modelled, or inside a mapping the schema keeps open
            kinds = [{"dict": "mapping"}.get(k, k) for k in fact["type"].split("|")]
            kinds = [k if k in ("bool", "int", "float", "str", "list", "mapping") else "any" for k in kinds]
            kind = "any" if "any" in kinds else "|".join(dict.fromkeys(kinds))
            if fact["default"] is None and kind != "any":
                kind += "|null"
            entry = out.setdefault(".".join(path), {"type": kind, "default": fact["default"], "releases": []})
            if (entry["type"], entry["default"]) != (kind, fact["default"]):
                entry.setdefault("changed", {})[release] = {"type": kind, "default": fact["default"]}
            entry["releases"].append(release)
    return dict(sorted(out.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="a Python with omegaconf, pydantic and the package's imports")
    parser.add_argument("--wheels", default="/tmp/wheels")
    parser.add_argument("--mirror", default="/work/.mirror/NovaSky-AI+SkyRL/repo")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[2] / "tests/inventory/skyrl"))
    parser.add_argument("--keys", action="store_true", help="only write rlcfg/dialects/skyrl/package_keys.json from "
                                                             "the inventories (after a schema change)")
    args = parser.parse_args(argv)
    if args.keys:
        target = Path(__file__).resolve().parents[2] / "rlcfg/dialects/skyrl/package_keys.json"
        target.write_text(json.dumps(unmodelled(Path(args.out)), indent=0) + "\n")
        return 0
    folder = Path(args.wheels)
    folder.mkdir(parents=True, exist_ok=True)
    for release in RELEASES:
        path = wheel(release, folder)
        tree = unpacked(path, folder)
        paths = f"{tree}:{gym_folder(tree, args.mirror, release)}"
        done = subprocess.run([args.python, "-W", "ignore", "-c", _WALK], capture_output=True, text=True,
                              env={"PYTHONPATH": paths, "PATH": "/usr/bin:/bin"}, cwd=str(tree))
        if done.returncode:
            print(done.stderr[-2000:], file=sys.stderr)
            return 1
        keys = json.loads(done.stdout)
        doc = {"dialect": "skyrl", "release": f"skyrl-{release}",
               "commit": tag_commit(args.mirror, release) or "",
               "wheel": f"{path.name} sha256:{hashlib.sha256(path.read_bytes()).hexdigest()}",
               "sources": ["skyrl/train/config/config.py"], "pipelines": {"default": keys}, "unmodelled": {}}
        (Path(args.out) / f"skyrl-{release}.json").write_text(json.dumps(doc, indent=1) + "\n")
        print(f"skyrl {release}: {len(keys)} keys", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
