"""Records: immutable tuples with named, typed fields, as ``typing.NamedTuple`` makes them, at a sixth of its cost.

typing.NamedTuple builds each class by type-checking every annotation and having ``collections.namedtuple``
compile a constructor from generated source: about 0.7 M instructions a class, and the thirty classes on
``preflight check``'s path cost 22 M instructions of its start-up (about 6%; scripts/bench_check.py
--instructions). A Record is made from the names its class body annotates and nothing else, at about 0.1 M:

    class Fix(Record):
        id: str
        steps: List[str] = []

behaves as the NamedTuple it replaces: a tuple (unpacking, indexing, ==, hash and order by value), fields by
name, defaults from the class body (a field without one may not follow a field with one), ``_fields``,
``_field_defaults``, ``_make``, ``_replace`` and ``_asdict``, a repr naming the fields, copy and pickle; a missing,
unknown or extra argument is a TypeError. Annotations are never evaluated, so a module defining records uses
``from __future__ import annotations`` (tests/test_architecture.py holds it to that: on Python 3.14 a class body
without it keeps no ``__annotations__``). A subclass of a record adds behaviour only (``CheckOptions`` checks its
values in ``__new__``), as with NamedTuple. Type checkers are shown typing.NamedTuple itself.
"""

from __future__ import annotations

from operator import itemgetter
from typing import TYPE_CHECKING, Any, Dict, Iterable, Tuple


class _RecordType(type):
    """Turns the annotated names of a class deriving from Record directly into its fields."""

    def __new__(mcs, name: str, bases: Tuple[type, ...], namespace: Dict[str, Any]):
        if not any(base.__dict__.get("_is_record_base") for base in bases):
            return super().__new__(mcs, name, bases, namespace)  # Record itself, or a subclass of a record
        if "__annotations__" not in namespace:
            raise TypeError("record %s declares no fields (annotated names; its module needs "
                            "'from __future__ import annotations')" % name)
        fields = tuple(namespace["__annotations__"])
        defaults: Dict[str, Any] = {}
        for position, field in enumerate(fields):
            if field.startswith("_"):
                raise TypeError("record %s: field names cannot start with an underscore: %s" % (name, field))
            if field in namespace:
                defaults[field] = namespace[field]
            elif defaults:
                raise TypeError("record %s: field %s without a default follows field(s) with one: %s"
                                % (name, field, ", ".join(defaults)))
            namespace[field] = property(itemgetter(position))
        namespace.update(__slots__=(), _fields=fields, _field_defaults=defaults, __match_args__=fields)
        return super().__new__(mcs, name, bases, namespace)


class _Record(tuple, metaclass=_RecordType):
    __slots__ = ()
    _is_record_base = True
    _fields: Tuple[str, ...] = ()
    _field_defaults: Dict[str, Any] = {}

    def __new__(cls, *args: Any, **kwargs: Any):
        if kwargs or len(args) != len(cls._fields):
            args = cls._arguments(args, kwargs)
        return tuple.__new__(cls, args)

    @classmethod
    def _arguments(cls, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[Any, ...]:
        fields = cls._fields
        if len(args) > len(fields):
            raise TypeError("%s() takes %d positional arguments but %d were given" % (cls.__name__, len(fields),
                                                                                    len(args)))
        for field in fields[:len(args)]:
            if field in kwargs:
                raise TypeError("%s() got multiple values for argument %r" % (cls.__name__, field))
        values = list(args)
        missing = []
        for field in fields[len(args):]:
            if field in kwargs:
                values.append(kwargs.pop(field))
            elif field in cls._field_defaults:
                values.append(cls._field_defaults[field])
            else:
                missing.append(field)
        if kwargs:
            raise TypeError("%s() got an unexpected keyword argument %r" % (cls.__name__, next(iter(kwargs))))
        if missing:
            raise TypeError("%s() missing %d required argument(s): %s" % (cls.__name__, len(missing),
                                                                          ", ".join(map(repr, missing))))
        return tuple(values)

    @classmethod
    def _make(cls, iterable: Iterable[Any]):
        values = tuple(iterable)
        if len(values) != len(cls._fields):
            raise TypeError("expected %d arguments, got %d" % (len(cls._fields), len(values)))
        return tuple.__new__(cls, values)

    def _replace(self, **changes: Any):
        """A copy with some fields changed (not checked again: a subclass that checks its values offers its own)."""
        values = self._make([changes.pop(field, value) for field, value in zip(self._fields, self)])
        if changes:
            raise ValueError("got unexpected field names: %r" % list(changes))
        return values

    def _asdict(self) -> Dict[str, Any]:
        return dict(zip(self._fields, self))

    def __repr__(self) -> str:
        return "%s(%s)" % (type(self).__name__,
                           ", ".join("%s=%r" % pair for pair in zip(self._fields, self)))

    def __getnewargs__(self) -> Tuple[Any, ...]:
        return tuple(self)


if TYPE_CHECKING:
    from typing import NamedTuple as Record  # what a record is, as type checkers know it
else:
    Record = _Record
