"""What each command does, as plain functions with explicit arguments.

The CLI only parses options and prints; tests call these directly.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

from preflight.engine import loader, selection
from preflight.engine.evaluate import evaluate, probes_needed
from preflight.engine.model import PROFILES, Rule
from preflight.errors import PreflightError
from preflight.facts import collect, snapshot as snapshot_file
from preflight.report import Report


class CheckOptions:
    def __init__(self, profile: str = "train", rules_paths: Optional[List[str]] = None,
                 select: Optional[List[str]] = None, ignore: Optional[List[str]] = None,
                 settings: Optional[List[str]] = None, facts_file: Optional[str] = None,
                 python: Optional[str] = None, nvml_fixture: Optional[str] = None, timeout: float = 10.0,
                 use_cache: bool = True, strict: bool = False, environ=None) -> None:
        if profile not in PROFILES:
            raise PreflightError("unknown profile %r" % profile, "profiles: %s" % ", ".join(PROFILES))
        if not timeout > 0:
            raise PreflightError("--timeout must be more than 0 seconds, got %s" % timeout)
        if facts_file and (python or nvml_fixture):
            given = "--python" if python else "--nvml-fixture (or PREFLIGHT_NVML_FIXTURE)"
            raise PreflightError("--facts evaluates a saved snapshot without probing; %s has nothing to probe" % given,
                                 "give one or the other")
        self.profile = profile
        self.rules_paths = rules_paths or []
        self.select = select or []
        self.ignore = ignore or []
        self.settings = settings or []
        self.facts_file = facts_file
        self.python = python
        self.nvml_fixture = nvml_fixture
        self.timeout = timeout
        self.use_cache = use_cache
        self.strict = strict
        self.environ = environ


def load_rules(rules_paths: List[str], warn=None) -> loader.RuleSet:
    ruleset = loader.load(rules_paths)
    for warning in ruleset.warnings:
        if warn:
            warn(warning)
    return ruleset


def choose_rules(options: CheckOptions, warn=None) -> List[Rule]:
    ruleset = load_rules(options.rules_paths, warn)
    selection.apply_settings(ruleset, options.settings, options.profile)
    return selection.choose(ruleset, options.profile, options.select, options.ignore)


def _collect_options(options: CheckOptions, packages: List[Dict[str, Any]]) -> collect.Options:
    python = None
    if options.python:
        from preflight.probes.python_env import resolve_interpreter

        python = resolve_interpreter(options.python)
    return collect.Options(timeout=options.timeout, python=python, nvml_fixture=options.nvml_fixture,
                           packages=packages, use_cache=options.use_cache, environ=options.environ)


def check(options: CheckOptions, warn=None) -> Report:
    started = time.monotonic()
    rules = choose_rules(options, warn)
    if options.facts_file:
        facts = snapshot_file.load(options.facts_file)
        source = "file %s" % options.facts_file
    else:
        packages = selection.required_packages(rules, options.profile)
        facts = collect.collect(probes_needed(rules), _collect_options(options, packages))
        source = facts["source"]
    results = evaluate(rules, facts, options.profile)
    return Report(options.profile, results, strict=options.strict, facts_source=source,
                  seconds=time.monotonic() - started)


def facts(options: CheckOptions, warn=None) -> Dict[str, Any]:
    """A full snapshot: every probe, and every package any profile's rules list."""
    ruleset = load_rules(options.rules_paths, warn)
    packages = selection.required_packages(list(ruleset.rules.values()), None)
    return collect.collect(set(collect.PROBES), _collect_options(options, packages))
