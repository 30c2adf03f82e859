"""preflight.records.Record behaves as the typing.NamedTuple it replaces (the collections.namedtuple class it
makes): each behaviour is checked on both."""

from __future__ import annotations

import copy
import pickle
from collections import namedtuple
from typing import List, Optional

import pytest

from preflight.records import Record


class AsRecord(Record):
    """A record."""

    name: str
    count: int
    note: Optional[str] = None
    tags: List[str] = []

    @property
    def label(self) -> str:
        return "%s x%d" % (self.name, self.count)


class AsNamedTuple(namedtuple("AsNamedTuple", AsRecord._fields, defaults=(None, []))):
    """The same declaration as the tuple class typing.NamedTuple makes (collections.namedtuple's)."""

    __slots__ = ()
    label = AsRecord.label


class Checked(AsRecord):
    """A subclass that checks its values, as CheckOptions does."""

    __slots__ = ()

    def __new__(cls, name: str, count: int = 1, note: Optional[str] = None, tags=()):
        if count < 0:
            raise ValueError("count must be >= 0")
        return super().__new__(cls, name, count, note, list(tags))


BOTH = pytest.mark.parametrize("kind", [AsRecord, AsNamedTuple], ids=["Record", "NamedTuple"])


@BOTH
def test_construction_positional_keyword_and_defaults(kind):
    assert kind("a", 2) == ("a", 2, None, [])
    assert kind("a", count=2, tags=["x"]) == ("a", 2, None, ["x"])
    assert kind(count=3, name="b").count == 3
    value = kind("a", 2, "n", ["t"])
    assert (value.name, value.count, value.note, value.tags, value.label) == ("a", 2, "n", ["t"], "a x2")
    assert value[0] == "a" and value[-1] == ["t"] and value[1:3] == (2, "n")
    name, count, note, tags = value
    assert (name, count, note, tags) == tuple(value)
    assert isinstance(value, tuple) and len(value) == 4


@BOTH
def test_bad_arguments_are_type_errors(kind):
    for call in (lambda: kind("a"), lambda: kind("a", 1, None, [], "extra"), lambda: kind("a", 1, size=2),
                 lambda: kind("a", 1, name="b")):
        with pytest.raises(TypeError):
            call()


@BOTH
def test_immutable_and_without_instance_dict(kind):
    value = kind("a", 1)
    with pytest.raises(AttributeError):
        value.name = "b"
    with pytest.raises(AttributeError):
        value.other = 1
    assert not hasattr(value, "__dict__")


@BOTH
def test_helpers_equality_hash_repr_copy_and_pickle(kind):
    value = kind("a", 1, "n", ("t",))
    assert kind._fields == ("name", "count", "note", "tags")
    assert kind._field_defaults == {"note": None, "tags": []}
    assert value._asdict() == {"name": "a", "count": 1, "note": "n", "tags": ("t",)}
    assert value._replace(count=5) == kind("a", 5, "n", ("t",)) and type(value._replace(count=5)) is kind
    with pytest.raises(ValueError):
        value._replace(size=1)
    assert kind._make(["b", 2, None, []]) == kind("b", 2)
    with pytest.raises(TypeError):
        kind._make(["b"])
    assert value == kind("a", 1, "n", ("t",)) and value != kind("a", 2, "n", ("t",))
    assert hash(value) == hash(("a", 1, "n", ("t",))) and kind("a", 1) < kind("b", 0)
    assert repr(value) == "%s(name='a', count=1, note='n', tags=('t',))" % kind.__name__
    assert copy.copy(value) == value and copy.deepcopy(value) == value and type(copy.deepcopy(value)) is kind
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(value, protocol)) == value


def test_a_subclass_keeps_the_fields_and_its_checks():
    value = Checked("a", 2, tags=("x",))
    assert value == ("a", 2, None, ["x"]) and value.tags == ["x"] and Checked._fields == AsRecord._fields
    assert repr(value) == "Checked(name='a', count=2, note=None, tags=['x'])"
    with pytest.raises(ValueError):
        Checked("a", -1)
    assert pickle.loads(pickle.dumps(value)) == value and type(copy.deepcopy(value)) is Checked
    assert not hasattr(value, "__dict__")
    assert AsRecord.__doc__ == "A record." and AsRecord.__module__ == __name__


def test_declarations_a_named_tuple_refuses_are_refused():
    with pytest.raises(TypeError, match="follows"):
        class DefaultFirst(Record):
            first: int = 0
            second: int

    with pytest.raises(TypeError, match="underscore"):
        class Private(Record):
            _hidden: int


def test_annotations_are_never_evaluated():
    class Forward(Record):
        later: NotDefinedAnywhere  # noqa: F821 (deferred by the module's __future__ import, never looked up)

    assert Forward(1).later == 1
