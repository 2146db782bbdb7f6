"""Field inventory of ROLL's config dataclasses, read from a bare mirror with `git show` and Python's `ast`.

ROLL builds its config with dacite from nested dataclasses: `roll/configs/*.py` (BaseConfig, PPOConfig,
WorkerConfig and its model/training/data/generating arguments) and one config class per pipeline under
`roll/pipeline/<name>/<name>_config.py`. This script never imports ROLL: it parses those files, resolves each
class's bases and field annotations by the names the module imports, and walks every pipeline's root class.

Keys are dotted paths. A `Dict[str, X]` of a dataclass X puts `*` for the mapping key (rewards.*.tag_included);
a list of dataclasses, or a Union of a dataclass and a dict of it (PPOConfig.teacher), names X's keys directly.

Usage: python tools/inventory/roll.py [MIRROR_GIT_DIR] [REV] [RELEASE] > tests/inventory/roll/RELEASE.json
(not run in CI; the JSON it writes is test data for tests/test_inventory.py), once per claimed release (v0.1.0,
v0.1.3, v0.2.1 and v0.3.0 at their tags, main at the mirror's HEAD); then
    python tools/inventory/roll.py --tables
writes rlcfg/dialects/roll/releases.json (which release has each field, the keys rlcfg does not model) from them.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

MIRROR = "/work/.mirror/alibaba+ROLL/repo"
PIPELINES = {
    "rlvr": ("roll/pipeline/rlvr/rlvr_config.py", "RLVRConfig"),
    "agentic": ("roll/pipeline/agentic/agentic_config.py", "AgenticConfig"),
    "distill": ("roll/pipeline/distill/distill_config.py", "DistillConfig"),
    "sft": ("roll/pipeline/sft/sft_config.py", "SFTConfig"),
    "dpo": ("roll/pipeline/dpo/dpo_config.py", "DPOConfig"),
}
# strategy_config is a plain dict in ROLL; the Megatron strategies build mcore_adapter's TrainingArguments from it
# (with the worker's training_args), so MegatronArguments' fields are the Megatron keys a config may set there.
MEGATRON_ARGS = ("mcore_adapter/src/mcore_adapter/training_args.py", "MegatronArguments")
MEGATRON_PREFIX = "actor_train.strategy_args.strategy_config."
# Keys rlcfg knowingly does not model, with the reason (kept short; the test reads this list).
UNMODELLED: dict[str, str] = {}
# Pipelines whose keys are inventoried as facts but which rlcfg does not model: Roll.pipeline() names them, and the
# front end checks only the keys every pipeline shares.
UNMODELLED_PIPELINES = {
    "distill": "ROLL distill pipeline: validated as not modelled (one RLC116 warning, shared keys only)",
    "sft": "ROLL SFT pipeline: validated as not modelled (one RLC116 warning, shared keys only)",
    "dpo": "ROLL DPO pipeline: validated as not modelled (one RLC116 warning, shared keys only)",
}


@dataclass
class ClassInfo:
    module: str
    name: str
    bases: list[str]
    fields: dict[str, tuple[ast.expr, ast.Call | ast.expr | None]] = field(default_factory=dict)


class Reader:
    def __init__(self, git_dir: str, rev: str):
        self.git_dir, self.rev = git_dir, rev
        self.modules: dict[str, ast.Module] = {}
        self.classes: dict[tuple[str, str], ClassInfo] = {}
        self.imports: dict[str, dict[str, str]] = {}  # module path -> local name -> module path of the class

    def show(self, path: str) -> str | None:
        run = subprocess.run(["git", "--git-dir", self.git_dir, "show", f"{self.rev}:{path}"],
                             capture_output=True, text=True)
        return run.stdout if run.returncode == 0 else None

    def load(self, path: str) -> bool:
        if path in self.modules:
            return True
        text = self.show(path)
        if text is None:
            return False
        tree = ast.parse(text)
        self.modules[path] = tree
        names: dict[str, str] = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module:
                base = node.module
                if node.level:  # relative import: resolve against the module's package
                    pkg = path.rsplit("/", node.level)[0].replace("/", ".")
                    base = f"{pkg}.{base}" if base else pkg
                for alias in node.names:
                    names[alias.asname or alias.name] = base
            elif isinstance(node, ast.ClassDef) and any(
                    (isinstance(d, ast.Name) and d.id == "dataclass")
                    or (isinstance(d, ast.Call) and getattr(d.func, "id", "") == "dataclass")
                    for d in node.decorator_list):
                info = ClassInfo(path, node.name, [ast.unparse(b) for b in node.bases])
                for stmt in node.body:
                    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                        info.fields[stmt.target.id] = (stmt.annotation, stmt.value)
                self.classes[(path, node.name)] = info
        self.imports[path] = names
        return True

    def module_file(self, dotted: str) -> str | None:
        for candidate in (dotted.replace(".", "/") + ".py", dotted.replace(".", "/") + "/__init__.py"):
            if self.load(candidate):
                return candidate
        return None

    def resolve(self, module: str, name: str, depth: int = 0) -> ClassInfo | None:
        """The dataclass a name means inside a module (following `from x import Name` and package __init__)."""
        if depth > 5:
            return None
        self.load(module)
        if (module, name) in self.classes:
            return self.classes[(module, name)]
        source = self.imports.get(module, {}).get(name)
        if not source or not source.startswith("roll"):
            return None
        target = self.module_file(source)
        if target is None:
            return None
        return self.resolve(target, name, depth + 1)

    def all_fields(self, cls: ClassInfo) -> dict[str, tuple[ast.expr, ast.expr | None, ClassInfo]]:
        """Fields in dataclass order: bases first, a redefinition keeps its place and takes the new default."""
        out: dict[str, tuple[ast.expr, ast.expr | None, ClassInfo]] = {}
        for base in cls.bases:
            info = self.resolve(cls.module, base)
            if info is not None:
                out.update(self.all_fields(info))
        for name, (ann, value) in cls.fields.items():
            out[name] = (ann, value, cls)
        return out


def _type_text(ann: ast.expr) -> str:
    """An annotation as a short type: int, float|null, list, dict, literal, or a dataclass name."""
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        ann = ast.parse(ann.value, mode="eval").body
    if isinstance(ann, ast.Subscript):
        head = ast.unparse(ann.value).split(".")[-1]
        args = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        if head == "Optional":
            return f"{_type_text(args[0])}|null"
        if head == "Union":
            return "|".join(_type_text(a) for a in args)
        if head in ("List", "list", "Sequence", "Tuple", "tuple"):
            return "list"
        if head in ("Dict", "dict", "Mapping"):
            return "dict"
        if head == "Literal":
            return "literal"
    text = ast.unparse(ann)
    return {"List": "list", "Dict": "dict", "Any": "any", "None": "null"}.get(text, text)


def _literal_values(ann: ast.expr) -> list | None:
    for node in ast.walk(ann):
        if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("Literal"):
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            try:
                return [ast.literal_eval(e) for e in elts]
            except ValueError:
                return None
    return None


def _default(value: ast.expr | None) -> tuple[bool, object, str | None]:
    """(has a default, the default as JSON, the source text when it is not a literal)."""
    if value is None:
        return False, None, None
    if isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] == "field":
        kw = {k.arg: k.value for k in value.keywords}
        if "default" in kw:
            return _default(kw["default"])
        if "default_factory" in kw:
            fac = kw["default_factory"]
            text = ast.unparse(fac)
            if text in ("dict", "list"):
                return True, {} if text == "dict" else [], None
            if isinstance(fac, ast.Lambda):
                try:
                    return True, ast.literal_eval(fac.body), None
                except ValueError:
                    return True, None, text
            return True, None, f"{text}()"
        return False, None, None
    folded = _fold(value)
    if folded is not _NOT_CONSTANT:
        return True, folded, None
    return True, None, ast.unparse(value)


_NOT_CONSTANT = object()


def _fold(node: ast.expr) -> object:
    """A literal, or arithmetic on literals (ROLL writes pixel budgets as `4096 * 4096`); never evaluates code."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.Sub, ast.Pow)):
        left, right = _fold(node.left), _fold(node.right)
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (left, right)):
            if isinstance(node.op, ast.Mult):
                return left * right
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Sub):
                return left - right
            if isinstance(right, int) and 0 <= right <= 64:
                return left ** right
        return _NOT_CONSTANT
    try:
        return ast.literal_eval(node)
    except ValueError:
        return _NOT_CONSTANT


def _dataclass_args(reader: Reader, module: str, ann: ast.expr) -> list[tuple[str, ClassInfo]]:
    """The dataclasses an annotation holds, each with how it is held: "direct", "dict" or "list"."""
    found: list[tuple[str, ClassInfo]] = []

    def visit(node: ast.expr, how: str) -> None:
        if isinstance(node, ast.Subscript):
            head = ast.unparse(node.value).split(".")[-1]
            args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if head in ("Optional", "Union"):
                for a in args:
                    visit(a, how)
            elif head in ("Dict", "dict"):
                visit(args[-1], "dict")
            elif head in ("List", "list"):
                visit(args[0], "list")
        elif isinstance(node, (ast.Name, ast.Attribute)):
            info = reader.resolve(module, ast.unparse(node).split(".")[-1])
            if info is not None:
                found.append((how, info))

    visit(ann, "direct")
    return found


def walk(reader: Reader, cls: ClassInfo, prefix: str, out: dict, seen: tuple = ()) -> None:
    for name, (ann, value, owner) in reader.all_fields(cls).items():
        key = prefix + name
        has, default, expr = _default(value)
        entry: dict = {"type": _type_text(ann), "default": default}
        if not has:
            entry["required"] = True
        if expr:
            entry["default_expr"] = expr
        choices = _literal_values(ann)
        if choices is not None:
            entry["choices"] = choices
        entry["class"] = owner.name
        out[key] = entry
        subs = _dataclass_args(reader, owner.module, ann)
        directs = [info for how, info in subs if how in ("direct", "list")]
        dicts = [info for how, info in subs if how == "dict"]
        # A Union of X and Dict[str, X] (teacher): both spell X's keys; record the direct form only.
        for info in (directs or dicts)[:1]:
            if info.name in seen:
                continue
            sub_prefix = key + (".*." if not directs else ".")
            walk(reader, info, sub_prefix, out, seen + (info.name,))


_KINDS = {"bool": "bool", "int": "int", "float": "float", "str": "str", "list": "list", "dict": "mapping"}


def tables(inventories) -> dict:
    """What rlcfg/dialects/roll/releases.json holds, from the inventories and rlcfg's own sections:
    - "fields": `Class.field` -> the releases whose inventory has a key that is this field, for every field some
      release lacks (a field no inventory names is in every release, unless models.py says otherwise);
    - "unmodelled": dotted key -> its type (as a project file names types), default and releases, for the keys of
      the modelled pipelines that the schema does not model (the settings v0.1.x had and later releases removed)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from rlcfg.dialects.roll import DIALECT
    from rlcfg.schema.base import field_at

    roots = list(DIALECT.variants().values())
    releases = list(DIALECT.releases)
    seen: dict[str, set] = {}
    unmodelled: dict[str, dict] = {}
    for release in releases:
        data = json.loads((inventories / f"{release}.json").read_text())
        for pipeline, keys in data["pipelines"].items():
            if pipeline in UNMODELLED_PIPELINES:
                continue
            for key, fact in keys.items():
                path = tuple(key.split("."))
                known = [(info, owner) for info, owner in (field_at(root, path) for root in roots) if info is not None]
                if not known:
                    if any(field_at(root, path)[1] is None and field_at(root, path[:-1])[0] is not None
                           for root in roots):
                        continue  # inside a mapping the schema keeps open
                    kind = _KINDS.get(str(fact.get("type")), "any")
                    if fact.get("default") is None and kind != "any":
                        kind += "|null"
                    entry = unmodelled.setdefault(key, {"type": kind, "default": fact.get("default"), "releases": []})
                    if release not in entry["releases"]:
                        entry["releases"].append(release)
                    continue
                for info, owner in known:
                    # named as declared: the class whose body declares the field, and its attribute name
                    attribute = next(n for n, f in owner.model_fields.items() if f is info)
                    declaring = next(c for c in owner.__mro__ if attribute in c.__dict__.get("__annotations__", {}))
                    seen.setdefault(f"{declaring.__name__}.{attribute}", set()).add(release)
    fields = {name: [r for r in releases if r in having] for name, having in sorted(seen.items())
              if set(having) != set(releases)}
    return {"fields": fields, "unmodelled": dict(sorted(unmodelled.items()))}


def main() -> None:
    if sys.argv[1:] == ["--tables"]:
        root = Path(__file__).resolve().parents[2]
        target = root / "rlcfg" / "dialects" / "roll" / "releases.json"
        target.write_text(json.dumps(tables(root / "tests" / "inventory" / "roll"), indent=0) + "\n")
        return
    git_dir = sys.argv[1] if len(sys.argv) > 1 else MIRROR
    rev = sys.argv[2] if len(sys.argv) > 2 else "HEAD"
    release = sys.argv[3] if len(sys.argv) > 3 else "main"
    commit = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", f"{rev}^{{commit}}"],
                            capture_output=True, text=True, check=True).stdout.strip()
    reader = Reader(git_dir, commit)
    pipelines: dict[str, dict] = {}
    for pipeline, (path, name) in PIPELINES.items():
        info = reader.resolve(path, name)
        if info is None and pipeline in ("rlvr", "agentic"):
            raise SystemExit(f"{name} not found in {path} at {commit}")
        if info is None:
            continue  # a pipeline the release does not have yet
        out: dict = {}
        walk(reader, info, "", out)
        if pipeline in ("rlvr", "agentic"):
            megatron = reader.resolve(*MEGATRON_ARGS)
            if megatron is None:
                raise SystemExit(f"MegatronArguments not found at {commit}")
            walk(reader, megatron, MEGATRON_PREFIX, out)
        pipelines[pipeline] = dict(sorted(out.items()))
    doc = {"dialect": "roll", "release": release, "commit": commit,
           "sources": sorted(reader.modules), "pipelines": pipelines, "unmodelled": UNMODELLED,
           "unmodelled_pipelines": UNMODELLED_PIPELINES}
    json.dump(doc, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
