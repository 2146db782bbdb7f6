"""What a reference page says about a dialect, taken from its sections, fields and rules.

Everything here is plain data (no Markdown, no reST), so both output formats and the tests read the same
facts. A dialect with several roots (ChatLearn's FSDP and Megatron trees, AReaL's kinds) is merged into
one list of sections: a row that reads the same in every variant that has its section is written once;
only the rows that differ are listed per variant.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic.fields import FieldInfo

from rlcfg.schema.base import Dialect, Section, choices_of, field_fate, field_releases, key_of, section_types
from rlcfg.schema.types_text import field_type_text, literal_text, type_text

from docs_gen.values import yaml_value

Path = tuple  # of str; "<name>" stands for any key of a mapping of sections, "[]" for any item of a list


# ---- walking a section tree ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldRef:
    """One field of one section, wherever it sits in a tree."""

    path: Path
    info: FieldInfo
    owner: type[Section]


@dataclass(frozen=True)
class SectionRef:
    path: Path
    model: type[Section]
    info: FieldInfo | None  # the field that holds the section; None for the root
    label: str = ""  # which member of a union of sections this is ("when `kind` is `ppo`")
    container: str = ""  # "mapping" or "list" when the section is the item type of one
    context: tuple[str, ...] = ()  # the labels of the union members above it

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(x for x in self.context + (self.label,) if x)


def walk(root: type[Section]) -> list[SectionRef]:
    """Every section of a tree, depth first, including union members and the items of lists and mappings."""
    out: list[SectionRef] = []
    seen: set = set()

    def visit(ref: SectionRef) -> None:
        key = (ref.path, ref.model, ref.labels)
        if key in seen or len(ref.path) > 32:  # a recursive model: document it once
            return
        seen.add(key)
        out.append(ref)
        for name, info in ref.model.model_fields.items():
            path = ref.path + (key_of(name, info),)
            members = section_types(info.annotation)
            tags = union_tags(info.annotation)
            for member in members:
                label = _union_label(info.discriminator, members, member, tags.get(member)) if len(members) > 1 else ""
                visit(SectionRef(path, member, info, label, "", ref.labels))
            items = item_sections(info.annotation) if not members else []
            if items:
                kind = "list" if _is_list(info.annotation) else "mapping"
                for item in items:
                    label = _union_label(None, items, item, None) if len(items) > 1 else ""
                    visit(SectionRef(path + ("[]" if kind == "list" else "<name>",), item, info, label, kind,
                                     ref.labels))

    visit(SectionRef((), root, None))
    return out


def union_tags(annotation: Any) -> dict:
    """Section -> the pydantic `Tag` it carries in a callable-discriminated union."""
    from typing import Annotated, get_args, get_origin

    out: dict = {}
    for arg in get_args(annotation):
        if get_origin(arg) is Annotated:
            inner, *meta = get_args(arg)
            tag = next((getattr(m, "tag") for m in meta if type(m).__name__ == "Tag"), None)
            if isinstance(inner, type) and issubclass(inner, Section) and tag is not None:
                out[inner] = tag
            else:
                out.update(union_tags(inner))
        else:
            out.update(union_tags(arg))
    return out


def iter_all_fields(root: type[Section]) -> list[FieldRef]:
    """Every field of every section of a tree (what the description test walks)."""
    return [FieldRef(ref.path + (key_of(name, info),), info, ref.model)
            for ref in walk(root) for name, info in ref.model.model_fields.items()]


def _is_list(annotation: Any) -> bool:
    from typing import get_args, get_origin

    if get_origin(annotation) in (list, tuple, set, frozenset):
        return True
    return any(_is_list(a) for a in get_args(annotation) if get_origin(annotation) is not dict)


def item_sections(annotation: Any) -> list[type[Section]]:
    """The Section types a list or mapping holds as items (several for a union), looking through Optional."""
    from typing import Union, get_args, get_origin
    import types

    origin = get_origin(annotation)
    if origin in (list, tuple, set, frozenset):
        args = [a for a in get_args(annotation) if a is not Ellipsis]
        return section_types(args[0]) if args else []
    if origin is dict:
        args = get_args(annotation)
        return section_types(args[1]) if len(args) == 2 else []
    if origin in (Union, types.UnionType):
        for arg in get_args(annotation):
            found = item_sections(arg)
            if found:
                return found
    return []


def _union_label(discriminator: Any, members: list[type[Section]], member: type[Section], tag: Any) -> str:
    """How a reader tells the members of a union of sections apart: by the key whose constant value differs
    (pydantic's discriminator, a key whose only value is the member's tag, or a constant key every member
    has), else by the member's name."""
    key = discriminator if isinstance(discriminator, str) else None
    if key is None and tag is not None:
        key = _key_with_value(member, tag) or next(
            (k for m in members if m is not member for k in [_tag_key(m)] if k), None)
        if key and not _key_with_value(member, tag):
            return f"when `{key}` is another value"
    key = key or _implicit_tag(members)
    if key:
        for name, sub in member.model_fields.items():
            if key_of(name, sub) == key:
                values = choices_of(sub.annotation)
                if values:
                    return f"when `{key}` is " + " or ".join(f"`{literal_text(v)}`" for v in values)
    return f"as {model_title(member)}"


def _key_with_value(member: type[Section], value: Any) -> str | None:
    return next((key_of(n, i) for n, i in member.model_fields.items() if choices_of(i.annotation) == [value]), None)


def _tag_key(member: type[Section]) -> str | None:
    return next((key_of(n, i) for n, i in member.model_fields.items()
                 if (c := choices_of(i.annotation)) is not None and len(c) == 1), None)


def _implicit_tag(members: list[type[Section]]) -> str | None:
    common = None
    for member in members:
        keys = {key_of(n, i) for n, i in member.model_fields.items() if choices_of(i.annotation)}
        common = keys if common is None else common & keys
    for key in sorted(common or ()):
        seen: set = set()
        disjoint = True
        for member in members:
            info = next(i for n, i in member.model_fields.items() if key_of(n, i) == key)
            values = set(map(repr, choices_of(info.annotation) or ()))
            disjoint = disjoint and not (values & seen)
            seen |= values
        if disjoint:
            return key
    return None


def model_title(model: type[Section]) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", model.__name__)


def own_doc(model: type) -> str:
    """The class's own docstring, not one inherited from Section or BaseModel."""
    doc = model.__dict__.get("__doc__")
    return inspect.cleandoc(doc) if doc else ""


def dotted_path(path: Path) -> str:
    out = ""
    for part in path:
        out += part if part == "[]" or not out else "." + part
    return out


# ---- rows ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    key: str
    path: str  # dotted
    type: str
    default: str  # YAML as a user writes it; "" for a nested section
    description: str
    section: str = ""  # for a nested section or a container of sections: the dotted path it is documented at
    renamed_to: str = ""
    renamed_from: tuple[str, ...] = ()
    rules: tuple[tuple[str, str], ...] = ()  # (code, rule id) of the cross-field rules that read this key
    nested: bool = False  # the key holds a section (documented under its own heading), not a value
    releases: tuple[str, ...] = ()  # the framework releases that have the key; empty when all do
    fate: str = ""  # what `rlcfg run` does with it: "honored", "refused: ...", "inert: ..."; empty when undeclared

    @property
    def rule_groups(self) -> list[tuple[str, list[str]]]:
        """The rules reading this key, by code: [(code, [rule id, ...])], in registration order."""
        out: dict[str, list[str]] = {}
        for code, rule_id in self.rules:
            out.setdefault(code, []).append(rule_id)
        return list(out.items())

    def content(self) -> tuple:
        return (self.type, self.default, self.description, self.section, self.renamed_to, self.renamed_from,
                self.releases, self.fate)

    @property
    def notes(self) -> list[str]:
        """Plain-text notes for the constraints column: which releases have the key, what `rlcfg run` does."""
        out = []
        if self.releases:
            out.append("only in " + ", ".join(self.releases))
        if self.fate:
            out.append("rlcfg run: " + self.fate)
        return out


def default_text(info: FieldInfo) -> str:
    if info.is_required():
        return "???"
    if info.default_factory is not None:
        value = info.default_factory()
        if isinstance(value, Section):
            return ""
        return yaml_value(value)
    if isinstance(info.default, Section):
        return ""
    return yaml_value(info.default)


def _row(ref: SectionRef, name: str, info: FieldInfo, renamed_from: dict[str, list[str]],
         rules_by_key: dict[str, list[tuple[str, str]]]) -> Row:
    key = key_of(name, info)
    path = ref.path + (key,)
    dotted = dotted_path(path)
    members = section_types(info.annotation)
    item = item_sections(info.annotation) if not members else []
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    if members:
        kind = "section" if len(members) == 1 else "one of " + ", ".join(model_title(m) for m in members)
        nullable = "null" in type_text(info.annotation).split(" or ")
        typ = kind + (" or null" if nullable else "")
        target = dotted
        default = "null" if (not info.is_required() and info.default is None and info.default_factory is None) else ""
    elif item:
        is_list = _is_list(info.annotation)
        target = dotted_path(path + ("[]" if is_list else "<name>",))
        typ = field_type_text(info).replace("of section", "of sections", 1)
        default = default_text(info)
    else:
        typ = field_type_text(info)
        target = ""
        default = default_text(info)
    fate = field_fate(info, ref.model)
    fate_text = "" if fate is None else fate.kind + (f" ({fate.reason})" if fate.reason else "") + \
        ("; `rlcfg validate` warns when it is set (RLC307)" if fate.unread else "")
    return Row(key=key, path=dotted, type=typ, default=default, description=_clean(info.description or ""),
               section=target, renamed_to=str(extra.get("x-rlcfg-renamed-to", "")),
               renamed_from=tuple(renamed_from.get(dotted, ())), rules=tuple(rules_by_key.get(dotted, ())),
               nested=bool(members), releases=field_releases(info) or (), fate=fate_text)


def _clean(text: str) -> str:
    return " ".join(text.split())


# ---- a dialect's page ---------------------------------------------------------------------------------------


@dataclass
class RowGroup:
    variants: tuple[str, ...]  # empty: the rows apply wherever the section exists
    label: str
    rows: list[Row]


@dataclass
class SectionDoc:
    path: str  # dotted; "" for the top level
    anchor: str
    description: str
    optional: bool  # absent (null) unless written
    container: str  # "mapping" / "list" when these are the keys of each item
    label: str  # union member label, or ""
    variants: tuple[str, ...]  # the variants that have this section; empty when all do
    variants_label: str
    groups: list[RowGroup]

    @property
    def heading(self) -> str:
        return self.path or "Top-level keys"


@dataclass
class RuleDoc:
    id: str
    anchor: str
    code: str
    title: str  # the code's title
    severity: str
    summary: str
    keys: tuple[str, ...]
    also: tuple[str, ...] = ()  # the other codes its findings may carry

    @property
    def codes(self) -> tuple[str, ...]:
        return (self.code, *self.also)


@dataclass
class RenameDoc:
    old: str
    new: str
    variants_label: str


@dataclass
class VariantDoc:
    name: str
    when: str  # "`runtime_args.train_backend: megatron`", or "" when rlcfg picks it another way
    description: str
    default: bool


@dataclass
class DialectDoc:
    name: str
    title: str
    documents: str
    override_grammar: str
    variants: list[VariantDoc]
    discriminator: str  # dotted key that picks the variant, or ""
    sections: list[SectionDoc]
    rules: list[RuleDoc]
    rewrites: list[RuleDoc]  # the rules that may report RLC304
    renames: list[RenameDoc]
    parameters: int  # distinct dotted keys across variants

    @property
    def has_variants(self) -> bool:
        return len(self.variants) > 1


def _nest(path: tuple, value: Any) -> dict:
    node: Any = value
    for part in reversed(path):
        node = {part: node}
    return node


def discriminator(dialect: Dialect) -> tuple[tuple, dict[Any, str]] | None:
    """The key whose value picks the root model, and which value picks which variant.

    Found by asking the dialect itself (`root`) about each allowed value of each choice key that the roots
    have, so a dialect needs to declare nothing extra. None when no single key decides.
    """
    variants = dialect.variants()
    if len(variants) < 2:
        return None
    name_of = {id(model): name for name, model in variants.items()}
    candidates: list[tuple] = []
    values: dict[tuple, list] = {}
    for model in variants.values():
        for ref in iter_all_fields(model):
            if any(p in ("[]", "<name>") for p in ref.path):
                continue
            choices = choices_of(ref.info.annotation)
            if not choices:
                continue
            if ref.path not in values:
                candidates.append(ref.path)
                values[ref.path] = []
            values[ref.path].extend(c for c in choices if c not in values[ref.path])
    for path in candidates:
        mapping: dict[Any, str] = {}
        for value in values[path]:
            try:
                chosen = dialect.root(_nest(path, value))
            except Exception:  # this probe is not how the dialect decides
                mapping = {}
                break
            if id(chosen) not in name_of:
                mapping = {}
                break
            mapping[value] = name_of[id(chosen)]
        if mapping and set(mapping.values()) == set(variants):
            return path, mapping
    return None


def default_variant(dialect: Dialect) -> str:
    variants = dialect.variants()
    try:
        chosen = dialect.root({})
    except Exception:
        return next(iter(variants))
    return next((name for name, model in variants.items() if model is chosen), next(iter(variants)))


def anchor_of(text: str) -> str:
    text = text.replace("<name>", "name").replace("[]", ".item")
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-").lower() or "top-level"


def dialect_doc(dialect: Dialect) -> DialectDoc:
    variants = dialect.variants()
    order = list(variants)
    found = discriminator(dialect)
    default = default_variant(dialect)
    disc_key = ".".join(found[0]) if found else ""
    picks: dict[str, list] = {}
    if found:
        for value, name in found[1].items():
            picks.setdefault(name, []).append(value)

    def when(names: tuple[str, ...]) -> str:
        if not found:
            return ("in variant " if len(names) == 1 else "in variants ") + ", ".join(f"`{n}`" for n in names)
        chosen = [literal_text(v) for n in names for v in picks.get(n, [])]
        if len(chosen) == 1:
            return f"with `{disc_key}: {chosen[0]}`"
        return f"with `{disc_key}` one of " + ", ".join(f"`{v}`" for v in chosen)

    variant_docs = []
    for name, model in variants.items():
        variant_docs.append(VariantDoc(
            name=name,
            when=(f"`{disc_key}: " + "` or `".join(literal_text(v) for v in picks.get(name, [])) + "`") if found else "",
            description=_clean(own_doc(model).split("\n\n")[0]),
            default=name == default and len(variants) > 1))

    rules = [RuleDoc(id=r.id, anchor="rule-" + anchor_of(r.id), code=r.code, title=_code_title(r.code),
                     severity=_code_severity(r.code), summary=_clean(r.summary), keys=tuple(r.keys),
                     also=r.also)
             for r in dialect.rules]
    rules_by_key: dict[str, list[tuple[str, str]]] = {}
    for rule in rules:
        for key in rule.keys:
            rules_by_key.setdefault(key, []).append((rule.code, rule.id))

    # path -> variant -> (SectionRef, rows); the union members of one field are kept apart by their label
    collected: dict[tuple, dict[str, tuple[SectionRef, list[Row]]]] = {}
    path_order: list[tuple] = []
    renames: dict[tuple[str, str], list[str]] = {}
    for vname, model in variants.items():
        refs = walk(model)
        renamed_from: dict[str, list[str]] = {}
        for ref in refs:
            for name, info in ref.model.model_fields.items():
                extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
                target = extra.get("x-rlcfg-renamed-to")
                if target:
                    old = dotted_path(ref.path + (key_of(name, info),))
                    renamed_from.setdefault(str(target), []).append(old)
                    renames.setdefault((old, str(target)), []).append(vname)
        for ref in refs:
            slot = (ref.path, ref.labels)
            if slot not in collected:
                collected[slot] = {}
                _insert(path_order, slot)
            rows = [_row(ref, n, i, renamed_from, rules_by_key) for n, i in ref.model.model_fields.items()]
            collected[slot][vname] = (ref, rows)

    sections: list[SectionDoc] = []
    keys_seen: set[str] = set()
    for slot in path_order:
        per_variant = collected[slot]
        have = tuple(n for n in order if n in per_variant)
        first_ref = per_variant[have[0]][0]
        groups = _group_rows(per_variant, have, order, when)
        for group in groups:
            keys_seen.update(r.path for r in group.rows if not r.nested)
        path, labels = slot
        label = "; ".join(labels)
        dotted = dotted_path(path)
        info = first_ref.info
        description = _clean(info.description) if info is not None and info.description else ""
        if info is None:
            description = ""
        doc = own_doc(first_ref.model)
        if first_ref.label and doc:
            description = _clean(doc.split("\n\n")[0])
        optional = info is not None and not info.is_required() and info.default is None and info.default_factory is None
        sections.append(SectionDoc(
            path=dotted, anchor=anchor_of(dotted + ("-" + label if label else "")), description=description,
            optional=optional and not first_ref.container, container=first_ref.container, label=label,
            variants=have if len(have) < len(order) else (),
            variants_label=when(have) if len(have) < len(order) else "", groups=groups))

    rename_docs = [RenameDoc(old, new, when(tuple(vs)) if len(vs) < len(order) else "")
                   for (old, new), vs in renames.items()]
    return DialectDoc(
        name=dialect.name, title=dialect.title, documents=getattr(dialect, "documents", ""),
        override_grammar=dialect.override_grammar, variants=variant_docs, discriminator=disc_key,
        sections=sections, rules=rules, rewrites=[r for r in rules if "RLC304" in r.codes], renames=rename_docs,
        parameters=len(keys_seen))


def _insert(order: list[tuple], slot: tuple) -> None:
    """Put a section another variant adds at the end of its parent's subtree, so the page stays depth first."""
    path = slot[0]
    parent = path[:-1]
    at = None
    for index, (other, _label) in enumerate(order):
        if other[: len(parent)] == parent:
            at = index
    if at is None or not path:
        order.append(slot)
    else:
        order.insert(at + 1, slot)


def _group_rows(per_variant: dict[str, tuple[SectionRef, list[Row]]], have: tuple[str, ...], order: list[str],
                when) -> list[RowGroup]:
    """Rows equal in every variant that has the section go in the first group; each other row goes in the
    group of exactly the variants it reads the same in."""
    keys: list[str] = []
    for name in have:
        for row in per_variant[name][1]:
            if row.key not in keys:
                keys.append(row.key)
    common: list[Row] = []
    specific: dict[tuple[str, ...], list[Row]] = {}
    for key in keys:
        versions: dict[tuple, tuple[Row, list[str]]] = {}
        for name in have:
            row = next((r for r in per_variant[name][1] if r.key == key), None)
            if row is None:
                continue
            entry = versions.setdefault(row.content(), (row, []))
            entry[1].append(name)
        if len(versions) == 1 and len(next(iter(versions.values()))[1]) == len(have):
            common.append(next(iter(versions.values()))[0])
            continue
        for row, names in versions.values():
            specific.setdefault(tuple(names), []).append(row)
    groups = [RowGroup((), "", common)] if common or not specific else []
    for names in sorted(specific, key=lambda ns: [order.index(n) for n in ns]):
        groups.append(RowGroup(names, when(names), specific[names]))
    return groups


def _code_title(code: str) -> str:
    from rlcfg.diagnostics import CODES

    return CODES[code].title if code in CODES else ""


def _code_severity(code: str) -> str:
    from rlcfg.diagnostics import CODES

    return CODES[code].severity.value if code in CODES else ""
