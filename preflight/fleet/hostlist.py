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


def lines(folded: str, width: int) -> List[str]:
    """``folded`` in lines of at most ``width`` characters where it can be, broken only between ClusterShell's
    contiguous ranges (``n[1-40]`` then ``n[44-60]`` on the next line); every line but the last ends in a comma,
    so the lines joined are the whole list and each line alone is a list. A list with names NodeSet cannot read
    (listed as they are by ``fold``) stays on one line: whole, never cut."""
    from ClusterShell.NodeSet import NodeSet, NodeSetException
    from ClusterShell.RangeSet import RangeSetException

    try:
        nodes = NodeSet(folded)
    except (NodeSetException, RangeSetException):
        return [folded]
    out: List[str] = []
    line = None
    for part in nodes.contiguous():
        candidate = part if line is None else line | part
        if line is not None and len(str(candidate)) + 1 > width:
            out.append("%s," % line)
            line = part
        else:
            line = candidate
    out.append(str(line) if line is not None else "")
    return out


def expand(folded: str) -> List[str]:
    """The names a folded list stands for (tests and readers of fleet's output)."""
    from ClusterShell.NodeSet import NodeSet

    return list(NodeSet(folded))
