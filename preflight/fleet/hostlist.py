"""Node lists in Slurm's compressed form (``gpu-b[001-040,044]``), what admins paste into scontrol and pdsh.

Folded by ClusterShell's NodeSet (the library behind clush and nodeset(1)), so the form is the one those
tools and Slurm read back. Only plain host names are folded; a name with other characters (a file's name,
``gpu01 #2`` for a second file of one host) is listed as it is, after the folded ones. A list is never cut:
where it is too long for one line it is broken between ranges, never inside a name or a bracket, so every
line is a node list of its own and the lines joined are the whole list.
"""

from __future__ import annotations

import re
from typing import Iterable, List

_PLAIN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


def fold(names: Iterable[str]) -> str:
    """The names as one comma-separated list with numbered runs folded, every name kept."""
    names = list(names)
    plain = [name for name in names if re.match(_PLAIN, name)]
    others = [name for name in names if not re.match(_PLAIN, name)]
    parts: List[str] = []
    if plain:
        from ClusterShell.NodeSet import NodeSet, NodeSetException
        from ClusterShell.RangeSet import RangeSetException

        try:
            parts.append(str(NodeSet.fromlist(plain)))
        except (NodeSetException, RangeSetException):  # names it cannot fold are listed, never lost
            others = plain + others
    return ",".join(parts + others)


def pieces(folded: str) -> List[str]:
    """A folded list's top-level elements: ``gpu-a[01-40,44],gpu-b7`` -> ``gpu-a[01-40,44]``, ``gpu-b7``."""
    found, depth, start = [], 0, 0
    for index, char in enumerate(folded):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth == 0:
            found.append(folded[start:index])
            start = index + 1
    if folded[start:]:
        found.append(folded[start:])
    return found


def _split_ranges(piece: str, width: int) -> List[str]:
    """One element too long for a line, as several of the same prefix: ``n[1,3,5-9]`` -> ``n[1,3]``, ``n[5-9]``
    (a list of its own each: the union is the element). An element with more than one bracket stays whole."""
    found = re.match(r"^([^\[\]]*)\[([^\[\]]*)\]([^\[\]]*)$", piece)
    if not found or len(piece) <= width:
        return [piece]
    prefix, ranges, suffix = found.groups()
    room = max(1, width - len(prefix) - len(suffix) - 3)
    out, current = [], ""
    for item in ranges.split(","):
        candidate = item if not current else current + "," + item
        if current and len(candidate) > room:
            out.append(current)
            current = item
        else:
            current = candidate
    out.append(current)
    return ["%s[%s]%s" % (prefix, part, suffix) if ("," in part or "-" in part) else prefix + part + suffix
            for part in out]


def lines(folded: str, width: int) -> List[str]:
    """``folded`` in lines of at most ``width`` characters where it can be, broken only between elements and
    between the ranges of one element's brackets (``n[1-40]`` then ``n[44-60]`` on the next line); every line
    but the last ends in a comma, so the lines joined are the whole list and each line alone is a list."""
    out: List[str] = []
    line = ""
    for piece in (part for element in pieces(folded) for part in _split_ranges(element, width)):
        candidate = piece if not line else line + "," + piece
        if line and len(candidate) + 1 > width:
            out.append(line + ",")
            line = piece
        else:
            line = candidate
    if line or not out:
        out.append(line)
    return out


def expand(folded: str) -> List[str]:
    """The names a folded list stands for (tests and readers of fleet's output)."""
    from ClusterShell.NodeSet import NodeSet

    return list(NodeSet(folded))
