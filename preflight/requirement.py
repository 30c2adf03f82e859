"""Version requirements of packages (``numpy<2.4``, ``setuptools>=40,<82``), checked without a start-up cost.

``packaging.specifiers`` is the reference, but importing it costs about 4 ms
(it builds large regular expressions), a twentieth of ``preflight check``'s
whole start-up. The default rules only use plain comparisons (``<``, ``<=``,
``>``, ``>=``, ``==``, ``!=`` against release versions), and those are checked
here with ``packaging.version.Version``, which is imported anyway, following
PEP 440 as ``SpecifierSet.contains(version, prereleases=True)`` does
(including that ``<V`` excludes V's own pre-releases and ``>V`` V's
post-releases). Anything else (``~=``, ``==2.*``, ``===``, local versions) is
handed to ``packaging.specifiers``. A property test compares the two.
"""

import re
from typing import List, NamedTuple, Tuple

from packaging.version import InvalidVersion, Version

# Patterns as text, compiled (and cached by re) at their first use: compiling costs start-up time.
_CLAUSE = r"^\s*(<=|>=|<|>|==|!=)\s*(\d+(?:\.\d+)*)\s*$"


class Requirement(NamedTuple):
    """A parsed specifier: plain clauses checked here, or ``packaging``'s SpecifierSet for the rest."""

    text: str
    clauses: Tuple[Tuple[str, Version], ...]
    full: object  # a SpecifierSet when the text is not plain clauses, else None

    def __str__(self) -> str:
        return str(self.full) if self.full is not None else ",".join("%s%s" % (op, v) for op, v in self.clauses)

    def contains(self, version: Version) -> bool:
        if self.full is not None:
            return self.full.contains(version, prereleases=True)
        return all(_holds(op, version, bound) for op, bound in self.clauses)


def parse(text: str) -> Requirement:
    """Raises ValueError when ``text`` is not a version specifier."""
    clauses: List[Tuple[str, Version]] = []
    for part in text.split(","):
        match = re.match(_CLAUSE, part)
        if not match:
            return _full(text)
        clauses.append((match.group(1), Version(match.group(2))))
    return Requirement(text, tuple(clauses), None)


def _full(text: str) -> Requirement:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return Requirement(text, (), SpecifierSet(text))
    except InvalidSpecifier:
        raise ValueError("%r is not a version specifier" % (text,))


def _holds(op: str, version: Version, bound: Version) -> bool:
    if op == "==":
        return Version(version.public) == bound  # a public bound ignores the candidate's local label
    if op == "!=":
        return not _holds("==", version, bound)
    if op == "<=":
        return Version(version.public) <= bound
    if op == ">=":
        return Version(version.public) >= bound
    if op == "<":
        # <V: below V, and not a pre-release of V itself (unless V is one).
        return version < bound and not (version.is_prerelease and not bound.is_prerelease
                                        and Version(version.base_version) == bound)
    # >V: above V, and not a post-release of V itself (unless V is one); a local version of V is not above it.
    if not version > bound:
        return False
    if version.is_postrelease and not bound.is_postrelease and Version(version.base_version) == bound:
        return False
    return not (version.local is not None and Version(version.base_version) == bound)


_NAMED = r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*?)\s*$"


def split(text: str) -> Tuple[str, Requirement]:
    """``'numpy<2.4'`` -> ("numpy", the parsed specifier; empty for none). ValueError when it is not one."""
    match = re.match(_NAMED, text)
    if not match:
        raise ValueError("%r is not a requirement" % (text,))
    name, _, spec = match.groups()
    return name, parse(spec) if spec else Requirement("", (), None)


__all__ = ["InvalidVersion", "Requirement", "parse", "split"]
