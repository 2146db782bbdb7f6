"""rlcfg.schema.base.param and section make the FieldInfo that pydantic's Field() makes for the same arguments: they
skip Field() only because a dialect declares hundreds of fields on every check."""

from __future__ import annotations

import pytest
from pydantic import Field, model_validator

from rlcfg.schema.base import FATE_KEY, RELEASES_KEY, Section, inert, param, section


class Inner(Section):
    x: int = param(1, description="x")


def through_field(default=..., *, alias=None, description, examples=None, extra=None, factory=None, **bounds):
    kwargs = {k: v for k, v in dict(description=description, alias=alias, examples=examples, **bounds).items()
              if v is not None}
    if extra:
        kwargs["json_schema_extra"] = extra
    return Field(default_factory=factory, **kwargs) if factory is not None else Field(default, **kwargs)


def same(mine, theirs) -> None:
    assert repr(mine) == repr(theirs)
    assert list(mine._attributes_set.items()) == list(theirs._attributes_set.items())  # in the same order
    assert repr(mine.metadata) == repr(theirs.metadata)
    assert mine.json_schema_extra == theirs.json_schema_extra


@pytest.mark.parametrize("arguments", [
    dict(default=1, description="a count", ge=1),
    dict(default=0.5, description="a share", gt=0, lt=1, le=1, ge=0),
    dict(default=None, description="aliased", alias="not-an-identifier", examples=[1, 2]),
    dict(default="x", description="short", min_length=1),
    dict(default=3, description="with everything", releases=("a", "b"), fate=inert("why"), renamed_to="b.c",
         late_check={"a": "when it starts"}),
])
def test_param_makes_what_field_makes(arguments):
    mine = param(arguments.pop("default"), **arguments)
    extra = {}
    if "late_check" in arguments:
        extra["x-rlcfg-late-check"] = dict(arguments.pop("late_check"))
    if "renamed_to" in arguments:
        extra["x-rlcfg-renamed-to"] = arguments.pop("renamed_to")
    if "releases" in arguments:
        extra[RELEASES_KEY] = list(arguments.pop("releases"))
    if "fate" in arguments:
        extra[FATE_KEY] = arguments.pop("fate").to_json()
    same(mine, through_field(mine.default, extra=extra, **arguments))


def test_a_container_default_is_a_fresh_copy_as_with_a_field_factory():
    mine = param({"a": [1]}, description="a mapping")
    theirs = through_field(description="a mapping", factory=mine.default_factory)
    same(mine, theirs)
    assert mine.default_factory() == {"a": [1]} and mine.default_factory() is not mine.default_factory()


@pytest.mark.parametrize("optional", [False, True])
def test_section_makes_what_field_makes(optional):
    mine = section(Inner, description="inner", alias="in-ner", optional=optional, releases=("a",))
    theirs = through_field(None, factory=mine.default_factory, description="inner", alias="in-ner",
                           extra={RELEASES_KEY: ["a"]})
    same(mine, theirs)


def test_an_absent_section_is_its_defaults_with_or_without_validators_of_its_own():
    class Checked(Section):
        y: int = param(2, description="y")

        @model_validator(mode="after")
        def positive(self):
            return self

    # without validators of its own, the default is made field by field, the very instance validation would make
    made = section(Inner, description="inner").default_factory()
    assert made == Inner() and made.model_fields_set == Inner().model_fields_set == set()
    # with them, by validation, so that they run
    assert section(Checked, description="checked").default_factory is Checked


class Leaf(Section):
    model: int = param(1, description="the leaf's model")


class Branch(Section):
    model: Leaf = section(Leaf, description="a section named like its own key")


def test_a_path_that_repeats_a_key_names_the_field_at_its_end():
    from rlcfg.schema.base import field_at, fields_along

    info, owner = field_at(Branch, ("model", "model"))
    assert owner is Leaf and info.annotation is int
    assert [owner for _info, owner in fields_along(Branch, ("model", "model"))] == [Branch, Leaf]


class RenamedInner(Section):
    new_rate: float = param(0.1, description="The rate.")
    old_rate: float = param(0.1, description="The rate, as older releases call it.", renamed_to="inner.new_rate")


class RenamedRoot(Section):
    inner: RenamedInner = section(RenamedInner, description="A section with a renamed key.")
    other: RenamedInner = section(RenamedInner, description="The same section under another key.")


def test_a_renamed_key_is_reported_where_the_user_wrote_it_and_only_there():
    from rlcfg.schema.base import HostFacts, RuleContext, defaults_tree
    from rlcfg.schema.validate import check_renames
    from rlcfg.source.resolve import merge_over_defaults
    from rlcfg.source.yaml_loader import load_yaml

    def report(text):
        tree, problems = load_yaml(text, "renamed.yaml")
        assert problems == []
        merged = merge_over_defaults(defaults_tree(RenamedRoot), tree)  # the defaults set every key, the user few
        found = check_renames(RenamedRoot, merged, RuleContext(merged, False, HostFacts()))
        return [(d.code, d.path, d.origin.line if d.origin else None) for d in found]

    assert report("inner:\n  new_rate: 0.2\n") == []
    assert report("inner:\n  old_rate: 0.2\n") == [("RLC111", "inner.old_rate", 2)]
    assert report("inner:\n  old_rate: 0.2\n  new_rate: 0.2\n") == [("RLC111", "inner.old_rate", 2)]
    assert report("inner:\n  old_rate: 0.2\n  new_rate: 0.3\n") == [("RLC305", "inner.old_rate", 2)]
    assert report("other:\n  old_rate: 0.2\ninner:\n  old_rate: 0.1\n") == [
        ("RLC111", "inner.old_rate", 4), ("RLC111", "other.old_rate", 2)]  # in the order the sections declare them
