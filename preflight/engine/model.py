"""Rules, as loaded from rule files."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

from preflight.engine.compare import Comparison, text_of, value_text
from preflight.engine.fix import Fix
from preflight.facts.registry import Fact

SEVERITIES = ("error", "warning", "info")
PROFILES = ("train", "inference", "node")
DEFAULT_FIX_ORDER = 1000  # a rule that does not say comes after the default rules, in report order


class WarnOnly(NamedTuple):
    """``[rule.warn_only]``: in these profiles a failure only warns while ``fact`` is one of ``values``
    (the site minimum for the driver, when the environment's torch runs on this driver anyway)."""

    profiles: Tuple[str, ...]
    fact: Fact
    values: Tuple[str, ...]
    message: str


class Rule(NamedTuple):
    id: str
    title: str
    severity: str
    profiles: Tuple[str, ...]
    when: Tuple[str, ...]
    fact: Fact
    comparison: Comparison
    raw_params: Dict[str, Any]  # as written in the file
    profile_params: Dict[str, Dict[str, Any]]  # [rule.profile.NAME] overrides
    message: Optional[str]
    pass_message: Optional[str]
    labels: Dict[str, str]
    fix: Optional[Fix]
    fixes_by_value: Dict[str, Fix]
    why: str
    source: str
    origin: str
    examples: Tuple[Dict[str, Any], ...] = ()  # expected behaviour as data, replayed by the tests (see loader.EXAMPLE_KEYS)
    warn_only: Optional[WarnOnly] = None
    fix_order: int = DEFAULT_FIX_ORDER  # where its fix goes in "fix first": lower first (what the rest stands on)
    answers: Tuple[str, ...] = ()  # rules whose failure this rule's fix also answers, when both fail

    @property
    def per_gpu(self) -> bool:
        return self.fact.per_gpu

    def conditions(self) -> Tuple[str, ...]:
        seen: List[str] = []
        for name in self.fact.implies + self.when:
            if name not in seen:
                seen.append(name)
        return tuple(seen)

    def resolve(self, profile: Optional[str], settings: Optional[Mapping[str, str]] = None) -> "ResolvedRule":
        """This rule for one profile (None: as written) with ``--set`` settings, parsed and checked once.

        Raises ValueError naming the key whose value cannot be parsed or does not fit the others.
        """
        settings = settings or {}
        overrides = self.profile_params.get(profile or "", {})
        raw = dict(self.raw_params)
        raw.update({k: v for k, v in overrides.items() if k != "severity"})
        raw.update({k: v for k, v in settings.items() if k != "severity"})
        parsed: Dict[str, Any] = {}
        for key, value in raw.items():
            try:
                parsed[key] = self.comparison.parse_param(key, value)
            except ValueError as exc:
                raise ValueError("'%s': %s" % (key, exc))
        # --set min above the file's recommended: the user raised the floor; the warning tier no longer applies.
        if "min" in settings and "recommended" not in settings and "recommended" in parsed \
                and parsed["recommended"] < parsed["min"]:
            del parsed["recommended"]
        self.comparison.check(parsed, self.fact.values)
        severity = settings.get("severity") or overrides.get("severity") or self.severity
        params = self.comparison.prepare(parsed)
        return ResolvedRule(self, profile, severity, params, self.comparison.expected(params))

    def fix_for(self, observed: Any) -> Optional[Fix]:
        if observed is not None and value_text(observed) in self.fixes_by_value:
            return self.fixes_by_value[value_text(observed)]
        return self.fix


class ResolvedRule(NamedTuple):
    """A rule as it applies in one run: one profile, its thresholds parsed, ``--set`` applied. Immutable.

    Evaluation, ``explain``, the docs and planning read this; nothing re-merges
    or re-parses parameters later.
    """

    rule: Rule
    profile: Optional[str]
    severity: str
    params: Mapping[str, Any]
    expected: str

    @property
    def id(self) -> str:
        return self.rule.id

    @property
    def title(self) -> str:
        return self.rule.title

    @property
    def fact(self) -> Fact:
        return self.rule.fact

    @property
    def comparison(self) -> Comparison:
        return self.rule.comparison

    @property
    def per_gpu(self) -> bool:
        return self.rule.per_gpu

    def conditions(self) -> Tuple[str, ...]:
        return self.rule.conditions()

    @property
    def warn_only(self) -> Optional[WarnOnly]:
        """The rule's [rule.warn_only], when it applies to this profile."""
        relaxed = self.rule.warn_only
        return relaxed if relaxed is not None and self.profile in relaxed.profiles else None

    def texts(self) -> Dict[str, str]:
        """Each parameter as it was written, for messages and fixes ({min}, {expected}, ...)."""
        return {key: text_of(value) for key, value in self.params.items() if not key.endswith("_specs")}
