"""The comparisons a rule can make: a small, fixed, typed vocabulary.

Each comparison declares the fact kinds it applies to and the parameters it
takes, parses those parameters (so a bad threshold fails when the rule file is
loaded, not during a check), evaluates an observed value to pass / warn /
fail, and describes what it expects in words.

Two-tier thresholds: below ``min`` fails, below ``recommended`` warns.
"""

from __future__ import annotations

import math
import re
import shlex
from types import MappingProxyType
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Tuple

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from preflight import units
from preflight.facts.readers import ENVIRONMENT
from preflight.knowledge import distributions, package_index, pip_commands

PASS, WARN, FAIL, ERROR = "pass", "warn", "fail", "error"
MAX_PATTERN_TEXT = 4096  # characters of a fact a 'pattern' rule looks at


class Verdict(NamedTuple):
    """A comparison's answer: the status, the observed value in words, and values for messages and fixes."""

    status: str
    observed: str
    details: Mapping[str, Any] = MappingProxyType({})


class Written:
    """A parameter as parsed, remembering how it was written: thresholds are shown as the user wrote them.

    Ordered by the parsed value (``Written(12 * 10**9, "12GB") < Written(16 * 10**9, "16GB")``).
    """

    __slots__ = ("value", "text")

    def __init__(self, value: Any, text: str) -> None:
        self.value = value
        self.text = text

    def __lt__(self, other: "Written") -> bool:
        return self.value < other.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Written) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return "Written(%r, %r)" % (self.value, self.text)


def _shell_quote(text: str) -> str:
    return shlex.quote(text)


def written(parse: Callable[[Any], Any]) -> Callable[[Any], Written]:
    """A parser whose result remembers the text it came from."""
    return lambda raw: Written(parse(raw), value_text(raw))


def text_of(parsed: Any) -> str:
    """How a parsed parameter reads in messages: as it was written."""
    if isinstance(parsed, Written):
        return parsed.text
    if isinstance(parsed, dict):
        return ", ".join(sorted(parsed))
    return value_text(parsed)


class Param(NamedTuple):
    parse: Callable[[Any], Any]
    description: str


# --- parameter parsers ------------------------------------------------------------

def _version(raw: Any):
    from preflight.units import quoted

    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        raise ValueError("expected a version such as 535 or 12.4, got %s" % quoted(raw))
    if len(str(raw)) > 64:
        raise ValueError("%s is too long to be a version" % quoted(raw))
    try:
        return Version(str(raw).strip())
    except InvalidVersion:
        raise ValueError("%s is not a version" % quoted(raw))


def _number(raw: Any) -> float:
    from preflight.units import quoted

    if isinstance(raw, bool):
        raise ValueError("expected a number, got %s" % quoted(raw))
    try:
        number = float(raw)
    except (TypeError, ValueError, OverflowError):
        raise ValueError("expected a number, got %s" % quoted(raw))
    if math.isnan(number) or math.isinf(number):
        raise ValueError("expected a finite number, got %s" % quoted(raw))
    return number


def _bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    raise ValueError("expected true or false, got %r" % (raw,))


def _strings(raw: Any) -> List[str]:
    if isinstance(raw, str):
        return [part.strip() for part in raw.split(",") if part.strip()]
    if isinstance(raw, list) and all(isinstance(item, (str, int, float)) and not isinstance(item, bool) for item in raw):
        return [str(item) for item in raw]
    raise ValueError("expected a list of strings, got %r" % (raw,))


def _regex(raw: Any) -> "re.Pattern[str]":
    if not isinstance(raw, str):
        raise ValueError("expected a regular expression string, got %r" % (raw,))
    try:
        compiled = re.compile(raw)
    except (re.error, RecursionError, OverflowError) as exc:
        raise ValueError("%r is not a valid regular expression: %s" % (raw, exc))
    from preflight.engine.regex_safety import problem

    unsafe = problem(raw)
    if unsafe:
        raise ValueError("%r: %s" % (raw, unsafe))
    return compiled


def value_text(raw: Any) -> str:
    if isinstance(raw, list):
        return ", ".join(str(item) for item in raw)
    if isinstance(raw, bool):
        return "true" if raw else "false"
    return str(raw)


# --- comparisons ------------------------------------------------------------------

class Comparison:
    name = ""
    kinds: Tuple[str, ...] = ()
    params: Dict[str, Param] = {}
    required_params: Tuple[str, ...] = ()
    details: Tuple[str, ...] = ()
    summary = ""

    def parse_param(self, key: str, raw: Any) -> Any:
        return self.params[key].parse(raw)

    def check(self, params: Mapping[str, Any], enum_values: Tuple[str, ...]) -> None:
        """Cross-checks of a rule's parameters; raises ValueError."""
        missing = [key for key in self.required_params if key not in params]
        if missing:
            raise ValueError("comparison '%s' needs %s" % (self.name, " and ".join(repr(m) for m in missing)))

    def prepare(self, params: Dict[str, Any]) -> Dict[str, Any]:
        """Values derived from the parameters once, when a rule is resolved (parsed package requirements)."""
        return params

    def evaluate(self, value: Any, params: Mapping[str, Any], labels: Mapping[str, str]) -> Verdict:
        raise NotImplementedError

    def expected(self, params: Mapping[str, Any]) -> str:
        raise NotImplementedError


def _threshold_params(parse: Callable[[Any], Any]) -> Dict[str, Param]:
    return {
        "min": Param(written(parse), "below this fails"),
        "recommended": Param(written(parse), "below this warns"),
        "max": Param(written(parse), "above this fails"),
    }


class _Threshold(Comparison):
    """min / recommended / max on an ordered value."""

    details = ("min", "recommended", "max")

    def convert(self, value: Any) -> Any:
        raise NotImplementedError

    def show(self, value: Any, params: Mapping[str, Any]) -> str:
        return str(value)

    def check(self, params, enum_values) -> None:
        if not any(key in params for key in ("min", "recommended", "max")):
            raise ValueError("comparison '%s' needs at least one of 'min', 'recommended', 'max'" % self.name)
        if "min" in params and "recommended" in params and params["recommended"] < params["min"]:
            raise ValueError("'recommended' (%s) is below 'min' (%s)" % (params["recommended"].text, params["min"].text))

    def evaluate(self, value, params, labels) -> Verdict:
        if value is None:
            return Verdict(FAIL, "not available")
        try:
            observed = self.convert(value)
        except ValueError as exc:
            return Verdict(ERROR, str(value), {"problem": str(exc)})
        shown = self.show(value, params)
        if "min" in params and observed < params["min"].value:
            return Verdict(FAIL, shown)
        if "max" in params and observed > params["max"].value:
            return Verdict(FAIL, shown)
        if "recommended" in params and observed < params["recommended"].value:
            return Verdict(WARN, shown)
        return Verdict(PASS, shown)

    def expected(self, params) -> str:
        hard = []
        if "min" in params:
            hard.append(">= %s" % params["min"].text)
        if "max" in params:
            hard.append("<= %s" % params["max"].text)
        if "recommended" in params:
            hard.append("recommended >= %s" % params["recommended"].text)
        return ", ".join(hard)


class VersionComparison(_Threshold):
    name = "version"
    kinds = ("version",)
    summary = "compares versions (PEP 440 ordering: 535.104.05 > 535 > 530.30.02)"
    params = _threshold_params(_version)

    def convert(self, value):
        return _version(value)


class NumberComparison(_Threshold):
    name = "number"
    kinds = ("number",)
    summary = "compares numbers"
    params = _threshold_params(_number)

    def convert(self, value):
        return _number(value)

    def show(self, value, params):
        number = _number(value)
        return str(int(number)) if number == int(number) else str(number)


class BytesComparison(_Threshold):
    name = "bytes"
    kinds = ("bytes",)
    summary = "compares sizes; thresholds take units: 12GB = 12*10^9 bytes, 16GiB = 16*2^30 bytes"
    params = _threshold_params(units.parse_size_threshold)

    def convert(self, value):
        return units.parse_bytes(value)

    def show(self, value, params):
        binary = any(units.uses_binary_units(text_of(p)) for p in params.values())
        if binary:
            return units.format_bytes(value, binary=True)
        return "%s (%s)" % (units.format_bytes(value, binary=False), units.format_bytes(value, binary=True))


class BoolComparison(Comparison):
    name = "bool"
    kinds = ("bool",)
    summary = "a yes/no fact must equal 'expected'"
    params = {"expected": Param(_bool, "the value that passes")}
    required_params = ("expected",)

    def evaluate(self, value, params, labels):
        if value is None:
            return Verdict(FAIL, "not available")
        shown = labels.get(value_text(bool(value)), value_text(bool(value)))
        return Verdict(PASS if bool(value) == params["expected"] else FAIL, shown)

    def expected(self, params):
        return value_text(params["expected"])


class InComparison(Comparison):
    name = "in"
    kinds = ("enum", "string", "version", "number")
    summary = ("the value must be one of 'expected' (one of 'tolerated' only warns); without 'expected', any "
               "value passes but one of 'discouraged', which warns")
    params = {
        "expected": Param(_strings, "values that pass (others fail)"),
        "tolerated": Param(_strings, "values that warn"),
        "discouraged": Param(_strings, "values that warn, when no 'expected' is given"),
    }
    details = ("expected_first",)

    def check(self, params, enum_values):
        super().check(params, enum_values)
        if not params.get("expected") and not params.get("discouraged"):
            raise ValueError("comparison 'in' needs 'expected' (or, to allow any value but a few, 'discouraged')")
        if enum_values:
            for key in ("expected", "tolerated", "discouraged"):
                unknown = [v for v in params.get(key, []) if v not in enum_values]
                if unknown:
                    raise ValueError("'%s' lists %s, which this fact never takes (it takes: %s)"
                                     % (key, ", ".join(repr(u) for u in unknown), ", ".join(enum_values)))

    def evaluate(self, value, params, labels):
        text = value_text(value) if value is not None else "none"
        shown = labels.get(text, text)
        expected = params.get("expected") or []
        details = {"expected_first": expected[0] if expected else None}  # None: a fix leaves that command out
        if text in expected:
            return Verdict(PASS, shown, details)
        if text in params.get("tolerated", []):
            return Verdict(WARN, shown, details)
        if not expected:
            return Verdict(WARN if text in params.get("discouraged", []) else PASS, shown, details)
        return Verdict(FAIL, shown, details)

    def expected(self, params):
        values = params.get("expected") or []
        if not values:
            return "any but %s" % ", ".join(params.get("discouraged", []))
        return values[0] if len(values) == 1 else "one of: %s" % ", ".join(values)


class PatternComparison(Comparison):
    name = "pattern"
    kinds = ("string", "enum", "version")
    summary = "the value must match the regular expression 'pattern' (re.search)"
    params = {"pattern": Param(written(_regex), "regular expression the value must match")}
    required_params = ("pattern",)

    def evaluate(self, value, params, labels):
        if value is None:
            return Verdict(FAIL, "not available")
        text = value_text(value)
        # Facts are short; a long one (a hostile snapshot) is cut so that no pattern can run long on it.
        matched = params["pattern"].value.search(text[:MAX_PATTERN_TEXT])
        return Verdict(PASS if matched else FAIL, labels.get(text, text))

    def expected(self, params):
        return "matches /%s/" % params["pattern"].text


class EmptyComparison(Comparison):
    name = "empty"
    kinds = ("list",)
    summary = "the list (of problems) must be empty"
    params: Dict[str, Param] = {}

    def evaluate(self, value, params, labels):
        items = list(value or [])
        return Verdict(FAIL if items else PASS, "; ".join(str(i) for i in items) or "none")

    def expected(self, params):
        return "none"


class ExcludesComparison(Comparison):
    name = "excludes"
    kinds = ("list",)
    summary = "the list must hold none of 'forbidden' (fails) and none of 'discouraged' (warns)"
    params = {
        "forbidden": Param(_strings, "any of these present fails"),
        "discouraged": Param(_strings, "any of these present warns"),
    }
    details = ("found",)

    def check(self, params, enum_values):
        if "forbidden" not in params and "discouraged" not in params:
            raise ValueError("comparison 'excludes' needs 'forbidden' or 'discouraged'")

    def evaluate(self, value, params, labels):
        items = [str(i) for i in (value or [])]
        bad = [i for i in items if i in params.get("forbidden", [])]
        poor = [i for i in items if i in params.get("discouraged", [])]
        shown = ", ".join(labels.get(i, i) for i in items) or "none"
        found = ", ".join(bad + poor) or "none"
        status = FAIL if bad else WARN if poor else PASS
        return Verdict(status, shown, {"found": found})

    def expected(self, params):
        listed = params.get("forbidden", []) + params.get("discouraged", [])
        return "none of: %s" % ", ".join(listed)


# --- packages --------------------------------------------------------------------

def _module_name(name: str) -> bool:
    """Whether ``name`` is a dotted name of ASCII identifiers (a.b.c), as ``import`` takes it."""
    return name.isascii() and all(part.isidentifier() for part in name.split("."))


class PackageSpec(NamedTuple):
    """One package a rule needs: how to find it and how to install it."""

    name: str
    import_name: str
    dists: List[str]
    pip: str
    specifier: Any = None
    installed_by: str = ""  # a rule whose fix installs this package when it fails (torch and torchvision: torch.cuda)
    why_optional: str = ""  # what a recommended package adds, told when it is missing ("only adds the GFLOPs figure")
    why_pinned: str = ""  # what breaks without the version its pip requirement pins ("np.trapz is gone in 2.4")
    marker: str = ""  # a PEP 508 environment marker: checked only where it holds for the job's interpreter
    stand_in: str = ""  # why ``pip`` installs another distribution of the same module than the one named

    def probe_request(self) -> Dict[str, Any]:
        """What the Python probe looks up; an empty import name: found by its distribution alone (a requirements
        file names distributions, whose modules may be called anything)."""
        return {"name": self.name, "import": self.import_name or None, "dists": self.dists}

    def applies(self, environment: Optional[Mapping[str, str]]) -> bool:
        """Whether the marker holds for the job's interpreter (``environment``: PEP 508's names, as far as the facts
        say; a marker that cannot be evaluated applies, so nothing is skipped by mistake)."""
        if not self.marker:
            return True
        from packaging.markers import Marker

        try:
            return Marker(self.marker).evaluate(dict(environment or {}))
        except Exception:
            return True


def parse_requirement(text: str, known: Mapping[str, Mapping[str, Any]]) -> PackageSpec:
    name, extras, specifier = package_index.split_requirement(text)
    if extras:
        raise ValueError("%r: extras (%s) are not checked; name the package and its version only" % (text, extras))
    spec_text = str(specifier)
    if not spec_text:
        specifier = None
    info = known.get(name, {})
    import_name = info.get("import")
    if import_name is None:
        import_name = name.lower().replace("-", "_")
    if import_name is False:
        import_name = ""  # found by its distribution alone
    elif not isinstance(import_name, str) or not _module_name(import_name):
        raise ValueError("%r: the module to look for, %r, is not a Python module name (a.b.c); set packages.%s.import"
                         % (text, import_name, name))
    dists = list(info.get("dists") or [name])
    pip = info.get("pip") or name + (spec_text or "")
    stand_in = ""
    group = distributions.same_module(name) if not info.get("dists") else None
    if group is not None:  # any of the group meets it; a fix installs the group's own choice, never a second
        dists += [dist for dist in group.dists if dist not in dists]
        if package_index.canonical(group.install) != package_index.canonical(name):
            pip = group.install + (spec_text or "")
            stand_in = "%s stands in for %s: %s" % (group.install, name, group.why)
    return PackageSpec(name, import_name, dists, pip, specifier, info.get("installed_by") or "",
                       info.get("why_optional") or "", info.get("why_pinned") or "", info.get("marker") or "",
                       stand_in)


def _installed_elsewhere(specs: List[PackageSpec]) -> Optional[str]:
    """``torch and torchvision: the fix of torch.cuda installs them (...)``, one clause per installing rule."""
    by_rule: Dict[str, List[str]] = {}
    for spec in specs:
        by_rule.setdefault(spec.installed_by, []).append(spec.name)
    return "; ".join("%s: the fix of %s installs %s (the build that runs here)"
                     % (" and ".join(names), rule, "them" if len(names) > 1 else "it")
                     for rule, names in by_rule.items()) or None


_PACKAGE_KEYS = {"import", "dists", "pip", "installed_by", "why_optional", "why_pinned", "marker"}


def _package_table(raw: Any) -> Dict[str, Dict[str, Any]]:
    if not isinstance(raw, dict):
        raise ValueError("'packages' must be a table of package name -> {import, dists, pip}")
    for name, info in raw.items():
        if not isinstance(info, dict):
            raise ValueError("packages.%s must be a table with 'import', 'dists' and/or 'pip'" % name)
        unknown = set(info) - _PACKAGE_KEYS
        if unknown:
            raise ValueError("packages.%s: unknown key(s) %s (known: %s)" % (name, ", ".join(sorted(unknown)),
                                                                           ", ".join(sorted(_PACKAGE_KEYS))))
        if "dists" in info:
            info["dists"] = _strings(info["dists"])
        if not isinstance(info.get("installed_by", ""), str):
            raise ValueError("packages.%s.installed_by must be a rule id" % name)
        if not isinstance(info.get("why_optional", ""), str):
            raise ValueError("packages.%s.why_optional must be text (what the package adds)" % name)
        if not isinstance(info.get("why_pinned", ""), str):
            raise ValueError("packages.%s.why_pinned must be text (what breaks without the pinned version)" % name)
        if info.get("marker"):
            from packaging.markers import InvalidMarker, Marker

            try:
                Marker(str(info["marker"]))
            except InvalidMarker as exc:
                raise ValueError("packages.%s.marker is not a PEP 508 marker: %s" % (name, exc))
    return raw


def _imposed(spec: PackageSpec, installed: Mapping[str, str]) -> PackageSpec:
    """``spec`` with the pins that installed releases of other packages impose on it (numpy<2 beside torch<2.3)."""
    extra = distributions.pins_with(spec.dists[0] if spec.dists else spec.name, installed)
    if not extra or spec.installed_by:
        return spec
    specifier = spec.specifier if spec.specifier is not None else SpecifierSet()
    for rule in extra:
        specifier &= package_index.split_requirement(rule.pin)[2]
    pip_name = package_index.split_requirement(spec.pip)[0]
    pip_specifier = package_index.split_requirement(spec.pip)[2]
    for rule in extra:
        pip_specifier &= package_index.split_requirement(rule.pin)[2]
    why = "; ".join([spec.why_pinned] * bool(spec.why_pinned) + [rule.why for rule in extra])
    return spec._replace(specifier=specifier, pip=pip_name + str(pip_specifier), why_pinned=why)


def _wheel_platform(environment: Optional[Mapping[str, str]]) -> Optional[str]:
    """The wheel data's platform name for the job's interpreter (linux_x86_64, ...); None when not known."""
    environment = environment or {}
    system, machine = environment.get("sys_platform", ""), environment.get("platform_machine", "").lower()
    if system == "linux" and machine in ("x86_64", "amd64"):
        return "linux_x86_64"
    if system == "linux" and machine in ("aarch64", "arm64"):
        return "linux_aarch64"
    return "windows" if system == "win32" else None


class PresentComparison(Comparison):
    name = "present"
    kinds = ("packages",)
    summary = "every package in 'required' must be importable (fails), every one in 'recommended' too (warns)"
    params = {
        "required": Param(_strings, "packages that must be present (name, optionally with a version: numpy>=1.18)"),
        "recommended": Param(_strings, "packages whose absence warns"),
        "packages": Param(_package_table, "how to find and install packages whose import or pip name differs"),
    }
    # missing: not installed or not importable; mismatched: installed at a version the pin excludes (only a
    # version to change, never "missing"); missing_pip: what pip installs for both, where preflight's own
    # fixes do not (installed_by); installed_by: those others, with the rule whose fix installs them.
    details = ("missing", "mismatched", "missing_pip", "missing_no_deps", "installed_by", "missing_required",
               "missing_recommended", "optional", "pins_why", "stand_ins", "met_by")

    def check(self, params, enum_values):
        if not params.get("required") and not params.get("recommended"):
            raise ValueError("comparison 'present' needs 'required' or 'recommended'")
        for spec in self.specs(params):  # raises ValueError on a bad name
            del spec

    def specs(self, params) -> List[PackageSpec]:
        known = params.get("packages", {})
        names = params.get("required", []) + params.get("recommended", [])
        return [parse_requirement(text, known) for text in names]

    def prepare(self, params):
        known = params.get("packages", {})
        return dict(params, required_specs=[parse_requirement(t, known) for t in params.get("required", [])],
                    recommended_specs=[parse_requirement(t, known) for t in params.get("recommended", [])])

    def _problem(self, spec: PackageSpec, found: Optional[Mapping[str, Any]]) -> Optional[Tuple[str, str]]:
        """None when ``spec`` is met; else ("absent" or "mismatched", what is wrong in words)."""
        if found and not spec.import_name:  # by its distribution alone: installed is enough
            found = dict(found, importable=found.get("version") is not None)
        if not found or not found.get("importable"):
            if found and found.get("version"):
                return "absent", "%s %s is installed but module %r cannot be imported" % (
                    found.get("dist") or spec.name, found["version"], spec.import_name)
            return "absent", "%s is missing" % spec.name
        version = found.get("version")
        if spec.specifier is not None and version is not None:
            try:
                if not spec.specifier.contains(Version(version), prereleases=True):
                    return "mismatched", "%s %s does not satisfy %s" % (spec.name, version, spec.specifier)
            except InvalidVersion:
                return None
        return None

    def evaluate(self, value, params, labels):
        value = value or {}
        environment = value.get(ENVIRONMENT)
        required = [s for s in params["required_specs"] if s.applies(environment)]
        recommended = [s for s in params["recommended_specs"] if s.applies(environment)]
        unprobed = [s.name for s in required + recommended if s.name not in value]
        if unprobed:
            return Verdict(ERROR, "not probed", {"problem": "the facts do not cover %s (saved before this rule listed them?)"
                                                             % ", ".join(unprobed)})
        recommended_ids = {id(s) for s in recommended}
        installed = {package_index.canonical(found.get("dist") or name): str(found["version"])
                     for name, found in value.items() if isinstance(found, dict) and found.get("version")}
        required = [_imposed(s, installed) for s in required]
        recommended = [_imposed(s, installed) for s in recommended]
        bad_required = [(s, self._problem(s, value.get(s.name))) for s in required]
        bad_recommended = [(s, self._problem(s, value.get(s.name))) for s in recommended]
        bad_required = [(s, p) for s, p in bad_required if p]
        bad_recommended = [(s, p) for s, p in bad_recommended if p]
        missing = bad_required + bad_recommended
        # A package both required and recommended (Pillow, and Pillow<10 for the plots) and absent is told once, as
        # required; its install line merges both into one requirement, which keeps the bare one where the
        # recommended pin has no wheel (pip_commands.install_line).
        absent_required = {s.name for s, (kind, _) in bad_required if kind == "absent"}
        told = [(s, p) for s, p in bad_recommended if not (p[0] == "absent" and s.name in absent_required)]
        elsewhere = [s for s, _ in missing if s.installed_by]
        line = pip_commands.install_line(
            [pip_commands.Wanted(s.pip, id(s) in recommended_ids, s.why_pinned) for s, _ in missing if not s.installed_by],
            (environment or {}).get("python_version"), _wheel_platform(environment))
        met_by = ["%s is met by %s %s (%s)" % (s.name, found["dist"], found.get("version") or "",
                                                distributions.same_module(s.name).why)
                  for s in required + recommended
                  for found in [value.get(s.name) or {}]
                  if distributions.same_module(s.name) and found.get("dist")
                  and package_index.canonical(found["dist"]) != package_index.canonical(s.name)]
        details = {
            "missing": ", ".join(s.name for s, (kind, _) in bad_required + told if kind == "absent") or None,
            "mismatched": "; ".join(words for _, (kind, words) in missing if kind == "mismatched") or None,
            "missing_pip": " ".join(_shell_quote(r) for r in line.install) or None,
            "missing_no_deps": " ".join(_shell_quote(r) for r in line.no_deps) or None,
            "installed_by": _installed_elsewhere(elsewhere),
            "missing_required": ", ".join(s.name for s, _ in bad_required) or "none",
            "missing_recommended": ", ".join(s.name for s, _ in told) or "none",
            "optional": "; ".join("%s (%s)" % (s.name, s.why_optional) if s.why_optional else s.name
                                  for s, _ in told) or None,
            "pins_why": "; ".join(line.reasons) or None,
            "stand_ins": "; ".join(dict.fromkeys(s.stand_in for s, _ in missing if s.stand_in and not s.installed_by))
                         or None,
            "met_by": "; ".join(met_by) or None,
        }
        if not missing:
            met = "; %s" % details["met_by"] if details["met_by"] else ""
            return Verdict(PASS, "all %d present%s" % (len(required) + len(recommended), met), details)
        parts = [p for _, (_, p) in bad_required] + ["%s (optional)" % p for _, (_, p) in told]
        return Verdict(FAIL if bad_required else WARN, "; ".join(parts), details)

    def expected(self, params):
        text = "installed: %s" % ", ".join(params.get("required", [])) if params.get("required") else ""
        if params.get("recommended"):
            optional = "recommended: %s" % ", ".join(params["recommended"])
            text = "%s (%s)" % (text, optional) if text else optional
        return text


COMPARISONS: Dict[str, Comparison] = {c.name: c for c in [
    VersionComparison(), NumberComparison(), BytesComparison(), BoolComparison(), InComparison(),
    PatternComparison(), EmptyComparison(), ExcludesComparison(), PresentComparison(),
]}

