"""Refuse regular expressions that can take exponential time (catastrophic backtracking).

Python's ``re`` backtracks: ``(a+)+$`` on thirty ``a``s and a ``b`` runs for
minutes, and nothing can interrupt a match once it runs. A rule's ``pattern``
and a failure's ``regex`` come from files anyone can write, so they are checked
when loaded. A repeat of many (``*``, ``+``, ``{n,}``, ``{n,m}`` with m > 16) is
refused when one iteration can split the text in more than one way:

- its body holds another repeat of many (``(a+)+``, ``(\\w+\\s?)*``);
- its body has parts of variable length (``a{1,3}``, ``a?``, ``x|xy``) and no
  literal character that those parts cannot match, to mark where each
  iteration starts (``(?: sm_\\d+)*`` is fine: the space and ``sm_`` cannot be
  digits; ``(a|ab)*`` and ``(a{1,9})+`` are not).

The check is conservative: some safe patterns are refused, with the way to
write them instead; none that it accepts can backtrack exponentially.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

try:  # Python 3.11+
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_parse as _sre_parse  # type: ignore[no-redef]

SMALL = 16  # a repeat of at most this many is not "many"
_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
_HINT = ("it can take exponential time on some inputs; repeat a piece that starts with a fixed character instead "
         "(write (?:, a)+ or [ab]+, not (a+)+ or (a|ab)*)")

CharTest = Callable[[str], bool]


def problem(pattern: str) -> Optional[str]:
    """None when ``pattern`` cannot backtrack exponentially, else what is wrong and how to write it."""
    try:
        parsed = _sre_parse.parse(pattern)
    except Exception:  # re.error: the caller's own compile reports it
        return None
    return _check(list(parsed))


def _op(item) -> str:
    return str(item[0]).upper()


def _children(item) -> List[List[Any]]:
    """The sub-sequences of one parsed element."""
    name, value = _op(item), item[1]
    if name in _REPEATS:
        return [list(value[2])]
    if name == "SUBPATTERN":
        return [list(value[-1])]
    if name == "BRANCH":
        return [list(branch) for branch in value[1]]
    if name in ("ASSERT", "ASSERT_NOT"):
        return [list(value[1])]
    if name == "ATOMIC_GROUP":
        return [list(value)]
    if name == "GROUPREF_EXISTS":
        return [list(branch) for branch in value[1:] if branch is not None]
    return []


def _is_many(item) -> bool:
    if _op(item) not in _REPEATS:
        return False
    high = item[1][1]
    return high == _sre_parse.MAXREPEAT or high > SMALL


def _check(items: List[Any]) -> Optional[str]:
    for item in items:
        if _is_many(item):
            body = list(item[1][2])
            if _contains_many(body):
                return "a repeat inside a repeat (nested repetition): " + _HINT
            if _overlapping_alternatives(body):
                return "a repeat of alternatives that can start with the same character: " + _HINT
            variable = _variable_parts(body)
            if variable and not any(not any(test(char) for test in variable) for char in _fixed_chars(body)):
                return "a repeat whose body has parts of variable length and no fixed character to start on: " + _HINT
        for child in _children(item):
            found = _check(child)
            if found:
                return found
    return None


def _overlapping_alternatives(items: List[Any]) -> bool:
    """Alternatives (at any depth) not told apart by their first character: each iteration could take either."""
    for item in items:
        if _op(item) == "BRANCH":
            branches = [list(branch) for branch in item[1][1]]
            distinct = []
            for branch in branches:
                if branch not in distinct:
                    distinct.append(branch)
            firsts = [_first_literal(branch) for branch in distinct]
            if len(distinct) > 1 and (None in firsts or len(set(firsts)) < len(firsts)):
                return True
        if any(_overlapping_alternatives(child) for child in _children(item)):
            return True
    return False


def _first_literal(items: List[Any]) -> Optional[str]:
    if items and _op(items[0]) == "LITERAL":
        return chr(items[0][1])
    if items and _op(items[0]) == "SUBPATTERN":
        return _first_literal(list(items[0][1][-1]))
    return None


def _contains_many(items: List[Any]) -> bool:
    return any(_is_many(item) or any(_contains_many(child) for child in _children(item)) for item in items)


def _width(items: List[Any]):
    """The length every match of ``items`` has, or None when it varies."""
    low, high = _sre_parse.SubPattern(_sre_parse.State(), items).getwidth() if items else (0, 0)
    return low if low == high else None


def _fixed(items: List[Any]) -> bool:
    return _width(items) is not None


def _variable_parts(items: List[Any]) -> List[CharTest]:
    """What characters each part of variable length can match."""
    tests: List[CharTest] = []
    for item in items:
        name = _op(item)
        if name in _REPEATS:
            low, high, body = item[1]
            if low != high or not _fixed(list(body)):
                tests.append(_chars(list(body)))
                continue
        if name == "BRANCH" and len({_width(list(branch)) for branch in item[1][1]}) > 1:
            tests.append(_chars([item]))
            continue
        for child in _children(item):
            tests.extend(_variable_parts(child))
    return tests


def _fixed_chars(items: List[Any]) -> List[str]:
    """Literal characters every iteration must pass through (at the top of the body)."""
    chars = []
    for item in items:
        name = _op(item)
        if name == "LITERAL":
            chars.append(chr(item[1]))
        elif name == "SUBPATTERN" and _fixed(list(item[1][-1])):
            chars.extend(_fixed_chars(list(item[1][-1])))
    return chars


def _chars(items: List[Any]) -> CharTest:
    """A test for the characters a sequence can match (anything, when unsure)."""
    tests: List[CharTest] = []
    for item in items:
        name, value = _op(item), item[1]
        if name == "LITERAL":
            tests.append(lambda c, v=value: ord(c) == v)
        elif name == "NOT_LITERAL":
            tests.append(lambda c, v=value: ord(c) != v)
        elif name == "IN":
            tests.append(_class(value))
        elif name in ("AT",):
            continue
        elif _children(item):
            tests.extend(_chars(child) for child in _children(item))
        else:
            return lambda c: True  # ANY, references, anything not understood
    return lambda c: any(test(c) for test in tests)


_CATEGORIES = {
    "CATEGORY_DIGIT": str.isdigit, "CATEGORY_NOT_DIGIT": lambda c: not c.isdigit(),
    "CATEGORY_SPACE": str.isspace, "CATEGORY_NOT_SPACE": lambda c: not c.isspace(),
    "CATEGORY_WORD": lambda c: c.isalnum() or c == "_", "CATEGORY_NOT_WORD": lambda c: not (c.isalnum() or c == "_"),
}


def _class(items) -> CharTest:
    negate = False
    tests: List[CharTest] = []
    for op, value in items:
        name = str(op).upper()
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            tests.append(lambda c, v=value: ord(c) == v)
        elif name == "RANGE":
            tests.append(lambda c, v=value: v[0] <= ord(c) <= v[1])
        elif name == "CATEGORY":
            tests.append(_CATEGORIES.get(str(value).upper(), lambda c: True))
        else:
            return lambda c: True
    if negate:
        return lambda c: not any(test(c) for test in tests)
    return lambda c: any(test(c) for test in tests)
