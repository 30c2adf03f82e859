"""Rules, as loaded from rule files."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from preflight.engine.compare import Comparison, param_text, value_text
from preflight.engine.fix import Fix
from preflight.facts.registry import Fact

SEVERITIES = ("error", "warning", "info")
PROFILES = ("train", "inference", "node")


class Rule:
    def __init__(self, id: str, title: str, severity: str, profiles: Tuple[str, ...], when: Tuple[str, ...],
                 fact: Fact, comparison: Comparison, raw_params: Dict[str, Any],
                 profile_params: Dict[str, Dict[str, Any]], message: Optional[str], pass_message: Optional[str],
                 labels: Dict[str, str],
                 fix: Optional[Fix], fixes_by_value: Dict[str, Fix], why: str, source: str, origin: str) -> None:
        self.id = id
        self.title = title
        self.severity = severity
        self.profiles = profiles
        self.when = when
        self.fact = fact
        self.comparison = comparison
        self.raw_params = raw_params            # as written in the file
        self.profile_params = profile_params    # [rule.profile.NAME] overrides
        self.settings: Dict[str, Any] = {}      # --set overrides, strongest
        self.message = message
        self.pass_message = pass_message
        self.labels = labels
        self.fix = fix
        self.fixes_by_value = fixes_by_value
        self.why = why
        self.source = source
        self.origin = origin

    @property
    def per_gpu(self) -> bool:
        return self.fact.per_gpu

    def conditions(self) -> Tuple[str, ...]:
        seen: List[str] = []
        for name in self.fact.implies + self.when:
            if name not in seen:
                seen.append(name)
        return tuple(seen)

    def raw_params_for(self, profile: Optional[str]) -> Dict[str, Any]:
        merged = dict(self.raw_params)
        if profile:
            merged.update({k: v for k, v in self.profile_params.get(profile, {}).items() if k != "severity"})
        merged.update({k: v for k, v in self.settings.items() if k != "severity"})
        return merged

    def severity_for(self, profile: Optional[str]) -> str:
        if "severity" in self.settings:
            return self.settings["severity"]
        return self.profile_params.get(profile or "", {}).get("severity", self.severity)

    def params_for(self, profile: Optional[str]) -> Tuple[Dict[str, Any], Dict[str, str]]:
        """Parsed parameters and how each was written, for one profile.

        Raises ValueError naming the key whose value cannot be parsed.
        """
        raw = self.raw_params_for(profile)
        parsed = {}
        for key, value in raw.items():
            try:
                parsed[key] = self.comparison.parse_param(key, value)
            except ValueError as exc:
                raise ValueError("'%s': %s" % (key, exc))
        # --set min above the file's recommended: the user raised the floor; the warning tier no longer applies.
        if "min" in self.settings and "recommended" not in self.settings and "recommended" in parsed \
                and parsed["recommended"] < parsed["min"]:
            del parsed["recommended"], raw["recommended"]
        return parsed, {key: param_text(value) for key, value in raw.items()}

    def fix_for(self, observed: Any) -> Optional[Fix]:
        if observed is not None and value_text(observed) in self.fixes_by_value:
            return self.fixes_by_value[value_text(observed)]
        return self.fix
