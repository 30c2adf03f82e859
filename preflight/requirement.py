"""Version requirements of packages (``numpy<2.4``, ``setuptools>=40,<82``), checked without a start-up cost.

``packaging.specifiers`` is the reference, but importing it costs about 4 ms
(it builds large regular expressions), a twentieth of ``preflight check``'s
whole start-up. The default rules only use plain comparisons (``<``, ``<=``,
``>``, ``>=``, ``==``, ``!=`` against release versions), and those are checked
here on ``preflight.versions`` (which reads plain releases and their
post-releases itself, and hands other versions to ``packaging.version``),
following PEP 440 as ``SpecifierSet.contains(version, prereleases=True)`` does
(including that ``<V`` excludes V's own pre-releases and ``>V`` V's
post-releases). Anything else (``~=``, ``==2.*``, ``===``, local versions) is
handed to ``packaging.specifiers``. A property test compares the two.
"""

from __future__ import annotations

import re
from typing import Any, List, NamedTuple, Tuple

from preflight import versions

# Patterns as text, compiled (and cached by re) at their first use: compiling costs start-up time.
_CLAUSE = r"^\s*(<=|>=|<|>|==|!=)\s*(\d+(?:\.\d+)*)\s*$"


class Requirement(NamedTuple):
    """A parsed specifier: plain clauses checked here, or ``packaging``'s SpecifierSet for the rest."""

    text: str
    clauses: Tuple[Tuple[str, Any], ...]  # (operator, a version from preflight.versions.parse)
    full: object  # a SpecifierSet when the text is not plain clauses, else None

    def __str__(self) -> str:
        return str(self.full) if self.full is not None else ",".join("%s%s" % (op, v) for op, v in self.clauses)

    def contains(self, version: Any) -> bool:
        """Whether ``version`` (from ``preflight.versions.parse``, or a ``packaging.version.Version``) meets it."""
        if self.full is not None:
            if isinstance(version, versions.Release):
                from packaging.version import Version

                version = Version(str(version))
            return self.full.contains(version, prereleases=True)
        return all(_holds(op, version, bound) for op, bound in self.clauses)


def parse(text: str) -> Requirement:
    """Raises ValueError when ``text`` is not a version specifier."""
    clauses: List[Tuple[str, Any]] = []
    for part in text.split(","):
        match = re.match(_CLAUSE, part)
        if not match:
            return _full(text)
        clauses.append((match.group(1), versions.parse(match.group(2))))
    return Requirement(text, tuple(clauses), None)


def _full(text: str) -> Requirement:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return Requirement(text, (), SpecifierSet(text))
    except InvalidSpecifier:
        raise ValueError("%r is not a version specifier" % (text,))


def _holds(op: str, version: Any, bound: Any) -> bool:
    parse = versions.parse
    if op == "==":
        return parse(version.public) == bound  # a public bound ignores the candidate's local label
    if op == "!=":
        return not _holds("==", version, bound)
    if op == "<=":
        return parse(version.public) <= bound
    if op == ">=":
        return parse(version.public) >= bound
    if op == "<":
        # <V: below V, and not a pre-release of V itself (unless V is one).
        return version < bound and not (version.is_prerelease and not bound.is_prerelease
                                        and parse(version.base_version) == bound)
    # >V: above V, and not a post-release of V itself (unless V is one); a local version of V is not above it.
    if not version > bound:
        return False
    if version.is_postrelease and not bound.is_postrelease and parse(version.base_version) == bound:
        return False
    return not (version.local is not None and parse(version.base_version) == bound)


_NAMED = r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*?)\s*$"


def words(text: str) -> Tuple[str, str, str]:
    """``'opencv-python[ffmpeg]>=4'`` -> ("opencv-python", "[ffmpeg]", ">=4"): the name, its extras and its
    specifier, as written (empty when absent). ValueError when ``text`` does not start with a package name."""
    match = re.match(_NAMED, text)
    if not match:
        raise ValueError("%r is not a requirement" % (text,))
    name, extras, spec = match.groups()
    return name, extras or "", spec


def split(text: str) -> Tuple[str, Requirement]:
    """``'numpy<2.4'`` -> ("numpy", the parsed specifier; empty for none). ValueError when it is not one."""
    name, _, spec = words(text)
    return name, parse(spec) if spec else Requirement("", (), None)


__all__ = ["Requirement", "parse", "split", "words"]
