"""The site configuration applied to a command's options: what the file says here, under what the command line says."""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING, Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from preflight.commands.options import CheckOptions
from preflight.config.settings import SETTINGS
from preflight.errors import PreflightError

if TYPE_CHECKING:
    from preflight.config import site_config
    from preflight.engine import loader

# Where the site configuration is looked for when neither --config nor PREFLIGHT_CONFIG names one.
SYSTEM_CONFIG = "/etc/preflight/config.toml"
ENVIRONMENT_VARIABLE = "PREFLIGHT_CONFIG"



class Applied(NamedTuple):
    """The options to run with, how the configuration contributed, and NVML facts probed to match ``gpus``."""

    options: CheckOptions
    config: Optional["site_config.Config"]
    effective: Optional["site_config.Effective"]
    early_facts: Optional[Dict[str, Any]]


def locate(explicit: Optional[str], environ) -> Optional[str]:
    """--config, else $PREFLIGHT_CONFIG, else the system file when it exists; None: no configuration."""
    if explicit:
        return explicit
    if environ.get(ENVIRONMENT_VARIABLE):
        return environ[ENVIRONMENT_VARIABLE]
    return SYSTEM_CONFIG if os.path.exists(SYSTEM_CONFIG) else None


def host_name() -> str:
    return socket.gethostname().split(".")[0]


def target(options: CheckOptions, node=None, gpus: Optional[Tuple[str, ...]] = None,
           host: Optional[str] = None) -> "site_config.Target":
    """This machine as [[match]] sees it: the Slurm node being admitted, else the job's partition from the environment."""
    from preflight.config import site_config

    if node is not None:
        return site_config.Target(host or node.name, gpus, node.partitions, node.features)
    partition = os.environ.get("SLURM_JOB_PARTITION")
    partitions = tuple(p for p in partition.split(",") if p) if partition else None
    return site_config.Target(host or host_name(), gpus, partitions, None)


def gpu_names(snapshot: Dict[str, Any]) -> Tuple[str, ...]:
    """The GPU names a [[match]] gpus selector is matched against: every GPU of the machine."""
    from preflight import inventory

    return tuple(gpu.get("name") or "" for gpu in inventory.machine_gpus(snapshot))


# The commands that admit nodes or start jobs unattended, often as root: an unsafe configuration is refused.
STRICT_COMMANDS = ("slurm", "exec", "serve")


def read(path: Optional[str], options: CheckOptions, warn=None) -> "site_config.Config":
    """The configuration at ``path``: refused when others could change it under slurm, exec and serve (they act
    on what it says, unattended), warned about elsewhere."""
    from preflight.config import site_config

    if path is not None:
        problem = site_config.permission_problem(path)
        if problem and options.command in STRICT_COMMANDS:
            raise site_config.UnsafeConfig(
                "configuration file %s: %s; preflight %s does not act on a configuration others could change"
                % (path, problem, options.command), "keep the site configuration in a file only root can change, "
                "in a folder only root can change (ls -l %s shows its owner and mode)" % path)
        if problem and warn:
            warn("configuration file %s: %s (preflight slurm, exec and serve refuse it; keep it in a file and a "
                 "folder only root can change)" % (path, problem))
    return site_config.load(path)


def apply(options: CheckOptions, node=None, warn=None, here: "Optional[site_config.Target]" = None,
          config: "Optional[site_config.Config]" = None) -> Applied:
    """Read the configuration (or take ``config``, already read) and merge what applies under the command line's
    own options. It applies to ``here`` when given (a snapshot's host and GPUs), else to this machine or the Slurm
    ``node``: its GPU names then come from one NVML probe (or the saved snapshot), reused by the check."""
    if config is None:
        path = locate(options.config, os.environ)
        if path is None:
            return Applied(options, None, None, None)
        config = read(path, options, warn)
    if not config.sections:
        return Applied(options, config, None, None)
    from preflight.config import site_config

    early = None
    if here is None:
        gpus = None
        if site_config.needs_gpus(config):
            early, gpus = machine_gpus(options)
        here = target(options, node, gpus)
    effective = site_config.effective(config, here)
    return Applied(merged(options, effective), config, effective, early)


def merged(options: CheckOptions, effective: "site_config.Effective") -> CheckOptions:
    """The options with what the configuration says for one target, under what the command line set."""

    changes: Dict[str, Any] = {}
    for key, setting in SETTINGS.items():
        if setting.accumulates:  # the file's first, then the command line's
            changes[setting.field] = [item for item, _ in _items(effective, key)] + list(getattr(options, setting.field))
        elif key in effective.values and setting.field not in options.given:
            changes[setting.field] = effective.values[key]
    return options.replace(**changes)


def _items(effective: "Optional[site_config.Effective]", key: str) -> "List[Tuple[str, site_config.Origin]]":
    """The items the file gives an accumulating setting (set, rules), each with where it was set."""
    if effective is None:
        return []
    return effective.set_items if key == "set" else effective.rules


def machine_gpus(options: CheckOptions):
    """The GPU names a `gpus` selector matches: from the saved snapshot, else one NVML probe (reused later)."""
    if options.facts_file:
        from preflight.facts import snapshot as snapshot_file

        return None, gpu_names(snapshot_file.load(options.facts_file))
    from preflight.commands import common
    from preflight.facts import collect

    facts = collect.collect({"nvml"}, common.collect_options(options.replace(python=None), []))
    return facts, gpu_names(facts)


def validate(applied: Applied, ruleset: "loader.RuleSet") -> None:
    """Every section of the configuration, whether it applies here or not, checked against the rules: the rule ids
    and settings of ``set``, the ids of ``select`` and ``ignore``; all problems at once, each at its place."""
    config = applied.config
    if config is None or not config.sections:
        return
    from preflight.config import site_config

    other_rules = [site_config.rule_path(config.path or "", path) for section, why_not in
                   (applied.effective.applied if applied.effective else []) if why_not
                   for path in section.settings.get("rules", ())]
    if other_rules:  # rule files of sections for other nodes may define the ids those sections name
        from preflight.engine import loader

        ruleset = loader.load(list(applied.options.rules_paths) + other_rules, capacity=needs_capacity(config))
    error = site_config.combined(problems(config, ruleset, (applied.options.profile,)))
    if error is not None:
        raise error


def needs_capacity(config: "Optional[site_config.Config]") -> bool:
    """Whether a section names workloads (fit labels) or catalog GPUs (Slurm GPU types): checked against the
    capacity model and the GPU catalog."""
    return config is not None and any(key in section.settings for section in config.sections
                                      for key in ("fit_labels", "slurm_gpu_types"))


def problems(config: "site_config.Config", ruleset: "loader.RuleSet", profiles: Sequence[str],
             warn: common.Warn = None) -> "List[site_config.ConfigError]":
    """What is wrong with the rule ids and settings the configuration's sections name, in file order; a ``set``
    is checked under the section's own profile, else under each of ``profiles``. A renamed or retired id is not
    wrong: ``warn`` is told where it is and what to write instead."""
    from preflight.config import site_config
    from preflight.engine import selection

    found: List[site_config.ConfigError] = []
    for section in config.sections:
        section_profiles = (section.settings["profile"],) if "profile" in section.settings else profiles
        for item in section.settings.get("set", ()):
            place = _place(config, section, "set")
            try:
                for number, profile in enumerate(section_profiles):
                    selection.parse_settings(ruleset, [item], profile, warn if number == 0 else None, place)
            except PreflightError as exc:
                found.append(site_config.ConfigError(exc.message, exc.hint))
        # Items that name a workload (fit_labels: WORKLOAD:TASK:IMG) or a catalog GPU (slurm_gpu_types: TYPE=GPU).
        for key, named, known, problem, listed in (
                ("fit_labels", lambda item: item.split(":")[0], ruleset.workloads, "unknown workload", "workloads"),
                ("slurm_gpu_types", lambda item: item.split("=")[1], ruleset.gpus, "not a catalog GPU id",
                 "catalog GPU ids")):
            unknown = [item for item in section.settings.get(key, ()) if known and named(item) not in known]
            if unknown:
                found.append(site_config.ConfigError("%s: %s in %s" % (
                    section.origin(config.path or "", key).location, problem, ", ".join(unknown)),
                    "%s: %s" % (listed, ", ".join(sorted(known)))))
        for key in ("select", "ignore"):
            if key in section.settings:
                try:
                    selection.check_selectors(ruleset, list(section.settings[key]), _place(config, section, key), warn)
                except PreflightError as exc:
                    found.append(site_config.ConfigError(exc.message, exc.hint))
    return found


def _place(config: "site_config.Config", section: "site_config.Section", key: str) -> str:
    """How a message names an item of ``key`` in ``section``: the file, line and key, then the item."""
    return section.origin(config.path or "", key).location.replace("%", "%%") + ": %s"


def origins(applied: Applied) -> List[Tuple[str, str, str]]:
    """(setting, value, where it came from) for every setting, for `preflight config show`."""
    from preflight.config import site_config

    options, effective = applied.options, applied.effective
    rows: List[Tuple[str, str, str]] = []
    for key, setting in SETTINGS.items():
        value = getattr(options, setting.field)
        if setting.accumulates:
            from_file = _items(effective, key)
            rows += [(key, item, origin.text) for item, origin in from_file]
            rows += [(key, item, site_config.COMMAND_LINE.text) for item in value[len(from_file):]]
            continue
        if setting.field in options.given:
            where = site_config.COMMAND_LINE.text
        elif effective is not None and key in effective.origins:
            where = effective.origins[key].text
        else:
            where = site_config.DEFAULT.text
        rows.append((key, setting.show(value), where))
    return rows
