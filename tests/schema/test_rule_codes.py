"""A rule declares every code its findings may carry, so that the generated pages list it under each of them (the
"silently rewrites" table is every rule that may report RLC304)."""

from __future__ import annotations

import ast
import functools
import inspect
import re

import pytest

from rlcfg import schema
from rlcfg.schema.base import HostFacts, RuleContext, RuleSet, UndeclaredCode
from rlcfg.schema.validate import run_rules
from rlcfg.source.tree import SourceTree

CODE = re.compile(r"^RLC\d{3}$")


@functools.cache
def _module_functions(path: str) -> dict[str, ast.FunctionDef]:
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    return {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


def _written_codes(function) -> set[str]:
    """The codes a rule's body and the helpers of its module that it calls spell out (`ctx.machine` is RLC308)."""
    functions = _module_functions(inspect.getsourcefile(function))
    seen: set[str] = set()

    def walk(name: str) -> set[str]:
        if name in seen or name not in functions:
            return set()
        seen.add(name)
        found: set[str] = set()
        for node in ast.walk(functions[name]):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and CODE.match(node.value):
                found.add(node.value)
            elif isinstance(node, ast.Attribute) and node.attr == "machine":
                found.add("RLC308")
            elif isinstance(node, ast.Name) and node.id != name:
                found |= walk(node.id)
        return found

    return walk(function.__name__)


RULES = [(name, rule) for name in schema.names() for rule in schema.load(name).rules]


@pytest.mark.parametrize("rule", [r for _, r in RULES], ids=[r.id for _, r in RULES])
def test_rule_declares_exactly_the_codes_it_writes(rule):
    written = _written_codes(rule.check)
    assert set(rule.codes) == written, (
        f"{rule.id} declares {sorted(rule.codes)} but its code writes {sorted(written)}: "
        f"declare the others with also=(...)")


def test_every_rewrite_rule_is_on_the_rewrites_page():
    import docs_gen

    for name in schema.names():
        page = docs_gen.docs_files(docs_gen.select(name), "md", pages="one")[f"{name}.md"]
        rewrites = page.split('<a id="rewrites"></a>')[1].split("## ")[0]
        for rule in schema.load(name).rules:
            assert (f"[`{rule.id}`]" in rewrites) == ("RLC304" in rule.codes), rule.id


def test_a_rule_reporting_an_undeclared_code_is_a_bug_not_a_finding():
    class Toy(schema.base.Dialect):
        name = "toy"
        rules = RuleSet()

    @Toy.rules.rule("toy/declares-one", "RLC300", "a toy rule", on_document=True)
    def _declares_one(doc, ctx: RuleContext):
        yield ctx.warning("RLC304", "a", "rewritten")

    with pytest.raises(UndeclaredCode, match="toy/declares-one reports RLC304"):
        run_rules(Toy(), None, SourceTree({"a": 1}), False, HostFacts(), set(), config_has_errors=True)


def test_declared_codes_are_registered_once():
    rules = RuleSet()
    with pytest.raises(KeyError, match="RLC999"):
        rules.rule("toy/unknown", "RLC300", "a toy rule", also=("RLC999",))
    with pytest.raises(ValueError, match="declared twice"):
        rules.rule("toy/twice", "RLC300", "a toy rule", also=("RLC300",))
