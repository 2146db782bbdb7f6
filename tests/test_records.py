"""rlcfg.records.record behaves as dataclasses.dataclass for the records rlcfg declares with it."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import field

import pytest

from rlcfg.records import MADE_BEFORE_COMPILING, record


def declare(decorator):
    @decorator
    class Point:
        """A point."""

        x: int
        label: str | None = None
        tags: list = field(default_factory=list)
        weight: float = field(default=1.0, compare=False, repr=False)

    return Point


@pytest.mark.parametrize("frozen", [False, True])
def test_a_record_behaves_as_the_standard_dataclass(frozen):
    mine, standard = declare(record(frozen=frozen)), declare(dataclasses.dataclass(frozen=frozen))
    for cls in (mine, standard):
        cls.__qualname__ = "Point"  # as if declared at module level, for repr
    a, b = mine(1, "a", [1]), standard(1, "a", [1])
    assert repr(a) == repr(b) == "Point(x=1, label='a', tags=[1])"
    assert mine(1) == mine(1, None, []) and mine(1) != mine(2) and mine(1, weight=5) == mine(1)
    assert (mine(1) == standard(1)) is False  # records of different classes never compare equal
    assert mine(1).tags is not mine(1).tags  # each instance gets its own default list
    assert [f.name for f in dataclasses.fields(a)] == [f.name for f in dataclasses.fields(b)]
    assert dataclasses.asdict(a) == dataclasses.asdict(b)
    assert dataclasses.replace(a, x=3) == mine(3, "a", [1])
    assert mine.__match_args__ == standard.__match_args__ == ("x", "label", "tags", "weight")
    assert copy.deepcopy(a) == a
    with pytest.raises(TypeError):
        mine()  # x is required
    if frozen:
        assert hash(mine(1, "a", (1,))) == hash(mine(1, "a", (1,), 9.0))  # weight takes no part, as it compares not
        with pytest.raises(dataclasses.FrozenInstanceError):
            a.x = 2
        with pytest.raises(dataclasses.FrozenInstanceError):
            del a.x
    else:
        assert mine.__hash__ is None and standard.__hash__ is None  # mutable records are not hashable
        a.x = 2
        assert a == mine(2, "a", [1])


@record(frozen=True)
class Pinned:
    where: str
    line: int = 1


def test_a_frozen_record_pickles_and_copies():
    pinned = Pinned("file.yaml", 3)
    assert pickle.loads(pickle.dumps(pinned)) == pinned and copy.copy(pinned) == pinned
    assert {pinned: 1}[Pinned("file.yaml", 3)] == 1


def test_a_record_that_needs_more_than_plain_fields_says_so_when_declared():
    with pytest.raises(TypeError, match="dataclasses.dataclass"):
        @record
        class Hidden:
            x: int = field(default=0, init=False)
    with pytest.raises(TypeError, match="writes __repr__ itself"):
        @record
        class Shown:
            x: int = 0

            def __repr__(self) -> str:
                return "shown"


def test_post_init_runs_and_inherited_fields_come_first():
    seen = []

    @record
    class Base:
        a: int

    @record
    class Child(Base):
        b: int = 2

        def __post_init__(self) -> None:
            seen.append((self.a, self.b))

    assert Child(1) == Child(1, 2) and seen == [(1, 2), (1, 2)]
    assert repr(Child(1)).endswith("Child(a=1, b=2)")


def test_each_method_is_compiled_the_first_time_it_is_called(monkeypatch):
    compiled = []
    real_exec = exec

    def counting_exec(source, namespace):
        compiled.append(source.split("(", 1)[0])
        real_exec(source, namespace)

    monkeypatch.setattr("builtins.exec", counting_exec)
    Point = declare(record(frozen=True))
    assert compiled == []  # declaring compiles nothing
    made = [Point(i, tags=()) for i in range(MADE_BEFORE_COMPILING)]
    assert compiled == []  # a class made a few times binds its arguments without compiling
    point = Point(1, tags=())
    assert compiled == ["def __init__"]  # made often: compiled
    assert Point(2).x == 2 and compiled == ["def __init__"]  # once per record class
    assert made[1] == point and [p.x for p in made] == list(range(MADE_BEFORE_COMPILING))
    assert hash(point) == hash(Point(1, tags=())) and point == Point(1, tags=()) and "x=1" in repr(point)
    assert sorted(compiled) == ["def __eq__", "def __hash__", "def __init__", "def __repr__"]
    assert Point.__init__.__qualname__.endswith("Point.__init__")


@pytest.mark.parametrize("frozen", [False, True])
def test_a_record_binds_arguments_as_the_standard_dataclass_before_and_after_compiling(frozen):
    def error(cls, *args, **kwargs):
        with pytest.raises(TypeError) as caught:
            cls(*args, **kwargs)
        return str(caught.value)

    calls = [((), {}), ((1, "a", [], 2.0, 9), {}), ((1,), {"nope": 2}), ((1,), {"x": 2}),
             ((), {"label": "a"}), ((1,), {"label": "a", "tags": [1], "weight": 3.0})]
    mine, standard = declare(record(frozen=frozen)), declare(dataclasses.dataclass(frozen=frozen))
    for stage in ("bound in Python", "compiled"):
        for args, kwargs in calls[:-1]:
            assert error(mine, *args, **kwargs) == error(standard, *args, **kwargs), (stage, args, kwargs)
        args, kwargs = calls[-1]
        assert repr(mine(*args, **kwargs)) == repr(standard(*args, **kwargs))
        for _ in range(MADE_BEFORE_COMPILING):
            mine(1)


def test_a_record_of_three_required_fields_names_them_as_python_does():
    @record
    class Three:
        a: int
        b: int
        c: int

    @dataclasses.dataclass
    class Standard:
        a: int
        b: int
        c: int

    with pytest.raises(TypeError) as mine:
        Three()
    with pytest.raises(TypeError) as standard:
        Standard()
    assert str(mine.value).split("()", 1)[1] == str(standard.value).split("()", 1)[1]


def test_a_plain_subclass_of_a_record_uses_its_methods():
    Point = declare(record(frozen=True))

    class Marked(Point):
        pass

    marked = Marked(1, "a")
    assert (marked.x, marked.label) == (1, "a") and repr(marked).endswith("Marked(x=1, label='a', tags=[])")
    assert marked == Marked(1, "a") and marked != Point(1, "a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        marked.x = 2
    marked.note = "subclasses may add attributes"  # as with the standard frozen dataclass
