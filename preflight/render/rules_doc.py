"""Rules for people: the list (``preflight rules``), one rule in full
(``preflight explain``), and the reference page docs/rules.md, all from the
same loaded rule files."""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Sequence

from preflight.engine.fix import Fix
from preflight.engine.model import Rule
from preflight.facts.conditions import CONDITIONS
from preflight.facts.registry import REGISTRY


def _params_text(rule: Rule, profile: Optional[str]) -> str:
    return rule.resolve(profile).expected


def _profile_lines(rule: Rule) -> List[str]:
    """Each profile's thresholds, when the profiles differ at all."""
    if not any(profile in rule.profile_params for profile in rule.profiles):
        return []
    return ["%s: %s" % (profile, _params_text(rule, profile)) for profile in rule.profiles]


def _warn_only_text(rule: Rule) -> str:
    relaxed = rule.warn_only
    if relaxed is None:
        return ""
    return "in %s a failure only warns while %s is %s" % (
        ", ".join(relaxed.profiles), relaxed.fact.path, " or ".join(relaxed.values))


def rule_json(rule: Rule) -> Dict[str, Any]:
    return {
        "id": rule.id, "title": rule.title, "severity": rule.severity, "profiles": list(rule.profiles),
        "per_gpu": rule.per_gpu, "fact": rule.fact.path, "compare": rule.comparison.name,
        "expected": _params_text(rule, None),
        "expected_by_profile": {p: _params_text(rule, p) for p in rule.profiles},
        "when": list(rule.conditions()), "why": rule.why, "source": rule.source,
        "warn_only": _warn_only_text(rule) or None,
        "fix": _fix_json(rule.fix, {}) if rule.fix else None,
        "fixes": {value: _fix_json(fix, {}) for value, fix in rule.fixes_by_value.items()},
        "defined_in": rule.origin,
    }


def _common_case(values: Dict[str, Any]) -> Dict[str, Any]:
    """A fix shown on its own (explain, the reference page) reads as for the common case: Linux with apt on
    Ubuntu, a driver the user manages, a YOLOv9 run (the lines for other platforms are there for diagnose)."""
    from preflight.facts import platform

    return dict(platform.conditions({}, None), **values)


def _fix_json(fix: Fix, values: Dict[str, Any]) -> Dict[str, Any]:
    return dict(fix.render(_common_case(values)), id=fix.id)


class RuleList(NamedTuple):
    """What ``preflight rules`` renders: the rules of a profile (and, for the reference page, the known failures)."""

    rules: List[Rule]
    failures: Sequence[Any] = ()
    families: Sequence[Any] = ()

    def to_json(self) -> List[Dict[str, Any]]:
        return [rule_json(rule) for rule in self.rules]


def list_text(listing: RuleList) -> str:
    rules = listing.rules
    width = max([len(r.id) for r in rules] + [2])
    lines = ["%s  %-8s  %-22s  %s" % ("ID".ljust(width), "SEVERITY", "PROFILES", "TITLE")]
    for rule in rules:
        lines.append("%s  %-8s  %-22s  %s" % (rule.id.ljust(width), rule.severity, ",".join(rule.profiles),
                                              rule.title))
    return _printable(lines)


def _printable(lines: List[str]) -> str:
    """Rule files can be anyone's (--rules): their texts are shown, never acted on by the terminal."""
    from preflight.terminal import printable

    return "\n".join(printable(line) for line in lines)


def _fix_lines(fix: Fix, values: Dict[str, Any], indent: str) -> List[str]:
    from preflight.render.blocks import fix_lines

    return fix_lines(fix.render(_common_case(values)), indent, label="")


def explain(rule: Rule) -> str:
    values = {k: v for k, v in rule.resolve(None).texts().items() if k != "expected"}
    conditions = [CONDITIONS[name].description for name in rule.conditions()]
    lines = [
        "%s: %s" % (rule.id, rule.title),
        "",
        "  severity:  %s" % rule.severity,
        "  profiles:  %s" % ", ".join(rule.profiles),
        "  checks:    %s (%s)%s" % (rule.fact.path, rule.fact.description, ", per visible GPU" if rule.per_gpu else ""),
        "  compare:   %s: %s" % (rule.comparison.name, _params_text(rule, None)),
    ]
    lines += ["             %s" % line for line in _profile_lines(rule)]
    if conditions:
        lines.append("  applies:   when %s" % "; ".join(conditions))
    if rule.warn_only:
        lines.append("  relaxed:   %s" % _warn_only_text(rule))
    if rule.why:
        lines += ["", "  why:       %s" % rule.why]
    if rule.source:
        lines.append("  source:    %s" % rule.source)
    if rule.fix:
        lines += ["", "  fix:"] + _fix_lines(rule.fix, values, "    ")
    for value, fix in rule.fixes_by_value.items():
        lines += ["", "  fix when %s:" % rule.labels.get(value, value)] + _fix_lines(fix, values, "    ")
    lines += ["", "  defined in %s" % rule.origin]
    return _printable(lines)


def markdown(listing: RuleList) -> str:
    """docs/rules.md: generated, and kept true by a test."""
    return _rules_markdown(listing.rules) + failures_markdown(listing.failures) + families_markdown(listing.families)


def _rules_markdown(rules: List[Rule]) -> str:
    out = [
        "# Rules",
        "",
        "Generated by `preflight rules --format markdown`; do not edit by hand.",
        "",
        "| id | severity | profiles | checks | expected |",
        "|---|---|---|---|---|",
    ]
    for rule in rules:
        expected = _params_text(rule, None)
        extra = "; ".join(_profile_lines(rule))
        out.append("| `%s` | %s | %s | `%s`%s | %s%s |" % (
            rule.id, rule.severity, ", ".join(rule.profiles), rule.fact.path, " per GPU" if rule.per_gpu else "",
            expected.replace("|", "\\|"), " (%s)" % extra if extra else ""))
    for rule in rules:
        out += ["", "## `%s`: %s" % (rule.id, rule.title), ""]
        if rule.why:
            out += [rule.why, ""]
        conditions = [CONDITIONS[name].description for name in rule.conditions()]
        out.append("- checks `%s` (%s) with `%s`: %s" % (rule.fact.path, rule.fact.description,
                                                      rule.comparison.name, _params_text(rule, None)))
        for line in _profile_lines(rule):
            out.append("- profile %s" % line)
        if conditions:
            out.append("- applies when %s" % "; ".join(conditions))
        if rule.warn_only:
            out.append("- %s" % _warn_only_text(rule))
        if rule.source:
            out.append("- source: %s" % rule.source)
        fixes = ([("fix", rule.fix)] if rule.fix else []) + [
            ("fix when %s" % rule.labels.get(v, v), f) for v, f in rule.fixes_by_value.items()]
        for heading, fix in fixes:
            out.append("- %s: **%s**" % (heading, fix.title))
    out += ["", "# Facts", "", "| fact | kind | per GPU | what |", "|---|---|---|---|"]
    for fact in REGISTRY.values():
        kind = fact.kind + (" (%s)" % ", ".join(fact.values) if fact.values else "")
        out.append("| `%s` | %s | %s | %s |" % (fact.path, kind, "yes" if fact.per_gpu else "", fact.description))
    out += ["", "# Conditions (`when`)", "", "| name | holds when |", "|---|---|"]
    for condition in CONDITIONS.values():
        out.append("| `%s` | %s |" % (condition.name, condition.description))
    return "\n".join(out) + "\n"


def failures_text(failures, families=()) -> str:
    width = max([len(f.id) for f in list(failures) + list(families)] + [2])
    lines = ["%s  %-8s  %-28s  %s" % ("ID".ljust(width), "PRIORITY", "CAUGHT BEFOREHAND BY", "TITLE")]
    for failure in sorted(failures, key=lambda f: f.id):
        lines.append("%s  %-8d  %-28s  %s" % (failure.id.ljust(width), failure.priority,
                                               ",".join(failure.rules) or "-", failure.title))
    if families:
        lines += ["", "Families (recognised by structure; explained by a table of rules/knowledge/):",
                  "%s  %-8s  %s" % ("ID".ljust(width), "ROWS", "TABLE")]
        for family in sorted(families, key=lambda f: f.id):
            lines.append("%s  %-8d  %s" % (family.id.ljust(width), len(family.table.rows), family.table.path))
    return _printable(lines)


def explain_family(family, row=None) -> str:
    """A family; with ``row``, that row of its table as diagnose would report it."""
    if row is not None:
        finding = family.entry({}, row)
        lines = ["%s/%s: %s" % (family.id, family.hit_key({}, row).split("/", 1)[1], finding.title), ""]
        lines += ["  %-9s  %s" % (name + ":", " | ".join(map(str, value)) if isinstance(value, list) else value)
                  for name, value in row.items() if name != "when"]
        lines += ["", "  cause:     %s" % finding.cause]
        lines += _fix_lines(finding.fix, dict(finding.values), "  ")
        lines += ["", "  from %s (%s)" % (family.table.path, family.source)]
        return _printable(lines)
    lines = ["%s: a family of failures, explained by %s (%d rows)" % (family.id, family.table.path,
                                                                     len(family.table.rows)),
             "", "  recognises (preflight diagnose):"]
    lines += ["    %s" % (p.regex.pattern if p.regex else repr(p.anchor)) for p in family.patterns]
    lines += ["", "  looked up by: %s" % ", ".join(family.key),
              "  cause:     %s" % family.cause, "  source:    %s" % family.source]
    for line in family.undetermined:
        lines.append("  not determined: %s" % line)
    lines += _emitted_lines(family.emitted)
    lines += ["", "  defined in %s" % family.origin]
    return _printable(lines)


def families_markdown(families) -> str:
    if not families:
        return ""
    out = ["", "# Families of failures (`preflight diagnose`)", "",
           "Recognised by their structure and explained by a table of public data (rules/knowledge/), with less "
           "confidence than a known failure. Generated from rules/failures/families.toml.", "",
           "| id | recognises | table | rows | source |", "|---|---|---|---|---|"]
    for family in sorted(families, key=lambda f: f.id):
        anchors = "; ".join("`%s`" % p.anchor.replace("|", "\\|") for p in family.patterns)
        out.append("| `%s` | %s | `%s` | %d | %s |" % (family.id, anchors, family.table.name, len(family.table.rows),
                                                      family.source.replace("|", "\\|")))
    return "\n".join(out) + "\n"


def explain_failure(failure) -> str:
    lines = [
        "%s: %s" % (failure.id, failure.title),
        "",
        "  recognises (preflight diagnose):",
    ]
    for pattern in failure.patterns:
        lines.append("    %s" % (pattern.regex.pattern if pattern.regex else repr(pattern.anchor)))
    lines += ["", "  cause:     %s" % failure.cause, "  priority:  %d (higher: more likely the root cause)" % failure.priority]
    if failure.rules:
        lines.append("  caught beforehand by: %s" % ", ".join(failure.rules))
    if failure.supersedes:
        lines.append("  explains:  %s" % ", ".join(failure.supersedes))
    if failure.source:
        lines.append("  source:    %s" % failure.source)
    lines += _emitted_lines(failure.emitted)
    lines += ["", "  fix:"] + _fix_lines(failure.fix, dict(failure.values), "    ")
    lines += ["", "  defined in %s" % failure.origin]
    return _printable(lines)


def _emitted_lines(emitted) -> List[str]:
    """Each wording with the releases that print it and the file that writes it."""
    if not emitted:
        return []
    lines = ["", "  written by (each wording, the releases that print it):"]
    for emitter in emitted:
        lines += ["    %s:" % emitter.label(), "      %s" % emitter.says]
    return lines


def failures_markdown(failures) -> str:
    out = ["", "# Known failures (`preflight diagnose`)", "",
           "Generated from rules/failures/*.toml. Each entry names the check rules that catch it before a run.", "",
           "| id | priority | recognises | caught beforehand by | fix |", "|---|---|---|---|---|"]
    for failure in sorted(failures, key=lambda f: (-f.priority, f.id)):
        anchors = "; ".join("`%s`" % p.anchor.replace("|", "\\|") for p in failure.patterns)
        out.append("| `%s` | %d | %s | %s | %s |" % (failure.id, failure.priority, anchors,
                                                   ", ".join("`%s`" % r for r in failure.rules) or "-",
                                                   failure.fix.title))
    return "\n".join(out) + "\n"
