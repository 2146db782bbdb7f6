"""Inventory of AReaL's config dataclasses at each release rlcfg claims (test data for tests/test_inventory.py).

AReaL's loader is `OmegaConf.structured(<ExperimentConfig>)` merged with the YAML, so the keys a user may write are
exactly the fields of the experiment dataclass, recursively: every nested dataclass (also when it is optional, or
the item of a list/tuple) contributes its fields under the parent's key. This script reads
`areal/api/cli_args.py` (and, for the example scripts' own config subclasses, the example file that declares the
subclass) straight out of the bare mirror with `git show`, parses it with `ast` (AReaL is never imported), and
writes tests/inventory/areal/<release>.json:

- pipelines "grpo", "ppo", "sft", "rw" (and "dpo" where the release has it): the experiment classes of
  areal/api/cli_args.py, flattened to dotted keys with their type and default ("???" for OmegaConf's MISSING);
- pipelines "script:<file>:<Class>": only the keys an example script's config subclass adds to its base class
  (its base class, named in "script_bases", holds the rest); rlcfg does not model these (they get the "not
  modelled" warning).

Not run in CI:

    python tools/inventory/areal.py [--mirror /work/.mirror/inclusionAI+AReaL/repo] [--out tests/inventory/areal]
    python tools/inventory/areal.py --tables    # then rlcfg/dialects/areal/releases.json from those inventories
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args, get_origin

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # rlcfg's own sections, for --tables

RELEASES = {"0.3": "v0.3.4", "0.4": "v0.4.1", "0.5": "v0.5.3", "1.0": "v1.0.4"}
CLI_ARGS = "areal/api/cli_args.py"
# Experiment classes of cli_args.py -> pipeline name.
EXPERIMENTS = {"GRPOConfig": "grpo", "PPOConfig": "ppo", "SFTConfig": "sft", "RWConfig": "rw", "DPOConfig": "dpo"}
# Pipelines rlcfg models (the GRPO root covers PPO too); the others are listed under "unmodelled_pipelines".
MODELLED = {"grpo", "ppo", "sft", "rw"}
UNMODELLED_PIPELINES = {"dpo": "AReaL 1.0's DPO trainer; rlcfg names it in its 'not modelled' warning and checks "
                               "the keys it shares with the RL pipelines"}
# Keys in the inventory that rlcfg does not model, with the reason (copied into the JSON's "unmodelled").
UNMODELLED: dict[str, dict[str, str]] = {"0.3": {}, "0.4": {}, "0.5": {}, "1.0": {}}


def git(mirror: str, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={mirror}", *args], check=True, capture_output=True, text=True).stdout


class Module:
    """The dataclasses and module-level constants of one Python file."""

    def __init__(self, text: str, resolve_import=None):
        # 0.5 needs Python 3.12 for one generic function's signature (`def load_expr_config[ConfigT](`); its type
        # parameters say nothing about the config, so they are dropped before parsing with an older Python
        self.tree = ast.parse(re.sub(r"^(\s*def \w+)\[[^\]]*\]\(", r"\1(", text, flags=re.M))
        self.classes: dict[str, ast.ClassDef] = {}
        self.constants: dict[str, object] = {}
        self.imports: dict[str, str] = {}  # name -> module it is imported from
        for node in self.tree.body:
            if isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                try:
                    self.constants[node.targets[0].id] = ast.literal_eval(node.value)
                except ValueError:
                    pass
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = node.module
        self.resolve_import = resolve_import

    def constant(self, name: str):
        if name in self.constants:
            return self.constants[name]
        if name in self.imports and self.resolve_import is not None:
            other = self.resolve_import(self.imports[name])
            if other is not None and name in other.constants:
                return other.constants[name]
        raise KeyError(name)


def _unparse(node: ast.AST | None) -> str:
    return ast.unparse(node) if node is not None else ""


def _value(module: Module, node: ast.AST):
    """A default expression as JSON, as far as it is a literal (or a named constant, or MISSING)."""
    if isinstance(node, ast.Name):
        if node.id == "MISSING":
            return "???"
        return module.constant(node.id)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        # Enum members (SchedulingStrategyType.separation): the member's value is its name in AReaL's enums.
        return node.attr
    if isinstance(node, ast.Tuple):
        return [_value(module, e) for e in node.elts]
    if isinstance(node, ast.List):
        return [_value(module, e) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {_value(module, k): _value(module, v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.BinOp):
        return ast.literal_eval(ast.unparse(node)) if not any(isinstance(n, ast.Name) for n in ast.walk(node)) \
            else eval(compile(ast.Expression(node), "<default>", "eval"), {}, {  # noqa: S307 (constants only)
                n.id: module.constant(n.id) for n in ast.walk(node) if isinstance(n, ast.Name)})
    return ast.literal_eval(node)


def _type_of(annotation: str, classes) -> tuple[str, str | None]:
    """(inventory type, nested dataclass name or None) of an annotation."""
    text = annotation.replace("Optional[", "").replace("typing.", "")
    parts = [p.strip() for p in text.replace("]", "").split("|")]
    nested = next((p for p in parts if p in classes), None)
    if nested:
        return "dict", nested
    head = text.split("[", 1)[0].strip().lower()
    if head in ("list", "tuple"):
        inner = text.split("[", 1)[1] if "[" in text else ""
        item = next((p.strip(" ,.]") for p in inner.replace(",", " ").split() if p.strip(" ,.]") in classes), None)
        return "list", item
    if head in ("dict", "mapping"):
        return "dict", None
    kinds = [p for p in parts if p != "None"]
    if len(kinds) == 1 and kinds[0] in ("int", "float", "bool", "str", "Any"):
        return kinds[0].lower() if kinds[0] != "Any" else "any", None
    if len(kinds) == 1 and kinds[0].startswith("Literal"):
        return "str", None
    if len(kinds) == 1:
        return "str", None  # an Enum (str, Enum): OmegaConf takes the member name
    return "|".join(kinds), None


class Inventory:
    def __init__(self, mirror: str, rev: str):
        self.mirror, self.rev = mirror, rev
        self.cache: dict[str, Module | None] = {}
        self.cli = self.module(CLI_ARGS)

    def module(self, path: str) -> Module | None:
        if path not in self.cache:
            try:
                text = git(self.mirror, "show", f"{self.rev}:{path}")
            except subprocess.CalledProcessError:
                self.cache[path] = None
                return None
            self.cache[path] = None  # guard against import cycles
            self.cache[path] = Module(text, lambda mod: self.module(mod.replace(".", "/") + ".py"))
        return self.cache[path]

    def lookup(self, module: Module, name: str) -> tuple[Module, ast.ClassDef] | None:
        if name in module.classes:
            return module, module.classes[name]
        if name in module.imports:
            other = self.module(module.imports[name].replace(".", "/") + ".py")
            if other is not None and name in other.classes:
                return other, other.classes[name]
        if name in self.cli.classes:
            return self.cli, self.cli.classes[name]
        return None

    def fields(self, module: Module, cls: ast.ClassDef) -> list[tuple[str, str, ast.AST | None, Module]]:
        """(name, annotation, field() or value node, module) of a dataclass and its bases, base fields first,
        a redefinition replacing the base's in place (as dataclasses do)."""
        out: dict[str, tuple] = {}
        for base in cls.bases:
            found = self.lookup(module, _unparse(base))
            if found is not None:
                for entry in self.fields(*found):
                    out[entry[0]] = entry
        for node in cls.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                annotation = _unparse(node.annotation)
                if annotation.startswith("ClassVar"):
                    continue
                out[node.target.id] = (node.target.id, annotation, node.value, module)
        return list(out.values())

    def known_classes(self, module: Module) -> set[str]:
        names = set(self.cli.classes) | set(module.classes)
        names |= {n for n in module.imports if self.lookup(module, n) is not None}
        return {n for n in names if self.is_dataclass(n, module)}

    def is_dataclass(self, name: str, module: Module) -> bool:
        found = self.lookup(module, name)
        if found is None:
            return False
        return any("dataclass" in _unparse(d) for d in found[1].decorator_list)

    def default(self, module: Module, node: ast.AST | None):
        """(default as JSON, factory class name or None)."""
        if node is None:
            return "???", None
        if isinstance(node, ast.Call) and _unparse(node.func) in ("field", "dataclasses.field"):
            kw = {k.arg: k.value for k in node.keywords}
            if "default" in kw:
                return self._literal(module, kw["default"]), None
            factory = kw.get("default_factory")
            if factory is None:
                return "???", None
            if isinstance(factory, ast.Lambda):
                body = factory.body
                if isinstance(body, ast.Call):  # lambda: [SchedulingSpec(...)], lambda: Cls(...)
                    return self._call_literal(module, body), None
                return self._literal(module, body), None
            name = _unparse(factory)
            if name in ("list", "tuple"):
                return [], None
            if name == "dict":
                return {}, None
            return None, name
        return self._literal(module, node), None

    def _literal(self, module: Module, node: ast.AST):
        if isinstance(node, (ast.List, ast.Tuple)) and any(isinstance(e, ast.Call) for e in node.elts):
            return [self._call_literal(module, e) if isinstance(e, ast.Call) else self._literal(module, e)
                    for e in node.elts]
        try:
            return _value(module, node)
        except (ValueError, KeyError, SyntaxError, TypeError, NameError):
            return {"expr": _unparse(node)}

    def _call_literal(self, module: Module, call: ast.Call):
        """A dataclass built in a default (SchedulingSpec(cmd=...)): the keywords it sets."""
        if isinstance(call, ast.List):
            return self._literal(module, call)
        return {k.arg: self._literal(module, k.value) for k in call.keywords if k.arg}

    def flatten(self, module: Module, cls: ast.ClassDef, prefix: str = "", depth: int = 0) -> dict[str, dict]:
        out: dict[str, dict] = {}
        classes = self.known_classes(module)
        for name, annotation, node, owner in self.fields(module, cls):
            key = f"{prefix}{name}"
            kind, nested = _type_of(annotation, classes | self.known_classes(owner))
            default, factory = self.default(owner, node)
            nested = nested or (factory if factory and self.is_dataclass(factory, owner) else None)
            entry: dict = {"type": kind, "default": default}
            if nested and kind == "dict":
                entry["default"] = None if default is None and "None" in annotation else {}
                found = self.lookup(owner, nested)
                if found is not None and depth < 12:
                    entry["section"] = nested
                    out[key] = entry
                    out.update(self.flatten(*found, prefix=f"{key}.", depth=depth + 1))
                    continue
            if nested and kind == "list":
                found = self.lookup(owner, nested)
                out[key] = entry
                if found is not None and depth < 12:
                    out.update(self.flatten(*found, prefix=f"{key}.", depth=depth + 1))
                continue
            if node is not None and isinstance(node, ast.Call):
                choices = next((k.value for k in node.keywords if k.arg == "metadata"), None)
                if isinstance(choices, ast.Dict):
                    for k, v in zip(choices.keys, choices.values):
                        if isinstance(k, ast.Constant) and k.value == "choices":
                            try:
                                entry["choices"] = _value(owner, v)
                            except (ValueError, KeyError, SyntaxError, TypeError):
                                pass
            out[key] = entry
        return out


def script_classes(mirror: str, rev: str) -> list[tuple[str, str, str]]:
    """(file, class, base) of every example script's subclass of an experiment class."""
    pattern = r"^class \w+\((GRPOConfig|PPOConfig|SFTConfig|RWConfig|DPOConfig|BaseExperimentConfig)\)"
    try:
        found = git(mirror, "grep", "-n", "-E", pattern, rev, "--", "examples")
    except subprocess.CalledProcessError:
        return []
    out = []
    for line in found.splitlines():
        _rev, path, _lineno, text = line.split(":", 3)
        name, base = text[len("class "):].rstrip(":").rstrip(")").split("(")
        out.append((path, name, base))
    return out


def build(mirror: str, release: str) -> dict:
    rev = RELEASES[release]
    commit = git(mirror, "rev-parse", f"{rev}^{{commit}}").strip()
    inv = Inventory(mirror, rev)
    pipelines: dict[str, dict] = {}
    for cls_name, pipeline in EXPERIMENTS.items():
        if cls_name in inv.cli.classes:
            pipelines[pipeline] = inv.flatten(inv.cli, inv.cli.classes[cls_name])
    sources = [CLI_ARGS]
    bases: dict[str, str] = {}
    for path, name, base in script_classes(mirror, rev):
        module = inv.module(path)
        full = inv.flatten(module, module.classes[name])
        base_found = inv.lookup(module, base)
        base_keys = inv.flatten(*base_found) if base_found else {}
        added = {k: v for k, v in full.items() if k not in base_keys or base_keys[k] != v}
        pipelines[f"script:{path}:{name}"] = added
        bases[f"script:{path}:{name}"] = EXPERIMENTS.get(base, base)
        sources.append(path)
    sources += sorted(p for p, m in inv.cache.items() if m is not None and p not in sources)
    return {"dialect": "areal", "release": release, "commit": commit, "sources": sources,
            "pipelines": pipelines, "script_bases": bases, "unmodelled": UNMODELLED[release],
            "unmodelled_pipelines": {name: UNMODELLED_PIPELINES.get(name, "an example script's own config class; "
                                                                          "rlcfg gives it the single 'not modelled' "
                                                                          "warning and checks the keys it knows")
                                     for name in pipelines if name not in MODELLED}}


# The release whose defaults the schema's own are (AReaL's reference documents it); the others' differences are
# overlaid (rlcfg/dialects/areal/releases.json "defaults").
DOCUMENTED = "0.3"
_KINDS = {"bool": "bool", "int": "int", "float": "float", "str": "str", "list": "list", "dict": "mapping"}


# The pipelines of each of the dialect's variants (AReaLDialect.variants; GRPO's root covers PPO too).
VARIANT_PIPELINES = {"grpo": ("grpo", "ppo"), "sft": ("sft",), "rw": ("rw",)}


def _modelled_keys(inventory: dict, pipelines: tuple = tuple(MODELLED)) -> dict[str, dict]:
    """The keys of some of a release's modelled pipelines (not its example scripts' subclasses), first fact wins."""
    out: dict[str, dict] = {}
    for pipeline, keys in inventory["pipelines"].items():
        if pipeline in pipelines:
            for key, fact in keys.items():
                out.setdefault(key, fact)
    return out


def _plain_default(value: object) -> bool:
    return isinstance(value, (bool, int, float, str)) and value != "???"


def tables(inventories: Path) -> dict:
    """What rlcfg/dialects/areal/releases.json holds, from the inventories and rlcfg's own sections:
    - "fields": `Class.field` -> the releases that have the field, for every field some release lacks (read at every
      key path the field has; fields no inventory lists keep the `releases=` written by hand in models.py);
    - "defaults": release -> `Class` -> key -> that release's default, where it differs from the schema's own (the
      documented release's); plain values only;
    - "unmodelled": dotted key -> its type (as a project file names types), default and releases, for the keys of
      the modelled pipelines that the schema does not model."""
    from pydantic_core import PydanticUndefined

    from rlcfg.dialects.areal import DIALECT
    from rlcfg.schema.base import Section, field_at, iter_fields

    read = {r: json.loads((inventories / f"{r}.json").read_text()) for r in RELEASES}
    keys = {r: _modelled_keys(read[r]) for r in RELEASES}
    # a field is judged by the pipelines of the variant it is met in: SFT's `actor` is 1.0's, GRPO's every release's
    paths: dict[str, set] = {}  # Class.field -> (variant, dotted key) where it is met
    infos: dict[str, object] = {}
    def walk(model: type, prefix: tuple = ()) -> Any:
        """iter_fields, and the fields of a list's item section too (the inventories name them under the list's
        key: `rollout.scheduling_spec.cpu`)."""
        for path, info, owner in iter_fields(model, prefix):
            yield path, info, owner
            if get_origin(info.annotation) is list:
                item = get_args(info.annotation)[0]
                if isinstance(item, type) and issubclass(item, Section):
                    yield from walk(item, path)

    for variant, root in DIALECT.variants().items():
        for path, info, owner in walk(root):
            # named as declared: the class whose body declares the field, and its attribute name (not its alias)
            attribute = next(n for n, f in owner.model_fields.items() if f is info)
            declaring = next(c for c in owner.__mro__ if attribute in c.__dict__.get("__annotations__", {}))
            name = f"{declaring.__name__}.{attribute}"
            paths.setdefault(name, set()).add((variant, ".".join(map(str, path))))
            infos[name] = info
    in_variant = {(r, v): _modelled_keys(read[r], pipelines) for r in RELEASES
                  for v, pipelines in VARIANT_PIPELINES.items()}
    fields: dict[str, list] = {}
    defaults: dict[str, dict] = {r: {} for r in RELEASES if r != DOCUMENTED}
    for name, met in sorted(paths.items()):
        where = {p for _v, p in met}
        having = [r for r in RELEASES if any(p in in_variant[r, v] for v, p in met)]
        if having and having != list(RELEASES):
            fields[name] = having
        schema_default = getattr(infos[name], "default", PydanticUndefined)
        schema_default = getattr(schema_default, "value", schema_default)  # an enum member: its value
        for release in defaults:
            seen = {json.dumps(keys[release][p]["default"]) for p in where if p in keys[release]}
            if len(seen) != 1:
                continue
            default = json.loads(seen.pop())
            if _plain_default(default) and _plain_default(schema_default) and default != schema_default:
                cls, attribute = name.split(".")
                key = getattr(infos[name], "alias", None) or attribute  # as the document writes it
                defaults[release].setdefault(cls, {})[key] = default
    unmodelled: dict[str, dict] = {}
    roots = list(DIALECT.variants().values())
    for release in RELEASES:
        for key, fact in keys[release].items():
            path = tuple(key.split("."))
            known = any(field_at(root, path)[0] is not None or (
                field_at(root, path)[1] is None and field_at(root, path[:-1])[0] is not None) for root in roots)
            if known:
                continue
            kind = "|".join(dict.fromkeys(_KINDS.get(k, "any") for k in str(fact["type"]).split("|")))
            kind = "any" if "any" in kind.split("|") else kind
            if fact["default"] is None and kind != "any":
                kind += "|null"
            default = None if fact["default"] == "???" else fact["default"]
            entry = unmodelled.setdefault(key, {"type": kind, "default": default, "releases": []})
            entry["releases"].append(release)
    return {"fields": fields, "defaults": {r: dict(sorted(d.items())) for r, d in defaults.items()},
            "unmodelled": dict(sorted(unmodelled.items()))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", default="/work/.mirror/inclusionAI+AReaL/repo")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[2] / "tests" / "inventory" / "areal"))
    parser.add_argument("--tables", action="store_true", help="only write rlcfg/dialects/areal/releases.json from the "
                                                               "inventories (after a schema change)")
    args = parser.parse_args()
    out = Path(args.out)
    target = Path(__file__).resolve().parents[2] / "rlcfg" / "dialects" / "areal" / "releases.json"
    if args.tables:
        target.write_text(json.dumps(tables(out), indent=0) + "\n")
        return
    out.mkdir(parents=True, exist_ok=True)
    for release in RELEASES:
        data = build(args.mirror, release)
        (out / f"{release}.json").write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
        sizes = {p: len(v) for p, v in data["pipelines"].items()}
        print(release, data["commit"][:12], sizes)


if __name__ == "__main__":
    main()
