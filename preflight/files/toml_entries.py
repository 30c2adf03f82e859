"""One way to read an entry of a TOML file: a rule file's [[rule]], [[fix]], [[failure]], [[clue]], [[workload]]
or [[gpu]], and the site configuration's [defaults] and [[match]] tables.

One unknown-key policy: a key the entry cannot have is an error that names it, the likely meant key and the keys
the entry may have (a typo must never pass silently: ``severty = "warning"`` would leave a rule at error, a
misspelt ``select`` would check everything). Every error names the file, the line, the entry and the problem.

TOML parsers give no line numbers: ``key_lines`` finds them by scanning the text, only when an error is raised or a
caller asks (reading a good file costs nothing more).
"""

from __future__ import annotations

import copy
import re
from typing import Any, Dict, Iterable, List, Optional, Tuple, Type, Union

from preflight.errors import PreflightError, close_matches

Table = Tuple[Union[str, int], ...]  # ("rule", 3, "examples", 0): the 4th [[rule]]'s first [[rule.examples]]

_NAME = r'(?:[A-Za-z0-9_-]+|"[^"\n]*"|\'[^\'\n]*\')'
_HEADER = r"^\s*(\[\[?)\s*(%s(?:\s*\.\s*%s)*)\s*\]\]?\s*(?:#.*)?$" % (_NAME, _NAME)
_KEY = r"^\s*(%s(?:\s*\.\s*%s)*)\s*=" % (_NAME, _NAME)


def _names(dotted: str) -> List[str]:
    return [part.strip("\"'") for part in re.findall(_NAME, dotted)]


def key_lines(text: str) -> Dict[Table, int]:
    """Where each table and key of a TOML text starts: table path -> line, table path + (key,) -> line.

    Arrays of tables are counted: the third ``[[match]]`` is ``("match", 2)``. Lines inside multi-line strings
    are passed over.
    """
    found: Dict[Table, int] = {}
    arrays: Dict[Table, int] = {}  # an array of tables -> how many seen so far
    current: Table = ()
    in_string: Optional[str] = None

    def resolve(names: List[str]) -> Table:
        path: Table = ()
        for name in names:
            path = path + (name,)
            if path in arrays:
                path = path + (arrays[path] - 1,)
        return path

    for number, line in enumerate(text.splitlines(), 1):
        if in_string is not None:
            if line.count(in_string) % 2:
                in_string = None
            continue
        header = re.match(_HEADER, line)
        if header:
            names = _names(header.group(2))
            if header.group(1) == "[[":
                parent = resolve(names[:-1]) + (names[-1],)
                arrays[parent] = arrays.get(parent, 0) + 1
                current = parent + (arrays[parent] - 1,)
            else:
                current = resolve(names)
            found.setdefault(current, number)
            continue
        key = re.match(_KEY, line)
        if key:
            found.setdefault(current + (_names(key.group(1))[0],), number)
        for quote in ('"""', "'''"):
            if line.count(quote) % 2:
                in_string = quote
                break
    return found


def _lines_of(path: str) -> Dict[Table, int]:
    """The lines of the file as it is now (read again: only an error asks, and the file may have changed)."""
    try:
        with open(path, "rb") as handle:
            return key_lines(handle.read(64 << 20).decode("utf-8", "replace"))
    except OSError:
        return {}


class Entry:
    """One table of a TOML file, read with types, the one unknown-key policy and errors that say where.

    ``table`` is where it is in the file (``("rule", 3)``); ``label`` names it in messages (``rule 'gpu.count'``,
    ``[[match]] 2``); ``lines``, when the caller has them, saves reading the file again for a line number.
    """

    error_class: Type[PreflightError] = PreflightError

    def __init__(self, raw: Dict[str, Any], path: str, table: Table = (), label: str = "",
                 lines: Optional[Dict[Table, int]] = None) -> None:
        self.raw = raw
        self.path = path
        self.table = table
        self.label = label
        self._lines = lines

    # --- where ----------------------------------------------------------------------------------

    def line(self, key: Optional[str] = None) -> Optional[int]:
        """The line of ``key`` in this entry, else of the entry itself; None when it cannot be found."""
        lines = self._lines if self._lines is not None else _lines_of(self.path)
        if key is not None and self.table + (key,) in lines:
            return lines[self.table + (key,)]
        return lines.get(self.table)

    def where(self, key: Optional[str] = None) -> str:
        """``file:LINE: label``, to begin a message."""
        line = self.line(key)
        place = "%s:%d" % (self.path, line) if line else self.path
        return "%s: %s" % (place, self.label) if self.label else place

    def error(self, problem: str, hint: str = "", key: Optional[str] = None) -> PreflightError:
        return self.error_class("%s: %s" % (self.where(key), problem), hint)

    # --- the one unknown-key policy --------------------------------------------------------------------

    def check_keys(self, known: Iterable[str], what: str = "", hint: str = "") -> None:
        """Every key must be one of ``known``: an unknown one is an error naming the key meant, where it is."""
        allowed = list(known)
        for key in self.raw:
            if key not in allowed:
                raise self.error("unknown key '%s'%s; %s may have: %s" % (
                    key, close_matches(key, allowed), what or "it", ", ".join(sorted(allowed))), hint, key)

    # --- typed values --------------------------------------------------------------------------

    def string(self, key: str, required: bool = False, default: str = "") -> str:
        if key not in self.raw:
            if required:
                raise self.error("missing required key '%s'" % key)
            return default
        value = self.raw[key]
        if not isinstance(value, str) or (required and not value.strip()):
            raise self.error("'%s' must be a non-empty string, found %r" % (key, value), key=key)
        return value

    def string_list(self, key: str) -> List[str]:
        value = self.raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.error("'%s' must be a list of strings, found %r" % (key, value), key=key)
        return value

    def strings(self, key: str) -> Tuple[str, ...]:
        """A string or a list of strings, stripped."""
        value = self.raw.get(key)
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise self.error("'%s' must be a string or a list of strings, found %r" % (key, value), key=key)
        return tuple(v.strip() for v in values)

    def integer(self, key: str, low: int, high: Optional[int] = None, default: Optional[int] = None,
                required: bool = True) -> Optional[int]:
        """A whole number from ``low`` (to ``high``); ``default`` when absent, or None when not ``required``."""
        if key not in self.raw:
            if default is not None or not required:
                return default
        value = self.raw.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
            span = "from %d to %d" % (low, high) if high is not None else "of at least %d" % low
            raise self.error("'%s' must be a whole number %s, found %r" % (key, span, value), key=key)
        return value

    def child(self, raw: Dict[str, Any], key: Union[str, Table]) -> "Entry":
        """A table inside this one (``[rule.warn_only]``, an inline fix), read the same way and named the same."""
        entry = copy.copy(self)
        entry.raw, entry.table = raw, self.table + ((key,) if isinstance(key, str) else tuple(key))
        return entry

    def tables(self, key: str) -> List["Entry"]:
        """The entries of an array of tables under this one (``[[rule.examples]]``)."""
        value = self.raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
            raise self.error("'%s' must be an array of tables: write [[%s]]" % (key, key), key=key)
        return [self.child(item, (key, index)) for index, item in enumerate(value)]
