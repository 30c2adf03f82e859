"""What several commands share: rules loaded with their warnings and chosen, and facts from a file or from probing."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from preflight.commands.options import CheckOptions
from preflight.engine import loader
from preflight.facts import collect

Warn = Optional[Callable[[str], None]]


def load_rules(rules_paths: List[str], warn: Warn = None, **kinds) -> loader.RuleSet:
    ruleset = loader.load(rules_paths, **kinds)
    for warning in ruleset.warnings:
        if warn:
            warn(warning)
    return ruleset


def collect_options(options: CheckOptions, packages: List[Dict[str, Any]]) -> collect.Options:
    python = None
    if options.python:
        from preflight.probes.python_env import resolve_interpreter

        python = resolve_interpreter(options.python)
    return collect.Options(timeout=options.timeout, python=python, nvml_fixture=options.nvml_fixture,
                           packages=packages, use_cache=options.use_cache,
                           on_wait=tell_terminal, kernel_log=options.kernel_log)


def tell_terminal(line: str) -> None:
    """A progress line for a person watching (stderr is a terminal); nothing in logs or pipes."""
    import sys

    stream = sys.stderr
    try:
        if stream is not None and stream.isatty():
            stream.write(line + "\n")
            stream.flush()
    except (OSError, ValueError):
        pass


def snapshot(options: CheckOptions, probes: Set[str], packages: List[Dict[str, Any]],
             reuse: Optional[Dict[str, Any]] = None) -> Tuple[Dict[str, Any], str]:
    """(snapshot, where it came from): the saved file of --facts, else these probes run now (``reuse``: some
    already probed)."""
    if options.facts_file:
        from preflight.facts import snapshot as snapshot_file

        return snapshot_file.load(options.facts_file), "file %s" % options.facts_file
    facts = collect.collect(probes, collect_options(options, packages), reuse)
    return facts, facts["source"]
