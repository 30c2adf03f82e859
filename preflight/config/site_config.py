"""Site configuration: one TOML file that says what a site's nodes should look like.

Found by ``commands.site.locate`` (``--config FILE``, else ``$PREFLIGHT_CONFIG``,
else ``/etc/preflight/config.toml`` when it exists), and imported only then:
without a file this module costs a run nothing. ``[defaults]`` applies
everywhere; each ``[[match]]`` applies where all the selectors it gives match
(``hosts``: globs on the short host name, ``gpus``: globs on a GPU's product
name, ``partitions`` / ``features``: Slurm's, where known). Later matches
override earlier ones and the command line overrides the file. Each setting
remembers where it came from (``preflight config show``).

A bad file is the user's error (exit 2) naming the file, the line and the key:
a site's mistake must never turn into a wrong verdict.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from preflight.config.settings import SETTINGS as DECLARED
from preflight.errors import PreflightError
from preflight.files.toml_entries import Entry

CONFIG_LIMIT = 1 << 20

# What a section may set: the options of check, exec and slurm that belong to a site, each declared once.
SETTINGS = tuple(DECLARED)
SELECTORS = ("hosts", "gpus", "partitions", "features")


class ConfigError(PreflightError):
    """The site configuration cannot be read or says something preflight cannot use (exit 2)."""


class ConfigErrors(ConfigError):
    """Every problem found in one configuration file, each with its place (file:LINE), in file order."""

    def __init__(self, errors: Sequence[ConfigError]) -> None:
        self.errors = list(errors)
        super().__init__("%d problems:\n%s" % (len(self.errors), "\n".join(str(error) for error in self.errors)))


def combined(errors: Sequence[ConfigError]) -> Optional[ConfigError]:
    """One error for several: the error itself when there is one, None when there is none."""
    if not errors:
        return None
    return errors[0] if len(errors) == 1 else ConfigErrors(errors)


def each(error: ConfigError) -> List[ConfigError]:
    return list(error.errors) if isinstance(error, ConfigErrors) else [error]


class UnsafeConfig(ConfigError):
    """Users other than the file's owner could change the site configuration (what a node is admitted on)."""


def permission_problem(path: str) -> Optional[str]:
    """Why someone other than root or this user could change the file at ``path``, or None when no one can.

    Like sshd with its configuration: a world-writable file, a file in a world-writable folder that is not sticky
    (anyone could replace it), a file someone else owns in a sticky one (/tmp), or a link someone else planted.
    """
    from preflight.files import paths

    try:
        resolved = paths.resolve(path, "configuration file %s" % path)
    except paths.UnsafeLink as exc:
        return exc.message.split(": ", 1)[-1].replace("; nothing was written", "")
    except PreflightError:
        return None  # not there or not a file: reading it says so
    real = os.path.join(resolved.folder, resolved.name)
    try:
        info, folder = os.stat(real), os.stat(resolved.folder)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None  # a device or a pipe is no configuration file: reading it says so (and nothing here changes it)
    if info.st_mode & stat.S_IWOTH:
        return "it is world-writable (mode %o)" % stat.S_IMODE(info.st_mode)
    if folder.st_mode & stat.S_IWOTH and not folder.st_mode & stat.S_ISVTX:
        return "its folder %s is world-writable: anyone can replace it" % resolved.folder
    if paths.shared_folder(folder) and info.st_uid not in paths.trusted_owners():
        return "it lies in the shared folder %s and belongs to user %d" % (resolved.folder, info.st_uid)
    return None


class Origin(NamedTuple):
    """Where a setting came from: ``built-in default``, ``command line``, or a place in the file."""

    text: str  # "config.toml:9 [[match]] 1", "built-in default"
    location: str = ""  # "config.toml:9: [[match]] 1", to begin an error message
    short: str = ""  # "config.toml:9", where space is short (a drain reason)


DEFAULT = Origin("built-in default")
COMMAND_LINE = Origin("command line")


class Section(NamedTuple):
    """``[defaults]`` or one ``[[match]]``: its settings, its selectors, and where it is in the file."""

    name: str  # "[defaults]" or "[[match]] 2"
    line: Optional[int]
    settings: Dict[str, Any]
    selectors: Dict[str, Tuple[str, ...]]
    lines: Dict[str, Optional[int]]  # key -> its line

    def origin(self, path: str, key: str) -> Origin:
        line = self.lines.get(key) or self.line
        place = "%s%s" % (path, ":%d" % line if line else "")
        return Origin("%s %s" % (place, self.name), "%s: %s: %s" % (place, self.name, key),
                      "%s%s" % (os.path.basename(path), ":%d" % line if line else ""))


class Config(NamedTuple):
    path: Optional[str]
    sections: Tuple[Section, ...]

    def matching(self, target: "Target") -> List[Tuple[Section, str]]:
        """Every section with why it applies or not, in the order they apply: (section, explanation)."""
        return [(section, explain(section, target)) for section in self.sections]


class Target(NamedTuple):
    """What a [[match]] is matched against; None: not known here (a selector on it cannot match)."""

    host: str
    gpus: Optional[Tuple[str, ...]] = None
    partitions: Optional[Tuple[str, ...]] = None
    features: Optional[Tuple[str, ...]] = None


def load(path: Optional[str]) -> Config:
    if path is None:
        return Config(None, ())
    from preflight.files import input_files

    def error(message: str, hint: str = "") -> ConfigError:
        return ConfigError(message, hint or "see docs/configuration.md: Site configuration")

    raw = input_files.read_bytes(path, "configuration file %s" % path, error, limit=CONFIG_LIMIT)
    try:
        data = input_files.parse_toml(raw.decode("utf-8"), "a configuration file")
    except UnicodeDecodeError as exc:
        raise error("%s: not UTF-8 text (%s)" % (path, exc))
    except ValueError as exc:
        raise error("%s: %s" % (path, exc))
    return _build(path, data, raw.decode("utf-8", "replace"))


class _ConfigEntry(Entry):
    """A table of the configuration, whose messages name the key as well: ``file:LINE: [defaults]: key: problem``."""

    error_class = ConfigError

    def error(self, problem: str, hint: str = "", key: Optional[str] = None) -> PreflightError:
        where = "%s: %s" % (self.where(key), key) if key else self.where()
        return ConfigError("%s: %s" % (where, problem), hint or "see docs/configuration.md: Site configuration")


def _build(path: str, data: Dict[str, Any], text: str) -> Config:
    from preflight.files.toml_entries import key_lines

    lines = key_lines(text)
    _ConfigEntry(data, path, (), "top level", lines).check_keys(
        ("defaults", "match"), "a configuration", "a configuration has [defaults] and [[match]] tables")
    if not isinstance(data.get("defaults", {}), dict):
        raise _ConfigEntry(data, path, (), "top level", lines).error("must be a table: [defaults]", key="defaults")
    matches = data.get("match", [])
    if not isinstance(matches, list) or not all(isinstance(m, dict) for m in matches):
        raise _ConfigEntry(data, path, (), "top level", lines).error("must be tables: [[match]]", key="match")
    # Every section is checked, whether it matches this host or not: a typo in a section for other nodes must be
    # found where the file is written, not on the node it breaks.
    entries = [(_ConfigEntry(data.get("defaults", {}), path, ("defaults",), "[defaults]", lines), False)]
    entries += [(_ConfigEntry(table, path, ("match", number - 1), "[[match]] %d" % number, lines), True)
                for number, table in enumerate(matches, 1)]
    sections, errors = [], []
    for entry, selectors_allowed in entries:
        try:
            section = _section(entry, selectors_allowed)
        except ConfigError as exc:
            errors.append(exc)
            continue
        sections.append(section)
        errors += _missing_rule_paths(path, section)
    error = combined(errors)
    if error is not None:
        raise error
    return Config(path, tuple(sections))


def rule_path(config_path: str, path: str) -> str:
    """A ``rules`` path as given, relative to the configuration file's folder."""
    return os.path.join(os.path.dirname(os.path.abspath(config_path)), path)


def _missing_rule_paths(config_path: str, section: Section) -> List[ConfigError]:
    origin = section.origin(config_path, "rules")
    return [ConfigError("%s: %s: no such file or folder" % (origin.location, path),
                        "a relative path is relative to the configuration file's folder")
            for path in section.settings.get("rules", ()) if not os.path.exists(rule_path(config_path, path))]


def _section(entry: _ConfigEntry, selectors_allowed: bool) -> Section:
    for key in entry.raw:
        if key in SELECTORS and not selectors_allowed:
            raise entry.error("unknown key '%s' (selectors belong in a [[match]]); a [defaults] may set: %s"
                              % (key, ", ".join(SETTINGS)), key=key)
    entry.check_keys(SETTINGS + (SELECTORS if selectors_allowed else ()), "a %s" % entry.label.split(" ")[0])
    settings: Dict[str, Any] = {}
    selectors: Dict[str, Tuple[str, ...]] = {}
    for key, value in entry.raw.items():
        if key in SELECTORS:
            selectors[key] = _globs(value, lambda problem: entry.error(problem, key=key))
            continue
        try:
            settings[key] = DECLARED[key].parse(value)
        except ValueError as exc:
            raise entry.error("%s %s" % (key, exc), key=key)
    if selectors_allowed and not selectors:
        raise entry.error("a [[match]] needs at least one selector (%s); settings for every node go in "
                          "[defaults]" % ", ".join(SELECTORS))
    return Section(entry.label, entry.line(), settings, selectors, {key: entry.line(key) for key in entry.raw})


_GLOB_CHARACTERS = r"^[^\s\x00-\x1f]+$"


def _globs(value: Any, fail) -> Tuple[str, ...]:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise fail("must be a string or a list of strings, found %r" % (value,))
    globs = tuple(v.strip() for v in values)
    if not globs:
        raise fail("is empty: give at least one glob")
    for glob in globs:
        if not glob or not re.match(_GLOB_CHARACTERS, glob.replace(" ", "x")):
            raise fail("%r is not a glob (empty, or a control character)" % glob)
        if glob.count("[") != glob.count("]") or re.search(r"\[[^\]]*\[", glob) or "[]" in glob:
            raise fail("%r is not a valid glob: unbalanced or empty [ ]" % glob)
    return globs


def _matches(globs: Sequence[str], values: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(value.lower(), glob.lower()) for glob in globs for value in values)


def explain(section: Section, target: Target) -> str:
    """"" when the section applies; else why not."""
    for selector, globs in section.selectors.items():
        if selector == "hosts":
            known: Optional[Sequence[str]] = (target.host,)
        else:
            known = getattr(target, selector)
        shown = " ".join(globs)
        if known is None:
            return "%s = %s: not known here" % (selector, shown)
        if not _matches(globs, known):
            return "%s = %s matches none of: %s" % (selector, shown, ", ".join(known) or "(none)")
    return ""


def needs_gpus(config: Config) -> bool:
    """Whether matching needs this machine's GPU names (an NVML probe before the rules are chosen)."""
    return any("gpus" in section.selectors for section in config.sections)


class Effective(NamedTuple):
    """The settings in effect, each with its origin; ``set`` and ``rules`` keep one origin per item."""

    values: Dict[str, Any]
    origins: Dict[str, Origin]
    set_items: List[Tuple[str, Origin]]
    rules: List[Tuple[str, Origin]]
    applied: List[Tuple[Section, str]]


def effective(config: Config, target: Target) -> Effective:
    """Merge [defaults] and every [[match]] that applies, in file order (later wins; ``set`` per RULE.KEY,
    ``rules`` accumulate); relative rule paths are relative to the file's folder."""
    values: Dict[str, Any] = {}
    origins: Dict[str, Origin] = {}
    set_items: Dict[str, Tuple[str, Origin]] = {}
    rules: List[Tuple[str, Origin]] = []
    applied = config.matching(target)
    for section, why_not in applied:
        if why_not:
            continue
        for key, value in section.settings.items():
            origin = section.origin(config.path or "", key)
            if key == "set":
                for item in value:
                    set_items[item.partition("=")[0].strip()] = (item, origin)
            elif key == "rules":
                rules.extend((rule_path(config.path or "", path), origin) for path in value)
            else:
                values[key] = value
                origins[key] = origin
    return Effective(values, origins, list(set_items.values()), rules, applied)


def json_schema() -> Dict[str, Any]:
    """The configuration file as JSON Schema (its TOML read as JSON): what ``preflight config validate`` checks
    structurally; rule ids and their settings are checked against the rules, which a schema cannot know."""
    from preflight.config.settings import string_or_strings

    settings = {key: dict(setting.schema() if setting.schema else string_or_strings(), description=setting.help)
                for key, setting in DECLARED.items()}
    selectors = {key: dict(string_or_strings(), description=description) for key, description in (
        ("hosts", "globs on the short host name"), ("gpus", "globs on a GPU's product name"),
        ("partitions", "globs on the node's Slurm partitions"), ("features", "globs on the node's Slurm features"))}
    match = {"type": "object", "properties": dict(settings, **selectors), "additionalProperties": False,
             "anyOf": [{"required": [key]} for key in SELECTORS]}
    return {"type": "object", "additionalProperties": False, "properties": {
        "defaults": {"type": "object", "properties": settings, "additionalProperties": False},
        "match": {"type": "array", "items": match}}}
