"""preflight rules and preflight explain: the rules (and the failure catalog) as a list, a reference page, or one in full."""

from __future__ import annotations

from typing import List, Optional

import click

from preflight.commands.click_options import complete, format_names, setting, warn
from preflight.engine import loader
from preflight.engine.model import PROFILES
from preflight.errors import ExitCode, PreflightError
from preflight.files.output import emit


def _in_profile(ruleset, profile: Optional[str]):
    return [rule for rule in ruleset.rules.values() if profile is None or profile in rule.profiles]


def list_rules(rules_paths: List[str], profile: Optional[str], output_format: str) -> int:
    from preflight.render import formats
    from preflight.render.rules_doc import RuleList

    # The reference page: every rule (the active test's too), facts, and the failure catalog; the lists show what
    # check runs.
    reference = output_format == "markdown"
    ruleset = loader.load(rules_paths, failures=reference, smoke=reference)
    listing = RuleList(_in_profile(ruleset, profile), list(ruleset.failures.values()), list(ruleset.families.values()))
    emit(formats.render("rules", listing, output_format))
    return ExitCode.OK


def explain(rule_id: str, rules_paths: List[str], warn=None) -> int:
    from preflight.engine import lifecycle
    from preflight.render import rules_doc

    ruleset = loader.load(rules_paths, failures=True, smoke=True)
    known = set(ruleset.rules) | set(ruleset.failures) | set(ruleset.families)
    if rule_id.split("/")[0] not in known:
        now, note = lifecycle.resolve(ruleset, rule_id)
        if note:
            if now is None:
                raise PreflightError(note, "'preflight rules' lists every "
                                     "rule id, 'preflight diagnose --list' every known failure")
            if warn is not None:
                warn(note)
            rule_id = now
    if rule_id in ruleset.failures:
        emit(rules_doc.explain_failure(ruleset.failures[rule_id]))
    elif rule_id.split("/")[0] in ruleset.families:
        family_id, _, label = rule_id.partition("/")
        family = ruleset.families[family_id]
        emit(rules_doc.explain_family(family, family.row_named(label) if label else None))
    else:
        emit(rules_doc.explain(ruleset.get(rule_id, also=list(ruleset.failures) + list(ruleset.families))))
    return ExitCode.OK


def list_failures(rules_paths: List[str]) -> int:
    from preflight.render import rules_doc

    ruleset = loader.load(rules_paths, failures=True)
    emit(rules_doc.failures_text(list(ruleset.failures.values()), list(ruleset.families.values())))
    return ExitCode.OK


# --- the command line ----------------------------------------------------------------------------------------

def build() -> click.Command:
    @click.command("rules")
    @setting("profile", type=click.Choice(PROFILES), metavar=None, help="Only the rules of this profile.")
    @click.option("--format", "output_format", type=click.Choice(format_names("rules")), default="text",
                  show_default=True)
    @setting("rules", help="Add or override rules (repeatable).")
    def rules_command(profile, output_format, rules_paths) -> int:
        """List the rules (the defaults plus any --rules)."""
        return list_rules(list(rules_paths), profile, output_format)
    return rules_command


def build_explain() -> click.Command:
    @click.command("explain")
    @click.argument("rule_id", shell_complete=complete("explain"))
    @setting("rules", help="Add or override rules (repeatable).")
    def explain_command(rule_id, rules_paths) -> int:
        """Show one rule or known failure in full: what it checks or recognises, why, its source and its fix."""
        return explain(rule_id, list(rules_paths), warn)
    return explain_command
